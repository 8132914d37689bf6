//! A minimal blocking ping-pong reference over a Unix socket for the raw frame protocol,
//! to check that rpcbench's `unix` transport measures the socket and not itself. Plain
//! `std::os::unix::net`, no runtime, no timeouts, nothing but the calls: the Unix-socket
//! counterpart of `crr_ref`.
//!
//! ```text
//! cargo run --release --example unix_ref -- server PATH
//! cargo run --release --example unix_ref -- client PATH N [--payload BYTES] [--warmup W]
//! ```
//!
//! `server PATH` listens on PATH (which must not exist, and which the caller removes when
//! done: this is a reference, not a service), prints `listening unix PATH`, and serves each
//! connection on its own thread:
//! it reads request frames and answers each with a real `Response` (same seq, status 0,
//! server_ns 0, the request's payload, or the pattern when `reply_len` is set) until the
//! client closes.
//!
//! `client PATH N` connects once, makes W warm-up calls (default 100) and then N timed
//! calls on that one connection, one after the other: write a request frame of a 64-byte
//! payload, read the whole reply frame, check seq, status and payload. Each call is timed
//! with `std::time::Instant` from before the write to after the check, which is what
//! rpcbench times for its persistent transports. It also works against rpcbench-echo's
//! `--unix` socket, which speaks the same protocol. The last line is `mean_us <mean>`,
//! over the N timed calls.

mod common;

use common::ClientArgs;
use std::io::Write;
use std::os::unix::net::{UnixListener, UnixStream};
use std::process::ExitCode;
use std::time::{Duration, Instant};

const USAGE: &str =
    "usage: unix_ref server PATH\n       unix_ref client PATH N [--payload BYTES] [--warmup W]";

fn main() -> ExitCode {
    common::server_or_client("unix_ref", USAGE, server, client)
}

fn server(path: &str) -> Result<(), String> {
    let listener = UnixListener::bind(path).map_err(|e| format!("cannot listen on {path}: {e}"))?;
    println!("listening unix {path}");
    // Whoever starts us waits for that line.
    std::io::stdout().flush().map_err(|e| e.to_string())?;
    for conn in listener.incoming() {
        let Ok(stream) = conn else { continue };
        std::thread::spawn(move || {
            if let Err(e) = serve(stream) {
                eprintln!("unix_ref server: {e}");
            }
        });
    }
    Ok(())
}

/// Answers request frames until the client closes.
fn serve(mut stream: UnixStream) -> std::io::Result<()> {
    let mut buf = Vec::with_capacity(256);
    let mut out = Vec::with_capacity(256);
    while common::read_frame(&mut stream, &mut buf)? {
        common::echo_reply(&buf, &mut out)?;
        stream.write_all(&out)?;
    }
    Ok(())
}

fn client(args: &[String]) -> Result<(), String> {
    let path = &args[0];
    let parsed = ClientArgs::parse(&args[1..], 100, USAGE)?;
    let (calls, payload_len, warmup) = (parsed.calls, parsed.payload_len, parsed.warmup);
    let payload = parsed.payload();
    let mut out = Vec::with_capacity(payload_len + 32);
    let mut inbuf = Vec::with_capacity(payload_len + 32);
    let mut stream = UnixStream::connect(path).map_err(|e| format!("connect {path}: {e}"))?;
    let mut total = Duration::ZERO;
    let mut max = Duration::ZERO;
    for seq in 1..=warmup + calls {
        let started = Instant::now();
        common::call(&mut stream, seq, &payload, &mut out, &mut inbuf)?;
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
