//! The embedded server `rpcbench` starts when it has no target: its settings, and the
//! temporary folder its Unix socket lives in, removed when the run ends.

use super::RunBenchError;
use crate::server::dns::{DEFAULT_DNS_NAME, DnsConfig};
use crate::server::{ServerConfig, ServerHandle};
use std::net::SocketAddr;
use std::time::Duration;

/// Runtime threads of the embedded server: one, because the client's workers need the
/// other CPU of a small machine.
pub(super) const EMBEDDED_SERVER_THREADS: usize = 1;
/// How long the embedded server may finish requests in flight once the run is over.
pub(super) const EMBEDDED_SHUTDOWN_GRACE: Duration = Duration::from_secs(1);

/// A private temporary directory (mode 0700) for the embedded server's Unix socket,
/// removed with what is left in it when dropped.
pub(super) struct SocketDir(std::path::PathBuf);

impl SocketDir {
    /// A new directory under the system's temporary directory.
    pub(super) fn create() -> std::io::Result<SocketDir> {
        use std::os::unix::fs::DirBuilderExt;
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let dir = std::env::temp_dir().join(format!("rpcbench-{}-{nanos}", std::process::id()));
        std::fs::DirBuilder::new().mode(0o700).create(&dir)?;
        Ok(SocketDir(dir))
    }

    /// The socket's path in it.
    pub(super) fn socket(&self) -> std::path::PathBuf {
        self.0.join("echo.sock")
    }
}

impl Drop for SocketDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The embedded echo server, with a DNS responder, on free loopback ports, and its Unix
/// socket at `unix`.
/// With `tls`, its TLS and HTTPS listeners too, with a generated certificate, and a
/// generated client CA whose certificates it verifies but does not require (so `mtls` and
/// the other modes share its ports). With `quic`, its QUIC listener, with the same
/// certificate.
pub(super) fn start_embedded(
    unix: std::path::PathBuf,
    tls: bool,
    quic: bool,
) -> Result<(ServerHandle, Option<crate::server::tls::GeneratedCerts>), RunBenchError> {
    let client = if tls {
        Some(crate::server::tls::generate_certs(
            &["rpcbench-client".to_string()],
            crate::server::tls::LeafUse::Client,
            false,
        )?)
    } else {
        None
    };
    let loopback = SocketAddr::from(([127, 0, 0, 1], 0));
    let config = ServerConfig {
        dns: Some(DnsConfig::default()),
        unix: Some(unix),
        tls: tls.then_some(loopback),
        https: tls.then_some(loopback),
        quic: quic.then_some(loopback),
        tls_settings: crate::server::tls::TlsSettings {
            cert: crate::server::tls::CertSource::Generate {
                dns_name: DEFAULT_DNS_NAME.to_string(),
                ca_out: None,
            },
            client_ca_pem: client.as_ref().map(|c| c.ca_pem.clone()),
            client_auth_optional: true,
            ..Default::default()
        },
        ..ServerConfig::loopback_any_port()
    };
    let handle =
        ServerHandle::start(config, EMBEDDED_SERVER_THREADS).map_err(RunBenchError::StartServer)?;
    Ok((handle, client))
}
