//! The serialisable result of a run: what `--format json` and `--out` write, and what
//! every renderer reads. `tests/fixtures/report.json` holds its committed shape.
//!
//! Layer 4 of the map in `lib.rs` (record): uses the client and the layers below; analysis and render read it, never the other way.

/// What `rpcbench sweep --out` writes.
pub mod sweep;

use crate::measure::{Hist, Phase, Summary};
use crate::resolve::{AddrMode, Family};
use crate::runner::{Engine, RunConfig, TransportRun};
use crate::server::stats::StatsSnapshot;
use crate::transport::TransportKind;
use crate::transport::tls::{Negotiated, Security};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::{SystemTime, UNIX_EPOCH};

/// Quantiles of the latency curve kept per run: dense in the tail, where transports differ.
pub const CURVE_QUANTILES: [f64; 14] = [
    0.0, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 0.98, 0.99, 0.995, 0.999, 0.9995, 0.9999, 1.0,
];

/// A whole rpcbench run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Report {
    /// Version of rpcbench that made it.
    pub rpcbench: String,
    /// When the run started, RFC 3339 in UTC.
    pub started: String,
    /// What was called: a host, or `embedded` for the in-process server.
    pub target: String,
    /// The command line that made this report.
    pub command: Vec<String>,
    pub config: ConfigRecord,
    pub environment: Environment,
    /// The server's counters and settings (`GET /stats`) after the run; `null` when the
    /// server could not be asked.
    pub server: Option<StatsSnapshot>,
    /// One entry per transport and address mode, in the order they were asked for.
    pub runs: Vec<RunRecord>,
    /// The path's round-trip time as the runs estimate it
    /// ([`crate::report::path_rtt_of_runs`]): the least kernel RTT sample (`TCP_INFO`)
    /// or the least persistent-transport call, whichever is smaller, and which it was.
    /// Absent when neither was measured, and in reports from before it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path_rtt_estimate: Option<crate::tcpinfo::PathRttEstimate>,
    /// The run's physics checks (`rpcbench::physics`): orderings the protocols fix, each
    /// against the noise of its figures. Empty when none applied, and in reports from
    /// before them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub physics: Vec<PhysicsCheck>,
    /// False when a physics check failed: the figures contradict each other beyond their
    /// noise, and should not be read as they stand. `null` when no check applied, and in
    /// reports from before them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub coherent: Option<bool>,
}

/// The settings of the run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigRecord {
    pub calls: u64,
    pub duration_s: Option<f64>,
    pub warmup: u64,
    pub concurrency: usize,
    pub payload_bytes: u32,
    pub reply_bytes: Option<u32>,
    pub delay_us: u32,
    pub timeout_s: f64,
    /// `--rate`: calls started per second over all workers; `null` for back to back.
    pub rate_per_s: Option<f64>,
    pub rounds: u32,
    pub transports: Vec<TransportKind>,
    /// Address modes run, e.g. `["ip", "cached", "uncached"]`.
    pub names: Vec<AddrMode>,
    /// Address families asked for: `4`, `6` or `any`.
    pub family: Family,
    /// Where `cached` and `uncached` sent their queries.
    pub resolver: String,
    pub tcp_port: u16,
    pub http_port: u16,
}

impl ConfigRecord {
    /// Records the settings of a run.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        config: &RunConfig,
        rounds: u32,
        transports: &[TransportKind],
        names: &[AddrMode],
        family: Family,
        resolver: &str,
        tcp_port: u16,
        http_port: u16,
    ) -> ConfigRecord {
        ConfigRecord {
            calls: config.calls,
            duration_s: config.duration.map(|d| d.as_secs_f64()),
            warmup: config.warmup,
            concurrency: config.concurrency,
            payload_bytes: config.payload,
            reply_bytes: config.reply,
            delay_us: config.delay_us,
            timeout_s: config.timeout.as_secs_f64(),
            rate_per_s: config.rate,
            rounds,
            transports: transports.to_vec(),
            names: names.to_vec(),
            family,
            resolver: resolver.to_string(),
            tcp_port,
            http_port,
        }
    }
}

