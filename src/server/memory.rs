//! Giving memory back to the kernel once load ends (issue #35, step 3).
//!
//! mimalloc, the allocator of `rpcbench-echo`, keeps a heap per thread, and a thread's
//! empty pages go back to the kernel only when that thread collects them: pages whose
//! blocks another thread freed (a connection's task moves between runtime workers) wait
//! for their owner, and a thread that has gone idle never collects. Left alone, the server
//! kept +329% of its starting RSS 12 s after 2,000 HTTP/2 connections had closed, and
//! +27% after 1,000 HTTP/1.1 ones (`report/server_attacks.md`).
//!
//! So every server thread collects ([`crate::sys::alloc::collect`]) as it goes idle: a
//! runtime worker when it parks (the runtime's park hook, [`on_idle`]), a connection
//! thread of [`super::pool`] when its connection ends. A collection is due only when a
//! connection has closed since the thread's last one, and at most every [`MIN_GAP`], so a
//! benchmark over kept connections never pays for it and one over fresh connections pays
//! a collection (tens of microseconds) a quarter of a second at most. A worker that parked
//! within [`MIN_GAP`] of its last collection would keep what it freed since, so
//! [`tidy`] wakes the workers while collections may still be due.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// Connections ended since the server started (all listeners, all servers of the process):
/// each may have freed memory some thread should collect.
static RELEASED: AtomicU64 = AtomicU64::new(0);

/// The shortest time between two collections on one thread.
pub(crate) const MIN_GAP: Duration = Duration::from_millis(250);

/// How often [`tidy`] looks whether connections closed, and wakes the workers if so.
const TIDY_EVERY: Duration = Duration::from_secs(1);

/// Ticks [`tidy`] goes on waking the workers after the last connection closed: enough for
/// every worker to have parked once more than [`MIN_GAP`] after its last collection.
const TIDY_AFTER: u32 = 3;

thread_local! {
    /// This thread's last collection: the value of [`RELEASED`] it saw, and when.
    static LAST: Cell<(u64, Option<Instant>)> = const { Cell::new((0, None)) };
}

/// Notes that a connection ended and its memory is free to collect.
pub(crate) fn note_release() {
    RELEASED.fetch_add(1, Relaxed);
}

/// Called by a server thread about to wait for work: collects the thread's free memory
/// if a connection closed since its last collection and [`MIN_GAP`] has passed.
pub(crate) fn on_idle() {
    let released = RELEASED.load(Relaxed);
    LAST.with(|last| {
        let (seen, at) = last.get();
        if seen == released {
            return;
        }
        let now = Instant::now();
        if at.is_some_and(|at| now.duration_since(at) < MIN_GAP) {
            return;
        }
        last.set((released, Some(now)));
        crate::sys::alloc::collect();
    });
}

/// Until shutdown starts: every [`TIDY_EVERY`], while connections closed within the last
/// [`TIDY_AFTER`] ticks, spawns one empty task per runtime worker. Spawning wakes parked
/// workers to look for work, and each parks again through [`on_idle`], so a worker that
/// went idle too soon after its last collection still gives back what it freed.
pub(crate) async fn tidy(shutdown: watch::Receiver<bool>) {
    let workers = tokio::runtime::Handle::current().metrics().num_workers();
    let mut tick = tokio::time::interval(TIDY_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let stop = super::stopping(shutdown);
    tokio::pin!(stop);
    let (mut seen, mut quiet) = (RELEASED.load(Relaxed), TIDY_AFTER);
    loop {
        tokio::select! {
            _ = tick.tick() => {
                let released = RELEASED.load(Relaxed);
                if released != seen {
                    (seen, quiet) = (released, 0);
                }
                if quiet < TIDY_AFTER {
                    quiet += 1;
                    for _ in 0..workers {
                        tokio::spawn(async {});
                    }
                    on_idle();
                }
            }
            _ = &mut stop => return,
        }
    }
}
