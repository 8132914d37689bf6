//! HTTP listener (hyper): the life of a connection, from accept to close.
//!
//! HTTP/1.1 with keep-alive, and HTTP/2 with prior knowledge on the same port (hyper-util's
//! auto builder looks at the first bytes). This file accepts connections, serves each on a
//! task of its own, counts their bytes, and closes them when idle too long or when shutdown
//! starts. What a request gets back is decided in [`route`] and written out in [`reply`],
//! as hyper keeps `proto/h1`'s connection, role and encoding apart: each part can then be
//! read, and measured, without the other two.

mod reply;
mod route;

use super::Shared;
use super::registry::Registry;
use super::stats::{Reject, Stats};
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
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
pub(super) const IDLE_CHECKS_PER_TIMEOUT: u32 = 10;

/// Accepts connections until shutdown starts.
pub(super) async fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    let mut builder = auto::Builder::new(TokioExecutor::new());
    // An HTTP/1 client may shut its write side once its request is sent (`nc -N` does, and
    // nginx allows it). Without this, hyper also probes for that end of file while every
    // request is being answered, which re-allocated its 8 KiB read buffer per request.
    //
    // Replies are copied behind their headers and written with one `write` instead of a
    // `writev` of both: for the small replies of RPC tests, hyper's bookkeeping of a
    // vectored write cost more than the copy (callgrind: 8.6k -> 8.1k instructions per
    // 100-byte reply). A 1 MiB reply pays one extra memcpy, within the noise of its
    // millisecond round trip here.
    builder.http1().half_close(true).writev(false);
    let builder = Arc::new(builder);
    let watched = Arc::new(Registry::<Watch>::default());
    tokio::spawn(watch(watched.clone(), shared.clone()));
    while let Some((stream, guard)) = shared.next_connection(&listener, |s: &Stats| &s.http).await {
        let (shared, builder, watched) = (shared.clone(), builder.clone(), watched.clone());
        tokio::spawn(async move {
            let _guard = guard;
            serve(stream, &builder, shared, &watched).await;
        });
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
    /// Checks in a row that saw `moves` unchanged and no request in flight.
    quiet_checks: u32,
}

