//! `TCP_INFO` of a run's own TCP connections: what the kernel saw of the path (smoothed
//! and minimum RTT) and of loss (retransmitted segments, a connect's retried SYN), summed
//! over the run, and the path RTT estimate built from it.
//!
//! Every TCP connection rpcbench's transports open (blocking or tokio, plain or TLS)
//! carries a [`Probe`]: it reads `TCP_INFO` once when the connect completes (the segments
//! retransmitted by then are the SYN's) and once just before the socket is closed, so the
//! counts cover the whole connection, and adds the second reading to the run's
//! [`TcpInfoTally`]. No per-call or per-connection vectors: sums, counts and minimums.
//! libcurl's transports are not probed: the `curl` crate does not expose
//! `CURLINFO_ACTIVESOCKET`, so their sockets are out of reach.
//!
//! Layer 2 of the map in `lib.rs` (server and readings): uses the kinds and units only.

use crate::sys::tcp_info::{TcpInfo, tcp_info};
use serde::{Deserialize, Serialize};
use std::os::fd::BorrowedFd;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The initial SYN retransmission timeout of Linux (`TCP_TIMEOUT_INIT`, RFC 6298's 1 s):
/// a connect whose first SYN (or its SYN-ACK) is lost takes at least this long.
pub const SYN_TIMEOUT_US: f64 = 1_000_000.0;

/// [`SYN_TIMEOUT_US`] as a duration: the least time a connect that retransmitted its SYN
/// took.
const SYN_TIMEOUT: Duration = Duration::from_secs(1);

/// The run's sums, shared by every connection of the run (each adds itself once, when it
/// closes), so a connection closed on any thread (a hyper task, a shared connection's
/// runtime) is counted. A mutex rather than atomics: it is taken once per connection,
/// and the minimums need a compare anyway.
#[derive(Debug, Default)]
pub struct TcpInfoTally(Mutex<TcpInfoRecord>);

impl TcpInfoTally {
    /// The sums so far.
    pub fn snapshot(&self) -> TcpInfoRecord {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Adds one closing reading (or the failure to read one).
    fn add(&self, reading: std::io::Result<TcpInfo>, syn_retransmits: u32) {
        let mut sums = self.0.lock().unwrap_or_else(|p| p.into_inner());
        match reading {
            Ok(info) => sums.add(&info, syn_retransmits),
            Err(_) => sums.read_errors += 1,
        }
    }
}

/// One connection's link to its run's [`TcpInfoTally`], made when its connect completes
/// and spent when it closes. The socket types that own a probe call [`Probe::close`] from
/// their `Drop`, while the descriptor is still open.
#[derive(Debug)]
pub struct Probe {
    /// The run's sums.
    tally: Arc<TcpInfoTally>,
    /// Segments retransmitted by the time the connect completed: the SYN's.
    syn_retransmits: u32,
    /// Set once the closing reading is in the tally, so it is added once.
    closed: bool,
}

impl Probe {
    /// A probe for the connection on `fd`, whose connect has just completed after
    /// `connect` (connect(2) to its completion).
    ///
    /// A connect shorter than the first SYN's retransmission timeout retransmitted
    /// nothing, so it is not read then: one `getsockopt` less in a `tcp-connect` call,
    /// whose time it is part of (0.38 µs each here, about 1% of a loopback call).
    pub fn opened(tally: &Arc<TcpInfoTally>, fd: BorrowedFd<'_>, connect: Duration) -> Probe {
        let syn_retransmits = if connect < SYN_TIMEOUT {
            0
        } else {
            // A failed read here is counted when the closing one fails too; alone, it
            // only loses the SYN count of one connection.
            tcp_info(fd).map_or(0, |i| i.total_retrans)
        };
        Probe {
            tally: tally.clone(),
            syn_retransmits,
            closed: false,
        }
    }

    /// Reads the connection's `TCP_INFO` one last time and adds it to the run's sums;
    /// later calls do nothing.
    pub fn close(&mut self, fd: BorrowedFd<'_>) {
        if !std::mem::replace(&mut self.closed, true) {
            self.tally.add(tcp_info(fd), self.syn_retransmits);
        }
    }
}

/// A run's `TCP_INFO` (`tcp_info` on a run in the report): what its connections' kernels
/// saw, read when each connection closed; also the run's running sums while it goes
/// ([`TcpInfoTally`]), merged over rounds with `+=`. Present on TCP transports rpcbench owns the
/// socket of; absent on `unix`, `udp` and the libcurl transports.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TcpInfoRecord {
    /// Connections whose `TCP_INFO` was read when they closed (equals `connects` when
    /// every connection was read).
    pub connections_sampled: u64,
    /// Calls those connections carried, warm-up included (the readings cover whole
    /// connections, warm-up too).
    pub calls: u64,
    /// Segments retransmitted (`tcpi_total_retrans`, summed), SYNs included.
    pub retransmits: u64,
    /// `retransmits` over `calls`.
    pub retransmits_per_call: f64,
    /// Connections that retransmitted at least one segment.
    pub retransmitting_connections: u64,
    /// SYNs retransmitted: segments retransmitted before the connect completed.
    pub syn_retransmits: u64,
    /// Connections whose connect retransmitted its SYN; each waited at least
    /// [`SYN_TIMEOUT_US`] for it.
    pub syn_retransmitting_connections: u64,
    /// `tcpi_lost` at close, summed: segments still counted lost.
    pub lost: u64,
    /// Retransmission timeouts (`tcpi_total_rto`, summed; 0 on kernels before 6.7).
    pub timeouts: u64,
    /// Segments sent (`tcpi_segs_out`, summed), retransmits included.
    pub segs_out: u64,
    /// Bytes sent and acknowledged (`tcpi_bytes_acked`, summed): the wire's payload
    /// bytes this side sent (headers, framing and TLS included), plus one for each SYN
    /// (read before the connection closes, so no FIN).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub bytes_acked: u64,
    /// Bytes received (`tcpi_bytes_received`, summed): the peer's SYN is not counted.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub bytes_received: u64,
    /// Smallest smoothed RTT (`tcpi_rtt`) at close, µs.
    pub rtt_us_min: Option<f64>,
    /// Mean smoothed RTT at close over the connections, µs.
    pub rtt_us_mean: Option<f64>,
    /// Smallest RTT sample any connection took (`tcpi_min_rtt`), µs.
    pub min_rtt_us: Option<f64>,
    /// Connections whose `TCP_INFO` could not be read.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub read_errors: u64,
}

/// For `skip_serializing_if`.
fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl TcpInfoRecord {
    /// Adds one connection's closing reading; `syn_retransmits` is what it had
    /// retransmitted when its connect completed. `calls` and `retransmits_per_call` are
    /// set by [`TcpInfoRecord::carrying`].
    pub fn add(&mut self, info: &TcpInfo, syn_retransmits: u32) {
        let n = self.connections_sampled as f64;
        let rtt = f64::from(info.rtt_us);
        self.rtt_us_mean = Some((self.rtt_us_mean.unwrap_or(0.0) * n + rtt) / (n + 1.0));
        self.connections_sampled += 1;
        self.retransmits += u64::from(info.total_retrans);
        self.retransmitting_connections += u64::from(info.total_retrans > 0);
        self.syn_retransmits += u64::from(syn_retransmits);
        self.syn_retransmitting_connections += u64::from(syn_retransmits > 0);
        self.lost += u64::from(info.lost);
        self.timeouts += u64::from(info.total_rto.unwrap_or(0));
        self.segs_out += u64::from(info.segs_out.unwrap_or(0));
        self.bytes_acked += info.bytes_acked.unwrap_or(0);
        self.bytes_received += info.bytes_received.unwrap_or(0);
        self.rtt_us_min = min_some(self.rtt_us_min, Some(rtt));
        self.min_rtt_us = min_some(self.min_rtt_us, info.min_rtt_us.map(f64::from));
    }

    /// The record as the report has it, for connections that carried `calls` calls;
    /// `None` when no connection was read (a transport whose sockets rpcbench cannot
    /// reach).
    pub fn carrying(&self, calls: u64) -> Option<TcpInfoRecord> {
        if self.connections_sampled == 0 && self.read_errors == 0 {
            return None;
        }
        let per_call = if calls > 0 {
            self.retransmits as f64 / calls as f64
        } else {
            0.0
        };
        Some(TcpInfoRecord {
            calls,
            retransmits_per_call: per_call,
            ..self.clone()
        })
    }

    /// The least RTT this run's kernels saw, µs: `tcpi_min_rtt`, else the least smoothed
    /// RTT (a kernel before 4.9).
    pub fn least_rtt_us(&self) -> Option<f64> {
        self.min_rtt_us.or(self.rtt_us_min)
    }
}

/// The smaller of two optional values, or the one that is there.
fn min_some(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

impl std::ops::AddAssign<&TcpInfoRecord> for TcpInfoRecord {
    /// Merges another round's connections (`calls` and the per-call figure are set
    /// afterwards, by [`TcpInfoRecord::carrying`]).
    fn add_assign(&mut self, o: &TcpInfoRecord) {
        let (n, m) = (
            self.connections_sampled as f64,
            o.connections_sampled as f64,
        );
        self.rtt_us_mean = match (self.rtt_us_mean, o.rtt_us_mean) {
            (Some(a), Some(b)) => Some((a * n + b * m) / (n + m)),
            (a, b) => a.or(b),
        };
        self.connections_sampled += o.connections_sampled;
        self.read_errors += o.read_errors;
        self.retransmits += o.retransmits;
        self.retransmitting_connections += o.retransmitting_connections;
        self.syn_retransmits += o.syn_retransmits;
        self.syn_retransmitting_connections += o.syn_retransmitting_connections;
        self.lost += o.lost;
        self.timeouts += o.timeouts;
        self.segs_out += o.segs_out;
        self.bytes_acked += o.bytes_acked;
        self.bytes_received += o.bytes_received;
        self.rtt_us_min = min_some(self.rtt_us_min, o.rtt_us_min);
        self.min_rtt_us = min_some(self.min_rtt_us, o.min_rtt_us);
    }
}

/// Where a [`PathRttEstimate`] came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RttSource {
    /// The kernel's least RTT sample (`tcpi_min_rtt`) over the runs' connections.
    TcpInfo,
    /// The least latency of a persistent transport's call: one request and its reply,
    /// so the path RTT plus both ends' CPU time.
    PersistentMin,
}

impl RttSource {
    /// The stable name, as in the JSON.
    pub fn name(self) -> &'static str {
        match self {
            RttSource::TcpInfo => "tcp_info",
            RttSource::PersistentMin => "persistent_min",
        }
    }
}

