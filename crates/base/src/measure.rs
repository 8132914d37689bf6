//! What one worker (and, merged, one transport) measured: HDR histograms of latency and of
//! each phase, and the outcome of every call.
//!
//! Each thread of the load engine fills its own [`Tally`] with no sharing (a worker thread,
//! or an event-loop thread for all of its connections: a `Tally` holds about 1 MB of
//! histograms, so one per connection would cost 10 GB at 10,000 connections); the runner
//! merges them with `+=` at the end, so the hot loop never touches another thread's memory.
//!
//! Layer 1 of the map in `lib.rs` (kinds and units): uses nothing above it.

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::ops::AddAssign;
use std::time::Duration;

/// Lowest discernible value, in the histograms' unit of nanoseconds. It must be 1 rather
/// than 1 µs: HdrHistogram's resolution at the bottom of the range is the largest power of
/// two below this value, and 512 ns steps would be a 10% error on a 5 µs round trip.
/// Costs about 220 KB per histogram.
const HIST_LOW_NS: u64 = 1;
/// Highest latency recorded exactly: 60 s; anything longer is recorded as 60 s.
const HIST_HIGH_NS: u64 = 60_000_000_000;
/// Significant digits kept: 3 gives 0.1% resolution at every magnitude.
const HIST_SIGFIG: u8 = 3;
/// How many seqs of each kind of failed call are kept for the report.
pub const KEPT_SEQS: usize = 100;

/// A latency histogram in nanoseconds.
#[derive(Debug, Clone)]
pub struct Hist(Histogram<u64>);

impl Default for Hist {
    fn default() -> Self {
        Hist(
            Histogram::new_with_bounds(HIST_LOW_NS, HIST_HIGH_NS, HIST_SIGFIG)
                .expect("constant bounds are valid"),
        )
    }
}

impl Hist {
    /// Records one duration (saturating at the top of the range).
    #[inline]
    pub fn record(&mut self, d: Duration) {
        self.0
            .saturating_record(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
    }

    /// Number of values recorded.
    pub fn len(&self) -> u64 {
        self.0.len()
    }

    /// True when nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The summary in microseconds, or `None` when nothing was recorded.
    pub fn summary(&self) -> Option<Summary> {
        if self.0.is_empty() {
            return None;
        }
        let us = |ns: u64| ns as f64 / 1e3;
        let h = &self.0;
        Some(Summary {
            min: us(h.min()),
            mean: h.mean() / 1e3,
            p50: us(h.value_at_quantile(0.50)),
            p90: us(h.value_at_quantile(0.90)),
            p99: us(h.value_at_quantile(0.99)),
            p999: us(h.value_at_quantile(0.999)),
            max: us(h.max()),
            stddev: h.stdev() / 1e3,
        })
    }

    /// The value (µs) at each of `quantiles`, for percentile curves.
    pub fn quantiles_us(&self, quantiles: &[f64]) -> Vec<f64> {
        quantiles
            .iter()
            .map(|&q| self.0.value_at_quantile(q) as f64 / 1e3)
            .collect()
    }
}

impl AddAssign<&Hist> for Hist {
    fn add_assign(&mut self, other: &Hist) {
        // Same bounds on both sides, so adding cannot fail.
        self.0.add(&other.0).expect("histograms share bounds");
    }
}

/// The usual latency statistics, in microseconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Summary {
    pub min: f64,
    pub mean: f64,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub p999: f64,
    pub max: f64,
    pub stddev: f64,
}

/// The phases a call's time is split into, where a transport can see them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Resolving the target's name, on calls that looked it up.
    Dns,
    /// Opening the TCP connection.
    Connect,
    /// The TLS handshake after the connect, on calls that opened a TLS connection.
    Tls,
    /// QUIC's handshake, on calls that opened a QUIC connection: the transport's and TLS
    /// 1.3's in one (QUIC has no connect or TLS phase of its own). Under `tls13-0rtt`, the
    /// time until the request could go, in early data.
    Handshake,
    /// From starting to send the request to the first byte of the reply.
    FirstByte,
    /// Time the server says it spent (`server_ns` or `server-timing`).
    Server,
    /// Encoding the request (`--encoding`): the codec alone, on the client.
    Encode,
    /// Decoding the reply (`--encoding`): the codec alone, on the client.
    Decode,
    /// Decoding the request, as the server says it took (`dec` in `server-timing`, or
    /// the frame trailer's `dec_ns`): part of `server`.
    ServerDecode,
    /// Encoding the reply, as the server says it took (`enc`, `enc_ns`): part of `server`.
    ServerEncode,
}

