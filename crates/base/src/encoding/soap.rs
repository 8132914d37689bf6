//! SOAP 1.1 document/literal, written by hand on quick-xml's namespace-resolving reader:
//! WSTest's own elements (namespace `uri:WSTestWeb-TestService`) in an Envelope's Body,
//! as its WSDL ([`WSDL`], served at `GET /soap?wsdl`) describes them and as .NET, zeep and
//! spyne write them.
//!
//! ```text
//! <soap:Envelope xmlns:soap="http://schemas.xmlsoap.org/soap/envelope/"><soap:Body>
//!   <EchoStruct xmlns="uri:WSTestWeb-TestService"><array>
//!     <TestStruct><i>1000001009</i><f>0.1</f><s>0000000100000&amp;&lt;é</s></TestStruct>
//!   </array></EchoStruct>
//! </soap:Body></soap:Envelope>
//! ```
//!
//! - **Names are resolved, not matched**: zeep writes `soap-env:`/`ns0:`, spyne
//!   `soap11env:`/`tns:`; what counts is the namespace a prefix is bound to. The
//!   operation's element must be in WSTest's namespace; its children in it or in none
//!   (`elementFormDefault` differs between stacks). A Header is skipped.
//! - **Values**: `i` an xs:int, `f` an xs:float written as the shortest text that reads
//!   back to the same f32, `s` escaped text, `Barray` base64 (whitespace ignored), a list
//!   node's `Next` absent at the tail.
//! - **Faults** go under HTTP 500: `soap:Client` for a body that is no call of this
//!   server's, `soap:Server` for its own failure. A client counts a fault by its
//!   faultcode's first segment ([`FaultCode`]).
//! - Every body first passes [`xml_guard`](super::xml_guard): no DTD, at most 300
//!   elements deep, well formed, UTF-8. The message is read straight into WSTest's types,
//!   with no tree in between.

use super::wstest::{
    EchoList, EchoListResponse, EchoStruct, EchoStructResponse, EchoSynthetic,
    EchoSyntheticResponse, EchoVoid, EchoVoidResponse, MAX_LIST, Operation, Reply, Request,
    Synthetic, TOO_DEEP, TestNode, TestStruct,
};
use super::xml::{self, Item, escape};
use super::{
    CallId, Codec, DecodeError, EncodeError, ErrorReply, Facts, FaultKind, OperationHeader, Route,
};

/// SOAP 1.1.
pub struct Soap;

/// The name in errors.
const NAME: &str = "soap";

/// The SOAP 1.1 envelope's namespace.
pub const ENVELOPE_NS: &str = "http://schemas.xmlsoap.org/soap/envelope/";

/// WSTest's namespace, as its public implementations carry it.
pub const WSTEST_NS: &str = "uri:WSTestWeb-TestService";

/// The service's WSDL, with `{ADDRESS}` where the server writes its own URL.
pub const WSDL: &str = include_str!("../../../../proto/wstest.wsdl");

impl Codec for Soap {
    const FACTS: Facts = Facts {
        content_type: "text/xml; charset=utf-8",
        also_accepted: &[],
        route: Route::Fixed("/soap"),
        operation_header: Some(OperationHeader {
            name: "soapaction",
            value: action,
            parse: action_operation,
        }),
        fault_status: Some(500),
        // `<TestStruct><i>0</i><f>0</f><s/></TestStruct>` is 41 bytes for the 32 a
        // TestStruct holds; read with no tree in between.
        expansion: 1,
    };

    fn encode_request(req: &Request, _: &CallId, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        let op = req.operation().name();
        open_envelope(out);
        match req {
            Request::EchoVoid(_) => open_empty(out, op),
            Request::EchoStruct(m) => {
                open_message(out, op);
                write_structs(out, "array", &m.array);
                close(out, op);
            }
            Request::EchoList(m) => {
                open_message(out, op);
                if let Some(list) = &m.list {
                    write_node(out, "list", list);
                }
                close(out, op);
            }
            Request::EchoSynthetic(m) => {
                open_message(out, op);
                if let Some(synth) = &m.synth {
                    write_synthetic(out, "synth", synth);
                }
                close(out, op);
            }
        }
        close_envelope(out);
        Ok(())
    }

