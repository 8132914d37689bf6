//! `rpcbench report` and `rpcbench compare`: what is done with results after a run.

use super::{EXIT_FAILED, EXIT_OK};
use crate::compare;
use crate::report::Report;
use crate::site::{self, read_json};
use anyhow::Context;
use std::path::PathBuf;

/// Turns rpcbench JSON results into a report: README.md, index.html and SVG charts.
#[derive(Debug, clap::Args)]
pub struct ReportArgs {
    /// rpcbench JSON results (`--format json` or `--out`). The first without a server or
    /// DNS delay is the baseline; runs with `--delay-us`, or against a server with
    /// `--dns-delay`, become truth checks against it.
    #[arg(required = true)]
    pub results: Vec<PathBuf>,
    /// Directory to write the report into (created if missing).
    #[arg(long)]
    pub out: PathBuf,
    /// Peer figures (sockperf, wrk, ab, curl) measured beside rpcbench, as written by
    /// `report/peers.sh`.
    #[arg(long)]
    pub peers: Option<PathBuf>,
}

/// Compares two rpcbench JSON results: p50 and p99 of each matching transport and mode.
#[derive(Debug, clap::Args)]
pub struct CompareArgs {
    /// The reference results.
    pub base: PathBuf,
    /// The results to judge.
    pub new: PathBuf,
    /// Exit with status 1 when a row's p50 or p99 grew by more than this many times
    /// (e.g. 1.2 for 20%).
    #[arg(long)]
    pub fail_above: Option<f64>,
}

/// Builds the report. Exit 0 when built, 1 when an input is missing or invalid, or a
/// truth check failed (the report is still written, with the failure marked).
pub fn report(args: &ReportArgs) -> anyhow::Result<u8> {
    let site = site::build_from_files(&args.results, args.peers.as_deref(), &args.out)
        .context("cannot build the report")?;
    println!(
        "wrote {}/README.md and {}/index.html",
        args.out.display(),
        args.out.display()
    );
    for f in &site.findings {
        println!("- {f}");
    }
    let failed: Vec<_> = site.checks.iter().filter(|c| !c.pass).collect();
    for c in &failed {
        eprintln!(
            "rpcbench: truth check failed: {}: expected {}, measured {}",
            c.what, c.expected, c.measured
        );
    }
    Ok(if failed.is_empty() {
        EXIT_OK
    } else {
        EXIT_FAILED
    })
}

/// Prints the comparison. Exit 1 on a regression above `--fail-above`.
pub fn compare(args: &CompareArgs) -> anyhow::Result<u8> {
    let base: Report = read_json(&args.base)?;
    let new: Report = read_json(&args.new)?;
    let c = compare::compare(&base, &new);
    let mut out = std::io::stdout().lock();
    compare::write(&c, args.fail_above, &mut out)?;
    Ok(match args.fail_above {
        Some(limit) if compare::regressed(&c, limit) => EXIT_FAILED,
        _ => EXIT_OK,
    })
}