impl Phase {
    /// Every phase, in the order tables show them.
    pub const ALL: [Phase; 10] = [
        Phase::Dns,
        Phase::Connect,
        Phase::Tls,
        Phase::Handshake,
        Phase::FirstByte,
        Phase::Server,
        Phase::Encode,
        Phase::Decode,
        Phase::ServerDecode,
        Phase::ServerEncode,
    ];

    /// The stable name (JSON key).
    pub fn name(self) -> &'static str {
        match self {
            Phase::Dns => "dns",
            Phase::Connect => "connect",
            Phase::Tls => "tls",
            Phase::Handshake => "handshake",
            Phase::FirstByte => "first_byte",
            Phase::Server => "server",
            Phase::Encode => "encode",
            Phase::Decode => "decode",
            Phase::ServerDecode => "server_decode",
            Phase::ServerEncode => "server_encode",
        }
    }
}

/// How one measured call ended. Every call ends in exactly one of these.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// A verified reply.
    Ok,
    /// Sent, but no reply: timeout, or the connection closed first.
    Lost,
    /// A reply came but was not the right one: wrong seq or wrong bytes.
    Mismatched,
    /// The call failed before or instead of a reply; the kind says how.
    Error(ErrorKind),
}

/// How a failed call failed, as the key it is counted under in tables, JSON and metrics
/// (`connect_refused`, `http_503`, ...). A value, so counting a failed call allocates
/// nothing; the client's `CallError::kind` picks it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ErrorKind {
    /// A kind with a fixed key: `connect_refused`, `protocol`, `dns_timeout`, a TLS
    /// failure's kind, a named gRPC status, ...
    Named(&'static str),
    /// An HTTP status other than 200: `http_503`.
    HttpStatus(u16),
    /// A non-zero frame status: `status_3`.
    FrameStatus(u8),
    /// A gRPC status code without a name: `grpc_17`.
    GrpcStatus(u8),
    /// A reply its encoding could not read: `decode_json`.
    Decode(crate::encoding::EncodingKind),
    /// A reply in its encoding's error form: `jsonrpc_-32601`.
    Fault(crate::encoding::FaultKind),
}

impl ErrorKind {
    /// The key, borrowed when it is fixed.
    pub fn key(self) -> std::borrow::Cow<'static, str> {
        match self {
            ErrorKind::Named(key) => key.into(),
            ErrorKind::HttpStatus(code) => format!("http_{code}").into(),
            ErrorKind::FrameStatus(code) => format!("status_{code}").into(),
            ErrorKind::GrpcStatus(code) => format!("grpc_{code}").into(),
            ErrorKind::Decode(encoding) => format!("decode_{encoding}").into(),
            ErrorKind::Fault(fault) => fault.to_string().into(),
        }
    }
}

impl std::fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.key())
    }
}

/// The fewest and the most measured calls one connection made, over the connections (or
/// workers) of a run: shows that every connection took part and how evenly.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Spread {
    /// Connections counted (summed when rounds are merged).
    pub connections: u64,
    /// Fewest calls one connection made (0 when none was counted).
    pub min: u64,
    /// Most calls one connection made.
    pub max: u64,
}

impl Spread {
    /// Counts one connection that made `calls` measured calls.
    pub fn add(&mut self, calls: u64) {
        self.min = if self.connections == 0 {
            calls
        } else {
            self.min.min(calls)
        };
        self.max = self.max.max(calls);
        self.connections += 1;
    }
}

impl AddAssign<&Spread> for Spread {
    fn add_assign(&mut self, other: &Spread) {
        if other.connections == 0 {
            return;
        }
        if self.connections == 0 {
            *self = *other;
            return;
        }
        self.min = self.min.min(other.min);
        self.max = self.max.max(other.max);
        self.connections += other.connections;
    }
}

