//! The full report as pretty JSON.

use crate::report::Report;
use std::io::{self, Write};

pub fn write(report: &Report, out: &mut dyn Write) -> io::Result<()> {
    serde_json::to_writer_pretty(&mut *out, report)?;
    writeln!(out)
}
