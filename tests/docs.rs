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
    // The synopsis names each flag's value; every page says its exit statuses and
    // examples.
    let synopsis = page.split(".SH DESCRIPTION").next().unwrap();
    assert!(
        synopsis.contains("\\fB\\-\\-target\\fR \\fIHOST\\fR"),
        "{synopsis}"
    );
    for file in std::fs::read_dir(&dir).unwrap() {
        let path = file.unwrap().path();
        if path.extension().is_some_and(|e| e == "1") {
            let text = std::fs::read_to_string(&path).unwrap();
            for section in [
                ".SH \"EXIT STATUS\"",
                ".SH EXAMPLES",
                ".SH SYNOPSIS",
                ".SH OPTIONS",
            ] {
                assert!(text.contains(section), "{}: {section}", path.display());
            }
            assert_eq!(
                text.matches(".ds Aq").count(),
                2,
                "{}: one preamble",
                path.display()
            );
        } else {
            let text = std::fs::read_to_string(&path).unwrap();
            assert!(
                !text.contains("manuals"),
                "{} completes the hidden subcommand",
                path.display()
            );
        }
    }
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

/// The three programs' clap commands, built (so that subcommands know their full names),
/// without clap's `help` subcommand, which no page documents.
fn programs() -> Vec<clap::Command> {
    [
        rpcbench::cli::rpcbench::Cli::command(),
        rpcbench::cli::echo::EchoArgs::command(),
        rpcbench::cli::link::LinkArgs::command(),
    ]
    .into_iter()
    .map(|c| {
        let mut c = c.disable_help_subcommand(true);
        c.build();
        c
    })
    .collect()
}

/// Every program and visible subcommand, as typed (`rpcbench sweep`), with its command.
fn commands() -> Vec<(String, clap::Command)> {
    let mut out = Vec::new();
    for program in programs() {
        let name = program.get_name().to_string();
        let subs: Vec<clap::Command> = program
            .get_subcommands()
            .filter(|s| !s.is_hide_set())
            .cloned()
            .collect();
        out.push((name.clone(), program));
        for sub in subs {
            out.push((format!("{name} {}", sub.get_name()), sub));
        }
    }
    out
}

/// The command typed as `path` (`rpcbench sweep`).
fn command(path: &str) -> clap::Command {
    commands()
        .into_iter()
        .find(|(p, _)| p == path)
        .unwrap_or_else(|| panic!("no command {path}"))
        .1
}

/// The blocks of `text` between `<!-- NAME: ARG -->` and `<!-- /NAME -->`: (ARG, the
/// block's byte range).
fn generated_blocks(text: &str, name: &str) -> Vec<(String, std::ops::Range<usize>)> {
    let open = format!("<!-- {name}: ");
    let close = format!("<!-- /{name} -->");
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(at) = text[from..].find(&open) {
        let start = from + at;
        let arg_end = start + text[start..].find(" -->").expect("an open marker ends");
        let arg = text[start + open.len()..arg_end].to_string();
        let body = arg_end + " -->\n".len();
        let end = body
            + text[body..]
                .find(&close)
                .unwrap_or_else(|| panic!("{close} missing"));
        out.push((arg, body..end));
        from = end;
    }
    out
}

/// Checks every generated block of every page against what generates it; with
/// `UPDATE_DOCS=1` in the environment, writes them instead.
fn check_generated(name: &str, generate: impl Fn(&str) -> String) -> BTreeSet<String> {
    let update = std::env::var_os("UPDATE_DOCS").is_some();
    let mut seen = BTreeSet::new();
    let mut stale = Vec::new();
    for page in common::doc_pages() {
        let mut text = std::fs::read_to_string(&page).unwrap();
        let blocks = generated_blocks(&text, name);
        for (arg, range) in blocks.into_iter().rev() {
            let want = generate(&arg);
            if text[range.clone()] != want {
                stale.push(format!("{}: {name}: {arg}", page.display()));
                text.replace_range(range, &want);
            }
            seen.insert(arg);
        }
        if update {
            std::fs::write(&page, &text).unwrap();
        }
    }
    assert!(
        update || stale.is_empty(),
        "generated blocks out of date (UPDATE_DOCS=1 cargo test --release --test docs writes them):\n{}",
        stale.join("\n")
    );
    seen
}

/// The flag tables of docs/ are clap's own: every program and subcommand has one, and
/// each says what `--help` says (flags, value names, defaults, help).
#[test]
fn flag_tables_are_generated_from_clap() {
    let seen = check_generated("flags", |path| {
        rpcbench::cli::manuals::markdown_flags(&command(path), path)
    });
    let all: BTreeSet<String> = commands().into_iter().map(|(p, _)| p).collect();
    assert_eq!(seen, all, "every command's flags, once");
}

