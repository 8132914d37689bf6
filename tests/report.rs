//! `rpcbench report` and `rpcbench compare` on real results from the real binary.

use rpcbench::render::{RenderOptions, phase_grid, summary_grid};
use rpcbench::report::Report;
use rpcbench::transport::TransportKind;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A scratch directory removed on drop.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!("rpcbench-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn rpcbench(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_rpcbench"))
        .args(args)
        .output()
        .unwrap()
}

fn results(dir: &Path, name: &str, extra: &[&str]) -> PathBuf {
    let path = dir.join(name);
    let mut args = vec![
        "--warmup",
        "20",
        "--format",
        "csv",
        "--out",
        path.to_str().unwrap(),
    ];
    if !extra.contains(&"-n") {
        args.extend(["-n", "300"]);
    }
    args.extend_from_slice(extra);
    let out = rpcbench(&args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    path
}

/// Runs `rpcbench report INPUTS... EXTRA... --out SITE`; returns its exit status, and its
/// stdout followed by its stderr.
fn report(inputs: &[&Path], extra: &[&str], site: &Path) -> (Option<i32>, String) {
    let mut args = vec!["report"];
    args.extend(inputs.iter().map(|p| p.to_str().unwrap()));
    args.extend_from_slice(extra);
    args.extend(["--out", site.to_str().unwrap()]);
    let out = rpcbench(&args);
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code(), text)
}

/// The arguments of a small run of one kind of call by IP, plus `extra`.
fn small<'a>(transports: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec!["-n", "40", "--names", "ip", "--transports", transports];
    args.extend_from_slice(extra);
    args
}

fn load(path: &Path) -> Report {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

/// Checks that `text` is well-formed XML as far as tags go: every element closed in order.
/// (Enough to catch a broken chart; attributes are written by one escaping function.)
fn assert_well_formed(text: &str, what: &str) {
    let mut stack: Vec<String> = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find('<') {
        rest = &rest[start + 1..];
        let end = rest
            .find('>')
            .unwrap_or_else(|| panic!("{what}: unclosed tag"));
        let tag = &rest[..end];
        rest = &rest[end + 1..];
        if tag.starts_with('!') || tag.starts_with('?') {
            continue;
        }
        let name: String = tag
            .trim_start_matches('/')
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '-')
            .collect();
        if tag.starts_with('/') {
            let open = stack
                .pop()
                .unwrap_or_else(|| panic!("{what}: </{name}> closes nothing"));
            assert_eq!(open, name, "{what}: <{open}> closed by </{name}>");
        } else if !tag.ends_with('/') && !["meta", "br"].contains(&name.as_str()) {
            stack.push(name);
        }
    }
    assert!(stack.is_empty(), "{what}: left open: {stack:?}");
}

/// Reads chart `name` from `site` and checks it is a well-formed SVG with axes, a unit
/// on its axis label, a legend and data; returns it.
fn assert_chart(site: &Path, name: &str) -> String {
    let svg = std::fs::read_to_string(site.join(name)).unwrap();
    assert_well_formed(&svg, name);
    assert!(
        svg.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""),
        "{name}"
    );
    assert!(svg.contains("class=\"axis x-axis\""), "{name}: x axis");
    assert!(svg.contains("class=\"axis-label\""), "{name}: axis label");
    assert!(svg.contains("(ms"), "{name}: the unit is named");
    assert!(svg.contains("class=\"legend\""), "{name}: legend");
    assert!(svg.contains("class=\"series\""), "{name}: data");
    // The legend is never cut off: every entry lies inside the chart's height, and a text
    // too long for the right margin is squeezed to fit it (`textLength`).
    let height = number_after(&svg, "height=\"").expect("the chart's height");
    let legend = svg.split("class=\"legend\"").nth(1).unwrap();
    let legend = &legend[..legend.find("</g>").unwrap()];
    for text in legend.split("<text ").skip(1) {
        let y = number_after(text, "y=\"").expect("a legend entry's y");
        assert!(y < height, "{name}: a legend entry at y {y} of {height}");
        let words = &text[text.find('>').unwrap() + 1..text.find('<').unwrap()];
        assert!(
            words.chars().count() <= LEGEND_CHARS || text.contains("textLength="),
            "{name}: {words:?} would be cut off"
        );
    }
    // A row's label, anchored at its end, never runs off the left edge either.
    for text in svg.split("<text ").skip(1) {
        let head = &text[..text.find('>').unwrap()];
        if !head.contains("text-anchor=\"end\"") || head.contains("textLength=") {
            continue;
        }
        let x = number_after(head, "x=\"").expect("a label's x");
        let words = &text[head.len() + 1..text.find('<').unwrap()];
        assert!(
            words.chars().count() as f64 * 7.0 <= x,
            "{name}: {words:?} at x {x} would run off the left edge"
        );
    }
    svg
}

