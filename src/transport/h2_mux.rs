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

use super::h2::{Ended, Origin, Sender, connect, request, send};
use super::mux::{self, Shared};
use super::{
    AsyncTransport, Call, CallError, CallTimer, Endpoint, OpenTransportError, Phases, Port, Reply,
    Transport, remaining,
};
use std::cell::Cell;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The one connection of a run: its request handle, the flag its task sets when it ends
/// (the connection is then opened anew before the next call rather than failing it), and
/// where it notes a TLS failure.
pub type MuxConn = Shared<(Sender, Ended, std::sync::Arc<super::tls::TlsNoted>)>;

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
        let req = request(&mut self.origin, call)?;
        let MuxHandle {
            shared,
            endpoint,
            connects,
            ..
        } = self;
        let ((mut sender, _, noted), generation) = shared
            .get(
                |(_, ended, _)| !ended.get(),
                async || {
                    connecting.set(true);
                    let addr = mux::http_addr(endpoint, deadline, phases).await?;
                    let (s, ended, took, noted) = connect(addr, deadline, endpoint).await?;
                    connecting.set(false);
                    *connects += 1;
                    took.record(phases);
                    Ok((s, ended, noted))
                },
            )
            .await?;
        self.used = Some(generation);
        let (seq, server) = send(&mut sender, req, &mut self.body, phases)
            .await
            .map_err(|e| noted.explain(e))?;
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
        if let Some(failed) = self.handle.used.take() {
            self.handle.shared.try_forget(failed);
        }
    }

    fn connects(&self) -> u64 {
        self.handle.connects
    }
}
