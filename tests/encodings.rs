//! Encoded calls from the client (`--encoding`, `--message`): every encoding through every
//! transport that carries it, against the embedded server, each reply decoded and compared
//! field by field; and against test servers that answer wrongly (one bit of `f` flipped,
//! a JSON-RPC fault, bytes that are no encoding), whose every call must be counted under
//! the right kind.

mod common;

use common::TestServer;
use rpcbench::encoding::{CallId, EncodingKind, Message};
use rpcbench::measure::Phase;
use rpcbench::runner::{RpcConfig, RunConfig, TransportRun, run_transport};
use rpcbench::transport::{Endpoint, TransportKind};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::time::Duration;

const CALLS: u64 = 500;
const WARMUP: u64 = 4;

fn config(encoding: EncodingKind, message: Message) -> RunConfig {
    RunConfig {
        calls: CALLS,
        warmup: WARMUP,
        timeout: Duration::from_secs(5),
        rpc: Some(RpcConfig { encoding, message }),
        ..RunConfig::default()
    }
}

fn run(kind: TransportKind, tcp: SocketAddr, http: SocketAddr, cfg: &RunConfig) -> TransportRun {
    run_at(kind, Endpoint::new(tcp, http), cfg)
}

fn run_at(kind: TransportKind, endpoint: Endpoint, cfg: &RunConfig) -> TransportRun {
    run_transport(kind, &endpoint, cfg, Arc::new(AtomicU64::new(0)))
}

/// A test server with a Unix socket too, in a directory of its own (removed on drop).
fn server_with_unix() -> (TestServer, UnixDir) {
    let dir = UnixDir(std::env::temp_dir().join(format!(
        "rpcbench-encodings-{}-{:?}",
        std::process::id(),
        std::thread::current().id()
    )));
    std::fs::create_dir_all(&dir.0).unwrap();
    let mut config = common::config();
    config.unix = Some(dir.0.join("echo.sock"));
    config.quic = Some(SocketAddr::from(([127, 0, 0, 1], 0)));
    (TestServer::start(config), dir)
}

struct UnixDir(std::path::PathBuf);

impl Drop for UnixDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The body of call `seq` of `message` in `encoding`, as the client encodes it.
fn body_len(encoding: EncodingKind, message: Message, seq: u64) -> u64 {
    let mut out = Vec::new();
    encoding
        .encode_request(&message.request(seq), &CallId::of_call(seq), &mut out)
        .unwrap();
    out.len() as u64
}

/// Every encoding through every transport that carries it, five messages each: every
/// call ok, nothing lost, mismatched or failed; the server decoded and encoded each call
/// (warm-up included) once, and its body bytes are the calls' times one body's length (every
/// call of a cell the same length); one encode, decode, server, server decode and server
/// encode sample per ok call.
#[test]
fn every_encoding_through_every_carrying_transport() {
    let (server, _dir) = server_with_unix();
    let messages = [
        Message::Void,
        Message::Struct(1),
        Message::Struct(100),
        Message::List(64),
        Message::Synthetic(64 << 10),
    ];
    let kinds: Vec<TransportKind> = TransportKind::ALL
        .iter()
        .copied()
        .filter(|k| EncodingKind::ALL.iter().any(|&e| k.carries(e)))
        .collect();
    assert!(
        kinds.len() >= 6,
        "the HTTP transports carry encodings: {kinds:?}"
    );
    for &encoding in EncodingKind::ALL {
        for &message in &messages {
            for &kind in kinds.iter().filter(|k| k.carries(encoding)) {
                let cell = format!("{kind} {encoding} {message}");
                let before =
                    server.stats().rpc[encoding.name()][message.operation().name()].clone();
                let r = run_at(kind, server.endpoint_for(kind), &config(encoding, message));
                let t = &r.tally;
                assert_eq!(
                    (t.ok, t.lost, t.mismatched, t.failed()),
                    (CALLS, 0, 0, 0),
                    "{cell}: {:?}",
                    t.errors
                );
                for phase in [
                    Phase::Encode,
                    Phase::Decode,
                    Phase::Server,
                    Phase::ServerDecode,
                    Phase::ServerEncode,
                ] {
                    assert_eq!(t.phase(phase).len(), CALLS, "{cell}: {phase:?}");
                }
                let after = server.stats().rpc[encoding.name()][message.operation().name()].clone();
                let served = CALLS + warmup_of(&r);
                assert_eq!(after.decoded - before.decoded, served, "{cell}");
                assert_eq!(after.encoded - before.encoded, served, "{cell}");
                let one = body_len(encoding, message, 1);
                assert_eq!(
                    one,
                    body_len(encoding, message, 987_654),
                    "{cell}: bodies of one cell differ in length"
                );
                assert_eq!(after.bytes_in - before.bytes_in, served * one, "{cell}");
            }
        }
    }
}

