//! One probe of one listener: connect, the exchange its protocol makes (a frame, a
//! datagram, `GET /healthz` and `/stats`), and what the bytes that came back say.

use super::h2;
use super::{
    Address, Listener, MAX_PROBE_REPLY, PREFLIGHT_TIMEOUT, PROBE_REPLY_LEN, PROBE_SEQ, Probe,
    Reply, SHOWN_BYTES, Seen, ServerIdentity, UDP_PROBES,
};
use crate::transport::tls::{Alpn, Security, TlsClient, TlsFailure, looks_like_tls};
use crate::transport::{CallError, ConnectFailure};
use crate::wire::{self, LEN_PREFIX, Request, Response};
use std::io::{ErrorKind, Read, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpStream, UdpSocket};
use std::time::Instant;

/// One listener's probe: `Ok` with the server's identity when it was read (the HTTP
/// listeners), else what was seen.
pub(super) fn probe_one(
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
        (Address::Socket(addr), Listener::Quic) => {
            quic_exchange(*addr, tls, probe.h3).map(|()| None)
        }
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
pub(super) fn connect(addr: SocketAddr) -> Result<TcpStream, Seen> {
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
pub(super) fn probe_request() -> Request {
    Request {
        seq: PROBE_SEQ,
        reply_len: Some(PROBE_REPLY_LEN),
        delay_us: 0,
        payload: vec![0; PROBE_REPLY_LEN as usize],
    }
}

/// True when `reply` is rpcbench-echo's answer to [`probe_request`].
pub(super) fn is_probe_reply(reply: &Response) -> bool {
    reply.seq == PROBE_SEQ
        && reply.status == wire::Status::Ok as u8
        && reply.payload.len() == PROBE_REPLY_LEN as usize
        && wire::is_pattern(PROBE_SEQ, &reply.payload)
}

/// What a reply that is not ours was, from its first bytes.
pub(super) fn not_ours(bytes: &[u8]) -> Seen {
    if looks_like_tls(bytes) {
        return Seen::NotEcho(Reply::Tls);
    }
    if let Some(status) = http_status(bytes) {
        return Seen::NotEcho(Reply::Http { status });
    }
    Seen::NotEcho(Reply::Bytes(bytes[..bytes.len().min(SHOWN_BYTES)].to_vec()))
}

/// The status of an HTTP/1.x status line at the start of `bytes`, when there is one.
pub(super) fn http_status(bytes: &[u8]) -> Option<u16> {
    let line = bytes.strip_prefix(b"HTTP/")?;
    let text = std::str::from_utf8(&line[..line.len().min(12)]).ok()?;
    text.split_whitespace().nth(1)?.parse().ok()
}

/// What a failed read means, given the bytes read before it.
pub(super) fn read_failed(e: &std::io::Error, read: &[u8]) -> Seen {
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
pub(super) fn read_until<S: Read>(
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
pub(super) fn frame_exchange<S: Read + Write>(mut stream: S) -> Result<(), Seen> {
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

/// Opens a QUIC connection (TLS 1.3 with the run's CA; ALPN `h3` when `h3`, else
/// `rpcbench`), makes the probe on a stream of its own (HTTP/3's `POST /echo`, or a frame)
/// and checks the reply.
fn quic_exchange(addr: SocketAddr, tls: Option<&TlsClient>, h3: bool) -> Result<(), Seen> {
    let tls = tls.ok_or(Seen::Tls(TlsFailure::Other))?;
    let tls = TlsClient::new(Security::Tls13, tls.host(), tls.options())
        .map_err(|e| Seen::Unreachable(e.to_string()))?;
    let request = probe_request();
    let call = crate::transport::Call {
        seq: request.seq,
        payload: &request.payload,
        reply_len: request.reply_len,
        delay_us: 0,
        max_reply: MAX_PROBE_REPLY,
        rpc: None,
    };
    let probe = if h3 {
        crate::transport::h3_probe
    } else {
        crate::transport::quic_probe
    };
    match probe(addr, tls, &call, PREFLIGHT_TIMEOUT) {
        Ok((seq, payload)) => {
            let reply = Response {
                seq: seq.unwrap_or_default(),
                status: wire::Status::Ok as u8,
                server_ns: 0,
                payload,
            };
            if is_probe_reply(&reply) {
                Ok(())
            } else {
                Err(not_ours(&reply.payload))
            }
        }
        // No answer to the handshake: QUIC servers answer nothing to what they cannot
        // read, and a closed UDP port's refusal does not reach quinn.
        Err(CallError::Connect(ConnectFailure::TimedOut)) => Err(Seen::NoAnswer),
        Err(CallError::Connect(ConnectFailure::Refused)) => Err(Seen::Refused),
        Err(CallError::Tls(failure)) => Err(Seen::Tls(failure)),
        Err(CallError::Timeout) => Err(Seen::Silent),
        Err(CallError::Closed) => Err(Seen::Closed),
        Err(other) => Err(Seen::Unreachable(other.to_string())),
    }
}

/// Sends the probe as one datagram and checks the reply.
pub(super) fn datagram_exchange(addr: SocketAddr) -> Result<(), Seen> {
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
pub(super) struct HttpReply {
    pub(super) status: u16,
    pub(super) body: Vec<u8>,
}

/// `GET path` on a kept-alive HTTP/1.1 connection, the reply read by its
/// `Content-Length` (rpcbench-echo always sends one).
pub(super) fn http_get<S: Read + Write>(
    stream: &mut S,
    host: &str,
    path: &str,
) -> Result<HttpReply, Seen> {
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
pub(super) fn head_and_length(bytes: &[u8]) -> Option<(usize, usize)> {
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
pub(super) fn http_exchange<S: Read + Write>(
    mut stream: S,
    host: &str,
) -> Result<ServerIdentity, Seen> {
    check_health(&http_get(&mut stream, host, "/healthz")?)?;
    identity(&http_get(&mut stream, host, "/stats")?)
}

/// Whether a reply to `GET /healthz` is rpcbench-echo's: `200` and `ok`.
pub(super) fn check_health(health: &HttpReply) -> Result<(), Seen> {
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
pub(super) fn identity(stats: &HttpReply) -> Result<ServerIdentity, Seen> {
    match (stats.status, ServerIdentity::from_stats(&stats.body)) {
        (200, Some(identity)) => Ok(identity),
        _ => Err(Seen::NotEcho(Reply::NoStats)),
    }
}