/// The number in the first attribute of `text` that starts with `attr` (`height="`).
fn number_after(text: &str, attr: &str) -> Option<f64> {
    text.split(attr).nth(1)?.split('"').next()?.parse().ok()
}

/// The longest legend entry that fits the chart's right margin unsqueezed, in characters
/// of 12 px sans-serif (the margin's 142 px at 7 px a character).
const LEGEND_CHARS: usize = 20;

#[test]
fn report_pages_hold_the_json_figures_and_every_chart() {
    let dir = Scratch::new("report");
    let base = results(&dir.0, "base.json", &[]);
    let delayed = results(
        &dir.0,
        "delay.json",
        &["--delay-us", "5000", "--names", "ip", "-n", "40"],
    );
    let site = dir.0.join("site");
    let (status, text) = report(&[&base, &delayed], &[], &site);
    // The delay check may fail on a noisy machine (5 ms is no physics margin); the report
    // is written either way and the exit status says which.
    assert!(matches!(status, Some(0 | 1)), "{text}");
    let report = load(&base);

    // README.md: findings, charts, and the client's markdown tables with the JSON's figures.
    let readme = std::fs::read_to_string(site.join("README.md")).unwrap();
    let findings = readme
        .split("## Findings")
        .nth(1)
        .unwrap()
        .split("## Charts")
        .next()
        .unwrap();
    let sentences = findings.lines().filter(|l| l.starts_with("- ")).count();
    assert!(
        (3..=6).contains(&sentences),
        "3 to 6 findings, got {sentences}:\n{findings}"
    );
    assert!(
        findings.contains("tcp-connect") && findings.contains("No call was lost"),
        "{findings}"
    );
    let rows: Vec<Vec<String>> = readme
        .lines()
        .filter(|l| l.starts_with("| ") && !l.starts_with("| ---"))
        .map(|l| {
            l.trim_matches('|')
                .split('|')
                .map(|c| c.trim().to_string())
                .collect()
        })
        .collect();
    let summary = summary_grid(&report, &RenderOptions::WIDE);
    let header_at = rows
        .iter()
        .position(|r| r == &summary.headers)
        .expect("summary table");
    let expected = summary.rows;
    assert_eq!(
        rows[header_at + 1..header_at + 1 + expected.len()],
        expected[..]
    );
    for phase_row in phase_grid(&report, &RenderOptions::WIDE).rows {
        assert!(rows.contains(&phase_row), "phase row {phase_row:?}");
    }
    // Seed 004's five cases, with today's figures beside them.
    for case in [
        "socket",
        "HTTP (file_get_contents)",
        "HTTP by host name",
        "curl",
        "curl by host name",
    ] {
        assert!(readme.contains(&format!("| {case} |")), "seed row {case}");
    }
    assert!(readme.contains("| 156.42 |"));
    // The delay truth checks: one per transport at one worker; not the shared ones (h2-mux,
    // grpc-mux, h3-mux),
    // which the default run measures at 16 workers (with h2 and grpc beside them), where
    // replies due at once queue at the server.
    assert_eq!(
        readme.matches("| server delay 5000 µs:").count(),
        rpcbench::transport::TransportKind::by_default()
            .into_iter()
            .filter(|k| !k.shared())
            .count(),
        "{readme}"
    );
    assert!(!readme.contains(" c16) | +5000"), "{readme}");

    // The placement rpcbench chose is stated under the title.
    assert!(
        readme.contains("placement: same-core (placed: client and server on CPU"),
        "{readme}"
    );
    // Charts: four SVG files, well-formed, with axes, a legend and a series per run.
    for name in ["percentiles.svg", "mean-p99.svg", "phases.svg", "dns.svg"] {
        assert_chart(&site, name);
        assert!(
            readme.contains(&format!("]({name})")),
            "README links {name}"
        );
    }
    let curves = std::fs::read_to_string(site.join("percentiles.svg")).unwrap();
    for t in [
        "tcp",
        "tcp-connect",
        "http-fresh",
        "http-keepalive",
        "curl-reuse",
        "curl-fresh",
    ] {
        assert!(
            curves.contains(&format!("data-run=\"{t}\"")),
            "a curve for {t}"
        );
    }
    // The same colour for a transport in every chart.
    let colour = rpcbench::site::svg::transport_colour(TransportKind::HttpFresh);
    for name in ["percentiles.svg", "mean-p99.svg", "dns.svg"] {
        assert!(
            std::fs::read_to_string(site.join(name))
                .unwrap()
                .contains(colour),
            "{name}"
        );
    }

    // index.html: one self-contained page holding every chart and nothing from the network.
    let html = std::fs::read_to_string(site.join("index.html")).unwrap();
    assert_well_formed(&html, "index.html");
    assert_eq!(html.matches("<svg ").count(), 4);
    for id in [
        "chart-percentiles",
        "chart-mean-p99",
        "chart-phases",
        "chart-dns",
    ] {
        assert!(html.contains(&format!("id=\"{id}\"")), "{id}");
    }
    for external in ["<script", "src=\"http", "href=\"http", "@import", "url("] {
        assert!(
            !html.contains(external),
            "index.html must need nothing outside: found {external}"
        );
    }
    assert!(
        html.contains(&format!("<td>{}</td>", expected[0][11])),
        "the tables are in the page"
    );
    // The inputs hold no DNS delay: that check is listed as not run, with the reason.
    assert!(
        readme.contains("- not run: DNS delay: no run against a server with --dns-delay"),
        "{readme}"
    );
    assert!(readme.contains("## Peers\n\nNot measured"), "{readme}");
}

