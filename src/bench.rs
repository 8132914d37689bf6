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

use crate::dnsdiag::conf::ResolvConf;
use crate::placement::{PlaceThreadsError, Placed, Placement, PlacementRecord};
use crate::preflight::ServerIdentity;
use crate::report::{ConfigRecord, Environment, Report, RunRecord, rfc3339_now};
use crate::resolve::{
    AddrMode, Family, Names, ResolveNameError, ResolverAddr, SYSTEM_RESOLV_CONF, read_resolv_conf,
    system_resolv_conf,
};
use crate::runner::{RunConfig, RunTransportError, TransportRun, try_run_transport};
use crate::server::dns::{DEFAULT_DNS_NAME, DnsConfig};
use crate::server::stats::StatsSnapshot;
use crate::server::{ServerConfig, ServerHandle, StartHandleError};
use crate::transport::tls::{BuildTlsError, Security, TlsClient, TlsOptions};
use crate::transport::{Endpoint, Port, TransportKind};
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::{Duration, Instant};

/// Runtime threads of the embedded server: one, because the client's workers need the
/// other CPU of a small machine.
const EMBEDDED_SERVER_THREADS: usize = 1;
/// How long the embedded server may finish requests in flight once the run is over.
const EMBEDDED_SHUTDOWN_GRACE: Duration = Duration::from_secs(1);

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

/// What stays the same over many runs against one target: the embedded server, if there
/// is one, and the plan (name, ports, resolver, the modes the name resolved in). A plain
/// run opens one for its runs; a sweep keeps one for all its steps.
pub struct Session {
    embedded: Option<ServerHandle>,
    /// Where the session's threads run; gives the opening thread its CPU mask back when
    /// the session is closed (after the embedded server has stopped).
    placed: Placed,
    /// The embedded server's Unix socket directory; dropped after the server, which
    /// removes its socket first.
    _socket_dir: Option<SocketDir>,
    plan: Plan,
    skipped: Vec<SkippedMode>,
    /// True when the server's version was read and said before the run (by the
    /// preflight), or cannot differ (the embedded server): not to be said again after it.
    version_said: bool,
    /// True when the preflight found `/stats` unreadable (and said so): the run does not
    /// ask again.
    no_stats: bool,
}

/// A private temporary directory (mode 0700) for the embedded server's Unix socket,
/// removed with what is left in it when dropped.
struct SocketDir(std::path::PathBuf);

impl SocketDir {
    /// A new directory under the system's temporary directory.
    fn create() -> std::io::Result<SocketDir> {
        use std::os::unix::fs::DirBuilderExt;
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let dir = std::env::temp_dir().join(format!("rpcbench-{}-{nanos}", std::process::id()));
        std::fs::DirBuilder::new().mode(0o700).create(&dir)?;
        Ok(SocketDir(dir))
    }

    /// The socket's path in it.
    fn socket(&self) -> std::path::PathBuf {
        self.0.join("echo.sock")
    }
}

impl Drop for SocketDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

impl Session {
    /// Starts the embedded server when there is no target, and checks the name once in
    /// every mode, all at once, within one `--timeout`.
    ///
    /// The threads are placed first ([`crate::placement`]): the opening thread takes the
    /// server's CPU while the embedded server starts, so that every thread the server
    /// makes inherits it, then the client's CPU, which the resolvers checked here and the
    /// run's workers inherit.
    pub fn open(spec: &BenchSpec) -> Result<Session, RunBenchError> {
        if spec.transports.iter().any(|t| t.is_curl()) {
            crate::transport::LinkedLibcurl::detect().check()?;
        }
        let placed = Placed::new(spec.placement, spec.run.concurrency, spec.target.is_none())?;
        let (embedded, socket_dir) = match spec.target {
            None => {
                let dir = SocketDir::create().map_err(|e| {
                    RunBenchError::StartServer(StartHandleError::Server(
                        crate::server::StartServerError::Unix(crate::server::UnixPathError::Bind {
                            path: std::env::temp_dir(),
                            source: e,
                        }),
                    ))
                })?;
                let tls = spec.security.iter().any(|s| s.is_tls());
                (Some(start_embedded(dir.socket(), tls)?), Some(dir))
            }
            Some(_) => (None, None),
        };
        let (embedded, client_cert) = match embedded {
            Some((handle, client)) => (Some(handle), client),
            None => (None, None),
        };
        placed.enter_client()?;
        let (mut plan, skipped) = Plan::new(spec, embedded.as_ref())?;
        plan.tls = tls_options(spec, embedded.as_ref(), client_cert.as_ref())?;
        let mut session = Session {
            version_said: embedded.is_some(),
            no_stats: false,
            embedded,
            placed,
            _socket_dir: socket_dir,
            plan,
            skipped,
        };
        if session.embedded.is_none() && spec.preflight {
            session.preflight(spec)?;
        }
        Ok(session)
    }

