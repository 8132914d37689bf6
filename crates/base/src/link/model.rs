//! What the link does to one packet: the pure part of the link, without devices or clocks.
//!
//! One [`Direction`] per way through the link holds the state that spans packets (the
//! Gilbert-Elliott state, the rate limiter's queue, the last release time that keeps order)
//! and turns a packet's arrival into a [`Verdict`]: dropped, or released at one or two due
//! times. Times are nanoseconds on the caller's monotonic clock, so the tests drive it with
//! made-up arrivals.

use super::rng::Rng;
use super::{LinkSettings, Loss};
use std::collections::VecDeque;

/// What happens to one packet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Dropped by the loss model.
    Lost,
    /// Dropped because the rate limiter's queue held `--queue` packets already.
    QueueFull,
    /// Released at `due` (ns), and again at `duplicate` when the packet is duplicated.
    Send {
        /// When the packet leaves the link, in ns on the caller's clock.
        due: u64,
        /// When its copy leaves, if the packet is duplicated.
        duplicate: Option<u64>,
        /// True when this packet leaves before one that arrived ahead of it.
        reordered: bool,
    },
}

/// The per-direction state of the link's model.
#[derive(Debug)]
pub struct Direction {
    /// The settings, shared by both directions.
    settings: LinkSettings,
    /// This direction's random draws (seeded apart from the other direction's).
    rng: Rng,
    /// True while the Gilbert-Elliott chain is in its bad (bursty) state.
    bad: bool,
    /// When the rate limiter finishes sending what it holds (ns); 0 when idle.
    busy_until: u64,
    /// Departure times (ns) of packets still in the rate limiter's queue, oldest first.
    queued: VecDeque<u64>,
    /// The latest due time given to an in-order packet, so that jitter never reorders.
    last_due: u64,
}

impl Direction {
    /// A direction with `settings`, its draws seeded from `seed`.
    pub fn new(settings: LinkSettings, seed: u64) -> Direction {
        Direction {
            settings,
            rng: Rng::new(seed),
            bad: false,
            busy_until: 0,
            queued: VecDeque::new(),
            last_due: 0,
        }
    }

    /// Decides the fate of a packet of `len` bytes that arrived at `now` (ns).
    pub fn packet(&mut self, now: u64, len: usize) -> Verdict {
        if self.lose() {
            return Verdict::Lost;
        }
        // The rate limiter: a packet waits for the ones ahead of it, then takes its own
        // serialisation time. It sits before the delay, as a slow access link feeds a long
        // path; a bounded queue drops what does not fit, as a router's tail drop does.
        let mut depart = now;
        if let Some(rate) = self.settings.rate_bps {
            while self.queued.front().is_some_and(|&t| t <= now) {
                self.queued.pop_front();
            }
            if self.queued.len() >= self.settings.queue {
                return Verdict::QueueFull;
            }
            let start = self.busy_until.max(now);
            let wire_ns = (len as u128 * 8 * 1_000_000_000 / u128::from(rate)) as u64;
            depart = start + wire_ns;
            self.busy_until = depart;
            self.queued.push_back(depart);
        }
        let base = depart + self.settings.delay_ns;
        if self.rng.chance(self.settings.reorder) {
            // A reordered packet skips the delay (netem's `reorder`): it overtakes every
            // packet still held, and counts as reordered only when one is.
            let reordered = depart < self.last_due;
            return Verdict::Send {
                due: depart,
                duplicate: self.duplicate(depart),
                reordered,
            };
        }
        let due = self.jittered(base).max(self.last_due);
        self.last_due = due;
        Verdict::Send {
            due,
            duplicate: self.duplicate(due),
            reordered: false,
        }
    }

    /// Draws the loss model: true when this packet is lost.
    fn lose(&mut self) -> bool {
        match self.settings.loss {
            Loss::None => false,
            Loss::Independent(p) => self.rng.chance(p),
            Loss::GilbertElliott {
                p,
                r,
                loss_good,
                loss_bad,
            } => {
                // The state moves first, then the packet draws its fate in the new state.
                let flip = if self.bad { r } else { p };
                if self.rng.chance(flip) {
                    self.bad = !self.bad;
                }
                self.rng.chance(if self.bad { loss_bad } else { loss_good })
            }
        }
    }

