//! A minimal gRPC bidirectional-stream client on the `h2` crate's own client API, to hold
//! `grpc-stream` (tonic's client) against: one `rpcbench.v1.Echo/Stream` on one
//! connection, a call being one request message out and its reply message back, as
//! `grpc-stream` makes it. No runner, no histogram, no phases, no timeouts, no tonic: the
//! canonical `h2` client loop (the connection driven by a task of its own on a
//! current-thread runtime), gRPC's 5-byte message prefix and prost, nothing else.
//!
//! ```text
//! cargo run --release --example grpc_stream_ref -- ADDR N [--payload BYTES] [--warmup W]
//! ```
//!
//! Connects to `ADDR` (an rpcbench-echo HTTP port, `127.0.0.1:8080`) with prior knowledge
//! and TCP_NODELAY, opens the stream (`POST /rpcbench.v1.Echo/Stream`, content-type
//! `application/grpc`, `te: trailers`), makes W warm-up calls (default 200) and then N timed
//! calls on it: an `EchoRequest` with the call's seq and a 64-byte payload, and the
//! `EchoReply` read back and checked (the same seq, status 0, the payload back). Each call
//! is timed with `std::time::Instant` from before the request is written to after the
//! reply is decoded, which is what rpcbench times for `grpc-stream`. It then ends its side
//! and checks the server ends the stream with `grpc-status: 0`. The last line is
//! `mean_us <mean>`, over the N timed calls.

mod common;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use prost::Message;
use rpcbench::proto::{EchoReply, EchoRequest, STREAM_PATH};
use std::process::ExitCode;
use std::time::{Duration, Instant};

const USAGE: &str = "usage: grpc_stream_ref ADDR N [--payload BYTES] [--warmup W]";

/// gRPC's message prefix: a compressed flag, then the length, big-endian.
const PREFIX: usize = 5;

fn main() -> ExitCode {
    common::client_only("grpc_stream_ref", USAGE, run)
}

fn run(args: &[String]) -> Result<Duration, String> {
    let (addr, args, rt) = common::client_setup(args, 200, USAGE)?;
    let (calls, warmup) = (args.calls, args.warmup);
    let payload = Bytes::from(args.payload());
    rt.block_on(async move {
        let sender = common::h2_connect(addr).await?;
        let mut sender = sender
            .ready()
            .await
            .map_err(|e| format!("connection: {e}"))?;
        let req = hyper::Request::post(format!("http://{addr}{STREAM_PATH}"))
            .header("content-type", "application/grpc")
            .header("te", "trailers")
            .body(())
            .map_err(|e| e.to_string())?;
        let (resp, mut tx) = sender
            .send_request(req, false)
            .map_err(|e| format!("open the stream: {e}"))?;
        let mut stream = Stream {
            tx: &mut tx,
            headers: Some(resp),
            rx: None,
            inbuf: BytesMut::new(),
        };
        let mut total = Duration::ZERO;
        let mut out = BytesMut::new();
        for seq in 0..warmup + calls {
            let started = Instant::now();
            stream.call(seq, &payload, &mut out).await?;
            if seq >= warmup {
                total += started.elapsed();
            }
        }
        stream.finish().await?;
        Ok(total.div_f64(calls as f64))
    })
}

/// The open stream: where requests go, and where replies come from.
struct Stream<'a> {
    tx: &'a mut h2::SendStream<Bytes>,
    /// The reply's headers, until the first call awaits them.
    headers: Option<h2::client::ResponseFuture>,
    /// The reply body, once its headers came (after the first request).
    rx: Option<h2::RecvStream>,
    /// Reply bytes read but not yet decoded.
    inbuf: BytesMut,
}

impl Stream<'_> {
    /// One call: the request message written, its reply message read and checked.
    async fn call(&mut self, seq: u64, payload: &Bytes, out: &mut BytesMut) -> Result<(), String> {
        let request = EchoRequest {
            seq,
            reply_len: None,
            delay_us: 0,
            payload: payload.clone(),
        };
        out.clear();
        out.put_u8(0);
        out.put_u32(request.encoded_len() as u32);
        request.encode(out).map_err(|e| e.to_string())?;
        self.tx
            .send_data(out.split().freeze(), false)
            .map_err(|e| format!("call {seq}: send: {e}"))?;
        if let Some(resp) = self.headers.take() {
            // The server sends its headers with (or before) the first reply.
            let resp = resp.await.map_err(|e| format!("reply: {e}"))?;
            if resp.status() != 200 {
                return Err(format!("the stream's status is {}", resp.status()));
            }
            self.rx = Some(resp.into_body());
        }
        let reply = self.next_message(seq).await?;
        if reply.seq != seq || reply.status != 0 || reply.payload != payload[..] {
            return Err(format!(
                "call {seq}: wrong reply (seq {}, status {}, {} payload bytes)",
                reply.seq,
                reply.status,
                reply.payload.len()
            ));
        }
        Ok(())
    }

    /// Reads until one whole reply message is buffered and decodes it.
    async fn next_message(&mut self, seq: u64) -> Result<EchoReply, String> {
        let rx = self.rx.as_mut().expect("the reply's headers came");
        loop {
            if self.inbuf.len() >= PREFIX {
                let len = u32::from_be_bytes(self.inbuf[1..PREFIX].try_into().unwrap()) as usize;
                if self.inbuf.len() >= PREFIX + len {
                    self.inbuf.advance(PREFIX);
                    let message = self.inbuf.split_to(len);
                    return EchoReply::decode(message)
                        .map_err(|e| format!("call {seq}: bad reply: {e}"));
                }
            }
            match rx.data().await {
                Some(Ok(chunk)) => {
                    let _ = rx.flow_control().release_capacity(chunk.len());
                    self.inbuf.extend_from_slice(&chunk);
                }
                Some(Err(e)) => return Err(format!("call {seq}: reply: {e}")),
                None => return Err(format!("call {seq}: the server ended the stream")),
            }
        }
    }

    /// Ends our side, and checks the server ends its own with `grpc-status: 0`.
    async fn finish(self) -> Result<(), String> {
        self.tx
            .send_data(Bytes::new(), true)
            .map_err(|e| format!("end the stream: {e}"))?;
        let Some(mut rx) = self.rx else {
            return Ok(());
        };
        while let Some(chunk) = rx.data().await {
            chunk.map_err(|e| format!("the stream's end: {e}"))?;
        }
        let trailers = rx
            .trailers()
            .await
            .map_err(|e| format!("trailers: {e}"))?
            .ok_or("the stream ended without trailers")?;
        match trailers.get("grpc-status").map(|v| v.as_bytes()) {
            Some(b"0") => Ok(()),
            other => Err(format!("the stream ended with grpc-status {other:?}")),
        }
    }
}
