//! The comparison report: `rpcbench report RESULTS.json... --out DIR` writes
//! `DIR/README.md`, a self-contained `DIR/index.html` and the charts as SVG files.
//!
//! Findings come first: a few plain sentences computed from the numbers ([`findings()`],
//! which the terminal table prints too). Then the charts, the client's tables, seed 004's
//! table beside today's figures, the truth checks (what was injected against what was
//! measured), rpcbench beside established tools (benchmarks, not checks) and the
//! environment and commands.
//!
//! Inputs are rpcbench JSON results, any set of them: runs ([`Report`]) and sweeps
//! ([`SweepReport`], told apart by their `axis` and `series` fields). A sweep adds its
//! charts (latency against throughput, or against payload size), the capacity table and
//! sentences about both ([`sweep`]); a report of sweeps alone has no run tables, and its
//! truth checks are listed as not run. The roles of runs are read from their own
//! contents: a run asked for a server delay (`config.delay_us > 0`) checks delays; a server
//! that delayed DNS answers (`server.settings.dns.delay_us > 0`) checks DNS; a run without
//! either is a reference, back to back or (with `--rate`) paced. The first back-to-back
//! reference is the baseline the tables and findings start from (else the first paced
//! one, else the first input). A check the inputs cannot support is listed as not run,
//! with the reason, and does not fail the report.
//!
//! Layer 6 of the map in `lib.rs` (render): uses the render modules, the analysis, the record and the layers below.

/// The page's parts, and the escaper the HTML and the charts share.
mod block;
mod charts;
/// The page as HTML.
mod html;
mod input;
/// The page as markdown.
mod markdown;
/// The page as one list of blocks: what README.md and index.html both say.
mod page;
pub mod svg;
/// The charts of sweep results.
pub mod sweep;
/// The Encodings section: WSTest's table and the server's CPU against message size.
pub mod wstest;
use charts::{DNS_CHART_CAPTION, RTT_CHART_CAPTION, run_charts, sweep_charts};
pub use input::{BuildReportError, Input, read_input, read_json};

use crate::analysis::select::{find, slow_dns};
use crate::analysis::sweep::CapacityRow;
use crate::analysis::truth::{self, NotRun, Roles, TruthCheck, has_link_rtt};
use crate::analysis::{PEER_RATIO_LIMIT, Peers, findings};

use crate::dnsdiag::DnsDiagnosis;
use crate::model;
use crate::report::sweep::SweepReport;
use crate::report::{Report, RunRecord};
use crate::resolve::AddrMode;
use crate::transport::TransportKind;
use crate::transport::tls::Security;
use std::path::{Path, PathBuf};

/// Everything the report shows, computed once and written twice (markdown and HTML).
#[derive(Debug)]
pub struct Site {
    /// The run the tables, findings and seed table start from, and its file; `None` when
    /// every input is a sweep.
    pub baseline: Option<(PathBuf, Report)>,
    /// The other runs.
    pub others: Vec<(PathBuf, Report)>,
    /// The sweeps, in the order given.
    pub sweeps: Vec<(PathBuf, SweepReport)>,
    /// The DNS diagnoses (`rpcbench dns --out`), in the order given.
    pub dns: Vec<(PathBuf, DnsDiagnosis)>,
    /// A row per series of every sweep over offered rates.
    pub capacity: Vec<CapacityRow>,
    pub findings: Vec<findings::Finding>,
    /// Seed 004's cases beside today's; empty without a run.
    pub seed: Vec<SeedRow>,
    pub checks: Vec<TruthCheck>,
    pub not_run: Vec<NotRun>,
    pub peers: Option<Peers>,
    /// The charts: the four of the baseline run, then each sweep's.
    pub charts: Vec<sweep::Chart>,
    /// Round trips per call and fixed cost, fitted per transport and mode over the runs
    /// at two or more link RTTs (`link_rtt_us`); their values are also written on those
    /// runs (`round_trips_per_call`, `fixed_cost_us`) and in `runs.json`.
    pub fits: Vec<model::Fit>,
    /// The what-if table: each transport's mean projected at other RTTs; empty unless an
    /// input ran across a link (`--link-rtt`) or against a target.
    pub projections: Vec<model::Projection>,
    /// Every encoded run among the inputs (`--encoding`), for the Encodings section;
    /// empty without one.
    pub encodings: Vec<wstest::EncodingRow>,
}