/// Every tenth of the idle timeout, tells connections quiet for a whole timeout to close;
/// at shutdown, tells every connection.
async fn watch(watched: Arc<Registry<Watch>>, shared: Arc<Shared>) {
    let mut check = tokio::time::interval(shared.config.idle_timeout / IDLE_CHECKS_PER_TIMEOUT);
    let stopping = super::stopping(shared.shutdown.clone());
    tokio::pin!(stopping);
    loop {
        tokio::select! {
            _ = check.tick() => watched.for_each(|w| {
                let now = w.conn.moves.load(Relaxed);
                if now != w.moves_seen || w.conn.in_flight.load(Relaxed) > 0 {
                    (w.moves_seen, w.quiet_checks) = (now, 0);
                } else {
                    w.quiet_checks += 1;
                }
                if w.quiet_checks >= IDLE_CHECKS_PER_TIMEOUT {
                    w.conn.tell_close(CloseReason::Idle);
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
async fn serve(
    stream: TcpStream,
    builder: &auto::Builder<TokioExecutor>,
    shared: Arc<Shared>,
    watched: &Arc<Registry<Watch>>,
) {
    let _ = stream.set_nodelay(true);
    let conn_state = Arc::new(ConnState {
        shared: shared.clone(),
        in_flight: AtomicUsize::new(0),
        moves: AtomicU64::new(0),
        close: CloseFlag::new(),
        waker: Mutex::new(None),
    });
    let io = CountingIo {
        inner: stream,
        state: conn_state.clone(),
    };
    let service = {
        let conn_state = conn_state.clone();
        hyper::service::service_fn(move |req| {
            let state = conn_state.clone();
            async move {
                // A guard, not a decrement after the await: hyper drops this future when
                // an HTTP/2 client cancels the stream, and the count must still go down.
                let _busy = InFlight::enter(&state.in_flight);
                let resp = route::route(req, &state.shared).await;
                Ok::<_, Infallible>(resp)
            }
        })
    };
    // Refused once shutdown has begun: returning closes the connection.
    let Some(_registered) = watched.add(Watch {
        conn: conn_state.clone(),
        moves_seen: 0,
        quiet_checks: 0,
    }) else {
        return;
    };
    let conn = builder.serve_connection(TokioIo::new(io), service);
    tokio::pin!(conn);
    let mut closing = false;
    let mut registered: Option<Waker> = None;
    let res = std::future::poll_fn(|cx| {
        // Hand this task's waker to the watcher before reading `close`: a close told
        // after the read then finds the waker and wakes us.
        if !registered.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
            *conn_state.waker.lock().unwrap_or_else(|e| e.into_inner()) = Some(cx.waker().clone());
            registered = Some(cx.waker().clone());
        }
        if !closing && let Some(why) = conn_state.close.get() {
            if why == CloseReason::Idle {
                shared.stats.reject(Reject::IdleTimeout);
            }
            // Requests in flight finish; an idle keep-alive connection closes now.
            conn.as_mut().graceful_shutdown();
            closing = true;
        }
        conn.as_mut().poll(cx)
    })
    .await;
    // Closing a connection that never sent a byte cancels hyper's protocol detection,
    // which ends in an error; that close was ours, not theirs.
    if res.is_err() && conn_state.close.get().is_none() {
        shared.stats.reject(Reject::HttpConnectionError);
    }
}

/// What the requests of one connection share, and how the watcher reaches it.
struct ConnState {
    shared: Arc<Shared>,
    /// Requests being answered on this connection.
    in_flight: AtomicUsize,
    /// Reads and writes that moved data. Only this connection's task writes it.
    moves: AtomicU64,
    /// Set by the watcher: why the connection should close.
    close: CloseFlag,
    /// The connection task's waker, for the watcher to wake it after setting `close`.
    waker: Mutex<Option<Waker>>,
}

impl ConnState {
    /// Asks the connection to close (the first reason given wins) and wakes its task.
    fn tell_close(&self, why: CloseReason) {
        if self.close.set(why)
            && let Some(waker) = self.waker.lock().unwrap_or_else(|e| e.into_inner()).take()
        {
            waker.wake();
        }
    }
}

/// Counts a request in flight on a connection for as long as it lives.
struct InFlight<'a>(&'a AtomicUsize);

impl InFlight<'_> {
    fn enter(count: &AtomicUsize) -> InFlight<'_> {
        count.fetch_add(1, Relaxed);
        InFlight(count)
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Relaxed);
    }
}

/// A TCP stream that counts bytes for /stats and counts its reads and writes, so the
/// watcher can close the connection after the idle timeout. A count rather than a
/// timestamp: the watcher only needs to know whether anything moved since it last looked,
/// and reading the clock twice per request was a measurable share of the server's time.
struct CountingIo {
    inner: TcpStream,
    state: Arc<ConnState>,
}

impl CountingIo {
    fn moved(&self, n: usize, counter: fn(&Stats) -> &AtomicU64) {
        if n > 0 {
            counter(&self.state.shared.stats).fetch_add(n as u64, Relaxed);
            let moves = &self.state.moves;
            moves.store(moves.load(Relaxed).wrapping_add(1), Relaxed);
        }
    }
}

impl AsyncRead for CountingIo {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let res = Pin::new(&mut self.inner).poll_read(cx, buf);
        let n = buf.filled().len() - before;
        self.moved(n, |s| &s.http.bytes_in);
        res
    }
}

impl AsyncWrite for CountingIo {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let res = Pin::new(&mut self.inner).poll_write(cx, buf);
        if let Poll::Ready(Ok(n)) = res {
            self.moved(n, |s| &s.http.bytes_out);
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
            self.moved(n, |s| &s.http.bytes_out);
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
