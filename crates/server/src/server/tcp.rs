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
//! go, so pipelined requests cost one write per batch instead of one per reply. A reply is
//! never made whole: its head goes to the batch, and a payload of more than a few
//! kilobytes is written from where it already is, the static pattern table or the
//! request's own bytes (issue #23).
//!
//! A client that stops reading does not keep a thread either. A write that the client
//! takes nothing of for [`BUSY_SPELL`] leaves what is still owed in the connection's state
//! (the rest of the batch, and how far into a large payload it got) and parks the
//! connection on the reactor until the socket is writable again; the write timeout counts
//! from when the client last took a byte, and closes it. A stalled reader so costs a task,
//! the request it asked with and at most a batch, not a thread whose stack and allocator
//! heap stay behind after it leaves (issue #35: 1,000 stalled readers used to leave the
//! server 63% larger once they had gone). A request frame
//! larger than the small buffer is leased from the server's buffer budget
//! ([`super::budget`]) when its length prefix arrives; over the budget it is read and
//! dropped, and answered with status 4.
//!
//! The Unix socket listener (`--unix`) speaks the same frames and is served by the same
//! code: everything here is generic over a [`FrameStream`], implemented for TCP here and
//! for Unix sockets in `unix.rs`; only accepting and parking differ.

use super::budget::Held;
use super::budget::Lease;
use super::pool::ThreadPool;
use super::stats::{ProtoCounters, Reject, Stats};
use super::{ConnGuard, Shared};
use crate::encoding::{EncodingKind, Operation};
use crate::wire::{
    self, DecodeFrameError, LEN_PREFIX, Request, RequestRef, Response, RpcReplyTrailer, RpcTrailer,
    Status,
};
use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::time::{Duration, Instant};

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

    /// Sets the blocking socket up for a busy spell: a read or a write that waits this
    /// long for the client gives the thread back.
    fn set_timeouts(&self, read: Duration, write: Duration) -> std::io::Result<()>;
    /// Registers the socket with the reactor.
    fn park(self) -> std::io::Result<Self::Parked>;
    /// Waits until the parked socket can be read: `Ok(0)` when what is there is the end
    /// of the stream, `Ok(n > 0)` when there is at least a byte (or the end of the stream
    /// and the socket type cannot tell them apart without a read; the busy thread then
    /// reads 0 and closes the connection).
    fn readable(parked: &Self::Parked) -> impl Future<Output = std::io::Result<usize>> + Send;
    /// Waits until the parked socket can take more bytes (or has failed, which the next
    /// write finds).
    fn writable(parked: &Self::Parked) -> impl Future<Output = std::io::Result<()>> + Send;
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

    async fn writable(parked: &tokio::net::TcpStream) -> std::io::Result<()> {
        parked.writable().await
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
/// `recv` waits this long (`SO_RCVTIMEO`) before the connection is parked. A blocking
/// `send` that the client takes nothing of waits as long (`SO_SNDTIMEO`) before the
/// connection is parked until it can write again: a reader that keeps up never sees it.
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
    /// Where a thread gives a connection back to be parked: a task on the runtime spawns
    /// the parked connection's task, so that a runtime worker allocates it. A pool thread
    /// that allocated it could exit first (it does after 10 s idle), and the allocator
    /// keeps the pages of an exited thread that still hold live blocks: 300 stalled readers
    /// parked by the threads that served them left 1.9 MiB behind that way.
    parking: tokio::sync::mpsc::UnboundedSender<(S, Conn, Next)>,
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
    /// Replies not written yet: nothing is read or answered before they are.
    owed: Owed,
    /// Keeps the connection's slot and its place in the "open" count until it closes.
    _guard: ConnGuard,
}

/// How long a thread serves a connection before it lets go of it.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Spell {
    /// Until it falls silent for [`BUSY_SPELL`] (a pool thread).
    Busy,
    /// Until its first reply is written and more arrives (the thread that accepted it,
    /// which must go back to accepting): then [`Next::More`].
    FirstReply,
}

