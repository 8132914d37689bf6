//! `rpcbench`: the client's command line as a whole, its subcommands and its exit status.
//! The arguments of a run are [`super::bench::BenchArgs`]; each subcommand's are in its
//! own file, which reports bad usage as a [`UsageError`] rather than reaching back here.

use super::bench::BenchArgs;
use super::report::{CompareArgs, ReportArgs};
use super::{EXIT_FAILED, EXIT_OK, UsageError, one_line};
use crate::bench::RunBenchError;
use clap::{CommandFactory, Parser};
use std::process::ExitCode;

/// Times N round trips per transport against an rpcbench-echo server, shows where the time
/// goes, and checks that no call was lost.
#[derive(Debug, Parser)]
#[command(
    name = "rpcbench",
    version,
    args_conflicts_with_subcommands = true,
    after_long_help = super::manuals::after_help("rpcbench")
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
    #[command(flatten)]
    pub bench: BenchArgs,
    /// Log in full (time, level, module) to stderr: -v rpcbench's debug records, -vv
    /// everything. RUST_LOG=FILTER does the same with a filter of its own.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,
}

/// What to do with results after a run.
#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// Build the comparison report (README.md, index.html, SVG charts) from JSON results.
    #[command(after_long_help = super::manuals::after_help("rpcbench report"))]
    Report(ReportArgs),
    /// Compare two JSON results: p50 and p99 per transport and mode.
    #[command(after_long_help = super::manuals::after_help("rpcbench compare"))]
    Compare(CompareArgs),
    /// Step each transport over offered rates, concurrency levels or payload sizes, and
    /// find its capacity under a latency objective (--slo p99=2ms).
    #[command(after_long_help = super::manuals::after_help("rpcbench sweep"))]
    Sweep(Box<super::sweep::SweepArgs>),
    /// Diagnose the lookup of one name: the queries it really sends here (search list,
    /// A and AAAA, retries, TCP), what each costs, and what to change.
    #[command(after_long_help = super::manuals::after_help("rpcbench dns"))]
    Dns(super::dns::DnsArgs),
    /// Probe every peer of a list (--peers) over a few transports, all the time, and
    /// serve the results on GET /metrics for Prometheus (fleet mode).
    #[command(after_long_help = super::manuals::after_help("rpcbench agent"))]
    Agent(Box<super::agent::AgentArgs>),
    /// Write the manual pages and shell completions of rpcbench, rpcbench-echo and
    /// rpcbench-link into --out DIR, generated from these same definitions.
    #[command(hide = true)]
    Manuals(super::manuals::ManualsArgs),
}

/// Parses arguments, runs, prints, and maps the result to an exit status.
pub fn main() -> ExitCode {
    let cli = Cli::try_parse().unwrap_or_else(|e| super::usage_exit("rpcbench", e));
    crate::init_tracing("rpcbench", cli.verbose);
    let args = cli.bench;
    if let Err(why) = args.check() {
        super::usage_exit(
            "rpcbench",
            Cli::command().error(clap::error::ErrorKind::ArgumentConflict, why),
        );
    }
    let done = match &cli.command {
        Some(Command::Report(r)) => super::report::report(r),
        Some(Command::Compare(c)) => super::report::compare(c),
        Some(Command::Sweep(s)) => super::sweep::sweep(s),
        Some(Command::Dns(d)) => super::dns::dns(d),
        Some(Command::Agent(a)) => super::agent::agent(a),
        Some(Command::Manuals(m)) => manuals(m),
        None => super::bench::run_bench(&args),
    };
    match done {
        Ok(code) => ExitCode::from(code),
        Err(e) if is_broken_pipe(&e) => ExitCode::from(EXIT_OK),
        Err(e) if e.downcast_ref::<UsageError>().is_some() => {
            let UsageError { kind, why } = e.downcast().expect("checked above");
            super::usage_exit("rpcbench", Cli::command().error(kind, why))
        }
        Err(e) => {
            for line in error_lines(&e) {
                eprintln!("rpcbench: {line}");
            }
            ExitCode::from(EXIT_FAILED)
        }
    }
}

/// Writes the manual pages and completions of the three programs; prints each file.
fn manuals(args: &super::manuals::ManualsArgs) -> anyhow::Result<u8> {
    let programs = [
        Cli::command(),
        super::echo::EchoArgs::command(),
        super::link::LinkArgs::command(),
    ];
    for path in super::manuals::write(args, &programs)? {
        println!("{}", path.display());
    }
    Ok(EXIT_OK)
}

/// What a failure says on stderr: the preflight's findings one line per case, anything
/// else its error chain on one line.
fn error_lines(e: &anyhow::Error) -> Vec<String> {
    let not_ready = e
        .chain()
        .find_map(|c| match c.downcast_ref::<RunBenchError>() {
            Some(RunBenchError::TargetNotReady(not_ready)) => Some(not_ready),
            _ => None,
        });
    match not_ready {
        Some(not_ready) => not_ready.lines(),
        None => vec![one_line(e)],
    }
}

/// `rpcbench | head` closes our stdout early; that is the reader's choice, not an error.
fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subcommands() {
        Cli::command().debug_assert();
        let cli = Cli::try_parse_from([
            "rpcbench",
            "compare",
            "a.json",
            "b.json",
            "--fail-above",
            "1.2",
        ])
        .unwrap();
        assert!(matches!(cli.command, Some(Command::Compare(ref c)) if c.fail_above == Some(1.2)));
        let cli = Cli::try_parse_from(["rpcbench", "-n", "5"]).unwrap();
        assert!(cli.command.is_none() && cli.bench.calls == 5);
        assert!(
            Cli::try_parse_from(["rpcbench", "report", "--out", "x"]).is_err(),
            "needs results"
        );
    }
}
