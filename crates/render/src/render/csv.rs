//! CSV: one tidy table, for programs and spreadsheets. The header comes once, then one row
//! per transport and address mode with its phases on the same row, every number in the
//! fixed unit its header names (`_us`, `_s`) and at full precision, so a row holds the same
//! values as the JSON. An empty cell is a figure the run does not have. Cells never
//! contain commas or quotes (names and numbers only), so no quoting is needed; a check
//! keeps that true.

use super::PHASE_STATS;
use crate::measure::{Phase, Summary};
use crate::report::{Report, RunRecord};
use std::io::{self, Write};

/// The columns before the phases: names, counts, the latency of ok calls in µs from each
/// call's start, then (under `--rate`, else empty) from when each was due.
pub const CSV_HEADERS: [&str; 34] = [
    "transport",
    "mode",
    "security",
    "workers",
    "concurrency_achieved",
    "calls",
    "ok",
    "lost",
    "mismatched",
    "errors",
    "duplicated",
    "late",
    "connects",
    "dns_queries",
    "elapsed_s",
    "calls_per_s",
    "min_us",
    "mean_us",
    "p50_us",
    "p90_us",
    "p99_us",
    "p999_us",
    "max_us",
    "stddev_us",
    "intended_min_us",
    "intended_mean_us",
    "intended_p50_us",
    "intended_p90_us",
    "intended_p99_us",
    "intended_p999_us",
    "intended_max_us",
    "intended_stddev_us",
    "cpu_user_s",
    "cpu_sys_s",
];

/// The `TCP_INFO` columns, after the phases: empty cells on a run that was not probed
/// (`unix`, `udp`, the libcurl transports).
const TCP_INFO_HEADERS: [&str; 5] = [
    "tcp_connections_sampled",
    "tcp_retransmits",
    "tcp_retransmits_per_call",
    "tcp_syn_retransmitting_connections",
    "tcp_min_rtt_us",
];

/// The whole header: [`CSV_HEADERS`], then `<phase>_mean_us` and `<phase>_p99_us` for
/// every phase (all of them, so that the header does not depend on the run), then
/// [`TCP_INFO_HEADERS`].
pub fn headers() -> Vec<String> {
    let mut h: Vec<String> = CSV_HEADERS.iter().map(|s| s.to_string()).collect();
    for phase in Phase::ALL {
        for (stat, _) in PHASE_STATS {
            h.push(format!("{}_{stat}_us", phase.name()));
        }
    }
    h.extend(TCP_INFO_HEADERS.iter().map(|s| s.to_string()));
    h
}

/// A number at full precision (the shortest text that reads back as the same `f64`).
fn num(x: f64) -> String {
    format!("{x}")
}

/// The statistics of a latency summary in the order of [`CSV_HEADERS`]: `min_us` to
/// `stddev_us`, and again as `intended_min_us` to `intended_stddev_us`.
const LATENCY_STATS: [fn(&Summary) -> f64; 8] = [
    |s| s.min,
    |s| s.mean,
    |s| s.p50,
    |s| s.p90,
    |s| s.p99,
    |s| s.p999,
    |s| s.max,
    |s| s.stddev,
];

/// The cells of one latency summary, empty when there is none.
fn latency_cells(summary: Option<&Summary>) -> impl Iterator<Item = String> + '_ {
    LATENCY_STATS
        .iter()
        .map(move |get| summary.map_or(String::new(), |s| num(get(s))))
}

/// One run's row, in [`headers`] order.
pub fn row(r: &RunRecord) -> Vec<String> {
    let mut row = vec![
        r.transport.to_string(),
        r.addr_mode.to_string(),
        r.security.to_string(),
        r.workers.to_string(),
        num(r.concurrency_achieved),
        r.calls.to_string(),
        r.ok.to_string(),
        r.lost.to_string(),
        r.mismatched.to_string(),
        r.error_total().to_string(),
        r.duplicated.to_string(),
        r.late.to_string(),
        r.connects.to_string(),
        r.dns_queries.to_string(),
        num(r.elapsed_s),
        num(r.calls_per_s),
    ];
    row.extend(latency_cells(r.latency_us.as_ref()));
    row.extend(latency_cells(r.latency_intended_us.as_ref()));
    row.extend([num(r.cpu_user_s), num(r.cpu_sys_s)]);
    for phase in Phase::ALL {
        for (_, get) in PHASE_STATS {
            row.push(
                r.phases_us
                    .get(phase)
                    .map_or(String::new(), |s| num(get(s))),
            );
        }
    }
    match &r.tcp_info {
        Some(t) => row.extend([
            t.connections_sampled.to_string(),
            t.retransmits.to_string(),
            num(t.retransmits_per_call),
            t.syn_retransmitting_connections.to_string(),
            t.least_rtt_us().map_or(String::new(), num),
        ]),
        None => row.extend(TCP_INFO_HEADERS.iter().map(|_| String::new())),
    }
    row
}

/// Writes the header and one row per run.
pub fn write(report: &Report, out: &mut dyn Write) -> io::Result<()> {
    writeln!(out, "{}", headers().join(","))?;
    for r in &report.runs {
        let row = row(r);
        debug_assert!(row.iter().all(|c| !c.contains([',', '"', '\n'])));
        writeln!(out, "{}", row.join(","))?;
    }
    Ok(())
}
