//! A minimal HTTP/2 client on the `h2` crate's own client API, the one rpcbench's `h2-mux`
//! and gRPC transports use (its `h2` transport drives the crate's frame layer itself): to
//! tell what the crate's stream state machine costs a call from what rpcbench adds. No
//! runner, no histogram, no phases, no timeouts: the canonical `h2` client loop (the
//! connection driven by a task of its own on a current-thread runtime), nothing else.
//!
//! ```text
//! cargo run --release --example h2_ref -- ADDR N [--payload BYTES] [--warmup W]
//! ```
//!
//! Connects to `ADDR` (an rpcbench-echo HTTP port, `127.0.0.1:8080`) with prior knowledge
//! and TCP_NODELAY, makes W warm-up calls (default 200) and then N timed calls on that one
//! connection, one stream at a time: `POST /echo` with a 64-byte payload and the call's
//! `x-rpcbench-seq` header, as rpcbench's `h2` sends it. Each reply is checked: status 200,
//! the same seq header, the payload back. Each call is timed with `std::time::Instant`
//! from before the stream is opened to after the whole reply is read, which is what
//! rpcbench times for its persistent transports. The last line is `mean_us <mean>`, over
//! the N timed calls.

mod common;

use bytes::Bytes;
use rpcbench::wire::SEQ_HEADER;
use std::process::ExitCode;
use std::time::{Duration, Instant};

const USAGE: &str = "usage: h2_ref ADDR N [--payload BYTES] [--warmup W]";

fn main() -> ExitCode {
    common::client_only("h2_ref", USAGE, run)
}

fn run(args: &[String]) -> Result<Duration, String> {
    let (addr, args, rt) = common::client_setup(args, 200, USAGE)?;
    let (calls, warmup) = (args.calls, args.warmup);
    let payload = Bytes::from(args.payload());
    rt.block_on(async move {
        let mut sender = common::h2_connect(addr).await?;
        let uri: hyper::Uri = format!("http://{addr}/echo")
            .parse()
            .map_err(|e| format!("URI: {e}"))?;
        let mut total = Duration::ZERO;
        for seq in 0..warmup + calls {
            let started = Instant::now();
            call(&mut sender, &uri, seq, &payload).await?;
            if seq >= warmup {
                total += started.elapsed();
            }
        }
        Ok(total.div_f64(calls as f64))
    })
}

/// One call: a new stream, its request and payload, the whole reply read and checked.
async fn call(
    sender: &mut h2::client::SendRequest<Bytes>,
    uri: &hyper::Uri,
    seq: u64,
    payload: &Bytes,
) -> Result<(), String> {
    std::future::poll_fn(|cx| sender.poll_ready(cx))
        .await
        .map_err(|e| format!("connection: {e}"))?;
    let req = hyper::Request::post(uri.clone())
        .header(SEQ_HEADER, seq)
        .header("content-type", "application/octet-stream")
        .body(())
        .map_err(|e| e.to_string())?;
    let (resp, mut stream) = sender
        .send_request(req, payload.is_empty())
        .map_err(|e| format!("send: {e}"))?;
    if !payload.is_empty() {
        stream
            .send_data(payload.clone(), true)
            .map_err(|e| format!("send: {e}"))?;
    }
    let resp = resp.await.map_err(|e| format!("reply: {e}"))?;
    if resp.status() != 200 {
        return Err(format!("call {seq}: status {}", resp.status()));
    }
    let got_seq = resp
        .headers()
        .get(SEQ_HEADER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if got_seq != Some(seq) {
        return Err(format!("call {seq}: the reply's seq is {got_seq:?}"));
    }
    let mut body = resp.into_body();
    let mut got = Vec::with_capacity(payload.len());
    while let Some(chunk) = body.data().await {
        let chunk = chunk.map_err(|e| format!("reply body: {e}"))?;
        let _ = body.flow_control().release_capacity(chunk.len());
        got.extend_from_slice(&chunk);
    }
    if got != payload[..] {
        return Err(format!(
            "call {seq}: {} bytes back, not the {} sent",
            got.len(),
            payload.len()
        ));
    }
    Ok(())
}
