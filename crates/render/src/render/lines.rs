//! The lines under the summary table: the latency shown, concurrency, `TCP_INFO`, the
//! engine, the physics checks and the problems of a run, in words, and the wrapping they share.

use super::RenderOptions;
use super::units;
use crate::analysis::PeerPair;
use crate::placement::PlacementRecord;
use crate::report::{Figure, PhysicsCheck, Report, Rule, RunRecord};

/// The line that says which latency the summary table shows, for a report with a paced
/// run; `None` without one, where there is only one latency.
pub fn latency_note(report: &Report, options: &RenderOptions) -> Option<String> {
    let where_start = if options.wide {
        "the start columns time it from each call's actual start"
    } else {
        "--wide also shows it from each call's actual start"
    };
    report.paced().then(|| {
        format!(
            "latency under --rate: from when each call was due (corrected for coordinated omission, as wrk2 does); {where_start}"
        )
    })
}

/// The runs whose workers were idle much of the time (fewer calls in flight than
/// [`crate::report::CONCURRENCY_SHORTFALL`] of them), one line per cause, each transport
/// named once: their latency is then that of a less loaded system than `-c` suggests.
/// Left out: a run with no ok call, which has no figures for its concurrency to explain
/// (its failures are the story), and a run of one worker, whose calls never share the
/// machine with another call of its own whatever it does between them.
pub fn concurrency_lines(report: &Report) -> Vec<String> {
    let c = &report.config;
    let mut causes: Vec<(Idle, Vec<&RunRecord>)> = Vec::new();
    for r in report
        .runs
        .iter()
        .filter(|r| r.ok > 0 && r.workers > 1 && r.concurrency_fell_short())
    {
        let cause = Idle::of(r, c.rate_per_s);
        match causes.iter_mut().find(|(k, _)| *k == cause) {
            Some((_, runs)) => runs.push(r),
            None => causes.push((cause, vec![r])),
        }
    }
    causes
        .into_iter()
        .map(|(cause, runs)| {
            // Workers the run was asked for (-c), or its own comparison added (the
            // multiplexing rows of a default run): only the first can be given more calls.
            let asked = runs.iter().all(|r| r.workers == c.concurrency);
            concurrency_line(cause, &runs, c.rate_per_s, c.duration_s.is_some(), asked)
        })
        .collect()
}

/// The line on what the kernel saw of the run's TCP connections (`TCP_INFO`): the path
/// RTT estimate, and retransmits per call where there were any (with the connections
/// that retried their SYN), or that there were none. `None` when no run was probed.
pub fn tcp_info_line(report: &Report) -> Option<String> {
    let probed: Vec<&crate::report::RunRecord> = report
        .runs
        .iter()
        .filter(|r| r.tcp_info.is_some())
        .collect();
    if probed.is_empty() {
        return None;
    }
    let mut parts = Vec::new();
    if let Some(e) = &report.path_rtt_estimate {
        parts.push(format!(
            "path RTT estimate {} ({})",
            units::duration(e.us),
            match e.source {
                crate::tcpinfo::RttSource::TcpInfo => "least kernel RTT sample",
                crate::tcpinfo::RttSource::PersistentMin => "least persistent call",
            }
        ));
    }
    let retrans: Vec<String> = probed
        .iter()
        .filter_map(|r| {
            let t = r.tcp_info.as_ref()?;
            (t.retransmits > 0).then(|| {
                let syn = if t.syn_retransmitting_connections > 0 {
                    format!(
                        ", {} of {} connections retried their SYN",
                        t.syn_retransmitting_connections, t.connections_sampled
                    )
                } else {
                    String::new()
                };
                format!(
                    "{} ({}) {:.3}{syn}",
                    r.transport,
                    r.mode_label(),
                    t.retransmits_per_call
                )
            })
        })
        .collect();
    let connections: u64 = probed
        .iter()
        .filter_map(|r| r.tcp_info.as_ref())
        .map(|t| t.connections_sampled)
        .sum();
    if retrans.is_empty() {
        parts.push(format!("no TCP retransmits over {connections} connections"));
    } else {
        parts.push(format!("TCP retransmits per call: {}", retrans.join("; ")));
    }
    Some(format!(
        "TCP_INFO (read as each connection closed): {}",
        parts.join("; ")
    ))
}

