//! `rpcbench.v1.Echo`'s two methods on gRPC's wire, written here rather than by tonic's
//! generated server, so that no message is ever made whole in memory.
//!
//! tonic decodes a request into a buffer that grows with whatever the length prefix
//! claims as it arrives, and encodes a reply by copying all of it into one buffer: a
//! 16 MiB pattern reply was 16 MiB per call, held for as long as the client took to read
//! it (issue #23). Here a request message is read into a buffer leased from the server's
//! budget ([`super::budget`]) for its declared length before any of it is kept, and a
//! reply is its length prefix and first fields, then its payload in chunks
//! ([`super::payload`]): the pattern from the static table, an echo from the request's
//! own buffer. The statuses are tonic's, for the same faults: a compressed message
//! without `grpc-encoding`, or one that ends early, is INTERNAL; one above the max frame
//! OUT_OF_RANGE; an unknown method UNIMPLEMENTED.
//!
//! `Call` answers one message; `Stream` answers each message of the request stream in
//! order, reading the next only once the previous reply has been handed over (a queue of
//! one), so a client that stops reading stops the stream instead of piling replies up.

use super::Shared;
use super::budget::{ConnShare, Held, Lease};
use super::grpc_body::RequestBody;
use super::payload::Payload;
use crate::proto::{EchoReply, EchoRequest};
use crate::wire::{self, RESPONSE_OVERHEAD};
use bytes::{Buf, Bytes};
use hyper::body::{Body, Frame, SizeHint};
use hyper::header::{HeaderMap, HeaderName, HeaderValue};
use prost::Message as _;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::task::{Context, Poll, ready};
use std::time::{Duration, Instant};
use tonic::{Code, Status};

/// The path of the unary method.
pub(super) const CALL: &str = "/rpcbench.v1.Echo/Call";
/// The path of the bidirectional streaming method.
pub(super) const STREAM: &str = "/rpcbench.v1.Echo/Stream";

/// A gRPC message's prefix: the compressed flag, then the length (4 bytes, big-endian).
pub(super) const PREFIX: usize = 5;

/// The `server-timing` trailer, in the format of the HTTP replies' header (`app;dur=<ms>`).
pub(super) static SERVER_TIMING: HeaderName = HeaderName::from_static("server-timing");

/// The `content-type` of every reply.
const GRPC_CONTENT_TYPE: HeaderValue = HeaderValue::from_static("application/grpc");

/// The type of every reply body: tonic's boxed body, which the reflection services return
/// too, so that one wrapper ([`super::grpc::GrpcBody`]) counts every call's outcome.
pub(super) type ReplyBody = tonic::body::Body;

/// Answers a call to [`CALL`] or [`STREAM`] (`stream` says which).
pub(super) async fn serve(
    req: hyper::Request<RequestBody>,
    stream: bool,
    shared: &Arc<Shared>,
    share: &Arc<ConnShare>,
) -> hyper::Response<ReplyBody> {
    if let Some(status) = compressed(&req) {
        return refuse(status);
    }
    let messages = Messages::new(req.into_body(), shared.clone(), share.clone());
    if stream {
        return answer_stream(messages, shared.clone());
    }
    match call(messages, shared).await {
        Ok(body) => reply(body),
        Err(refusal) => refuse(refusal.into()),
    }
}

/// UNIMPLEMENTED for a request whose messages are compressed (tonic's words), which this
/// server does not take.
pub(super) fn compressed<B>(req: &hyper::Request<B>) -> Option<Status> {
    let encoding = req.headers().get("grpc-encoding")?;
    (encoding.as_bytes() != b"identity").then(|| {
        Status::unimplemented(format!(
            "Content is compressed with `{}` which isn't supported",
            String::from_utf8_lossy(encoding.as_bytes())
        ))
    })
}

/// A reply of headers only, with `status` (gRPC's "trailers-only" reply).
pub(super) fn refuse(status: Status) -> hyper::Response<ReplyBody> {
    status.into_http()
}

/// The reply of a call that goes on: headers, then `body`.
pub(super) fn reply(
    body: impl Body<Data = Bytes, Error = Status> + Send + 'static,
) -> hyper::Response<ReplyBody> {
    let mut resp = hyper::Response::new(ReplyBody::new(body));
    resp.headers_mut()
        .insert(hyper::header::CONTENT_TYPE, GRPC_CONTENT_TYPE);
    resp
}

/// Why a request was not answered.
#[derive(Debug)]
pub(super) enum Refusal {
    /// Its message did not fit in the buffer budget: RESOURCE_EXHAUSTED, counted as
    /// `over_budget_grpc` (the request body noted it).
    OverBudget,
    /// Any other refusal, with its status.
    Status(Status),
}

impl From<Status> for Refusal {
    fn from(status: Status) -> Self {
        Refusal::Status(status)
    }
}

