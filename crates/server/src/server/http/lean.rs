//! HTTP/1.1 keep-alive `/echo` without hyper: the hot path of an RPC test, read, parsed
//! (httparse), answered and written by the connection's own task.
//!
//! Only the plainest request takes it: HTTP/1.1, `GET` or `POST` `/echo` with valid
//! parameters within the limits, a `content-length` body (or none) of at most
//! [`BODY_MAX`] bytes, a reply of at most [`BODY_MAX`], and no `transfer-encoding`,
//! `expect`, `connection` or `upgrade` header. Any other request (a refusal to make, a
//! chunked or large body, 100-continue, `Connection: close`, HTTP/1.0, a malformed or
//! oversized head, an end of stream in the middle of a request) is handed to hyper with
//! the bytes read so far, and hyper serves the rest of the connection exactly as it served
//! every connection before: its answers, its limits and its counters stay the only ones.
//!
//! Why: under `wrk -t1 -c64` (one server thread, 100-byte replies) hyper's HTTP/1 server
//! spent about 5.7 µs a request here against nginx's 5.4 (`report/peers.sh`); the system
//! calls are the same for both (one read, one write, a share of an `epoll_wait`), and the
//! difference is hyper's connection state machine, header maps and body plumbing per
//! request. This path makes no allocation per request: the connection's read buffer and
//! reply buffer are reused, and the reply is one `write`.
//!
//! What stays the same as hyper's replies: the status line, `content-type`,
//! `x-rpcbench-seq`, `server-timing`, `content-length` and `date` headers, and the body;
//! the request counter, the bytes in and out, and the idle and write timeouts (the
//! watcher's counters are moved as hyper's path moves them).

use super::params::EchoParams;
use super::reply::{ECHO_CONTENT_TYPE, write_server_timing};
use super::{CloseReason, ConnState, CountingIo, HttpIo, InFlight, count_close, count_moved};
use crate::server::stats::Reject;
use crate::wire::SEQ_HEADER;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::Ordering::Relaxed;
use std::task::{Poll, Waker};
use std::time::{Duration, Instant, SystemTime};

/// Largest request body, and largest reply body, answered here: hyper's write buffer
/// (`WRITE_BUFFER`), so that a client that stops reading holds no more on this path than
/// on hyper's.
pub(super) const BODY_MAX: usize = 8 * 1024;

/// Largest request head looked at here (hyper's own first read buffer): a longer one is
/// hyper's to take or refuse (431).
const HEAD_MAX: usize = 8 * 1024;

/// Headers parsed here; a request with more is hyper's (which takes up to 100).
const MAX_HEADERS: usize = 32;

/// The read buffer's capacity above which it is freed while the connection waits for its
/// next request, so that an idle keep-alive connection holds no more than hyper's would.
const KEEP_IDLE: usize = 2 * 1024;

/// How a connection left this path.
pub(super) enum Lean {
    /// The connection is done: closed by the client, told to close, or failed (counted).
    Done,
    /// The next request is hyper's: its bytes so far wait in `io.head` from `taken` on.
    Hyper,
}

/// What one request asks, when it is one this path answers.
struct Echo {
    /// Where the request's body starts (the head's length), and its length.
    body_at: usize,
    body_len: usize,
    params: EchoParams,
}

impl Echo {
    /// The bytes of the request's body within `request`, which starts with the request.
    fn body<'a>(&self, request: &'a [u8]) -> &'a [u8] {
        &request[self.body_at..self.len()]
    }

    /// The whole request's length: head and body.
    fn len(&self) -> usize {
        self.body_at + self.body_len
    }
}

