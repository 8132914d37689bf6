//! gRPC end to end (issue #11): rpcbench's three gRPC transports against the real
//! in-process server (every call verified and counted once, `connects` as promised,
//! echo and pattern replies, payloads up to 64 KiB, one and eight workers); clients and
//! servers that are not ours (Python grpcio, both ways); server reflection; every status
//! reaching the JSON as an error kind of its own; and hand-made bad frames, each counted,
//! with healthy clients still served.
//!
//! The Python tests need `python3 -m pip install grpcio grpcio-tools` (`.ci/run` does it)
//! and fail, saying so, without it.

mod common;

use common::TestServer;
use rpcbench::measure::Phase;
use rpcbench::proto::echo_client::EchoClient;
use rpcbench::proto::{EchoReply, EchoRequest};
use rpcbench::runner::{RunConfig, TransportRun, run_transport};
use rpcbench::server::stats::{Reject, StatsSnapshot};
use rpcbench::transport::{Endpoint, TransportKind};
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::{Duration, Instant};

/// The gRPC transports.
const GRPC: [TransportKind; 3] = [
    TransportKind::Grpc,
    TransportKind::GrpcMux,
    TransportKind::GrpcStream,
];

/// Calls per run, as the issue asks.
const CALLS: u64 = 2000;

/// Longest a test waits for a counter to move or a child to print its port.
const WAIT: Duration = Duration::from_secs(10);

fn endpoint(http: SocketAddr) -> Endpoint {
    // The gRPC transports call the HTTP port only; the TCP port is never dialled.
    Endpoint::new(http, http)
}

