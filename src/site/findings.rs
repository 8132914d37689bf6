//! The findings: three to six plain sentences computed from the numbers, the answers people
//! came for. One function for both places they appear: after the tables of a run
//! (`rpcbench`, from that run alone) and at the top of `rpcbench report` (from every input).

use super::{PEER_RATIO_LIMIT, PeerPair, Peers, dns_delay_us, find, slow_dns};
use crate::render::units::{duration, ratio};
use crate::report::{Report, RunRecord};
use crate::resolve::AddrMode;
use crate::transport::TransportKind;
use crate::transport::tls::Security;

/// The sentences for `base`, with `others` (more runs: a slow resolver, a delay) and
/// `peers` adding what they can. A sentence whose figures are missing is left out.
pub fn findings(base: &Report, others: &[&Report], peers: Option<&Peers>) -> Vec<String> {
    let mut out = Vec::new();
    out.extend(reuse(base));
    out.extend(multiplexing(base));
    out.extend(tls_fresh(base));
    out.extend(tls_kept(base));
    let slow = others.iter().copied().find(|r| slow_dns(r));
    for report in std::iter::once(base).chain(slow) {
        out.extend(name_lookup(report));
    }
    out.extend(search_list(base));
    out.extend(pick(base));
    out.extend(cpu(base));
    out.extend(
        base.runs
            .iter()
            .filter_map(crate::tcpinfo::syn_retry_finding),
    );
    out.push(lost(base, others));
    out.extend(peers.and_then(peer_sentence));
    out
}

/// The mean of `transport` by IP without TLS in `report`, µs.
fn ip_mean(report: &Report, transport: TransportKind) -> Option<f64> {
    mean(report, transport, AddrMode::Ip)
}

/// The mean of `transport` under `mode` without TLS in `report`, µs.
fn mean(report: &Report, transport: TransportKind, mode: AddrMode) -> Option<f64> {
    Some(
        find(report, transport, mode, Security::Plain)?
            .latency_us?
            .mean,
    )
}

/// The mean of `transport` by IP under `security` in `report`, µs.
fn secured_mean(report: &Report, transport: TransportKind, security: Security) -> Option<f64> {
    Some(
        find(report, transport, AddrMode::Ip, security)?
            .latency_us?
            .mean,
    )
}

/// What a persistent connection saves, for each persistent transport and its fresh twin.
fn reuse(base: &Report) -> Option<String> {
    let pairs = TransportKind::ALL
        .into_iter()
        .filter(|k| k.persistent())
        .filter_map(|keep| Some((keep, fresh_twin(keep)?)));
    let saved: Vec<String> = pairs
        .filter_map(|(keep, fresh)| {
            let (k, f) = (ip_mean(base, keep)?, ip_mean(base, fresh)?);
            Some(format!(
                "{keep} {} against {fresh} {} ({}×)",
                duration(k),
                duration(f),
                ratio(f / k)
            ))
        })
        .collect();
    (!saved.is_empty()).then(|| {
        format!(
            "Reusing a connection is the biggest win: per call, {}.",
            saved.join("; ")
        )
    })
}

/// The transport that makes the same call on a new connection each time: the same
/// protocol and the same client library, so the pair differs in reuse alone. HTTP/2 has
/// no fresh twin (a new HTTP/2 connection per call is not how anyone uses it).
fn fresh_twin(keep: TransportKind) -> Option<TransportKind> {
    match keep {
        TransportKind::Tcp => Some(TransportKind::TcpConnect),
        TransportKind::HttpKeepalive => Some(TransportKind::HttpFresh),
        TransportKind::CurlReuse => Some(TransportKind::CurlFresh),
        _ => None,
    }
}

/// What multiplexing buys or costs: `h2-mux` (every worker's calls as streams on one
/// connection) against `h2` and `http-keepalive` (a connection per worker), at the
/// run's concurrency; then the same for gRPC ([`grpc_multiplexing`]). One sentence for
/// both, so the findings stay within six.
fn multiplexing(base: &Report) -> Option<String> {
    let h2 = h2_multiplexing(base);
    let grpc = grpc_multiplexing(base);
    match (h2, grpc) {
        (Some(h2), Some(grpc)) => Some(format!("{h2} {grpc}")),
        (h2, grpc) => h2.or(grpc),
    }
}

