//! The hyper client of the blocking `http-fresh` (connecting, one request/response
//! exchange, reading the reply headers the server adds), and the header name and
//! `server-timing` parser every HTTP transport shares. `http-keepalive`, and `http-fresh`
//! on the event loop, speak through the lean codec in `h1.rs` instead.

use super::{Call, CallError, Endpoint, OpenTransportError, Phases};
use crate::wire::SEQ_HEADER;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::{self, SendRequest};
use hyper::header::{self, HeaderMap, HeaderValue};
use hyper_util::rt::TokioIo;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A current-thread runtime for one worker's hyper transport: the worker blocks on it for
/// each call, so the async client runs on the worker's own thread with no hand-off.
pub(super) fn worker_runtime() -> Result<tokio::runtime::Runtime, OpenTransportError> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(OpenTransportError::Runtime)
}

/// The connection half of a handshake: a future that drives the socket.
pub(super) type Conn =
    http1::Connection<TokioIo<super::tls::Watched<super::tls::AsyncSock>>, Full<Bytes>>;

/// Opens a connection (TLS with ALPN `http/1.1` on a TLS endpoint) and performs the
/// HTTP/1.1 handshake, leaving the connection future to the caller (a one-call connection
/// drives it in its own task, with no spawn).
pub(super) async fn open(
    addr: SocketAddr,
    deadline: std::time::Instant,
    endpoint: &Endpoint,
) -> Result<
    (
        SendRequest<Full<Bytes>>,
        Conn,
        super::Took,
        Arc<super::tls::TlsNoted>,
    ),
    CallError,
> {
    let secure = endpoint.secure(super::tls::Alpn::Http1);
    let (stream, took) = super::connect_nodelay(addr, secure, deadline, &endpoint.tcp_info).await?;
    let noted = Arc::new(super::tls::TlsNoted::default());
    let watched = super::tls::Watched::new(stream, noted.clone());
    let (sender, conn) = http1::handshake(TokioIo::new(watched))
        .await
        .map_err(|e| classify(&e))?;
    Ok((sender, conn, took, noted))
}

/// What the `POST /echo` requests of one transport have in common, built once: the `Host`
/// value and the path with its query (both fixed for a run), so a call only fills in its
/// seq and body.
#[derive(Debug)]
pub(super) struct Template {
    host: HeaderValue,
    /// The query parameters the path was built for, and the parsed path.
    path: Option<((Option<u32>, u32), hyper::Uri)>,
}

impl Template {
    pub fn new(endpoint: &Endpoint) -> Template {
        let host = HeaderValue::from_str(&format!("{}:{}", endpoint.host(), endpoint.http_port))
            .unwrap_or_else(|_| HeaderValue::from_static("localhost"));
        Template { host, path: None }
    }

    /// The `POST /echo` request for one call.
    pub fn request(&mut self, call: &Call<'_>, close: bool) -> Result<Req, CallError> {
        let key = (call.reply_len, call.delay_us);
        let uri = match &self.path {
            Some((built_for, uri)) if *built_for == key => uri.clone(),
            _ => {
                let uri: hyper::Uri = Endpoint::echo_path(call)
                    .parse()
                    .map_err(|_| CallError::Protocol)?;
                self.path = Some((key, uri.clone()));
                uri
            }
        };
        let mut req = hyper::Request::post(uri)
            .body(Full::new(Bytes::copy_from_slice(call.payload)))
            .map_err(|_| CallError::Protocol)?;
        let headers = req.headers_mut();
        headers.insert(header::HOST, self.host.clone());
        headers.insert(SEQ_HEADER, HeaderValue::from(call.seq));
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/octet-stream"),
        );
        if close {
            headers.insert(header::CONNECTION, HeaderValue::from_static("close"));
        }
        Ok(req)
    }
}

/// A request as hyper takes it.
pub(super) type Req = hyper::Request<Full<Bytes>>;

/// Sends `req` and reads the whole reply into `body`, at most `max_body` bytes of it (a
/// larger reply fails as `ReplyTooLarge`, before it is held). Returns the seq header and
/// the server time the reply carried. A connection found closed before any byte of the
/// request was written (hyper hands the request back) is `Closed`, as any connection that
/// ends before the reply: `http-fresh` never resends on its new connection.
pub(super) async fn send(
    sender: &mut SendRequest<Full<Bytes>>,
    req: Req,
    body: &mut Vec<u8>,
    max_body: usize,
    phases: &mut Phases,
) -> Result<(Option<u64>, Option<Duration>), CallError> {
    sender.ready().await.map_err(|e| classify(&e))?;
    let sent = Instant::now();
    let resp = match sender.try_send_request(req).await {
        Ok(resp) => resp,
        Err(mut e) => {
            return Err(match e.take_message() {
                Some(_unsent) => CallError::Closed,
                None => classify(e.error()),
            });
        }
    };
    phases.first_byte = Some(sent.elapsed());
    let status = resp.status().as_u16();
    let seq = header_seq(resp.headers());
    let server = server_timing(resp.headers());
    let mut incoming = resp.into_body();
    body.clear();
    while let Some(frame) = incoming.frame().await {
        let frame = frame.map_err(|e| classify(&e))?;
        if let Some(data) = frame.data_ref() {
            if body.len() + data.len() > max_body {
                return Err(CallError::ReplyTooLarge);
            }
            body.extend_from_slice(data);
        }
    }
    if status != 200 {
        return Err(CallError::HttpStatus(status));
    }
    Ok((seq, server))
}

