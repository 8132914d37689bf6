//! `rpcbench sweep`: the command line of [`crate::sweep`].

use super::bench::BenchArgs;
use super::{EXIT_FAILED, EXIT_OK, parse_bytes, parse_positive_duration, parse_rate};
use crate::render::{self, Format};
use crate::sweep::{self, Axis, Slo, SweepReport, SweepSpec};
use anyhow::Context;
use std::io::Write;
use std::time::Duration;

/// Steps each transport over offered rates, worker counts (-c 1,4,16) or payload sizes,
/// or finds its capacity under a latency objective.
///
/// The run's flags that a sweep refuses (--duration, the TLS modes) or has no use for
/// (-n: each step runs for --step-duration; --what-if; --max-lost: a step passes only
/// with every call verified) are not offered here; --rounds defaults to 1.
#[derive(Debug, clap::Args)]
#[command(
    mut_arg("calls", |a| a.hide(true)),
    mut_arg("duration", |a| a.hide(true)),
    mut_arg("what_if", |a| a.hide(true)),
    mut_arg("max_lost", |a| a.hide(true)),
    mut_arg("security", |a| a.hide(true)),
    mut_arg("tls_port", |a| a.hide(true)),
    mut_arg("https_port", |a| a.hide(true)),
    mut_arg("ca", |a| a.hide(true)),
    mut_arg("client_cert", |a| a.hide(true)),
    mut_arg("client_key", |a| a.hide(true)),
    mut_arg("insecure", |a| a.hide(true)),
    mut_arg("rounds", |a| a
        .help("Split each step's --step-duration into this many rounds and merge them (default 1)")
        .long_help(None::<&str>)),
)]
pub struct SweepArgs {
    #[command(flatten)]
    pub bench: BenchArgs,
    /// Offered rates, calls per second over all workers, increasing (e.g. 1k,5k,10k,20k).
    #[arg(long, value_name = "LIST", value_delimiter = ',', value_parser = parse_rate, conflicts_with = "payloads")]
    pub rates: Option<Vec<f64>>,
    /// Request payload sizes, increasing (e.g. 64,1k,16k,256k,1m).
    #[arg(long, value_name = "LIST", value_delimiter = ',', value_parser = parse_bytes)]
    pub payloads: Option<Vec<u32>>,
    /// WSTest messages, increasing (e.g. echo-struct:1,10,100,1000), with --encoding: a
    /// series per transport and encoding, a step per message.
    #[arg(
        long,
        value_name = "LIST",
        value_delimiter = ',',
        requires = "encoding"
    )]
    pub messages: Option<Vec<String>>,
    /// Latency objective, pNN=DURATION (e.g. p99=2ms). With --rates, the capacity is the
    /// highest listed rate that meets it; without an axis, the rate is searched for.
    #[arg(long, value_name = "pNN=DURATION")]
    pub slo: Option<Slo>,
    /// How long each step runs.
    #[arg(long, value_name = "DURATION", default_value = "2s", value_parser = parse_positive_duration)]
    pub step_duration: Duration,
}

impl SweepArgs {
    /// The sweep these arguments describe, or why they do not describe one.
    pub fn spec(&self) -> Result<SweepSpec, String> {
        let levels = &self.bench.concurrency;
        if self.bench.security.iter().any(|s| s.is_tls()) {
            // A series is one (transport, address mode) pair; a security axis inside a
            // sweep would need series of three, which the sweep report does not draw.
            return Err("rpcbench sweep runs in security mode plain only; run `rpcbench --security ...` for TLS".to_string());
        }
        let mut axes = Vec::new();
        if let Some(r) = &self.rates {
            axes.push(Axis::Rates(r.clone()));
        }
        if let Some(p) = &self.payloads {
            axes.push(Axis::Payloads(p.clone()));
        }
        if let Some(m) = &self.messages {
            axes.push(Axis::Messages(parse_messages(m)?));
        }
        if levels.len() > 1 {
            axes.push(Axis::Concurrency(
                levels.iter().map(|&c| c.into()).collect(),
            ));
        }
        if axes.len() > 1 {
            return Err(
                "a sweep varies one thing: give one of --rates, --payloads, --messages or a -c list"
                    .into(),
            );
        }
        let axis = axes.pop();
        if axis.is_none() && self.slo.is_none() {
            return Err(
                "a sweep needs --rates, --payloads, --messages, a -c list, or --slo to search for the capacity"
                    .into(),
            );
        }
        if let Some(a) = &axis {
            a.check()?;
        }
        if self.bench.duration.is_some() {
            return Err("a sweep runs each step for --step-duration, not --duration".into());
        }
        let mut bench = self.bench.spec();
        bench.run.concurrency = self.bench.workers();
        // A sweep's series each hold one transport at the steps' own settings, and a step
        // is one window of --step-duration unless --rounds splits it.
        bench.mux_concurrency = None;
        bench.rounds = self.bench.rounds.unwrap_or(1);
        Ok(SweepSpec {
            bench,
            axis,
            slo: self.slo,
            step_duration: self.step_duration,
        })
    }
}

