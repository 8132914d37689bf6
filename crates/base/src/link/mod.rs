//! The userspace link: two network namespaces joined through TUN devices, with delay,
//! jitter, loss, duplication, reordering and a rate, for kernels without `netem`.
//!
//! `rpcbench-link` sits in the namespace it was started in and holds one TUN file
//! descriptor per side. Each device is made there and then moved into its namespace
//! (`ip link set DEV netns NS`): the descriptor keeps working across the move, so one
//! process sees both sides without entering either. What one side's stack sends into its
//! device, the link reads, judges ([`model`]) and writes into the other device at its due
//! time ([`forward`]). The devices are not persistent: when the process ends, however it
//! ends, the kernel deletes them with their addresses and routes, so nothing is left
//! half set up.
//!
//! - [`model`]: what happens to one packet (pure, unit-tested).
//! - [`device`]: making, moving and addressing the TUN devices.
//! - [`forward`]: the threads that read, hold and release packets, and their counts.
//! - [`rng`]: the seeded generator behind every random draw.

pub mod device;
pub mod forward;
pub mod model;
pub mod rng;

/// How far past its due time a release may be and still count as on time: the link's
/// promise (a timer, then a short spin), checked on every packet and counted when missed.
pub const ON_TIME_NS: u64 = 20_000;

/// Packets the rate limiter holds before it drops (tail drop), unless `--queue` says:
/// 1000 is Linux's default `txqueuelen` for Ethernet devices.
pub const DEFAULT_QUEUE: usize = 1000;

/// The loss model of the link.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub enum Loss {
    /// Nothing is lost.
    #[default]
    None,
    /// Each packet is lost on its own with this probability (0 to 1).
    Independent(f64),
    /// Bursty loss: a two-state Markov chain (good, bad) with a loss probability in each.
    GilbertElliott {
        /// Probability of moving from good to bad, per packet.
        p: f64,
        /// Probability of moving from bad to good, per packet (1 / mean burst length).
        r: f64,
        /// Loss probability in the good state.
        loss_good: f64,
        /// Loss probability in the bad state.
        loss_bad: f64,
    },
}

impl Loss {
    /// Gilbert-Elliott loss with mean loss `loss` and bad spells of `burst` packets on
    /// average, all lost (the Gilbert model: no loss in the good state).
    pub fn bursty(loss: f64, burst: f64) -> Loss {
        Loss::gilbert_elliott(loss, burst, 1.0)
    }

    /// Gilbert-Elliott loss with mean loss `loss`, bad spells of `burst` packets on average,
    /// and a loss probability of `loss_bad` in the bad state (none in the good state). The
    /// chain spends `loss / loss_bad` of the packets in the bad state, so `loss` must be
    /// below `loss_bad`.
    pub fn gilbert_elliott(loss: f64, burst: f64, loss_bad: f64) -> Loss {
        let r = 1.0 / burst;
        let bad_share = loss / loss_bad;
        Loss::GilbertElliott {
            p: r * bad_share / (1.0 - bad_share),
            r,
            loss_good: 0.0,
            loss_bad,
        }
    }
}

/// What the link does to every packet, the same in both directions.
#[derive(Debug, Clone, PartialEq)]
pub struct LinkSettings {
    /// One-way delay, ns.
    pub delay_ns: u64,
    /// Standard deviation of the jitter added to the delay, ns (0: none). Order is kept.
    pub jitter_ns: u64,
    /// The loss model.
    pub loss: Loss,
    /// Probability that a packet is sent twice (0 to 1).
    pub duplicate: f64,
    /// Probability that a packet skips the delay and overtakes those held (0 to 1).
    pub reorder: f64,
    /// Rate limit in bits per second, or none.
    pub rate_bps: Option<u64>,
    /// Packets the rate limiter holds before it drops.
    pub queue: usize,
}

impl Default for LinkSettings {
    fn default() -> Self {
        LinkSettings {
            delay_ns: 0,
            jitter_ns: 0,
            loss: Loss::None,
            duplicate: 0.0,
            reorder: 0.0,
            rate_bps: None,
            queue: DEFAULT_QUEUE,
        }
    }
}

