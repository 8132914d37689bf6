//! The summary and phase tables as text cells ([`Grid`]): the columns a report's runs fill,
//! and which of them fit a terminal's width.

use super::RenderOptions;
use super::units;
use super::units::Unit;
use crate::measure::{Phase, Summary};
use crate::report::{Report, RunRecord};

/// A table as text cells: what every human-readable renderer lays out its own way.
#[derive(Debug, Clone, PartialEq)]
pub struct Grid {
    /// Column headers; every duration column names its unit (`mean µs`, `p99 ms`).
    pub headers: Vec<String>,
    /// One row per run, cells in header order.
    pub rows: Vec<Vec<String>>,
}

/// Columns before this one hold names (left-aligned); the rest numbers (right-aligned).
pub const NAME_COLUMNS: usize = 2;

/// Spaces between two columns of the terminal table.
pub(super) const GAP: usize = 2;

/// One column of the summary table. [`SummaryColumn::ALL`] is the order they stand in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SummaryColumn {
    /// The transport's name.
    Transport,
    /// The address mode.
    Mode,
    /// Measured calls.
    Calls,
    /// Calls that did not end ok.
    Failed,
    /// Verified replies.
    Ok,
    /// Calls past the timeout or cut off.
    Lost,
    /// Replies with the wrong seq or bytes.
    Mism,
    /// Calls failed by an error, of any kind.
    Err,
    /// Connections opened, warm-up included.
    Connects,
    /// Wall time of the measured calls.
    Total,
    /// Calls per second of wall time.
    CallsPerS,
    /// Mean latency of ok calls.
    Mean,
    /// The noise of the mean (`±3%`): how far the rounds' means stray from it, or its 95%
    /// confidence interval, whichever is wider.
    Spread,
    /// Median latency.
    P50,
    /// 90th percentile.
    P90,
    /// 99th percentile.
    P99,
    /// 99.9th percentile.
    P999,
    /// Slowest ok call.
    Max,
    /// Standard deviation of the latency.
    Stddev,
    /// Under `--rate`: the mean latency from each call's actual start (the columns above
    /// read from when it was due).
    StartMean,
    /// Under `--rate`: the median from each call's actual start.
    StartP50,
    /// Under `--rate`: the 99th percentile from each call's actual start.
    StartP99,
    /// Mean over the smallest mean of the report.
    Fastest,
    /// Client CPU time in user mode.
    CpuUser,
    /// Client CPU time in the kernel.
    CpuSys,
    /// An encoded run's request and reply body bytes per call.
    BodyBytes,
    /// An encoded run's bytes on the wire per call, both ways (`TCP_INFO`).
    WireBytes,
    /// An encoded run's client CPU per call, user and system.
    CpuPerCall,
    /// An encoded run's server CPU per request (`-` below 100 clock ticks).
    ServerCpuPerCall,
}

/// Clock ticks a server CPU figure must rest on to be shown: below 100 (1 s of CPU at
/// 10 ms a tick) a tick more or less moves it by more than a per cent.
pub(super) const MIN_TICKS: u64 = 100;

/// A column's value for one run, before the column's unit is known.
pub(super) enum Cell {
    /// Shown as is.
    Text(String),
    /// A duration in µs (`None`: the run has none); the column picks one unit for all.
    Duration(Option<f64>),
}

impl SummaryColumn {
    /// Every column, in the order they stand; `--wide`, markdown and HTML show them all
    /// (the [`SummaryColumn::START`] columns only for a report with a paced run).
    pub const ALL: [SummaryColumn; 29] = [
        SummaryColumn::Transport,
        SummaryColumn::Mode,
        SummaryColumn::Calls,
        SummaryColumn::Failed,
        SummaryColumn::Ok,
        SummaryColumn::Lost,
        SummaryColumn::Mism,
        SummaryColumn::Err,
        SummaryColumn::Connects,
        SummaryColumn::Total,
        SummaryColumn::CallsPerS,
        SummaryColumn::Mean,
        SummaryColumn::Spread,
        SummaryColumn::P50,
        SummaryColumn::P90,
        SummaryColumn::P99,
        SummaryColumn::P999,
        SummaryColumn::Max,
        SummaryColumn::Stddev,
        SummaryColumn::StartMean,
        SummaryColumn::StartP50,
        SummaryColumn::StartP99,
        SummaryColumn::Fastest,
        SummaryColumn::CpuUser,
        SummaryColumn::CpuSys,
        SummaryColumn::BodyBytes,
        SummaryColumn::WireBytes,
        SummaryColumn::CpuPerCall,
        SummaryColumn::ServerCpuPerCall,
    ];

