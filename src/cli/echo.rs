//! `rpcbench-echo`: the echo server's command line.
//!
//! Every flag's parser refuses what the server cannot honour, with the range it can, so a
//! bad value stops the program at once with exit status 2 and one line on stderr, before
//! anything binds. The ranges are the server's own (`server::check_*`), not copies.

use super::{EXIT_FAILED, EXIT_OK, Listen, one_line, parse_bytes, parse_duration, parse_listen};
use crate::listener::Listener;
use crate::server::dns::{self, DnsConfig};
use crate::server::tls::{CertSource, TlsSettings};
use crate::server::{self, CheckSettingError, EchoServer, SHUTDOWN_GRACE, ServerConfig};
use anyhow::Context;
use clap::{CommandFactory, Parser};
use std::io::Write;
use std::net::{IpAddr, SocketAddr};
use std::process::ExitCode;
use std::time::Duration;

/// Most runtime threads `--threads` accepts. The default is one per CPU; a thousand is far
/// past the CPUs of any machine this runs on, and more would only cost stacks and
/// scheduling (and a typo of many zeros would try to start that many threads).
pub const MAX_THREADS: usize = 1024;

/// Echo server for rpcbench: raw TCP (length-prefixed postcard frames) and HTTP on one
/// process. Unauthenticated: keep it on loopback or a private network.
#[derive(Debug, Parser)]
#[command(
    name = "rpcbench-echo",
    version,
    after_long_help = super::manuals::after_help("rpcbench-echo")
)]
pub struct EchoArgs {
    /// Raw TCP listen address (IP:PORT, port 0 = any free port), or `off`.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:7001", value_parser = parse_listen)]
    pub tcp: Listen,
    /// HTTP listen address (IP:PORT, port 0 = any free port), or `off`.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:7080", value_parser = parse_listen)]
    pub http: Listen,
    /// Unix socket path for raw frames (same protocol as --tcp). Refused when the path is
    /// anything but a stale socket; removed on exit.
    #[arg(long, value_name = "PATH")]
    pub unix: Option<std::path::PathBuf>,
    /// Mode of the --unix socket file, in octal (at most 777).
    #[arg(long, value_name = "OCTAL", default_value = "600",
          value_parser = checked(parse_octal, server::check_unix_mode))]
    pub unix_mode: u32,
    /// UDP listen address (IP:PORT, port 0 = any free port), or `off`: one request per
    /// datagram, the frame body without its length prefix.
    #[arg(long, value_name = "ADDR", default_value = "off", value_parser = parse_listen)]
    pub udp: Listen,
    /// Largest frame or HTTP body accepted, and largest reply sent (bytes; KiB/MiB
    /// suffixes; at least 4, the smallest request).
    #[arg(long, value_name = "BYTES", default_value = "16MiB",
          value_parser = checked(parse_bytes, server::check_max_frame))]
    pub max_frame: u32,
    /// Longest delay_us honoured (e.g. 10s, at most 4294s); longer asks get status 2 or
    /// HTTP 400. 0 turns delays off.
    #[arg(long, value_name = "DUR", default_value = "10s",
          value_parser = checked(parse_duration, server::check_max_delay))]
    pub max_delay: Duration,
    /// Connections open at once over all protocols (at least 1); more are closed at once
    /// and counted.
    #[arg(long, value_name = "N", default_value_t = server::DEFAULT_MAX_CONNECTIONS,
          value_parser = checked(parse_count, server::check_max_connections))]
    pub max_connections: usize,
    /// Close a connection that sends nothing for this long (e.g. 60s; at least 10ms).
    #[arg(long, value_name = "DUR", default_value = "60s",
          value_parser = checked(parse_duration, server::check_idle_timeout))]
    pub idle_timeout: Duration,
    /// Close a connection whose reply takes no byte for this long: a client that stopped
    /// reading, or an HTTP/2 window left at zero (e.g. 30s; at least 10ms).
    #[arg(long, value_name = "DUR", default_value = "30s",
          value_parser = checked(parse_duration, server::check_write_timeout))]
    pub write_timeout: Duration,
    /// Most bytes of request bodies and unsent replies held at once, over all
    /// connections (KiB/MiB suffixes; at least 64KiB); a request beyond it is refused
    /// (HTTP 503, gRPC RESOURCE_EXHAUSTED, frame status 4) and counted.
    #[arg(long, value_name = "BYTES", default_value = "64MiB",
          value_parser = checked(parse_budget, server::check_max_buffered))]
    pub max_buffered: u64,
    /// Runtime threads for HTTP, DNS, TLS and idle raw TCP connections (default: one per
    /// CPU; 1 runs them on a single thread; at most 1024). Raw TCP connections are accepted
    /// by threads of their own (up to N+1 waiting), each serving what it accepted until its
    /// first reply; each busy raw TCP connection is served by a thread of its own.
    #[arg(long, value_name = "N", value_parser = checked(parse_count, check_threads))]
    pub threads: Option<usize>,
    /// Run every server thread on these CPUs (a list as taskset writes it: 0, 1-3, 0,2),
    /// for two-machine runs whose figures should not depend on where the scheduler woke
    /// the server; CPUs outside those the process was given are refused. /stats reports
    /// the result (settings.cpu_affinity). Default: not placed.
    #[arg(long, value_name = "LIST", value_parser = crate::placement::CpuList::parse)]
    pub cpus: Option<crate::placement::CpuList>,
    /// DNS responder UDP listen address (IP:PORT, port 0 = any free port), or `off`.
    #[arg(long, value_name = "ADDR", default_value = "off", value_parser = parse_listen)]
    pub dns: Listen,
    /// The one name the DNS responder answers A/AAAA for; other names in its zone (the
    /// name's parent) get NXDOMAIN, names outside it REFUSED.
    #[arg(long, value_name = "NAME", default_value = dns::DEFAULT_DNS_NAME,
          value_parser = parse_dns_name)]
    pub dns_name: String,
    /// The address answered (default: the TCP listener's IP, or 127.0.0.1 when that is
    /// unspecified). An IPv4 address answers A queries, IPv6 AAAA.
    #[arg(long, value_name = "IP")]
    pub dns_answer: Option<std::net::IpAddr>,
    /// TTL of DNS answers, in seconds (0 = do not cache; at most 2147483647).
    #[arg(long, value_name = "SECONDS", default_value_t = dns::DEFAULT_DNS_TTL,
          value_parser = checked(parse_count, dns::check_ttl))]
    pub dns_ttl: u32,
    /// Delay every DNS answer by this long (e.g. 20ms): a slow or distant resolver.
    #[arg(long, value_name = "DUR", default_value = "0s",
          value_parser = checked(parse_duration, dns::check_delay))]
    pub dns_delay: Duration,
    /// Drop this share of DNS queries (0 to 1), spread evenly: resolver retries and timeouts.
    #[arg(long, value_name = "SHARE", default_value_t = 0.0,
          value_parser = checked(parse_share, dns::check_drop))]
    pub dns_drop: f64,
    /// Zones whose names get an authoritative NXDOMAIN, comma-separated
    /// (`svc.cluster.local,cluster.local`): a search list's misses, reproduced.
    #[arg(long, value_name = "ZONES", value_delimiter = ',', value_parser = parse_dns_zone)]
    pub dns_nxdomain_zone: Vec<String>,
    /// Drop every query of these types, comma-separated (`AAAA`: a resolver that drops
    /// AAAA, which costs a client its whole timeout).
    #[arg(long, value_name = "TYPES", value_delimiter = ',', value_parser = parse_record_type)]
    pub dns_drop_type: Vec<hickory_proto::rr::RecordType>,
    /// Delay answers to one query type, `TYPE=DUR` (`AAAA=200ms`), instead of --dns-delay;
    /// repeat for more types.
    #[arg(long, value_name = "TYPE=DUR", value_parser = parse_type_delay)]
    pub dns_delay_type: Vec<(hickory_proto::rr::RecordType, Duration)>,
    /// Send UDP answers that hold records truncated (TC set, no records), so that clients
    /// ask again over TCP (served on the same port).
    #[arg(long)]
    pub dns_truncate: bool,
    /// Raw frames over TLS listen address (IP:PORT, port 0 = any free port), or `off`:
    /// the --tcp protocol inside TLS 1.2 or 1.3.
    #[arg(long, value_name = "ADDR", default_value = "off", value_parser = parse_listen)]
    pub tls: Listen,
    /// HTTPS listen address (IP:PORT), or `off`: HTTP/1.1 and HTTP/2 chosen by ALPN, gRPC
    /// included, over TLS 1.2 or 1.3.
    #[arg(long, value_name = "ADDR", default_value = "off", value_parser = parse_listen)]
    pub https: Listen,
    /// QUIC listen address (UDP, IP:PORT), or `off`: TLS 1.3 built in, with the TLS
    /// listeners' certificate; ALPN `rpcbench` carries the raw frames of --tcp, one
    /// stream per call.
    #[arg(long, value_name = "ADDR", default_value = "off", value_parser = parse_listen)]
    pub quic: Listen,
    /// Answer every new QUIC client with a Retry first (address validation always, as a
    /// server under attack would), not only past 64 handshakes under way: each new
    /// connection then takes one more round trip.
    #[arg(long, requires = "quic")]
    pub quic_retry: bool,
    /// The TLS certificate chain (PEM, leaf first), with --key. Without both, a CA and a
    /// leaf for --dns-name, localhost and the TLS listeners' IPs (on 0.0.0.0 or ::, every
    /// address of the host) are generated at start.
    #[arg(long, value_name = "PEM", requires = "key")]
    pub cert: Option<std::path::PathBuf>,
    /// The private key of --cert (PEM: PKCS#8, PKCS#1 or SEC1).
    #[arg(long, value_name = "PEM", requires = "cert")]
    pub key: Option<std::path::PathBuf>,
    /// Where the generated CA certificate is written (PEM), for clients' --ca (default: a
    /// file in the temporary directory named after the process ID). Its path is printed
    /// as `ca PATH` after the listening lines.
    #[arg(long, value_name = "PATH", conflicts_with = "cert")]
    pub ca_out: Option<std::path::PathBuf>,
    /// Require client certificates signed by this CA (PEM) on the TLS listeners (mTLS).
    #[arg(long, value_name = "PEM")]
    pub client_ca: Option<std::path::PathBuf>,
    /// Turn TLS session resumption off (tickets, and session IDs for TLS 1.2): every
    /// handshake is then a full one.
    #[arg(long)]
    pub no_resumption: bool,
    /// Abandon (and count) a TLS handshake not finished within this long (e.g. 10s; at
    /// least 10ms).
    #[arg(long, value_name = "DUR", default_value = "10s",
          value_parser = checked(parse_duration, server::tls::check_handshake_timeout))]
    pub handshake_timeout: Duration,
    /// Log in full (time, level, module) to stderr: -v the server's debug records, -vv
    /// everything. RUST_LOG=FILTER does the same with a filter of its own.
    #[arg(short, long, action = clap::ArgAction::Count)]
    pub verbose: u8,
}

