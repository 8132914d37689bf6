//! The round-trip model against physics: rpcbench in one namespace calls rpcbench-echo in
//! another across `rpcbench-link`, at 0, 50 and 100 ms RTT. Each transport's mean at RTT D
//! must be its mean at 0 plus the protocol's round trips times D (within 5% + 100 µs), the
//! least-squares k over the three RTTs must be the protocol's within 0.1, and
//! `rpcbench report` must fit the same and write it on every run. With 1% loss on the
//! link, every call is still counted once, and UDP cannot have lost more calls than the
//! link dropped packets.
//!
//! The RTTs are 50 and 100 ms, not 2: a 2-vCPU VM takes a few hundred µs to wake each
//! party of a round trip after an idle wait, and the zero-RTT run that gives c never idles,
//! so it never pays it. Measured, that is 0.4–0.6 ms per round trip here and up to 1.1 ms
//! on CI's machine (curl-fresh, 2.3 ms over its two round trips): a third of a round trip
//! at 2 ms, and at 20 ms already 5.6%, past the 5% margin. At 50 ms it is under half of it.
//!
//! Needs root for network namespaces and TUN:
//! `cargo test --release --test link_model -- --include-ignored`.

mod common;

use common::link::{LinkProcess, count};
use common::netns::Netns;
use rpcbench::model;
use rpcbench::report::Report;
use rpcbench::transport::TransportKind;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};

/// The link RTTs the model is measured at, ms: zero for c, two at which a round trip
/// dwarfs the host's wake-up cost.
const RTTS_MS: [u32; 3] = [0, 50, 100];
/// Measured calls per transport and RTT: a mean over 30 calls is steady to well under the
/// 5% + 100 µs margin (a 30 ms stall of the host moves it by 1 ms of k=1's 2.6 ms at
/// 50 ms, and a transport off the line is measured once more), and the slowest RTT costs
/// 33 × 100 ms × 15 round trips ≈ 50 s.
const CALLS: u64 = 30;
/// Measured calls per transport at zero RTT, where c comes from: a call takes well under a
/// millisecond there, and one stall of the host in 1000 calls moves the mean by little.
const ZERO_RTT_CALLS: u64 = 1000;
/// Warm-up calls per transport: connects and first calls out of the figures.
const WARMUP: u64 = 3;
/// Calls per transport in the loss test: at 1% loss per packet some calls meet a drop.
const LOSS_CALLS: u64 = 150;
/// The UDP timeout under loss: a lost datagram costs this, not the default 5 s. Far above
/// the 2 ms RTT of that link, so a reply that comes is never late.
const UDP_TIMEOUT: &str = "300ms";

/// Every transport that crosses a network (`unix` stays on its host).
fn networked() -> Vec<TransportKind> {
    TransportKind::ALL
        .into_iter()
        .filter(|&t| model::base_round_trips(t).is_some())
        .collect()
}

/// `cmd` under SCHED_FIFO 40 (below the link's 50) and on CPU 0, where chrt is allowed:
/// the host is loaded by compilers, and a side waiting for a CPU measures the host.
fn pinned(ns: &str, bin: &str) -> Command {
    let rt = Command::new("chrt")
        .args(["-f", "40", "true"])
        .status()
        .is_ok_and(|s| s.success());
    let mut c = Command::new("ip");
    c.args(["netns", "exec", ns]);
    if rt {
        c.args(["chrt", "-f", "40"]);
    }
    c.args(["taskset", "-c", "0", bin]);
    c
}

/// rpcbench-echo in namespace `ns` on 10.`net`.0.1 (raw TCP 7001, HTTP 7080, UDP 7002,
/// QUIC 7443), killed by its PID on drop, and its net (whose CA file goes with it).
struct Echo(Child, u8);

impl Echo {
    /// Starts it and waits for its four listening lines; its CA goes to [`ca_path`].
    fn start(ns: &str, net: u8) -> Echo {
        Echo::start_with(ns, net, &[])
    }

