//! The link's threads: per direction, a reader that judges each packet on arrival and a
//! releaser that writes it to the other device at its due time, and what they count.
//!
//! The releaser sleeps until shortly before the next due time, then spins: a futex sleep
//! on a loaded machine wakes tens of microseconds late (more with the default 50 µs timer
//! slack, which the releaser sets to 1 ns), while a spin of at most [`SPIN_NS`] is cheap
//! and exact. Every release measures how late it was; those past [`super::ON_TIME_NS`]
//! are counted, not hidden.

use super::device::Device;
use super::model::{Direction, Verdict};
use super::{LinkSettings, ON_TIME_NS};
use std::collections::BinaryHeap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

/// How long before a due time the releaser stops sleeping and spins. A wake-up on this
/// 2-vCPU host lands within ~100 µs of its time unless the CPU is taken; 300 µs covers that
/// and costs at most that much CPU per release.
pub const SPIN_NS: u64 = 300_000;

/// The version nibble of an IPv4 header, the only packets the link forwards.
const IPV4: u8 = 4;

/// Largest packet read from a device: its MTU with headroom. Reads are of one IP packet.
const READ_BUF: usize = 65_536;

/// What one direction counted, live, shared by its two threads.
#[derive(Debug, Default)]
pub struct Counters {
    /// Packets read from the source device and forwarded or dropped (IPv4).
    pub received: AtomicU64,
    /// Packets read that were not IPv4, not forwarded.
    pub ignored: AtomicU64,
    /// Packets written to the destination device (copies included).
    pub delivered: AtomicU64,
    /// Packets held before release (a delay, jitter or the rate queue above zero).
    pub delayed: AtomicU64,
    /// Packets dropped by the loss model.
    pub lost: AtomicU64,
    /// Packets dropped because the rate limiter's queue was full.
    pub queue_full: AtomicU64,
    /// Extra copies sent.
    pub duplicated: AtomicU64,
    /// Packets released ahead of one that arrived before them.
    pub reordered: AtomicU64,
    /// Releases later than [`ON_TIME_NS`] after their due time.
    pub late: AtomicU64,
    /// The latest release, ns past its due time.
    pub max_late_ns: AtomicU64,
    /// Sum of every release's lateness, ns (for the mean).
    pub late_sum_ns: AtomicU64,
    /// Writes the destination device refused (its stack had no room, say).
    pub send_errors: AtomicU64,
}

/// One direction's counts at one instant, for printing.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DirectionStats {
    /// Source namespace.
    pub from: String,
    /// Destination namespace.
    pub to: String,
    /// IPv4 packets read from the source device.
    pub received: u64,
    /// Non-IPv4 packets read, not forwarded.
    pub ignored: u64,
    /// Packets written to the destination (copies included).
    pub delivered: u64,
    /// Packets held before release.
    pub delayed: u64,
    /// Dropped by the loss model.
    pub lost: u64,
    /// Dropped by the full rate queue.
    pub queue_full: u64,
    /// Extra copies.
    pub duplicated: u64,
    /// Released ahead of an earlier arrival.
    pub reordered: u64,
    /// Releases past the on-time bound.
    pub late: u64,
    /// Latest release past its due time, ns.
    pub max_late_ns: u64,
    /// Mean lateness of a release, ns.
    pub mean_late_ns: u64,
    /// Refused writes.
    pub send_errors: u64,
}

impl std::fmt::Display for DirectionStats {
    /// `from=NS to=NS received=N delivered=N ...`: one line a person reads and a script
    /// splits on spaces and `=`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "from={} to={} received={} ignored={} delivered={} delayed={} lost={} queue_full={} \
             duplicated={} reordered={} late_over_{}us={} max_late_us={:.1} mean_late_us={:.1} \
             send_errors={}",
            self.from,
            self.to,
            self.received,
            self.ignored,
            self.delivered,
            self.delayed,
            self.lost,
            self.queue_full,
            self.duplicated,
            self.reordered,
            ON_TIME_NS / 1000,
            self.late,
            self.max_late_ns as f64 / 1e3,
            self.mean_late_ns as f64 / 1e3,
            self.send_errors
        )
    }
}

