//! What the rest of the program asks about a transport, as each transport answers it in
//! its own file ([`Facts`]), and what follows from the answers (`TransportKind`'s
//! `persistent`, `fresh_twin`, `readme_row` and the rest).

use super::{TransportKind, tls};
use crate::resolve::AddrMode;

/// What the rest of the program asks about a transport, answered by the transport itself
/// ([`Transport::FACTS`](super::Transport::FACTS), in its own file): adding a transport is its file and its registry
/// line, and nothing else. `tests/registry.rs` checks every registered transport's answers
/// against each other and against the README's table.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Facts {
    /// What one call is, as the README's table of transports says it.
    pub summary: &'static str,
    /// True when the transport keeps its connection from call to call (`connects` then
    /// equals the number of workers on a healthy run, or 1 when `shared`); false when it
    /// opens one per call.
    pub persistent: bool,
    /// True when all workers of a run share one connection (HTTP/2 multiplexing).
    pub shared: bool,
    /// The server listener it calls.
    pub port: Port,
    /// The application protocol it speaks there, as TLS's ALPN names it: `None` for the
    /// raw frames, `Http1`, or `H2` (HTTP/2 with prior knowledge in plain, and gRPC). The
    /// preflight probes the port in it, so that a front that speaks only HTTP/2 passes a
    /// run of HTTP/2 transports.
    pub alpn: tls::Alpn,
    /// Round trips one call waits for on a plain connection by IP (the round-trip model,
    /// `crates/analysis/src/model.rs`): a kept connection sends its request and waits for the reply, one; a
    /// connection per call first waits for the SYN-ACK, two (its close does not block);
    /// HTTP/2 and gRPC open their connection in the warm-up, and a call is one stream, one.
    /// `None` where the call never crosses a network (`unix`).
    pub round_trips: Option<f64>,
    /// Which security modes it runs in.
    pub tls: Tls,
    /// For a persistent transport, the name of the one that makes the same call on a new
    /// connection each time: the same protocol and client library, so the pair differs in
    /// reuse alone. By name, so that a transport's file names no other transport's type
    /// ([`TransportKind::fresh_twin`] reads it back; `tests/registry.rs` checks each name).
    pub fresh_twin: Option<&'static str>,
    /// For a shared-connection transport, the name of the one that makes the same call on a
    /// connection per worker: the pair differs in multiplexing alone.
    pub unshared_twin: Option<&'static str>,
    /// For a transport whose calls never leave the host, the name of the network transport
    /// that makes the same call: the physics check holds it no slower than that one.
    pub network_twin: Option<&'static str>,
    /// For a QUIC transport, the name of the one that makes the same call over TCP, with
    /// the same reuse: the findings weigh QUIC's handshake and its user-space CPU against
    /// it (`quic`: `tcp`; `h3`: `h2`; `h3-fresh`: `http-fresh`, as HTTP/2 has no
    /// connection-per-call transport).
    pub tcp_twin: Option<&'static str>,
    /// For a shared-connection transport, the names of the runs its multiplexing finding
    /// weighs it against at equal workers, in the order the finding names them.
    pub multiplexing_against: &'static [&'static str],
    /// Open files a worker keeps besides its socket on the blocking engine (a libcurl
    /// handle's wake-up pair, hyper's runtime): what `--concurrency` is checked against.
    pub files_per_worker: u64,
    /// True when libcurl makes the calls: the heading names the libcurl linked.
    pub libcurl: bool,
    /// The encodings its calls can carry (`--encoding`): every one over HTTP, none over
    /// UDP.
    pub encodings: &'static [crate::encoding::EncodingKind],
    /// True when a run without `--transports` includes it.
    pub by_default: bool,
}

impl Facts {
    /// The answers most transports share, for `..Facts::DEFAULT`: every security mode, no
    /// twin, no files besides the socket. A transport names the rest.
    pub const DEFAULT: Facts = Facts {
        summary: "",
        persistent: true,
        shared: false,
        port: Port::Tcp,
        alpn: tls::Alpn::None,
        round_trips: Some(1.0),
        tls: Tls::All,
        fresh_twin: None,
        unshared_twin: None,
        network_twin: None,
        tcp_twin: None,
        multiplexing_against: &[],
        files_per_worker: 0,
        libcurl: false,
        encodings: &[],
        by_default: true,
    };
}

