//! `rpcbench agent` as a process: its `/metrics` against what the echo server counted,
//! peer-list reloads, dead peers, bounded cost, stopping.
//!
//! The agents here probe fast (`--interval 100ms`) so a test sees dozens of probes in a
//! few seconds; every wait is a bounded poll of `/metrics`, never a sleep that has to be
//! long enough.

mod common;

use common::{EchoProcess, IO_TIMEOUT, curl_call};
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

/// The probe interval of the agents here.
const INTERVAL: Duration = Duration::from_millis(100);

/// Longest a condition polled on `/metrics` may take to come true: far over the few
/// intervals and reloads it needs.
const WITHIN: Duration = Duration::from_secs(20);

/// One sample: family-qualified name, labels, value.
type Sample = (String, BTreeMap<String, String>, f64);

/// A running agent, killed by its PID (and its peer file removed) when dropped.
struct Agent {
    child: Child,
    exited: Option<ExitStatus>,
    metrics: SocketAddr,
    dir: PathBuf,
    lines: mpsc::Receiver<String>,
}

impl Agent {
    /// Starts `rpcbench agent` on `127.0.0.1:0` with `peers` written to a file of its own
    /// and `extra` flags, and waits for its `listening metrics` line.
    fn start(peers: &str, extra: &[&str]) -> Agent {
        let dir = std::env::temp_dir().join(format!(
            "rpcbench-agent-test-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("peers.yaml");
        std::fs::write(&file, peers).unwrap();
        let mut child = Command::new(env!("CARGO_BIN_EXE_rpcbench"))
            .arg("agent")
            .arg("--peers")
            .arg(&file)
            .args(["--listen", "127.0.0.1:0", "--interval", "100ms"])
            .args(["--reload", "100ms"])
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("cannot start rpcbench agent");
        let (tx, lines) = mpsc::channel();
        let stdout = child.stdout.take().unwrap();
        let stderr = child.stderr.take().unwrap();
        let tx2 = tx.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let _ = tx2.send(format!("stderr: {line}"));
            }
        });
        let line = lines
            .recv_timeout(IO_TIMEOUT)
            .expect("the agent printed no listening line");
        let addr = line
            .strip_prefix("listening metrics ")
            .unwrap_or_else(|| panic!("unexpected first line {line:?}"));
        let metrics: SocketAddr = addr.parse().unwrap();
        assert_ne!(metrics.port(), 0);
        Agent {
            child,
            exited: None,
            metrics,
            dir,
            lines,
        }
    }

    /// The peer file the agent reads.
    fn peers_file(&self) -> PathBuf {
        self.dir.join("peers.yaml")
    }

    /// Replaces the peer file whole (write then rename, as a ConfigMap update does).
    fn write_peers(&self, text: &str) {
        let tmp = self.dir.join("peers.yaml.new");
        std::fs::write(&tmp, text).unwrap();
        std::fs::rename(&tmp, self.peers_file()).unwrap();
    }

    /// `GET /metrics`, the raw text.
    fn scrape_text(&self) -> String {
        let mut easy = curl::easy::Easy::new();
        let reply = curl_call(
            &mut easy,
            "GET",
            &format!("http://{}/metrics", self.metrics),
            None,
            &[],
        );
        assert_eq!(reply.status, 200);
        assert_eq!(
            reply.header("content-type"),
            Some("text/plain; version=0.0.4; charset=utf-8")
        );
        reply.text()
    }

    /// `GET /metrics`, parsed by the strict reader below.
    fn scrape(&self) -> Vec<Sample> {
        let text = self.scrape_text();
        parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"))
    }

    /// Scrapes until `done` holds for the samples (at most [`WITHIN`]), returns them.
    fn wait_for(&self, what: &str, done: impl Fn(&[Sample]) -> bool) -> Vec<Sample> {
        let deadline = Instant::now() + WITHIN;
        loop {
            let samples = self.scrape();
            if done(&samples) {
                return samples;
            }
            assert!(
                Instant::now() < deadline,
                "{what}: not within {WITHIN:?}; last scrape:\n{}",
                self.scrape_text()
            );
            std::thread::sleep(INTERVAL);
        }
    }

    /// Lines printed so far (stdout, and stderr prefixed `stderr: `).
    fn take_lines(&self) -> Vec<String> {
        self.lines.try_iter().collect()
    }

    /// The agent's resident memory in KiB.
    fn rss_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap();
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap()
    }

    /// Sends SIGTERM and waits (bounded) for the exit status.
    fn terminate(&mut self, within: Duration) -> Option<ExitStatus> {
        let pid = nix::unistd::Pid::from_raw(self.child.id() as i32);
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
        let deadline = Instant::now() + within;
        while Instant::now() < deadline {
            if let Some(status) = self.child.try_wait().unwrap() {
                self.exited = Some(status);
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        None
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        if self.exited.is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A strict reader of the text format: every sample follows its family's `# TYPE`, names
/// and labels are well formed, values are numbers.
fn parse(text: &str) -> Result<Vec<Sample>, String> {
    let mut family = String::new();
    let mut samples = Vec::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            family = rest.split(' ').next().unwrap_or("").to_string();
            continue;
        }
        if line.starts_with('#') {
            continue;
        }
        let (head, value) = line
            .rsplit_once(' ')
            .ok_or_else(|| format!("no value: {line:?}"))?;
        let value: f64 = match value {
            "+Inf" => f64::INFINITY,
            v => v.parse().map_err(|_| format!("bad value: {line:?}"))?,
        };
        let (name, labels) = match head.split_once('{') {
            None => (head, BTreeMap::new()),
            Some((name, rest)) => {
                let rest = rest
                    .strip_suffix('}')
                    .ok_or_else(|| format!("unclosed labels: {line:?}"))?;
                let mut labels = BTreeMap::new();
                let mut rest = rest;
                while !rest.is_empty() {
                    let (k, after) = rest
                        .split_once("=\"")
                        .ok_or_else(|| format!("bad label: {line:?}"))?;
                    let mut value = String::new();
                    let mut chars = after.char_indices();
                    let end = loop {
                        match chars.next() {
                            Some((_, '\\')) => match chars.next() {
                                Some((_, 'n')) => value.push('\n'),
                                Some((_, c)) => value.push(c),
                                None => return Err(format!("bad escape: {line:?}")),
                            },
                            Some((i, '"')) => break i,
                            Some((_, c)) => value.push(c),
                            None => return Err(format!("unclosed value: {line:?}")),
                        }
                    };
                    labels.insert(k.to_string(), value);
                    rest = after[end + 1..].trim_start_matches(',');
                }
                (name, labels)
            }
        };
        if !name.starts_with(&family) {
            return Err(format!("{name} after TYPE {family}"));
        }
        samples.push((name.to_string(), labels, value));
    }
    Ok(samples)
}

/// The sample named `name` whose labels include every pair of `with`.
fn value(samples: &[Sample], name: &str, with: &[(&str, &str)]) -> Option<f64> {
    let mut found = samples.iter().filter(|(n, labels, _)| {
        n == name
            && with
                .iter()
                .all(|(k, v)| labels.get(*k).map(String::as_str) == Some(v))
    });
    let first = found.next().map(|s| s.2);
    assert!(found.next().is_none(), "{name} {with:?} is not one sample");
    first
}

/// Sum of `rpcbench_probe_calls_total` of one peer and transport, every outcome.
fn calls(samples: &[Sample], peer: &str, transport: &str) -> f64 {
    samples
        .iter()
        .filter(|(n, l, _)| {
            n == "rpcbench_probe_calls_total"
                && l.get("peer").map(String::as_str) == Some(peer)
                && l.get("transport").map(String::as_str) == Some(transport)
        })
        .map(|s| s.2)
        .sum()
}

/// The agent's threads and open files at `last` are where they were at `first`, give or
/// take a couple of threads and a few sockets in passing.
fn assert_threads_and_files_held(first: &[Sample], last: &[Sample]) {
    let threads = |s: &[Sample]| value(s, "process_threads", &[]).unwrap();
    let fds = |s: &[Sample]| value(s, "process_open_fds", &[]).unwrap();
    assert!(
        threads(last) <= threads(first) + 2.0,
        "threads grew: {} -> {}",
        threads(first),
        threads(last)
    );
    assert!(
        fds(last) <= fds(first) + 8.0,
        "open files grew: {} -> {}",
        fds(first),
        fds(last)
    );
}

/// The series of `peer` still listed.
fn has_peer(samples: &[Sample], peer: &str) -> bool {
    samples
        .iter()
        .any(|(_, l, _)| l.get("peer").map(String::as_str) == Some(peer))
}

/// Checks every histogram of the scrape: buckets in increasing `le`, cumulative, ending
/// in `+Inf` equal to `_count`; and the latency histogram's count equals the ok calls.
fn check_histograms(samples: &[Sample]) {
    let mut buckets: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
    for (name, labels, v) in samples {
        if let Some(family) = name.strip_suffix("_bucket") {
            let mut key = labels.clone();
            let le = key.remove("le").expect("a bucket without le");
            let le = if le == "+Inf" {
                f64::INFINITY
            } else {
                le.parse().unwrap()
            };
            buckets
                .entry(format!("{family}{key:?}"))
                .or_default()
                .push((le, *v));
        }
    }
    assert!(!buckets.is_empty(), "no histogram in the scrape");
    for (series, list) in &buckets {
        assert!(list.len() >= 19, "{series}: {} buckets", list.len());
        assert_eq!(list.last().unwrap().0, f64::INFINITY, "{series}");
        assert_eq!(list[0].0, 10e-6, "{series}: first bucket");
        for w in list.windows(2) {
            assert!(w[0].0 < w[1].0, "{series}: le out of order");
            assert!(w[0].1 <= w[1].1, "{series}: not cumulative");
        }
    }
    for (name, labels, count) in samples {
        let Some(family) = name.strip_suffix("_count") else {
            continue;
        };
        let mut key = labels.clone();
        let inf = buckets[&format!("{family}{key:?}")].last().unwrap().1;
        assert_eq!(inf, *count, "{name}{labels:?}: +Inf bucket != count");
        if family == "rpcbench_probe_duration_seconds" {
            key.insert("outcome".into(), "ok".into());
            let with: Vec<(&str, &str)> =
                key.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
            let ok = value(samples, "rpcbench_probe_calls_total", &with).expect("an ok counter");
            assert_eq!(*count, ok, "{labels:?}: histogram count != ok calls");
        }
    }
}

/// A loopback port nobody listens on: bound, read back, closed.
fn dead_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A peer entry.
fn entry(name: &str, tcp: u16, http: u16, labels: &str) -> String {
    format!(
        "- name: {name}\n  address: 127.0.0.1\n  tcp_port: {tcp}\n  http_port: {http}\n  labels: {{{labels}}}\n"
    )
}

/// What the agent counted for a live peer against what the echo server counted: every ok
/// probe is a request the server answered, histograms are whole, and a stopped server's
/// probes stop being ok.
#[test]
fn metrics_match_the_echo_servers_count() {
    let mut echo = EchoProcess::spawn(&[]);
    let dead = dead_port();
    let peers = entry("live", echo.tcp.port(), echo.http.port(), "zone: z1")
        + &entry("dead", dead, dead, "");
    let agent = Agent::start(&peers, &[]);
    let samples = agent.wait_for("5 ok probes per transport", |s| {
        ["tcp", "http-keepalive", "http-fresh"].iter().all(|t| {
            value(
                s,
                "rpcbench_probe_calls_total",
                &[("peer", "live"), ("transport", t), ("outcome", "ok")],
            )
            .is_some_and(|v| v >= 5.0)
        })
    });
    check_histograms(&samples);
    // Labels: the four of the agent and the peer's own.
    let live_ok = samples
        .iter()
        .find(|(n, l, _)| n == "rpcbench_probe_calls_total" && l["peer"] == "live")
        .unwrap();
    for label in ["peer", "address", "transport", "mode", "zone", "outcome"] {
        assert!(
            live_ok.1.contains_key(label),
            "no {label} in {:?}",
            live_ok.1
        );
    }
    assert_eq!(live_ok.1["mode"], "ip");
    assert!(
        value(
            &samples,
            "rpcbench_probe_last_success_timestamp_seconds",
            &[("peer", "live"), ("transport", "tcp")]
        )
        .is_some()
    );
    assert!(
        value(
            &samples,
            "rpcbench_probe_last_success_timestamp_seconds",
            &[("peer", "dead"), ("transport", "tcp")]
        )
        .is_none()
    );
    // Stop the server; then the ok counts freeze, and the server's own counts bound them.
    echo.signal(nix::sys::signal::Signal::SIGTERM);
    let totals = echo.exit_totals();
    let after = agent.wait_for("refused probes after the server stopped", |s| {
        ["tcp", "http-keepalive", "http-fresh"].iter().all(|t| {
            value(
                s,
                "rpcbench_probe_calls_total",
                &[
                    ("peer", "live"),
                    ("transport", t),
                    ("outcome", "connect_refused"),
                ],
            )
            .is_some_and(|v| v >= 2.0)
        })
    });
    check_histograms(&after);
    let ok = |t: &str| {
        value(
            &after,
            "rpcbench_probe_calls_total",
            &[("peer", "live"), ("transport", t), ("outcome", "ok")],
        )
        .unwrap() as u64
    };
    let failed_after_sending = |t: &str| {
        ["lost", "mismatched", "closed", "protocol", "io"]
            .iter()
            .filter_map(|o| {
                value(
                    &after,
                    "rpcbench_probe_calls_total",
                    &[("peer", "live"), ("transport", t), ("outcome", o)],
                )
            })
            .sum::<f64>() as u64
    };
    // Every ok probe is a request the server took in; a request the server took in is an
    // ok probe unless the server's stop cut its reply off.
    let tcp = totals.tcp.requests;
    assert!(
        ok("tcp") <= tcp && tcp <= ok("tcp") + failed_after_sending("tcp"),
        "tcp: server {tcp}, agent ok {}",
        ok("tcp")
    );
    let http = totals.http.requests;
    let http_ok = ok("http-keepalive") + ok("http-fresh");
    let http_failed = failed_after_sending("http-keepalive") + failed_after_sending("http-fresh");
    assert!(
        http_ok <= http && http <= http_ok + http_failed,
        "http: server {http}, agent ok {http_ok}"
    );
    // The dead peer: every probe refused, none ok.
    for t in ["tcp", "http-keepalive", "http-fresh"] {
        let n = calls(&after, "dead", t);
        let refused = value(
            &after,
            "rpcbench_probe_calls_total",
            &[
                ("peer", "dead"),
                ("transport", t),
                ("outcome", "connect_refused"),
            ],
        )
        .unwrap();
        assert!(
            n >= 1.0 && refused == n,
            "dead {t}: {refused} of {n} refused"
        );
    }
}

/// Python's `prometheus_client` parser reads every sample our strict reader reads, and
/// the histogram checks hold on what it read.
#[test]
#[ignore = "needs python3 with prometheus_client (pip install prometheus-client)"]
fn metrics_parse_with_prometheus_client() {
    let echo = EchoProcess::spawn(&[]);
    let peers = entry(
        "a \"quoted\" \\ name",
        echo.tcp.port(),
        echo.http.port(),
        "rack: 'r\\1'",
    );
    let agent = Agent::start(&peers, &[]);
    agent.wait_for("probes", |s| calls(s, "a \"quoted\" \\ name", "tcp") >= 3.0);
    let text = agent.scrape_text();
    let script = r#"
import json, sys
from prometheus_client.parser import text_string_to_metric_families
out = []
for family in text_string_to_metric_families(sys.stdin.read()):
    for s in family.samples:
        out.append([s.name, s.labels, s.value])
print(json.dumps(out))
"#;
    let mut child = Command::new("python3")
        .args(["-c", script])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("cannot run python3");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "prometheus_client refused:\n{text}");
    let theirs: Vec<(String, BTreeMap<String, String>, f64)> =
        serde_json::from_slice(&out.stdout).expect("the script prints JSON");
    let ours = parse(&text).unwrap();
    assert_eq!(theirs.len(), ours.len());
    for sample in &theirs {
        assert!(
            ours.contains(sample),
            "prometheus_client read {sample:?}, we did not"
        );
    }
    check_histograms(&theirs);
    assert!(
        theirs
            .iter()
            .any(|(_, l, _)| l.get("peer").map(String::as_str) == Some("a \"quoted\" \\ name"))
    );
}

