//! The load engine: runs one transport with N workers, each a thread with its own
//! connection or handle, and returns the merged [`Tally`].
//!
//! Warm-up calls run first on every worker and are never counted; then all workers start
//! the measured calls together. Each call is timed with the monotonic clock from before the
//! transport is asked to call (connect included for fresh transports) until its reply has
//! been verified.

use crate::measure::{Outcome, Phase, Tally};
use crate::resolve::AddrMode;
use crate::transport::{Call, Endpoint, Phases, Transport, TransportKind, WithTransport};
use crate::wire;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

/// How much work a run does and what each call asks for.
#[derive(Debug, Clone)]
pub struct RunConfig {
    /// Measured calls per transport, divided evenly among the workers; ignored when
    /// `duration` is set.
    pub calls: u64,
    /// Run each transport for this long instead of a fixed number of calls.
    pub duration: Option<Duration>,
    /// Uncounted calls before measuring, spread over the workers, at least one each
    /// unless this is 0 (see [`warmup_share`]).
    pub warmup: u64,
    /// Workers, each with its own connection or handle.
    pub concurrency: usize,
    /// Request payload size in bytes.
    pub payload: u32,
    /// Ask for a pattern reply of this size instead of an echo.
    pub reply: Option<u32>,
    /// Server-side delay asked for each call.
    pub delay_us: u32,
    /// Longest a call may take before it counts as lost.
    pub timeout: Duration,
    /// Start calls at this rate (per second, over all workers) instead of back to back.
    pub rate: Option<f64>,
}

impl Default for RunConfig {
    fn default() -> Self {
        RunConfig {
            calls: 1000,
            duration: None,
            warmup: 100,
            concurrency: 1,
            payload: 64,
            reply: None,
            delay_us: 0,
            timeout: Duration::from_secs(5),
            rate: None,
        }
    }
}

/// A transport's merged result.
#[derive(Debug, Clone)]
pub struct TransportRun {
    pub kind: TransportKind,
    /// How the target's name was resolved.
    pub mode: AddrMode,
    /// Lookups or DNS queries the run asked for (see [`crate::resolve::Names::queries`]).
    pub dns_queries: u64,
    /// The first name-lookup failure, worded for a person.
    pub dns_error: Option<String>,
    pub tally: Tally,
    /// Wall time of the measured part.
    pub elapsed: Duration,
    /// Workers used.
    pub workers: usize,
}

impl TransportRun {
    /// Mean calls in flight over the measured window: time spent in calls over wall time.
    /// Below the workers asked for when some sat idle (a worker that finished its share
    /// early, a pacer waiting for the next slot, a slow start).
    pub fn achieved_concurrency(&self) -> f64 {
        let wall = self.elapsed.as_secs_f64();
        if wall > 0.0 {
            self.tally.busy.as_secs_f64() / wall
        } else {
            0.0
        }
    }

    /// Adds another run of the same transport (from another round).
    pub fn merge(&mut self, other: &TransportRun) {
        self.tally += &other.tally;
        self.elapsed += other.elapsed;
        self.dns_queries += other.dns_queries;
        if self.dns_error.is_none() {
            self.dns_error.clone_from(&other.dns_error);
        }
    }
}

/// State the workers of one run share: only atomics, touched once per call.
struct Shared {
    /// Next seq to hand out; unique over the whole process so that no two calls match.
    next_seq: &'static AtomicU64,
    /// Calls finished, for the progress bar.
    done: Arc<AtomicU64>,
}

/// Worker `index`'s share of `total` calls split over `workers`: the remainder goes one
/// each to the first workers, so shares differ by one at most.
pub fn share(total: u64, workers: usize, index: usize) -> u64 {
    let workers = workers.max(1) as u64;
    total / workers + u64::from((index as u64) < total % workers)
}

/// Worker `index`'s warm-up calls: its share of `warmup`, but at least one, so that every
/// worker has connected and made a call before the clock starts and no measured call of a
/// persistent transport pays for a connect. `--warmup 0` means none at all, for a reader
/// who wants the first call's cost in the figures.
pub fn warmup_share(warmup: u64, workers: usize, index: usize) -> u64 {
    if warmup == 0 {
        0
    } else {
        share(warmup, workers, index).max(1)
    }
}

/// Seqs are unique within the process, across transports and rounds, so a reply that
/// strays from one run into another is still recognised as not ours.
static NEXT_SEQ: AtomicU64 = AtomicU64::new(1);

