//! A lean HTTP/1.1 client codec for the HTTP/1.1 transports (`http-keepalive` and
//! `http-fresh`, on both engines): request bytes built once per run with only the seq and
//! the body filled in per call, and replies parsed in place with `httparse`.
//!
//! Why not hyper, which these transports used before: at 64 connections on one core, a hyper
//! client connection per socket (a dispatcher task, a request channel, header maps, a body
//! stream) made rpcbench the bottleneck, at 0.37 times wrk's request rate, and a blocking
//! `http-fresh` call cost 11 µs more user CPU than ApacheBench's. This codec does what wrk
//! does per request (one write, one read for a small reply) and still checks everything
//! hyper checked: status 200, the seq header, the body bytes
//! (the runner verifies them), `Content-Length` (a chunked reply is rejected as a protocol
//! error: the echo server never chunks, and a decoder would be code no reply needs),
//! `Connection: close`, and an early end of file, told apart as libcurl does: nothing of a reply on a reused connection may be resent once, a reply cut short is
//! lost.

use super::buf::RecvBuf;
use super::http::parse_server_timing;
use super::tcp::TimedStream;
use super::{Call, CallError, CallTimer, Counts, Endpoint, Reply};
use crate::wire::SEQ_HEADER;
use std::io::ErrorKind;
use std::net::SocketAddr;
use std::ops::Range;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Most headers a reply may carry: the echo server sends five, a proxy in between might
/// add a few; a reply with more is rejected as a protocol error.
const MAX_HEADERS: usize = 32;
/// Largest reply head accepted; a server that sends more is broken, not slow.
const MAX_HEAD: usize = 64 * 1024;
/// Room a read asks for beyond what is buffered while the length is unknown (a head, or a
/// body that ends with the connection).
const READ_AHEAD: usize = 4 * 1024;
/// Initial receive buffer of a connection: a default reply (head and 64 bytes) is under
/// 300 bytes, and an event loop may hold 10,000 connections; it grows when needed.
const INITIAL_BUFFER: usize = 4 * 1024;
/// The reply headers the codec reads, by name (matched without regard to case).
const CONTENT_LENGTH: &str = "content-length";
const TRANSFER_ENCODING: &str = "transfer-encoding";
const CONNECTION: &str = "connection";
const SERVER_TIMING: &str = "server-timing";

/// What a request's head depends on: its `reply_len` and `delay_us` query parameters, and
/// for an encoded call its route and content type.
type Query = (Option<u32>, u32, Option<super::Rpc>);

/// What both HTTP/1.1 transports keep for one worker, blocking (`C` is
/// [`BlockingH1Conn`]) and on the event loop ([`AsyncH1Conn`]): `http-fresh` and
/// `http-keepalive` differ in whether their requests ask the server to close and in what a
/// call does with the connection, not in what they hold.
pub(super) struct H1Worker<C> {
    /// Where the calls go.
    pub(super) endpoint: Endpoint,
    /// Longest a call may take.
    pub(super) timeout: Duration,
    /// The timer of an event-loop connection's calls (unused by the blocking side).
    pub(super) timer: CallTimer,
    /// The request bytes, built once and filled per call.
    pub(super) requests: Requests,
    /// The connection, once open (for `http-fresh`, the call in progress's, kept only so
    /// the reply can borrow from it, and closed by `end_call`).
    pub(super) conn: Option<C>,
    /// Connections opened so far.
    pub(super) connects: u64,
}

impl<C> H1Worker<C> {
    /// Nothing open yet; `close` makes every request ask the server to close.
    pub(super) fn open(endpoint: Endpoint, timeout: Duration, close: bool) -> H1Worker<C> {
        H1Worker {
            requests: Requests::new(&endpoint, close),
            endpoint,
            timeout,
            timer: CallTimer::default(),
            conn: None,
            connects: 0,
        }
    }

    /// What the transport counts itself: its connections.
    pub(super) fn counts(&self) -> Counts {
        Counts::connects(self.connects)
    }
}

