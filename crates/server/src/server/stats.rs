//! Server-side counters, shared by every listener and served as JSON on `GET /stats`.
//!
//! Plain relaxed atomics: each counter is independent, and a snapshot taken while calls
//! are in flight is allowed to be a few events behind.

use super::budget::Budget;
use crate::encoding::{EncodingKind, Operation};
pub use crate::host::ProcessCost;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::Arc;
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

/// Why a TLS handshake failed, each with its own counter per TLS listener.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum HandshakeFailure {
    /// Not finished within the handshake timeout (a client that stalled mid-handshake).
    Timeout,
    /// The bytes were not TLS (a plain client, or garbage).
    NotTls,
    /// The client closed the connection mid-handshake (a client that refused the server's
    /// certificate without saying so).
    Closed,
    /// The client sent an alert (it did not trust the server's certificate, say).
    AlertReceived,
    /// mTLS: the client presented no certificate.
    NoClientCert,
    /// mTLS: the client's certificate did not verify (another CA, expired).
    BadClientCert,
    /// No protocol version or cipher suite in common.
    Incompatible,
    /// A read or write error on the socket.
    Io,
    /// Any other TLS error.
    Other,
}

impl HandshakeFailure {
    /// Every kind, in the order /stats lists them.
    pub const ALL: [HandshakeFailure; 9] = [
        HandshakeFailure::Timeout,
        HandshakeFailure::NotTls,
        HandshakeFailure::Closed,
        HandshakeFailure::AlertReceived,
        HandshakeFailure::NoClientCert,
        HandshakeFailure::BadClientCert,
        HandshakeFailure::Incompatible,
        HandshakeFailure::Io,
        HandshakeFailure::Other,
    ];

    /// The stable snake_case name used as the JSON key and metric label.
    pub fn name(self) -> &'static str {
        match self {
            HandshakeFailure::Timeout => "timeout",
            HandshakeFailure::NotTls => "not_tls",
            HandshakeFailure::Closed => "closed",
            HandshakeFailure::AlertReceived => "alert_received",
            HandshakeFailure::NoClientCert => "no_client_cert",
            HandshakeFailure::BadClientCert => "bad_client_cert",
            HandshakeFailure::Incompatible => "incompatible",
            HandshakeFailure::Io => "io",
            HandshakeFailure::Other => "other",
        }
    }
}

/// The handshakes of one TLS listener: full, resumed, and failed by kind.
#[derive(Debug, Default)]
pub struct HandshakeCounters {
    /// Handshakes that completed with a full key exchange and certificate.
    pub full: AtomicU64,
    /// Handshakes that resumed an earlier session (ticket or session ID).
    pub resumed: AtomicU64,
    /// Completed handshakes of a kind told apart by `resuming` ([`Self::completed`]).
    completed: AtomicU64,
    /// Handshakes that found their session, as they began ([`Self::resuming`]).
    resuming: AtomicU64,
    failures: [AtomicU64; HandshakeFailure::ALL.len()],
}

impl HandshakeCounters {
    /// Counts a completed handshake.
    pub fn succeeded(&self, resumed: bool) {
        let counter = if resumed { &self.resumed } else { &self.full };
        counter.fetch_add(1, Relaxed);
    }

    /// Counts a completed handshake whose kind is told by [`Self::resuming`]: QUIC's, as
    /// quinn does not say whether a connection resumed; its session store does.
    pub fn completed(&self) {
        self.completed.fetch_add(1, Relaxed);
    }

    /// Counts a handshake that found the session it resumes, as it begins: in the
    /// snapshot, one of the [`Self::completed`] ones is resumed instead of full.
    pub fn resuming(&self) {
        self.resuming.fetch_add(1, Relaxed);
    }

    /// Counts a failed handshake of `kind`.
    pub fn failed(&self, kind: HandshakeFailure) {
        self.failures[kind as usize].fetch_add(1, Relaxed);
    }

