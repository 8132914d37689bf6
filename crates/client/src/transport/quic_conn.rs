//! What the QUIC transports share: a worker's client endpoint (one UDP socket and quinn's
//! connection state, driven by the worker's own runtime), the handshake that opens a
//! connection, and one call on a stream of its own.
//!
//! QUIC has no plaintext: every connection runs TLS 1.3 with the run's CA (a run in
//! `plain` runs the QUIC transports as `tls13`, and their rows say so). The handshake is
//! the call's `handshake` phase; there is no separate connect or TLS phase, since QUIC's
//! one round trip carries both. Under `tls13-0rtt` the request goes in early data when a
//! session ticket is at hand ([`QuicClient::connect`]). A call opens a bidirectional stream, sends one request frame (the raw
//! frames of `tcp`) and finishes its side; the reply is one response frame, then the
//! server's end of the stream.

use super::tcp::{encode_request, reply_of};
use super::tls::{Alpn, TlsFailure};
use super::{Call, CallError, ConnectFailure, Endpoint, OpenTransportError, Phases, Reply};
use crate::wire::{self, LEN_PREFIX, RESPONSE_OVERHEAD};
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

/// The stream error code a client uses when it gives up on a reply (too large, or late).
const CANCELLED: u32 = 1;

/// What `quic` and `quic-connect` hold for one worker: where the calls go, the client,
/// and the connection while it is kept. `FRESH` opens a connection per call and closes it
/// inside the call (`quic-connect`); otherwise the first call's connection is kept.
pub(super) struct QuicWorker<const FRESH: bool> {
    endpoint: Endpoint,
    timeout: Duration,
    client: QuicClient,
    conn: Option<quinn::Connection>,
    connects: u64,
}

impl<const FRESH: bool> QuicWorker<FRESH> {
    /// A worker with its runtime; nothing connects until the first call.
    pub fn open(endpoint: Endpoint, timeout: Duration) -> Result<Self, OpenTransportError> {
        Ok(QuicWorker {
            endpoint,
            timeout,
            client: QuicClient::new(Alpn::None)?,
            conn: None,
            connects: 0,
        })
    }

    /// Makes `call`, on the kept connection or, for a fresh worker, a new one.
    pub fn call(&mut self, call: &Call, phases: &mut Phases) -> Result<Reply<'_>, CallError> {
        let deadline = Instant::now() + self.timeout;
        if FRESH {
            self.reset();
        }
        let conn = match &self.conn {
            Some(conn) => conn.clone(),
            None => {
                let conn = self.client.connect(&self.endpoint, deadline, phases)?;
                self.connects += 1;
                self.conn.insert(conn).clone()
            }
        };
        self.client.exchange(&conn, call, deadline, phases)
    }

    /// Closes the connection, if one is open.
    pub fn reset(&mut self) {
        if let Some(conn) = self.conn.take() {
            self.client.close(conn);
        }
    }

    /// Connections opened so far, and their early data.
    pub fn counts(&self) -> super::Counts {
        self.client.counts(self.connects)
    }
}

/// Connections a `tls13-0rtt` client keeps open after their call: the server sends its
/// session tickets once the handshake is done, half a round trip after the reply to a
/// request in early data, so a connection closed at once would leave the next calls no
/// ticket. Each stays open while this many later calls are made (the tickets of one are
/// there by the one after next), then closes.
pub(super) const LINGER: usize = 2;

/// A worker's QUIC client: its runtime, its endpoint (bound on first use, for the target's
/// address family), the ALPN its connections offer and its buffers.
pub(super) struct QuicClient {
    /// The worker's runtime (or, for `h3-mux`, the run's): a call blocks on it, and it
    /// drives the endpoint.
    pub rt: Arc<tokio::runtime::Runtime>,
    alpn: Alpn,
    endpoint: Option<(quinn::Endpoint, bool)>,
    config: Option<quinn::ClientConfig>,
    out: Vec<u8>,
    body: Vec<u8>,
    /// Whether the newest connection's early data was accepted, while that is not known
    /// (a `tls13-0rtt` connection that sent its request before the handshake was done).
    early: Option<quinn::ZeroRttAccepted>,
    /// True when the connections send early data (`tls13-0rtt`): set by the first.
    early_data: bool,
    /// Connections done with their call, kept open for their tickets (`tls13-0rtt`).
    lingering: std::collections::VecDeque<(quinn::Connection, u32, Box<dyn Send>)>,
    zero_rtt_sent: u64,
    zero_rtt_accepted: u64,
    /// Retry packets the endpoint received: each made a handshake take one more round
    /// trip.
    retries: Arc<AtomicU64>,
}

