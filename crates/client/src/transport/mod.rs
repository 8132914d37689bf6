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
mod call;
mod connect;
mod curl;
mod endpoint;
mod facts;
mod h1;
mod h2_mux_wire;
mod h2_read;
mod h2_wire;
mod h3_conn;
mod hpack;
mod http;
mod mux;
mod quic_conn;
mod quic_loop;
pub mod tls;

pub use call::{Call, CallError, ConnectFailure, Phases, Reply, Rpc, ServerTime};
pub(crate) use connect::{CallTimer, connect_nodelay, opened, remaining, within};
pub use connect::{Secure, Took};
pub use curl::{BundledLibcurl, LinkedLibcurl};
pub use endpoint::{Endpoint, RunShared};
pub use facts::{FILES_PER_CURL_HANDLE, FILES_PER_RUNTIME, Facts, Port, Tls};
pub use h3_conn::probe as h3_probe;
pub use quic_conn::probe as quic_probe;
use std::time::Duration;

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
    /// One QUIC connection per worker (TLS 1.3 built in), each call a stream of its own
    /// carrying the raw frames.
    Quic = quic::{Quic, AsyncQuic}, "quic";
    /// A new QUIC connection per call: a full TLS 1.3 handshake, the call on a stream,
    /// close.
    QuicConnect = quic_connect::{QuicConnect, AsyncQuicConnect}, "quic-connect";
    /// HTTP/3 POST /echo, one QUIC connection per worker, one request stream at a time.
    H3 = h3::{H3}, "h3";
    /// HTTP/3 with all workers sharing one QUIC connection, each call a concurrent stream.
    H3Mux = h3_mux::{H3Mux}, "h3-mux";
    /// A new QUIC connection per call: a full TLS 1.3 handshake, HTTP/3 POST /echo, close.
    H3Fresh = h3_fresh::{H3Fresh}, "h3-fresh";
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

/// What a transport counts itself, so far: a run's figures are these at its end less
/// these at the end of its warm-up.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// Connections opened.
    pub connects: u64,
    /// Replies to earlier calls that arrived again.
    pub duplicates: u64,
    /// Replies that arrived for an earlier call that had already been counted lost (a
    /// datagram transport's late replies; extra datagrams, not calls).
    pub late_replies: u64,
    /// Replies (late or duplicate) that arrived after a reply to a later call.
    pub reordered: u64,
    /// Connections that sent their first request in early data (`tls13-0rtt`, QUIC).
    pub zero_rtt_sent: u64,
    /// Of those, the connections whose early data the server accepted.
    pub zero_rtt_accepted: u64,
    /// QUIC Retry packets received: handshakes that took one more round trip.
    pub quic_retries: u64,
}

impl std::iter::Sum for Counts {
    fn sum<I: Iterator<Item = Counts>>(all: I) -> Counts {
        all.fold(Counts::default(), |a, b| Counts {
            connects: a.connects + b.connects,
            duplicates: a.duplicates + b.duplicates,
            late_replies: a.late_replies + b.late_replies,
            reordered: a.reordered + b.reordered,
            zero_rtt_sent: a.zero_rtt_sent + b.zero_rtt_sent,
            zero_rtt_accepted: a.zero_rtt_accepted + b.zero_rtt_accepted,
            quic_retries: a.quic_retries + b.quic_retries,
        })
    }
}

impl Counts {
    /// Only connections: what a transport whose replies cannot repeat counts.
    pub fn connects(connects: u64) -> Counts {
        Counts {
            connects,
            ..Counts::default()
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

    /// What it has counted so far besides the calls the runner counts itself
    /// (connections opened, duplicate, late and reordered replies). Kept on the transport,
    /// not on the reply, so that a reply read by a call that then fails is still counted.
    fn counts(&self) -> Counts;
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

    /// As [`Transport::counts`].
    fn counts(&self) -> Counts;

    /// Ends the transport's connections at the end of a run, after its measured window:
    /// for a protocol whose close is sent by the runtime (QUIC's), so that it is sent
    /// before the event loop ends. Nothing by default: a socket closes when dropped.
    #[allow(async_fn_in_trait)]
    async fn close(&mut self) {}
}

/// What each transport's own unit test holds its facts to: the connections 8 workers
/// making 100 calls should open, the port it calls, and whether it has an async side (for
/// the event loop). `tests/registry.rs` checks that every transport's file calls it.
#[cfg(test)]
fn expect_facts(name: &str, connects_8_by_100: u64, port: Port, has_async: bool) {
    let kind = TransportKind::from_name(name).expect("a registered transport");
    assert_eq!(
        (
            kind.expected_connects(8, 100),
            kind.port(),
            kind.has_async()
        ),
        (connects_8_by_100, port, has_async),
        "{name}"
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::ValueEnum;

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
        for kind in TransportKind::ALL {
            let name = kind.with_async(AsyncName);
            assert_eq!(name.is_some(), kind.has_async(), "{kind}");
            if let Some(name) = name {
                assert!(name.contains("::Async"), "{kind}: {name}");
            }
        }
        let mut names: Vec<&str> = TransportKind::ALL.iter().map(|k| k.name()).collect();
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
