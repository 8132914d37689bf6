//! The documentation cannot rot: every relative link in the README and `docs/` resolves
//! (file and heading), every page under `docs/` is reachable from the README, every flag
//! of every program's `--help` is documented, and the manual pages and shell completions
//! that `rpcbench manuals` writes cover every subcommand and complete `--tra` to
//! `--transports`.

mod common;

use clap::CommandFactory;
use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

/// The repository's root.
fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The targets of the markdown links `[text](target)` in `text`, outside code blocks and
/// code spans.
fn links(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        // Code spans may hold `](`: drop them first.
        let plain: String = line.split('`').step_by(2).collect::<Vec<_>>().join("");
        let mut rest = plain.as_str();
        while let Some(at) = rest.find("](") {
            let after = &rest[at + 2..];
            let Some(end) = after.find(')') else { break };
            out.push(after[..end].to_string());
            rest = &after[end..];
        }
    }
    out
}

/// GitHub's anchor of a heading: lower case, spaces to `-`, punctuation dropped.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// The anchors of every heading of a markdown page.
fn anchors(text: &str) -> BTreeSet<String> {
    let mut fenced = false;
    text.lines()
        .filter(|l| {
            if l.starts_with("```") {
                fenced = !fenced;
            }
            !fenced && l.starts_with('#')
        })
        .map(|l| anchor(l.trim_start_matches('#')))
        .collect()
}

#[test]
fn every_relative_link_resolves_and_every_page_is_reachable() {
    let mut reached = BTreeSet::new();
    let mut broken = Vec::new();
    for page in common::doc_pages() {
        let text = std::fs::read_to_string(&page).unwrap();
        for link in links(&text) {
            if link.starts_with("http://") || link.starts_with("https://") {
                continue;
            }
            let (file, heading) = link.split_once('#').unwrap_or((&link, ""));
            let target = if file.is_empty() {
                page.clone()
            } else {
                page.parent().unwrap().join(file)
            };
            let Ok(target) = target.canonicalize() else {
                broken.push(format!("{}: {link}: no such file", page.display()));
                continue;
            };
            reached.insert(target.clone());
            if !heading.is_empty() {
                let text = std::fs::read_to_string(&target).unwrap_or_default();
                if !anchors(&text).contains(heading) {
                    broken.push(format!("{}: {link}: no such heading", page.display()));
                }
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    for page in common::doc_pages().into_iter().skip(1) {
        let name = page.file_name().unwrap().to_string_lossy().into_owned();
        assert!(
            readme.contains(&format!("](docs/{name})")),
            "docs/{name} is not linked from the README"
        );
        assert!(reached.contains(&page.canonicalize().unwrap()));
    }
}

/// Every long flag of `command` and of its subcommands, but `--help` and `--version`:
/// (program and subcommand, flag).
fn flags(command: &clap::Command, path: &str, out: &mut Vec<(String, String)>) {
    for arg in command.get_arguments().filter(|a| !a.is_hide_set()) {
        if let Some(long) = arg.get_long()
            && long != "help"
            && long != "version"
        {
            out.push((path.to_string(), format!("--{long}")));
        }
    }
    for sub in command.get_subcommands().filter(|s| !s.is_hide_set()) {
        flags(sub, &format!("{path} {}", sub.get_name()), out);
    }
}

/// True when `text` names `flag` as a whole word: `--key` in "`--cert PEM --key PEM`",
/// not inside `--client-key`.
fn names(text: &str, flag: &str) -> bool {
    let word = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '-');
    text.match_indices(flag).any(|(at, _)| {
        !word(text[..at].chars().next_back()) && !word(text[at + flag.len()..].chars().next())
    })
}

#[test]
fn every_flag_of_help_is_documented() {
    let docs = common::docs_text();
    let mut all = Vec::new();
    flags(
        &rpcbench::cli::rpcbench::Cli::command(),
        "rpcbench",
        &mut all,
    );
    flags(
        &rpcbench::cli::echo::EchoArgs::command(),
        "rpcbench-echo",
        &mut all,
    );
    flags(
        &rpcbench::cli::link::LinkArgs::command(),
        "rpcbench-link",
        &mut all,
    );
    assert!(all.len() > 50, "only {} flags found", all.len());
    let missing: Vec<String> = all
        .iter()
        .filter(|(_, flag)| !names(&docs, flag))
        .map(|(program, flag)| format!("{program} {flag}"))
        .collect();
    assert!(
        missing.is_empty(),
        "flags in --help that no page of the README or docs/ names:\n{}",
        missing.join("\n")
    );
}

#[test]
fn manuals_cover_every_subcommand_and_bash_completes_flags() {
    let dir = std::env::temp_dir().join(format!("rpcbench-manuals-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let out = Command::new(env!("CARGO_BIN_EXE_rpcbench"))
        .args(["manuals", "--out"])
        .arg(&dir)
        .output()
        .expect("run rpcbench manuals");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let page = std::fs::read_to_string(dir.join("rpcbench.1")).expect("rpcbench.1");
    assert!(
        page.starts_with(".ie") || page.contains(".TH rpcbench"),
        "{page}"
    );
    let cli = rpcbench::cli::rpcbench::Cli::command();
    let subcommands: Vec<&str> = cli
        .get_subcommands()
        .filter(|s| !s.is_hide_set())
        .map(|s| s.get_name())
        .collect();
    assert_eq!(subcommands.len(), 5, "{subcommands:?}");
    for sub in &subcommands {
        assert!(
            page.contains(&format!("rpcbench\\-{sub}")),
            "rpcbench.1 lacks {sub}"
        );
        let own = std::fs::read_to_string(dir.join(format!("rpcbench-{sub}.1")))
            .unwrap_or_else(|e| panic!("rpcbench-{sub}.1: {e}"));
        assert!(own.contains(".SH OPTIONS"), "rpcbench-{sub}.1");
    }
    assert!(!page.contains("manuals"), "the hidden subcommand is listed");
    for program in ["rpcbench-echo", "rpcbench-link"] {
        let page = std::fs::read_to_string(dir.join(format!("{program}.1"))).unwrap();
        assert!(page.contains(".SH OPTIONS"), "{program}.1");
        for file in [
            format!("{program}.bash"),
            format!("_{program}"),
            format!("{program}.fish"),
        ] {
            assert!(dir.join(&file).is_file(), "{file}");
        }
    }
    // What a user gets at `rpcbench --tra<TAB>` in bash.
    let script = format!(
        "source {}; COMP_WORDS=(rpcbench --tra); COMP_CWORD=1; _rpcbench rpcbench --tra rpcbench; printf '%s\\n' \"${{COMPREPLY[@]}}\"",
        dir.join("rpcbench.bash").display()
    );
    let bash = Command::new("bash")
        .args(["-c", &script])
        .output()
        .expect("run bash");
    let completed = String::from_utf8_lossy(&bash.stdout);
    assert_eq!(
        completed.trim(),
        "--transports",
        "{}",
        String::from_utf8_lossy(&bash.stderr)
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