/// The security modes a transport runs in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tls {
    /// Plain only: `udp` and `unix` (DTLS is out of scope, and a Unix socket never leaves
    /// the host).
    None,
    /// Plain and the full handshakes, not the resume modes: `curl-fresh`, whose new handle
    /// per call keeps no TLS session to resume (libcurl keeps them per handle).
    Full,
    /// Every security mode over TCP: all but `tls13-0rtt`, whose early data only the QUIC
    /// transports send.
    All,
    /// TLS 1.3 always, as QUIC builds it in: `plain` runs as `tls13` (the run's rows say
    /// so), the TLS 1.3 modes run as asked, the TLS 1.2 modes not at all.
    Quic,
}

/// Open files of one tokio runtime, counted in `/proc/PID/fd` (tokio 1.54): two epoll
/// instances, the eventfd that wakes it and a copy of the signal driver's socket. Every
/// event-loop thread has one, and so has every worker of a transport that drives an async
/// client from a blocking worker (`h2`, `grpc`, `grpc-stream`).
pub const FILES_PER_RUNTIME: u64 = 4;

/// Open files of one libcurl easy handle besides its connection, counted the same way:
/// the socket pair its internal multi handle keeps for wake-ups.
pub const FILES_PER_CURL_HANDLE: u64 = 2;

impl TransportKind {
    /// True when the transport keeps one connection per worker, so `connects` should equal
    /// the number of workers on a healthy run.
    pub const fn persistent(self) -> bool {
        self.facts().persistent
    }

    /// True when all workers of a run share one connection, so `connects` is 1 on a
    /// healthy run whatever the number of workers.
    pub const fn shared(self) -> bool {
        self.facts().shared
    }

    /// Which of the server's ports the transport calls.
    pub const fn port(self) -> Port {
        self.facts().port
    }

    /// True when the transport runs when `security` is asked for.
    pub fn runs_secured(self, security: tls::Security) -> bool {
        self.security_in(security).is_some()
    }

    /// The security mode its run has when `security` is asked for: `security` itself,
    /// `tls13` for a transport with TLS built in asked for `plain` (QUIC), or `None` when
    /// it does not run in it.
    pub fn security_in(self, security: tls::Security) -> Option<tls::Security> {
        use tls::Security as S;
        match (self.facts().tls, security) {
            (Tls::Quic, S::Plain) => Some(S::Tls13),
            (Tls::Quic, S::Tls12 | S::Tls12Resume) => None,
            // Early data needs QUIC's own 0-RTT here: over TCP no transport sends it.
            (Tls::All | Tls::Full, S::Tls13ZeroRtt) => None,
            (_, S::Plain) | (Tls::All | Tls::Quic, _) => Some(security),
            (Tls::None, _) => None,
            (Tls::Full, _) => (!security.resumes()).then_some(security),
        }
    }

    /// True when `rpcbench agent` may probe it: it runs on the agent's event loop and
    /// calls a port a peer's echo server has by default.
    pub fn agent_probes(self) -> bool {
        self.has_async() && matches!(self.port(), Port::Tcp | Port::Http)
    }

    /// The connections a healthy run opens, warm-up included: one per call for fresh
    /// transports, one per worker for persistent ones, one in all for shared ones.
    pub fn expected_connects(self, workers: usize, calls_and_warmup: u64) -> u64 {
        if self.shared() {
            1
        } else if self.persistent() {
            workers as u64
        } else {
            calls_and_warmup
        }
    }

    /// The transports a run without `--transports` makes, in registry order.
    pub fn by_default() -> Vec<TransportKind> {
        Self::ALL
            .into_iter()
            .filter(|k| k.facts().by_default)
            .collect()
    }

    /// Parses a stable name back.
    pub fn from_name(name: &str) -> Option<TransportKind> {
        Self::ALL.into_iter().find(|k| k.name() == name)
    }

    /// The server listener it calls in a security mode (TLS or not).
    pub fn listener(self, tls: bool) -> crate::listener::Listener {
        use crate::listener::Listener;
        match (self.port(), tls) {
            (Port::Tcp, false) => Listener::Tcp,
            (Port::Tcp, true) => Listener::Tls,
            (Port::Http, false) => Listener::Http,
            (Port::Http, true) => Listener::Https,
            (Port::Udp, _) => Listener::Udp,
            (Port::Unix, _) => Listener::Unix,
            (Port::Quic, _) => Listener::Quic,
        }
    }

