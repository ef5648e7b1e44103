//! Floyd & Jacobson's idle-time estimator and the derivation of its parameters, as ALTQ does it.
//!
//! ## Units and fixed point
//! All times are integer nanoseconds. `avgidle`, `maxidle` and `minidle` are kept **scaled by
//! 2^5** (`FILTER_GAIN = 5`), exactly as ALTQ keeps them scaled in microseconds: with the scaled
//! average `A`, one EWMA step with gain `w = 2^-5` is
//!
//! ```text
//! A ← A + idle − (A >> 5)          (= 32 · ((1 − w)·avg + w·idle))
//! ```
//!
//! and the true average idle time is `A / 32`. No floating point is used per packet.
//!
//! ## Derived parameters (ALTQ's `cbq_compute_idletime`, seed 001 §6.3–6.4)
//! With `f = rate/link`, `g = 1 − 2^-5`, `ptime` the time of an `avgpkt` packet at link rate,
//! `cptime = ptime·(1−f)/f` (the extra time the same packet takes at the class's rate):
//!
//! ```text
//! maxidle = max(cptime · (1 − g^maxburst)/g^maxburst, ptime · (1 − g))
//! offtime = cptime · (1 + (1/(1 − g)) · (1 − g^(minburst−1))/g^(minburst−1))
//! minidle = −(mtu at the class's rate)
//! ```
//!
//! `maxidle` is the average from which `maxburst` back-to-back packets bring `avgidle` to 0;
//! `offtime` is the gap after which `minburst` packets can go back to back again. The powers
//! `(1/g)^n = (32/31)^n` are computed in 2^-60 fixed point with integer multiplications.

use crate::units::NS_PER_SEC;

/// EWMA gain shift: `w = 2^-FILTER_GAIN`.
pub const FILTER_GAIN: u32 = 5;
/// `1/w`.
pub const POWER: i64 = 1 << FILTER_GAIN;
/// An idle interval longer than this resets `avgidle` to `maxidle` (ALTQ: 2 s).
pub const IDLE_RESET_NS: i64 = 2 * NS_PER_SEC as i64;

const FP: u32 = 60;

/// Derived times are saturated here (about 9 years): far beyond any meaningful idle time, and
/// small enough that the estimator's scaled (×32) values and sums stay inside `i64`.
pub const DERIVED_MAX_NS: u64 = u64::MAX / 64;

/// `a·b`, saturating at `u128::MAX` (the operands of the derivation can reach 2^62 · 2^120).
fn sat_mul(a: u128, b: u128) -> u128 {
    a.saturating_mul(b)
}

/// `(32/31)^n − 1` in 2^-60 fixed point, saturating.
fn inv_g_pow_minus_one(n: u32) -> u128 {
    let one: u128 = 1 << FP;
    let mut q = one;
    for _ in 0..n {
        q = (q * 32).div_ceil(31);
        if q > (1u128 << 120) {
            return 1u128 << 120;
        }
    }
    q - one
}

/// Time in ns to send `bytes` at `rate` bit/s, rounded up. Exact: in `u64` when `bytes × 8·10⁹`
/// fits (any packet: up to 2.3·10⁹ bytes), in `u128` otherwise — one hardware division per call
/// on the per-packet path instead of a 128-bit one.
pub fn tx_ns(bytes: u64, rate: u64) -> u64 {
    if rate == 0 {
        return u64::MAX / 4;
    }
    if let Some(bits_ns) = bytes.checked_mul(8 * NS_PER_SEC) {
        return bits_ns.div_ceil(rate).min(u64::MAX / 4);
    }
    let ns = (bytes as u128 * 8 * NS_PER_SEC as u128).div_ceil(rate as u128);
    ns.min(u64::MAX as u128 / 4) as u64
}

/// `⌊x·l / d⌋` (`d > 0`, `0 ≤ l ≤ d`, so the result fits), in 64 bits when `x·l` fits and in 128
/// otherwise: the same value either way, one hardware division on the per-packet path.
fn mul_div_floor(x: i64, l: i64, d: i64) -> i64 {
    match x.checked_mul(l) {
        Some(p) => p.div_euclid(d),
        None => (x as i128 * l as i128).div_euclid(d as i128) as i64,
    }
}

