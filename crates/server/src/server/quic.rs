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
//! Address validation: while more than [`RETRY_ABOVE`] handshakes are under way, an
//! Initial packet from an address that has not proved it receives (no Retry token) is
//! answered with a Retry (RFC 9000 §8.1.2), which costs the server no state, and counted
//! (`quic_retries`): a flood of Initials from spoofed sources then holds no handshake.

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

/// quinn's server configuration for `tls` (the listeners' rustls configuration, whose
/// ALPN is replaced) and the server's limits.
pub(crate) fn server_config(
    mut tls: rustls::ServerConfig,
    shared: &super::ServerConfig,
) -> Result<quinn::ServerConfig, super::tls::SetUpTlsError> {
    tls.alpn_protocols = vec![ALPN_FRAMES.to_vec(), ALPN_H3.to_vec()];
    // No early data yet: rustls allows it only with stateful resumption, and the TLS
    // listeners' tickets are stateless. 0-RTT is its own step.
    tls.max_early_data_size = 0;
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
            && handshaking.load(Relaxed) >= RETRY_ABOVE
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
            let conn = handshake(incoming, &shared).await;
            handshaking.fetch_sub(1, Relaxed);
            if let Some(conn) = conn {
                serve(conn, shared, guard).await;
            }
        });
    }
    endpoint.close(NO_ERROR.into(), b"shutting down");
}

/// Runs the server's side of the handshake within the handshake timeout, counting how it
/// ended; `None` when it failed.
async fn handshake(incoming: quinn::Incoming, shared: &Shared) -> Option<quinn::Connection> {
    let counters = &shared.stats.quic_handshakes;
    let connecting = match incoming.accept() {
        Ok(c) => c,
        Err(e) => {
            counters.failed(failure_of(&e));
            return None;
        }
    };
    let timeout = shared.config.tls_settings.handshake_timeout;
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
    // quinn does not say whether a handshake resumed a session: every one counts as full
    // until 0-RTT lands, which tells them apart by the early data accepted.
    counters.succeeded(false);
    Some(conn)
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
