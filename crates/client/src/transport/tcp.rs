//! `tcp`: one persistent TCP connection per worker, length-prefixed postcard frames.
//!
//! Also home of the frame exchange that `tcp-connect` reuses, in two forms with the same
//! framing code: [`FrameConn`] (blocking, for the worker threads) and [`AsyncFrameConn`]
//! (tokio, for the event loop), and of the `tcp` transport's two sides, [`Tcp`] and
//! [`AsyncTcp`]. Both exchanges are generic over the socket, so the `unix` transport
//! sends the same frames through the same code over a Unix socket.

use super::buf::RecvBuf;
use super::tls::{Alpn, AsyncSock, BlockingIo, BlockingSock};
use super::{
    AsyncTransport, Call, CallError, CallTimer, Counts, Endpoint, Facts, OpenTransportError,
    Phases, Port, Reply, Secure, ServerTime, Took, Transport, connect_nodelay, opened, remaining,
};
use crate::wire::{
    self, LEN_PREFIX, RESPONSE_OVERHEAD, Request, ResponseRef, RpcReplyTrailer, RpcTrailer, Status,
};
use std::cell::Cell;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::ops::Range;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Initial receive buffer of a blocking connection; it grows to the largest reply seen.
const INITIAL_BUFFER: usize = 16 * 1024;

/// Initial receive buffer of an event-loop connection: smaller than a worker's, because an
/// event loop may hold 10,000 connections (40 MB at this size, 160 MB at a worker's) and a
/// default reply is under 100 bytes; it grows like a worker's.
const ASYNC_INITIAL_BUFFER: usize = 4 * 1024;

/// Encodes `call` as a request frame into `out` (cleared first): an encoded call's frame
/// ends with its [`RpcTrailer`] (wire 2), counted in the length prefix.
#[inline]
pub(super) fn encode_request(call: &Call, out: &mut Vec<u8>) {
    out.clear();
    wire::encode_frame(
        &RequestRef {
            seq: call.seq,
            reply_len: call.reply_len,
            delay_us: call.delay_us,
            payload: call.payload,
        },
        out,
    );
    if let Some(rpc) = call.rpc {
        out.extend_from_slice(&trailer_of(rpc).bytes());
        let body_len = (out.len() - LEN_PREFIX) as u32;
        out[..LEN_PREFIX].copy_from_slice(&body_len.to_be_bytes());
    }
}

/// The frame trailer of an encoded call.
fn trailer_of(rpc: super::Rpc) -> RpcTrailer {
    RpcTrailer {
        encoding: rpc.encoding.code(),
        operation: rpc.operation.code(),
    }
}

/// Encodes `call` as a request body without the length prefix into `out` (cleared
/// first): one UDP datagram.
#[inline]
pub(super) fn encode_request_body(call: &Call, out: &mut Vec<u8>) {
    out.clear();
    let buf = std::mem::take(out);
    // Writing into a Vec cannot fail, and the request has no fallible fields.
    *out = postcard::to_extend(
        &RequestRef {
            seq: call.seq,
            reply_len: call.reply_len,
            delay_us: call.delay_us,
            payload: call.payload,
        },
        buf,
    )
    .expect("serialising into a Vec cannot fail");
}

/// What the bytes buffered on a connection hold.
enum Framed {
    /// A whole frame, now consumed: where its body is in the buffer.
    Body(Range<usize>),
    /// Not yet: the bytes the frame (or its length prefix) needs, counted from the first
    /// unconsumed one, for [`RecvBuf::space_for`].
    Need(usize),
}