impl From<Refusal> for Status {
    fn from(refusal: Refusal) -> Self {
        match refusal {
            Refusal::OverBudget => {
                Status::resource_exhausted("the server's buffer budget is spent; try again later")
            }
            Refusal::Status(status) => status,
        }
    }
}

/// `Call`: one request message, its reply, and trailers with the status and the server's
/// time.
async fn call(mut messages: Messages, shared: &Shared) -> Result<UnaryReply, Refusal> {
    let msg = messages
        .next()
        .await?
        .ok_or_else(|| Status::internal("Missing request message."))?;
    let got_it = Instant::now();
    let req = check(decode(msg)?, shared)?;
    let (head, payload) = answer(req, got_it, shared).await;
    let mut trailers = ok_trailers();
    trailers.insert(
        SERVER_TIMING.clone(),
        super::http::reply::server_timing(got_it.elapsed()),
    );
    Ok(UnaryReply {
        head: Some(head),
        payload,
        trailers: Some(trailers),
    })
}

/// The trailers of a call that ended well.
pub(super) fn ok_trailers() -> HeaderMap {
    let mut trailers = HeaderMap::with_capacity(2);
    trailers.insert(Status::GRPC_STATUS, HeaderValue::from_static("0"));
    trailers
}

/// Decodes a request message. The payload is a slice of `msg`, not a copy.
fn decode(msg: Bytes) -> Result<EchoRequest, Status> {
    EchoRequest::decode(msg).map_err(|e| Status::internal(format!("failed to decode: {e}")))
}

/// What one request asks for, once checked against the server's limits.
struct Checked {
    seq: u64,
    reply_len: Option<usize>,
    delay: Duration,
    payload: Bytes,
}

/// Checks `req` as the TCP server does (a reply must fit in the max frame with its
/// framing; a delay must be within the max delay), with gRPC's statuses: a value no
/// request may carry (negative) is INVALID_ARGUMENT, one above this server's limits
/// RESOURCE_EXHAUSTED.
fn check(req: EchoRequest, shared: &Shared) -> Result<Checked, Status> {
    let config = &shared.config;
    let reply_len = match req.reply_len {
        None => None,
        Some(n) => Some(
            u64::try_from(n)
                .map_err(|_| Status::invalid_argument(format!("reply_len={n} is negative")))?,
        ),
    };
    let delay_us = u64::try_from(req.delay_us)
        .map_err(|_| Status::invalid_argument(format!("delay_us={} is negative", req.delay_us)))?;
    let max_delay = config.max_delay.as_micros() as u64;
    if delay_us > max_delay {
        return Err(Status::resource_exhausted(format!(
            "delay_us={delay_us} is above the maximum of {max_delay} µs"
        )));
    }
    // An echo counts too, as on TCP: the reply carries more than the request.
    let max_reply = u64::from(config.max_frame.saturating_sub(RESPONSE_OVERHEAD));
    let len = reply_len.unwrap_or(req.payload.len() as u64);
    if len > max_reply {
        return Err(Status::resource_exhausted(format!(
            "a reply of {len} bytes is above the maximum of {max_reply}"
        )));
    }
    Ok(Checked {
        seq: req.seq,
        reply_len: reply_len.map(|n| n as usize),
        delay: Duration::from_micros(delay_us),
        payload: req.payload,
    })
}

/// Answers one checked request that was whole at `got_it`: waits out its delay, then
/// returns the reply's start (the message's prefix and every field but the payload,
/// whose key and length close it) and its payload, the echo or the pattern.
async fn answer(req: Checked, got_it: Instant, shared: &Shared) -> (Bytes, Payload) {
    if !req.delay.is_zero() {
        crate::server::sleep_until(got_it + req.delay).await;
    }
    let payload = match req.reply_len {
        None => Payload::Bytes(req.payload),
        Some(n) => Payload::pattern(req.seq, n),
    };
    shared.stats.grpc.messages.fetch_add(1, Relaxed);
    let fields = EchoReply {
        seq: req.seq,
        status: wire::Status::Ok as u32,
        server_ns: got_it.elapsed().as_nanos() as u64,
        payload: Bytes::new(),
    };
    (message_head(&fields, payload.len()), payload)
}

