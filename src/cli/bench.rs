//! `rpcbench`: the client's command line. Without `--target` it starts the echo server
//! in-process on loopback and compares every transport against it.

use super::report::{CompareArgs, ReportArgs};
use super::{EXIT_FAILED, EXIT_OK, one_line, parse_bytes, parse_duration, parse_rate};
use crate::render::{self, Format};
use crate::report::{ConfigRecord, Environment, Report, RunRecord, rfc3339_now};
use crate::resolve::{AddrMode, Family, Names, ResolverAddr};
use crate::runner::{RunConfig, TransportRun, run_transport};
use crate::server::dns::{DEFAULT_DNS_NAME, DnsConfig};
use crate::server::stats::StatsSnapshot;
use crate::server::{EchoServer, ServerConfig};
use crate::transport::{Endpoint, TransportKind};
use anyhow::{Context, bail};
use clap::Parser;
use std::io::{IsTerminal, Write};
use std::net::{IpAddr, SocketAddr};
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::time::Duration;

/// Times N round trips per transport against an rpcbench-echo server, shows where the time
/// goes, and checks that no call was lost.
///
/// Exit status: 0 when lost + mismatched + failed calls <= --max-lost, 1 otherwise or when
/// the run could not start, 2 for bad usage.
#[derive(Debug, Parser)]
#[command(name = "rpcbench", version, args_conflicts_with_subcommands = true)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
    #[command(flatten)]
    pub bench: BenchArgs,
}

/// What to do with results after a run.
#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// Build the comparison report (README.md, index.html, SVG charts) from JSON results.
    Report(ReportArgs),
    /// Compare two JSON results: p50 and p99 per transport and mode.
    Compare(CompareArgs),
}

/// The arguments of a benchmark run (`rpcbench` without a subcommand).
#[derive(Debug, Parser)]
#[command(name = "rpcbench", version)]
pub struct BenchArgs {
    /// Server to call (IP literal or host name). Without it, an echo server and DNS
    /// responder are started in-process on 127.0.0.1.
    #[arg(long)]
    pub target: Option<String>,
    /// Raw TCP port of the target.
    #[arg(long, default_value_t = 7001)]
    pub tcp_port: u16,
    /// HTTP port of the target.
    #[arg(long, default_value_t = 7080)]
    pub http_port: u16,
    /// Measured calls per transport.
    #[arg(short = 'n', long = "calls", default_value_t = 1000)]
    pub calls: u64,
    /// Run each transport for this long instead of -n calls (e.g. 10s).
    #[arg(long, value_parser = parse_duration)]
    pub duration: Option<Duration>,
    /// Calls per transport before measuring starts; never counted.
    #[arg(long, default_value_t = 100)]
    pub warmup: u64,
    /// Workers, each a thread with its own connection or handle (at most 1024: each
    /// worker keeps about 1 MB of histograms).
    #[arg(short = 'c', long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=1024))]
    pub concurrency: u16,
    /// Request payload in bytes (KiB/MiB suffixes allowed).
    #[arg(long, default_value = "64", value_parser = parse_bytes)]
    pub payload: u32,
    /// Ask the server for a reply of this many pattern bytes instead of an echo.
    #[arg(long, value_parser = parse_bytes)]
    pub reply: Option<u32>,
    /// Ask the server to wait this many microseconds before each reply.
    #[arg(long, default_value_t = 0)]
    pub delay_us: u32,
    /// Longest a call may take before it counts as lost (e.g. 5s, 200ms).
    #[arg(long, default_value = "5s", value_parser = parse_duration)]
    pub timeout: Duration,
    /// Start calls at this many per second over all workers, on a fixed schedule (as
    /// fortio -qps, wrk2 -R), instead of back to back. Calls that start more than one
    /// interval late are counted as `late`.
    #[arg(long, value_name = "CALLS_PER_S", value_parser = parse_rate)]
    pub rate: Option<f64>,
    /// Transports to run, comma-separated (default: all).
    #[arg(long, value_enum, value_delimiter = ',', default_values_t = TransportKind::ALL.to_vec())]
    pub transports: Vec<TransportKind>,
    /// Run the transport list this many times, alternating the order, merging results.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    pub rounds: u32,
    /// Output format on stdout.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub format: Format,
    /// Also write the full JSON report to this file.
    #[arg(long)]
    pub out: Option<std::path::PathBuf>,
    /// Show every column of the table, however wide the terminal (default: those that fit).
    #[arg(long)]
    pub wide: bool,
    /// Lost + mismatched + failed calls allowed before the exit status is 1.
    #[arg(long, default_value_t = 0)]
    pub max_lost: u64,
    /// Address modes to run every transport under, comma-separated: ip, system, cached,
    /// uncached. Default: ip (plus system when the target is a name); with the embedded
    /// server: ip, cached, uncached against its DNS responder.
    #[arg(long, value_enum, value_delimiter = ',')]
    pub names: Option<Vec<AddrMode>>,
    /// DNS server (IP:PORT) for the cached and uncached modes (default: resolv.conf's).
    #[arg(long)]
    pub resolver: Option<SocketAddr>,
    /// Address family to look up: 4, 6 or any.
    #[arg(long, value_enum, default_value = "4")]
    pub family: Family,
    /// Never show the progress bar (it is shown only when stderr is a terminal anyway).
    #[arg(long)]
    pub no_progress: bool,
}

