//! XML-RPC: `<methodCall>` with the operation as `methodName` and the message's only field
//! as the one param (none for EchoVoid), a `<methodResponse>` with the result (EchoVoid's
//! an empty `<struct>`: the protocol needs one value), a `<fault>` for a refused call with
//! the interoperability codes (-32700 not well formed, -32701 an unsupported encoding,
//! -32601 no such method, -32602 bad params), under HTTP 200.
//!
//! Structs are XML-RPC structs with WSTest's member names: `i` an `<i4>` (an `<int>` read
//! too), `f` a `<double>` written as the shortest text that reads back to the same f32,
//! `s` a `<string>` (an untagged value read as one too), a list node's `Next` absent at the
//! tail, `Barray` a `<base64>` (line breaks read, as Python writes them). Members are read
//! in any order; every one is checked for its type.
//!
//! Written by hand on quick-xml, as SOAP is, rather than on dxr (the crate first chosen):
//! dxr reads through quick-xml's serde deserializer, whose recursion limit of 128 (which
//! dxr does not let a caller raise) stops a list at 42 nodes, three levels each, so
//! echo-list:64 could not be read; and dxr builds a value tree (a B-tree per struct)
//! before the message. Here every body first passes [`xml_guard`](super::xml_guard) (no
//! DTD, at most 300 elements deep, well formed, UTF-8) and is read straight into WSTest's
//! types.

use super::wstest::{
    EchoList, EchoListResponse, EchoStruct, EchoStructResponse, EchoSynthetic,
    EchoSyntheticResponse, EchoVoid, EchoVoidResponse, MAX_LIST, Operation, Reply, Request,
    Synthetic, TOO_DEEP, TestNode, TestStruct,
};
use super::xml::{self, Content, Item, escape};
use super::{CallId, Codec, DecodeError, EncodeError, ErrorReply, Facts, FaultKind, Route};
use bytes::Bytes;
use std::io::Write as _;

/// XML-RPC.
pub struct XmlRpc;

/// The name in errors.
const NAME: &str = "xmlrpc";

impl Codec for XmlRpc {
    const FACTS: Facts = Facts {
        content_type: "text/xml",
        also_accepted: &["application/xml"],
        route: Route::Fixed("/RPC2"),
        operation_header: None,
        fault_status: None,
        // `<value><struct><member><name>i</name>...` takes over 100 bytes for the 32 a
        // TestStruct holds; read with no tree in between.
        expansion: 1,
    };

    fn encode_request(req: &Request, _: &CallId, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        out.extend_from_slice(b"<?xml version=\"1.0\"?>\n<methodCall><methodName>");
        out.extend_from_slice(req.operation().name().as_bytes());
        out.extend_from_slice(b"</methodName><params>");
        let param = |out: &mut Vec<u8>, write: &dyn Fn(&mut Vec<u8>)| {
            out.extend_from_slice(b"<param>");
            write(out);
            out.extend_from_slice(b"</param>");
        };
        match req {
            Request::EchoVoid(_) => {}
            Request::EchoStruct(m) => param(out, &|out| write_structs(out, &m.array)),
            Request::EchoList(m) => {
                if let Some(list) = &m.list {
                    param(out, &|out| write_node(out, list));
                }
            }
            Request::EchoSynthetic(m) => {
                if let Some(synth) = &m.synth {
                    param(out, &|out| write_synthetic(out, synth));
                }
            }
        }
        out.extend_from_slice(b"</params></methodCall>");
        Ok(())
    }

    fn decode_request(
        op: Option<Operation>,
        body: &[u8],
    ) -> Result<(Request, CallId), DecodeError> {
        xml::read(NAME, body, false, |doc| read_request(doc, op)).map(|req| (req, CallId::None))
    }

    fn encode_reply(reply: &Reply, _: &CallId, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        out.extend_from_slice(b"<?xml version=\"1.0\"?>\n<methodResponse><params><param>");
        match reply {
            Reply::EchoStruct(m) => write_structs(out, &m.echo_struct_result),
            Reply::EchoList(m) => match &m.echo_list_result {
                Some(list) => write_node(out, list),
                None => out.extend_from_slice(b"<value><struct></struct></value>"),
            },
            Reply::EchoSynthetic(m) => match &m.echo_synthetic_result {
                Some(synth) => write_synthetic(out, synth),
                None => out.extend_from_slice(b"<value><struct></struct></value>"),
            },
            Reply::EchoVoid(_) => out.extend_from_slice(b"<value><struct></struct></value>"),
        }
        out.extend_from_slice(b"</param></params></methodResponse>");
        Ok(())
    }

