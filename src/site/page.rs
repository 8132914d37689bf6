//! Writes a [`Site`] as README.md (markdown, charts as linked SVG files) and as one
//! self-contained index.html (charts inline, no scripts, nothing fetched).

use super::svg::esc;
use super::{PEER_RATIO_LIMIT, Site};
use crate::render::{self, Format, Grid, RenderOptions, units};
use crate::report::Report;
use std::fmt::Write;

/// The report as markdown.
pub fn markdown(site: &Site) -> String {
    let b = &site.baseline;
    let mut out = String::new();
    let _ = writeln!(out, "# rpcbench comparison report\n");
    let _ = writeln!(
        out,
        "Target {} · {} · started {} · rpcbench {}\n",
        b.target,
        placement(b),
        b.started,
        b.rpcbench
    );
    let _ = writeln!(out, "## Findings\n");
    for f in &site.findings {
        let _ = writeln!(out, "- {f}");
    }
    let _ = writeln!(out, "\n## Charts\n");
    for (name, _) in &site.charts {
        let _ = writeln!(out, "![{name}]({name})\n");
    }
    let _ = writeln!(
        out,
        "## Tables\n\nLatency is the full round trip of ok calls, connect included for fresh transports; `{}`.\n",
        site.baseline_path.display()
    );
    out.push_str(&tables(b));
    for (path, r) in &site.others {
        let _ = writeln!(out, "\n### {} ({})\n", describe(r), path.display());
        out.push_str(&tables(r));
    }
    let _ = writeln!(out, "\n## Seed 004, then and now\n");
    let _ = writeln!(
        out,
        "A PHP team in 2007 timed 1000 calls each way (`../shared/seeds/004_*.txt`). The same five cases today:\n"
    );
    let _ = writeln!(
        out,
        "| case | 2007 mean ms | rpcbench transport | mode | today mean ms |"
    );
    let _ = writeln!(out, "| --- | ---: | --- | --- | ---: |");
    for s in &site.seed {
        let _ = writeln!(
            out,
            "| {} | {:.2} | {} | {} | {} |",
            s.case,
            s.seed_ms,
            s.transport,
            seed_mode(s),
            seed_today(s)
        );
    }
    let _ = writeln!(out, "\n## Truth checks\n");
    let _ = writeln!(
        out,
        "Expected against measured: an injected delay must come back within {}. The report's exit status is 1 when one fails.\n",
        check_margin()
    );
    if !site.checks.is_empty() {
        let _ = writeln!(out, "| check | expected | measured | pass |");
        let _ = writeln!(out, "| --- | --- | --- | --- |");
        for c in &site.checks {
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} |",
                c.what,
                c.expected,
                c.measured,
                if c.pass { "yes" } else { "**no**" }
            );
        }
    }
    if !site.not_run.is_empty() {
        let _ = writeln!(out);
        for n in &site.not_run {
            let _ = writeln!(out, "- not run: {}: {}", n.check, n.reason);
        }
    }
    let _ = writeln!(out, "\n## Peers\n");
    match &site.peers {
        None => {
            let _ = writeln!(out, "{NO_PEERS}");
        }
        Some(p) => {
            let _ = writeln!(out, "{}\n", peers_intro(&p.placement));
            let _ = writeln!(
                out,
                "| transport | peer | rpcbench µs | peer µs | ratio | rounds | within {PEER_RATIO_LIMIT}× |"
            );
            let _ = writeln!(out, "| --- | --- | ---: | ---: | ---: | ---: | --- |");
            for row in peer_rows(site) {
                let _ = writeln!(out, "| {} |", row.join(" | "));
            }
        }
    }
    let _ = writeln!(out, "\n## Environment\n");
    out.push_str(&environment(b));
    let _ = writeln!(out, "\n## Commands\n\n```sh");
    for r in std::iter::once(b).chain(site.others.iter().map(|(_, r)| r)) {
        let _ = writeln!(out, "{}", r.command.join(" "));
    }
    if let Some(p) = &site.peers {
        for e in &p.pairs {
            let _ = writeln!(out, "{}", e.command);
        }
    }
    let _ = writeln!(out, "```");
    out
}

/// How the margin of a truth check is made, as the report states it.
fn check_margin() -> String {
    format!(
        "{:.0}% of the delay plus the noise of the reference run (its p99 − p50 for the same transport and mode)",
        super::DELAY_SHARE * 100.0
    )
}

/// What the peers section says without `--peers`.
const NO_PEERS: &str =
    "Not measured: no `--peers` file among the inputs (`report/peers.sh --json FILE` writes one).";

/// The opening of the peers section.
fn peers_intro(placement: &str) -> String {
    format!(
        "rpcbench beside established tools measuring the same thing, on the same placement ({placement}). Each figure is the median of its round means; a pair is within the limit when rpcbench's median is at most {PEER_RATIO_LIMIT}× the peer's. These are benchmarks, not checks: host noise moves them, and they do not set the exit status."
    )
}

