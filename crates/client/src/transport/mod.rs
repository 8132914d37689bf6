//! Client transports: one file per way of making a call, all behind [`Transport`] and, for
//! the transports that can run on an event loop, [`AsyncTransport`].
//!
//! A [`Transport`] makes one call at a time on the worker thread that owns it (blocking; the
//! hyper transports drive a current-thread runtime of their own). An [`AsyncTransport`]
//! makes one call at a time on one connection too, but as a future, so that an event-loop
//! thread can drive thousands of them at once (the runner's `evloop` engine, for high
//! `-c`). Both hand the raw reply back and leave verification to the runner, so every
//! transport, on either engine, is judged by the same code.
//!
//! The registry below (one line per transport) declares each transport's module and
//! generates [`TransportKind`], [`TransportKind::open_with`] and
//! [`TransportKind::with_async`], the `match`es that pick a transport; the runner's hot
//! loops are generic over the concrete type, so no transport pays for another's
//! abstraction. A transport states its own properties (persistent or not, which port) as
//! constants of its [`Transport`] impl; its async side, when it has one, lives in the same
//! file, so adding a transport is still one file plus one registry line.
//!
//! Layer 3 of the map in `lib.rs` (client): uses the layers below and the resolver; never the record, the analysis or anything above.

// Helpers shared by several transports; the transports themselves are declared by the
// registry below.
mod buf;
mod curl;
mod h1;
mod h2_mux_wire;
mod h2_read;
mod h2_wire;
mod hpack;
mod http;
mod mux;
pub mod tls;

use crate::measure::ErrorKind;
use crate::resolve::{AddrMode, LookupNameError, Names};
use crate::tcpinfo::TcpInfoTally;
pub use curl::{BundledLibcurl, LinkedLibcurl};
use std::cell::Cell;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The registry of transports: one line per transport,
/// `Variant = module::{Type, AsyncType}, "name"` (the async type is left out for a
/// transport with no event-loop side), with its doc comment (which `--help` shows). It
/// declares the module and generates [`TransportKind`] (with `ALL`, `name()`, the clap and
/// serde names), the one `match` that opens a blocking transport and hands it, as its
/// concrete type, to a [`WithTransport`], and the one that hands the async type to a
/// [`WithAsyncTransport`]. Adding a transport is one file under `crates/client/src/transport/` plus one
/// line here.
macro_rules! registry {
    // Whether a line names an async type.
    (@has_async) => { false };
    (@has_async $aty:ident) => { true };
    // The async arm of one line: the work run with the async type, or `None` without one.
    (@with_async $with:ident, $module:ident,) => {{
        drop($with);
        None
    }};
    (@with_async $with:ident, $module:ident, $aty:ident) => {
        Some($with.run::<$module::$aty>())
    };
    ($( $(#[doc = $doc:literal])*
        $variant:ident = $module:ident :: { $ty:ident $(, $aty:ident)? }, $name:literal; )*) => {
        $( mod $module; )*

        /// Which way a call travels. The names are the same everywhere: CLI, tables, JSON.
        #[derive(
            Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash,
            clap::ValueEnum, serde::Serialize, serde::Deserialize,
        )]
        pub enum TransportKind {
            $(
                $(#[doc = $doc])*
                #[value(name = $name)]
                #[serde(rename = $name)]
                $variant,
            )*
        }

        impl TransportKind {
            /// Every transport, in the order tables list them.
            pub const ALL: [TransportKind; [$($name),*].len()] = [$(TransportKind::$variant),*];

            /// The stable lowercase name.
            pub fn name(self) -> &'static str {
                match self {
                    $(TransportKind::$variant => $name,)*
                }
            }

            /// What the rest of the program asks about the transport, as the transport
            /// itself answers it ([`Transport::FACTS`]).
            pub const fn facts(self) -> Facts {
                match self {
                    $(TransportKind::$variant => <$module::$ty as Transport>::FACTS,)*
                }
            }

            /// True when the transport has an [`AsyncTransport`] side, so it can run on
            /// the event-loop engine (high `-c`).
            pub fn has_async(self) -> bool {
                match self {
                    $(TransportKind::$variant => registry!(@has_async $($aty)?),)*
                }
            }

            /// Opens a transport of this kind for one worker and hands it to `with` as its
            /// concrete type, so the caller's loop is compiled once per transport and no
            /// transport pays for another's abstraction. Nothing connects until the first
            /// call; what can fail is setting up (a hyper transport's runtime).
            pub fn open_with<W: WithTransport>(
                self,
                endpoint: &Endpoint,
                timeout: Duration,
                with: W,
            ) -> Result<W::Output, OpenTransportError> {
                match self {
                    $(TransportKind::$variant => Ok(with.run(
                        <$module::$ty as Transport>::open(endpoint.clone(), timeout)?,
                    )),)*
                }
            }

            /// Hands this kind's [`AsyncTransport`] type to `with` (which opens one per
            /// connection), compiled once per transport; `None` for a transport with no
            /// async side.
            pub fn with_async<W: WithAsyncTransport>(self, with: W) -> Option<W::Output> {
                match self {
                    $(TransportKind::$variant => registry!(@with_async with, $module, $($aty)?),)*
                }
            }
        }
    };
}

