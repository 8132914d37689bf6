//! Writes a [`Site`] as README.md (markdown, charts as linked SVG files) and as one
//! self-contained index.html (charts inline, no scripts, nothing fetched).

use super::svg::esc;
use super::wstest;
use super::{Lead, PEER_RATIO_LIMIT, Site};
use crate::render::{self, Format, Grid, RenderOptions, units};
use crate::report::{Environment, Report};
use std::fmt::Write;

/// The report as markdown.
pub fn markdown(site: &Site) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "# rpcbench comparison report\n");
    let _ = writeln!(out, "{}\n", lead_line(site));
    let _ = writeln!(out, "## Findings\n");
    for f in &site.findings {
        let _ = writeln!(out, "- {}", render::findings::sentence(f));
    }
    let _ = writeln!(out, "\n## Charts\n");
    for chart in &site.charts {
        let _ = writeln!(out, "![{0}]({0})\n", chart.file);
        if let Some(caption) = &chart.caption {
            let _ = writeln!(out, "{caption}\n");
        }
    }
    if let Some((path, b)) = &site.baseline {
        let _ = writeln!(
            out,
            "## Tables\n\nLatency is the full round trip of ok calls, connect included for fresh transports; `{}`.\n",
            path.display()
        );
        out.push_str(&tables(b));
        for (path, r) in &site.others {
            let _ = writeln!(out, "\n### {} ({})\n", describe(r), path.display());
            out.push_str(&tables(r));
        }
    }
    if !site.encodings.is_empty() {
        let _ = writeln!(out, "\n## Encodings\n\n{ENCODINGS_INTRO}\n");
        out.push_str(&markdown_table(&wstest::grid(&site.encodings)));
    }
    markdown_model_and_sweeps(&mut out, site);
    markdown_checks(&mut out, site);
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
    out.push_str(&lead_environment(site));
    let _ = writeln!(out, "\n## Commands\n\n```sh");
    for command in commands(site) {
        let _ = writeln!(out, "{command}");
    }
    if let Some(p) = &site.peers {
        for e in &p.pairs {
            let _ = writeln!(out, "{}", e.command);
        }
    }
    let _ = writeln!(out, "```");
    out
}

/// The round-trip model's fits and projections, the sweeps and the DNS diagnoses.
fn markdown_model_and_sweeps(out: &mut String, site: &Site) {
    if !site.fits.is_empty() || !site.projections.is_empty() {
        let _ = writeln!(out, "\n## Round trips per call\n\n{MODEL_INTRO}\n");
        if !site.fits.is_empty() {
            out.push_str(&markdown_table(&render::model::fit_grid(&site.fits)));
        }
        if !site.projections.is_empty() {
            let _ = writeln!(
                out,
                "\n{}:\n",
                crate::render::model::what_if_heading(&site.projections)
            );
            out.push_str(&markdown_table(&render::model::what_if_grid(
                &site.projections,
            )));
        }
    }
    if !site.sweeps.is_empty() {
        let _ = writeln!(out, "\n## Sweeps\n\n{}\n", capacity_intro());
        if !site.capacity.is_empty() {
            out.push_str(&markdown_table(&capacity_grid(site)));
        }
        for (path, sw) in &site.sweeps {
            let _ = writeln!(out, "\n### Sweep over {} ({})\n", sw.axis, path.display());
            let mut buf = Vec::new();
            let _ = render::sweep::write_markdown(sw, &mut buf);
            out.push_str(&String::from_utf8_lossy(&buf));
        }
    }
    if !site.dns.is_empty() {
        let _ = writeln!(out, "\n## DNS lookups\n\n{DNS_INTRO}");
        for (path, d) in &site.dns {
            let _ = writeln!(out, "\n### {} ({})\n", d.name, path.display());
            let mut buf = Vec::new();
            let _ = render::dns::write_markdown(d, &mut buf);
            out.push_str(&String::from_utf8_lossy(&buf));
        }
    }
}

/// Seed 004 then and now, and the truth checks.
fn markdown_checks(out: &mut String, site: &Site) {
    let _ = writeln!(out, "\n## Seed 004, then and now\n");
    if site.seed.is_empty() {
        let _ = writeln!(out, "{NO_SEED}");
    } else {
        let _ = writeln!(
            out,
            "A PHP team in 2007 timed 1000 calls each way (`../shared/seeds/004_*.txt`). The same five cases today:\n"
        );
        out.push_str(&markdown_table(&seed_grid(site)));
    }
    let _ = writeln!(out, "\n## Truth checks\n");
    let _ = writeln!(
        out,
        "Expected against measured: an injected delay must come back within {}. The report's exit status is 1 when one fails.\n",
        render::truth::check_margin()
    );
    if !site.checks.is_empty() {
        let _ = writeln!(out, "| check | expected | measured | pass |");
        let _ = writeln!(out, "| --- | --- | --- | --- |");
        for c in &site.checks {
            let t = render::truth::text(c);
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} |",
                t.what,
                t.expected,
                t.measured,
                if c.pass() { "yes" } else { "**no**" }
            );
        }
    }
    if !site.not_run.is_empty() {
        let _ = writeln!(out);
        for n in &site.not_run {
            let (check, reason) = render::truth::not_run(n);
            let _ = writeln!(out, "- not run: {check}: {reason}");
        }
    }
}

