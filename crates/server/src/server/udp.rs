//! UDP listener (`--udp ADDR`): one request per datagram, one reply per datagram.
//!
//! A datagram holds one postcard [`Request`] body, the raw TCP frame without its length
//! prefix; the reply is one [`Response`] body. The reply's payload is never larger than
//! the request datagram ([`Status::ReplyAboveRequest`], status 3, otherwise), so a spoofed
//! source address cannot turn the server into an amplifier.
//!
//! A datagram that is not exactly one request (garbage, truncated, bytes left over) or is
//! above `--max-frame` is counted (`udp_malformed`, `udp_oversized`) and ignored: UDP has
//! no connection to close, and one bad sender must not stop the others being served.
//!
//! One thread of its own receives and answers, with blocking calls: two system calls per
//! round trip (`recvfrom`, `sendto`), as sockperf's server, where the reactor would add an
//! `epoll_wait` and a task wake-up (the reasoning of `tcp.rs`). A request with a delay is
//! answered by a task on the reactor, so it holds up no other datagram.
//!
//! [`Status::ReplyAboveRequest`]: crate::wire::Status::ReplyAboveRequest

use super::stats::Reject;
use super::tcp::answer_within;
use super::{Shared, sleep_until};
use crate::wire::{self, MAX_UDP_MESSAGE_PAYLOAD, Request};
use std::net::{SocketAddr, UdpSocket};
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

/// How often the receiving thread looks at the shutdown flag while no datagram comes: its
/// `recvfrom` waits at most this long. Shutdown of an idle listener takes up to this.
const SHUTDOWN_POLL: Duration = Duration::from_millis(50);

/// Receive buffer: one byte more than the largest UDP payload over IPv6 (65,527), so a
/// datagram is never cut short without us seeing that it was as long as the buffer.
const RECV_BUF: usize = 65_536;

/// The receive buffer asked of the kernel for the UDP socket (`SO_RCVBUF`), 4 MiB. The
/// default (`net.core.rmem_default`, 208 KiB) holds fewer than 200 small datagrams on
/// loopback, where each costs a couple of KiB of buffer accounting: 200 clients with one
/// datagram in flight each lost 7 of 2,000 calls to it (`RcvbufErrors` in
/// `/proc/net/snmp` counted exactly those 7). The kernel caps it at `net.core.rmem_max`.
const UDP_RECV_BUFFER: usize = 4 << 20;

/// Starts the receiving thread on `socket` (bound, blocking); it runs until shutdown.
pub(super) fn start(socket: UdpSocket, shared: Arc<Shared>) -> std::io::Result<()> {
    socket.set_read_timeout(Some(SHUTDOWN_POLL))?;
    // Best effort: a smaller buffer only means drops under a burst, which clients count.
    if let Err(e) =
        nix::sys::socket::setsockopt(&socket, nix::sys::socket::sockopt::RcvBuf, &UDP_RECV_BUFFER)
    {
        tracing::debug!("cannot enlarge the udp receive buffer: {e}");
    }
    let socket = Arc::new(socket);
    let reactor = tokio::runtime::Handle::current();
    std::thread::Builder::new()
        .name(super::THREAD_NAMES[3].into())
        .spawn(move || {
            serve(&socket, &shared, &reactor);
            crate::host::note_thread_end();
        })?;
    Ok(())
}

/// Receives and answers datagrams until shutdown starts.
fn serve(socket: &Arc<UdpSocket>, shared: &Arc<Shared>, reactor: &tokio::runtime::Handle) {
    // Held until the loop ends, so shutdown waits for it.
    let _alive = shared.alive.clone();
    let config = &shared.config;
    let stats = &shared.stats;
    let largest = MAX_UDP_MESSAGE_PAYLOAD.min(
        config
            .max_frame
            .saturating_sub(wire::RESPONSE_OVERHEAD)
            .try_into()
            .unwrap_or(usize::MAX),
    );
    let mut buf = vec![0u8; RECV_BUF];
    let mut out = Vec::with_capacity(RECV_BUF);
    while !*shared.shutdown.borrow() {
        let (n, peer) = match socket.recv_from(&mut buf) {
            Ok(got) => got,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                continue;
            }
            // ICMP errors from earlier sends (a client gone) surface here; keep serving.
            Err(e) => {
                tracing::debug!("udp recv failed: {e}");
                continue;
            }
        };
        stats.udp.bytes_in.fetch_add(n as u64, Relaxed);
        if n > config.max_frame as usize {
            stats.reject(Reject::UdpOversized);
            continue;
        }
        let Ok(req) = wire::decode_body::<Request>(&buf[..n]) else {
            stats.reject(Reject::UdpMalformed);
            continue;
        };
        stats.udp.requests.fetch_add(1, Relaxed);
        let got_it = Instant::now();
        let delay = Duration::from_micros(req.delay_us.into());
        if !delay.is_zero() && delay <= config.max_delay {
            let (socket, shared) = (socket.clone(), shared.clone());
            reactor.spawn(async move {
                let _alive = shared.alive.clone();
                sleep_until(got_it + delay).await;
                let mut out = Vec::new();
                reply(&socket, &shared, req, got_it, largest, n, peer, &mut out);
            });
        } else {
            reply(socket, shared, req, got_it, largest, n, peer, &mut out);
        }
    }
}

/// Answers one request of `request_len` bytes from `peer`.
#[allow(clippy::too_many_arguments)]
fn reply(
    socket: &UdpSocket,
    shared: &Shared,
    req: Request,
    got_it: Instant,
    largest: usize,
    request_len: usize,
    peer: SocketAddr,
    out: &mut Vec<u8>,
) {
    let resp = answer_within(req, got_it, shared, largest, Some(request_len));
    out.clear();
    // Writing into a Vec cannot fail, and the message types have no fallible fields.
    let Ok(bytes) = postcard::to_extend(&resp, std::mem::take(out)) else {
        return;
    };
    *out = bytes;
    match socket.send_to(out, peer) {
        Ok(sent) => {
            shared.stats.udp.bytes_out.fetch_add(sent as u64, Relaxed);
        }
        Err(e) => {
            tracing::debug!("udp send to {peer} failed: {e}");
            shared.stats.reject(Reject::IoError);
        }
    }
}