/// The peers table's rows, as text cells.
fn peer_rows(site: &Site) -> Vec<Vec<String>> {
    let us = |v: Option<f64>| v.map_or("-".into(), |v| units::Unit::Micros.format(v));
    site.peers
        .iter()
        .flat_map(|p| &p.pairs)
        .map(|e| {
            vec![
                e.transport.to_string(),
                e.peer.clone(),
                us(e.rpcbench_us()),
                us(e.peer_us()),
                e.ratio()
                    .map_or("-".into(), |r| format!("{}×", units::ratio(r))),
                e.rpcbench_round_means_us.len().to_string(),
                match e.within_limit() {
                    Some(true) => "yes".into(),
                    Some(false) => "no".into(),
                    None => "-".into(),
                },
            ]
        })
        .collect()
}

/// The mode of a seed row's figure, `-` when none was measured.
fn seed_mode(s: &super::SeedRow) -> String {
    s.mode.map_or("-".into(), |m| m.to_string())
}

/// Today's figure of a seed row, in ms like the seed's.
fn seed_today(s: &super::SeedRow) -> String {
    s.today_ms
        .map_or("-".into(), |m| units::Unit::Millis.format(m * 1e3))
}

/// The client's markdown tables for one report.
fn tables(r: &Report) -> String {
    let mut buf = Vec::new();
    // Writing into a Vec cannot fail.
    let _ = render::render(r, Format::Markdown, &RenderOptions::WIDE, &mut buf);
    String::from_utf8_lossy(&buf).into_owned()
}

/// What a non-baseline input measured differently.
fn describe(r: &Report) -> String {
    let dns = r
        .server
        .as_ref()
        .and_then(|s| s.settings.dns.as_ref())
        .map_or(0, |d| d.delay_us);
    match (r.config.delay_us, dns) {
        (0, 0) => match r.config.rate_per_s {
            Some(rate) => format!(
                "no delay, calls started {:.0} µs apart (--rate {rate}): the reference of the server-delay check",
                1e6 / rate
            ),
            None => "another run".to_string(),
        },
        (d, 0) => format!("server delay {d} µs per call"),
        (0, d) => format!("DNS answers {d} µs late"),
        (d, n) => format!("server delay {d} µs, DNS {n} µs late"),
    }
}

/// Where client and server ran, as the report should state it.
fn placement(r: &Report) -> String {
    let server = r
        .server
        .as_ref()
        .map(|s| s.settings.cpu_affinity.clone())
        .unwrap_or_default();
    let client = &r.environment.cpu_affinity;
    let how = if server.is_empty() {
        "server placement unknown".to_string()
    } else if &server == client && !client.contains(['-', ',']) {
        format!("client and server pinned to the same core (CPU {client})")
    } else if !client.contains(['-', ',']) && !server.contains(['-', ',']) {
        format!("client on CPU {client}, server on CPU {server} (different cores)")
    } else {
        format!("not pinned (client CPUs {client}, server CPUs {server})")
    };
    format!("placement: {how}")
}

/// An address family as the command line spells it (`4`, `6`, `any`).
fn family(f: crate::resolve::Family) -> String {
    use clap::ValueEnum;
    f.to_possible_value()
        .map_or_else(String::new, |v| v.get_name().to_string())
}

/// The client, the server, the DNS responder and the settings, as a list.
fn environment(r: &Report) -> String {
    let e = &r.environment;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "- client host: {} ({}), {} CPUs, CPUs allowed {}",
        e.hostname, e.kernel, e.cpus, e.cpu_affinity
    );
    let _ = writeln!(out, "- libcurl {}", e.libcurl);
    if let Some(cache) = &e.resolver_cache {
        let _ = writeln!(
            out,
            "- a caching resolver sits in front of getaddrinfo: {cache}"
        );
    }
    if let Some(s) = &r.server {
        let _ = writeln!(
            out,
            "- server: rpcbench-echo {}, CPUs allowed {}, max frame {} B",
            s.settings.version, s.settings.cpu_affinity, s.settings.max_frame
        );
        if let Some(d) = &s.settings.dns {
            let _ = writeln!(
                out,
                "- DNS responder: {} → {}, TTL {} s, answers {} µs late, drops {:.0}%; answered {} queries",
                d.name,
                d.answer,
                d.ttl_s,
                d.delay_us,
                d.drop * 100.0,
                s.dns_answered
            );
        }
    }
    let c = &r.config;
    let _ = writeln!(
        out,
        "- {} calls per transport and mode after {} warm-up calls, {} worker(s), payload {} B, {} round(s), family {}, resolver {}",
        c.calls,
        c.warmup,
        c.concurrency,
        c.payload_bytes,
        c.rounds,
        family(c.family),
        c.resolver
    );
    out
}

