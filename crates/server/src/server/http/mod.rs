//! HTTP listener (hyper): the life of a connection, from accept to close.
//!
//! HTTP/1.1 with keep-alive, and HTTP/2 with prior knowledge on the same port (the first
//! bytes say which); HTTP/2 requests with `content-type: application/grpc` go to
//! [`super::grpc`]. This file accepts connections, serves each on a
//! task of its own (reading the first request's head itself, so that a connection costs
//! little until a request has arrived), counts their bytes, and closes them when idle too
//! long or when shutdown starts. What a request gets back is decided in [`route`] and written out in [`reply`],
//! as hyper keeps `proto/h1`'s connection, role and encoding apart: each part can then be
//! read, and measured, without the other two.

mod body;
mod lean;
mod params;
pub(super) mod reply;
mod route;
mod rpc;

use super::Shared;
use super::budget::{ConnShare, StreamLease};
use super::grpc::{self, Grpc};
use super::registry::Registry;
use super::stats::{ProtoCounters, Reject, Stats};
use http_body_util::Either;
use hyper_util::rt::{TokioExecutor, TokioIo};
use std::convert::Infallible;
use std::io;
use std::pin::Pin;
use std::sync::atomic::Ordering::{AcqRel, Acquire};
use std::sync::atomic::{AtomicU8, AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};

/// How often an HTTP connection checks whether it has been idle too long. A tenth of the
/// timeout keeps the overshoot small without waking often: a connection is closed when
/// this many checks in a row saw no byte move, between 1 and 1.1 timeouts after the last.
/// The write timeout is watched by the same checks, a tenth of the shorter of the two.
pub(super) const IDLE_CHECKS_PER_TIMEOUT: u32 = 10;

/// hyper's HTTP/1.1 buffer limit (`max_buf_size`), its smallest allowed value: 8 KiB. It
/// bounds the write buffer, into which hyper copies reply chunks while it holds less than
/// this, so a client that stops reading holds at most this plus one chunk
/// ([`crate::server::payload::CHUNK`]) of it; and the read buffer, so a request head is
/// at most 8 KiB (a longer one gets 431), as nginx's `large_client_header_buffers` line.
/// hyper's default, about 400 KiB, let every stalled connection hold 400 KiB of copies.
const WRITE_BUFFER: usize = 8 * 1024;

/// Streams an HTTP/2 client may have open at once on one connection: 100, as h2o and
/// Go's server allow (nginx 128). hyper's default was 200; each open stream costs its
/// request, its task and its state whatever its window, so this bounds what one
/// connection holds that the buffer budget does not count. More are refused with
/// REFUSED_STREAM, which clients retry.
pub(super) const MAX_STREAMS: u32 = 100;

/// Bytes HTTP/2 may queue for one stream before it asks the body for more: 64 KiB, four
/// DATA frames. Chunks of the pattern are references to a static table and an echo's are
/// slices of its leased body, so this bounds references rather than copies; hyper's
/// default (400 KiB) only let a stream run further ahead of its reader.
const STREAM_SEND_BUFFER: usize = 64 * 1024;

/// What an open HTTP/2 stream costs besides its body, taken from the buffer budget while
/// it is open: 4 KiB, above the 3.3 KiB measured per stream held at a zero window
/// (its request's head, its task and future, the `h2` crate's stream state: 20,000
/// streams on 200 connections grew the server by 72 MiB). Without it 2,000 connections of
/// 20 streams each held 170 MiB that no budget counted.
const STREAM_COST: u64 = 4 * 1024;

/// Accepts connections until shutdown starts.
pub(super) async fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    accept_with(listener, shared, None).await;
}

/// Accepts HTTPS connections until shutdown starts: each runs its TLS handshake (ALPN
/// `h2` or `http/1.1`) on its own task, then is served exactly as a plain one, gRPC
/// included.
pub(super) async fn accept_loop_tls(
    listener: TcpListener,
    shared: Arc<Shared>,
    tls: Arc<super::tls::ServerTls>,
) {
    accept_with(listener, shared, Some(tls)).await;
}

