//! The report's Encodings section: WSTest's table over every encoded run among the inputs
//! (`rpcbench --encoding`), and a chart of the server's CPU per call against the
//! message's size, a line per encoding (the shape of seed 001's figures 4 to 6, which put
//! PHP's and Axis2's SOAP engines side by side from 1 to 100 structs).

use super::svg::{self, CpuLine};
use crate::encoding::{EncodingKind, Message};
use crate::render::Grid;
use crate::report::RunRecord;
use crate::transport::TransportKind;
use crate::units;

/// The server's CPU per call is shown from this many 10 ms clock ticks up; below, `-`.
pub const MIN_TICKS: u64 = 100;

/// One encoded run, as the table shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct EncodingRow {
    pub transport: TransportKind,
    pub encoding: EncodingKind,
    pub message: Message,
    pub calls_per_s: f64,
    pub mean_us: Option<f64>,
    pub p99_us: Option<f64>,
    /// The client's CPU per call, user and system.
    pub client_cpu_us: Option<f64>,
    /// The server's, when it rests on [`MIN_TICKS`] or more.
    pub server_cpu_us: Option<f64>,
    pub request_bytes: Option<f64>,
    pub reply_bytes: Option<f64>,
    /// Wire bytes per call both ways (TCP_INFO or libcurl), where measured.
    pub wire_bytes: Option<f64>,
}

/// The encoded runs among `runs`, by transport, encoding and message.
pub fn rows<'a>(runs: impl Iterator<Item = &'a RunRecord>) -> Vec<EncodingRow> {
    let mut rows: Vec<EncodingRow> = runs
        .filter_map(|r| {
            let (encoding, message) = (r.encoding?, r.message?);
            let cpu = r.cpu_us_per_call.as_ref();
            let bytes = r.bytes_per_call.as_ref();
            let server_cpu_us = cpu.and_then(|c| {
                let enough = c.server_ticks.is_some_and(|t| t >= MIN_TICKS);
                enough.then(|| c.server_user.unwrap_or(0.0) + c.server_system.unwrap_or(0.0))
            });
            Some(EncodingRow {
                transport: r.transport,
                encoding,
                message,
                calls_per_s: r.calls_per_s,
                mean_us: r.latency_us.map(|l| l.mean),
                p99_us: r.latency_us.map(|l| l.p99),
                client_cpu_us: cpu.map(|c| c.client_user + c.client_system),
                server_cpu_us,
                request_bytes: bytes.map(|b| b.request_body),
                reply_bytes: bytes.map(|b| b.reply_body),
                wire_bytes: bytes.and_then(|b| Some(b.wire_sent? + b.wire_received?)),
            })
        })
        .collect();
    rows.sort_by(|a, b| {
        (a.transport, a.encoding, a.message).cmp(&(b.transport, b.encoding, b.message))
    });
    rows
}

/// The table as text cells.
pub fn grid(rows: &[EncodingRow]) -> Grid {
    let us = |v: Option<f64>| v.map_or("-".to_string(), |v| units::significant(v, 3));
    let bytes = |v: Option<f64>| v.map_or("-".to_string(), |b| format!("{b:.0}"));
    Grid {
        headers: [
            "transport",
            "encoding",
            "message",
            "calls/s",
            "mean µs",
            "p99 µs",
            "client cpu µs/call",
            "server cpu µs/call",
            "request B",
            "reply B",
            "wire B/call",
        ]
        .iter()
        .map(|h| h.to_string())
        .collect(),
        rows: rows
            .iter()
            .map(|r| {
                vec![
                    r.transport.to_string(),
                    r.encoding.to_string(),
                    r.message.to_string(),
                    units::rate(r.calls_per_s),
                    us(r.mean_us),
                    us(r.p99_us),
                    us(r.client_cpu_us),
                    us(r.server_cpu_us),
                    bytes(r.request_bytes),
                    bytes(r.reply_bytes),
                    bytes(r.wire_bytes),
                ]
            })
            .collect(),
    }
}

/// The chart of server CPU per call against structs per EchoStruct, over the transport
/// with the most such points, a line per encoding of two points or more; `None` when no
/// encoding has two.
pub fn cpu_chart(rows: &[EncodingRow]) -> Option<(TransportKind, Vec<CpuLine>)> {
    let lines_of = |transport: TransportKind| -> Vec<CpuLine> {
        EncodingKind::ALL
            .iter()
            .map(|&encoding| CpuLine {
                encoding,
                points: rows
                    .iter()
                    .filter(|r| r.transport == transport && r.encoding == encoding)
                    .filter_map(|r| match r.message {
                        Message::Struct(n) => Some((n as f64, r.server_cpu_us?)),
                        _ => None,
                    })
                    .collect(),
            })
            .filter(|l| l.points.len() >= 2)
            .collect()
    };
    TransportKind::ALL
        .iter()
        .map(|&t| (t, lines_of(t)))
        .filter(|(_, lines)| !lines.is_empty())
        .max_by_key(|(_, lines)| lines.iter().map(|l| l.points.len()).sum::<usize>())
}

/// What the chart's caption says.
pub const CPU_CAPTION: &str = "The server's CPU per call (its threads' user and system time over the calls it answered, from `/stats`), against the structs in an EchoStruct, a line per encoding; both axes log scale. A point rests on 100 clock ticks or more.";

/// The chart, rendered.
pub fn cpu_svg(transport: TransportKind, lines: &[CpuLine]) -> String {
    svg::encoding_cpu(lines, transport)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(encoding: EncodingKind, n: usize, cpu: Option<f64>) -> EncodingRow {
        EncodingRow {
            transport: TransportKind::from_name("tcp").unwrap(),
            encoding,
            message: Message::Struct(n),
            calls_per_s: 1000.0,
            mean_us: Some(10.0),
            p99_us: Some(20.0),
            client_cpu_us: Some(5.0),
            server_cpu_us: cpu,
            request_bytes: Some(100.0),
            reply_bytes: Some(100.0),
            wire_bytes: None,
        }
    }

    #[test]
    fn the_chart_has_a_line_per_encoding_of_two_points() {
        let rows = vec![
            row(EncodingKind::Soap, 1, Some(10.0)),
            row(EncodingKind::Soap, 100, Some(200.0)),
            row(EncodingKind::Json, 1, Some(3.0)),
            row(EncodingKind::Json, 100, None),
        ];
        let (transport, lines) = cpu_chart(&rows).expect("a chart");
        assert_eq!(transport, TransportKind::from_name("tcp").unwrap());
        assert_eq!(lines.len(), 1);
        assert_eq!(lines[0].points, vec![(1.0, 10.0), (100.0, 200.0)]);
        let svg = cpu_svg(transport, &lines);
        assert!(svg.contains("soap") && svg.ends_with("</svg>"));
        assert!(cpu_chart(&rows[2..]).is_none());
        let g = grid(&rows);
        assert_eq!(g.rows.len(), 4);
        assert_eq!(g.rows[3][7], "-");
    }
}
