//! Integration tests of the echo server's raw TCP listener: correctness of echoes and
//! patterns, pipelining, delays and limits, hostile input, idle and connection limits,
//! many connections at once, and graceful shutdown of the real binary on SIGTERM.

mod common;

use common::{
    EchoProcess, FrameClient, IO_TIMEOUT, TestServer, assert_rejects, assert_reply, async_call,
    echo_req, frame, http_stats, pattern_req, payload_for,
};
use rpcbench::server::stats::Reject;
use rpcbench::wire::{self, LEN_PREFIX, RESPONSE_OVERHEAD, Request, Status};
use std::io::Write;
use std::net::{Shutdown, TcpStream};
use std::time::{Duration, Instant};

/// A fresh client gets correct echoes: the server is still healthy.
fn fresh_client_works(server_tcp: std::net::SocketAddr) {
    let mut c = FrameClient::connect(server_tcp);
    for seq in 0..3 {
        c.check_echo(1_000 + seq, &payload_for(seq, 40));
    }
}

#[test]
fn sequential_round_trips_on_one_connection() {
    let server = TestServer::start_default();
    let mut c = FrameClient::connect(server.tcp);
    const N: u64 = 10_000;
    for seq in 0..N {
        // Sizes 0..=300 bytes, and a large seq to exercise multi-byte varints.
        let req = echo_req(seq * 1_000_003, &payload_for(seq, (seq % 301) as usize));
        let resp = c.call(&req);
        assert_reply(&req, &resp);
    }
    drop(c);
    let snap = server.wait_stats(IO_TIMEOUT, "connection closed", |s| {
        s.tcp.connections_open == 0
    });
    assert_eq!(snap.tcp.requests, N);
    assert_eq!(snap.tcp.connections_total, 1);
    assert_rejects(&snap, &[]);
}

/// Writes every request of `reqs` on `c`'s socket at once, from another thread, so that a
/// full socket buffer on either side cannot deadlock the test while it reads the replies.
/// The bytes sent, and the writer to join.
fn pipeline(
    c: &FrameClient,
    reqs: &[Request],
) -> (usize, std::thread::JoinHandle<std::io::Result<()>>) {
    let mut all = Vec::new();
    for r in reqs {
        wire::encode_frame(r, &mut all);
    }
    let mut writer = c.stream.try_clone().expect("clone socket");
    (
        all.len(),
        std::thread::spawn(move || writer.write_all(&all)),
    )
}

#[test]
fn pipelined_requests_are_answered_in_order() {
    let server = TestServer::start_default();
    let mut c = FrameClient::connect(server.tcp);
    const N: u64 = 1_000;
    let reqs: Vec<Request> = (0..N)
        .map(|seq| {
            if seq % 10 == 3 {
                pattern_req(seq, (seq % 200) as u32)
            } else {
                echo_req(seq, &payload_for(seq, (seq % 97) as usize))
            }
        })
        .collect();
    let (total, write) = pipeline(&c, &reqs);
    for req in &reqs {
        let resp = c.recv();
        assert_reply(req, &resp);
    }
    write.join().unwrap().expect("pipelined write failed");
    let snap = server.wait_stats(IO_TIMEOUT, "all requests counted", |s| s.tcp.requests == N);
    assert_eq!(snap.tcp.bytes_in, total as u64);
}