/// One row of seed 004's table beside today's figure for the same case.
#[derive(Debug, Clone, PartialEq)]
pub struct SeedRow {
    pub case: &'static str,
    pub seed_ms: f64,
    pub transport: TransportKind,
    /// The address mode today's figure comes from; `None` when none was measured.
    pub mode: Option<AddrMode>,
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

/// A run's mean latency in ms, as seed 004 states its figures.
fn mean_ms(r: &RunRecord) -> Option<f64> {
    r.latency_us.map(|l| l.mean / 1e3)
}

impl Site {
    /// Builds the report from any set of rpcbench runs and sweeps and, optionally, peer
    /// figures; fails only when there is no input at all.
    pub fn build(
        inputs: Vec<(PathBuf, Report)>,
        sweeps: Vec<(PathBuf, SweepReport)>,
        dns: Vec<(PathBuf, DnsDiagnosis)>,
        peers: Option<Peers>,
    ) -> Result<Site, BuildReportError> {
        if inputs.is_empty() && sweeps.is_empty() && dns.is_empty() {
            return Err(BuildReportError::NoInputs);
        }
        let reports: Vec<&Report> = inputs.iter().map(|(_, r)| r).collect();
        let (checks, not_run) = truth::checks(&reports);
        let base_at = Roles::of(&reports).baseline();
        let fits = model::fit_reports(&reports);
        let projections = if reports
            .iter()
            .any(|r| has_link_rtt(r) || r.target_kind() == crate::report::Target::Remote)
        {
            model::projections(&reports, &fits)
        } else {
            Vec::new()
        };
        let mut others = inputs;
        for (_, r) in &mut others {
            model::apply_fits(r, &fits);
        }
        let baseline = (!others.is_empty()).then(|| others.remove(base_at));
        let other_reports: Vec<&Report> = others.iter().map(|(_, r)| r).collect();
        let sweep_reports: Vec<&SweepReport> = sweeps.iter().map(|(_, s)| s).collect();
        let mut findings = match &baseline {
            Some((_, b)) => findings(b, &other_reports, peers.as_ref()),
            None => peers
                .as_ref()
                .and_then(findings::peer_finding)
                .into_iter()
                .collect(),
        };
        findings.extend(
            model::round_trip_gaps(&fits)
                .into_iter()
                .map(findings::Finding::RoundTrips),
        );
        findings.extend(
            crate::analysis::sweep::findings(&sweep_reports)
                .into_iter()
                .map(findings::Finding::Sweep),
        );
        findings.extend(
            dns.iter()
                .flat_map(|(_, d)| d.findings.iter().cloned())
                .map(findings::Finding::Dns),
        );
        let mut charts = match &baseline {
            Some((_, b)) => run_charts(b, &other_reports),
            None => Vec::new(),
        };
        if !fits.is_empty() {
            charts.push(sweep::Chart {
                file: "rtt.svg".to_string(),
                caption: Some(RTT_CHART_CAPTION.to_string()),
                svg: svg::latency_rtt(&fits),
            });
        }
        charts.extend(sweep_charts(&sweep_reports));
        let encoded = wstest::rows(
            baseline
                .iter()
                .map(|(_, b)| b)
                .chain(other_reports.iter().copied())
                .flat_map(|r| &r.runs),
        );
        if let Some((transport, lines)) = wstest::cpu_chart(&encoded) {
            charts.push(sweep::Chart {
                file: "encodings-cpu.svg".to_string(),
                caption: Some(wstest::CPU_CAPTION.to_string()),
                svg: wstest::cpu_svg(transport, &lines),
            });
        }
        if !dns.is_empty() {
            let diagnoses: Vec<&DnsDiagnosis> = dns.iter().map(|(_, d)| d).collect();
            charts.push(sweep::Chart {
                file: "dns-lookups.svg".to_string(),
                caption: Some(DNS_CHART_CAPTION.to_string()),
                svg: svg::dns_lookups(&diagnoses),
            });
        }
        Ok(Site {
            seed: baseline
                .as_ref()
                .map_or_else(Vec::new, |(_, b)| seed_rows(b, &other_reports)),
            capacity: crate::analysis::sweep::capacity_rows(&sweep_reports),
            baseline,
            others,
            sweeps,
            dns,
            findings,
            checks,
            not_run,
            peers,
            charts,
            fits,
            projections,
            encodings: encoded,
        })
    }

    /// True when a truth check that ran failed: what makes `rpcbench report` exit 1. Peer
    /// ratios are benchmarks and do not count.
    pub fn failed(&self) -> bool {
        self.checks.iter().any(|c| !c.pass())
    }

    /// The input the page's heading and environment describe: the baseline run, else the
    /// first sweep, else the first DNS diagnosis.
    pub fn lead(&self) -> Lead<'_> {
        match (&self.baseline, self.sweeps.first(), self.dns.first()) {
            (Some((_, b)), _, _) => Lead::Run(b),
            (None, Some((_, s)), _) => Lead::Sweep(s),
            (None, None, Some((_, d))) => Lead::Dns(d),
            (None, None, None) => unreachable!("a site has at least one input"),
        }
    }