/// The bytes of `POST /echo` (or an encoded call's route) requests of one transport: everything before the seq value is
/// built once (request line, `Host`, `Content-Type`, `Connection: close` for `http-fresh`),
/// and a call appends its seq, its `Content-Length` and its body.
#[derive(Debug)]
pub(super) struct Requests {
    /// `Host` header value: host and port, an IPv6 literal in brackets.
    host: String,
    /// True to ask for `Connection: close`.
    close: bool,
    /// The query (`reply_len`, `delay_us`) the head was built for, and the head.
    head: Option<(Query, Vec<u8>)>,
    /// The request being sent.
    out: Vec<u8>,
}

impl Requests {
    /// Requests to `endpoint`'s HTTP port; `close` asks the server to close after replying.
    pub fn new(endpoint: &Endpoint, close: bool) -> Requests {
        let host = format!(
            "{}:{}",
            crate::resolve::url_host(&endpoint.host()),
            endpoint.http_port
        );
        Requests {
            host,
            close,
            head: None,
            out: Vec::new(),
        }
    }

    /// The whole request for `call`.
    pub fn build(&mut self, call: &Call) -> &[u8] {
        let key: Query = (call.reply_len, call.delay_us, call.rpc);
        let head = match &mut self.head {
            Some((built_for, head)) if *built_for == key => head,
            slot => {
                let extra = call
                    .operation_header()
                    .map_or(String::new(), |(name, value)| {
                        format!("{name}: {value}\r\n")
                    });
                let head = format!(
                    "POST {} HTTP/1.1\r\nhost: {}\r\ncontent-type: {}\r\n\
                     {extra}{}{SEQ_HEADER}: ",
                    Endpoint::echo_path(call),
                    self.host,
                    call.content_type(),
                    if self.close {
                        "connection: close\r\n"
                    } else {
                        ""
                    },
                );
                &mut slot.insert((key, head.into_bytes())).1
            }
        };
        let out = &mut self.out;
        out.clear();
        out.extend_from_slice(head);
        push_decimal(out, call.seq);
        out.extend_from_slice(b"\r\ncontent-length: ");
        push_decimal(out, call.payload.len() as u64);
        out.extend_from_slice(b"\r\n\r\n");
        out.extend_from_slice(call.payload);
        out
    }
}

/// Appends `n` in decimal: no formatting machinery, no allocation.
fn push_decimal(out: &mut Vec<u8>, n: u64) {
    out.extend_from_slice(crate::wire::decimal(n, &mut [0; 20]));
}

/// True when header name `name` is `wanted`, ignoring case; the lengths are compared
/// first, inline, so a header that is not wanted costs next to nothing.
#[inline(always)]
fn name_is(name: &str, wanted: &str) -> bool {
    name.len() == wanted.len() && name.eq_ignore_ascii_case(wanted)
}

/// A header value that is a decimal number (blanks around it allowed), or `None`.
fn parse_u64(value: &[u8]) -> Option<u64> {
    let digits = value.trim_ascii();
    if digits.is_empty() {
        return None;
    }
    digits.iter().try_fold(0u64, |n, &b| {
        if b.is_ascii_digit() {
            n.checked_mul(10)?.checked_add(u64::from(b - b'0'))
        } else {
            None
        }
    })
}

/// How a reply's body ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum BodyLen {
    /// After this many bytes (`Content-Length`, or 0 for 204 and 304).
    Bytes(usize),
    /// With the connection (no length given: HTTP/1.1's last resort).
    UntilClose,
}

/// A reply head, parsed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Head {
    /// Bytes of the head, blank line included.
    len: usize,
    /// The HTTP status.
    status: u16,
    /// The `x-rpcbench-seq` value, if present and numeric.
    seq: Option<u64>,
    /// The `server-timing` duration.
    server: Option<super::ServerTime>,
    /// Where the body ends.
    body: BodyLen,
    /// The server will close after this reply (`Connection: close`, or HTTP/1.0 without
    /// keep-alive).
    close: bool,
}

/// What the start of a connection's buffered bytes holds.
#[derive(Debug, PartialEq, Eq)]
enum Parsed {
    /// Not a whole head yet.
    Partial,
    /// An interim `1xx` reply of this many bytes, to be skipped.
    Interim(usize),
    /// The head of the final reply.
    Final(Head),
}

