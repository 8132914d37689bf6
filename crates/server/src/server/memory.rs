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
//! runtime worker when it parks (the runtime's park hook, [`on_park`]), a connection
//! thread of `super::pool` when its connection ends. A collection is due only when a
//! connection has closed since the thread's last one, and at most every `MIN_GAP`, so a
//! benchmark over kept connections never pays for it and one over fresh connections pays
//! one collection a quarter of a second at most (2.5-27 µs, median 12 µs, measured
//! under `tcp-connect` and `http-fresh`; up to 10 ms right after 2,000 HTTP/2 connections
//! closed). A worker that parked
//! within `MIN_GAP` of its last collection would keep what it freed since, so
//! `tidy` wakes the workers until each has collected since the last close.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// Connections ended since the server started (all listeners, all servers of the process):
/// each may have freed memory some thread should collect.
static RELEASED: AtomicU64 = AtomicU64::new(0);

/// The shortest time between two collections on one thread.
const MIN_GAP: Duration = Duration::from_millis(250);

/// How often `tidy` looks whether connections closed, and wakes the workers if so.
const TIDY_EVERY: Duration = Duration::from_secs(1);

/// Most ticks `tidy` goes on waking the workers after the last connection closed, while
/// some worker has not collected since: a bound, should a worker never wake.
const TIDY_AFTER: u32 = 30;

/// Runtime workers [`on_park`] keeps track of; a runtime with more is tidied as well, but
/// `tidy` stops waking its workers once these have collected.
const TRACKED: usize = 64;

/// For each runtime worker that has parked (in the order they first did), the value of
/// [`RELEASED`] at its last collection.
static COLLECTED: [AtomicU64; TRACKED] = [const { AtomicU64::new(0) }; TRACKED];

/// Runtime workers that have parked at least once: the first entries of `COLLECTED`.
static WORKERS: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    /// This thread's last collection: the value of [`RELEASED`] it saw, and when.
    static LAST: Cell<(u64, Option<Instant>)> = const { Cell::new((0, None)) };
    /// This runtime worker's entry in `COLLECTED`, once it has parked.
    static SLOT: Cell<Option<usize>> = const { Cell::new(None) };
}

/// Notes that a connection ended and its memory is free to collect.
pub(crate) fn note_release() {
    RELEASED.fetch_add(1, Relaxed);
}

/// Called by a server thread about to wait for work: collects the thread's free memory
/// if a connection closed since its last collection and `MIN_GAP` has passed; true if
/// the thread is up to date (it collected now, or nothing closed since it last did).
pub(crate) fn on_idle() -> bool {
    let released = RELEASED.load(Relaxed);
    LAST.with(|last| {
        let (seen, at) = last.get();
        if seen == released {
            return true;
        }
        let now = Instant::now();
        if at.is_some_and(|at| now.duration_since(at) < MIN_GAP) {
            return false;
        }
        last.set((released, Some(now)));
        crate::sys::alloc::collect();
        true
    })
}

/// The runtime's park hook: `on_idle`, and a note in `COLLECTED` of how far this
/// worker has collected, for `tidy` to see.
pub fn on_park() {
    if !on_idle() {
        return;
    }
    let slot = SLOT.with(|slot| {
        if slot.get().is_none() {
            let next = WORKERS.fetch_add(1, Relaxed);
            slot.set(Some(next.min(TRACKED)));
        }
        slot.get()
    });
    // Stored only when it moved: workers park between the calls of a latency run, and a
    // store on every park would bounce the array's cache line between their cores.
    if let Some(entry) = slot.and_then(|i| COLLECTED.get(i)) {
        let collected = LAST.with(|last| last.get().0);
        if entry.load(Relaxed) != collected {
            entry.store(collected, Relaxed);
        }
    }
}

/// Whether some runtime worker has not collected since the last connection closed.
fn workers_behind() -> bool {
    let released = RELEASED.load(Relaxed);
    let workers = WORKERS.load(Relaxed).min(TRACKED);
    COLLECTED[..workers]
        .iter()
        .any(|c| c.load(Relaxed) != released)
}

/// Until shutdown starts: every [`TIDY_EVERY`], while some worker has not collected since
/// the last connection closed (for at most [`TIDY_AFTER`] ticks after it), spawns one
/// empty task per runtime worker. Spawning wakes parked workers to look for work, and each
/// parks again through [`on_park`], so a worker that went idle too soon after its last
/// collection still gives back what it freed.
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
                    on_idle();
                    if workers_behind() {
                        for _ in 0..workers {
                            tokio::spawn(async {});
                        }
                    }
                }
            }
            _ = &mut stop => return,
        }
    }
}