/// What a busy spell on a thread ended with.
enum Next {
    /// More requests after the first reply, on a [`Spell::FirstReply`]: a pool thread
    /// takes the connection, with what arrived in its buffer.
    More,
    /// Silent for [`BUSY_SPELL`]: wait for the next request on the reactor.
    Park,
    /// The client took nothing for [`BUSY_SPELL`]: wait on the reactor until it can.
    WaitWritable,
    /// Closed by the client or by shutdown, or closed with a reason worth counting.
    Close(Option<Reject>),
}

/// How often a thread waiting in `accept` looks at the shutdown flag while no one
/// connects: `accept` honours the listener's `SO_RCVTIMEO`. Shutdown of an idle listener
/// takes up to this.
const SHUTDOWN_POLL: Duration = Duration::from_millis(50);

/// Accepts connections on `listener` until shutdown starts, on threads that serve the
/// connection they accepted themselves until its first reply is written: a connection
/// per call (`tcp-connect`, netperf's TCP_CRR) is accepted, answered and closed on one
/// thread, with no wake-up of another, as a single-threaded blocking server does it. A
/// connection that sends a second request goes on on a pool thread (one hand-off in its
/// life, where each new connection used to cost one: accepted on the runtime, handed to a
/// thread), one silent after its first reply is parked, and the thread goes back to
/// `accept`.
///
/// While one thread serves, another must be waiting in `accept`: a thread that takes a
/// connection when none other waits first calls one from the pool to take its place
/// (leader and followers). Up to `threads + 1` (at least 2) wait at once; a thread that
/// finds that many waiting when its connection is done goes back to the pool, and so
/// does one that waited a whole [`SHUTDOWN_POLL`] while two others wait too. On a quiet
/// server the two that wait take turns, and a connection per call costs no wake-up but
/// the accept's own.
///
/// Shutdown needs no list of the open connections: a busy one looks at the flag between
/// requests and at least every [`BUSY_SPELL`] (its read times out), and a parked one
/// waits for the flag beside its socket. One busy with a request writes its reply first.
pub(super) fn start_accepting(
    listener: std::net::TcpListener,
    shared: Arc<Shared>,
    threads: usize,
) -> std::io::Result<()> {
    use nix::sys::socket::{setsockopt, sockopt};
    listener.set_nonblocking(false)?;
    setsockopt(
        &listener,
        sockopt::ReceiveTimeout,
        &nix::sys::time::TimeVal::new(0, SHUTDOWN_POLL.as_micros() as _),
    )?;
    // Replies are small and latency is the product: never wait for Nagle. An accepted
    // socket inherits the option from its listener (Linux), one setsockopt less each.
    setsockopt(&listener, sockopt::TcpNoDelay, &true)?;
    let acceptors = Arc::new(Acceptors {
        listener,
        tcp: Listener::<TcpStream>::new(shared.clone()),
        shared,
        waiting: AtomicUsize::new(0),
        most: threads.max(1) + 1,
    });
    acceptors.call_one()
}

/// The raw TCP listener's accepting threads ([`start_accepting`]).
struct Acceptors {
    listener: std::net::TcpListener,
    tcp: Arc<Listener<TcpStream>>,
    shared: Arc<Shared>,
    /// Threads in `accept` now.
    waiting: AtomicUsize,
    /// Most threads that wait in `accept` at once.
    most: usize,
}

impl Acceptors {
    /// Calls a pool thread to accept.
    fn call_one(self: &Arc<Self>) -> std::io::Result<()> {
        let acceptors = self.clone();
        self.tcp.pool.run(move || acceptors.accept_and_serve())
    }

