//! Measurements: RTT histograms, per-flow counters, Jain's fairness index.
//!
//! ## RTT percentiles
//! Every RTT sample goes into a log-bucket histogram of nanoseconds with 128 sub-buckets per power
//! of two: values below 256 ns are exact, above that a bucket spans at most 1/128 of its lower
//! bound, and a percentile is reported as the bucket's midpoint, so **p50 and p99 are within 0.4 %
//! of the exact order statistic**. Min, max and mean are exact. The histogram grows to the largest
//! bucket seen (at most ~7400 `u32` counters, 30 KB, for RTTs up to hours) and never with the
//! number of samples, so memory does not grow with simulated time.

/// Sub-bucket bits: 2^7 = 128 buckets per octave.
const SUB_BITS: u32 = 7;
const SUB: u64 = 1 << SUB_BITS;

#[inline]
fn bucket_of(v: u64) -> usize {
    if v < 2 * SUB {
        return v as usize;
    }
    let e = 63 - v.leading_zeros();
    let shift = e - SUB_BITS;
    ((shift as u64) << SUB_BITS) as usize + (v >> shift) as usize
}

/// Lower bound and width of a bucket.
fn bucket_range(i: usize) -> (u64, u64) {
    let i = i as u64;
    if i < 2 * SUB {
        return (i, 1);
    }
    let shift = (i >> SUB_BITS) - 1;
    let m = (i & (SUB - 1)) + SUB;
    (m << shift, 1 << shift)
}

/// RTT (or delay) statistics of one flow.
#[derive(Clone, Debug, Default)]
pub struct Hist {
    counts: Vec<u32>,
    pub n: u64,
    sum: u128,
    pub min: u64,
    pub max: u64,
}

impl Hist {
    #[inline]
    pub fn record(&mut self, v: u64) {
        let b = bucket_of(v);
        if b >= self.counts.len() {
            self.counts.resize(b + 1, 0);
        }
        self.counts[b] = self.counts[b].saturating_add(1);
        if self.n == 0 || v < self.min {
            self.min = v;
        }
        self.max = self.max.max(v);
        self.n += 1;
        self.sum += v as u128;
    }

    /// Add every sample of `other` (a group's statistics from its flows').
    pub fn merge(&mut self, other: &Hist) {
        if other.n == 0 {
            return;
        }
        if other.counts.len() > self.counts.len() {
            self.counts.resize(other.counts.len(), 0);
        }
        for (a, b) in self.counts.iter_mut().zip(&other.counts) {
            *a = a.saturating_add(*b);
        }
        self.min = if self.n == 0 {
            other.min
        } else {
            self.min.min(other.min)
        };
        self.max = self.max.max(other.max);
        self.n += other.n;
        self.sum += other.sum;
    }

    pub fn mean(&self) -> f64 {
        if self.n == 0 {
            0.0
        } else {
            self.sum as f64 / self.n as f64
        }
    }

    /// The `q`-quantile (0..=1), as the midpoint of its bucket, clamped to [min, max].
    pub fn quantile(&self, q: f64) -> f64 {
        if self.n == 0 {
            return 0.0;
        }
        let rank = ((q * self.n as f64).ceil() as u64).clamp(1, self.n);
        let mut seen = 0u64;
        for (i, &c) in self.counts.iter().enumerate() {
            seen += c as u64;
            if seen >= rank {
                let (lo, w) = bucket_range(i);
                let mid = lo as f64 + (w as f64 - 1.0) / 2.0;
                return mid.clamp(self.min as f64, self.max as f64);
            }
        }
        self.max as f64
    }

    /// Statistics in milliseconds.
    pub fn to_stats_ms(&self) -> crate::model::RttStats {
        crate::model::RttStats {
            min: self.min as f64 / 1e6,
            mean: self.mean() / 1e6,
            p50: self.quantile(0.5) / 1e6,
            p99: self.quantile(0.99) / 1e6,
            max: self.max as f64 / 1e6,
            samples: self.n,
        }
    }
}

/// Jain's fairness index `(Σx)² / (n·Σx²)`: 1 when all equal, `1/n` when one takes everything.
/// 1 for an empty set or all zeros.
pub fn jain(xs: &[f64]) -> f64 {
    let n = xs.len() as f64;
    let s: f64 = xs.iter().sum();
    let s2: f64 = xs.iter().map(|x| x * x).sum();
    if xs.is_empty() || s2 == 0.0 {
        1.0
    } else {
        s * s / (n * s2)
    }
}

