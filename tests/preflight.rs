//! The preflight (issue #29): before any measured call against a `--target`, each port the
//! run needs is probed once, and what is wrong is said in one line per case, with the
//! command that starts the server, and exit status 1. Each case meets a real listener made
//! here: a closed port, a listener that accepts and says nothing, an HTTP server that is
//! not ours, a TCP server that answers garbage, rpcbench-echo of another version (a
//! `/stats` responder in front of a real server, reporting another version), and, as root,
//! a namespace whose firewall drops one port. Also: plain log lines without escape
//! sequences off a terminal, a failed run's table, and `--no-preflight`.

mod common;

use common::TestServer;
use serde_json::Value;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

/// The preflight's timeout, as its lines say it.
const PREFLIGHT_MS: u128 = rpcbench::preflight::PREFLIGHT_TIMEOUT.as_millis();

/// What one client run left: exit status, output, the `--out` report if one was written,
/// and how long it took.
struct Outcome {
    code: Option<i32>,
    stdout: String,
    stderr: String,
    report: Option<Value>,
    took: Duration,
}

impl Outcome {
    /// The stderr lines that start with `rpcbench: ` and are not warnings.
    fn problems(&self) -> Vec<&str> {
        self.stderr
            .lines()
            .filter(|l| l.starts_with("rpcbench: ") && !l.starts_with("rpcbench: warning: "))
            .collect()
    }

    /// Panics unless the run stopped before any measured call: exit 1, no table, no
    /// report, and one line per case on stderr.
    fn stopped_before_measuring(&self) {
        assert_eq!(self.code, Some(1), "stderr: {}", self.stderr);
        assert!(
            self.stdout.is_empty(),
            "a table was printed: {}",
            self.stdout
        );
        assert!(self.report.is_none(), "a report was written");
        assert!(
            !self.problems().is_empty(),
            "no line said why: {}",
            self.stderr
        );
    }
    /// The one line that says why the run stopped before measuring; panics unless it
    /// stopped so, with one line.
    fn one_problem(&self) -> &str {
        self.stopped_before_measuring();
        let problems = self.problems();
        assert_eq!(problems.len(), 1, "{}", self.stderr);
        problems[0]
    }
}

static RUN: AtomicU64 = AtomicU64::new(0);

/// Runs `rpcbench --target 127.0.0.1 --no-progress` with `args` and `--out` to a scratch
/// file, bounded in time by its own timeouts (the test fails if it hangs past 60 s).
fn client(args: &[&str], env: &[(&str, &str)]) -> Outcome {
    let dir = std::env::temp_dir().join(format!(
        "rpcbench-preflight-{}-{}",
        std::process::id(),
        RUN.fetch_add(1, Relaxed)
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let out = dir.join("report.json");
    let started = Instant::now();
    let mut child = Command::new(env!("CARGO_BIN_EXE_rpcbench"))
        .args(["--target", "127.0.0.1", "--no-progress", "--warmup", "0"])
        .args(args)
        .arg("--out")
        .arg(&out)
        .env_remove("RUST_LOG")
        .env_remove("NO_COLOR")
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("rpcbench starts");
    let (mut stdout, mut stderr) = (child.stdout.take().unwrap(), child.stderr.take().unwrap());
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stderr.read_to_string(&mut text);
        text
    });
    let mut text = String::new();
    let _ = stdout.read_to_string(&mut text);
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("rpcbench did not finish within 60 s");
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let report = std::fs::read(&out)
        .ok()
        .map(|b| serde_json::from_slice(&b).expect("the report is JSON"));
    std::fs::remove_dir_all(&dir).ok();
    Outcome {
        code: status.code(),
        stdout: text,
        stderr: reader.join().unwrap(),
        report,
        took: started.elapsed(),
    }
}

/// [`client`] calling the TCP and HTTP ports `tcp` and `http`, with `extra` arguments.
fn client_at(tcp: &str, http: &str, extra: &[&str], env: &[(&str, &str)]) -> Outcome {
    client(
        &[&["--tcp-port", tcp, "--http-port", http][..], extra].concat(),
        env,
    )
}

/// A loopback TCP port nothing listens on.
fn closed_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

/// How an HTTP [`Peer`] answers a request for a path: its status and body.
type Answer = Arc<dyn Fn(&str) -> (u16, String) + Send + Sync>;

/// How a [`Peer`] treats each connection.
#[derive(Clone)]
enum Behaviour {
    /// Accepts and says nothing, reading what comes, until the peer closes.
    Silent,
    /// Sends these bytes as soon as it accepts, then reads until the peer closes.
    Garbage(&'static [u8]),
    /// Answers HTTP/1.1 requests (kept alive): each path gets (status, body).
    Http(Answer),
}

/// A TCP server made for a test on 127.0.0.1:0, behaving as told, counting the
/// connections and requests it takes; stopped (its thread joined) when dropped.
struct Peer {
    addr: SocketAddr,
    connections: Arc<AtomicU64>,
    requests: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// Longest a peer's connection is served: the preflight waits at most its timeout.
const PEER_PATIENCE: Duration = Duration::from_secs(10);

impl Peer {
    fn start(behaviour: Behaviour) -> Peer {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let (connections, requests, stop) = (
            Arc::new(AtomicU64::new(0)),
            Arc::new(AtomicU64::new(0)),
            Arc::new(AtomicBool::new(false)),
        );
        let (c, r, s) = (connections.clone(), requests.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            for stream in listener.incoming() {
                if s.load(Relaxed) {
                    break;
                }
                let Ok(stream) = stream else { continue };
                c.fetch_add(1, Relaxed);
                let (behaviour, r) = (behaviour.clone(), r.clone());
                std::thread::spawn(move || serve(stream, &behaviour, &r));
            }
        });
        Peer {
            addr,
            connections,
            requests,
            stop,
            thread: Some(thread),
        }
    }