#[test]
fn compare_flags_a_regression_and_passes_identical_files() {
    let dir = Scratch::new("compare");
    let base = results(&dir.0, "base.json", &["--names", "ip"]);
    // Identical files pass, even with a strict limit.
    let same = rpcbench(&[
        "compare",
        base.to_str().unwrap(),
        base.to_str().unwrap(),
        "--fail-above",
        "1.01",
    ]);
    assert_eq!(
        same.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&same.stdout)
    );
    let text = String::from_utf8_lossy(&same.stdout);
    assert_eq!(
        text.matches("| 1.00 |").count(),
        2 * load(&base).runs.len(),
        "p50 and p99 ratios of 1.00 on every row:\n{text}"
    );

    // A synthetic 20% regression of one transport's p50 and p99.
    let mut worse = load(&base);
    let run = worse
        .runs
        .iter_mut()
        .find(|r| r.transport == TransportKind::HttpKeepalive)
        .unwrap();
    let lat = run.latency_us.as_mut().unwrap();
    lat.p50 *= 1.2;
    lat.p99 *= 1.2;
    let worse_path = dir.0.join("worse.json");
    std::fs::write(&worse_path, serde_json::to_vec(&worse).unwrap()).unwrap();
    let flagged = rpcbench(&[
        "compare",
        base.to_str().unwrap(),
        worse_path.to_str().unwrap(),
        "--fail-above",
        "1.1",
    ]);
    let text = String::from_utf8_lossy(&flagged.stdout);
    assert_eq!(flagged.status.code(), Some(1), "{text}");
    let line = text
        .lines()
        .find(|l| l.starts_with("| http-keepalive"))
        .unwrap();
    assert!(
        line.contains("| 1.20 |") && line.contains("+20.0%") && line.ends_with("REGRESSION |"),
        "{line}"
    );
    assert_eq!(text.matches("REGRESSION").count(), 1, "{text}");
    // Below the limit, the same change passes.
    let lenient = rpcbench(&[
        "compare",
        base.to_str().unwrap(),
        worse_path.to_str().unwrap(),
        "--fail-above",
        "1.25",
    ]);
    assert_eq!(lenient.status.code(), Some(0));
    // A missing file is a clear error, not a panic.
    let missing = rpcbench(&["compare", base.to_str().unwrap(), "/nonexistent.json"]);
    assert_eq!(missing.status.code(), Some(1));
    let err = String::from_utf8_lossy(&missing.stderr);
    assert!(
        err.contains("/nonexistent.json") && !err.contains("panicked"),
        "{err}"
    );
}

