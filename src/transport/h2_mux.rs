//! `h2-mux`: every worker of a run shares one HTTP/2 connection (prior knowledge), each
//! call a stream of its own, so `-c 64` means 64 streams in flight on 1 connection. This
//! is how gRPC channels and HTTP/2 service meshes carry an internal service's calls, and
//! what it buys (one handshake, one socket) or costs (one connection's ordering and flow
//! control for everyone) is what the comparison with `h2` and `http-keepalive` shows.
//!
//! The connection lives in the run's [`RunShared`](super::RunShared). On the event loop
//! (the engine a shared transport gets unless `--engine blocking` says otherwise) the
//! run has one loop thread, as h2load drives one connection from one thread: the
//! connection's task and every stream's task run there, and a call costs no thread
//! switch. On the blocking engine the connection gets a runtime of its own, one thread
//! that drives it for all workers, and each worker blocks on that runtime for its call
//! (a thread switch each way). Either way, the worker whose call opened the connection counts
//! the connect.
//!
//! The connection is [`MuxWire`](super::h2_mux_wire::MuxWire): the frame layer of the `h2`
//! crate driven by a task of rpcbench's own, which reads and writes for every stream in
//! one pass. What is HTTP/2's own here is the request and how its reply is read
//! ([`EchoStream`]); the rest is [`super::mux`]'s, which `grpc-mux` shares.

use super::h2::{Origin, echo_request};
use super::h2_mux_wire::Done;
use super::h2_wire::Outgoing;
use super::mux::{AsyncMux, BlockingMux, MuxProtocol};
use super::{Call, CallError, Facts, Port, Reply, TransportKind};

/// The `h2-mux` transport on the blocking engine.
pub(super) type H2Mux = BlockingMux<EchoStream>;

/// The `h2-mux` transport on the event loop.
pub(super) type AsyncH2Mux = AsyncMux<EchoStream>;

/// HTTP/2's `POST /echo` as a stream of the shared connection: the reply's body is the
/// payload, its seq and server time in its head.
#[derive(Default)]
pub(super) struct EchoStream {
    /// The last reply's body.
    body: Vec<u8>,
}

impl MuxProtocol for EchoStream {
    const FACTS: Facts = Facts {
        summary: "HTTP/2 with every worker sharing one connection, each call a concurrent stream: `-c 64` is 64 streams on 1 connection, and `connects` is 1; the connection is driven by a task of its own (`src/transport/h2_mux_wire.rs`: rpcbench's own frame reader and writer and HPACK coder), which reads every stream's frames and writes every ready request in one pass, up to the server's stream limit",
        persistent: true,
        // One connection for the whole run: `connects` is 1 on a healthy run, whatever `-c`.
        shared: true,
        port: Port::Http,
        alpn: super::tls::Alpn::H2,
        round_trips: Some(1.0),
        unshared_twin: Some(TransportKind::H2),
        ..Facts::DEFAULT
    };

    const THREAD: &'static str = "rpcbench-h2-mux";

    fn request(origin: &mut Origin, call: &Call<'_>) -> Result<Outgoing, CallError> {
        echo_request(origin, call)
    }

    fn reply(&mut self, done: Done) -> Result<Reply<'_>, CallError> {
        self.body = done.body;
        Ok(Reply {
            seq: done.replied.head.seq,
            body: &self.body,
            server: done.replied.head.server,
        })
    }

    fn recycle(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.body)
    }
}
