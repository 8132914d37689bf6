//! The encodings against stacks nobody on the team wrote (issue #49, step 3): Python's
//! jsonrpclib-pelix (JSON-RPC 2.0 over `/rpc`), msgpack and protobuf classes over
//! `/rpc/{Operation}`, and a grpcio client of `rpcbench.v1.WsTest`, each calling
//! rpcbench-echo with WSTest's messages (echo-void, echo-struct:100, echo-list:64,
//! echo-synthetic:64KiB) and checking every reply value for value on the Python side
//! (`tests/fixtures/interop/client.py`).
//!
//! Needs `python3 -m pip install jsonrpclib-pelix msgpack grpcio grpcio-tools` (`.ci/run`
//! does it); fails, saying so, without them.

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
    for stack in ["jsonrpclib", "msgpack", "protobuf", "grpcio"] {
        assert!(
            stdout.contains(&format!("{stack} {per_stack} ok")),
            "{stack}: {stdout}{stderr}"
        );
    }
    // Every call reached the server's codec once: JSON and MessagePack once per call,
    // protobuf twice (over /rpc and over gRPC).
    let stats = server.stats();
    for op in ["EchoVoid", "EchoStruct", "EchoList", "EchoSynthetic"] {
        for (encoding, calls) in [("json", CALLS), ("msgpack", CALLS), ("protobuf", 2 * CALLS)] {
            let counts = &stats.rpc[encoding][op];
            assert_eq!(
                (counts.decoded, counts.encoded),
                (calls, calls),
                "{encoding} {op}"
            );
        }
    }
}
