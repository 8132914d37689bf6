//! HTTP/3 against a QUIC stack nobody on the team wrote, both ways: aioquic's client
//! calling `rpcbench-echo --quic` (`tests/fixtures/h3/client.py`: `POST /echo` on one
//! connection and on fresh ones, every reply's status, seq and bytes checked, then
//! `/healthz` and `/stats`), and rpcbench's `h3`, `h3-mux` and `h3-fresh` calling an
//! aioquic HTTP/3 echo server (`tests/fixtures/h3/server.py`), preflight included, every
//! call counted on both sides.
//!
//! Needs `python3 -m pip install aioquic` (`.ci/run` does it); fails, saying so, without.

mod common;

use rpcbench::server::{ServerConfig, ServerHandle};
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

/// Calls on the kept connection, and fresh connections after it.
const CALLS: u64 = 200;
const FRESH: u64 = 5;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/h3")
        .join(name)
}

/// A file under the temp directory, removed on drop.
struct TempFile(PathBuf);

impl TempFile {
    fn new(name: &str) -> TempFile {
        TempFile(std::env::temp_dir().join(format!(
            "rpcbench-quic-interop-{}-{name}",
            std::process::id()
        )))
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

#[test]
fn aioquic_calls_rpcbench_echo_over_http3() {
    let server = ServerHandle::start(
        ServerConfig {
            quic: Some(SocketAddr::from(([127, 0, 0, 1], 0))),
            ..ServerConfig::loopback_any_port()
        },
        2,
    )
    .expect("start the echo server");
    let ca = TempFile::new("echo-ca.pem");
    std::fs::write(&ca.0, server.ca_pem.as_deref().expect("a generated CA")).unwrap();
    let out = Command::new("python3")
        .arg(fixture("client.py"))
        .arg(server.quic_addr.unwrap().to_string())
        .arg(&ca.0)
        .arg(CALLS.to_string())
        .arg(FRESH.to_string())
        .output()
        .expect("python3 is needed for the interop tests");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}{stderr}");
    assert!(
        stdout.contains(&format!("aioquic {} ok", CALLS + FRESH)),
        "{stdout}{stderr}"
    );
    // Every request reached the HTTP routes once (the calls, /healthz, /stats), over
    // 1 + FRESH connections, and nothing was refused.
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    let stats = loop {
        let stats = server.stats();
        if stats.quic.connections_open == 0 || std::time::Instant::now() > deadline {
            break stats;
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    assert_eq!(stats.http.requests, CALLS + FRESH + 2);
    assert_eq!(stats.quic.connections_total, 1 + FRESH);
    assert_eq!(stats.quic_handshakes.full, 1 + FRESH);
    assert!(
        stats.rejected.values().all(|&n| n == 0),
        "{:?}",
        stats.rejected
    );
}

/// The aioquic server, killed (by PID) on drop.
struct Aioquic {
    child: std::process::Child,
    lines: std::io::Lines<BufReader<std::process::ChildStdout>>,
}

impl Drop for Aioquic {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn rpcbench_s_h3_transports_call_an_aioquic_server() {
    let ca = TempFile::new("aioquic-ca.pem");
    let mut child = Command::new("python3")
        .arg(fixture("server.py"))
        .arg(&ca.0)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("python3 is needed for the interop tests");
    let stdout = child.stdout.take().unwrap();
    let mut server = Aioquic {
        child,
        lines: BufReader::new(stdout).lines(),
    };
    let port = server
        .lines
        .next()
        .and_then(Result::ok)
        .expect("the aioquic server's port (is aioquic installed?)");
    let calls = 100u64;
    let out = Command::new(env!("CARGO_BIN_EXE_rpcbench"))
        .args(["--target", "127.0.0.1", "--quic-port", port.trim(), "--ca"])
        .arg(&ca.0)
        .args(["--transports", "h3,h3-mux,h3-fresh", "--names", "ip"])
        .args([
            "-n",
            &calls.to_string(),
            "--warmup",
            "5",
            "--format",
            "json",
        ])
        .output()
        .expect("run rpcbench");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let report: serde_json::Value = serde_json::from_str(&stdout).expect("a JSON report");
    let runs = report["runs"].as_array().expect("runs");
    // h3, h3-mux, h3 again at the multiplexing comparison's workers beside it, h3-fresh.
    let names: Vec<&str> = runs
        .iter()
        .map(|r| r["transport"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["h3", "h3-mux", "h3", "h3-fresh"], "{stderr}");
    let mut carried = 0;
    for run in runs {
        assert_eq!(run["security"], "tls13", "{run}");
        assert_eq!(run["calls"], calls, "{run}");
        assert_eq!(run["ok"], calls, "{run}");
        assert_eq!(run["errors"], serde_json::json!({}), "{run}");
        carried += calls;
    }
    // The server answered every call once, the warm-up calls, and the preflight's probe
    // (an HTTP/3 `POST /echo?reply_len=…`, since only h3 transports run).
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(server.child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    );
    let said = server.lines.next().and_then(Result::ok).unwrap_or_default();
    let answered: u64 = said
        .strip_prefix("requests ")
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("the server's count: {said:?}"));
    let warmups = answered - carried - 1;
    assert!(
        answered > carried && warmups <= 5 * 16 * runs.len() as u64,
        "{answered} requests answered for {carried} calls"
    );
}