    /// A copy for reporting.
    pub fn snapshot(&self) -> HandshakeSnapshot {
        let completed = self.completed.load(Relaxed);
        let resuming = self.resuming.load(Relaxed).min(completed);
        HandshakeSnapshot {
            full: self.full.load(Relaxed) + completed - resuming,
            resumed: self.resumed.load(Relaxed) + resuming,
            failed: HandshakeFailure::ALL
                .iter()
                .map(|&k| {
                    (
                        k.name().to_string(),
                        self.failures[k as usize].load(Relaxed),
                    )
                })
                .collect(),
        }
    }
}

/// [`HandshakeCounters`] at one instant.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HandshakeSnapshot {
    /// Full handshakes completed.
    pub full: u64,
    /// Resumed handshakes completed.
    pub resumed: u64,
    /// Failed handshakes by kind ([`HandshakeFailure::name`]); every kind is present.
    pub failed: BTreeMap<String, u64>,
}

impl HandshakeSnapshot {
    /// True when no handshake was counted: a listener that was off or never called.
    pub fn is_unused(&self) -> bool {
        self.full == 0 && self.resumed == 0 && self.failed.values().all(|&n| n == 0)
    }

    /// The failures of one kind.
    pub fn failures(&self, kind: HandshakeFailure) -> u64 {
        self.failed.get(kind.name()).copied().unwrap_or(0)
    }
}

/// Counters of gRPC on the HTTP port. Its connections and bytes are the HTTP listener's
/// (one port, one connection can carry both), so only what is gRPC's own is here.
#[derive(Debug, Default)]
pub struct GrpcCounters {
    /// gRPC calls taken in (one per HTTP/2 stream routed to gRPC, whatever its method);
    /// each is also one of the HTTP listener's `requests`.
    pub calls: AtomicU64,
    /// Request messages answered: one per `Call`, one per message on a `Stream`.
    pub messages: AtomicU64,
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
    /// HTTP/2 stream reset by the client before its reply was ready (a cancelled call,
    /// a body cut short); the connection goes on.
    Http2StreamReset,
    /// Read or write error on a TCP connection.
    IoError,
    /// DNS packet that could not be parsed.
    DnsMalformed,
    /// gRPC status INVALID_ARGUMENT: a negative `reply_len` or `delay_us`.
    GrpcInvalidArgument,
    /// gRPC status RESOURCE_EXHAUSTED: `reply_len` above the max frame (less the reply's
    /// framing, as on TCP) or `delay_us` above the max delay.
    GrpcResourceExhausted,
    /// gRPC status INTERNAL or OUT_OF_RANGE from decoding the request: a length prefix
    /// that lies (more bytes than came, or above the max frame), the compressed flag with
    /// no `grpc-encoding`, or bytes that are not an `EchoRequest`.
    GrpcMalformed,
    /// gRPC status UNIMPLEMENTED: an unknown service or method.
    GrpcUnimplemented,
    /// A gRPC call the client ended first: its stream reset (or its connection closed)
    /// before the reply was complete, or gRPC status CANCELLED.
    GrpcCancelled,
    /// Any other non-zero gRPC status.
    GrpcOtherError,
    /// UDP datagram that is not exactly one request (garbage, truncated, trailing bytes);
    /// ignored.
    UdpMalformed,
    /// UDP datagram above `--max-frame`; ignored.
    UdpOversized,
    /// UDP request answered with status 3: its reply would be larger than the request.
    UdpReplyAboveRequest,
    /// A TLS client on the plain TCP listener (its first bytes a TLS record); closed.
    TcpTlsClient,
    /// A TLS client on the plain HTTP listener (its first bytes a TLS record); closed at
    /// once instead of waiting for a request head.
    HttpTlsClient,
    /// HTTP 503: the request's body did not fit in what is left of `--max-buffered`.
    OverBudgetHttp,
    /// gRPC status RESOURCE_EXHAUSTED because the request message did not fit in what is
    /// left of `--max-buffered` (counted here, not in `grpc_resource_exhausted`).
    OverBudgetGrpc,
    /// Raw frame answered with status 4: the request frame did not fit in what is left of
    /// `--max-buffered`; it was read and dropped.
    OverBudgetFrame,
    /// Connection closed because a reply waited `--write-timeout` with no byte taken by
    /// the client (a full socket, or a zero HTTP/2 window).
    WriteTimeout,
    /// HTTP 415: a body whose content type no encoding has, or another route's (`/rpc`).
    HttpUnsupportedMediaType,
    /// A WSTest call whose body its encoding cannot read: not its syntax, cut short, a
    /// length past the body, bytes after the message.
    RpcMalformed,
    /// An XML call with a `<!DOCTYPE`, refused unread (no entity expanded, nothing
    /// fetched).
    RpcDoctype,
    /// A WSTest call nested deeper than its codec or the list's cap (64 nodes) allows.
    RpcTooDeep,
    /// A well-formed body that is not a call this server has: an unknown operation or
    /// method, wrong parameters, WSTest's own rules broken.
    RpcBadCall,
    /// An Initial packet from an unvalidated address, answered with a QUIC Retry while
    /// many handshakes were under way (`--quic`); the client proves its address and
    /// comes again.
    QuicRetry,
    /// A QUIC connection that agreed on no application protocol (ALPN); closed.
    QuicNoAlpn,
    /// A QUIC client offered a session ticket the server does not hold: used already (a
    /// replayed handshake), or dropped from its bounded store. No resumption, and no
    /// early data read: the handshake goes on in full.
    QuicUnknownTicket,
    /// A QUIC stream the client reset or stopped before its reply was sent.
    QuicStreamReset,
}

