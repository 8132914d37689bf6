//! The physics checks and the noise rule on synthetic reports: the committed fixture with
//! its means set by hand, so each case is exactly as bad (or as good) as it says.

use rpcbench::physics::checks;
use rpcbench::report::Rule;
use rpcbench::report::{Report, RunRecord};
use rpcbench::resolve::AddrMode;
use rpcbench::transport::TransportKind;

/// The committed fixture: a real run of six transports in three address modes.
fn fixture() -> Report {
    serde_json::from_str(include_str!("fixtures/report.json")).expect("fixture is a Report")
}

/// The run of `t` in `mode` (plain, at the run's own workers).
fn run_mut(r: &mut Report, t: TransportKind, mode: AddrMode) -> &mut RunRecord {
    r.runs
        .iter_mut()
        .find(|x| x.transport == t && x.addr_mode == mode && !x.mux_comparison)
        .unwrap_or_else(|| panic!("a run of {t} {mode}"))
}

/// Sets a run's mean, its median (nine tenths of it, as a latency's right tail makes
/// them) and its noise (a fraction).
fn set(r: &mut Report, t: TransportKind, mode: AddrMode, mean: f64, spread: f64) {
    let run = run_mut(r, t, mode);
    let l = run.latency_us.as_mut().unwrap();
    (l.mean, l.p50) = (mean, 0.9 * mean);
    run.spread = Some(spread);
}

/// A report whose every run agrees with physics: persistent transports at one mean in
/// every mode, fresh ones slower, lookups and TLS adding time.
fn coherent() -> Report {
    let mut r = fixture();
    for mode in [AddrMode::Ip, AddrMode::Cached, AddrMode::Uncached] {
        let lookup = if mode == AddrMode::Uncached {
            100.0
        } else {
            0.0
        };
        set(&mut r, TransportKind::Tcp, mode, 25.0, 0.02);
        set(&mut r, TransportKind::HttpKeepalive, mode, 30.0, 0.02);
        set(&mut r, TransportKind::CurlReuse, mode, 60.0, 0.02);
        set(
            &mut r,
            TransportKind::TcpConnect,
            mode,
            150.0 + lookup,
            0.02,
        );
        set(&mut r, TransportKind::HttpFresh, mode, 200.0 + lookup, 0.02);
        set(&mut r, TransportKind::CurlFresh, mode, 300.0 + lookup, 0.02);
    }
    r
}

/// The failed checks of a report, by rule and transport.
fn failed(r: &Report) -> Vec<(Rule, TransportKind)> {
    checks(r)
        .into_iter()
        .filter(|c| !c.pass)
        .map(|c| (c.rule, c.faster.transport))
        .collect()
}

#[test]
fn a_coherent_run_passes_every_check() {
    let r = coherent();
    let all = checks(&r);
    assert!(!all.is_empty());
    assert_eq!(failed(&r), [], "{all:#?}");
    // Every persistent transport's modes were compared, and every fresh one was checked
    // against its lookup.
    for t in [
        TransportKind::Tcp,
        TransportKind::HttpKeepalive,
        TransportKind::CurlReuse,
    ] {
        assert!(
            all.iter()
                .any(|c| c.rule == Rule::ModesAgree && c.faster.transport == t),
            "{t}"
        );
    }
    assert!(all.iter().any(|c| c.rule == Rule::KeptNotSlowerThanFresh));
    assert!(all.iter().any(|c| c.rule == Rule::IpNotSlowerThanLookup));
}

#[test]
fn modes_that_disagree_beyond_the_noise_fail() {
    // Within the noise: 25 and 26.5 µs at ±2% each (the floor makes it ±3%).
    let mut r = coherent();
    set(&mut r, TransportKind::Tcp, AddrMode::Uncached, 26.5, 0.02);
    assert_eq!(failed(&r), []);
    // The case: a persistent transport 10× slower in one mode, as when its
    // server thread woke on the other CPU.
    set(
        &mut r,
        TransportKind::HttpKeepalive,
        AddrMode::Uncached,
        87.2,
        0.02,
    );
    assert_eq!(
        failed(&r),
        [(Rule::ModesAgree, TransportKind::HttpKeepalive)]
    );
    // The same figures with a wide enough noise are no contradiction.
    set(
        &mut r,
        TransportKind::HttpKeepalive,
        AddrMode::Uncached,
        87.2,
        0.70,
    );
    assert_eq!(failed(&r), []);
    // Nor is a mean moved by a few outliers while the median stays: 14% on the mean of
    // tcp (as seen in a real run: one round with 700 µs stalls), the same median.
    set(
        &mut r,
        TransportKind::HttpKeepalive,
        AddrMode::Uncached,
        30.0,
        0.02,
    );
    let run = run_mut(&mut r, TransportKind::Tcp, AddrMode::Uncached);
    run.latency_us.as_mut().unwrap().mean = 28.5;
    assert_eq!(failed(&r), []);
}

