//! Integration tests of the echo server's HTTP listener: echo and pattern through hyper
//! and libcurl, keep-alive and `Connection: close`, error statuses, `/stats` accuracy,
//! HTTP/2 prior knowledge, idle timeouts, and graceful shutdown of the real binary.

mod common;

use common::{
    CurlReply, EchoProcess, FrameClient, IO_TIMEOUT, TestServer, assert_rejects, curl_call,
    curl_echo, echo_req, http_stats, hyper_collect, hyper_http1, hyper_http2, hyper_req,
    hyper_send1, parse_server_timing, payload_for, raw_http, read_http1,
};
use hyper::{Method, StatusCode};
use rpcbench::server::stats::{Reject, StatsSnapshot};
use rpcbench::wire::{self, Request};
use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

fn url(addr: SocketAddr, path: &str) -> String {
    format!("http://{addr}{path}")
}

/// Checks a successful echo reply's headers: type, seq copy, server-timing.
fn check_echo_headers(content_type: Option<&str>, seq: Option<&str>, timing: Option<&str>) {
    assert_eq!(content_type, Some("application/octet-stream"));
    let timing = timing.expect("no server-timing header");
    assert!(
        parse_server_timing(timing).is_some(),
        "server-timing {timing:?} is not app;dur=<float>"
    );
    if let Some(seq) = seq {
        seq.parse::<u64>()
            .unwrap_or_else(|_| panic!("x-rpcbench-seq {seq:?} is not a number"));
    }
}

/// Checks an error reply: the status, plain text, and a one-line reason.
fn check_error(reply: &CurlReply, status: u32) {
    assert_eq!(reply.status, status, "body: {:?}", reply.text());
    assert_one_line_reason(&reply.text(), reply.header("content-type"));
}

fn assert_one_line_reason(body: &str, content_type: Option<&str>) {
    assert_eq!(content_type, Some("text/plain; charset=utf-8"));
    assert!(
        body.ends_with('\n') && body.matches('\n').count() == 1 && body.trim().len() > 3,
        "reason is not one line of text: {body:?}"
    );
}

#[test]
fn hyper_http1_echo_pattern_and_headers() {
    let server = TestServer::start_default();
    let addr = server.http;
    server.block_on(async {
        let mut sender = hyper_http1(addr).await;

        let body = payload_for(42, 3_000);
        let mut req = hyper_req(Method::POST, addr, "/echo", &body);
        req.headers_mut()
            .insert("x-rpcbench-seq", "18446744073709551615".parse().unwrap());
        let (status, headers, got) = hyper_send1(&mut sender, req).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(got.as_ref(), body.as_slice());
        let h = |n: &str| headers.get(n).map(|v| v.to_str().unwrap().to_string());
        check_echo_headers(
            h("content-type").as_deref(),
            h("x-rpcbench-seq").as_deref(),
            h("server-timing").as_deref(),
        );
        assert_eq!(h("x-rpcbench-seq").as_deref(), Some("18446744073709551615"));

        // Empty body echoes as empty; no seq sent, none returned.
        let req = hyper_req(Method::POST, addr, "/echo", b"");
        let (status, headers, got) = hyper_send1(&mut sender, req).await;
        assert_eq!(status, StatusCode::OK);
        assert!(got.is_empty());
        assert!(headers.get("x-rpcbench-seq").is_none());

        for (seq, len) in [(5u64, 0u32), (6, 1), (7, 1_000), (8, 65_536)] {
            let path = format!("/echo?reply_len={len}&seq={seq}");
            let req = hyper_req(Method::GET, addr, &path, b"");
            let (status, headers, got) = hyper_send1(&mut sender, req).await;
            assert_eq!(status, StatusCode::OK, "{path}");
            assert_eq!(got.len(), len as usize, "{path}");
            assert!(wire::is_pattern(seq, &got), "{path}: not the pattern");
            let seq_text = seq.to_string();
            assert_eq!(
                headers.get("x-rpcbench-seq").map(|v| v.to_str().unwrap()),
                Some(seq_text.as_str())
            );
        }

        // POST with reply_len: the pattern for the header's seq, the body is ignored.
        let mut req = hyper_req(Method::POST, addr, "/echo?reply_len=300&seq=1", b"ignored");
        req.headers_mut()
            .insert("x-rpcbench-seq", "77".parse().unwrap());
        let (status, _, got) = hyper_send1(&mut sender, req).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(got.len(), 300);
        assert!(wire::is_pattern(77, &got));

        let req = hyper_req(Method::GET, addr, "/healthz", b"");
        let (status, _, got) = hyper_send1(&mut sender, req).await;
        assert_eq!((status, got.as_ref()), (StatusCode::OK, b"ok".as_slice()));
    });
}

#[test]
fn curl_echo_pattern_and_headers() {
    let server = TestServer::start_default();
    let mut easy = curl::easy::Easy::new();
    for (seq, len) in [(1u64, 0usize), (2, 1), (3, 10_000), (4, 1 << 20)] {
        let body = payload_for(seq, len);
        let seq_header = format!("x-rpcbench-seq: {seq}");
        let reply = curl_call(
            &mut easy,
            "POST",
            &url(server.http, "/echo"),
            Some(&body),
            &[&seq_header, "Content-Type: application/octet-stream"],
        );
        assert_eq!(reply.status, 200);
        assert!(reply.body == body, "echo of {len} bytes differs");
        check_echo_headers(
            reply.header("content-type"),
            reply.header("x-rpcbench-seq"),
            reply.header("server-timing"),
        );
        assert_eq!(
            reply.header("x-rpcbench-seq"),
            Some(seq.to_string().as_str())
        );
    }
    for (seq, len) in [(250u64, 0u32), (251, 1), (252, 65_536)] {
        let reply = curl_call(
            &mut easy,
            "GET",
            &url(server.http, &format!("/echo?reply_len={len}&seq={seq}")),
            None,
            &[],
        );
        assert_eq!(reply.status, 200);
        assert_eq!(reply.body.len(), len as usize);
        assert!(wire::is_pattern(seq, &reply.body));
        check_echo_headers(
            reply.header("content-type"),
            reply.header("x-rpcbench-seq"),
            reply.header("server-timing"),
        );
    }
}

#[test]
fn http_delay_is_honoured() {
    let server = TestServer::start_default();
    let mut easy = curl::easy::Easy::new();
    let start = Instant::now();
    let reply = curl_call(
        &mut easy,
        "GET",
        &url(server.http, "/echo?reply_len=10&seq=3&delay_us=20000"),
        None,
        &[],
    );
    let took = start.elapsed();
    assert_eq!(reply.status, 200);
    assert!(wire::is_pattern(3, &reply.body) && reply.body.len() == 10);
    assert!(took >= Duration::from_millis(20), "reply after {took:?}");
    let dur = parse_server_timing(reply.header("server-timing").unwrap()).unwrap();
    assert!(
        dur >= 20.0,
        "server-timing {dur} ms is below the 20 ms delay"
    );
}

