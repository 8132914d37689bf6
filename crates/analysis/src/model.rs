//! The round-trip model: a call's mean latency is a fixed cost plus round trips times the
//! path's round-trip time, `mean ≈ c + k × RTT`.
//!
//! On loopback the RTT is about zero, so a ranking of transports there ranks CPU cost.
//! Between machines the deciding number is `k`, the round trips one call waits for: a
//! fresh HTTP call waits for two (the TCP handshake, then the request), a kept-alive one
//! for one. This module says what `k` the protocol needs ([`expected_round_trips`]: one
//! function per axis, transport, address mode and security mode), fits `k` and `c` by least
//! squares from runs at two or more link RTTs (`--link-rtt`, [`fit_reports`]), and projects
//! each transport's mean at other RTTs ([`projections`]). A measured `k` more than
//! [`K_GAP`] from the expected one is a finding ([`round_trip_gaps`]).
//!
//! Layer 5 of the map in `lib.rs` (analysis): uses the record and the layers below.

use crate::report::{Report, RunRecord};
use crate::resolve::AddrMode;
use crate::transport::TransportKind;
use crate::transport::tls::Security;
use serde::{Deserialize, Serialize};

/// The RTTs of the what-if table, µs: a rack (0.1 ms), a data centre (1 ms), a region
/// (10 ms) and a continent (50 ms).
pub const WHAT_IF_RTTS_US: [f64; 4] = [100.0, 1_000.0, 10_000.0, 50_000.0];

/// How far a measured `k` may stand from the expected one before it is a finding: a tenth
/// of a round trip. An extra wait that is a whole round trip on some calls (a delayed ACK
/// behind Nagle, a 100-continue) shows up well above it, while the few hundred µs a small
/// virtual machine takes to wake after each idle wait stay below it at RTTs of 10 ms.
pub const K_GAP: f64 = 0.1;

/// Round trips one call of `kind` waits for on a plain connection by IP, as the transport
/// says ([`crate::transport::Facts::round_trips`]); `None` where the call never crosses a
/// network (`unix`).
pub fn base_round_trips(kind: TransportKind) -> Option<f64> {
    kind.facts().round_trips
}

/// Round trips to the resolver that one call of `kind` adds under `mode`: one per new
/// connection when every connection asks DNS (`uncached`, and `system` without a caching
/// daemon in front of getaddrinfo; one lookup, A only under `--family 4`, or A and AAAA
/// sent together), none by IP or from a cache. `None` under `uncached-search`, whose
/// queries per lookup depend on the search list (see `dns_lookup.queries_per_lookup`).
pub fn resolver_round_trips(kind: TransportKind, mode: AddrMode) -> Option<f64> {
    let per_connection = match mode {
        AddrMode::Ip | AddrMode::Cached => 0.0,
        AddrMode::System | AddrMode::Uncached => 1.0,
        AddrMode::UncachedSearch => return None,
    };
    Some(if kind.persistent() {
        0.0
    } else {
        per_connection
    })
}

/// Round trips the TLS handshake adds to one call of `kind` under `security`: a full TLS
/// 1.3 handshake one (ClientHello, then the server's flight; the client's Finished goes
/// with the request), a full TLS 1.2 handshake two; a resumed session one in both versions
/// (TLS 1.3 resumption without early data is still a round trip; TLS 1.2's abbreviated
/// handshake is one). Persistent transports handshake in the warm-up: none. A transport
/// with TLS built in (QUIC) counts its handshake in its own round trips: one round trip
/// carries the transport's handshake and TLS's together; with the request in early data
/// (`tls13-0rtt`) that round trip carries the call too, so a fresh connection's call
/// takes one fewer (-1 here: 2 + -1, the call's one).
pub fn handshake_round_trips(kind: TransportKind, security: Security) -> f64 {
    if kind.persistent() {
        return 0.0;
    }
    if kind.facts().tls == crate::transport::Tls::Quic {
        return if security.early_data() { -1.0 } else { 0.0 };
    }
    match security {
        Security::Plain => 0.0,
        Security::Tls13
        | Security::Tls13Resume
        | Security::Tls13ZeroRtt
        | Security::Tls12Resume
        | Security::Mtls => 1.0,
        Security::Tls12 => 2.0,
    }
}