fn run(http: SocketAddr, kind: TransportKind, config: &RunConfig) -> TransportRun {
    run_transport(kind, &endpoint(http), config, Arc::new(AtomicU64::new(0)))
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

/// Every call ok and counted once; connects as the transport promises; the phases the
/// transport has timed on every call.
fn assert_healthy(kind: TransportKind, run: &TransportRun, config: &RunConfig) {
    let t = &run.tally;
    assert_eq!(t.calls(), config.calls, "{kind}: every call counted");
    assert_eq!(t.ok, config.calls, "{kind}: {:?}", t.errors);
    assert_eq!((t.lost, t.mismatched, t.duplicated), (0, 0, 0), "{kind}");
    assert_eq!(t.latency.len(), t.ok, "{kind}: one latency per ok call");
    let expected = kind.expected_connects(config.concurrency, config.calls + config.warmup);
    assert_eq!(t.connects, expected, "{kind}: connects");
    assert!(
        t.phase(Phase::Connect).is_empty(),
        "{kind}: a measured call paid a connect"
    );
    // A stream has no headers per message: no first byte to time.
    let first_bytes = if kind == TransportKind::GrpcStream {
        0
    } else {
        t.ok
    };
    assert_eq!(t.phase(Phase::FirstByte).len(), first_bytes, "{kind}");
    assert_eq!(t.phase(Phase::Server).len(), t.ok, "{kind}: server time");
}

#[test]
fn every_grpc_transport_at_one_and_eight_workers() {
    let server = TestServer::start_default();
    for kind in GRPC {
        for workers in [1, 8] {
            let before = server.stats();
            let cfg = config(workers);
            assert_healthy(kind, &run(server.http, kind, &cfg), &cfg);
            let after = server.stats();
            // One message answered per call and warm-up call; one gRPC call each, but
            // one per worker's stream for grpc-stream.
            let sent = cfg.calls + cfg.warmup;
            assert_eq!(after.grpc.messages - before.grpc.messages, sent, "{kind}");
            let calls = if kind == TransportKind::GrpcStream {
                workers as u64
            } else {
                sent
            };
            assert_eq!(after.grpc.calls - before.grpc.calls, calls, "{kind}");
        }
    }
    common::assert_rejects(&server.stats(), &[]);
}

#[test]
fn every_grpc_transport_with_pattern_replies_and_64k_payloads() {
    let server = TestServer::start_default();
    for kind in GRPC {
        let pattern = RunConfig {
            calls: 200,
            reply: Some(10_000),
            ..config(2)
        };
        assert_healthy(kind, &run(server.http, kind, &pattern), &pattern);
        let big = RunConfig {
            calls: 200,
            payload: 64 << 10,
            ..config(2)
        };
        assert_healthy(kind, &run(server.http, kind, &big), &big);
    }
}

#[test]
fn a_grpc_transport_against_no_server_counts_refused_connects() {
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = closed.local_addr().unwrap();
    drop(closed);
    for kind in GRPC {
        let cfg = RunConfig {
            calls: 10,
            warmup: 0,
            ..config(1)
        };
        let run = run(addr, kind, &cfg);
        assert_eq!(run.tally.calls(), 10, "{kind}");
        assert_eq!(
            run.tally.errors_by_key().get("connect_refused"),
            Some(&10),
            "{kind}: {:?}",
            run.tally.errors
        );
        assert_eq!(run.tally.connects, 0, "{kind}");
    }
}

/// The server's refusals reach rpcbench's JSON as their gRPC status: a delay above the
/// server's maximum is RESOURCE_EXHAUSTED, on a unary call and on a stream.
#[test]
fn over_the_limit_is_resource_exhausted_and_counted() {
    let server = TestServer::start(rpcbench::server::ServerConfig {
        max_delay: Duration::from_millis(1),
        ..common::config()
    });
    for kind in GRPC {
        let cfg = RunConfig {
            calls: 5,
            warmup: 0,
            delay_us: 2000,
            ..config(1)
        };
        let r = run(server.http, kind, &cfg);
        assert_eq!(
            r.tally.errors_by_key().get("grpc_resource_exhausted"),
            Some(&5),
            "{kind}: {:?}",
            r.tally.errors
        );
    }
    let stats = server.stats();
    common::assert_rejects(&stats, &[(Reject::GrpcResourceExhausted, 15)]);
}

/// `rpcbench` with no target runs the gRPC transports against its embedded server.
#[test]
fn the_embedded_server_serves_the_grpc_transports() {
    let out = Command::new(env!("CARGO_BIN_EXE_rpcbench"))
        .args(["--transports", "grpc,grpc-mux,grpc-stream,h2-mux"])
        .args(["-n", "200", "-c", "3", "--warmup", "3", "--format", "json"])
        .output()
        .expect("run rpcbench");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: serde_json::Value = serde_json::from_str(&text).expect("JSON");
    let runs = report["runs"].as_array().expect("runs");
    // One run per transport and address mode.
    assert!(runs.len() >= 3, "{text}");
    // Each round opens its own connections.
    let rounds = report["config"]["rounds"].as_u64().expect("rounds");
    for r in runs {
        let name = r["transport"].as_str().unwrap();
        assert_eq!(r["ok"].as_u64(), Some(200), "{r}");
        let connects = rounds * if name.ends_with("-mux") { 1 } else { 3 };
        assert_eq!(r["connects"].as_u64(), Some(connects), "{r}");
    }
    // The findings weigh the shared channel against h2-mux and against a channel each.
    let report: rpcbench::report::Report = serde_json::from_str(&text).expect("a Report");
    use rpcbench::analysis::findings::Finding;
    let findings = rpcbench::analysis::findings(&report, &[], None);
    let grpc_mux = findings
        .iter()
        .find_map(|f| match f {
            Finding::Multiplexing(shared) => shared
                .iter()
                .find(|m| m.shared.transport == TransportKind::GrpcMux),
            _ => None,
        })
        .unwrap_or_else(|| panic!("{findings:#?}"));
    assert_eq!(grpc_mux.workers, 3);
    let against: Vec<_> = grpc_mux.against.iter().map(|(f, _)| f.transport).collect();
    assert_eq!(against, [TransportKind::H2Mux, TransportKind::Grpc]);
}

// ---------------------------------------------------------------------------------------
// Python grpcio, both ways
// ---------------------------------------------------------------------------------------

/// A script of `tests/fixtures/grpc/`.
fn fixture(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/grpc")
        .join(name)
        .to_string_lossy()
        .into_owned()
}

/// Panics with the script's own words when python3 or grpcio is missing: these tests
/// must not pass without the client or server they are about.
fn python(args: &[&str]) -> Command {
    let mut cmd = Command::new("python3");
    cmd.args(args);
    cmd
}

/// A Python grpcio server (`server.py`), killed by its PID when dropped.
struct PyServer {
    child: Child,
    addr: SocketAddr,
}

impl PyServer {
    fn start(args: &[&str]) -> PyServer {
        let mut all = vec![fixture("server.py")];
        all.extend(args.iter().map(|a| a.to_string()));
        let all: Vec<&str> = all.iter().map(String::as_str).collect();
        let mut child = python(&all)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("python3 is needed for the grpcio interop tests");
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = BufReader::new(stdout).read_line(&mut line);
            let _ = tx.send(line);
        });
        let line = rx.recv_timeout(WAIT).unwrap_or_default();
        let port: u16 = match line.trim().parse() {
            Ok(port) => port,
            Err(_) => {
                let _ = child.kill();
                let out = child.wait_with_output().unwrap();
                panic!(
                    "the grpcio server did not print its port (python3 -m pip install grpcio \
                     grpcio-tools): {}",
                    String::from_utf8_lossy(&out.stderr)
                );
            }
        };
        PyServer {
            child,
            addr: SocketAddr::from(([127, 0, 0, 1], port)),
        }
    }
}

