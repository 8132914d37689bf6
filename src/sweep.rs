//! `rpcbench sweep`: one transport after another over a list of offered rates, concurrency
//! levels or payload sizes, and the capacity of each transport under a latency objective.
//!
//! The question wrk2, nighthawk and vegeta users ask most is "what is the highest rate at
//! which p99 stays under X". A step at an offered rate runs open loop (`--rate`), and its
//! latency is taken from when each call was due, so a server that falls behind shows it as
//! queueing instead of hiding it by sending less (coordinated omission). A rate meets the
//! objective ([`Slo`]) when the percentile stays under the bound, no call fails, and at
//! least [`MIN_ACHIEVED`] of the offered rate was achieved. Without a list of rates the
//! search finds the capacity by itself: a closed-loop step says what the transport can do
//! flat out, a ramp from a fraction of that finds a rate that fails, and bisection narrows
//! the gap between the last pass and the first failure. A search step that fails on its
//! percentile alone below the closed-loop throughput is run once more before it counts as
//! a failure (see `Stepper::rate_step`); every step run is in the record.
//!
//! Every step is an ordinary run (the same engine, accounting and report record); a sweep
//! keeps one [`Session`] for all its steps, so the embedded server and the name check are
//! set up once.
//!
//! Layer 7 of the map in `lib.rs` (apps): uses every layer below, and `bench`.

use crate::bench::{BenchSpec, Observer, RunBenchError, Session};
pub use crate::report::sweep::{
    MIN_ACHIEVED, Miss, Series, ServerCost, SloRecord, Step, SweepAxis, SweepReport,
    percentile_name,
};
use crate::report::{Environment, RunRecord, rfc3339_now};
use crate::resolve::AddrMode;
use crate::runner::{RunConfig, TransportRun};
use std::time::Duration;

/// The search ramps from this share of the closed-loop throughput: low enough that the
/// first step passes on any healthy transport.
const RAMP_START: f64 = 0.25;
/// Each ramp step offers this many times the previous rate.
const RAMP_FACTOR: f64 = 1.5;
/// The ramp stops above this multiple of the closed-loop throughput: an open-loop rate
/// that high cannot be achieved by the same workers, so it cannot pass.
const RAMP_CEILING: f64 = 2.0;
/// Bisection stops when the gap between the last pass and the first failure is this
/// small a share of the pass.
const BISECT_PRECISION: f64 = 0.02;
/// And after this many bisection steps at the most, whatever the gap.
const MAX_BISECT_STEPS: usize = 6;

/// A latency objective: the `quantile`'s latency stays at or under `bound`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Slo {
    /// 0 < quantile < 1, e.g. 0.99 for p99.
    pub quantile: f64,
    pub bound: Duration,
}

/// Why an objective could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not an objective: write pNN=DURATION, e.g. p99=2ms or p99.9=500us")]
pub struct ParseSloError(pub String);

impl std::str::FromStr for Slo {
    type Err = ParseSloError;

    fn from_str(text: &str) -> Result<Slo, ParseSloError> {
        let bad = || ParseSloError(text.to_string());
        let (p, bound) = text.trim().split_once('=').ok_or_else(bad)?;
        let percent: f64 = p
            .trim()
            .strip_prefix(['p', 'P'])
            .ok_or_else(bad)?
            .parse()
            .map_err(|_| bad())?;
        if !(percent > 0.0 && percent < 100.0) {
            return Err(bad());
        }
        let bound = crate::units::parse_positive_duration(bound).map_err(|_| bad())?;
        Ok(Slo {
            quantile: percent / 100.0,
            bound,
        })
    }
}

impl std::fmt::Display for Slo {
    /// `p99 ≤ 2.00 ms`: the percentile as it was written, the bound in its unit.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} ≤ {}",
            percentile_name(self.quantile),
            crate::units::duration(self.bound.as_secs_f64() * 1e6)
        )
    }
}

impl From<Slo> for SloRecord {
    fn from(slo: Slo) -> SloRecord {
        SloRecord {
            text: slo.to_string(),
            quantile: slo.quantile,
            bound_us: slo.bound.as_secs_f64() * 1e6,
        }
    }
}

/// What a sweep varies from step to step.
#[derive(Debug, Clone, PartialEq)]
pub enum Axis {
    /// Offered rates, calls per second over all workers (open loop).
    Rates(Vec<f64>),
    /// Workers (closed loop, back to back).
    Concurrency(Vec<usize>),
    /// Request payload sizes in bytes (the reply echoes them unless `--reply` is set).
    Payloads(Vec<u32>),
    /// WSTest messages, in each encoding of the run (`--messages`, with `--encoding`).
    Messages(Vec<crate::encoding::Message>),
}

