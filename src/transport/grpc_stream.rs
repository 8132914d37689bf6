//! `grpc-stream`: one bidirectional `rpcbench.v1.Echo/Stream` per worker, on a connection
//! of its own (tonic's client over the `h2` crate, see [`super::grpc`]); a call is one request message out and its reply message back, in order, as
//! `tcp` is one frame each way on a kept connection. What it saves against `grpc` is
//! the stream per call: its headers and trailers both ways.
//!
//! A stream has no headers per message, so there is no first-byte phase; the server's
//! time is the reply's `server_ns`. A failed call drops the stream and its connection, so
//! the next call opens both again, as the TCP transport reconnects.

use super::grpc::{Client, Opened, checked, classify_status, connect, request};
use super::http::worker_runtime;
use super::{
    Call, CallError, Endpoint, Facts, OpenTransportError, Phases, Port, Reply, Transport, remaining,
};
use crate::proto::{EchoReply, EchoRequest, STREAM_PATH};
use bytes::Bytes;
use hyper::http::uri::PathAndQuery;
use std::cell::Cell;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;

/// Requests queued on the way to the stream: one, since a worker sends the next request
/// only after the reply to the last.
const REQUEST_QUEUE: usize = 1;

/// Longest a worker waits, when it is done, for the server to end its stream after the
/// worker ended its side: the server's reply is its trailers, at once on a healthy run.
const CLOSE_WAIT: Duration = Duration::from_secs(1);

/// The `grpc-stream` transport.
pub struct GrpcStream {
    rt: tokio::runtime::Runtime,
    endpoint: Endpoint,
    timeout: Duration,
    /// The open stream: where requests go, and where replies come from.
    stream: Option<Open>,
    opened: Arc<Opened>,
    /// Connections already counted in a call's phases.
    seen: u64,
    body: Bytes,
}

/// One open stream and the connection it runs on.
struct Open {
    /// Kept so the connection lives as long as its stream, not for reuse.
    _client: Client,
    requests: mpsc::Sender<EchoRequest>,
    replies: tonic::Streaming<EchoReply>,
}

impl Transport for GrpcStream {
    const FACTS: Facts = Facts {
        summary: "one bidirectional `rpcbench.v1.Echo/Stream` per worker; a call is one message each way",
        persistent: true,
        port: Port::Http,
        alpn: super::tls::Alpn::H2,
        round_trips: Some(1.0),
        files_per_worker: super::FILES_PER_RUNTIME,
        ..Facts::DEFAULT
    };

    fn open(endpoint: Endpoint, timeout: Duration) -> Result<GrpcStream, OpenTransportError> {
        Ok(GrpcStream {
            rt: worker_runtime()?,
            endpoint,
            timeout,
            stream: None,
            opened: Arc::default(),
            seen: 0,
            body: Bytes::new(),
        })
    }

    fn call(&mut self, call: &Call, phases: &mut Phases) -> Result<Reply<'_>, CallError> {
        let deadline = Instant::now() + self.timeout;
        let req = request(call);
        let GrpcStream {
            rt,
            endpoint,
            stream,
            opened,
            ..
        } = self;
        let addr = match stream {
            Some(_) => None,
            None => Some(endpoint.http_addr(deadline, phases)?),
        };
        let connecting = Cell::new(addr.is_some());
        let result = rt.block_on(super::within(remaining(deadline)?, &connecting, async {
            let open = match (stream, addr) {
                (Some(open), _) => {
                    open.requests
                        .send(req)
                        .await
                        .map_err(|_| CallError::Closed)?;
                    open
                }
                (slot, Some(addr)) => {
                    let mut client =
                        Box::pin(connect(endpoint, addr, opened.clone(), deadline)).await?;
                    connecting.set(false);
                    client
                        .ready()
                        .await
                        .map_err(|e| super::grpc::classify_error(&e))?;
                    let (requests, queued) = mpsc::channel(REQUEST_QUEUE);
                    // The first request goes in before the stream opens: a server may
                    // hold its reply headers until it has a message to send.
                    requests.send(req).await.map_err(|_| CallError::Closed)?;
                    let resp = client
                        .streaming(
                            // Every call of a run accepts the same largest reply.
                            super::grpc::limited(
                                ReceiverStream::new(queued),
                                call.max_body(super::grpc::REPLY_OVERHEAD),
                            ),
                            PathAndQuery::from_static(STREAM_PATH),
                            tonic_prost::ProstCodec::default(),
                        )
                        .await
                        .map_err(|s| classify_status(&s))?;
                    slot.insert(Open {
                        _client: client,
                        requests,
                        replies: resp.into_inner(),
                    })
                }
                (None, None) => unreachable!("an address is looked up when there is no stream"),
            };
            match open.replies.message().await {
                Ok(Some(reply)) => checked(reply),
                // The server ended the stream while a request was waiting for its reply.
                Ok(None) => Err(CallError::Closed),
                Err(status) => Err(classify_status(&status)),
            }
        }));
        let now = opened.count.load(Relaxed);
        if now != self.seen {
            self.seen = now;
            opened.record(phases);
        }
        let reply = result.map_err(|e| opened.explain(e))?;
        self.body = reply.payload;
        Ok(Reply {
            seq: Some(reply.seq),
            body: &self.body,
            server: Some(Duration::from_nanos(reply.server_ns).into()),
        })
    }

    fn reset(&mut self) {
        // A failed stream is dropped, not ended: its state can no longer be trusted.
        self.stream = None;
    }

    fn connects(&self) -> u64 {
        self.opened.count.load(Relaxed)
    }
}

impl Drop for GrpcStream {
    /// Ends the stream as a client that is done does: its side first (END_STREAM), then
    /// the server's status read. Dropping both at once would reset the stream, which the
    /// server rightly counts as a call cancelled.
    fn drop(&mut self) {
        let Some(Open {
            _client,
            requests,
            mut replies,
        }) = self.stream.take()
        else {
            return;
        };
        drop(requests);
        self.rt.block_on(async {
            let _ = tokio::time::timeout(CLOSE_WAIT, async {
                while let Ok(Some(_)) = replies.message().await {}
            })
            .await;
        });
    }
}
