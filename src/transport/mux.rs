//! What the transports whose workers share one connection (`h2-mux`, `grpc-mux`) have in
//! common: the run's one connection in a slot with a generation, opened by whichever
//! worker finds the slot empty (under a lock, so that workers arriving together open one
//! connection, not one each), and dropped only by a worker whose call failed on that very
//! generation; plus, for the blocking engine, the one runtime thread that drives it.

use super::{CallError, Endpoint, Phases};
use std::net::SocketAddr;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Instant;

/// A run's one shared connection (or channel) `C`, kept in the run's
/// [`RunShared`](super::RunShared).
pub(super) struct Shared<C> {
    /// One worker thread for the blocking engine: it runs the connection's task while
    /// the workers' own threads block on it for their calls. Built on first use, so a run
    /// on the event loop (or of another transport) pays nothing.
    rt: OnceLock<Result<tokio::runtime::Runtime, String>>,
    /// The live connection and its generation.
    slot: tokio::sync::Mutex<Option<(C, u64)>>,
    /// The generation the next connection gets: a counter, not the slot's last value
    /// plus one, since a forgotten slot is empty and a new connection must not get the
    /// generation another worker is about to forget.
    next: AtomicU64,
}

impl<C> Default for Shared<C> {
    fn default() -> Self {
        Shared {
            rt: OnceLock::new(),
            slot: tokio::sync::Mutex::new(None),
            next: AtomicU64::new(0),
        }
    }
}

impl<C: Clone> Shared<C> {
    /// The blocking engine's runtime for this connection, its thread named `name`.
    pub(super) fn runtime(&self, name: &str) -> Result<&tokio::runtime::Runtime, CallError> {
        self.rt
            .get_or_init(|| {
                tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(1)
                    .thread_name(name)
                    .enable_all()
                    .build()
                    .map_err(|e| e.to_string())
            })
            .as_ref()
            .map_err(|_| CallError::Io)
    }

    /// A clone of the live connection and its generation, or a new one from `open` when
    /// the slot is empty or `live` says its connection has gone. `open` runs under the
    /// lock, on the runtime this runs on.
    pub(super) async fn get(
        &self,
        live: impl FnOnce(&C) -> bool,
        open: impl AsyncFnOnce() -> Result<C, CallError>,
    ) -> Result<(C, u64), CallError> {
        let mut slot = self.slot.lock().await;
        if let Some((c, g)) = &*slot
            && live(c)
        {
            return Ok((c.clone(), *g));
        }
        // Boxed: opening (lookup, connect, TLS) is a future of kilobytes, which every
        // call's future would otherwise carry, and move, on every call.
        let c = Box::pin(open()).await?;
        let generation = self.next.fetch_add(1, Relaxed);
        *slot = Some((c.clone(), generation));
        Ok((c, generation))
    }

    /// Drops the connection if it is still generation `failed`, the one a worker's call
    /// failed on; another worker may already have opened a new one.
    pub(super) async fn forget(&self, failed: u64) {
        Self::forget_in(&mut *self.slot.lock().await, failed);
    }

    /// As [`Shared::forget`], without waiting: for an event-loop task's `reset`. The lock
    /// is busy only while another task opens a new connection, whose generation must stay.
    pub(super) fn try_forget(&self, failed: u64) {
        if let Ok(mut slot) = self.slot.try_lock() {
            Self::forget_in(&mut slot, failed);
        }
    }

    fn forget_in(slot: &mut Option<(C, u64)>, failed: u64) {
        if slot.as_ref().is_some_and(|(_, g)| *g == failed) {
            *slot = None;
        }
    }
}

/// Looks the HTTP port's address up on a blocking thread: the resolver blocks on a
/// runtime of its own, which must not start inside the one a shared connection's opener
/// runs on. Its time goes to the call's `dns` phase.
pub(super) async fn http_addr(
    endpoint: &Endpoint,
    deadline: Instant,
    phases: &mut Phases,
) -> Result<SocketAddr, CallError> {
    let ep = endpoint.clone();
    let (addr, dns) = tokio::task::spawn_blocking(move || {
        let mut looked = Phases::default();
        ep.http_addr(deadline, &mut looked).map(|a| (a, looked.dns))
    })
    .await
    .map_err(|_| CallError::Io)??;
    phases.dns = dns;
    Ok(addr)
}