/// The round trips one call needs: [`base_round_trips`] plus [`resolver_round_trips`]
/// plus [`handshake_round_trips`]; `None` when one of them is not known.
pub fn expected_round_trips(
    kind: TransportKind,
    mode: AddrMode,
    security: Security,
) -> Option<f64> {
    Some(
        base_round_trips(kind)?
            + resolver_round_trips(kind, mode)?
            + handshake_round_trips(kind, security),
    )
}

/// The expected round trips of a run: [`expected_round_trips`], plus one for each of its
/// calls whose QUIC handshake the server answered with a Retry ([`retried_share`]).
pub fn expected_for(r: &RunRecord) -> Option<f64> {
    Some(expected_round_trips(r.transport, r.addr_mode, r.security)? + retried_share(r))
}

/// The share of a run's calls whose new QUIC connection was sent a Retry first, which
/// costs its handshake one round trip more (RFC 9000 §8.1.2): 1 when the server validates
/// every address (`rpcbench-echo --quic-retry`), 0 where it sent none.
pub fn retried_share(r: &RunRecord) -> f64 {
    match r.quic_retries {
        Some(n) if r.calls > 0 => n as f64 / r.calls as f64,
        _ => 0.0,
    }
}

/// What a fit or a projection is about: one transport under one address mode and one
/// security mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ModelKey {
    pub transport: TransportKind,
    pub addr_mode: AddrMode,
    pub security: Security,
}

impl ModelKey {
    /// The key of a run.
    pub fn of(r: &RunRecord) -> ModelKey {
        ModelKey {
            transport: r.transport,
            addr_mode: r.addr_mode,
            security: r.security,
        }
    }

    /// How tables name it: `tcp-connect` and its modes (`ip`, `uncached tls13`), as the
    /// runs it fits are named ([`RunKey`](crate::report::RunKey)).
    pub fn mode_label(&self) -> String {
        crate::report::RunKey::plain_echo(self.transport, self.addr_mode, self.security).to_string()
    }
}

/// `k` and `c` of one transport and mode, fitted by least squares over its runs at two or
/// more link RTTs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Fit {
    pub key: ModelKey,
    /// Measured round trips per call: the slope of the mean against the link RTT.
    pub round_trips_per_call: f64,
    /// Measured fixed cost per call, µs: the mean at zero RTT (CPU, the kernel, the link's
    /// own forwarding).
    pub fixed_cost_us: f64,
    /// What the protocol needs ([`expected_round_trips`]); `None` when unknown.
    pub expected: Option<f64>,
    /// The points fitted: `[link RTT µs, mean µs]`, by RTT.
    pub points: Vec<[f64; 2]>,
}

impl Fit {
    /// The projected mean at `rtt_us`, µs.
    pub fn mean_at(&self, rtt_us: f64) -> f64 {
        self.fixed_cost_us + self.round_trips_per_call * rtt_us
    }

    /// Measured minus expected round trips; `None` without an expected value.
    pub fn gap(&self) -> Option<f64> {
        self.expected.map(|e| self.round_trips_per_call - e)
    }
}

/// The least-squares line through `(x, y)` points: `(slope, intercept)`; `None` with fewer
/// than two distinct x values, where no slope is defined.
pub fn least_squares(points: &[(f64, f64)]) -> Option<(f64, f64)> {
    let n = points.len() as f64;
    if points.len() < 2 {
        return None;
    }
    let mean_x = points.iter().map(|p| p.0).sum::<f64>() / n;
    let mean_y = points.iter().map(|p| p.1).sum::<f64>() / n;
    let sxx: f64 = points.iter().map(|p| (p.0 - mean_x).powi(2)).sum();
    // The x values are RTTs in µs; two that differ by less than a nanosecond are the same.
    if sxx < 1e-6 {
        return None;
    }
    let sxy: f64 = points.iter().map(|p| (p.0 - mean_x) * (p.1 - mean_y)).sum();
    let slope = sxy / sxx;
    Some((slope, mean_y - slope * mean_x))
}