/// Parses the reply head at the start of `data`.
fn parse_head(data: &[u8]) -> Result<Parsed, CallError> {
    // Left uninitialised for httparse to fill: zeroing 32 headers (1 KB) on every reply
    // cost more than parsing the five the server sends.
    let mut headers = [const { std::mem::MaybeUninit::uninit() }; MAX_HEADERS];
    let mut resp = httparse::Response::new(&mut []);
    let parsed = httparse::ParserConfig::default()
        .parse_response_with_uninit_headers(&mut resp, data, &mut headers)
        .map_err(|_| CallError::Protocol)?;
    let len = match parsed {
        httparse::Status::Partial => return Ok(Parsed::Partial),
        httparse::Status::Complete(len) => len,
    };
    let status = resp.code.ok_or(CallError::Protocol)?;
    match status {
        // 101 would switch protocols, which we never ask for.
        101 => return Err(CallError::Protocol),
        100..=199 => return Ok(Parsed::Interim(len)),
        _ => {}
    }
    let mut head = Head {
        len,
        status,
        seq: None,
        server: None,
        body: BodyLen::UntilClose,
        close: resp.version == Some(0),
    };
    for h in resp.headers.iter() {
        // Lengths first (`name_is`): most headers (date, content-type) are then skipped
        // after a few integer comparisons, and no value is looked at unless it is read.
        let is = |wanted: &str| name_is(h.name, wanted);
        if is(CONTENT_LENGTH) {
            let n = parse_u64(h.value)
                .and_then(|n| usize::try_from(n).ok())
                .ok_or(CallError::Protocol)?;
            // Two different lengths: which one frames the body cannot be known.
            if matches!(head.body, BodyLen::Bytes(m) if m != n) {
                return Err(CallError::Protocol);
            }
            head.body = BodyLen::Bytes(n);
        } else if is(TRANSFER_ENCODING) {
            // Chunked (or any other coding) is not decoded: see the module docs.
            return Err(CallError::Protocol);
        } else if is(CONNECTION) {
            for token in h.value.split(|&b| b == b',').map(<[u8]>::trim_ascii) {
                if token.eq_ignore_ascii_case(b"close") {
                    head.close = true;
                } else if token.eq_ignore_ascii_case(b"keep-alive") && resp.version == Some(0) {
                    head.close = false;
                }
            }
        } else if is(SEQ_HEADER) {
            head.seq = parse_u64(h.value);
        } else if is(SERVER_TIMING) {
            head.server = parse_server_timing(h.value);
        }
    }
    if matches!(status, 204 | 304) {
        head.body = BodyLen::Bytes(0);
    }
    Ok(Parsed::Final(head))
}

/// Why an exchange produced no reply.
#[derive(Debug)]
pub(super) enum ExchangeError {
    /// Not one byte of a reply came before the connection ended: on a connection that had
    /// already served calls, the server closed it (idle) before reading the request, and
    /// sending it again on a new connection is safe.
    NoReply(CallError),
    /// Anything else: a reply cut short, a timeout, a broken reply.
    Failed(CallError),
}

impl From<CallError> for ExchangeError {
    fn from(e: CallError) -> Self {
        ExchangeError::Failed(e)
    }
}

impl From<ExchangeError> for CallError {
    fn from(e: ExchangeError) -> Self {
        match e {
            ExchangeError::NoReply(e) | ExchangeError::Failed(e) => e,
        }
    }
}

/// How many times a call may send its request: once, and once more on a new connection
/// when a reused one ended before any reply byte (libcurl's rule, and `http-keepalive`'s).
const ATTEMPTS: usize = 2;

/// True when a call whose `attempt` (1 for the first) failed with `e` may send its request
/// again on a new connection: nothing of a reply came on a connection that had served
/// calls before (`reused`), so the server closed it unread, and tries are left.
pub(super) fn may_resend(e: &ExchangeError, reused: bool, attempt: usize) -> bool {
    matches!(e, ExchangeError::NoReply(CallError::Closed)) && reused && attempt < ATTEMPTS
}

