//! `http-keepalive`: HTTP/1.1 `POST /echo` over one kept-alive connection per worker (a
//! blocking socket) or per connection of the event loop (a tokio one), both through the
//! lean codec of `h1.rs`.
//!
//! Not hyper, which this transport used before: a call through hyper's client crossed a
//! request channel, a connection task and a body stream, and cost 10 to 50 µs more per
//! call than wrk (`-c 1`, client and server on different cores, report/load.sh); the
//! codec does one write and one read for a small reply, like wrk.

use super::h1::{AsyncH1Conn, BlockingH1Conn, H1Worker, may_resend};
use super::{
    AsyncTransport, Call, CallError, Counts, Endpoint, Facts, OpenTransportError, Phases, Port,
    Reply, Transport, opened,
};
use std::cell::Cell;
use std::time::{Duration, Instant};

/// The `http-keepalive` transport: one kept-alive connection per worker, and its rules. A
/// connection the server announced closed (`Connection: close`) is replaced before the
/// request goes out. When a connection that already served calls ends before any byte of
/// the reply (the server's idle timeout closed it while we were away, and it never read
/// the request), the request goes once more on a new connection, as libcurl does; a reply
/// that started, or a new connection that fails, is never resent.
pub struct HttpKeepalive(H1Worker<BlockingH1Conn>);

impl Transport for HttpKeepalive {
    const FACTS: Facts = Facts {
        summary: "HTTP/1.1 `POST /echo` on one kept-alive connection per worker (a lean HTTP/1.1 client: one write and one read per small reply, as wrk)",
        persistent: true,
        port: Port::Http,
        alpn: super::tls::Alpn::Http1,
        round_trips: Some(1.0),
        fresh_twin: Some("http-fresh"),
        encodings: crate::encoding::EncodingKind::ALL,
        ..Facts::DEFAULT
    };

    fn open(endpoint: Endpoint, timeout: Duration) -> Result<HttpKeepalive, OpenTransportError> {
        Ok(HttpKeepalive(H1Worker::open(endpoint, timeout, false)))
    }

    fn call(&mut self, call: &Call, phases: &mut Phases) -> Result<Reply<'_>, CallError> {
        let deadline = Instant::now() + self.0.timeout;
        let H1Worker {
            endpoint,
            requests,
            conn,
            connects,
            ..
        } = &mut self.0;
        let request = requests.build(call);
        let mut attempt = 0;
        let response = loop {
            attempt += 1;
            if conn.as_ref().is_some_and(|c| !c.usable()) {
                *conn = None;
            }
            let reused = conn.as_ref().is_some_and(BlockingH1Conn::reused);
            let c = match &mut *conn {
                Some(c) => c,
                slot @ None => {
                    let addr = endpoint.http_addr(deadline, phases)?;
                    let (new, took) = BlockingH1Conn::connect_blocking(addr, deadline, endpoint)?;
                    *connects += 1;
                    took.record(phases);
                    slot.insert(new)
                }
            };
            match c.exchange_blocking(request, call.max_reply, deadline, &mut phases.first_byte) {
                Ok(response) => break response,
                Err(e) if may_resend(&e, reused, attempt) => *conn = None,
                Err(e) => return Err(e.into()),
            }
        };
        match conn {
            Some(c) => c.reply(response, call),
            None => unreachable!("a reply comes on a connection"),
        }
    }

    fn reset(&mut self) {
        self.0.conn = None;
    }

    fn counts(&self) -> Counts {
        self.0.counts()
    }
}

/// The `http-keepalive` transport on the event loop: one kept-alive connection through the
/// lean codec (`h1.rs`), with the rules of [`HttpKeepalive`], and a connection seen closed
/// (or sending stray bytes) while idle also replaced before the request goes out, which
/// tokio's readiness state tells for free.
pub struct AsyncHttpKeepalive(H1Worker<AsyncH1Conn>);

impl AsyncTransport for AsyncHttpKeepalive {
    fn open(endpoint: Endpoint, timeout: Duration) -> AsyncHttpKeepalive {
        AsyncHttpKeepalive(H1Worker::open(endpoint, timeout, false))
    }

    async fn call(&mut self, call: &Call<'_>, phases: &mut Phases) -> Result<Reply<'_>, CallError> {
        let deadline = Instant::now() + self.0.timeout;
        let H1Worker {
            timer,
            endpoint,
            requests,
            conn,
            connects,
            ..
        } = &mut self.0;
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
            let reused = conn.as_ref().is_some_and(AsyncH1Conn::reused);
            let connecting = &Cell::new(addr.is_some());
            let sent = timer
                .within(deadline, connecting, async {
                    let c = match (&mut *conn, addr) {
                        (Some(c), _) => c,
                        (slot, Some(addr)) => slot.insert(opened(
                            AsyncH1Conn::connect(addr, deadline, endpoint).await?,
                            connects,
                            phases,
                            connecting,
                        )),
                        (None, None) => {
                            unreachable!("an address is looked up when there is no connection")
                        }
                    };
                    c.exchange(request, call.max_reply, &mut phases.first_byte)
                        .await
                })
                .await;
            match sent {
                Ok(response) => break response,
                Err(e) if may_resend(&e, reused, attempt) => *conn = None,
                Err(e) => return Err(e.into()),
            }
        };
        match conn {
            Some(c) => c.reply(response, call),
            None => unreachable!("a reply comes on a connection"),
        }
    }

    fn reset(&mut self) {
        self.0.conn = None;
    }

    fn counts(&self) -> Counts {
        self.0.counts()
    }
}

#[cfg(test)]
mod tests {
    /// What the rest of the program reads from its facts: the connections a healthy run
    /// of 8 workers and 100 calls opens, the port, an event-loop side.
    #[test]
    fn its_facts() {
        super::super::expect_facts("http-keepalive", 8, super::super::Port::Http, true);
    }
}