/// Fits `k` and `c` for every transport and mode measured at two or more link RTTs among
/// `reports` (runs with `link_rtt_us` and at least one ok call); sorted by key.
pub fn fit_reports(reports: &[&Report]) -> Vec<Fit> {
    let mut groups: std::collections::BTreeMap<ModelKey, Vec<[f64; 2]>> = Default::default();
    // The calls a Retry made longer, by key: the runs across a link (a Retry costs a round
    // trip only where there is one).
    let mut retried: std::collections::BTreeMap<ModelKey, Vec<f64>> = Default::default();
    // Not the unshared twins a default run adds beside h2-mux and grpc-mux at 16 workers
    // (`h2 ip c16`): their fixed cost is not the one-worker run's of the same key, and one
    // line through both would fit neither.
    let twin = |r: &&RunRecord| r.mux_comparison && r.transport.unshared_twin().is_none();
    for r in reports.iter().flat_map(|r| &r.runs).filter(|r| !twin(r)) {
        if let (Some(rtt), Some(l)) = (r.link_rtt_us, r.latency_us) {
            groups
                .entry(ModelKey::of(r))
                .or_default()
                .push([rtt, l.mean]);
            if rtt > 0.0 {
                retried
                    .entry(ModelKey::of(r))
                    .or_default()
                    .push(retried_share(r));
            }
        }
    }
    groups
        .into_iter()
        .filter_map(|(key, mut points)| {
            points.sort_by(|a, b| a[0].total_cmp(&b[0]));
            let xy: Vec<(f64, f64)> = points.iter().map(|p| (p[0], p[1])).collect();
            let (k, c) = least_squares(&xy)?;
            Some(Fit {
                key,
                round_trips_per_call: k,
                fixed_cost_us: c,
                expected: expected_round_trips(key.transport, key.addr_mode, key.security).map(
                    |k| {
                        let shares = retried.get(&key).map_or(&[][..], Vec::as_slice);
                        k + shares.iter().sum::<f64>() / shares.len().max(1) as f64
                    },
                ),
                points,
            })
        })
        .collect()
}

/// Writes each fit's `round_trips_per_call` and `fixed_cost_us` on the runs of `report`
/// it was fitted for.
pub fn apply_fits(report: &mut Report, fits: &[Fit]) {
    for r in &mut report.runs {
        if let Some(f) = fits.iter().find(|f| f.key == ModelKey::of(r)) {
            r.round_trips_per_call = Some(f.round_trips_per_call);
            r.fixed_cost_us = Some(f.fixed_cost_us);
        }
    }
}

/// A transport and mode whose fitted round trips per call miss the protocol's by more
/// than [`K_GAP`]: above, something adds a wait on some calls; below, a cache or a reused
/// connection where a new one was expected, or a link RTT recorded wrong.
#[derive(Debug, Clone, PartialEq)]
pub struct RoundTripGap {
    pub key: ModelKey,
    /// The fitted round trips per call.
    pub fitted: f64,
    /// The protocol's.
    pub expected: f64,
}

impl RoundTripGap {
    /// True when the fit found more round trips than the protocol needs.
    pub fn above(&self) -> bool {
        self.fitted > self.expected
    }
}

/// The fits whose `k` is more than [`K_GAP`] from the protocol's.
pub fn round_trip_gaps(fits: &[Fit]) -> Vec<RoundTripGap> {
    fits.iter()
        .filter_map(|f| {
            let gap = f.gap()?;
            (gap.abs() > K_GAP).then(|| RoundTripGap {
                key: f.key,
                fitted: f.round_trips_per_call,
                expected: f.expected.unwrap_or_default(),
            })
        })
        .collect()
}