impl Drop for PyServer {
    fn drop(&mut self) {
        // Child::kill signals this child's PID.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn a_python_grpcio_client_calls_the_echo_server() {
    let server = TestServer::start_default();
    let config = common::config();
    let out = python(&[
        &fixture("client.py"),
        &server.http.to_string(),
        "1000",
        &config.max_delay.as_micros().to_string(),
        &config.max_frame.to_string(),
    ])
    .output()
    .expect("python3 is needed for the grpcio interop tests");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "the grpcio client failed (python3 -m pip install grpcio grpcio-tools): {stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let counts: serde_json::Value = serde_json::from_str(stdout.trim()).expect("JSON");
    assert_eq!(counts["unary_ok"], 1000);
    assert_eq!(counts["stream_ok"], 1000);
    assert_eq!(
        counts["timings"], 1000,
        "server-timing on every unary reply"
    );
    assert_eq!(counts["negative_reply_len"], "INVALID_ARGUMENT");
    assert_eq!(counts["negative_delay"], "INVALID_ARGUMENT");
    assert_eq!(counts["delay_over_max"], "RESOURCE_EXHAUSTED");
    assert_eq!(counts["reply_over_max"], "RESOURCE_EXHAUSTED");
    assert_eq!(counts["stream_refused"], "INVALID_ARGUMENT");
    let stats = server.stats();
    // 1000 unary, 4 refused unary, 2 streams.
    assert_eq!(stats.grpc.calls, 1006);
    assert_eq!(stats.grpc.messages, 2000);
    common::assert_rejects(
        &stats,
        &[
            (Reject::GrpcInvalidArgument, 3),
            (Reject::GrpcResourceExhausted, 2),
        ],
    );
}

#[test]
fn the_grpc_transports_call_a_python_grpcio_server() {
    let py = PyServer::start(&[]);
    // grpc-mux's request headers are encoded by rpcbench's own HPACK encoder
    // (`transport::hpack`), here decoded by gRPC's C core.
    let kinds = [
        TransportKind::Grpc,
        TransportKind::GrpcStream,
        TransportKind::GrpcMux,
    ];
    for kind in kinds {
        for cfg in [
            RunConfig {
                calls: 300,
                ..config(2)
            },
            RunConfig {
                calls: 100,
                reply: Some(3000),
                ..config(1)
            },
        ] {
            assert_healthy(kind, &run(py.addr, kind, &cfg), &cfg);
        }
    }
}

/// Every gRPC status a server can send reaches the JSON as an error kind of its own:
/// the Python server ends its n-th call with status n mod 17.
#[test]
fn every_grpc_error_status_maps_to_an_error_kind() {
    const CYCLES: u64 = 3;
    let py = PyServer::start(&["--fail-cycle"]);
    let cfg = RunConfig {
        calls: 17 * CYCLES,
        warmup: 0,
        ..config(1)
    };
    let r = run(py.addr, TransportKind::Grpc, &cfg);
    assert_eq!(r.tally.ok, CYCLES, "{:?}", r.tally.errors);
    assert_eq!(r.tally.lost, 0);
    let keys = r.tally.errors_by_key();
    let kinds: Vec<&str> = keys.keys().map(String::as_str).collect();
    assert_eq!(
        kinds,
        [
            "grpc_aborted",
            "grpc_already_exists",
            "grpc_cancelled",
            "grpc_data_loss",
            "grpc_deadline_exceeded",
            "grpc_failed_precondition",
            "grpc_internal",
            "grpc_invalid_argument",
            "grpc_not_found",
            "grpc_out_of_range",
            "grpc_permission_denied",
            "grpc_resource_exhausted",
            "grpc_unauthenticated",
            "grpc_unavailable",
            "grpc_unimplemented",
            "grpc_unknown",
        ]
    );
    assert!(
        r.tally.errors.values().all(|&n| n == CYCLES),
        "{:?}",
        r.tally.errors
    );
    // The report's JSON carries them as they are.
    let json = serde_json::to_value(r.tally.errors_by_key()).unwrap();
    assert_eq!(json["grpc_unavailable"], CYCLES);
}

// ---------------------------------------------------------------------------------------
// Reflection
// ---------------------------------------------------------------------------------------

#[test]
fn server_reflection_describes_the_echo_service() {
    use prost::Message as _;
    use tonic_reflection::pb::v1::ServerReflectionRequest;
    use tonic_reflection::pb::v1::server_reflection_client::ServerReflectionClient;
    use tonic_reflection::pb::v1::server_reflection_request::MessageRequest;
    use tonic_reflection::pb::v1::server_reflection_response::MessageResponse;

    let server = TestServer::start_default();
    let url = format!("http://{}", server.http);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let responses = rt.block_on(async {
        let channel = tonic::transport::Endpoint::from_shared(url)
            .unwrap()
            .connect()
            .await
            .expect("connect");
        let mut client = ServerReflectionClient::new(channel);
        let asks = [
            MessageRequest::ListServices(String::new()),
            MessageRequest::FileContainingSymbol("rpcbench.v1.Echo".into()),
        ]
        .map(|m| ServerReflectionRequest {
            host: String::new(),
            message_request: Some(m),
        });
        let mut answers = client
            .server_reflection_info(tokio_stream::iter(asks))
            .await
            .expect("reflection")
            .into_inner();
        let mut got = Vec::new();
        while let Some(a) = tokio::time::timeout(WAIT, answers.message())
            .await
            .expect("in time")
            .expect("a reply")
        {
            got.push(a.message_response.expect("a message"));
        }
        got
    });
    assert_eq!(responses.len(), 2);
    let MessageResponse::ListServicesResponse(list) = &responses[0] else {
        panic!("{:?}", responses[0]);
    };
    let names: Vec<&str> = list.service.iter().map(|s| s.name.as_str()).collect();
    assert!(names.contains(&"rpcbench.v1.Echo"), "{names:?}");
    let MessageResponse::FileDescriptorResponse(files) = &responses[1] else {
        panic!("{:?}", responses[1]);
    };
    let file = prost_types::FileDescriptorProto::decode(&files.file_descriptor_proto[0][..])
        .expect("a file descriptor");
    assert_eq!(file.package(), "rpcbench.v1");
    let methods: Vec<&str> = file.service[0].method.iter().map(|m| m.name()).collect();
    assert_eq!(methods, ["Call", "Stream"]);
}

// ---------------------------------------------------------------------------------------
// Bad input, in hand-made frames (the h2 crate, so nothing fixes our mistakes for us)
// ---------------------------------------------------------------------------------------

/// How a hand-made call ends.
enum Send {
    /// This body, then the end of the stream.
    Whole(Vec<u8>),
    /// This much of a body, then RST_STREAM(CANCEL).
    ResetAfter(Vec<u8>),
}

/// The gRPC frame of `msg`: compressed flag, 4-byte length, message.
fn grpc_frame(flag: u8, declared_len: u32, msg: &[u8]) -> Vec<u8> {
    let mut out = vec![flag];
    out.extend_from_slice(&declared_len.to_be_bytes());
    out.extend_from_slice(msg);
    out
}

/// Makes one `Call` on a fresh HTTP/2 connection with `how`; returns the `grpc-status`
/// the server ended it with (from the headers of a trailers-only reply or the
/// trailers), or `None` when it was reset.
fn raw_call(http: SocketAddr, how: Send) -> Option<String> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        tokio::time::timeout(WAIT, async {
            let tcp = tokio::net::TcpStream::connect(http).await.unwrap();
            let (client, conn) = h2::client::handshake(tcp).await.unwrap();
            tokio::spawn(async move {
                let _ = conn.await;
            });
            let mut client = client.ready().await.unwrap();
            let req = hyper::Request::post(format!("http://{http}/rpcbench.v1.Echo/Call"))
                .header("content-type", "application/grpc")
                .header("te", "trailers")
                .body(())
                .unwrap();
            let (resp, mut body) = client.send_request(req, false).unwrap();
            match how {
                Send::Whole(bytes) => body.send_data(bytes.into(), true).unwrap(),
                Send::ResetAfter(bytes) => {
                    body.send_data(bytes.into(), false).unwrap();
                    // Let the part reach the server before the reset.
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    body.send_reset(h2::Reason::CANCEL);
                    return None;
                }
            }
            let resp = resp.await.unwrap();
            if let Some(status) = resp.headers().get("grpc-status") {
                return Some(status.to_str().unwrap().to_string());
            }
            let mut recv = resp.into_body();
            while let Some(data) = recv.data().await {
                let _ = data.unwrap();
            }
            let trailers = recv.trailers().await.unwrap().expect("trailers");
            Some(trailers["grpc-status"].to_str().unwrap().to_string())
        })
        .await
        .expect("the server answered in time")
    })
}