/// Checks a `--dns-nxdomain-zone` entry: a DNS name.
fn parse_dns_zone(text: &str) -> Result<String, String> {
    hickory_proto::rr::Name::from_ascii(text.trim())
        .map(|_| text.trim().to_string())
        .map_err(|e| format!("{text:?} is not a DNS name: {e}"))
}

/// Parses a DNS query type by its mnemonic (`A`, `AAAA`, `TXT`), in any case.
fn parse_record_type(text: &str) -> Result<hickory_proto::rr::RecordType, String> {
    use std::str::FromStr;
    hickory_proto::rr::RecordType::from_str(&text.trim().to_ascii_uppercase())
        .map_err(|_| format!("{text:?} is not a DNS query type (A, AAAA, ...)"))
}

/// Parses `TYPE=DUR` for `--dns-delay-type`.
fn parse_type_delay(text: &str) -> Result<(hickory_proto::rr::RecordType, Duration), String> {
    let (rtype, delay) = text
        .split_once('=')
        .ok_or_else(|| format!("{text:?} is not TYPE=DUR (AAAA=200ms)"))?;
    let delay = dns::check_delay(super::parse_duration(delay)?)
        .map_err(|e| format!("must be {}", e.allowed))?;
    Ok((parse_record_type(rtype)?, delay))
}

