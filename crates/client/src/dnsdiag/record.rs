//! What a diagnosis found, as JSON keeps it: each query ([`QueryRecord`]), the whole
//! diagnosis ([`DnsDiagnosis`]) and its findings ([`DnsFinding`]).

use super::conf::ResolvConf;
use crate::measure::Summary;
use hickory_proto::rr::RecordType;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Why a diagnosis did not time getaddrinfo.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "reason", rename_all = "kebab-case")]
pub enum GetaddrinfoSkipped {
    /// `--no-getaddrinfo`.
    NotAsked,
    /// The nameservers were asked on another port than 53, where getaddrinfo asks.
    OtherPort { port: u16 },
}

/// Something seen between the application and the nameserver that could answer a lookup.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Intermediary {
    /// nscd: its socket is there.
    Nscd,
    /// systemd-resolved: 127.0.0.53 among the nameservers, or nss-resolve in nsswitch.conf.
    SystemdResolved,
    /// Another resolver or cache on a loopback address.
    LocalResolver { address: std::net::IpAddr },
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
    pub(super) fn of(t: RecordType) -> QType {
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
    /// Answers by kind (`NOERROR`, `NXDOMAIN`, `truncated`, `timeout`...), over lookups.
    pub answers: BTreeMap<AnswerKind, u64>,
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
    pub getaddrinfo_skipped: Option<GetaddrinfoSkipped>,
    /// What answers between the application and the nameserver, when getaddrinfo
    /// disagrees with the queries it should send: what could be seen there (empty when
    /// nothing could).
    pub in_between: Option<Vec<Intermediary>>,
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
        codes: Vec<AnswerKind>,
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
        what: Vec<Intermediary>,
        getaddrinfo_us: f64,
        lookup_us: f64,
    },
    /// No candidate got an answer with records.
    NoAnswer { name: String },
}

/// What one query got back, as a diagnosis counts its answers: a response code as dig
/// prints it (`NOERROR`, `NXDOMAIN`, `SERVFAIL`, `REFUSED`), a truncated answer, or none
/// within the timeout. Written as that text, in JSON too, and ordered by it, so a map of
/// counts lists its kinds as the text sorts.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum AnswerKind {
    /// An answer with this response code (its text as dig prints it).
    Code(String),
    /// An answer with the TC bit: asked again over TCP.
    Truncated,
    /// Nothing came within the timeout.
    Timeout,
}

impl AnswerKind {
    /// The kind as written: the code's text, `truncated` or `timeout`.
    pub fn as_str(&self) -> &str {
        match self {
            AnswerKind::Code(code) => code,
            AnswerKind::Truncated => "truncated",
            AnswerKind::Timeout => "timeout",
        }
    }

    /// The kind a text names (the inverse of [`AnswerKind::as_str`]).
    pub fn parse(text: &str) -> AnswerKind {
        match text {
            "truncated" => AnswerKind::Truncated,
            "timeout" => AnswerKind::Timeout,
            code => AnswerKind::Code(code.to_string()),
        }
    }
}

impl std::fmt::Display for AnswerKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Ord for AnswerKind {
    fn cmp(&self, other: &AnswerKind) -> std::cmp::Ordering {
        self.as_str().cmp(other.as_str())
    }
}

impl PartialOrd for AnswerKind {
    fn partial_cmp(&self, other: &AnswerKind) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Serialize for AnswerKind {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for AnswerKind {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<AnswerKind, D::Error> {
        let text = std::borrow::Cow::<str>::deserialize(d)?;
        Ok(AnswerKind::parse(&text))
    }
}
