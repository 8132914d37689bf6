//! What the three programs say about themselves beyond each flag's help, and the forms it
//! is written in: `--help`'s closing paragraphs (exit status and examples), the manual
//! pages and shell completions of `rpcbench manuals --out DIR` (hidden), and the flag
//! tables of `docs/`. All are generated from the same clap definitions as `--help`, so
//! that none can drift from it; `tests/docs.rs` checks that the pages' tables are these.
//!
//! `rpcbench manuals` writes `rpcbench.1` (listing every subcommand), one page per
//! subcommand (`rpcbench-sweep.1`, ...), `rpcbench-echo.1` and `rpcbench-link.1`, and for
//! each program its bash (`NAME.bash`), zsh (`_NAME`) and fish (`NAME.fish`) completions.

use anyhow::Context;
use clap_complete::Shell;
use std::fmt::Write as _;
use std::path::PathBuf;

/// Where to write the manual pages and completions.
#[derive(Debug, clap::Args)]
pub struct ManualsArgs {
    /// Directory to write into, created if missing.
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
}

/// What a program or subcommand says beyond its flags: its exit statuses and examples.
pub struct Extras {
    /// The command as typed: `rpcbench`, `rpcbench sweep`, `rpcbench-echo`.
    pub command: &'static str,
    /// Each exit status and when it is given.
    pub exits: &'static [(u8, &'static str)],
    /// Example command lines, each with what it does. `tests/docs.rs` parses every one.
    pub examples: &'static [(&'static str, &'static str)],
}

/// Bad usage, the same for every program: clap's own errors and the checks after parsing.
const USAGE: (u8, &str) = (
    2,
    "bad usage: one line on stderr naming the flag (a value out of its range, flags that do not go together)",
);