registry! {
    /// One persistent TCP connection per worker, length-prefixed postcard frames.
    Tcp = tcp::{Tcp, AsyncTcp}, "tcp";
    /// A new TCP connection per call: connect, one frame each way, close (netperf TCP_CRR).
    TcpConnect = tcp_connect::{TcpConnect, AsyncTcpConnect}, "tcp-connect";
    /// HTTP/1.1 POST /echo over a new connection per call (a lean HTTP/1.1 client).
    HttpFresh = http_fresh::{HttpFresh, AsyncHttpFresh}, "http-fresh";
    /// HTTP/1.1 POST /echo over one kept-alive connection per worker (a lean HTTP/1.1 client).
    HttpKeepalive = http_keepalive::{HttpKeepalive, AsyncHttpKeepalive}, "http-keepalive";
    /// One libcurl easy handle per worker, reused (its connection and DNS caches too).
    CurlReuse = curl_reuse::{CurlReuse}, "curl-reuse";
    /// A new libcurl easy handle per call, nothing shared.
    CurlFresh = curl_fresh::{CurlFresh}, "curl-fresh";
    /// HTTP/2 POST /echo with prior knowledge, one connection per worker, one stream at a
    /// time (the `h2` crate).
    H2 = h2::{H2, AsyncH2}, "h2";
    /// HTTP/2 with all workers sharing one connection, each call a concurrent stream.
    H2Mux = h2_mux::{H2Mux, AsyncH2Mux}, "h2-mux";
    /// gRPC unary `rpcbench.v1.Echo/Call`, one HTTP/2 connection per worker.
    Grpc = grpc::{Grpc}, "grpc";
    /// gRPC unary calls with all workers sharing one channel (one HTTP/2 connection).
    GrpcMux = grpc_mux::{GrpcMux, AsyncGrpcMux}, "grpc-mux";
    /// gRPC bidirectional `rpcbench.v1.Echo/Stream`, one stream per worker, a call being
    /// one message each way.
    GrpcStream = grpc_stream::{GrpcStream}, "grpc-stream";
    /// One persistent Unix socket connection per worker, the raw TCP frames (same host).
    Unix = unix::{Unix, AsyncUnix}, "unix";
    /// One datagram each way on a connected UDP socket per worker; no reply within the
    /// timeout is lost, and late, duplicate and reordered replies are counted.
    Udp = udp::{Udp, AsyncUdp}, "udp";
}

