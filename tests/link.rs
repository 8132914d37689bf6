//! The userspace link (`rpcbench-link`) between two namespaces: its delay is physics (a
//! blocking UDP ping-pong across 5 ms each way takes 10 ms more per round trip than
//! across the same link without a delay), its loss,
//! duplication and reordering are what a receiver sees, packet for packet, and it leaves
//! no TUN device or process behind when stopped by SIGINT; the test bed's userspace link
//! is torn down too when the script is interrupted.
//!
//! Needs root for network namespaces: `cargo test --release --test link -- --ignored`.

mod common;

use common::link::{LinkProcess, count};
use common::netns::Netns;
use std::io::{BufRead, BufReader};
use std::net::{SocketAddr, UdpSocket};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Round trips timed across the 5 ms link: a median over 100 needs 1 s of traffic.
const PINGS: usize = 100;
/// Datagrams sent one way for the accounting test.
const DATAGRAMS: u64 = 400;
/// Gap between those datagrams: far shorter than the delay (so reordered packets have
/// held ones to overtake), long enough that a burst never fills a socket buffer.
const GAP: Duration = Duration::from_micros(200);
/// Longest wait for anything here (a reply, the link's start or stop): 10× and more what
/// each needs, so only a broken link reaches it.
const PATIENCE: Duration = Duration::from_secs(10);

/// Runs `f` on a thread inside namespace `ns`, raised to SCHED_FIFO where allowed (the
/// host is loaded; a ping side waiting for a CPU would measure the host, not the link).
fn in_netns<T: Send + 'static>(
    ns: &str,
    f: impl FnOnce() -> T + Send + 'static,
) -> std::thread::JoinHandle<T> {
    let path = format!("/run/netns/{ns}");
    std::thread::spawn(move || {
        let file = std::fs::File::open(&path).unwrap();
        nix::sched::setns(&file, nix::sched::CloneFlags::CLONE_NEWNET).unwrap();
        let tid = nix::unistd::gettid().to_string();
        let _ = Command::new("chrt")
            .args(["-f", "-p", "50", &tid])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        f()
    })
}

/// True when a TUN device of a link (`rbl…`) is in namespace `ns`.
fn tun_left(ns: &str) -> bool {
    let out = Command::new("ip")
        .args(["-n", ns, "link", "show"])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).contains("rbl")
}

fn assert_root() {
    assert!(
        nix::unistd::Uid::effective().is_root(),
        "the link needs root for network namespaces and TUN"
    );
}

/// The fastest of [`PINGS`] blocking UDP round trips from `b` to `a` across a link with
/// `--delay delay`; checks the link's counts and that it leaves no device behind. The
/// fastest, not the median: host noise (a vCPU woken late, a core busy with another
/// process) only ever adds to a round trip, so the fastest is the path and the delay, while
/// a loaded VM's median moves by a millisecond (10.99 ms for 10 in one CI run, min 10.32).
fn ping_fastest(a: &str, b: &str, net: u8, delay: &str) -> Duration {
    let link = LinkProcess::start(a, b, net, &["--delay", delay]);
    let server_ip = format!("10.{net}.0.1:0");
    let client_ip = format!("10.{net}.0.2:0");
    let server = in_netns(a, move || {
        let sock = UdpSocket::bind(server_ip).unwrap();
        let addr = sock.local_addr().unwrap();
        sock.set_read_timeout(Some(PATIENCE)).unwrap();
        let echo = std::thread::spawn(move || {
            let mut buf = [0u8; 64];
            // Ends on the client's empty datagram, or after PATIENCE with nothing.
            while let Ok((n, from)) = sock.recv_from(&mut buf) {
                if n == 0 {
                    break;
                }
                sock.send_to(&buf[..n], from).unwrap();
            }
        });
        (addr, echo)
    });
    let (addr, echo): (SocketAddr, _) = server.join().unwrap();
    let client = in_netns(b, move || {
        let sock = UdpSocket::bind(client_ip).unwrap();
        sock.connect(addr).unwrap();
        sock.set_read_timeout(Some(PATIENCE)).unwrap();
        let mut rtts = Vec::new();
        let mut buf = [0u8; 64];
        for i in 0..PINGS as u64 {
            let start = Instant::now();
            sock.send(&i.to_be_bytes()).unwrap();
            let n = sock.recv(&mut buf).expect("a reply within 10 s");
            rtts.push(start.elapsed());
            assert_eq!(&buf[..n], &i.to_be_bytes(), "reply out of order");
        }
        sock.send(&[]).unwrap();
        rtts
    });
    let mut rtts = client.join().unwrap();
    echo.join().unwrap();
    rtts.sort();
    let median = rtts[rtts.len() / 2];
    eprintln!(
        "ping across --delay {delay}: median {:.3} ms, min {:.3} ms, max {:.3} ms over {PINGS}",
        median.as_secs_f64() * 1e3,
        rtts[0].as_secs_f64() * 1e3,
        rtts[rtts.len() - 1].as_secs_f64() * 1e3
    );
    let (status, stats) = link.stop();
    assert_eq!(status, Some(0), "the link exits 0 on SIGINT");
    assert_eq!(stats.len(), 2, "a stats line per direction: {stats:?}");
    for s in &stats {
        // The pings and the closing datagram one way, their replies the other.
        let expected = PINGS as u64 + u64::from(s["from"] == b);
        assert_eq!(count(s, "received"), expected, "{s:?}");
        assert_eq!(count(s, "delivered"), expected, "{s:?}");
        assert_eq!(
            count(s, "lost") + count(s, "duplicated") + count(s, "reordered"),
            0
        );
    }
    assert!(!tun_left(a) && !tun_left(b), "a TUN device was left");
    rtts[0]
}