/// An estimate of the network path's round-trip time, with where it came from.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PathRttEstimate {
    /// The estimate, µs.
    pub us: f64,
    /// Which measurement gave it.
    pub source: RttSource,
}

/// Estimates the path RTT from the least RTT the kernel sampled on any connection
/// (`tcp_min_rtt_us`, from [`TcpInfoRecord::least_rtt_us`]) and the least latency of a
/// persistent transport's call (`persistent_min_us`). Both are upper bounds on the path
/// RTT: the kernel's sample adds the peer's ACK handling (and a delayed ACK, which the
/// minimum filters out), a call adds both ends' CPU. So the estimate is the smaller of the
/// two, and says which; `None` when neither was measured.
pub fn path_rtt_estimate(
    tcp_min_rtt_us: Option<f64>,
    persistent_min_us: Option<f64>,
) -> Option<PathRttEstimate> {
    let tcp = tcp_min_rtt_us
        .filter(|us| *us > 0.0)
        .map(|us| PathRttEstimate {
            us,
            source: RttSource::TcpInfo,
        });
    let call = persistent_min_us
        .filter(|us| *us > 0.0)
        .map(|us| PathRttEstimate {
            us,
            source: RttSource::PersistentMin,
        });
    match (tcp, call) {
        (Some(t), Some(c)) => Some(if c.us < t.us { c } else { t }),
        (t, c) => t.or(c),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(rtt: u32, min: u32, retrans: u32) -> TcpInfo {
        TcpInfo {
            state: 1,
            rtt_us: rtt,
            min_rtt_us: Some(min),
            total_retrans: retrans,
            segs_out: Some(10),
            ..TcpInfo::default()
        }
    }

    #[test]
    fn sums_merge_and_summarise() {
        let mut a = TcpInfoRecord::default();
        a.add(&info(40, 20, 0), 0);
        a.add(&info(60, 30, 2), 1);
        let mut b = TcpInfoRecord::default();
        b.add(&info(10, 5, 1), 0);
        a += &b;
        let r = a.carrying(6).unwrap();
        assert_eq!(r.connections_sampled, 3);
        assert_eq!(r.retransmits, 3);
        assert_eq!(r.retransmitting_connections, 2);
        assert_eq!(r.syn_retransmits, 1);
        assert_eq!(r.syn_retransmitting_connections, 1);
        assert_eq!(r.segs_out, 30);
        assert_eq!(r.retransmits_per_call, 0.5);
        assert_eq!(r.rtt_us_min, Some(10.0));
        assert!((r.rtt_us_mean.unwrap() - 110.0 / 3.0).abs() < 1e-9);
        assert_eq!(r.least_rtt_us(), Some(5.0));
        assert_eq!(TcpInfoRecord::default().carrying(6), None);
    }

    #[test]
    fn estimate_takes_the_smaller_bound_and_names_it() {
        assert_eq!(path_rtt_estimate(None, None), None);
        let e = path_rtt_estimate(Some(2000.0), Some(2100.0)).unwrap();
        assert_eq!((e.us, e.source), (2000.0, RttSource::TcpInfo));
        let e = path_rtt_estimate(Some(90.0), Some(30.0)).unwrap();
        assert_eq!((e.us, e.source), (30.0, RttSource::PersistentMin));
        let e = path_rtt_estimate(Some(0.0), Some(30.0)).unwrap();
        assert_eq!(e.source, RttSource::PersistentMin);
        assert_eq!(path_rtt_estimate(Some(7.0), None).unwrap().us, 7.0);
    }
}
