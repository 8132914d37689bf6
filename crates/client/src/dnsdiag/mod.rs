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

use crate::measure::{Hist, Summary};
use conf::ResolvConf;
use hickory_proto::op::{Message, MessageType, Query, ResponseCode};
use hickory_proto::rr::{Name, RecordType};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpStream, UdpSocket};
use std::time::{Duration, Instant};

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
    fn label(self) -> String {
        match self {
            Answer::Code {
                truncated: true, ..
            } => "truncated".into(),
            Answer::Code { code, .. } => code_name(code),
            Answer::Timeout => "timeout".into(),
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

/// The type of a query a lookup sends: glibc asks for both, in this order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum QType {
    A,
    #[serde(rename = "AAAA")]
    Aaaa,
}

impl QType {
    /// The type as DNS names it: `A`, `AAAA`.
    pub fn name(self) -> &'static str {
        match self {
            QType::A => "A",
            QType::Aaaa => "AAAA",
        }
    }

    /// The type of a query sent: only `A` and `AAAA` are.
    fn of(t: RecordType) -> QType {
        if t == RecordType::AAAA {
            QType::Aaaa
        } else {
            QType::A
        }
    }
}

impl std::fmt::Display for QType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// How a query went to its server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Via {
    Udp,
    /// Over TCP: asked again after a truncated answer over UDP.
    Tcp,
}

impl Via {
    /// `udp` or `tcp`.
    pub fn name(self) -> &'static str {
        match self {
            Via::Udp => "udp",
            Via::Tcp => "tcp",
        }
    }
}

impl std::fmt::Display for Via {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// One query of the sequence, over every lookup: where it went and what it got.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QueryRecord {
    /// Its place in the sequence (1 up), in the order the first lookup sent it.
    pub order: usize,
    /// The candidate name, fully qualified.
    pub candidate: String,
    pub qtype: QType,
    /// The nameserver, `IP:PORT`.
    pub server: String,
    pub via: Via,
    /// The round over the nameservers it belongs to (1 up): 2 and on are retries.
    pub attempt: u32,
    /// Answers by code (`NOERROR`, `NXDOMAIN`, `truncated`, `timeout`...), over lookups.
    pub answers: BTreeMap<String, u64>,
    /// Its time from sending to the answer (or the timeout), µs.
    pub time_us: Option<Summary>,
    /// Whether what it got was thrown away: a miss on a candidate before the one that
    /// answered, a timeout, or a truncated answer asked again over TCP.
    pub wasted: bool,
    /// The smallest TTL of its answer records, when it had any.
    pub min_ttl: Option<u32>,
}

/// The diagnosis of one name.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DnsDiagnosis {
    pub rpcbench: String,
    pub name: String,
    pub resolv_conf: String,
    pub config: ResolvConf,
    pub hosts_sources: Vec<String>,
    /// What `/etc/hosts` answered, when it comes before DNS and knows the name.
    pub hosts_answer: Vec<String>,
    /// The names a lookup tries, in order.
    pub candidates: Vec<String>,
    /// The candidate that answered (the last lookup's), if any did.
    pub answered_by: Option<String>,
    pub lookups: u32,
    /// Queries one lookup sent, on average.
    pub queries_per_lookup: f64,
    pub queries: Vec<QueryRecord>,
    /// The whole derived lookup, µs.
    pub lookup_us: Option<Summary>,
    /// Of it, the wasted part on average, µs.
    pub wasted_us_mean: f64,
    /// `getaddrinfo` for the name, µs, when timed.
    pub getaddrinfo_us: Option<Summary>,
    /// Why getaddrinfo was not timed, when it was not.
    pub getaddrinfo_skipped: Option<String>,
    /// What sits between the application and the nameserver, when one is seen.
    pub in_between: Option<String>,
    pub findings: Vec<DnsFinding>,
}

