//! One HTTP/2 connection that carries many streams at once, driven by a task of its own:
//! the engine of the `h2-mux` and `grpc-mux` transports.
//!
//! It is [`super::h2_wire`] for many calls in flight: the same opening, the same
//! flow-control rules (RFC 9113), and no general stream state machine; and, unlike
//! `h2_wire`, no `h2` crate at all on its hot path. With the crate's client, `h2-mux` at
//! `-c 64` spent 37% of its client's CPU in the crate and 18% more in the copies and
//! allocations it makes per stream (perf, 2026-12-02), about 9 µs a call against h2load's
//! 3. On the crate's frame layer it still spent 12% in the layer's HPACK encoder (a header
//! entry built, hashed and copied per field) and about 20% reading (a buffer split per
//! frame, a header map built per block). So every frame this side sends is encoded here,
//! into one buffer written straight to the socket, with the requests' headers coded by
//! [`super::hpack`]; and frames are read in place by [`super::h2_read`], the replies'
//! headers decoded by `hpack` into only the fields the transports read. Against h2load
//! -c1 -m64, same core, one server thread: 0.74 times its request rate on the crate's
//! layer, 0.84 with this side's writer, 0.90-0.95 with its reader too (2026-12-07).
//! Requests are [`Request`]s, their fields already bytes: with a URI and a header map per
//! call, the client spent about 20% more CPU at -c 256 (perf stat, 200,000 calls: 437-448
//! ms against 368).
//!
//! A call ([`MuxWire::call`]) puts its request in the connection's queue and wakes the
//! connection's task; the task, in one pass, reads every frame the socket has (each
//! reply's head, DATA and trailers go to its call, which is woken when its stream ends),
//! opens queued streams up to the server's `SETTINGS_MAX_CONCURRENT_STREAMS`, sends what
//! the send windows allow, and writes it all in one flush. So 64 calls that are ready
//! together go out in one write, as h2load sends them.
//!
//! - **Flow control.** DATA within the connection's and each stream's send window, and no
//!   larger than the server's MAX_FRAME_SIZE; a stream whose window is spent waits for a
//!   WINDOW_UPDATE while the others go on. Received DATA is credited back at half a window,
//!   on each open stream and on the connection, padding included.
//! - **Malformed replies** (RFC 9113 §8.2, §8.3.2: an uppercase or connection-specific
//!   field, NUL, CR or LF in a value, a pseudo-header field other than one `:status`
//!   first, trailers that do not end the stream) fail their call as a protocol error and
//!   reset its stream; a bad frame or a header block that cannot be decoded is a
//!   connection error.
//! - **Ends.** RST_STREAM fails its call (a protocol error); GOAWAY fails the calls on
//!   streams past its last stream id and those not yet opened (`Closed`) and leaves the
//!   connection to finish the rest and not be used again. A connection error (a bad frame,
//!   the socket closed) fails every call on it.
//! - **Abandoned calls.** A call dropped before its reply (its timeout) resets its stream
//!   (RST_STREAM CANCEL), so the server stops working on it and the stream stops counting
//!   against the concurrency limit.
//! - **The end.** The task ends when the connection fails or when no one holds the
//!   connection any more; the socket closes with it.

use super::CallError;
use super::buf::RecvBuf;
use super::h2_read::{self, Received};
use super::h2_wire::{
    self, CONNECTION_WINDOW, DEFAULT_WINDOW, Head, MAX_WINDOW, ReplyFields, STREAM_WINDOW,
};
use super::hpack;
use super::tls::{TlsNoted, Watched};
use bytes::{Buf, Bytes, BytesMut};
use h2::frame::{self, Reason, StreamId};
use std::collections::{HashMap, VecDeque};
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// One request as the connection writes it: a `POST` whose fields are already the bytes
/// HPACK takes, so that no header map or URI is built per call (with them, every request
/// allocated a path string, a map and a formatted seq value). `:scheme` and `:authority`
/// are the connection's.
pub(super) struct Request {
    /// `:path`: a transport keeps one and hands out clones of it.
    pub path: Bytes,
    /// `content-type`, for a transport whose requests' type varies with the call (an
    /// encoded call's); the same in every request of a run, so HPACK indexes it once.
    pub content_type: Option<&'static str>,
    /// The transport's own fields, the same in every request (so HPACK indexes them once).
    pub fields: &'static [(&'static str, &'static str)],
    /// The call's seq as [`SEQ_HEADER`](crate::wire::SEQ_HEADER), for a transport whose
    /// requests carry it in their head: a new value each call, never indexed.
    pub seq: Option<u64>,
    pub payload: Bytes,
    /// The largest reply body accepted: a larger one fails the call (`ReplyTooLarge`)
    /// as soon as the DATA that passes it arrives, and the stream is reset.
    pub max_body: usize,
    /// A header of the call's own, after `fields` (SOAP's `SOAPAction`): the same for
    /// every call of an operation, so HPACK indexes it once.
    pub header: Option<(&'static str, &'static str)>,
    /// A status besides 200 whose reply is the call's to judge (SOAP's Fault under 500).
    pub fault_status: Option<u16>,
}

/// Where a connection's requests go: their `:scheme` and `:authority`.
pub(super) struct Target {
    pub scheme: &'static str,
    /// `host:port`.
    pub authority: Bytes,
}

/// What a finished call hands back: the reply's head and trailers, its body, and the
/// time from its HEADERS being queued to the reply's head.
#[derive(Debug)]
pub(super) struct Done {
    pub replied: Replied,
    pub body: Vec<u8>,
    pub first_byte: Option<Duration>,
}

/// A call's key in the connection's table.
type Key = u64;

/// The tables' hasher: their keys are small integers of this process's own making, so
/// a multiplication spreads them (Fibonacci hashing) where SipHash, which resists keys
/// chosen by an attacker, cost 3% of a call.
#[derive(Default, Clone, Copy)]
struct KeyHasher(u64);

impl std::hash::Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }

    fn write_u32(&mut self, n: u32) {
        self.write_u64(u64::from(n));
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0 ^ n).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

/// The streams opened before the server's SETTINGS say how many it allows: 100, the
/// least RFC 9113 (§6.5.2) recommends a server allow, as Go's client assumes. Assuming no
/// limit opened 200 streams at once on rpcbench-echo, which allows 100, and the 100 it
/// refused failed their calls and the connection.
pub(super) const ASSUMED_MAX_STREAMS: usize = 100;

/// Bytes encoded and not yet written above which the task stops reading frames until the
/// socket takes them.
const UNWRITTEN_BEFORE_READING: usize = 1 << 20;

