//! What a server is asked to do ([`ServerConfig`]): its listeners, limits and timeouts,
//! each setting's bounds and the check that holds a flag's value to them, and why a start
//! fails ([`StartServerError`]).

use super::unix::{DEFAULT_UNIX_MODE, UnixPathError};
use super::{TIMER_TICK, budget, dns, http, stats, tls};
use std::fmt::Debug;
use std::net::SocketAddr;
use std::ops::RangeInclusive;
use std::time::Duration;

/// The names of the server's threads: its runtime's (and a standalone server's main
/// thread, named after the binary), those of the raw TCP and Unix connections, and the
/// UDP listener's. `/stats` adds
/// up their CPU time (`threads_cpu`), which is the server's own cost even when it shares
/// a process with a client (`rpcbench` with no target).
pub const THREAD_NAMES: [&str; 5] = [
    "rpcbench-echo",
    "rpcbench-tcp",
    "rpcbench-unix",
    "rpcbench-udp",
    "rpcbench-tls",
];

/// Default longest `delay_us` a client may ask for (10 s).
pub const DEFAULT_MAX_DELAY: Duration = Duration::from_secs(10);
/// Default limit of connections open at once, over all protocols.
pub const DEFAULT_MAX_CONNECTIONS: usize = 10_000;
/// Default time a connection may stay silent before the server closes it (60 s).
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(60);
/// Default time a reply may wait with no byte taken by the client before its connection
/// is closed (30 s): far above what a working client on any link takes to read a 16 MiB
/// reply, and what nginx waits (`send_timeout 60s` between two writes) halved, since a
/// stalled reply here holds its share of the buffer budget.
pub const DEFAULT_WRITE_TIMEOUT: Duration = Duration::from_secs(30);
/// How long shutdown waits for requests in flight before giving up on them (5 s).
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// Shortest idle timeout: the HTTP watcher looks `http::IDLE_CHECKS_PER_TIMEOUT` times
/// per timeout on tokio's timer, whose tick is `TIMER_TICK`, so a shorter timeout could
/// not be kept (and a zero one would leave the watcher's interval without a period).
pub const MIN_IDLE_TIMEOUT: Duration = TIMER_TICK.saturating_mul(http::IDLE_CHECKS_PER_TIMEOUT);

/// Longest delay a request can ask for, about 71 minutes: `delay_us` is a u32 of
/// microseconds. A larger max delay would allow nothing more, and `/stats` reports delays
/// as a u64 of microseconds, which a larger value could overflow.
pub const DELAY_CEILING: Duration = Duration::from_micros(u32::MAX as u64);

/// Most connections that can be open at once: each is a file descriptor, a C `int`, so a
/// process can never hold more than this many.
pub const MAX_CONNECTIONS_CEILING: usize = i32::MAX as usize;

/// A setting outside what the server can honour.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{setting} is {value}, but it must be {allowed}")]
pub struct CheckSettingError {
    /// The setting's name in [`ServerConfig`] (`max_frame`) or [`dns::DnsConfig`] (`dns.ttl`).
    pub setting: &'static str,
    /// The value given.
    pub value: String,
    /// The values allowed, for a person: `from 1 to 2147483647`.
    pub allowed: String,
}

/// `value` when `range` holds it; otherwise the error for `setting`, whose allowed values
/// `allowed` describes.
pub fn within<T: PartialOrd + Debug>(
    setting: &'static str,
    value: T,
    range: RangeInclusive<T>,
    allowed: impl FnOnce() -> String,
) -> Result<T, CheckSettingError> {
    if range.contains(&value) {
        Ok(value)
    } else {
        Err(CheckSettingError {
            setting,
            value: format!("{value:?}"),
            allowed: allowed(),
        })
    }
}

/// Checks `max_frame`: a frame must be able to hold the smallest request.
pub fn check_max_frame(bytes: u32) -> Result<u32, CheckSettingError> {
    within(
        "max_frame",
        bytes,
        crate::wire::MIN_REQUEST_LEN..=u32::MAX,
        || {
            format!(
                "at least {} bytes, the smallest request",
                crate::wire::MIN_REQUEST_LEN
            )
        },
    )
}

/// Checks `max_delay`: zero (no delays) up to [`DELAY_CEILING`].
pub fn check_max_delay(delay: Duration) -> Result<Duration, CheckSettingError> {
    within("max_delay", delay, Duration::ZERO..=DELAY_CEILING, || {
        format!("at most {DELAY_CEILING:?}, the longest delay_us a request can carry")
    })
}