impl BenchArgs {
    /// The per-call settings these arguments describe.
    pub fn run_config(&self) -> RunConfig {
        RunConfig {
            calls: self.calls,
            duration: self.duration,
            warmup: self.warmup,
            concurrency: self.concurrency.into(),
            payload: self.payload,
            reply: self.reply,
            delay_us: self.delay_us,
            timeout: self.timeout,
            rate: self.rate,
        }
    }
}

/// Parses arguments, runs, prints, and maps the result to an exit status.
pub fn main() -> ExitCode {
    crate::init_tracing();
    let cli = Cli::parse();
    let args = cli.bench;
    let done = match &cli.command {
        Some(Command::Report(r)) => super::report::report(r),
        Some(Command::Compare(c)) => super::report::compare(c),
        None => run_bench(&args),
    };
    match done {
        Ok(code) => ExitCode::from(code),
        Err(e) if is_broken_pipe(&e) => ExitCode::from(EXIT_OK),
        Err(e) => {
            eprintln!("rpcbench: {}", one_line(&e));
            ExitCode::from(EXIT_FAILED)
        }
    }
}

/// A benchmark run, mapped to its exit status.
fn run_bench(args: &BenchArgs) -> anyhow::Result<u8> {
    let report = run(args)?;
    Ok(if report.failed() > args.max_lost {
        EXIT_FAILED
    } else {
        EXIT_OK
    })
}

/// `rpcbench | head` closes our stdout early; that is the reader's choice, not an error.
fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

/// The embedded echo server (with its DNS responder) and the runtime it runs on.
struct Embedded {
    rt: tokio::runtime::Runtime,
    server: EchoServer,
}

impl Embedded {
    fn start() -> anyhow::Result<Embedded> {
        // One server thread: the client's workers need the other CPU of a small machine.
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("rpcbench-echo")
            .enable_all()
            .build()
            .context("cannot start the embedded server's runtime")?;
        let config = ServerConfig {
            dns: Some(DnsConfig::default()),
            ..ServerConfig::loopback_any_port()
        };
        let server = rt
            .block_on(EchoServer::start(config))
            .context("cannot start the embedded echo server")?;
        Ok(Embedded { rt, server })
    }
}

/// What the run calls and how it finds it.
struct Plan {
    /// The name (or IP literal) being called.
    name: String,
    /// How the report names the target.
    label: String,
    tcp_port: u16,
    http_port: u16,
    resolver: ResolverAddr,
    modes: Vec<AddrMode>,
    /// Mode `ip`'s address, looked up once for the whole run (shared by every transport).
    ip: Option<Arc<Names>>,
}