/// Room a read asks for beyond what is buffered: two of the largest frames this side
/// takes.
const READ_AHEAD: usize = 2 * h2_read::MAX_FRAME;

/// The SETTINGS parameters this side acts on (RFC 9113 §6.5.2).
const SETTINGS_HEADER_TABLE_SIZE: u16 = 0x1;
const SETTINGS_MAX_CONCURRENT_STREAMS: u16 = 0x3;
const SETTINGS_INITIAL_WINDOW_SIZE: u16 = 0x4;
const SETTINGS_MAX_FRAME_SIZE: u16 = 0x5;

/// What the transports read of a reply's head or trailers, read as the fields are
/// decoded (the first of each); a reply's other fields are checked and dropped. A header
/// map, which `h2_wire` keeps, cost 8% of the client's CPU here to build and search.
#[derive(Debug, Default, PartialEq)]
pub(super) struct Kept {
    /// `x-rpcbench-seq`, when numeric.
    pub seq: Option<u64>,
    /// `server-timing`'s duration.
    pub server: Option<super::ServerTime>,
    /// `content-type` is gRPC's.
    pub grpc: bool,
    /// `grpc-status`, when a code.
    pub grpc_status: Option<u8>,
    /// The fields seen so far, as bits of [`Kept::SEQ`] and the others.
    seen: u8,
}

impl Kept {
    const SEQ: u8 = 1;
    const SERVER: u8 = 2;
    const CONTENT_TYPE: u8 = 4;
    const GRPC_STATUS: u8 = 8;

    /// Takes the field `name: value` if it is one this side reads.
    fn take(&mut self, name: &[u8], value: &[u8]) {
        let bit = match name {
            b"x-rpcbench-seq" => Kept::SEQ,
            b"server-timing" => Kept::SERVER,
            b"content-type" => Kept::CONTENT_TYPE,
            b"grpc-status" => Kept::GRPC_STATUS,
            _ => return,
        };
        if self.seen & bit != 0 {
            return;
        }
        self.seen |= bit;
        match bit {
            Kept::SEQ => {
                let text = std::str::from_utf8(value).ok();
                self.seq = text.and_then(|v| v.trim().parse().ok());
            }
            Kept::SERVER => self.server = super::http::parse_server_timing(value),
            Kept::CONTENT_TYPE => self.grpc = value.starts_with(h2_wire::GRPC_CONTENT_TYPE),
            _ => self.grpc_status = h2_wire::grpc_status(value),
        }
    }
}

/// A finished call's reply head and trailers, as [`Kept`].
#[derive(Debug, Default, PartialEq)]
pub(super) struct Replied {
    pub head: Kept,
    pub trailers: Option<Kept>,
}

impl ReplyFields for Replied {
    fn grpc(&self) -> bool {
        self.head.grpc
    }

    fn grpc_status(&self) -> Option<u8> {
        self.trailers.as_ref().unwrap_or(&self.head).grpc_status
    }

    fn server_timing(&self) -> Option<super::ServerTime> {
        self.trailers.as_ref().unwrap_or(&self.head).server
    }
}

/// Fields that are connection-specific in HTTP/1.1 and make an HTTP/2 message malformed
/// (RFC 9113 §8.2.2).
const CONNECTION_SPECIFIC: [&[u8]; 5] = [
    b"connection",
    b"keep-alive",
    b"proxy-connection",
    b"transfer-encoding",
    b"upgrade",
];

/// A reply's header block as it is decoded: its status and the fields this side keeps,
/// checked as RFC 9113 §8.2 and §8.3.2 ask (lowercase names, no connection-specific
/// field, no NUL, CR or LF in a value, `:status` alone among pseudo-header fields, once,
/// before the others).
#[derive(Default)]
struct ReplyHead {
    status: Option<u16>,
    /// A regular field has come: no pseudo-header field may follow.
    regular: bool,
    fields: Kept,
}

impl ReplyHead {
    /// Takes one decoded field; a malformed one fails the block.
    fn field(&mut self, name: &[u8], value: &[u8]) -> Result<(), CallError> {
        let bad = CallError::Protocol;
        if value.iter().any(|&b| matches!(b, 0 | b'\r' | b'\n')) {
            return Err(bad);
        }
        if name.first() == Some(&b':') {
            if name != b":status" || self.regular || self.status.is_some() {
                return Err(bad);
            }
            let status = match value {
                &[a @ b'1'..=b'9', b @ b'0'..=b'9', c @ b'0'..=b'9'] => {
                    u16::from(a - b'0') * 100 + u16::from(b - b'0') * 10 + u16::from(c - b'0')
                }
                _ => return Err(bad),
            };
            self.status = Some(status);
            return Ok(());
        }
        self.regular = true;
        let lowercase_token = |&b: &u8| {
            b.is_ascii_lowercase() || b.is_ascii_digit() || b"!#$%&'*+-.^_`|~".contains(&b)
        };
        if name.is_empty() || !name.iter().all(lowercase_token) {
            return Err(bad);
        }
        if CONNECTION_SPECIFIC.contains(&name) || (name == b"te" && value != b"trailers") {
            return Err(bad);
        }
        self.fields.take(name, value);
        Ok(())
    }

    /// What the block is for a stream whose final head has (`have_status`) or has not
    /// come yet, and that the block ends (`end`) or not.
    fn read(self, have_status: bool, end: bool) -> Result<Head<Kept>, CallError> {
        if have_status {
            // Trailers: they end the stream, and carry no pseudo-header field.
            return match (end, self.status) {
                (true, None) => Ok(Head::Trailers(self.fields)),
                _ => Err(CallError::Protocol),
            };
        }
        match (self.status.ok_or(CallError::Protocol)?, end) {
            (100..200, false) => Ok(Head::Informational),
            (100..200, true) => Err(CallError::Protocol),
            (status, end) => Ok(Head::Final(status, self.fields, end)),
        }
    }
}

/// The END_STREAM flag of DATA and HEADERS, and HEADERS' END_HEADERS (RFC 9113 §6.1, §6.2).
const END_STREAM: u8 = 0x1;
const END_HEADERS: u8 = 0x4;

type Table<K, V> = HashMap<K, V, std::hash::BuildHasherDefault<KeyHasher>>;

