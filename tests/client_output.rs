//! The client's output formats, checked against each other and against the committed JSON
//! fixture (`tests/fixtures/report.json`), using the real binary and its embedded server.

use rpcbench::render::{
    CSV_HEADERS, Format, RenderOptions, SummaryColumn, phase_grid, render, summary_grid,
};
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
        21,
        "six transports in three address modes, h2-mux at the default run's 16 workers, a grpc-stream run (no first-byte phase) and a quic-connect run (tls13: a handshake phase, no connect)"
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

/// The committed fixture reads into the typed model and writes back byte for byte: the
/// enums (transport, address mode, family) serialise as the strings they always were.
#[test]
fn fixture_round_trips_byte_for_byte() {
    let fixture: Report = serde_json::from_str(FIXTURE).expect("fixture is a Report");
    let mut written = Vec::new();
    render(&fixture, Format::Json, &RenderOptions::WIDE, &mut written).unwrap();
    assert!(
        String::from_utf8(written).unwrap() == FIXTURE,
        "the JSON of tests/fixtures/report.json changed when read and written back"
    );
}

/// Splits CSV text into rows of cells (no cell is ever quoted).
fn csv_rows(text: &str) -> Vec<Vec<String>> {
    text.lines()
        .map(|l| l.split(',').map(str::to_string).collect())
        .collect()
}

/// A CSV cell as a number, `None` for an empty one.
fn number(cell: &str) -> Option<f64> {
    (!cell.is_empty()).then(|| cell.parse().unwrap_or_else(|_| panic!("{cell:?}")))
}

#[test]
fn csv_is_one_table_that_equals_the_json() {
    let (stdout, report) = run("csv");
    let rows = csv_rows(&stdout);
    let header = &rows[0];
    assert_eq!(header[..CSV_HEADERS.len()], CSV_HEADERS);
    assert!(
        rows.iter().all(|r| r.len() == header.len()),
        "every line has {} fields",
        header.len()
    );
    assert_eq!(
        rows.iter().filter(|r| *r == header).count(),
        1,
        "the header comes once"
    );
    assert_eq!(
        rows.len(),
        1 + report.runs.len(),
        "a row per run, nothing else"
    );
    let col = |name: &str| {
        header
            .iter()
            .position(|h| h == name)
            .unwrap_or_else(|| panic!("no column {name}"))
    };
    for (row, r) in rows[1..].iter().zip(&report.runs) {
        let cell = |name: &str| row[col(name)].as_str();
        assert_eq!(cell("transport"), r.transport.to_string());
        assert_eq!(cell("mode"), r.addr_mode.to_string());
        for (name, value) in [
            ("calls", r.calls),
            ("ok", r.ok),
            ("lost", r.lost),
            ("mismatched", r.mismatched),
            ("errors", r.error_total()),
            ("connects", r.connects),
            ("dns_queries", r.dns_queries),
        ] {
            assert_eq!(cell(name), value.to_string(), "{name}");
        }
        let lat = r.latency_us.expect("latency");
        assert_eq!(r.latency_intended_us, None, "back to back: no due times");
        assert_eq!(cell("intended_p99_us"), "", "{}", r.transport);
        for (name, value) in [
            ("concurrency_achieved", Some(r.concurrency_achieved)),
            ("elapsed_s", Some(r.elapsed_s)),
            ("calls_per_s", Some(r.calls_per_s)),
            ("mean_us", Some(lat.mean)),
            ("p50_us", Some(lat.p50)),
            ("p99_us", Some(lat.p99)),
            ("max_us", Some(lat.max)),
            ("cpu_user_s", Some(r.cpu_user_s)),
            ("dns_mean_us", r.phases_us.dns.map(|s| s.mean)),
            ("connect_p99_us", r.phases_us.connect.map(|s| s.p99)),
            ("first_byte_mean_us", r.phases_us.first_byte.map(|s| s.mean)),
            ("server_p99_us", r.phases_us.server.map(|s| s.p99)),
        ] {
            // Full precision both ways: the very same numbers, not rounded copies.
            assert_eq!(number(cell(name)), value, "{} {name}", r.transport);
        }
    }
}

/// Splits a markdown table row into trimmed cells.
fn cells(line: &str) -> Vec<String> {
    line.trim()
        .trim_matches('|')
        .split('|')
        .map(|c| c.trim().to_string())
        .collect()
}

