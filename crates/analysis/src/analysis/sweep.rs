//! What sweep results (`rpcbench sweep --out`) say: the curves a chart is drawn through,
//! the knee of each, the capacity table and the findings about them, as values. The
//! charts (`site::sweep`), the table and the words (`render::findings`) read these, so
//! they read the same numbers.

use crate::report::sweep::{MIN_ACHIEVED, Series, SloRecord, Step, SweepAxis, SweepReport};
use crate::resolve::AddrMode;
use crate::transport::TransportKind;

/// The knee of a latency curve is the last step before p99 grows more than this many
/// times from one step to the next: queueing has started, and each further step costs
/// more latency than the one before. Twice is far above the step-to-step noise of a p99
/// on a quiet host and well below the jump of a saturated server.
pub const KNEE_P99_GROWTH: f64 = 2.0;

/// One row of the capacity table: a series of a rate sweep and what it sustained.
#[derive(Debug, Clone, PartialEq)]
pub struct CapacityRow {
    pub transport: TransportKind,
    pub mode: AddrMode,
    /// The objective as the sweep stated it, e.g. `p99 <= 2.00 ms`; `None` for a sweep
    /// without one.
    pub objective: Option<String>,
    /// The highest offered rate that met it.
    pub capacity_per_s: Option<f64>,
    /// Every step in the order run, retries of the search included.
    pub steps: Vec<CapacityStep>,
}

/// One step of a capacity search: what it offered, what it achieved, and its verdict.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CapacityStep {
    /// Calls per second offered; `None` for a closed (back-to-back) step.
    pub offered_per_s: Option<f64>,
    pub achieved_per_s: f64,
    /// Whether it met the objective; `None` without one.
    pub meets_slo: Option<bool>,
}

/// A series' name in a chart or a sentence: the transport, and the mode when it is not
/// `ip`.
pub fn label(s: &Series) -> String {
    let name = match s.encoding {
        Some(encoding) => format!("{} {encoding}", s.transport),
        None => s.transport.to_string(),
    };
    match s.addr_mode {
        AddrMode::Ip => name,
        mode => format!("{name} ({mode})"),
    }
}

/// The steps a latency-throughput curve is drawn through: at offered rates, in increasing
/// order, a rate run twice (a retry of the search) by its later run; a series without
/// offered rates (a concurrency sweep), every step in the order run.
pub fn curve_steps(series: &Series) -> Vec<&Step> {
    let mut paced: Vec<&Step> = series
        .steps
        .iter()
        .filter(|s| s.offered_per_s.is_some())
        .collect();
    if paced.is_empty() {
        return series.steps.iter().collect();
    }
    // A stable sort keeps run order among equal rates; the later run then wins.
    let offered = |s: &Step| s.offered_per_s.unwrap_or(0.0);
    paced.sort_by(|a, b| offered(a).total_cmp(&offered(b)));
    let mut kept: Vec<&Step> = Vec::new();
    for s in paced {
        match kept.last_mut() {
            Some(last) if last.offered_per_s == s.offered_per_s => *last = s,
            _ => kept.push(s),
        }
    }
    kept
}

/// The p50 and p99 a chart draws for a step: from when each call was due at an offered
/// rate, from its start otherwise (what the step tables show).
pub fn p50_p99(s: &Step) -> Option<(f64, f64)> {
    s.run.latency_shown().map(|l| (l.p50, l.p99))
}

/// The index of the knee among `steps`: the last step before p99 grows more than
/// [`KNEE_P99_GROWTH`] times, or before a step achieves less than [`MIN_ACHIEVED`] of
/// its offered rate, whichever comes first; `None` when neither happens in the range.
pub fn knee(steps: &[&Step]) -> Option<usize> {
    steps.windows(2).position(|w| {
        let grew = match (p50_p99(w[0]), p50_p99(w[1])) {
            (Some((_, before)), Some((_, after))) => after > KNEE_P99_GROWTH * before,
            _ => false,
        };
        let fell_behind = w[1]
            .offered_per_s
            .is_some_and(|o| w[1].achieved_per_s < MIN_ACHIEVED * o);
        grew || fell_behind
    })
}

