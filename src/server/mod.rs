//! The echo server: one process, one listener per protocol, shared limits and counters.
//!
//! [`EchoServer::start`] binds every enabled listener (so the real ports are known before
//! anything is printed), spawns their accept loops on the current tokio runtime and
//! returns a handle. [`EchoServer::shutdown`] stops accepting, lets requests in flight
//! finish within a grace period, and returns the final counters.

pub mod dns;
mod http;
mod pool;
mod registry;
pub mod stats;
mod tcp;

use stats::{ProtoCounters, Reject, Stats, StatsSnapshot};
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc, watch};

/// Default longest `delay_us` a client may ask for (10 s).
pub const DEFAULT_MAX_DELAY: Duration = Duration::from_secs(10);
/// Default limit of connections open at once, over all protocols.
pub const DEFAULT_MAX_CONNECTIONS: usize = 10_000;
/// Default time a connection may stay silent before the server closes it (60 s).
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(60);
/// How long shutdown waits for requests in flight before giving up on them (5 s).
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// Everything the server needs to know before it binds.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// Raw TCP listen address; `None` disables the listener.
    pub tcp: Option<SocketAddr>,
    /// HTTP listen address; `None` disables the listener.
    pub http: Option<SocketAddr>,
    /// Largest frame body (TCP) or request body (HTTP), and largest reply, in bytes.
    pub max_frame: u32,
    /// Largest `delay_us` honoured; above it the request gets status 2 (TCP) or 400 (HTTP).
    pub max_delay: Duration,
    /// Connections open at once over every protocol; more are closed at once.
    pub max_connections: usize,
    /// A connection that sends nothing for this long is closed.
    pub idle_timeout: Duration,
    /// The DNS responder; `None` (the default) leaves it off.
    pub dns: Option<dns::DnsConfig>,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            tcp: Some(SocketAddr::from(([127, 0, 0, 1], 7001))),
            http: Some(SocketAddr::from(([127, 0, 0, 1], 7080))),
            max_frame: crate::wire::DEFAULT_MAX_FRAME,
            max_delay: DEFAULT_MAX_DELAY,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
            dns: None,
        }
    }
}

impl ServerConfig {
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
            cpu_affinity: crate::host::cpu_affinity(),
            max_frame: self.max_frame,
            max_delay_us: self.max_delay.as_micros() as u64,
            max_connections: self.max_connections,
            idle_timeout_s: self.idle_timeout.as_secs_f64(),
            dns: self.dns.as_ref().map(|d| stats::DnsSettings {
                name: d.name.clone(),
                answer: self.dns_answer(d).to_string(),
                ttl_s: d.ttl,
                delay_us: d.delay.as_micros() as u64,
                drop: d.drop,
            }),
        }
    }

    /// Loopback on free ports for both listeners, everything else default: what tests and
    /// the embedded server of `rpcbench` use.
    pub fn loopback_any_port() -> Self {
        ServerConfig {
            tcp: Some(SocketAddr::from(([127, 0, 0, 1], 0))),
            http: Some(SocketAddr::from(([127, 0, 0, 1], 0))),
            ..ServerConfig::default()
        }
    }
}

/// Failure to start the server.
#[derive(Debug, thiserror::Error)]
pub enum StartServerError {
    #[error("cannot listen for {proto} on {addr}: {source}")]
    Bind {
        proto: &'static str,
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("{0}")]
    DnsZone(String),
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

/// How long before a delay's deadline the server stops sleeping: about what waking a
/// sleeping thread and handing back to the runtime costs on a small virtual machine.
const WAKE_BEFORE_DEADLINE: Duration = Duration::from_micros(100);

/// Sleeps until `deadline` to within a few microseconds.
///
/// tokio's timer wheel has millisecond ticks, so `tokio::time::sleep(1ms)` often takes 2 ms;
/// a server whose delays are off by a millisecond would skew every figure that uses
/// `delay_us` or `--dns-delay`. The bulk of the wait uses the timer; the last two ticks are
/// slept on a blocking-pool thread by [`nap_until`]; the runtime thread then yields until
/// the deadline, so the hand-back costs nothing after it and other connections keep being
/// served meanwhile.
pub(crate) async fn sleep_until(deadline: Instant) {
    let left = deadline.saturating_duration_since(Instant::now());
    if let Some(coarse) = left.checked_sub(2 * TIMER_TICK) {
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
    stats: Arc<Stats>,
    shutdown_tx: watch::Sender<bool>,
    alive_rx: mpsc::Receiver<()>,
}

impl EchoServer {
    /// Binds every enabled listener and starts serving on the current tokio runtime.
    pub async fn start(config: ServerConfig) -> Result<EchoServer, StartServerError> {
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
        let bind = |proto, addr| async move {
            tokio::net::TcpListener::bind(addr)
                .await
                .map_err(|source| StartServerError::Bind {
                    proto,
                    addr,
                    source,
                })
        };
        // Bind everything before spawning anything, so a failure leaves nothing running.
        let tcp = match shared.config.tcp {
            Some(addr) => Some(bind("tcp", addr).await?),
            None => None,
        };
        let http = match shared.config.http {
            Some(addr) => Some(bind("http", addr).await?),
            None => None,
        };
        let dns = match &shared.config.dns {
            Some(cfg) => {
                let answer = shared.config.dns_answer(cfg);
                let zone = dns::Zone::new(cfg, answer).map_err(StartServerError::DnsZone)?;
                let socket = tokio::net::UdpSocket::bind(cfg.addr)
                    .await
                    .map_err(|source| StartServerError::Bind {
                        proto: "dns",
                        addr: cfg.addr,
                        source,
                    })?;
                let addr = socket
                    .local_addr()
                    .map_err(|source| StartServerError::Bind {
                        proto: "dns",
                        addr: cfg.addr,
                        source,
                    })?;
                Some((socket, zone, addr))
            }
            None => None,
        };
        let local = |l: &tokio::net::TcpListener, proto, addr| {
            l.local_addr().map_err(|source| StartServerError::Bind {
                proto,
                addr,
                source,
            })
        };
        let tcp_addr = match &tcp {
            Some(l) => Some(local(l, "tcp", shared.config.tcp.unwrap())?),
            None => None,
        };
        let http_addr = match &http {
            Some(l) => Some(local(l, "http", shared.config.http.unwrap())?),
            None => None,
        };
        if let Some(listener) = tcp {
            tokio::spawn(tcp::accept_loop(listener, shared.clone()));
        }
        if let Some(listener) = http {
            tokio::spawn(http::accept_loop(listener, shared.clone()));
        }
        let dns_addr = dns.map(|(socket, zone, addr)| {
            tokio::spawn(dns::serve(socket, zone, shared.clone()));
            addr
        });
        Ok(EchoServer {
            tcp_addr,
            http_addr,
            dns_addr,
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