/// What the rest of the program asks about a transport, answered by the transport itself
/// ([`Transport::FACTS`], in its own file): adding a transport is its file and its registry
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
        multiplexing_against: &[],
        files_per_worker: 0,
        libcurl: false,
        encodings: &[],
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
    /// Every security mode.
    All,
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

    /// True when the transport runs in `security`.
    pub fn runs_secured(self, security: tls::Security) -> bool {
        match self.facts().tls {
            _ if !security.is_tls() => true,
            Tls::None => false,
            Tls::Full => !security.resumes(),
            Tls::All => true,
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

    /// Parses a stable name back.
    pub fn from_name(name: &str) -> Option<TransportKind> {
        Self::ALL.into_iter().find(|k| k.name() == name)
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
                .filter(|s| !s.resumes())
                .map(|s| format!("`{s}`"))
                .collect::<Vec<_>>()
                .join(", "),
            Tls::All => format!("all {}", number_word(tls::Security::value_variants().len())),
        };
        format!(
            "| `{}` | {} | {modes} | {security} |",
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
}

/// Something to do with a freshly opened transport of any kind: the runner's worker loop.
/// A trait rather than a closure because the transport's type is a generic parameter of
/// the method, which closures cannot have.
pub trait WithTransport {
    /// What the work returns.
    type Output;
    /// Does the work with `transport`, compiled once per concrete transport type.
    fn run<T: Transport>(self, transport: T) -> Self::Output;
}

/// Something to do with a transport's async type: the runner's event loop, which opens one
/// per connection. A trait for the same reason as [`WithTransport`].
pub trait WithAsyncTransport {
    /// What the work returns.
    type Output;
    /// Does the work with transports of type `T`, compiled once per concrete type.
    fn run<T: AsyncTransport>(self) -> Self::Output;
}

/// Why a transport could not be opened: a resource it needs could not be had.
#[derive(Debug, thiserror::Error)]
pub enum OpenTransportError {
    /// The current-thread runtime a hyper transport drives could not be built (out of
    /// file descriptors or memory).
    #[error("cannot build a worker's tokio runtime")]
    Runtime(#[source] std::io::Error),
}

impl std::fmt::Display for TransportKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

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

/// What an encoded call is (`--encoding`, `--message`): the transport sends the encoded
/// body to the encoding's route, with its content type, and hands the reply back as it
/// came; the runner encodes and decodes, so transports stay blind to encodings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rpc {
    pub encoding: crate::encoding::EncodingKind,
    pub operation: crate::encoding::Operation,
}

impl Rpc {
    /// The HTTP path its calls go to: `/rpc/EchoStruct`, or `/rpc` where the body names
    /// the operation.
    pub fn path(self) -> String {
        match self.encoding.facts().route {
            crate::encoding::Route::Fixed(path) => path.to_string(),
            crate::encoding::Route::PerOperation(prefix) => {
                format!("{prefix}{}", self.operation.name())
            }
        }
    }
}

/// One call to make.
#[derive(Debug, Clone, Copy)]
pub struct Call<'a> {
    /// Unique within the run; the reply must carry it back.
    pub seq: u64,
    /// Request body.
    pub payload: &'a [u8],
    /// Ask the server for a pattern reply of this many bytes instead of an echo.
    pub reply_len: Option<u32>,
    /// Ask the server to wait this long before replying.
    pub delay_us: u32,
    /// The largest reply payload accepted (`--max-reply`): a transport stops reading a
    /// reply that would be larger, before holding it, and fails the call with
    /// [`CallError::ReplyTooLarge`], so a broken or hostile server cannot make the client
    /// hold what it likes.
    pub max_reply: usize,
    /// For an encoded call, its encoding and operation: `payload` is then the encoded
    /// request, and the reply is judged by decoding it.
    pub rpc: Option<Rpc>,
}

impl Call<'_> {
    /// The request body's HTTP content type.
    pub fn content_type(&self) -> &'static str {
        match self.rpc {
            None => "application/octet-stream",
            Some(rpc) => rpc.encoding.facts().content_type,
        }
    }

    /// A header the call carries besides its content type: its encoding's operation
    /// header (SOAP's `SOAPAction`), name and value.
    pub fn operation_header(&self) -> Option<(&'static str, &'static str)> {
        let rpc = self.rpc?;
        let named = rpc.encoding.facts().operation_header?;
        Some((named.name, (named.value)(rpc.operation)))
    }

    /// True when a reply of HTTP status `status` is the call's reply to judge: 200, or
    /// the status its encoding's error form goes under (SOAP's Fault, 500), whose body
    /// the runner reads as the fault it is. Any other status fails the call as such.
    pub fn takes_status(&self, status: u16) -> bool {
        status == 200
            || self
                .rpc
                .is_some_and(|rpc| rpc.encoding.facts().fault_status == Some(status))
    }

    /// The payload this call asks for back: the pattern's length, or the echo's.
    pub fn expected_reply(&self) -> usize {
        self.reply_len.map_or(self.payload.len(), |n| n as usize)
    }

    /// The largest reply body accepted when the transport's framing adds at most
    /// `overhead` bytes to the payload.
    pub fn max_body(&self, overhead: usize) -> usize {
        self.max_reply.saturating_add(overhead)
    }
}