/// Checks `max_connections`: at least one, at most [`MAX_CONNECTIONS_CEILING`].
pub fn check_max_connections(n: usize) -> Result<usize, CheckSettingError> {
    within("max_connections", n, 1..=MAX_CONNECTIONS_CEILING, || {
        format!("from 1 to {MAX_CONNECTIONS_CEILING}")
    })
}

/// Checks `idle_timeout`: at least [`MIN_IDLE_TIMEOUT`]; there is no upper limit, a very
/// long one means never.
pub fn check_idle_timeout(timeout: Duration) -> Result<Duration, CheckSettingError> {
    within(
        "idle_timeout",
        timeout,
        MIN_IDLE_TIMEOUT..=Duration::MAX,
        || format!("at least {MIN_IDLE_TIMEOUT:?}"),
    )
}

/// Checks `write_timeout`: at least [`MIN_IDLE_TIMEOUT`], for the same reason (the HTTP
/// watcher keeps both).
pub fn check_write_timeout(timeout: Duration) -> Result<Duration, CheckSettingError> {
    within(
        "write_timeout",
        timeout,
        MIN_IDLE_TIMEOUT..=Duration::MAX,
        || format!("at least {MIN_IDLE_TIMEOUT:?}"),
    )
}

/// Checks `max_buffered`: at least [`budget::MIN_MAX_BUFFERED`], so a small request always
/// fits.
pub fn check_max_buffered(bytes: u64) -> Result<u64, CheckSettingError> {
    within(
        "max_buffered",
        bytes,
        budget::MIN_MAX_BUFFERED..=u64::MAX,
        || {
            format!(
                "at least {} bytes, the largest small request",
                budget::MIN_MAX_BUFFERED
            )
        },
    )
}

/// Checks `unix_mode`: permission bits only (0 to 0o777); setuid, setgid and sticky mean
/// nothing on a socket.
pub fn check_unix_mode(mode: u32) -> Result<u32, CheckSettingError> {
    within("unix_mode", mode, 0..=0o777, || {
        "from 0 to 0777 (octal)".into()
    })
}

/// Everything the server needs to know before it binds.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// Raw TCP listen address; `None` disables the listener.
    pub tcp: Option<SocketAddr>,
    /// HTTP listen address; `None` disables the listener.
    pub http: Option<SocketAddr>,
    /// Unix socket path for raw frames; `None` (the default) disables the listener.
    pub unix: Option<std::path::PathBuf>,
    /// Mode of the Unix socket file (permission bits, at most 0o777).
    pub unix_mode: u32,
    /// UDP listen address (one request per datagram); `None` disables the listener.
    pub udp: Option<SocketAddr>,
    /// Largest frame body (TCP) or request body (HTTP), and largest reply, in bytes.
    pub max_frame: u32,
    /// Largest `delay_us` honoured; above it the request gets status 2 (TCP) or 400 (HTTP).
    pub max_delay: Duration,
    /// Connections open at once over every protocol; more are closed at once.
    pub max_connections: usize,
    /// A connection that sends nothing for this long is closed.
    pub idle_timeout: Duration,
    /// A connection whose reply takes no byte for this long is closed.
    pub write_timeout: Duration,
    /// The most bytes of request bodies and unsent replies held at once, over every
    /// connection ([`budget`]).
    pub max_buffered: u64,
    /// The DNS responder; `None` (the default) leaves it off.
    pub dns: Option<dns::DnsConfig>,
    /// Raw frames over TLS listen address; `None` (the default) disables the listener.
    pub tls: Option<SocketAddr>,
    /// HTTPS (HTTP/1.1 and HTTP/2 by ALPN, gRPC) listen address; `None` (the default)
    /// disables the listener.
    pub https: Option<SocketAddr>,
    /// QUIC listen address (UDP; TLS 1.3 built in, raw frames by ALPN `rpcbench`);
    /// `None` (the default) disables the listener.
    pub quic: Option<SocketAddr>,
    /// Certificates, mTLS, resumption and the handshake timeout of the TLS and QUIC
    /// listeners.
    pub tls_settings: tls::TlsSettings,
    /// Answer every new QUIC client's first Initial with a Retry (address validation
    /// always, RFC 9000 §8.1.2), not only under a flood: each new connection's handshake
    /// then takes one more round trip.
    pub quic_retry: bool,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            tcp: Some(SocketAddr::from(([127, 0, 0, 1], 7001))),
            http: Some(SocketAddr::from(([127, 0, 0, 1], 7080))),
            unix: None,
            unix_mode: DEFAULT_UNIX_MODE,
            udp: None,
            max_frame: crate::wire::DEFAULT_MAX_FRAME,
            max_delay: DEFAULT_MAX_DELAY,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
            write_timeout: DEFAULT_WRITE_TIMEOUT,
            max_buffered: budget::DEFAULT_MAX_BUFFERED,
            dns: None,
            tls: None,
            https: None,
            quic: None,
            tls_settings: tls::TlsSettings::default(),
            quic_retry: false,
        }
    }
}