/// Counters of one flow.
#[derive(Clone, Debug, Default)]
pub struct FlowMetrics {
    /// Bytes delivered (TCP: in-order payload; UDP/ping: IP bytes received).
    pub delivered: u64,
    pub delivered_prev: u64,
    pub packets_sent: u64,
    pub drops_prev: u64,
    pub rtt: Hist,
    /// One-way delay of UDP packets and echo requests.
    pub owd: Hist,
    /// RTT samples in the current sampling interval.
    pub rtt_int_sum: u128,
    pub rtt_int_n: u64,
    /// One-way delays of UDP packets in the current sampling interval.
    pub owd_int_sum: u128,
    pub owd_int_n: u64,
    /// A finite TCP flow's size (0: bulk) and when its last byte arrived in order.
    pub target: u64,
    pub done_at: Option<u64>,
}

impl FlowMetrics {
    /// TCP payload delivered in order at `now`; the first time the size is reached is the
    /// flow's completion.
    #[inline]
    pub fn deliver_tcp(&mut self, bytes: u64, now: u64) {
        self.delivered += bytes;
        if self.target > 0 && self.done_at.is_none() && self.delivered >= self.target {
            self.done_at = Some(now);
        }
    }

    /// A UDP packet's one-way delay: the run's histogram and the interval's mean.
    #[inline]
    pub fn owd_sample(&mut self, ns: u64) {
        self.owd.record(ns);
        self.owd_int_sum += ns as u128;
        self.owd_int_n += 1;
    }

    /// The mean one-way delay of the interval now ending, ms (reset for the next).
    pub fn take_interval_owd_ms(&mut self) -> Option<f64> {
        let n = std::mem::take(&mut self.owd_int_n);
        let sum = std::mem::take(&mut self.owd_int_sum);
        (n > 0).then(|| sum as f64 / n as f64 / 1e6)
    }

    #[inline]
    pub fn rtt_sample(&mut self, ns: u64) {
        self.rtt.record(ns);
        self.rtt_int_sum += ns as u128;
        self.rtt_int_n += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_contiguous_and_fine() {
        let mut prev_end = 0;
        for i in 0..5000 {
            let (lo, w) = bucket_range(i);
            assert_eq!(lo, prev_end, "bucket {i}");
            assert_eq!(bucket_of(lo), i);
            assert_eq!(bucket_of(lo + w - 1), i);
            assert!(i < 256 || (w as f64) / (lo as f64) <= 1.0 / 128.0);
            prev_end = lo + w;
        }
    }

    #[test]
    fn quantiles_within_half_a_percent() {
        let mut h = Hist::default();
        for v in 1..=100_000u64 {
            h.record(v * 1000);
        }
        let p50 = h.quantile(0.5);
        let p99 = h.quantile(0.99);
        assert!((p50 / 50_000_000.0 - 1.0).abs() < 0.005, "{p50}");
        assert!((p99 / 99_000_000.0 - 1.0).abs() < 0.005, "{p99}");
        assert_eq!(h.min, 1000);
        assert_eq!(h.max, 100_000_000);
        assert!((h.mean() - 50_000_500.0).abs() < 1.0);
    }

    #[test]
    fn merged_histograms_are_one_histogram() {
        let (mut a, mut b, mut all) = (Hist::default(), Hist::default(), Hist::default());
        for v in 1..=1000u64 {
            let h = if v % 3 == 0 { &mut a } else { &mut b };
            h.record(v * 997);
            all.record(v * 997);
        }
        let mut m = Hist::default();
        m.merge(&a);
        m.merge(&b);
        m.merge(&Hist::default());
        assert_eq!((m.n, m.min, m.max), (all.n, all.min, all.max));
        assert_eq!(m.quantile(0.5), all.quantile(0.5));
        assert_eq!(m.quantile(0.99), all.quantile(0.99));
        assert_eq!(m.mean(), all.mean());
    }

    #[test]
    fn jain_index() {
        assert_eq!(jain(&[1.0, 1.0, 1.0]), 1.0);
        assert!((jain(&[1.0, 0.0, 0.0, 0.0]) - 0.25).abs() < 1e-12);
        assert_eq!(jain(&[]), 1.0);
    }
}
