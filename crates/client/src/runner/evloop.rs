//! The event-loop engine: a few threads (one per CPU this process may use), each a
//! current-thread tokio runtime driving its share of the connections, one task per
//! connection making one call at a time through the transport's async side, as wrk runs
//! one event loop per thread with many connections each.
//!
//! Connection `i` runs on loop `i % loops`. A loop thread has one [`Tally`] for all its
//! connections (a `Tally` per connection would be 10 GB of histograms at 10,000), so the
//! tasks record into it in turn; nothing they share crosses threads but the progress
//! counter and the seq counter, each touched once per batch of calls.
//!
//! A loop runs in two phases on the same runtime. Warm-up: every connection opens and
//! makes its warm-up calls (at most [`CONNECTS_IN_FLIGHT`] connections warming at once),
//! then the loop thread waits at the run's start line with every connection open and idle.
//! Measured: every connection calls while its quota lasts (calls left in the run's pool,
//! or the common `--duration` deadline), paced by its share of `--rate`.

use super::call::{Attempt, count_transport};
use super::{
    CallPool, Finished, NEXT_SEQ, Pacer, Quota, RunConfig, RunTransportError, StartLine,
    add_cpu_since, run_threads, thread_cpu, warmup_share,
};
use crate::measure::Tally;
use crate::transport::{AsyncTransport, Counts, Endpoint, TransportKind, WithAsyncTransport};
use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};
use tokio::sync::Semaphore;
use tokio::task::{JoinHandle, LocalSet};

/// Connections one loop warms up at once. Opening all 10,000 at the same instant would
/// overflow the server's accept queue (a listen backlog is often 128 to 4096), and a SYN
/// dropped there is retried only after a second, which could turn into a connect timeout
/// during warm-up and a measured call that pays a connect. Measured calls of fresh
/// transports are not throttled: their connects are what is measured.
const CONNECTS_IN_FLIGHT: usize = 128;

/// Seqs a loop takes from the process-wide counter at a time: one atomic add per this many
/// calls instead of one per call (the counter's cache line would otherwise bounce between
/// the loop threads' cores on every call). Seqs stay unique, and grow on every connection
/// (a later block starts above an earlier one), which the `tcp` duplicate rule needs.
const SEQ_BLOCK: u64 = 1024;

/// Calls a loop finishes before adding them to the progress counter, for the same reason:
/// at 100,000 calls per second that is a redraw's worth of staleness of 2.5 ms.
const DONE_BATCH: u64 = 256;

/// Runs `kind` over `connections` on `loops` event-loop threads; returns the merged tally
/// and the measured wall time.
pub(super) fn run(
    kind: TransportKind,
    endpoint: &Endpoint,
    config: &RunConfig,
    connections: usize,
    loops: usize,
    done: Arc<AtomicU64>,
    pool: &Arc<CallPool>,
) -> Result<(Tally, Duration), RunTransportError> {
    run_threads(
        loops,
        &|l| format!("{kind}-loop-{l}"),
        |first, start_line| {
            let ctx = LoopCtx {
                endpoint,
                config,
                connections,
                mine: (first..connections).step_by(loops).collect(),
                done: done.clone(),
                pool: pool.clone(),
                start_line,
            };
            // The one dispatch: from here on the loop is compiled per transport.
            kind.with_async(ctx).unwrap_or_else(|| {
                start_line.abort();
                Err(super::LoadLimitError::NoEventLoop { kind }.into())
            })
        },
    )
}

/// What a loop thread needs besides its transports.
struct LoopCtx<'a> {
    /// Where the calls go.
    endpoint: &'a Endpoint,
    /// What each call asks for, and how many there are.
    config: &'a RunConfig,
    /// Connections in the whole run.
    connections: usize,
    /// The indexes (among all connections) of this loop's connections.
    mine: Vec<usize>,
    /// The run's progress counter.
    done: Arc<AtomicU64>,
    /// The run's measured calls, taken one at a time by every loop's connections.
    pool: Arc<CallPool>,
    /// Where the loop waits with its connections warm.
    start_line: &'a StartLine,
}