/// The accept loop of both HTTP listeners: plain when `tls` is `None`.
async fn accept_with(
    listener: TcpListener,
    shared: Arc<Shared>,
    tls: Option<Arc<super::tls::ServerTls>>,
) {
    let mut http1 = hyper::server::conn::http1::Builder::new();
    // An HTTP/1 client may shut its write side once its request is sent (`nc -N` does, and
    // nginx allows it). Without this, hyper also probes for that end of file while every
    // request is being answered, which re-allocated its 8 KiB read buffer per request.
    //
    // Replies are copied behind their headers and written with one `write` instead of a
    // `writev` of both: for the small replies of RPC tests, hyper's bookkeeping of a
    // vectored write cost more than the copy (callgrind: 8.6k -> 8.1k instructions per
    // 100-byte reply). A 1 MiB reply pays one extra memcpy, within the noise of its
    // millisecond round trip here.
    http1
        .half_close(true)
        .writev(false)
        .max_buf_size(WRITE_BUFFER);
    let mut http2 = hyper::server::conn::http2::Builder::new(TokioExecutor::new());
    http2
        .max_concurrent_streams(MAX_STREAMS)
        .max_send_buf_size(STREAM_SEND_BUFFER);
    let builder = Arc::new(Builders { http1, http2 });
    let watched = Arc::new(Registry::<Watch>::default());
    tokio::spawn(watch(watched.clone(), shared.clone()));
    let grpc = Grpc::new();
    let counters: fn(&Stats) -> &ProtoCounters = match tls {
        Some(_) => |s| &s.https,
        None => |s| &s.http,
    };
    while let Some((stream, guard)) = shared.next_connection(&listener, counters).await {
        let (shared, builder, watched) = (shared.clone(), builder.clone(), watched.clone());
        let (grpc, tls) = (grpc.clone(), tls.clone());
        let _ = stream.set_nodelay(true);
        // One task type per kind of connection: a task is as large as its largest state,
        // and a TLS connection's (rustls' buffers, the handshake) made every plain
        // connection's task 4.6 KiB larger when both shared one (16.7 KiB per idle
        // kept-alive connection instead of 12.1).
        match tls {
            None => {
                tokio::spawn(async move {
                    let _guard = guard;
                    serve(stream, &builder, shared, &watched, grpc, counters).await;
                });
            }
            Some(tls) => {
                tokio::spawn(async move {
                    let _guard = guard;
                    let handshaken = super::tls::handshake(
                        stream,
                        &tls.https,
                        &shared,
                        &shared.stats.https_handshakes,
                    )
                    .await;
                    if let Some(stream) = handshaken {
                        serve(stream, &builder, shared, &watched, grpc, counters).await;
                    }
                });
            }
        }
    }
}

/// A connection the HTTP service can be served on: plain TCP, or TLS over it.
pub(super) trait HttpIo: AsyncRead + AsyncWrite + Unpin + Send + 'static {
    /// Waits until a read would find something, so [`read_head`] allocates its buffer
    /// only then (a plain socket); TLS has its buffers already and returns at once.
    fn wait_readable(&self) -> impl Future<Output = io::Result<()>> + Send;
    /// Reads what has arrived into `buf`'s spare capacity (at least a byte, or 0 at the
    /// end of the stream).
    fn read_some<'a>(
        &'a mut self,
        buf: &'a mut Vec<u8>,
    ) -> impl Future<Output = io::Result<usize>> + Send + 'a;
}

impl HttpIo for TcpStream {
    async fn wait_readable(&self) -> io::Result<()> {
        self.readable().await
    }

