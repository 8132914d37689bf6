//! WSTest's calls over HTTP: `POST /rpc/{Operation}` for the encodings whose body does not
//! name its operation (postcard, protobuf, MessagePack), `POST /rpc` for JSON-RPC 2.0,
//! `POST /RPC2` for XML-RPC, `POST /soap` for SOAP 1.1 (its `SOAPAction`, where sent,
//! held to the body's operation) and `GET /soap?wsdl` for its WSDL.
//! The `Content-Type` chooses the encoding ([`crate::encoding`]); the body is really
//! decoded into the typed message, and the reply encoded from it, so a call costs what the
//! encoding costs.
//!
//! - **Memory.** The body is read within the buffer budget as `/echo`'s is; the decoded
//!   message and its reply are leased as `crate::server::wstest` says.
//! - **Refusals**, each counted (`/stats`): those of `wstest` (`rpc_malformed`,
//!   `rpc_too_deep`, `rpc_bad_call`, `rpc_doctype`), in the encoding's own error form
//!   (JSON-RPC's error object and XML-RPC's fault under 200, SOAP's Fault under 500), the
//!   binary encodings' as 400 and a one-line reason; a content type that no encoding has
//!   on that route is 415.
//! - **Timing.** `server-timing: app;dur=…, dec;dur=…, enc;dur=…` (milliseconds): the
//!   whole request from having its head, and the decode and encode within it. `?delay_us=N`
//!   waits as on `/echo`, from having the head.

use super::body::{HttpError, RequestBody, read_body};
use super::reply::{self, Body};
use crate::encoding::{EncodingKind, Operation, Route, soap};
use crate::server::Shared;
use crate::server::budget::ConnShare;
use crate::server::wstest::{self, Refusal};
use hyper::header;
use hyper::http::request::Parts;
use hyper::{Response, StatusCode};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// True for a path this module answers: an encoding's route.
pub(super) fn is_rpc(path: &str) -> bool {
    EncodingKind::ALL
        .iter()
        .any(|e| routes(e.facts().route, path))
}

/// True when `path` is on `route`.
fn routes(route: Route, path: &str) -> bool {
    match route {
        Route::Fixed(fixed) => path == fixed,
        Route::PerOperation(prefix) => path.starts_with(prefix),
    }
}

/// `GET /soap?wsdl`: SOAP's service description, its address this server's own as the
/// client reached it (the `Host` header, or the `:authority`).
pub(super) fn wsdl(parts: &Parts) -> Result<Response<Body>, HttpError> {
    if parts.uri.query() != Some("wsdl") {
        return Err(HttpError::MethodNotAllowed("POST"));
    }
    let host = parts
        .headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .or_else(|| parts.uri.authority().map(|a| a.as_str()))
        .filter(|h| {
            h.bytes()
                .all(|b| b.is_ascii_graphic() && !b"<>&\"'".contains(&b))
        })
        .unwrap_or("localhost");
    let address = format!("http://{host}/soap");
    let body = soap::WSDL.replace("{ADDRESS}", &address);
    Ok(reply::bytes(body.into(), "text/xml; charset=utf-8"))
}