/// A clap value parser: `parse` reads the text, then `check` (a server's `check_*`)
/// refuses values outside its range, in the words of its allowed range.
fn checked<T: 'static>(
    parse: fn(&str) -> Result<T, String>,
    check: fn(T) -> Result<T, CheckSettingError>,
) -> impl Fn(&str) -> Result<T, String> + Clone + Send + Sync + 'static {
    move |text| check(parse(text)?).map_err(|e| format!("must be {}", e.allowed))
}

/// Parses a whole number (a count of things, or of seconds).
fn parse_count<T: std::str::FromStr>(text: &str) -> Result<T, String> {
    text.trim()
        .parse()
        .map_err(|_| format!("{text:?} is not a whole number in range"))
}

/// Parses `--max-buffered`: a byte count, as `--max-frame`.
fn parse_budget(text: &str) -> Result<u64, String> {
    parse_bytes(text).map(u64::from)
}

/// Parses a file mode in octal (`600`, `0660`).
fn parse_octal(text: &str) -> Result<u32, String> {
    u32::from_str_radix(text.trim(), 8).map_err(|_| format!("{text:?} is not an octal mode"))
}

/// Parses a share (a number; the range is checked by the caller).
fn parse_share(text: &str) -> Result<f64, String> {
    text.trim()
        .parse()
        .map_err(|_| format!("{text:?} is not a number from 0 to 1"))
}

