//! The findings: three to six statements computed from the numbers, the answers people
//! came for. One function for both places they appear: after the tables of a run
//! (`rpcbench`, from that run alone) and at the top of `rpcbench report` (from every input).
//!
//! A finding is a value ([`Finding`](crate::analysis::findings::Finding)) carrying the figures it rests on; the words are the
//! renderers' (`render::findings`). Two figures within their noise are compared as
//! [`Versus::NoDifference`](crate::analysis::findings::Versus::NoDifference) (or [`Delta::NoDifference`](crate::analysis::findings::Delta::NoDifference)), never as a ratio of noise.

use super::peers::{PEER_RATIO_LIMIT, Peers};
use super::select::{dns_delay_us, find, slow_dns};
use crate::report::{Report, RunKey, RunRecord};
use crate::resolve::AddrMode;
use crate::transport::TransportKind;
use crate::transport::tls::Security;

/// How one mean compares with another.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Versus {
    /// The first mean over the second.
    Times(f64),
    /// The two means lie within their noise ([`crate::physics::differs`]).
    NoDifference,
}

/// What one mean adds over another.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Delta {
    /// The first mean less the second, µs.
    By(f64),
    /// The two means lie within their noise.
    NoDifference,
}

/// The encodings of one transport and message, each against the one with the least mean.
#[derive(Debug, Clone, PartialEq)]
pub struct EncodingCosts {
    pub transport: TransportKind,
    pub message: crate::encoding::Message,
    /// The encoding with the least mean, its mean (µs) and its bytes per call (request and
    /// reply bodies).
    pub least: (crate::encoding::EncodingKind, f64, f64),
    /// The others, from the least mean up.
    pub others: Vec<EncodingCost>,
}

/// One encoding against the one with the least mean, on the same transport and message.
#[derive(Debug, Clone, PartialEq)]
pub struct EncodingCost {
    pub encoding: crate::encoding::EncodingKind,
    /// Its mean over the least, or no difference beyond the noise.
    pub latency: Versus,
    /// Its request and reply body bytes over the least's.
    pub bytes: f64,
    /// Its server CPU per request over the least's, where both rest on 100 ticks or more.
    pub server_cpu: Option<f64>,
}

/// A run named as the findings name it: its transport, and its security mode when that
/// is not `plain`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunName {
    pub transport: TransportKind,
    pub security: Security,
}

/// A transport's mean in one of a finding's runs, µs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Figure {
    pub transport: TransportKind,
    pub mean_us: f64,
}

/// A kept connection against its fresh twin.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ReusePair {
    pub kept: Figure,
    pub fresh: Figure,
    /// The fresh twin's mean against the kept one's.
    pub fresh_over_kept: Versus,
}

/// A shared connection's mean at some workers, against runs of a connection per worker at
/// the same workers.
#[derive(Debug, Clone, PartialEq)]
pub struct Multiplexing {
    pub workers: usize,
    pub shared: Figure,
    /// Each run compared with, and the shared one's mean against it.
    pub against: Vec<(Figure, Versus)>,
}

/// A new QUIC connection per call against its TCP twin's new TCP connection with TLS 1.3
/// ([`Facts::tcp_twin`](crate::transport::Facts::tcp_twin)), both in `tls13`, by IP.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct QuicHandshake {
    pub quic: Figure,
    pub tcp: Figure,
    /// QUIC's mean against TCP's.
    pub quic_over_tcp: Versus,
    /// The round trips each call takes in the model: QUIC's handshake carries TLS's (2),
    /// TCP's handshake comes before TLS's (3).
    pub round_trips: (f64, f64),
    /// QUIC's handshake (its `handshake` phase) and TCP's connect plus TLS handshake, µs, where
    /// both were timed.
    pub handshakes_us: Option<(f64, f64)>,
}

/// What TLS costs one fresh transport, by IP, under two security modes it ran in.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TlsPrice {
    pub transport: TransportKind,
    /// The mean of the mode compared with (`plain`, `tls13`), µs.
    pub base_us: f64,
    /// The mean of the mode priced (`tls13`, `tls13-resume`, `mtls`), µs.
    pub priced_us: f64,
    /// How much more the priced mode costs (resumption: how much less).
    pub delta: Delta,
    /// The TLS handshake alone (the `tls` phase), µs, where it was timed.
    pub handshake_us: Option<f64>,
}

