//! `rpcbench sweep` as text: one table per transport, a row per step, the capacity under
//! the objective after it.

use crate::sweep::{Series, SweepReport};
use comfy_table::{CellAlignment, Table, presets::UTF8_BORDERS_ONLY};
use std::io::{self, Write};

/// Writes every series of `report`.
pub fn write(report: &SweepReport, out: &mut dyn Write) -> io::Result<()> {
    writeln!(
        out,
        "rpcbench {} sweep → {} · {} · {} s per step{}",
        report.rpcbench,
        report.target,
        report.axis,
        report.step_duration_s,
        report
            .slo
            .as_ref()
            .map_or(String::new(), |s| format!(" · objective {s}")),
    )?;
    for series in &report.series {
        write_series(series, out)?;
    }
    Ok(())
}

fn write_series(series: &Series, out: &mut dyn Write) -> io::Result<()> {
    writeln!(out, "{} ({})", series.transport, series.addr_mode)?;
    let mut t = Table::new();
    t.load_preset(UTF8_BORDERS_ONLY);
    t.set_header([
        "offered/s",
        "achieved/s",
        "-c",
        "payload B",
        "p50 µs",
        "p99 µs",
        "slo pct µs",
        "failed",
        "MB/s out",
        "meets",
    ]);
    for s in &series.steps {
        let lat = |f: fn(&crate::measure::Summary) -> f64| {
            s.run
                .latency_us
                .as_ref()
                .map_or("-".to_string(), |l| format!("{:.1}", f(l)))
        };
        t.add_row([
            s.offered_per_s
                .map_or("closed loop".to_string(), |r| format!("{r:.0}")),
            format!("{:.0}", s.achieved_per_s),
            s.concurrency.to_string(),
            s.payload_bytes.to_string(),
            lat(|l| l.p50),
            lat(|l| l.p99),
            s.slo_latency_us
                .map_or("-".to_string(), |us| format!("{us:.1}")),
            s.run.failed().to_string(),
            format!("{:.2}", s.goodput_out_mb_s),
            match s.meets_slo {
                Some(true) => "yes".to_string(),
                Some(false) => "no".to_string(),
                None => "-".to_string(),
            },
        ]);
    }
    for (i, col) in t.column_iter_mut().enumerate() {
        if i < 9 {
            col.set_cell_alignment(CellAlignment::Right);
        }
    }
    writeln!(out, "{t}")?;
    for s in series
        .steps
        .iter()
        .filter_map(|s| s.why_not.as_ref().map(|w| (s.offered_per_s, w)))
    {
        if let (Some(rate), why) = s {
            writeln!(out, "  {rate:.0}/s: {why}")?;
        }
    }
    match series.capacity_per_s {
        Some(c) => writeln!(out, "capacity at the objective: {c:.0} calls/s")?,
        None if report_has_rates(series) => {
            writeln!(out, "capacity at the objective: no rate met it")?
        }
        None => {}
    }
    Ok(())
}

/// True when the series offered rates and judged them, so a missing capacity means none
/// passed.
fn report_has_rates(series: &Series) -> bool {
    series
        .steps
        .iter()
        .any(|s| s.offered_per_s.is_some() && s.meets_slo.is_some())
}