/// The capacity table's rows: every series of every sweep over offered rates.
pub fn capacity_rows(sweeps: &[&SweepReport]) -> Vec<CapacityRow> {
    sweeps
        .iter()
        .filter(|sw| sw.axis.offers_rates())
        .flat_map(|sw| {
            sw.series.iter().map(|s| CapacityRow {
                transport: s.transport,
                mode: s.addr_mode,
                objective: sw.slo.as_ref().map(|s| s.text.clone()),
                capacity_per_s: s.capacity_per_s,
                steps: s
                    .steps
                    .iter()
                    .map(|st| CapacityStep {
                        offered_per_s: st.offered_per_s,
                        achieved_per_s: st.achieved_per_s,
                        meets_slo: st.meets_slo,
                    })
                    .collect(),
            })
        })
        .collect()
}

/// A series as the findings name it: its transport and address mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SeriesName {
    pub transport: TransportKind,
    pub mode: AddrMode,
}

impl SeriesName {
    fn of(s: &Series) -> SeriesName {
        SeriesName {
            transport: s.transport,
            mode: s.addr_mode,
        }
    }
}

/// Where a step of a sweep stood: at an offered rate, or at a payload size.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum StepAt {
    /// Calls per second offered.
    Rate(f64),
    /// Request bytes.
    Payload(u32),
}

/// A step of a sweep that failed calls.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FailedStep {
    pub series: SeriesName,
    pub at: StepAt,
    pub failed: u64,
    pub calls: u64,
}

/// A series that met an objective at no rate tried.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Missed {
    pub series: SeriesName,
    /// The lowest rate offered, calls/s; `None` when no step had one (never judged).
    pub lowest_tried: Option<f64>,
}

/// One series across a payload sweep: goodput and p99 at the first and the last size.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PayloadSpan {
    pub series: SeriesName,
    /// Goodput out, MB/s, at the smallest and the largest payload.
    pub goodput_mb_s: (f64, f64),
    /// p99, µs, at the smallest and the largest payload.
    pub p99_us: (f64, f64),
}

/// What the sweeps say: lost calls, capacity at an objective, knees, payload sizes.
#[derive(Debug, Clone, PartialEq)]
pub enum SweepFinding {
    /// Calls over every step of every sweep: none lost (`failed` empty), or the steps
    /// that failed.
    Lost {
        calls: u64,
        steps: usize,
        failed: Vec<FailedStep>,
    },
    /// What each series sustained at the objective, highest first; the series that met
    /// it at no rate tried; and those that met it at the highest rate of a list, whose
    /// capacity is then only a floor.
    Capacity {
        objective: String,
        met: Vec<(SeriesName, f64)>,
        missed: Vec<Missed>,
        at_top: Vec<SeriesName>,
    },
    /// Each curve's knee ([`KNEE_P99_GROWTH`]): the series, its achieved rate and p99 there.
    Knees {
        growth: f64,
        knees: Vec<(SeriesName, f64, f64)>,
    },
    /// What payload size does: from the smallest to the largest payload.
    Payload {
        bytes: (u32, u32),
        series: Vec<PayloadSpan>,
    },
}

/// What the sweeps say: capacity at each objective, where the knees are, what payload
/// size does to latency and goodput, and whether any call of any step was lost.
pub fn findings(sweeps: &[&SweepReport]) -> Vec<SweepFinding> {
    let mut out = Vec::new();
    out.extend(lost(sweeps));
    for sw in sweeps {
        if sw.axis == SweepAxis::Payload {
            out.extend(payload(sw));
            continue;
        }
        if sw.axis == SweepAxis::Message {
            // A message's size is its body's, which the table and chart show.
            continue;
        }
        if let Some(slo) = &sw.slo {
            out.extend(capacity(sw, slo));
        }
        out.extend(knees(sw));
    }
    out
}