/// Consumes the next whole frame in `inbuf`, or says how much more it needs. A frame
/// body above `max_body` fails the call before it is read.
#[inline]
fn next_frame(inbuf: &mut RecvBuf, max_body: usize) -> Result<Framed, CallError> {
    let have = inbuf.data();
    let Some(prefix) = have.first_chunk::<LEN_PREFIX>() else {
        return Ok(Framed::Need(LEN_PREFIX));
    };
    let len = wire::check_len(*prefix, wire::DEFAULT_MAX_FRAME).map_err(|_| {
        // A TLS server answers a plain request with an alert record, whose header reads
        // as an absurd length prefix.
        if super::tls::looks_like_tls(prefix) {
            CallError::Tls(super::tls::TlsFailure::TlsServer)
        } else {
            CallError::Protocol
        }
    })?;
    if len > max_body {
        return Err(CallError::ReplyTooLarge);
    }
    if have.len() < LEN_PREFIX + len {
        return Ok(Framed::Need(LEN_PREFIX + len));
    }
    let frame = inbuf.take(LEN_PREFIX + len);
    Ok(Framed::Body(frame.start + LEN_PREFIX..frame.end))
}

/// True when the frame body is the reply to `call`, false when it answers an earlier call
/// (a duplicate: our seqs only grow on a connection, so an older one was already had).
#[inline]
fn is_reply_to(body: &[u8], call: &Call) -> Result<bool, CallError> {
    let (resp, _): (ResponseRef, _) =
        wire::decode_body_and_rest(body).map_err(|_| CallError::Protocol)?;
    Ok(resp.seq >= call.seq)
}

/// The reply in a frame body. Decoded a second time (headers only; the payload is
/// borrowed) after [`is_reply_to`], so the reply can borrow the buffer: the borrow checker
/// cannot see that the loop that skipped duplicates has ended. The reply to an encoded
/// call (`rpc`) must end with the trailer of the same encoding and operation, whose codec
/// times join the server's; any other reply must end with its payload.
#[inline]
pub(super) fn reply_of(body: &[u8], rpc: Option<super::Rpc>) -> Result<Reply<'_>, CallError> {
    let (resp, rest): (ResponseRef, &[u8]) =
        wire::decode_body_and_rest(body).map_err(|_| CallError::Protocol)?;
    let mut server = ServerTime::from(Duration::from_nanos(resp.server_ns));
    match rpc {
        None if rest.is_empty() => {}
        None => return Err(CallError::Protocol),
        Some(rpc) => {
            let tail: RpcReplyTrailer = wire::decode_body(rest).map_err(|_| CallError::Protocol)?;
            let sent = trailer_of(rpc);
            if (tail.encoding, tail.operation) != (sent.encoding, sent.operation) {
                return Err(CallError::Protocol);
            }
            server.decode = Some(Duration::from_nanos(tail.dec_ns));
            server.encode = Some(Duration::from_nanos(tail.enc_ns));
        }
    }
    if resp.status != Status::Ok as u8 {
        return Err(CallError::FrameStatus(resp.status));
    }
    Ok(Reply {
        seq: Some(resp.seq),
        body: resp.payload,
        server: Some(server),
    })
}

/// A blocking stream socket whose reads can time out: TCP here, a Unix socket in
/// `unix.rs`.
pub(super) trait BlockingSocket: Read + Write {
    /// Sets `SO_RCVTIMEO`.
    fn set_read_timeout(&self, timeout: Option<Duration>) -> std::io::Result<()>;
}

impl BlockingSocket for TcpStream {
    fn set_read_timeout(&self, timeout: Option<Duration>) -> std::io::Result<()> {
        TcpStream::set_read_timeout(self, timeout)
    }
}

impl BlockingSocket for BlockingSock {
    fn set_read_timeout(&self, timeout: Option<Duration>) -> std::io::Result<()> {
        self.tcp().set_read_timeout(timeout)
    }
}

/// How far the receive timeout set on a socket may be from what a call's first read has
/// left before the read sets it again: the kernel keeps `SO_RCVTIMEO` in scheduler ticks
/// (1-10 ms), so a closer match is not kept anyway, and a call then costs no setsockopt
/// (0.2 µs here, 2.5% of a `tcp` call on loopback).
const RCV_TIMEOUT_SLACK: Duration = Duration::from_millis(1);

