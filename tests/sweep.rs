//! `rpcbench sweep` end to end, against the embedded server: the steps it writes, the
//! corrected latency, the capacity search against a server whose capacity is known, and
//! the usage errors. Nothing here is gated on speed: the capacity check rests on a 2 ms
//! server delay, which no machine can beat.

mod common;

use rpcbench::sweep::{Miss, SweepAxis, SweepReport};
use std::process::Command;
use std::time::{Duration, Instant};

/// Runs `rpcbench sweep ARGS --format json`; returns the exit code, the report (if the
/// output parsed) and stderr.
fn sweep(args: &[&str]) -> (Option<i32>, Option<SweepReport>, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_rpcbench"))
        .arg("sweep")
        .args(args)
        .args(["--format", "json", "--no-progress"])
        .output()
        .expect("run rpcbench sweep");
    let stdout = String::from_utf8_lossy(&out.stdout);
    (
        out.status.code(),
        serde_json::from_str(&stdout).ok(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn three_rates_make_three_steps_and_the_corrected_latency_is_never_lower() {
    let (code, report, stderr) = sweep(&[
        "--transports",
        "tcp,http-keepalive",
        "--names",
        "ip",
        "--rates",
        "200,400,800",
        "--slo",
        "p99=1s",
        "--step-duration",
        "500ms",
    ]);
    assert!(matches!(code, Some(0 | 1)), "{stderr}");
    let report = report.expect("JSON on stdout");
    assert_eq!(report.axis, SweepAxis::Rate);
    assert_eq!(report.series.len(), 2);
    for series in &report.series {
        let offered: Vec<Option<f64>> = series.steps.iter().map(|s| s.offered_per_s).collect();
        assert_eq!(
            offered,
            [Some(200.0), Some(400.0), Some(800.0)],
            "{}",
            series.transport
        );
        for step in &series.steps {
            let run = &step.run;
            assert_eq!(
                run.calls, run.ok,
                "{}: every call verified",
                series.transport
            );
            // Timed from when it was due, a call can only be as slow or slower.
            let corrected = step.slo_latency_us.expect("corrected p99");
            let actual = run.latency_us.expect("latency").p99;
            assert!(
                corrected >= actual,
                "{} at {:?}/s: corrected p99 {corrected} < actual {actual}",
                series.transport,
                step.offered_per_s
            );
            assert_eq!(step.meets_slo, Some(true), "{step:?}");
        }
        assert_eq!(
            series.capacity_per_s,
            Some(800.0),
            "the highest listed rate that passed"
        );
    }
}

#[test]
fn the_capacity_search_finds_what_one_connection_with_a_2ms_delay_can_take() {
    // One connection, 2 ms per call at the server: at most 500 calls/s, whatever the
    // machine. Pinned to one CPU, as every measurement should be; the embedded server
    // runs in the same process.
    let started = Instant::now();
    let out = Command::new("taskset")
        .args(["-c", "0"])
        .arg(env!("CARGO_BIN_EXE_rpcbench"))
        .args([
            "sweep",
            "--transports",
            "tcp",
            "--names",
            "ip",
            "-c",
            "1",
            "--delay-us",
            "2000",
            "--slo",
            "p99=10ms",
            "--step-duration",
            "2s",
            "--format",
            "json",
            "--no-progress",
        ])
        .output()
        .expect("run taskset rpcbench sweep");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let report: SweepReport =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {stderr}"));
    assert_eq!(report.axis, SweepAxis::Search);
    let series = &report.series[0];
    let slo = report.slo.as_ref().expect("the objective in the JSON");
    let steps: Vec<String> = series
        .steps
        .iter()
        .map(|s| {
            format!(
                "{:?} -> {:?} ({:?})",
                s.offered_per_s, s.meets_slo, s.why_not
            )
        })
        .collect();
    // The first step is closed loop, then a ramp and bisection: a handful of steps.
    assert_eq!(series.steps[0].offered_per_s, None);
    // Physics: one connection and 2 ms per call at the server allow 500 calls/s at most,
    // whatever this machine's own cost per call adds.
    let flat_out = series.steps[0].achieved_per_s;
    assert!(
        flat_out > 0.0 && flat_out <= 500.0,
        "closed loop {flat_out:.0}/s against a 2 ms delay"
    );
    // Every verdict is what the step's own figures say, as values: a step met the
    // objective exactly when it has no miss, and each miss agrees with its numbers. The
    // words in the JSON are those misses said, nothing else.
    for step in series.steps.iter().filter(|s| s.offered_per_s.is_some()) {
        let misses = step.misses(slo);
        assert_eq!(step.meets_slo, Some(misses.is_empty()), "{step:?}");
        assert_eq!(
            step.why_not,
            (!misses.is_empty()).then(|| rpcbench::render::sweep::why_not(&misses)),
            "{misses:?}"
        );
        for miss in misses {
            match miss {
                Miss::Above {
                    latency_us,
                    bound_us,
                    ..
                } => assert!(latency_us > bound_us && bound_us == 10_000.0, "{miss:?}"),
                Miss::NoCallSucceeded => assert_eq!(step.slo_latency_us, None, "{step:?}"),
                Miss::Failed { failed, calls } => {
                    assert!(failed > 0 && failed <= calls, "{miss:?}")
                }
                Miss::FellBehind {
                    achieved_per_s,
                    offered_per_s,
                } => assert!(achieved_per_s < offered_per_s, "{miss:?}"),
            }
        }
    }
    let met: Vec<f64> = series
        .steps
        .iter()
        .filter(|s| s.meets_slo == Some(true))
        .filter_map(|s| s.offered_per_s)
        .collect();
    // How far below 500/s the capacity lies is this machine's cost per call and how busy
    // it is (a CI host beside other builds ran the closed loop at 247/s and kept no
    // rate's p99 under 10 ms): not judged here. What is judged holds on any machine.
    match series.capacity_per_s {
        None => assert!(
            met.is_empty(),
            "a rate met the objective; steps:\n{}",
            steps.join("\n")
        ),
        Some(capacity) => {
            // Physics: no rate above what 2 ms per call allows.
            assert!(
                capacity <= 500.0 * 1.1,
                "capacity {capacity:.0}/s beats a 2 ms delay; steps:\n{}",
                steps.join("\n")
            );
            // The search did what it says: the capacity is the highest offered rate that
            // met the objective, and a higher rate was tried and failed within one ramp
            // factor, so the capacity is bracketed.
            assert_eq!(capacity, met.iter().copied().fold(0.0, f64::max));
            let failed_above = series
                .steps
                .iter()
                .filter(|s| s.meets_slo == Some(false))
                .filter_map(|s| s.offered_per_s)
                .filter(|&r| r > capacity)
                .fold(f64::INFINITY, f64::min);
            assert!(
                failed_above <= capacity * 1.5,
                "no failed rate within one ramp factor above {capacity:.0}/s; steps:\n{}",
                steps.join("\n")
            );
        }
    }
    assert!(series.steps.len() <= 20, "{}", steps.join("\n"));
    assert!(started.elapsed() < Duration::from_secs(120));
}

#[test]
fn payload_steps_report_goodput_both_ways() {
    let (code, report, stderr) = sweep(&[
        "--transports",
        "tcp,http-keepalive",
        "--names",
        "ip",
        "--payloads",
        "64,16k,256k",
        "--step-duration",
        "300ms",
    ]);
    assert_eq!(code, Some(0), "{stderr}");
    let report = report.expect("JSON on stdout");
    assert_eq!(report.axis, SweepAxis::Payload);
    for series in &report.series {
        let sizes: Vec<u32> = series.steps.iter().map(|s| s.payload_bytes).collect();
        assert_eq!(sizes, [64, 16 << 10, 256 << 10]);
        for step in &series.steps {
            assert!(step.run.ok > 0 && step.run.failed() == 0, "{step:?}");
            // Goodput is bytes of verified calls over the wall time, each way.
            let expected =
                step.run.ok as f64 * f64::from(step.payload_bytes) / step.run.elapsed_s / 1e6;
            assert!((step.goodput_out_mb_s - expected).abs() <= 1e-9 * expected.max(1.0));
            assert_eq!(step.goodput_in_mb_s, step.goodput_out_mb_s, "an echo");
            assert_eq!(step.meets_slo, None);
        }
    }
}

#[test]
fn concurrency_steps_run_each_worker_count() {
    let (code, report, stderr) = sweep(&[
        "--transports",
        "tcp",
        "--names",
        "ip",
        "-c",
        "1,2,4",
        "--step-duration",
        "300ms",
    ]);
    assert_eq!(code, Some(0), "{stderr}");
    let report = report.expect("JSON on stdout");
    assert_eq!(report.axis, SweepAxis::Concurrency);
    let steps = &report.series[0].steps;
    let levels: Vec<usize> = steps.iter().map(|s| s.concurrency).collect();
    assert_eq!(levels, [1, 2, 4]);
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
    for step in steps {
        assert_eq!(step.run.workers, step.concurrency);
        assert_eq!(
            step.run.connects, step.concurrency as u64,
            "one connection per worker"
        );
        // The server's cost: every measured call (and the warm-up) reached it, and its
        // threads cannot have used more CPU than the machine has over a step of 300 ms
        // (plus a second for connecting and warming up, and a 10 ms clock tick).
        let cost = step
            .server
            .as_ref()
            .expect("the embedded server's counters");
        assert!(cost.requests >= step.run.calls, "{cost:?}");
        let per_call = cost.cpu_user_us_per_call.unwrap() + cost.cpu_system_us_per_call.unwrap();
        let total_s = per_call * cost.requests as f64 / 1e6;
        assert!(
            (0.0..=1.3 * cpus + 0.01).contains(&total_s),
            "{total_s} s of server CPU in one step: {cost:?}"
        );
        assert!(cost.rss_bytes > 0, "{cost:?}");
    }
}

#[test]
fn bad_sweeps_are_usage_errors() {
    for bad in [
        &["--rates", "5k,1k"][..],
        &["--rates", "1k,1k"],
        &["--rates", "0"],
        &["--rates", "-5"],
        &["--slo", "p99"],
        &["--slo", "p100=1ms"],
        &["--slo", "fast"],
        &["-c", "4,2"],
        &["--payloads", "64,64"],
        &["--rates", "1k", "--payloads", "64"],
        &[],
        &["--rates", "1k", "--duration", "1s"],
    ] {
        let started = Instant::now();
        let (code, _, stderr) = sweep(bad);
        assert_eq!(code, Some(2), "{bad:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{bad:?}: one line: {stderr}");
        assert!(stderr.starts_with("rpcbench: "), "{bad:?}: {stderr}");
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "{bad:?}: at once"
        );
    }
}

#[test]
fn each_mode_is_its_own_series_run_in_that_mode() {
    let (code, report, stderr) = sweep(&[
        "--transports",
        "tcp",
        "--names",
        "ip,uncached",
        "--rates",
        "200",
        "--step-duration",
        "200ms",
    ]);
    assert_eq!(code, Some(0), "{stderr}");
    let report = report.expect("JSON on stdout");
    let modes: Vec<String> = report
        .series
        .iter()
        .map(|s| s.addr_mode.to_string())
        .collect();
    assert_eq!(modes, ["ip", "uncached"]);
    for series in &report.series {
        for step in &series.steps {
            assert_eq!(
                step.run.addr_mode, series.addr_mode,
                "the step ran in its series' mode"
            );
        }
    }
    assert!(
        report.series[1].steps[0].run.dns_queries >= 1,
        "uncached asks DNS"
    );
}

/// The step tables fit 80, 100 and 120 columns with the longest transport and mode names
/// and name their units; `--format csv` is one tidy table, a row per step, that holds the
/// JSON's values; markdown has a row per step.
#[test]
fn sweep_tables_fit_the_terminal_and_csv_holds_the_json() {
    use rpcbench::render::RenderOptions;
    let dir = std::env::temp_dir().join(format!("rpcbench-sweep-csv-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let json = dir.join("sweep.json");
    let out = Command::new(env!("CARGO_BIN_EXE_rpcbench"))
        .args([
            "sweep",
            "--transports",
            "http-keepalive",
            "--names",
            "uncached",
            "--rates",
            "200,400",
            "--slo",
            "p99.9=1s",
            "--step-duration",
            "200ms",
            "--no-progress",
            "--format",
            "csv",
            "--out",
        ])
        .arg(&json)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: SweepReport = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    std::fs::remove_dir_all(&dir).ok();
    let csv = String::from_utf8(out.stdout).unwrap();
    let rows: Vec<Vec<&str>> = csv.lines().map(|l| l.split(',').collect()).collect();
    let steps: Vec<_> = report.series.iter().flat_map(|s| &s.steps).collect();
    assert_eq!(rows.len(), 1 + steps.len(), "{csv}");
    assert!(rows.iter().all(|r| r.len() == rows[0].len()));
    let col = |name: &str| rows[0].iter().position(|h| *h == name).unwrap();
    for (row, step) in rows[1..].iter().zip(&steps) {
        assert_eq!(row[col("transport")], "http-keepalive");
        assert_eq!(row[col("mode")], "uncached");
        assert_eq!(
            row[col("offered_per_s")].parse::<f64>().ok(),
            step.offered_per_s
        );
        assert_eq!(
            row[col("achieved_per_s")].parse::<f64>().unwrap(),
            step.achieved_per_s
        );
        assert_eq!(
            row[col("slo_latency_us")].parse::<f64>().ok(),
            step.slo_latency_us
        );
        let p99 = step.run.latency_intended_us.map(|l| l.p99);
        assert_eq!(row[col("intended_p99_us")].parse::<f64>().ok(), p99);
    }
    for width in [80, 100, 120] {
        let mut text = Vec::new();
        let options = RenderOptions { width, wide: false };
        rpcbench::render::sweep::write(&report, &options, &mut text).unwrap();
        let text = String::from_utf8(text).unwrap();
        assert!(
            text.lines().all(|l| l.chars().count() <= width),
            "at {width}:\n{text}"
        );
        let header = text.lines().find(|l| l.starts_with("transport")).unwrap();
        for must in ["offered/s", "achieved/s", "p99 "] {
            assert!(header.contains(must), "{must} at {width}: {header}");
        }
        for h in header
            .split("  ")
            .map(str::trim)
            .filter(|h| h.starts_with('p'))
        {
            assert!(
                h.ends_with("µs") || h.ends_with("ms") || h.ends_with(" s"),
                "{h}"
            );
        }
    }
    let mut md = Vec::new();
    rpcbench::render::sweep::write_markdown(&report, &mut md).unwrap();
    let md = String::from_utf8(md).unwrap();
    assert_eq!(
        md.lines()
            .filter(|l| l.starts_with("| http-keepalive |"))
            .count(),
        steps.len()
    );
}

/// A server that goes away in the middle of a sweep: the step it dies in ends with every
/// call counted (ok before, refused or lost after), and the sweep goes on to report every
/// step, exit 1.
#[test]
fn a_server_gone_mid_sweep_ends_its_step_counted_and_the_sweep_goes_on() {
    let server = common::EchoProcess::spawn(&[]);
    let (tcp, http) = (
        server.tcp.port().to_string(),
        server.http.port().to_string(),
    );
    let killer = std::thread::spawn(move || {
        // Step one runs for the first second; the server goes halfway through step two.
        std::thread::sleep(Duration::from_millis(1500));
        server.signal(nix::sys::signal::Signal::SIGKILL);
        server
    });
    let (code, report, stderr) = sweep(&[
        "--target",
        "127.0.0.1",
        "--tcp-port",
        &tcp,
        "--http-port",
        &http,
        "--transports",
        "tcp",
        "-c",
        "1,2,4",
        "--step-duration",
        "1s",
        "--timeout",
        "1s",
    ]);
    drop(killer.join().unwrap());
    assert_eq!(code, Some(1), "{stderr}");
    let report = report.expect("JSON on stdout");
    let steps = &report.series[0].steps;
    assert_eq!(steps.len(), 3, "every step reported");
    for s in steps {
        let r = &s.run;
        assert_eq!(
            r.calls,
            r.ok + r.lost + r.mismatched + r.error_total(),
            "{r:?}"
        );
        assert!(r.calls > 0, "{r:?}");
    }
    assert_eq!(
        steps[0].run.failed(),
        0,
        "before the server went: {:?}",
        steps[0].run
    );
    assert!(steps[0].server.is_some());
    assert_eq!(
        steps[2].run.ok, 0,
        "after the server went: {:?}",
        steps[2].run
    );
    assert!(
        steps[2].run.errors.contains_key("connect_refused"),
        "{:?}",
        steps[2].run.errors
    );
}