#[test]
fn keep_alive_hyper_100_requests_one_connection() {
    let server = TestServer::start_default();
    let addr = server.http;
    let snap: StatsSnapshot = server.block_on(async {
        let mut sender = hyper_http1(addr).await;
        for seq in 0..100u64 {
            let body = payload_for(seq, (seq * 13 % 500) as usize);
            let mut req = hyper_req(Method::POST, addr, "/echo", &body);
            req.headers_mut()
                .insert("x-rpcbench-seq", seq.to_string().parse().unwrap());
            let (status, headers, got) = hyper_send1(&mut sender, req).await;
            assert_eq!(status, StatusCode::OK);
            assert_eq!(got.as_ref(), body.as_slice());
            assert_eq!(headers["x-rpcbench-seq"].to_str().unwrap(), seq.to_string());
        }
        let req = hyper_req(Method::GET, addr, "/stats", b"");
        let (status, _, got) = hyper_send1(&mut sender, req).await;
        assert_eq!(status, StatusCode::OK);
        serde_json::from_slice(&got).expect("/stats JSON")
    });
    assert_eq!(snap.http.connections_total, 1);
    assert_eq!(snap.http.connections_open, 1);
    assert_eq!(snap.http.requests, 101);
    assert_rejects(&snap, &[]);
}

#[test]
fn keep_alive_curl_100_requests_one_connection() {
    let server = TestServer::start_default();
    let mut easy = curl::easy::Easy::new();
    for seq in 0..100u64 {
        let reply = if seq % 2 == 0 {
            let body = payload_for(seq, 64);
            let r = curl_call(
                &mut easy,
                "POST",
                &url(server.http, "/echo"),
                Some(&body),
                &[],
            );
            assert!(r.body == body);
            r
        } else {
            let path = format!("/echo?reply_len=128&seq={seq}");
            let r = curl_call(&mut easy, "GET", &url(server.http, &path), None, &[]);
            assert!(r.body.len() == 128 && wire::is_pattern(seq, &r.body));
            r
        };
        assert_eq!(reply.status, 200);
    }
    let reply = curl_call(&mut easy, "GET", &url(server.http, "/stats"), None, &[]);
    let snap: StatsSnapshot = serde_json::from_slice(&reply.body).unwrap();
    assert_eq!(
        snap.http.connections_total, 1,
        "curl did not reuse one connection"
    );
    assert_eq!(snap.http.requests, 101);
    assert_rejects(&snap, &[]);
}

/// The plain keep-alive echoes are answered without hyper (`crates/server/src/server/http/lean.rs`), and
/// any other request hands the connection to hyper with the bytes already read: on one
/// connection, pipelined and split requests of both kinds come back in order, each right,
/// and the lean replies carry the same headers as hyper's.
#[test]
fn lean_echoes_and_hyper_share_one_connection() {
    let server = TestServer::start_default();
    let mut stream = TcpStream::connect(server.http).unwrap();
    stream.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
    stream.set_nodelay(true).unwrap();
    let echo = |seq: u64, body: &[u8]| {
        let mut req = format!(
            "POST /echo HTTP/1.1\r\nHost: t\r\nx-rpcbench-seq: {seq}\r\nContent-Length: {}\r\n\r\n",
            body.len()
        )
        .into_bytes();
        req.extend_from_slice(body);
        req
    };
    let mut buf = Vec::new();
    // 1. Two echoes pipelined in one write, a pattern reply, then one split byte by byte.
    let mut both = echo(1, b"first");
    both.extend(echo(2, &[7; 3000]));
    both.extend(b"GET /echo?reply_len=100&seq=3 HTTP/1.1\r\nHost: t\r\n\r\n");
    stream.write_all(&both).unwrap();
    for byte in echo(4, b"split") {
        stream.write_all(&[byte]).unwrap();
    }
    let mut lean = Vec::new();
    for (seq, body) in [
        (1, b"first".to_vec()),
        (2, vec![7; 3000]),
        (3, (0..100u64).map(|i| (3 + i) as u8).collect()),
        (4, b"split".to_vec()),
    ] {
        let resp = read_http1(&mut stream, &mut buf);
        assert_eq!(resp.status, 200);
        assert_eq!(
            resp.header("x-rpcbench-seq"),
            Some(seq.to_string().as_str())
        );
        assert_eq!(resp.body, body, "seq {seq}");
        check_echo_headers(
            resp.header("content-type"),
            resp.header("x-rpcbench-seq"),
            resp.header("server-timing"),
        );
        lean.push(resp);
    }
    // 2. A request only hyper answers (a chunked body), pipelined with an echo behind it:
    // hyper takes the connection from there, in order.
    let mut mixed = b"POST /echo HTTP/1.1\r\nHost: t\r\nx-rpcbench-seq: 5\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n".to_vec();
    mixed.extend(echo(6, b"after"));
    mixed.extend(b"GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n");
    stream.write_all(&mixed).unwrap();
    let chunked = read_http1(&mut stream, &mut buf);
    assert_eq!(
        (chunked.status, chunked.body.as_slice()),
        (200, &b"abc"[..])
    );
    let after = read_http1(&mut stream, &mut buf);
    assert_eq!((after.status, after.body.as_slice()), (200, &b"after"[..]));
    assert_eq!(after.header("x-rpcbench-seq"), Some("6"));
    let health = read_http1(&mut stream, &mut buf);
    assert_eq!((health.status, health.body.as_slice()), (200, &b"ok"[..]));
    // Hyper's echo reply and the lean ones carry the same headers.
    let names = |r: &common::RawResponse| {
        let mut names: Vec<String> = r.headers.iter().map(|(k, _)| k.clone()).collect();
        names.sort();
        names
    };
    for resp in &lean {
        assert_eq!(names(resp), names(&after), "lean and hyper headers");
    }
    drop(stream);
    let stats = server.stats();
    assert_eq!(stats.http.requests, 7, "every request counted once");
    assert_eq!(stats.http.connections_total, 1);
}

