//! `h3-fresh`: a new QUIC connection per call (ALPN `h3`), a full TLS 1.3 handshake, then
//! HTTP/3 `POST /echo` on it, then the close: the HTTP/3 counterpart of `http-fresh` over
//! TLS, two round trips where HTTPS over TCP takes three.

use super::h3_conn::H3Worker;
use super::{
    Call, CallError, Counts, Endpoint, Facts, OpenTransportError, Phases, Port, Reply, Tls,
    Transport,
};
use std::time::Duration;

/// The `h3-fresh` transport: a connection per call.
pub struct H3Fresh(H3Worker<true>);

impl Transport for H3Fresh {
    const FACTS: Facts = Facts {
        summary: "a new QUIC connection per call: a full TLS 1.3 handshake, HTTP/3 `POST /echo` on it, close (hyperium's `h3` on quinn; `plain` runs as `tls13`)",
        persistent: false,
        port: Port::Quic,
        alpn: super::tls::Alpn::H3,
        round_trips: Some(2.0),
        tls: Tls::Quic,
        tcp_twin: Some("http-fresh"),
        files_per_worker: super::FILES_PER_RUNTIME + 1,
        encodings: crate::encoding::EncodingKind::ALL,
        ..Facts::DEFAULT
    };

    fn open(endpoint: Endpoint, timeout: Duration) -> Result<H3Fresh, OpenTransportError> {
        H3Worker::open(endpoint, timeout).map(H3Fresh)
    }

    fn call(&mut self, call: &Call, phases: &mut Phases) -> Result<Reply<'_>, CallError> {
        self.0.call(call, phases)
    }

    /// Closes the call's connection inside the timed call, as `http-fresh` does.
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
    /// healthy run of 8 workers and 100 calls, the port, no event-loop side.
    #[test]
    fn its_facts() {
        super::super::expect_facts("h3-fresh", 100, super::super::Port::Quic, false);
    }
}