    fn decode_reply(op: Operation, body: &[u8]) -> Result<(Reply, CallId), DecodeError> {
        let malformed = |e: DecodeError| match e {
            DecodeError::BadCall(text) | DecodeError::NoSuchOperation(text) => {
                DecodeError::Malformed(NAME, text)
            }
            other => other,
        };
        let read = |doc: &mut xml::Doc| -> Result<Reply, DecodeError> {
            expect(doc, Tag::MethodResponse)?;
            match doc.next(Tag::of)? {
                Item::Open(Tag::Params) => {}
                Item::Open(Tag::Fault) => return Err(fault(doc)),
                Item::Open(t) => return Err(unexpected(t)),
                Item::Close => return Err(DecodeError::BadCall("an empty methodResponse".into())),
            }
            expect(doc, Tag::Param)?;
            expect(doc, Tag::Value)?;
            let reply = reply_value(doc, op)?;
            for _ in ["param", "params", "methodResponse"] {
                expect_close(doc)?;
            }
            doc.finish()?;
            Ok(reply)
        };
        let reply = xml::read(NAME, body, false, read).map_err(malformed)?;
        Ok((reply, CallId::None))
    }

    /// A fault under 200, with the interoperability code.
    fn error_reply(error: &DecodeError, _: &[u8]) -> Option<ErrorReply> {
        let mut body = Vec::new();
        write_fault(&mut body, error.rpc_code(), &error.to_string());
        Some(ErrorReply { status: 200, body })
    }
}

/// Appends a fault response with `code` and `message` to `out`.
pub fn write_fault(out: &mut Vec<u8>, code: i32, message: &str) {
    let _ = write!(
        out,
        "<?xml version=\"1.0\"?>\n<methodResponse><fault><value><struct>\
         <member><name>faultCode</name><value><int>{code}</int></value></member>\
         <member><name>faultString</name><value><string>"
    );
    escape(out, message);
    out.extend_from_slice(b"</string></value></member></struct></value></fault></methodResponse>");
}

/// The request in a methodCall (the operation `op` where a frame named one).
fn read_request(doc: &mut xml::Doc, op: Option<Operation>) -> Result<Request, DecodeError> {
    if !matches!(doc.next(Tag::of)?, Item::Open(Tag::MethodCall)) {
        return Err(DecodeError::BadCall("not a methodCall".into()));
    }
    if !matches!(doc.next(Tag::of)?, Item::Open(Tag::MethodName)) {
        return Err(DecodeError::BadCall(
            "a methodCall without its methodName".into(),
        ));
    }
    let name = doc.text()?;
    let named = Operation::from_name(name.trim())
        .ok_or_else(|| DecodeError::NoSuchOperation(format!("no method {:?}", name.trim())))?;
    if op.is_some_and(|op| op != named) {
        return Err(DecodeError::BadCall(format!(
            "{} where the frame names another",
            named.name()
        )));
    }
    let mut req = None;
    let mut params = 0;
    // `<params>`, or the methodCall's end where it has none.
    match doc.next(Tag::of)? {
        Item::Close => {}
        Item::Open(Tag::Params) => loop {
            match doc.next(Tag::of)? {
                Item::Close => {
                    expect_close(doc)?;
                    break;
                }
                Item::Open(Tag::Param) => {
                    params += 1;
                    expect(doc, Tag::Value)?;
                    if params == 1 && named != Operation::EchoVoid {
                        req = Some(request_param(doc, named)?);
                    } else {
                        doc.skip()?;
                    }
                    expect_close(doc)?;
                }
                Item::Open(t) => return Err(unexpected(t)),
            }
        },
        Item::Open(t) => return Err(unexpected(t)),
    }
    doc.finish()?;
    let req = match (named, req) {
        (Operation::EchoVoid, _) if params == 0 => Request::EchoVoid(EchoVoid {}),
        (_, Some(req)) if params == 1 => req,
        (op, _) => {
            let takes = if op == Operation::EchoVoid {
                "none"
            } else {
                "one"
            };
            return Err(DecodeError::BadCall(format!(
                "{} takes {takes} param, not {params}",
                op.name()
            )));
        }
    };
    Ok(req)
}