/// A client that stops reading in the middle of its replies, for long enough that the
/// server parks the connection until it can write again (it waits 5 ms for a stalled
/// client), gets every byte once it reads again, in order: the rest of a batch, a large
/// echo and large patterns resumed where they stopped, and the small replies between and
/// after them. Nothing is answered or counted twice, and every byte written is counted.
#[test]
fn a_reader_that_pauses_gets_every_reply_whole_and_once() {
    let server = TestServer::start_default();
    let mut c = FrameClient::connect(server.tcp);
    let mut reqs = vec![
        echo_req(0, b"first"),
        echo_req(1, &payload_for(1, 1 << 20)),
        pattern_req(2, 3 << 20),
    ];
    // Small replies, batched, between the large ones.
    reqs.extend((3..300).map(|seq| echo_req(seq, &payload_for(seq, 100))));
    reqs.push(pattern_req(300, (2 << 20) + 17));
    reqs.push(echo_req(301, b"last"));
    let (total, write) = pipeline(&c, &reqs);
    for (i, req) in reqs.iter().enumerate() {
        if i % 100 == 0 {
            // Long past the server's 5 ms: the rest waits on the reactor.
            std::thread::sleep(Duration::from_millis(150));
        }
        let resp = c.recv();
        assert_reply(req, &resp);
    }
    write.join().unwrap().expect("pipelined write failed");
    // A write is counted once it returns, which can be after the client has read it.
    let received = c.received;
    let snap = server.wait_stats(IO_TIMEOUT, "the bytes read counted as written", |s| {
        s.tcp.bytes_out >= received
    });
    assert_eq!(
        snap.tcp.requests,
        reqs.len() as u64,
        "every request counted once"
    );
    assert_eq!(snap.tcp.bytes_in, total as u64);
    assert_eq!(
        snap.tcp.bytes_out, received,
        "every byte written counted once"
    );
    assert_rejects(&snap, &[]);
    // The connection is served as before.
    c.check_echo(400, b"after the pauses");
}

#[test]
fn pattern_replies() {
    let server = TestServer::start_default();
    let mut c = FrameClient::connect(server.tcp);
    for (i, len) in [0u32, 1, 2, 255, 256, 257, 4_096, 65_535, 65_536, 1 << 20]
        .into_iter()
        .enumerate()
    {
        let req = pattern_req(250 + i as u64, len);
        let resp = c.call(&req);
        assert_reply(&req, &resp);
    }
    // The request payload is ignored when a pattern is asked for.
    let mut req = pattern_req(7, 10);
    req.payload = vec![0xAA; 100];
    let resp = c.call(&req);
    assert_reply(&req, &resp);
}

#[test]
fn delay_is_honoured() {
    let server = TestServer::start_default();
    let mut c = FrameClient::connect(server.tcp);
    c.check_echo(1, b"warm up");
    let mut req = echo_req(2, b"late");
    req.delay_us = 20_000;
    let start = Instant::now();
    let resp = c.call(&req);
    let took = start.elapsed();
    assert_reply(&req, &resp);
    assert!(took >= Duration::from_millis(20), "reply after {took:?}");
    assert!(
        resp.server_ns >= 20_000_000,
        "server_ns {} is below the 20 ms delay",
        resp.server_ns
    );
    assert!(
        u128::from(resp.server_ns) <= took.as_nanos(),
        "server_ns {} is longer than the whole round trip {took:?}",
        resp.server_ns
    );

    // A fast request pipelined in front of a slow one is not held back by its delay. The
    // delay is the bound: a fast reply held back comes after it (physics), and one that is
    // not takes a round trip, a thousandth of it even on a loaded machine.
    let mut slow = echo_req(3, b"slow");
    slow.delay_us = SLOW_DELAY.as_micros() as u32;
    let fast = echo_req(4, b"fast");
    let mut both = frame(&fast);
    wire::encode_frame(&slow, &mut both);
    let start = Instant::now();
    c.send_raw(&both);
    assert_reply(&fast, &c.recv());
    let fast_took = start.elapsed();
    assert_reply(&slow, &c.recv());
    let slow_took = start.elapsed();
    assert!(
        fast_took < SLOW_DELAY,
        "fast reply waited {fast_took:?} for the slow one behind it"
    );
    assert!(slow_took >= SLOW_DELAY);
}

/// The delay of the slow request in [`delay_is_honoured`]: it bounds the fast reply in
/// front of it, so it is over ten times what that reply takes on a loaded machine (a
/// scheduler hiccup of 100 ms).
const SLOW_DELAY: Duration = Duration::from_secs(1);

