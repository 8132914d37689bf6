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
//! it reads request frames and answers each with a real [`Response`] (same seq, status 0,
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
use rpcbench::wire::{self, LEN_PREFIX, Request, Response, ResponseRef, Status};
use std::io::{Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::process::ExitCode;
use std::time::{Duration, Instant};

const USAGE: &str =
    "usage: unix_ref server PATH\n       unix_ref client PATH N [--payload BYTES] [--warmup W]";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("server") if args.len() == 2 => server(&args[1]),
        Some("client") if args.len() >= 3 => client(&args[1..]),
        Some("-h" | "--help") => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        _ => {
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("unix_ref: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Reads one whole frame's body into `buf`; `Ok(false)` at a clean end of stream.
fn read_frame(stream: &mut UnixStream, buf: &mut Vec<u8>) -> std::io::Result<bool> {
    let mut prefix = [0; LEN_PREFIX];
    match stream.read_exact(&mut prefix) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(false),
        Err(e) => return Err(e),
    }
    let len = wire::check_len(prefix, wire::DEFAULT_MAX_FRAME)
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))?;
    buf.clear();
    buf.resize(len, 0);
    stream.read_exact(buf)?;
    Ok(true)
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
    while read_frame(&mut stream, &mut buf)? {
        let req: Request = wire::decode_body(&buf)
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))?;
        let payload = match req.reply_len {
            None => req.payload,
            Some(n) => {
                let mut p = Vec::with_capacity(n as usize);
                wire::pattern(req.seq, n as usize, &mut p);
                p
            }
        };
        let resp = Response {
            seq: req.seq,
            status: Status::Ok as u8,
            server_ns: 0,
            payload,
        };
        out.clear();
        wire::encode_frame(&resp, &mut out);
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
        out.clear();
        wire::encode_frame(
            &Request {
                seq,
                reply_len: None,
                delay_us: 0,
                // The copy is a 64-byte memcpy; it keeps the reference to the public types.
                payload: payload.clone(),
            },
            &mut out,
        );
        stream
            .write_all(&out)
            .map_err(|e| format!("call {seq}: write: {e}"))?;
        if !read_frame(&mut stream, &mut inbuf).map_err(|e| format!("call {seq}: read: {e}"))? {
            return Err(format!("call {seq}: the server closed the connection"));
        }
        let resp: ResponseRef =
            wire::decode_body(&inbuf).map_err(|e| format!("call {seq}: bad reply: {e}"))?;
        if resp.seq != seq || resp.status != Status::Ok as u8 || resp.payload != payload {
            return Err(format!(
                "call {seq}: wrong reply (seq {}, status {}, {} payload bytes)",
                resp.seq,
                resp.status,
                resp.payload.len()
            ));
        }
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
