//! Where rpcbench places its own threads (`--placement`), read back from `/proc`: while a
//! run goes on, a watcher samples every thread of this process, and each thread that ran
//! must have been allowed only the CPU the run's record names for its side.
//!
//! One test function, so that no other test's threads share the process.

use clap::Parser;
use rpcbench::cli::bench::BenchArgs;
use rpcbench::placement::Placement;
use rpcbench::report::Report;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::time::Duration;

/// How often the watcher reads every thread's state.
const SAMPLE_EVERY: Duration = Duration::from_millis(2);

/// A thread seen during a run: its name and the CPUs it was allowed.
#[derive(Debug, Clone)]
struct Seen {
    name: String,
    cpus: String,
}

/// This process's thread ids, names and allowed CPUs, now.
fn threads() -> BTreeMap<String, Seen> {
    rpcbench::placement::thread_masks("self")
        .into_iter()
        .map(|t| {
            let seen = Seen {
                name: t.name,
                cpus: t.cpus,
            };
            (t.tid, seen)
        })
        .collect()
}

/// Runs `rpcbench` in-process with `args` while a watcher records every thread it sees;
/// returns the report (or the run's error) and the threads seen, less the watcher and the
/// threads that were there before it, which are not its own.
fn watched(args: &[&str]) -> (Result<Report, String>, BTreeMap<String, Seen>) {
    let before: BTreeMap<String, Seen> = threads();
    let stop = Arc::new(AtomicBool::new(false));
    let stopped = stop.clone();
    let watcher = std::thread::spawn(move || {
        // `/proc/thread-self` links to `PID/task/TID`.
        let own = std::fs::read_link("/proc/thread-self")
            .ok()
            .and_then(|p| Some(p.file_name()?.to_string_lossy().into_owned()));
        let mut seen: BTreeMap<String, Seen> = BTreeMap::new();
        // Bounded: a run here takes well under a minute.
        for _ in 0..30_000 {
            if stopped.load(Relaxed) {
                break;
            }
            // The last sighting: a new thread bears its creator's name until it sets its
            // own, so the first may be the wrong side's name.
            seen.extend(threads());
            std::thread::sleep(SAMPLE_EVERY);
        }
        if let Some(own) = own {
            seen.remove(&own);
        }
        seen
    });
    let mut argv = vec!["rpcbench"];
    argv.extend_from_slice(args);
    let spec = BenchArgs::try_parse_from(&argv).expect("arguments").spec();
    let outcome = rpcbench::bench::run(&spec, &mut ()).map_err(|e| e.to_string());
    stop.store(true, Relaxed);
    let mut seen = watcher.join().unwrap();
    // Threads that were there before the run (the harness, a previous run's idle threads,
    // the process-wide resolver runtime) are not this run's to place.
    seen.retain(|tid, _| !before.contains_key(tid));
    (outcome.map(|o| o.report), seen)
}

/// The CPUs this process may run on.
fn allowed() -> Vec<usize> {
    let list = std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .find_map(|l| {
            l.strip_prefix("Cpus_allowed_list:")
                .map(str::trim)
                .map(String::from)
        })
        .unwrap();
    let mut cpus = Vec::new();
    for part in list.split(',') {
        match part.split_once('-') {
            Some((lo, hi)) => cpus.extend(lo.parse::<usize>().unwrap()..=hi.parse().unwrap()),
            None => cpus.push(part.parse().unwrap()),
        }
    }
    cpus
}

/// The run's transports: raw TCP (a server thread per connection), HTTP/1.1 and HTTP/2 on
/// the server's runtime, h2-mux at 4 workers on the client's event loop, and name lookups
/// through the client's resolver threads.
const ARGS: [&str; 12] = [
    "-n",
    "200",
    "--warmup",
    "10",
    "-c",
    "4",
    "--transports",
    "tcp,http-keepalive,h2,h2-mux,udp",
    "--names",
    "ip,uncached",
    "--no-progress",
    "--rounds",
];

#[test]
fn threads_run_where_the_placement_says() {
    let cpus = allowed();
    let server_thread = |s: &Seen| s.name.starts_with("rpcbench-") && s.name != "rpcbench-dns";
    for placement in [Placement::SameCore, Placement::Split, Placement::None] {
        let mut args = ARGS.to_vec();
        args.extend(["1", "--placement", placement.name()]);
        let (report, seen) = watched(&args);
        if placement == Placement::Split && cpus.len() < 2 {
            let why = report.expect_err("split on one CPU is refused");
            assert!(why.contains("needs two CPUs"), "{why}");
            continue;
        }
        let report = report.unwrap_or_else(|e| panic!("{placement}: {e}"));
        assert_eq!(report.failed(), 0, "{placement}");
        let record = report
            .environment
            .placement
            .clone()
            .expect("the placement is recorded");
        assert_eq!(record.placement, placement);
        let server: Vec<&Seen> = seen.values().filter(|s| server_thread(s)).collect();
        let client: Vec<&Seen> = seen.values().filter(|s| !server_thread(s)).collect();
        assert!(
            server.iter().any(|s| s.name == "rpcbench-tcp"),
            "{placement}: the server's connection threads were seen: {seen:#?}"
        );
        assert!(!client.is_empty(), "{placement}: {seen:#?}");
        match placement {
            Placement::None => {
                assert_eq!((record.client_cpu, record.server_cpu), (None, None));
                let all = rpcbench::placement::cpu_list(&cpus);
                for s in seen.values() {
                    assert_eq!(s.cpus, all, "{placement}: {s:?} left to the scheduler");
                }
            }
            _ => {
                let (c, s) = (record.client_cpu.unwrap(), record.server_cpu.unwrap());
                assert!(cpus.contains(&c) && cpus.contains(&s), "{record:?}");
                assert_eq!(placement == Placement::Split, c != s, "{record:?}");
                for t in &server {
                    assert_eq!(t.cpus, s.to_string(), "{placement}: server thread {t:?}");
                }
                for t in &client {
                    assert_eq!(t.cpus, c.to_string(), "{placement}: client thread {t:?}");
                }
                // The report says where, and the advice to pin is not given.
                assert_eq!(
                    report.environment.cpu_affinity,
                    c.to_string(),
                    "the client's CPUs as recorded"
                );
                assert_eq!(
                    report.server.as_ref().unwrap().settings.cpu_affinity,
                    s.to_string(),
                    "the server's CPUs as it reports them"
                );
                assert_eq!(rpcbench::render::findings::pinning_advice(&report), None);
            }
        }
    }
    // The test's own thread has its mask back.
    let own = std::fs::read_to_string("/proc/thread-self/status").unwrap();
    assert!(
        own.contains(&format!(
            "Cpus_allowed_list:\t{}",
            rpcbench::placement::cpu_list(&cpus)
        )),
        "{own}"
    );
}