#[test]
fn status_codes_for_limits() {
    let mut config = common::config();
    config.max_frame = 1_024;
    config.max_delay = Duration::from_millis(100);
    let server = TestServer::start(config);
    let mut c = FrameClient::connect(server.tcp);

    // The largest reply_len that fits, and its frame really fits in max_frame.
    let biggest = 1_024 - RESPONSE_OVERHEAD;
    let req = pattern_req(u64::MAX, biggest);
    let resp = c.call(&req);
    assert_reply(&req, &resp);
    assert!(frame(&resp).len() - LEN_PREFIX <= 1_024);

    // One more byte: status 1, empty payload, connection stays usable.
    let req = pattern_req(5, biggest + 1);
    let resp = c.call(&req);
    assert_eq!(resp.seq, 5);
    assert_eq!(resp.status, Status::ReplyTooLarge as u8);
    assert!(resp.payload.is_empty());
    let req = pattern_req(6, u32::MAX);
    let resp = c.call(&req);
    assert_eq!((resp.seq, resp.status), (6, 1));

    // Delay at the limit is honoured; above it is status 2 at once, without sleeping.
    let mut req = echo_req(7, b"x");
    req.delay_us = 100_000;
    let start = Instant::now();
    assert_reply(&req, &c.call(&req));
    assert!(start.elapsed() >= Duration::from_millis(100));
    let mut req = echo_req(8, b"y");
    req.delay_us = 10_000_000;
    let start = Instant::now();
    let resp = c.call(&req);
    assert_eq!(resp.seq, 8);
    assert_eq!(resp.status, Status::DelayTooLong as u8);
    assert!(resp.payload.is_empty());
    // Without sleeping: the 10 s asked for would show; a quarter of it tells the two
    // apart on any machine.
    let asked = Duration::from_micros(req.delay_us.into());
    assert!(
        start.elapsed() < asked / 4,
        "status 2 took {:?}",
        start.elapsed()
    );

    c.check_echo(9, b"still fine");

    let snap = server.stats();
    assert_rejects(
        &snap,
        &[(Reject::ReplyTooLarge, 2), (Reject::DelayTooLong, 1)],
    );
    assert_eq!(snap.tcp.requests, 6);
}

/// The server promises that max_frame bounds replies too (`ServerConfig::max_frame`: "and
/// largest reply"), and the pattern path reserves `RESPONSE_OVERHEAD` for that. An echo
/// of a request whose frame is exactly max_frame must not come back in a bigger frame,
/// which a client enforcing the same limit would have to reject.
#[test]
fn echo_of_a_max_size_request_fits_in_max_frame() {
    let mut config = common::config();
    config.max_frame = 1_024;
    let server = TestServer::start(config);
    let mut c = FrameClient::connect(server.tcp);
    let mut req = echo_req(9, b"");
    while frame(&req).len() - LEN_PREFIX < 1_024 {
        req.payload.push(9);
    }
    let bytes = frame(&req);
    assert_eq!(bytes.len() - LEN_PREFIX, 1_024, "test setup: frame size");
    c.send_raw(&bytes);
    let resp = c
        .try_recv(u32::MAX)
        .expect("a request of exactly max_frame bytes must be answered");
    let reply_body = c.received as usize - LEN_PREFIX;
    assert_eq!(resp.seq, 9);
    assert!(
        reply_body <= 1_024,
        "reply frame body is {reply_body} bytes, above max_frame 1024 (status {})",
        resp.status
    );
    if resp.status == 0 {
        assert_eq!(resp.payload, req.payload);
    }
    c.check_echo(10, b"still fine");
}

// ---------------------------------------------------------------------------------------
// Hostile input: each is counted, closes only its own connection, and a normal client
// still works afterwards.
// ---------------------------------------------------------------------------------------

/// Sends `bad` after one good request on a fresh connection; checks the good reply
/// arrives, then that the server closes the connection and counts `kind` once.
fn bad_input_case(bad: &[u8], kind: Reject) {
    let server = TestServer::start_default();
    let mut c = FrameClient::connect(server.tcp);
    let good = echo_req(1, b"before");
    let mut bytes = frame(&good);
    bytes.extend_from_slice(bad);
    c.send_raw(&bytes);
    assert_reply(&good, &c.recv());
    c.expect_closed(Duration::from_secs(5));
    let snap = server.wait_stats(IO_TIMEOUT, kind.name(), |s| {
        s.rejected(kind) == 1 && s.tcp.connections_open == 0
    });
    assert_rejects(&snap, &[(kind, 1)]);
    assert_eq!(snap.tcp.requests, 1);
    assert_eq!(snap.tcp.bytes_in, bytes.len() as u64);
    fresh_client_works(server.tcp);
    assert_rejects(&server.stats(), &[(kind, 1)]);
}

#[test]
fn zero_length_frame_is_rejected() {
    bad_input_case(&[0, 0, 0, 0], Reject::ZeroLengthFrame);
}

