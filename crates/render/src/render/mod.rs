//! Renderers: one file per output format, each writing a [`Report`] to any `io::Write`.
//! The library never prints by itself.
//!
//! The terminal table, markdown and the HTML report all take their cells from
//! [`summary_grid`] and [`phase_grid`], so they carry the same numbers by construction;
//! the terminal shows the columns that fit its width ([`RenderOptions`]), the others all of
//! them. CSV (`csv.rs`) is one tidy table in fixed units, for programs.
//!
//! Layer 6 of the map in `lib.rs` (render): uses the analysis, the record and the layers below; never an app or the CLI.

/// One tidy table in fixed units.
/// `rpcbench compare` as a markdown table.
pub mod compare;
mod csv;
pub mod dns;
/// The words of the findings.
pub mod findings;
mod grid;
/// The whole report.
mod json;
mod lines;
/// Every column, for pasting.
mod markdown;
/// The round-trip model's tables (fits, what-if).
pub mod model;
/// A sweep's steps, one table per transport.
pub mod sweep;
/// As wide as the terminal.
mod table;
/// The truth checks of `rpcbench report` in words.
pub mod truth;
use grid::{Candidates, Cell, PHASE_STATS, text_column};
pub use grid::{Grid, NAME_COLUMNS, SummaryColumn, phase_grid, summary_grid};
pub use lines::{
    LIKELY_CAUSES, concurrency_lines, engine_line, figure_text, latency_note, peer_pair,
    physics_line, placement, problem_lines, retry_line, rule_sentence, tcp_info_line, wrap,
    zero_rtt_line,
};
/// Units live below every layer ([`crate::units`]); renderers reach them here too.
pub use rpcbench_base::units;
pub use table::incoherent_line;

pub use csv::CSV_HEADERS;
pub use markdown::write_table as write_markdown_table;

use crate::report::Report;
use std::io::{self, Write};

/// An output format for the results.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// Aligned tables for a terminal, as wide as it is, then the findings.
    Table,
    /// The full report as JSON.
    Json,
    /// One tidy CSV table: a row per transport and address mode, in fixed units.
    Csv,
    /// GitHub-flavoured markdown tables, every column.
    Markdown,
}

/// How wide the terminal table may be, and whether it shows every column anyway.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RenderOptions {
    /// The widest line, in columns: no line of the table output is longer.
    pub width: usize,
    /// Every column whatever the width (`--wide`), as markdown and HTML always show.
    pub wide: bool,
}

/// Width when neither the terminal nor `COLUMNS` says: wider than the 80 columns of old
/// terminals, narrower than any window a benchmark is watched in today.
pub const DEFAULT_WIDTH: usize = 100;

impl RenderOptions {
    /// Every column, no width limit: for markdown and HTML, and for tests.
    pub const WIDE: RenderOptions = RenderOptions {
        width: usize::MAX,
        wide: true,
    };

    /// The options for stdout: its terminal's width, else `COLUMNS`, else
    /// [`DEFAULT_WIDTH`].
    pub fn terminal(wide: bool) -> RenderOptions {
        RenderOptions {
            width: terminal_width(),
            wide,
        }
    }
}

/// The width of the terminal on stdout, else the `COLUMNS` environment variable (which a
/// shell sets for a pipe it knows the width of), else [`DEFAULT_WIDTH`].
pub fn terminal_width() -> usize {
    console::Term::stdout()
        .size_checked()
        .map(|(_rows, cols)| usize::from(cols))
        .or_else(|| std::env::var("COLUMNS").ok()?.trim().parse().ok())
        .filter(|&w| w > 0)
        .unwrap_or(DEFAULT_WIDTH)
}

/// Writes `report` in `format`; only the table reads `options`.
pub fn render(
    report: &Report,
    format: Format,
    options: &RenderOptions,
    out: &mut dyn Write,
) -> io::Result<()> {
    match format {
        Format::Table => table::write(report, options, out),
        Format::Json => json::write(report, out),
        Format::Csv => csv::write(report, out),
        Format::Markdown => markdown::write(report, out),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrap_keeps_to_the_width() {
        let text = "an uncached name lookup on every new connection costs 20.1 ms per call";
        for width in [10, 20, 33, 80] {
            let lines = wrap(text, width, "- ", "  ");
            assert!(
                lines.iter().all(|l| l.chars().count() <= width),
                "{lines:?}"
            );
            assert!(lines[0].starts_with("- ") && lines[1..].iter().all(|l| l.starts_with("  ")));
            if width >= 20 {
                // No word is longer than a line here: the text comes back whole.
                let words: Vec<&str> = lines.iter().flat_map(|l| l.split_whitespace()).collect();
                assert_eq!(words.join(" "), format!("- {text}"));
            }
        }
        assert_eq!(wrap("abcdefgh", 3, "", ""), ["abc", "def", "gh"]);
        assert!(wrap("", 10, "- ", "  ").is_empty());
    }
}