    /// What an encoded call costs: left out of a report without an encoded run.
    pub const ENCODED: [SummaryColumn; 4] = [
        SummaryColumn::BodyBytes,
        SummaryColumn::WireBytes,
        SummaryColumn::CpuPerCall,
        SummaryColumn::ServerCpuPerCall,
    ];

    /// The latency from each call's actual start, beside the corrected figures the other
    /// latency columns show under `--rate`. Left out of a report without a paced run (there
    /// they would repeat the latency columns), and shown only with `--wide`: the compact
    /// table leads with the figure a caller of a paced service waits.
    pub const START: [SummaryColumn; 3] = [
        SummaryColumn::StartMean,
        SummaryColumn::StartP50,
        SummaryColumn::StartP99,
    ];

    /// The default set, most important first: on a terminal too narrow for all of them
    /// (80 columns and three address modes), the last ones give way first. The answer
    /// (mean, p99, failed calls) stays; connects and p50 are the detail.
    pub const COMPACT: [SummaryColumn; 13] = [
        SummaryColumn::Transport,
        SummaryColumn::Mode,
        SummaryColumn::Mean,
        SummaryColumn::Spread,
        SummaryColumn::P99,
        SummaryColumn::Failed,
        SummaryColumn::Calls,
        SummaryColumn::Max,
        SummaryColumn::Fastest,
        SummaryColumn::P50,
        SummaryColumn::Connects,
        SummaryColumn::BodyBytes,
        SummaryColumn::CpuPerCall,
    ];

    /// Columns added beyond the compact set while they fit, in this order; a group is
    /// added whole or not at all (the split of failed calls by kind reads only together).
    const EXTRAS: [&[SummaryColumn]; 8] = [
        &[SummaryColumn::CallsPerS],
        &[SummaryColumn::P90],
        &[SummaryColumn::P999],
        &[SummaryColumn::Stddev],
        &[
            SummaryColumn::Ok,
            SummaryColumn::Lost,
            SummaryColumn::Mism,
            SummaryColumn::Err,
        ],
        &[SummaryColumn::CpuUser, SummaryColumn::CpuSys],
        &[SummaryColumn::Total],
        &[SummaryColumn::WireBytes, SummaryColumn::ServerCpuPerCall],
    ];

    /// The columns a report can show: [`SummaryColumn::ALL`], less the
    /// [`SummaryColumn::START`] columns when no run was paced.
    pub fn shown(report: &Report) -> Vec<SummaryColumn> {
        let paced = report.paced();
        let encoded = report.runs.iter().any(|r| r.encoding.is_some());
        SummaryColumn::ALL
            .into_iter()
            .filter(|c| paced || !SummaryColumn::START.contains(c))
            .filter(|c| encoded || !SummaryColumn::ENCODED.contains(c))
            .collect()
    }

