//! `http-fresh`: HTTP/1.1 `POST /echo` with `Connection: close` over a new connection per
//! call (hyper), like PHP's `file_get_contents` in seed 004. The latency includes connect.

use super::http::{self, SendError, worker_runtime};
use super::{Port, Call, CallError, Endpoint, Phases, Reply, Transport, remaining};
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
    const PERSISTENT: bool = false;
    const PORT: Port = Port::Http;

    fn open(endpoint: Endpoint, timeout: Duration) -> HttpFresh {
        HttpFresh {
            rt: worker_runtime(),
            template: http::Template::new(&endpoint),
            endpoint,
            timeout,
            body: Vec::new(),
            connects: 0,
        }
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
        let (seq, server) = rt.block_on(http::within(left, &connecting, async {
            let (mut sender, conn, took) = http::open(addr).await?;
            *connects += 1;
            phases.connect = Some(took);
            connecting.set(false);
            // The connection future runs beside the request in this task rather than as a
            // spawned task: a one-call connection needs no task of its own, nor the wake-ups
            // between two. Once the reply is in, dropping both closes our side.
            let send = http::send(&mut sender, req, body, phases);
            tokio::pin!(send, conn);
            let mut conn_done = false;
            let sent = loop {
                tokio::select! {
                    biased;
                    sent = &mut send => break sent,
                    _ = &mut conn, if !conn_done => conn_done = true,
                }
            };
            match sent {
                Ok(reply) => Ok(reply),
                // A brand-new connection closed before the request went out.
                Err(SendError::Unsent(_)) => Err(CallError::Closed),
                Err(SendError::Failed(e)) => Err(e),
            }
        }))?;
        Ok(Reply { seq, body, server })
    }

    fn reset(&mut self) {}

    fn connects(&self) -> u64 {
        self.connects
    }
}
