//! Server-side counters, shared by every listener and served as JSON on `GET /stats`.
//!
//! Plain relaxed atomics: each counter is independent, and a snapshot taken while calls
//! are in flight is allowed to be a few events behind.

pub use crate::host::ProcessCost;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Instant;

/// Counters for one protocol (tcp, unix, http, udp or dns).
#[derive(Debug, Default)]
pub struct ProtoCounters {
    /// Connections currently open (for udp and dns: always 0).
    pub open: AtomicU64,
    /// Connections accepted since start, including ones refused for the limit.
    pub total: AtomicU64,
    /// Requests (frames, HTTP requests, DNS queries) taken in.
    pub requests: AtomicU64,
    /// Bytes read from the network.
    pub bytes_in: AtomicU64,
    /// Bytes written to the network.
    pub bytes_out: AtomicU64,
}

/// Why the server turned something away or could not serve it. Each has its own counter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Reject {
    /// TCP frame with a length prefix of zero; connection closed.
    ZeroLengthFrame,
    /// TCP frame with a length prefix above `--max-frame`; closed without allocating it.
    OversizedFrame,
    /// TCP frame whose body is not a valid request; connection closed.
    MalformedFrame,
    /// Connection closed by the client in the middle of a frame.
    TruncatedFrame,
    /// Connection closed because it sent nothing for `--idle-timeout`.
    IdleTimeout,
    /// Connection refused at once because `--max-connections` were open.
    OverConnectionLimit,
    /// TCP request answered with status 1: reply_len above the max frame.
    ReplyTooLarge,
    /// TCP request answered with status 2: delay_us above the max delay.
    DelayTooLong,
    /// HTTP 400: bad `reply_len`, `delay_us` or `seq`.
    HttpBadRequest,
    /// HTTP 404: unknown path.
    HttpNotFound,
    /// HTTP 405: known path, wrong method.
    HttpMethodNotAllowed,
    /// HTTP 413: body above the max frame.
    HttpPayloadTooLarge,
    /// HTTP connection ended by a protocol or I/O error.
    HttpConnectionError,
    /// Read or write error on a TCP connection.
    IoError,
    /// DNS packet that could not be parsed.
    DnsMalformed,
    /// UDP datagram that is not exactly one request (garbage, truncated, trailing bytes);
    /// ignored.
    UdpMalformed,
    /// UDP datagram above `--max-frame`; ignored.
    UdpOversized,
    /// UDP request answered with status 3: its reply would be larger than the request.
    UdpReplyAboveRequest,
}

impl Reject {
    /// Every kind, in the order they are listed in /stats.
    pub const ALL: [Reject; 18] = [
        Reject::ZeroLengthFrame,
        Reject::OversizedFrame,
        Reject::MalformedFrame,
        Reject::TruncatedFrame,
        Reject::IdleTimeout,
        Reject::OverConnectionLimit,
        Reject::ReplyTooLarge,
        Reject::DelayTooLong,
        Reject::HttpBadRequest,
        Reject::HttpNotFound,
        Reject::HttpMethodNotAllowed,
        Reject::HttpPayloadTooLarge,
        Reject::HttpConnectionError,
        Reject::IoError,
        Reject::DnsMalformed,
        Reject::UdpMalformed,
        Reject::UdpOversized,
        Reject::UdpReplyAboveRequest,
    ];

    /// The stable snake_case name used as the JSON key.
    pub fn name(self) -> &'static str {
        match self {
            Reject::ZeroLengthFrame => "zero_length_frame",
            Reject::OversizedFrame => "oversized_frame",
            Reject::MalformedFrame => "malformed_frame",
            Reject::TruncatedFrame => "truncated_frame",
            Reject::IdleTimeout => "idle_timeout",
            Reject::OverConnectionLimit => "over_connection_limit",
            Reject::ReplyTooLarge => "reply_too_large",
            Reject::DelayTooLong => "delay_too_long",
            Reject::HttpBadRequest => "http_400",
            Reject::HttpNotFound => "http_404",
            Reject::HttpMethodNotAllowed => "http_405",
            Reject::HttpPayloadTooLarge => "http_413",
            Reject::HttpConnectionError => "http_connection_error",
            Reject::IoError => "io_error",
            Reject::DnsMalformed => "dns_malformed",
            Reject::UdpMalformed => "udp_malformed",
            Reject::UdpOversized => "udp_oversized",
            Reject::UdpReplyAboveRequest => "udp_reply_above_request",
        }
    }
}

/// How the server was configured, reported in /stats so that a client can set what it
/// measured against what the server was asked to inject (a DNS delay, say).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ServerSettings {
    /// rpcbench-echo's version.
    pub version: String,
    /// The CPUs the server may run on (`0`, `0-1`): its core placement.
    pub cpu_affinity: String,
    pub max_frame: u32,
    pub max_delay_us: u64,
    pub max_connections: usize,
    pub idle_timeout_s: f64,
    /// The DNS responder, when it is on.
    pub dns: Option<DnsSettings>,
}

