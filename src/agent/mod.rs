//! Fleet mode: `rpcbench agent`, a long-running probe of every peer in a list, with the
//! results on `GET /metrics` for Prometheus to collect (Pingmesh's design, on existing
//! engines: Prometheus stores and aggregates, Grafana draws; the agent keeps no history).
//!
//! - `peers.rs`: the peer list (YAML, file or URL), checked whole, read again on change.
//! - `metrics.rs`: per peer and transport: latency and phase histograms, calls by
//!   outcome, last success; and the exposition text.
//! - `native.rs`: the protobuf exposition, with native histograms, for a scraper that
//!   asks for it.
//!
//! Everything runs on one thread: a current-thread tokio runtime with one task per peer
//! and transport (a *prober*), the `/metrics` listener and the list reloader. Each prober
//! holds one [`AsyncTransport`](crate::transport::AsyncTransport) (the event-loop engine's, so a probe is the same call as
//! one of `rpcbench -c 10000`), makes one call per `--interval` and waits for it, so a peer
//! never has more than one call under way per transport and a dead peer costs one timeout
//! per interval. Every probe is made, timed, verified and counted by the runner's
//! `call.rs`, the code that judges every call of the client. 3,000 probes a second (1,000
//! peers, three transports) take a few percent of one core, so one thread is plenty and
//! there is nothing to lock.
//!
//! Layer 7 of the map in `lib.rs` (apps): uses the client and the layers below.

pub mod metrics;
pub mod native;
pub mod peers;
mod probe;
mod serve;
use probe::SpawnProber;
use serve::serve;

use crate::resolve::{AddrMode, Family, Names, ResolverAddr};
use crate::transport::{Endpoint, TransportKind};
use metrics::{AgentCounters, Series};
use peers::{Peer, PeerSource};
use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, SocketAddr};
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Semaphore;
use tokio::task::{AbortHandle, LocalSet};

/// Transports an agent probes unless told otherwise: the raw frame protocol on a kept
/// connection, HTTP on a kept connection, and HTTP with a connect per call, which between
/// them separate the network's round trip from connection set-up and the HTTP stack.
/// By name, as `--transports` takes them.
pub const DEFAULT_TRANSPORTS: [&str; 3] = ["tcp", "http-keepalive", "http-fresh"];

/// Default `--max-peers`: the size the memory bound (under 100 MiB) was measured at.
pub const DEFAULT_MAX_PEERS: usize = 1000;

/// Most peers `--max-peers` may allow: 10,000 peers with three transports is 30,000
/// probes a second and 20,000 open connections, about what one thread and one host's
/// port range should carry.
pub const MAX_PEERS: usize = 10_000;

/// Default `--max-in-flight`: with a timeout no longer than the interval, at most one call
/// per prober is under way, so this only bites above 333 peers with three transports all
/// timing out at once; then probes are skipped and counted rather than queued.
pub const DEFAULT_MAX_IN_FLIGHT: usize = 1000;

/// Scrape connections served at once; Prometheus uses one per target, so a few are plenty,
/// and more are closed at accept rather than left to hold memory.
const MAX_SCRAPE_CONNECTIONS: usize = 16;

/// Longest a scrape connection may take to send its request headers.
const SCRAPE_HEADER_TIMEOUT: Duration = Duration::from_secs(10);

/// Payload of every probe: small, as a health check's is, so the figure is the network's
/// round trip and not the bandwidth.
const PROBE_PAYLOAD: u32 = 64;

/// How the agent runs: the flags of `rpcbench agent`.
#[derive(Debug, Clone)]
pub struct AgentConfig {
    /// Where the peer list comes from.
    pub peers: PeerSource,
    /// Where `GET /metrics` is served.
    pub listen: SocketAddr,
    /// Transports each peer is probed over (each must have an async side and use the TCP
    /// or HTTP port).
    pub transports: Vec<TransportKind>,
    /// Time between two probes of one peer over one transport.
    pub interval: Duration,
    /// Longest a probe may take before it counts as lost; at most `interval`.
    pub timeout: Duration,
    /// How peers given as DNS names are resolved.
    pub mode: AddrMode,
    /// Address family looked up.
    pub family: Family,
    /// DNS server for modes `cached` and `uncached`.
    pub resolver: ResolverAddr,
    /// How often the peer list is read again.
    pub reload: Duration,
    /// Most peers a list may have.
    pub max_peers: usize,
    /// Most probe calls under way at once.
    pub max_in_flight: usize,
    /// The largest reply payload a probe accepts; `None`: its own echo.
    pub max_reply: Option<u32>,
}

