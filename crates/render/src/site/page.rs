//! The report page as one list of [`Block`]s, built once from a [`Site`] by [`blocks`] and
//! written twice: as markdown by [`super::markdown`] (README.md, charts linked as SVG
//! files) and as HTML by [`super::html`] (index.html, charts inline). A section appears
//! here once; neither writer knows which sections there are.

use super::block::{Block, Table};
use super::wstest;
use super::{Lead, PEER_RATIO_LIMIT, Site};
use crate::analysis::sweep::CapacityStep;
use crate::render::{self, Grid, RenderOptions, units};
use crate::report::{Environment, Report};

/// The whole page, section by section.
pub fn blocks(site: &Site) -> Vec<Block<'_>> {
    let mut page = vec![
        Block::Title("rpcbench comparison report".into()),
        Block::Text(lead_line(site)),
        Block::Section("Findings".into()),
        Block::list(site.findings.iter().map(render::findings::sentence)),
        Block::Section("Charts".into()),
    ];
    page.extend(site.charts.iter().map(Block::Chart));
    run_tables(&mut page, site);
    if !site.encodings.is_empty() {
        page.push(Block::Section("Encodings".into()));
        page.push(Block::Text(ENCODINGS_INTRO.into()));
        page.push(wstest::grid(&site.encodings).into());
    }
    model(&mut page, site);
    sweeps(&mut page, site);
    dns(&mut page, site);
    checks(&mut page, site);
    peers(&mut page, site);
    page.push(Block::Section("Environment".into()));
    page.push(Block::list(lead_environment(site)));
    page.push(Block::Section("Commands".into()));
    let peer_commands = site.peers.iter().flat_map(|p| &p.pairs);
    page.push(Block::Code(
        commands(site)
            .into_iter()
            .chain(peer_commands.map(|e| e.command.clone()))
            .collect(),
    ));
    page
}

/// The run tables: the baseline's, then every other input's.
fn run_tables(page: &mut Vec<Block>, site: &Site) {
    let Some((path, b)) = &site.baseline else {
        return;
    };
    page.push(Block::Section("Tables".into()));
    page.push(Block::Text(format!(
        "Latency is the full round trip of ok calls, connect included for fresh transports; `{}`.",
        path.display()
    )));
    run(page, b);
    for (path, r) in &site.others {
        page.push(Block::Subsection(format!(
            "{} ({})",
            describe(r),
            path.display()
        )));
        run(page, r);
    }
}

/// One report's summary and phase tables, its failed calls and its notes.
fn run(page: &mut Vec<Block>, r: &Report) {
    let options = &RenderOptions::WIDE;
    if let Some(note) = render::latency_note(r, options) {
        page.push(Block::Text(note));
    }
    page.push(render::summary_grid(r, options).into());
    page.push(render::phase_grid(r, options).into());
    page.push(Block::List {
        items: render::problem_lines(r),
        alert: true,
    });
    page.push(Block::list(
        render::engine_line(r)
            .into_iter()
            .chain(render::concurrency_lines(r))
            .chain(render::tcp_info_line(r)),
    ));
}

/// The round-trip model's fits and what-if projections.
fn model(page: &mut Vec<Block>, site: &Site) {
    if site.fits.is_empty() && site.projections.is_empty() {
        return;
    }
    page.push(Block::Section("Round trips per call".into()));
    page.push(Block::Text(MODEL_INTRO.into()));
    if !site.fits.is_empty() {
        page.push(render::model::fit_grid(&site.fits).into());
    }
    if !site.projections.is_empty() {
        page.push(Block::Text(format!(
            "{}:",
            render::model::what_if_heading(&site.projections)
        )));
        page.push(render::model::what_if_grid(&site.projections).into());
    }
}

/// The capacity table and each sweep's tables and notes.
fn sweeps(page: &mut Vec<Block>, site: &Site) {
    if site.sweeps.is_empty() {
        return;
    }
    page.push(Block::Section("Sweeps".into()));
    page.push(Block::Text(capacity_intro()));
    if !site.capacity.is_empty() {
        page.push(capacity_grid(site).into());
    }
    for (path, sw) in &site.sweeps {
        page.push(Block::Subsection(format!(
            "Sweep over {} ({})",
            sw.axis,
            path.display()
        )));
        page.push(Block::Text(render::sweep::heading(sw)));
        page.push(Block::Text(render::sweep::LEGEND.into()));
        for series in &sw.series {
            page.push(render::sweep::grid(sw, series, &RenderOptions::WIDE).into());
            page.push(Block::list(render::sweep::notes(sw, series)));
        }
    }
}

/// Each DNS diagnosis: its queries, summary and findings.
fn dns(page: &mut Vec<Block>, site: &Site) {
    if site.dns.is_empty() {
        return;
    }
    page.push(Block::Section("DNS lookups".into()));
    page.push(Block::Text(DNS_INTRO.into()));
    for (path, d) in &site.dns {
        page.push(Block::Subsection(format!(
            "{} ({})",
            d.name,
            path.display()
        )));
        page.push(Block::Text(render::dns::heading(d)));
        if !d.queries.is_empty() {
            page.push(render::dns::grid(d).into());
        }
        let findings = d.findings.iter().map(render::findings::dns_sentence);
        page.push(Block::list(
            render::dns::summary(d).into_iter().chain(findings),
        ));
    }
}

