//! `h2-mux`: every worker of a run shares one HTTP/2 connection (prior knowledge), each
//! call a stream of its own, so `-c 64` means 64 streams in flight on 1 connection. This
//! is how gRPC channels and HTTP/2 service meshes carry an internal service's calls, and
//! what it buys (one handshake, one socket) or costs (one connection's ordering and flow
//! control for everyone) is what the comparison with `h2` and `http-keepalive` shows.
//!
//! The connection lives in the run's [`RunShared`](super::RunShared) with a runtime of its
//! own, one thread that drives the connection for all workers; each worker blocks on that
//! runtime for its call, so the streams of all workers are multiplexed by hyper's one
//! connection task. The worker whose call opened the connection counts the connect.

use super::h2::{Ended, Sender, connect, origin, request, send};
use super::{
    Call, CallError, Endpoint, OpenTransportError, Phases, Port, Reply, Transport, remaining,
};
use std::cell::Cell;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The one connection of a run, and the thread that drives it.
pub struct MuxConn {
    /// One worker thread: it runs the connection task; the workers' own threads run
    /// their requests. Built on first use, so a run of another transport pays nothing.
    rt: std::sync::OnceLock<Result<tokio::runtime::Runtime, String>>,
    /// The live connection and its generation (bumped on every new connection), so that
    /// a worker whose call failed drops only the connection it saw fail.
    conn: tokio::sync::Mutex<Option<(Sender, Ended, u64)>>,
}

impl Default for MuxConn {
    fn default() -> Self {
        MuxConn {
            rt: std::sync::OnceLock::new(),
            conn: tokio::sync::Mutex::new(None),
        }
    }
}

impl MuxConn {
    fn runtime(&self) -> Result<&tokio::runtime::Runtime, CallError> {
        self.rt
            .get_or_init(|| {
                tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(1)
                    .thread_name("rpcbench-h2-mux")
                    .enable_all()
                    .build()
                    .map_err(|e| e.to_string())
            })
            .as_ref()
            .map_err(|_| CallError::Io)
    }
}

/// The `h2-mux` transport: one worker's handle on the run's shared connection.
pub struct H2Mux {
    shared: Arc<MuxConn>,
    endpoint: Endpoint,
    timeout: Duration,
    origin: String,
    body: Vec<u8>,
    /// Connections this worker opened (the first call of the run opens it).
    connects: u64,
    /// The generation of the connection this worker's last call used.
    used: Option<u64>,
}

impl Transport for H2Mux {
    const PERSISTENT: bool = true;
    /// One connection for the whole run: `connects` is 1 on a healthy run, whatever `-c`.
    const SHARED: bool = true;
    const PORT: Port = Port::Http;

    fn open(endpoint: Endpoint, timeout: Duration) -> Result<H2Mux, OpenTransportError> {
        Ok(H2Mux {
            shared: endpoint.shared.get::<MuxConn>(),
            origin: origin(&endpoint),
            endpoint,
            timeout,
            body: Vec::new(),
            connects: 0,
            used: None,
        })
    }

    fn call(&mut self, call: &Call, phases: &mut Phases) -> Result<Reply<'_>, CallError> {
        let deadline = Instant::now() + self.timeout;
        let req = request(&self.origin, call)?;
        let shared = self.shared.clone();
        let rt = shared.runtime()?;
        let H2Mux {
            endpoint,
            body,
            connects,
            used,
            ..
        } = self;
        let connecting = Cell::new(false);
        let (seq, server) = rt.block_on(super::within(remaining(deadline)?, &connecting, async {
            // Take a clone of the live sender, or open the connection: under the lock, so
            // that workers arriving together open one connection, not one each.
            let (mut sender, generation) = {
                let mut slot = shared.conn.lock().await;
                match &*slot {
                    Some((s, ended, g)) if !ended.get() => (s.clone(), *g),
                    _ => {
                        connecting.set(true);
                        // The lookup blocks on a runtime of its own, which must not start
                        // inside this one: it runs on a blocking thread.
                        let ep = endpoint.clone();
                        let (addr, dns) = tokio::task::spawn_blocking(move || {
                            let mut looked = Phases::default();
                            ep.http_addr(deadline, &mut looked).map(|a| (a, looked.dns))
                        })
                        .await
                        .map_err(|_| CallError::Io)??;
                        phases.dns = dns;
                        let (s, ended, took) = connect(addr, deadline, endpoint).await?;
                        connecting.set(false);
                        *connects += 1;
                        took.record(phases);
                        let generation = slot.as_ref().map_or(0, |(_, _, g)| g + 1);
                        *slot = Some((s.clone(), ended, generation));
                        (s, generation)
                    }
                }
            };
            *used = Some(generation);
            send(&mut sender, req, body, phases).await
        }))?;
        Ok(Reply {
            seq,
            body: &self.body,
            server,
        })
    }

    fn reset(&mut self) {
        // Drop the shared connection only if it is still the one this worker's call
        // failed on; another worker may already have opened a new one.
        let Some(failed) = self.used.take() else {
            return;
        };
        if let Ok(rt) = self.shared.runtime() {
            rt.block_on(async {
                let mut slot = self.shared.conn.lock().await;
                if slot.as_ref().is_some_and(|(_, _, g)| *g == failed) {
                    *slot = None;
                }
            });
        }
    }

    fn connects(&self) -> u64 {
        self.connects
    }
}
