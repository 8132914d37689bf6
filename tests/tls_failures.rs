//! TLS failures end to end, against the real `rpcbench-echo`: each ends every call as a
//! distinct error kind of its own, within `--timeout`, on one transport of every family at
//! least (raw frames, hyper HTTP/1.1, HTTP/2, gRPC, libcurl); the server counts it per
//! listener and by kind, and serves a healthy client afterwards. Also: the generated CA
//! verifies the leaf for exactly the names printed, and `--insecure`, the one test here
//! that turns verification off.

mod common;

use common::{EchoProcess, raw_http};
use rpcbench::server::tls::{GeneratedCerts, LeafUse, generate_certs};
use serde_json::Value;
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Calls per transport in a failure case: enough to see every call counted, few enough
/// that cases whose calls wait for `--timeout` stay short.
const CALLS: u64 = 6;

/// Every TCP transport, over the listener it calls: raw frames (`tls`) and the HTTPS ones.
const RAW: &[&str] = &["tcp", "tcp-connect"];
const HTTPS: &[&str] = &[
    "http-fresh",
    "http-keepalive",
    "h2",
    "h2-mux",
    "grpc",
    "grpc-mux",
    "grpc-stream",
    "curl-reuse",
    "curl-fresh",
];

/// A scratch directory for certificate files, removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!("rpcbench-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }

    /// Writes `text` to `name` inside; returns the path as a string.
    fn write(&self, name: &str, text: &str) -> String {
        let path = self.0.join(name);
        std::fs::write(&path, text).unwrap();
        path.to_string_lossy().into_owned()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A CA and a leaf for `names`, in `dir`: (CA path, leaf path, key path).
fn certs(dir: &Scratch, tag: &str, names: &[&str], usage: LeafUse, expired: bool) -> [String; 3] {
    let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
    let GeneratedCerts {
        ca_pem,
        leaf_pem,
        leaf_key_pem,
        ..
    } = generate_certs(&names, usage, expired).unwrap();
    [
        dir.write(&format!("{tag}-ca.pem"), &ca_pem),
        dir.write(&format!("{tag}-leaf.pem"), &leaf_pem),
        dir.write(&format!("{tag}-key.pem"), &leaf_key_pem),
    ]
}

/// An echo server with both TLS listeners, given `extra` flags.
fn server(extra: &[&str]) -> EchoProcess {
    let mut args = vec!["--tls", "127.0.0.1:0", "--https", "127.0.0.1:0"];
    args.extend_from_slice(extra);
    EchoProcess::spawn(&args)
}

/// The path of the CA a server generated, from its `ca PATH names ...` line.
fn generated_ca(s: &EchoProcess) -> String {
    let line = s.ca_line.as_deref().expect("a ca line");
    line.split_whitespace().nth(1).unwrap().to_string()
}

/// What one client run gave: the JSON report, stderr, and how long it took.
struct Outcome {
    report: Value,
    stderr: String,
    took: Duration,
}

/// Runs `rpcbench` against 127.0.0.1 with `ports` (`--tcp-port 7001` pairs and so on),
/// `transports` and `extra`; failed calls allowed (the exit status is then 1).
fn client(ports: &[(&str, u16)], transports: &[&str], extra: &[&str]) -> Outcome {
    let started = Instant::now();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_rpcbench"));
    // No preflight: these servers misbehave on purpose, and every call is to be counted
    // as the failure it meets (tests/preflight.rs has the preflight's own cases).
    cmd.args([
        "--target",
        "127.0.0.1",
        "--names",
        "ip",
        "--no-progress",
        "--no-preflight",
    ])
    .args(["--format", "json", "--warmup", "0", "--max-lost", "1000000"])
    // One worker, as before the default run measured h2-mux and grpc-mux at 16: with
    // several calls on one shared gRPC channel, the calls that were in flight when the
    // channel died may see it closed (`io`) rather than the TLS failure that closed it.
    .args([
        "-c",
        "1",
        "-n",
        &CALLS.to_string(),
        "--transports",
        &transports.join(","),
    ]);
    for (flag, port) in ports {
        cmd.args([*flag, &port.to_string()]);
    }
    let out = cmd.args(extra).output().expect("rpcbench runs");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let report = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("no JSON report ({e}); stderr: {stderr}"));
    Outcome {
        report,
        stderr,
        took: started.elapsed(),
    }
}