/// The warm-up calls a run made: what it carried beyond its measured calls.
fn warmup_of(r: &TransportRun) -> u64 {
    r.calls_carried - r.tally.calls()
}

/// How a test server answers a call, given its decoded request.
#[derive(Clone, Copy)]
enum Answer {
    /// The echo with one bit of the first struct's `f` flipped.
    FlipF,
    /// The encoding's fault: a JSON-RPC error object or an XML-RPC fault, code -32601,
    /// under 200; a SOAP Server Fault under 500.
    Fault,
    /// 200 with bytes that are no encoding's.
    Garbage,
}

/// A keep-alive HTTP/1.1 server on a thread that answers every request as `answer` says,
/// in `encoding` (whatever the path), one connection at a time, until `stop` is set and a
/// connection wakes it.
fn wrong_server(
    encoding: EncodingKind,
    answer: Answer,
    stop: Arc<AtomicBool>,
) -> (SocketAddr, std::thread::JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let handle = std::thread::spawn(move || {
        for stream in listener.incoming() {
            if stop.load(Relaxed) {
                return;
            }
            let Ok(stream) = stream else { return };
            serve(stream, encoding, answer);
        }
    });
    (addr, handle)
}

fn serve(stream: TcpStream, encoding: EncodingKind, answer: Answer) {
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut out = stream.try_clone().unwrap();
    let mut reader = BufReader::new(stream);
    loop {
        let mut length = 0usize;
        let mut line = String::new();
        loop {
            line.clear();
            if reader.read_line(&mut line).unwrap_or(0) == 0 {
                return;
            }
            let lower = line.to_ascii_lowercase();
            if let Some(v) = lower.strip_prefix("content-length:") {
                length = v.trim().parse().unwrap();
            }
            if line == "\r\n" {
                break;
            }
        }
        let mut body = vec![0; length];
        reader.read_exact(&mut body).unwrap();
        let (req, id) = encoding.decode_request(None, &body).unwrap();
        let mut reply = Vec::new();
        let mut status = "200 OK";
        match answer {
            Answer::FlipF => {
                let mut back = req.into_reply();
                if let rpcbench::encoding::Reply::EchoStruct(m) = &mut back {
                    let f = &mut m.echo_struct_result[0].f;
                    *f = f32::from_bits(f.to_bits() ^ 1);
                }
                encoding.encode_reply(&back, &id, &mut reply).unwrap();
            }
            Answer::Fault => match encoding {
                EncodingKind::Json => {
                    rpcbench::encoding::json::write_error(&mut reply, -32601, "no method", &id);
                }
                EncodingKind::Xmlrpc => {
                    rpcbench::encoding::xmlrpc::write_fault(&mut reply, -32601, "no method");
                }
                EncodingKind::Soap => {
                    use rpcbench::encoding::soap::{FaultCode, write_fault};
                    write_fault(&mut reply, FaultCode::Server, "down");
                    status = "500 Internal Server Error";
                }
                other => panic!("{other} has no fault"),
            },
            Answer::Garbage => reply.extend_from_slice(b"{not <json"),
        }
        let head = format!(
            "HTTP/1.1 {status}\r\ncontent-type: {}\r\ncontent-length: {}\r\n\r\n",
            encoding.facts().content_type,
            reply.len()
        );
        if out.write_all(head.as_bytes()).is_err() || out.write_all(&reply).is_err() {
            return;
        }
    }
}

