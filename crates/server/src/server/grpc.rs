//! gRPC on the HTTP port: `rpcbench.v1.Echo` (`proto/rpcbench.proto`), WSTest's
//! `rpcbench.v1.WsTest` (`proto/wstest.proto`, [`grpc_wstest`]) and server reflection, for the HTTP/2 requests whose `content-type` is `application/grpc`.
//!
//! On the HTTP port rather than on a `--grpc` port of its own: gRPC is HTTP/2, which that
//! port already speaks with prior knowledge, so the HTTP listener hands the request to
//! the echo service ([`grpc_echo`], gRPC's wire written by hand so that no message is made
//! whole) or to tonic's reflection services, and gets the reply back. A gRPC
//! client then reaches the server wherever an HTTP/2 one does (the embedded server of
//! `rpcbench` included), and the connection limit, idle timeout, shutdown and byte
//! counts of the HTTP listener hold for gRPC with no code of their own. Rejected: tonic's
//! own server on a second port (a second accept loop and set of limits to keep in step).
//!
//! What is gRPC's own is counted here: calls and messages in `/stats`' `grpc`, and every
//! call that did not end with status OK, by its status ([`Reject`]'s `grpc_*` kinds, and
//! `over_budget_grpc` for a message the buffer budget could not hold).

use super::Shared;
use super::budget::ConnShare;
use super::grpc_body::{CallNote, RequestBody};
use super::stats::Reject;
use super::{grpc_echo, grpc_wstest};
use bytes::Bytes;
use hyper::body::{Body, Frame, Incoming, SizeHint};
use hyper::header::HeaderMap;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::task::{Context, Poll};
use tonic::{Code, Status};

/// The reflection services of one server, cloned (cheaply: they hold `Arc`s) for each
/// call; the echo service is [`grpc_echo`]'s.
#[derive(Clone)]
pub(super) struct Grpc {
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
    /// The reflection services.
    pub(super) fn new() -> Grpc {
        let reflection = || {
            tonic_reflection::server::Builder::configure()
                .register_encoded_file_descriptor_set(crate::proto::FILE_DESCRIPTOR_SET)
        };
        Grpc {
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
/// wraps the reply so that its outcome is counted. `share` is the connection's share of
/// the buffer budget.
pub(super) async fn serve(
    grpc: &Grpc,
    req: hyper::Request<Incoming>,
    shared: &Arc<Shared>,
    share: &Arc<ConnShare>,
) -> hyper::Response<GrpcBody> {
    // An HTTP request like any other in `http.requests` (so that what the port answered
    // adds up whatever the clients spoke), and a gRPC call in `grpc.calls`.
    shared.stats.http.requests.fetch_add(1, Relaxed);
    shared.stats.grpc.calls.fetch_add(1, Relaxed);
    // Counts the call as cancelled if this future is dropped before the reply exists:
    // hyper drops it when the client resets the stream while the request is being read.
    let note = Arc::new(CallNote::default());
    let outcome = Outcome {
        shared: shared.clone(),
        counted: false,
        note: note.clone(),
    };
    let req = req.map(|inner| RequestBody { inner, note });
    let path = req.uri().path();
    let resp = if path.starts_with("/grpc.reflection.v1.") {
        // The generated services are always ready (`poll_ready` returns `Ready(Ok)`), so
        // `call` is made without it.
        (grpc.reflection_v1)(req).await
    } else if path.starts_with("/grpc.reflection.v1alpha.") {
        (grpc.reflection_v1alpha)(req).await
    } else if path == grpc_echo::CALL || path == grpc_echo::STREAM {
        let stream = path == grpc_echo::STREAM;
        grpc_echo::serve(req, stream, shared, share).await
    } else if let Some(method) = path.strip_prefix(grpc_wstest::SERVICE) {
        let method = method.to_string();
        grpc_wstest::serve(req, &method, shared, share).await
    } else {
        // An unknown service or method, as tonic's generated router answers it.
        grpc_echo::refuse(Status::unimplemented(""))
    };
    GrpcBody::wrap(resp, outcome)
}

/// The reply to a call refused at once because the buffer budget is spent (an HTTP/2
/// stream the budget cannot hold): RESOURCE_EXHAUSTED, counted as over budget.
pub(super) fn over_budget(shared: &Arc<Shared>) -> hyper::Response<GrpcBody> {
    shared.stats.http.requests.fetch_add(1, Relaxed);
    shared.stats.grpc.calls.fetch_add(1, Relaxed);
    let note = Arc::new(CallNote::default());
    note.over_budget.store(true, Relaxed);
    let outcome = Outcome {
        shared: shared.clone(),
        counted: false,
        note,
    };
    let status = Status::resource_exhausted("the server's buffer budget is spent; try again later");
    GrpcBody::wrap(grpc_echo::refuse(status), outcome)
}

/// Counts one call's outcome exactly once: by the `grpc-status` it ended with, or as
/// cancelled when it is dropped first or its request broke off.
struct Outcome {
    shared: Arc<Shared>,
    counted: bool,
    /// What the call's [`RequestBody`] noted.
    note: Arc<CallNote>,
}

impl Outcome {
    /// Counts the call by the status in `map` (headers of a trailers-only reply, or the
    /// trailers); a reply with no `grpc-status` at all is counted as an other error.
    fn ended(&mut self, map: Option<&HeaderMap>) {
        let code = map
            .and_then(|m| m.get("grpc-status"))
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<i32>().ok())
            .map(Code::from_i32);
        match code {
            Some(code) => self.failed(code),
            None => self.count(Some(Reject::GrpcOtherError)),
        }
    }

    /// Counts the call by `code`, OK included.
    fn failed(&mut self, code: Code) {
        let kind = match code {
            _ if self.note.broke.load(Relaxed) => Reject::GrpcCancelled,
            Code::Ok => return self.count(None),
            Code::ResourceExhausted if self.note.over_budget.load(Relaxed) => {
                Reject::OverBudgetGrpc
            }
            code => reject_of(code),
        };
        self.count(Some(kind));
    }

    /// Counts the call as `kind` (`None`: it went well), unless it was counted already.
    fn count(&mut self, kind: Option<Reject>) {
        if !std::mem::replace(&mut self.counted, true)
            && let Some(kind) = kind
        {
            self.shared.stats.reject(kind);
        }
    }
}

impl Drop for Outcome {
    fn drop(&mut self) {
        self.count(Some(Reject::GrpcCancelled));
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

/// The body of a gRPC reply, with the outcome counted when the trailers pass (or at once
/// for a trailers-only reply).
pub(super) struct GrpcBody {
    inner: tonic::body::Body,
    outcome: Outcome,
}

impl GrpcBody {
    fn wrap(
        resp: hyper::Response<tonic::body::Body>,
        mut outcome: Outcome,
    ) -> hyper::Response<GrpcBody> {
        let (parts, inner) = resp.into_parts();
        if parts.headers.contains_key("grpc-status") {
            // Trailers-only: the status is in the headers and the body is empty.
            outcome.ended(Some(&parts.headers));
        }
        hyper::Response::from_parts(parts, GrpcBody { inner, outcome })
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
            Some(Ok(frame)) => {
                if let Some(trailers) = frame.trailers_ref() {
                    this.outcome.ended(Some(trailers));
                }
                Some(Ok(frame))
            }
            Some(Err(status)) => {
                this.outcome.failed(status.code());
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
