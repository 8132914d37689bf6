//! SVG charts, written by hand: four chart kinds for runs and two for sweeps, each a
//! function from runs (or sweep lines) to a self-contained `<svg>` string (no scripts, no
//! external fonts or links).
//!
//! A transport has the same colour in every chart ([`transport_colour`]); an address mode
//! the same dash pattern ([`mode_dash`]). Every axis names its unit.

use super::block::esc;
use crate::dnsdiag::{DnsDiagnosis, QueryRecord};
use crate::measure::Phase;
use crate::report::RunRecord;
use crate::resolve::AddrMode;
use crate::transport::TransportKind;
use crate::transport::tls::Security;
use std::fmt::Write;

/// Chart size in SVG user units; the page scales it to fit.
const WIDTH: f64 = 860.0;
/// Margins: room for tick labels on the left and bottom, the legend on the right.
const LEFT: f64 = 185.0;
const RIGHT: f64 = 190.0;
const TOP: f64 = 40.0;
const BOTTOM: f64 = 50.0;

/// One colour per transport, in `TransportKind::ALL` order, none shared: Tableau 10
/// (colour-blind-safe), then the Tableau 20 colours that stand apart from those ten.
const COLOURS: [&str; 20] = [
    "#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#b07aa1", "#edc948", "#ff9da7",
    "#9c755f", "#bab0ac", "#a0cbe8", "#ffbe7d", "#8cd17d", "#b6992d", "#499894", "#86bcb6",
    "#79706e", "#d37295", "#fabfd2", "#d4a6c8",
];
// A transport added past the list fails the build, not the charts.
const _: () = assert!(COLOURS.len() >= TransportKind::ALL.len());
/// The label of a latency axis in ms on a log scale, the same in every chart.
const LATENCY_LOG: &str = "latency (ms, log scale)";
/// Colours of the phases in the stacked chart.
const PHASE_COLOURS: [(&str, &str); 5] = [
    ("dns", "#9c755f"),
    ("connect", "#edc948"),
    ("network + client", "#4e79a7"),
    ("server", "#e15759"),
    ("other (client, close)", "#bab0ac"),
];

/// The colour of a transport, the same in every chart.
pub fn transport_colour(kind: TransportKind) -> &'static str {
    TransportKind::ALL
        .iter()
        .position(|&x| x == kind)
        .map_or("#555555", |i| COLOURS[i])
}

/// The dash pattern of an address mode, the same in every chart.
pub fn mode_dash(mode: AddrMode) -> &'static str {
    match mode {
        AddrMode::Ip => "none",
        AddrMode::System => "7 3",
        AddrMode::Cached => "2 3",
        AddrMode::Uncached => "9 3 2 3",
        AddrMode::UncachedSearch => "9 3 2 3 2 3",
    }
}

/// A value axis: linear or log10, mapped onto a pixel range.
struct Axis {
    lo: f64,
    hi: f64,
    log: bool,
    px_lo: f64,
    px_hi: f64,
}

impl Axis {
    fn new(lo: f64, hi: f64, log: bool, px_lo: f64, px_hi: f64) -> Axis {
        let (lo, hi) = if log {
            (
                lo.max(1e-3).log10().floor(),
                hi.max(1e-3)
                    .log10()
                    .ceil()
                    .max(lo.max(1e-3).log10().floor() + 1.0),
            )
        } else {
            (lo.min(0.0), if hi > lo { hi * 1.05 } else { lo + 1.0 })
        };
        Axis {
            lo,
            hi,
            log,
            px_lo,
            px_hi,
        }
    }

    fn px(&self, v: f64) -> f64 {
        let v = if self.log { v.max(1e-3).log10() } else { v };
        let t = ((v - self.lo) / (self.hi - self.lo)).clamp(0.0, 1.0);
        self.px_lo + t * (self.px_hi - self.px_lo)
    }

    /// Tick values: decades on a log axis, about five round steps on a linear one.
    fn ticks(&self) -> Vec<f64> {
        if self.log {
            (self.lo as i32..=self.hi as i32)
                .map(|e| 10f64.powi(e))
                .collect()
        } else {
            let raw = (self.hi - self.lo) / 5.0;
            let mag = 10f64.powf(raw.log10().floor());
            let step = [1.0, 2.0, 5.0, 10.0]
                .iter()
                .map(|m| m * mag)
                .find(|s| *s >= raw)
                .unwrap_or(raw);
            let mut v = (self.lo / step).ceil() * step;
            let mut out = Vec::new();
            while v <= self.hi + 1e-9 {
                out.push(v);
                v += step;
            }
            out
        }
    }
}

/// Formats a tick value compactly.
fn tick_label(v: f64) -> String {
    if v >= 100.0 || v == 0.0 {
        format!("{v:.0}")
    } else if v >= 1.0 {
        format!("{}", (v * 10.0).round() / 10.0)
    } else {
        let s = format!("{v:.4}");
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    }
}

/// The frame every chart shares: background, title, and the svg element itself.
fn open(out: &mut String, height: f64, title: &str, id: &str) {
    let _ = write!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" id="{id}" viewBox="0 0 {WIDTH} {height}" width="{WIDTH}" height="{height}" font-family="sans-serif" font-size="12" role="img" aria-label="{t}"><title>{t}</title><rect width="100%" height="100%" fill="white"/><text x="{x}" y="22" font-size="15" font-weight="bold">{t}</text>"#,
        t = esc(title),
        x = LEFT,
    );
}

