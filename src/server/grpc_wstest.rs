//! `rpcbench.v1.WsTest` (`proto/wstest.proto`): WSTest's operations as unary gRPC methods,
//! `/rpcbench.v1.WsTest/{Operation}`, the request and reply messages protobuf as on
//! `/rpc/{Operation}`. The message is read within the buffer budget as `Echo`'s is
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
    Messages, PREFIX, ReplyBody, SERVER_TIMING, UnaryReply, compressed, ok_trailers, refuse, reply,
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
    let Some(op) = Operation::from_name(method) else {
        return refuse(Status::unimplemented(""));
    };
    if let Some(status) = compressed(&req) {
        return refuse(status);
    }
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