/// The DNS responder's settings.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DnsSettings {
    pub name: String,
    pub answer: String,
    pub ttl_s: u32,
    pub delay_us: u64,
    pub drop: f64,
}

/// All of the server's counters.
#[derive(Debug)]
pub struct Stats {
    started: Instant,
    settings: ServerSettings,
    /// Raw TCP listener.
    pub tcp: ProtoCounters,
    /// HTTP listener (HTTP/1.1 and HTTP/2 together).
    pub http: ProtoCounters,
    /// Unix socket listener (raw frames).
    pub unix: ProtoCounters,
    /// UDP listener: requests are datagrams taken in, whether answered or not.
    pub udp: ProtoCounters,
    /// DNS responder.
    pub dns: ProtoCounters,
    /// DNS answers sent.
    pub dns_answered: AtomicU64,
    /// DNS queries answered after `--dns-delay`.
    pub dns_delayed: AtomicU64,
    /// DNS queries dropped on purpose by `--dns-drop`.
    pub dns_dropped: AtomicU64,
    rejects: [AtomicU64; Reject::ALL.len()],
}

impl Default for Stats {
    fn default() -> Self {
        Stats::new(ServerSettings::default())
    }
}

impl Stats {
    /// Counters at zero for a server configured as `settings`.
    pub fn new(settings: ServerSettings) -> Self {
        Stats {
            started: Instant::now(),
            settings,
            tcp: ProtoCounters::default(),
            http: ProtoCounters::default(),
            unix: ProtoCounters::default(),
            udp: ProtoCounters::default(),
            dns: ProtoCounters::default(),
            dns_answered: AtomicU64::new(0),
            dns_delayed: AtomicU64::new(0),
            dns_dropped: AtomicU64::new(0),
            rejects: Default::default(),
        }
    }

    /// Counts one event of `kind`.
    pub fn reject(&self, kind: Reject) {
        self.rejects[kind as usize].fetch_add(1, Relaxed);
    }

    /// A consistent-enough copy for reporting.
    pub fn snapshot(&self) -> StatsSnapshot {
        let proto = |p: &ProtoCounters| ProtoSnapshot {
            connections_open: p.open.load(Relaxed),
            connections_total: p.total.load(Relaxed),
            requests: p.requests.load(Relaxed),
            bytes_in: p.bytes_in.load(Relaxed),
            bytes_out: p.bytes_out.load(Relaxed),
        };
        StatsSnapshot {
            uptime_s: self.started.elapsed().as_secs_f64(),
            settings: self.settings.clone(),
            tcp: proto(&self.tcp),
            http: proto(&self.http),
            unix: proto(&self.unix),
            udp: proto(&self.udp),
            dns: proto(&self.dns),
            dns_answered: self.dns_answered.load(Relaxed),
            dns_delayed: self.dns_delayed.load(Relaxed),
            dns_dropped: self.dns_dropped.load(Relaxed),
            rejected: Reject::ALL
                .iter()
                .map(|&k| (k.name().to_string(), self.rejects[k as usize].load(Relaxed)))
                .collect(),
            process: crate::host::process_cost(),
        }
    }
}

/// One protocol's counters at one instant.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ProtoSnapshot {
    pub connections_open: u64,
    pub connections_total: u64,
    pub requests: u64,
    pub bytes_in: u64,
    pub bytes_out: u64,
}

/// What `GET /stats` returns and what the server prints when it stops.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StatsSnapshot {
    pub uptime_s: f64,
    /// How the server was configured.
    pub settings: ServerSettings,
    pub tcp: ProtoSnapshot,
    pub http: ProtoSnapshot,
    /// The Unix socket listener; zeros in the JSON of a server from before it.
    #[serde(default)]
    pub unix: ProtoSnapshot,
    /// The UDP listener; zeros in the JSON of a server from before it.
    #[serde(default)]
    pub udp: ProtoSnapshot,
    pub dns: ProtoSnapshot,
    pub dns_answered: u64,
    pub dns_delayed: u64,
    pub dns_dropped: u64,
    /// Rejections and errors by kind (see [`Reject::name`]); every kind is present.
    pub rejected: BTreeMap<String, u64>,
    /// What the server process has cost so far. Zero in the JSON of a server from before
    /// this field (the report of an older server still reads).
    #[serde(default)]
    pub process: ProcessCost,
}

impl StatsSnapshot {
    /// The count for one kind.
    pub fn rejected(&self, kind: Reject) -> u64 {
        self.rejected.get(kind.name()).copied().unwrap_or(0)
    }
}