/// The sequence number in the reply's `x-rpcbench-seq`, if present and numeric.
pub(super) fn header_seq(headers: &HeaderMap) -> Option<u64> {
    headers.get(SEQ_HEADER)?.to_str().ok()?.trim().parse().ok()
}

/// The server time in a `server-timing: app;dur=<ms>` header.
pub(super) fn server_timing(headers: &HeaderMap) -> Option<Duration> {
    parse_server_timing(headers.get("server-timing")?.as_bytes())
}

/// Nanoseconds in a millisecond.
const NS_PER_MS: u64 = 1_000_000;

/// Parses `app;dur=<milliseconds>` (the first metric with a `dur`). Read on every call of
/// every HTTP transport, so the usual form (digits, a point, digits) is read digit by
/// digit, exact to the nanosecond; anything else (an exponent, say) goes through `f64`.
pub fn parse_server_timing(value: &[u8]) -> Option<Duration> {
    let at = value.windows(DUR.len()).position(|w| w == DUR)? + DUR.len();
    let rest = &value[at..];
    let end = rest
        .iter()
        .position(|&b| b == b',' || b == b';')
        .unwrap_or(rest.len());
    let ms = rest[..end].trim_ascii();
    decimal_ms(ms).or_else(|| {
        let ms: f64 = std::str::from_utf8(ms).ok()?.parse().ok()?;
        Duration::try_from_secs_f64(ms / 1e3).ok()
    })
}

/// The parameter of a `server-timing` metric that holds its duration.
const DUR: &[u8] = b"dur=";

/// `<digits>[.<digits>]` milliseconds, or `None` for any other form.
fn decimal_ms(ms: &[u8]) -> Option<Duration> {
    let (whole, frac) = match ms.iter().position(|&b| b == b'.') {
        Some(dot) => (&ms[..dot], &ms[dot + 1..]),
        None => (ms, &[][..]),
    };
    if whole.is_empty() || !whole.iter().chain(frac).all(u8::is_ascii_digit) {
        return None;
    }
    let digits = |d: &[u8]| {
        d.iter().try_fold(0u64, |n, &b| {
            n.checked_mul(10)?.checked_add(u64::from(b - b'0'))
        })
    };
    // Digits past the nanosecond are dropped, as a float would round them away.
    let frac = &frac[..frac.len().min(NS_PER_MS.ilog10() as usize)];
    let frac_ns = digits(frac)? * 10u64.pow(NS_PER_MS.ilog10() - frac.len() as u32);
    Some(Duration::from_nanos(
        digits(whole)?
            .checked_mul(NS_PER_MS)?
            .checked_add(frac_ns)?,
    ))
}

/// Maps a hyper error to how the call ended.
pub(super) fn classify(e: &hyper::Error) -> CallError {
    if let Some(failure) = super::tls::TlsFailure::in_chain(e) {
        return CallError::Tls(failure);
    }
    if let Some(io) = std::error::Error::source(e).and_then(|s| s.downcast_ref::<std::io::Error>())
    {
        return CallError::from_io(io);
    }
    if e.is_timeout() {
        CallError::Timeout
    } else if e.is_closed() || e.is_incomplete_message() || e.is_canceled() {
        CallError::Closed
    } else {
        CallError::Protocol
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_timing_values() {
        let parse = |v: &str| parse_server_timing(v.as_bytes());
        assert_eq!(parse("app;dur=1.500"), Some(Duration::from_micros(1500)));
        assert_eq!(parse("app; dur=0.001"), Some(Duration::from_micros(1)));
        assert_eq!(parse("app;dur=12"), Some(Duration::from_millis(12)));
        assert_eq!(parse("app;dur=0.0000015"), Some(Duration::from_nanos(1)));
        assert_eq!(
            parse("app;dur=2.5, db;dur=1"),
            Some(Duration::from_micros(2500))
        );
        assert_eq!(parse("app;dur=1e-3"), Some(Duration::from_micros(1)));
        assert_eq!(parse("app"), None);
        assert_eq!(parse("app;dur=x"), None);
        assert_eq!(parse("app;dur=-1"), None);
    }
}
