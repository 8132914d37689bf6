//! The comparison report: `rpcbench report RESULTS.json... --out DIR` writes
//! `DIR/README.md`, a self-contained `DIR/index.html` and the charts as SVG files.
//!
//! Findings come first: a few plain sentences computed from the numbers. Then the charts,
//! the client's tables, seed 004's table beside today's figures, the truth checks (what was
//! injected against what was measured; rpcbench against established tools) and the
//! environment and commands.
//!
//! Inputs are rpcbench JSON reports. Their roles are read from their own contents: a run
//! asked for a server delay (`config.delay_us > 0`) checks delays; a server that delayed DNS
//! answers (`server.settings.dns.delay_us > 0`) checks DNS; a run without either but with
//! `--rate` is the paced reference of the delay check; the first of the rest is the
//! baseline everything else is compared with.

mod page;
pub mod svg;

use crate::render;
use crate::report::{Report, RunRecord};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// Tolerance of the server-delay check: 5% of the delay plus 50 µs.
const DELAY_TOLERANCE: (f64, f64) = (0.05, 50.0);
/// Tolerance of the DNS-delay check: 5% of the delay plus 100 µs (a lookup adds a UDP
/// exchange and a resolver hand-off of its own).
const DNS_TOLERANCE: (f64, f64) = (0.05, 100.0);
/// rpcbench may be at most this many times slower than an established tool measuring the
/// same thing, or the tool itself is what is being measured.
pub const PEER_RATIO_LIMIT: f64 = 1.3;

/// Figures from established tools measured on the same machines and placement, written by
/// `report/peers.sh` (or the test bed) as JSON.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Peers {
    /// Core placement the peers (and rpcbench beside them) ran with, e.g. `same core (CPU 0)`.
    pub placement: String,
    pub entries: Vec<PeerEntry>,
}

/// One peer measurement, matched to an rpcbench transport.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PeerEntry {
    /// The rpcbench transport it is compared with.
    pub transport: String,
    /// The tool, e.g. `sockperf ping-pong`.
    pub peer: String,
    /// The peer's mean round trip, µs.
    pub peer_mean_us: f64,
    /// rpcbench's mean for the same transport in the same script run, µs.
    pub rpcbench_mean_us: f64,
    /// The exact command the peer ran.
    pub command: String,
}

/// One check of a figure against what it should be.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TruthCheck {
    /// What is checked, e.g. `server delay 1000 µs: tcp (ip)`.
    pub what: String,
    pub expected: String,
    pub measured: String,
    pub pass: bool,
}

/// Everything the report shows, computed once and written twice (markdown and HTML).
#[derive(Debug)]
pub struct Site {
    pub baseline: Report,
    pub baseline_path: PathBuf,
    pub others: Vec<(PathBuf, Report)>,
    pub findings: Vec<String>,
    pub seed: Vec<SeedRow>,
    pub checks: Vec<TruthCheck>,
    pub peers: Option<Peers>,
    /// The four charts, as SVG: (file name, svg).
    pub charts: Vec<(&'static str, String)>,
}

/// One row of seed 004's table beside today's figure for the same case.
#[derive(Debug, Clone, PartialEq)]
pub struct SeedRow {
    pub case: &'static str,
    pub seed_ms: f64,
    pub transport: &'static str,
    pub mode: String,
    pub today_ms: Option<f64>,
}

/// Seed 004's five cases (PHP, 2007, 1000 calls each): the socket, `file_get_contents`
/// over HTTP by IP and by host name, and curl by IP and by host name, mean ms per call.
const SEED_004: [(&str, f64, &str, bool); 5] = [
    ("socket", 0.47, "tcp", false),
    ("HTTP (file_get_contents)", 4.02, "http-fresh", false),
    ("HTTP by host name", 156.42, "http-fresh", true),
    ("curl", 3.17, "curl-fresh", false),
    ("curl by host name", 4.69, "curl-fresh", true),
];

/// Why a report could not be built.
#[derive(Debug, thiserror::Error)]
pub enum BuildReportError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path} is not an rpcbench JSON report: {source}")]
    Parse {
        path: PathBuf,
        source: serde_json::Error,
    },
    #[error("no baseline: every input asked for a server or DNS delay")]
    NoBaseline,
    #[error("cannot write {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// Reads a JSON file of type `T`.
