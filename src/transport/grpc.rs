//! `grpc`: the unary method `rpcbench.v1.Echo/Call` with tonic, one channel (one HTTP/2
//! connection) per worker, one call at a time, on the worker's own current-thread runtime
//! as `h2` does.
//!
//! The call is the one message each way that the generated client's `call` sends, made
//! one level down (`tonic::client::Grpc::server_streaming`), so that the arrival of the
//! reply's headers can be timed as the first byte; the reply's trailers are then read for
//! `grpc-status` and `server-timing`. The helpers the other gRPC transports share (the
//! connector that counts connections, the request, the error kinds) live here too, as
//! `h2.rs` holds what `h2-mux` uses.

use super::http::{self, worker_runtime};
use super::{
    Call, CallError, Endpoint, OpenTransportError, Phases, Port, Reply, Transport, remaining,
};
use crate::proto::{CALL_PATH, EchoReply, EchoRequest};
use bytes::Bytes;
use hyper::http::uri::PathAndQuery;
use hyper_util::rt::TokioIo;
use std::cell::Cell;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use tonic::Code;
use tonic::codegen::{BoxFuture, Service};
use tonic::transport::Channel;

/// The client of one channel.
pub(super) type Client = tonic::client::Grpc<Channel>;

/// The `grpc` transport.
pub struct Grpc {
    rt: tokio::runtime::Runtime,
    endpoint: Endpoint,
    timeout: Duration,
    client: Option<Client>,
    /// The connections this worker's channel opened, and the time of the last connect.
    opened: Arc<Opened>,
    /// Connections already counted in a call's phases.
    seen: u64,
    /// The last reply's payload.
    body: Bytes,
}

impl Transport for Grpc {
    const PERSISTENT: bool = true;
    const PORT: Port = Port::Http;

    fn open(endpoint: Endpoint, timeout: Duration) -> Result<Grpc, OpenTransportError> {
        Ok(Grpc {
            rt: worker_runtime()?,
            endpoint,
            timeout,
            client: None,
            opened: Arc::default(),
            seen: 0,
            body: Bytes::new(),
        })
    }

    fn call(&mut self, call: &Call, phases: &mut Phases) -> Result<Reply<'_>, CallError> {
        let deadline = Instant::now() + self.timeout;
        let req = request(call);
        let Grpc {
            rt,
            endpoint,
            client,
            opened,
            body,
            ..
        } = self;
        // The lookup runs outside our runtime: the resolver blocks on a runtime of its own.
        let addr = match client {
            Some(_) => None,
            None => Some(endpoint.http_addr(deadline, phases)?),
        };
        let connecting = Cell::new(addr.is_some());
        let result = rt.block_on(super::within(remaining(deadline)?, &connecting, async {
            let client = match (client, addr) {
                (Some(c), _) => c,
                (slot, Some(addr)) => {
                    let channel = connect(endpoint, addr, opened.clone(), remaining(deadline)?).await?;
                    connecting.set(false);
                    slot.insert(tonic::client::Grpc::new(channel))
                }
                (None, None) => unreachable!("an address is looked up when there is no channel"),
            };
            unary(client, req, phases).await
        }));
        // A connect the channel made, during this call, is this call's connect phase.
        let now = opened.count.load(Relaxed);
        if now != self.seen {
            self.seen = now;
            opened.record(phases);
        }
        let (reply, server) = result.map_err(|e| opened.explain(e))?;
        *body = reply.payload;
        Ok(Reply {
            seq: Some(reply.seq),
            body: &self.body,
            server,
        })
    }

    fn reset(&mut self) {
        self.client = None;
    }

    fn connects(&self) -> u64 {
        self.opened.count.load(Relaxed)
    }
}

/// Connections a channel opened, counted by its connector.
#[derive(Debug, Default)]
pub(super) struct Opened {
    /// Connections opened so far.
    pub count: AtomicU64,
    /// How long the last connect (and its TLS handshake) took.
    took: Mutex<Option<super::Took>>,
    /// The TLS failure a connection's read or write met, if any ([`Watched`]).
    failure: Mutex<Option<super::tls::TlsFailure>>,
}