#[test]
#[ignore = "needs root: network namespaces and TUN devices"]
fn ping_across_5ms_each_way_takes_10ms_more_and_sigint_leaves_nothing() {
    assert_root();
    let (a, b) = (Netns::create("rbl-t1a", ""), Netns::create("rbl-t1b", ""));
    // The same path without a delay first: its round trip (two TUN crossings each way,
    // about 0.25 ms on this loaded VM) is the path's own cost, which a delay adds to.
    let base = ping_fastest(&a.name, &b.name, 81, "0s");
    let delayed = ping_fastest(&a.name, &b.name, 81, "5ms");
    let added = (delayed.as_secs_f64() - base.as_secs_f64()) * 1e3;
    eprintln!("the 5 ms link adds {added:.3} ms per round trip");
    // The margin is the rules' for injected delays, 5% + 100 µs: the 0.2 ms is
    // what the link promises (and what it measures here, printed above), but a VM's vCPU
    // that idled for 5 ms wakes up to ~0.1 ms late on each side, which is the host, not the
    // link, and must not fail CI.
    let margin = 10.0 * 0.05 + 0.1;
    assert!(
        (added - 10.0).abs() <= margin,
        "a 5 ms one-way delay added {added:.3} ms per round trip, not 10 ms ± {margin} ms \
         (base {base:?}, delayed {delayed:?})"
    );
}

#[test]
#[ignore = "needs root: network namespaces and TUN devices"]
fn loss_duplication_and_reordering_are_what_the_receiver_sees() {
    assert_root();
    let (a, b) = (Netns::create("rbl-t2a", ""), Netns::create("rbl-t2b", ""));
    let link = LinkProcess::start(
        &a.name,
        &b.name,
        82,
        &[
            "--delay",
            "2ms",
            "--loss",
            "10%",
            "--duplicate",
            "10%",
            "--reorder",
            "10%",
            "--seed",
            "7",
        ],
    );
    let receiver = in_netns(&b.name, || {
        let sock = UdpSocket::bind("10.82.0.2:0").unwrap();
        let addr = sock.local_addr().unwrap();
        // Quiet for 200 ms (100× the delay) after the last datagram: all are in.
        sock.set_read_timeout(Some(Duration::from_millis(200)))
            .unwrap();
        let got = std::thread::spawn(move || {
            let mut seqs = Vec::new();
            let mut buf = [0u8; 64];
            let deadline = Instant::now() + PATIENCE;
            while Instant::now() < deadline {
                match sock.recv(&mut buf) {
                    Ok(8) => seqs.push(u64::from_be_bytes(buf[..8].try_into().unwrap())),
                    Ok(n) => panic!("datagram of {n} bytes"),
                    Err(_) if !seqs.is_empty() => break,
                    Err(_) => {}
                }
            }
            seqs
        });
        (addr, got)
    });
    let (addr, got): (SocketAddr, _) = receiver.join().unwrap();
    in_netns(&a.name, move || {
        let sock = UdpSocket::bind("10.82.0.1:0").unwrap();
        for i in 0..DATAGRAMS {
            sock.send_to(&i.to_be_bytes(), addr).unwrap();
            let t = Instant::now();
            while t.elapsed() < GAP {
                std::hint::spin_loop();
            }
        }
    })
    .join()
    .unwrap();
    let seqs = got.join().unwrap();
    let (status, stats) = link.stop();
    assert_eq!(status, Some(0));
    let s = stats
        .iter()
        .find(|s| s["from"] == a.name)
        .expect("a to b stats");

    let mut seen = std::collections::HashSet::new();
    let firsts: Vec<u64> = seqs.iter().copied().filter(|q| seen.insert(*q)).collect();
    let dups = seqs.len() - firsts.len();
    // A packet overtook another when one sent before it arrived after it.
    let mut later_min = u64::MAX;
    let mut overtook = 0;
    for &q in firsts.iter().rev() {
        if later_min < q {
            overtook += 1;
        }
        later_min = later_min.min(q);
    }
    eprintln!(
        "link: {s:?}; receiver: {} datagrams, {} distinct, {dups} copies, {overtook} overtook",
        seqs.len(),
        firsts.len()
    );
    assert_eq!(count(s, "received"), DATAGRAMS, "{s:?}");
    assert_eq!(count(s, "delivered"), seqs.len() as u64, "{s:?}");
    assert_eq!(count(s, "lost"), DATAGRAMS - firsts.len() as u64, "{s:?}");
    assert_eq!(count(s, "duplicated"), dups as u64, "{s:?}");
    assert_eq!(count(s, "reordered"), overtook, "{s:?}");
    // The settings did something: 10% of 400 each, so none of these is near zero.
    for key in ["lost", "duplicated", "reordered"] {
        assert!(count(s, key) >= 10, "{key} too few for 10%: {s:?}");
    }
    assert!(
        !tun_left(&a.name) && !tun_left(&b.name),
        "a TUN device was left"
    );
}