    /// A read that leaves room in `buf` drained the socket (epoll is edge-triggered, as
    /// tokio's own `poll_read` relies on), so it also clears the socket's read readiness:
    /// the next read then waits for the next request's bytes instead of first trying a
    /// `recv` that can only fail with `EAGAIN`. Under `wrk -c64` that was one `recvfrom` in
    /// two, a third of the server's system calls (strace: 105,050 `recvfrom`, 51,503 of them
    /// `EAGAIN`, for 53,547 replies; nginx makes one per request).
    async fn read_some(&mut self, buf: &mut Vec<u8>) -> io::Result<usize> {
        loop {
            let room = buf.capacity() - buf.len();
            let mut got = None;
            let res = self.try_io(tokio::io::Interest::READABLE, || {
                let n = self.try_read_buf(buf)?;
                got = Some(n);
                if 0 < n && n < room {
                    // Drained: tokio clears the readiness it saw when told `WouldBlock`
                    // (and keeps any that came after, and a closed state for good).
                    Err(io::ErrorKind::WouldBlock.into())
                } else {
                    Ok(n)
                }
            });
            match (res, got) {
                (_, Some(n)) => return Ok(n),
                (Err(e), None) if e.kind() == io::ErrorKind::WouldBlock => self.readable().await?,
                (res, None) => return res,
            }
        }
    }
}

impl HttpIo for tokio_rustls::server::TlsStream<TcpStream> {
    async fn wait_readable(&self) -> io::Result<()> {
        Ok(())
    }

    async fn read_some(&mut self, buf: &mut Vec<u8>) -> io::Result<usize> {
        use tokio::io::AsyncReadExt;
        self.read_buf(buf).await
    }
}

/// Why the watcher tells a connection to close.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
enum CloseReason {
    /// Nothing moved for a whole idle timeout: counted as [`Reject::IdleTimeout`].
    Idle = 1,
    /// The server is shutting down: expected, not counted.
    Shutdown = 2,
    /// A reply took no byte for a whole write timeout: counted as
    /// [`Reject::WriteTimeout`], and the connection is dropped at once (its replies are
    /// what is stuck, so waiting for them to finish would wait forever).
    WriteTimeout = 3,
}

/// The close reason of one connection: none until the watcher gives one, then that one for
/// good (the first reason given wins).
///
/// An atomic byte rather than a `Mutex<Option<CloseReason>>`: the connection reads it at
/// every wake-up, once or twice per request, and a load is all that costs.
struct CloseFlag(AtomicU8);

impl CloseFlag {
    /// The byte while no reason has been given; the reasons are 1 and up.
    const OPEN: u8 = 0;

    fn new() -> Self {
        CloseFlag(AtomicU8::new(Self::OPEN))
    }

    /// The reason given, if any. Acquire pairs with the release in [`CloseFlag::set`].
    fn get(&self) -> Option<CloseReason> {
        match self.0.load(Acquire) {
            1 => Some(CloseReason::Idle),
            2 => Some(CloseReason::Shutdown),
            3 => Some(CloseReason::WriteTimeout),
            _ => None,
        }
    }

    /// Records `why` unless a reason was given before; true when this call set it.
    fn set(&self, why: CloseReason) -> bool {
        self.0
            .compare_exchange(Self::OPEN, why as u8, AcqRel, Acquire)
            .is_ok()
    }
}

/// A connection as the watcher sees it. Watching from outside keeps timers and the
/// shutdown signal out of every connection's wake-ups, which happen once or twice per
/// request.
struct Watch {
    conn: Arc<ConnState>,
    /// The connection's `moves` count at the last check.
    moves_seen: u64,
    /// When a check last saw a byte move or a request in flight.
    busy_at: tokio::time::Instant,
    /// The connection's `taken` count at the last check.
    taken_seen: u64,
    /// When a check last saw no reply waiting, or a reply's bytes taken.
    taking_at: tokio::time::Instant,
}