    /// [`Echo::start`], with `more` arguments.
    fn start_with(ns: &str, net: u8, more: &[&str]) -> Echo {
        let ip = format!("10.{net}.0.1");
        let mut child = pinned(ns, env!("CARGO_BIN_EXE_rpcbench-echo"))
            .args(["--threads", "1"])
            .args(more)
            .args(["--tcp", &format!("{ip}:7001")])
            .args(["--http", &format!("{ip}:7080")])
            .args(["--udp", &format!("{ip}:7002")])
            .args(["--quic", &format!("{ip}:7443")])
            .arg("--ca-out")
            .arg(ca_path(net))
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start rpcbench-echo");
        let mut reader = BufReader::new(child.stdout.take().unwrap());
        let mut listening = 0;
        let mut line = String::new();
        while listening < 4 {
            line.clear();
            assert!(
                reader.read_line(&mut line).unwrap() > 0,
                "rpcbench-echo ended before listening"
            );
            listening += usize::from(line.starts_with("listening "));
        }
        // Its later output (the totals at exit) is drained, so a write never fails.
        std::thread::spawn(move || std::io::copy(&mut reader, &mut std::io::sink()));
        Echo(child, net)
    }
}

impl Drop for Echo {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
        let _ = std::fs::remove_file(ca_path(self.1));
    }
}

/// Where the echo server of test bed `net` writes the CA its QUIC listener's certificate
/// is signed by, which the client verifies against.
fn ca_path(net: u8) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("rpcbench-link-{net}-{}-ca.pem", std::process::id()))
}

/// Runs rpcbench in `ns` against 10.`net`.0.1 with `args`, writing its JSON to `out`;
/// returns the report and the exit status.
fn rpcbench(ns: &str, net: u8, args: &[&str], out: &Path) -> (Report, Option<i32>) {
    let output = pinned(ns, env!("CARGO_BIN_EXE_rpcbench"))
        .args(["--target", &format!("10.{net}.0.1")])
        .args([
            "--tcp-port",
            "7001",
            "--http-port",
            "7080",
            "--udp-port",
            "7002",
            "--quic-port",
            "7443",
        ])
        .arg("--ca")
        .arg(ca_path(net))
        .args(["--names", "ip", "--no-progress", "--format", "json"])
        .args(args)
        .arg("--out")
        .arg(out)
        .stderr(Stdio::inherit())
        .output()
        .expect("run rpcbench");
    let report: Report = serde_json::from_slice(&std::fs::read(out).unwrap())
        .unwrap_or_else(|e| panic!("rpcbench {args:?} wrote no report: {e}"));
    (report, output.status.code())
}

/// Every run's calls are each counted once: `calls = ok + lost + mismatched + errors`.
fn assert_accounting(report: &Report, calls: u64) {
    for r in &report.runs {
        assert_eq!(r.calls, calls, "{} made every call", r.transport);
        assert_eq!(
            r.ok + r.lost + r.mismatched + r.error_total(),
            r.calls,
            "{}: each call ok, lost, mismatched or an error, once",
            r.transport
        );
    }
}

/// A scratch directory for one test's files, removed on drop.
struct Scratch(std::path::PathBuf);