    /// Probes every listener the run needs, and the HTTP one for `/stats`, before any
    /// call ([`crate::preflight`]). A listener the run needs that did not pass (or a
    /// server whose wire differs) stops it with [`RunBenchError::TargetNotReady`]; the
    /// HTTP listener when only `/stats` is read there, and a server of another version
    /// on the same wire, are one warning each.
    fn preflight(&mut self, spec: &BenchSpec) -> Result<(), RunBenchError> {
        use crate::preflight::{Address, Listener, StartCommand};
        let plan = &self.plan;
        let Some(ip) = plan.stats_ip else {
            return Ok(());
        };
        let probes = plan.probes(spec, ip);
        let calls = |l: Listener| probes.iter().any(|p| p.listener == l && p.needed);
        let tls = match (security_modes(spec).iter().find(|s| s.is_tls()), &plan.tls) {
            (Some(&security), Some(options)) if calls(Listener::Tls) || calls(Listener::Https) => {
                Some(TlsClient::new(security, &plan.name, options)?)
            }
            _ => None,
        };
        let host = crate::resolve::url_host(&plan.name);
        let found = crate::preflight::check(&probes, &host, tls.as_deref());
        tracing::debug!("preflight of {} ports took {:?}", probes.len(), found.took);
        let target = if plan.name.parse::<IpAddr>().is_ok() {
            plan.name.clone()
        } else {
            format!("{} ({ip})", plan.name)
        };
        let blocking: Vec<crate::preflight::Finding> =
            found.blocking().into_iter().cloned().collect();
        if !blocking.is_empty() {
            let listeners: Vec<(Listener, Address)> =
                probes.iter().map(|p| (p.listener, p.at.clone())).collect();
            return Err(RunBenchError::TargetNotReady(Box::new(TargetNotReady {
                target,
                findings: blocking,
                start: StartCommand::new(ip, &listeners),
            })));
        }
        for finding in found.findings.iter().filter(|f| !f.blocks()) {
            tracing::warn!("{}", crate::preflight::stats_warning(&target, finding));
            self.no_stats = true;
        }
        if let Some(server) = &found.server {
            if let Some(line) = crate::preflight::version_warning(server) {
                tracing::warn!("{line}");
            }
            self.version_said = true;
        }
        Ok(())
    }

    /// The modes `kind` runs in, of `modes`: every one, but a transport on a Unix socket
    /// only in `ip` (a path has no name to look up, so the other modes would be the same
    /// run under another label), and none on a listener the target has no address for.
    fn modes_for(&self, kind: TransportKind, modes: &[AddrMode]) -> Vec<AddrMode> {
        match kind.port() {
            Port::Unix if self.plan.unix.is_none() => Vec::new(),
            Port::Unix => modes
                .iter()
                .copied()
                .filter(|&m| m == AddrMode::Ip)
                .collect(),
            Port::Udp if self.plan.udp_port.is_none() => Vec::new(),
            _ => modes.to_vec(),
        }
    }

    /// True when `kind` runs in `mode` in this session (see [`Session::notes`] for why
    /// not): a sweep makes a series only of the pairs that run.
    pub fn runs(&self, kind: TransportKind, mode: AddrMode) -> bool {
        self.modes_for(kind, &self.plan.modes).contains(&mode)
    }

