//! Raw TCP listener: reads length-prefixed postcard requests, writes responses in order.
//!
//! A connection that is busy is served by a thread of its own with blocking reads and
//! writes (threads are reused, see [`super::pool`]). For one request in flight, the usual
//! case of a latency test, that is two system calls per round trip (`recv`, `send`) where
//! an event loop needs a third (`epoll_wait`) and a task wake-up: about 2 µs of a 15 µs
//! loopback round trip on the machines this was measured on, the same design as
//! sockperf's and netperf's servers.
//!
//! A connection that has been silent for [`BUSY_SPELL`] gives its thread back: it is
//! *parked* on the tokio reactor, which waits for it to become readable without a thread
//! and without a read buffer, and then hands it to a pool thread again. An idle
//! connection so costs a task and a reactor registration (about a kilobyte) instead of a
//! thread (a stack, its allocator heap, a buffer: 289 KiB measured), so 10,000 idle
//! connections fit where 2,000 used 578 MiB (issue #10, `report/server_memory.md`).
//!
//! Every complete frame already buffered is answered before the replies are written in one
//! `write_all`, so pipelined requests cost one write per batch instead of one per reply.
//! A reply is never made whole: its head goes to the batch, and a payload of more than a
//! few kilobytes is written from where it already is, the static pattern table or the
//! request's own bytes, so a client that stops reading holds this connection's two small
//! buffers and its thread, until the write timeout closes it (issue #23). A request frame
//! larger than the small buffer is leased from the server's buffer budget
//! ([`super::budget`]) when its length prefix arrives; over the budget it is read and
//! dropped, and answered with status 4.
//!
//! The Unix socket listener (`--unix`) speaks the same frames and is served by the same
//! code: everything here is generic over a [`FrameStream`], implemented for TCP here and
//! for Unix sockets in `unix.rs`; only accepting and parking differ.

use super::budget::Lease;
use super::pool::ThreadPool;
use super::stats::{ProtoCounters, Reject, Stats};
use super::{ConnGuard, Shared};
use crate::wire::{self, DecodeFrameError, LEN_PREFIX, Request, RequestRef, Response, Status};
use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};
use tokio::net::TcpListener;

/// A connected stream socket the frame protocol is served on: a blocking `std` socket on
/// a pool thread while busy, its tokio twin ([`FrameStream::Parked`]) on the reactor while
/// parked. TCP and Unix sockets implement it; nothing else in this file knows which.
pub(super) trait FrameStream: Sized + Send + 'static
where
    for<'a> &'a Self: Read + Write,
{
    /// The socket registered with the reactor while parked.
    type Parked: Send + 'static;
    /// Which of the server's counters the listener feeds.
    const COUNTERS: fn(&Stats) -> &ProtoCounters;
    /// The thread names of the listener's pool.
    const THREAD_NAME: &'static str;

    /// Sets the blocking socket up for a busy spell: the read timeout is the spell, the
    /// write timeout (`--write-timeout`) keeps a client that stops reading from holding a
    /// thread forever.
    fn set_timeouts(&self, read: Duration, write: Duration) -> std::io::Result<()>;
    /// Registers the socket with the reactor.
    fn park(self) -> std::io::Result<Self::Parked>;
    /// Waits until the parked socket can be read: `Ok(0)` when what is there is the end
    /// of the stream, `Ok(n > 0)` when there is at least a byte (or the end of the stream
    /// and the socket type cannot tell them apart without a read; the busy thread then
    /// reads 0 and closes the connection).
    fn readable(parked: &Self::Parked) -> impl Future<Output = std::io::Result<usize>> + Send;
    /// Back to a blocking socket for a pool thread.
    fn unpark(parked: Self::Parked) -> std::io::Result<Self>;
}

impl FrameStream for TcpStream {
    type Parked = tokio::net::TcpStream;
    const COUNTERS: fn(&Stats) -> &ProtoCounters = |s| &s.tcp;
    const THREAD_NAME: &'static str = super::THREAD_NAMES[1];

