//! A whole benchmark run as one library call: what the client does between parsing its
//! arguments and printing the result.
//!
//! [`run`] starts the embedded server when there is no target, works out the plan (the
//! name being called, its ports, the address modes, the resolver), checks once that the
//! name resolves in each mode, runs every (transport, mode) job for the rounds asked for
//! (reversing the order every other round), merges the rounds, asks the server for its
//! counters and assembles the [`Report`]. The command line keeps only clap, the progress
//! bar and the exit status; tests call this directly.
//!
//! Layer 7 of the map in `lib.rs` (apps): uses every layer below; it prints nothing (warnings go to the log), and the CLI renders what it returns.

mod embedded;
mod plan;
mod rounds;
mod session;
use crate::placement::{PlaceThreadsError, Placement};
use crate::preflight::ServerIdentity;
use crate::report::{Report, rfc3339_now};
use crate::resolve::{AddrMode, Family, ResolveNameError};
use crate::runner::{RunConfig, RunTransportError};
use crate::server::StartHandleError;
use crate::transport::TransportKind;
use crate::transport::tls::{BuildTlsError, Security};
use embedded::{EMBEDDED_SHUTDOWN_GRACE, SocketDir, start_embedded};
use plan::{Plan, security_modes, tls_options};
use rounds::{Job, fetch_server_stats, rpcs_for, run_jobs};
pub use session::Session;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

/// Everything a run needs to know: what to call, how, and how much.
#[derive(Debug, Clone)]
pub struct BenchSpec {
    /// The host to call (IP literal or name); `None` starts the embedded server.
    pub target: Option<String>,
    /// The target's raw TCP port (ignored for the embedded server).
    pub tcp_port: u16,
    /// The target's HTTP port (ignored for the embedded server).
    pub http_port: u16,
    /// The target's UDP port; without it a target's `udp` is not run (ignored for the
    /// embedded server, which always has one).
    pub udp_port: Option<u16>,
    /// The target's QUIC port; without it a target's QUIC transports are not run
    /// (ignored for the embedded server, which always has one).
    pub quic_port: Option<u16>,
    /// The target's Unix socket (same host); without it a target's `unix` is not run
    /// (ignored for the embedded server, which makes one in a temporary directory).
    pub unix: Option<std::path::PathBuf>,
    /// What each call asks for and how many calls there are.
    pub run: RunConfig,
    /// Transports to run, in order.
    pub transports: Vec<TransportKind>,
    /// Address modes; `None` picks the defaults (see [`default_modes`]).
    pub names: Option<Vec<AddrMode>>,
    /// The DNS server for `cached` and `uncached` (default: resolv.conf's, or the embedded
    /// responder).
    pub resolver: Option<SocketAddr>,
    /// Address families to look up.
    pub family: Family,
    /// The resolver configuration whose search list `uncached-search` follows (default:
    /// /etc/resolv.conf, the one `system` follows).
    pub resolv_conf: Option<std::path::PathBuf>,
    /// How many rounds the calls (or the duration) are split into; the whole list runs
    /// once per round.
    pub rounds: u32,
    /// The command line, recorded in the report.
    pub command: Vec<String>,
    /// Security modes (`--security`); every TCP transport runs in each. `plain` only by
    /// default.
    pub security: Vec<Security>,
    /// Encoded calls (`--encoding` × `--message`): every transport that carries an
    /// encoding runs once per entry; empty for the opaque echo.
    pub rpcs: Vec<crate::runner::RpcConfig>,
    /// The target's raw-frames-over-TLS port (ignored for the embedded server).
    pub tls_port: u16,
    /// The target's HTTPS port (ignored for the embedded server).
    pub https_port: u16,
    /// CAs (PEM) the server's certificate must chain to (`--ca`); the embedded server's
    /// own CA when `None` and there is no target.
    pub ca_pem: Option<String>,
    /// The client certificate and key (PEM) for `mtls`; generated (with a CA the embedded
    /// server trusts) when `None` and there is no target.
    pub client_cert_pem: Option<(String, String)>,
    /// Do not verify the server's certificate (`--insecure`).
    pub insecure: bool,
    /// The round-trip time of the link between client and server, when known
    /// (`--link-rtt`): recorded on every run as `link_rtt_us`, for the round-trip model.
    pub link_rtt: Option<Duration>,
    /// Where rpcbench places its own threads (`--placement`): by default the client and
    /// the embedded server on one CPU at `-c 1`, on a CPU each for load
    /// ([`crate::placement`]).
    pub placement: Placement,
    /// The workers of the shared-connection transports (`h2-mux`, `grpc-mux`) and of
    /// their unshared twins beside them, when `-c` was not given: at the default `-c 1`
    /// there is nothing to multiplex, so the default run measures them where streams
    /// share a connection ([`MUX_CONCURRENCY`]). `None` runs them at `run.concurrency`.
    pub mux_concurrency: Option<usize>,
    /// Probe the target's ports before the first call and stop when one the run needs is
    /// not rpcbench-echo of this wire ([`crate::preflight`]); `--no-preflight` turns it
    /// off. Never done for the embedded server, which this process starts itself.
    pub preflight: bool,
}

/// Rounds when `--rounds` is not given: three interleaved rounds give each mean a
/// run-to-run spread (the ± column) at the price of opening each connection three times.
pub const DEFAULT_ROUNDS: u32 = 3;

/// The workers the default run gives the shared-connection transports and their twins:
/// enough streams in flight on one connection for multiplexing to show what it saves or
/// costs, few enough for a run of 1000 calls to keep every worker busy.
pub const MUX_CONCURRENCY: usize = 16;

