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
        if let Some(fresh) = kind.fresh_twin() {
            let t = fresh.facts();
            assert!(
                f.persistent && !t.persistent,
                "{kind} and its fresh twin {fresh}"
            );
            assert_eq!((t.port, t.libcurl), (f.port, f.libcurl), "{kind}, {fresh}");
        }
        if let Some(unshared) = kind.unshared_twin() {
            let t = unshared.facts();
            assert!(f.shared && !t.shared && t.persistent, "{kind}, {unshared}");
            assert_eq!(t.port, f.port, "{kind}, {unshared}");
        }
        // The HTTP port is spoken to in HTTP/1.1 or HTTP/2, the QUIC port in HTTP/3 or raw
        // frames, the others in raw frames.
        let port_speaks = match f.alpn {
            Alpn::None => f.port != Port::Http,
            Alpn::Http1 | Alpn::H2 => f.port == Port::Http,
            Alpn::H3 => f.port == Port::Quic,
        };
        assert!(port_speaks, "{kind}: {:?} on {:?}", f.alpn, f.port);
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
            ("curl-reuse", "curl-fresh"),
            ("quic", "quic-connect"),
            ("h3", "h3-fresh")
        ]
    );
    assert_eq!(
        twins(TransportKind::unshared_twin),
        [("h2-mux", "h2"), ("grpc-mux", "grpc"), ("h3-mux", "h3")]
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

/// Every transport another one's facts name by name is registered, and each twin
/// relation holds: a same-host transport's network twin speaks the same frames and leaves
/// the host; a shared transport is weighed against transports on the same port.
#[test]
fn the_transports_facts_name_are_registered() {
    for kind in TransportKind::ALL {
        let f = kind.facts();
        let named = [f.fresh_twin, f.unshared_twin, f.network_twin, f.tcp_twin]
            .into_iter()
            .flatten()
            .chain(f.multiplexing_against.iter().copied());
        for name in named {
            assert!(
                TransportKind::from_name(name).is_some(),
                "{kind} names {name}, which is not registered"
            );
        }
        if let Some(net) = kind.network_twin() {
            let t = net.facts();
            assert!(
                f.round_trips.is_none() && t.round_trips.is_some(),
                "{kind}, {net}"
            );
            assert_eq!(
                (t.alpn, t.persistent),
                (f.alpn, f.persistent),
                "{kind}, {net}"
            );
        }
        // A QUIC transport's TCP twin reuses its connections as it does, and every QUIC
        // transport has one.
        assert_eq!(f.tcp_twin.is_some(), f.port == Port::Quic, "{kind}");
        if let Some(tcp) = kind.tcp_twin() {
            let t = tcp.facts();
            assert_ne!(t.port, Port::Quic, "{kind}, {tcp}");
            assert_eq!(
                (t.persistent, t.shared),
                (f.persistent, f.shared),
                "{kind}, {tcp}"
            );
        }
        let against = kind.multiplexing_against();
        assert_eq!(against.len(), f.multiplexing_against.len(), "{kind}");
        assert_eq!(f.shared, !against.is_empty(), "{kind}: shared, so weighed");
        for t in against {
            assert_eq!(t.port(), f.port, "{kind} against {t}");
        }
    }
    assert_eq!(
        TransportKind::ALL
            .into_iter()
            .filter_map(|k| Some((k.name(), k.network_twin()?.name())))
            .collect::<Vec<_>>(),
        [("unix", "tcp")]
    );
}

/// One registry line of `crates/client/src/transport/mod.rs`: its variant, module and
/// types (`Tcp = tcp::{Tcp, AsyncTcp}, "tcp";`).
struct Line {
    variant: String,
    module: String,
    types: Vec<String>,
}

/// The registry's lines, read from its source, and the text of the file without them.
fn registry() -> (Vec<Line>, String) {
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("crates/client/src/transport/mod.rs");
    let text = std::fs::read_to_string(path).unwrap();
    let start = text.find("\nregistry! {\n").expect("the registry");
    let end = start + text[start..].find("\n}\n").expect("its end");
    let mut lines = Vec::new();
    for l in text[start..end].lines().map(str::trim) {
        let Some((variant, rest)) = l.split_once(" = ") else {
            continue;
        };
        let (module, rest) = rest.split_once("::{").expect(l);
        let types = rest.split_once('}').expect(l).0;
        lines.push(Line {
            variant: variant.to_string(),
            module: module.to_string(),
            types: types.split(',').map(|t| t.trim().to_string()).collect(),
        });
    }
    let rest = format!("{}{}", &text[..start], &text[end..]);
    (lines, rest)
}

/// Whether `text` holds `word` followed by something that cannot continue a name.
fn names(text: &str, word: &str) -> bool {
    text.match_indices(word).any(|(at, _)| {
        let after = text[at + word.len()..].chars().next();
        !after.is_some_and(|c| c.is_alphanumeric() || c == '_')
    })
}

/// Adding a transport touches its file and one registry line: outside them no code in
/// src/ (the crates' and the root package's) names its `TransportKind` variant, and no
/// other file under `transport/` names its types. Tests may run transports by name.
#[test]
fn only_its_file_and_the_registry_name_a_transport() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let (lines, registry_file) = registry();
    assert_eq!(
        lines.len(),
        TransportKind::ALL.len(),
        "a line per transport"
    );
    let mut files = Vec::new();
    let mut dirs = vec![root.join("src")];
    for c in std::fs::read_dir(root.join("crates")).unwrap() {
        dirs.push(c.unwrap().path().join("src"));
    }
    while let Some(dir) = dirs.pop() {
        for e in std::fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                files.push(p);
            }
        }
    }
    assert!(files.len() > 100, "only {} files found", files.len());
    let transport_dir = root.join("crates/client/src/transport");
    let mut bad = Vec::new();
    for file in &files {
        let text = if file.ends_with("crates/client/src/transport/mod.rs") {
            registry_file.clone()
        } else {
            std::fs::read_to_string(file).unwrap()
        };
        for line in &lines {
            if *file == transport_dir.join(format!("{}.rs", line.module)) {
                continue;
            }
            let variant = format!("TransportKind::{}", line.variant);
            if names(&text, &variant) {
                bad.push(format!("{}: {variant}", file.display()));
            }
            for ty in &line.types {
                let path = format!("{}::{ty}", line.module);
                if names(&text, &path) {
                    bad.push(format!("{}: {path}", file.display()));
                }
            }
        }
    }
    assert!(
        bad.is_empty(),
        "transports named outside their files:\n{}",
        bad.join("\n")
    );
}

/// Each transport's file holds its own expected facts in a unit test
/// (`transport::expect_facts`), so a new transport states them where it is written.
#[test]
fn each_transport_file_tests_its_own_facts() {
    let (lines, _) = registry();
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("crates/client/src/transport");
    for (line, kind) in lines.iter().zip(TransportKind::ALL) {
        let text = std::fs::read_to_string(dir.join(format!("{}.rs", line.module))).unwrap();
        assert!(
            text.contains(&format!("expect_facts(\"{}\"", kind.name())),
            "{}.rs has no test of its facts",
            line.module
        );
    }
}