/// A packet waiting for its due time; the heap pops the earliest, ties in arrival order.
#[derive(Debug, PartialEq, Eq)]
struct Held {
    /// Due time, ns since the link's start.
    due: u64,
    /// Arrival order, so equal due times (a duplicate behind its original) keep it.
    seq: u64,
    /// The IP packet.
    bytes: Arc<[u8]>,
}

impl Ord for Held {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (other.due, other.seq).cmp(&(self.due, self.seq))
    }
}

impl PartialOrd for Held {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

/// A running link: both directions' threads and their counters.
#[derive(Debug)]
pub struct Link {
    /// Counters of a to b, then b to a, with the namespaces' names.
    directions: [(Arc<Counters>, String, String); 2],
}

impl Link {
    /// Starts forwarding between `a` and `b` with `settings`, the two directions' draws
    /// seeded from `seed`. The threads run until the process ends.
    pub fn start(
        a: Device,
        b: Device,
        settings: &LinkSettings,
        seed: u64,
    ) -> std::io::Result<Link> {
        let clock = Instant::now();
        let (a_name, b_name) = (a.side.netns.clone(), b.side.netns.clone());
        let a = Arc::new(a);
        let b = Arc::new(b);
        let ab = Arc::new(Counters::default());
        let ba = Arc::new(Counters::default());
        for (from, to, counters, dir_seed) in [
            (a.clone(), b.clone(), ab.clone(), seed),
            (b, a, ba.clone(), seed ^ 0x5151_5151_5151_5151),
        ] {
            let (tx, rx) = mpsc::channel();
            let model = Direction::new(settings.clone(), dir_seed);
            let c = counters.clone();
            thread::Builder::new()
                .name(format!("link-read-{}", from.name))
                .spawn(move || read_loop(&from, model, &c, clock, &tx))?;
            thread::Builder::new()
                .name(format!("link-send-{}", to.name))
                .spawn(move || release_loop(&to, &counters, clock, &rx))?;
        }
        Ok(Link {
            directions: [(ab, a_name.clone(), b_name.clone()), (ba, b_name, a_name)],
        })
    }

