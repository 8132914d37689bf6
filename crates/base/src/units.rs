//! Durations for people: a unit picked by magnitude (µs below 1 ms, ms below 1 s, then s)
//! and about three significant digits, so that `18.4`, `156` and `4.02` read at a glance
//! where `0.018`, `0.156` and `4.020` ms made the eye count zeros.
//!
//! A table column picks one unit for all its cells ([`Unit::for_column`]) and names it in
//! its header; a sentence names the unit beside each figure ([`duration`]). CSV and JSON
//! keep fixed units (µs, s) and full precision: they are for programs.
//!
//! Layer 1 of the map in `lib.rs` (kinds and units): uses nothing of rpcbench: every layer may use it.

use std::time::Duration;

/// Significant digits shown: enough to tell 18.4 from 18.9 µs, which is about what
/// run-to-run noise on one host allows; more would be noise printed as fact.
const SIGNIFICANT: i32 = 3;

/// Microseconds in a millisecond.
const US_PER_MS: f64 = 1e3;
/// Microseconds in a second.
const US_PER_S: f64 = 1e6;

/// A unit a duration is shown in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// Microseconds, below 1 ms.
    Micros,
    /// Milliseconds, from 1 ms.
    Millis,
    /// Seconds, from 1 s.
    Seconds,
}

impl Unit {
    /// The unit's symbol, as headers and sentences print it.
    pub fn label(self) -> &'static str {
        match self {
            Unit::Micros => "µs",
            Unit::Millis => "ms",
            Unit::Seconds => "s",
        }
    }

    /// Microseconds in one of this unit.
    fn us(self) -> f64 {
        match self {
            Unit::Micros => 1.0,
            Unit::Millis => US_PER_MS,
            Unit::Seconds => US_PER_S,
        }
    }

    /// Decimals at which this unit reaches the data's resolution, one nanosecond (the
    /// histograms record nanoseconds): more decimals would only print zeros.
    fn resolution_decimals(self) -> usize {
        match self {
            Unit::Micros => 3,
            Unit::Millis => 6,
            Unit::Seconds => 9,
        }
    }

    /// The unit a single value reads best in: µs below 1 ms, ms below 1 s, else s.
    pub fn for_value(us: f64) -> Unit {
        let us = us.abs();
        if us < US_PER_MS {
            Unit::Micros
        } else if us < US_PER_S {
            Unit::Millis
        } else {
            Unit::Seconds
        }
    }

    /// The one unit of a table column: the unit of the column's median value, so that a
    /// single outlier (a 20 ms max among 50 µs calls) does not push every cell into
    /// `0.05` ms. Microseconds for an empty column.
    pub fn for_column(values_us: &[f64]) -> Unit {
        let mut sorted: Vec<f64> = values_us
            .iter()
            .copied()
            .filter(|v| v.is_finite())
            .collect();
        sorted.sort_by(f64::total_cmp);
        sorted
            .get(sorted.len() / 2)
            .map_or(Unit::Micros, |&median| Unit::for_value(median))
    }

    /// `us` in this unit with about three significant digits (`61.2`, `306`, `4.02`).
    /// A value too small for three digits gets more decimals, down to the data's
    /// resolution; below that it reads `<0.001` rather than a misleading `0.000`.
    pub fn format(self, us: f64) -> String {
        significant(us / self.us(), self.resolution_decimals())
    }
}

/// `x` with about three significant digits and at most `max_decimals` decimals:
/// `0` for zero, `<0.001` (at three decimals) for a value that would round to zero.
pub fn significant(x: f64, max_decimals: usize) -> String {
    if x == 0.0 || !x.is_finite() {
        return format!("{x}");
    }
    let magnitude = x.abs().log10().floor() as i32;
    let wanted = usize::try_from(SIGNIFICANT - 1 - magnitude).unwrap_or(0);
    let mut decimals = wanted.min(max_decimals);
    let floor = 10f64.powi(-(max_decimals as i32));
    if x.abs() < floor / 2.0 {
        // It would print as zero: say how small instead.
        let sign = if x < 0.0 { "-" } else { "" };
        return format!("{sign}<{floor:.max_decimals$}");
    }
    // Rounding can carry into a new leading digit (99.96 at one decimal is 100.0): then
    // one decimal fewer keeps three significant digits. Not when `max_decimals` already
    // cut the decimals: 0.0051 at two decimals is 0.01, and one fewer would print 0.0.
    let rounded: f64 = format!("{x:.decimals$}").parse().unwrap_or(x);
    if decimals > 0 && decimals == wanted && rounded.abs() >= 10f64.powi(magnitude + 1) {
        decimals -= 1;
    }
    format!("{x:.decimals$}")
}

