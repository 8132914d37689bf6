//! The preflight's findings as sentences: one line per case (the ports that met it, what
//! was seen, and what to do, ending with the `rpcbench-echo` command that starts the
//! server the run needs), and the one-line warnings that do not stop a run.

use super::{
    Address, Finding, Listener, PREFLIGHT_TIMEOUT, Reply, Seen, ServerIdentity, StartCommand,
    UDP_PROBES,
};
use crate::transport::TransportKind;
use crate::transport::tls::{Alpn, TlsFailure};
use crate::wire::WIRE_VERSION;

/// One line per case of `findings` (findings that saw the same thing share a line, naming
/// all their ports), each ending with what to do and `start`. `target` names the host.
pub fn problem_lines(target: &str, findings: &[&Finding], start: &StartCommand) -> Vec<String> {
    let mut cases: Vec<(&Seen, Vec<&Finding>)> = Vec::new();
    for f in findings {
        match cases.iter_mut().find(|(seen, _)| *seen == &f.seen) {
            Some((_, group)) => group.push(f),
            None => cases.push((&f.seen, vec![f])),
        }
    }
    cases
        .into_iter()
        .map(|(seen, group)| {
            let listeners: Vec<Listener> = group.iter().map(|f| f.probe.listener).collect();
            let http2 = group.iter().all(|f| f.probe.http2);
            format!(
                "{target} {}: {}; {}: {start}",
                places(&group),
                what(seen, &listeners, http2),
                fix(seen)
            )
        })
        .collect()
}

/// The warning for a listener no transport calls (only `/stats` is read there) that did
/// not pass: the run goes on without the server's version and counters.
pub fn stats_warning(target: &str, finding: &Finding) -> String {
    format!(
        "{target} {}: {}; the server's version and counters (GET /stats) are left out of the report",
        places(&[finding]),
        what(
            &finding.seen,
            &[finding.probe.listener],
            finding.probe.http2
        )
    )
}

/// The warning for a server of another version on the same wire (or one from before wire
/// versions); `None` for the client's own version.
pub fn version_warning(server: &ServerIdentity) -> Option<String> {
    if server.same_version() {
        return None;
    }
    let ours = env!("CARGO_PKG_VERSION");
    let wire = if server.wire == 0 {
        format!(
            "it is older than wire versions, so whether its wire matches is not known; rpcbench-echo {ours} there would be sure"
        )
    } else {
        format!("the same wire ({WIRE_VERSION}), so the run goes on")
    };
    Some(format!(
        "the server runs rpcbench-echo {}, this client rpcbench {ours}: {wire}",
        server.version
    ))
}

/// The ports (or socket) of some findings: `tcp port 7001 and http port 7080`. An HTTP
/// port probed in HTTP/2 says so, unless its HTTP/1.1 probe met the same and it is named
/// once for both.
fn places(group: &[&Finding]) -> String {
    let both = |f: &Finding| {
        group
            .iter()
            .any(|g| g.probe.at == f.probe.at && g.probe.http2 != f.probe.http2)
    };
    let names: Vec<String> = group
        .iter()
        .filter(|f| !(f.probe.http2 && both(f)))
        .map(|f| match &f.probe.at {
            Address::Socket(a) if f.probe.http2 => {
                format!("{} port {} (HTTP/2)", f.probe.listener.name(), a.port())
            }
            Address::Socket(a) => format!("{} port {}", f.probe.listener.name(), a.port()),
            Address::Path(p) => format!("unix socket {}", p.display()),
        })
        .collect();
    match names.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} and {last}", rest.join(", ")),
        _ => names.concat(),
    }
}

