//! `http-fresh`: HTTP/1.1 `POST /echo` with `Connection: close` over a new connection per
//! call, like PHP's `file_get_contents` in seed 004, through the lean codec of `h1.rs` (a
//! blocking socket per worker, a tokio one on the event loop). The latency includes the
//! connect, and ends when the server has closed the connection, as its reply said it
//! would: the client then closes a connection already closed by its peer, and TIME_WAIT
//! stays with the server, as under ApacheBench (see `h1::Response::closes`).
//!
//! Not hyper, which the blocking side used before: its runtime, connection task and
//! request channel cost 11 µs of user CPU a call more than ApacheBench (`ab -c 1`, 17.5
//! against 6 µs, same core), 1.4 times ab's time per call.

use super::h1::{AsyncH1Conn, BlockingH1Conn, H1Worker};
use super::{
    AsyncTransport, Call, CallError, Counts, Endpoint, Facts, OpenTransportError, Phases, Port,
    Reply, Transport, opened,
};
use std::cell::Cell;
use std::time::{Duration, Instant};

/// The `http-fresh` transport.
pub struct HttpFresh(H1Worker<BlockingH1Conn>);

impl Transport for HttpFresh {
    const FACTS: Facts = Facts {
        summary: "HTTP/1.1 `POST /echo` with `Connection: close` on a new connection per call (a lean HTTP/1.1 client, as ApacheBench without -k)",
        persistent: false,
        port: Port::Http,
        alpn: super::tls::Alpn::Http1,
        round_trips: Some(2.0),
        encodings: crate::encoding::EncodingKind::ALL,
        ..Facts::DEFAULT
    };

    fn open(endpoint: Endpoint, timeout: Duration) -> Result<HttpFresh, OpenTransportError> {
        Ok(HttpFresh(H1Worker::open(endpoint, timeout, true)))
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
        let addr = endpoint.http_addr(deadline, phases)?;
        let request = requests.build(call);
        let (new, took) = BlockingH1Conn::connect_blocking(addr, deadline, endpoint)?;
        *connects += 1;
        took.record(phases);
        // A new connection is never resent on: an end before any reply byte is lost.
        let c = conn.insert(new);
        let response =
            c.exchange_blocking(request, call.max_reply, deadline, &mut phases.first_byte)?;
        c.await_close_blocking(&response, deadline)?;
        c.reply(response, call)
    }

    fn end_call(&mut self) {
        self.0.conn = None;
    }

    fn reset(&mut self) {
        self.0.conn = None;
    }

    fn counts(&self) -> Counts {
        self.0.counts()
    }
}

/// The `http-fresh` transport on the event loop: a new connection per call, one request
/// with `Connection: close` through the lean codec (`h1.rs`), closed by `end_call` inside
/// the timed call. A connection that ends before any reply byte is lost, as on the
/// blocking side: a new connection is never resent on.
pub struct AsyncHttpFresh(H1Worker<AsyncH1Conn>);

impl AsyncTransport for AsyncHttpFresh {
    fn open(endpoint: Endpoint, timeout: Duration) -> AsyncHttpFresh {
        AsyncHttpFresh(H1Worker::open(endpoint, timeout, true))
    }

    async fn call(&mut self, call: &Call<'_>, phases: &mut Phases) -> Result<Reply<'_>, CallError> {
        let deadline = Instant::now() + self.0.timeout;
        let addr = self
            .0
            .endpoint
            .addr_async(Port::Http, deadline, phases)
            .await?;
        let H1Worker {
            endpoint,
            timer,
            requests,
            conn,
            connects,
            ..
        } = &mut self.0;
        let request = requests.build(call);
        let connecting = &Cell::new(true);
        let replied = &Cell::new(false);
        let conn = timer
            .within(deadline, connecting, async move {
                let new = opened(
                    AsyncH1Conn::connect(addr, deadline, endpoint).await?,
                    connects,
                    phases,
                    connecting,
                );
                let conn = conn.insert(new);
                let response = conn
                    .exchange(request, call.max_reply, &mut phases.first_byte)
                    .await?;
                replied.set(true);
                conn.await_close(&response).await?;
                Ok::<_, CallError>((conn, response))
            })
            .await;
        let (conn, response) = match conn {
            // The reply came, and the close its server announced did not.
            Err(CallError::Timeout) if replied.get() => return Err(CallError::Protocol),
            done => done?,
        };
        conn.reply(response, call)
    }

    fn end_call(&mut self) {
        self.0.conn = None;
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
        super::super::expect_facts("http-fresh", 100, super::super::Port::Http, true);
    }
}
