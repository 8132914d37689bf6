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
    Call, CallError, Counts, Endpoint, Facts, OpenTransportError, Phases, Port, Reply, ServerTime,
    Transport, remaining,
};
use crate::proto::{EchoReply, EchoRequest, STREAM_PATH, StreamCall, StreamReply};
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
    method: Method,
}

/// The stream's method, with where its requests go and where its replies come from.
enum Method {
    /// `rpcbench.v1.Echo/Stream`: the opaque echo.
    Echo(Channel<EchoRequest, EchoReply>),
    /// `rpcbench.v1.WsTest/Stream`: encoded calls (WSTest's, in protobuf).
    WsTest(Channel<StreamCall, StreamReply>),
}

/// Requests out, replies in.
struct Channel<Q, R> {
    requests: mpsc::Sender<Q>,
    replies: tonic::Streaming<R>,
}

impl<Q, R> Channel<Q, R> {
    /// Sends `req` and reads its reply.
    async fn exchange(&mut self, req: Q) -> Result<R, CallError> {
        self.requests
            .send(req)
            .await
            .map_err(|_| CallError::Closed)?;
        self.reply().await
    }

    /// The next reply.
    async fn reply(&mut self) -> Result<R, CallError> {
        match self.replies.message().await {
            Ok(Some(reply)) => Ok(reply),
            // The server ended the stream while a request was waiting for its reply.
            Ok(None) => Err(CallError::Closed),
            Err(status) => Err(classify_status(&status)),
        }
    }

    /// Ends the client's side, then reads what the server still sends until it ends its
    /// own (at most [`CLOSE_WAIT`]).
    async fn close(self) {
        let Channel {
            requests,
            mut replies,
        } = self;
        drop(requests);
        let _ = tokio::time::timeout(CLOSE_WAIT, async {
            while let Ok(Some(_)) = replies.message().await {}
        })
        .await;
    }
}

/// Opens the stream `path` on `client`, its first request `first` already queued (a
/// server may hold its reply headers until it has a message to send), its replies at most
/// `max` bytes each.
async fn open_channel<Q, R>(
    client: &mut Client,
    first: Q,
    path: &'static str,
    max: usize,
) -> Result<Channel<Q, R>, CallError>
where
    Q: prost::Message + Send + 'static,
    R: prost::Message + Default + Send + 'static,
{
    let (requests, queued) = mpsc::channel(REQUEST_QUEUE);
    requests.send(first).await.map_err(|_| CallError::Closed)?;
    let resp = client
        .streaming(
            // Every call of a run accepts the same largest reply.
            super::grpc::limited(ReceiverStream::new(queued), max),
            PathAndQuery::from_static(path),
            tonic_prost::ProstCodec::default(),
        )
        .await
        .map_err(|s| classify_status(&s))?;
    Ok(Channel {
        requests,
        replies: resp.into_inner(),
    })
}

/// What one call of either method brings back.
enum Back {
    Echo(EchoReply),
    WsTest(StreamReply),
}

impl Transport for GrpcStream {
    const FACTS: Facts = Facts {
        summary: "one bidirectional `rpcbench.v1.Echo/Stream` per worker; a call is one message each way",
        persistent: true,
        port: Port::Http,
        alpn: super::tls::Alpn::H2,
        round_trips: Some(1.0),
        files_per_worker: super::FILES_PER_RUNTIME,
        encodings: &[crate::encoding::EncodingKind::Protobuf],
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
        // A stream open on the other method (a run changes from echo to encoded calls)
        // is ended first.
        let encoded = call.rpc.is_some();
        if self
            .stream
            .as_ref()
            .is_some_and(|o| matches!(o.method, Method::WsTest(_)) != encoded)
        {
            self.close();
        }
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
        let max = call.max_body(super::grpc::REPLY_OVERHEAD);
        let result = rt.block_on(super::within(remaining(deadline)?, &connecting, async {
            match (stream, addr) {
                (Some(open), _) => match &mut open.method {
                    Method::Echo(c) => c.exchange(request(call)).await.map(Back::Echo),
                    Method::WsTest(c) => c.exchange(stream_call(call)).await.map(Back::WsTest),
                },
                (slot, Some(addr)) => {
                    let mut client =
                        Box::pin(connect(endpoint, addr, opened.clone(), deadline)).await?;
                    connecting.set(false);
                    client
                        .ready()
                        .await
                        .map_err(|e| super::grpc::classify_error(&e))?;
                    let method = if encoded {
                        let path = WSTEST_STREAM_PATH;
                        Method::WsTest(
                            open_channel(&mut client, stream_call(call), path, max).await?,
                        )
                    } else {
                        Method::Echo(
                            open_channel(&mut client, request(call), STREAM_PATH, max).await?,
                        )
                    };
                    let open = slot.insert(Open {
                        _client: client,
                        method,
                    });
                    match &mut open.method {
                        Method::Echo(c) => c.reply().await.map(Back::Echo),
                        Method::WsTest(c) => c.reply().await.map(Back::WsTest),
                    }
                }
                (None, None) => unreachable!("an address is looked up when there is no stream"),
            }
        }));
        let now = opened.count.load(Relaxed);
        if now != self.seen {
            self.seen = now;
            opened.record(phases);
        }
        match result.map_err(|e| opened.explain(e))? {
            Back::Echo(reply) => {
                let reply = checked(reply)?;
                self.body = reply.payload;
                Ok(Reply {
                    seq: Some(reply.seq),
                    body: &self.body,
                    server: Some(Duration::from_nanos(reply.server_ns).into()),
                })
            }
            Back::WsTest(reply) => {
                self.body = reply.body;
                Ok(Reply {
                    seq: Some(reply.seq),
                    body: &self.body,
                    server: Some(ServerTime {
                        total: Duration::from_nanos(reply.server_ns),
                        decode: Some(Duration::from_nanos(reply.dec_ns)),
                        encode: Some(Duration::from_nanos(reply.enc_ns)),
                    }),
                })
            }
        }
    }

    fn reset(&mut self) {
        // A failed stream is dropped, not ended: its state can no longer be trusted.
        self.stream = None;
    }

    fn counts(&self) -> Counts {
        Counts::connects(self.opened.count.load(Relaxed))
    }
}

impl GrpcStream {
    /// Ends the open stream, if any, as a client that is done does: its side first
    /// (END_STREAM), then the server's status read. Dropping both at once would reset the
    /// stream, which the server rightly counts as a call cancelled.
    fn close(&mut self) {
        let Some(Open { _client, method }) = self.stream.take() else {
            return;
        };
        self.rt.block_on(async {
            match method {
                Method::Echo(c) => c.close().await,
                Method::WsTest(c) => c.close().await,
            }
        });
    }
}

impl Drop for GrpcStream {
    fn drop(&mut self) {
        self.close();
    }
}

/// The path of WSTest's streaming method.
const WSTEST_STREAM_PATH: &str = "/rpcbench.v1.WsTest/Stream";

/// The stream message of an encoded call: its seq, its operation's code and its body.
fn stream_call(call: &Call<'_>) -> StreamCall {
    StreamCall {
        seq: call.seq,
        operation: call.rpc.map_or(0, |rpc| u32::from(rpc.operation.code())),
        body: Bytes::copy_from_slice(call.payload),
    }
}

#[cfg(test)]
mod tests {
    /// What the rest of the program reads from its facts: the connections a healthy run
    /// of 8 workers and 100 calls opens, the port, an event-loop side.
    #[test]
    fn its_facts() {
        super::super::expect_facts("grpc-stream", 8, super::super::Port::Http, false);
    }
}