/// The exit status table of docs/reference.md is the one `--help` and the manual pages
/// show, and every command has its statuses and examples.
#[test]
fn exit_statuses_are_generated_and_every_command_has_them() {
    use rpcbench::cli::manuals::EXTRAS;
    let all: Vec<String> = commands().into_iter().map(|(p, _)| p).collect();
    let listed: Vec<String> = EXTRAS.iter().map(|e| e.command.to_string()).collect();
    assert_eq!(
        listed.iter().collect::<BTreeSet<_>>(),
        all.iter().collect::<BTreeSet<_>>()
    );
    for extras in EXTRAS {
        let statuses: Vec<u8> = extras.exits.iter().map(|(s, _)| *s).collect();
        assert_eq!(statuses, [0, 1, 2], "{}", extras.command);
        assert!(!extras.examples.is_empty(), "{}", extras.command);
    }
    let seen = check_generated("exit-status", |_| {
        let mut table = String::from("| program | status | meaning |\n| --- | --- | --- |\n");
        for extras in EXTRAS {
            for (status, meaning) in extras.exits {
                table.push_str(&format!("| {} | {status} | {meaning} |\n", extras.command));
            }
        }
        table
    });
    assert_eq!(seen.len(), 1, "docs/reference.md has the table");
}

/// Splits a command line as a shell would for the simple lines docs show: words, single
/// and double quotes, no expansion. `None` for a line with a substitution or a variable.
fn shell_words(line: &str) -> Option<Vec<String>> {
    if line.contains('$') || line.contains('`') || line.contains('<') || line.contains('|') {
        return None;
    }
    let mut words = Vec::new();
    let mut word = String::new();
    let mut quote = None;
    let mut in_word = false;
    for c in line.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => word.push(c),
            (None, '\'' | '"') => {
                quote = Some(c);
                in_word = true;
            }
            (None, c) if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            (None, c) => {
                word.push(c);
                in_word = true;
            }
        }
    }
    if in_word {
        words.push(word);
    }
    Some(words)
}

/// The command lines of the code blocks of `text` that run one of our programs: each
/// line's words from the program on (after `sudo`, `taskset -c N`, `VAR=value`), with
/// continuation lines joined and comments dropped.
fn example_lines(text: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let mut fenced = false;
    let mut shell = false;
    let mut pending = String::new();
    for line in text.lines() {
        if let Some(lang) = line.trim_start().strip_prefix("```") {
            fenced = !fenced;
            // A synopsis or an output (```text) is not a command line.
            shell = fenced && matches!(lang.trim(), "" | "sh" | "bash" | "console");
            continue;
        }
        if !shell {
            continue;
        }
        let line = line.split(" #").next().unwrap_or("");
        if let Some(head) = line.trim_end().strip_suffix('\\') {
            pending.push_str(head);
            pending.push(' ');
            continue;
        }
        let whole = std::mem::take(&mut pending) + line;
        let Some(mut words) = shell_words(&whole) else {
            continue;
        };
        // The first command of a list (`a && b`, `a; b`, `a &`).
        if let Some(end) = words
            .iter()
            .position(|w| matches!(w.as_str(), "&&" | ";" | "&" | "||"))
        {
            words.truncate(end);
        }
        let mut rest = words.as_slice();
        loop {
            match rest {
                [first, more @ ..] if first == "sudo" || first.contains('=') => rest = more,
                [first, _, _, more @ ..] if first == "taskset" => rest = more,
                [first, _, more @ ..] if first == "nice" || first == "timeout" => rest = more,
                _ => break,
            }
        }
        if let Some(program) = rest.first()
            && matches!(
                program.rsplit('/').next(),
                Some("rpcbench" | "rpcbench-echo" | "rpcbench-link")
            )
        {
            let mut words = rest.to_vec();
            words[0] = program.rsplit('/').next().unwrap().to_string();
            out.push(words);
        }
    }
    out
}

