//! The server's Unix socket and UDP listeners (issue #11): UDP garbage, truncated and
//! oversized datagrams counted while the listener keeps serving, status 3 for a reply
//! above its request, delays that hold up no other datagram; the Unix socket's path rules
//! (a regular file, a directory and a live socket refused with exit 1 and left alone, a
//! stale socket replaced), its mode, its removal on every way out, and its frames.

mod common;

use common::{IO_TIMEOUT, TestServer, assert_rejects, config, echo_req, pattern_req};
use nix::sys::signal::Signal;
use rpcbench::server::stats::Reject;
use rpcbench::server::{ServerConfig, ServerHandle};
use rpcbench::wire::{self, Request, Response};
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A private directory for a test's socket files, removed when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new(test: &str) -> TempDir {
        let dir =
            std::env::temp_dir().join(format!("rpcbench-dgram-{test}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir(&dir).unwrap();
        TempDir(dir)
    }

    fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A UDP client socket connected to `server`, reads bounded.
fn udp_client(server: std::net::SocketAddr) -> std::net::UdpSocket {
    let socket = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    socket.connect(server).unwrap();
    socket.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
    socket
}

fn body(req: &Request) -> Vec<u8> {
    postcard::to_stdvec(req).unwrap()
}

/// Sends one request datagram and reads one reply datagram.
fn udp_call(socket: &std::net::UdpSocket, req: &Request) -> (Response, usize) {
    socket.send(&body(req)).unwrap();
    let mut buf = vec![0u8; 65_536];
    let n = socket.recv(&mut buf).expect("a reply datagram");
    (wire::decode_body(&buf[..n]).expect("a reply"), n)
}

fn udp_server(max_frame: u32) -> TestServer {
    TestServer::start(ServerConfig {
        max_frame,
        ..config()
    })
}

#[test]
fn udp_garbage_truncated_and_oversized_datagrams_are_counted_and_ignored() {
    let server = udp_server(1024);
    let addr = server.udp_addr().expect("the udp listener is on");
    let socket = udp_client(addr);
    let good = body(&echo_req(1, b"hello"));
    let mut trailing = good.clone();
    trailing.push(0);
    for bad in [
        vec![0xff; 12],
        good[..good.len() - 2].to_vec(),
        trailing,
        vec![],
    ] {
        socket.send(&bad).unwrap();
    }
    socket.send(&vec![0u8; 2000]).unwrap();
    // The listener still serves, the same socket and another one.
    for (seq, socket) in [(2, &socket), (3, &udp_client(addr))] {
        let (resp, _) = udp_call(socket, &echo_req(seq, b"still here"));
        assert_eq!((resp.seq, resp.status), (seq, 0));
        assert_eq!(resp.payload, b"still here");
    }
    let snap = server.wait_stats(IO_TIMEOUT, "the two replies counted", |s| {
        s.udp.requests == 2 && s.udp.bytes_out > 0
    });
    assert_rejects(
        &snap,
        &[(Reject::UdpMalformed, 4), (Reject::UdpOversized, 1)],
    );
    assert_eq!(snap.udp.connections_total, 0, "UDP has no connections");
}

#[test]
fn a_udp_reply_is_never_above_its_request() {
    let server = udp_server(wire::DEFAULT_MAX_FRAME);
    let socket = udp_client(server.udp_addr().unwrap());
    // A pattern reply as large as the request datagram is served.
    let mut req = pattern_req(5, 0);
    req.payload = vec![7; 200];
    let size = body(&req).len() as u32;
    req.reply_len = Some(size);
    let size = body(&req).len() as u32;
    req.reply_len = Some(size);
    let (resp, _) = udp_call(&socket, &req);
    assert_eq!(resp.status, 0, "a reply of the request's size is fine");
    assert!(wire::is_pattern(5, &resp.payload) && resp.payload.len() == size as usize);
    // One byte more is status 3 with an empty payload.
    req.seq = 6;
    req.reply_len = Some(size + 1);
    let sent = body(&req).len();
    let (resp, got) = udp_call(&socket, &req);
    assert_eq!((resp.seq, resp.status), (6, 3));
    assert!(resp.payload.is_empty());
    assert!(got < sent, "the refusal is smaller than the request");
    // A tiny request asking for a large reply: the amplification attempt.
    let (resp, got) = udp_call(&socket, &pattern_req(7, 60_000));
    assert_eq!(resp.status, 3);
    assert!(got <= wire::RESPONSE_OVERHEAD as usize);
    let snap = server.wait_stats(IO_TIMEOUT, "three requests", |s| s.udp.requests == 3);
    assert_rejects(&snap, &[(Reject::UdpReplyAboveRequest, 2)]);
}

#[test]
fn a_delayed_udp_reply_holds_up_no_other_datagram() {
    let server = udp_server(wire::DEFAULT_MAX_FRAME);
    let addr = server.udp_addr().unwrap();
    let slow = udp_client(addr);
    let fast = udp_client(addr);
    let started = Instant::now();
    let mut delayed = echo_req(1, b"slow");
    delayed.delay_us = 300_000;
    slow.send(&body(&delayed)).unwrap();
    for seq in 2..12 {
        let (resp, _) = udp_call(&fast, &echo_req(seq, b"fast"));
        assert_eq!(resp.seq, seq);
    }
    assert!(
        started.elapsed() < Duration::from_millis(250),
        "fast calls waited for the delayed one: {:?}",
        started.elapsed()
    );
    let mut buf = [0u8; 64];
    let n = slow.recv(&mut buf).unwrap();
    let resp: Response = wire::decode_body(&buf[..n]).unwrap();
    assert_eq!((resp.seq, resp.payload.as_slice()), (1, &b"slow"[..]));
    assert!(started.elapsed() >= Duration::from_millis(300));
}

/// A request frame over a Unix socket gets its reply, counted in the unix block.
fn unix_round_trip(path: &Path, seq: u64) {
    let mut stream = UnixStream::connect(path).expect("connect to the unix socket");
    stream.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
    stream
        .write_all(&common::frame(&echo_req(seq, b"over unix")))
        .unwrap();
    let mut buf = Vec::new();
    let mut chunk = [0u8; 256];
    let resp = loop {
        let n = stream.read(&mut chunk).unwrap();
        assert!(n > 0, "closed before the reply");
        buf.extend_from_slice(&chunk[..n]);
        if let Some((resp, _)) =
            wire::decode_frame::<Response>(&buf, wire::DEFAULT_MAX_FRAME).unwrap()
        {
            break resp;
        }
    };
    assert_eq!((resp.seq, resp.status), (seq, 0));
    assert_eq!(resp.payload, b"over unix");
}

fn unix_server(path: &Path, mode: Option<u32>) -> ServerHandle {
    let mut config = ServerConfig {
        unix: Some(path.into()),
        ..config()
    };
    if let Some(mode) = mode {
        config.unix_mode = mode;
    }
    ServerHandle::start(config, 1).expect("start with a unix socket")
}

fn mode_of(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

#[test]
fn the_unix_socket_serves_frames_with_mode_0600_and_is_removed_when_dropped() {
    let dir = TempDir::new("serve");
    let path = dir.path("echo.sock");
    let server = unix_server(&path, None);
    assert!(
        std::fs::symlink_metadata(&path)
            .unwrap()
            .file_type()
            .is_socket()
    );
    assert_eq!(mode_of(&path), 0o600);
    for seq in 1..=3 {
        unix_round_trip(&path, seq);
    }
    let snap = server.stats();
    assert_eq!(snap.unix.requests, 3);
    assert_eq!(snap.unix.connections_total, 3);
    assert_eq!(snap.tcp.requests, 0, "unix has its own counters");
    // Nothing but the socket was left in the directory (the private bind directory went).
    assert_eq!(std::fs::read_dir(&dir.0).unwrap().count(), 1);
    drop(server);
    assert!(!path.exists(), "the socket file outlived the server");

    let other = dir.path("group.sock");
    let server = unix_server(&other, Some(0o660));
    assert_eq!(mode_of(&other), 0o660);
    let (_, drained) = server.shutdown(Duration::from_secs(1));
    assert!(drained);
    assert!(!other.exists(), "shutdown leaves the socket file");
}

#[test]
fn a_stale_socket_is_replaced_and_a_live_one_refused() {
    let dir = TempDir::new("stale");
    let path = dir.path("echo.sock");
    drop(UnixListener::bind(&path).unwrap());
    assert!(
        path.exists(),
        "a stale socket file stays behind its listener"
    );
    let server = unix_server(&path, None);
    unix_round_trip(&path, 1);
    // Now it is live: a second server may not take it over.
    let err = ServerHandle::start(
        ServerConfig {
            unix: Some(path.clone()),
            ..config()
        },
        1,
    )
    .expect_err("a live socket must be refused");
    let msg = rpcbench::cli::one_line(&err.into());
    assert!(
        msg.contains("listening on") && msg.contains("refusing"),
        "{msg}"
    );
    unix_round_trip(&path, 2);
    drop(server);
}

/// Runs `rpcbench-echo` with `args` and returns its exit code and stderr, bounded.
fn echo_exit(args: &[&str]) -> (Option<i32>, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_rpcbench-echo"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + IO_TIMEOUT;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("rpcbench-echo {args:?} did not exit");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    (status.code(), stderr)
}

#[test]
fn the_binary_refuses_a_path_that_is_not_a_stale_socket() {
    let dir = TempDir::new("refuse");
    let file = dir.path("precious.txt");
    std::fs::write(&file, "do not delete").unwrap();
    let live = dir.path("live.sock");
    let listener = UnixListener::bind(&live).unwrap();
    for (path, says) in [
        (&file, "is a regular file, not a socket"),
        (&dir.0, "is a directory, not a socket"),
        (&live, "a server is listening on"),
    ] {
        let (code, stderr) = echo_exit(&[
            "--tcp",
            "127.0.0.1:0",
            "--http",
            "off",
            "--unix",
            path.to_str().unwrap(),
        ]);
        assert_eq!(code, Some(1), "{path:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "one line: {stderr}");
        assert!(
            stderr.contains(says) && stderr.contains("refusing"),
            "{stderr}"
        );
    }
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "do not delete");
    assert!(
        std::fs::symlink_metadata(&live)
            .unwrap()
            .file_type()
            .is_socket()
    );
    drop(listener);
    let (code, stderr) = echo_exit(&["--tcp", "off", "--http", "off", "--unix-mode", "800"]);
    assert_eq!(code, Some(2), "{stderr}");
}

/// The binary: `--unix` and `--udp` listen, and SIGTERM and SIGINT both remove the
/// socket file on the way out.
#[test]
fn the_binary_removes_its_socket_on_sigterm_and_sigint() {
    let dir = TempDir::new("signals");
    for (signal, name) in [(Signal::SIGTERM, "term.sock"), (Signal::SIGINT, "int.sock")] {
        let path = dir.path(name);
        let mut child = Command::new(env!("CARGO_BIN_EXE_rpcbench-echo"))
            .args(["--tcp", "off", "--http", "off", "--udp", "127.0.0.1:0"])
            .args(["--unix", path.to_str().unwrap(), "--unix-mode", "640"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let udp = lines.next().unwrap().unwrap();
        let unix = lines.next().unwrap().unwrap();
        assert!(udp.starts_with("listening udp 127.0.0.1:"), "{udp}");
        assert_eq!(unix, format!("listening unix {}", path.display()));
        assert_eq!(mode_of(&path), 0o640);
        unix_round_trip(&path, 1);
        let udp_addr = udp.rsplit(' ').next().unwrap().parse().unwrap();
        let (resp, _) = udp_call(&udp_client(udp_addr), &echo_req(9, b"udp"));
        assert_eq!((resp.seq, resp.status), (9, 0));
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(child.id() as i32), signal).unwrap();
        let deadline = Instant::now() + IO_TIMEOUT;
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            assert!(Instant::now() < deadline, "no exit after {signal:?}");
            std::thread::sleep(Duration::from_millis(10));
        };
        assert_eq!(status.code(), Some(0), "{signal:?}");
        let totals = lines
            .map_while(Result::ok)
            .find_map(|l| l.strip_prefix("totals ").map(str::to_string))
            .expect("a totals line");
        let totals: rpcbench::server::stats::StatsSnapshot = serde_json::from_str(&totals).unwrap();
        assert_eq!((totals.unix.requests, totals.udp.requests), (1, 1));
        assert!(!path.exists(), "{signal:?} left the socket file");
    }
}
