//! gRPC on the HTTP port: `rpcbench.v1.Echo` (`proto/rpcbench.proto`) and server
//! reflection, for the HTTP/2 requests whose `content-type` is `application/grpc`.
//!
//! On the HTTP port rather than on a `--grpc` port of its own: gRPC is HTTP/2, which that
//! port already speaks with prior knowledge, and tonic's generated server is a tower
//! service, so the HTTP listener hands it the request and gets its reply back. A gRPC
//! client then reaches the server wherever an HTTP/2 one does (the embedded server of
//! `rpcbench` included), and the connection limit, idle timeout, shutdown and byte
//! counts of the HTTP listener hold for gRPC with no code of their own. Rejected: tonic's
//! own server on a second port (a second accept loop and set of limits to keep in step).
//!
//! What is gRPC's own is counted here: calls and messages in `/stats`' `grpc`, and every
//! call that did not end with status OK, by its status ([`Reject`]'s `grpc_*` kinds).

use super::Shared;
use super::stats::Reject;
use crate::proto::echo_server::{Echo, EchoServer};
use crate::proto::{EchoReply, EchoRequest};
use crate::wire::{self, RESPONSE_OVERHEAD};
use bytes::Bytes;
use hyper::body::{Body, Frame, Incoming, SizeHint};
use hyper::header::{HeaderMap, HeaderName};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use tokio_stream::wrappers::ReceiverStream;
use tonic::codegen::Service as _;
use tonic::{Code, Request, Response, Status, Streaming};

/// The `server-timing` trailer, in the format of the HTTP replies' header (`app;dur=<ms>`).
static SERVER_TIMING: HeaderName = HeaderName::from_static("server-timing");

/// The server's time for a `Call`, handed from [`EchoService`] to [`GrpcBody`] in the
/// reply's extensions (which tonic carries over to the HTTP reply).
#[derive(Debug, Clone, Copy)]
struct ServerTime(Duration);

/// Replies a `Stream` may have written and not yet sent: one is enough for a client that
/// waits for each reply (the benchmark's), and a few let a pipelining client keep the
/// stream busy without the server queueing without bound.
const STREAM_QUEUE: usize = 16;

/// The gRPC services of one server, cloned (cheaply: they hold `Arc`s) for each call.
#[derive(Clone)]
pub(super) struct Grpc {
    echo: EchoServer<EchoService>,
    reflection_v1: Route,
    reflection_v1alpha: Route,
}

/// A gRPC service behind a function pointer: how [`Grpc`] holds the reflection services,
/// whose type tonic-reflection's builder returns as an `impl Trait` that cannot be named.
/// One more box per reflection call, which only tools make.
type Route = Arc<dyn Fn(hyper::Request<RequestBody>) -> RouteFuture + Send + Sync>;

/// What a [`Route`] returns.
type RouteFuture = Pin<Box<dyn Future<Output = hyper::Response<tonic::body::Body>> + Send>>;

/// `svc` as a [`Route`].
fn route<S>(svc: S) -> Route
where
    S: tonic::codegen::Service<
            hyper::Request<RequestBody>,
            Response = hyper::Response<tonic::body::Body>,
            Error = std::convert::Infallible,
        > + Clone
        + Send
        + Sync
        + 'static,
    S::Future: Send + 'static,
{
    Arc::new(move |req| {
        let fut = svc.clone().call(req);
        Box::pin(async move {
            match fut.await {
                Ok(resp) => resp,
                Err(never) => match never {},
            }
        })
    })
}

impl Grpc {
    /// The services, with the server's limits on message sizes.
    pub(super) fn new(shared: Arc<Shared>) -> Grpc {
        let max = shared.config.max_frame as usize;
        let reflection = || {
            tonic_reflection::server::Builder::configure()
                .register_encoded_file_descriptor_set(crate::proto::FILE_DESCRIPTOR_SET)
        };
        Grpc {
            echo: EchoServer::new(EchoService { shared })
                .max_decoding_message_size(max)
                .max_encoding_message_size(max),
            // The descriptor sets are compiled in; building from them fails only if they
            // were corrupt, which the unit test below would have caught.
            reflection_v1: route(
                reflection()
                    .build_v1()
                    .expect("the compiled-in descriptor sets are valid"),
            ),
            reflection_v1alpha: route(
                reflection()
                    .build_v1alpha()
                    .expect("the compiled-in descriptor sets are valid"),
            ),
        }
    }
}