/// The HTTP/2 half of [`multiplexing`].
fn h2_multiplexing(base: &Report) -> Option<String> {
    let mux = ip_mean(base, TransportKind::H2Mux)?;
    let per_worker: Vec<String> = [TransportKind::H2, TransportKind::HttpKeepalive]
        .into_iter()
        .filter_map(|k| {
            let m = ip_mean(base, k)?;
            Some(format!("{k} {} ({}×)", duration(m), ratio(mux / m)))
        })
        .collect();
    if per_worker.is_empty() {
        return None;
    }
    let c = base.config.concurrency;
    Some(format!(
        "Multiplexing {c} worker(s) as streams on one HTTP/2 connection (h2-mux, {}) against a connection per worker: {}. Above 1× the shared connection costs more than it saves.",
        duration(mux),
        per_worker.join("; ")
    ))
}

/// What gRPC adds on a shared connection, and what sharing does for gRPC: `grpc-mux`
/// against `h2-mux` (the same one HTTP/2 connection for every worker, without gRPC's
/// framing, trailers and tonic's codec) and against `grpc` (a connection per worker).
fn grpc_multiplexing(base: &Report) -> Option<String> {
    let mux = ip_mean(base, TransportKind::GrpcMux)?;
    let against: Vec<String> = [
        (
            TransportKind::H2Mux,
            "the same shared connection without gRPC",
        ),
        (TransportKind::Grpc, "a channel per worker"),
    ]
    .into_iter()
    .filter_map(|(k, what)| {
        let m = ip_mean(base, k)?;
        Some(format!(
            "{k} ({what}) {} ({}×)",
            duration(m),
            ratio(mux / m)
        ))
    })
    .collect();
    if against.is_empty() {
        return None;
    }
    let c = base.config.concurrency;
    Some(format!(
        "gRPC on one shared channel ({c} worker(s), grpc-mux, {}) against {}: above 1× grpc-mux is the slower.",
        duration(mux),
        against.join("; ")
    ))
}

/// The fresh-connection transports TLS findings read, in the order they are named: the
/// raw frames first (nothing but TCP and TLS in the call), then HTTP with hyper, then
/// libcurl (its own TLS library, see the environment).
const FRESH: [TransportKind; 3] = [
    TransportKind::TcpConnect,
    TransportKind::HttpFresh,
    TransportKind::CurlFresh,
];

/// The TLS price of a fresh connection per call, by IP, in up to four sentences, each
/// naming every fresh transport ([`FRESH`]) that ran under both modes it compares: what a
/// full TLS 1.3 handshake adds over `plain` (with the `tls` phase, the handshake alone),
/// what resuming the session wins back, TLS 1.2 against 1.3 (full and resumed), and what a
/// client certificate adds. A sentence with no pair measured is left out.
fn tls_fresh(base: &Report) -> Vec<String> {
    let at = |k, s| secured_mean(base, k, s);
    let each = |part: &dyn Fn(TransportKind) -> Option<String>| -> Option<String> {
        let parts: Vec<String> = FRESH.into_iter().filter_map(part).collect();
        (!parts.is_empty()).then(|| parts.join("; "))
    };
    let full = each(&|k| {
        let (plain, full) = (at(k, Security::Plain)?, at(k, Security::Tls13)?);
        let handshake = find(base, k, AddrMode::Ip, Security::Tls13)
            .and_then(|r| r.phases_us.tls)
            .map(|t| format!(", the handshake itself {}", duration(t.mean)))
            .unwrap_or_default();
        Some(format!(
            "{k} {} ({} plain, {} tls13{handshake})",
            duration(full - plain),
            duration(plain),
            duration(full)
        ))
    });
    let resumed = each(&|k| {
        let (full, resumed) = (at(k, Security::Tls13)?, at(k, Security::Tls13Resume)?);
        Some(format!(
            "{k} {} (tls13-resume {})",
            duration(full - resumed),
            duration(resumed)
        ))
    });
    let versions = each(&|k| {
        let ratio_of = |s12, s13| Some(ratio(at(k, s12)? / at(k, s13)?));
        let full = ratio_of(Security::Tls12, Security::Tls13).map(|r| format!("{r}× full"));
        let resumed =
            ratio_of(Security::Tls12Resume, Security::Tls13Resume).map(|r| format!("{r}× resumed"));
        let both: Vec<String> = full.into_iter().chain(resumed).collect();
        (!both.is_empty()).then(|| format!("{k} {}", both.join(", ")))
    });
    let mtls = each(&|k| {
        let (full, m) = (at(k, Security::Tls13)?, at(k, Security::Mtls)?);
        Some(format!("{k} {} (mtls {})", duration(m - full), duration(m)))
    });
    [
        full.map(|p| format!("A full TLS 1.3 handshake adds per fresh call: {p}.")),
        resumed.map(|p| format!("Resuming the previous session wins back per fresh call: {p}.")),
        versions.map(|p| {
            format!("TLS 1.2 against TLS 1.3 per fresh call (above 1× 1.2 is the slower): {p}.")
        }),
        mtls.map(|p| format!("A client certificate (mutual TLS) adds per fresh call: {p}.")),
    ]
    .into_iter()
    .flatten()
    .collect()
}