/// One call: its request until its stream opens, then what has come back on it.
#[derive(Default)]
struct Slot {
    /// The request, until its stream is opened.
    req: Option<Request>,
    /// The stream, once opened.
    id: Option<StreamId>,
    /// The payload not yet sent.
    rest: Bytes,
    /// The stream's send window.
    send_window: i64,
    /// Stream bytes received and not yet credited back.
    owed: u32,
    /// The final status, once the reply's head has come.
    status: Option<u16>,
    replied: Replied,
    body: Vec<u8>,
    /// The largest body accepted (its request's `max_body`).
    max_body: usize,
    /// Its request's `fault_status`.
    fault_status: Option<u16>,
    /// When its HEADERS were queued, and from then to the reply's head.
    sent: Option<Instant>,
    first_byte: Option<Duration>,
    /// Set when the call is over.
    outcome: Option<Result<(), CallError>>,
    /// The call's task, woken when the outcome is set.
    waker: Option<Waker>,
}

/// What the calls and the connection's task share.
#[derive(Default)]
struct Inner {
    /// Boxed: a slot is a few hundred bytes, and a call's slot is moved in and out.
    slots: Table<Key, Box<Slot>>,
    /// Calls waiting for a stream, in order.
    queued: VecDeque<Key>,
    /// Calls whose stream is open with payload left to send, in stream order.
    sending: VecDeque<Key>,
    /// Open streams, by id.
    streams: Table<u32, Key>,
    /// Calls dropped before their outcome.
    abandoned: Vec<Key>,
    next_key: Key,
    /// The connection's task.
    task: Option<Waker>,
    /// Why the connection ended, once it has.
    dead: Option<CallError>,
    /// Set when the connection takes no new calls: GOAWAY, or the stream ids are spent.
    done: bool,
}

/// One multiplexed connection.
pub(super) struct MuxWire {
    inner: Mutex<Inner>,
    /// Where the socket notes a TLS failure.
    noted: Arc<TlsNoted>,
}

impl MuxWire {
    /// Starts the connection on `sock` (connected, TLS done) and spawns its task on the
    /// current runtime.
    pub(super) async fn open<T>(
        sock: T,
        noted: Arc<TlsNoted>,
        origin: Target,
    ) -> Result<Arc<MuxWire>, CallError>
    where
        T: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let io = h2_wire::preface(sock, noted.clone()).await?;
        let wire = Arc::new(MuxWire {
            inner: Mutex::default(),
            noted,
        });
        let mut driver = Driver {
            wire: Arc::downgrade(&wire),
            io,
            inbuf: RecvBuf::new(2 * READ_AHEAD),
            unpack: hpack::Decoder::default(),
            partial: None,
            max_frame: h2_read::MAX_FRAME,
            out: BytesMut::new(),
            origin,
            hpack: hpack::Encoder::default(),
            block: Vec::new(),
            next_id: Some(StreamId::from(1)),
            send_window: DEFAULT_WINDOW,
            stream_initial: DEFAULT_WINDOW,
            max_concurrent: ASSUMED_MAX_STREAMS,
            owed: 0,
        };
        tokio::spawn(std::future::poll_fn(move |cx| driver.poll(cx)));
        Ok(wire)
    }

    /// False once the connection must not take another call.
    pub(super) fn usable(&self) -> bool {
        let inner = self.lock();
        !inner.done && inner.dead.is_none()
    }

    /// Makes `req` as a new stream; reads the whole reply. Returns its head and trailers
    /// when its status is 200, else `HttpStatus`; `body` is the buffer the reply is read
    /// into (its old contents cleared).
    pub(super) async fn call(
        self: &Arc<Self>,
        req: Request,
        body: Vec<u8>,
    ) -> Result<Done, CallError> {
        let pending = Pending {
            wire: self.clone(),
            start: Some((req, body)),
            key: None,
        };
        pending.await.map_err(|e| self.noted.explain(e))
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Drop for MuxWire {
    /// The last holder is gone: the task wakes to see it and closes the connection.
    fn drop(&mut self) {
        let inner = self.inner.get_mut().unwrap_or_else(|p| p.into_inner());
        if let Some(task) = inner.task.take() {
            task.wake();
        }
    }
}

/// A call in flight: queued on first poll, done when the task sets its outcome; dropped
/// before that, abandoned.
struct Pending {
    wire: Arc<MuxWire>,
    start: Option<(Request, Vec<u8>)>,
    key: Option<Key>,
}

impl Future for Pending {
    type Output = Result<Done, CallError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let me = &mut *self;
        let mut inner = me.wire.lock();
        let key = match me.key {
            Some(key) => key,
            None => {
                if let Some(e) = &inner.dead {
                    return Poll::Ready(Err(e.clone()));
                }
                if inner.done {
                    return Poll::Ready(Err(CallError::Closed));
                }
                let (req, mut body) = me.start.take().expect("a call is started once");
                body.clear();
                let key = inner.next_key;
                inner.next_key += 1;
                inner.slots.insert(
                    key,
                    Box::new(Slot {
                        max_body: req.max_body,
                        fault_status: req.fault_status,
                        req: Some(req),
                        body,
                        ..Slot::default()
                    }),
                );
                inner.queued.push_back(key);
                if let Some(task) = inner.task.take() {
                    task.wake();
                }
                me.key = Some(key);
                key
            }
        };
        let slot = inner
            .slots
            .get_mut(&key)
            .expect("a call's slot stays until it is done");
        match slot.outcome.take() {
            Some(outcome) => {
                let slot = inner.slots.remove(&key).expect("present");
                me.key = None;
                Poll::Ready(outcome.map(|()| Done {
                    replied: slot.replied,
                    body: slot.body,
                    first_byte: slot.first_byte,
                }))
            }
            None => {
                if !slot.waker.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
                    slot.waker = Some(cx.waker().clone());
                }
                Poll::Pending
            }
        }
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        if let Some(key) = self.key {
            let mut inner = self.wire.lock();
            inner.abandoned.push(key);
            if let Some(task) = inner.task.take() {
                task.wake();
            }
        }
    }
}

/// The connection's task: the frame layer and the connection-wide state.
struct Driver<T> {
    /// The shared state; gone when no one holds the connection.
    wire: Weak<MuxWire>,
    /// The socket.
    io: Watched<T>,
    /// Bytes received and not yet read as frames.
    inbuf: RecvBuf,
    /// The replies' header decoder, which follows the server's table.
    unpack: hpack::Decoder,
    /// A header block whose CONTINUATION frames are still to come: its stream, whether
    /// its HEADERS ended the stream, and its fragments so far.
    partial: Option<(u32, bool, Vec<u8>)>,
    /// The largest frame the server takes (its SETTINGS_MAX_FRAME_SIZE).
    max_frame: usize,
    /// Frames encoded and not yet written, in order. Every frame this side sends is
    /// encoded here and written straight to the socket; the frame layer only reads.
    out: BytesMut,
    /// Where the requests go.
    origin: Target,
    /// The requests' header encoder, which mirrors the server's table.
    hpack: hpack::Encoder,
    /// The header block being encoded.
    block: Vec<u8>,
    /// The id the next stream gets; `None` once they are spent.
    next_id: Option<StreamId>,
    /// The connection's send window.
    send_window: i64,
    /// The send window a new stream starts with.
    stream_initial: i64,
    /// The server's SETTINGS_MAX_CONCURRENT_STREAMS ([`ASSUMED_MAX_STREAMS`] until it says).
    max_concurrent: usize,
    /// Connection bytes received and not yet credited back.
    owed: u32,
}