impl Reject {
    /// Every kind, in the order they are listed in /stats.
    pub const ALL: [Reject; 40] = [
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
        Reject::Http2StreamReset,
        Reject::IoError,
        Reject::DnsMalformed,
        Reject::GrpcInvalidArgument,
        Reject::GrpcResourceExhausted,
        Reject::GrpcMalformed,
        Reject::GrpcUnimplemented,
        Reject::GrpcCancelled,
        Reject::GrpcOtherError,
        Reject::UdpMalformed,
        Reject::UdpOversized,
        Reject::UdpReplyAboveRequest,
        Reject::TcpTlsClient,
        Reject::HttpTlsClient,
        Reject::OverBudgetHttp,
        Reject::OverBudgetGrpc,
        Reject::OverBudgetFrame,
        Reject::WriteTimeout,
        Reject::HttpUnsupportedMediaType,
        Reject::RpcMalformed,
        Reject::RpcDoctype,
        Reject::RpcTooDeep,
        Reject::RpcBadCall,
        Reject::QuicRetry,
        Reject::QuicNoAlpn,
        Reject::QuicUnknownTicket,
        Reject::QuicStreamReset,
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
            Reject::Http2StreamReset => "http2_stream_reset",
            Reject::IoError => "io_error",
            Reject::DnsMalformed => "dns_malformed",
            Reject::GrpcInvalidArgument => "grpc_invalid_argument",
            Reject::GrpcResourceExhausted => "grpc_resource_exhausted",
            Reject::GrpcMalformed => "grpc_malformed",
            Reject::GrpcUnimplemented => "grpc_unimplemented",
            Reject::GrpcCancelled => "grpc_cancelled",
            Reject::GrpcOtherError => "grpc_other_error",
            Reject::UdpMalformed => "udp_malformed",
            Reject::UdpOversized => "udp_oversized",
            Reject::UdpReplyAboveRequest => "udp_reply_above_request",
            Reject::TcpTlsClient => "tcp_tls_client",
            Reject::HttpTlsClient => "http_tls_client",
            Reject::OverBudgetHttp => "over_budget_http",
            Reject::OverBudgetGrpc => "over_budget_grpc",
            Reject::OverBudgetFrame => "over_budget_frame",
            Reject::WriteTimeout => "write_timeout",
            Reject::HttpUnsupportedMediaType => "http_415",
            Reject::RpcMalformed => "rpc_malformed",
            Reject::RpcDoctype => "rpc_doctype",
            Reject::RpcTooDeep => "rpc_too_deep",
            Reject::RpcBadCall => "rpc_bad_call",
            Reject::QuicRetry => "quic_retry",
            Reject::QuicNoAlpn => "quic_no_alpn",
            Reject::QuicUnknownTicket => "quic_unknown_ticket",
            Reject::QuicStreamReset => "quic_stream_reset",
        }
    }
}