/// The line on the early data of the `tls13-0rtt` runs of a connection per call: per run,
/// the measured calls that sent their request in 0-RTT and how many the server accepted,
/// so a mean that mixes 0-RTT calls with full handshakes says so. `None` without such
/// runs.
pub fn zero_rtt_line(report: &Report) -> Option<String> {
    let parts: Vec<String> = report
        .runs
        .iter()
        // A kept connection opens in the warm-up: only a connection per call counts here.
        .filter(|r| !r.transport.persistent() && !r.transport.shared())
        .filter_map(|r| {
            let z = r.zero_rtt?;
            let rejected = z.sent - z.accepted.min(z.sent);
            let rejected = if rejected > 0 {
                format!(", {rejected} refused and sent again after the handshake")
            } else {
                String::new()
            };
            Some(format!(
                "{} ({}) {} of {} calls sent their request in early data, {} accepted{rejected}",
                r.transport,
                r.mode_label(),
                z.sent,
                r.calls,
                z.accepted
            ))
        })
        .collect();
    (!parts.is_empty()).then(|| format!("0-RTT: {}", parts.join("; ")))
}

/// The line on the QUIC runs whose server sent Retries (address validation: a round trip
/// more for each handshake that got one, as the model expects). `None` without any.
pub fn retry_line(report: &Report) -> Option<String> {
    let parts: Vec<String> = report
        .runs
        .iter()
        .filter_map(|r| {
            Some(format!(
                "{} ({}) {} Retries in {} calls",
                r.transport,
                r.mode_label(),
                r.quic_retries?,
                r.calls
            ))
        })
        .collect();
    (!parts.is_empty()).then(|| {
        format!(
            "QUIC Retry (the server had the client prove its address first, a round trip more each): {}",
            parts.join("; ")
        )
    })
}

/// The line naming the runs that used the event-loop engine, with its threads: said only
/// when some did (high `-c`), since a thread per worker is what anyone would assume. Said
/// once for all of them: the transports that shared a (threads, connections) pair, each
/// named once whatever its address modes (`1 thread for 16 connections: h2-mux, h2`).
pub fn engine_line(report: &Report) -> Option<String> {
    use crate::runner::Engine;
    let mut groups: Vec<((usize, usize), Vec<&str>)> = Vec::new();
    for r in report
        .runs
        .iter()
        .filter(|r| r.engine == Some(Engine::Evloop))
    {
        let key = (r.threads, r.workers);
        let name = r.transport.name();
        match groups.iter_mut().find(|(k, _)| *k == key) {
            Some((_, names)) if !names.contains(&name) => names.push(name),
            Some(_) => {}
            None => groups.push((key, vec![name])),
        }
    }
    (!groups.is_empty()).then(|| {
        let parts: Vec<String> = groups
            .iter()
            .map(|((threads, workers), names)| {
                format!(
                    "{threads} thread{} for {workers} connections: {}",
                    if *threads == 1 { "" } else { "s" },
                    names.join(", ")
                )
            })
            .collect();
        format!(
            "event-loop engine (a few threads, many connections each; --engine blocking for a thread per worker): {}",
            parts.join("; ")
        )
    })
}

/// Why a run's workers sat idle: what one line of [`concurrency_lines`] is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Idle {
    /// Under `--rate`, the rate itself asks for fewer calls in flight than there are
    /// workers (Little's law: rate × latency); the workers number is kept with it.
    Pacing { workers: usize },
    /// The workers waited at the start or the end of a short run.
    ShortRun { workers: usize },
}

impl Idle {
    /// The cause of run `r`'s shortfall, paced at `rate` or back to back.
    fn of(r: &RunRecord, rate: Option<f64>) -> Idle {
        let workers = r.workers;
        match (rate, r.latency_us.map(|l| l.mean / 1e6)) {
            (Some(rate), Some(mean_s))
                if rate * mean_s < crate::report::CONCURRENCY_SHORTFALL * workers as f64 =>
            {
                Idle::Pacing { workers }
            }
            _ => Idle::ShortRun { workers },
        }
    }
}