impl<T: AsyncRead + AsyncWrite + Unpin> Driver<T> {
    /// One pass: read what has come, open and send what can go, write it.
    fn poll(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        let Some(wire) = self.wire.upgrade() else {
            // No one holds the connection: it closes.
            return Poll::Ready(());
        };
        if let Err(e) = self.pass(&wire, cx) {
            let mut inner = wire.lock();
            inner.done = true;
            inner.dead = Some(e.clone());
            for slot in inner.slots.values_mut() {
                if slot.outcome.is_none() {
                    slot.outcome = Some(Err(e.clone()));
                    if let Some(w) = slot.waker.take() {
                        w.wake();
                    }
                }
            }
            return Poll::Ready(());
        }
        Poll::Pending
    }

    fn pass(&mut self, wire: &MuxWire, cx: &mut Context<'_>) -> Result<(), CallError> {
        loop {
            // While much is unwritten (a server that does not read), frames are not read
            // either, so their answers do not pile up here.
            let reading = self.out.len() < UNWRITTEN_BEFORE_READING;
            if reading {
                self.read_frames(wire, cx)?;
            }
            {
                let mut inner = wire.lock();
                inner.task = Some(cx.waker().clone());
                self.drop_abandoned(&mut inner);
                self.open_queued(&mut inner);
                self.send_data(&mut inner);
            }
            let io = &mut self.io;
            while !self.out.is_empty() {
                match Pin::new(&mut *io).poll_write(cx, &self.out) {
                    Poll::Ready(Ok(0)) => return Err(CallError::Closed),
                    Poll::Ready(Ok(n)) => self.out.advance(n),
                    Poll::Ready(Err(e)) => return Err(CallError::from_io(&e)),
                    Poll::Pending => break,
                }
            }
            if let Poll::Ready(Err(e)) = Pin::new(&mut *io).poll_flush(cx) {
                return Err(CallError::from_io(&e));
            }
            // Reads skipped and writes now done: read (no wake-up would come for it).
            if reading || self.out.len() >= UNWRITTEN_BEFORE_READING {
                return Ok(());
            }
        }
    }

    /// Reads and handles every frame the socket has.
    fn read_frames(&mut self, wire: &MuxWire, cx: &mut Context<'_>) -> Result<(), CallError> {
        // Out of `self` while its frames, which borrow it, are handled.
        let mut inbuf = std::mem::replace(&mut self.inbuf, RecvBuf::new(0));
        let read = self.read_into(&mut inbuf, wire, cx);
        self.inbuf = inbuf;
        read
    }

    fn read_into(
        &mut self,
        inbuf: &mut RecvBuf,
        wire: &MuxWire,
        cx: &mut Context<'_>,
    ) -> Result<(), CallError> {
        loop {
            {
                let mut inner = wire.lock();
                while let Some((frame, len)) = h2_read::next(inbuf.data())? {
                    self.on_frame(frame, &mut inner)?;
                    inbuf.take(len);
                }
            }
            let mut space = ReadBuf::new(inbuf.space_for(inbuf.data().len() + READ_AHEAD));
            match Pin::new(&mut self.io).poll_read(cx, &mut space) {
                Poll::Ready(Ok(())) if space.filled().is_empty() => return Err(CallError::Closed),
                Poll::Ready(Ok(())) => {
                    let n = space.filled().len();
                    inbuf.filled(n);
                }
                Poll::Ready(Err(e)) => return Err(CallError::from_io(&e)),
                Poll::Pending => return Ok(()),
            }
        }
    }

    /// Encodes the HEADERS of `req` on stream `id`, with END_STREAM when it has no
    /// body, in CONTINUATION frames after it when the block is larger than the server's
    /// frames.
    fn headers(&mut self, id: StreamId, req: &Request, end: bool) {
        let (hpack, block) = (&mut self.hpack, &mut self.block);
        block.clear();
        hpack.begin(block);
        hpack.field(block, b":method", b"POST", false);
        hpack.field(block, b":scheme", self.origin.scheme.as_bytes(), false);
        hpack.field(block, b":authority", &self.origin.authority, false);
        hpack.field(block, b":path", &req.path, false);
        if let Some(value) = req.content_type {
            hpack.field(block, b"content-type", value.as_bytes(), false);
        }
        for (name, value) in req.fields.iter().chain(&req.header) {
            hpack.field(block, name.as_bytes(), value.as_bytes(), false);
        }
        if let Some(seq) = req.seq {
            let mut digits = [0; 20];
            let value = crate::wire::decimal(seq, &mut digits);
            hpack.field(block, crate::wire::SEQ_HEADER.as_bytes(), value, true);
        }
        let max = self.max_frame;
        let mut chunks = self.block.chunks(max).peekable();
        let mut kind = frame::Kind::Headers;
        let mut flags = if end { END_STREAM } else { 0 };
        while let Some(chunk) = chunks.next() {
            if chunks.peek().is_none() {
                flags |= END_HEADERS;
            }
            frame::Head::new(kind, flags, id).encode(chunk.len(), &mut self.out);
            self.out.extend_from_slice(chunk);
            (kind, flags) = (frame::Kind::Continuation, 0);
        }
    }

    /// Forgets the calls dropped before their outcome, resetting their open streams.
    fn drop_abandoned(&mut self, inner: &mut Inner) {
        for key in std::mem::take(&mut inner.abandoned) {
            let Some(slot) = inner.slots.remove(&key) else {
                continue;
            };
            inner.queued.retain(|&k| k != key);
            inner.sending.retain(|&k| k != key);
            if let Some(id) = slot.id
                && inner.streams.remove(&u32::from(id)).is_some()
            {
                frame::Reset::new(id, Reason::CANCEL).encode(&mut self.out);
            }
        }
    }