/// Where a path RTT estimate came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RttSource {
    /// The injected link RTT the run was told (`--link-rtt`).
    Link,
    /// Measured by the run: the kernel's least RTT sample or the fastest persistent call
    /// ([`crate::report::path_rtt_of_runs`]).
    Measured(crate::tcpinfo::RttSource),
}

impl std::fmt::Display for RttSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            RttSource::Link => "the link RTT given with --link-rtt",
            RttSource::Measured(crate::tcpinfo::RttSource::TcpInfo) => {
                "the least RTT the kernel sampled (TCP_INFO)"
            }
            RttSource::Measured(crate::tcpinfo::RttSource::PersistentMin) => {
                "the fastest call of a persistent transport"
            }
        })
    }
}

/// A path RTT estimate, µs, and where it came from.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PathRtt {
    pub us: f64,
    pub source: RttSource,
}

/// The path RTT of one report: its runs' `link_rtt_us` when they were told it, else what
/// the runs measured ([`crate::report::path_rtt_of_runs`]: the smaller of the kernel's
/// least RTT sample and the fastest persistent call, both upper bounds).
pub fn report_path_rtt(report: &Report) -> Option<PathRtt> {
    if let Some(us) = report.runs.iter().find_map(|r| r.link_rtt_us) {
        return Some(PathRtt {
            us,
            source: RttSource::Link,
        });
    }
    crate::report::path_rtt_of_runs(&report.runs).map(|e| PathRtt {
        us: e.us,
        source: RttSource::Measured(e.source),
    })
}

/// Where a projection's `k` and `c` come from.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ModelSource {
    /// Fitted over runs at several link RTTs.
    Fitted,
    /// The protocol's `k`, and `c` = the measured mean − k × the path RTT estimate.
    Expected(PathRtt),
}

/// One row of the what-if table: a transport's projected mean at each of
/// [`WHAT_IF_RTTS_US`].
#[derive(Debug, Clone, PartialEq)]
pub struct Projection {
    pub key: ModelKey,
    pub round_trips_per_call: f64,
    pub fixed_cost_us: f64,
    pub source: ModelSource,
    /// The projected mean at each RTT of [`WHAT_IF_RTTS_US`], µs.
    pub means_us: [f64; 4],
}

/// The model of one run from a single RTT: expected `k`, and `c` = mean − k × RTT, never
/// below zero (a path RTT estimate from the minimum can exceed what a mean leaves).
pub fn single_rtt_model(r: &RunRecord, rtt: PathRtt) -> Option<(f64, f64)> {
    let k = expected_for(r)?;
    let mean = r.latency_us?.mean;
    Some((k, (mean - k * rtt.us).max(0.0)))
}

/// The what-if rows for the runs of `reports`: from a fit where there is one, else from
/// the expected `k` and the run's own mean at its report's path RTT. One row per key, in
/// the order the runs come.
pub fn projections(reports: &[&Report], fits: &[Fit]) -> Vec<Projection> {
    let mut rows: Vec<Projection> = Vec::new();
    for report in reports {
        let rtt = report_path_rtt(report);
        for r in &report.runs {
            let key = ModelKey::of(r);
            if rows.iter().any(|p| p.key == key) {
                continue;
            }
            let model = match fits.iter().find(|f| f.key == key) {
                Some(f) => Some((f.round_trips_per_call, f.fixed_cost_us, ModelSource::Fitted)),
                None => rtt.and_then(|rtt| {
                    single_rtt_model(r, rtt).map(|(k, c)| (k, c, ModelSource::Expected(rtt)))
                }),
            };
            if let Some((k, c, source)) = model {
                rows.push(Projection {
                    key,
                    round_trips_per_call: k,
                    fixed_cost_us: c,
                    source,
                    means_us: WHAT_IF_RTTS_US.map(|rtt| c + k * rtt),
                });
            }
        }
    }
    rows
}