    /// Says which transports of `spec` were left out of which modes, and why.
    pub fn notes(&self, spec: &BenchSpec) -> Vec<String> {
        let mut notes = Vec::new();
        for &security in security_modes(spec).iter().filter(|s| s.is_tls()) {
            let left_out: Vec<String> = spec
                .transports
                .iter()
                .filter(|&&k| !k.runs_secured(security))
                .map(|k| k.to_string())
                .collect();
            if !left_out.is_empty() {
                notes.push(format!(
                    "{} not run in security mode {security}: datagrams and Unix sockets stay plain (DTLS is out of scope), and a new libcurl handle per call cannot resume (libcurl keeps TLS sessions per handle)",
                    left_out.join(", ")
                ));
            }
        }
        for &kind in &spec.transports {
            let not_carried: Vec<String> = spec
                .rpcs
                .iter()
                .map(|r| r.encoding)
                .filter(|&e| !kind.carries(e))
                .map(|e| e.to_string())
                .collect::<std::collections::BTreeSet<_>>()
                .into_iter()
                .collect();
            if !not_carried.is_empty() {
                notes.push(format!(
                    "{kind} not run with encoding {}: its calls cannot carry it",
                    not_carried.join(", ")
                ));
            }
        }
        for &kind in &spec.transports {
            let left_out: Vec<String> = self
                .plan
                .modes
                .iter()
                .filter(|m| !self.modes_for(kind, &self.plan.modes).contains(m))
                .map(|m| m.to_string())
                .collect();
            // The default modes are not the user's choice: the table's `unix ip` row
            // says what ran. Modes asked for by name and left out are said.
            let unasked =
                spec.names.is_none() && kind.port() == Port::Unix && self.plan.unix.is_some();
            if left_out.is_empty() || unasked {
                continue;
            }
            notes.push(match kind.port() {
                Port::Unix if self.plan.unix.is_none() => {
                    format!("{kind} not run: a target's Unix socket is on its own host; give its path with --unix PATH")
                }
                Port::Udp if self.plan.udp_port.is_none() => {
                    format!("{kind} not run: give the target's UDP port with --udp-port PORT (rpcbench-echo --udp ADDR)")
                }
                _ => format!(
                    "{kind} not run in mode {}: a socket path has no name to look up, so only mode ip applies",
                    left_out.join(", ")
                ),
            });
        }
        notes
    }

    /// Where the session's threads were placed.
    pub fn placement(&self) -> PlacementRecord {
        self.placed.record()
    }

    /// How reports name the target.
    pub fn label(&self) -> &str {
        &self.plan.label
    }

    /// The address modes that run (those asked for, less those left out).
    pub fn modes(&self) -> &[AddrMode] {
        &self.plan.modes
    }

    /// Runs every (transport, mode) job of `spec` (its modes among the session's) with the
    /// per-call settings `config`, for `spec.rounds` rounds. `step` is added to each job's
    /// label for the observer (`tcp ip · step 3 · 5,000/s`), so a sweep's progress says
    /// where it is.
    pub fn run(
        &self,
        spec: &BenchSpec,
        config: &RunConfig,
        observer: &mut dyn Observer,
        step: Option<&str>,
    ) -> Result<Vec<TransportRun>, RunBenchError> {
        // Only the modes `spec` names, of those the session runs: a sweep runs one mode
        // per series on a session opened for all of them.
        let modes: Vec<AddrMode> = self
            .plan
            .modes
            .iter()
            .copied()
            .filter(|m| spec.names.as_ref().is_none_or(|n| n.contains(m)))
            .collect();
        let securities = security_modes(spec);
        let mux = spec.mux_concurrency.filter(|&m| m != config.concurrency);
        let mut jobs: Vec<Job> = Vec::new();
        for &sec in &securities {
            for &k in spec.transports.iter().filter(|&&k| k.runs_secured(sec)) {
                let workers = match (mux, k.shared()) {
                    (Some(m), true) => m,
                    _ => config.concurrency,
                };
                for rpc in rpcs_for(spec, k) {
                    jobs.extend(self.modes_for(k, &modes).into_iter().map(|mode| Job {
                        kind: k,
                        mode,
                        security: sec,
                        workers,
                        rpc,
                    }));
                }
                // The twin at the same concurrency, by IP, so that the multiplexing
                // finding compares like with like.
                if let (Some(m), Some(twin)) = (mux, k.unshared_twin())
                    && twin.runs_secured(sec)
                    && modes.contains(&AddrMode::Ip)
                {
                    for rpc in rpcs_for(spec, twin) {
                        jobs.push(Job {
                            kind: twin,
                            mode: AddrMode::Ip,
                            security: sec,
                            workers: m,
                            rpc,
                        });
                    }
                }
            }
        }
        run_jobs(&jobs, spec, config, self, observer, step)
    }

    /// The server's counters now: read directly from the embedded server, else asked for
    /// with `GET /stats` (`None` when the server cannot be asked).
    pub fn server_stats(&self, timeout: Duration) -> Option<StatsSnapshot> {
        match &self.embedded {
            Some(e) => Some(e.stats()),
            None if self.no_stats => None,
            None => fetch_server_stats(&self.plan, timeout),
        }
    }

