//! The echo server: one process, one listener per protocol, shared limits and counters.
//!
//! [`EchoServer::start`] binds every enabled listener (so the real ports are known before
//! anything is printed), spawns their accept loops on the current tokio runtime and
//! returns a handle. [`EchoServer::shutdown`] stops accepting, lets requests in flight
//! finish within a grace period, and returns the final counters.
//!
//! Every setting has a `check_*` function here (or in [`dns`]) saying which values the
//! server can honour; [`EchoServer::start`] runs them all, and the command line's parsers
//! call the same ones, so a bad value is refused in one place with one message.
//!
//! Layer 2 of the map in `lib.rs` (server and readings): uses the kinds and units only; it never reaches into the client.

pub mod budget;
pub mod dns;
mod grpc;
mod grpc_body;
mod grpc_echo;
mod grpc_wstest;
mod handle;
mod http;
pub mod memory;
pub mod metrics;
mod payload;
mod pool;
mod registry;
pub mod stats;
mod tcp;
pub mod tls;
mod udp;
mod unix;
mod wstest;

pub use handle::{ServerHandle, StartHandleError};
use stats::{ProtoCounters, Reject, Stats, StatsSnapshot};
use std::fmt::Debug;
use std::net::SocketAddr;
use std::ops::RangeInclusive;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc, watch};
pub use unix::{DEFAULT_UNIX_MODE, SocketFile, UnixPathError};

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
    /// Certificates, mTLS, resumption and the handshake timeout of both TLS listeners.
    pub tls_settings: tls::TlsSettings,
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
            tls_settings: tls::TlsSettings::default(),
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
    fn dns_answer(&self, dns: &dns::DnsConfig) -> std::net::IpAddr {
        dns.answer.unwrap_or_else(|| match self.tcp {
            Some(a) if !a.ip().is_unspecified() => a.ip(),
            _ => std::net::IpAddr::from([127, 0, 0, 1]),
        })
    }

    /// The settings /stats reports.
    fn settings(&self) -> stats::ServerSettings {
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
        /// The listener: `tcp`, `http`, `dns` or `dns-tcp`.
        proto: &'static str,
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

/// State every connection task shares.
#[derive(Debug)]
pub(crate) struct Shared {
    pub config: ServerConfig,
    pub stats: Arc<Stats>,
    /// One permit per open connection, over every protocol.
    pub slots: Arc<Semaphore>,
    /// Flips to `true` when shutdown starts.
    pub shutdown: watch::Receiver<bool>,
    /// Each connection task holds a clone; when all are dropped, shutdown is complete.
    pub alive: mpsc::Sender<()>,
}

/// Held by a connection task while it runs: keeps its slot, its "open" count and the
/// shutdown tracker, and releases all three when dropped, however the task ends.
pub(crate) struct ConnGuard {
    _slot: OwnedSemaphorePermit,
    _alive: mpsc::Sender<()>,
    proto: Arc<Stats>,
    which: fn(&Stats) -> &ProtoCounters,
}

impl Drop for ConnGuard {
    fn drop(&mut self) {
        (self.which)(&self.proto).open.fetch_sub(1, Relaxed);
        memory::note_release();
    }
}

impl Shared {
    /// Waits for the next connection the server may serve; `None` once shutdown starts.
    ///
    /// Accept errors (EMFILE and friends) back off briefly rather than spin; connections
    /// above the limit are closed at once and counted, and the wait goes on.
    pub async fn next_connection(
        &self,
        listener: &tokio::net::TcpListener,
        which: fn(&Stats) -> &ProtoCounters,
    ) -> Option<(tokio::net::TcpStream, ConnGuard)> {
        loop {
            let stream = tokio::select! {
                res = listener.accept() => match res {
                    Ok((stream, _)) => stream,
                    Err(e) => {
                        tracing::warn!("accept failed: {e}");
                        tokio::time::sleep(Duration::from_millis(10)).await;
                        continue;
                    }
                },
                _ = stopping(self.shutdown.clone()) => return None,
            };
            // Dropping a refused stream closes it.
            if let Some(guard) = self.admit(which) {
                return Some((stream, guard));
            }
        }
    }

    /// Admits a new connection, or counts and refuses it when the limit is reached.
    pub fn admit(&self, which: fn(&Stats) -> &ProtoCounters) -> Option<ConnGuard> {
        let counters = which(&self.stats);
        counters.total.fetch_add(1, Relaxed);
        let Ok(slot) = self.slots.clone().try_acquire_owned() else {
            self.stats.reject(Reject::OverConnectionLimit);
            return None;
        };
        counters.open.fetch_add(1, Relaxed);
        Some(ConnGuard {
            _slot: slot,
            _alive: self.alive.clone(),
            proto: self.stats.clone(),
            which,
        })
    }
}

/// The coarse timer's granularity: tokio rounds sleeps up to whole milliseconds.
const TIMER_TICK: Duration = Duration::from_millis(1);

/// The share of a long delay [`sleep_until`] leaves to [`nap_until`] (one sixteenth: 3 ms of
/// 50): tokio's timer, parked in `epoll_wait` with a timeout in milliseconds, woke 50 ms
/// delays 0.7-2.9 ms late and 200 ms ones 1.8-6.7 ms late on a small virtual machine,
/// where a high-resolution `nanosleep` oversleeps 0.2-0.6 ms, whatever its length.
const NAPPED_SHARE: u32 = 16;

/// How long before a delay's deadline the server stops sleeping: about what waking a
/// sleeping thread and handing back to the runtime costs on a small virtual machine.
const WAKE_BEFORE_DEADLINE: Duration = Duration::from_micros(100);

/// Sleeps until `deadline` to within a few microseconds.
///
/// tokio's timer wheel has millisecond ticks, so `tokio::time::sleep(1ms)` often takes 2 ms;
/// a server whose delays are off by a millisecond would skew every figure that uses
/// `delay_us` or `--dns-delay`. The bulk of the wait uses the timer; the last two ticks (or
/// [`NAPPED_SHARE`] of a long wait) are slept on a blocking-pool thread by [`nap_until`]; the runtime thread then yields until
/// the deadline, so the hand-back costs nothing after it and other connections keep being
/// served meanwhile.
pub(crate) async fn sleep_until(deadline: Instant) {
    let left = deadline.saturating_duration_since(Instant::now());
    if let Some(coarse) = left.checked_sub((2 * TIMER_TICK).max(left / NAPPED_SHARE)) {
        tokio::time::sleep(coarse).await;
    }
    if deadline.saturating_duration_since(Instant::now()) > WAKE_BEFORE_DEADLINE {
        let _ = tokio::task::spawn_blocking(move || nap_until(deadline)).await;
    }
    while Instant::now() < deadline {
        tokio::task::yield_now().await;
    }
}

/// [`sleep_until`] for a thread of its own (the raw TCP connections): the same precision.
pub(crate) fn sleep_until_blocking(deadline: Instant) {
    nap_until(deadline);
    while Instant::now() < deadline {
        std::thread::yield_now();
    }
}

/// Sleeps the calling thread with the kernel's high-resolution `nanosleep` until
/// [`WAKE_BEFORE_DEADLINE`] before `deadline`.
fn nap_until(deadline: Instant) {
    let left = deadline.saturating_duration_since(Instant::now());
    if let Some(nap) = left.checked_sub(WAKE_BEFORE_DEADLINE) {
        // The kernel lets a sleeping thread oversleep by its timer slack, 50 µs by
        // default: as large as a loopback round trip. 1 ns asks for the real deadline.
        let _ = nix::sys::prctl::set_timerslack(1);
        std::thread::sleep(nap);
    }
}

/// Resolves once shutdown has started (or the server handle is gone).
pub(crate) async fn stopping(mut rx: watch::Receiver<bool>) {
    loop {
        let stop = *rx.borrow_and_update();
        if stop || rx.changed().await.is_err() {
            return;
        }
    }
}

/// A running echo server.
#[derive(Debug)]
pub struct EchoServer {
    /// Where the raw TCP listener is bound, with the real port.
    pub tcp_addr: Option<SocketAddr>,
    /// Where the HTTP listener is bound, with the real port.
    pub http_addr: Option<SocketAddr>,
    /// Where the DNS responder is bound (UDP), with the real port.
    pub dns_addr: Option<SocketAddr>,
    /// Where the UDP listener is bound, with the real port.
    pub udp_addr: Option<SocketAddr>,
    /// Where the raw-frames-over-TLS listener is bound, with the real port.
    pub tls_addr: Option<SocketAddr>,
    /// Where the HTTPS listener is bound, with the real port.
    pub https_addr: Option<SocketAddr>,
    /// The CA generated for the TLS listeners (PEM), when no `--cert` was given.
    pub ca_pem: Option<String>,
    /// Where that CA was written (`--ca-out`).
    pub ca_path: Option<std::path::PathBuf>,
    /// The names and IPs the generated leaf covers (empty with `--cert`).
    pub cert_names: Vec<String>,
    /// The Unix socket, removed when the server is dropped.
    pub unix: Option<SocketFile>,
    stats: Arc<Stats>,
    shutdown_tx: watch::Sender<bool>,
    alive_rx: mpsc::Receiver<()>,
}

/// Every listener of a server, bound, not yet served.
struct Bound {
    tcp: Option<(tokio::net::TcpListener, SocketAddr)>,
    http: Option<(tokio::net::TcpListener, SocketAddr)>,
    tls: Option<(tokio::net::TcpListener, SocketAddr)>,
    https: Option<(tokio::net::TcpListener, SocketAddr)>,
    udp: Option<(SocketAddr, std::net::UdpSocket)>,
    unix: Option<(tokio::net::UnixListener, SocketFile)>,
    /// The DNS responder's UDP socket, TCP listener, zone and address.
    dns: Option<DnsBound>,
}

/// What serving the bound listeners gives back: the UDP address, the Unix socket's file
/// and the DNS address.
type Served = (Option<SocketAddr>, Option<SocketFile>, Option<SocketAddr>);

/// The DNS responder's UDP socket, TCP listener, zone and address.
type DnsBound = (
    tokio::net::UdpSocket,
    tokio::net::TcpListener,
    Arc<dns::Zone>,
    SocketAddr,
);

impl Bound {
    /// Binds every listener the configuration turns on.
    async fn bind(shared: &Shared) -> Result<Bound, StartServerError> {
        let config = &shared.config;
        let tcp = bind_tcp("tcp", config.tcp).await?;
        let http = bind_tcp("http", config.http).await?;
        let tls = bind_tcp("tls", config.tls).await?;
        let https = bind_tcp("https", config.https).await?;
        let udp = match config.udp {
            Some(addr) => {
                let bound = std::net::UdpSocket::bind(addr)
                    .and_then(|s| Ok((s.local_addr()?, s)))
                    .map_err(|source| StartServerError::Bind {
                        proto: "udp",
                        addr,
                        source,
                    })?;
                Some(bound)
            }
            None => None,
        };
        let unix = match &config.unix {
            Some(path) => Some(unix::bind(path, config.unix_mode)?),
            None => None,
        };
        let dns = match &config.dns {
            Some(cfg) => {
                let zone = dns::Zone::new(cfg, config.dns_answer(cfg))?;
                let (socket, tcp, addr) = dns::bind(cfg.addr).await?;
                Some((socket, tcp, Arc::new(zone), addr))
            }
            None => None,
        };
        Ok(Bound {
            tcp,
            http,
            tls,
            https,
            udp,
            unix,
            dns,
        })
    }

    /// Serves every listener on the current runtime; returns the UDP address, the Unix
    /// socket's file and the DNS address.
    fn serve(
        self,
        shared: &Arc<Shared>,
        server_tls: Option<&Arc<tls::ServerTls>>,
    ) -> Result<Served, StartServerError> {
        if let Some((listener, addr)) = self.tcp {
            // As many accepting threads as the runtime has workers (`--threads`).
            let threads = tokio::runtime::Handle::current().metrics().num_workers();
            listener
                .into_std()
                .and_then(|l| tcp::start_accepting(l, shared.clone(), threads))
                .map_err(|source| StartServerError::Bind {
                    proto: "tcp",
                    addr,
                    source,
                })?;
        }
        if let (Some((listener, _)), Some(server_tls)) = (self.tls, server_tls) {
            tokio::spawn(tls::accept_loop(
                listener,
                shared.clone(),
                server_tls.clone(),
            ));
        }
        if let (Some((listener, _)), Some(server_tls)) = (self.https, server_tls) {
            tokio::spawn(http::accept_loop_tls(
                listener,
                shared.clone(),
                server_tls.clone(),
            ));
        }
        if let Some((listener, _)) = self.http {
            tokio::spawn(http::accept_loop(listener, shared.clone()));
        }
        let udp_addr = match self.udp {
            Some((addr, socket)) => {
                udp::start(socket, shared.clone()).map_err(|source| StartServerError::Bind {
                    proto: "udp",
                    addr,
                    source,
                })?;
                Some(addr)
            }
            None => None,
        };
        let unix = self.unix.map(|(listener, file)| {
            tokio::spawn(unix::accept_loop(listener, shared.clone()));
            file
        });
        tokio::spawn(memory::tidy(shared.shutdown.clone()));
        let dns_addr = self.dns.map(|(socket, tcp, zone, addr)| {
            tokio::spawn(dns::serve(socket, zone.clone(), shared.clone()));
            tokio::spawn(dns::serve_tcp(tcp, zone, shared.clone()));
            addr
        });
        Ok((udp_addr, unix, dns_addr))
    }
}

/// Binds a TCP listener of `proto` at `addr` when it is on; returns it with the address
/// it got (the port, when `addr` asked for 0).
async fn bind_tcp(
    proto: &'static str,
    addr: Option<SocketAddr>,
) -> Result<Option<(tokio::net::TcpListener, SocketAddr)>, StartServerError> {
    let Some(addr) = addr else {
        return Ok(None);
    };
    let bound = async {
        let listener = tokio::net::TcpListener::bind(addr).await?;
        let local = listener.local_addr()?;
        Ok((listener, local))
    };
    bound
        .await
        .map(Some)
        .map_err(|source| StartServerError::Bind {
            proto,
            addr,
            source,
        })
}

impl EchoServer {
    /// Binds every enabled listener and starts serving on the current tokio runtime.
    pub async fn start(config: ServerConfig) -> Result<EchoServer, StartServerError> {
        config.check()?;
        let (shutdown_tx, shutdown_rx) = watch::channel(false);
        let (alive_tx, alive_rx) = mpsc::channel(1);
        let settings = config.settings();
        let shared = Arc::new(Shared {
            stats: Arc::new(Stats::new(settings)),
            slots: Arc::new(Semaphore::new(config.max_connections)),
            shutdown: shutdown_rx,
            alive: alive_tx,
            config,
        });
        // Bind everything before spawning anything, so a failure leaves nothing running.
        let bound = Bound::bind(&shared).await?;
        let addr = |l: &Option<(tokio::net::TcpListener, SocketAddr)>| l.as_ref().map(|(_, a)| *a);
        let (tcp_addr, http_addr) = (addr(&bound.tcp), addr(&bound.http));
        let (tls_addr, https_addr) = (addr(&bound.tls), addr(&bound.https));
        // Certificates only when a TLS listener is on: generating a key pair costs
        // milliseconds every plain server (and every embedded one) need not pay.
        let server_tls = if tls_addr.is_some() || https_addr.is_some() {
            let ips: Vec<_> = tls_addr.iter().chain(&https_addr).map(|a| a.ip()).collect();
            Some(Arc::new(tls::set_up(&shared.config.tls_settings, &ips)?))
        } else {
            None
        };
        let (udp_addr, unix, dns_addr) = bound.serve(&shared, server_tls.as_ref())?;
        Ok(EchoServer {
            tcp_addr,
            http_addr,
            tls_addr,
            https_addr,
            ca_pem: server_tls.as_ref().and_then(|t| t.ca_pem.clone()),
            ca_path: server_tls.as_ref().and_then(|t| t.ca_path.clone()),
            cert_names: server_tls.map(|t| t.names.clone()).unwrap_or_default(),
            dns_addr,
            udp_addr,
            unix,
            stats: shared.stats.clone(),
            shutdown_tx,
            alive_rx,
        })
    }

    /// The live counters.
    pub fn stats(&self) -> StatsSnapshot {
        self.stats.snapshot()
    }

    /// Stops accepting, waits up to `grace` for requests in flight, returns the totals.
    ///
    /// Returns `false` in the second field when the grace period ran out first.
    pub async fn shutdown(mut self, grace: Duration) -> (StatsSnapshot, bool) {
        let _ = self.shutdown_tx.send(true);
        // The accept loops hold the last senders besides the connection tasks; recv()
        // yields None once every one of them is gone.
        let drained = tokio::time::timeout(grace, self.alive_rx.recv())
            .await
            .is_ok();
        (self.stats.snapshot(), drained)
    }
}