/// The line for the runs idle for one cause: `calls in flight below the 16 workers, on
/// average: h2-mux 10.7-13.9, h2 13.9; …`, each transport once with the range over its
/// modes. Under pacing it says what rate would load every worker (workers over the
/// smallest mean: enough for each of these runs); otherwise that the workers sat idle as
/// short runs start and stop, and, when the user asked for these workers (`asked`), what
/// fills them.
pub(super) fn concurrency_line(
    cause: Idle,
    runs: &[&RunRecord],
    rate: Option<f64>,
    timed: bool,
    asked: bool,
) -> String {
    let mut by_transport: Vec<(&str, f64, f64)> = Vec::new();
    for r in runs {
        let name = r.transport.name();
        let x = r.concurrency_achieved;
        match by_transport.iter_mut().find(|(n, _, _)| *n == name) {
            Some((_, lo, hi)) => {
                *lo = lo.min(x);
                *hi = hi.max(x);
            }
            None => by_transport.push((name, x, x)),
        }
    }
    let in_flight: Vec<String> = by_transport
        .iter()
        .map(|&(name, lo, hi)| {
            let (lo, hi) = (units::significant(lo, 2), units::significant(hi, 2));
            if lo == hi {
                format!("{name} {lo}")
            } else {
                format!("{name} {lo}-{hi}")
            }
        })
        .collect();
    let (workers, why) = match cause {
        Idle::Pacing { workers } => {
            let fastest_s = runs
                .iter()
                .filter_map(|r| r.latency_us.map(|l| l.mean / 1e6))
                .fold(f64::INFINITY, f64::min);
            (
                workers,
                format!(
                    "the workers wait for their due calls (pacing): {} calls/s keep only rate × latency of them busy; about {} calls/s would load all {workers}",
                    units::rate(rate.unwrap_or_default()),
                    units::rate(workers as f64 / fastest_s)
                ),
            )
        }
        Idle::ShortRun { workers } => {
            let shortest = runs
                .iter()
                .map(|r| r.elapsed_s)
                .fold(f64::INFINITY, f64::min);
            // Workers given equal shares of -n finish at different times; with
            // --duration none waits for another.
            let fill = match (asked, timed) {
                (false, _) => "",
                (true, false) => "; more calls (-n) or --duration fill them",
                (true, true) => "; a longer --duration fills them",
            };
            (
                workers,
                format!(
                    "workers idle while runs this short start and stop (the shortest {}){fill}",
                    units::duration(shortest * 1e6)
                ),
            )
        }
    };
    format!(
        "calls in flight below the {workers} workers, on average: {}; {why}",
        in_flight.join(", ")
    )
}

/// A physics rule ([`crate::physics`]) as a sentence.
pub fn rule_sentence(rule: Rule) -> &'static str {
    match rule {
        Rule::ModesAgree => {
            "a persistent connection's mean does not depend on the address mode (its lookup is in the warm-up)"
        }
        Rule::SameHostNotSlower => "a same-host socket is no slower than TCP on the same host",
        Rule::KeptNotSlowerThanFresh => {
            "a kept connection is no slower than a new connection per call"
        }
        Rule::IpNotSlowerThanLookup => {
            "a fresh call by IP is no slower than one that looks the name up (uncached)"
        }
        Rule::PlainNotSlowerThanTls => {
            "a fresh call in plain is no slower than one with a TLS handshake"
        }
    }
}

/// A figure of a physics check: `tcp (ip) 5.3 µs ± 3%` (the noise at least its floor).
pub fn figure_text(f: &Figure) -> String {
    let noise = f.spread.unwrap_or(0.0).max(crate::physics::MIN_NOISE) * 100.0;
    format!(
        "{} ({}) {} ± {noise:.0}%",
        f.transport,
        f.mode,
        units::duration(f.mean_us)
    )
}

/// A physics check in one line: the rule, both figures and the verdict.
pub fn physics_line(c: &PhysicsCheck) -> String {
    let verdict = if c.pass {
        "holds"
    } else {
        "broken beyond the noise"
    };
    format!(
        "{}: {} against {}: {verdict}",
        rule_sentence(c.rule),
        figure_text(&c.faster),
        figure_text(&c.slower)
    )
}

/// What a broken physics check likely means, after its line.
pub const LIKELY_CAUSES: &str = "likely the placement (a thread woken on the other CPU: see --placement), the CPU's clock changing speed, or a noisy neighbour; run again, or with more --rounds";

/// How many seqs of each kind the problem list shows.
pub(super) const SHOWN_SEQS: usize = 20;

/// Plain-text lines for every run that lost, mismatched or failed calls: the counts and
/// the first seqs, the way seed 004 diffed what it sent against what came back.
pub fn problem_lines(report: &Report) -> Vec<String> {
    report
        .runs
        .iter()
        .filter(|r| {
            r.failed() > 0
                || r.duplicated > 0
                || r.late > 0
                || r.late_replies > 0
                || r.reordered > 0
        })
        .map(problem_line)
        .collect()
}

