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
pub(super) mod h3;
mod head;
mod io;
mod lean;
mod params;
pub(super) mod reply;
mod route;
mod rpc;
mod watch;
use head::{H2_PREFACE, HeadEnd, read_head};
use io::{ConnState, CountingIo, Head, HttpIo, InFlight, Sending, count_moved};
use watch::{CloseFlag, CloseReason, Watch, watch};

use super::Shared;
use super::budget::StreamLease;
use super::grpc::{self, Grpc};
use super::registry::Registry;
use super::stats::{ProtoCounters, Reject, Stats};
use http_body_util::Either;
use hyper_util::rt::{TokioExecutor, TokioIo};
use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::task::{Poll, Waker};
use tokio::net::TcpListener;

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