/// Checks `--threads`: from 1 to [`MAX_THREADS`].
fn check_threads(n: usize) -> Result<usize, CheckSettingError> {
    server::within("threads", n, 1..=MAX_THREADS, || {
        format!("from 1 to {MAX_THREADS}")
    })
}

/// Checks `--dns-name` as the responder will read it.
fn parse_dns_name(text: &str) -> Result<String, String> {
    dns::check_name(text)
        .map(|()| text.to_string())
        .map_err(|e| one_line(&e.into()))
}

impl EchoArgs {
    /// The server configuration these arguments describe.
    pub fn config(&self) -> ServerConfig {
        ServerConfig {
            tcp: self.tcp.0,
            http: self.http.0,
            unix: self.unix.clone(),
            unix_mode: self.unix_mode,
            udp: self.udp.0,
            max_frame: self.max_frame,
            max_delay: self.max_delay,
            max_connections: self.max_connections,
            idle_timeout: self.idle_timeout,
            write_timeout: self.write_timeout,
            max_buffered: self.max_buffered,
            dns: self.dns.0.map(|addr| DnsConfig {
                addr,
                name: self.dns_name.clone(),
                answer: self.dns_answer,
                ttl: self.dns_ttl,
                delay: self.dns_delay,
                drop: self.dns_drop,
                nxdomain_zones: self.dns_nxdomain_zone.clone(),
                drop_types: self.dns_drop_type.clone(),
                type_delays: self.dns_delay_type.clone(),
                truncate: self.dns_truncate,
            }),
            tls: self.tls.0,
            https: self.https.0,
            quic: self.quic.0,
            quic_retry: self.quic_retry,
            tls_settings: TlsSettings {
                cert: match (&self.cert, &self.key) {
                    (Some(cert), Some(key)) => CertSource::Files {
                        cert: cert.clone(),
                        key: key.clone(),
                    },
                    _ => CertSource::Generate {
                        dns_name: self.dns_name.clone(),
                        ca_out: Some(self.ca_out.clone().unwrap_or_else(|| {
                            std::env::temp_dir()
                                .join(format!("rpcbench-echo-ca-{}.pem", std::process::id()))
                        })),
                    },
                },
                client_ca: self.client_ca.clone(),
                client_ca_pem: None,
                client_auth_optional: false,
                resumption: !self.no_resumption,
                handshake_timeout: self.handshake_timeout,
            },
        }
    }