    fn set_timeouts(&self, read: Duration, write: Duration) -> std::io::Result<()> {
        self.set_read_timeout(Some(read))?;
        self.set_write_timeout(Some(write))
    }

    fn park(self) -> std::io::Result<tokio::net::TcpStream> {
        self.set_nonblocking(true)?;
        tokio::net::TcpStream::from_std(self)
    }

    async fn readable(parked: &tokio::net::TcpStream) -> std::io::Result<usize> {
        // A peek rather than only waiting for readability: the usual end of a parked
        // connection is the client closing it, and that is handled on the reactor,
        // without waking a thread (and its buffers) only to read end of file.
        let mut probe = [0u8; 1];
        parked.peek(&mut probe).await
    }

    fn unpark(parked: tokio::net::TcpStream) -> std::io::Result<TcpStream> {
        let stream = parked.into_std()?;
        stream.set_nonblocking(false)?;
        Ok(stream)
    }
}

/// Bytes the read buffer grows by when it is full. Growth follows what actually arrives,
/// never what a length prefix claims, so a hostile prefix cannot make us allocate.
const READ_CHUNK: usize = 64 * 1024;

/// Size of a connection's buffers while its frames are small.
const SMALL_BUF: usize = 8 * 1024;

/// Replies are batched until the batch holds this much, then written: half a small
/// buffer, so the batch never outgrows it.
const BATCH: usize = SMALL_BUF / 2;

/// The largest payload copied into the batch; a larger one is written from where it is.
/// With [`BATCH`], the head of a reply and this much fit in what is left of a small buffer.
const INLINE: usize = SMALL_BUF / 2 - LEN_PREFIX - wire::RESPONSE_OVERHEAD as usize;

/// How long a busy connection keeps its thread after its last request: its blocking
/// `recv` waits this long (`SO_RCVTIMEO`) before the connection is parked.
///
/// Back-to-back calls, and calls paced faster than 200 per second per connection, never
/// see it: their next request arrives within the spell and costs the same two system
/// calls as before. A connection quieter than that pays one reactor wake-up and one thread
/// hand-off on its next request (tens of microseconds on a small virtual machine), which
/// a client waiting 5 ms between calls does not notice. Shorter would park connections
/// between the calls of a slow paced run; longer holds a thread per connection that is
/// done, which is what made 2,000 idle connections cost 2,003 threads.
pub(super) const BUSY_SPELL: Duration = Duration::from_millis(5);

/// What a raw frame connection needs wherever it is served: the server's shared state,
/// the threads for busy connections and the reactor for parked ones.
pub(super) struct Listener<S> {
    shared: Arc<Shared>,
    pool: Arc<ThreadPool>,
    /// The runtime the listener runs on: a thread parks its connection there.
    reactor: tokio::runtime::Handle,
    _stream: std::marker::PhantomData<fn(S)>,
}

/// The state of one open connection besides its socket, moved with it between a pool
/// thread (busy) and a reactor task (parked).
///
/// The socket travels beside it rather than in it because it changes type on the way: a
/// blocking `std` stream on a thread, a tokio stream on the reactor.
struct Conn {
    /// Bytes received and not yet answered; empty, without an allocation, while parked
    /// with nothing pending.
    inbuf: InBuf,
    /// The frame being read and dropped because the budget could not hold it.
    dropping: Option<Dropping>,
    /// When the last byte arrived (or the connection was accepted): the idle timeout
    /// counts from here.
    last_input: Instant,
    /// Keeps the connection's slot and its place in the "open" count until it closes.
    _guard: ConnGuard,
}

/// What a busy spell on a thread ended with.
enum Next {
    /// Silent for [`BUSY_SPELL`]: wait for the next request on the reactor.
    Park,
    /// Closed by the client or by shutdown, or closed with a reason worth counting.
    Close(Option<Reject>),
}

