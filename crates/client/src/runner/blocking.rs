//! The blocking engine: a thread per worker, each with its own transport (one connection
//! or handle) and its own [`Tally`], blocking in the transport's calls. The latency-grade
//! path: one request in flight costs the transport's own system calls and nothing else.

use super::call::{Attempt, count_transport};
use super::{
    CallPool, Finished, Pacer, Quota, RunConfig, RunTransportError, StartLine, add_cpu_since,
    next_seq, run_threads, thread_cpu, warmup_share,
};
use crate::measure::Tally;
use crate::transport::{Endpoint, Transport, TransportKind, WithTransport};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

/// Runs `kind` on `workers` threads; returns the merged tally and the measured wall time.
pub(super) fn run(
    kind: TransportKind,
    endpoint: &Endpoint,
    config: &RunConfig,
    workers: usize,
    done: &AtomicU64,
    pool: &Arc<CallPool>,
) -> Result<(Tally, Duration), RunTransportError> {
    run_threads(workers, &|i| format!("{kind}-{i}"), |index, start_line| {
        let ctx = WorkerCtx {
            config,
            index,
            workers,
            done,
            pool,
            start_line,
        };
        // The one dispatch: from here on the loop is compiled per transport.
        kind.open_with(endpoint, config.timeout, ctx)
            .unwrap_or_else(|e| {
                start_line.abort();
                Err(e.into())
            })
    })
}

/// What a worker needs besides its transport.
struct WorkerCtx<'a> {
    /// What each call asks for, and how many there are.
    config: &'a RunConfig,
    /// This worker's place among the workers: its shares of the calls and the schedule.
    index: usize,
    /// Workers in the run.
    workers: usize,
    /// Calls finished, for the progress display.
    done: &'a AtomicU64,
    /// The run's measured calls, taken one at a time.
    pool: &'a Arc<CallPool>,
    /// Where the worker waits once warm.
    start_line: &'a StartLine,
}

impl WithTransport for WorkerCtx<'_> {
    type Output = Result<Finished, RunTransportError>;

    fn run<T: Transport>(self, transport: T) -> Self::Output {
        worker(transport, self)
    }
}

/// One worker: warm-up, wait for the start, then measured calls while its quota lasts.
fn worker<T: Transport>(
    mut transport: T,
    ctx: WorkerCtx<'_>,
) -> Result<Finished, RunTransportError> {
    let WorkerCtx {
        config,
        index,
        workers,
        done,
        pool,
        start_line,
    } = ctx;
    let mut payload = Vec::with_capacity(config.payload as usize);
    let mut scratch = Tally::default();
    for _ in 0..warmup_share(config.warmup, workers, index) {
        one_call(
            &mut transport,
            config,
            next_seq(),
            None,
            &mut payload,
            &mut scratch,
        );
    }
    drop(scratch);
    let mut tally = Tally::new(config.rate.is_some());
    let in_warmup = transport.counts();
    let mut pacer = Pacer::new(config.rate, workers, index);
    if pacer.is_some() {
        // Sleeps should end when asked, not up to the default 50 µs timer slack later.
        let _ = nix::sys::prctl::set_timerslack(1);
    }
    let start = start_line.wait()?;
    let quota = Quota::new(config, start, workers, index, pool);
    let cpu_before = thread_cpu();
    let mut made = 0u64;
    while quota.more(made) {
        made += 1;
        let due = pacer.as_mut().map(|p| {
            let due = p.next(start, &mut tally.late);
            if !due.wait.is_zero() {
                std::thread::sleep(due.wait);
            }
            due.at
        });
        one_call(
            &mut transport,
            config,
            next_seq(),
            due,
            &mut payload,
            &mut tally,
        );
        done.fetch_add(1, Relaxed);
    }
    let ended = Instant::now();
    add_cpu_since(&mut tally, cpu_before);
    count_transport(&mut tally, transport.counts(), in_warmup);
    tally.per_connection.add(made);
    Ok(Finished { tally, ended })
}

/// Makes, times, verifies and counts one call (see `call.rs`).
#[inline]
fn one_call<T: Transport>(
    transport: &mut T,
    config: &RunConfig,
    seq: u64,
    due: Option<Instant>,
    payload: &mut Vec<u8>,
    tally: &mut Tally,
) {
    let mut attempt = Attempt::start(seq, config, payload);
    let result = transport.call(&attempt.call, &mut attempt.phases);
    let judged = attempt.judge(result);
    if judged.is_ok() {
        transport.end_call();
    } else {
        transport.reset();
    }
    attempt.record(judged, due, tally);
}