    /// Accepts, admits and serves the first exchange, again, until shutdown, or until the
    /// connection done finds enough threads waiting in `accept` without this one.
    fn accept_and_serve(self: Arc<Self>) {
        let shared = &self.shared;
        // Held until the loop ends, so shutdown waits for it.
        let _alive = shared.alive.clone();
        while !*shared.shutdown.borrow() {
            // Counted only below the most, never over it for a moment: a count that a
            // thread about to leave inflated could let two quiet ones leave together and
            // the listener be left with no thread in `accept`.
            let most = self.most;
            if self
                .waiting
                .fetch_update(Relaxed, Relaxed, |n| (n < most).then_some(n + 1))
                .is_err()
            {
                return;
            }
            let accepted = self.listener.accept();
            let others = self.waiting.fetch_sub(1, Relaxed) - 1;
            let stream = match accepted {
                Ok((stream, _)) => stream,
                // Quiet for a poll: more than two waiting is more than a quiet server needs.
                Err(e) if is_timeout(&e) && others >= 2 => return,
                Err(e) if is_timeout(&e) || e.kind() == ErrorKind::Interrupted => continue,
                Err(e) => {
                    tracing::warn!("accept failed: {e}");
                    std::thread::sleep(Duration::from_millis(10));
                    continue;
                }
            };
            if others == 0
                && let Err(e) = self.call_one()
            {
                tracing::warn!("cannot start an accepting thread: {e}");
            }
            // Dropping a refused stream closes it.
            let Some(guard) = shared.admit(|s: &Stats| &s.tcp) else {
                continue;
            };
            self.tcp.serve_here(stream, guard);
        }
    }
}

