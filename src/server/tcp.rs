//! Raw TCP listener: reads length-prefixed postcard requests, writes responses in order.
//!
//! Every complete frame already buffered is answered before the replies are written in one
//! `write_all`, so pipelined requests cost one write per batch instead of one per reply.

use super::Shared;
use super::stats::{Reject, Stats};
use crate::wire::{self, DecodeFrameError, LEN_PREFIX, Request, Response, Status};
use bytes::{Buf, BytesMut};
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// Bytes the read buffer grows by when it is full. Growth follows what actually arrives,
/// never what a length prefix claims, so a hostile prefix cannot make us allocate.
const READ_CHUNK: usize = 64 * 1024;

/// Accepts connections until shutdown starts.
pub(super) async fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    while let Some((stream, guard)) = shared.next_connection(&listener, |s: &Stats| &s.tcp).await {
        let shared = shared.clone();
        tokio::spawn(async move {
            let _guard = guard;
            if let Err(kind) = serve(stream, &shared).await {
                shared.stats.reject(kind);
            }
        });
    }
}

/// Serves one connection until the client closes it, it misbehaves, or shutdown starts.
/// Returns the reason it was closed when that reason is worth counting.
async fn serve(mut stream: TcpStream, shared: &Shared) -> Result<(), Reject> {
    // Replies are small and latency is the product: never wait for Nagle.
    let _ = stream.set_nodelay(true);
    let config = &shared.config;
    let counters = &shared.stats.tcp;
    let shutdown = shared.shutdown.clone();
    let mut inbuf = BytesMut::with_capacity(8 * 1024);
    let mut outbuf = Vec::with_capacity(8 * 1024);
    loop {
        // Answer every complete frame we already have.
        loop {
            let req = match wire::decode_frame::<Request>(&inbuf, config.max_frame) {
                Ok(Some((req, used))) => {
                    inbuf.advance(used);
                    req
                }
                Ok(None) => break,
                Err(e) => {
                    write_out(&mut stream, &mut outbuf, shared).await?;
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
                write_out(&mut stream, &mut outbuf, shared).await?;
                super::sleep_until(got_it + delay).await;
            }
            let resp = answer(req, got_it, shared);
            wire::encode_frame(&resp, &mut outbuf);
        }
        write_out(&mut stream, &mut outbuf, shared).await?;
        if *shutdown.borrow() {
            return Ok(());
        }
        if inbuf.capacity() - inbuf.len() < LEN_PREFIX {
            inbuf.reserve(READ_CHUNK);
        }
        let read = tokio::select! {
            read = tokio::time::timeout(config.idle_timeout, stream.read_buf(&mut inbuf)) => read,
            // Between requests: nothing in flight, so shutdown can close us now.
            _ = super::stopping(shutdown.clone()), if inbuf.is_empty() => return Ok(()),
        };
        match read {
            Err(_elapsed) => return Err(Reject::IdleTimeout),
            Ok(Err(_)) => return Err(Reject::IoError),
            Ok(Ok(0)) if inbuf.is_empty() => return Ok(()),
            Ok(Ok(0)) => return Err(Reject::TruncatedFrame),
            Ok(Ok(n)) => {
                counters.bytes_in.fetch_add(n as u64, Relaxed);
            }
        }
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
async fn write_out(
    stream: &mut TcpStream,
    out: &mut Vec<u8>,
    shared: &Shared,
) -> Result<(), Reject> {
    if out.is_empty() {
        return Ok(());
    }
    // A client that stops reading must not pin this task forever.
    match tokio::time::timeout(shared.config.idle_timeout, stream.write_all(out)).await {
        Ok(Ok(())) => {}
        Ok(Err(_)) => return Err(Reject::IoError),
        Err(_elapsed) => return Err(Reject::IdleTimeout),
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