/// Serves requests while they are ones this path answers. Starts with the first
/// request's head in `io.head` (read by `first_head`).
pub(super) async fn serve<S: HttpIo>(
    io: &mut CountingIo<S>,
    state: &ConnState,
    registered: &mut Option<Waker>,
) -> Lean {
    let mut out: Vec<u8> = Vec::new();
    loop {
        if io.head.taken == io.head.bytes.len() {
            // Between requests: the buffer goes back to empty (freed if it grew), and the
            // next bytes are waited for with the watcher's close in view.
            io.head.taken = 0;
            io.head.bytes.clear();
            if io.head.bytes.capacity() > KEEP_IDLE {
                io.head.bytes = Vec::new();
            }
            if out.capacity() > KEEP_IDLE {
                out = Vec::new();
            }
        }
        let echo = match parse(&io.head.bytes[io.head.taken..], state) {
            Parsed::Echo(echo) => echo,
            Parsed::Hyper => return Lean::Hyper,
            Parsed::More => match read_more(io, state, registered).await {
                Ok(true) => continue,
                // The end of the stream: clean between requests, hyper's to judge (and
                // count) in the middle of one.
                Ok(false) if io.head.taken == io.head.bytes.len() => return Lean::Done,
                Ok(false) => return Lean::Hyper,
                Err(Stop::Failed) => {
                    state.shared.stats.reject(Reject::HttpConnectionError);
                    return Lean::Done;
                }
                Err(Stop::Told(why)) => {
                    count_close(&state.shared, why);
                    return Lean::Done;
                }
            },
        };
        let mut busy = InFlight::enter(state, false);
        state.shared.stats.http.requests.fetch_add(1, Relaxed);
        let got_it = Instant::now();
        if echo.params.delay_us > 0 {
            let delay = Duration::from_micros(echo.params.delay_us.into());
            crate::server::sleep_until(got_it + delay).await;
        }
        let body = echo.body(&io.head.bytes[io.head.taken..]);
        write_reply(&mut out, &echo.params, body, got_it);
        busy.answered = true;
        drop(busy);
        io.head.taken += echo.len();
        if let Err(stop) = write_all(io, state, registered, &out).await {
            if let Stop::Told(why) = stop {
                count_close(&state.shared, why);
            } else {
                state.shared.stats.reject(Reject::HttpConnectionError);
            }
            return Lean::Done;
        }
        // A close told while the request was answered (shutdown, which lets requests in
        // flight finish) closes the connection now.
        if let Some(why) = state.close.get() {
            count_close(&state.shared, why);
            return Lean::Done;
        }
    }
}

/// What [`parse`] found at the start of the buffer.
enum Parsed {
    /// A whole request this path answers.
    Echo(Echo),
    /// Not all of the request is in yet (and it may still be one of ours).
    More,
    /// A request for hyper, or bytes hyper must judge.
    Hyper,
}

/// Parses the request at the start of `buf`.
fn parse(buf: &[u8], state: &ConnState) -> Parsed {
    if buf.is_empty() {
        return Parsed::More;
    }
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut headers);
    let head_len = match req.parse(buf) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) if buf.len() < HEAD_MAX => return Parsed::More,
        // Too long, too many headers, or malformed: hyper answers it.
        _ => return Parsed::Hyper,
    };
    let (Some(method), Some(target), Some(1)) = (req.method, req.path, req.version) else {
        return Parsed::Hyper;
    };
    let is_get = match method {
        "GET" => true,
        "POST" => false,
        _ => return Parsed::Hyper,
    };
    let (path, query) = match target.split_once('?') {
        Some((path, query)) => (path, Some(query)),
        None => (target, None),
    };
    if path != "/echo" {
        return Parsed::Hyper;
    }
    let Ok(mut params) = EchoParams::parse(query) else {
        return Parsed::Hyper;
    };
    let mut body_len = 0usize;
    let mut lengths = 0;
    for h in req.headers.iter() {
        if h.name.eq_ignore_ascii_case("content-length") {
            lengths += 1;
            match parse_decimal(h.value) {
                Some(n) => body_len = n,
                None => return Parsed::Hyper,
            }
        } else if h.name.eq_ignore_ascii_case(SEQ_HEADER) {
            match parse_decimal(h.value) {
                Some(seq) => params.seq = Some(seq as u64),
                None => return Parsed::Hyper,
            }
        } else if ["transfer-encoding", "expect", "connection", "upgrade"]
            .iter()
            .any(|name| h.name.eq_ignore_ascii_case(name))
        {
            return Parsed::Hyper;
        }
    }
    let config = &state.shared.config;
    let reply_len = params.reply_len.map_or(body_len, |n| n as usize);
    if lengths > 1
        || body_len > BODY_MAX
        || body_len as u64 > u64::from(config.max_frame)
        || reply_len > BODY_MAX
        || u64::from(params.delay_us) > config.max_delay.as_micros() as u64
        || params.reply_len.is_some_and(|n| n > config.max_frame)
        || (is_get && params.reply_len.is_none())
    {
        return Parsed::Hyper;
    }
    if buf.len() < head_len + body_len {
        return Parsed::More;
    }
    Parsed::Echo(Echo {
        body_at: head_len,
        body_len,
        params,
    })
}

