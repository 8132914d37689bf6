//! The echo server's WSTest calls over HTTP (`/rpc/{Operation}`, `/rpc`): every encoding
//! and message over HTTP/1.1 and HTTP/2, each reply decoded and checked field by field,
//! and every refusal answered in the encoding's own form and counted once.

mod common;

use bytes::Bytes;
use common::{
    TestServer, assert_rejects, http_stats, hyper_collect, hyper_http1, hyper_http2, hyper_send1,
};
use hyper::header::{CONTENT_TYPE, HOST};
use hyper::{Method, StatusCode};
use rpcbench::encoding::{CallId, EncodingKind, Message, Operation, Route};
use rpcbench::server::stats::Reject;
use std::net::SocketAddr;

/// The path of `op`'s calls in `enc`.
fn path(enc: EncodingKind, op: Operation) -> String {
    match enc.facts().route {
        Route::Fixed(path) => path.to_string(),
        Route::PerOperation(prefix) => format!("{prefix}{}", op.name()),
    }
}

fn post(
    addr: SocketAddr,
    path: &str,
    content_type: &str,
    body: Vec<u8>,
) -> hyper::Request<http_body_util::Full<Bytes>> {
    hyper::Request::builder()
        .method(Method::POST)
        .uri(format!("http://{addr}{path}"))
        .header(HOST, addr.to_string())
        .header(CONTENT_TYPE, content_type)
        .body(http_body_util::Full::new(Bytes::from(body)))
        .expect("valid request")
}

/// A request as rpcbench sends it: call `seq` of `msg` in `enc`.
fn call(
    addr: SocketAddr,
    enc: EncodingKind,
    msg: Message,
    seq: u64,
) -> hyper::Request<http_body_util::Full<Bytes>> {
    let mut body = Vec::new();
    let id = CallId::Json(serde_json::Value::String(CallId::of_seq(seq)));
    enc.encode_request(&msg.request(seq), &id, &mut body)
        .unwrap();
    post(
        addr,
        &path(enc, msg.operation()),
        enc.facts().content_type,
        body,
    )
}