/// TLS 1.2 against TLS 1.3 for one fresh transport.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TlsVersions {
    pub transport: TransportKind,
    /// `tls12` against `tls13`.
    pub full: Option<Versus>,
    /// `tls12-resume` against `tls13-resume`.
    pub resumed: Option<Versus>,
}

/// The transport to pick: the fastest by IP that lost nothing, and those within its noise.
#[derive(Debug, Clone, PartialEq)]
pub struct Choice {
    pub run: RunName,
    pub mean_us: f64,
    pub p99_us: f64,
    /// Runs no measurably slower.
    pub tied: Vec<RunName>,
}

/// One run with failed calls.
#[derive(Debug, Clone, PartialEq)]
pub struct Failed {
    pub run: RunKey,
    pub failed: u64,
    pub calls: u64,
}

/// What a finding says.
#[derive(Debug, Clone, PartialEq)]
pub enum Finding {
    /// What a persistent connection saves, per persistent transport and its fresh twin.
    Reuse(Vec<ReusePair>),
    /// What multiplexing buys or costs, at equal workers: each shared transport that ran
    /// against the runs its facts name ([`Facts::multiplexing_against`]: `h2-mux` against
    /// `h2` and `http-keepalive`, `grpc-mux` against `h2-mux` and `grpc`). One finding for
    /// all, so the findings stay within six; never empty.
    ///
    /// [`Facts::multiplexing_against`]: crate::transport::Facts::multiplexing_against
    Multiplexing(Vec<Multiplexing>),
    /// What a full TLS 1.3 handshake adds per fresh call (`tls13` against `plain`).
    TlsHandshake(Vec<TlsPrice>),
    /// What resuming wins back per fresh call (`tls13-resume` against `tls13`).
    TlsResumption(Vec<TlsPrice>),
    /// What sending the request in early data (`tls13-0rtt`) wins back per fresh call
    /// against a full TLS 1.3 handshake, by IP, for each fresh QUIC transport.
    EarlyData(Vec<TlsPrice>),
    /// TLS 1.2 against 1.3 per fresh call.
    TlsVersions(Vec<TlsVersions>),
    /// What a client certificate adds per fresh call (`mtls` against `tls13`).
    ClientCertificate(Vec<TlsPrice>),
    /// What a new QUIC connection costs per call against a new TCP connection and TLS 1.3
    /// handshake, for each fresh QUIC transport whose TCP twin ran in `tls13`.
    QuicHandshake(Vec<QuicHandshake>),
    /// What TLS 1.3 costs a call on a kept connection (`tls13` against `plain`).
    TlsKept(Vec<TlsPrice>),
    /// What an uncached lookup costs a fresh HTTP call, and what caching gives back.
    NameLookup {
        transport: TransportKind,
        by_ip_us: f64,
        by_name_us: f64,
        cached_us: Option<f64>,
        added: Delta,
        /// How late the target's resolver answered, µs (0: not delayed).
        resolver_late_us: u64,
    },
    /// What the resolver's search list costs: each name a lookup tries, in turn.
    SearchList {
        mode: AddrMode,
        /// The name as given (the last candidate).
        name: String,
        candidates: Vec<String>,
        queries_per_lookup: Option<f64>,
        /// What the misses cost a fresh call: the search mode's mean against the name
        /// asked alone.
        misses: Option<TlsPrice>,
    },
    /// Which transport to pick, and which if it must be HTTP; `loopback` when client and
    /// server shared a host (the embedded server, a loopback target), where the pick says
    /// nothing about a pair of hosts.
    Pick {
        any: Choice,
        http: Choice,
        loopback: bool,
    },
    /// The range of client CPU time per call, µs; and what QUIC's stack in user space
    /// costs against kernel TCP: each kept QUIC transport (µs per call) against the same
    /// call over TCP (`quic` against `tcp`, `h3` against `h2`), in the same security mode
    /// when that ran, else in `plain` (the encryption then counts on QUIC's side, and the
    /// run names say so).
    ClientCpu {
        least: (RunName, f64),
        most: (RunName, f64),
        quic: Vec<((RunName, f64), (RunName, f64))>,
    },
    /// Connections that retransmitted their SYN, and what that did to the tail.
    SynRetries(crate::report::SynRetries),
    /// A finding of the run at one link RTT, among inputs at several.
    AtLinkRtt { rtt_us: f64, finding: Box<Finding> },
    /// Lost calls over every input: none (all `calls` came back), or the runs that failed.
    Lost { calls: u64, failed: Vec<Failed> },
    /// What the encodings cost against each other, per transport, at the largest message
    /// that ran in two or more encodings (`--encoding`).
    Encodings(Vec<EncodingCosts>),
    /// rpcbench beside established tools: the worst ratio, and the pairs above the limit.
    Peers {
        placement: String,
        /// The pair with the highest ratio: its name, the peer and the ratio.
        worst: (String, String, f64),
        over: Vec<(String, String, f64)>,
    },
    /// A transport whose fitted round trips per call miss the protocol's.
    RoundTrips(crate::model::RoundTripGap),
    /// A statement about the sweeps.
    Sweep(super::sweep::SweepFinding),
    /// A statement of a DNS diagnosis.
    Dns(crate::dnsdiag::DnsFinding),
}

