//! `curl-fresh`: a new libcurl easy handle per call with nothing shared, like PHP's
//! `curl_init` per call in seed 004. The latency includes connect (and any lookup).

use super::curl::{Collector, new_handle, perform};
use super::{
    Call, CallError, Counts, Endpoint, FILES_PER_CURL_HANDLE, Facts, OpenTransportError, Phases,
    Port, Reply, Tls, Transport,
};
use curl::easy::Easy2;
use std::time::{Duration, Instant};

/// The `curl-fresh` transport.
pub struct CurlFresh {
    endpoint: Endpoint,
    timeout: Duration,
    /// The handle of the call in progress; closed by `end_call`.
    easy: Option<Easy2<Collector>>,
    connects: u64,
}

impl Transport for CurlFresh {
    const FACTS: Facts = Facts {
        summary: "`POST /echo` through a new libcurl easy handle per call, nothing shared",
        persistent: false,
        port: Port::Http,
        alpn: super::tls::Alpn::Http1,
        round_trips: Some(2.0),
        tls: Tls::Full,
        files_per_worker: FILES_PER_CURL_HANDLE,
        libcurl: true,
        encodings: crate::encoding::EncodingKind::ALL,
        ..Facts::DEFAULT
    };

    fn open(endpoint: Endpoint, timeout: Duration) -> Result<CurlFresh, OpenTransportError> {
        Ok(CurlFresh {
            endpoint,
            timeout,
            easy: None,
            connects: 0,
        })
    }

    fn call(&mut self, call: &Call, phases: &mut Phases) -> Result<Reply<'_>, CallError> {
        let pin = self
            .endpoint
            .curl_pin(Instant::now() + self.timeout, phases)?;
        let easy = self.easy.insert(
            new_handle(self.timeout, pin, &self.endpoint).map_err(|_| CallError::Protocol)?,
        );
        perform(easy, &self.endpoint, call, phases, &mut self.connects, true)?;
        let c = easy.get_ref();
        Ok(Reply {
            seq: c.seq,
            body: &c.body,
            server: c.server,
        })
    }

    fn end_call(&mut self) {
        self.easy = None;
    }

    fn reset(&mut self) {
        self.easy = None;
    }

    fn counts(&self) -> Counts {
        Counts::connects(self.connects)
    }
}

#[cfg(test)]
mod tests {
    /// What the rest of the program reads from its facts: the connections a healthy run
    /// of 8 workers and 100 calls opens, the port, an event-loop side.
    #[test]
    fn its_facts() {
        super::super::expect_facts("curl-fresh", 100, super::super::Port::Http, false);
    }
}
