//! The `udp` transport's accounting against a server that drops, delays, duplicates,
//! reorders and corrupts replies on a known schedule ([`misbehave::udp`]): every count
//! the client reports (lost, late replies, duplicates, reordered, mismatched) equals what
//! the server injected, every call is counted once, and the worker never stalls on a loss.

mod misbehave;

use misbehave::udp::{MisbehaveUdp, UdpAction, udp_every};
use rpcbench::runner::{Engine, RunConfig, TransportRun, run_transport};
use rpcbench::transport::{Endpoint, TransportKind};
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::{Duration, Instant};

/// Calls of the run: the schedule's period (50) divides it, so the last requests are
/// plain replies and every stray the server sends is read by a later call.
const CALLS: u64 = 500;

/// The client's timeout: short, since each dropped or late reply costs one.
const TIMEOUT: Duration = Duration::from_millis(50);

fn run(server: &MisbehaveUdp, engine: Engine) -> TransportRun {
    let addr = server.addr;
    let endpoint = Endpoint::new(addr, addr).with_udp_port(addr.port());
    let config = RunConfig {
        calls: CALLS,
        warmup: 0,
        concurrency: 1,
        timeout: TIMEOUT,
        engine,
        ..RunConfig::default()
    };
    run_transport(
        TransportKind::Udp,
        &endpoint,
        &config,
        Arc::new(AtomicU64::new(0)),
    )
}

fn schedule() -> MisbehaveUdp {
    MisbehaveUdp::start(udp_every(&[
        (50, 7, UdpAction::Drop),
        (50, 17, UdpAction::Late),
        (50, 27, UdpAction::Duplicate),
        (50, 37, UdpAction::Reorder),
        (50, 47, UdpAction::Corrupt),
    ]))
}

/// The client's counts against the server's record, call by call where seqs are kept.
fn check(server: &MisbehaveUdp, run: &TransportRun) {
    let t = &run.tally;
    let per = CALLS / 50;
    for action in [
        UdpAction::Drop,
        UdpAction::Late,
        UdpAction::Duplicate,
        UdpAction::Reorder,
        UdpAction::Corrupt,
    ] {
        assert_eq!(server.count(action), per, "{action:?} injected");
    }
    assert_eq!(server.record().len() as u64, CALLS, "one request per call");
    assert_eq!(t.calls(), CALLS, "every call counted once");
    let mut lost = server.seqs(UdpAction::Drop);
    lost.extend(server.seqs(UdpAction::Late));
    lost.sort_unstable();
    assert_eq!(t.lost, 2 * per, "dropped and late calls are lost");
    assert_eq!(
        t.lost_seqs, lost,
        "the lost calls are those dropped or delayed"
    );
    assert_eq!(
        t.late_replies, per,
        "late replies, not taken for the next call's"
    );
    assert_eq!(t.duplicated, 2 * per, "duplicates, in order or not");
    assert_eq!(t.reordered, per, "copies sent after a later reply");
    assert_eq!(t.mismatched, per);
    assert_eq!(t.mismatched_seqs, server.seqs(UdpAction::Corrupt));
    assert!(t.errors.is_empty(), "{:?}", t.errors);
    assert_eq!(t.ok, CALLS - 3 * per);
    assert_eq!(t.connects, 1, "one socket for the worker's whole run");
}

#[test]
fn udp_counts_equal_what_the_server_injected() {
    let server = schedule();
    let started = Instant::now();
    let run = run(&server, Engine::Blocking);
    check(&server, &run);
    // 20 calls wait out their timeout; the rest are loopback round trips. A worker that
    // stalled on a loss would take far longer.
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "{:?}",
        started.elapsed()
    );
}

#[test]
fn udp_counts_equal_what_the_server_injected_on_the_event_loop() {
    let server = schedule();
    let run = run(&server, Engine::Evloop);
    check(&server, &run);
}