/// The exit statuses and examples of every program and subcommand.
pub const EXTRAS: &[Extras] = &[
    Extras {
        command: "rpcbench",
        exits: &[
            (
                0,
                "every call came back verified, or no more failed than --max-lost allows, and every address mode ran",
            ),
            (
                1,
                "more calls failed than --max-lost allows, an address mode was left out (its name did not resolve), the preflight found a port the run needs not ready (nothing is measured then), or the run could not start",
            ),
            USAGE,
        ],
        examples: &[
            (
                "rpcbench",
                "start an echo server in-process on loopback and compare every transport against it",
            ),
            (
                "rpcbench --target 10.0.0.2 -n 10000 --rounds 3",
                "every transport against rpcbench-echo on another host, 10,000 calls each",
            ),
            (
                "rpcbench --transports tcp,http-keepalive,h2 -c 64 --duration 10s",
                "three transports at 64 connections, 10 seconds each",
            ),
            (
                "rpcbench --target 10.0.0.2 --security plain,tls13,tls13-resume --ca ca.pem",
                "what a TLS 1.3 handshake, and a resumed one, add to each call",
            ),
            (
                "rpcbench --format json --out run.json",
                "the figures as JSON on stdout and in a file, for rpcbench report and compare",
            ),
        ],
    },
    Extras {
        command: "rpcbench sweep",
        exits: &[
            (
                0,
                "every step's calls came back verified; with --slo, every transport has a capacity",
            ),
            (
                1,
                "a step had failed calls; with --slo, a transport met the objective at no step; or the sweep could not start",
            ),
            USAGE,
        ],
        examples: &[
            (
                "rpcbench sweep --transports h2,grpc --rates 1k,5k,10k,20k --slo p99=2ms",
                "the highest of these rates each transport serves with p99 within 2 ms",
            ),
            (
                "rpcbench sweep --transports tcp,h2-mux -c 1,4,16,64",
                "latency and throughput at 1, 4, 16 and 64 workers",
            ),
            (
                "rpcbench sweep --transports http-keepalive --payloads 64,1k,16k,256k",
                "how latency grows with the request payload",
            ),
            (
                "rpcbench sweep --transports tcp --slo p99=1ms",
                "search for the rate at which p99 crosses 1 ms",
            ),
        ],
    },
    Extras {
        command: "rpcbench report",
        exits: &[
            (
                0,
                "the report was written and no truth check that ran failed (peer ratios do not count)",
            ),
            (1, "a truth check failed, or an input could not be read"),
            USAGE,
        ],
        examples: &[(
            "rpcbench report run.json delayed.json sweep.json --out site",
            "README.md, index.html and SVG charts in site/, with the truth checks the runs allow",
        )],
    },
    Extras {
        command: "rpcbench compare",
        exits: &[
            (0, "no row grew past --fail-above (or no limit given)"),
            (
                1,
                "a row's p50 or p99 grew past --fail-above, or an input could not be read",
            ),
            USAGE,
        ],
        examples: &[(
            "rpcbench compare base.json new.json --fail-above 1.2",
            "p50 and p99 per transport and mode; status 1 if one grew by more than 20%",
        )],
    },
    Extras {
        command: "rpcbench dns",
        exits: &[
            (0, "a diagnosis was made, whatever it found"),
            (
                1,
                "no diagnosis could be made: an unreadable resolv.conf, a bad name, no nameserver, every query refused",
            ),
            USAGE,
        ],
        examples: &[
            (
                "rpcbench dns db.internal",
                "the queries a lookup of db.internal really sends here, and what each costs",
            ),
            (
                "rpcbench dns api -n 100 --format json --out dns.json",
                "100 lookups of a short name through the search list, as JSON",
            ),
        ],
    },
    Extras {
        command: "rpcbench agent",
        exits: &[
            (0, "stopped by SIGINT or SIGTERM"),
            (
                1,
                "could not start (the metrics address could not be bound)",
            ),
            USAGE,
        ],
        examples: &[(
            "rpcbench agent --peers peers.yaml --listen 0.0.0.0:9464",
            "probe every peer of peers.yaml and serve the results on GET /metrics",
        )],
    },
    Extras {
        command: "rpcbench-echo",
        exits: &[
            (
                0,
                "stopped by SIGINT or SIGTERM after the requests in flight finished",
            ),
            (1, "could not start (a listener could not bind, say)"),
            USAGE,
        ],
        examples: &[
            (
                "rpcbench-echo",
                "raw TCP on 127.0.0.1:7001 and HTTP, HTTP/2 and gRPC on 127.0.0.1:7080",
            ),
            (
                "rpcbench-echo --tcp 0.0.0.0:7001 --http 0.0.0.0:7080 --udp 0.0.0.0:7002 --cpus 0",
                "for clients on other hosts, every server thread on CPU 0",
            ),
            (
                "rpcbench-echo --tls 0.0.0.0:7443 --https 0.0.0.0:8443 --dns-name echo.example.internal",
                "the TLS listeners too, with a generated CA whose path is printed",
            ),
        ],
    },
    Extras {
        command: "rpcbench-link",
        exits: &[
            (
                0,
                "stopped by SIGINT or SIGTERM: counts printed, devices deleted",
            ),
            (
                1,
                "could not be set up (no TUN support, a namespace missing); nothing is left behind",
            ),
            USAGE,
        ],
        examples: &[(
            "rpcbench-link --a rb-srv=10.78.0.1/24 --b rb-cli=10.78.0.2/24 --delay 10ms --loss 0.5%",
            "join two namespaces with 20 ms of round trip and 0.5% loss each way",
        )],
    },
];

/// The extras of `command` (`rpcbench sweep`). Panics for a command without a row: every
/// command has one, and `tests/docs.rs` checks it.
pub fn extras(command: &str) -> &'static Extras {
    EXTRAS
        .iter()
        .find(|e| e.command == command)
        .unwrap_or_else(|| panic!("no exit statuses for {command}"))
}

