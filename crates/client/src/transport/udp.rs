//! `udp`: one datagram each way, on a connected UDP socket per worker.
//!
//! A request is the TCP frame's body without its length prefix, one per datagram; the
//! reply is one datagram. UDP may drop, duplicate and reorder, and a worker must never
//! stall on it (netperf's UDP_RR stops a whole test at the first loss), so:
//!
//! - a call whose reply does not come within `--timeout` is `lost`, and the worker moves
//!   on to its next call on the same socket;
//! - a datagram that answers an earlier call is never taken for the current call's reply:
//!   it is counted as a *late reply* (its call was counted lost) or a *duplicate* (its call
//!   already had its reply), and, when a reply to a later call had already arrived, as
//!   *reordered* too. These count extra datagrams, not calls: every call is still counted
//!   once, as ok, lost, mismatched or an error.
//!
//! The socket is kept after a failed call (the runner's `reset` leaves it): what a stale
//! datagram on it could confuse, the seq check above already sorts out, and a new socket
//! would hide the late replies this transport exists to count. `connects` counts sockets
//! opened: one per worker on a healthy run, like a persistent transport's connections.

use super::tcp::{encode_request_body, reply_of};
use super::{
    AsyncTransport, Call, CallError, CallTimer, ConnectFailure, Counts, Endpoint, Facts,
    OpenTransportError, Phases, Port, Reply, Tls, Transport, remaining,
};
use crate::wire::{self, ResponseRef};
use std::cell::Cell;
use std::collections::VecDeque;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

/// Receive buffer: the largest UDP payload over IPv6 (65,527 bytes) fits.
const RECV_BUF: usize = 65_536;

/// Calls a worker remembers, to tell a late reply from a duplicate: far more than can be
/// outstanding (a reply later than this many calls is rare enough to be counted late
/// without knowing), and small (16 bytes each).
const HISTORY: usize = 4096;

/// What one worker knows about its recent calls' datagrams, and the stray datagrams it
/// has counted.
#[derive(Debug, Default)]
struct Strays {
    /// Recent seqs sent, oldest first, each with whether a reply to it has arrived. Seqs
    /// only grow on one worker, so the list is sorted.
    sent: VecDeque<(u64, bool)>,
    /// The highest seq a reply has arrived for (at most the call under way).
    highest: Option<u64>,
    duplicates: u64,
    late: u64,
    reordered: u64,
}

impl Strays {
    /// What the transport counts, with `connects` sockets opened.
    fn counts(&self, connects: u64) -> Counts {
        Counts {
            connects,
            duplicates: self.duplicates,
            late_replies: self.late,
            reordered: self.reordered,
            ..Counts::default()
        }
    }

    /// Notes that call `seq` was sent.
    fn sent(&mut self, seq: u64) {
        if self.sent.len() == HISTORY {
            self.sent.pop_front();
        }
        self.sent.push_back((seq, false));
    }

    /// Sorts a datagram carrying `seq` that arrived while call `current` waits: true when
    /// it is the current call's reply (a seq above it too: a corrupted seq, which the
    /// runner's check then calls mismatched), false when it was a stray, now counted.
    fn arrived(&mut self, seq: u64, current: u64) -> bool {
        if seq >= current {
            if let Some(last) = self.sent.back_mut() {
                last.1 = true;
            }
            self.highest = Some(current);
            return true;
        }
        if self.highest.is_some_and(|h| seq < h) {
            self.reordered += 1;
        }
        match self.sent.binary_search_by_key(&seq, |&(s, _)| s) {
            Ok(i) if self.sent[i].1 => self.duplicates += 1,
            Ok(i) => {
                self.sent[i].1 = true;
                self.late += 1;
            }
            // Older than the history (or never ours): an answer to a call long given up.
            Err(_) => self.late += 1,
        }
        self.highest = Some(self.highest.map_or(seq, |h| h.max(seq)));
        false
    }
}

/// The seq of a datagram, or a protocol error when it is not a reply.
fn seq_of(datagram: &[u8]) -> Result<u64, CallError> {
    wire::decode_body::<ResponseRef>(datagram)
        .map(|r| r.seq)
        .map_err(|_| CallError::Protocol)
}