/// Answers a WSTest call: the encoding from the content type, the operation from the
/// path (or the body), the echo of the decoded message, encoded again.
pub(super) async fn call(
    parts: &Parts,
    body: &mut impl RequestBody,
    shared: &Shared,
    share: &Arc<ConnShare>,
    got_it: Instant,
) -> Result<Response<Body>, HttpError> {
    let path = parts.uri.path();
    let encoding = encoding_of(parts, path).ok_or_else(|| unsupported(parts))?;
    // `/echo`'s query: a delay before the reply, as there; a pattern reply has no
    // meaning for a message that is echoed.
    let params = super::params::EchoParams::parse(parts.uri.query())?;
    if params.reply_len.is_some() {
        return Err(HttpError::BadRequest(
            "reply_len is /echo's: a WSTest call is echoed".into(),
        ));
    }
    if u64::from(params.delay_us) > shared.config.max_delay.as_micros() as u64 {
        return Err(HttpError::BadRequest(format!(
            "delay_us={} is above the maximum of {} µs",
            params.delay_us,
            shared.config.max_delay.as_micros()
        )));
    }
    // The operation the path names, if the encoding's route has one there; an unknown one
    // is answered once the body is in, so the connection can serve the next request.
    let op = match encoding.facts().route {
        Route::Fixed(_) => named_by_header(parts, encoding),
        Route::PerOperation(prefix) => {
            let name = &path[prefix.len()..];
            Operation::from_name(name)
                .map(Some)
                .ok_or_else(|| format!("no operation {name:?}"))
        }
    };
    let declared = parts
        .headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > u64::from(shared.config.max_frame)) {
        return Err(HttpError::PayloadTooLarge(shared.config.max_frame));
    }
    let request = read_body(body, declared, shared, share).await?;
    let answered = match op {
        Ok(op) => wstest::answer(shared, Some(share), encoding, op, &request),
        Err(what) => Err(wstest::no_such_operation(shared, encoding, &what)),
    };
    drop(request);
    let answer = match answered {
        Ok(answer) => answer,
        Err(Refusal::OverBudget) => return Err(HttpError::OverBudget),
        Err(Refusal::NotACall {
            error_reply: Some(error),
            ..
        }) => {
            let mut resp = reply::bytes(error.body.into(), encoding.facts().content_type);
            *resp.status_mut() =
                StatusCode::from_u16(error.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            return Ok(resp);
        }
        Err(Refusal::NotACall { reason, .. }) => {
            return Ok(reply::text(StatusCode::BAD_REQUEST, &format!("{reason}\n")));
        }
        Err(Refusal::Unencodable(reason)) => {
            let reason = format!("{reason}\n");
            return Ok(reply::text(StatusCode::INTERNAL_SERVER_ERROR, &reason));
        }
    };
    if params.delay_us > 0 {
        crate::server::sleep_until(got_it + Duration::from_micros(params.delay_us.into())).await;
    }
    let timing = wstest::server_timing(got_it.elapsed(), &answer);
    let mut resp = reply::bytes(answer.reply.freeze(), encoding.facts().content_type);
    resp.headers_mut()
        .insert(reply::SERVER_TIMING.clone(), reply::unindexed(timing));
    Ok(resp)
}

/// The encoding whose content type the request names (its media type, parameters such
/// as `charset` ignored) on `path`, its route: XML-RPC and SOAP are both `text/xml`.
fn encoding_of(parts: &Parts, path: &str) -> Option<EncodingKind> {
    let value = parts.headers.get(header::CONTENT_TYPE)?.to_str().ok()?;
    let media = value.split(';').next()?.trim();
    let media_of = |t: &'static str| t.split(';').next().unwrap_or(t).trim();
    EncodingKind::ALL.iter().copied().find(|e| {
        let facts = e.facts();
        routes(facts.route, path)
            && std::iter::once(&facts.content_type)
                .chain(facts.also_accepted)
                .any(|t| media_of(t).eq_ignore_ascii_case(media))
    })
}

/// The operation the encoding's operation header names (SOAPAction), if it has one and
/// the request carries it: the body must then agree.
fn named_by_header(parts: &Parts, encoding: EncodingKind) -> Result<Option<Operation>, String> {
    let Some(named) = encoding.facts().operation_header else {
        return Ok(None);
    };
    match parts.headers.get(named.name) {
        None => Ok(None),
        Some(value) => (named.parse)(value.to_str().unwrap_or("\u{fffd}")),
    }
}

/// 415, naming what each route takes.
fn unsupported(parts: &Parts) -> HttpError {
    let sent = parts
        .headers
        .get(header::CONTENT_TYPE)
        .map_or("none".to_string(), |v| format!("{v:?}"));
    let takes: Vec<String> = EncodingKind::ALL
        .iter()
        .map(|e| {
            let path = match e.facts().route {
                Route::Fixed(path) => path.to_string(),
                Route::PerOperation(prefix) => format!("{prefix}{{Operation}}"),
            };
            format!("{} at {path}", e.facts().content_type)
        })
        .collect();
    HttpError::UnsupportedMediaType(format!(
        "content type {sent} on {}; this server takes {}",
        parts.uri.path(),
        takes.join(", ")
    ))
}
