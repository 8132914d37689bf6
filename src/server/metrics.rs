//! `GET /metrics`: the counters of `/stats` in Prometheus's text exposition format 0.0.4.
//!
//! The same snapshot as `/stats` ([`StatsSnapshot`]), written the way a Prometheus server
//! scrapes it: one family per quantity, the protocol and the reject kind as labels rather
//! than in the name, counters ending in `_total`, seconds and bytes as base units, and the
//! `process_*` families every Prometheus client library exports, so that dashboards made
//! for other servers read this one. No client library: the format is a few lines of text,
//! and the snapshot already holds every number (the README lists each family).

use super::stats::{HandshakeFailure, HandshakeSnapshot, ProtoSnapshot, Reject, StatsSnapshot};
use std::fmt::Write;

/// The `Content-Type` of the text format, version 0.0.4 (what Prometheus asks for first).
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Prefix of every family of this server's own (Prometheus: `<namespace>_`).
const NAMESPACE: &str = "rpcbench_echo";

/// A family's type, as its `# TYPE` line writes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// Only goes up (until the process restarts): a `_total`.
    Counter,
    /// Goes up and down: a level now.
    Gauge,
    /// Cumulative `_bucket{le=...}` samples ending in `+Inf`, then `_sum` and `_count`
    /// (the agent's latency histograms; the echo server has none).
    Histogram,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
            Kind::Histogram => "histogram",
        }
    }
}

/// Writes a family's `# HELP` and `# TYPE` lines; its samples follow ([`sample`]).
pub(crate) fn header(out: &mut String, name: &str, kind: Kind, help: &str) {
    // Writing to a String cannot fail.
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {}", kind.name());
}

/// Writes one sample line: `name{labels} value`, or `name value` without labels
/// (`labels` are `name="value"` pairs, already escaped).
pub(crate) fn sample(out: &mut String, name: &str, labels: &str, value: f64) {
    if labels.is_empty() {
        let _ = writeln!(out, "{name} {value}");
    } else {
        let _ = writeln!(out, "{name}{{{labels}}} {value}");
    }
}

/// Writes one family: its `# HELP` and `# TYPE` lines, then one sample per entry of
/// `samples` (labels as `name="value"` pairs, already escaped; none for a single sample).
pub(crate) fn family(
    out: &mut String,
    name: &str,
    kind: Kind,
    help: &str,
    samples: &[(&str, f64)],
) {
    header(out, name, kind, help);
    for (labels, value) in samples {
        sample(out, name, labels, *value);
    }
}

/// `{NAMESPACE}_{name}`.
fn own(name: &str) -> String {
    format!("{NAMESPACE}_{name}")
}

/// Escapes a label value: backslash, double quote and line feed, as the format requires.
pub(crate) fn escape_label(value: &str) -> String {
    value
        .replace('\\', r"\\")
        .replace('"', "\\\"")
        .replace('\n', r"\n")
}