/// Every encoding × message, 20 calls each on HTTP/1.1 and 20 on HTTP/2: all 200, the
/// encoding's content type, a reply that echoes the request value for value with the
/// call's id, and a `server-timing` with the decode and encode. Nothing refused.
#[test]
fn every_encoding_echoes_every_message_over_both_http_versions() {
    let server = TestServer::start_default();
    let addr = server.http;
    let messages: [Message; 5] = [
        "echo-void",
        "echo-struct:1",
        "echo-struct:100",
        "echo-list:64",
        "echo-synthetic:64KiB",
    ]
    .map(|m| m.parse().unwrap());
    server.block_on(async {
        let mut h1 = hyper_http1(addr).await;
        let mut h2 = hyper_http2(addr).await;
        for enc in EncodingKind::ALL.iter().copied() {
            for msg in messages {
                for seq in 0..40u64 {
                    let req = call(addr, enc, msg, seq);
                    let (status, headers, body) = if seq % 2 == 0 {
                        hyper_send1(&mut h1, req).await
                    } else {
                        hyper_collect(h2.send_request(req).await.expect("a reply")).await
                    };
                    assert_eq!(status, StatusCode::OK, "{enc} {msg}: {body:?}");
                    assert_eq!(
                        headers[CONTENT_TYPE],
                        enc.facts().content_type,
                        "{enc} {msg}"
                    );
                    let (reply, id) = enc
                        .decode_reply(msg.operation(), &body)
                        .unwrap_or_else(|e| panic!("{enc} {msg} seq {seq}: {e}"));
                    assert!(reply.echoes(&msg.request(seq)), "{enc} {msg} seq {seq}");
                    if enc == EncodingKind::Json {
                        assert_eq!(id, CallId::Json(CallId::of_seq(seq).into()));
                    }
                    let timing = headers["server-timing"].to_str().unwrap();
                    let parts: Vec<&str> = timing
                        .split(", ")
                        .map(|p| p.split(";dur=").next().unwrap())
                        .collect();
                    assert_eq!(parts, ["app", "dec", "enc"], "{timing}");
                }
            }
        }
    });
    // Every call counted once under its encoding and operation, its body bytes both ways
    // exactly: what the same calls encode to here.
    let snap = http_stats(addr);
    assert_rejects(&snap, &[]);
    for enc in EncodingKind::ALL.iter().copied() {
        for op in Operation::ALL {
            let (mut calls, mut bytes_in, mut bytes_out) = (0, 0, 0);
            for msg in messages.iter().filter(|m| m.operation() == op) {
                for seq in 0..40u64 {
                    let id = CallId::Json(serde_json::Value::String(CallId::of_seq(seq)));
                    let req = msg.request(seq);
                    let (mut body, mut reply) = (Vec::new(), Vec::new());
                    enc.encode_request(&req, &id, &mut body).unwrap();
                    enc.encode_reply(&req.into_reply(), &id, &mut reply)
                        .unwrap();
                    (calls, bytes_in, bytes_out) = (
                        calls + 1,
                        bytes_in + body.len() as u64,
                        bytes_out + reply.len() as u64,
                    );
                }
            }
            let got = &snap.rpc[enc.name()][op.name()];
            assert_eq!(
                (got.decoded, got.encoded, got.bytes_in, got.bytes_out),
                (calls, calls, bytes_in, bytes_out),
                "{enc} {op:?}"
            );
        }
    }
    let mut easy = curl::easy::Easy::new();
    let metrics = common::curl_call(
        &mut easy,
        "GET",
        &format!("http://{addr}/metrics"),
        None,
        &[],
    );
    let text = metrics.text();
    assert!(
        text.contains(r#"rpcbench_echo_rpc_calls_total{encoding="json",operation="EchoList"} 40"#),
        "{text}"
    );
}

/// Each bad body is answered (the encoding's error form, or 400/415 with a reason),
/// counted once under its kind, and the connection serves a healthy call after it.
#[test]
fn bad_calls_are_answered_counted_and_survived() {
    let server = TestServer::start_default();
    let addr = server.http;
    let json = EncodingKind::Json.facts().content_type;
    let postcard = EncodingKind::Postcard.facts().content_type;
    let deep_list = {
        let node = r#"{"i":0,"f":0,"s":"","Next":"#;
        format!(
            r#"{{"jsonrpc":"2.0","method":"EchoList","params":[{}null{}],"id":1}}"#,
            node.repeat(1000),
            "}".repeat(1000)
        )
    };
    // Path, content type, body, the status, the JSON-RPC error code if any, the kind.
    type Case<'a> = (&'a str, &'a str, Vec<u8>, StatusCode, Option<i64>, Reject);
    let cases: Vec<Case> = vec![
        (
            "/rpc",
            json,
            b"{\"jsonrpc\":".to_vec(),
            StatusCode::OK,
            Some(-32700),
            Reject::RpcMalformed,
        ),
        (
            "/rpc",
            json,
            br#"{"jsonrpc":"2.0","method":"GetOrder","params":[],"id":1}"#.to_vec(),
            StatusCode::OK,
            Some(-32601),
            Reject::RpcBadCall,
        ),
        (
            "/rpc",
            json,
            br#"{"jsonrpc":"2.0","method":"EchoStruct","params":[[{"i":"x"}]],"id":1}"#.to_vec(),
            StatusCode::OK,
            Some(-32602),
            Reject::RpcBadCall,
        ),
        (
            "/rpc",
            json,
            deep_list.into_bytes(),
            StatusCode::OK,
            Some(-32602),
            Reject::RpcTooDeep,
        ),
        (
            "/rpc/EchoStruct",
            postcard,
            vec![5, 1],
            StatusCode::BAD_REQUEST,
            None,
            Reject::RpcMalformed,
        ),
        (
            "/rpc/GetOrder",
            postcard,
            vec![0; 5000],
            StatusCode::BAD_REQUEST,
            None,
            Reject::RpcBadCall,
        ),
        (
            "/rpc/EchoStruct",
            "text/plain",
            vec![1],
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            None,
            Reject::HttpUnsupportedMediaType,
        ),
        // JSON-RPC's content type on the binary route.
        (
            "/rpc/EchoStruct",
            json,
            vec![1],
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            None,
            Reject::HttpUnsupportedMediaType,
        ),
    ];
    let mut counts: Vec<(Reject, u64)> = Vec::new();
    server.block_on(async {
        let mut h1 = hyper_http1(addr).await;
        for (path, content_type, body, status, code, kind) in cases {
            let (got, headers, body) =
                hyper_send1(&mut h1, post(addr, path, content_type, body)).await;
            assert_eq!(got, status, "{path} {content_type}: {body:?}");
            match code {
                Some(code) => {
                    let error: serde_json::Value = serde_json::from_slice(&body).unwrap();
                    assert_eq!(error["error"]["code"], code, "{error}");
                    // The call's id when its envelope could be read, else null.
                    let id = if code == -32700 {
                        serde_json::Value::Null
                    } else {
                        1.into()
                    };
                    assert_eq!(error["id"], id, "{error}");
                    assert_eq!(headers[CONTENT_TYPE], json);
                }
                None => {
                    let text = std::str::from_utf8(&body).unwrap();
                    assert!(
                        text.ends_with('\n') && text.lines().count() == 1,
                        "{text:?}"
                    );
                }
            }
            match counts.iter_mut().find(|(k, _)| *k == kind) {
                Some((_, n)) => *n += 1,
                None => counts.push((kind, 1)),
            }
            // The same connection still serves a healthy call.
            let msg: Message = "echo-struct:2".parse().unwrap();
            let (status, _, body) =
                hyper_send1(&mut h1, call(addr, EncodingKind::Protobuf, msg, 9)).await;
            assert_eq!(status, StatusCode::OK);
            let (reply, _) = EncodingKind::Protobuf
                .decode_reply(msg.operation(), &body)
                .unwrap();
            assert!(reply.echoes(&msg.request(9)));
        }
        // GET is not a call.
        let mut h2 = hyper_http2(addr).await;
        let get = hyper::Request::builder()
            .method(Method::GET)
            .uri(format!("http://{addr}/rpc"))
            .body(http_body_util::Full::new(Bytes::new()))
            .unwrap();
        let (status, headers, _) = hyper_collect(h2.send_request(get).await.unwrap()).await;
        assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED);
        assert_eq!(headers["allow"], "POST");
    });
    counts.push((Reject::HttpMethodNotAllowed, 1));
    assert_rejects(&http_stats(addr), &counts);
}

