//! `grpc`: the unary method `rpcbench.v1.Echo/Call`, one HTTP/2 connection per worker, one
//! call at a time: gRPC's wire format (a length-prefixed protobuf message each way, the
//! status in the trailers) on the connection the `h2` transport drives frame by frame
//! ([`super::h2_wire`], through [`H2Conn`]), so that a call costs what its bytes cost.
//!
//! A call writes HEADERS (`content-type: application/grpc`, `te: trailers`) and the
//! message's DATA frame in one write, reads the reply's head (its first byte), its one
//! message and its trailers, and takes `grpc-status` and `server-timing` from the
//! trailers, or from the head of a trailers-only reply. On tonic's client this cost
//! 1.5× h2load's gRPC call (`report/peers.sh`): its codec, body and `h2` stream machinery
//! ran per call for a message of a few dozen bytes.
//!
//! What the other gRPC transports share lives here too, as `h2.rs` holds what `h2-mux`
//! uses: the unary request and reply, which `grpc-mux` makes on its shared connection;
//! tonic's client on the `h2` crate's connection, whose stream `grpc-stream` keeps open;
//! the request message and the error kinds.

use super::h2::H2Conn;
use super::h2_wire::{Outgoing, ReplyFields};
use super::http::{self, worker_runtime};
use super::{
    Call, CallError, Counts, Endpoint, Facts, OpenTransportError, Phases, Port, Reply, Transport,
};
use crate::proto::{CALL_PATH, EchoReply, EchoRequest};
use bytes::{BufMut, Bytes};
use hyper::header::{HeaderMap, HeaderValue};
use prost::Message as _;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use tonic::codegen::{BoxFuture, Service};

/// tonic's client on one HTTP/2 connection, and the flag its connection's task sets when
/// the connection has ended.
pub(super) type Client = tonic::client::Grpc<H2Service>;

/// The length prefix of a gRPC message: a compressed flag and a 4-byte length.
const PREFIX: usize = 5;

/// The most a reply message adds to its payload: the prefix, and the fields as a raw
/// frame's response has them (seq, status, server_ns and the payload's key and length).
pub(super) const REPLY_OVERHEAD: usize = PREFIX + crate::wire::RESPONSE_OVERHEAD as usize;

/// The `grpc` transport.
pub struct Grpc {
    /// The worker's runtime: a call blocks on it.
    rt: tokio::runtime::Runtime,
    /// The connection and what its calls need.
    conn: H2Conn,
    /// The last reply's payload.
    body: Bytes,
}

impl Transport for Grpc {
    const FACTS: Facts = Facts {
        summary: "gRPC unary `rpcbench.v1.Echo/Call` on one HTTP/2 connection per worker: gRPC's wire (a length-prefixed protobuf message each way, `grpc-status` in the trailers or a trailers-only head) on `h2`'s frame-by-frame connection (`crates/client/src/transport/h2_wire.rs`), HEADERS and DATA in one write; `grpc-stream` uses tonic's client over the `h2` crate",
        persistent: true,
        port: Port::Http,
        alpn: super::tls::Alpn::H2,
        round_trips: Some(1.0),
        files_per_worker: super::FILES_PER_RUNTIME,
        encodings: &[crate::encoding::EncodingKind::Protobuf],
        ..Facts::DEFAULT
    };

    fn open(endpoint: Endpoint, timeout: Duration) -> Result<Grpc, OpenTransportError> {
        Ok(Grpc {
            rt: worker_runtime()?,
            conn: H2Conn::new(endpoint, timeout),
            body: Bytes::new(),
        })
    }

    fn call(&mut self, call: &Call, phases: &mut Phases) -> Result<Reply<'_>, CallError> {
        let req = unary_request(self.conn.origin.uri(unary_path(call))?, call)?;
        let replied = self.conn.call_blocking(&self.rt, req, phases)?;
        if call.rpc.is_some() {
            return wstest_reply(&replied, &self.conn.body);
        }
        let (reply, server) = unary_reply(&replied, &self.conn.body)?;
        self.body = reply.payload;
        Ok(Reply {
            seq: Some(reply.seq),
            body: &self.body,
            server,
        })
    }

    fn reset(&mut self) {
        self.conn.open = None;
    }

    fn counts(&self) -> Counts {
        Counts::connects(self.conn.connects)
    }
}