/// One run's failures: counts by kind, the first seqs of each, lateness, the DNS error.
pub(super) fn problem_line(r: &RunRecord) -> String {
    let seqs = |v: &[u64]| {
        let shown: Vec<String> = v.iter().take(SHOWN_SEQS).map(u64::to_string).collect();
        let more = if v.len() > SHOWN_SEQS { " …" } else { "" };
        format!("[{}{more}]", shown.join(", "))
    };
    let mut parts = Vec::new();
    if r.lost > 0 {
        parts.push(format!("lost {} {}", r.lost, seqs(&r.lost_seqs)));
    }
    if r.mismatched > 0 {
        parts.push(format!(
            "mismatched {} {}",
            r.mismatched,
            seqs(&r.mismatched_seqs)
        ));
    }
    if r.error_total() > 0 {
        let kinds: Vec<String> = r.errors.iter().map(|(k, n)| format!("{k}={n}")).collect();
        parts.push(format!(
            "errors {} ({}) {}",
            r.error_total(),
            kinds.join(", "),
            seqs(&r.error_seqs)
        ));
    }
    if r.duplicated > 0 {
        parts.push(format!("duplicated replies {}", r.duplicated));
    }
    if r.late_replies > 0 {
        parts.push(format!(
            "late replies {} (after their call was counted lost)",
            r.late_replies
        ));
    }
    if r.reordered > 0 {
        parts.push(format!("reordered replies {}", r.reordered));
    }
    if r.late > 0 {
        parts.push(format!(
            "{} calls started more than one interval late: --rate was not held",
            r.late
        ));
    }
    if let Some(why) = &r.dns_error {
        parts.push(why.clone());
    }
    format!(
        "{} ({}): {} of {} calls failed: {}",
        r.transport,
        r.mode_label(),
        r.failed(),
        r.calls,
        parts.join("; ")
    )
}

/// Breaks `text` into lines of at most `width` characters at spaces, the first line
/// starting with `first`, the others with `rest` (a hanging indent). A word longer than
/// a line is cut, so that no line is ever wider than `width`.
pub fn wrap(text: &str, width: usize, first: &str, rest: &str) -> Vec<String> {
    let mut lines = Vec::new();
    let mut line = first.to_string();
    let mut empty = true;
    let len = |s: &str| s.chars().count();
    for word in text.split(' ').filter(|w| !w.is_empty()) {
        let mut word = word.to_string();
        loop {
            let room = width.saturating_sub(len(&line) + usize::from(!empty));
            if len(&word) <= room {
                if !empty {
                    line.push(' ');
                }
                line.push_str(&word);
                empty = false;
                break;
            }
            if !empty {
                lines.push(std::mem::replace(&mut line, rest.to_string()));
                empty = true;
                continue;
            }
            // A word longer than a whole line: cut it (at least one character, so that
            // even an absurdly narrow width ends).
            let fits = width.saturating_sub(len(&line)).max(1);
            let head: String = word.chars().take(fits).collect();
            word = word.chars().skip(fits).collect();
            line.push_str(&head);
            lines.push(std::mem::replace(&mut line, rest.to_string()));
            if word.is_empty() {
                break;
            }
        }
    }
    if !empty {
        lines.push(line);
    }
    lines
}

/// A pair of rpcbench beside a peer, for lists: `tcp against sockperf ping-pong: 16.3 µs
/// against 14.8 µs, 1.10× (medians of 3 round(s))`.
pub fn peer_pair(pair: &PeerPair) -> String {
    let what = format!("{} against {}", pair.name(), pair.peer);
    match (pair.rpcbench_us(), pair.peer_us(), pair.ratio()) {
        (Some(rb), Some(peer), Some(ratio)) => format!(
            "{what}: {} against {}, {}× (medians of {} round(s))",
            units::duration(rb),
            units::duration(peer),
            units::ratio(ratio),
            pair.rpcbench_round_means_us.len()
        ),
        _ => format!("{what}: no figures"),
    }
}

/// Where rpcbench placed its threads, as a heading says it, e.g. `placed: client and
/// server on CPU 1`; the runs of several workers added when their client moved.
pub fn placement(p: &PlacementRecord) -> String {
    let one_worker = match (p.client_cpu, p.server_cpu) {
        (Some(c), Some(s)) if c == s => format!("placed: client and server on CPU {c}"),
        (Some(c), Some(s)) => format!("placed: client on CPU {c}, server on CPU {s}"),
        (Some(c), None) => {
            format!("placed: client on CPU {c}; the server's placement is its host's")
        }
        _ if p.remote_server => format!(
            "client not placed (CPUs {}); the server's placement is its host's",
            p.allowed
        ),
        _ => format!("not placed (CPUs {})", p.allowed),
    };
    match p.loaded_client_cpu {
        Some(c) => format!("{one_worker}; runs of several workers: client on CPU {c}"),
        None => one_worker,
    }
}