/// Accepts connections until shutdown starts.
///
/// Shutdown needs no list of the open connections: a busy one looks at the flag between
/// requests and at least every [`BUSY_SPELL`] (its read times out), and a parked one
/// waits for the flag beside its socket. One busy with a request writes its reply first.
pub(super) async fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    let tcp = Listener::<TcpStream>::new(shared.clone());
    while let Some((stream, guard)) = shared.next_connection(&listener, |s: &Stats| &s.tcp).await {
        // Replies are small and latency is the product: never wait for Nagle.
        let Ok(stream) = stream.into_std().and_then(|s| {
            s.set_nonblocking(false)?;
            s.set_nodelay(true)?;
            Ok(s)
        }) else {
            shared.stats.reject(Reject::IoError);
            continue;
        };
        tcp.serve(stream, guard);
    }
}

impl<S: FrameStream> Listener<S>
where
    for<'a> &'a S: Read + Write,
{
    /// A listener's serving side, on the current runtime.
    pub(super) fn new(shared: Arc<Shared>) -> Arc<Self> {
        Arc::new(Listener {
            shared,
            pool: ThreadPool::new(S::THREAD_NAME),
            reactor: tokio::runtime::Handle::current(),
            _stream: std::marker::PhantomData,
        })
    }

    /// Serves a newly accepted (blocking) connection that holds `guard`.
    pub(super) fn serve(self: &Arc<Self>, stream: S, guard: ConnGuard) {
        let config = &self.shared.config;
        if stream
            .set_timeouts(BUSY_SPELL.min(config.idle_timeout), config.write_timeout)
            .is_err()
        {
            return self.shared.stats.reject(Reject::IoError);
        }
        // Straight to a thread rather than parked first: a new connection's first request
        // is usually on its way (a `tcp-connect` call sends it right after connecting).
        let conn = Conn {
            inbuf: InBuf::new(),
            dropping: None,
            last_input: Instant::now(),
            _guard: guard,
        };
        self.busy(stream, conn);
    }

    /// Serves the connection on a pool thread until it closes or parks.
    fn busy(self: &Arc<Self>, stream: S, mut conn: Conn) {
        let tcp = self.clone();
        let started = self
            .pool
            .run(move || match serve(&stream, &mut conn, &tcp.shared) {
                Next::Park => {
                    conn.inbuf.release();
                    let parked = tcp.clone().park(stream, conn);
                    tcp.reactor.spawn(parked);
                }
                Next::Close(None) => {}
                Next::Close(Some(kind)) => tcp.shared.stats.reject(kind),
            });
        // The job, and the connection in it, is dropped: that closes it.
        if let Err(e) = started {
            tracing::warn!("cannot start a connection thread: {e}");
            self.shared.stats.reject(Reject::IoError);
        }
    }

    /// Waits without a thread until the connection has a byte to read, then hands it to
    /// a thread; closes it when the client closed it, when it stays silent until its idle
    /// timeout, or when shutdown starts.
    ///
    /// The socket is registered with the reactor only while parked: a registration for the
    /// connection's whole life would have every request of a busy connection wake the
    /// reactor too (each arrival is an `epoll` edge), a second thread on the core of a
    /// pinned round trip. Parking costs five system calls (non-blocking on, `epoll_ctl`
    /// add, the peek, delete, non-blocking off), paid only after [`BUSY_SPELL`] of silence.
    /// Rejected: keeping the socket blocking under `AsyncFd` (two calls fewer), whose safe
    /// constructors tokio deprecated as unsound, and `#![forbid(unsafe_code)]` rules out
    /// the unsafe one.
    async fn park(self: Arc<Self>, stream: S, conn: Conn) {
        let stats = &self.shared.stats;
        let deadline = conn.last_input + self.shared.config.idle_timeout;
        let stream = match stream.park() {
            Ok(stream) => stream,
            Err(e) => {
                tracing::warn!("cannot park a connection: {e}");
                return stats.reject(Reject::IoError);
            }
        };
        tokio::select! {
            peeked = tokio::time::timeout_at(deadline.into(), S::readable(&stream)) => {
                match peeked {
                    Ok(Ok(0)) if conn.inbuf.is_empty() && conn.dropping.is_none() => return,
                    Ok(Ok(0)) => return stats.reject(Reject::TruncatedFrame),
                    Ok(Ok(_)) => {}
                    Ok(Err(_)) => return stats.reject(Reject::IoError),
                    Err(_silent) => return stats.reject(Reject::IdleTimeout),
                }
            }
            // Nothing in flight: shutdown closes a parked connection at once.
            _ = super::stopping(self.shared.shutdown.clone()) => return,
        }
        match S::unpark(stream) {
            Ok(stream) => self.busy(stream, conn),
            Err(_) => stats.reject(Reject::IoError),
        }
    }
}