/// A blocking socket whose reads end at a call's deadline: what every blocking transport
/// that parses its own replies reads through (raw TCP frames, the lean HTTP codec, the
/// frames over a Unix socket).
pub(super) struct TimedStream<S = BlockingSock> {
    stream: S,
    /// The receive timeout currently set on the socket, to skip redundant setsockopt calls.
    rcv_timeout: Option<Duration>,
}

impl<S: BlockingSocket> TimedStream<S> {
    /// Wraps a connected socket (its write timeout already set).
    pub fn new(stream: S) -> TimedStream<S> {
        TimedStream {
            stream,
            rcv_timeout: None,
        }
    }

    /// Wraps a connected socket whose receive timeout is already `set`.
    fn with_read_timeout(stream: S, set: Duration) -> TimedStream<S> {
        TimedStream {
            stream,
            rcv_timeout: Some(set),
        }
    }

    /// Writes all of `bytes`.
    #[inline]
    pub fn write_all(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.stream.write_all(bytes)
    }

    /// Reads once into `buf`, giving up at `deadline`; `first` says this is the call's
    /// first read. 0 at end of file.
    #[inline]
    pub fn read(
        &mut self,
        buf: &mut [u8],
        deadline: Instant,
        first: bool,
    ) -> Result<usize, CallError> {
        let left = remaining(deadline)?;
        // No setsockopt in the common case: the first read of a call waits about the whole
        // timeout, which is what is already set (within the slack); a later read (of a
        // reply in pieces) waits exactly what is left.
        let close_enough = |t: Duration| t.abs_diff(left) <= RCV_TIMEOUT_SLACK;
        if self.rcv_timeout != Some(left) && (!first || !self.rcv_timeout.is_some_and(close_enough))
        {
            self.stream
                .set_read_timeout(Some(left))
                .map_err(|e| CallError::from_io(&e))?;
            self.rcv_timeout = Some(left);
        }
        self.stream.read(buf).map_err(|e| CallError::from_io(&e))
    }
}

impl TimedStream {
    /// Connects before `deadline` and turns Nagle off; writes time out at the deadline
    /// too. When `secure` says so, runs the TLS handshake, also before `deadline`. Returns
    /// the stream and what each step took. Every blocking transport that opens TCP
    /// connections connects through here.
    pub fn connect(
        addr: std::net::SocketAddr,
        deadline: Instant,
        secure: Secure<'_>,
        tcp_info: &std::sync::Arc<crate::tcpinfo::TcpInfoTally>,
    ) -> Result<(TimedStream, Took), CallError> {
        use std::os::fd::AsFd;
        let timeout = remaining(deadline)?;
        let started = Instant::now();
        let stream = connect_blocking(addr, timeout)?;
        let connect = started.elapsed();
        // The segments retransmitted so far (the SYN's) are told apart.
        let probe = crate::tcpinfo::Probe::opened(tcp_info, stream.as_fd(), connect);
        let (sock, tls) = match secure {
            None => (BlockingIo::Plain(stream, false), None),
            Some((client, alpn)) => {
                let (tls, took) = client.handshake_blocking(stream, alpn, deadline)?;
                (BlockingIo::Tls(Box::new(tls)), Some(took))
            }
        };
        let sock = BlockingSock::new(sock, probe);
        // The handshake set a receive timeout of its own.
        let stream = match tls {
            None => TimedStream::with_read_timeout(sock, timeout),
            Some(_) => TimedStream::new(sock),
        };
        Ok((stream, Took { connect, tls }))
    }
}

