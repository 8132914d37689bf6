//! Aligned tables for a terminal, as wide as it is (oha and bottom lay out by the width;
//! ab prints the answer in a few lines): a heading, the summary, where the time goes, the
//! calls that failed, then the findings, the same sentences `rpcbench report` writes.
//!
//! No line is wider than [`RenderOptions::width`]: the tables show the columns that fit
//! (`--wide` all of them, and then only the tables may be wider), and text is wrapped.

use super::findings::pinning_advice;
use super::{
    Grid, NAME_COLUMNS, RenderOptions, concurrency_lines, engine_line, latency_note, phase_grid,
    problem_lines, summary_grid, units, wrap,
};
use crate::analysis::findings::findings;
use crate::report::Report;
use std::io::{self, Write};

/// Between the parts of the heading.
const SEPARATOR: &str = " · ";
/// Starts a finding.
const BULLET: &str = "- ";
/// Indents a finding's further lines by as much as its bullet.
const HANGING: &str = "  ";

/// Writes the heading, which latency a paced run shows, the tables that fit, the runs
/// whose workers sat idle, the failed calls, the findings and, for an unpinned run, how to
/// pin it.
pub fn write(report: &Report, options: &RenderOptions, out: &mut dyn Write) -> io::Result<()> {
    let width = options.width;
    let mut lines = pack(&heading(report), width);
    lines.push(String::new());
    if let Some(note) = latency_note(report, options) {
        lines.extend(wrap(&note, width, "", HANGING));
    }
    let summary = summary_grid(report, options);
    lines.extend(grid_lines(&summary));
    lines.extend(hidden_note(
        &summary,
        &summary_grid(report, &RenderOptions::WIDE),
        width,
    ));
    for line in engine_line(report)
        .into_iter()
        .chain(concurrency_lines(report))
        .chain(super::tcp_info_line(report))
        .chain(super::zero_rtt_line(report))
        .chain(super::retry_line(report))
    {
        lines.extend(wrap(&line, width, "", HANGING));
    }
    let phases = phase_grid(report, options);
    if phases.headers.len() > NAME_COLUMNS {
        lines.push(String::new());
        lines.extend(wrap(
            "where the time goes: the mean of each phase over the calls that had it (dns: the name lookup; first byte: request sent to first reply byte; server: time the server reports)",
            width,
            "",
            "",
        ));
        lines.extend(grid_lines(&phases));
        lines.extend(hidden_note(
            &phases,
            &phase_grid(report, &RenderOptions::WIDE),
            width,
        ));
    }
    let problems = problem_lines(report);
    if !problems.is_empty() {
        lines.push(String::new());
        lines.push("lost-call check:".to_string());
        for p in &problems {
            lines.extend(wrap(p, width, HANGING, "    "));
        }
    }
    if let Some(line) = incoherent_line(report) {
        lines.push(String::new());
        lines.extend(wrap(&line, width, "", HANGING));
    }
    lines.push(String::new());
    for f in findings(report, &[], None) {
        lines.extend(wrap(&super::findings::sentence(&f), width, BULLET, HANGING));
    }
    if let Some(advice) = pinning_advice(report) {
        lines.extend(wrap(&advice, width, "", HANGING));
    }
    for line in lines {
        writeln!(out, "{line}")?;
    }
    Ok(())
}

/// One line when the run's figures contradict each other beyond their noise (a failed
/// physics check, `coherent: false` in the JSON): the first broken rule, how many more,
/// and the likely causes.
pub fn incoherent_line(report: &Report) -> Option<String> {
    let failed: Vec<&crate::report::PhysicsCheck> =
        report.physics.iter().filter(|c| !c.pass).collect();
    let first = failed.first()?;
    let more = match failed.len() {
        1 => String::new(),
        n => format!(" (and {} more: see `physics` in the JSON)", n - 1),
    };
    Some(format!(
        "figures not coherent: {}{more}; {}",
        super::physics_line(first),
        super::LIKELY_CAUSES
    ))
}

/// What was run, in a few parts: the target, the calls, the settings that change what a
/// figure means (workers, payload, delay, pacing), and what a latency includes.
fn heading(report: &Report) -> Vec<String> {
    let c = &report.config;
    let mut parts = vec![
        format!("rpcbench {} → {}", report.rpcbench, report.target),
        match c.duration_s {
            Some(d) => format!("{d} s per transport and mode"),
            None => format!("{} calls per transport and mode", c.calls),
        },
        format!("{} worker(s)", c.concurrency),
    ];
    // An encoded run's payload is its message, named on its rows.
    if report.runs.iter().all(|r| r.encoding.is_some()) && !report.runs.is_empty() {
        parts.push("WSTest calls, decoded and checked field by field".to_string());
    } else {
        parts.push(format!("payload {} B", c.payload_bytes));
    }
    // Who answered, after the target: the two ends' versions and machines.
    parts.splice(1..1, ends(report));
    if c.delay_us > 0 {
        parts.push(format!(
            "server delay {}",
            units::duration(f64::from(c.delay_us))
        ));
    }
    if let Some(rate) = c.rate_per_s {
        parts.push(format!("paced at {rate} calls/s"));
    }
    if c.rounds > 1 {
        parts.push(format!("{} rounds merged", c.rounds));
    }
    if let Some(p) = &report.environment.placement {
        parts.push(super::placement(p));
    }
    if report.runs.iter().any(|r| r.transport.is_curl()) {
        parts.push(libcurl_part(&report.environment));
    }
    parts.push("latency: full round trip, connect included for fresh transports".to_string());
    parts
}