/// Why the agent could not start.
#[derive(Debug, thiserror::Error)]
pub enum RunAgentError {
    /// The runtime could not be built.
    #[error("cannot build the agent's runtime")]
    Runtime(#[source] std::io::Error),
    /// The metrics address could not be bound.
    #[error("cannot listen on {addr}")]
    Listen {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    /// A transport the agent cannot probe with.
    #[error("the agent probes with tcp, tcp-connect, http-fresh and http-keepalive, not {0}")]
    Transport(TransportKind),
    /// A timeout longer than the interval would let calls to a dead peer pile up.
    #[error("--timeout {timeout:?} is longer than --interval {interval:?}")]
    TimeoutOverInterval {
        timeout: Duration,
        interval: Duration,
    },
    /// The signal handlers could not be installed.
    #[error("cannot install the SIGTERM handler")]
    Signal(#[source] std::io::Error),
}

/// Everything the agent's tasks share; one thread, so a `RefCell` does.
#[derive(Default)]
struct State {
    /// Series by peer name and transport, in the order `/metrics` lists them.
    series: BTreeMap<(String, TransportKind), Series>,
    /// The agent's own counters.
    counters: AgentCounters,
}

/// A running prober, and the entry it was made from (a changed entry is a new prober).
struct Prober {
    peer: Peer,
    task: AbortHandle,
}

/// Runs the agent until SIGTERM or SIGINT. `ready` is called with the bound metrics
/// address once it is listening (the CLI prints it).
pub fn run(config: AgentConfig, ready: impl FnOnce(SocketAddr)) -> Result<(), RunAgentError> {
    if let Some(&kind) = config.transports.iter().find(|k| !k.agent_probes()) {
        return Err(RunAgentError::Transport(kind));
    }
    if config.timeout > config.interval {
        return Err(RunAgentError::TimeoutOverInterval {
            timeout: config.timeout,
            interval: config.interval,
        });
    }
    // Every prober of a persistent transport keeps a socket open: 2,000 at 1,000 peers,
    // above the usual soft limit of 1,024.
    let _ = crate::runner::raise_file_limit();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(RunAgentError::Runtime)?;
    let local = LocalSet::new();
    local.block_on(&rt, agent(config, ready))
}

/// The agent's main task: listener, first list, then reloads until a stop signal.
async fn agent(config: AgentConfig, ready: impl FnOnce(SocketAddr)) -> Result<(), RunAgentError> {
    use tokio::signal::unix::{SignalKind, signal};
    let listener = tokio::net::TcpListener::bind(config.listen)
        .await
        .map_err(|source| RunAgentError::Listen {
            addr: config.listen,
            source,
        })?;
    let addr = listener
        .local_addr()
        .map_err(|source| RunAgentError::Listen {
            addr: config.listen,
            source,
        })?;
    let mut term = signal(SignalKind::terminate()).map_err(RunAgentError::Signal)?;
    let mut int = signal(SignalKind::interrupt()).map_err(RunAgentError::Signal)?;
    let state = Rc::new(RefCell::new(State::default()));
    let scrapes = tokio::task::spawn_local(serve(listener, state.clone()));
    ready(addr);

    let config = Rc::new(config);
    let gate = Rc::new(Semaphore::new(config.max_in_flight));
    let mut probers: BTreeMap<(String, TransportKind), Prober> = BTreeMap::new();
    // The text of the last list read, good or bad: a list is parsed again only when it
    // changed, so a bad one is logged once, not at every poll.
    let mut last_text: Option<String> = None;
    let mut reload = tokio::time::interval(config.reload);
    reload.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = term.recv() => break,
            _ = int.recv() => break,
            _ = reload.tick() => {
                let text = match config.peers.fetch(config.reload.max(config.timeout)).await {
                    Ok(text) => text,
                    Err(e) => {
                        // Logged once per kind of failure in a row, as a changed text is.
                        let seen = format!("\0{e}");
                        if last_text.as_deref() != Some(seen.as_str()) {
                            tracing::warn!("peer list {}: {e}; keeping the last good list", config.peers);
                            state.borrow_mut().counters.reloads_failed += 1;
                            last_text = Some(seen);
                        }
                        continue;
                    }
                };
                if last_text.as_deref() == Some(text.as_str()) {
                    continue;
                }
                match peers::parse(&text, config.max_peers) {
                    Ok(list) => {
                        apply(&config, &state, &gate, &mut probers, list).await;
                        state.borrow_mut().counters.reloads_ok += 1;
                    }
                    Err(e) => {
                        tracing::warn!("peer list {}: {e}; keeping the last good list", config.peers);
                        state.borrow_mut().counters.reloads_failed += 1;
                    }
                }
                last_text = Some(text);
            }
        }
    }
    // Stopping: no call is waited for (a probe has no one waiting on its answer); the
    // sockets close as the tasks and the runtime drop.
    for prober in probers.values() {
        prober.task.abort();
    }
    scrapes.abort();
    Ok(())
}

/// Makes the running probers match `list`: stops those of removed or changed entries
/// (their series go from `/metrics` with them), starts those of new ones.
async fn apply(
    config: &Rc<AgentConfig>,
    state: &Rc<RefCell<State>>,
    gate: &Rc<Semaphore>,
    probers: &mut BTreeMap<(String, TransportKind), Prober>,
    list: Vec<Peer>,
) {
    let wanted: BTreeMap<&str, &Peer> = list.iter().map(|p| (p.name.as_str(), p)).collect();
    let gone: Vec<(String, TransportKind)> = probers
        .iter()
        .filter(|((name, kind), prober)| {
            wanted.get(name.as_str()) != Some(&&prober.peer) || !config.transports.contains(kind)
        })
        .map(|(key, _)| key.clone())
        .collect();
    for key in gone {
        if let Some(prober) = probers.remove(&key) {
            prober.task.abort();
        }
        state.borrow_mut().series.remove(&key);
    }
    let running: BTreeSet<&str> = probers.keys().map(|(name, _)| name.as_str()).collect();
    let new: Vec<Peer> = list
        .iter()
        .filter(|p| !running.contains(p.name.as_str()))
        .cloned()
        .collect();
    for peer in new {
        let Some((names, mode)) = names_for(config, &peer).await else {
            continue;
        };
        let endpoint = Endpoint::with_names(names, peer.tcp_port, peer.http_port);
        for &kind in &config.transports {
            let key = (peer.name.clone(), kind);
            let mut labels: Vec<(&str, &str)> = vec![
                ("peer", &peer.name),
                ("address", &peer.address),
                ("transport", kind.name()),
                ("mode", mode.name()),
            ];
            labels.extend(peer.labels.iter().map(|(k, v)| (k.as_str(), v.as_str())));
            state
                .borrow_mut()
                .series
                .insert(key.clone(), Series::new(&labels));
            let spawn = SpawnProber {
                key: key.clone(),
                endpoint: endpoint.clone(),
                config: config.clone(),
                state: state.clone(),
                gate: gate.clone(),
            };
            let Some(task) = kind.with_async(spawn) else {
                // `run` checked every transport with `agent_probes`.
                unreachable!("{kind} has no async side");
            };
            probers.insert(
                key,
                Prober {
                    peer: peer.clone(),
                    task,
                },
            );
        }
    }
    let mut state = state.borrow_mut();
    state.counters.peers = list.len() as u64;
    state.counters.probers = probers.len() as u64;
}

/// How `peer`'s address is resolved, and the mode that is in effect: an IP literal is
/// used as it is (mode `ip`, nothing to look up, whatever `--names` says); a name is set
/// up in the configured mode off the runtime's thread, since mode `ip` resolves it once
/// there and then. `None` (logged) when resolution cannot be set up at all.
async fn names_for(config: &AgentConfig, peer: &Peer) -> Option<(Arc<Names>, AddrMode)> {
    if let Ok(ip) = peer.address.parse::<IpAddr>() {
        return Some((Arc::new(Names::fixed(ip)), AddrMode::Ip));
    }
    let (mode, family, resolver, timeout) =
        (config.mode, config.family, config.resolver, config.timeout);
    let address = peer.address.clone();
    let made = tokio::task::spawn_blocking(move || {
        Names::new_mode(mode, &address, family, resolver, timeout)
    })
    .await;
    match made {
        Ok(Ok(names)) => Some((Arc::new(names), mode)),
        Ok(Err(e)) => {
            tracing::warn!("peer {}: {e}; not probed", peer.name);
            None
        }
        Err(e) => {
            tracing::warn!("peer {}: name set-up failed: {e}; not probed", peer.name);
            None
        }
    }
}