/// The ports of `s` as the client's flags, its plain and TLS listeners where they belong.
fn ports_of(s: &EchoProcess) -> Vec<(&'static str, u16)> {
    vec![
        ("--tcp-port", s.tcp.port()),
        ("--http-port", s.http.port()),
        ("--tls-port", s.tls.unwrap().port()),
        ("--https-port", s.https.unwrap().port()),
    ]
}

/// Every run of `out` ended every call as `kind`, nothing else; the first occurrence was
/// told on stderr, in one line.
fn all_failed_as(out: &Outcome, kind: &str) {
    let runs = out.report["runs"].as_array().unwrap();
    assert!(!runs.is_empty());
    for r in runs {
        let name = r["transport"].as_str().unwrap();
        assert_eq!(r["calls"], CALLS, "{name}");
        assert_eq!(r["ok"], 0, "{name}: {r}");
        assert_eq!(
            r["lost"], 0,
            "{name} {kind}: {} {}",
            r["errors"], out.stderr
        );
        assert_eq!(r["mismatched"], 0, "{name}");
        let errors = r["errors"].as_object().unwrap();
        assert_eq!(errors.len(), 1, "{name}: one kind, {kind}: {}", r["errors"]);
        assert_eq!(
            r["errors"][kind], CALLS,
            "{name}: {} {}",
            r["errors"], out.stderr
        );
    }
    let told: Vec<&str> = out
        .stderr
        .lines()
        .filter(|l| l.contains(&format!("first {kind} error")))
        .collect();
    assert_eq!(told.len(), 1, "one line for {kind}: {}", out.stderr);
}

