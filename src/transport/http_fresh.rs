//! `http-fresh`: HTTP/1.1 `POST /echo` with `Connection: close` over a new connection per
//! call (hyper on a worker thread, the lean codec of `h1.rs` on the event loop), like PHP's
//! `file_get_contents` in seed 004. The latency includes connect.

use super::h1::{AsyncH1Conn, Requests};
use super::http::{self, worker_runtime};
use super::{
    AsyncTransport, Call, CallError, CallTimer, Endpoint, FILES_PER_RUNTIME, Facts,
    OpenTransportError, Phases, Port, Reply, Transport, opened, remaining, within,
};
use std::cell::Cell;
use std::time::{Duration, Instant};

/// The `http-fresh` transport.
pub struct HttpFresh {
    rt: tokio::runtime::Runtime,
    endpoint: Endpoint,
    timeout: Duration,
    body: Vec<u8>,
    connects: u64,
    template: http::Template,
}

impl Transport for HttpFresh {
    const FACTS: Facts = Facts {
        summary: "HTTP/1.1 `POST /echo` with `Connection: close` on a new connection per call (hyper; on the event loop, a lean HTTP/1.1 client)",
        persistent: false,
        port: Port::Http,
        alpn: super::tls::Alpn::Http1,
        round_trips: Some(2.0),
        files_per_worker: FILES_PER_RUNTIME,
        ..Facts::DEFAULT
    };

    fn open(endpoint: Endpoint, timeout: Duration) -> Result<HttpFresh, OpenTransportError> {
        Ok(HttpFresh {
            rt: worker_runtime()?,
            template: http::Template::new(&endpoint),
            endpoint,
            timeout,
            body: Vec::new(),
            connects: 0,
        })
    }

    fn call(&mut self, call: &Call, phases: &mut Phases) -> Result<Reply<'_>, CallError> {
        let HttpFresh {
            rt,
            endpoint,
            timeout,
            body,
            connects,
            template,
        } = self;
        let deadline = Instant::now() + *timeout;
        // The lookup runs outside our runtime: the resolver blocks on a runtime of its own.
        let addr = endpoint.http_addr(deadline, phases)?;
        let req = template.request(call, true)?;
        let connecting = Cell::new(true);
        let left = remaining(deadline)?;
        let (seq, server) = rt.block_on(within(left, &connecting, async {
            let (mut sender, conn, took, noted) = http::open(addr, deadline, endpoint).await?;
            *connects += 1;
            took.record(phases);
            connecting.set(false);
            // The connection future runs beside the request in this task rather than as a
            // spawned task: a one-call connection needs no task of its own, nor the wake-ups
            // between two. Once the reply is in, dropping both closes our side.
            let send = http::send(&mut sender, req, body, call.max_reply, phases);
            tokio::pin!(send, conn);
            let mut conn_done = false;
            loop {
                tokio::select! {
                    biased;
                    // A TLS failure (an alert after the handshake: mTLS refusing the
                    // client) reaches the connection's socket; the request sees only that
                    // the connection ended.
                    sent = &mut send => break sent.map_err(|e| noted.explain(e)),
                    _ = &mut conn, if !conn_done => conn_done = true,
                }
            }
        }))?;
        Ok(Reply { seq, body, server })
    }

    fn reset(&mut self) {}

    fn connects(&self) -> u64 {
        self.connects
    }
}

/// The `http-fresh` transport on the event loop: a new connection per call, one request
/// with `Connection: close` through the lean codec (`h1.rs`), closed by `end_call` inside
/// the timed call. A connection that ends before any reply byte is lost, as on the
/// blocking side: a new connection is never resent on.
pub struct AsyncHttpFresh {
    /// Where the calls go.
    endpoint: Endpoint,
    /// Longest a call may take.
    timeout: Duration,
    /// The timer of this connection's calls.
    timer: CallTimer,
    /// The request bytes, built once and filled per call.
    requests: Requests,
    /// The connection of the call in progress; kept only so the reply can borrow from it.
    conn: Option<AsyncH1Conn>,
    /// Connections opened so far.
    connects: u64,
}

impl AsyncTransport for AsyncHttpFresh {
    fn open(endpoint: Endpoint, timeout: Duration) -> AsyncHttpFresh {
        AsyncHttpFresh {
            requests: Requests::new(&endpoint, true),
            endpoint,
            timeout,
            timer: CallTimer::default(),
            conn: None,
            connects: 0,
        }
    }

    async fn call(&mut self, call: &Call<'_>, phases: &mut Phases) -> Result<Reply<'_>, CallError> {
        let deadline = Instant::now() + self.timeout;
        let addr = self
            .endpoint
            .addr_async(Port::Http, deadline, phases)
            .await?;
        let AsyncHttpFresh {
            endpoint,
            timer,
            requests,
            conn,
            connects,
            ..
        } = self;
        let request = requests.build(call);
        let connecting = &Cell::new(true);
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
                Ok::<_, CallError>((conn, response))
            })
            .await;
        let (conn, response) = conn?;
        conn.reply(response)
    }

    fn end_call(&mut self) {
        self.conn = None;
    }

    fn reset(&mut self) {
        self.conn = None;
    }

    fn connects(&self) -> u64 {
        self.connects
    }
}
