//! What the agent's probes measured, per peer and transport, and its `GET /metrics` text.
//!
//! Plain fixed-bucket histograms rather than HDR ones: Prometheus stores and aggregates
//! bucket counts, so finer precision here would be thrown away at the scrape, and a
//! series then costs about 1 KiB instead of an HDR histogram's tens of kilobytes (1,000
//! peers times 3 transports is 3,000 series). The text is written by the echo server's
//! exposition writer (`crate::server::metrics`), so both binaries format alike.

use crate::measure::{Outcome, Phase};
use crate::runner::call::Ended;
use crate::server::metrics::{Kind, escape_label, family, header, process, sample};
use std::collections::BTreeMap;
use std::fmt::Write;
use std::time::{Duration, SystemTime};

/// Upper bounds of the latency buckets, in seconds: 1, 2.5 and 5 per decade from 10 µs
/// to 10 s, so a 30 µs loopback call and a 3 s timeout both land in a bucket of their own
/// (Goldpinger's first bucket is 5 ms, where a whole sub-millisecond link disappears).
pub const BUCKETS: [f64; 19] = [
    10e-6, 25e-6, 50e-6, 100e-6, 250e-6, 500e-6, 1e-3, 2.5e-3, 5e-3, 10e-3, 25e-3, 50e-3, 100e-3,
    250e-3, 500e-3, 1.0, 2.5, 5.0, 10.0,
];

/// The phases with histograms of their own (the server's time is the echo's own, tiny).
pub(crate) const PHASES: [Phase; 3] = [Phase::Dns, Phase::Connect, Phase::FirstByte];

/// The schema of the native histograms (protobuf exposition): 2^3 = 8 buckets per
/// doubling, each bound 1.09 times the one before, what the Go client's default factor of
/// 1.1 picks. A probe's latencies span a few doublings, so a histogram holds a few dozen
/// buckets at most.
pub const NATIVE_SCHEMA: i32 = 3;

/// One latency histogram: counts per bucket (not cumulative; the text sums them), their
/// sum, and the same observations in native (exponential, sparse) buckets.
#[derive(Debug, Clone, Default)]
pub struct Histogram {
    /// Observations at or below `BUCKETS[i]` and above the bucket before.
    counts: [u64; BUCKETS.len()],
    /// Observations above the last bucket.
    over: u64,
    /// Sum of all observations, in seconds.
    sum: f64,
    /// Native buckets by index: bucket `i` holds (2^((i-1)/8), 2^(i/8)] seconds.
    pub(crate) native: BTreeMap<i32, u64>,
    /// Observations of exactly 0 s (the native zero bucket; none is expected).
    pub(crate) zero: u64,
}

/// The native bucket of an observation of `s` seconds (more than 0): the `i` with
/// 2^((i-1)/8) < s <= 2^(i/8), as Prometheus's schema 3 defines them.
pub(crate) fn native_index(s: f64) -> i32 {
    let per = f64::from(1 << NATIVE_SCHEMA);
    let mut i = (s.log2() * per).ceil() as i32;
    // The logarithm can land a hair off at a bound; the bounds themselves decide.
    let bound = |i: i32| (f64::from(i) / per).exp2();
    while bound(i) < s {
        i += 1;
    }
    while bound(i - 1) >= s {
        i -= 1;
    }
    i
}

impl Histogram {
    /// Records one observation.
    pub fn observe(&mut self, d: Duration) {
        let s = d.as_secs_f64();
        match BUCKETS.iter().position(|&le| s <= le) {
            Some(i) => self.counts[i] += 1,
            None => self.over += 1,
        }
        self.sum += s;
        if s > 0.0 {
            *self.native.entry(native_index(s)).or_default() += 1;
        } else {
            self.zero += 1;
        }
    }

    /// The classic buckets as (upper bound, cumulative count), `+Inf` last.
    pub(crate) fn cumulative(&self) -> Vec<(f64, u64)> {
        let mut total = 0;
        let mut out: Vec<(f64, u64)> = BUCKETS
            .iter()
            .zip(&self.counts)
            .map(|(&le, n)| {
                total += n;
                (le, total)
            })
            .collect();
        out.push((f64::INFINITY, self.count()));
        out
    }

    /// Sum of all observations, in seconds.
    pub(crate) fn sum(&self) -> f64 {
        self.sum
    }

    /// Observations recorded.
    pub fn count(&self) -> u64 {
        self.counts.iter().sum::<u64>() + self.over
    }