/// A reply read off a connection: what its head said, and where its body is.
#[derive(Debug)]
pub(super) struct Response {
    /// The HTTP status.
    status: u16,
    /// The `x-rpcbench-seq` value.
    seq: Option<u64>,
    /// The `server-timing` duration.
    server: Option<super::ServerTime>,
    /// Where the body is in the connection's buffer.
    body: Range<usize>,
    /// The server said it closes after this reply (and sent nothing after it), so its end
    /// of file is still to come. `http-fresh` waits for it inside the call, as ApacheBench
    /// and PHP's `file_get_contents` read to the end: the server closes first (RFC 9112
    /// §9.6), so TIME_WAIT stays on its side, and the client's next connect does not search
    /// past thousands of its own for a free port (30 µs a connect here after a minute of
    /// calls), nor run out of ports against a remote server.
    closes: bool,
}

/// Reading one reply, whatever does the reading (a tokio socket on the event loop, a
/// blocking one on a worker thread): [`ReplyReader::next`] says what it needs, the I/O
/// loop reads, and [`ReplyReader::received`] takes what the read returned. So both
/// engines parse, bound and classify replies with the same code, as the raw TCP frames do.
#[derive(Debug)]
struct ReplyReader {
    /// When the request went out, for the first-byte phase.
    sent: Instant,
    /// The reply's head, once parsed.
    head: Option<Head>,
    /// The connection ended: a body delimited by the close is complete.
    eof: bool,
    /// The largest body accepted (the call's `max_reply`): a larger one fails the call
    /// before it is read.
    max_body: usize,
}

/// What a [`ReplyReader`] needs next.
#[derive(Debug)]
enum Next {
    /// A read into room for this many buffered bytes ([`RecvBuf::space_for`]).
    Read(usize),
    /// The whole reply, consumed from the buffer.
    Done(Response),
}

impl ReplyReader {
    /// A reader for the reply to a request sent at `sent`, of a body at most `max_body`
    /// bytes.
    fn new(sent: Instant, max_body: usize) -> ReplyReader {
        ReplyReader {
            sent,
            head: None,
            eof: false,
            max_body,
        }
    }

    /// Parses what `inbuf` holds: a read is needed, or the reply is complete (then it is
    /// consumed, and `reusable` cleared when the connection must not carry another
    /// request: the server said it closes, the body ended with the connection, or bytes
    /// nobody asked for follow the reply).
    fn next(&mut self, inbuf: &mut RecvBuf, reusable: &mut bool) -> Result<Next, ExchangeError> {
        let head = loop {
            if let Some(head) = self.head {
                break head;
            }
            let have = inbuf.data().len();
            // Nothing is buffered when a request goes out, so the first parse waits for
            // the first read.
            if have > 0 {
                match parse_head(inbuf.data())? {
                    Parsed::Final(head) => {
                        self.head = Some(head);
                        continue;
                    }
                    Parsed::Interim(len) => {
                        inbuf.take(len);
                        continue;
                    }
                    Parsed::Partial => {}
                }
            }
            if have >= MAX_HEAD {
                return Err(CallError::Protocol.into());
            }
            return Ok(Next::Read(have + READ_AHEAD));
        };
        let have = inbuf.data().len();
        let total = match head.body {
            BodyLen::Bytes(n) if n > self.max_body => {
                *reusable = false;
                return Err(CallError::ReplyTooLarge.into());
            }
            BodyLen::Bytes(n) if have < head.len + n => return Ok(Next::Read(head.len + n)),
            BodyLen::Bytes(n) => head.len + n,
            BodyLen::UntilClose => {
                *reusable = false;
                if have - head.len > self.max_body {
                    return Err(CallError::ReplyTooLarge.into());
                }
                if !self.eof {
                    return Ok(Next::Read(have + READ_AHEAD));
                }
                have
            }
        };
        let reply = inbuf.take(total);
        let extra = !inbuf.data().is_empty();
        if head.close || extra {
            *reusable = false;
        }
        Ok(Next::Done(Response {
            status: head.status,
            seq: head.seq,
            server: head.server,
            body: reply.start + head.len..reply.end,
            closes: head.close && !extra && !self.eof,
        }))
    }