#[test]
fn connection_close_is_honoured() {
    let server = TestServer::start_default();
    let bytes = raw_http(
        server.http,
        b"POST /echo HTTP/1.1\r\nHost: t\r\nConnection: close\r\nContent-Length: 5\r\n\r\nhello",
    );
    // raw_http returns only once the server closed the connection.
    let (resp, used) = common::parse_http1(&bytes).expect("a whole response");
    assert_eq!(used, bytes.len(), "extra bytes after the response");
    assert_eq!(resp.status, 200);
    assert_eq!(resp.body, b"hello");
    assert_eq!(resp.header("connection"), Some("close"));

    // HTTP/1.0 without keep-alive closes as well.
    let bytes = raw_http(server.http, b"GET /echo?reply_len=3&seq=1 HTTP/1.0\r\n\r\n");
    let (resp, _) = common::parse_http1(&bytes).expect("a whole response");
    assert_eq!(resp.status, 200);
    assert_eq!(resp.body, [1, 2, 3]);

    let snap = server.wait_stats(IO_TIMEOUT, "closed", |s| s.http.connections_open == 0);
    assert_eq!(snap.http.connections_total, 2);
    assert_rejects(&snap, &[]);
}

/// A refusal sent before the body is in does not cut the client off: the server reads
/// the rest of the body and drops it, so the client can finish sending (no reset) and the
/// connection serves the next request. Closing at once instead made curl fail with
/// "Failed sending data to the peer" on some runs, before it read the refusal.
#[test]
fn a_refused_body_is_read_and_the_connection_goes_on() {
    let max_frame = 64 * 1024;
    let server = TestServer::start(rpcbench::server::ServerConfig {
        max_frame,
        ..common::config()
    });
    let body = vec![7u8; 16 * max_frame as usize];
    for (path, status) in [("/echo", 413), ("/echo?delay_us=x", 400), ("/nowhere", 404)] {
        let mut stream = TcpStream::connect(server.http).unwrap();
        stream.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
        let head = format!(
            "POST {path} HTTP/1.1\r\nHost: t\r\nContent-Length: {}\r\n\r\n",
            body.len()
        );
        stream.write_all(head.as_bytes()).unwrap();
        let mut buf = Vec::new();
        let refused = read_http1(&mut stream, &mut buf);
        assert_eq!(refused.status, status, "POST {path}");
        // Had the server closed, the kernel would have reset the connection by now.
        std::thread::sleep(Duration::from_millis(100));
        stream
            .write_all(&body)
            .unwrap_or_else(|e| panic!("POST {path}: sending the body after the refusal: {e}"));
        stream
            .write_all(b"GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n")
            .unwrap();
        let next = read_http1(&mut stream, &mut buf);
        assert_eq!(
            (next.status, &next.body[..]),
            (200, &b"ok"[..]),
            "POST {path}"
        );
    }
}

/// A client may shut its write side once its request is sent (HTTP/1 half-close, as
/// `nc -N` does): the reply still comes, also when the server delays it, and then the
/// server closes its side.
#[test]
fn half_closed_client_gets_its_reply() {
    let server = TestServer::start_default();
    for (path, body) in [
        ("/echo?reply_len=4&seq=7", vec![7, 8, 9, 10]),
        ("/echo?reply_len=2&seq=1&delay_us=200000", vec![1, 2]),
    ] {
        let mut stream = TcpStream::connect_timeout(&server.http, IO_TIMEOUT).unwrap();
        stream.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
        let started = Instant::now();
        write!(stream, "GET {path} HTTP/1.1\r\nHost: t\r\n\r\n").unwrap();
        stream.shutdown(std::net::Shutdown::Write).unwrap();
        let mut bytes = Vec::new();
        std::io::Read::read_to_end(&mut stream, &mut bytes)
            .expect("the server closes after replying");
        let (resp, _) = common::parse_http1(&bytes).expect("a whole response");
        assert_eq!(resp.status, 200, "{path}");
        assert_eq!(resp.body, body, "{path}");
        if path.contains("delay_us") {
            assert!(started.elapsed() >= Duration::from_millis(200));
        }
    }
    let snap = server.wait_stats(IO_TIMEOUT, "closed", |s| s.http.connections_open == 0);
    assert_eq!(snap.http.requests, 2);
    assert_rejects(&snap, &[]);
}

#[test]
fn error_statuses_with_reasons() {
    let mut config = common::config();
    config.max_frame = 1_024;
    config.max_delay = Duration::from_millis(100);
    let server = TestServer::start(config);
    let mut easy = curl::easy::Easy::new();
    let u = |p: &str| url(server.http, p);

    check_error(&curl_call(&mut easy, "GET", &u("/nope"), None, &[]), 404);
    check_error(&curl_call(&mut easy, "POST", &u("/"), Some(b"x"), &[]), 404);

    let reply = curl_call(&mut easy, "PUT", &u("/echo"), Some(b"x"), &[]);
    check_error(&reply, 405);
    assert_eq!(reply.header("allow"), Some("GET, POST"));
    let reply = curl_call(&mut easy, "POST", &u("/stats"), Some(b"x"), &[]);
    check_error(&reply, 405);
    assert_eq!(reply.header("allow"), Some("GET"));
    let reply = curl_call(&mut easy, "DELETE", &u("/healthz"), None, &[]);
    check_error(&reply, 405);
    assert_eq!(reply.header("allow"), Some("GET"));

    for bad in [
        "/echo?reply_len=abc",
        "/echo?reply_len=-1",
        "/echo?reply_len=1025",
        "/echo?reply_len=10&delay_us=soon",
        "/echo?reply_len=10&delay_us=100001",
        "/echo?reply_len=10&seq=x",
        "/echo",
    ] {
        let reply = curl_call(&mut easy, "GET", &u(bad), None, &[]);
        check_error(&reply, 400);
    }
    let reply = curl_call(
        &mut easy,
        "POST",
        &u("/echo"),
        Some(b"x"),
        &["x-rpcbench-seq: -3"],
    );
    check_error(&reply, 400);
    // The limits themselves are fine.
    let reply = curl_call(
        &mut easy,
        "GET",
        &u("/echo?reply_len=1024&delay_us=100000&seq=4"),
        None,
        &[],
    );
    assert_eq!(reply.status, 200);
    assert!(reply.body.len() == 1_024 && wire::is_pattern(4, &reply.body));
    curl_echo(&mut easy, &u("/echo"), &[5; 1_024]);

    // 413 for a declared body above max_frame, answered before the body is sent.
    let bytes = raw_http(
        server.http,
        b"POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 5000\r\n\r\n",
    );
    let (resp, _) = common::parse_http1(&bytes).expect("a whole response");
    assert_eq!(resp.status, 413);
    assert_one_line_reason(
        &String::from_utf8_lossy(&resp.body),
        resp.header("content-type"),
    );

    // 413 for a chunked body that turns out too large while being read.
    let mut stream = TcpStream::connect(server.http).unwrap();
    stream.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
    let mut req =
        b"POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n800\r\n".to_vec();
    req.extend_from_slice(&[b'z'; 0x800]);
    req.extend_from_slice(b"\r\n");
    stream.write_all(&req).unwrap();
    let resp = read_http1(&mut stream, &mut Vec::new());
    assert_eq!(resp.status, 413);
    assert_one_line_reason(
        &String::from_utf8_lossy(&resp.body),
        resp.header("content-type"),
    );
    drop(stream);

    // Still healthy, and everything was counted.
    curl_echo(&mut easy, &u("/echo"), b"fine");
    let snap = server.wait_stats(IO_TIMEOUT, "counted", |s| {
        s.rejected(Reject::HttpPayloadTooLarge) == 2
    });
    assert_rejects(
        &snap,
        &[
            (Reject::HttpNotFound, 2),
            (Reject::HttpMethodNotAllowed, 3),
            (Reject::HttpBadRequest, 8),
            (Reject::HttpPayloadTooLarge, 2),
        ],
    );
    assert_eq!(snap.http.requests, 18);
}