#[test]
fn oversized_prefix_is_rejected_in_process() {
    bad_input_case(&0xFFFF_FFF0u32.to_be_bytes(), Reject::OversizedFrame);
}

#[test]
fn malformed_body_is_rejected() {
    // An Option tag of 7 is not valid postcard.
    bad_input_case(&[0, 0, 0, 3, 1, 7, 0], Reject::MalformedFrame);
}

#[test]
fn trailing_bytes_in_a_frame_are_malformed() {
    let mut bytes = frame(&echo_req(2, b"ok"));
    bytes.push(0x55);
    let len = (bytes.len() - LEN_PREFIX) as u32;
    bytes[..LEN_PREFIX].copy_from_slice(&len.to_be_bytes());
    bad_input_case(&bytes, Reject::MalformedFrame);
}

#[test]
fn truncated_frame_then_eof_is_counted() {
    let server = TestServer::start_default();
    let mut c = FrameClient::connect(server.tcp);
    c.check_echo(1, b"first");
    let whole = frame(&echo_req(2, &[7; 100]));
    c.send_raw(&whole[..50]);
    c.stream.shutdown(Shutdown::Write).unwrap();
    c.expect_closed(Duration::from_secs(5));
    let snap = server.wait_stats(IO_TIMEOUT, "truncated_frame", |s| {
        s.rejected(Reject::TruncatedFrame) == 1 && s.tcp.connections_open == 0
    });
    assert_rejects(&snap, &[(Reject::TruncatedFrame, 1)]);
    assert_eq!(snap.tcp.bytes_in, c.sent);

    // A prefix alone, then EOF, is truncated too; a clean EOF between frames is not.
    let mut c = FrameClient::connect(server.tcp);
    c.send_raw(&[0, 0]);
    c.stream.shutdown(Shutdown::Write).unwrap();
    c.expect_closed(Duration::from_secs(5));
    let mut c = FrameClient::connect(server.tcp);
    c.check_echo(3, b"clean");
    c.stream.shutdown(Shutdown::Write).unwrap();
    c.expect_closed(Duration::from_secs(5));
    let snap = server.wait_stats(IO_TIMEOUT, "all closed", |s| {
        s.tcp.connections_open == 0 && s.tcp.connections_total == 3
    });
    assert_rejects(&snap, &[(Reject::TruncatedFrame, 2)]);
    fresh_client_works(server.tcp);
}

/// The idle timeout of the idle tests: short, so they are quick.
const IDLE: Duration = Duration::from_millis(300);
/// How long an idle close may take: over ten times the timeout (1 to 1.1 timeouts).
const IDLE_CLOSE_WITHIN: Duration = Duration::from_secs(5);
/// How often the chatty connection talks: a tenth of the timeout, so only a pause ten
/// times longer than expected would let it be closed.
const CHATTY_EVERY: Duration = Duration::from_millis(30);
/// How long the chatty connection talks: well over two timeouts.
const CHATTY_FOR: Duration = Duration::from_millis(800);

#[test]
fn silent_tcp_connection_is_closed_after_idle_timeout() {
    let mut config = common::config();
    config.idle_timeout = IDLE;
    let server = TestServer::start(config);

    // One that never sends anything, one that goes quiet after a call, and one that keeps
    // talking more often than the timeout, over the same period.
    let mut silent = FrameClient::connect(server.tcp);
    let mut quiet = FrameClient::connect(server.tcp);
    quiet.check_echo(1, b"then nothing");
    let mut chatty = FrameClient::connect(server.tcp);
    let talker = std::thread::spawn(move || {
        let start = Instant::now();
        let mut seq = 100;
        while start.elapsed() < CHATTY_FOR {
            chatty.check_echo(seq, b"still here");
            seq += 1;
            std::thread::sleep(CHATTY_EVERY);
        }
        chatty
    });
    let took = silent.expect_closed(IDLE_CLOSE_WITHIN);
    // A lower bound rests on physics: the server must not close before the timeout.
    assert!(
        took >= Duration::from_millis(250),
        "closed after {took:?}, before the 300 ms idle timeout"
    );
    quiet.expect_closed(IDLE_CLOSE_WITHIN);
    let mut chatty = talker.join().expect("a connection in use was closed");
    chatty.check_echo(200, b"alive after 800 ms of regular use");
    drop(chatty);
    let snap = server.wait_stats(IO_TIMEOUT, "two idle timeouts", |s| {
        s.rejected(Reject::IdleTimeout) == 2 && s.tcp.connections_open == 0
    });
    assert_rejects(&snap, &[(Reject::IdleTimeout, 2)]);
    fresh_client_works(server.tcp);
}