/// What came back for one call, before verification.
#[derive(Debug)]
pub struct Reply<'a> {
    /// The sequence number the reply carries (frame field or `x-rpcbench-seq`), if any.
    pub seq: Option<u64>,
    /// The reply body.
    pub body: &'a [u8],
    /// Server-side time as the server reported it.
    pub server: Option<ServerTime>,
}

/// The time a server says it spent on a call: in all (`server-timing`'s `app`, a frame's
/// `server_ns`), and, for an encoded call, its decode and encode within that.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ServerTime {
    pub total: Duration,
    pub decode: Option<Duration>,
    pub encode: Option<Duration>,
}

impl From<Duration> for ServerTime {
    fn from(total: Duration) -> ServerTime {
        ServerTime {
            total,
            decode: None,
            encode: None,
        }
    }
}

/// Where the time of one call went, for the phases that exist on this transport.
#[derive(Debug, Default, Clone, Copy)]
pub struct Phases {
    /// Resolving the target's name, when this call did a lookup.
    pub dns: Option<Duration>,
    /// Establishing a TCP connection (zero-cost calls on a reused connection leave it None).
    pub connect: Option<Duration>,
    /// The TLS handshake after the connect, when this call opened a TLS connection.
    pub tls: Option<Duration>,
    /// From starting to send the request to the first byte of the reply.
    pub first_byte: Option<Duration>,
    /// The bytes the call sent and received, headers included, as the HTTP library counted
    /// them: for a transport whose sockets the kernel is not asked about (libcurl's).
    pub wire_bytes: Option<(u64, u64)>,
}

/// Why a call did not produce a reply.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CallError {
    /// The reply did not come within the timeout.
    #[error("no reply within the timeout")]
    Timeout,
    /// The connection closed before the reply was complete.
    #[error("connection closed before the reply")]
    Closed,
    /// Connecting failed (refused, unreachable, or timed out).
    #[error("connect failed: {0}")]
    Connect(ConnectFailure),
    /// The server answered with an HTTP status other than 200.
    #[error("HTTP status {0}")]
    HttpStatus(u16),
    /// The server answered with a non-zero frame status.
    #[error("frame status {0}")]
    FrameStatus(u8),
    /// The server ended a gRPC call with a status other than OK (its code).
    #[error("gRPC status {0}")]
    GrpcStatus(u8),
    /// The reply broke the protocol (bad frame, bad HTTP).
    #[error("protocol error")]
    Protocol,
    /// Any other I/O failure.
    #[error("I/O error")]
    Io,
    /// The target's name could not be resolved.
    #[error("name lookup failed: {0}")]
    Dns(#[from] LookupNameError),
    /// TLS failed: the handshake, the certificates, or TLS against a plain port.
    #[error("TLS: {0}")]
    Tls(tls::TlsFailure),
    /// The reply was larger than `--max-reply`: the transport stopped reading it.
    #[error("reply larger than the largest accepted (--max-reply)")]
    ReplyTooLarge,
}

/// How a connect failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConnectFailure {
    Refused,
    TimedOut,
    Other,
}

impl std::fmt::Display for ConnectFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ConnectFailure::Refused => "refused",
            ConnectFailure::TimedOut => "timed out",
            ConnectFailure::Other => "failed",
        })
    }
}

impl CallError {
    /// True when the call counts as lost (sent, but no reply) rather than as an error.
    pub fn is_lost(&self) -> bool {
        matches!(self, CallError::Timeout | CallError::Closed)
    }

    /// The stable key this error is counted under in tables and JSON.
    pub fn kind(&self) -> ErrorKind {
        use ErrorKind::Named;
        match self {
            CallError::Timeout => Named("timeout"),
            CallError::Closed => Named("closed"),
            CallError::Connect(ConnectFailure::Refused) => Named("connect_refused"),
            CallError::Connect(ConnectFailure::TimedOut) => Named("connect_timeout"),
            CallError::Connect(ConnectFailure::Other) => Named("connect"),
            CallError::HttpStatus(code) => ErrorKind::HttpStatus(*code),
            CallError::FrameStatus(code) => ErrorKind::FrameStatus(*code),
            CallError::GrpcStatus(code) => {
                grpc::code_kind(*code).map_or(ErrorKind::GrpcStatus(*code), Named)
            }
            CallError::Protocol => Named("protocol"),
            CallError::Io => Named("io"),
            CallError::Dns(LookupNameError::NoAddress) => Named("dns"),
            CallError::Dns(LookupNameError::Timeout) => Named("dns_timeout"),
            CallError::Dns(LookupNameError::Other) => Named("dns_error"),
            CallError::Tls(failure) => Named(failure.kind()),
            CallError::ReplyTooLarge => Named("reply_above_max"),
        }
    }