/// The header fields of every unary request, after the pseudo-header fields.
pub(super) const REQUEST_FIELDS: &[(&str, &str)] = &[
    ("content-type", "application/grpc"),
    ("te", "trailers"),
    (
        "user-agent",
        concat!("rpcbench/", env!("CARGO_PKG_VERSION")),
    ),
];

/// The unary request of `call` to `uri`: gRPC's headers and the length-prefixed message.
pub(super) fn unary_request(uri: hyper::Uri, call: &Call<'_>) -> Result<Outgoing, CallError> {
    let mut headers = HeaderMap::with_capacity(REQUEST_FIELDS.len());
    for (name, value) in REQUEST_FIELDS {
        headers.insert(*name, HeaderValue::from_static(value));
    }
    Ok(Outgoing {
        uri,
        headers,
        payload: unary_message(call)?,
        max_body: call.max_body(REPLY_OVERHEAD),
        fault_status: None,
    })
}

/// The path of `call`'s unary method: `rpcbench.v1.Echo/Call`, or for an encoded call
/// (protobuf) WSTest's method of its operation.
pub(super) fn unary_path(call: &Call<'_>) -> &'static str {
    match call.rpc {
        None => CALL_PATH,
        Some(rpc) => wstest_path(rpc.operation),
    }
}

/// The path of WSTest's unary method for `op`: `/rpcbench.v1.WsTest/EchoStruct`
/// (`proto/wstest.proto`).
fn wstest_path(op: crate::encoding::Operation) -> &'static str {
    use crate::encoding::Operation;
    match op {
        Operation::EchoVoid => "/rpcbench.v1.WsTest/EchoVoid",
        Operation::EchoStruct => "/rpcbench.v1.WsTest/EchoStruct",
        Operation::EchoList => "/rpcbench.v1.WsTest/EchoList",
        Operation::EchoSynthetic => "/rpcbench.v1.WsTest/EchoSynthetic",
    }
}

/// The length-prefixed `EchoRequest` of `call`, encoded straight from the call: what
/// [`request`]'s message encodes to, without first copying the payload into it. An
/// encoded call's payload is its message already (WSTest's, in protobuf): it goes as is.
pub(super) fn unary_message(call: &Call<'_>) -> Result<Bytes, CallError> {
    if call.rpc.is_some() {
        let len = u32::try_from(call.payload.len()).map_err(|_| CallError::Protocol)?;
        let mut buf = bytes::BytesMut::with_capacity(PREFIX + call.payload.len());
        buf.put_u8(0);
        buf.put_u32(len);
        buf.put_slice(call.payload);
        return Ok(buf.freeze());
    }
    use prost::encoding::{WireType, encode_key, encode_varint, encoded_len_varint, key_len};
    // Proto3: a field at its default is left out; `reply_len` is `optional`, so it is
    // sent whenever present. Negative numbers are not a call's: every varint is a u64.
    let varint = |tag: u32, n: u64| key_len(tag) + encoded_len_varint(n);
    let payload = call.payload;
    let seq = (call.seq != 0).then_some(call.seq);
    let reply_len = call.reply_len.map(u64::from);
    let delay = (call.delay_us != 0).then_some(u64::from(call.delay_us));
    let len = seq.map_or(0, |n| varint(1, n))
        + reply_len.map_or(0, |n| varint(2, n))
        + delay.map_or(0, |n| varint(3, n))
        + if payload.is_empty() {
            0
        } else {
            varint(4, payload.len() as u64) + payload.len()
        };
    let mut buf = bytes::BytesMut::with_capacity(PREFIX + len);
    buf.put_u8(0);
    buf.put_u32(u32::try_from(len).map_err(|_| CallError::Protocol)?);
    for (tag, n) in [(1, seq), (2, reply_len), (3, delay)] {
        if let Some(n) = n {
            encode_key(tag, WireType::Varint, &mut buf);
            encode_varint(n, &mut buf);
        }
    }
    if !payload.is_empty() {
        encode_key(4, WireType::LengthDelimited, &mut buf);
        encode_varint(payload.len() as u64, &mut buf);
        buf.put_slice(payload);
    }
    Ok(buf.freeze())
}