#[test]
fn connections_above_the_limit_are_closed_at_once() {
    let mut config = common::config();
    config.max_connections = 4;
    let idle = config.idle_timeout;
    let server = TestServer::start(config);
    let mut open: Vec<FrameClient> = (0..4).map(|_| FrameClient::connect(server.tcp)).collect();
    for (i, c) in open.iter_mut().enumerate() {
        c.check_echo(i as u64, b"admitted");
    }
    server.wait_stats(IO_TIMEOUT, "4 open", |s| s.tcp.connections_open == 4);

    // A fifth TCP connection and an HTTP one (the limit is over all protocols) are closed
    // without an answer.
    let mut extra = FrameClient::connect(server.tcp);
    extra.send(&echo_req(99, b"refused"));
    // At once: a connection the server kept would stay open until the idle timeout (60 s);
    // a thirtieth of that tells the two apart on any machine.
    extra.expect_closed(idle / 30);
    let mut http = TcpStream::connect(server.http).expect("connect http");
    common::expect_closed(&mut http, Duration::from_secs(2));

    // The admitted ones are unaffected.
    for (i, c) in open.iter_mut().enumerate() {
        c.check_echo(10 + i as u64, b"still served");
    }
    let snap = server.stats();
    assert_rejects(&snap, &[(Reject::OverConnectionLimit, 2)]);
    assert_eq!(snap.tcp.connections_total, 5);
    assert_eq!(snap.tcp.connections_open, 4);
    assert_eq!(snap.http.connections_total, 1);
    assert_eq!(snap.http.connections_open, 0);
    assert_eq!(
        snap.tcp.requests, 8,
        "the refused connection's request was not served"
    );

    // Closing one frees a slot.
    drop(open.pop());
    server.wait_stats(IO_TIMEOUT, "3 open", |s| s.tcp.connections_open == 3);
    fresh_client_works(server.tcp);
    assert_rejects(&server.stats(), &[(Reject::OverConnectionLimit, 2)]);
}