/// Runs one transport to completion. `done` counts finished calls for a progress display.
pub fn run_transport(
    kind: TransportKind,
    endpoint: &Endpoint,
    config: &RunConfig,
    done: Arc<AtomicU64>,
) -> TransportRun {
    let workers = config.concurrency.max(1);
    // A connection shared by the workers of an earlier run must not carry over.
    let endpoint = &endpoint.for_run();
    let shared = Shared {
        next_seq: &NEXT_SEQ,
        done,
    };
    // Workers and this thread meet here once warm-up is over, so the clock starts for all
    // of them at once.
    let start_line = Barrier::new(workers + 1);
    let mut tally = Tally::default();
    let mut elapsed = Duration::ZERO;
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..workers)
            .map(|i| {
                let warmup = warmup_share(config.warmup, workers, i);
                let calls = share(config.calls, workers, i);
                let (shared, start_line) = (&shared, &start_line);
                std::thread::Builder::new()
                    .name(format!("{kind}-{i}"))
                    .spawn_scoped(scope, move || {
                        let ctx = WorkerCtx {
                            config,
                            warmup,
                            calls,
                            pacer: Pacer::new(config.rate, workers, i),
                            shared,
                            start_line,
                        };
                        // The one dispatch: from here on the loop is compiled per transport.
                        kind.open_with(endpoint, config.timeout, ctx)
                    })
                    .expect("spawning a worker thread")
            })
            .collect();
        start_line.wait();
        let started = Instant::now();
        for h in handles {
            match h.join() {
                Ok(t) => tally += &t,
                Err(panic) => std::panic::resume_unwind(panic),
            }
        }
        elapsed = started.elapsed();
    });
    TransportRun {
        kind,
        mode: endpoint.names.mode(),
        dns_queries: endpoint.names.queries(),
        dns_error: endpoint.names.first_error(),
        tally,
        elapsed,
        workers,
    }
}

/// What a worker needs besides its transport.
struct WorkerCtx<'a> {
    config: &'a RunConfig,
    /// This worker's share of the warm-up calls.
    warmup: u64,
    /// This worker's share of the measured calls (unless the run has a duration).
    calls: u64,
    /// Its share of the schedule under `--rate`.
    pacer: Option<Pacer>,
    shared: &'a Shared,
    start_line: &'a Barrier,
}

impl WithTransport for WorkerCtx<'_> {
    type Output = Tally;

    fn run<T: Transport>(self, transport: T) -> Tally {
        worker(transport, self)
    }
}

/// One worker: warm-up, wait for the start, then measured calls until none are left.
fn worker<T: Transport>(mut transport: T, ctx: WorkerCtx<'_>) -> Tally {
    let WorkerCtx {
        config,
        warmup,
        calls,
        mut pacer,
        shared,
        start_line,
    } = ctx;
    let mut payload = Vec::with_capacity(config.payload as usize);
    let mut scratch = Tally::default();
    for _ in 0..warmup {
        let seq = shared.next_seq.fetch_add(1, Relaxed);
        one_call(
            &mut transport,
            config,
            seq,
            None,
            &mut payload,
            &mut scratch,
        );
    }
    let mut tally = Tally::for_config(config);
    let duplicates_in_warmup = transport.duplicates();
    start_line.wait();
    let start = Instant::now();
    let deadline = config.duration.map(|d| start + d);
    let cpu_before = thread_cpu();
    let mut made = 0u64;
    loop {
        let more = match deadline {
            Some(deadline) => Instant::now() < deadline,
            None => made < calls,
        };
        if !more {
            break;
        }
        made += 1;
        let due = pacer.as_mut().map(|p| p.wait(start, &mut tally.late));
        let seq = shared.next_seq.fetch_add(1, Relaxed);
        one_call(&mut transport, config, seq, due, &mut payload, &mut tally);
        shared.done.fetch_add(1, Relaxed);
    }
    let cpu_after = thread_cpu();
    tally.cpu_user = cpu_after.0.saturating_sub(cpu_before.0);
    tally.cpu_sys = cpu_after.1.saturating_sub(cpu_before.1);
    tally.connects = transport.connects();
    tally.duplicated = transport.duplicates() - duplicates_in_warmup;
    tally
}

/// One worker's share of an open schedule (`--rate`): its calls are due one interval
/// apart, the workers' schedules staggered evenly. A call is started when due, never
/// earlier; one that cannot start until more than an interval after it was due counts as
/// late, and the calls after it go back to back until the schedule is caught up (as
/// wrk2 does). Latency is still timed from the actual start, so the `late` count is what
/// tells a reader that the rate asked for was not held.
struct Pacer {
    interval: Duration,
    /// Offset of this worker's first call from the start.
    offset: Duration,
    /// Calls already scheduled.
    n: u32,
}

