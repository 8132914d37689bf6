//! The truth checks in words: what each checks, what it expected (with its margin and where
//! the margin comes from) and what was measured, and why a check did not run. The checks
//! themselves are `analysis::truth`'s.

use crate::analysis::truth::{CheckKind, DELAY_SHARE, NotRun, NotRunReason, Rise, TruthCheck};
use crate::model;

/// A check in three cells: what is checked, what was expected, what was measured.
pub struct CheckText {
    pub what: String,
    pub expected: String,
    pub measured: String,
}

/// The words of one check.
pub fn text(c: &TruthCheck) -> CheckText {
    match c {
        TruthCheck::ServerDelay {
            run,
            rise,
            paced_gap_us,
            over_back_to_back_us,
        } => {
            let mut measured = format!("{:+.0} µs", rise.measured_us);
            if let Some(gap) = paced_gap_us {
                measured.push_str(&format!(" over calls started {gap:.0} µs apart"));
            }
            if let Some(p) = over_back_to_back_us {
                measured.push_str(&format!(" ({p:+.0} µs over back-to-back calls)"));
            }
            CheckText {
                what: format!(
                    "server delay {:.0} µs: {} ({})",
                    rise.delay_us, run.transport, run
                ),
                expected: expected_rise(rise),
                measured,
            }
        }
        TruthCheck::DnsDelay { run, rise } => CheckText {
            what: format!(
                "DNS delay {:.0} µs: {} ({})",
                rise.delay_us, run.transport, run
            ),
            expected: expected_rise(rise),
            measured: format!("{:+.0} µs", rise.measured_us),
        },
        TruthCheck::LinkRtt {
            run,
            rtt_us,
            round_trips,
            expected_us,
            margin_us,
            mean_us,
        } => CheckText {
            what: format!(
                "link RTT {rtt_us:.0} µs: {} ({}), {round_trips} round trips",
                run.transport, run
            ),
            expected: format!(
                "{expected_us:.0} µs ± {margin_us:.0} (mean without delay + {round_trips} × {rtt_us:.0}; {:.0}% + {:.0} µs)",
                model::RTT_CHECK_SHARE * 100.0,
                model::RTT_CHECK_FLOOR_US
            ),
            measured: format!("{mean_us:.0} µs"),
        },
        TruthCheck::PhysicsBroken {
            input,
            started,
            check,
        } => CheckText {
            what: format!(
                "physics, input {input} ({started}): {}",
                super::rule_sentence(check.rule)
            ),
            expected: format!(
                "{} ({}) no slower than {} ({}) beyond the noise",
                check.faster.transport,
                check.faster.mode,
                check.slower.transport,
                check.slower.mode
            ),
            measured: format!(
                "{} against {}",
                super::figure_text(&check.faster),
                super::figure_text(&check.slower)
            ),
        },
        TruthCheck::PhysicsHeld {
            input,
            started,
            held,
        } => CheckText {
            what: format!("physics, input {input} ({started}): orderings the protocols fix"),
            expected: "every one within the noise of its figures".to_string(),
            measured: format!("{held} of {held} hold"),
        },
    }
}

/// How an expected rise reads: the figure, its margin and where the margin comes from.
fn expected_rise(rise: &Rise) -> String {
    format!(
        "+{:.0} µs ± {:.0} ({:.0}% of {:.0} + reference noise {:.0})",
        rise.expected_us,
        rise.margin_us(),
        DELAY_SHARE * 100.0,
        rise.delay_us,
        rise.noise_us
    )
}

/// A check the inputs did not support: its name and why.
pub fn not_run(n: &NotRun) -> (&'static str, String) {
    let check = match n.check {
        CheckKind::ServerDelay => "server delay",
        CheckKind::DnsDelay => "DNS delay",
        CheckKind::LinkRtt => "link RTT",
    };
    let reason = match (n.reason, n.check) {
        (NotRunReason::NoSubject, CheckKind::ServerDelay) => {
            "no run with --delay-us among the inputs".to_string()
        }
        (NotRunReason::NoSubject, CheckKind::DnsDelay) => {
            "no run against a server with --dns-delay among the inputs".to_string()
        }
        (NotRunReason::NoSubject, CheckKind::LinkRtt) => format!(
            "no run with --link-rtt of {} ms or more among the inputs",
            model::RTT_CHECK_MIN_US / 1e3
        ),
        (NotRunReason::NoReference, _) => {
            "no run without a delay among the inputs to compare with".to_string()
        }
        (NotRunReason::NothingInCommon, _) => {
            "no transport and address mode measured both with the delay and without it".to_string()
        }
    };
    (check, reason)
}

/// How the margin of a delay check is made, as the report states it.
pub fn check_margin() -> String {
    format!(
        "{:.0}% of the delay plus the noise of the reference run (its p99 − p50 for the same transport and mode)",
        DELAY_SHARE * 100.0
    )
}