/// What each series of a rate sweep sustained at its objective.
fn capacity(sw: &SweepReport, slo: &SloRecord) -> Option<SweepFinding> {
    if !sw.axis.offers_rates() {
        return None;
    }
    let mut met: Vec<(&Series, f64)> = sw
        .series
        .iter()
        .filter_map(|s| Some((s, s.capacity_per_s?)))
        .collect();
    met.sort_by(|a, b| b.1.total_cmp(&a.1));
    let missed = sw
        .series
        .iter()
        .filter(|s| s.capacity_per_s.is_none())
        .map(|s| {
            let lowest = s
                .steps
                .iter()
                .filter_map(|st| st.offered_per_s)
                .fold(f64::INFINITY, f64::min);
            Missed {
                series: SeriesName::of(s),
                lowest_tried: lowest.is_finite().then_some(lowest),
            }
        })
        .collect();
    // On a list of rates, a capacity at the highest one tried is only a floor.
    let at_top = if sw.axis == SweepAxis::Rate {
        met.iter()
            .filter(|(s, c)| {
                s.steps
                    .iter()
                    .filter_map(|st| st.offered_per_s)
                    .all(|o| o <= *c)
            })
            .map(|(s, _)| SeriesName::of(s))
            .collect()
    } else {
        Vec::new()
    };
    Some(SweepFinding::Capacity {
        objective: slo.text.clone(),
        met: met.iter().map(|(s, c)| (SeriesName::of(s), *c)).collect(),
        missed,
        at_top,
    })
}

/// The lost-call check over every step of every sweep, as the run findings make it.
fn lost(sweeps: &[&SweepReport]) -> Option<SweepFinding> {
    let steps: Vec<(&Series, &Step)> = sweeps
        .iter()
        .flat_map(|sw| &sw.series)
        .flat_map(|s| s.steps.iter().map(move |st| (s, st)))
        .collect();
    if steps.is_empty() {
        return None;
    }
    Some(SweepFinding::Lost {
        calls: steps.iter().map(|(_, st)| st.run.calls).sum(),
        steps: steps.len(),
        failed: steps
            .iter()
            .filter(|(_, st)| st.run.failed() > 0)
            .map(|(s, st)| FailedStep {
                series: SeriesName::of(s),
                at: st
                    .offered_per_s
                    .map_or(StepAt::Payload(st.payload_bytes), StepAt::Rate),
                failed: st.run.failed(),
                calls: st.run.calls,
            })
            .collect(),
    })
}

/// Where each curve's knee is.
fn knees(sw: &SweepReport) -> Option<SweepFinding> {
    let knees: Vec<(SeriesName, f64, f64)> = sw
        .series
        .iter()
        .filter_map(|series| {
            let steps = curve_steps(series);
            let k = steps[knee(&steps)?];
            let (_, p99) = p50_p99(k)?;
            Some((SeriesName::of(series), k.achieved_per_s, p99))
        })
        .collect();
    (!knees.is_empty()).then_some(SweepFinding::Knees {
        growth: KNEE_P99_GROWTH,
        knees,
    })
}

/// Goodput and p99 from the smallest payload to the largest, per series.
fn payload(sw: &SweepReport) -> Option<SweepFinding> {
    let series: Vec<PayloadSpan> = sw
        .series
        .iter()
        .filter_map(|s| {
            let (first, last) = (s.steps.first()?, s.steps.last()?);
            let (a, b) = (first.run.latency_us?, last.run.latency_us?);
            Some(PayloadSpan {
                series: SeriesName::of(s),
                goodput_mb_s: (first.goodput_out_mb_s, last.goodput_out_mb_s),
                p99_us: (a.p99, b.p99),
            })
        })
        .collect();
    let steps = &sw.series.first()?.steps;
    let bytes = (steps.first()?.payload_bytes, steps.last()?.payload_bytes);
    (!series.is_empty()).then_some(SweepFinding::Payload { bytes, series })
}
