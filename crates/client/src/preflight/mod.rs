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

mod h2;
mod words;
pub use words::{problem_lines, stats_warning, version_warning};

use crate::transport::tls::{Alpn, TlsClient, TlsFailure, looks_like_tls};
use crate::transport::{CallError, Port, TransportKind};
use crate::wire::{self, LEN_PREFIX, Request, Response};
use std::io::{ErrorKind, Read, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpStream, UdpSocket};
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

/// One of the server's listeners, as the run needs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Listener {
    /// Raw frames over TCP (`rpcbench-echo --tcp`).
    Tcp,
    /// HTTP/1.1, HTTP/2 and gRPC (`--http`); also where `/stats` is read.
    Http,
    /// Raw frames over UDP (`--udp`).
    Udp,
    /// Raw frames over TLS (`--tls`).
    Tls,
    /// HTTP over TLS (`--https`).
    Https,
    /// Raw frames over a Unix socket (`--unix`), on this host.
    Unix,
}

impl Listener {
    /// The stable lowercase name: `rpcbench-echo`'s flag without its dashes.
    pub fn name(self) -> &'static str {
        match self {
            Listener::Tcp => "tcp",
            Listener::Http => "http",
            Listener::Udp => "udp",
            Listener::Tls => "tls",
            Listener::Https => "https",
            Listener::Unix => "unix",
        }
    }

    /// The listener a transport calls in a security mode (TLS or not).
    pub fn of(kind: TransportKind, tls: bool) -> Listener {
        match (kind.port(), tls) {
            (Port::Tcp, false) => Listener::Tcp,
            (Port::Tcp, true) => Listener::Tls,
            (Port::Http, false) => Listener::Http,
            (Port::Http, true) => Listener::Https,
            (Port::Udp, _) => Listener::Udp,
            (Port::Unix, _) => Listener::Unix,
        }
    }

    /// True for the listeners that speak raw frames.
    fn speaks_frames(self) -> bool {
        matches!(
            self,
            Listener::Tcp | Listener::Udp | Listener::Tls | Listener::Unix
        )
    }
}

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

/// One listener's probe: `Ok` with the server's identity when it was read (the HTTP
/// listeners), else what was seen.
fn probe_one(
    probe: &Probe,
    host: &str,
    tls: Option<&TlsClient>,
) -> Result<Option<ServerIdentity>, Seen> {
    match (&probe.at, probe.listener) {
        (Address::Path(path), _) => {
            let sock =
                std::os::unix::net::UnixStream::connect(path).map_err(|e| match e.kind() {
                    ErrorKind::NotFound => Seen::NoSocket,
                    ErrorKind::ConnectionRefused => Seen::Refused,
                    _ => Seen::Unreachable(e.to_string()),
                })?;
            sock.set_read_timeout(Some(PREFLIGHT_TIMEOUT))
                .and_then(|()| sock.set_write_timeout(Some(PREFLIGHT_TIMEOUT)))
                .map_err(|e| Seen::Unreachable(e.to_string()))?;
            frame_exchange(sock).map(|()| None)
        }
        (Address::Socket(addr), Listener::Udp) => datagram_exchange(*addr).map(|()| None),
        (Address::Socket(addr), listener) => {
            let sock = connect(*addr)?;
            match (listener, tls) {
                (Listener::Http, _) if probe.http2 => h2::exchange(sock, None, host).map(Some),
                (Listener::Https, Some(tls)) if probe.http2 => {
                    h2::exchange(sock, Some(tls), host).map(Some)
                }
                (Listener::Tls | Listener::Https, Some(tls)) => {
                    let alpn = if listener == Listener::Https {
                        Alpn::Http1
                    } else {
                        Alpn::None
                    };
                    let deadline = Instant::now() + PREFLIGHT_TIMEOUT;
                    let (stream, _) =
                        tls.handshake_blocking(sock, alpn, deadline)
                            .map_err(|e| match e {
                                CallError::Tls(TlsFailure::HandshakeTimeout) => Seen::Silent,
                                CallError::Tls(failure) => Seen::Tls(failure),
                                other => Seen::Unreachable(other.to_string()),
                            })?;
                    stream
                        .sock()
                        .set_read_timeout(Some(PREFLIGHT_TIMEOUT))
                        .map_err(|e| Seen::Unreachable(e.to_string()))?;
                    if listener.speaks_frames() {
                        frame_exchange(stream).map(|()| None)
                    } else {
                        http_exchange(stream, host).map(Some)
                    }
                }
                (l, _) if l.speaks_frames() => frame_exchange(sock).map(|()| None),
                _ => http_exchange(sock, host).map(Some),
            }
        }
    }
}

