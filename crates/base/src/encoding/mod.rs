//! The same call in several encodings: WSTest's messages ([`wstest`]) and one codec per
//! encoding behind the small [`Codec`] trait, so that what an encoding costs (CPU on each
//! side, bytes on the wire, how both grow with the message) can be measured on every
//! transport.
//!
//! Layer 1, beside [`wire`](crate::wire): the server and the client both use it, and it
//! uses nothing above it. A codec only turns typed messages into bytes and back, checking
//! what it reads ([`DecodeError`]); routes, framing and the comparison of a reply with its
//! request belong to its users.
//!
//! Adding an encoding is one file with its [`Codec`] and one line in the registry below;
//! [`EncodingKind`] (its CLI, table and JSON name) and everything that lists encodings
//! follow from that line.

pub mod json;
pub mod msgpack;
pub mod postcard;
pub mod protobuf;
pub mod soap;
pub mod wstest;
mod xml;
pub mod xml_guard;
pub mod xmlrpc;

pub use wstest::{Message, Operation, Reply, Request};

/// What each codec answers for itself.
#[derive(Debug, Clone, Copy)]
pub struct Facts {
    /// The body's `Content-Type` over HTTP.
    pub content_type: &'static str,
    /// Other content types a server takes for it, as clients in the field send them
    /// (jsonrpclib-pelix sends `application/json-rpc`); replies carry `content_type`.
    pub also_accepted: &'static [&'static str],
    /// Where its calls go over HTTP.
    pub route: Route,
    /// A header naming the call's operation, where the encoding has one (SOAP's
    /// `SOAPAction`): clients send it, servers hold the body to it.
    pub operation_header: Option<OperationHeader>,
    /// A status other than 200 that a reply in the encoding's error form goes under
    /// (SOAP 1.1's Fault, under 500): a client judges its body rather than the status.
    pub fault_status: Option<u16>,
    /// The most heap a decoded message holds per byte of its body, measured on the
    /// smallest elements the encoding can write (`tests` below hold each codec to it):
    /// what a server leases before decoding a body of unknown shape.
    pub expansion: usize,
}

/// A request header naming the operation (SOAP 1.1's `SOAPAction`).
#[derive(Debug, Clone, Copy)]
pub struct OperationHeader {
    /// Its name, lower case.
    pub name: &'static str,
    /// Its value for a call of an operation.
    pub value: fn(Operation) -> &'static str,
    /// The operation a value names: `None` for one that names none (an empty
    /// SOAPAction), an error for one that names something this server lacks.
    pub parse: fn(&str) -> Result<Option<Operation>, String>,
}

/// A refused call's answer in the encoding's own error form.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ErrorReply {
    /// The HTTP status it goes under (SOAP's Fault under 500, JSON-RPC's and XML-RPC's
    /// under 200).
    pub status: u16,
    pub body: Vec<u8>,
}

/// Where an encoding's calls go over HTTP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// `POST {prefix}{Operation}`: the operation is in the path, not in the body.
    PerOperation(&'static str),
    /// `POST {path}`: the body names its operation (JSON-RPC's `method`).
    Fixed(&'static str),
}

/// A call's id as the body carries it: JSON-RPC's `id` (rpcbench's is the seq in 16 hex
/// digits; other clients send numbers or UUIDs, which a server echoes as they came). The
/// binary encodings carry none: the seq travels beside the body.
#[derive(Debug, Clone, Default, PartialEq)]
pub enum CallId {
    #[default]
    None,
    Json(serde_json::Value),
}

impl CallId {
    /// The id rpcbench gives call `seq`.
    pub fn of_seq(seq: u64) -> String {
        format!("{seq:016x}")
    }

    /// The id rpcbench sends with call `seq` (an encoding that carries none ignores it).
    pub fn of_call(seq: u64) -> CallId {
        CallId::Json(serde_json::Value::String(CallId::of_seq(seq)))
    }
}

/// What a body that cannot be decoded is, for the answer and its count.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// Not the encoding's syntax, cut short, a length past the body, a wrong type where
    /// the encoding itself says which (`rpc_malformed`).
    #[error("malformed {0} body: {1}")]
    Malformed(&'static str, String),
    /// An XML declaration naming an encoding other than UTF-8 (`rpc_malformed`; XML-RPC's
    /// -32701).
    #[error("unsupported encoding: {0}")]
    Charset(String),
    /// An XML body with a `<!DOCTYPE`, refused unread by [`xml_guard`] (`rpc_doctype`).
    #[error("refused: {0}")]
    Doctype(String),
    /// Nested deeper than [`wstest::MAX_LIST`] nodes, or than the codec's own limit
    /// (`rpc_too_deep`).
    #[error("nested too deep: {0}")]
    TooDeep(String),
    /// Well formed, but naming an operation or method this server lacks
    /// (`rpc_bad_call`; -32601).
    #[error("no such operation: {0}")]
    NoSuchOperation(String),
    /// Well formed, but not a call this server has: wrong parameters, a wrong type, a
    /// header naming another operation (`rpc_bad_call`).
    #[error("bad call: {0}")]
    BadCall(String),
    /// A reply in the encoding's own error form: its kind (`jsonrpc_-32601`) and text.
    #[error("{0}: {1}")]
    Fault(FaultKind, String),
}

impl DecodeError {
    /// Its code in the interoperability numbering JSON-RPC and XML-RPC share: -32700 not
    /// well formed, -32701 an unsupported encoding, -32601 no such method, -32602 bad
    /// params.
    pub fn rpc_code(&self) -> i32 {
        match self {
            DecodeError::Malformed(..) | DecodeError::Doctype(_) => -32700,
            DecodeError::Charset(_) => -32701,
            DecodeError::NoSuchOperation(_) => -32601,
            DecodeError::TooDeep(_) | DecodeError::BadCall(_) | DecodeError::Fault(..) => -32602,
        }
    }
}

/// A fault an encoding's error form carries, by the key a client counts it under.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FaultKind {
    /// A JSON-RPC error object's `code`: `jsonrpc_-32601`.
    JsonRpc(i64),
    /// An XML-RPC fault's `faultCode`: `xmlrpc_fault_-32602`.
    XmlRpc(i64),
    /// A SOAP 1.1 Fault, by its faultcode's first segment (`Client` of spyne's
    /// `Client.SchemaValidationError`): `soap_fault_client`.
    Soap(soap::FaultCode),
}