/// The start of a reply message whose fields are `fields` (payload empty) and whose
/// payload, `payload_len` bytes, follows: the gRPC prefix, the fields, and the payload's
/// key and length. Protobuf lets fields come in any order, so the payload (field 4) goes
/// last and is streamed after this.
fn message_head(fields: &EchoReply, payload_len: usize) -> Bytes {
    use prost::encoding::{WireType, encode_key, encode_varint, encoded_len_varint, key_len};
    const PAYLOAD_TAG: u32 = 4;
    let payload_key = if payload_len > 0 {
        key_len(PAYLOAD_TAG) + encoded_len_varint(payload_len as u64)
    } else {
        // proto3 leaves an empty bytes field out, as prost would.
        0
    };
    let message_len = fields.encoded_len() + payload_key + payload_len;
    let mut head = Vec::with_capacity(PREFIX + message_len - payload_len);
    head.push(0);
    head.extend_from_slice(&(message_len as u32).to_be_bytes());
    fields
        .encode(&mut head)
        .expect("a Vec grows to take any message");
    if payload_len > 0 {
        encode_key(PAYLOAD_TAG, WireType::LengthDelimited, &mut head);
        encode_varint(payload_len as u64, &mut head);
    }
    Bytes::from(head)
}

/// The body of a `Call` reply: the message's start, its payload in chunks, the trailers.
pub(super) struct UnaryReply {
    pub(super) head: Option<Bytes>,
    pub(super) payload: Payload,
    pub(super) trailers: Option<HeaderMap>,
}

impl Body for UnaryReply {
    type Data = Bytes;
    type Error = Status;

    fn poll_frame(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
        let this = self.get_mut();
        let frame = match this.head.take() {
            Some(head) => Frame::data(head),
            None => match this.payload.next_chunk() {
                Some(chunk) => Frame::data(chunk),
                None => match this.trailers.take() {
                    Some(trailers) => Frame::trailers(trailers),
                    None => return Poll::Ready(None),
                },
            },
        };
        Poll::Ready(Some(Ok(frame)))
    }

    fn is_end_stream(&self) -> bool {
        self.trailers.is_none()
    }

    fn size_hint(&self) -> SizeHint {
        let head = self.head.as_ref().map_or(0, Bytes::len);
        SizeHint::with_exact((head + self.payload.len()) as u64)
    }
}

/// What the task answering a `Stream` hands its reply body.
enum Out {
    /// One reply: the message's start and its payload.
    Reply(Bytes, Payload),
    /// The end of the stream: the trailers with its status.
    End(HeaderMap),
}

/// `Stream`: each request message answered as `Call` answers one, with its reply's start
/// and payload, by [`answer_each`].
fn answer_stream(messages: Messages, shared: Arc<Shared>) -> hyper::Response<ReplyBody> {
    answer_each(messages, move |msg| {
        let shared = shared.clone();
        async move {
            let got_it = Instant::now();
            let req = decode(msg).and_then(|req| check(req, &shared))?;
            Ok(answer(req, got_it, &shared).await)
        }
    })
}

/// A streaming method's reply: the headers at once, then one reply per request message
/// (`answer`'s), from a task of its own that reads the next request only once the body
/// has taken the previous reply (a channel of one), until the client ends its side
/// (status OK) or a request is refused (its status ends the stream, as gRPC has no status
/// per message).
pub(super) fn answer_each<F, Fut>(
    mut messages: Messages,
    mut answer: F,
) -> hyper::Response<ReplyBody>
where
    F: FnMut(Bytes) -> Fut + Send + 'static,
    Fut: Future<Output = Result<(Bytes, Payload), Status>> + Send,
{
    let (tx, rx) = tokio::sync::mpsc::channel(1);
    tokio::spawn(async move {
        loop {
            let out = match messages.next().await {
                Ok(None) => Out::End(ok_trailers()),
                Ok(Some(msg)) => match answer(msg).await {
                    Ok((head, payload)) => Out::Reply(head, payload),
                    Err(status) => Out::End(status_trailers(&status)),
                },
                Err(refusal) => Out::End(status_trailers(&refusal.into())),
            };
            let last = matches!(out, Out::End(_));
            if tx.send(out).await.is_err() || last {
                return;
            }
        }
    });
    reply(StreamReply {
        rx,
        current: None,
        ended: false,
    })
}

/// The trailers that end a stream with `status`.
fn status_trailers(status: &Status) -> HeaderMap {
    let mut trailers = HeaderMap::new();
    if status.add_header(&mut trailers).is_err() {
        // Only a message that cannot be a header value fails; the code alone then.
        trailers.insert(Status::GRPC_STATUS, HeaderValue::from(status.code() as i32));
    }
    trailers
}

/// The body of a `Stream` reply: each reply from the answering task, a chunk at a time,
/// then its trailers.
struct StreamReply {
    rx: tokio::sync::mpsc::Receiver<Out>,
    /// The reply being handed over.
    current: Option<(Option<Bytes>, Payload)>,
    ended: bool,
}