/// Waits until `f` holds for the server's counters.
fn wait_for(server: &TestServer, what: &str, f: impl Fn(&StatsSnapshot) -> bool) {
    let deadline = Instant::now() + WAIT;
    while !f(&server.stats()) {
        assert!(Instant::now() < deadline, "{what}: {:?}", server.stats());
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A healthy client is served: 50 calls of each gRPC transport.
fn assert_still_serving(server: &TestServer) {
    for kind in GRPC {
        let cfg = RunConfig {
            calls: 50,
            warmup: 1,
            ..config(2)
        };
        assert_healthy(kind, &run(server.http, kind, &cfg), &cfg);
    }
}

#[test]
fn bad_grpc_frames_are_counted_and_healthy_clients_still_served() {
    use prost::Message as _;
    let server = TestServer::start_default();
    let msg = EchoRequest {
        seq: 1,
        reply_len: None,
        delay_us: 0,
        payload: bytes::Bytes::from_static(b"hello"),
    }
    .encode_to_vec();
    let len = msg.len() as u32;
    // A length prefix that lies: 100 bytes more than come before the end of the stream.
    let status = raw_call(server.http, Send::Whole(grpc_frame(0, len + 100, &msg)));
    assert_eq!(status.as_deref(), Some("13"), "INTERNAL");
    wait_for(&server, "lying prefix", |s| {
        s.rejected(Reject::GrpcMalformed) == 1
    });
    // A length prefix above the max frame: refused before anything is read for it.
    let status = raw_call(server.http, Send::Whole(grpc_frame(0, u32::MAX, &msg)));
    assert_eq!(status.as_deref(), Some("11"), "OUT_OF_RANGE");
    wait_for(&server, "huge prefix", |s| {
        s.rejected(Reject::GrpcMalformed) == 2
    });
    // The compressed flag, with no grpc-encoding negotiated.
    let status = raw_call(server.http, Send::Whole(grpc_frame(1, len, &msg)));
    assert_eq!(status.as_deref(), Some("13"), "INTERNAL");
    wait_for(&server, "compressed flag", |s| {
        s.rejected(Reject::GrpcMalformed) == 3
    });
    // A stream reset in the middle of its message.
    let half = grpc_frame(0, len, &msg[..msg.len() / 2]);
    assert_eq!(raw_call(server.http, Send::ResetAfter(half)), None);
    wait_for(&server, "reset mid-message", |s| {
        s.rejected(Reject::GrpcCancelled) == 1
    });
    // And a whole, good frame by hand is answered.
    let status = raw_call(server.http, Send::Whole(grpc_frame(0, len, &msg)));
    assert_eq!(status.as_deref(), Some("0"));
    assert_still_serving(&server);
    let stats = server.stats();
    common::assert_rejects(
        &stats,
        &[(Reject::GrpcMalformed, 3), (Reject::GrpcCancelled, 1)],
    );
}

/// The generated client (not our transports) against our server, for a reply decoded
/// with every field: the same messages a third party's stubs would see.
#[test]
fn the_generated_client_gets_every_field_back() {
    let server = TestServer::start_default();
    let url = format!("http://{}", server.http);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let (reply, timing): (EchoReply, Option<String>) = rt.block_on(async {
        let channel = tonic::transport::Endpoint::from_shared(url)
            .unwrap()
            .connect()
            .await
            .expect("connect");
        let mut client = EchoClient::new(channel);
        let resp = client
            .call(EchoRequest {
                seq: 300,
                reply_len: Some(5),
                delay_us: 1000,
                payload: bytes::Bytes::new(),
            })
            .await
            .expect("a reply");
        let timing = resp
            .metadata()
            .get("server-timing")
            .map(|v| v.to_str().unwrap().to_string());
        (resp.into_inner(), timing)
    });
    assert_eq!((reply.seq, reply.status), (300, 0));
    assert_eq!(
        &reply.payload[..],
        &[44, 45, 46, 47, 48],
        "pattern of seq 300"
    );
    assert!(reply.server_ns >= 1_000_000, "{}", reply.server_ns);
    let ms = common::parse_server_timing(&timing.expect("server-timing")).unwrap();
    assert!(ms >= 1.0, "{ms}");
}
