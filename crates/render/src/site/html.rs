//! The page as one self-contained HTML file (index.html): charts inline, no scripts,
//! nothing fetched; every text escaped by [`esc`].

use super::block::{Block, Table, esc};
use std::fmt::Write;

/// The page's head: its title and the one style sheet.
const HEAD: &str = "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>rpcbench comparison report</title>\n<style>body{font-family:sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222}table{border-collapse:collapse;margin:1em 0;font-size:13px}th,td{border:1px solid #ccc;padding:3px 6px;text-align:right}th:first-child,td:first-child,th:nth-child(2),td:nth-child(2){text-align:left}svg{max-width:100%;height:auto;display:block;margin:1em 0}.fail{color:#b00;font-weight:bold}pre{background:#f6f6f6;padding:1em;overflow-x:auto}</style></head><body>\n";

/// Writes every block; an empty list writes nothing.
pub fn write(blocks: &[Block]) -> String {
    let mut out = String::from(HEAD);
    for block in blocks {
        match block {
            Block::Title(t) => _ = writeln!(out, "<h1>{}</h1>", esc(t)),
            Block::Section(t) => _ = writeln!(out, "<h2>{}</h2>", esc(t)),
            Block::Subsection(t) => _ = writeln!(out, "<h3>{}</h3>", esc(t)),
            Block::Text(t) => _ = writeln!(out, "<p>{}</p>", esc(t)),
            Block::List { items, .. } if items.is_empty() => {}
            Block::List { items, alert } => {
                out.push_str(if *alert {
                    "<ul class=\"fail\">"
                } else {
                    "<ul>"
                });
                for item in items {
                    let _ = write!(out, "<li>{}</li>", esc(item));
                }
                out.push_str("</ul>\n");
            }
            Block::Table(t) => table(&mut out, t),
            Block::Chart(c) => {
                out.push_str(&c.svg);
                out.push('\n');
                if let Some(caption) = &c.caption {
                    let _ = writeln!(out, "<p>{}</p>", esc(caption));
                }
            }
            Block::Code(lines) => _ = writeln!(out, "<pre>{}</pre>", esc(&lines.join("\n"))),
        }
    }
    out.push_str("</body></html>\n");
    out
}

/// One table, every cell escaped, failed cells marked.
fn table(out: &mut String, t: &Table) {
    out.push_str("<table><tr>");
    for h in &t.grid.headers {
        let _ = write!(out, "<th>{}</th>", esc(h));
    }
    out.push_str("</tr>\n");
    for (r, row) in t.grid.rows.iter().enumerate() {
        out.push_str("<tr>");
        for (c, cell) in row.iter().enumerate() {
            let class = if t.failed.contains(&(r, c)) {
                " class=\"fail\""
            } else {
                ""
            };
            let _ = write!(out, "<td{class}>{}</td>", esc(cell));
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</table>\n");
}
