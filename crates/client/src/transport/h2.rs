//! `h2`: HTTP/2 with prior knowledge (no upgrade, no TLS), one connection per worker and
//! one stream at a time: `POST /echo` as on HTTP/1.1, each call a new stream on the
//! worker's kept connection, driven frame by frame by the call ([`super::h2_wire`], on
//! the `h2` crate's frame layer).
//!
//! Both engines share [`H2Conn`]: the blocking one runs its calls on the worker's own
//! current-thread runtime, the event loop in one of its connection tasks.
//!
//! `grpc` makes its calls on an [`H2Conn`] too; `h2-mux` and `grpc-mux` open their socket
//! here ([`open_stream`]) for their shared connection ([`super::h2_mux_wire`]), and
//! `h2-mux` makes its requests here ([`echo_request`]). This file also holds what
//! `grpc-stream` uses, whose stream tonic drives: the `h2` crate's client connection
//! ([`handshake`]).

use super::h2_wire::{CONNECTION_WINDOW, Outgoing, Replied, STREAM_WINDOW, Wire};
use super::http::{self, worker_runtime};
use super::tls::{AsyncSock, TlsNoted, Watched};
use super::{
    AsyncTransport, Call, CallError, CallTimer, Counts, Endpoint, Facts, OpenTransportError,
    Phases, Port, Reply, Transport, remaining,
};
use bytes::Bytes;
use hyper::header::{self, HeaderValue};
use std::cell::Cell;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// The `h2` transport on the blocking engine.
pub struct H2 {
    /// The worker's runtime: the connection's task runs on it while a call blocks on it.
    rt: tokio::runtime::Runtime,
    /// The connection and what its calls need.
    conn: H2Conn,
}

impl Transport for H2 {
    const FACTS: Facts = Facts {
        summary: "HTTP/2 with prior knowledge, `POST /echo` as a stream on one kept connection per worker, one stream at a time, each call driving the connection frame by frame itself (on the `h2` crate's frame layer, without its stream state machine: `crates/client/src/transport/h2_wire.rs`)",
        persistent: true,
        port: Port::Http,
        alpn: super::tls::Alpn::H2,
        round_trips: Some(1.0),
        files_per_worker: super::FILES_PER_RUNTIME,
        encodings: crate::encoding::EncodingKind::ALL,
        ..Facts::DEFAULT
    };

    fn open(endpoint: Endpoint, timeout: Duration) -> Result<H2, OpenTransportError> {
        Ok(H2 {
            rt: worker_runtime()?,
            conn: H2Conn::new(endpoint, timeout),
        })
    }

    fn call(&mut self, call: &Call, phases: &mut Phases) -> Result<Reply<'_>, CallError> {
        let req = echo_request(&mut self.conn.origin, call)?;
        let done = self.conn.call_blocking(&self.rt, req, phases)?;
        Ok(self.conn.reply(&done))
    }

    fn reset(&mut self) {
        self.conn.open = None;
    }

    fn counts(&self) -> Counts {
        Counts::connects(self.conn.connects)
    }
}

/// The `h2` transport on the event loop: one connection per task, driven by a task of its
/// own on the loop's runtime.
pub struct AsyncH2 {
    /// The timer of this connection's calls.
    timer: CallTimer,
    /// The connection and what its calls need.
    conn: H2Conn,
}

impl AsyncTransport for AsyncH2 {
    fn open(endpoint: Endpoint, timeout: Duration) -> AsyncH2 {
        AsyncH2 {
            timer: CallTimer::default(),
            conn: H2Conn::new(endpoint, timeout),
        }
    }

    async fn call(&mut self, call: &Call<'_>, phases: &mut Phases) -> Result<Reply<'_>, CallError> {
        let deadline = Instant::now() + self.conn.timeout;
        let AsyncH2 { timer, conn } = self;
        let req = echo_request(&mut conn.origin, call)?;
        let addr = match conn.open {
            Some(_) => None,
            None => Some(
                conn.endpoint
                    .addr_async(Port::Http, deadline, phases)
                    .await?,
            ),
        };
        let connecting = Cell::new(addr.is_some());
        let done = timer
            .within(
                deadline,
                &connecting,
                conn.exchange(req, addr, deadline, phases, &connecting),
            )
            .await?;
        Ok(conn.reply(&done))
    }

    fn reset(&mut self) {
        self.conn.open = None;
    }

    fn counts(&self) -> Counts {
        Counts::connects(self.conn.connects)
    }
}

/// One worker's HTTP/2 connection and what its calls need, whichever engine runs them;
/// `grpc` makes its calls on one too.
pub(super) struct H2Conn {
    /// Where the calls go.
    endpoint: Endpoint,
    /// Longest a call may take.
    timeout: Duration,
    /// The open connection, once there is one.
    pub open: Option<Wire<AsyncSock>>,
    /// The last reply's body.
    pub body: Vec<u8>,
    /// Connections opened so far.
    pub connects: u64,
    /// Where every request's URI starts.
    pub origin: Origin,
}

impl H2Conn {
    pub fn new(endpoint: Endpoint, timeout: Duration) -> H2Conn {
        H2Conn {
            origin: Origin::new(&endpoint),
            endpoint,
            timeout,
            open: None,
            body: Vec::new(),
            connects: 0,
        }
    }

