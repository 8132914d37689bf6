//! `rpcbench dns NAME`: which queries one lookup of NAME really makes here, what each
//! costs, and what to change.
//!
//! The configuration the C library reads ([`conf`]) gives the candidate names in glibc's
//! order and the nameservers with their timeout and attempts. [`diagnose`] then sends
//! that sequence itself, `lookups` times, with no cache: A and AAAA for each candidate
//! (together, or one after the other under `single-request`), to the first nameserver,
//! the next one on a timeout, for `attempts` rounds, and again over TCP when an answer
//! comes back truncated. Every query is timed and its answer code kept. A lookup ends at
//! the first candidate with an answer, as glibc's does; what went before it (misses on
//! search domains) and every wait for a dropped query is the wasted part.
//!
//! It also times `getaddrinfo` for NAME and sets it against the derived sequence: when
//! they disagree, something between the application and the nameserver answers instead
//! (nscd, systemd-resolved, a local cache), which it names when it can tell.
//!
//! One simplification: every retry waits `timeout`, where glibc lengthens the later
//! rounds; a derived wait is then a lower bound of glibc's.
//!
//! Layer 3 of the map in `lib.rs` (client): uses the kinds and units only.

pub mod conf;
mod probe;
mod record;
use probe::{Prober, time_getaddrinfo};
pub use record::{
    AnswerKind, DnsDiagnosis, DnsFinding, GetaddrinfoSkipped, Intermediary, QType, QueryRecord, Via,
};

use crate::measure::{Hist, Summary};
use conf::ResolvConf;
use hickory_proto::op::ResponseCode;
use hickory_proto::rr::RecordType;
use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

/// What to diagnose and how.
#[derive(Debug, Clone)]
pub struct DnsSpec {
    /// The name, as the application would pass it.
    pub name: String,
    /// Where the resolver configuration came from (for messages).
    pub resolv_conf_path: String,
    pub conf: ResolvConf,
    /// nsswitch's `hosts:` sources, in order.
    pub hosts_sources: Vec<String>,
    /// What `/etc/hosts` gives the name.
    pub hosts_answer: Vec<IpAddr>,
    /// Lookups to make.
    pub lookups: u32,
    /// The nameservers' port: 53, unless testing a responder elsewhere (getaddrinfo
    /// cannot be told a port, so it is then not timed).
    pub port: u16,
    /// Time `getaddrinfo` too.
    pub getaddrinfo: bool,
}

/// Why a diagnosis could not be made.
#[derive(Debug, thiserror::Error)]
pub enum DiagnoseError {
    #[error("{path} has no nameserver line: there is no DNS server to ask")]
    NoNameserver { path: String },
    #[error(transparent)]
    BadName(#[from] conf::CheckNameError),
    #[error("every nameserver refused every query (REFUSED from {servers}): none serves {name}")]
    AllRefused { name: String, servers: String },
    #[error("cannot open a socket to ask {server}")]
    Socket {
        server: SocketAddr,
        source: std::io::Error,
    },
}

/// What one query got.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Answer {
    /// An answer with this code; `records` answer records, the smallest TTL, truncated.
    Code {
        code: ResponseCode,
        records: usize,
        min_ttl: Option<u32>,
        truncated: bool,
    },
    /// Nothing came within the timeout.
    Timeout,
}

impl Answer {
    fn kind(self) -> AnswerKind {
        match self {
            Answer::Code {
                truncated: true, ..
            } => AnswerKind::Truncated,
            Answer::Code { code, .. } => AnswerKind::Code(code_name(code)),
            Answer::Timeout => AnswerKind::Timeout,
        }
    }

    /// An answer that ends the lookup: records came back.
    fn has_records(self) -> bool {
        matches!(self, Answer::Code { records, truncated: false, .. } if records > 0)
    }
}

/// The answer code as dig prints it: `NOERROR`, `NXDOMAIN`, `SERVFAIL`, `REFUSED`.
fn code_name(code: ResponseCode) -> String {
    match code {
        ResponseCode::NoError => "NOERROR".into(),
        ResponseCode::NXDomain => "NXDOMAIN".into(),
        ResponseCode::ServFail => "SERVFAIL".into(),
        ResponseCode::Refused => "REFUSED".into(),
        ResponseCode::FormErr => "FORMERR".into(),
        ResponseCode::NotImp => "NOTIMP".into(),
        other => format!("{other:?}").to_ascii_uppercase(),
    }
}

/// One query's key in the aggregate: the same query in every lookup.
type Key = (String, RecordType, SocketAddr, bool, u32);

