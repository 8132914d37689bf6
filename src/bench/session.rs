//! A run in progress ([`Session`]): the embedded server, the plan, the placement and the
//! rounds, from the name check to the report.

use super::{
    BenchSpec, EMBEDDED_SHUTDOWN_GRACE, Job, Observer, Plan, RunBenchError, SkippedMode, SocketDir,
    TargetNotReady, fetch_server_stats, rpcs_for, run_jobs, security_modes, start_embedded,
    tls_options,
};
use crate::placement::{Placed, PlacementRecord};
use crate::report::{ConfigRecord, Environment, Report, RunRecord};
use crate::resolve::AddrMode;
use crate::runner::{RunConfig, TransportRun};
use crate::server::stats::StatsSnapshot;
use crate::server::{ServerHandle, StartHandleError};
use crate::transport::tls::{Security, TlsClient};
use crate::transport::{Port, TransportKind};
use std::net::IpAddr;
use std::time::Duration;

/// What stays the same over many runs against one target: the embedded server, if there
/// is one, and the plan (name, ports, resolver, the modes the name resolved in). A plain
/// run opens one for its runs; a sweep keeps one for all its steps.
pub struct Session {
    pub(super) embedded: Option<ServerHandle>,
    /// Where the session's threads run; gives the opening thread its CPU mask back when
    /// the session is closed (after the embedded server has stopped).
    pub(super) placed: Placed,
    /// The embedded server's Unix socket directory; dropped after the server, which
    /// removes its socket first.
    pub(super) _socket_dir: Option<SocketDir>,
    pub(super) plan: Plan,
    pub(super) skipped: Vec<SkippedMode>,
    /// True when the server's version was read and said before the run (by the
    /// preflight), or cannot differ (the embedded server): not to be said again after it.
    pub(super) version_said: bool,
    /// True when the preflight found `/stats` unreadable (and said so): the run does not
    /// ask again.
    pub(super) no_stats: bool,
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
                let quic = spec.transports.iter().any(|k| k.port() == Port::Quic);
                (Some(start_embedded(dir.socket(), tls, quic)?), Some(dir))
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
        // QUIC is always TLS 1.3: its probe needs the run's CA even when every mode is plain.
        let secured = calls(Listener::Tls) || calls(Listener::Https) || calls(Listener::Quic);
        let asked = security_modes(spec).into_iter().find(|s| s.is_tls());
        let tls = match (asked.or(Some(Security::Tls13)), &plan.tls) {
            (Some(security), Some(options)) if secured => {
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
            Port::Quic if self.plan.quic_port.is_none() => Vec::new(),
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
                    "{} not run in security mode {security}: datagrams and Unix sockets stay plain (DTLS is out of scope), QUIC is TLS 1.3 only, and a new libcurl handle per call cannot resume (libcurl keeps TLS sessions per handle)",
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
                Port::Quic if self.plan.quic_port.is_none() => {
                    format!("{kind} not run: give the target's QUIC port with --quic-port PORT (rpcbench-echo --quic ADDR)")
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
        for &asked in &securities {
            for &k in &spec.transports {
                // A transport with TLS built in runs `plain` as `tls13`: once, when both
                // are asked for.
                let Some(sec) = k.security_in(asked) else {
                    continue;
                };
                if jobs.iter().any(|j| j.kind == k && j.security == sec) {
                    continue;
                }
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
                // finding compares like with like (where the twin can run: not a QUIC
                // one without the target's QUIC port).
                if let (Some(m), Some(twin)) = (mux, k.unshared_twin())
                    && twin.runs_secured(sec)
                    && self.modes_for(twin, &modes).contains(&AddrMode::Ip)
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
    pub(super) fn responder_queries(&self, timeout: Duration) -> Option<u64> {
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
