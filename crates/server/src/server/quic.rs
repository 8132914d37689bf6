//! QUIC listener (`--quic ADDR`): TLS 1.3 built in (the TLS listeners' certificate and
//! client CA), the protocol chosen by ALPN. ALPN `rpcbench` carries the raw frames of
//! `--tcp`, one bidirectional stream per call: the client sends one request frame and
//! finishes its side, the server answers with one response frame and finishes its own.
//! ALPN `h3` is HTTP/3 with the HTTP port's routes (`server/http/h3.rs`).
//!
//! Limits as on TCP: a connection takes a slot of `--max-connections` for as long as it is
//! open (refused at once without one); it may open [`STREAMS_PER_CONNECTION`] streams at a
//! time (QUIC's stream credit: the client waits for more); a request frame is held under
//! the `--max-buffered` budget before it is read, and one that does not fit is answered
//! with status 4, as on TCP; a connection quiet for `--idle-timeout` is closed by QUIC's
//! own idle timer; a handshake not done within the TLS handshake timeout is abandoned.
//!
//! Address validation: while more than [`RETRY_ABOVE`] handshakes are under way (always,
//! with `--quic-retry`), an Initial packet from an address that has not proved it
//! receives (no Retry token) is answered with a Retry (RFC 9000 §8.1.2), which costs the
//! server no state, and counted (`quic_retries`): a flood of Initials from spoofed
//! sources then holds no handshake.

use super::budget::Lease;
use super::stats::{HandshakeFailure, Reject};
use super::tcp::answer_within;
use super::{ConnGuard, Shared, sleep_until, stopping};
use crate::wire::{self, DecodeFrameError, LEN_PREFIX, Request, Status};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::time::{Duration, Instant};

/// The ALPN of the raw frames over QUIC.
pub const ALPN_FRAMES: &[u8] = b"rpcbench";

/// The ALPN of HTTP/3.
pub const ALPN_H3: &[u8] = b"h3";

/// Unidirectional streams a client may have open: HTTP/3's control stream, QPACK's
/// encoder and decoder streams (RFC 9114 §6.2) and one of a reserved type (the h3
/// crate's grease stream, which it waits to open); the raw frames use none.
const UNI_STREAMS: u8 = 4;

/// What quinn buffers for a connection before the server reads it: per stream, and for
/// the whole connection (QUIC's flow-control windows). A client sending faster than the
/// calls are read waits for credit, so a connection holds at most this much.
const STREAM_WINDOW: u32 = 256 * 1024;
const CONNECTION_WINDOW: u32 = 1024 * 1024;

/// Bidirectional streams a client may have open on one connection at a time: each is one
/// call in flight, so this bounds a connection's calls (and the tasks serving them) as
/// HTTP/2's `SETTINGS_MAX_CONCURRENT_STREAMS` does.
pub const STREAMS_PER_CONNECTION: u32 = 100;

/// Handshakes under way above which new, unvalidated clients get a Retry first.
pub const RETRY_ABOVE: usize = 64;

/// The QUIC error code of a connection or stream the server ends on purpose (`H3` and the
/// frames both use 0 for "no error").
const NO_ERROR: u32 = 0;

/// The stream error code of a request the server would not read (oversized, malformed).
const REFUSED: u32 = 1;

/// Sessions the QUIC listener keeps for resumption and 0-RTT (a few hundred bytes each):
/// past this, the oldest go, and a client offering one handshakes in full.
pub const SESSIONS: usize = 4096;

/// quinn's server configuration for `tls` (the listeners' rustls configuration, whose
/// ALPN is replaced) and the server's limits.
///
/// Where the listeners issue session tickets, QUIC's are kept in a bounded store of its
/// own ([`Sessions`]) instead of sealed in the ticket: a stored session is taken when a
/// client resumes it, so each ticket works once. That is what lets the server read
/// early data (0-RTT) at all (rustls refuses it with stateless tickets), and it is its
/// defence against a replayed handshake: a copy of a client's first flight finds its
/// ticket gone, and its early data is not read (RFC 8446 §8.1).
pub(crate) fn server_config(
    mut tls: rustls::ServerConfig,
    shared: &Shared,
) -> Result<quinn::ServerConfig, super::tls::SetUpTlsError> {
    tls.alpn_protocols = vec![ALPN_FRAMES.to_vec(), ALPN_H3.to_vec()];
    if tls.send_tls13_tickets > 0 {
        tls.ticketer = Arc::new(Stateful);
        tls.session_storage = Arc::new(Sessions {
            store: rustls::server::ServerSessionMemoryCache::new(SESSIONS),
            stats: shared.stats.clone(),
        });
        // QUIC allows no other limit than "any": the stream windows bound it.
        tls.max_early_data_size = u32::MAX;
    } else {
        tls.max_early_data_size = 0;
    }
    let shared = &shared.config;
    let crypto = quinn::crypto::rustls::QuicServerConfig::try_from(tls)
        .map_err(|e| rustls::Error::General(e.to_string()))?;
    let mut config = quinn::ServerConfig::with_crypto(Arc::new(crypto));
    let mut transport = quinn::TransportConfig::default();
    transport
        .max_concurrent_bidi_streams(STREAMS_PER_CONNECTION.into())
        .max_concurrent_uni_streams(UNI_STREAMS.into())
        .stream_receive_window(STREAM_WINDOW.into())
        .receive_window(CONNECTION_WINDOW.into())
        .max_idle_timeout(shared.idle_timeout.try_into().ok());
    config.transport_config(Arc::new(transport));
    Ok(config)
}

