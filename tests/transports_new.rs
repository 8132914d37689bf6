//! The transports internal services use today (issue #11), each against the real
//! in-process server: every call verified and counted once, `connects` as the transport
//! promises, echo and pattern replies, payloads up to 64 KiB, one and eight workers. And
//! the HTTP/2 port against clients that are not ours (curl, h2load).

use rpcbench::measure::Phase;
use rpcbench::runner::{Engine, RunConfig, TransportRun, run_transport};
use rpcbench::server::{ServerConfig, ServerHandle};
use rpcbench::transport::{Endpoint, TransportKind};
use rpcbench::wire::MAX_UDP_MESSAGE_PAYLOAD;
use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

/// The transports of issue #11 that exist so far.
const NEW: [TransportKind; 4] = [
    TransportKind::H2,
    TransportKind::H2Mux,
    TransportKind::Unix,
    TransportKind::Udp,
];

/// A private directory for a test's Unix socket, removed when dropped.
struct SocketDir(PathBuf);

impl SocketDir {
    fn new(test: &str) -> SocketDir {
        let dir = std::env::temp_dir().join(format!("rpcbench-{test}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir(&dir).expect("create a socket directory");
        SocketDir(dir)
    }
}

impl Drop for SocketDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The server and the directory of its Unix socket (dropped after it).
struct Served {
    server: ServerHandle,
    _dir: SocketDir,
}

impl std::ops::Deref for Served {
    type Target = ServerHandle;
    fn deref(&self) -> &ServerHandle {
        &self.server
    }
}

/// Calls per run, as the issue asks: enough to cross any per-connection stream limit.
const CALLS: u64 = 2000;

fn server(test: &str) -> Served {
    let dir = SocketDir::new(test);
    let config = ServerConfig {
        unix: Some(dir.0.join("echo.sock")),
        ..ServerConfig::loopback_any_port()
    };
    Served {
        server: ServerHandle::start(config, 1).expect("start the echo server"),
        _dir: dir,
    }
}

fn endpoint(server: &ServerHandle) -> Endpoint {
    Endpoint::new(server.tcp_addr.unwrap(), server.http_addr.unwrap())
        .with_udp_port(server.udp_addr.unwrap().port())
        .with_unix(server.unix_path.clone())
}

fn run(server: &ServerHandle, kind: TransportKind, config: &RunConfig) -> TransportRun {
    run_transport(kind, &endpoint(server), config, Arc::new(AtomicU64::new(0)))
}

fn config(concurrency: usize) -> RunConfig {
    RunConfig {
        calls: CALLS,
        warmup: 20,
        concurrency,
        timeout: Duration::from_secs(5),
        ..RunConfig::default()
    }
}

/// Every call ok and counted once; connects as the transport promises.
fn assert_healthy(kind: TransportKind, run: &TransportRun, config: &RunConfig) {
    let t = &run.tally;
    assert_eq!(t.calls(), config.calls, "{kind}: every call counted");
    assert_eq!(t.ok, config.calls, "{kind}: {:?}", t.errors);
    assert_eq!((t.lost, t.mismatched, t.duplicated), (0, 0, 0), "{kind}");
    assert_eq!(t.latency.len(), t.ok, "{kind}: one latency per ok call");
    let expected = kind.expected_connects(config.concurrency, config.calls + config.warmup);
    assert_eq!(t.connects, expected, "{kind}: connects");
    if kind.persistent() {
        assert!(
            t.phase(Phase::Connect).is_empty(),
            "{kind}: a measured call paid a connect"
        );
    }
    assert_eq!(
        t.phase(Phase::FirstByte).len(),
        t.ok,
        "{kind}: first byte timed"
    );
    assert_eq!(
        t.phase(Phase::Server).len(),
        t.ok,
        "{kind}: server time read"
    );
}

#[test]
fn every_new_transport_at_one_and_eight_workers() {
    let server = server("one-and-eight");
    for kind in NEW {
        for workers in [1, 8] {
            let cfg = config(workers);
            assert_healthy(kind, &run(&server, kind, &cfg), &cfg);
        }
    }
}

#[test]
fn every_new_transport_with_pattern_replies_and_64k_payloads() {
    let server = server("pattern-64k");
    for kind in NEW {
        // A UDP reply may not be larger than its request (status 3): the request carries
        // as many bytes as the pattern asked for.
        let pattern = RunConfig {
            calls: 200,
            reply: Some(10_000),
            payload: if kind == TransportKind::Udp {
                10_000
            } else {
                64
            },
            ..config(2)
        };
        assert_healthy(kind, &run(&server, kind, &pattern), &pattern);
        // 64 KiB is more than one datagram holds: UDP runs the largest payload that fits.
        let big = RunConfig {
            calls: 200,
            payload: if kind == TransportKind::Udp {
                MAX_UDP_MESSAGE_PAYLOAD as u32
            } else {
                64 << 10
            },
            ..config(2)
        };
        assert_healthy(kind, &run(&server, kind, &big), &big);
    }
}

/// unix and udp on the event-loop engine: the same checks, the async twins.
#[test]
fn unix_and_udp_on_the_event_loop() {
    let server = server("evloop");
    for kind in [TransportKind::Unix, TransportKind::Udp] {
        for workers in [1, 8] {
            let cfg = RunConfig {
                engine: Engine::Evloop,
                ..config(workers)
            };
            assert_healthy(kind, &run(&server, kind, &cfg), &cfg);
        }
    }
}

/// A UDP payload or reply one datagram cannot carry is refused before the run, in words
/// that say why; the largest that fits is not.
#[test]
fn a_udp_payload_above_one_datagram_is_a_clear_error() {
    let fits = RunConfig {
        payload: MAX_UDP_MESSAGE_PAYLOAD as u32,
        ..config(1)
    };
    rpcbench::runner::check_limits(&[TransportKind::Udp], &fits, true).expect("the largest fits");
    for (payload, reply, what) in [
        (MAX_UDP_MESSAGE_PAYLOAD as u32 + 1, None, "--payload"),
        (64 << 10, None, "--payload"),
        (64, Some(70_000), "--reply"),
    ] {
        let cfg = RunConfig {
            payload,
            reply,
            ..config(1)
        };
        let err = rpcbench::runner::check_limits(&[TransportKind::Udp], &cfg, true)
            .expect_err("too large for a datagram")
            .to_string();
        assert!(
            err.contains(what) && err.contains("one datagram") && err.contains("65481"),
            "{err}"
        );
        // Other transports carry it.
        rpcbench::runner::check_limits(&[TransportKind::Tcp], &cfg, true).unwrap();
    }
}

/// A UDP reply larger than its request is refused with status 3 (counted as such on
/// both sides), never sent: the server is no amplifier.
#[test]
fn a_udp_reply_above_its_request_is_status_3() {
    let server = server("amplify");
    let cfg = RunConfig {
        calls: 50,
        warmup: 0,
        payload: 100,
        reply: Some(1000),
        ..config(1)
    };
    let run = run(&server, TransportKind::Udp, &cfg);
    assert_eq!(run.tally.calls(), 50);
    assert_eq!(
        run.tally.errors_by_key().get("status_3"),
        Some(&50),
        "{:?}",
        run.tally.errors
    );
    let stats = server.stats();
    assert_eq!(
        stats.rejected(rpcbench::server::stats::Reject::UdpReplyAboveRequest),
        50
    );
    // Every reply was smaller than its request plus the reply's header.
    assert!(stats.udp.bytes_out <= stats.udp.bytes_in, "{:?}", stats.udp);
}

#[test]
fn a_new_transport_against_no_server_counts_refused_connects() {
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = closed.local_addr().unwrap();
    drop(closed);
    let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let udp_port = udp.local_addr().unwrap().port();
    drop(udp);
    // A stale socket: the file of a listener that is gone, which refuses connects.
    let dir = SocketDir::new("refused");
    let stale = dir.0.join("stale.sock");
    drop(std::os::unix::net::UnixListener::bind(&stale).unwrap());
    for kind in NEW {
        let cfg = RunConfig {
            calls: 10,
            warmup: 0,
            ..config(1)
        };
        let run = run_transport(
            kind,
            &Endpoint::new(addr, addr)
                .with_udp_port(udp_port)
                .with_unix(Some(stale.clone())),
            &cfg,
            Arc::new(AtomicU64::new(0)),
        );
        assert_eq!(run.tally.calls(), 10, "{kind}");
        assert_eq!(
            run.tally.errors_by_key().get("connect_refused"),
            Some(&10),
            "{kind}: {:?}",
            run.tally.errors
        );
    }
}

/// The HTTP/2 port answers clients that are not ours: curl with prior knowledge, and
/// h2load (nghttp2) for many streams on one connection.
#[test]
fn the_http2_port_serves_curl_and_h2load() {
    let server = server("http2");
    let http = server.http_addr.unwrap();
    let out = Command::new("curl")
        .args([
            "--silent",
            "--show-error",
            "--http2-prior-knowledge",
            "--max-time",
            "10",
        ])
        .args([
            "-H",
            "x-rpcbench-seq: 7",
            "--data-binary",
            "hello",
            "-D",
            "-",
        ])
        .arg(format!("http://{http}/echo"))
        .output()
        .expect("curl (the test needs it; .ci/run installs it)");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.starts_with("HTTP/2 200"), "{text}");
    assert!(
        text.to_ascii_lowercase().contains("x-rpcbench-seq: 7"),
        "{text}"
    );
    assert!(text.ends_with("hello"), "{text}");

    let out = Command::new("h2load")
        .args(["-n", "2000", "-c", "1", "-m", "32"])
        .arg(format!("http://{http}/echo?reply_len=100"))
        .output()
        .expect("h2load (nghttp2-client; .ci/run installs it)");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains("2000 succeeded, 0 failed, 0 errored"),
        "h2load: {text}"
    );
    assert!(text.contains("status codes: 2000 2xx"), "h2load: {text}");

