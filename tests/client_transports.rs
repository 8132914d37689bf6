//! Integration tests of the client: every transport against the real echo server (counts,
//! connections, concurrency, pattern replies, big payloads), against a server that
//! misbehaves on purpose (`tests/misbehave`: the client's counts must equal exactly what was
//! injected), against no server at all, and against a server killed in the middle of a run.
//!
//! The transports with an event-loop side are tested on both engines ([`per_engine!`]): the
//! event loop must count exactly what the worker threads count, server fault by server
//! fault.
//!
//! The accounting rules the misbehaving-server tests hold the client to (one worker, no
//! warm-up, so the server sees the calls in order):
//!
//! - a reply never sent (`Drop`) is `lost` after the timeout; a connection closed instead
//!   of a reply (`Abort`) is `lost` at once; a flipped payload byte is `mismatched`; after
//!   each of these the client reconnects;
//! - a reply sent twice on a persistent `tcp` connection is read before the next call's
//!   reply and counted `duplicated` (also when that next call fails); on every other
//!   transport the extra copy is never read as a reply;
//! - a connection the server closes after a reply: `tcp` has no way to notice before its
//!   next call, which is `lost` (the server never sees it) and then reconnects; HTTP
//!   clients must reconnect for an announced close (`Connection: close`) and for a
//!   connection closed while idle, and for a close right after the reply (a race HTTP/1.1
//!   allows) either reconnect or lose exactly the one call the server never saw;
//! - libcurl resends a request once, on a new connection, when a reused connection closes
//!   with nothing received: the server sees that seq twice and the call counts once, by
//!   the outcome of the resend;
//! - `connects` equals the connections the server accepted; `calls` equals the calls asked
//!   for: `calls == ok + lost + mismatched + sum(errors)`, each call counted exactly once.

mod misbehave;

use misbehave::{Action, IDLE_CLOSE, Misbehave, Record, Rule, every};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use rpcbench::measure::Tally;
use rpcbench::runner::{Engine, RunConfig, TransportRun, run_transport};
use rpcbench::server::{ServerConfig, ServerHandle};
use rpcbench::transport::{Endpoint, TransportKind};
use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Read};
use std::net::{SocketAddr, TcpListener};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Per-call timeout against the misbehaving server: short, so dropped replies cost little.
const FAST_TIMEOUT: Duration = Duration::from_millis(200);
/// Longest any child process may run before the test kills it and fails.
const CHILD_LIMIT: Duration = Duration::from_secs(60);

// ---------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------

/// Runs a test body once per engine, as ripgrep's `rgtest!` runs a test per regex engine:
/// `per_engine!(name, |engine| ...)` makes `name::blocking` and `name::evloop`. For the
/// transports with an event-loop side; the curl transports have plain tests.
macro_rules! per_engine {
    ($name:ident, $body:expr) => {
        mod $name {
            use super::*;

            #[test]
            fn blocking() {
                ($body)(Engine::Blocking)
            }

            #[test]
            fn evloop() {
                ($body)(Engine::Evloop)
            }
        }
    };
}

fn endpoint(tcp: SocketAddr, http: SocketAddr) -> Endpoint {
    Endpoint::new(tcp, http)
}

fn config(calls: u64, warmup: u64, concurrency: usize) -> RunConfig {
    RunConfig {
        calls,
        warmup,
        concurrency,
        timeout: Duration::from_secs(5),
        ..RunConfig::default()
    }
}

fn run(kind: TransportKind, tcp: SocketAddr, http: SocketAddr, cfg: &RunConfig) -> TransportRun {
    run_transport(kind, &endpoint(tcp, http), cfg, Arc::new(AtomicU64::new(0)))
}

/// A run's counts, in one value that compares and prints as a whole.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Counts {
    calls: u64,
    ok: u64,
    lost: u64,
    mismatched: u64,
    duplicated: u64,
    errors: BTreeMap<String, u64>,
    connects: u64,
}

impl Counts {
    fn of(t: &Tally) -> Counts {
        Counts {
            calls: t.calls(),
            ok: t.ok,
            lost: t.lost,
            mismatched: t.mismatched,
            duplicated: t.duplicated,
            errors: t.errors_by_key(),
            connects: t.connects,
        }
    }
}

/// Checks what every run must satisfy: each call asked for counted exactly once, the
/// latency histogram holding exactly the ok calls, and the kept seqs matching the counts.
fn assert_accounting(kind: TransportKind, run: &TransportRun, calls: u64) {
    let t = &run.tally;
    let errors: u64 = t.errors.values().sum();
    assert_eq!(
        t.ok + t.lost + t.mismatched + errors,
        calls,
        "{kind}: calls asked for != ok + lost + mismatched + errors: {:?}",
        Counts::of(t)
    );
    assert_eq!(t.calls(), calls, "{kind}: Tally::calls");
    assert_eq!(t.latency.len(), t.ok, "{kind}: one latency per ok call");
    let kept = |n: u64| n.min(rpcbench::measure::KEPT_SEQS as u64) as usize;
    assert_eq!(t.lost_seqs.len(), kept(t.lost), "{kind}: lost_seqs");
    assert_eq!(
        t.mismatched_seqs.len(),
        kept(t.mismatched),
        "{kind}: mismatched_seqs"
    );
    assert_eq!(t.error_seqs.len(), kept(errors), "{kind}: error_seqs");
}

