//! `rpcbench sweep` as text: one table per transport and mode, a row per step, then why
//! steps missed the objective and the capacity under it. Laid out like the run table
//! (`table.rs`) from the same pieces: cells as `Cell`s, one unit per latency column
//! ([`crate::render::units`]), the columns that fit the width chosen by `Candidates`,
//! `--wide` for all of them. Markdown shows every column; CSV is
//! one tidy table, a row per step, in fixed units.

use super::markdown::write_table;
use super::table::grid_lines;
use super::{Candidates, Cell, Grid, RenderOptions, csv, text_column, units, wrap};
use crate::report::sweep::{
    Miss, Series, SloRecord, Step, SweepAxis, SweepReport, percentile_name,
};
use std::io::{self, Write};

/// One column of a sweep's step table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Column {
    /// The transport's name.
    Transport,
    /// The address mode.
    Mode,
    /// The offered rate, or `closed` for a closed-loop step.
    Offered,
    /// Calls completed per second.
    Achieved,
    /// Workers (`-c`).
    Workers,
    /// Mean calls in flight.
    InFlight,
    /// Request bytes.
    Payload,
    /// Median latency, corrected at an offered rate.
    P50,
    /// 99th percentile, corrected at an offered rate.
    P99,
    /// 99th percentile from each call's actual start, beside the corrected one.
    StartP99,
    /// The objective's percentile, when it is neither p50 nor p99 (those columns are it).
    Objective,
    /// Calls that did not end ok.
    Failed,
    /// Calls that started more than one interval late.
    Late,
    /// Verified request bytes per second.
    MbOut,
    /// Verified reply bytes per second, when replies differ from requests.
    MbIn,
    /// Whether the step met the objective.
    Meets,
    /// The server's own CPU time per request, user plus system.
    ServerCpu,
}

impl Column {
    /// Every column, in the order they stand.
    const ALL: [Column; 17] = [
        Column::Transport,
        Column::Mode,
        Column::Offered,
        Column::Achieved,
        Column::Workers,
        Column::InFlight,
        Column::Payload,
        Column::P50,
        Column::P99,
        Column::StartP99,
        Column::Objective,
        Column::Failed,
        Column::Late,
        Column::MbOut,
        Column::MbIn,
        Column::Meets,
        Column::ServerCpu,
    ];