/// `⌊x·n / d⌋` for `n ≤ d`, `d > 0` (the result fits), as [`mul_div_floor`].
fn mul_div_down(x: u64, n: u64, d: u64) -> u64 {
    match x.checked_mul(n) {
        Some(p) => p / d,
        None => (x as u128 * n as u128 / d as u128) as u64,
    }
}

/// The derived estimator parameters of one class, all in ns (unscaled).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Derived {
    pub maxburst: u32,
    pub minburst: u32,
    pub maxidle_ns: u64,
    pub minidle_ns: u64,
    pub offtime_ns: u64,
    /// [`offtime_first_order`] for this class.
    pub offtime_first_order_ns: u64,
    /// `cptime`, for reference.
    pub cptime_ns: u64,
}

/// ALTQ's derivation (see the module docs). `maxburst == 0` picks ALTQ's default (16, or 4 when
/// `cptime` exceeds 10 ms); `minburst` is clamped to `maxburst`.
pub fn derive(
    link: u64,
    rate: u64,
    avgpkt: u32,
    mtu: u32,
    maxburst: u32,
    minburst: u32,
) -> Derived {
    let ptime = tx_ns(avgpkt as u64, link);
    // cptime = ptime·(1−f)/f = avgpkt time at class rate − at link rate.
    let cptime = tx_ns(avgpkt as u64, rate).saturating_sub(ptime);
    let maxburst = if maxburst == 0 {
        if cptime > 10_000_000 {
            super::spec::SLOW_CLASS_MAXBURST
        } else {
            super::spec::DEFAULT_MAXBURST
        }
    } else {
        maxburst
    };
    let minburst = minburst.clamp(1, maxburst.max(1));
    // Every product saturates: with maxburst or minburst in the hundreds, (32/31)^n alone is
    // 2^40 and more, and cptime·(32/31)^n no longer fits any integer — nor means anything.
    let rn = inv_g_pow_minus_one(maxburst);
    let a = sat_mul(cptime as u128, rn) >> FP;
    let b = ptime as u128 / POWER as u128;
    let maxidle = a.max(b).min(DERIVED_MAX_NS as u128) as u64;
    let rm = inv_g_pow_minus_one(minburst - 1);
    let off =
        (cptime as u128).saturating_add(sat_mul(sat_mul(cptime as u128, rm), POWER as u128) >> FP);
    let offtime = off.min(DERIVED_MAX_NS as u128) as u64;
    Derived {
        maxburst,
        minburst,
        maxidle_ns: maxidle.max(1),
        minidle_ns: tx_ns(mtu as u64, rate),
        offtime_ns: offtime.max(1),
        offtime_first_order_ns: offtime_first_order(cptime, minburst),
        cptime_ns: cptime,
    }
}

/// The first-order term of ALTQ's `offtime`, `cptime · (1 + (minburst − 1) · 32/31)`: about
/// `minburst · cptime`, the gap after which `minburst` packets at link rate keep the class at its
/// rate. ALTQ's formula equals it at the default `minburst = 2` and stays below twice it up to
/// `minburst` = 41, where the estimator's memory makes up the difference; beyond, it grows as
/// `(32/31)^minburst` — at 950, decades, and a class that goes overlimit once never sends again.
/// Past twice this term [`CbqParams::bound_offtime`] uses this term instead.
///
/// [`CbqParams::bound_offtime`]: super::CbqParams::bound_offtime
pub fn offtime_first_order(cptime: u64, minburst: u32) -> u64 {
    let n = minburst.max(1) as u128 - 1;
    let t = cptime as u128 + (cptime as u128 * n * POWER as u128).div_ceil(POWER as u128 - 1);
    t.min(DERIVED_MAX_NS as u128).max(1) as u64
}