    /// Writes `_bucket` (cumulative, ending in `+Inf`), `_sum` and `_count` samples.
    fn write(&self, out: &mut String, name: &str, labels: &str) {
        let bucket = format!("{name}_bucket");
        let mut cumulative = 0;
        let mut le_labels = String::with_capacity(labels.len() + 16);
        for (le, n) in BUCKETS.iter().zip(&self.counts) {
            cumulative += n;
            le_labels.clear();
            let _ = write!(le_labels, "{labels},le=\"{le}\"");
            sample(out, &bucket, &le_labels, cumulative as f64);
        }
        sample(
            out,
            &bucket,
            &format!("{labels},le=\"+Inf\""),
            self.count() as f64,
        );
        sample(out, &format!("{name}_sum"), labels, self.sum);
        sample(out, &format!("{name}_count"), labels, self.count() as f64);
    }
}

/// Everything measured for one peer over one transport.
#[derive(Debug, Clone)]
pub struct Series {
    /// The label set, written once: `peer="a",address="...",transport="tcp",mode="ip",...`.
    labels: String,
    /// The same labels as pairs, for the protobuf exposition.
    pub(crate) pairs: Vec<(String, String)>,
    /// Latency of verified calls.
    pub latency: Histogram,
    /// One histogram per entry of [`PHASES`].
    pub(crate) phases: [Histogram; PHASES.len()],
    /// Calls by outcome: ok, lost, mismatched, or an error kind.
    pub outcomes: BTreeMap<String, u64>,
    /// Wall-clock time of the last verified reply, as seconds since the Unix epoch.
    pub(crate) last_success: Option<f64>,
}

impl Series {
    /// An empty series with these labels (escaped here). `ok`, `lost` and `mismatched`
    /// start at 0, so `rate()` sees them from the first scrape rather than from the first
    /// failure.
    pub fn new(labels: &[(&str, &str)]) -> Series {
        let pairs = labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let labels = labels
            .iter()
            .map(|(k, v)| format!("{k}=\"{}\"", escape_label(v)))
            .collect::<Vec<_>>()
            .join(",");
        let outcomes = ["ok", "lost", "mismatched"]
            .into_iter()
            .map(|k| (k.to_string(), 0))
            .collect();
        Series {
            labels,
            pairs,
            latency: Histogram::default(),
            phases: Default::default(),
            outcomes,
            last_success: None,
        }
    }

    /// Records one probe.
    pub(crate) fn record(&mut self, ended: &Ended) {
        let key = match ended.outcome {
            Outcome::Ok => "ok".into(),
            Outcome::Lost => "lost".into(),
            Outcome::Mismatched => "mismatched".into(),
            Outcome::Error(kind) => kind.key(),
        };
        match self.outcomes.get_mut(key.as_ref()) {
            Some(n) => *n += 1,
            None => {
                self.outcomes.insert(key.into_owned(), 1);
            }
        }
        if let Some(latency) = ended.latency {
            self.latency.observe(latency);
            let phases = &ended.phases;
            for (hist, took) in
                self.phases
                    .iter_mut()
                    .zip([phases.dns, phases.connect, phases.first_byte])
            {
                if let Some(took) = took {
                    hist.observe(took);
                }
            }
            self.last_success = SystemTime::now()
                .duration_since(SystemTime::UNIX_EPOCH)
                .ok()
                .map(|d| d.as_secs_f64());
        }
    }

    /// Calls recorded, every outcome.
    pub fn calls(&self) -> u64 {
        self.outcomes.values().sum()
    }
}

/// The agent's own counters, beside the per-series ones.
#[derive(Debug, Clone, Default)]
pub struct AgentCounters {
    /// Peers in the list being probed.
    pub peers: u64,
    /// Probe tasks running (peers times transports).
    pub probers: u64,
    /// Calls under way now.
    pub in_flight: u64,
    /// Probes not made because `--max-in-flight` calls were already under way.
    pub skipped: u64,
    /// Peer list reads that were taken.
    pub reloads_ok: u64,
    /// Peer list reads that were refused (the last good list stayed).
    pub reloads_failed: u64,
}

