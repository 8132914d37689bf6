//! What `rpcbench sweep --out` writes: the record of a sweep (its steps, series and
//! objective), read back by `rpcbench report`. Beside the run's record ([`Report`](crate::report::Report)),
//! in the record layer, so that the analysis and the renderers read it without reaching
//! up into the sweep that makes it.

use super::{Environment, RunRecord};
use crate::resolve::AddrMode;
use crate::server::stats::{ServerUse, StatsSnapshot};
use crate::transport::TransportKind;
use serde::{Deserialize, Serialize};

/// A rate meets the objective only when at least this share of it was achieved: a
/// client that could not send what was asked has not shown the server can take it.
pub const MIN_ACHIEVED: f64 = 0.95;
/// An objective as the sweep's JSON records it: the figures, and the text tables print.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SloRecord {
    /// As `rpcbench::sweep::Slo`'s `Display` writes it, e.g. `p99 ≤ 2.00 ms`.
    pub text: String,
    /// 0 < quantile < 1, e.g. 0.99.
    pub quantile: f64,
    /// The bound, µs: what charts draw as a line.
    pub bound_us: f64,
}

impl SloRecord {
    /// The percentile's name, as written on the command line: `p99`, `p99.9`.
    pub fn percentile(&self) -> String {
        percentile_name(self.quantile)
    }
}

/// A quantile's name as a percentile, as written on the command line: `p99`, `p99.9`.
pub fn percentile_name(quantile: f64) -> String {
    // Rounded to a millionth, so 0.999 prints as 99.9 and not 99.89999999999999.
    format!("p{}", (quantile * 100.0 * 1e6).round() / 1e6)
}

/// The server's own cost over one step, from its counters before and after.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerCost {
    /// Requests the server counted during the step, every protocol.
    pub requests: u64,
    /// CPU time the server's own threads spent in user mode per request of the step, µs
    /// (from `/stats`' `threads_cpu`, in 10 ms clock ticks: read it over steps of many
    /// calls); `null` when the step had no request.
    pub cpu_user_us_per_call: Option<f64>,
    /// The same, in the kernel (system time), µs per request.
    pub cpu_system_us_per_call: Option<f64>,
    /// The server process's resident memory after the step, bytes. With the server
    /// embedded in `rpcbench` (no target), that process holds the client too.
    pub rss_bytes: u64,
}

impl ServerCost {
    /// The cost of a step from the server's counters before (`b`) and after (`a`) it.
    pub fn between(b: &StatsSnapshot, a: &StatsSnapshot) -> ServerCost {
        let used = ServerUse::between(b, a);
        ServerCost {
            requests: used.requests,
            cpu_user_us_per_call: per_request(used.cpu_user_s, used.requests),
            cpu_system_us_per_call: per_request(used.cpu_system_s, used.requests),
            rss_bytes: a.process.rss_bytes,
        }
    }
}

/// `cpu_s` per request in µs; `None` without a request.
pub fn per_request(cpu_s: f64, requests: u64) -> Option<f64> {
    (requests > 0).then(|| cpu_s * 1e6 / requests as f64)
}

/// One step of a sweep.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Step {
    /// The offered rate (calls per second over all workers); `null` for closed loop.
    pub offered_per_s: Option<f64>,
    /// Calls completed per second, every outcome.
    pub achieved_per_s: f64,
    pub concurrency: usize,
    pub payload_bytes: u32,
    /// Bytes each reply carries.
    pub reply_bytes: u32,
    /// Goodput of verified calls, request bytes per second over the wall time, in MB/s.
    pub goodput_out_mb_s: f64,
    /// Goodput of verified calls, reply bytes, MB/s.
    pub goodput_in_mb_s: f64,
    /// The objective's percentile, µs: from when each call was due under an offered
    /// rate (corrected), from its start otherwise; `null` without an objective or calls.
    pub slo_latency_us: Option<f64>,
    /// Whether the step met the objective; `null` without one.
    pub meets_slo: Option<bool>,
    /// Why it did not, in words ([`Step::misses`] are the values they say).
    pub why_not: Option<String>,
    /// The server's requests and cost during the step, when its counters could be read.
    pub server: Option<ServerCost>,
    /// The step's full run record, as a plain run reports it.
    pub run: RunRecord,
}

