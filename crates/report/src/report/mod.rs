//! The serialisable result of a run: what `--format json` and `--out` write, and what
//! every renderer reads. `tests/fixtures/report.json` holds its committed shape.
//!
//! Layer 4 of the map in `lib.rs` (record): uses the client and the layers below; analysis and render read it, never the other way.

mod checks;
mod parts;
mod run;
/// What `rpcbench sweep --out` writes.
pub mod sweep;
pub use checks::{Figure, PhysicsCheck, Rule, spread};
pub use parts::{BytesPerCall, CONCURRENCY_SHORTFALL, CpuPerCall, LookupRecord, PhasesRecord};
use parts::{bytes_per_call, cpu_per_call};
pub use run::{RunKey, RunRecord};

use crate::resolve::{AddrMode, Family};
use crate::runner::RunConfig;
use crate::server::stats::StatsSnapshot;
use crate::transport::TransportKind;
use crate::transport::tls::Security;
use serde::{Deserialize, Serialize};
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

/// What a report called: the in-process server `rpcbench` starts without a target, or a
/// server elsewhere. The JSON keeps the target as text ([`Report::target`]); this is what
/// the program decides by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// The embedded server, on loopback in the same process.
    Embedded,
    /// A server the user named.
    Remote,
}

impl Target {
    /// How the text of an embedded run's target begins (`embedded (echo.rpcbench.test =
    /// 127.0.0.1, DNS at ...)`).
    pub const EMBEDDED: &str = "embedded";
}

impl Report {
    /// Whether it called the embedded server or one elsewhere.
    pub fn target_kind(&self) -> Target {
        if self.target.starts_with(Target::EMBEDDED) {
            Target::Embedded
        } else {
            Target::Remote
        }
    }

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