/// What TLS costs a call on a connection kept open (the handshake is in warm-up, so what
/// is left is encrypting and decrypting each message): `tls13` against `plain` by IP, for
/// each persistent transport that ran under both.
fn tls_kept(base: &Report) -> Option<String> {
    let parts: Vec<String> = TransportKind::ALL
        .into_iter()
        .filter(|k| k.persistent())
        .filter_map(|k| {
            let plain = secured_mean(base, k, Security::Plain)?;
            let tls = secured_mean(base, k, Security::Tls13)?;
            Some(format!(
                "{k} {} against {} plain ({:+.0} µs)",
                duration(tls),
                duration(plain),
                tls - plain
            ))
        })
        .collect();
    (!parts.is_empty()).then(|| {
        format!(
            "On a kept-alive connection the handshake is paid once, and TLS 1.3 costs a call only its encryption: {}.",
            parts.join("; ")
        )
    })
}

/// What an uncached name lookup costs a fresh HTTP call, and what caching gives back.
fn name_lookup(report: &Report) -> Option<String> {
    let t = TransportKind::HttpFresh;
    let i = mean(report, t, AddrMode::Ip)?;
    let u = mean(report, t, AddrMode::Uncached)?;
    let cached = mean(report, t, AddrMode::Cached).map_or(String::new(), |c| {
        format!(
            ", and caching the answer (cached) brings it back to {}",
            duration(c)
        )
    });
    let resolver = match dns_delay_us(report) {
        0 => " with the resolver next door".to_string(),
        late => format!(
            " with a resolver that answers {} late",
            duration(late as f64)
        ),
    };
    Some(format!(
        "An uncached name lookup on every new connection costs {} per call{resolver}: {t} takes {} by name against {} by IP{cached}; persistent transports pay it once per connection.",
        duration(u - i),
        duration(u),
        duration(i)
    ))
}

/// What the resolver's search list costs: a name with fewer dots than `ndots` is tried
/// under every search domain before it is asked as given, and every miss is a query
/// (`system` and `uncached-search` runs record the names and, with the target's
/// responder, the queries they made).
fn search_list(report: &Report) -> Option<String> {
    let (run, lookup) = report
        .runs
        .iter()
        .filter(|r| matches!(r.addr_mode, AddrMode::System | AddrMode::UncachedSearch))
        .filter_map(|r| Some((r, r.dns_lookup.as_ref()?)))
        .find(|(_, l)| {
            // The name as given is the shortest candidate; expanded when it comes last.
            let as_is = l.search.iter().min_by_key(|c| c.len());
            l.search.len() > 1 && l.search.last() == as_is
        })?;
    let as_is = lookup.search.last()?;
    let queries = lookup.queries_per_lookup.map_or(String::new(), |q| {
        format!(" and makes {} queries", trim_float(q))
    });
    let t = TransportKind::HttpFresh;
    let cost = mean(report, t, AddrMode::UncachedSearch)
        .zip(mean(report, t, AddrMode::Uncached))
        .map_or(String::new(), |(s, u)| {
            format!(
                "; the misses cost {} per fresh call ({t} {} against {} asking the name alone)",
                duration(s - u),
                duration(s),
                duration(u)
            )
        });
    Some(format!(
        "Each {} lookup of {} tries {} names in turn ({}){queries}{cost}. The fully qualified name with its trailing dot ({as_is}), or a lower ndots, asks only the last.",
        run.addr_mode,
        as_is.trim_end_matches('.'),
        lookup.search.len(),
        lookup.search.join(", "),
    ))
}