/// One transport's steps, and its capacity at the objective.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Series {
    pub transport: TransportKind,
    /// The address mode, as in the run records (`ip`, `system`, …).
    pub addr_mode: AddrMode,
    /// The encoding of a series of encoded calls; left out for the echo.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encoding: Option<crate::encoding::EncodingKind>,
    pub steps: Vec<Step>,
    /// The highest offered rate that met the objective; `null` without an objective, a
    /// rate axis or search, or when no rate met it.
    pub capacity_per_s: Option<f64>,
}

/// What `rpcbench sweep --out` writes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SweepReport {
    pub rpcbench: String,
    pub started: String,
    pub target: String,
    pub command: Vec<String>,
    /// What varied from step to step.
    pub axis: SweepAxis,
    /// The objective; `null` without `--slo`.
    pub slo: Option<SloRecord>,
    pub step_duration_s: f64,
    /// The client's machine, with where rpcbench placed its threads.
    pub environment: Environment,
    pub series: Vec<Series>,
}

/// What a sweep varied, as its JSON names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SweepAxis {
    /// A list of offered rates.
    Rate,
    /// A list of worker counts (closed loop).
    Concurrency,
    /// A list of request payload sizes.
    Payload,
    /// A list of WSTest messages, in one encoding per series (`--messages`).
    Message,
    /// Offered rates the capacity search chose.
    Search,
}

impl SweepAxis {
    /// The name in the JSON and the tables: `rate`, `concurrency`, `payload`, `search`.
    pub fn name(self) -> &'static str {
        match self {
            SweepAxis::Rate => "rate",
            SweepAxis::Concurrency => "concurrency",
            SweepAxis::Payload => "payload",
            SweepAxis::Message => "message",
            SweepAxis::Search => "search",
        }
    }

    /// True when the steps are offered rates (a list, or the ones the search chose).
    pub fn offers_rates(self) -> bool {
        matches!(self, SweepAxis::Rate | SweepAxis::Search)
    }
}

impl std::fmt::Display for SweepAxis {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// One reason a step did not meet its objective, with the figures it rests on; the words
/// are `render::sweep`'s.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Miss {
    /// The objective's percentile was above its bound.
    Above {
        /// 0 < quantile < 1, e.g. 0.99.
        quantile: f64,
        latency_us: f64,
        bound_us: f64,
    },
    /// No call succeeded, so there is no latency to hold to the bound.
    NoCallSucceeded,
    /// Calls failed.
    Failed { failed: u64, calls: u64 },
    /// The rate achieved fell below [`MIN_ACHIEVED`] of the rate offered.
    FellBehind {
        achieved_per_s: f64,
        offered_per_s: f64,
    },
}

impl Step {
    /// Why the step did not meet `slo`, in the order the tables say it; empty when it met
    /// it. Read from the step's own figures, so a step read back from JSON answers the
    /// same as the one the sweep judged.
    pub fn misses(&self, slo: &SloRecord) -> Vec<Miss> {
        let mut out = Vec::new();
        match self.slo_latency_us {
            Some(us) if us > slo.bound_us => out.push(Miss::Above {
                quantile: slo.quantile,
                latency_us: us,
                bound_us: slo.bound_us,
            }),
            Some(_) => {}
            None => out.push(Miss::NoCallSucceeded),
        }
        if self.run.failed() > 0 {
            out.push(Miss::Failed {
                failed: self.run.failed(),
                calls: self.run.calls,
            });
        }
        if let Some(offered) = self.offered_per_s
            && self.achieved_per_s < MIN_ACHIEVED * offered
        {
            out.push(Miss::FellBehind {
                achieved_per_s: self.achieved_per_s,
                offered_per_s: offered,
            });
        }
        out
    }
}
