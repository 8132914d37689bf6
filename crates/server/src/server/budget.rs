//! The server-wide budget of buffered bytes (`--max-buffered`): request bodies held and
//! replies not yet sent, over every connection, never more than the budget.
//!
//! A body or message is held in a [`Held`] buffer, which takes a [`Lease`] on the budget
//! for its capacity before it allocates, and gives it back when the last reference to
//! its bytes is dropped: an echo's reply is the request's own buffer, handed to the
//! connection in slices ([`Bytes::from_owner`]), so what is counted is what is resident,
//! until the kernel has taken the last slice. Pattern replies are slices of a static
//! table and hold nothing, so they take no lease; what the transports buffer of them is
//! bounded per connection (hyper's write buffer, the TLS buffer limit, HTTP/2's send
//! buffer), not by the budget.
//!
//! Over the budget a request is refused at once (HTTP 503, gRPC `RESOURCE_EXHAUSTED`,
//! frame status 4), and counted. Refused rather than made to wait: a request that waits
//! for the budget keeps its body where it is, and over HTTP/2 that is in this process
//! (the crate reads every stream's DATA up to the window to serve the others), so a
//! wait would move the bytes out of the count, not out of memory.
//!
//! A share of the budget ([`SMALL_SHARE`]) is kept for small requests (up to
//! [`SMALL_REQUEST`]): slow readers holding large echoes cannot make a healthy small call
//! wait or fail. And one HTTP/2 connection, which can carry a hundred requests at once,
//! holds at most [`ConnShare`]'s share, so one client cannot take the whole budget.

use bytes::Bytes;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Default budget: 64 MiB, a quarter of the 256 MiB memory limit of the DaemonSet's echo
/// container (`deploy/kubernetes/`), which leaves the rest for what each connection
/// costs besides its buffers (about 20 KiB each, `report/server_memory.md`), the runtime
/// and the allocator's slack. Four echoes of the largest default frame (16 MiB) fit.
pub const DEFAULT_MAX_BUFFERED: u64 = 64 << 20;

/// The largest request that counts as small: 64 KiB, above the payloads of latency
/// tests (the `--payload` of rpcbench is usually tens to thousands of bytes).
pub const SMALL_REQUEST: u64 = 64 << 10;

/// The share of the budget only small requests may take: an eighth (8 MiB of the
/// default), room for 128 small requests of the largest small size at once, while large
/// echoes have held the rest.
pub const SMALL_SHARE: u64 = 8;

/// Smallest budget: one largest small request, so a small call is never refused by a
/// budget smaller than itself.
pub const MIN_MAX_BUFFERED: u64 = SMALL_REQUEST;

/// The server-wide budget and its gauge.
#[derive(Debug)]
pub struct Budget {
    /// `--max-buffered`.
    max: u64,
    /// What large requests may take in all: the budget less the small share.
    large_max: u64,
    /// Bytes leased now: the gauge of `/stats`' `buffered_bytes`.
    held: AtomicU64,
    /// The most ever leased at once.
    peak: AtomicU64,
}

impl Budget {
    /// A budget of `max` bytes, nothing leased.
    pub fn new(max: u64) -> Budget {
        Budget {
            max,
            large_max: max - max / SMALL_SHARE,
            held: AtomicU64::new(0),
            peak: AtomicU64::new(0),
        }
    }

    /// The budget, in bytes.
    pub fn max(&self) -> u64 {
        self.max
    }

    /// Bytes leased now.
    pub fn held(&self) -> u64 {
        self.held.load(Relaxed)
    }

    /// The most bytes ever leased at once.
    pub fn peak(&self) -> u64 {
        self.peak.load(Relaxed)
    }

    /// Takes `n` more bytes for a request of `request` bytes in all, if the budget has
    /// them: all of it for a small request, all but the small share for a large one.
    fn take(&self, n: u64, request: u64) -> bool {
        let limit = if request <= SMALL_REQUEST {
            self.max
        } else {
            self.large_max
        };
        let taken = self
            .held
            .fetch_update(Relaxed, Relaxed, |held| {
                held.checked_add(n).filter(|&after| after <= limit)
            })
            .is_ok();
        if taken {
            self.peak.fetch_max(self.held.load(Relaxed), Relaxed);
        }
        taken
    }

    fn give_back(&self, n: u64) {
        self.held.fetch_sub(n, Relaxed);
    }
}

/// What one connection may hold of the budget: requests on an HTTP/2 connection share
/// it, so one client's hundred streams cannot take all of the budget.
#[derive(Debug)]
pub struct ConnShare {
    max: u64,
    held: AtomicU64,
    /// HTTP/2 streams open on the connection ([`StreamLease`]).
    streams: AtomicU64,
}

impl ConnShare {
    /// A connection's share of `budget` when bodies are at most `max_frame` bytes: a
    /// quarter of the budget, and at least one largest body.
    pub fn new(budget: &Budget, max_frame: u32) -> ConnShare {
        ConnShare {
            max: (budget.max / 4).max(u64::from(max_frame)),
            held: AtomicU64::new(0),
            streams: AtomicU64::new(0),
        }
    }