impl WithAsyncTransport for LoopCtx<'_> {
    type Output = Result<Finished, RunTransportError>;

    fn run<T: AsyncTransport>(self) -> Self::Output {
        event_loop::<T>(self)
    }
}

/// What a loop's connection tasks share. Tasks run one at a time on the loop's thread, so
/// plain cells do; no task holds a borrow across an `await`.
struct Shared {
    /// The run's settings (a copy: tasks must own what they hold).
    config: RunConfig,
    /// Connections in the whole run, for each connection's shares.
    connections: usize,
    /// The seq block being handed out: next, and one past the last.
    seqs: Cell<(u64, u64)>,
    /// The run's progress counter.
    done: Arc<AtomicU64>,
    /// The run's measured calls, taken one at a time by every loop's connections.
    pool: Arc<CallPool>,
    /// Calls finished here not yet added to `done`.
    undone: Cell<u64>,
    /// What the measured calls of every connection of this loop measured.
    tally: RefCell<Tally>,
    /// Where warm-up calls are recorded, to be thrown away.
    scratch: RefCell<Tally>,
}

impl Shared {
    /// The next seq, from this loop's block.
    #[inline]
    fn next_seq(&self) -> u64 {
        let (mut next, mut end) = self.seqs.get();
        if next == end {
            next = NEXT_SEQ.fetch_add(SEQ_BLOCK, Relaxed);
            end = next + SEQ_BLOCK;
        }
        self.seqs.set((next + 1, end));
        next
    }

    /// Counts one finished measured call for the progress display.
    #[inline]
    fn call_done(&self) {
        let undone = self.undone.get() + 1;
        if undone == DONE_BATCH {
            self.done.fetch_add(undone, Relaxed);
            self.undone.set(0);
        } else {
            self.undone.set(undone);
        }
    }

    /// Adds the calls not yet counted to the progress counter.
    fn flush_done(&self) {
        self.done.fetch_add(self.undone.replace(0), Relaxed);
    }
}

/// One loop thread: its runtime, the warm-up, the start line, the measured calls.
fn event_loop<T: AsyncTransport>(ctx: LoopCtx<'_>) -> Result<Finished, RunTransportError> {
    let LoopCtx {
        endpoint,
        config,
        connections,
        mine,
        done,
        pool,
        start_line,
    } = ctx;
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            start_line.abort();
            return Err(RunTransportError::Runtime(e));
        }
    };
    // Tasks that hold `!Send` state (the shared cells, the transports' futures) run on a
    // local set, on this thread only.
    let local = LocalSet::new();
    let shared = Rc::new(Shared {
        config: config.clone(),
        connections,
        seqs: Cell::new((0, 0)),
        done,
        pool,
        undone: Cell::new(0),
        tally: RefCell::new(Tally::new(config.rate.is_some())),
        scratch: RefCell::new(Tally::default()),
    });

    let warmed: Vec<T> = local.block_on(&rt, async {
        let gate = Rc::new(Semaphore::new(CONNECTS_IN_FLIGHT));
        let tasks: Vec<_> = mine
            .iter()
            .map(|&index| {
                let transport = T::open(endpoint.clone(), config.timeout);
                tokio::task::spawn_local(warm_up(transport, index, shared.clone(), gate.clone()))
            })
            .collect();
        join_all(tasks).await
    });
    shared.scratch.take();
    let in_warmup: Counts = warmed.iter().map(AsyncTransport::counts).sum();

    let start = start_line.wait()?;
    let cpu_before = thread_cpu();
    let finished: Vec<(T, u64)> = local.block_on(&rt, async {
        let tasks: Vec<_> = warmed
            .into_iter()
            .zip(&mine)
            .map(|(transport, &index)| {
                tokio::task::spawn_local(measured(transport, index, shared.clone(), start))
            })
            .collect();
        join_all(tasks).await
    });
    let ended = Instant::now();
    shared.flush_done();
    let mut tally = shared.tally.take();
    add_cpu_since(&mut tally, cpu_before);
    for (_, made) in &finished {
        tally.per_connection.add(*made);
    }
    let at_end: Counts = finished.iter().map(|(t, _)| t.counts()).sum();
    count_transport(&mut tally, at_end, in_warmup);
    // The connections close after `ended`, all at once: tearing 10,000 sockets down is not
    // part of the measured window. Those whose close the runtime sends (QUIC) send it now.
    local.block_on(&rt, async {
        let tasks: Vec<_> = finished
            .into_iter()
            .map(|(mut transport, _)| {
                tokio::task::spawn_local(async move { transport.close().await })
            })
            .collect();
        join_all(tasks).await
    });
    Ok(Finished { tally, ended })
}

