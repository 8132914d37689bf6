//! `rpcbench sweep` as text: one table per transport and mode, a row per step, then why
//! steps missed the objective and the capacity under it. Laid out like the run table
//! (`table.rs`): names left, numbers right, one unit per latency column.

use super::units::Unit;
use super::{Grid, NAME_COLUMNS, wrap};
use crate::sweep::{Series, Step, SweepReport};
use std::io::{self, Write};

/// Writes every series of `report`, no line wider than `width` but the tables.
pub fn write(report: &SweepReport, width: usize, out: &mut dyn Write) -> io::Result<()> {
    let heading = format!(
        "rpcbench {} sweep → {} · {} · {} s per step{}",
        report.rpcbench,
        report.target,
        report.axis,
        report.step_duration_s,
        report
            .slo
            .as_ref()
            .map_or(String::new(), |s| format!(" · objective {s}")),
    );
    for line in wrap(&heading, width, "", "  ") {
        writeln!(out, "{line}")?;
    }
    let legend = "offered, achieved: calls/s over all workers (offered: open loop at that rate; closed: back to back) · payload: request bytes · p50, p99: from each call's start · slo: the objective's percentile, from when each call was due · MB/s: verified request bytes per second";
    for line in wrap(legend, width, "", "  ") {
        writeln!(out, "{line}")?;
    }
    for series in &report.series {
        writeln!(out)?;
        for line in series_lines(series, width) {
            writeln!(out, "{line}")?;
        }
    }
    Ok(())
}

/// The table and notes of one series.
fn series_lines(series: &Series, width: usize) -> Vec<String> {
    let mut lines = super::table::grid_lines(&grid(series));
    for s in &series.steps {
        if let (Some(rate), Some(why)) = (s.offered_per_s, &s.why_not) {
            lines.extend(wrap(&format!("{rate:.0}/s: {why}"), width, "  ", "    "));
        }
    }
    let judged = series
        .steps
        .iter()
        .any(|s| s.offered_per_s.is_some() && s.meets_slo.is_some());
    match series.capacity_per_s {
        Some(c) => lines.push(format!("capacity at the objective: {c:.0} calls/s")),
        None if judged => lines.push("capacity at the objective: no rate met it".to_string()),
        None => {}
    }
    lines
}

/// The steps of a series as a grid: the name columns, then what was offered and got.
fn grid(series: &Series) -> Grid {
    let steps = &series.steps;
    let col = |f: fn(&Step) -> Option<f64>| -> Vec<f64> { steps.iter().filter_map(f).collect() };
    let p50 = |s: &Step| s.run.latency_us.map(|l| l.p50);
    let p99 = |s: &Step| s.run.latency_us.map(|l| l.p99);
    let slo = |s: &Step| s.slo_latency_us;
    let units = [
        Unit::for_column(&col(p50)),
        Unit::for_column(&col(p99)),
        Unit::for_column(&col(slo)),
    ];
    let cell = |unit: Unit, v: Option<f64>| v.map_or("-".to_string(), |us| unit.format(us));
    let headers = vec![
        "transport".to_string(),
        "mode".to_string(),
        "offered".to_string(),
        "achieved".to_string(),
        "-c".to_string(),
        "payload".to_string(),
        format!("p50 {}", units[0].label()),
        format!("p99 {}", units[1].label()),
        format!("slo {}", units[2].label()),
        "failed".to_string(),
        "MB/s".to_string(),
        "meets".to_string(),
    ];
    let rows = steps
        .iter()
        .map(|s| {
            vec![
                series.transport.to_string(),
                series.addr_mode.clone(),
                s.offered_per_s
                    .map_or("closed".to_string(), |r| format!("{r:.0}")),
                format!("{:.0}", s.achieved_per_s),
                s.concurrency.to_string(),
                s.payload_bytes.to_string(),
                cell(units[0], p50(s)),
                cell(units[1], p99(s)),
                cell(units[2], slo(s)),
                s.run.failed().to_string(),
                super::units::significant(s.goodput_out_mb_s, 3),
                match s.meets_slo {
                    Some(true) => "yes".to_string(),
                    Some(false) => "no".to_string(),
                    None => "-".to_string(),
                },
            ]
        })
        .collect();
    debug_assert_eq!(NAME_COLUMNS, 2, "transport and mode lead");
    Grid { headers, rows }
}
