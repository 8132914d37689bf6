//! The load engine: runs one transport over N connections and returns the merged [`Tally`].
//!
//! Two engines make the calls ([`Engine`]):
//!
//! - `blocking` (`blocking.rs`): a thread per worker, each with its own connection or
//!   handle and its own [`Tally`], blocking in `recv`. One request in flight costs two
//!   system calls per round trip and no wake-up hand-off, which is what a latency figure
//!   wants (`tcp -c 1` stays within 1.1 times sockperf), but a thread and about 1 MB of
//!   histograms per worker, so it stops at [`MAX_BLOCKING_WORKERS`].
//! - `evloop` (`evloop.rs`): one event-loop thread per CPU this process may run on (a
//!   current-thread tokio runtime each), each driving many connections through the
//!   transport's [`AsyncTransport`](crate::transport::AsyncTransport) side, with one
//!   `Tally` per thread, as wrk does. Up to [`MAX_CONCURRENCY`] connections.
//!
//! `auto` (the default) runs `blocking` while there are no more connections than CPUs
//! (each worker then has a core to itself, and an event loop would only add an
//! `epoll_wait` per call) and `evloop` above that, where threads would take turns on the
//! cores and pay a context switch per call. A transport whose workers share one
//! connection (`h2-mux`, `grpc-mux`) always runs on one event loop: its tasks and the
//! connection's then take turns on one thread with no switch per call, as h2load's do. A
//! transport with no async side (the curl ones, `grpc`, `grpc-stream`) always runs
//! `blocking`.
//!
//! Both engines make a call the same way (`call.rs`: one payload per call, one clock, the
//! same verification, counting and recording), split the warm-up the same way
//! ([`warmup_share`]), warm every connection up before the clock starts, start them all
//! together (one start line for all threads), let every connection take the measured
//! calls from one pool as it becomes free (`CallPool`), and give every connection the
//! same `--duration` window and its own share of the `--rate` schedule. Each call is timed with the monotonic
//! clock from before the transport is asked to call (connect included for fresh
//! transports) until its reply has been verified.
//!
//! Layer 3 of the map in `lib.rs` (client): uses the transports and the layers below.

mod blocking;
pub mod call;
mod evloop;
mod limits;

pub use limits::{LoadLimitError, check_limits, files_needed, raise_file_limit};

use crate::measure::Tally;
use crate::resolve::AddrMode;
use crate::transport::{Endpoint, OpenTransportError, TransportKind};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// Most connections (`-c`) a run may have: what one client machine can hold open with
/// the event loop (about 5 KB of buffers each) and what rpcbench-echo accepts by default
/// (`--max-connections`).
pub const MAX_CONCURRENCY: u16 = 10_000;

/// Most worker threads of the blocking engine: each keeps about 1 MB of histograms and a
/// thread stack, and beyond this many threads on a few cores the context switches, not
/// the calls, are what is measured.
pub const MAX_BLOCKING_WORKERS: usize = 1024;

/// How much work a run does and what each call asks for.
#[derive(Debug, Clone)]
pub struct RunConfig {
    /// Measured calls per transport, divided evenly among the connections; ignored when
    /// `duration` is set.
    pub calls: u64,
    /// Run each transport for this long instead of a fixed number of calls.
    pub duration: Option<Duration>,
    /// Uncounted calls before measuring, spread over the connections, at least one each
    /// unless this is 0 (see [`warmup_share`]).
    pub warmup: u64,
    /// Connections (workers on the blocking engine), each with its own connection or handle.
    pub concurrency: usize,
    /// Request payload size in bytes.
    pub payload: u32,
    /// Ask for a pattern reply of this size instead of an echo.
    pub reply: Option<u32>,
    /// The largest reply payload accepted; `None`: the reply asked for (`reply`, else the
    /// echo of `payload`). A larger reply fails its call as `reply_above_max`.
    pub max_reply: Option<u32>,
    /// Server-side delay asked for each call.
    pub delay_us: u32,
    /// Longest a call may take before it counts as lost.
    pub timeout: Duration,
    /// Start calls at this rate (per second, over all connections) instead of back to back.
    pub rate: Option<f64>,
    /// Which engine makes the calls.
    pub engine: Engine,
    /// Encoded calls (`--encoding`, `--message`) instead of the opaque echo: `payload`
    /// and `reply` are then unused.
    pub rpc: Option<RpcConfig>,
}

