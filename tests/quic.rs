//! QUIC and HTTP/3: `rpcbench-echo --quic` and the five QUIC transports (`quic`,
//! `quic-connect`, `h3`, `h3-mux`, `h3-fresh`) against the in-process server, every call
//! verified and counted once, and
//! the bad input the issue names: a QUIC client at a TCP port and the reverse, an
//! unknown ALPN, frames the server must refuse, a stream reset mid-reply, and more
//! connections than `--max-connections`. Every case ends with a healthy run, so the
//! server kept serving.

mod common;

use rpcbench::measure::Phase;
use rpcbench::runner::{RunConfig, TransportRun, run_transport};
use rpcbench::server::stats::{Reject, StatsSnapshot};
use rpcbench::server::{ServerConfig, ServerHandle};
use rpcbench::transport::tls::{Security, TlsClient, TlsOptions};
use rpcbench::transport::{Endpoint, TransportKind};
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

/// The QUIC transports: the raw frames (ALPN `rpcbench`) and HTTP/3 (ALPN `h3`).
const QUIC: [TransportKind; 5] = [
    TransportKind::Quic,
    TransportKind::QuicConnect,
    TransportKind::H3,
    TransportKind::H3Mux,
    TransportKind::H3Fresh,
];

#[test]
fn the_list_is_every_transport_on_the_quic_port() {
    let on_quic: Vec<_> = TransportKind::ALL
        .into_iter()
        .filter(|k| k.port() == rpcbench::transport::Port::Quic)
        .collect();
    assert_eq!(on_quic, QUIC);
}

fn server(config: ServerConfig) -> ServerHandle {
    let config = ServerConfig {
        quic: Some(SocketAddr::from(([127, 0, 0, 1], 0))),
        ..config
    };
    ServerHandle::start(config, 1).expect("start the echo server")
}

/// The server's QUIC port, with TLS 1.3 verified against its generated CA.
fn endpoint(server: &ServerHandle) -> Endpoint {
    assert!(server.quic_addr.is_some(), "the QUIC listener");
    common::endpoint_of(server, TransportKind::Quic)
}

fn config(calls: u64, workers: usize) -> RunConfig {
    RunConfig {
        calls,
        warmup: 10,
        concurrency: workers,
        timeout: Duration::from_secs(5),
        ..RunConfig::default()
    }
}

fn run(endpoint: &Endpoint, kind: TransportKind, config: &RunConfig) -> TransportRun {
    run_transport(kind, endpoint, config, Arc::new(AtomicU64::new(0)))
}

/// Every call ok and counted once; connects as the transport promises; the handshake
/// timed on the calls that opened a connection, and only there.
fn assert_healthy(kind: TransportKind, run: &TransportRun, config: &RunConfig) {
    let t = &run.tally;
    assert_eq!(t.calls(), config.calls, "{kind}: every call counted");
    assert_eq!(t.ok, config.calls, "{kind}: {:?}", t.errors);
    assert_eq!((t.lost, t.mismatched, t.duplicated), (0, 0, 0), "{kind}");
    let expected = kind.expected_connects(config.concurrency, config.calls + config.warmup);
    assert_eq!(t.connects, expected, "{kind}: connects");
    let handshakes = t.phase(Phase::Handshake).len();
    if kind.persistent() {
        assert_eq!(handshakes, 0, "{kind}: a measured call paid a handshake");
    } else {
        assert_eq!(handshakes, t.ok, "{kind}: every call's handshake timed");
    }
    assert_eq!(
        t.phase(Phase::Connect).len(),
        0,
        "{kind}: QUIC has no TCP connect"
    );
    assert_eq!(t.phase(Phase::FirstByte).len(), t.ok, "{kind}");
    assert_eq!(
        t.phase(Phase::Server).len(),
        t.ok,
        "{kind}: server time read"
    );
}

