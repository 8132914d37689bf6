//! `GET /metrics` of the agent: the probes' series in Prometheus's text format or its
//! protobuf, with a bound on scrapers and on the time their request takes.

use super::{MAX_SCRAPE_CONNECTIONS, SCRAPE_HEADER_TIMEOUT, State, metrics, native};
use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Semaphore;

/// Serves `GET /metrics` (HTTP/1.1) until aborted.
pub(super) async fn serve(listener: tokio::net::TcpListener, state: Rc<RefCell<State>>) {
    let slots = Arc::new(Semaphore::new(MAX_SCRAPE_CONNECTIONS));
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            // Out of file descriptors, most likely: wait rather than spin.
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        };
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            drop(stream);
            continue;
        };
        let state = state.clone();
        tokio::task::spawn_local(async move {
            let service = hyper::service::service_fn(move |req| {
                let reply = scrape(&req, &state.borrow());
                async move { Ok::<_, std::convert::Infallible>(reply) }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(SCRAPE_HEADER_TIMEOUT)
                .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                .await;
            drop(slot);
        });
    }
}

/// The reply to one request: the metrics text for `GET /metrics`, 404 or 405 otherwise.
pub(super) fn scrape<B>(
    req: &hyper::Request<B>,
    state: &State,
) -> hyper::Response<http_body_util::Full<bytes::Bytes>> {
    use hyper::{Method, Response, StatusCode, header};
    let text = |status: StatusCode, body: String, ctype: &'static str| {
        Response::builder()
            .status(status)
            .header(header::CONTENT_TYPE, ctype)
            .body(http_body_util::Full::new(bytes::Bytes::from(body)))
            .unwrap_or_else(|_| Response::new(Default::default()))
    };
    if req.uri().path() != "/metrics" {
        return text(
            StatusCode::NOT_FOUND,
            "not found: the agent serves GET /metrics\n".into(),
            "text/plain",
        );
    }
    if req.method() != Method::GET && req.method() != Method::HEAD {
        return text(
            StatusCode::METHOD_NOT_ALLOWED,
            "GET /metrics only\n".into(),
            "text/plain",
        );
    }
    let protobuf = req
        .headers()
        .get_all(header::ACCEPT)
        .iter()
        .any(|v| v.to_str().is_ok_and(native::accepts));
    if protobuf {
        let body = native::render(state.series.values(), &state.counters);
        return Response::builder()
            .status(StatusCode::OK)
            .header(header::CONTENT_TYPE, native::CONTENT_TYPE)
            .body(http_body_util::Full::new(bytes::Bytes::from(body)))
            .unwrap_or_else(|_| Response::new(Default::default()));
    }
    let body = metrics::render(state.series.values(), &state.counters);
    text(StatusCode::OK, body, crate::server::metrics::CONTENT_TYPE)
}