pub fn read_json<T: for<'de> Deserialize<'de>>(path: &Path) -> Result<T, BuildReportError> {
    let bytes = std::fs::read(path).map_err(|source| BuildReportError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    serde_json::from_slice(&bytes).map_err(|source| BuildReportError::Parse {
        path: path.to_path_buf(),
        source,
    })
}

fn dns_delay_us(r: &Report) -> u64 {
    r.server
        .as_ref()
        .and_then(|s| s.settings.dns.as_ref())
        .map_or(0, |d| d.delay_us)
}

fn find<'a>(r: &'a Report, transport: &str, mode: &str) -> Option<&'a RunRecord> {
    r.runs
        .iter()
        .find(|x| x.transport == transport && x.addr_mode == mode)
}

fn mean_ms(r: &RunRecord) -> Option<f64> {
    r.latency_us.map(|l| l.mean / 1e3)
}

impl Site {
    /// Builds the report from rpcbench JSON reports and, optionally, peer figures.
    pub fn build(
        inputs: Vec<(PathBuf, Report)>,
        peers: Option<Peers>,
    ) -> Result<Site, BuildReportError> {
        let plain = |r: &Report| r.config.delay_us == 0 && dns_delay_us(r) == 0;
        let base_at = inputs
            .iter()
            .position(|(_, r)| plain(r) && r.config.rate_per_s.is_none())
            .ok_or(BuildReportError::NoBaseline)?;
        let mut others = inputs;
        let (baseline_path, baseline) = others.remove(base_at);
        let paced = others
            .iter()
            .map(|(_, r)| r)
            .find(|r| plain(r) && r.config.rate_per_s.is_some());
        let mut checks = Vec::new();
        for (_, r) in &others {
            checks.extend(delay_checks(&baseline, paced, r));
            checks.extend(dns_checks(&baseline, r));
        }
        if let Some(p) = &peers {
            checks.extend(p.entries.iter().map(|e| {
                let ratio = e.rpcbench_mean_us / e.peer_mean_us;
                TruthCheck {
                    what: format!("{} against {}", e.transport, e.peer),
                    expected: format!(
                        "at most {PEER_RATIO_LIMIT}× the peer's {:.1} µs",
                        e.peer_mean_us
                    ),
                    measured: format!("{:.1} µs, {ratio:.2}×", e.rpcbench_mean_us),
                    pass: ratio <= PEER_RATIO_LIMIT,
                }
            }));
        }
        let seed = seed_rows(&baseline, &others);
        let findings = findings(&baseline, &others, peers.as_ref());
        let runs: Vec<&RunRecord> = baseline.runs.iter().collect();
        let ip_runs: Vec<&RunRecord> = baseline
            .runs
            .iter()
            .filter(|r| r.addr_mode == "ip")
            .collect();
        let curve_runs = if ip_runs.is_empty() {
            runs.clone()
        } else {
            ip_runs
        };
        // The DNS chart is most telling with a slow resolver, when there is a run with one.
        let dns_source = others
            .iter()
            .map(|(_, r)| r)
            .find(|r| dns_delay_us(r) > 0)
            .unwrap_or(&baseline);
        let dns_runs: Vec<&RunRecord> = dns_source.runs.iter().collect();
        let charts = vec![
            ("percentiles.svg", svg::percentile_curves(&curve_runs)),
            ("mean-p99.svg", svg::mean_p99(&runs)),
            ("phases.svg", svg::phase_stack(&runs)),
            ("dns.svg", svg::dns_overhead(&dns_runs)),
        ];
        Ok(Site {
            baseline,
            baseline_path,
            others,
            findings,
            seed,
            checks,
            peers,
            charts,
        })
    }