/// Runs the sweep, prints its steps, writes `--out`, and maps the result to a status.
pub fn sweep(args: &SweepArgs) -> anyhow::Result<u8> {
    let spec = match args.spec() {
        Ok(spec) => spec,
        Err(why) => {
            return Err(super::UsageError {
                kind: clap::error::ErrorKind::ArgumentConflict,
                why: why.to_string(),
            }
            .into());
        }
    };
    let mut progress = super::bench::ProgressBar::for_stderr(&args.bench);
    let report = sweep::run(&spec, &mut progress)?;
    if let Some(path) = &args.bench.out {
        let file = std::fs::File::create(path)
            .with_context(|| format!("cannot create {}", path.display()))?;
        let mut w = std::io::BufWriter::new(file);
        serde_json::to_writer_pretty(&mut w, &report)
            .map_err(std::io::Error::from)
            .and_then(|()| writeln!(w))
            .and_then(|()| w.flush())
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    let mut stdout = std::io::stdout().lock();
    match args.bench.format {
        Format::Json => {
            serde_json::to_writer_pretty(&mut stdout, &report).map_err(std::io::Error::from)?;
            writeln!(stdout)?;
        }
        Format::Csv => render::sweep::write_csv(&report, &mut stdout)?,
        Format::Markdown => render::sweep::write_markdown(&report, &mut stdout)?,
        Format::Table => render::sweep::write(
            &report,
            &render::RenderOptions::terminal(args.bench.wide),
            &mut stdout,
        )?,
    }
    stdout.flush()?;
    Ok(if passed(&report, spec.slo.is_some()) {
        EXIT_OK
    } else {
        EXIT_FAILED
    })
}

/// With an objective, every series must have a capacity; without, every step's calls
/// must all have come back verified.
fn passed(report: &SweepReport, with_slo: bool) -> bool {
    report.series.iter().all(|s| {
        if with_slo {
            s.capacity_per_s.is_some() || s.steps.iter().any(|st| st.meets_slo == Some(true))
        } else {
            s.steps.iter().all(|st| st.run.failed() == 0)
        }
    })
}

/// `--messages`: each entry a message (`echo-struct:10`), or a bare size that takes the
/// operation of the entry before it (`echo-struct:1,10,100`).
fn parse_messages(steps: &[String]) -> Result<Vec<crate::encoding::Message>, String> {
    let mut out: Vec<crate::encoding::Message> = Vec::new();
    for step in steps {
        let text = match (step.trim().parse::<u64>(), out.last()) {
            (Ok(_), Some(last)) => {
                let name = last.to_string();
                let op = name.split(':').next().unwrap_or_default();
                format!("{op}:{}", step.trim())
            }
            (Ok(_), None) => {
                return Err(format!(
                    "--messages starts with a size ({step}): name its message first, e.g. echo-struct:{step}"
                ));
            }
            (Err(_), _) => step.clone(),
        };
        out.push(text.parse().map_err(|e| format!("--messages: {e}"))?);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use crate::cli::rpcbench::{Cli, Command};
    use clap::{CommandFactory, Parser};

    fn sweep_command() -> clap::Command {
        let mut cli = Cli::command();
        cli.build();
        cli.find_subcommand("sweep").unwrap().clone()
    }

    /// `rpcbench sweep --help` says what a sweep does: one round unless --rounds, and the
    /// run's flags it refuses or ignores are not offered.
    #[test]
    fn help_offers_what_a_sweep_takes() {
        let cli = Cli::try_parse_from(["rpcbench", "sweep", "--rates", "1k,2k"]).unwrap();
        let Some(Command::Sweep(args)) = cli.command else {
            panic!("a sweep")
        };
        assert_eq!(args.spec().unwrap().bench.rounds, 1);
        let sweep = sweep_command();
        let rounds = sweep
            .get_arguments()
            .find(|a| a.get_id() == "rounds")
            .unwrap();
        let help = rounds.get_help().unwrap().to_string();
        assert!(help.contains("default 1"), "{help}");
        assert!(rounds.get_long_help().is_none());
        for hidden in [
            "calls", "duration", "security", "ca", "insecure", "what_if", "max_lost",
        ] {
            let arg = sweep
                .get_arguments()
                .find(|a| a.get_id() == hidden)
                .unwrap();
            assert!(arg.is_hide_set(), "{hidden} is offered");
        }
        // Still refused when given: hidden is not accepted.
        let cli =
            Cli::try_parse_from(["rpcbench", "sweep", "--rates", "1k", "--security", "tls13"])
                .unwrap();
        let Some(Command::Sweep(args)) = cli.command else {
            panic!("a sweep")
        };
        assert!(args.spec().is_err());
    }

    #[test]
    fn dns_offers_no_csv() {
        assert!(Cli::try_parse_from(["rpcbench", "dns", "x", "--format", "csv"]).is_err());
        assert!(Cli::try_parse_from(["rpcbench", "dns", "x", "--format", "markdown"]).is_ok());
    }
}
