//! The report's charts of runs and sweeps, each with its caption.

use super::{svg, sweep};
use crate::analysis::select::dns_delay_us;
use crate::report::sweep::{SweepAxis, SweepReport};
use crate::report::{Report, RunRecord};
use crate::resolve::AddrMode;

/// How to read the DNS chart.
pub(super) const DNS_CHART_CAPTION: &str = "One bar per diagnosed name: each query of its lookup in the order sent, as long as its mean time; red and hatched, the wasted ones (a miss on a search suffix, a timeout, a truncated answer asked again over TCP). The black mark is the whole lookup's mean: A and AAAA go out together, so their segments overlap in time and the stack can pass it.";

/// How to read the latency-against-RTT chart.
pub(super) const RTT_CHART_CAPTION: &str = "One line per transport and mode from its fitted model (mean = c + k × RTT), the measured means as dots; a line's slope is its round trips per call.";

/// The four charts of the baseline run: percentile curves (by IP when it has such runs),
/// mean and p99, phases, and what name resolution adds (from a run with a slow resolver
/// when there is one).
pub(super) fn run_charts(baseline: &Report, others: &[&Report]) -> Vec<sweep::Chart> {
    let runs: Vec<&RunRecord> = baseline.runs.iter().collect();
    let ip_runs: Vec<&RunRecord> = baseline
        .runs
        .iter()
        .filter(|r| r.addr_mode == AddrMode::Ip)
        .collect();
    let curve_runs = if ip_runs.is_empty() {
        runs.clone()
    } else {
        ip_runs
    };
    // The DNS chart is most telling with a slow resolver, when there is a run with one.
    let dns_source = others
        .iter()
        .copied()
        .find(|r| dns_delay_us(r) > 0)
        .unwrap_or(baseline);
    let dns_runs: Vec<&RunRecord> = dns_source.runs.iter().collect();
    // A chart is drawn only when its inputs hold what it shows: no empty frames.
    let with_latency = runs.iter().any(|r| r.latency_us.is_some());
    let with_phases = runs.iter().any(|r| {
        crate::measure::Phase::ALL
            .iter()
            .any(|&p| r.phases_us.get(p).is_some())
    });
    let by_name = dns_runs.iter().any(|r| {
        r.addr_mode != AddrMode::Ip
            && r.latency_us.is_some()
            && dns_runs.iter().any(|x| {
                x.addr_mode == AddrMode::Ip && x.transport == r.transport && x.latency_us.is_some()
            })
    });
    let mut charts = Vec::new();
    if curve_runs.iter().any(|r| !r.percentiles_us.is_empty()) {
        charts.push(("percentiles.svg", svg::percentile_curves(&curve_runs)));
    }
    if with_latency {
        charts.push(("mean-p99.svg", svg::mean_p99(&runs)));
    }
    if with_phases {
        charts.push(("phases.svg", svg::phase_stack(&runs)));
    }
    if by_name {
        charts.push(("dns.svg", svg::dns_overhead(&dns_runs)));
    }
    charts
        .into_iter()
        .map(|(file, svg)| sweep::Chart {
            file: file.to_string(),
            caption: None,
            svg,
        })
        .collect()
}

/// Every sweep's charts, numbered within their kind (`payload.svg`, `payload-2.svg`) so
/// that several sweeps of one kind share a report.
pub(super) fn sweep_charts(sweeps: &[&SweepReport]) -> Vec<sweep::Chart> {
    let mut seen: Vec<bool> = Vec::new();
    sweeps
        .iter()
        .flat_map(|sw| {
            let payload = matches!(sw.axis, SweepAxis::Payload | SweepAxis::Message);
            seen.push(payload);
            let n = seen.iter().filter(|&&p| p == payload).count();
            let suffix = if n == 1 {
                String::new()
            } else {
                format!("-{n}")
            };
            sweep::charts(sw, &suffix)
        })
        .collect()
}