// ---- writing ----

fn write_members(out: &mut Vec<u8>, i: i32, f: f32, s: &str) {
    // Writes into a Vec cannot fail.
    let _ = write!(
        out,
        "<member><name>i</name><value><i4>{i}</i4></value></member>\
         <member><name>f</name><value><double>{}</double></value></member>\
         <member><name>s</name><value><string>",
        xml::Float(f)
    );
    escape(out, s);
    out.extend_from_slice(b"</string></value></member>");
}

fn write_struct(out: &mut Vec<u8>, t: &TestStruct) {
    out.extend_from_slice(b"<value><struct>");
    write_members(out, t.i, t.f, &t.s);
    out.extend_from_slice(b"</struct></value>");
}

fn write_structs(out: &mut Vec<u8>, structs: &[TestStruct]) {
    out.extend_from_slice(b"<value><array><data>");
    for t in structs {
        write_struct(out, t);
    }
    out.extend_from_slice(b"</data></array></value>");
}

fn write_node(out: &mut Vec<u8>, node: &TestNode) {
    out.extend_from_slice(b"<value><struct>");
    let mut depth = 0;
    let mut at = node;
    loop {
        write_members(out, at.i, at.f, &at.s);
        match &at.next {
            Some(next) => {
                out.extend_from_slice(b"<member><name>Next</name><value><struct>");
                depth += 1;
                at = next;
            }
            None => break,
        }
    }
    for _ in 0..depth {
        out.extend_from_slice(b"</struct></value></member>");
    }
    out.extend_from_slice(b"</struct></value>");
}

fn write_synthetic(out: &mut Vec<u8>, s: &Synthetic) {
    out.extend_from_slice(b"<value><struct><member><name>Strng</name><value><string>");
    escape(out, &s.strng);
    out.extend_from_slice(b"</string></value></member>");
    if let Some(t) = &s.strct {
        out.extend_from_slice(b"<member><name>Strct</name>");
        write_struct(out, t);
        out.extend_from_slice(b"</member>");
    }
    out.extend_from_slice(b"<member><name>Barray</name><value><base64>");
    xml::write_base64(out, &s.barray);
    out.extend_from_slice(b"</base64></value></member></struct></value>");
}

// ---- reading ----

/// An element, by what it means here (XML-RPC has no namespaces).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tag {
    MethodCall,
    MethodName,
    MethodResponse,
    Params,
    Param,
    Fault,
    Value,
    Struct,
    Member,
    Name,
    Array,
    Data,
    Int,
    Double,
    String,
    Base64,
    Other,
}

impl Tag {
    fn of(_: Option<&str>, local: &str) -> Tag {
        match local {
            "methodCall" => Tag::MethodCall,
            "methodName" => Tag::MethodName,
            "methodResponse" => Tag::MethodResponse,
            "params" => Tag::Params,
            "param" => Tag::Param,
            "fault" => Tag::Fault,
            "value" => Tag::Value,
            "struct" => Tag::Struct,
            "member" => Tag::Member,
            "name" => Tag::Name,
            "array" => Tag::Array,
            "data" => Tag::Data,
            "i4" | "int" => Tag::Int,
            "double" => Tag::Double,
            "string" => Tag::String,
            "base64" => Tag::Base64,
            _ => Tag::Other,
        }
    }
}

fn unexpected(tag: Tag) -> DecodeError {
    DecodeError::BadCall(format!(
        "an element where none of its kind belongs ({tag:?})"
    ))
}

/// The next element is `tag`, opened.
fn expect(doc: &mut xml::Doc, tag: Tag) -> Result<(), DecodeError> {
    match doc.next(Tag::of)? {
        Item::Open(t) if t == tag => Ok(()),
        Item::Open(t) => Err(unexpected(t)),
        Item::Close => Err(DecodeError::BadCall(format!(
            "no {tag:?} where one belongs"
        ))),
    }
}