/// The reply of a unary call from what came back on its stream (`body`, its DATA): the
/// message and the server time of its trailers. The status is the trailers' (or, in a
/// trailers-only reply, the head's); an error status is the call's error; a reply that
/// is not gRPC, has no status, or has other than one uncompressed message breaks the
/// protocol.
pub(super) fn unary_reply(
    replied: &impl ReplyFields,
    body: &[u8],
) -> Result<(EchoReply, Option<super::ServerTime>), CallError> {
    let msg = reply_message(replied, body)?;
    let reply = EchoReply::decode(msg).map_err(|_| CallError::Protocol)?;
    checked(reply).map(|r| (r, replied.server_timing()))
}

/// The reply of an encoded call (WSTest's, in protobuf): its one message as it came, for
/// the runner to decode and compare, and the server's time with its codec's. No seq: the
/// message's values carry it.
pub(super) fn wstest_reply<'b>(
    replied: &impl ReplyFields,
    body: &'b [u8],
) -> Result<Reply<'b>, CallError> {
    Ok(Reply {
        seq: None,
        body: reply_message(replied, body)?,
        server: replied.server_timing(),
    })
}

/// The one message of a unary reply. The status is the trailers' (or, in a
/// trailers-only reply, the head's); an error status is the call's error; a reply that
/// is not gRPC, has no status, or has other than one uncompressed message breaks the
/// protocol.
fn reply_message<'b>(replied: &impl ReplyFields, body: &'b [u8]) -> Result<&'b [u8], CallError> {
    if !replied.grpc() {
        return Err(CallError::Protocol);
    }
    let status = replied.grpc_status().ok_or(CallError::Protocol)?;
    if status != 0 {
        return Err(CallError::GrpcStatus(status));
    }
    // One message: no compression was asked for, and its length is the rest of the body.
    let (prefix, msg) = body.split_at_checked(PREFIX).ok_or(CallError::Protocol)?;
    let len = u32::from_be_bytes([prefix[1], prefix[2], prefix[3], prefix[4]]);
    if prefix[0] != 0 || msg.len() as u64 != u64::from(len) {
        return Err(CallError::Protocol);
    }
    Ok(msg)
}

/// Connections a transport opened, counted by [`connect`].
#[derive(Debug, Default)]
pub(super) struct Opened {
    /// Connections opened so far.
    pub count: AtomicU64,
    /// How long the last connect (and its TLS handshake) took.
    took: Mutex<Option<super::Took>>,
    /// The TLS failure a connection's read or write met, if any.
    noted: Arc<super::tls::TlsNoted>,
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
        self.noted.explain(e)
    }

    /// Records the last connect as the call's `connect` and `tls` phases.
    pub fn record(&self, phases: &mut Phases) {
        if let Some(took) = self.took() {
            took.record(phases);
        }
    }
}

/// Opens a gRPC connection to `addr`: TCP_NODELAY, TLS with ALPN `h2` when the run asks
/// for it, the HTTP/2 handshake; counted in `opened`, its connect and TLS times kept there.
/// The connection is driven by a task on the current runtime.
pub(super) async fn connect(
    endpoint: &Endpoint,
    addr: SocketAddr,
    opened: Arc<Opened>,
    deadline: Instant,
) -> Result<Client, CallError> {
    let secure = endpoint.secure(super::tls::Alpn::H2);
    let (stream, took) = super::connect_nodelay(addr, secure, deadline, &endpoint.tcp_info).await?;
    opened.count.fetch_add(1, Relaxed);
    *opened.took.lock().unwrap_or_else(|p| p.into_inner()) = Some(took);
    // The slot is the transport's, kept across its connections: a failure an earlier
    // connection met must not explain this one's.
    opened.noted.clear();
    let sender = super::h2::handshake(stream, opened.noted.clone()).await?;
    let origin = super::h2::origin(endpoint)
        .parse()
        .map_err(|_| CallError::Protocol)?;
    Ok(tonic::client::Grpc::with_origin(
        H2Service { sender },
        origin,
    ))
}

/// tonic's transport: one HTTP/2 connection of the `h2` crate. A request's HEADERS and
/// the DATA its body has ready go out together; what the body yields later (the messages
/// of a stream) is sent by a task of its own as it comes. The reply is [`H2Body`].
#[derive(Clone)]
pub(super) struct H2Service {
    sender: ::h2::client::SendRequest<Bytes>,
}