/// What a diagnosis says about the lookup: a value carrying its facts, worded by the
/// renderers (`render::findings`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
pub enum DnsFinding {
    /// The name is in /etc/hosts, which nsswitch reads before DNS: no query is sent.
    InHosts {
        name: String,
        addresses: Vec<String>,
    },
    /// A name with fewer dots than `ndots` is first tried under search domains, each
    /// miss a query.
    SearchMisses {
        name: String,
        dots: usize,
        ndots: u32,
        /// Search domains tried before the candidate that answered.
        misses: usize,
        /// Queries they cost one lookup.
        queries: usize,
        /// The answers they got (`NXDOMAIN`, `timeout`).
        codes: Vec<String>,
        /// What they waste of a lookup on average, and the whole lookup, µs.
        wasted_us: f64,
        lookup_us: f64,
    },
    /// A query type that a server never answers: every lookup waits the timeout.
    Dropped {
        qtype: QType,
        candidate: String,
        server: String,
        timeout_s: u32,
    },
    /// An answer truncated over UDP and fetched again over TCP on every lookup.
    TruncatedToTcp { qtype: QType, candidate: String },
    /// A TTL of 0: caching cannot help.
    TtlZero,
    /// getaddrinfo much faster than the queries it should send: something in between
    /// answers.
    InBetween {
        what: String,
        getaddrinfo_us: f64,
        lookup_us: f64,
    },
    /// No candidate got an answer with records.
    NoAnswer { name: String },
}

/// One query's key in the aggregate: the same query in every lookup.
type Key = (String, RecordType, SocketAddr, bool, u32);

/// The per-query aggregate while lookups run.
struct Agg {
    order: usize,
    answers: BTreeMap<String, u64>,
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
fn getaddrinfo_timing(spec: &DnsSpec, lookups: u32) -> (Option<Summary>, Option<String>) {
    if !spec.getaddrinfo {
        (None, Some("not asked for (--no-getaddrinfo)".to_string()))
    } else if spec.port != 53 {
        (
            None,
            Some(format!(
                "the nameservers are asked on port {}, and getaddrinfo asks on 53",
                spec.port
            )),
        )
    } else {
        (time_getaddrinfo(&spec.name, lookups), None)
    }
}

/// How one lookup went.
struct Trace {
    total: Duration,
    wasted: Duration,
    answered_by: Option<String>,
    /// Every answer was REFUSED.
    refused_only: bool,
}

/// Sends one lookup's queries and records them.
struct Prober<'a> {
    conf: &'a ResolvConf,
    servers: &'a [SocketAddr],
    /// The nameserver tried first (`rotate` moves it on each lookup).
    first: usize,
    aggs: &'a mut BTreeMap<Key, Agg>,
    sent: u64,
}

/// One query's result: what it got, how long it took (the timeout for a timeout).
struct Asked {
    answer: Answer,
    took: Duration,
}

