//! Renderers: one file per output format, each writing a [`Report`] to any `io::Write`.
//! The library never prints by itself.
//!
//! The terminal table, markdown and the HTML report all take their cells from
//! [`summary_grid`] and [`phase_grid`], so they carry the same numbers by construction;
//! the terminal shows the columns that fit its width ([`RenderOptions`]), the others all of
//! them. CSV (`csv.rs`) is one tidy table in fixed units, for programs.
//!
//! Layer 6 of the map in `lib.rs` (render): uses the analysis, the record and the layers below; never an app or the CLI.

/// One tidy table in fixed units.
mod csv;
pub mod dns;
/// The words of the findings.
pub mod findings;
/// The whole report.
mod json;
/// Every column, for pasting.
mod markdown;
/// The round-trip model's tables (fits, what-if).
pub mod model;
/// A sweep's steps, one table per transport.
pub mod sweep;
/// As wide as the terminal.
mod table;
/// The truth checks of `rpcbench report` in words.
pub mod truth;
/// Units live below every layer ([`crate::units`]); renderers reach them here too.
pub use rpcbench_base::units;
pub use table::incoherent_line;

pub use csv::CSV_HEADERS;
pub use markdown::write_table as write_markdown_table;

use crate::measure::{Phase, Summary};
use crate::report::{Figure, PhysicsCheck, Report, Rule, RunRecord};
use std::io::{self, Write};
use units::Unit;

/// An output format for the results.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// Aligned tables for a terminal, as wide as it is, then the findings.
    Table,
    /// The full report as JSON.
    Json,
    /// One tidy CSV table: a row per transport and address mode, in fixed units.
    Csv,
    /// GitHub-flavoured markdown tables, every column.
    Markdown,
}

/// How wide the terminal table may be, and whether it shows every column anyway.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RenderOptions {
    /// The widest line, in columns: no line of the table output is longer.
    pub width: usize,
    /// Every column whatever the width (`--wide`), as markdown and HTML always show.
    pub wide: bool,
}

/// Width when neither the terminal nor `COLUMNS` says: wider than the 80 columns of old
/// terminals, narrower than any window a benchmark is watched in today.
pub const DEFAULT_WIDTH: usize = 100;

impl RenderOptions {
    /// Every column, no width limit: for markdown and HTML, and for tests.
    pub const WIDE: RenderOptions = RenderOptions {
        width: usize::MAX,
        wide: true,
    };

    /// The options for stdout: its terminal's width, else `COLUMNS`, else
    /// [`DEFAULT_WIDTH`].
    pub fn terminal(wide: bool) -> RenderOptions {
        RenderOptions {
            width: terminal_width(),
            wide,
        }
    }
}

/// The width of the terminal on stdout, else the `COLUMNS` environment variable (which a
/// shell sets for a pipe it knows the width of), else [`DEFAULT_WIDTH`].
pub fn terminal_width() -> usize {
    console::Term::stdout()
        .size_checked()
        .map(|(_rows, cols)| usize::from(cols))
        .or_else(|| std::env::var("COLUMNS").ok()?.trim().parse().ok())
        .filter(|&w| w > 0)
        .unwrap_or(DEFAULT_WIDTH)
}

/// Writes `report` in `format`; only the table reads `options`.
pub fn render(
    report: &Report,
    format: Format,
    options: &RenderOptions,
    out: &mut dyn Write,
) -> io::Result<()> {
    match format {
        Format::Table => table::write(report, options, out),
        Format::Json => json::write(report, out),
        Format::Csv => csv::write(report, out),
        Format::Markdown => markdown::write(report, out),
    }
}

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
const GAP: usize = 2;

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
const MIN_TICKS: u64 = 100;