/// A peer added to the file is probed and one removed disappears, without a restart; a
/// bad file keeps the last good list, logged once.
#[test]
fn peer_list_reload_adds_and_removes() {
    let echo = EchoProcess::spawn(&[]);
    let (t, h) = (echo.tcp.port(), echo.http.port());
    let agent = Agent::start(&entry("a", t, h, ""), &["--transports", "tcp"]);
    agent.wait_for("a probed", |s| calls(s, "a", "tcp") >= 2.0);
    agent.write_peers(&(entry("a", t, h, "") + &entry("b", t, h, "")));
    agent.wait_for("b added", |s| calls(s, "b", "tcp") >= 2.0);
    // Remove a: its series go, b's keep counting.
    agent.write_peers(&entry("b", t, h, ""));
    let s = agent.wait_for("a removed", |s| !has_peer(s, "a"));
    let b_before = calls(&s, "b", "tcp");
    agent.wait_for("b still probed", |s| calls(s, "b", "tcp") >= b_before + 2.0);
    assert_eq!(
        value(&agent.scrape(), "rpcbench_agent_peers", &[]),
        Some(1.0)
    );
    // A bad list: refused, counted, logged once; b goes on.
    let reloads = |s: &[Sample], r: &str| {
        value(
            s,
            "rpcbench_agent_peer_list_reloads_total",
            &[("result", r)],
        )
        .unwrap()
    };
    let ok_before = reloads(&agent.scrape(), "ok");
    agent.write_peers("- name: b\n  address: 127.0.0.1\n  colour: red\n");
    let s = agent.wait_for("bad list refused", |s| reloads(s, "error") >= 1.0);
    let b_before = calls(&s, "b", "tcp");
    let s = agent.wait_for("b probed after the bad list", |s| {
        calls(s, "b", "tcp") >= b_before + 3.0
    });
    assert!(has_peer(&s, "b"));
    assert_eq!(
        reloads(&s, "error"),
        1.0,
        "a bad list is read once, not at every poll"
    );
    assert_eq!(reloads(&s, "ok"), ok_before);
    let warnings: Vec<String> = agent
        .take_lines()
        .into_iter()
        .filter(|l| l.contains("keeping the last good list"))
        .collect();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(warnings[0].contains("colour"), "{warnings:?}");
}