/// The libcurl that made the curl rows, as the heading names it: `curl rows: system
/// libcurl 7.88.1, OpenSSL/3.0.17` (read from the library linked, at run time).
fn libcurl_part(e: &crate::report::Environment) -> String {
    let tls = if e.libcurl_tls.is_empty() {
        "no TLS".to_string()
    } else {
        e.libcurl_tls.clone()
    };
    let whose = match e.libcurl_system {
        Some(true) => "system ",
        Some(false) => "bundled ",
        None => "",
    };
    format!("curl rows: {whose}libcurl {}, {tls}", e.libcurl)
}

/// The two ends of a run against a target, from the server's `/stats` and the client's
/// own facts: `server rpcbench-echo 0.1.0 on db1 (Linux 6.1.0, 8 CPUs)`, then the client
/// the same way. Nothing for the embedded server (this very process), nor when the server
/// could not be asked.
fn ends(report: &Report) -> Vec<String> {
    let Some(server) = report
        .server
        .as_ref()
        .filter(|_| report.target_kind() == crate::report::Target::Remote)
    else {
        return Vec::new();
    };
    let facts = |hostname: &str, kernel: &str, cpus: usize| match hostname {
        "" => String::new(),
        _ => format!(" on {hostname} ({kernel}, {cpus} CPUs)"),
    };
    let host = &server.settings.host;
    let env = &report.environment;
    vec![
        format!(
            "server rpcbench-echo {}{}",
            server.settings.version,
            facts(&host.hostname, &host.kernel, host.cpus)
        ),
        format!(
            "client{}",
            facts(&env.hostname, &env.kernel, env.cpus).replacen(" on", "", 1)
        ),
    ]
}

/// Joins parts with [`SEPARATOR`] into lines of at most `width`; a part too long for a
/// line of its own is wrapped.
fn pack(parts: &[String], width: usize) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    let mut line = String::new();
    for part in parts {
        let joined = if line.is_empty() {
            part.clone()
        } else {
            format!("{line}{SEPARATOR}{part}")
        };
        if joined.chars().count() <= width {
            line = joined;
            continue;
        }
        if !line.is_empty() {
            lines.push(std::mem::take(&mut line));
        }
        let mut wrapped = wrap(part, width, "", "");
        line = wrapped.pop().unwrap_or_default();
        lines.extend(wrapped);
    }
    if !line.is_empty() {
        lines.push(line);
    }
    lines
}

/// A grid as aligned text: the header, a rule, the rows; names left, numbers right, two
/// spaces between columns.
pub(crate) fn grid_lines(grid: &Grid) -> Vec<String> {
    let len = |s: &str| s.chars().count();
    let widths: Vec<usize> = (0..grid.headers.len())
        .map(|i| {
            grid.rows
                .iter()
                .map(|r| len(&r[i]))
                .chain(std::iter::once(len(&grid.headers[i])))
                .max()
                .unwrap_or(0)
        })
        .collect();
    let line = |cells: &[String]| {
        let padded: Vec<String> = cells
            .iter()
            .zip(&widths)
            .enumerate()
            .map(|(i, (c, &w))| {
                if i < NAME_COLUMNS {
                    format!("{c:<w$}")
                } else {
                    format!("{c:>w$}")
                }
            })
            .collect();
        padded.join("  ").trim_end().to_string()
    };
    let rule: Vec<String> = widths.iter().map(|&w| "─".repeat(w)).collect();
    let mut out = vec![line(&grid.headers), rule.join("  ")];
    out.extend(grid.rows.iter().map(|r| line(r)));
    out
}

/// One line naming the columns the width left out, when it left any out.
fn hidden_note(shown: &Grid, all: &Grid, width: usize) -> Vec<String> {
    let hidden: Vec<&str> = all
        .headers
        .iter()
        .filter(|h| !shown.headers.contains(h))
        .map(String::as_str)
        .collect();
    if hidden.is_empty() {
        return Vec::new();
    }
    wrap(
        &format!("(--wide adds {})", hidden.join(", ")),
        width,
        "",
        " ",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_heading_packs_into_the_width() {
        let parts: Vec<String> = ["rpcbench 0.1.0 → host", "1000 calls", "1 worker(s)"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert_eq!(
            pack(&parts, 100),
            ["rpcbench 0.1.0 → host · 1000 calls · 1 worker(s)"]
        );
        assert_eq!(
            pack(&parts, 36),
            ["rpcbench 0.1.0 → host · 1000 calls", "1 worker(s)"]
        );
        assert!(pack(&parts, 12).iter().all(|l| l.chars().count() <= 12));
    }

    #[test]
    fn grid_lines_align_names_left_and_numbers_right() {
        let grid = Grid {
            headers: vec!["transport".into(), "mode".into(), "mean µs".into()],
            rows: vec![vec!["tcp".into(), "ip".into(), "61.2".into()]],
        };
        assert_eq!(
            grid_lines(&grid),
            [
                "transport  mode  mean µs",
                "─────────  ────  ───────",
                "tcp        ip       61.2",
            ]
        );
    }
}
