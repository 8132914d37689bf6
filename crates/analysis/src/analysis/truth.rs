//! The truth checks of `rpcbench report`: figures held to what physics says they must be.
//! An injected server delay must come back as a rise of that delay, a DNS delay only where
//! a lookup is paid, a told link RTT as the protocol's round trips times it, and each
//! input's orderings ([`crate::physics`]) must hold. Each check is a value carrying its
//! figures; the words are the renderers' (`render::truth`).

use super::select::{dns_delay_us, find_like, is_plain, slow_dns};
use crate::model;
use crate::report::{PhysicsCheck, Report, RunKey, RunRecord};
use crate::resolve::AddrMode;

/// Share of an injected delay (server or DNS) a measurement may be off by, besides the
/// reference run's noise: the server's timer overshoots a little (a sleep ends at or after
/// its deadline, by the timer slack and a scheduler wake-up), and 5% of the test bed's
/// 20 ms covers that with room, while a delay paid twice, or not at all, is far outside.
pub const DELAY_SHARE: f64 = 0.05;

/// A rise against an injected delay: what it should be, the margin's parts, and what it
/// was.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rise {
    /// The delay injected, µs.
    pub delay_us: f64,
    /// The rise it should cause, µs: the delay, or 0 where it is not paid.
    pub expected_us: f64,
    /// The reference run's noise, µs: its p99 − p50 (why, at `noise_us`).
    pub noise_us: f64,
    /// The rise measured, µs, rounded.
    pub measured_us: f64,
}

impl Rise {
    /// The rise of `run`'s mean over `reference`'s, against `expected_us` of a delay of
    /// `delay_us`; `None` when either has no latency.
    fn of(delay_us: f64, expected_us: f64, reference: &RunRecord, run: &RunRecord) -> Option<Rise> {
        Some(Rise {
            delay_us,
            expected_us,
            noise_us: noise_us(reference)?,
            measured_us: (run.latency_us?.mean - reference.latency_us?.mean).round(),
        })
    }

    /// The margin: [`DELAY_SHARE`] of the delay plus the reference's noise.
    pub fn margin_us(&self) -> f64 {
        tolerance(self.delay_us, self.noise_us)
    }

    /// True when the rise is within the margin of what it should be.
    pub fn pass(&self) -> bool {
        (self.measured_us - self.expected_us).abs() <= self.margin_us()
    }
}

/// One check of a figure against what physics says it must be.
#[derive(Debug, Clone, PartialEq)]
pub enum TruthCheck {
    /// With a server delay, a run's mean rose by the delay.
    ServerDelay {
        run: RunKey,
        rise: Rise,
        /// The reference's calls started this far apart, µs, when it was paced.
        paced_gap_us: Option<f64>,
        /// The rise over a back-to-back run too, when the reference was paced.
        over_back_to_back_us: Option<f64>,
    },
    /// With DNS answers late, a run's mean rose by the delay where a lookup is paid.
    DnsDelay { run: RunKey, rise: Rise },
    /// Across a told link RTT, a run's mean is its mean without one plus the protocol's
    /// round trips times the RTT ([`model::rtt_expectation`]).
    LinkRtt {
        run: RunKey,
        rtt_us: f64,
        round_trips: f64,
        expected_us: f64,
        margin_us: f64,
        mean_us: f64,
    },
    /// An ordering of input `input` (1 up) that its figures break.
    PhysicsBroken {
        input: usize,
        started: String,
        check: PhysicsCheck,
    },
    /// Every ordering of input `input` held: `held` of them.
    PhysicsHeld {
        input: usize,
        started: String,
        held: usize,
    },
}

impl TruthCheck {
    /// True when the figure is what physics says.
    pub fn pass(&self) -> bool {
        match self {
            TruthCheck::ServerDelay { rise, .. } | TruthCheck::DnsDelay { rise, .. } => rise.pass(),
            TruthCheck::LinkRtt {
                expected_us,
                margin_us,
                mean_us,
                ..
            } => (mean_us - expected_us).abs() <= *margin_us,
            TruthCheck::PhysicsBroken { .. } => false,
            TruthCheck::PhysicsHeld { .. } => true,
        }
    }
}

/// The kinds of check that need an input of their own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CheckKind {
    ServerDelay,
    DnsDelay,
    LinkRtt,
}

/// Why a check did not run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotRunReason {
    /// No input is the kind the check is about (no run with a delay, a slow DNS server,
    /// or a link RTT of [`model::RTT_CHECK_MIN_US`] or more).
    NoSubject,
    /// No input without the delay to compare with.
    NoReference,
    /// No transport and address mode measured both with the delay and without it.
    NothingInCommon,
}

/// A truth check the inputs could not support, and why: listed, not failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NotRun {
    pub check: CheckKind,
    pub reason: NotRunReason,
}