    /// Classifies a failed connect.
    pub fn from_connect(e: &std::io::Error) -> CallError {
        use std::io::ErrorKind::*;
        CallError::Connect(match e.kind() {
            ConnectionRefused => ConnectFailure::Refused,
            TimedOut | WouldBlock => ConnectFailure::TimedOut,
            _ => ConnectFailure::Other,
        })
    }

    /// Classifies a failed read or write on an open connection.
    pub fn from_io(e: &std::io::Error) -> CallError {
        use std::io::ErrorKind::*;
        if let Some(failure) = tls::TlsFailure::of_io(e) {
            return CallError::Tls(failure);
        }
        match e.kind() {
            TimedOut | WouldBlock => CallError::Timeout,
            UnexpectedEof | ConnectionReset | ConnectionAborted | BrokenPipe => CallError::Closed,
            _ => CallError::Io,
        }
    }
}

/// One way of making calls, owned by one worker thread.
pub trait Transport: Sized {
    /// What the rest of the program asks about this transport ([`Facts`]).
    const FACTS: Facts;

    /// A transport for one worker. Nothing connects until the first call; what can fail
    /// is a resource the transport needs to exist (a hyper transport's runtime).
    fn open(endpoint: Endpoint, timeout: Duration) -> Result<Self, OpenTransportError>;

    /// Makes one call and returns the raw reply. Fills `phases` for what it measured.
    fn call(&mut self, call: &Call, phases: &mut Phases) -> Result<Reply<'_>, CallError>;

    /// Finishes a call whose reply has been verified: transports with a connection per
    /// call close it here, inside the timed call, since tearing down is part of its cost.
    fn end_call(&mut self) {}

    /// Drops any connection so the next call starts clean; called after a failed or
    /// mismatched call, when the connection's state can no longer be trusted.
    fn reset(&mut self);

    /// Connections opened so far.
    fn connects(&self) -> u64;

    /// Replies to earlier calls that arrived again, so far. Kept on the transport, not
    /// on the reply, so that one read by a call that then fails is still counted.
    fn duplicates(&self) -> u64 {
        0
    }

    /// Replies that arrived for an earlier call that had already been counted lost, so
    /// far (a datagram transport's late replies; extra datagrams, not calls).
    fn late_replies(&self) -> u64 {
        0
    }

    /// Replies (late or duplicate) that arrived after a reply to a later call, so far.
    fn reordered(&self) -> u64 {
        0
    }
}

/// One way of making calls from an event loop: one per connection, many to a thread. The
/// counterpart of [`Transport`], in the same file as the blocking transport of the same
/// name, with the same constants (the registry reads them from the blocking side) and the
/// same rules: one call at a time, the raw reply handed back, `end_call` inside the timed
/// call, `reset` after a failed one. Its futures never leave the thread that made them.
pub trait AsyncTransport: Sized + 'static {
    /// A transport for one connection. Nothing connects until the first call.
    fn open(endpoint: Endpoint, timeout: Duration) -> Self;

    /// Makes one call and returns the raw reply. Fills `phases` for what it measured.
    // The lint asks for a `Send` bound on the future; an event loop runs its connections
    // on one thread, so none is needed, and the futures hold `!Send` state (`Cell`s).
    #[allow(async_fn_in_trait)]
    async fn call(&mut self, call: &Call<'_>, phases: &mut Phases) -> Result<Reply<'_>, CallError>;

    /// As [`Transport::end_call`].
    fn end_call(&mut self) {}

    /// As [`Transport::reset`].
    fn reset(&mut self);

    /// Connections opened so far.
    fn connects(&self) -> u64;

    /// As [`Transport::duplicates`].
    fn duplicates(&self) -> u64 {
        0
    }

    /// As [`Transport::late_replies`].
    fn late_replies(&self) -> u64 {
        0
    }

    /// As [`Transport::reordered`].
    fn reordered(&self) -> u64 {
        0
    }
}

