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
//! The connection is [`MuxWire`](super::h2_mux_wire::MuxWire): rpcbench's own frame
//! reader and writer, driven by a task that reads and writes for every stream in one
//! pass. What is HTTP/2's own here is the request and how its reply is read
//! ([`EchoStream`]); the rest is [`super::mux`]'s, which `grpc-mux` shares.

use super::h2_mux_wire::{Done, Request};
use super::mux::{AsyncMux, BlockingMux, MuxProtocol};
use super::{Call, CallError, Endpoint, Facts, Port, Reply};
use bytes::Bytes;

/// The `h2-mux` transport on the blocking engine.
pub(super) type H2Mux = BlockingMux<EchoStream>;

/// The `h2-mux` transport on the event loop.
pub(super) type AsyncH2Mux = AsyncMux<EchoStream>;

/// What a request's path depends on: `reply_len`, `delay_us`, an encoded call's route.
type Asks = (Option<u32>, u32, Option<super::Rpc>);

/// HTTP/2's `POST /echo` as a stream of the shared connection: the reply's body is the
/// payload, its seq and server time in its head.
#[derive(Default)]
pub(super) struct EchoStream {
    /// The last reply's body.
    body: Vec<u8>,
    /// The last request's path and what it asked for (`reply_len`, `delay_us`, the
    /// encoded call's route): a run's calls ask the same, so the path is made once.
    path: Option<(Asks, Bytes)>,
}

impl MuxProtocol for EchoStream {
    const FACTS: Facts = Facts {
        summary: "HTTP/2 with every worker sharing one connection, each call a concurrent stream: `-c 64` is 64 streams on 1 connection, and `connects` is 1; the connection is driven by a task of its own (`crates/client/src/transport/h2_mux_wire.rs`: rpcbench's own frame reader and writer and HPACK coder), which reads every stream's frames and writes every ready request in one pass, up to the server's stream limit",
        persistent: true,
        // One connection for the whole run: `connects` is 1 on a healthy run, whatever `-c`.
        shared: true,
        port: Port::Http,
        alpn: super::tls::Alpn::H2,
        round_trips: Some(1.0),
        unshared_twin: Some("h2"),
        multiplexing_against: &["h2", "http-keepalive"],
        encodings: crate::encoding::EncodingKind::ALL,
        ..Facts::DEFAULT
    };

    const THREAD: &'static str = "rpcbench-h2-mux";

    fn request(&mut self, call: &Call<'_>) -> Result<Request, CallError> {
        let asks: Asks = (call.reply_len, call.delay_us, call.rpc);
        let path = match &self.path {
            Some((asked, path)) if *asked == asks => path.clone(),
            _ => {
                let path = Bytes::from(Endpoint::echo_path(call));
                self.path.insert((asks, path)).1.clone()
            }
        };
        Ok(Request {
            path,
            content_type: Some(call.content_type()),
            fields: &[],
            seq: Some(call.seq),
            payload: Bytes::copy_from_slice(call.payload),
            max_body: call.max_reply,
            header: call.operation_header(),
            fault_status: call.rpc.and_then(|rpc| rpc.encoding.facts().fault_status),
        })
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

#[cfg(test)]
mod tests {
    /// What the rest of the program reads from its facts: the connections a healthy run
    /// of 8 workers and 100 calls opens, the port, an event-loop side.
    #[test]
    fn its_facts() {
        super::super::expect_facts("h2-mux", 1, super::super::Port::Http, true);
    }
}