/// The in-process echo server on its own runtime, stopped when the test ends.
struct Echo {
    server: ServerHandle,
    tcp: SocketAddr,
    http: SocketAddr,
}

impl Echo {
    fn start() -> Echo {
        let server = ServerHandle::start(ServerConfig::loopback_any_port(), 1)
            .expect("start the echo server");
        let tcp = server.tcp_addr.expect("tcp listener");
        let http = server.http_addr.expect("http listener");
        Echo { server, tcp, http }
    }

    /// Requests the server has answered so far, over both protocols.
    fn requests(&self) -> u64 {
        let s = self.server.stats();
        s.tcp.requests + s.http.requests
    }
}

/// A child process we started, killed by its PID (SIGKILL) and reaped when dropped, also
/// when the test fails half-way.
struct Proc {
    child: Child,
}

impl Proc {
    fn spawn(cmd: &mut Command) -> Proc {
        Proc {
            child: cmd.spawn().expect("spawn a child process"),
        }
    }

    fn pid(&self) -> Pid {
        Pid::from_raw(i32::try_from(self.child.id()).expect("pid fits in i32"))
    }

    /// SIGKILL, unless it has already been reaped (then its PID may belong to another).
    fn kill(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = kill(self.pid(), Signal::SIGKILL);
        }
    }

    /// Waits for the exit, at most `limit`; `None` when it was still running.
    fn wait_for(&mut self, limit: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + limit;
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Some(status);
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.kill();
        let _ = self.child.wait();
    }
}

/// Reads a pipe to the end on a thread of its own, so the child never blocks on a full pipe.
fn drain(pipe: impl Read + Send + 'static) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut out = String::new();
        let _ = BufReader::new(pipe).read_to_string(&mut out);
        out
    })
}

/// The `rpcbench` binary, started, with threads draining its stdout and stderr.
struct Client {
    proc: Proc,
    out: std::thread::JoinHandle<String>,
    err: std::thread::JoinHandle<String>,
    started: Instant,
}

impl Client {
    fn start(args: &[&str]) -> Client {
        let started = Instant::now();
        let mut proc = Proc::spawn(
            Command::new(env!("CARGO_BIN_EXE_rpcbench"))
                .args(args)
                .arg("--no-progress")
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped()),
        );
        let out = drain(proc.child.stdout.take().expect("stdout"));
        let err = drain(proc.child.stderr.take().expect("stderr"));
        Client {
            proc,
            out,
            err,
            started,
        }
    }

    /// Waits for the exit (bounded by [`CHILD_LIMIT`], else kills it and fails); returns
    /// the exit status, stdout, stderr and how long it ran.
    fn finish(mut self) -> (ExitStatus, String, String, Duration) {
        let Some(status) = self.proc.wait_for(CHILD_LIMIT) else {
            self.proc.kill();
            panic!("rpcbench still running after {CHILD_LIMIT:?}: killed");
        };
        let took = self.started.elapsed();
        let out = self.out.join().expect("stdout reader");
        let err = self.err.join().expect("stderr reader");
        (status, out, err, took)
    }
}

/// Two loopback ports nothing listens on: bound, then closed again.
fn closed_ports() -> (SocketAddr, SocketAddr) {
    let a = TcpListener::bind("127.0.0.1:0").expect("bind");
    let b = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addrs = (a.local_addr().expect("addr"), b.local_addr().expect("addr"));
    drop((a, b));
    addrs
}

