//! A minimal blocking connect-per-call reference (netperf's TCP_CRR shape) for the raw TCP
//! protocol, to check that rpcbench's `tcp-connect` transport measures the network and not
//! itself. Plain `std::net`, no runtime, no timeouts, nothing but the calls.
//!
//! ```text
//! cargo run --release --example crr_ref -- server ADDR
//! cargo run --release --example crr_ref -- client ADDR N [--payload BYTES] [--warmup W]
//! ```
//!
//! `server ADDR` listens on ADDR (port 0 picks a free port), prints `listening ADDR` with the
//! real address, and serves each connection on its own thread: it reads one request frame,
//! writes a real `Response` (same seq, status 0, server_ns 0, the request's payload, or the
//! pattern when `reply_len` is set), and closes.
//!
//! `client ADDR N` makes W warm-up calls (default 100) and then N timed calls, one after the
//! other: connect (blocking `connect(2)`), TCP_NODELAY, write a request frame of a 64-byte
//! payload, read the whole reply frame, check seq, status and payload, close. Each call is
//! timed with `std::time::Instant` from before connect to after the close, which is what
//! rpcbench times for its fresh transports (`src/runner.rs` records the latency after
//! `end_call`, which closes the connection). It also works against rpcbench-echo's
//! TCP port, which speaks the same protocol and closes when the client does. The last line
//! is `mean_us <mean>`, over the N timed calls.

mod common;

use common::ClientArgs;
use std::io::Write;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::ExitCode;
use std::time::{Duration, Instant};

const USAGE: &str =
    "usage: crr_ref server ADDR\n       crr_ref client ADDR N [--payload BYTES] [--warmup W]";

fn main() -> ExitCode {
    common::server_or_client("crr_ref", USAGE, server, client)
}

fn server(addr: &str) -> Result<(), String> {
    let listener = TcpListener::bind(addr).map_err(|e| format!("cannot listen on {addr}: {e}"))?;
    let local = listener.local_addr().map_err(|e| e.to_string())?;
    println!("listening tcp {local}");
    // Whoever starts us waits for that line.
    std::io::stdout().flush().map_err(|e| e.to_string())?;
    for conn in listener.incoming() {
        let Ok(stream) = conn else { continue };
        std::thread::spawn(move || {
            if let Err(e) = serve_one(stream) {
                eprintln!("crr_ref server: {e}");
            }
        });
    }
    Ok(())
}

/// One request, one reply, close.
fn serve_one(mut stream: TcpStream) -> std::io::Result<()> {
    stream.set_nodelay(true)?;
    let mut buf = Vec::with_capacity(256);
    if !common::read_frame(&mut stream, &mut buf)? {
        return Ok(());
    }
    let mut out = Vec::with_capacity(256);
    common::echo_reply(&buf, &mut out)?;
    stream.write_all(&out)
    // Dropping the stream closes it.
}

fn client(args: &[String]) -> Result<(), String> {
    let addr: SocketAddr = args[0]
        .parse()
        .map_err(|e| format!("address {:?}: {e}", args[0]))?;
    let parsed = ClientArgs::parse(&args[1..], 100, USAGE)?;
    let (calls, payload_len, warmup) = (parsed.calls, parsed.payload_len, parsed.warmup);
    let payload = parsed.payload();
    let mut out = Vec::with_capacity(payload_len + 32);
    let mut inbuf = Vec::with_capacity(payload_len + 32);
    let mut total = Duration::ZERO;
    let mut max = Duration::ZERO;
    for seq in 1..=warmup + calls {
        let started = Instant::now();
        let mut stream =
            TcpStream::connect(addr).map_err(|e| format!("call {seq}: connect {addr}: {e}"))?;
        stream
            .set_nodelay(true)
            .map_err(|e| format!("call {seq}: TCP_NODELAY: {e}"))?;
        common::call(&mut stream, seq, &payload, &mut out, &mut inbuf)?;
        drop(stream);
        let took = started.elapsed();
        if seq > warmup {
            total += took;
            max = max.max(took);
        }
    }
    let mean_us = total.as_secs_f64() * 1e6 / calls as f64;
    println!("calls {calls}");
    println!("warmup {warmup}");
    println!("max_us {:.3}", max.as_secs_f64() * 1e6);
    println!("mean_us {mean_us:.3}");
    Ok(())
}
