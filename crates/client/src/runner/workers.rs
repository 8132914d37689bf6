//! What both engines share around the calls: the start line all workers leave together,
//! each one's quota of calls, the pacer of an open-loop run, their CPU time.

use super::{NEXT_SEQ, RunConfig, RunTransportError, share};
use crate::measure::Tally;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// What is left of `-n`, shared by every connection of a run: a connection takes one call
/// at a time as it becomes free, so that none sits idle while calls remain. A fixed share
/// each left the connections that finished first idle while a straggler made its last
/// calls alone: on one shared HTTP/2 connection (h2-mux, grpc-mux at 16 workers, 1,000
/// calls in about 12 ms) that end held 13 of 16 calls in flight in some runs and 16 in
/// others, and the means moved with it (Little's law), by address mode and round alike.
#[derive(Debug)]
pub(crate) struct CallPool {
    /// Calls in the pool.
    calls: u64,
    /// Calls taken so far (may pass `calls`: a take after the last is refused).
    taken: AtomicU64,
}

impl CallPool {
    /// A pool of `calls` calls.
    pub(crate) fn new(calls: u64) -> CallPool {
        CallPool {
            calls,
            taken: AtomicU64::new(0),
        }
    }

    /// Takes one call: true while any were left.
    #[inline]
    pub(crate) fn take(&self) -> bool {
        self.taken.fetch_add(1, Relaxed) < self.calls
    }
}

/// How long one connection keeps calling: while the run's [`CallPool`] has calls, its
/// share of `-n` under `--rate` (a paced connection keeps to its own schedule), or until
/// the run's common deadline under `--duration`, so every connection has the same window.
#[derive(Debug, Clone)]
pub(super) enum Quota {
    /// Calls taken from the run's pool.
    Pool(Arc<CallPool>),
    /// This many calls.
    Calls(u64),
    /// Calls started before this instant.
    Until(Instant),
}

impl Quota {
    /// Connection `index`'s quota in a run that started at `start`, sharing `pool`.
    pub(super) fn new(
        config: &RunConfig,
        start: Instant,
        connections: usize,
        index: usize,
        pool: &Arc<CallPool>,
    ) -> Quota {
        match (config.duration, config.rate) {
            (Some(d), _) => Quota::Until(start + d),
            (None, Some(_)) => Quota::Calls(share(config.calls, connections, index)),
            (None, None) => Quota::Pool(pool.clone()),
        }
    }

    /// True while the connection has calls left, having made `made`: for a pool, takes
    /// the next call.
    #[inline]
    pub(super) fn more(&self, made: u64) -> bool {
        match self {
            Quota::Pool(pool) => pool.take(),
            Quota::Calls(calls) => made < *calls,
            Quota::Until(deadline) => Instant::now() < *deadline,
        }
    }
}

/// One connection's share of an open schedule (`--rate`): its calls are due one interval
/// apart, the connections' schedules staggered evenly. A call is started when due, never
/// earlier; one that cannot start until more than an interval after it was due counts as
/// late, and the calls after it go back to back until the schedule is caught up (as
/// wrk2 does). Latency is still timed from the actual start, so the `late` count is what
/// tells a reader that the rate asked for was not held.
pub(super) struct Pacer {
    /// Time between this connection's calls: connections / rate.
    pub(super) interval: Duration,
    /// Offset of this connection's first call from the start.
    pub(super) offset: Duration,
    /// Calls already scheduled.
    pub(super) n: u32,
}

/// When the next call of a [`Pacer`] is due, and how long to wait for it.
pub(super) struct Due {
    /// The intended start, from which the corrected latency is timed.
    pub(super) at: Instant,
    /// Zero when the call is already due.
    pub(super) wait: Duration,
}

impl Pacer {
    pub(super) fn new(rate: Option<f64>, connections: usize, index: usize) -> Option<Pacer> {
        let interval = Duration::from_secs_f64(connections as f64 / rate?);
        Some(Pacer {
            interval,
            offset: interval.mul_f64(index as f64 / connections as f64),
            n: 0,
        })
    }

    /// Schedules the next call, counting it in `late` when it is more than an interval
    /// behind; the caller waits `wait` (each engine in its own way).
    pub(super) fn next(&mut self, start: Instant, late: &mut u64) -> Due {
        let at = start + self.offset + self.interval * self.n;
        self.n = self.n.saturating_add(1);
        let now = Instant::now();
        if now < at {
            Due { at, wait: at - now }
        } else {
            if now - at > self.interval {
                *late += 1;
            }
            Due {
                at,
                wait: Duration::ZERO,
            }
        }
    }
}

/// What one engine thread hands back.
pub(super) struct Finished {
    /// What its calls measured.
    pub(super) tally: Tally,
    /// When its last measured call ended.
    pub(super) ended: Instant,
}

/// Where every engine thread, and the thread that times the run, meets once warm-up is
/// over, so the clock starts for all of them at once. Unlike [`std::sync::Barrier`] it can
/// be called off: a thread that fails before the start (it could not be spawned, its
/// runtime could not be built) aborts it, and those already waiting stop instead of
/// waiting forever.
pub(super) struct StartLine {
    /// Threads that must arrive before any goes on.
    pub(super) parties: usize,
    pub(super) state: Mutex<Gate>,
    pub(super) changed: Condvar,
}

