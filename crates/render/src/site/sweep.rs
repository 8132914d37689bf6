//! The charts `rpcbench report` draws of sweep results: which curves, with which caption.
//! What the curves pass through (and where the knee is) is `analysis::sweep`'s; drawing
//! is `svg.rs`'s.

use super::svg::{self, ChartLine};
use crate::analysis::sweep::{KNEE_P99_GROWTH, curve_steps, knee, label, p50_p99};
use crate::report::sweep::{MIN_ACHIEVED, SloRecord, Step, SweepAxis, SweepReport};

pub use super::block::Chart;

/// The caption of a latency-throughput chart: which latency, and how the knee is defined.
fn latency_caption(paced: bool, slo: Option<&SloRecord>) -> String {
    let latency = if paced {
        "from when each call was due (corrected for coordinated omission), one point per offered rate"
    } else {
        "from each call's start, one point per worker count"
    };
    let objective = slo.map_or(String::new(), |s| {
        format!("; grey line: the objective's bound ({})", s.text)
    });
    format!(
        "p99 (solid) and p50 (dashed) latency {latency}, against the rate achieved. Ring: the knee, the last step before p99 grows more than {KNEE_P99_GROWTH}× or the achieved rate falls below {:.0}% of the offered{objective}.",
        MIN_ACHIEVED * 100.0
    )
}

/// What the payload chart's caption says.
const PAYLOAD_CAPTION: &str = "Top: p99 (solid) and p50 (dashed) latency from each call's start, by request payload. Bottom: goodput, verified request bytes per second (MB/s, 10^6 bytes). Both axes log scale.";

/// The charts of one sweep, their file names ending in `suffix` (`""`, `-2`, ...) so that
/// several sweeps can share a report: a latency-throughput chart for a sweep over rates or
/// worker counts, a payload chart for one over payload sizes.
pub fn charts(sweep: &SweepReport, suffix: &str) -> Vec<Chart> {
    let lines = |x: fn(&Step) -> f64| -> Vec<ChartLine> {
        sweep
            .series
            .iter()
            .map(|series| {
                let steps = curve_steps(series);
                ChartLine {
                    label: label(series),
                    transport: series.transport,
                    points: steps
                        .iter()
                        .filter_map(|s| {
                            let (p50, p99) = p50_p99(s)?;
                            Some([x(s), p50, p99, s.goodput_out_mb_s])
                        })
                        .collect(),
                    knee: knee(&steps),
                }
            })
            .collect()
    };
    if matches!(sweep.axis, SweepAxis::Payload | SweepAxis::Message) {
        let lines = lines(|s| f64::from(s.payload_bytes));
        return vec![Chart {
            file: format!("payload{suffix}.svg"),
            caption: Some(PAYLOAD_CAPTION.to_string()),
            svg: svg::payload_chart(&lines, &format!("chart-payload{suffix}")),
        }];
    }
    let paced = sweep.axis.offers_rates();
    let lines = lines(|s| s.achieved_per_s);
    let bound = sweep
        .slo
        .as_ref()
        .map(|s| (s.bound_us, format!("objective {}", s.text)));
    vec![Chart {
        file: format!("latency-throughput{suffix}.svg"),
        caption: Some(latency_caption(paced, sweep.slo.as_ref())),
        svg: svg::latency_throughput(&lines, bound, &format!("chart-latency-throughput{suffix}")),
    }]
}