#[test]
fn every_call_once_at_one_and_eight_workers_echo_pattern_and_64k() {
    let server = server(ServerConfig::loopback_any_port());
    let endpoint = endpoint(&server);
    let mut expected_requests = 0;
    let mut expected_handshakes = 0;
    for kind in QUIC {
        for workers in [1, 8] {
            let cfg = config(300, workers);
            let r = run(&endpoint, kind, &cfg);
            assert_healthy(kind, &r, &cfg);
            expected_requests += cfg.calls + cfg.warmup;
            expected_handshakes += r.tally.connects;
        }
        for (payload, reply) in [(64, Some(10_000)), (64 << 10, None)] {
            let cfg = RunConfig {
                payload,
                reply,
                ..config(100, 2)
            };
            let r = run(&endpoint, kind, &cfg);
            assert_healthy(kind, &r, &cfg);
            expected_requests += cfg.calls + cfg.warmup;
            expected_handshakes += r.tally.connects;
        }
    }
    let stats = server.stats();
    assert_eq!(
        stats.quic.requests + stats.http.requests,
        expected_requests,
        "the server counted every call (HTTP/3's as HTTP requests)"
    );
    assert_eq!(stats.quic_handshakes.full, expected_handshakes);
    assert_eq!(stats.quic.connections_total, expected_handshakes);
    assert!(
        stats.rejected.values().all(|&n| n == 0),
        "{:?}",
        stats.rejected
    );
}

/// A QUIC client at a port where no QUIC listens (the raw TCP port, over UDP: nothing
/// answers) fails every call as a connect timeout, counted, none lost; a TCP client at
/// the QUIC port (UDP only) is refused. Neither hangs.
#[test]
fn a_quic_client_at_a_tcp_port_and_the_reverse_are_clear_errors() {
    let server = server(ServerConfig::loopback_any_port());
    let cfg = RunConfig {
        warmup: 0,
        timeout: Duration::from_millis(300),
        ..config(3, 1)
    };
    let wrong = endpoint(&server).with_quic_port(server.tcp_addr.unwrap().port());
    let r = run(&wrong, TransportKind::Quic, &cfg);
    assert_eq!(r.tally.calls(), 3);
    assert_eq!((r.tally.ok, r.tally.lost), (0, 0), "{:?}", r.tally.errors);
    assert_eq!(
        r.tally.errors_by_key().get("connect_timeout").copied(),
        Some(3),
        "{:?}",
        r.tally.errors
    );
    let quic_port = server.quic_addr.unwrap();
    let tcp_at_quic = Endpoint::new(quic_port, server.http_addr.unwrap());
    let r = run(&tcp_at_quic, TransportKind::Tcp, &cfg);
    assert_eq!(r.tally.ok, 0);
    assert_eq!(
        r.tally.errors_by_key().get("connect_refused").copied(),
        Some(3),
        "{:?}",
        r.tally.errors
    );
    let healthy = config(50, 2);
    let r = run(&endpoint(&server), TransportKind::Quic, &healthy);
    assert_healthy(TransportKind::Quic, &r, &healthy);
}

/// A raw quinn client with ALPN `alpn`, trusting the server's CA.
fn raw_client(server: &ServerHandle, alpn: &[u8]) -> (quinn::Endpoint, quinn::ClientConfig) {
    let ca = server.ca_pem.as_deref().unwrap();
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(CertificateDer::from_pem_slice(ca.as_bytes()).unwrap())
        .unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut tls = rustls::ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    tls.alpn_protocols = vec![alpn.to_vec()];
    let crypto = quinn::crypto::rustls::QuicClientConfig::try_from(tls).unwrap();
    let config = quinn::ClientConfig::new(Arc::new(crypto));
    let _entered = server.runtime().enter();
    let endpoint = quinn::Endpoint::client(SocketAddr::from(([127, 0, 0, 1], 0))).unwrap();
    (endpoint, config)
}

/// An ALPN the server does not have fails the handshake (counted as one), and the
/// listener goes on serving.
#[test]
fn an_unknown_alpn_fails_the_handshake_and_is_counted() {
    let server = server(ServerConfig::loopback_any_port());
    let (client, config) = raw_client(&server, b"carrier-pigeon/1");
    let addr = server.quic_addr.unwrap();
    let outcome = server.block_on(async {
        let connecting = client.connect_with(config, addr, "localhost").unwrap();
        tokio::time::timeout(Duration::from_secs(5), connecting).await
    });
    let err = outcome
        .expect("an answer, not a hang")
        .expect_err("no common protocol");
    // no_application_protocol, alert 120: 0x100 + 120.
    assert!(
        err.to_string().contains("0x178") || err.to_string().contains("120"),
        "{err}"
    );
    let stats = server.stats();
    let failed: u64 = stats.quic_handshakes.failed.values().sum();
    assert_eq!(failed, 1, "{:?}", stats.quic_handshakes);
    assert_eq!(stats.quic_handshakes.full, 0);
    let healthy = config_for_check();
    let r = run(&endpoint(&server), TransportKind::Quic, &healthy);
    assert_healthy(TransportKind::Quic, &r, &healthy);
}