    // Two HTTP/2 connections (curl's, h2load's), 2001 streams, none left open; h2load
    // never has more than its 32 in flight on its one connection.
    let h2 = server.stats().http2;
    assert_eq!(
        (h2.connections_total, h2.streams_total),
        (2, 2001),
        "{h2:?}"
    );
    assert_eq!(h2.streams_open, 0, "{h2:?}");
    assert!((1..=32).contains(&h2.streams_max_per_connection), "{h2:?}");
}

/// `h2-mux` at `-c 64` is 64 concurrent streams on one connection. Every call waits 20 ms
/// in the server, far longer than 64 calls take to be sent, so the server sees nearly all
/// of them open at once: at least 32 is the bar, and at most 64 is physics.
#[test]
fn h2_mux_at_64_workers_is_64_streams_on_one_connection() {
    let server = server("h2-mux-64");
    let cfg = RunConfig {
        calls: 640,
        warmup: 64,
        delay_us: 20_000,
        ..config(64)
    };
    let run = run(&server, TransportKind::H2Mux, &cfg);
    assert_healthy(TransportKind::H2Mux, &run, &cfg);
    assert_eq!(run.tally.connects, 1);
    let h2 = server.stats().http2;
    assert_eq!(h2.connections_total, 1, "{h2:?}");
    assert_eq!(h2.streams_total, 640 + 64, "{h2:?}");
    assert!(
        (32..=64).contains(&h2.streams_max_per_connection),
        "at most {} streams were open at once on the one connection: {h2:?}",
        h2.streams_max_per_connection
    );
}
