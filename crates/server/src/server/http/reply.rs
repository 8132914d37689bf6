//! The bytes of HTTP replies: status, headers and body of what [`super::route`] decided.
//!
//! Apart from the routing because this is where a request's instructions go: every reply
//! is built here, and the tricks that keep the hot path free of allocations live together
//! (a pattern body borrowed from a static table, the request's header map reused for the
//! reply, `server-timing` written with integer arithmetic), each with the figure that
//! justified it.

use crate::server::payload::Payload;
use crate::wire::SEQ_HEADER;
use bytes::Bytes;
use hyper::body::{Frame, SizeHint};
use hyper::header::{self, HeaderMap, HeaderName, HeaderValue};
use hyper::{Response, StatusCode};
use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

/// The body of every reply: its [`Payload`], handed to hyper a chunk at a time, so that a
/// large reply is never made whole and a client that stops reading holds no more of it
/// than hyper's buffers (see [`crate::server::payload`]).
///
/// Its exact length is known up front, so HTTP/1.1 replies carry a `content-length`
/// rather than chunked encoding, as they did when bodies were sent whole.
#[derive(Debug)]
pub(in crate::server) struct Body(Payload);

impl Body {
    fn bytes(bytes: Bytes) -> Body {
        Body(Payload::Bytes(bytes))
    }
}

impl hyper::body::Body for Body {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        Poll::Ready(self.get_mut().0.next_chunk().map(|c| Ok(Frame::data(c))))
    }

    fn is_end_stream(&self) -> bool {
        self.0.is_empty()
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.0.len() as u64)
    }
}

/// The content type of every echo reply, hyper's and the lean path's alike.
pub(super) const ECHO_CONTENT_TYPE: &str = "application/octet-stream";

/// [`SEQ_HEADER`] as a header name, so lookups and inserts skip parsing the string.
pub(super) static SEQ_NAME: HeaderName = HeaderName::from_static(SEQ_HEADER);
/// The reply header carrying the server's time for the request, `app;dur=<ms>`.
pub(super) static SERVER_TIMING: HeaderName = HeaderName::from_static("server-timing");

/// The reply to `/echo`: `payload`, the seq header when the request had a seq, and the
/// time since `got_it` as `server-timing`, read as late as possible.
///
/// `headers` is the request's header map: emptied, it keeps its allocation, and hyper
/// hands the response's map back for parsing the next request, so a connection allocates
/// one map, not one per request.
///
/// Inlined into its one caller: called, it moved the header map, the body and the reply
/// through memory, 20 instructions per request (callgrind, `GET /echo?reply_len=100`).
#[inline(always)]
pub(super) fn echo(
    payload: Payload,
    mut headers: HeaderMap,
    seq: Option<u64>,
    got_it: Instant,
) -> Response<Body> {
    let mut resp = Response::new(Body(payload));
    headers.clear();
    *resp.headers_mut() = headers;
    let headers = resp.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(ECHO_CONTENT_TYPE),
    );
    if let Some(seq) = seq {
        headers.insert(SEQ_NAME.clone(), unindexed(HeaderValue::from(seq)));
    }
    headers.insert(
        SERVER_TIMING.clone(),
        unindexed(server_timing(got_it.elapsed())),
    );
    resp
}

/// A header value that differs in every reply, marked so that HTTP/2's HPACK sends it as
/// a literal "never indexed": otherwise each one would be added to both ends' dynamic
/// tables and evict an older one, work for a value that never comes again (h2load's
/// requests, all constant, are decoded from the table alone). HTTP/1.1 ignores the mark.
pub(crate) fn unindexed(mut value: HeaderValue) -> HeaderValue {
    value.set_sensitive(true);
    value
}

/// A JSON reply (`/stats`).
pub(super) fn json(body: Vec<u8>) -> Response<Body> {
    let mut resp = Response::new(Body::bytes(Bytes::from(body)));
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    resp
}

/// The Prometheus text of `/metrics` (see [`crate::server::metrics`]).
pub(super) fn metrics(body: String) -> Response<Body> {
    let mut resp = Response::new(Body::bytes(Bytes::from(body)));
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(crate::server::metrics::CONTENT_TYPE),
    );
    resp
}

/// A 200 reply of `body`, of `content_type` (WSTest's calls, [`super::rpc`]).
pub(super) fn bytes(body: Bytes, content_type: &'static str) -> Response<Body> {
    let mut resp = Response::new(Body::bytes(body));
    resp.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    resp
}

/// A reply of `status` and no body.
pub(super) fn empty(status: StatusCode) -> Response<Body> {
    let mut resp = Response::new(Body::bytes(Bytes::new()));
    *resp.status_mut() = status;
    resp
}

/// A plain-text reply: `/healthz`, and every error with its one-line reason.
pub(super) fn text(status: StatusCode, body: &str) -> Response<Body> {
    let mut resp = Response::new(Body::bytes(Bytes::copy_from_slice(body.as_bytes())));
    *resp.status_mut() = status;
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    resp
}

/// Longest `server-timing` value: `app;dur=`, 20 digits of a u64, `.` and 3 decimals.
pub(super) const TIMING_MAX: usize = 32;

/// The `server-timing` header for a request that took `took` (gRPC sends the same value
/// as a trailer).
pub(in crate::server) fn server_timing(took: Duration) -> HeaderValue {
    let mut buf = [0u8; TIMING_MAX];
    let len = write_server_timing(took, &mut buf);
    HeaderValue::from_bytes(&buf[..len]).expect("digits and `app;dur=.` are valid header bytes")
}

/// Writes `app;dur=<milliseconds with 3 decimals>` into `buf` with integer arithmetic and
/// returns its length (a float `format!` was a measurable share of a request's CPU time).
pub(super) fn write_server_timing(took: Duration, buf: &mut [u8; TIMING_MAX]) -> usize {
    const PREFIX: &[u8] = b"app;dur=";
    // Round to the microsecond, as `{:.3}` of the milliseconds would; u64 arithmetic only.
    let micros = took
        .as_secs()
        .saturating_mul(1_000_000)
        .saturating_add(u64::from((took.subsec_nanos() + 500) / 1000));
    let (whole_ms, frac) = (micros / 1000, (micros % 1000) as u32);
    let mut scratch = [0; 20];
    let digits = crate::wire::decimal(whole_ms, &mut scratch);
    let n = digits.len();
    let mut len = PREFIX.len();
    buf[..len].copy_from_slice(PREFIX);
    buf[len..len + n].copy_from_slice(digits);
    len += n;
    buf[len] = b'.';
    buf[len + 1] = b'0' + (frac / 100) as u8;
    buf[len + 2] = b'0' + (frac / 10 % 10) as u8;
    buf[len + 3] = b'0' + (frac % 10) as u8;
    len + 4
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_timing_is_milliseconds_with_microseconds() {
        for (took, text) in [
            (Duration::ZERO, "app;dur=0.000"),
            (Duration::from_nanos(1_499), "app;dur=0.001"),
            (Duration::from_micros(1_500), "app;dur=1.500"),
            (Duration::from_millis(12_345), "app;dur=12345.000"),
            (Duration::from_nanos(999_999_600), "app;dur=1000.000"),
        ] {
            assert_eq!(server_timing(took).to_str().unwrap(), text);
            // The same as the float formatting it replaces.
            let float = format!("app;dur={:.3}", took.as_nanos() as f64 / 1e6);
            assert_eq!(server_timing(took).to_str().unwrap(), float);
        }
    }
}