/// The line under the title: what was called, where, when, by which version.
fn lead_line(site: &Site) -> String {
    let (target, placement, started, version) = match site.lead() {
        Lead::Run(b) => (&b.target, placement(b), &b.started, &b.rpcbench),
        Lead::Sweep(s) => (
            &s.target,
            match &s.environment.placement {
                Some(p) => placed(p),
                None => placement_of(&s.environment.cpu_affinity, None),
            },
            &s.started,
            &s.rpcbench,
        ),
        Lead::Dns(d) => {
            return format!(
                "DNS diagnosis of {} · {} lookups · rpcbench {}",
                d.name, d.lookups, d.rpcbench
            );
        }
    };
    format!("Target {target} · {placement} · started {started} · rpcbench {version}")
}

/// The environment of the lead input: the run's, else the first sweep's.
fn lead_environment(site: &Site) -> String {
    match site.lead() {
        Lead::Run(b) => environment(b),
        Lead::Sweep(s) => {
            let mut out = client_environment(&s.environment);
            let _ = writeln!(
                out,
                "- sweep over {}, {} per step",
                s.axis,
                units::duration(s.step_duration_s * 1e6)
            );
            out
        }
        Lead::Dns(d) => format!(
            "- resolver configuration: {}\n- name sources (nsswitch.conf hosts): {}\n",
            d.resolv_conf,
            d.hosts_sources.join(" ")
        ),
    }
}

/// Every input's command line, runs first.
fn commands(site: &Site) -> Vec<String> {
    site.baseline
        .iter()
        .chain(&site.others)
        .map(|(_, r)| r.command.join(" "))
        .chain(site.sweeps.iter().map(|(_, s)| s.command.join(" ")))
        .collect()
}

/// What the DNS section says before the diagnoses.
const DNS_INTRO: &str = "Each name as this machine's resolver configuration looks it up (`rpcbench dns`): every query glibc would send, in order, each timed and with its answer; the wasted ones are those whose answer was thrown away.";

/// What the sweeps section says before its capacity table.
fn capacity_intro() -> String {
    format!(
        "Capacity: the highest offered rate at which the objective's percentile, timed from when each call was due, stays within its bound, no call fails, and at least {:.0}% of the offered rate is achieved. A closed step runs back to back; ✓ met the objective, ✗ missed it.",
        crate::report::sweep::MIN_ACHIEVED * 100.0
    )
}

/// What the seed section says without a run among the inputs.
const NO_SEED: &str = "Seed 004's five cases (PHP, 2007) are read from a run; there is none (only sweeps) among the inputs.";

/// What the round-trip section says first.
const MODEL_INTRO: &str = "A call's mean is a fixed cost plus round trips times the path's round-trip time: mean ≈ c + k × RTT. k is fitted by least squares over runs at two or more link RTTs (`--link-rtt`), beside the round trips the protocol needs (docs/link.md, Round trips per call); a difference above 0.1 is a finding. c is the mean at zero RTT: CPU, kernel and the link's own forwarding.";

/// A grid as a markdown table, as the run tables are written.
fn markdown_table(grid: &Grid) -> String {
    let mut buf = Vec::new();
    // Writing into a Vec cannot fail.
    let _ = render::write_markdown_table(&mut buf, grid);
    String::from_utf8_lossy(&buf).into_owned()
}

/// Seed 004's table beside today's figures, as text cells.
fn seed_grid(site: &Site) -> Grid {
    Grid {
        headers: [
            "case",
            "2007 mean ms",
            "rpcbench transport",
            "mode",
            "today mean ms",
        ]
        .iter()
        .map(|h| h.to_string())
        .collect(),
        rows: site
            .seed
            .iter()
            .map(|s| {
                vec![
                    s.case.to_string(),
                    format!("{:.2}", s.seed_ms),
                    s.transport.to_string(),
                    seed_mode(s),
                    seed_today(s),
                ]
            })
            .collect(),
    }
}

