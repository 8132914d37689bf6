//! Raw TCP listener: reads length-prefixed postcard requests, writes responses in order.
//!
//! Connections are accepted on the runtime, then each is served by a thread of its own
//! with blocking reads and writes (threads are reused, see [`super::pool`]). For one
//! request in flight, the usual case of a latency test, that is two system calls per round
//! trip (`recv`, `send`) where an event loop needs a third (`epoll_wait`) and a task wake-up:
//! about 2 µs of a 15 µs loopback round trip on the machines this was measured on, the
//! same design as sockperf's and netperf's servers.
//!
//! Every complete frame already buffered is answered before the replies are written in one
//! `write_all`, so pipelined requests cost one write per batch instead of one per reply.

use super::pool::ThreadPool;
use super::registry::Registry;
use super::stats::{Reject, Stats};
use super::{ConnGuard, Shared};
use crate::wire::{self, DecodeFrameError, Request, Response, Status};
use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};
use tokio::net::TcpListener;

/// Bytes the read buffer grows by when it is full. Growth follows what actually arrives,
/// never what a length prefix claims, so a hostile prefix cannot make us allocate.
const READ_CHUNK: usize = 64 * 1024;

/// Size of a connection's buffers while its frames are small.
const SMALL_BUF: usize = 8 * 1024;

/// Accepts connections until shutdown starts, then shuts the read side of every open
/// connection: a thread waiting for a request sees end of file and closes; one busy with a
/// request still writes its reply first.
pub(super) async fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    let pool = ThreadPool::new("rpcbench-tcp");
    let open = Arc::new(Registry::<Arc<TcpStream>>::default());
    while let Some((stream, guard)) = shared.next_connection(&listener, |s: &Stats| &s.tcp).await {
        let Ok(stream) = stream.into_std().and_then(|s| {
            s.set_nonblocking(false)?;
            Ok(Arc::new(s))
        }) else {
            shared.stats.reject(Reject::IoError);
            continue;
        };
        let Some(registered) = open.add(stream.clone()) else {
            continue;
        };
        let conn_shared = shared.clone();
        let started = pool.run(move || {
            let (_guard, _registered): (ConnGuard, _) = (guard, registered);
            if let Err(kind) = serve(&stream, &conn_shared) {
                conn_shared.stats.reject(kind);
            }
        });
        if let Err(e) = started {
            tracing::warn!("cannot start a connection thread: {e}");
            shared.stats.reject(Reject::IoError);
        }
    }
    open.close(|stream| {
        let _ = stream.shutdown(Shutdown::Read);
    });
}

