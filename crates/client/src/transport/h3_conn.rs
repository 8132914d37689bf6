//! What the HTTP/3 transports share (`h3`, `h3-fresh`, `h3-mux`): a QUIC connection
//! opened with ALPN `h3` on a [`QuicClient`], its HTTP/3 state (hyperium's `h3` on
//! `h3-quinn`), and one call: `POST /echo` (or an encoding's route) as a request stream,
//! the same request and reply as the HTTP/2 transports make.
//!
//! Opening HTTP/3 costs no round trip past QUIC's handshake: the control and QPACK
//! streams are opened, and the SETTINGS sent, with the first request. So `h3-fresh` pays
//! the handshake and the request, two round trips, as `quic-connect` does.

use super::h2::{Origin, request_headers};
use super::http::{header_seq, server_timing};
use super::quic_conn::QuicClient;
use super::tls::Alpn;
use super::{Call, CallError, Endpoint, OpenTransportError, Phases, Reply};
use bytes::{Buf, Bytes};
use std::time::{Duration, Instant};

/// The request handle of an HTTP/3 connection.
type SendRequest = h3::client::SendRequest<h3_quinn::OpenStreams, Bytes>;

/// HTTP/3's code for a connection closed with nothing wrong.
const H3_NO_ERROR: u32 = 0x100;

/// The HTTP/3 error code a client stops a reply with that it will not read (too large).
const REQUEST_CANCELLED: u64 = 0x10c;

/// An open HTTP/3 connection: the QUIC connection and the handle requests are sent on.
/// Its driver (the control streams, the connection's close) is a task on the runtime it
/// was opened on.
#[derive(Clone)]
pub(super) struct H3Conn {
    quic: quinn::Connection,
    send: SendRequest,
}

impl H3Conn {
    /// Opens a connection to the target's QUIC port with `client` (whose ALPN is `h3`):
    /// the lookup (`dns`), the handshake (`tls`), then HTTP/3's own streams, which cost
    /// no round trip.
    pub fn open(
        client: &mut QuicClient,
        target: &Endpoint,
        deadline: Instant,
        phases: &mut Phases,
    ) -> Result<H3Conn, CallError> {
        let quic = client.connect(target, deadline, phases)?;
        let setup = h3::client::new(h3_quinn::Connection::new(quic.clone()));
        let (mut driver, send) = client
            .rt
            .block_on(async { tokio::time::timeout_at(deadline.into(), setup).await })
            .map_err(|_| CallError::Timeout)?
            .map_err(|_| CallError::Protocol)?;
        client.rt.spawn(async move {
            // Ends when the connection does; the request handles see why.
            let _ = std::future::poll_fn(|cx| driver.poll_close(cx)).await;
        });
        Ok(H3Conn { quic, send })
    }

    /// True while the connection can carry calls.
    pub fn is_open(&self) -> bool {
        self.quic.close_reason().is_none()
    }

    /// Closes the connection (the requests' handles go with it), with `H3_NO_ERROR`.
    pub fn close(self, client: &mut QuicClient) {
        client.close_with(self.quic, H3_NO_ERROR, Box::new(self.send));
    }
}

/// A call's request and the buffer its reply goes to: the URI (made once per path),
/// the reply's body and head.
#[derive(Default)]
pub(super) struct H3Call {
    origin: Option<Origin>,
    body: Vec<u8>,
    head: hyper::HeaderMap,
}

impl H3Call {
    /// The request for `call` to `target`: `POST` with its seq, content type and
    /// encoding's operation header.
    fn request(&mut self, target: &Endpoint, call: &Call) -> Result<hyper::Request<()>, CallError> {
        let origin = self.origin.get_or_insert_with(|| {
            let host = crate::resolve::url_host(&target.host());
            Origin::with_base(format!("https://{host}:{}", target.quic_port))
        });
        let mut req = hyper::Request::new(());
        *req.method_mut() = hyper::Method::POST;
        *req.uri_mut() = origin.uri(&Endpoint::echo_path(call))?;
        *req.headers_mut() = request_headers(call);
        Ok(req)
    }

    /// Makes `call` on `conn` within `deadline`, blocking on `rt` (a current-thread
    /// runtime is driven only by its own `block_on`, so the runtime, not a handle): the
    /// request and its
    /// body, then the reply's head (the time to it is `first_byte`) and body.
    pub fn call_on(
        &mut self,
        rt: &tokio::runtime::Runtime,
        conn: &H3Conn,
        target: &Endpoint,
        call: &Call,
        deadline: Instant,
        phases: &mut Phases,
    ) -> Result<Reply<'_>, CallError> {
        let req = self.request(target, call)?;
        let payload = Bytes::copy_from_slice(call.payload);
        let mut send = conn.send.clone();
        let (body, head) = (&mut self.body, &mut self.head);
        let sent = Instant::now();
        let exchange = async {
            let mut stream = send.send_request(req).await.map_err(stream_error)?;
            // No DATA frame for an empty body: the h3 crate's server reads an empty one
            // as the body's end, before the stream's.
            let request = async {
                if !payload.is_empty() {
                    stream.send_data(payload).await?;
                }
                stream.finish().await
            };
            match request.await {
                // A server may stop reading a request it has answered (RFC 9114 §4.1.2),
                // and the client must then still take the response.
                Ok(()) | Err(h3::error::StreamError::RemoteTerminate { .. }) => {}
                Err(e) => return Err(stream_error(e)),
            }
            let resp = stream.recv_response().await.map_err(stream_error)?;
            let first_byte = sent.elapsed();
            let status = resp.status().as_u16();
            if !call.takes_status(status) {
                return Err(CallError::HttpStatus(status));
            }
            *head = resp.into_parts().0.headers;
            body.clear();
            while let Some(mut chunk) = stream.recv_data().await.map_err(stream_error)? {
                if body.len() + chunk.remaining() > call.max_reply {
                    stream.stop_sending(h3::error::Code::from(REQUEST_CANCELLED));
                    return Err(CallError::ReplyTooLarge);
                }
                while chunk.has_remaining() {
                    let part = chunk.chunk();
                    body.extend_from_slice(part);
                    let n = part.len();
                    chunk.advance(n);
                }
            }
            Ok::<Duration, CallError>(first_byte)
        };
        let first_byte = rt
            .block_on(async { tokio::time::timeout_at(deadline.into(), exchange).await })
            .map_err(|_| CallError::Timeout)??;
        phases.first_byte = Some(first_byte);
        Ok(self.reply())
    }

    /// The reply of the last call made.
    fn reply(&self) -> Reply<'_> {
        Reply {
            seq: header_seq(&self.head),
            body: &self.body,
            server: server_timing(&self.head),
        }
    }
}