/// True when `req` is a gRPC call: HTTP/2 with `content-type: application/grpc` (or one
/// of its `+proto` / `;` variants).
pub(super) fn is_grpc<B>(req: &hyper::Request<B>) -> bool {
    req.version() == hyper::Version::HTTP_2
        && req
            .headers()
            .get(hyper::header::CONTENT_TYPE)
            .is_some_and(|v| v.as_bytes().starts_with(b"application/grpc"))
}

/// Answers one gRPC call: routes it by path to the echo service or to reflection, and
/// wraps the reply so that its outcome is counted and `server-timing` travels as a trailer.
pub(super) async fn serve(
    grpc: &Grpc,
    req: hyper::Request<Incoming>,
    shared: &Arc<Shared>,
) -> hyper::Response<GrpcBody> {
    // An HTTP request like any other in `http.requests` (so that what the port answered
    // adds up whatever the clients spoke), and a gRPC call in `grpc.calls`.
    shared.stats.http.requests.fetch_add(1, Relaxed);
    shared.stats.grpc.calls.fetch_add(1, Relaxed);
    // Counts the call as cancelled if this future is dropped before the reply exists:
    // hyper drops it when the client resets the stream while the request is being read.
    let broke = Arc::new(AtomicBool::new(false));
    let outcome = Outcome {
        shared: shared.clone(),
        counted: false,
        broke: broke.clone(),
    };
    let req = req.map(|inner| RequestBody { inner, broke });
    let path = req.uri().path();
    // The generated services are always ready (`poll_ready` returns `Ready(Ok)`), so
    // `call` is made without it; their error type is `Infallible`.
    let resp = if path.starts_with("/grpc.reflection.v1.") {
        (grpc.reflection_v1)(req).await
    } else if path.starts_with("/grpc.reflection.v1alpha.") {
        (grpc.reflection_v1alpha)(req).await
    } else {
        // Everything else, an unknown service included, goes to the echo service, whose
        // generated router answers an unknown method with UNIMPLEMENTED.
        match grpc.echo.clone().call(req).await {
            Ok(resp) => resp,
            Err(never) => match never {},
        }
    };
    GrpcBody::wrap(resp, outcome)
}

/// The body of a gRPC request: hyper's, noting when it failed (the client reset the
/// stream, or the connection broke), so that the call is counted as cancelled whatever
/// status tonic then makes of the error (it reads hyper's errors as UNKNOWN).
pub(super) struct RequestBody {
    inner: Incoming,
    broke: Arc<AtomicBool>,
}

impl Body for RequestBody {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        let this = self.get_mut();
        let frame = Pin::new(&mut this.inner).poll_frame(cx);
        if let Poll::Ready(Some(Err(_))) = &frame {
            this.broke.store(true, Relaxed);
        }
        frame
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// Counts one call's outcome exactly once: by the `grpc-status` it ended with, or as
/// cancelled when it is dropped first or its request broke off.
struct Outcome {
    shared: Arc<Shared>,
    counted: bool,
    /// Set by the call's [`RequestBody`] when the request failed.
    broke: Arc<AtomicBool>,
}

impl Outcome {
    /// Counts the call by the status in `map` (headers of a trailers-only reply, or the
    /// trailers); a reply with no `grpc-status` at all is counted as an other error.
    fn ended(&mut self, map: Option<&HeaderMap>) {
        if self.counted {
            return;
        }
        self.counted = true;
        let code = map
            .and_then(|m| m.get("grpc-status"))
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<i32>().ok())
            .map(Code::from_i32);
        let kind = match code {
            _ if self.broke.load(Relaxed) => Reject::GrpcCancelled,
            Some(Code::Ok) => return,
            Some(code) => reject_of(code),
            None => Reject::GrpcOtherError,
        };
        self.shared.stats.reject(kind);
    }
}