/// The state of a [`StartLine`].
#[derive(Default)]
pub(super) struct Gate {
    /// Parties waiting (or gone through).
    pub(super) arrived: usize,
    /// Every party arrived: the run has started.
    pub(super) open: bool,
    /// The start was called off.
    pub(super) aborted: bool,
    /// When the last party arrived: the run's one start instant, which every party takes
    /// (each waking a little later would otherwise start its own clock a little later).
    pub(super) opened_at: Option<Instant>,
}

impl StartLine {
    pub(super) fn new(parties: usize) -> StartLine {
        StartLine {
            parties,
            state: Mutex::new(Gate::default()),
            changed: Condvar::new(),
        }
    }

    /// Waits until every party has arrived (`Ok`, with the instant the last one did) or
    /// the start was called off.
    pub(super) fn wait(&self) -> Result<Instant, RunTransportError> {
        // A poisoned lock means a thread panicked; the panic itself is reported when the
        // threads are joined, so the state is read as it is.
        let mut gate = self.state.lock().unwrap_or_else(|e| e.into_inner());
        gate.arrived += 1;
        if gate.arrived == self.parties {
            gate.open = true;
            gate.opened_at = Some(Instant::now());
            self.changed.notify_all();
        }
        while !gate.open && !gate.aborted {
            gate = self.changed.wait(gate).unwrap_or_else(|e| e.into_inner());
        }
        match (gate.aborted, gate.opened_at) {
            (false, Some(at)) => Ok(at),
            _ => Err(RunTransportError::Aborted),
        }
    }

    /// Calls the start off.
    pub(super) fn abort(&self) {
        let mut gate = self.state.lock().unwrap_or_else(|e| e.into_inner());
        gate.aborted = true;
        self.changed.notify_all();
    }
}

/// Runs `threads` engine threads, thread `i` running `body(i, start_line)`, starts the
/// clock when all of them are at the start line, and merges what they measured. Returns
/// the merged tally and the time from the start to the end of the last measured call.
/// A thread that cannot be spawned is an error naming it, never a panic: the start is then
/// called off so the threads already running end.
pub(super) fn run_threads<F>(
    threads: usize,
    name: &dyn Fn(usize) -> String,
    body: F,
) -> Result<(Tally, Duration), RunTransportError>
where
    F: Fn(usize, &StartLine) -> Result<Finished, RunTransportError> + Sync,
{
    let start_line = StartLine::new(threads + 1);
    std::thread::scope(|scope| {
        let mut failed = None;
        let mut handles = Vec::with_capacity(threads);
        for i in 0..threads {
            let (body, start_line) = (&body, &start_line);
            let spawned = std::thread::Builder::new()
                .name(name(i))
                .spawn_scoped(scope, move || body(i, start_line));
            match spawned {
                Ok(handle) => handles.push(handle),
                Err(source) => {
                    failed = Some(RunTransportError::Spawn {
                        thread: name(i),
                        source,
                    });
                    start_line.abort();
                    break;
                }
            }
        }
        // The merged tally's histograms are allocated, and their pages zeroed, before the
        // start: done after it, on the workers' CPU (pinned, or one vCPU), that held up
        // every thread's first measured calls by 0.6-1 ms here, each of the 16 in flight
        // on one shared connection alike.
        let mut tally = Tally::default();
        let opened = start_line.wait();
        let started = *opened.as_ref().unwrap_or(&Instant::now());
        let mut ended = started;
        for handle in handles {
            match handle.join() {
                Ok(Ok(finished)) => {
                    tally += &finished.tally;
                    ended = ended.max(finished.ended);
                }
                Ok(Err(RunTransportError::Aborted)) => {}
                Ok(Err(e)) => {
                    failed.get_or_insert(e);
                }
                Err(panic) => std::panic::resume_unwind(panic),
            }
        }
        match (failed, opened) {
            (Some(e), _) => Err(e),
            (None, Err(e)) => Err(e),
            (None, Ok(_)) => Ok((tally, ended - started)),
        }
    })
}

/// User and system CPU time of the calling thread so far.
pub(super) fn thread_cpu() -> (Duration, Duration) {
    use nix::sys::resource::{UsageWho, getrusage};
    let tv = |t: nix::sys::time::TimeVal| {
        Duration::new(t.tv_sec().max(0) as u64, (t.tv_usec().max(0) as u32) * 1000)
    };
    match getrusage(UsageWho::RUSAGE_THREAD) {
        Ok(u) => (tv(u.user_time()), tv(u.system_time())),
        Err(_) => (Duration::ZERO, Duration::ZERO),
    }
}

/// Records the CPU time a thread spent since `before` (from [`thread_cpu`]) in `tally`.
pub(super) fn add_cpu_since(tally: &mut Tally, before: (Duration, Duration)) {
    let after = thread_cpu();
    tally.cpu_user += after.0.saturating_sub(before.0);
    tally.cpu_sys += after.1.saturating_sub(before.1);
}

/// Takes the next seq from the process-wide counter.
#[inline]
pub(super) fn next_seq() -> u64 {
    NEXT_SEQ.fetch_add(1, Relaxed)
}
