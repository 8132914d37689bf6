//! `rpcbench-echo`: the echo server's command line.

use super::{EXIT_FAILED, EXIT_OK, Listen, one_line, parse_bytes, parse_duration, parse_listen};
use crate::server::dns::DnsConfig;
use crate::server::{EchoServer, SHUTDOWN_GRACE, ServerConfig};
use anyhow::Context;
use clap::Parser;
use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

/// Echo server for rpcbench: raw TCP (length-prefixed postcard frames) and HTTP on one
/// process. Unauthenticated: keep it on loopback or a private network.
#[derive(Debug, Parser)]
#[command(name = "rpcbench-echo", version)]
pub struct EchoArgs {
    /// Raw TCP listen address (IP:PORT, port 0 = any free port), or `off`.
    #[arg(long, default_value = "127.0.0.1:7001", value_parser = parse_listen)]
    pub tcp: Listen,
    /// HTTP listen address (IP:PORT, port 0 = any free port), or `off`.
    #[arg(long, default_value = "127.0.0.1:7080", value_parser = parse_listen)]
    pub http: Listen,
    /// Largest frame or HTTP body accepted, and largest reply sent (bytes; KiB/MiB suffixes).
    #[arg(long, default_value = "16MiB", value_parser = parse_bytes)]
    pub max_frame: u32,
    /// Longest delay_us honoured (e.g. 10s); longer asks get status 2 or HTTP 400.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub max_delay: Duration,
    /// Connections open at once over all protocols; more are closed at once and counted.
    #[arg(long, default_value_t = crate::server::DEFAULT_MAX_CONNECTIONS)]
    pub max_connections: usize,
    /// Close a connection that sends nothing for this long (e.g. 60s).
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    pub idle_timeout: Duration,
    /// Runtime threads for HTTP, DNS and accepting (default: one per CPU; 1 runs them on a
    /// single thread). Each raw TCP connection is served by a thread of its own.
    #[arg(long)]
    pub threads: Option<usize>,
    /// DNS responder UDP listen address (IP:PORT, port 0 = any free port), or `off`.
    #[arg(long, default_value = "off", value_parser = parse_listen)]
    pub dns: Listen,
    /// The one name the DNS responder answers A/AAAA for; other names in its zone (the
    /// name's parent) get NXDOMAIN, names outside it REFUSED.
    #[arg(long, default_value = crate::server::dns::DEFAULT_DNS_NAME)]
    pub dns_name: String,
    /// The address answered (default: the TCP listener's IP, or 127.0.0.1 when that is
    /// unspecified). An IPv4 address answers A queries, IPv6 AAAA.
    #[arg(long)]
    pub dns_answer: Option<std::net::IpAddr>,
    /// TTL of DNS answers, in seconds.
    #[arg(long, default_value_t = crate::server::dns::DEFAULT_DNS_TTL)]
    pub dns_ttl: u32,
    /// Delay every DNS answer by this long (e.g. 20ms): a slow or distant resolver.
    #[arg(long, default_value = "0s", value_parser = parse_duration)]
    pub dns_delay: Duration,
    /// Drop this share of DNS queries (0 to 1), spread evenly: resolver retries and timeouts.
    #[arg(long, default_value_t = 0.0, value_parser = parse_fraction)]
    pub dns_drop: f64,
}

/// Parses a fraction from 0 to 1.
fn parse_fraction(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(f) if (0.0..=1.0).contains(&f) => Ok(f),
        _ => Err(format!("{text:?} is not a fraction from 0 to 1")),
    }
}

impl EchoArgs {
    /// The server configuration these arguments describe.
    pub fn config(&self) -> ServerConfig {
        ServerConfig {
            tcp: self.tcp.0,
            http: self.http.0,
            max_frame: self.max_frame.max(1),
            max_delay: self.max_delay,
            max_connections: self.max_connections,
            idle_timeout: self.idle_timeout.max(Duration::from_millis(10)),
            dns: self.dns.0.map(|addr| DnsConfig {
                addr,
                name: self.dns_name.clone(),
                answer: self.dns_answer,
                ttl: self.dns_ttl,
                delay: self.dns_delay,
                drop: self.dns_drop,
            }),
        }
    }
}

/// Builds a tokio runtime with `threads` workers; one thread means a current-thread
/// runtime, which skips the work-stealing machinery entirely.
pub fn runtime(threads: Option<usize>) -> std::io::Result<tokio::runtime::Runtime> {
    match threads {
        Some(1) => tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build(),
        Some(n) => tokio::runtime::Builder::new_multi_thread()
            .worker_threads(n.max(1))
            .enable_all()
            .build(),
        None => tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build(),
    }
}

/// Runs the server until SIGINT or SIGTERM. Exit 0 after a clean stop, 1 when it could not
/// start.
pub fn main() -> ExitCode {
    crate::init_tracing();
    let args = EchoArgs::parse();
    match run(args) {
        Ok(()) => ExitCode::from(EXIT_OK),
        Err(e) => {
            eprintln!("rpcbench-echo: {}", one_line(&e));
            ExitCode::from(EXIT_FAILED)
        }
    }
}

fn run(args: EchoArgs) -> anyhow::Result<()> {
    if args.tcp.0.is_none() && args.http.0.is_none() {
        anyhow::bail!("every listener is off; enable --tcp or --http");
    }
    let rt = runtime(args.threads).context("cannot start the async runtime")?;
    rt.block_on(async {
        let server = EchoServer::start(args.config()).await?;
        let mut out = std::io::stdout().lock();
        for (proto, addr) in [
            ("tcp", server.tcp_addr),
            ("http", server.http_addr),
            ("dns", server.dns_addr),
        ] {
            if let Some(addr) = addr {
                writeln!(out, "listening {proto} {addr}")?;
            }
        }
        out.flush()?;
        drop(out);
        wait_for_signal().await?;
        tracing::info!("stopping: no new connections, waiting for requests in flight");
        let (totals, drained) = server.shutdown(SHUTDOWN_GRACE).await;
        if !drained {
            tracing::warn!("grace period of {SHUTDOWN_GRACE:?} ran out; closing the rest");
        }
        println!("totals {}", serde_json::to_string(&totals)?);
        Ok(())
    })
}

/// Resolves on SIGINT or SIGTERM.
async fn wait_for_signal() -> anyhow::Result<()> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).context("cannot watch SIGTERM")?;
    let mut int = signal(SignalKind::interrupt()).context("cannot watch SIGINT")?;
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

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
}
