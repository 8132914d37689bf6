//! `quic`: one QUIC connection per worker (quinn, TLS 1.3 built in), each call a
//! bidirectional stream of its own carrying the raw frames of `tcp` (ALPN `rpcbench`).
//! What it shares with `quic-connect` is in `quic_conn.rs`.

use super::quic_conn::QuicWorker;
use super::{
    Call, CallError, Counts, Endpoint, Facts, OpenTransportError, Phases, Port, Reply, Tls,
    Transport,
};
use std::time::Duration;

/// The `quic` transport: a kept connection.
pub struct Quic(QuicWorker<false>);

/// `quic` on the event loop.
pub type AsyncQuic = super::quic_loop::AsyncQuicLoop<false>;

impl Transport for Quic {
    const FACTS: Facts = Facts {
        summary: "one frame each way on a QUIC stream of its own, one QUIC connection per worker (quinn; TLS 1.3 built in, so `plain` runs as `tls13`)",
        persistent: true,
        port: Port::Quic,
        round_trips: Some(1.0),
        tls: Tls::Quic,
        tcp_twin: Some("tcp"),
        fresh_twin: Some("quic-connect"),
        files_per_worker: super::FILES_PER_RUNTIME + 1,
        ..Facts::DEFAULT
    };

    fn open(endpoint: Endpoint, timeout: Duration) -> Result<Quic, OpenTransportError> {
        QuicWorker::open(endpoint, timeout).map(Quic)
    }

    fn call(&mut self, call: &Call, phases: &mut Phases) -> Result<Reply<'_>, CallError> {
        self.0.call(call, phases)
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
    /// What the rest of the program reads from its facts: the connections a healthy run
    /// of 8 workers and 100 calls opens, the port, an event-loop side.
    #[test]
    fn its_facts() {
        super::super::expect_facts("quic", 8, super::super::Port::Quic, true);
    }
}