/// The machine the client ran on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Environment {
    pub hostname: String,
    pub kernel: String,
    /// CPUs this process may run on.
    pub cpus: usize,
    /// The CPU list the process was pinned to (`Cpus_allowed_list`), e.g. `0` or `0-1`.
    pub cpu_affinity: String,
    pub libcurl: String,
    /// libcurl's TLS backend and its version (`OpenSSL/3.0.17`); empty in reports from
    /// before it, or when libcurl has no TLS.
    #[serde(default)]
    pub libcurl_tls: String,
    /// Whether that libcurl is the system's shared library (a release, loaded from its
    /// own file) rather than a bundled copy built into the binary; `None` in reports from
    /// before it. rpcbench refuses to run a curl transport on any other.
    #[serde(default)]
    pub libcurl_system: Option<bool>,
    /// A caching daemon in front of getaddrinfo (nscd, systemd-resolved), if one was seen:
    /// mode `system` then measures that cache.
    pub resolver_cache: Option<String>,
    /// Where rpcbench placed its own threads (`--placement`): the CPU of the client's
    /// and of the embedded server's; absent in reports from before it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement: Option<crate::placement::PlacementRecord>,
}

impl Environment {
    /// Reads the facts of this machine.
    pub fn detect() -> Environment {
        let libcurl = crate::transport::LinkedLibcurl::detect();
        Environment {
            hostname: crate::host::hostname(),
            kernel: crate::host::kernel(),
            cpus: crate::host::cpus(),
            cpu_affinity: crate::host::cpu_affinity(),
            libcurl: libcurl.version.clone(),
            libcurl_tls: libcurl.tls.clone(),
            libcurl_system: Some(libcurl.is_system()),
            resolver_cache: crate::resolve::system_cache(),
            placement: None,
        }
    }
}