    /// Opens streams for queued calls, up to the server's limit.
    fn open_queued(&mut self, inner: &mut Inner) {
        while inner.streams.len() < self.max_concurrent && !inner.done {
            let Some(key) = inner.queued.pop_front() else {
                return;
            };
            let Some(id) = self.next_id else {
                inner.done = true;
                inner.queued.push_front(key);
                break;
            };
            self.next_id = id.next_id().ok();
            let slot = inner.slots.get_mut(&key).expect("a queued call has a slot");
            let req = slot.req.take().expect("a queued call has its request");
            let end = req.payload.is_empty();
            self.headers(id, &req, end);
            slot.id = Some(id);
            slot.send_window = self.stream_initial;
            slot.rest = req.payload;
            slot.sent = Some(Instant::now());
            if !end {
                inner.sending.push_back(key);
            }
            inner.streams.insert(u32::from(id), key);
        }
        if inner.done {
            // No stream will open for these.
            for key in std::mem::take(&mut inner.queued) {
                finish(inner, key, Err(CallError::Closed));
            }
        }
    }

    /// Sends the payloads of open streams, in order, within the windows.
    fn send_data(&mut self, inner: &mut Inner) {
        let max = self.max_frame as i64;
        let Inner { slots, sending, .. } = inner;
        let mut i = 0;
        while i < sending.len() && self.send_window > 0 {
            let slot = slots
                .get_mut(&sending[i])
                .expect("a sending call has a slot");
            let id = slot.id.expect("a sending call has a stream");
            loop {
                let room = self.send_window.min(slot.send_window).min(max);
                if room <= 0 || slot.rest.is_empty() {
                    break;
                }
                let chunk = slot.rest.split_to((room as usize).min(slot.rest.len()));
                self.send_window -= chunk.len() as i64;
                slot.send_window -= chunk.len() as i64;
                let end = if slot.rest.is_empty() { END_STREAM } else { 0 };
                frame::Head::new(frame::Kind::Data, end, id).encode(chunk.len(), &mut self.out);
                self.out.extend_from_slice(&chunk);
            }
            if slot.rest.is_empty() {
                sending.remove(i);
            } else {
                i += 1;
            }
        }
    }

    /// Does what one frame from the server asks.
    fn on_frame(&mut self, f: Received<'_>, inner: &mut Inner) -> Result<(), CallError> {
        if let Some((id, _, block)) = &mut self.partial {
            // Nothing may come between a header block's frames (RFC 9113 §6.10).
            let Received::Continuation {
                id: more,
                fragment,
                end_headers,
            } = f
            else {
                return Err(CallError::Protocol);
            };
            if more != *id || block.len() + fragment.len() > h2_read::MAX_HEADER_BLOCK {
                return Err(CallError::Protocol);
            }
            block.extend_from_slice(fragment);
            if end_headers {
                let (id, end_stream, block) = self.partial.take().expect("present");
                self.on_headers(id, &block, end_stream, inner)?;
            }
            return Ok(());
        }
        match f {
            Received::Data {
                id,
                data,
                counted,
                end,
            } => self.on_data(id, data, counted, end, inner),
            Received::Headers {
                id,
                fragment,
                end_stream,
                end_headers: true,
            } => self.on_headers(id, fragment, end_stream, inner),
            Received::Headers {
                id,
                fragment,
                end_stream,
                end_headers: false,
            } => {
                self.partial = Some((id, end_stream, fragment.to_vec()));
                Ok(())
            }
            Received::Continuation { .. } => Err(CallError::Protocol),
            Received::Settings { ack: true, .. } | Received::Ignored => Ok(()),
            Received::Settings { ack: false, params } => self.on_settings(&params, inner),
            Received::Ping {
                ack: false,
                payload,
            } => {
                frame::Ping::pong(payload).encode(&mut self.out);
                Ok(())
            }
            Received::Ping { ack: true, .. } => Ok(()),
            Received::WindowUpdate { id, increment } => {
                let window = if id == 0 {
                    &mut self.send_window
                } else if let Some(key) = inner.streams.get(&id) {
                    &mut inner.slots.get_mut(key).expect("open").send_window
                } else {
                    return Ok(());
                };
                *window += i64::from(increment);
                if *window > MAX_WINDOW {
                    return Err(CallError::Protocol);
                }
                Ok(())
            }
            Received::Reset { id, .. } => {
                if let Some(key) = inner.streams.remove(&id) {
                    inner.sending.retain(|&k| k != key);
                    finish(inner, key, Err(CallError::Protocol));
                }
                Ok(())
            }
            Received::GoAway { last, .. } => {
                inner.done = true;
                let past: Vec<u32> = inner
                    .streams
                    .keys()
                    .copied()
                    .filter(|&id| id > last)
                    .collect();
                for id in past {
                    let key = inner.streams.remove(&id).expect("listed");
                    inner.sending.retain(|&k| k != key);
                    finish(inner, key, Err(CallError::Closed));
                }
                Ok(())
            }
        }
    }

    /// The server's SETTINGS (RFC 9113 §6.5.2): applied, then acknowledged.
    fn on_settings(&mut self, params: &[(u16, u32)], inner: &mut Inner) -> Result<(), CallError> {
        for &(param, value) in params {
            match param {
                SETTINGS_HEADER_TABLE_SIZE => self.hpack.set_max(value as usize),
                SETTINGS_MAX_CONCURRENT_STREAMS => self.max_concurrent = value as usize,
                SETTINGS_INITIAL_WINDOW_SIZE => {
                    let value = i64::from(value);
                    if value > MAX_WINDOW {
                        return Err(CallError::Protocol);
                    }
                    let delta = value - self.stream_initial;
                    self.stream_initial = value;
                    for key in inner.streams.values() {
                        let slot = inner.slots.get_mut(key).expect("an open stream has a slot");
                        slot.send_window += delta;
                        if slot.send_window > MAX_WINDOW {
                            return Err(CallError::Protocol);
                        }
                    }
                }
                SETTINGS_MAX_FRAME_SIZE => {
                    if !(h2_read::MAX_FRAME..1 << 24).contains(&(value as usize)) {
                        return Err(CallError::Protocol);
                    }
                    self.max_frame = value as usize;
                }
                // Push (which a server must not turn on), the header list size (this
                // client's requests are small), and parameters this side does not know.
                _ => {}
            }
        }
        frame::Settings::ack().encode(&mut self.out);
        Ok(())
    }

    /// A whole header block on stream `id`: decoded (whatever the stream, so this side's
    /// table follows the server's), then the call's reply head or trailers.
    fn on_headers(
        &mut self,
        id: u32,
        block: &[u8],
        end_stream: bool,
        inner: &mut Inner,
    ) -> Result<(), CallError> {
        let mut head = ReplyHead::default();
        let well_formed = self
            .unpack
            .decode(block, |name, value| head.field(name, value))
            .map_err(|_| CallError::Protocol)?;
        let Some((key, slot)) = self.open_slot(inner, id)? else {
            return Ok(());
        };
        let read = well_formed.and_then(|()| head.read(slot.status.is_some(), end_stream));
        match read {
            Ok(Head::Informational) => {}
            Ok(Head::Final(status, fields, end)) => {
                slot.status = Some(status);
                slot.replied.head = fields;
                slot.first_byte = slot.sent.map(|s| s.elapsed());
                if end {
                    self.ended(inner, key);
                }
            }
            Ok(Head::Trailers(fields)) => {
                slot.replied.trailers = Some(fields);
                self.ended(inner, key);
            }
            Err(e) => self.reset(inner, key, e),
        }
        Ok(())
    }