fn config_for_check() -> RunConfig {
    config(50, 2)
}

/// On one connection: a frame above `--max-frame`, a zero-length frame and a body that
/// is no request each get their stream reset and are counted; a call after them on the
/// same connection is answered.
#[test]
fn frames_the_server_refuses_reset_their_stream_and_the_connection_goes_on() {
    let server = server(ServerConfig {
        max_frame: 4096,
        ..ServerConfig::loopback_any_port()
    });
    let (client, config) = raw_client(&server, b"rpcbench");
    let addr = server.quic_addr.unwrap();
    let answered = server.block_on(async {
        let conn = client
            .connect_with(config, addr, "localhost")
            .unwrap()
            .await
            .expect("handshake");
        for bad in [
            (1_000_000u32).to_be_bytes().to_vec(),
            0u32.to_be_bytes().to_vec(),
            [&5u32.to_be_bytes()[..], &[0xff; 5]].concat(),
        ] {
            let (mut send, mut recv) = conn.open_bi().await.unwrap();
            send.write_all(&bad).await.unwrap();
            let _ = send.finish();
            let got = tokio::time::timeout(Duration::from_secs(5), recv.read_to_end(1 << 20))
                .await
                .expect("an answer, not a hang");
            assert!(got.is_err(), "a refused frame gets no reply: {got:?}");
        }
        let req = rpcbench::wire::Request {
            seq: 7,
            reply_len: None,
            delay_us: 0,
            payload: b"still here".to_vec(),
        };
        let mut frame = Vec::new();
        rpcbench::wire::encode_frame(&req, &mut frame);
        let (mut send, mut recv) = conn.open_bi().await.unwrap();
        send.write_all(&frame).await.unwrap();
        send.finish().unwrap();
        recv.read_to_end(1 << 20).await.expect("the reply")
    });
    let (resp, used): (rpcbench::wire::Response, _) =
        rpcbench::wire::decode_frame(&answered, 1 << 20)
            .expect("a response frame")
            .expect("a whole one");
    assert_eq!(
        used,
        answered.len(),
        "one frame, then the end of the stream"
    );
    assert_eq!((resp.seq, resp.payload.as_slice()), (7, &b"still here"[..]));
    let stats = server.stats();
    assert_eq!(stats.rejected(Reject::OversizedFrame), 1);
    assert_eq!(stats.rejected(Reject::ZeroLengthFrame), 1);
    assert_eq!(stats.rejected(Reject::MalformedFrame), 1);
    assert_eq!(stats.quic.requests, 1);
}

/// A client that stops reading a large reply and resets its stream costs the server
/// that stream only: counted, and the next call is answered.
#[test]
fn a_stream_stopped_mid_reply_is_counted_and_the_server_goes_on() {
    let server = server(ServerConfig::loopback_any_port());
    let (client, config) = raw_client(&server, b"rpcbench");
    let addr = server.quic_addr.unwrap();
    server.block_on(async {
        let conn = client
            .connect_with(config, addr, "localhost")
            .unwrap()
            .await
            .expect("handshake");
        let req = rpcbench::wire::Request {
            seq: 1,
            reply_len: Some(8 << 20),
            delay_us: 0,
            payload: Vec::new(),
        };
        let mut frame = Vec::new();
        rpcbench::wire::encode_frame(&req, &mut frame);
        let (mut send, mut recv) = conn.open_bi().await.unwrap();
        send.write_all(&frame).await.unwrap();
        send.finish().unwrap();
        let mut first = [0u8; 1024];
        recv.read_exact(&mut first).await.expect("the reply starts");
        recv.stop(9u32.into()).unwrap();
    });
    let stats = wait_until(&server, |s| s.rejected(Reject::QuicStreamReset) == 1);
    assert_eq!(stats.rejected(Reject::QuicStreamReset), 1);
    let healthy = config_for_check();
    let r = run(&endpoint(&server), TransportKind::Quic, &healthy);
    assert_healthy(TransportKind::Quic, &r, &healthy);
}

