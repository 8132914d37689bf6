//! The encodings against stacks nobody on the team wrote (issue #49, step 3): Python's
//! jsonrpclib-pelix (JSON-RPC 2.0 over `/rpc`), msgpack and protobuf classes over
//! `/rpc/{Operation}`, and a grpcio client of `rpcbench.v1.WsTest`, each calling
//! rpcbench-echo with WSTest's messages (echo-void, echo-struct:100, echo-list:64,
//! echo-synthetic:64KiB) and checking every reply value for value on the Python side
//! (`tests/fixtures/interop/client.py`); and the other way, rpcbench's transports calling
//! Python servers of the same (`tests/fixtures/interop/server.py`: `http.server` with
//! msgpack and protobuf, jsonrpclib-pelix's SimpleJSONRPCServer, a grpcio WsTest server),
//! every reply judged by rpcbench's own comparison.
//!
//! XML-RPC against the standard library's `xmlrpc.client` and `SimpleXMLRPCServer`; SOAP
//! against zeep (from the server's own WSDL) and a spyne server declaring WSTest's shape,
//! which validates every request against its schema.
//!
//! Needs `python3 -m pip install jsonrpclib-pelix msgpack grpcio grpcio-tools zeep spyne`
//! (`.ci/run` does it); fails, saying so, without them.

mod common;

use common::TestServer;
use std::path::Path;
use std::process::Command;

/// Calls per message and stack.
const CALLS: u64 = 5;

#[test]
fn python_stacks_call_the_wstest_routes() {
    let server = TestServer::start_default();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/interop/client.py");
    let out = Command::new("python3")
        .arg(&script)
        .arg(server.http.to_string())
        .arg(CALLS.to_string())
        .output()
        .expect("python3 is needed for the interop tests");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}{stderr}");
    let per_stack = CALLS * 4;
    for stack in [
        "xmlrpc.client",
        "zeep",
        "jsonrpclib",
        "msgpack",
        "protobuf",
        "grpcio",
    ] {
        assert!(
            stdout.contains(&format!("{stack} {per_stack} ok")),
            "{stack}: {stdout}{stderr}"
        );
    }
    // Every call reached the server's codec once: JSON and MessagePack once per call,
    // protobuf twice (over /rpc and over gRPC).
    let stats = server.stats();
    for op in ["EchoVoid", "EchoStruct", "EchoList", "EchoSynthetic"] {
        for (encoding, calls) in [
            ("xmlrpc", CALLS),
            ("soap", CALLS),
            ("json", CALLS),
            ("msgpack", CALLS),
            ("protobuf", 2 * CALLS),
        ] {
            let counts = &stats.rpc[encoding][op];
            assert_eq!(
                (counts.decoded, counts.encoded),
                (calls, calls),
                "{encoding} {op}"
            );
        }
    }
}

/// The Python servers of `tests/fixtures/interop/server.py`, killed by their PID when
/// dropped: their HTTP, JSON-RPC, gRPC, XML-RPC, spyne and refusing spyne ports.
struct PyServers {
    child: std::process::Child,
    ports: [u16; 6],
}

impl PyServers {
    fn start() -> PyServers {
        use std::io::BufRead;
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/interop/server.py");
        let mut child = Command::new("python3")
            .arg(script)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("python3 is needed for the interop tests");
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = std::io::BufReader::new(stdout).read_line(&mut line);
            let _ = tx.send(line);
        });
        let line = rx
            .recv_timeout(std::time::Duration::from_secs(30))
            .unwrap_or_default();
        let ports: Vec<u16> = line
            .split_whitespace()
            .filter_map(|p| p.parse().ok())
            .collect();
        let Ok(ports) = <[u16; 6]>::try_from(ports) else {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "the Python servers did not print their ports: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        };
        PyServers { child, ports }
    }
}

impl Drop for PyServers {
    fn drop(&mut self) {
        // Child::kill signals this child's PID.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// rpcbench's transports against the Python servers: msgpack and protobuf over
/// http-keepalive to an `http.server`, JSON-RPC to jsonrpclib-pelix's
/// SimpleJSONRPCServer, protobuf over grpc and grpc-mux to a grpcio WsTest server; every
/// message, every reply decoded and compared field by field by rpcbench, all ok.
#[test]
fn rpcbench_calls_python_wstest_servers() {
    use rpcbench::encoding::{EncodingKind, Message};
    use rpcbench::runner::{RpcConfig, RunConfig, run_transport};
    use rpcbench::transport::{Endpoint, TransportKind};
    let servers = PyServers::start();
    let [http, jsonrpc, grpc, xmlrpc, spyne, _] = servers.ports;
    let messages = [
        Message::Void,
        Message::Struct(100),
        Message::List(64),
        Message::Synthetic(64 << 10),
    ];
    let cells = [
        (TransportKind::HttpKeepalive, EncodingKind::Msgpack, http),
        (TransportKind::HttpKeepalive, EncodingKind::Protobuf, http),
        (TransportKind::HttpKeepalive, EncodingKind::Json, jsonrpc),
        (TransportKind::Grpc, EncodingKind::Protobuf, grpc),
        (TransportKind::GrpcMux, EncodingKind::Protobuf, grpc),
        (TransportKind::HttpKeepalive, EncodingKind::Xmlrpc, xmlrpc),
        (TransportKind::CurlReuse, EncodingKind::Xmlrpc, xmlrpc),
        (TransportKind::HttpKeepalive, EncodingKind::Soap, spyne),
        (TransportKind::HttpFresh, EncodingKind::Soap, spyne),
    ];
    for (kind, encoding, port) in cells {
        for message in messages {
            let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
            let config = RunConfig {
                calls: CALLS * 4,
                warmup: 1,
                rpc: Some(RpcConfig { encoding, message }),
                ..RunConfig::default()
            };
            let r = run_transport(
                kind,
                &Endpoint::new(addr, addr),
                &config,
                std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0)),
            );
            let t = &r.tally;
            assert_eq!(
                (t.ok, t.lost, t.mismatched),
                (CALLS * 4, 0, 0),
                "{kind} {encoding} {message}: {:?}",
                t.errors
            );
        }
    }
}

/// A spyne service that raises `Fault(faultcode="Client.Test")` on every call: every call
/// of rpcbench's is counted `soap_fault_client` (spyne writes `soap11env:Client.Test`,
/// under HTTP 500), none ok, none lost.
#[test]
fn a_refusing_spyne_service_is_counted_as_client_faults() {
    use rpcbench::encoding::{EncodingKind, Message};
    use rpcbench::runner::{RpcConfig, RunConfig, run_transport};
    use rpcbench::transport::{Endpoint, TransportKind};
    let servers = PyServers::start();
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], servers.ports[5]));
    let calls = CALLS * 4;
    let config = RunConfig {
        calls,
        warmup: 1,
        rpc: Some(RpcConfig {
            encoding: EncodingKind::Soap,
            message: Message::Struct(10),
        }),
        ..RunConfig::default()
    };
    let r = run_transport(
        TransportKind::HttpKeepalive,
        &Endpoint::new(addr, addr),
        &config,
        std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0)),
    );
    let t = &r.tally;
    assert_eq!((t.ok, t.lost, t.mismatched), (0, 0, 0), "{:?}", t.errors);
    assert_eq!(
        t.errors_by_key().get("soap_fault_client"),
        Some(&calls),
        "{:?}",
        t.errors
    );
}
