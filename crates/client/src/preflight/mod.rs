//! The check before a run against a target: one probe of each port the run needs, all at
//! once, each within [`PREFLIGHT_TIMEOUT`], telling apart what a first run between two
//! machines meets.
//!
//! - Nothing listens: the connection is refused ([`Seen::Refused`]).
//! - A firewall drops the port: no answer within the timeout ([`Seen::NoAnswer`]).
//! - Another program has the port: it accepts and says nothing ([`Seen::Silent`]), closes
//!   ([`Seen::Closed`]), or answers something that is not rpcbench-echo's answer
//!   ([`Seen::NotEcho`]): an HTTP server without `/healthz`, a TCP peer that does not
//!   answer a frame with a frame.
//! - rpcbench-echo of another version whose wire differs ([`Seen::OtherWire`]); a version
//!   that differs on the same wire is only noted ([`Preflight::server`]).
//!
//! Each probe is one call of the protocol itself, not a port scan: a raw frame asking for
//! a few bytes of the reply pattern (which a byte-echoing server cannot fake:
//! its echo of the request does not decode as that reply), `GET /healthz` then `GET /stats`
//! on one HTTP connection, one datagram, and the same inside TLS for the TLS listeners.
//! The probing returns values; `words.rs` says them, one line per case (and the warnings
//! that do not stop a run). Those lines are what the preflight's error and warnings read
//! as (their `Display`), so they live with the values rather than in `render`: the run
//! (`bench`) raises them from below the render layer.
//!
//! Layer 3 of the map in `lib.rs` (client): uses the transports and the layers below.

mod exchange;
mod h2;
mod words;
pub use crate::listener::Listener;
use exchange::{HttpReply, check_health, identity, not_ours, probe_one, read_failed};
pub use words::{problem_lines, stats_warning, version_warning};

use crate::transport::tls::{TlsClient, TlsFailure};
use crate::wire;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// How long each step of a probe (connecting, one request and its reply) may take: long
/// enough for a round trip across a continent several times over (about 150 ms), short
/// enough that a dropped port is said within a second. A link slower than that (a
/// geostationary satellite's 600 ms) needs `--no-preflight`.
pub const PREFLIGHT_TIMEOUT: Duration = Duration::from_millis(500);

/// How many probe datagrams the UDP probe sends, spread over [`PREFLIGHT_TIMEOUT`], so
/// that one datagram lost on a lossy link does not read as a port that never answers.
pub const UDP_PROBES: u32 = 3;

/// The probe's sequence number: any value works; this one reads as "rpcbench" in a dump.
const PROBE_SEQ: u64 = u64::from_be_bytes(*b"rpcbench");

/// Pattern bytes the probe frame asks for (and payload bytes it carries, so that a UDP
/// request is never smaller than its reply, which the server would refuse).
const PROBE_REPLY_LEN: u32 = 16;

/// Largest probe reply read: a frame of [`PROBE_REPLY_LEN`] pattern bytes is far below it,
/// `/stats` is a few KiB; a peer sending more is not rpcbench-echo, and is not read on.
const MAX_PROBE_REPLY: usize = 1 << 20;

/// Bytes of a reply kept to show what a peer that is not rpcbench-echo sent.
const SHOWN_BYTES: usize = 16;

/// Where a listener is: an address, or a Unix socket's path.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Address {
    Socket(SocketAddr),
    Path(PathBuf),
}

/// One listener to probe.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Probe {
    pub listener: Listener,
    pub at: Address,
    /// For an HTTP listener: probed in HTTP/2 (prior knowledge in plain, ALPN `h2` under
    /// TLS), as the run's HTTP/2 and gRPC transports speak to it, rather than HTTP/1.1.
    /// A run of both kinds probes the listener once each way.
    pub http2: bool,
    /// For the QUIC listener: probed in HTTP/3 (ALPN `h3`, `POST /echo`), as the run's
    /// HTTP/3 transports speak to it, rather than in the raw frames (ALPN `rpcbench`).
    /// A run of both kinds probes the listener once each way.
    pub h3: bool,
    /// True when a transport of the run calls it. The HTTP listener is probed even when
    /// none does, for `/stats`; its trouble then leaves the server's version and counters
    /// out of the report, and stops nothing.
    pub needed: bool,
}