/// The unspecified address of `addr`'s family, port 0: where a client socket binds.
fn any_port_for(addr: SocketAddr) -> SocketAddr {
    let ip = match addr.ip() {
        IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
        IpAddr::V6(_) => IpAddr::V6(Ipv6Addr::UNSPECIFIED),
    };
    SocketAddr::new(ip, 0)
}

/// Classifies a failed send or receive on a connected UDP socket: an ICMP port
/// unreachable from an earlier datagram comes back as ECONNREFUSED (no server there).
fn from_udp_io(e: &std::io::Error) -> CallError {
    if e.kind() == std::io::ErrorKind::ConnectionRefused {
        CallError::Connect(ConnectFailure::Refused)
    } else {
        CallError::from_io(e)
    }
}

/// The `udp` transport.
pub struct Udp {
    endpoint: Endpoint,
    timeout: Duration,
    socket: Option<UdpSocket>,
    /// The receive timeout set on the socket, to skip redundant setsockopt calls.
    rcv_timeout: Option<Duration>,
    inbuf: Vec<u8>,
    outbuf: Vec<u8>,
    strays: Strays,
    connects: u64,
}

impl Udp {
    /// Receives one datagram before `deadline`; `first` says it is the call's first read.
    fn recv(
        &mut self,
        socket: &UdpSocket,
        deadline: Instant,
        first: bool,
    ) -> Result<usize, CallError> {
        let left = remaining(deadline)?;
        // As the stream transports: the first read of a call may wait the whole timeout
        // already set, so most calls cost no setsockopt.
        if self.rcv_timeout != Some(left) && (!first || self.rcv_timeout.is_none_or(|t| t > left)) {
            socket
                .set_read_timeout(Some(left))
                .map_err(|e| CallError::from_io(&e))?;
            self.rcv_timeout = Some(left);
        }
        socket.recv(&mut self.inbuf).map_err(|e| from_udp_io(&e))
    }
}

impl Transport for Udp {
    const FACTS: Facts = Facts {
        summary: "one datagram each way on a connected UDP socket per worker (`rpcbench-echo --udp`); `connects` counts sockets opened, one per worker",
        persistent: true,
        port: Port::Udp,
        round_trips: Some(1.0),
        tls: Tls::None,
        ..Facts::DEFAULT
    };

    fn open(endpoint: Endpoint, timeout: Duration) -> Result<Udp, OpenTransportError> {
        Ok(Udp {
            endpoint,
            timeout,
            socket: None,
            rcv_timeout: None,
            inbuf: vec![0; RECV_BUF],
            outbuf: Vec::new(),
            strays: Strays::default(),
            connects: 0,
        })
    }

    fn call(&mut self, call: &Call, phases: &mut Phases) -> Result<Reply<'_>, CallError> {
        let deadline = Instant::now() + self.timeout;
        let socket = match self.socket.take() {
            Some(socket) => socket,
            None => {
                let addr = self.endpoint.udp_addr(deadline, phases)?;
                let started = Instant::now();
                let socket = UdpSocket::bind(any_port_for(addr))
                    .and_then(|s| s.connect(addr).map(|()| s))
                    .map_err(|e| CallError::from_connect(&e))?;
                phases.connect = Some(started.elapsed());
                self.connects += 1;
                self.rcv_timeout = None;
                socket
            }
        };
        encode_request_body(call, &mut self.outbuf);
        let sent = Instant::now();
        let exchanged: Result<usize, CallError> = (|| {
            socket.send(&self.outbuf).map_err(|e| from_udp_io(&e))?;
            self.strays.sent(call.seq);
            let mut first = true;
            loop {
                let n = self.recv(&socket, deadline, first)?;
                if first {
                    phases.first_byte = Some(sent.elapsed());
                    first = false;
                }
                if self.strays.arrived(seq_of(&self.inbuf[..n])?, call.seq) {
                    return Ok(n);
                }
            }
        })();
        self.socket = Some(socket);
        reply_of(&self.inbuf[..exchanged?], None)
    }

    fn reset(&mut self) {
        // The socket stays: see the module's opening.
    }

    fn counts(&self) -> Counts {
        self.strays.counts(self.connects)
    }
}