    /// Well-formed queries the target's DNS responder has received (counted on arrival,
    /// whatever became of them), when it has one and can be asked.
    fn responder_queries(&self, timeout: Duration) -> Option<u64> {
        let stats = self.server_stats(timeout)?;
        stats.settings.dns.as_ref()?;
        Some(stats.dns.requests)
    }

    /// The report of `runs`, made with `spec`, started at `started`.
    pub fn report(
        &self,
        spec: &BenchSpec,
        started: String,
        server: Option<StatsSnapshot>,
        runs: &[TransportRun],
    ) -> Report {
        let plan = &self.plan;
        let runs: Vec<RunRecord> = runs
            .iter()
            .map(|run| RunRecord {
                link_rtt_us: spec.link_rtt.map(|d| d.as_secs_f64() * 1e6),
                mux_comparison: spec.mux_concurrency == Some(run.workers)
                    && run.workers != spec.run.concurrency,
                ..RunRecord::new(run)
            })
            .collect();
        let mut report = Report {
            rpcbench: env!("CARGO_PKG_VERSION").to_string(),
            started,
            target: plan.label.clone(),
            command: spec.command.clone(),
            config: ConfigRecord::new(
                &spec.run,
                spec.rounds,
                &spec.transports,
                &plan.modes,
                spec.family,
                &plan.resolver.to_string(),
                plan.tcp_port,
                plan.http_port,
            ),
            environment: Environment {
                placement: Some(self.placed.record()),
                ..Environment::detect()
            },
            server,
            path_rtt_estimate: crate::report::path_rtt_of_runs(&runs),
            runs,
            physics: Vec::new(),
            coherent: None,
        };
        report.physics = crate::physics::checks(&report);
        report.coherent =
            (!report.physics.is_empty()).then(|| report.physics.iter().all(|c| c.pass));
        report
    }

    /// Stops the embedded server, then gives the thread its CPU mask back; returns the
    /// modes that were left out.
    pub fn close(self) -> Vec<SkippedMode> {
        if let Some(e) = self.embedded {
            let _ = e.shutdown(EMBEDDED_SHUTDOWN_GRACE);
        }
        drop(self.placed);
        self.skipped
    }
}

/// The embedded echo server, with a DNS responder, on free loopback ports, and its Unix
/// socket at `unix`.
/// With `tls`, its TLS and HTTPS listeners too, with a generated certificate, and a
/// generated client CA whose certificates it verifies but does not require (so `mtls` and
/// the other modes share its ports).
fn start_embedded(
    unix: std::path::PathBuf,
    tls: bool,
) -> Result<(ServerHandle, Option<crate::server::tls::GeneratedCerts>), RunBenchError> {
    let client = if tls {
        Some(crate::server::tls::generate_certs(
            &["rpcbench-client".to_string()],
            crate::server::tls::LeafUse::Client,
            false,
        )?)
    } else {
        None
    };
    let loopback = SocketAddr::from(([127, 0, 0, 1], 0));
    let config = ServerConfig {
        dns: Some(DnsConfig::default()),
        unix: Some(unix),
        tls: tls.then_some(loopback),
        https: tls.then_some(loopback),
        tls_settings: crate::server::tls::TlsSettings {
            cert: crate::server::tls::CertSource::Generate {
                dns_name: DEFAULT_DNS_NAME.to_string(),
                ca_out: None,
            },
            client_ca_pem: client.as_ref().map(|c| c.ca_pem.clone()),
            client_auth_optional: true,
            ..Default::default()
        },
        ..ServerConfig::loopback_any_port()
    };
    let handle =
        ServerHandle::start(config, EMBEDDED_SERVER_THREADS).map_err(RunBenchError::StartServer)?;
    Ok((handle, client))
}

/// One mode's name check: the resolver it set up, and why the lookup failed, if it did.
struct Checked {
    mode: AddrMode,
    names: Arc<Names>,
    /// The address the lookup found.
    found: Option<IpAddr>,
    failed: Option<String>,
}