/// Seed 004 then and now, and the truth checks.
fn checks(page: &mut Vec<Block>, site: &Site) {
    page.push(Block::Section("Seed 004, then and now".into()));
    if site.seed.is_empty() {
        page.push(Block::Text(NO_SEED.into()));
    } else {
        page.push(Block::Text("A PHP team in 2007 timed 1000 calls each way (`../shared/seeds/004_*.txt`). The same five cases today:".into()));
        page.push(seed_grid(site).into());
    }
    page.push(Block::Section("Truth checks".into()));
    page.push(Block::Text(format!(
        "Expected against measured: an injected delay must come back within {}. The report's exit status is 1 when one fails.",
        render::truth::check_margin()
    )));
    if !site.checks.is_empty() {
        let rows = site.checks.iter().map(|c| {
            let t = render::truth::text(c);
            let pass = if c.pass() { "yes" } else { "no" };
            vec![t.what, t.expected, t.measured, pass.to_string()]
        });
        let failed = (site.checks.iter().enumerate())
            .filter(|(_, c)| !c.pass())
            .map(|(row, _)| (row, 3))
            .collect();
        page.push(Block::Table(Table {
            grid: Grid {
                headers: ["check", "expected", "measured", "pass"]
                    .map(String::from)
                    .to_vec(),
                rows: rows.collect(),
            },
            failed,
        }));
    }
    page.push(Block::list(site.not_run.iter().map(|n| {
        let (check, reason) = render::truth::not_run(n);
        format!("not run: {check}: {reason}")
    })));
}

/// rpcbench beside established tools.
fn peers(page: &mut Vec<Block>, site: &Site) {
    page.push(Block::Section("Peers".into()));
    let Some(p) = &site.peers else {
        page.push(Block::Text(NO_PEERS.into()));
        return;
    };
    page.push(Block::Text(peers_intro(&p.placement)));
    let headers = [
        "transport",
        "peer",
        "rpcbench µs",
        "peer µs",
        "ratio",
        "rounds",
    ]
    .map(String::from)
    .into_iter()
    .chain([format!("within {PEER_RATIO_LIMIT}×")])
    .collect();
    page.push(
        Grid {
            headers,
            rows: peer_rows(site),
        }
        .into(),
    );
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

/// The environment of the lead input (the run's, else the first sweep's), as list items.
fn lead_environment(site: &Site) -> Vec<String> {
    match site.lead() {
        Lead::Run(b) => environment(b),
        Lead::Sweep(s) => {
            let mut items = client_environment(&s.environment);
            items.push(format!(
                "sweep over {}, {} per step",
                s.axis,
                units::duration(s.step_duration_s * 1e6)
            ));
            items
        }
        Lead::Dns(d) => vec![
            format!("resolver configuration: {}", d.resolv_conf),
            format!(
                "name sources (nsswitch.conf hosts): {}",
                d.hosts_sources.join(" ")
            ),
        ],
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
                    c.objective.clone().unwrap_or_else(|| "none".into()),
                    c.capacity_per_s.map_or("-".into(), units::rate),
                    c.steps.len().to_string(),
                    offered(&c.steps),
                ]
            })
            .collect(),
    }
}

/// Each step's offered rate and verdict, in the order run: `closed 1,020, 255 ✓, 383 ✗`.
fn offered(steps: &[CapacityStep]) -> String {
    let step = |st: &CapacityStep| {
        let verdict = match st.meets_slo {
            Some(true) => " ✓",
            Some(false) => " ✗",
            None => "",
        };
        match st.offered_per_s {
            Some(o) => format!("{}{verdict}", units::rate(o)),
            None => format!("closed {}", units::rate(st.achieved_per_s)),
        }
    };
    steps.iter().map(step).collect::<Vec<_>>().join(", ")
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
    format!("placement: {} ({})", p.placement, render::placement(p))
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
fn client_environment(e: &Environment) -> Vec<String> {
    let mut items = vec![
        format!(
            "client host: {} ({}), {} CPUs, CPUs allowed {}",
            e.hostname, e.kernel, e.cpus, e.cpu_affinity
        ),
        format!("libcurl {}", e.libcurl),
    ];
    if let Some(cache) = &e.resolver_cache {
        items.push(format!(
            "a caching resolver sits in front of getaddrinfo: {cache}"
        ));
    }
    items
}

/// The client, the server, the DNS responder and the settings, as list items.
fn environment(r: &Report) -> Vec<String> {
    let mut items = client_environment(&r.environment);
    if let Some(s) = &r.server {
        items.push(format!(
            "server: rpcbench-echo {}, CPUs allowed {}, max frame {} B",
            s.settings.version, s.settings.cpu_affinity, s.settings.max_frame
        ));
        if let Some(d) = &s.settings.dns {
            items.push(format!(
                "DNS responder: {} → {}, TTL {} s, answers {} µs late, drops {:.0}%; answered {} queries",
                d.name,
                d.answer,
                d.ttl_s,
                d.delay_us,
                d.drop * 100.0,
                s.dns_answered
            ));
        }
    }
    let c = &r.config;
    items.push(format!(
        "{} calls per transport and mode after {} warm-up calls, {} worker(s), payload {} B, {} round(s), family {}, resolver {}",
        c.calls,
        c.warmup,
        c.concurrency,
        c.payload_bytes,
        c.rounds,
        family(c.family),
        c.resolver
    ));
    items
}
