//! `h2-mux`: every worker of a run shares one HTTP/2 connection (prior knowledge), each
//! call a stream of its own, so `-c 64` means 64 streams in flight on 1 connection. This
//! is how gRPC channels and HTTP/2 service meshes carry an internal service's calls, and
//! what it buys (one handshake, one socket) or costs (one connection's ordering and flow
//! control for everyone) is what the comparison with `h2` and `http-keepalive` shows.
//!
//! The connection lives in the run's [`RunShared`](super::RunShared). On the event loop
//! (the engine a shared transport gets whenever it has more than one worker) the run has
//! one loop thread, as h2load drives one connection from one thread: the connection's
//! task and every stream's task run there, and a call costs no thread switch. On the
//! blocking engine (one worker, or `--engine blocking`) the connection gets a runtime of
//! its own, one thread that drives it for all workers, and each worker blocks on that
//! runtime for its call. Either way, the worker whose call opened the connection counts
//! the connect.

use super::h2::{Ended, Sender, connect, origin, request, send};
use super::{
    AsyncTransport, Call, CallError, CallTimer, Endpoint, OpenTransportError, Phases, Port, Reply,
    Transport, remaining,
};
use std::cell::Cell;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The one connection of a run, and (for the blocking engine) the thread that drives it.
pub struct MuxConn {
    /// One worker thread for the blocking engine: it runs the connection task; the
    /// workers' own threads run their requests. Built on first use, so a run on the event
    /// loop (or of another transport) pays nothing.
    rt: std::sync::OnceLock<Result<tokio::runtime::Runtime, String>>,
    /// The live connection and its generation (bumped on every new connection), so that
    /// a worker whose call failed drops only the connection it saw fail.
    conn: tokio::sync::Mutex<Option<(Sender, Ended, u64)>>,
}

impl Default for MuxConn {
    fn default() -> Self {
        MuxConn {
            rt: std::sync::OnceLock::new(),
            conn: tokio::sync::Mutex::new(None),
        }
    }
}

impl MuxConn {
    fn runtime(&self) -> Result<&tokio::runtime::Runtime, CallError> {
        self.rt
            .get_or_init(|| {
                tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(1)
                    .thread_name("rpcbench-h2-mux")
                    .enable_all()
                    .build()
                    .map_err(|e| e.to_string())
            })
            .as_ref()
            .map_err(|_| CallError::Io)
    }

    /// A clone of the live connection's handle and its generation, or a new connection:
    /// under the lock, so that workers arriving together open one connection, not one
    /// each. A new connection's task is spawned on the runtime this runs on.
    async fn sender(
        &self,
        endpoint: &Endpoint,
        deadline: Instant,
        phases: &mut Phases,
        connects: &mut u64,
        connecting: &Cell<bool>,
    ) -> Result<(Sender, u64), CallError> {
        let mut slot = self.conn.lock().await;
        if let Some((s, ended, g)) = &*slot
            && !ended.get()
        {
            return Ok((s.clone(), *g));
        }
        connecting.set(true);
        // Boxed: the opening future (lookup, connect, TLS) is kilobytes, and a call's
        // future would otherwise carry, and move, all of it on every call.
        let (s, ended, took) = Box::pin(async {
            // The lookup blocks on a runtime of its own, which must not start inside this
            // one: it runs on a blocking thread.
            let ep = endpoint.clone();
            let (addr, dns) = tokio::task::spawn_blocking(move || {
                let mut looked = Phases::default();
                ep.http_addr(deadline, &mut looked).map(|a| (a, looked.dns))
            })
            .await
            .map_err(|_| CallError::Io)??;
            phases.dns = dns;
            connect(addr, deadline, endpoint).await
        })
        .await?;
        connecting.set(false);
        *connects += 1;
        took.record(phases);
        let generation = slot.as_ref().map_or(0, |(_, _, g)| g + 1);
        *slot = Some((s.clone(), ended, generation));
        Ok((s, generation))
    }

    /// Drops the shared connection if it is still generation `failed`, the one a worker's
    /// call failed on; another worker may already have opened a new one.
    async fn forget(&self, failed: u64) {
        let mut slot = self.conn.lock().await;
        if slot.as_ref().is_some_and(|(_, _, g)| *g == failed) {
            *slot = None;
        }
    }
}

