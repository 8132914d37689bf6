//! The words of the findings: one sentence per [`Finding`](crate::analysis::findings::Finding) (and per DNS or sweep finding),
//! the same after a run's tables and in `rpcbench report`. The figures come from the
//! analysis (`analysis::findings`, `analysis::sweep`, `model`, `dnsdiag`); only this file says
//! them.

use super::units::{bytes, duration, rate, ratio, significant};
use crate::analysis::findings::{
    Choice, Delta, EncodingCosts, Finding, Multiplexing, ReusePair, RunName, TlsPrice, Versus,
};
use crate::analysis::peers::PEER_RATIO_LIMIT;
use crate::analysis::sweep::{SeriesName, StepAt, SweepFinding};
use crate::dnsdiag::{AnswerKind, DnsFinding, Intermediary};

/// What a sentence says of two figures that lie within their noise.
const NO_DIFFERENCE: &str = "no measurable difference";

/// `1.34×`, or [`NO_DIFFERENCE`].
fn versus(v: Versus) -> String {
    match v {
        Versus::Times(x) => format!("{}×", ratio(x)),
        Versus::NoDifference => NO_DIFFERENCE.to_string(),
    }
}

/// `732 µs`, `12 µs less` when the difference runs the other way, or [`NO_DIFFERENCE`].
fn delta(d: Delta) -> String {
    match d {
        Delta::By(us) if us < 0.0 => format!("{} less", duration(-us)),
        Delta::By(us) => duration(us),
        Delta::NoDifference => NO_DIFFERENCE.to_string(),
    }
}

/// A run's transport, with its security mode after it when that is not `plain`.
fn run_name(r: RunName) -> String {
    if r.security.is_tls() {
        format!("{} {}", r.transport, r.security)
    } else {
        r.transport.to_string()
    }
}

/// A series' name: the transport, and the mode when it is not `ip`.
fn series_name(s: SeriesName) -> String {
    match s.mode {
        crate::resolve::AddrMode::Ip => s.transport.to_string(),
        mode => format!("{} ({mode})", s.transport),
    }
}

/// A count that may be fractional (an average), without a trailing `.0`.
fn trim_float(x: f64) -> String {
    if x.fract() == 0.0 {
        format!("{x:.0}")
    } else {
        format!("{x:.1}")
    }
}

/// The parts of a TLS finding joined: one per transport.
fn joined<T>(parts: &[T], part: impl Fn(&T) -> String) -> String {
    parts.iter().map(part).collect::<Vec<_>>().join("; ")
}

