//! What the transports whose workers share one connection (`h2-mux`, `grpc-mux`) have in
//! common: the run's one connection in a slot with a generation, opened by whichever
//! worker finds the slot empty (under a lock, so that workers arriving together open one
//! connection, not one each), and dropped only by a worker whose call failed on that very
//! generation; for the blocking engine, the one runtime thread that drives it; and the
//! worker's handle ([`MuxHandle`]), whose calls are streams on the run's [`MuxWire`]. What
//! a call asks and how its reply is read is the transport's own ([`MuxProtocol`]): HTTP/2's
//! `POST /echo` for `h2-mux`, gRPC's unary `Call` for `grpc-mux`, on the same frame layer.

use super::h2::open_stream;
use super::h2_mux_wire::{Done, MuxWire, Request, Target};
use super::{
    AsyncTransport, Call, CallError, CallTimer, Counts, Endpoint, Facts, OpenTransportError,
    Phases, Reply, Transport, remaining,
};
use std::cell::Cell;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

/// A run's one shared connection (or channel) `C`, kept in the run's
/// [`RunShared`](super::RunShared).
pub(super) struct Shared<C> {
    /// One worker thread for the blocking engine: it runs the connection's task while
    /// the workers' own threads block on it for their calls. Built on first use, so a run
    /// on the event loop (or of another transport) pays nothing.
    rt: OnceLock<Result<tokio::runtime::Runtime, String>>,
    /// The live connection and its generation.
    slot: tokio::sync::Mutex<Option<(C, u64)>>,
    /// The generation the next connection gets: a counter, not the slot's last value
    /// plus one, since a forgotten slot is empty and a new connection must not get the
    /// generation another worker is about to forget.
    next: AtomicU64,
}

impl<C> Default for Shared<C> {
    fn default() -> Self {
        Shared {
            rt: OnceLock::new(),
            slot: tokio::sync::Mutex::new(None),
            next: AtomicU64::new(0),
        }
    }
}

impl<C: Clone> Shared<C> {
    /// The blocking engine's runtime for this connection, its thread named `name`.
    pub(super) fn runtime(&self, name: &str) -> Result<&tokio::runtime::Runtime, CallError> {
        self.rt
            .get_or_init(|| {
                tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(1)
                    .thread_name(name)
                    .enable_all()
                    .build()
                    .map_err(|e| e.to_string())
            })
            .as_ref()
            .map_err(|_| CallError::Io)
    }

    /// A clone of the live connection and its generation, or a new one from `open` when
    /// the slot is empty or `live` says its connection has gone. `open` runs under the
    /// lock, on the runtime this runs on.
    pub(super) async fn get(
        &self,
        live: impl FnOnce(&C) -> bool,
        open: impl AsyncFnOnce() -> Result<C, CallError>,
    ) -> Result<(C, u64), CallError> {
        let mut slot = self.slot.lock().await;
        if let Some((c, g)) = &*slot
            && live(c)
        {
            return Ok((c.clone(), *g));
        }
        // Boxed: opening (lookup, connect, TLS) is a future of kilobytes, which every
        // call's future would otherwise carry, and move, on every call.
        let c = Box::pin(open()).await?;
        let generation = self.next.fetch_add(1, Relaxed);
        *slot = Some((c.clone(), generation));
        Ok((c, generation))
    }

    /// Drops the connection if it is still generation `failed`, the one a worker's call
    /// failed on; another worker may already have opened a new one.
    pub(super) async fn forget(&self, failed: u64) {
        Self::forget_in(&mut *self.slot.lock().await, failed);
    }

    /// As [`Shared::forget`], without waiting: for an event-loop task's `reset`. The lock
    /// is busy only while another task opens a new connection, whose generation must stay.
    pub(super) fn try_forget(&self, failed: u64) {
        if let Ok(mut slot) = self.slot.try_lock() {
            Self::forget_in(&mut slot, failed);
        }
    }