/// What a probe met, when it was not rpcbench-echo of this wire.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Seen {
    /// The connection (or datagram) was refused: nothing listens there.
    Refused,
    /// Nothing came back within [`PREFLIGHT_TIMEOUT`] to the connection attempt (a
    /// firewall dropping it, or no host at that address).
    NoAnswer,
    /// No reply to any of [`UDP_PROBES`] datagrams within [`PREFLIGHT_TIMEOUT`], and no
    /// refusal. UDP has no handshake, so this cannot tell a firewall that drops the
    /// datagrams from a program that ignores the frame, or a refusal filtered on the way.
    NoDatagramReply,
    /// Connecting failed another way (no route to the host, a firewall rejecting it):
    /// the system's words.
    Unreachable(String),
    /// No Unix socket at that path.
    NoSocket,
    /// Connected, but no reply to the request within [`PREFLIGHT_TIMEOUT`].
    Silent,
    /// Connected, and the peer closed the connection without a reply.
    Closed,
    /// A reply that is not rpcbench-echo's.
    NotEcho(Reply),
    /// The TLS handshake failed.
    Tls(TlsFailure),
    /// rpcbench-echo whose wire ([`wire::WIRE_VERSION`]) differs from this client's.
    OtherWire { version: String, wire: u32 },
    /// Answers as rpcbench-echo in one HTTP version (HTTP/2 when `http2`) and not in the
    /// other, which the run needs too: a front (a proxy, a gRPC gateway) that speaks one.
    OneHttpVersion { http2: bool },
}

/// What came back instead of rpcbench-echo's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    /// An HTTP reply: to a frame, or a `GET /healthz` that was not `200 ok`.
    Http { status: u16 },
    /// `200` to `GET /healthz`, but not rpcbench-echo's `ok`.
    HealthzBody,
    /// `GET /healthz` answered `ok`, but `GET /stats` is not rpcbench-echo's JSON.
    NoStats,
    /// A TLS record to a plain request: a TLS port.
    Tls,
    /// An HTTP/1.x reply to HTTP/2's connection preface: a server of HTTP/1.1 only.
    Http1Answer { status: u16 },
    /// The TLS handshake chose no `h2` by ALPN: the server does not offer HTTP/2 there.
    NoHttp2Alpn,
    /// Anything else: its first bytes.
    Bytes(Vec<u8>),
}

/// One listener that did not pass.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    pub probe: Probe,
    pub seen: Seen,
}

impl Finding {
    /// True when the run cannot go on: a listener it calls failed, or the wire differs.
    pub fn blocks(&self) -> bool {
        self.probe.needed || matches!(self.seen, Seen::OtherWire { .. })
    }
}

/// Who answered `/stats`: its version and its wire.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerIdentity {
    /// rpcbench-echo's version.
    pub version: String,
    /// Its wire version; 0 from a server from before the field.
    pub wire: u32,
}

impl ServerIdentity {
    /// Reads the version and wire out of a `/stats` body; `None` when it is not
    /// rpcbench-echo's. Read loosely (not as this version's [`StatsSnapshot`]), so that a
    /// server of another version, whose counters may differ, is still recognised.
    ///
    /// [`StatsSnapshot`]: crate::server::stats::StatsSnapshot
    pub fn from_stats(body: &[u8]) -> Option<ServerIdentity> {
        let stats: serde_json::Value = serde_json::from_slice(body).ok()?;
        let settings = stats.get("settings")?;
        Some(ServerIdentity {
            version: settings.get("version")?.as_str()?.to_string(),
            wire: settings
                .get("wire")
                .and_then(serde_json::Value::as_u64)
                .and_then(|w| u32::try_from(w).ok())
                .unwrap_or(0),
        })
    }

    /// True when this is the client's own version.
    pub fn same_version(&self) -> bool {
        self.version == env!("CARGO_PKG_VERSION")
    }
}

/// What the preflight found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Preflight {
    /// The listeners that did not pass, in the order probed.
    pub findings: Vec<Finding>,
    /// The server's identity, from `/stats`, when it could be read.
    pub server: Option<ServerIdentity>,
    /// How long the whole check took.
    pub took: Duration,
}

impl Preflight {
    /// The findings that stop the run.
    pub fn blocking(&self) -> Vec<&Finding> {
        self.findings.iter().filter(|f| f.blocks()).collect()
    }
}

/// The `rpcbench-echo` listeners a run needs, with the addresses to bind them to on the
/// target's machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StartCommand {
    pub listeners: Vec<(Listener, Address)>,
}