impl Axis {
    /// The axis as the record names it.
    pub fn kind(&self) -> SweepAxis {
        match self {
            Axis::Rates(_) => SweepAxis::Rate,
            Axis::Concurrency(_) => SweepAxis::Concurrency,
            Axis::Payloads(_) => SweepAxis::Payload,
            Axis::Messages(_) => SweepAxis::Message,
        }
    }

    /// The axis's name in the JSON and tables.
    pub fn name(&self) -> &'static str {
        self.kind().name()
    }

    /// Checks that the steps are strictly increasing: a repeated or unsorted step is
    /// almost always a typo, and charts need them in order.
    pub fn check(&self) -> Result<(), String> {
        let values: Vec<f64> = match self {
            Axis::Rates(v) => v.clone(),
            Axis::Concurrency(v) => v.iter().map(|&c| c as f64).collect(),
            Axis::Payloads(v) => v.iter().map(|&p| f64::from(p)).collect(),
            // In the order of the operations, each one's size increasing.
            Axis::Messages(v) => (0..v.len()).map(|i| i as f64).collect(),
        };
        if let Axis::Messages(v) = self
            && let Some(w) = v.windows(2).find(|w| w[0] >= w[1])
        {
            return Err(format!(
                "the message steps must increase, each once: {} is followed by {}",
                w[0], w[1]
            ));
        }
        if values.is_empty() {
            return Err(format!("the {} list is empty", self.name()));
        }
        match values.windows(2).find(|w| w[0] >= w[1]) {
            Some(w) => Err(format!(
                "the {} steps must increase, each once: {} is followed by {}",
                self.name(),
                w[0],
                w[1]
            )),
            None => Ok(()),
        }
    }
}

/// A whole sweep: the run it starts from, what varies, and the objective.
#[derive(Debug, Clone)]
pub struct SweepSpec {
    /// The base run; each step changes one setting of `bench.run`.
    pub bench: BenchSpec,
    /// What varies; `None` with an objective searches the rate on its own.
    pub axis: Option<Axis>,
    pub slo: Option<Slo>,
    /// How long each step runs.
    pub step_duration: Duration,
}

/// Runs the sweep; prints nothing.
pub fn run(spec: &SweepSpec, observer: &mut dyn Observer) -> Result<SweepReport, RunBenchError> {
    let session = Session::open(&spec.bench)?;
    let started = rfc3339_now();
    let mut series = Vec::new();
    for &kind in &spec.bench.transports {
        for &mode in session.modes() {
            // unix runs in mode ip only, and a target's unix and udp only when told where
            // they are (the plain run's notes say so).
            if !session.runs(kind, mode) {
                continue;
            }
            // A series per encoding the transport carries (one, the echo, without any):
            // the steps set the message, the series its encoding.
            let mut encodings: Vec<Option<crate::encoding::EncodingKind>> = Vec::new();
            for rpc in &spec.bench.rpcs {
                if kind.carries(rpc.encoding) && !encodings.contains(&Some(rpc.encoding)) {
                    encodings.push(Some(rpc.encoding));
                }
            }
            if spec.bench.rpcs.is_empty() {
                encodings.push(None);
            }
            for encoding in encodings {
                let rpc = encoding
                    .zip(spec.bench.rpcs.first())
                    .map(|(encoding, first)| crate::runner::RpcConfig {
                        encoding,
                        message: first.message,
                    });
                let one = BenchSpec {
                    transports: vec![kind],
                    names: Some(vec![mode]),
                    rpcs: Vec::new(),
                    run: RunConfig {
                        rpc,
                        ..spec.bench.run.clone()
                    },
                    ..spec.bench.clone()
                };
                series.push(sweep_one(&session, &one, mode, spec, observer)?);
            }
        }
    }
    let target = session.label().to_string();
    let placement = session.placement();
    let _ = session.close();
    Ok(SweepReport {
        rpcbench: env!("CARGO_PKG_VERSION").to_string(),
        started,
        target,
        command: spec.bench.command.clone(),
        axis: spec.axis.as_ref().map_or(SweepAxis::Search, Axis::kind),
        slo: spec.slo.map(SloRecord::from),
        step_duration_s: spec.step_duration.as_secs_f64(),
        environment: Environment {
            placement: Some(placement),
            ..Environment::detect()
        },
        series,
    })
}