    /// Makes `req` on the blocking engine: on `rt`, the worker's runtime, within the
    /// call's timeout (a lookup, when there is no connection, before it: the resolver
    /// blocks on a runtime of its own).
    pub fn call_blocking(
        &mut self,
        rt: &tokio::runtime::Runtime,
        req: Outgoing,
        phases: &mut Phases,
    ) -> Result<Replied, CallError> {
        let deadline = Instant::now() + self.timeout;
        let addr = match self.open {
            Some(_) => None,
            None => Some(self.endpoint.http_addr(deadline, phases)?),
        };
        let connecting = Cell::new(addr.is_some());
        rt.block_on(super::within(
            remaining(deadline)?,
            &connecting,
            self.exchange(req, addr, deadline, phases, &connecting),
        ))
    }

    /// Opens the connection to `addr` when there is none (`addr` is then the looked-up
    /// address), and makes `req` as a new stream on it.
    async fn exchange(
        &mut self,
        req: Outgoing,
        addr: Option<SocketAddr>,
        deadline: Instant,
        phases: &mut Phases,
        connecting: &Cell<bool>,
    ) -> Result<Replied, CallError> {
        let wire = match (&mut self.open, addr) {
            (Some(wire), _) => wire,
            (slot, Some(addr)) => {
                // Boxed, so that the calls' future does not carry (and move on every
                // call) the kilobytes of the connect and TLS handshake's.
                let (wire, took) = Box::pin(open_wire(addr, deadline, &self.endpoint)).await?;
                self.connects += 1;
                took.record(phases);
                connecting.set(false);
                slot.insert(wire)
            }
            (None, None) => unreachable!("an address is looked up when there is no connection"),
        };
        let done = wire.call(req, &mut self.body, phases).await;
        if !wire.usable() {
            // The server sent GOAWAY, or the stream ids are spent: the next call opens a
            // new connection.
            self.open = None;
        }
        done
    }

    /// The reply of a finished `/echo` exchange: the body, and the seq and server time
    /// the reply's head carried.
    fn reply(&self, replied: &Replied) -> Reply<'_> {
        Reply {
            seq: http::header_seq(&replied.head),
            body: &self.body,
            server: http::server_timing(&replied.head),
        }
    }
}

/// Opens a worker's connection to `addr`; returns it and what opening it took.
async fn open_wire(
    addr: SocketAddr,
    deadline: Instant,
    endpoint: &Endpoint,
) -> Result<(Wire<AsyncSock>, super::Took), CallError> {
    let (stream, took) = open_stream(addr, deadline, endpoint).await?;
    let wire = Wire::open(stream, std::sync::Arc::new(TlsNoted::default())).await?;
    Ok((wire, took))
}

/// The scheme and authority every request's URI starts with (`http://host:port` for the
/// endpoint's HTTP port, an IPv6 literal in brackets; HTTP/2 carries them as `:scheme`
/// and `:authority` pseudo-headers, not as `Host`), and the last URI made from it: a
/// run's calls mostly ask for the same path, so the URI is parsed once, not per call.
pub(super) struct Origin {
    base: String,
    last: Option<(String, hyper::Uri)>,
}

impl Origin {
    pub(super) fn new(endpoint: &Endpoint) -> Origin {
        Origin::with_base(origin(endpoint))
    }

    /// The origin `base` (`scheme://host:port`): HTTP/3's, at the QUIC port.
    pub(super) fn with_base(base: String) -> Origin {
        Origin { base, last: None }
    }

    /// The URI of `path` at the origin.
    pub(super) fn uri(&mut self, path: &str) -> Result<hyper::Uri, CallError> {
        if let Some((last, uri)) = &self.last
            && last == path
        {
            return Ok(uri.clone());
        }
        let uri: hyper::Uri = format!("{}{path}", self.base)
            .parse()
            .map_err(|_| CallError::Protocol)?;
        self.last = Some((path.to_string(), uri.clone()));
        Ok(uri)
    }
}