/// Every example command line, in `--help`, the manual pages and the code blocks of the
/// docs, parses: its flags exist on its program and their values are accepted.
#[test]
fn every_example_command_parses() {
    let mut lines: Vec<(String, Vec<String>)> = rpcbench::cli::manuals::EXTRAS
        .iter()
        .flat_map(|e| e.examples.iter())
        .map(|(line, _)| {
            (
                "--help".to_string(),
                shell_words(line).expect("a plain command line"),
            )
        })
        .collect();
    for page in common::doc_pages() {
        let text = std::fs::read_to_string(&page).unwrap();
        for words in example_lines(&text) {
            lines.push((page.display().to_string(), words));
        }
    }
    assert!(lines.len() > 20, "only {} example lines", lines.len());
    let mut bad = Vec::new();
    for (place, words) in &lines {
        let program = programs()
            .into_iter()
            .find(|p| p.get_name() == words[0])
            .expect("one of ours");
        if let Err(e) = program.try_get_matches_from(words)
            && !matches!(
                e.kind(),
                clap::error::ErrorKind::DisplayHelp | clap::error::ErrorKind::DisplayVersion
            )
        {
            bad.push(format!("{place}: {}: {}", words.join(" "), e.kind()));
        }
    }
    assert!(
        bad.is_empty(),
        "example lines that do not parse:\n{}",
        bad.join("\n")
    );
}

/// Every text `--help` shows, of every program, subcommand, flag and value.
fn help_texts() -> Vec<(String, String)> {
    let mut out = Vec::new();
    for (path, command) in commands() {
        for text in [command.get_about(), command.get_long_about()]
            .into_iter()
            .flatten()
        {
            out.push((path.clone(), text.to_string()));
        }
        for arg in command.get_arguments() {
            let name = format!("{path} {}", arg.get_id());
            for text in [arg.get_help(), arg.get_long_help()].into_iter().flatten() {
                out.push((name.clone(), text.to_string()));
            }
            for value in arg.get_possible_values() {
                if let Some(help) = value.get_help() {
                    out.push((format!("{name}={}", value.get_name()), help.to_string()));
                }
            }
        }
    }
    out
}

/// `--help` is for users: no rustdoc link syntax (`[`Type`]`, `[text](target)`) and no
/// Rust paths (`Placement::resolve`) in any text it shows.
#[test]
fn help_has_no_rustdoc_syntax() {
    let texts = help_texts();
    assert!(texts.len() > 100, "only {} help texts", texts.len());
    let bad: Vec<String> = texts
        .iter()
        .filter(|(_, t)| {
            t.contains("[`")
                || t.contains("](")
                || t.as_bytes()
                    .windows(3)
                    .any(|w| w[0].is_ascii_alphanumeric() && w[1] == b':' && w[2] == b':')
        })
        .map(|(place, t)| format!("{place}: {t}"))
        .collect();
    assert!(
        bad.is_empty(),
        "help texts with rustdoc syntax:\n{}",
        bad.join("\n")
    );
}

/// Who a flag named in the docs belongs to.
#[derive(Debug, Clone)]
enum Owner {
    /// One of our commands, as typed (`rpcbench sweep`).
    Ours(Vec<String>),
    /// A script or example of the repository, whose text must name the flag.
    Script(std::path::PathBuf),
    /// Another program (cargo, h2load, Prometheus): not ours to check.
    Foreign,
}

/// Programs that are not ours whose flags the docs name.
const FOREIGN: &[&str] = &[
    "cargo",
    "h2load",
    "wrk",
    "wrk2",
    "sockperf",
    "curl",
    "ab",
    "nghttp",
    "nghttpx",
    "haproxy",
    "prometheus",
    "promtool",
    "kubernetes-validate",
    "kubectl",
    "taskset",
    "chrt",
    "ip",
    "tc",
    "dig",
    "python3",
    "pip",
    "openssl",
    "iperf3",
    "fortio",
    "oha",
    "ghz",
    "netperf",
    "apt-get",
    "git",
    "man",
    "buildah",
    "nginx",
    "unbound",
    "dnsperf",
    "hyperfine",
    "rustup",
    "sh",
    "bash",
    "grpcurl",
    "perf",
    "strace",
    "valgrind",
    "ss",
    "sysctl",
    "ulimit",
    "rustfmt",
    "mkdir",
    "cp",
];

/// The programs a page's bare flags belong to when no program is named before them in
/// the paragraph.
fn page_owners(page: &Path) -> Vec<String> {
    let name = page.file_stem().unwrap().to_string_lossy().into_owned();
    let owners: &[&str] = match name.as_str() {
        "client" => &[
            "rpcbench",
            "rpcbench sweep",
            "rpcbench report",
            "rpcbench compare",
            "rpcbench dns",
            "rpcbench agent",
        ],
        "echo-server" => &["rpcbench-echo"],
        "link" => &["rpcbench-link", "rpcbench", "rpcbench report"],
        "fleet" => &["rpcbench agent", "rpcbench-echo"],
        "dns" => &["rpcbench dns", "rpcbench", "rpcbench-echo"],
        "load" => &["rpcbench", "rpcbench sweep"],
        "reports" => &["rpcbench report", "rpcbench compare", "rpcbench"],
        "tls" | "transports" | "reference" | "remote" | "install" | "troubleshooting" => {
            &["rpcbench", "rpcbench-echo"]
        }
        _ => &["rpcbench"],
    };
    owners.iter().map(|o| o.to_string()).collect()
}

