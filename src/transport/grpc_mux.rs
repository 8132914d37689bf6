//! `grpc-mux`: every worker of a run shares one gRPC connection (tonic's client on one
//! HTTP/2 connection, see [`super::grpc`]), so it carries all their unary calls, each a
//! stream of its own: what a service that holds one channel to a peer (gRPC's usual habit)
//! does, against `grpc`'s connection per worker.
//!
//! As in `h2-mux`, the connection lives in the run's [`RunShared`](super::RunShared) with a
//! runtime of its own, one thread that drives the connection for all workers; each worker
//! blocks on that runtime for its call. [`connect`] counts every connection opened; the
//! workers claim those counts after their calls, so the workers' counts add up to what
//! was opened.

use super::grpc::{Client, Opened, connect, request, unary};
use super::mux::{self, Shared};
use super::{
    Call, CallError, Endpoint, Facts, OpenTransportError, Phases, Port, Reply, Transport,
    TransportKind, remaining,
};
use bytes::Bytes;
use std::cell::Cell;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

/// The blocking engine's channel thread.
const THREAD: &str = "rpcbench-grpc-mux";

/// The one connection of a run, the thread that drives it, and its connection counts.
#[derive(Default)]
pub struct MuxChannel {
    /// The live connection's client, and the flag its task sets when it ends.
    client: Shared<(Client, super::h2::Ended)>,
    /// Connections this run opened.
    opened: Arc<Opened>,
    /// Of those, the ones a worker has counted as its own.
    claimed: AtomicU64,
}

impl MuxChannel {
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

/// The `grpc-mux` transport: one worker's handle on the run's shared connection.
pub struct GrpcMux {
    shared: Arc<MuxChannel>,
    endpoint: Endpoint,
    timeout: Duration,
    body: Bytes,
    /// Connections this worker claimed (see the module's documentation).
    connects: u64,
    /// The generation of the connection this worker's last call used.
    used: Option<u64>,
}

impl Transport for GrpcMux {
    const FACTS: Facts = Facts {
        summary: "gRPC unary calls with every worker sharing one connection (one channel, in gRPC's words): `connects` is 1 whatever `-c`",
        persistent: true,
        // One connection for the whole run: `connects` is 1 on a healthy run, whatever `-c`.
        shared: true,
        port: Port::Http,
        alpn: super::tls::Alpn::H2,
        round_trips: Some(1.0),
        unshared_twin: Some(TransportKind::Grpc),
        ..Facts::DEFAULT
    };

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
        let max = call.max_body(super::grpc::REPLY_OVERHEAD);
        let shared = self.shared.clone();
        let rt = shared.client.runtime(THREAD)?;
        let GrpcMux { endpoint, used, .. } = self;
        let connecting = Cell::new(false);
        let result = rt.block_on(super::within(remaining(deadline)?, &connecting, async {
            // Live until its task ends (the server closed it) or a call on it fails.
            let ((mut client, _), generation) = shared
                .client
                .get(
                    |(_, ended)| !ended.get(),
                    async || {
                        connecting.set(true);
                        let addr = mux::http_addr(endpoint, deadline, phases).await?;
                        let conn = connect(endpoint, addr, shared.opened.clone(), deadline).await?;
                        connecting.set(false);
                        shared.opened.record(phases);
                        Ok(conn)
                    },
                )
                .await?;
            *used = Some(generation);
            unary(&mut client, req, max, phases).await
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
        // Drop the shared connection only if it is still the one this worker's call failed
        // on; another worker may already have opened a new one.
        let Some(failed) = self.used.take() else {
            return;
        };
        if let Ok(rt) = self.shared.client.runtime(THREAD) {
            rt.block_on(self.shared.client.forget(failed));
        }
    }

    fn connects(&self) -> u64 {
        self.connects
    }
}