/// `/stats` must equal exactly what the test did: TCP and HTTP requests, connections,
/// TCP bytes both ways, and every kind of rejection.
#[test]
fn stats_match_the_traffic_sent() {
    let mut config = common::config();
    config.max_frame = 1_024;
    config.max_delay = Duration::from_millis(100);
    let server = TestServer::start(config);

    // TCP: 6 good calls on one connection, 2 refused calls and 1 good on another, and a
    // zero-length frame on a third.
    let mut a = FrameClient::connect(server.tcp);
    for seq in 0..5 {
        a.check_echo(seq, &payload_for(seq, 100 * seq as usize));
    }
    let req = common::pattern_req(5, 900);
    common::assert_reply(&req, &a.call(&req));
    let mut b = FrameClient::connect(server.tcp);
    assert_eq!(b.call(&common::pattern_req(6, 2_000)).status, 1);
    let slow = Request {
        delay_us: 1_000_000,
        ..echo_req(7, b"slow")
    };
    assert_eq!(b.call(&slow).status, 2);
    b.check_echo(8, b"ok");
    let mut c = FrameClient::connect(server.tcp);
    c.send_raw(&[0, 0, 0, 0]);
    c.expect_closed(IO_TIMEOUT);
    let tcp_in = a.sent + b.sent + c.sent;
    let tcp_out = a.received + b.received + c.received;
    drop((a, b, c));

    // HTTP: 7 requests on one kept-alive curl connection, one 413 on a raw connection.
    let mut easy = curl::easy::Easy::new();
    let u = |p: &str| url(server.http, p);
    for body in [&b"one"[..], &[2; 100], &[3; 1_000]] {
        curl_echo(&mut easy, &u("/echo"), body);
    }
    assert_eq!(
        curl_call(&mut easy, "GET", &u("/echo?reply_len=500&seq=3"), None, &[]).status,
        200
    );
    assert_eq!(
        curl_call(&mut easy, "GET", &u("/nope"), None, &[]).status,
        404
    );
    assert_eq!(
        curl_call(&mut easy, "PUT", &u("/echo"), Some(b"x"), &[]).status,
        405
    );
    assert_eq!(
        curl_call(&mut easy, "GET", &u("/echo?reply_len=abc"), None, &[]).status,
        400
    );
    drop(easy);
    let raw = b"POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 5000\r\n\r\n";
    let bytes = raw_http(server.http, raw);
    assert_eq!(common::parse_http1(&bytes).unwrap().0.status, 413);

    server.wait_stats(IO_TIMEOUT, "all closed", |s| {
        s.tcp.connections_open == 0 && s.http.connections_open == 0
    });
    let snap = http_stats(server.http);
    assert_eq!(snap.tcp.connections_total, 3);
    assert_eq!(snap.tcp.connections_open, 0);
    assert_eq!(snap.tcp.requests, 9);
    assert_eq!(
        snap.tcp.bytes_in, tcp_in,
        "tcp bytes_in != bytes of the frames sent"
    );
    assert_eq!(
        snap.tcp.bytes_out, tcp_out,
        "tcp bytes_out != bytes of the replies"
    );
    assert_eq!(snap.http.connections_total, 3, "curl, raw 413, /stats");
    assert_eq!(
        snap.http.connections_open, 1,
        "the /stats connection itself"
    );
    assert_eq!(snap.http.requests, 9, "7 curl, 1 raw, 1 /stats");
    assert!(snap.http.bytes_in >= raw.len() as u64 && snap.http.bytes_out > 1_600);
    assert_eq!(snap.dns, Default::default());
    assert_rejects(
        &snap,
        &[
            (Reject::ZeroLengthFrame, 1),
            (Reject::ReplyTooLarge, 1),
            (Reject::DelayTooLong, 1),
            (Reject::HttpNotFound, 1),
            (Reject::HttpMethodNotAllowed, 1),
            (Reject::HttpBadRequest, 1),
            (Reject::HttpPayloadTooLarge, 1),
        ],
    );
    // The in-process snapshot agrees with the JSON one.
    let live = server.stats();
    assert_eq!(live.tcp, snap.tcp);
    assert_eq!(live.rejected, snap.rejected);
    assert_eq!(live.http.requests, snap.http.requests);
}

#[test]
fn http2_prior_knowledge_on_the_same_port() {
    let server = TestServer::start_default();
    let addr = server.http;
    let snap: StatsSnapshot = server.block_on(async {
        let sender = hyper_http2(addr).await;
        // 50 concurrent streams on one connection.
        let mut tasks = tokio::task::JoinSet::new();
        for seq in 0..50u64 {
            let mut sender = sender.clone();
            tasks.spawn(async move {
                if seq % 2 == 0 {
                    let body = payload_for(seq, 2_000);
                    let mut req = hyper_req(Method::POST, addr, "/echo", &body);
                    req.headers_mut()
                        .insert("x-rpcbench-seq", seq.to_string().parse().unwrap());
                    let resp = sender.send_request(req).await.expect("h2 request");
                    assert_eq!(resp.version(), hyper::Version::HTTP_2);
                    let (status, headers, got) = hyper_collect(resp).await;
                    assert_eq!(status, StatusCode::OK);
                    assert_eq!(got.as_ref(), body.as_slice());
                    assert_eq!(headers["x-rpcbench-seq"].to_str().unwrap(), seq.to_string());
                    assert!(headers.contains_key("server-timing"));
                } else {
                    let path = format!("/echo?reply_len=70000&seq={seq}&delay_us=1000");
                    let req = hyper_req(Method::GET, addr, &path, b"");
                    let resp = sender.send_request(req).await.expect("h2 request");
                    let (status, _, got) = hyper_collect(resp).await;
                    assert_eq!(status, StatusCode::OK);
                    assert!(got.len() == 70_000 && wire::is_pattern(seq, &got));
                }
            });
        }
        while let Some(res) = tasks.join_next().await {
            res.expect("an h2 request failed");
        }
        let mut sender = sender;
        let req = hyper_req(Method::GET, addr, "/stats", b"");
        let (status, _, got) = hyper_collect(sender.send_request(req).await.unwrap()).await;
        assert_eq!(status, StatusCode::OK);
        serde_json::from_slice(&got).expect("/stats JSON")
    });
    assert_eq!(snap.http.connections_total, 1);
    assert_eq!(snap.http.requests, 51);
    assert_rejects(&snap, &[]);
}