/// The QUIC listener's sessions: rustls's bounded store, counting what clients resume
/// (as each resumption begins: quinn does not say per connection) and the tickets it does
/// not hold.
#[derive(Debug)]
struct Sessions {
    store: Arc<rustls::server::ServerSessionMemoryCache>,
    stats: Arc<super::stats::Stats>,
}

impl rustls::server::StoresServerSessions for Sessions {
    fn put(&self, key: Vec<u8>, value: Vec<u8>) -> bool {
        self.store.put(key, value)
    }

    fn get(&self, key: &[u8]) -> Option<Vec<u8>> {
        self.store.get(key)
    }

    fn take(&self, key: &[u8]) -> Option<Vec<u8>> {
        let session = self.store.take(key);
        match session {
            Some(_) => self.stats.quic_handshakes.resuming(),
            None => self.stats.reject(Reject::QuicUnknownTicket),
        }
        session
    }

    fn can_cache(&self) -> bool {
        true
    }
}

/// Tickets that are the session's key in [`Sessions`], not the session sealed: rustls
/// then issues random ids and keeps the sessions itself.
#[derive(Debug)]
struct Stateful;

impl rustls::server::ProducesTickets for Stateful {
    fn enabled(&self) -> bool {
        false
    }

    fn lifetime(&self) -> u32 {
        0
    }

    fn encrypt(&self, _: &[u8]) -> Option<Vec<u8>> {
        None
    }

    fn decrypt(&self, _: &[u8]) -> Option<Vec<u8>> {
        None
    }
}

/// Accepts connections on `endpoint` until shutdown starts, then closes it.
pub(super) async fn accept_loop(endpoint: quinn::Endpoint, shared: Arc<Shared>) {
    let _alive = shared.alive.clone();
    let handshaking = Arc::new(AtomicUsize::new(0));
    loop {
        let incoming = tokio::select! {
            incoming = endpoint.accept() => match incoming {
                Some(incoming) => incoming,
                None => break,
            },
            _ = stopping(shared.shutdown.clone()) => break,
        };
        if !incoming.remote_address_validated()
            && incoming.may_retry()
            && (shared.config.quic_retry || handshaking.load(Relaxed) >= RETRY_ABOVE)
        {
            shared.stats.reject(Reject::QuicRetry);
            // Fails only when the client already answered a Retry, which may_retry rules out.
            let _ = incoming.retry();
            continue;
        }
        let Some(guard) = shared.admit(|s| &s.quic) else {
            incoming.refuse();
            continue;
        };
        // Counted here, not in the task: a burst of Initials is accepted before any of
        // the tasks runs, and each must count against the ones after it.
        handshaking.fetch_add(1, Relaxed);
        let (shared, handshaking) = (shared.clone(), handshaking.clone());
        tokio::spawn(async move {
            let Some((conn, done)) = handshake(incoming, &shared).await else {
                handshaking.fetch_sub(1, Relaxed);
                return;
            };
            let settled = async {
                if let Some(done) = done {
                    settle(&conn, done, &shared).await;
                }
                handshaking.fetch_sub(1, Relaxed);
            };
            tokio::join!(settled, serve(conn.clone(), shared.clone(), guard));
        });
    }
    endpoint.close(NO_ERROR.into(), b"shutting down");
}

