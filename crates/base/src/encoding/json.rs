//! JSON-RPC 2.0 over serde_json: `{"jsonrpc":"2.0","method":"EchoStruct","params":[...],
//! "id":"0000000000000001"}`, positional params (each operation takes one: the message's
//! only field), the result the reply message's only field (`null` for EchoVoid). A server
//! also takes params by name (`{"array": [...]}`, the message itself), as the
//! specification allows, and echoes any id a client sends (numbers, UUIDs). Bytes are base64
//! text. serde_json stops at 128 nested levels; the list's guard at node 65.

use super::wstest::{
    self, EchoList, EchoListResponse, EchoStruct, EchoStructResponse, EchoSynthetic,
    EchoSyntheticResponse, EchoVoid, EchoVoidResponse, Operation, Reply, Request, Synthetic,
    TestNode, TestStruct,
};
use super::{CallId, Codec, DecodeError, EncodeError, ErrorReply, Facts, FaultKind, Route};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

/// JSON-RPC 2.0.
pub struct JsonRpc;

/// serde_json's words for its recursion limit.
const DEEP: &[&str] = &["recursion limit exceeded"];

/// A request as it goes out: one positional param, or none.
#[derive(Serialize)]
struct Outgoing<'a, P: Serialize> {
    jsonrpc: &'static str,
    method: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    params: Option<(&'a P,)>,
    id: &'a serde_json::Value,
}

/// A request or reply as it comes in, its params or result left as text until the
/// operation is known.
#[derive(Deserialize)]
struct Incoming<'a> {
    jsonrpc: Option<&'a str>,
    method: Option<String>,
    #[serde(borrow, default, deserialize_with = "present")]
    params: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "present")]
    result: Option<&'a RawValue>,
    error: Option<ErrorObject>,
    #[serde(default)]
    id: serde_json::Value,
}

/// A member that is there, even as `null` (EchoVoid's result): `None` only when absent.
fn present<'de: 'a, 'a, D>(d: D) -> Result<Option<&'a RawValue>, D::Error>
where
    D: serde::Deserializer<'de>,
{
    <&'a RawValue>::deserialize(d).map(Some)
}

/// A reply as it goes out.
#[derive(Serialize)]
struct Answer<'a, R: Serialize> {
    jsonrpc: &'static str,
    result: &'a R,
    id: &'a serde_json::Value,
}

/// JSON-RPC's error object.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ErrorObject {
    pub code: i64,
    pub message: String,
}

impl Codec for JsonRpc {
    const FACTS: Facts = Facts {
        content_type: "application/json",
        // The older JSON-RPC-over-HTTP drafts' types, which jsonrpclib-pelix still sends.
        also_accepted: &["application/json-rpc", "application/jsonrequest"],
        route: Route::Fixed("/rpc"),
        operation_header: None,
        fault_status: None,
        // `[0,0,""],` is 9 bytes for the 32 a TestStruct holds.
        expansion: 4,
    };

    fn encode_request(req: &Request, id: &CallId, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        let id = json_id(id);
        let method = req.operation().name();
        match req {
            Request::EchoVoid(_) => write_request::<()>(out, method, None, &id),
            Request::EchoStruct(m) => write_request(out, method, Some(&m.array), &id),
            Request::EchoList(m) => write_request(out, method, m.list.as_ref(), &id),
            Request::EchoSynthetic(m) => write_request(out, method, m.synth.as_ref(), &id),
        }
    }

    fn decode_request(
        op: Option<Operation>,
        body: &[u8],
    ) -> Result<(Request, CallId), DecodeError> {
        let call: Incoming = parse(body)?;
        if call.jsonrpc != Some("2.0") {
            return Err(DecodeError::BadCall(
                "not JSON-RPC 2.0 (no \"jsonrpc\": \"2.0\")".into(),
            ));
        }
        let method = call.method.as_deref().unwrap_or_default();
        let named = Operation::from_name(method)
            .ok_or_else(|| DecodeError::NoSuchOperation(format!("no method {method:?}")))?;
        if op.is_some_and(|op| op != named) {
            return Err(DecodeError::BadCall(format!(
                "{method} where the frame names another"
            )));
        }
        let req = params(named, call.params)?;
        Ok((req, CallId::Json(call.id)))
    }

    fn encode_reply(reply: &Reply, id: &CallId, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        let id = json_id(id);
        match reply {
            Reply::EchoVoid(_) => write_reply(out, &(), &id),
            Reply::EchoStruct(m) => write_reply(out, &m.echo_struct_result, &id),
            Reply::EchoList(m) => write_reply(out, &m.echo_list_result, &id),
            Reply::EchoSynthetic(m) => write_reply(out, &m.echo_synthetic_result, &id),
        }
    }

    fn decode_reply(op: Operation, body: &[u8]) -> Result<(Reply, CallId), DecodeError> {
        let answer: Incoming = parse(body)?;
        if let Some(e) = answer.error {
            return Err(DecodeError::Fault(FaultKind::JsonRpc(e.code), e.message));
        }
        let result = answer.result.ok_or_else(|| {
            DecodeError::Malformed("json", "a reply with neither result nor error".into())
        })?;
        let text = result.get();
        let reply = match op {
            Operation::EchoVoid if text == "null" => Reply::EchoVoid(EchoVoidResponse {}),
            Operation::EchoVoid => {
                return Err(DecodeError::Malformed(
                    "json",
                    "EchoVoid's result is not null".into(),
                ));
            }
            Operation::EchoStruct => Reply::EchoStruct(EchoStructResponse {
                echo_struct_result: value(text)?,
            }),
            Operation::EchoList => Reply::EchoList(EchoListResponse {
                echo_list_result: value(text)?,
            }),
            Operation::EchoSynthetic => Reply::EchoSynthetic(EchoSyntheticResponse {
                echo_synthetic_result: value(text)?,
            }),
        };
        Ok((reply, CallId::Json(answer.id)))
    }