/// Every tenth of the shorter of the idle and write timeouts, tells connections quiet
/// for a whole idle timeout, and those whose replies took nothing for a whole write
/// timeout, to close; at shutdown, tells every connection.
async fn watch(watched: Arc<Registry<Watch>>, shared: Arc<Shared>) {
    let (idle, write) = (shared.config.idle_timeout, shared.config.write_timeout);
    let mut check = tokio::time::interval(idle.min(write) / IDLE_CHECKS_PER_TIMEOUT);
    let stopping = super::stopping(shared.shutdown.clone());
    tokio::pin!(stopping);
    loop {
        tokio::select! {
            now = check.tick() => watched.for_each(|w| {
                let conn = &w.conn;
                let moves = conn.moves.load(Relaxed);
                if moves != w.moves_seen || conn.in_flight.load(Relaxed) > 0 {
                    (w.moves_seen, w.busy_at) = (moves, now);
                }
                let taken = conn.taken.load(Relaxed);
                if taken != w.taken_seen || conn.sending.load(Relaxed) == 0 {
                    (w.taken_seen, w.taking_at) = (taken, now);
                }
                if now - w.taking_at >= write {
                    conn.tell_close(CloseReason::WriteTimeout);
                } else if now - w.busy_at >= idle {
                    conn.tell_close(CloseReason::Idle);
                }
            }),
            _ = &mut stopping => {
                watched.close(|w| w.conn.tell_close(CloseReason::Shutdown));
                return;
            }
        }
    }
}

/// Serves one connection, closing it when idle too long or when shutdown starts.
///
/// In two stages. Until the first request's head is complete, the connection is this
/// task and a buffer the size of what arrived ([`read_head`]); only then is it handed to
/// hyper, which allocates a read buffer and a write buffer of 8 KiB each at once, and
/// (boxed, so the task does not carry it before then) its connection state, of the one
/// version the head chose. A connection that sends nothing, or half a header and then
/// nothing (slowloris), so costs about 2 KiB instead of 29 KiB (`report/server_memory.md`).
/// Rejected: hyper's `max_buf_size`, whose smallest value is the same 8 KiB, and a smaller
/// first buffer inside hyper, which it has no setting for.
async fn serve<S: HttpIo>(
    stream: S,
    builder: &Builders,
    shared: Arc<Shared>,
    watched: &Arc<Registry<Watch>>,
    grpc: Grpc,
    counters: fn(&Stats) -> &ProtoCounters,
) {
    let conn_state = ConnState::new(&shared, counters);
    let now = tokio::time::Instant::now();
    // Refused once shutdown has begun: returning closes the connection.
    let Some(_registered) = watched.add(Watch {
        conn: conn_state.clone(),
        moves_seen: 0,
        busy_at: now,
        taken_seen: 0,
        taking_at: now,
    }) else {
        return;
    };
    let mut io = CountingIo {
        inner: stream,
        state: conn_state.clone(),
        head: Head::default(),
    };
    let mut registered: Option<Waker> = None;
    if !first_head(&mut io, &conn_state, &mut registered, &shared).await {
        return;
    }
    let http2 = io.head.bytes.starts_with(H2_PREFACE);
    if http2 {
        shared.stats.http2.connections.fetch_add(1, Relaxed);
    } else if let lean::Lean::Done = lean::serve(&mut io, &conn_state, &mut registered).await {
        // Plain keep-alive echoes were answered without hyper; hyper takes the connection
        // from the first request that is not one of those (see `lean`).
        return;
    }
    let service = {
        let conn_state = conn_state.clone();
        hyper::service::service_fn(move |req| {
            let state = conn_state.clone();
            async move {
                // A guard, not a decrement after the await: hyper drops this future when
                // the connection ends mid-request, and the count must still go down.
                let mut busy = InFlight::enter(&state, false);
                let resp = route::route(req, &state.shared, &state.share).await;
                busy.answered = true;
                Ok::<_, Infallible>(resp.map(|body| Sending::new(body, &state)))
            }
        })
    };
    // One version's state, boxed: the task does not carry it before the head is in.
    let mut conn = if http2 {
        // HTTP/2 has a service of its own that sends gRPC calls to tonic, so the HTTP/1
        // path (and its reply type) is the same as before gRPC.
        let service = {
            let conn_state = conn_state.clone();
            hyper::service::service_fn(move |req| answer_h2(req, conn_state.clone(), grpc.clone()))
        };
        Serving::Http2(Box::pin(
            builder.http2.serve_connection(TokioIo::new(io), service),
        ))
    } else {
        Serving::Http1(Box::pin(
            builder.http1.serve_connection(TokioIo::new(io), service),
        ))
    };
    let mut closing = false;
    let res = std::future::poll_fn(|cx| {
        if !closing && let Some(why) = conn_state.close_told(cx, &mut registered) {
            count_close(&shared, why);
            if why == CloseReason::WriteTimeout {
                // The replies in flight are the ones the client does not take: the
                // connection goes now, with them.
                return Poll::Ready(Ok(()));
            }
            // Requests in flight finish; an idle keep-alive connection closes now.
            match &mut conn {
                Serving::Http1(c) => c.as_mut().graceful_shutdown(),
                Serving::Http2(c) => c.as_mut().graceful_shutdown(),
            }
            closing = true;
        }
        match &mut conn {
            Serving::Http1(c) => c.as_mut().poll(cx),
            Serving::Http2(c) => c.as_mut().poll(cx),
        }
    })
    .await;
    if res.is_err() && conn_state.close.get().is_none() {
        shared.stats.reject(Reject::HttpConnectionError);
    }
}