/// Lengths that claim more than the body holds are refused without allocating them, and a
/// body whose decoded message could hold more than the buffer budget is refused before it
/// is decoded: a protobuf field of 2 GiB in 12 bytes, a postcard array of 2^32 structs, a
/// MessagePack array32 of 2^32-1 are `rpc_malformed` (400); 2 MiB of empty protobuf
/// TestStructs, which decode to 16 times that, are 503 (`over_budget_http`) against an
/// 8 MiB budget. Each is counted once, and a healthy call is answered after it on the same
/// connection.
#[test]
fn lengths_past_the_body_and_expansion_past_the_budget_are_refused() {
    let mut config = common::config();
    config.max_buffered = 8 << 20;
    let server = TestServer::start(config);
    let addr = server.http;
    let protobuf = EncodingKind::Protobuf.facts().content_type;
    let postcard = EncodingKind::Postcard.facts().content_type;
    let msgpack = EncodingKind::Msgpack.facts().content_type;
    // Field 1 (array), length-delimited, length 2^31 - 1, then 6 bytes.
    let mut claim = vec![0x0a, 0xff, 0xff, 0xff, 0xff, 0x07];
    claim.extend_from_slice(&[0; 6]);
    // 2 MiB of `0a 00`: one empty TestStruct each, 32 bytes held for 2 on the wire.
    let empties = [0x0a, 0x00].repeat(1 << 20);
    type Case<'a> = (&'a str, Vec<u8>, StatusCode, Reject);
    let cases: Vec<Case> = vec![
        (
            protobuf,
            claim,
            StatusCode::BAD_REQUEST,
            Reject::RpcMalformed,
        ),
        (
            postcard,
            vec![0x80, 0x80, 0x80, 0x80, 0x10, 0],
            StatusCode::BAD_REQUEST,
            Reject::RpcMalformed,
        ),
        (
            msgpack,
            vec![
                0x81, 0xa5, b'a', b'r', b'r', b'a', b'y', 0xdd, 0xff, 0xff, 0xff, 0xff,
            ],
            StatusCode::BAD_REQUEST,
            Reject::RpcMalformed,
        ),
        (
            protobuf,
            empties,
            StatusCode::SERVICE_UNAVAILABLE,
            Reject::OverBudgetHttp,
        ),
    ];
    let mut counts: Vec<(Reject, u64)> = Vec::new();
    server.block_on(async {
        let mut h1 = hyper_http1(addr).await;
        for (content_type, body, status, kind) in cases {
            let len = body.len();
            let (got, _, text) =
                hyper_send1(&mut h1, post(addr, "/rpc/EchoStruct", content_type, body)).await;
            assert_eq!(
                got,
                status,
                "{content_type} of {len} bytes: {}",
                String::from_utf8_lossy(&text)
            );
            match counts.iter_mut().find(|(k, _)| *k == kind) {
                Some((_, n)) => *n += 1,
                None => counts.push((kind, 1)),
            }
            let msg: Message = "echo-struct:2".parse().unwrap();
            let (status, _, body) =
                hyper_send1(&mut h1, call(addr, EncodingKind::Protobuf, msg, 9)).await;
            assert_eq!(status, StatusCode::OK);
            let (reply, _) = EncodingKind::Protobuf
                .decode_reply(msg.operation(), &body)
                .unwrap();
            assert!(reply.echoes(&msg.request(9)));
        }
    });
    assert_rejects(&http_stats(addr), &counts);
}