/// One transport under one address mode.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunRecord {
    pub transport: TransportKind,
    /// How the target's name was turned into an address: `ip`, `system`, `cached` or
    /// `uncached`.
    pub addr_mode: AddrMode,
    /// How the connections were secured: `plain`, `tls13`, `tls13-resume`, `tls12`,
    /// `tls12-resume` or `mtls`; left out of the JSON when `plain` (and so `plain` in
    /// reports from before TLS).
    #[serde(default, skip_serializing_if = "is_plain")]
    pub security: Security,
    /// What the TLS handshakes negotiated (version, cipher suite, ALPN); `null` when plain
    /// or when no handshake succeeded (libcurl does not say, so curl runs leave it out).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<Negotiated>,
    /// True when the server's certificate was not verified (`--insecure`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub insecure: bool,
    pub workers: usize,
    /// True for a run made at the default run's multiplexing concurrency rather than at
    /// `-c` (`h2-mux` and `grpc-mux`, and their unshared twins beside them, at 16
    /// workers: at `-c 1` there is nothing to multiplex); its mode label then says the
    /// workers (`ip c16`). Left out when false.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub mux_comparison: bool,
    /// The encoding of an encoded run (`--encoding`); left out for the opaque echo.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encoding: Option<crate::encoding::EncodingKind>,
    /// The WSTest message of an encoded run (`echo-struct:10`); left out for the echo.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<crate::encoding::Message>,
    /// Bytes per call, exact: the bodies and the wire; absent from reports from before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes_per_call: Option<BytesPerCall>,
    /// CPU per call on each side; absent from reports from before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_us_per_call: Option<CpuPerCall>,
    /// The engine that made the calls: `blocking` (a thread per worker) or `evloop` (a few
    /// event-loop threads, many connections each). `null` in reports from before it.
    #[serde(default)]
    pub engine: Option<Engine>,
    /// Threads that made the calls: one per worker, or the event-loop threads.
    #[serde(default)]
    pub threads: usize,
    /// Mean calls in flight over the measured window (time inside calls over wall time):
    /// below `workers` when some sat idle, waiting for their next due call under `--rate`,
    /// done with their share early, or slow to start. Said under the table when it falls
    /// short of the workers by more than [`CONCURRENCY_SHORTFALL`].
    pub concurrency_achieved: f64,
    /// Every measured call: `ok + lost + mismatched + sum(errors)`.
    pub calls: u64,
    pub ok: u64,
    pub lost: u64,
    pub mismatched: u64,
    /// Replies that came twice (extra to `calls`).
    pub duplicated: u64,
    /// Replies that came after their call was counted lost (UDP; extra to `calls`, the
    /// call stays lost). 0 in the JSON of a run from before the field.
    #[serde(default)]
    pub late_replies: u64,
    /// Late or duplicate replies that came after a reply to a later call (UDP).
    #[serde(default)]
    pub reordered: u64,
    /// Under `--rate`: calls that started more than one interval after they were due.
    pub late: u64,
    /// Failed calls by kind.
    pub errors: BTreeMap<String, u64>,
    /// Connections opened, warm-up included.
    pub connects: u64,
    /// Name lookups (`system`) or DNS queries (`cached`, `uncached`) the client asked for,
    /// warm-up included; 0 in mode `ip`.
    pub dns_queries: u64,
    /// The first name-lookup failure, naming the name and the resolver.
    pub dns_error: Option<String>,
    /// What the run's name lookups asked of DNS; `null` in mode `ip`, and in the JSON of
    /// a run from before the field.
    #[serde(default)]
    pub dns_lookup: Option<LookupRecord>,
    /// Wall time of the measured calls, summed over rounds.
    pub elapsed_s: f64,
    pub calls_per_s: f64,
    /// Latency of ok calls, from each call's actual start; `null` when none succeeded.
    pub latency_us: Option<Summary>,
    /// The mean latency of each round merged into this run, µs, in the order they ran;
    /// empty in reports from before it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub round_means_us: Vec<f64>,
    /// The noise of the mean, as a fraction of it (0.03: ±3%): the larger of how far a
    /// round's mean lies from the merged mean and the 95% confidence half-width of the
    /// mean over the calls ([`spread`]). Two means closer than their spreads added are no
    /// measurable difference. `null` when no call succeeded, and in reports from before it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spread: Option<f64>,
    /// Under `--rate`: latency of ok calls from when each was due on the schedule, so a
    /// call that started late because the one before it was slow is charged the wait
    /// (coordinated omission corrected, as wrk2 does); never below `latency_us` at any
    /// percentile. `null` back to back, where a call is due when it starts.
    pub latency_intended_us: Option<Summary>,
    /// Where the time went; a phase is `null` when the transport did not see it.
    pub phases_us: PhasesRecord,
    /// The latency curve: `[quantile, µs]` at each of [`CURVE_QUANTILES`], for charts.
    pub percentiles_us: Vec<[f64; 2]>,
    pub cpu_user_s: f64,
    pub cpu_sys_s: f64,
    /// The round-trip time of the link the run crossed, µs, as told with `--link-rtt`
    /// (the test bed passes the RTT it injected); left out when not told.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link_rtt_us: Option<f64>,
    /// Round trips per call (k), fitted by `rpcbench report` over runs of this transport
    /// and mode at two or more link RTTs (`mean ≈ fixed_cost_us + k × RTT`, see
    /// `crates/analysis/src/model.rs`); left out where no fit exists.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub round_trips_per_call: Option<f64>,
    /// Fixed cost per call (c), µs, from the same fit: the mean at zero RTT.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fixed_cost_us: Option<f64>,
    /// What the kernel saw of the run's own TCP connections (`TCP_INFO`, read as each
    /// closed): retransmits, SYN retries, RTTs. Absent on `unix`, `udp`, the libcurl
    /// transports (libcurl's sockets are out of reach) and in reports from before it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tcp_info: Option<crate::tcpinfo::TcpInfoRecord>,
    /// The first seqs of lost, mismatched and failed calls.
    pub lost_seqs: Vec<u64>,
    pub mismatched_seqs: Vec<u64>,
    pub error_seqs: Vec<u64>,
}

/// What one run's name lookups asked of DNS.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LookupRecord {
    /// Lookups made, one per new connection, warm-up included.
    pub lookups: u64,
    /// Queries the target's DNS responder (`rpcbench-echo --dns`) counted during the run,
    /// warm-up included, from its counters before and after; `null` when the server has
    /// no responder or could not be asked. Another client of the responder would count too.
    pub responder_queries: Option<u64>,
    /// Queries one lookup made: the responder's count per lookup when there is one, else
    /// rpcbench's own (`cached`, `uncached`, `uncached-search`); `null` in mode `system`
    /// without the responder, whose queries rpcbench cannot see.
    pub queries_per_lookup: Option<f64>,
    /// The names one lookup tries, in order, as the resolver configuration's search list
    /// and `ndots` make them (modes `system` and `uncached-search`); empty otherwise.
    pub search: Vec<String>,
}