    /// Parses the command line; a usage error is one line (see [`super::usage_line`]).
    pub fn try_parse_checked<I, T>(args: I) -> Result<EchoArgs, clap::Error>
    where
        I: IntoIterator<Item = T>,
        T: Into<std::ffi::OsString> + Clone,
    {
        let args = EchoArgs::try_parse_from(args)?;
        if args.tcp.0.is_none()
            && args.http.0.is_none()
            && args.unix.is_none()
            && args.udp.0.is_none()
            && args.tls.0.is_none()
            && args.https.0.is_none()
            && args.quic.0.is_none()
        {
            return Err(EchoArgs::command().error(
                clap::error::ErrorKind::MissingRequiredArgument,
                "every listener is off; enable --tcp or --http",
            ));
        }
        Ok(args)
    }
}

/// Builds a tokio runtime with `threads` workers (at least 1); one thread means a
/// current-thread runtime, which skips the work-stealing machinery entirely.
pub fn runtime(threads: Option<usize>) -> std::io::Result<tokio::runtime::Runtime> {
    let mut builder = match threads {
        Some(1) => tokio::runtime::Builder::new_current_thread(),
        Some(n) => {
            let mut b = tokio::runtime::Builder::new_multi_thread();
            b.worker_threads(n);
            b
        }
        None => tokio::runtime::Builder::new_multi_thread(),
    };
    // Named as the server's threads, so /stats counts their CPU (`threads_cpu`).
    builder
        .thread_name(crate::server::THREAD_NAMES[0])
        .on_thread_stop(crate::host::note_thread_end)
        // Each worker gives its free memory back as it goes idle (server::memory).
        .on_thread_park(crate::server::memory::on_park)
        .enable_all()
        .build()
}

/// Runs the server until SIGINT or SIGTERM. Exit 0 after a clean stop, 1 when it could not
/// start, 2 for bad usage; every failure is one line on stderr.
pub fn main() -> ExitCode {
    let huge_pages_off = no_huge_pages();
    let args = EchoArgs::try_parse_checked(std::env::args_os())
        .unwrap_or_else(|e| super::usage_exit("rpcbench-echo", e));
    crate::init_tracing("rpcbench-echo", args.verbose);
    if let Err(e) = huge_pages_off {
        tracing::debug!("cannot turn transparent huge pages off: {e}");
    }
    match run(args) {
        Ok(()) => ExitCode::from(EXIT_OK),
        Err(e) => {
            eprintln!("rpcbench-echo: {}", one_line(&e));
            ExitCode::from(EXIT_FAILED)
        }
    }
}

/// Turns transparent huge pages off for this process, before the server allocates.
///
/// mimalloc asks for huge pages on its arena (`MADV_HUGEPAGE`), so every 2 MiB of it that
/// is touched at all becomes resident whole: 10,000 idle connections, whose small
/// allocations are spread over the arena, then cost four times the RSS (17.7 KiB per idle
/// raw TCP connection against 4.9 KiB without, `report/server_memory.md`). The server's
/// heap is small and its time is in system calls, so huge pages bought no speed here.
/// The kernel's per-process flag rather than the `mimalloc` crate's `no_thp` feature: the
/// flag also holds where huge pages are on for every process (`always`), and needs no
/// unsafe call to mimalloc's options. A kernel without it changes nothing. Called before
/// logging is set up (which allocates), so the caller logs a failure.
fn no_huge_pages() -> nix::Result<()> {
    nix::sys::prctl::set_thp_disable(true)
}

