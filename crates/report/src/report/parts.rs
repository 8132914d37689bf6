//! The parts of a run's record: its name lookups ([`LookupRecord`]), phases
//! ([`PhasesRecord`]), bytes ([`BytesPerCall`]) and CPU ([`CpuPerCall`]) per call.

use crate::measure::{Phase, Summary};
use crate::resolve::AddrMode;
use crate::runner::TransportRun;
use serde::{Deserialize, Serialize};

/// What one run's name lookups asked of DNS.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LookupRecord {
    /// Lookups made, one per new connection, warm-up included.
    pub lookups: u64,
    /// Queries the target's DNS responder (`rpcbench-echo --dns`) counted during the run,
    /// warm-up included, from its counters before and after; `null` when the server has
    /// no responder or could not be asked. Another client of the responder would count too.
    pub responder_queries: Option<u64>,
    /// Queries one lookup made: the responder's count per lookup when there is one, else
    /// rpcbench's own (`cached`, `uncached`, `uncached-search`); `null` in mode `system`
    /// without the responder, whose queries rpcbench cannot see.
    pub queries_per_lookup: Option<f64>,
    /// The names one lookup tries, in order, as the resolver configuration's search list
    /// and `ndots` make them (modes `system` and `uncached-search`); empty otherwise.
    pub search: Vec<String>,
}

impl LookupRecord {
    /// The record of a run that looked names up; `None` in mode `ip`.
    pub fn new(run: &TransportRun) -> Option<LookupRecord> {
        if run.mode == AddrMode::Ip {
            return None;
        }
        let per_lookup =
            |queries: u64| (run.dns_lookups > 0).then(|| queries as f64 / run.dns_lookups as f64);
        let queries_per_lookup = match (run.dns_responder_queries, run.mode) {
            (Some(q), _) => per_lookup(q),
            (None, AddrMode::System) => None,
            (None, _) => per_lookup(run.dns_queries),
        };
        Some(LookupRecord {
            lookups: run.dns_lookups,
            responder_queries: run.dns_responder_queries,
            queries_per_lookup,
            search: run.dns_search.clone(),
        })
    }
}

/// Phase summaries, one field per [`Phase`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PhasesRecord {
    pub dns: Option<Summary>,
    pub connect: Option<Summary>,
    /// The TLS handshake; absent from reports from before TLS.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<Summary>,
    /// QUIC's handshake (transport and TLS in one); absent from other transports' runs
    /// and from reports from before it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub handshake: Option<Summary>,
    pub first_byte: Option<Summary>,
    pub server: Option<Summary>,
    /// The client's encode and decode of an encoded call (`--encoding`), and the
    /// server's as it reported them; absent from runs without an encoding.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encode: Option<Summary>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decode: Option<Summary>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_decode: Option<Summary>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_encode: Option<Summary>,
}

impl PhasesRecord {
    /// The summary of one phase.
    pub fn get(&self, phase: Phase) -> Option<&Summary> {
        match phase {
            Phase::Dns => self.dns.as_ref(),
            Phase::Connect => self.connect.as_ref(),
            Phase::Tls => self.tls.as_ref(),
            Phase::Handshake => self.handshake.as_ref(),
            Phase::FirstByte => self.first_byte.as_ref(),
            Phase::Server => self.server.as_ref(),
            Phase::Encode => self.encode.as_ref(),
            Phase::Decode => self.decode.as_ref(),
            Phase::ServerDecode => self.server_decode.as_ref(),
            Phase::ServerEncode => self.server_encode.as_ref(),
        }
    }
}

/// Bytes per call of a run.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct BytesPerCall {
    /// The request body (the payload, or an encoded call's body), mean over ok calls.
    pub request_body: f64,
    /// The reply body, mean over ok calls.
    pub reply_body: f64,
    /// What the client's connections sent on the wire per call (`tcpi_bytes_acked` over
    /// the calls they carried, warm-up included: headers, framing and TLS, and one byte
    /// per SYN); for the libcurl transports libcurl's count over the ok calls; `null`
    /// where neither is had (`unix`, `udp`).
    pub wire_sent: Option<f64>,
    /// What they received (`tcpi_bytes_received`, no SYN), per call.
    pub wire_received: Option<f64>,
}

/// CPU per call of a run, in µs.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct CpuPerCall {
    /// The client's worker threads (`getrusage`), user and system, per measured call.
    pub client_user: f64,
    pub client_system: f64,
    /// The server's own threads (`/stats` `threads_cpu` before and after the run), per
    /// request it took in (warm-up included); `null` where it was not read (runs without
    /// an encoding, or a server that cannot be asked).
    pub server_user: Option<f64>,
    pub server_system: Option<f64>,
    /// The 10 ms clock ticks the server's figures rest on: below 100, read them as rough.
    pub server_ticks: Option<u64>,
    /// The server process's resident memory after the run (the largest over its rounds),
    /// bytes; with the server embedded in `rpcbench` (no target), that process holds the
    /// client too. Absent where the server was not read, and from reports from before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_rss_bytes: Option<u64>,
}

/// A run's achieved concurrency may fall this far below its workers (a tenth) before the
/// table says so: start-up and shutdown of the workers alone cost a few per cent of a short
/// run, and a tenth is well past that, while a paced run that leaves workers idle most of
/// the time is far below it.
pub const CONCURRENCY_SHORTFALL: f64 = 0.9;

/// A run's bytes per call: `None` without an ok call.
pub(super) fn bytes_per_call(run: &TransportRun) -> Option<BytesPerCall> {
    let t = &run.tally;
    let ok = (t.ok > 0).then_some(t.ok as f64)?;
    let tcp = &run.tcp_info;
    let carried = run.calls_carried as f64;
    // The kernel's count over every call the connections carried, else the HTTP
    // library's over the ok calls.
    let wire = |kernel: u64, library: u64| {
        if tcp.connections_sampled > 0 && kernel > 0 {
            Some(kernel as f64 / carried)
        } else {
            (library > 0).then(|| library as f64 / ok)
        }
    };
    Some(BytesPerCall {
        request_body: t.body_bytes_sent as f64 / ok,
        reply_body: t.body_bytes_received as f64 / ok,
        wire_sent: wire(tcp.bytes_acked, t.wire_bytes_sent),
        wire_received: wire(tcp.bytes_received, t.wire_bytes_received),
    })
}

/// A run's CPU per call: `None` without a call.
pub(super) fn cpu_per_call(run: &TransportRun) -> Option<CpuPerCall> {
    let t = &run.tally;
    let calls = (t.calls() > 0).then_some(t.calls() as f64)?;
    let server = run.server_use;
    let per = |cpu_s: f64| crate::report::sweep::per_request(cpu_s, server?.requests);
    Some(CpuPerCall {
        client_user: t.cpu_user.as_secs_f64() * 1e6 / calls,
        client_system: t.cpu_sys.as_secs_f64() * 1e6 / calls,
        server_user: server.and_then(|s| per(s.cpu_user_s)),
        server_system: server.and_then(|s| per(s.cpu_system_s)),
        server_ticks: server.map(|s| ((s.cpu_user_s + s.cpu_system_s) * 100.0).round() as u64),
        server_rss_bytes: server.map(|s| s.rss_bytes),
    })
}