impl Derived {
    /// The `offtime` in effect: ALTQ's, or with `bound` its first-order term where ALTQ's runs
    /// away (above twice that term).
    pub fn offtime(&self, bound: bool) -> u64 {
        if bound && self.offtime_ns / 2 > self.offtime_first_order_ns {
            self.offtime_first_order_ns
        } else {
            self.offtime_ns
        }
    }
}

/// Estimator state and constants of one class.
#[derive(Copy, Clone, Debug)]
pub struct Estimator {
    /// Scaled average idle (×32).
    pub avgidle: i64,
    /// Scaled bounds (×32); `minidle ≤ 0`.
    pub maxidle: i64,
    pub minidle: i64,
    /// Unscaled.
    pub offtime: u64,
    /// Expected finish time of this class's last packet (`last_`), `None` before the first.
    pub last: Option<u64>,
    /// Time of the last packet at the class's rate (`last_pkt_time_`).
    pub last_pkt_time: u64,
    pub last_len: u32,
}

/// What one estimator step decided.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// `avgidle > 0`: underlimit.
    Under,
    /// `avgidle ≤ 0`: overlimit until `base + tidle`; carries `tidle`.
    Over(u64),
}

impl Estimator {
    pub fn new(
        d: &Derived,
        maxidle: Option<u64>,
        minidle: Option<u64>,
        offtime: Option<u64>,
    ) -> Self {
        let maxidle = maxidle.unwrap_or(d.maxidle_ns).max(1);
        let minidle = minidle.unwrap_or(d.minidle_ns);
        let maxidle = (maxidle as i128 * POWER as i128).min(i64::MAX as i128 / 4) as i64;
        let minidle = -((minidle as i128 * POWER as i128).min(i64::MAX as i128 / 4) as i64);
        Estimator {
            avgidle: maxidle,
            maxidle,
            minidle,
            offtime: offtime.unwrap_or(d.offtime_ns).max(1),
            last: None,
            last_pkt_time: 0,
            last_len: 0,
        }
    }

    /// One packet of `len` bytes finished at `ifnow` (expected finish time); `pkt_time` is its
    /// time at the class's rate. `bytes_mode` weights the step by `len/avgpkt`.
    pub fn update(
        &mut self,
        ifnow: u64,
        len: u32,
        pkt_time: u64,
        avgpkt: u32,
        bytes_mode: bool,
    ) -> Verdict {
        let gap = match self.last {
            Some(l) => ifnow.saturating_sub(l).min(IDLE_RESET_NS as u64) as i64,
            None => IDLE_RESET_NS,
        };
        if gap >= IDLE_RESET_NS {
            self.avgidle = self.maxidle;
        }
        let idle = gap - pkt_time.min(i64::MAX as u64 / 4) as i64;
        // Byte mode's products are taken in 64 bits when they fit (every realistic case: the
        // scaled averages are microseconds to seconds, `a·32` below 2²²) and in 128 bits
        // otherwise, so the result is the 128-bit one either way.
        let a = avgpkt.max(1) as i64;
        let a32 = a * POWER;
        // Weighted decay: (A·L/a) >> 5, L capped at 32·a (one step cannot decay more than all).
        let l = (len as i64).min(a32);
        let decay = if bytes_mode {
            mul_div_floor(self.avgidle, l, a32)
        } else {
            self.avgidle >> FILTER_GAIN
        };
        let mut avg = self.avgidle.saturating_add(idle).saturating_sub(decay);
        self.last = Some(ifnow);
        self.last_pkt_time = pkt_time;
        self.last_len = len;
        if avg <= 0 {
            if avg < self.minidle {
                avg = self.minidle;
            }
            self.avgidle = avg;
            // Next idle that brings avgidle back to 0: ALTQ's ((1 − 2^5)·A) >> 5 = 31·|avg|;
            // byte-weighted: |avg|·(32 − L/a).
            let (num, den) = if bytes_mode {
                ((a32 - l) as u64, a32 as u64)
            } else {
                (POWER as u64 - 1, POWER as u64)
            };
            let extra = mul_div_down(avg.unsigned_abs(), num, den);
            Verdict::Over(pkt_time.saturating_add(extra.min(u64::MAX / 4)))
        } else {
            self.avgidle = avg.min(self.maxidle);
            Verdict::Under
        }
    }

