//! WSTest's messages and the values rpcbench fills them with.
//!
//! The types are prost's, generated from `proto/wstest.proto` (with serde derives and
//! WSTest's field names added by build.rs), so that one set of Rust types serves every
//! encoding. Values come from the call's seq and the element's index `k`, with fixed
//! widths, so every call of a message has the same body length in every encoding, and a
//! reply can be checked field by field against what was sent ([`Reply::echoes`]).

pub use crate::proto::{
    EchoList, EchoListResponse, EchoStruct, EchoStructResponse, EchoSynthetic,
    EchoSyntheticResponse, EchoVoid, EchoVoidResponse, Synthetic, TestNode, TestStruct,
};
use bytes::Bytes;
use std::cell::Cell;

/// The most nodes an `EchoList` may hold, in every encoding: the list is sent nested (that
/// is echoList's point), and prost and Python's protobuf stop at 100 nested messages,
/// serde_json at 128 levels, zeep and spyne somewhere under 180. One cap keeps every cell.
pub const MAX_LIST: usize = 64;

/// The most structs an `EchoStruct` may hold: a message of this many is about 6 MiB in
/// the most verbose encoding; the body limit of a run (`--max-frame`) is what stops one.
pub const MAX_STRUCTS: usize = 1 << 20;

/// The most bytes an `EchoSynthetic`'s `Barray` may hold (the frames' own limit is what
/// stops a run before this).
pub const MAX_SYNTHETIC: usize = 64 << 20;

/// The text of the depth guard's error, which the codecs recognise in their own errors.
pub const TOO_DEEP: &str = "rpcbench: list deeper than 64 nodes";

/// One of WSTest's operations.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Operation {
    EchoVoid,
    EchoStruct,
    EchoList,
    EchoSynthetic,
}

impl Operation {
    /// Every operation.
    pub const ALL: [Operation; 4] = [
        Operation::EchoVoid,
        Operation::EchoStruct,
        Operation::EchoList,
        Operation::EchoSynthetic,
    ];

    /// WSTest's name: the JSON-RPC method, the XML element, the last segment of the route.
    pub fn name(self) -> &'static str {
        match self {
            Operation::EchoVoid => "EchoVoid",
            Operation::EchoStruct => "EchoStruct",
            Operation::EchoList => "EchoList",
            Operation::EchoSynthetic => "EchoSynthetic",
        }
    }

    /// The operation named `name`.
    pub fn from_name(name: &str) -> Option<Operation> {
        Self::ALL.into_iter().find(|op| op.name() == name)
    }

    /// Its code in a raw frame's trailer (`operation u8`), from 1.
    pub fn code(self) -> u8 {
        self as u8 + 1
    }

    /// The operation of trailer code `code`.
    pub fn from_code(code: u8) -> Option<Operation> {
        Self::ALL.get(usize::from(code).checked_sub(1)?).copied()
    }
}

/// A request of any operation.
#[derive(Debug, Clone, PartialEq)]
pub enum Request {
    EchoVoid(EchoVoid),
    EchoStruct(EchoStruct),
    EchoList(EchoList),
    EchoSynthetic(EchoSynthetic),
}

/// A reply of any operation.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    EchoVoid(EchoVoidResponse),
    EchoStruct(EchoStructResponse),
    EchoList(EchoListResponse),
    EchoSynthetic(EchoSyntheticResponse),
}

impl Request {
    /// Its operation.
    pub fn operation(&self) -> Operation {
        match self {
            Request::EchoVoid(_) => Operation::EchoVoid,
            Request::EchoStruct(_) => Operation::EchoStruct,
            Request::EchoList(_) => Operation::EchoList,
            Request::EchoSynthetic(_) => Operation::EchoSynthetic,
        }
    }

    /// The echo a server answers it with: the same values, moved into the reply.
    pub fn into_reply(self) -> Reply {
        match self {
            Request::EchoVoid(EchoVoid {}) => Reply::EchoVoid(EchoVoidResponse {}),
            Request::EchoStruct(m) => Reply::EchoStruct(EchoStructResponse {
                echo_struct_result: m.array,
            }),
            Request::EchoList(m) => Reply::EchoList(EchoListResponse {
                echo_list_result: m.list,
            }),
            Request::EchoSynthetic(m) => Reply::EchoSynthetic(EchoSyntheticResponse {
                echo_synthetic_result: m.synth,
            }),
        }
    }