/// A peer that never answers (a listener nobody accepts from: connects may succeed into
/// the backlog, replies never come) and one that refuses: each probe is counted at the
/// probe rate, at most one call under way per prober, and the agent's memory, threads and
/// files stay flat.
#[test]
fn dead_peers_cost_one_call_per_interval() {
    // Kept open for the test and never accepted from.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let sp = silent.local_addr().unwrap().port();
    let dead = dead_port();
    let peers = entry("silent", sp, sp, "") + &entry("refusing", dead, dead, "");
    let agent = Agent::start(&peers, &["--timeout", "100ms"]);
    let transports = ["tcp", "http-keepalive", "http-fresh"];
    let first = agent.wait_for("probes counted", |s| {
        transports
            .iter()
            .all(|t| calls(s, "silent", t) >= 3.0 && calls(s, "refusing", t) >= 3.0)
    });
    let started = Instant::now();
    let rss_first = agent.rss_kib();
    // Bounded in time: 30 intervals.
    let mut last = first.clone();
    while started.elapsed() < 30 * INTERVAL {
        std::thread::sleep(INTERVAL);
        last = agent.scrape();
        let in_flight = value(&last, "rpcbench_agent_calls_in_flight", &[]).unwrap();
        assert!(
            in_flight <= 6.0,
            "{in_flight} calls in flight for 6 probers"
        );
        assert_eq!(value(&last, "rpcbench_agent_probers", &[]), Some(6.0));
    }
    let elapsed = started.elapsed();
    for t in transports {
        for peer in ["silent", "refusing"] {
            let made = calls(&last, peer, t) - calls(&first, peer, t);
            // Physics: one tick per interval at most, missed ones skipped (+2 for the
            // ticks at either end); and at least a quarter of the ticks, however loaded
            // the machine.
            let ticks = elapsed.as_secs_f64() / INTERVAL.as_secs_f64();
            assert!(
                made <= ticks + 2.0,
                "{peer} {t}: {made} probes in {ticks:.1} intervals"
            );
            assert!(
                made >= ticks / 4.0,
                "{peer} {t}: {made} probes in {ticks:.1} intervals"
            );
            let ok = value(
                &last,
                "rpcbench_probe_calls_total",
                &[("peer", peer), ("transport", t), ("outcome", "ok")],
            )
            .unwrap();
            assert_eq!(ok, 0.0, "{peer} {t} answered?");
        }
        // The refusing peer: refused, every one.
        let refused = value(
            &last,
            "rpcbench_probe_calls_total",
            &[
                ("peer", "refusing"),
                ("transport", t),
                ("outcome", "connect_refused"),
            ],
        )
        .unwrap();
        assert_eq!(refused, calls(&last, "refusing", t));
        // The silent one: lost or a connect timeout (once the backlog is full).
        let lost = value(
            &last,
            "rpcbench_probe_calls_total",
            &[("peer", "silent"), ("transport", t), ("outcome", "lost")],
        )
        .unwrap();
        let ct = value(
            &last,
            "rpcbench_probe_calls_total",
            &[
                ("peer", "silent"),
                ("transport", t),
                ("outcome", "connect_timeout"),
            ],
        )
        .unwrap_or(0.0);
        assert_eq!(lost + ct, calls(&last, "silent", t), "silent {t}");
    }
    assert_threads_and_files_held(&first, &last);
    let rss_last = agent.rss_kib();
    assert!(
        rss_last < rss_first + 8 * 1024,
        "RSS grew from {rss_first} KiB to {rss_last} KiB"
    );
    drop(silent);
}

