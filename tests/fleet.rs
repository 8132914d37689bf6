//! The fleet test bed (`report/fleet.sh`) at a small size: four namespaces with an echo
//! server and an agent each, a real Prometheus, h4's echo server stopped. The script's
//! own checks decide its exit status (only h1..h4 -> h4 lossy, through the recording
//! rules); here, that it passes, writes its heatmaps, and leaves nothing behind.
//!
//! Needs root for network namespaces and the prometheus package:
//! `cargo test --release --test fleet -- --ignored` (`.ci/run` does, as root).

mod common;

use common::netns::assert_not_running;
use std::path::Path;
use std::process::Command;

/// The script's default bound for the failed probes to show is two scrape intervals (the
/// issue's figure; it measured 1.85 s here); the test allows ten times that, so a loaded
/// CI machine cannot fail it on timing (the rules ask every wall-clock bound to be 10x).
const LOSS_WITHIN_S: &str = "20";

fn assert_nothing_left() {
    let netns = Command::new("ip").args(["netns", "list"]).output().unwrap();
    let list = String::from_utf8_lossy(&netns.stdout);
    assert!(!list.contains("rb-f"), "namespaces left: {list}");
    let links = Command::new("ip").args(["link", "show"]).output().unwrap();
    assert!(
        !String::from_utf8_lossy(&links.stdout).contains("rb-f"),
        "links left"
    );
    assert_not_running("rpcbench-echo .*10\\.78\\.0\\.", "a server");
    assert_not_running("rpcbench agent .*10\\.78\\.0\\.", "an agent");
    assert_not_running("prometheus .*rb-fleet", "prometheus");
}

#[test]
#[ignore = "needs root: builds network namespaces and runs prometheus (run with --ignored as root)"]
fn fleet_finds_the_stopped_host_and_cleans_up() {
    assert!(
        nix::unistd::Uid::effective().is_root(),
        "the fleet test bed needs root for network namespaces"
    );
    let out = std::env::temp_dir().join(format!("rpcbench-fleet-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let bin_dir = Path::new(env!("CARGO_BIN_EXE_rpcbench")).parent().unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("report/fleet.sh");
    let output = Command::new("bash")
        .arg(script)
        .args([
            "--settle",
            "5",
            "--after",
            "5",
            "--loss-within",
            LOSS_WITHIN_S,
        ])
        .arg("--out")
        .arg(&out)
        .env("RPCBENCH_BIN_DIR", bin_dir)
        .output()
        .expect("run report/fleet.sh");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert_nothing_left();
    assert_eq!(output.status.code(), Some(0), "{text}");
    let md = std::fs::read_to_string(out.join("fleet.md")).unwrap();
    assert!(
        md.contains("| pairs above 1% loss after the stop are exactly h1..h4 -> h4 | pass | h1->h4, h2->h4, h3->h4, h4->h4 |"),
        "{md}"
    );
    assert!(!md.contains("FAIL"), "{md}");
    for svg in ["fleet-p99.svg", "fleet-loss.svg"] {
        let svg = std::fs::read_to_string(out.join(svg)).unwrap();
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        // A cell per pair.
        assert_eq!(svg.matches("<rect x=").count(), 16, "{svg}");
    }
    let _ = std::fs::remove_dir_all(&out);
}