/// What an encoded run sends: one encoding, one message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RpcConfig {
    pub encoding: crate::encoding::EncodingKind,
    pub message: crate::encoding::Message,
}

/// The largest reply accepted for an encoded request of `body` bytes when `--max-reply`
/// is not given: four times the request plus 64 KiB, as other servers write the same values
/// in more bytes (Python's json writes `é` as `\u00e9`, xmlrpc.client wraps base64).
pub fn rpc_max_reply(body: usize) -> usize {
    body.saturating_mul(4).saturating_add(64 << 10)
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
            max_reply: None,
            delay_us: 0,
            timeout: Duration::from_secs(5),
            rate: None,
            engine: Engine::Auto,
            rpc: None,
        }
    }
}

/// Which engine makes a run's calls (see the module docs). The names are the CLI's.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, clap::ValueEnum, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Engine {
    /// blocking up to one connection per CPU, evloop above.
    Auto,
    /// A thread per worker, blocking calls (at most 1024 workers).
    Blocking,
    /// A few event-loop threads, many connections each (every transport but the curl ones,
    /// grpc and grpc-stream); one thread for a shared connection (h2-mux, grpc-mux).
    Evloop,
}

impl Engine {
    /// The stable lowercase name.
    pub fn name(self) -> &'static str {
        match self {
            Engine::Auto => "auto",
            Engine::Blocking => "blocking",
            Engine::Evloop => "evloop",
        }
    }

    /// The engine a run of `kind` over `connections` gets (never `Auto`), or why it
    /// cannot have one. `cpus` is how many CPUs this process may run on.
    pub fn pick(
        self,
        kind: TransportKind,
        connections: usize,
        cpus: usize,
    ) -> Result<Engine, LoadLimitError> {
        if connections > usize::from(MAX_CONCURRENCY) {
            return Err(LoadLimitError::TooManyConnections {
                asked: connections,
                max: MAX_CONCURRENCY,
            });
        }
        let engine = match self {
            Engine::Auto if connections > cpus && kind.has_async() => Engine::Evloop,
            // Workers that share one connection do best as tasks of one event loop, as
            // h2load drives a connection's streams from one thread: on the blocking
            // engine every reply is a thread switch to its worker, one worker too (the
            // connection's task runs on a thread of its own there: grpc-mux -c 1 took
            // 1.5 times grpc -c 1 so, 1.05 times on the loop).
            Engine::Auto if kind.shared() && kind.has_async() => Engine::Evloop,
            Engine::Auto => Engine::Blocking,
            chosen => chosen,
        };
        match engine {
            Engine::Evloop if !kind.has_async() => Err(LoadLimitError::NoEventLoop { kind }),
            Engine::Blocking if connections > MAX_BLOCKING_WORKERS => {
                Err(LoadLimitError::TooManyWorkers {
                    kind,
                    asked: connections,
                    max: MAX_BLOCKING_WORKERS,
                    evloop: kind.has_async(),
                })
            }
            engine => Ok(engine),
        }
    }
}

impl std::fmt::Display for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// CPUs this process may run on (its affinity mask and cgroup quota, not the machine's
/// count): with `taskset -c 1` that is 1, so `auto` and the event loop size themselves to
/// the core they were given.
pub fn available_cpus() -> usize {
    std::thread::available_parallelism().map_or(1, std::num::NonZero::get)
}

