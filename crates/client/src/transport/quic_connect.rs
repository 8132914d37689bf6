//! `quic-connect`: a new QUIC connection per call, a full TLS 1.3 handshake each time
//! (one round trip), then the call on a stream of its own (one more), then the close: the
//! QUIC counterpart of `tcp-connect`, which pays a TCP and a TLS handshake. The worker's
//! UDP socket is kept; connections are not.

use super::quic_conn::QuicWorker;
use super::{
    Call, CallError, Counts, Endpoint, Facts, OpenTransportError, Phases, Port, Reply, Tls,
    Transport,
};
use std::time::Duration;

/// The `quic-connect` transport: a connection per call.
pub struct QuicConnect(QuicWorker<true>);

/// `quic-connect` on the event loop.
pub type AsyncQuicConnect = super::quic_loop::AsyncQuicLoop<true>;

impl Transport for QuicConnect {
    const FACTS: Facts = Facts {
        summary: "a new QUIC connection per call: a full TLS 1.3 handshake, one frame each way on a stream, close (quinn; `plain` runs as `tls13`)",
        persistent: false,
        port: Port::Quic,
        round_trips: Some(2.0),
        tls: Tls::Quic,
        tcp_twin: Some("tcp-connect"),
        files_per_worker: super::FILES_PER_RUNTIME + 1,
        ..Facts::DEFAULT
    };

    fn open(endpoint: Endpoint, timeout: Duration) -> Result<QuicConnect, OpenTransportError> {
        QuicWorker::open(endpoint, timeout).map(QuicConnect)
    }

    fn call(&mut self, call: &Call, phases: &mut Phases) -> Result<Reply<'_>, CallError> {
        self.0.call(call, phases)
    }

    /// Closes the call's connection inside the timed call, as `tcp-connect` does.
    fn end_call(&mut self) {
        self.0.reset();
    }

    fn reset(&mut self) {
        self.0.reset();
    }

    fn counts(&self) -> Counts {
        self.0.counts()
    }
}

#[cfg(test)]
mod tests {
    /// What the rest of the program reads from its facts: a connection per call for a
    /// healthy run of 8 workers and 100 calls, the port, an event-loop side.
    #[test]
    fn its_facts() {
        super::super::expect_facts("quic-connect", 100, super::super::Port::Quic, true);
    }
}