    fn forget_in(slot: &mut Option<(C, u64)>, failed: u64) {
        if slot.as_ref().is_some_and(|(_, g)| *g == failed) {
            *slot = None;
        }
    }
}

/// Looks the HTTP port's address up on a blocking thread: the resolver blocks on a
/// runtime of its own, which must not start inside the one a shared connection's opener
/// runs on. Its time goes to the call's `dns` phase.
pub(super) async fn http_addr(
    endpoint: &Endpoint,
    deadline: Instant,
    phases: &mut Phases,
) -> Result<SocketAddr, CallError> {
    let ep = endpoint.clone();
    let (addr, dns) = tokio::task::spawn_blocking(move || {
        let mut looked = Phases::default();
        ep.http_addr(deadline, &mut looked).map(|a| (a, looked.dns))
    })
    .await
    .map_err(|_| CallError::Io)??;
    phases.dns = dns;
    Ok(addr)
}

/// What a call on the shared connection asks and how its reply is read: the part of a
/// shared-connection transport that is its own.
pub(super) trait MuxProtocol: Default + Send + 'static {
    /// The transport's answers ([`Transport::FACTS`]).
    const FACTS: Facts;

    /// The blocking engine's connection thread.
    const THREAD: &'static str;

    /// The request of `call`.
    fn request(&mut self, call: &Call<'_>) -> Result<Request, CallError>;

    /// The call's reply from its finished stream, kept in `self` until the next call.
    fn reply(&mut self, done: Done) -> Result<Reply<'_>, CallError>;

    /// The buffer the next reply is read into (the last reply's, cleared by the wire).
    fn recycle(&mut self) -> Vec<u8>;
}

/// One worker's (or event-loop task's) handle on the run's shared connection, and what
/// its calls need, whichever engine runs them.
pub(super) struct MuxHandle<P> {
    shared: Arc<Shared<Arc<MuxWire>>>,
    endpoint: Endpoint,
    timeout: Duration,
    /// The connection's `:authority` (`host:port`).
    authority: bytes::Bytes,
    /// The last reply.
    protocol: P,
    /// Connections this worker opened (the first call of the run opens it).
    connects: u64,
    /// The generation of the connection this worker's last call used.
    used: Option<u64>,
}

impl<P: MuxProtocol> MuxHandle<P> {
    pub(super) fn new(endpoint: Endpoint, timeout: Duration) -> MuxHandle<P> {
        MuxHandle {
            // Keyed by the protocol: an h2-mux and a grpc-mux run never share a wire.
            shared: endpoint.shared.get::<MuxSlot<P>>().slot.clone(),
            authority: super::h2::authority(&endpoint).into(),
            endpoint,
            timeout,
            protocol: P::default(),
            connects: 0,
            used: None,
        }
    }