/// How the server was configured, reported in /stats so that a client can set what it
/// measured against what the server was asked to inject (a DNS delay, say).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ServerSettings {
    /// rpcbench-echo's version.
    pub version: String,
    /// The wire's version ([`crate::wire::WIRE_VERSION`]): a client whose own differs
    /// cannot call this server. 0 from a server from before the field.
    #[serde(default)]
    pub wire: u32,
    /// The machine the server runs on; empty from a server from before the field.
    #[serde(default)]
    pub host: crate::host::HostFacts,
    /// The CPUs the server may run on (`0`, `0-1`): its core placement.
    pub cpu_affinity: String,
    pub max_frame: u32,
    pub max_delay_us: u64,
    pub max_connections: usize,
    pub idle_timeout_s: f64,
    /// `--max-buffered`: the most bytes of request bodies and unsent replies held at once.
    /// Zero from a server from before the budget.
    #[serde(default)]
    pub max_buffered: u64,
    /// `--write-timeout`: a reply that takes no byte for this long closes its connection.
    /// Zero from a server from before it.
    #[serde(default)]
    pub write_timeout_s: f64,
    /// The most HTTP/2 streams open at once on one connection
    /// (`SETTINGS_MAX_CONCURRENT_STREAMS`). Zero from a server from before it.
    #[serde(default)]
    pub http2_max_streams: u32,
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
    /// The budget of `--max-buffered` and its gauge.
    pub budget: Arc<Budget>,
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
    /// Raw frames over TLS (`--tls`).
    pub tls: ProtoCounters,
    /// HTTP over TLS (`--https`); bytes are the plaintext's.
    pub https: ProtoCounters,
    /// QUIC (`--quic`): requests are calls (streams) answered; bytes are the UDP
    /// datagrams' of each connection, added when it closes.
    pub quic: ProtoCounters,
    /// The `--quic` listener's handshakes.
    pub quic_handshakes: HandshakeCounters,
    /// The `--tls` listener's handshakes.
    pub tls_handshakes: HandshakeCounters,
    /// The `--https` listener's handshakes.
    pub https_handshakes: HandshakeCounters,
    /// HTTP/2 connections and their streams (a subset of `http`).
    pub http2: Http2Counters,
    /// DNS queries by type and answers by code.
    pub dns_detail: DnsCounters,
    /// gRPC on the HTTP listener.
    pub grpc: GrpcCounters,
    /// WSTest's calls under `/rpc`, by encoding and operation ([`Stats::rpc`]).
    rpc: [[RpcCounters; Operation::ALL.len()]; EncodingKind::ALL.len()],
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
            budget: Arc::new(Budget::new(settings.max_buffered)),
            settings,
            tcp: ProtoCounters::default(),
            http: ProtoCounters::default(),
            unix: ProtoCounters::default(),
            udp: ProtoCounters::default(),
            dns: ProtoCounters::default(),
            tls: ProtoCounters::default(),
            https: ProtoCounters::default(),
            quic: ProtoCounters::default(),
            quic_handshakes: HandshakeCounters::default(),
            tls_handshakes: HandshakeCounters::default(),
            https_handshakes: HandshakeCounters::default(),
            http2: Http2Counters::default(),
            dns_detail: DnsCounters::default(),
            grpc: GrpcCounters::default(),
            rpc: Default::default(),
            dns_answered: AtomicU64::new(0),
            dns_delayed: AtomicU64::new(0),
            dns_dropped: AtomicU64::new(0),
            rejects: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }

    /// The counters of WSTest's calls of `op` in `encoding`.
    pub fn rpc(&self, encoding: EncodingKind, op: Operation) -> &RpcCounters {
        let e = usize::from(encoding.code()) - 1;
        &self.rpc[e][usize::from(op.code()) - 1]
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
            tls: proto(&self.tls),
            https: proto(&self.https),
            tls_handshakes: self.tls_handshakes.snapshot(),
            https_handshakes: self.https_handshakes.snapshot(),
            quic: proto(&self.quic),
            quic_handshakes: self.quic_handshakes.snapshot(),
            http2: Http2Snapshot {
                connections_total: self.http2.connections.load(Relaxed),
                streams_total: self.http2.streams_total.load(Relaxed),
                streams_open: self.http2.streams_open.load(Relaxed),
                streams_max_per_connection: self.http2.streams_max_per_connection.load(Relaxed),
            },
            dns_queries_by_type: DnsCounters::names(&DNS_TYPES, &self.dns_detail.by_type),
            dns_answers_by_code: DnsCounters::names(&DNS_CODES, &self.dns_detail.by_code),
            dns_truncated: self.dns_detail.truncated.load(Relaxed),
            dns_tcp_queries: self.dns_detail.tcp.load(Relaxed),
            grpc: GrpcSnapshot {
                calls: self.grpc.calls.load(Relaxed),
                messages: self.grpc.messages.load(Relaxed),
            },
            rpc: self.rpc_snapshot(),
            dns_answered: self.dns_answered.load(Relaxed),
            dns_delayed: self.dns_delayed.load(Relaxed),
            dns_dropped: self.dns_dropped.load(Relaxed),
            buffered_bytes: self.budget.held(),
            buffered_bytes_peak: self.budget.peak(),
            rejected: Reject::ALL
                .iter()
                .map(|&k| (k.name().to_string(), self.rejects[k as usize].load(Relaxed)))
                .collect(),
            process: crate::host::process_cost(),
            threads_cpu: crate::host::threads_cpu(&super::THREAD_NAMES),
        }
    }
}