/// Runs `fut` within `timeout`; a connect that was still under way (`connecting` set)
/// counts as a connect timeout, anything later as a lost call. For the hyper transports,
/// whose runtime lives for one call at a time; the event loop's use [`CallTimer`].
pub(crate) async fn within<T, E: From<CallError>>(
    timeout: Duration,
    connecting: &Cell<bool>,
    fut: impl Future<Output = Result<T, E>>,
) -> Result<T, E> {
    match tokio::time::timeout(timeout, fut).await {
        Ok(res) => res,
        Err(_) => Err(timed_out(connecting).into()),
    }
}

/// The run's TLS and the ALPN protocol a connection offers, or `None` for plain TCP.
pub type Secure<'a> = Option<(&'a tls::TlsClient, tls::Alpn)>;

/// How long opening a connection took: the TCP connect, and the TLS handshake after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Took {
    /// The TCP connect.
    pub connect: Duration,
    /// The TLS handshake, on a TLS connection.
    pub tls: Option<Duration>,
}

impl Took {
    /// Records both as the call's `connect` and `tls` phases.
    pub fn record(self, phases: &mut Phases) {
        phases.connect = Some(self.connect);
        phases.tls = self.tls;
    }
}

/// Opens a tokio TCP connection with Nagle off (replies are small and latency is the
/// product) and, when `secure` says so, runs the TLS handshake on it (giving up at
/// `deadline`); returns it and what each step took. Every transport driven by tokio
/// connects through here: the hyper ones, tonic's, and the event loop's. The socket
/// carries a [`Probe`](crate::tcpinfo::Probe) into `tcp_info`, the run's `TCP_INFO` sums.
pub(crate) async fn connect_nodelay(
    addr: SocketAddr,
    secure: Secure<'_>,
    deadline: Instant,
    tcp_info: &Arc<TcpInfoTally>,
) -> Result<(tls::AsyncSock, Took), CallError> {
    use std::os::fd::AsFd;
    let started = Instant::now();
    let stream = tokio::net::TcpStream::connect(addr)
        .await
        .map_err(|e| CallError::from_connect(&e))?;
    let connect = started.elapsed();
    // The segments retransmitted so far (the SYN's) are told apart.
    let probe = crate::tcpinfo::Probe::opened(tcp_info, stream.as_fd(), connect);
    stream
        .set_nodelay(true)
        .map_err(|e| CallError::from_io(&e))?;
    match secure {
        None => Ok((
            tls::AsyncSock::new(tls::AsyncIo::Plain(stream, false), probe),
            Took { connect, tls: None },
        )),
        Some((client, alpn)) => {
            let (stream, took) = client.handshake(stream, alpn, deadline).await?;
            Ok((
                tls::AsyncSock::new(tls::AsyncIo::Tls(Box::new(stream)), probe),
                Took {
                    connect,
                    tls: Some(took),
                },
            ))
        }
    }
}

/// Counts a connection an async transport has just opened (`connect` as a connection's
/// `connect` returns it): one more in `connects`, its time as the call's connect phase,
/// and the end of the `connecting` window, so a timeout from here on is a lost call.
pub(crate) fn opened<C>(
    (conn, took): (C, Took),
    connects: &mut u64,
    phases: &mut Phases,
    connecting: &Cell<bool>,
) -> C {
    *connects += 1;
    took.record(phases);
    connecting.set(false);
    conn
}

/// What a timed-out call counts as: a connect timeout while `connecting`, else lost.
fn timed_out(connecting: &Cell<bool>) -> CallError {
    if connecting.get() {
        CallError::Connect(ConnectFailure::TimedOut)
    } else {
        CallError::Timeout
    }
}

/// The timer of one event-loop connection's calls: one tokio `Sleep`, moved on to each
/// call's deadline, with [`within`]'s rules. Not `tokio::time::timeout` per call, which
/// files a timer in the wheel and takes it out again on every call: moving a filed timer
/// to a later deadline is one atomic compare-and-swap (tokio re-files it only when the
/// old deadline comes), a few hundred instructions less per call.
#[derive(Default)]
pub(crate) struct CallTimer(Option<std::pin::Pin<Box<tokio::time::Sleep>>>);