/// The text of `GET /metrics` for `snap`.
pub fn render(snap: &StatsSnapshot) -> String {
    let mut out = String::with_capacity(4096);
    let protos: [(&str, &ProtoSnapshot); 7] = [
        (r#"protocol="tcp""#, &snap.tcp),
        (r#"protocol="http""#, &snap.http),
        (r#"protocol="unix""#, &snap.unix),
        (r#"protocol="tls""#, &snap.tls),
        (r#"protocol="https""#, &snap.https),
        (r#"protocol="udp""#, &snap.udp),
        (r#"protocol="dns""#, &snap.dns),
    ];
    // UDP and DNS (which is UDP) have datagrams, no connections, so their connection
    // samples would be zeros that look like a measurement.
    let connected = &protos[..5];
    let per_proto = |f: fn(&ProtoSnapshot) -> u64, of: &[(&'static str, &ProtoSnapshot)]| {
        of.iter()
            .map(|(l, p)| (*l, f(p) as f64))
            .collect::<Vec<_>>()
    };
    let version = format!(r#"version="{}""#, escape_label(&snap.settings.version));
    family(
        &mut out,
        &own("info"),
        Kind::Gauge,
        "Always 1; the labels say which rpcbench-echo this is.",
        &[(&version, 1.0)],
    );
    family(
        &mut out,
        &own("uptime_seconds"),
        Kind::Gauge,
        "Seconds since the server started.",
        &[("", snap.uptime_s)],
    );
    family(
        &mut out,
        &own("connections_open"),
        Kind::Gauge,
        "Connections open now.",
        &per_proto(|p| p.connections_open, connected),
    );
    family(
        &mut out,
        &own("max_connections"),
        Kind::Gauge,
        "Connections that may be open at once over all protocols (--max-connections).",
        &[("", snap.settings.max_connections as f64)],
    );
    family(
        &mut out,
        &own("buffered_bytes"),
        Kind::Gauge,
        "Bytes of request bodies and unsent replies held now, over all connections.",
        &[("", snap.buffered_bytes as f64)],
    );
    family(
        &mut out,
        &own("buffered_bytes_peak"),
        Kind::Gauge,
        "The most bytes of request bodies and unsent replies ever held at once.",
        &[("", snap.buffered_bytes_peak as f64)],
    );
    family(
        &mut out,
        &own("max_buffered_bytes"),
        Kind::Gauge,
        "The budget of bytes held at once; requests beyond it are refused (--max-buffered).",
        &[("", snap.settings.max_buffered as f64)],
    );
    family(
        &mut out,
        &own("write_timeout_seconds"),
        Kind::Gauge,
        "A connection whose reply takes no byte for this long is closed (--write-timeout).",
        &[("", snap.settings.write_timeout_s)],
    );
    family(
        &mut out,
        &own("idle_timeout_seconds"),
        Kind::Gauge,
        "A connection that sends nothing for this long is closed (--idle-timeout).",
        &[("", snap.settings.idle_timeout_s)],
    );
    family(
        &mut out,
        &own("http2_max_concurrent_streams"),
        Kind::Gauge,
        "HTTP/2 streams one connection may have open at once (SETTINGS_MAX_CONCURRENT_STREAMS).",
        &[("", f64::from(snap.settings.http2_max_streams))],
    );
    family(
        &mut out,
        &own("connections_total"),
        Kind::Counter,
        "Connections accepted, including those closed at once for the connection limit.",
        &per_proto(|p| p.connections_total, connected),
    );
    family(
        &mut out,
        &own("requests_total"),
        Kind::Counter,
        "Requests taken in: raw frames (TCP, Unix), HTTP requests (gRPC calls included), UDP datagrams, DNS queries.",
        &per_proto(|p| p.requests, &protos),
    );
    // Families of their own, not a `protocol="grpc"` sample of `requests_total`: a gRPC
    // call is an HTTP request there already, and a sum over protocols must not count it
    // twice.
    family(
        &mut out,
        &own("grpc_calls_total"),
        Kind::Counter,
        "gRPC calls taken in on the HTTP port (also counted as HTTP requests).",
        &[("", snap.grpc.calls as f64)],
    );
    family(
        &mut out,
        &own("grpc_messages_total"),
        Kind::Counter,
        "gRPC request messages answered: one per Call, one per message on a Stream.",
        &[("", snap.grpc.messages as f64)],
    );
    family(
        &mut out,
        &own("received_bytes_total"),
        Kind::Counter,
        "Bytes read from the network.",
        &per_proto(|p| p.bytes_in, &protos),
    );
    family(
        &mut out,
        &own("sent_bytes_total"),
        Kind::Counter,
        "Bytes written to the network.",
        &per_proto(|p| p.bytes_out, &protos),
    );
    let kinds: Vec<(String, f64)> = Reject::ALL
        .iter()
        .map(|&k| (format!(r#"kind="{}""#, k.name()), snap.rejected(k) as f64))
        .collect();
    let kinds: Vec<(&str, f64)> = kinds.iter().map(|(l, v)| (l.as_str(), *v)).collect();
    family(
        &mut out,
        &own("rejected_total"),
        Kind::Counter,
        "Requests or connections refused or ended by an error, by kind (as in /stats).",
        &kinds,
    );
    let listeners: [(&str, &HandshakeSnapshot); 2] = [
        ("tls", &snap.tls_handshakes),
        ("https", &snap.https_handshakes),
    ];
    let handshakes: Vec<(String, f64)> = listeners
        .iter()
        .flat_map(|(l, h)| {
            [("full", h.full), ("resumed", h.resumed)]
                .map(|(kind, n)| (format!(r#"listener="{l}",kind="{kind}""#), n as f64))
        })
        .collect();
    let handshakes: Vec<(&str, f64)> = handshakes.iter().map(|(l, v)| (l.as_str(), *v)).collect();
    family(
        &mut out,
        &own("tls_handshakes_total"),
        Kind::Counter,
        "TLS handshakes completed, by listener and kind (full, or resumed from a ticket or session ID).",
        &handshakes,
    );
    let failures: Vec<(String, f64)> = listeners
        .iter()
        .flat_map(|(l, h)| {
            HandshakeFailure::ALL.map(|k| {
                (
                    format!(r#"listener="{l}",kind="{}""#, k.name()),
                    h.failures(k) as f64,
                )
            })
        })
        .collect();
    let failures: Vec<(&str, f64)> = failures.iter().map(|(l, v)| (l.as_str(), *v)).collect();
    family(
        &mut out,
        &own("tls_handshake_failures_total"),
        Kind::Counter,
        "TLS handshakes that failed, by listener and kind (as in /stats).",
        &failures,
    );
    for (name, help, value) in [
        ("dns_answered_total", "DNS answers sent.", snap.dns_answered),
        (
            "dns_delayed_total",
            "DNS answers sent after --dns-delay.",
            snap.dns_delayed,
        ),
        (
            "dns_dropped_total",
            "DNS queries dropped on purpose by --dns-drop.",
            snap.dns_dropped,
        ),
        (
            "dns_truncated_total",
            "DNS answers sent truncated over UDP (--dns-truncate).",
            snap.dns_truncated,
        ),
        (
            "dns_tcp_queries_total",
            "DNS queries that came over TCP.",
            snap.dns_tcp_queries,
        ),
    ] {
        family(
            &mut out,
            &own(name),
            Kind::Counter,
            help,
            &[("", value as f64)],
        );
    }
    for (name, help, label, map) in [
        (
            "dns_queries_by_type_total",
            "DNS queries taken in, by query type (a, aaaa, other).",
            "type",
            &snap.dns_queries_by_type,
        ),
        (
            "dns_answers_by_code_total",
            "DNS answers made, by response code (noerror, nxdomain, refused, ...).",
            "code",
            &snap.dns_answers_by_code,
        ),
    ] {
        let labels: Vec<(String, f64)> = map
            .iter()
            .map(|(k, v)| (format!(r#"{label}="{}""#, escape_label(k)), *v as f64))
            .collect();
        let labels: Vec<(&str, f64)> = labels.iter().map(|(l, v)| (l.as_str(), *v)).collect();
        family(&mut out, &own(name), Kind::Counter, help, &labels);
    }
    let h2 = &snap.http2;
    for (name, kind, help, value) in [
        (
            "http2_connections_total",
            Kind::Counter,
            "HTTP/2 connections served (also counted under protocol=\"http\").",
            h2.connections_total,
        ),
        (
            "http2_streams_total",
            Kind::Counter,
            "HTTP/2 streams (requests) taken in.",
            h2.streams_total,
        ),
        (
            "http2_streams_open",
            Kind::Gauge,
            "HTTP/2 streams being answered now, over all connections.",
            h2.streams_open,
        ),
        (
            "http2_streams_max_per_connection",
            Kind::Gauge,
            "The most HTTP/2 streams ever being answered at once on one connection.",
            h2.streams_max_per_connection,
        ),
    ] {
        family(&mut out, &own(name), kind, help, &[("", value as f64)]);
    }
    process(&mut out, &snap.process);
    out
}

/// Writes the `process_*` families, with the process collector's names of the Prometheus
/// client libraries, so that dashboards made for other programs read ours.
pub(crate) fn process(out: &mut String, p: &crate::host::ProcessCost) {
    for (name, kind, help, value) in [
        (
            "process_cpu_seconds_total",
            Kind::Counter,
            "Total user and system CPU time spent in seconds.",
            p.cpu_user_s + p.cpu_system_s,
        ),
        (
            "process_resident_memory_bytes",
            Kind::Gauge,
            "Resident memory size in bytes.",
            p.rss_bytes as f64,
        ),
        (
            "process_start_time_seconds",
            Kind::Gauge,
            "Start time of the process since unix epoch in seconds.",
            p.start_time_s,
        ),
        (
            "process_threads",
            Kind::Gauge,
            "Number of OS threads in the process.",
            p.threads as f64,
        ),
        (
            "process_open_fds",
            Kind::Gauge,
            "Number of open file descriptors.",
            p.open_fds as f64,
        ),
        (
            "process_max_fds",
            Kind::Gauge,
            "Maximum number of open file descriptors (0: unlimited).",
            p.max_fds as f64,
        ),
    ] {
        family(out, name, kind, help, &[("", value)]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn families_have_help_type_and_samples() {
        let mut snap = StatsSnapshot::default();
        snap.settings.version = "0.1.0\"x\\".into();
        snap.tcp.requests = 7;
        snap.rejected.insert(Reject::IdleTimeout.name().into(), 2);
        snap.buffered_bytes = 4096;
        let text = render(&snap);
        assert!(text.contains(
            "# TYPE rpcbench_echo_buffered_bytes gauge\nrpcbench_echo_buffered_bytes 4096\n"
        ));
        assert!(text.contains("# TYPE rpcbench_echo_requests_total counter\n"));
        assert!(text.contains("rpcbench_echo_requests_total{protocol=\"tcp\"} 7\n"));
        assert!(text.contains("rpcbench_echo_rejected_total{kind=\"idle_timeout\"} 2\n"));
        assert!(text.contains(r#"rpcbench_echo_info{version="0.1.0\"x\\"} 1"#));
        // Every sample line belongs to the family announced just before it.
        let mut current = "";
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("# TYPE ") {
                current = rest.split(' ').next().unwrap();
            } else if !line.starts_with('#') {
                assert!(line.starts_with(current), "{line:?} after TYPE {current}");
            }
        }
    }
}