impl QuicClient {
    /// A client offering `alpn` ([`Alpn::H3`], or the raw frames for any other), with a
    /// runtime of its own; nothing is bound until the first connection.
    pub fn new(alpn: Alpn) -> Result<QuicClient, OpenTransportError> {
        Ok(QuicClient::on(
            Arc::new(super::http::worker_runtime()?),
            alpn,
        ))
    }

    /// A client offering `alpn` on `rt`.
    pub fn on(rt: Arc<tokio::runtime::Runtime>, alpn: Alpn) -> QuicClient {
        QuicClient {
            rt,
            alpn,
            endpoint: None,
            config: None,
            out: Vec::new(),
            body: Vec::new(),
            early: None,
            early_data: false,
            lingering: std::collections::VecDeque::new(),
            zero_rtt_sent: 0,
            zero_rtt_accepted: 0,
            retries: Arc::new(AtomicU64::new(0)),
        }
    }

    /// What a worker of this client counts: `connects`, and the early data sent and
    /// accepted.
    pub fn counts(&self, connects: u64) -> super::Counts {
        super::Counts {
            connects,
            zero_rtt_sent: self.zero_rtt_sent,
            zero_rtt_accepted: self.zero_rtt_accepted,
            quic_retries: self.retries.load(Relaxed),
            ..super::Counts::default()
        }
    }

    /// Opens a connection to the target's QUIC port within `deadline`: the lookup (its
    /// `dns` phase, when the mode looks up) and the handshake (`handshake`). In
    /// `tls13-0rtt`, with a session ticket at hand, the connection is returned at once, for
    /// the request to go in early data (its `handshake` the time to that point); whether
    /// the server
    /// took it is known after the reply ([`QuicClient::early_refused`]).
    pub fn connect(
        &mut self,
        target: &Endpoint,
        deadline: Instant,
        phases: &mut Phases,
    ) -> Result<quinn::Connection, CallError> {
        let addr = target.quic_addr(deadline, phases)?;
        let tls = tls_of(target)?;
        if self.config.is_none() {
            self.config = Some(client_config(tls, self.alpn)?);
        }
        let endpoint = self.endpoint_for(addr)?;
        let config = self.config.clone().expect("set above");
        let early_data = tls.security().early_data();
        let started = Instant::now();
        // The connection's driver is spawned on the worker's runtime.
        let opened = (self.rt).block_on(handshake(&endpoint, config, addr, tls, deadline));
        let (conn, early) = opened?;
        phases.handshake = Some(started.elapsed());
        self.zero_rtt_sent += u64::from(early.is_some());
        self.early = early;
        self.early_data = early_data;
        Ok(conn)
    }

    /// True when the newest connection sent early data the server refused: its requests
    /// were never seen and must be sent again, now that the handshake is done. Waits for
    /// the handshake within `deadline` (right after a reply, it is done); counts the early
    /// data accepted.
    pub fn early_refused(&mut self, deadline: Instant) -> bool {
        let Some(accepted) = self.early.take() else {
            return false;
        };
        let accepted = self
            .rt
            .block_on(async { tokio::time::timeout_at(deadline.into(), accepted).await })
            .unwrap_or(false);
        self.zero_rtt_accepted += u64::from(accepted);
        !accepted
    }

    /// The endpoint for `addr`'s family, bound now if it is not yet.
    fn endpoint_for(&mut self, addr: SocketAddr) -> Result<quinn::Endpoint, CallError> {
        match &self.endpoint {
            Some((endpoint, v6)) if *v6 == addr.is_ipv6() => return Ok(endpoint.clone()),
            _ => {}
        }
        let _entered = self.rt.enter();
        let endpoint = bind(addr, &self.retries)?;
        self.endpoint = Some((endpoint.clone(), addr.is_ipv6()));
        Ok(endpoint)
    }