/// SIGTERM stops the agent with status 0, well within a second of probing at any state.
#[test]
fn sigterm_exits_zero() {
    let echo = EchoProcess::spawn(&[]);
    let mut agent = Agent::start(&entry("a", echo.tcp.port(), echo.http.port(), ""), &[]);
    agent.wait_for("probes", |s| calls(s, "a", "tcp") >= 2.0);
    let status = agent
        .terminate(Duration::from_secs(10))
        .expect("no exit within 10 s of SIGTERM");
    assert_eq!(status.code(), Some(0), "{:?}", agent.take_lines());
}

/// Usage errors are one line and status 2; an address in use is status 1.
#[test]
fn bad_usage_and_bad_start() {
    let run = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_rpcbench"))
            .arg("agent")
            .args(args)
            .stdin(Stdio::null())
            .output()
            .unwrap()
    };
    for (args, why) in [
        (
            &["--peers", "p.yaml", "--interval", "1s", "--timeout", "2s"][..],
            "--interval",
        ),
        (
            &["--peers", "p.yaml", "--transports", "grpc"][..],
            "probe transport",
        ),
        (&["--peers", "p.yaml", "--max-peers", "0"][..], "peer count"),
        (&["--peers", "https://x/peers"][..], "http://"),
    ] {
        let out = run(args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
        assert!(err.contains(why), "{args:?}: {err}");
    }
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let out = run(&["--peers", "p.yaml", "--listen", &addr]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("cannot listen"), "{err}");
}