impl Plan {
    fn new(args: &BenchArgs, embedded: Option<&Embedded>) -> anyhow::Result<Plan> {
        let (name, label, tcp_port, http_port, resolver, default_modes, known_ip) = match embedded {
            Some(e) => {
                let tcp = e.server.tcp_addr.context("embedded tcp listener")?;
                let http = e.server.http_addr.context("embedded http listener")?;
                let dns = e.server.dns_addr.context("embedded dns responder")?;
                (
                    DEFAULT_DNS_NAME.to_string(),
                    format!("embedded ({DEFAULT_DNS_NAME} = {}, DNS at {dns})", tcp.ip()),
                    tcp.port(),
                    http.port(),
                    args.resolver
                        .map_or(ResolverAddr::At(dns), ResolverAddr::At),
                    vec![AddrMode::Ip, AddrMode::Cached, AddrMode::Uncached],
                    Some(tcp.ip()),
                )
            }
            None => {
                let host = args.target.clone().context("no target")?;
                let is_ip = host.parse::<IpAddr>().is_ok();
                let modes = if is_ip {
                    vec![AddrMode::Ip]
                } else {
                    vec![AddrMode::Ip, AddrMode::System]
                };
                if args.tcp_port == 0 || args.http_port == 0 {
                    bail!("--tcp-port and --http-port must not be 0");
                }
                let resolver = args.resolver.map_or(ResolverAddr::System, ResolverAddr::At);
                (
                    host.clone(),
                    host,
                    args.tcp_port,
                    args.http_port,
                    resolver,
                    modes,
                    None,
                )
            }
        };
        let modes = args.names.clone().unwrap_or(default_modes);
        let ip = if modes.contains(&AddrMode::Ip) {
            Some(Arc::new(match known_ip {
                Some(ip) => Names::fixed(ip),
                None => Names::new_mode(AddrMode::Ip, &name, args.family, resolver, args.timeout)?,
            }))
        } else {
            None
        };
        Ok(Plan {
            name,
            label,
            tcp_port,
            http_port,
            resolver,
            modes,
            ip,
        })
    }

    /// A fresh endpoint for one transport run: its own resolver, so caches start cold and
    /// the query count is the run's own.
    fn endpoint(&self, mode: AddrMode, args: &BenchArgs) -> anyhow::Result<Endpoint> {
        let names = match (mode, &self.ip) {
            (AddrMode::Ip, Some(ip)) => ip.clone(),
            _ => Arc::new(Names::new_mode(
                mode,
                &self.name,
                args.family,
                self.resolver,
                args.timeout,
            )?),
        };
        Ok(Endpoint {
            names,
            tcp_port: self.tcp_port,
            http_port: self.http_port,
        })
    }
}