    /// A DATA frame: its call's body, and flow-control credit owed either way (`counted`,
    /// the frame's whole payload, padding included).
    fn on_data(
        &mut self,
        id: u32,
        data: &[u8],
        counted: u32,
        end: bool,
        inner: &mut Inner,
    ) -> Result<(), CallError> {
        self.owed += counted;
        if self.owed >= CONNECTION_WINDOW / 2 {
            let credit = std::mem::take(&mut self.owed);
            frame::WindowUpdate::new(StreamId::zero(), credit).encode(&mut self.out);
        }
        let Some((key, slot)) = self.open_slot(inner, id)? else {
            return Ok(());
        };
        if slot.status.is_none() {
            // DATA before the reply's head.
            self.reset(inner, key, CallError::Protocol);
            return Ok(());
        }
        if slot.body.len() + data.len() > slot.max_body {
            // Not read further: the stream is reset, and its DATA still on the way is
            // credited to the connection (and dropped) as any closed stream's.
            self.reset(inner, key, CallError::ReplyTooLarge);
            return Ok(());
        }
        slot.body.extend_from_slice(data);
        slot.owed += counted;
        if end {
            self.ended(inner, key);
        } else if slot.owed >= STREAM_WINDOW / 2 {
            let credit = std::mem::take(&mut slot.owed);
            frame::WindowUpdate::new(StreamId::from(id), credit).encode(&mut self.out);
        }
        Ok(())
    }

    /// The call whose stream `id` is, and its slot, when the stream is open. A frame on
    /// another stream is ignored (`None`) if its call is over, and a protocol error if
    /// this client never opened it (or it is the server's own: an even id).
    fn open_slot<'a>(
        &self,
        inner: &'a mut Inner,
        id: u32,
    ) -> Result<Option<(Key, &'a mut Slot)>, CallError> {
        if let Some(&key) = inner.streams.get(&id) {
            let slot = inner
                .slots
                .get_mut(&key)
                .expect("an open stream has a slot");
            return Ok(Some((key, slot)));
        }
        let opened = self.next_id.is_none_or(|next| id < u32::from(next));
        if id.is_multiple_of(2) || !opened {
            Err(CallError::Protocol)
        } else {
            Ok(None)
        }
    }

    /// The server ended `key`'s stream: the call is over, by its status. A request not
    /// yet wholly sent is not sent on, and this side of the stream is reset (RFC 9113
    /// §8.1).
    fn ended(&mut self, inner: &mut Inner, key: Key) {
        let slot = inner
            .slots
            .get_mut(&key)
            .expect("an open stream has a slot");
        let id = slot.id.expect("open");
        let outcome = match slot.status {
            Some(200) => Ok(()),
            Some(status) if slot.fault_status == Some(status) => Ok(()),
            Some(status) => Err(CallError::HttpStatus(status)),
            None => Err(CallError::Protocol),
        };
        if !slot.rest.is_empty() {
            slot.rest = Bytes::new();
            inner.sending.retain(|&k| k != key);
            frame::Reset::new(id, Reason::CANCEL).encode(&mut self.out);
        }
        inner.streams.remove(&u32::from(id));
        finish(inner, key, outcome);
    }

    /// Fails `key`'s call with `e` and resets its stream.
    fn reset(&mut self, inner: &mut Inner, key: Key, e: CallError) {
        let id = inner.slots[&key].id.expect("open");
        inner.streams.remove(&u32::from(id));
        inner.sending.retain(|&k| k != key);
        frame::Reset::new(id, Reason::PROTOCOL_ERROR).encode(&mut self.out);
        finish(inner, key, Err(e));
    }
}

/// Sets `key`'s outcome and wakes its call.
fn finish(inner: &mut Inner, key: Key, outcome: Result<(), CallError>) {
    if let Some(slot) = inner.slots.get_mut(&key) {
        slot.outcome = Some(outcome);
        if let Some(w) = slot.waker.take() {
            w.wake();
        }
    }
}

#[cfg(test)]
mod tests {
    //! The multiplexed client against the scripted server of `h2_wire`'s tests.
    use super::super::h2_wire::script::*;
    use super::*;
    use h2::frame::Frame;

    /// A connection (its task on the current runtime) and the server's end.
    async fn pair() -> (Arc<MuxWire>, Server) {
        let origin = || Target {
            scheme: "http",
            authority: Bytes::from_static(b"test"),
        };
        pair_with(async |sock, noted| MuxWire::open(sock, noted, origin()).await).await
    }

    /// The request of call `seq`: `POST /echo` of `payload` with its seq field.
    fn echo(seq: u64, payload: &[u8]) -> Request {
        Request {
            path: Bytes::from_static(b"/echo"),
            content_type: None,
            fields: &[],
            seq: Some(seq),
            payload: Bytes::copy_from_slice(payload),
            max_body: 16 << 20,
            header: None,
            fault_status: None,
        }
    }

    /// Call `seq` with `payload`; returns the reply's seq header.
    async fn call(wire: &Arc<MuxWire>, seq: u64, payload: &[u8]) -> Result<u64, CallError> {
        let done = wire.call(echo(seq, payload), Vec::new()).await?;
        assert_eq!(done.body, payload, "the echo of {seq}");
        Ok(done.replied.head.seq.unwrap())
    }

    /// Bounded: a client that misses what a case waits for fails it, not hangs it.
    async fn bounded<F: Future>(f: F) -> F::Output {
        tokio::time::timeout(Duration::from_secs(10), f)
            .await
            .expect("the calls or the server's script are stuck")
    }

