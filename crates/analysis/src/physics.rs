//! Physics checks inside a run: orderings of figures that the protocols fix, whatever the
//! host, checked against each figure's noise.
//!
//! A persistent connection looks its name up once, in the warm-up, so its mean cannot
//! depend on the address mode; a Unix socket skips the whole TCP/IP stack, so it is never
//! slower than TCP on the same host; a new connection per call does all a kept one does and
//! more; an uncached lookup adds a query to every fresh call; a TLS handshake adds work to
//! a fresh call. When a run breaks one of these beyond the noise of its figures, the
//! figures are not what they claim to be (placement, the CPU's clock, a noisy neighbour),
//! and the run says so: `coherent: false` in the JSON, one line after the table, and a
//! failed truth check in `rpcbench report`.
//!
//! [`differs`] is also what the findings use to tell a difference from noise. The checks'
//! records ([`PhysicsCheck`]) are the report's; their words are the renderers'.
//!
//! Layer 5 of the map in `lib.rs` (analysis): uses the record and the layers below; it returns values and writes no words.

use crate::report::{Figure, PhysicsCheck, Report, Rule, RunRecord};
use crate::resolve::AddrMode;
use crate::transport::TransportKind;
use crate::transport::tls::Security;

/// The least noise a mean is taken to carry, as a fraction of it: the spread of a few
/// interleaved rounds understates what a run-to-run comparison meets (three rounds sample
/// the host's drift three times), and pinned runs of one command on a quiet 2-vCPU VM
/// still moved by up to this much between rounds.
pub const MIN_NOISE: f64 = 0.03;

/// True when means `a` and `b`, with spreads `sa` and `sb` (fractions of each mean, see
/// [`crate::report::spread`]), differ by more than their noise: by more than the two
/// half-widths added, each at least [`MIN_NOISE`].
pub fn differs(a: f64, sa: Option<f64>, b: f64, sb: Option<f64>) -> bool {
    let noise = |m: f64, s: Option<f64>| m.abs() * s.unwrap_or(0.0).max(MIN_NOISE);
    (a - b).abs() > noise(a, sa) + noise(b, sb)
}

/// True when runs `a` and `b` both have a mean and the means differ beyond their noise.
pub fn runs_differ(a: &RunRecord, b: &RunRecord) -> bool {
    match (a.latency_us, b.latency_us) {
        (Some(la), Some(lb)) => differs(la.mean, a.spread, lb.mean, b.spread),
        _ => false,
    }
}

/// True when the latency of `a` sits beyond `b`'s by more than the noise as a whole: the
/// means differ beyond their noise, and so do the medians (taken with the same noise). A
/// misplaced thread, a slower clock or a neighbour moves every call, the median with
/// them; a few outliers of a millisecond move a mean of a thousand 20 µs calls by 5% and
/// leave the median where it was, which is noise, not a contradiction.
fn shifted(a: &Figure, b: &Figure) -> bool {
    differs(a.mean_us, a.spread, b.mean_us, b.spread)
        && differs(a.p50_us, a.spread, b.p50_us, b.spread)
}

/// One figure of `r` for a check: which run, its mean, median and noise.
fn figure(r: &RunRecord) -> Option<Figure> {
    Some(Figure {
        transport: r.transport,
        mode: r.mode_label(),
        mean_us: r.latency_us?.mean,
        p50_us: r.latency_us?.p50,
        spread: r.spread,
    })
}

/// Checks that `faster` is no slower than `slower` beyond the noise.
fn ordered(rule: Rule, faster: &RunRecord, slower: &RunRecord) -> Option<PhysicsCheck> {
    let (f, s) = (figure(faster)?, figure(slower)?);
    let pass = f.mean_us <= s.mean_us || f.p50_us <= s.p50_us || !shifted(&f, &s);
    Some(PhysicsCheck {
        rule,
        faster: f,
        slower: s,
        pass,
    })
}