/// Reads the first request's head before hyper takes the connection ([`read_head`]),
/// unless the watcher closes it first; true when a whole head is in and hyper should
/// serve it. A connection closed, reset or refused here is counted here.
async fn first_head<S: HttpIo>(
    io: &mut CountingIo<S>,
    state: &ConnState,
    registered: &mut Option<Waker>,
    shared: &Shared,
) -> bool {
    let head = {
        let reading = read_head(io);
        tokio::pin!(reading);
        std::future::poll_fn(|cx| match state.close_told(cx, registered) {
            Some(why) => Poll::Ready(Err(why)),
            None => reading.as_mut().poll(cx).map(Ok),
        })
        .await
    };
    match head {
        Ok(Ok(HeadEnd::Whole)) => true,
        // Closed before sending anything: nothing to answer, nothing to count.
        Ok(Ok(HeadEnd::Closed)) if io.head.bytes.is_empty() => false,
        Ok(Ok(HeadEnd::Tls)) => {
            shared.stats.reject(Reject::HttpTlsClient);
            false
        }
        // Closed or reset in the middle of a head: what hyper counts as a connection
        // error, without building hyper's state only to see it end.
        Ok(Ok(HeadEnd::Closed)) | Ok(Err(_)) => {
            shared.stats.reject(Reject::HttpConnectionError);
            false
        }
        Err(why) => {
            count_close(shared, why);
            false
        }
    }
}

/// Answers one request of an HTTP/2 connection: a gRPC call to tonic, anything else to
/// the router. HTTP/2 has a service of its own, so the HTTP/1 path (and its reply type)
/// is the same as before gRPC.
async fn answer_h2(
    req: hyper::Request<hyper::body::Incoming>,
    state: Arc<ConnState>,
    grpc: Grpc,
) -> Result<hyper::Response<Sending<Either<reply::Body, grpc::GrpcBody>>>, Infallible> {
    let mut busy = InFlight::enter(&state, true);
    // The stream's own memory comes out of the budget for as long as it is open, but for
    // a connection's only stream (StreamLease).
    let stream = StreamLease::open(&state.shared.stats.budget, &state.share, STREAM_COST);
    let resp = if stream.is_none() {
        if grpc::is_grpc(&req) {
            grpc::over_budget(&state.shared).map(Either::Right)
        } else {
            route::over_budget(&state.shared).map(Either::Left)
        }
    } else if grpc::is_grpc(&req) {
        grpc::serve(&grpc, req, &state.shared, &state.share)
            .await
            .map(Either::Right)
    } else {
        route::route(req, &state.shared, &state.share)
            .await
            .map(Either::Left)
    };
    busy.answered = true;
    Ok(resp.map(|body| Sending::new(body, &state).holding(stream)))
}

/// Counts a connection closed for `why`, when that is worth counting.
fn count_close(shared: &Shared, why: CloseReason) {
    match why {
        CloseReason::Idle => shared.stats.reject(Reject::IdleTimeout),
        CloseReason::WriteTimeout => shared.stats.reject(Reject::WriteTimeout),
        CloseReason::Shutdown => {}
    }
}

/// hyper's builders for the two versions, configured once for every connection.
struct Builders {
    http1: hyper::server::conn::http1::Builder,
    http2: hyper::server::conn::http2::Builder<TokioExecutor>,
}