/// The open element ends next.
fn expect_close(doc: &mut xml::Doc) -> Result<(), DecodeError> {
    match doc.next(Tag::of)? {
        Item::Close => Ok(()),
        Item::Open(t) => Err(unexpected(t)),
    }
}

/// The request param of `op`, its `<value>` just opened (and closed by this).
fn request_param(doc: &mut xml::Doc, op: Operation) -> Result<Request, DecodeError> {
    Ok(match op {
        Operation::EchoVoid => unreachable!("EchoVoid takes no param"),
        Operation::EchoStruct => Request::EchoStruct(EchoStruct {
            array: structs(doc)?,
        }),
        Operation::EchoList => Request::EchoList(EchoList {
            list: Some(node(doc, 1)?),
        }),
        Operation::EchoSynthetic => Request::EchoSynthetic(EchoSynthetic {
            synth: Some(synthetic(doc)?),
        }),
    })
}

/// The reply of `op`, its `<value>` just opened (and closed by this).
fn reply_value(doc: &mut xml::Doc, op: Operation) -> Result<Reply, DecodeError> {
    Ok(match op {
        Operation::EchoVoid => {
            struct_members(doc, |_, name| {
                Err(DecodeError::BadCall(format!(
                    "EchoVoid's result has a member {name:?}"
                )))
            })?;
            Reply::EchoVoid(EchoVoidResponse {})
        }
        Operation::EchoStruct => Reply::EchoStruct(EchoStructResponse {
            echo_struct_result: structs(doc)?,
        }),
        Operation::EchoList => Reply::EchoList(EchoListResponse {
            echo_list_result: Some(node(doc, 1)?),
        }),
        Operation::EchoSynthetic => Reply::EchoSynthetic(EchoSyntheticResponse {
            echo_synthetic_result: Some(synthetic(doc)?),
        }),
    })
}

/// A fault's value: its code and string, as the error it is.
fn fault(doc: &mut xml::Doc) -> DecodeError {
    let (mut code, mut text) = (None, String::new());
    let read = (|| {
        expect(doc, Tag::Value)?;
        struct_members(doc, |doc, name| {
            match name {
                "faultCode" => code = Some(int(doc)?),
                "faultString" => text = string(doc)?,
                _ => skip_value(doc)?,
            }
            Ok(())
        })
    })();
    match (read, code) {
        (Ok(()), Some(code)) => DecodeError::Fault(FaultKind::XmlRpc(code.into()), text),
        (Ok(()), None) => DecodeError::BadCall("a fault without its faultCode".into()),
        (Err(e), _) => e,
    }
}

/// The members of the struct in the `<value>` just opened, each handed to `member` with
/// its name (its `<value>` opened, to be read through its end); the value closed after.
fn struct_members(
    doc: &mut xml::Doc,
    mut member: impl FnMut(&mut xml::Doc, &str) -> Result<(), DecodeError>,
) -> Result<(), DecodeError> {
    match doc.content(Tag::of)? {
        Content::Open(Tag::Struct) => {}
        Content::Open(t) => return Err(unexpected(t)),
        Content::Text(_) => {
            return Err(DecodeError::BadCall(
                "a string where a struct belongs".into(),
            ));
        }
    }
    loop {
        match doc.next(Tag::of)? {
            Item::Close => break,
            Item::Open(Tag::Member) => {
                expect(doc, Tag::Name)?;
                let name = doc.text()?;
                expect(doc, Tag::Value)?;
                member(doc, name.trim())?;
                expect_close(doc)?;
            }
            Item::Open(t) => return Err(unexpected(t)),
        }
    }
    expect_close(doc)
}

/// The typed element `tag` in the `<value>` just opened: its text; the value closed.
fn typed<'a>(doc: &mut xml::Doc<'a>, tag: Tag) -> Result<std::borrow::Cow<'a, str>, DecodeError> {
    match doc.content(Tag::of)? {
        Content::Open(t) if t == tag => {
            let text = doc.text()?;
            expect_close(doc)?;
            Ok(text)
        }
        // An untagged value is a string.
        Content::Text(text) if tag == Tag::String => Ok(text),
        Content::Open(t) => Err(unexpected(t)),
        Content::Text(_) => Err(DecodeError::BadCall(format!(
            "a string where {tag:?} belongs"
        ))),
    }
}