/// A page's paragraphs as its flags are read: text between blank lines, each table row
/// and each command line of a code block (continuations joined) on its own.
fn paragraphs(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    let mut fenced = false;
    for line in text.lines() {
        let fence = line.trim_start().starts_with("```");
        if fence {
            fenced = !fenced;
        }
        if fence
            || fenced
            || line.trim().is_empty()
            || line.starts_with('|')
            || line.starts_with('#')
        {
            if !current.is_empty() && !current.ends_with("\\ ") {
                out.push(std::mem::take(&mut current));
            }
            if !fence && !line.trim().is_empty() {
                if fenced && line.trim_end().ends_with('\\') {
                    current.push_str(line.trim_end().trim_end_matches('\\'));
                    current.push_str("\\ ");
                    continue;
                }
                current.push_str(line);
                let whole = std::mem::take(&mut current).replace("\\ ", " ");
                // A command line is one code span: no sentence ends inside it.
                out.push(if fenced { format!("`{whole}`") } else { whole });
            }
            continue;
        }
        current.push_str(line);
        current.push(' ');
    }
    if !current.is_empty() {
        out.push(current);
    }
    out
}

/// The words of a paragraph as flags and programs are read from it: code marks,
/// brackets and punctuation around words dropped, `--flag=value` cut at the `=`.
fn words(paragraph: &str) -> Vec<String> {
    paragraph
        .split(|c: char| c.is_whitespace() || "`()[]{}|,;\"'".contains(c))
        .map(|w| w.trim_end_matches(['.', ':', '*']).to_string())
        .map(|w| match w.split_once('=') {
            Some((flag, _)) if w.starts_with("--") => flag.to_string(),
            _ => w,
        })
        .filter(|w| !w.is_empty())
        .collect()
}

/// Every long flag `paragraph` names, with whom it belongs to: the program (or script,
/// or other tool) named last before it in the paragraph, else the page's own programs.
fn attributed_flags(paragraph: &str, page: &Path) -> Vec<(String, Owner)> {
    let subcommands: Vec<String> = programs()[0]
        .get_subcommands()
        .map(|s| s.get_name().to_string())
        .collect();
    let mut out = Vec::new();
    // A program named in one sentence says nothing of the flags of the next.
    for clause in sentences(paragraph) {
        out.extend(clause_flags(&clause, page, &subcommands));
    }
    out
}

/// The sentences of a paragraph: split at `. ` and `; ` outside code spans.
fn sentences(paragraph: &str) -> Vec<String> {
    let mut out = vec![String::new()];
    let mut code = false;
    let mut chars = paragraph.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '`' {
            code = !code;
        }
        out.last_mut().unwrap().push(c);
        if !code && (c == '.' || c == ';') && chars.peek() == Some(&' ') {
            out.push(String::new());
        }
    }
    out
}

/// [`attributed_flags`] of one sentence.
fn clause_flags(clause: &str, page: &Path, subcommands: &[String]) -> Vec<(String, Owner)> {
    let words = words(clause);
    let mut owner = Owner::Ours(page_owners(page));
    let mut out = Vec::new();
    for (i, word) in words.iter().enumerate() {
        let base = word.rsplit('/').next().unwrap_or(word);
        if word.starts_with("--") && word.len() > 2 && word.as_bytes()[2].is_ascii_lowercase() {
            out.push((word.clone(), owner.clone()));
        } else if base == "rpcbench" {
            owner = match words.get(i + 1) {
                // A subcommand's paragraph may name the run's flags too ("`rpcbench
                // report` reads runs made with `--delay-us`").
                Some(sub) if subcommands.contains(sub) => {
                    Owner::Ours(vec![format!("rpcbench {sub}"), "rpcbench".into()])
                }
                _ => Owner::Ours(vec!["rpcbench".into()]),
            };
        } else if base == "rpcbench-echo" || base == "rpcbench-link" {
            owner = Owner::Ours(vec![base.to_string()]);
        } else if (word.ends_with(".sh") || word.ends_with(".py") || word.ends_with(".rs"))
            && (word.starts_with("report/")
                || word.starts_with("examples/")
                || word.starts_with("deploy/"))
        {
            owner = Owner::Script(root().join(word));
        } else if FOREIGN.contains(&base.to_lowercase().as_str()) {
            owner = Owner::Foreign;
        }
    }
    out
}