/// A connection in hyper's hands, of the version its first bytes chose.
///
/// The version is picked here from the head already read, rather than by hyper-util's
/// auto builder: its connection is an enum of both versions' states, so every HTTP/1
/// connection, boxed, paid for the larger HTTP/2 state too (an idle keep-alive connection
/// went from 17.2 to 12.1 KiB without it, `report/server_memory.md`).
enum Serving<C1, C2> {
    Http1(Pin<Box<C1>>),
    Http2(Pin<Box<C2>>),
}

/// What an HTTP/2 client with prior knowledge sends first (RFC 9113, section 3.4).
const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// The first size of a connection's head buffer: a request head from curl, wrk or hyper
/// is 60 to 200 bytes, and a browser's rarely passes 512.
const HEAD_FIRST: usize = 512;

/// Largest head read before hyper takes over: hyper's own first read buffer. A longer
/// head is hyper's to finish (up to its limits), as if this stage were not there.
const HEAD_MAX: usize = 8 * 1024;

/// How [`read_head`] ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum HeadEnd {
    /// A blank line arrived, or [`HEAD_MAX`] bytes: hyper takes over.
    Whole,
    /// The client closed its side first (after nothing, or after part of a head).
    Closed,
    /// The first bytes are a TLS record: a TLS client on a plain port. It is closed at
    /// once, which its handshake sees as a server that does not speak TLS, rather than
    /// left waiting for a blank line no ClientHello has.
    Tls,
}

/// Reads the start of the first request until its head is complete (a blank line), the
/// head reaches [`HEAD_MAX`], or the client closes or resets; what was read waits in
/// `io.head` for hyper.
///
/// The buffer is allocated when the first byte can be read, not before, at
/// [`HEAD_FIRST`], doubling when full. HTTP/2's preface ([`H2_PREFACE`]) counts as a
/// whole head once all of it is in: [`serve`] then picks HTTP/2 by it.
async fn read_head<S: HttpIo>(io: &mut CountingIo<S>) -> io::Result<HeadEnd> {
    let head = &mut io.head.bytes;
    loop {
        io.inner.wait_readable().await?;
        if head.len() == head.capacity() {
            // Doubling from HEAD_FIRST, never past HEAD_MAX (the length is below it here).
            let more = head.capacity().max(HEAD_FIRST).min(HEAD_MAX - head.len());
            head.reserve_exact(more);
        }
        let before = head.len();
        match io.inner.read_some(head).await {
            Ok(0) => return Ok(HeadEnd::Closed),
            Ok(n) => {
                count_moved(&io.state, n, |s| &s.bytes_in);
                if before == 0 && crate::wire::looks_like_tls(head) {
                    return Ok(HeadEnd::Tls);
                }
                // Part of HTTP/2's preface (which has a blank line in it) is not a head.
                let partial_preface = head.len() < H2_PREFACE.len() && H2_PREFACE.starts_with(head);
                if head.len() >= HEAD_MAX || (!partial_preface && ends_head(head, before)) {
                    return Ok(HeadEnd::Whole);
                }
            }
            Err(e) => return Err(e),
        }
    }
}

/// Whether `head` has a blank line (`\n\n` or `\n\r\n`) ending at or after `from`: the end
/// of an HTTP/1 request head (httparse accepts both line ends).
fn ends_head(head: &[u8], from: usize) -> bool {
    let tail = &head[from.saturating_sub(2)..];
    tail.windows(2).any(|w| w == b"\n\n") || tail.windows(3).any(|w| w == b"\n\r\n")
}