/// HTTP/2's own counters: its connections are also counted in [`Stats::http`], and a
/// stream is one request being answered (from its headers being handed to the server until
/// its reply has been handed back, or the client reset it).
#[derive(Debug, Default)]
pub struct Http2Counters {
    /// HTTP/2 connections served (the preface arrived).
    pub connections: AtomicU64,
    /// Streams (requests) taken in.
    pub streams_total: AtomicU64,
    /// Streams being answered now, over all connections.
    pub streams_open: AtomicU64,
    /// The most streams ever being answered at once on one connection.
    pub streams_max_per_connection: AtomicU64,
}

impl Http2Counters {
    /// Counts a stream opened on a connection that now has `on_connection` open.
    pub fn stream_opened(&self, on_connection: u64) {
        self.streams_total.fetch_add(1, Relaxed);
        self.streams_open.fetch_add(1, Relaxed);
        self.streams_max_per_connection
            .fetch_max(on_connection, Relaxed);
    }

    /// Counts a stream's end.
    pub fn stream_closed(&self) {
        self.streams_open.fetch_sub(1, Relaxed);
    }
}

/// The query types the DNS counters tell apart; any other type counts as `other`.
pub const DNS_TYPES: [&str; 3] = ["a", "aaaa", "other"];
/// The answer codes the DNS counters tell apart (lower-case RFC 1035/6895 mnemonics); any
/// other code counts as `other`.
pub const DNS_CODES: [&str; 6] = [
    "noerror", "nxdomain", "refused", "formerr", "notimp", "other",
];

/// The DNS responder's detail: queries by type, answers by code, truncated answers and
/// queries that came over TCP.
#[derive(Debug, Default)]
pub struct DnsCounters {
    pub by_type: [AtomicU64; DNS_TYPES.len()],
    pub by_code: [AtomicU64; DNS_CODES.len()],
    /// UDP answers sent truncated (`--dns-truncate`).
    pub truncated: AtomicU64,
    /// Queries that came over TCP.
    pub tcp: AtomicU64,
}