impl Pacer {
    fn new(rate: Option<f64>, workers: usize, index: usize) -> Option<Pacer> {
        let interval = Duration::from_secs_f64(workers as f64 / rate?);
        // Sleeps should end when asked, not up to the default 50 µs timer slack later.
        let _ = nix::sys::prctl::set_timerslack(1);
        Some(Pacer {
            interval,
            offset: interval.mul_f64(index as f64 / workers as f64),
            n: 0,
        })
    }

    /// Waits until the next call is due, and returns when that was: the intended start,
    /// from which the corrected latency is timed.
    fn wait(&mut self, start: Instant, late: &mut u64) -> Instant {
        let due = start + self.offset + self.interval * self.n;
        self.n = self.n.saturating_add(1);
        let now = Instant::now();
        if now < due {
            std::thread::sleep(due - now);
        } else if now - due > self.interval {
            *late += 1;
        }
        due
    }
}

/// Makes, times, verifies and counts one call. `due` is when an open schedule meant the
/// call to start (`--rate`); a call that starts late is then also timed from `due`, which
/// is what a user of a service called at that rate would have waited (wrk2's correction
/// for coordinated omission).
#[inline]
fn one_call<T: Transport>(
    transport: &mut T,
    config: &RunConfig,
    seq: u64,
    due: Option<Instant>,
    payload: &mut Vec<u8>,
    tally: &mut Tally,
) {
    // A payload unique to the call, so an echo of some other call's bytes cannot pass.
    payload.clear();
    wire::pattern(seq, config.payload as usize, payload);
    let call = Call {
        seq,
        payload,
        reply_len: config.reply,
        delay_us: config.delay_us,
    };
    let mut phases = Phases::default();
    let started = Instant::now();
    let (outcome, server) = match transport.call(&call, &mut phases) {
        Ok(reply) => (verify(&call, reply.seq, reply.body), reply.server),
        Err(e) if e.is_lost() => (Outcome::Lost, None),
        Err(e) => (Outcome::Error(e.kind()), None),
    };
    if outcome == Outcome::Ok {
        transport.end_call();
        let ended = Instant::now();
        tally.latency.record(ended - started);
        if let (Some(due), Some(hist)) = (due, &mut tally.latency_intended) {
            hist.record(ended.saturating_duration_since(due));
        }
        if let Some(d) = phases.dns {
            tally.record_phase(Phase::Dns, d);
        }
        if let Some(d) = phases.connect {
            tally.record_phase(Phase::Connect, d);
        }
        if let Some(d) = phases.first_byte {
            tally.record_phase(Phase::FirstByte, d);
        }
        if let Some(d) = server {
            tally.record_phase(Phase::Server, d);
        }
    } else {
        // After a failure the connection may hold a late reply or be half-closed: start
        // the next call on a clean one.
        transport.reset();
    }
    tally.busy += started.elapsed();
    tally.count(seq, outcome);
}

/// Checks a reply: the call's seq, and exactly the expected bytes.
fn verify(call: &Call, seq: Option<u64>, body: &[u8]) -> Outcome {
    let bytes_ok = match call.reply_len {
        None => body == call.payload,
        Some(n) => body.len() == n as usize && wire::is_pattern(call.seq, body),
    };
    if seq == Some(call.seq) && bytes_ok {
        Outcome::Ok
    } else {
        Outcome::Mismatched
    }
}

/// User and system CPU time of the calling thread so far.
fn thread_cpu() -> (Duration, Duration) {
    use nix::sys::resource::{UsageWho, getrusage};
    let tv = |t: nix::sys::time::TimeVal| {
        Duration::new(t.tv_sec().max(0) as u64, (t.tv_usec().max(0) as u32) * 1000)
    };
    match getrusage(UsageWho::RUSAGE_THREAD) {
        Ok(u) => (tv(u.user_time()), tv(u.system_time())),
        Err(_) => (Duration::ZERO, Duration::ZERO),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verification() {
        let mut payload = Vec::new();
        wire::pattern(9, 8, &mut payload);
        let echo = Call {
            seq: 9,
            payload: &payload,
            reply_len: None,
            delay_us: 0,
        };
        assert_eq!(verify(&echo, Some(9), &payload), Outcome::Ok);
        assert_eq!(verify(&echo, Some(8), &payload), Outcome::Mismatched);
        assert_eq!(verify(&echo, None, &payload), Outcome::Mismatched);
        assert_eq!(verify(&echo, Some(9), &payload[1..]), Outcome::Mismatched);
        let pattern = Call {
            reply_len: Some(8),
            ..echo
        };
        assert_eq!(verify(&pattern, Some(9), &payload), Outcome::Ok);
        let mut corrupt = payload.clone();
        corrupt[3] ^= 0x40;
        assert_eq!(verify(&pattern, Some(9), &corrupt), Outcome::Mismatched);
    }
}