/// XML's bad bodies, each answered in its encoding's fault (XML-RPC's under 200 with the
/// interoperability code, SOAP's Client Fault under 500), counted once under its kind,
/// and survived: the connection serves a healthy call after each. No DTD is read: a
/// parameter entity naming a listener of this test leaves it without a connection.
#[test]
fn xml_bad_calls_are_answered_counted_and_survived() {
    use rpcbench::encoding::soap::FaultCode;
    use rpcbench::encoding::{DecodeError, FaultKind};
    let server = TestServer::start_default();
    let addr = server.http;
    let bait = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    bait.set_nonblocking(true).unwrap();
    let bait_port = bait.local_addr().unwrap().port();
    let xml = EncodingKind::Xmlrpc.facts().content_type;
    let soap = EncodingKind::Soap.facts().content_type;
    let method_call = |method: &str, params: &str| {
        format!(
            "<?xml version=\"1.0\"?><methodCall><methodName>{method}</methodName><params>{params}</params></methodCall>"
        )
        .into_bytes()
    };
    let laughs = {
        let mut d = String::from("<?xml version=\"1.0\"?><!DOCTYPE lolz [<!ENTITY lol \"lol\">");
        for n in 1..10 {
            let refs = format!("&lol{};", n - 1)
                .repeat(10)
                .replace("&lol0;", "&lol;");
            d += &format!("<!ENTITY lol{n} \"{refs}\">");
        }
        d + "]><methodCall><methodName>&lol9;</methodName></methodCall>"
    };
    let quadratic = format!(
        "<!DOCTYPE q [<!ENTITY a \"{}\">]><methodCall><methodName>{}</methodName></methodCall>",
        "x".repeat(64 << 10),
        "&a;".repeat(16_000)
    );
    let fetch = format!(
        "<!DOCTYPE r [<!ENTITY % p SYSTEM \"http://127.0.0.1:{bait_port}/x.dtd\"> %p;]><methodCall/>"
    );
    let deep = "<value><array><data>".repeat(100_000);
    let envelope = |body: &str| {
        format!(
            "<?xml version=\"1.0\" encoding=\"utf-8\"?><s:Envelope xmlns:s=\"http://schemas.xmlsoap.org/soap/envelope/\"><s:Body>{body}</s:Body></s:Envelope>"
        )
        .into_bytes()
    };
    let echo_void = envelope("<EchoVoid xmlns=\"uri:WSTestWeb-TestService\"/>");
    let node = "<i>1</i><f>1</f><s>x</s><Next>";
    let long_list = envelope(&format!(
        "<EchoList xmlns=\"uri:WSTestWeb-TestService\"><list>{}<i>1</i><f>1</f><s>x</s>{}</list></EchoList>",
        node.repeat(64),
        "</Next>".repeat(64)
    ));
    let i_too_big = "<param><value><array><data><value><struct><member><name>i</name><value><i4>3000000000</i4></value></member><member><name>f</name><value><double>1</double></value></member><member><name>s</name><value>x</value></member></struct></value></data></array></value></param>";
    // Path, content type, SOAPAction, body, status, the fault it carries, the kind.
    type Case<'a> = (
        &'a str,
        &'a str,
        Option<&'a str>,
        Vec<u8>,
        StatusCode,
        Option<FaultKind>,
        Reject,
    );
    let client = Some(FaultKind::Soap(FaultCode::Client));
    let ok = StatusCode::OK;
    let five = StatusCode::INTERNAL_SERVER_ERROR;
    let x = |body: Vec<u8>, code: i64, kind: Reject| -> Case {
        (
            "/RPC2",
            xml,
            None,
            body,
            ok,
            Some(FaultKind::XmlRpc(code)),
            kind,
        )
    };
    let s = |action: Option<&'static str>, body: Vec<u8>, kind: Reject| -> Case {
        ("/soap", soap, action, body, five, client, kind)
    };
    let latin1 = b"<?xml version='1.0' encoding='ISO-8859-1'?><methodCall/>".to_vec();
    let passwd =
        |root: &str| format!("<!DOCTYPE r SYSTEM \"file:///etc/passwd\"><{root}/>").into_bytes();
    let cases: Vec<Case> = vec![
        x(
            method_call("EchoVoid", "")[..60].to_vec(),
            -32700,
            Reject::RpcMalformed,
        ),
        x(latin1, -32701, Reject::RpcMalformed),
        x(
            b"<methodCall>\xff</methodCall>".to_vec(),
            -32700,
            Reject::RpcMalformed,
        ),
        x(laughs.into_bytes(), -32700, Reject::RpcDoctype),
        x(quadratic.into_bytes(), -32700, Reject::RpcDoctype),
        x(passwd("methodCall"), -32700, Reject::RpcDoctype),
        x(fetch.into_bytes(), -32700, Reject::RpcDoctype),
        x(
            method_call("EchoStruct", &format!("<param>{deep}</param>")),
            -32602,
            Reject::RpcTooDeep,
        ),
        x(method_call("GetOrder", ""), -32601, Reject::RpcBadCall),
        x(
            method_call("EchoStruct", i_too_big),
            -32602,
            Reject::RpcBadCall,
        ),
        s(None, echo_void[..80].to_vec(), Reject::RpcMalformed),
        s(None, passwd("r"), Reject::RpcDoctype),
        s(
            Some("\"uri:WSTestWeb-TestService/EchoList\""),
            echo_void.clone(),
            Reject::RpcBadCall,
        ),
        s(Some("GetOrder"), echo_void.clone(), Reject::RpcBadCall),
        s(None, long_list, Reject::RpcTooDeep),
        (
            "/soap",
            "application/json",
            None,
            echo_void.clone(),
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            None,
            Reject::HttpUnsupportedMediaType,
        ),
    ];
    let mut counts: Vec<(Reject, u64)> = Vec::new();
    server.block_on(async {
        let mut h1 = hyper_http1(addr).await;
        for (path, content_type, action, body, status, fault, kind) in cases {
            let mut req = post(addr, path, content_type, body);
            if let Some(action) = action {
                req.headers_mut()
                    .insert("soapaction", action.parse().unwrap());
            }
            let (got, _, body) = hyper_send1(&mut h1, req).await;
            let text = String::from_utf8_lossy(&body).into_owned();
            assert_eq!(got, status, "{path} {kind:?}: {text}");
            if let Some(fault) = fault {
                let enc = if path == "/soap" {
                    EncodingKind::Soap
                } else {
                    EncodingKind::Xmlrpc
                };
                match enc.decode_reply(Operation::EchoVoid, &body) {
                    Err(DecodeError::Fault(got, _)) => assert_eq!(got, fault, "{text}"),
                    other => panic!("{path} {kind:?}: {other:?} from {text}"),
                }
            }
            match counts.iter_mut().find(|(k, _)| *k == kind) {
                Some((_, n)) => *n += 1,
                None => counts.push((kind, 1)),
            }
            // The same connection still serves a healthy call, in both XML encodings.
            for enc in [EncodingKind::Xmlrpc, EncodingKind::Soap] {
                let msg: Message = "echo-list:64".parse().unwrap();
                let (status, _, body) = hyper_send1(&mut h1, call(addr, enc, msg, 9)).await;
                assert_eq!(status, StatusCode::OK);
                let (reply, _) = enc.decode_reply(msg.operation(), &body).unwrap();
                assert!(reply.echoes(&msg.request(9)));
            }
        }
        // The WSDL, its address this server's own.
        let get = hyper::Request::builder()
            .method(Method::GET)
            .uri(format!("http://{addr}/soap?wsdl"))
            .header(HOST, addr.to_string())
            .body(http_body_util::Full::new(Bytes::new()))
            .unwrap();
        let (status, _, body) = hyper_send1(&mut h1, get).await;
        assert_eq!(status, StatusCode::OK);
        let wsdl = String::from_utf8(body.to_vec()).unwrap();
        assert!(
            wsdl.contains(&format!("location=\"http://{addr}/soap\"")),
            "{wsdl}"
        );
    });
    assert!(
        bait.accept().is_err(),
        "the parameter entity's URL was fetched"
    );
    assert_rejects(&http_stats(addr), &counts);
}