#[test]
fn unix_slower_than_tcp_fails_and_other_orderings_hold() {
    let mut r = coherent();
    let mut unix = run_mut(&mut r, TransportKind::Tcp, AddrMode::Ip).clone();
    unix.transport = TransportKind::Unix;
    r.runs.push(unix);
    set(&mut r, TransportKind::Unix, AddrMode::Ip, 82.8, 0.02);
    assert_eq!(failed(&r), [(Rule::SameHostNotSlower, TransportKind::Unix)]);
    set(&mut r, TransportKind::Unix, AddrMode::Ip, 20.0, 0.02);
    assert_eq!(failed(&r), []);
    // A kept connection slower than a new one per call.
    set(&mut r, TransportKind::Tcp, AddrMode::Ip, 400.0, 0.02);
    assert!(failed(&r).contains(&(Rule::KeptNotSlowerThanFresh, TransportKind::Tcp)));
    // A fresh call by IP slower than by name, without a cache.
    let mut r = coherent();
    set(&mut r, TransportKind::HttpFresh, AddrMode::Ip, 900.0, 0.02);
    assert!(failed(&r).contains(&(Rule::IpNotSlowerThanLookup, TransportKind::HttpFresh)));
}

/// `rpcbench report` shows a broken ordering as a failed truth check, and exits 1; the
/// same report with coherent figures passes.
#[test]
fn the_report_fails_an_incoherent_run() {
    // Under cargo's scratch directory for tests, which a failed run may leave behind.
    let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("physics-report-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut bad = coherent();
    set(&mut bad, TransportKind::Tcp, AddrMode::Cached, 81.2, 0.02);
    for (name, report, code) in [("good", coherent(), 0), ("bad", bad, 1)] {
        let input = dir.join(format!("{name}.json"));
        std::fs::write(&input, serde_json::to_string(&report).unwrap()).unwrap();
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_rpcbench"))
            .args(["report", input.to_str().unwrap(), "--out"])
            .arg(dir.join(name))
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned()
            + &String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(code), "{name}: {text}");
        let readme = std::fs::read_to_string(dir.join(name).join("README.md")).unwrap();
        if code == 0 {
            assert!(readme.contains("orderings the protocols fix"), "{readme}");
        } else {
            assert!(
                text.contains("FAIL: physics")
                    && text.contains("does not depend on the address mode"),
                "{text}"
            );
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Findings compare two figures only beyond their noise.
#[test]
fn findings_say_no_measurable_difference_within_the_noise() {
    use rpcbench::analysis::findings::{Delta, Finding, Versus};
    let find = |r: &Report, pick: fn(&Finding) -> bool| {
        rpcbench::analysis::findings(r, &[], None)
            .into_iter()
            .find(pick)
            .expect("the finding")
    };
    let tcp_reuse = |r: &Report| match find(r, |f| matches!(f, Finding::Reuse(_))) {
        Finding::Reuse(pairs) => pairs
            .into_iter()
            .find(|p| p.kept.transport == TransportKind::Tcp)
            .expect("tcp's pair"),
        _ => unreachable!(),
    };
    // tcp 100 µs ± 5% against tcp-connect 104 µs ± 5%: within the noise.
    let mut r = coherent();
    // In every mode: a figure that breaks an ordering makes no finding.
    let every_mode = |r: &mut Report, t: TransportKind, mean: f64| {
        for mode in [AddrMode::Ip, AddrMode::Cached, AddrMode::Uncached] {
            set(r, t, mode, mean, 0.05);
        }
    };
    every_mode(&mut r, TransportKind::Tcp, 100.0);
    every_mode(&mut r, TransportKind::TcpConnect, 104.0);
    let pair = tcp_reuse(&r);
    assert_eq!(
        (pair.kept.mean_us, pair.fresh.mean_us, pair.fresh_over_kept),
        (100.0, 104.0, Versus::NoDifference)
    );
    // And the words say so.
    let words = rpcbench::render::findings::sentence(&Finding::Reuse(vec![pair]));
    assert!(
        words.contains("tcp 100 µs against tcp-connect 104 µs (no measurable difference)"),
        "{words}"
    );
    // Three times apart: a ratio.
    every_mode(&mut r, TransportKind::TcpConnect, 300.0);
    assert_eq!(tcp_reuse(&r).fresh_over_kept, Versus::Times(3.0));
    // The lookup's cost within the noise is none.
    set(
        &mut r,
        TransportKind::HttpFresh,
        AddrMode::Uncached,
        201.0,
        0.02,
    );
    match find(&r, |f| matches!(f, Finding::NameLookup { .. })) {
        Finding::NameLookup { added, .. } => assert_eq!(added, Delta::NoDifference),
        _ => unreachable!(),
    }
}

/// No finding is drawn from a figure that a failed physics check names: a tcp-connect
/// faster than tcp beyond the noise breaks an ordering, and the reuse finding leaves
/// that pair out rather than print a win below 1×.
#[test]
fn no_finding_from_figures_a_failed_check_names() {
    use rpcbench::analysis::findings::Finding;
    let mut r = coherent();
    set(&mut r, TransportKind::Tcp, AddrMode::Ip, 100.0, 0.02);
    set(&mut r, TransportKind::TcpConnect, AddrMode::Ip, 60.0, 0.02);
    assert!(
        failed(&r).contains(&(Rule::KeptNotSlowerThanFresh, TransportKind::Tcp)),
        "{:?}",
        failed(&r)
    );
    let all = rpcbench::analysis::findings(&r, &[], None);
    let Some(Finding::Reuse(pairs)) = all.iter().find(|f| matches!(f, Finding::Reuse(_))) else {
        panic!("the other pairs still make a reuse finding: {all:?}");
    };
    assert!(
        pairs.iter().all(|p| p.kept.transport != TransportKind::Tcp),
        "{pairs:?}"
    );
    // The words claim a win only where every pair shows one.
    let words = rpcbench::render::findings::sentence(&Finding::Reuse(pairs.clone()));
    assert!(
        words.starts_with("Reusing a connection is the biggest win"),
        "{words}"
    );
    let mut even = pairs.clone();
    even[0].fresh_over_kept = rpcbench::analysis::findings::Versus::NoDifference;
    let words = rpcbench::render::findings::sentence(&Finding::Reuse(even));
    assert!(
        words.starts_with("A kept connection against a new one per call"),
        "{words}"
    );
}

/// Multiplexing is compared at equal concurrency only: the fixture's h2-mux at 16 workers
/// against http-keepalive at 1 makes no finding; a keep-alive run at 16 workers does.
#[test]
fn the_mux_finding_compares_equal_concurrency_only() {
    use rpcbench::analysis::findings::Finding;
    let mux = |r: &Report| {
        rpcbench::analysis::findings(r, &[], None)
            .into_iter()
            .find_map(|f| match f {
                Finding::Multiplexing(shared) => shared
                    .into_iter()
                    .find(|m| m.shared.transport == TransportKind::H2Mux),
                _ => None,
            })
    };
    let mut r = fixture();
    assert_eq!(mux(&r), None, "h2-mux c16 against keep-alive c1");
    let mut twin = run_mut(&mut r, TransportKind::HttpKeepalive, AddrMode::Ip).clone();
    (twin.workers, twin.mux_comparison) = (16, true);
    r.runs.push(twin);
    let m = mux(&r).expect("a finding at 16 workers");
    assert_eq!(m.workers, 16);
    assert_eq!(m.against.len(), 1);
    assert_eq!(m.against[0].0.transport, TransportKind::HttpKeepalive);
}

/// A pick made on one host says so: the fixture called the embedded server.
#[test]
fn a_pick_on_loopback_does_not_speak_of_a_pair_of_hosts() {
    use rpcbench::analysis::findings::Finding;
    let pick = |r: &Report| {
        rpcbench::analysis::findings(r, &[], None)
            .into_iter()
            .find(|f| matches!(f, Finding::Pick { .. }))
            .map(|f| rpcbench::render::findings::sentence(&f))
            .expect("a pick")
    };
    let mut r = coherent();
    assert!(
        pick(&r).starts_with("On this host (loopback"),
        "{}",
        pick(&r)
    );
    r.target = "10.77.0.1".into();
    assert!(
        pick(&r).starts_with("For this pair of hosts"),
        "{}",
        pick(&r)
    );
}

/// A broken ordering is said in one line with its likely causes; a coherent run says
/// nothing.
#[test]
fn an_incoherent_run_says_so_in_one_line() {
    let mut r = coherent();
    r.physics = checks(&r);
    assert_eq!(rpcbench::render::incoherent_line(&r), None);
    set(&mut r, TransportKind::Tcp, AddrMode::Uncached, 60.0, 0.02);
    r.physics = checks(&r);
    let line = rpcbench::render::incoherent_line(&r).expect("a line");
    assert!(line.starts_with("figures not coherent: "), "{line}");
    assert!(!line.contains('\n'), "{line}");
    assert!(line.contains(rpcbench::render::LIKELY_CAUSES), "{line}");
}

/// A loopback run without a declared link beside a run across 60 ms: each pick says the
/// RTT it holds at, the loopback one at 0 µs.
#[test]
fn picks_beside_a_link_say_their_rtt() {
    use rpcbench::analysis::findings::Finding;
    let here = coherent();
    let mut far = coherent();
    far.target = "10.77.0.1".into();
    for run in &mut far.runs {
        run.link_rtt_us = Some(60_000.0);
    }
    let picks: Vec<f64> = rpcbench::analysis::findings(&here, &[&far], None)
        .into_iter()
        .filter_map(|f| match f {
            Finding::AtLinkRtt { rtt_us, finding } if matches!(*finding, Finding::Pick { .. }) => {
                Some(rtt_us)
            }
            _ => None,
        })
        .collect();
    assert_eq!(picks, [0.0, 60_000.0]);
}