/// Runs the server's side of the handshake within the handshake timeout, counting how it
/// ended; `None` when it failed.
///
/// Without a required client certificate, the connection is served as soon as the
/// server's flight is out (0.5-RTT), so that a request in early data is answered in the
/// same round trip; the handshake's end is then waited for beside the calls (the future
/// returned, for [`settle`]). With one, nothing is read or sent before the client proved
/// who it is.
async fn handshake(
    incoming: quinn::Incoming,
    shared: &Shared,
) -> Option<(quinn::Connection, Option<quinn::ZeroRttAccepted>)> {
    let counters = &shared.stats.quic_handshakes;
    let connecting = match incoming.accept() {
        Ok(c) => c,
        Err(e) => {
            counters.failed(failure_of(&e));
            return None;
        }
    };
    let settings = &shared.config.tls_settings;
    let client_cert_required = (settings.client_ca.is_some() || settings.client_ca_pem.is_some())
        && !settings.client_auth_optional;
    let connecting = if client_cert_required {
        connecting
    } else {
        match connecting.into_0rtt() {
            Ok((conn, done)) => return Some((conn, Some(done))),
            Err(connecting) => connecting,
        }
    };
    let timeout = settings.handshake_timeout;
    let conn = match tokio::time::timeout(timeout, connecting).await {
        Ok(Ok(conn)) => conn,
        Ok(Err(e)) => {
            counters.failed(failure_of(&e));
            return None;
        }
        Err(_) => {
            counters.failed(HandshakeFailure::Timeout);
            return None;
        }
    };
    counters.completed();
    Some((conn, None))
}

/// Waits for the end of a handshake whose connection is already served (0.5-RTT) within
/// the handshake timeout, counting how it ended; a connection whose handshake stalls is
/// closed, and its calls with it.
async fn settle(conn: &quinn::Connection, done: quinn::ZeroRttAccepted, shared: &Shared) {
    let counters = &shared.stats.quic_handshakes;
    let timeout = shared.config.tls_settings.handshake_timeout;
    // Resolves when the handshake completes or the connection ends first: on a server,
    // false either way (quinn 0.11). A connection still open, or closed by the
    // application (which only a client past the handshake can do), completed it.
    match tokio::time::timeout(timeout, done).await {
        Ok(_) => match conn.close_reason() {
            None | Some(quinn::ConnectionError::ApplicationClosed(_)) => counters.completed(),
            Some(e) => counters.failed(failure_of(&e)),
        },
        Err(_) => {
            counters.failed(HandshakeFailure::Timeout);
            conn.close(REFUSED.into(), b"handshake timed out");
        }
    }
}

/// What a failed QUIC handshake is counted as.
fn failure_of(e: &quinn::ConnectionError) -> HandshakeFailure {
    use quinn::ConnectionError as E;
    match e {
        E::TimedOut => HandshakeFailure::Timeout,
        E::TransportError(t) if is_alert(t.code) => HandshakeFailure::AlertReceived,
        E::ConnectionClosed(c) if is_alert(c.error_code) => HandshakeFailure::AlertReceived,
        E::ApplicationClosed(_) | E::ConnectionClosed(_) | E::Reset => HandshakeFailure::Closed,
        E::VersionMismatch => HandshakeFailure::Incompatible,
        _ => HandshakeFailure::Other,
    }
}

/// True for a QUIC error code that carries a TLS alert (`0x100` plus the alert).
fn is_alert(code: quinn::TransportErrorCode) -> bool {
    (0x100..0x200).contains(&u64::from(code))
}

/// Serves one connection's streams until it closes (the client, the idle timer) or
/// shutdown starts.
async fn serve(conn: quinn::Connection, shared: Arc<Shared>, _guard: ConnGuard) {
    let alpn = conn
        .handshake_data()
        .and_then(|d| d.downcast::<quinn::crypto::rustls::HandshakeData>().ok())
        .and_then(|d| d.protocol);
    match alpn.as_deref() {
        Some(ALPN_FRAMES) => frames(&conn, &shared).await,
        Some(ALPN_H3) => super::http::h3::serve(conn.clone(), shared.clone()).await,
        _ => {
            // rustls refuses a client offering no protocol we have, so this is a client
            // that offered none: nothing to speak.
            shared.stats.reject(Reject::QuicNoAlpn);
            conn.close(REFUSED.into(), b"no application protocol");
            return;
        }
    }
    let stats = conn.stats();
    shared
        .stats
        .quic
        .bytes_in
        .fetch_add(stats.udp_rx.bytes, Relaxed);
    shared
        .stats
        .quic
        .bytes_out
        .fetch_add(stats.udp_tx.bytes, Relaxed);
}