/// What the run calls and how it finds it.
struct Plan {
    /// The name (or IP literal) being called.
    name: String,
    /// How the report names the target.
    label: String,
    tcp_port: u16,
    http_port: u16,
    /// The UDP port, when there is one to call.
    udp_port: Option<u16>,
    /// The Unix socket, when there is one to call.
    unix: Option<std::path::PathBuf>,
    resolver: ResolverAddr,
    /// The modes that will run: those asked for, less those the name did not resolve in.
    modes: Vec<AddrMode>,
    /// Mode `ip`'s address, looked up once for the whole run (shared by every transport).
    ip: Option<Arc<Names>>,
    /// The configuration `uncached-search` follows, when it runs.
    search_conf: Option<Arc<ResolvConf>>,
    /// The names a `system` lookup tries, from /etc/resolv.conf (empty when it cannot be
    /// read: the prediction is left out, the mode still runs).
    system_search: Vec<String>,
    /// The target's address as the check before the run found it: where `GET /stats`
    /// goes, so that asking the server for its counters looks nothing up (and adds no
    /// query to the responder's count of a run).
    stats_ip: Option<IpAddr>,
    /// The raw-frames-over-TLS port.
    tls_port: u16,
    /// The HTTPS port.
    https_port: u16,
    /// How TLS runs verify and are verified; `None` when every mode is plain.
    tls: Option<TlsOptions>,
}

/// The TLS options of a run with a TLS mode: the CA from `--ca`, else the embedded
/// server's; the client certificate from the spec, else the one generated for the
/// embedded server. `None` when every mode is plain.
fn tls_options(
    spec: &BenchSpec,
    embedded: Option<&ServerHandle>,
    client: Option<&crate::server::tls::GeneratedCerts>,
) -> Result<Option<TlsOptions>, RunBenchError> {
    if !spec.security.iter().any(|s| s.is_tls()) {
        return Ok(None);
    }
    let ca = spec
        .ca_pem
        .clone()
        .or_else(|| embedded.and_then(|e| e.ca_pem.clone()))
        .unwrap_or_default();
    let client_cert = match (&spec.client_cert_pem, client) {
        (Some((cert, key)), _) => Some((cert.as_str(), key.as_str())),
        (None, Some(c)) => Some((c.leaf_pem.as_str(), c.leaf_key_pem.as_str())),
        (None, None) => None,
    };
    TlsOptions::from_pem(&ca, client_cert, spec.insecure)
        .map(Some)
        .map_err(|e| RunBenchError::TlsPem(e.to_string()))
}

impl Plan {
    /// Works out the plan and checks that the name resolves in each mode; returns the
    /// modes that did not, or an error when none did.
    fn new(
        spec: &BenchSpec,
        embedded: Option<&ServerHandle>,
    ) -> Result<(Plan, Vec<SkippedMode>), RunBenchError> {
        let modes = spec
            .names
            .clone()
            .unwrap_or_else(|| default_modes(spec.target.as_deref()));
        let timeout = spec.run.timeout;
        let mut plan = match (embedded, &spec.target) {
            (Some(e), _) => {
                // The embedded server always has all three; `start_embedded` enables them.
                let (tcp, http, dns) = (
                    e.tcp_addr.expect("embedded tcp listener"),
                    e.http_addr.expect("embedded http listener"),
                    e.dns_addr.expect("embedded dns responder"),
                );
                Plan {
                    name: DEFAULT_DNS_NAME.to_string(),
                    label: format!("embedded ({DEFAULT_DNS_NAME} = {}, DNS at {dns})", tcp.ip()),
                    tcp_port: tcp.port(),
                    http_port: http.port(),
                    udp_port: e.udp_addr.map(|a| a.port()),
                    unix: e.unix_path.clone(),
                    resolver: ResolverAddr::At(spec.resolver.unwrap_or(dns)),
                    modes,
                    ip: Some(Arc::new(Names::fixed(tcp.ip()))),
                    search_conf: None,
                    system_search: Vec::new(),
                    stats_ip: None,
                    tls_port: e.tls_addr.map_or(0, |a| a.port()),
                    https_port: e.https_addr.map_or(0, |a| a.port()),
                    tls: None,
                }
            }
            (None, target) => {
                if spec.tcp_port == 0 || spec.http_port == 0 || spec.udp_port == Some(0) {
                    return Err(RunBenchError::ZeroPort);
                }
                let host = target.clone().unwrap_or_default();
                Plan {
                    name: host.clone(),
                    label: host,
                    tcp_port: spec.tcp_port,
                    http_port: spec.http_port,
                    udp_port: spec.udp_port,
                    unix: spec.unix.clone(),
                    resolver: spec.resolver.map_or(ResolverAddr::System, ResolverAddr::At),
                    modes,
                    ip: None,
                    search_conf: None,
                    system_search: Vec::new(),
                    stats_ip: None,
                    tls_port: spec.tls_port,
                    https_port: spec.https_port,
                    tls: None,
                }
            }
        };
        if plan.modes.contains(&AddrMode::UncachedSearch) {
            let path = spec
                .resolv_conf
                .as_deref()
                .unwrap_or(std::path::Path::new(SYSTEM_RESOLV_CONF));
            plan.search_conf = Some(Arc::new(read_resolv_conf(path)?));
        }
        if plan.modes.contains(&AddrMode::System) {
            plan.system_search = system_resolv_conf()
                .map(|c| c.candidates(&plan.name))
                .unwrap_or_default();
        }
        let skipped = plan.preflight(spec.family, timeout)?;
        if plan.modes.is_empty() {
            return Err(RunBenchError::Unresolvable(skipped));
        }
        Ok((plan, skipped))
    }

