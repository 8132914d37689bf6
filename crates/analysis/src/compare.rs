//! `rpcbench compare BASE.json NEW.json`: p50 and p99 of every matching (transport, modes)
//! row, old against new, for users who run rpcbench in their CI. Rows match on the
//! transport and the whole mode label: the address mode, the security mode, and the
//! workers of the default run's multiplexing comparison (`ip tls13`, `ip c16`).
//!
//! Layer 5 of the map in `lib.rs` (analysis): uses the record and the layers below.

use crate::report::{Report, RunRecord};
use crate::resolve::AddrMode;
use crate::transport::TransportKind;
use std::io::{self, Write};

/// One matched row.
#[derive(Debug, Clone, PartialEq)]
pub struct CompareRow {
    pub transport: TransportKind,
    pub addr_mode: AddrMode,
    /// The run's mode label ([`crate::report::RunRecord::mode_label`]), which rows match on.
    pub mode: String,
    /// (base, new) in µs.
    pub p50: (f64, f64),
    pub p99: (f64, f64),
}

impl CompareRow {
    /// new / base of p50.
    pub fn p50_ratio(&self) -> f64 {
        self.p50.1 / self.p50.0
    }

    /// new / base of p99.
    pub fn p99_ratio(&self) -> f64 {
        self.p99.1 / self.p99.0
    }

    /// The worse of the two ratios.
    pub fn worst_ratio(&self) -> f64 {
        self.p50_ratio().max(self.p99_ratio())
    }
}

/// Rows of `new` matched to rows of `base`, and the rows found on one side only.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Comparison {
    pub rows: Vec<CompareRow>,
    /// `transport (mode)` of rows without a partner, or without latency (no ok call).
    pub unmatched: Vec<String>,
}

/// Matches the rows of two reports by their keys ([`RunKey`](crate::report::RunKey)).
pub fn compare(base: &Report, new: &Report) -> Comparison {
    let same = |a: &RunRecord, b: &RunRecord| a.key() == b.key();
    let mut out = Comparison::default();
    for n in &new.runs {
        let key = format!("{} ({})", n.transport, n.mode_label());
        let b = base.runs.iter().find(|b| same(b, n));
        match (b.and_then(|b| b.latency_us), n.latency_us) {
            (Some(bl), Some(nl)) if bl.p50 > 0.0 && bl.p99 > 0.0 => out.rows.push(CompareRow {
                transport: n.transport,
                addr_mode: n.addr_mode,
                mode: n.mode_label(),
                p50: (bl.p50, nl.p50),
                p99: (bl.p99, nl.p99),
            }),
            _ => out.unmatched.push(key),
        }
    }
    for b in &base.runs {
        if !new.runs.iter().any(|n| same(b, n)) {
            out.unmatched.push(format!(
                "{} ({}) (only in base)",
                b.transport,
                b.mode_label()
            ));
        }
    }
    out
}

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
            r.transport,
            r.mode,
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
        writeln!(out, "\nnot compared: {u}")?;
    }
    Ok(())
}

/// True when any row's p50 or p99 grew by more than `limit` times.
pub fn regressed(c: &Comparison, limit: f64) -> bool {
    c.rows.iter().any(|r| r.worst_ratio() > limit)
}
