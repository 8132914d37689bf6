//! HTTP/3 (ALPN `h3` on the QUIC listener, hyperium's `h3` on `h3-quinn`): the routes,
//! headers and limits of the HTTP port ([`super::route`]), each request a bidirectional
//! stream. The QUIC listener ([`crate::server::quic`]) admits the connection, holds its
//! `--max-connections` slot and its idle timer; this file serves its requests.
//!
//! Limits: QUIC's stream credit bounds the requests in flight on a connection (as
//! HTTP/2's `SETTINGS_MAX_CONCURRENT_STREAMS` does), a request's header section is
//! bounded by [`MAX_FIELD_SECTION`], and its body is read as the HTTP port reads one:
//! at most the max frame, within the buffer budget (the connection's share of it too).

use super::route;
use crate::server::budget::ConnShare;
use crate::server::stats::Reject;
use crate::server::{Shared, stopping};
use bytes::{Buf, Bytes};
use http_body_util::BodyExt;
use hyper::body::Frame;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

/// The largest request header section accepted (HTTP/3's
/// `SETTINGS_MAX_FIELD_SECTION_SIZE`): hyper's HTTP/1.1 default, 16 KiB of head.
pub const MAX_FIELD_SECTION: u64 = 16 * 1024;

/// A request stream's receiving side.
type RecvSide = h3::server::RequestStream<h3_quinn::RecvStream, Bytes>;

/// Serves the HTTP/3 requests of `conn` until it ends or shutdown starts.
pub(in crate::server) async fn serve(conn: quinn::Connection, shared: Arc<Shared>) {
    let built = h3::server::builder()
        .max_field_section_size(MAX_FIELD_SECTION)
        .build::<_, Bytes>(h3_quinn::Connection::new(conn))
        .await;
    let Ok(mut h3) = built else {
        shared.stats.reject(Reject::HttpConnectionError);
        return;
    };
    let share = Arc::new(ConnShare::new(
        &shared.stats.budget,
        shared.config.max_frame,
    ));
    loop {
        let resolver = tokio::select! {
            next = h3.accept() => match next {
                Ok(Some(resolver)) => resolver,
                // The client closed the connection, cleanly or by its idle timer.
                Ok(None) => break,
                Err(e) => {
                    if broke_the_protocol(&e) {
                        shared.stats.reject(Reject::HttpConnectionError);
                    }
                    break;
                }
            },
            _ = stopping(shared.shutdown.clone()) => {
                // GOAWAY: requests in flight finish, no new ones are taken.
                let _ = h3.shutdown(0).await;
                break;
            }
        };
        tokio::spawn(answer(resolver, shared.clone(), share.clone()));
    }
}

/// True when the server ended the connection for an error it found (a frame or field
/// that breaks HTTP/3); not when the client closed it, whatever its code, nor when QUIC
/// timed it out or the server shut it down.
fn broke_the_protocol(e: &h3::error::ConnectionError) -> bool {
    use h3::error::{ConnectionError, LocalError};
    matches!(e, ConnectionError::Local { .. })
        && !e.is_h3_no_error()
        && !matches!(
            e,
            ConnectionError::Local {
                error: LocalError::Closing { .. },
                ..
            }
        )
}

/// Answers one request: its head, then [`route::route`] reading the body from the
/// stream, then the reply written back within the write timeout.
async fn answer(
    resolver: h3::server::RequestResolver<h3_quinn::Connection, Bytes>,
    shared: Arc<Shared>,
    share: Arc<ConnShare>,
) {
    let _alive = shared.alive.clone();
    let (req, stream) = match resolver.resolve_request().await {
        Ok(resolved) => resolved,
        Err(_) => {
            // A head that is malformed, too large, or never came: h3 has answered the
            // stream (or the connection) with the error code.
            shared.stats.reject(Reject::HttpBadRequest);
            return;
        }
    };
    let (mut send, recv) = stream.split();
    let req = req.map(|()| H3Body { recv, done: false });
    let (head, mut body) = route::route(req, &shared, &share).await.into_parts();
    let write = async {
        send.send_response(hyper::Response::from_parts(head, ()))
            .await?;
        while let Some(Ok(frame)) = body.frame().await {
            if let Ok(data) = frame.into_data() {
                send.send_data(data).await?;
            }
        }
        send.finish().await
    };
    match tokio::time::timeout(shared.config.write_timeout, write).await {
        Ok(Ok(())) => {}
        Ok(Err(_)) => shared.stats.reject(Reject::QuicStreamReset),
        Err(_) => {
            shared.stats.reject(Reject::WriteTimeout);
            send.stop_stream(h3::error::Code::H3_REQUEST_CANCELLED);
        }
    }
}

/// A request body arriving on an HTTP/3 stream, as the routes read a hyper body.
struct H3Body {
    recv: RecvSide,
    done: bool,
}

impl hyper::body::Body for H3Body {
    type Data = Bytes;
    type Error = h3::error::StreamError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = self.get_mut();
        if this.done {
            return Poll::Ready(None);
        }
        match this.recv.poll_recv_data(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(Ok(Some(mut data))) => {
                let bytes = data.copy_to_bytes(data.remaining());
                Poll::Ready(Some(Ok(Frame::data(bytes))))
            }
            Poll::Ready(Ok(None)) => {
                this.done = true;
                Poll::Ready(None)
            }
            Poll::Ready(Err(e)) => {
                this.done = true;
                Poll::Ready(Some(Err(e)))
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.done
    }
}
