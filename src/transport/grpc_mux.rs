//! `grpc-mux`: every worker of a run shares one tonic channel, so one HTTP/2 connection
//! carries all their unary calls, each a stream of its own: what a service that holds one
//! channel to a peer (gRPC's usual habit) does, against `grpc`'s channel per worker.
//!
//! As in `h2-mux`, the channel lives in the run's [`RunShared`](super::RunShared) with a
//! runtime of its own, one thread that drives the connection for all workers; each worker
//! blocks on that runtime for its call. The channel's connector counts every connection
//! it opens; the workers claim those counts after their calls, so the workers' counts add
//! up to what was opened.

use super::grpc::{Client, Opened, connect, request, unary};
use super::{
    Call, CallError, Endpoint, OpenTransportError, Phases, Port, Reply, Transport, remaining,
};
use bytes::Bytes;
use std::cell::Cell;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

/// The one channel of a run, and the thread that drives it.
pub struct MuxChannel {
    /// One worker thread, built on first use, so a run of another transport pays nothing.
    rt: std::sync::OnceLock<Result<tokio::runtime::Runtime, String>>,
    /// The live channel's client and its generation (bumped on every new channel), so
    /// that a worker whose call failed drops only the channel it saw fail.
    client: tokio::sync::Mutex<Option<(Client, u64)>>,
    /// Connections the channels of this run opened.
    opened: Arc<Opened>,
    /// Of those, the ones a worker has counted as its own.
    claimed: AtomicU64,
    /// The generation the next channel gets.
    client_generation: AtomicU64,
}

impl Default for MuxChannel {
    fn default() -> Self {
        MuxChannel {
            rt: std::sync::OnceLock::new(),
            client: tokio::sync::Mutex::new(None),
            opened: Arc::default(),
            claimed: AtomicU64::new(0),
            client_generation: AtomicU64::new(0),
        }
    }
}

impl MuxChannel {
    fn runtime(&self) -> Result<&tokio::runtime::Runtime, CallError> {
        self.rt
            .get_or_init(|| {
                tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(1)
                    .thread_name("rpcbench-grpc-mux")
                    .enable_all()
                    .build()
                    .map_err(|e| e.to_string())
            })
            .as_ref()
            .map_err(|_| CallError::Io)
    }

    /// The connections opened and not yet claimed by a worker, now claimed.
    fn claim(&self) -> u64 {
        // `fetch_max`, not a swap: of two workers claiming at once, the one that read the
        // smaller count must not move `claimed` back, or the difference would be counted
        // twice.
        let opened = self.opened.count.load(Relaxed);
        let before = self.claimed.fetch_max(opened, Relaxed);
        opened.saturating_sub(before)
    }
}

/// The `grpc-mux` transport: one worker's handle on the run's shared channel.
pub struct GrpcMux {
    shared: Arc<MuxChannel>,
    endpoint: Endpoint,
    timeout: Duration,
    body: Bytes,
    /// Connections this worker claimed (see the module's documentation).
    connects: u64,
    /// The generation of the channel this worker's last call used.
    used: Option<u64>,
}

impl Transport for GrpcMux {
    const PERSISTENT: bool = true;
    /// One connection for the whole run: `connects` is 1 on a healthy run, whatever `-c`.
    const SHARED: bool = true;
    const PORT: Port = Port::Http;

    fn open(endpoint: Endpoint, timeout: Duration) -> Result<GrpcMux, OpenTransportError> {
        Ok(GrpcMux {
            shared: endpoint.shared.get::<MuxChannel>(),
            endpoint,
            timeout,
            body: Bytes::new(),
            connects: 0,
            used: None,
        })
    }

    fn call(&mut self, call: &Call, phases: &mut Phases) -> Result<Reply<'_>, CallError> {
        let deadline = Instant::now() + self.timeout;
        let req = request(call);
        let shared = self.shared.clone();
        let rt = shared.runtime()?;
        let GrpcMux {
            endpoint,
            used,
            ..
        } = self;
        let connecting = Cell::new(false);
        let result = rt.block_on(super::within(remaining(deadline)?, &connecting, async {
            // Take a clone of the live client, or open the channel: under the lock, so
            // that workers arriving together open one channel, not one each.
            let (mut client, generation) = {
                let mut slot = shared.client.lock().await;
                match &*slot {
                    Some((c, g)) => (c.clone(), *g),
                    None => {
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
                        let channel = connect(endpoint, addr, shared.opened.clone(), remaining(deadline)?).await?;
                        connecting.set(false);
                        shared.opened.record(phases);
                        let client = tonic::client::Grpc::new(channel);
                        let generation = shared.client_generation.fetch_add(1, Relaxed);
                        *slot = Some((client.clone(), generation));
                        (client, generation)
                    }
                }
            };
            *used = Some(generation);
            unary(&mut client, req, phases).await
        }));
        self.connects += shared.claim();
        let (reply, server) = result.map_err(|e| shared.opened.explain(e))?;
        self.body = reply.payload;
        Ok(Reply {
            seq: Some(reply.seq),
            body: &self.body,
            server,
        })
    }

    fn reset(&mut self) {
        // Drop the shared channel only if it is still the one this worker's call failed
        // on; another worker may already have opened a new one.
        let Some(failed) = self.used.take() else {
            return;
        };
        if let Ok(rt) = self.shared.runtime() {
            rt.block_on(async {
                let mut slot = self.shared.client.lock().await;
                if slot.as_ref().is_some_and(|(_, g)| *g == failed) {
                    *slot = None;
                }
            });
        }
    }

    fn connects(&self) -> u64 {
        self.connects
    }
}