/// A count that may be fractional (an average), without a trailing `.0`.
fn trim_float(x: f64) -> String {
    if x.fract() == 0.0 {
        format!("{x:.0}")
    } else {
        format!("{x:.1}")
    }
}

/// A run's transport, with its security mode after it when that is not `plain`
/// (`tcp tls13`), for sentences that name runs by IP.
fn secured_name(r: &RunRecord) -> String {
    if r.security.is_tls() {
        format!("{} {}", r.transport, r.security)
    } else {
        r.transport.to_string()
    }
}

/// Which transport to pick, and which if it must be HTTP: the lowest mean by IP among
/// runs that lost nothing.
fn pick(base: &Report) -> Option<String> {
    // Transports are picked without TLS when plain runs exist: the TLS sentences say what
    // encryption adds, and a pick between `tcp tls13` and `tcp` would be one of noise.
    let any_plain = base.runs.iter().any(|r| r.security == Security::Plain);
    let best = |http_only: bool| {
        base.runs
            .iter()
            .filter(|r| r.failed() == 0 && r.addr_mode == AddrMode::Ip)
            .filter(|r| !any_plain || r.security == Security::Plain)
            .filter(|r| !http_only || r.transport.is_http())
            .filter_map(|r| Some((r, r.latency_us?)))
            .min_by(|a, b| a.1.mean.total_cmp(&b.1.mean))
    };
    let ((b, bl), (h, hl)) = (best(false)?, best(true)?);
    Some(format!(
        "For this pair of hosts, pick {} (mean {}, p99 {}) when you own both ends; if it must be HTTP, {} (mean {}, p99 {}), with a connection kept per worker.",
        secured_name(b),
        duration(bl.mean),
        duration(bl.p99),
        secured_name(h),
        duration(hl.mean),
        duration(hl.p99)
    ))
}

/// The range of client CPU time per call.
fn cpu(base: &Report) -> Option<String> {
    let per_call: Vec<(String, f64)> = base
        .runs
        .iter()
        .filter(|r| r.addr_mode == AddrMode::Ip && r.calls > 0)
        .map(|r| {
            (
                secured_name(r),
                (r.cpu_user_s + r.cpu_sys_s) / r.calls as f64 * 1e6,
            )
        })
        .collect();
    let lo = per_call.iter().min_by(|a, b| a.1.total_cmp(&b.1))?;
    let hi = per_call.iter().max_by(|a, b| a.1.total_cmp(&b.1))?;
    Some(format!(
        "Client CPU per call ranges from {} ({}) to {} ({}).",
        duration(lo.1),
        lo.0,
        duration(hi.1),
        hi.0
    ))
}

/// Lost calls, over every input.
fn lost(base: &Report, others: &[&Report]) -> String {
    let all: Vec<&RunRecord> = std::iter::once(base)
        .chain(others.iter().copied())
        .flat_map(|r| r.runs.iter())
        .collect();
    let calls: u64 = all.iter().map(|r| r.calls).sum();
    let failed: Vec<String> = all
        .iter()
        .filter(|r| r.failed() > 0)
        .map(|r| {
            format!(
                "{} ({}) {} of {}",
                r.transport,
                r.mode_label(),
                r.failed(),
                r.calls
            )
        })
        .collect();
    if failed.is_empty() {
        format!("No call was lost: all {calls} measured calls came back with their own bytes.")
    } else {
        format!(
            "Calls failed: {} (of {calls} measured calls in all); see the tables for their kinds.",
            failed.join(", ")
        )
    }
}