    /// An error object under 200, with the call's id where its envelope could be read.
    fn error_reply(error: &DecodeError, request: &[u8]) -> Option<ErrorReply> {
        let id = match error {
            DecodeError::Malformed(..) => CallId::None,
            _ => request_id(request),
        };
        let mut body = Vec::new();
        write_error(&mut body, error.rpc_code().into(), &error.to_string(), &id);
        Some(ErrorReply { status: 200, body })
    }
}

/// Appends a JSON-RPC error reply (`code`: -32700 not well formed, -32601 no such
/// method, -32602 bad params) to `out`. The call's id is `null` when it could not be
/// read, as the specification asks.
pub fn write_error(out: &mut Vec<u8>, code: i64, message: &str, id: &CallId) {
    #[derive(Serialize)]
    struct Failed<'a> {
        jsonrpc: &'static str,
        error: ErrorObject,
        id: &'a serde_json::Value,
    }
    let failed = Failed {
        jsonrpc: "2.0",
        error: ErrorObject {
            code,
            message: message.to_string(),
        },
        id: &json_id(id),
    };
    // A struct of strings and numbers always serializes.
    let _ = serde_json::to_writer(out, &failed);
}

/// The id of the request in `body`, for an error reply to a call that was refused after
/// its envelope was read (an unknown method, bad params); `None` when even that cannot be
/// read, which the error reply then carries as `null`.
pub fn request_id(body: &[u8]) -> CallId {
    match serde_json::from_slice::<Incoming>(body) {
        Ok(call) => CallId::Json(call.id),
        Err(_) => CallId::None,
    }
}

/// The request of `op` from its params: one positional param (the message's field), the
/// message itself by name, or none for EchoVoid.
fn params(op: Operation, params: Option<&RawValue>) -> Result<Request, DecodeError> {
    let text = params.map_or("", RawValue::get).trim_start();
    if op == Operation::EchoVoid {
        return match text {
            "" | "[]" | "{}" => Ok(Request::EchoVoid(EchoVoid {})),
            _ => Err(DecodeError::BadCall("EchoVoid takes no params".into())),
        };
    }
    if text.starts_with('{') {
        let mut d = serde_json::Deserializer::from_str(text);
        return wstest::request_of(op, &mut d).map_err(bad_params);
    }
    Ok(match op {
        Operation::EchoVoid => unreachable!("answered above"),
        Operation::EchoStruct => Request::EchoStruct(EchoStruct {
            array: one::<Vec<TestStruct>>(text)?,
        }),
        Operation::EchoList => Request::EchoList(EchoList {
            list: Some(one::<TestNode>(text)?),
        }),
        Operation::EchoSynthetic => Request::EchoSynthetic(EchoSynthetic {
            synth: Some(one::<Synthetic>(text)?),
        }),
    })
}

/// The one positional param in `text` (`[param]`).
fn one<T: serde::de::DeserializeOwned>(text: &str) -> Result<T, DecodeError> {
    serde_json::from_str::<(T,)>(text)
        .map(|(p,)| p)
        .map_err(bad_params)
}

/// Params that parse as JSON but are not the operation's are a bad call (-32602), unless
/// too deep.
fn bad_params(e: serde_json::Error) -> DecodeError {
    match super::serde_error("json", &e, DEEP) {
        DecodeError::Malformed(..) if !e.is_syntax() && !e.is_eof() => {
            DecodeError::BadCall(format!("params: {e}"))
        }
        other => other,
    }
}

fn value<T: serde::de::DeserializeOwned>(text: &str) -> Result<T, DecodeError> {
    serde_json::from_str(text).map_err(|e| super::serde_error("json", e, DEEP))
}

fn parse<'a>(body: &'a [u8]) -> Result<Incoming<'a>, DecodeError> {
    serde_json::from_slice(body).map_err(|e| super::serde_error("json", e, DEEP))
}

/// The id as JSON: rpcbench's own (the seq in 16 hex digits) is made by the caller.
fn json_id(id: &CallId) -> serde_json::Value {
    match id {
        CallId::None => serde_json::Value::Null,
        CallId::Json(v) => v.clone(),
    }
}

fn write_request<P: Serialize>(
    out: &mut Vec<u8>,
    method: &'static str,
    param: Option<&P>,
    id: &serde_json::Value,
) -> Result<(), EncodeError> {
    let call = Outgoing {
        jsonrpc: "2.0",
        method,
        params: param.map(|p| (p,)),
        id,
    };
    serde_json::to_writer(out, &call).map_err(|e| EncodeError(e.to_string()))
}

fn write_reply<R: Serialize>(
    out: &mut Vec<u8>,
    result: &R,
    id: &serde_json::Value,
) -> Result<(), EncodeError> {
    let answer = Answer {
        jsonrpc: "2.0",
        result,
        id,
    };
    serde_json::to_writer(out, &answer).map_err(|e| EncodeError(e.to_string()))
}
