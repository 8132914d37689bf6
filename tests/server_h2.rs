//! HTTP/2 abuse on the HTTP port, with hand-written frames ([`common::h2raw`]): a stream
//! reset in the middle of its body, and a flood of streams opened and reset at once
//! (the "rapid reset" attack, CVE-2023-44487). Each is counted, and a healthy client is
//! served all along.

mod common;

use common::h2raw::{self, CANCEL, DATA, END_HEADERS, GOAWAY, HEADERS, RST_STREAM, RawH2};
use common::{IO_TIMEOUT, TestServer};
use rpcbench::server::stats::Reject;

/// A stream whose body is cut short by RST_STREAM is counted as reset, its connection
/// keeps serving: the next stream on it gets its echo.
#[test]
fn a_stream_reset_mid_body_is_counted_and_the_connection_goes_on() {
    let server = TestServer::start_default();
    let mut h2 = RawH2::connect(server.http);
    let mut out = Vec::new();
    let block = h2raw::request_block("POST", "/echo", &[("content-length", "1000")]);
    h2raw::put_frame(&mut out, HEADERS, END_HEADERS, 1, &block);
    h2raw::put_frame(&mut out, DATA, 0, 1, &[7u8; 100]);
    h2.send(&out).unwrap();
    // The server has the stream open, waiting for the other 900 bytes.
    server.wait_stats(IO_TIMEOUT, "stream 1 open", |s| s.http2.streams_open == 1);
    out.clear();
    h2raw::put_frame(&mut out, RST_STREAM, 0, 1, &CANCEL.to_be_bytes());
    h2.send(&out).unwrap();
    h2.post(3, "/echo", b"still served").unwrap();
    assert_eq!(
        h2.body_of(3, IO_TIMEOUT).as_deref(),
        Some(&b"still served"[..])
    );
    let snap = server.wait_stats(IO_TIMEOUT, "stream 1 closed", |s| {
        s.http2.streams_open == 0 && s.rejected(Reject::Http2StreamReset) == 1
    });
    assert_eq!(snap.http2.streams_total, 2);
    assert_eq!(snap.http2.connections_total, 1);
    assert_eq!(
        snap.http.connections_open, 1,
        "the connection is still open"
    );
    assert_eq!(snap.rejected(Reject::HttpConnectionError), 0);
}

/// Streams opened and reset at once by the thousand, as fast as the socket takes them:
/// the server ends that connection (hyper's h2 answers GOAWAY when a client resets more
/// streams than it may), counts it, leaks no stream, and keeps serving a client beside
/// it, before, during and after.
#[test]
fn a_rapid_reset_flood_is_cut_off_and_healthy_clients_are_served() {
    const STREAMS: u32 = 20_000;
    let server = TestServer::start_default();
    let mut healthy = RawH2::connect(server.http);
    healthy.post(1, "/echo", b"before").unwrap();
    assert_eq!(
        healthy.body_of(1, IO_TIMEOUT).as_deref(),
        Some(&b"before"[..])
    );

    let mut flood = Vec::new();
    let block = h2raw::request_block("GET", "/echo?reply_len=10&delay_us=100000", &[]);
    for i in 0..STREAMS {
        let id = 2 * i + 1;
        h2raw::put_frame(
            &mut flood,
            HEADERS,
            END_HEADERS | h2raw::END_STREAM,
            id,
            &block,
        );
        h2raw::put_frame(&mut flood, RST_STREAM, 0, id, &CANCEL.to_be_bytes());
    }
    let mut attacker = RawH2::connect(server.http);
    // The server may close before all of it is written: the write then fails, which is
    // the point.
    let sent = attacker.send(&flood);
    healthy.post(3, "/echo", b"during").unwrap();
    assert_eq!(
        healthy.body_of(3, IO_TIMEOUT).as_deref(),
        Some(&b"during"[..])
    );
    let goaway = attacker.frame_until(IO_TIMEOUT, |f| f.kind == GOAWAY);
    let goaway =
        goaway.unwrap_or_else(|| panic!("no GOAWAY for {STREAMS} reset streams (write: {sent:?})"));
    // ENHANCE_YOUR_CALM (0xb): the client reset too many streams.
    assert_eq!(goaway.error_code(), Some(0xb), "{goaway:?}");
    assert!(
        attacker.closed_within(IO_TIMEOUT),
        "the flood's connection is still open after GOAWAY"
    );

    let snap = server.wait_stats(IO_TIMEOUT, "the flood's connection ended", |s| {
        s.http.connections_open == 1 && s.http2.streams_open == 0
    });
    eprintln!(
        "rapid reset: {} of {STREAMS} streams reached the server before GOAWAY; {} counted reset",
        snap.http2.streams_total - 1,
        snap.rejected(Reject::Http2StreamReset)
    );
    assert_eq!(snap.rejected(Reject::HttpConnectionError), 1, "{snap:?}");
    assert!(
        snap.http2.streams_total < u64::from(STREAMS),
        "every flooded stream was served: {:?}",
        snap.http2
    );
    healthy.post(5, "/echo", b"after").unwrap();
    assert_eq!(
        healthy.body_of(5, IO_TIMEOUT).as_deref(),
        Some(&b"after"[..])
    );
    assert_eq!(
        snap.http2.streams_open, 0,
        "reset streams are not left open"
    );
}