impl std::fmt::Display for LinkSettings {
    /// One line for logs and reports: `delay 5.000 ms one way, jitter 0 us, ...`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "delay {:.3} ms one way, jitter {:.1} us, loss ",
            self.delay_ns as f64 / 1e6,
            self.jitter_ns as f64 / 1e3
        )?;
        match self.loss {
            Loss::None => write!(f, "0%")?,
            Loss::Independent(p) => write!(f, "{}% independent", p * 100.0)?,
            Loss::GilbertElliott {
                p,
                r,
                loss_good,
                loss_bad,
            } => write!(
                f,
                "Gilbert-Elliott p {:.4}% r {:.2}% good {}% bad {}%",
                p * 100.0,
                r * 100.0,
                loss_good * 100.0,
                loss_bad * 100.0
            )?,
        }
        write!(
            f,
            ", duplicate {}%, reorder {}%, rate ",
            self.duplicate * 100.0,
            self.reorder * 100.0
        )?;
        match self.rate_bps {
            Some(r) => write!(f, "{} kbit/s, queue {} packets", r / 1000, self.queue),
            None => write!(f, "unlimited"),
        }
    }
}

/// A setting the link cannot honour.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum CheckLinkError {
    /// A probability outside 0 to 100%.
    #[error("{what} of {value}% is outside 0 to 100%")]
    Share {
        /// Which setting.
        what: &'static str,
        /// The value asked for, in percent.
        value: f64,
    },
    /// A burst length below one packet.
    #[error("a loss burst of {0} packets is below 1")]
    Burst(f64),
    /// Gilbert-Elliott loss whose mean is not below the bad state's loss.
    #[error("mean loss {loss}% must be below the bad state's loss {bad}% (--loss-bad)")]
    BadState {
        /// The mean loss, percent.
        loss: f64,
        /// The bad state's loss, percent.
        bad: f64,
    },
    /// A rate limit of 0.
    #[error("a rate of 0 passes nothing")]
    ZeroRate,
    /// A queue bound of 0 with a rate.
    #[error("a queue of 0 packets drops everything")]
    ZeroQueue,
}

/// Checks a probability given in percent; returns it as a share (0 to 1).
pub fn check_share(what: &'static str, percent: f64) -> Result<f64, CheckLinkError> {
    if (0.0..=100.0).contains(&percent) {
        Ok(percent / 100.0)
    } else {
        Err(CheckLinkError::Share {
            what,
            value: percent,
        })
    }
}

/// Builds the loss model from percentages: `loss` mean loss, `burst` mean burst length in
/// packets (none: independent loss), `loss_bad` the bad state's loss.
pub fn loss_model(loss: f64, burst: Option<f64>, loss_bad: f64) -> Result<Loss, CheckLinkError> {
    let share = check_share("loss", loss)?;
    let bad = check_share("bad-state loss", loss_bad)?;
    Ok(match burst {
        _ if share == 0.0 => Loss::None,
        None => Loss::Independent(share),
        Some(b) if !(b >= 1.0 && b.is_finite()) => return Err(CheckLinkError::Burst(b)),
        Some(_) if share >= bad => {
            return Err(CheckLinkError::BadState {
                loss,
                bad: loss_bad,
            });
        }
        Some(b) => Loss::gilbert_elliott(share, b, bad),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_and_loss_models() {
        assert_eq!(check_share("loss", 0.5), Ok(0.005));
        assert!(check_share("loss", 100.5).is_err());
        assert!(check_share("loss", -1.0).is_err());
        assert!(check_share("loss", f64::NAN).is_err());
        assert_eq!(loss_model(0.0, Some(5.0), 100.0), Ok(Loss::None));
        assert_eq!(loss_model(1.0, None, 100.0), Ok(Loss::Independent(0.01)));
        assert!(matches!(
            loss_model(1.0, Some(4.0), 100.0),
            Ok(Loss::GilbertElliott { r, .. }) if r == 0.25
        ));
        assert_eq!(
            loss_model(1.0, Some(0.5), 100.0),
            Err(CheckLinkError::Burst(0.5))
        );
        assert!(loss_model(60.0, Some(3.0), 50.0).is_err());
    }

    #[test]
    fn settings_read_in_one_line() {
        let s = LinkSettings {
            delay_ns: 5_000_000,
            rate_bps: Some(100_000_000),
            ..LinkSettings::default()
        };
        assert_eq!(
            s.to_string(),
            "delay 5.000 ms one way, jitter 0.0 us, loss 0%, duplicate 0%, reorder 0%, \
             rate 100000 kbit/s, queue 1000 packets"
        );
    }
}