    fn decode_request(
        op: Option<Operation>,
        body: &[u8],
    ) -> Result<(Request, CallId), DecodeError> {
        xml::read(NAME, body, true, |x| read_request(&mut Doc::start(x)?, op))
            .map(|req| (req, CallId::None))
    }

    fn encode_reply(reply: &Reply, _: &CallId, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        let op = reply.operation();
        let name = response_name(op);
        let result = result_name(op);
        open_envelope(out);
        match reply {
            Reply::EchoVoid(_) => open_empty(out, name),
            Reply::EchoStruct(m) => {
                open_message(out, name);
                write_structs(out, result, &m.echo_struct_result);
                close(out, name);
            }
            Reply::EchoList(m) => {
                open_message(out, name);
                if let Some(list) = &m.echo_list_result {
                    write_node(out, result, list);
                }
                close(out, name);
            }
            Reply::EchoSynthetic(m) => {
                open_message(out, name);
                if let Some(synth) = &m.echo_synthetic_result {
                    write_synthetic(out, result, synth);
                }
                close(out, name);
            }
        }
        close_envelope(out);
        Ok(())
    }

    fn decode_reply(op: Operation, body: &[u8]) -> Result<(Reply, CallId), DecodeError> {
        xml::read(NAME, body, true, |x| read_reply(&mut Doc::start(x)?, op))
            .map(|reply| (reply, CallId::None))
    }

    fn error_reply(error: &DecodeError, _: &[u8]) -> Option<ErrorReply> {
        let mut body = Vec::new();
        write_fault(&mut body, FaultCode::Client, &error.to_string());
        Some(ErrorReply { status: 500, body })
    }
}

/// A SOAP 1.1 faultcode, by its first segment: what a client counts a Fault under.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FaultCode {
    VersionMismatch,
    MustUnderstand,
    /// The message was wrong (spyne's `Client.SchemaValidationError` is one).
    Client,
    /// The server failed.
    Server,
    /// A code outside the envelope's namespace, or none of its four.
    Other,
}

impl FaultCode {
    /// Its part of the counted kind: `soap_fault_client`.
    pub fn key(self) -> &'static str {
        match self {
            FaultCode::VersionMismatch => "versionmismatch",
            FaultCode::MustUnderstand => "mustunderstand",
            FaultCode::Client => "client",
            FaultCode::Server => "server",
            FaultCode::Other => "other",
        }
    }

    fn name(self) -> &'static str {
        match self {
            FaultCode::VersionMismatch => "VersionMismatch",
            FaultCode::MustUnderstand => "MustUnderstand",
            FaultCode::Client => "Client",
            FaultCode::Server => "Server",
            FaultCode::Other => "Other",
        }
    }
}

/// Appends a Fault envelope with `code` and `message` to `out`.
pub fn write_fault(out: &mut Vec<u8>, code: FaultCode, message: &str) {
    open_envelope(out);
    out.extend_from_slice(b"<soap:Fault><faultcode>soap:");
    out.extend_from_slice(code.name().as_bytes());
    out.extend_from_slice(b"</faultcode><faultstring>");
    escape(out, message);
    out.extend_from_slice(b"</faultstring></soap:Fault>");
    close_envelope(out);
}

/// The SOAPAction rpcbench sends for `op`, quoted as SOAP 1.1 asks.
pub fn action(op: Operation) -> &'static str {
    match op {
        Operation::EchoVoid => "\"uri:WSTestWeb-TestService/EchoVoid\"",
        Operation::EchoStruct => "\"uri:WSTestWeb-TestService/EchoStruct\"",
        Operation::EchoList => "\"uri:WSTestWeb-TestService/EchoList\"",
        Operation::EchoSynthetic => "\"uri:WSTestWeb-TestService/EchoSynthetic\"",
    }
}