    /// Writes README.md, index.html and the SVG charts into `dir`.
    pub fn write(&self, dir: &Path) -> Result<(), BuildReportError> {
        let write = |name: &str, text: &str| {
            let path = dir.join(name);
            std::fs::write(&path, text).map_err(|source| BuildReportError::Write { path, source })
        };
        std::fs::create_dir_all(dir).map_err(|source| BuildReportError::Write {
            path: dir.to_path_buf(),
            source,
        })?;
        for (name, svg) in &self.charts {
            write(name, svg)?;
        }
        write("README.md", &page::markdown(self))?;
        write("index.html", &page::html(self))?;
        Ok(())
    }

    /// The baseline's summary table rows, as the client prints them.
    pub fn summary_rows(&self) -> Vec<Vec<String>> {
        render::summary_rows(&self.baseline)
    }
}

/// With a server delay of D, every transport's mean should rise by D.
///
/// The rise is taken against `paced` when there is one: the same calls without a delay,
/// started D apart with `--rate`. A client that waits D for each reply sits idle for D,
/// and on a small virtual machine the first instructions after an idle spell run slower
/// (cold caches, a halted vCPU); a base paced D apart pays that too, so what is left is the
/// delay alone. The rise against the back-to-back baseline is shown beside it.
fn delay_checks(base: &Report, paced: Option<&Report>, delayed: &Report) -> Vec<TruthCheck> {
    let d = f64::from(delayed.config.delay_us);
    if d == 0.0 || dns_delay_us(delayed) != 0 {
        return Vec::new();
    }
    let tolerance = DELAY_TOLERANCE.0 * d + DELAY_TOLERANCE.1;
    let rise_over = |reference: &Report, r: &RunRecord| {
        let b = find(reference, &r.transport, &r.addr_mode)?;
        Some((r.latency_us?.mean - b.latency_us?.mean).round())
    };
    delayed
        .runs
        .iter()
        .filter_map(|r| {
            let plain = rise_over(base, r);
            let paced_rise = paced.and_then(|p| {
                let rate = p.config.rate_per_s?;
                Some((rise_over(p, r)?, 1e6 / rate))
            });
            let (rise, measured) = match (paced_rise, plain) {
                (Some((rise, gap)), plain) => (
                    rise,
                    format!(
                        "{rise:+.0} µs over calls started {gap:.0} µs apart{}",
                        plain.map_or(String::new(), |p| format!(
                            " ({p:+.0} µs over back-to-back calls)"
                        ))
                    ),
                ),
                (None, Some(rise)) => (rise, format!("{rise:+.0} µs")),
                (None, None) => return None,
            };
            Some(TruthCheck {
                what: format!("server delay {d:.0} µs: {} ({})", r.transport, r.addr_mode),
                expected: format!("+{d:.0} µs ± {tolerance:.0}"),
                measured,
                pass: (rise - d).abs() <= tolerance,
            })
        })
        .collect()
}

/// With DNS answers D late, fresh connections under `uncached` should rise by D; under
/// `cached`, and for persistent connections (whose lookup is in warm-up), by about nothing.
fn dns_checks(base: &Report, slow: &Report) -> Vec<TruthCheck> {
    let d = dns_delay_us(slow) as f64;
    if d == 0.0 || slow.config.delay_us != 0 {
        return Vec::new();
    }
    let tolerance = DNS_TOLERANCE.0 * d + DNS_TOLERANCE.1;
    slow.runs
        .iter()
        .filter(|r| r.addr_mode == "cached" || r.addr_mode == "uncached")
        .filter_map(|r| {
            let b = find(base, &r.transport, &r.addr_mode)
                .or_else(|| find(base, &r.transport, "ip"))?;
            let fresh = crate::transport::TransportKind::from_name(&r.transport)
                .is_some_and(|k| !k.persistent());
            let expected = if fresh && r.addr_mode == "uncached" {
                d
            } else {
                0.0
            };
            let rise = (r.latency_us?.mean - b.latency_us?.mean).round();
            Some(TruthCheck {
                what: format!("DNS delay {d:.0} µs: {} ({})", r.transport, r.addr_mode),
                expected: format!("+{expected:.0} µs ± {tolerance:.0}"),
                measured: format!("{rise:+.0} µs"),
                pass: (rise - expected).abs() <= tolerance,
            })
        })
        .collect()
}