/// Serves one connection on the calling thread until it is silent for [`BUSY_SPELL`],
/// the client closes it, it misbehaves, or shutdown starts.
fn serve<S: FrameStream>(stream: &S, conn: &mut Conn, shared: &Shared) -> Next
where
    for<'a> &'a S: Read + Write,
{
    match serve_busy(stream, conn, shared) {
        Ok(next) => next,
        Err(kind) => Next::Close(Some(kind)),
    }
}

/// [`serve`], with a reason worth counting as the error.
fn serve_busy<S: FrameStream>(
    mut stream: &S,
    conn: &mut Conn,
    shared: &Shared,
) -> Result<Next, Reject>
where
    for<'a> &'a S: Read + Write,
{
    let counters = S::COUNTERS(&shared.stats);
    // Allocated per busy spell, not per connection: a parked connection holds none.
    let mut out = Out {
        batch: Vec::with_capacity(SMALL_BUF),
        counters,
    };
    let mut read_more = false;
    loop {
        // Answer every complete frame we already have.
        let answered = answer_buffered(stream, conn, shared, &mut out)?;
        if read_more && !answered {
            // Part of a frame: it still counts as the client talking.
            conn.last_input = Instant::now();
        }
        out.write(stream)?;
        if *shared.shutdown.borrow() {
            // Between requests: nothing in flight, so shutdown can close us now.
            return Ok(Next::Close(None));
        }
        read_more = true;
        let inbuf = &mut conn.inbuf;
        match stream.read(inbuf.spare()) {
            Ok(0) if (inbuf.is_empty() && conn.dropping.is_none()) || *shared.shutdown.borrow() => {
                return Ok(Next::Close(None));
            }
            Ok(0) => return Err(Reject::TruncatedFrame),
            Ok(n) => {
                inbuf.filled(n);
                counters.bytes_in.fetch_add(n as u64, Relaxed);
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            // Silent for the spell: give the thread back (or close, when shutdown began
            // meanwhile). The idle timeout is the reactor's to keep from here.
            Err(e) if is_timeout(&e) && *shared.shutdown.borrow() => return Ok(Next::Close(None)),
            Err(e) if is_timeout(&e) => return Ok(Next::Park),
            Err(_) => return Err(Reject::IoError),
        }
    }
}

/// Answers every complete frame in the connection's buffer, and takes what arrived of a
/// frame being dropped; true when a frame was answered. When the buffer ends with part of
/// a frame larger than a small buffer, leases the budget for all of it, or starts
/// dropping it when the budget has not got it.
fn answer_buffered<S: FrameStream>(
    stream: &S,
    conn: &mut Conn,
    shared: &Shared,
    out: &mut Out,
) -> Result<bool, Reject>
where
    for<'a> &'a S: Read + Write,
{
    let config = &shared.config;
    let mut answered = false;
    loop {
        if let Some(dropping) = &mut conn.dropping {
            let Some(seq) = dropping.take(&mut conn.inbuf)? else {
                return Ok(answered);
            };
            conn.dropping = None;
            shared.stats.reject(Reject::OverBudgetFrame);
            S::COUNTERS(&shared.stats).requests.fetch_add(1, Relaxed);
            (conn.last_input, answered) = (Instant::now(), true);
            wire::encode_response_head(seq, Status::OverBudget as u8, 0, 0, &mut out.batch);
            out.write_if_full(stream)?;
            continue;
        }
        let inbuf = &mut conn.inbuf;
        let data = inbuf.data();
        let body_len = match data.first_chunk::<LEN_PREFIX>() {
            None => return Ok(answered),
            Some(prefix) => match wire::check_len(*prefix, config.max_frame) {
                Ok(len) => len,
                Err(e) => {
                    out.write(stream)?;
                    return Err(match e {
                        // A ClientHello's record header read as a length prefix.
                        _ if crate::transport::tls::looks_like_tls(data) => Reject::TcpTlsClient,
                        DecodeFrameError::EmptyFrame => Reject::ZeroLengthFrame,
                        _ => Reject::OversizedFrame,
                    });
                }
            },
        };
        let frame_len = LEN_PREFIX + body_len;
        if data.len() < frame_len {
            if frame_len > SMALL_BUF && !inbuf.hold(frame_len, shared) {
                // Not even the prefix is kept: what follows is dropped as it comes.
                inbuf.consume(LEN_PREFIX);
                conn.dropping = Some(Dropping::new(body_len));
                continue;
            }
            return Ok(answered);
        }
        let req = match wire::decode_body::<RequestRef>(&data[LEN_PREFIX..frame_len]) {
            Ok(req) => req,
            Err(_) => {
                out.write(stream)?;
                return Err(Reject::MalformedFrame);
            }
        };
        S::COUNTERS(&shared.stats).requests.fetch_add(1, Relaxed);
        let got_it = Instant::now();
        // The clock read the reply needs anyway doubles as the idle timer's.
        (conn.last_input, answered) = (got_it, true);
        let delay = Duration::from_micros(req.delay_us.into());
        if !delay.is_zero() && delay <= config.max_delay {
            // Earlier pipelined replies should not wait for this one's delay.
            out.write(stream)?;
            super::sleep_until_blocking(got_it + delay);
        }
        let largest = config.max_frame.saturating_sub(wire::RESPONSE_OVERHEAD) as usize;
        let reply_len = req.reply_len.map_or(req.payload.len(), |n| n as usize);
        let status = status_of(reply_len, req.delay_us, largest, None, shared);
        let payload = match (status, req.reply_len) {
            (Status::Ok, None) => Payload::Echo(req.payload),
            (Status::Ok, Some(n)) => Payload::Pattern(req.seq, n as usize),
            _ => Payload::Echo(&[]),
        };
        let server_ns = got_it.elapsed().as_nanos() as u64;
        out.reply(stream, req.seq, status as u8, server_ns, payload)?;
        inbuf.consume(frame_len);
    }
}

/// What a reply carries after its head.
enum Payload<'a> {
    /// The request's own bytes.
    Echo(&'a [u8]),
    /// `len` bytes of the pattern for `seq`, from the static table.
    Pattern(u64, usize),
}

/// The replies of a busy spell: batched while small, and counted as they are written.
struct Out<'c> {
    batch: Vec<u8>,
    counters: &'c ProtoCounters,
}

