//! TLS end to end: every TLS mode on every TCP transport against the embedded server,
//! and the server's handshake counters proving what kind of handshakes happened.

use rpcbench::transport::TransportKind;
use serde_json::Value;
use std::process::Command;

/// Runs `rpcbench` with `args` and `--format json`; returns the report.
fn run(args: &[&str]) -> Value {
    let out = Command::new(env!("CARGO_BIN_EXE_rpcbench"))
        .args(["--format", "json", "--no-progress", "--names", "ip"])
        .args(args)
        .output()
        .expect("rpcbench runs");
    assert!(
        out.status.success(),
        "rpcbench {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("JSON report")
}

/// Every TCP transport, so each mode covers all of them.
const TCP_TRANSPORTS: &str = "tcp,tcp-connect,http-fresh,http-keepalive,curl-reuse,curl-fresh,h2,h2-mux,grpc,grpc-mux,grpc-stream";

/// 1,000 calls on every TCP transport in `mode`: none lost, none failed, each run
/// recorded under its security mode with the version it asked for.
fn every_transport(mode: &str, version: &str) {
    let report = run(&[
        "-n",
        "1000",
        "--security",
        mode,
        "--transports",
        TCP_TRANSPORTS,
    ]);
    let runs = report["runs"].as_array().unwrap();
    // Every transport, and h2 and grpc again beside h2-mux and grpc-mux at the
    // multiplexing comparison's workers.
    let expected = if mode.ends_with("-resume") { 12 } else { 13 };
    assert_eq!(
        runs.len(),
        expected,
        "{mode}: curl-fresh skips resume modes"
    );
    for r in runs {
        let name = r["transport"].as_str().unwrap();
        assert_eq!(r["security"], mode, "{name}");
        assert_eq!(r["calls"], 1000, "{name}");
        assert_eq!(r["ok"], 1000, "{name} {mode}: {r}");
        assert!(r["insecure"].is_null(), "{name}: verification stays on");
        if !name.starts_with("curl") {
            assert_eq!(r["tls"]["version"], version, "{name}");
        }
        if ["tcp-connect", "http-fresh", "curl-fresh"].contains(&name) {
            // A connection per call: every measured call has its handshake. Persistent
            // transports open theirs in the warm-up, which is out of the figures.
            assert!(r["phases_us"]["tls"].is_object(), "{name}: a tls phase");
        }
    }
}

#[test]
fn tls13_on_every_tcp_transport() {
    every_transport("tls13", "TLSv1_3");
}

#[test]
fn tls13_resume_on_every_tcp_transport() {
    every_transport("tls13-resume", "TLSv1_3");
}

#[test]
fn tls12_on_every_tcp_transport() {
    every_transport("tls12", "TLSv1_2");
}

#[test]
fn tls12_resume_on_every_tcp_transport() {
    every_transport("tls12-resume", "TLSv1_2");
}

#[test]
fn mtls_on_every_tcp_transport() {
    every_transport("mtls", "TLSv1_3");
}

/// The server's counters prove the handshakes: a full one per connection in the full
/// modes, and every connection but the first resumed in the resume modes.
#[test]
fn handshake_counters_match_connects() {
    for (transport, listener) in [
        ("tcp-connect", "tls_handshakes"),
        ("http-fresh", "https_handshakes"),
    ] {
        for mode in ["tls13", "tls12", "mtls", "tls13-resume", "tls12-resume"] {
            let report = run(&["-n", "300", "--security", mode, "--transports", transport]);
            let r = &report["runs"][0];
            let connects = r["connects"].as_u64().unwrap();
            // Each round starts a client of its own, whose first handshake is full.
            let rounds = report["config"]["rounds"].as_u64().unwrap();
            let hs = &report["server"][listener];
            let (full, resumed) = (
                hs["full"].as_u64().unwrap(),
                hs["resumed"].as_u64().unwrap(),
            );
            if mode.ends_with("-resume") {
                assert_eq!(
                    (full, resumed),
                    (rounds, connects - rounds),
                    "{transport} {mode}"
                );
            } else {
                assert_eq!((full, resumed), (connects, 0), "{transport} {mode}");
            }
        }
    }
}

/// udp and unix stay plain: a TLS mode leaves them out and says why.
#[test]
fn datagrams_and_unix_stay_plain() {
    let out = Command::new(env!("CARGO_BIN_EXE_rpcbench"))
        .args([
            "-n",
            "50",
            "--no-progress",
            "--names",
            "ip",
            "--security",
            "tls13",
        ])
        .args(["--transports", "tcp,udp,unix"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout) + String::from_utf8_lossy(&out.stderr);
    assert!(text.contains("DTLS is out of scope"), "{text}");
}

/// The findings say what TLS costs from the run's own figures, each sentence comparing like
/// with like: the handshake adds `tls13 − plain` per fresh call, resumption wins back
/// `tls13 − tls13-resume`, mTLS adds `mtls − tls13`, and a sentence about plain runs (what
/// a kept connection saves) quotes the plain means even with TLS runs of the same transport
/// beside them in the report.
#[test]
fn findings_price_tls_from_the_runs() {
    use rpcbench::analysis::findings::{Delta, Finding, TlsPrice, Versus};
    let report = run(&[
        "-n",
        "200",
        "--warmup",
        "10",
        "--security",
        // plain last, so a lookup that ignored the security mode would find a TLS run.
        "tls13,tls13-resume,tls12,tls12-resume,mtls,plain",
        "--transports",
        "tcp,tcp-connect",
    ]);
    let report: rpcbench::report::Report = serde_json::from_value(report).unwrap();
    let run_of = |t: TransportKind, s: &str| {
        report
            .runs
            .iter()
            .find(|r| r.transport == t && r.security.name() == s)
            .unwrap_or_else(|| panic!("a run of {t} {s}"))
    };
    let mean = |t, s: &str| run_of(t, s).latency_us.unwrap().mean;
    // What a finding must say a pair differs by: the difference of the means, or none
    // when they lie within their noise (the runs' own spreads).
    let differ = |t, a: &str, b: &str| rpcbench::physics::runs_differ(run_of(t, a), run_of(t, b));
    let delta = |t, a: &str, b: &str| {
        if differ(t, a, b) {
            Delta::By(mean(t, a) - mean(t, b))
        } else {
            Delta::NoDifference
        }
    };
    let versus = |t, a: &str, b: &str| {
        if differ(t, a, b) {
            Versus::Times(mean(t, a) / mean(t, b))
        } else {
            Versus::NoDifference
        }
    };
    let findings = rpcbench::analysis::findings(&report, &[], None);
    let tc = TransportKind::TcpConnect;
    let only = |parts: &[TlsPrice]| -> TlsPrice {
        assert_eq!(
            parts.len(),
            1,
            "tcp-connect is the one fresh transport: {parts:?}"
        );
        parts[0]
    };
    let find = |pick: &dyn Fn(&Finding) -> bool| {
        findings
            .iter()
            .find(|f| pick(f))
            .unwrap_or_else(|| panic!("{findings:#?}"))
            .clone()
    };
    let Finding::TlsHandshake(handshake) = find(&|f| matches!(f, Finding::TlsHandshake(_))) else {
        unreachable!()
    };
    let h = only(&handshake);
    assert_eq!(
        (h.transport, h.base_us, h.priced_us, h.delta),
        (
            tc,
            mean(tc, "plain"),
            mean(tc, "tls13"),
            delta(tc, "tls13", "plain")
        )
    );
    assert!(h.handshake_us.is_some_and(|t| t > 0.0), "{h:?}");
    let Finding::TlsResumption(resumed) = find(&|f| matches!(f, Finding::TlsResumption(_))) else {
        unreachable!()
    };
    let r = only(&resumed);
    assert_eq!(
        (r.base_us, r.priced_us, r.delta),
        (
            mean(tc, "tls13"),
            mean(tc, "tls13-resume"),
            delta(tc, "tls13", "tls13-resume")
        )
    );
    let Finding::TlsVersions(versions) = find(&|f| matches!(f, Finding::TlsVersions(_))) else {
        unreachable!()
    };
    assert_eq!(versions.len(), 1);
    assert_eq!(
        (versions[0].full, versions[0].resumed),
        (
            Some(versus(tc, "tls12", "tls13")),
            Some(versus(tc, "tls12-resume", "tls13-resume"))
        )
    );
    let Finding::ClientCertificate(mtls) = find(&|f| matches!(f, Finding::ClientCertificate(_)))
    else {
        unreachable!()
    };
    let m = only(&mtls);
    assert_eq!(
        (m.base_us, m.priced_us, m.delta),
        (
            mean(tc, "tls13"),
            mean(tc, "mtls"),
            delta(tc, "mtls", "tls13")
        )
    );
    let Finding::TlsKept(kept) = find(&|f| matches!(f, Finding::TlsKept(_))) else {
        unreachable!()
    };
    let k = only(&kept);
    let tcp = TransportKind::Tcp;
    assert_eq!(
        (k.transport, k.base_us, k.priced_us),
        (tcp, mean(tcp, "plain"), mean(tcp, "tls13"))
    );
    // The plain findings read the plain runs, not the TLS ones beside them.
    let Finding::Reuse(reuse) = find(&|f| matches!(f, Finding::Reuse(_))) else {
        unreachable!()
    };
    assert_eq!(
        (reuse[0].kept.mean_us, reuse[0].fresh.mean_us),
        (mean(tcp, "plain"), mean(tc, "plain"))
    );
}

/// The HTTP/1.1 transports stay HTTP/1.1 over TLS (ALPN offers http/1.1 only, for libcurl
/// too), so a security mode changes the security and nothing else; h2 speaks HTTP/2.
#[test]
fn http1_transports_stay_http1_over_tls() {
    for (transport, h2) in [
        ("http-fresh", false),
        ("http-keepalive", false),
        ("curl-fresh", false),
        ("curl-reuse", false),
        ("h2", true),
    ] {
        let report = run(&["-n", "50", "--security", "tls13", "--transports", transport]);
        let r = &report["runs"][0];
        assert_eq!(r["ok"], 50, "{transport}: {r}");
        let connects = r["connects"].as_u64().unwrap();
        let server = &report["server"];
        assert_eq!(
            server["https"]["connections_total"].as_u64(),
            Some(connects),
            "{transport}: every connection on the HTTPS port"
        );
        let h2_connections = server["http2"]["connections_total"].as_u64().unwrap();
        assert_eq!(
            h2_connections,
            if h2 { connects } else { 0 },
            "{transport}: HTTP/2 connections"
        );
    }
}
