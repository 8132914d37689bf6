//! Aligned tables for a terminal (comfy-table), then the problem list.

use super::{SUMMARY_HEADERS, phase_headers, phase_rows, problem_lines, summary_rows};
use crate::report::Report;
use comfy_table::{CellAlignment, Table, presets::UTF8_BORDERS_ONLY};
use std::io::{self, Write};

pub fn write(report: &Report, out: &mut dyn Write) -> io::Result<()> {
    writeln!(
        out,
        "rpcbench {} → {} · {} calls/transport · {} worker(s) · payload {} B · full round trip, connect included for fresh transports",
        report.rpcbench,
        report.target,
        report
            .config
            .duration_s
            .map_or(report.config.calls.to_string(), |d| format!("{d}s of")),
        report.config.concurrency,
        report.config.payload_bytes,
    )?;
    writeln!(
        out,
        "{}",
        table(
            SUMMARY_HEADERS.iter().map(|s| s.to_string()).collect(),
            summary_rows(report)
        )
    )?;
    writeln!(
        out,
        "where the time goes (server: time the server reports; first byte: request sent to first reply byte)"
    )?;
    writeln!(out, "{}", table(phase_headers(), phase_rows(report)))?;
    let problems = problem_lines(report);
    if problems.is_empty() {
        writeln!(out, "lost-call check: every call came back verified")?;
    } else {
        writeln!(out, "lost-call check:")?;
        for line in problems {
            writeln!(out, "  {line}")?;
        }
    }
    Ok(())
}

fn table(headers: Vec<String>, rows: Vec<Vec<String>>) -> Table {
    let mut t = Table::new();
    t.load_preset(UTF8_BORDERS_ONLY);
    t.set_header(headers);
    for row in rows {
        t.add_row(row);
    }
    // Numbers read best right-aligned; the two name columns stay left.
    for (i, col) in t.column_iter_mut().enumerate() {
        if i >= 2 {
            col.set_cell_alignment(CellAlignment::Right);
        }
    }
    t
}
