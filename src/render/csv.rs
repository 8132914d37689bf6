//! CSV: the summary rows, a blank line, then the phase rows. Cells never contain commas or
//! quotes (names and numbers only), so no quoting is needed; a check keeps that true.

use super::{SUMMARY_HEADERS, phase_headers, phase_rows, summary_rows};
use crate::report::Report;
use std::io::{self, Write};

pub fn write(report: &Report, out: &mut dyn Write) -> io::Result<()> {
    let headers: Vec<String> = SUMMARY_HEADERS.iter().map(|s| s.to_string()).collect();
    write_rows(out, &headers, &summary_rows(report))?;
    writeln!(out)?;
    write_rows(out, &phase_headers(), &phase_rows(report))
}

fn write_rows(out: &mut dyn Write, headers: &[String], rows: &[Vec<String>]) -> io::Result<()> {
    writeln!(out, "{}", headers.join(","))?;
    for row in rows {
        debug_assert!(row.iter().all(|c| !c.contains([',', '"', '\n'])));
        writeln!(out, "{}", row.join(","))?;
    }
    Ok(())
}