impl Service<hyper::Request<tonic::body::Body>> for H2Service {
    type Response = hyper::Response<H2Body>;
    type Error = ::h2::Error;
    type Future = BoxFuture<Self::Response, ::h2::Error>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), ::h2::Error>> {
        self.sender.poll_ready(cx)
    }

    fn call(&mut self, req: hyper::Request<tonic::body::Body>) -> Self::Future {
        // The handle `poll_ready` readied sends; a clone of it stays for the next call.
        let fresh = self.sender.clone();
        let mut sender = std::mem::replace(&mut self.sender, fresh);
        Box::pin(async move {
            let (head, mut body) = req.into_parts();
            let max = head
                .extensions
                .get::<MaxMessage>()
                .map_or(usize::MAX, |m| m.0);
            let (ready, end) = ready_frames(&mut body).await?;
            let empty = ready.is_empty() && end;
            let (resp, mut stream) =
                sender.send_request(hyper::Request::from_parts(head, ()), empty)?;
            if !empty {
                stream.send_data(ready, end)?;
            }
            if !end {
                tokio::spawn(pump(body, stream));
            }
            let resp = resp.await?;
            Ok(resp.map(|recv| H2Body {
                recv,
                data_done: false,
                limit: MessageLimit::new(max),
            }))
        })
    }
}

/// The DATA `body` has ready now, and whether it has ended: a unary request's one
/// message and its end at once; a stream's first message, if already queued.
async fn ready_frames(body: &mut tonic::body::Body) -> Result<(Bytes, bool), ::h2::Error> {
    use http_body::Body as _;
    let mut ready = bytes::BytesMut::new();
    loop {
        let next = std::future::poll_fn(|cx| {
            Poll::Ready(match std::pin::Pin::new(&mut *body).poll_frame(cx) {
                Poll::Pending => None,
                Poll::Ready(frame) => Some(frame),
            })
        })
        .await;
        match next {
            None => return Ok((ready.freeze(), false)),
            Some(None) => return Ok((ready.freeze(), true)),
            Some(Some(Ok(frame))) => {
                if let Ok(data) = frame.into_data() {
                    ready.extend_from_slice(&data);
                }
            }
            Some(Some(Err(_))) => return Err(::h2::Reason::CANCEL.into()),
        }
    }
}

/// Sends what a streaming request's body yields after its first DATA, then its end;
/// resets the stream if the body fails.
async fn pump(mut body: tonic::body::Body, mut stream: ::h2::SendStream<Bytes>) {
    use http_body_util::BodyExt;
    while let Some(frame) = body.frame().await {
        match frame.map(|f| f.into_data()) {
            Ok(Ok(data)) => {
                if stream.send_data(data, false).is_err() {
                    return;
                }
            }
            // A client request body has no trailers; nothing else is sent.
            Ok(Err(_)) => {}
            Err(_) => {
                stream.send_reset(::h2::Reason::CANCEL);
                return;
            }
        }
    }
    let _ = stream.send_data(Bytes::new(), true);
}

/// The largest reply message a call accepts (its `max_reply` and [`REPLY_OVERHEAD`]),
/// carried from the call to [`H2Service`] in the request's extensions.
#[derive(Debug, Clone, Copy)]
pub(super) struct MaxMessage(pub usize);

/// Checks each reply message's length, as its prefix goes by, against the largest
/// accepted: tonic's decoder would otherwise gather whatever length a prefix claims.
struct MessageLimit {
    max: usize,
    /// Bytes of the current message still to come after its prefix.
    left: usize,
    /// The prefix being read, and how much of it has come.
    prefix: [u8; PREFIX],
    have: usize,
}

impl MessageLimit {
    fn new(max: usize) -> MessageLimit {
        MessageLimit {
            max,
            left: 0,
            prefix: [0; PREFIX],
            have: 0,
        }
    }

