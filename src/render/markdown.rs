//! GitHub-flavoured markdown tables, for pasting into a review or a README.

use super::{SUMMARY_HEADERS, phase_headers, phase_rows, problem_lines, summary_rows};
use crate::report::Report;
use std::io::{self, Write};

pub fn write(report: &Report, out: &mut dyn Write) -> io::Result<()> {
    let headers: Vec<String> = SUMMARY_HEADERS.iter().map(|s| s.to_string()).collect();
    write_table(out, &headers, &summary_rows(report))?;
    writeln!(out)?;
    write_table(out, &phase_headers(), &phase_rows(report))?;
    let problems = problem_lines(report);
    if !problems.is_empty() {
        writeln!(out)?;
        for line in problems {
            writeln!(out, "- {line}")?;
        }
    }
    Ok(())
}

/// One markdown table; numeric columns (all but the first two) right-aligned.
pub fn write_table(
    out: &mut dyn Write,
    headers: &[String],
    rows: &[Vec<String>],
) -> io::Result<()> {
    writeln!(out, "| {} |", headers.join(" | "))?;
    let align: Vec<&str> = (0..headers.len())
        .map(|i| if i < 2 { "---" } else { "---:" })
        .collect();
    writeln!(out, "| {} |", align.join(" | "))?;
    for row in rows {
        writeln!(out, "| {} |", row.join(" | "))?;
    }
    Ok(())
}
