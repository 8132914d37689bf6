//! `rpcbench agent`: the command line of [`crate::agent`].

use super::{EXIT_OK, parse_positive_duration};
use crate::agent::{self, AgentConfig, peers::PeerSource};
use crate::resolve::{AddrMode, Family, ResolverAddr};
use crate::transport::TransportKind;
use anyhow::Context;
use std::io::Write;
use std::net::SocketAddr;
use std::time::Duration;

/// Probes every peer of a list over a few transports, all the time, at a low rate, and
/// serves the results on GET /metrics for Prometheus (fleet mode: every pair of hosts).
///
/// Prints `listening metrics ADDR` once it serves. Runs until SIGTERM or SIGINT, then
/// exits 0 (its exit statuses are in [`super::manuals::EXTRAS`]).
#[derive(Debug, clap::Args)]
pub struct AgentArgs {
    /// The peer list: a YAML file (read again when it changes) or an http:// URL (fetched
    /// again every --reload). A list of {name, address, tcp_port, http_port, labels}.
    #[arg(long, value_name = "FILE|URL", value_parser = PeerSource::parse)]
    pub peers: PeerSource,
    /// Where GET /metrics is served.
    #[arg(long, value_name = "ADDR", default_value = "0.0.0.0:9464")]
    pub listen: SocketAddr,
    /// Transports each peer is probed over, comma-separated (tcp, tcp-connect,
    /// http-fresh, http-keepalive).
    #[arg(long, value_name = "LIST", value_enum, value_delimiter = ',', default_values = agent::DEFAULT_TRANSPORTS, value_parser = parse_probe_transport)]
    pub transports: Vec<TransportKind>,
    /// Time between two probes of one peer over one transport (the first one at a random
    /// point of the first interval, so a fleet does not probe in lockstep).
    #[arg(long, value_name = "DURATION", default_value = "1s", value_parser = parse_positive_duration)]
    pub interval: Duration,
    /// Longest a probe may take before it counts as lost; at most --interval (default:
    /// the interval, at most 1 s).
    #[arg(long, value_name = "DURATION", value_parser = parse_positive_duration)]
    pub timeout: Option<Duration>,
    /// How peers given as DNS names are resolved: ip (once, when the list is read),
    /// system (getaddrinfo), cached or uncached (hickory) at every new connection. IP
    /// literals are used as they are (mode="ip").
    #[arg(long, value_name = "MODE", value_enum, default_value_t = AddrMode::System)]
    pub names: AddrMode,
    /// DNS server (IP:PORT) for the cached and uncached modes (default: resolv.conf's).
    #[arg(long, value_name = "IP:PORT")]
    pub resolver: Option<SocketAddr>,
    /// Address family to look up: 4, 6 or any.
    #[arg(long, value_name = "FAMILY", value_enum, default_value = "4")]
    pub family: Family,
    /// How often the peer list is read again (a file is parsed again only when its
    /// content changed; a bad list is logged once and the last good one stays).
    #[arg(long, value_name = "DURATION", default_value = "5s", value_parser = parse_positive_duration)]
    pub reload: Duration,
    /// Most peers a list may have (a longer list is refused whole), at most 10000.
    #[arg(long, value_name = "N", default_value_t = agent::DEFAULT_MAX_PEERS, value_parser = parse_max_peers)]
    pub max_peers: usize,
    /// Most probe calls under way at once; a probe due while this many are is skipped
    /// and counted (rpcbench_agent_probes_skipped_total), never queued.
    #[arg(long, value_name = "N", default_value_t = agent::DEFAULT_MAX_IN_FLIGHT, value_parser = parse_max_in_flight)]
    pub max_in_flight: usize,
    /// Largest reply payload a probe accepts (KiB/MiB suffixes; default: the probe's own
    /// echo, 64 bytes). A larger reply is not read on, and the probe is counted as an
    /// error of kind `reply_above_max`.
    #[arg(long, value_name = "BYTES", value_parser = super::parse_bytes)]
    pub max_reply: Option<u32>,
}

/// One transport the agent can probe with.
fn parse_probe_transport(text: &str) -> Result<TransportKind, String> {
    match TransportKind::from_name(text) {
        Some(kind) if kind.agent_probes() => Ok(kind),
        _ => {
            // The list the registry answers: it cannot drift from what is admitted.
            let probes: Vec<&str> = TransportKind::ALL
                .into_iter()
                .filter(|k| k.agent_probes())
                .map(TransportKind::name)
                .collect();
            Err(format!(
                "{text:?} is not a probe transport ({})",
                probes.join(", ")
            ))
        }
    }
}

/// `--max-peers`: from 1 to [`agent::MAX_PEERS`].
fn parse_max_peers(text: &str) -> Result<usize, String> {
    match text.trim().parse::<usize>() {
        Ok(n) if (1..=agent::MAX_PEERS).contains(&n) => Ok(n),
        _ => Err(format!(
            "{text:?} is not a peer count from 1 to {}",
            agent::MAX_PEERS
        )),
    }
}

/// `--max-in-flight`: from 1 to 100,000 (far above what one thread could have under way).
fn parse_max_in_flight(text: &str) -> Result<usize, String> {
    match text.trim().parse::<usize>() {
        Ok(n) if (1..=100_000).contains(&n) => Ok(n),
        _ => Err(format!("{text:?} is not a call count from 1 to 100000")),
    }
}

impl AgentArgs {
    /// The agent these arguments describe, or why they do not fit together.
    pub fn config(&self) -> Result<AgentConfig, String> {
        let timeout = self
            .timeout
            .unwrap_or(self.interval.min(Duration::from_secs(1)));
        if timeout > self.interval {
            return Err(format!(
                "--timeout {timeout:?} is longer than --interval {:?}: calls to a dead peer would pile up",
                self.interval
            ));
        }
        Ok(AgentConfig {
            peers: self.peers.clone(),
            listen: self.listen,
            transports: self.transports.clone(),
            interval: self.interval,
            timeout,
            mode: self.names,
            family: self.family,
            resolver: self.resolver.map_or(ResolverAddr::System, ResolverAddr::At),
            reload: self.reload,
            max_peers: self.max_peers,
            max_in_flight: self.max_in_flight,
            max_reply: self.max_reply,
        })
    }
}

/// Runs the agent until a stop signal.
pub fn agent(args: &AgentArgs) -> anyhow::Result<u8> {
    let config = match args.config() {
        Ok(config) => config,
        Err(why) => {
            return Err(super::UsageError {
                kind: clap::error::ErrorKind::ArgumentConflict,
                why: why.to_string(),
            }
            .into());
        }
    };
    agent::run(config, |addr| {
        // Whoever started us reads this line to learn the port (with --listen ...:0).
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "listening metrics {addr}");
        let _ = out.flush();
    })
    .context("rpcbench agent")?;
    Ok(EXIT_OK)
}