/// A duration for a sentence, in the unit its magnitude asks for: `18.4 µs`, `4.02 ms`.
pub fn duration(us: f64) -> String {
    let unit = Unit::for_value(us);
    format!("{} {}", unit.format(us), unit.label())
}

/// A rate (calls per second) for a sentence or a cell: three significant digits, thousands
/// grouped, never a decimal on a rate of 100 or more (`18,400`, `502`, `2.50`): the last
/// digits of a measured rate are noise.
pub fn rate(per_s: f64) -> String {
    if per_s.fract() == 0.0 && per_s.abs() < 100.0 {
        // A rate as it was asked for (`--rate 50`), without a made-up decimal.
        return format!("{per_s:.0}");
    }
    if !per_s.is_finite() || per_s.abs() < 100.0 {
        return significant(per_s, 3);
    }
    let magnitude = per_s.abs().log10().floor() as i32;
    let step = 10f64.powi(magnitude - (SIGNIFICANT - 1));
    let whole = ((per_s / step).round() * step) as i64;
    let digits = whole.unsigned_abs().to_string();
    let mut grouped = String::new();
    for (i, d) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            grouped.push(',');
        }
        grouped.push(d);
    }
    if whole < 0 {
        grouped.insert(0, '-');
    }
    grouped
}

/// Bytes in a binary unit: `64 B`, `16 KiB`, `1 MiB`, `1.50 KiB`; whole units where the
/// size is a whole number of them, as payload sizes are written on the command line.
pub fn bytes(n: u32) -> String {
    const KIB: u32 = 1 << 10;
    const MIB: u32 = 1 << 20;
    let (unit, name) = match n {
        n if n >= MIB => (MIB, "MiB"),
        n if n >= KIB => (KIB, "KiB"),
        _ => return format!("{n} B"),
    };
    if n.is_multiple_of(unit) {
        format!("{} {name}", n / unit)
    } else {
        format!("{} {name}", significant(f64::from(n) / f64::from(unit), 2))
    }
}

/// A ratio (`× fastest`, `× the peer`) with three significant digits: `1.00`, `12.3`.
pub fn ratio(x: f64) -> String {
    significant(x, 2)
}

/// Parses a duration: a number with a unit `ns`, `us`, `µs`, `ms`, `s`, `m` (a bare number
/// is seconds), e.g. `500ms`, `1.5s`, `10us`.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let value: f64 = number
        .parse()
        .map_err(|_| format!("{text:?} is not a duration (try 500ms, 2s, 100us)"))?;
    let scale = match unit.trim() {
        "ns" => 1e-9,
        "us" | "µs" => 1e-6,
        "ms" => 1e-3,
        "" | "s" => 1.0,
        "m" | "min" => 60.0,
        other => {
            return Err(format!(
                "unknown duration unit {other:?} (use ns, us, ms, s or m)"
            ));
        }
    };
    Duration::try_from_secs_f64(value * scale).map_err(|e| format!("{text:?}: {e}"))
}

/// Parses a duration that must be more than zero: a timeout of 0 fails every call, and a
/// run of 0 s measures nothing, so both are usage errors rather than runs.
pub fn parse_positive_duration(text: &str) -> Result<Duration, String> {
    match parse_duration(text)? {
        d if d.is_zero() => Err(format!("{text:?} must be more than 0")),
        d => Ok(d),
    }
}