impl LookupRecord {
    /// The record of a run that looked names up; `None` in mode `ip`.
    pub fn new(run: &TransportRun) -> Option<LookupRecord> {
        if run.mode == AddrMode::Ip {
            return None;
        }
        let per_lookup =
            |queries: u64| (run.dns_lookups > 0).then(|| queries as f64 / run.dns_lookups as f64);
        let queries_per_lookup = match (run.dns_responder_queries, run.mode) {
            (Some(q), _) => per_lookup(q),
            (None, AddrMode::System) => None,
            (None, _) => per_lookup(run.dns_queries),
        };
        Some(LookupRecord {
            lookups: run.dns_lookups,
            responder_queries: run.dns_responder_queries,
            queries_per_lookup,
            search: run.dns_search.clone(),
        })
    }
}

/// Phase summaries, one field per [`Phase`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PhasesRecord {
    pub dns: Option<Summary>,
    pub connect: Option<Summary>,
    /// The TLS handshake; absent from reports from before TLS.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<Summary>,
    pub first_byte: Option<Summary>,
    pub server: Option<Summary>,
    /// The client's encode and decode of an encoded call (`--encoding`), and the
    /// server's as it reported them; absent from runs without an encoding.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encode: Option<Summary>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decode: Option<Summary>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_decode: Option<Summary>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_encode: Option<Summary>,
}

impl PhasesRecord {
    /// The summary of one phase.
    pub fn get(&self, phase: Phase) -> Option<&Summary> {
        match phase {
            Phase::Dns => self.dns.as_ref(),
            Phase::Connect => self.connect.as_ref(),
            Phase::Tls => self.tls.as_ref(),
            Phase::FirstByte => self.first_byte.as_ref(),
            Phase::Server => self.server.as_ref(),
            Phase::Encode => self.encode.as_ref(),
            Phase::Decode => self.decode.as_ref(),
            Phase::ServerDecode => self.server_decode.as_ref(),
            Phase::ServerEncode => self.server_encode.as_ref(),
        }
    }
}

/// Bytes per call of a run.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct BytesPerCall {
    /// The request body (the payload, or an encoded call's body), mean over ok calls.
    pub request_body: f64,
    /// The reply body, mean over ok calls.
    pub reply_body: f64,
    /// What the client's connections sent on the wire per call (`tcpi_bytes_acked` over
    /// the calls they carried, warm-up included: headers, framing and TLS, and one byte
    /// per SYN); for the libcurl transports libcurl's count over the ok calls; `null`
    /// where neither is had (`unix`, `udp`).
    pub wire_sent: Option<f64>,
    /// What they received (`tcpi_bytes_received`, no SYN), per call.
    pub wire_received: Option<f64>,
}

/// CPU per call of a run, in µs.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct CpuPerCall {
    /// The client's worker threads (`getrusage`), user and system, per measured call.
    pub client_user: f64,
    pub client_system: f64,
    /// The server's own threads (`/stats` `threads_cpu` before and after the run), per
    /// request it took in (warm-up included); `null` where it was not read (runs without
    /// an encoding, or a server that cannot be asked).
    pub server_user: Option<f64>,
    pub server_system: Option<f64>,
    /// The 10 ms clock ticks the server's figures rest on: below 100, read them as rough.
    pub server_ticks: Option<u64>,
    /// The server process's resident memory after the run (the largest over its rounds),
    /// bytes; with the server embedded in `rpcbench` (no target), that process holds the
    /// client too. Absent where the server was not read, and from reports from before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_rss_bytes: Option<u64>,
}

/// A run's achieved concurrency may fall this far below its workers (a tenth) before the
/// table says so: start-up and shutdown of the workers alone cost a few per cent of a short
/// run, and a tenth is well past that, while a paced run that leaves workers idle most of
/// the time is far below it.
pub const CONCURRENCY_SHORTFALL: f64 = 0.9;

/// A run's bytes per call: `None` without an ok call.
fn bytes_per_call(run: &TransportRun) -> Option<BytesPerCall> {
    let t = &run.tally;
    let ok = (t.ok > 0).then_some(t.ok as f64)?;
    let tcp = &run.tcp_info;
    let carried = run.calls_carried as f64;
    // The kernel's count over every call the connections carried, else the HTTP
    // library's over the ok calls.
    let wire = |kernel: u64, library: u64| {
        if tcp.connections_sampled > 0 && kernel > 0 {
            Some(kernel as f64 / carried)
        } else {
            (library > 0).then(|| library as f64 / ok)
        }
    };
    Some(BytesPerCall {
        request_body: t.body_bytes_sent as f64 / ok,
        reply_body: t.body_bytes_received as f64 / ok,
        wire_sent: wire(tcp.bytes_acked, t.wire_bytes_sent),
        wire_received: wire(tcp.bytes_received, t.wire_bytes_received),
    })
}

