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
        operation_header: None,
        fault_status: None,
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

    /// Strings and bytes hold at most the body's own bytes; what holds them is counted:
    /// an EchoStruct's structs from its top-level entries (a scan that allocates
    /// nothing, stopping where the body stops being protobuf, as prost's decode would),
    /// twice over for the growth of their Vec; a list's nodes up to prost's nesting
    /// limit of 100; a Synthetic holds nothing else.
    fn heap_bound(op: Option<Operation>, body: &[u8]) -> usize {
        let structs = |n: usize| 2 * n * size_of::<super::wstest::TestStruct>();
        let extra = match op {
            None => return body.len().saturating_mul(Self::FACTS.expansion),
            Some(Operation::EchoVoid | Operation::EchoSynthetic) => 0,
            Some(Operation::EchoList) => 100 * size_of::<super::wstest::TestNode>(),
            Some(Operation::EchoStruct) => structs(entries(body, 1)),
        };
        body.len().saturating_add(extra)
    }
}

/// Length-delimited entries of field `field` at the top level of `body`, counted up to
/// where the body stops being well-formed protobuf.
fn entries(mut body: &[u8], field: u64) -> usize {
    use prost::encoding::decode_varint;
    let mut n = 0;
    while !body.is_empty() {
        let Ok(key) = decode_varint(&mut body) else {
            break;
        };
        let skip = match key & 7 {
            0 => match decode_varint(&mut body) {
                Ok(_) => 0,
                Err(_) => break,
            },
            1 => 8,
            5 => 4,
            2 => match decode_varint(&mut body) {
                Ok(len) => {
                    n += usize::from(key >> 3 == field);
                    usize::try_from(len).unwrap_or(usize::MAX)
                }
                Err(_) => break,
            },
            _ => break,
        };
        let Some(rest) = body.get(skip..) else {
            break;
        };
        body = rest;
    }
    n
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