/// The capacity table as text cells.
fn capacity_grid(site: &Site) -> Grid {
    Grid {
        headers: [
            "transport",
            "mode",
            "objective",
            "capacity calls/s",
            "steps",
            "offered calls/s",
        ]
        .iter()
        .map(|h| h.to_string())
        .collect(),
        rows: site
            .capacity
            .iter()
            .map(|c| {
                vec![
                    c.transport.to_string(),
                    c.mode.to_string(),
                    c.objective.clone(),
                    c.capacity_per_s.map_or("-".into(), units::rate),
                    c.steps.to_string(),
                    c.offered.clone(),
                ]
            })
            .collect(),
    }
}

/// The opening of the Encodings section.
const ENCODINGS_INTRO: &str = "WSTest's calls (`--encoding`), every reply decoded and checked field by field: a row per transport, encoding and message. CPU per call is the client's worker threads and the server's own threads (`/stats`, `-` below 100 clock ticks); wire bytes are both ways, headers, framing and TLS included. The chart of the server's CPU against message size is among the charts above.";

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
                e.name(),
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

/// Where client and server ran, as the report should state it: as rpcbench placed its
/// threads (`--placement`), else, for a report from before it, as their CPU masks say.
fn placement(r: &Report) -> String {
    if let Some(p) = &r.environment.placement {
        return placed(p);
    }
    let server = r.server.as_ref().map(|s| s.settings.cpu_affinity.as_str());
    placement_of(&r.environment.cpu_affinity, server)
}

/// The placement rpcbench chose, as the lead line states it.
fn placed(p: &crate::placement::PlacementRecord) -> String {
    format!("placement: {} ({})", p.placement, p.describe())
}