impl std::fmt::Display for FaultKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FaultKind::JsonRpc(code) => write!(f, "jsonrpc_{code}"),
            FaultKind::XmlRpc(code) => write!(f, "xmlrpc_fault_{code}"),
            FaultKind::Soap(code) => write!(f, "soap_fault_{}", code.key()),
        }
    }
}

/// Encoding a message into a body failed: only a message too large for the encoding's
/// lengths can make it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("cannot encode: {0}")]
pub struct EncodeError(pub String);

/// One encoding: requests and replies of WSTest's operations, both ways.
pub trait Codec {
    /// The encoding's answers.
    const FACTS: Facts;

    /// Appends the body of `req`, with its call id, to `out`.
    fn encode_request(req: &Request, id: &CallId, out: &mut Vec<u8>) -> Result<(), EncodeError>;

    /// The request in `body`. `op` is the operation the route or frame named, for an
    /// encoding whose body does not (the binary ones): a body that names its own gets
    /// `None`, or must agree with it.
    fn decode_request(op: Option<Operation>, body: &[u8])
    -> Result<(Request, CallId), DecodeError>;

    /// Appends the body of `reply` to the call `id` to `out`.
    fn encode_reply(reply: &Reply, id: &CallId, out: &mut Vec<u8>) -> Result<(), EncodeError>;

    /// The reply to a call of `op` in `body`, and the call id it carries.
    fn decode_reply(op: Operation, body: &[u8]) -> Result<(Reply, CallId), DecodeError>;

    /// The most heap decoding `body` as a request (of `op`, where the route named one)
    /// can hold, which a server leases before decoding: the body's length times
    /// [`Facts::expansion`], unless the codec bounds it closer for this body without
    /// allocating (protobuf, whose worst case is 16 times and whose usual case is 1).
    fn heap_bound(op: Option<Operation>, body: &[u8]) -> usize {
        let _ = op;
        body.len().saturating_mul(Self::FACTS.expansion)
    }

    /// The answer to a call refused with `error` (whose body was `request`) in the
    /// encoding's own error form, or `None` for an encoding that has none (the binary
    /// ones: a server then answers 400 and one line).
    fn error_reply(error: &DecodeError, request: &[u8]) -> Option<ErrorReply> {
        let _ = (error, request);
        None
    }
}