impl<S: FrameStream> Listener<S>
where
    for<'a> &'a S: Read + Write,
{
    /// A listener's serving side, on the current runtime.
    pub(super) fn new(shared: Arc<Shared>) -> Arc<Self> {
        let (parking, mut given_back) = tokio::sync::mpsc::unbounded_channel();
        let listener = Arc::new(Listener {
            shared,
            pool: ThreadPool::new(S::THREAD_NAME),
            parking,
        });
        // Ends when the listener, and the sender in it, is gone.
        let weak = Arc::downgrade(&listener);
        tokio::spawn(async move {
            while let Some((stream, conn, next)) = given_back.recv().await {
                let Some(listener) = weak.upgrade() else {
                    return;
                };
                match next {
                    Next::Park => tokio::spawn(listener.park(stream, conn)),
                    _ => tokio::spawn(listener.wait_writable(stream, conn)),
                };
            }
        });
        listener
    }

    /// Serves a newly accepted (blocking) connection that holds `guard` on a pool thread.
    pub(super) fn serve(self: &Arc<Self>, stream: S, guard: ConnGuard) {
        if let Some(conn) = self.accepted(&stream, guard) {
            self.busy(stream, conn);
        }
    }

    /// Serves a newly accepted connection on the calling thread (the one that accepted
    /// it) until its first reply is written; then it closes, parks, or goes on on a pool
    /// thread ([`start_accepting`]).
    fn serve_here(self: &Arc<Self>, stream: S, guard: ConnGuard) {
        let Some(mut conn) = self.accepted(&stream, guard) else {
            return;
        };
        match serve(&stream, &mut conn, &self.shared, Spell::FirstReply) {
            Next::More => self.busy(stream, conn),
            next @ (Next::Park | Next::WaitWritable) => {
                let _ = self.parking.send((stream, conn, next));
            }
            Next::Close(None) => {}
            Next::Close(Some(kind)) => self.shared.stats.reject(kind),
        }
    }

    /// A new connection's state, its socket set up for a busy spell; `None` (counted)
    /// when it cannot be.
    fn accepted(&self, stream: &S, guard: ConnGuard) -> Option<Conn> {
        let config = &self.shared.config;
        if stream
            .set_timeouts(BUSY_SPELL.min(config.idle_timeout), BUSY_SPELL)
            .is_err()
        {
            self.shared.stats.reject(Reject::IoError);
            return None;
        }
        // Served at once rather than parked first: a new connection's first request is
        // usually on its way (a `tcp-connect` call sends it right after connecting).
        Some(Conn {
            inbuf: InBuf::new(),
            dropping: None,
            last_input: Instant::now(),
            owed: Owed::default(),
            _guard: guard,
        })
    }

    /// Serves the connection on a pool thread until it closes or parks.
    fn busy(self: &Arc<Self>, stream: S, mut conn: Conn) {
        let tcp = self.clone();
        let started =
            self.pool.run(
                move || match serve(&stream, &mut conn, &tcp.shared, Spell::Busy) {
                    // Dropped, and so closed, if the runtime is shutting down.
                    next @ (Next::Park | Next::WaitWritable) => {
                        let _ = tcp.parking.send((stream, conn, next));
                    }
                    // A busy spell ends only in the others.
                    Next::Close(None) | Next::More => {}
                    Next::Close(Some(kind)) => tcp.shared.stats.reject(kind),
                },
            );
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
    async fn park(self: Arc<Self>, stream: S, mut conn: Conn) {
        // Given back here, on the runtime, so that what stays is the runtime's to free.
        conn.inbuf.release();
        conn.owed.batch = Vec::new();
        let stats = &self.shared.stats;
        let deadline = conn.last_input + self.shared.config.idle_timeout;
        let Some(stream) = self.register(stream) else {
            return;
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
        self.resume(stream, conn);
    }

    /// Waits without a thread until a client that stopped taking its replies can take
    /// more, then hands the connection to a thread to write them; closes it when the
    /// client has taken nothing for the write timeout.
    ///
    /// Shutdown does not close it: a reply is in flight, and the write timeout bounds the
    /// wait, as it bounded a blocking write before.
    async fn wait_writable(self: Arc<Self>, stream: S, mut conn: Conn) {
        // Keep only what is owed: the request a large payload comes from, the rest of the
        // batch (moved here, on the runtime, as in `park`).
        conn.inbuf.release();
        conn.owed.batch.shrink_to_fit();
        let stalled_since = conn.owed.stalled_since.unwrap_or_else(Instant::now);
        let deadline = stalled_since + self.shared.config.write_timeout;
        let Some(stream) = self.register(stream) else {
            return;
        };
        match tokio::time::timeout_at(deadline.into(), S::writable(&stream)).await {
            Ok(Ok(())) => self.resume(stream, conn),
            Ok(Err(_)) => self.shared.stats.reject(Reject::IoError),
            Err(_stalled) => self.shared.stats.reject(Reject::WriteTimeout),
        }
    }

    /// The socket of a connection being parked, registered with the reactor; `None` (the
    /// failure counted) when it cannot be.
    fn register(&self, stream: S) -> Option<S::Parked> {
        match stream.park() {
            Ok(stream) => Some(stream),
            Err(e) => {
                tracing::warn!("cannot park a connection: {e}");
                self.shared.stats.reject(Reject::IoError);
                None
            }
        }
    }

    /// Hands a parked connection back to a thread.
    fn resume(self: &Arc<Self>, stream: S::Parked, conn: Conn) {
        match S::unpark(stream) {
            Ok(stream) => self.busy(stream, conn),
            Err(_) => self.shared.stats.reject(Reject::IoError),
        }
    }
}

/// Why serving a connection on its thread stopped before it could go on.
enum Halt {
    /// The client took nothing for [`BUSY_SPELL`]: what is owed waits in [`Conn::owed`].
    Stalled,
    /// Closed, for a reason worth counting.
    Close(Reject),
}

impl From<Reject> for Halt {
    fn from(kind: Reject) -> Halt {
        Halt::Close(kind)
    }
}

/// Serves one connection on the calling thread until it is silent for [`BUSY_SPELL`],
/// the client stops taking its replies, closes it or misbehaves, or shutdown starts.
fn serve<S: FrameStream>(stream: &S, conn: &mut Conn, shared: &Shared, spell: Spell) -> Next
where
    for<'a> &'a S: Read + Write,
{
    match serve_busy(stream, conn, shared, spell) {
        Ok(next) => next,
        Err(Halt::Stalled) => Next::WaitWritable,
        Err(Halt::Close(kind)) => Next::Close(Some(kind)),
    }
}

/// [`serve`], with why it cannot go on as the error.
fn serve_busy<S: FrameStream>(
    stream: &S,
    conn: &mut Conn,
    shared: &Shared,
    spell: Spell,
) -> Result<Next, Halt>
where
    for<'a> &'a S: Read + Write,
{
    let out = Writer {
        stream,
        counters: S::COUNTERS(&shared.stats),
        write_timeout: shared.config.write_timeout,
    };
    // Allocated per busy spell, not per connection: a parked connection holds none.
    if conn.owed.batch.capacity() == 0 {
        conn.owed.batch.reserve(SMALL_BUF);
    }
    // What a stalled client was owed goes first.
    out.flush(conn)?;
    let mut read_more = false;
    let mut replied = false;
    loop {
        // Answer every complete frame we already have.
        let answered = answer_buffered(&out, conn, shared)?;
        replied |= answered;
        if read_more && !answered {
            // Part of a frame: it still counts as the client talking.
            conn.last_input = Instant::now();
        }
        out.flush(conn)?;
        if *shared.shutdown.borrow() {
            // Between requests: nothing in flight, so shutdown can close us now.
            return Ok(Next::Close(None));
        }
        read_more = true;
        let inbuf = &mut conn.inbuf;
        let mut reader = stream;
        match reader.read(inbuf.spare()) {
            Ok(0) if (inbuf.is_empty() && conn.dropping.is_none()) || *shared.shutdown.borrow() => {
                return Ok(Next::Close(None));
            }
            Ok(0) => return Err(Reject::TruncatedFrame.into()),
            Ok(n) => {
                inbuf.filled(n);
                out.counters.bytes_in.fetch_add(n as u64, Relaxed);
                if replied && spell == Spell::FirstReply {
                    return Ok(Next::More);
                }
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            // Silent for the spell: give the thread back (or close, when shutdown began
            // meanwhile). The idle timeout is the reactor's to keep from here.
            Err(e) if is_timeout(&e) && *shared.shutdown.borrow() => return Ok(Next::Close(None)),
            Err(e) if is_timeout(&e) => return Ok(Next::Park),
            Err(_) => return Err(Reject::IoError.into()),
        }
    }
}

/// Answers every complete frame in the connection's buffer, and takes what arrived of a
/// frame being dropped; true when a frame was answered. When the buffer ends with part of
/// a frame larger than a small buffer, leases the budget for all of it, or starts
/// dropping it when the budget has not got it.
///
/// A frame is counted, and consumed, only once its answer is settled: a stall in the
/// middle leaves it to be answered when the client takes its replies again, not twice.
fn answer_buffered<S: FrameStream>(
    out: &Writer<'_, S>,
    conn: &mut Conn,
    shared: &Shared,
) -> Result<bool, Halt>
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
            out.counters.requests.fetch_add(1, Relaxed);
            (conn.last_input, answered) = (Instant::now(), true);
            let batch = &mut conn.owed.batch;
            wire::encode_response_head(seq, Status::OverBudget as u8, 0, 0, batch);
            out.flush_if_full(conn)?;
            continue;
        }
        let data = conn.inbuf.data();
        let Some(&prefix) = data.first_chunk::<LEN_PREFIX>() else {
            return Ok(answered);
        };
        let body_len = match wire::check_len(prefix, config.max_frame) {
            Ok(len) => len,
            Err(e) => {
                let kind = bad_prefix(e, data);
                out.flush(conn)?;
                return Err(kind.into());
            }
        };
        let frame_len = LEN_PREFIX + body_len;
        if data.len() < frame_len {
            if frame_len > SMALL_BUF && !conn.inbuf.hold(frame_len, shared) {
                // Not even the prefix is kept: what follows is dropped as it comes.
                conn.inbuf.consume(LEN_PREFIX);
                conn.dropping = Some(Dropping::new(body_len));
                continue;
            }
            return Ok(answered);
        }
        let Ok((req, trailer)) =
            wire::decode_body_and_rest::<RequestRef>(&data[LEN_PREFIX..frame_len])
                .and_then(|(req, rest)| Ok((req, RpcTrailer::of_request(rest)?)))
        else {
            out.flush(conn)?;
            return Err(Reject::MalformedFrame.into());
        };
        // Where the request's payload is in the buffer: an echo is written from there.
        let at = req.payload.as_ptr().addr() - data.as_ptr().addr();
        let echo = at..at + req.payload.len();
        let RequestRef {
            seq,
            reply_len,
            delay_us,
            ..
        } = req;
        let got_it = Instant::now();
        let delay = Duration::from_micros(delay_us.into());
        let delayed = !delay.is_zero() && delay <= config.max_delay;
        if delayed {
            // Earlier pipelined replies should not wait for this one's delay.
            out.flush(conn)?;
        }
        out.counters.requests.fetch_add(1, Relaxed);
        // The clock read the reply needs anyway doubles as the idle timer's.
        (conn.last_input, answered) = (got_it, true);
        if delayed {
            super::sleep_until_blocking(got_it + delay);
        }
        let largest = config.max_frame.saturating_sub(wire::RESPONSE_OVERHEAD) as usize;
        if let Some(trailer) = trailer
            && reply_len.is_none()
            && status_of(0, delay_us, largest, None, shared) == Status::Ok
        {
            let call = (seq, got_it, trailer);
            answer_rpc(out, conn, shared, call, echo, frame_len)?;
            continue;
        }
        let len = reply_len.map_or(echo.len(), |n| n as usize);
        let status = status_of(len, delay_us, largest, None, shared);
        let (payload, len) = match (status, reply_len) {
            (Status::Ok, None) => (Some(Source::Echo(echo)), len),
            (Status::Ok, Some(n)) => (Some(Source::Pattern(seq, n as usize)), len),
            _ => (None, 0),
        };
        let server_ns = got_it.elapsed().as_nanos() as u64;
        owe_reply(out, conn, (seq, status, server_ns, len), payload, frame_len)?;
    }
}