    /// Takes the next bytes of the body; fails at a prefix that declares more than `max`.
    fn pass(&mut self, mut data: &[u8]) -> Result<(), ReadReplyError> {
        while !data.is_empty() {
            if self.left > 0 {
                let n = self.left.min(data.len());
                (self.left, data) = (self.left - n, &data[n..]);
                continue;
            }
            let n = (PREFIX - self.have).min(data.len());
            self.prefix[self.have..self.have + n].copy_from_slice(&data[..n]);
            (self.have, data) = (self.have + n, &data[n..]);
            if self.have == PREFIX {
                let p = self.prefix;
                let len = u32::from_be_bytes([p[1], p[2], p[3], p[4]]) as usize;
                if PREFIX + len > self.max {
                    return Err(ReadReplyError::TooLarge);
                }
                (self.left, self.have) = (len, 0);
            }
        }
        Ok(())
    }
}

/// Why a reply's body could not be read.
#[derive(Debug, thiserror::Error)]
pub(super) enum ReadReplyError {
    /// The stream or the connection failed.
    #[error("HTTP/2")]
    H2(#[source] ::h2::Error),
    /// A message's prefix declared more than the call accepts (`--max-reply`).
    #[error("a reply message larger than the largest accepted")]
    TooLarge,
}

/// A reply's body as tonic reads it: the DATA frames (their flow-control window handed
/// back as they are read), each message's length checked against the largest accepted,
/// then the trailers.
pub(super) struct H2Body {
    recv: ::h2::RecvStream,
    data_done: bool,
    limit: MessageLimit,
}

impl http_body::Body for H2Body {
    type Data = Bytes;
    type Error = ReadReplyError;

