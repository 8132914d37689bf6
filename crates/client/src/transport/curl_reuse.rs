//! `curl-reuse`: one libcurl easy handle per worker, reused for every call, so libcurl
//! keeps its connection (and DNS cache) between calls.

use super::curl::{Collector, new_handle, perform};
use super::{
    Call, CallError, Counts, Endpoint, FILES_PER_CURL_HANDLE, Facts, OpenTransportError, Phases,
    Port, Reply, Transport,
};
use curl::easy::Easy2;
use std::time::{Duration, Instant};

/// The `curl-reuse` transport.
pub struct CurlReuse {
    endpoint: Endpoint,
    timeout: Duration,
    easy: Option<Easy2<Collector>>,
    connects: u64,
}

impl Transport for CurlReuse {
    const FACTS: Facts = Facts {
        summary: "`POST /echo` through one libcurl easy handle per worker, reused",
        persistent: true,
        port: Port::Http,
        alpn: super::tls::Alpn::Http1,
        round_trips: Some(1.0),
        fresh_twin: Some("curl-fresh"),
        files_per_worker: FILES_PER_CURL_HANDLE,
        libcurl: true,
        encodings: crate::encoding::EncodingKind::ALL,
        ..Facts::DEFAULT
    };

    fn open(endpoint: Endpoint, timeout: Duration) -> Result<CurlReuse, OpenTransportError> {
        Ok(CurlReuse {
            endpoint,
            timeout,
            easy: None,
            connects: 0,
        })
    }

    fn call(&mut self, call: &Call, phases: &mut Phases) -> Result<Reply<'_>, CallError> {
        let fresh_handle = self.easy.is_none();
        let easy = match &mut self.easy {
            Some(easy) => easy,
            slot @ None => {
                // A new handle connects, so this is when a name is looked up.
                let pin = self
                    .endpoint
                    .curl_pin(Instant::now() + self.timeout, phases)?;
                slot.insert(
                    new_handle(self.timeout, pin, &self.endpoint)
                        .map_err(|_| CallError::Protocol)?,
                )
            }
        };
        perform(
            easy,
            &self.endpoint,
            call,
            phases,
            &mut self.connects,
            fresh_handle,
        )?;
        let c = easy.get_ref();
        Ok(Reply {
            seq: c.seq,
            body: &c.body,
            server: c.server,
        })
    }

    fn reset(&mut self) {
        // A new handle, so a connection in an unknown state is not reused.
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
        super::super::expect_facts("curl-reuse", 8, super::super::Port::Http, false);
    }
}