impl Out<'_> {
    /// Adds one reply: its head to the batch, and its payload too when small; a larger
    /// payload is written after the batch straight from where it is.
    fn reply(
        &mut self,
        stream: impl Write + Copy,
        seq: u64,
        status: u8,
        server_ns: u64,
        payload: Payload<'_>,
    ) -> Result<(), Reject> {
        let len = match payload {
            Payload::Echo(bytes) => bytes.len(),
            Payload::Pattern(_, len) => len,
        };
        wire::encode_response_head(seq, status, server_ns, len, &mut self.batch);
        if len <= INLINE {
            match payload {
                Payload::Echo(bytes) => self.batch.extend_from_slice(bytes),
                Payload::Pattern(seq, len) => {
                    for run in wire::pattern_runs(seq, len) {
                        self.batch.extend_from_slice(run);
                    }
                }
            }
            return self.write_if_full(stream);
        }
        self.write(stream)?;
        match payload {
            Payload::Echo(bytes) => self.write_counted(stream, bytes),
            Payload::Pattern(seq, len) => {
                wire::pattern_runs(seq, len).try_for_each(|run| self.write_counted(stream, run))
            }
        }
    }

    /// Writes the batch once it holds [`BATCH`] bytes.
    fn write_if_full(&mut self, stream: impl Write) -> Result<(), Reject> {
        if self.batch.len() >= BATCH {
            self.write(stream)?;
        }
        Ok(())
    }

    /// Writes and clears whatever replies are batched.
    fn write(&mut self, stream: impl Write) -> Result<(), Reject> {
        let batch = std::mem::take(&mut self.batch);
        let res = self.write_counted(stream, &batch);
        self.batch = batch;
        self.batch.clear();
        res
    }

    /// Writes `bytes` and counts them; a client that takes none of them for the write
    /// timeout (`SO_SNDTIMEO`) closes the connection.
    fn write_counted(&self, mut stream: impl Write, bytes: &[u8]) -> Result<(), Reject> {
        if bytes.is_empty() {
            return Ok(());
        }
        match stream.write_all(bytes) {
            Ok(()) => {}
            Err(e) if is_timeout(&e) => return Err(Reject::WriteTimeout),
            Err(_) => return Err(Reject::IoError),
        }
        self.counters
            .bytes_out
            .fetch_add(bytes.len() as u64, Relaxed);
        Ok(())
    }
}