    /// Writes README.md, index.html and the SVG charts into `dir`, and, when the model
    /// was fitted, `runs.json`: every input run with its fitted `round_trips_per_call`
    /// and `fixed_cost_us`.
    pub fn write(&self, dir: &Path) -> Result<(), BuildReportError> {
        let write = |name: &str, text: &str| {
            let path = dir.join(name);
            std::fs::write(&path, text).map_err(|source| BuildReportError::Write { path, source })
        };
        std::fs::create_dir_all(dir).map_err(|source| BuildReportError::Write {
            path: dir.to_path_buf(),
            source,
        })?;
        for chart in &self.charts {
            write(&chart.file, &chart.svg)?;
        }
        if !self.fits.is_empty() {
            let runs: Vec<&Report> = self
                .baseline
                .iter()
                .chain(&self.others)
                .map(|(_, r)| r)
                .collect();
            let json = serde_json::to_string_pretty(&runs).unwrap_or_default();
            write("runs.json", &json)?;
        }
        let page = page::blocks(self);
        write("README.md", &markdown::write(&page))?;
        write("index.html", &html::write(&page))?;
        Ok(())
    }
}

/// The input a page's heading describes.
#[derive(Debug, Clone, Copy)]
pub enum Lead<'a> {
    Run(&'a Report),
    Sweep(&'a SweepReport),
    Dns(&'a DnsDiagnosis),
}

/// Seed 004's cases with today's figure for each: by IP from the baseline; by host name
/// under `system` (what PHP did) when measured, else `uncached`, preferring a run whose
/// resolver was slow, as the seed's was.
fn seed_rows(base: &Report, others: &[&Report]) -> Vec<SeedRow> {
    let slow = others.iter().copied().find(|r| slow_dns(r));
    SEED_004
        .iter()
        .filter_map(|&(case, seed_ms, name, by_name)| {
            let transport = TransportKind::from_name(name)?;
            let (mode, today_ms) = if by_name {
                let source = slow.unwrap_or(base);
                [AddrMode::System, AddrMode::Uncached, AddrMode::Cached]
                    .into_iter()
                    .find_map(|m| {
                        find(source, transport, m, Security::Plain).map(|r| (Some(m), mean_ms(r)))
                    })
                    .unwrap_or((None, None))
            } else {
                (
                    Some(AddrMode::Ip),
                    find(base, transport, AddrMode::Ip, Security::Plain).and_then(mean_ms),
                )
            };
            Some(SeedRow {
                case,
                seed_ms,
                transport,
                mode,
                today_ms,
            })
        })
        .collect()
}

/// Reads inputs (runs and sweeps) and writes the report; used by `rpcbench report`.
pub fn build_from_files(
    files: &[PathBuf],
    peers: Option<&Path>,
    dir: &Path,
) -> Result<Site, BuildReportError> {
    let mut runs = Vec::new();
    let mut sweeps = Vec::new();
    let mut dns = Vec::new();
    for path in files {
        match read_input(path)? {
            Input::Run(r) => runs.push((path.clone(), *r)),
            Input::Sweep(s) => sweeps.push((path.clone(), *s)),
            Input::Dns(d) => dns.push((path.clone(), *d)),
        }
    }
    let peers = peers.map(read_json::<Peers>).transpose()?;
    let site = Site::build(runs, sweeps, dns, peers)?;
    site.write(dir)?;
    Ok(site)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::{PeerPair, median};

    #[test]
    fn medians_of_round_means() {
        assert_eq!(median(&[]), None);
        assert_eq!(median(&[3.0]), Some(3.0));
        assert_eq!(median(&[5.0, 1.0, 3.0]), Some(3.0));
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), Some(2.5));
        let pair = PeerPair {
            transport: TransportKind::from_name("tcp").unwrap(),
            security: Security::Plain,
            workers: 1,
            peer: "sockperf ping-pong".into(),
            command: String::new(),
            rpcbench_round_means_us: vec![16.0, 30.0, 15.0],
            peer_round_means_us: vec![10.0, 12.0, 100.0],
        };
        // One disturbed round on each side does not decide: 16 / 12.
        assert_eq!(pair.ratio(), Some(16.0 / 12.0));
        assert_eq!(pair.within_limit(), Some(16.0 / 12.0 <= PEER_RATIO_LIMIT));
        assert_eq!(pair.name(), "tcp");
        let many = PeerPair {
            transport: TransportKind::from_name("h2-mux").unwrap(),
            workers: 256,
            ..pair
        };
        assert_eq!(many.name(), "h2-mux -c 256");
    }
}