/// The findings for `base`, with `others` (more runs: a slow resolver, a delay) and
/// `peers` adding what they can. A finding whose figures are missing is left out.
///
/// When the inputs ran across links of several RTTs (`--link-rtt`), what is read from
/// `base` alone says the RTT it holds at, and the pick is made again at each other RTT:
/// the transport to pick on loopback is not the one to pick across 60 ms.
///
/// A figure named by a failed physics check of its run ([`crate::physics::checks`]) is
/// not what it claims to be, so no finding is drawn from it: the run's line and the
/// report's truth check say why.
pub fn findings(base: &Report, others: &[&Report], peers: Option<&Peers>) -> Vec<Finding> {
    let (all_base, all_others) = (base, others);
    let trusted_base = trusted(base);
    let trusted_others: Vec<Report> = others.iter().map(|r| trusted(r)).collect();
    let trusted_refs: Vec<&Report> = trusted_others.iter().collect();
    let (base, others) = (&trusted_base, &trusted_refs[..]);
    let mut out = of_one_run(base, others);
    // A run on one host without a declared link crossed none: 0 µs, beside the others.
    let rtt_of = |r: &Report| {
        r.runs
            .iter()
            .find_map(|x| x.link_rtt_us)
            .or_else(|| local_target(r).then_some(0.0))
    };
    let mut rtts: Vec<f64> = std::iter::once(base)
        .chain(others.iter().copied())
        .filter_map(rtt_of)
        .collect();
    rtts.sort_by(f64::total_cmp);
    rtts.dedup();
    if rtts.len() > 1 {
        let at = |r: &Report, f: Finding| Finding::AtLinkRtt {
            rtt_us: rtt_of(r).unwrap_or(0.0),
            finding: Box::new(f),
        };
        out = out.into_iter().map(|f| at(base, f)).collect();
        for &rtt in rtts.iter().filter(|&&x| Some(x) != rtt_of(base)) {
            let at_rtt = others.iter().copied().find(|r| rtt_of(r) == Some(rtt));
            out.extend(at_rtt.and_then(|r| Some(at(r, pick(r)?))));
        }
    }
    out.extend(encodings(all_base));
    out.push(lost(all_base, all_others));
    out.extend(peers.and_then(peer_finding));
    out
}

/// `report` without the runs that a failed physics check of it names (both figures of
/// each broken ordering), so that no finding is drawn from them. Calls lost or failed
/// stay counted: [`lost`] reads the inputs as given.
fn trusted(report: &Report) -> Report {
    let broken: Vec<(TransportKind, String)> = crate::physics::checks(report)
        .into_iter()
        .filter(|c| !c.pass)
        .flat_map(|c| [c.faster, c.slower])
        .map(|f| (f.transport, f.mode))
        .collect();
    let mut out = report.clone();
    // The transport findings compare the opaque echo; an encoded run's workload is its
    // message's, not the transport's alone.
    out.runs.retain(|r| {
        r.encoding.is_none()
            && !broken
                .iter()
                .any(|(t, m)| *t == r.transport && *m == r.mode_label())
    });
    out
}

/// True when `report` called a server on its own host (the embedded one, or a loopback
/// target) with no link declared between them (`--link-rtt`).
fn on_loopback(report: &Report) -> bool {
    local_target(report) && report.runs.iter().all(|r| r.link_rtt_us.is_none())
}