/// Everything one worker, or one merged transport run, measured.
#[derive(Debug, Clone, Default)]
pub struct Tally {
    /// Latency of every ok call, from its actual start.
    pub latency: Hist,
    /// Under an open schedule (`--rate`): latency of every ok call from when it was due,
    /// so a call that had to wait for an earlier one counts that wait (coordinated
    /// omission corrected, as wrk2 does). `None` for back-to-back runs, where calls are
    /// due when they start.
    pub latency_intended: Option<Hist>,
    /// Time spent inside calls, every outcome: divided by the run's wall time, the mean
    /// number of calls in flight (the concurrency achieved).
    pub busy: Duration,
    /// One histogram per [`Phase`], same order as `Phase::ALL`, made when the phase is
    /// first recorded (a run records a few of the nine; each is about 200 KB).
    pub phases: [Option<Hist>; Phase::ALL.len()],
    pub ok: u64,
    pub lost: u64,
    pub mismatched: u64,
    /// Replies that arrived a second time (not calls: these are on top of `calls`).
    pub duplicated: u64,
    /// Replies that arrived for a call already counted lost (UDP; extra datagrams, not
    /// calls: the call stays lost).
    pub late_replies: u64,
    /// Late or duplicate replies that arrived after a reply to a later call (UDP).
    pub reordered: u64,
    /// Connections of the measured calls that sent their request in early data
    /// (`tls13-0rtt`), and those whose early data the server accepted.
    pub zero_rtt_sent: u64,
    pub zero_rtt_accepted: u64,
    /// QUIC Retry packets the measured calls' connections received.
    pub quic_retries: u64,
    /// Failed calls by kind.
    pub errors: BTreeMap<ErrorKind, u64>,
    /// Connections opened, warm-up included.
    pub connects: u64,
    /// Measured calls per connection (per worker on the blocking engine).
    pub per_connection: Spread,
    /// First seqs of lost, mismatched and failed calls.
    pub lost_seqs: Vec<u64>,
    pub mismatched_seqs: Vec<u64>,
    pub error_seqs: Vec<u64>,
    /// Calls started more than one interval after they were due under `--rate`.
    pub late: u64,
    /// Request and reply body bytes of the ok calls (the payload, or an encoded call's
    /// body): what the application sent and got back, without headers or framing.
    pub body_bytes_sent: u64,
    pub body_bytes_received: u64,
    /// Bytes the ok calls sent and received, headers included, as an HTTP library counted
    /// them (libcurl's transports, whose sockets the kernel is not asked about); zero
    /// where the transport does not count them.
    pub wire_bytes_sent: u64,
    pub wire_bytes_received: u64,
    /// CPU time of the worker threads during the measured calls.
    pub cpu_user: Duration,
    pub cpu_sys: Duration,
}

impl Tally {
    /// An empty tally, with a histogram of latency from when each call was due when the
    /// calls are `paced` (`--rate`).
    pub fn new(paced: bool) -> Tally {
        Tally {
            latency_intended: paced.then(Hist::default),
            ..Tally::default()
        }
    }

    /// Calls counted: always `ok + lost + mismatched + errors`.
    pub fn calls(&self) -> u64 {
        self.ok + self.lost + self.mismatched + self.errors.values().sum::<u64>()
    }

    /// Failed calls by the key each kind is counted under, as the JSON writes them.
    pub fn errors_by_key(&self) -> BTreeMap<String, u64> {
        self.errors
            .iter()
            .map(|(k, n)| (k.to_string(), *n))
            .collect()
    }

    /// Failed calls of any kind.
    pub fn failed(&self) -> u64 {
        self.calls() - self.ok
    }

    /// Counts one call's outcome.
    pub fn count(&mut self, seq: u64, outcome: Outcome) {
        let keep = |seqs: &mut Vec<u64>| {
            if seqs.len() < KEPT_SEQS {
                seqs.push(seq);
            }
        };
        match outcome {
            Outcome::Ok => self.ok += 1,
            Outcome::Lost => {
                self.lost += 1;
                keep(&mut self.lost_seqs);
            }
            Outcome::Mismatched => {
                self.mismatched += 1;
                keep(&mut self.mismatched_seqs);
            }
            Outcome::Error(kind) => {
                *self.errors.entry(kind).or_default() += 1;
                keep(&mut self.error_seqs);
            }
        }
    }

    /// The histogram of one phase.
    pub fn phase(&self, phase: Phase) -> &Hist {
        /// What a phase never recorded reads as.
        static EMPTY: std::sync::LazyLock<Hist> = std::sync::LazyLock::new(Hist::default);
        self.phases[phase as usize].as_ref().unwrap_or(&EMPTY)
    }

    /// Records the time of one phase.
    #[inline]
    pub fn record_phase(&mut self, phase: Phase, d: Duration) {
        self.phases[phase as usize]
            .get_or_insert_with(Hist::default)
            .record(d);
    }
}