/// A request frame read and dropped because the buffer budget could not hold it: its
/// first bytes are kept until they give its seq, for the status-4 reply.
struct Dropping {
    /// Body bytes still to come.
    left: usize,
    /// The body's first bytes, until the seq is read from them.
    start: Vec<u8>,
    seq: Option<u64>,
}

impl Dropping {
    /// The longest a seq can be: a varint of a u64.
    const SEQ_MAX: usize = 10;

    fn new(body_len: usize) -> Dropping {
        Dropping {
            left: body_len,
            start: Vec::with_capacity(Self::SEQ_MAX),
            seq: None,
        }
    }

    /// Takes what `inbuf` holds of the frame; its seq once all of it has gone by, or
    /// `MalformedFrame` when its start holds no seq.
    fn take(&mut self, inbuf: &mut InBuf) -> Result<Option<u64>, Reject> {
        let n = self.left.min(inbuf.data().len());
        if self.seq.is_none() {
            let more = n.min(Self::SEQ_MAX - self.start.len());
            self.start.extend_from_slice(&inbuf.data()[..more]);
            self.seq = wire::request_seq(&self.start);
        }
        inbuf.consume(n);
        self.left -= n;
        if self.left > 0 {
            return Ok(None);
        }
        self.seq.map(Some).ok_or(Reject::MalformedFrame)
    }
}

/// `SO_RCVTIMEO` / `SO_SNDTIMEO` expiring shows up as `EAGAIN`.
fn is_timeout(e: &std::io::Error) -> bool {
    matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut)
}

/// Bytes received and not yet answered: `buf[start..end]`.
struct InBuf {
    buf: Vec<u8>,
    start: usize,
    end: usize,
    /// The budget held for a frame larger than a small buffer, until the buffer is
    /// small again.
    lease: Option<Lease>,
}

impl InBuf {
    /// An empty buffer that has allocated nothing yet.
    fn new() -> Self {
        InBuf {
            buf: Vec::new(),
            start: 0,
            end: 0,
            lease: None,
        }
    }

    /// Makes room for a frame of `frame_len` bytes that starts at the front of the
    /// pending data, leased from the budget first; false when the budget has not got it.
    /// The room is reserved, not filled: memory is touched only as the frame arrives.
    fn hold(&mut self, frame_len: usize, shared: &Shared) -> bool {
        // Room to read into past the frame, as `spare` wants.
        let capacity = frame_len + SMALL_BUF;
        if self.buf.capacity() >= self.start + capacity && self.lease.is_some() {
            return true;
        }
        let mut lease = Lease::new(&shared.stats.budget, None, frame_len as u64);
        if !lease.grow_to(capacity as u64) {
            return false;
        }
        self.compact();
        self.buf
            .reserve_exact(capacity.saturating_sub(self.buf.len()));
        self.lease = Some(lease);
        true
    }

    /// Moves the pending bytes to the front.
    fn compact(&mut self) {
        if self.start > 0 {
            self.buf.copy_within(self.start..self.end, 0);
            (self.start, self.end) = (0, self.end - self.start);
        }
    }