/// The server's counters, from `GET /stats` on its plain HTTP listener.
fn stats(s: &EchoProcess) -> Value {
    let reply = raw_http(
        s.http,
        b"GET /stats HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    );
    let (resp, _) = common::parse_http1(&reply).expect("an HTTP reply");
    serde_json::from_slice(&resp.body).expect("/stats is JSON")
}

/// A listener's handshake failures of `kind`.
fn failed(stats: &Value, listener: &str, kind: &str) -> u64 {
    stats[listener]["failed"][kind].as_u64().unwrap()
}

/// A healthy client still gets every call answered: `extra` on a per-call transport of
/// each TLS listener, and on the plain ones.
fn still_serves(s: &EchoProcess, extra: &[&str]) {
    let out = client(
        &ports_of(s),
        &["tcp-connect", "http-fresh", "curl-fresh"],
        extra,
    );
    for r in out.report["runs"].as_array().unwrap() {
        assert_eq!(r["ok"], CALLS, "healthy {extra:?} after the failures: {r}");
    }
}

/// All the failures `transports` made on one listener, counted as `kind` (at least one per
/// call: a client may retry a connection, never make fewer).
fn counted(s: &Value, listener: &str, kind: &str, transports: &[&str]) {
    let n = failed(s, listener, kind);
    assert!(
        n >= CALLS * transports.len() as u64,
        "{listener} {kind}: {n} for {} calls: {}",
        CALLS * transports.len() as u64,
        s[listener]
    );
}

#[test]
fn plain_client_on_tls_ports() {
    let s = server(&[]);
    // The plain ports point at the TLS listeners.
    let ports = [
        ("--tcp-port", s.tls.unwrap().port()),
        ("--http-port", s.https.unwrap().port()),
    ];
    let https: Vec<&str> = HTTPS.to_vec();
    let all: Vec<&str> = RAW.iter().chain(&https).copied().collect();
    let out = client(&ports, &all, &["--timeout", "2s"]);
    all_failed_as(&out, "tls_plain_client");
    let st = stats(&s);
    counted(&st, "tls_handshakes", "not_tls", RAW);
    counted(&st, "https_handshakes", "not_tls", &https);
    let ca = generated_ca(&s);
    still_serves(&s, &["--security", "tls13", "--ca", &ca]);
}

#[test]
fn tls_client_on_plain_ports() {
    let s = server(&[]);
    let ca = generated_ca(&s);
    // The TLS ports point at the plain listeners.
    let ports = [
        ("--http-port", s.http.port()),
        ("--tls-port", s.tcp.port()),
        ("--https-port", s.http.port()),
    ];
    let all: Vec<&str> = RAW.iter().chain(HTTPS).copied().collect();
    let args = ["--security", "tls13", "--ca", &ca, "--timeout", "2s"];
    let out = client(&ports, &all, &args);
    all_failed_as(&out, "tls_not_tls_server");
    let rejected = &stats(&s)["rejected"];
    // Closed at once, not left to wait: the calls above ended well within their timeouts.
    assert!(rejected["tcp_tls_client"].as_u64().unwrap() >= CALLS * RAW.len() as u64);
    assert!(rejected["http_tls_client"].as_u64().unwrap() >= CALLS * HTTPS.len() as u64);
    still_serves(&s, &[]);
}

/// A server whose certificate the client refuses (`tag` certs from `make`): every call is
/// `kind`, and the server sees the client's alert on each listener.
fn refused_server_cert(tag: &str, names: &[&str], expired: bool, own_ca: bool, kind: &str) {
    let dir = Scratch::new(tag);
    let [ca, leaf, key] = certs(&dir, tag, names, LeafUse::Server, expired);
    let [other_ca, _, _] = certs(&dir, "other", &["127.0.0.1"], LeafUse::Server, false);
    let s = server(&["--cert", &leaf, "--key", &key]);
    let trusted = if own_ca { &ca } else { &other_ca };
    let all: Vec<&str> = RAW.iter().chain(HTTPS).copied().collect();
    let args = ["--security", "tls13", "--ca", trusted, "--timeout", "2s"];
    let out = client(&ports_of(&s), &all, &args);
    all_failed_as(&out, kind);
    // A client that refuses the certificate says so with an alert, or just closes.
    let st = stats(&s);
    for (listener, transports) in [("tls_handshakes", RAW), ("https_handshakes", HTTPS)] {
        let n = failed(&st, listener, "alert_received") + failed(&st, listener, "closed");
        // Not one per call: with a wrong name some clients' refusals reach the server
        // as neither (docs/tls.md, the known gap), so only that it counted them is checked.
        assert!(n > 0, "{listener} ({transports:?}): {}", st[listener]);
    }
    still_serves(&s, &[]);
}

#[test]
fn untrusted_certificate() {
    refused_server_cert(
        "untrusted",
        &["127.0.0.1"],
        false,
        false,
        "tls_untrusted_cert",
    );
}

#[test]
fn expired_certificate() {
    refused_server_cert("expired", &["127.0.0.1"], true, true, "tls_expired_cert");
}

#[test]
fn wrong_host_name() {
    refused_server_cert(
        "wrongname",
        &["other.example"],
        false,
        true,
        "tls_wrong_name",
    );
}

#[test]
fn mtls_server_refuses_a_client_without_a_certificate_or_with_another_cas() {
    let dir = Scratch::new("mtls");
    let [client_ca, client_cert, client_key] =
        certs(&dir, "client", &["client"], LeafUse::Client, false);
    let [_, stranger_cert, stranger_key] =
        certs(&dir, "stranger", &["client"], LeafUse::Client, false);
    let s = server(&["--client-ca", &client_ca]);
    let ca = generated_ca(&s);
    let all: Vec<&str> = RAW.iter().chain(HTTPS).copied().collect();

    // TLS 1.3 refuses a client without a certificate after the client's handshake is
    // done, so the request may already be on its way; the server's lingering close (it
    // reads until the client closes, `server::tls::linger`) keeps a reset from overtaking
    // the alert, and every call is refused as such.
    let none = client(
        &ports_of(&s),
        &all,
        &["--security", "tls13", "--ca", &ca, "--timeout", "2s"],
    );
    for r in none.report["runs"].as_array().unwrap() {
        assert_eq!(r["ok"], 0, "{r}");
        assert_eq!(r["errors"]["tls_client_cert_required"], CALLS, "{r}");
    }
    assert!(none.stderr.contains("first tls_client_cert_required error"));
    let st = stats(&s);
    counted(&st, "tls_handshakes", "no_client_cert", RAW);
    counted(&st, "https_handshakes", "no_client_cert", HTTPS);

    let stranger = client(
        &ports_of(&s),
        &all,
        &[
            "--security",
            "mtls",
            "--ca",
            &ca,
            "--client-cert",
            &stranger_cert,
            "--client-key",
            &stranger_key,
            "--timeout",
            "2s",
        ],
    );
    // The same as without a certificate: TLS 1.3 checks the client's certificate after
    // the client's handshake is done, and the lingering close lets the alert arrive.
    for r in stranger.report["runs"].as_array().unwrap() {
        assert_eq!(r["ok"], 0, "{r}");
        assert_eq!(r["errors"]["tls_client_cert_refused"], CALLS, "{r}");
    }
    assert!(
        stranger
            .stderr
            .contains("first tls_client_cert_refused error")
    );
    let st = stats(&s);
    counted(&st, "tls_handshakes", "bad_client_cert", RAW);
    counted(&st, "https_handshakes", "bad_client_cert", HTTPS);

    still_serves(
        &s,
        &[
            "--security",
            "mtls",
            "--ca",
            &ca,
            "--client-cert",
            &client_cert,
            "--client-key",
            &client_key,
        ],
    );
}

/// A TLS port that accepts, reads the ClientHello and never answers, holding each
/// connection until `done` is set (bounded: the listener thread stops after `hold`).
fn stalling_listener(
    hold: Duration,
    done: Arc<std::sync::atomic::AtomicBool>,
) -> (SocketAddr, std::thread::JoinHandle<usize>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let addr = listener.local_addr().unwrap();
    let thread = std::thread::spawn(move || {
        let until = Instant::now() + hold;
        let mut held = Vec::new();
        let mut hellos = 0;
        while Instant::now() < until && !done.load(std::sync::atomic::Ordering::Relaxed) {
            match listener.accept() {
                Ok((mut sock, _)) => {
                    use std::io::Read;
                    sock.set_nonblocking(false).unwrap();
                    sock.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
                    let mut hello = [0u8; 5];
                    if sock.read_exact(&mut hello).is_ok() && hello[0] == 0x16 {
                        hellos += 1;
                    }
                    held.push(sock);
                }
                Err(_) => std::thread::sleep(Duration::from_millis(2)),
            }
        }
        hellos
    });
    (addr, thread)
}

#[test]
fn server_stalling_mid_handshake_ends_each_call_within_its_timeout() {
    let s = server(&[]);
    let ca = generated_ca(&s);
    let transports = ["tcp-connect", "http-fresh", "h2", "grpc-mux", "curl-fresh"];
    let timeout = Duration::from_millis(300);
    // Each call waits for its timeout; the listener holds what it accepted until the run
    // is done (or for ten times the longest it should take), then lets go.
    let expected = timeout * (CALLS as u32) * transports.len() as u32;
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (stall, listener) = stalling_listener(expected * 10, done.clone());
    let ports = [
        ("--http-port", s.http.port()),
        ("--tls-port", stall.port()),
        ("--https-port", stall.port()),
    ];
    let args = ["--security", "tls13", "--ca", &ca, "--timeout", "300ms"];
    let out = client(&ports, &transports, &args);
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    all_failed_as(&out, "tls_handshake_timeout");
    assert!(
        out.took < expected * 10,
        "bounded by --timeout: {:?} for {CALLS} calls on {} transports",
        out.took,
        transports.len()
    );
    let hellos = listener.join().unwrap();
    assert!(
        hellos >= CALLS as usize * transports.len(),
        "every call sent its ClientHello: {hellos}"
    );
}

/// The certificate chain the server at `addr` presents, verified against `ca` as `name`;
/// the handshake's error when it does not verify.
fn handshake_as(addr: SocketAddr, ca: &Path, name: &str) -> Result<Vec<u8>, rustls::Error> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, ServerName};
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_file_iter(ca).unwrap() {
        roots.add(cert.unwrap()).unwrap();
    }
    let verifier = rustls::client::WebPkiServerVerifier::builder_with_provider(
        Arc::new(roots),
        provider.clone(),
    )
    .build()
    .unwrap();
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_webpki_verifier(verifier)
        .with_no_client_auth();
    let server_name = ServerName::try_from(name.to_string()).unwrap();
    let mut conn = rustls::ClientConnection::new(Arc::new(config), server_name).unwrap();
    let mut sock = std::net::TcpStream::connect_timeout(&addr, common::IO_TIMEOUT).unwrap();
    sock.set_read_timeout(Some(common::IO_TIMEOUT)).unwrap();
    while conn.is_handshaking() {
        if let Err(e) = conn.complete_io(&mut sock) {
            return Err(e
                .get_ref()
                .and_then(|i| i.downcast_ref::<rustls::Error>())
                .cloned()
                .unwrap_or_else(|| rustls::Error::General(e.to_string())));
        }
    }
    Ok(conn.peer_certificates().unwrap()[0].to_vec())
}

