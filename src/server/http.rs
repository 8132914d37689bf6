//! HTTP listener (hyper): `POST /echo`, `GET /echo`, `GET /healthz`, `GET /stats`.
//!
//! HTTP/1.1 with keep-alive, and HTTP/2 with prior knowledge on the same port (hyper-util's
//! auto builder looks at the first bytes). Every error is a status with a one-line reason.

use super::Shared;
use super::registry::Registry;
use super::stats::{Reject, Stats};
use crate::wire::{self, SEQ_HEADER};
use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::{Body as _, Incoming};
use hyper::header::{self, HeaderName, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use std::convert::Infallible;
use std::io;
use std::pin::Pin;
use std::sync::atomic::AtomicU8;
use std::sync::atomic::Ordering::{AcqRel, Acquire};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::task::Waker;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};

/// [`SEQ_HEADER`] as a header name, so lookups and inserts skip parsing the string.
static SEQ_NAME: HeaderName = HeaderName::from_static(SEQ_HEADER);
/// The reply header carrying the server's time for the request, `app;dur=<ms>`.
static SERVER_TIMING: HeaderName = HeaderName::from_static("server-timing");

/// How often an HTTP connection checks whether it has been idle too long. A tenth of the
/// timeout keeps the overshoot small without waking often: a connection is closed when
/// this many checks in a row saw no byte move, between 1 and 1.1 timeouts after the last.
const IDLE_CHECKS_PER_TIMEOUT: u32 = 10;

type Body = Full<Bytes>;

/// Accepts connections until shutdown starts.
pub(super) async fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    let mut builder = auto::Builder::new(TokioExecutor::new());
    // An HTTP/1 client may shut its write side once its request is sent (`nc -N` does, and
    // nginx allows it). Without this, hyper also probes for that end of file while every
    // request is being answered, which re-allocated its 8 KiB read buffer per request.
    //
    // Replies are copied behind their headers and written with one `write` instead of a
    // `writev` of both: for the small replies of RPC tests, hyper's bookkeeping of a
    // vectored write cost more than the copy (callgrind: 8.6k -> 8.1k instructions per
    // 100-byte reply). A 1 MiB reply pays one extra memcpy, within the noise of its
    // millisecond round trip here.
    builder.http1().half_close(true).writev(false);
    let builder = Arc::new(builder);
    let watched = Arc::new(Registry::<Watch>::default());
    tokio::spawn(watch(watched.clone(), shared.clone()));
    while let Some((stream, guard)) = shared.next_connection(&listener, |s: &Stats| &s.http).await {
        let (shared, builder, watched) = (shared.clone(), builder.clone(), watched.clone());
        tokio::spawn(async move {
            let _guard = guard;
            serve(stream, &builder, shared, &watched).await;
        });
    }
}

/// Why a connection is told to close.
const CLOSE_IDLE: u8 = 1;
const CLOSE_SHUTDOWN: u8 = 2;

/// A connection as the watcher sees it. Watching from outside keeps timers and the
/// shutdown signal out of every connection's wake-ups, which happen once or twice per
/// request.
struct Watch {
    conn: Arc<ConnState>,
    /// The connection's `moves` count at the last check.
    moves_seen: u64,
    /// Checks in a row that saw `moves` unchanged and no request in flight.
    quiet_checks: u32,
}

/// Every tenth of the idle timeout, tells connections quiet for a whole timeout to close;
/// at shutdown, tells every connection.
async fn watch(watched: Arc<Registry<Watch>>, shared: Arc<Shared>) {
    let mut check = tokio::time::interval(shared.config.idle_timeout / IDLE_CHECKS_PER_TIMEOUT);
    let stopping = super::stopping(shared.shutdown.clone());
    tokio::pin!(stopping);
    loop {
        tokio::select! {
            _ = check.tick() => watched.for_each(|w| {
                let now = w.conn.moves.load(Relaxed);
                if now != w.moves_seen || w.conn.in_flight.load(Relaxed) > 0 {
                    (w.moves_seen, w.quiet_checks) = (now, 0);
                } else {
                    w.quiet_checks += 1;
                }
                if w.quiet_checks >= IDLE_CHECKS_PER_TIMEOUT {
                    w.conn.tell_close(CLOSE_IDLE);
                }
            }),
            _ = &mut stopping => {
                watched.close(|w| w.conn.tell_close(CLOSE_SHUTDOWN));
                return;
            }
        }
    }
}