/// Draws the x axis (ticks, grid and unit label) at the bottom of the plot area.
fn x_axis(out: &mut String, axis: &Axis, y0: f64, y1: f64, label: &str, ticks: &[(f64, String)]) {
    let _ = write!(
        out,
        r#"<g class="axis x-axis"><line x1="{}" y1="{y1}" x2="{}" y2="{y1}" stroke="black"/>"#,
        axis.px_lo, axis.px_hi
    );
    for (v, text) in ticks {
        let x = axis.px(*v);
        let _ = write!(
            out,
            r##"<line x1="{x:.1}" y1="{y0}" x2="{x:.1}" y2="{y1}" stroke="#e0e0e0"/><text x="{x:.1}" y="{}" text-anchor="middle">{}</text>"##,
            y1 + 16.0,
            esc(text)
        );
    }
    let _ = write!(
        out,
        r#"<text class="axis-label" x="{}" y="{}" text-anchor="middle">{}</text></g>"#,
        (axis.px_lo + axis.px_hi) / 2.0,
        y1 + 36.0,
        esc(label)
    );
}

/// Draws a value y axis with ticks and its unit label.
fn y_axis(out: &mut String, axis: &Axis, x0: f64, x1: f64, label: &str) {
    let _ = write!(
        out,
        r#"<g class="axis y-axis"><line x1="{x0}" y1="{}" x2="{x0}" y2="{}" stroke="black"/>"#,
        axis.px_lo, axis.px_hi
    );
    for v in axis.ticks() {
        let y = axis.px(v);
        let _ = write!(
            out,
            r##"<line x1="{x0}" y1="{y:.1}" x2="{x1}" y2="{y:.1}" stroke="#e0e0e0"/><text x="{}" y="{:.1}" text-anchor="end">{}</text>"##,
            x0 - 6.0,
            y + 4.0,
            tick_label(v)
        );
    }
    let _ = write!(
        out,
        r#"<text class="axis-label" transform="translate({},{}) rotate(-90)" text-anchor="middle">{}</text></g>"#,
        x0 - 55.0,
        (axis.px_lo + axis.px_hi) / 2.0,
        esc(label)
    );
}

/// Rows of the legend, one entry each.
const LEGEND_ROW: f64 = 18.0;
/// Room for a legend entry's text: the right margin less the key and the gaps.
const LEGEND_TEXT: f64 = RIGHT - 15.0 - 28.0 - 5.0;
/// The width of one character of 12 px sans-serif, at most (wide letters, digits).
const CHAR_WIDTH: f64 = 7.0;

