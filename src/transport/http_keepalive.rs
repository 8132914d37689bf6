//! `http-keepalive`: HTTP/1.1 `POST /echo` over one kept-alive connection per worker (hyper).

use super::http::{self, worker_runtime};
use super::{Call, CallError, Endpoint, Phases, Reply, Transport, remaining};
use bytes::Bytes;
use http_body_util::Full;
use hyper::client::conn::http1::SendRequest;
use std::cell::Cell;
use std::time::{Duration, Instant};

/// The `http-keepalive` transport.
pub struct HttpKeepalive {
    rt: tokio::runtime::Runtime,
    endpoint: Endpoint,
    timeout: Duration,
    sender: Option<SendRequest<Full<Bytes>>>,
    body: Vec<u8>,
    connects: u64,
}

impl HttpKeepalive {
    pub fn new(endpoint: Endpoint, timeout: Duration) -> HttpKeepalive {
        HttpKeepalive {
            rt: worker_runtime(),
            endpoint,
            timeout,
            sender: None,
            body: Vec::new(),
            connects: 0,
        }
    }
}

impl Transport for HttpKeepalive {
    fn call(&mut self, call: &Call, phases: &mut Phases) -> Result<Reply<'_>, CallError> {
        let HttpKeepalive {
            rt,
            endpoint,
            timeout,
            sender,
            body,
            connects,
        } = self;
        // A connection the server closed (idle timeout, restart) is replaced, and counted.
        if sender.as_ref().is_some_and(|s| s.is_closed()) {
            *sender = None;
        }
        let deadline = Instant::now() + *timeout;
        // The lookup runs outside our runtime: the resolver blocks on a runtime of its own.
        let addr = match sender {
            Some(_) => None,
            None => Some(endpoint.http_addr(deadline, phases)?),
        };
        let connecting = Cell::new(sender.is_none());
        let left = remaining(deadline)?;
        let (seq, server) = rt.block_on(http::within(left, &connecting, async {
            let sender = match (sender, addr) {
                (Some(s), _) => s,
                (slot @ None, addr) => {
                    let addr = addr.expect("looked up above when there was no connection");
                    let (s, took) = http::connect(addr).await?;
                    *connects += 1;
                    phases.connect = Some(took);
                    connecting.set(false);
                    slot.insert(s)
                }
            };
            http::exchange(sender, endpoint, call, false, body, phases).await
        }))?;
        Ok(Reply {
            seq,
            body,
            server,
            duplicates: 0,
        })
    }

    fn reset(&mut self) {
        self.sender = None;
    }

    fn connects(&self) -> u64 {
        self.connects
    }
}