/// rpcbench beside established tools: at worst how far from them, or where above the limit.
pub(super) fn peer_sentence(p: &Peers) -> Option<String> {
    let ratios: Vec<(&PeerPair, f64)> = p
        .pairs
        .iter()
        .filter_map(|e| Some((e, e.ratio()?)))
        .collect();
    let over: Vec<String> = ratios
        .iter()
        .filter(|(_, r)| *r > PEER_RATIO_LIMIT)
        .map(|(e, r)| format!("{} {}× {}", e.name(), ratio(*r), e.peer))
        .collect();
    let (e, worst) = ratios.iter().max_by(|a, b| a.1.total_cmp(&b.1))?;
    Some(if over.is_empty() {
        format!(
            "Against established tools on the same placement ({}), rpcbench is at worst {}× the peer ({} against {}), so these figures measure the network and the stacks, not rpcbench.",
            p.placement,
            ratio(*worst),
            e.name(),
            e.peer
        )
    } else {
        format!(
            "Against established tools on the same placement ({}), rpcbench is above the {PEER_RATIO_LIMIT}× limit for {}: there, part of the figure is rpcbench's own overhead (a benchmark, not a check: host noise moves it).",
            p.placement,
            over.join(", ")
        )
    })
}

/// The CPUs of a `Cpus_allowed_list` (`0`, `0-1`, `0,2-3`); 0 when it cannot be read.
fn cpu_count(list: &str) -> usize {
    list.split(',')
        .filter(|part| !part.trim().is_empty())
        .map(|part| match part.trim().split_once('-') {
            Some((lo, hi)) => match (lo.parse::<usize>(), hi.parse::<usize>()) {
                (Ok(lo), Ok(hi)) if hi >= lo => hi - lo + 1,
                _ => 0,
            },
            None => usize::from(part.trim().parse::<usize>().is_ok()),
        })
        .sum()
}

/// The CPU both sides are pinned to when the advice is taken: the first, present on every
/// machine.
const PIN_CPU: usize = 0;

/// One line when the run was not pinned, with the command that pins it: unpinned, client
/// and server threads wake on whichever core is free, and on a small VM a round trip across
/// two cores costs many times one on a single core (README, "Pin both sides").
pub fn pinning_advice(report: &Report) -> Option<String> {
    let client_free = cpu_count(&report.environment.cpu_affinity) > 1;
    let server_free = report
        .server
        .as_ref()
        .is_some_and(|s| cpu_count(&s.settings.cpu_affinity) > 1);
    let embedded = report.target.starts_with("embedded");
    let command = shell_words(&report.command);
    let pinned = format!("taskset -c {PIN_CPU} {command}");
    if embedded && client_free {
        // The embedded server runs in the client's process: one taskset pins both.
        Some(format!(
            "not pinned: client and server may run on different cores; pin both: {pinned}"
        ))
    } else if !embedded && (client_free || server_free) {
        let which = match (client_free, server_free) {
            (true, true) => "neither client nor server was pinned",
            (true, false) => "the client was not pinned",
            _ => "the server was not pinned",
        };
        Some(format!(
            "not pinned: {which}; pin both: {pinned} here, and start the server as taskset -c {PIN_CPU} rpcbench-echo ... on its host"
        ))
    } else {
        None
    }
}

/// A command line as one shell line, quoting the words that need it.
fn shell_words(words: &[String]) -> String {
    let safe = |w: &str| {
        !w.is_empty()
            && w.chars()
                .all(|c| c.is_ascii_alphanumeric() || "_./:=@%,+-".contains(c))
    };
    words
        .iter()
        .map(|w| {
            if safe(w) {
                w.clone()
            } else {
                format!("'{}'", w.replace('\'', r"'\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists() {
        assert_eq!(cpu_count("0"), 1);
        assert_eq!(cpu_count("0-1"), 2);
        assert_eq!(cpu_count("0,2-3"), 3);
        assert_eq!(cpu_count(""), 0);
    }

    #[test]
    fn twins() {
        assert_eq!(
            fresh_twin(TransportKind::Tcp),
            Some(TransportKind::TcpConnect)
        );
        assert_eq!(
            fresh_twin(TransportKind::HttpKeepalive),
            Some(TransportKind::HttpFresh)
        );
        assert_eq!(
            fresh_twin(TransportKind::CurlReuse),
            Some(TransportKind::CurlFresh)
        );
    }

    #[test]
    fn commands_are_quoted_for_the_shell() {
        let words: Vec<String> = [
            "rpcbench",
            "-n",
            "50",
            "--transports",
            "tcp,http-fresh",
            "a b",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        assert_eq!(
            shell_words(&words),
            "rpcbench -n 50 --transports tcp,http-fresh 'a b'"
        );
    }
}