/// A paced run alone (`--rate`, no delay anywhere) builds a report: it is the baseline, and
/// the checks it cannot support are listed as not run, with the reason, without failing.
#[test]
fn report_accepts_a_paced_run_alone_and_lists_what_it_did_not_check() {
    let dir = Scratch::new("paced");
    let paced = results(&dir.0, "paced.json", &small("tcp", &["--rate", "400"]));
    let site = dir.0.join("site");
    let (status, text) = report(&[&paced], &[], &site);
    assert_eq!(status, Some(0), "{text}");
    let readme = std::fs::read_to_string(site.join("README.md")).unwrap();
    for reason in [
        "not run: server delay: no run with --delay-us among the inputs",
        "not run: DNS delay: no run against a server with --dns-delay among the inputs",
    ] {
        assert!(text.contains(reason), "{reason}:\n{text}");
        assert!(readme.contains(&format!("- {reason}")), "{readme}");
    }
    // A delayed run with nothing to compare it with: not run either, still exit 0.
    let delayed = results(&dir.0, "delay.json", &small("tcp", &["--delay-us", "1000"]));
    let (status, text) = report(&[&delayed], &[], &site);
    assert_eq!(status, Some(0), "{text}");
    assert!(
        text.contains("not run: server delay: no run without a delay among the inputs"),
        "{text}"
    );
    // An unreadable input is the one thing that fails a report.
    let (status, text) = report(&[Path::new("/nonexistent.json")], &[], &site);
    assert_eq!(status, Some(1), "{text}");
}

