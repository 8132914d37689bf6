//! One transport's run as JSON keeps it ([`RunRecord`]): its identity, counts, latency,
//! phases, bytes and CPU per call, and what they say.

use super::{
    BytesPerCall, CONCURRENCY_SHORTFALL, CURVE_QUANTILES, CpuPerCall, LookupRecord, PhasesRecord,
    bytes_per_call, cpu_per_call, is_plain, spread,
};
use crate::measure::{Hist, Phase, Summary};
use crate::resolve::AddrMode;
use crate::runner::{Engine, TransportRun};
use crate::transport::TransportKind;
use crate::transport::tls::{Negotiated, Security};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

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
    /// In `tls13-0rtt`: how many of the measured calls' connections sent their request in
    /// early data, and how many of those the server accepted; left out in other modes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zero_rtt: Option<ZeroRtt>,
    /// QUIC Retry packets the measured calls' connections received (the server asked
    /// them to prove their address first: a round trip more each); left out where there
    /// were none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quic_retries: Option<u64>,
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

/// Early data of a `tls13-0rtt` run's measured calls, counted by connection: a
/// connection-per-call transport sends each call's request in early data when it holds a
/// session ticket (the first calls, and any made faster than tickets arrive, handshake in
/// full); a kept connection sends only its first.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ZeroRtt {
    /// Connections that sent their first request in early data.
    pub sent: u64,
    /// Of those, the ones whose early data the server accepted (the others were sent
    /// again once the handshake was done).
    pub accepted: u64,
}

impl RunRecord {
    /// What identifies the run among a report's runs ([`RunKey`]).
    pub fn key(&self) -> RunKey {
        RunKey {
            transport: self.transport,
            addr_mode: self.addr_mode,
            security: self.security,
            workers: self.mux_comparison.then_some(self.workers),
            encoded: self.encoding.zip(self.message),
        }
    }

    /// The address mode, and the security mode after it when that is not `plain`
    /// (`ip tls13`): how tables and messages name a run's modes ([`RunKey`]'s text).
    pub fn mode_label(&self) -> String {
        self.key().to_string()
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
            zero_rtt: run.security.early_data().then_some(ZeroRtt {
                sent: t.zero_rtt_sent,
                accepted: t.zero_rtt_accepted,
            }),
            quic_retries: (t.quic_retries > 0).then_some(t.quic_retries),
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
                handshake: t.phase(Phase::Handshake).summary(),
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

/// What identifies a run among a report's runs: its transport, address and security
/// modes, its workers where a report runs a transport at two concurrencies (the
/// multiplexing comparison's), and its encoding and message where it has them. Two runs of
/// two reports with equal keys are the same run measured twice (`rpcbench compare`).
///
/// Its text (`Display`) is the run's mode label, as tables, messages and the JSON's
/// `mode` fields write it: the address mode, then the security mode when not `plain`, the
/// workers as `c16`, the encoding and message (`uncached tls13 c16`, `ip json struct:10`);
/// the transport is named beside it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RunKey {
    pub transport: TransportKind,
    pub addr_mode: AddrMode,
    pub security: Security,
    /// The workers, for a run of the multiplexing comparison; `None` otherwise.
    pub workers: Option<usize>,
    /// The encoding and its message, for an encoded run.
    pub encoded: Option<(crate::encoding::EncodingKind, crate::encoding::Message)>,
}

impl RunKey {
    /// A run of the opaque echo at the run's own concurrency: what the round-trip model
    /// fits.
    pub fn plain_echo(transport: TransportKind, addr_mode: AddrMode, security: Security) -> RunKey {
        RunKey {
            transport,
            addr_mode,
            security,
            workers: None,
            encoded: None,
        }
    }
}

impl std::fmt::Display for RunKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.addr_mode)?;
        if self.security.is_tls() {
            write!(f, " {}", self.security)?;
        }
        if let Some(workers) = self.workers {
            write!(f, " c{workers}")?;
        }
        if let Some((encoding, message)) = self.encoded {
            write!(f, " {encoding} {message}")?;
        }
        Ok(())
    }
}
