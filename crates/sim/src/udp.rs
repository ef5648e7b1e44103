//! UDP sources: constant bit rate, Poisson, on/off; fixed packet sizes or a weighted mix.
//!
//! * `cbr`: the gap after a packet of `s` bytes is `s·8/rate`, computed in integer nanoseconds with
//!   the remainder carried to the next gap, so the long-run rate is exact (no drift).
//! * `poisson`: exponential gaps with mean `s·8/rate`, from the flow's own seeded generator.
//! * `onoff`: `cbr` during `on`, silent during `off`, repeating from the flow's start.
//!
//! Sizes are IP bytes. A mix (`"imix"`: 7 × 40, 4 × 576, 1 × 1500) picks each packet's size at
//! random with the given weights.

use rand::Rng;
use rand_pcg::Pcg64Mcg;

use crate::scenario::{Pattern, SizeMix, UdpSpec};

#[derive(Clone, Debug)]
pub struct UdpSource {
    rate_bps: u64,
    sizes: Vec<(u32, u32)>,
    total_weight: u32,
    pattern: Pattern,
    start: u64,
    /// Remainder of `bits · 10⁹ / rate`, carried between gaps.
    rem: u64,
    pub seq: u64,
}

impl UdpSource {
    pub fn new(spec: &UdpSpec, start: u64) -> Self {
        let SizeMix { sizes } = spec.size.clone();
        let total_weight = sizes.iter().map(|s| s.1).sum();
        UdpSource {
            rate_bps: spec.rate.0,
            sizes,
            total_weight,
            pattern: spec.pattern,
            start,
            rem: 0,
            seq: 0,
        }
    }

    /// Size of the next packet.
    #[inline]
    pub fn next_size(&self, rng: &mut Pcg64Mcg) -> u32 {
        if self.sizes.len() == 1 {
            return self.sizes[0].0;
        }
        let mut x = rng.gen_range(0..self.total_weight.max(1));
        for &(s, w) in &self.sizes {
            if x < w {
                return s;
            }
            x -= w;
        }
        self.sizes[self.sizes.len() - 1].0
    }

    /// When to send the packet after one of `size` bytes sent at `now`.
    #[inline]
    pub fn next_time(&mut self, now: u64, size: u32, rng: &mut Pcg64Mcg) -> u64 {
        // Fits in u64: sizes are at most 65535 bytes and `rem < rate`.
        let num = size as u64 * 8_000_000_000 + self.rem;
        let gap = num / self.rate_bps;
        self.rem = num % self.rate_bps;
        match self.pattern {
            Pattern::Cbr => now + gap,
            Pattern::Poisson => {
                let u: f64 = rng.gen_range(f64::EPSILON..1.0);
                now + (-(u.ln()) * gap as f64) as u64
            }
            Pattern::OnOff { on, off } => {
                let t = now + gap;
                let period = on.0 + off.0;
                let phase = (t - self.start) % period;
                if phase < on.0 {
                    t
                } else {
                    self.rem = 0;
                    t - phase + period
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use linkshare_core::{Duration, Rate};
    use rand::SeedableRng;

    #[test]
    fn cbr_rate_is_exact_and_onoff_skips_off_periods() {
        let mut rng = Pcg64Mcg::seed_from_u64(1);
        let spec = UdpSpec {
            rate: Rate(3_000_000),
            size: SizeMix::fixed(1000),
            pattern: Pattern::Cbr,
        };
        let mut u = UdpSource::new(&spec, 0);
        let mut t = 0;
        for _ in 0..3000 {
            t = u.next_time(t, 1000, &mut rng);
        }
        // 3000 packets of 8000 bits at 3 Mbit/s: exactly 8 s.
        assert_eq!(t, 8_000_000_000);

        let spec = UdpSpec {
            rate: Rate(8_000_000),
            size: SizeMix::fixed(1000),
            pattern: Pattern::OnOff {
                on: Duration::from_millis(10),
                off: Duration::from_millis(30),
            },
        };
        let mut u = UdpSource::new(&spec, 0);
        let mut times = vec![0];
        let mut t = 0;
        for _ in 0..12 {
            t = u.next_time(t, 1000, &mut rng);
            times.push(t);
        }
        // 1 ms gaps, 10 packets per on period, next period starts at 40 ms.
        assert_eq!(times[9], 9_000_000);
        assert_eq!(times[10], 40_000_000);
        assert_eq!(times[11], 41_000_000);
    }

    #[test]
    fn imix_weights() {
        let mut rng = Pcg64Mcg::seed_from_u64(7);
        let spec = UdpSpec {
            rate: Rate(1_000_000),
            size: SizeMix::imix(),
            pattern: Pattern::Poisson,
        };
        let u = UdpSource::new(&spec, 0);
        let mut counts = [0u32; 3];
        for _ in 0..12_000 {
            match u.next_size(&mut rng) {
                40 => counts[0] += 1,
                576 => counts[1] += 1,
                1500 => counts[2] += 1,
                other => panic!("size {other}"),
            }
        }
        assert!((counts[0] as i64 - 7000).abs() < 300, "{counts:?}");
        assert!((counts[1] as i64 - 4000).abs() < 300, "{counts:?}");
        assert!((counts[2] as i64 - 1000).abs() < 200, "{counts:?}");
    }
}