    /// Makes `call` on a new stream of `conn` within `deadline`: one request frame, one
    /// response frame; the time to the reply's first byte is its `first_byte` phase.
    pub fn exchange(
        &mut self,
        conn: &quinn::Connection,
        call: &Call,
        deadline: Instant,
        phases: &mut Phases,
    ) -> Result<Reply<'_>, CallError> {
        encode_request(call, &mut self.out);
        let max_body = call.max_body(RESPONSE_OVERHEAD as usize);
        let sent = Instant::now();
        let mut result = self.round_trip(conn, max_body, sent, deadline);
        if self.early_refused(deadline) {
            // The server never saw the request: once more, on the connection now open.
            result = self.round_trip(conn, max_body, sent, deadline);
        }
        phases.first_byte = Some(result?);
        reply_of(&self.body, call.rpc)
    }

    /// One request frame out on a new stream of `conn` and the reply into `self.body`;
    /// returns the time from `sent` to the reply's first byte.
    fn round_trip(
        &mut self,
        conn: &quinn::Connection,
        max_body: usize,
        sent: Instant,
        deadline: Instant,
    ) -> Result<Duration, CallError> {
        let exchange = round_trip(conn, &self.out, &mut self.body, max_body, sent);
        self.rt
            .block_on(async { tokio::time::timeout_at(deadline.into(), exchange).await })
            .map_err(|_| CallError::Timeout)?
    }

    /// Closes `conn` and lets the endpoint send the close before the next call.
    pub fn close(&mut self, conn: quinn::Connection) {
        self.close_with(conn, 0, Box::new(()));
    }

    /// Closes `conn` with the application's error `code` (HTTP/3's `H3_NO_ERROR` is
    /// 0x100, not 0); `keep` is what must live as long as the connection is open (HTTP/3's
    /// request handle: the h3 crate closes a connection whose handles are all gone).
    pub fn close_with(&mut self, conn: quinn::Connection, code: u32, keep: Box<dyn Send>) {
        let _entered = self.rt.enter();
        if self.early_data {
            // Kept open for its tickets; the oldest kept closes instead ([`LINGER`]).
            self.lingering.push_back((conn, code, keep));
            if self.lingering.len() <= LINGER {
                return;
            }
            let Some((oldest, code, keep)) = self.lingering.pop_front() else {
                return;
            };
            drop(keep);
            oldest.close(code.into(), b"");
            return;
        }
        drop(keep);
        conn.close(code.into(), b"");
    }
}

impl Drop for QuicClient {
    fn drop(&mut self) {
        // Sends the close of every connection still open, so the server does not wait
        // for its idle timer; bounded, as a server that went away will not answer.
        if let Some((endpoint, _)) = self.endpoint.take() {
            let _entered = self.rt.enter();
            endpoint.close(0u32.into(), b"");
            let idle = tokio::time::timeout(Duration::from_millis(200), endpoint.wait_idle());
            let _ = self.rt.block_on(idle);
        }
    }
}

/// The run's TLS, which a QUIC connection needs: QUIC has no plaintext, so a run without
/// TLS settings cannot make the call.
pub(super) fn tls_of(target: &Endpoint) -> Result<&super::tls::TlsClient, CallError> {
    target
        .tls
        .as_deref()
        .ok_or(CallError::Tls(TlsFailure::Other))
}

/// quinn's client configuration of the run's TLS, offering `alpn`.
pub(super) fn client_config(
    tls: &super::tls::TlsClient,
    alpn: Alpn,
) -> Result<quinn::ClientConfig, CallError> {
    let crypto = quinn::crypto::rustls::QuicClientConfig::try_from(tls.quic_config(alpn))
        .map_err(|_| CallError::Tls(TlsFailure::Other))?;
    Ok(quinn::ClientConfig::new(Arc::new(crypto)))
}

/// A client endpoint for `addr`'s family on the current runtime (its driver is spawned
/// there), its socket counting the Retries it receives into `retries`.
pub(super) fn bind(
    addr: SocketAddr,
    retries: &Arc<AtomicU64>,
) -> Result<quinn::Endpoint, CallError> {
    let local: SocketAddr = if addr.is_ipv6() {
        (std::net::Ipv6Addr::UNSPECIFIED, 0).into()
    } else {
        (std::net::Ipv4Addr::UNSPECIFIED, 0).into()
    };
    let socket = std::net::UdpSocket::bind(local).map_err(|_| CallError::Io)?;
    let runtime: Arc<dyn quinn::Runtime> = Arc::new(quinn::TokioRuntime);
    let socket = Arc::new(RetryCounting {
        inner: runtime.wrap_udp_socket(socket).map_err(|_| CallError::Io)?,
        retries: retries.clone(),
    });
    quinn::Endpoint::new_with_abstract_socket(
        quinn::EndpointConfig::default(),
        None,
        socket,
        runtime,
    )
    .map_err(|_| CallError::Io)
}