/// A transport's merged result.
#[derive(Debug, Clone)]
pub struct TransportRun {
    /// The transport that ran.
    pub kind: TransportKind,
    /// How the target's name was resolved.
    pub mode: AddrMode,
    /// How the connections were secured.
    pub security: crate::transport::tls::Security,
    /// What the run's TLS handshakes negotiated, when it had any.
    pub tls: Option<crate::transport::tls::Negotiated>,
    /// True when the server's certificate was not verified (`--insecure`).
    pub insecure: bool,
    /// Lookups or DNS queries the run asked for (see [`crate::resolve::Names::queries`]).
    pub dns_queries: u64,
    /// The first name-lookup failure, worded for a person.
    pub dns_error: Option<String>,
    /// Name lookups made (one per new connection; none in mode `ip`).
    pub dns_lookups: u64,
    /// Queries the target's DNS responder counted during the run, when it has one and
    /// could be asked (set by the caller, which can reach the server's counters).
    pub dns_responder_queries: Option<u64>,
    /// The names one lookup tries, in order, from the resolver configuration's search
    /// list (modes `system` and `uncached-search`; set by the caller).
    pub dns_search: Vec<String>,
    /// What the run measured, merged over its threads.
    pub tally: Tally,
    /// Wall time of the measured part: from the common start until the last measured call
    /// ended (tearing connections down afterwards is not in it).
    pub elapsed: Duration,
    /// Connections asked for (`-c`): workers on the blocking engine.
    pub workers: usize,
    /// The engine that made the calls (`Blocking` or `Evloop`).
    pub engine: Engine,
    /// Threads that made the calls: one per worker, or the event-loop threads.
    pub threads: usize,
    /// The `TCP_INFO` of the run's connections, each read when it closed (all of them
    /// closed before the run returns, shared ones too); empty for a transport whose
    /// sockets rpcbench cannot reach.
    pub tcp_info: crate::tcpinfo::TcpInfoRecord,
    /// Calls the run's connections carried: the measured ones and the warm-up.
    pub calls_carried: u64,
    /// The mean latency of ok calls of each round merged into this run, µs, in the order
    /// the rounds ran (one entry per round that had an ok call): how far rounds disagree
    /// is the run-to-run noise of the figure (a run record's `spread`).
    pub round_means_us: Vec<f64>,
    /// The encoding and message of an encoded run (`--encoding`); `None` for the echo.
    pub rpc: Option<RpcConfig>,
    /// What the server's own threads spent over the run (warm-up included), when the
    /// caller read its counters around it (encoded runs).
    pub server_use: Option<crate::server::stats::ServerUse>,
}

impl TransportRun {
    /// Mean calls in flight over the measured window: time spent in calls over wall time.
    /// Below the connections asked for when some sat idle (one that finished its share
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
        self.tcp_info += &other.tcp_info;
        self.calls_carried += other.calls_carried;
        self.round_means_us.extend_from_slice(&other.round_means_us);
        self.server_use = match (self.server_use, other.server_use) {
            (Some(mut mine), Some(theirs)) => {
                mine += theirs;
                Some(mine)
            }
            _ => None,
        };
        self.dns_lookups += other.dns_lookups;
        self.dns_responder_queries = self
            .dns_responder_queries
            .zip(other.dns_responder_queries)
            .map(|(a, b)| a + b);
        if self.dns_error.is_none() {
            self.dns_error.clone_from(&other.dns_error);
        }
    }
}