#[test]
fn markdown_rows_match_the_report() {
    let (stdout, report) = run("markdown");
    let rows: Vec<Vec<String>> = stdout
        .lines()
        .filter(|l| l.starts_with('|') && !l.starts_with("| ---"))
        .map(cells)
        .collect();
    let summary = summary_grid(&report, &RenderOptions::WIDE);
    let phases = phase_grid(&report, &RenderOptions::WIDE);
    let n = report.runs.len();
    assert_eq!(
        summary.headers.len(),
        SummaryColumn::ALL.len() - SummaryColumn::START.len() - SummaryColumn::ENCODED.len(),
        "every column but the start latency, which only a paced run has, and an encoded run's"
    );
    assert_eq!(rows[0], summary.headers);
    assert_eq!(rows[1..=n], summary.rows[..]);
    assert_eq!(rows[n + 1], phases.headers);
    assert_eq!(rows[n + 2..], phases.rows[..]);
}

/// The header line of the first table in `text`: the line above the first rule.
fn header_line(text: &str) -> &str {
    let lines: Vec<&str> = text.lines().collect();
    let rule = lines
        .iter()
        .position(|l| l.starts_with('─'))
        .expect("a table");
    lines[rule - 1]
}

/// True for a header naming a duration statistic, which must say its unit.
fn is_duration_header(h: &str) -> bool {
    let stat = h.split(' ').next().unwrap_or_default();
    [
        "mean", "p50", "p90", "p99", "p99.9", "max", "stddev", "total", "start",
    ]
    .contains(&stat)
        || ["dns", "connect", "first", "server"].contains(&stat)
}

