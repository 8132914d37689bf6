//! Renderers: one file per output format, each writing a [`Report`] to any `io::Write`.
//! The library never prints by itself.
//!
//! The table, CSV and markdown renderers all take their rows from [`summary_rows`] and
//! [`phase_rows`], so they carry the same numbers by construction.

mod csv;
mod json;
mod markdown;
pub mod sweep;
mod table;

use crate::measure::{Phase, Summary};
use crate::report::{Report, RunRecord};
use std::io::{self, Write};

/// An output format for the results.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// Aligned tables for a terminal.
    Table,
    /// The full report as JSON.
    Json,
    /// One CSV row per transport (and the phase rows after a blank line).
    Csv,
    /// GitHub-flavoured markdown tables.
    Markdown,
}

/// Writes `report` in `format`.
pub fn render(report: &Report, format: Format, out: &mut dyn Write) -> io::Result<()> {
    match format {
        Format::Table => table::write(report, out),
        Format::Json => json::write(report, out),
        Format::Csv => csv::write(report, out),
        Format::Markdown => markdown::write(report, out),
    }
}

/// Column headers of the summary table; every header names its unit.
pub const SUMMARY_HEADERS: [&str; 20] = [
    "transport",
    "mode",
    "calls",
    "ok",
    "lost",
    "mism",
    "err",
    "connects",
    "total s",
    "calls/s",
    "mean ms",
    "p50 ms",
    "p90 ms",
    "p99 ms",
    "p99.9 ms",
    "max ms",
    "stddev ms",
    "× fastest",
    "cpu user s",
    "cpu sys s",
];

/// Milliseconds with microsecond precision, from microseconds.
pub fn ms(us: f64) -> String {
    format!("{:.3}", us / 1e3)
}

/// The summary table's rows, as text cells.
pub fn summary_rows(report: &Report) -> Vec<Vec<String>> {
    let fastest = report.fastest_mean();
    report
        .runs
        .iter()
        .map(|r| {
            let lat =
                |f: fn(&Summary) -> f64| r.latency_us.as_ref().map_or("-".into(), |s| ms(f(s)));
            let ratio = match (r.latency_us, fastest) {
                (Some(l), Some(f)) if f > 0.0 => format!("{:.2}", l.mean / f),
                _ => "-".into(),
            };
            vec![
                r.transport.clone(),
                r.addr_mode.clone(),
                r.calls.to_string(),
                r.ok.to_string(),
                r.lost.to_string(),
                r.mismatched.to_string(),
                r.error_total().to_string(),
                r.connects.to_string(),
                format!("{:.3}", r.elapsed_s),
                format!("{:.0}", r.calls_per_s),
                lat(|s| s.mean),
                lat(|s| s.p50),
                lat(|s| s.p90),
                lat(|s| s.p99),
                lat(|s| s.p999),
                lat(|s| s.max),
                lat(|s| s.stddev),
                ratio,
                format!("{:.3}", r.cpu_user_s),
                format!("{:.3}", r.cpu_sys_s),
            ]
        })
        .collect()
}

/// Column headers of the phase table.
pub fn phase_headers() -> Vec<String> {
    let mut h = vec!["transport".to_string(), "mode".to_string()];
    for phase in Phase::ALL {
        let name = phase.name().replace('_', " ");
        h.push(format!("{name} mean ms"));
        h.push(format!("{name} p99 ms"));
    }
    h
}

/// The phase table's rows: mean and p99 of each phase, `-` where the transport has none.
pub fn phase_rows(report: &Report) -> Vec<Vec<String>> {
    report
        .runs
        .iter()
        .map(|r| {
            let mut row = vec![r.transport.clone(), r.addr_mode.clone()];
            for phase in Phase::ALL {
                match r.phases_us.get(phase) {
                    Some(s) => {
                        row.push(ms(s.mean));
                        row.push(ms(s.p99));
                    }
                    None => row.extend(["-".to_string(), "-".to_string()]),
                }
            }
            row
        })
        .collect()
}

/// How many seqs of each kind the problem list shows.
const SHOWN_SEQS: usize = 20;

/// Plain-text lines for every run that lost, mismatched or failed calls: the counts and
/// the first seqs, the way seed 004 diffed what it sent against what came back.
pub fn problem_lines(report: &Report) -> Vec<String> {
    report
        .runs
        .iter()
        .filter(|r| r.failed() > 0 || r.duplicated > 0 || r.late > 0)
        .map(problem_line)
        .collect()
}

fn problem_line(r: &RunRecord) -> String {
    let seqs = |v: &[u64]| {
        let shown: Vec<String> = v.iter().take(SHOWN_SEQS).map(u64::to_string).collect();
        let more = if v.len() > SHOWN_SEQS { " …" } else { "" };
        format!("[{}{more}]", shown.join(", "))
    };
    let mut parts = Vec::new();
    if r.lost > 0 {
        parts.push(format!("lost {} {}", r.lost, seqs(&r.lost_seqs)));
    }
    if r.mismatched > 0 {
        parts.push(format!(
            "mismatched {} {}",
            r.mismatched,
            seqs(&r.mismatched_seqs)
        ));
    }
    if r.error_total() > 0 {
        let kinds: Vec<String> = r.errors.iter().map(|(k, n)| format!("{k}={n}")).collect();
        parts.push(format!(
            "errors {} ({}) {}",
            r.error_total(),
            kinds.join(", "),
            seqs(&r.error_seqs)
        ));
    }
    if r.duplicated > 0 {
        parts.push(format!("duplicated replies {}", r.duplicated));
    }
    if r.late > 0 {
        parts.push(format!(
            "{} calls started more than one interval late: --rate was not held",
            r.late
        ));
    }
    if let Some(why) = &r.dns_error {
        parts.push(why.clone());
    }
    format!(
        "{} ({}): {} of {} calls failed: {}",
        r.transport,
        r.addr_mode,
        r.failed(),
        r.calls,
        parts.join("; ")
    )
}