/// The idle timeout of the idle tests: short, so they are quick.
const IDLE: Duration = Duration::from_millis(300);
/// How long an idle close may take: over ten times the timeout (closed 1 to 1.1 timeouts
/// after the last byte).
const IDLE_CLOSE_WITHIN: Duration = Duration::from_secs(5);
/// The lower bound of an idle close, which rests on physics: never before the timeout
/// (less a little for the two clocks, the test's and the server's).
const IDLE_CLOSE_AFTER: Duration = Duration::from_millis(250);

#[test]
fn http_keep_alive_connection_is_closed_after_idle_timeout() {
    let mut config = common::config();
    config.idle_timeout = IDLE;
    let server = TestServer::start(config);
    let mut stream = TcpStream::connect(server.http).unwrap();
    stream.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
    let mut buf = Vec::new();

    // A request slower than the idle timeout is not cut off.
    stream
        .write_all(b"GET /echo?reply_len=10&seq=1&delay_us=500000 HTTP/1.1\r\nHost: t\r\n\r\n")
        .unwrap();
    let resp = read_http1(&mut stream, &mut buf);
    assert_eq!(resp.status, 200);
    assert!(wire::is_pattern(1, &resp.body) && resp.body.len() == 10);

    // Regular use more often than the timeout keeps it open: a request every tenth of the
    // timeout, so only a pause ten times longer than expected would let it close, for
    // twice the timeout.
    let mut requests = 1;
    let start = Instant::now();
    while start.elapsed() < 2 * IDLE {
        std::thread::sleep(IDLE / 10);
        stream
            .write_all(b"GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n")
            .unwrap();
        assert_eq!(read_http1(&mut stream, &mut buf).status, 200);
        requests += 1;
    }

    // Then silence: closed after about the timeout.
    let took = common::expect_closed(&mut stream, IDLE_CLOSE_WITHIN);
    assert!(took >= IDLE_CLOSE_AFTER, "closed after only {took:?}");
    let snap = server.wait_stats(IO_TIMEOUT, "idle close", |s| s.http.connections_open == 0);
    assert_rejects(&snap, &[(Reject::IdleTimeout, 1)]);
    assert_eq!(snap.http.requests, requests);

    curl_echo(
        &mut curl::easy::Easy::new(),
        &url(server.http, "/echo"),
        b"after",
    );
}

/// A connection that never sends a byte is closed after the idle timeout and counted once,
/// as an idle timeout, not also as a protocol error.
#[test]
fn http_silent_connection_is_closed_after_idle_timeout() {
    let mut config = common::config();
    config.idle_timeout = IDLE;
    let server = TestServer::start(config);
    let mut stream = TcpStream::connect(server.http).unwrap();
    let took = common::expect_closed(&mut stream, IDLE_CLOSE_WITHIN);
    assert!(took >= IDLE_CLOSE_AFTER, "closed after only {took:?}");
    let snap = server.wait_stats(IO_TIMEOUT, "idle close", |s| s.http.connections_open == 0);
    assert_rejects(&snap, &[(Reject::IdleTimeout, 1)]);
}

/// The delay of the request the HTTP/2 test cancels: the longest the default max delay
/// allows, so that a server still running the cancelled request keeps the connection busy
/// for twice [`IDLE_CLOSE_WITHIN`], and cannot pass by finishing it in time.
const CANCELLED_DELAY_US: u32 = 10_000_000;

/// Opens an HTTP/2 connection, makes one request (cancelled after 50 ms when `cancel`,
/// else completed), then stays silent; returns how long the server took to end the
/// connection after that, or `None` if it was still open after [`IDLE_CLOSE_WITHIN`].
async fn h2_time_to_idle_close(addr: SocketAddr, cancel: bool) -> Option<Duration> {
    let stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let (mut sender, conn) = hyper::client::conn::http2::handshake(
        hyper_util::rt::TokioExecutor::new(),
        hyper_util::rt::TokioIo::new(stream),
    )
    .await
    .unwrap();
    let conn = tokio::spawn(conn);
    if cancel {
        let path = format!("/echo?reply_len=10&delay_us={CANCELLED_DELAY_US}");
        let req = hyper_req(Method::GET, addr, &path, b"");
        // Give up on the reply after 50 ms: dropping the future resets the stream.
        let gave_up = tokio::time::timeout(Duration::from_millis(50), sender.send_request(req))
            .await
            .is_err();
        assert!(gave_up, "a 10 s delay answered within 50 ms");
    } else {
        let req = hyper_req(Method::GET, addr, "/echo?reply_len=10&delay_us=50000", b"");
        let (status, _, _) = hyper_collect(sender.send_request(req).await.unwrap()).await;
        assert_eq!(status, StatusCode::OK);
    }
    let start = Instant::now();
    // Keep the client side open; only the server may end the connection.
    let ended = tokio::time::timeout(IDLE_CLOSE_WITHIN, conn).await;
    drop(sender);
    ended.ok().map(|_| start.elapsed())
}

/// An HTTP/2 client that cancels a slow request (RST_STREAM) and then goes quiet must be
/// closed after the idle timeout, like one whose request completed.
#[test]
fn http2_cancelled_request_does_not_disable_idle_timeout() {
    let mut config = common::config();
    config.idle_timeout = IDLE;
    let server = TestServer::start(config);
    let addr = server.http;
    let (completed, cancelled) = server.block_on(async {
        tokio::join!(
            h2_time_to_idle_close(addr, false),
            h2_time_to_idle_close(addr, true)
        )
    });
    let snap = server.stats();
    assert!(
        completed.is_some(),
        "an idle HTTP/2 connection was still open after {IDLE_CLOSE_WITHIN:?}"
    );
    assert!(
        cancelled.is_some(),
        "connection still open {IDLE_CLOSE_WITHIN:?} after its only request was cancelled \
         (idle timeout {IDLE:?}), while an identical one whose request completed closed \
         after {completed:?}; idle_timeout counted {} times",
        snap.rejected(Reject::IdleTimeout)
    );
    assert_eq!(snap.rejected(Reject::IdleTimeout), 2);
}

