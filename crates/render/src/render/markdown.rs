//! GitHub-flavoured markdown tables, for pasting into a review or a README: every column
//! (a page scrolls sideways; a terminal does not), the summary and then the phases.

use super::{
    Grid, NAME_COLUMNS, RenderOptions, concurrency_lines, engine_line, latency_note, phase_grid,
    problem_lines, summary_grid,
};
use crate::report::Report;
use std::io::{self, Write};

/// Writes which latency a paced run shows, the summary table, the phase table, the failed
/// calls and the runs whose workers sat idle.
pub fn write(report: &Report, out: &mut dyn Write) -> io::Result<()> {
    if let Some(note) = latency_note(report, &RenderOptions::WIDE) {
        writeln!(out, "{note}\n")?;
    }
    write_table(out, &summary_grid(report, &RenderOptions::WIDE))?;
    writeln!(out)?;
    write_table(out, &phase_grid(report, &RenderOptions::WIDE))?;
    let notes: Vec<String> = problem_lines(report)
        .into_iter()
        .chain(engine_line(report))
        .chain(concurrency_lines(report))
        .chain(super::tcp_info_line(report))
        .collect();
    if !notes.is_empty() {
        writeln!(out)?;
        for line in notes {
            writeln!(out, "- {line}")?;
        }
    }
    Ok(())
}

/// One markdown table; numeric columns (all but the name columns) right-aligned.
pub fn write_table(out: &mut dyn Write, grid: &Grid) -> io::Result<()> {
    writeln!(out, "| {} |", grid.headers.join(" | "))?;
    let align: Vec<&str> = (0..grid.headers.len())
        .map(|i| if i < NAME_COLUMNS { "---" } else { "---:" })
        .collect();
    writeln!(out, "| {} |", align.join(" | "))?;
    for row in &grid.rows {
        writeln!(out, "| {} |", row.join(" | "))?;
    }
    Ok(())
}