/// Parses a byte count with an optional binary suffix: `64`, `16KiB`, `1MiB`, `16k`, `1m`.
pub fn parse_bytes(text: &str) -> Result<u32, String> {
    let lower = text.trim().to_ascii_lowercase();
    let split = lower
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(lower.len());
    let (number, unit) = lower.split_at(split);
    let n: u64 = number
        .parse()
        .map_err(|_| format!("{text:?} is not a byte count (try 64, 16KiB, 1MiB)"))?;
    let scale: u64 = match unit {
        "" | "b" => 1,
        "k" | "kib" | "kb" => 1024,
        "m" | "mib" | "mb" => 1024 * 1024,
        other => return Err(format!("unknown size unit {other:?} (use KiB or MiB)")),
    };
    n.checked_mul(scale)
        .and_then(|v| u32::try_from(v).ok())
        .ok_or_else(|| format!("{text:?} is too large (at most 4 GiB - 1)"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_by_magnitude() {
        assert_eq!(Unit::for_value(999.0), Unit::Micros);
        assert_eq!(Unit::for_value(1_000.0), Unit::Millis);
        assert_eq!(Unit::for_value(999_999.0), Unit::Millis);
        assert_eq!(Unit::for_value(1_000_000.0), Unit::Seconds);
        assert_eq!(
            Unit::for_value(-2_000.0),
            Unit::Millis,
            "a negative rise too"
        );
    }

    #[test]
    fn a_column_takes_its_medians_unit() {
        assert_eq!(Unit::for_column(&[50.0, 60.0, 20_000.0]), Unit::Micros);
        assert_eq!(Unit::for_column(&[50.0, 4_000.0, 20_000.0]), Unit::Millis);
        assert_eq!(Unit::for_column(&[2e6, 3e6]), Unit::Seconds);
        assert_eq!(Unit::for_column(&[]), Unit::Micros);
    }

    #[test]
    fn three_significant_digits() {
        assert_eq!(Unit::Micros.format(61.24448), "61.2");
        assert_eq!(Unit::Micros.format(306.175), "306");
        assert_eq!(Unit::Micros.format(18.44), "18.4");
        assert_eq!(Unit::Millis.format(4_020.0), "4.02");
        assert_eq!(Unit::Millis.format(156_420.0), "156");
        assert_eq!(Unit::Seconds.format(1_500_000.0), "1.50");
        // Larger than three digits in the column's unit: whole units, nothing cut.
        assert_eq!(Unit::Micros.format(20_431.7), "20432");
        // Rounding up into a new digit keeps three digits.
        assert_eq!(Unit::Micros.format(99.96), "100");
        assert_eq!(Unit::Micros.format(9.996), "10.0");
        // A carry at the decimals' limit keeps them: 0.0051 at two decimals is 0.01.
        assert_eq!(significant(0.0051, 2), "0.01");
        assert_eq!(significant(0.81, 2), "0.81");
    }

    #[test]
    fn never_a_row_of_zeros() {
        // Below the unit: more decimals, down to the nanosecond.
        assert_eq!(Unit::Micros.format(0.0523), "0.052");
        assert_eq!(Unit::Millis.format(52.3), "0.0523");
        assert_eq!(Unit::Millis.format(0.4), "0.000400");
        // Below a nanosecond: said, not rounded away.
        assert_eq!(Unit::Micros.format(0.0004), "<0.001");
        assert_eq!(Unit::Micros.format(0.0), "0");
        for us in [0.0004, 0.004, 0.04, 0.4, 4.0, 40.0, 400.0] {
            for unit in [Unit::Micros, Unit::Millis, Unit::Seconds] {
                let text = unit.format(us);
                assert!(
                    text.starts_with('<') || text.parse::<f64>().unwrap() > 0.0,
                    "{us} µs in {unit:?} printed as {text}"
                );
            }
        }
    }

    #[test]
    fn sentences_name_the_unit() {
        assert_eq!(duration(18.44), "18.4 µs");
        assert_eq!(duration(4_020.0), "4.02 ms");
        assert_eq!(duration(2_500_000.0), "2.50 s");
        assert_eq!(duration(-1_500.0), "-1.50 ms");
        assert_eq!(ratio(1.0), "1.00");
        assert_eq!(ratio(12.34), "12.3");
    }

    #[test]
    fn rates_read_at_a_glance() {
        assert_eq!(rate(18_437.5), "18,400");
        assert_eq!(rate(9_100.0), "9,100");
        assert_eq!(rate(502.3), "502");
        assert_eq!(rate(999.6), "1,000");
        assert_eq!(rate(1_234_567.0), "1,230,000");
        assert_eq!(rate(2.5), "2.50");
        assert_eq!(rate(50.0), "50");
        assert_eq!(bytes(64), "64 B");
        assert_eq!(bytes(16 << 10), "16 KiB");
        assert_eq!(bytes(1 << 20), "1 MiB");
        assert_eq!(bytes(1536), "1.50 KiB");
        assert_eq!(rate(0.0), "0");
    }
}