/// True when `report`'s target is on its own host: the embedded server, or a loopback
/// name or address.
fn local_target(report: &Report) -> bool {
    let host = report.target.trim_start_matches('[').trim_end_matches(']');
    report.target_kind() == crate::report::Target::Embedded
        || host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// The findings read from one run: `base`, with `others` for a slow resolver's run.
fn of_one_run(base: &Report, others: &[&Report]) -> Vec<Finding> {
    let mut out = Vec::new();
    out.extend(reuse(base));
    let shared: Vec<Multiplexing> = TransportKind::ALL
        .into_iter()
        .filter_map(|k| at_equal_concurrency(base, k, &k.multiplexing_against()))
        .collect();
    if !shared.is_empty() {
        out.push(Finding::Multiplexing(shared));
    }
    out.extend(tls_fresh(base));
    out.extend(quic_handshake(base));
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
            .filter_map(crate::report::syn_retries)
            .map(Finding::SynRetries),
    );
    out
}

/// Clock ticks a server CPU figure must rest on to be compared.
const MIN_SERVER_TICKS: u64 = 100;

/// What each encoding costs against the cheapest, per transport at its largest message (by
/// body bytes) that ran in two or more encodings without a failed call. A transport that
/// ran in several address modes, security modes or worker counts is judged in one: by IP
/// where it ran so (a name lookup is no part of an encoding's cost), without TLS, at its
/// fewest workers; the sentence names no mode, so it is said once per transport.
fn encodings(report: &Report) -> Option<Finding> {
    let healthy = |r: &&RunRecord| r.failed() == 0 && r.latency_us.is_some();
    let preference = |r: &RunRecord| {
        (
            r.addr_mode != AddrMode::Ip,
            r.security != Security::Plain,
            r.workers,
        )
    };
    let chosen = |r: &&RunRecord| {
        let best = report
            .runs
            .iter()
            .filter(|o| o.transport == r.transport && o.encoding.is_some())
            .map(preference)
            .min();
        best == Some(preference(r))
    };
    let body = |r: &RunRecord| {
        r.bytes_per_call
            .map_or(0.0, |b| b.request_body + b.reply_body)
    };
    let same_cell = |a: &RunRecord, b: &RunRecord| {
        a.transport == b.transport
            && a.addr_mode == b.addr_mode
            && a.security == b.security
            && a.workers == b.workers
            && a.message == b.message
    };
    let mut cells: Vec<Vec<&RunRecord>> = Vec::new();
    for r in report
        .runs
        .iter()
        .filter(|r| r.encoding.is_some())
        .filter(healthy)
        .filter(chosen)
    {
        match cells.iter_mut().find(|c| same_cell(c[0], r)) {
            Some(cell) => cell.push(r),
            None => cells.push(vec![r]),
        }
    }
    cells.retain(|c| c.len() > 1);
    // One cell per transport and modes: its largest message.
    let mut largest: Vec<Vec<&RunRecord>> = Vec::new();
    for cell in cells {
        let same_runs = |o: &Vec<&RunRecord>| {
            let (a, b) = (o[0], cell[0]);
            a.transport == b.transport
                && a.addr_mode == b.addr_mode
                && a.security == b.security
                && a.workers == b.workers
        };
        match largest.iter_mut().find(|o| same_runs(o)) {
            Some(o) if body(o[0]) < body(cell[0]) => *o = cell,
            Some(_) => {}
            None => largest.push(cell),
        }
    }
    let server_cpu = |r: &RunRecord| {
        let c = r.cpu_us_per_call?;
        (c.server_ticks? >= MIN_SERVER_TICKS).then_some(c.server_user? + c.server_system?)
    };
    let costs: Vec<EncodingCosts> = largest
        .into_iter()
        .filter_map(|mut cell| {
            cell.sort_by(|a, b| mean_of(a).total_cmp(&mean_of(b)));
            let least = cell[0];
            let others = cell[1..]
                .iter()
                .filter_map(|r| {
                    Some(EncodingCost {
                        encoding: r.encoding?,
                        latency: versus(r, least),
                        bytes: body(r) / body(least).max(1.0),
                        server_cpu: server_cpu(r)
                            .zip(server_cpu(least))
                            .filter(|&(_, l)| l > 0.0)
                            .map(|(a, l)| a / l),
                    })
                })
                .collect();
            Some(EncodingCosts {
                transport: least.transport,
                message: least.message?,
                least: (least.encoding?, mean_of(least), body(least)),
                others,
            })
        })
        .collect();
    (!costs.is_empty()).then_some(Finding::Encodings(costs))
}

