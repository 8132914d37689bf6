//! `http-keepalive`: HTTP/1.1 `POST /echo` over one kept-alive connection per worker
//! (hyper), or per connection of the event loop (the lean codec of `h1.rs`).

use super::h1::{ExchangeError, H1Conn, Requests};
use super::http::{self, SendError, worker_runtime};
use super::{
    AsyncTransport, Call, CallError, CallTimer, Endpoint, OpenTransportError, Phases, Port, Reply,
    Transport, opened, remaining, within,
};
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

    fn open(endpoint: Endpoint, timeout: Duration) -> Result<HttpKeepalive, OpenTransportError> {
        Ok(HttpKeepalive {
            rt: worker_runtime()?,
            template: http::Template::new(&endpoint),
            endpoint,
            timeout,
            sender: None,
            body: Vec::new(),
            connects: 0,
        })
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
            let sent = rt.block_on(within(remaining(deadline)?, &connecting, async {
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

/// How many times an event-loop call may send its request: once, and once more on a new
/// connection when a reused one ended before any reply byte (the rule of [`HttpKeepalive`]
/// and of libcurl).
const ATTEMPTS: usize = 2;

/// The `http-keepalive` transport on the event loop: one kept-alive connection through the
/// lean codec (`h1.rs`), with the blocking side's rules. A connection the server announced
/// closed (`Connection: close`), or seen closed or sending stray bytes while idle, is
/// replaced before the request goes out; a reused connection that ends before any byte of
/// the reply gets the request once more on a new one; a reply that started, or a new
/// connection that fails, is never resent.
pub struct AsyncHttpKeepalive {
    /// Where the calls go.
    endpoint: Endpoint,
    /// Longest a call may take.
    timeout: Duration,
    /// The timer of this connection's calls.
    timer: CallTimer,
    /// The request bytes, built once and filled per call.
    requests: Requests,
    /// The connection, once open.
    conn: Option<H1Conn>,
    /// Connections opened so far.
    connects: u64,
}

impl AsyncTransport for AsyncHttpKeepalive {
    fn open(endpoint: Endpoint, timeout: Duration) -> AsyncHttpKeepalive {
        AsyncHttpKeepalive {
            requests: Requests::new(&endpoint, false),
            endpoint,
            timeout,
            timer: CallTimer::default(),
            conn: None,
            connects: 0,
        }
    }

    async fn call(
        &mut self,
        call: &Call<'_>,
        phases: &mut Phases,
    ) -> Result<Reply<'_>, CallError> {
        let deadline = Instant::now() + self.timeout;
        let AsyncHttpKeepalive {
            timer,
            endpoint,
            requests,
            conn,
            connects,
            ..
        } = self;
        let request = requests.build(call);
        let mut attempt = 0;
        let response = loop {
            attempt += 1;
            // Replacing a connection before anything is sent is no resend.
            if conn.as_ref().is_some_and(|c| !c.usable()) {
                *conn = None;
            }
            // The lookup runs before the call's timer, as on the blocking side.
            let addr = match conn {
                Some(_) => None,
                None => Some(endpoint.addr_async(Port::Http, deadline, phases).await?),
            };
            let reused = conn.as_ref().is_some_and(H1Conn::reused);
            let connecting = &Cell::new(addr.is_some());
            let sent = timer.within(deadline, connecting, async {
                let c = match (&mut *conn, addr) {
                    (Some(c), _) => c,
                    (slot, Some(addr)) => slot.insert(opened(
                        H1Conn::connect(addr).await?,
                        connects,
                        phases,
                        connecting,
                    )),
                    (None, None) => {
                        unreachable!("an address is looked up when there is no connection")
                    }
                };
                c.exchange(request, &mut phases.first_byte).await
            })
            .await;
            match sent {
                Ok(response) => break response,
                Err(ExchangeError::NoReply(CallError::Closed)) if reused && attempt < ATTEMPTS => {
                    *conn = None;
                }
                Err(e) => return Err(e.into()),
            }
        };
        match conn {
            Some(c) => c.reply(response),
            None => unreachable!("a reply comes on a connection"),
        }
    }

    fn reset(&mut self) {
        self.conn = None;
    }

    fn connects(&self) -> u64 {
        self.connects
    }
}