/// What was seen, in a few words; `http2` when it was seen in HTTP/2.
fn what(seen: &Seen, listeners: &[Listener], http2: bool) -> String {
    let timeout = format!("{} ms", PREFLIGHT_TIMEOUT.as_millis());
    let http = listeners
        .iter()
        .all(|l| matches!(l, Listener::Http | Listener::Https));
    let healthz = if http2 {
        "GET /healthz over HTTP/2"
    } else {
        "GET /healthz"
    };
    match seen {
        Seen::Refused => "connection refused: nothing listens there".into(),
        Seen::NoAnswer => format!(
            "no answer within {timeout}: a firewall drops the packets, or nothing is at that address"
        ),
        Seen::NoDatagramReply => format!(
            "no reply to {UDP_PROBES} probe datagrams within {timeout}, and no refusal: UDP has no handshake, so a firewall that drops them and a program that ignores the frame look alike"
        ),
        Seen::Unreachable(why) => format!("cannot connect: {why}"),
        Seen::NoSocket => "no socket there: nothing listens".into(),
        Seen::Silent => format!(
            "accepts connections but did not answer {} within {timeout}: not rpcbench-echo",
            if http { healthz } else { "a request frame" }
        ),
        Seen::Closed if http => format!("closed the connection without answering {healthz}: not an HTTP port of rpcbench-echo (its raw TCP port closes so)"),
        Seen::Closed => "closed the connection without answering a request frame: not rpcbench-echo".into(),
        Seen::NotEcho(Reply::Http { status }) if http => {
            format!("an HTTP server, but not rpcbench-echo (GET /healthz: {status})")
        }
        Seen::NotEcho(Reply::Http { status }) => format!(
            "answers a request frame in HTTP ({status}): an HTTP port, not rpcbench-echo's raw frames"
        ),
        Seen::NotEcho(Reply::HealthzBody) => {
            "an HTTP server, but not rpcbench-echo (GET /healthz is not `ok`)".into()
        }
        Seen::NotEcho(Reply::NoStats) => {
            "answers GET /healthz, but GET /stats is not rpcbench-echo's: not rpcbench-echo".into()
        }
        Seen::NotEcho(Reply::Tls) => "answers in TLS: a TLS port".into(),
        Seen::NotEcho(Reply::Http1Answer { status }) => format!(
            "answers HTTP/2's connection preface in HTTP/1.1 ({status}): it speaks HTTP/1.1 only, and the chosen HTTP/2 transports need HTTP/2"
        ),
        Seen::NotEcho(Reply::NoHttp2Alpn) => {
            "offers no HTTP/2 by ALPN (h2) in its TLS handshake, which the chosen HTTP/2 transports need".into()
        }
        Seen::OneHttpVersion { http2 } => format!(
            "answers as rpcbench-echo over {} but not over {}: a front (proxy, gateway) that speaks one HTTP version",
            http_version(*http2),
            http_version(!*http2)
        ),
        Seen::NotEcho(Reply::Bytes(bytes)) => format!(
            "answered with bytes that are not rpcbench-echo's (`{}`): not rpcbench-echo",
            bytes.escape_ascii()
        ),
        Seen::Tls(failure) => format!("the TLS handshake failed: {failure}"),
        Seen::OtherWire { version, wire } => format!(
            "rpcbench-echo {version}, whose wire ({wire}) differs from this client's ({WIRE_VERSION}, rpcbench {})",
            env!("CARGO_PKG_VERSION")
        ),
    }
}

/// `HTTP/2` or `HTTP/1.1`.
fn http_version(http2: bool) -> &'static str {
    if http2 { "HTTP/2" } else { "HTTP/1.1" }
}

/// The transports that speak HTTP/2 (or HTTP/1.1) to the HTTP port, as each says of itself.
fn speaking(http2: bool) -> String {
    let alpn = if http2 { Alpn::H2 } else { Alpn::Http1 };
    TransportKind::ALL
        .iter()
        .filter(|k| k.facts().alpn == alpn)
        .map(|k| k.name())
        .collect::<Vec<_>>()
        .join(", ")
}