/// What the requests of one connection share, and how the watcher reaches it.
struct ConnState {
    /// The listener's counters (`http` or `https`), where its bytes are counted.
    counters: fn(&Stats) -> &ProtoCounters,
    /// What this connection's requests may hold of the buffer budget together.
    share: Arc<ConnShare>,
    shared: Arc<Shared>,
    /// Requests being answered on this connection.
    in_flight: AtomicUsize,
    /// Reads and writes that moved data. Only this connection's task writes it.
    moves: AtomicU64,
    /// Reply bodies handed to hyper and not yet all taken from (or dropped).
    sending: AtomicUsize,
    /// Reply body bytes hyper has taken: it takes more only as the client reads (HTTP/1.1)
    /// or opens its window (HTTP/2), so an unchanged count with a reply waiting is a
    /// client that takes nothing.
    taken: AtomicU64,
    /// Set by the watcher: why the connection should close.
    close: CloseFlag,
    /// The connection task's waker, for the watcher to wake it after setting `close`.
    waker: Mutex<Option<Waker>>,
}

impl ConnState {
    /// A new connection's state, counted under `counters`, with its share of the budget.
    fn new(shared: &Arc<Shared>, counters: fn(&Stats) -> &ProtoCounters) -> Arc<ConnState> {
        Arc::new(ConnState {
            counters,
            share: Arc::new(ConnShare::new(
                &shared.stats.budget,
                shared.config.max_frame,
            )),
            shared: shared.clone(),
            in_flight: AtomicUsize::new(0),
            moves: AtomicU64::new(0),
            sending: AtomicUsize::new(0),
            taken: AtomicU64::new(0),
            close: CloseFlag::new(),
            waker: Mutex::new(None),
        })
    }

    /// The close reason the watcher gave, if any, after handing it this task's waker.
    ///
    /// The waker goes first, then the flag is read: a close told after the read then
    /// finds the waker and wakes us. `registered` is the waker handed last, so an
    /// unchanged one is not handed again on every poll.
    fn close_told(&self, cx: &Context<'_>, registered: &mut Option<Waker>) -> Option<CloseReason> {
        if !registered.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
            *self.waker.lock().unwrap_or_else(|e| e.into_inner()) = Some(cx.waker().clone());
            *registered = Some(cx.waker().clone());
        }
        self.close.get()
    }

    /// Asks the connection to close (the first reason given wins) and wakes its task.
    fn tell_close(&self, why: CloseReason) {
        if self.close.set(why)
            && let Some(waker) = self.waker.lock().unwrap_or_else(|e| e.into_inner()).take()
        {
            waker.wake();
        }
    }
}

/// Counts a request in flight on a connection for as long as it lives, and on an HTTP/2
/// connection an open stream too. hyper drops the request's future when an HTTP/2 client
/// resets the stream first: a guard still dropped before `answered` was a reset stream.
struct InFlight<'a> {
    conn: &'a ConnState,
    http2: bool,
    /// Set once the reply is ready.
    answered: bool,
}

impl InFlight<'_> {
    fn enter(conn: &ConnState, http2: bool) -> InFlight<'_> {
        let now = conn.in_flight.fetch_add(1, Relaxed) + 1;
        if http2 {
            conn.shared.stats.http2.stream_opened(now as u64);
        }
        InFlight {
            conn,
            http2,
            answered: false,
        }
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.conn.in_flight.fetch_sub(1, Relaxed);
        if self.http2 {
            let stats = &self.conn.shared.stats;
            stats.http2.stream_closed();
            if !self.answered {
                stats.reject(Reject::Http2StreamReset);
            }
        }
    }
}

/// A reply body on its way to the client: counted in its connection's `sending` while it
/// has bytes ready that hyper has not taken, and its bytes in `taken` as hyper takes them,
/// for the write timeout.
///
/// A body that has nothing ready (a gRPC stream waiting for the client's next request)
/// is not counted: it waits for the client to send, not to read. hyper drops the body
/// once it has taken its end, or when the stream or connection ends.
struct Sending<B> {
    inner: B,
    conn: Arc<ConnState>,
    /// Counted in `sending`: the body had something ready when last asked (or has not
    /// been asked yet).
    ready: bool,
    /// An HTTP/2 stream's share of the budget, given back when the stream is done.
    _stream: Option<StreamLease>,
}

impl<B> Sending<B> {
    fn new(inner: B, conn: &Arc<ConnState>) -> Sending<B> {
        conn.sending.fetch_add(1, Relaxed);
        Sending {
            inner,
            conn: conn.clone(),
            ready: true,
            _stream: None,
        }
    }