    fn port(&self) -> String {
        self.addr.port().to_string()
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        self.stop.store(true, Relaxed);
        // Wake the accept loop so it sees the flag.
        let _ = TcpStream::connect(self.addr);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Serves one connection of a [`Peer`], for at most [`PEER_PATIENCE`].
fn serve(mut stream: TcpStream, behaviour: &Behaviour, requests: &AtomicU64) {
    stream.set_read_timeout(Some(PEER_PATIENCE)).unwrap();
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    if let Behaviour::Garbage(bytes) = behaviour {
        let _ = stream.write_all(bytes);
    }
    loop {
        let n = match stream.read(&mut chunk) {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        buf.extend_from_slice(&chunk[..n]);
        let Behaviour::Http(answer) = behaviour else {
            continue;
        };
        // Every whole request head buffered gets its reply (GETs: no bodies).
        while let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).into_owned();
            buf.drain(..end + 4);
            requests.fetch_add(1, Relaxed);
            let path = head.split_whitespace().nth(1).unwrap_or("/").to_string();
            let (status, body) = answer(&path);
            let reply = format!(
                "HTTP/1.1 {status} X\r\ncontent-type: text/plain\r\ncontent-length: {}\r\n\r\n{body}",
                body.len()
            );
            if stream.write_all(reply.as_bytes()).is_err() {
                return;
            }
        }
    }
}

/// A `/stats` responder in front of `server`: `/healthz` is `ok`, `/stats` the server's
/// live counters with its version and wire replaced, everything else 404: rpcbench-echo
/// as another version of it would answer.
fn other_version(server: &TestServer, version: &'static str, wire: u32) -> Peer {
    let stats = {
        let snapshot = server.stats();
        move || {
            let mut s = serde_json::to_value(&snapshot).unwrap();
            s["settings"]["version"] = version.into();
            s["settings"]["wire"] = wire.into();
            s.to_string()
        }
    };
    Peer::start(Behaviour::Http(Arc::new(move |path| match path {
        "/healthz" => (200, "ok".into()),
        "/stats" => (200, stats()),
        _ => (404, "not found".into()),
    })))
}

/// Nothing listens on either port: one line names both, what was seen and the command;
/// exit 1 at once; no call made.
#[test]
fn a_refused_port_is_one_line_with_the_command_to_start_the_server() {
    let (tcp, http) = (closed_port(), closed_port());
    let out = client_at(&tcp.to_string(), &http.to_string(), &["-n", "20"], &[]);
    out.stopped_before_measuring();
    assert_eq!(
        out.problems(),
        [format!(
            "rpcbench: 127.0.0.1 tcp port {tcp} and http port {http}: connection refused: nothing listens there; start the server there: rpcbench-echo --tcp 127.0.0.1:{tcp} --http 127.0.0.1:{http}"
        )],
        "{}",
        out.stderr
    );
    assert_eq!(
        out.stderr.lines().count(),
        1,
        "one line, nothing else: {}",
        out.stderr
    );
    // Refused is known at once; the bound is far above it, and far below a run of 11
    // transports waiting on failures.
    assert!(out.took < Duration::from_secs(5), "took {:?}", out.took);
}

/// `--no-preflight` measures a target meant to misbehave as it is: every call counted as
/// refused; the table shows no rate for a row with no ok call, and no note on idle workers.
#[test]
fn no_preflight_runs_anyway_and_a_failed_row_shows_no_rate() {
    let (tcp, http) = (closed_port().to_string(), closed_port().to_string());
    let out = client_at(
        &tcp,
        &http,
        &[
            "-n",
            "10",
            "-c",
            "2",
            "--timeout",
            "1s",
            "--transports",
            "tcp,tcp-connect,http-keepalive",
            "--no-preflight",
        ],
        &[("COLUMNS", "120")],
    );
    assert_eq!(out.code, Some(1));
    let report = out.report.expect("a report");
    for run in report["runs"].as_array().unwrap() {
        assert_eq!(run["ok"], 0, "{run}");
        assert_eq!(run["errors"]["connect_refused"], 10, "{run}");
    }
    let rows: Vec<&str> = out
        .stdout
        .lines()
        .filter(|l| {
            l.starts_with("tcp ")
                || l.starts_with("tcp-connect ")
                || l.starts_with("http-keepalive ")
        })
        .take(3)
        .collect();
    assert_eq!(rows.len(), 3, "{}", out.stdout);
    let header = out
        .stdout
        .lines()
        .find(|l| l.starts_with("transport "))
        .unwrap();
    let column = header
        .split("  ")
        .filter(|c| !c.trim().is_empty())
        .position(|c| c.trim() == "calls/s")
        .expect("a calls/s column");
    for row in rows {
        let cells: Vec<&str> = row
            .split("  ")
            .map(str::trim)
            .filter(|c| !c.is_empty())
            .collect();
        assert_eq!(cells[column], "-", "{row}");
    }
    assert!(!out.stdout.contains("calls in flight"), "{}", out.stdout);
    assert!(!out.stdout.contains("sat idle"), "{}", out.stdout);
}

/// A listener that accepts and says nothing, as the TCP port; the HTTP port is a real
/// rpcbench-echo, which then counts the preflight's two GETs and nothing else.
#[test]
fn a_silent_listener_is_not_rpcbench_echo() {
    let server = TestServer::start_default();
    let silent = Peer::start(Behaviour::Silent);
    let out = client_at(
        &silent.port(),
        &server.http.port().to_string(),
        &["--transports", "tcp,http-keepalive"],
        &[],
    );
    out.stopped_before_measuring();
    let (tcp, http) = (silent.addr.port(), server.http.port());
    assert_eq!(
        out.problems(),
        [format!(
            "rpcbench: 127.0.0.1 tcp port {tcp}: accepts connections but did not answer a request frame within {PREFLIGHT_MS} ms: not rpcbench-echo; another program has the port: give rpcbench the ports rpcbench-echo listens on (rpcbench --tcp-port, --http-port ...), or start rpcbench-echo there: rpcbench-echo --tcp 127.0.0.1:{tcp} --http 127.0.0.1:{http}"
        )]
    );
    assert_eq!(silent.connections.load(Relaxed), 1, "one probe");
    let stats = server.wait_stats(Duration::from_secs(5), "the two GETs", |s| {
        s.http.requests == 2
    });
    assert_eq!(stats.http.requests, 2, "GET /healthz and /stats only");
    assert_eq!(stats.tcp.requests, 0);
    // It waited for the reply, then gave up: the timeout and not much more.
    assert!(
        out.took >= rpcbench::preflight::PREFLIGHT_TIMEOUT,
        "{:?}",
        out.took
    );
}

/// An HTTP server that is not ours on the HTTP port: `GET /healthz` gets 404, said as
/// such; the real server's TCP port took the preflight's one frame and nothing else.
#[test]
fn an_http_server_that_is_not_ours_is_said_with_what_healthz_answered() {
    let server = TestServer::start_default();
    let web = Peer::start(Behaviour::Http(Arc::new(|_| (404, "no such page".into()))));
    let out = client_at(
        &server.tcp.port().to_string(),
        &web.port(),
        &["-n", "20"],
        &[],
    );
    let line = out.one_problem();
    assert!(
        line.starts_with(&format!(
            "rpcbench: 127.0.0.1 http port {}: an HTTP server, but not rpcbench-echo (GET /healthz: 404); another program has the port",
        web.addr.port())),
        "{line}"
    );
    assert!(line.ends_with(&format!(
        "rpcbench-echo --tcp 127.0.0.1:{} --http 127.0.0.1:{}",
        server.tcp.port(),
        web.addr.port()
    )));
    // GET /healthz, and HTTP/2's connection preface, which this peer reads as one or two
    // requests (`PRI * HTTP/2.0`, then `SM`) before the probe hangs up; then nothing: no
    // GET /stats, no call of the run.
    let requests = web.requests.load(Relaxed);
    assert!((2..=3).contains(&requests), "{requests} requests");
    let stats = server.wait_stats(Duration::from_secs(5), "the probe frame", |s| {
        s.tcp.requests == 1
    });
    assert_eq!(stats.tcp.connections_total, 1, "the probe, and no run");
}

/// A TCP server that answers a request frame with garbage (a mail server's greeting):
/// said with the bytes it sent.
#[test]
fn a_tcp_server_answering_garbage_is_said_with_its_bytes() {
    let server = TestServer::start_default();
    let smtp = Peer::start(Behaviour::Garbage(b"220 mail.example ESMTP ready\r\n"));
    let out = client_at(
        &smtp.port(),
        &server.http.port().to_string(),
        &["--transports", "tcp"],
        &[],
    );
    let line = out.one_problem();
    assert!(
        line.starts_with(&format!(
            "rpcbench: 127.0.0.1 tcp port {}: answered with bytes that are not rpcbench-echo's (`220 mail.example`): not rpcbench-echo;",
            smtp.addr.port()
        )),
        "{line}"
    );
    assert_eq!(smtp.connections.load(Relaxed), 1);
}

/// rpcbench-echo's two ports given the wrong way round: each is said on its own line, the
/// HTTP one as the raw TCP port it is (which closes on a request that is not a frame).
#[test]
fn swapped_ports_are_said_port_by_port() {
    let server = TestServer::start_default();
    let (tcp, http) = (server.tcp.port(), server.http.port());
    let out = client_at(&http.to_string(), &tcp.to_string(), &[], &[]);
    out.stopped_before_measuring();
    let problems = out.problems();
    assert_eq!(problems.len(), 2, "{}", out.stderr);
    assert!(
        problems[0].starts_with(&format!("rpcbench: 127.0.0.1 tcp port {http}: ")),
        "{}",
        problems[0]
    );
    assert!(
        problems[1].starts_with(&format!(
            "rpcbench: 127.0.0.1 http port {tcp}: closed the connection without answering GET /healthz: not an HTTP port of rpcbench-echo (its raw TCP port closes so);"
        )),
        "{}",
        problems[1]
    );
    // The GET and HTTP/2's connection preface (the run has HTTP/2 transports too), each
    // refused as a frame too large.
    let stats = server.wait_stats(Duration::from_secs(5), "the GET refused", |s| {
        s.rejected(rpcbench::server::stats::Reject::OversizedFrame) == 2
    });
    assert_eq!(stats.tcp.requests, 0, "no call made");
}

/// The TLS listeners are probed through TLS with the run's own settings: a healthy pair
/// passes (and the run goes on), a plain port given as the TLS port, and a CA that did not
/// sign the server's certificate, are each one line saying so.
#[test]
fn tls_ports_are_probed_through_tls() {
    let echo = common::EchoProcess::spawn(&["--tls", "127.0.0.1:0", "--https", "127.0.0.1:0"]);
    let ca = echo
        .ca_line
        .as_deref()
        .and_then(|l| l.split_whitespace().nth(1))
        .expect("a ca line")
        .to_string();
    let (tcp, http) = (echo.tcp.port().to_string(), echo.http.port().to_string());
    let (tls, https) = (echo.tls.unwrap().port(), echo.https.unwrap().port());
    let secured = |tls: u16, ca: &str| {
        client_at(
            &tcp,
            &http,
            &[
                "--security",
                "tls13",
                "--ca",
                ca,
                "--tls-port",
                &tls.to_string(),
                "--https-port",
                &https.to_string(),
                "--transports",
                "tcp,http-keepalive",
                "-n",
                "10",
            ],
            &[],
        )
    };
    let out = secured(tls, &ca);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert!(out.stderr.is_empty(), "{}", out.stderr);

    let out = secured(echo.tcp.port(), &ca);
    let line = out.one_problem();
    assert!(
        line.starts_with(&format!(
            "rpcbench: 127.0.0.1 tls port {tcp}: the TLS handshake failed: the server does not speak TLS; give the server's TLS ports (--tls-port, --https-port), or start the server with TLS there: rpcbench-echo --http 127.0.0.1:{http} --tls 127.0.0.1:{tcp} --https 127.0.0.1:{https}"
        )),
        "{line}"
    );

    let other = rpcbench::server::tls::generate_certs(
        &["127.0.0.1".to_string()],
        rpcbench::server::tls::LeafUse::Server,
        false,
    )
    .unwrap();
    let other_ca =
        std::env::temp_dir().join(format!("rpcbench-preflight-ca-{}.pem", std::process::id()));
    std::fs::write(&other_ca, other.ca_pem).unwrap();
    let out = secured(tls, other_ca.to_str().unwrap());
    std::fs::remove_file(&other_ca).ok();
    let problems = out.problems();
    out.stopped_before_measuring();
    assert_eq!(
        problems.len(),
        1,
        "tls and https alike, one line: {}",
        out.stderr
    );
    assert!(
        problems[0].starts_with(&format!(
            "rpcbench: 127.0.0.1 tls port {tls} and https port {https}: the TLS handshake failed: server certificate not signed by a trusted CA; give the server's CA with --ca"
        )),
        "{}",
        problems[0]
    );
}

/// A UDP port where nothing listens: refused (the ICMP port unreachable), said like TCP's.
#[test]
fn a_refused_udp_port_is_said() {
    let server = TestServer::start_default();
    let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let port = udp.local_addr().unwrap().port();
    drop(udp);
    let out = client_at(
        &server.tcp.port().to_string(),
        &server.http.port().to_string(),
        &["--udp-port", &port.to_string(), "--transports", "tcp,udp"],
        &[],
    );
    let line = out.one_problem();
    assert!(
        line.starts_with(&format!(
            "rpcbench: 127.0.0.1 udp port {port}: connection refused: nothing listens there; start the server there: rpcbench-echo --tcp 127.0.0.1:{} --http 127.0.0.1:{} --udp 127.0.0.1:{port}",
            server.tcp.port(),
            server.http.port()
        )),
        "{line}"
    );
}

/// A UDP socket made for a test on 127.0.0.1:0 that takes datagrams for at most `for_how`
/// and answers each with `answer` (or nothing); returns its port and how many came.
fn udp_peer(
    answer: Option<&'static [u8]>,
    for_how: Duration,
) -> (u16, std::thread::JoinHandle<u64>) {
    let sock = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    sock.set_read_timeout(Some(Duration::from_millis(50)))
        .unwrap();
    let port = sock.local_addr().unwrap().port();
    let thread = std::thread::spawn(move || {
        let started = Instant::now();
        let mut taken = 0;
        let mut buf = [0u8; 2048];
        while started.elapsed() < for_how {
            if let Ok((_, from)) = sock.recv_from(&mut buf) {
                taken += 1;
                if let Some(bytes) = answer {
                    let _ = sock.send_to(bytes, from);
                }
            }
        }
        taken
    });
    (port, thread)
}

/// A UDP port that takes datagrams and never answers: silence is said as silence (UDP
/// cannot tell a firewall from a program that ignores the frame), after the probe tried
/// more than once, within the preflight's timeout. One that answers other bytes is not
/// rpcbench-echo. Either way nothing is measured.
#[test]
fn a_silent_or_foreign_udp_port_is_said_for_what_udp_can_tell() {
    let server = TestServer::start_default();
    let cases: [(Option<&'static [u8]>, String, u64); 2] = [
        (
            None,
            format!(
                "no reply to 3 probe datagrams within {PREFLIGHT_MS} ms, and no refusal: UDP has no handshake"
            ),
            3,
        ),
        (
            Some(b"PONG"),
            "answered with bytes that are not rpcbench-echo's (`PONG`)".to_string(),
            1,
        ),
    ];
    for (answer, seen, probes) in cases {
        let (port, peer) = udp_peer(answer, Duration::from_secs(3));
        let out = client_at(
            &server.tcp.port().to_string(),
            &server.http.port().to_string(),
            &["--udp-port", &port.to_string(), "--transports", "tcp,udp"],
            &[],
        );
        let line = out.one_problem();
        let expected = format!("rpcbench: 127.0.0.1 udp port {port}: {seen}");
        assert!(line.starts_with(&expected), "{line}");
        assert!(line.contains("--udp 127.0.0.1:"), "{line}");
        assert!(out.took < Duration::from_secs(5), "{:?}", out.took);
        assert_eq!(peer.join().unwrap(), probes, "datagrams the probe sent");
    }
}

/// rpcbench-echo of another version on the same wire: one warning line, the run goes on,
/// and the report carries the server's version beside the client's. Its wire differing:
/// the run stops before any call, and says which version to start. The same warning
/// comes once after the run with --no-preflight.
#[test]
fn another_version_is_a_warning_and_another_wire_an_error() {
    let ours = env!("CARGO_PKG_VERSION");
    let server = TestServer::start_default();
    let tcp = server.tcp.port().to_string();
    let same_wire = other_version(&server, "0.0.1-test", rpcbench::wire::WIRE_VERSION);
    let args = [
        "--tcp-port",
        &tcp,
        "--http-port",
        &same_wire.port(),
        "--transports",
        "tcp",
        "-n",
        "20",
    ];
    let warning = format!(
        "rpcbench: warning: the server runs rpcbench-echo 0.0.1-test, this client rpcbench {ours}: the same wire ({}), so the run goes on",
        rpcbench::wire::WIRE_VERSION
    );
    for extra in [&[][..], &["--no-preflight"]] {
        let out = client(&[&args[..], extra].concat(), &[]);
        assert_eq!(out.code, Some(0), "{extra:?}: {}", out.stderr);
        let said: Vec<&str> = out
            .stderr
            .lines()
            .filter(|l| l.contains("0.0.1-test"))
            .collect();
        assert_eq!(said, [warning.as_str()], "{extra:?}: once: {}", out.stderr);
        let report = out.report.expect("a report");
        assert_eq!(report["rpcbench"], ours);
        assert_eq!(report["server"]["settings"]["version"], "0.0.1-test");
        assert_eq!(report["runs"][0]["ok"], 20);
        // The heading names both ends.
        assert!(
            out.stdout.contains("server rpcbench-echo 0.0.1-test on "),
            "{}",
            out.stdout
        );
    }

    let before = server.stats().tcp.requests;
    let other_wire = other_version(&server, "9.9.9", rpcbench::wire::WIRE_VERSION + 98);
    let out = client_at(
        &tcp,
        &other_wire.port(),
        &["--transports", "tcp", "-n", "20"],
        &[],
    );
    out.stopped_before_measuring();
    assert_eq!(
        out.problems(),
        [format!(
            "rpcbench: 127.0.0.1 http port {}: rpcbench-echo 9.9.9, whose wire ({}) differs from this client's ({}, rpcbench {ours}); start rpcbench-echo {ours} there: rpcbench-echo --tcp 127.0.0.1:{tcp} --http 127.0.0.1:{}",
            other_wire.addr.port(),
            rpcbench::wire::WIRE_VERSION + 98,
            rpcbench::wire::WIRE_VERSION,
            other_wire.addr.port()
        )]
    );
    let stats = server.wait_stats(Duration::from_secs(5), "the probe frame", |s| {
        s.tcp.requests == before + 1
    });
    assert_eq!(stats.tcp.requests, before + 1, "the probe frame only");
}

/// The server's version and host are in the JSON and the heading beside the client's,
/// against a real rpcbench-echo; the same version gives no warning at all.
#[test]
fn the_heading_and_json_carry_both_ends() {
    let server = TestServer::start_default();
    let out = client_at(
        &server.tcp.port().to_string(),
        &server.http.port().to_string(),
        &["--transports", "tcp", "-n", "20"],
        &[("COLUMNS", "200")],
    );
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert!(out.stderr.is_empty(), "{}", out.stderr);
    let report = out.report.unwrap();
    let settings = &report["server"]["settings"];
    assert_eq!(settings["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(settings["wire"], rpcbench::wire::WIRE_VERSION);
    let host = &settings["host"];
    assert_eq!(host["hostname"], report["environment"]["hostname"]);
    assert_eq!(host["kernel"], report["environment"]["kernel"]);
    let heading = out.stdout.lines().next().unwrap();
    assert!(
        heading.contains(&format!(
            "server rpcbench-echo {} on {} ({}, {} CPUs) · client {} (",
            env!("CARGO_PKG_VERSION"),
            host["hostname"].as_str().unwrap(),
            host["kernel"].as_str().unwrap(),
            host["cpus"],
            report["environment"]["hostname"].as_str().unwrap()
        )),
        "{heading}"
    );
}

/// Off a terminal, a warning is one plain line (no time, no module, no escape sequence);
/// RUST_LOG gives tracing's full record instead, still without escape sequences.
#[test]
fn logs_off_a_terminal_are_plain_lines() {
    let server = TestServer::start_default();
    let args = [
        "--tcp-port",
        &server.tcp.port().to_string(),
        "--http-port",
        &closed_port().to_string(),
        "--transports",
        "tcp",
        "-n",
        "10",
    ];
    let out = client(&args, &[]);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let lines: Vec<&str> = out.stderr.lines().collect();
    assert_eq!(lines.len(), 1, "{}", out.stderr);
    assert!(
        lines[0].starts_with("rpcbench: warning: 127.0.0.1 http port ")
            && lines[0].ends_with(
                "the server's version and counters (GET /stats) are left out of the report"
            ),
        "{}",
        lines[0]
    );
    assert!(!out.stderr.contains('\x1b'), "{:?}", out.stderr);
    assert!(out.report.unwrap()["server"].is_null());

    let full = client(&args, &[("RUST_LOG", "warn")]);
    assert!(!full.stderr.contains('\x1b'), "{:?}", full.stderr);
    let record = full.stderr.lines().next().unwrap_or_default();
    assert!(
        record.contains("WARN")
            && record.contains("rpcbench::bench")
            && !record.starts_with("rpcbench:"),
        "a full record: {record:?}"
    );
    let verbose = client(&[&args[..], &["-v"]].concat(), &[]);
    assert!(
        verbose
            .stderr
            .lines()
            .any(|l| l.contains("DEBUG") && l.contains("preflight of 2 ports took")),
        "{}",
        verbose.stderr
    );
}

/// On a terminal (a pseudo-terminal made by `script`), a warning's level word is in
/// colour, unless NO_COLOR is set.
#[test]
fn colour_only_on_a_terminal_and_never_under_no_color() {
    if Command::new("script").arg("--version").output().is_err() {
        panic!("no `script` command: install util-linux (.ci/run does)");
    }
    let server = TestServer::start_default();
    // The HTTP port closed while only tcp runs: a warning, and the run goes on.
    let command = format!(
        "{} --target 127.0.0.1 --tcp-port {} --http-port {} --transports tcp -n 5 --no-progress --format json",
        env!("CARGO_BIN_EXE_rpcbench"),
        server.tcp.port(),
        closed_port()
    );
    let on_terminal = |no_color: Option<&str>| {
        let mut cmd = Command::new("script");
        cmd.args(["-qec", &command, "/dev/null"])
            .env_remove("NO_COLOR")
            .env_remove("RUST_LOG");
        if let Some(v) = no_color {
            cmd.env("NO_COLOR", v);
        }
        let out = cmd.stdin(Stdio::null()).output().expect("script runs");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let coloured = on_terminal(None);
    assert!(
        coloured.contains("rpcbench: \x1b[1;33mwarning\x1b[0m: 127.0.0.1 http port"),
        "{coloured:?}"
    );
    let plain = on_terminal(Some("1"));
    assert!(
        plain.contains("rpcbench: warning: 127.0.0.1 http port"),
        "{plain:?}"
    );
    assert!(!plain.contains('\x1b'), "{plain:?}");
}

/// The embedded server (no --target) is not preflighted: nothing there can fail it, and
/// nothing is said.
#[test]
fn the_embedded_server_is_not_preflighted() {
    let out = Command::new(env!("CARGO_BIN_EXE_rpcbench"))
        .args([
            "-n",
            "20",
            "--warmup",
            "0",
            "--transports",
            "tcp",
            "--format",
            "json",
            "-v",
        ])
        .env_remove("RUST_LOG")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("preflight"), "{stderr}");
}

// ---------------------------------------------------------------------------------------
// As root: a firewall that drops a port
// ---------------------------------------------------------------------------------------

/// Two namespaces joined by a veth pair, the server's firewall dropping TCP port 7001:
/// the client's preflight says "no answer" for that port within its timeout (and not for
/// the HTTP port, which answers); the server, listening on every address, printed the
/// command that reaches it, which runs when it leaves out the dropped port's transports.
#[test]
#[ignore = "needs root"]
fn a_dropped_port_is_no_answer_within_the_timeout() {
    use common::netns::Netns;
    if Command::new("iptables").arg("--version").output().is_err() {
        panic!("root but no `iptables` command: install iptables (.ci/run does)");
    }
    let pid = std::process::id() % 100_000;
    let (srv, cli) = (
        Netns::create(&format!("rbpf-s{pid}"), ""),
        Netns::create(&format!("rbpf-c{pid}"), ""),
    );
    let ip = |ns: &Netns, args: &[&str]| {
        let status = Command::new("ip")
            .args(["netns", "exec", &ns.name, "ip"])
            .args(args)
            .status()
            .unwrap();
        assert!(status.success(), "ip {args:?} in {}", ns.name);
    };
    let (vs, vc) = (format!("pfs{pid}"), format!("pfc{pid}"));
    let status = Command::new("ip")
        .args([
            "link", "add", &vs, "netns", &srv.name, "type", "veth", "peer", "name", &vc, "netns",
            &cli.name,
        ])
        .status()
        .unwrap();
    assert!(status.success(), "veth pair");
    ip(&srv, &["addr", "add", "10.91.0.1/24", "dev", &vs]);
    ip(&cli, &["addr", "add", "10.91.0.2/24", "dev", &vc]);
    for (ns, dev) in [(&srv, &vs), (&cli, &vc)] {
        ip(ns, &["link", "set", dev, "up"]);
        ip(ns, &["link", "set", "lo", "up"]);
    }
    let status = Command::new("ip")
        .args([
            "netns", "exec", &srv.name, "iptables", "-A", "INPUT", "-p", "tcp", "--dport", "7001",
            "-j", "DROP",
        ])
        .status()
        .unwrap();
    assert!(status.success(), "iptables in {}", srv.name);

    let mut echo = Command::new("ip")
        .args([
            "netns",
            "exec",
            &srv.name,
            env!("CARGO_BIN_EXE_rpcbench-echo"),
        ])
        .args(["--tcp", "0.0.0.0:7001", "--http", "0.0.0.0:7080"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Killed by its PID however the test ends.
    struct Kill(std::process::Child);
    impl Drop for Kill {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let mut stderr = echo.stderr.take().unwrap();
    let echo = Kill(echo);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut text = String::new();
        let mut chunk = [0u8; 1024];
        while let Ok(n) = stderr.read(&mut chunk) {
            if n == 0 {
                break;
            }
            text.push_str(&String::from_utf8_lossy(&chunk[..n]));
            if text.contains("open in a firewall") {
                let _ = tx.send(text.clone());
            }
        }
    });
    let block = rx
        .recv_timeout(Duration::from_secs(10))
        .expect("rpcbench-echo printed where another host reaches it");
    assert!(
        block.contains("another host reaches this one at 10.91.0.1"),
        "{block}"
    );
    let command_line = block
        .lines()
        .find_map(|l| l.trim().strip_prefix("call it with: "))
        .expect("the rpcbench line");
    assert_eq!(
        command_line,
        "rpcbench --target 10.91.0.1 --tcp-port 7001 --http-port 7080"
    );
    assert!(
        block.contains("open in a firewall: tcp 7001, 7080"),
        "{block}"
    );

    let in_client = |extra: &[&str]| {
        let started = Instant::now();
        let out = Command::new("ip")
            .args(["netns", "exec", &cli.name, env!("CARGO_BIN_EXE_rpcbench")])
            .args(command_line.split_whitespace().skip(1))
            .args(["--no-progress", "-n", "20", "--warmup", "0"])
            .args(extra)
            .env_remove("RUST_LOG")
            .output()
            .unwrap();
        (out, started.elapsed())
    };
    let (out, took) = in_client(&["--transports", "tcp,http-keepalive"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(out.stdout.is_empty(), "nothing measured");
    assert_eq!(
        stderr.lines().collect::<Vec<_>>(),
        [format!(
            "rpcbench: 10.91.0.1 tcp port 7001: no answer within {PREFLIGHT_MS} ms: a firewall drops the packets, or nothing is at that address; check the address, open the port in the firewall there, and start the server if it is not running: rpcbench-echo --tcp 0.0.0.0:7001 --http 0.0.0.0:7080"
        )]
    );
    // It waited the timeout for the SYN's answer (physics), then said so: the bound above
    // is ten times the timeout, for a loaded machine, and far below a run's timeouts.
    assert!(took >= rpcbench::preflight::PREFLIGHT_TIMEOUT, "{took:?}");
    assert!(
        took < rpcbench::preflight::PREFLIGHT_TIMEOUT * 10,
        "{took:?}"
    );

    // The port that answers runs.
    let (out, _) = in_client(&["--transports", "http-keepalive", "--format", "json"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["runs"][0]["ok"], 20);
    drop(echo);
}

/// A report (or `/stats`) from a server from before the wire version and host facts
/// still loads: they read as 0 and empty.
#[test]
fn a_report_from_before_the_new_fields_still_loads() {
    let mut fixture: Value =
        serde_json::from_str(include_str!("fixtures/report.json")).expect("the fixture");
    let settings = fixture["server"]["settings"].as_object_mut().unwrap();
    assert!(settings.remove("wire").is_some() && settings.remove("host").is_some());
    let report: rpcbench::report::Report = serde_json::from_value(fixture).expect("loads");
    let settings = report.server.unwrap().settings;
    assert_eq!(settings.wire, 0);
    assert_eq!(settings.host, rpcbench::host::HostFacts::default());
}

/// HAProxy in front of rpcbench-echo's HTTP port, speaking HTTP/2 only on its own side
/// (`bind ... proto h2`, as a gRPC front does; with `tls`, TLS with ALPN `h2` only) and
/// h2c to the server. Killed by its PID when dropped.
struct H2Front {
    child: std::process::Child,
    port: u16,
    dir: std::path::PathBuf,
}

impl H2Front {
    /// Starts the front before `http`, on a free loopback port (a port found free, then
    /// given to HAProxy: tried again on another port if HAProxy could not bind it).
    fn start(http: SocketAddr, tls: Option<&rpcbench::server::tls::GeneratedCerts>) -> H2Front {
        let dir = std::env::temp_dir().join(format!(
            "rpcbench-h2front-{}-{}",
            std::process::id(),
            RUN.fetch_add(1, Relaxed)
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let ssl = match tls {
            Some(certs) => {
                let pem = dir.join("front.pem");
                std::fs::write(&pem, format!("{}{}", certs.leaf_pem, certs.leaf_key_pem)).unwrap();
                format!(" ssl crt {} alpn h2", pem.display())
            }
            None => " proto h2".to_string(),
        };
        for _ in 0..5 {
            let port = TcpListener::bind("127.0.0.1:0")
                .unwrap()
                .local_addr()
                .unwrap()
                .port();
            let config = dir.join("haproxy.cfg");
            std::fs::write(
                &config,
                format!(
                    "defaults\n  mode http\n  timeout connect 2s\n  timeout client 10s\n  timeout server 10s\n\
                     frontend h2only\n  bind 127.0.0.1:{port}{ssl}\n  default_backend echo\n\
                     backend echo\n  server echo {http} proto h2\n"
                ),
            )
            .unwrap();
            let mut child = Command::new("haproxy")
                .arg("-f")
                .arg(&config)
                .arg("-db")
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("haproxy runs (.ci/run installs it)");
            let deadline = Instant::now() + Duration::from_secs(5);
            while Instant::now() < deadline {
                if let Some(status) = child.try_wait().unwrap() {
                    eprintln!("haproxy exited ({status}) on port {port}; another port");
                    break;
                }
                if TcpStream::connect(("127.0.0.1", port)).is_ok() {
                    return H2Front { child, port, dir };
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        panic!("haproxy did not start");
    }
}

impl Drop for H2Front {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A front that speaks HTTP/2 only, before rpcbench-echo: the HTTP/2 transports run clean
/// through it with the preflight on (every call ok), in plain and over TLS; a run that
/// adds an HTTP/1.1 transport stops before measuring, with one line that says the front
/// speaks one version and names the transports to leave out. Before the probe spoke
/// HTTP/2, the first run stopped ("closed the connection without answering GET /healthz").
#[test]
fn an_http2_only_front_passes_the_http2_transports() {
    let echo = common::EchoProcess::spawn(&[]);
    let tcp = echo.tcp.port().to_string();
    let http2 = "h2,h2-mux,grpc,grpc-mux,grpc-stream";

    let front = H2Front::start(echo.http, None);
    let port = front.port.to_string();
    let out = client_at(&tcp, &port, &["--transports", http2, "-n", "64"], &[]);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert!(out.problems().is_empty(), "{}", out.stderr);
    let report = out.report.expect("a report");
    let runs = report["runs"].as_array().unwrap();
    assert_eq!(
        runs.len(),
        7,
        "five transports, h2 and grpc also at 16 workers"
    );
    for run in runs {
        assert_eq!(run["ok"], run["calls"], "{run}");
    }

    let out = client_at(
        &tcp,
        &port,
        &["--transports", "http-keepalive,h2", "-n", "8"],
        &[],
    );
    let line = out.one_problem();
    assert!(
        line.starts_with(&format!(
            "rpcbench: 127.0.0.1 http port {port}: answers as rpcbench-echo over HTTP/2 but not over HTTP/1.1"
        )),
        "{line}"
    );
    assert!(
        line.contains("leave the transports that speak HTTP/1.1 out with --transports (http-fresh, http-keepalive, curl-reuse, curl-fresh)"),
        "{line}"
    );
    drop(front);

    // Over TLS: the probe offers ALPN h2 to the front's TLS port.
    let certs = rpcbench::server::tls::generate_certs(
        &["127.0.0.1".to_string()],
        rpcbench::server::tls::LeafUse::Server,
        false,
    )
    .unwrap();
    let front = H2Front::start(echo.http, Some(&certs));
    let ca = front.dir.join("ca.pem");
    std::fs::write(&ca, &certs.ca_pem).unwrap();
    let out = client_at(
        &tcp,
        &echo.http.port().to_string(),
        &[
            "--transports",
            "h2,grpc",
            "--security",
            "tls13",
            "--ca",
            ca.to_str().unwrap(),
            "--https-port",
            &front.port.to_string(),
            "-n",
            "16",
        ],
        &[],
    );
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert!(out.problems().is_empty(), "{}", out.stderr);
}

/// rpcbench-echo's own HTTP port serves both versions: a mixed choice probes it once
/// each way and passes.
#[test]
fn a_mixed_choice_probes_each_http_version() {
    let echo = common::EchoProcess::spawn(&[]);
    let out = client_at(
        &echo.tcp.port().to_string(),
        &echo.http.port().to_string(),
        &["--transports", "http-keepalive,h2,grpc", "-n", "8"],
        &[],
    );
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert!(out.problems().is_empty(), "{}", out.stderr);
}