    /// Gives back the memory of a parked connection: all of it when nothing is pending,
    /// else all but the pending bytes (part of a frame), moved to the front.
    fn release(&mut self) {
        self.compact();
        self.buf.truncate(self.end);
        self.buf.shrink_to_fit();
        if self.is_empty() {
            self.lease = None;
        }
    }

    fn data(&self) -> &[u8] {
        &self.buf[self.start..self.end]
    }

    fn is_empty(&self) -> bool {
        self.start == self.end
    }

    fn consume(&mut self, n: usize) {
        self.start += n;
    }

    fn filled(&mut self, n: usize) {
        self.end += n;
    }

    /// Room to read into, at least half a small buffer: moves what is left to the front
    /// when something before it was consumed, and grows by one chunk when that is not
    /// enough (within the room [`InBuf::hold`] reserved for a large frame). A large frame
    /// arriving in pieces is never copied to where it already is. A buffer given back by
    /// [`InBuf::release`] starts again at a small buffer.
    fn spare(&mut self) -> &mut [u8] {
        if self.buf.len() < SMALL_BUF {
            self.buf.resize(SMALL_BUF, 0);
        }
        if self.is_empty() {
            (self.start, self.end) = (0, 0);
            // Do not keep a large request's buffer, or its lease, for the rest of a long
            // connection.
            if self.buf.capacity() > SMALL_BUF {
                self.buf.truncate(SMALL_BUF);
                self.buf.shrink_to_fit();
            }
            self.lease = None;
        }
        let low = |b: &Self| b.buf.len() - b.end < SMALL_BUF / 2;
        if low(self) && self.start > 0 {
            self.compact();
        }
        if low(self) {
            let reserved = self.buf.capacity() - self.buf.len();
            let grow = if reserved >= SMALL_BUF / 2 {
                READ_CHUNK.min(reserved)
            } else {
                READ_CHUNK
            };
            self.buf.resize(self.buf.len() + grow, 0);
        }
        &mut self.buf[self.end..]
    }
}

/// The status of a request whose reply would carry `reply_len` bytes, counted when it is
/// a refusal: its delay must be within the max delay, its reply at most `largest` bytes
/// (what fits in a frame or a datagram) and, for UDP, at most `above_request`, the request
/// datagram's size (status 3, so the server is no amplifier).
fn status_of(
    reply_len: usize,
    delay_us: u32,
    largest: usize,
    above_request: Option<usize>,
    shared: &Shared,
) -> Status {
    let (status, kind) = if u64::from(delay_us) > shared.config.max_delay.as_micros() as u64 {
        (Status::DelayTooLong, Reject::DelayTooLong)
    } else if reply_len > largest {
        (Status::ReplyTooLarge, Reject::ReplyTooLarge)
    } else if above_request.is_some_and(|request| reply_len > request) {
        (Status::ReplyAboveRequest, Reject::UdpReplyAboveRequest)
    } else {
        return Status::Ok;
    };
    shared.stats.reject(kind);
    status
}

/// Builds the reply to one datagram's request, whole (a datagram is at most 64 KiB): the
/// echo, the pattern, or a status without payload; `largest` and `above_request` as in
/// [`status_of`].
pub(super) fn answer_within(
    req: Request,
    got_it: Instant,
    shared: &Shared,
    largest: usize,
    above_request: Option<usize>,
) -> Response {
    let reply_len = req.reply_len.map_or(req.payload.len(), |n| n as usize);
    let status = status_of(reply_len, req.delay_us, largest, above_request, shared);
    let payload = match (status, req.reply_len) {
        (Status::Ok, None) => req.payload,
        (Status::Ok, Some(n)) => {
            let mut p = Vec::with_capacity(n as usize);
            wire::pattern(req.seq, n as usize, &mut p);
            p
        }
        _ => Vec::new(),
    };
    Response {
        seq: req.seq,
        status: status as u8,
        server_ns: got_it.elapsed().as_nanos() as u64,
        payload,
    }
}