    /// Takes what a read returned (bytes, 0 at end of file, or its error), timing the
    /// first reply byte into `first_byte`. An end before any reply byte is
    /// [`ExchangeError::NoReply`]; an end in the middle of a reply is lost, unless the
    /// body is the one that ends with the connection.
    fn received(
        &mut self,
        read: Result<usize, CallError>,
        first_byte: &mut Option<Duration>,
    ) -> Result<usize, ExchangeError> {
        let started = first_byte.is_some();
        match read {
            Ok(0) | Err(CallError::Closed) if !started => {
                Err(ExchangeError::NoReply(CallError::Closed))
            }
            Ok(0) if self.head.is_some_and(|h| h.body == BodyLen::UntilClose) => {
                self.eof = true;
                Ok(0)
            }
            Ok(0) => Err(CallError::Closed.into()),
            Ok(n) => {
                if !started {
                    *first_byte = Some(self.sent.elapsed());
                }
                Ok(n)
            }
            Err(e) => Err(e.into()),
        }
    }
}

/// One HTTP/1.1 connection driven by the codec, over a tokio socket
/// ([`H1Conn::connect`]) or a blocking one ([`H1Conn::connect_blocking`]).
#[derive(Debug)]
pub(super) struct H1Conn<S> {
    /// The socket.
    stream: S,
    /// Reply bytes received and not yet consumed.
    inbuf: RecvBuf,
    /// False once the server said it closes (or sent bytes nobody asked for): the next
    /// call opens a new connection instead.
    reusable: bool,
    /// Replies read so far: a connection that has served one is a reused connection.
    served: u64,
}

impl<S> H1Conn<S> {
    fn new(stream: S) -> H1Conn<S> {
        H1Conn {
            stream,
            inbuf: RecvBuf::new(INITIAL_BUFFER),
            reusable: true,
            served: 0,
        }
    }

    /// True when the connection has served a reply before this call.
    pub fn reused(&self) -> bool {
        self.served > 0
    }

    /// The reply `response` to `call` as the runner takes it: a status other than 200
    /// (or the call's encoding's fault status) is an error, its body read, so the
    /// connection is still in step.
    pub fn reply(&self, response: Response, call: &Call) -> Result<Reply<'_>, CallError> {
        if !call.takes_status(response.status) {
            return Err(CallError::HttpStatus(response.status));
        }
        Ok(Reply {
            seq: response.seq,
            body: self.inbuf.get(response.body),
            server: response.server,
        })
    }

    /// Counts a reply read.
    fn served(&mut self, response: Response) -> Response {
        self.served += 1;
        response
    }
}

/// A connection of the event loop.
pub(super) type AsyncH1Conn = H1Conn<super::tls::AsyncSock>;
/// A connection of a blocking worker.
pub(super) type BlockingH1Conn = H1Conn<TimedStream>;

impl H1Conn<super::tls::AsyncSock> {
    /// Connects (and handshakes, on a TLS endpoint, before `deadline`), Nagle off.
    /// Returns the connection and what opening it took.
    pub async fn connect(
        addr: SocketAddr,
        deadline: Instant,
        endpoint: &Endpoint,
    ) -> Result<(Self, super::Took), CallError> {
        let secure = endpoint.secure(super::tls::Alpn::Http1);
        let (stream, took) =
            super::connect_nodelay(addr, secure, deadline, &endpoint.tcp_info).await?;
        Ok((H1Conn::new(stream), took))
    }

    /// True when the connection may carry another request: the server did not say it
    /// closes, and nothing arrived while it was idle (an end of file from a server-side
    /// idle close, or stray bytes, which hyper also takes as the end of a connection).
    /// Costs no system call unless the event loop saw the socket become readable: tokio
    /// answers `WouldBlock` from its own readiness state. A close it has not seen yet is
    /// caught after the write instead, as [`ExchangeError::NoReply`].
    pub fn usable(&self) -> bool {
        let mut probe = [0u8; 1];
        self.reusable
            && match self.stream.plain() {
                Some(s) => {
                    matches!(s.try_read(&mut probe), Err(e) if e.kind() == ErrorKind::WouldBlock)
                }
                // Bytes on a TLS socket are records, not the reply: a look would have to
                // decrypt them. A close while idle is caught after the write instead.
                None => true,
            }
    }