/// The report as one self-contained HTML page.
pub fn html(site: &Site) -> String {
    let b = &site.baseline;
    let mut out = String::new();
    out.push_str(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>rpcbench comparison report</title>\n<style>body{font-family:sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222}table{border-collapse:collapse;margin:1em 0;font-size:13px}th,td{border:1px solid #ccc;padding:3px 6px;text-align:right}th:first-child,td:first-child,th:nth-child(2),td:nth-child(2){text-align:left}svg{max-width:100%;height:auto;display:block;margin:1em 0}.fail{color:#b00;font-weight:bold}pre{background:#f6f6f6;padding:1em;overflow-x:auto}</style></head><body>\n",
    );
    let _ = writeln!(out, "<h1>rpcbench comparison report</h1>");
    let _ = writeln!(
        out,
        "<p>Target {} · {} · started {} · rpcbench {}</p>",
        esc(&b.target),
        esc(&placement(b)),
        esc(&b.started),
        esc(&b.rpcbench)
    );
    let _ = writeln!(out, "<h2>Findings</h2><ul>");
    for f in &site.findings {
        let _ = writeln!(out, "<li>{}</li>", esc(f));
    }
    let _ = writeln!(out, "</ul><h2>Charts</h2>");
    for (_, svg) in &site.charts {
        out.push_str(svg);
        out.push('\n');
    }
    let _ = writeln!(out, "<h2>Tables</h2>");
    html_tables(&mut out, b);
    for (path, r) in &site.others {
        let _ = writeln!(
            out,
            "<h3>{} ({})</h3>",
            esc(&describe(r)),
            esc(&path.display().to_string())
        );
        html_tables(&mut out, r);
    }
    let _ = writeln!(
        out,
        "<h2>Seed 004, then and now</h2><table><tr><th>case</th><th>2007 mean ms</th><th>rpcbench transport</th><th>mode</th><th>today mean ms</th></tr>"
    );
    for s in &site.seed {
        let _ = writeln!(
            out,
            "<tr><td>{}</td><td>{:.2}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(s.case),
            s.seed_ms,
            s.transport,
            seed_mode(s),
            seed_today(s)
        );
    }
    out.push_str("</table>\n");
    let _ = writeln!(
        out,
        "<h2>Truth checks</h2><p>Expected against measured: an injected delay must come back within {}. The report's exit status is 1 when one fails.</p>",
        esc(&check_margin())
    );
    if !site.checks.is_empty() {
        let _ = writeln!(
            out,
            "<table><tr><th>check</th><th>expected</th><th>measured</th><th>pass</th></tr>"
        );
        for c in &site.checks {
            let _ = writeln!(
                out,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td{}>{}</td></tr>",
                esc(&c.what),
                esc(&c.expected),
                esc(&c.measured),
                if c.pass { "" } else { " class=\"fail\"" },
                if c.pass { "yes" } else { "no" }
            );
        }
        out.push_str("</table>\n");
    }
    if !site.not_run.is_empty() {
        out.push_str("<ul>");
        for n in &site.not_run {
            let _ = write!(out, "<li>not run: {}: {}</li>", n.check, esc(&n.reason));
        }
        out.push_str("</ul>\n");
    }
    out.push_str("<h2>Peers</h2>\n");
    match &site.peers {
        None => {
            let _ = writeln!(out, "<p>{}</p>", esc(NO_PEERS));
        }
        Some(p) => {
            let _ = writeln!(out, "<p>{}</p>", esc(&peers_intro(&p.placement)));
            let headers: Vec<String> = [
                "transport",
                "peer",
                "rpcbench µs",
                "peer µs",
                "ratio",
                "rounds",
            ]
            .iter()
            .map(|h| h.to_string())
            .chain(std::iter::once(format!("within {PEER_RATIO_LIMIT}×")))
            .collect();
            html_table(
                &mut out,
                &Grid {
                    headers,
                    rows: peer_rows(site),
                },
            );
        }
    }
    let _ = writeln!(
        out,
        "<h2>Environment</h2><pre>{}</pre>",
        esc(&environment(b))
    );
    let _ = writeln!(out, "<h2>Commands</h2><pre>");
    for r in std::iter::once(b).chain(site.others.iter().map(|(_, r)| r)) {
        let _ = writeln!(out, "{}", esc(&r.command.join(" ")));
    }
    if let Some(p) = &site.peers {
        for e in &p.pairs {
            let _ = writeln!(out, "{}", esc(&e.command));
        }
    }
    out.push_str("</pre></body></html>\n");
    out
}

/// One report's summary and phase tables, its failed calls and idle workers, in HTML.
fn html_tables(out: &mut String, r: &Report) {
    if let Some(note) = render::latency_note(r, &RenderOptions::WIDE) {
        let _ = writeln!(out, "<p>{}</p>", esc(&note));
    }
    html_table(out, &render::summary_grid(r, &RenderOptions::WIDE));
    html_table(out, &render::phase_grid(r, &RenderOptions::WIDE));
    for line in render::problem_lines(r) {
        let _ = writeln!(out, "<p class=\"fail\">{}</p>", esc(&line));
    }
    for line in render::concurrency_lines(r) {
        let _ = writeln!(out, "<p>{}</p>", esc(&line));
    }
}

/// One grid as an HTML table, every cell escaped.
fn html_table(out: &mut String, grid: &Grid) {
    out.push_str("<table><tr>");
    for h in &grid.headers {
        let _ = write!(out, "<th>{}</th>", esc(h));
    }
    out.push_str("</tr>\n");
    for row in &grid.rows {
        out.push_str("<tr>");
        for c in row {
            let _ = write!(out, "<td>{}</td>", esc(c));
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</table>\n");
}