fn run(args: EchoArgs) -> anyhow::Result<()> {
    // Before the runtime: every thread the server makes inherits the mask, and the
    // runtime's default of a thread per CPU counts the CPUs it was given.
    if let Some(cpus) = &args.cpus {
        crate::placement::confine(&cpus.0)?;
    }
    let rt = runtime(args.threads).context("cannot start the async runtime")?;
    if args.dns.0.is_some() && args.dns_ttl == 0 {
        tracing::warn!("--dns-ttl 0: answers may not be cached, so every lookup asks again");
    }
    rt.block_on(async {
        let server = EchoServer::start(args.config()).await?;
        // Watched before the listening lines are printed: whoever reads them may signal
        // at once, and a signal before the watch would kill the server uncleanly.
        let stop = Stop::watch()?;
        let mut out = std::io::stdout().lock();
        let listening = server.listening();
        for (listener, addr) in &listening {
            writeln!(out, "listening {listener} {addr}")?;
        }
        if let Some(file) = &server.unix {
            writeln!(out, "listening unix {}", file.path().display())?;
        }
        if let Some(path) = &server.ca_path {
            writeln!(
                out,
                "ca {} names {}",
                path.display(),
                server.cert_names.join(",")
            )?;
        }
        out.flush()?;
        drop(out);
        // The echo's listeners: the DNS responder serves names, not the calls a peer makes.
        let reached: Vec<(Listener, SocketAddr)> = listening
            .into_iter()
            .filter(|(l, _)| *l != Listener::Dns)
            .collect();
        // On stderr: stdout's lines are for programs (`listening`, `ca`, `totals`).
        if reached.iter().any(|(_, a)| a.ip().is_unspecified()) {
            for line in reach_block(&reached, &crate::host::interface_addrs()) {
                eprintln!("{line}");
            }
        }
        stop.wait().await;
        tracing::info!("stopping: no new connections, waiting for requests in flight");
        let (totals, drained) = server.shutdown(SHUTDOWN_GRACE).await;
        if !drained {
            tracing::warn!("grace period of {SHUTDOWN_GRACE:?} ran out; closing the rest");
        }
        // Whoever read the listening lines may be gone by now (`| head -2`): the totals are
        // then nobody's, and a stop by signal is still a clean stop, not a panic.
        let line = format!("totals {}\n", serde_json::to_string(&totals)?);
        match std::io::stdout().lock().write_all(line.as_bytes()) {
            Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e.into()),
            _ => Ok(()),
        }
    })
}

/// For listeners on an unspecified address (`0.0.0.0`, `::`), what a person starting the
/// server for another host needs: the addresses that host can call, the `rpcbench` line
/// that calls them, and the ports to open in a firewall. Empty when every listener is on
/// a given address (loopback, say): whoever chose it knows where it is.
pub fn reach_block(listeners: &[(Listener, SocketAddr)], addrs: &[IpAddr]) -> Vec<String> {
    let open: Vec<(Listener, SocketAddr)> = listeners
        .iter()
        .copied()
        .filter(|(_, a)| a.ip().is_unspecified())
        .collect();
    if open.is_empty() {
        return Vec::new();
    }
    // An IPv4 listener on 0.0.0.0 takes IPv4 only; one on `::` takes both (Linux's
    // default, IPV6_V6ONLY off).
    let v6 = open.iter().any(|(_, a)| a.is_ipv6());
    let usable: Vec<IpAddr> = addrs
        .iter()
        .copied()
        .filter(|ip| ip.is_ipv4() || v6)
        .collect();
    let Some(first) = usable.first() else {
        return vec![
            "rpcbench-echo: listening on every address, but this host has none but loopback: another host cannot call it".to_string(),
        ];
    };
    let shown: Vec<String> = usable.iter().map(IpAddr::to_string).collect();
    let mut command = format!("rpcbench --target {first}");
    let (mut tcp, mut udp) = (Vec::new(), Vec::new());
    for (name, addr) in &open {
        let port = addr.port();
        if name.over_udp() {
            udp.push(port.to_string());
        } else {
            tcp.push(port.to_string());
        }
        command.push_str(&format!(" --{name}-port {port}"));
    }
    let mut firewall = Vec::new();
    if !tcp.is_empty() {
        firewall.push(format!("tcp {}", tcp.join(", ")));
    }
    if !udp.is_empty() {
        firewall.push(format!("udp {}", udp.join(", ")));
    }
    vec![
        format!(
            "rpcbench-echo: listening on every address: another host reaches this one at {}",
            shown.join(", ")
        ),
        format!("  call it with: {command}"),
        format!("  open in a firewall: {}", firewall.join("; ")),
    ]
}