/// Peer figures are raw round means; the report takes the medians and judges them against
/// the one limit, shows the verdict, and does not let it set the exit status.
#[test]
fn peers_are_judged_once_and_do_not_gate_the_report() {
    let dir = Scratch::new("peers");
    let base = results(&dir.0, "base.json", &small("tcp,http-keepalive", &[]));
    let peers = dir.0.join("peers.json");
    let limit = rpcbench::analysis::PEER_RATIO_LIMIT;
    // tcp: medians 15 and 12 (a disturbed round on each side does not decide); within.
    // http-keepalive: twice the limit; above.
    let json = serde_json::json!({
        "placement": "same core (CPU 0)",
        "pairs": [
            {
                "transport": "tcp",
                "peer": "sockperf ping-pong",
                "command": "sockperf ping-pong --tcp",
                "rpcbench_round_means_us": [15.0, 90.0, 14.0],
                "peer_round_means_us": [12.0, 11.0, 80.0]
            },
            {
                "transport": "http-keepalive",
                "peer": "wrk -t1 -c1 (1/rps)",
                "command": "wrk -t1 -c1",
                "rpcbench_round_means_us": [20.0 * 2.0 * limit],
                "peer_round_means_us": [20.0]
            }
        ]
    });
    std::fs::write(&peers, serde_json::to_vec_pretty(&json).unwrap()).unwrap();
    let site = dir.0.join("site");
    let (status, text) = report(&[&base], &["--peers", peers.to_str().unwrap()], &site);
    assert_eq!(status, Some(0), "peers never fail a report:\n{text}");
    assert!(
        text.contains("within: tcp against sockperf ping-pong: 15.0 µs against 12.0 µs, 1.25×"),
        "{text}"
    );
    assert!(text.contains("ABOVE: http-keepalive against wrk"), "{text}");
    let readme = std::fs::read_to_string(site.join("README.md")).unwrap();
    let rows: Vec<&str> = readme
        .lines()
        .filter(|l| l.starts_with("| tcp | sockperf") || l.starts_with("| http-keepalive | wrk"))
        .collect();
    assert_eq!(rows.len(), 2, "{readme}");
    assert!(rows[1].ends_with("| no |"), "{}", rows[1]);
}

/// Runs `rpcbench sweep ARGS --out PATH` quietly; returns the path.
fn sweep_results(dir: &Path, name: &str, args: &[&str]) -> PathBuf {
    let path = dir.join(name);
    let mut all = vec!["sweep", "--no-progress", "--format", "csv", "--out"];
    all.push(path.to_str().unwrap());
    all.extend_from_slice(args);
    let out = rpcbench(&all);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    path
}