/// One HTTP/3 call to the QUIC listener at `addr` on a connection of its own, within
/// `timeout`: the preflight's probe in HTTP/3 (a handshake with `tls` and ALPN `h3`, then
/// `call` as `POST /echo`). Returns the reply's seq and body.
pub fn probe(
    addr: std::net::SocketAddr,
    tls: std::sync::Arc<super::tls::TlsClient>,
    call: &Call,
    timeout: Duration,
) -> Result<(Option<u64>, Vec<u8>), CallError> {
    let (mut client, target) = super::quic_conn::probe_client(addr, tls, Alpn::H3)?;
    let deadline = Instant::now() + timeout;
    let mut phases = Phases::default();
    let conn = H3Conn::open(&mut client, &target, deadline, &mut phases)?;
    let mut h3 = H3Call::default();
    let reply = h3.call_on(&client.rt, &conn, &target, call, deadline, &mut phases);
    let reply = reply.map(|r| (r.seq, r.body.to_vec()));
    conn.close(&mut client);
    reply
}

/// What an HTTP/3 failure means for the call: the connection gone (closed, timed out)
/// as its loss; a stream the server reset, or anything malformed, as a protocol error.
fn stream_error(e: h3::error::StreamError) -> CallError {
    use h3::error::StreamError as E;
    match e {
        E::ConnectionError { .. } if is_timeout(&e) => CallError::Timeout,
        E::ConnectionError { .. } => CallError::Closed,
        E::RemoteTerminate { .. } => CallError::Closed,
        _ => CallError::Protocol,
    }
}

/// True for a connection that ended for QUIC's idle timer.
fn is_timeout(e: &h3::error::StreamError) -> bool {
    let source = std::error::Error::source(e);
    matches!(
        source.and_then(|s| s.downcast_ref::<h3::error::ConnectionError>()),
        Some(h3::error::ConnectionError::Timeout { .. })
    )
}

/// What `h3` and `h3-fresh` hold for one worker: where the calls go, the client (its
/// runtime drives the connection), and the connection while it is kept. `FRESH` opens a
/// connection per call and closes it inside the call (`h3-fresh`).
pub(super) struct H3Worker<const FRESH: bool> {
    endpoint: Endpoint,
    timeout: Duration,
    client: QuicClient,
    conn: Option<H3Conn>,
    call: H3Call,
    connects: u64,
}

impl<const FRESH: bool> H3Worker<FRESH> {
    /// A worker with its runtime; nothing connects until the first call.
    pub fn open(endpoint: Endpoint, timeout: Duration) -> Result<Self, OpenTransportError> {
        Ok(H3Worker {
            endpoint,
            timeout,
            client: QuicClient::new(Alpn::H3)?,
            conn: None,
            call: H3Call::default(),
            connects: 0,
        })
    }

    /// Makes `call` on the kept connection (a new one when there is none, or it ended).
    /// Early data the server refused (`tls13-0rtt`) took HTTP/3's own streams with it, so
    /// the call is made again on a new connection.
    pub fn call(&mut self, call: &Call, phases: &mut Phases) -> Result<Reply<'_>, CallError> {
        let deadline = Instant::now() + self.timeout;
        if FRESH || self.conn.as_ref().is_some_and(|c| !c.is_open()) {
            self.reset();
        }
        for _ in 0..2 {
            if self.conn.is_none() {
                let conn = H3Conn::open(&mut self.client, &self.endpoint, deadline, phases)?;
                self.connects += 1;
                self.conn = Some(conn);
            }
            let conn = self.conn.as_ref().expect("opened above");
            let made = self
                .call
                .call_on(
                    &self.client.rt,
                    conn,
                    &self.endpoint,
                    call,
                    deadline,
                    phases,
                )
                .map(drop);
            if !self.client.early_refused(deadline) {
                return made.map(|()| self.call.reply());
            }
            self.reset();
        }
        Err(CallError::Closed)
    }

    /// Closes the connection, if one is open.
    pub fn reset(&mut self) {
        if let Some(conn) = self.conn.take() {
            conn.close(&mut self.client);
        }
    }

    /// Connections opened so far, and their early data.
    pub fn counts(&self) -> super::Counts {
        self.client.counts(self.connects)
    }
}