impl Drop for Outcome {
    fn drop(&mut self) {
        if !self.counted {
            self.shared.stats.reject(Reject::GrpcCancelled);
        }
    }
}

/// The `/stats` counter of a call that ended with `code` (not OK).
fn reject_of(code: Code) -> Reject {
    match code {
        Code::InvalidArgument => Reject::GrpcInvalidArgument,
        Code::ResourceExhausted => Reject::GrpcResourceExhausted,
        // What tonic's decoder answers for a frame it cannot take: INTERNAL for a lying
        // prefix, a compressed flag without encoding, or bytes that are not protobuf;
        // OUT_OF_RANGE for a message above the max frame.
        Code::Internal | Code::OutOfRange => Reject::GrpcMalformed,
        Code::Unimplemented => Reject::GrpcUnimplemented,
        Code::Cancelled => Reject::GrpcCancelled,
        _ => Reject::GrpcOtherError,
    }
}

/// The body of a gRPC reply: tonic's, with the outcome counted when the trailers pass (or
/// at once for a trailers-only reply), and the server's time added to the trailers as
/// `server-timing`.
///
/// Added here, because tonic gives a handler no way to add trailers to a successful reply
/// (only a failed one's `Status` metadata becomes trailers): [`EchoService`] leaves its
/// time in the reply's extensions, and here it goes into the trailers, where gRPC puts
/// what is known once a call is over.
pub(super) struct GrpcBody {
    inner: tonic::body::Body,
    timing: Option<ServerTime>,
    outcome: Outcome,
}

impl GrpcBody {
    fn wrap(
        resp: hyper::Response<tonic::body::Body>,
        mut outcome: Outcome,
    ) -> hyper::Response<GrpcBody> {
        let (mut parts, inner) = resp.into_parts();
        let timing = parts.extensions.remove::<ServerTime>();
        if parts.headers.contains_key("grpc-status") {
            // Trailers-only: the status is in the headers and the body is empty.
            outcome.ended(Some(&parts.headers));
        }
        hyper::Response::from_parts(
            parts,
            GrpcBody {
                inner,
                timing,
                outcome,
            },
        )
    }
}

impl Body for GrpcBody {
    type Data = Bytes;
    type Error = Status;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
        let this = self.get_mut();
        let frame = match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Pending => return Poll::Pending,
            Poll::Ready(frame) => frame,
        };
        Poll::Ready(match frame {
            Some(Ok(frame)) => match frame.into_trailers() {
                Ok(mut trailers) => {
                    this.outcome.ended(Some(&trailers));
                    if let Some(ServerTime(took)) = this.timing.take() {
                        trailers.insert(SERVER_TIMING.clone(), super::http::server_timing(took));
                    }
                    Some(Ok(Frame::trailers(trailers)))
                }
                Err(data) => Some(Ok(data)),
            },
            Some(Err(status)) => {
                if !this.outcome.counted {
                    this.outcome.counted = true;
                    let kind = if this.outcome.broke.load(Relaxed) {
                        Reject::GrpcCancelled
                    } else {
                        reject_of(status.code())
                    };
                    this.outcome.shared.stats.reject(kind);
                }
                Some(Err(status))
            }
            None => {
                // Ended without trailers: only a trailers-only reply may, and it was
                // counted from its headers.
                this.outcome.ended(None);
                None
            }
        })
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// The echo service: the TCP protocol's rules, with refusals as gRPC statuses.
#[derive(Debug)]
struct EchoService {
    shared: Arc<Shared>,
}

/// What one request asks for, once checked against the server's limits.
struct Checked {
    seq: u64,
    reply_len: Option<usize>,
    delay: Duration,
    payload: Bytes,
}