    /// What the preflight probes at `ip`: every listener a transport of `spec` calls (in
    /// any of its security modes), an HTTP listener in each HTTP version the transports
    /// calling it speak (their `alpn`), and the HTTP one, for `/stats`, marked not needed
    /// when none calls it; `udp` and `unix` only when the target has them.
    fn probes(&self, spec: &BenchSpec, ip: IpAddr) -> Vec<crate::preflight::Probe> {
        use crate::preflight::{Address, Listener, Probe};
        let at = |port: u16| Address::Socket(SocketAddr::new(ip, port));
        let mut needed: Vec<(Listener, bool)> = Vec::new();
        for &security in &security_modes(spec) {
            for &kind in spec
                .transports
                .iter()
                .filter(|&&k| k.runs_secured(security))
            {
                let listener = Listener::of(kind, security.is_tls());
                let located = match listener {
                    Listener::Udp => self.udp_port.is_some(),
                    Listener::Unix => self.unix.is_some(),
                    _ => true,
                };
                let http2 = kind.facts().alpn == crate::transport::tls::Alpn::H2;
                if located && !needed.contains(&(listener, http2)) {
                    needed.push((listener, http2));
                }
            }
        }
        let mut probes: Vec<Probe> = needed
            .iter()
            .map(|&(listener, http2)| Probe {
                listener,
                at: match listener {
                    Listener::Tcp => at(self.tcp_port),
                    Listener::Http => at(self.http_port),
                    Listener::Udp => at(self.udp_port.unwrap_or_default()),
                    Listener::Tls => at(self.tls_port),
                    Listener::Https => at(self.https_port),
                    Listener::Unix => Address::Path(self.unix.clone().unwrap_or_default()),
                },
                needed: true,
                http2,
            })
            .collect();
        if !needed.iter().any(|&(l, _)| l == Listener::Http) {
            probes.push(Probe {
                listener: Listener::Http,
                at: at(self.http_port),
                needed: false,
                http2: false,
            });
        }
        probes.sort_by_key(|p| (p.listener, p.http2));
        probes
    }

    /// Resolves the name once in every mode, all at once, so the whole check takes one
    /// `--timeout` at most. A mode the name does not resolve in is taken out of the run:
    /// every one of its calls would fail the same way, each waiting up to `--timeout`.
    /// Mode `ip` keeps its lookup as the run's address.
    fn preflight(
        &mut self,
        family: Family,
        timeout: Duration,
    ) -> Result<Vec<SkippedMode>, RunBenchError> {
        let deadline = Instant::now() + timeout;
        let known_ip = self.ip.clone();
        let plan = &*self;
        let checked: Vec<Result<Checked, RunBenchError>> = std::thread::scope(|scope| {
            let checks: Vec<_> = self
                .modes
                .iter()
                .map(|&mode| {
                    let known_ip = known_ip.clone();
                    scope.spawn(move || {
                        let names = match (mode, known_ip) {
                            (AddrMode::Ip, Some(ip)) => ip,
                            _ => Arc::new(plan.names(mode, family, timeout)?),
                        };
                        let (found, failed) = match names.lookup(deadline) {
                            Ok((ip, _)) => (Some(ip), None),
                            Err(e) => (
                                None,
                                Some(names.first_error().unwrap_or_else(|| e.to_string())),
                            ),
                        };
                        Ok(Checked {
                            mode,
                            names,
                            found,
                            failed,
                        })
                    })
                })
                .collect();
            checks
                .into_iter()
                .map(|check| {
                    check
                        .join()
                        .unwrap_or_else(|p| std::panic::resume_unwind(p))
                })
                .collect()
        });
        let mut skipped = Vec::new();
        self.modes.clear();
        for check in checked {
            let Checked {
                mode,
                names,
                found,
                failed,
            } = check?;
            self.stats_ip = self.stats_ip.or(found);
            match failed {
                Some(why) => skipped.push(SkippedMode { mode, why }),
                None => {
                    if mode == AddrMode::Ip {
                        self.ip = Some(names);
                    }
                    self.modes.push(mode);
                }
            }
        }
        Ok(skipped)
    }