/// The run of `transport` under `mode` without TLS in `report`, when it has a mean.
fn plain(report: &Report, transport: TransportKind, mode: AddrMode) -> Option<&RunRecord> {
    secured(report, transport, mode, Security::Plain)
}

/// The run of `transport` under `mode` in the security a `plain` run gives it (`tls13`
/// for QUIC, which has no plaintext), when it has a mean: what the default run ran.
fn as_default(report: &Report, transport: TransportKind, mode: AddrMode) -> Option<&RunRecord> {
    let security = transport
        .security_in(Security::Plain)
        .unwrap_or(Security::Plain);
    secured(report, transport, mode, security)
}

/// The run of `transport` under `mode` and `security` in `report`, when it has a mean.
fn secured(
    report: &Report,
    transport: TransportKind,
    mode: AddrMode,
    security: Security,
) -> Option<&RunRecord> {
    find(report, transport, mode, security).filter(|r| r.latency_us.is_some())
}

/// A run's mean, µs (the runs given here all have one).
fn mean_of(r: &RunRecord) -> f64 {
    r.latency_us.map_or(0.0, |l| l.mean)
}

/// A run's transport and mean.
fn figure(r: &RunRecord) -> Figure {
    Figure {
        transport: r.transport,
        mean_us: mean_of(r),
    }
}

/// A run's name in a finding.
fn name(r: &RunRecord) -> RunName {
    RunName {
        transport: r.transport,
        security: r.security,
    }
}

/// How `a`'s mean compares with `b`'s, beyond their noise or not.
fn versus(a: &RunRecord, b: &RunRecord) -> Versus {
    if crate::physics::runs_differ(a, b) {
        Versus::Times(mean_of(a) / mean_of(b))
    } else {
        Versus::NoDifference
    }
}

/// What `a`'s mean adds over `b`'s, beyond their noise or not.
fn added(a: &RunRecord, b: &RunRecord) -> Delta {
    if crate::physics::runs_differ(a, b) {
        Delta::By(mean_of(a) - mean_of(b))
    } else {
        Delta::NoDifference
    }
}

/// `priced` against `base`: the two means, what `priced` adds, and its handshake.
fn price(priced: &RunRecord, base: &RunRecord) -> TlsPrice {
    TlsPrice {
        transport: priced.transport,
        base_us: mean_of(base),
        priced_us: mean_of(priced),
        delta: added(priced, base),
        handshake_us: (priced.phases_us.tls)
            .or(priced.phases_us.handshake)
            .map(|t| t.mean),
    }
}

/// What a persistent connection saves, for each persistent transport and its fresh twin.
fn reuse(base: &Report) -> Option<Finding> {
    let pairs: Vec<ReusePair> = TransportKind::ALL
        .into_iter()
        .filter(|k| k.persistent())
        .filter_map(|keep| {
            let fresh = keep.fresh_twin()?;
            let (k, f) = (
                as_default(base, keep, AddrMode::Ip)?,
                as_default(base, fresh, AddrMode::Ip)?,
            );
            Some(ReusePair {
                kept: figure(k),
                fresh: figure(f),
                fresh_over_kept: versus(f, k),
            })
        })
        .collect();
    (!pairs.is_empty()).then_some(Finding::Reuse(pairs))
}

/// The plain by-IP run of a shared-connection transport with more than one worker
/// (preferring the default run's multiplexing comparison), against each of `against` at
/// the same number of workers. `None` when there is no such run or nothing to compare it
/// with: multiplexing is only compared where streams share a connection, like with like.
fn at_equal_concurrency(
    base: &Report,
    shared: TransportKind,
    against: &[TransportKind],
) -> Option<Multiplexing> {
    let of = |k: TransportKind| {
        base.runs.iter().filter(move |r| {
            r.transport == k
                && r.addr_mode == AddrMode::Ip
                && Some(r.security) == k.security_in(Security::Plain)
                && r.latency_us.is_some()
        })
    };
    let mux = of(shared)
        .filter(|r| r.workers > 1)
        .max_by_key(|r| r.mux_comparison)?;
    let against: Vec<(Figure, Versus)> = against
        .iter()
        .filter_map(|&k| {
            let t = of(k).find(|r| r.workers == mux.workers)?;
            Some((figure(t), versus(mux, t)))
        })
        .collect();
    (!against.is_empty()).then(|| Multiplexing {
        workers: mux.workers,
        shared: figure(mux),
        against,
    })
}

