//! `rpcbench compare BASE.json NEW.json`: p50 and p99 of every matching (transport, modes)
//! row, old against new, for users who run rpcbench in their CI. Rows match on the
//! transport and the whole mode label: the address mode, the security mode, and the
//! workers of the default run's multiplexing comparison (`ip tls13`, `ip c16`).
//!
//! Layer 5 of the map in `lib.rs` (analysis): uses the record and the layers below.

use crate::report::{Report, RunKey, RunRecord};

/// One matched row.
#[derive(Debug, Clone, PartialEq)]
pub struct CompareRow {
    /// The run both reports have, which rows match on.
    pub key: RunKey,
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
    /// Rows without a partner, or without latency (no ok call).
    pub unmatched: Vec<Unmatched>,
}

/// A row `compare` could not match.
#[derive(Debug, Clone, PartialEq)]
pub struct Unmatched {
    pub key: RunKey,
    /// True for a run of the base report that the new one lacks.
    pub only_in_base: bool,
}

/// Matches the rows of two reports by their keys ([`RunKey`]).
pub fn compare(base: &Report, new: &Report) -> Comparison {
    let same = |a: &RunRecord, b: &RunRecord| a.key() == b.key();
    let mut out = Comparison::default();
    for n in &new.runs {
        let b = base.runs.iter().find(|b| same(b, n));
        match (b.and_then(|b| b.latency_us), n.latency_us) {
            (Some(bl), Some(nl)) if bl.p50 > 0.0 && bl.p99 > 0.0 => out.rows.push(CompareRow {
                key: n.key(),
                p50: (bl.p50, nl.p50),
                p99: (bl.p99, nl.p99),
            }),
            _ => out.unmatched.push(Unmatched {
                key: n.key(),
                only_in_base: false,
            }),
        }
    }
    for b in &base.runs {
        if !new.runs.iter().any(|n| same(b, n)) {
            out.unmatched.push(Unmatched {
                key: b.key(),
                only_in_base: true,
            });
        }
    }
    out
}

/// True when any row's p50 or p99 grew by more than `limit` times.
pub fn regressed(c: &Comparison, limit: f64) -> bool {
    c.rows.iter().any(|r| r.worst_ratio() > limit)
}