/// Why a transport run could not be made. Failed calls are not here: they are counted in
/// the [`Tally`].
#[derive(Debug, thiserror::Error)]
pub enum RunTransportError {
    /// The run asks for more than this engine, transport or process allows.
    #[error(transparent)]
    Limit(#[from] LoadLimitError),
    /// The run's encoding is one the transport cannot carry.
    #[error("{kind} cannot carry {encoding}-encoded calls")]
    NotCarried {
        kind: TransportKind,
        encoding: crate::encoding::EncodingKind,
    },
    /// An engine thread could not be started.
    #[error("cannot start thread {thread}")]
    Spawn {
        /// The thread's name (`tcp-17`, `tcp-loop-0`).
        thread: String,
        #[source]
        source: std::io::Error,
    },
    /// An event-loop thread's tokio runtime could not be built.
    #[error("cannot build an event loop's tokio runtime")]
    Runtime(#[source] std::io::Error),
    /// A worker's transport could not be opened.
    #[error(transparent)]
    Open(#[from] OpenTransportError),
    /// Another engine thread failed before the start, so this one stopped; the run's
    /// error is that thread's.
    #[error("the run was stopped before it started")]
    Aborted,
}

/// Connection `index`'s share of `total` calls split over `connections`: the remainder goes
/// one each to the first connections, so shares differ by one at most.
pub fn share(total: u64, connections: usize, index: usize) -> u64 {
    let connections = connections.max(1) as u64;
    total / connections + u64::from((index as u64) < total % connections)
}

/// Connection `index`'s warm-up calls: its share of `warmup`, but at least one, so that
/// every connection has connected and made a call before the clock starts and no measured
/// call of a persistent transport pays for a connect. `--warmup 0` means none at all, for
/// a reader who wants the first call's cost in the figures.
pub fn warmup_share(warmup: u64, connections: usize, index: usize) -> u64 {
    if warmup == 0 {
        0
    } else {
        share(warmup, connections, index).max(1)
    }
}

/// Seqs are unique within the process, across transports and rounds, so a reply that
/// strays from one run into another is still recognised as not ours.
static NEXT_SEQ: AtomicU64 = AtomicU64::new(1);

/// Runs one transport to completion. `done` counts finished calls for a progress display.
///
/// For tests and callers that treat a run that cannot start as a bug: it panics with the
/// reason where [`try_run_transport`] returns it.
pub fn run_transport(
    kind: TransportKind,
    endpoint: &Endpoint,
    config: &RunConfig,
    done: Arc<AtomicU64>,
) -> TransportRun {
    try_run_transport(kind, endpoint, config, done)
        .unwrap_or_else(|e| panic!("{kind} run could not start: {e}"))
}

/// Runs one transport to completion, or says why it could not run: a limit (the engine,
/// the transport, the process's open-file limit) or a resource (a thread, a runtime) that
/// could not be had. `done` counts finished calls for a progress display.
pub fn try_run_transport(
    kind: TransportKind,
    endpoint: &Endpoint,
    config: &RunConfig,
    done: Arc<AtomicU64>,
) -> Result<TransportRun, RunTransportError> {
    let connections = config.concurrency.max(1);
    if let Some(rpc) = config.rpc
        && !kind.carries(rpc.encoding)
    {
        return Err(RunTransportError::NotCarried {
            kind,
            encoding: rpc.encoding,
        });
    }
    // A connection shared by the workers of an earlier run (h2-mux) must not carry over.
    let run_endpoint = endpoint.for_run();
    let endpoint = &run_endpoint;
    let cpus = available_cpus();
    let engine = config.engine.pick(kind, connections, cpus)?;
    // The client's own descriptors; a server in the same process is the caller's to
    // count (see `check_limits`).
    limits::check_files(kind, connections, engine, false)?;
    let pool = Arc::new(CallPool::new(config.calls));
    let (tally, elapsed, threads) = match engine {
        Engine::Evloop => {
            // One connection is driven from one thread: the tasks sharing it run on its
            // loop, and more loops would only add thread switches to its every reply.
            let loops = if kind.shared() {
                1
            } else {
                cpus.min(connections)
            };
            let (tally, elapsed) =
                evloop::run(kind, endpoint, config, connections, loops, done, &pool)?;
            (tally, elapsed, loops)
        }
        Engine::Blocking | Engine::Auto => {
            let (tally, elapsed) =
                blocking::run(kind, endpoint, config, connections, &done, &pool)?;
            (tally, elapsed, connections)
        }
    };
    let mut run = TransportRun {
        kind,
        mode: endpoint.names.mode(),
        security: endpoint.security(),
        tls: endpoint.tls.as_ref().and_then(|t| t.negotiated()),
        insecure: endpoint.tls.as_ref().is_some_and(|t| t.insecure()),
        dns_queries: endpoint.names.queries(),
        dns_error: endpoint.names.first_error(),
        dns_lookups: endpoint.names.lookups(),
        dns_responder_queries: None,
        dns_search: Vec::new(),
        calls_carried: tally.calls()
            + (0..connections)
                .map(|i| warmup_share(config.warmup, connections, i))
                .sum::<u64>(),
        round_means_us: tally
            .latency
            .summary()
            .map(|s| s.mean)
            .into_iter()
            .collect(),
        tally,
        elapsed,
        workers: connections,
        engine,
        threads,
        tcp_info: Default::default(),
        rpc: config.rpc,
        server_use: None,
    };
    // The workers' connections closed with their threads; a connection the workers
    // shared (h2-mux, grpc-mux) lives in the run's shared state, closed by dropping it,
    // so that its closing TCP_INFO is in the sums too.
    let tcp_info = run_endpoint.tcp_info.clone();
    drop(run_endpoint);
    run.tcp_info = tcp_info.snapshot();
    Ok(run)
}

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
enum Quota {
    /// Calls taken from the run's pool.
    Pool(Arc<CallPool>),
    /// This many calls.
    Calls(u64),
    /// Calls started before this instant.
    Until(Instant),
}

impl Quota {
    /// Connection `index`'s quota in a run that started at `start`, sharing `pool`.
    fn new(
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
    fn more(&self, made: u64) -> bool {
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
struct Pacer {
    /// Time between this connection's calls: connections / rate.
    interval: Duration,
    /// Offset of this connection's first call from the start.
    offset: Duration,
    /// Calls already scheduled.
    n: u32,
}

/// When the next call of a [`Pacer`] is due, and how long to wait for it.
struct Due {
    /// The intended start, from which the corrected latency is timed.
    at: Instant,
    /// Zero when the call is already due.
    wait: Duration,
}

impl Pacer {
    fn new(rate: Option<f64>, connections: usize, index: usize) -> Option<Pacer> {
        let interval = Duration::from_secs_f64(connections as f64 / rate?);
        Some(Pacer {
            interval,
            offset: interval.mul_f64(index as f64 / connections as f64),
            n: 0,
        })
    }

    /// Schedules the next call, counting it in `late` when it is more than an interval
    /// behind; the caller waits `wait` (each engine in its own way).
    fn next(&mut self, start: Instant, late: &mut u64) -> Due {
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
struct Finished {
    /// What its calls measured.
    tally: Tally,
    /// When its last measured call ended.
    ended: Instant,
}

/// Where every engine thread, and the thread that times the run, meets once warm-up is
/// over, so the clock starts for all of them at once. Unlike [`std::sync::Barrier`] it can
/// be called off: a thread that fails before the start (it could not be spawned, its
/// runtime could not be built) aborts it, and those already waiting stop instead of
/// waiting forever.
struct StartLine {
    /// Threads that must arrive before any goes on.
    parties: usize,
    state: Mutex<Gate>,
    changed: Condvar,
}

/// The state of a [`StartLine`].
#[derive(Default)]
struct Gate {
    /// Parties waiting (or gone through).
    arrived: usize,
    /// Every party arrived: the run has started.
    open: bool,
    /// The start was called off.
    aborted: bool,
    /// When the last party arrived: the run's one start instant, which every party takes
    /// (each waking a little later would otherwise start its own clock a little later).
    opened_at: Option<Instant>,
}

impl StartLine {
    fn new(parties: usize) -> StartLine {
        StartLine {
            parties,
            state: Mutex::new(Gate::default()),
            changed: Condvar::new(),
        }
    }

    /// Waits until every party has arrived (`Ok`, with the instant the last one did) or
    /// the start was called off.
    fn wait(&self) -> Result<Instant, RunTransportError> {
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
    fn abort(&self) {
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
fn run_threads<F>(
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

/// Records the CPU time a thread spent since `before` (from [`thread_cpu`]) in `tally`.
fn add_cpu_since(tally: &mut Tally, before: (Duration, Duration)) {
    let after = thread_cpu();
    tally.cpu_user += after.0.saturating_sub(before.0);
    tally.cpu_sys += after.1.saturating_sub(before.1);
}

/// Takes the next seq from the process-wide counter.
#[inline]
fn next_seq() -> u64 {
    NEXT_SEQ.fetch_add(1, Relaxed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_cover_every_call_and_differ_by_one_at_most() {
        for (total, connections) in [(10, 3), (2000, 2000), (7, 1), (10_000, 64)] {
            let shares: Vec<u64> = (0..connections)
                .map(|i| share(total, connections, i))
                .collect();
            assert_eq!(shares.iter().sum::<u64>(), total);
            let (min, max) = (shares.iter().min(), shares.iter().max());
            assert!(max.unwrap() - min.unwrap() <= 1, "{shares:?}");
        }
        assert_eq!(warmup_share(100, 10_000, 9_999), 1);
        assert_eq!(warmup_share(0, 4, 0), 0);
    }

    #[test]
    fn a_pool_gives_out_each_call_once_among_threads() {
        let pool = CallPool::new(10_000);
        let taken: u64 = std::thread::scope(|s| {
            let threads: Vec<_> = (0..4)
                .map(|_| s.spawn(|| std::iter::from_fn(|| pool.take().then_some(())).count()))
                .collect();
            threads.into_iter().map(|t| t.join().unwrap() as u64).sum()
        });
        assert_eq!(taken, 10_000);
        assert!(!pool.take(), "an empty pool stays empty");
        // A paced run keeps each connection's share of the schedule; a timed one its window.
        let paced = RunConfig {
            calls: 10,
            rate: Some(100.0),
            ..RunConfig::default()
        };
        let pool = Arc::new(CallPool::new(10));
        let quota = Quota::new(&paced, Instant::now(), 3, 0, &pool);
        assert!(matches!(quota, Quota::Calls(4)), "{quota:?}");
        let quota = Quota::new(&RunConfig::default(), Instant::now(), 3, 0, &pool);
        assert!(matches!(quota, Quota::Pool(_)), "{quota:?}");
    }

    #[test]
    fn engines_by_connections_and_transport() {
        use TransportKind::*;
        let cpus = 2;
        let pick = |engine: Engine, kind, c| engine.pick(kind, c, cpus);
        assert_eq!(pick(Engine::Auto, Tcp, 1).unwrap(), Engine::Blocking);
        assert_eq!(pick(Engine::Auto, Tcp, 2).unwrap(), Engine::Blocking);
        assert_eq!(pick(Engine::Auto, Tcp, 3).unwrap(), Engine::Evloop);
        assert_eq!(pick(Engine::Auto, CurlReuse, 64).unwrap(), Engine::Blocking);
        // A shared connection goes to one event loop, one worker or many.
        assert_eq!(pick(Engine::Auto, H2Mux, 1).unwrap(), Engine::Evloop);
        assert_eq!(pick(Engine::Auto, H2Mux, 2).unwrap(), Engine::Evloop);
        assert_eq!(pick(Engine::Auto, GrpcMux, 1).unwrap(), Engine::Evloop);
        assert_eq!(pick(Engine::Auto, GrpcMux, 64).unwrap(), Engine::Evloop);
        assert_eq!(pick(Engine::Auto, H2, 2).unwrap(), Engine::Blocking);
        assert_eq!(pick(Engine::Auto, Grpc, 64).unwrap(), Engine::Blocking);
        assert_eq!(
            pick(Engine::Evloop, HttpKeepalive, 1).unwrap(),
            Engine::Evloop
        );
        assert_eq!(pick(Engine::Blocking, Tcp, 1024).unwrap(), Engine::Blocking);
        assert!(matches!(
            pick(Engine::Auto, CurlFresh, 1025),
            Err(LoadLimitError::TooManyWorkers { max: 1024, .. })
        ));
        assert!(matches!(
            pick(Engine::Blocking, Tcp, 1025),
            Err(LoadLimitError::TooManyWorkers { evloop: true, .. })
        ));
        assert!(matches!(
            pick(Engine::Evloop, CurlReuse, 8),
            Err(LoadLimitError::NoEventLoop { .. })
        ));
        assert!(matches!(
            pick(Engine::Auto, Tcp, 10_001),
            Err(LoadLimitError::TooManyConnections { .. })
        ));
        let curl_message = pick(Engine::Auto, CurlReuse, 2000).unwrap_err().to_string();
        assert!(curl_message.contains("1024"), "{curl_message}");
    }

    #[test]
    fn pacer_staggers_connections_and_counts_late_calls() {
        let start = Instant::now();
        let mut late = 0;
        // 1000 calls/s over 4 connections: each calls every 4 ms, the second 1 ms after
        // the first.
        let mut second = Pacer::new(Some(1000.0), 4, 1).unwrap();
        let first_due = second.next(start, &mut late);
        assert_eq!(first_due.at - start, Duration::from_millis(1));
        assert_eq!(
            second.next(start, &mut late).at - start,
            Duration::from_millis(5)
        );
        // A schedule that started long ago: its next call is late, and not waited for.
        let long_ago = start - Duration::from_secs(1);
        let due = second.next(long_ago, &mut late);
        assert_eq!((due.wait, late), (Duration::ZERO, 1));
        assert!(Pacer::new(None, 4, 1).is_none());
    }

    #[test]
    fn a_thread_that_fails_before_the_start_stops_the_others() {
        let started = std::sync::atomic::AtomicUsize::new(0);
        let result = run_threads(4, &|i| format!("test-{i}"), |i, start_line| {
            if i == 2 {
                start_line.abort();
                return Err(RunTransportError::Runtime(std::io::Error::other("no fds")));
            }
            start_line.wait()?;
            started.fetch_add(1, Relaxed);
            Ok(Finished {
                tally: Tally::default(),
                ended: Instant::now(),
            })
        });
        assert!(
            matches!(result, Err(RunTransportError::Runtime(_))),
            "{result:?}"
        );
        assert_eq!(
            started.load(Relaxed),
            0,
            "no thread went past the start line"
        );
        let ok = run_threads(3, &|i| format!("test-{i}"), |_, start_line| {
            start_line.wait()?;
            let mut tally = Tally::default();
            tally.per_connection.add(1);
            Ok(Finished {
                tally,
                ended: Instant::now(),
            })
        });
        let (tally, _) = ok.unwrap();
        assert_eq!(tally.per_connection.connections, 3);
    }

    #[test]
    fn a_start_line_called_off_releases_those_waiting() {
        let line = StartLine::new(3);
        std::thread::scope(|s| {
            let waiting = s.spawn(|| line.wait());
            std::thread::sleep(Duration::from_millis(20));
            line.abort();
            assert!(matches!(
                waiting.join().unwrap(),
                Err(RunTransportError::Aborted)
            ));
        });
        let line = StartLine::new(2);
        std::thread::scope(|s| {
            let other = s.spawn(|| line.wait());
            assert!(line.wait().is_ok());
            assert!(other.join().unwrap().is_ok());
        });
    }
}
