//! What an HTTP request gets: the routes (`/echo`, `/healthz`, `/stats`, `/metrics`, and
//! WSTest's calls under `/rpc`, in [`super::rpc`]), the parsing of `/echo`'s parameters,
//! and how a refusal is answered (the refusals themselves, and the reading of a body
//! within the limits, are [`super::body`]'s, which `rpc` shares).
//!
//! Apart from the connection's life ([`super`]) and from the bytes of the reply
//! ([`super::reply`]): this is the part a new route or parameter changes, and the part
//! whose rules (limits, statuses, `/stats` counters) `docs/transports.md` documents.

use super::body::{HttpError, RequestBody, read_body};
use super::params::EchoParams;
use super::reply::{self, Body, SEQ_NAME};
use crate::server::Shared;
use crate::server::budget::ConnShare;
use crate::server::payload::Payload;
use crate::server::stats::Reject;
use crate::wire::SEQ_HEADER;
use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::body::Body as _;
use hyper::header::{self, HeaderValue};
use hyper::http::request::Parts;
use hyper::{Method, Request, Response, StatusCode, Version};
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

/// Answers one request on a connection whose share of the buffer budget is `share`.
pub(super) async fn route(
    req: Request<impl RequestBody>,
    shared: &Shared,
    share: &Arc<ConnShare>,
) -> Response<Body> {
    shared.stats.http.requests.fetch_add(1, Relaxed);
    let got_it = Instant::now();
    let (mut parts, mut body) = req.into_parts();
    let result = match (parts.uri.path(), &parts.method) {
        ("/echo", &Method::POST | &Method::GET) => {
            echo(&mut parts, &mut body, shared, share, got_it).await
        }
        ("/healthz", &Method::GET) => Ok(reply::text(StatusCode::OK, "ok")),
        ("/stats", &Method::GET) => Ok(reply::json(
            serde_json::to_vec(&shared.stats.snapshot()).unwrap_or_default(),
        )),
        ("/metrics", &Method::GET) => Ok(reply::metrics(crate::server::metrics::render(
            &shared.stats.snapshot(),
        ))),
        (path, &Method::POST) if super::rpc::is_rpc(path) => {
            super::rpc::call(&parts, &mut body, shared, share, got_it).await
        }
        ("/echo", _) => Err(HttpError::MethodNotAllowed("GET, POST")),
        ("/soap", &Method::GET) => super::rpc::wsdl(&parts),
        (path, _) if super::rpc::is_rpc(path) => Err(HttpError::MethodNotAllowed("POST")),
        ("/healthz" | "/stats" | "/metrics", _) => Err(HttpError::MethodNotAllowed("GET")),
        (path, _) => Err(HttpError::NotFound(path.to_string())),
    };
    result.unwrap_or_else(|e| {
        if parts.version < Version::HTTP_2 && !body.is_end_stream() {
            drain(body);
        }
        shared.stats.reject(e.kind());
        let mut resp = reply::text(e.status(), &format!("{e}\n"));
        if let HttpError::MethodNotAllowed(allow) = e {
            resp.headers_mut()
                .insert(header::ALLOW, HeaderValue::from_static(allow));
        }
        resp
    })
}

/// How long a refused HTTP/1.1 request's unread body is read and dropped.
///
/// The refusal is sent before the body is in. Were the connection closed with the body
/// still arriving, the kernel would answer the client's next segments with a reset, which
/// can reach the client before it has read the refusal (curl: "Failed sending data to the
/// peer"). Read and dropped in place, the body costs no memory, and once it is in the
/// connection serves the next request. A body still coming after this long is cut off.
/// nginx does the same for its refusals (`lingering_close`, 5 s `lingering_timeout`).
const DRAIN_FOR: Duration = Duration::from_secs(5);

/// Reads `body` to its end, or for [`DRAIN_FOR`], dropping every frame, in a task of its
/// own: the refusal is written meanwhile.
fn drain(mut body: impl RequestBody) {
    tokio::spawn(async move {
        let to_the_end = async { while let Some(Ok(_)) = body.frame().await {} };
        let _ = tokio::time::timeout(DRAIN_FOR, to_the_end).await;
    });
}

/// The reply to a request refused at once because the buffer budget is spent (an HTTP/2
/// stream the budget cannot hold): 503 with no body, so that the stream ends with its
/// headers whatever its window, counted.
pub(super) fn over_budget(shared: &Shared) -> Response<Body> {
    shared.stats.http.requests.fetch_add(1, Relaxed);
    shared.stats.reject(Reject::OverBudgetHttp);
    reply::empty(StatusCode::SERVICE_UNAVAILABLE)
}

/// `/echo`: checks the parameters against the limits, reads the body (at most the max
/// frame, within the buffer budget), waits `delay_us` after `got_it`, and replies with the
/// body or the pattern.
async fn echo(
    parts: &mut Parts,
    body: &mut impl RequestBody,
    shared: &Shared,
    share: &Arc<ConnShare>,
    got_it: Instant,
) -> Result<Response<Body>, HttpError> {
    let config = &shared.config;
    let mut params = EchoParams::parse(parts.uri.query())?;
    if let Some(value) = parts.headers.get(&SEQ_NAME) {
        let seq = value
            .to_str()
            .ok()
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| {
                HttpError::BadRequest(format!("{SEQ_HEADER} {value:?} is not an unsigned integer"))
            })?;
        params.seq = Some(seq);
    }
    if u64::from(params.delay_us) > config.max_delay.as_micros() as u64 {
        return Err(HttpError::BadRequest(format!(
            "delay_us={} is above the maximum of {} µs",
            params.delay_us,
            config.max_delay.as_micros()
        )));
    }
    if let Some(n) = params.reply_len.filter(|&n| n > config.max_frame) {
        return Err(HttpError::BadRequest(format!(
            "reply_len={n} is above the maximum of {} bytes",
            config.max_frame
        )));
    }
    let is_get = parts.method == Method::GET;
    if is_get && params.reply_len.is_none() {
        return Err(HttpError::BadRequest("GET /echo needs ?reply_len=N".into()));
    }
    let body = if body.is_end_stream() {
        // No body (a GET, or Content-Length: 0): skip the collecting machinery.
        Bytes::new()
    } else {
        // Refuse a declared oversized body before reading any of it.
        let declared = parts
            .headers
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok());
        if declared.is_some_and(|n| n > u64::from(config.max_frame)) {
            return Err(HttpError::PayloadTooLarge(config.max_frame));
        }
        read_body(body, declared, shared, share).await?
    };
    if params.delay_us > 0 {
        crate::server::sleep_until(got_it + Duration::from_micros(params.delay_us.into())).await;
    }
    let payload = match params.reply_len {
        // The echo is the request's own buffer, not a copy: it stays leased until sent.
        None => Payload::Bytes(body),
        Some(n) => Payload::pattern(params.seq.unwrap_or(0), n as usize),
    };
    Ok(reply::echo(
        payload,
        std::mem::take(&mut parts.headers),
        params.seq,
        got_it,
    ))
}