    /// Sends `request` and reads the whole reply, whose body may be at most `max_body`
    /// bytes. `first_byte` gets the time from the write to the first reply byte. The
    /// caller's timer bounds it.
    pub async fn exchange(
        &mut self,
        request: &[u8],
        max_body: usize,
        first_byte: &mut Option<Duration>,
    ) -> Result<Response, ExchangeError> {
        let mut reader = ReplyReader::new(Instant::now(), max_body);
        // The server may have closed while we were idle (a reset, a broken pipe): nothing
        // of a reply has come, so this is `NoReply` like an end of file before one.
        self.stream
            .write_all(request)
            .await
            .map_err(|e| ExchangeError::NoReply(CallError::from_io(&e)))?;
        loop {
            let need = match reader.next(&mut self.inbuf, &mut self.reusable)? {
                Next::Done(response) => return Ok(self.served(response)),
                Next::Read(need) => need,
            };
            let read = self.stream.read(self.inbuf.space_for(need)).await;
            let n = reader.received(read.map_err(|e| CallError::from_io(&e)), first_byte)?;
            self.inbuf.filled(n);
        }
    }

    /// Waits for the end of file of a connection whose reply said the server closes it
    /// (see [`Response::closes`]); the caller's timer bounds it (and should count its
    /// timeout here as [`CallError::Protocol`], as [`closed`] does). Bytes instead of the
    /// end are a protocol error; a reset is an end.
    pub async fn await_close(&mut self, response: &Response) -> Result<(), CallError> {
        if !response.closes {
            return Ok(());
        }
        let mut scratch = [0u8; 1];
        let read = self.stream.read(&mut scratch).await;
        closed(read.map_err(|e| CallError::from_io(&e)))
    }
}

impl H1Conn<TimedStream> {
    /// Connects (and handshakes, on a TLS endpoint) before `deadline`, Nagle off.
    /// Returns the connection and what opening it took.
    pub fn connect_blocking(
        addr: SocketAddr,
        deadline: Instant,
        endpoint: &Endpoint,
    ) -> Result<(Self, super::Took), CallError> {
        let secure = endpoint.secure(super::tls::Alpn::Http1);
        let (stream, took) = TimedStream::connect(addr, deadline, secure, &endpoint.tcp_info)?;
        Ok((H1Conn::new(stream), took))
    }

    /// True when the server has not said it closes. There is no cheap look at a blocking
    /// socket while it is idle (it would be a system call per call), so a close while idle
    /// is caught after the write, as [`ExchangeError::NoReply`].
    pub fn usable(&self) -> bool {
        self.reusable
    }

    /// As the async `exchange`, blocking, giving up at `deadline`.
    pub fn exchange_blocking(
        &mut self,
        request: &[u8],
        max_body: usize,
        deadline: Instant,
        first_byte: &mut Option<Duration>,
    ) -> Result<Response, ExchangeError> {
        let mut reader = ReplyReader::new(Instant::now(), max_body);
        self.stream
            .write_all(request)
            .map_err(|e| ExchangeError::NoReply(CallError::from_io(&e)))?;
        let mut first = true;
        loop {
            let need = match reader.next(&mut self.inbuf, &mut self.reusable)? {
                Next::Done(response) => return Ok(self.served(response)),
                Next::Read(need) => need,
            };
            let read = self
                .stream
                .read(self.inbuf.space_for(need), deadline, first);
            first = false;
            let n = reader.received(read, first_byte)?;
            self.inbuf.filled(n);
        }
    }