/// The noise of a reference run, µs: its p99 − p50, how far a call strays above the typical
/// one on this path and placement (scheduler wake-ups, interrupts, a neighbour's burst).
/// A delayed run meets the same noise, on top of the delay, so a rise within it is the
/// delay. It comes from the data, not a constant, so a quiet host gets a tight check and a
/// noisy one a fair one. Chosen over the standard deviation, which one stall in a thousand
/// calls inflates (and with it the margin, until the check passes anything), and over the
/// standard error of the mean, which assumes independent calls and so misses the drift
/// between runs that is what a reference run is there to cancel.
fn noise_us(r: &RunRecord) -> Option<f64> {
    r.latency_us.map(|l| (l.p99 - l.p50).max(0.0))
}

/// The margin of a check: [`DELAY_SHARE`] of the delay plus the reference's noise.
fn tolerance(delay_us: f64, noise_us: f64) -> f64 {
    DELAY_SHARE * delay_us + noise_us
}

/// The roles of the inputs, by index.
pub struct Roles {
    /// The first reference run back to back.
    back_to_back: Option<usize>,
    /// The first reference run paced with `--rate`.
    paced: Option<usize>,
}

impl Roles {
    /// Reads the roles from the inputs' own settings.
    pub fn of(inputs: &[&Report]) -> Roles {
        Roles {
            back_to_back: inputs
                .iter()
                .position(|r| is_plain(r) && r.config.rate_per_s.is_none()),
            paced: inputs
                .iter()
                .position(|r| is_plain(r) && r.config.rate_per_s.is_some()),
        }
    }

    /// The input the tables and findings start from.
    pub fn baseline(&self) -> usize {
        self.back_to_back.or(self.paced).unwrap_or(0)
    }
}

/// The truth checks the inputs support, and the ones they do not, with the reason.
pub fn checks(inputs: &[&Report]) -> (Vec<TruthCheck>, Vec<NotRun>) {
    let roles = Roles::of(inputs);
    let back_to_back = roles.back_to_back.map(|i| inputs[i]);
    let paced = roles.paced.map(|i| inputs[i]);
    let mut checks = Vec::new();
    let mut not_run = Vec::new();
    let mut judge = |check: CheckKind,
                     subjects: Vec<&Report>,
                     reference: Option<&Report>,
                     run: &dyn Fn(&Report, &Report) -> Vec<TruthCheck>| {
        let reason = if subjects.is_empty() {
            Some(NotRunReason::NoSubject)
        } else if let Some(reference) = reference {
            let found: Vec<TruthCheck> = subjects.iter().flat_map(|s| run(reference, s)).collect();
            let none = found.is_empty();
            checks.extend(found);
            none.then_some(NotRunReason::NothingInCommon)
        } else {
            Some(NotRunReason::NoReference)
        };
        if let Some(reason) = reason {
            not_run.push(NotRun { check, reason });
        }
    };
    let delayed: Vec<&Report> = inputs
        .iter()
        .copied()
        .filter(|r| r.config.delay_us > 0 && dns_delay_us(r) == 0)
        .collect();
    judge(
        CheckKind::ServerDelay,
        delayed,
        paced.or(back_to_back),
        &|reference, delayed| delay_checks(reference, back_to_back, delayed),
    );
    let slow: Vec<&Report> = inputs.iter().copied().filter(|r| slow_dns(r)).collect();
    judge(
        CheckKind::DnsDelay,
        slow,
        back_to_back.or(paced),
        &dns_checks,
    );
    let across: Vec<&Report> = inputs
        .iter()
        .copied()
        .filter(|r| is_plain(r) && link_rtt_us(r) >= model::RTT_CHECK_MIN_US)
        .collect();
    let zero = inputs
        .iter()
        .copied()
        .find(|r| is_plain(r) && link_rtt_us(r) == 0.0 && has_link_rtt(r));
    // Only where some input crossed a told link: a report of runs with no link RTT at all
    // has no link to check, which is no gap in its checks.
    if inputs.iter().any(|r| has_link_rtt(r)) {
        judge(CheckKind::LinkRtt, across, zero, &link_checks);
    }
    checks.extend(physics_checks(inputs));
    (checks, not_run)
}

/// Each input's physics checks ([`crate::physics`]): every broken one as a failed check of
/// its own, and the ones that hold as one line per input. They are made again from the
/// input's figures rather than read from its `physics`, so that a report from before the
/// checks, or an edited one, is judged by the same rules.
fn physics_checks(inputs: &[&Report]) -> Vec<TruthCheck> {
    let mut out = Vec::new();
    for (i, r) in inputs.iter().enumerate() {
        let physics = crate::physics::checks(r);
        let held = physics.iter().filter(|c| c.pass).count();
        let all = physics.len();
        out.extend(physics.into_iter().filter(|c| !c.pass).map(|check| {
            TruthCheck::PhysicsBroken {
                input: i + 1,
                started: r.started.clone(),
                check,
            }
        }));
        if held > 0 && held == all {
            out.push(TruthCheck::PhysicsHeld {
                input: i + 1,
                started: r.started.clone(),
                held,
            });
        }
    }
    out
}

