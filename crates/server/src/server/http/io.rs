//! The sockets HTTP is served on ([`HttpIo`]: plain TCP and TLS), and what wraps them for
//! one connection: its state, the calls in flight, the bodies being sent, and the byte counts.

use super::super::Shared;
use super::super::budget::{ConnShare, StreamLease};
use super::super::stats::{ProtoCounters, Reject, Stats};
use super::{CloseFlag, CloseReason};
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

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

/// What the requests of one connection share, and how the watcher reaches it.
pub(super) struct ConnState {
    /// The listener's counters (`http` or `https`), where its bytes are counted.
    pub(super) counters: fn(&Stats) -> &ProtoCounters,
    /// What this connection's requests may hold of the buffer budget together.
    pub(super) share: Arc<ConnShare>,
    pub(super) shared: Arc<Shared>,
    /// Requests being answered on this connection.
    pub(super) in_flight: AtomicUsize,
    /// Reads and writes that moved data. Only this connection's task writes it.
    pub(super) moves: AtomicU64,
    /// Reply bodies handed to hyper and not yet all taken from (or dropped).
    pub(super) sending: AtomicUsize,
    /// Reply body bytes hyper has taken: it takes more only as the client reads (HTTP/1.1)
    /// or opens its window (HTTP/2), so an unchanged count with a reply waiting is a
    /// client that takes nothing.
    pub(super) taken: AtomicU64,
    /// Set by the watcher: why the connection should close.
    pub(super) close: CloseFlag,
    /// The connection task's waker, for the watcher to wake it after setting `close`.
    pub(super) waker: Mutex<Option<Waker>>,
}

impl ConnState {
    /// A new connection's state, counted under `counters`, with its share of the budget.
    pub(super) fn new(
        shared: &Arc<Shared>,
        counters: fn(&Stats) -> &ProtoCounters,
    ) -> Arc<ConnState> {
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
    pub(super) fn close_told(
        &self,
        cx: &Context<'_>,
        registered: &mut Option<Waker>,
    ) -> Option<CloseReason> {
        if !registered.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
            *self.waker.lock().unwrap_or_else(|e| e.into_inner()) = Some(cx.waker().clone());
            *registered = Some(cx.waker().clone());
        }
        self.close.get()
    }

    /// Asks the connection to close (the first reason given wins) and wakes its task.
    pub(super) fn tell_close(&self, why: CloseReason) {
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
pub(super) struct InFlight<'a> {
    pub(super) conn: &'a ConnState,
    pub(super) http2: bool,
    /// Set once the reply is ready.
    pub(super) answered: bool,
}

impl InFlight<'_> {
    pub(super) fn enter(conn: &ConnState, http2: bool) -> InFlight<'_> {
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
pub(super) struct Sending<B> {
    pub(super) inner: B,
    pub(super) conn: Arc<ConnState>,
    /// Counted in `sending`: the body had something ready when last asked (or has not
    /// been asked yet).
    pub(super) ready: bool,
    /// An HTTP/2 stream's share of the budget, given back when the stream is done.
    pub(super) _stream: Option<StreamLease>,
}

impl<B> Sending<B> {
    pub(super) fn new(inner: B, conn: &Arc<ConnState>) -> Sending<B> {
        conn.sending.fetch_add(1, Relaxed);
        Sending {
            inner,
            conn: conn.clone(),
            ready: true,
            _stream: None,
        }
    }

    /// Keeps `stream`, the lease of the stream this body answers, until it is dropped.
    pub(super) fn holding(mut self, stream: Option<StreamLease>) -> Sending<B> {
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
pub(super) struct CountingIo<S> {
    pub(super) inner: S,
    pub(super) state: Arc<ConnState>,
    pub(super) head: Head,
}

/// The bytes read before hyper took over, given to hyper before anything more is read
/// from the socket. Freed once hyper has taken them all.
#[derive(Default)]
pub(super) struct Head {
    pub(super) bytes: Vec<u8>,
    /// How many of `bytes` hyper has taken.
    pub(super) taken: usize,
}

impl<S> CountingIo<S> {
    fn moved(&self, n: usize, counter: fn(&ProtoCounters) -> &AtomicU64) {
        count_moved(&self.state, n, counter);
    }
}

/// Counts `n` bytes moved on a connection in `counter` and, when there were any, one move
/// for the idle watcher.
pub(super) fn count_moved(state: &ConnState, n: usize, counter: fn(&ProtoCounters) -> &AtomicU64) {
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
