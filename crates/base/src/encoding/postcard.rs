//! postcard, the raw frames' own format: positional (no field names), varints, lengths
//! before strings and bytes. The most compact of the serde encodings, and the one with
//! no recursion limit of its own: the list's depth guard
//! ([`next_node`](super::wstest::next_node)) is what stops a deep one.

use super::wstest::{self, Operation, Reply, Request};
use super::{CallId, Codec, DecodeError, EncodeError, Facts, Route};

/// postcard over serde.
pub struct Postcard;

impl Codec for Postcard {
    const FACTS: Facts = Facts {
        content_type: "application/x-postcard",
        also_accepted: &[],
        route: Route::PerOperation("/rpc/"),
        operation_header: None,
        fault_status: None,
        // A TestStruct of `i` 0, `f` 0.0 and no `s` is 6 bytes (a 1-byte varint, 4 bytes
        // of float, a 1-byte length) for the 32 it holds in its Vec: 5.3.
        expansion: 6,
    };

    fn encode_request(req: &Request, _: &CallId, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        encode(req, out)
    }

    fn decode_request(
        op: Option<Operation>,
        body: &[u8],
    ) -> Result<(Request, CallId), DecodeError> {
        let op = super::routed(op)?;
        decode(body, |d| wstest::request_of(op, d)).map(|r| (r, CallId::None))
    }

    fn encode_reply(reply: &Reply, _: &CallId, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        encode(reply, out)
    }

    fn decode_reply(op: Operation, body: &[u8]) -> Result<(Reply, CallId), DecodeError> {
        decode(body, |d| wstest::reply_of(op, d)).map(|r| (r, CallId::None))
    }
}

fn encode(msg: &impl serde::Serialize, out: &mut Vec<u8>) -> Result<(), EncodeError> {
    let body = std::mem::take(out);
    *out = postcard::to_extend(msg, body).map_err(|e| EncodeError(e.to_string()))?;
    Ok(())
}

/// Decodes the whole of `body` with `read`: bytes left after the message are malformed.
fn decode<'de, T>(
    body: &'de [u8],
    read: impl FnOnce(
        &mut postcard::Deserializer<'de, postcard::de_flavors::Slice<'de>>,
    ) -> postcard::Result<T>,
) -> Result<T, DecodeError> {
    let mut d = postcard::Deserializer::from_bytes(body);
    let msg = read(&mut d).map_err(|e| super::serde_error("postcard", e, &[]))?;
    match d.finalize() {
        Ok([]) => Ok(msg),
        Ok(rest) => Err(DecodeError::Malformed(
            "postcard",
            format!("{} bytes after the message", rest.len()),
        )),
        Err(e) => Err(super::serde_error("postcard", e, &[])),
    }
}
