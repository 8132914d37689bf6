//! The echo server's listeners, named once for every layer: the server's flags and its
//! errors, the preflight's probes, the lines `rpcbench-echo` prints.

/// One of the echo server's listeners.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Listener {
    /// Raw frames over TCP (`rpcbench-echo --tcp`).
    Tcp,
    /// HTTP/1.1, HTTP/2 and gRPC (`--http`); also where `/stats` is read.
    Http,
    /// Raw frames over UDP (`--udp`).
    Udp,
    /// Raw frames over TLS (`--tls`).
    Tls,
    /// HTTP over TLS (`--https`).
    Https,
    /// Raw frames over a Unix socket (`--unix`), on this host.
    Unix,
    /// The DNS responder over UDP (`--dns`).
    Dns,
    /// The DNS responder over TCP, on the same port.
    DnsTcp,
    /// QUIC (`--quic`), over UDP: the raw frames by ALPN `rpcbench`.
    Quic,
}

impl Listener {
    /// The stable lowercase name: `rpcbench-echo`'s flag without its dashes (`dns-tcp`
    /// for the responder's TCP side).
    pub fn name(self) -> &'static str {
        match self {
            Listener::Tcp => "tcp",
            Listener::Http => "http",
            Listener::Udp => "udp",
            Listener::Tls => "tls",
            Listener::Https => "https",
            Listener::Unix => "unix",
            Listener::Dns => "dns",
            Listener::DnsTcp => "dns-tcp",
            Listener::Quic => "quic",
        }
    }

    /// True for the listeners that speak raw frames.
    pub fn speaks_frames(self) -> bool {
        matches!(
            self,
            Listener::Tcp | Listener::Udp | Listener::Tls | Listener::Unix | Listener::Quic
        )
    }

    /// True for the listeners on a UDP port (a firewall opens them as `udp`).
    pub fn over_udp(self) -> bool {
        matches!(self, Listener::Udp | Listener::Dns | Listener::Quic)
    }
}

impl std::fmt::Display for Listener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}