/// Answers an encoded call (a frame with an [`RpcTrailer`]) whose body is at `body` in the
/// connection's buffer: decoded, echoed and encoded by [`super::wstest`], the reply's
/// payload the encoded reply (or JSON-RPC's error object), followed by the reply's trailer
/// with the codec's times; a binary body that is no call gets status 5 and the reason.
fn answer_rpc<S: FrameStream>(
    out: &Writer<'_, S>,
    conn: &mut Conn,
    shared: &Shared,
    (seq, got_it, trailer): (u64, Instant, RpcTrailer),
    body: std::ops::Range<usize>,
    frame_len: usize,
) -> Result<(), Halt>
where
    for<'a> &'a S: Read + Write,
{
    use super::wstest::{self, Refusal};
    let request = &conn.inbuf.data()[body];
    let encoding = EncodingKind::from_code(trailer.encoding);
    let operation = Operation::from_code(trailer.operation);
    let answered = match (encoding, operation) {
        (Some(encoding), Some(op)) => wstest::answer(shared, None, encoding, Some(op), request),
        (None, _) => {
            shared.stats.reject(Reject::RpcBadCall);
            Err(Refusal::NotACall {
                error_reply: None,
                reason: format!("no encoding of code {}", trailer.encoding),
            })
        }
        (Some(encoding), None) => Err(wstest::no_such_operation(
            shared,
            encoding,
            &format!("no operation of code {}", trailer.operation),
        )),
    };
    let (status, payload, times) = match answered {
        Ok(a) => (Status::Ok, Reply::Held(a.reply), (a.decode, a.encode)),
        Err(Refusal::OverBudget) => {
            shared.stats.reject(Reject::OverBudgetFrame);
            (
                Status::OverBudget,
                Reply::Bytes(Vec::new()),
                Default::default(),
            )
        }
        Err(Refusal::NotACall {
            error_reply: Some(error),
            ..
        }) => (Status::Ok, Reply::Bytes(error.body), Default::default()),
        Err(Refusal::NotACall { reason, .. } | Refusal::Unencodable(reason)) => (
            Status::RpcRefused,
            Reply::Bytes(reason.into_bytes()),
            Default::default(),
        ),
    };
    let mut tail = Vec::new();
    RpcReplyTrailer {
        encoding: trailer.encoding,
        operation: trailer.operation,
        dec_ns: times.0.as_nanos() as u64,
        enc_ns: times.1.as_nanos() as u64,
    }
    .encode(&mut tail);
    let server_ns = got_it.elapsed().as_nanos() as u64;
    let len = payload.as_ref().len();
    let payload = Some(Source::Reply(payload, tail));
    owe_reply(out, conn, (seq, status, server_ns, len), payload, frame_len)
}