/// The arguments of the command typed as `path`, hidden ones included (a page may name
/// a hidden subcommand's flags).
fn longs(path: &str) -> Vec<clap::Arg> {
    let mut all = programs();
    let mut words = path.split(' ');
    let program = words.next().unwrap();
    let mut c = all
        .iter_mut()
        .find(|p| p.get_name() == program)
        .unwrap()
        .clone();
    for sub in words {
        c = c.find_subcommand(sub).unwrap().clone();
    }
    c.get_arguments().cloned().collect()
}

/// True when `flag` is one of `owner`'s; `None` when the owner is not ours to check.
fn belongs(flag: &str, owner: &Owner) -> Option<bool> {
    match owner {
        Owner::Foreign => None,
        Owner::Script(path) => Some(std::fs::read_to_string(path).is_ok_and(|t| names(&t, flag))),
        Owner::Ours(paths) => Some(paths.iter().any(|p| {
            longs(p)
                .iter()
                .any(|a| a.get_long().is_some_and(|l| format!("--{l}") == flag))
        })),
    }
}

/// A flag a page names exists on the program it belongs to (the one the paragraph names,
/// else the page's own), or in the text of the script it is given to.
#[test]
fn every_flag_a_page_names_exists_on_its_program() {
    let mut bad = Vec::new();
    let mut checked = 0;
    for page in common::doc_pages() {
        let text = without_generated(&std::fs::read_to_string(&page).unwrap());
        for paragraph in paragraphs(&text) {
            for (flag, owner) in attributed_flags(&paragraph, &page) {
                let Some(ok) = belongs(&flag, &owner) else {
                    continue;
                };
                checked += 1;
                if !ok {
                    bad.push(format!(
                        "{}: {flag} is not a flag of {owner:?}",
                        page.display()
                    ));
                }
            }
        }
    }
    assert!(checked > 200, "only {checked} flags checked");
    assert!(
        bad.is_empty(),
        "flags the docs name that do not exist:\n{}",
        bad.join("\n")
    );
}

/// `text` without its generated blocks, whose flags are clap's own (and whose help texts
/// [`every_flag_help_names_exists`] checks).
fn without_generated(text: &str) -> String {
    let mut out = text.to_string();
    for name in ["flags", "exit-status", "file"] {
        for (_, range) in generated_blocks(&out.clone(), name).into_iter().rev() {
            out.replace_range(range, "");
        }
    }
    out
}

/// Every flag a help text names (`--max-lost`, `rpcbench-echo --udp`) is a flag of one of
/// the three programs.
#[test]
fn every_flag_help_names_exists() {
    // A help text may name any program's flags; a script's are checked in the script.
    let anywhere = Path::new("help.md");
    let all: Vec<String> = commands().into_iter().map(|(p, _)| p).collect();
    let bad: Vec<String> = help_texts()
        .iter()
        .flat_map(|(place, text)| {
            attributed_flags(text, anywhere)
                .into_iter()
                .filter(|(flag, owner)| {
                    let owner = match owner {
                        Owner::Ours(_) => Owner::Ours(all.clone()),
                        other => other.clone(),
                    };
                    belongs(flag, &owner) == Some(false)
                })
                .map(move |(flag, _)| format!("{place}: {flag}"))
        })
        .collect();
    assert!(
        bad.is_empty(),
        "help texts name flags no program has:\n{}",
        bad.join("\n")
    );
}

/// A default as the docs and clap write it, compared loosely: `10 s` is `10s`, `1,000`
/// is `1000`, code marks and a trailing period dropped.
fn default_key(text: &str) -> String {
    let kept: Vec<char> = text
        .chars()
        .filter(|c| !c.is_whitespace() && *c != '`' && *c != '_')
        .collect();
    let digit = |i: Option<&char>| i.is_some_and(char::is_ascii_digit);
    (0..kept.len())
        .filter(|&i| {
            !(kept[i] == ',' && digit(kept.get(i.wrapping_sub(1))) && digit(kept.get(i + 1)))
        })
        .map(|i| kept[i])
        .collect::<String>()
        .trim_end_matches('.')
        .to_lowercase()
}

