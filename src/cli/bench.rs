//! `rpcbench`: the client's command line. Without `--target` it starts the echo server
//! in-process on loopback and compares every transport against it.

use super::{EXIT_FAILED, EXIT_OK, parse_bytes, parse_positive_duration, parse_rate};
use crate::bench::{BenchOutcome, BenchSpec, Observer};
use crate::render::{self, Format};
use crate::resolve::{AddrMode, Family};
use crate::runner::RunConfig;
use crate::transport::TransportKind;
use crate::transport::tls::Security;
use anyhow::Context;
use clap::Parser;
use std::io::{IsTerminal, Write};
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::time::Duration;

/// The arguments of a benchmark run (`rpcbench` without a subcommand).
#[derive(Debug, Parser)]
#[command(name = "rpcbench", version)]
pub struct BenchArgs {
    /// Server to call (IP literal or host name). Without it, an echo server and DNS
    /// responder are started in-process on 127.0.0.1.
    #[arg(long, value_name = "HOST")]
    pub target: Option<String>,
    /// Raw TCP port of the target.
    #[arg(long, value_name = "PORT", default_value_t = 7001)]
    pub tcp_port: u16,
    /// HTTP port of the target.
    #[arg(long, value_name = "PORT", default_value_t = 7080)]
    pub http_port: u16,
    /// UDP port of the target (rpcbench-echo --udp). With --target and without it, `udp`
    /// is not run (said on stderr); the embedded server opens one.
    #[arg(long, value_name = "PORT")]
    pub udp_port: Option<u16>,
    /// QUIC port of the target (UDP; rpcbench-echo --quic). With --target and without
    /// it, the QUIC transports (`quic`, `quic-connect`, `h3`, `h3-mux`, `h3-fresh`) are
    /// not run (said on stderr); the embedded server opens one.
    #[arg(long, value_name = "PORT")]
    pub quic_port: Option<u16>,
    /// Unix socket of the target, on this host (rpcbench-echo --unix). With --target and
    /// without it, `unix` is not run (said on stderr); the embedded server opens one in a
    /// private temporary directory, removed at the end.
    #[arg(long, value_name = "PATH")]
    pub unix: Option<std::path::PathBuf>,
    /// Measured calls per transport and mode, taken one at a time by the workers as each
    /// becomes free, so that none idles while calls remain (at least 1, and at least -c).
    #[arg(short = 'n', long = "calls", value_name = "N", default_value_t = 1000, value_parser = parse_calls)]
    pub calls: u64,
    /// Run each transport for this long instead of -n calls (e.g. 10s; more than 0):
    /// every worker runs the same window.
    #[arg(long, value_name = "DURATION", value_parser = parse_positive_duration)]
    pub duration: Option<Duration>,
    /// Calls per transport before measuring starts, at least one per worker (they open
    /// every connection); never counted. 0 for none.
    #[arg(long, value_name = "N", default_value_t = 100)]
    pub warmup: u64,
    /// Connections, each making one call at a time (at most 10000; above one per CPU they
    /// share a few event-loop threads, the curl transports stop at 1024 worker threads).
    /// `rpcbench sweep` takes a list (1,4,16). Default 1, and then h2-mux and grpc-mux,
    /// which share one connection among the workers, run at 16 with h2 and grpc beside
    /// them at 16 too, since at 1 there is nothing to multiplex.
    #[arg(short = 'c', long, value_name = "N", value_delimiter = ',', value_parser = clap::value_parser!(u16).range(1..=i64::from(crate::runner::MAX_CONCURRENCY)))]
    pub concurrency: Vec<u16>,
    /// Engine: blocking (a thread per connection), evloop (event loops) or auto.
    #[arg(long, value_name = "ENGINE", value_enum, default_value_t = crate::runner::Engine::Auto)]
    pub engine: crate::runner::Engine,
    /// Request payload in bytes (KiB/MiB suffixes allowed).
    #[arg(long, value_name = "BYTES", default_value = "64", value_parser = parse_bytes)]
    pub payload: u32,
    /// Ask the server for a reply of this many pattern bytes instead of an echo.
    #[arg(long, value_name = "BYTES", value_parser = parse_bytes)]
    pub reply: Option<u32>,
    /// Largest reply payload accepted (KiB/MiB suffixes; default: the reply asked for,
    /// --reply or the echo of --payload). A larger reply is not read on, and its call is
    /// counted as `reply_above_max`.
    #[arg(long, value_name = "BYTES", value_parser = parse_bytes)]
    pub max_reply: Option<u32>,
    /// Ask the server to wait this many microseconds before each reply.
    #[arg(long, value_name = "US", default_value_t = 0)]
    pub delay_us: u32,
    /// Longest a call may take before it counts as lost (e.g. 5s, 200ms; more than 0);
    /// also bounds the name check before the run.
    #[arg(long, value_name = "DURATION", default_value = "5s", value_parser = parse_positive_duration)]
    pub timeout: Duration,
    /// Start calls at this many per second over all workers (5k and 1.5m allowed), on a
    /// fixed schedule (as fortio -qps, wrk2 -R), instead of back to back. Calls that start
    /// more than one interval late are counted as `late`.
    #[arg(long, value_name = "CALLS_PER_S", value_parser = parse_rate)]
    pub rate: Option<f64>,
    /// Transports to run, comma-separated (default: all but quic and quic-connect).
    #[arg(long, value_name = "LIST", value_enum, value_delimiter = ',', default_values_t = TransportKind::by_default())]
    pub transports: Vec<TransportKind>,
    /// Split the calls (or --duration) into this many rounds, run the transport list once
    /// per round, reversing the order every other round, and merge the rounds: how far the
    /// rounds' means stray gives each figure its noise (the ± column). Default 3, fewer
    /// when -n leaves a worker less than one call a round.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub rounds: Option<u32>,
    /// Output format on stdout.
    #[arg(long, value_name = "FORMAT", value_enum, default_value_t = Format::Table)]
    pub format: Format,
    /// Also write the full JSON report to this file.
    #[arg(long, value_name = "FILE")]
    pub out: Option<std::path::PathBuf>,
    /// Show every column of the table, however wide the terminal (default: those that fit).
    #[arg(long)]
    pub wide: bool,
    /// Lost + mismatched + failed calls allowed before the exit status is 1.
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub max_lost: u64,
    /// Address modes to run every transport under, comma-separated: ip, system, cached,
    /// uncached, uncached-search. Default: ip (plus system when the target is a name);
    /// with the embedded server: ip, cached, uncached against its DNS responder.
    #[arg(long, value_name = "MODES", value_enum, value_delimiter = ',')]
    pub names: Option<Vec<AddrMode>>,
    /// The resolv.conf whose search list and ndots `uncached-search` follows (default:
    /// /etc/resolv.conf, which `system` follows).
    #[arg(long, value_name = "FILE")]
    pub resolv_conf: Option<std::path::PathBuf>,
    /// DNS server (IP:PORT) for the cached and uncached modes (default: resolv.conf's;
    /// with the embedded server, its DNS responder).
    #[arg(long, value_name = "IP:PORT")]
    pub resolver: Option<SocketAddr>,
    /// Address family to look up: 4, 6 or any.
    #[arg(long, value_name = "FAMILY", value_enum, default_value = "4")]
    pub family: Family,
    /// Never show the progress bar (it is shown only when stderr is a terminal anyway).
    #[arg(long)]
    pub no_progress: bool,
    /// Security modes to run the transports under, comma-separated: plain, tls13,
    /// tls13-resume, tls13-0rtt, tls12, tls12-resume, mtls (default: plain). udp and unix
    /// run in plain only (DTLS is out of scope); curl-fresh does not run in the resume
    /// modes; the QUIC transports run plain as tls13, tls13-0rtt (the request in early
    /// data) only they run, and no tls12 mode.
    #[arg(
        long,
        value_name = "MODES",
        value_enum,
        value_delimiter = ',',
        default_value = "plain"
    )]
    pub security: Vec<Security>,
    /// The target's raw-frames-over-TLS port (rpcbench-echo --tls).
    #[arg(long, value_name = "PORT", default_value_t = 7443)]
    pub tls_port: u16,
    /// The target's HTTPS port (rpcbench-echo --https).
    #[arg(long, value_name = "PORT", default_value_t = 8443)]
    pub https_port: u16,
    /// CA certificates (PEM) the server's certificate must chain to (rpcbench-echo
    /// prints where it wrote its generated CA). Default with the embedded server: the CA
    /// it generated.
    #[arg(long, value_name = "PEM")]
    pub ca: Option<std::path::PathBuf>,
    /// Client certificate chain (PEM) for mode mtls, with --client-key.
    #[arg(long, value_name = "PEM", requires = "client_key")]
    pub client_cert: Option<std::path::PathBuf>,
    /// The private key (PEM) of --client-cert.
    #[arg(long, value_name = "PEM", requires = "client_cert")]
    pub client_key: Option<std::path::PathBuf>,
    /// Do not verify the server's certificate. Prints a warning and is recorded in the
    /// JSON (`insecure: true` on every TLS run).
    #[arg(long)]
    pub insecure: bool,
    /// The round-trip time of the link to the target, when known (the test bed passes
    /// the RTT it injects, e.g. 2ms; 0s for none): recorded on every run as
    /// `link_rtt_us`, so `rpcbench report` can fit round trips per call over runs at
    /// several RTTs. Also prints the what-if table, projected from it.
    #[arg(long, value_name = "DURATION", value_parser = super::parse_duration)]
    pub link_rtt: Option<Duration>,
    /// Skip the preflight: by default, before any measured call against a --target, one
    /// probe of each port the run needs (well under a second) stops the run with exit
    /// status 1 and one line per problem (refused, no answer, another server, another
    /// wire version). Without it, a server meant to misbehave is measured as it is.
    #[arg(long)]
    pub no_preflight: bool,
    /// Print the what-if table after the run: each transport's mean projected at 0.1, 1,
    /// 10 and 50 ms RTT from the protocol's round trips per call and its measured fixed
    /// cost, the path RTT taken from --link-rtt or else the path RTT estimate (the least
    /// RTT the kernel sampled, or the fastest call of a persistent transport, whichever is
    /// smaller; shown with the table format only).
    #[arg(long)]
    pub what_if: bool,
    /// Where rpcbench runs its own threads: auto (same-core at -c 1, split when several
    /// workers load the embedded server, the client's workers unplaced against --target at
    /// -c above 1), same-core (the client and the embedded server on one CPU, so each
    /// call's wake-up stays on that core and figures agree between runs), split (client
    /// and embedded server on two CPUs: every call crosses cores, and each side has a CPU
    /// of its own under load) or none (the scheduler decides; figures may move between
    /// runs). Against --target only the client is placed: the server's placement is its
    /// host's (rpcbench-echo --cpus). CPUs are picked from those this process was given
    /// (taskset, a cgroup cpuset), never outside them.
    #[arg(long, value_name = "PLACEMENT", value_enum, default_value_t = crate::placement::Placement::Auto)]
    pub placement: crate::placement::Placement,
    /// Send WSTest's calls in these encodings instead of the opaque echo, comma-separated:
    /// postcard, protobuf, json (JSON-RPC 2.0), msgpack, xmlrpc, soap (SOAP 1.1
    /// document/literal). Each reply is decoded and
    /// compared field by field with what was sent. Every transport that carries the
    /// encoding runs once per encoding and message; the others are left out, one line on
    /// stderr each. Not with --payload or --reply: the message is the payload.
    #[arg(long, value_name = "LIST", value_delimiter = ',', conflicts_with_all = ["payload", "reply"])]
    pub encoding: Vec<crate::encoding::EncodingKind>,
    /// WSTest messages for --encoding, comma-separated: echo-void, echo-struct:N (N
    /// structs), echo-list:N (a list of N nodes, at most 64), echo-synthetic:BYTES (a
    /// Synthetic of BYTES of base64Binary; KiB/MiB allowed). Default echo-struct:10.
    #[arg(
        long,
        value_name = "LIST",
        value_delimiter = ',',
        requires = "encoding"
    )]
    pub message: Vec<crate::encoding::Message>,
}