/// `http://host:port` for the endpoint's HTTP port (an IPv6 literal in brackets).
pub(super) fn origin(endpoint: &Endpoint) -> String {
    format!("{}://{}", endpoint.scheme(), authority(endpoint))
}

/// `host:port` of the endpoint's HTTP port (an IPv6 literal in brackets): HTTP/2's
/// `:authority`.
pub(super) fn authority(endpoint: &Endpoint) -> String {
    let host = crate::resolve::url_host(&endpoint.host());
    format!("{host}:{}", endpoint.http_port)
}

/// One HTTP/2 connection's request handle. The `h2` crate (hyper's own HTTP/2 engine) is
/// driven directly rather than through hyper's client, so that a request's HEADERS and
/// DATA frames are queued together and go out in one write, as nghttp2 (h2load) and Go
/// send them; through hyper's client they went out in two writes (strace: a 28-byte
/// HEADERS writev, then a 73-byte DATA writev), which woke the server twice per call.
pub(super) type Sender = ::h2::client::SendRequest<Bytes>;

/// A connected socket to `addr` (TCP_NODELAY, then TLS with ALPN `h2` when the run asks
/// for it), and what connecting took.
pub(super) async fn open_stream(
    addr: SocketAddr,
    deadline: Instant,
    endpoint: &Endpoint,
) -> Result<(AsyncSock, super::Took), CallError> {
    let secure = endpoint.secure(super::tls::Alpn::H2);
    super::connect_nodelay(addr, secure, deadline, &endpoint.tcp_info).await
}

/// The HTTP/2 handshake on a connected `stream`, whose TLS failures go to `noted`; the
/// connection is then driven by a task on the current runtime.
pub(super) async fn handshake<T>(
    stream: T,
    noted: std::sync::Arc<TlsNoted>,
) -> Result<Sender, CallError>
where
    T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let stream = Watched::new(stream, noted);
    let (sender, conn) = ::h2::client::Builder::new()
        .initial_window_size(STREAM_WINDOW)
        .initial_connection_window_size(CONNECTION_WINDOW)
        // Streams opened before the server's SETTINGS arrive: as h2_mux_wire assumes.
        .initial_max_send_streams(super::h2_mux_wire::ASSUMED_MAX_STREAMS)
        .handshake::<_, Bytes>(stream)
        .await
        .map_err(|e| classify(&e))?;
    tokio::spawn(async move {
        // Errors surface on the streams; the connection task just ends.
        let _ = conn.await;
    });
    Ok(sender)
}

/// `POST /echo` for `call`: its URI, its seq header and its payload.
pub(super) fn echo_request(origin: &mut Origin, call: &Call<'_>) -> Result<Outgoing, CallError> {
    Ok(Outgoing {
        uri: origin.uri(&Endpoint::echo_path(call))?,
        headers: request_headers(call),
        payload: Bytes::copy_from_slice(call.payload),
        max_body: call.max_reply,
        fault_status: call.rpc.and_then(|rpc| rpc.encoding.facts().fault_status),
    })
}

/// A call's request headers: its seq, the payload's content type, and its encoding's
/// operation header if it has one.
pub(super) fn request_headers(call: &Call<'_>) -> hyper::HeaderMap {
    let mut headers = hyper::HeaderMap::with_capacity(3);
    // Never indexed by HPACK: a new value in every request, as the server's reply
    // headers (see `server::http::reply::unindexed`).
    let mut seq = HeaderValue::from(call.seq);
    seq.set_sensitive(true);
    headers.insert(crate::wire::SEQ_HEADER, seq);
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(call.content_type()),
    );
    if let Some((name, value)) = call.operation_header() {
        headers.insert(name, HeaderValue::from_static(value));
    }
    headers
}

/// What an HTTP/2 failure means for the call: an I/O error as such; the connection going
/// away (GOAWAY, or its end) as `Closed`; anything else, a stream reset or a malformed
/// frame, as a protocol error.
pub(super) fn classify(e: &::h2::Error) -> CallError {
    if let Some(io) = e.get_io() {
        CallError::from_io(io)
    } else if e.is_go_away() {
        CallError::Closed
    } else {
        CallError::Protocol
    }
}

#[cfg(test)]
mod tests {
    /// What the rest of the program reads from its facts: the connections a healthy run
    /// of 8 workers and 100 calls opens, the port, an event-loop side.
    #[test]
    fn its_facts() {
        super::super::expect_facts("h2", 8, super::super::Port::Http, true);
    }
}