/// clap's default of `flag` on the first of `owners` that has it, as [`default_key`] reads it.
fn clap_default(flag: &str, owners: &[String]) -> Option<Option<String>> {
    owners.iter().find_map(|p| {
        longs(p)
            .into_iter()
            .find(|a| a.get_long().is_some_and(|l| format!("--{l}") == flag))
            .map(|a| {
                let d = rpcbench::cli::manuals::default_text(&a);
                (!d.is_empty() && d != "off").then(|| default_key(&d))
            })
    })
}

/// Every default a page states for a flag ("`--rounds` (default 3)", "`--warmup`, 100 by
/// default", a table's default column) is clap's, where clap has one.
#[test]
fn every_default_a_page_states_is_clap_s() {
    let mut bad = Vec::new();
    let mut checked = 0;
    for page in common::doc_pages() {
        let text = without_generated(&std::fs::read_to_string(&page).unwrap());
        let mut stated: Vec<(String, String, Owner)> = Vec::new();
        for paragraph in paragraphs(&text) {
            let flags = attributed_flags(&paragraph, &page);
            if paragraph.starts_with('|') {
                continue;
            }
            for (flag, owner) in flags {
                // The flag as a whole word: `--dns` is not the start of `--dns-name`.
                let Some(at) = paragraph
                    .match_indices(&format!("`{flag}"))
                    .find_map(|(at, m)| {
                        let next = paragraph[at + m.len()..].chars().next();
                        (!next.is_some_and(|c| c.is_alphanumeric() || c == '-')).then_some(at)
                    })
                else {
                    continue;
                };
                let after = &paragraph[at + flag.len() + 1..];
                let clause = after.split("`--").next().unwrap_or(after);
                let clause = &clause[..clause.floor_char_boundary(clause.len().min(80))];
                // A list default (`tcp`, `http-keepalive` and `http-fresh`) runs to the
                // bracket; any other ends at its comma.
                let list = matches!(&owner, Owner::Ours(o) if clap_default(&flag, o).flatten().is_some_and(|d| d.contains(',')));
                let ends: &[char] = if list { &[';', ')'] } else { &[',', ';', ')'] };
                let value = if let Some(d) = clause.find("default ") {
                    clause[d + "default ".len()..]
                        .split(ends)
                        .next()
                        .map(|v| v.replace(" and ", ","))
                } else {
                    clause.find(" by default").map(|d| {
                        clause[..d]
                            .trim_start_matches(['`', ',', ' ', ')', '('])
                            .to_string()
                    })
                };
                if let Some(value) = value {
                    stated.push((flag, value, owner));
                }
            }
        }
        // Tables with a default column: | flag | default | ... |
        let mut columns: Option<(usize, usize)> = None;
        for line in text.lines() {
            let cells: Vec<&str> = line
                .trim()
                .trim_matches('|')
                .split(" | ")
                .map(str::trim)
                .collect();
            if !line.starts_with('|') {
                columns = None;
                continue;
            }
            if let (Some(f), Some(d)) = (
                cells.iter().position(|c| *c == "flag"),
                cells.iter().position(|c| *c == "default"),
            ) {
                columns = Some((f, d));
                continue;
            }
            let Some((f, d)) = columns else { continue };
            let (Some(flags), Some(defaults)) = (cells.get(f), cells.get(d)) else {
                continue;
            };
            let flags: Vec<String> = words(flags)
                .into_iter()
                .filter(|w| w.starts_with("--"))
                .collect();
            let defaults: Vec<&str> = if flags.len() > 1 {
                defaults.split(", ").collect()
            } else {
                vec![defaults]
            };
            if flags.len() == defaults.len() {
                for (flag, value) in flags.into_iter().zip(defaults) {
                    stated.push((flag, value.to_string(), Owner::Ours(page_owners(&page))));
                }
            }
        }
        for (flag, value, owner) in stated {
            let Owner::Ours(owners) = owner else { continue };
            let Some(Some(want)) = clap_default(&flag, &owners) else {
                continue;
            };
            checked += 1;
            // "100 per transport" states 100; "1 s" is one value in two words.
            let words: Vec<&str> = value.split_whitespace().collect();
            let said = [1, 2]
                .iter()
                .map(|&n| default_key(&words[..n.min(words.len())].concat()))
                .chain([default_key(&value)]);
            if !said.into_iter().any(|k| k == want) {
                bad.push(format!(
                    "{}: {flag} default {value:?}, clap's {want:?}",
                    page.display()
                ));
            }
        }
    }
    assert!(checked > 10, "only {checked} defaults checked");
    assert!(
        bad.is_empty(),
        "defaults the docs state that are not clap's:\n{}",
        bad.join("\n")
    );
}