/// `GET /metrics` with `Accept:` set the way Prometheus asks for native histograms.
fn scrape_protobuf(agent: &Agent) -> Vec<rpcbench::agent::native::proto::MetricFamily> {
    use prost::Message as _;
    let mut easy = curl::easy::Easy::new();
    let accept = "Accept: application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited;q=0.7,text/plain;version=0.0.4;q=0.3";
    let reply = curl_call(
        &mut easy,
        "GET",
        &format!("http://{}/metrics", agent.metrics),
        None,
        &[accept],
    );
    assert_eq!(reply.status, 200);
    assert_eq!(
        reply.header("content-type"),
        Some(rpcbench::agent::native::CONTENT_TYPE)
    );
    let mut body = &reply.body[..];
    let mut families = Vec::new();
    while !body.is_empty() {
        families.push(
            rpcbench::agent::native::proto::MetricFamily::decode_length_delimited(&mut body)
                .expect("a delimited MetricFamily"),
        );
    }
    families
}

/// The protobuf exposition: every histogram's native buckets hold as many observations as
/// its classic ones and its count, which is the ok calls; spans cover the deltas.
#[test]
fn protobuf_exposition_has_native_histograms() {
    let echo = EchoProcess::spawn(&[]);
    let agent = Agent::start(
        &entry("a", echo.tcp.port(), echo.http.port(), "zone: z"),
        &[],
    );
    agent.wait_for("probes", |s| calls(s, "a", "http-fresh") >= 3.0);
    let families = scrape_protobuf(&agent);
    let by_name = |n: &str| {
        families
            .iter()
            .find(|f| f.name() == n)
            .unwrap_or_else(|| panic!("no family {n}"))
    };
    let ok_of = |transport: &str| {
        by_name("rpcbench_probe_calls_total")
            .metric
            .iter()
            .find(|m| {
                let l = |k: &str| {
                    m.label
                        .iter()
                        .find(|p| p.name() == k)
                        .map(|p| p.value().to_string())
                };
                l("transport").as_deref() == Some(transport)
                    && l("outcome").as_deref() == Some("ok")
            })
            .and_then(|m| m.counter.as_ref())
            .map(|c| c.value() as u64)
            .unwrap()
    };
    for name in [
        "rpcbench_probe_duration_seconds",
        "rpcbench_probe_phase_duration_seconds",
    ] {
        let family = by_name(name);
        assert!(!family.metric.is_empty(), "{name}");
        for m in &family.metric {
            let h = m.histogram.as_ref().expect("a histogram");
            assert_eq!(h.schema(), 3);
            let mut count = 0i64;
            let mut total = 0i64;
            for d in &h.positive_delta {
                count += d;
                assert!(count >= 0, "{name}: a negative bucket");
                total += count;
            }
            let covered: u32 = h.positive_span.iter().map(|s| s.length()).sum();
            assert_eq!(covered as usize, h.positive_delta.len(), "{name}");
            assert_eq!(
                total as u64 + h.zero_count(),
                h.sample_count(),
                "{name}: native buckets != count"
            );
            let classic = h.bucket.last().unwrap().cumulative_count();
            assert_eq!(
                classic,
                h.sample_count(),
                "{name}: classic buckets != count"
            );
            if name == "rpcbench_probe_duration_seconds" {
                let transport = m
                    .label
                    .iter()
                    .find(|p| p.name() == "transport")
                    .unwrap()
                    .value();
                // The scrape is one snapshot, so the ok counter is the same instant's.
                assert_eq!(h.sample_count(), ok_of(transport), "{transport}");
                let zone = m
                    .label
                    .iter()
                    .find(|p| p.name() == "zone")
                    .map(|p| p.value());
                assert_eq!(zone, Some("z"));
            }
        }
    }
    assert!(
        families
            .iter()
            .any(|f| f.name() == "process_resident_memory_bytes")
    );
}