/// An encoded call's reply payload: leased while it waits to be sent, or a refusal's few
/// bytes.
enum Reply {
    Held(Held),
    Bytes(Vec<u8>),
}

impl AsRef<[u8]> for Reply {
    fn as_ref(&self) -> &[u8] {
        match self {
            Reply::Held(held) => held.as_ref(),
            Reply::Bytes(bytes) => bytes,
        }
    }
}

/// Why a length prefix was refused: a TLS client's ClientHello (its record header read
/// as a prefix), an empty frame, or one larger than the largest allowed.
fn bad_prefix(e: DecodeFrameError, data: &[u8]) -> Reject {
    match e {
        _ if crate::wire::looks_like_tls(data) => Reject::TcpTlsClient,
        DecodeFrameError::EmptyFrame => Reject::ZeroLengthFrame,
        _ => Reject::OversizedFrame,
    }
}

/// Owes the reply to a frame of `frame_len` bytes: its head in the batch, then its
/// payload (and an encoded call's trailer, which follows it). A small one is copied into the batch and the frame consumed; a large one is
/// written from where it is, after the batch, and the frame consumed when all of it has
/// gone.
#[inline]
fn owe_reply<S: FrameStream>(
    out: &Writer<'_, S>,
    conn: &mut Conn,
    (seq, status, server_ns, len): (u64, Status, u64, usize),
    payload: Option<Source>,
    frame_len: usize,
) -> Result<(), Halt>
where
    for<'a> &'a S: Read + Write,
{
    let owed = &mut conn.owed;
    let tail = match &payload {
        Some(Source::Reply(_, tail)) => tail.len(),
        _ => 0,
    };
    wire::encode_response_head_with(seq, status as u8, server_ns, len, tail, &mut owed.batch);
    match payload {
        Some(payload) if len > INLINE => {
            // Written after the batch from where it is; the frame is consumed when
            // all of it has gone.
            owed.large = Some(Large {
                payload,
                sent: 0,
                frame_len,
            });
            out.flush(conn)?;
        }
        payload => {
            match payload {
                Some(Source::Echo(echo)) => {
                    owed.batch.extend_from_slice(&conn.inbuf.data()[echo]);
                }
                Some(Source::Pattern(seq, len)) => {
                    wire::pattern_runs(seq, len).for_each(|run| owed.batch.extend(run));
                }
                Some(Source::Reply(reply, tail)) => {
                    owed.batch.extend_from_slice(reply.as_ref());
                    owed.batch.extend_from_slice(&tail);
                }
                None => {}
            }
            conn.inbuf.consume(frame_len);
            out.flush_if_full(conn)?;
        }
    }
    Ok(())
}