/// Serves one connection, closing it when idle too long or when shutdown starts.
async fn serve(
    stream: TcpStream,
    builder: &auto::Builder<TokioExecutor>,
    shared: Arc<Shared>,
    watched: &Arc<Registry<Watch>>,
) {
    let _ = stream.set_nodelay(true);
    let conn_state = Arc::new(ConnState {
        shared: shared.clone(),
        in_flight: AtomicUsize::new(0),
        moves: AtomicU64::new(0),
        close: AtomicU8::new(0),
        waker: Mutex::new(None),
    });
    let io = CountingIo {
        inner: stream,
        state: conn_state.clone(),
    };
    let service = {
        let conn_state = conn_state.clone();
        hyper::service::service_fn(move |req| {
            let state = conn_state.clone();
            async move {
                // A guard, not a decrement after the await: hyper drops this future when
                // an HTTP/2 client cancels the stream, and the count must still go down.
                let _busy = InFlight::enter(&state.in_flight);
                let resp = route(req, &state.shared).await;
                Ok::<_, Infallible>(resp)
            }
        })
    };
    // Refused once shutdown has begun: returning closes the connection.
    let Some(_registered) = watched.add(Watch {
        conn: conn_state.clone(),
        moves_seen: 0,
        quiet_checks: 0,
    }) else {
        return;
    };
    let conn = builder.serve_connection(TokioIo::new(io), service);
    tokio::pin!(conn);
    let mut closing = false;
    let mut registered: Option<Waker> = None;
    let res = std::future::poll_fn(|cx| {
        // Hand this task's waker to the watcher before reading `close`: a close told
        // after the read then finds the waker and wakes us.
        if !registered.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
            *conn_state.waker.lock().unwrap_or_else(|e| e.into_inner()) = Some(cx.waker().clone());
            registered = Some(cx.waker().clone());
        }
        if !closing {
            let why = conn_state.close.load(Acquire);
            if why != 0 {
                if why == CLOSE_IDLE {
                    shared.stats.reject(Reject::IdleTimeout);
                }
                // Requests in flight finish; an idle keep-alive connection closes now.
                conn.as_mut().graceful_shutdown();
                closing = true;
            }
        }
        conn.as_mut().poll(cx)
    })
    .await;
    // Closing a connection that never sent a byte cancels hyper's protocol detection,
    // which ends in an error; that close was ours, not theirs.
    if res.is_err() && conn_state.close.load(Acquire) == 0 {
        shared.stats.reject(Reject::HttpConnectionError);
    }
}

/// What the requests of one connection share, and how the watcher reaches it.
struct ConnState {
    shared: Arc<Shared>,
    /// Requests being answered on this connection.
    in_flight: AtomicUsize,
    /// Reads and writes that moved data. Only this connection's task writes it.
    moves: AtomicU64,
    /// Set by the watcher: [`CLOSE_IDLE`] or [`CLOSE_SHUTDOWN`].
    close: AtomicU8,
    /// The connection task's waker, for the watcher to wake it after setting `close`.
    waker: Mutex<Option<Waker>>,
}

impl ConnState {
    /// Asks the connection to close (the first reason given wins) and wakes its task.
    fn tell_close(&self, why: u8) {
        if self.close.compare_exchange(0, why, AcqRel, Acquire).is_ok()
            && let Some(waker) = self.waker.lock().unwrap_or_else(|e| e.into_inner()).take()
        {
            waker.wake();
        }
    }
}

/// Counts a request in flight on a connection for as long as it lives.
struct InFlight<'a>(&'a AtomicUsize);

impl InFlight<'_> {
    fn enter(count: &AtomicUsize) -> InFlight<'_> {
        count.fetch_add(1, Relaxed);
        InFlight(count)
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Relaxed);
    }
}