/// More QUIC connections than `--max-connections`: the ones above it are refused at
/// once (a clear error for the client, counted by the server), and when the first ones
/// close, new ones are served.
#[test]
fn connections_above_the_limit_are_refused_and_counted() {
    let server = server(ServerConfig {
        max_connections: 2,
        ..ServerConfig::loopback_any_port()
    });
    let (client, config) = raw_client(&server, b"rpcbench");
    let addr = server.quic_addr.unwrap();
    let third = server.block_on(async {
        let mut open = Vec::new();
        for _ in 0..2 {
            let conn = client
                .connect_with(config.clone(), addr, "localhost")
                .unwrap();
            open.push(conn.await.expect("within the limit"));
        }
        let third = client
            .connect_with(config.clone(), addr, "localhost")
            .unwrap();
        let third = tokio::time::timeout(Duration::from_secs(5), third)
            .await
            .expect("an answer, not a hang");
        for conn in open {
            conn.close(0u32.into(), b"");
        }
        third
    });
    assert!(third.is_err(), "the third connection is refused");
    assert_eq!(server.stats().rejected(Reject::OverConnectionLimit), 1);
    // The slots come back when the first two have closed.
    let stats = wait_until(&server, |s| s.quic.connections_open == 0);
    assert_eq!(stats.quic.connections_open, 0);
    let healthy = config_for_check();
    let r = run(&endpoint(&server), TransportKind::Quic, &healthy);
    assert_healthy(TransportKind::Quic, &r, &healthy);
}