/// A column's value for one run, before the column's unit is known.
enum Cell {
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
fn text_column(name: &str, cells: Vec<Cell>) -> (String, Vec<String>) {
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
struct Candidates {
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
    fn keyed<K: PartialEq>(
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
    fn choose(self, options: &RenderOptions) -> Grid {
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
type Stat = fn(&Summary) -> f64;

/// The statistics shown per phase, by name: the mean (where the time of a mean call goes)
/// and the p99 (where the tail comes from).
const PHASE_STATS: [(&str, Stat); 2] = [("mean", |s| s.mean), ("p99", |s| s.p99)];

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

/// The line that says which latency the summary table shows, for a report with a paced
/// run; `None` without one, where there is only one latency.
pub fn latency_note(report: &Report, options: &RenderOptions) -> Option<String> {
    let where_start = if options.wide {
        "the start columns time it from each call's actual start"
    } else {
        "--wide also shows it from each call's actual start"
    };
    report.paced().then(|| {
        format!(
            "latency under --rate: from when each call was due (corrected for coordinated omission, as wrk2 does); {where_start}"
        )
    })
}

/// The runs whose workers were idle much of the time (fewer calls in flight than
/// [`crate::report::CONCURRENCY_SHORTFALL`] of them), one line per cause, each transport
/// named once: their latency is then that of a less loaded system than `-c` suggests.
/// Left out: a run with no ok call, which has no figures for its concurrency to explain
/// (its failures are the story), and a run of one worker, whose calls never share the
/// machine with another call of its own whatever it does between them.
pub fn concurrency_lines(report: &Report) -> Vec<String> {
    let c = &report.config;
    let mut causes: Vec<(Idle, Vec<&RunRecord>)> = Vec::new();
    for r in report
        .runs
        .iter()
        .filter(|r| r.ok > 0 && r.workers > 1 && r.concurrency_fell_short())
    {
        let cause = Idle::of(r, c.rate_per_s);
        match causes.iter_mut().find(|(k, _)| *k == cause) {
            Some((_, runs)) => runs.push(r),
            None => causes.push((cause, vec![r])),
        }
    }
    causes
        .into_iter()
        .map(|(cause, runs)| {
            // Workers the run was asked for (-c), or its own comparison added (the
            // multiplexing rows of a default run): only the first can be given more calls.
            let asked = runs.iter().all(|r| r.workers == c.concurrency);
            concurrency_line(cause, &runs, c.rate_per_s, c.duration_s.is_some(), asked)
        })
        .collect()
}

/// The line on what the kernel saw of the run's TCP connections (`TCP_INFO`): the path
/// RTT estimate, and retransmits per call where there were any (with the connections
/// that retried their SYN), or that there were none. `None` when no run was probed.
pub fn tcp_info_line(report: &Report) -> Option<String> {
    let probed: Vec<&crate::report::RunRecord> = report
        .runs
        .iter()
        .filter(|r| r.tcp_info.is_some())
        .collect();
    if probed.is_empty() {
        return None;
    }
    let mut parts = Vec::new();
    if let Some(e) = &report.path_rtt_estimate {
        parts.push(format!(
            "path RTT estimate {} ({})",
            units::duration(e.us),
            match e.source {
                crate::tcpinfo::RttSource::TcpInfo => "least kernel RTT sample",
                crate::tcpinfo::RttSource::PersistentMin => "least persistent call",
            }
        ));
    }
    let retrans: Vec<String> = probed
        .iter()
        .filter_map(|r| {
            let t = r.tcp_info.as_ref()?;
            (t.retransmits > 0).then(|| {
                let syn = if t.syn_retransmitting_connections > 0 {
                    format!(
                        ", {} of {} connections retried their SYN",
                        t.syn_retransmitting_connections, t.connections_sampled
                    )
                } else {
                    String::new()
                };
                format!(
                    "{} ({}) {:.3}{syn}",
                    r.transport,
                    r.mode_label(),
                    t.retransmits_per_call
                )
            })
        })
        .collect();
    let connections: u64 = probed
        .iter()
        .filter_map(|r| r.tcp_info.as_ref())
        .map(|t| t.connections_sampled)
        .sum();
    if retrans.is_empty() {
        parts.push(format!("no TCP retransmits over {connections} connections"));
    } else {
        parts.push(format!("TCP retransmits per call: {}", retrans.join("; ")));
    }
    Some(format!(
        "TCP_INFO (read as each connection closed): {}",
        parts.join("; ")
    ))
}

/// The line naming the runs that used the event-loop engine, with its threads: said only
/// when some did (high `-c`), since a thread per worker is what anyone would assume. Said
/// once for all of them: the transports that shared a (threads, connections) pair, each
/// named once whatever its address modes (`1 thread for 16 connections: h2-mux, h2`).
pub fn engine_line(report: &Report) -> Option<String> {
    use crate::runner::Engine;
    let mut groups: Vec<((usize, usize), Vec<&str>)> = Vec::new();
    for r in report
        .runs
        .iter()
        .filter(|r| r.engine == Some(Engine::Evloop))
    {
        let key = (r.threads, r.workers);
        let name = r.transport.name();
        match groups.iter_mut().find(|(k, _)| *k == key) {
            Some((_, names)) if !names.contains(&name) => names.push(name),
            Some(_) => {}
            None => groups.push((key, vec![name])),
        }
    }
    (!groups.is_empty()).then(|| {
        let parts: Vec<String> = groups
            .iter()
            .map(|((threads, workers), names)| {
                format!(
                    "{threads} thread{} for {workers} connections: {}",
                    if *threads == 1 { "" } else { "s" },
                    names.join(", ")
                )
            })
            .collect();
        format!(
            "event-loop engine (a few threads, many connections each; --engine blocking for a thread per worker): {}",
            parts.join("; ")
        )
    })
}

/// Why a run's workers sat idle: what one line of [`concurrency_lines`] is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Idle {
    /// Under `--rate`, the rate itself asks for fewer calls in flight than there are
    /// workers (Little's law: rate × latency); the workers number is kept with it.
    Pacing { workers: usize },
    /// The workers waited at the start or the end of a short run.
    ShortRun { workers: usize },
}

impl Idle {
    /// The cause of run `r`'s shortfall, paced at `rate` or back to back.
    fn of(r: &RunRecord, rate: Option<f64>) -> Idle {
        let workers = r.workers;
        match (rate, r.latency_us.map(|l| l.mean / 1e6)) {
            (Some(rate), Some(mean_s))
                if rate * mean_s < crate::report::CONCURRENCY_SHORTFALL * workers as f64 =>
            {
                Idle::Pacing { workers }
            }
            _ => Idle::ShortRun { workers },
        }
    }
}

/// The line for the runs idle for one cause: `calls in flight below the 16 workers, on
/// average: h2-mux 10.7-13.9, h2 13.9; …`, each transport once with the range over its
/// modes. Under pacing it says what rate would load every worker (workers over the
/// smallest mean: enough for each of these runs); otherwise that the workers sat idle as
/// short runs start and stop, and, when the user asked for these workers (`asked`), what
/// fills them.
fn concurrency_line(
    cause: Idle,
    runs: &[&RunRecord],
    rate: Option<f64>,
    timed: bool,
    asked: bool,
) -> String {
    let mut by_transport: Vec<(&str, f64, f64)> = Vec::new();
    for r in runs {
        let name = r.transport.name();
        let x = r.concurrency_achieved;
        match by_transport.iter_mut().find(|(n, _, _)| *n == name) {
            Some((_, lo, hi)) => {
                *lo = lo.min(x);
                *hi = hi.max(x);
            }
            None => by_transport.push((name, x, x)),
        }
    }
    let in_flight: Vec<String> = by_transport
        .iter()
        .map(|&(name, lo, hi)| {
            let (lo, hi) = (units::significant(lo, 2), units::significant(hi, 2));
            if lo == hi {
                format!("{name} {lo}")
            } else {
                format!("{name} {lo}-{hi}")
            }
        })
        .collect();
    let (workers, why) = match cause {
        Idle::Pacing { workers } => {
            let fastest_s = runs
                .iter()
                .filter_map(|r| r.latency_us.map(|l| l.mean / 1e6))
                .fold(f64::INFINITY, f64::min);
            (
                workers,
                format!(
                    "the workers wait for their due calls (pacing): {} calls/s keep only rate × latency of them busy; about {} calls/s would load all {workers}",
                    units::rate(rate.unwrap_or_default()),
                    units::rate(workers as f64 / fastest_s)
                ),
            )
        }
        Idle::ShortRun { workers } => {
            let shortest = runs
                .iter()
                .map(|r| r.elapsed_s)
                .fold(f64::INFINITY, f64::min);
            // Workers given equal shares of -n finish at different times; with
            // --duration none waits for another.
            let fill = match (asked, timed) {
                (false, _) => "",
                (true, false) => "; more calls (-n) or --duration fill them",
                (true, true) => "; a longer --duration fills them",
            };
            (
                workers,
                format!(
                    "workers idle while runs this short start and stop (the shortest {}){fill}",
                    units::duration(shortest * 1e6)
                ),
            )
        }
    };
    format!(
        "calls in flight below the {workers} workers, on average: {}; {why}",
        in_flight.join(", ")
    )
}

/// A physics rule ([`crate::physics`]) as a sentence.
pub fn rule_sentence(rule: Rule) -> &'static str {
    match rule {
        Rule::ModesAgree => {
            "a persistent connection's mean does not depend on the address mode (its lookup is in the warm-up)"
        }
        Rule::SameHostNotSlower => "a same-host socket is no slower than TCP on the same host",
        Rule::KeptNotSlowerThanFresh => {
            "a kept connection is no slower than a new connection per call"
        }
        Rule::IpNotSlowerThanLookup => {
            "a fresh call by IP is no slower than one that looks the name up (uncached)"
        }
        Rule::PlainNotSlowerThanTls => {
            "a fresh call in plain is no slower than one with a TLS handshake"
        }
    }
}

/// A figure of a physics check: `tcp (ip) 5.3 µs ± 3%` (the noise at least its floor).
pub fn figure_text(f: &Figure) -> String {
    let noise = f.spread.unwrap_or(0.0).max(crate::physics::MIN_NOISE) * 100.0;
    format!(
        "{} ({}) {} ± {noise:.0}%",
        f.transport,
        f.mode,
        units::duration(f.mean_us)
    )
}

/// A physics check in one line: the rule, both figures and the verdict.
pub fn physics_line(c: &PhysicsCheck) -> String {
    let verdict = if c.pass {
        "holds"
    } else {
        "broken beyond the noise"
    };
    format!(
        "{}: {} against {}: {verdict}",
        rule_sentence(c.rule),
        figure_text(&c.faster),
        figure_text(&c.slower)
    )
}

/// What a broken physics check likely means, after its line.
pub const LIKELY_CAUSES: &str = "likely the placement (a thread woken on the other CPU: see --placement), the CPU's clock changing speed, or a noisy neighbour; run again, or with more --rounds";

/// How many seqs of each kind the problem list shows.
const SHOWN_SEQS: usize = 20;

/// Plain-text lines for every run that lost, mismatched or failed calls: the counts and
/// the first seqs, the way seed 004 diffed what it sent against what came back.
pub fn problem_lines(report: &Report) -> Vec<String> {
    report
        .runs
        .iter()
        .filter(|r| {
            r.failed() > 0
                || r.duplicated > 0
                || r.late > 0
                || r.late_replies > 0
                || r.reordered > 0
        })
        .map(problem_line)
        .collect()
}

/// One run's failures: counts by kind, the first seqs of each, lateness, the DNS error.
fn problem_line(r: &RunRecord) -> String {
    let seqs = |v: &[u64]| {
        let shown: Vec<String> = v.iter().take(SHOWN_SEQS).map(u64::to_string).collect();
        let more = if v.len() > SHOWN_SEQS { " …" } else { "" };
        format!("[{}{more}]", shown.join(", "))
    };
    let mut parts = Vec::new();
    if r.lost > 0 {
        parts.push(format!("lost {} {}", r.lost, seqs(&r.lost_seqs)));
    }
    if r.mismatched > 0 {
        parts.push(format!(
            "mismatched {} {}",
            r.mismatched,
            seqs(&r.mismatched_seqs)
        ));
    }
    if r.error_total() > 0 {
        let kinds: Vec<String> = r.errors.iter().map(|(k, n)| format!("{k}={n}")).collect();
        parts.push(format!(
            "errors {} ({}) {}",
            r.error_total(),
            kinds.join(", "),
            seqs(&r.error_seqs)
        ));
    }
    if r.duplicated > 0 {
        parts.push(format!("duplicated replies {}", r.duplicated));
    }
    if r.late_replies > 0 {
        parts.push(format!(
            "late replies {} (after their call was counted lost)",
            r.late_replies
        ));
    }
    if r.reordered > 0 {
        parts.push(format!("reordered replies {}", r.reordered));
    }
    if r.late > 0 {
        parts.push(format!(
            "{} calls started more than one interval late: --rate was not held",
            r.late
        ));
    }
    if let Some(why) = &r.dns_error {
        parts.push(why.clone());
    }
    format!(
        "{} ({}): {} of {} calls failed: {}",
        r.transport,
        r.mode_label(),
        r.failed(),
        r.calls,
        parts.join("; ")
    )
}

/// Breaks `text` into lines of at most `width` characters at spaces, the first line
/// starting with `first`, the others with `rest` (a hanging indent). A word longer than
/// a line is cut, so that no line is ever wider than `width`.
pub fn wrap(text: &str, width: usize, first: &str, rest: &str) -> Vec<String> {
    let mut lines = Vec::new();
    let mut line = first.to_string();
    let mut empty = true;
    let len = |s: &str| s.chars().count();
    for word in text.split(' ').filter(|w| !w.is_empty()) {
        let mut word = word.to_string();
        loop {
            let room = width.saturating_sub(len(&line) + usize::from(!empty));
            if len(&word) <= room {
                if !empty {
                    line.push(' ');
                }
                line.push_str(&word);
                empty = false;
                break;
            }
            if !empty {
                lines.push(std::mem::replace(&mut line, rest.to_string()));
                empty = true;
                continue;
            }
            // A word longer than a whole line: cut it (at least one character, so that
            // even an absurdly narrow width ends).
            let fits = width.saturating_sub(len(&line)).max(1);
            let head: String = word.chars().take(fits).collect();
            word = word.chars().skip(fits).collect();
            line.push_str(&head);
            lines.push(std::mem::replace(&mut line, rest.to_string()));
            if word.is_empty() {
                break;
            }
        }
    }
    if !empty {
        lines.push(line);
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrap_keeps_to_the_width() {
        let text = "an uncached name lookup on every new connection costs 20.1 ms per call";
        for width in [10, 20, 33, 80] {
            let lines = wrap(text, width, "- ", "  ");
            assert!(
                lines.iter().all(|l| l.chars().count() <= width),
                "{lines:?}"
            );
            assert!(lines[0].starts_with("- ") && lines[1..].iter().all(|l| l.starts_with("  ")));
            if width >= 20 {
                // No word is longer than a line here: the text comes back whole.
                let words: Vec<&str> = lines.iter().flat_map(|l| l.split_whitespace()).collect();
                assert_eq!(words.join(" "), format!("- {text}"));
            }
        }
        assert_eq!(wrap("abcdefgh", 3, "", ""), ["abc", "def", "gh"]);
        assert!(wrap("", 10, "- ", "  ").is_empty());
    }
}