/// The `udp` transport on the event loop: the same datagrams and the same accounting on a
/// tokio socket.
pub struct AsyncUdp {
    /// Where the calls go.
    endpoint: Endpoint,
    /// Longest a call may take.
    timeout: Duration,
    /// The timer of this socket's calls.
    timer: CallTimer,
    /// The socket, once open.
    socket: Option<tokio::net::UdpSocket>,
    /// The datagram received last.
    inbuf: Vec<u8>,
    /// The request being sent.
    outbuf: Vec<u8>,
    /// Stray datagrams, as on the blocking side.
    strays: Strays,
    /// Sockets opened so far.
    connects: u64,
}

impl AsyncTransport for AsyncUdp {
    fn open(endpoint: Endpoint, timeout: Duration) -> AsyncUdp {
        AsyncUdp {
            endpoint,
            timeout,
            timer: CallTimer::default(),
            socket: None,
            // Grown to a whole datagram on first use: an event loop may hold thousands.
            inbuf: Vec::new(),
            outbuf: Vec::new(),
            strays: Strays::default(),
            connects: 0,
        }
    }

    async fn call(&mut self, call: &Call<'_>, phases: &mut Phases) -> Result<Reply<'_>, CallError> {
        let deadline = Instant::now() + self.timeout;
        if self.socket.is_none() {
            let addr = self
                .endpoint
                .addr_async(Port::Udp, deadline, phases)
                .await?;
            let started = Instant::now();
            let socket = tokio::net::UdpSocket::bind(any_port_for(addr))
                .await
                .map_err(|e| CallError::from_connect(&e))?;
            socket
                .connect(addr)
                .await
                .map_err(|e| CallError::from_connect(&e))?;
            phases.connect = Some(started.elapsed());
            self.connects += 1;
            self.socket = Some(socket);
        }
        if self.inbuf.len() < RECV_BUF {
            self.inbuf.resize(RECV_BUF, 0);
        }
        let AsyncUdp {
            timer,
            socket,
            inbuf,
            outbuf,
            strays,
            ..
        } = self;
        let Some(socket) = socket.as_ref() else {
            unreachable!("the socket was opened above");
        };
        encode_request_body(call, outbuf);
        let connecting = &Cell::new(false);
        let n = timer
            .within(deadline, connecting, async {
                let sent = Instant::now();
                socket.send(outbuf).await.map_err(|e| from_udp_io(&e))?;
                strays.sent(call.seq);
                let mut first = true;
                loop {
                    let n = socket
                        .recv(inbuf.as_mut_slice())
                        .await
                        .map_err(|e| from_udp_io(&e))?;
                    if first {
                        phases.first_byte = Some(sent.elapsed());
                        first = false;
                    }
                    if strays.arrived(seq_of(&inbuf[..n])?, call.seq) {
                        return Ok::<usize, CallError>(n);
                    }
                }
            })
            .await?;
        reply_of(&self.inbuf[..n], None)
    }

    fn reset(&mut self) {
        // The socket stays, as on the blocking side.
    }

    fn counts(&self) -> Counts {
        self.strays.counts(self.connects)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the rest of the program reads from its facts: the connections a healthy run
    /// of 8 workers and 100 calls opens, the port, an event-loop side.
    #[test]
    fn its_facts() {
        super::super::expect_facts("udp", 8, super::super::Port::Udp, true);
    }

    /// Each stray is counted by what it answers: a lost call (late), an answered one
    /// (duplicate), and reordered when a later call's reply came first.
    #[test]
    fn strays_are_sorted_by_the_call_they_answer() {
        let mut s = Strays::default();
        s.sent(10);
        assert!(s.arrived(10, 10));
        s.sent(11); // lost: no reply while it waits
        s.sent(12);
        assert!(!s.arrived(11, 12), "late reply to 11");
        assert!(!s.arrived(10, 12), "duplicate of 10, after 11: reordered");
        assert!(s.arrived(12, 12));
        s.sent(13);
        assert!(!s.arrived(12, 13), "duplicate of 12");
        assert!(
            !s.arrived(11, 13),
            "11 again, after 12: duplicate, reordered"
        );
        assert!(
            s.arrived(99, 13),
            "a seq from the future is the call's (mismatched)"
        );
        assert_eq!((s.late, s.duplicates, s.reordered), (1, 3, 2));
        assert!(!s.arrived(3, 14), "older than anything kept");
        assert_eq!((s.late, s.reordered), (2, 3));
    }
}