/// Answers one request.
async fn route(req: Request<Incoming>, shared: &Shared) -> Response<Body> {
    shared.stats.http.requests.fetch_add(1, Relaxed);
    let got_it = Instant::now();
    let result = match (req.uri().path(), req.method()) {
        ("/echo", &Method::POST | &Method::GET) => echo(req, shared, got_it).await,
        ("/healthz", &Method::GET) => Ok(text(StatusCode::OK, "ok")),
        ("/stats", &Method::GET) => {
            let json = serde_json::to_vec(&shared.stats.snapshot()).unwrap_or_default();
            let mut resp = Response::new(Full::new(Bytes::from(json)));
            resp.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            );
            Ok(resp)
        }
        ("/echo", _) => Err(HttpError::MethodNotAllowed("GET, POST")),
        ("/healthz" | "/stats", _) => Err(HttpError::MethodNotAllowed("GET")),
        (path, _) => Err(HttpError::NotFound(path.to_string())),
    };
    result.unwrap_or_else(|e| {
        shared.stats.reject(e.kind());
        let mut resp = text(e.status(), &format!("{e}\n"));
        if let HttpError::MethodNotAllowed(allow) = e {
            resp.headers_mut()
                .insert(header::ALLOW, HeaderValue::from_static(allow));
        }
        resp
    })
}

/// A request the server refuses, with the one-line reason sent back as the body.
#[derive(Debug, thiserror::Error)]
enum HttpError {
    #[error("bad request: {0}")]
    BadRequest(String),
    #[error("no such path: {0}")]
    NotFound(String),
    #[error("method not allowed; allowed: {0}")]
    MethodNotAllowed(&'static str),
    #[error("body is larger than the maximum of {0} bytes")]
    PayloadTooLarge(u32),
}

impl HttpError {
    fn status(&self) -> StatusCode {
        match self {
            HttpError::BadRequest(_) => StatusCode::BAD_REQUEST,
            HttpError::NotFound(_) => StatusCode::NOT_FOUND,
            HttpError::MethodNotAllowed(_) => StatusCode::METHOD_NOT_ALLOWED,
            HttpError::PayloadTooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
        }
    }