/// Watches a run from outside, e.g. to draw a progress bar. Every method has a do-nothing
/// default, and `()` watches nothing.
pub trait Observer {
    /// A (transport, mode) job starts; `done` counts its finished calls as they happen.
    fn job_started(&mut self, _label: &str, _config: &RunConfig, _done: Arc<AtomicU64>) {}
    /// The job that last started is over.
    fn job_finished(&mut self) {}
}

impl Observer for () {}

/// An address mode left out of the run because the target's name did not resolve in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkippedMode {
    pub mode: AddrMode,
    /// Why, worded for a person: the name, the resolver and the failure.
    pub why: String,
}

/// What a run produced.
#[derive(Debug, Clone)]
pub struct BenchOutcome {
    pub report: Report,
    /// Modes not run because the name did not resolve in them (the run then fails).
    pub skipped: Vec<SkippedMode>,
    /// Transports left out of some or all modes, and why (the run does not fail for it):
    /// `unix` has no name to look up, and a target's `unix` and `udp` need to be told
    /// where they are.
    pub notes: Vec<String>,
}

impl BenchOutcome {
    /// True when every call came back verified (up to `max_lost` failures) and every mode
    /// asked for could run.
    pub fn passed(&self, max_lost: u64) -> bool {
        self.skipped.is_empty() && self.report.failed() <= max_lost
    }
}

/// Why a run could not happen at all.
#[derive(Debug, thiserror::Error)]
pub enum RunBenchError {
    /// The embedded echo server did not start.
    #[error("cannot start the embedded echo server")]
    StartServer(#[source] StartHandleError),
    /// Name resolution could not be set up (not: a name that does not resolve).
    #[error(transparent)]
    Resolve(#[from] ResolveNameError),
    /// A port of the target is 0.
    #[error("--tcp-port, --http-port and --udp-port must not be 0")]
    ZeroPort,
    /// The target's name resolved in none of the address modes asked for.
    #[error("{}", unique_reasons(.0))]
    Unresolvable(Vec<SkippedMode>),
    /// A transport run could not start (a limit, a thread or runtime that could not be had).
    #[error(transparent)]
    RunTransport(#[from] RunTransportError),
    /// The TLS configuration could not be built (a CA or client certificate rustls
    /// refuses, `mtls` without a client certificate).
    #[error(transparent)]
    Tls(#[from] BuildTlsError),
    /// A `--ca` or client certificate file is not PEM.
    #[error("cannot read the TLS certificates: {0}")]
    TlsPem(String),
    /// A generated client certificate could not be made.
    #[error("cannot generate a client certificate")]
    GenerateCert(#[from] rcgen::Error),
    /// The threads could not be placed as `--placement` asks.
    #[error(transparent)]
    Place(#[from] PlaceThreadsError),
    /// A curl transport was asked for, and the libcurl linked is not the system's.
    #[error(transparent)]
    Libcurl(#[from] crate::transport::BundledLibcurl),
    /// The preflight found ports the run needs that are not rpcbench-echo of this wire;
    /// nothing was measured.
    #[error(transparent)]
    TargetNotReady(Box<TargetNotReady>),
}

/// What the preflight found that stops a run: the target, the findings, and the command
/// that starts the server the run needs.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{}", self.lines().join("; "))]
pub struct TargetNotReady {
    /// The target as the lines name it: the name, with its address when it is a name.
    pub target: String,
    /// The listeners that did not pass, each stopping the run.
    pub findings: Vec<crate::preflight::Finding>,
    /// `rpcbench-echo` with the listeners the run needs, on the target's machine.
    pub start: crate::preflight::StartCommand,
}

impl TargetNotReady {
    /// One line per case: the ports, what was seen, and what to do.
    pub fn lines(&self) -> Vec<String> {
        let findings: Vec<&crate::preflight::Finding> = self.findings.iter().collect();
        crate::preflight::problem_lines(&self.target, &findings, &self.start)
    }
}

/// The distinct reasons of skipped modes, joined: modes that failed the same way (`ip` and
/// `system` both ask getaddrinfo) are said once.
fn unique_reasons(skipped: &[SkippedMode]) -> String {
    let mut reasons: Vec<&str> = Vec::new();
    for s in skipped {
        if !reasons.contains(&s.why.as_str()) {
            reasons.push(&s.why);
        }
    }
    reasons.join("; ")
}

/// The address modes run when none are asked for: `ip`, plus `system` when the target is
/// a name; for the embedded server, `ip`, `cached` and `uncached` against its responder.
pub fn default_modes(target: Option<&str>) -> Vec<AddrMode> {
    match target {
        None => vec![AddrMode::Ip, AddrMode::Cached, AddrMode::Uncached],
        Some(host) if host.parse::<IpAddr>().is_ok() => vec![AddrMode::Ip],
        Some(_) => vec![AddrMode::Ip, AddrMode::System],
    }
}

/// Runs the whole comparison and returns the report; prints nothing.
pub fn run(spec: &BenchSpec, observer: &mut dyn Observer) -> Result<BenchOutcome, RunBenchError> {
    let session = Session::open(spec)?;
    let started = rfc3339_now();
    let runs = session.run(spec, &spec.run, observer, None)?;
    let server = session.server_stats(spec.run.timeout);
    if let Some(stats) = server.as_ref().filter(|_| !session.version_said) {
        let identity = ServerIdentity {
            version: stats.settings.version.clone(),
            wire: stats.settings.wire,
        };
        if let Some(line) = crate::preflight::version_warning(&identity) {
            tracing::warn!("{line}");
        }
    }
    let report = session.report(spec, started, server, &runs);
    let notes = session.notes(spec);
    let skipped = session.close();
    Ok(BenchOutcome {
        report,
        skipped,
        notes,
    })
}
