//! `h2`: HTTP/2 with prior knowledge (no upgrade, no TLS), one connection per worker and
//! one stream at a time: `POST /echo` as on HTTP/1.1, each call a new stream on the
//! worker's kept connection (hyper).

use super::http::{self, worker_runtime};
use super::{
    Call, CallError, Endpoint, OpenTransportError, Phases, Port, Reply, Transport, remaining,
};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http2::{self, SendRequest};
use hyper::header::{self, HeaderValue};
use hyper_util::rt::{TokioExecutor, TokioIo};
use std::cell::Cell;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// The `h2` transport.
pub struct H2 {
    rt: tokio::runtime::Runtime,
    endpoint: Endpoint,
    timeout: Duration,
    sender: Option<SendRequest<Full<Bytes>>>,
    body: Vec<u8>,
    connects: u64,
    /// `http://host:port`, the scheme and authority every request's URI starts with:
    /// HTTP/2 carries them as `:scheme` and `:authority` pseudo-headers, not as `Host`.
    origin: String,
}

impl Transport for H2 {
    const PERSISTENT: bool = true;
    const PORT: Port = Port::Http;

    fn open(endpoint: Endpoint, timeout: Duration) -> Result<H2, OpenTransportError> {
        Ok(H2 {
            rt: worker_runtime()?,
            origin: origin(&endpoint),
            endpoint,
            timeout,
            sender: None,
            body: Vec::new(),
            connects: 0,
        })
    }

    fn call(&mut self, call: &Call, phases: &mut Phases) -> Result<Reply<'_>, CallError> {
        let deadline = Instant::now() + self.timeout;
        let req = request(&self.origin, call)?;
        let H2 {
            rt,
            endpoint,
            sender,
            body,
            connects,
            ..
        } = self;
        // The lookup runs outside our runtime: the resolver blocks on a runtime of its own.
        let addr = match sender {
            Some(_) => None,
            None => Some(endpoint.http_addr(deadline, phases)?),
        };
        let connecting = Cell::new(addr.is_some());
        let (seq, server) = rt.block_on(super::within(remaining(deadline)?, &connecting, async {
            let sender = match (sender, addr) {
                (Some(s), _) => s,
                (slot, Some(addr)) => {
                    let (s, took) = connect(addr, deadline, endpoint).await?;
                    *connects += 1;
                    took.record(phases);
                    connecting.set(false);
                    slot.insert(s)
                }
                (None, None) => unreachable!("an address is looked up when there is no connection"),
            };
            send(sender, req, body, phases).await
        }))?;
        Ok(Reply {
            seq,
            body: &self.body,
            server,
        })
    }

    fn reset(&mut self) {
        self.sender = None;
    }

    fn connects(&self) -> u64 {
        self.connects
    }
}

/// `http://host:port` for the endpoint's HTTP port (an IPv6 literal in brackets).
pub(super) fn origin(endpoint: &Endpoint) -> String {
    let host = endpoint.host();
    let host = if host.contains(':') {
        format!("[{host}]")
    } else {
        host
    };
    format!("{}://{host}:{}", endpoint.scheme(), endpoint.http_port)
}

/// Opens a connection and performs the HTTP/2 handshake (the client preface and the
/// first SETTINGS); the connection task runs on the current runtime. Returns the request
/// sender and how long the TCP connect took.
pub(super) async fn connect(
    addr: SocketAddr,
    deadline: Instant,
    endpoint: &Endpoint,
) -> Result<(SendRequest<Full<Bytes>>, super::Took), CallError> {
    let secure = endpoint.secure(super::tls::Alpn::H2);
    let (stream, took) = super::connect_nodelay(addr, secure, deadline).await?;
    let (sender, conn) = http2::handshake(TokioExecutor::new(), TokioIo::new(stream))
        .await
        .map_err(|e| http::classify(&e))?;
    tokio::spawn(async move {
        // Errors surface on the streams; the connection task just ends.
        let _ = conn.await;
    });
    Ok((sender, took))
}

/// The `POST /echo` request of one call, with an absolute URI (HTTP/2 sends its scheme
/// and authority as pseudo-headers).
pub(super) fn request(origin: &str, call: &Call<'_>) -> Result<http::Req, CallError> {
    let uri = format!("{origin}{}", Endpoint::echo_path(call));
    let mut req = hyper::Request::post(uri)
        .body(Full::new(Bytes::copy_from_slice(call.payload)))
        .map_err(|_| CallError::Protocol)?;
    let headers = req.headers_mut();
    headers.insert(crate::wire::SEQ_HEADER, HeaderValue::from(call.seq));
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/octet-stream"),
    );
    Ok(req)
}

/// Sends `req` as a new stream and reads the whole reply into `body`; returns the seq
/// header and the server time the reply carried.
pub(super) async fn send(
    sender: &mut SendRequest<Full<Bytes>>,
    req: http::Req,
    body: &mut Vec<u8>,
    phases: &mut Phases,
) -> Result<(Option<u64>, Option<Duration>), CallError> {
    sender.ready().await.map_err(|e| http::classify(&e))?;
    let sent = Instant::now();
    let resp = sender
        .send_request(req)
        .await
        .map_err(|e| http::classify(&e))?;
    phases.first_byte = Some(sent.elapsed());
    let status = resp.status().as_u16();
    let seq = http::header_seq(resp.headers());
    let server = http::server_timing(resp.headers());
    let mut incoming = resp.into_body();
    body.clear();
    while let Some(frame) = incoming.frame().await {
        let frame = frame.map_err(|e| http::classify(&e))?;
        if let Some(data) = frame.data_ref() {
            body.extend_from_slice(data);
        }
    }
    if status != 200 {
        return Err(CallError::HttpStatus(status));
    }
    Ok((seq, server))
}