/// The operation a SOAPAction names, quotes stripped: `None` for an empty one (the Body
/// then says), the operation for its bare name or `uri:WSTestWeb-TestService/{Operation}`.
pub fn action_operation(value: &str) -> Result<Option<Operation>, String> {
    let value = value.trim();
    let value = value
        .strip_prefix('"')
        .and_then(|v| v.strip_suffix('"'))
        .unwrap_or(value);
    if value.is_empty() {
        return Ok(None);
    }
    let name = value
        .strip_prefix(WSTEST_NS)
        .and_then(|v| v.strip_prefix('/'))
        .unwrap_or(value);
    Operation::from_name(name)
        .map(Some)
        .ok_or_else(|| format!("SOAPAction {value:?} names no operation of WSTest's"))
}

fn response_name(op: Operation) -> &'static str {
    match op {
        Operation::EchoVoid => "EchoVoidResponse",
        Operation::EchoStruct => "EchoStructResponse",
        Operation::EchoList => "EchoListResponse",
        Operation::EchoSynthetic => "EchoSyntheticResponse",
    }
}

fn result_name(op: Operation) -> &'static str {
    match op {
        Operation::EchoVoid => "EchoVoidResult",
        Operation::EchoStruct => "EchoStructResult",
        Operation::EchoList => "EchoListResult",
        Operation::EchoSynthetic => "EchoSyntheticResult",
    }
}

// ---- writing ----

fn open_envelope(out: &mut Vec<u8>) {
    out.extend_from_slice(
        b"<?xml version=\"1.0\" encoding=\"utf-8\"?>\n<soap:Envelope xmlns:soap=\"http://schemas.xmlsoap.org/soap/envelope/\"><soap:Body>",
    );
}

fn close_envelope(out: &mut Vec<u8>) {
    out.extend_from_slice(b"</soap:Body></soap:Envelope>");
}

/// The message's element, WSTest's namespace the default for it and its children.
fn open_message(out: &mut Vec<u8>, name: &str) {
    out.push(b'<');
    out.extend_from_slice(name.as_bytes());
    out.extend_from_slice(b" xmlns=\"uri:WSTestWeb-TestService\">");
}

/// The message's element with nothing in it (EchoVoid's).
fn open_empty(out: &mut Vec<u8>, name: &str) {
    open_message(out, name);
    out.pop();
    out.extend_from_slice(b"/>");
}

fn open(out: &mut Vec<u8>, name: &str) {
    out.push(b'<');
    out.extend_from_slice(name.as_bytes());
    out.push(b'>');
}

fn close(out: &mut Vec<u8>, name: &str) {
    out.extend_from_slice(b"</");
    out.extend_from_slice(name.as_bytes());
    out.push(b'>');
}

fn write_fields(out: &mut Vec<u8>, i: i32, f: f32, s: &str) {
    use std::io::Write as _;
    // Writes into a Vec cannot fail.
    let _ = write!(out, "<i>{i}</i><f>{}</f><s>", xml::Float(f));
    escape(out, s);
    out.extend_from_slice(b"</s>");
}

fn write_struct(out: &mut Vec<u8>, name: &str, t: &TestStruct) {
    open(out, name);
    write_fields(out, t.i, t.f, &t.s);
    close(out, name);
}

fn write_structs(out: &mut Vec<u8>, name: &str, structs: &[TestStruct]) {
    open(out, name);
    for t in structs {
        write_struct(out, "TestStruct", t);
    }
    close(out, name);
}

fn write_node(out: &mut Vec<u8>, name: &str, node: &TestNode) {
    open(out, name);
    let mut depth = 0;
    let mut at = node;
    loop {
        write_fields(out, at.i, at.f, &at.s);
        match &at.next {
            Some(next) => {
                open(out, "Next");
                depth += 1;
                at = next;
            }
            None => break,
        }
    }
    for _ in 0..depth {
        close(out, "Next");
    }
    close(out, name);
}

fn write_synthetic(out: &mut Vec<u8>, name: &str, s: &Synthetic) {
    open(out, name);
    open(out, "Strng");
    escape(out, &s.strng);
    close(out, "Strng");
    if let Some(t) = &s.strct {
        write_struct(out, "Strct", t);
    }
    open(out, "Barray");
    xml::write_base64(out, &s.barray);
    close(out, "Barray");
    close(out, name);
}

