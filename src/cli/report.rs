//! `rpcbench report` and `rpcbench compare`: what is done with results after a run.

use super::{EXIT_FAILED, EXIT_OK};
use crate::compare;
use crate::render;
use crate::report::Report;
use crate::site::{self, read_json};
use anyhow::Context;
use std::io::Write;
use std::path::PathBuf;

/// Turns rpcbench JSON results into a report: README.md, index.html and SVG charts.
#[derive(Debug, clap::Args)]
pub struct ReportArgs {
    /// rpcbench JSON results (`--format json` or `--out`), any set of them, runs and
    /// sweeps (`rpcbench sweep --out`). The first run without a server or DNS delay is the
    /// baseline; runs with `--delay-us`, or against a server with `--dns-delay`, become
    /// truth checks against a run without; a check the inputs cannot support is listed as
    /// not run. Sweeps add their charts, the capacity table and sentences; DNS diagnoses
    /// (`rpcbench dns --out`) a section and a chart of their queries.
    #[arg(required = true, value_name = "RESULTS.json")]
    pub results: Vec<PathBuf>,
    /// Directory to write the report into (created if missing).
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// Peer figures (sockperf, wrk, ab, curl) measured beside rpcbench, round by round, as
    /// written by `report/peers.sh --json`. Shown against the ratio limit; benchmarks, not
    /// checks, so they do not set the exit status.
    #[arg(long, value_name = "PEERS.json")]
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
    #[arg(long, value_name = "RATIO")]
    pub fail_above: Option<f64>,
}

/// Builds the report and prints what it found, wrapped to the terminal. Exit 0 unless a
/// truth check that ran failed (the report is still written, with the failure marked) or
/// an input is missing or invalid.
pub fn report(args: &ReportArgs) -> anyhow::Result<u8> {
    let site = site::build_from_files(&args.results, args.peers.as_deref(), &args.out)
        .context("cannot build the report")?;
    let width = render::terminal_width();
    let mut lines = vec![format!(
        "wrote {}/README.md and {}/index.html",
        args.out.display(),
        args.out.display()
    )];
    for f in &site.findings {
        lines.extend(render::wrap(
            &render::findings::sentence(f),
            width,
            "- ",
            "  ",
        ));
    }
    lines.push("truth checks:".to_string());
    for c in &site.checks {
        let verdict = if c.pass() { "pass" } else { "FAIL" };
        let t = render::truth::text(c);
        let text = format!(
            "{verdict}: {}: expected {}, measured {}",
            t.what, t.expected, t.measured
        );
        lines.extend(render::wrap(&text, width, "  ", "    "));
    }
    for n in &site.not_run {
        let (check, reason) = render::truth::not_run(n);
        let text = format!("not run: {check}: {reason}");
        lines.extend(render::wrap(&text, width, "  ", "    "));
    }
    if let Some(peers) = &site.peers {
        lines.extend(render::wrap(
            &format!(
                "peers ({}; benchmarks against the {}× limit, not checks: they do not set the exit status):",
                peers.placement,
                crate::analysis::PEER_RATIO_LIMIT
            ),
            width,
            "",
            "  ",
        ));
        for pair in &peers.pairs {
            let verdict = match pair.within_limit() {
                Some(true) => "within",
                Some(false) => "ABOVE",
                None => "no figures",
            };
            let text = format!("{verdict}: {}", render::peer_pair(pair));
            lines.extend(render::wrap(&text, width, "  ", "    "));
        }
    }
    let mut out = std::io::stdout().lock();
    for line in lines {
        writeln!(out, "{line}")?;
    }
    for c in site.checks.iter().filter(|c| !c.pass()) {
        let t = render::truth::text(c);
        eprintln!(
            "rpcbench: truth check failed: {}: expected {}, measured {}",
            t.what, t.expected, t.measured
        );
    }
    Ok(if site.failed() { EXIT_FAILED } else { EXIT_OK })
}

/// Prints the comparison. Exit 1 on a regression above `--fail-above`.
pub fn compare(args: &CompareArgs) -> anyhow::Result<u8> {
    let base: Report = read_json(&args.base)?;
    let new: Report = read_json(&args.new)?;
    let c = compare::compare(&base, &new);
    let mut out = std::io::stdout().lock();
    render::compare::write(&c, args.fail_above, &mut out)?;
    Ok(match args.fail_above {
        Some(limit) if compare::regressed(&c, limit) => EXIT_FAILED,
        _ => EXIT_OK,
    })
}