    /// The header without its unit.
    pub fn name(self) -> &'static str {
        match self {
            SummaryColumn::Transport => "transport",
            SummaryColumn::Mode => "mode",
            SummaryColumn::Calls => "calls",
            SummaryColumn::Failed => "failed",
            SummaryColumn::Ok => "ok",
            SummaryColumn::Lost => "lost",
            SummaryColumn::Mism => "mism",
            SummaryColumn::Err => "err",
            SummaryColumn::Connects => "connects",
            SummaryColumn::Total => "total",
            SummaryColumn::CallsPerS => "calls/s",
            SummaryColumn::Mean => "mean",
            SummaryColumn::Spread => "±",
            SummaryColumn::P50 => "p50",
            SummaryColumn::P90 => "p90",
            SummaryColumn::P99 => "p99",
            SummaryColumn::P999 => "p99.9",
            SummaryColumn::Max => "max",
            SummaryColumn::Stddev => "stddev",
            SummaryColumn::StartMean => "start mean",
            SummaryColumn::StartP50 => "start p50",
            SummaryColumn::StartP99 => "start p99",
            SummaryColumn::Fastest => "× fastest",
            SummaryColumn::CpuUser => "cpu user",
            SummaryColumn::CpuSys => "cpu sys",
            SummaryColumn::BodyBytes => "B/call",
            SummaryColumn::WireBytes => "wire B/call",
            SummaryColumn::CpuPerCall => "cpu/call",
            SummaryColumn::ServerCpuPerCall => "server cpu/call",
        }
    }

    /// The column's value for run `r`; `fastest` is the smallest mean of the report. The
    /// latency columns read [`RunRecord::latency_shown`]: from when each call was due under
    /// `--rate`, from its start otherwise.
    fn cell(self, r: &RunRecord, fastest: Option<f64>) -> Cell {
        let lat = |f: fn(&Summary) -> f64| Cell::Duration(r.latency_shown().map(f));
        let start = |f: fn(&Summary) -> f64| Cell::Duration(r.latency_us.as_ref().map(f));
        let count = |n: u64| Cell::Text(n.to_string());
        match self {
            SummaryColumn::Transport => Cell::Text(r.transport.to_string()),
            SummaryColumn::Mode => Cell::Text(r.mode_label()),
            SummaryColumn::Calls => count(r.calls),
            SummaryColumn::Failed => count(r.failed()),
            SummaryColumn::Ok => count(r.ok),
            SummaryColumn::Lost => count(r.lost),
            SummaryColumn::Mism => count(r.mismatched),
            SummaryColumn::Err => count(r.error_total()),
            SummaryColumn::Connects => count(r.connects),
            SummaryColumn::Total => Cell::Duration(Some(r.elapsed_s * 1e6)),
            // A row with no ok call has no rate to show, as it has no latency: its calls
            // ended as fast as they failed.
            SummaryColumn::CallsPerS if r.ok == 0 => Cell::Text("-".into()),
            SummaryColumn::CallsPerS => Cell::Text(format!("{:.0}", r.calls_per_s)),
            SummaryColumn::Mean => lat(|s| s.mean),
            SummaryColumn::Spread => Cell::Text(match r.spread {
                Some(s) if r.latency_shown().is_some() => format!("±{:.0}%", s * 100.0),
                _ => "-".into(),
            }),
            SummaryColumn::P50 => lat(|s| s.p50),
            SummaryColumn::P90 => lat(|s| s.p90),
            SummaryColumn::P99 => lat(|s| s.p99),
            SummaryColumn::P999 => lat(|s| s.p999),
            SummaryColumn::Max => lat(|s| s.max),
            SummaryColumn::Stddev => lat(|s| s.stddev),
            SummaryColumn::StartMean => start(|s| s.mean),
            SummaryColumn::StartP50 => start(|s| s.p50),
            SummaryColumn::StartP99 => start(|s| s.p99),
            SummaryColumn::Fastest => Cell::Text(match (r.latency_shown(), fastest) {
                (Some(l), Some(f)) if f > 0.0 => units::ratio(l.mean / f),
                _ => "-".into(),
            }),
            SummaryColumn::CpuUser => Cell::Duration(Some(r.cpu_user_s * 1e6)),
            SummaryColumn::CpuSys => Cell::Duration(Some(r.cpu_sys_s * 1e6)),
            SummaryColumn::BodyBytes => Cell::Text(r.bytes_per_call.map_or("-".into(), |b| {
                format!("{:.0}+{:.0}", b.request_body, b.reply_body)
            })),
            SummaryColumn::WireBytes => Cell::Text(
                r.bytes_per_call
                    .and_then(|b| Some(format!("{:.0}+{:.0}", b.wire_sent?, b.wire_received?)))
                    .unwrap_or_else(|| "-".into()),
            ),
            SummaryColumn::CpuPerCall => {
                Cell::Duration(r.cpu_us_per_call.map(|c| c.client_user + c.client_system))
            }
            SummaryColumn::ServerCpuPerCall => Cell::Duration(
                r.cpu_us_per_call
                    .filter(|c| c.server_ticks.is_some_and(|t| t >= MIN_TICKS))
                    .and_then(|c| Some(c.server_user? + c.server_system?)),
            ),
        }
    }
}

/// A column of text built from cells: its header names the unit its durations are in.
pub(super) fn text_column(name: &str, cells: Vec<Cell>) -> (String, Vec<String>) {
    let durations: Vec<f64> = cells
        .iter()
        .filter_map(|c| match c {
            Cell::Duration(v) => *v,
            Cell::Text(_) => None,
        })
        .collect();
    let is_duration = cells.iter().any(|c| matches!(c, Cell::Duration(_)));
    let unit = Unit::for_column(&durations);
    let header = if is_duration {
        format!("{name} {}", unit.label())
    } else {
        name.to_string()
    };
    let texts = cells
        .into_iter()
        .map(|c| match c {
            Cell::Text(t) => t,
            Cell::Duration(Some(us)) => unit.format(us),
            Cell::Duration(None) => "-".into(),
        })
        .collect();
    (header, texts)
}

/// Every candidate column of a table, with the rules for which of them to show.
pub(super) struct Candidates {
    /// (header, cells) of each column, in the order they stand.
    columns: Vec<(String, Vec<String>)>,
    /// Indices into `columns` of the default set, most important first.
    compact: Vec<usize>,
    /// Groups of indices added while they fit, in order.
    extras: Vec<Vec<usize>>,
}