    /// A resolver for the name in `mode`, with nothing cached yet.
    fn names(
        &self,
        mode: AddrMode,
        family: Family,
        timeout: Duration,
    ) -> Result<Names, ResolveNameError> {
        match (mode, &self.search_conf) {
            (AddrMode::UncachedSearch, Some(conf)) => {
                Names::new_searching(&self.name, family, self.resolver, timeout, conf)
            }
            _ => Names::new_mode(mode, &self.name, family, self.resolver, timeout),
        }
    }

    /// The names one lookup in `mode` tries, in order, when the mode follows a search list.
    fn search_for(&self, mode: AddrMode) -> Vec<String> {
        match (mode, &self.search_conf) {
            (AddrMode::System, _) => self.system_search.clone(),
            (AddrMode::UncachedSearch, Some(conf)) => conf.candidates(&self.name),
            _ => Vec::new(),
        }
    }

    /// A fresh endpoint for one transport run: its own resolver, so caches start cold and
    /// the query count is the run's own.
    fn endpoint(
        &self,
        mode: AddrMode,
        security: Security,
        spec: &BenchSpec,
    ) -> Result<Endpoint, RunBenchError> {
        let names = match (mode, &self.ip) {
            (AddrMode::Ip, Some(ip)) => ip.clone(),
            _ => Arc::new(self.names(mode, spec.family, spec.run.timeout)?),
        };
        if let (true, Some(options)) = (security.is_tls(), &self.tls) {
            let tls = TlsClient::new(security, &names.host(), options)?;
            return Ok(
                Endpoint::with_names(names, self.tls_port, self.https_port).with_tls(Some(tls))
            );
        }
        Ok(Endpoint::with_names(names, self.tcp_port, self.http_port)
            .with_udp_port(self.udp_port.unwrap_or(0))
            .with_unix(self.unix.clone()))
    }
}

/// The security modes of a run: those asked for, `plain` when none are.
fn security_modes(spec: &BenchSpec) -> Vec<Security> {
    if spec.security.is_empty() {
        vec![Security::Plain]
    } else {
        spec.security.clone()
    }
}

/// One (transport, address mode, security mode, encoded call) run at a number of workers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Job {
    kind: TransportKind,
    mode: AddrMode,
    security: Security,
    workers: usize,
    rpc: Option<crate::runner::RpcConfig>,
}

/// The encoded calls `kind` runs with: those of `spec` it carries, or the opaque echo
/// (`None`) when `spec` has none.
fn rpcs_for(spec: &BenchSpec, kind: TransportKind) -> Vec<Option<crate::runner::RpcConfig>> {
    if spec.rpcs.is_empty() {
        return vec![None];
    }
    spec.rpcs
        .iter()
        .filter(|r| kind.carries(r.encoding))
        .map(|&r| Some(r))
        .collect()
}

