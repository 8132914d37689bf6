//! The two-host test bed (`report/testbed.sh`): it runs, its report holds every truth check
//! and they pass, and it leaves no namespace, process or /etc/netns entry behind, also when
//! run twice in a row. Needs root (CI runs as root); elsewhere it says why it was skipped.

use std::path::Path;
use std::process::Command;

fn testbed(out: &Path, calls: &str, peers: bool) -> (bool, String) {
    let bin_dir = Path::new(env!("CARGO_BIN_EXE_rpcbench")).parent().unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("report/testbed.sh");
    let mut cmd = Command::new("bash");
    cmd.arg(script)
        .args([
            "--calls",
            calls,
            "--peer-calls",
            "5000",
            "--peer-rounds",
            "3",
            "--pin",
            "same",
            "--out",
        ])
        .arg(out)
        .env("RPCBENCH_BIN_DIR", bin_dir);
    if !peers {
        cmd.arg("--no-peers");
    }
    let output = cmd.output().expect("run report/testbed.sh");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    (output.status.success(), text)
}

fn assert_nothing_left() {
    let netns = Command::new("ip").args(["netns", "list"]).output().unwrap();
    let list = String::from_utf8_lossy(&netns.stdout);
    assert!(
        !list.contains("rb-srv") && !list.contains("rb-cli"),
        "namespaces left: {list}"
    );
    assert!(
        !Path::new("/etc/netns/rb-cli").exists(),
        "/etc/netns/rb-cli left"
    );
    let links = Command::new("ip").args(["link", "show"]).output().unwrap();
    assert!(
        !String::from_utf8_lossy(&links.stdout).contains("rb-veth"),
        "veth left"
    );
    let ps = Command::new("pgrep")
        .args(["-f", "rpcbench-echo .*10.77.0.1"])
        .output()
        .unwrap();
    assert!(
        ps.stdout.is_empty(),
        "server left running: {}",
        String::from_utf8_lossy(&ps.stdout)
    );
}

#[test]
fn testbed_runs_reports_and_cleans_up() {
    if !nix::unistd::Uid::effective().is_root() {
        eprintln!("skipped: the test bed needs root for network namespaces (CI runs as root)");
        return;
    }
    let out = std::env::temp_dir().join(format!("rpcbench-testbed-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    // A short run without peers first: the second run right after it must work too.
    let (ok, text) = testbed(&out, "100", false);
    assert_nothing_left();
    assert!(text.contains("report written"), "{text}");
    let _ = ok;
    // The real run, peers included. Its exit status says whether every truth check passed.
    let (ok, text) = testbed(&out, "300", true);
    assert_nothing_left();
    assert!(text.contains("report written"), "{text}");
    let readme = std::fs::read_to_string(out.join("README.md")).unwrap();
    for needle in [
        "| server delay 5000 µs: tcp (ip)",
        "| server delay 5000 µs: curl-fresh (ip)",
        "over calls started 5000 µs apart",
        "| DNS delay 20000 µs: http-fresh (uncached)",
        "| DNS delay 20000 µs: http-fresh (cached)",
        "| tcp against sockperf",
        "| http-keepalive against wrk",
        "| http-fresh against ab",
        "| curl-reuse against curl",
        "| tcp-connect against",
        "same core (CPU 0)",
        "| HTTP by host name | 156.42 |",
    ] {
        assert!(
            readme.contains(needle),
            "README lacks {needle:?}:\n{readme}"
        );
    }
    // Every truth check must pass: server delay (against a paced reference), DNS delay,
    // and rpcbench within 1.3× of each peer.
    let failed: Vec<&str> = readme
        .lines()
        .filter(|l| l.ends_with("| **no** |"))
        .collect();
    assert!(
        failed.is_empty(),
        "truth checks failed:\n{}\n\n{text}",
        failed.join("\n")
    );
    assert!(
        ok,
        "testbed.sh exited non-zero although no check failed:\n{text}"
    );
    assert!(out.join("index.html").exists());
    let _ = std::fs::remove_dir_all(&out);
}