/// Generates [`EncodingKind`] from one line per codec: `Kind => codec::Type, "name";`.
macro_rules! encodings {
    ($($(#[$doc:meta])* $kind:ident => $codec:ty, $name:literal;)*) => {
        /// An encoding, by the name the CLI, the table and the JSON record use.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum EncodingKind {
            $($(#[$doc])* $kind,)*
        }

        impl EncodingKind {
            /// Every encoding, in registry order.
            pub const ALL: &[EncodingKind] = &[$(EncodingKind::$kind),*];

            /// Its name: `--encoding`'s value.
            pub fn name(self) -> &'static str {
                match self {
                    $(EncodingKind::$kind => $name,)*
                }
            }

            /// Its codec's answers.
            pub fn facts(self) -> &'static Facts {
                match self {
                    $(EncodingKind::$kind => &<$codec as Codec>::FACTS,)*
                }
            }

            /// [`Codec::encode_request`] of this encoding.
            pub fn encode_request(
                self,
                req: &Request,
                id: &CallId,
                out: &mut Vec<u8>,
            ) -> Result<(), EncodeError> {
                match self {
                    $(EncodingKind::$kind => <$codec>::encode_request(req, id, out),)*
                }
            }

            /// [`Codec::decode_request`] of this encoding, the request then held to
            /// WSTest's own rules ([`Request::check`]).
            pub fn decode_request(
                self,
                op: Option<Operation>,
                body: &[u8],
            ) -> Result<(Request, CallId), DecodeError> {
                let (req, id) = match self {
                    $(EncodingKind::$kind => <$codec>::decode_request(op, body)?,)*
                };
                match req.check() {
                    Ok(()) => Ok((req, id)),
                    Err(e) if e == wstest::TOO_DEEP => Err(DecodeError::TooDeep(e)),
                    Err(e) => Err(DecodeError::BadCall(e)),
                }
            }

            /// [`Codec::encode_reply`] of this encoding.
            pub fn encode_reply(
                self,
                reply: &Reply,
                id: &CallId,
                out: &mut Vec<u8>,
            ) -> Result<(), EncodeError> {
                match self {
                    $(EncodingKind::$kind => <$codec>::encode_reply(reply, id, out),)*
                }
            }

            /// [`Codec::heap_bound`] of this encoding.
            pub fn heap_bound(self, op: Option<Operation>, body: &[u8]) -> usize {
                match self {
                    $(EncodingKind::$kind => <$codec>::heap_bound(op, body),)*
                }
            }

            /// [`Codec::error_reply`] of this encoding.
            pub fn error_reply(self, error: &DecodeError, request: &[u8]) -> Option<ErrorReply> {
                match self {
                    $(EncodingKind::$kind => <$codec>::error_reply(error, request),)*
                }
            }

            /// [`Codec::decode_reply`] of this encoding.
            pub fn decode_reply(
                self,
                op: Operation,
                body: &[u8],
            ) -> Result<(Reply, CallId), DecodeError> {
                match self {
                    $(EncodingKind::$kind => <$codec>::decode_reply(op, body),)*
                }
            }
        }
    };
}

encodings! {
    /// postcard, the frames' own format: positional, no field names.
    Postcard => postcard::Postcard, "postcard";
    /// Protocol Buffers (prost), the messages of `proto/wstest.proto`.
    Protobuf => protobuf::Protobuf, "protobuf";
    /// JSON-RPC 2.0 (serde_json): the method in the body, positional params.
    Json => json::JsonRpc, "json";
    /// MessagePack (rmp-serde), structs as maps: self-describing binary.
    Msgpack => msgpack::Msgpack, "msgpack";
    /// XML-RPC: `methodCall`, the operation as its `methodName`.
    Xmlrpc => xmlrpc::XmlRpc, "xmlrpc";
    /// SOAP 1.1 document/literal (quick-xml): WSTest's own elements in an Envelope.
    Soap => soap::Soap, "soap";
}

impl EncodingKind {
    /// The encoding named `name`.
    pub fn from_name(name: &str) -> Option<EncodingKind> {
        Self::ALL.iter().copied().find(|e| e.name() == name)
    }

    /// Its code in a raw frame's trailer (`encoding u8`): its place in the registry, from 1.
    pub fn code(self) -> u8 {
        Self::ALL
            .iter()
            .position(|&e| e == self)
            .map_or(0, |i| i as u8 + 1)
    }

    /// The encoding of trailer code `code`.
    pub fn from_code(code: u8) -> Option<EncodingKind> {
        Self::ALL.get(usize::from(code).checked_sub(1)?).copied()
    }
}

impl std::str::FromStr for EncodingKind {
    type Err = String;

    fn from_str(name: &str) -> Result<Self, String> {
        EncodingKind::from_name(name).ok_or_else(|| {
            let known: Vec<&str> = EncodingKind::ALL.iter().map(|e| e.name()).collect();
            format!("no encoding {name:?} (known: {})", known.join(", "))
        })
    }
}

impl serde::Serialize for EncodingKind {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl<'de> serde::Deserialize<'de> for EncodingKind {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let name = String::deserialize(d)?;
        EncodingKind::from_name(&name)
            .ok_or_else(|| serde::de::Error::custom(format!("no encoding {name:?}")))
    }
}

impl std::fmt::Display for EncodingKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The operation a route or frame named, which a binary encoding's body needs.
fn routed(op: Option<Operation>) -> Result<Operation, DecodeError> {
    op.ok_or_else(|| DecodeError::BadCall("no operation named".into()))
}

/// The [`DecodeError`] of a serde codec's error: [`DecodeError::TooDeep`] when the list's
/// depth guard or the codec's own recursion limit stopped it (`deep` says which of the
/// codec's messages mean that), else [`DecodeError::Malformed`].
fn serde_error(codec: &'static str, e: impl std::fmt::Display, deep: &[&str]) -> DecodeError {
    let text = e.to_string();
    if wstest::tripped() || deep.iter().any(|d| text.contains(d)) {
        DecodeError::TooDeep(text)
    } else {
        DecodeError::Malformed(codec, text)
    }
}

#[cfg(test)]
mod tests;