/// SIGTERM while an HTTP request with a delay is in flight: the reply arrives whole, then
/// the process prints its totals and exits 0.
#[test]
fn sigterm_lets_an_in_flight_http_request_finish() {
    let mut proc = EchoProcess::spawn(&[]);
    let target = url(proc.http, "/echo?reply_len=5000&seq=9&delay_us=500000");
    let start = Instant::now();
    let call = std::thread::spawn(move || {
        let mut easy = curl::easy::Easy::new();
        curl_call(&mut easy, "GET", &target, None, &[])
    });
    std::thread::sleep(Duration::from_millis(150));
    proc.signal(nix::sys::signal::Signal::SIGTERM);
    let reply = call.join().expect("the in-flight request failed");
    assert!(start.elapsed() >= Duration::from_millis(500));
    assert_eq!(reply.status, 200);
    assert!(reply.body.len() == 5_000 && wire::is_pattern(9, &reply.body));

    let totals = proc.exit_totals();
    assert_eq!(totals.http.requests, 1);
    assert_eq!(totals.http.connections_total, 1);
    assert_eq!(totals.http.connections_open, 0);
    assert_rejects(&totals, &[]);
}

#[test]
fn http_and_tcp_share_one_server_process() {
    // The real binary serves both listeners and /stats sees both.
    let proc = EchoProcess::spawn(&["--threads", "1"]);
    let mut c = FrameClient::connect(proc.tcp);
    c.check_echo(1, b"tcp");
    curl_echo(
        &mut curl::easy::Easy::new(),
        &url(proc.http, "/echo"),
        b"http",
    );
    let snap = http_stats(proc.http);
    assert_eq!(snap.tcp.requests, 1);
    assert_eq!(snap.tcp.bytes_in, c.sent);
    assert_eq!(snap.http.requests, 2);
}

// ---------------------------------------------------------------------------------------
// GET /metrics: the Prometheus text format
// ---------------------------------------------------------------------------------------

/// One metric family as a strict reader of the text format 0.0.4 sees it.
#[derive(Debug, Default)]
struct Family {
    help: String,
    kind: String,
    /// Samples by their labels (sorted `name=value` pairs).
    samples: std::collections::BTreeMap<Vec<(String, String)>, f64>,
}

/// A metric or label name is `[a-zA-Z_:][a-zA-Z0-9_:]*` (labels: no `:`).
fn valid_name(name: &str, colon: bool) -> bool {
    let ok = |c: char, first: bool| {
        c.is_ascii_alphabetic() || c == '_' || (colon && c == ':') || (!first && c.is_ascii_digit())
    };
    let mut chars = name.chars();
    chars.next().is_some_and(|c| ok(c, true)) && chars.all(|c| ok(c, false))
}

/// Parses `k="v",k2="v2"` (the inside of the braces), unescaping `\\`, `\"` and `\n`.
fn parse_labels(text: &str) -> Result<Vec<(String, String)>, String> {
    let mut labels = Vec::new();
    let mut rest = text;
    while !rest.is_empty() {
        let (name, after) = rest
            .split_once("=\"")
            .ok_or(format!("no =\" in {rest:?}"))?;
        if !valid_name(name, false) {
            return Err(format!("bad label name {name:?}"));
        }
        let mut value = String::new();
        let mut chars = after.char_indices();
        let end = loop {
            match chars.next() {
                Some((i, '"')) => break i,
                Some((_, '\\')) => match chars.next() {
                    Some((_, '\\')) => value.push('\\'),
                    Some((_, '"')) => value.push('"'),
                    Some((_, 'n')) => value.push('\n'),
                    other => return Err(format!("bad escape {other:?} in {text:?}")),
                },
                Some((_, c)) => value.push(c),
                None => return Err(format!("unterminated label value in {text:?}")),
            }
        };
        labels.push((name.to_string(), value));
        rest = &after[end + 1..];
        rest = match rest.strip_prefix(',') {
            Some(r) => r,
            None if rest.is_empty() => rest,
            None => return Err(format!("junk after a label value: {rest:?}")),
        };
    }
    labels.sort();
    if labels.windows(2).any(|w| w[0].0 == w[1].0) {
        return Err(format!("a label twice in {text:?}"));
    }
    Ok(labels)
}

/// Reads the text format strictly: every family has `# HELP` then `# TYPE` then its
/// samples, contiguous; names are valid; counters end in `_total` and are not negative;
/// no label set repeats; values are floats; no timestamps, no blank lines.
fn parse_exposition(text: &str) -> Result<std::collections::BTreeMap<String, Family>, String> {
    let mut families = std::collections::BTreeMap::<String, Family>::new();
    let mut current: Option<String> = None;
    if !text.ends_with('\n') {
        return Err("the text does not end with a line feed".into());
    }
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let (name, help) = rest.split_once(' ').ok_or(format!("bad HELP: {line:?}"))?;
            if !valid_name(name, true) || families.contains_key(name) {
                return Err(format!("bad or repeated family {name:?}"));
            }
            families.insert(
                name.to_string(),
                Family {
                    help: help.to_string(),
                    ..Family::default()
                },
            );
            current = Some(name.to_string());
        } else if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').ok_or(format!("bad TYPE: {line:?}"))?;
            let family = families
                .get_mut(name)
                .filter(|f| f.kind.is_empty() && current.as_deref() == Some(name))
                .ok_or(format!("TYPE of {name} not right after its HELP"))?;
            if !["counter", "gauge", "histogram", "summary", "untyped"].contains(&kind) {
                return Err(format!("unknown type {kind:?}"));
            }
            if kind == "counter" && !name.ends_with("_total") {
                return Err(format!("counter {name} does not end in _total"));
            }
            family.kind = kind.to_string();
        } else if line.starts_with('#') || line.trim().is_empty() {
            return Err(format!("unexpected line {line:?}"));
        } else {
            let (series, value) = line.rsplit_once(' ').ok_or(format!("no value: {line:?}"))?;
            let (name, labels) = match series.split_once('{') {
                Some((name, rest)) => (
                    name,
                    parse_labels(rest.strip_suffix('}').ok_or(format!("no }}: {line:?}"))?)?,
                ),
                None => (series, Vec::new()),
            };
            let family = current
                .as_ref()
                .filter(|c| c.as_str() == name)
                .and_then(|c| families.get_mut(c))
                .filter(|f| !f.kind.is_empty())
                .ok_or(format!(
                    "sample {name} outside its family (HELP, TYPE first)"
                ))?;
            let value: f64 = match value {
                "+Inf" => f64::INFINITY,
                "-Inf" => f64::NEG_INFINITY,
                v => v.parse().map_err(|e| format!("value {v:?}: {e}"))?,
            };
            if family.kind == "counter" && (value.is_nan() || value < 0.0) {
                return Err(format!("counter {name} is {value}"));
            }
            if family.samples.insert(labels, value).is_some() {
                return Err(format!("a sample repeated: {line:?}"));
            }
        }
    }
    match families.iter().find(|(_, f)| f.samples.is_empty()) {
        Some((name, _)) => Err(format!("family {name} has no samples")),
        None => Ok(families),
    }
}