/// Awaits every task in order and returns their outputs; a task that panicked panics here
/// too, as a worker thread's panic does when it is joined.
async fn join_all<O>(tasks: Vec<JoinHandle<O>>) -> Vec<O> {
    let mut outputs = Vec::with_capacity(tasks.len());
    for task in tasks {
        match task.await {
            Ok(output) => outputs.push(output),
            Err(e) => match e.try_into_panic() {
                Ok(panic) => std::panic::resume_unwind(panic),
                // Only a runtime shutting down cancels a task, and this one is running.
                Err(e) => unreachable!("a connection task was cancelled: {e}"),
            },
        }
    }
    outputs
}

/// One connection's warm-up: its share of the warm-up calls, recorded nowhere that counts.
async fn warm_up<T: AsyncTransport>(
    mut transport: T,
    index: usize,
    shared: Rc<Shared>,
    gate: Rc<Semaphore>,
) -> T {
    let calls = warmup_share(shared.config.warmup, shared.connections, index);
    if calls == 0 {
        return transport;
    }
    // The semaphore is never closed, so acquiring fails never; if it did, warming up
    // without the limit would still be correct.
    let _permit = gate.acquire().await.ok();
    let mut payload = Vec::with_capacity(shared.config.payload as usize);
    for _ in 0..calls {
        let seq = shared.next_seq();
        one_call(
            &mut transport,
            &shared.config,
            seq,
            None,
            &mut payload,
            &shared.scratch,
        )
        .await;
    }
    transport
}

/// One connection's measured calls; returns the transport (for its counters) and how
/// many calls it made.
async fn measured<T: AsyncTransport>(
    mut transport: T,
    index: usize,
    shared: Rc<Shared>,
    start: Instant,
) -> (T, u64) {
    let config = &shared.config;
    let quota = Quota::new(config, start, shared.connections, index, &shared.pool);
    let mut pacer = Pacer::new(config.rate, shared.connections, index);
    let mut payload = Vec::with_capacity(config.payload as usize);
    let mut made = 0u64;
    let mut late = 0u64;
    while quota.more(made) {
        made += 1;
        let due = match &mut pacer {
            None => None,
            Some(pacer) => {
                let due = pacer.next(start, &mut late);
                // tokio's timers tick in milliseconds: a paced call starts up to a
                // millisecond after it was due, which the corrected latency includes.
                if !due.wait.is_zero() {
                    tokio::time::sleep_until(due.at.into()).await;
                }
                Some(due.at)
            }
        };
        let seq = shared.next_seq();
        one_call(
            &mut transport,
            config,
            seq,
            due,
            &mut payload,
            &shared.tally,
        )
        .await;
        shared.call_done();
    }
    shared.tally.borrow_mut().late += late;
    (transport, made)
}

/// Makes, times, verifies and counts one call (see `call.rs`): the blocking engine's
/// `one_call` with the transport's call awaited.
#[inline]
async fn one_call<T: AsyncTransport>(
    transport: &mut T,
    config: &RunConfig,
    seq: u64,
    due: Option<Instant>,
    payload: &mut Vec<u8>,
    tally: &RefCell<Tally>,
) {
    let mut attempt = Attempt::start(seq, config, payload);
    let judged = attempt.make(transport).await;
    attempt.record(judged, due, &mut tally.borrow_mut());
}