/// The smallest link RTT a truth check of the model is made at, µs: below 2 ms the few
/// hundred µs a loaded virtual machine takes to wake after an idle wait are a large share
/// of the rise, and the check would judge the host, not the protocol.
pub const RTT_CHECK_MIN_US: f64 = 2_000.0;
/// Share of the expected mean a run across the link may be off by.
pub const RTT_CHECK_SHARE: f64 = 0.05;
/// And a floor on the margin, µs: the timer and wake-up slack of a few releases per call.
pub const RTT_CHECK_FLOOR_US: f64 = 100.0;

/// The truth check of one run at link RTT `rtt_us`: its mean must be `c0 + k × rtt_us`
/// (`c0` the mean of the same transport and mode without a delay, `k` the protocol's)
/// within [`RTT_CHECK_SHARE`] of that plus [`RTT_CHECK_FLOOR_US`]. Returns the expected
/// mean and the margin, µs.
pub fn rtt_expectation(c0_us: f64, k: f64, rtt_us: f64) -> (f64, f64) {
    let expected = c0_us + k * rtt_us;
    (expected, RTT_CHECK_SHARE * expected + RTT_CHECK_FLOOR_US)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expected_table() {
        use TransportKind as T;
        let k = |t, m, s| expected_round_trips(t, m, s);
        assert_eq!(k(T::Tcp, AddrMode::Ip, Security::Plain), Some(1.0));
        assert_eq!(k(T::TcpConnect, AddrMode::Ip, Security::Plain), Some(2.0));
        assert_eq!(
            k(T::HttpFresh, AddrMode::Uncached, Security::Plain),
            Some(3.0)
        );
        assert_eq!(
            k(T::HttpKeepalive, AddrMode::Uncached, Security::Tls12),
            Some(1.0)
        );
        assert_eq!(
            k(T::CurlFresh, AddrMode::Cached, Security::Tls12),
            Some(4.0)
        );
        assert_eq!(k(T::TcpConnect, AddrMode::Ip, Security::Tls13), Some(3.0));
        assert_eq!(k(T::Unix, AddrMode::Ip, Security::Plain), None);
        assert_eq!(
            k(T::HttpFresh, AddrMode::UncachedSearch, Security::Plain),
            None
        );
        for t in TransportKind::ALL {
            if t != T::Unix {
                assert!(base_round_trips(t).is_some(), "{t}");
            }
        }
    }

    #[test]
    fn least_squares_recovers_a_line() {
        assert_eq!(least_squares(&[(0.0, 5.0)]), None);
        assert_eq!(least_squares(&[(2.0, 5.0), (2.0, 7.0)]), None);
        let (k, c) = least_squares(&[(0.0, 150.0), (2000.0, 4150.0), (5000.0, 10150.0)]).unwrap();
        assert!(
            (k - 2.0).abs() < 1e-9 && (c - 150.0).abs() < 1e-6,
            "{k} {c}"
        );
        // Noise above and below the line cancels.
        let (k, c) = least_squares(&[
            (0.0, 90.0),
            (0.0, 110.0),
            (1000.0, 1090.0),
            (1000.0, 1110.0),
        ])
        .unwrap();
        assert!(
            (k - 1.0).abs() < 1e-9 && (c - 100.0).abs() < 1e-6,
            "{k} {c}"
        );
    }

    #[test]
    fn path_rtt_prefers_the_link_then_what_the_runs_measured() {
        let mut report: Report =
            serde_json::from_str(include_str!("../../../tests/fixtures/report.json")).unwrap();
        let measured = report_path_rtt(&report).expect("the fixture has persistent runs");
        assert!(matches!(measured.source, RttSource::Measured(_)));
        assert_eq!(
            Some(measured.us),
            crate::report::path_rtt_of_runs(&report.runs).map(|e| e.us)
        );
        report.runs[0].link_rtt_us = Some(2000.0);
        let told = report_path_rtt(&report).unwrap();
        assert_eq!((told.us, told.source), (2000.0, RttSource::Link));
    }
}