/// SIGTERM and SIGINT, watched from [`Stop::watch`] on: from then on either stops the
/// server cleanly instead of killing it.
struct Stop {
    term: tokio::signal::unix::Signal,
    int: tokio::signal::unix::Signal,
}

impl Stop {
    /// Starts watching both signals (inside the runtime).
    fn watch() -> anyhow::Result<Stop> {
        use tokio::signal::unix::{SignalKind, signal};
        Ok(Stop {
            term: signal(SignalKind::terminate()).context("cannot watch SIGTERM")?,
            int: signal(SignalKind::interrupt()).context("cannot watch SIGINT")?,
        })
    }

    /// Resolves on SIGINT or SIGTERM.
    async fn wait(mut self) {
        tokio::select! {
            _ = self.term.recv() => {}
            _ = self.int.recv() => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::{EXIT_USAGE, usage_line};

    #[test]
    fn arguments() {
        EchoArgs::command().debug_assert();
        let args =
            EchoArgs::try_parse_from(["rpcbench-echo", "--tcp", "off", "--max-frame", "1KiB"])
                .unwrap();
        assert_eq!(args.tcp, Listen(None));
        assert_eq!(args.config().max_frame, 1024);
        assert!(EchoArgs::try_parse_from(["rpcbench-echo", "--idle-timeout", "soon"]).is_err());
        assert!(EchoArgs::try_parse_from(["rpcbench-echo", "--dns-drop", "2"]).is_err());
        let dns = EchoArgs::try_parse_from([
            "rpcbench-echo",
            "--dns",
            "127.0.0.1:0",
            "--dns-delay",
            "20ms",
        ])
        .unwrap()
        .config()
        .dns
        .unwrap();
        assert_eq!(dns.delay, Duration::from_millis(20));
        assert!(
            EchoArgs::try_parse_from(["rpcbench-echo"])
                .unwrap()
                .config()
                .dns
                .is_none()
        );
    }

    #[test]
    fn the_block_for_another_host_names_addresses_command_and_ports() {
        let any = |port| SocketAddr::from(([0, 0, 0, 0], port));
        let listeners = [
            (Listener::Tcp, any(7001)),
            (Listener::Http, any(7080)),
            (Listener::Udp, any(7002)),
            (Listener::Tls, SocketAddr::from(([127, 0, 0, 1], 7443))),
        ];
        let addrs: Vec<IpAddr> = vec![
            "192.168.1.5".parse().unwrap(),
            "10.0.0.7".parse().unwrap(),
            "2001:db8::5".parse().unwrap(),
        ];
        assert_eq!(
            reach_block(&listeners, &addrs),
            [
                "rpcbench-echo: listening on every address: another host reaches this one at 192.168.1.5, 10.0.0.7",
                "  call it with: rpcbench --target 192.168.1.5 --tcp-port 7001 --http-port 7080 --udp-port 7002",
                "  open in a firewall: tcp 7001, 7080; udp 7002",
            ]
        );
        assert!(
            reach_block(&listeners[3..], &addrs).is_empty(),
            "loopback only"
        );
        let v6 = [(Listener::Tcp, SocketAddr::from(([0u16; 8], 7001)))];
        assert!(reach_block(&v6, &addrs)[0].contains("2001:db8::5"));
        assert!(reach_block(&listeners, &[])[0].contains("none but loopback"));
    }

    /// Values at the edge of each range are accepted: the ranges are not off by one.
    #[test]
    fn edge_values_are_accepted() {
        let args = EchoArgs::try_parse_checked([
            "rpcbench-echo",
            "--max-frame",
            "4",
            "--max-delay",
            "0",
            "--max-connections",
            "1",
            "--idle-timeout",
            "10ms",
            "--write-timeout",
            "10ms",
            "--max-buffered",
            "64KiB",
            "--threads",
            "1024",
            "--dns-ttl",
            "0",
            "--dns-drop",
            "1",
        ])
        .unwrap();
        assert!(args.config().check().is_ok());
        assert_eq!(args.config().idle_timeout, server::MIN_IDLE_TIMEOUT);
        assert_eq!(args.config().write_timeout, server::MIN_IDLE_TIMEOUT);
        assert_eq!(args.config().max_buffered, 64 << 10);
    }

    /// Each value the server cannot honour is a usage error of one line that names the
    /// flag and says what is allowed.
    #[test]
    fn values_without_sense_are_one_line_usage_errors() {
        for (flag, value, allowed) in [
            ("--max-frame", "0", "at least 4 bytes"),
            ("--max-frame", "3", "at least 4 bytes"),
            ("--max-delay", "4295s", "at most 4294.967295s"),
            ("--max-connections", "0", "from 1 to 2147483647"),
            ("--max-connections", "2147483648", "from 1 to 2147483647"),
            ("--idle-timeout", "0s", "at least 10ms"),
            ("--idle-timeout", "9ms", "at least 10ms"),
            ("--write-timeout", "9ms", "at least 10ms"),
            ("--max-buffered", "65535", "at least 65536 bytes"),
            ("--threads", "0", "from 1 to 1024"),
            ("--threads", "1025", "from 1 to 1024"),
            ("--dns-ttl", "2147483648", "at most 2147483647"),
            ("--dns-delay", "4295s", "at most 4294.967295s"),
            ("--dns-drop", "1.5", "from 0 to 1"),
            ("--dns-drop", "-0.1", "from 0 to 1"),
            ("--dns-drop", "NaN", "from 0 to 1"),
            ("--dns-name", "localhost", "two labels"),
            ("--dns-drop-type", "NOPE", "not a DNS query type"),
            ("--dns-delay-type", "AAAA", "TYPE=DUR"),
            ("--dns-delay-type", "AAAA=5000s", "at most"),
            ("--dns-nxdomain-zone", "a..b", "not a DNS name"),
            ("--unix-mode", "1777", "from 0 to 0777"),
            ("--unix-mode", "9", "octal"),
        ] {
            // `--flag=value`, so that a negative value is not read as a flag of its own.
            let arg = format!("{flag}={value}");
            let err = EchoArgs::try_parse_checked(["rpcbench-echo", &arg]).unwrap_err();
            assert_eq!(err.exit_code(), i32::from(EXIT_USAGE), "{flag} {value}");
            let line = usage_line(&err);
            assert!(
                line.contains(flag) && line.contains(allowed) && !line.contains('\n'),
                "{flag} {value}: {line:?}"
            );
        }
        let dns = EchoArgs::try_parse_checked([
            "rpcbench-echo",
            "--dns",
            "127.0.0.1:0",
            "--dns-drop-type",
            "aaaa,TXT",
            "--dns-delay-type",
            "A=5ms",
            "--dns-nxdomain-zone",
            "a.test,b.test",
            "--dns-truncate",
        ])
        .unwrap()
        .config()
        .dns
        .unwrap();
        use hickory_proto::rr::RecordType;
        assert_eq!(dns.drop_types, [RecordType::AAAA, RecordType::TXT]);
        assert_eq!(dns.type_delays, [(RecordType::A, Duration::from_millis(5))]);
        assert_eq!(dns.nxdomain_zones, ["a.test", "b.test"]);
        assert!(dns.truncate);
        let err = EchoArgs::try_parse_checked(["rpcbench-echo", "--tcp", "off", "--http", "off"])
            .unwrap_err();
        assert_eq!(
            usage_line(&err),
            "every listener is off; enable --tcp or --http"
        );
    }
}
