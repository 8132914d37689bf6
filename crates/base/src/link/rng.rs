//! A small seeded random number generator for the link's per-packet draws.
//!
//! xoshiro256** seeded through SplitMix64, as its authors recommend. A generator of our own
//! rather than the `rand` crate: the link needs uniform draws and one normal draw per packet,
//! and a fixed `--seed` must replay the same losses on every platform and every version of
//! a dependency, which a ten-line generator guarantees and a crate's `StdRng` does not.

/// A xoshiro256** generator: fast, 256 bits of state, good statistical quality.
#[derive(Debug, Clone)]
pub struct Rng {
    /// The generator's state; never all zero (SplitMix64 seeding ensures it).
    s: [u64; 4],
}

impl Rng {
    /// A generator seeded from `seed`; the same seed gives the same sequence.
    pub fn new(seed: u64) -> Rng {
        let mut x = seed;
        let mut next = || {
            x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = x;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^ (z >> 31)
        };
        Rng {
            s: [next(), next(), next(), next()],
        }
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        let result = self.s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = self.s[1] << 17;
        self.s[2] ^= self.s[0];
        self.s[3] ^= self.s[1];
        self.s[1] ^= self.s[2];
        self.s[0] ^= self.s[3];
        self.s[2] ^= t;
        self.s[3] = self.s[3].rotate_left(45);
        result
    }

    /// A uniform draw in [0, 1), with 53 bits of precision.
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// True with probability `p` (0 never, 1 always).
    pub fn chance(&mut self, p: f64) -> bool {
        p > 0.0 && self.unit() < p
    }

    /// A standard normal draw (mean 0, standard deviation 1), by Box-Muller.
    pub fn normal(&mut self) -> f64 {
        // 1 - unit() lies in (0, 1], so the logarithm is finite.
        let u1 = 1.0 - self.unit();
        let u2 = self.unit();
        (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_sequence() {
        let (mut a, mut b) = (Rng::new(7), Rng::new(7));
        for _ in 0..100 {
            assert_eq!(a.next_u64(), b.next_u64());
        }
        assert_ne!(Rng::new(7).next_u64(), Rng::new(8).next_u64());
    }

    #[test]
    fn draws_have_their_moments() {
        let mut rng = Rng::new(1);
        let n = 100_000;
        let (mut sum, mut sq, mut hits) = (0.0, 0.0, 0);
        for _ in 0..n {
            let x = rng.normal();
            sum += x;
            sq += x * x;
            let u = rng.unit();
            assert!((0.0..1.0).contains(&u));
            hits += usize::from(rng.chance(0.25));
        }
        let mean = sum / n as f64;
        let var = sq / n as f64 - mean * mean;
        assert!(mean.abs() < 0.02, "mean {mean}");
        assert!((var - 1.0).abs() < 0.03, "variance {var}");
        let share = hits as f64 / n as f64;
        assert!((share - 0.25).abs() < 0.01, "share {share}");
        assert!(!rng.chance(0.0));
        assert!(rng.chance(1.0));
    }
}
