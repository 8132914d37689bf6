//! The client's output formats, checked against each other and against the committed JSON
//! fixture (`tests/fixtures/report.json`), using the real binary and its embedded server.

use rpcbench::render::{SUMMARY_HEADERS, phase_headers, phase_rows, summary_rows};
use rpcbench::report::Report;
use serde_json::Value;
use std::collections::BTreeSet;
use std::process::Command;

const FIXTURE: &str = include_str!("fixtures/report.json");

/// Runs `rpcbench` with its embedded server; returns stdout and the `--out` JSON report.
fn run(format: &str) -> (String, Report) {
    let args = [
        "-n",
        "200",
        "--warmup",
        "0",
        "--timeout",
        "2s",
        "--format",
        format,
    ];
    let (stdout, report, code) = run_args(format, &args);
    assert_eq!(code, Some(0), "rpcbench failed");
    (stdout, report)
}

/// Every key path in a JSON value: arrays collapse to `[]`, and the `errors` map (whose keys
/// are error kinds, data rather than schema) to `{map}`.
fn shape(value: &Value, path: String, out: &mut BTreeSet<String>) {
    match value {
        Value::Object(map) if path.ends_with(".errors") => {
            out.insert(format!("{path}{{map}}"));
            let _ = map;
        }
        Value::Object(map) => {
            for (k, v) in map {
                shape(v, format!("{path}.{k}"), out);
            }
        }
        Value::Array(items) => {
            out.insert(format!("{path}[]"));
            // The union over every element, so a field that is null in one run and an
            // object in another shows both ways.
            for item in items.iter().filter(|v| !v.is_number()) {
                shape(item, format!("{path}[]"), out);
            }
        }
        Value::Null => {
            out.insert(format!("{path}:null"));
        }
        Value::Bool(_) => {
            out.insert(format!("{path}:bool"));
        }
        Value::Number(_) => {
            out.insert(format!("{path}:number"));
        }
        Value::String(_) => {
            out.insert(format!("{path}:string"));
        }
    }
}

fn shape_of(value: &Value) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    shape(value, String::new(), &mut out);
    out
}

#[test]
fn json_matches_the_committed_fixture() {
    // The fixture itself must be a valid report (typed, unknown fields denied)...
    let fixture: Report = serde_json::from_str(FIXTURE).expect("fixture is a Report");
    assert_eq!(
        fixture.runs.len(),
        18,
        "six transports in three address modes"
    );
    // ...and real output must have exactly its shape: no key added, dropped or retyped.
    let (stdout, from_file) = run("json");
    let real: Value = serde_json::from_str(&stdout).expect("stdout is JSON");
    let typed: Report = serde_json::from_value(real.clone()).expect("stdout is a Report");
    assert_eq!(typed, from_file, "--format json and --out agree");
    let expected = shape_of(&serde_json::from_str(FIXTURE).unwrap());
    let got = shape_of(&real);
    let missing: Vec<_> = expected.difference(&got).collect();
    let extra: Vec<_> = got.difference(&expected).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "JSON shape changed; update tests/fixtures/report.json on purpose.\nmissing: {missing:#?}\nextra: {extra:#?}"
    );
    // The numbers obey the report's own rules.
    for r in &typed.runs {
        assert_eq!(
            r.calls,
            r.ok + r.lost + r.mismatched + r.error_total(),
            "{}",
            r.transport
        );
        assert_eq!(r.calls, 200);
        let l = r.latency_us.expect("latency");
        assert!(
            l.min <= l.p50
                && l.p50 <= l.p90
                && l.p90 <= l.p99
                && l.p99 <= l.p999
                && l.p999 <= l.max
        );
        assert!(l.min > 0.0 && l.mean > 0.0);
    }
    assert!(
        typed.started.ends_with('Z') && typed.started.len() == 20,
        "{}",
        typed.started
    );
    assert_eq!(typed.rpcbench, env!("CARGO_PKG_VERSION"));
}

#[test]
fn csv_rows_match_the_report() {
    let (stdout, report) = run("csv");
    let mut blocks = stdout.split("\n\n");
    let summary: Vec<Vec<String>> = blocks
        .next()
        .unwrap()
        .lines()
        .map(|l| l.split(',').map(str::to_string).collect())
        .collect();
    assert_eq!(summary[0], SUMMARY_HEADERS);
    assert_eq!(summary[1..], summary_rows(&report)[..]);
    let phases: Vec<Vec<String>> = blocks
        .next()
        .unwrap()
        .lines()
        .map(|l| l.split(',').map(str::to_string).collect())
        .collect();
    assert_eq!(phases[0], phase_headers());
    assert_eq!(phases[1..], phase_rows(&report)[..]);
    assert_eq!(
        summary.len(),
        19,
        "a header and six transports in three address modes"
    );
}

/// Splits a markdown or box-drawn table row into trimmed cells.
fn cells(line: &str, sep: char) -> Vec<String> {
    line.trim()
        .trim_matches(sep)
        .split(sep)
        .map(|c| c.trim().to_string())
        .collect()
}

#[test]
fn markdown_rows_match_the_report() {
    let (stdout, report) = run("markdown");
    let rows: Vec<Vec<String>> = stdout
        .lines()
        .filter(|l| l.starts_with('|') && !l.starts_with("| ---"))
        .map(|l| cells(l, '|'))
        .collect();
    let summary = summary_rows(&report);
    let phases = phase_rows(&report);
    let n = report.runs.len();
    assert_eq!(rows[0], SUMMARY_HEADERS);
    assert_eq!(rows[1..=n], summary[..]);
    assert_eq!(rows[n + 1], phase_headers());
    assert_eq!(rows[n + 2..], phases[..]);
}