/// What `--help` says after the flags of `command`: its exit statuses and examples.
pub fn after_help(command: &str) -> String {
    let extras = extras(command);
    let mut text = String::from("Exit status:\n");
    for (status, meaning) in extras.exits {
        let _ = writeln!(text, "  {status}  {meaning}");
    }
    text.push_str("\nExamples:\n");
    for (line, what) in extras.examples {
        let _ = writeln!(text, "  {line}\n      {what}");
    }
    text.truncate(text.trim_end().len());
    text
}

/// Writes every page and completion file of `programs` (their clap commands) into
/// `args.out`; returns the files written.
pub fn write(args: &ManualsArgs, programs: &[clap::Command]) -> anyhow::Result<Vec<PathBuf>> {
    let out = &args.out;
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    let mut written = Vec::new();
    for command in programs {
        let name = command.get_name().to_string();
        // Built, so that each subcommand's page is named after its full name
        // (`rpcbench-sweep.1`) and shows its full usage; the hidden ones are left out.
        let mut built = command.clone().disable_help_subcommand(true);
        built.build();
        let visible = built
            .get_subcommands()
            .filter(|s| !s.is_hide_set())
            .cloned();
        for page in std::iter::once(built.clone()).chain(visible) {
            let man = clap_mangen::Man::new(page.clone());
            let path = out.join(man.get_filename());
            std::fs::write(&path, manual_page(&man, &page)?)
                .with_context(|| format!("writing {}", path.display()))?;
            written.push(path);
        }
        let mut shown = without_hidden(command);
        for shell in [Shell::Bash, Shell::Zsh, Shell::Fish] {
            let path = clap_complete::generate_to(shell, &mut shown, &name, out)
                .with_context(|| format!("writing the {shell} completions of {name}"))?;
            written.push(path);
        }
    }
    Ok(written)
}

/// One manual page: clap_mangen's sections, with a SYNOPSIS that names each flag's value,
/// and EXIT STATUS and EXAMPLES from [`EXTRAS`] (in place of its EXTRA section, which
/// would repeat them as `--help` shows them).
fn manual_page(man: &clap_mangen::Man, page: &clap::Command) -> anyhow::Result<Vec<u8>> {
    let mut roff = Vec::new();
    man.render_title(&mut roff)?;
    man.render_name_section(&mut roff)?;
    roff.extend_from_slice(synopsis(page).as_bytes());
    man.render_description_section(&mut roff)?;
    if page.get_arguments().any(|a| !a.is_hide_set()) {
        man.render_options_section(&mut roff)?;
    }
    if page.get_subcommands().any(|s| !s.is_hide_set()) {
        man.render_subcommands_section(&mut roff)?;
    }
    let extras = extras(&command_path(page));
    let mut sections = String::from(".SH \"EXIT STATUS\"\n");
    for (status, meaning) in extras.exits {
        let _ = write!(
            sections,
            ".TP\n\\fB{status}\\fR\n{}\n",
            roff_escape(meaning)
        );
    }
    sections.push_str(".SH EXAMPLES\n");
    for (line, what) in extras.examples {
        let _ = write!(
            sections,
            ".TP\n\\fB{}\\fR\n{}\n",
            roff_escape(line),
            roff_escape(what)
        );
    }
    roff.extend_from_slice(sections.as_bytes());
    if page.get_version().is_some() {
        man.render_version_section(&mut roff)?;
    }
    // Each section clap_mangen renders starts with the same two-line preamble (defining
    // the apostrophe string); one at the top is enough.
    let text = String::from_utf8(roff).context("a manual page is UTF-8")?;
    let preamble_end = text.find(".TH ").unwrap_or(0);
    let (preamble, body) = text.split_at(preamble_end);
    Ok(format!("{preamble}{}", body.replace(preamble, "")).into_bytes())
}

/// Text made safe for a roff text line: backslashes and dashes escaped, a leading dot or
/// apostrophe (a control line) guarded.
fn roff_escape(text: &str) -> String {
    let escaped = text.replace('\\', "\\e").replace('-', "\\-");
    if escaped.starts_with('.') || escaped.starts_with('\'') {
        format!("\\&{escaped}")
    } else {
        escaped
    }
}