    /// True average idle in ns.
    pub fn avgidle_ns(&self) -> i64 {
        self.avgidle >> FILTER_GAIN
    }
    pub fn at_minidle(&self) -> bool {
        self.avgidle == self.minidle
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn powers() {
        // (32/31)^1 − 1 = 1/31
        let r = inv_g_pow_minus_one(1) as f64 / (1u128 << FP) as f64;
        assert!((r - 1.0 / 31.0).abs() < 1e-12);
        let r = inv_g_pow_minus_one(16) as f64 / (1u128 << FP) as f64;
        assert!((r - ((32.0f64 / 31.0).powi(16) - 1.0)).abs() < 1e-9);
        assert_eq!(inv_g_pow_minus_one(0), 0);
    }

    #[test]
    fn derived_by_hand() {
        // 100 Mbit/s link, 50 Mbit/s class, 1500 B: ptime = 120 µs, cptime = 120 µs.
        let d = derive(100_000_000, 50_000_000, 1500, 1500, 0, 2);
        assert_eq!(d.maxburst, 16);
        assert_eq!(d.cptime_ns, 120_000);
        // maxidle = 120 µs · ((32/31)^16 − 1) = 120 µs · 0.661929 = 79 431 ns
        assert!(
            (d.maxidle_ns as i64 - 79_431).abs() <= 2,
            "{}",
            d.maxidle_ns
        );
        // offtime = 120 µs · (1 + 32/31) = 243 871 ns
        assert!(
            (d.offtime_ns as i64 - 243_871).abs() <= 2,
            "{}",
            d.offtime_ns
        );
        // minidle = 1500 B at 50 Mbit/s = 240 µs
        assert_eq!(d.minidle_ns, 240_000);
        // A 100 % class: cptime 0, maxidle = ptime/32 = 3750 ns.
        let d = derive(100_000_000, 100_000_000, 1500, 1500, 16, 2);
        assert_eq!(d.maxidle_ns, 3750);
        // A slow class: 1500 B at 1 Mbit/s on 100 Mbit/s: cptime 11.88 ms > 10 ms → maxburst 4.
        let d = derive(100_000_000, 1_000_000, 1500, 1500, 0, 8);
        assert_eq!(d.maxburst, 4);
        assert_eq!(d.minburst, 4);
    }

    #[test]
    fn fast_paths_match_128_bit_arithmetic() {
        let mut s = 0x2545_F491_4F6C_DD1Du64;
        let mut next = move || {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            s
        };
        for _ in 0..200_000 {
            // Magnitudes from tiny to the limits, so both the 64-bit and the 128-bit branches run.
            let mut draw = || next() >> (next() % 64);
            let (bytes, rate) = (draw(), draw().max(1));
            let want = (bytes as u128 * 8 * NS_PER_SEC as u128)
                .div_ceil(rate as u128)
                .min(u64::MAX as u128 / 4) as u64;
            assert_eq!(tx_ns(bytes, rate), want, "tx_ns({bytes}, {rate})");

            let d = draw().max(1) >> 1;
            let (d, n) = (d.max(1), draw() % (d.max(1) + 1));
            let x = draw();
            let want = (x as u128 * n as u128 / d as u128) as u64;
            assert_eq!(mul_div_down(x, n, d), want, "{x}·{n}/{d}");
            let xi = if next() % 2 == 0 {
                x as i64
            } else {
                -((x >> 1) as i64)
            };
            let (di, li) = (d as i64 & i64::MAX, n as i64 & i64::MAX);
            if di > 0 && li <= di {
                let want = (xi as i128 * li as i128).div_euclid(di as i128) as i64;
                assert_eq!(mul_div_floor(xi, li, di), want, "{xi}·{li}/{di}");
            }
        }
    }

    /// The whole documented range (maxburst and minburst 1–1024, avgpkt 16–65536, rates from
    /// 1 bit/s to 10 Tbit/s): no overflow (the test profile checks it), every time positive and
    /// saturated, the bound holding, and offtime never falling as minburst grows.
    #[test]
    fn derivation_saturates_over_the_documented_range() {
        let rates = [
            1,
            1_000,
            64_000,
            1_000_000,
            3_000_000,
            1_000_000_000,
            10u64.pow(13),
        ];
        let bursts = [1, 2, 16, 40, 41, 100, 500, 950, 1023, 1024];
        for link in rates {
            for rate in rates.iter().copied().filter(|&r| r <= link) {
                for avgpkt in [16, 1000, 1500, 65536] {
                    let mut last_off = 0;
                    for &minburst in &bursts {
                        for &maxburst in bursts.iter().filter(|&&m| m >= minburst) {
                            let d = derive(link, rate, avgpkt, 1500, maxburst, minburst);
                            assert!((1..=DERIVED_MAX_NS).contains(&d.maxidle_ns));
                            assert!((1..=DERIVED_MAX_NS).contains(&d.offtime_ns));
                            assert!(d.offtime_first_order_ns >= 1);
                            let e = Estimator::new(&d, None, None, None);
                            assert!(e.maxidle > 0 && e.minidle <= 0);
                        }
                        let d = derive(link, rate, avgpkt, 1500, 1024, minburst);
                        assert!(
                            d.offtime_ns >= last_off,
                            "{link} {rate} {avgpkt} {minburst}"
                        );
                        last_off = d.offtime_ns;
                    }
                }
            }
        }
    }

    /// ALTQ's offtime stays under twice its first-order term for ordinary minbursts (so the
    /// default leaves them alone) and runs away from it for large ones, where the bound takes the
    /// first-order term.
    #[test]
    fn offtime_bound_only_cuts_the_runaway_range() {
        for (link, rate) in [
            (100_000_000, 50_000_000),
            (10_000_000, 1_000_000),
            (10u64.pow(9), 64_000),
        ] {
            for minburst in 1..=41 {
                let d = derive(link, rate, 1000, 1500, 1024, minburst);
                assert!(
                    d.offtime_ns >= d.offtime_first_order_ns.saturating_sub(1),
                    "{rate} {minburst}"
                );
                assert_eq!(d.offtime(true), d.offtime_ns, "{rate} {minburst}");
            }
            // ALTQ's formula asks for decades at 950.
            let d = derive(link, rate, 1000, 1500, 950, 950);
            assert!(d.offtime_ns > 1_000 * d.offtime_first_order_ns, "{rate}");
            assert_eq!(d.offtime(true), d.offtime_first_order_ns);
            assert_eq!(d.offtime(false), d.offtime_ns);
        }
        // 1 Mbit/s class of a 10 Mbit/s link, 1000 B: cptime = 8 ms − 0.8 ms = 7.2 ms; the first
        // order term is 7.2 ms · (1 + 949 · 32/31) = 7.06 s.
        let d = derive(10_000_000, 1_000_000, 1000, 1500, 950, 950);
        assert_eq!(d.cptime_ns, 7_200_000);
        assert_eq!(
            d.offtime_first_order_ns,
            7_200_000 + (7_200_000u64 * 949 * 32).div_ceil(31)
        );
        // At the defaults the two agree.
        let d = derive(100_000_000, 50_000_000, 1500, 1500, 16, 2);
        assert!(d.offtime_ns.abs_diff(d.offtime_first_order_ns) <= 1);
    }

    #[test]
    fn maxburst_packets_bring_maxidle_to_zero() {
        // Back-to-back 1500 B packets at link rate for a 50 % class: each idle is −cptime.
        let d = derive(100_000_000, 50_000_000, 1500, 1500, 16, 2);
        for bytes_mode in [false, true] {
            let mut e = Estimator::new(&d, None, None, None);
            e.last = Some(0);
            let mut t = 0;
            let mut n = 0;
            loop {
                t += 120_000;
                n += 1;
                if let Verdict::Over(_) = e.update(t, 1500, 240_000, 1500, bytes_mode) {
                    break;
                }
            }
            assert!((15..=17).contains(&n), "{n}");
        }
    }
}
