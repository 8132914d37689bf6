//! `h3-mux`: every worker of a run shares one HTTP/3 connection, each call a request
//! stream of its own, so `-c 64` is 64 streams in flight on one QUIC connection: what
//! `h2-mux` is for HTTP/2, without TCP's head-of-line blocking between the streams.
//!
//! The connection lives in the run's [`RunShared`](super::RunShared) with a runtime of
//! its own, one thread that drives the QUIC endpoint and the connection for every worker;
//! each worker blocks on that runtime for its call (a thread switch each way, as
//! `h2-mux` on the blocking engine). The worker whose call opened the connection counts
//! the connect; a connection that ended is replaced by the next call.

use super::h3_conn::{H3Call, H3Conn};
use super::quic_conn::QuicClient;
use super::tls::Alpn;
use super::{
    Call, CallError, Counts, Endpoint, Facts, OpenTransportError, Phases, Port, Reply, Tls,
    Transport,
};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The run's shared connection and the client (with its runtime) that opened it.
#[derive(Default)]
struct Shared(Mutex<Option<(QuicClient, Option<H3Conn>)>>);

/// The `h3-mux` transport: a worker's handle on the run's connection.
pub struct H3Mux {
    endpoint: Endpoint,
    timeout: Duration,
    shared: Arc<Shared>,
    call: H3Call,
    connects: u64,
}

impl Transport for H3Mux {
    const FACTS: Facts = Facts {
        summary: "HTTP/3 with every worker sharing one QUIC connection, each call a concurrent request stream: `-c 64` is 64 streams on 1 connection, and `connects` is 1; one thread drives the connection for all workers (hyperium's `h3` on quinn; `plain` runs as `tls13`)",
        persistent: true,
        // One connection for the whole run: `connects` is 1 on a healthy run, whatever `-c`.
        shared: true,
        port: Port::Quic,
        alpn: super::tls::Alpn::H3,
        round_trips: Some(1.0),
        tls: Tls::Quic,
        tcp_twin: Some("h2-mux"),
        unshared_twin: Some("h3"),
        multiplexing_against: &["h3"],
        encodings: crate::encoding::EncodingKind::ALL,
        ..Facts::DEFAULT
    };

    fn open(endpoint: Endpoint, timeout: Duration) -> Result<H3Mux, OpenTransportError> {
        Ok(H3Mux {
            shared: endpoint.shared.get::<Shared>(),
            endpoint,
            timeout,
            call: H3Call::default(),
            connects: 0,
        })
    }

    fn call(&mut self, call: &Call, phases: &mut Phases) -> Result<Reply<'_>, CallError> {
        let deadline = Instant::now() + self.timeout;
        let (rt, conn) = {
            let mut slot = self.shared.0.lock().unwrap_or_else(|p| p.into_inner());
            let (client, conn) = match &mut *slot {
                Some(shared) => shared,
                None => slot.insert((QuicClient::on(runtime()?, Alpn::H3), None)),
            };
            if conn.as_ref().is_none_or(|c| !c.is_open()) {
                if let Some(gone) = conn.take() {
                    gone.close(client);
                }
                // Under the lock: the other workers wait for this connection, not open
                // their own. In `tls13-0rtt` its handshake is waited for: early data the
                // server refused took HTTP/3's own streams with it, and the next
                // connection makes them again.
                for _ in 0..2 {
                    let opened = H3Conn::open(client, &self.endpoint, deadline, phases)?;
                    self.connects += 1;
                    if !client.early_refused(deadline) {
                        *conn = Some(opened);
                        break;
                    }
                    opened.close(client);
                }
                if conn.is_none() {
                    return Err(CallError::Closed);
                }
            }
            (client.rt.clone(), conn.clone().expect("opened above"))
        };
        self.call
            .call_on(&rt, &conn, &self.endpoint, call, deadline, phases)
    }

    fn reset(&mut self) {
        // The connection is the run's: a failed call leaves it to the next, which opens
        // a new one if it has ended.
    }

    fn counts(&self) -> Counts {
        Counts::connects(self.connects)
    }
}

/// The run's runtime for the shared connection: one thread, which drives it while the
/// workers block on it for their calls.
fn runtime() -> Result<Arc<tokio::runtime::Runtime>, CallError> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("rpcbench-h3-mux")
        .enable_all()
        .build()
        .map(Arc::new)
        .map_err(|_| CallError::Io)
}

#[cfg(test)]
mod tests {
    /// What the rest of the program reads from its facts: one connection in all for a
    /// healthy run of 8 workers and 100 calls, the port, no event-loop side.
    #[test]
    fn its_facts() {
        super::super::expect_facts("h3-mux", 1, super::super::Port::Quic, false);
    }
}