/// A reply with one bit of one `f` flipped is `mism`, every call; a fault is its kind
/// (`jsonrpc_-32601`, `xmlrpc_fault_-32601`, and a SOAP Fault under 500
/// `soap_fault_server`, through libcurl too); bytes the codec cannot read are
/// `decode_<encoding>`. The connection is dropped after each such call (as after any
/// failed call), so each call, warm-up included, has one of its own.
#[test]
fn wrong_replies_are_counted_by_kind() {
    use EncodingKind::{Json, Soap, Xmlrpc};
    use TransportKind::{CurlReuse, HttpKeepalive};
    let calls = 20;
    for (encoding, answer, transport, kind) in [
        (Json, Answer::FlipF, HttpKeepalive, None),
        (Json, Answer::Fault, HttpKeepalive, Some("jsonrpc_-32601")),
        (Json, Answer::Garbage, HttpKeepalive, Some("decode_json")),
        (Xmlrpc, Answer::FlipF, HttpKeepalive, None),
        (
            Xmlrpc,
            Answer::Fault,
            HttpKeepalive,
            Some("xmlrpc_fault_-32601"),
        ),
        (
            Xmlrpc,
            Answer::Garbage,
            HttpKeepalive,
            Some("decode_xmlrpc"),
        ),
        (Soap, Answer::FlipF, HttpKeepalive, None),
        (
            Soap,
            Answer::Fault,
            HttpKeepalive,
            Some("soap_fault_server"),
        ),
        (Soap, Answer::Fault, CurlReuse, Some("soap_fault_server")),
        (Soap, Answer::Garbage, HttpKeepalive, Some("decode_soap")),
    ] {
        let stop = Arc::new(AtomicBool::new(false));
        let (addr, server) = wrong_server(encoding, answer, stop.clone());
        let cfg = RunConfig {
            calls,
            warmup: 1,
            ..config(encoding, Message::Struct(3))
        };
        let r = run(transport, addr, addr, &cfg);
        let t = &r.tally;
        assert_eq!(t.ok, 0, "{encoding} {kind:?}");
        assert_eq!(t.calls(), calls);
        match kind {
            None => assert_eq!(t.mismatched, calls),
            Some(kind) => assert_eq!(t.errors_by_key().get(kind), Some(&calls), "{:?}", t.errors),
        }
        stop.store(true, Relaxed);
        drop(TcpStream::connect(addr));
        server.join().unwrap();
    }
}

