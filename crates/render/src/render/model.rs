//! The round-trip model as tables: fitted round trips per call beside the protocol's, and
//! the what-if projection, for the terminal (after a run) and the report.

use super::{Grid, table, units, wrap};
use crate::model::{Fit, ModelSource, Projection, WHAT_IF_RTTS_US};
use std::io::{self, Write};

/// A number of round trips as a cell: two decimals, `-` when unknown.
fn trips(k: Option<f64>) -> String {
    k.map_or("-".to_string(), |k| format!("{k:.2}"))
}

/// The fits as a table: transport, mode, measured k beside expected, c, and the RTTs
/// fitted over.
pub fn fit_grid(fits: &[Fit]) -> Grid {
    Grid {
        headers: [
            "transport",
            "mode",
            "k measured",
            "k expected",
            "k − expected",
            "c µs",
            "link RTTs",
        ]
        .iter()
        .map(|h| h.to_string())
        .collect(),
        rows: fits
            .iter()
            .map(|f| {
                let rtts: Vec<String> = f.points.iter().map(|p| units::duration(p[0])).collect();
                vec![
                    f.key.transport.to_string(),
                    f.key.mode_label(),
                    trips(Some(f.round_trips_per_call)),
                    trips(f.expected),
                    f.gap().map_or("-".to_string(), |g| format!("{g:+.2}")),
                    format!("{:.0}", f.fixed_cost_us),
                    rtts.join(", "),
                ]
            })
            .collect(),
    }
}

/// The what-if table: transport, mode, k, c, the projected mean at each RTT of
/// [`WHAT_IF_RTTS_US`] (ms), and where k comes from (a fit, or the protocol's).
pub fn what_if_grid(rows: &[Projection]) -> Grid {
    let mut headers: Vec<String> = ["transport", "mode", "k", "c µs"]
        .iter()
        .map(|h| h.to_string())
        .collect();
    headers.extend(
        WHAT_IF_RTTS_US
            .iter()
            .map(|rtt| format!("at {} ms", rtt / 1e3)),
    );
    headers.push("k from".to_string());
    Grid {
        headers,
        rows: rows
            .iter()
            .map(|p| {
                let mut row = vec![
                    p.key.transport.to_string(),
                    p.key.mode_label(),
                    format!("{:.2}", p.round_trips_per_call),
                    format!("{:.0}", p.fixed_cost_us),
                ];
                row.extend(p.means_us.iter().map(|us| units::significant(us / 1e3, 3)));
                row.push(match p.source {
                    ModelSource::Fitted => "fit".to_string(),
                    ModelSource::Expected(_) => "protocol".to_string(),
                });
                row
            })
            .collect(),
    }
}

/// Writes the what-if table for a terminal: its heading, wrapped to `width`, then the
/// table; nothing when there are no rows.
pub fn write_what_if(rows: &[Projection], width: usize, out: &mut dyn Write) -> io::Result<()> {
    if rows.is_empty() {
        return Ok(());
    }
    writeln!(out)?;
    for line in wrap(&what_if_heading(rows), width, "", "  ") {
        writeln!(out, "{line}")?;
    }
    for line in table::grid_lines(&what_if_grid(rows)) {
        writeln!(out, "{line}")?;
    }
    Ok(())
}

/// The sentence that heads the what-if table: what it is, and from what.
pub fn what_if_heading(rows: &[Projection]) -> String {
    let fitted = rows.iter().any(|p| p.source == ModelSource::Fitted);
    let estimate = rows.iter().find_map(|p| match p.source {
        ModelSource::Expected(rtt) => Some(rtt),
        ModelSource::Fitted => None,
    });
    let mut from = Vec::new();
    if fitted {
        from.push("k and c fitted over runs at several link RTTs".to_string());
    }
    if let Some(rtt) = estimate {
        from.push(format!(
            "the protocol's k with c = mean − k × RTT, the RTT taken as {} ({})",
            crate::units::duration(rtt.us),
            rtt.source
        ));
    }
    format!(
        "what if: a projection, not a measurement: each transport's mean at other round-trip times, as c + k × RTT, from {}",
        from.join("; and ")
    )
}
