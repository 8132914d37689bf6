//! MessagePack over rmp-serde, structs written as maps (field names included): the
//! self-describing binary encoding beside positional postcard. EchoVoid is an empty map.
//! rmp-serde's own depth limit is set to 128, and the list's guard stops at node 65.

use super::wstest::{self, Operation, Reply, Request};
use super::{CallId, Codec, DecodeError, EncodeError, Facts, Route};
use serde::Deserialize as _;

/// rmp-serde, structs as maps.
pub struct Msgpack;

/// rmp-serde's nesting limit here, as serde_json's.
const MAX_DEPTH: usize = 128;

/// rmp-serde's words for its depth limit.
const DEEP: &[&str] = &["depth limit exceeded"];

impl Codec for Msgpack {
    const FACTS: Facts = Facts {
        content_type: "application/msgpack",
        also_accepted: &[],
        route: Route::PerOperation("/rpc/"),
        operation_header: None,
        fault_status: None,
        // serde's derive also takes a struct written as an array: `[0, 0.0, ""]` is
        // 8 bytes (a float is 5) for the 32 a TestStruct holds.
        expansion: 4,
    };

    fn encode_request(req: &Request, _: &CallId, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        rmp_serde::encode::write_named(out, req).map_err(|e| EncodeError(e.to_string()))
    }

    fn decode_request(
        op: Option<Operation>,
        body: &[u8],
    ) -> Result<(Request, CallId), DecodeError> {
        let op = super::routed(op)?;
        decode(body, |d| wstest::request_of(op, d)).map(|r| (r, CallId::None))
    }

    fn encode_reply(reply: &Reply, _: &CallId, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        rmp_serde::encode::write_named(out, reply).map_err(|e| EncodeError(e.to_string()))
    }

    fn decode_reply(op: Operation, body: &[u8]) -> Result<(Reply, CallId), DecodeError> {
        decode(body, |d| wstest::reply_of(op, d)).map(|r| (r, CallId::None))
    }
}

type Decoder<'a> = rmp_serde::Deserializer<rmp_serde::decode::ReadRefReader<'a, [u8]>>;

/// Decodes the whole of `body` with `read`: bytes left after the message are malformed.
fn decode<'a, T>(
    body: &'a [u8],
    read: impl FnOnce(&mut Decoder<'a>) -> Result<T, rmp_serde::decode::Error>,
) -> Result<T, DecodeError> {
    let mut d = rmp_serde::Deserializer::from_read_ref(body);
    d.set_max_depth(MAX_DEPTH);
    let msg = read(&mut d).map_err(|e| super::serde_error("msgpack", e, DEEP))?;
    // The decoder does not say where it stopped: reading one more value must find the
    // end of the body.
    match serde::de::IgnoredAny::deserialize(&mut d) {
        Err(rmp_serde::decode::Error::InvalidMarkerRead(e))
            if e.kind() == std::io::ErrorKind::UnexpectedEof =>
        {
            Ok(msg)
        }
        _ => Err(DecodeError::Malformed(
            "msgpack",
            "bytes after the message".into(),
        )),
    }
}
