//! An echo server on a tokio runtime of its own, for callers that are not async: the
//! client's embedded server and the integration tests. It stops when dropped, as hyper's
//! test server does, so a test that fails half-way leaves nothing running.

use super::stats::StatsSnapshot;
use super::{EchoServer, ServerConfig, StartServerError};
use std::net::SocketAddr;
use std::time::Duration;

/// How long a dropped handle lets requests in flight finish. Short: whoever drops the
/// handle is done with the server, and a test must not wait the full shutdown grace.
const DROP_GRACE: Duration = Duration::from_secs(1);

/// A running [`EchoServer`] and the runtime it runs on; dropping it stops both.
#[derive(Debug)]
pub struct ServerHandle {
    /// `None` only while dropping or after [`ServerHandle::shutdown`].
    rt: Option<tokio::runtime::Runtime>,
    server: Option<EchoServer>,
    /// Where the raw TCP listener is bound, with the real port.
    pub tcp_addr: Option<SocketAddr>,
    /// Where the HTTP listener is bound, with the real port.
    pub http_addr: Option<SocketAddr>,
    /// Where the DNS responder is bound (UDP), with the real port.
    pub dns_addr: Option<SocketAddr>,
    /// Where the UDP listener is bound, with the real port.
    pub udp_addr: Option<SocketAddr>,
    /// The Unix socket's path (the file is removed when the server stops).
    pub unix_path: Option<std::path::PathBuf>,
    /// Where the raw-frames-over-TLS listener is bound, with the real port.
    pub tls_addr: Option<SocketAddr>,
    /// Where the HTTPS listener is bound, with the real port.
    pub https_addr: Option<SocketAddr>,
    /// Where the QUIC listener is bound (UDP), with the real port.
    pub quic_addr: Option<SocketAddr>,
    /// The CA generated for the TLS listeners (PEM), when no certificate was given.
    pub ca_pem: Option<String>,
    /// The names and IPs the generated leaf covers.
    pub cert_names: Vec<String>,
}

/// Why a [`ServerHandle`] could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartHandleError {
    /// The runtime could not be built (threads, or the timer/IO driver).
    #[error("cannot start the server's runtime")]
    Runtime(#[source] std::io::Error),
    /// A listener could not bind, or the DNS zone is invalid.
    #[error(transparent)]
    Server(#[from] StartServerError),
}

impl ServerHandle {
    /// Starts a server with `config` on a new multi-thread runtime of `threads` workers.
    /// Call it from plain (non-async) code.
    pub fn start(config: ServerConfig, threads: usize) -> Result<ServerHandle, StartHandleError> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(threads.max(1))
            .thread_name(super::THREAD_NAMES[0])
            .on_thread_stop(crate::host::note_thread_end)
            .enable_all()
            .build()
            .map_err(StartHandleError::Runtime)?;
        let server = rt.block_on(EchoServer::start(config))?;
        Ok(ServerHandle {
            tcp_addr: server.tcp_addr,
            http_addr: server.http_addr,
            dns_addr: server.dns_addr,
            udp_addr: server.udp_addr,
            unix_path: server.unix.as_ref().map(|f| f.path().to_path_buf()),
            tls_addr: server.tls_addr,
            https_addr: server.https_addr,
            quic_addr: server.quic_addr,
            ca_pem: server.ca_pem.clone(),
            cert_names: server.cert_names.clone(),
            rt: Some(rt),
            server: Some(server),
        })
    }

    /// The server's runtime, e.g. to spawn client tasks beside it.
    pub fn runtime(&self) -> &tokio::runtime::Runtime {
        self.rt.as_ref().expect("the runtime lives until drop")
    }

    /// Runs `fut` to completion on the server's runtime.
    pub fn block_on<F: std::future::Future>(&self, fut: F) -> F::Output {
        self.runtime().block_on(fut)
    }

    /// The live counters (the same data as `GET /stats`).
    pub fn stats(&self) -> StatsSnapshot {
        self.server
            .as_ref()
            .expect("the server lives until shutdown")
            .stats()
    }

    /// Stops accepting, waits up to `grace` for requests in flight, and returns the totals
    /// and whether everything drained in time.
    pub fn shutdown(mut self, grace: Duration) -> (StatsSnapshot, bool) {
        let server = self.server.take().expect("the server lives until shutdown");
        self.runtime().block_on(server.shutdown(grace))
    }
}

impl Drop for ServerHandle {
    fn drop(&mut self) {
        let Some(rt) = self.rt.take() else { return };
        if let Some(server) = self.server.take() {
            // Blocking on the runtime is not allowed from inside another runtime (a test
            // that drops the handle in async code); there the server just loses its tasks.
            if tokio::runtime::Handle::try_current().is_err() {
                let _ = rt.block_on(server.shutdown(DROP_GRACE));
            }
        }
        rt.shutdown_background();
    }
}