/// The per-query aggregate while lookups run.
struct Agg {
    order: usize,
    answers: BTreeMap<AnswerKind, u64>,
    time: Hist,
    wasted: bool,
    min_ttl: Option<u32>,
}

/// Runs the diagnosis.
pub fn diagnose(spec: &DnsSpec) -> Result<DnsDiagnosis, DiagnoseError> {
    conf::check_name(&spec.name)?;
    let c = &spec.conf;
    let candidates = c.candidates(&spec.name);
    for cand in &candidates {
        conf::check_name(cand)?;
    }
    let hosts_first = spec
        .hosts_sources
        .iter()
        .position(|s| s == "files")
        .is_some_and(|f| {
            spec.hosts_sources
                .iter()
                .position(|s| s == "dns")
                .is_none_or(|d| f < d)
        });
    let from_hosts = hosts_first && !spec.hosts_answer.is_empty();
    let servers: Vec<SocketAddr> = c
        .nameservers
        .iter()
        .map(|ip| SocketAddr::new(*ip, spec.port))
        .collect();
    if servers.is_empty() && !from_hosts {
        return Err(DiagnoseError::NoNameserver {
            path: spec.resolv_conf_path.clone(),
        });
    }
    let mut aggs: BTreeMap<Key, Agg> = BTreeMap::new();
    let mut lookup = Hist::default();
    let mut wasted_total = Duration::ZERO;
    let mut answered_by = None;
    let mut sent = 0u64;
    let mut refused_only = true;
    let mut rotate_at = 0usize;
    if !from_hosts {
        for _ in 0..spec.lookups.max(1) {
            let mut prober = Prober {
                conf: c,
                servers: &servers,
                first: rotate_at,
                aggs: &mut aggs,
                sent: 0,
            };
            if c.rotate {
                rotate_at = (rotate_at + 1) % servers.len();
            }
            let trace = prober.lookup(&candidates)?;
            sent += prober.sent;
            refused_only &= trace.refused_only;
            lookup.record(trace.total);
            wasted_total += trace.wasted;
            answered_by = trace.answered_by;
        }
        if refused_only {
            return Err(DiagnoseError::AllRefused {
                name: spec.name.clone(),
                servers: servers
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(", "),
            });
        }
    }
    let lookups = spec.lookups.max(1);
    let queries = query_records(aggs, &candidates, answered_by.as_deref());
    let (getaddrinfo_us, getaddrinfo_skipped) = getaddrinfo_timing(spec, lookups);
    let mut d = DnsDiagnosis {
        rpcbench: env!("CARGO_PKG_VERSION").to_string(),
        name: spec.name.clone(),
        resolv_conf: spec.resolv_conf_path.clone(),
        config: c.clone(),
        hosts_sources: spec.hosts_sources.clone(),
        hosts_answer: if from_hosts {
            spec.hosts_answer.iter().map(ToString::to_string).collect()
        } else {
            Vec::new()
        },
        candidates,
        answered_by,
        lookups,
        queries_per_lookup: sent as f64 / f64::from(lookups),
        queries,
        lookup_us: lookup.summary(),
        wasted_us_mean: wasted_total.as_secs_f64() * 1e6 / f64::from(lookups),
        getaddrinfo_us,
        getaddrinfo_skipped,
        in_between: None,
        findings: Vec::new(),
    };
    d.in_between = in_between(&d);
    d.findings = findings(&d);
    Ok(d)
}

/// The queries of every lookup as records, in the order the first lookup sent them. A
/// candidate tried before the one that answered (`answered_by`) was a miss: all its
/// queries are wasted.
fn query_records(
    aggs: BTreeMap<Key, Agg>,
    candidates: &[String],
    answered_by: Option<&str>,
) -> Vec<QueryRecord> {
    // A candidate tried before the one that answered was a miss: all its queries wasted.
    let answered_at = answered_by
        .as_ref()
        .and_then(|a| candidates.iter().position(|c| c == a))
        .unwrap_or(candidates.len());
    let missed = |cand: &str| {
        candidates
            .iter()
            .position(|c| c == cand)
            .is_some_and(|i| i < answered_at)
    };
    {
        let mut v: Vec<(Key, Agg)> = aggs.into_iter().collect();
        v.sort_by_key(|(_, a)| a.order);
        v.into_iter()
            .enumerate()
            .map(
                |(i, ((cand, rtype, server, tcp, attempt), a))| QueryRecord {
                    order: i + 1,
                    wasted: a.wasted || missed(&cand),
                    candidate: cand,
                    qtype: QType::of(rtype),
                    server: server.to_string(),
                    via: if tcp { Via::Tcp } else { Via::Udp },
                    attempt,
                    answers: a.answers,
                    time_us: a.time.summary(),
                    min_ttl: a.min_ttl,
                },
            )
            .collect()
    }
}

