//! What every HTTP route shares below the routing: a request's body read within the
//! limits (the max frame, the buffer budget) and the refusals, each a status, a one-line
//! reason and a `/stats` kind. [`super::route`] and [`super::rpc`] both stand on it.

use crate::server::Shared;
use crate::server::budget::{ConnShare, Held, Lease};
use crate::server::stats::Reject;
use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::StatusCode;
use std::sync::Arc;

/// A request's body as the routes read it: hyper's (HTTP/1.1 and HTTP/2) or HTTP/3's
/// ([`super::h3`]).
pub(in crate::server) trait RequestBody:
    hyper::body::Body<Data = Bytes, Error: std::error::Error + Send + Sync + 'static>
    + Send
    + Unpin
    + 'static
{
}

impl<B> RequestBody for B where
    B: hyper::body::Body<Data = Bytes, Error: std::error::Error + Send + Sync + 'static>
        + Send
        + Unpin
        + 'static
{
}

/// A request the server refuses, with the one-line reason sent back as the body.
#[derive(Debug, thiserror::Error)]
pub(super) enum HttpError {
    #[error("bad request: {0}")]
    BadRequest(String),
    #[error("no such path: {0}")]
    NotFound(String),
    #[error("method not allowed; allowed: {0}")]
    MethodNotAllowed(&'static str),
    #[error("body is larger than the maximum of {0} bytes")]
    PayloadTooLarge(u32),
    /// A body whose content type no encoding has, or another route's.
    #[error("unsupported media type: {0}")]
    UnsupportedMediaType(String),
    /// The client reset its HTTP/2 stream before the body was in: nobody reads the reply.
    #[error("stream reset by the client")]
    StreamReset,
    /// The body does not fit in what is left of the server's buffer budget.
    #[error("the server's buffer budget is spent; try again later")]
    OverBudget,
}

impl HttpError {
    /// The reply's status.
    pub(super) fn status(&self) -> StatusCode {
        match self {
            HttpError::BadRequest(_) => StatusCode::BAD_REQUEST,
            HttpError::NotFound(_) => StatusCode::NOT_FOUND,
            HttpError::MethodNotAllowed(_) => StatusCode::METHOD_NOT_ALLOWED,
            HttpError::PayloadTooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            HttpError::UnsupportedMediaType(_) => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            // Never seen: the stream is gone.
            HttpError::StreamReset => StatusCode::BAD_REQUEST,
            HttpError::OverBudget => StatusCode::SERVICE_UNAVAILABLE,
        }
    }

    /// The `/stats` counter the refusal is counted in.
    pub(super) fn kind(&self) -> Reject {
        match self {
            HttpError::BadRequest(_) => Reject::HttpBadRequest,
            HttpError::NotFound(_) => Reject::HttpNotFound,
            HttpError::MethodNotAllowed(_) => Reject::HttpMethodNotAllowed,
            HttpError::PayloadTooLarge(_) => Reject::HttpPayloadTooLarge,
            HttpError::UnsupportedMediaType(_) => Reject::HttpUnsupportedMediaType,
            HttpError::StreamReset => Reject::Http2StreamReset,
            HttpError::OverBudget => Reject::OverBudgetHttp,
        }
    }
}

/// Reads a request body of `declared` bytes (when the client said) into a buffer leased
/// from the budget for its capacity: all of it at once when declared, else growing with
/// what arrives. At most the max frame; over the budget the request is refused and what
/// was read so far let go.
pub(super) async fn read_body(
    body: &mut impl RequestBody,
    declared: Option<u64>,
    shared: &Shared,
    share: &Arc<ConnShare>,
) -> Result<Bytes, HttpError> {
    let max = shared.config.max_frame as usize;
    let lease = Lease::new(&shared.stats.budget, Some(share), declared.unwrap_or(0));
    let mut held = Held::with_capacity(lease, declared.unwrap_or(0) as usize)
        .map_err(|_| HttpError::OverBudget)?;
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| {
            if reset_by_client(&e) {
                HttpError::StreamReset
            } else {
                HttpError::BadRequest(format!("cannot read body: {e}"))
            }
        })?;
        let Ok(data) = frame.into_data() else {
            // Trailers: nothing to echo.
            continue;
        };
        if held.len() + data.len() > max {
            return Err(HttpError::PayloadTooLarge(shared.config.max_frame));
        }
        held.extend(&data, max).map_err(|_| HttpError::OverBudget)?;
    }
    Ok(held.freeze())
}

/// Whether a body read failed because the client reset its stream: HTTP/2's RST_STREAM
/// (hyper hands back the `h2` crate's error as the source) or HTTP/3's RESET_STREAM.
fn reset_by_client(e: &(dyn std::error::Error + 'static)) -> bool {
    std::iter::successors(Some(e), |e| e.source()).any(|e| {
        e.downcast_ref::<h2::Error>()
            .is_some_and(|e| e.is_reset() && e.is_remote())
            || matches!(
                e.downcast_ref::<h3::error::StreamError>(),
                Some(h3::error::StreamError::RemoteTerminate { .. })
            )
    })
}