    /// Keeps `stream`, the lease of the stream this body answers, until it is dropped.
    fn holding(mut self, stream: Option<StreamLease>) -> Sending<B> {
        self._stream = stream;
        self
    }

    /// Counts the body in `sending` or not.
    fn set_ready(&mut self, ready: bool) {
        if ready != self.ready {
            self.ready = ready;
            if ready {
                self.conn.sending.fetch_add(1, Relaxed);
            } else {
                self.conn.sending.fetch_sub(1, Relaxed);
            }
        }
    }
}

impl<B> Drop for Sending<B> {
    fn drop(&mut self) {
        self.set_ready(false);
    }
}

impl<B: hyper::body::Body<Data = bytes::Bytes> + Unpin> hyper::body::Body for Sending<B> {
    type Data = bytes::Bytes;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<hyper::body::Frame<bytes::Bytes>, B::Error>>> {
        let frame = Pin::new(&mut self.inner).poll_frame(cx);
        match &frame {
            Poll::Pending => self.set_ready(false),
            Poll::Ready(Some(Ok(f))) => {
                if let Some(data) = f.data_ref() {
                    self.conn.taken.fetch_add(data.len() as u64, Relaxed);
                }
                self.set_ready(true);
            }
            // The end, or an error: nothing more will be ready.
            Poll::Ready(_) => self.set_ready(false),
        }
        frame
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.inner.size_hint()
    }
}

/// A TCP stream that counts bytes for /stats and counts its reads and writes, so the
/// watcher can close the connection after the idle timeout. A count rather than a
/// timestamp: the watcher only needs to know whether anything moved since it last looked,
/// and reading the clock twice per request was a measurable share of the server's time.
///
/// It also hands hyper the head that [`read_head`] read before hyper was there.
struct CountingIo<S> {
    inner: S,
    state: Arc<ConnState>,
    head: Head,
}

/// The bytes read before hyper took over, given to hyper before anything more is read
/// from the socket. Freed once hyper has taken them all.
#[derive(Default)]
struct Head {
    bytes: Vec<u8>,
    /// How many of `bytes` hyper has taken.
    taken: usize,
}

impl<S> CountingIo<S> {
    fn moved(&self, n: usize, counter: fn(&ProtoCounters) -> &AtomicU64) {
        count_moved(&self.state, n, counter);
    }
}

/// Counts `n` bytes moved on a connection in `counter` and, when there were any, one move
/// for the idle watcher.
fn count_moved(state: &ConnState, n: usize, counter: fn(&ProtoCounters) -> &AtomicU64) {
    if n > 0 {
        counter((state.counters)(&state.shared.stats)).fetch_add(n as u64, Relaxed);
        let moves = &state.moves;
        moves.store(moves.load(Relaxed).wrapping_add(1), Relaxed);
    }
}

impl<S: HttpIo> AsyncRead for CountingIo<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let head = &mut self.head;
        if head.taken < head.bytes.len() {
            // Already counted when it was read.
            let n = buf.remaining().min(head.bytes.len() - head.taken);
            buf.put_slice(&head.bytes[head.taken..head.taken + n]);
            head.taken += n;
            if head.taken == head.bytes.len() {
                *head = Head::default();
            }
            return Poll::Ready(Ok(()));
        }
        let before = buf.filled().len();
        let res = Pin::new(&mut self.inner).poll_read(cx, buf);
        let n = buf.filled().len() - before;
        self.moved(n, |s| &s.bytes_in);
        res
    }
}

impl<S: HttpIo> AsyncWrite for CountingIo<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let res = Pin::new(&mut self.inner).poll_write(cx, buf);
        if let Poll::Ready(Ok(n)) = res {
            self.moved(n, |s| &s.bytes_out);
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
            self.moved(n, |s| &s.bytes_out);
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
    fn the_first_close_reason_wins() {
        let flag = CloseFlag::new();
        assert_eq!(flag.get(), None);
        assert!(flag.set(CloseReason::Idle));
        assert!(!flag.set(CloseReason::Shutdown));
        assert_eq!(flag.get(), Some(CloseReason::Idle));
    }
}