/// The request in an Envelope (the operation `op` where SOAPAction or a frame named one).
fn read_request(doc: &mut Doc, op: Option<Operation>) -> Result<Request, DecodeError> {
    let named = match doc.body_element()? {
        Tag::Op(named) => named,
        Tag::Other(Ns::WsTest) => {
            return Err(DecodeError::NoSuchOperation(
                "the Body's element is no operation of WSTest's".into(),
            ));
        }
        _ => {
            return Err(DecodeError::BadCall(
                "the Body's element is not in WSTest's namespace".into(),
            ));
        }
    };
    if op.is_some_and(|op| op != named) {
        return Err(DecodeError::BadCall(format!(
            "{} where SOAPAction or the frame names another",
            named.name()
        )));
    }
    let req = match named {
        Operation::EchoVoid => {
            doc.no_children()?;
            Request::EchoVoid(EchoVoid {})
        }
        Operation::EchoStruct => Request::EchoStruct(EchoStruct {
            array: doc
                .only_child(Tag::Array, Doc::structs)?
                .unwrap_or_default(),
        }),
        Operation::EchoList => Request::EchoList(EchoList {
            list: doc.only_child(Tag::List, |d| d.node(1))?,
        }),
        Operation::EchoSynthetic => Request::EchoSynthetic(EchoSynthetic {
            synth: doc.only_child(Tag::Synth, Doc::synthetic)?,
        }),
    };
    doc.close_envelope()?;
    Ok(req)
}

/// The reply to a call of `op` in an Envelope, or the Fault it holds as the error it is.
fn read_reply(doc: &mut Doc, op: Operation) -> Result<Reply, DecodeError> {
    match doc.body_element()? {
        Tag::Response(named) if named == op => {}
        Tag::Fault => return Err(doc.fault()),
        _ => {
            return Err(DecodeError::Malformed(
                NAME,
                format!("the Body holds no {}", response_name(op)),
            ));
        }
    }
    let result = Tag::Result(op);
    let reply = match op {
        Operation::EchoVoid => {
            doc.no_children()?;
            Reply::EchoVoid(EchoVoidResponse {})
        }
        Operation::EchoStruct => Reply::EchoStruct(EchoStructResponse {
            echo_struct_result: doc.only_child(result, Doc::structs)?.unwrap_or_default(),
        }),
        Operation::EchoList => Reply::EchoList(EchoListResponse {
            echo_list_result: doc.only_child(result, |d| d.node(1))?,
        }),
        Operation::EchoSynthetic => Reply::EchoSynthetic(EchoSyntheticResponse {
            echo_synthetic_result: doc.only_child(result, Doc::synthetic)?,
        }),
    };
    doc.close_envelope()?;
    Ok(reply)
}

// ---- reading ----

/// A namespace an element is in, as far as this codec cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ns {
    Envelope,
    WsTest,
    None,
    Other,
}

/// An element, by what it means here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tag {
    Envelope,
    Header,
    Body,
    Fault,
    Op(Operation),
    Response(Operation),
    Result(Operation),
    Array,
    List,
    Synth,
    TestStruct,
    I,
    F,
    S,
    Next,
    Strng,
    Strct,
    Barray,
    /// A Fault's children: `faultcode`, `faultstring`.
    FaultCode,
    FaultString,
    Other(Ns),
}

impl Tag {
    /// The tag of an element in namespace `ns` named `local`.
    fn of(ns: Option<&str>, local: &str) -> Tag {
        let ns = match ns {
            Some(ENVELOPE_NS) => Ns::Envelope,
            Some(WSTEST_NS) => Ns::WsTest,
            Some(_) => Ns::Other,
            None => Ns::None,
        };
        match (ns, local) {
            (Ns::Envelope, "Envelope") => Tag::Envelope,
            (Ns::Envelope, "Header") => Tag::Header,
            (Ns::Envelope, "Body") => Tag::Body,
            (Ns::Envelope, "Fault") => Tag::Fault,
            // An operation's element must be in WSTest's namespace; the rest may be in none.
            (Ns::None, local) => match Tag::wstest(local) {
                Some(Tag::Op(_) | Tag::Response(_)) | None => Tag::Other(ns),
                Some(tag) => tag,
            },
            (Ns::WsTest, local) => Tag::wstest(local).unwrap_or(Tag::Other(ns)),
            (ns, _) => Tag::Other(ns),
        }
    }

