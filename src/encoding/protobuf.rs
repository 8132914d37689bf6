//! Protocol Buffers: the messages of `proto/wstest.proto` as prost encodes them. The
//! body is the operation's message alone (proto3: an EchoVoid is an empty body); the
//! route or the frame's trailer names the operation. prost stops at 100 nested messages
//! (`RecursionLimitReached`), and [`Request::check`] at a list of 65 nodes.

use super::wstest::{
    EchoList, EchoListResponse, EchoStruct, EchoStructResponse, EchoSynthetic,
    EchoSyntheticResponse, EchoVoid, EchoVoidResponse, Operation, Reply, Request,
};
use super::{CallId, Codec, DecodeError, EncodeError, Facts, Route};
use prost::Message as _;

/// prost.
pub struct Protobuf;

impl Codec for Protobuf {
    const FACTS: Facts = Facts {
        content_type: "application/x-protobuf",
        also_accepted: &[],
        route: Route::PerOperation("/rpc/"),
        // An empty TestStruct in a repeated field is 2 bytes (its tag and a zero length)
        // for the 32 its Vec holds.
        expansion: 16,
    };

    fn encode_request(req: &Request, _: &CallId, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        match req {
            Request::EchoVoid(m) => m.encode(out),
            Request::EchoStruct(m) => m.encode(out),
            Request::EchoList(m) => m.encode(out),
            Request::EchoSynthetic(m) => m.encode(out),
        }
        .map_err(|e| EncodeError(e.to_string()))
    }

    fn decode_request(
        op: Option<Operation>,
        body: &[u8],
    ) -> Result<(Request, CallId), DecodeError> {
        let op = super::routed(op)?;
        let req = match op {
            Operation::EchoVoid => EchoVoid::decode(body).map(Request::EchoVoid),
            Operation::EchoStruct => EchoStruct::decode(body).map(Request::EchoStruct),
            Operation::EchoList => EchoList::decode(body).map(Request::EchoList),
            Operation::EchoSynthetic => EchoSynthetic::decode(body).map(Request::EchoSynthetic),
        };
        req.map(|r| (r, CallId::None)).map_err(error)
    }

    fn encode_reply(reply: &Reply, _: &CallId, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        match reply {
            Reply::EchoVoid(m) => m.encode(out),
            Reply::EchoStruct(m) => m.encode(out),
            Reply::EchoList(m) => m.encode(out),
            Reply::EchoSynthetic(m) => m.encode(out),
        }
        .map_err(|e| EncodeError(e.to_string()))
    }

    fn decode_reply(op: Operation, body: &[u8]) -> Result<(Reply, CallId), DecodeError> {
        let reply = match op {
            Operation::EchoVoid => EchoVoidResponse::decode(body).map(Reply::EchoVoid),
            Operation::EchoStruct => EchoStructResponse::decode(body).map(Reply::EchoStruct),
            Operation::EchoList => EchoListResponse::decode(body).map(Reply::EchoList),
            Operation::EchoSynthetic => {
                EchoSyntheticResponse::decode(body).map(Reply::EchoSynthetic)
            }
        };
        reply.map(|r| (r, CallId::None)).map_err(error)
    }
}

/// prost's error as ours: its recursion limit is [`DecodeError::TooDeep`].
fn error(e: prost::DecodeError) -> DecodeError {
    let text = e.to_string();
    if text.contains("recursion limit") {
        DecodeError::TooDeep(text)
    } else {
        DecodeError::Malformed("protobuf", text)
    }
}