/// A blocking connect to `addr` that gives up after `timeout`, on a socket with Nagle off
/// and `timeout` as its read and write timeouts: set before the connect, so that a
/// connection per call costs three syscalls fewer than `TcpStream::connect_timeout` (which
/// connects non-blocking, polls, and switches back) and its first read none. Linux times a
/// blocking connect out at `SO_SNDTIMEO`, with `EINPROGRESS`.
fn connect_blocking(addr: std::net::SocketAddr, timeout: Duration) -> Result<TcpStream, CallError> {
    use socket2::{Domain, Protocol, Socket, Type};
    let setup = |e: std::io::Error| CallError::from_io(&e);
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))
        .map_err(|e| CallError::from_connect(&e))?;
    socket.set_tcp_nodelay(true).map_err(setup)?;
    socket.set_write_timeout(Some(timeout)).map_err(setup)?;
    socket.set_read_timeout(Some(timeout)).map_err(setup)?;
    let addr = addr.into();
    loop {
        match socket.connect(&addr) {
            Ok(()) => break,
            // A blocking connect interrupted by a signal goes on in the kernel; connecting
            // again waits for it (once more at most `timeout`), or finds it done.
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) if e.raw_os_error() == Some(libc::EISCONN) => break,
            Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) => {
                return Err(CallError::Connect(super::ConnectFailure::TimedOut));
            }
            Err(e) => return Err(CallError::from_connect(&e)),
        }
    }
    Ok(socket.into())
}

/// A connected socket that sends request frames and reads response frames, blocking.
pub(super) struct FrameConn<S = BlockingSock> {
    stream: TimedStream<S>,
    bufs: FrameBufs,
}

/// A frame connection's buffers, which a transport that opens a connection per call
/// (`tcp-connect`) keeps from one to the next: two 16 KiB allocations and the zeroing of
/// one less per call.
pub(super) struct FrameBufs {
    inbuf: RecvBuf,
    outbuf: Vec<u8>,
}

impl Default for FrameBufs {
    fn default() -> Self {
        FrameBufs {
            inbuf: RecvBuf::new(INITIAL_BUFFER),
            outbuf: Vec::with_capacity(INITIAL_BUFFER),
        }
    }
}

impl FrameConn {
    /// Connects (and handshakes, on a TLS endpoint) before `deadline`, Nagle off, into
    /// `bufs` (an earlier connection's, or new ones). Returns the connection and what
    /// opening it took.
    pub fn connect(
        addr: std::net::SocketAddr,
        deadline: Instant,
        endpoint: &Endpoint,
        bufs: FrameBufs,
    ) -> Result<(FrameConn, Took), CallError> {
        let (stream, took) = TimedStream::connect(
            addr,
            deadline,
            endpoint.secure(Alpn::None),
            &endpoint.tcp_info,
        )?;
        Ok((FrameConn::with_bufs(stream, bufs), took))
    }
}

impl<S: BlockingSocket> FrameConn<S> {
    /// Frames over a connected socket.
    pub fn new(stream: TimedStream<S>) -> FrameConn<S> {
        FrameConn::with_bufs(stream, FrameBufs::default())
    }

    /// Frames over a connected socket, in `bufs` (what they held is forgotten).
    pub fn with_bufs(stream: TimedStream<S>, mut bufs: FrameBufs) -> FrameConn<S> {
        bufs.inbuf.clear();
        bufs.outbuf.clear();
        FrameConn { stream, bufs }
    }

    /// Closes the connection, keeping its buffers for the next one.
    pub fn close(self) -> FrameBufs {
        self.bufs
    }