impl CallTimer {
    /// Runs `fut` until `deadline`.
    pub async fn within<T, E: From<CallError>>(
        &mut self,
        deadline: Instant,
        connecting: &Cell<bool>,
        fut: impl Future<Output = Result<T, E>>,
    ) -> Result<T, E> {
        remaining(deadline)?;
        let deadline = tokio::time::Instant::from_std(deadline);
        let sleep = match &mut self.0 {
            Some(sleep) => {
                sleep.as_mut().reset(deadline);
                sleep
            }
            slot @ None => slot.insert(Box::pin(tokio::time::sleep_until(deadline))),
        };
        tokio::select! {
            biased;
            done = fut => done,
            () = sleep.as_mut() => Err(timed_out(connecting).into()),
        }
    }
}

/// Time left before `deadline`, or a timeout error when none is.
pub(crate) fn remaining(deadline: Instant) -> Result<Duration, CallError> {
    deadline
        .checked_duration_since(Instant::now())
        .filter(|d| !d.is_zero())
        .ok_or(CallError::Timeout)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::ValueEnum;

    /// The registry, listed once: a new transport adds its line here too, with the
    /// connections 8 workers making 100 calls should open, the port it calls, and whether
    /// it has an async side (for the event loop).
    const EXPECTED: [(&str, u64, Port, bool); 13] = [
        ("tcp", 8, Port::Tcp, true),
        ("tcp-connect", 100, Port::Tcp, true),
        ("http-fresh", 100, Port::Http, true),
        ("http-keepalive", 8, Port::Http, true),
        ("curl-reuse", 8, Port::Http, false),
        ("curl-fresh", 100, Port::Http, false),
        ("h2", 8, Port::Http, true),
        ("h2-mux", 1, Port::Http, true),
        ("grpc", 8, Port::Http, false),
        ("grpc-mux", 1, Port::Http, true),
        ("grpc-stream", 8, Port::Http, false),
        ("unix", 8, Port::Unix, true),
        ("udp", 8, Port::Udp, true),
    ];

    /// Hands back the async type's name, to show `with_async` picks the registry's type.
    struct AsyncName;

    impl WithAsyncTransport for AsyncName {
        type Output = &'static str;
        fn run<T: AsyncTransport>(self) -> &'static str {
            std::any::type_name::<T>()
        }
    }

    #[test]
    fn registry_lists_every_transport_once() {
        // Connects expected of a healthy run of 8 workers and 100 calls.
        let listed: Vec<(&str, u64, Port, bool)> = TransportKind::ALL
            .iter()
            .map(|k| {
                (
                    k.name(),
                    k.expected_connects(8, 100),
                    k.port(),
                    k.has_async(),
                )
            })
            .collect();
        for kind in TransportKind::ALL {
            let name = kind.with_async(AsyncName);
            assert_eq!(name.is_some(), kind.has_async(), "{kind}");
            if let Some(name) = name {
                assert!(name.contains("::Async"), "{kind}: {name}");
            }
        }
        assert_eq!(listed, EXPECTED);
        let mut names: Vec<&str> = listed.iter().map(|l| l.0).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(
            names.len(),
            TransportKind::ALL.len(),
            "a name is used twice"
        );
        for kind in TransportKind::ALL {
            // One name everywhere: from_name, the CLI value, the JSON string, Display.
            assert_eq!(TransportKind::from_name(kind.name()), Some(kind));
            let cli = kind
                .to_possible_value()
                .expect("every transport is a CLI value");
            assert_eq!(cli.get_name(), kind.name());
            assert!(cli.get_help().is_some(), "{kind}: no doc line for --help");
            assert_eq!(
                serde_json::to_string(&kind).unwrap(),
                format!("\"{}\"", kind.name())
            );
            assert_eq!(
                serde_json::from_str::<TransportKind>(&format!("\"{kind}\"")).unwrap(),
                kind
            );
            assert_eq!(kind.to_string(), kind.name());
            assert_eq!(kind.is_http(), kind.port() == Port::Http);
        }
        assert_eq!(TransportKind::from_name("carrier-pigeon"), None);
    }
}