    fn kind(&self) -> Reject {
        match self {
            HttpError::BadRequest(_) => Reject::HttpBadRequest,
            HttpError::NotFound(_) => Reject::HttpNotFound,
            HttpError::MethodNotAllowed(_) => Reject::HttpMethodNotAllowed,
            HttpError::PayloadTooLarge(_) => Reject::HttpPayloadTooLarge,
        }
    }
}

/// The parameters of `/echo`, from the query string and the seq header.
#[derive(Debug, Default, PartialEq)]
struct EchoParams {
    seq: Option<u64>,
    reply_len: Option<u32>,
    delay_us: u32,
}

impl EchoParams {
    /// Parses the query string; unknown keys are ignored, bad numbers are a 400.
    ///
    /// Splits on bytes rather than chars: `&` and `=` are ASCII, so every slice still
    /// falls on a char boundary, and this runs for every request.
    fn parse(query: Option<&str>) -> Result<EchoParams, HttpError> {
        let mut params = EchoParams::default();
        let mut rest = query.unwrap_or("");
        while !rest.is_empty() {
            let (pair, tail) = split_at_byte(rest, b'&');
            rest = tail;
            let (key, value) = split_at_byte(pair, b'=');
            let bad = |what: &str| HttpError::BadRequest(format!("{key}={value:?} is not {what}"));
            match key {
                "reply_len" => {
                    params.reply_len = Some(value.parse().map_err(|_| bad("a byte count"))?)
                }
                "delay_us" => {
                    params.delay_us = value.parse().map_err(|_| bad("a number of microseconds"))?
                }
                "seq" => params.seq = Some(value.parse().map_err(|_| bad("an unsigned integer"))?),
                _ => {}
            }
        }
        Ok(params)
    }
}

/// `text` split at the first `sep` (which is dropped), or all of it and `""`.
fn split_at_byte(text: &str, sep: u8) -> (&str, &str) {
    match text.bytes().position(|b| b == sep) {
        Some(i) => (&text[..i], &text[i + 1..]),
        None => (text, ""),
    }
}

async fn echo(
    req: Request<Incoming>,
    shared: &Shared,
    got_it: Instant,
) -> Result<Response<Body>, HttpError> {
    let config = &shared.config;
    let (parts, body) = req.into_parts();
    let mut params = EchoParams::parse(parts.uri.query())?;
    if let Some(value) = parts.headers.get(&SEQ_NAME) {
        let seq = value
            .to_str()
            .ok()
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| {
                HttpError::BadRequest(format!("{SEQ_HEADER} {value:?} is not an unsigned integer"))
            })?;
        params.seq = Some(seq);
    }
    if u64::from(params.delay_us) > config.max_delay.as_micros() as u64 {
        return Err(HttpError::BadRequest(format!(
            "delay_us={} is above the maximum of {} µs",
            params.delay_us,
            config.max_delay.as_micros()
        )));
    }
    if let Some(n) = params.reply_len.filter(|&n| n > config.max_frame) {
        return Err(HttpError::BadRequest(format!(
            "reply_len={n} is above the maximum of {} bytes",
            config.max_frame
        )));
    }
    let is_get = parts.method == Method::GET;
    if is_get && params.reply_len.is_none() {
        return Err(HttpError::BadRequest("GET /echo needs ?reply_len=N".into()));
    }
    let body = if body.is_end_stream() {
        // No body (a GET, or Content-Length: 0): skip the collecting machinery.
        Bytes::new()
    } else {
        // Refuse a declared oversized body before reading any of it.
        let declared = parts
            .headers
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok());
        if declared.is_some_and(|n| n > u64::from(config.max_frame)) {
            return Err(HttpError::PayloadTooLarge(config.max_frame));
        }
        Limited::new(body, config.max_frame as usize)
            .collect()
            .await
            .map_err(|e| {
                if e.is::<http_body_util::LengthLimitError>() {
                    HttpError::PayloadTooLarge(config.max_frame)
                } else {
                    HttpError::BadRequest(format!("cannot read body: {e}"))
                }
            })?
            .to_bytes()
    };
    if params.delay_us > 0 {
        super::sleep_until(got_it + Duration::from_micros(params.delay_us.into())).await;
    }
    let payload = match params.reply_len {
        None => body,
        Some(n) => pattern_bytes(params.seq.unwrap_or(0), n as usize),
    };
    let mut resp = Response::new(Full::new(payload));
    // The request's header map, emptied, keeps its allocation; hyper hands the response's
    // map back for parsing the next request, so a connection allocates one map, not one
    // per request.
    let mut headers = parts.headers;
    headers.clear();
    *resp.headers_mut() = headers;
    let headers = resp.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/octet-stream"),
    );
    if let Some(seq) = params.seq {
        headers.insert(SEQ_NAME.clone(), HeaderValue::from(seq));
    }
    headers.insert(SERVER_TIMING.clone(), server_timing(got_it.elapsed()));
    Ok(resp)
}

/// `n` bytes of the reply pattern for `seq`: borrowed from the static table in
/// [`wire::pattern_static`] when it is short enough, so the common case allocates nothing.
fn pattern_bytes(seq: u64, n: usize) -> Bytes {
    match wire::pattern_static(seq, n) {
        Some(slice) => Bytes::from_static(slice),
        None => {
            let mut p = Vec::new();
            wire::pattern(seq, n, &mut p);
            Bytes::from(p)
        }
    }
}

/// Longest `server-timing` value: `app;dur=`, 20 digits of a u64, `.` and 3 decimals.
const TIMING_MAX: usize = 32;

/// The `server-timing` header for a request that took `took`.
fn server_timing(took: Duration) -> HeaderValue {
    let mut buf = [0u8; TIMING_MAX];
    let len = write_server_timing(took, &mut buf);
    HeaderValue::from_bytes(&buf[..len]).expect("digits and `app;dur=.` are valid header bytes")
}