    /// Checks what a decoder cannot: WSTest's own rules (at least one struct, a list of
    /// 1 to [`MAX_LIST`] nodes, a synthetic with its struct).
    pub fn check(&self) -> Result<(), String> {
        match self {
            Request::EchoVoid(_) => Ok(()),
            Request::EchoStruct(m) if m.array.is_empty() => {
                Err("EchoStruct without a struct".into())
            }
            Request::EchoStruct(_) => Ok(()),
            Request::EchoList(m) => match list_len(m.list.as_ref()) {
                0 => Err("EchoList without a list".into()),
                n if n > MAX_LIST => Err(TOO_DEEP.into()),
                _ => Ok(()),
            },
            Request::EchoSynthetic(m) => match &m.synth {
                Some(s) if s.strct.is_some() => Ok(()),
                _ => Err("EchoSynthetic without its Synthetic or its Strct".into()),
            },
        }
    }

    /// The heap its values hold, in bytes: what decoding a body into it allocated, at
    /// least (the measure of [`Facts::expansion`](super::Facts::expansion)).
    pub fn heap_bytes(&self) -> usize {
        match self {
            Request::EchoVoid(_) => 0,
            Request::EchoStruct(m) => structs_heap(&m.array),
            Request::EchoList(m) => m.list.as_ref().map_or(0, node_heap),
            Request::EchoSynthetic(m) => m.synth.as_ref().map_or(0, synthetic_heap),
        }
    }
}

impl Reply {
    /// Its operation.
    pub fn operation(&self) -> Operation {
        match self {
            Reply::EchoVoid(_) => Operation::EchoVoid,
            Reply::EchoStruct(_) => Operation::EchoStruct,
            Reply::EchoList(_) => Operation::EchoList,
            Reply::EchoSynthetic(_) => Operation::EchoSynthetic,
        }
    }

    /// True when it carries back exactly the values of `req`: the same operation, the
    /// same number of elements, and each `i`, `f` (bit for bit), `s` and `Barray` equal.
    pub fn echoes(&self, req: &Request) -> bool {
        match (self, req) {
            (Reply::EchoVoid(_), Request::EchoVoid(_)) => true,
            (Reply::EchoStruct(r), Request::EchoStruct(q)) => {
                r.echo_struct_result.len() == q.array.len()
                    && r.echo_struct_result
                        .iter()
                        .zip(&q.array)
                        .all(|(a, b)| same_struct(a, b))
            }
            (Reply::EchoList(r), Request::EchoList(q)) => {
                same_list(r.echo_list_result.as_ref(), q.list.as_ref())
            }
            (Reply::EchoSynthetic(r), Request::EchoSynthetic(q)) => {
                match (&r.echo_synthetic_result, &q.synth) {
                    (Some(a), Some(b)) => {
                        a.strng == b.strng
                            && a.barray == b.barray
                            && match (&a.strct, &b.strct) {
                                (Some(x), Some(y)) => same_struct(x, y),
                                (None, None) => true,
                                _ => false,
                            }
                    }
                    (None, None) => true,
                    _ => false,
                }
            }
            _ => false,
        }
    }
}

fn same_struct(a: &TestStruct, b: &TestStruct) -> bool {
    a.i == b.i && a.f.to_bits() == b.f.to_bits() && a.s == b.s
}

fn same_list(mut a: Option<&TestNode>, mut b: Option<&TestNode>) -> bool {
    loop {
        match (a, b) {
            (None, None) => return true,
            (Some(x), Some(y)) => {
                if x.i != y.i || x.f.to_bits() != y.f.to_bits() || x.s != y.s {
                    return false;
                }
                (a, b) = (x.next.as_deref(), y.next.as_deref());
            }
            _ => return false,
        }
    }
}

/// Nodes in the list starting at `node`.
pub fn list_len(mut node: Option<&TestNode>) -> usize {
    let mut n = 0;
    while let Some(x) = node {
        n += 1;
        node = x.next.as_deref();
    }
    n
}

fn structs_heap(structs: &[TestStruct]) -> usize {
    size_of_val(structs) + structs.iter().map(|s| s.s.len()).sum::<usize>()
}

fn node_heap(node: &TestNode) -> usize {
    let mut total = 0;
    let mut at = Some(node);
    while let Some(x) = at {
        total += x.s.len() + x.next.as_ref().map_or(0, |_| size_of::<TestNode>());
        at = x.next.as_deref();
    }
    total
}

fn synthetic_heap(s: &Synthetic) -> usize {
    s.strng.len() + s.barray.len() + s.strct.as_ref().map_or(0, |t| t.s.len())
}

/// A message to send: an operation and its size (`--message`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Message {
    /// `echo-void`.
    Void,
    /// `echo-struct:N`: N structs.
    Struct(usize),
    /// `echo-list:N`: a list of N nodes.
    List(usize),
    /// `echo-synthetic:BYTES`: a Synthetic whose Barray is BYTES long.
    Synthetic(usize),
}

impl Message {
    /// Its operation.
    pub fn operation(self) -> Operation {
        match self {
            Message::Void => Operation::EchoVoid,
            Message::Struct(_) => Operation::EchoStruct,
            Message::List(_) => Operation::EchoList,
            Message::Synthetic(_) => Operation::EchoSynthetic,
        }
    }