/// A row's label, its end at `x`: squeezed (`textLength`) when it is too long for the
/// left margin, so it never runs off the chart's left edge.
fn row_label(x: f64, y: f64, text: &str) -> String {
    let room = x - 8.0;
    let squeeze = if text.chars().count() as f64 * CHAR_WIDTH > room {
        format!(r#" textLength="{room}" lengthAdjust="spacingAndGlyphs""#)
    } else {
        String::new()
    };
    format!(
        r#"<text x="{x}" y="{y:.1}" text-anchor="end"{squeeze}>{}</text>"#,
        esc(text)
    )
}

/// A legend entry: a line (or a box) in the entry's colour and dash, and its text. No
/// entry is cut off: a text too long for the margin is squeezed to fit (`textLength`), and
/// a legend taller than the chart makes the chart taller ([`grow_to`]).
fn legend(out: &mut String, entries: &[(String, &str, &str, bool)]) {
    let x = WIDTH - RIGHT + 15.0;
    grow_to(out, TOP + 10.0 + entries.len() as f64 * LEGEND_ROW + 10.0);
    let _ = write!(out, r#"<g class="legend">"#);
    for (i, (text, colour, dash, boxed)) in entries.iter().enumerate() {
        let y = TOP + 10.0 + i as f64 * LEGEND_ROW;
        if *boxed {
            let _ = write!(
                out,
                r#"<rect x="{x}" y="{}" width="22" height="10" fill="{colour}"/>"#,
                y - 8.0
            );
        } else {
            let _ = write!(
                out,
                r#"<line x1="{x}" y1="{}" x2="{}" y2="{}" stroke="{colour}" stroke-width="2.5" stroke-dasharray="{dash}"/>"#,
                y - 3.0,
                x + 22.0,
                y - 3.0
            );
        }
        let squeeze = if text.chars().count() as f64 * CHAR_WIDTH > LEGEND_TEXT {
            format!(r#" textLength="{LEGEND_TEXT}" lengthAdjust="spacingAndGlyphs""#)
        } else {
            String::new()
        };
        let _ = write!(
            out,
            r#"<text x="{}" y="{y}"{squeeze}>{}</text>"#,
            x + 28.0,
            esc(text)
        );
    }
    let _ = write!(out, "</g>");
}

/// Makes the chart opened in `out` ([`open`]) at least `height` tall, by rewriting the
/// height its frame was opened with.
fn grow_to(out: &mut String, height: f64) {
    let Some(at) = out.find(r#"viewBox="0 0 "#) else {
        return;
    };
    let start = at + r#"viewBox="0 0 "#.len();
    let Some(end) = out[start..].find('"').map(|e| start + e) else {
        return;
    };
    let Some(old) = out[start..end]
        .split(' ')
        .nth(1)
        .and_then(|h| h.parse::<f64>().ok())
    else {
        return;
    };
    if height <= old {
        return;
    }
    let (was, now) = (
        format!(r#"viewBox="0 0 {WIDTH} {old}" width="{WIDTH}" height="{old}""#),
        format!(r#"viewBox="0 0 {WIDTH} {height}" width="{WIDTH}" height="{height}""#),
    );
    *out = out.replacen(&was, &now, 1);
}

/// A run's label: transport, and its modes when they are not plain `ip` (`tcp
/// (cached)`, `h2-mux (ip c16)`).
fn label(r: &RunRecord) -> String {
    let modes = r.mode_label();
    if modes == AddrMode::Ip.to_string() {
        r.transport.to_string()
    } else {
        format!("{} ({modes})", r.transport)
    }
}

/// Where a quantile sits on the percentile chart's x axis: "nines" (`-log10(1 - q)`), so
/// p90, p99 and p99.9 are evenly spaced; the maximum is drawn just past p99.99.
fn nines(q: f64) -> f64 {
    -(1.0 - q.min(0.99995)).log10()
}

/// Latency percentile curves, one line per run: colour by transport, dash by mode.
pub fn percentile_curves(runs: &[&RunRecord]) -> String {
    let height = 420.0;
    let mut out = String::new();
    open(
        &mut out,
        height,
        "Latency by percentile (full round trip)",
        "chart-percentiles",
    );
    let (y0, y1) = (TOP, height - BOTTOM);
    let all: Vec<f64> = runs
        .iter()
        .flat_map(|r| r.percentiles_us.iter().map(|p| p[1] / 1e3))
        .collect();
    let lo = all.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = all.iter().copied().fold(0.0, f64::max);
    let xa = Axis {
        lo: 0.0,
        hi: nines(1.0),
        log: false,
        px_lo: LEFT,
        px_hi: WIDTH - RIGHT,
    };
    let ya = Axis::new(lo, hi, true, y1, y0);
    let ticks: Vec<(f64, String)> = [
        (0.0, "min"),
        (0.5, "p50"),
        (0.9, "p90"),
        (0.99, "p99"),
        (0.999, "p99.9"),
        (0.9999, "p99.99"),
    ]
    .iter()
    .map(|(q, t)| (nines(*q), t.to_string()))
    .collect();
    x_axis(
        &mut out,
        &xa,
        y0,
        y1,
        "percentile (log scale of 1 − quantile)",
        &ticks,
    );
    y_axis(&mut out, &ya, LEFT, WIDTH - RIGHT, LATENCY_LOG);
    let mut entries = Vec::new();
    for r in runs {
        if r.percentiles_us.is_empty() {
            continue;
        }
        let colour = transport_colour(r.transport);
        let dash = mode_dash(r.addr_mode);
        let points: Vec<String> = r
            .percentiles_us
            .iter()
            .map(|p| format!("{:.1},{:.1}", xa.px(nines(p[0])), ya.px(p[1] / 1e3)))
            .collect();
        let _ = write!(
            out,
            r#"<polyline class="series" data-run="{}" fill="none" stroke="{colour}" stroke-width="2" stroke-dasharray="{dash}" points="{}"/>"#,
            esc(&label(r)),
            points.join(" ")
        );
        entries.push((label(r), colour, dash, false));
    }
    legend(&mut out, &entries);
    out.push_str("</svg>");
    out
}

/// Mean latency per run as a dot, with a whisker out to p99, on a log axis.
pub fn mean_p99(runs: &[&RunRecord]) -> String {
    let row = 22.0;
    let height = TOP + BOTTOM + row * runs.len().max(1) as f64 + 10.0;
    let mut out = String::new();
    open(
        &mut out,
        height,
        "Mean latency (dot) and p99 (whisker) per transport and address mode",
        "chart-mean-p99",
    );
    let (y0, y1) = (TOP, height - BOTTOM);
    let values: Vec<f64> = runs
        .iter()
        .filter_map(|r| r.latency_us)
        .flat_map(|l| [l.mean / 1e3, l.p99 / 1e3])
        .collect();
    let lo = values.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = values.iter().copied().fold(0.0, f64::max);
    let xa = Axis::new(lo, hi, true, LEFT, WIDTH - RIGHT);
    let ticks: Vec<(f64, String)> = xa.ticks().into_iter().map(|v| (v, tick_label(v))).collect();
    x_axis(&mut out, &xa, y0, y1, LATENCY_LOG, &ticks);
    for (i, r) in runs.iter().enumerate() {
        let y = y0 + 10.0 + row * (i as f64 + 0.5);
        let colour = transport_colour(r.transport);
        out.push_str(&row_label(LEFT - 8.0, y + 4.0, &label(r)));
        if let Some(l) = r.latency_us {
            let (xm, xp) = (xa.px(l.mean / 1e3), xa.px(l.p99 / 1e3));
            let _ = write!(
                out,
                r#"<g class="series" data-run="{}"><line x1="{xm:.1}" y1="{y:.1}" x2="{xp:.1}" y2="{y:.1}" stroke="{colour}" stroke-width="2" stroke-dasharray="{}"/><line x1="{xp:.1}" y1="{:.1}" x2="{xp:.1}" y2="{:.1}" stroke="{colour}" stroke-width="2"/><circle cx="{xm:.1}" cy="{y:.1}" r="5" fill="{colour}"/></g>"#,
                esc(&label(r)),
                mode_dash(r.addr_mode),
                y - 5.0,
                y + 5.0
            );
        }
    }
    let entries: Vec<_> = unique_transports(runs)
        .into_iter()
        .map(|t| (t.to_string(), transport_colour(t), "none", true))
        .collect();
    legend(&mut out, &entries);
    out.push_str("</svg>");
    out
}

/// The transports among `runs`, each once, in the order they first appear.
fn unique_transports(runs: &[&RunRecord]) -> Vec<TransportKind> {
    let mut seen: Vec<TransportKind> = Vec::new();
    for r in runs {
        if !seen.contains(&r.transport) {
            seen.push(r.transport);
        }
    }
    seen
}

/// The mean of a phase, in ms (0 when the transport did not see it).
fn phase_ms(r: &RunRecord, phase: Phase) -> f64 {
    r.phases_us.get(phase).map_or(0.0, |s| s.mean / 1e3)
}

/// Where the mean call's time goes, as stacked bars per run. Each phase is averaged over
/// the calls that had it and scaled by how many did, so the segments add up to the mean.
pub fn phase_stack(runs: &[&RunRecord]) -> String {
    let row = 22.0;
    let height = TOP + BOTTOM + row * runs.len().max(1) as f64 + 10.0;
    let mut out = String::new();
    open(
        &mut out,
        height,
        "Where the time of a mean call goes",
        "chart-phases",
    );
    let (y0, y1) = (TOP, height - BOTTOM);
    let hi = runs
        .iter()
        .filter_map(|r| r.latency_us)
        .map(|l| l.mean / 1e3)
        .fold(0.0, f64::max);
    let xa = Axis::new(0.0, hi, false, LEFT, WIDTH - RIGHT);
    let ticks: Vec<(f64, String)> = xa.ticks().into_iter().map(|v| (v, tick_label(v))).collect();
    x_axis(&mut out, &xa, y0, y1, "time per call (ms)", &ticks);
    for (i, r) in runs.iter().enumerate() {
        let y = y0 + 10.0 + row * i as f64;
        let _ = write!(
            out,
            r#"<rect x="{}" y="{:.1}" width="8" height="14" fill="{}"/>{}"#,
            LEFT - 14.0,
            y + 2.0,
            transport_colour(r.transport),
            row_label(LEFT - 18.0, y + 13.0, &label(r)),
        );
        let _ = write!(out, r#"<g class="series" data-run="{}">"#, esc(&label(r)));
        let mut x = xa.px(0.0);
        for (name, colour, ms) in phase_segments(r) {
            let w = xa.px(ms) - xa.px(0.0);
            if w > 0.0 {
                let _ = write!(
                    out,
                    r#"<rect class="segment" x="{x:.1}" y="{:.1}" width="{w:.1}" height="16" fill="{colour}"><title>{}: {name} {ms:.3} ms</title></rect>"#,
                    y + 1.0,
                    esc(&label(r))
                );
                x += w;
            }
        }
        out.push_str("</g>");
    }
    let entries: Vec<_> = PHASE_COLOURS
        .iter()
        .map(|(n, c)| (n.to_string(), *c, "none", true))
        .collect();
    legend(&mut out, &entries);
    out.push_str("</svg>");
    out
}

/// The stacked segments of one run: (name, colour, ms per mean call).
pub fn phase_segments(r: &RunRecord) -> Vec<(&'static str, &'static str, f64)> {
    let Some(total) = r.latency_us.map(|l| l.mean / 1e3) else {
        return Vec::new();
    };
    // A phase seen on only some calls (the one connect of a persistent worker) counts at
    // its share of the calls, so that it is charged per call like the total is.
    let share = |phase: Phase| {
        let per_call = phase_ms(r, phase);
        let calls_with = match phase {
            // One lookup per new connection; a run from before the lookup record counted
            // lookups as its queries.
            Phase::Dns => r
                .dns_lookup
                .as_ref()
                .map_or(r.dns_queries, |l| l.lookups)
                .min(r.ok) as f64,
            Phase::Connect => r.connects.min(r.ok) as f64,
            _ => r.ok as f64,
        };
        if r.ok == 0 {
            0.0
        } else {
            per_call * calls_with / r.ok as f64
        }
    };
    let dns = share(Phase::Dns);
    let connect = share(Phase::Connect);
    let server = phase_ms(r, Phase::Server);
    let network = (phase_ms(r, Phase::FirstByte) - server).max(0.0);
    let other = (total - dns - connect - network - server).max(0.0);
    vec![
        (PHASE_COLOURS[0].0, PHASE_COLOURS[0].1, dns),
        (PHASE_COLOURS[1].0, PHASE_COLOURS[1].1, connect),
        (PHASE_COLOURS[2].0, PHASE_COLOURS[2].1, network),
        (PHASE_COLOURS[3].0, PHASE_COLOURS[3].1, server),
        (PHASE_COLOURS[4].0, PHASE_COLOURS[4].1, other),
    ]
}

/// A bar of the DNS chart: an address mode, a transport, and what the mode adds over
/// `ip`, ms (`None` when it lies within the noise).
type DnsBar = (AddrMode, TransportKind, Option<f64>);

/// The DNS chart's bars, grouped by mode, and the modes and transports they span. Plain
/// runs at the run's own concurrency: TLS and the multiplexing comparison have charts and
/// findings of their own.
fn dns_overhead_bars(runs: &[&RunRecord]) -> (Vec<AddrMode>, Vec<TransportKind>, Vec<DnsBar>) {
    let modes: Vec<AddrMode> = {
        let mut m: Vec<AddrMode> = Vec::new();
        for r in runs {
            if r.addr_mode != AddrMode::Ip && !m.contains(&r.addr_mode) {
                m.push(r.addr_mode);
            }
        }
        m
    };
    let transports = unique_transports(runs);
    let find = |t: TransportKind, mode: AddrMode| {
        runs.iter().copied().find(|r| {
            r.transport == t
                && r.addr_mode == mode
                && r.security == Security::Plain
                && !r.mux_comparison
                && r.latency_us.is_some()
        })
    };
    let mean = |r: &RunRecord| r.latency_us.map_or(0.0, |l| l.mean / 1e3);
    // (mode, transport, the difference; `None` when it lies within the noise).
    let mut bars: Vec<(AddrMode, TransportKind, Option<f64>)> = Vec::new();
    for &mode in &modes {
        for &t in &transports {
            if let (Some(m), Some(ip)) = (find(t, mode), find(t, AddrMode::Ip)) {
                let delta = crate::physics::runs_differ(m, ip).then(|| mean(m) - mean(ip));
                bars.push((mode, t, delta));
            }
        }
    }
    (modes, transports, bars)
}

/// What each address mode adds to a call over mode `ip`, per transport: grouped bars.
pub fn dns_overhead(runs: &[&RunRecord]) -> String {
    let (modes, transports, bars) = dns_overhead_bars(runs);
    let row = 16.0;
    let height = TOP + BOTTOM + row * bars.len().max(1) as f64 + 12.0 * modes.len() as f64 + 10.0;
    let mut out = String::new();
    open(
        &mut out,
        height,
        "What name resolution adds per call, against an IP literal",
        "chart-dns",
    );
    let (y0, y1) = (TOP, height - BOTTOM);
    let lo = bars.iter().filter_map(|b| b.2).fold(0.0, f64::min);
    let hi = bars.iter().filter_map(|b| b.2).fold(0.0, f64::max);
    let mut xa = Axis::new(lo, hi.max(0.001), false, LEFT, WIDTH - RIGHT);
    if lo < 0.0 {
        xa.lo = lo * 1.05;
    }
    let ticks: Vec<(f64, String)> = xa.ticks().into_iter().map(|v| (v, tick_label(v))).collect();
    x_axis(
        &mut out,
        &xa,
        y0,
        y1,
        "mean latency minus mean under ip (ms per call)",
        &ticks,
    );
    let mut y = y0 + 8.0;
    let mut last_mode = None;
    for &(mode, t, delta) in &bars {
        if Some(mode) != last_mode {
            let _ = write!(
                out,
                r#"<text x="8" y="{:.1}" font-weight="bold">{}</text>"#,
                y + 10.0,
                mode
            );
            last_mode = Some(mode);
            y += 12.0;
        }
        dns_overhead_bar(&mut out, &xa, y, (mode, t, delta));
        y += row;
    }
    let entries: Vec<_> = transports
        .iter()
        .map(|&t| (t.to_string(), transport_colour(t), "none", true))
        .collect();
    legend(&mut out, &entries);
    out.push_str("</svg>");
    out
}

/// Draws one bar of the DNS chart at `y`: a rectangle from 0 to what `mode` adds for
/// `t`, or, within the noise, a mark on the zero line and the words.
fn dns_overhead_bar(out: &mut String, xa: &Axis, y: f64, (mode, t, delta): DnsBar) {
    out.push_str(&row_label(LEFT - 8.0, y + 10.0, t.name()));
    let Some(delta) = delta else {
        // Within the noise: a mark on the zero line and the words, not a bar.
        let x0 = xa.px(0.0);
        let _ = write!(
            out,
            r##"<g class="series within-noise" data-run="{t} ({mode})"><line x1="{x0:.1}" y1="{:.1}" x2="{x0:.1}" y2="{:.1}" stroke="{}" stroke-width="2"/><text x="{:.1}" y="{:.1}" fill="#555555">no measurable difference</text><title>{t} under {mode}: no measurable difference from ip</title></g>"##,
            y + 1.0,
            y + 13.0,
            transport_colour(t),
            x0 + 6.0,
            y + 10.0,
        );
        return;
    };
    let (xa0, xa1) = (xa.px(0.0), xa.px(delta));
    let (x, w) = if xa1 >= xa0 {
        (xa0, xa1 - xa0)
    } else {
        (xa1, xa0 - xa1)
    };
    let _ = write!(
        out,
        r#"<rect class="series" data-run="{} ({})" x="{x:.1}" y="{:.1}" width="{:.1}" height="12" fill="{}"><title>{} under {}: {:+.3} ms</title></rect>"#,
        t,
        mode,
        y + 1.0,
        w.max(1.0),
        transport_colour(t),
        t,
        mode,
        delta
    );
}

/// One line of a sweep chart: a transport's steps, in order, and its knee.
#[derive(Debug, Clone, PartialEq)]
pub struct ChartLine {
    /// The series' name in the legend (`tcp`, `tcp (cached)`).
    pub label: String,
    /// Its colour comes from here, as in every chart.
    pub transport: TransportKind,
    /// `[x, p50 µs, p99 µs, goodput MB/s]` per step; x is the chart's own (calls/s or bytes).
    pub points: Vec<[f64; 4]>,
    /// The index into `points` of the knee, if the chart marks one.
    pub knee: Option<usize>,
}

/// Dash of the p50 line in the sweep charts; p99 is solid, so the tail reads first.
const P50_DASH: &str = "5 4";
/// Dash of the objective's bound.
const BOUND_DASH: &str = "8 4";
/// Grey of the marks that belong to no transport: the bound, the p50/p99 legend keys.
const NEUTRAL: &str = "#555555";

/// A polyline through `points` (already in pixels) in a line's colour.
fn polyline(
    out: &mut String,
    run: &str,
    colour: &str,
    dash: &str,
    width: f64,
    points: &[(f64, f64)],
) {
    let pts: Vec<String> = points
        .iter()
        .map(|(x, y)| format!("{x:.1},{y:.1}"))
        .collect();
    let _ = write!(
        out,
        r#"<polyline class="series" data-run="{}" fill="none" stroke="{colour}" stroke-width="{width}" stroke-dasharray="{dash}" points="{}"/>"#,
        esc(run),
        pts.join(" ")
    );
}

/// The legend of a sweep chart: a line per transport, then what solid and dashed mean.
fn sweep_legend(out: &mut String, lines: &[ChartLine], bound: Option<&str>) {
    let mut entries: Vec<(String, &str, &str, bool)> = lines
        .iter()
        .map(|l| {
            (
                l.label.clone(),
                transport_colour(l.transport),
                "none",
                false,
            )
        })
        .collect();
    entries.push(("p99".into(), NEUTRAL, "none", false));
    entries.push(("p50".into(), NEUTRAL, P50_DASH, false));
    if bound.is_some() {
        entries.push(("objective".into(), NEUTRAL, BOUND_DASH, false));
    }
    legend(out, &entries);
}

/// The smallest and largest of some values; (0, 0) for none, which an axis widens.
fn span(values: impl Iterator<Item = f64>) -> (f64, f64) {
    let (lo, hi) = values.fold((f64::INFINITY, 0.0_f64), |(lo, hi), v| {
        (lo.min(v), hi.max(v))
    });
    if lo > hi { (0.0, 0.0) } else { (lo, hi) }
}

/// The p50 and p99 lines of every sweep line on one pair of axes (latency in ms).
fn latency_lines(out: &mut String, lines: &[ChartLine], xa: &Axis, ya: &Axis) {
    for l in lines {
        let colour = transport_colour(l.transport);
        let at = |i: usize| -> Vec<(f64, f64)> {
            l.points
                .iter()
                .map(|p| (xa.px(p[0]), ya.px(p[i] / 1e3)))
                .collect()
        };
        polyline(out, &l.label, colour, P50_DASH, 1.5, &at(1));
        polyline(out, &l.label, colour, "none", 2.0, &at(2));
        for (x, y) in at(2) {
            let _ = write!(
                out,
                r#"<circle cx="{x:.1}" cy="{y:.1}" r="3" fill="{colour}"/>"#
            );
        }
    }
}

/// Latency against throughput for a sweep over rates or worker counts: p99 (solid) and
/// p50 (dashed) per transport against the achieved rate, the knee ringed, and the
/// objective's bound as a horizontal line when there is one (`bound`: µs and its label).
pub fn latency_throughput(lines: &[ChartLine], bound: Option<(f64, String)>, id: &str) -> String {
    let height = 440.0;
    let mut out = String::new();
    open(&mut out, height, "Latency against throughput", id);
    let (y0, y1) = (TOP, height - BOTTOM);
    let (_, x_hi) = span(lines.iter().flat_map(|l| l.points.iter().map(|p| p[0])));
    let (lo, hi) = span(
        lines
            .iter()
            .flat_map(|l| l.points.iter().flat_map(|p| [p[1], p[2]]))
            .chain(bound.as_ref().map(|b| b.0))
            .map(|us| us / 1e3),
    );
    let xa = Axis::new(0.0, x_hi, false, LEFT, WIDTH - RIGHT);
    let ya = Axis::new(lo, hi, true, y1, y0);
    let ticks: Vec<(f64, String)> = xa
        .ticks()
        .into_iter()
        .map(|v| (v, crate::units::rate(v)))
        .collect();
    x_axis(&mut out, &xa, y0, y1, "achieved calls/s", &ticks);
    y_axis(&mut out, &ya, LEFT, WIDTH - RIGHT, LATENCY_LOG);
    if let Some((us, text)) = &bound {
        let y = ya.px(us / 1e3);
        let _ = write!(
            out,
            r#"<g class="objective"><line x1="{LEFT}" y1="{y:.1}" x2="{}" y2="{y:.1}" stroke="{NEUTRAL}" stroke-width="1.5" stroke-dasharray="{BOUND_DASH}"/><text x="{}" y="{:.1}" fill="{NEUTRAL}">{}</text></g>"#,
            WIDTH - RIGHT,
            LEFT + 6.0,
            y - 5.0,
            esc(text)
        );
    }
    latency_lines(&mut out, lines, &xa, &ya);
    for l in lines {
        if let Some(p) = l.knee.and_then(|k| l.points.get(k)) {
            let (x, y) = (xa.px(p[0]), ya.px(p[2] / 1e3));
            let _ = write!(
                out,
                r#"<g class="knee" data-run="{}"><circle cx="{x:.1}" cy="{y:.1}" r="8" fill="none" stroke="{}" stroke-width="2"/><text x="{:.1}" y="{:.1}">knee</text></g>"#,
                esc(&l.label),
                transport_colour(l.transport),
                x + 10.0,
                y - 10.0
            );
        }
    }
    sweep_legend(&mut out, lines, bound.as_ref().map(|b| b.1.as_str()));
    out.push_str("</svg>");
    out
}

/// Latency and goodput against payload size, on log axes: p99 (solid) and p50 (dashed)
/// above, MB/s of verified request bytes below, a line per transport in each.
pub fn payload_chart(lines: &[ChartLine], id: &str) -> String {
    let panel = 230.0;
    let gap = 60.0;
    let height = TOP + panel + gap + panel + BOTTOM;
    let mut out = String::new();
    open(
        &mut out,
        height,
        "Latency and goodput against payload size",
        id,
    );
    let (x_lo, x_hi) = span(lines.iter().flat_map(|l| l.points.iter().map(|p| p[0])));
    let xa = Axis::new(x_lo, x_hi, true, LEFT, WIDTH - RIGHT);
    // Ticks at the payloads swept, named as the command line writes them.
    let mut sizes: Vec<f64> = lines
        .iter()
        .flat_map(|l| l.points.iter().map(|p| p[0]))
        .collect();
    sizes.sort_by(f64::total_cmp);
    sizes.dedup();
    let ticks: Vec<(f64, String)> = sizes
        .iter()
        .map(|&b| (b, crate::units::bytes(b as u32)))
        .collect();
    // Latency, above.
    let (t0, t1) = (TOP, TOP + panel);
    let (lo, hi) = span(
        lines
            .iter()
            .flat_map(|l| l.points.iter().flat_map(|p| [p[1], p[2]]))
            .map(|us| us / 1e3),
    );
    let ya = Axis::new(lo, hi, true, t1, t0);
    x_axis(&mut out, &xa, t0, t1, "request payload (log scale)", &ticks);
    y_axis(&mut out, &ya, LEFT, WIDTH - RIGHT, LATENCY_LOG);
    latency_lines(&mut out, lines, &xa, &ya);
    // Goodput, below.
    let (b0, b1) = (t1 + gap, t1 + gap + panel);
    let (lo, hi) = span(lines.iter().flat_map(|l| l.points.iter().map(|p| p[3])));
    let ga = Axis::new(lo, hi, true, b1, b0);
    x_axis(&mut out, &xa, b0, b1, "request payload (log scale)", &ticks);
    y_axis(
        &mut out,
        &ga,
        LEFT,
        WIDTH - RIGHT,
        "goodput (MB/s, log scale)",
    );
    for l in lines {
        let pts: Vec<(f64, f64)> = l
            .points
            .iter()
            .map(|p| (xa.px(p[0]), ga.px(p[3])))
            .collect();
        let colour = transport_colour(l.transport);
        polyline(&mut out, &l.label, colour, "none", 2.0, &pts);
        for (x, y) in pts {
            let _ = write!(
                out,
                r#"<circle cx="{x:.1}" cy="{y:.1}" r="3" fill="{colour}"/>"#
            );
        }
    }
    sweep_legend(&mut out, lines, None);
    out.push_str("</svg>");
    out
}

/// The colour of a query whose answer was used, and of one thrown away.
const QUERY_USED: &str = "#2ca02c";
const QUERY_WASTED: &str = "#d62728";

/// One bar per diagnosed lookup (`rpcbench dns`), its queries stacked in the order the
/// lookup sent them, each as long as its mean time; wasted ones (a miss on a search
/// suffix, a timeout, a truncated answer asked again) in red and hatched. A black mark
/// shows the lookup's measured mean: A and AAAA go out together, so their segments
/// overlap in time and the stack can pass it.
pub fn dns_lookups(diagnoses: &[&DnsDiagnosis]) -> String {
    let row = 30.0;
    let height = TOP + BOTTOM + row * diagnoses.len().max(1) as f64 + 10.0;
    let mut out = String::new();
    open(
        &mut out,
        height,
        "The queries of one lookup, in order",
        "chart-dns-lookups",
    );
    let _ = write!(
        out,
        r#"<defs><pattern id="wasted" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)"><rect width="6" height="6" fill="{QUERY_WASTED}"/><line x1="0" y1="0" x2="0" y2="6" stroke="white" stroke-width="2"/></pattern></defs>"#
    );
    let (y0, y1) = (TOP, height - BOTTOM);
    let mean_ms = |q: &QueryRecord| q.time_us.map_or(0.0, |t| t.mean / 1e3);
    let hi = diagnoses
        .iter()
        .map(|d| {
            let stacked: f64 = d.queries.iter().map(mean_ms).sum();
            stacked.max(d.lookup_us.map_or(0.0, |l| l.mean / 1e3))
        })
        .fold(0.0, f64::max);
    let xa = Axis::new(0.0, hi, false, LEFT, WIDTH - RIGHT);
    let ticks: Vec<(f64, String)> = xa.ticks().into_iter().map(|v| (v, tick_label(v))).collect();
    x_axis(
        &mut out,
        &xa,
        y0,
        y1,
        "mean time per query, stacked (ms)",
        &ticks,
    );
    for (i, d) in diagnoses.iter().enumerate() {
        let y = y0 + 10.0 + row * i as f64;
        let _ = write!(
            out,
            r#"{}<g class="series" data-name="{}">"#,
            row_label(LEFT - 8.0, y + 14.0, &d.name),
            esc(&d.name)
        );
        let mut queries: Vec<&QueryRecord> = d.queries.iter().collect();
        queries.sort_by_key(|q| q.order);
        let mut x = xa.px(0.0);
        for q in queries {
            let ms = mean_ms(q);
            let w = xa.px(ms) - xa.px(0.0);
            let (fill, class) = if q.wasted {
                ("url(#wasted)", "segment wasted")
            } else {
                (QUERY_USED, "segment")
            };
            let answers: Vec<String> = q.answers.iter().map(|(k, n)| format!("{k} ×{n}")).collect();
            let _ = write!(
                out,
                r#"<rect class="{class}" x="{x:.1}" y="{:.1}" width="{w:.1}" height="18" fill="{fill}" stroke="white"><title>{} {} {} via {}: {ms:.3} ms ({})</title></rect>"#,
                y + 1.0,
                q.order,
                esc(&q.candidate),
                esc(q.qtype.name()),
                esc(q.via.name()),
                esc(&answers.join(", "))
            );
            x += w;
        }
        if let Some(l) = d.lookup_us {
            let lx = xa.px(l.mean / 1e3);
            let _ = write!(
                out,
                r#"<line class="lookup-mean" x1="{lx:.1}" y1="{:.1}" x2="{lx:.1}" y2="{:.1}" stroke="black" stroke-width="2"><title>the whole lookup: {:.3} ms</title></line>"#,
                y - 2.0,
                y + 22.0,
                l.mean / 1e3
            );
        }
        out.push_str("</g>");
    }
    legend(
        &mut out,
        &[
            ("answer used".to_string(), QUERY_USED, "none", true),
            ("wasted".to_string(), QUERY_WASTED, "none", true),
            ("whole lookup".to_string(), "black", "none", false),
        ],
    );
    out.push_str("</svg>");
    out
}

/// Latency against link RTT: one line per transport and mode from its fitted model
/// (`c + k × RTT`, drawn from 0 to a little past the largest RTT measured), the measured
/// means as dots. Both axes linear, so a line's slope is its round trips per call.
pub fn latency_rtt(fits: &[crate::model::Fit]) -> String {
    let height = 460.0;
    let mut out = String::new();
    open(
        &mut out,
        height,
        "Latency against round-trip time",
        "chart-rtt",
    );
    let (y0, y1) = (TOP, height - BOTTOM);
    let (_, rtt_hi) = span(fits.iter().flat_map(|f| f.points.iter().map(|p| p[0])));
    // A tenth past the largest RTT, so its dots are not on the frame.
    let x_end = (rtt_hi * 1.1).max(1.0);
    let (_, ms_hi) = span(
        fits.iter()
            .flat_map(|f| f.points.iter().map(|p| p[1]).chain([f.mean_at(x_end)]))
            .map(|us| us / 1e3),
    );
    let xa = Axis::new(0.0, x_end / 1e3, false, LEFT, WIDTH - RIGHT);
    let ya = Axis::new(0.0, ms_hi, false, y1, y0);
    let ticks: Vec<(f64, String)> = xa.ticks().into_iter().map(|v| (v, tick_label(v))).collect();
    x_axis(&mut out, &xa, y0, y1, "link round-trip time (ms)", &ticks);
    y_axis(&mut out, &ya, LEFT, WIDTH - RIGHT, "mean latency (ms)");
    let mut entries = Vec::new();
    for f in fits {
        let colour = transport_colour(f.key.transport);
        let name = if f.key.addr_mode == AddrMode::Ip && !f.key.security.is_tls() {
            f.key.transport.to_string()
        } else {
            format!("{} ({})", f.key.transport, f.key.mode_label())
        };
        let dash = mode_dash(f.key.addr_mode);
        let ends = [0.0, x_end].map(|x| (xa.px(x / 1e3), ya.px(f.mean_at(x).max(0.0) / 1e3)));
        polyline(&mut out, &name, colour, dash, 2.0, &ends);
        for p in &f.points {
            let _ = write!(
                out,
                r#"<circle cx="{:.1}" cy="{:.1}" r="3.5" fill="{colour}" stroke="white" stroke-width="1"/>"#,
                xa.px(p[0] / 1e3),
                ya.px(p[1] / 1e3)
            );
        }
        entries.push((
            format!("{name} k={:.2}", f.round_trips_per_call),
            colour,
            dash,
            false,
        ));
    }
    legend(&mut out, &entries);
    out.push_str("</svg>");
    out
}

/// One line of the encodings chart: an encoding's server CPU per call (µs) against the
/// structs in its message.
#[derive(Debug, Clone, PartialEq)]
pub struct CpuLine {
    pub encoding: crate::encoding::EncodingKind,
    /// `(structs, server CPU µs per call)`, by structs.
    pub points: Vec<(f64, f64)>,
}

/// The colour of an encoding's line: its place in the registry, in the common palette.
pub fn encoding_colour(encoding: crate::encoding::EncodingKind) -> &'static str {
    COLOURS[usize::from(encoding.code()) % COLOURS.len()]
}

/// Server CPU per call against the message's size (structs of an EchoStruct), both axes
/// log scale, a line per encoding over one transport (seed 001's figures 4 to 6).
pub fn encoding_cpu(lines: &[CpuLine], transport: TransportKind) -> String {
    let height = 400.0;
    let mut out = String::new();
    open(
        &mut out,
        height,
        &format!("Server CPU per call against message size ({transport})"),
        "chart-encodings-cpu",
    );
    let (y0, y1) = (TOP, height - BOTTOM);
    let (x_lo, x_hi) = span(lines.iter().flat_map(|l| l.points.iter().map(|p| p.0)));
    let (lo, hi) = span(lines.iter().flat_map(|l| l.points.iter().map(|p| p.1)));
    let xa = Axis::new(x_lo, x_hi, true, LEFT, WIDTH - RIGHT);
    let ya = Axis::new(lo, hi, true, y1, y0);
    let ticks: Vec<(f64, String)> = xa.ticks().into_iter().map(|v| (v, tick_label(v))).collect();
    x_axis(
        &mut out,
        &xa,
        y0,
        y1,
        "structs per EchoStruct (log scale)",
        &ticks,
    );
    y_axis(
        &mut out,
        &ya,
        LEFT,
        WIDTH - RIGHT,
        "server CPU µs per call (log scale)",
    );
    for l in lines {
        let colour = encoding_colour(l.encoding);
        let pts: Vec<(f64, f64)> = l
            .points
            .iter()
            .map(|&(x, y)| (xa.px(x), ya.px(y)))
            .collect();
        polyline(&mut out, l.encoding.name(), colour, "none", 2.0, &pts);
        for (x, y) in pts {
            let _ = write!(
                out,
                r#"<circle cx="{x:.1}" cy="{y:.1}" r="3" fill="{colour}"/>"#
            );
        }
    }
    let entries: Vec<(String, &str, &str, bool)> = lines
        .iter()
        .map(|l| {
            (
                l.encoding.to_string(),
                encoding_colour(l.encoding),
                "none",
                false,
            )
        })
        .collect();
    legend(&mut out, &entries);
    out.push_str("</svg>");
    out
}