impl Candidates {
    /// Candidates whose columns stand for `keys` (one each, in order), with the default
    /// set and the extra groups named by key; a key not among `keys` (a column this table
    /// leaves out) is skipped, and a group left empty by that is dropped.
    pub(super) fn keyed<K: PartialEq>(
        keys: &[K],
        columns: Vec<(String, Vec<String>)>,
        compact: &[K],
        extras: &[&[K]],
    ) -> Candidates {
        let at = |group: &[K]| -> Vec<usize> {
            group
                .iter()
                .filter_map(|k| keys.iter().position(|x| x == k))
                .collect()
        };
        Candidates {
            columns,
            compact: at(compact),
            extras: extras
                .iter()
                .map(|g| at(g))
                .filter(|g| !g.is_empty())
                .collect(),
        }
    }

    /// The columns to show: all of them when `wide`; else the compact set, the least
    /// important dropped until it fits `width`, then each extra group that still fits.
    /// The two name columns always stay, so a width below theirs cannot be met.
    pub(super) fn choose(self, options: &RenderOptions) -> Grid {
        let widths: Vec<usize> = self
            .columns
            .iter()
            .map(|(h, cells)| {
                cells
                    .iter()
                    .chain(std::iter::once(h))
                    .map(|c| c.chars().count())
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        let span = |chosen: &[usize]| {
            chosen.iter().map(|&i| widths[i]).sum::<usize>() + GAP * chosen.len().saturating_sub(1)
        };
        let mut chosen: Vec<usize> = if options.wide {
            (0..self.columns.len()).collect()
        } else {
            let mut keep = self.compact.clone();
            while keep.len() > NAME_COLUMNS && span(&keep) > options.width {
                keep.pop();
            }
            for group in &self.extras {
                let with: Vec<usize> = keep.iter().chain(group).copied().collect();
                if span(&with) <= options.width {
                    keep = with;
                }
            }
            keep
        };
        chosen.sort_unstable();
        let mut columns: Vec<Option<(String, Vec<String>)>> =
            self.columns.into_iter().map(Some).collect();
        let picked: Vec<(String, Vec<String>)> =
            chosen.iter().filter_map(|&i| columns[i].take()).collect();
        let rows = (0..picked.first().map_or(0, |(_, c)| c.len()))
            .map(|row| picked.iter().map(|(_, c)| c[row].clone()).collect())
            .collect();
        Grid {
            headers: picked.into_iter().map(|(h, _)| h).collect(),
            rows,
        }
    }
}

/// The summary table: every column with `options.wide`, else what fits `options.width`.
pub fn summary_grid(report: &Report, options: &RenderOptions) -> Grid {
    let fastest = report.fastest_mean();
    let shown = SummaryColumn::shown(report);
    let columns = shown
        .iter()
        .map(|col| {
            let cells = report.runs.iter().map(|r| col.cell(r, fastest)).collect();
            text_column(col.name(), cells)
        })
        .collect();
    Candidates::keyed(
        &shown,
        columns,
        &SummaryColumn::COMPACT,
        &SummaryColumn::EXTRAS,
    )
    .choose(options)
}

/// A statistic of a [`Summary`].
pub(super) type Stat = fn(&Summary) -> f64;

/// The statistics shown per phase, by name: the mean (where the time of a mean call goes)
/// and the p99 (where the tail comes from).
pub(super) const PHASE_STATS: [(&str, Stat); 2] = [("mean", |s| s.mean), ("p99", |s| s.p99)];

/// The phase table: per phase any run saw, its mean (the default set) and its p99 (added
/// while it fits); a phase no run has is left out rather than shown as a column of dashes.
pub fn phase_grid(report: &Report, options: &RenderOptions) -> Grid {
    let names =
        |f: fn(&RunRecord) -> String| report.runs.iter().map(|r| Cell::Text(f(r))).collect();
    let mut columns = vec![
        text_column("transport", names(|r| r.transport.to_string())),
        text_column("mode", names(|r| r.mode_label())),
    ];
    let mut compact = vec![0, 1];
    let mut extras = Vec::new();
    for phase in Phase::ALL {
        if report.runs.iter().all(|r| r.phases_us.get(phase).is_none()) {
            continue;
        }
        let name = phase.name().replace('_', " ");
        for (i, (stat, get)) in PHASE_STATS.into_iter().enumerate() {
            let cells = report
                .runs
                .iter()
                .map(|r| Cell::Duration(r.phases_us.get(phase).map(get)))
                .collect();
            // The mean is the default set and bears the phase's bare name (the heading
            // says these are means); the other statistics are added while they fit.
            let label = if i == 0 {
                compact.push(columns.len());
                name.clone()
            } else {
                extras.push(vec![columns.len()]);
                format!("{name} {stat}")
            };
            columns.push(text_column(&label, cells));
        }
    }
    Candidates {
        columns,
        compact,
        extras,
    }
    .choose(options)
}