    /// The request of call `seq`: its values made from `seq` and each element's index.
    pub fn request(self, seq: u64) -> Request {
        match self {
            Message::Void => Request::EchoVoid(EchoVoid {}),
            Message::Struct(n) => Request::EchoStruct(EchoStruct {
                array: (0..n as u64).map(|k| test_struct(seq, k)).collect(),
            }),
            Message::List(n) => {
                let mut list = None;
                for k in (0..n as u64).rev() {
                    let TestStruct { i, f, s } = test_struct(seq, k);
                    list = Some(Box::new(TestNode {
                        i,
                        f,
                        s,
                        next: list,
                    }));
                }
                Request::EchoList(EchoList {
                    list: list.map(|b| *b),
                })
            }
            Message::Synthetic(bytes) => {
                let mut barray = Vec::new();
                crate::wire::pattern(seq, bytes, &mut barray);
                Request::EchoSynthetic(EchoSynthetic {
                    synth: Some(Synthetic {
                        strng: string(seq, 0),
                        strct: Some(test_struct(seq, 0)),
                        barray: Bytes::from(barray),
                    }),
                })
            }
        }
    }
}

impl serde::Serialize for Message {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for Message {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d)?
            .parse()
            .map_err(serde::de::Error::custom)
    }
}

impl std::str::FromStr for Message {
    type Err = String;

    /// `echo-void`, `echo-struct:N`, `echo-list:N` (1 to 64) or `echo-synthetic:BYTES`
    /// (`64KiB` and the like, as `--payload` takes).
    fn from_str(s: &str) -> Result<Message, String> {
        let (name, size) = match s.split_once(':') {
            Some((name, size)) => (name, Some(size)),
            None => (s, None),
        };
        let count = |max: usize| -> Result<usize, String> {
            let size = size.ok_or_else(|| format!("{name} needs a size: {name}:N"))?;
            match size.parse::<usize>() {
                Ok(n) if (1..=max).contains(&n) => Ok(n),
                _ => Err(format!(
                    "{name}:{size}: N must be a whole number from 1 to {max}"
                )),
            }
        };
        match name {
            "echo-void" if size.is_none() => Ok(Message::Void),
            "echo-void" => Err("echo-void takes no size".into()),
            "echo-struct" => count(MAX_STRUCTS).map(Message::Struct),
            "echo-list" => count(MAX_LIST).map(Message::List),
            "echo-synthetic" => {
                let size = size.ok_or("echo-synthetic needs a size: echo-synthetic:BYTES")?;
                let bytes = crate::units::parse_bytes(size).map_err(|e| format!("{s}: {e}"))?;
                let bytes = bytes as usize;
                if bytes > MAX_SYNTHETIC {
                    return Err(format!("{s}: at most {MAX_SYNTHETIC} bytes"));
                }
                Ok(Message::Synthetic(bytes))
            }
            _ => Err(format!(
                "unknown message {name:?}: echo-void, echo-struct:N, echo-list:N or echo-synthetic:BYTES"
            )),
        }
    }
}

impl std::fmt::Display for Message {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Message::Void => f.write_str("echo-void"),
            Message::Struct(n) => write!(f, "echo-struct:{n}"),
            Message::List(n) => write!(f, "echo-list:{n}"),
            Message::Synthetic(n) => {
                // `64KiB`, as the flag takes it.
                let size = u32::try_from(*n).map_or_else(|_| n.to_string(), crate::units::bytes);
                write!(f, "echo-synthetic:{}", size.replace(' ', ""))
            }
        }
    }
}

/// The struct at index `k` of call `seq`: `i` always 10 digits (and a 5-byte varint), `f`
/// finite and exact to compare, `s` 16 characters that XML and JSON must escape.
pub fn test_struct(seq: u64, k: u64) -> TestStruct {
    let spread = (u128::from(seq) * 1009 + u128::from(k)) % 1_000_000_000;
    TestStruct {
        i: 1_000_000_000 + spread as i32,
        f: ((k % 1000) + 1) as f32 * 0.1,
        s: string(seq, k),
    }
}

/// `s` of element `k` of call `seq`: 8 hex digits of seq, 5 of k, then `&<é`.
fn string(seq: u64, k: u64) -> String {
    format!("{:08x}{:05x}&<é", seq & 0xffff_ffff, k & 0xf_ffff)
}

thread_local! {
    /// `Next` fields being decoded on this thread, nested: the list's depth so far.
    static DEPTH: Cell<usize> = const { Cell::new(0) };
    /// Set when the guard refused a list, until [`tripped`] reads it: postcard's errors
    /// drop a custom message, so the codecs ask here why a decode failed.
    static TRIPPED: Cell<bool> = const { Cell::new(false) };
}

/// True when the depth guard refused a list on this thread since the last call.
pub fn tripped() -> bool {
    TRIPPED.replace(false)
}

