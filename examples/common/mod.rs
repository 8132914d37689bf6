//! What the reference pairs (`crr_ref`, `unix_ref`, `tcp_ref`, `h2_ref`,
//! `grpc_stream_ref`) share: their `main`, their command line after the address,
//! `N [--payload BYTES] [--warmup W]`, and reading a frame of rpcbench's raw protocol.

// Each example builds this module alone and uses a part of it.
#![allow(dead_code)]

use rpcbench::wire::{self, LEN_PREFIX, Request, Response, ResponseRef, Status};
use std::io::{Read, Write};
use std::process::ExitCode;
use std::time::Duration;

/// The `main` of a pair with a server: `NAME server ADDR` or `NAME client ADDR N ...`,
/// `--help`, usage errors (exit 2) and failures (exit 1) as one line.
pub fn server_or_client(
    name: &str,
    usage: &str,
    server: fn(&str) -> Result<(), String>,
    client: fn(&[String]) -> Result<(), String>,
) -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("server") if args.len() == 2 => server(&args[1]),
        Some("client") if args.len() >= 3 => client(&args[1..]),
        Some("-h" | "--help") => {
            println!("{usage}");
            return ExitCode::SUCCESS;
        }
        _ => {
            eprintln!("{usage}");
            return ExitCode::from(2);
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{name}: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The `main` of a client alone (`NAME ADDR N ...`): runs `run` and prints its mean call
/// as the last line, `mean_us <mean>`.
pub fn client_only(
    name: &str,
    usage: &str,
    run: fn(&[String]) -> Result<Duration, String>,
) -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().is_some_and(|a| a == "-h" || a == "--help") {
        println!("{usage}");
        return ExitCode::SUCCESS;
    }
    if args.len() < 2 {
        eprintln!("{usage}");
        return ExitCode::from(2);
    }
    match run(&args) {
        Ok(mean) => {
            println!("mean_us {:.3}", mean.as_secs_f64() * 1e6);
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("{name}: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Reads one whole frame's body into `buf`; `Ok(false)` when the peer closed before a
/// frame began.
pub fn read_frame(stream: &mut impl Read, buf: &mut Vec<u8>) -> std::io::Result<bool> {
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

/// How many calls a reference client makes, and of what.
pub struct ClientArgs {
    /// Timed calls.
    pub calls: u64,
    /// Request payload bytes.
    pub payload_len: usize,
    /// Untimed calls before them.
    pub warmup: u64,
}

impl ClientArgs {
    /// Parses `N [--payload BYTES] [--warmup W]`, warm-up `warmup` unless the flag says
    /// otherwise; the error names what is wrong, then `usage`.
    pub fn parse(args: &[String], warmup: u64, usage: &str) -> Result<ClientArgs, String> {
        let n = args.first().ok_or(format!("N is missing\n{usage}"))?;
        let calls: u64 = n.parse().map_err(|e| format!("N {n:?}: {e}"))?;
        if calls == 0 {
            return Err("N must be at least 1".into());
        }
        let mut parsed = ClientArgs {
            calls,
            payload_len: 64,
            warmup,
        };
        let mut it = args[1..].iter();
        while let Some(flag) = it.next() {
            let value = it.next().ok_or(format!("{flag} needs a value"))?;
            match flag.as_str() {
                "--payload" => {
                    parsed.payload_len = value.parse().map_err(|e| format!("--payload: {e}"))?
                }
                "--warmup" => {
                    parsed.warmup = value.parse().map_err(|e| format!("--warmup: {e}"))?
                }
                _ => return Err(format!("unknown flag {flag}\n{usage}")),
            }
        }
        Ok(parsed)
    }

    /// The request payload: bytes 0, 1, 2, ... wrapping at 256.
    pub fn payload(&self) -> Vec<u8> {
        (0..self.payload_len).map(|i| i as u8).collect()
    }
}

/// The reply frame to the request frame body `body`, into `out` (cleared first): the same
/// seq, status 0, server_ns 0, and the request's payload, or the pattern when `reply_len`
/// is set, as rpcbench-echo answers.
pub fn echo_reply(body: &[u8], out: &mut Vec<u8>) -> std::io::Result<()> {
    let req: Request = wire::decode_body(body)
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
    wire::encode_frame(&resp, out);
    Ok(())
}

/// An HTTP/2 connection by prior knowledge to `addr` (TCP_NODELAY), driven by a task of
/// its own on the current runtime, as the `h2` crate's examples do.
pub async fn h2_connect(
    addr: std::net::SocketAddr,
) -> Result<h2::client::SendRequest<bytes::Bytes>, String> {
    let tcp = tokio::net::TcpStream::connect(addr)
        .await
        .map_err(|e| format!("connect {addr}: {e}"))?;
    tcp.set_nodelay(true).map_err(|e| e.to_string())?;
    let (sender, conn) = h2::client::handshake(tcp)
        .await
        .map_err(|e| format!("HTTP/2 handshake: {e}"))?;
    tokio::spawn(async move {
        let _ = conn.await;
    });
    Ok(sender)
}

/// One call on `stream`: a request frame of `payload` with `seq` written, its reply frame
/// read whole and checked (seq, status, payload); `out` and `inbuf` are scratch.
pub fn call(
    stream: &mut (impl Read + Write),
    seq: u64,
    payload: &[u8],
    out: &mut Vec<u8>,
    inbuf: &mut Vec<u8>,
) -> Result<(), String> {
    out.clear();
    wire::encode_frame(
        &Request {
            seq,
            reply_len: None,
            delay_us: 0,
            // The copy is a 64-byte memcpy; it keeps the reference to the public types.
            payload: payload.to_vec(),
        },
        out,
    );
    stream
        .write_all(out)
        .map_err(|e| format!("call {seq}: write: {e}"))?;
    if !read_frame(stream, inbuf).map_err(|e| format!("call {seq}: read: {e}"))? {
        return Err(format!("call {seq}: the server closed the connection"));
    }
    let resp: ResponseRef =
        wire::decode_body(inbuf).map_err(|e| format!("call {seq}: bad reply: {e}"))?;
    if resp.seq != seq || resp.status != Status::Ok as u8 || resp.payload != payload {
        return Err(format!(
            "call {seq}: wrong reply (seq {}, status {}, {} payload bytes)",
            resp.seq,
            resp.status,
            resp.payload.len()
        ));
    }
    Ok(())
}

/// A client's `ADDR N [--payload BYTES] [--warmup W]` (warm-up `warmup` by default), and
/// the current-thread runtime it runs on.
pub fn client_setup(
    args: &[String],
    warmup: u64,
    usage: &str,
) -> Result<(std::net::SocketAddr, ClientArgs, tokio::runtime::Runtime), String> {
    let addr = args[0]
        .parse()
        .map_err(|e| format!("ADDR {:?}: {e}", args[0]))?;
    let parsed = ClientArgs::parse(&args[1..], warmup, usage)?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("runtime: {e}"))?;
    Ok((addr, parsed, rt))
}