/// A run's CPU per call: `None` without a call.
fn cpu_per_call(run: &TransportRun) -> Option<CpuPerCall> {
    let t = &run.tally;
    let calls = (t.calls() > 0).then_some(t.calls() as f64)?;
    let server = run.server_use;
    let per = |cpu_s: f64| crate::report::sweep::per_request(cpu_s, server?.requests);
    Some(CpuPerCall {
        client_user: t.cpu_user.as_secs_f64() * 1e6 / calls,
        client_system: t.cpu_sys.as_secs_f64() * 1e6 / calls,
        server_user: server.and_then(|s| per(s.cpu_user_s)),
        server_system: server.and_then(|s| per(s.cpu_system_s)),
        server_ticks: server.map(|s| ((s.cpu_user_s + s.cpu_system_s) * 100.0).round() as u64),
        server_rss_bytes: server.map(|s| s.rss_bytes),
    })
}

impl RunRecord {
    /// The address mode, and the security mode after it when that is not `plain`
    /// (`ip tls13`): how tables and messages name a run's modes.
    pub fn mode_label(&self) -> String {
        let mut label = if self.security.is_tls() {
            format!("{} {}", self.addr_mode, self.security)
        } else {
            self.addr_mode.to_string()
        };
        if self.mux_comparison {
            label.push_str(&format!(" c{}", self.workers));
        }
        if let (Some(encoding), Some(message)) = (self.encoding, self.message) {
            label.push_str(&format!(" {encoding} {message}"));
        }
        label
    }

    /// Summarises a merged transport run.
    pub fn new(run: &TransportRun) -> RunRecord {
        let t = &run.tally;
        let elapsed = run.elapsed.as_secs_f64();
        RunRecord {
            transport: run.kind,
            addr_mode: run.mode,
            security: run.security,
            tls: run.tls.clone(),
            insecure: run.insecure,
            workers: run.workers,
            mux_comparison: false,
            encoding: run.rpc.map(|r| r.encoding),
            message: run.rpc.map(|r| r.message),
            bytes_per_call: bytes_per_call(run),
            cpu_us_per_call: cpu_per_call(run),
            engine: Some(run.engine),
            threads: run.threads,
            concurrency_achieved: run.achieved_concurrency(),
            calls: t.calls(),
            ok: t.ok,
            lost: t.lost,
            mismatched: t.mismatched,
            duplicated: t.duplicated,
            late_replies: t.late_replies,
            reordered: t.reordered,
            late: t.late,
            errors: t.errors_by_key(),
            connects: t.connects,
            dns_queries: run.dns_queries,
            dns_error: run.dns_error.clone(),
            dns_lookup: LookupRecord::new(run),
            elapsed_s: elapsed,
            calls_per_s: if elapsed > 0.0 {
                t.calls() as f64 / elapsed
            } else {
                0.0
            },
            latency_us: t.latency.summary(),
            round_means_us: run.round_means_us.clone(),
            spread: t
                .latency
                .summary()
                .and_then(|l| spread(l.mean, l.stddev, t.latency.len(), &run.round_means_us)),
            latency_intended_us: t.latency_intended.as_ref().and_then(Hist::summary),
            percentiles_us: if t.latency.is_empty() {
                Vec::new()
            } else {
                CURVE_QUANTILES
                    .iter()
                    .zip(t.latency.quantiles_us(&CURVE_QUANTILES))
                    .map(|(&q, us)| [q, us])
                    .collect()
            },
            phases_us: PhasesRecord {
                dns: t.phase(Phase::Dns).summary(),
                connect: t.phase(Phase::Connect).summary(),
                tls: t.phase(Phase::Tls).summary(),
                first_byte: t.phase(Phase::FirstByte).summary(),
                server: t.phase(Phase::Server).summary(),
                encode: t.phase(Phase::Encode).summary(),
                decode: t.phase(Phase::Decode).summary(),
                server_decode: t.phase(Phase::ServerDecode).summary(),
                server_encode: t.phase(Phase::ServerEncode).summary(),
            },
            cpu_user_s: t.cpu_user.as_secs_f64(),
            cpu_sys_s: t.cpu_sys.as_secs_f64(),
            link_rtt_us: None,
            round_trips_per_call: None,
            fixed_cost_us: None,
            tcp_info: run.tcp_info.carrying(run.calls_carried),
            lost_seqs: t.lost_seqs.clone(),
            mismatched_seqs: t.mismatched_seqs.clone(),
            error_seqs: t.error_seqs.clone(),
        }
    }

