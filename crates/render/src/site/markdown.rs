//! The page as markdown (README.md): charts as linked SVG files beside it.

use super::block::{Block, Table};
use crate::render::{self, Grid};
use std::fmt::Write;

/// Writes every block, each followed by a blank line; an empty list writes nothing.
pub fn write(blocks: &[Block]) -> String {
    let mut out = String::new();
    for block in blocks {
        match block {
            Block::Title(t) => push(&mut out, &format!("# {t}")),
            Block::Section(t) => push(&mut out, &format!("## {t}")),
            Block::Subsection(t) => push(&mut out, &format!("### {t}")),
            Block::Text(t) => push(&mut out, t),
            Block::List { items, .. } if items.is_empty() => {}
            Block::List { items, .. } => {
                for item in items {
                    let _ = writeln!(out, "- {item}");
                }
                out.push('\n');
            }
            Block::Table(t) => push(&mut out, &table(t)),
            Block::Chart(c) => {
                push(&mut out, &format!("![{0}]({0})", c.file));
                if let Some(caption) = &c.caption {
                    push(&mut out, caption);
                }
            }
            Block::Code(lines) => push(&mut out, &format!("```sh\n{}\n```", lines.join("\n"))),
        }
    }
    out.truncate(out.trim_end().len());
    out.push('\n');
    out
}

/// One paragraph and the blank line after it.
fn push(out: &mut String, text: &str) {
    let _ = writeln!(out, "{}\n", text.trim_end());
}

/// A table as the run tables are written, failed cells in bold.
fn table(t: &Table) -> String {
    let mut grid = Grid {
        headers: t.grid.headers.clone(),
        rows: t.grid.rows.clone(),
    };
    for &(row, col) in &t.failed {
        if let Some(cell) = grid.rows.get_mut(row).and_then(|r| r.get_mut(col)) {
            *cell = format!("**{cell}**");
        }
    }
    let mut buf = Vec::new();
    // Writing into a Vec cannot fail.
    let _ = render::write_markdown_table(&mut buf, &grid);
    String::from_utf8_lossy(&buf).into_owned()
}