/// Runs every (transport, address mode) job `rounds` times, reversing the order every
/// other round so drift over time hits each alike, and merges the rounds per job.
fn run_jobs(
    jobs: &[Job],
    spec: &BenchSpec,
    config: &RunConfig,
    session: &Session,
    observer: &mut dyn Observer,
    step: Option<&str>,
) -> Result<Vec<TransportRun>, RunBenchError> {
    let plan = &session.plan;
    let mut merged: Vec<Option<TransportRun>> = vec![None; jobs.len()];
    for round in 0..spec.rounds {
        let order: Vec<usize> = if round % 2 == 0 {
            (0..jobs.len()).collect()
        } else {
            (0..jobs.len()).rev().collect()
        };
        for (n, i) in order.into_iter().enumerate() {
            let Job {
                kind,
                mode,
                security,
                workers,
                rpc,
            } = jobs[i];
            // A job's encoded call, or the one the caller set (a sweep's step).
            let rpc = rpc.or(config.rpc);
            // This round's share of the calls, or of the time.
            let config = &RunConfig {
                concurrency: workers,
                rpc,
                calls: round_share(config.calls, spec.rounds, round),
                duration: config.duration.map(|d| d / spec.rounds),
                ..config.clone()
            };
            let endpoint = plan.endpoint(mode, security, spec)?;
            let done = Arc::new(AtomicU64::new(0));
            let mut modes = match security {
                Security::Plain => mode.to_string(),
                _ => format!("{mode} {security}"),
            };
            if Some(workers) == spec.mux_concurrency && workers != spec.run.concurrency {
                modes.push_str(&format!(" c{workers}"));
            }
            if let Some(rpc) = rpc {
                modes.push_str(&format!(" {} {}", rpc.encoding, rpc.message));
            }
            // Where the run is: `[12/41] tcp ip · round 2/3`.
            let at = jobs.len() * round as usize + n + 1;
            let of = jobs.len() * spec.rounds as usize;
            let rounds = if spec.rounds > 1 {
                format!(" · round {}/{}", round + 1, spec.rounds)
            } else {
                String::new()
            };
            let label = match step {
                Some(step) => format!("[{at}/{of}] {kind} {modes} · {step}"),
                None => format!("[{at}/{of}] {kind} {modes}{rounds}"),
            };
            // A default run's rows of several workers are split off the server's CPU.
            session.placed.enter_for(workers)?;
            observer.job_started(&label, config, done.clone());
            // The responder's count around the run: what one lookup really asked, also
            // under `system`, whose queries rpcbench cannot see itself.
            let responder_before = (mode != AddrMode::Ip)
                .then(|| session.responder_queries(spec.run.timeout))
                .flatten();
            // An encoded run's server cost, from the server's counters around it.
            let stats_before = rpc.and_then(|_| session.server_stats(spec.run.timeout));
            let mut run = try_run_transport(kind, &endpoint, config, done)?;
            run.server_use = stats_before.and_then(|before| {
                let after = session.server_stats(spec.run.timeout)?;
                Some(crate::server::stats::ServerUse::between(&before, &after))
            });
            run.dns_responder_queries = responder_before.and_then(|before| {
                session
                    .responder_queries(spec.run.timeout)
                    .map(|after| after.saturating_sub(before))
            });
            run.dns_search = plan.search_for(mode);
            observer.job_finished();
            match &mut merged[i] {
                Some(m) => m.merge(&run),
                slot @ None => *slot = Some(run),
            }
        }
    }
    Ok(merged.into_iter().flatten().collect())
}

/// Round `round`'s share of `calls` split over `rounds`: the remainder goes to the first
/// rounds, so the shares add up to `calls`.
fn round_share(calls: u64, rounds: u32, round: u32) -> u64 {
    let rounds = u64::from(rounds.max(1));
    calls / rounds + u64::from(u64::from(round) < calls % rounds)
}

/// Asks a remote server for its counters and settings (`GET /stats`); `None` when it
/// cannot be asked, which is worth a log line but not a failed run.
fn fetch_server_stats(plan: &Plan, timeout: Duration) -> Option<StatsSnapshot> {
    let host = plan
        .stats_ip
        .map_or_else(|| plan.name.clone(), |ip| ip.to_string());
    let host = crate::resolve::url_host(&host);
    let url = format!("http://{host}:{}/stats", plan.http_port);
    let mut body = Vec::new();
    let fetched = (|| -> Result<u32, curl::Error> {
        let mut easy = curl::easy::Easy::new();
        easy.url(&url)?;
        easy.timeout(timeout)?;
        easy.signal(false)?;
        let mut transfer = easy.transfer();
        transfer.write_function(|data| {
            body.extend_from_slice(data);
            Ok(data.len())
        })?;
        transfer.perform()?;
        drop(transfer);
        easy.response_code()
    })();
    let why = match fetched.map(|code| (code, serde_json::from_slice::<StatsSnapshot>(&body))) {
        Ok((200, Ok(stats))) => return Some(stats),
        Ok((200, Err(e))) => format!("the reply is not its JSON: {e}"),
        Ok((code, _)) => format!("HTTP status {code}"),
        Err(e) => e.to_string(),
    };
    tracing::warn!("could not read the server's /stats at {url}: {why}");
    None
}