#[test]
fn the_table_fits_80_100_and_120_columns_and_names_its_units() {
    let fixture: Report = serde_json::from_str(FIXTURE).unwrap();
    let mut shown = Vec::new();
    for width in [80, 100, 120] {
        let options = RenderOptions { width, wide: false };
        let mut out = Vec::new();
        render(&fixture, Format::Table, &options, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        for line in text.lines() {
            assert!(
                line.chars().count() <= width,
                "{} columns at width {width}:\n{line}",
                line.chars().count()
            );
        }
        for grid in [
            summary_grid(&fixture, &options),
            phase_grid(&fixture, &options),
        ] {
            for h in grid.headers.iter().filter(|h| is_duration_header(h)) {
                assert!(
                    h.ends_with(" µs") || h.ends_with(" ms") || h.ends_with(" s"),
                    "{h:?} names no unit"
                );
            }
            // The rendered table shows exactly these headers.
            assert!(
                grid.headers.iter().all(|h| text.contains(h.as_str())),
                "{:?} at {width}:\n{text}",
                grid.headers
            );
        }
        let headers = summary_grid(&fixture, &options).headers;
        assert!(header_line(&text).starts_with("transport"), "{text}");
        for must in ["transport", "mode", "mean µs", "p99 µs", "failed"] {
            assert!(
                headers.iter().any(|h| h == must),
                "{must} at {width}: {headers:?}"
            );
        }
        shown.push(headers.len());
        // Findings after the tables, wrapped like everything else.
        let table_end = text.rfind('─').unwrap();
        assert!(text[table_end..].contains("- No call was lost"), "{text}");
    }
    assert!(
        shown.windows(2).all(|w| w[0] <= w[1]),
        "wider shows more: {shown:?}"
    );
    // --wide: every column, whatever the width.
    let wide = summary_grid(
        &fixture,
        &RenderOptions {
            width: 80,
            wide: true,
        },
    );
    assert_eq!(
        wide.headers.len(),
        SummaryColumn::ALL.len() - SummaryColumn::START.len() - SummaryColumn::ENCODED.len()
    );
    let mut out = Vec::new();
    render(
        &fixture,
        Format::Table,
        &RenderOptions {
            width: 80,
            wide: true,
        },
        &mut out,
    )
    .unwrap();
    let text = String::from_utf8(out).unwrap();
    for h in &wide.headers {
        assert!(text.contains(h.as_str()), "--wide lacks {h}");
    }
    assert!(!text.contains("--wide adds"), "nothing is left out");
}

/// Cells of a terminal table row: runs of two spaces or more separate them.
fn table_cells(line: &str) -> Vec<String> {
    line.split("  ")
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .map(str::to_string)
        .collect()
}

#[test]
fn a_plain_run_prints_its_table_then_its_findings() {
    let args = [
        "-n",
        "50",
        "--warmup",
        "5",
        "--transports",
        "tcp,http-keepalive",
    ];
    let (stdout, report, code) = run_args_env("findings", &args, &[("COLUMNS", "100")]);
    assert_eq!(code, Some(0), "{stdout}");
    let options = RenderOptions {
        width: 100,
        wide: false,
    };
    let grid = summary_grid(&report, &options);
    let lines: Vec<&str> = stdout.lines().collect();
    let header_at = lines
        .iter()
        .position(|l| table_cells(l) == grid.headers)
        .unwrap_or_else(|| panic!("no summary header {:?}:\n{stdout}", grid.headers));
    for (line, expected) in lines[header_at + 2..].iter().zip(&grid.rows) {
        assert_eq!(&table_cells(line), expected);
    }
    assert!(lines.iter().all(|l| l.chars().count() <= 100), "{stdout}");
    // The findings, the same sentences the report computes, after the last table.
    let last_rule = lines.iter().rposition(|l| l.starts_with('─')).unwrap();
    let after = lines[last_rule..].join("\n");
    let findings = rpcbench::analysis::findings(&report, &[], None);
    assert!(findings.len() >= 3, "{findings:?}");
    for f in &findings {
        let f = rpcbench::render::findings::sentence(f);
        let first_words: String = f.split(' ').take(4).collect::<Vec<_>>().join(" ");
        assert!(
            after.contains(&first_words),
            "{first_words:?} after the tables:\n{stdout}"
        );
    }
    let calls: u64 = report.runs.iter().map(|r| r.calls).sum();
    assert!(
        after.contains(&format!("- No call was lost: all {calls} measured calls")),
        "{after}"
    );
    // rpcbench placed its own threads: the heading says where, and no advice to pin
    // follows.
    let placement = report
        .environment
        .placement
        .as_ref()
        .expect("the placement is recorded");
    assert!(
        stdout.contains(&format!(
            "placed: client and server on CPU {}",
            placement.client_cpu.unwrap()
        )),
        "{stdout}"
    );
    assert!(
        !after.contains("not pinned") && !after.contains("not placed"),
        "{after}"
    );
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
    // Nothing about the pipe. A run of 50 calls is short enough that its figures may
    // disagree beyond their noise (h2-mux's 16 workers get three calls each), which is said
    // on stderr whatever the format: that line alone may be there.
    assert!(
        stderr
            .lines()
            .all(|l| l.starts_with("rpcbench: figures not coherent: ")),
        "{stderr}"
    );
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
    run_args_env(tag, args, &[])
}

/// [`run_args`] with more environment variables.
fn run_args_env(tag: &str, args: &[&str], env: &[(&str, &str)]) -> (String, Report, Option<i32>) {
    let dir = std::env::temp_dir().join(format!("rpcbench-out-{}-{tag}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let out = dir.join("report.json");
    let output = Command::new(env!("CARGO_BIN_EXE_rpcbench"))
        .args(args)
        .arg("--out")
        .arg(&out)
        .envs(env.iter().copied())
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
        // The schedule holds the calls back (back to back they would run at many
        // thousands a second): 100 calls due 5 ms apart take at least 0.495 s, and no
        // faster than 200/s. How far a loaded host makes them fall behind is noise, so
        // the other side is bounded at 10× only.
        assert!(
            (0.48..5.0).contains(&run.elapsed_s),
            "{}: 100 calls at 200/s took {:.3} s",
            run.transport,
            run.elapsed_s
        );
        // Each round of k calls spans at least its k − 1 intervals, so over R rounds 100
        // calls take at least (100 − R) intervals: at most 200 × 100 / (100 − R) a second,
        // and a little timer slack.
        let rounds = f64::from(report.config.rounds);
        let most = 200.0 * 100.0 / (100.0 - rounds) * 1.015;
        assert!(
            run.calls_per_s <= most,
            "{}: {:.1} calls/s for --rate 200 over {rounds} rounds",
            run.transport,
            run.calls_per_s
        );
        assert!(
            run.late <= run.calls,
            "{}: {} late",
            run.transport,
            run.late
        );
        // Pacing leaves latency alone: the wait for a call's slot (10 ms per worker) is
        // not in its latency, so the median stays well below it.
        assert!(run.latency_us.unwrap().p50 < 5_000.0, "{}", run.transport);
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
    // Call k is due at k ms but cannot start before about 3k ms: late from the second on
    // (the first too, when a loaded host starts it more than 1 ms after the start line).
    assert!(run.late >= 15, "late {}", run.late);
    assert!(run.late <= 20, "late {}", run.late);
    assert!(
        stdout.contains(&format!(
            "{} calls started more than one interval late",
            run.late
        )),
        "{stdout}"
    );
}

/// The latency columns of a paced report read from when each call was due; `--wide` adds
/// the latency from the actual start beside them; a back-to-back report has no such
/// columns. From the fixture, with a corrected latency made up at twice the actual.
#[test]
fn paced_tables_lead_with_the_corrected_latency() {
    let mut paced: Report = serde_json::from_str(FIXTURE).unwrap();
    paced.config.rate_per_s = Some(100.0);
    for r in &mut paced.runs {
        let mut l = r.latency_us.unwrap();
        for v in [&mut l.min, &mut l.mean, &mut l.p50, &mut l.p90, &mut l.p99] {
            *v *= 2.0;
        }
        l.p999 = l.p999.max(l.p99);
        l.max = l.max.max(l.p999);
        r.latency_intended_us = Some(l);
    }
    let narrow = RenderOptions {
        width: 100,
        wide: false,
    };
    let grid = summary_grid(&paced, &narrow);
    let p99 = grid
        .headers
        .iter()
        .position(|h| h.starts_with("p99 "))
        .unwrap();
    let unit = if grid.headers[p99].ends_with("ms") {
        1e3
    } else {
        1.0
    };
    for (row, r) in grid.rows.iter().zip(&paced.runs) {
        let shown: f64 = row[p99].parse().unwrap();
        let corrected = r.latency_intended_us.unwrap().p99 / unit;
        assert!(
            (shown - corrected).abs() <= 0.01 * corrected,
            "{}: p99 column {shown}, corrected {corrected}",
            r.transport
        );
    }
    assert!(
        !grid.headers.iter().any(|h| h.starts_with("start")),
        "{:?}",
        grid.headers
    );
    let wide = summary_grid(&paced, &RenderOptions::WIDE);
    assert_eq!(
        wide.headers.len(),
        SummaryColumn::ALL.len() - SummaryColumn::ENCODED.len()
    );
    for start in ["start mean", "start p50", "start p99"] {
        assert!(wide.headers.iter().any(|h| h.starts_with(start)), "{start}");
    }
    let mut out = Vec::new();
    render(&paced, Format::Table, &narrow, &mut out).unwrap();
    let text = String::from_utf8(out).unwrap();
    assert!(
        text.contains("latency under --rate: from when each call was due")
            && text.contains("--wide also shows it from each call's actual start"),
        "{text}"
    );
    assert!(text.lines().all(|l| l.chars().count() <= 100), "{text}");
}

/// Under `--rate`, the JSON has the latency from when each call was due, never below the
/// latency from its start; the table says which it shows; and four workers paced at 50
/// calls/s sit idle nearly all the time, which the table says with the reason.
#[test]
fn rate_runs_report_the_corrected_latency_and_idle_workers() {
    let args = [
        "--rate",
        "50",
        "-c",
        "4",
        "-n",
        "20",
        "--warmup",
        "0",
        "--names",
        "ip",
        "--transports",
        "tcp,http-keepalive",
        "--no-progress",
    ];
    let (stdout, report, code) = run_args_env("paced", &args, &[("COLUMNS", "100")]);
    assert_eq!(code, Some(0), "{stdout}");
    // The lines are wrapped to the width: read them as one text.
    let text = stdout.split_whitespace().collect::<Vec<_>>().join(" ");
    for r in &report.runs {
        let actual = r.latency_us.expect("latency");
        let due = r
            .latency_intended_us
            .expect("a paced run has the corrected latency");
        let pairs = [
            ("min", due.min, actual.min),
            ("mean", due.mean, actual.mean),
            ("p50", due.p50, actual.p50),
            ("p90", due.p90, actual.p90),
            ("p99", due.p99, actual.p99),
            ("p99.9", due.p999, actual.p999),
            ("max", due.max, actual.max),
        ];
        for (name, due, actual) in pairs {
            assert!(
                due >= actual,
                "{} {name}: due {due} < start {actual}",
                r.transport
            );
        }
        assert!(
            r.concurrency_achieved < 0.9 * 4.0 && r.concurrency_fell_short(),
            "{}: {} in flight",
            r.transport,
            r.concurrency_achieved
        );
    }
    // One line for the cause both runs share, naming each with its calls in flight.
    let in_flight: Vec<String> = report
        .runs
        .iter()
        .map(|r| {
            format!(
                "{} {}",
                r.transport,
                rpcbench::render::units::significant(r.concurrency_achieved, 2)
            )
        })
        .collect();
    assert!(
        text.contains(&format!(
            "calls in flight below the 4 workers, on average: {}; the workers wait for their due calls (pacing)",
            in_flight.join(", ")
        )),
        "{stdout}"
    );
    assert_eq!(text.matches("calls in flight").count(), 1, "{stdout}");
    assert!(
        text.contains("latency under --rate: from when each call was due (corrected"),
        "{stdout}"
    );
    assert!(stdout.lines().all(|l| l.chars().count() <= 100), "{stdout}");
    // CSV carries both latencies, in µs, equal to the JSON's.
    let (csv, report, code) = run_args("paced-csv", &[&args[..], &["--format", "csv"]].concat());
    assert_eq!(code, Some(0));
    let rows = csv_rows(&csv);
    let col = |name: &str| rows[0].iter().position(|h| h == name).unwrap();
    for (row, r) in rows[1..].iter().zip(&report.runs) {
        assert_eq!(number(&row[col("p99_us")]), r.latency_us.map(|l| l.p99));
        assert_eq!(
            number(&row[col("intended_p99_us")]),
            r.latency_intended_us.map(|l| l.p99)
        );
    }
}

/// Two workers kept busy back to back (each call waits 1 ms at the server, for 300 ms)
/// raise no idle-worker warning, and a back-to-back table says nothing about --rate.
#[test]
fn busy_workers_raise_no_warning() {
    let args = [
        "-c",
        "2",
        "--duration",
        "300ms",
        "--delay-us",
        "1000",
        "--names",
        "ip",
        "--transports",
        "tcp",
        "--no-progress",
    ];
    let (stdout, report, code) = run_args_env("busy", &args, &[("COLUMNS", "100")]);
    assert_eq!(code, Some(0), "{stdout}");
    let r = &report.runs[0];
    assert!(
        !r.concurrency_fell_short(),
        "{} in flight",
        r.concurrency_achieved
    );
    assert!(!stdout.contains("calls in flight"), "{stdout}");
    assert!(!stdout.contains("--rate"), "{stdout}");
}

/// The engine that made a run's calls is in the JSON, with its threads, and the table says
/// when it was the event loop.
#[test]
fn the_engine_and_its_threads_are_reported() {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    for (engine, workers) in [("evloop", "16"), ("blocking", "4")] {
        let args = [
            "--transports",
            "tcp",
            "--names",
            "ip",
            "-c",
            workers,
            "-n",
            "400",
            "--engine",
            engine,
            "--format",
            "table",
        ];
        let (stdout, report, code) = run_args(&format!("engine-{engine}"), &args);
        assert_eq!(code, Some(0), "{stdout}");
        let r = &report.runs[0];
        assert_eq!(r.engine.map(|e| e.name()), Some(engine));
        let said = stdout.contains("event-loop engine (");
        if engine == "evloop" {
            assert!((1..=cpus).contains(&r.threads), "{} threads", r.threads);
            assert!(said, "{stdout}");
        } else {
            assert_eq!(r.threads, 4, "a thread per worker");
            assert!(!said, "{stdout}");
        }
    }
}

#[test]
fn link_rtt_is_recorded_on_every_run_and_what_if_projects_from_it() {
    // A small run by IP of `transports`, plus `extra`.
    let small = |tag: &str, transports: &str, extra: &[&str]| {
        let mut args = vec!["-n", "40", "--warmup", "4", "--names", "ip", "--transports"];
        args.push(transports);
        args.extend_from_slice(extra);
        run_args(tag, &args)
    };
    let (stdout, report, code) = small("link-rtt", "tcp,tcp-connect", &["--link-rtt", "2ms"]);
    assert_eq!(code, Some(0));
    for r in &report.runs {
        assert_eq!(r.link_rtt_us, Some(2000.0), "{}", r.transport);
        assert_eq!(r.round_trips_per_call, None, "one RTT is no fit");
    }
    assert!(
        stdout.contains("what if: a projection, not a measurement"),
        "{stdout}"
    );
    // The heading is wrapped to the terminal's width: read it as one line.
    let flat = stdout.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        flat.contains("the RTT taken as 2.00 ms (the link RTT given with --link-rtt)"),
        "{stdout}"
    );
    let header = stdout
        .lines()
        .find(|l| l.starts_with("transport ") && l.contains("at 50 ms"));
    assert!(header.is_some_and(|h| h.contains("at 0.1 ms")), "{stdout}");
    // tcp-connect needs two round trips: at 50 ms it projects above 100 ms.
    let row = stdout
        .lines()
        .rfind(|l| l.starts_with("tcp-connect "))
        .unwrap();
    assert!(row.contains(" 2.00 ") && row.ends_with("protocol"), "{row}");
    let at_50: f64 = row.split_whitespace().nth(7).unwrap().parse().unwrap();
    assert!(at_50 >= 100.0, "{row}");

    // Without either flag: no link RTT, no what-if; --what-if alone takes the fastest call.
    let (stdout, report, _) = small("no-link-rtt", "tcp", &[]);
    assert_eq!(report.runs[0].link_rtt_us, None);
    assert!(!stdout.contains("what if"), "{stdout}");
    let (stdout, _, _) = small("what-if", "tcp", &["--what-if"]);
    let flat = stdout.split_whitespace().collect::<Vec<_>>().join(" ");
    // What the run measured: the kernel's least RTT sample or the fastest call, the
    // smaller of the two.
    assert!(
        flat.contains("the least RTT the kernel sampled (TCP_INFO)")
            || flat.contains("the fastest call of a persistent transport"),
        "{stdout}"
    );
}

/// The notes under the table (the event-loop engine, workers left idle, what the kernel
/// saw) of a default-shaped run, the multiplexing rows at 16 workers in three address
/// modes: each note is said once for every row it concerns, each transport named once in
/// it, in at most two lines at 100 columns, and none asks for what the user did not
/// choose (no advice to give the run's own 16 workers more calls).
#[test]
fn notes_under_the_table_are_said_once() {
    let args = [
        "--transports",
        "h2,h2-mux,grpc,grpc-mux",
        "-n",
        "300",
        "--warmup",
        "32",
    ];
    let (stdout, report, code) = run_args_env("notes", &args, &[("COLUMNS", "100")]);
    assert_eq!(code, Some(0), "{stdout}");
    assert!(report.runs.iter().any(|r| r.workers == 16), "the mux rows");
    let lines: Vec<&str> = stdout.lines().collect();
    // The notes: from the line after the summary table to the first blank line.
    let table_end = lines
        .iter()
        .position(|l| l.starts_with("grpc") && l.contains("c16"))
        .and_then(|first| {
            lines[first..]
                .iter()
                .position(|l| l.is_empty())
                .map(|n| first + n)
        })
        .expect("the table ends");
    let start = lines[..table_end]
        .iter()
        .rposition(|l| l.starts_with("grpc"))
        .unwrap()
        + 1;
    // A note's further lines are indented.
    let mut notes: Vec<String> = Vec::new();
    for line in &lines[start..table_end] {
        if line.starts_with(' ') {
            let note = notes.last_mut().expect("a continued note");
            note.push(' ');
            note.push_str(line.trim_start());
        } else {
            notes.push(line.to_string());
        }
    }
    for note in &notes {
        let lines = rpcbench::render::wrap(note, 100, "", "  ");
        assert!(lines.len() <= 2, "a note of {} lines: {note}", lines.len());
        assert!(
            !note.contains("-n)"),
            "advice for workers the user did not ask for: {note}"
        );
        // (The TCP_INFO note names each run with retransmits, a shared one at each of
        // its modes: a list, not a repeated say.)
        for transport in ["h2-mux", "grpc-mux"] {
            if note.starts_with("TCP_INFO") {
                break;
            }
            assert!(
                note.matches(transport).count() <= 1,
                "{transport} twice: {note}"
            );
        }
    }
    let engine: Vec<&String> = notes
        .iter()
        .filter(|n| n.starts_with("event-loop engine"))
        .collect();
    assert_eq!(engine.len(), 1, "{notes:#?}");
    // The shared-connection rows on one loop thread each, the unshared h2 on the loop
    // too (16 workers are more than the CPUs); grpc has no loop and is not named.
    assert!(
        engine[0].ends_with(" for 16 connections: h2-mux, h2, grpc-mux"),
        "{}",
        engine[0]
    );
    assert!(
        notes
            .iter()
            .filter(|n| n.contains("calls in flight"))
            .count()
            <= 1,
        "{notes:#?}"
    );
}