/// The fresh-connection transports TLS findings read, in registry order (the raw frames
/// first, then HTTP, then libcurl): every transport that opens a connection per call and
/// runs under TLS.
fn fresh_transports() -> impl Iterator<Item = TransportKind> {
    TransportKind::ALL
        .into_iter()
        .filter(|k| k.fresh() && k.facts().tls != crate::transport::Tls::None)
}

/// The transport whose calls price a name lookup: the first fresh one on the HTTP port
/// (`http-fresh`, the seed's "HTTP by host name"), whose every call looks the name up
/// again in `uncached`.
fn lookup_priced_by() -> Option<TransportKind> {
    TransportKind::ALL
        .into_iter()
        .find(|k| k.fresh() && k.is_http() && !k.is_curl())
}

/// The TLS price of a fresh connection per call, by IP, in up to five findings, each
/// naming every fresh transport ([`fresh_transports`]) that ran under both modes it compares: what a
/// full TLS 1.3 handshake adds over `plain`, what resuming the session wins back, and
/// early data (0-RTT), TLS 1.2 against 1.3 (full and resumed), and what a client
/// certificate adds.
fn tls_fresh(base: &Report) -> Vec<Finding> {
    let at = |k, s| secured(base, k, AddrMode::Ip, s);
    let priced = |priced: Security, against: Security| -> Vec<TlsPrice> {
        fresh_transports()
            .filter_map(|k| Some(price(at(k, priced)?, at(k, against)?)))
            .collect()
    };
    // Resumption and early data are priced against the full handshake: what they win
    // back.
    let won_back = |by: Security| -> Vec<TlsPrice> {
        fresh_transports()
            .filter_map(|k| Some(price(at(k, Security::Tls13)?, at(k, by)?)))
            .map(|p| TlsPrice {
                base_us: p.priced_us,
                priced_us: p.base_us,
                ..p
            })
            .collect()
    };
    let resumed = won_back(Security::Tls13Resume);
    let early = won_back(Security::Tls13ZeroRtt);
    let versions: Vec<TlsVersions> = fresh_transports()
        .filter_map(|k| {
            let versus_of = |s12, s13| Some(versus(at(k, s12)?, at(k, s13)?));
            let v = TlsVersions {
                transport: k,
                full: versus_of(Security::Tls12, Security::Tls13),
                resumed: versus_of(Security::Tls12Resume, Security::Tls13Resume),
            };
            (v.full.is_some() || v.resumed.is_some()).then_some(v)
        })
        .collect();
    let handshake = priced(Security::Tls13, Security::Plain);
    let mtls = priced(Security::Mtls, Security::Tls13);
    [
        (!handshake.is_empty()).then_some(Finding::TlsHandshake(handshake)),
        (!resumed.is_empty()).then_some(Finding::TlsResumption(resumed)),
        (!early.is_empty()).then_some(Finding::EarlyData(early)),
        (!versions.is_empty()).then_some(Finding::TlsVersions(versions)),
        (!mtls.is_empty()).then_some(Finding::ClientCertificate(mtls)),
    ]
    .into_iter()
    .flatten()
    .collect()
}

/// What TLS costs a call on a connection kept open (the handshake is in warm-up, so what
/// is left is encrypting and decrypting each message): `tls13` against `plain` by IP, for
/// each persistent transport that ran under both.
fn tls_kept(base: &Report) -> Option<Finding> {
    let parts: Vec<TlsPrice> = TransportKind::ALL
        .into_iter()
        .filter(|k| k.persistent())
        .filter_map(|k| {
            let plain = secured(base, k, AddrMode::Ip, Security::Plain)?;
            let tls = secured(base, k, AddrMode::Ip, Security::Tls13)?;
            Some(price(tls, plain))
        })
        .collect();
    (!parts.is_empty()).then_some(Finding::TlsKept(parts))
}

/// What an uncached name lookup costs a fresh HTTP call, and what caching gives back.
fn name_lookup(report: &Report) -> Option<Finding> {
    let t = lookup_priced_by()?;
    let i = plain(report, t, AddrMode::Ip)?;
    let u = plain(report, t, AddrMode::Uncached)?;
    Some(Finding::NameLookup {
        transport: t,
        by_ip_us: mean_of(i),
        by_name_us: mean_of(u),
        cached_us: plain(report, t, AddrMode::Cached).map(mean_of),
        added: added(u, i),
        resolver_late_us: dns_delay_us(report),
    })
}

