//! A UDP echo server that misbehaves on purpose, deterministically, and records what it
//! did: the datagram counterpart of [`super::Misbehave`].
//!
//! It answers the `udp` transport's datagrams (a postcard [`Request`] each, a
//! [`Response`] back) and, by a [`UdpRule`] over its request counter `n` (1, 2, 3, ... in
//! arrival order), drops a reply, sends it late, sends it twice, sends a copy out of
//! order, or corrupts it. What reaches the client is then fixed by the schedule alone,
//! not by timing: a late reply is held until the same peer's next request and sent before
//! that request's reply (the client has given the call up by then: it only sends again
//! after its timeout), and an out-of-order copy is sent after the next reply.
//!
//! One thread, a blocking socket whose reads time out every 50 ms to look at the stop
//! flag; dropping the server joins it.

use rpcbench::wire::{self, Request, Response};
use std::collections::HashMap;
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// What the server does with one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum UdpAction {
    /// Reply correctly.
    Reply,
    /// Never reply (the client counts the call lost).
    Drop,
    /// Hold the reply and send it just before the reply to the same peer's next request
    /// (the call was counted lost; its reply arrives late).
    Late,
    /// Reply, then send the same reply again at once (a duplicate).
    Duplicate,
    /// Reply, and send a copy after the reply to the same peer's next request (a
    /// duplicate that arrives out of order).
    Reorder,
    /// Reply with one payload byte flipped (the client counts it mismatched).
    Corrupt,
}

/// Picks the action for request `n` (1-based).
pub type UdpRule = Box<dyn Fn(u64) -> UdpAction + Send + Sync>;

/// A rule from a list of `(every, offset, action)`: request `n` gets the first action with
/// `n % every == offset`, a plain reply otherwise.
pub fn udp_every(list: &[(u64, u64, UdpAction)]) -> UdpRule {
    let list = list.to_vec();
    Box::new(move |n| {
        list.iter()
            .find(|&&(every, offset, _)| n % every == offset)
            .map_or(UdpAction::Reply, |&(_, _, a)| a)
    })
}

/// One request as the server received it, and what it did with it.
#[derive(Debug, Clone, Copy)]
pub struct UdpSeen {
    pub n: u64,
    pub seq: u64,
    pub action: UdpAction,
}

/// How often a blocked read wakes up to look at the stop flag.
const POLL: Duration = Duration::from_millis(50);

/// The running server; stops when dropped.
pub struct MisbehaveUdp {
    /// Where it listens.
    pub addr: SocketAddr,
    record: Arc<Mutex<Vec<UdpSeen>>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl MisbehaveUdp {
    /// Listens on `127.0.0.1:0` and serves by `rule`.
    pub fn start(rule: UdpRule) -> MisbehaveUdp {
        let socket = UdpSocket::bind("127.0.0.1:0").expect("bind the misbehaving UDP server");
        socket.set_read_timeout(Some(POLL)).unwrap();
        let addr = socket.local_addr().unwrap();
        let record = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (record, stop) = (record.clone(), stop.clone());
            std::thread::spawn(move || serve(&socket, &rule, &record, &stop))
        };
        MisbehaveUdp {
            addr,
            record,
            stop,
            thread: Some(thread),
        }
    }

    /// Every request so far, in arrival order.
    pub fn record(&self) -> Vec<UdpSeen> {
        self.record.lock().unwrap().clone()
    }

    /// How many requests got `action`.
    pub fn count(&self, action: UdpAction) -> u64 {
        self.record().iter().filter(|s| s.action == action).count() as u64
    }

    /// The seqs of the requests that got `action`.
    pub fn seqs(&self, action: UdpAction) -> Vec<u64> {
        let mut seqs: Vec<u64> = self
            .record()
            .iter()
            .filter(|s| s.action == action)
            .map(|s| s.seq)
            .collect();
        seqs.sort_unstable();
        seqs
    }
}

impl Drop for MisbehaveUdp {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// The encoded reply to `req`: the echo or the pattern, status 0.
fn reply_to(req: &Request, corrupt: bool) -> Vec<u8> {
    let mut payload = match req.reply_len {
        None => req.payload.clone(),
        Some(n) => {
            let mut p = Vec::new();
            wire::pattern(req.seq, n as usize, &mut p);
            p
        }
    };
    let mut seq = req.seq;
    if corrupt {
        match payload.first_mut() {
            Some(b) => *b ^= 0x55,
            // No payload to corrupt: a seq from the future is as wrong.
            None => seq += 1_000_000,
        }
    }
    postcard::to_stdvec(&Response {
        seq,
        status: 0,
        server_ns: 1000,
        payload,
    })
    .unwrap()
}

/// Datagrams held for a peer: sent before (`before`) or after (`after`) its next reply.
#[derive(Default)]
struct Held {
    before: Vec<Vec<u8>>,
    after: Vec<Vec<u8>>,
}

fn serve(socket: &UdpSocket, rule: &UdpRule, record: &Mutex<Vec<UdpSeen>>, stop: &AtomicBool) {
    let mut buf = vec![0u8; 65_536];
    let mut held: HashMap<SocketAddr, Held> = HashMap::new();
    let mut n = 0;
    while !stop.load(Ordering::Relaxed) {
        let Ok((len, peer)) = socket.recv_from(&mut buf) else {
            continue;
        };
        let Ok(req) = wire::decode_body::<Request>(&buf[..len]) else {
            continue;
        };
        n += 1;
        let action = rule(n);
        record.lock().unwrap().push(UdpSeen {
            n,
            seq: req.seq,
            action,
        });
        let reply = reply_to(&req, action == UdpAction::Corrupt);
        let peer_held = held.entry(peer).or_default();
        let before = std::mem::take(&mut peer_held.before);
        let after = std::mem::take(&mut peer_held.after);
        for datagram in &before {
            let _ = socket.send_to(datagram, peer);
        }
        match action {
            UdpAction::Drop => {}
            UdpAction::Late => peer_held.before.push(reply.clone()),
            UdpAction::Reply | UdpAction::Corrupt => {
                let _ = socket.send_to(&reply, peer);
            }
            UdpAction::Duplicate => {
                let _ = socket.send_to(&reply, peer);
                let _ = socket.send_to(&reply, peer);
            }
            UdpAction::Reorder => {
                let _ = socket.send_to(&reply, peer);
                peer_held.after.push(reply.clone());
            }
        }
        if action != UdpAction::Drop && action != UdpAction::Late {
            for datagram in &after {
                let _ = socket.send_to(datagram, peer);
            }
        } else {
            // No reply went out this time: what was to follow it waits for the next one.
            let peer_held = held.entry(peer).or_default();
            peer_held.after.extend(after);
        }
    }
}
