//! Integration tests of the load engine at high concurrency, against the in-process echo
//! server: the shape and the accounting of a run, never its speed (rates and ratios are
//! `report/load.sh`'s business, not a test's).
//!
//! What every run here must show:
//!
//! - every call counted exactly once: `calls == ok + lost + mismatched + errors`, and on a
//!   healthy server every call ok;
//! - every connection counted, the measured calls taken from one pool: no connection made
//!   more than the run's calls, and a slow connection leaves its calls to the free ones;
//! - a persistent transport opened exactly one connection per connection asked for, all
//!   of them during warm-up: no measured call has a connect phase;
//! - the server answered every call and warm-up call exactly once;
//! - a `-c` the process cannot hold is a usage error before anything runs.

mod common;

use common::TestServer;
use rpcbench::measure::Phase;
use rpcbench::runner::{Engine, RunConfig, TransportRun, run_transport};
use rpcbench::transport::{Endpoint, Port, TransportKind};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::{Duration, Instant};

/// Per-call timeout: generous, because 2,000 connections on a small shared machine can
/// take a while to be served, and a timeout here would be a false failure.
const TIMEOUT: Duration = Duration::from_secs(20);
/// Longest a child process may run before the test fails.
const CHILD_LIMIT: Duration = Duration::from_secs(60);

fn run(server: &TestServer, kind: TransportKind, config: &RunConfig) -> TransportRun {
    run_transport(
        kind,
        &server.endpoint_for(kind),
        config,
        Arc::new(AtomicU64::new(0)),
    )
}

/// UDP datagrams the kernel dropped for a full receive buffer, machine-wide
/// (`RcvbufErrors` in `/proc/net/snmp`).
fn udp_rcvbuf_errors() -> u64 {
    let snmp = std::fs::read_to_string("/proc/net/snmp").unwrap_or_default();
    let mut udp = snmp.lines().filter(|l| l.starts_with("Udp:"));
    let (Some(names), Some(values)) = (udp.next(), udp.next()) else {
        return 0;
    };
    names
        .split_whitespace()
        .zip(values.split_whitespace())
        .find(|(n, _)| *n == "RcvbufErrors")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0)
}

/// Requests the server answered so far, over every protocol.
fn answered(server: &TestServer) -> u64 {
    let s = server.stats();
    // A gRPC call is one HTTP request, but a grpc-stream worker's one request carries all
    // its calls: for gRPC, what was answered is the messages.
    s.tcp.requests + s.http.requests - s.grpc.calls
        + s.grpc.messages
        + s.unix.requests
        + s.udp.requests
        + s.quic.requests
}

/// `calls` measured calls over `connections`, one warm-up call each.
fn config(calls: u64, connections: usize, engine: Engine) -> RunConfig {
    RunConfig {
        calls,
        warmup: connections as u64,
        concurrency: connections,
        timeout: TIMEOUT,
        engine,
        ..RunConfig::default()
    }
}

/// Checks the rules in the header of this file for a healthy run of `calls` calls over
/// `connections` with one warm-up call each; `what` names the case in messages.
fn assert_healthy(run: &TransportRun, calls: u64, connections: usize, what: &str) {
    let kind = run.kind;
    let t = &run.tally;
    let errors: u64 = t.errors.values().sum();
    assert_eq!(
        (t.calls(), t.ok + t.lost + t.mismatched + errors),
        (calls, calls),
        "{what}: every call counted once"
    );
    assert_eq!(
        (t.ok, t.lost, t.mismatched, errors),
        (calls, 0, 0, 0),
        "{what}: every call ok ({:?})",
        t.errors
    );
    assert_eq!(t.latency.len(), calls, "{what}: one latency per ok call");
    assert_eq!(run.workers, connections, "{what}: connections");
    let spread = t.per_connection;
    assert_eq!(
        spread.connections, connections as u64,
        "{what}: every connection counted"
    );
    assert!(
        spread.max <= calls && spread.min <= calls / connections as u64,
        "{what}: calls per connection within the pool of {calls}: {spread:?}"
    );
    if kind.persistent() {
        assert_eq!(
            t.connects,
            kind.expected_connects(connections, 0),
            "{what}: one connection each (one in all for a shared one)"
        );
        assert!(
            t.phase(Phase::Connect).is_empty(),
            "{what}: {} measured calls paid a connect",
            t.phase(Phase::Connect).len()
        );
    } else {
        assert_eq!(
            t.connects,
            calls + connections as u64,
            "{what}: a connection per call and warm-up call"
        );
        // QUIC has no TCP connect: its handshake is the phase every fresh call pays.
        let opening = if kind.port() == Port::Quic {
            Phase::Handshake
        } else {
            Phase::Connect
        };
        assert_eq!(t.phase(opening).len(), calls, "{what}: {opening:?} phase");
    }
}