    /// As the async `await_close`, blocking, giving up at `deadline` (within the slack of
    /// a first read's timeout).
    pub fn await_close_blocking(
        &mut self,
        response: &Response,
        deadline: Instant,
    ) -> Result<(), CallError> {
        if !response.closes {
            return Ok(());
        }
        let mut scratch = [0u8; 1];
        closed(self.stream.read(&mut scratch, deadline, true))
    }
}

/// What a read after a last reply returned, as the end the caller waits for: an end of file
/// or a reset is the end; a byte, or no end within the call's timeout, is a protocol error
/// (the server said that reply was its last, and the call has its reply: it is not lost);
/// another failure is itself.
fn closed(read: Result<usize, CallError>) -> Result<(), CallError> {
    match read {
        Ok(0) | Err(CallError::Closed) => Ok(()),
        Ok(_) | Err(CallError::Timeout) => Err(CallError::Protocol),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{IpAddr, Ipv4Addr};

    fn endpoint() -> Endpoint {
        let ip = IpAddr::V4(Ipv4Addr::LOCALHOST);
        Endpoint::new(SocketAddr::new(ip, 7001), SocketAddr::new(ip, 7080))
    }

    #[test]
    fn request_bytes() {
        let call = Call {
            seq: 1234567,
            payload: b"hi",
            reply_len: None,
            delay_us: 0,
            max_reply: 2,
            rpc: None,
        };
        let mut requests = Requests::new(&endpoint(), false);
        assert_eq!(
            requests.build(&call),
            b"POST /echo HTTP/1.1\r\nhost: 127.0.0.1:7080\r\n\
              content-type: application/octet-stream\r\nx-rpcbench-seq: 1234567\r\n\
              content-length: 2\r\n\r\nhi"
        );
        let call = Call {
            seq: 0,
            reply_len: Some(10),
            delay_us: 5,
            ..call
        };
        let mut fresh = Requests::new(&endpoint(), true);
        assert_eq!(
            fresh.build(&call),
            b"POST /echo?reply_len=10&delay_us=5 HTTP/1.1\r\nhost: 127.0.0.1:7080\r\n\
              content-type: application/octet-stream\r\nconnection: close\r\n\
              x-rpcbench-seq: 0\r\ncontent-length: 2\r\n\r\nhi"
        );
        let mut out = Vec::new();
        push_decimal(&mut out, u64::MAX);
        assert_eq!(out, u64::MAX.to_string().as_bytes());
        assert_eq!(parse_u64(b" 18446744073709551615 "), Some(u64::MAX));
        for bad in [&b"18446744073709551616"[..], b"", b"1 2", b"-1", b"0x10"] {
            assert_eq!(parse_u64(bad), None);
        }
    }

    #[test]
    fn reply_heads() {
        let ok = b"HTTP/1.1 200 OK\r\ncontent-type: application/octet-stream\r\n\
                   x-rpcbench-seq: 7\r\nserver-timing: app;dur=0.009\r\ncontent-length: 3\r\n\
                   date: Tue, 01 Dec 2026 09:31:58 GMT\r\n\r\nabc";
        let Parsed::Final(head) = parse_head(ok).unwrap() else {
            panic!("a whole head")
        };
        assert_eq!(
            head,
            Head {
                len: ok.len() - 3,
                status: 200,
                seq: Some(7),
                server: Some(Duration::from_micros(9).into()),
                body: BodyLen::Bytes(3),
                close: false,
            }
        );
        assert_eq!(parse_head(&ok[..20]).unwrap(), Parsed::Partial);
        let close = b"HTTP/1.1 503 Busy\r\nConnection: Close\r\ncontent-length: 0\r\n\r\n";
        assert!(matches!(
            parse_head(close).unwrap(),
            Parsed::Final(Head {
                status: 503,
                close: true,
                body: BodyLen::Bytes(0),
                ..
            })
        ));
        let old = b"HTTP/1.0 200 OK\r\n\r\n";
        assert!(matches!(
            parse_head(old).unwrap(),
            Parsed::Final(Head {
                close: true,
                body: BodyLen::UntilClose,
                ..
            })
        ));
        let kept = b"HTTP/1.0 200 OK\r\nconnection: keep-alive\r\ncontent-length: 1\r\n\r\n";
        assert!(matches!(
            parse_head(kept).unwrap(),
            Parsed::Final(Head { close: false, .. })
        ));
        let interim = b"HTTP/1.1 100 Continue\r\n\r\n";
        assert_eq!(parse_head(interim).unwrap(), Parsed::Interim(interim.len()));
        for bad in [
            &b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n"[..],
            b"HTTP/1.1 200 OK\r\ncontent-length: 3\r\ncontent-length: 4\r\n\r\n",
            b"HTTP/1.1 200 OK\r\ncontent-length: lots\r\n\r\n",
            b"HTTP/1.1 101 Switching Protocols\r\n\r\n",
            b"SSH-2.0-OpenSSH\r\n\r\n",
        ] {
            assert_eq!(
                parse_head(bad),
                Err(CallError::Protocol),
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    /// Feeds `chunks` to a reader as reads would return them, then an end of file if
    /// `eof`; returns how the reply ended and whether the connection stays usable.
    fn read_reply(chunks: &[&[u8]], eof: bool) -> (Result<Vec<u8>, ExchangeError>, bool) {
        let mut inbuf = RecvBuf::new(16);
        let mut reader = ReplyReader::new(Instant::now(), 1 << 20);
        let mut reusable = true;
        let mut first_byte = None;
        let mut reads = chunks
            .iter()
            .map(|c| Ok(c.to_vec()))
            .chain(eof.then(|| Ok(Vec::new())));
        let got = loop {
            let need = match reader.next(&mut inbuf, &mut reusable) {
                Ok(Next::Done(r)) => break Ok(inbuf.get(r.body).to_vec()),
                Ok(Next::Read(need)) => need,
                Err(e) => break Err(e),
            };
            let read: Result<Vec<u8>, CallError> = reads.next().unwrap_or(Err(CallError::Timeout));
            let space = inbuf.space_for(need);
            let read = read.map(|bytes| {
                space[..bytes.len()].copy_from_slice(&bytes);
                bytes.len()
            });
            match reader.received(read, &mut first_byte) {
                Ok(n) => inbuf.filled(n),
                Err(e) => break Err(e),
            }
        };
        (got, reusable)
    }

    #[test]
    fn replies_read_in_pieces_and_how_they_end() {
        let head = b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\n";
        let (body, reusable) = read_reply(&[&head[..10], &head[10..], b"he", b"llo"], false);
        assert_eq!((body.unwrap(), reusable), (b"hello".to_vec(), true));
        // An interim reply first, then the reply; bytes after it make the connection
        // unusable.
        let (body, reusable) = read_reply(
            &[b"HTTP/1.1 100 Continue\r\n\r\n", head, b"hellostray"],
            false,
        );
        assert_eq!((body.unwrap(), reusable), (b"hello".to_vec(), false));
        // A body that ends with the connection.
        let (body, reusable) = read_reply(&[b"HTTP/1.1 200 OK\r\n\r\nto the end"], true);
        assert_eq!((body.unwrap(), reusable), (b"to the end".to_vec(), false));
        // The end before any byte may be resent; in the middle of a reply it is lost.
        let (ended, _) = read_reply(&[], true);
        assert!(matches!(
            ended,
            Err(ExchangeError::NoReply(CallError::Closed))
        ));
        let (ended, _) = read_reply(&[head, b"hel"], true);
        assert!(matches!(
            ended,
            Err(ExchangeError::Failed(CallError::Closed))
        ));
        let (ended, _) = read_reply(&[head], false);
        assert!(matches!(
            ended,
            Err(ExchangeError::Failed(CallError::Timeout))
        ));
        assert!(may_resend(
            &ExchangeError::NoReply(CallError::Closed),
            true,
            1
        ));
        assert!(!may_resend(
            &ExchangeError::NoReply(CallError::Closed),
            true,
            2
        ));
        assert!(!may_resend(
            &ExchangeError::NoReply(CallError::Closed),
            false,
            1
        ));
        assert!(!may_resend(
            &ExchangeError::Failed(CallError::Closed),
            true,
            1
        ));
    }
}
