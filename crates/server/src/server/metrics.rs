//! `GET /metrics`: the counters of `/stats` in Prometheus's text exposition format 0.0.4.
//!
//! The same snapshot as `/stats` ([`StatsSnapshot`]), written the way a Prometheus server
//! scrapes it: one family per quantity, the protocol and the reject kind as labels rather
//! than in the name, counters ending in `_total`, seconds and bytes as base units, and the
//! `process_*` families every Prometheus client library exports, so that dashboards made
//! for other servers read this one. No client library: the format is a few lines of text,
//! and the snapshot already holds every number (`docs/transports.md` lists each family).

use super::stats::{
    HandshakeFailure, HandshakeSnapshot, ProtoSnapshot, Reject, RpcSnapshot, StatsSnapshot,
};
use std::fmt::Write;

/// The `Content-Type` of the text format, version 0.0.4 (what Prometheus asks for first).
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Prefix of every family of this server's own (Prometheus: `<namespace>_`).
const NAMESPACE: &str = "rpcbench_echo";

/// A family's type, as its `# TYPE` line writes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
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
pub fn header(out: &mut String, name: &str, kind: Kind, help: &str) {
    // Writing to a String cannot fail.
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {}", kind.name());
}

/// Writes one sample line: `name{labels} value`, or `name value` without labels
/// (`labels` are `name="value"` pairs, already escaped).
pub fn sample(out: &mut String, name: &str, labels: &str, value: f64) {
    if labels.is_empty() {
        let _ = writeln!(out, "{name} {value}");
    } else {
        let _ = writeln!(out, "{name}{{{labels}}} {value}");
    }
}