/// Checks that the fastest and the slowest of `runs` agree within the noise.
fn agree(rule: Rule, runs: &[&RunRecord]) -> Option<PhysicsCheck> {
    let with_mean: Vec<(&RunRecord, f64)> = runs
        .iter()
        .filter_map(|r| Some((*r, r.latency_us?.mean)))
        .collect();
    if with_mean.len() < 2 {
        return None;
    }
    let lo = with_mean.iter().min_by(|a, b| a.1.total_cmp(&b.1))?.0;
    let hi = with_mean.iter().max_by(|a, b| a.1.total_cmp(&b.1))?.0;
    let (faster, slower) = (figure(lo)?, figure(hi)?);
    Some(PhysicsCheck {
        rule,
        pass: !shifted(&faster, &slower),
        faster,
        slower,
    })
}

/// The run's own checks: every rule, over every pair of runs it applies to. Runs that
/// failed a call are left out (a timeout's wait is not the protocol's), as are runs paced
/// with `--rate` or delayed by the server, where a mean is set by the schedule, and
/// encoded runs (`--encoding`), whose figures are their messages' as much as their
/// transports'.
pub fn checks(report: &Report) -> Vec<PhysicsCheck> {
    if report.config.rate_per_s.is_some() || report.config.delay_us > 0 {
        return Vec::new();
    }
    let runs: Vec<&RunRecord> = report
        .runs
        .iter()
        // The orderings are the transports' on the opaque echo; an encoded run's figure
        // is its message's too.
        .filter(|r| r.failed() == 0 && r.latency_us.is_some() && r.encoding.is_none())
        .collect();
    let find = |t: TransportKind, mode: AddrMode, sec: Security, like: &RunRecord| {
        runs.iter().copied().find(|r| {
            r.transport == t
                && r.addr_mode == mode
                && r.security == sec
                && r.workers == like.workers
                && r.mux_comparison == like.mux_comparison
        })
    };
    let mut out = Vec::new();
    // Modes: one check per persistent run group (transport, security, workers).
    let mut groups: Vec<Vec<&RunRecord>> = Vec::new();
    for r in runs
        .iter()
        .copied()
        .filter(|r| r.transport.persistent() || r.transport.shared())
    {
        match groups.iter_mut().find(|g| {
            let f = g[0];
            f.transport == r.transport
                && f.security == r.security
                && f.workers == r.workers
                && f.mux_comparison == r.mux_comparison
        }) {
            Some(g) => g.push(r),
            None => groups.push(vec![r]),
        }
    }
    out.extend(groups.iter().filter_map(|g| agree(Rule::ModesAgree, g)));
    for &r in &runs {
        let (mode, sec) = (r.addr_mode, r.security);
        let pair = match r.transport.network_twin() {
            Some(net) => find(net, mode, sec, r).map(|net| (Rule::SameHostNotSlower, r, net)),
            None => r
                .transport
                .fresh_twin()
                .and_then(|fresh| find(fresh, mode, sec, r))
                .map(|fresh| (Rule::KeptNotSlowerThanFresh, r, fresh)),
        };
        out.extend(pair.and_then(|(rule, f, s)| ordered(rule, f, s)));
        if !r.transport.persistent() && !r.transport.shared() {
            // A fresh transport: by IP against uncached, plain against each TLS mode.
            if mode == AddrMode::Ip
                && let Some(u) = find(r.transport, AddrMode::Uncached, sec, r)
            {
                out.extend(ordered(Rule::IpNotSlowerThanLookup, r, u));
            }
            if sec == Security::Plain {
                for tls in runs.iter().copied().filter(|x| {
                    x.transport == r.transport
                        && x.addr_mode == mode
                        && x.security.is_tls()
                        && x.workers == r.workers
                }) {
                    out.extend(ordered(Rule::PlainNotSlowerThanTls, r, tls));
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn differences_within_the_noise_are_none() {
        // 100 ± 5% and 108 ± 5%: 8 apart, within 5 + 5.4.
        assert!(!differs(100.0, Some(0.05), 108.0, Some(0.05)));
        // 100 ± 1% and 108 ± 1%: the floor makes each ±3%, and 8 is past 3 + 3.24.
        assert!(differs(100.0, Some(0.01), 108.0, Some(0.01)));
        // Within the floor: 100 and 105 are no measurable difference.
        assert!(!differs(100.0, None, 105.0, None));
        assert!(differs(100.0, None, 200.0, None));
    }
}