    fn take(&self, n: u64) -> bool {
        self.held
            .fetch_update(Relaxed, Relaxed, |held| {
                held.checked_add(n).filter(|&after| after <= self.max)
            })
            .is_ok()
    }
}

/// Bytes taken from the budget (and from a connection's share), given back on drop.
#[derive(Debug)]
pub struct Lease {
    budget: Arc<Budget>,
    conn: Option<Arc<ConnShare>>,
    /// Bytes held.
    n: u64,
    /// The size of the whole request, which says whether it is small.
    request: u64,
}

impl Lease {
    /// An empty lease for a request of `request` bytes (its declared or largest size).
    pub fn new(budget: &Arc<Budget>, conn: Option<&Arc<ConnShare>>, request: u64) -> Lease {
        Lease {
            budget: budget.clone(),
            conn: conn.cloned(),
            n: 0,
            request,
        }
    }

    /// Grows the lease to `total` bytes; false (the lease unchanged) when the budget or
    /// the connection's share has not got them.
    pub fn grow_to(&mut self, total: u64) -> bool {
        let Some(more) = total.checked_sub(self.n).filter(|&m| m > 0) else {
            return true;
        };
        // The request is at least as large as what it holds.
        self.request = self.request.max(total);
        if !self.budget.take(more, self.request) {
            return false;
        }
        if let Some(conn) = &self.conn
            && !conn.take(more)
        {
            self.budget.give_back(more);
            return false;
        }
        self.n = total;
        true
    }
}

impl Lease {
    /// Gives back all but `total` bytes.
    pub fn shrink_to(&mut self, total: u64) {
        let Some(less) = self.n.checked_sub(total).filter(|&l| l > 0) else {
            return;
        };
        self.budget.give_back(less);
        if let Some(conn) = &self.conn {
            conn.held.fetch_sub(less, Relaxed);
        }
        self.n = total;
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        self.budget.give_back(self.n);
        if let Some(conn) = &self.conn {
            conn.held.fetch_sub(self.n, Relaxed);
        }
    }
}

/// An open HTTP/2 stream's own memory (its head, task and stream state), taken from the
/// budget for as long as the stream is open, as a large request's would be: the small
/// share stays for small bodies.
///
/// Except one: a stream opened when none is open on its connection costs the budget
/// nothing. It is part of what the connection itself costs, which `--max-connections`
/// bounds, so a healthy client's call on a fresh connection is never refused because
/// other clients' stalled streams spent the budget. At most one stream per connection is
/// free at a time: the next free one comes only when every stream there has closed.
#[derive(Debug)]
pub struct StreamLease {
    _lease: Lease,
    conn: Arc<ConnShare>,
}

impl StreamLease {
    /// Opens a stream on `conn` costing `cost` bytes; `None` when the budget or the
    /// connection's share has not got them.
    pub fn open(budget: &Arc<Budget>, conn: &Arc<ConnShare>, cost: u64) -> Option<StreamLease> {
        let first = conn.streams.fetch_add(1, Relaxed) == 0;
        let mut stream = StreamLease {
            _lease: Lease::new(budget, Some(conn), u64::MAX),
            conn: conn.clone(),
        };
        (first || stream._lease.grow_to(cost)).then_some(stream)
    }
}

impl Drop for StreamLease {
    fn drop(&mut self) {
        self.conn.streams.fetch_sub(1, Relaxed);
    }
}

/// Bytes received and held under a [`Lease`] for their capacity, until the last slice of
/// them is dropped.
pub struct Held {
    buf: Vec<u8>,
    lease: Lease,
}

/// The budget could not cover a buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the server's buffer budget is spent")]
pub struct OverBudgetError;

impl Held {
    /// An empty buffer of `capacity` bytes, leased first; `request` is the size of the
    /// whole request it is for.
    pub fn with_capacity(mut lease: Lease, capacity: usize) -> Result<Held, OverBudgetError> {
        if !lease.grow_to(capacity as u64) {
            return Err(OverBudgetError);
        }
        Ok(Held {
            buf: Vec::with_capacity(capacity),
            lease,
        })
    }

    /// `buf` held under `lease`, which is made exactly its capacity (grown, or given back
    /// down to it): a reply made whole before it is sent.
    pub fn from_vec(mut lease: Lease, buf: Vec<u8>) -> Result<Held, OverBudgetError> {
        let capacity = buf.capacity() as u64;
        if !lease.grow_to(capacity) {
            return Err(OverBudgetError);
        }
        lease.shrink_to(capacity);
        Ok(Held { buf, lease })
    }

    /// Appends `bytes`, growing the buffer (and its lease first) by doubling, never past
    /// `max` bytes of capacity; the caller has checked that `max` holds them.
    pub fn extend(&mut self, bytes: &[u8], max: usize) -> Result<(), OverBudgetError> {
        let need = self.buf.len() + bytes.len();
        if need > self.buf.capacity() {
            let capacity = need.max(self.buf.capacity() * 2).min(max.max(need));
            if !self.lease.grow_to(capacity as u64) {
                return Err(OverBudgetError);
            }
            self.buf.reserve_exact(capacity - self.buf.len());
        }
        self.buf.extend_from_slice(bytes);
        Ok(())
    }