/// What a connection owes its client: replies answered and not yet written. While it is
/// owed anything, nothing more is read or answered.
#[derive(Default)]
struct Owed {
    /// Replies, whole while small, and the head of a large one: written in one go.
    batch: Vec<u8>,
    /// A large reply's payload, written after the batch.
    large: Option<Large>,
    /// When the client began to take nothing of what is owed; `None` while it takes.
    stalled_since: Option<Instant>,
}

/// A large reply's payload, and how far into it the client got.
struct Large {
    payload: Source,
    sent: usize,
    /// The request frame it answers, consumed from the buffer once the payload is written
    /// (an echo is written from it).
    frame_len: usize,
}

/// Where a reply's payload comes from.
enum Source {
    /// The request's own bytes, at this range of the connection's buffered data.
    Echo(std::ops::Range<usize>),
    /// `len` bytes of the pattern for `seq`, from the static table.
    Pattern(u64, usize),
    /// An encoded call's reply, then its trailer.
    Reply(Reply, Vec<u8>),
}

/// Writes what a connection owes, on its busy thread.
struct Writer<'a, S> {
    stream: &'a S,
    counters: &'a ProtoCounters,
    write_timeout: Duration,
}

impl<S> Writer<'_, S>
where
    for<'a> &'a S: Write,
{
    /// Writes the batch once it holds [`BATCH`] bytes.
    fn flush_if_full(&self, conn: &mut Conn) -> Result<(), Halt> {
        if conn.owed.batch.len() >= BATCH {
            self.flush(conn)?;
        }
        Ok(())
    }

    /// Writes all that is owed: the batch, then a large payload (and consumes the frame it
    /// answers). [`Halt::Stalled`] when the client took none of it for [`BUSY_SPELL`],
    /// with what is left still owed.
    fn flush(&self, conn: &mut Conn) -> Result<(), Halt> {
        let owed = &mut conn.owed;
        let stalled = &mut owed.stalled_since;
        let sent = self.send(&owed.batch, stalled)?;
        if sent < owed.batch.len() {
            owed.batch.drain(..sent);
            return Err(Halt::Stalled);
        }
        owed.batch.clear();
        if let Some(large) = &mut owed.large {
            match &large.payload {
                Source::Echo(echo) => {
                    let rest = &conn.inbuf.data()[echo.clone()][large.sent..];
                    large.sent += self.send(rest, stalled)?;
                    if large.sent < echo.len() {
                        return Err(Halt::Stalled);
                    }
                }
                &Source::Pattern(seq, len) => {
                    self.send_runs(wire::pattern_runs(seq, len), &mut large.sent, stalled)?;
                }
                Source::Reply(reply, tail) => {
                    let runs = [reply.as_ref(), tail.as_slice()];
                    self.send_runs(runs.into_iter(), &mut large.sent, stalled)?;
                }
            }
            conn.inbuf.consume(large.frame_len);
            owed.large = None;
        }
        // What the stream itself still holds (rustls's records).
        let mut stream = self.stream;
        match stream.flush() {
            Ok(()) => Ok(()),
            Err(e) if is_timeout(&e) => Err(self.stall(stalled)),
            Err(_) => Err(Reject::IoError.into()),
        }
    }

    /// Writes `runs` one after the other from `sent` bytes into them, counting what goes
    /// in `sent`; [`Halt::Stalled`] when the client stopped taking them.
    fn send_runs<'r>(
        &self,
        runs: impl Iterator<Item = &'r [u8]>,
        sent: &mut usize,
        stalled: &mut Option<Instant>,
    ) -> Result<(), Halt> {
        let mut skip = *sent;
        for run in runs {
            let Some(rest) = run.get(skip..) else {
                skip -= run.len();
                continue;
            };
            skip = 0;
            let took = self.send(rest, stalled)?;
            *sent += took;
            if took < rest.len() {
                return Err(Halt::Stalled);
            }
        }
        Ok(())
    }

    /// Writes as much of `bytes` as the client takes, counted: all of it, or less when it
    /// took nothing for [`BUSY_SPELL`] (`SO_SNDTIMEO`).
    fn send(&self, bytes: &[u8], stalled: &mut Option<Instant>) -> Result<usize, Reject> {
        let mut sent = 0;
        let mut stream = self.stream;
        while sent < bytes.len() {
            match stream.write(&bytes[sent..]) {
                Ok(0) => return Err(Reject::IoError),
                Ok(n) => {
                    sent += n;
                    *stalled = None;
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) if is_timeout(&e) => match self.stall(stalled) {
                    Halt::Stalled => break,
                    Halt::Close(kind) => return Err(kind),
                },
                Err(_) => return Err(Reject::IoError),
            }
        }
        self.counters.bytes_out.fetch_add(sent as u64, Relaxed);
        Ok(sent)
    }

    /// A write that waited [`BUSY_SPELL`] for nothing: the client is stalled since then,
    /// unless it already was, and its connection is closed once that is the write timeout.
    fn stall(&self, stalled: &mut Option<Instant>) -> Halt {
        let now = Instant::now();
        let since = *stalled.get_or_insert(now.checked_sub(BUSY_SPELL).unwrap_or(now));
        if now - since >= self.write_timeout {
            return Halt::Close(Reject::WriteTimeout);
        }
        Halt::Stalled
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The accepting threads leave TCP_NODELAY to the listener: the kernel must copy it
    /// to each accepted socket, or every reply would wait for Nagle.
    #[test]
    fn an_accepted_socket_inherits_nodelay_from_its_listener() {
        use nix::sys::socket::{getsockopt, setsockopt, sockopt};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        setsockopt(&listener, sockopt::TcpNoDelay, &true).unwrap();
        let client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (accepted, _) = listener.accept().unwrap();
        assert!(getsockopt(&accepted, sockopt::TcpNoDelay).unwrap());
        assert!(!client.nodelay().unwrap(), "a socket without it has it off");
    }
}
