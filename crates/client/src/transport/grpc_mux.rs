//! `grpc-mux`: every worker of a run shares one gRPC connection (one channel, in gRPC's
//! words), so it carries all their unary calls, each a stream of its own: what a service
//! that holds one channel to a peer (gRPC's usual habit) does, against `grpc`'s
//! connection per worker.
//!
//! It is `h2-mux` with gRPC's call: the same shared connection ([`super::mux`] on the
//! frame-layer [`MuxWire`](super::h2_mux_wire::MuxWire)), the same engines (one event
//! loop for its workers, or a runtime thread of its own on the blocking engine), and on
//! each stream the request and reply of `grpc` ([`unary_message`], [`unary_reply`]): so
//! that grpc-mux against h2-mux is gRPC's cost on a shared connection, and grpc-mux
//! against grpc is sharing's, neither of them a difference of client libraries.

use super::grpc::{
    REPLY_OVERHEAD, REQUEST_FIELDS, unary_message, unary_path, unary_reply, wstest_reply,
};
use super::h2_mux_wire::{Done, Request};
use super::mux::{AsyncMux, BlockingMux, MuxProtocol};
use super::{Call, CallError, Facts, Port, Reply};
use bytes::Bytes;

/// The `grpc-mux` transport on the blocking engine.
pub(super) type GrpcMux = BlockingMux<UnaryStream>;

/// The `grpc-mux` transport on the event loop.
pub(super) type AsyncGrpcMux = AsyncMux<UnaryStream>;

/// gRPC's unary `Call` as a stream of the shared connection: the reply's one message
/// holds the payload, its status is in the trailers.
#[derive(Default)]
pub(super) struct UnaryStream {
    /// The buffer the last reply's DATA came in, kept for the next.
    buf: Vec<u8>,
    /// The last reply's payload.
    payload: Bytes,
    /// True while the calls are encoded (WSTest's, in protobuf): their replies are the
    /// message as it came.
    encoded: bool,
}

impl MuxProtocol for UnaryStream {
    const FACTS: Facts = Facts {
        summary: "gRPC unary calls with every worker sharing one connection (one channel, in gRPC's words), each call a stream: `connects` is 1 whatever `-c`; the same frame-layer connection as `h2-mux`",
        persistent: true,
        // One connection for the whole run: `connects` is 1 on a healthy run, whatever `-c`.
        shared: true,
        port: Port::Http,
        alpn: super::tls::Alpn::H2,
        round_trips: Some(1.0),
        unshared_twin: Some("grpc"),
        multiplexing_against: &["h2-mux", "grpc"],
        encodings: &[crate::encoding::EncodingKind::Protobuf],
        ..Facts::DEFAULT
    };

    const THREAD: &'static str = "rpcbench-grpc-mux";

    fn request(&mut self, call: &Call<'_>) -> Result<Request, CallError> {
        self.encoded = call.rpc.is_some();
        Ok(Request {
            path: Bytes::from_static(unary_path(call).as_bytes()),
            content_type: None,
            fields: REQUEST_FIELDS,
            seq: None,
            payload: unary_message(call)?,
            max_body: call.max_body(REPLY_OVERHEAD),
            header: None,
            fault_status: None,
        })
    }

    fn reply(&mut self, done: Done) -> Result<Reply<'_>, CallError> {
        if self.encoded {
            self.buf = done.body;
            return wstest_reply(&done.replied, &self.buf);
        }
        let (reply, server) = unary_reply(&done.replied, &done.body)?;
        self.buf = done.body;
        self.payload = reply.payload;
        Ok(Reply {
            seq: Some(reply.seq),
            body: &self.payload,
            server,
        })
    }

    fn recycle(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.buf)
    }
}

#[cfg(test)]
mod tests {
    /// What the rest of the program reads from its facts: the connections a healthy run
    /// of 8 workers and 100 calls opens, the port, an event-loop side.
    #[test]
    fn its_facts() {
        super::super::expect_facts("grpc-mux", 1, super::super::Port::Http, true);
    }
}
