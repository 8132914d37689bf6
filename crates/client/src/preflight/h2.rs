//! The HTTP/2 probe of an HTTP listener: `GET /healthz` then `GET /stats` as two streams
//! of one HTTP/2 connection, with prior knowledge on a plain socket (as the `h2` and gRPC
//! transports speak to the port) or ALPN `h2` under TLS. A front that speaks only HTTP/2
//! (HAProxy's `proto h2`, a gRPC gateway) closes on the HTTP/1.1 probe and passes this
//! one; a server that speaks only HTTP/1.1 answers the connection preface in HTTP/1.1,
//! which is said as such.
//!
//! The preflight is blocking, one thread per probe; this probe drives the `h2` crate's
//! client on a current-thread runtime of its own, every step bounded by
//! [`PREFLIGHT_TIMEOUT`].

use super::{HttpReply, MAX_PROBE_REPLY, PREFLIGHT_TIMEOUT, Reply, Seen, ServerIdentity};
use crate::transport::CallError;
use crate::transport::tls::{Alpn, TlsClient, TlsFailure};
use bytes::Bytes;
use std::net::TcpStream;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Instant;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// `GET /healthz` then `GET /stats` over HTTP/2 on the connected `sock` (TLS with ALPN
/// `h2` first when `tls` is given): rpcbench-echo's identity, or what was seen instead.
pub(super) fn exchange(
    sock: TcpStream,
    tls: Option<&TlsClient>,
    host: &str,
) -> Result<ServerIdentity, Seen> {
    let unreachable = |e: std::io::Error| Seen::Unreachable(e.to_string());
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(unreachable)?;
    runtime.block_on(async {
        sock.set_nonblocking(true).map_err(unreachable)?;
        let sock = tokio::net::TcpStream::from_std(sock).map_err(unreachable)?;
        match tls {
            None => gets(sock, "http", host).await,
            Some(tls) => {
                let deadline = Instant::now() + PREFLIGHT_TIMEOUT;
                let (stream, _) =
                    tls.handshake(sock, Alpn::H2, deadline)
                        .await
                        .map_err(|e| match e {
                            CallError::Tls(TlsFailure::HandshakeTimeout) => Seen::Silent,
                            CallError::Tls(failure) => Seen::Tls(failure),
                            other => Seen::Unreachable(other.to_string()),
                        })?;
                if stream.get_ref().1.alpn_protocol() != Some(b"h2") {
                    return Err(Seen::NotEcho(Reply::NoHttp2Alpn));
                }
                gets(stream, "https", host).await
            }
        }
    })
}

/// The two requests on one HTTP/2 connection over `io`.
async fn gets<T>(io: T, scheme: &str, host: &str) -> Result<ServerIdentity, Seen>
where
    T: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let io = FirstBytes::new(io);
    let first = io.first.clone();
    let asked = async {
        let (send, connection) = within(::h2::client::handshake(io))
            .await?
            .map_err(|e| failed(&e))?;
        tokio::spawn(async move {
            // Its failures surface on the streams.
            let _ = connection.await;
        });
        let health = get(send.clone(), scheme, host, "/healthz").await?;
        super::check_health(&health)?;
        let stats = get(send, scheme, host, "/stats").await?;
        super::identity(&stats)
    };
    asked.await.map_err(|seen| said_instead(seen, &first))
}

/// One `GET path` as a stream, its reply read whole (at most [`MAX_PROBE_REPLY`]).
async fn get(
    send: ::h2::client::SendRequest<Bytes>,
    scheme: &str,
    host: &str,
    path: &str,
) -> Result<HttpReply, Seen> {
    let request = hyper::Request::get(format!("{scheme}://{host}{path}"))
        .header(hyper::header::USER_AGENT, "rpcbench-preflight")
        .body(())
        .map_err(|e| Seen::Unreachable(e.to_string()))?;
    let mut send = within(send.ready()).await?.map_err(|e| failed(&e))?;
    let (response, _) = send.send_request(request, true).map_err(|e| failed(&e))?;
    let response = within(response).await?.map_err(|e| failed(&e))?;
    let status = response.status().as_u16();
    let mut body = response.into_body();
    let mut bytes = Vec::new();
    while let Some(chunk) = within(body.data()).await? {
        let chunk = chunk.map_err(|e| failed(&e))?;
        let _ = body.flow_control().release_capacity(chunk.len());
        bytes.extend_from_slice(&chunk);
        if bytes.len() > MAX_PROBE_REPLY {
            return Err(Seen::NotEcho(Reply::NoStats));
        }
    }
    Ok(HttpReply {
        status,
        body: bytes,
    })
}

/// A step of the probe, bounded by [`PREFLIGHT_TIMEOUT`]: past it, the peer is silent.
async fn within<F: std::future::Future>(step: F) -> Result<F::Output, Seen> {
    tokio::time::timeout(PREFLIGHT_TIMEOUT, step)
        .await
        .map_err(|_| Seen::Silent)
}

/// What an HTTP/2 failure says of the peer, before its first bytes are looked at.
fn failed(e: &::h2::Error) -> Seen {
    match e.get_io() {
        Some(io) => super::read_failed(io, &[]),
        None => Seen::Closed,
    }
}

/// What the peer was, from its first bytes when they are not HTTP/2's: HTTP/1.1's answer
/// to the connection preface, TLS, anything else. HTTP/2's first frame is the server's
/// SETTINGS (type 4, on stream 0).
fn said_instead(seen: Seen, first: &Mutex<Vec<u8>>) -> Seen {
    let first = first.lock().unwrap_or_else(|p| p.into_inner());
    let http2 = first.len() >= 9 && first[3] == 4 && first[5..9] == [0, 0, 0, 0];
    if first.is_empty() || http2 {
        return seen;
    }
    match super::not_ours(&first) {
        Seen::NotEcho(Reply::Http { status }) => Seen::NotEcho(Reply::Http1Answer { status }),
        other => other,
    }
}

/// A stream that keeps the first bytes it reads, to say what a peer that is not HTTP/2
/// sent.
struct FirstBytes<T> {
    io: T,
    first: Arc<Mutex<Vec<u8>>>,
}

/// Bytes kept: an HTTP/1.1 status line's start, a TLS record's head.
const KEPT: usize = 16;

impl<T> FirstBytes<T> {
    fn new(io: T) -> FirstBytes<T> {
        FirstBytes {
            io,
            first: Arc::default(),
        }
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for FirstBytes<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.io).poll_read(cx, buf);
        let mut first = self.first.lock().unwrap_or_else(|p| p.into_inner());
        if first.len() < KEPT {
            let new = &buf.filled()[before..];
            let take = new.len().min(KEPT - first.len());
            first.extend_from_slice(&new[..take]);
        }
        polled
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for FirstBytes<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_http1_answer_to_the_preface_is_told_apart() {
        let first = Mutex::new(b"HTTP/1.1 400 Bad Request\r\n".to_vec());
        assert_eq!(
            said_instead(Seen::Closed, &first),
            Seen::NotEcho(Reply::Http1Answer { status: 400 })
        );
        // A SETTINGS frame first: the peer spoke HTTP/2, what failed is what was seen.
        let settings = Mutex::new(vec![0, 0, 6, 4, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0, 100]);
        assert_eq!(said_instead(Seen::Silent, &settings), Seen::Silent);
        assert_eq!(said_instead(Seen::Closed, &Mutex::default()), Seen::Closed);
    }
}