    /// Sends `call` and reads its reply, skipping (and counting in `duplicates`) replies to
    /// earlier calls.
    pub fn exchange(
        &mut self,
        call: &Call,
        deadline: Instant,
        phases: &mut Phases,
        duplicates: &mut u64,
    ) -> Result<Reply<'_>, CallError> {
        encode_request(call, &mut self.bufs.outbuf);
        let sent = Instant::now();
        self.stream
            .write_all(&self.bufs.outbuf)
            .map_err(|e| CallError::from_io(&e))?;
        let mut first = true;
        let max_body = call.max_body(RESPONSE_OVERHEAD as usize);
        let body = loop {
            let body = self.read_frame(max_body, deadline, &mut first, sent, phases)?;
            if is_reply_to(self.bufs.inbuf.get(body.clone()), call)? {
                break body;
            }
            *duplicates += 1;
        };
        reply_of(self.bufs.inbuf.get(body), call.rpc)
    }

    /// Reads until a whole frame, of a body at most `max_body` bytes, is buffered; returns
    /// the range of its body and consumes it.
    fn read_frame(
        &mut self,
        max_body: usize,
        deadline: Instant,
        first: &mut bool,
        sent: Instant,
        phases: &mut Phases,
    ) -> Result<Range<usize>, CallError> {
        loop {
            let need = match next_frame(&mut self.bufs.inbuf, max_body)? {
                Framed::Body(body) => return Ok(body),
                Framed::Need(need) => need,
            };
            let n = self
                .stream
                .read(self.bufs.inbuf.space_for(need), deadline, *first)?;
            if n == 0 {
                return Err(CallError::Closed);
            }
            if *first {
                phases.first_byte = Some(sent.elapsed());
                *first = false;
            }
            self.bufs.inbuf.filled(n);
        }
    }
}

/// A connected tokio socket that sends request frames and reads response frames, for the
/// event loop: the same framing as [`FrameConn`]; the call's timeout is the caller's
/// (one timer around the whole call rather than one per read).
pub(super) struct AsyncFrameConn<S = AsyncSock> {
    /// The socket.
    stream: S,
    /// Reply bytes received and not yet consumed.
    inbuf: RecvBuf,
    /// The request frame being sent.
    outbuf: Vec<u8>,
}

impl AsyncFrameConn {
    /// Connects (and handshakes, on a TLS endpoint, before `deadline`), Nagle off.
    /// Returns the connection and what opening it took.
    pub async fn connect(
        addr: std::net::SocketAddr,
        deadline: Instant,
        endpoint: &Endpoint,
    ) -> Result<(AsyncFrameConn, Took), CallError> {
        let (stream, took) = connect_nodelay(
            addr,
            endpoint.secure(Alpn::None),
            deadline,
            &endpoint.tcp_info,
        )
        .await?;
        Ok((AsyncFrameConn::new(stream), took))
    }
}

impl<S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin> AsyncFrameConn<S> {
    /// Frames over a connected tokio socket.
    pub fn new(stream: S) -> AsyncFrameConn<S> {
        AsyncFrameConn {
            stream,
            inbuf: RecvBuf::new(ASYNC_INITIAL_BUFFER),
            outbuf: Vec::new(),
        }
    }

    /// As [`FrameConn::exchange`], without a deadline of its own.
    pub async fn exchange(
        &mut self,
        call: &Call<'_>,
        phases: &mut Phases,
        duplicates: &mut u64,
    ) -> Result<Reply<'_>, CallError> {
        encode_request(call, &mut self.outbuf);
        let sent = Instant::now();
        self.stream
            .write_all(&self.outbuf)
            .await
            .map_err(|e| CallError::from_io(&e))?;
        let mut first = true;
        let max_body = call.max_body(RESPONSE_OVERHEAD as usize);
        let body = loop {
            let body = loop {
                let need = match next_frame(&mut self.inbuf, max_body)? {
                    Framed::Body(body) => break body,
                    Framed::Need(need) => need,
                };
                let n = self
                    .stream
                    .read(self.inbuf.space_for(need))
                    .await
                    .map_err(|e| CallError::from_io(&e))?;
                if n == 0 {
                    return Err(CallError::Closed);
                }
                if first {
                    phases.first_byte = Some(sent.elapsed());
                    first = false;
                }
                self.inbuf.filled(n);
            };
            if is_reply_to(self.inbuf.get(body.clone()), call)? {
                break body;
            }
            *duplicates += 1;
        };
        reply_of(self.inbuf.get(body), call.rpc)
    }
}