/// A file the docs show whole (`proto/rpcbench.proto`) is the file as it is.
#[test]
fn copies_of_files_are_the_files() {
    let seen = check_generated("file", |path| {
        let text =
            std::fs::read_to_string(root().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"));
        let lang = path.rsplit('.').next().unwrap_or("");
        format!("```{lang}\n{text}```\n")
    });
    assert!(seen.contains("proto/rpcbench.proto"));
}

/// Words for the project's authors, not its users: issue numbers, "this VM", gaps the
/// authors have yet to explain.
#[test]
fn pages_speak_to_users() {
    const AUTHORS: &[&str] = &[
        "issue #",
        "this 2-vCPU VM",
        "this VM",
        "this project's",
        "Known gap",
        "not yet explained",
    ];
    let mut bad = Vec::new();
    for page in common::doc_pages() {
        let text = std::fs::read_to_string(&page).unwrap();
        for (n, line) in text.lines().enumerate() {
            for words in AUTHORS.iter().filter(|w| line.contains(*w)) {
                bad.push(format!("{}:{}: {words}", page.display(), n + 1));
            }
        }
    }
    assert!(bad.is_empty(), "words for the authors:\n{}", bad.join("\n"));
}

/// A page that sends the reader elsewhere ("see Engines") does it with a link.
#[test]
fn cross_references_are_links() {
    let mut bad = Vec::new();
    for page in common::doc_pages() {
        let text = without_generated(&std::fs::read_to_string(&page).unwrap());
        // Prose only: a command line of a code block is one code span.
        let prose =
            |p: &&String| !(p.starts_with('`') && p.ends_with('`') && p.matches('`').count() == 2);
        for paragraph in paragraphs(&text).iter().filter(prose) {
            let plain: String = paragraph.split('`').step_by(2).collect::<Vec<_>>().join("");
            for (at, _) in plain.match_indices("see ") {
                let next = &plain[at + 4..];
                if next.starts_with(|c: char| c.is_ascii_uppercase()) {
                    bad.push(format!(
                        "{}: see {}",
                        page.display(),
                        &next[..next.len().min(30)]
                    ));
                }
            }
        }
    }
    assert!(
        bad.is_empty(),
        "cross-references without a link:\n{}",
        bad.join("\n")
    );
}

/// True when `file` (at `path`) has `name`: a Rust item defined there (`const NAME`,
/// `fn name`), not only used; any other file, the name anywhere in it.
fn defines(file: &str, name: &str, path: &str) -> bool {
    let identifier = name.chars().all(|c| c.is_alphanumeric() || c == '_');
    if !(identifier && path.ends_with(".rs")) {
        return file.contains(name);
    }
    [
        "const", "static", "fn", "struct", "enum", "type", "trait", "mod",
    ]
    .iter()
    .any(|kind| file.contains(&format!("{kind} {name}")))
}

/// Every path of the repository a page names (`crates/analysis/src/analysis/sweep.rs`) exists, and a name
/// said to be in it ("`KNEE_P99_GROWTH` in `crates/analysis/src/analysis/sweep.rs`") is there.
#[test]
fn paths_the_docs_name_exist() {
    let mut bad = Vec::new();
    let mut checked = 0;
    for page in common::doc_pages() {
        let text = std::fs::read_to_string(&page).unwrap();
        let spans: Vec<&str> = text.split('`').skip(1).step_by(2).collect();
        for (i, span) in spans.iter().enumerate() {
            let path = span.split([' ', ':', '#']).next().unwrap_or("");
            let ours = [
                "src/",
                "crates/",
                "tests/",
                "report/",
                "deploy/",
                "proto/",
                "examples/",
                "bin/",
                "docs/",
            ]
            .iter()
            .any(|d| path.starts_with(d));
            if !ours || path.contains('*') || path.contains('{') {
                continue;
            }
            checked += 1;
            let Ok(file) = std::fs::read_to_string(root().join(path)) else {
                if !root().join(path).is_dir() {
                    bad.push(format!("{}: {path}: no such file", page.display()));
                }
                continue;
            };
            // "`NAME` in `PATH`"
            let before = text.find(&format!("`{span}`")).map(|at| &text[..at]);
            if let (Some(before), Some(name)) = (before, i.checked_sub(1).map(|j| spans[j]))
                && before.trim_end().ends_with(" in")
                && before
                    .trim_end()
                    .trim_end_matches(" in")
                    .ends_with(&format!("`{name}`"))
                && !defines(&file, name, path)
            {
                bad.push(format!("{}: {name} is not in {path}", page.display()));
            }
        }
    }
    assert!(checked > 30, "only {checked} paths checked");
    assert!(bad.is_empty(), "paths the docs name:\n{}", bad.join("\n"));
}

/// What the preflight can meet, one example of each case (and of each TLS failure it
/// tells apart), on a listener where it arises.
fn preflight_cases() -> Vec<(
    rpcbench::preflight::Listener,
    bool,
    rpcbench::preflight::Seen,
)> {
    use rpcbench::preflight::{Listener, Reply, Seen};
    use rpcbench::transport::tls::TlsFailure;
    let mut cases = vec![
        (Listener::Tcp, false, Seen::Refused),
        (Listener::Tcp, false, Seen::NoAnswer),
        (Listener::Udp, false, Seen::NoDatagramReply),
        (
            Listener::Tcp,
            false,
            Seen::Unreachable("No route to host (os error 113)".into()),
        ),
        (Listener::Unix, false, Seen::NoSocket),
        (Listener::Tcp, false, Seen::Silent),
        (Listener::Http, false, Seen::Silent),
        (Listener::Tcp, false, Seen::Closed),
        (Listener::Http, false, Seen::Closed),
        (Listener::Http, true, Seen::Closed),
        (
            Listener::Http,
            false,
            Seen::NotEcho(Reply::Http { status: 404 }),
        ),
        (
            Listener::Tcp,
            false,
            Seen::NotEcho(Reply::Http { status: 400 }),
        ),
        (Listener::Http, false, Seen::NotEcho(Reply::HealthzBody)),
        (Listener::Http, false, Seen::NotEcho(Reply::NoStats)),
        (Listener::Http, false, Seen::NotEcho(Reply::Tls)),
        (
            Listener::Http,
            true,
            Seen::NotEcho(Reply::Http1Answer { status: 400 }),
        ),
        (Listener::Https, true, Seen::NotEcho(Reply::NoHttp2Alpn)),
        (
            Listener::Tcp,
            false,
            Seen::NotEcho(Reply::Bytes(b"SSH-2.0-OpenSSH_".to_vec())),
        ),
        (Listener::Http, false, Seen::OneHttpVersion { http2: true }),
        (Listener::Http, true, Seen::OneHttpVersion { http2: false }),
        (
            Listener::Tcp,
            false,
            Seen::OtherWire {
                version: "0.0.9".into(),
                wire: 0,
            },
        ),
    ];
    for failure in [
        TlsFailure::NotTlsServer,
        TlsFailure::TlsServer,
        TlsFailure::Untrusted,
        TlsFailure::Expired,
        TlsFailure::WrongName,
        TlsFailure::ClientCertRequired,
        TlsFailure::ClientCertRefused,
        TlsFailure::VersionMismatch,
        TlsFailure::Other,
    ] {
        cases.push((Listener::Tls, false, Seen::Tls(failure)));
    }
    cases
}

/// docs/troubleshooting.md says every line the preflight can stop a run with: what it
/// met and what to do, word for word (the target, ports and start command aside).
#[test]
fn troubleshooting_has_every_preflight_line() {
    use rpcbench::preflight::{Address, Finding, Probe, StartCommand, problem_lines};
    let page = std::fs::read_to_string(root().join("docs/troubleshooting.md")).unwrap();
    let page = page.split_whitespace().collect::<Vec<_>>().join(" ");
    let mut missing = Vec::new();
    for (listener, http2, seen) in preflight_cases() {
        let at = match listener {
            rpcbench::preflight::Listener::Unix => Address::Path("/run/echo.sock".into()),
            _ => Address::Socket(([10, 0, 0, 2], 7001).into()),
        };
        let finding = Finding {
            probe: Probe {
                listener,
                at: at.clone(),
                needed: true,
                http2,
                h3: false,
            },
            seen,
        };
        let start = StartCommand::new([10, 0, 0, 2].into(), &[(listener, at)]);
        for line in problem_lines("10.0.0.2", &[&finding], &start) {
            // `10.0.0.2 tcp port 7001: WHAT; FIX: rpcbench-echo ...`
            let said = line.split_once(": ").map_or(line.as_str(), |(_, s)| s);
            let said = said.rsplit_once(": rpcbench-echo").map_or(said, |(s, _)| s);
            // The versions as the page writes them, so that a release changes no page.
            let said = said
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ")
                .replace(env!("CARGO_PKG_VERSION"), "VERSION")
                .replace(&format!("({},", rpcbench::wire::WIRE_VERSION), "(WIRE,");
            if !page.contains(&said) {
                missing.push(said);
            }
        }
    }
    assert!(
        missing.is_empty(),
        "preflight lines docs/troubleshooting.md does not say:\n{}",
        missing.join("\n")
    );
}