/// Writes one family: its `# HELP` and `# TYPE` lines, then one sample per entry of
/// `samples` (labels as `name="value"` pairs, already escaped; none for a single sample).
pub fn family(out: &mut String, name: &str, kind: Kind, help: &str, samples: &[(&str, f64)]) {
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
pub fn escape_label(value: &str) -> String {
    value
        .replace('\\', r"\\")
        .replace('"', "\\\"")
        .replace('\n', r"\n")
}

/// Where a family's samples come from in the snapshot.
enum Samples {
    /// One sample without labels.
    One(fn(&StatsSnapshot) -> f64),
    /// One sample per protocol, labelled `protocol`; `connected`: only the protocols that
    /// have connections (UDP and DNS have datagrams, so their connection samples would be
    /// zeros that look like a measurement).
    PerProtocol {
        of: fn(&ProtoSnapshot) -> u64,
        connected: bool,
    },
    /// Samples with labels of their own (`name="value"` pairs, already escaped).
    Labelled(fn(&StatsSnapshot) -> Vec<(String, f64)>),
}

/// One family of `GET /metrics`: its name after [`NAMESPACE`], type, help and samples.
struct Family {
    name: &'static str,
    kind: Kind,
    help: &'static str,
    samples: Samples,
}

/// Every family of the echo server, in the order they are written (the `process_*`
/// families follow them).
const FAMILIES: &[Family] = &[
    Family {
        name: "info",
        kind: Kind::Gauge,
        help: "Always 1; the labels say which rpcbench-echo this is.",
        samples: Samples::Labelled(|s| {
            vec![(
                format!(r#"version="{}""#, escape_label(&s.settings.version)),
                1.0,
            )]
        }),
    },
    Family {
        name: "uptime_seconds",
        kind: Kind::Gauge,
        help: "Seconds since the server started.",
        samples: Samples::One(|s| s.uptime_s),
    },
    Family {
        name: "connections_open",
        kind: Kind::Gauge,
        help: "Connections open now.",
        samples: Samples::PerProtocol {
            of: |p| p.connections_open,
            connected: true,
        },
    },
    Family {
        name: "max_connections",
        kind: Kind::Gauge,
        help: "Connections that may be open at once over all protocols (--max-connections).",
        samples: Samples::One(|s| s.settings.max_connections as f64),
    },
    Family {
        name: "buffered_bytes",
        kind: Kind::Gauge,
        help: "Bytes of request bodies and unsent replies held now, over all connections.",
        samples: Samples::One(|s| s.buffered_bytes as f64),
    },
    Family {
        name: "buffered_bytes_peak",
        kind: Kind::Gauge,
        help: "The most bytes of request bodies and unsent replies ever held at once.",
        samples: Samples::One(|s| s.buffered_bytes_peak as f64),
    },
    Family {
        name: "max_buffered_bytes",
        kind: Kind::Gauge,
        help: "The budget of bytes held at once; requests beyond it are refused (--max-buffered).",
        samples: Samples::One(|s| s.settings.max_buffered as f64),
    },
    Family {
        name: "write_timeout_seconds",
        kind: Kind::Gauge,
        help: "A connection whose reply takes no byte for this long is closed (--write-timeout).",
        samples: Samples::One(|s| s.settings.write_timeout_s),
    },
    Family {
        name: "idle_timeout_seconds",
        kind: Kind::Gauge,
        help: "A connection that sends nothing for this long is closed (--idle-timeout).",
        samples: Samples::One(|s| s.settings.idle_timeout_s),
    },
    Family {
        name: "http2_max_concurrent_streams",
        kind: Kind::Gauge,
        help: "HTTP/2 streams one connection may have open at once (SETTINGS_MAX_CONCURRENT_STREAMS).",
        samples: Samples::One(|s| f64::from(s.settings.http2_max_streams)),
    },
    Family {
        name: "connections_total",
        kind: Kind::Counter,
        help: "Connections accepted, including those closed at once for the connection limit.",
        samples: Samples::PerProtocol {
            of: |p| p.connections_total,
            connected: true,
        },
    },
    Family {
        name: "requests_total",
        kind: Kind::Counter,
        help: "Requests taken in: raw frames (TCP, Unix), HTTP requests (gRPC calls included), UDP datagrams, DNS queries.",
        samples: Samples::PerProtocol {
            of: |p| p.requests,
            connected: false,
        },
    },
    // Families of their own, not a `protocol="grpc"` sample of `requests_total`: a gRPC
    // call is an HTTP request there already, and a sum over protocols must not count it
    // twice.
    Family {
        name: "grpc_calls_total",
        kind: Kind::Counter,
        help: "gRPC calls taken in on the HTTP port (also counted as HTTP requests).",
        samples: Samples::One(|s| s.grpc.calls as f64),
    },
    Family {
        name: "grpc_messages_total",
        kind: Kind::Counter,
        help: "gRPC request messages answered: one per Call, one per message on a Stream.",
        samples: Samples::One(|s| s.grpc.messages as f64),
    },
    Family {
        name: "rpc_calls_total",
        kind: Kind::Counter,
        help: "WSTest calls decoded under /rpc, by encoding and operation (also counted as HTTP requests).",
        samples: Samples::Labelled(|s| rpc_samples(s, |r| r.decoded)),
    },
    Family {
        name: "rpc_body_bytes_total",
        kind: Kind::Counter,
        help: "Body bytes of the WSTest calls under /rpc, by encoding, operation and direction (in: decoded requests; out: encoded replies).",
        samples: Samples::Labelled(|s| {
            let mut samples = rpc_samples(s, |r| r.bytes_in);
            for (labels, _) in &mut samples {
                labels.push_str(r#",direction="in""#);
            }
            let mut out = rpc_samples(s, |r| r.bytes_out);
            for (labels, _) in &mut out {
                labels.push_str(r#",direction="out""#);
            }
            samples.extend(out);
            samples
        }),
    },
    Family {
        name: "received_bytes_total",
        kind: Kind::Counter,
        help: "Bytes read from the network.",
        samples: Samples::PerProtocol {
            of: |p| p.bytes_in,
            connected: false,
        },
    },
    Family {
        name: "sent_bytes_total",
        kind: Kind::Counter,
        help: "Bytes written to the network.",
        samples: Samples::PerProtocol {
            of: |p| p.bytes_out,
            connected: false,
        },
    },
    Family {
        name: "rejected_total",
        kind: Kind::Counter,
        help: "Requests or connections refused or ended by an error, by kind (as in /stats).",
        samples: Samples::Labelled(|s| {
            Reject::ALL
                .iter()
                .map(|&k| (format!(r#"kind="{}""#, k.name()), s.rejected(k) as f64))
                .collect()
        }),
    },
    Family {
        name: "tls_handshakes_total",
        kind: Kind::Counter,
        help: "TLS handshakes completed, by listener and kind (full, or resumed from a ticket or session ID).",
        samples: Samples::Labelled(|s| {
            tls_listeners(s)
                .iter()
                .flat_map(|(l, h)| {
                    [("full", h.full), ("resumed", h.resumed)]
                        .map(|(kind, n)| (format!(r#"listener="{l}",kind="{kind}""#), n as f64))
                })
                .collect()
        }),
    },
    Family {
        name: "tls_handshake_failures_total",
        kind: Kind::Counter,
        help: "TLS handshakes that failed, by listener and kind (as in /stats).",
        samples: Samples::Labelled(|s| {
            tls_listeners(s)
                .iter()
                .flat_map(|(l, h)| {
                    HandshakeFailure::ALL.map(|k| {
                        (
                            format!(r#"listener="{l}",kind="{}""#, k.name()),
                            h.failures(k) as f64,
                        )
                    })
                })
                .collect()
        }),
    },
    Family {
        name: "dns_answered_total",
        kind: Kind::Counter,
        help: "DNS answers sent.",
        samples: Samples::One(|s| s.dns_answered as f64),
    },
    Family {
        name: "dns_delayed_total",
        kind: Kind::Counter,
        help: "DNS answers sent after --dns-delay.",
        samples: Samples::One(|s| s.dns_delayed as f64),
    },
    Family {
        name: "dns_dropped_total",
        kind: Kind::Counter,
        help: "DNS queries dropped on purpose by --dns-drop.",
        samples: Samples::One(|s| s.dns_dropped as f64),
    },
    Family {
        name: "dns_truncated_total",
        kind: Kind::Counter,
        help: "DNS answers sent truncated over UDP (--dns-truncate).",
        samples: Samples::One(|s| s.dns_truncated as f64),
    },
    Family {
        name: "dns_tcp_queries_total",
        kind: Kind::Counter,
        help: "DNS queries that came over TCP.",
        samples: Samples::One(|s| s.dns_tcp_queries as f64),
    },
    Family {
        name: "dns_queries_by_type_total",
        kind: Kind::Counter,
        help: "DNS queries taken in, by query type (a, aaaa, other).",
        samples: Samples::Labelled(|s| by_label("type", &s.dns_queries_by_type)),
    },
    Family {
        name: "dns_answers_by_code_total",
        kind: Kind::Counter,
        help: "DNS answers made, by response code (noerror, nxdomain, refused, ...).",
        samples: Samples::Labelled(|s| by_label("code", &s.dns_answers_by_code)),
    },
    Family {
        name: "http2_connections_total",
        kind: Kind::Counter,
        help: "HTTP/2 connections served (also counted under protocol=\"http\").",
        samples: Samples::One(|s| s.http2.connections_total as f64),
    },
    Family {
        name: "http2_streams_total",
        kind: Kind::Counter,
        help: "HTTP/2 streams (requests) taken in.",
        samples: Samples::One(|s| s.http2.streams_total as f64),
    },
    Family {
        name: "http2_streams_open",
        kind: Kind::Gauge,
        help: "HTTP/2 streams being answered now, over all connections.",
        samples: Samples::One(|s| s.http2.streams_open as f64),
    },
    Family {
        name: "http2_streams_max_per_connection",
        kind: Kind::Gauge,
        help: "The most HTTP/2 streams ever being answered at once on one connection.",
        samples: Samples::One(|s| s.http2.streams_max_per_connection as f64),
    },
];

/// The protocols of the snapshot with their `protocol` label, those with connections
/// first (the first five).
fn protocols(snap: &StatsSnapshot) -> [(&'static str, &ProtoSnapshot); 7] {
    [
        (r#"protocol="tcp""#, &snap.tcp),
        (r#"protocol="http""#, &snap.http),
        (r#"protocol="unix""#, &snap.unix),
        (r#"protocol="tls""#, &snap.tls),
        (r#"protocol="https""#, &snap.https),
        (r#"protocol="udp""#, &snap.udp),
        (r#"protocol="dns""#, &snap.dns),
    ]
}

/// How many of [`protocols`] have connections.
const CONNECTED: usize = 5;

/// The TLS listeners and their handshake counters.
fn tls_listeners(snap: &StatsSnapshot) -> [(&'static str, &HandshakeSnapshot); 2] {
    [
        ("tls", &snap.tls_handshakes),
        ("https", &snap.https_handshakes),
    ]
}

/// One sample per entry of `map`, labelled `label="key"`.
fn by_label(label: &str, map: &std::collections::BTreeMap<String, u64>) -> Vec<(String, f64)> {
    map.iter()
        .map(|(k, v)| (format!(r#"{label}="{}""#, escape_label(k)), *v as f64))
        .collect()
}

/// One sample per encoding and operation of `/stats`' `rpc`, of the counter `of`.
fn rpc_samples(s: &StatsSnapshot, of: fn(&RpcSnapshot) -> u64) -> Vec<(String, f64)> {
    s.rpc
        .iter()
        .flat_map(|(enc, ops)| {
            ops.iter().map(move |(op, r)| {
                let labels = format!(
                    r#"encoding="{}",operation="{}""#,
                    escape_label(enc),
                    escape_label(op)
                );
                (labels, of(r) as f64)
            })
        })
        .collect()
}

/// The text of `GET /metrics` for `snap`.
pub fn render(snap: &StatsSnapshot) -> String {
    let mut out = String::with_capacity(4096);
    for f in FAMILIES {
        let samples: Vec<(String, f64)> = match f.samples {
            Samples::One(value) => vec![(String::new(), value(snap))],
            Samples::PerProtocol { of, connected } => {
                let all = protocols(snap);
                let protos = if connected {
                    &all[..CONNECTED]
                } else {
                    &all[..]
                };
                protos
                    .iter()
                    .map(|(l, p)| (l.to_string(), of(p) as f64))
                    .collect()
            }
            Samples::Labelled(labelled) => labelled(snap),
        };
        let samples: Vec<(&str, f64)> = samples.iter().map(|(l, v)| (l.as_str(), *v)).collect();
        family(&mut out, &own(f.name), f.kind, f.help, &samples);
    }
    process(&mut out, &snap.process);
    out
}

/// Writes the `process_*` families ([`crate::host::ProcessCost::families`]).
pub fn process(out: &mut String, p: &crate::host::ProcessCost) {
    for f in p.families() {
        let kind = if f.counter {
            Kind::Counter
        } else {
            Kind::Gauge
        };
        family(out, f.name, kind, f.help, &[("", f.value)]);
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