    /// True when the transport speaks HTTP (and so uses the server's HTTP port).
    pub fn is_http(self) -> bool {
        self.port() == Port::Http
    }

    /// True when libcurl makes the calls (the heading then names the libcurl linked).
    pub fn is_curl(self) -> bool {
        self.facts().libcurl
    }

    /// The transport's row in the README's table of transports: its name, what one call
    /// is, and the address and security modes it runs in (`tests/registry.rs` checks the
    /// table against these rows).
    pub fn readme_row(self) -> String {
        use clap::ValueEnum;
        let facts = self.facts();
        let modes = match facts.port {
            // A path has no name to look up: the other modes would be the same run.
            Port::Unix => "`ip`".to_string(),
            _ => format!("all {}", number_word(AddrMode::value_variants().len())),
        };
        let security = match facts.tls {
            Tls::None => "`plain`".to_string(),
            Tls::Full => tls::Security::value_variants()
                .iter()
                .filter(|&&s| self.runs_secured(s))
                .map(|s| format!("`{s}`"))
                .collect::<Vec<_>>()
                .join(", "),
            Tls::All => {
                let not: Vec<String> = tls::Security::value_variants()
                    .iter()
                    .filter(|&&s| !self.runs_secured(s))
                    .map(|s| format!("`{s}`"))
                    .collect();
                format!("all but {}", not.join(", "))
            }
            Tls::Quic => {
                tls::Security::value_variants()
                    .iter()
                    .filter(|&&s| self.security_in(s) == Some(s))
                    .map(|s| format!("`{s}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
                    + " (`plain` runs as `tls13`)"
            }
        };
        let opt_in = if facts.by_default {
            ""
        } else {
            "; not in the default run: name it with `--transports`"
        };
        format!(
            "| `{}` | {}{opt_in} | {modes} | {security} |",
            self.name(),
            facts.summary
        )
    }

    /// The transport that makes the same call on a new connection each time
    /// ([`Facts::fresh_twin`]).
    pub fn fresh_twin(self) -> Option<TransportKind> {
        self.facts().fresh_twin.and_then(Self::from_name)
    }

    /// The transport that makes the same call on a connection per worker
    /// ([`Facts::unshared_twin`]).
    pub fn unshared_twin(self) -> Option<TransportKind> {
        self.facts().unshared_twin.and_then(Self::from_name)
    }

    /// The transport that makes the same call over TCP as this QUIC one
    /// ([`Facts::tcp_twin`]).
    pub fn tcp_twin(self) -> Option<TransportKind> {
        self.facts().tcp_twin.and_then(Self::from_name)
    }

    /// The network transport that makes the same call as this same-host one
    /// ([`Facts::network_twin`]).
    pub fn network_twin(self) -> Option<TransportKind> {
        self.facts().network_twin.and_then(Self::from_name)
    }

    /// The runs a shared transport's multiplexing finding weighs it against
    /// ([`Facts::multiplexing_against`]).
    pub fn multiplexing_against(self) -> Vec<TransportKind> {
        let names = self.facts().multiplexing_against;
        names.iter().filter_map(|n| Self::from_name(n)).collect()
    }

    /// True when the transport opens a new connection for every call (neither kept nor
    /// shared).
    pub fn fresh(self) -> bool {
        !self.persistent() && !self.shared()
    }

    /// True when its calls can carry `encoding` (see [`Facts::encodings`]).
    pub fn carries(self, encoding: crate::encoding::EncodingKind) -> bool {
        self.facts().encodings.contains(&encoding)
    }
}

/// A small count in words, as the README's table says it.
fn number_word(n: usize) -> String {
    const WORDS: [&str; 10] = [
        "zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine",
    ];
    WORDS
        .get(n)
        .map_or_else(|| n.to_string(), |w| w.to_string())
}

/// Which of the server's listeners a transport calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Port {
    /// The raw TCP frame listener (`--tcp-port`).
    Tcp,
    /// The HTTP listener (`--http-port`).
    Http,
    /// The Unix socket (`--unix`): a path, no port and no name to look up.
    Unix,
    /// The UDP listener (`--udp-port`).
    Udp,
    /// The QUIC listener (`--quic-port`), over UDP.
    Quic,
}

impl std::fmt::Display for TransportKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}