#[test]
fn generated_ca_verifies_the_leaf_for_exactly_the_names_printed() {
    let dir = Scratch::new("gen");
    let ca_out = dir.0.join("ca.pem");
    let s = server(&[
        "--ca-out",
        ca_out.to_str().unwrap(),
        "--dns-name",
        "echo.example.test",
    ]);
    let line = s.ca_line.clone().unwrap();
    let words: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(words[0], "ca", "{line}");
    assert_eq!(Path::new(words[1]), ca_out, "{line}");
    assert_eq!(words[2], "names", "{line}");
    let printed: Vec<&str> = words[3].split(',').collect();
    assert!(printed.contains(&"echo.example.test") && printed.contains(&"127.0.0.1"));
    let addr = s.tls.unwrap();
    let mut leaf = None;
    for name in &printed {
        let der = handshake_as(addr, &ca_out, name)
            .unwrap_or_else(|e| panic!("the leaf does not verify as {name}: {e}"));
        leaf = Some(der);
    }
    // Names not printed are not covered.
    for name in ["other.example.test", "127.0.0.2"] {
        let e = handshake_as(addr, &ca_out, name).expect_err(name);
        assert!(
            matches!(
                e,
                rustls::Error::InvalidCertificate(
                    rustls::CertificateError::NotValidForName
                        | rustls::CertificateError::NotValidForNameContext { .. }
                )
            ),
            "{name}: {e}"
        );
    }
    // And the leaf names no more than were printed: its subjectAltName, read by OpenSSL.
    let der = dir.0.join("leaf.der");
    std::fs::write(&der, leaf.unwrap()).unwrap();
    let out = Command::new("openssl")
        .args([
            "x509",
            "-inform",
            "DER",
            "-noout",
            "-ext",
            "subjectAltName",
            "-in",
        ])
        .arg(&der)
        .output()
        .expect("openssl runs");
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    let mut sans: Vec<String> = text
        .lines()
        .skip(1)
        .flat_map(|l| l.split(','))
        .filter_map(|e| e.trim().split_once(':').map(|(_, v)| v.to_string()))
        .collect();
    let mut want: Vec<String> = printed.iter().map(|n| n.to_string()).collect();
    sans.sort();
    want.sort();
    assert_eq!(sans, want, "{text}");
}