/// `rpcbench` with `args`, against the embedded server: its exit code, stdout and stderr.
fn rpcbench(args: &[&str]) -> (i32, String, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_rpcbench"))
        .args(args)
        .args(["--no-progress", "--placement", "none"])
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The flags that cannot go together are usage errors (exit 2, one line naming them):
/// a payload or pattern reply with an encoding, a message without one, a list longer than
/// the cap, transports none of which carry the encoding.
#[test]
fn encoding_flags_refused_where_they_cannot_apply() {
    for (args, says) in [
        (&["--encoding", "json", "--payload", "10"][..], "--payload"),
        (&["--encoding", "json", "--reply", "10"][..], "--reply"),
        (&["--message", "echo-void"][..], "--encoding"),
        (
            &["--encoding", "json", "--message", "echo-list:65"][..],
            "65",
        ),
        (&["--encoding", "yaml"][..], "yaml"),
        (
            &["--encoding", "json", "--transports", "udp"][..],
            "carries",
        ),
    ] {
        let (code, _, err) = rpcbench(args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
}

/// A run with two encodings and two messages: a row per transport that carries them ×
/// encoding × message, each with its encoding and message in the JSON and every call ok;
/// udp, which carries none, is left out with one stderr line.
#[test]
fn a_run_has_a_row_per_encoding_and_message() {
    let (code, out, err) = rpcbench(&[
        "--transports",
        "http-keepalive,tcp,udp",
        "--encoding",
        "postcard,json",
        "--message",
        "echo-void,echo-list:8",
        "--names",
        "ip",
        "-n",
        "60",
        "--format",
        "json",
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("udp not run with encoding json, postcard"),
        "{err}"
    );
    let report: serde_json::Value = serde_json::from_str(&out).unwrap();
    let runs = report["runs"].as_array().unwrap();
    let mut cells: Vec<String> = runs
        .iter()
        .map(|r| {
            assert_eq!(r["ok"], 60, "{r}");
            assert!(r["phases_us"]["encode"].is_object(), "{r}");
            // The server's resident memory after the run, read from its /stats.
            assert!(
                r["cpu_us_per_call"]["server_rss_bytes"].as_u64() > Some(1 << 20),
                "{r}"
            );
            format!(
                "{} {} {}",
                r["transport"].as_str().unwrap(),
                r["encoding"].as_str().unwrap(),
                r["message"].as_str().unwrap()
            )
        })
        .collect();
    cells.sort();
    let mut want = Vec::new();
    for t in ["http-keepalive", "tcp"] {
        for e in ["json", "postcard"] {
            for m in ["echo-list:8", "echo-void"] {
                want.push(format!("{t} {e} {m}"));
            }
        }
    }
    want.sort();
    assert_eq!(cells, want);
}

/// Sends one raw frame to the server's TCP port and reads one reply frame: its head, its
/// payload, and the bytes after them (an encoded call's trailer).
fn frame_exchange(stream: &mut TcpStream, body: &[u8]) -> (rpcbench::wire::Response, Vec<u8>) {
    let mut frame = (body.len() as u32).to_be_bytes().to_vec();
    frame.extend_from_slice(body);
    stream.write_all(&frame).unwrap();
    let mut prefix = [0; 4];
    stream.read_exact(&mut prefix).unwrap();
    let mut reply = vec![0; u32::from_be_bytes(prefix) as usize];
    stream.read_exact(&mut reply).unwrap();
    let (resp, rest) =
        rpcbench::wire::decode_body_and_rest::<rpcbench::wire::Response>(&reply).unwrap();
    (resp, rest.to_vec())
}

/// The body of a request frame for call `seq` carrying `payload`, then `trailer`.
fn request_body(seq: u64, payload: &[u8], trailer: &[u8]) -> Vec<u8> {
    let req = rpcbench::wire::Request {
        seq,
        reply_len: None,
        delay_us: 0,
        payload: payload.to_vec(),
    };
    let mut body = postcard::to_allocvec(&req).unwrap();
    body.extend_from_slice(trailer);
    body
}

/// An encoded frame the server cannot take is answered on the same connection, counted
/// once under its kind: an unknown encoding or operation code and a postcard body that is
/// no message get status 5 and the reason; a JSON body that is no JSON gets status 0 and
/// JSON-RPC's error object (-32700), as over HTTP; each reply ends with the trailer of
/// the request's codes. A healthy encoded call on the same connection is then answered,
/// and a frame with 3 bytes after its fields (no trailer of wire 2) closes the connection
/// as any malformed frame does.
#[test]
fn encoded_frames_refused_in_the_encoding_s_form() {
    use rpcbench::server::stats::Reject;
    let server = TestServer::start_default();
    let mut stream = TcpStream::connect(server.tcp).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let postcard = EncodingKind::Postcard.code();
    let json = EncodingKind::Json.code();
    let op = Message::Struct(1).operation().code();
    for (seq, payload, trailer, status) in [
        (1, &b"x"[..], [99, op], 5),
        (2, &b"x"[..], [postcard, 99], 5),
        (3, &b"\xff\xff\xff"[..], [postcard, op], 5),
        (4, &b"{not json"[..], [json, op], 0),
    ] {
        let (resp, tail) = frame_exchange(&mut stream, &request_body(seq, payload, &trailer));
        assert_eq!((resp.seq, resp.status), (seq, status), "{trailer:?}");
        let tail: rpcbench::wire::RpcReplyTrailer = postcard::from_bytes(&tail).unwrap();
        assert_eq!((tail.encoding, tail.operation), (trailer[0], trailer[1]));
        if status == 0 {
            let text = String::from_utf8(resp.payload).unwrap();
            assert!(text.contains("-32700"), "{text}");
        }
    }
    let mut body = Vec::new();
    let message = Message::Struct(2);
    EncodingKind::Postcard
        .encode_request(&message.request(5), &CallId::of_call(5), &mut body)
        .unwrap();
    let (resp, tail) = frame_exchange(&mut stream, &request_body(5, &body, &[postcard, op]));
    assert_eq!(resp.status, 0);
    let (back, _) = EncodingKind::Postcard
        .decode_reply(message.operation(), &resp.payload)
        .unwrap();
    assert!(back.echoes(&message.request(5)));
    let tail: rpcbench::wire::RpcReplyTrailer = postcard::from_bytes(&tail).unwrap();
    assert_eq!((tail.encoding, tail.operation), (postcard, op));
    common::assert_rejects(
        &server.stats(),
        &[(Reject::RpcBadCall, 2), (Reject::RpcMalformed, 2)],
    );
    let mut frame = request_body(6, b"x", &[1, 2, 3]);
    frame.splice(0..0, (frame.len() as u32).to_be_bytes());
    stream.write_all(&frame).unwrap();
    let mut rest = Vec::new();
    assert_eq!(stream.read_to_end(&mut rest).unwrap_or(0), 0, "closed");
    common::assert_rejects(
        &server.stats(),
        &[
            (Reject::RpcBadCall, 2),
            (Reject::RpcMalformed, 2),
            (Reject::MalformedFrame, 1),
        ],
    );
}

/// The wire bytes of encoded tcp calls are exact: what the client's connections had
/// acknowledged (`tcpi_bytes_acked`, summed at close) is what the server read (`/stats`
/// tcp `bytes_in`), plus one sequence number per connection for its SYN; what they
/// received (`tcpi_bytes_received`, which counts no SYN) is what the server wrote. The
/// readings are taken before each connection closes, so no FIN is in them. The server's
/// bytes less the
/// bodies it decoded and encoded are the frames' heads and trailers: at most 26 and 8
/// bytes a frame each way, at least 8 and 5.
#[test]
fn tcp_wire_bytes_are_the_server_s_bytes_exactly() {
    let server = TestServer::start_default();
    let message = Message::Struct(10);
    let cfg = RunConfig {
        concurrency: 3,
        ..config(EncodingKind::Postcard, message)
    };
    let before = server.stats();
    let r = run(TransportKind::Tcp, server.tcp, server.http, &cfg);
    // A server thread counts what it wrote after the write, which the client may have
    // read first: the counts are final once it has closed every connection.
    let after = server.wait_stats(
        Duration::from_secs(10),
        "every tcp connection closed",
        |s| s.tcp.connections_open == 0,
    );
    assert_eq!(r.tally.ok, CALLS);
    let tcp = &r.tcp_info;
    let conns = tcp.connections_sampled;
    assert_eq!(conns, r.tally.connects);
    let read = after.tcp.bytes_in - before.tcp.bytes_in;
    let written = after.tcp.bytes_out - before.tcp.bytes_out;
    assert_eq!(tcp.bytes_acked, read + conns, "client sent, server read");
    assert_eq!(tcp.bytes_received, written, "server wrote, client got");
    let rpc = |s: &rpcbench::server::stats::StatsSnapshot| {
        s.rpc["postcard"][message.operation().name()].clone()
    };
    let (b, a) = (rpc(&before), rpc(&after));
    let frames = r.calls_carried;
    let (heads_in, heads_out) = (
        read - (a.bytes_in - b.bytes_in),
        written - (a.bytes_out - b.bytes_out),
    );
    assert!(
        (8 * frames..=26 * frames).contains(&heads_in),
        "{heads_in} for {frames}"
    );
    assert!(
        (5 * frames..=8 * frames + 26 * frames).contains(&heads_out),
        "{heads_out} for {frames}"
    );
}

/// One gRPC call of `path` with `msg` (length-prefixed here) on a fresh HTTP/2 connection;
/// returns the `grpc-status` it ended with.
fn grpc_status(http: SocketAddr, path: &str, msg: &[u8]) -> String {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        tokio::time::timeout(Duration::from_secs(10), async {
            let tcp = tokio::net::TcpStream::connect(http).await.unwrap();
            let (client, conn) = h2::client::handshake(tcp).await.unwrap();
            tokio::spawn(async move {
                let _ = conn.await;
            });
            let mut client = client.ready().await.unwrap();
            let req = hyper::Request::post(format!("http://{http}{path}"))
                .header("content-type", "application/grpc")
                .header("te", "trailers")
                .body(())
                .unwrap();
            let (resp, mut body) = client.send_request(req, false).unwrap();
            let mut frame = vec![0];
            frame.extend_from_slice(&(msg.len() as u32).to_be_bytes());
            frame.extend_from_slice(msg);
            body.send_data(frame.into(), true).unwrap();
            let resp = resp.await.unwrap();
            if let Some(status) = resp.headers().get("grpc-status") {
                return status.to_str().unwrap().to_string();
            }
            let mut recv = resp.into_body();
            while let Some(data) = recv.data().await {
                let _ = data.unwrap();
            }
            let trailers = recv.trailers().await.unwrap().expect("trailers");
            trailers["grpc-status"].to_str().unwrap().to_string()
        })
        .await
        .expect("the server answered in time")
    })
}

/// `rpcbench.v1.WsTest` with the stubs tonic generates from `proto/wstest.proto` (not our
/// transports): an EchoStruct of 3 and an EchoList of 64 come back value for value, with
/// the codec's times in `server-timing`. Bytes that are no EchoStruct are INVALID_ARGUMENT
/// (and `rpc_malformed`), a method WSTest lacks UNIMPLEMENTED.
#[test]
fn the_generated_wstest_client_calls_the_server() {
    use rpcbench::proto::ws_test_client::WsTestClient;
    use rpcbench::server::stats::Reject;
    let server = TestServer::start_default();
    let url = format!("http://{}", server.http);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let structs = Message::Struct(3).request(7);
    let list = Message::List(64).request(8);
    let (timing, back_structs, back_list) = rt.block_on(async {
        let channel = tonic::transport::Endpoint::from_shared(url)
            .unwrap()
            .connect()
            .await
            .expect("connect");
        let mut client = WsTestClient::new(channel);
        let rpcbench::encoding::Request::EchoStruct(s) = structs.clone() else {
            unreachable!()
        };
        let resp = client.echo_struct(s).await.expect("a reply");
        let timing = resp
            .metadata()
            .get("server-timing")
            .map(|v| v.to_str().unwrap().to_string());
        let rpcbench::encoding::Request::EchoList(l) = list.clone() else {
            unreachable!()
        };
        let back_list = client.echo_list(l).await.expect("a reply").into_inner();
        (timing, resp.into_inner(), back_list)
    });
    assert!(rpcbench::encoding::Reply::EchoStruct(back_structs).echoes(&structs));
    assert!(rpcbench::encoding::Reply::EchoList(back_list).echoes(&list));
    let timing = timing.expect("server-timing");
    assert!(
        timing.contains("dec;dur=") && timing.contains("enc;dur="),
        "{timing}"
    );
    let status = grpc_status(server.http, "/rpcbench.v1.WsTest/EchoStruct", &[0x0a, 0xff]);
    assert_eq!(status, "3", "INVALID_ARGUMENT");
    let status = grpc_status(server.http, "/rpcbench.v1.WsTest/GetOrder", &[]);
    assert_eq!(status, "12", "UNIMPLEMENTED");
    let stats = server.stats();
    assert_eq!(stats.rpc["protobuf"]["EchoStruct"].decoded, 1);
    assert_eq!(stats.rpc["protobuf"]["EchoList"].encoded, 1);
    common::assert_rejects(
        &stats,
        &[
            (Reject::RpcMalformed, 1),
            (Reject::GrpcInvalidArgument, 1),
            (Reject::GrpcUnimplemented, 1),
        ],
    );
}

/// Two encodings of one message on one transport make a finding that sets each against
/// the one with the least mean: its latency, its bytes; once per transport, though it ran
/// in two address modes.
#[test]
fn two_encodings_make_a_finding() {
    let (code, out, err) = rpcbench(&[
        "--transports",
        "tcp",
        "--encoding",
        "postcard,json",
        "--message",
        "echo-list:8",
        "--names",
        "ip,cached",
        "-n",
        "200",
    ]);
    assert_eq!(code, 0, "{err}");
    let text = out.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(text.contains("Encodings at echo-list:8 on tcp, "), "{out}");
    // Said once, though the transport ran in two address modes.
    assert_eq!(text.matches("on tcp, ").count(), 1, "{out}");
    assert!(text.contains("× its bytes"), "{out}");
    assert!(text.contains("postcard") && text.contains("json"), "{out}");
}

/// `rpcbench sweep --messages`: a series per transport and encoding it carries (udp, which
/// carries none, has none), a step per message (a bare size takes the operation before
/// it), every call ok, the step's payload the encoded body; a list that starts with a size
/// is a usage error.
#[test]
fn a_sweep_over_messages_has_a_series_per_encoding() {
    let dir = UnixDir(std::env::temp_dir().join(format!("rpcbench-sweep-{}", std::process::id())));
    std::fs::create_dir_all(&dir.0).unwrap();
    let out = dir.0.join("sweep.json");
    let (code, _, err) = rpcbench(&[
        "sweep",
        "--transports",
        "tcp,udp",
        "--encoding",
        "postcard,json",
        "--messages",
        "echo-struct:1,10,echo-list:4",
        "--step-duration",
        "100ms",
        "--names",
        "ip",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!(report["axis"], "message");
    let series = report["series"].as_array().unwrap();
    let names: Vec<String> = series
        .iter()
        .map(|s| format!("{} {}", s["transport"], s["encoding"]))
        .collect();
    assert_eq!(names, ["\"tcp\" \"postcard\"", "\"tcp\" \"json\""]);
    for s in series {
        let steps: Vec<String> = s["steps"]
            .as_array()
            .unwrap()
            .iter()
            .map(|step| {
                let run = &step["run"];
                assert_eq!(run["ok"], run["calls"], "{run}");
                assert!(run["ok"].as_u64().unwrap() > 0, "{run}");
                assert_eq!(
                    step["payload_bytes"].as_f64().unwrap(),
                    run["bytes_per_call"]["request_body"]
                        .as_f64()
                        .unwrap()
                        .floor()
                );
                run["message"].as_str().unwrap().to_string()
            })
            .collect();
        assert_eq!(steps, ["echo-struct:1", "echo-struct:10", "echo-list:4"]);
    }
    let (code, _, err) = rpcbench(&["sweep", "--encoding", "json", "--messages", "10"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("name its message first"), "{err}");
}

/// libcurl's own counts stand in for the kernel's where rpcbench cannot ask the kernel:
/// an encoded reply over HTTP/1.1 is the same bytes whoever reads it, so curl-reuse's
/// wire bytes received per call (`CURLINFO_HEADER_SIZE` + `CURLINFO_SIZE_DOWNLOAD`) equal
/// http-keepalive's (`tcpi_bytes_received`), and what each sent holds the body.
#[test]
fn curl_wire_bytes_match_the_kernel_s() {
    let server = TestServer::start_default();
    let cfg = config(EncodingKind::Msgpack, Message::Struct(10));
    let per_call = |kind| {
        let r = run(kind, server.tcp, server.http, &cfg);
        assert_eq!(r.tally.ok, CALLS, "{kind}");
        rpcbench::report::RunRecord::new(&r)
            .bytes_per_call
            .expect("an ok call")
    };
    let kernel = per_call(TransportKind::HttpKeepalive);
    let curl = per_call(TransportKind::CurlReuse);
    assert_eq!(curl.wire_received, kernel.wire_received);
    for b in [kernel, curl] {
        assert!(b.wire_sent.unwrap() > b.request_body, "{b:?}");
        assert!(b.wire_received.unwrap() > b.reply_body, "{b:?}");
    }
}

/// `report/encodings.sh --scale small` prints the whole WSTest table: a row for every
/// transport × encoding it carries × message (tcp and http-keepalive six encodings, grpc
/// protobuf; three messages), every cell filled (`-` only for server CPU resting on fewer
/// than 100 clock ticks), the seeds' `ab` and client-stack tables whole, and exits 0 with
/// every call ok.
#[test]
fn the_encodings_report_prints_a_complete_table() {
    let bin_dir = Path::new(env!("CARGO_BIN_EXE_rpcbench")).parent().unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("report/encodings.sh");
    let out = std::process::Command::new("bash")
        .arg(script)
        .args(["--scale", "small", "--seconds", "0.1"])
        .env("RPCBENCH_BIN_DIR", bin_dir)
        .output()
        .expect("run report/encodings.sh");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}{stderr}");
    let rows: Vec<Vec<&str>> = stdout
        .lines()
        .skip(1)
        .take_while(|l| !l.is_empty())
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(rows.len(), (6 + 6 + 1) * 3, "{stdout}");
    for row in &rows {
        assert_eq!(row.len(), 17, "{row:?}");
        for (i, cell) in row.iter().enumerate() {
            // Column 11 is the server's CPU, `-` below 100 clock ticks.
            assert!(i == 11 || *cell != "-", "{row:?}");
        }
    }
    for goal in [
        "G1 linear growth",
        "G3 envelope cost",
        "G4 no hidden copies",
    ] {
        assert!(stdout.contains(goal), "{stdout}");
    }
    assert!(
        stdout.contains("  json echo-struct:100: "),
        "G4 measured: {stdout}"
    );
    // The seeds' shapes: ab against both SOAP and both XML-RPC servers, no request
    // failed, and every client stack's 100 calls timed.
    let after = |title: &str| -> Vec<Vec<&str>> {
        let at = stdout
            .find(title)
            .unwrap_or_else(|| panic!("no {title:?}: {stdout}"));
        stdout[at..]
            .lines()
            .skip(2)
            .take_while(|l| !l.is_empty())
            .map(|l| l.split_whitespace().collect())
            .collect()
    };
    let ab = after("seed 000's shape");
    assert_eq!(ab.len(), 4, "{stdout}");
    for row in &ab {
        let rps: f64 = row[row.len() - 6].parse().expect("req/s");
        assert!(rps > 0.0 && row[row.len() - 5] == "0", "{row:?}");
    }
    let stacks = after("seed 003's shape");
    assert_eq!(stacks.len(), 6, "{stdout}");
    for row in &stacks {
        assert!(row[row.len() - 1].parse::<f64>().is_ok(), "{row:?}");
    }
    assert!(
        stdout.contains("G2 rpcbench-echo's SOAP against spyne's"),
        "{stdout}"
    );
}

/// A healthy large protobuf call is leased what it holds, not protobuf's worst case: 1 MiB
/// Synthetics over http-keepalive and grpc, whose 16-times bound (16 MiB) was past a
/// connection's share of the budget and answered 503 / RESOURCE_EXHAUSTED, all ok.
#[test]
fn large_protobuf_calls_are_leased_what_they_hold() {
    let server = TestServer::start_default();
    for kind in [TransportKind::HttpKeepalive, TransportKind::Grpc] {
        let cfg = RunConfig {
            calls: 20,
            warmup: 1,
            ..config(EncodingKind::Protobuf, Message::Synthetic(1 << 20))
        };
        let r = run(kind, server.tcp, server.http, &cfg);
        assert_eq!(
            (r.tally.ok, r.tally.failed()),
            (20, 0),
            "{kind}: {:?}",
            r.tally.errors
        );
    }
}