/// Connects within [`PREFLIGHT_TIMEOUT`], with reads and writes bounded by it too.
fn connect(addr: SocketAddr) -> Result<TcpStream, Seen> {
    let sock =
        TcpStream::connect_timeout(&addr, PREFLIGHT_TIMEOUT).map_err(|e| match e.kind() {
            ErrorKind::ConnectionRefused => Seen::Refused,
            ErrorKind::TimedOut | ErrorKind::WouldBlock => Seen::NoAnswer,
            _ => Seen::Unreachable(e.to_string()),
        })?;
    sock.set_nodelay(true)
        .and_then(|()| sock.set_read_timeout(Some(PREFLIGHT_TIMEOUT)))
        .and_then(|()| sock.set_write_timeout(Some(PREFLIGHT_TIMEOUT)))
        .map_err(|e| Seen::Unreachable(e.to_string()))?;
    Ok(sock)
}

/// The probe request: [`PROBE_REPLY_LEN`] pattern bytes asked for, as many carried.
fn probe_request() -> Request {
    Request {
        seq: PROBE_SEQ,
        reply_len: Some(PROBE_REPLY_LEN),
        delay_us: 0,
        payload: vec![0; PROBE_REPLY_LEN as usize],
    }
}

/// True when `reply` is rpcbench-echo's answer to [`probe_request`].
fn is_probe_reply(reply: &Response) -> bool {
    reply.seq == PROBE_SEQ
        && reply.status == wire::Status::Ok as u8
        && reply.payload.len() == PROBE_REPLY_LEN as usize
        && wire::is_pattern(PROBE_SEQ, &reply.payload)
}

/// What a reply that is not ours was, from its first bytes.
fn not_ours(bytes: &[u8]) -> Seen {
    if looks_like_tls(bytes) {
        return Seen::NotEcho(Reply::Tls);
    }
    if let Some(status) = http_status(bytes) {
        return Seen::NotEcho(Reply::Http { status });
    }
    Seen::NotEcho(Reply::Bytes(bytes[..bytes.len().min(SHOWN_BYTES)].to_vec()))
}

/// The status of an HTTP/1.x status line at the start of `bytes`, when there is one.
fn http_status(bytes: &[u8]) -> Option<u16> {
    let line = bytes.strip_prefix(b"HTTP/")?;
    let text = std::str::from_utf8(&line[..line.len().min(12)]).ok()?;
    text.split_whitespace().nth(1)?.parse().ok()
}

/// What a failed read means, given the bytes read before it.
fn read_failed(e: &std::io::Error, read: &[u8]) -> Seen {
    if !read.is_empty() {
        return not_ours(read);
    }
    if let Some(failure) = TlsFailure::of_io(e) {
        return Seen::Tls(failure);
    }
    match e.kind() {
        ErrorKind::WouldBlock | ErrorKind::TimedOut => Seen::Silent,
        ErrorKind::UnexpectedEof
        | ErrorKind::ConnectionReset
        | ErrorKind::ConnectionAborted
        | ErrorKind::BrokenPipe => Seen::Closed,
        _ => Seen::Unreachable(e.to_string()),
    }
}

/// Reads into `buf` until `done` says it holds a whole reply; a read error, the end of the
/// stream, a reply above [`MAX_PROBE_REPLY`] or one still incomplete after
/// [`PREFLIGHT_TIMEOUT`] (each read is bounded by it too, so a peer dribbling bytes holds
/// the probe for twice that at most) is what was seen.
fn read_until<S: Read>(
    stream: &mut S,
    buf: &mut Vec<u8>,
    done: impl Fn(&[u8]) -> Result<bool, Seen>,
) -> Result<(), Seen> {
    let deadline = Instant::now() + PREFLIGHT_TIMEOUT;
    let mut chunk = [0u8; 4096];
    while !done(buf)? {
        if buf.len() > MAX_PROBE_REPLY {
            return Err(not_ours(buf));
        }
        if Instant::now() > deadline {
            return Err(if buf.is_empty() {
                Seen::Silent
            } else {
                not_ours(buf)
            });
        }
        match stream.read(&mut chunk) {
            Ok(0) if buf.is_empty() => return Err(Seen::Closed),
            Ok(0) => return Err(not_ours(buf)),
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(read_failed(&e, buf)),
        }
    }
    Ok(())
}

