//! Where a transport sends its calls ([`Endpoint`]): the target's names and ports, what a
//! run's workers share, its TLS and its `TCP_INFO` sums.

use super::{Call, CallError, ConnectFailure, Phases, Port, Secure, tls};
use crate::resolve::{AddrMode, LookupNameError, Names};
use crate::tcpinfo::TcpInfoTally;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

/// Where a transport sends its calls, and how it turns the target's name into an address.
#[derive(Clone)]
pub struct Endpoint {
    /// The name (or IP literal) and how to resolve it; shared by the run's workers.
    pub names: Arc<Names>,
    /// The raw TCP port.
    pub tcp_port: u16,
    /// The HTTP port.
    pub http_port: u16,
    /// The UDP port (0 when the target has no UDP listener).
    pub udp_port: u16,
    /// The QUIC port (UDP; 0 when the target has no QUIC listener).
    pub quic_port: u16,
    /// The Unix socket's path, when the target has one (same host only).
    pub unix: Option<Arc<std::path::PathBuf>>,
    /// What the workers of one run share (a multiplexed connection); the runner gives
    /// every run a fresh one ([`Endpoint::for_run`]), so nothing outlives its run.
    pub shared: Arc<RunShared>,
    /// The run's TLS, when its security mode is not `plain`: every TCP connection then
    /// handshakes (the ports above are then the server's TLS and HTTPS ports). Fresh per
    /// run ([`Endpoint::for_run`]), so resumption never crosses runs.
    pub tls: Option<Arc<tls::TlsClient>>,
    /// The run's `TCP_INFO` sums, which every TCP connection adds itself to when it
    /// closes. Fresh per run ([`Endpoint::for_run`]).
    pub tcp_info: Arc<TcpInfoTally>,
}

/// State the workers of one run share, one value per type that asks for it: how
/// `h2-mux` gives all workers one connection. Keyed by type, so a transport that shares
/// something declares it in its own file and nothing here changes.
#[derive(Default)]
pub struct RunShared(std::sync::Mutex<SharedMap>);

/// The values of a [`RunShared`], by type.
type SharedMap = std::collections::HashMap<std::any::TypeId, Arc<dyn std::any::Any + Send + Sync>>;

impl RunShared {
    /// The run's value of type `T`, made with `T::default()` by the first worker to ask.
    pub fn get<T: std::any::Any + Send + Sync + Default>(&self) -> Arc<T> {
        let mut map = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let value = map
            .entry(std::any::TypeId::of::<T>())
            .or_insert_with(|| Arc::new(T::default()))
            .clone();
        drop(map);
        value
            .downcast::<T>()
            .unwrap_or_else(|_| unreachable!("the map is keyed by the value's type"))
    }
}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Endpoint({} {} tcp:{} http:{})",
            self.names.mode(),
            self.names.name(),
            self.tcp_port,
            self.http_port
        )
    }
}

impl Endpoint {
    /// An endpoint at fixed addresses (address mode `ip`); both must share the IP.
    pub fn new(tcp: SocketAddr, http: SocketAddr) -> Endpoint {
        debug_assert_eq!(tcp.ip(), http.ip(), "one host, two ports");
        Endpoint::with_names(Arc::new(Names::fixed(tcp.ip())), tcp.port(), http.port())
    }

    /// An endpoint whose name is resolved by `names`.
    pub fn with_names(names: Arc<Names>, tcp_port: u16, http_port: u16) -> Endpoint {
        Endpoint {
            names,
            tcp_port,
            http_port,
            udp_port: 0,
            quic_port: 0,
            unix: None,
            shared: Arc::default(),
            tls: None,
            tcp_info: Arc::default(),
        }
    }

    /// The same endpoint with TLS on every connection.
    pub fn with_tls(self, tls: Option<Arc<tls::TlsClient>>) -> Endpoint {
        Endpoint { tls, ..self }
    }

    /// The security mode of the endpoint's connections.
    pub fn security(&self) -> tls::Security {
        self.tls
            .as_ref()
            .map_or(tls::Security::Plain, |t| t.security())
    }