/// A [`Request`] that borrows its payload, so sending costs no copy. Same wire bytes.
#[derive(serde::Serialize)]
struct RequestRef<'a> {
    seq: u64,
    reply_len: Option<u32>,
    delay_us: u32,
    #[serde(with = "serde_bytes")]
    payload: &'a [u8],
}

// Keep RequestRef and Request in step: if a field is added to one, this stops compiling.
const _: fn(Request) -> RequestRef<'static> = |r| RequestRef {
    seq: r.seq,
    reply_len: r.reply_len,
    delay_us: r.delay_us,
    payload: &[],
};

/// How a persistent frame transport opens its connection: `tcp` dials the TCP port
/// (looking the name up first, and handshaking on a TLS endpoint), `unix` the socket
/// file. The rest, one connection per worker opened on the first call and kept, is
/// [`Persistent`]'s and [`AsyncPersistent`]'s, the same for both.
pub(super) trait Dial {
    /// The blocking socket the frames go over.
    type Sock: BlockingSocket;
    /// The event loop's socket.
    type AsyncSock: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin;
    /// Where the event loop dials, found before the call's timer starts.
    type Place;
    /// What the transport answers about itself.
    const FACTS: Facts;
    /// Opens a connection within `deadline`, recording its phases.
    fn dial(
        endpoint: &Endpoint,
        deadline: Instant,
        phases: &mut Phases,
    ) -> Result<FrameConn<Self::Sock>, CallError>;
    /// Where to dial: `tcp` looks the name up here, with its own deadline and its own
    /// failure (dns_timeout), before the call's timer, as on the blocking side.
    async fn locate(
        endpoint: &Endpoint,
        deadline: Instant,
        phases: &mut Phases,
    ) -> Result<Self::Place, CallError>;
    /// Opens a connection to `place` on the event loop, within the call's timer.
    async fn dial_async(
        endpoint: &Endpoint,
        place: Self::Place,
        deadline: Instant,
    ) -> Result<(AsyncFrameConn<Self::AsyncSock>, Took), CallError>;
}

/// One persistent frame connection per worker, opened on the first call and kept: the
/// blocking side of `tcp` and `unix`. Like every persistent transport it does not probe
/// a connection before writing, so a call after a server-side close is lost.
pub(super) struct Persistent<D: Dial> {
    endpoint: Endpoint,
    timeout: Duration,
    conn: Option<FrameConn<D::Sock>>,
    connects: u64,
    duplicates: u64,
}

impl<D: Dial> Transport for Persistent<D> {
    const FACTS: Facts = D::FACTS;

    fn open(endpoint: Endpoint, timeout: Duration) -> Result<Persistent<D>, OpenTransportError> {
        Ok(Persistent {
            endpoint,
            timeout,
            conn: None,
            connects: 0,
            duplicates: 0,
        })
    }

    fn call(&mut self, call: &Call, phases: &mut Phases) -> Result<Reply<'_>, CallError> {
        let deadline = Instant::now() + self.timeout;
        let conn = match &mut self.conn {
            Some(conn) => conn,
            slot @ None => {
                let conn = D::dial(&self.endpoint, deadline, phases)?;
                self.connects += 1;
                slot.insert(conn)
            }
        };
        conn.exchange(call, deadline, phases, &mut self.duplicates)
    }

    fn reset(&mut self) {
        self.conn = None;
    }

    fn counts(&self) -> Counts {
        Counts {
            duplicates: self.duplicates,
            ..Counts::connects(self.connects)
        }
    }
}

/// [`Persistent`] on the event loop: one persistent connection, the same frames, the same
/// duplicate rule.
pub(super) struct AsyncPersistent<D: Dial> {
    /// Where the calls go.
    endpoint: Endpoint,
    /// Longest a call may take.
    timeout: Duration,
    /// The timer of this connection's calls.
    timer: CallTimer,
    /// The connection, once open.
    conn: Option<AsyncFrameConn<D::AsyncSock>>,
    /// Connections opened so far.
    connects: u64,
    /// Replies to earlier calls read so far.
    duplicates: u64,
}