    /// Reads the next `n` requests whole (HEADERS, then DATA to END_STREAM, the
    /// requests' frames in any order); returns each one's stream, seq and payload, by
    /// stream.
    async fn requests(server: &mut Server, n: usize) -> Vec<(StreamId, u64, Vec<u8>)> {
        let mut got: Vec<(StreamId, u64, Vec<u8>, bool)> = Vec::new();
        while got.len() < n || got.iter().any(|r| !r.3) {
            match next(server).await {
                Frame::Headers(h) => {
                    let seq = h.fields()[SEQ].to_str().unwrap().parse().unwrap();
                    got.push((h.stream_id(), seq, Vec::new(), h.is_end_stream()));
                }
                Frame::Data(d) => {
                    let r = got
                        .iter_mut()
                        .find(|r| r.0 == d.stream_id())
                        .expect("opened");
                    assert!(!r.3, "DATA after the end of the request");
                    r.2.extend_from_slice(d.payload());
                    r.3 = d.is_end_stream();
                }
                f => panic!("{f:?}"),
            }
        }
        assert_eq!(got.len(), n, "more requests than expected");
        got.into_iter()
            .map(|(id, seq, p, _)| (id, seq, p))
            .collect()
    }

    /// Reads the next request whole.
    async fn whole_request(server: &mut Server) -> (StreamId, u64, Vec<u8>) {
        requests(server, 1).await.pop().unwrap()
    }

    /// Four calls at once on a server that allows two streams: never more than two are
    /// open, replies in the opposite order reach their own calls, and the queued two
    /// open as the first end.
    #[test]
    fn many_calls_within_the_servers_stream_limit() {
        rt().block_on(async {
            let (wire, mut server) = pair().await;
            let mut settings = frame::Settings::default();
            settings.set_max_concurrent_streams(Some(2));
            // In the pipe before any call: the connection's first pass reads it before it
            // opens a stream.
            send(&mut server, settings.into()).await;
            let script = async {
                for _ in 0..2 {
                    let mut two = requests(&mut server, 2).await;
                    // Two are open; the others wait for one to end.
                    tokio::task::yield_now().await;
                    assert!(futures_now(&mut server).is_none(), "a third stream opened");
                    two.reverse();
                    for (id, seq, p) in two {
                        send(&mut server, head(id, 200, seq, false)).await;
                        send(&mut server, data(id, &p, true)).await;
                    }
                }
                server
            };
            let calls = async {
                let payloads: Vec<Vec<u8>> =
                    (1..=4u8).map(|i| vec![i; 100 * usize::from(i)]).collect();
                let (r1, r2, r3, r4) = tokio::join!(
                    call(&wire, 1, &payloads[0]),
                    call(&wire, 2, &payloads[1]),
                    call(&wire, 3, &payloads[2]),
                    call(&wire, 4, &payloads[3]),
                );
                [r1, r2, r3, r4]
            };
            let (results, _server) = bounded(async { tokio::join!(calls, script) }).await;
            assert_eq!(results, [Ok(1), Ok(2), Ok(3), Ok(4)]);
            assert!(wire.usable());
        });
    }

    /// The requests' header blocks, by rpcbench's own HPACK encoder, as the `h2` crate's
    /// decoder reads them: the same fields in request after request (indexed from the
    /// second), a block larger than a frame (HEADERS and CONTINUATION), and the table
    /// shrunk to nothing by the server's SETTINGS (a size update, then literals).
    #[test]
    fn header_blocks_decode_as_sent() {
        rt().block_on(async {
            let (wire, mut server) = pair().await;
            let big: &'static str = "b".repeat(40_000).leak();
            let script = async {
                // Each request's fields, as the server decoded them.
                let mut seen = Vec::new();
                for round in 0..4 {
                    let h = match next(&mut server).await {
                        Frame::Headers(h) => h,
                        f => panic!("{f:?}"),
                    };
                    let id = h.stream_id();
                    assert!(h.is_end_stream(), "no body");
                    let (pseudo, fields) = h.into_parts();
                    let path = pseudo.path.as_ref().map(|p| p.to_string());
                    let seq: u64 = fields[SEQ].to_str().unwrap().parse().unwrap();
                    seen.push((path, fields["x-big"].len(), seq));
                    if round == 1 {
                        // Before the reply, so the next request is encoded after it.
                        let mut settings = frame::Settings::default();
                        settings.set_header_table_size(Some(0));
                        send(&mut server, settings.into()).await;
                        server.set_recv_header_table_size(0);
                    }
                    send(&mut server, head(id, 200, seq, true)).await;
                }
                seen
            };
            let calls = async {
                let mut results = Vec::new();
                for seq in 1..=4 {
                    let mut req = echo(seq, b"");
                    req.fields = Box::leak(Box::new([("x-big", big)]));
                    results.push(wire.call(req, Vec::new()).await.map(|d| d.body));
                }
                results
            };
            let (results, seen) = bounded(async { tokio::join!(calls, script) }).await;
            assert!(results.iter().all(Result::is_ok), "{results:?}");
            let want: Vec<_> = (1..=4)
                .map(|seq| (Some("/echo".to_string()), big.len(), seq))
                .collect();
            assert_eq!(seen, want);
        });
    }

    /// Writes a HEADERS frame ending the stream, its block `block` as given (raw HPACK).
    async fn raw_head(server: &mut Server, id: StreamId, block: &[u8]) {
        use tokio::io::AsyncWriteExt;
        let mut f = bytes::BytesMut::new();
        frame::Head::new(frame::Kind::Headers, END_STREAM | END_HEADERS, id)
            .encode(block.len(), &mut f);
        f.extend_from_slice(block);
        server.get_mut().write_all(&f).await.unwrap();
    }

    /// A literal field without indexing, with a new name, raw strings (RFC 7541 §6.2.2).
    fn literal(name: &str, value: &str) -> Vec<u8> {
        let mut b = vec![0x00, name.len() as u8];
        b.extend_from_slice(name.as_bytes());
        b.push(value.len() as u8);
        b.extend_from_slice(value.as_bytes());
        b
    }

    /// Malformed reply heads (RFC 9113 §8.2, §8.3.2) fail their own call as a protocol
    /// error and reset its stream, and the connection goes on; a block that cannot be
    /// decoded fails the connection, as HPACK's state is then lost (RFC 7541 §3.1).
    #[test]
    fn malformed_heads_fail_their_call_and_bad_hpack_the_connection() {
        const STATUS_200: u8 = 0x88;
        let malformed: Vec<Vec<u8>> = vec![
            [vec![STATUS_200], literal("X-Up", "1")].concat(),
            vec![STATUS_200, 0x84],
            [literal("a", "1"), vec![STATUS_200]].concat(),
            [vec![STATUS_200], literal("connection", "close")].concat(),
            [vec![STATUS_200], literal("a", "1\n2")].concat(),
            vec![STATUS_200, STATUS_200],
            literal("a", "no status"),
        ];
        rt().block_on(async {
            let (wire, mut server) = pair().await;
            let n = malformed.len();
            let script = async {
                for block in &malformed {
                    let (id, _) = request(&mut server).await;
                    raw_head(&mut server, id, block).await;
                    match next(&mut server).await {
                        Frame::Reset(r) => assert_eq!(r.stream_id(), id),
                        f => panic!("{f:?}"),
                    }
                }
                // A well-formed reply still reaches its call.
                let (id, seq) = request(&mut server).await;
                send(&mut server, head(id, 200, seq, true)).await;
                // Index 0 breaks the block, and the connection.
                let (id, _) = request(&mut server).await;
                raw_head(&mut server, id, &[0x80]).await;
                server
            };
            let calls = async {
                let mut results = Vec::new();
                for seq in 1..=n as u64 + 2 {
                    results.push(call(&wire, seq, b"").await);
                }
                results
            };
            let (results, _server) = bounded(async { tokio::join!(calls, script) }).await;
            let mut want = vec![Err(CallError::Protocol); n];
            want.extend([Ok(n as u64 + 1), Err(CallError::Protocol)]);
            assert_eq!(results, want);
            assert!(!wire.usable());
        });
    }