impl ServerConfig {
    /// Checks every setting against what the server can honour (the `check_*` functions).
    pub fn check(&self) -> Result<(), CheckSettingError> {
        check_max_frame(self.max_frame)?;
        check_max_delay(self.max_delay)?;
        check_max_connections(self.max_connections)?;
        check_idle_timeout(self.idle_timeout)?;
        check_write_timeout(self.write_timeout)?;
        check_max_buffered(self.max_buffered)?;
        check_unix_mode(self.unix_mode)?;
        tls::check_handshake_timeout(self.tls_settings.handshake_timeout)?;
        if let Some(dns) = &self.dns {
            dns.check()?;
        }
        Ok(())
    }

    /// The address the DNS responder answers: as configured, else the TCP listener's IP,
    /// else 127.0.0.1.
    pub(super) fn dns_answer(&self, dns: &dns::DnsConfig) -> std::net::IpAddr {
        dns.answer.unwrap_or_else(|| match self.tcp {
            Some(a) if !a.ip().is_unspecified() => a.ip(),
            _ => std::net::IpAddr::from([127, 0, 0, 1]),
        })
    }

    /// The settings /stats reports.
    pub(super) fn settings(&self) -> stats::ServerSettings {
        stats::ServerSettings {
            version: env!("CARGO_PKG_VERSION").to_string(),
            wire: crate::wire::WIRE_VERSION,
            host: crate::host::HostFacts::detect(),
            cpu_affinity: crate::host::cpu_affinity(),
            max_frame: self.max_frame,
            max_delay_us: self.max_delay.as_micros() as u64,
            max_connections: self.max_connections,
            idle_timeout_s: self.idle_timeout.as_secs_f64(),
            max_buffered: self.max_buffered,
            write_timeout_s: self.write_timeout.as_secs_f64(),
            http2_max_streams: http::MAX_STREAMS,
            dns: self.dns.as_ref().map(|d| stats::DnsSettings {
                name: d.name.clone(),
                answer: self.dns_answer(d).to_string(),
                ttl_s: d.ttl,
                delay_us: d.delay.as_micros() as u64,
                drop: d.drop,
            }),
        }
    }

    /// Loopback on free ports for the TCP, HTTP and UDP listeners, everything else
    /// default: what tests and the embedded server of `rpcbench` use.
    pub fn loopback_any_port() -> Self {
        ServerConfig {
            tcp: Some(SocketAddr::from(([127, 0, 0, 1], 0))),
            http: Some(SocketAddr::from(([127, 0, 0, 1], 0))),
            udp: Some(SocketAddr::from(([127, 0, 0, 1], 0))),
            ..ServerConfig::default()
        }
    }
}

/// Failure to start the server.
///
/// No message repeats its `source`: an error chain printed on one line (`cause: cause`)
/// shows every source itself, so a message that also includes it says it twice.
#[derive(Debug, thiserror::Error)]
pub enum StartServerError {
    /// A listener could not bind its address (in use, not ours, no permission).
    #[error("cannot listen on {proto} {addr}")]
    Bind {
        /// The listener.
        proto: crate::listener::Listener,
        /// The address it was asked to listen on.
        addr: SocketAddr,
        source: std::io::Error,
    },
    /// The Unix socket path is taken by something that is not a stale socket, or the
    /// socket could not be made there.
    #[error(transparent)]
    Unix(#[from] UnixPathError),
    /// A setting outside what the server can honour.
    #[error(transparent)]
    Setting(#[from] CheckSettingError),
    /// The DNS responder's zone cannot be built from its settings.
    #[error(transparent)]
    DnsZone(#[from] dns::BuildZoneError),
    /// The TLS listeners' certificates or settings are unusable.
    #[error(transparent)]
    Tls(#[from] tls::SetUpTlsError),
}
