//! The full report as pretty JSON.

use crate::report::Report;
use std::io::{self, Write};

/// Writes the whole report as pretty JSON and a newline.
pub fn write(report: &Report, out: &mut dyn Write) -> io::Result<()> {
    serde_json::to_writer_pretty(&mut *out, report)?;
    writeln!(out)
}