impl StartCommand {
    /// The command for `listeners` (at the ports the client calls) on the machine at
    /// `target`: bound to every address (`0.0.0.0`, `::`) so another host can call it, or
    /// to the target itself when that is a loopback address (the same machine).
    pub fn new(target: IpAddr, listeners: &[(Listener, Address)]) -> StartCommand {
        let bind = match target {
            ip if ip.is_loopback() => ip,
            IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
            IpAddr::V6(_) => IpAddr::V6(Ipv6Addr::UNSPECIFIED),
        };
        let mut listeners: Vec<(Listener, Address)> = listeners
            .iter()
            .map(|(l, at)| match at {
                Address::Socket(a) => (*l, Address::Socket(SocketAddr::new(bind, a.port()))),
                path => (*l, path.clone()),
            })
            .collect();
        listeners.sort();
        listeners.dedup();
        StartCommand { listeners }
    }
}

impl std::fmt::Display for StartCommand {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("rpcbench-echo")?;
        for (listener, at) in &self.listeners {
            match at {
                Address::Socket(a) => write!(f, " --{} {a}", listener.name())?,
                Address::Path(p) => write!(f, " --{} {}", listener.name(), p.display())?,
            }
        }
        Ok(())
    }
}

/// Probes every listener of `probes` at once, each step within [`PREFLIGHT_TIMEOUT`];
/// `tls` is the client the TLS listeners are called with (`None` when none is probed).
/// `host` is what the HTTP probes send as `Host`.
pub fn check(probes: &[Probe], host: &str, tls: Option<&TlsClient>) -> Preflight {
    let started = Instant::now();
    let results: Vec<(Probe, Result<Option<ServerIdentity>, Seen>)> = std::thread::scope(|scope| {
        let running: Vec<_> = probes
            .iter()
            .map(|probe| scope.spawn(move || (probe.clone(), probe_one(probe, host, tls))))
            .collect();
        running
            .into_iter()
            .map(|r| r.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
            .collect()
    });
    let passed: Vec<Probe> = results
        .iter()
        .filter(|(_, r)| r.is_ok())
        .map(|(p, _)| p.clone())
        .collect();
    let mut preflight = Preflight::default();
    for (probe, result) in results {
        // An HTTP version failing where the other passed on the same port: a front that
        // speaks one, whatever it did with the other.
        let result = result.map_err(|seen| {
            let other = passed.iter().any(|p| {
                p.listener == probe.listener && p.at == probe.at && p.http2 != probe.http2
            });
            if other && !matches!(seen, Seen::Tls(_)) {
                Seen::OneHttpVersion {
                    http2: !probe.http2,
                }
            } else {
                seen
            }
        });
        match result {
            Ok(Some(identity)) => {
                if identity.wire != 0 && identity.wire != wire::WIRE_VERSION {
                    preflight.findings.push(Finding {
                        probe: probe.clone(),
                        seen: Seen::OtherWire {
                            version: identity.version.clone(),
                            wire: identity.wire,
                        },
                    });
                }
                preflight.server = Some(identity);
            }
            Ok(None) => {}
            Err(seen) => preflight.findings.push(Finding { probe, seen }),
        }
    }
    one_finding_per_http_port(&mut preflight.findings);
    preflight.took = started.elapsed();
    preflight
}

/// Where an HTTP port failed both ways, one finding says it: the HTTP/1.1 one, which
/// tells a program that is not rpcbench-echo best, unless it only saw a peer that closed
/// or kept silent, which the HTTP/2 one may say more of (a front that speaks only HTTP/2
/// before something else).
fn one_finding_per_http_port(findings: &mut Vec<Finding>) {
    let twin = |f: &Finding, all: &[Finding]| {
        all.iter()
            .position(|g| g.probe.at == f.probe.at && g.probe.http2 != f.probe.http2)
    };
    let mut dropped = Vec::new();
    for (i, f) in findings.iter().enumerate() {
        if f.probe.http2 || dropped.contains(&i) {
            continue;
        }
        if let Some(j) = twin(f, findings) {
            let quiet = matches!(f.seen, Seen::Closed | Seen::Silent)
                && !matches!(findings[j].seen, Seen::Closed | Seen::Silent);
            dropped.push(if quiet { i } else { j });
        }
    }
    let mut i = 0;
    findings.retain(|_| {
        i += 1;
        !dropped.contains(&(i - 1))
    });
}

#[cfg(test)]
mod tests;
