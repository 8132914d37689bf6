//! `tcp`: one persistent TCP connection per worker, length-prefixed postcard frames.
//!
//! Also home of [`FrameConn`], the blocking frame exchange that `tcp-connect` reuses.

use super::{Port, Call, CallError, Endpoint, Phases, Reply, Transport, remaining};
use crate::wire::{self, LEN_PREFIX, Request, ResponseRef, Status};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// Initial receive buffer; it grows to the largest reply seen.
const INITIAL_BUFFER: usize = 16 * 1024;

/// A connected socket that sends request frames and reads response frames, blocking.
pub(super) struct FrameConn {
    stream: TcpStream,
    /// Received bytes not yet consumed live in `inbuf[start..end]`.
    inbuf: Vec<u8>,
    start: usize,
    end: usize,
    outbuf: Vec<u8>,
    /// The receive timeout currently set on the socket, to skip redundant setsockopt calls.
    rcv_timeout: Option<Duration>,
}

impl FrameConn {
    /// Connects with a timeout and turns Nagle off. Returns the connection and the time
    /// connect took.
    pub fn connect(
        addr: std::net::SocketAddr,
        timeout: Duration,
    ) -> Result<(FrameConn, Duration), CallError> {
        let started = Instant::now();
        let stream =
            TcpStream::connect_timeout(&addr, timeout).map_err(|e| CallError::from_connect(&e))?;
        let took = started.elapsed();
        stream
            .set_nodelay(true)
            .map_err(|e| CallError::from_io(&e))?;
        stream
            .set_write_timeout(Some(timeout))
            .map_err(|e| CallError::from_io(&e))?;
        Ok((
            FrameConn {
                stream,
                inbuf: vec![0; INITIAL_BUFFER],
                start: 0,
                end: 0,
                outbuf: Vec::with_capacity(INITIAL_BUFFER),
                rcv_timeout: None,
            },
            took,
        ))
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
        self.outbuf.clear();
        wire::encode_frame(
            &RequestRef {
                seq: call.seq,
                reply_len: call.reply_len,
                delay_us: call.delay_us,
                payload: call.payload,
            },
            &mut self.outbuf,
        );
        let sent = Instant::now();
        self.stream
            .write_all(&self.outbuf)
            .map_err(|e| CallError::from_io(&e))?;
        let mut first = true;
        let body = loop {
            let body = self.next_frame(deadline, &mut first, sent, phases)?;
            let resp: ResponseRef =
                wire::decode_body(&self.inbuf[body.clone()]).map_err(|_| CallError::Protocol)?;
            // Our seqs only grow, so an older one is a reply we already had.
            if resp.seq >= call.seq {
                break body;
            }
            *duplicates += 1;
        };
        // Decoded again (headers only; the payload is borrowed) so the returned reply can
        // borrow the buffer: the borrow checker cannot see that the loop above has ended.
        let resp: ResponseRef =
            wire::decode_body(&self.inbuf[body]).map_err(|_| CallError::Protocol)?;
        if resp.status != Status::Ok as u8 {
            return Err(CallError::FrameStatus(resp.status));
        }
        Ok(Reply {
            seq: Some(resp.seq),
            body: resp.payload,
            server: Some(Duration::from_nanos(resp.server_ns)),
        })
    }

    /// Reads until a whole frame is buffered; returns the range of its body and consumes it.
    fn next_frame(
        &mut self,
        deadline: Instant,
        first: &mut bool,
        sent: Instant,
        phases: &mut Phases,
    ) -> Result<std::ops::Range<usize>, CallError> {
        loop {
            let have = &self.inbuf[self.start..self.end];
            if let Some(prefix) = have.first_chunk::<LEN_PREFIX>() {
                let len = wire::check_len(*prefix, wire::DEFAULT_MAX_FRAME)
                    .map_err(|_| CallError::Protocol)?;
                if have.len() >= LEN_PREFIX + len {
                    let body = self.start + LEN_PREFIX..self.start + LEN_PREFIX + len;
                    self.start = body.end;
                    return Ok(body);
                }
                // Make room for the whole frame: move what we have to the front, then grow.
                if self.inbuf.len() - self.start < LEN_PREFIX + len {
                    self.inbuf.copy_within(self.start..self.end, 0);
                    self.end -= self.start;
                    self.start = 0;
                    if self.inbuf.len() < LEN_PREFIX + len {
                        self.inbuf.resize(LEN_PREFIX + len, 0);
                    }
                }
            } else if self.start == self.end {
                self.start = 0;
                self.end = 0;
            } else if self.inbuf.len() - self.start < LEN_PREFIX {
                self.inbuf.copy_within(self.start..self.end, 0);
                self.end -= self.start;
                self.start = 0;
            }
            let left = remaining(deadline)?;
            // One setsockopt per call at most in the common case: the first read of a call
            // waits the whole timeout, which is what is already set.
            if self.rcv_timeout != Some(left)
                && (!*first || self.rcv_timeout.is_none_or(|t| t > left))
            {
                self.stream
                    .set_read_timeout(Some(left))
                    .map_err(|e| CallError::from_io(&e))?;
                self.rcv_timeout = Some(left);
            }
            let n = self
                .stream
                .read(&mut self.inbuf[self.end..])
                .map_err(|e| CallError::from_io(&e))?;
            if n == 0 {
                return Err(CallError::Closed);
            }
            if *first {
                phases.first_byte = Some(sent.elapsed());
                *first = false;
            }
            self.end += n;
        }
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

/// The `tcp` transport.
pub struct Tcp {
    endpoint: Endpoint,
    timeout: Duration,
    conn: Option<FrameConn>,
    connects: u64,
    duplicates: u64,
}


impl Transport for Tcp {
    const PERSISTENT: bool = true;
    const PORT: Port = Port::Tcp;

    fn open(endpoint: Endpoint, timeout: Duration) -> Tcp {
        Tcp {
            endpoint,
            timeout,
            conn: None,
            connects: 0,
            duplicates: 0,
        }
    }

    fn call(&mut self, call: &Call, phases: &mut Phases) -> Result<Reply<'_>, CallError> {
        let deadline = Instant::now() + self.timeout;
        let conn = match &mut self.conn {
            Some(conn) => conn,
            slot @ None => {
                let addr = self.endpoint.tcp_addr(deadline, phases)?;
                let (conn, took) = FrameConn::connect(addr, remaining(deadline)?)?;
                self.connects += 1;
                phases.connect = Some(took);
                slot.insert(conn)
            }
        };
        conn.exchange(call, deadline, phases, &mut self.duplicates)
    }

    fn reset(&mut self) {
        self.conn = None;
    }

    fn connects(&self) -> u64 {
        self.connects
    }

    fn duplicates(&self) -> u64 {
        self.duplicates
    }
}