    /// The fields kept of a reply are the first of each, read as a header map's `get`
    /// reads them.
    #[test]
    fn kept_fields_are_the_first_of_each() {
        let mut kept = Kept::default();
        for (name, value) in [
            ("x-rpcbench-seq", " 42 "),
            ("x-rpcbench-seq", "7"),
            ("server-timing", "app;dur=1.5"),
            ("content-type", "application/grpc+proto"),
            ("grpc-status", "x"),
            ("grpc-status", "3"),
            ("other", "1"),
        ] {
            kept.take(name.as_bytes(), value.as_bytes());
        }
        let got = (kept.seq, kept.server, kept.grpc, kept.grpc_status);
        assert_eq!(
            got,
            (
                Some(42),
                Some(Duration::from_micros(1500).into()),
                true,
                None
            )
        );
    }

    /// A frame already read from `server`, if one is waiting (after letting the client
    /// run).
    fn futures_now(server: &mut Server) -> Option<Frame> {
        let waker = std::task::Waker::noop();
        let mut cx = Context::from_waker(waker);
        match tokio_stream::Stream::poll_next(Pin::new(server), &mut cx) {
            Poll::Ready(f) => f.map(|f| f.unwrap()),
            Poll::Pending => None,
        }
    }

    /// GOAWAY between two open streams: the one before it ends normally, the one past it
    /// is `Closed`, and the connection takes no new call.
    #[test]
    fn goaway_fails_only_the_streams_past_it() {
        rt().block_on(async {
            let (wire, mut server) = pair().await;
            let script = async {
                let two = requests(&mut server, 2).await;
                let ((a, sa, _), (b, _, _)) = (two[0].clone(), two[1].clone());
                assert!(a < b);
                send(&mut server, frame::GoAway::new(a, Reason::NO_ERROR).into()).await;
                send(&mut server, head(a, 200, sa, true)).await;
                server
            };
            let calls = async { tokio::join!(call(&wire, 1, b""), call(&wire, 2, b"")) };
            let ((r1, r2), _server) = bounded(async { tokio::join!(calls, script) }).await;
            assert_eq!((r1, r2), (Ok(1), Err(CallError::Closed)));
            assert!(!wire.usable());
            assert_eq!(call(&wire, 3, b"").await, Err(CallError::Closed));
        });
    }

    /// A call dropped before its reply resets its stream, and the next call goes on on
    /// the same connection; a closed connection then fails the call in flight.
    #[test]
    fn a_dropped_call_resets_its_stream_and_a_close_fails_the_rest() {
        rt().block_on(async {
            let (wire, mut server) = pair().await;
            let script = async {
                let (id, _, _) = whole_request(&mut server).await;
                match next(&mut server).await {
                    Frame::Reset(r) => {
                        assert_eq!((r.stream_id(), r.reason()), (id, Reason::CANCEL));
                    }
                    f => panic!("{f:?}"),
                }
                let (id, seq, p) = whole_request(&mut server).await;
                send(&mut server, head(id, 200, seq, false)).await;
                send(&mut server, data(id, &p, true)).await;
                let _ = whole_request(&mut server).await;
                drop(server);
            };
            let calls = async {
                let gave_up =
                    tokio::time::timeout(Duration::from_millis(50), call(&wire, 1, b"x")).await;
                assert!(gave_up.is_err(), "no reply was sent");
                let next = call(&wire, 2, b"y").await;
                let closed = call(&wire, 3, b"z").await;
                (next, closed)
            };
            let ((next, closed), ()) = bounded(async { tokio::join!(calls, script) }).await;
            assert_eq!(next, Ok(2));
            assert_eq!(closed, Err(CallError::Closed));
            assert!(!wire.usable());
        });
    }

    /// A reply larger than the stream window, on two streams at once: each stream and
    /// the connection are credited, so the server never waits.
    #[test]
    fn large_replies_on_two_streams_are_credited() {
        rt().block_on(async {
            let (wire, mut server) = pair().await;
            let total = 3 << 20;
            let script = async {
                let two = requests(&mut server, 2).await;
                let ((a, sa, _), (b, sb, _)) = (two[0].clone(), two[1].clone());
                send(&mut server, head(a, 200, sa, false)).await;
                send(&mut server, head(b, 200, sb, false)).await;
                let chunk = vec![b'x'; 16_384];
                let mut windows = [i64::from(STREAM_WINDOW); 2];
                let mut conn = i64::from(CONNECTION_WINDOW);
                let mut sent = 0;
                while sent < total {
                    tokio::task::yield_now().await;
                    while let Some(Frame::WindowUpdate(w)) = futures_now(&mut server) {
                        let inc = i64::from(w.size_increment());
                        match w.stream_id() {
                            s if s.is_zero() => conn += inc,
                            s if s == a => windows[0] += inc,
                            _ => windows[1] += inc,
                        }
                    }
                    let n = chunk.len().min(total - sent);
                    for (i, id) in [a, b].into_iter().enumerate() {
                        assert!(
                            windows[i] >= n as i64 && conn >= n as i64,
                            "a window ran out"
                        );
                        windows[i] -= n as i64;
                        conn -= n as i64;
                        send(&mut server, data(id, &chunk[..n], sent + n == total)).await;
                    }
                    sent += n;
                }
                server
            };
            let calls = async {
                let one = |seq| {
                    let wire = wire.clone();
                    async move {
                        let done = wire.call(echo(seq, b""), Vec::new()).await;
                        done.map(|d| d.body.len())
                    }
                };
                tokio::join!(one(1), one(2))
            };
            let ((x, y), _server) = bounded(async { tokio::join!(calls, script) }).await;
            assert_eq!((x, y), (Ok(total), Ok(total)));
        });
    }
}