/// Serves the raw frames' streams of `conn`, a call each, until it closes (the client,
/// the idle timer) or shutdown starts.
async fn frames(conn: &quinn::Connection, shared: &Arc<Shared>) {
    loop {
        let (send, recv) = tokio::select! {
            stream = conn.accept_bi() => match stream {
                Ok(stream) => stream,
                Err(e) => {
                    if matches!(e, quinn::ConnectionError::TimedOut) {
                        shared.stats.reject(Reject::IdleTimeout);
                    }
                    break;
                }
            },
            _ = stopping(shared.shutdown.clone()) => {
                conn.close(NO_ERROR.into(), b"shutting down");
                break;
            }
        };
        tokio::spawn(call(send, recv, shared.clone()));
    }
}

/// Answers one call on its stream: one request frame in, one response frame out.
async fn call(mut send: quinn::SendStream, mut recv: quinn::RecvStream, shared: Arc<Shared>) {
    let _alive = shared.alive.clone();
    let stats = &shared.stats;
    let max_frame = shared.config.max_frame;
    let mut prefix = [0u8; LEN_PREFIX];
    if recv.read_exact(&mut prefix).await.is_err() {
        stats.reject(Reject::TruncatedFrame);
        return;
    }
    let len = match wire::check_len(prefix, max_frame) {
        Ok(len) => len,
        Err(e) => {
            stats.reject(match e {
                DecodeFrameError::EmptyFrame => Reject::ZeroLengthFrame,
                _ => Reject::OversizedFrame,
            });
            let _ = recv.stop(REFUSED.into());
            let _ = send.reset(REFUSED.into());
            return;
        }
    };
    let mut lease = Lease::new(&stats.budget, None, len as u64);
    let fits = lease.grow_to(len as u64);
    let mut body = vec![0u8; if fits { len } else { 0 }];
    let read = if fits {
        recv.read_exact(&mut body).await.is_ok()
    } else {
        // Read and dropped, as TCP's listener does, so the client gets its status.
        drain(&mut recv, len).await
    };
    if !read {
        stats.reject(Reject::TruncatedFrame);
        return;
    }
    let got_it = Instant::now();
    let reply = if !fits {
        stats.reject(Reject::OverBudgetFrame);
        let seq = wire::request_seq(&body).unwrap_or(0);
        wire::Response {
            seq,
            status: Status::OverBudget as u8,
            server_ns: 0,
            payload: Vec::new(),
        }
    } else {
        let Ok(req) = wire::decode_body::<Request>(&body) else {
            stats.reject(Reject::MalformedFrame);
            let _ = send.reset(REFUSED.into());
            return;
        };
        drop(body);
        stats.quic.requests.fetch_add(1, Relaxed);
        let delay = Duration::from_micros(req.delay_us.into());
        if !delay.is_zero() && delay <= shared.config.max_delay {
            sleep_until(got_it + delay).await;
        }
        let largest = max_frame.saturating_sub(wire::RESPONSE_OVERHEAD) as usize;
        answer_within(req, got_it, &shared, largest, None)
    };
    let mut out = Vec::new();
    wire::encode_frame(&reply, &mut out);
    // The reply is held while QUIC sends it (the write waits on the client's credit):
    // the lease is the reply's now, or nothing when the budget has not got it.
    lease.shrink_to(0);
    let _ = lease.grow_to(out.len() as u64);
    let write = tokio::time::timeout(shared.config.write_timeout, send.write_all(&out));
    match write.await {
        Ok(Ok(())) => {
            let _ = send.finish();
        }
        Ok(Err(_)) => stats.reject(Reject::QuicStreamReset),
        Err(_) => {
            stats.reject(Reject::WriteTimeout);
            let _ = send.reset(REFUSED.into());
        }
    }
}

/// Reads and drops `len` bytes of a request that did not fit the budget; false when the
/// stream ended first.
async fn drain(recv: &mut quinn::RecvStream, mut len: usize) -> bool {
    let mut buf = [0u8; 16 * 1024];
    while len > 0 {
        let want = len.min(buf.len());
        match recv.read(&mut buf[..want]).await {
            Ok(Some(n)) => len -= n,
            _ => return false,
        }
    }
    true
}

/// The endpoint serving `socket` with `config`, on the current runtime.
pub(super) fn endpoint(
    socket: std::net::UdpSocket,
    config: quinn::ServerConfig,
) -> std::io::Result<quinn::Endpoint> {
    quinn::Endpoint::new(
        quinn::EndpointConfig::default(),
        Some(config),
        socket,
        Arc::new(quinn::TokioRuntime),
    )
}