/// The value of `name` with `labels` (as `[("protocol", "tcp")]`), or a panic naming it.
fn sample(
    families: &std::collections::BTreeMap<String, Family>,
    name: &str,
    labels: &[(&str, &str)],
) -> f64 {
    let mut key: Vec<(String, String)> = labels
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    key.sort();
    families
        .get(name)
        .and_then(|f| f.samples.get(&key))
        .copied()
        .unwrap_or_else(|| panic!("no sample {name}{labels:?} in /metrics"))
}

/// Sends one `A` query for `name` to a DNS responder and waits for an answer.
fn dns_query(addr: SocketAddr, name: &str) {
    let socket = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    socket.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
    // Header: id, flags (recursion desired), one question, no other records.
    let mut query = vec![0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0];
    for label in name.split('.') {
        query.push(label.len() as u8);
        query.extend_from_slice(label.as_bytes());
    }
    // End of name, type A, class IN.
    query.extend_from_slice(&[0, 0, 1, 0, 1]);
    socket.send_to(&query, addr).unwrap();
    let mut answer = [0u8; 512];
    let (n, _) = socket.recv_from(&mut answer).expect("no DNS answer");
    assert!(n > 12 && answer[..2] == [0x12, 0x34], "bad DNS answer");
}

/// A server with traffic of every kind on it: TCP echoes and an oversized frame, HTTP
/// requests and a 404, one DNS query; returns once every connection has closed.
fn server_with_traffic() -> (TestServer, SocketAddr) {
    let mut config = common::config();
    config.dns = Some(rpcbench::server::dns::DnsConfig::default());
    let server = TestServer::start(config);
    let dns = server.dns_addr().expect("the dns responder is on");
    let mut c = FrameClient::connect(server.tcp);
    for seq in 0..3 {
        c.check_echo(seq, &payload_for(seq, 50));
    }
    drop(c);
    let mut bad = FrameClient::connect(server.tcp);
    bad.send_raw(&0xFFFF_FFF0u32.to_be_bytes());
    bad.expect_closed(IO_TIMEOUT);
    let mut easy = curl::easy::Easy::new();
    curl_echo(&mut easy, &url(server.http, "/echo"), b"metrics");
    let missing = curl_call(&mut easy, "GET", &url(server.http, "/nope"), None, &[]);
    assert_eq!(missing.status, 404);
    drop(easy);
    dns_query(dns, rpcbench::server::dns::DEFAULT_DNS_NAME);
    server.wait_stats(IO_TIMEOUT, "every connection closed", |s| {
        s.tcp.connections_open == 0 && s.http.connections_open == 0 && s.dns_answered == 1
    });
    (server, dns)
}

/// `GET /metrics` on a fresh connection: the reply's body, after checking its type.
fn scrape(http: SocketAddr) -> String {
    let mut easy = curl::easy::Easy::new();
    let reply = curl_call(&mut easy, "GET", &url(http, "/metrics"), None, &[]);
    assert_eq!(reply.status, 200, "{}", reply.text());
    assert_eq!(
        reply.header("content-type"),
        Some("text/plain; version=0.0.4; charset=utf-8")
    );
    reply.text()
}

