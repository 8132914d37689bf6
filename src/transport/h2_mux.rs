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
//!
//! The connection is [`MuxWire`]: the frame layer of the `h2` crate driven by a task of
//! rpcbench's own, which reads and writes for every stream in one pass.

use super::h2::{Origin, echo_request, open_stream};
use super::h2_mux_wire::MuxWire;
use super::http;
use super::mux::{self, Shared};
use super::{
    AsyncTransport, Call, CallError, CallTimer, Endpoint, Facts, OpenTransportError, Phases, Port,
    Reply, Transport, TransportKind, remaining,
};
use std::cell::Cell;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The one connection of a run: opened anew before the next call, rather than failing it,
/// once it has ended or taken a GOAWAY.
pub type MuxConn = Shared<Arc<MuxWire>>;

/// The blocking engine's connection thread.
const THREAD: &str = "rpcbench-h2-mux";

/// One worker's (or event-loop task's) handle on the run's shared connection, and what
/// its calls need, whichever engine runs them.
struct MuxHandle {
    shared: Arc<MuxConn>,
    endpoint: Endpoint,
    timeout: Duration,
    /// Where every request's URI starts.
    origin: Origin,
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
            origin: Origin::new(&endpoint),
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
        let req = echo_request(&mut self.origin, call)?;
        let MuxHandle {
            shared,
            endpoint,
            connects,
            ..
        } = self;
        let (wire, generation) = shared
            .get(
                |wire| wire.usable(),
                async || {
                    connecting.set(true);
                    let addr = mux::http_addr(endpoint, deadline, phases).await?;
                    let (sock, took) = open_stream(addr, deadline, endpoint).await?;
                    let wire = MuxWire::open(sock, Arc::default()).await?;
                    connecting.set(false);
                    *connects += 1;
                    took.record(phases);
                    Ok(wire)
                },
            )
            .await?;
        self.used = Some(generation);
        let done = wire.call(req, std::mem::take(&mut self.body)).await?;
        phases.first_byte = done.first_byte;
        self.body = done.body;
        Ok(Reply {
            seq: http::header_seq(&done.replied.head),
            body: &self.body,
            server: http::server_timing(&done.replied.head),
        })
    }
}

/// The `h2-mux` transport on the blocking engine.
pub struct H2Mux(MuxHandle);

impl Transport for H2Mux {
    const FACTS: Facts = Facts {
        summary: "HTTP/2 with every worker sharing one connection, each call a concurrent stream: `-c 64` is 64 streams on 1 connection, and `connects` is 1; the connection is driven by a task of its own on the `h2` crate's frame layer (`src/transport/h2_mux_wire.rs`), which reads every stream's frames and writes every ready request in one pass, up to the server's stream limit",
        persistent: true,
        // One connection for the whole run: `connects` is 1 on a healthy run, whatever `-c`.
        shared: true,
        port: Port::Http,
        alpn: super::tls::Alpn::H2,
        round_trips: Some(1.0),
        unshared_twin: Some(TransportKind::H2),
        ..Facts::DEFAULT
    };

    fn open(endpoint: Endpoint, timeout: Duration) -> Result<H2Mux, OpenTransportError> {
        Ok(H2Mux(MuxHandle::new(endpoint, timeout)))
    }

    fn call(&mut self, call: &Call, phases: &mut Phases) -> Result<Reply<'_>, CallError> {
        let handle = &mut self.0;
        let deadline = Instant::now() + handle.timeout;
        let shared = handle.shared.clone();
        let connecting = Cell::new(false);
        shared.runtime(THREAD)?.block_on(super::within(
            remaining(deadline)?,
            &connecting,
            handle.exchange(call, deadline, phases, &connecting),
        ))
    }

    fn reset(&mut self) {
        let Some(failed) = self.0.used.take() else {
            return;
        };
        if let Ok(rt) = self.0.shared.runtime(THREAD) {
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

    async fn call(&mut self, call: &Call<'_>, phases: &mut Phases) -> Result<Reply<'_>, CallError> {
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
        if let Some(failed) = self.handle.used.take() {
            self.handle.shared.try_forget(failed);
        }
    }

    fn connects(&self) -> u64 {
        self.handle.connects
    }
}
