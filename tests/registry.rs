//! Every registered transport answers what the rest of the program asks of it
//! (`transport::Facts`), its answers agree with each other, and the README's table of
//! transports says what the transports say of themselves.

use rpcbench::transport::tls::Alpn;
use rpcbench::transport::{Port, Tls, TransportKind};

#[test]
fn every_transport_answers_and_the_answers_agree() {
    for kind in TransportKind::ALL {
        let f = kind.facts();
        assert!(!f.summary.is_empty(), "{kind}: a summary for the README");
        // A shared connection is kept: one for the whole run.
        assert!(!f.shared || f.persistent, "{kind}: shared but not kept");
        // Round trips: one for a kept connection, two for a connection per call, none
        // known where a call never crosses a network.
        match (f.port, f.persistent) {
            (Port::Unix, _) => assert_eq!(f.round_trips, None, "{kind}"),
            (_, true) => assert_eq!(f.round_trips, Some(1.0), "{kind}"),
            (_, false) => assert_eq!(f.round_trips, Some(2.0), "{kind}"),
        }
        // A twin differs in one thing only.
        if let Some(fresh) = f.fresh_twin {
            let t = fresh.facts();
            assert!(
                f.persistent && !t.persistent,
                "{kind} and its fresh twin {fresh}"
            );
            assert_eq!((t.port, t.libcurl), (f.port, f.libcurl), "{kind}, {fresh}");
        }
        if let Some(unshared) = f.unshared_twin {
            let t = unshared.facts();
            assert!(f.shared && !t.shared && t.persistent, "{kind}, {unshared}");
            assert_eq!(t.port, f.port, "{kind}, {unshared}");
        }
        // The HTTP port is spoken to in HTTP/1.1 or HTTP/2, the others in raw frames.
        assert_eq!(f.port == Port::Http, f.alpn != Alpn::None, "{kind}");
        // Datagrams and Unix sockets stay plain; the rest speak TLS.
        let plain_only = matches!(f.port, Port::Unix | Port::Udp);
        assert_eq!(f.tls == Tls::None, plain_only, "{kind}");
        // The agent probes what its event loop runs against a peer's TCP or HTTP port.
        assert_eq!(
            kind.agent_probes(),
            kind.has_async() && matches!(f.port, Port::Tcp | Port::Http),
            "{kind}"
        );
    }
    // Each persistent transport with a fresh way of making the same call names it, and
    // each shared one its unshared twin.
    let twins = |pick: fn(TransportKind) -> Option<TransportKind>| -> Vec<(&str, &str)> {
        TransportKind::ALL
            .into_iter()
            .filter_map(|k| Some((k.name(), pick(k)?.name())))
            .collect()
    };
    assert_eq!(
        twins(TransportKind::fresh_twin),
        [
            ("tcp", "tcp-connect"),
            ("http-keepalive", "http-fresh"),
            ("curl-reuse", "curl-fresh")
        ]
    );
    assert_eq!(
        twins(TransportKind::unshared_twin),
        [("h2-mux", "h2"), ("grpc-mux", "grpc")]
    );
}

/// The README's table of transports has one row per registered transport, in registry
/// order, each the row the transport's own facts make (`TransportKind::readme_row`).
#[test]
fn the_readme_table_is_the_registry() {
    let readme = include_str!("../README.md");
    let table = readme
        .split("| name | what one call is | address modes | security modes |")
        .nth(1)
        .expect("the README's table of transports");
    let rows: Vec<&str> = table
        .lines()
        .skip(2)
        .take_while(|l| l.starts_with("| `"))
        .collect();
    let registry: Vec<String> = TransportKind::ALL
        .into_iter()
        .map(TransportKind::readme_row)
        .collect();
    assert_eq!(
        rows,
        registry,
        "the README's table of transports, as the registry makes it:\n{}",
        registry.join("\n")
    );
}
