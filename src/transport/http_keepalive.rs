//! `http-keepalive`: HTTP/1.1 `POST /echo` over one kept-alive connection per worker (hyper).

use super::http::{self, SendError, worker_runtime};
use super::{Port, Call, CallError, Endpoint, Phases, Reply, Transport, remaining};
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
    template: http::Template,
}


impl Transport for HttpKeepalive {
    const PERSISTENT: bool = true;
    const PORT: Port = Port::Http;

    fn open(endpoint: Endpoint, timeout: Duration) -> HttpKeepalive {
        HttpKeepalive {
            rt: worker_runtime(),
            template: http::Template::new(&endpoint),
            endpoint,
            timeout,
            sender: None,
            body: Vec::new(),
            connects: 0,
        }
    }

    fn call(&mut self, call: &Call, phases: &mut Phases) -> Result<Reply<'_>, CallError> {
        let deadline = Instant::now() + self.timeout;
        let mut req = self.template.request(call, false)?;
        // At most two tries, as libcurl does: when a connection that already served calls
        // turns out closed (the server's idle timeout closed it while we were away), the
        // request goes once more on a new connection. hyper hands it back when it saw the
        // close before writing; when it wrote first and then read EOF with no reply byte,
        // the server closed before reading it, and a copy is sent. A reply that started,
        // or a new connection that fails, is never retried.
        for attempt in 0..2 {
            let HttpKeepalive {
                rt,
                endpoint,
                sender,
                body,
                connects,
                ..
            } = self;
            // The lookup runs outside our runtime: the resolver blocks on a runtime of its own.
            let addr = match sender {
                Some(_) => None,
                None => Some(endpoint.http_addr(deadline, phases)?),
            };
            let reused = addr.is_none();
            let connecting = Cell::new(addr.is_some());
            let sent = rt.block_on(http::within(remaining(deadline)?, &connecting, async {
                let sender = match (sender, addr) {
                    (Some(s), _) => s,
                    (slot, Some(addr)) => {
                        let (s, took) = http::connect(addr).await?;
                        *connects += 1;
                        phases.connect = Some(took);
                        connecting.set(false);
                        slot.insert(s)
                    }
                    (None, None) => {
                        unreachable!("an address is looked up when there is no connection")
                    }
                };
                http::send(sender, req, body, phases).await
            }));
            match sent {
                Ok((seq, server)) => {
                    return Ok(Reply {
                        seq,
                        body: &self.body,
                        server,
                    });
                }
                Err(SendError::Unsent(back)) if attempt == 0 && reused => {
                    self.sender = None;
                    req = *back;
                }
                Err(SendError::Failed(CallError::Closed)) if attempt == 0 && reused => {
                    self.sender = None;
                    req = self.template.request(call, false)?;
                }
                Err(SendError::Unsent(_)) => return Err(CallError::Closed),
                Err(SendError::Failed(e)) => return Err(e),
            }
        }
        unreachable!("the second attempt always returns")
    }

    fn reset(&mut self) {
        self.sender = None;
    }

    fn connects(&self) -> u64 {
        self.connects
    }
}