/// The text of `GET /metrics`: the series in `series` (in the order given), then the
/// agent's own counters and the process families.
pub fn render<'a>(
    series: impl Iterator<Item = &'a Series> + Clone,
    agent: &AgentCounters,
) -> String {
    let mut out = String::with_capacity(64 * 1024);
    let name = "rpcbench_probe_duration_seconds";
    header(
        &mut out,
        name,
        Kind::Histogram,
        "Round trip of verified probe calls, from before the call (connect included for fresh transports) to the verified reply.",
    );
    for s in series.clone() {
        s.latency.write(&mut out, name, &s.labels);
    }
    let name = "rpcbench_probe_phase_duration_seconds";
    header(
        &mut out,
        name,
        Kind::Histogram,
        "Time of one phase (dns, connect, first_byte) of verified probe calls that had it.",
    );
    for s in series.clone() {
        for (phase, hist) in PHASES.iter().zip(&s.phases) {
            // A phase never seen (dns for an IP literal) is left out: 20 lines per
            // series that would only ever say 0, a quarter of a large agent's scrape.
            if hist.count() == 0 {
                continue;
            }
            let labels = format!("{},phase=\"{}\"", s.labels, phase.name());
            hist.write(&mut out, name, &labels);
        }
    }
    let name = "rpcbench_probe_calls_total";
    header(
        &mut out,
        name,
        Kind::Counter,
        "Probe calls by outcome: ok, lost (no reply within the timeout, or closed), mismatched (wrong seq or bytes), or the error kind.",
    );
    for s in series.clone() {
        for (outcome, n) in &s.outcomes {
            let labels = format!("{},outcome=\"{}\"", s.labels, escape_label(outcome));
            sample(&mut out, name, &labels, *n as f64);
        }
    }
    let name = "rpcbench_probe_last_success_timestamp_seconds";
    header(
        &mut out,
        name,
        Kind::Gauge,
        "When the peer last answered a probe correctly, in seconds since the Unix epoch (absent until it has).",
    );
    for s in series {
        if let Some(at) = s.last_success {
            sample(&mut out, name, &s.labels, at);
        }
    }
    for (name, kind, help, value) in [
        (
            "rpcbench_agent_peers",
            Kind::Gauge,
            "Peers in the peer list being probed.",
            agent.peers,
        ),
        (
            "rpcbench_agent_probers",
            Kind::Gauge,
            "Probe loops running: peers times transports.",
            agent.probers,
        ),
        (
            "rpcbench_agent_calls_in_flight",
            Kind::Gauge,
            "Probe calls under way now.",
            agent.in_flight,
        ),
        (
            "rpcbench_agent_probes_skipped_total",
            Kind::Counter,
            "Probes not made because --max-in-flight calls were already under way.",
            agent.skipped,
        ),
    ] {
        family(&mut out, name, kind, help, &[("", value as f64)]);
    }
    family(
        &mut out,
        "rpcbench_agent_peer_list_reloads_total",
        Kind::Counter,
        "Reads of a changed peer list, by result: ok (taken) or error (refused; the last good list stays).",
        &[
            ("result=\"ok\"", agent.reloads_ok as f64),
            ("result=\"error\"", agent.reloads_failed as f64),
        ],
    );
    process(&mut out, &crate::host::process_cost());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_cumulative_and_end_in_inf() {
        let mut s = Series::new(&[("peer", "a\"b"), ("transport", "tcp")]);
        for us in [5, 30, 30, 2_000, 20_000_000] {
            s.latency.observe(Duration::from_micros(us));
        }
        let text = render(std::iter::once(&s), &AgentCounters::default());
        let buckets: Vec<f64> = text
            .lines()
            .filter(|l| l.starts_with("rpcbench_probe_duration_seconds_bucket"))
            .map(|l| l.rsplit(' ').next().unwrap().parse().unwrap())
            .collect();
        assert_eq!(buckets.len(), BUCKETS.len() + 1);
        assert!(buckets.windows(2).all(|w| w[0] <= w[1]));
        assert_eq!(buckets[0], 1.0);
        assert_eq!(buckets[BUCKETS.len() - 1], 4.0);
        assert_eq!(*buckets.last().unwrap(), 5.0);
        assert!(text.contains(r#"peer="a\"b",transport="tcp",le="+Inf"} 5"#));
        assert!(text.contains(
            "rpcbench_probe_duration_seconds_count{peer=\"a\\\"b\",transport=\"tcp\"} 5\n"
        ));
        // At least three buckets per decade.
        for decade in -5..1 {
            let (lo, hi) = (10f64.powi(decade), 10f64.powi(decade + 1));
            let n = BUCKETS
                .iter()
                .filter(|&&b| b > lo * 1.0001 && b <= hi * 1.0001)
                .count();
            assert!(n >= 3, "decade {lo}..{hi}: {n} buckets");
        }
    }
}