    /// Makes the call as a new stream on the shared connection, opening it if need be.
    async fn exchange(
        &mut self,
        call: &Call<'_>,
        deadline: Instant,
        phases: &mut Phases,
        connecting: &Cell<bool>,
    ) -> Result<Reply<'_>, CallError> {
        let req = self.protocol.request(call)?;
        let MuxHandle {
            shared,
            endpoint,
            authority,
            connects,
            ..
        } = self;
        let (wire, generation) = shared
            .get(
                |wire| wire.usable(),
                async || {
                    connecting.set(true);
                    let addr = http_addr(endpoint, deadline, phases).await?;
                    let (sock, took) = open_stream(addr, deadline, endpoint).await?;
                    let origin = Target {
                        scheme: endpoint.scheme(),
                        authority: authority.clone(),
                    };
                    let wire = MuxWire::open(sock, Arc::default(), origin).await?;
                    connecting.set(false);
                    *connects += 1;
                    took.record(phases);
                    Ok(wire)
                },
            )
            .await?;
        self.used = Some(generation);
        let done = wire.call(req, self.protocol.recycle()).await?;
        phases.first_byte = done.first_byte;
        self.protocol.reply(done)
    }

    /// One call on the blocking engine: the worker blocks on the connection's runtime.
    pub(super) fn call_blocking(
        &mut self,
        call: &Call<'_>,
        phases: &mut Phases,
    ) -> Result<Reply<'_>, CallError> {
        let deadline = Instant::now() + self.timeout;
        let shared = self.shared.clone();
        let connecting = Cell::new(false);
        shared.runtime(P::THREAD)?.block_on(super::within(
            remaining(deadline)?,
            &connecting,
            self.exchange(call, deadline, phases, &connecting),
        ))
    }

    /// One call on the event loop, timed by the task's `timer`.
    pub(super) async fn call_async(
        &mut self,
        timer: &mut CallTimer,
        call: &Call<'_>,
        phases: &mut Phases,
    ) -> Result<Reply<'_>, CallError> {
        let deadline = Instant::now() + self.timeout;
        let connecting = Cell::new(false);
        timer
            .within(
                deadline,
                &connecting,
                self.exchange(call, deadline, phases, &connecting),
            )
            .await
    }

    /// After a failed call on the blocking engine: drops the connection if it is still
    /// the one the call failed on.
    pub(super) fn reset_blocking(&mut self) {
        let Some(failed) = self.used.take() else {
            return;
        };
        if let Ok(rt) = self.shared.runtime(P::THREAD) {
            rt.block_on(self.shared.forget(failed));
        }
    }

    /// As [`MuxHandle::reset_blocking`], on the event loop.
    pub(super) fn reset_async(&mut self) {
        if let Some(failed) = self.used.take() {
            self.shared.try_forget(failed);
        }
    }

    /// Connections this worker opened.
    pub(super) fn connects(&self) -> u64 {
        self.connects
    }
}

/// The run's shared connection of one protocol, as [`RunShared`](super::RunShared)
/// keeps it (by type, so each protocol has its own).
struct MuxSlot<P> {
    slot: Arc<Shared<Arc<MuxWire>>>,
    _protocol: std::marker::PhantomData<fn() -> P>,
}

impl<P> Default for MuxSlot<P> {
    fn default() -> Self {
        MuxSlot {
            slot: Arc::default(),
            _protocol: std::marker::PhantomData,
        }
    }
}

/// A shared-connection transport on the blocking engine: the worker blocks on the
/// connection's runtime thread for each call. `h2-mux` and `grpc-mux` are this, each with
/// its own protocol.
pub(super) struct BlockingMux<P>(MuxHandle<P>);

impl<P: MuxProtocol> Transport for BlockingMux<P> {
    const FACTS: Facts = P::FACTS;

    fn open(endpoint: Endpoint, timeout: Duration) -> Result<Self, OpenTransportError> {
        Ok(BlockingMux(MuxHandle::new(endpoint, timeout)))
    }

    fn call(&mut self, call: &Call, phases: &mut Phases) -> Result<Reply<'_>, CallError> {
        self.0.call_blocking(call, phases)
    }

    fn reset(&mut self) {
        self.0.reset_blocking();
    }

    fn counts(&self) -> Counts {
        Counts::connects(self.0.connects())
    }
}

/// A shared-connection transport on the event loop: every task of the run's one loop
/// makes its calls as streams on the shared connection, whose task runs on the same loop.
pub(super) struct AsyncMux<P> {
    /// The timer of this task's calls.
    timer: CallTimer,
    handle: MuxHandle<P>,
}

impl<P: MuxProtocol> AsyncTransport for AsyncMux<P> {
    fn open(endpoint: Endpoint, timeout: Duration) -> Self {
        AsyncMux {
            timer: CallTimer::default(),
            handle: MuxHandle::new(endpoint, timeout),
        }
    }

    async fn call(&mut self, call: &Call<'_>, phases: &mut Phases) -> Result<Reply<'_>, CallError> {
        self.handle.call_async(&mut self.timer, call, phases).await
    }

    fn reset(&mut self) {
        self.handle.reset_async();
    }

    fn counts(&self) -> Counts {
        Counts::connects(self.handle.connects())
    }
}