/// Sends the probe frame and checks the reply frame.
fn frame_exchange<S: Read + Write>(mut stream: S) -> Result<(), Seen> {
    let mut request = Vec::new();
    wire::encode_frame(&probe_request(), &mut request);
    if let Err(e) = stream.write_all(&request).and_then(|()| stream.flush()) {
        return Err(read_failed(&e, &[]));
    }
    let mut buf = Vec::new();
    read_until(&mut stream, &mut buf, |b| {
        let Some(prefix) = b.first_chunk::<LEN_PREFIX>() else {
            return Ok(false);
        };
        match wire::check_len(*prefix, MAX_PROBE_REPLY as u32) {
            Ok(len) => Ok(b.len() >= LEN_PREFIX + len),
            Err(_) => Err(not_ours(b)),
        }
    })?;
    match wire::decode_frame::<Response>(&buf, MAX_PROBE_REPLY as u32) {
        Ok(Some((reply, _))) if is_probe_reply(&reply) => Ok(()),
        _ => Err(not_ours(&buf)),
    }
}

/// Sends the probe as one datagram and checks the reply.
fn datagram_exchange(addr: SocketAddr) -> Result<(), Seen> {
    let local: SocketAddr = match addr.ip() {
        IpAddr::V4(_) => (Ipv4Addr::UNSPECIFIED, 0).into(),
        IpAddr::V6(_) => (Ipv6Addr::UNSPECIFIED, 0).into(),
    };
    let wait = PREFLIGHT_TIMEOUT / UDP_PROBES;
    let sock = UdpSocket::bind(local)
        .and_then(|s| s.connect(addr).map(|()| s))
        .and_then(|s| s.set_read_timeout(Some(wait)).map(|()| s))
        .map_err(|e| Seen::Unreachable(e.to_string()))?;
    let request = postcard::to_allocvec(&probe_request()).expect("a Vec takes any message");
    let mut buf = vec![0u8; wire::MAX_UDP_PAYLOAD];
    for _ in 0..UDP_PROBES {
        // An ICMP port unreachable from an earlier datagram can fail the send itself.
        sock.send(&request).map_err(|e| match e.kind() {
            ErrorKind::ConnectionRefused => Seen::Refused,
            _ => Seen::Unreachable(e.to_string()),
        })?;
        match sock.recv(&mut buf) {
            Ok(n) => {
                return match wire::decode_body::<Response>(&buf[..n]) {
                    Ok(reply) if is_probe_reply(&reply) => Ok(()),
                    _ => Err(not_ours(&buf[..n])),
                };
            }
            // Linux hands a connected UDP socket the ICMP port unreachable as this error.
            Err(e) if e.kind() == ErrorKind::ConnectionRefused => return Err(Seen::Refused),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(e) => return Err(Seen::Unreachable(e.to_string())),
        }
    }
    Err(Seen::NoDatagramReply)
}

/// One HTTP/1.1 reply: its status and body.
struct HttpReply {
    status: u16,
    body: Vec<u8>,
}

/// `GET path` on a kept-alive HTTP/1.1 connection, the reply read by its
/// `Content-Length` (rpcbench-echo always sends one).
fn http_get<S: Read + Write>(stream: &mut S, host: &str, path: &str) -> Result<HttpReply, Seen> {
    let request =
        format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nUser-Agent: rpcbench-preflight\r\n\r\n");
    if let Err(e) = stream
        .write_all(request.as_bytes())
        .and_then(|()| stream.flush())
    {
        return Err(read_failed(&e, &[]));
    }
    let mut buf = Vec::new();
    read_until(stream, &mut buf, |b| {
        if !b.is_empty() && !b"HTTP/".starts_with(&b[..b.len().min(5)]) {
            return Err(not_ours(b));
        }
        Ok(head_and_length(b).is_some_and(|(head, len)| b.len() >= head + len))
    })?;
    let (head, len) = head_and_length(&buf).expect("read_until stopped on a whole reply");
    let status = http_status(&buf).ok_or_else(|| not_ours(&buf))?;
    Ok(HttpReply {
        status,
        body: buf[head..head + len].to_vec(),
    })
}

/// The length of a reply's head and its `Content-Length` (0 without one), once the whole
/// head is in `bytes`.
fn head_and_length(bytes: &[u8]) -> Option<(usize, usize)> {
    let head = bytes.windows(4).position(|w| w == b"\r\n\r\n")? + 4;
    let text = String::from_utf8_lossy(&bytes[..head]);
    let len = text
        .lines()
        .filter_map(|l| l.split_once(':'))
        .find(|(name, _)| name.trim().eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.trim().parse().ok())
        .unwrap_or(0);
    Some((head, len))
}

