//! GitHub-flavoured markdown tables, for pasting into a review or a README: every column
//! (a page scrolls sideways; a terminal does not), the summary and then the phases.

use super::{Grid, NAME_COLUMNS, RenderOptions, phase_grid, problem_lines, summary_grid};
use crate::report::Report;
use std::io::{self, Write};

/// Writes the summary table, the phase table and the failed calls.
pub fn write(report: &Report, out: &mut dyn Write) -> io::Result<()> {
    write_table(out, &summary_grid(report, &RenderOptions::WIDE))?;
    writeln!(out)?;
    write_table(out, &phase_grid(report, &RenderOptions::WIDE))?;
    let problems = problem_lines(report);
    if !problems.is_empty() {
        writeln!(out)?;
        for line in problems {
            writeln!(out, "- {line}")?;
        }
    }
    Ok(())
}

/// One markdown table; numeric columns (all but the name columns) right-aligned.
fn write_table(out: &mut dyn Write, grid: &Grid) -> io::Result<()> {
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