/// A UDP port nothing listens on, and the path of a stale Unix socket (a file nobody
/// listens on, which refuses connects) in a directory removed when the guard drops.
fn closed_udp_and_unix() -> (u16, StaleDir) {
    let udp = std::net::UdpSocket::bind("127.0.0.1:0").expect("bind");
    let port = udp.local_addr().expect("addr").port();
    drop(udp);
    let dir = std::env::temp_dir().join(format!(
        "rpcbench-stale-{}-{}",
        std::process::id(),
        NEXT_STALE.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&dir).expect("mkdir");
    let sock = dir.join("stale.sock");
    drop(std::os::unix::net::UnixListener::bind(&sock).expect("bind unix"));
    (port, StaleDir(dir, sock))
}

static NEXT_STALE: AtomicU64 = AtomicU64::new(0);

/// A directory holding a stale socket (`.1`), removed when dropped.
struct StaleDir(std::path::PathBuf, std::path::PathBuf);

impl Drop for StaleDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A field of a JSON run record as a number.
fn num(run: &serde_json::Value, field: &str) -> u64 {
    run[field]
        .as_u64()
        .unwrap_or_else(|| panic!("{field} is not a number in {run}"))
}

/// The sum of a run record's `errors` map.
fn error_sum(run: &serde_json::Value) -> u64 {
    run["errors"]
        .as_object()
        .unwrap_or_else(|| panic!("errors is not an object in {run}"))
        .values()
        .map(|v| v.as_u64().expect("error count"))
        .sum()
}

// ---------------------------------------------------------------------------------------
// (1) A healthy server
// ---------------------------------------------------------------------------------------

/// Every call ok and nothing else: the clean result of a run of `calls`.
fn assert_clean(kind: TransportKind, run: &TransportRun, calls: u64, connects: u64, what: &str) {
    assert_accounting(kind, run, calls);
    assert_eq!(
        Counts::of(&run.tally),
        Counts {
            calls,
            ok: calls,
            lost: 0,
            mismatched: 0,
            duplicated: 0,
            errors: BTreeMap::new(),
            connects,
        },
        "{kind} ({what})"
    );
}

fn healthy(kind: TransportKind, engine: Engine) {
    let echo = Echo::start();
    let config = |calls, warmup, concurrency| RunConfig {
        engine,
        ..config(calls, warmup, concurrency)
    };
    let fresh = !kind.persistent();
    // Workers that share one connection open one in all.
    let per_worker = |workers: u64| if kind.shared() { 1 } else { workers };
    // One worker: one connection for the whole run, or one per call (warm-up included).
    let before = echo.requests();
    let r = run(kind, echo.tcp, echo.http, &config(2000, 20, 1));
    assert_clean(
        kind,
        &r,
        2000,
        if fresh { 2020 } else { 1 },
        "2000 calls, 1 worker",
    );
    assert_eq!((r.workers, r.engine), (1, engine));
    assert_eq!(
        echo.requests() - before,
        2020,
        "{kind}: the server answered each call and warm-up call exactly once"
    );

    // Eight workers: one connection each, and the merged totals add up.
    let before = echo.requests();
    let r = run(kind, echo.tcp, echo.http, &config(2000, 8, 8));
    assert_clean(
        kind,
        &r,
        2000,
        if fresh { 2008 } else { per_worker(8) },
        "2000 calls, 8 workers",
    );
    assert_eq!(r.workers, 8);
    assert_eq!(echo.requests() - before, 2008, "{kind}: 8 workers");

    // A pattern reply instead of an echo.
    let cfg = RunConfig {
        reply: Some(1000),
        ..config(300, 5, 1)
    };
    let r = run(kind, echo.tcp, echo.http, &cfg);
    assert_clean(
        kind,
        &r,
        300,
        if fresh { 305 } else { 1 },
        "1000-byte pattern replies",
    );

    // A 64 KiB payload each way.
    let cfg = RunConfig {
        payload: 64 * 1024,
        ..config(300, 5, 1)
    };
    let r = run(kind, echo.tcp, echo.http, &cfg);
    assert_clean(
        kind,
        &r,
        300,
        if fresh { 305 } else { 1 },
        "64 KiB payloads",
    );
}

per_engine!(healthy_tcp, |e| healthy(TransportKind::Tcp, e));
per_engine!(healthy_tcp_connect, |e| healthy(
    TransportKind::TcpConnect,
    e
));
per_engine!(healthy_http_fresh, |e| healthy(TransportKind::HttpFresh, e));
per_engine!(healthy_http_keepalive, |e| healthy(
    TransportKind::HttpKeepalive,
    e
));
per_engine!(healthy_h2, |e| healthy(TransportKind::H2, e));
per_engine!(healthy_h2_mux, |e| healthy(TransportKind::H2Mux, e));

#[test]
fn healthy_curl_reuse() {
    healthy(TransportKind::CurlReuse, Engine::Blocking);
}

#[test]
fn healthy_curl_fresh() {
    healthy(TransportKind::CurlFresh, Engine::Blocking);
}

// ---------------------------------------------------------------------------------------
// (2) A misbehaving server
// ---------------------------------------------------------------------------------------

/// What a run against the misbehaving server must report, worked out from the server's
/// record with the rules in the header of this file.
#[derive(Debug)]
struct Expected {
    counts: Counts,
    /// Lost calls the server saw (dropped or aborted), by seq.
    lost_seen: BTreeSet<u64>,
    /// Corrupted replies, by seq.
    mismatched: BTreeSet<u64>,
    /// Calls counted as errors, by seq.
    errored: BTreeSet<u64>,
    /// Closes after which the next call must be lost, unseen by the server.
    must_lose_next: BTreeSet<u64>,
    /// Closes after which the next call may be lost, unseen (the HTTP close race).
    may_lose_next: BTreeSet<u64>,
}

fn expect(kind: TransportKind, calls: u64, rec: &Record) -> Expected {
    let reqs = &rec.requests;
    let mut e = Expected {
        counts: Counts {
            calls,
            ok: 0,
            lost: 0,
            mismatched: 0,
            duplicated: 0,
            errors: BTreeMap::new(),
            connects: if kind.is_http() {
                rec.http_connections
            } else {
                rec.tcp_connections
            },
        },
        lost_seen: BTreeSet::new(),
        mismatched: BTreeSet::new(),
        errored: BTreeSet::new(),
        must_lose_next: BTreeSet::new(),
        may_lose_next: BTreeSet::new(),
    };
    for (i, r) in reqs.iter().enumerate() {
        let next = reqs.get(i + 1);
        if let Some(again) = next.filter(|n| n.seq == r.seq) {
            // libcurl's resend, which http-keepalive does the same way: only after a reused
            // connection closed with nothing received, and on a new connection. The resend
            // decides the outcome.
            assert!(
                matches!(
                    kind,
                    TransportKind::CurlReuse | TransportKind::HttpKeepalive
                ) && r.action == Action::Abort
                    && r.index_on_conn > 0
                    && again.index_on_conn == 0,
                "{kind}: seq {} reached the server twice: {r:?} then {again:?}",
                r.seq
            );
            continue;
        }
        let is_last = next.is_none();
        match r.action {
            Action::Reply => e.counts.ok += 1,
            Action::Drop | Action::Abort => {
                e.counts.lost += 1;
                e.lost_seen.insert(r.seq);
            }
            Action::Corrupt => {
                e.counts.mismatched += 1;
                e.mismatched.insert(r.seq);
            }
            // Only a client that waits for the announced close sees it broken: its call,
            // replied to, ends at its timeout as a protocol error.
            Action::LingerAnnounced if kind == TransportKind::HttpFresh => {
                *e.counts.errors.entry("protocol".into()).or_default() += 1;
                e.errored.insert(r.seq);
            }
            Action::LingerAnnounced => e.counts.ok += 1,
            Action::Duplicate => {
                e.counts.ok += 1;
                // Read by the next call on the same connection, whatever that call's fate.
                if kind == TransportKind::Tcp && next.is_some_and(|n| n.conn == r.conn) {
                    e.counts.duplicated += 1;
                }
            }
            Action::CloseAfter | Action::CloseAnnounced | Action::IdleClose => {
                e.counts.ok += 1;
                match kind {
                    // After the final seen request, a call may or may not have followed.
                    TransportKind::Tcp if is_last => {
                        e.may_lose_next.insert(r.seq);
                    }
                    TransportKind::Tcp => {
                        e.must_lose_next.insert(r.seq);
                    }
                    TransportKind::HttpKeepalive | TransportKind::CurlReuse
                        if r.action == Action::CloseAfter =>
                    {
                        e.may_lose_next.insert(r.seq);
                    }
                    _ => {}
                }
            }
        }
    }
    e
}

/// Runs `kind` with one worker (connection) and no warm-up on `engine` against a server
/// following `rule`, and checks the client's counts and seqs against the server's record.
/// Returns both.
fn misbehave(
    kind: TransportKind,
    engine: Engine,
    calls: u64,
    rule: Rule,
) -> (TransportRun, Record) {
    let server = Misbehave::start(rule);
    let cfg = RunConfig {
        timeout: FAST_TIMEOUT,
        engine,
        ..config(calls, 0, 1)
    };
    let run = run(kind, server.tcp, server.http, &cfg);
    let rec = server.record();
    drop(server);
    check_against_record(kind, calls, &run, &rec);
    (run, rec)
}

fn check_against_record(kind: TransportKind, calls: u64, run: &TransportRun, rec: &Record) {
    let t = &run.tally;
    let got = Counts::of(t);
    println!("{kind}: reported {got:?}");
    println!("{kind}: injected (n, seq, action) {:?}", rec.faults());
    assert_accounting(kind, run, calls);
    let mut e = expect(kind, calls, rec);

    // Calls the server never saw: each must be lost, right after a close.
    let seen: BTreeSet<u64> = rec.requests.iter().map(|r| r.seq).collect();
    let unseen: Vec<u64> = t
        .lost_seqs
        .iter()
        .copied()
        .filter(|s| !seen.contains(s))
        .collect();
    assert_eq!(
        calls - seen.len() as u64,
        unseen.len() as u64,
        "{kind}: every call the server never saw is lost (unseen lost seqs {unseen:?})"
    );
    let mut causes = BTreeSet::new();
    for u in &unseen {
        // The request just before it, in this run: seqs only grow, one worker.
        let cause = rec
            .requests
            .iter()
            .filter(|r| r.seq < *u)
            .map(|r| r.seq)
            .max();
        let cause =
            cause.unwrap_or_else(|| panic!("{kind}: lost seq {u} has no request before it"));
        assert!(
            e.must_lose_next.contains(&cause) || e.may_lose_next.contains(&cause),
            "{kind}: seq {u} never reached the server, but the request before it ({cause}) was \
             not a close: {:?}",
            rec.requests.iter().find(|r| r.seq == cause)
        );
        assert!(
            causes.insert(cause),
            "{kind}: two calls lost after close {cause}"
        );
    }
    for must in &e.must_lose_next {
        assert!(
            causes.contains(must),
            "{kind}: the call after close {must} should be lost and unseen; unseen: {unseen:?}"
        );
    }
    e.counts.lost += unseen.len() as u64;
    assert_eq!(got, e.counts, "{kind}: reported (left) vs injected (right)");

    // The seqs: every injected loss and corruption, by seq, and nothing else.
    let lost: BTreeSet<u64> = t.lost_seqs.iter().copied().collect();
    let expected_lost: BTreeSet<u64> = e.lost_seen.iter().chain(&unseen).copied().collect();
    assert_eq!(lost, expected_lost, "{kind}: lost_seqs");
    let mismatched: BTreeSet<u64> = t.mismatched_seqs.iter().copied().collect();
    assert_eq!(mismatched, e.mismatched, "{kind}: mismatched_seqs");
    let errored: BTreeSet<u64> = t.error_seqs.iter().copied().collect();
    assert_eq!(errored, e.errored, "{kind}: error_seqs");
    if !kind.persistent() {
        assert_eq!(t.connects, calls, "{kind}: one connection per call");
    }
}

/// The raw TCP rules: 400 calls with 2 dropped replies (400 ms of timeouts), 4 aborts, 10
/// corruptions, 9 duplicates and 5 closes.
fn tcp_rule() -> Rule {
    every(
        &[
            (150, Action::Drop),
            (97, Action::Abort),
            (37, Action::Corrupt),
            (41, Action::Duplicate),
            (130, Action::CloseAfter),
            (170, Action::CloseAnnounced),
        ],
        None,
    )
}

per_engine!(misbehaving_tcp, |engine: Engine| {
    let (run, rec) = misbehave(TransportKind::Tcp, engine, 400, tcp_rule());
    // The same numbers, spelt out: 5 closes, each losing the next call unseen, so the server
    // sees 395 requests.
    assert_eq!(rec.requests.len(), 395);
    assert_eq!(
        [
            Action::Drop,
            Action::Abort,
            Action::Corrupt,
            Action::Duplicate
        ]
        .map(|a| rec.count(a)),
        [2, 4, 10, 9]
    );
    let t = &run.tally;
    assert_eq!(
        (t.ok, t.lost, t.mismatched, t.duplicated),
        (379, 2 + 4 + 5, 10, 9)
    );
    // One connection, plus one after each of the 6 losses, 10 corruptions and 5 closes.
    assert_eq!(t.connects, 1 + 6 + 10 + 5);
});

per_engine!(misbehaving_tcp_connect, |engine: Engine| {
    let (run, rec) = misbehave(TransportKind::TcpConnect, engine, 400, tcp_rule());
    assert_eq!(rec.requests.len(), 400);
    let t = &run.tally;
    // Duplicates are never read (the connection ends with the call); closes change nothing.
    assert_eq!(
        (t.ok, t.lost, t.mismatched, t.duplicated),
        (400 - 6 - 10, 6, 10, 0)
    );
});

// A reply sent twice is read by the next call on the connection: it is a duplicate even
// when that next call then fails.
per_engine!(
    tcp_duplicate_read_by_a_failing_call_is_counted,
    |engine: Engine| {
        let rule: Rule = Box::new(|n, _| match n {
            5 | 10 | 15 => Action::Duplicate,
            6 => Action::Drop,
            11 => Action::Abort,
            16 => Action::Corrupt,
            _ => Action::Reply,
        });
        let (run, _) = misbehave(TransportKind::Tcp, engine, 20, rule);
        assert_eq!(run.tally.duplicated, 3);
    }
);

/// The HTTP rules: 400 calls with 2 dropped replies, aborts, corruptions, announced closes
/// and silent closes right after the reply.
fn http_rule() -> Rule {
    every(
        &[
            (150, Action::Drop),
            (97, Action::Abort),
            (37, Action::Corrupt),
            (23, Action::CloseAnnounced),
            (29, Action::CloseAfter),
        ],
        None,
    )
}

per_engine!(misbehaving_http_fresh, |engine: Engine| {
    let (run, rec) = misbehave(TransportKind::HttpFresh, engine, 400, http_rule());
    assert_eq!(rec.requests.len(), 400);
    let t = &run.tally;
    assert_eq!((t.ok, t.lost, t.mismatched), (400 - 6 - 10, 6, 10));
});

/// A server that announces `Connection: close` and keeps the connection open: `http-fresh`,
/// which ends a call at the server's close, counts each such call (replied to, and held to
/// its timeout) as a protocol error; `http-keepalive` closes the connection itself.
fn broken_close_rule() -> Rule {
    every(&[(5, Action::LingerAnnounced)], None)
}

per_engine!(
    http_fresh_waits_for_the_announced_close,
    |engine: Engine| {
        let (run, _) = misbehave(TransportKind::HttpFresh, engine, 30, broken_close_rule());
        let t = &run.tally;
        assert_eq!((t.ok, t.errors_by_key().get("protocol")), (24, Some(&6)));
        let (run, _) = misbehave(
            TransportKind::HttpKeepalive,
            engine,
            30,
            broken_close_rule(),
        );
        // A new connection after each announced close but the last call's.
        assert_eq!((run.tally.ok, run.tally.connects), (30, 6));
    }
);

// `http-fresh` ends each call at the server's close, so the TIME_WAIT of every one of its
// connections is the server's (the side that closed first), none the client's: a client
// that closed first would leave one per call, and search past them for a free port on each
// connect.
per_engine!(
    http_fresh_leaves_time_wait_to_the_server,
    |engine: Engine| {
        let echo = Echo::start();
        let cfg = RunConfig {
            engine,
            ..config(200, 0, 1)
        };
        // Sockets of other tests' clients to an earlier server on the same port, still
        // closing: not this run's.
        let earlier = time_wait(echo.http.port(), &BTreeSet::new()).2;
        let r = run(TransportKind::HttpFresh, echo.tcp, echo.http, &cfg);
        assert_clean(TransportKind::HttpFresh, &r, 200, 200, "200 calls");
        let (server_side, client_side, _) = time_wait(echo.http.port(), &earlier);
        assert_eq!(
            client_side, 0,
            "the client closed first on some connections"
        );
        // The server side's own count may be lower: the kernel lets a new SYN from a reused
        // client port end a TIME_WAIT early.
        assert!(server_side >= 100, "server-side TIME_WAIT: {server_side}");
    }
);

/// Sockets on IPv4 loopback, read from `/proc/net/tcp`: those in TIME_WAIT whose local
/// port is `port` (the server's side), those in TIME_WAIT whose remote port is `port` (the
/// client's side) and whose local port is not in `earlier`, and the local ports of every
/// socket, in any state, whose remote port is `port`.
fn time_wait(port: u16, earlier: &BTreeSet<u16>) -> (usize, usize, BTreeSet<u16>) {
    let table = std::fs::read_to_string("/proc/net/tcp").expect("/proc/net/tcp");
    let port_of = |addr: &str| {
        let hex = addr.rsplit(':').next().expect("an address with a port");
        u16::from_str_radix(hex, 16).expect("a port in hex")
    };
    let (mut server, mut client, mut clients) = (0, 0, BTreeSet::new());
    for line in table.lines().skip(1) {
        let fields: Vec<&str> = line.split_whitespace().collect();
        if fields.len() < 4 {
            continue;
        }
        let (local, remote) = (port_of(fields[1]), port_of(fields[2]));
        // TIME_WAIT is state 06.
        let time_wait = fields[3] == "06";
        if remote == port {
            clients.insert(local);
            if time_wait && !earlier.contains(&local) {
                client += 1;
            }
        } else if local == port && time_wait {
            server += 1;
        }
    }
    (server, client, clients)
}

per_engine!(misbehaving_http_keepalive, |engine: Engine| {
    let (run, rec) = misbehave(TransportKind::HttpKeepalive, engine, 400, http_rule());
    let t = &run.tally;
    assert_eq!(rec.count(Action::Drop) + rec.count(Action::Abort), 6);
    // (Announced closes never cost a call: checked against the record above.) Like
    // libcurl, the aborted requests of reused connections were resent once (checked
    // request by request above) and count once; the drops are lost.
    assert!(
        rec.requests.windows(2).any(|w| w[0].seq == w[1].seq),
        "no resend: {:?}",
        rec.faults()
    );
    assert_eq!(t.mismatched, 10);
    assert!(t.lost >= rec.count(Action::Drop), "lost {}", t.lost);
});

#[test]
fn misbehaving_curl_reuse() {
    let (run, rec) = misbehave(TransportKind::CurlReuse, Engine::Blocking, 400, http_rule());
    let t = &run.tally;
    assert_eq!(rec.count(Action::Drop), 2);
    // libcurl resent the aborted requests of reused connections (checked request by
    // request above); the call counts once.
    assert!(
        rec.requests.windows(2).any(|w| w[0].seq == w[1].seq),
        "no resend: {:?}",
        rec.faults()
    );
    assert_eq!(t.mismatched, 10);
}

#[test]
fn misbehaving_curl_fresh() {
    let (run, rec) = misbehave(TransportKind::CurlFresh, Engine::Blocking, 400, http_rule());
    assert_eq!(rec.requests.len(), 400);
    let t = &run.tally;
    assert_eq!((t.ok, t.lost, t.mismatched), (400 - 6 - 10, 6, 10));
}

/// A reply that never comes is a lost call on curl-reuse too, whether the connection was
/// new (call 1) or reused (call 5): the request had been sent.
#[test]
fn curl_reuse_timeout_on_a_reused_connection_is_lost() {
    let rule: Rule = Box::new(|n, _| match n {
        1 | 5 => Action::Drop,
        _ => Action::Reply,
    });
    let (run, rec) = misbehave(TransportKind::CurlReuse, Engine::Blocking, 10, rule);
    assert_eq!(
        rec.requests[4].index_on_conn, 3,
        "call 5 reused its connection"
    );
    assert_eq!(run.tally.lost, 2);
    assert!(run.tally.errors.is_empty(), "{:?}", run.tally.errors);
}

/// The server closes a connection that stays idle for [`IDLE_CLOSE`] (an idle timeout).
/// Two workers, one warm-up call each: the first warm-up request gets a reply and then the
/// idle close, the second gets no reply, so its worker waits out the 200 ms timeout while
/// the first worker's connection sits idle at the start line and is closed. The first
/// measured call of that worker then finds a connection the server closed long ago.
///
/// Each call asks for a 300 µs server delay so that the 100 calls last long enough for
/// both workers to take part. Which worker takes which calls is up to the scheduler, so a
/// run where one worker took every call (seen from the server: a persistent transport
/// opened fewer than 4 connections) is run again, at most 3 times in all.
fn idle_close(kind: TransportKind, engine: Engine) -> TransportRun {
    const CALLS: u64 = 100;
    assert!(IDLE_CLOSE * 4 < FAST_TIMEOUT);
    for attempt in 1..=3 {
        let server = Misbehave::start(Box::new(|n, _| match n {
            1 => Action::IdleClose,
            2 => Action::Drop,
            _ => Action::Reply,
        }));
        let cfg = RunConfig {
            timeout: FAST_TIMEOUT,
            delay_us: 300,
            engine,
            ..config(CALLS, 2, 2)
        };
        let run = run(kind, server.tcp, server.http, &cfg);
        let rec = server.record();
        drop(server);
        println!(
            "{kind}: attempt {attempt}: reported {:?}",
            Counts::of(&run.tally)
        );
        assert_accounting(kind, &run, CALLS);
        let connections = if kind.is_http() {
            rec.http_connections
        } else {
            rec.tcp_connections
        };
        assert_eq!(run.tally.connects, connections, "{kind}: connects");
        // Persistent: each worker reconnects once (after the idle close, after the dropped
        // warm-up reply). Fresh: one connection per call.
        if kind.persistent() && connections < 4 && attempt < 3 {
            continue;
        }
        let want = if kind.persistent() { 4 } else { CALLS + 2 };
        assert_eq!(run.tally.connects, want, "{kind}: connects");
        let seen = rec.requests.len() as u64 - 2;
        assert_eq!(
            run.tally.lost,
            CALLS - seen,
            "{kind}: a lost call is one the server never saw"
        );
        return run;
    }
    unreachable!("the last attempt returns or fails")
}

per_engine!(idle_close_tcp_loses_the_next_call, |engine: Engine| {
    // The tcp transport does not look for a close before writing on its connection: the
    // call is lost (the connection closed before the reply), unseen, then it reconnects.
    let run = idle_close(TransportKind::Tcp, engine);
    assert_eq!((run.tally.ok, run.tally.lost), (99, 1));
});

per_engine!(idle_close_tcp_connect, |engine: Engine| {
    let run = idle_close(TransportKind::TcpConnect, engine);
    assert_eq!((run.tally.ok, run.tally.lost), (100, 0));
});

per_engine!(idle_close_http_fresh, |engine: Engine| {
    let run = idle_close(TransportKind::HttpFresh, engine);
    assert_eq!((run.tally.ok, run.tally.lost), (100, 0));
});

per_engine!(idle_close_http_keepalive_reconnects, |engine: Engine| {
    // HTTP/1.1 lets a server close an idle connection at any time, and http_keepalive.rs
    // promises to replace such a connection: the call must go out on a new one.
    let run = idle_close(TransportKind::HttpKeepalive, engine);
    assert_eq!((run.tally.ok, run.tally.lost), (100, 0));
});

#[test]
fn idle_close_curl_reuse_reconnects() {
    let run = idle_close(TransportKind::CurlReuse, Engine::Blocking);
    assert_eq!((run.tally.ok, run.tally.lost), (100, 0));
}

#[test]
fn idle_close_curl_fresh() {
    let run = idle_close(TransportKind::CurlFresh, Engine::Blocking);
    assert_eq!((run.tally.ok, run.tally.lost), (100, 0));
}

// ---------------------------------------------------------------------------------------
// (3) No server
// ---------------------------------------------------------------------------------------

#[test]
fn no_server_every_call_is_connect_refused() {
    let (tcp, http) = closed_ports();
    let (udp_port, stale) = closed_udp_and_unix();
    // QUIC cannot see a refusal (quinn's socket is not connected, so the ICMP port
    // unreachable never reaches it): tests/quic.rs holds its no-server case, a connect
    // timeout.
    let over_tcp_or_connected_udp = TransportKind::ALL
        .into_iter()
        .filter(|k| k.port() != rpcbench::transport::Port::Quic);
    let runs = over_tcp_or_connected_udp.flat_map(|kind| {
        let evloop = kind.has_async().then_some((kind, Engine::Evloop));
        [Some((kind, Engine::Blocking)), evloop]
            .into_iter()
            .flatten()
    });
    for (kind, engine) in runs {
        let cfg = RunConfig {
            timeout: Duration::from_secs(1),
            engine,
            ..config(20, 0, 1)
        };
        let started = Instant::now();
        let to = endpoint(tcp, http)
            .with_udp_port(udp_port)
            .with_unix(Some(stale.1.clone()));
        let r = run_transport(kind, &to, &cfg, Arc::new(AtomicU64::new(0)));
        let took = started.elapsed();
        assert_accounting(kind, &r, 20);
        assert_eq!(
            Counts::of(&r.tally),
            Counts {
                calls: 20,
                ok: 0,
                lost: 0,
                mismatched: 0,
                duplicated: 0,
                errors: BTreeMap::from([("connect_refused".to_string(), 20)]),
                // udp counts sockets opened: its one socket is opened, then refused (an
                // ICMP port unreachable) call after call.
                connects: u64::from(kind == TransportKind::Udp),
            },
            "{kind}"
        );
        // Refused at once, not timed out: 20 timeouts would take 20 s. A quarter of that
        // separates the two on any machine, however loaded.
        let timeouts = cfg.timeout * 20;
        assert!(took < timeouts / 4, "{kind}: took {took:?}");
    }
}

#[test]
fn no_server_binary_exits_1() {
    let (tcp, http) = closed_ports();
    let (udp_port, stale) = closed_udp_and_unix();
    let (tcp_port, http_port) = (tcp.port().to_string(), http.port().to_string());
    let udp_port = udp_port.to_string();
    let args = [
        "--target",
        "127.0.0.1",
        "--tcp-port",
        &tcp_port,
        "--http-port",
        &http_port,
        "--udp-port",
        &udp_port,
        "--unix",
        stale.1.to_str().unwrap(),
        "-n",
        "20",
        "--warmup",
        "0",
        "--timeout",
        "1s",
        "--format",
        "json",
    ];
    // The preflight says so before any call: the ports in one line, the stale socket
    // (refused too) in the same, and no report.
    let (status, out, err, took) = Client::start(&args).finish();
    assert_eq!(status.code(), Some(1), "status {status:?}; stderr: {err}");
    assert!(out.is_empty(), "{out}");
    assert!(took < Duration::from_secs(10), "took {took:?}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with(&format!(
            "rpcbench: 127.0.0.1 tcp port {tcp_port}, http port {http_port}, udp port {udp_port} and unix socket {}: connection refused",
            stale.1.display()
        )),
        "{err}"
    );
    // Without it, every call of every transport is counted as refused.
    let (status, out, err, took) =
        Client::start(&[&args[..], &["--no-preflight"]].concat()).finish();
    assert_eq!(status.code(), Some(1), "status {status:?}; stderr: {err}");
    assert!(took < Duration::from_secs(10), "took {took:?}");
    let report: serde_json::Value =
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("JSON: {e}: {out}"));
    let runs = report["runs"].as_array().expect("runs");
    // Every transport but QUIC's (no --quic-port: skipped, and said so), and h2 and grpc
    // again at the multiplexing comparison's workers.
    let quic = TransportKind::by_default()
        .into_iter()
        .filter(|k| k.port() == rpcbench::transport::Port::Quic)
        .count();
    assert!(
        quic > 0 && err.contains("quic not run: give the target's QUIC port"),
        "{err}"
    );
    assert_eq!(
        runs.len(),
        TransportKind::by_default().len() - quic + 2,
        "{out}"
    );
    for run in runs {
        assert_eq!(num(run, "calls"), 20, "{run}");
        assert_eq!(num(run, "ok"), 0, "{run}");
        assert_eq!(run["errors"]["connect_refused"].as_u64(), Some(20), "{run}");
        assert_eq!(error_sum(run), 20, "{run}");
    }
}