/// Seed 004's cases with today's figure for each: by IP from the baseline; by host name
/// under `system` (what PHP did) when measured, else `uncached`, preferring a run whose
/// resolver was slow, as the seed's was.
fn seed_rows(base: &Report, others: &[(PathBuf, Report)]) -> Vec<SeedRow> {
    let slow = others
        .iter()
        .map(|(_, r)| r)
        .find(|r| dns_delay_us(r) > 0 && r.config.delay_us == 0);
    SEED_004
        .iter()
        .map(|&(case, seed_ms, transport, by_name)| {
            let (mode, today) = if by_name {
                let source = slow.unwrap_or(base);
                ["system", "uncached", "cached"]
                    .iter()
                    .find_map(|m| find(source, transport, m).map(|r| (m.to_string(), mean_ms(r))))
                    .unwrap_or(("-".into(), None))
            } else {
                ("ip".into(), find(base, transport, "ip").and_then(mean_ms))
            };
            SeedRow {
                case,
                seed_ms,
                transport,
                mode,
                today_ms: today,
            }
        })
        .collect()
}

/// Three to six sentences computed from the numbers: the answers people came for.
fn findings(base: &Report, others: &[(PathBuf, Report)], peers: Option<&Peers>) -> Vec<String> {
    let mut out = Vec::new();
    let ip = |t: &str| find(base, t, "ip").and_then(mean_ms);
    // 1. What a persistent connection saves.
    let pairs = [
        ("tcp", "tcp-connect"),
        ("http-keepalive", "http-fresh"),
        ("curl-reuse", "curl-fresh"),
    ];
    let saved: Vec<String> = pairs
        .iter()
        .filter_map(|(keep, fresh)| {
            let (k, f) = (ip(keep)?, ip(fresh)?);
            Some(format!(
                "{keep} {k:.3} ms against {fresh} {f:.3} ms ({:.1}×)",
                f / k
            ))
        })
        .collect();
    if !saved.is_empty() {
        out.push(format!(
            "Reusing a connection is the biggest win: per call, {}.",
            saved.join("; ")
        ));
    }
    // 2. What a name lookup costs, and what caching gives back.
    let slow = others
        .iter()
        .map(|(_, r)| r)
        .find(|r| dns_delay_us(r) > 0 && r.config.delay_us == 0);
    for (report, note) in [(Some(base), String::new()), (slow, String::new())] {
        let Some(report) = report else { continue };
        let m = |t: &str, mode: &str| find(report, t, mode).and_then(mean_ms);
        if let (Some(i), Some(u)) = (m("http-fresh", "ip"), m("http-fresh", "uncached")) {
            let cached = m("http-fresh", "cached").map_or(String::new(), |c| {
                format!(", and caching the answer (cached) brings it back to {c:.3} ms")
            });
            let resolver = if dns_delay_us(report) > 0 {
                format!(
                    " with a resolver that answers {:.0} ms late",
                    dns_delay_us(report) as f64 / 1e3
                )
            } else {
                " with the resolver next door".to_string()
            };
            out.push(format!(
                "An uncached name lookup on every new connection costs {:.3} ms per call{resolver}{note}: http-fresh takes {u:.3} ms by name against {i:.3} ms by IP{cached}; persistent transports pay it once per connection.",
                u - i
            ));
        }
    }
    // 3. Which transport to pick.
    let ok_runs: Vec<&RunRecord> = base
        .runs
        .iter()
        .filter(|r| r.failed() == 0 && r.addr_mode == "ip")
        .collect();
    let best = ok_runs
        .iter()
        .filter_map(|r| Some((*r, r.latency_us?)))
        .min_by(|a, b| a.1.mean.total_cmp(&b.1.mean));
    let best_http = ok_runs
        .iter()
        .filter(|r| r.transport != "tcp" && r.transport != "tcp-connect")
        .filter_map(|r| Some((*r, r.latency_us?)))
        .min_by(|a, b| a.1.mean.total_cmp(&b.1.mean));
    if let (Some((b, bl)), Some((h, hl))) = (best, best_http) {
        out.push(format!(
            "For this pair of hosts, pick {} (mean {:.3} ms, p99 {:.3} ms) when you own both ends; if it must be HTTP, {} (mean {:.3} ms, p99 {:.3} ms), with a connection kept per worker.",
            b.transport,
            bl.mean / 1e3,
            bl.p99 / 1e3,
            h.transport,
            hl.mean / 1e3,
            hl.p99 / 1e3
        ));
    }
    // 4. Client CPU per call.
    let cpu: Vec<(String, f64)> = base
        .runs
        .iter()
        .filter(|r| r.addr_mode == "ip" && r.calls > 0)
        .map(|r| {
            (
                r.transport.clone(),
                (r.cpu_user_s + r.cpu_sys_s) / r.calls as f64 * 1e6,
            )
        })
        .collect();
    if let (Some(lo), Some(hi)) = (
        cpu.iter().min_by(|a, b| a.1.total_cmp(&b.1)),
        cpu.iter().max_by(|a, b| a.1.total_cmp(&b.1)),
    ) {
        out.push(format!(
            "Client CPU per call ranges from {:.1} µs ({}) to {:.1} µs ({}).",
            lo.1, lo.0, hi.1, hi.0
        ));
    }
    // 5. Lost calls, over every input.
    let all: Vec<&RunRecord> = std::iter::once(base)
        .chain(others.iter().map(|(_, r)| r))
        .flat_map(|r| r.runs.iter())
        .collect();
    let calls: u64 = all.iter().map(|r| r.calls).sum();
    let failed: Vec<String> = all
        .iter()
        .filter(|r| r.failed() > 0)
        .map(|r| {
            format!(
                "{} ({}) {} of {}",
                r.transport,
                r.addr_mode,
                r.failed(),
                r.calls
            )
        })
        .collect();
    if failed.is_empty() {
        out.push(format!(
            "No call was lost: all {calls} measured calls came back with their own bytes."
        ));
    } else {
        out.push(format!(
            "Calls failed: {} (of {calls} measured calls in all); see the tables for their kinds.",
            failed.join(", ")
        ));
    }
    // 6. Peers.
    if let Some(p) = peers {
        let ratios: Vec<(&PeerEntry, f64)> = p
            .entries
            .iter()
            .map(|e| (e, e.rpcbench_mean_us / e.peer_mean_us))
            .collect();
        let over: Vec<String> = ratios
            .iter()
            .filter(|(_, r)| *r > PEER_RATIO_LIMIT)
            .map(|(e, r)| format!("{} {r:.2}× {}", e.transport, e.peer))
            .collect();
        let worst = ratios.iter().max_by(|a, b| a.1.total_cmp(&b.1));
        if let Some((e, ratio)) = worst {
            out.push(if over.is_empty() {
                format!(
                    "Against established tools on the same placement ({}), rpcbench is at worst {ratio:.2}× the peer ({} against {}), so these figures measure the network and the stacks, not rpcbench.",
                    p.placement, e.transport, e.peer
                )
            } else {
                format!(
                    "Against established tools on the same placement ({}), rpcbench is above the {PEER_RATIO_LIMIT}× limit for {}: there, part of the figure is rpcbench's own overhead.",
                    p.placement,
                    over.join(", ")
                )
            });
        }
    }
    out
}

/// Reads inputs and writes the report; used by `rpcbench report`.
pub fn build_from_files(
    files: &[PathBuf],
    peers: Option<&Path>,
    dir: &Path,
) -> Result<Site, BuildReportError> {
    let inputs = files
        .iter()
        .map(|p| read_json::<Report>(p).map(|r| (p.clone(), r)))
        .collect::<Result<Vec<_>, _>>()?;
    let peers = peers.map(read_json::<Peers>).transpose()?;
    let site = Site::build(inputs, peers)?;
    site.write(dir)?;
    Ok(site)
}