/// The command's name as typed: `rpcbench sweep` for the subcommand `rpcbench-sweep`.
fn command_path(page: &clap::Command) -> String {
    page.get_display_name()
        .or_else(|| page.get_bin_name())
        .unwrap_or_else(|| page.get_name())
        .replacen("rpcbench-", "rpcbench ", usize::from(is_subcommand(page)))
}

/// True for a subcommand's page (`rpcbench-sweep`), false for a program's.
fn is_subcommand(page: &clap::Command) -> bool {
    page.get_bin_name().is_some_and(|b| b.contains(' '))
}

/// One item of a synopsis: a flag with its value's name, or a positional argument.
struct Item {
    /// `-n`, `--calls`; empty for a positional argument.
    names: Vec<String>,
    /// What its value is called (`N`), if it takes one.
    value: Option<String>,
    /// Shown in brackets.
    optional: bool,
    /// May be given more than once (`-vv`, several results).
    repeats: bool,
}

/// The synopsis of a command: every visible flag with its value's name
/// (`[--target HOST]`), the positional arguments, and `[COMMAND]` when it has
/// subcommands.
fn synopsis_items(page: &clap::Command) -> Vec<Item> {
    let mut items: Vec<Item> = page
        .get_arguments()
        .filter(|a| !a.is_hide_set() && !a.is_positional())
        .filter(|a| !matches!(a.get_id().as_str(), "help" | "version"))
        .map(|arg| Item {
            names: arg
                .get_short()
                .map(|s| format!("-{s}"))
                .into_iter()
                .chain(arg.get_long().map(|l| format!("--{l}")))
                .collect(),
            value: value_name(arg),
            optional: !arg.is_required_set(),
            repeats: matches!(arg.get_action(), clap::ArgAction::Count),
        })
        .collect();
    items.extend(
        page.get_positionals()
            .filter(|a| !a.is_hide_set())
            .map(|arg| Item {
                names: Vec::new(),
                value: Some(value_name(arg).unwrap_or_else(|| arg.get_id().to_string())),
                optional: !arg.is_required_set(),
                repeats: arg.get_num_args().is_some_and(|n| n.max_values() > 1),
            }),
    );
    if page.get_subcommands().any(|s| !s.is_hide_set()) {
        items.push(Item {
            names: Vec::new(),
            value: Some("COMMAND".into()),
            optional: true,
            repeats: false,
        });
    }
    items
}

/// An item as text, each name and the value through `name` and `value` (roff fonts, or
/// nothing for plain text).
fn item_text(item: &Item, name: impl Fn(&str) -> String, value: impl Fn(&str) -> String) -> String {
    let names: Vec<String> = item.names.iter().map(|n| name(n)).collect();
    let mut text = names.join("|");
    if let Some(v) = &item.value {
        if !text.is_empty() {
            text.push(' ');
        }
        text.push_str(&value(v));
    }
    let text = if item.optional {
        format!("[{text}]")
    } else {
        text
    };
    if item.repeats { text + "..." } else { text }
}

/// The SYNOPSIS section of a manual page.
fn synopsis(page: &clap::Command) -> String {
    let name = page.get_bin_name().unwrap_or_else(|| page.get_name());
    let mut line = format!("\\fB{}\\fR", roff_escape(name));
    for item in synopsis_items(page) {
        line.push(' ');
        line.push_str(&item_text(
            &item,
            |n| format!("\\fB{}\\fR", roff_escape(n)),
            |v| format!("\\fI{}\\fR", roff_escape(v)),
        ));
    }
    format!(".SH SYNOPSIS\n{line}\n")
}

