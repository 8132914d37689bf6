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

/// Binding every listener before serving any.
mod bound;
pub mod budget;
mod clock;
mod config;
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
pub mod quic;
mod registry;
pub mod stats;
mod tcp;
pub mod tls;
mod udp;
mod unix;
mod wstest;
use crate::listener::Listener;
use bound::Bound;
use clock::{TIMER_TICK, sleep_until, sleep_until_blocking, stopping};
pub use config::{
    CheckSettingError, DEFAULT_IDLE_TIMEOUT, DEFAULT_MAX_CONNECTIONS, DEFAULT_MAX_DELAY,
    DEFAULT_WRITE_TIMEOUT, DELAY_CEILING, MAX_CONNECTIONS_CEILING, MIN_IDLE_TIMEOUT,
    SHUTDOWN_GRACE, ServerConfig, StartServerError, THREAD_NAMES, check_idle_timeout,
    check_max_buffered, check_max_connections, check_max_delay, check_max_frame, check_unix_mode,
    check_write_timeout, within,
};

pub use handle::{ServerHandle, StartHandleError};
use stats::{ProtoCounters, Reject, Stats, StatsSnapshot};
use std::fmt::Debug;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc, watch};
pub use unix::{DEFAULT_UNIX_MODE, SocketFile, UnixPathError};

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
    /// Where the QUIC listener is bound (UDP), with the real port.
    pub quic_addr: Option<SocketAddr>,
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

impl EchoServer {
    /// The network listeners bound, in the order `rpcbench-echo` prints them, each with the
    /// address it got (the Unix socket, a path, is [`EchoServer::unix`]).
    pub fn listening(&self) -> Vec<(Listener, SocketAddr)> {
        [
            (Listener::Tcp, self.tcp_addr),
            (Listener::Http, self.http_addr),
            (Listener::Udp, self.udp_addr),
            (Listener::Dns, self.dns_addr),
            (Listener::Tls, self.tls_addr),
            (Listener::Https, self.https_addr),
            (Listener::Quic, self.quic_addr),
        ]
        .into_iter()
        .filter_map(|(l, addr)| Some((l, addr?)))
        .collect()
    }

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
        let quic_addr = bound.quic.as_ref().map(|(a, _)| *a);
        // Certificates only when a TLS or QUIC listener is on: generating a key pair
        // costs milliseconds every plain server (and every embedded one) need not pay.
        let secured = [tls_addr, https_addr, quic_addr];
        let server_tls = if secured.iter().any(Option::is_some) {
            let ips: Vec<_> = secured.iter().flatten().map(|a| a.ip()).collect();
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
            quic_addr,
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