/// A header value of decimal digits only (at most 19, so that it fits), or `None`.
fn parse_decimal(value: &[u8]) -> Option<usize> {
    if value.is_empty() || value.len() > 19 || !value.iter().all(u8::is_ascii_digit) {
        return None;
    }
    value.iter().try_fold(0usize, |n, &d| {
        n.checked_mul(10)?.checked_add(usize::from(d - b'0'))
    })
}

/// Writes the reply to `/echo` into `out`: its head as hyper writes it, then the body (the
/// request's own bytes, or the pattern).
fn write_reply(out: &mut Vec<u8>, params: &EchoParams, body: &[u8], got_it: Instant) {
    let pattern = params.reply_len.map(|n| {
        crate::wire::pattern_static(params.seq.unwrap_or(0), n as usize)
            .expect("a reply within BODY_MAX fits in the pattern table")
    });
    let body = pattern.unwrap_or(body);
    out.clear();
    out.extend_from_slice(b"HTTP/1.1 200 OK\r\ncontent-type: ");
    out.extend_from_slice(ECHO_CONTENT_TYPE.as_bytes());
    out.extend_from_slice(b"\r\n");
    if let Some(seq) = params.seq {
        out.extend_from_slice(SEQ_HEADER.as_bytes());
        out.extend_from_slice(b": ");
        push_decimal(out, seq);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"server-timing: ");
    let mut timing = [0u8; super::reply::TIMING_MAX];
    let n = write_server_timing(got_it.elapsed(), &mut timing);
    out.extend_from_slice(&timing[..n]);
    out.extend_from_slice(b"\r\ncontent-length: ");
    push_decimal(out, body.len() as u64);
    out.extend_from_slice(b"\r\ndate: ");
    push_date(out);
    out.extend_from_slice(b"\r\n\r\n");
    out.extend_from_slice(body);
}

/// Appends `n` in decimal.
fn push_decimal(out: &mut Vec<u8>, n: u64) {
    out.extend_from_slice(crate::wire::decimal(n, &mut [0; 20]));
}

thread_local! {
    /// The `date` header of the current second, as hyper caches it.
    static DATE: std::cell::Cell<(u64, [u8; 29])> = const { std::cell::Cell::new((u64::MAX, [0; 29])) };
}

/// Appends the current time as an HTTP date (`Mon, 07 Dec 2026 01:02:03 GMT`), formatted
/// once a second.
fn push_date(out: &mut Vec<u8>) {
    let now = SystemTime::now();
    let secs = now
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let (at, mut text) = DATE.get();
    if at != secs {
        let formatted = httpdate::fmt_http_date(now);
        let bytes = formatted.as_bytes();
        if bytes.len() != text.len() {
            // Years past 9999 only.
            out.extend_from_slice(bytes);
            return;
        }
        text.copy_from_slice(bytes);
        DATE.set((secs, text));
    }
    out.extend_from_slice(&text);
}