impl Prober<'_> {
    fn lookup(&mut self, candidates: &[String]) -> Result<Trace, DiagnoseError> {
        let mut total = Duration::ZERO;
        let mut wasted = Duration::ZERO;
        let mut refused_only = true;
        for cand in candidates {
            let name = Name::from_ascii(cand)
                .map_err(|_| conf::CheckNameError::EmptyLabel { name: cand.clone() })?;
            let types = [RecordType::A, RecordType::AAAA];
            let mut results = Vec::new();
            let mut took = Duration::ZERO;
            if self.conf.single_request {
                for t in types {
                    let (answer, t_took, lost) = self.ask_type(cand, &name, t)?;
                    took += t_took;
                    wasted += lost;
                    results.push(answer);
                }
            } else {
                let (pair, t_took, lost) = self.ask_pair(cand, &name)?;
                took += t_took;
                wasted += lost;
                results.extend(pair);
            }
            total += took;
            refused_only &= results.iter().all(|a| {
                matches!(
                    a,
                    Answer::Code {
                        code: ResponseCode::Refused,
                        ..
                    }
                )
            });
            if results.iter().any(|a| a.has_records()) {
                return Ok(Trace {
                    total,
                    wasted,
                    answered_by: Some(cand.clone()),
                    refused_only: false,
                });
            }
            // A miss (NXDOMAIN, no data, SERVFAIL) moves on, as glibc does; a timeout on
            // every try, or a refusal, ends the search.
            wasted += took;
            let moves_on = results.iter().all(|a| {
                matches!(
                    a,
                    Answer::Code {
                        code: ResponseCode::NXDomain
                            | ResponseCode::NoError
                            | ResponseCode::ServFail,
                        ..
                    }
                )
            });
            if !moves_on {
                break;
            }
        }
        Ok(Trace {
            total,
            wasted,
            answered_by: None,
            refused_only,
        })
    }

    /// A and AAAA sent together, as glibc's getaddrinfo does: both on one socket, then
    /// both answers waited for. A type that times out is retried on its own. Returns
    /// both answers, the time until the later one, and the time lost to timeouts.
    fn ask_pair(
        &mut self,
        cand: &str,
        name: &Name,
    ) -> Result<(Vec<Answer>, Duration, Duration), DiagnoseError> {
        if self.conf.use_vc {
            let a = self.ask_type(cand, name, RecordType::A)?;
            let b = self.ask_type(cand, name, RecordType::AAAA)?;
            return Ok((vec![a.0, b.0], a.1 + b.1, a.2 + b.2));
        }
        let mut answers = [None, None];
        let types = [RecordType::A, RecordType::AAAA];
        let mut elapsed = Duration::ZERO;
        let mut lost = Duration::ZERO;
        let n = self.servers.len();
        'rounds: for attempt in 1..=self.conf.attempts {
            for k in 0..n {
                let server = self.servers[(self.first + k) % n];
                let pending: Vec<usize> = (0..2).filter(|&i| answers[i].is_none()).collect();
                if pending.is_empty() {
                    break 'rounds;
                }
                let asked = self.udp(
                    server,
                    name,
                    &pending.iter().map(|&i| types[i]).collect::<Vec<_>>(),
                )?;
                let round = asked.iter().map(|a| a.took).max().unwrap_or_default();
                elapsed += round;
                for (&i, a) in pending.iter().zip(&asked) {
                    self.record(cand, types[i], server, false, attempt, a);
                    match a.answer {
                        Answer::Timeout => {}
                        Answer::Code {
                            truncated: true, ..
                        } => {
                            // Asked again over TCP; the UDP answer is thrown away.
                            let tcp = self.tcp(server, name, types[i]);
                            self.record(cand, types[i], server, true, attempt, &tcp);
                            elapsed += tcp.took;
                            lost += a.took;
                            answers[i] = Some(tcp.answer);
                        }
                        answer => answers[i] = Some(answer),
                    }
                }
                if asked.iter().any(|a| a.answer == Answer::Timeout) {
                    lost += round
                        - asked
                            .iter()
                            .filter(|a| a.answer != Answer::Timeout)
                            .map(|a| a.took)
                            .max()
                            .unwrap_or_default();
                }
            }
        }
        let answers = answers.map(|a| a.unwrap_or(Answer::Timeout)).to_vec();
        Ok((answers, elapsed, lost))
    }

    /// One type on its own (single-request, or use-vc): tries over the nameservers and
    /// rounds until one answers.
    fn ask_type(
        &mut self,
        cand: &str,
        name: &Name,
        t: RecordType,
    ) -> Result<(Answer, Duration, Duration), DiagnoseError> {
        let mut elapsed = Duration::ZERO;
        let mut lost = Duration::ZERO;
        let n = self.servers.len();
        for attempt in 1..=self.conf.attempts {
            for k in 0..n {
                let server = self.servers[(self.first + k) % n];
                let a = if self.conf.use_vc {
                    self.tcp(server, name, t)
                } else {
                    self.udp(server, name, &[t])?.remove(0)
                };
                self.record(cand, t, server, self.conf.use_vc, attempt, &a);
                elapsed += a.took;
                match a.answer {
                    Answer::Timeout => lost += a.took,
                    Answer::Code {
                        truncated: true, ..
                    } => {
                        let tcp = self.tcp(server, name, t);
                        self.record(cand, t, server, true, attempt, &tcp);
                        elapsed += tcp.took;
                        lost += a.took;
                        return Ok((tcp.answer, elapsed, lost));
                    }
                    answer => return Ok((answer, elapsed, lost)),
                }
            }
        }
        Ok((Answer::Timeout, elapsed, lost))
    }

    /// Sends one query per type on one UDP socket, then waits for their answers until the
    /// timeout; each is timed from its own send.
    fn udp(
        &mut self,
        server: SocketAddr,
        name: &Name,
        types: &[RecordType],
    ) -> Result<Vec<Asked>, DiagnoseError> {
        let socket_err = |source| DiagnoseError::Socket { server, source };
        let bind: SocketAddr = if server.is_ipv4() {
            ([0, 0, 0, 0], 0).into()
        } else {
            (std::net::Ipv6Addr::UNSPECIFIED, 0).into()
        };
        let socket = UdpSocket::bind(bind).map_err(socket_err)?;
        socket.connect(server).map_err(socket_err)?;
        let mut pending: Vec<(u16, Instant)> = Vec::new();
        for &t in types {
            let id = query_id();
            let bytes = query_bytes(id, name, t, self.conf.edns0);
            let sent = Instant::now();
            // A send refused at once (no route) is a timeout for glibc too.
            let _ = socket.send(&bytes);
            self.sent += 1;
            pending.push((id, sent));
        }
        let deadline = pending[0].1 + self.conf.timeout();
        let mut got: Vec<Option<Asked>> = types.iter().map(|_| None).collect();
        let mut buf = [0u8; 4096];
        while got.iter().any(Option::is_none) {
            let Some(left) = deadline
                .checked_duration_since(Instant::now())
                .filter(|d| !d.is_zero())
            else {
                break;
            };
            let _ = socket.set_read_timeout(Some(left));
            let Ok(n) = socket.recv(&mut buf) else {
                // A timeout, or an ICMP error (port unreachable) from an earlier send,
                // which glibc also treats as no answer from this server.
                continue;
            };
            let now = Instant::now();
            let Ok(msg) = Message::from_vec(&buf[..n]) else {
                continue;
            };
            if msg.metadata.message_type != MessageType::Response {
                continue;
            }
            if let Some(i) = pending.iter().position(|(id, _)| *id == msg.metadata.id)
                && got[i].is_none()
            {
                got[i] = Some(Asked {
                    answer: answer_of(&msg),
                    took: now - pending[i].1,
                });
            }
        }
        Ok(got
            .into_iter()
            .enumerate()
            .map(|(i, a)| {
                a.unwrap_or(Asked {
                    answer: Answer::Timeout,
                    took: deadline.saturating_duration_since(pending[i].1),
                })
            })
            .collect())
    }

    /// One query over TCP (RFC 7766), within the timeout.
    fn tcp(&mut self, server: SocketAddr, name: &Name, t: RecordType) -> Asked {
        self.sent += 1;
        let timeout = self.conf.timeout();
        let start = Instant::now();
        let run = || -> std::io::Result<Answer> {
            let mut s = TcpStream::connect_timeout(&server, timeout)?;
            let left = timeout
                .saturating_sub(start.elapsed())
                .max(Duration::from_millis(1));
            s.set_read_timeout(Some(left))?;
            s.set_write_timeout(Some(left))?;
            let id = query_id();
            let bytes = query_bytes(id, name, t, self.conf.edns0);
            let mut framed = (bytes.len() as u16).to_be_bytes().to_vec();
            framed.extend_from_slice(&bytes);
            s.write_all(&framed)?;
            let mut len = [0u8; 2];
            s.read_exact(&mut len)?;
            let mut msg = vec![0u8; usize::from(u16::from_be_bytes(len))];
            s.read_exact(&mut msg)?;
            let msg = Message::from_vec(&msg)
                .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))?;
            Ok(answer_of(&msg))
        };
        let answer = run().unwrap_or(Answer::Timeout);
        Asked {
            answer,
            took: start.elapsed(),
        }
    }

    fn record(
        &mut self,
        cand: &str,
        t: RecordType,
        server: SocketAddr,
        tcp: bool,
        attempt: u32,
        a: &Asked,
    ) {
        let order = self.aggs.len();
        let agg = self
            .aggs
            .entry((cand.to_string(), t, server, tcp, attempt))
            .or_insert_with(|| Agg {
                order,
                answers: BTreeMap::new(),
                time: Hist::default(),
                wasted: false,
                min_ttl: None,
            });
        *agg.answers.entry(a.answer.label()).or_default() += 1;
        agg.time.record(a.took);
        if let Answer::Code {
            min_ttl: Some(ttl), ..
        } = a.answer
        {
            agg.min_ttl = Some(agg.min_ttl.map_or(ttl, |m| m.min(ttl)));
        }
        agg.wasted |= matches!(
            a.answer,
            Answer::Timeout
                | Answer::Code {
                    truncated: true,
                    ..
                }
        );
    }
}