impl Opened {
    /// How long the last connect (and its TLS handshake) took.
    pub fn took(&self) -> Option<super::Took> {
        *self.took.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// What a failed call counts as: the TLS failure its connection met, when it met one
    /// (hyper's HTTP/2 connection task sees the error; the call, only that the connection
    /// ended, which would count it lost), else `e`.
    pub fn explain(&self, e: CallError) -> CallError {
        match self.failure.lock().unwrap_or_else(|p| p.into_inner()).take() {
            Some(failure) if !matches!(e, CallError::Tls(_)) => CallError::Tls(failure),
            _ => e,
        }
    }

    /// Records the last connect as the call's `connect` and `tls` phases.
    pub fn record(&self, phases: &mut Phases) {
        if let Some(took) = self.took() {
            took.record(phases);
        }
    }
}

/// The connector of a channel: a TCP connection to a fixed address (looked up by the
/// transport, as every transport does, not by tonic), Nagle off, counted in `opened`. Every
/// connection the channel ever opens goes through here, its reconnects included, so
/// `connects` is what was opened.
#[derive(Clone)]
struct Dialer {
    addr: SocketAddr,
    opened: Arc<Opened>,
    /// The run's TLS (ALPN `h2`), if any.
    tls: Option<Arc<super::tls::TlsClient>>,
    /// How long a connect and its handshake may take (the transport's call timeout).
    timeout: Duration,
    /// The run's `TCP_INFO` sums, for the connections' probes.
    tcp_info: Arc<crate::tcpinfo::TcpInfoTally>,
}

/// A channel's connection, telling [`Opened`] of a TLS failure on it.
pub(super) struct Watched {
    sock: super::tls::AsyncSock,
    opened: Arc<Opened>,
}

impl Watched {
    /// Passes `polled` on, noting the TLS failure it carries.
    fn note<T>(&self, polled: Poll<std::io::Result<T>>) -> Poll<std::io::Result<T>> {
        if let Poll::Ready(Err(e)) = &polled
            && let Some(failure) = super::tls::TlsFailure::of_io(e)
        {
            *self.opened.failure.lock().unwrap_or_else(|p| p.into_inner()) = Some(failure);
        }
        polled
    }
}

impl tokio::io::AsyncRead for Watched {
    fn poll_read(
        self: std::pin::Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let me = self.get_mut();
        let polled = std::pin::Pin::new(&mut me.sock).poll_read(cx, buf);
        me.note(polled)
    }
}

impl tokio::io::AsyncWrite for Watched {
    fn poll_write(
        self: std::pin::Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let me = self.get_mut();
        let polled = std::pin::Pin::new(&mut me.sock).poll_write(cx, buf);
        me.note(polled)
    }

    fn poll_write_vectored(
        self: std::pin::Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let me = self.get_mut();
        let polled = std::pin::Pin::new(&mut me.sock).poll_write_vectored(cx, bufs);
        me.note(polled)
    }

    fn is_write_vectored(&self) -> bool {
        self.sock.is_write_vectored()
    }

    fn poll_flush(self: std::pin::Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let me = self.get_mut();
        let polled = std::pin::Pin::new(&mut me.sock).poll_flush(cx);
        me.note(polled)
    }

    fn poll_shutdown(
        self: std::pin::Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.get_mut().sock).poll_shutdown(cx)
    }
}

impl Service<hyper::Uri> for Dialer {
    type Response = TokioIo<Watched>;
    type Error = DialError;
    type Future = BoxFuture<Self::Response, DialError>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), DialError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, _: hyper::Uri) -> Self::Future {
        let (addr, opened, tls) = (self.addr, self.opened.clone(), self.tls.clone());
        let tcp_info = self.tcp_info.clone();
        let deadline = Instant::now() + self.timeout;
        Box::pin(async move {
            let secure = tls.as_deref().map(|t| (t, super::tls::Alpn::H2));
            let (stream, took) = super::connect_nodelay(addr, secure, deadline, &tcp_info)
                .await
                .map_err(DialError)?;
            opened.count.fetch_add(1, Relaxed);
            *opened.took.lock().unwrap_or_else(|p| p.into_inner()) = Some(took);
            Ok(TokioIo::new(Watched {
                sock: stream,
                opened,
            }))
        })
    }
}

/// A failed connect, carried through tonic's errors so the call is counted by its kind.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct DialError(CallError);

/// Opens a channel to `addr`: one HTTP/2 connection, connected now.
pub(super) async fn connect(
    endpoint: &Endpoint,
    addr: SocketAddr,
    opened: Arc<Opened>,
    timeout: Duration,
) -> Result<Channel, CallError> {
    let origin = super::h2::origin(endpoint);
    let target = tonic::transport::Endpoint::from_shared(origin).map_err(|_| CallError::Protocol)?;
    target
        .connect_with_connector(Dialer {
            addr,
            opened,
            tls: endpoint.tls.clone(),
            tcp_info: endpoint.tcp_info.clone(),
            timeout,
        })
        .await
        .map_err(|e| classify_error(&e))
}

/// The request of one call.
pub(super) fn request(call: &Call<'_>) -> EchoRequest {
    EchoRequest {
        seq: call.seq,
        reply_len: call.reply_len.map(i64::from),
        delay_us: i64::from(call.delay_us),
        payload: Bytes::copy_from_slice(call.payload),
    }
}

/// One unary call on `client`: the reply and the server time of its trailers.
pub(super) async fn unary(
    client: &mut Client,
    req: EchoRequest,
    phases: &mut Phases,
) -> Result<(EchoReply, Option<Duration>), CallError> {
    client.ready().await.map_err(|e| classify_error(&e))?;
    let sent = Instant::now();
    let resp = client
        .server_streaming(
            tonic::Request::new(req),
            PathAndQuery::from_static(CALL_PATH),
            tonic_prost::ProstCodec::default(),
        )
        .await
        .map_err(|s| classify_status(&s))?;
    phases.first_byte = Some(sent.elapsed());
    let mut replies = resp.into_inner();
    let reply = replies
        .message()
        .await
        .map_err(|s| classify_status(&s))?
        .ok_or(CallError::Protocol)?;
    // A unary reply is one message: a second one breaks the protocol. Reading on also
    // reads the trailers, with the status.
    if replies
        .message()
        .await
        .map_err(|s| classify_status(&s))?
        .is_some()
    {
        return Err(CallError::Protocol);
    }
    let trailers = replies.trailers().await.map_err(|s| classify_status(&s))?;
    let server = trailers.and_then(|t| http::server_timing(&t.into_headers()));
    checked(reply).map(|r| (r, server))
}