/// A real Prometheus with native histograms on scrapes the agent over protobuf and reads
/// the native histogram back: its count is the ok calls it scraped, and a quantile exists.
#[test]
#[ignore = "needs the prometheus package (apt-get install prometheus)"]
fn prometheus_reads_native_histograms() {
    let echo = EchoProcess::spawn(&[]);
    let agent = Agent::start(
        &entry("a", echo.tcp.port(), echo.http.port(), ""),
        &["--transports", "tcp"],
    );
    let dir = agent.dir.join("prometheus");
    std::fs::create_dir_all(dir.join("data")).unwrap();
    let port = dead_port();
    std::fs::write(
        dir.join("prometheus.yml"),
        format!(
            "global: {{scrape_interval: 1s}}\nscrape_configs:\n  - job_name: agent\n    static_configs: [{{targets: [\"{}\"]}}]\n",
            agent.metrics
        ),
    )
    .unwrap();
    let mut prom = Command::new("prometheus")
        .arg(format!(
            "--config.file={}",
            dir.join("prometheus.yml").display()
        ))
        .arg(format!(
            "--storage.tsdb.path={}",
            dir.join("data").display()
        ))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .arg("--enable-feature=native-histograms")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("cannot start prometheus");
    struct Kill<'a>(&'a mut Child);
    impl Drop for Kill<'_> {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let _kill = Kill(&mut prom);
    let query = |q: &str| -> Option<f64> {
        let mut easy = curl::easy::Easy::new();
        let mut url = format!("http://127.0.0.1:{port}/api/v1/query?query=");
        url.push_str(&easy.url_encode(q.as_bytes()));
        let mut body = Vec::new();
        easy.url(&url).ok()?;
        {
            let mut t = easy.transfer();
            t.write_function(|d| {
                body.extend_from_slice(d);
                Ok(d.len())
            })
            .ok()?;
            t.perform().ok()?;
        }
        let v: serde_json::Value = serde_json::from_slice(&body).ok()?;
        v["data"]["result"][0]["value"][1].as_str()?.parse().ok()
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        // Same instant in one query: count of the native histogram minus the ok counter.
        let count = query("histogram_count(rpcbench_probe_duration_seconds{transport=\"tcp\"})");
        let ok = query("rpcbench_probe_calls_total{transport=\"tcp\",outcome=\"ok\"}");
        if let (Some(count), Some(ok)) = (count, ok)
            && count >= 5.0
            && count == ok
        {
            let p99 = query(
                "histogram_quantile(0.99, rate(rpcbench_probe_duration_seconds{transport=\"tcp\"}[10s]))",
            );
            // A rate needs two scrapes in its window; wait for that too.
            if let Some(p99) = p99 {
                assert!(p99 > 0.0 && p99 < 1.0, "p99 {p99} s");
                break;
            }
        }
        assert!(
            Instant::now() < deadline,
            "Prometheus did not read the native histogram: count {count:?}, ok {ok:?}"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// A peer given by name is resolved per the address mode (default `system`, from
/// /etc/hosts for `localhost`, so nothing leaves the machine): its series say
/// `mode="system"` and fresh connections have a dns phase.
#[test]
fn a_named_peer_is_resolved_per_mode() {
    let echo = EchoProcess::spawn(&[]);
    let peers = format!(
        "- name: byname\n  address: localhost\n  tcp_port: {}\n  http_port: {}\n",
        echo.tcp.port(),
        echo.http.port()
    );
    let agent = Agent::start(&peers, &["--transports", "http-fresh", "--family", "4"]);
    let s = agent.wait_for("ok probes with a dns phase", |s| {
        value(
            s,
            "rpcbench_probe_phase_duration_seconds_count",
            &[("peer", "byname"), ("phase", "dns")],
        )
        .is_some_and(|n| n >= 3.0)
    });
    let ok = value(
        &s,
        "rpcbench_probe_calls_total",
        &[("peer", "byname"), ("outcome", "ok")],
    )
    .unwrap();
    assert!(ok >= 3.0);
    let sample = s
        .iter()
        .find(|(n, l, _)| n == "rpcbench_probe_calls_total" && l["peer"] == "byname")
        .unwrap();
    assert_eq!(sample.1["mode"], "system");
    assert_eq!(sample.1["address"], "localhost");
}

/// What a hostile peer does on each connection, once the prober's first bytes arrived.
#[derive(Clone, Copy)]
enum Hostile {
    /// Writes `head`, then junk without end, as fast as the prober takes it.
    Flood(&'static [u8]),
    /// Writes one byte of junk every 20 ms without end.
    Trickle,
}

/// A peer on `127.0.0.1:0` that answers every connection as `how` says, until `stop` is
/// set; each connection on a thread of its own, which ends when the prober closes it or
/// after 64 MiB. The accept loop ends at `stop` (one last connect wakes it).
fn hostile_peer(how: Hostile, stop: &Arc<AtomicBool>) -> (u16, std::thread::JoinHandle<()>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let stop = stop.clone();
    let accepting = std::thread::spawn(move || {
        for conn in listener.incoming() {
            if stop.load(Relaxed) {
                return;
            }
            let Ok(mut conn) = conn else { continue };
            let stop = stop.clone();
            std::thread::spawn(move || {
                let _ = conn.set_write_timeout(Some(Duration::from_secs(2)));
                let mut first = [0u8; 512];
                if !matches!(std::io::Read::read(&mut conn, &mut first), Ok(n) if n > 0) {
                    return;
                }
                let junk = [b'x'; 64 * 1024];
                let mut sent = 0usize;
                if let Hostile::Flood(head) = how
                    && conn.write_all(head).is_err()
                {
                    return;
                }
                while !stop.load(Relaxed) && sent < 64 << 20 {
                    let chunk: &[u8] = match how {
                        Hostile::Flood(_) => &junk,
                        Hostile::Trickle => {
                            std::thread::sleep(Duration::from_millis(20));
                            &junk[..1]
                        }
                    };
                    if conn.write_all(chunk).is_err() {
                        return;
                    }
                    sent += chunk.len();
                }
            });
        }
    });
    (port, accepting)
}

/// The agent with every peer hostile (issue #35, step 5): replies that claim 16 MiB or a
/// gigabyte and keep coming, a header without end, replies trickled a byte at a time.
/// Every probe fails and is counted once, none is ok, and the agent's memory, threads and
/// files stay where they were: a hostile peer cannot make it hold what it sends.
#[test]
fn hostile_peers_cannot_grow_the_agent() {
    let stop = Arc::new(AtomicBool::new(false));
    // A raw TCP reply head claiming 16 MiB - 1 (the length prefix), then junk.
    let (tcp_flood, t1) = hostile_peer(Hostile::Flood(&[0x00, 0xff, 0xff, 0xff]), &stop);
    let (http_flood, t2) = hostile_peer(
        Hostile::Flood(b"HTTP/1.1 200 OK\r\ncontent-length: 1000000000\r\n\r\n"),
        &stop,
    );
    let (endless_head, t3) = hostile_peer(Hostile::Flood(b"HTTP/1.1 200 OK\r\nx-junk: "), &stop);
    let (trickle, t4) = hostile_peer(Hostile::Trickle, &stop);
    let peers =
        entry("flood", tcp_flood, http_flood, "") + &entry("endless", trickle, endless_head, "");
    let agent = Agent::start(&peers, &["--timeout", "100ms"]);
    let transports = ["tcp", "http-keepalive", "http-fresh"];
    let first = agent.wait_for("probes counted", |s| {
        transports
            .iter()
            .all(|t| calls(s, "flood", t) >= 2.0 && calls(s, "endless", t) >= 2.0)
    });
    let rss_first = agent.rss_kib();
    let mut rss_most = rss_first;
    let started = Instant::now();
    let mut last = first.clone();
    // Bounded in time: 30 intervals.
    while started.elapsed() < 30 * INTERVAL {
        std::thread::sleep(INTERVAL);
        last = agent.scrape();
        rss_most = rss_most.max(agent.rss_kib());
    }
    for peer in ["flood", "endless"] {
        for t in transports {
            let made = calls(&last, peer, t);
            assert!(
                made > calls(&first, peer, t),
                "{peer} {t}: no probe in 30 intervals"
            );
            let ok = value(
                &last,
                "rpcbench_probe_calls_total",
                &[("peer", peer), ("transport", t), ("outcome", "ok")],
            )
            .unwrap_or(0.0);
            assert_eq!(ok, 0.0, "{peer} {t}: a hostile reply counted as ok");
        }
    }
    // The floods are refused for their size, not read to the end.
    for t in transports {
        let above = value(
            &last,
            "rpcbench_probe_calls_total",
            &[
                ("peer", "flood"),
                ("transport", t),
                ("outcome", "reply_above_max"),
            ],
        )
        .unwrap_or(0.0);
        // Refused as replies above --max-reply: all of them here, at least half however
        // loaded the machine (a probe may time out at 100 ms before its flood begins).
        let made = calls(&last, "flood", t);
        assert!(
            above >= 1.0 && above >= made / 2.0,
            "flood {t}: {above} of {made} probes refused as replies above --max-reply"
        );
    }
    assert_threads_and_files_held(&first, &last);
    // Each flood could have sent 64 MiB a probe, 30 probes and more a transport.
    assert!(
        rss_most < rss_first + 16 * 1024,
        "RSS grew from {rss_first} KiB to {rss_most} KiB under hostile peers"
    );
    eprintln!("agent RSS under hostile peers: {rss_first} KiB, at most {rss_most} KiB");
    stop.store(true, Relaxed);
    drop(agent);
    for (port, t) in [
        (tcp_flood, t1),
        (http_flood, t2),
        (endless_head, t3),
        (trickle, t4),
    ] {
        let _ = std::net::TcpStream::connect(("127.0.0.1", port));
        t.join().unwrap();
    }
}
