//! The open connections of one listener, for code outside their own task or thread: the
//! HTTP watcher closes idle ones, and at shutdown every listener reaches all of its own.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

/// Connections registered by their handlers, each as a `T` of the listener's choosing.
#[derive(Debug)]
pub(crate) struct Registry<T> {
    inner: Mutex<Inner<T>>,
}

#[derive(Debug)]
struct Inner<T> {
    /// Set by [`Registry::close`]: nothing is added after it.
    closed: bool,
    next: u64,
    items: HashMap<u64, T>,
}

impl<T> Default for Registry<T> {
    fn default() -> Self {
        Registry {
            inner: Mutex::new(Inner {
                closed: false,
                next: 0,
                items: HashMap::new(),
            }),
        }
    }
}

impl<T> Registry<T> {
    fn lock(&self) -> MutexGuard<'_, Inner<T>> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Registers `item` until the returned guard is dropped, however its handler ends;
    /// `None` once the registry is closed (the caller then closes the connection).
    pub fn add(self: &Arc<Self>, item: T) -> Option<Registered<T>> {
        let mut inner = self.lock();
        if inner.closed {
            return None;
        }
        let id = inner.next;
        inner.next += 1;
        inner.items.insert(id, item);
        Some(Registered {
            registry: self.clone(),
            id,
        })
    }

    /// Calls `f` on every registered item.
    pub fn for_each(&self, f: impl FnMut(&mut T)) {
        self.lock().items.values_mut().for_each(f);
    }

    /// Closes the registry and calls `f` on every item still registered: the same lock
    /// covers both, so a connection is either refused by [`add`](Self::add) or seen here.
    pub fn close(&self, f: impl FnMut(&mut T)) {
        let mut inner = self.lock();
        inner.closed = true;
        inner.items.values_mut().for_each(f);
    }
}

/// A connection's place in a [`Registry`], left when dropped.
#[derive(Debug)]
pub(crate) struct Registered<T> {
    registry: Arc<Registry<T>>,
    id: u64,
}

impl<T> Drop for Registered<T> {
    fn drop(&mut self) {
        self.registry.lock().items.remove(&self.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn items_leave_on_drop_and_close_refuses_new_ones() {
        let registry = Arc::new(Registry::<u32>::default());
        let a = registry.add(1).unwrap();
        let b = registry.add(2).unwrap();
        drop(a);
        let mut seen = Vec::new();
        registry.for_each(|x| seen.push(*x));
        assert_eq!(seen, [2]);
        let mut closed = Vec::new();
        registry.close(|x| closed.push(*x));
        assert_eq!(closed, [2]);
        assert!(registry.add(3).is_none());
        drop(b);
        registry.for_each(|_| panic!("empty after the last guard"));
    }
}