impl Body for StreamReply {
    type Data = Bytes;
    type Error = Status;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
        let this = self.get_mut();
        loop {
            if let Some((head, payload)) = &mut this.current {
                if let Some(head) = head.take() {
                    return Poll::Ready(Some(Ok(Frame::data(head))));
                }
                if let Some(chunk) = payload.next_chunk() {
                    return Poll::Ready(Some(Ok(Frame::data(chunk))));
                }
                this.current = None;
            }
            if this.ended {
                return Poll::Ready(None);
            }
            match ready!(this.rx.poll_recv(cx)) {
                Some(Out::Reply(head, payload)) => this.current = Some((Some(head), payload)),
                Some(Out::End(trailers)) => {
                    this.ended = true;
                    return Poll::Ready(Some(Ok(Frame::trailers(trailers))));
                }
                None => {
                    // The task is gone without an end: it panicked.
                    this.ended = true;
                    let status = Status::internal("the stream's task ended");
                    return Poll::Ready(Some(Ok(Frame::trailers(status_trailers(&status)))));
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.ended && self.current.is_none()
    }
}

/// The request messages of one call, read one at a time from its body, each into a
/// buffer leased from the budget for its declared length.
pub(super) struct Messages {
    body: RequestBody,
    /// What is left of the last DATA frame read: the start of the next message.
    rest: Bytes,
    shared: Arc<Shared>,
    share: Arc<ConnShare>,
}

impl Messages {
    pub(super) fn new(body: RequestBody, shared: Arc<Shared>, share: Arc<ConnShare>) -> Messages {
        Messages {
            body,
            rest: Bytes::new(),
            shared,
            share,
        }
    }

    /// Reads the next DATA into `rest` when it is empty; false at the end of the body.
    async fn fill(&mut self) -> Result<bool, Status> {
        while self.rest.is_empty() {
            let frame = std::future::poll_fn(|cx| Pin::new(&mut self.body).poll_frame(cx)).await;
            match frame {
                None => return Ok(false),
                // The body's own wrapper has noted a broken request for the count.
                Some(Err(e)) => return Err(Status::cancelled(format!("request broke: {e}"))),
                Some(Ok(frame)) => {
                    if let Ok(data) = frame.into_data() {
                        self.rest = data;
                    }
                }
            }
        }
        Ok(true)
    }

    /// The next whole message; `None` when the body ended between messages.
    pub(super) async fn next(&mut self) -> Result<Option<Bytes>, Refusal> {
        let eof = || Status::internal("Unexpected EOF decoding stream.");
        let mut prefix = [0u8; PREFIX];
        for (i, byte) in prefix.iter_mut().enumerate() {
            if !self.fill().await? {
                return if i == 0 { Ok(None) } else { Err(eof().into()) };
            }
            *byte = self.rest.get_u8();
        }
        let len = u32::from_be_bytes([prefix[1], prefix[2], prefix[3], prefix[4]]);
        match prefix[0] {
            0 => {}
            1 => {
                return Err(Status::internal(
                    "protocol error: received message with compressed-flag but no grpc-encoding was specified",
                )
                .into());
            }
            flag => {
                return Err(Status::internal(format!(
                    "protocol error: received message with invalid compression flag: {flag} (valid flags are 0 and 1)"
                ))
                .into());
            }
        }
        let max = self.shared.config.max_frame;
        if len > max {
            return Err(Status::new(
                Code::OutOfRange,
                format!(
                    "Error, decoded message length too large: found {len} bytes, the limit is: {max} bytes"
                ),
            )
            .into());
        }
        let len = len as usize;
        let lease = Lease::new(&self.shared.stats.budget, Some(&self.share), len as u64);
        let Ok(mut held) = Held::with_capacity(lease, len) else {
            self.body.over_budget();
            return Err(Refusal::OverBudget);
        };
        while held.len() < len {
            if !self.fill().await? {
                return Err(eof().into());
            }
            let n = (len - held.len()).min(self.rest.len());
            // Within the capacity leased: cannot fail.
            let _ = held.extend(&self.rest.split_to(n), len);
        }
        Ok(Some(held.freeze()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The head and the payload streamed after it decode as the message prost would make.
    #[test]
    fn a_streamed_reply_is_the_message_prost_encodes() {
        for len in [0usize, 1, 127, 128, 70_000] {
            let mut payload = Vec::new();
            wire::pattern(9, len, &mut payload);
            let whole = EchoReply {
                seq: 9,
                status: 0,
                server_ns: 1234,
                payload: Bytes::from(payload.clone()),
            };
            let fields = EchoReply {
                payload: Bytes::new(),
                ..whole.clone()
            };
            let mut wire_bytes = message_head(&fields, len).to_vec();
            wire_bytes.extend_from_slice(&payload);
            assert_eq!(wire_bytes[0], 0);
            let declared = u32::from_be_bytes(wire_bytes[1..5].try_into().unwrap()) as usize;
            assert_eq!(declared, wire_bytes.len() - PREFIX, "len {len}");
            assert_eq!(
                &wire_bytes[PREFIX..],
                &whole.encode_to_vec()[..],
                "len {len}"
            );
        }
    }
}
