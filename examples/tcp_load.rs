//! Closed-loop load for the raw TCP echo protocol: N persistent connections, each doing
//! sequential echo round trips (one request in flight per connection) for D seconds.
//!
//! ```text
//! cargo run --release --example tcp_load -- 127.0.0.1:7001 [--conns 64] [--duration 10]
//!     [--size 64]
//! ```
//!
//! Every reply is checked: same seq, status ok, payload identical to what was sent. The
//! last line is `calls/s <rate>`, summed over all connections. Runs on one thread (a
//! current-thread tokio runtime), so it can be pinned to a single core with `taskset`.

use rpcbench::wire::{self, Request, ResponseRef, Status};
use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

struct Args {
    addr: SocketAddr,
    conns: usize,
    duration: Duration,
    size: usize,
}

fn parse_args() -> Result<Args, String> {
    let mut addr = None;
    let mut conns = 64;
    let mut duration = Duration::from_secs(10);
    let mut size = 64;
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let mut value = |name: &str| it.next().ok_or(format!("{name} needs a value"));
        match arg.as_str() {
            "--conns" => {
                conns = value("--conns")?
                    .parse()
                    .map_err(|e| format!("--conns: {e}"))?
            }
            "--duration" => {
                let secs: f64 = value("--duration")?
                    .trim_end_matches('s')
                    .parse()
                    .map_err(|e| format!("--duration: {e}"))?;
                duration = Duration::try_from_secs_f64(secs).map_err(|e| e.to_string())?;
            }
            "--size" => {
                size = value("--size")?
                    .parse()
                    .map_err(|e| format!("--size: {e}"))?
            }
            "-h" | "--help" => {
                return Err(
                    "usage: tcp_load ADDR [--conns N] [--duration SECS] [--size BYTES]".into(),
                );
            }
            _ if addr.is_none() => {
                addr = Some(arg.parse().map_err(|e| format!("address {arg:?}: {e}"))?)
            }
            _ => return Err(format!("unexpected argument {arg:?}")),
        }
    }
    Ok(Args {
        addr: addr.ok_or("missing server address (IP:PORT)")?,
        conns: conns.max(1),
        duration,
        size,
    })
}

/// Runs sequential round trips on one connection until `deadline`; returns the count.
///
/// Lean on purpose, as a peer of `rpcbench --transports tcp -c N` should be: the request,
/// the payload and both buffers are reused, and a reply is decoded in place
/// ([`ResponseRef`]), so a call allocates nothing.
async fn one_connection(
    addr: SocketAddr,
    id: u64,
    size: usize,
    deadline: Instant,
) -> Result<u64, String> {
    let mut stream = TcpStream::connect(addr)
        .await
        .map_err(|e| format!("connect {addr}: {e}"))?;
    stream.set_nodelay(true).map_err(|e| e.to_string())?;
    let mut out = Vec::with_capacity(size + 32);
    let mut inbuf = vec![0u8; 4096];
    let mut have = 0;
    // Sequence numbers are unique over all connections: the id sits in the top bits.
    let mut req = Request {
        seq: id << 40,
        reply_len: None,
        delay_us: 0,
        payload: Vec::with_capacity(size),
    };
    let mut calls = 0;
    while Instant::now() < deadline {
        req.seq += 1;
        req.payload.clear();
        wire::pattern(req.seq, size, &mut req.payload);
        out.clear();
        wire::encode_frame(&req, &mut out);
        stream
            .write_all(&out)
            .await
            .map_err(|e| format!("write: {e}"))?;
        let used = loop {
            match wire::decode_frame::<ResponseRef>(&inbuf[..have], wire::DEFAULT_MAX_FRAME) {
                Ok(Some((resp, used))) => {
                    if resp.seq != req.seq
                        || resp.status != Status::Ok as u8
                        || resp.payload != req.payload
                    {
                        return Err(format!(
                            "wrong reply: seq {} (want {}), status {}, payload {} bytes \
                             (want {})",
                            resp.seq,
                            req.seq,
                            resp.status,
                            resp.payload.len(),
                            req.payload.len()
                        ));
                    }
                    break used;
                }
                Ok(None) => {}
                Err(e) => return Err(format!("bad reply frame: {e}")),
            }
            if have == inbuf.len() {
                inbuf.resize(inbuf.len() * 2, 0);
            }
            let n = stream
                .read(&mut inbuf[have..])
                .await
                .map_err(|e| format!("read: {e}"))?;
            if n == 0 {
                return Err("server closed the connection".into());
            }
            have += n;
        };
        inbuf.copy_within(used..have, 0);
        have -= used;
        if have != 0 {
            return Err("server sent more than one reply".into());
        }
        calls += 1;
    }
    Ok(calls)
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("tcp_load: {e}");
            return ExitCode::from(2);
        }
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let result = rt.block_on(async {
        let start = Instant::now();
        let deadline = start + args.duration;
        let tasks: Vec<_> = (0..args.conns)
            .map(|i| tokio::spawn(one_connection(args.addr, i as u64, args.size, deadline)))
            .collect();
        let mut total = 0;
        let mut errors = Vec::new();
        for t in tasks {
            match t.await {
                Ok(Ok(n)) => total += n,
                Ok(Err(e)) => errors.push(e),
                Err(e) => errors.push(format!("task failed: {e}")),
            }
        }
        (total, errors, start.elapsed())
    });
    let (total, errors, elapsed) = result;
    for e in errors.iter().take(5) {
        eprintln!("tcp_load: {e}");
    }
    let secs = elapsed.as_secs_f64();
    println!(
        "conns {} size {} seconds {secs:.2} calls {total} errors {}",
        args.conns,
        args.size,
        errors.len()
    );
    println!("calls/s {:.1}", total as f64 / secs);
    if errors.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
