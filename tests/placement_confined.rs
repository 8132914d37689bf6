//! Placement within a confined CPU set: `rpcbench` and `rpcbench-echo` started under
//! `taskset` on one CPU that is not the first of those this test was given must keep
//! every thread on that CPU, read back from the child's `/proc/PID/task/*/status` while it
//! runs. `taskset` only sets the starting mask; a thread may set any other mask for
//! itself, so this checks that rpcbench picks its CPUs from the set it was given.

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How often the child's threads are read.
const SAMPLE_EVERY: Duration = Duration::from_millis(2);
/// The longest a child may take before the test gives up on it.
const CHILD_LIMIT: Duration = Duration::from_secs(60);

/// The CPUs this test process may run on.
fn allowed() -> Vec<usize> {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let list = status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .unwrap()
        .trim();
    rpcbench::placement::parse_cpu_list(list).unwrap()
}

/// The `Cpus_allowed_list` of every thread of `pid` now, by thread name.
fn thread_masks(pid: u32) -> Vec<(String, String)> {
    rpcbench::placement::thread_masks(&pid.to_string())
        .into_iter()
        .map(|t| (t.name, t.cpus))
        .collect()
}

/// Samples the child's threads until it exits (or `until` says stop); returns every
/// (name, mask) pair seen.
fn watch(
    child: &mut Child,
    mut until: impl FnMut(&[(String, String)]) -> bool,
) -> BTreeSet<(String, String)> {
    let started = Instant::now();
    let mut seen = BTreeSet::new();
    loop {
        // Before `taskset` execs the binary the child is a copy of this test (or taskset
        // itself, on the mask it was given): only the program's own threads count.
        let comm = std::fs::read_to_string(format!("/proc/{}/comm", child.id()));
        let started_program =
            comm.is_ok_and(|c| ["rpcbench", "rpcbench-echo"].contains(&c.trim_end()));
        let now = if started_program {
            thread_masks(child.id())
        } else {
            Vec::new()
        };
        let stop = until(&now);
        seen.extend(now);
        if stop || child.try_wait().unwrap().is_some() {
            break;
        }
        if started.elapsed() > CHILD_LIMIT {
            let _ = child.kill();
            panic!("the child ran past {CHILD_LIMIT:?}");
        }
        std::thread::sleep(SAMPLE_EVERY);
    }
    seen
}

#[test]
fn rpcbench_places_its_threads_inside_the_set_it_was_given() {
    let cpus = allowed();
    if cpus.len() < 2 {
        eprintln!("skipped: one CPU, so no CPU other than the first to confine a child to");
        return;
    }
    let last = *cpus.last().unwrap();
    for placement in ["auto", "same-core", "none"] {
        let mut child = Command::new("taskset")
            .args(["-c", &last.to_string(), env!("CARGO_BIN_EXE_rpcbench")])
            .args([
                "-n",
                "300",
                "--warmup",
                "10",
                "--no-progress",
                "--format",
                "json",
            ])
            .args([
                "--transports",
                "tcp,http-keepalive,h2,udp",
                "--names",
                "ip,uncached",
            ])
            .args(["--placement", placement])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("taskset and rpcbench start");
        let seen = watch(&mut child, |_| false);
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "{placement}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(seen.len() > 3, "{placement}: threads seen: {seen:?}");
        for (name, mask) in &seen {
            assert_eq!(
                mask,
                &last.to_string(),
                "{placement}: thread {name} left CPU {last}"
            );
        }
        let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let record = &report["environment"]["placement"];
        let expect = match placement {
            "none" => serde_json::Value::Null,
            _ => serde_json::json!(last),
        };
        assert_eq!(record["client_cpu"], expect, "{placement}: {record}");
        assert_eq!(record["server_cpu"], expect, "{placement}: {record}");
        assert_eq!(record["allowed"], last.to_string(), "{placement}: {record}");
    }
    // Split needs two CPUs, and the child was given one: refused in one line, exit 1.
    let out = Command::new("taskset")
        .args(["-c", &last.to_string(), env!("CARGO_BIN_EXE_rpcbench")])
        .args(["-n", "10", "--no-progress", "--placement", "split"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("needs two CPUs"), "{stderr}");
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
}

#[test]
fn rpcbench_echo_cpus_confines_the_server_within_its_set() {
    let cpus = allowed();
    let last = *cpus.last().unwrap();
    let mut echo = Command::new(env!("CARGO_BIN_EXE_rpcbench-echo"))
        .args([
            "--tcp",
            "127.0.0.1:0",
            "--http",
            "127.0.0.1:0",
            "--udp",
            "127.0.0.1:0",
        ])
        .args(["--cpus", &last.to_string()])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(echo.stdout.take().unwrap()).lines();
    let mut tcp = None;
    for line in lines.by_ref().take(8) {
        let line = line.unwrap();
        if let Some(addr) = line.strip_prefix("listening tcp ") {
            tcp = Some(addr.to_string());
        }
        if line.starts_with("listening udp ") {
            break;
        }
    }
    let tcp = tcp.expect("a listening tcp line");
    // Calls make the server start its connection threads; they must inherit the mask.
    let port = tcp.rsplit(':').next().unwrap();
    let mut client = Command::new(env!("CARGO_BIN_EXE_rpcbench"))
        .args([
            "--target",
            "127.0.0.1",
            "--tcp-port",
            port,
            "--transports",
            "tcp",
        ])
        .args(["-n", "200", "-c", "4", "--no-progress", "--no-preflight"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut saw_connection_thread = false;
    let seen = watch(&mut echo, |now| {
        saw_connection_thread |= now.iter().any(|(n, _)| n == "rpcbench-tcp");
        client.try_wait().unwrap().is_some()
    });
    let _ = echo.kill();
    let _ = echo.wait();
    assert!(client.wait().unwrap().success());
    assert!(
        saw_connection_thread || seen.iter().any(|(n, _)| n == "rpcbench-tcp"),
        "{seen:?}"
    );
    for (name, mask) in &seen {
        assert_eq!(mask, &last.to_string(), "server thread {name}");
    }
    // A CPU outside the set the process was given is refused, in one line, exit 1.
    if cpus.len() >= 2 {
        let first = cpus[0];
        let out = Command::new("taskset")
            .args(["-c", &last.to_string(), env!("CARGO_BIN_EXE_rpcbench-echo")])
            .args([
                "--tcp",
                "127.0.0.1:0",
                "--http",
                "off",
                "--cpus",
                &first.to_string(),
            ])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains(&format!(
                "--cpus: CPU {first} is not one this process may run on"
            )),
            "{stderr}"
        );
        assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    }
    // A list that is not one is a usage error (exit 2).
    let out = Command::new(env!("CARGO_BIN_EXE_rpcbench-echo"))
        .args(["--cpus", "1-a"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}