/// The one test that turns verification off: `--insecure` calls a server whose CA the
/// client was not given, says so on stderr, and records `insecure: true`.
#[test]
fn insecure_accepts_an_untrusted_certificate_loudly() {
    let s = server(&[]);
    let out = client(
        &ports_of(&s),
        &["tcp-connect", "http-fresh", "curl-fresh"],
        &["--security", "tls13", "--insecure"],
    );
    assert!(
        out.stderr.to_lowercase().contains("insecure"),
        "a warning: {}",
        out.stderr
    );
    for r in out.report["runs"].as_array().unwrap() {
        assert_eq!(r["ok"], CALLS, "{r}");
        assert_eq!(r["insecure"], true, "{r}");
    }
    // Without it, the same client refuses the same server: nothing else skips verifying.
    let dir = Scratch::new("insecure");
    let [other_ca, _, _] = certs(&dir, "other", &["127.0.0.1"], LeafUse::Server, false);
    let refused = client(
        &ports_of(&s),
        &["tcp-connect"],
        &["--security", "tls13", "--ca", &other_ca],
    );
    all_failed_as(&refused, "tls_untrusted_cert");
}

/// No other test turns verification off: `--insecure` appears in this file's one test and
/// nowhere else under tests/.
#[test]
fn only_the_insecure_test_skips_verification() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests");
    let mut users = Vec::new();
    let mut stack = vec![dir];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let text = std::fs::read_to_string(&path).unwrap();
                let flag = ["--", "insecure\""].concat();
                let danger = [".dang", "erous()"].concat();
                let n = text.matches(&flag).count() + text.matches(&danger).count();
                if n > 0 {
                    users.push((path.file_name().unwrap().to_string_lossy().into_owned(), n));
                }
            }
        }
    }
    assert_eq!(users, vec![("tls_failures.rs".to_string(), 1)]);
}