    /// The latency the tables lead with: from when each call was due under `--rate`
    /// ([`RunRecord::latency_intended_us`]), else from its start. A user of a service
    /// called at a fixed rate waits from the due time, so that is the figure to compare.
    pub fn latency_shown(&self) -> Option<&Summary> {
        self.latency_intended_us
            .as_ref()
            .or(self.latency_us.as_ref())
    }

    /// True when fewer calls were in flight, on average, than [`CONCURRENCY_SHORTFALL`] of
    /// the workers.
    pub fn concurrency_fell_short(&self) -> bool {
        self.concurrency_achieved < CONCURRENCY_SHORTFALL * self.workers as f64
    }

    /// Calls that did not end ok.
    pub fn failed(&self) -> u64 {
        self.calls - self.ok
    }

    /// Failed calls by kind, with `lost` and `mismatched` first: what exit codes count.
    pub fn error_total(&self) -> u64 {
        self.errors.values().sum()
    }
}

impl Report {
    /// The smallest mean latency of any run, for the "× fastest" column: of the latency
    /// the table shows ([`RunRecord::latency_shown`]).
    pub fn fastest_mean(&self) -> Option<f64> {
        self.runs
            .iter()
            .filter_map(|r| r.latency_shown().map(|l| l.mean))
            .min_by(f64::total_cmp)
    }

    /// True when some run was paced and so has a latency from when its calls were due.
    pub fn paced(&self) -> bool {
        self.runs.iter().any(|r| r.latency_intended_us.is_some())
    }

    /// Calls lost, mismatched or failed over every run.
    pub fn failed(&self) -> u64 {
        self.runs.iter().map(RunRecord::failed).sum()
    }
}

/// What a check holds the figures to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Rule {
    /// A persistent (or shared) connection's mean does not depend on the address mode: its
    /// lookup is in the warm-up.
    ModesAgree,
    /// A same-host transport (`unix`) is no slower than its network twin (`tcp`,
    /// [`Facts::network_twin`](crate::transport::Facts::network_twin)): the same frames
    /// without the TCP/IP stack. Its JSON name is the one the first such pair gave it.
    #[serde(rename = "unix-not-slower-than-tcp")]
    SameHostNotSlower,
    /// A kept connection is no slower than its fresh twin, which does the same call and
    /// also connects and closes.
    KeptNotSlowerThanFresh,
    /// A fresh call by IP is no slower than one that asks DNS first (`uncached`).
    IpNotSlowerThanLookup,
    /// A fresh call in plain is no slower than one that also does a TLS handshake.
    PlainNotSlowerThanTls,
}

impl Rule {
    /// Every rule, in the order checks are listed (and `docs/output.md` lists them).
    pub const ALL: [Rule; 5] = [
        Rule::ModesAgree,
        Rule::SameHostNotSlower,
        Rule::KeptNotSlowerThanFresh,
        Rule::IpNotSlowerThanLookup,
        Rule::PlainNotSlowerThanTls,
    ];
}

/// One figure a check reads: which run, its mean and its noise.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Figure {
    pub transport: TransportKind,
    /// The run's mode label (`ip`, `uncached tls13`, `ip c16`).
    pub mode: String,
    pub mean_us: f64,
    /// The median, µs.
    pub p50_us: f64,
    /// The mean's noise as a fraction ([`RunRecord::spread`]); `null` when unknown.
    pub spread: Option<f64>,
}

/// One physics check of a run (`rpcbench::physics`): `faster` must not be slower than `slower` beyond their
/// noise, mean and median both (for [`Rule::ModesAgree`], the fastest and slowest modes by
/// mean must not differ beyond it).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PhysicsCheck {
    pub rule: Rule,
    /// The figure that must be the faster (or, for modes, the fastest mode).
    pub faster: Figure,
    /// The figure that must be the slower (or, for modes, the slowest mode).
    pub slower: Figure,
    pub pass: bool,
}

/// The z-score of a two-sided 95% confidence interval of a mean.
const Z_95: f64 = 1.96;