#[test]
fn table_rows_match_the_report() {
    let (stdout, report) = run("table");
    // comfy-table's borders-only preset separates columns with runs of spaces.
    let rows: Vec<Vec<String>> = stdout
        .lines()
        .filter(|l| l.starts_with('│'))
        .map(|l| {
            l.trim_matches('│')
                .split("  ")
                .map(str::trim)
                .filter(|c| !c.is_empty())
                .map(str::to_string)
                .collect()
        })
        .collect();
    let summary = summary_rows(&report);
    assert_eq!(
        rows.len(),
        2 * (summary.len() + 1),
        "two tables, each with a header"
    );
    for (row, expected) in rows[1..=summary.len()].iter().zip(&summary) {
        assert_eq!(row, expected);
    }
    assert!(stdout.contains("lost-call check: every call came back verified"));
    for header in SUMMARY_HEADERS {
        assert!(stdout.contains(header), "{header}");
    }
}

#[test]
fn closed_stdout_exits_quietly() {
    use std::io::Read;
    use std::process::Stdio;
    let mut child = Command::new(env!("CARGO_BIN_EXE_rpcbench"))
        .args(["-n", "50", "--warmup", "0", "--format", "csv"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Close our end before it writes anything, as `rpcbench | head -c 0` would: its first
    // write then fails with EPIPE, which must end the run quietly with status 0.
    drop(child.stdout.take());
    let status = child.wait().unwrap();
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    assert!(status.success(), "status {status:?}, stderr {stderr:?}");
    assert!(stderr.is_empty(), "{stderr}");
}

#[test]
fn bad_usage_exits_2() {
    for args in [
        &["--transports", "smoke-signals"][..],
        &["-c", "0"],
        &["--timeout", "later"],
        &["--rate", "0"],
        &["--rate", "fast"],
    ] {
        let status = Command::new(env!("CARGO_BIN_EXE_rpcbench"))
            .args(args)
            .output()
            .unwrap()
            .status;
        assert_eq!(status.code(), Some(2), "{args:?}");
    }
}

/// Runs `rpcbench` with its embedded server and the given arguments; returns stdout, the
/// JSON report and the exit code.
fn run_args(tag: &str, args: &[&str]) -> (String, Report, Option<i32>) {
    let dir = std::env::temp_dir().join(format!("rpcbench-out-{}-{tag}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let out = dir.join("report.json");
    let output = Command::new(env!("CARGO_BIN_EXE_rpcbench"))
        .args(args)
        .arg("--out")
        .arg(&out)
        .output()
        .expect("run rpcbench");
    let report: Report = serde_json::from_slice(&std::fs::read(&out).unwrap_or_default())
        .unwrap_or_else(|e| {
            panic!(
                "no report ({e}): {}",
                String::from_utf8_lossy(&output.stderr)
            )
        });
    std::fs::remove_dir_all(&dir).ok();
    (
        String::from_utf8(output.stdout).unwrap(),
        report,
        output.status.code(),
    )
}

/// `--rate 200` over two workers: 100 calls take about half a second (99 intervals of
/// 5 ms), the achieved rate is the one asked for, and no call starts late.
#[test]
fn rate_paces_the_calls() {
    let (_, report, code) = run_args(
        "rate",
        &[
            "--rate",
            "200",
            "-n",
            "100",
            "-c",
            "2",
            "--warmup",
            "0",
            "--names",
            "ip",
            "--transports",
            "tcp,http-keepalive",
        ],
    );
    assert_eq!(code, Some(0));
    assert_eq!(report.config.rate_per_s, Some(200.0));
    for run in &report.runs {
        assert_eq!(run.calls, 100, "{}", run.transport);
        assert_eq!(run.ok, 100, "{}", run.transport);
        assert!(
            (0.48..1.5).contains(&run.elapsed_s),
            "{}: 100 calls at 200/s took {:.3} s",
            run.transport,
            run.elapsed_s
        );
        assert!(
            (150.0..=205.0).contains(&run.calls_per_s),
            "{}: {:.1} calls/s for --rate 200",
            run.transport,
            run.calls_per_s
        );
        assert!(run.late <= 5, "{}: {} late", run.transport, run.late);
        // Pacing leaves latency alone: a paced loopback call is still far below 5 ms.
        assert!(run.latency_us.unwrap().p50 < 2_000.0, "{}", run.transport);
    }
}

/// A rate the server cannot keep up with (3 ms per call, asked for one per millisecond)
/// is reported: calls count as late, the table says so, and every call is still ok.
#[test]
fn unheld_rate_counts_late_calls() {
    let (stdout, report, code) = run_args(
        "late",
        &[
            "--rate",
            "1000",
            "--delay-us",
            "3000",
            "-n",
            "20",
            "--warmup",
            "0",
            "--names",
            "ip",
            "--transports",
            "tcp",
        ],
    );
    assert_eq!(code, Some(0), "late calls are not failures");
    let run = &report.runs[0];
    assert_eq!(run.ok, 20);
    // Call k is due at k ms but cannot start before about 3k ms: late from the second on.
    assert!(run.late >= 15, "late {}", run.late);
    assert!(run.late <= 19, "late {}", run.late);
    assert!(
        stdout.contains(&format!(
            "{} calls started more than one interval late",
            run.late
        )),
        "{stdout}"
    );
}