/// Runs the whole comparison and writes the output; returns the report.
pub fn run(args: &BenchArgs) -> anyhow::Result<Report> {
    let embedded = match &args.target {
        None => Some(Embedded::start()?),
        Some(_) => None,
    };
    let plan = Plan::new(args, embedded.as_ref())?;
    let config = args.run_config();
    let started = rfc3339_now();
    let jobs: Vec<(TransportKind, AddrMode)> = args
        .transports
        .iter()
        .flat_map(|&k| plan.modes.iter().map(move |&m| (k, m)))
        .collect();
    let runs = run_all(&jobs, args, &plan, &config)?;
    let report = Report {
        rpcbench: env!("CARGO_PKG_VERSION").to_string(),
        started,
        target: plan.label.clone(),
        command: std::env::args().collect(),
        config: ConfigRecord::new(
            &config,
            args.rounds,
            &args.transports,
            &plan.modes,
            args.family,
            &plan.resolver.to_string(),
            plan.tcp_port,
            plan.http_port,
        ),
        environment: Environment::detect(),
        server: match &embedded {
            Some(e) => Some(e.server.stats()),
            None => fetch_server_stats(&plan, args.timeout),
        },
        runs: runs.iter().map(RunRecord::new).collect(),
    };
    if let Some(e) = embedded {
        let _ = e.rt.block_on(e.server.shutdown(Duration::from_secs(1)));
    }
    // Name-lookup failures are said once each on stderr, whatever the output format.
    let mut said = std::collections::BTreeSet::new();
    for why in report.runs.iter().filter_map(|r| r.dns_error.as_ref()) {
        if said.insert(why) {
            eprintln!("rpcbench: {why}");
        }
    }
    if let Some(path) = &args.out {
        let file = std::fs::File::create(path)
            .with_context(|| format!("cannot create {}", path.display()))?;
        let mut w = std::io::BufWriter::new(file);
        render::render(&report, Format::Json, &render::RenderOptions::WIDE, &mut w)
            .and_then(|()| w.flush())
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    let mut stdout = std::io::stdout().lock();
    render::render(
        &report,
        args.format,
        &render::RenderOptions::terminal(args.wide),
        &mut stdout,
    )?;
    stdout.flush()?;
    Ok(report)
}

/// Asks a remote server for its counters and settings (`GET /stats`); `None` when it
/// cannot be asked, which is worth a warning but not a failed run.
fn fetch_server_stats(plan: &Plan, timeout: Duration) -> Option<StatsSnapshot> {
    let host = plan
        .ip
        .as_ref()
        .map_or_else(|| plan.name.clone(), |n| n.host());
    let host = if host.contains(':') {
        format!("[{host}]")
    } else {
        host
    };
    let url = format!("http://{host}:{}/stats", plan.http_port);
    let mut body = Vec::new();
    let fetched = (|| -> Result<u32, curl::Error> {
        let mut easy = curl::easy::Easy::new();
        easy.url(&url)?;
        easy.timeout(timeout)?;
        easy.signal(false)?;
        let mut transfer = easy.transfer();
        transfer.write_function(|data| {
            body.extend_from_slice(data);
            Ok(data.len())
        })?;
        transfer.perform()?;
        drop(transfer);
        easy.response_code()
    })();
    match fetched.map(|code| (code, serde_json::from_slice::<StatsSnapshot>(&body))) {
        Ok((200, Ok(stats))) => Some(stats),
        other => {
            tracing::warn!("could not read the server's /stats at {url}: {other:?}");
            None
        }
    }
}

/// Runs every (transport, address mode) job `rounds` times, reversing the order every
/// other round so drift over time hits each alike, and merges the rounds per job.
fn run_all(
    jobs: &[(TransportKind, AddrMode)],
    args: &BenchArgs,
    plan: &Plan,
    config: &RunConfig,
) -> anyhow::Result<Vec<TransportRun>> {
    let mut merged: Vec<Option<TransportRun>> = vec![None; jobs.len()];
    let show = !args.no_progress && std::io::stderr().is_terminal();
    for round in 0..args.rounds {
        let order: Vec<usize> = if round % 2 == 0 {
            (0..jobs.len()).collect()
        } else {
            (0..jobs.len()).rev().collect()
        };
        for i in order {
            let (kind, mode) = jobs[i];
            let endpoint = plan.endpoint(mode, args)?;
            let run = with_progress(show, &format!("{kind} {mode}"), config, |done| {
                run_transport(kind, &endpoint, config, done)
            });
            match &mut merged[i] {
                Some(m) => m.merge(&run),
                slot @ None => *slot = Some(run),
            }
        }
    }
    Ok(merged.into_iter().flatten().collect())
}

/// Runs `f`, showing a progress bar on stderr fed from the counter `f` updates.
fn with_progress<T>(
    show: bool,
    label: &str,
    config: &RunConfig,
    f: impl FnOnce(Arc<AtomicU64>) -> T,
) -> T {
    let done = Arc::new(AtomicU64::new(0));
    if !show {
        return f(done);
    }
    let bar = match config.duration {
        Some(d) => indicatif::ProgressBar::new(d.as_secs().max(1)),
        None => indicatif::ProgressBar::new(config.calls),
    };
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "{prefix:>15} {wide_bar} {pos}/{len} {msg} ETA {eta}",
        )
        .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    bar.set_prefix(label.to_string());
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| {
            let started = std::time::Instant::now();
            // Polling a counter keeps the bar off the workers' hot path.
            while !stop.load(Relaxed) {
                let n = done.load(Relaxed);
                let rate = n as f64 / started.elapsed().as_secs_f64().max(1e-9);
                if config.duration.is_some() {
                    bar.set_position(started.elapsed().as_secs());
                } else {
                    bar.set_position(n);
                }
                bar.set_message(format!("{rate:.0} calls/s"));
                std::thread::sleep(Duration::from_millis(100));
            }
            bar.finish_and_clear();
        });
        let result = f(done.clone());
        stop.store(true, Relaxed);
        result
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn arguments() {
        BenchArgs::command().debug_assert();
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
        let args =
            BenchArgs::try_parse_from(["rpcbench", "--transports", "tcp,curl-fresh", "-c", "8"])
                .unwrap();
        assert_eq!(
            args.transports,
            [TransportKind::Tcp, TransportKind::CurlFresh]
        );
        assert_eq!(args.run_config().concurrency, 8);
        assert_eq!(
            BenchArgs::try_parse_from(["rpcbench"])
                .unwrap()
                .transports
                .len(),
            6
        );
        for bad in [
            &["rpcbench", "--transports", "carrier-pigeon"][..],
            &["rpcbench", "-c", "0"],
            &["rpcbench", "--timeout", "soon"],
            &["rpcbench", "--rounds", "0"],
            &["rpcbench", "--format", "xml"],
        ] {
            assert!(BenchArgs::try_parse_from(bad).is_err(), "{bad:?}");
        }
    }
}