impl AddAssign<&Tally> for Tally {
    fn add_assign(&mut self, other: &Tally) {
        self.latency += &other.latency;
        match (&mut self.latency_intended, &other.latency_intended) {
            (Some(mine), Some(theirs)) => *mine += theirs,
            (mine @ None, Some(theirs)) => *mine = Some(theirs.clone()),
            (_, None) => {}
        }
        self.busy += other.busy;
        for (mine, theirs) in self.phases.iter_mut().zip(&other.phases) {
            if let Some(theirs) = theirs {
                *mine.get_or_insert_with(Hist::default) += theirs;
            }
        }
        self.ok += other.ok;
        self.lost += other.lost;
        self.mismatched += other.mismatched;
        self.duplicated += other.duplicated;
        self.late_replies += other.late_replies;
        self.reordered += other.reordered;
        self.zero_rtt_sent += other.zero_rtt_sent;
        self.zero_rtt_accepted += other.zero_rtt_accepted;
        self.quic_retries += other.quic_retries;
        self.late += other.late;
        self.body_bytes_sent += other.body_bytes_sent;
        self.body_bytes_received += other.body_bytes_received;
        self.wire_bytes_sent += other.wire_bytes_sent;
        self.wire_bytes_received += other.wire_bytes_received;
        for (kind, n) in &other.errors {
            *self.errors.entry(*kind).or_default() += n;
        }
        self.connects += other.connects;
        self.per_connection += &other.per_connection;
        for (mine, theirs) in [
            (&mut self.lost_seqs, &other.lost_seqs),
            (&mut self.mismatched_seqs, &other.mismatched_seqs),
            (&mut self.error_seqs, &other.error_seqs),
        ] {
            mine.extend_from_slice(theirs);
            mine.sort_unstable();
            mine.truncate(KEPT_SEQS);
        }
        self.cpu_user += other.cpu_user;
        self.cpu_sys += other.cpu_sys;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_in_microseconds() {
        let mut h = Hist::default();
        for us in 1..=1000u64 {
            h.record(Duration::from_micros(us));
        }
        let s = h.summary().unwrap();
        assert_eq!(s.min, 1.0);
        assert!((s.mean - 500.5).abs() < 1.0, "{s:?}");
        assert!((s.p50 - 500.0).abs() <= 0.5, "{s:?}");
        assert!((s.p99 - 990.0).abs() <= 1.0, "{s:?}");
        assert!((s.max - 1000.0).abs() <= 1.0, "{s:?}");
        assert!(Hist::default().summary().is_none());
        // Above the range saturates rather than failing.
        h.record(Duration::from_secs(3600));
        assert!(h.summary().unwrap().max >= 59e6);
    }

    #[test]
    fn counting_and_merging_keep_the_sum_rule() {
        let mut a = Tally::default();
        a.count(1, Outcome::Ok);
        a.count(2, Outcome::Lost);
        a.count(3, Outcome::Error(ErrorKind::Named("timeout")));
        let mut b = Tally::default();
        b.count(5, Outcome::Mismatched);
        b.count(4, Outcome::Error(ErrorKind::Named("timeout")));
        b.count(6, Outcome::Error(ErrorKind::Named("connect_refused")));
        b.duplicated = 2;
        a += &b;
        assert_eq!(a.calls(), 6);
        assert_eq!(a.failed(), 5);
        assert_eq!((a.ok, a.lost, a.mismatched, a.duplicated), (1, 1, 1, 2));
        assert_eq!(a.errors[&ErrorKind::Named("timeout")], 2);
        assert_eq!(a.error_seqs, [3, 4, 6]);
    }

    #[test]
    fn spread_of_calls_per_connection() {
        let mut a = Spread::default();
        a += &Spread::default();
        assert_eq!(a, Spread::default());
        a.add(5);
        a.add(3);
        let mut b = Spread::default();
        b.add(9);
        let mut empty = Spread::default();
        empty += &b;
        assert_eq!(empty, b);
        a += &b;
        assert_eq!(
            a,
            Spread {
                connections: 3,
                min: 3,
                max: 9
            }
        );
        let mut idle = Spread::default();
        idle.add(0);
        assert_eq!((idle.min, idle.max, idle.connections), (0, 0, 1));
    }

    #[test]
    fn kept_seqs_are_bounded() {
        let mut t = Tally::default();
        for seq in 0..1000 {
            t.count(seq, Outcome::Lost);
        }
        assert_eq!(t.lost, 1000);
        assert_eq!(t.lost_seqs.len(), KEPT_SEQS);
    }
}