/// The synopsis as plain text, wrapped at `width` columns under the command's name.
pub fn synopsis_text(page: &clap::Command, path: &str, width: usize) -> String {
    let indent = " ".repeat(path.len() + 1);
    let mut out = path.to_string();
    let mut column = out.len();
    for item in synopsis_items(page) {
        let text = item_text(&item, str::to_string, str::to_string);
        if column + 1 + text.len() > width && column > indent.len() {
            out.push('\n');
            out.push_str(&indent);
            column = indent.len();
        } else {
            out.push(' ');
            column += 1;
        }
        out.push_str(&text);
        column += text.len();
    }
    out
}

/// What a flag's value is called (`HOST`, `N`, `LIST`), or `None` for a flag that takes
/// none.
pub fn value_name(arg: &clap::Arg) -> Option<String> {
    if !arg.get_action().takes_values() {
        return None;
    }
    Some(match arg.get_value_names() {
        Some(names) => names
            .iter()
            .map(|n| n.to_string())
            .collect::<Vec<_>>()
            .join(" "),
        None => arg.get_id().as_str().to_uppercase(),
    })
}

/// `command` as completions should see it: without its hidden subcommands (clap_complete
/// offers every subcommand, hidden or not), at every depth.
fn without_hidden(command: &clap::Command) -> clap::Command {
    let mut shown = clap::Command::new(command.get_name().to_string())
        .args(command.get_arguments().cloned())
        .groups(command.get_groups().cloned())
        .disable_help_subcommand(true);
    if let Some(version) = command.get_version() {
        shown = shown.version(version.to_string());
    }
    for sub in command.get_subcommands().filter(|s| !s.is_hide_set()) {
        shown = shown.subcommand(without_hidden(sub));
    }
    shown
}

/// The markdown reference of `command`'s flags, as `docs/` shows them: its usage, then a
/// table of every visible flag with its value's name, its default and its help.
/// `path` is the command as typed (`rpcbench sweep`).
pub fn markdown_flags(command: &clap::Command, path: &str) -> String {
    let mut built = command.clone();
    built.build();
    let mut out = String::new();
    let _ = writeln!(out, "```text\n{}\n```\n", synopsis_text(&built, path, 90));
    out.push_str("| flag | default | meaning |\n| --- | --- | --- |\n");
    for arg in built.get_arguments().filter(|a| !a.is_hide_set()) {
        if matches!(arg.get_id().as_str(), "help" | "version") {
            continue;
        }
        let mut names = Vec::new();
        if let Some(short) = arg.get_short() {
            names.push(format!("-{short}"));
        }
        if let Some(long) = arg.get_long() {
            names.push(format!("--{long}"));
        }
        let value = value_name(arg).map(|v| format!(" {v}")).unwrap_or_default();
        let flag = if arg.is_positional() {
            format!("`{}`", value.trim())
        } else {
            format!("`{}{value}`", names.join("`, `"))
        };
        let default = default_text(arg);
        let mut help = arg
            .get_long_help()
            .or_else(|| arg.get_help())
            .map(|h| h.to_string())
            .unwrap_or_default()
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        let values: Vec<String> = arg
            .get_possible_values()
            .iter()
            .filter(|v| !v.is_hide_set())
            .map(|v| format!("`{}`", v.get_name()))
            .collect();
        if !values.is_empty() {
            if !help.ends_with(['.', ')', ':']) {
                help.push('.');
            }
            let _ = write!(help, " One of: {}.", values.join(", "));
        }
        let _ = writeln!(out, "| {flag} | {default} | {} |", help.replace('|', "\\|"));
    }
    out
}

/// A flag's default as the docs state it: clap's default values, `off` for a switch,
/// empty when it has none.
pub fn default_text(arg: &clap::Arg) -> String {
    if !arg.get_action().takes_values() {
        return match arg.get_action() {
            clap::ArgAction::SetTrue => "off".into(),
            _ => String::new(),
        };
    }
    let defaults: Vec<String> = arg
        .get_default_values()
        .iter()
        .map(|v| v.to_string_lossy().into_owned())
        .collect();
    if defaults.is_empty() {
        String::new()
    } else {
        format!("`{}`", defaults.join(","))
    }
}
