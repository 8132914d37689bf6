//! `h3`: HTTP/3 `POST /echo` on one QUIC connection per worker (ALPN `h3`; hyperium's
//! `h3` on quinn), each call a request stream of its own, one at a time: the HTTP/3
//! counterpart of `h2`. What it shares with `h3-fresh` and `h3-mux` is in `h3_conn.rs`.

use super::h3_conn::H3Worker;
use super::{
    Call, CallError, Counts, Endpoint, Facts, OpenTransportError, Phases, Port, Reply, Tls,
    Transport,
};
use std::time::Duration;

/// The `h3` transport: a kept connection.
pub struct H3(H3Worker<false>);

impl Transport for H3 {
    const FACTS: Facts = Facts {
        summary: "HTTP/3 `POST /echo` as a request stream on one QUIC connection per worker, one stream at a time (hyperium's `h3` on quinn; TLS 1.3 built in, so `plain` runs as `tls13`)",
        persistent: true,
        port: Port::Quic,
        alpn: super::tls::Alpn::H3,
        round_trips: Some(1.0),
        tls: Tls::Quic,
        tcp_twin: Some("h2"),
        fresh_twin: Some("h3-fresh"),
        files_per_worker: super::FILES_PER_RUNTIME + 1,
        encodings: crate::encoding::EncodingKind::ALL,
        ..Facts::DEFAULT
    };

    fn open(endpoint: Endpoint, timeout: Duration) -> Result<H3, OpenTransportError> {
        H3Worker::open(endpoint, timeout).map(H3)
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
    /// of 8 workers and 100 calls opens, the port, no event-loop side.
    #[test]
    fn its_facts() {
        super::super::expect_facts("h3", 8, super::super::Port::Quic, false);
    }
}