/// The serde decoder of `TestNode.Next` (build.rs names it): decodes the next node unless
/// the list is already [`MAX_LIST`] nodes deep, so a list of 100,000 nested nodes stops at
/// node 65 before recursing further. postcard has no recursion limit of its own; serde_json
/// and rmp-serde stop at 128 levels, which this comes before.
pub fn next_node<'de, D>(d: D) -> Result<Option<Box<TestNode>>, D::Error>
where
    D: serde::Deserializer<'de>,
{
    use serde::Deserialize as _;
    use serde::de::Error as _;
    struct Level;
    impl Drop for Level {
        fn drop(&mut self) {
            DEPTH.set(DEPTH.get() - 1);
        }
    }
    // Node k's `Next` is decoded at depth k - 1 (the first node is the list itself): at
    // MAX_LIST, node MAX_LIST + 1 is being decoded, one too many.
    if DEPTH.get() >= MAX_LIST {
        TRIPPED.set(true);
        return Err(D::Error::custom(TOO_DEEP));
    }
    DEPTH.set(DEPTH.get() + 1);
    let _level = Level;
    Option::<Box<TestNode>>::deserialize(d)
}

/// `Barray` through serde: base64 text in a human-readable encoding (JSON), bytes in a
/// binary one (postcard, MessagePack).
pub mod base64_bytes {
    use base64::Engine as _;
    use base64::engine::general_purpose::STANDARD;
    use bytes::Bytes;
    use serde::{Deserializer, Serializer, de};

    /// Writes `bytes` as base64 text or as bytes.
    pub fn serialize<S: Serializer>(bytes: &Bytes, s: S) -> Result<S::Ok, S::Error> {
        if s.is_human_readable() {
            s.serialize_str(&STANDARD.encode(bytes))
        } else {
            s.serialize_bytes(bytes)
        }
    }

    /// Reads base64 text or bytes.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Bytes, D::Error> {
        struct Visit;
        impl<'de> de::Visitor<'de> for Visit {
            type Value = Bytes;

            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("bytes, or base64 text")
            }

            fn visit_str<E: de::Error>(self, v: &str) -> Result<Bytes, E> {
                STANDARD.decode(v).map(Bytes::from).map_err(E::custom)
            }

            fn visit_bytes<E: de::Error>(self, v: &[u8]) -> Result<Bytes, E> {
                Ok(Bytes::copy_from_slice(v))
            }

            fn visit_byte_buf<E: de::Error>(self, v: Vec<u8>) -> Result<Bytes, E> {
                Ok(Bytes::from(v))
            }
        }
        if d.is_human_readable() {
            d.deserialize_str(Visit)
        } else {
            d.deserialize_bytes(Visit)
        }
    }
}

/// The request of `op` from a serde decoder: the message the operation takes.
pub(super) fn request_of<'de, D>(op: Operation, d: D) -> Result<Request, D::Error>
where
    D: serde::Deserializer<'de>,
{
    use serde::Deserialize as _;
    Ok(match op {
        Operation::EchoVoid => Request::EchoVoid(EchoVoid::deserialize(d)?),
        Operation::EchoStruct => Request::EchoStruct(EchoStruct::deserialize(d)?),
        Operation::EchoList => Request::EchoList(EchoList::deserialize(d)?),
        Operation::EchoSynthetic => Request::EchoSynthetic(EchoSynthetic::deserialize(d)?),
    })
}

/// The reply of `op` from a serde decoder.
pub(super) fn reply_of<'de, D>(op: Operation, d: D) -> Result<Reply, D::Error>
where
    D: serde::Deserializer<'de>,
{
    use serde::Deserialize as _;
    Ok(match op {
        Operation::EchoVoid => Reply::EchoVoid(EchoVoidResponse::deserialize(d)?),
        Operation::EchoStruct => Reply::EchoStruct(EchoStructResponse::deserialize(d)?),
        Operation::EchoList => Reply::EchoList(EchoListResponse::deserialize(d)?),
        Operation::EchoSynthetic => Reply::EchoSynthetic(EchoSyntheticResponse::deserialize(d)?),
    })
}

/// Writes the message inside, as its own type would.
impl serde::Serialize for Request {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Request::EchoVoid(m) => m.serialize(s),
            Request::EchoStruct(m) => m.serialize(s),
            Request::EchoList(m) => m.serialize(s),
            Request::EchoSynthetic(m) => m.serialize(s),
        }
    }
}

/// Writes the message inside, as its own type would.
impl serde::Serialize for Reply {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Reply::EchoVoid(m) => m.serialize(s),
            Reply::EchoStruct(m) => m.serialize(s),
            Reply::EchoList(m) => m.serialize(s),
            Reply::EchoSynthetic(m) => m.serialize(s),
        }
    }
}