/// Hostile length prefixes sent to the real binary with a 1 GiB max frame must not make it
/// allocate what they claim: neither for prefixes it accepts (it must wait for the bytes)
/// nor for ones above the limit.
#[test]
fn hostile_prefixes_do_not_grow_memory() {
    let proc = EchoProcess::spawn(&["--max-frame", "1024MiB"]);
    let mut warm = FrameClient::connect(proc.tcp);
    warm.check_echo(1, &[1; 10_000]);
    let before = proc.rss_kib();
    let virt_before = proc.vm_size_kib();

    // 20 connections each claim a frame of almost 1 GiB (allowed) and send a few bytes.
    let claim = (1u32 << 30) - 16;
    let mut pending: Vec<FrameClient> = (0..20)
        .map(|_| {
            let mut c = FrameClient::connect(proc.tcp);
            let mut bytes = claim.to_be_bytes().to_vec();
            bytes.extend_from_slice(&[0u8; 1_000]);
            c.send_raw(&bytes);
            c
        })
        .collect();
    // 20 more claim ~4 GiB, above the limit: closed at once.
    for _ in 0..20 {
        let mut c = FrameClient::connect(proc.tcp);
        c.send_raw(&0xFFFF_FFF0u32.to_be_bytes());
        c.expect_closed(Duration::from_secs(5));
    }
    // Let the server read everything the pending ones sent, then measure.
    warm.check_echo(2, b"sync");
    std::thread::sleep(Duration::from_millis(200));
    let after = proc.rss_kib();
    let virt_after = proc.vm_size_kib();
    let growth_mib = after.saturating_sub(before) as f64 / 1024.0;
    let virt_growth_mib = virt_after.saturating_sub(virt_before) as f64 / 1024.0;
    eprintln!("hostile prefixes: RSS +{growth_mib:.1} MiB, VmSize +{virt_growth_mib:.1} MiB");
    assert!(
        growth_mib < 64.0,
        "RSS grew by {growth_mib:.1} MiB ({before} -> {after} KiB) for hostile prefixes"
    );
    // Untouched reservations do not show in RSS, so address space is checked too: the 20
    // accepted claims add up to 20 GiB. Each connection has a thread of its own, and glibc
    // gives new threads malloc arenas of 64 MiB of address space each (up to 8 per CPU),
    // so the bound is a quarter of the claims rather than a tight one.
    let claims_mib = 20.0 * f64::from(claim) / (1024.0 * 1024.0);
    assert!(
        virt_growth_mib < claims_mib / 4.0,
        "VmSize grew by {virt_growth_mib:.1} MiB ({virt_before} -> {virt_after} KiB): \
         memory was reserved for what the prefixes claim"
    );
    // The pending connections are still open, waiting for their bytes.
    for c in &mut pending {
        c.stream
            .set_read_timeout(Some(Duration::from_millis(1)))
            .unwrap();
        let mut b = [0u8; 1];
        let res = std::io::Read::read(&mut c.stream, &mut b);
        assert!(
            matches!(&res, Err(e) if e.kind() == std::io::ErrorKind::WouldBlock),
            "a pending frame's connection was closed or answered: {res:?}"
        );
    }
    drop(pending);
    warm.check_echo(3, b"normal client still served");
    let deadline = Instant::now() + IO_TIMEOUT;
    let snap = loop {
        let snap = http_stats(proc.http);
        // The reject is counted before the connection's slot is released, so wait for both.
        let settled = snap.rejected(Reject::TruncatedFrame) == 20 && snap.tcp.connections_open == 1;
        if settled || Instant::now() > deadline {
            break snap;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_rejects(
        &snap,
        &[(Reject::OversizedFrame, 20), (Reject::TruncatedFrame, 20)],
    );
    assert_eq!(snap.tcp.connections_total, 41);
    assert_eq!(snap.tcp.connections_open, 1);
    assert_eq!(snap.tcp.requests, 3);
}

/// Raises the soft open-files limit to the hard limit when it is below `need`.
fn ensure_open_files(need: u64) {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE).expect("getrlimit");
    if soft < need {
        setrlimit(Resource::RLIMIT_NOFILE, hard, hard).expect("setrlimit");
    }
    let (soft, _) = getrlimit(Resource::RLIMIT_NOFILE).expect("getrlimit");
    assert!(
        soft >= need,
        "need {need} open files, the hard limit allows only {soft}"
    );
}

#[test]
fn two_thousand_concurrent_connections() {
    const CONNS: usize = 2_000;
    const CALLS: u64 = 10;
    // Client and server ends both live in this process, and other tests run alongside.
    ensure_open_files(2 * CONNS as u64 + 1_000);
    let server = TestServer::start_default();
    let addr = server.tcp;
    let client_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let failures = client_rt.block_on(async {
        let connecting = std::sync::Arc::new(tokio::sync::Semaphore::new(200));
        let all_open = std::sync::Arc::new(tokio::sync::Barrier::new(CONNS + 1));
        let checked = std::sync::Arc::new(tokio::sync::Barrier::new(CONNS + 1));
        let mut tasks = tokio::task::JoinSet::new();
        for conn in 0..CONNS as u64 {
            let connecting = connecting.clone();
            let all_open = all_open.clone();
            let checked = checked.clone();
            tasks.spawn(async move {
                let run = async {
                    // Connect and make the first call with bounded concurrency, so the
                    // listen backlog never overflows; then hold the connection open.
                    let permit = connecting.acquire().await.unwrap();
                    let mut stream = tokio::net::TcpStream::connect(addr).await?;
                    stream.set_nodelay(true)?;
                    let first = echo_req(conn * 100, &payload_for(conn, 16));
                    let resp = async_call(&mut stream, &first).await?;
                    drop(permit);
                    Ok::<_, std::io::Error>((stream, first, resp))
                };
                let first = tokio::time::timeout(Duration::from_secs(20), run).await;
                all_open.wait().await;
                checked.wait().await;
                let (mut stream, req, resp) = match first {
                    Ok(Ok(v)) => v,
                    Ok(Err(e)) => return Err(format!("conn {conn}: {e}")),
                    Err(_) => return Err(format!("conn {conn}: connect timed out")),
                };
                if resp.seq != req.seq || resp.status != 0 || resp.payload != req.payload {
                    return Err(format!("conn {conn}: bad first reply {resp:?}"));
                }
                for call in 1..CALLS {
                    let seq = conn * 100 + call;
                    let req = echo_req(seq, &payload_for(seq, (seq % 64) as usize));
                    let resp = tokio::time::timeout(
                        Duration::from_secs(20),
                        async_call(&mut stream, &req),
                    )
                    .await
                    .map_err(|_| format!("conn {conn} call {call}: timed out"))?
                    .map_err(|e| format!("conn {conn} call {call}: {e}"))?;
                    if resp.seq != seq || resp.status != 0 || resp.payload != req.payload {
                        return Err(format!("conn {conn} call {call}: bad reply {resp:?}"));
                    }
                }
                Ok(())
            });
        }
        all_open.wait().await;
        // Every connection is open at this point (or failed, which is reported below).
        let snap = server.stats();
        checked.wait().await;
        let mut failures = Vec::new();
        while let Some(res) = tasks.join_next().await {
            if let Err(e) = res.expect("client task panicked") {
                failures.push(e);
            }
        }
        (failures, snap)
    });
    let (failures, at_peak) = failures;
    assert!(
        failures.is_empty(),
        "{} of {CONNS} connections failed; first few: {:?}",
        failures.len(),
        &failures[..failures.len().min(5)]
    );
    assert_eq!(at_peak.tcp.connections_open, CONNS as u64);
    let snap = server.wait_stats(IO_TIMEOUT, "all closed", |s| s.tcp.connections_open == 0);
    assert_eq!(snap.tcp.connections_total, CONNS as u64);
    assert_eq!(snap.tcp.requests, CONNS as u64 * CALLS);
    assert_rejects(&snap, &[]);
}

#[test]
fn in_process_shutdown_lets_a_delayed_request_finish() {
    let server = TestServer::start_default();
    let mut c = FrameClient::connect(server.tcp);
    c.check_echo(1, b"warm");
    let mut idle = FrameClient::connect(server.tcp);
    idle.check_echo(2, b"idle afterwards");
    let mut req = echo_req(3, b"in flight");
    req.delay_us = 300_000;
    c.send(&req);
    // Shut down once the server has the request, not after a guess at how long that takes.
    server.wait_stats(IO_TIMEOUT, "the delayed request taken in", |s| {
        s.tcp.requests == 3
    });
    let (totals, drained) = {
        let reader = std::thread::spawn(move || {
            let resp = c.recv();
            (c, resp)
        });
        let out = server.shutdown(Duration::from_secs(5));
        let (mut c, resp) = reader.join().expect("reply lost during shutdown");
        assert_reply(&req, &resp);
        c.expect_closed(Duration::from_secs(2));
        idle.expect_closed(Duration::from_secs(2));
        out
    };
    assert!(drained, "shutdown did not drain");
    assert_eq!(totals.tcp.requests, 3);
    assert_eq!(totals.tcp.connections_open, 0);
    assert_rejects(&totals, &[]);
}

/// SIGTERM while a delayed request is in flight: the reply still arrives whole, then the
/// process prints its totals and exits 0.
#[test]
fn sigterm_lets_an_in_flight_tcp_request_finish() {
    let mut proc = EchoProcess::spawn(&[]);
    let mut c = FrameClient::connect(proc.tcp);
    c.check_echo(1, b"warm up");
    let mut req = echo_req(2, &payload_for(2, 5_000));
    req.delay_us = 500_000;
    let start = Instant::now();
    c.send(&req);
    // Signal once the server has the request, not after a guess at how long that takes.
    while http_stats(proc.http).tcp.requests < 2 {
        assert!(
            start.elapsed() < IO_TIMEOUT,
            "the delayed request never arrived"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    proc.signal(nix::sys::signal::Signal::SIGTERM);

    // New connections are no longer served once shutdown has started.
    std::thread::sleep(Duration::from_millis(100));
    match TcpStream::connect_timeout(&proc.tcp, Duration::from_secs(1)) {
        Err(_) => {}
        Ok(mut late) => {
            let _ = late.write_all(&frame(&echo_req(9, b"too late")));
            common::expect_closed(&mut late, Duration::from_secs(2));
        }
    }

    let resp = c.recv();
    assert_reply(&req, &resp);
    assert!(start.elapsed() >= Duration::from_millis(500));
    assert!(resp.server_ns >= 500_000_000);
    c.expect_closed(Duration::from_secs(3));

    let totals = proc.exit_totals();
    assert_eq!(totals.tcp.requests, 2);
    assert_eq!(totals.tcp.connections_open, 0);
    assert_eq!(totals.tcp.bytes_in, c.sent);
    assert_eq!(totals.tcp.bytes_out, c.received);
}

/// How long `rpcbench-echo` may take to refuse to start: it decides before it binds
/// anything, in the few milliseconds a process takes to start, so this is far over ten
/// times that even on a loaded machine.
const REFUSED_WITHIN: Duration = Duration::from_secs(5);

/// Runs `rpcbench-echo` with `args` until it exits, which it must do within
/// [`REFUSED_WITHIN`] (else it is killed, by its PID, and the test fails); returns its exit
/// code and its stderr.
fn echo_exit(args: &[&str]) -> (Option<i32>, String) {
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_rpcbench-echo"))
        .args(args)
        // Logs at any level would be lines of their own; the refusal must be one line.
        .env_remove("RUST_LOG")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("cannot start rpcbench-echo");
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("waitpid failed") {
            break status;
        }
        if start.elapsed() > REFUSED_WITHIN {
            let _ = child.kill();
            let _ = child.wait();
            panic!("rpcbench-echo {args:?} still running after {REFUSED_WITHIN:?}");
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr)
        .expect("reading stderr");
    (status.code(), stderr)
}

/// A flag value the server cannot honour stops `rpcbench-echo` at once with exit status 2
/// and one line naming the flag and what it allows, before anything binds.
#[test]
fn bad_flag_values_exit_2_with_one_line() {
    for (flag, value, allowed) in [
        ("--max-frame", "0", "at least 4 bytes"),
        ("--threads", "0", "from 1 to 1024"),
        ("--idle-timeout", "0s", "at least 10ms"),
        ("--max-connections", "0", "from 1 to 2147483647"),
        ("--max-delay", "5000s", "at most 4294.967295s"),
        ("--dns-drop", "1.5", "from 0 to 1"),
        ("--dns-ttl", "4294967295", "at most 2147483647"),
        ("--dns-delay", "5000s", "at most 4294.967295s"),
        ("--dns-name", "localhost", "two labels"),
    ] {
        let (code, stderr) = echo_exit(&["--tcp", "127.0.0.1:0", "--http", "off", flag, value]);
        assert_eq!(code, Some(2), "{flag} {value}: {stderr:?}");
        assert_eq!(stderr.lines().count(), 1, "{flag} {value}: {stderr:?}");
        assert!(
            stderr.starts_with("rpcbench-echo: ") && stderr.contains(flag),
            "{flag} {value}: {stderr:?}"
        );
        assert!(stderr.contains(allowed), "{flag} {value}: {stderr:?}");
    }
    let (code, stderr) = echo_exit(&["--tcp", "off", "--http", "off"]);
    assert_eq!(
        (code, stderr.as_str()),
        (
            Some(2),
            "rpcbench-echo: every listener is off; enable --tcp or --http\n"
        )
    );
}

/// A port already in use stops `rpcbench-echo` with exit status 1 and one line naming the
/// listener and the address, with the system's reason given once.
#[test]
fn a_port_in_use_exits_1_with_one_line() {
    let running = EchoProcess::spawn(&[]);
    let in_use = std::io::Error::from_raw_os_error(nix::errno::Errno::EADDRINUSE as i32);
    for (proto, taken) in [("tcp", running.tcp), ("http", running.http)] {
        let taken = taken.to_string();
        let (tcp, http) = match proto {
            "tcp" => (taken.as_str(), "127.0.0.1:0"),
            _ => ("127.0.0.1:0", taken.as_str()),
        };
        let (code, stderr) = echo_exit(&["--tcp", tcp, "--http", http]);
        assert_eq!(code, Some(1), "{stderr:?}");
        assert_eq!(
            stderr,
            format!("rpcbench-echo: cannot listen on {proto} {taken}: {in_use}\n")
        );
        assert_eq!(stderr.matches(&in_use.to_string()).count(), 1, "{stderr:?}");
    }
}