/// The sentence of a finding.
pub fn sentence(f: &Finding) -> String {
    match f {
        Finding::Reuse(pairs) => reuse_sentence(pairs),
        Finding::Multiplexing(shared) => multiplexing_sentence(shared),
        Finding::TlsHandshake(parts) => tls_handshake_sentence(parts),
        Finding::TlsResumption(parts) => format!(
            "Resuming the previous session wins back per fresh call: {}.",
            priced_as(parts, "tls13-resume")
        ),
        Finding::EarlyData(parts) => format!(
            "Sending the request in early data (0-RTT) wins back per fresh call, against a full handshake: {}.",
            priced_as(parts, "tls13-0rtt")
        ),
        Finding::TlsVersions(parts) => format!(
            "TLS 1.2 against TLS 1.3 per fresh call (above 1× 1.2 is the slower): {}.",
            joined(parts, |v| {
                let both: Vec<String> = [(v.full, "full"), (v.resumed, "resumed")]
                    .into_iter()
                    .filter_map(|(x, what)| Some(format!("{} {what}", versus(x?))))
                    .collect();
                format!("{} {}", v.transport, both.join(", "))
            })
        ),
        Finding::ClientCertificate(parts) => format!(
            "A client certificate (mutual TLS) adds per fresh call: {}.",
            priced_as(parts, "mtls")
        ),
        Finding::QuicHandshake(parts) => format!(
            "A new QUIC connection per call against a new TCP connection and TLS 1.3 (both `tls13`): {}.",
            joined(parts, |p| {
                let handshakes = p.handshakes_us.map_or(String::new(), |(q, t)| {
                    format!(
                        "; handshake {} against connect and TLS {}",
                        duration(q),
                        duration(t)
                    )
                });
                format!(
                    "{} {} against {} {} ({}; {} round trips a call against {}{handshakes})",
                    p.quic.transport,
                    duration(p.quic.mean_us),
                    p.tcp.transport,
                    duration(p.tcp.mean_us),
                    versus(p.quic_over_tcp),
                    p.round_trips.0,
                    p.round_trips.1
                )
            })
        ),
        Finding::TlsKept(parts) => tls_kept_sentence(parts),
        Finding::NameLookup {
            transport,
            by_ip_us,
            by_name_us,
            cached_us,
            added,
            resolver_late_us,
        } => name_lookup_sentence(
            *transport,
            (*by_ip_us, *by_name_us, *cached_us),
            *added,
            *resolver_late_us,
        ),
        Finding::SearchList {
            mode,
            name,
            candidates,
            queries_per_lookup,
            misses,
        } => search_list_sentence(
            *mode,
            name,
            candidates,
            *queries_per_lookup,
            misses.as_ref(),
        ),
        Finding::Pick {
            any,
            http,
            loopback,
        } => format!(
            "{}, pick {} when you own both ends; if it must be HTTP, {}, with a connection kept per worker.",
            if *loopback {
                "On this host (loopback: no network between the two)"
            } else {
                "For this pair of hosts"
            },
            choice(any),
            choice(http)
        ),
        Finding::ClientCpu { least, most, quic } => {
            let range = format!(
                "Client CPU per call ranges from {} ({}) to {} ({}).",
                duration(least.1),
                run_name(least.0),
                duration(most.1),
                run_name(most.0)
            );
            if quic.is_empty() {
                return range;
            }
            format!(
                "{range} QUIC runs its stack in user space: {}.",
                joined(quic, |(quic, tcp)| format!(
                    "{} {} against {} {} over kernel TCP ({}×)",
                    run_name(quic.0),
                    duration(quic.1),
                    run_name(tcp.0),
                    duration(tcp.1),
                    ratio(quic.1 / tcp.1)
                ))
            )
        }
        Finding::SynRetries(s) => syn_retries_sentence(s),
        Finding::Encodings(costs) => encodings_sentence(costs),
        Finding::AtLinkRtt { rtt_us, finding } => {
            format!("At link RTT {}: {}", duration(*rtt_us), sentence(finding))
        }
        Finding::Lost { calls, failed } if failed.is_empty() => {
            format!("No call was lost: all {calls} measured calls came back with their own bytes.")
        }
        Finding::Lost { calls, failed } => format!(
            "Calls failed: {} (of {calls} measured calls in all); see the tables for their kinds.",
            failed
                .iter()
                .map(|r| format!(
                    "{} ({}) {} of {}",
                    r.run.transport, r.run, r.failed, r.calls
                ))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        Finding::Peers {
            placement,
            worst,
            over,
        } => peers_sentence(placement, worst, over),
        Finding::RoundTrips(g) => round_trips_sentence(g),
        Finding::Sweep(s) => sweep_sentence(s),
        Finding::Dns(d) => dns_sentence(d),
    }
}

/// The sentence of what an uncached name lookup costs a fresh call: `means` are by IP,
/// by name and (when measured) cached, µs.
fn name_lookup_sentence(
    transport: crate::transport::TransportKind,
    means: (f64, f64, Option<f64>),
    added: Delta,
    resolver_late_us: u64,
) -> String {
    let (by_ip_us, by_name_us, cached_us) = means;
    let cached = cached_us.map_or(String::new(), |c| {
        format!(
            ", and caching the answer (cached) brings it back to {}",
            duration(c)
        )
    });
    let resolver = match resolver_late_us {
        0 => " with the resolver next door".to_string(),
        late => format!(
            " with a resolver that answers {} late",
            duration(late as f64)
        ),
    };
    let cost = match added {
        Delta::NoDifference => "no measurable time".to_string(),
        by => delta(by),
    };
    format!(
        "An uncached name lookup on every new connection costs {cost} per call{resolver}: {transport} takes {} by name against {} by IP{cached}; persistent transports pay it once per connection.",
        duration(by_name_us),
        duration(by_ip_us)
    )
}

/// The sentence of a lookup that follows the search list: the names it tries, its
/// queries, and what the misses cost a fresh call.
fn search_list_sentence(
    mode: crate::resolve::AddrMode,
    name: &str,
    candidates: &[String],
    queries_per_lookup: Option<f64>,
    misses: Option<&TlsPrice>,
) -> String {
    let queries = queries_per_lookup.map_or(String::new(), |q| {
        format!(" and makes {} queries", trim_float(q))
    });
    let cost = misses.map_or(String::new(), |m| {
        format!(
            "; the misses cost {} per fresh call ({} {} against {} asking the name alone)",
            delta(m.delta),
            m.transport,
            duration(m.priced_us),
            duration(m.base_us)
        )
    });
    format!(
        "Each {mode} lookup of {} tries {} names in turn ({}){queries}{cost}. The fully qualified name with its trailing dot ({name}), or a lower ndots, asks only the last.",
        name.trim_end_matches('.'),
        candidates.len(),
        candidates.join(", "),
    )
}

/// The sentence of rpcbench beside established tools: at worst some ratio, or above the
/// limit for the pairs in `over` (name, peer, ratio).
fn peers_sentence(
    placement: &str,
    worst: &(String, String, f64),
    over: &[(String, String, f64)],
) -> String {
    if over.is_empty() {
        return format!(
            "Against established tools on the same placement ({placement}), rpcbench is at worst {}× the peer ({} against {}), so these figures measure the network and the stacks, not rpcbench.",
            ratio(worst.2),
            worst.0,
            worst.1
        );
    }
    format!(
        "Against established tools on the same placement ({placement}), rpcbench is above the {PEER_RATIO_LIMIT}× limit for {}: there, part of the figure is rpcbench's own overhead (a benchmark, not a check: host noise moves it).",
        over.iter()
            .map(|(name, peer, r)| format!("{name} {}× {peer}", ratio(*r)))
            .collect::<Vec<_>>()
            .join(", ")
    )
}

/// The sentence of kept connections against fresh ones.
fn reuse_sentence(pairs: &[ReusePair]) -> String {
    format!(
        "{}: per call, {}.",
        // The lead claims a win only where every pair shows one beyond the noise.
        if pairs
            .iter()
            .all(|p| matches!(p.fresh_over_kept, Versus::Times(x) if x > 1.0))
        {
            "Reusing a connection is the biggest win"
        } else {
            "A kept connection against a new one per call"
        },
        joined(pairs, |p| format!(
            "{} {} against {} {} ({})",
            p.kept.transport,
            duration(p.kept.mean_us),
            p.fresh.transport,
            duration(p.fresh.mean_us),
            versus(p.fresh_over_kept)
        ))
    )
}

/// The sentences of shared connections against a connection per worker, one per shared
/// transport that ran.
fn multiplexing_sentence(shared: &[Multiplexing]) -> String {
    shared
        .iter()
        .map(|m| {
            format!(
                "Multiplexing {} workers as streams on one connection ({}, {}) against {}, at the same {} workers: above 1× the shared connection costs more than it saves.",
                m.workers,
                m.shared.transport,
                duration(m.shared.mean_us),
                against(m, |t| if t.shared() {
                    " (also one connection for all)"
                } else {
                    " (a connection per worker)"
                }),
                m.workers,
            )
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The sentence of what a full TLS 1.3 handshake adds per fresh call.
fn tls_handshake_sentence(parts: &[TlsPrice]) -> String {
    format!(
        "A full TLS 1.3 handshake adds per fresh call: {}.",
        joined(parts, |p| {
            let handshake = p
                .handshake_us
                .map(|t| format!(", the handshake itself {}", duration(t)))
                .unwrap_or_default();
            format!(
                "{} {} ({} plain, {} tls13{handshake})",
                p.transport,
                delta(p.delta),
                duration(p.base_us),
                duration(p.priced_us)
            )
        })
    )
}

/// The sentence of what TLS costs a call on a kept connection.
fn tls_kept_sentence(parts: &[TlsPrice]) -> String {
    format!(
        "On a kept-alive connection the handshake is paid once, and TLS 1.3 costs a call only its encryption: {}.",
        joined(parts, |p: &TlsPrice| {
            let cost = match p.delta {
                Delta::By(us) => format!("{us:+.0} µs"),
                Delta::NoDifference => NO_DIFFERENCE.to_string(),
            };
            format!(
                "{} {} against {} plain ({cost})",
                p.transport,
                duration(p.priced_us),
                duration(p.base_us)
            )
        })
    )
}

/// The sentence of connections that retransmitted their SYN.
fn syn_retries_sentence(s: &crate::report::SynRetries) -> String {
    let tail = if s.in_p99() {
        format!("p99 {:.0} ms is those retries", s.p99_us / 1000.0)
    } else {
        format!(
            "the max {:.0} ms is one of those retries (p99 {:.1} ms is below the timeout: fewer than 1% of calls waited)",
            s.max_us / 1000.0,
            s.p99_us / 1000.0
        )
    };
    format!(
        "{}: {} of {} connections retransmitted their SYN ({} SYN retransmits; {:.0} s timeout each); {tail}",
        s.transport,
        s.connections,
        s.connections_sampled,
        s.syn_retransmits,
        s.timeout_us / 1e6,
    )
}

/// The sentence of a run whose fitted round trips differ from its protocol's.
fn round_trips_sentence(g: &crate::model::RoundTripGap) -> String {
    let why = if g.above() {
        "something adds a wait on some calls: Nagle holding a small write until the delayed ACK of the previous one, a missing TCP_NODELAY, an `Expect: 100-continue`, or a write split in two that the other side answers separately; on a loaded virtual machine also the cost of waking a vCPU after each idle wait, which a larger RTT makes smaller in k"
    } else {
        "fewer round trips than the protocol needs: a cache or a connection reused where a new one was expected, or a link RTT recorded wrong (`--link-rtt`)"
    };
    format!(
        "{} ({}) makes {:.2} round trips per call where the protocol needs {}: {why}.",
        g.key.transport,
        g.key.mode_label(),
        g.fitted,
        g.expected
    )
}

/// `tcp-connect 221 µs (mtls 1.05 ms)`: each transport's difference and the priced mode's
/// mean, the mode named `mode`.
fn priced_as(parts: &[TlsPrice], mode: &str) -> String {
    joined(parts, |p| {
        format!(
            "{} {} ({mode} {})",
            p.transport,
            delta(p.delta),
            duration(p.priced_us)
        )
    })
}

/// `h2 40.1 µs (1.20×); http-keepalive 38.0 µs (no measurable difference)`, each run
/// compared with the shared connection, `what` naming it.
fn against(
    m: &Multiplexing,
    what: impl Fn(crate::transport::TransportKind) -> &'static str,
) -> String {
    m.against
        .iter()
        .map(|(t, v)| {
            format!(
                "{}{} {} ({})",
                t.transport,
                what(t.transport),
                duration(t.mean_us),
                versus(*v)
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// `tcp (mean 16.2 µs, p99 60.1 µs), or as well unix (no measurable difference)`.
fn choice(c: &Choice) -> String {
    let tie = if c.tied.is_empty() {
        String::new()
    } else {
        let tied: Vec<String> = c.tied.iter().map(|&r| run_name(r)).collect();
        format!(", or as well {} ({NO_DIFFERENCE})", tied.join(", "))
    };
    format!(
        "{} (mean {}, p99 {}){tie}",
        run_name(c.run),
        duration(c.mean_us),
        duration(c.p99_us)
    )
}

/// The sentence of a sweep finding.
pub fn sweep_sentence(f: &SweepFinding) -> String {
    match f {
        SweepFinding::Lost {
            calls,
            steps,
            failed,
        } if failed.is_empty() => format!(
            "No call was lost in the sweeps: all {calls} measured calls of {steps} steps came back with their own bytes."
        ),
        SweepFinding::Lost { calls, failed, .. } => format!(
            "Calls failed in the sweeps: {} (of {calls} measured calls in all); see the step tables.",
            failed
                .iter()
                .map(|f| {
                    let at = match f.at {
                        StepAt::Rate(r) => format!("{} calls/s", rate(r)),
                        StepAt::Payload(b) => bytes(b),
                    };
                    format!(
                        "{} at {at} {} of {}",
                        series_name(f.series),
                        f.failed,
                        f.calls
                    )
                })
                .collect::<Vec<_>>()
                .join(", ")
        ),
        SweepFinding::Capacity {
            objective,
            met,
            missed,
            at_top,
        } => capacity_sentence(objective, met, missed, at_top),
        SweepFinding::Knees { growth, knees } => format!(
            "Past the knee (the last step before p99 grows more than {growth}× or the offered rate is no longer achieved) latency climbs faster than load: {}.",
            knees
                .iter()
                .map(|(s, achieved, p99)| format!(
                    "{} at {} calls/s (p99 {})",
                    series_name(*s),
                    rate(*achieved),
                    duration(*p99)
                ))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        SweepFinding::Payload { bytes: b, series } => format!(
            "From {} to {} payloads: {}.",
            bytes(b.0),
            bytes(b.1),
            series
                .iter()
                .map(|s| format!(
                    "{} moves {} to {} MB/s, p99 {} to {}",
                    series_name(s.series),
                    significant(s.goodput_mb_s.0, 3),
                    significant(s.goodput_mb_s.1, 3),
                    duration(s.p99_us.0),
                    duration(s.p99_us.1)
                ))
                .collect::<Vec<_>>()
                .join("; ")
        ),
    }
}

/// `At p99 ≤ 2.00 ms, tcp sustains 18,400 calls/s and http-keepalive 9,100: tcp takes
/// 2.02× the load.`, with the series that met it at no rate said after.
fn capacity_sentence(
    objective: &str,
    met: &[(SeriesName, f64)],
    missed: &[crate::analysis::sweep::Missed],
    at_top: &[SeriesName],
) -> String {
    let mut text = format!("At {objective}");
    let names = || -> Vec<String> { met.iter().map(|(s, _)| series_name(*s)).collect() };
    match met {
        [] => {}
        [(s, c)] => text.push_str(&format!(
            ", {} sustains {} calls/s",
            series_name(*s),
            rate(*c)
        )),
        [(_, top), .., (_, bottom)] if top == bottom => text.push_str(&format!(
            ", {} each sustain {} calls/s",
            names().join(" and "),
            rate(*top)
        )),
        [(first, top), rest @ ..] => {
            let others: Vec<String> = rest
                .iter()
                .map(|(s, c)| format!("{} {}", series_name(*s), rate(*c)))
                .collect();
            let (last, bottom) = met[met.len() - 1];
            let of = if met.len() > 2 {
                format!(" of {}", series_name(last))
            } else {
                String::new()
            };
            text.push_str(&format!(
                ", {} sustains {} calls/s and {}: {} takes {}× the load{of}",
                series_name(*first),
                rate(*top),
                others.join(", "),
                series_name(*first),
                ratio(top / bottom)
            ));
        }
    }
    if !missed.is_empty() {
        let sep = if met.is_empty() { ", " } else { "; " };
        text.push_str(sep);
        let missed: Vec<String> = missed
            .iter()
            .map(|m| match m.lowest_tried {
                Some(lowest) => format!(
                    "{} met it at no rate tried (from {} calls/s)",
                    series_name(m.series),
                    rate(lowest)
                ),
                None => format!("{} was not judged at any rate", series_name(m.series)),
            })
            .collect();
        text.push_str(&missed.join("; "));
    }
    if !at_top.is_empty() {
        let at_top: Vec<String> = at_top.iter().map(|&s| series_name(s)).collect();
        text.push_str(&format!(
            " ({} met it at the highest rate tried, so may take more)",
            at_top.join(", ")
        ));
    }
    text.push('.');
    text
}

/// The sentence of a DNS diagnosis's finding.
pub fn dns_sentence(f: &DnsFinding) -> String {
    match f {
        DnsFinding::InHosts { name, addresses } => format!(
            "`{name}` is in /etc/hosts ({}), which nsswitch reads before DNS: a lookup sends no query.",
            addresses.join(", ")
        ),
        DnsFinding::SearchMisses {
            name,
            dots,
            ndots,
            misses,
            queries,
            codes,
            wasted_us,
            lookup_us,
        } => format!(
            "`{name}` has {dots} dot{} and ndots is {ndots}: each lookup first tries {misses} search domain{} ({queries} queries, all {}, {} of {}). Use the fully qualified name with a trailing dot (`{}.`), or lower ndots.",
            if *dots == 1 { "" } else { "s" },
            if *misses == 1 { "" } else { "s" },
            codes
                .iter()
                .map(AnswerKind::as_str)
                .collect::<Vec<_>>()
                .join("/"),
            duration(*wasted_us),
            duration(*lookup_us),
            name.trim_end_matches('.'),
        ),
        DnsFinding::Dropped {
            qtype,
            candidate,
            server,
            timeout_s,
        } => format!(
            "{qtype} for {candidate} is dropped by {server}: every lookup waits the {timeout_s} s timeout (options timeout:{timeout_s})."
        ),
        DnsFinding::TruncatedToTcp { qtype, candidate } => format!(
            "The {qtype} answer for {candidate} is truncated over UDP and fetched over TCP: a second exchange, with a TCP handshake, on every lookup."
        ),
        DnsFinding::TtlZero => {
            "TTL is 0: caching cannot help; every lookup goes to the nameserver.".to_string()
        }
        DnsFinding::InBetween {
            what,
            getaddrinfo_us,
            lookup_us,
        } => format!(
            "getaddrinfo took {} where the queries it should send took {}: {} answers instead of the nameserver.",
            duration(*getaddrinfo_us),
            duration(*lookup_us),
            in_between(what)
        ),
        DnsFinding::NoAnswer { name } => {
            format!("No candidate of `{name}` got an answer with records.")
        }
    }
}

/// "Encodings at echo-struct:100 on http-keepalive: postcard 12.3 µs a call, 2.7 KiB of
/// bodies; json 2.10× its latency, 2.31× its bytes, 3.00× its server CPU; ..."
fn encodings_sentence(costs: &[EncodingCosts]) -> String {
    let parts: Vec<String> = costs
        .iter()
        .map(|c| {
            let (least, mean, body) = c.least;
            let mut part = format!(
                "at {} on {}, {least} {} a call and {:.0} B of bodies",
                c.message,
                c.transport,
                duration(mean),
                body
            );
            for o in &c.others {
                let cpu = o
                    .server_cpu
                    .map_or(String::new(), |x| format!(", {}× its server CPU", ratio(x)));
                let latency = match o.latency {
                    Versus::Times(x) => format!("{}× its latency", ratio(x)),
                    Versus::NoDifference => format!("its latency ({NO_DIFFERENCE})"),
                };
                part.push_str(&format!(
                    "; {} {latency}, {}× its bytes{cpu}",
                    o.encoding,
                    ratio(o.bytes)
                ));
            }
            part
        })
        .collect();
    format!("Encodings {}.", parts.join(". And "))
}

/// One line when the figures' placement was left to the scheduler, with what places it
/// ([`Unplaced`](crate::analysis::findings::Unplaced)); nothing when rpcbench placed its
/// threads itself and the server, if remote, was pinned on its host.
pub fn pinning_advice(report: &crate::report::Report) -> Option<String> {
    use crate::analysis::findings::{PIN_CPU, Unplaced, unplaced};
    let here = |placed: bool, command: &str, prefix: &str| {
        if placed {
            format!("{prefix}drop --placement none")
        } else {
            format!("{prefix}taskset -c {PIN_CPU} {command}")
        }
    };
    Some(match unplaced(report)? {
        Unplaced::Embedded { placed, command } => format!(
            "not placed: client and server may run on different cores, and figures may move between runs; place both on one CPU: {}",
            here(placed, &command, "")
        ),
        Unplaced::Remote {
            client_free,
            server_free,
            placed,
            command,
        } => {
            let which = match (client_free, server_free) {
                (true, true) => "neither client nor server was pinned",
                (true, false) => "the client was not pinned",
                _ => "the server was not pinned",
            };
            let here = match (client_free, placed) {
                (false, _) => String::new(),
                (true, true) => " and drop --placement none here".to_string(),
                (true, false) => format!(" and run this side as taskset -c {PIN_CPU} {command}"),
            };
            format!(
                "not pinned: {which}; start the server as rpcbench-echo --cpus {PIN_CPU} ... on its host{here}"
            )
        }
    })
}

/// What answers between the application and the nameserver, in words.
fn in_between(seen: &[Intermediary]) -> String {
    if seen.is_empty() {
        return "something between the application and the nameserver (none detected: no nscd socket, no systemd-resolved)".into();
    }
    let one = |i: &Intermediary| match i {
        Intermediary::Nscd => "nscd (its socket is there)".to_string(),
        Intermediary::SystemdResolved => "systemd-resolved (127.0.0.53 or nss-resolve)".to_string(),
        Intermediary::LocalResolver { address } => {
            format!("a local resolver or cache at {address}")
        }
    };
    seen.iter().map(one).collect::<Vec<_>>().join(", ")
}