    fn poll_frame(
        self: std::pin::Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, ReadReplyError>>> {
        let me = self.get_mut();
        if !me.data_done {
            match std::task::ready!(me.recv.poll_data(cx)) {
                Some(Ok(chunk)) => {
                    let _ = me.recv.flow_control().release_capacity(chunk.len());
                    if let Err(e) = me.limit.pass(&chunk) {
                        // Nothing more of it is read: the stream goes.
                        me.data_done = true;
                        return Poll::Ready(Some(Err(e)));
                    }
                    return Poll::Ready(Some(Ok(http_body::Frame::data(chunk))));
                }
                Some(Err(e)) => return Poll::Ready(Some(Err(ReadReplyError::H2(e)))),
                None => me.data_done = true,
            }
        }
        match std::task::ready!(me.recv.poll_trailers(cx)) {
            Ok(Some(trailers)) => Poll::Ready(Some(Ok(http_body::Frame::trailers(trailers)))),
            Ok(None) => Poll::Ready(None),
            Err(e) => Poll::Ready(Some(Err(ReadReplyError::H2(e)))),
        }
    }

    fn is_end_stream(&self) -> bool {
        self.data_done && self.recv.is_end_stream()
    }
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

/// A request carrying `msg`, whose reply messages may be at most `max` bytes each
/// (checked by [`H2Body`]).
pub(super) fn limited<T>(msg: T, max: usize) -> tonic::Request<T> {
    let mut req = tonic::Request::new(msg);
    req.extensions_mut().insert(MaxMessage(max));
    req
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
        if let Some(ReadReplyError::TooLarge) = e.downcast_ref::<ReadReplyError>() {
            return Some(CallError::ReplyTooLarge);
        }
        if let Some(e) = e.downcast_ref::<::h2::Error>() {
            return Some(super::h2::classify(e));
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

#[cfg(test)]
mod tests {
    use super::super::h2_wire::Replied;
    use super::*;

    /// What the rest of the program reads from its facts: the connections a healthy run
    /// of 8 workers and 100 calls opens, the port, an event-loop side.
    #[test]
    fn its_facts() {
        super::super::expect_facts("grpc", 8, super::super::Port::Http, false);
    }

    /// The message encoded straight from a call is prost's encoding of its
    /// `EchoRequest`, behind the 5-byte prefix, whichever fields are at their defaults.
    #[test]
    fn unary_message_is_the_encoded_request() {
        let big = vec![7u8; 300];
        let payloads: [&[u8]; 3] = [b"", b"abc", &big];
        for payload in payloads {
            for (seq, reply_len, delay_us) in [
                (0, None, 0),
                (1, Some(0), 0),
                (u64::MAX, Some(u32::MAX), u32::MAX),
                (300, None, 5),
            ] {
                let call = Call {
                    seq,
                    payload,
                    reply_len,
                    delay_us,
                    max_reply: 1 << 20,
                    rpc: None,
                };
                let msg = request(&call).encode_to_vec();
                let mut want = vec![0];
                want.extend_from_slice(&(msg.len() as u32).to_be_bytes());
                want.extend_from_slice(&msg);
                assert_eq!(unary_message(&call).unwrap(), want, "{call:?}");
            }
        }
    }

    /// A unary reply's head, body and trailers: an ok message, an error status in either
    /// place, and each way a reply can break gRPC's framing.
    #[test]
    fn unary_replies_are_read_or_refused() {
        let fields = |pairs: &[(&'static str, &'static str)]| {
            let mut h = HeaderMap::new();
            for (k, v) in pairs {
                h.insert(*k, HeaderValue::from_static(v));
            }
            h
        };
        let grpc = [("content-type", "application/grpc+proto")];
        let replied =
            |head: &[(&'static str, &'static str)],
             trailers: Option<&[(&'static str, &'static str)]>| Replied {
                head: fields(head),
                trailers: trailers.map(fields),
            };
        let msg = EchoReply {
            seq: 9,
            payload: Bytes::from_static(b"hello"),
            ..Default::default()
        }
        .encode_to_vec();
        let framed = |flag: u8, declared: usize, msg: &[u8]| {
            let mut b = vec![flag];
            b.extend_from_slice(&(declared as u32).to_be_bytes());
            b.extend_from_slice(msg);
            b
        };
        let ok = framed(0, msg.len(), &msg);
        let timed = [("grpc-status", "0"), ("server-timing", "app;dur=0.25")];
        let (reply, server) = unary_reply(&replied(&grpc, Some(&timed)), &ok).unwrap();
        assert_eq!((reply.seq, &reply.payload[..]), (9, &b"hello"[..]));
        assert_eq!(server, Some(Duration::from_micros(250).into()));

        let refused = |r: Replied, body: &[u8]| unary_reply(&r, body).unwrap_err();
        // A trailers-only reply, and a status in the trailers after the message.
        let only = [grpc[0], ("grpc-status", "14"), ("grpc-message", "down")];
        assert_eq!(
            refused(replied(&only, None), b""),
            CallError::GrpcStatus(14)
        );
        let eight = [("grpc-status", "8")];
        assert_eq!(
            refused(replied(&grpc, Some(&eight)), &ok),
            CallError::GrpcStatus(8)
        );
        let fine = [("grpc-status", "0")];
        for (head, trailers, body) in [
            // Not gRPC.
            (
                &[("content-type", "text/plain")][..],
                Some(&fine[..]),
                ok.clone(),
            ),
            // No status, or one that is not a number.
            (&grpc[..], Some(&[][..]), ok.clone()),
            (&grpc[..], Some(&[("grpc-status", "x")][..]), ok.clone()),
            // No message, a short prefix, a compressed one, a length that is not the rest.
            (&grpc[..], Some(&fine[..]), Vec::new()),
            (&grpc[..], Some(&fine[..]), vec![0, 0, 0]),
            (&grpc[..], Some(&fine[..]), framed(1, msg.len(), &msg)),
            (&grpc[..], Some(&fine[..]), framed(0, msg.len() + 1, &msg)),
            (
                &grpc[..],
                Some(&fine[..]),
                [ok.clone(), ok.clone()].concat(),
            ),
            // A message that is not an EchoReply.
            (&grpc[..], Some(&fine[..]), framed(0, 2, &[0xff, 0xff])),
        ] {
            assert_eq!(
                refused(replied(head, trailers), &body),
                CallError::Protocol,
                "{head:?} {trailers:?} {body:?}"
            );
        }
    }

    #[test]
    fn a_status_made_from_a_local_error_is_that_error() {
        // A connection failing under a call (a connect failure never reaches tonic:
        // `connect` returns it as it is).
        let reset = std::io::Error::from(std::io::ErrorKind::ConnectionReset);
        let status = tonic::Status::from_error(Box::new(reset));
        assert_eq!(classify_status(&status).kind(), CallError::Closed.kind());
        let gone = ::h2::Error::from(::h2::Reason::PROTOCOL_ERROR);
        let status = tonic::Status::from_error(Box::new(gone));
        assert_eq!(classify_status(&status).kind().to_string(), "protocol");
        let sent = tonic::Status::resource_exhausted("too big");
        assert_eq!(
            classify_status(&sent).kind().to_string(),
            "grpc_resource_exhausted"
        );
    }
}