/// Serves one connection until the client closes it, it misbehaves, or shutdown starts.
/// Returns the reason it was closed when that reason is worth counting.
fn serve(mut stream: &TcpStream, shared: &Shared) -> Result<(), Reject> {
    let config = &shared.config;
    // Replies are small and latency is the product: never wait for Nagle. A client that
    // sends nothing, or stops reading, must not hold this thread forever.
    let _ = stream.set_nodelay(true);
    let _ = stream.set_read_timeout(Some(config.idle_timeout));
    let _ = stream.set_write_timeout(Some(config.idle_timeout));
    let counters = &shared.stats.tcp;
    let mut inbuf = InBuf::new();
    let mut outbuf = Vec::with_capacity(SMALL_BUF);
    loop {
        // Answer every complete frame we already have.
        loop {
            let req = match wire::decode_frame::<Request>(inbuf.data(), config.max_frame) {
                Ok(Some((req, used))) => {
                    inbuf.consume(used);
                    req
                }
                Ok(None) => break,
                Err(e) => {
                    write_out(stream, &mut outbuf, shared)?;
                    return Err(match e {
                        DecodeFrameError::EmptyFrame => Reject::ZeroLengthFrame,
                        DecodeFrameError::FrameTooLarge { .. } => Reject::OversizedFrame,
                        _ => Reject::MalformedFrame,
                    });
                }
            };
            counters.requests.fetch_add(1, Relaxed);
            let got_it = Instant::now();
            let delay = Duration::from_micros(req.delay_us.into());
            if !delay.is_zero() && delay <= config.max_delay {
                // Earlier pipelined replies should not wait for this one's delay.
                write_out(stream, &mut outbuf, shared)?;
                super::sleep_until_blocking(got_it + delay);
            }
            let resp = answer(req, got_it, shared);
            wire::encode_frame(&resp, &mut outbuf);
        }
        write_out(stream, &mut outbuf, shared)?;
        if *shared.shutdown.borrow() {
            // Between requests: nothing in flight, so shutdown can close us now.
            return Ok(());
        }
        match stream.read(inbuf.spare()) {
            Ok(0) if inbuf.is_empty() || *shared.shutdown.borrow() => return Ok(()),
            Ok(0) => return Err(Reject::TruncatedFrame),
            Ok(n) => {
                inbuf.filled(n);
                counters.bytes_in.fetch_add(n as u64, Relaxed);
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) if is_timeout(&e) => return Err(Reject::IdleTimeout),
            Err(_) => return Err(Reject::IoError),
        }
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
}

impl InBuf {
    fn new() -> Self {
        InBuf {
            buf: vec![0; SMALL_BUF],
            start: 0,
            end: 0,
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
    /// enough. A large frame arriving in pieces is never copied to where it already is.
    fn spare(&mut self) -> &mut [u8] {
        if self.is_empty() {
            (self.start, self.end) = (0, 0);
            // Do not keep a large request's buffer alive for the rest of a long connection.
            if self.buf.len() > READ_CHUNK {
                self.buf.truncate(SMALL_BUF);
                self.buf.shrink_to_fit();
            }
        }
        let low = |b: &Self| b.buf.len() - b.end < SMALL_BUF / 2;
        if low(self) && self.start > 0 {
            self.buf.copy_within(self.start..self.end, 0);
            (self.start, self.end) = (0, self.end - self.start);
        }
        if low(self) {
            self.buf.resize(self.buf.len() + READ_CHUNK, 0);
        }
        &mut self.buf[self.end..]
    }
}

/// Builds the reply to one request: the echo, the pattern, or a status without payload.
fn answer(req: Request, got_it: Instant, shared: &Shared) -> Response {
    let config = &shared.config;
    let status = if u64::from(req.delay_us) > config.max_delay.as_micros() as u64 {
        Status::DelayTooLong
    } else if u64::from(req.reply_len.unwrap_or(req.payload.len() as u32))
        > u64::from(config.max_frame.saturating_sub(wire::RESPONSE_OVERHEAD))
    {
        // An echo counts too: a response carries more header than a request, so the echo
        // of a request of exactly the max frame would not fit in one.
        Status::ReplyTooLarge
    } else {
        Status::Ok
    };
    let payload = match (status, req.reply_len) {
        (Status::Ok, None) => req.payload,
        (Status::Ok, Some(n)) => {
            let mut p = Vec::with_capacity(n as usize);
            wire::pattern(req.seq, n as usize, &mut p);
            p
        }
        (Status::ReplyTooLarge, _) => {
            shared.stats.reject(Reject::ReplyTooLarge);
            Vec::new()
        }
        (Status::DelayTooLong, _) => {
            shared.stats.reject(Reject::DelayTooLong);
            Vec::new()
        }
    };
    Response {
        seq: req.seq,
        status: status as u8,
        server_ns: got_it.elapsed().as_nanos() as u64,
        payload,
    }
}

/// Writes and clears whatever replies are buffered.
fn write_out(mut stream: &TcpStream, out: &mut Vec<u8>, shared: &Shared) -> Result<(), Reject> {
    if out.is_empty() {
        return Ok(());
    }
    match stream.write_all(out) {
        Ok(()) => {}
        Err(e) if is_timeout(&e) => return Err(Reject::IdleTimeout),
        Err(_) => return Err(Reject::IoError),
    }
    shared
        .stats
        .tcp
        .bytes_out
        .fetch_add(out.len() as u64, Relaxed);
    out.clear();
    // Do not keep a large reply's buffer alive for the rest of a long connection.
    if out.capacity() > READ_CHUNK {
        out.shrink_to(READ_CHUNK);
    }
    Ok(())
}