/// The noise of a mean of `n` calls with standard deviation `stddev`, as a fraction of the
/// mean: the larger of the rounds' worst distance from the merged mean (run-to-run noise:
/// the placement, the CPU's clock, a neighbour, which change between rounds and which a
/// confidence interval over the calls of one round cannot see) and the 95% confidence
/// half-width of the mean (`1.96 σ / √n`, the noise of a mean of few or scattered calls).
/// `None` for a mean of no calls.
pub fn spread(mean: f64, stddev: f64, n: u64, round_means: &[f64]) -> Option<f64> {
    if n == 0 || mean <= 0.0 {
        return None;
    }
    let interval = Z_95 * stddev / (n as f64).sqrt() / mean;
    let rounds = round_means
        .iter()
        .map(|m| (m - mean).abs() / mean)
        .fold(0.0, f64::max);
    Some(interval.max(rounds))
}

/// Now as RFC 3339 (UTC, second precision), without a date crate: days since the epoch to
/// a civil date is a dozen lines (Howard Hinnant's `civil_from_days`).
pub fn rfc3339_now() -> String {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    rfc3339(secs)
}

fn rfc3339(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

/// True for `plain`: the security field is then left out of the JSON.
pub fn is_plain(security: &Security) -> bool {
    *security == Security::Plain
}

/// [`crate::tcpinfo::path_rtt_estimate`] over a report's runs: the least kernel RTT of any run, and the
/// least latency of any persistent, unshared transport's ok call.
pub fn path_rtt_of_runs(runs: &[RunRecord]) -> Option<crate::tcpinfo::PathRttEstimate> {
    let least = |it: &mut dyn Iterator<Item = f64>| it.reduce(f64::min);
    let tcp = least(
        &mut runs
            .iter()
            .filter_map(|r| r.tcp_info.as_ref()?.least_rtt_us()),
    );
    let persistent = least(
        &mut runs
            .iter()
            .filter(|r| r.transport.persistent() && !r.transport.shared())
            .filter_map(|r| r.latency_us.as_ref().map(|l| l.min)),
    );
    crate::tcpinfo::path_rtt_estimate(tcp, persistent)
}

/// Connections of one run that retransmitted their SYN, and what that did to its tail.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SynRetries {
    pub transport: crate::transport::TransportKind,
    pub connections: u64,
    pub connections_sampled: u64,
    pub syn_retransmits: u64,
    /// The kernel's first SYN retransmission timeout, µs.
    pub timeout_us: f64,
    pub p99_us: f64,
    pub max_us: f64,
}

impl SynRetries {
    /// True when the p99 itself is those retries (at least a SYN timeout); otherwise only
    /// the slowest calls (fewer than 1%) waited.
    pub fn in_p99(&self) -> bool {
        self.p99_us >= self.timeout_us
    }
}

/// A run's SYN retries, when some connection retried its SYN and a call waited a whole
/// SYN timeout for it.
pub fn syn_retries(run: &RunRecord) -> Option<SynRetries> {
    let info = run.tcp_info.as_ref()?;
    let latency = run.latency_us.as_ref()?;
    if info.syn_retransmitting_connections == 0 || latency.max < crate::tcpinfo::SYN_TIMEOUT_US {
        return None;
    }
    Some(SynRetries {
        transport: run.transport,
        connections: info.syn_retransmitting_connections,
        connections_sampled: info.connections_sampled,
        syn_retransmits: info.syn_retransmits,
        timeout_us: crate::tcpinfo::SYN_TIMEOUT_US,
        p99_us: latency.p99,
        max_us: latency.max,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_dates() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(rfc3339(1_796_007_661), "2026-11-30T03:01:01Z");
    }

    #[test]
    fn spread_is_the_worse_of_rounds_and_interval() {
        // Rounds 90 and 110 around 100: ±10%, wider than the interval of 10,000 calls.
        let s = spread(100.0, 20.0, 10_000, &[90.0, 110.0]).unwrap();
        assert!((s - 0.10).abs() < 1e-9, "{s}");
        // One round of 4 scattered calls: the interval, 1.96 × 50 / 2 / 100.
        let s = spread(100.0, 50.0, 4, &[100.0]).unwrap();
        assert!((s - 0.49).abs() < 1e-9, "{s}");
        assert_eq!(spread(100.0, 1.0, 0, &[]), None);
    }
}