/// Opens a connection from `endpoint` to `addr` within `deadline`. In `tls13-0rtt`, with
/// a session ticket at hand, it returns at once with whether the server took the early
/// data still to come; otherwise after a full handshake.
pub(super) async fn handshake(
    endpoint: &quinn::Endpoint,
    config: quinn::ClientConfig,
    addr: SocketAddr,
    tls: &super::tls::TlsClient,
    deadline: Instant,
) -> Result<(quinn::Connection, Option<quinn::ZeroRttAccepted>), CallError> {
    let mut connecting = endpoint
        .connect_with(config, addr, tls.host())
        .map_err(|_| CallError::Connect(ConnectFailure::Other))?;
    if tls.security().early_data() {
        // Fails when no ticket is at hand: then a full handshake.
        match connecting.into_0rtt() {
            Ok((conn, accepted)) => return Ok((conn, Some(accepted))),
            Err(full) => connecting = full,
        }
    }
    let conn = tokio::time::timeout_at(deadline.into(), connecting)
        .await
        .map_err(|_| CallError::Connect(ConnectFailure::TimedOut))?
        .map_err(|e| handshake_error(&e))?;
    Ok((conn, None))
}

/// One call on a new stream of `conn`: the request frame `out`, then the reply into
/// `body` (at most `max_body` bytes); returns the time from `sent` to its first byte.
pub(super) async fn round_trip(
    conn: &quinn::Connection,
    out: &[u8],
    body: &mut Vec<u8>,
    max_body: usize,
    sent: Instant,
) -> Result<Duration, CallError> {
    let (mut send, mut recv) = conn.open_bi().await.map_err(|e| lost(&e))?;
    send.write_all(out).await.map_err(|_| CallError::Closed)?;
    // Fails only when the stream was already reset, which the read then reports.
    let _ = send.finish();
    let mut prefix = [0u8; LEN_PREFIX];
    recv.read_exact(&mut prefix).await.map_err(read_error)?;
    let first_byte = sent.elapsed();
    let len = wire::check_len(prefix, wire::DEFAULT_MAX_FRAME).map_err(|_| CallError::Protocol)?;
    if len > max_body {
        let _ = recv.stop(CANCELLED.into());
        return Err(CallError::ReplyTooLarge);
    }
    body.resize(len, 0);
    recv.read_exact(body).await.map_err(read_error)?;
    Ok(first_byte)
}

/// A client endpoint's UDP socket, counting the Retry packets it receives: quinn answers
/// them itself and does not say a connection was retried, which costs its handshake a
/// round trip (the round-trip model adds it).
#[derive(Debug)]
struct RetryCounting {
    inner: Arc<dyn quinn::AsyncUdpSocket>,
    retries: Arc<AtomicU64>,
}

impl quinn::AsyncUdpSocket for RetryCounting {
    fn create_io_poller(self: Arc<Self>) -> std::pin::Pin<Box<dyn quinn::UdpPoller>> {
        self.inner.clone().create_io_poller()
    }

    fn try_send(&self, transmit: &quinn::udp::Transmit) -> std::io::Result<()> {
        self.inner.try_send(transmit)
    }

    fn poll_recv(
        &self,
        cx: &mut std::task::Context,
        bufs: &mut [std::io::IoSliceMut<'_>],
        meta: &mut [quinn::udp::RecvMeta],
    ) -> std::task::Poll<std::io::Result<usize>> {
        let polled = self.inner.poll_recv(cx, bufs, meta);
        if let std::task::Poll::Ready(Ok(n)) = &polled {
            for (buf, m) in bufs.iter().zip(meta.iter()).take(*n) {
                let retries = (buf[..m.len].chunks(m.stride.max(1)))
                    .filter(|d| is_retry(d))
                    .count();
                self.retries.fetch_add(retries as u64, Relaxed);
            }
        }
        polled
    }

    fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.inner.local_addr()
    }