impl<D: Dial + 'static> AsyncTransport for AsyncPersistent<D> {
    fn open(endpoint: Endpoint, timeout: Duration) -> AsyncPersistent<D> {
        AsyncPersistent {
            endpoint,
            timeout,
            timer: CallTimer::default(),
            conn: None,
            connects: 0,
            duplicates: 0,
        }
    }

    async fn call(&mut self, call: &Call<'_>, phases: &mut Phases) -> Result<Reply<'_>, CallError> {
        let deadline = Instant::now() + self.timeout;
        let place = match self.conn {
            Some(_) => None,
            None => Some(D::locate(&self.endpoint, deadline, phases).await?),
        };
        let connecting = &Cell::new(place.is_some());
        let AsyncPersistent {
            endpoint,
            timer,
            conn,
            connects,
            duplicates,
            ..
        } = self;
        timer
            .within(deadline, connecting, async move {
                let conn = match (conn, place) {
                    (Some(conn), _) => conn,
                    (slot, Some(place)) => slot.insert(opened(
                        D::dial_async(endpoint, place, deadline).await?,
                        connects,
                        phases,
                        connecting,
                    )),
                    (None, None) => unreachable!("a place is found when there is no connection"),
                };
                conn.exchange(call, phases, duplicates).await
            })
            .await
    }

    fn reset(&mut self) {
        self.conn = None;
    }

    fn counts(&self) -> Counts {
        Counts {
            duplicates: self.duplicates,
            ..Counts::connects(self.connects)
        }
    }
}

/// How `tcp` dials: the TCP port, by the address mode's lookup, Nagle off, TLS on a TLS
/// endpoint.
pub(super) struct TcpDial;

impl Dial for TcpDial {
    type Sock = BlockingSock;
    type AsyncSock = AsyncSock;
    type Place = std::net::SocketAddr;
    const FACTS: Facts = Facts {
        summary: "one frame each way over a persistent TCP connection per worker (TCP_NODELAY)",
        persistent: true,
        port: Port::Tcp,
        round_trips: Some(1.0),
        fresh_twin: Some("tcp-connect"),
        encodings: crate::encoding::EncodingKind::ALL,
        ..Facts::DEFAULT
    };

    fn dial(
        endpoint: &Endpoint,
        deadline: Instant,
        phases: &mut Phases,
    ) -> Result<FrameConn, CallError> {
        let addr = endpoint.tcp_addr(deadline, phases)?;
        let (conn, took) = FrameConn::connect(addr, deadline, endpoint, FrameBufs::default())?;
        took.record(phases);
        Ok(conn)
    }

    async fn locate(
        endpoint: &Endpoint,
        deadline: Instant,
        phases: &mut Phases,
    ) -> Result<std::net::SocketAddr, CallError> {
        endpoint.addr_async(Port::Tcp, deadline, phases).await
    }

    async fn dial_async(
        endpoint: &Endpoint,
        addr: std::net::SocketAddr,
        deadline: Instant,
    ) -> Result<(AsyncFrameConn, Took), CallError> {
        AsyncFrameConn::connect(addr, deadline, endpoint).await
    }
}

/// The `tcp` transport.
pub type Tcp = Persistent<TcpDial>;

/// The `tcp` transport on the event loop.
pub type AsyncTcp = AsyncPersistent<TcpDial>;

#[cfg(test)]
mod tests {
    /// What the rest of the program reads from its facts: the connections a healthy run
    /// of 8 workers and 100 calls opens, the port, an event-loop side.
    #[test]
    fn its_facts() {
        super::super::expect_facts("tcp", 8, super::super::Port::Tcp, true);
    }
}