    /// What connecting with `alpn` needs: the run's TLS, if any.
    pub fn secure(&self, alpn: tls::Alpn) -> Secure<'_> {
        self.tls.as_deref().map(|t| (t, alpn))
    }

    /// `http` or `https`, as the run's security says.
    pub fn scheme(&self) -> &'static str {
        if self.tls.is_some() { "https" } else { "http" }
    }

    /// The same endpoint with a UDP port.
    pub fn with_udp_port(self, udp_port: u16) -> Endpoint {
        Endpoint { udp_port, ..self }
    }

    /// The same endpoint with a QUIC port.
    pub fn with_quic_port(self, quic_port: u16) -> Endpoint {
        Endpoint { quic_port, ..self }
    }

    /// The QUIC address, looked up now if the address mode says so.
    pub fn quic_addr(
        &self,
        deadline: Instant,
        phases: &mut Phases,
    ) -> Result<SocketAddr, CallError> {
        self.addr(self.quic_port, deadline, phases)
    }

    /// The same endpoint with a Unix socket path.
    pub fn with_unix(self, path: Option<std::path::PathBuf>) -> Endpoint {
        Endpoint {
            unix: path.map(Arc::new),
            ..self
        }
    }

    /// The UDP address, looked up now if the address mode says so.
    pub fn udp_addr(
        &self,
        deadline: Instant,
        phases: &mut Phases,
    ) -> Result<SocketAddr, CallError> {
        self.addr(self.udp_port, deadline, phases)
    }

    /// The Unix socket's path, or the error every call of a run without one gets.
    pub fn unix_path(&self) -> Result<&std::path::Path, CallError> {
        self.unix
            .as_deref()
            .map(|p| p.as_path())
            .ok_or(CallError::Connect(ConnectFailure::Other))
    }

    /// The same endpoint with nothing shared yet: what one run starts from.
    pub fn for_run(&self) -> Endpoint {
        Endpoint {
            shared: Arc::default(),
            tls: self.tls.as_ref().map(|t| t.fresh()),
            tcp_info: Arc::default(),
            ..self.clone()
        }
    }

    /// The raw TCP address, looked up now if the address mode says so.
    pub fn tcp_addr(
        &self,
        deadline: Instant,
        phases: &mut Phases,
    ) -> Result<SocketAddr, CallError> {
        self.addr(self.tcp_port, deadline, phases)
    }

    /// The HTTP address, looked up now if the address mode says so.
    pub fn http_addr(
        &self,
        deadline: Instant,
        phases: &mut Phases,
    ) -> Result<SocketAddr, CallError> {
        self.addr(self.http_port, deadline, phases)
    }

    /// The address of `port`, looked up now if the address mode says so, from inside an
    /// event loop: a lookup that can block (every mode but `ip`) runs on the runtime's
    /// blocking pool, so one slow lookup does not stall the loop's other connections, and
    /// so the resolver may block on a runtime of its own (which it may not do on a runtime
    /// thread).
    pub async fn addr_async(
        &self,
        port: Port,
        deadline: Instant,
        phases: &mut Phases,
    ) -> Result<SocketAddr, CallError> {
        let port = match port {
            Port::Tcp => self.tcp_port,
            Port::Http => self.http_port,
            Port::Udp => self.udp_port,
            Port::Quic => self.quic_port,
            // A path has no name to look up; the unix transport never asks.
            Port::Unix => return Err(CallError::Connect(ConnectFailure::Other)),
        };
        if self.names.mode() == AddrMode::Ip {
            return self.addr(port, deadline, phases);
        }
        let names = self.names.clone();
        let (ip, took) = tokio::task::spawn_blocking(move || names.lookup(deadline))
            .await
            .map_err(|_| CallError::Dns(LookupNameError::Other))??;
        if took.is_some() {
            phases.dns = took;
        }
        Ok(SocketAddr::new(ip, port))
    }

    fn addr(
        &self,
        port: u16,
        deadline: Instant,
        phases: &mut Phases,
    ) -> Result<SocketAddr, CallError> {
        let (ip, took) = self.names.lookup(deadline)?;
        if took.is_some() {
            phases.dns = took;
        }
        Ok(SocketAddr::new(ip, port))
    }

    /// For libcurl in modes `cached` and `uncached`: looks the name up now and returns the
    /// `CURLOPT_RESOLVE` entry (`name:port:ip`) that hands the address to libcurl, so the
    /// lookup is rpcbench's and is timed. `None` in `ip` (an IP URL) and `system` (libcurl
    /// resolves by itself).
    pub fn curl_pin(
        &self,
        deadline: Instant,
        phases: &mut Phases,
    ) -> Result<Option<String>, CallError> {
        match self.names.mode() {
            AddrMode::Ip | AddrMode::System => Ok(None),
            AddrMode::Cached | AddrMode::Uncached | AddrMode::UncachedSearch => {
                let addr = self.http_addr(deadline, phases)?;
                let ip = crate::resolve::url_host(&addr.ip().to_string());
                Ok(Some(format!(
                    "{}:{}:{ip}",
                    self.names.name(),
                    self.http_port
                )))
            }
        }
    }

    /// The host part of URLs and `Host:` headers: the IP literal in mode `ip`, else the name.
    pub fn host(&self) -> String {
        self.names.host()
    }

    /// The URL of the call's HTTP route, with the query a call needs.
    pub fn echo_url(&self, call: &Call) -> String {
        let host = crate::resolve::url_host(&self.host());
        let mut url = format!("{}://{host}:{}", self.scheme(), self.http_port);
        url.push_str(&Endpoint::echo_path(call));
        url
    }

    /// The path and query of the call's route (for hyper, which takes the host
    /// separately): `/echo`, or the encoding's route for an encoded call.
    pub fn echo_path(call: &Call) -> String {
        let mut path = match call.rpc {
            None => String::from("/echo"),
            Some(rpc) => rpc.path(),
        };
        push_query(&mut path, call);
        path
    }
}

fn push_query(url: &mut String, call: &Call) {
    use std::fmt::Write;
    let mut sep = '?';
    if let Some(n) = call.reply_len {
        let _ = write!(url, "{sep}reply_len={n}");
        sep = '&';
    }
    if call.delay_us > 0 {
        let _ = write!(url, "{sep}delay_us={}", call.delay_us);
    }
}