/// The steps of one (transport, mode).
fn sweep_one(
    session: &Session,
    one: &BenchSpec,
    mode: AddrMode,
    spec: &SweepSpec,
    observer: &mut dyn Observer,
) -> Result<Series, RunBenchError> {
    let base = RunConfig {
        duration: Some(spec.step_duration),
        ..one.run.clone()
    };
    let mut stepper = Stepper {
        session,
        one,
        slo: spec.slo,
        steps: Vec::new(),
        observer,
    };
    let mut capacity = None;
    match &spec.axis {
        Some(Axis::Rates(rates)) => {
            for &rate in rates {
                let passed = stepper.step(RunConfig {
                    rate: Some(rate),
                    ..base.clone()
                })?;
                if passed == Some(true) {
                    capacity = Some(rate);
                }
            }
        }
        Some(Axis::Concurrency(levels)) => {
            for &c in levels {
                stepper.step(RunConfig {
                    concurrency: c,
                    ..base.clone()
                })?;
            }
        }
        Some(Axis::Payloads(sizes)) => {
            for &p in sizes {
                stepper.step(RunConfig {
                    payload: p,
                    ..base.clone()
                })?;
            }
        }
        Some(Axis::Messages(messages)) => {
            for &message in messages {
                stepper.step(RunConfig {
                    rpc: base
                        .rpc
                        .map(|rpc| crate::runner::RpcConfig { message, ..rpc }),
                    ..base.clone()
                })?;
            }
        }
        None => capacity = search(&mut stepper, &base)?,
    }
    Ok(Series {
        transport: one.transports[0],
        addr_mode: mode,
        encoding: base.rpc.map(|rpc| rpc.encoding),
        steps: stepper.steps,
        capacity_per_s: capacity,
    })
}

/// Finds the highest rate that meets the objective: a closed-loop step, a ramp from a
/// share of its throughput until a rate fails, then bisection between the last pass and
/// the first failure.
fn search(stepper: &mut Stepper<'_, '_>, base: &RunConfig) -> Result<Option<f64>, RunBenchError> {
    stepper.step(base.clone())?;
    let flat_out = stepper
        .steps
        .last()
        .map_or(0.0, |s| s.achieved_per_s)
        .max(1.0);
    let mut pass: Option<f64> = None;
    let mut fail: Option<f64> = None;
    let mut rate = flat_out * RAMP_START;
    while rate <= flat_out * RAMP_CEILING {
        if stepper.rate_step(base, rate, flat_out)? {
            pass = Some(rate);
            rate *= RAMP_FACTOR;
        } else {
            fail = Some(rate);
            break;
        }
    }
    // Even the first ramp step failed: look below it.
    let mut lo = pass.unwrap_or(0.0);
    let Some(mut hi) = fail else {
        return Ok(pass);
    };
    for _ in 0..MAX_BISECT_STEPS {
        if lo > 0.0 && (hi - lo) / lo <= BISECT_PRECISION {
            break;
        }
        let mid = (lo + hi) / 2.0;
        if mid < 1.0 {
            break;
        }
        if stepper.rate_step(base, mid, flat_out)? {
            lo = mid;
            pass = Some(mid);
        } else {
            hi = mid;
        }
    }
    Ok(pass)
}

/// Runs steps and keeps their records.
struct Stepper<'a, 'o> {
    session: &'a Session,
    one: &'a BenchSpec,
    slo: Option<Slo>,
    steps: Vec<Step>,
    observer: &'o mut dyn Observer,
}

impl Stepper<'_, '_> {
    /// One step of the search at an offered rate; true when it met the objective.
    ///
    /// A rate below the closed-loop throughput that fails on its percentile alone (no
    /// call failed, the rate was achieved) is run once more, and fails only if it fails
    /// again: one stall of the machine (a virtual CPU descheduled for 10 ms) queues
    /// every call behind it and can fail one step at any rate near capacity, while a rate
    /// really above capacity fails every time, because its queue only grows. Both steps
    /// stay in the record.
    fn rate_step(
        &mut self,
        base: &RunConfig,
        rate: f64,
        flat_out: f64,
    ) -> Result<bool, RunBenchError> {
        let config = RunConfig {
            rate: Some(rate),
            ..base.clone()
        };
        if self.step(config.clone())? == Some(true) {
            return Ok(true);
        }
        let last = self.steps.last().expect("a step was just recorded");
        let latency_only = last.run.failed() == 0 && last.achieved_per_s >= MIN_ACHIEVED * rate;
        if latency_only && rate < flat_out {
            return Ok(self.step(config)? == Some(true));
        }
        Ok(false)
    }

    /// Runs one step with `config`; returns whether it met the objective (`None`
    /// without one).
    fn step(&mut self, config: RunConfig) -> Result<Option<bool>, RunBenchError> {
        let timeout = config.timeout;
        let before = self.session.server_stats(timeout);
        let label = step_label(self.steps.len() + 1, &config);
        let runs = self
            .session
            .run(self.one, &config, self.observer, Some(&label))?;
        let after = self.session.server_stats(timeout);
        let server = match (before, after) {
            (Some(b), Some(a)) => Some(ServerCost::between(&b, &a)),
            _ => None,
        };
        let run = runs
            .into_iter()
            .next()
            .expect("a step runs one transport in one mode");
        let step = judge(&run, &config, self.slo, server);
        let meets = step.meets_slo;
        self.steps.push(step);
        Ok(meets)
    }
}