    /// Bytes held so far.
    pub fn len(&self) -> usize {
        self.buf.len()
    }

    /// True when nothing is held yet.
    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    /// The bytes, which keep the lease until the last slice of them is dropped.
    pub fn freeze(self) -> Bytes {
        if self.is_empty() {
            // Nothing to keep: the lease goes now.
            return Bytes::new();
        }
        Bytes::from_owner(self)
    }
}

impl AsRef<[u8]> for Held {
    fn as_ref(&self) -> &[u8] {
        &self.buf
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lease_holds_until_the_last_slice_is_dropped() {
        let budget = Arc::new(Budget::new(1 << 20));
        let mut held = Held::with_capacity(Lease::new(&budget, None, 1000), 1000).unwrap();
        held.extend(&[7; 1000], 1000).unwrap();
        assert_eq!(budget.held(), 1000);
        let bytes = held.freeze();
        let slice = bytes.slice(10..20);
        drop(bytes);
        assert_eq!(budget.held(), 1000, "a slice still holds the buffer");
        assert_eq!(&slice[..], &[7; 10]);
        drop(slice);
        assert_eq!((budget.held(), budget.peak()), (0, 1000));
    }

    #[test]
    fn large_requests_leave_the_small_share() {
        let max = 1 << 20;
        let budget = Arc::new(Budget::new(max));
        let large = max - max / SMALL_SHARE;
        let big = SMALL_REQUEST + 1;
        let mut first = Lease::new(&budget, None, big);
        assert!(first.grow_to(large));
        let mut second = Lease::new(&budget, None, big);
        assert!(!second.grow_to(big), "the large share is spent");
        // A small request still fits, up to the whole budget.
        let mut small = Lease::new(&budget, None, 100);
        assert!(small.grow_to(100));
        // Small requests fill the rest: two of the largest small size, less the 100.
        let mut rest = Lease::new(&budget, None, SMALL_REQUEST);
        assert!(rest.grow_to(SMALL_REQUEST));
        let mut last = Lease::new(&budget, None, SMALL_REQUEST);
        assert!(last.grow_to(max - large - 100 - SMALL_REQUEST));
        assert!(
            !Lease::new(&budget, None, 1).grow_to(1),
            "all of it is held"
        );
        drop((first, small, rest, last));
        assert_eq!(budget.held(), 0);
        assert!(second.grow_to(big));
    }

    #[test]
    fn a_connection_holds_at_most_its_share() {
        let budget = Arc::new(Budget::new(4 << 20));
        let conn = Arc::new(ConnShare::new(&budget, 1 << 20));
        assert_eq!(conn.max, 1 << 20);
        let mut a = Lease::new(&budget, Some(&conn), 1 << 20);
        assert!(a.grow_to(1 << 20));
        let mut b = Lease::new(&budget, Some(&conn), 10);
        assert!(!b.grow_to(10), "the connection's share is spent");
        assert_eq!(budget.held(), 1 << 20, "a refused share takes nothing");
        drop(a);
        assert!(b.grow_to(10));
    }

    #[test]
    fn a_connections_first_stream_is_free_while_stalled_streams_spent_the_budget() {
        let max = 1 << 20;
        let budget = Arc::new(Budget::new(max));
        let cost = 4096;
        let stalled = Arc::new(ConnShare::new(&budget, 1 << 20));
        let mut open = Vec::new();
        while let Some(s) = StreamLease::open(&budget, &stalled, cost) {
            open.push(s);
        }
        let large = max - max / SMALL_SHARE;
        assert_eq!(
            budget.held(),
            large,
            "streams spent the large share, one free"
        );
        // A fresh connection: its first stream opens, its second does not.
        let fresh = Arc::new(ConnShare::new(&budget, 1 << 20));
        let first = StreamLease::open(&budget, &fresh, cost).expect("the first is free");
        assert!(StreamLease::open(&budget, &fresh, cost).is_none());
        // ...and its small body still fits in the small share.
        assert!(Lease::new(&budget, Some(&fresh), 100).grow_to(100));
        // Only when every stream there has closed is the next one free again.
        drop(first);
        let again = StreamLease::open(&budget, &fresh, cost).expect("free again");
        drop((open, again));
        assert_eq!(budget.held(), 0);
        assert_eq!(stalled.streams.load(Relaxed), 0);
    }

    #[test]
    fn a_buffer_grows_its_lease_first() {
        let budget = Arc::new(Budget::new(SMALL_REQUEST));
        let mut held = Held::with_capacity(Lease::new(&budget, None, 10), 10).unwrap();
        held.extend(&[1; 10], 1 << 20).unwrap();
        held.extend(&[2; 11], 1 << 20).unwrap();
        assert_eq!(budget.held(), 21);
        assert_eq!(
            held.extend(&vec![3; SMALL_REQUEST as usize], 1 << 20),
            Err(OverBudgetError)
        );
        assert_eq!(held.len(), 21);
        drop(held);
        assert_eq!(budget.held(), 0);
    }
}