/// A sweep over rates with an objective and one over payload sizes make a report on
/// their own: the latency-throughput chart (with the objective's bound), the payload
/// chart, the capacity table with a row per series as the JSON has it, the sentences, and
/// the truth checks listed as not run. With a plain run beside them, the run's tables
/// and charts come too.
#[test]
fn sweeps_make_a_report_alone_and_beside_a_run() {
    let dir = Scratch::new("sweeps");
    let common = [
        "--transports",
        "tcp,http-keepalive",
        "--names",
        "ip",
        "--step-duration",
        "300ms",
    ];
    let rates = sweep_results(
        &dir.0,
        "rates.json",
        &[&common[..], &["--rates", "200,400", "--slo", "p99=1s"]].concat(),
    );
    let payloads = sweep_results(
        &dir.0,
        "payloads.json",
        &[&common[..], &["--payloads", "64,16k"]].concat(),
    );
    let sweep: rpcbench::sweep::SweepReport =
        serde_json::from_slice(&std::fs::read(&rates).unwrap()).unwrap();

    let site = dir.0.join("alone");
    let (status, text) = report(&[&rates, &payloads], &[], &site);
    assert_eq!(status, Some(0), "{text}");
    let readme = std::fs::read_to_string(site.join("README.md")).unwrap();
    for name in ["latency-throughput.svg", "payload.svg"] {
        let svg = assert_chart(&site, name);
        for t in ["tcp", "http-keepalive"] {
            assert!(
                svg.contains(&format!("data-run=\"{t}\"")),
                "{name}: a line for {t}"
            );
        }
        assert!(
            readme.contains(&format!("]({name})")),
            "README links {name}"
        );
    }
    let lt = std::fs::read_to_string(site.join("latency-throughput.svg")).unwrap();
    assert!(lt.contains("achieved calls/s"), "x axis in calls/s");
    assert!(
        lt.contains("class=\"objective\"") && lt.contains("objective p99 ≤ 1.00 s"),
        "the bound is drawn"
    );
    let pay = std::fs::read_to_string(site.join("payload.svg")).unwrap();
    assert!(pay.contains("16 KiB") && pay.contains("(MB/s, log scale)"));
    // The caption defines the knee.
    assert!(readme.contains("Ring: the knee, the last step before p99 grows more than 2×"));
    // The capacity table: a row per series, as the sweep's JSON has it.
    for s in &sweep.series {
        let capacity = s
            .capacity_per_s
            .map_or("-".to_string(), rpcbench::render::units::rate);
        let row = format!(
            "| {} | ip | p99 ≤ 1.00 s | {capacity} | {} |",
            s.transport,
            s.steps.len()
        );
        assert!(readme.contains(&row), "{row}:\n{readme}");
    }
    assert!(readme.contains("At p99 ≤ 1.00 s, "), "{readme}");
    assert!(
        readme.contains("From 64 B to 16 KiB payloads: tcp moves"),
        "{readme}"
    );
    assert!(
        readme.contains("No call was lost in the sweeps"),
        "{readme}"
    );
    // No run among the inputs: no run tables, and the checks are listed as not run.
    assert!(!readme.contains("## Tables"), "{readme}");
    assert!(
        readme.contains("- not run: server delay: no run with --delay-us among the inputs"),
        "{readme}"
    );
    let html = std::fs::read_to_string(site.join("index.html")).unwrap();
    assert_well_formed(&html, "index.html");
    assert_eq!(html.matches("<svg ").count(), 2);
    assert!(
        html.contains("id=\"chart-latency-throughput\"") && html.contains("id=\"chart-payload\"")
    );

    // Beside a plain run: the run's charts and tables, then the sweeps'. The run is by IP
    // only, so the chart of what name resolution adds has nothing to show, and is left out
    // rather than drawn empty.
    let run = results(&dir.0, "run.json", &small("tcp,http-keepalive", &[]));
    let site = dir.0.join("beside");
    let (status, text) = report(&[&rates, &run, &payloads], &[], &site);
    assert_eq!(status, Some(0), "{text}");
    let readme = std::fs::read_to_string(site.join("README.md")).unwrap();
    for name in [
        "percentiles.svg",
        "mean-p99.svg",
        "phases.svg",
        "latency-throughput.svg",
        "payload.svg",
    ] {
        assert!(site.join(name).exists(), "{name}");
        assert!(
            readme.contains(&format!("]({name})")),
            "README links {name}"
        );
    }
    for name in ["percentiles.svg", "mean-p99.svg", "phases.svg"] {
        assert_chart(&site, name);
    }
    assert!(
        !site.join("dns.svg").exists(),
        "no DNS chart without runs by name"
    );
    assert!(!readme.contains("](dns.svg)"), "{readme}");
    assert!(
        readme.contains("## Tables") && readme.contains("## Sweeps"),
        "{readme}"
    );
    assert!(
        readme.contains("| socket |"),
        "the seed table reads the run"
    );
    let html = std::fs::read_to_string(site.join("index.html")).unwrap();
    assert_well_formed(&html, "index.html");
    assert_eq!(html.matches("<svg ").count(), 5);
}

/// The committed fixture, with every run given link RTT `rtt_us` and a mean of its own
/// mean plus `k(run) × rtt_us`. The fixture's real run was made before rpcbench placed its
/// threads, and its persistent transports' means differ by address mode up to 2× (what the
/// physics checks catch); here each takes its by-IP mean in every mode, so that the model's
/// checks are the only ones in question.
fn across_link(rtt_us: f64, k: &dyn Fn(&rpcbench::report::RunRecord) -> Option<f64>) -> Report {
    let mut r: Report =
        serde_json::from_str(include_str!("fixtures/report.json")).expect("fixture is a Report");
    let by_ip: Vec<(TransportKind, f64)> = r
        .runs
        .iter()
        .filter(|x| x.addr_mode == rpcbench::resolve::AddrMode::Ip)
        .filter_map(|x| Some((x.transport, x.latency_us?.mean)))
        .collect();
    for run in r.runs.iter_mut().filter(|x| x.transport.persistent()) {
        if let (Some(l), Some((_, ip))) = (
            run.latency_us.as_mut(),
            by_ip.iter().find(|(t, _)| *t == run.transport),
        ) {
            l.mean = *ip;
        }
    }
    for run in &mut r.runs {
        run.link_rtt_us = Some(rtt_us);
        run.round_trips_per_call = None;
        run.fixed_cost_us = None;
        let rise = k(run).map(|k| k * rtt_us);
        if let (Some(l), Some(rise)) = (run.latency_us.as_mut(), rise) {
            l.mean += rise;
        }
    }
    r
}