fn skip_value(doc: &mut xml::Doc) -> Result<(), DecodeError> {
    doc.skip()
}

fn int(doc: &mut xml::Doc) -> Result<i32, DecodeError> {
    xml::read_int(&typed(doc, Tag::Int)?)
}

fn double(doc: &mut xml::Doc) -> Result<f32, DecodeError> {
    xml::read_float(&typed(doc, Tag::Double)?)
}

fn string(doc: &mut xml::Doc) -> Result<String, DecodeError> {
    typed(doc, Tag::String).map(std::borrow::Cow::into_owned)
}

fn base64(doc: &mut xml::Doc) -> Result<Bytes, DecodeError> {
    xml::read_base64(&typed(doc, Tag::Base64)?)
}

/// A struct's or list node's members; `depth` is the node's place in its list, `None`
/// for a struct (which has no `Next`).
fn fields(doc: &mut xml::Doc, depth: Option<usize>) -> Result<TestNode, DecodeError> {
    let (mut i, mut f, mut s, mut next) = (None, None, None, None);
    struct_members(doc, |doc, name| {
        match name {
            "i" => i = Some(int(doc)?),
            "f" => f = Some(double(doc)?),
            "s" => s = Some(string(doc)?),
            "Next" if depth.is_some() => {
                next = Some(Box::new(node(doc, depth.unwrap_or_default() + 1)?));
            }
            other => {
                return Err(DecodeError::BadCall(format!(
                    "a struct with a member {other:?}"
                )));
            }
        }
        Ok(())
    })?;
    let missing =
        |name: &str| DecodeError::BadCall(format!("a struct without its {name:?} member"));
    Ok(TestNode {
        i: i.ok_or_else(|| missing("i"))?,
        f: f.ok_or_else(|| missing("f"))?,
        s: s.ok_or_else(|| missing("s"))?,
        next,
    })
}

fn test_struct(doc: &mut xml::Doc) -> Result<TestStruct, DecodeError> {
    let TestNode { i, f, s, .. } = fields(doc, None)?;
    Ok(TestStruct { i, f, s })
}

/// Node `depth` of a list (the first is 1): refused past [`MAX_LIST`] nodes, as every
/// codec refuses it.
fn node(doc: &mut xml::Doc, depth: usize) -> Result<TestNode, DecodeError> {
    if depth > MAX_LIST {
        return Err(DecodeError::TooDeep(TOO_DEEP.into()));
    }
    fields(doc, Some(depth))
}

/// A `COfTestStruct`: an array of structs in the `<value>` just opened.
fn structs(doc: &mut xml::Doc) -> Result<Vec<TestStruct>, DecodeError> {
    match doc.content(Tag::of)? {
        Content::Open(Tag::Array) => {}
        Content::Open(t) => return Err(unexpected(t)),
        Content::Text(_) => {
            return Err(DecodeError::BadCall(
                "a string where an array belongs".into(),
            ));
        }
    }
    expect(doc, Tag::Data)?;
    let mut structs = Vec::new();
    loop {
        match doc.next(Tag::of)? {
            Item::Close => break,
            Item::Open(Tag::Value) => structs.push(test_struct(doc)?),
            Item::Open(t) => return Err(unexpected(t)),
        }
    }
    expect_close(doc)?;
    expect_close(doc)?;
    Ok(structs)
}

fn synthetic(doc: &mut xml::Doc) -> Result<Synthetic, DecodeError> {
    let (mut strng, mut strct, mut barray) = (None, None, None);
    struct_members(doc, |doc, name| {
        match name {
            "Strng" => strng = Some(string(doc)?),
            "Strct" => strct = Some(test_struct(doc)?),
            "Barray" => barray = Some(base64(doc)?),
            other => {
                return Err(DecodeError::BadCall(format!(
                    "a Synthetic with a member {other:?}"
                )));
            }
        }
        Ok(())
    })?;
    Ok(Synthetic {
        strng: strng.ok_or_else(|| DecodeError::BadCall("a Synthetic without Strng".into()))?,
        strct: Some(strct.ok_or_else(|| DecodeError::BadCall("a Synthetic without Strct".into()))?),
        barray: barray.ok_or_else(|| DecodeError::BadCall("a Synthetic without Barray".into()))?,
    })
}