#[test]
#[ignore = "needs root: network namespaces and TUN devices"]
fn bad_settings_and_missing_namespaces_leave_nothing() {
    assert_root();
    let bin = env!("CARGO_BIN_EXE_rpcbench-link");
    let a = Netns::create("rbl-t3a", "");
    let run = |args: &[&str]| {
        let out = Command::new(bin).args(args).output().unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).to_string(),
        )
    };
    let sides = [
        "--a",
        "rbl-t3a=10.83.0.1/24",
        "--b",
        "rbl-t3-none=10.83.0.2/24",
    ];
    for (bad, needle) in [
        (&["--delay", "-1ms"][..], "negative"),
        (&["--loss", "101%"], "outside 0 to 100%"),
        (&["--rate", "0mbit"], "rate of 0"),
    ] {
        let (code, err) = run(&[&sides[..], bad].concat());
        assert_eq!(code, Some(2), "{bad:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "one line: {err}");
        assert!(err.contains(needle), "{bad:?}: {err}");
    }
    // Side A is made, side B's namespace is missing: exit 1, and A's device is gone.
    let (code, err) = run(&sides);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("does not exist"), "{err}");
    assert!(!tun_left(&a.name), "side A's device was left");
}

#[test]
#[ignore = "needs root: network namespaces and TUN devices"]
fn testbed_with_the_userspace_link_is_torn_down_on_sigint() {
    assert_root();
    let bin_dir = Path::new(env!("CARGO_BIN_EXE_rpcbench")).parent().unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("report/testbed.sh");
    let out_dir = std::env::temp_dir().join(format!("rpcbench-link-tb-{}", std::process::id()));
    let mut child = Command::new("bash")
        .arg(script)
        .args([
            "--calls",
            "50",
            "--warmup",
            "10",
            "--no-peers",
            "--rtt",
            "2ms",
            "--link",
            "userspace",
        ])
        .arg("--out")
        .arg(&out_dir)
        .env("RPCBENCH_BIN_DIR", bin_dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.as_mut().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert!(
        line.contains("link: userspace rpcbench-link (delay 1.000 ms one way"),
        "{line}"
    );
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    // The script runs its trap once the run in progress ends: well within a minute. Bash
    // 5.2 loses a trapped signal that lands as it forks (2 to 5 in 100 here, whatever the
    // trap), so the test says it again every 10 s, as a user would press Ctrl-C again.
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut next_signal = Instant::now();
    let status = loop {
        if Instant::now() >= next_signal {
            nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT).unwrap();
            next_signal += Duration::from_secs(10);
        }
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("testbed.sh did not stop on SIGINT");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(status.code(), Some(130), "exit 130 after SIGINT");
    // The signal lands as the script starts its server: the trap must know that one too.
    common::netns::assert_testbed_gone();
    // The link's TUN devices lived in the namespaces, which are gone, and die with the
    // link's process, which is gone too.
    let _ = std::fs::remove_dir_all(&out_dir);
}

/// Fresh connections made across the link for the `TCP_INFO` test: at 5% loss each way
/// about one in ten loses its SYN or SYN-ACK (a 1 s wait), so 300 over 8 workers wait
/// about 4 s in all, and a run with none of them is a 1-in-10¹³ event.
const LOSSY_CALLS: &str = "300";

/// Starts `rpcbench-echo` in namespace `ns`, raw TCP on `addr`; killed on drop.
struct EchoInNetns(Child);

impl EchoInNetns {
    fn start(ns: &str, addr: &str) -> EchoInNetns {
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", ns, env!("CARGO_BIN_EXE_rpcbench-echo")])
            .args(["--tcp", addr, "--http", "off"])
            .stderr(Stdio::null());
        EchoInNetns(spawn_until_up(&mut cmd, "listening tcp "))
    }
}

/// Spawns `cmd` with its stdout piped and waits for its first line, which must start
/// with `up` (the program's "ready" line).
fn spawn_until_up(cmd: &mut Command, up: &str) -> Child {
    let mut child = cmd
        .stdout(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("start {cmd:?}: {e}"));
    let mut line = String::new();
    BufReader::new(child.stdout.as_mut().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert!(line.starts_with(up), "not up: {line:?}");
    child
}

impl Drop for EchoInNetns {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
#[ignore = "needs root: network namespaces and TUN devices"]
fn lost_syns_show_as_tcp_info_retransmits_and_explain_the_tail() {
    assert_root();
    let (a, b) = (Netns::create("rbl-t5a", ""), Netns::create("rbl-t5b", ""));
    let link = LinkProcess::start(
        &a.name,
        &b.name,
        88,
        &["--delay", "1ms", "--loss", "5%", "--seed", "13"],
    );
    let _echo = EchoInNetns::start(&a.name, "10.88.0.1:7001");
    let json = std::env::temp_dir().join(format!("rpcbench-tcpinfo-{}.json", std::process::id()));
    // --warmup 0: every connection is a measured call's, so a SYN retry is in the figures.
    // A 10 s timeout outlasts three SYN timeouts in a row (1 + 2 + 4 s). --no-preflight: a
    // probe's lost SYN would read as a firewall (500 ms, under the 1 s SYN retry) and stop
    // the run, and the probe's packets would shift the seeded loss pattern.
    let out = Command::new("ip")
        .args(["netns", "exec", &b.name, env!("CARGO_BIN_EXE_rpcbench")])
        .args([
            "--target",
            "10.88.0.1",
            "--tcp-port",
            "7001",
            "--names",
            "ip",
        ])
        .args(["--transports", "tcp-connect", "-n", LOSSY_CALLS, "-c", "8"])
        .args([
            "--warmup",
            "0",
            "--timeout",
            "10s",
            "--no-progress",
            "--no-preflight",
            "--max-lost",
            "300",
        ])
        .arg("--out")
        .arg(&json)
        .output()
        .unwrap();
    let table = String::from_utf8_lossy(&out.stdout).into_owned();
    // The table wraps its sentences to the terminal's width; read them as one line.
    let flat = table.split_whitespace().collect::<Vec<_>>().join(" ");
    let (status, stats) = link.stop();
    assert_eq!(status, Some(0));
    let text = std::fs::read_to_string(&json).unwrap_or_else(|e| panic!("{e}: {table}"));
    let _ = std::fs::remove_file(&json);
    let report: rpcbench::report::Report = serde_json::from_str(&text).unwrap();
    let run = &report.runs[0];
    let info = run.tcp_info.as_ref().expect("tcp-connect is probed");
    let drops: u64 = stats.iter().map(|s| count(s, "lost")).sum();
    eprintln!("link {stats:?}\n{info:?}\n{table}");
    assert_eq!(
        run.calls,
        run.ok + run.lost + run.mismatched + run.error_total()
    );
    assert_eq!(
        info.connections_sampled, run.connects,
        "every connection read"
    );
    // Physics: the link dropped packets, so some segment went missing; a connection that
    // retried its SYN lost its SYN or SYN-ACK, one dropped packet each (a 1 ms path does
    // not delay a SYN-ACK past the 1 s timer).
    assert!(drops > 0, "{stats:?}");
    assert!(info.retransmits + info.lost + run.lost > 0, "{info:?}");
    assert!(info.syn_retransmitting_connections > 0, "{info:?}");
    assert!(info.syn_retransmits >= info.syn_retransmitting_connections);
    assert!(
        drops >= info.syn_retransmitting_connections,
        "{stats:?} {info:?}"
    );
    assert!(info.retransmits >= info.syn_retransmits, "{info:?}");
    // Each of those calls waited the SYN timeout at least.
    let latency = run.latency_us.as_ref().expect("some calls ok");
    assert!(
        latency.max >= rpcbench::tcpinfo::SYN_TIMEOUT_US,
        "{latency:?}"
    );
    assert!(
        flat.contains("connections retransmitted their SYN (")
            && flat.contains(&format!(
                "{} of {} connections",
                info.syn_retransmitting_connections, info.connections_sampled
            )),
        "the finding names the SYN retries: {table}"
    );
    assert!(
        flat.contains("TCP retransmits per call: tcp-connect"),
        "{table}"
    );
    assert!(
        !tun_left(&a.name) && !tun_left(&b.name),
        "a TUN device was left"
    );
}