/// `GET /healthz` then `GET /stats`, on one HTTP/1.1 connection: rpcbench-echo's
/// identity.
fn http_exchange<S: Read + Write>(mut stream: S, host: &str) -> Result<ServerIdentity, Seen> {
    check_health(&http_get(&mut stream, host, "/healthz")?)?;
    identity(&http_get(&mut stream, host, "/stats")?)
}

/// Whether a reply to `GET /healthz` is rpcbench-echo's: `200` and `ok`.
fn check_health(health: &HttpReply) -> Result<(), Seen> {
    if health.status != 200 {
        return Err(Seen::NotEcho(Reply::Http {
            status: health.status,
        }));
    }
    if health.body.trim_ascii() != b"ok" {
        return Err(Seen::NotEcho(Reply::HealthzBody));
    }
    Ok(())
}

/// The server's identity from a reply to `GET /stats`.
fn identity(stats: &HttpReply) -> Result<ServerIdentity, Seen> {
    match (stats.status, ServerIdentity::from_stats(&stats.body)) {
        (200, Some(identity)) => Ok(identity),
        _ => Err(Seen::NotEcho(Reply::NoStats)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_binds_every_address_for_another_host_and_loopback_for_this_one() {
        let listeners = [
            (
                Listener::Http,
                Address::Socket(([10, 0, 0, 2], 7080).into()),
            ),
            (Listener::Tcp, Address::Socket(([10, 0, 0, 2], 7001).into())),
        ];
        assert_eq!(
            StartCommand::new([10, 0, 0, 2].into(), &listeners).to_string(),
            "rpcbench-echo --tcp 0.0.0.0:7001 --http 0.0.0.0:7080"
        );
        assert_eq!(
            StartCommand::new([127, 0, 0, 1].into(), &listeners).to_string(),
            "rpcbench-echo --tcp 127.0.0.1:7001 --http 127.0.0.1:7080"
        );
        assert_eq!(
            StartCommand::new("fd00::2".parse().unwrap(), &listeners[1..]).to_string(),
            "rpcbench-echo --tcp [::]:7001"
        );
    }

    #[test]
    fn replies_that_are_not_ours_are_told_apart() {
        assert_eq!(not_ours(b"\x15\x03\x03\x00\x02"), Seen::NotEcho(Reply::Tls));
        assert_eq!(
            not_ours(b"HTTP/1.1 400 Bad Request\r\n"),
            Seen::NotEcho(Reply::Http { status: 400 })
        );
        assert_eq!(
            not_ours(b"SSH-2.0-OpenSSH_9.2p1 Debian"),
            Seen::NotEcho(Reply::Bytes(b"SSH-2.0-OpenSSH_".to_vec()))
        );
    }

    /// A server that echoes bytes back sends the probe request itself, which does not
    /// decode as the reply asked for: the pattern request is what tells it apart.
    #[test]
    fn an_echo_of_the_probe_is_not_its_reply() {
        let request = postcard::to_allocvec(&probe_request()).unwrap();
        let as_reply = wire::decode_body::<Response>(&request);
        assert!(as_reply.is_err() || !is_probe_reply(&as_reply.unwrap()));
        let mut pattern = Vec::new();
        wire::pattern(PROBE_SEQ, PROBE_REPLY_LEN as usize, &mut pattern);
        assert!(is_probe_reply(&Response {
            seq: PROBE_SEQ,
            status: 0,
            server_ns: 1,
            payload: pattern,
        }));
    }

    #[test]
    fn identity_is_read_loosely_from_stats() {
        let id = ServerIdentity::from_stats(br#"{"settings":{"version":"0.0.9"},"tcp":{}}"#);
        assert_eq!(
            id,
            Some(ServerIdentity {
                version: "0.0.9".into(),
                wire: 0
            })
        );
        let id = ServerIdentity::from_stats(br#"{"settings":{"version":"9.0.0","wire":7}}"#);
        assert_eq!(id.map(|i| i.wire), Some(7));
        assert_eq!(ServerIdentity::from_stats(b"{\"status\":\"ok\"}"), None);
        assert_eq!(ServerIdentity::from_stats(b"<html>"), None);
    }

    #[test]
    fn heads_are_read_by_their_length() {
        let reply = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok";
        assert_eq!(head_and_length(reply), Some((reply.len() - 2, 2)));
        assert_eq!(head_and_length(b"HTTP/1.1 200 OK\r\n"), None);
        assert_eq!(http_status(b"HTTP/1.0 404 Not Found"), Some(404));
        assert_eq!(http_status(b"GET / HTTP/1.1"), None);
    }
}
