//! `rpcbench compare`'s table: old against new, row by row, regressions marked.

use crate::compare::Comparison;
use std::io::{self, Write};

/// Writes the comparison as a markdown table; rows above `fail_above` are marked.
pub fn write(c: &Comparison, fail_above: Option<f64>, out: &mut dyn Write) -> io::Result<()> {
    writeln!(
        out,
        "| transport | mode | base p50 ms | new p50 ms | p50 ratio | p50 change | base p99 ms | new p99 ms | p99 ratio | p99 change | verdict |"
    )?;
    writeln!(
        out,
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |"
    )?;
    for r in &c.rows {
        let verdict = match fail_above {
            Some(limit) if r.worst_ratio() > limit => "REGRESSION",
            _ => "ok",
        };
        writeln!(
            out,
            "| {} | {} | {:.3} | {:.3} | {:.2} | {:+.1}% | {:.3} | {:.3} | {:.2} | {:+.1}% | {verdict} |",
            r.key.transport,
            r.key,
            r.p50.0 / 1e3,
            r.p50.1 / 1e3,
            r.p50_ratio(),
            (r.p50_ratio() - 1.0) * 100.0,
            r.p99.0 / 1e3,
            r.p99.1 / 1e3,
            r.p99_ratio(),
            (r.p99_ratio() - 1.0) * 100.0,
        )?;
    }
    for u in &c.unmatched {
        let only = if u.only_in_base {
            " (only in base)"
        } else {
            ""
        };
        writeln!(out, "\nnot compared: {} ({}){only}", u.key.transport, u.key)?;
    }
    Ok(())
}