#[test]
fn metrics_parse_and_match_stats() {
    let (server, _dns) = server_with_traffic();
    let before = server.stats();
    let text = scrape(server.http);
    let after = server.stats();
    let m = parse_exposition(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    // Every family is documented in the README or docs/, by name.
    let docs = common::docs_text();
    for (name, family) in &m {
        assert!(
            docs.contains(&format!("`{name}`")),
            "{name} is not in the docs"
        );
        assert!(!family.help.is_empty(), "{name} has no help");
    }
    let protos = [
        ("tcp", &before.tcp),
        ("http", &before.http),
        ("dns", &before.dns),
    ];
    for (proto, p) in protos {
        let l = [("protocol", proto)];
        // The scrape is itself an HTTP request on an HTTP connection, counted before the
        // text is written; nothing else moved between the snapshot and the scrape.
        let own = u64::from(proto == "http");
        assert_eq!(
            sample(&m, "rpcbench_echo_requests_total", &l),
            (p.requests + own) as f64
        );
        if proto != "http" {
            assert_eq!(
                sample(&m, "rpcbench_echo_received_bytes_total", &l),
                p.bytes_in as f64
            );
            assert_eq!(
                sample(&m, "rpcbench_echo_sent_bytes_total", &l),
                p.bytes_out as f64
            );
        }
        if proto != "dns" {
            assert_eq!(
                sample(&m, "rpcbench_echo_connections_total", &l),
                (p.connections_total + own) as f64
            );
            assert_eq!(
                sample(&m, "rpcbench_echo_connections_open", &l),
                (p.connections_open + own) as f64
            );
        }
    }
    // HTTP bytes: at least the snapshot's, at most the next one's (which has the reply).
    let http_in = sample(
        &m,
        "rpcbench_echo_received_bytes_total",
        &[("protocol", "http")],
    );
    assert!(before.http.bytes_in as f64 <= http_in && http_in <= after.http.bytes_in as f64);
    assert_eq!(
        sample(
            &m,
            "rpcbench_echo_sent_bytes_total",
            &[("protocol", "http")]
        ),
        before.http.bytes_out as f64
    );
    for kind in Reject::ALL {
        assert_eq!(
            sample(&m, "rpcbench_echo_rejected_total", &[("kind", kind.name())]),
            before.rejected(kind) as f64,
            "{}",
            kind.name()
        );
    }
    assert_eq!(before.rejected(Reject::OversizedFrame), 1);
    assert_eq!(before.rejected(Reject::HttpNotFound), 1);
    let h2 = &before.http2;
    for (name, value) in [
        ("http2_connections_total", h2.connections_total),
        ("http2_streams_total", h2.streams_total),
        ("http2_streams_open", h2.streams_open),
        (
            "http2_streams_max_per_connection",
            h2.streams_max_per_connection,
        ),
    ] {
        assert_eq!(
            sample(&m, &format!("rpcbench_echo_{name}"), &[]),
            value as f64,
            "{name}"
        );
    }
    assert_eq!(sample(&m, "rpcbench_echo_dns_answered_total", &[]), 1.0);
    assert_eq!(sample(&m, "rpcbench_echo_dns_dropped_total", &[]), 0.0);
    assert_eq!(sample(&m, "rpcbench_echo_dns_delayed_total", &[]), 0.0);
    assert_eq!(
        sample(&m, "rpcbench_echo_max_connections", &[]),
        before.settings.max_connections as f64
    );
    assert_eq!(
        sample(
            &m,
            "rpcbench_echo_info",
            &[("version", env!("CARGO_PKG_VERSION"))]
        ),
        1.0
    );
    let between = |name: &str, lo: f64, hi: f64| {
        let v = sample(&m, name, &[]);
        assert!(lo <= v && v <= hi, "{name} = {v}, not within {lo}..={hi}");
    };
    between(
        "rpcbench_echo_uptime_seconds",
        before.uptime_s,
        after.uptime_s,
    );
    let cpu = |s: &StatsSnapshot| s.process.cpu_user_s + s.process.cpu_system_s;
    between("process_cpu_seconds_total", cpu(&before), cpu(&after));
    // The server is in this process: its memory, threads and files are the test's.
    assert_eq!(
        sample(&m, "process_start_time_seconds", &[]),
        before.process.start_time_s
    );
    assert!(before.process.start_time_s > 0.0 && before.process.rss_bytes > 0);
    assert!(sample(&m, "process_resident_memory_bytes", &[]) > 0.0);
    assert!(sample(&m, "process_threads", &[]) >= 1.0);
    assert!(sample(&m, "process_open_fds", &[]) >= 3.0);
    // /stats carries the same process figures, as JSON.
    let stats = http_stats(server.http);
    assert!(stats.process.threads >= 1 && stats.process.rss_bytes > 0);
    assert!(stats.process.cpu_user_s + stats.process.cpu_system_s >= cpu(&before));
}

#[test]
fn metrics_take_get_only() {
    let server = TestServer::start_default();
    let mut easy = curl::easy::Easy::new();
    let reply = curl_call(
        &mut easy,
        "POST",
        &url(server.http, "/metrics"),
        Some(b"x"),
        &[],
    );
    check_error(&reply, 405);
    assert_eq!(reply.header("allow"), Some("GET"));
}

/// Where the Python check writes what `prometheus_client` read: `name labels value` per
/// sample, labels as sorted `k=v` joined by `,`.
const PROMETHEUS_CLIENT_CHECK: &str = r#"
import sys
from prometheus_client.parser import text_string_to_metric_families
for family in text_string_to_metric_families(sys.stdin.read()):
    for s in family.samples:
        labels = ",".join(f"{k}={v}" for k, v in sorted(s.labels.items()))
        print(s.name, labels, repr(float(s.value)))
"#;

/// The official Python client's parser reads the same samples as the strict reader here.
#[test]
#[ignore = "needs python3 with prometheus_client (pip install prometheus-client)"]
fn metrics_parse_with_prometheus_client() {
    use std::process::{Command, Stdio};
    let (server, _dns) = server_with_traffic();
    let text = scrape(server.http);
    let ours = parse_exposition(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    let mut child = Command::new("python3")
        .args(["-c", PROMETHEUS_CLIENT_CHECK])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("cannot run python3");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "prometheus_client refused the text:\n{text}"
    );
    let theirs: Vec<String> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(String::from)
        .collect();
    let mut expected = Vec::new();
    for (name, family) in &ours {
        for (labels, value) in &family.samples {
            let labels: Vec<String> = labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
            expected.push((name.clone(), labels.join(","), *value));
        }
    }
    assert_eq!(theirs.len(), expected.len(), "{theirs:#?}");
    for line in &theirs {
        let mut words = line.splitn(3, ' ');
        let (name, labels, value) = (
            words.next().unwrap(),
            words.next().unwrap(),
            words.next().unwrap(),
        );
        let value: f64 = value.parse().unwrap();
        assert!(
            expected
                .iter()
                .any(|(n, l, v)| n == name && l == labels && *v == value),
            "prometheus_client read {line:?}, which the strict reader did not"
        );
    }
}

/// A child process killed (by its PID) and reaped when dropped, with a directory of its own
/// removed then too.
struct Child {
    child: std::process::Child,
    dir: std::path::PathBuf,
}

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// How long a real Prometheus may take to start and scrape twice: far over its 1 s
/// scrape interval.
const PROMETHEUS_WITHIN: Duration = Duration::from_secs(60);

/// A real Prometheus (Debian's `prometheus`) on loopback scrapes `/metrics` and answers a
/// query with the server's own count.
#[test]
#[ignore = "needs root and the prometheus package (apt-get install prometheus)"]
fn a_real_prometheus_scrapes_the_server() {
    use std::process::{Command, Stdio};
    let server = TestServer::start_default();
    let mut c = FrameClient::connect(server.tcp);
    for seq in 0..3 {
        c.check_echo(seq, b"scraped");
    }
    let dir = std::env::temp_dir().join(format!("rpcbench-prometheus-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let config = dir.join("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: rpcbench-echo\n    \
             static_configs:\n      - targets: ['{}']\n",
            server.http
        ),
    )
    .unwrap();
    // A free loopback port for Prometheus's own web server.
    let web = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let child = Command::new("prometheus")
        .arg(format!("--config.file={}", config.display()))
        .arg(format!(
            "--storage.tsdb.path={}",
            dir.join("data").display()
        ))
        .arg(format!("--web.listen-address={web}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("cannot start prometheus");
    let _prometheus = Child { child, dir };
    let query = format!(
        "http://{web}/api/v1/query?query=rpcbench_echo_requests_total%7Bprotocol%3D%22tcp%22%7D"
    );
    let deadline = Instant::now() + PROMETHEUS_WITHIN;
    let mut easy = curl::easy::Easy::new();
    let last = loop {
        let answer = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            curl_call(&mut easy, "GET", &query, None, &[])
        }));
        let text = answer.map(|r| r.text()).unwrap_or_default();
        // The vector result holds [time, "value"]; the value is the server's count.
        if text.contains(r#""value":["#) && text.contains(r#","3"]"#) {
            break text;
        }
        assert!(
            Instant::now() < deadline,
            "no scrape within {PROMETHEUS_WITHIN:?}: {text}"
        );
        std::thread::sleep(Duration::from_millis(250));
    };
    assert!(last.contains(r#""job":"rpcbench-echo""#), "{last}");
    assert_eq!(server.stats().tcp.requests, 3);
}
