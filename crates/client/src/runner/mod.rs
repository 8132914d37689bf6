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
//! transport with no async side (the curl ones, `grpc`, `grpc-stream`, the HTTP/3 ones)
//! always runs `blocking`.
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
mod config;
mod evloop;
mod limits;
mod workers;

pub use config::{
    Engine, MAX_BLOCKING_WORKERS, MAX_CONCURRENCY, RpcConfig, RunConfig, available_cpus,
    rpc_max_reply,
};
pub use limits::{LoadLimitError, check_limits, files_needed, raise_file_limit};
use workers::{
    CallPool, Finished, Pacer, Quota, StartLine, add_cpu_since, next_seq, run_threads, thread_cpu,
};

use crate::measure::Tally;
use crate::resolve::AddrMode;
use crate::transport::{Endpoint, OpenTransportError, TransportKind};
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

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

#[cfg(test)]
mod tests;
