//! Figures from established tools measured beside rpcbench, and the limit they are judged
//! by: what the report's peer table and the peer finding read.

use crate::transport::TransportKind;
use crate::transport::tls::Security;
use serde::{Deserialize, Serialize};

/// rpcbench may be at most this many times slower than an established tool measuring the
/// same thing, or the tool itself is what is being measured. The one place the limit is
/// written: `report/peers.sh` only measures, and this judges.
pub const PEER_RATIO_LIMIT: f64 = 1.3;

/// Figures from established tools measured beside rpcbench on the same machines and
/// placement, round by round, as `report/peers.sh --json` writes them. Only raw round
/// means: the medians and the verdict are computed here, once.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Peers {
    /// Core placement the peers (and rpcbench beside them) ran with, e.g. `same core (CPU 0)`.
    pub placement: String,
    /// One entry per (transport, peer) pair.
    pub pairs: Vec<PeerPair>,
}

/// One peer measured against one rpcbench transport, over the same rounds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PeerPair {
    /// The rpcbench transport it is compared with.
    pub transport: TransportKind,
    /// The security mode that transport ran under (`tls13`); left out when `plain`.
    #[serde(default, skip_serializing_if = "crate::report::is_plain")]
    pub security: Security,
    /// Calls in flight on each side (rpcbench's `-c`, h2load's `-m`, wrk's `-c`); left out
    /// when 1.
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub workers: u32,
    /// The tool, e.g. `sockperf ping-pong`.
    pub peer: String,
    /// The exact commands the peer (and its server) ran.
    pub command: String,
    /// rpcbench's mean round trip for this transport in each round, µs.
    pub rpcbench_round_means_us: Vec<f64>,
    /// The peer's mean round trip in each round, µs.
    pub peer_round_means_us: Vec<f64>,
}

fn one() -> u32 {
    1
}

fn is_one(n: &u32) -> bool {
    *n == 1
}

/// The median of some figures (the mean of the middle two for an even count); `None` for
/// none. A median of round means lets one round disturbed by the host, for either side,
/// not decide a pair once there are three rounds or more.
pub fn median(values: &[f64]) -> Option<f64> {
    let mut v: Vec<f64> = values.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(v[n / 2]),
        _ => Some((v[n / 2 - 1] + v[n / 2]) / 2.0),
    }
}

impl PeerPair {
    /// The transport, with its security mode after it when that is not `plain` and its
    /// calls in flight when more than one (`tcp-connect tls13`, `h2-mux -c 256`).
    pub fn name(&self) -> String {
        let mut name = self.transport.to_string();
        if self.security.is_tls() {
            name = format!("{name} {}", self.security);
        }
        if self.workers > 1 {
            name = format!("{name} -c {}", self.workers);
        }
        name
    }

    /// rpcbench's median over the rounds, µs.
    pub fn rpcbench_us(&self) -> Option<f64> {
        median(&self.rpcbench_round_means_us)
    }

    /// The peer's median over the rounds, µs.
    pub fn peer_us(&self) -> Option<f64> {
        median(&self.peer_round_means_us)
    }

    /// rpcbench's median over the peer's.
    pub fn ratio(&self) -> Option<f64> {
        Some(self.rpcbench_us()? / self.peer_us().filter(|&p| p > 0.0)?)
    }

    /// Whether the ratio is within [`PEER_RATIO_LIMIT`]; `None` without figures.
    pub fn within_limit(&self) -> Option<bool> {
        self.ratio().map(|r| r <= PEER_RATIO_LIMIT)
    }
}
