//! Every listener of a server bound before any is served ([`Bound`]), so the real ports
//! are known before anything is printed and a failure leaves nothing running.

use super::{Shared, StartServerError, dns, http, memory, quic, tcp, tls, udp, unix};
use crate::listener::Listener;
use std::net::SocketAddr;
use std::sync::Arc;
use unix::SocketFile;

/// Every listener of a server, bound, not yet served.
pub(super) struct Bound {
    pub(super) tcp: Option<(tokio::net::TcpListener, SocketAddr)>,
    pub(super) http: Option<(tokio::net::TcpListener, SocketAddr)>,
    pub(super) tls: Option<(tokio::net::TcpListener, SocketAddr)>,
    pub(super) https: Option<(tokio::net::TcpListener, SocketAddr)>,
    udp: Option<(SocketAddr, std::net::UdpSocket)>,
    pub(super) quic: Option<(SocketAddr, std::net::UdpSocket)>,
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
    pub(super) async fn bind(shared: &Shared) -> Result<Bound, StartServerError> {
        let config = &shared.config;
        let tcp = bind_tcp(Listener::Tcp, config.tcp).await?;
        let http = bind_tcp(Listener::Http, config.http).await?;
        let tls = bind_tcp(Listener::Tls, config.tls).await?;
        let https = bind_tcp(Listener::Https, config.https).await?;
        let udp = bind_udp(Listener::Udp, config.udp)?;
        let quic = bind_udp(Listener::Quic, config.quic)?;
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
            quic,
            unix,
            dns,
        })
    }

    /// Serves every listener on the current runtime; returns the UDP address, the Unix
    /// socket's file and the DNS address.
    pub(super) fn serve(
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
                    proto: Listener::Tcp,
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
        if let (Some((addr, socket)), Some(server_tls)) = (self.quic, server_tls) {
            let config = quic::server_config(server_tls.quic.clone(), shared)?;
            let endpoint =
                quic::endpoint(socket, config).map_err(|source| StartServerError::Bind {
                    proto: Listener::Quic,
                    addr,
                    source,
                })?;
            tokio::spawn(quic::accept_loop(endpoint, shared.clone()));
        }
        let udp_addr = match self.udp {
            Some((addr, socket)) => {
                udp::start(socket, shared.clone()).map_err(|source| StartServerError::Bind {
                    proto: Listener::Udp,
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

/// Binds a UDP socket of `proto` at `addr` when it is on; returns it with the address it
/// got.
fn bind_udp(
    proto: Listener,
    addr: Option<SocketAddr>,
) -> Result<Option<(SocketAddr, std::net::UdpSocket)>, StartServerError> {
    let Some(addr) = addr else {
        return Ok(None);
    };
    std::net::UdpSocket::bind(addr)
        .and_then(|s| Ok((s.local_addr()?, s)))
        .map(Some)
        .map_err(|source| StartServerError::Bind {
            proto,
            addr,
            source,
        })
}

/// Binds a TCP listener of `proto` at `addr` when it is on; returns it with the address
/// it got (the port, when `addr` asked for 0).
async fn bind_tcp(
    proto: Listener,
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
