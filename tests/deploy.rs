//! The manifests under `deploy/`, checked by the tools that will read them: `promtool`
//! (Debian's `prometheus` package) for the Prometheus configuration, rules and their unit
//! tests, `kubernetes-validate` (PyPI) for the Kubernetes objects, and here for what ties
//! them together: every metric the dashboard and the rules read is one the agent exports
//! or a rule records.

mod common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A path under `deploy/`.
fn deploy(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("deploy")
        .join(path)
}

/// Runs `program args`, and fails the test with its output unless it exits 0.
fn run_ok(program: &str, args: &[&str], dir: &Path) -> String {
    let out = Command::new(program)
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {program}: {e}"));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{program} {args:?} failed:\n{text}");
    text
}

#[test]
#[ignore = "needs promtool (apt-get install prometheus)"]
fn promtool_accepts_config_rules_and_rule_tests() {
    let dir = deploy("prometheus");
    let out = run_ok("promtool", &["check", "config", "prometheus.yml"], &dir);
    assert!(out.contains("2 rule files found"), "{out}");
    run_ok(
        "promtool",
        &["check", "rules", "rules.yml", "alerts.yml"],
        &dir,
    );
    let out = run_ok("promtool", &["test", "rules", "rules_test.yml"], &dir);
    assert!(out.contains("SUCCESS"), "{out}");
}

#[test]
#[ignore = "needs kubernetes-validate (pip install kubernetes-validate)"]
fn kubernetes_objects_validate_strictly() {
    let dir = deploy("kubernetes");
    let out = run_ok("kubernetes-validate", &["--strict", "rpcbench.yaml"], &dir);
    for kind in ["namespace", "service", "configmap", "daemonset"] {
        assert!(
            out.contains(&format!("passed for resource {kind}/")),
            "{kind} not validated:\n{out}"
        );
    }
}

/// Every `rpcbench_*` or `pair*:` metric name in `text`.
fn metric_names(text: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let bytes: Vec<char> = text.chars().collect();
    let is_name = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == ':';
    let mut i = 0;
    while i < bytes.len() {
        if is_name(bytes[i]) && (i == 0 || !is_name(bytes[i - 1])) {
            let start = i;
            while i < bytes.len() && is_name(bytes[i]) {
                i += 1;
            }
            let word: String = bytes[start..i].iter().collect();
            if word.starts_with("rpcbench_probe") || word.starts_with("pair") && word.contains(':')
            {
                names.insert(word);
            }
        } else {
            i += 1;
        }
    }
    names
}

/// The names the rules record.
fn recorded() -> BTreeSet<String> {
    let rules = std::fs::read_to_string(deploy("prometheus/rules.yml")).unwrap();
    rules
        .lines()
        .filter_map(|l| l.trim().strip_prefix("- record: "))
        .map(|s| s.trim().to_string())
        .collect()
}

/// The families the agent exports, with their histogram and counter sample names.
fn exported() -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for family in [
        "rpcbench_probe_duration_seconds",
        "rpcbench_probe_phase_duration_seconds",
    ] {
        for suffix in ["_bucket", "_sum", "_count"] {
            names.insert(format!("{family}{suffix}"));
        }
    }
    names.insert("rpcbench_probe_calls_total".into());
    names.insert("rpcbench_probe_last_success_timestamp_seconds".into());
    names
}

#[test]
fn dashboard_and_rules_read_only_what_exists() {
    let docs = common::docs_text();
    for name in exported() {
        let family = ["_bucket", "_sum", "_count"]
            .iter()
            .fold(name.as_str(), |n, s| n.strip_suffix(s).unwrap_or(n));
        assert!(
            docs.contains(&format!("`{family}`")),
            "{family} is not in the docs"
        );
    }
    let recorded = recorded();
    assert!(recorded.len() >= 6, "{recorded:?}");
    let known: BTreeSet<String> = recorded.union(&exported()).cloned().collect();
    for file in [
        "prometheus/rules.yml",
        "prometheus/alerts.yml",
        "grafana/rpcbench-fleet.json",
    ] {
        let text = std::fs::read_to_string(deploy(file)).unwrap();
        let used = metric_names(&text);
        assert!(!used.is_empty(), "{file} reads no metric");
        for name in &used {
            assert!(
                known.contains(name),
                "{file} reads {name}, which nothing exports or records"
            );
        }
    }
    let dashboard: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(deploy("grafana/rpcbench-fleet.json")).unwrap(),
    )
    .expect("the dashboard is JSON");
    let panels = dashboard["panels"].as_array().unwrap();
    let matrices: Vec<_> = panels
        .iter()
        .filter(|p| {
            p["transformations"]
                .as_array()
                .is_some_and(|t| t.iter().any(|t| t["id"] == "groupingToMatrix"))
        })
        .collect();
    assert_eq!(matrices.len(), 2, "a p99 and a loss matrix");
    for m in matrices {
        let options = &m["transformations"][0]["options"];
        assert_eq!(options["rowField"], "source");
        assert_eq!(options["columnField"], "peer");
    }
    // Drill-down: panels per transport for the chosen pair.
    assert!(panels.iter().any(|p| {
        p["targets"][0]["legendFormat"]
            .as_str()
            .is_some_and(|l| l.contains("{{transport}}"))
    }));
}
