//! The preflight's unit tests: each listener's probe against what can answer it.

use super::exchange::*;
use super::*;
use crate::wire::Response;

#[test]
fn the_command_binds_every_address_for_another_host_and_loopback_for_this_one() {
    let listeners = [
        (
            Listener::Http,
            Address::Socket(([10, 0, 0, 2], 7080).into()),
        ),
        (Listener::Tcp, Address::Socket(([10, 0, 0, 2], 7001).into())),
    ];
    assert_eq!(
        StartCommand::new([10, 0, 0, 2].into(), &listeners).to_string(),
        "rpcbench-echo --tcp 0.0.0.0:7001 --http 0.0.0.0:7080"
    );
    assert_eq!(
        StartCommand::new([127, 0, 0, 1].into(), &listeners).to_string(),
        "rpcbench-echo --tcp 127.0.0.1:7001 --http 127.0.0.1:7080"
    );
    assert_eq!(
        StartCommand::new("fd00::2".parse().unwrap(), &listeners[1..]).to_string(),
        "rpcbench-echo --tcp [::]:7001"
    );
}

#[test]
fn replies_that_are_not_ours_are_told_apart() {
    assert_eq!(not_ours(b"\x15\x03\x03\x00\x02"), Seen::NotEcho(Reply::Tls));
    assert_eq!(
        not_ours(b"HTTP/1.1 400 Bad Request\r\n"),
        Seen::NotEcho(Reply::Http { status: 400 })
    );
    assert_eq!(
        not_ours(b"SSH-2.0-OpenSSH_9.2p1 Debian"),
        Seen::NotEcho(Reply::Bytes(b"SSH-2.0-OpenSSH_".to_vec()))
    );
}

/// A server that echoes bytes back sends the probe request itself, which does not
/// decode as the reply asked for: the pattern request is what tells it apart.
#[test]
fn an_echo_of_the_probe_is_not_its_reply() {
    let request = postcard::to_allocvec(&probe_request()).unwrap();
    let as_reply = wire::decode_body::<Response>(&request);
    assert!(as_reply.is_err() || !is_probe_reply(&as_reply.unwrap()));
    let mut pattern = Vec::new();
    wire::pattern(PROBE_SEQ, PROBE_REPLY_LEN as usize, &mut pattern);
    assert!(is_probe_reply(&Response {
        seq: PROBE_SEQ,
        status: 0,
        server_ns: 1,
        payload: pattern,
    }));
}

#[test]
fn identity_is_read_loosely_from_stats() {
    let id = ServerIdentity::from_stats(br#"{"settings":{"version":"0.0.9"},"tcp":{}}"#);
    assert_eq!(
        id,
        Some(ServerIdentity {
            version: "0.0.9".into(),
            wire: 0
        })
    );
    let id = ServerIdentity::from_stats(br#"{"settings":{"version":"9.0.0","wire":7}}"#);
    assert_eq!(id.map(|i| i.wire), Some(7));
    assert_eq!(ServerIdentity::from_stats(b"{\"status\":\"ok\"}"), None);
    assert_eq!(ServerIdentity::from_stats(b"<html>"), None);
}

#[test]
fn heads_are_read_by_their_length() {
    let reply = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok";
    assert_eq!(head_and_length(reply), Some((reply.len() - 2, 2)));
    assert_eq!(head_and_length(b"HTTP/1.1 200 OK\r\n"), None);
    assert_eq!(http_status(b"HTTP/1.0 404 Not Found"), Some(404));
    assert_eq!(http_status(b"GET / HTTP/1.1"), None);
}