/// A list of names, comma-separated.
fn names<T: std::fmt::Display>(items: &[T]) -> String {
    items
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

/// Reads a PEM file named by a flag, or says which and why not.
fn read_pem(flag: &str, path: &Option<std::path::PathBuf>) -> Result<Option<String>, String> {
    match path {
        Some(p) => std::fs::read_to_string(p)
            .map(Some)
            .map_err(|e| format!("{flag} {}: {e}", p.display())),
        None => Ok(None),
    }
}

impl BenchArgs {
    /// Checks what one flag's parser cannot see: how flags fit together.
    pub fn check(&self) -> Result<(), String> {
        if self.concurrency.len() > 1 {
            return Err("a list of -c values is for `rpcbench sweep`".to_string());
        }
        read_pem("--ca", &self.ca)?;
        read_pem("--client-cert", &self.client_cert)?;
        read_pem("--client-key", &self.client_key)?;
        let tls = self.security.iter().any(|s| s.is_tls());
        if tls && self.target.is_some() && self.ca.is_none() && !self.insecure {
            return Err("a TLS mode against a target needs --ca PEM (or --insecure)".to_string());
        }
        if self.security.contains(&Security::Mtls)
            && self.target.is_some()
            && self.client_cert.is_none()
        {
            return Err(
                "mode mtls against a target needs --client-cert and --client-key".to_string(),
            );
        }
        let workers = self.workers();
        if self.duration.is_none() && self.calls < workers as u64 {
            return Err(format!(
                "-n {} is fewer calls than -c {workers} workers: every worker must make calls",
                self.calls
            ));
        }
        let rounds = u64::from(self.rounds());
        if self.duration.is_none() && self.calls / rounds < workers as u64 {
            return Err(format!(
                "-n {} over --rounds {rounds} leaves fewer calls a round than -c {workers} workers: every worker must make calls in every round",
                self.calls
            ));
        }
        if !self.encoding.is_empty()
            && !self
                .transports
                .iter()
                .any(|k| self.encoding.iter().any(|&e| k.carries(e)))
        {
            return Err(format!(
                "none of the transports asked for carries {}: the encodings run over HTTP \
                 (http-keepalive, http-fresh, curl-reuse, curl-fresh, h2, h2-mux), the \
                 raw frames (tcp, tcp-connect, unix) and, protobuf only, the gRPC ones",
                names(&self.encoding)
            ));
        }
        crate::runner::check_limits(&self.transports, &self.run_config(), self.target.is_none())
            .map_err(|e| e.to_string())
    }

    /// The encoded calls asked for: every encoding with every message (echo-struct:10 when
    /// no message is named); none for the opaque echo.
    pub fn rpcs(&self) -> Vec<crate::runner::RpcConfig> {
        let messages = if self.message.is_empty() {
            vec![crate::encoding::Message::Struct(10)]
        } else {
            self.message.clone()
        };
        self.encoding
            .iter()
            .flat_map(|&encoding| {
                messages
                    .iter()
                    .map(move |&message| crate::runner::RpcConfig { encoding, message })
            })
            .collect()
    }

    /// The rounds of the run: `--rounds`, else [`crate::bench::DEFAULT_ROUNDS`], or as
    /// many as give each worker (at the multiplexing comparison's concurrency too) at
    /// least one call a round.
    pub fn rounds(&self) -> u32 {
        self.rounds.unwrap_or_else(|| {
            let workers = self.workers().max(if self.concurrency.is_empty() {
                crate::bench::MUX_CONCURRENCY.min(self.calls_floor())
            } else {
                1
            });
            let fit = u32::try_from(self.calls_floor() / workers.max(1)).unwrap_or(u32::MAX);
            crate::bench::DEFAULT_ROUNDS.min(fit).max(1)
        })
    }

    /// The fewest calls a worker set can be given: `-n`, or, under `--duration`, no
    /// limit (every worker runs for the time).
    fn calls_floor(&self) -> usize {
        match self.duration {
            Some(_) => usize::MAX,
            None => usize::try_from(self.calls).unwrap_or(usize::MAX),
        }
    }

    /// The workers of a plain run: the first (for a plain run, the only) `-c` value, 1
    /// when `-c` is not given.
    pub fn workers(&self) -> usize {
        self.concurrency.first().copied().map_or(1, usize::from)
    }

    /// The run these arguments describe.
    pub fn spec(&self) -> BenchSpec {
        BenchSpec {
            target: self.target.clone(),
            tcp_port: self.tcp_port,
            http_port: self.http_port,
            udp_port: self.udp_port,
            quic_port: self.quic_port,
            unix: self.unix.clone(),
            run: self.run_config(),
            transports: self.transports.clone(),
            names: self.names.clone(),
            resolver: self.resolver,
            family: self.family,
            resolv_conf: self.resolv_conf.clone(),
            rounds: self.rounds(),
            command: std::env::args().collect(),
            security: self.security.clone(),
            tls_port: self.tls_port,
            https_port: self.https_port,
            // Checked readable by `check`; a file gone since is an empty CA, refused
            // when the TLS configuration is built.
            ca_pem: read_pem("--ca", &self.ca).ok().flatten(),
            client_cert_pem: read_pem("--client-cert", &self.client_cert)
                .ok()
                .flatten()
                .zip(read_pem("--client-key", &self.client_key).ok().flatten()),
            insecure: self.insecure,
            link_rtt: self.link_rtt,
            placement: self.placement,
            // Without -c, the shared-connection transports run where streams share a
            // connection; with it, everything runs at the -c asked for.
            mux_concurrency: self
                .concurrency
                .is_empty()
                .then(|| crate::bench::MUX_CONCURRENCY.min(self.calls_floor()))
                .filter(|&m| m > 1),
            preflight: !self.no_preflight,
            rpcs: self.rpcs(),
        }
    }

    /// The per-call settings these arguments describe.
    pub fn run_config(&self) -> RunConfig {
        RunConfig {
            calls: self.calls,
            duration: self.duration,
            warmup: self.warmup,
            concurrency: self.workers(),
            payload: self.payload,
            reply: self.reply,
            max_reply: self.max_reply,
            delay_us: self.delay_us,
            timeout: self.timeout,
            rate: self.rate,
            engine: self.engine,
            rpc: self.rpcs().first().copied(),
        }
    }
}

/// Parses `-n`: a whole number of calls, at least 1 (a run of no calls measures nothing).
fn parse_calls(text: &str) -> Result<u64, String> {
    match text.trim().parse::<u64>() {
        Ok(n) if n >= 1 => Ok(n),
        _ => Err(format!("{text:?} is not a number of calls (at least 1)")),
    }
}

/// A benchmark run, mapped to its exit status.
pub(super) fn run_bench(args: &BenchArgs) -> anyhow::Result<u8> {
    if args.insecure {
        eprintln!(
            "rpcbench: warning: --insecure: the server's certificate is not verified (recorded in the JSON)"
        );
    }
    let outcome = run(args)?;
    Ok(if outcome.passed(args.max_lost) {
        EXIT_OK
    } else {
        EXIT_FAILED
    })
}

/// Runs the comparison ([`crate::bench::run`]) and writes the output.
pub fn run(args: &BenchArgs) -> anyhow::Result<BenchOutcome> {
    let spec = args.spec();
    let mut progress = ProgressBar::for_stderr(args);
    let outcome = crate::bench::run(&spec, &mut progress)?;
    let report = &outcome.report;
    // Modes left out, and name-lookup failures during the run, are said once each on
    // stderr, whatever the output format.
    for skipped in &outcome.skipped {
        eprintln!("rpcbench: {}: mode {} not run", skipped.why, skipped.mode);
    }
    for note in &outcome.notes {
        eprintln!("rpcbench: {note}");
    }
    // The table says it after the figures; the other formats carry `coherent: false`,
    // and whoever watches the terminal still reads the line.
    if args.format != Format::Table
        && let Some(line) = render::incoherent_line(report)
    {
        eprintln!("rpcbench: {line}");
    }
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
        render::render(report, Format::Json, &render::RenderOptions::WIDE, &mut w)
            .and_then(|()| w.flush())
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    let mut stdout = std::io::stdout().lock();
    render::render(
        report,
        args.format,
        &render::RenderOptions::terminal(args.wide),
        &mut stdout,
    )?;
    if args.format == Format::Table && (args.what_if || args.link_rtt.is_some()) {
        let rows = crate::model::projections(&[report], &[]);
        render::model::write_what_if(&rows, render::terminal_width(), &mut stdout)?;
    }
    stdout.flush()?;
    Ok(outcome)
}

/// A progress bar on stderr per job, fed from the job's call counter by a thread of its
/// own, so the bar stays off the workers' hot path.
pub(super) struct ProgressBar {
    show: bool,
    /// The job being shown: its stop flag and the thread drawing it.
    current: Option<(Arc<AtomicBool>, std::thread::JoinHandle<()>)>,
}

/// How often the bar is redrawn.
const PROGRESS_TICK: Duration = Duration::from_millis(100);

impl ProgressBar {
    /// Shown on stderr when it is a terminal, unless `--no-progress`.
    pub(super) fn for_stderr(args: &BenchArgs) -> ProgressBar {
        ProgressBar {
            show: !args.no_progress && std::io::stderr().is_terminal(),
            current: None,
        }
    }
}

impl Observer for ProgressBar {
    fn job_started(&mut self, label: &str, config: &RunConfig, done: Arc<AtomicU64>) {
        if !self.show {
            return;
        }
        let duration = config.duration;
        let bar = match duration {
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
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = stop.clone();
        let drawing = std::thread::spawn(move || {
            let started = std::time::Instant::now();
            while !stopped.load(Relaxed) {
                let n = done.load(Relaxed);
                let rate = n as f64 / started.elapsed().as_secs_f64().max(1e-9);
                bar.set_position(match duration {
                    Some(_) => started.elapsed().as_secs(),
                    None => n,
                });
                bar.set_message(format!("{rate:.0} calls/s"));
                std::thread::sleep(PROGRESS_TICK);
            }
            bar.finish_and_clear();
        });
        self.current = Some((stop, drawing));
    }

    fn job_finished(&mut self) {
        if let Some((stop, drawing)) = self.current.take() {
            stop.store(true, Relaxed);
            let _ = drawing.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn arguments() {
        BenchArgs::command().debug_assert();
        let args =
            BenchArgs::try_parse_from(["rpcbench", "--transports", "tcp,curl-fresh", "-c", "8"])
                .unwrap();
        assert_eq!(
            args.transports,
            ["tcp", "curl-fresh"].map(|n| TransportKind::from_name(n).unwrap())
        );
        assert_eq!(args.run_config().concurrency, 8);
        assert_eq!(
            BenchArgs::try_parse_from(["rpcbench"])
                .unwrap()
                .transports
                .len(),
            TransportKind::by_default().len(),
            "every default transport by default"
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
