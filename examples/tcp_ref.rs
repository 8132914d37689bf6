//! The smallest pair that speaks the raw TCP protocol, to hold `tcp` and `tcp-connect`
//! (client and rpcbench-echo together) against: a blocking client and a single-threaded
//! blocking server, nothing else. What rpcbench adds over it (the runner, the checks, the
//! server's limits and counters) is the ratio `report/peers.sh` prints.
//!
//! ```text
//! cargo run --release --example tcp_ref -- server ADDR
//! cargo run --release --example tcp_ref -- client ADDR N [--connect] [--timeouts] [--payload BYTES] [--warmup W]
//! ```
//!
//! `server ADDR` listens on ADDR (port 0 picks a free port), prints `listening tcp ADDR`
//! with the real address, and on its one thread accepts a connection, answers each
//! request frame on it with a real `Response` (same seq, status 0, server_ns 0, the
//! request's payload, or the pattern when `reply_len` is set) until the client closes,
//! then accepts the next: one client at a time, as a latency pair needs.
//!
//! `client ADDR N` makes W warm-up calls (default 100) and then N timed calls, one after
//! the other, each a request frame of a 64-byte payload and its whole reply, checked (seq,
//! status, payload). Without `--connect` every call goes on one connection (TCP_NODELAY);
//! with it, each call connects, sends, reads and closes, as `tcp-connect` does. Each call
//! is timed with `std::time::Instant`, connect and close included with `--connect`. The
//! last line is `mean_us <mean>`, over the N timed calls. `--timeouts` gives each connection
//! a read and a write timeout (`SO_RCVTIMEO`, `SO_SNDTIMEO`), as rpcbench's blocking
//! clients bound every call: what those two system calls cost a connection per call.

mod common;

use common::ClientArgs;
use std::io::Write;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::ExitCode;
use std::time::{Duration, Instant};

const USAGE: &str = "usage: tcp_ref server ADDR\n       tcp_ref client ADDR N [--connect] [--timeouts] [--payload BYTES] [--warmup W]";

fn main() -> ExitCode {
    common::server_or_client("tcp_ref", USAGE, server, client)
}

fn server(addr: &str) -> Result<(), String> {
    let listener = TcpListener::bind(addr).map_err(|e| format!("cannot listen on {addr}: {e}"))?;
    let local = listener.local_addr().map_err(|e| e.to_string())?;
    println!("listening tcp {local}");
    // Whoever starts us waits for that line.
    std::io::stdout().flush().map_err(|e| e.to_string())?;
    let (mut buf, mut out) = (Vec::with_capacity(256), Vec::with_capacity(256));
    for conn in listener.incoming() {
        let Ok(mut stream) = conn else { continue };
        if let Err(e) = serve(&mut stream, &mut buf, &mut out) {
            eprintln!("tcp_ref server: {e}");
        }
    }
    Ok(())
}

/// Answers every request on `stream` until the client closes it.
fn serve(stream: &mut TcpStream, buf: &mut Vec<u8>, out: &mut Vec<u8>) -> std::io::Result<()> {
    stream.set_nodelay(true)?;
    while common::read_frame(stream, buf)? {
        common::echo_reply(buf, out)?;
        stream.write_all(out)?;
    }
    Ok(())
}

fn client(args: &[String]) -> Result<(), String> {
    let addr: SocketAddr = args[0]
        .parse()
        .map_err(|e| format!("address {:?}: {e}", args[0]))?;
    let flag = |name: &str| args[1..].iter().any(|a| a == name);
    let (connect, timeouts) = (flag("--connect"), flag("--timeouts"));
    let rest: Vec<String> = args[1..]
        .iter()
        .filter(|a| *a != "--connect" && *a != "--timeouts")
        .cloned()
        .collect();
    let parsed = ClientArgs::parse(&rest, 100, USAGE)?;
    let (calls, warmup) = (parsed.calls, parsed.warmup);
    let payload = parsed.payload();
    let open = || -> Result<TcpStream, String> {
        let stream = TcpStream::connect(addr).map_err(|e| format!("connect {addr}: {e}"))?;
        stream
            .set_nodelay(true)
            .map_err(|e| format!("TCP_NODELAY: {e}"))?;
        if timeouts {
            let limit = Some(Duration::from_secs(5));
            stream
                .set_read_timeout(limit)
                .map_err(|e| format!("SO_RCVTIMEO: {e}"))?;
            stream
                .set_write_timeout(limit)
                .map_err(|e| format!("SO_SNDTIMEO: {e}"))?;
        }
        Ok(stream)
    };
    let mut kept = if connect { None } else { Some(open()?) };
    let (mut out, mut inbuf) = (Vec::with_capacity(256), Vec::with_capacity(256));
    let mut total = Duration::ZERO;
    for seq in 1..=warmup + calls {
        let started = Instant::now();
        let mut fresh = if connect { Some(open()?) } else { None };
        let stream = fresh.as_mut().or(kept.as_mut()).expect("a connection");
        common::call(stream, seq, &payload, &mut out, &mut inbuf)?;
        drop(fresh);
        if seq > warmup {
            total += started.elapsed();
        }
    }
    println!("calls {calls}");
    println!("mean_us {:.3}", total.as_secs_f64() * 1e6 / calls as f64);
    Ok(())
}