impl EchoService {
    /// Checks `req` as the TCP server does (a reply must fit in the max frame with its
    /// framing; a delay must be within the max delay), with gRPC's statuses: a value no
    /// request may carry (negative) is INVALID_ARGUMENT, one above this server's limits
    /// RESOURCE_EXHAUSTED.
    fn check(&self, req: EchoRequest) -> Result<Checked, Status> {
        let config = &self.shared.config;
        let reply_len = match req.reply_len {
            None => None,
            Some(n) => Some(
                u64::try_from(n)
                    .map_err(|_| Status::invalid_argument(format!("reply_len={n} is negative")))?,
            ),
        };
        let delay_us = u64::try_from(req.delay_us).map_err(|_| {
            Status::invalid_argument(format!("delay_us={} is negative", req.delay_us))
        })?;
        let max_delay = config.max_delay.as_micros() as u64;
        if delay_us > max_delay {
            return Err(Status::resource_exhausted(format!(
                "delay_us={delay_us} is above the maximum of {max_delay} µs"
            )));
        }
        // An echo counts too, as on TCP: the reply carries more than the request.
        let max_reply = u64::from(config.max_frame.saturating_sub(RESPONSE_OVERHEAD));
        let len = reply_len.unwrap_or(req.payload.len() as u64);
        if len > max_reply {
            return Err(Status::resource_exhausted(format!(
                "a reply of {len} bytes is above the maximum of {max_reply}"
            )));
        }
        Ok(Checked {
            seq: req.seq,
            reply_len: reply_len.map(|n| n as usize),
            delay: Duration::from_micros(delay_us),
            payload: req.payload,
        })
    }

    /// Answers one checked request that was whole at `got_it`: waits out its delay, then
    /// the echo or the pattern, with the time since `got_it`.
    async fn answer(&self, req: Checked, got_it: Instant) -> EchoReply {
        if !req.delay.is_zero() {
            crate::server::sleep_until(got_it + req.delay).await;
        }
        let payload = match req.reply_len {
            None => req.payload,
            Some(n) => match wire::pattern_static(req.seq, n) {
                Some(slice) => Bytes::from_static(slice),
                None => {
                    let mut p = Vec::new();
                    wire::pattern(req.seq, n, &mut p);
                    Bytes::from(p)
                }
            },
        };
        self.shared.stats.grpc.messages.fetch_add(1, Relaxed);
        EchoReply {
            seq: req.seq,
            status: wire::Status::Ok as u32,
            server_ns: got_it.elapsed().as_nanos() as u64,
            payload,
        }
    }
}

#[tonic::async_trait]
impl Echo for EchoService {
    async fn call(&self, request: Request<EchoRequest>) -> Result<Response<EchoReply>, Status> {
        let got_it = Instant::now();
        let checked = self.check(request.into_inner())?;
        let reply = self.answer(checked, got_it).await;
        let mut resp = Response::new(reply);
        resp.extensions_mut().insert(ServerTime(got_it.elapsed()));
        Ok(resp)
    }

    type StreamStream = ReceiverStream<Result<EchoReply, Status>>;

    async fn stream(
        &self,
        request: Request<Streaming<EchoRequest>>,
    ) -> Result<Response<Self::StreamStream>, Status> {
        let mut inbound = request.into_inner();
        let (tx, rx) = tokio::sync::mpsc::channel(STREAM_QUEUE);
        let service = EchoService {
            shared: self.shared.clone(),
        };
        // One task per stream answers its requests one after another, so replies leave
        // in request order. It ends when the client ends its side, when a request is
        // refused (the status ends the stream, as gRPC has no status per message), or
        // when the reply side is gone (the stream was reset).
        tokio::spawn(async move {
            loop {
                let next = inbound.message().await;
                let got_it = Instant::now();
                let reply = match next {
                    Ok(None) => return,
                    Ok(Some(req)) => match service.check(req) {
                        Ok(checked) => Ok(service.answer(checked, got_it).await),
                        Err(status) => Err(status),
                    },
                    Err(status) => Err(status),
                };
                let last = reply.is_err();
                if tx.send(reply).await.is_err() || last {
                    return;
                }
            }
        });
        Ok(Response::new(ReceiverStream::new(rx)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_status_but_ok_has_a_counter() {
        for code in 1..=16 {
            let code = Code::from_i32(code);
            let kind = reject_of(code);
            assert!(kind.name().starts_with("grpc_"), "{code:?}");
        }
        assert_eq!(
            reject_of(Code::InvalidArgument),
            Reject::GrpcInvalidArgument
        );
        assert_eq!(
            reject_of(Code::ResourceExhausted),
            Reject::GrpcResourceExhausted
        );
    }
}