impl Scratch {
    fn new(tag: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!("rpcbench-model-{}-{tag}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }

    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Held by each test for its whole run: both pin their sides to CPU 0, and two at once
/// would measure each other.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn assert_root() {
    assert!(
        nix::unistd::Uid::effective().is_root(),
        "the link needs root for network namespaces and TUN"
    );
}

/// What each test holds for its run: the lock of [`ONE_AT_A_TIME`], the server's and the
/// client's namespaces (`rbm-TAGs`, `rbm-TAGc`) and a scratch directory.
struct Bed {
    _one: std::sync::MutexGuard<'static, ()>,
    srv: Netns,
    cli: Netns,
    dir: Scratch,
}

impl Bed {
    fn new(tag: &str) -> Bed {
        let one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
        assert_root();
        Bed {
            _one: one,
            srv: Netns::create(&format!("rbm-{tag}s"), ""),
            cli: Netns::create(&format!("rbm-{tag}c"), ""),
            dir: Scratch::new(tag),
        }
    }
}

/// True when run `r` (across the link, at its `link_rtt_us`) has the mean the model
/// says: the zero-RTT run's mean plus the protocol's round trips times the RTT, within
/// [`model::rtt_expectation`]'s margin.
fn on_the_line(zero: &Report, r: &rpcbench::report::RunRecord) -> bool {
    let c = zero
        .runs
        .iter()
        .find(|z| z.transport == r.transport)
        .and_then(|z| z.latency_us)
        .map(|l| l.mean);
    let k = model::expected_for(r);
    match (c, k, r.link_rtt_us, r.latency_us) {
        (Some(c), Some(k), Some(d), Some(l)) => {
            let (expected, margin) = model::rtt_expectation(c, k, d);
            (l.mean - expected).abs() <= margin
        }
        _ => false,
    }
}

/// rpcbench's arguments for a run of the model: `transports`, `calls` after the warm-up,
/// the link's `rtt` recorded, one worker, and `more`.
fn model_args(transports: &str, calls: u64, rtt: u32, more: &[&str]) -> Vec<String> {
    let mut args: Vec<String> = [
        "--transports",
        transports,
        "-n",
        &calls.to_string(),
        "--warmup",
        &WARMUP.to_string(),
        "--link-rtt",
        &format!("{rtt}ms"),
        // One worker for every transport, h2-mux and grpc-mux too: the model is c + k x D
        // for one call at a time (without -c the run adds rows at 16 workers, whose calls
        // queue on the link and whose c is not this).
        "-c",
        "1",
    ]
    .map(String::from)
    .to_vec();
    args.extend(more.iter().map(|s| s.to_string()));
    args
}

fn list(kinds: &[TransportKind]) -> String {
    kinds.iter().map(|k| k.name()).collect::<Vec<_>>().join(",")
}

#[test]
#[ignore = "needs root"]
fn means_are_c_plus_k_rtt_and_the_fitted_k_is_the_protocols() {
    let Bed { srv, cli, dir, .. } = &Bed::new("t1");
    let net = 79;
    let transports = list(&networked());
    let mut reports = Vec::new();
    let mut files = Vec::new();
    for rtt in RTTS_MS {
        // Half the RTT each way.
        let one_way = format!("{}us", rtt * 500);
        let link = LinkProcess::start(&srv.name, &cli.name, net, &["--delay", &one_way]);
        let echo = Echo::start(&srv.name, net);
        let out = dir.path().join(format!("rtt-{rtt}ms.json"));
        // Zero-RTT calls take a fraction of a millisecond: many of them make c steady.
        let calls = if rtt == 0 { ZERO_RTT_CALLS } else { CALLS };
        let run = |transports: &str, out: &Path| {
            let args = model_args(transports, calls, rtt, &[]);
            rpcbench(
                &cli.name,
                net,
                &args.iter().map(String::as_str).collect::<Vec<_>>(),
                out,
            )
        };
        let (mut report, status) = run(&transports, &out);
        assert_eq!(status, Some(0), "every call verified at {rtt} ms RTT");
        // A stall of the VM (tens of ms, seen at p99 on a loaded host) moves a mean over
        // 40 calls by more than the margin; the protocol's extra round trip comes back
        // every time, the host's stall rarely does: a transport off the line is measured
        // once more, and that second run is judged.
        if let Some(zero) = reports.first() {
            let off: Vec<TransportKind> = report
                .runs
                .iter()
                .filter(|r| !on_the_line(zero, r))
                .map(|r| r.transport)
                .collect();
            if !off.is_empty() {
                eprintln!("measured once more at {rtt} ms: {}", list(&off));
                let again = dir.path().join(format!("rtt-{rtt}ms-again.json"));
                let (second, status) = run(&list(&off), &again);
                assert_eq!(status, Some(0), "every call verified at {rtt} ms RTT");
                for r in second.runs {
                    let at = report.runs.iter().position(|x| x.transport == r.transport);
                    report.runs[at.unwrap()] = r;
                }
                std::fs::write(&out, serde_json::to_vec(&report).unwrap()).unwrap();
            }
        }
        drop(echo);
        let (code, stats) = link.stop();
        assert_eq!(code, Some(0), "the link exits 0 on SIGINT");
        assert_accounting(&report, calls);
        for s in &stats {
            assert_eq!(count(s, "lost"), 0, "no loss asked: {s:?}");
        }
        for r in &report.runs {
            assert_eq!(r.link_rtt_us, Some(f64::from(rtt) * 1e3), "{}", r.transport);
        }
        reports.push(report);
        files.push(out);
    }
    // At each RTT of 2 ms or more: mean = c + k × D, c from the zero-delay run.
    let zero = &reports[0];
    for (report, rtt) in reports.iter().zip(RTTS_MS).skip(1) {
        let d = f64::from(rtt) * 1e3;
        assert!(d >= model::RTT_CHECK_MIN_US);
        for r in &report.runs {
            let k = model::expected_for(r).unwrap();
            let c = zero
                .runs
                .iter()
                .find(|z| z.transport == r.transport)
                .and_then(|z| z.latency_us)
                .unwrap()
                .mean;
            let (expected, margin) = model::rtt_expectation(c, k, d);
            let mean = r.latency_us.unwrap().mean;
            eprintln!(
                "{} at {rtt} ms: mean {mean:.0} µs, expected {expected:.0} ± {margin:.0} (c {c:.0}, k {k})",
                r.transport
            );
            assert!(
                (mean - expected).abs() <= margin,
                "{} at {rtt} ms RTT: mean {mean:.0} µs, expected {expected:.0} ± {margin:.0} µs",
                r.transport
            );
        }
    }
    // The fitted k of every networked transport is the protocol's, within 0.1.
    let refs: Vec<&Report> = reports.iter().collect();
    let fits = model::fit_reports(&refs);
    assert_eq!(fits.len(), networked().len(), "a fit per transport");
    for f in &fits {
        eprintln!(
            "fit {}: k {:.3} (expected {:?}), c {:.0} µs",
            f.key.transport, f.round_trips_per_call, f.expected, f.fixed_cost_us
        );
        let gap = f.gap().unwrap();
        assert!(
            gap.abs() <= model::K_GAP,
            "{}: k {:.3} where the protocol needs {:?}",
            f.key.transport,
            f.round_trips_per_call,
            f.expected
        );
    }
    // rpcbench report fits the same, passes its link checks, and writes k on every run.
    let site = dir.path().join("site");
    let status = Command::new(env!("CARGO_BIN_EXE_rpcbench"))
        .arg("report")
        .args(&files)
        .arg("--out")
        .arg(&site)
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert_eq!(status.code(), Some(0), "every truth check passes");
    let fitted: Vec<Report> =
        serde_json::from_slice(&std::fs::read(site.join("runs.json")).unwrap()).unwrap();
    assert_eq!(fitted.len(), RTTS_MS.len());
    for r in fitted.iter().flat_map(|f| &f.runs) {
        let fit = fits
            .iter()
            .find(|f| f.key.transport == r.transport)
            .unwrap();
        assert_eq!(r.round_trips_per_call, Some(fit.round_trips_per_call));
        assert_eq!(r.fixed_cost_us, Some(fit.fixed_cost_us));
    }
    let readme = std::fs::read_to_string(site.join("README.md")).unwrap();
    assert!(readme.contains("## Round trips per call") && readme.contains("rtt.svg"));
    assert!(site.join("rtt.svg").exists());
}

#[test]
#[ignore = "needs root"]
fn one_percent_loss_keeps_every_call_counted_once() {
    let Bed { srv, cli, dir, .. } = &Bed::new("t2");
    let net = 80;
    let link = LinkProcess::start(
        &srv.name,
        &cli.name,
        net,
        &["--delay", "1ms", "--loss", "1%"],
    );
    let echo = Echo::start(&srv.name, net);
    let n = LOSS_CALLS.to_string();
    let tcp = list(&[
        TransportKind::Tcp,
        TransportKind::TcpConnect,
        TransportKind::HttpKeepalive,
        TransportKind::HttpFresh,
        TransportKind::H2,
        TransportKind::Grpc,
    ]);
    // A lost segment is retransmitted by TCP (200 ms at least, a SYN 1 s): the default
    // 5 s timeout outlasts two retransmissions, so those calls end ok, only later.
    let (tcp_report, _) = rpcbench(
        &cli.name,
        net,
        &[
            "--transports",
            &tcp,
            "-n",
            &n,
            "--warmup",
            "5",
            "--max-lost",
            &n,
            // A lost probe would read as a firewall and stop the run.
            "--no-preflight",
        ],
        &dir.path().join("tcp.json"),
    );
    let (udp_report, _) = rpcbench(
        &cli.name,
        net,
        &[
            "--transports",
            "udp",
            "-n",
            &n,
            "--warmup",
            "5",
            "--timeout",
            UDP_TIMEOUT,
            "--max-lost",
            &n,
            "--no-preflight",
        ],
        &dir.path().join("udp.json"),
    );
    drop(echo);
    let (code, stats) = link.stop();
    assert_eq!(code, Some(0), "the link exits 0 on SIGINT");
    assert_accounting(&tcp_report, LOSS_CALLS);
    assert_accounting(&udp_report, LOSS_CALLS);
    let dropped: u64 = stats.iter().map(|s| count(s, "lost")).sum();
    let udp = &udp_report.runs[0];
    eprintln!(
        "link dropped {dropped}; udp lost {} of {}; tcp runs: {}",
        udp.lost,
        udp.calls,
        tcp_report
            .runs
            .iter()
            .map(|r| format!("{} ok {} lost {}", r.transport, r.ok, r.lost))
            .collect::<Vec<_>>()
            .join(", ")
    );
    assert!(dropped > 0, "1% of thousands of packets: some dropped");
    // A lost UDP call is a dropped request or reply: never more lost calls than drops.
    assert!(
        udp.lost <= dropped,
        "udp lost {} calls, the link dropped {dropped} packets",
        udp.lost
    );
    assert_eq!(
        udp.late_replies, 0,
        "a 2 ms RTT never outlasts {UDP_TIMEOUT}"
    );
}

/// 0-RTT and Retry against physics: `quic-connect` and `h3-fresh` at 0 and 50 ms RTT, in
/// `tls13` (a full handshake, then the request: k = 2) and `tls13-0rtt` (the request in
/// early data with the resumed handshake, answered at once: k = 1), and `quic-connect`
/// against a server that sends every new client a Retry first (`--quic-retry`: k = 3).
/// Every measured call sent its request in early data and the server took it (the
/// warm-up leaves tickets, and each connection leaves two), and every retried one was
/// seen; each mean is c + k × RTT within the model's margin, and the fitted k is the
/// protocol's within 0.1.
#[test]
#[ignore = "needs root"]
fn early_data_takes_a_round_trip_off_a_new_quic_connection_and_a_retry_adds_one() {
    let Bed { srv, cli, dir, .. } = &Bed::new("t3");
    let net = 81;
    let mut reports = Vec::new();
    let mut retried = Vec::new();
    for rtt in [0u32, 50] {
        let one_way = format!("{}us", rtt * 500);
        let link = LinkProcess::start(&srv.name, &cli.name, net, &["--delay", &one_way]);
        let echo = Echo::start(&srv.name, net);
        let calls = if rtt == 0 { ZERO_RTT_CALLS } else { CALLS };
        let run = |security: &str, out: &Path| {
            let args = model_args(
                "quic-connect,h3-fresh",
                calls,
                rtt,
                &["--security", security],
            );
            rpcbench(
                &cli.name,
                net,
                &args.iter().map(String::as_str).collect::<Vec<_>>(),
                out,
            )
        };
        let out = dir.path().join(format!("early-{rtt}ms.json"));
        let (mut report, status) = run("tls13,tls13-0rtt", &out);
        assert_eq!(status, Some(0), "every call verified at {rtt} ms RTT");
        // A run off the line (a stall of the host) is measured once more, in its mode.
        if let Some(zero) = reports.first() {
            let off: Vec<usize> = (0..report.runs.len())
                .filter(|&i| !on_the_line_in_mode(zero, &report.runs[i]))
                .collect();
            for i in off {
                let security = report.runs[i].security.name();
                eprintln!("measured once more at {rtt} ms: {security}");
                let again = dir.path().join(format!("early-{rtt}ms-{i}.json"));
                let (second, status) = run(security, &again);
                assert_eq!(status, Some(0));
                let key = report.runs[i].key();
                if let Some(r) = second.runs.into_iter().find(|r| r.key() == key) {
                    report.runs[i] = r;
                }
            }
        }
        drop(echo);
        // The same server, sending every new client a Retry first.
        let echo = Echo::start_with(&srv.name, net, &["--quic-retry"]);
        let args = model_args("quic-connect", calls, rtt, &[]);
        let out = dir.path().join(format!("retry-{rtt}ms.json"));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let (with_retry, status) = rpcbench(&cli.name, net, &args, &out);
        assert_eq!(status, Some(0), "every call verified at {rtt} ms RTT");
        drop(echo);
        assert_accounting(&with_retry, calls);
        assert_eq!(
            with_retry.runs[0].quic_retries,
            Some(calls),
            "one Retry a call"
        );
        retried.push(with_retry);
        let (code, _) = link.stop();
        assert_eq!(code, Some(0), "the link exits 0 on SIGINT");
        assert_accounting(&report, calls);
        assert_eq!(report.runs.len(), 4, "two transports in two modes");
        for r in &report.runs {
            let Some(z) = r.zero_rtt else {
                assert_eq!(
                    r.security.name(),
                    "tls13",
                    "{}: early data counted",
                    r.transport
                );
                continue;
            };
            assert_eq!(z.sent, calls, "{}: every call in early data", r.transport);
            assert_eq!(
                z.accepted, z.sent,
                "{}: every early data taken",
                r.transport
            );
        }
        reports.push(report);
    }
    let (zero, fifty) = (&reports[0], &reports[1]);
    for r in &fifty.runs {
        let k = model::expected_for(r).unwrap();
        assert_eq!(k, if r.zero_rtt.is_some() { 1.0 } else { 2.0 });
        assert!(
            on_the_line_in_mode(zero, r),
            "{} {}: mean {:?} µs off c + {k} × 50 ms",
            r.transport,
            r.security,
            r.latency_us.map(|l| l.mean)
        );
    }
    let r = &retried[1].runs[0];
    assert_eq!(
        model::expected_for(r),
        Some(3.0),
        "a Retry is a round trip more"
    );
    assert!(
        on_the_line(&retried[0], r),
        "retried quic-connect: mean {:?} µs off c + 3 × 50 ms",
        r.latency_us.map(|l| l.mean)
    );
    let fits = model::fit_reports(&[&retried[0], &retried[1]]);
    eprintln!("fit with a Retry: {fits:?}");
    assert_eq!(fits[0].expected, Some(3.0));
    assert!(fits[0].gap().unwrap().abs() <= model::K_GAP, "{fits:?}");
    let fits = model::fit_reports(&[zero, fifty]);
    assert_eq!(fits.len(), 4, "a fit per transport and mode");
    for f in &fits {
        eprintln!(
            "fit {} {}: k {:.3} (expected {:?})",
            f.key.transport, f.key.security, f.round_trips_per_call, f.expected
        );
        assert!(f.gap().unwrap().abs() <= model::K_GAP, "{f:?}");
    }
}

/// [`on_the_line`] for a run among runs of several security modes: c is the zero-RTT
/// run's of the same transport and mode.
fn on_the_line_in_mode(zero: &Report, r: &rpcbench::report::RunRecord) -> bool {
    let same = Report {
        runs: zero
            .runs
            .iter()
            .filter(|z| z.security == r.security)
            .cloned()
            .collect(),
        ..zero.clone()
    };
    on_the_line(&same, r)
}