// ---------------------------------------------------------------------------------------
// (4) The server killed mid-run
// ---------------------------------------------------------------------------------------

#[test]
fn server_killed_mid_run() {
    let mut echo = Proc::spawn(
        Command::new(env!("CARGO_BIN_EXE_rpcbench-echo"))
            .args(["--tcp", "127.0.0.1:0", "--http", "127.0.0.1:0"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null()),
    );
    let stdout = echo.child.stdout.take().expect("stdout");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let (mut tcp, mut http) = (None, None);
    let deadline = Instant::now() + Duration::from_secs(10);
    while tcp.is_none() || http.is_none() {
        let left = deadline.saturating_duration_since(Instant::now());
        let line = rx
            .recv_timeout(left)
            .expect("rpcbench-echo printed its listening lines in time");
        let addr = |rest: &str| {
            rest.trim()
                .parse::<SocketAddr>()
                .expect("listening address")
        };
        if let Some(rest) = line.strip_prefix("listening tcp ") {
            tcp = Some(addr(rest));
        } else if let Some(rest) = line.strip_prefix("listening http ") {
            http = Some(addr(rest));
        }
    }
    let (tcp, http) = (tcp.unwrap(), http.unwrap());
    assert!(tcp.ip().is_loopback() && http.ip().is_loopback());

    let (tcp_port, http_port) = (tcp.port().to_string(), http.port().to_string());
    let args = [
        "--target",
        "127.0.0.1",
        "--tcp-port",
        tcp_port.as_str(),
        "--http-port",
        http_port.as_str(),
        "--duration",
        "3s",
        "--timeout",
        "300ms",
        "--format",
        "json",
        "--transports",
        "tcp,http-keepalive",
    ];
    let client = Client::start(&args);
    std::thread::sleep(Duration::from_secs(1));
    echo.kill();
    let killed = echo.wait_for(Duration::from_secs(5)).expect("echo died");
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&killed),
        Some(Signal::SIGKILL as i32)
    );
    // Two transports of 3 s each, plus start-up: `finish` fails the test past
    // CHILD_LIMIT, ten times that, so a client that hangs is caught and a slow VM is not.
    let (status, out, err, _) = client.finish();
    assert_eq!(status.code(), Some(1), "status {status:?}; stderr: {err}");
    let report: serde_json::Value =
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("JSON: {e}: {out}"));
    let runs = report["runs"].as_array().expect("runs");
    assert_eq!(runs.len(), 2, "{out}");
    for run in runs {
        let name = run["transport"].as_str().expect("transport");
        let (calls, ok) = (num(run, "calls"), num(run, "ok"));
        let failed = num(run, "lost") + num(run, "mismatched") + error_sum(run);
        println!(
            "{name}: calls {calls} ok {ok} failed {failed} errors {}",
            run["errors"]
        );
        assert_eq!(calls, ok + failed, "{name}: the sum rule: {run}");
        assert!(failed > 0, "{name}: no failures after the kill: {run}");
    }
    // The server died during the tcp run (it had answered calls before) and stayed dead
    // through the http-keepalive run.
    assert_eq!(runs[0]["transport"], "tcp");
    assert!(num(&runs[0], "ok") > 0, "{}", runs[0]);
    assert_eq!(num(&runs[1], "ok"), 0, "{}", runs[1]);
}
