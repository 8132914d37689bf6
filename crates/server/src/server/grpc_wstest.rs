//! `rpcbench.v1.WsTest` (`proto/wstest.proto`): WSTest's operations as unary gRPC methods,
//! `/rpcbench.v1.WsTest/{Operation}`, the request and reply messages protobuf as on
//! `/rpc/{Operation}`, and `Stream`, the same calls on one long-lived stream. The message is read within the buffer budget as `Echo`'s is
//! ([`Messages`]), then decoded, echoed and encoded by [`super::wstest`], as every carrier
//! of a WSTest call is; `server-timing` in the trailers holds the codec's times as over
//! HTTP.
//!
//! A message that is no call gets INVALID_ARGUMENT (the reason, counted under its
//! `rpc_*` kind as well as under its status); an unknown method UNIMPLEMENTED, as tonic's
//! router answers it.

use super::Shared;
use super::budget::ConnShare;
use super::grpc_body::RequestBody;
use super::grpc_echo::{
    Messages, PREFIX, ReplyBody, SERVER_TIMING, UnaryReply, answer_each, compressed, ok_trailers,
    refuse, reply,
};
use super::payload::Payload;
use super::wstest::{self, Refusal};
use crate::encoding::{EncodingKind, Operation};
use bytes::Bytes;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Instant;
use tonic::Status;

/// The service's path prefix: a method is its operation's name after it.
pub(super) const SERVICE: &str = "/rpcbench.v1.WsTest/";

/// Answers a call to `method` of the service.
pub(super) async fn serve(
    req: hyper::Request<RequestBody>,
    method: &str,
    shared: &Arc<Shared>,
    share: &Arc<ConnShare>,
) -> hyper::Response<ReplyBody> {
    if let Some(status) = compressed(&req) {
        return refuse(status);
    }
    if method == "Stream" {
        let messages = Messages::new(req.into_body(), shared.clone(), share.clone());
        return answer_stream(messages, shared.clone(), share.clone());
    }
    let Some(op) = Operation::from_name(method) else {
        return refuse(Status::unimplemented(""));
    };
    let mut messages = Messages::new(req.into_body(), shared.clone(), share.clone());
    let msg = match messages.next().await {
        Ok(Some(msg)) => msg,
        Ok(None) => return refuse(Status::internal("Missing request message.")),
        Err(refusal) => return refuse(refusal.into()),
    };
    let got_it = Instant::now();
    let answer = match wstest::answer(shared, Some(share), EncodingKind::Protobuf, Some(op), &msg) {
        Ok(answer) => answer,
        Err(Refusal::OverBudget) => {
            return refuse(Status::resource_exhausted(
                "the server's buffer budget is spent; try again later",
            ));
        }
        Err(Refusal::NotACall { reason, .. }) => return refuse(Status::invalid_argument(reason)),
        Err(Refusal::Unencodable(reason)) => return refuse(Status::internal(reason)),
    };
    drop(msg);
    shared.stats.grpc.messages.fetch_add(1, Relaxed);
    let mut trailers = ok_trailers();
    trailers.insert(
        SERVER_TIMING.clone(),
        wstest::server_timing(got_it.elapsed(), &answer),
    );
    let body = answer.reply.freeze();
    let mut head = Vec::with_capacity(PREFIX);
    head.push(0);
    head.extend_from_slice(&(body.len() as u32).to_be_bytes());
    reply(UnaryReply {
        head: Some(Bytes::from(head)),
        payload: Payload::Bytes(body),
        trailers: Some(trailers),
    })
}

/// `Stream`: one [`StreamReply`](crate::proto::StreamReply) per
/// [`StreamCall`](crate::proto::StreamCall), in order, by
/// [`answer_each`](super::grpc_echo::answer_each); a call that is no call ends the stream
/// with INVALID_ARGUMENT.
fn answer_stream(
    messages: Messages,
    shared: Arc<Shared>,
    share: Arc<ConnShare>,
) -> hyper::Response<ReplyBody> {
    answer_each(messages, move |msg| {
        let reply = stream_reply(msg, &shared, &share);
        async move { reply.map(|head| (head, Payload::Bytes(Bytes::new()))) }
    })
}

/// The reply message, length-prefixed, to one call of the stream.
fn stream_reply(msg: Bytes, shared: &Shared, share: &Arc<ConnShare>) -> Result<Bytes, Status> {
    use prost::Message as _;
    let got_it = Instant::now();
    let call = crate::proto::StreamCall::decode(msg)
        .map_err(|e| Status::internal(format!("failed to decode: {e}")))?;
    let op = u8::try_from(call.operation)
        .ok()
        .and_then(Operation::from_code)
        .ok_or_else(|| {
            let refusal = wstest::no_such_operation(
                shared,
                EncodingKind::Protobuf,
                &format!("no operation of code {}", call.operation),
            );
            refusal_status(refusal)
        })?;
    let answer = wstest::answer(
        shared,
        Some(share),
        EncodingKind::Protobuf,
        Some(op),
        &call.body,
    )
    .map_err(refusal_status)?;
    shared.stats.grpc.messages.fetch_add(1, Relaxed);
    let reply = crate::proto::StreamReply {
        seq: call.seq,
        server_ns: got_it.elapsed().as_nanos() as u64,
        dec_ns: answer.decode.as_nanos() as u64,
        enc_ns: answer.encode.as_nanos() as u64,
        body: answer.reply.freeze(),
    };
    let mut out = Vec::with_capacity(PREFIX + reply.encoded_len());
    out.push(0);
    out.extend_from_slice(&(reply.encoded_len() as u32).to_be_bytes());
    reply
        .encode(&mut out)
        .expect("a Vec grows to take any message");
    Ok(Bytes::from(out))
}

/// The status of a call [`wstest::answer`] refused.
fn refusal_status(refusal: Refusal) -> Status {
    match refusal {
        Refusal::OverBudget => {
            Status::resource_exhausted("the server's buffer budget is spent; try again later")
        }
        Refusal::NotACall { reason, .. } => Status::invalid_argument(reason),
        Refusal::Unencodable(reason) => Status::internal(reason),
    }
}