#[test]
fn report_fits_round_trips_per_call_over_link_rtts() {
    let dir = Scratch::new("model");
    let write = |name: &str, r: &Report| {
        let path = dir.0.join(name);
        std::fs::write(&path, serde_json::to_string(r).unwrap()).unwrap();
        path
    };
    let expected = |r: &rpcbench::report::RunRecord| rpcbench::model::expected_for(r);
    let files: Vec<PathBuf> = [0.0, 10_000.0, 20_000.0]
        .iter()
        .map(|&rtt| write(&format!("rtt-{rtt}.json"), &across_link(rtt, &expected)))
        .collect();
    let inputs: Vec<&Path> = files.iter().map(PathBuf::as_path).collect();
    let site = dir.0.join("site");
    let (status, text) = report(&inputs, &[], &site);
    assert_eq!(status, Some(0), "{text}");
    assert!(
        text.contains("pass: link RTT 10000 µs: tcp-connect (ip), 2 round trips"),
        "{text}"
    );
    assert!(
        !text.contains("round trips per call where"),
        "no k finding: {text}"
    );
    let fitted: Vec<Report> =
        serde_json::from_slice(&std::fs::read(site.join("runs.json")).unwrap()).unwrap();
    assert_eq!(fitted.len(), 3);
    for r in fitted.iter().flat_map(|f| &f.runs) {
        match rpcbench::model::expected_for(r) {
            Some(k) => {
                let fit = r.round_trips_per_call.expect("a fit on every modelled run");
                assert!(
                    (fit - k).abs() < 1e-9,
                    "{} {}: {fit} for {k}",
                    r.transport,
                    r.addr_mode
                );
                assert!(r.fixed_cost_us.is_some());
            }
            None => assert_eq!(r.round_trips_per_call, None),
        }
    }
    let readme = std::fs::read_to_string(site.join("README.md")).unwrap();
    assert!(readme.contains("## Round trips per call"), "{readme}");
    // Runs at several link RTTs: the findings read from the baseline say the RTT they
    // hold at, and the pick is made again at each other RTT.
    for rtt in ["0 µs", "10.0 ms", "20.0 ms"] {
        assert!(
            readme.contains(&format!("At link RTT {rtt}: For this pair of hosts, pick")),
            "a pick at {rtt}: {readme}"
        );
    }
    assert!(
        readme.contains("At link RTT 0 µs: Reusing a connection"),
        "{readme}"
    );
    assert!(
        readme.contains("| tcp-connect | uncached | 3.00 | 3.00 | +0.00 |"),
        "{readme}"
    );
    assert!(readme.contains("a projection, not a measurement") && readme.contains("at 50 ms"));
    let svg = assert_chart(&site, "rtt.svg");
    assert!(
        svg.contains("tcp-connect (uncached) k=3.00"),
        "legend names k"
    );
    assert_well_formed(
        &std::fs::read_to_string(site.join("index.html")).unwrap(),
        "index.html",
    );

    // One extra round trip on a fifth of http-fresh's calls: a finding, and a failed check.
    let slow = |r: &rpcbench::report::RunRecord| {
        expected(r).map(|k| {
            if r.transport == TransportKind::HttpFresh {
                k + 0.2
            } else {
                k
            }
        })
    };
    let files: Vec<PathBuf> = [0.0, 10_000.0]
        .iter()
        .map(|&rtt| write(&format!("slow-{rtt}.json"), &across_link(rtt, &slow)))
        .collect();
    let inputs: Vec<&Path> = files.iter().map(PathBuf::as_path).collect();
    let (status, text) = report(&inputs, &[], &dir.0.join("slow"));
    assert_eq!(status, Some(1), "the link check fails: {text}");
    assert!(
        text.contains("http-fresh (ip) makes 2.20 round trips per call where the protocol needs 2"),
        "{text}"
    );
    assert!(
        text.contains("FAIL: link RTT 10000 µs: http-fresh (ip)"),
        "{text}"
    );
}