    fn wstest(local: &str) -> Option<Tag> {
        if let Some(op) = Operation::from_name(local) {
            return Some(Tag::Op(op));
        }
        if let Some(op) = local
            .strip_suffix("Response")
            .and_then(Operation::from_name)
        {
            return Some(Tag::Response(op));
        }
        if let Some(op) = local.strip_suffix("Result").and_then(Operation::from_name) {
            return Some(Tag::Result(op));
        }
        Some(match local {
            "array" => Tag::Array,
            "list" => Tag::List,
            "synth" => Tag::Synth,
            "TestStruct" => Tag::TestStruct,
            "i" => Tag::I,
            "f" => Tag::F,
            "s" => Tag::S,
            "Next" => Tag::Next,
            "Strng" => Tag::Strng,
            "Strct" => Tag::Strct,
            "Barray" => Tag::Barray,
            "faultcode" => Tag::FaultCode,
            "faultstring" => Tag::FaultString,
            _ => return None,
        })
    }
}

/// A SOAP body being read.
struct Doc<'d, 'a> {
    xml: &'d mut xml::Doc<'a>,
}

impl<'d, 'a> Doc<'d, 'a> {
    /// The body in `xml`, read up to its Envelope.
    fn start(xml: &'d mut xml::Doc<'a>) -> Result<Doc<'d, 'a>, DecodeError> {
        let mut doc = Doc { xml };
        match doc.next()? {
            Item::Open(Tag::Envelope) => Ok(doc),
            _ => Err(DecodeError::Malformed(
                NAME,
                "not a SOAP 1.1 Envelope (a SOAP 1.2 one has another namespace)".into(),
            )),
        }
    }

    fn next(&mut self) -> Result<Item<Tag>, DecodeError> {
        self.xml.next(Tag::of)
    }

    /// Past an optional Header to the Body, and the element it holds.
    fn body_element(&mut self) -> Result<Tag, DecodeError> {
        let mut item = self.next()?;
        if let Item::Open(Tag::Header) = item {
            self.xml.skip()?;
            item = self.next()?;
        }
        if !matches!(item, Item::Open(Tag::Body)) {
            return Err(DecodeError::Malformed(
                NAME,
                "an Envelope without its Body".into(),
            ));
        }
        match self.next()? {
            Item::Open(tag) => Ok(tag),
            Item::Close => Err(DecodeError::BadCall("an empty Body".into())),
        }
    }

    /// Closes the Body and the Envelope after the message; nothing may follow.
    fn close_envelope(&mut self) -> Result<(), DecodeError> {
        for what in ["Body", "Envelope"] {
            if !matches!(self.next()?, Item::Close) {
                return Err(DecodeError::BadCall(format!(
                    "more than one element in the {what}"
                )));
            }
        }
        self.xml.finish()
    }

    /// The open element has no children.
    fn no_children(&mut self) -> Result<(), DecodeError> {
        match self.next()? {
            Item::Close => Ok(()),
            Item::Open(t) => Err(unexpected(t)),
        }
    }

    /// The open element's one child, `tag`, read by `read` (which leaves it closed), or
    /// `None` when it has none; then the element closed.
    fn only_child<T>(
        &mut self,
        tag: Tag,
        read: impl FnOnce(&mut Self) -> Result<T, DecodeError>,
    ) -> Result<Option<T>, DecodeError> {
        let value = match self.next()? {
            Item::Close => return Ok(None),
            Item::Open(t) if t == tag => read(self)?,
            Item::Open(t) => return Err(unexpected(t)),
        };
        match self.next()? {
            Item::Close => Ok(Some(value)),
            Item::Open(t) => Err(unexpected(t)),
        }
    }