/// `reply`, unless its TCP-protocol status says it failed.
pub(super) fn checked(reply: EchoReply) -> Result<EchoReply, CallError> {
    match u8::try_from(reply.status) {
        Ok(0) => Ok(reply),
        Ok(status) => Err(CallError::FrameStatus(status)),
        Err(_) => Err(CallError::Protocol),
    }
}

/// What a failed call counts as, from tonic's status: what went wrong locally (a connect,
/// the connection, a timeout) when the status came from an error of ours or of hyper's,
/// else the status the server sent, by its code.
pub(super) fn classify_status(status: &tonic::Status) -> CallError {
    match std::error::Error::source(status) {
        Some(source) => from_chain(source).unwrap_or(CallError::GrpcStatus(status.code() as u8)),
        None => CallError::GrpcStatus(status.code() as u8),
    }
}

/// What a failed connect or channel counts as.
pub(super) fn classify_error(e: &(dyn std::error::Error + 'static)) -> CallError {
    from_chain(e).unwrap_or(CallError::Io)
}

/// The first error in `e`'s chain that says what went wrong locally.
fn from_chain(e: &(dyn std::error::Error + 'static)) -> Option<CallError> {
    if let Some(failure) = super::tls::TlsFailure::in_chain(e) {
        return Some(CallError::Tls(failure));
    }
    let mut next = Some(e);
    while let Some(e) = next {
        if let Some(DialError(kind)) = e.downcast_ref::<DialError>() {
            return Some(kind.clone());
        }
        if let Some(e) = e.downcast_ref::<hyper::Error>() {
            return Some(http::classify(e));
        }
        if let Some(e) = e.downcast_ref::<std::io::Error>() {
            return Some(CallError::from_io(e));
        }
        if let Some(status) = e.downcast_ref::<tonic::Status>()
            && std::error::Error::source(status).is_none()
        {
            return Some(CallError::GrpcStatus(status.code() as u8));
        }
        next = e.source();
    }
    None
}

/// The error kind of a gRPC status code (`grpc_` and the code's name in snake case), or
/// `None` for OK and for codes gRPC does not define.
pub(super) fn code_kind(code: u8) -> Option<&'static str> {
    Some(match Code::from_i32(i32::from(code)) {
        Code::Ok => return None,
        // An undefined code reads as Unknown; only 2 itself is that.
        Code::Unknown if code != Code::Unknown as u8 => return None,
        Code::Cancelled => "grpc_cancelled",
        Code::Unknown => "grpc_unknown",
        Code::InvalidArgument => "grpc_invalid_argument",
        Code::DeadlineExceeded => "grpc_deadline_exceeded",
        Code::NotFound => "grpc_not_found",
        Code::AlreadyExists => "grpc_already_exists",
        Code::PermissionDenied => "grpc_permission_denied",
        Code::ResourceExhausted => "grpc_resource_exhausted",
        Code::FailedPrecondition => "grpc_failed_precondition",
        Code::Aborted => "grpc_aborted",
        Code::OutOfRange => "grpc_out_of_range",
        Code::Unimplemented => "grpc_unimplemented",
        Code::Internal => "grpc_internal",
        Code::Unavailable => "grpc_unavailable",
        Code::DataLoss => "grpc_data_loss",
        Code::Unauthenticated => "grpc_unauthenticated",
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_grpc_error_status_has_a_kind_of_its_own() {
        let mut kinds: Vec<String> = (1..=16u8)
            .map(|code| {
                let kind = CallError::GrpcStatus(code).kind();
                let name = format!("{:?}", Code::from_i32(i32::from(code)));
                // The kind is the code's name: `InvalidArgument` is `grpc_invalid_argument`.
                assert_eq!(
                    kind.replace('_', ""),
                    format!("grpc{}", name.to_ascii_lowercase()),
                    "{code}"
                );
                kind
            })
            .collect();
        kinds.sort();
        kinds.dedup();
        assert_eq!(kinds.len(), 16);
        assert_eq!(code_kind(0), None);
        assert_eq!(CallError::GrpcStatus(17).kind(), "grpc_17");
        assert!(!CallError::GrpcStatus(14).is_lost());
    }

    #[test]
    fn a_status_made_from_a_local_error_is_that_error() {
        let refused = DialError(CallError::Connect(super::super::ConnectFailure::Refused));
        let status = tonic::Status::from_error(Box::new(refused));
        assert_eq!(classify_status(&status).kind(), "connect_refused");
        let sent = tonic::Status::resource_exhausted("too big");
        assert_eq!(classify_status(&sent).kind(), "grpc_resource_exhausted");
    }
}