    fn max_transmit_segments(&self) -> usize {
        self.inner.max_transmit_segments()
    }

    fn max_receive_segments(&self) -> usize {
        self.inner.max_receive_segments()
    }

    fn may_fragment(&self) -> bool {
        self.inner.may_fragment()
    }
}

/// True for a QUIC version 1 Retry packet (RFC 9000 §17.2.5): a long header (first bit
/// set) of type 3, with a version that is not 0 (version negotiation).
fn is_retry(datagram: &[u8]) -> bool {
    match datagram {
        [first, version @ ..] if version.len() >= 4 => {
            first & 0x80 != 0 && (first >> 4) & 0x3 == 3 && version[..4] != [0; 4]
        }
        _ => false,
    }
}

/// One call to the QUIC listener at `addr` on a connection of its own, within `timeout`:
/// the preflight's probe (a handshake with `tls` and ALPN `rpcbench`, then `call`).
/// Returns the reply's seq and payload.
pub fn probe(
    addr: SocketAddr,
    tls: Arc<super::tls::TlsClient>,
    call: &Call,
    timeout: Duration,
) -> Result<(Option<u64>, Vec<u8>), CallError> {
    let (mut client, target) = probe_client(addr, tls, Alpn::None)?;
    let deadline = Instant::now() + timeout;
    let mut phases = Phases::default();
    let conn = client.connect(&target, deadline, &mut phases)?;
    let reply = client.exchange(&conn, call, deadline, &mut phases);
    let reply = reply.map(|r| (r.seq, r.body.to_vec()));
    client.close(conn);
    reply
}

/// A client offering `alpn` and the target at `addr` (its QUIC port), for a probe.
pub(super) fn probe_client(
    addr: SocketAddr,
    tls: Arc<super::tls::TlsClient>,
    alpn: Alpn,
) -> Result<(QuicClient, Endpoint), CallError> {
    let client = QuicClient::new(alpn).map_err(|_| CallError::Io)?;
    let target = Endpoint::new(addr, addr)
        .with_tls(Some(tls))
        .with_quic_port(addr.port());
    Ok((client, target))
}

/// A failed handshake as a call's error: a TLS alert (sent or received) is the TLS
/// failure it names; a handshake that timed out, or any other end, is a failed connect.
fn handshake_error(e: &quinn::ConnectionError) -> CallError {
    use quinn::ConnectionError as E;
    let alert = |code: quinn::TransportErrorCode| {
        let code = u64::from(code);
        (0x100..0x200).contains(&code).then(|| (code - 0x100) as u8)
    };
    let failure = |alert: u8| match alert {
        // bad_certificate, unknown_ca, certificate_unknown: our verifier refused it.
        42 | 46 | 48 => TlsFailure::Untrusted,
        45 => TlsFailure::Expired,
        116 => TlsFailure::ClientCertRequired,
        _ => TlsFailure::Other,
    };
    match e {
        E::TransportError(t) => alert(t.code).map_or(CallError::Protocol, |a| {
            // A certificate that names another host is refused with bad_certificate too;
            // rustls's reason tells them apart.
            if t.reason.contains("NotValidForName") {
                CallError::Tls(TlsFailure::WrongName)
            } else {
                CallError::Tls(failure(a))
            }
        }),
        E::ConnectionClosed(c) => match alert(c.error_code) {
            Some(a) => CallError::Tls(failure(a)),
            None => CallError::Connect(ConnectFailure::Refused),
        },
        E::TimedOut => CallError::Connect(ConnectFailure::TimedOut),
        _ => CallError::Connect(ConnectFailure::Other),
    }
}

/// A connection lost while a call was on it: the call is lost.
fn lost(e: &quinn::ConnectionError) -> CallError {
    match e {
        quinn::ConnectionError::TimedOut => CallError::Timeout,
        _ => CallError::Closed,
    }
}

/// A failed read of the reply: the stream or connection ended before it was whole.
fn read_error(e: quinn::ReadExactError) -> CallError {
    match e {
        quinn::ReadExactError::FinishedEarly(_) => CallError::Closed,
        quinn::ReadExactError::ReadError(quinn::ReadError::ConnectionLost(e)) => lost(&e),
        quinn::ReadExactError::ReadError(_) => CallError::Closed,
    }
}