    /// Adds jitter to `base`: a normal draw with standard deviation `--jitter`, cut at three
    /// deviations (so no packet waits without bound) and never before `base - delay`.
    fn jittered(&mut self, base: u64) -> u64 {
        let sd = self.settings.jitter_ns as f64;
        if sd == 0.0 {
            return base;
        }
        let offset = (self.rng.normal() * sd).clamp(-3.0 * sd, 3.0 * sd);
        let earliest = base - self.settings.delay_ns;
        (base as f64 + offset).max(earliest as f64) as u64
    }

    /// Draws duplication: the copy's due time (right behind the packet), if any.
    fn duplicate(&mut self, due: u64) -> Option<u64> {
        self.rng.chance(self.settings.duplicate).then_some(due)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    fn settings() -> LinkSettings {
        LinkSettings {
            delay_ns: 5 * MS,
            ..LinkSettings::default()
        }
    }

    fn due(v: &Verdict) -> u64 {
        match v {
            Verdict::Send { due, .. } => *due,
            other => panic!("not sent: {other:?}"),
        }
    }

    #[test]
    fn delay_alone_adds_the_delay() {
        let mut d = Direction::new(settings(), 1);
        for t in [0, 10, 3 * MS, 100 * MS] {
            assert_eq!(due(&d.packet(t, 100)), t + 5 * MS);
        }
    }

    #[test]
    fn jitter_keeps_order_and_spreads() {
        let mut s = settings();
        s.jitter_ns = MS;
        let mut d = Direction::new(s, 2);
        let mut last = 0;
        let mut spread = 0u64;
        for i in 0..10_000u64 {
            let t = i * 100_000;
            let at = due(&d.packet(t, 100));
            assert!(at >= last, "reordered at packet {i}");
            assert!(at >= t && at <= t + 8 * MS);
            spread = spread.max(at.abs_diff(t + 5 * MS));
            last = at;
        }
        assert!(spread > MS, "no jitter seen");
    }

    #[test]
    fn independent_loss_has_its_rate() {
        let mut s = settings();
        s.loss = Loss::Independent(0.1);
        let mut d = Direction::new(s, 3);
        let lost = (0..100_000)
            .filter(|&i| d.packet(i, 100) == Verdict::Lost)
            .count();
        assert!((9_000..11_000).contains(&lost), "{lost} lost");
    }

    #[test]
    fn gilbert_elliott_loss_comes_in_bursts() {
        let mut s = settings();
        s.loss = Loss::bursty(0.05, 10.0);
        let mut d = Direction::new(s, 4);
        let lost: Vec<bool> = (0..200_000)
            .map(|i| d.packet(i, 100) == Verdict::Lost)
            .collect();
        let total = lost.iter().filter(|&&l| l).count();
        let bursts = lost.windows(2).filter(|w| w[1] && !w[0]).count();
        let share = total as f64 / lost.len() as f64;
        let mean_burst = total as f64 / bursts as f64;
        assert!((0.04..0.06).contains(&share), "loss {share}");
        assert!((8.0..12.0).contains(&mean_burst), "burst {mean_burst}");
    }

    #[test]
    fn rate_serialises_and_the_queue_bounds() {
        let mut s = settings();
        s.delay_ns = 0;
        // 8 Mbit/s: 1000 bytes take 1 ms on the wire.
        s.rate_bps = Some(8_000_000);
        s.queue = 3;
        let mut d = Direction::new(s, 5);
        assert_eq!(due(&d.packet(0, 1000)), MS);
        assert_eq!(due(&d.packet(0, 1000)), 2 * MS);
        assert_eq!(due(&d.packet(0, 1000)), 3 * MS);
        assert_eq!(d.packet(0, 1000), Verdict::QueueFull);
        // One left the queue at 1 ms: room for one more, behind the last.
        assert_eq!(due(&d.packet(MS, 1000)), 4 * MS);
    }

    #[test]
    fn reordering_and_duplication_are_marked() {
        let mut s = settings();
        s.reorder = 0.2;
        s.duplicate = 0.1;
        let mut d = Direction::new(s, 6);
        let (mut reordered, mut dups) = (0, 0);
        for i in 0..10_000u64 {
            if let Verdict::Send {
                due,
                duplicate,
                reordered: r,
            } = d.packet(i * 1000, 100)
            {
                if r {
                    assert_eq!(due, i * 1000, "a reordered packet skips the delay");
                    reordered += 1;
                }
                if let Some(copy) = duplicate {
                    assert_eq!(copy, due);
                    dups += 1;
                }
            }
        }
        assert!((1_800..2_200).contains(&reordered), "{reordered}");
        assert!((800..1_200).contains(&dups), "{dups}");
    }
}