/// Every transport at `-c 200` (curl on its blocking engine, the others on the event loop
/// that `auto` picks), and the transports with an event loop on the blocking engine too.
#[test]
fn every_transport_at_200_connections() {
    const CONNECTIONS: usize = 200;
    const CALLS: u64 = 2000;
    // A Unix socket too, in a directory of its own (removed at the end).
    let dir = std::env::temp_dir().join(format!("rpcbench-load-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir(&dir).unwrap();
    let server = TestServer::start(rpcbench::server::ServerConfig {
        unix: Some(dir.join("echo.sock")),
        quic: Some(std::net::SocketAddr::from(([127, 0, 0, 1], 0))),
        ..common::config()
    });
    for kind in TransportKind::by_default() {
        let engines: &[Engine] = if kind.has_async() {
            &[Engine::Auto, Engine::Blocking]
        } else {
            &[Engine::Auto]
        };
        for &engine in engines {
            let what = format!("{kind} -c {CONNECTIONS} --engine {engine}");
            let before = answered(&server);
            let drops_before = udp_rcvbuf_errors();
            let r = run(&server, kind, &config(CALLS, CONNECTIONS, engine));
            println!(
                "{what}: ran on {} with {} threads in {:?}",
                r.engine, r.threads, r.elapsed
            );
            let expected = if engine == Engine::Auto && kind.has_async() {
                Engine::Evloop
            } else {
                Engine::Blocking
            };
            assert_eq!(r.engine, expected, "{what}: engine");
            if kind == TransportKind::Udp && r.tally.lost > 0 {
                // UDP may lose datagrams where TCP cannot: a burst above the server
                // socket's receive buffer (capped by net.core.rmem_max) is dropped by the
                // kernel, which counts it. Every lost call must be one of those drops.
                let dropped = udp_rcvbuf_errors() - drops_before;
                assert!(
                    r.tally.lost <= dropped,
                    "{what}: {} lost, {dropped} dropped by the kernel",
                    r.tally.lost
                );
                println!("{what}: {} datagrams dropped by the kernel", r.tally.lost);
                continue;
            }
            assert_healthy(&r, CALLS, CONNECTIONS, &what);
            assert_eq!(
                answered(&server) - before,
                CALLS + CONNECTIONS as u64,
                "{what}: the server answered each call and warm-up call once"
            );
        }
    }
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}

/// 2,000 connections with two calls each, for the persistent transports of the event loop.
#[test]
fn two_thousand_connections() {
    const CONNECTIONS: usize = 2000;
    const CALLS: u64 = 4000;
    let server = TestServer::start_default();
    for kind in [TransportKind::Tcp, TransportKind::HttpKeepalive] {
        let what = format!("{kind} -c {CONNECTIONS}");
        let before = answered(&server);
        let r = run(&server, kind, &config(CALLS, CONNECTIONS, Engine::Auto));
        println!("{what}: {} threads, {:?}", r.threads, r.elapsed);
        assert_eq!(r.engine, Engine::Evloop, "{what}");
        assert_healthy(&r, CALLS, CONNECTIONS, &what);
        assert_eq!(answered(&server) - before, CALLS + CONNECTIONS as u64);
    }
}

/// A relay to `to` that forwards each connection's bytes, holding every chunk a client
/// sends on its `slow`-th connection (counting from 0) for `hold` first. Runs until the
/// test's process ends; each connection has two threads of its own.
fn slow_relay(to: std::net::SocketAddr, slow: usize, hold: Duration) -> std::net::SocketAddr {
    use std::io::{Read, Write};
    use std::net::{TcpListener, TcpStream};
    fn pump(mut from: TcpStream, mut to: TcpStream, hold: Duration) {
        let mut buf = vec![0u8; 64 * 1024];
        while let Ok(n @ 1..) = from.read(&mut buf) {
            std::thread::sleep(hold);
            if to.write_all(&buf[..n]).is_err() {
                break;
            }
        }
        let _ = to.shutdown(std::net::Shutdown::Write);
    }
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind relay");
    let addr = listener.local_addr().expect("relay addr");
    std::thread::spawn(move || {
        for (i, client) in listener.incoming().enumerate() {
            let Ok(client) = client else { return };
            let Ok(server) = TcpStream::connect(to) else {
                return;
            };
            let _ = (client.set_nodelay(true), server.set_nodelay(true));
            let (c2, s2) = (client.try_clone().unwrap(), server.try_clone().unwrap());
            let hold = if i == slow { hold } else { Duration::ZERO };
            std::thread::spawn(move || pump(client, server, hold));
            std::thread::spawn(move || pump(s2, c2, Duration::ZERO));
        }
    });
    addr
}

/// The measured calls are one pool, taken as connections become free: behind a relay
/// that holds one connection's every request for 50 ms, the other connection makes most
/// of the calls while the slow one makes a few (a fixed share would give each half, and
/// leave the quick one idle while the slow one finished alone). The margin is physics:
/// 40 calls over loopback take well under a tenth of the 50 ms hold each.
#[test]
fn a_slow_connection_leaves_its_calls_to_the_free_ones() {
    const CALLS: u64 = 40;
    const HOLD: Duration = Duration::from_millis(50);
    let server = TestServer::start_default();
    for engine in [Engine::Blocking, Engine::Evloop] {
        // Whichever of the two connections the relay accepts second is the slow one.
        let relay = slow_relay(server.tcp, 1, HOLD);
        let endpoint = Endpoint::new(relay, server.http);
        let cfg = RunConfig {
            warmup: 2,
            ..config(CALLS, 2, engine)
        };
        let started = Instant::now();
        let r = run_transport(
            TransportKind::Tcp,
            &endpoint,
            &cfg,
            Arc::new(AtomicU64::new(0)),
        );
        let t = &r.tally;
        let what = format!("tcp -c 2 --engine {engine} behind a slow relay");
        assert_eq!((t.calls(), t.ok), (CALLS, CALLS), "{what}: {:?}", t.errors);
        assert_eq!(t.per_connection.connections, 2, "{what}");
        assert!(
            t.per_connection.min <= CALLS / 4 && t.per_connection.max >= CALLS * 3 / 4,
            "{what}: the free connection takes the calls: {:?}",
            t.per_connection
        );
        assert!(
            started.elapsed() < TIMEOUT,
            "{what}: {:?}",
            started.elapsed()
        );
    }
}

/// Under `--duration` every connection of the event loop calls within the same window: the
/// run lasts the duration (and the one call each connection had in flight at its end),
/// and every connection made calls in it.
#[test]
fn duration_gives_every_connection_the_same_window() {
    const CONNECTIONS: usize = 100;
    const DURATION: Duration = Duration::from_millis(500);
    let server = TestServer::start_default();
    let cfg = RunConfig {
        duration: Some(DURATION),
        ..config(1, CONNECTIONS, Engine::Evloop)
    };
    let started = Instant::now();
    let r = run(&server, TransportKind::Tcp, &cfg);
    let t = &r.tally;
    assert!(r.elapsed >= DURATION, "elapsed {:?}", r.elapsed);
    assert!(
        started.elapsed() < DURATION + TIMEOUT,
        "{:?}",
        started.elapsed()
    );
    assert_eq!(t.calls(), t.ok, "{:?}", t.errors);
    assert_eq!(t.per_connection.connections, CONNECTIONS as u64);
    assert!(t.per_connection.min >= 1, "{:?}", t.per_connection);
    assert_eq!(t.connects, CONNECTIONS as u64);
}

/// `--rate` on the event loop: each connection keeps to its share of the schedule, so a
/// run can never make more calls than the schedule has slots, and the latency from the
/// intended start is kept for every ok call.
#[test]
fn rate_paces_every_connection_of_the_event_loop() {
    const CONNECTIONS: usize = 50;
    const RATE: f64 = 500.0;
    const DURATION: Duration = Duration::from_millis(600);
    let server = TestServer::start_default();
    let cfg = RunConfig {
        duration: Some(DURATION),
        rate: Some(RATE),
        ..config(1, CONNECTIONS, Engine::Evloop)
    };
    let r = run(&server, TransportKind::HttpKeepalive, &cfg);
    let t = &r.tally;
    // Each connection's calls are 100 ms apart (50 / 500 per second): at most 6 of them
    // start within 600 ms.
    let interval = Duration::from_secs_f64(CONNECTIONS as f64 / RATE);
    let slots = (DURATION.as_nanos() / interval.as_nanos()) as u64 + 1;
    assert!(
        t.per_connection.max <= slots,
        "{:?} with {slots} slots",
        t.per_connection
    );
    assert!(t.per_connection.min >= 1, "{:?}", t.per_connection);
    assert_eq!(t.calls(), t.ok, "{:?}", t.errors);
    let intended = t
        .latency_intended
        .as_ref()
        .expect("a paced run keeps the corrected latency");
    assert_eq!(intended.len(), t.ok);
}

/// Runs the `rpcbench` binary, under `ulimit -n NOFILE` when given (soft and hard: the
/// limit cannot be raised again), and returns its exit code and stderr.
fn rpcbench_exit(nofile: Option<u64>, args: &[&str]) -> (Option<i32>, String) {
    let limit = nofile.map_or(String::new(), |n| format!("ulimit -n {n} && "));
    let mut child = Command::new("bash")
        .arg("-c")
        .arg(format!("{limit}exec \"$0\" \"$@\""))
        .arg(env!("CARGO_BIN_EXE_rpcbench"))
        .args(args)
        .arg("--no-progress")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn bash");
    let deadline = Instant::now() + CHILD_LIMIT;
    while child.try_wait().expect("wait").is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("rpcbench {args:?} still running after {CHILD_LIMIT:?}: killed");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let output = child.wait_with_output().expect("output");
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// A `-c` that needs more open files than the limit allows is one line of usage error,
/// naming the limit and its value, before any server starts or any call is made; so are a
/// curl transport above its worker threads and a `-c` above the maximum.
#[test]
fn concurrency_beyond_the_limits_is_a_usage_error() {
    const NOFILE: u64 = 256;
    let (code, err) = rpcbench_exit(
        Some(NOFILE),
        &["--transports", "tcp", "-c", "1000", "-n", "1000"],
    );
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains(&format!("RLIMIT_NOFILE is {NOFILE}")),
        "names the limit: {err}"
    );
    assert_eq!(err.trim().lines().count(), 1, "one line: {err}");

    let (code, err) = rpcbench_exit(
        None,
        &["--transports", "curl-reuse", "-c", "2000", "-n", "2000"],
    );
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("1024") && err.contains("curl-reuse"), "{err}");

    let (code, err) = rpcbench_exit(None, &["-c", "10001"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("10000"), "{err}");
}