/// The link RTT a report's runs were told, µs (0 when none was).
fn link_rtt_us(r: &Report) -> f64 {
    r.runs.iter().find_map(|x| x.link_rtt_us).unwrap_or(0.0)
}

/// True when the report's runs were told a link RTT (0 s included).
pub fn has_link_rtt(r: &Report) -> bool {
    r.runs.iter().any(|x| x.link_rtt_us.is_some())
}

/// Across a link of RTT D, each transport's mean should be its mean across the same link
/// without a delay plus the protocol's round trips times D ([`model::rtt_expectation`]).
fn link_checks(zero: &Report, across: &Report) -> Vec<TruthCheck> {
    across
        .runs
        .iter()
        .filter_map(|r| {
            let d = r.link_rtt_us?;
            let k = model::expected_for(r)?;
            let base = zero
                .runs
                .iter()
                .find(|x| model::ModelKey::of(x) == model::ModelKey::of(r))?;
            let (expected, margin) = model::rtt_expectation(base.latency_us?.mean, k, d);
            Some(TruthCheck::LinkRtt {
                run: r.key(),
                rtt_us: d,
                round_trips: k,
                expected_us: expected,
                margin_us: margin,
                mean_us: r.latency_us?.mean,
            })
        })
        .collect()
}

/// With a server delay of D, every transport's mean should rise by D, within
/// [`DELAY_SHARE`] of D plus the reference's noise ([`noise_us`]); the multiplexing
/// comparison's rows at 16 workers are left out (below).
///
/// The reference is the paced run when there is one: the same calls without a delay,
/// started D apart with `--rate`. A client that waits D for each reply sits idle for D,
/// and on a small virtual machine the first instructions after an idle spell run slower
/// (cold caches, a halted vCPU); a reference paced D apart pays that too, so what is left
/// is the delay alone. The rise over the back-to-back run is shown beside it.
fn delay_checks(
    reference: &Report,
    back_to_back: Option<&Report>,
    delayed: &Report,
) -> Vec<TruthCheck> {
    let d = f64::from(delayed.config.delay_us);
    let paced_gap_us = reference.config.rate_per_s.map(|rate| 1e6 / rate);
    delayed
        .runs
        .iter()
        // Not the rows a default run adds at 16 workers to compare multiplexing: their 16
        // replies come due at the same moment and queue behind each other at the server
        // and on the shared connection, so their rise is D plus a queue this check does
        // not model (seen: grpc c16 +1.6 ms over D on a one-thread server), and their
        // paced reference is not paced per worker.
        .filter(|r| !r.mux_comparison)
        .filter_map(|r| {
            let base = find_like(reference, r, r.addr_mode)?;
            let over_back_to_back_us = back_to_back
                .filter(|b| !std::ptr::eq(*b, reference))
                .and_then(|b| find_like(b, r, r.addr_mode))
                .and_then(|b| Some((r.latency_us?.mean - b.latency_us?.mean).round()));
            Some(TruthCheck::ServerDelay {
                run: r.key(),
                rise: Rise::of(d, d, base, r)?,
                paced_gap_us,
                over_back_to_back_us,
            })
        })
        .collect()
}

/// With DNS answers D late, fresh connections under `uncached` should rise by D; under
/// `cached`, and for persistent connections (whose lookup is in warm-up), by about nothing;
/// each within [`DELAY_SHARE`] of D plus the reference's noise.
fn dns_checks(base: &Report, slow: &Report) -> Vec<TruthCheck> {
    let d = dns_delay_us(slow) as f64;
    slow.runs
        .iter()
        .filter(|r| matches!(r.addr_mode, AddrMode::Cached | AddrMode::Uncached))
        .filter_map(|r| {
            let b = find_like(base, r, r.addr_mode).or_else(|| find_like(base, r, AddrMode::Ip))?;
            let expected = if !r.transport.persistent() && r.addr_mode == AddrMode::Uncached {
                d
            } else {
                0.0
            };
            Some(TruthCheck::DnsDelay {
                run: r.key(),
                rise: Rise::of(d, expected, b, r)?,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn margins_grow_with_the_reference_noise() {
        assert_eq!(tolerance(20_000.0, 0.0), 1_000.0);
        assert_eq!(tolerance(20_000.0, 250.0), 1_250.0);
    }
}