/// What the resolver's search list costs: a name with fewer dots than `ndots` is tried
/// under every search domain before it is asked as given, and every miss is a query
/// (`system` and `uncached-search` runs record the names and, with the target's
/// responder, the queries they made).
fn search_list(report: &Report) -> Option<Finding> {
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
    let t = lookup_priced_by()?;
    Some(Finding::SearchList {
        mode: run.addr_mode,
        name: lookup.search.last()?.clone(),
        candidates: lookup.search.clone(),
        queries_per_lookup: lookup.queries_per_lookup,
        misses: plain(report, t, AddrMode::UncachedSearch)
            .zip(plain(report, t, AddrMode::Uncached))
            .map(|(s, u)| price(s, u)),
    })
}

/// Which transport to pick, and which if it must be HTTP: the lowest mean by IP among
/// runs that lost nothing, with those no measurably slower.
fn pick(base: &Report) -> Option<Finding> {
    // Transports are picked without TLS when plain runs exist: the TLS findings say what
    // encryption adds, and a pick between `tcp tls13` and `tcp` would be one of noise.
    let any_plain = base.runs.iter().any(|r| r.security == Security::Plain);
    let best = |http_only: bool| -> Option<Choice> {
        let runs: Vec<&RunRecord> = base
            .runs
            .iter()
            .filter(|r| r.failed() == 0 && r.addr_mode == AddrMode::Ip && !r.mux_comparison)
            .filter(|r| !any_plain || r.security == Security::Plain)
            .filter(|r| !http_only || r.transport.is_http())
            .filter(|r| r.latency_us.is_some())
            .collect();
        let b = *runs
            .iter()
            .min_by(|x, y| mean_of(x).total_cmp(&mean_of(y)))?;
        let l = b.latency_us?;
        Some(Choice {
            run: name(b),
            mean_us: l.mean,
            p99_us: l.p99,
            tied: runs
                .iter()
                .filter(|r| !std::ptr::eq(**r, b) && !crate::physics::runs_differ(r, b))
                .map(|r| name(r))
                .collect(),
        })
    };
    Some(Finding::Pick {
        any: best(false)?,
        http: best(true)?,
        loopback: on_loopback(base),
    })
}

/// The range of client CPU time per call.
fn cpu(base: &Report) -> Option<Finding> {
    let per_call: Vec<(RunName, f64)> = base
        .runs
        .iter()
        .filter(|r| r.addr_mode == AddrMode::Ip && r.calls > 0)
        .map(|r| (name(r), (r.cpu_user_s + r.cpu_sys_s) / r.calls as f64 * 1e6))
        .collect();
    Some(Finding::ClientCpu {
        least: *per_call.iter().min_by(|a, b| a.1.total_cmp(&b.1))?,
        most: *per_call.iter().max_by(|a, b| a.1.total_cmp(&b.1))?,
        quic: quic_cpu(base),
    })
}

/// Client CPU per call of a run, µs.
fn cpu_per_call(r: &RunRecord) -> f64 {
    (r.cpu_user_s + r.cpu_sys_s) / r.calls as f64 * 1e6
}

/// Each fresh QUIC transport against its TCP twin, both in `tls13` by IP
/// ([`QuicHandshake`]); `None` when no pair ran.
fn quic_handshake(base: &Report) -> Option<Finding> {
    let at = |k, s| secured(base, k, AddrMode::Ip, s);
    use crate::measure::Phase;
    let phase = |r: &RunRecord, p: Phase| r.phases_us.get(p).map(|s| s.mean);
    let pairs: Vec<QuicHandshake> = TransportKind::ALL
        .into_iter()
        .filter(|k| !k.persistent() && !k.shared())
        .filter_map(|k| {
            let tcp = k.tcp_twin()?;
            let (q, t) = (at(k, Security::Tls13)?, at(tcp, Security::Tls13)?);
            let rt = |k| crate::model::expected_round_trips(k, AddrMode::Ip, Security::Tls13);
            let tcp_handshake = phase(t, Phase::Connect).zip(phase(t, Phase::Tls));
            Some(QuicHandshake {
                quic: figure(q),
                tcp: figure(t),
                quic_over_tcp: versus(q, t),
                round_trips: (rt(k)?, rt(tcp)?),
                handshakes_us: phase(q, Phase::Handshake).zip(tcp_handshake.map(|(c, t)| c + t)),
            })
        })
        .collect();
    (!pairs.is_empty()).then_some(Finding::QuicHandshake(pairs))
}

