//! What a run is asked to do ([`RunConfig`]) and on which engine ([`Engine`]): blocking
//! workers or event loops.

use super::limits::LoadLimitError;
use crate::transport::TransportKind;
use std::time::Duration;

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
    /// unless this is 0 (see [`warmup_share`](super::warmup_share)).
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