/// What the progress bar adds to a step's job label: its number in the series and what it
/// offers, `step 3 · 5,000/s` (or `· closed loop`, `· -c 4`, `· 16 KiB`), so a long sweep
/// shows where it is. The number counts every step, retries of the search included.
fn step_label(number: usize, config: &RunConfig) -> String {
    let what = match (config.rate, config.rpc) {
        (Some(rate), _) => format!("{}/s", crate::units::rate(rate)),
        (None, Some(rpc)) => format!(
            "closed loop -c {} · {} {}",
            config.concurrency, rpc.encoding, rpc.message
        ),
        (None, None) => format!(
            "closed loop -c {} · {}",
            config.concurrency,
            crate::units::bytes(config.payload)
        ),
    };
    format!("step {number} · {what}")
}

/// The step record of `run`, judged against `slo`.
fn judge(
    run: &TransportRun,
    config: &RunConfig,
    slo: Option<Slo>,
    server: Option<ServerCost>,
) -> Step {
    let t = &run.tally;
    let wall = run.elapsed.as_secs_f64();
    let per_s = |n: f64| if wall > 0.0 { n / wall } else { 0.0 };
    let achieved = per_s(t.calls() as f64);
    // An encoded call's payload is its body, as sent and as it came back.
    let (payload, reply) = match (config.rpc, t.ok) {
        (Some(_), ok) if ok > 0 => (
            (t.body_bytes_sent / ok) as u32,
            (t.body_bytes_received / ok) as u32,
        ),
        _ => (config.payload, config.reply.unwrap_or(config.payload)),
    };
    // Under an offered rate the objective reads the latency from when calls were due.
    let hist = match (&t.latency_intended, config.rate) {
        (Some(h), Some(_)) => h,
        _ => &t.latency,
    };
    let slo_latency_us = slo
        .filter(|_| !hist.is_empty())
        .map(|s| hist.quantiles_us(&[s.quantile])[0]);
    let mut step = Step {
        offered_per_s: config.rate,
        achieved_per_s: achieved,
        concurrency: config.concurrency,
        payload_bytes: payload,
        reply_bytes: reply,
        goodput_out_mb_s: per_s(t.ok as f64 * f64::from(payload)) / 1e6,
        goodput_in_mb_s: per_s(t.ok as f64 * f64::from(reply)) / 1e6,
        slo_latency_us,
        meets_slo: None,
        why_not: None,
        server,
        run: RunRecord::new(run),
    };
    if let Some(slo) = slo {
        let misses = step.misses(&SloRecord::from(slo));
        step.meets_slo = Some(misses.is_empty());
        step.why_not = (!misses.is_empty()).then(|| crate::render::sweep::why_not(&misses));
    }
    step
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn objectives_parse() {
        let slo: Slo = "p99=2ms".parse().unwrap();
        assert_eq!(slo.quantile, 0.99);
        assert_eq!(slo.bound, Duration::from_millis(2));
        assert_eq!(slo.to_string(), "p99 ≤ 2.00 ms");
        let slo: Slo = "p99.9=500us".parse().unwrap();
        assert!((slo.quantile - 0.999).abs() < 1e-12);
        assert_eq!(slo.to_string(), "p99.9 ≤ 500 µs");
        assert_eq!("P50=1s".parse::<Slo>().unwrap().quantile, 0.5);
        for bad in [
            "", "p99", "99=2ms", "p100=1ms", "p0=1ms", "p99=0ms", "p99=fast", "px=1ms",
        ] {
            assert!(bad.parse::<Slo>().is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn progress_labels_name_the_step() {
        let paced = RunConfig {
            rate: Some(5000.0),
            ..RunConfig::default()
        };
        assert_eq!(step_label(3, &paced), "step 3 · 5,000/s");
        let closed = RunConfig {
            concurrency: 4,
            payload: 16 << 10,
            ..RunConfig::default()
        };
        assert_eq!(step_label(1, &closed), "step 1 · closed loop -c 4 · 16 KiB");
    }

    #[test]
    fn steps_must_increase() {
        assert!(Axis::Rates(vec![1e3, 5e3, 1e4]).check().is_ok());
        assert!(Axis::Rates(vec![5e3, 1e3]).check().is_err());
        assert!(Axis::Concurrency(vec![1, 4, 4]).check().is_err());
        assert!(Axis::Payloads(vec![]).check().is_err());
        assert!(Axis::Payloads(vec![64, 1024]).check().is_ok());
    }
}
