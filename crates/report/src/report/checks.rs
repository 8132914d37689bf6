//! The physics checks as JSON keeps them: the rule ([`Rule`]), the figures it read
//! ([`Figure`]) and its verdict ([`PhysicsCheck`]), with the noise a figure is held to
//! ([`spread`]).

use crate::transport::TransportKind;
use serde::{Deserialize, Serialize};

/// What a check holds the figures to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Rule {
    /// A persistent (or shared) connection's mean does not depend on the address mode: its
    /// lookup is in the warm-up.
    ModesAgree,
    /// A same-host transport (`unix`) is no slower than its network twin (`tcp`,
    /// [`Facts::network_twin`](crate::transport::Facts::network_twin)): the same frames
    /// without the TCP/IP stack. Its JSON name is the one the first such pair gave it.
    #[serde(rename = "unix-not-slower-than-tcp")]
    SameHostNotSlower,
    /// A kept connection is no slower than its fresh twin, which does the same call and
    /// also connects and closes.
    KeptNotSlowerThanFresh,
    /// A fresh call by IP is no slower than one that asks DNS first (`uncached`).
    IpNotSlowerThanLookup,
    /// A fresh call in plain is no slower than one that also does a TLS handshake.
    PlainNotSlowerThanTls,
}

impl Rule {
    /// Every rule, in the order checks are listed (and `docs/output.md` lists them).
    pub const ALL: [Rule; 5] = [
        Rule::ModesAgree,
        Rule::SameHostNotSlower,
        Rule::KeptNotSlowerThanFresh,
        Rule::IpNotSlowerThanLookup,
        Rule::PlainNotSlowerThanTls,
    ];
}

/// One figure a check reads: which run, its mean and its noise.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Figure {
    pub transport: TransportKind,
    /// The run's mode label (`ip`, `uncached tls13`, `ip c16`).
    pub mode: String,
    pub mean_us: f64,
    /// The median, µs.
    pub p50_us: f64,
    /// The mean's noise as a fraction ([`RunRecord::spread`](super::RunRecord::spread)); `null` when unknown.
    pub spread: Option<f64>,
}

/// One physics check of a run (`rpcbench::physics`): `faster` must not be slower than `slower` beyond their
/// noise, mean and median both (for [`Rule::ModesAgree`], the fastest and slowest modes by
/// mean must not differ beyond it).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PhysicsCheck {
    pub rule: Rule,
    /// The figure that must be the faster (or, for modes, the fastest mode).
    pub faster: Figure,
    /// The figure that must be the slower (or, for modes, the slowest mode).
    pub slower: Figure,
    pub pass: bool,
}

/// The z-score of a two-sided 95% confidence interval of a mean.
pub(super) const Z_95: f64 = 1.96;

/// The noise of a mean of `n` calls with standard deviation `stddev`, as a fraction of the
/// mean: the larger of the rounds' worst distance from the merged mean (run-to-run noise:
/// the placement, the CPU's clock, a neighbour, which change between rounds and which a
/// confidence interval over the calls of one round cannot see) and the 95% confidence
/// half-width of the mean (`1.96 σ / √n`, the noise of a mean of few or scattered calls).
/// `None` for a mean of no calls.
pub fn spread(mean: f64, stddev: f64, n: u64, round_means: &[f64]) -> Option<f64> {
    if n == 0 || mean <= 0.0 {
        return None;
    }
    let interval = Z_95 * stddev / (n as f64).sqrt() / mean;
    let rounds = round_means
        .iter()
        .map(|m| (m - mean).abs() / mean)
        .fold(0.0, f64::max);
    Some(interval.max(rounds))
}