    /// Both directions' counts now: a to b, then b to a.
    pub fn stats(&self) -> [DirectionStats; 2] {
        self.directions.clone().map(|(c, from, to)| {
            let delivered = c.delivered.load(Relaxed);
            DirectionStats {
                from,
                to,
                received: c.received.load(Relaxed),
                ignored: c.ignored.load(Relaxed),
                delivered,
                delayed: c.delayed.load(Relaxed),
                lost: c.lost.load(Relaxed),
                queue_full: c.queue_full.load(Relaxed),
                duplicated: c.duplicated.load(Relaxed),
                reordered: c.reordered.load(Relaxed),
                late: c.late.load(Relaxed),
                max_late_ns: c.max_late_ns.load(Relaxed),
                mean_late_ns: c.late_sum_ns.load(Relaxed) / delivered.max(1),
                send_errors: c.send_errors.load(Relaxed),
            }
        })
    }
}

/// Nanoseconds since `clock`.
fn ns_since(clock: Instant) -> u64 {
    clock.elapsed().as_nanos() as u64
}

/// Reads packets from `from`, judges each and hands the ones that go on to the releaser.
/// Ends when the device fails or the releaser is gone.
fn read_loop(
    from: &Device,
    mut model: Direction,
    counters: &Counters,
    clock: Instant,
    tx: &mpsc::Sender<Held>,
) {
    let mut buf = vec![0u8; READ_BUF];
    let mut seq = 0u64;
    loop {
        let n = match from.tun.recv(&mut buf) {
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => {
                tracing::error!("reading {}: {e}", from.name);
                return;
            }
        };
        let now = ns_since(clock);
        tracing::trace!("{} read {n} bytes: {:02x?}", from.name, &buf[..n.min(48)]);
        // The link's addresses are IPv4; anything else is the kernel's own chatter (an
        // IPv6 router solicitation sent as the device came up, before IPv6 was turned
        // off on it) and would only disturb the counts of the traffic under test.
        if buf[..n].first().is_none_or(|b| b >> 4 != IPV4) {
            counters.ignored.fetch_add(1, Relaxed);
            continue;
        }
        counters.received.fetch_add(1, Relaxed);
        match model.packet(now, n) {
            Verdict::Lost => {
                counters.lost.fetch_add(1, Relaxed);
            }
            Verdict::QueueFull => {
                counters.queue_full.fetch_add(1, Relaxed);
            }
            Verdict::Send {
                due,
                duplicate,
                reordered,
            } => {
                if due > now {
                    counters.delayed.fetch_add(1, Relaxed);
                }
                if reordered {
                    counters.reordered.fetch_add(1, Relaxed);
                }
                let bytes: Arc<[u8]> = Arc::from(&buf[..n]);
                for at in std::iter::once(due).chain(duplicate) {
                    seq += 1;
                    let held = Held {
                        due: at,
                        seq,
                        bytes: bytes.clone(),
                    };
                    if tx.send(held).is_err() {
                        return;
                    }
                }
                if duplicate.is_some() {
                    counters.duplicated.fetch_add(1, Relaxed);
                }
            }
        }
    }
}

/// Holds packets until their due time and writes them to `to`. Ends when the reader is
/// gone and nothing is held.
fn release_loop(to: &Device, counters: &Counters, clock: Instant, rx: &mpsc::Receiver<Held>) {
    // The default 50 µs slack would let every sleep overshoot by that much; 1 ns asks the
    // kernel for its best. A kernel that refuses leaves the spin to absorb it.
    if let Err(e) = nix::sys::prctl::set_timerslack(1) {
        tracing::debug!("cannot set timer slack: {e}");
    }
    let mut heap = BinaryHeap::<Held>::new();
    loop {
        let Some(next_due) = heap.peek().map(|h| h.due) else {
            match rx.recv() {
                Ok(h) => heap.push(h),
                Err(_) => return,
            }
            continue;
        };
        let now = ns_since(clock);
        if next_due <= now {
            let held = heap.pop().expect("peeked");
            release(to, counters, clock, &held);
            continue;
        }
        let wait = next_due - now;
        if wait > SPIN_NS {
            match rx.recv_timeout(Duration::from_nanos(wait - SPIN_NS)) {
                Ok(h) => heap.push(h),
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    thread::sleep(Duration::from_nanos(wait - SPIN_NS));
                }
            }
            continue;
        }
        // The spin: arrivals are still taken (one may be due sooner, when reordered).
        while ns_since(clock) < next_due {
            if let Ok(h) = rx.try_recv() {
                let sooner = h.due < next_due;
                heap.push(h);
                if sooner {
                    break;
                }
            }
            std::hint::spin_loop();
        }
    }
}

/// Writes one held packet and counts its lateness.
fn release(to: &Device, counters: &Counters, clock: Instant, held: &Held) {
    // Lateness is taken as the write starts: the write itself runs the receiving stack
    // (the kernel hands the packet to IP within the call), which is the path's cost, not
    // the link's.
    let late = ns_since(clock).saturating_sub(held.due);
    match to.tun.send(&held.bytes) {
        Ok(_) => {
            counters.delivered.fetch_add(1, Relaxed);
            counters.late_sum_ns.fetch_add(late, Relaxed);
            counters.max_late_ns.fetch_max(late, Relaxed);
            if late > ON_TIME_NS {
                counters.late.fetch_add(1, Relaxed);
            }
        }
        Err(e) => {
            counters.send_errors.fetch_add(1, Relaxed);
            tracing::debug!("writing {}: {e}", to.name);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_heap_pops_earliest_then_arrival_order() {
        let bytes: Arc<[u8]> = Arc::from(&b"x"[..]);
        let mut heap = BinaryHeap::new();
        for (due, seq) in [(5, 1), (3, 2), (5, 3), (3, 4)] {
            heap.push(Held {
                due,
                seq,
                bytes: bytes.clone(),
            });
        }
        let order: Vec<_> = std::iter::from_fn(|| heap.pop().map(|h| (h.due, h.seq))).collect();
        assert_eq!(order, [(3, 2), (3, 4), (5, 1), (5, 3)]);
    }

    #[test]
    fn stats_read_as_key_value_pairs() {
        let s = DirectionStats {
            from: "a".into(),
            to: "b".into(),
            received: 3,
            ..DirectionStats::default()
        };
        let line = s.to_string();
        assert!(line.starts_with("from=a to=b received=3 ignored=0 delivered=0"));
        assert!(line.split(' ').all(|kv| kv.contains('=')));
    }
}