/// Writes `app;dur=<milliseconds with 3 decimals>` into `buf` with integer arithmetic and
/// returns its length (a float `format!` was a measurable share of a request's CPU time).
fn write_server_timing(took: Duration, buf: &mut [u8; TIMING_MAX]) -> usize {
    const PREFIX: &[u8] = b"app;dur=";
    // Round to the microsecond, as `{:.3}` of the milliseconds would; u64 arithmetic only.
    let micros = took
        .as_secs()
        .saturating_mul(1_000_000)
        .saturating_add(u64::from((took.subsec_nanos() + 500) / 1000));
    let (whole_ms, frac) = (micros / 1000, (micros % 1000) as u32);
    let mut digits = [0u8; 20];
    let n = write_decimal(whole_ms, &mut digits);
    let mut len = PREFIX.len();
    buf[..len].copy_from_slice(PREFIX);
    buf[len..len + n].copy_from_slice(&digits[digits.len() - n..]);
    len += n;
    buf[len] = b'.';
    buf[len + 1] = b'0' + (frac / 100) as u8;
    buf[len + 2] = b'0' + (frac / 10 % 10) as u8;
    buf[len + 3] = b'0' + (frac % 10) as u8;
    len + 4
}

/// Writes `n` in decimal at the end of `buf`; returns how many bytes it took.
fn write_decimal(mut n: u64, buf: &mut [u8; 20]) -> usize {
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            return buf.len() - i;
        }
    }
}

fn text(status: StatusCode, body: &str) -> Response<Body> {
    let mut resp = Response::new(Full::new(Bytes::copy_from_slice(body.as_bytes())));
    *resp.status_mut() = status;
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    resp
}

/// A TCP stream that counts bytes for /stats and counts its reads and writes, so the
/// watcher can close the connection after the idle timeout. A count rather than a
/// timestamp: the watcher only needs to know whether anything moved since it last looked,
/// and reading the clock twice per request was a measurable share of the server's time.
struct CountingIo {
    inner: TcpStream,
    state: Arc<ConnState>,
}

impl CountingIo {
    fn moved(&self, n: usize, counter: fn(&Stats) -> &AtomicU64) {
        if n > 0 {
            counter(&self.state.shared.stats).fetch_add(n as u64, Relaxed);
            let moves = &self.state.moves;
            moves.store(moves.load(Relaxed).wrapping_add(1), Relaxed);
        }
    }
}

impl AsyncRead for CountingIo {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let res = Pin::new(&mut self.inner).poll_read(cx, buf);
        let n = buf.filled().len() - before;
        self.moved(n, |s| &s.http.bytes_in);
        res
    }
}

impl AsyncWrite for CountingIo {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let res = Pin::new(&mut self.inner).poll_write(cx, buf);
        if let Poll::Ready(Ok(n)) = res {
            self.moved(n, |s| &s.http.bytes_out);
        }
        res
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let res = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        if let Poll::Ready(Ok(n)) = res {
            self.moved(n, |s| &s.http.bytes_out);
        }
        res
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
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

    #[test]
    fn pattern_bodies_are_the_wire_pattern() {
        let max = wire::PATTERN_STATIC_MAX;
        for (seq, n) in [(0, 0), (255, 3), (7, max), (9, max + 1)] {
            let body = pattern_bytes(seq, n);
            assert!(
                body.len() == n && wire::is_pattern(seq, &body),
                "seq {seq} len {n}"
            );
        }
    }

    #[test]
    fn query_parsing() {
        assert_eq!(
            EchoParams::parse(Some("reply_len=10&delay_us=5&seq=7&x=1")).unwrap(),
            EchoParams {
                seq: Some(7),
                reply_len: Some(10),
                delay_us: 5
            }
        );
        assert_eq!(EchoParams::parse(None).unwrap(), EchoParams::default());
        assert!(EchoParams::parse(Some("reply_len=-1")).is_err());
        assert!(EchoParams::parse(Some("delay_us=abc")).is_err());
        assert!(EchoParams::parse(Some("reply_len")).is_err());
    }
}