/// A query id: the low bits of the clock, different from one query to the next.
fn query_id() -> u16 {
    use std::sync::atomic::{AtomicU16, Ordering::Relaxed};
    static NEXT: AtomicU16 = AtomicU16::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    (nanos as u16) ^ NEXT.fetch_add(0x9e37, Relaxed)
}

/// The bytes of a recursive query for `name`/`t`.
fn query_bytes(id: u16, name: &Name, t: RecordType, edns0: bool) -> Vec<u8> {
    let mut m = Message::query();
    m.metadata.id = id;
    m.metadata.recursion_desired = true;
    m.add_query(Query::query(name.clone(), t));
    if edns0 {
        let mut edns = hickory_proto::op::Edns::new();
        edns.set_max_payload(1232);
        m.set_edns(edns);
    }
    m.to_vec().unwrap_or_default()
}

fn answer_of(msg: &Message) -> Answer {
    Answer::Code {
        code: msg.metadata.response_code,
        records: msg.answers.len(),
        min_ttl: msg.answers.iter().map(|r| r.ttl).min(),
        truncated: msg.metadata.truncation,
    }
}

/// Times `getaddrinfo(name)` (all families, as an application would ask) `n` times.
fn time_getaddrinfo(name: &str, n: u32) -> Option<Summary> {
    use std::net::ToSocketAddrs;
    let mut h = Hist::default();
    for _ in 0..n {
        let start = Instant::now();
        let _ = (name.trim_end_matches('.'), 0).to_socket_addrs();
        h.record(start.elapsed());
    }
    h.summary()
}