    /// The fields of a struct or list node up to its end: `i`, `f`, `s` in any order,
    /// and for a node (`depth` its place in the list), its `Next`.
    fn fields(&mut self, depth: Option<usize>) -> Result<TestNode, DecodeError> {
        let (mut i, mut f, mut s, mut next) = (None, None, None, None);
        loop {
            match self.next()? {
                Item::Close => break,
                Item::Open(Tag::I) => i = Some(xml::read_int(&self.xml.text()?)?),
                Item::Open(Tag::F) => f = Some(xml::read_float(&self.xml.text()?)?),
                Item::Open(Tag::S) => s = Some(self.xml.text()?.into_owned()),
                Item::Open(Tag::Next) if depth.is_some() => {
                    let depth = depth.unwrap_or_default();
                    next = Some(Box::new(self.node(depth + 1)?));
                }
                Item::Open(t) => return Err(unexpected(t)),
            }
        }
        let missing = |name: &str| DecodeError::BadCall(format!("a struct without its {name}"));
        Ok(TestNode {
            i: i.ok_or_else(|| missing("i"))?,
            f: f.ok_or_else(|| missing("f"))?,
            s: s.ok_or_else(|| missing("s"))?,
            next,
        })
    }

    fn test_struct(&mut self) -> Result<TestStruct, DecodeError> {
        let TestNode { i, f, s, .. } = self.fields(None)?;
        Ok(TestStruct { i, f, s })
    }

    /// The list node just opened, node `depth` of its list (the first is 1).
    fn node(&mut self, depth: usize) -> Result<TestNode, DecodeError> {
        if depth > MAX_LIST {
            return Err(DecodeError::TooDeep(TOO_DEEP.into()));
        }
        self.fields(Some(depth))
    }

    /// A `COfTestStruct`: its `TestStruct`s up to its end.
    fn structs(&mut self) -> Result<Vec<TestStruct>, DecodeError> {
        let mut structs = Vec::new();
        loop {
            match self.next()? {
                Item::Close => return Ok(structs),
                Item::Open(Tag::TestStruct) => structs.push(self.test_struct()?),
                Item::Open(t) => return Err(unexpected(t)),
            }
        }
    }

    fn synthetic(&mut self) -> Result<Synthetic, DecodeError> {
        let (mut strng, mut strct, mut barray) = (None, None, None);
        loop {
            match self.next()? {
                Item::Close => break,
                Item::Open(Tag::Strng) => strng = Some(self.xml.text()?.into_owned()),
                Item::Open(Tag::Strct) => strct = Some(self.test_struct()?),
                Item::Open(Tag::Barray) => barray = Some(xml::read_base64(&self.xml.text()?)?),
                Item::Open(t) => return Err(unexpected(t)),
            }
        }
        Ok(Synthetic {
            strng: strng.ok_or_else(|| DecodeError::BadCall("a Synthetic without Strng".into()))?,
            strct,
            barray: barray.unwrap_or_default(),
        })
    }

    /// The Fault just opened, as the error it is.
    fn fault(&mut self) -> DecodeError {
        let (mut code, mut text) = (FaultCode::Other, String::new());
        loop {
            let step = match self.next() {
                Ok(Item::Open(Tag::FaultCode)) => {
                    self.xml.text().map(|q| code = self.fault_code(q.trim()))
                }
                Ok(Item::Open(Tag::FaultString)) => self.xml.text().map(|t| text = t.into_owned()),
                Ok(Item::Open(_)) => self.xml.skip(),
                Ok(Item::Close) => return DecodeError::Fault(FaultKind::Soap(code), text),
                Err(e) => Err(e),
            };
            if let Err(e) = step {
                return e;
            }
        }
    }

    /// A faultcode's QName: its prefix resolved, its first segment named.
    fn fault_code(&self, qname: &str) -> FaultCode {
        let (ns, local) = self.xml.resolve(qname);
        let first = local.split('.').next().unwrap_or_default();
        match (ns == Some(ENVELOPE_NS), first) {
            (true, "VersionMismatch") => FaultCode::VersionMismatch,
            (true, "MustUnderstand") => FaultCode::MustUnderstand,
            (true, "Client") => FaultCode::Client,
            (true, "Server") => FaultCode::Server,
            _ => FaultCode::Other,
        }
    }
}

fn unexpected(tag: Tag) -> DecodeError {
    DecodeError::BadCall(format!(
        "an element where none of its kind belongs ({tag:?})"
    ))
}