impl DnsCounters {
    /// Counts one query, by its type (`None`: it asked nothing).
    pub fn query(&self, rtype: Option<hickory_proto::rr::RecordType>, over_tcp: bool) {
        use hickory_proto::rr::RecordType;
        let i = match rtype {
            Some(RecordType::A) => 0,
            Some(RecordType::AAAA) => 1,
            _ => 2,
        };
        self.by_type[i].fetch_add(1, Relaxed);
        if over_tcp {
            self.tcp.fetch_add(1, Relaxed);
        }
    }

    /// Counts one answer, by its code.
    pub fn answer(&self, code: hickory_proto::op::ResponseCode) {
        use hickory_proto::op::ResponseCode;
        let i = match code {
            ResponseCode::NoError => 0,
            ResponseCode::NXDomain => 1,
            ResponseCode::Refused => 2,
            ResponseCode::FormErr => 3,
            ResponseCode::NotImp => 4,
            _ => 5,
        };
        self.by_code[i].fetch_add(1, Relaxed);
    }

    fn names(names: &[&str], counts: &[AtomicU64]) -> BTreeMap<String, u64> {
        names
            .iter()
            .zip(counts)
            .map(|(n, c)| (n.to_string(), c.load(Relaxed)))
            .collect()
    }
}

/// [`Http2Counters`] at one instant.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Http2Snapshot {
    pub connections_total: u64,
    pub streams_total: u64,
    pub streams_open: u64,
    pub streams_max_per_connection: u64,
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

impl ProtoSnapshot {
    /// True when nothing was counted: a listener that was off or never called.
    pub fn is_unused(&self) -> bool {
        *self == ProtoSnapshot::default()
    }
}

/// WSTest's calls of one encoding and operation: bodies decoded and replies encoded, and
/// their bytes (bodies only: the HTTP heads are in `http`).
#[derive(Debug, Default)]
pub struct RpcCounters {
    pub decoded: AtomicU64,
    pub encoded: AtomicU64,
    pub bytes_in: AtomicU64,
    pub bytes_out: AtomicU64,
}

/// [`RpcCounters`] at one instant.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RpcSnapshot {
    pub decoded: u64,
    pub encoded: u64,
    pub bytes_in: u64,
    pub bytes_out: u64,
}

impl Stats {
    /// Every encoding's counters, by its name, then by operation: all present.
    fn rpc_snapshot(&self) -> BTreeMap<String, BTreeMap<String, RpcSnapshot>> {
        EncodingKind::ALL
            .iter()
            .map(|&enc| {
                let ops = Operation::ALL.iter().map(|&op| {
                    let c = self.rpc(enc, op);
                    let snap = RpcSnapshot {
                        decoded: c.decoded.load(Relaxed),
                        encoded: c.encoded.load(Relaxed),
                        bytes_in: c.bytes_in.load(Relaxed),
                        bytes_out: c.bytes_out.load(Relaxed),
                    };
                    (op.name().to_string(), snap)
                });
                (enc.name().to_string(), ops.collect())
            })
            .collect()
    }
}

/// The gRPC counters at one instant.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct GrpcSnapshot {
    pub calls: u64,
    pub messages: u64,
}

/// What the server's own threads spent between two snapshots, and the requests (frames
/// and HTTP requests) they took in meanwhile: a run's server cost.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ServerUse {
    pub requests: u64,
    pub cpu_user_s: f64,
    pub cpu_system_s: f64,
    /// The server process's resident memory at the later snapshot, bytes (the largest of
    /// the runs summed).
    pub rss_bytes: u64,
}

impl ServerUse {
    /// The use between the snapshots `before` and `after`.
    pub fn between(before: &StatsSnapshot, after: &StatsSnapshot) -> ServerUse {
        let requests = |s: &StatsSnapshot| s.tcp.requests + s.http.requests;
        let (a, b) = (&after.threads_cpu, &before.threads_cpu);
        ServerUse {
            requests: requests(after).saturating_sub(requests(before)),
            cpu_user_s: (a.cpu_user_s - b.cpu_user_s).max(0.0),
            cpu_system_s: (a.cpu_system_s - b.cpu_system_s).max(0.0),
            rss_bytes: after.process.rss_bytes,
        }
    }
}