/// getaddrinfo's own time for the name over `lookups` lookups, or why it was not timed.
fn getaddrinfo_timing(
    spec: &DnsSpec,
    lookups: u32,
) -> (Option<Summary>, Option<GetaddrinfoSkipped>) {
    if !spec.getaddrinfo {
        (None, Some(GetaddrinfoSkipped::NotAsked))
    } else if spec.port != 53 {
        let port = spec.port;
        (None, Some(GetaddrinfoSkipped::OtherPort { port }))
    } else {
        (time_getaddrinfo(&spec.name, lookups), None)
    }
}

/// How far getaddrinfo may be from the derived sum before something in between is
/// suspected: 20%, and at least 200 µs (getaddrinfo also reads its files on every call).
const AGREE_SHARE: f64 = 0.20;
const AGREE_FLOOR_US: f64 = 200.0;

/// Whether getaddrinfo's mean agrees with the derived lookup's, and if not, what answers
/// in between, as far as it can be seen.
fn in_between(d: &DnsDiagnosis) -> Option<Vec<Intermediary>> {
    let (gai, derived) = (d.getaddrinfo_us?.mean, d.lookup_us?.mean);
    let gap = (gai - derived).abs();
    if gap <= (AGREE_SHARE * derived).max(AGREE_FLOOR_US) {
        return None;
    }
    let resolved = IpAddr::from([127, 0, 0, 53]);
    let mut seen = Vec::new();
    if ["/run/nscd/socket", "/var/run/nscd/socket"]
        .iter()
        .any(|p| std::path::Path::new(p).exists())
    {
        seen.push(Intermediary::Nscd);
    }
    if d.hosts_sources.iter().any(|s| s == "resolve") || d.config.nameservers.contains(&resolved) {
        seen.push(Intermediary::SystemdResolved);
    }
    if let Some(&address) =
        (d.config.nameservers.iter()).find(|ip| ip.is_loopback() && **ip != resolved)
    {
        seen.push(Intermediary::LocalResolver { address });
    }
    Some(seen)
}

/// What the lookup costs and what to change, as findings.
pub fn findings(d: &DnsDiagnosis) -> Vec<DnsFinding> {
    let mut out = Vec::new();
    if !d.hosts_answer.is_empty() {
        out.push(DnsFinding::InHosts {
            name: d.name.clone(),
            addresses: d.hosts_answer.clone(),
        });
        return out;
    }
    let lookup_mean = d.lookup_us.map_or(0.0, |s| s.mean);
    // Search-list misses before the candidate that answered.
    if let Some(by) = &d.answered_by {
        let before: Vec<&QueryRecord> = d
            .queries
            .iter()
            .filter(|q| {
                let at = |name: &str| d.candidates.iter().position(|c| c == name);
                at(&q.candidate) < at(by)
            })
            .collect();
        if !before.is_empty() {
            let codes: std::collections::BTreeSet<&AnswerKind> =
                before.iter().flat_map(|q| q.answers.keys()).collect();
            out.push(DnsFinding::SearchMisses {
                name: d.name.clone(),
                dots: d.name.trim_end_matches('.').matches('.').count(),
                ndots: d.config.ndots,
                misses: d.candidates.iter().take_while(|c| *c != by).count(),
                queries: before.len(),
                codes: codes.into_iter().cloned().collect(),
                wasted_us: d.wasted_us_mean,
                lookup_us: lookup_mean,
            });
        }
    }
    // A type that never answers from a server.
    for q in &d.queries {
        let all = q.answers.values().sum::<u64>();
        if q.attempt == 1 && all > 0 && q.answers.get(&AnswerKind::Timeout) == Some(&all) {
            out.push(DnsFinding::Dropped {
                qtype: q.qtype,
                candidate: q.candidate.clone(),
                server: q.server.clone(),
                timeout_s: d.config.timeout_s,
            });
        }
        if q.via == Via::Tcp {
            out.push(DnsFinding::TruncatedToTcp {
                qtype: q.qtype,
                candidate: q.candidate.clone(),
            });
        }
    }
    if d.queries.iter().any(|q| q.min_ttl == Some(0)) {
        out.push(DnsFinding::TtlZero);
    }
    if let Some(what) = &d.in_between {
        out.push(DnsFinding::InBetween {
            what: what.clone(),
            getaddrinfo_us: d.getaddrinfo_us.map_or(0.0, |s| s.mean),
            lookup_us: lookup_mean,
        });
    }
    if d.answered_by.is_none() {
        out.push(DnsFinding::NoAnswer {
            name: d.name.clone(),
        });
    }
    out
}