    /// The default set for a sweep along `axis`, most important first (what varies, then
    /// the answer), and the groups added while they fit: a rate sweep is about p99 at each
    /// rate, a payload sweep about latency and goodput per size, a concurrency sweep about
    /// throughput per worker count.
    fn sets(axis: SweepAxis) -> (&'static [Column], &'static [&'static [Column]]) {
        use Column::*;
        match axis {
            SweepAxis::Payload | SweepAxis::Message => (
                &[
                    Transport, Mode, Payload, P50, P99, MbOut, MbIn, Achieved, Failed, Objective,
                    Meets,
                ],
                &[&[ServerCpu], &[InFlight], &[Workers], &[Late]],
            ),
            SweepAxis::Concurrency => (
                &[
                    Transport, Mode, Workers, InFlight, Achieved, P50, P99, Objective, Meets,
                    Failed,
                ],
                &[&[ServerCpu], &[MbOut, MbIn], &[Payload]],
            ),
            _ => (
                &[
                    Transport, Mode, Offered, Achieved, P99, Objective, Meets, Failed, P50,
                    InFlight,
                ],
                &[
                    &[StartP99],
                    &[ServerCpu],
                    &[Late],
                    &[MbOut, MbIn],
                    &[Workers],
                    &[Payload],
                ],
            ),
        }
    }

    /// Whether the table of `series` has this column: the start latency and lateness only
    /// with offered rates, the objective's columns only with one, the reply goodput only
    /// when replies are not echoes.
    fn applies(self, series: &Series, slo: Option<&SloRecord>) -> bool {
        let paced = series.steps.iter().any(|s| s.offered_per_s.is_some());
        match self {
            Column::StartP99 | Column::Late => paced,
            Column::Objective => slo.is_some_and(|s| !["p50", "p99"].contains(&&*s.percentile())),
            Column::Meets => slo.is_some(),
            Column::ServerCpu => series.steps.iter().any(|s| {
                s.server
                    .as_ref()
                    .is_some_and(|c| c.cpu_user_us_per_call.is_some())
            }),
            Column::MbIn => series
                .steps
                .iter()
                .any(|s| s.reply_bytes != s.payload_bytes),
            _ => true,
        }
    }

    /// The header without its unit (a latency column adds the unit it picks).
    fn name(self, slo: Option<&SloRecord>) -> String {
        match self {
            Column::Transport => "transport".into(),
            Column::Mode => "mode".into(),
            Column::Offered => "offered/s".into(),
            Column::Achieved => "achieved/s".into(),
            Column::Workers => "-c".into(),
            Column::InFlight => "in flight".into(),
            Column::Payload => "payload B".into(),
            Column::P50 => "p50".into(),
            Column::P99 => "p99".into(),
            Column::StartP99 => "start p99".into(),
            Column::Objective => slo.map_or_else(String::new, SloRecord::percentile),
            Column::Failed => "failed".into(),
            Column::Late => "late".into(),
            Column::MbOut => "MB/s out".into(),
            Column::MbIn => "MB/s in".into(),
            Column::Meets => "meets".into(),
            Column::ServerCpu => "srv CPU/call".into(),
        }
    }

    /// The column's value for one step of `series`.
    fn cell(self, series: &Series, step: &Step) -> Cell {
        let run = &step.run;
        let text = |t: String| Cell::Text(t);
        match self {
            Column::Transport => text(series.transport.to_string()),
            Column::Mode => text(match series.encoding {
                Some(encoding) => format!("{} {encoding}", series.addr_mode),
                None => series.addr_mode.to_string(),
            }),
            Column::Offered => text(step.offered_per_s.map_or("closed".into(), units::rate)),
            Column::Achieved => text(units::rate(step.achieved_per_s)),
            Column::Workers => text(step.concurrency.to_string()),
            Column::InFlight => text(units::significant(run.concurrency_achieved, 2)),
            Column::Payload => text(match run.message {
                // An encoded call's payload is its message's body.
                Some(message) => format!("{message} {}", step.payload_bytes),
                None => step.payload_bytes.to_string(),
            }),
            Column::P50 => Cell::Duration(run.latency_shown().map(|l| l.p50)),
            Column::P99 => Cell::Duration(run.latency_shown().map(|l| l.p99)),
            Column::StartP99 => Cell::Duration(
                run.latency_us
                    .filter(|_| step.offered_per_s.is_some())
                    .map(|l| l.p99),
            ),
            Column::Objective => Cell::Duration(step.slo_latency_us),
            Column::Failed => text(run.failed().to_string()),
            Column::Late => text(run.late.to_string()),
            Column::MbOut => text(units::significant(step.goodput_out_mb_s, 3)),
            Column::MbIn => text(units::significant(step.goodput_in_mb_s, 3)),
            Column::ServerCpu => Cell::Duration(
                step.server
                    .as_ref()
                    .and_then(|c| Some(c.cpu_user_us_per_call? + c.cpu_system_us_per_call?)),
            ),
            Column::Meets => text(
                match step.meets_slo {
                    Some(true) => "yes",
                    Some(false) => "no",
                    None => "-",
                }
                .into(),
            ),
        }
    }
}

/// The steps of a series as a grid: the columns that fit `options`, all with `wide`.
pub fn grid(report: &SweepReport, series: &Series, options: &RenderOptions) -> Grid {
    let slo = report.slo.as_ref();
    let keys: Vec<Column> = Column::ALL
        .into_iter()
        .filter(|c| c.applies(series, slo))
        .collect();
    let columns = keys
        .iter()
        .map(|c| {
            let cells = series.steps.iter().map(|s| c.cell(series, s)).collect();
            text_column(&c.name(slo), cells)
        })
        .collect();
    let (compact, extras) = Column::sets(report.axis);
    Candidates::keyed(&keys, columns, compact, extras).choose(options)
}

/// What was swept, against what, for how long, and under which objective.
pub fn heading(report: &SweepReport) -> String {
    let mut parts = vec![
        format!("rpcbench {} sweep → {}", report.rpcbench, report.target),
        format!("over {}", report.axis),
        format!("{} per step", units::duration(report.step_duration_s * 1e6)),
    ];
    if let Some(slo) = &report.slo {
        parts.push(format!("objective {}", slo.text));
    }
    parts.join(" · ")
}

/// What the columns hold, in their units.
pub const LEGEND: &str = "offered/s, achieved/s: calls per second over all workers (offered: open loop at that rate; closed: back to back) · in flight: mean calls in flight · payload B: request bytes · p50, p99: from when each call was due at an offered rate (corrected for coordinated omission), from its start when closed; start p99: from its actual start · MB/s: verified request (out) and reply (in) bytes per second, 10^6 bytes · srv CPU/call: the server's own CPU time (user + system) per request it counted";

/// Why a step missed its objective, in words: the misses joined with `; `, as the
/// sweep's JSON records them (`why_not`).
pub fn why_not(misses: &[Miss]) -> String {
    misses
        .iter()
        .map(|m| match *m {
            Miss::Above {
                quantile,
                latency_us,
                bound_us,
            } => format!(
                "{} {} is above {}",
                percentile_name(quantile),
                units::duration(latency_us),
                units::duration(bound_us)
            ),
            Miss::NoCallSucceeded => "no call succeeded".to_string(),
            Miss::Failed { failed, calls } => format!("{failed} of {calls} calls failed"),
            Miss::FellBehind {
                achieved_per_s,
                offered_per_s,
            } => format!(
                "achieved {} of {} calls/s offered (below {:.0}%)",
                units::rate(achieved_per_s),
                units::rate(offered_per_s),
                crate::report::sweep::MIN_ACHIEVED * 100.0
            ),
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// The lines under a series' table: why steps missed the objective, and its capacity.
pub fn notes(report: &SweepReport, series: &Series) -> Vec<String> {
    let mut lines = Vec::new();
    for s in &series.steps {
        if let (Some(rate), Some(why)) = (s.offered_per_s, &s.why_not) {
            lines.push(format!("{} calls/s: {why}", units::rate(rate)));
        }
    }
    if let Some(slo) = &report.slo {
        let judged = series
            .steps
            .iter()
            .any(|s| s.offered_per_s.is_some() && s.meets_slo.is_some());
        match series.capacity_per_s {
            Some(c) => lines.push(format!(
                "capacity at {}: {} calls/s",
                slo.text,
                units::rate(c)
            )),
            None if judged => lines.push(format!("capacity at {}: no rate met it", slo.text)),
            None => {}
        }
    }
    lines
}

/// Writes every series of `report` as terminal tables: no line wider than
/// `options.width` unless `options.wide`, and then only the tables.
pub fn write(report: &SweepReport, options: &RenderOptions, out: &mut dyn Write) -> io::Result<()> {
    let width = options.width;
    let mut lines = wrap(&heading(report), width, "", "  ");
    lines.extend(wrap(LEGEND, width, "", "  "));
    for series in &report.series {
        lines.push(String::new());
        lines.extend(grid_lines(&grid(report, series, options)));
        for note in notes(report, series) {
            lines.extend(wrap(&note, width, "  ", "    "));
        }
    }
    for line in lines {
        writeln!(out, "{line}")?;
    }
    Ok(())
}

/// Writes every series as a markdown table with every column, each followed by its notes.
pub fn write_markdown(report: &SweepReport, out: &mut dyn Write) -> io::Result<()> {
    writeln!(out, "{}\n\n{LEGEND}", heading(report))?;
    for series in &report.series {
        writeln!(out)?;
        write_table(out, &grid(report, series, &RenderOptions::WIDE))?;
        let notes = notes(report, series);
        if !notes.is_empty() {
            writeln!(out)?;
            for n in notes {
                writeln!(out, "- {n}")?;
            }
        }
    }
    Ok(())
}

/// The columns of a step before its run's: the step's number in its series (1 up), then
/// what it offered and got; then come the run's own columns (as `--format csv` of a run has them) but the
/// transport and mode, which lead the row.
pub const SWEEP_CSV_HEADERS: [&str; 13] = [
    "step",
    "offered_per_s",
    "achieved_per_s",
    "payload_bytes",
    "reply_bytes",
    "slo_latency_us",
    "meets_slo",
    "goodput_out_mb_s",
    "goodput_in_mb_s",
    "server_requests",
    "server_cpu_user_us_per_call",
    "server_cpu_system_us_per_call",
    "server_rss_bytes",
];

/// The transport and mode, which lead every row, as the run CSV has them.
const NAME_CELLS: usize = 2;

/// Writes one tidy CSV table: the header once, a row per step of every series, every
/// number in the fixed unit its header names, at full precision; an empty cell is a
/// figure the step does not have.
pub fn write_csv(report: &SweepReport, out: &mut dyn Write) -> io::Result<()> {
    let run_headers = csv::headers();
    let header: Vec<&str> = run_headers[..NAME_CELLS]
        .iter()
        .map(String::as_str)
        .chain(SWEEP_CSV_HEADERS)
        .chain(run_headers[NAME_CELLS..].iter().map(String::as_str))
        .collect();
    writeln!(out, "{}", header.join(","))?;
    let opt = |v: Option<f64>| v.map_or(String::new(), |x| x.to_string());
    for series in &report.series {
        for (i, s) in series.steps.iter().enumerate() {
            let run = csv::row(&s.run);
            let server = |f: fn(&crate::report::sweep::ServerCost) -> Option<String>| {
                s.server.as_ref().and_then(f).unwrap_or_default()
            };
            let step = [
                (i + 1).to_string(),
                opt(s.offered_per_s),
                s.achieved_per_s.to_string(),
                s.payload_bytes.to_string(),
                s.reply_bytes.to_string(),
                opt(s.slo_latency_us),
                s.meets_slo.map_or(String::new(), |m| m.to_string()),
                s.goodput_out_mb_s.to_string(),
                s.goodput_in_mb_s.to_string(),
                server(|c| Some(c.requests.to_string())),
                server(|c| c.cpu_user_us_per_call.map(|v| v.to_string())),
                server(|c| c.cpu_system_us_per_call.map(|v| v.to_string())),
                server(|c| Some(c.rss_bytes.to_string())),
            ];
            let row: Vec<&str> = run[..NAME_CELLS]
                .iter()
                .chain(&step)
                .chain(&run[NAME_CELLS..])
                .map(String::as_str)
                .collect();
            debug_assert!(row.iter().all(|c| !c.contains([',', '"', '\n'])));
            writeln!(out, "{}", row.join(","))?;
        }
    }
    Ok(())
}