impl std::ops::AddAssign for ServerUse {
    fn add_assign(&mut self, o: ServerUse) {
        self.requests += o.requests;
        self.cpu_user_s += o.cpu_user_s;
        self.cpu_system_s += o.cpu_system_s;
        self.rss_bytes = self.rss_bytes.max(o.rss_bytes);
    }
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
    /// The raw-frames-over-TLS listener (`--tls`); zeros from a server from before TLS.
    #[serde(default)]
    pub tls: ProtoSnapshot,
    /// The HTTPS listener (`--https`); zeros from a server from before TLS.
    #[serde(default)]
    pub https: ProtoSnapshot,
    /// The `--tls` listener's handshakes; zeros from a server from before TLS.
    #[serde(default)]
    pub tls_handshakes: HandshakeSnapshot,
    /// The `--https` listener's handshakes; zeros from a server from before TLS.
    #[serde(default)]
    pub https_handshakes: HandshakeSnapshot,
    /// The QUIC listener (`--quic`); left out of the JSON while unused, zeros from a
    /// server from before QUIC.
    #[serde(default, skip_serializing_if = "ProtoSnapshot::is_unused")]
    pub quic: ProtoSnapshot,
    /// The `--quic` listener's handshakes; left out while unused, as `quic`.
    #[serde(default, skip_serializing_if = "HandshakeSnapshot::is_unused")]
    pub quic_handshakes: HandshakeSnapshot,
    /// HTTP/2 streams. Zero in the JSON of a server from before this field.
    #[serde(default)]
    pub http2: Http2Snapshot,
    /// DNS queries by type ([`DNS_TYPES`]). Empty from a server from before this field.
    #[serde(default)]
    pub dns_queries_by_type: BTreeMap<String, u64>,
    /// DNS answers by code ([`DNS_CODES`]); an answer later dropped in sending counts too.
    #[serde(default)]
    pub dns_answers_by_code: BTreeMap<String, u64>,
    /// UDP answers sent truncated.
    #[serde(default)]
    pub dns_truncated: u64,
    /// DNS queries that came over TCP.
    #[serde(default)]
    pub dns_tcp_queries: u64,
    /// gRPC on the HTTP port; zero in the JSON of a server from before gRPC.
    #[serde(default)]
    pub grpc: GrpcSnapshot,
    /// WSTest's calls under `/rpc`, by encoding and operation, every one present; empty
    /// from a server from before the encodings.
    #[serde(default)]
    pub rpc: BTreeMap<String, BTreeMap<String, RpcSnapshot>>,
    pub dns_answered: u64,
    pub dns_delayed: u64,
    pub dns_dropped: u64,
    /// Bytes of request bodies and unsent replies held now, under `--max-buffered`
    /// (`settings.max_buffered`). Zero from a server from before the budget.
    #[serde(default)]
    pub buffered_bytes: u64,
    /// The most bytes ever held at once since the server started.
    #[serde(default)]
    pub buffered_bytes_peak: u64,
    /// Rejections and errors by kind (see [`Reject::name`]); every kind is present.
    pub rejected: BTreeMap<String, u64>,
    /// What the server process has cost so far. Zero in the JSON of a server from before
    /// this field (the report of an older server still reads).
    #[serde(default)]
    pub process: ProcessCost,
    /// CPU time of the server's own threads ([`super::THREAD_NAMES`]): its cost apart
    /// from a client sharing its process. Zero from a server from before this field.
    #[serde(default)]
    pub threads_cpu: crate::host::ThreadsCpu,
}

impl StatsSnapshot {
    /// The count for one kind.
    pub fn rejected(&self, kind: Reject) -> u64 {
        self.rejected.get(kind.name()).copied().unwrap_or(0)
    }
}