/// Placement from the client's allowed CPUs and the server's, when known.
fn placement_of(client: &str, server: Option<&str>) -> String {
    let server = server.unwrap_or_default();
    let how = if server.is_empty() {
        format!("client CPUs {client}, server placement unknown")
    } else if server == client && !client.contains(['-', ',']) {
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

/// The client host, libcurl and the resolver cache, as list items.
fn client_environment(e: &Environment) -> String {
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
    out
}

/// The client, the server, the DNS responder and the settings, as a list.
fn environment(r: &Report) -> String {
    let mut out = client_environment(&r.environment);
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
    let mut out = String::new();
    out.push_str(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>rpcbench comparison report</title>\n<style>body{font-family:sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222}table{border-collapse:collapse;margin:1em 0;font-size:13px}th,td{border:1px solid #ccc;padding:3px 6px;text-align:right}th:first-child,td:first-child,th:nth-child(2),td:nth-child(2){text-align:left}svg{max-width:100%;height:auto;display:block;margin:1em 0}.fail{color:#b00;font-weight:bold}pre{background:#f6f6f6;padding:1em;overflow-x:auto}</style></head><body>\n",
    );
    let _ = writeln!(out, "<h1>rpcbench comparison report</h1>");
    let _ = writeln!(out, "<p>{}</p>", esc(&lead_line(site)));
    let _ = writeln!(out, "<h2>Findings</h2><ul>");
    for f in &site.findings {
        let _ = writeln!(out, "<li>{}</li>", esc(&render::findings::sentence(f)));
    }
    let _ = writeln!(out, "</ul><h2>Charts</h2>");
    for chart in &site.charts {
        out.push_str(&chart.svg);
        out.push('\n');
        if let Some(caption) = &chart.caption {
            let _ = writeln!(out, "<p>{}</p>", esc(caption));
        }
    }
    html_tables_of_runs(&mut out, site);
    if !site.encodings.is_empty() {
        let _ = writeln!(out, "<h2>Encodings</h2><p>{}</p>", esc(ENCODINGS_INTRO));
        html_table(&mut out, &wstest::grid(&site.encodings));
    }
    html_model(&mut out, site);
    html_sweeps(&mut out, site);
    html_dns(&mut out, site);
    html_checks(&mut out, site);
    html_peers(&mut out, site);
    let _ = writeln!(
        out,
        "<h2>Environment</h2><pre>{}</pre>",
        esc(&lead_environment(site))
    );
    let _ = writeln!(out, "<h2>Commands</h2><pre>");
    for command in commands(site) {
        let _ = writeln!(out, "{}", esc(&command));
    }
    if let Some(p) = &site.peers {
        for e in &p.pairs {
            let _ = writeln!(out, "{}", esc(&e.command));
        }
    }
    out.push_str("</pre></body></html>\n");
    out
}

/// The run tables: the baseline's, then every other input's.
fn html_tables_of_runs(out: &mut String, site: &Site) {
    if let Some((_, b)) = &site.baseline {
        let _ = writeln!(out, "<h2>Tables</h2>");
        html_tables(out, b);
        for (path, r) in &site.others {
            let _ = writeln!(
                out,
                "<h3>{} ({})</h3>",
                esc(&describe(r)),
                esc(&path.display().to_string())
            );
            html_tables(out, r);
        }
    }
}

/// The round-trip model's fits and what-if projections.
fn html_model(out: &mut String, site: &Site) {
    if !site.fits.is_empty() || !site.projections.is_empty() {
        let _ = writeln!(
            out,
            "<h2>Round trips per call</h2><p>{}</p>",
            esc(MODEL_INTRO)
        );
        if !site.fits.is_empty() {
            html_table(out, &render::model::fit_grid(&site.fits));
        }
        if !site.projections.is_empty() {
            let _ = writeln!(
                out,
                "<p>{}:</p>",
                esc(&crate::render::model::what_if_heading(&site.projections))
            );
            html_table(out, &render::model::what_if_grid(&site.projections));
        }
    }
}

/// The capacity table and each sweep's tables.
fn html_sweeps(out: &mut String, site: &Site) {
    if !site.sweeps.is_empty() {
        let _ = writeln!(out, "<h2>Sweeps</h2><p>{}</p>", esc(&capacity_intro()));
        if !site.capacity.is_empty() {
            html_table(out, &capacity_grid(site));
        }
        for (path, sw) in &site.sweeps {
            let _ = writeln!(
                out,
                "<h3>Sweep over {} ({})</h3><p>{}</p><p>{}</p>",
                esc(sw.axis.name()),
                esc(&path.display().to_string()),
                esc(&render::sweep::heading(sw)),
                esc(render::sweep::LEGEND)
            );
            for series in &sw.series {
                html_table(out, &render::sweep::grid(sw, series, &RenderOptions::WIDE));
                for note in render::sweep::notes(sw, series) {
                    let _ = writeln!(out, "<p>{}</p>", esc(&note));
                }
            }
        }
    }
}

/// Each DNS diagnosis: its queries, summary and findings.
fn html_dns(out: &mut String, site: &Site) {
    if !site.dns.is_empty() {
        let _ = writeln!(out, "<h2>DNS lookups</h2><p>{}</p>", esc(DNS_INTRO));
        for (path, d) in &site.dns {
            let _ = writeln!(
                out,
                "<h3>{} ({})</h3><p>{}</p>",
                esc(&d.name),
                esc(&path.display().to_string()),
                esc(&render::dns::heading(d))
            );
            if !d.queries.is_empty() {
                html_table(out, &render::dns::grid(d));
            }
            let _ = writeln!(out, "<ul>");
            let findings = d.findings.iter().map(render::findings::dns_sentence);
            for line in render::dns::summary(d).into_iter().chain(findings) {
                let _ = writeln!(out, "<li>{}</li>", esc(&line));
            }
            let _ = writeln!(out, "</ul>");
        }
    }
}

/// Seed 004 then and now, and the truth checks.
fn html_checks(out: &mut String, site: &Site) {
    let _ = writeln!(out, "<h2>Seed 004, then and now</h2>");
    if site.seed.is_empty() {
        let _ = writeln!(out, "<p>{}</p>", esc(NO_SEED));
    } else {
        html_table(out, &seed_grid(site));
    }
    let _ = writeln!(
        out,
        "<h2>Truth checks</h2><p>Expected against measured: an injected delay must come back within {}. The report's exit status is 1 when one fails.</p>",
        esc(&render::truth::check_margin())
    );
    if !site.checks.is_empty() {
        let _ = writeln!(
            out,
            "<table><tr><th>check</th><th>expected</th><th>measured</th><th>pass</th></tr>"
        );
        for c in &site.checks {
            let t = render::truth::text(c);
            let _ = writeln!(
                out,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td{}>{}</td></tr>",
                esc(&t.what),
                esc(&t.expected),
                esc(&t.measured),
                if c.pass() { "" } else { " class=\"fail\"" },
                if c.pass() { "yes" } else { "no" }
            );
        }
        out.push_str("</table>\n");
    }
    if !site.not_run.is_empty() {
        out.push_str("<ul>");
        for n in &site.not_run {
            let (check, reason) = render::truth::not_run(n);
            let _ = write!(out, "<li>not run: {check}: {}</li>", esc(&reason));
        }
        out.push_str("</ul>\n");
    }
}

/// rpcbench beside established tools.
fn html_peers(out: &mut String, site: &Site) {
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
                out,
                &Grid {
                    headers,
                    rows: peer_rows(site),
                },
            );
        }
    }
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