/// Why reading or writing stopped.
enum Stop {
    /// The watcher told the connection to close.
    Told(CloseReason),
    /// The socket failed.
    Failed,
}

/// Reads what has arrived onto the end of the buffer, waiting for it with the watcher's
/// close in view: true when bytes came, false at the end of the stream.
async fn read_more<S: HttpIo>(
    io: &mut CountingIo<S>,
    state: &ConnState,
    registered: &mut Option<Waker>,
) -> Result<bool, Stop> {
    let CountingIo { inner, head, .. } = io;
    let buf = &mut head.bytes;
    let waiting = async {
        inner.wait_readable().await?;
        if buf.len() == buf.capacity() {
            buf.reserve(buf.capacity().clamp(512, HEAD_MAX));
        }
        inner.read_some(buf).await
    };
    let mut waiting = std::pin::pin!(waiting);
    let read = std::future::poll_fn(|cx| match state.close_told(cx, registered) {
        Some(why) => Poll::Ready(Err(Stop::Told(why))),
        None => waiting
            .as_mut()
            .poll(cx)
            .map(|r| r.map_err(|_| Stop::Failed)),
    })
    .await?;
    count_moved(state, read, |s| &s.bytes_in);
    Ok(read > 0)
}

/// Writes all of `bytes`, counted as a reply being sent for the write timeout, until done
/// or the watcher says the client has taken nothing for too long.
async fn write_all<S: HttpIo>(
    io: &mut CountingIo<S>,
    state: &ConnState,
    registered: &mut Option<Waker>,
    bytes: &[u8],
) -> Result<(), Stop> {
    let sending = SendingGuard::new(state);
    let mut written = 0;
    let inner = &mut io.inner;
    let result = std::future::poll_fn(|cx| {
        loop {
            if written == bytes.len() {
                return Pin::new(&mut *inner)
                    .poll_flush(cx)
                    .map_err(|_| Stop::Failed);
            }
            match Pin::new(&mut *inner).poll_write(cx, &bytes[written..]) {
                Poll::Ready(Ok(0)) | Poll::Ready(Err(_)) => return Poll::Ready(Err(Stop::Failed)),
                Poll::Ready(Ok(n)) => {
                    written += n;
                    count_moved(state, n, |s| &s.bytes_out);
                    state.taken.fetch_add(n as u64, Relaxed);
                }
                Poll::Pending => {
                    // Only a stuck reply closes the connection here; an idle close or a
                    // shutdown waits for the reply to be written.
                    if let Some(CloseReason::WriteTimeout) = state.close_told(cx, registered) {
                        return Poll::Ready(Err(Stop::Told(CloseReason::WriteTimeout)));
                    }
                    return Poll::Pending;
                }
            }
        }
    })
    .await;
    drop(sending);
    result
}

/// A reply counted in its connection's `sending` while it is being written.
struct SendingGuard<'a>(&'a ConnState);

impl<'a> SendingGuard<'a> {
    fn new(state: &'a ConnState) -> SendingGuard<'a> {
        state.sending.fetch_add(1, Relaxed);
        SendingGuard(state)
    }
}

impl Drop for SendingGuard<'_> {
    fn drop(&mut self) {
        self.0.sending.fetch_sub(1, Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimals_of_digits_only() {
        assert_eq!(parse_decimal(b"0"), Some(0));
        assert_eq!(parse_decimal(b"8192"), Some(8192));
        assert_eq!(parse_decimal(b""), None);
        assert_eq!(parse_decimal(b"+1"), None);
        assert_eq!(parse_decimal(b" 1"), None);
        assert_eq!(parse_decimal(b"99999999999999999999"), None);
    }

    #[test]
    fn dates_are_http_dates() {
        let mut out = Vec::new();
        push_date(&mut out);
        let text = String::from_utf8(out).unwrap();
        assert!(httpdate::parse_http_date(&text).is_ok(), "{text}");
        assert!(text.ends_with(" GMT"), "{text}");
    }
}
