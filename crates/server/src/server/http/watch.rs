//! Closing idle and slow connections: why a connection closes ([`CloseReason`]), the flag
//! that keeps the first reason, and the watcher that checks every connection.

use super::super::Shared;
use super::super::registry::Registry;
use super::{ConnState, IDLE_CHECKS_PER_TIMEOUT};
use std::sync::Arc;
use std::sync::atomic::Ordering::{AcqRel, Acquire};
use std::sync::atomic::{AtomicU8, Ordering::Relaxed};

/// Why the watcher tells a connection to close.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub(super) enum CloseReason {
    /// Nothing moved for a whole idle timeout: counted as [`Reject::IdleTimeout`].
    Idle = 1,
    /// The server is shutting down: expected, not counted.
    Shutdown = 2,
    /// A reply took no byte for a whole write timeout: counted as
    /// [`Reject::WriteTimeout`], and the connection is dropped at once (its replies are
    /// what is stuck, so waiting for them to finish would wait forever).
    WriteTimeout = 3,
}

/// The close reason of one connection: none until the watcher gives one, then that one for
/// good (the first reason given wins).
///
/// An atomic byte rather than a `Mutex<Option<CloseReason>>`: the connection reads it at
/// every wake-up, once or twice per request, and a load is all that costs.
pub(super) struct CloseFlag(AtomicU8);

impl CloseFlag {
    /// The byte while no reason has been given; the reasons are 1 and up.
    const OPEN: u8 = 0;

    pub(super) fn new() -> Self {
        CloseFlag(AtomicU8::new(Self::OPEN))
    }

    /// The reason given, if any. Acquire pairs with the release in [`CloseFlag::set`].
    pub(super) fn get(&self) -> Option<CloseReason> {
        match self.0.load(Acquire) {
            1 => Some(CloseReason::Idle),
            2 => Some(CloseReason::Shutdown),
            3 => Some(CloseReason::WriteTimeout),
            _ => None,
        }
    }

    /// Records `why` unless a reason was given before; true when this call set it.
    pub(super) fn set(&self, why: CloseReason) -> bool {
        self.0
            .compare_exchange(Self::OPEN, why as u8, AcqRel, Acquire)
            .is_ok()
    }
}

/// A connection as the watcher sees it. Watching from outside keeps timers and the
/// shutdown signal out of every connection's wake-ups, which happen once or twice per
/// request.
pub(super) struct Watch {
    pub(super) conn: Arc<ConnState>,
    /// The connection's `moves` count at the last check.
    pub(super) moves_seen: u64,
    /// When a check last saw a byte move or a request in flight.
    pub(super) busy_at: tokio::time::Instant,
    /// The connection's `taken` count at the last check.
    pub(super) taken_seen: u64,
    /// When a check last saw no reply waiting, or a reply's bytes taken.
    pub(super) taking_at: tokio::time::Instant,
}

/// Every tenth of the shorter of the idle and write timeouts, tells connections quiet
/// for a whole idle timeout, and those whose replies took nothing for a whole write
/// timeout, to close; at shutdown, tells every connection.
pub(super) async fn watch(watched: Arc<Registry<Watch>>, shared: Arc<Shared>) {
    let (idle, write) = (shared.config.idle_timeout, shared.config.write_timeout);
    let mut check = tokio::time::interval(idle.min(write) / IDLE_CHECKS_PER_TIMEOUT);
    let stopping = super::super::stopping(shared.shutdown.clone());
    tokio::pin!(stopping);
    loop {
        tokio::select! {
            now = check.tick() => watched.for_each(|w| {
                let conn = &w.conn;
                let moves = conn.moves.load(Relaxed);
                if moves != w.moves_seen || conn.in_flight.load(Relaxed) > 0 {
                    (w.moves_seen, w.busy_at) = (moves, now);
                }
                let taken = conn.taken.load(Relaxed);
                if taken != w.taken_seen || conn.sending.load(Relaxed) == 0 {
                    (w.taken_seen, w.taking_at) = (taken, now);
                }
                if now - w.taking_at >= write {
                    conn.tell_close(CloseReason::WriteTimeout);
                } else if now - w.busy_at >= idle {
                    conn.tell_close(CloseReason::Idle);
                }
            }),
            _ = &mut stopping => {
                watched.close(|w| w.conn.tell_close(CloseReason::Shutdown));
                return;
            }
        }
    }
}