/// One worker's (or event-loop task's) handle on the run's shared connection, and what
/// its calls need, whichever engine runs them.
struct MuxHandle {
    shared: Arc<MuxConn>,
    endpoint: Endpoint,
    timeout: Duration,
    origin: String,
    /// The last reply's body.
    body: Vec<u8>,
    /// Connections this worker opened (the first call of the run opens it).
    connects: u64,
    /// The generation of the connection this worker's last call used.
    used: Option<u64>,
}

impl MuxHandle {
    fn new(endpoint: Endpoint, timeout: Duration) -> MuxHandle {
        MuxHandle {
            shared: endpoint.shared.get::<MuxConn>(),
            origin: origin(&endpoint),
            endpoint,
            timeout,
            body: Vec::new(),
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
        let req = request(&self.origin, call)?;
        let (mut sender, generation) = self
            .shared
            .sender(
                &self.endpoint,
                deadline,
                phases,
                &mut self.connects,
                connecting,
            )
            .await?;
        self.used = Some(generation);
        let (seq, server) = send(&mut sender, req, &mut self.body, phases).await?;
        Ok(Reply {
            seq,
            body: &self.body,
            server,
        })
    }
}

/// The `h2-mux` transport on the blocking engine.
pub struct H2Mux(MuxHandle);

impl Transport for H2Mux {
    const PERSISTENT: bool = true;
    /// One connection for the whole run: `connects` is 1 on a healthy run, whatever `-c`.
    const SHARED: bool = true;
    const PORT: Port = Port::Http;

    fn open(endpoint: Endpoint, timeout: Duration) -> Result<H2Mux, OpenTransportError> {
        Ok(H2Mux(MuxHandle::new(endpoint, timeout)))
    }

    fn call(&mut self, call: &Call, phases: &mut Phases) -> Result<Reply<'_>, CallError> {
        let handle = &mut self.0;
        let deadline = Instant::now() + handle.timeout;
        let shared = handle.shared.clone();
        let connecting = Cell::new(false);
        shared.runtime()?.block_on(super::within(
            remaining(deadline)?,
            &connecting,
            handle.exchange(call, deadline, phases, &connecting),
        ))
    }

    fn reset(&mut self) {
        let Some(failed) = self.0.used.take() else {
            return;
        };
        if let Ok(rt) = self.0.shared.runtime() {
            rt.block_on(self.0.shared.forget(failed));
        }
    }

    fn connects(&self) -> u64 {
        self.0.connects
    }
}

/// The `h2-mux` transport on the event loop: every task of the run's one loop makes its
/// calls as streams on the shared connection, whose task runs on the same loop.
pub struct AsyncH2Mux {
    /// The timer of this task's calls.
    timer: CallTimer,
    handle: MuxHandle,
}

impl AsyncTransport for AsyncH2Mux {
    fn open(endpoint: Endpoint, timeout: Duration) -> AsyncH2Mux {
        AsyncH2Mux {
            timer: CallTimer::default(),
            handle: MuxHandle::new(endpoint, timeout),
        }
    }

    async fn call(
        &mut self,
        call: &Call<'_>,
        phases: &mut Phases,
    ) -> Result<Reply<'_>, CallError> {
        let AsyncH2Mux { timer, handle } = self;
        let deadline = Instant::now() + handle.timeout;
        let connecting = Cell::new(false);
        timer
            .within(
                deadline,
                &connecting,
                handle.exchange(call, deadline, phases, &connecting),
            )
            .await
    }

    fn reset(&mut self) {
        // No await here: the lock is free unless another task is opening a connection,
        // and then the slot holds a new generation anyway, which must stay.
        let Some(failed) = self.handle.used.take() else {
            return;
        };
        if let Ok(mut slot) = self.handle.shared.conn.try_lock()
            && slot.as_ref().is_some_and(|(_, _, g)| *g == failed)
        {
            *slot = None;
        }
    }

    fn connects(&self) -> u64 {
        self.handle.connects
    }
}
