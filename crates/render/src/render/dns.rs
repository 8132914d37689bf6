//! `rpcbench dns` as text: the queries one lookup sends, in order, with what each got and
//! cost; then the whole lookup, getaddrinfo beside it, and the findings.

use super::markdown::write_table;
use super::table::grid_lines;
use super::{Cell, Grid, text_column, units, wrap};
use crate::dnsdiag::{DnsDiagnosis, GetaddrinfoSkipped};
use std::io::{self, Write};

/// The query table: one row per query of the sequence.
pub fn grid(d: &DnsDiagnosis) -> Grid {
    let q = &d.queries;
    let text = |f: &dyn Fn(&crate::dnsdiag::QueryRecord) -> String| -> Vec<Cell> {
        q.iter().map(|r| Cell::Text(f(r))).collect()
    };
    let columns = vec![
        text_column("#", text(&|r| r.order.to_string())),
        text_column("candidate", text(&|r| r.candidate.clone())),
        text_column("type", text(&|r| r.qtype.to_string())),
        text_column("server", text(&|r| r.server.clone())),
        text_column("via", text(&|r| r.via.to_string())),
        text_column("try", text(&|r| r.attempt.to_string())),
        text_column(
            "answers",
            text(&|r| {
                r.answers
                    .iter()
                    .map(|(code, n)| format!("{code} ×{n}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            }),
        ),
        text_column(
            "mean",
            q.iter()
                .map(|r| Cell::Duration(r.time_us.map(|t| t.mean)))
                .collect(),
        ),
        text_column(
            "p99",
            q.iter()
                .map(|r| Cell::Duration(r.time_us.map(|t| t.p99)))
                .collect(),
        ),
        text_column(
            "wasted",
            text(&|r| if r.wasted { "yes" } else { "" }.to_string()),
        ),
    ];
    let (headers, cells): (Vec<String>, Vec<Vec<String>>) = columns.into_iter().unzip();
    let rows = (0..q.len())
        .map(|i| cells.iter().map(|c| c[i].clone()).collect())
        .collect();
    Grid { headers, rows }
}

/// The lines above the table: the name, the configuration that decides the sequence.
pub fn heading(d: &DnsDiagnosis) -> String {
    let c = &d.config;
    let servers: Vec<String> = c.nameservers.iter().map(ToString::to_string).collect();
    format!(
        "rpcbench {} dns {} · {} lookups · {}: nameservers {} · search {} · ndots:{} timeout:{} attempts:{}{}{} · hosts: {}",
        d.rpcbench,
        d.name,
        d.lookups,
        d.resolv_conf,
        if servers.is_empty() {
            "none".into()
        } else {
            servers.join(", ")
        },
        if c.search.is_empty() {
            "none".into()
        } else {
            c.search.join(" ")
        },
        c.ndots,
        c.timeout_s,
        c.attempts,
        if c.rotate { " rotate" } else { "" },
        if c.single_request {
            " single-request"
        } else {
            ""
        },
        d.hosts_sources.join(" "),
    )
}

/// The lines under the table: the candidates, the lookup's cost, getaddrinfo.
pub fn summary(d: &DnsDiagnosis) -> Vec<String> {
    let us = units::duration;
    let mut lines = vec![format!(
        "candidates, in order: {}{}",
        d.candidates.join(", "),
        d.answered_by
            .as_ref()
            .map_or(" (none answered)".to_string(), |a| format!(
                " (answered by {a})"
            ))
    )];
    if let Some(l) = d.lookup_us {
        lines.push(format!(
            "one lookup: {} queries, mean {} (p99 {}), of it wasted {} ({:.0}%)",
            units::significant(d.queries_per_lookup, 3),
            us(l.mean),
            us(l.p99),
            us(d.wasted_us_mean),
            if l.mean > 0.0 {
                d.wasted_us_mean / l.mean * 100.0
            } else {
                0.0
            }
        ));
    }
    match (&d.getaddrinfo_us, &d.getaddrinfo_skipped) {
        (Some(g), _) => lines.push(format!(
            "getaddrinfo: mean {} (p99 {}){}",
            us(g.mean),
            us(g.p99),
            if d.in_between.is_some() {
                ", which disagrees with the queries"
            } else {
                ", which agrees with the queries (within 20%)"
            }
        )),
        (None, Some(why)) => lines.push(format!("getaddrinfo not timed: {}", skipped(*why))),
        (None, None) => {}
    }
    for ignored in &d.config.ignored {
        lines.push(format!("ignored in {}: {ignored}", d.resolv_conf));
    }
    lines
}

/// Writes the diagnosis for a terminal `width` wide.
pub fn write(d: &DnsDiagnosis, width: usize, out: &mut dyn Write) -> io::Result<()> {
    let mut lines = wrap(&heading(d), width, "", "  ");
    if !d.queries.is_empty() {
        lines.push(String::new());
        lines.extend(grid_lines(&grid(d)));
    }
    lines.push(String::new());
    for l in summary(d) {
        lines.extend(wrap(&l, width, "", "  "));
    }
    if !d.findings.is_empty() {
        lines.push(String::new());
        for f in &d.findings {
            lines.extend(wrap(&super::findings::dns_sentence(f), width, "- ", "  "));
        }
    }
    for l in lines {
        writeln!(out, "{l}")?;
    }
    Ok(())
}

/// Writes the diagnosis as markdown: the heading, the query table, the summary and
/// findings as lists.
pub fn write_markdown(d: &DnsDiagnosis, out: &mut dyn Write) -> io::Result<()> {
    writeln!(out, "{}\n", heading(d))?;
    if !d.queries.is_empty() {
        write_table(out, &grid(d))?;
        writeln!(out)?;
    }
    let findings = d.findings.iter().map(super::findings::dns_sentence);
    for l in summary(d).into_iter().chain(findings) {
        writeln!(out, "- {l}")?;
    }
    Ok(())
}

/// Why getaddrinfo was not timed, in words.
fn skipped(why: GetaddrinfoSkipped) -> String {
    match why {
        GetaddrinfoSkipped::NotAsked => "not asked for (--no-getaddrinfo)".into(),
        GetaddrinfoSkipped::OtherPort { port } => {
            format!("the nameservers are asked on port {port}, and getaddrinfo asks on 53")
        }
    }
}