/// Each kept, unshared QUIC transport's client CPU per call against the same call over
/// TCP, its TCP twin ([`Facts::tcp_twin`](crate::transport::Facts::tcp_twin): `quic`
/// against `tcp`, `h3` against `h2`), in the QUIC run's security mode where the twin ran in
/// it, else `plain`.
fn quic_cpu(base: &Report) -> Vec<((RunName, f64), (RunName, f64))> {
    let by_ip = |k: TransportKind, s: Security| {
        find(base, k, AddrMode::Ip, s).filter(|r| r.calls > 0 && r.workers == 1)
    };
    TransportKind::ALL
        .into_iter()
        .filter(|k| k.persistent() && !k.shared())
        .filter_map(|quic| {
            let tcp = quic.tcp_twin()?;
            let q = base
                .runs
                .iter()
                .find(|r| r.transport == quic && r.addr_mode == AddrMode::Ip && r.workers == 1)
                .filter(|r| r.calls > 0)?;
            let t = by_ip(tcp, q.security).or_else(|| by_ip(tcp, Security::Plain))?;
            Some(((name(q), cpu_per_call(q)), (name(t), cpu_per_call(t))))
        })
        .collect()
}

/// Lost calls, over every input.
fn lost(base: &Report, others: &[&Report]) -> Finding {
    let all: Vec<&RunRecord> = std::iter::once(base)
        .chain(others.iter().copied())
        .flat_map(|r| r.runs.iter())
        .collect();
    Finding::Lost {
        calls: all.iter().map(|r| r.calls).sum(),
        failed: all
            .iter()
            .filter(|r| r.failed() > 0)
            .map(|r| Failed {
                run: r.key(),
                failed: r.failed(),
                calls: r.calls,
            })
            .collect(),
    }
}

/// rpcbench beside established tools: the worst ratio, and the pairs above the limit.
pub fn peer_finding(p: &Peers) -> Option<Finding> {
    let ratios: Vec<(String, String, f64)> = p
        .pairs
        .iter()
        .filter_map(|e| Some((e.name(), e.peer.clone(), e.ratio()?)))
        .collect();
    let worst = ratios.iter().max_by(|a, b| a.2.total_cmp(&b.2))?.clone();
    Some(Finding::Peers {
        placement: p.placement.clone(),
        worst,
        over: ratios
            .into_iter()
            .filter(|(_, _, r)| *r > PEER_RATIO_LIMIT)
            .collect(),
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
pub const PIN_CPU: usize = 0;

/// Why a report's figures may move between runs: the placement of client and server was
/// left to the scheduler. Unpinned, client and server threads wake on whichever core is
/// free, and on a small VM a round trip across two cores costs many times one on a single
/// core (`docs/output.md`, "Figures you can trust"). The render layer words it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unplaced {
    /// The embedded server's run, with the client free to move: placed by dropping
    /// `--placement none` (`placed`), or, for a report from before `--placement`, by
    /// running `command` under `taskset -c PIN_CPU`.
    Embedded { placed: bool, command: String },
    /// A remote server's run with one side or both unpinned: the server is pinned with
    /// `rpcbench-echo --cpus`; this side as for an embedded run.
    Remote {
        client_free: bool,
        server_free: bool,
        placed: bool,
        command: String,
    },
}

/// What is unplaced in a report's run, if anything: nothing when rpcbench placed its
/// threads itself and the server, if remote, was pinned on its host.
pub fn unplaced(report: &Report) -> Option<Unplaced> {
    let embedded = report.target_kind() == crate::report::Target::Embedded;
    let placed = report.environment.placement.as_ref();
    // Reports from before `--placement` were placed only by a taskset around rpcbench.
    let client_free = match placed {
        Some(p) => p.client_cpu.is_none() && cpu_count(&p.allowed) > 1,
        None => cpu_count(&report.environment.cpu_affinity) > 1,
    };
    let server_free = report
        .server
        .as_ref()
        .is_some_and(|s| cpu_count(&s.settings.cpu_affinity) > 1);
    let command = shell_words(&report.command);
    if embedded && client_free {
        Some(Unplaced::Embedded {
            placed: placed.is_some(),
            command,
        })
    } else if !embedded && (client_free || server_free) {
        Some(Unplaced::Remote {
            client_free,
            server_free,
            placed: placed.is_some(),
            command,
        })
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