/// Every transport has a colour of its own: 13 transports once cycled through 10 colours,
/// so tcp and grpc-stream looked the same.
#[test]
fn no_two_transports_share_a_colour() {
    let colours: Vec<&str> = TransportKind::ALL
        .into_iter()
        .map(rpcbench::site::svg::transport_colour)
        .collect();
    let mut distinct = colours.clone();
    distinct.sort_unstable();
    distinct.dedup();
    assert_eq!(distinct.len(), colours.len(), "{colours:?}");
}

/// A run with encodings makes the report's Encodings section: a row per transport,
/// encoding and message in README.md and index.html, and the chart of the server's CPU
/// against message size, a line per encoding, once the server's figures rest on 100
/// clock ticks (set here on the run's own JSON: a test cannot spend a second of server
/// CPU per cell).
#[test]
fn encoded_runs_make_the_encodings_section_and_its_chart() {
    let dir = Scratch::new("report-encodings");
    let path = dir.0.join("encoded.json");
    let out = rpcbench(&[
        "-n",
        "100",
        "--warmup",
        "5",
        "--names",
        "ip",
        "--transports",
        "tcp",
        "--encoding",
        "soap,json",
        "--message",
        "echo-struct:1,echo-struct:100",
        "--format",
        "json",
        "--out",
        path.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    let runs = json["runs"].as_array_mut().unwrap();
    assert_eq!(runs.len(), 4);
    for (i, run) in runs.iter_mut().enumerate() {
        let cpu = &mut run["cpu_us_per_call"];
        cpu["server_ticks"] = 150.into();
        cpu["server_user"] = (10.0 * (i + 1) as f64).into();
        cpu["server_system"] = 1.0.into();
    }
    std::fs::write(&path, serde_json::to_vec(&json).unwrap()).unwrap();
    let site = dir.0.join("site");
    let (status, text) = report(&[&path], &[], &site);
    assert_eq!(status, Some(0), "{text}");
    let readme = std::fs::read_to_string(site.join("README.md")).unwrap();
    let section = readme
        .split("## Encodings")
        .nth(1)
        .unwrap_or_else(|| panic!("no Encodings section:\n{readme}"));
    let rows: Vec<&str> = section
        .lines()
        .filter(|l| l.starts_with("| tcp "))
        .collect();
    assert_eq!(rows.len(), 4, "{section}");
    assert!(
        rows.iter()
            .any(|r| r.contains("| soap ") && r.contains("echo-struct:100"))
    );
    // The server's CPU per call (user + system, as set above) in its column.
    let server_cpu: Vec<&str> = rows
        .iter()
        .map(|r| r.split('|').map(str::trim).nth(8).unwrap())
        .collect();
    for cpu in &server_cpu {
        assert!(["11.0", "21.0", "31.0", "41.0"].contains(cpu), "{rows:?}");
    }
    let svg = std::fs::read_to_string(site.join("encodings-cpu.svg")).unwrap();
    assert_well_formed(&svg, "encodings-cpu.svg");
    assert_eq!(
        svg.matches("class=\"series\"").count(),
        2,
        "a line per encoding"
    );
    assert!(svg.contains("server CPU µs per call"));
    let html = std::fs::read_to_string(site.join("index.html")).unwrap();
    assert_well_formed(&html, "index.html");
    assert!(html.contains("<h2>Encodings</h2>") && html.contains("chart-encodings-cpu"));
}