/// What to do about it, up to the command that starts the server.
fn fix(seen: &Seen) -> String {
    let ours = env!("CARGO_PKG_VERSION");
    match seen {
        Seen::Refused | Seen::NoSocket => "start the server there".into(),
        Seen::NoDatagramReply => {
            "check that rpcbench-echo runs there with --udp on that port and that the firewall lets UDP through; or leave udp out with --transports".into()
        }
        Seen::NoAnswer | Seen::Unreachable(_) => {
            "check the address, open the port in the firewall there, and start the server if it is not running".into()
        }
        Seen::OneHttpVersion { http2 } => format!(
            "leave the transports that speak {} out with --transports ({}), or call rpcbench-echo's own HTTP port",
            http_version(!*http2),
            speaking(!*http2)
        ),
        Seen::NotEcho(Reply::Http1Answer { .. } | Reply::NoHttp2Alpn) => format!(
            "leave the HTTP/2 transports out with --transports ({}), or call rpcbench-echo's own HTTP port",
            speaking(true)
        ),
        Seen::Silent | Seen::Closed | Seen::NotEcho(_) => {
            "another program has the port: give rpcbench the ports rpcbench-echo listens on (rpcbench --tcp-port, --http-port ...), or start rpcbench-echo there".into()
        }
        Seen::Tls(TlsFailure::Untrusted) => {
            "give the server's CA with --ca (rpcbench-echo prints its path on its `ca` line), or start the server there".into()
        }
        Seen::Tls(TlsFailure::WrongName) => {
            "call it by a name its certificate covers (rpcbench-echo's `ca` line lists them), or start the server there".into()
        }
        Seen::Tls(TlsFailure::ClientCertRequired | TlsFailure::ClientCertRefused) => {
            "give --client-cert and --client-key signed by the CA of its --client-ca, or start the server there".into()
        }
        Seen::Tls(TlsFailure::NotTlsServer) => {
            "give the server's TLS ports (--tls-port, --https-port), or start the server with TLS there".into()
        }
        Seen::Tls(TlsFailure::Expired) => {
            "give the server a certificate valid now (rpcbench-echo --cert and --key), or start it without them to have one generated".into()
        }
        Seen::Tls(TlsFailure::VersionMismatch) => {
            "run the security modes of the TLS version the server speaks (--security), or start rpcbench-echo there, which speaks both".into()
        }
        Seen::Tls(_) => "start the server with TLS there".into(),
        Seen::OtherWire { .. } => format!("start rpcbench-echo {ours} there"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::preflight::Probe;
    use std::net::SocketAddr;

    fn finding(listener: Listener, port: u16, seen: Seen) -> Finding {
        Finding {
            probe: Probe {
                listener,
                at: Address::Socket(SocketAddr::from(([10, 0, 0, 2], port))),
                needed: true,
                http2: false,
                h3: false,
            },
            seen,
        }
    }

    #[test]
    fn one_line_per_case_naming_every_port_of_it() {
        let start = StartCommand::new(
            [10, 0, 0, 2].into(),
            &[(Listener::Tcp, Address::Socket(([10, 0, 0, 2], 7001).into()))],
        );
        // The HTTP port probed both ways, refused both ways: named once.
        let mut http2 = finding(Listener::Http, 7080, Seen::Refused);
        http2.probe.http2 = true;
        let findings = [
            finding(Listener::Tcp, 7001, Seen::Refused),
            finding(Listener::Http, 7080, Seen::Refused),
            http2,
            finding(Listener::Udp, 7002, Seen::NoDatagramReply),
        ];
        let refs: Vec<&Finding> = findings.iter().collect();
        let lines = problem_lines("10.0.0.2", &refs, &start);
        assert_eq!(lines.len(), 2, "{lines:#?}");
        assert_eq!(
            lines[0],
            "10.0.0.2 tcp port 7001 and http port 7080: connection refused: nothing listens there; start the server there: rpcbench-echo --tcp 0.0.0.0:7001"
        );
        assert!(
            lines[1].starts_with("10.0.0.2 udp port 7002: no reply to 3 probe datagrams within 500 ms, and no refusal"),
            "{}",
            lines[1]
        );
    }

    #[test]
    fn an_http2_probe_says_so() {
        let start = StartCommand::new(
            [10, 0, 0, 2].into(),
            &[(
                Listener::Http,
                Address::Socket(([10, 0, 0, 2], 7080).into()),
            )],
        );
        let mut closed = finding(Listener::Http, 7080, Seen::Closed);
        closed.probe.http2 = true;
        let lines = problem_lines("10.0.0.2", &[&closed], &start);
        assert!(
            lines[0].starts_with("10.0.0.2 http port 7080 (HTTP/2): closed the connection without answering GET /healthz over HTTP/2"),
            "{}",
            lines[0]
        );
        let one = finding(Listener::Http, 7080, Seen::OneHttpVersion { http2: true });
        let lines = problem_lines("10.0.0.2", &[&one], &start);
        assert!(
            lines[0].contains("answers as rpcbench-echo over HTTP/2 but not over HTTP/1.1")
                && lines[0].contains("(http-fresh, http-keepalive, curl-reuse, curl-fresh)"),
            "{}",
            lines[0]
        );
    }

    #[test]
    fn a_version_warning_only_for_another_version() {
        let ours = ServerIdentity {
            version: env!("CARGO_PKG_VERSION").into(),
            wire: WIRE_VERSION,
        };
        assert_eq!(version_warning(&ours), None);
        let other = ServerIdentity {
            version: "0.0.1".into(),
            ..ours
        };
        let line = version_warning(&other).unwrap();
        assert!(line.contains("rpcbench-echo 0.0.1") && line.contains("same wire"));
    }
}