/// The server's counters once `done` holds of them, or after 5 s.
fn wait_until(server: &ServerHandle, done: impl Fn(&StatsSnapshot) -> bool) -> StatsSnapshot {
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        let stats = server.stats();
        if done(&stats) || std::time::Instant::now() > deadline {
            return stats;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// `rpcbench` run by its binary, with its stdout, stderr and exit code.
fn rpcbench(args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_rpcbench"))
        .args(args)
        .env("NO_COLOR", "1")
        .output()
        .expect("run rpcbench")
}

/// Against a separate `rpcbench-echo --quic`: the preflight probes the QUIC port with a
/// QUIC handshake and a call, so a healthy one runs (its rows `tls13` under the default
/// `plain`), and a port that is not QUIC stops the run before measuring, in one line.
#[test]
fn a_target_s_quic_port_is_probed_and_called() {
    let echo = common::EchoProcess::spawn(&["--quic", "127.0.0.1:0"]);
    let ca = echo
        .ca_line
        .as_deref()
        .and_then(|l| l.split_whitespace().nth(1))
        .expect("a ca line")
        .to_string();
    let (tcp, http) = (echo.tcp.port().to_string(), echo.http.port().to_string());
    let quic = echo
        .quic
        .expect("the quic listening line")
        .port()
        .to_string();
    let args = |quic_port: &str| {
        let v = [
            "--target",
            "127.0.0.1",
            "--tcp-port",
            &tcp,
            "--http-port",
            &http,
            "--quic-port",
            quic_port,
            "--ca",
            &ca,
            "--transports",
            "quic,quic-connect",
            "--names",
            "ip",
            "-n",
            "20",
            "--timeout",
            "2s",
        ];
        v.iter().map(|s| s.to_string()).collect::<Vec<_>>()
    };
    let run = |a: Vec<String>| rpcbench(&a.iter().map(String::as_str).collect::<Vec<_>>());
    let out = run(args(&quic));
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    for row in ["quic          ip tls13", "quic-connect  ip tls13"] {
        assert!(stdout.contains(row), "{row}:\n{stdout}");
    }
    assert!(stdout.contains("No call was lost"), "{stdout}");
    // The TCP port's number, over UDP: no QUIC there.
    let out = run(args(&tcp));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_ne!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains(&format!("quic port {tcp}")),
        "the line names the QUIC port: {stderr}"
    );
    assert!(out.stdout.is_empty(), "stopped before measuring");
}

/// A flood of Initial packets from many source addresses (each from a socket of its
/// own, as spoofed sources look on loopback), none of which ever answers the server's
/// first flight: once more than `RETRY_ABOVE` handshakes are under way, the Initials of
/// unvalidated addresses are answered with a Retry (no state kept), counted; a healthy
/// client still gets through, answering its Retry as QUIC clients do.
#[test]
fn an_initial_flood_is_met_with_retries_and_a_healthy_client_gets_through() {
    const FLOOD: usize = 100;
    let server = server(ServerConfig::loopback_any_port());
    let above = rpcbench::server::quic::RETRY_ABOVE;
    assert!(
        FLOOD > above + 10,
        "the flood outnumbers the handshakes allowed"
    );
    // Real Initials, each with a connection ID of its own, caught at a socket that never
    // answers: a quinn client sends them, the socket keeps the first of each ID.
    let (client, config) = raw_client(&server, b"rpcbench");
    let catcher = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    catcher
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let at = catcher.local_addr().unwrap();
    let _connecting: Vec<_> = {
        let _entered = server.runtime().enter();
        (0..FLOOD)
            .map(|_| {
                client
                    .connect_with(config.clone(), at, "localhost")
                    .unwrap()
            })
            .collect()
    };
    let mut initials: Vec<Vec<u8>> = Vec::new();
    let mut ids = std::collections::HashSet::new();
    let mut buf = [0u8; 2048];
    while initials.len() < FLOOD {
        let (n, _) = catcher.recv_from(&mut buf).expect("the client's Initials");
        // A long header: flags, version (4 bytes), the destination ID's length, the ID.
        let id_len = usize::from(buf[5]);
        if n > 6 + id_len && ids.insert(buf[6..6 + id_len].to_vec()) {
            initials.push(buf[..n].to_vec());
        }
    }
    // Sent to the server from a socket each; the sockets stay open and never answer.
    let quic = server.quic_addr.unwrap();
    let spoofed: Vec<std::net::UdpSocket> = initials
        .iter()
        .map(|initial| {
            let s = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
            s.send_to(initial, quic).unwrap();
            s
        })
        .collect();
    let stats = wait_until(&server, |s| {
        s.rejected(Reject::QuicRetry) as usize >= FLOOD - above - 10
    });
    let retried = stats.rejected(Reject::QuicRetry) as usize;
    assert!(retried <= FLOOD - above, "{retried} retries");
    // The healthy client is answered with a Retry too, and gets through.
    let healthy = config_for_check();
    let r = run(&endpoint(&server), TransportKind::Quic, &healthy);
    assert_healthy(TransportKind::Quic, &r, &healthy);
    assert!(server.stats().rejected(Reject::QuicRetry) as usize > retried);
    drop(spoofed);
}

/// The default run's words on QUIC: what a kept connection saves against a connection
/// per call, and what QUIC's stack in user space costs in client CPU against kernel TCP,
/// each QUIC transport against the same call over TCP.
#[test]
fn the_findings_weigh_quic_against_tcp() {
    let out = rpcbench(&[
        "--transports",
        "tcp,h2,quic,quic-connect,h3",
        "--names",
        "ip",
        "-n",
        "300",
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = stdout.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(text.contains("quic-connect"), "{text}");
    assert!(
        text.contains("QUIC runs its stack in user space: quic tls13 "),
        "{text}"
    );
    assert!(text.contains(" against tcp "), "{text}");
    assert!(text.contains("; h3 tls13 "), "{text}");
    assert!(text.contains(" against h2 "), "{text}");
}

/// A client that vanishes mid-reply (its socket gone, so it neither acknowledges nor
/// closes): the server's reply stalls without acknowledgements, QUIC's idle timer ends
/// the connection, counted, its slot comes back, and the server goes on serving.
#[test]
fn a_client_that_stops_acking_is_timed_out_and_counted() {
    let server = server(ServerConfig {
        idle_timeout: Duration::from_secs(1),
        ..ServerConfig::loopback_any_port()
    });
    let (_, config) = raw_client(&server, b"rpcbench");
    let addr = server.quic_addr.unwrap();
    // The client on a runtime of its own, which is dropped (with its socket and its
    // connection's state) once the reply has started: no ACK and no close ever come.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let client = quinn::Endpoint::client(SocketAddr::from(([127, 0, 0, 1], 0))).unwrap();
        let conn = client
            .connect_with(config, addr, "localhost")
            .unwrap()
            .await
            .expect("handshake");
        let req = rpcbench::wire::Request {
            seq: 1,
            reply_len: Some(8 << 20),
            delay_us: 0,
            payload: Vec::new(),
        };
        let mut frame = Vec::new();
        rpcbench::wire::encode_frame(&req, &mut frame);
        let (mut send, mut recv) = conn.open_bi().await.unwrap();
        send.write_all(&frame).await.unwrap();
        send.finish().unwrap();
        let mut first = [0u8; 1024];
        recv.read_exact(&mut first).await.expect("the reply starts");
        std::mem::forget((client, conn, send, recv));
    });
    rt.shutdown_background();
    let stats = wait_until(&server, |s| s.quic.connections_open == 0);
    assert!(
        stats.rejected(Reject::IdleTimeout) >= 1,
        "{:?}",
        stats.rejected
    );
    let healthy = config_for_check();
    let r = run(&endpoint(&server), TransportKind::Quic, &healthy);
    assert_healthy(TransportKind::Quic, &r, &healthy);
}

/// The server's QUIC port with `security` (TLS 1.3 against its generated CA) at `port`.
fn endpoint_in(server: &ServerHandle, security: Security, port: u16) -> Endpoint {
    let ca = server.ca_pem.as_deref().expect("a generated CA");
    let options = TlsOptions::from_pem(ca, None, false).expect("the CA reads");
    let tls = TlsClient::new(security, "127.0.0.1", &options).expect("a TLS client");
    endpoint(server).with_tls(Some(tls)).with_quic_port(port)
}

/// `tls13-0rtt`: a connection per call sends its request in early data whenever it holds
/// a ticket, the server takes it and answers in the same round trip, and both sides
/// count it: the client the early data sent and accepted, the server the resumed
/// handshakes (every one found its session). A kept connection sends none in the
/// measured calls. Every call ok and counted once.
#[test]
fn early_data_is_sent_accepted_and_counted_on_both_sides() {
    let server = server(ServerConfig::loopback_any_port());
    let port = server.quic_addr.unwrap().port();
    let endpoint = endpoint_in(&server, Security::Tls13ZeroRtt, port);
    let mut sent = 0;
    for kind in [
        TransportKind::QuicConnect,
        TransportKind::H3Fresh,
        TransportKind::Quic,
    ] {
        let config = config(200, 2);
        let r = run(&endpoint, kind, &config);
        assert_healthy(kind, &r, &config);
        let t = &r.tally;
        if kind.persistent() {
            assert_eq!(t.zero_rtt_sent, 0, "{kind}: opened in the warm-up");
        } else {
            // The warm-up's connections leave tickets for the first measured calls, and
            // each connection leaves two: only a call made before any came would miss.
            assert!(t.zero_rtt_sent >= 190, "{kind}: {} sent", t.zero_rtt_sent);
            sent += t.zero_rtt_sent;
        }
        assert_eq!(t.zero_rtt_accepted, t.zero_rtt_sent, "{kind}: all accepted");
    }
    let stats = wait_until(&server, |s| s.quic.connections_open == 0);
    assert!(
        stats.quic_handshakes.resumed >= sent,
        "{:?}: {sent} sent early data",
        stats.quic_handshakes
    );
    assert_eq!(stats.rejected(Reject::QuicUnknownTicket), 0);
}

/// A UDP relay between one client and the server's QUIC port that keeps a copy of every
/// datagram the client sent, for a replay.
struct Relay {
    port: u16,
    sent: Arc<std::sync::Mutex<Vec<Vec<u8>>>>,
    stop: Arc<std::sync::atomic::AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Relay {
    fn start(server: SocketAddr) -> Relay {
        use std::net::UdpSocket;
        let front = Arc::new(UdpSocket::bind("127.0.0.1:0").unwrap());
        let back = Arc::new(UdpSocket::bind("127.0.0.1:0").unwrap());
        back.connect(server).unwrap();
        for s in [&front, &back] {
            s.set_read_timeout(Some(Duration::from_millis(20))).unwrap();
        }
        let port = front.local_addr().unwrap().port();
        let sent = Arc::new(std::sync::Mutex::new(Vec::new()));
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let client = Arc::new(std::sync::Mutex::new(None::<SocketAddr>));
        let up = {
            let (front, back, sent, stop, client) = (
                front.clone(),
                back.clone(),
                sent.clone(),
                stop.clone(),
                client.clone(),
            );
            std::thread::spawn(move || {
                let mut buf = [0u8; 2048];
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    if let Ok((n, from)) = front.recv_from(&mut buf) {
                        *client.lock().unwrap() = Some(from);
                        sent.lock().unwrap().push(buf[..n].to_vec());
                        let _ = back.send(&buf[..n]);
                    }
                }
            })
        };
        let down = {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut buf = [0u8; 2048];
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    if let Ok(n) = back.recv(&mut buf)
                        && let Some(to) = *client.lock().unwrap()
                    {
                        let _ = front.send_to(&buf[..n], to);
                    }
                }
            })
        };
        Relay {
            port,
            sent,
            stop,
            threads: vec![up, down],
        }
    }

    /// The client's datagrams that open a connection: those starting with an Initial
    /// packet (long header, type 0), which carry the ClientHello and, coalesced or
    /// after, the 0-RTT packets (long header, type 1).
    fn first_flights(&self) -> Vec<Vec<u8>> {
        let long_type = |d: &[u8]| (d[0] & 0x80 != 0).then_some((d[0] >> 4) & 0x3);
        (self.sent.lock().unwrap().iter())
            .filter(|d| matches!(long_type(d), Some(0 | 1)))
            .cloned()
            .collect()
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// 0-RTT data replayed: every client datagram that opened a connection, captured on the
/// way, is sent again from another socket once the calls were answered. Each copy finds
/// its session ticket used, so the server counts an unknown ticket, handshakes in full
/// with nobody and never reads the early data again: no request is answered twice. A
/// healthy client is served after.
#[test]
fn replayed_early_data_is_not_read_again() {
    let server = server(ServerConfig::loopback_any_port());
    let quic = server.quic_addr.unwrap();
    let relay = Relay::start(quic);
    let endpoint = endpoint_in(&server, Security::Tls13ZeroRtt, relay.port);
    let config = config(20, 1);
    let r = run(&endpoint, TransportKind::QuicConnect, &config);
    assert_healthy(TransportKind::QuicConnect, &r, &config);
    assert!(r.tally.zero_rtt_sent >= 15, "{}", r.tally.zero_rtt_sent);
    let before = wait_until(&server, |s| s.quic.connections_open == 0);
    // Past the connections' draining, so that a copy is a new connection attempt.
    std::thread::sleep(Duration::from_millis(300));
    let flights = relay.first_flights();
    assert!(flights.len() as u64 >= config.calls + config.warmup);
    let replayer = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    for d in &flights {
        replayer.send_to(d, quic).unwrap();
    }
    let after = wait_until(&server, |s| {
        s.rejected(Reject::QuicUnknownTicket) >= r.tally.zero_rtt_sent
    });
    assert!(
        after.rejected(Reject::QuicUnknownTicket) >= r.tally.zero_rtt_sent,
        "each replayed ticket found used: {:?}",
        after.rejected
    );
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(
        server.stats().quic.requests,
        before.quic.requests,
        "no early data read twice"
    );
    drop(relay);
    let healthy = config_for_check();
    let r = run(&self::endpoint(&server), TransportKind::Quic, &healthy);
    assert_healthy(TransportKind::Quic, &r, &healthy);
}

/// The default output of a run in `tls13` and `tls13-0rtt`: the line on the early data
/// sent and accepted under the table, QUIC's `handshake` phase, the finding on what early
/// data wins back against a full handshake, and the one weighing a new QUIC connection
/// against a new TCP connection with TLS 1.3 (two round trips a call against three).
#[test]
fn the_output_tells_the_early_data_and_what_it_wins() {
    let out = rpcbench(&[
        "-n",
        "200",
        "--transports",
        "quic-connect,tcp-connect",
        "--security",
        "tls13,tls13-0rtt",
        "--names",
        "ip",
        "--no-progress",
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    let flat = stdout.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        flat.contains("0-RTT: quic-connect (ip tls13-0rtt)")
            && flat.contains("of 200 calls sent their request in early data"),
        "{stdout}"
    );
    assert!(
        flat.contains("Sending the request in early data (0-RTT) wins back per fresh call"),
        "{stdout}"
    );
    assert!(
        flat.contains("A new QUIC connection per call against a new TCP connection and TLS 1.3")
            && flat.contains("quic-connect")
            && flat.contains("against tcp-connect")
            && flat.contains("2 round trips a call against 3"),
        "{stdout}"
    );
    let phases = stdout
        .lines()
        .find(|l| l.starts_with("transport") && l.contains("first byte"))
        .expect("the phase table");
    assert!(
        phases.contains("handshake") && phases.contains("tls"),
        "{phases}"
    );
}

/// `quic_retry`: the server answers every new client with a Retry before its handshake
/// (address validation always), counted on its side (`quic_retry`), and the client counts
/// the Retries it received, one per new connection, so that the round-trip model adds
/// the round trip each costs. Every call ok and counted once.
#[test]
fn a_server_that_always_retries_is_seen_by_the_client() {
    let server = server(ServerConfig {
        quic_retry: true,
        ..ServerConfig::loopback_any_port()
    });
    let endpoint = endpoint(&server);
    let config = config(50, 1);
    let fresh = run(&endpoint, TransportKind::QuicConnect, &config);
    assert_healthy(TransportKind::QuicConnect, &fresh, &config);
    assert_eq!(
        fresh.tally.quic_retries, config.calls,
        "one Retry a connection"
    );
    let kept = run(&endpoint, TransportKind::H3, &config);
    assert_healthy(TransportKind::H3, &kept, &config);
    assert_eq!(kept.tally.quic_retries, 0, "retried in the warm-up only");
    let stats = server.stats();
    // Every connection: the fresh run's calls and warm-up, the kept one's worker.
    assert_eq!(
        stats.rejected(Reject::QuicRetry),
        config.calls + config.warmup + 1
    );
    let record = rpcbench::report::RunRecord::new(&fresh);
    assert_eq!(record.quic_retries, Some(config.calls));
    assert_eq!(rpcbench::model::expected_for(&record), Some(3.0));
}

/// The event loop: `quic` and `quic-connect` at 16 connections on it, in `tls13` and
/// `tls13-0rtt`: every call ok and counted once, the connections each promises, early
/// data sent and taken on a connection per call, and every connection closed by the
/// client at the end of its run (none left to the server's idle timer).
#[test]
fn the_event_loop_runs_the_quic_frames_and_closes_every_connection() {
    use rpcbench::runner::Engine;
    let server = server(ServerConfig::loopback_any_port());
    let port = server.quic_addr.unwrap().port();
    for security in [Security::Tls13, Security::Tls13ZeroRtt] {
        let endpoint = endpoint_in(&server, security, port);
        for kind in [TransportKind::Quic, TransportKind::QuicConnect] {
            // A warm-up call for each connection: the event loop warms every one.
            let config = RunConfig {
                engine: Engine::Evloop,
                warmup: 16,
                ..config(400, 16)
            };
            let r = run(&endpoint, kind, &config);
            assert_eq!(r.engine, Engine::Evloop, "{kind}");
            assert_healthy(kind, &r, &config);
            let t = &r.tally;
            if security.early_data() && !kind.persistent() {
                // rustls keeps 8 tickets a server: 16 connections opening at once do not
                // all find one.
                assert!(t.zero_rtt_sent >= 200, "{kind}: {} sent", t.zero_rtt_sent);
            }
            assert_eq!(t.zero_rtt_accepted, t.zero_rtt_sent, "{kind}");
        }
    }
    let stats = wait_until(&server, |s| s.quic.connections_open == 0);
    assert_eq!(stats.quic.connections_open, 0, "every connection closed");
    assert_eq!(stats.rejected(Reject::IdleTimeout), 0, "none timed out");
}