/// How far getaddrinfo may be from the derived sum before something in between is
/// suspected: 20%, and at least 200 µs (getaddrinfo also reads its files on every call).
const AGREE_SHARE: f64 = 0.20;
const AGREE_FLOOR_US: f64 = 200.0;

/// Whether getaddrinfo's mean agrees with the derived lookup's, and if not, what answers
/// in between, when it can be seen.
fn in_between(d: &DnsDiagnosis) -> Option<String> {
    let (gai, derived) = (d.getaddrinfo_us?.mean, d.lookup_us?.mean);
    let gap = (gai - derived).abs();
    if gap <= (AGREE_SHARE * derived).max(AGREE_FLOOR_US) {
        return None;
    }
    let mut seen = Vec::new();
    if ["/run/nscd/socket", "/var/run/nscd/socket"]
        .iter()
        .any(|p| std::path::Path::new(p).exists())
    {
        seen.push("nscd (its socket is there)".to_string());
    }
    if d.hosts_sources.iter().any(|s| s == "resolve")
        || d.config
            .nameservers
            .contains(&IpAddr::from([127, 0, 0, 53]))
    {
        seen.push("systemd-resolved (127.0.0.53 or nss-resolve)".to_string());
    }
    if let Some(local) = d.config.nameservers.iter().find(|ip| ip.is_loopback())
        && *local != IpAddr::from([127, 0, 0, 53])
    {
        seen.push(format!("a local resolver or cache at {local}"));
    }
    Some(if seen.is_empty() {
        "something between the application and the nameserver (none detected: no nscd socket, no systemd-resolved)".into()
    } else {
        seen.join(", ")
    })
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
            let codes: std::collections::BTreeSet<&String> =
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
        if q.attempt == 1 && all > 0 && q.answers.get("timeout") == Some(&all) {
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
