//! Lateness histogram: log-linear buckets over nanoseconds (8 sub-buckets per power of two, so a
//! reported quantile is at most 12.5 % above the true value), plus the exact maximum. Constant
//! memory (64 × 8 counters), O(1) record.

/// Sub-buckets per power of two, as a power of two.
const SUB_BITS: u32 = 3;
const SUB: usize = 1 << SUB_BITS;

#[derive(Clone, Debug)]
pub struct Hist {
    buckets: Vec<u64>,
    n: u64,
    max: u64,
    sum: u128,
}

impl Default for Hist {
    fn default() -> Self {
        Hist {
            buckets: vec![0; 64 * SUB],
            n: 0,
            max: 0,
            sum: 0,
        }
    }
}

/// Bucket of `v`: values below `SUB` have their own bucket; above, the power of two and the next
/// `SUB_BITS` bits select it.
fn index(v: u64) -> usize {
    if v < SUB as u64 {
        return v as usize;
    }
    let msb = 63 - v.leading_zeros(); // >= SUB_BITS
    let sub = (v >> (msb - SUB_BITS)) as usize & (SUB - 1);
    ((msb - SUB_BITS + 1) as usize) * SUB + sub
}

/// Largest value that falls in bucket `i`.
fn upper(i: usize) -> u64 {
    if i < SUB {
        return i as u64;
    }
    let msb = (i / SUB) as u32 + SUB_BITS - 1;
    let sub = (i % SUB) as u64;
    let lo = (1u64 << msb) | (sub << (msb - SUB_BITS));
    lo.saturating_add((1u64 << (msb - SUB_BITS)) - 1)
}

impl Hist {
    /// Add `other`'s samples (the workers' histograms of `--workers N` into one).
    pub fn merge(&mut self, other: &Hist) {
        for (a, b) in self.buckets.iter_mut().zip(&other.buckets) {
            *a += b;
        }
        self.n += other.n;
        self.max = self.max.max(other.max);
        self.sum += other.sum;
    }

    pub fn record(&mut self, ns: u64) {
        let i = index(ns).min(self.buckets.len() - 1);
        self.buckets[i] += 1;
        self.n += 1;
        self.max = self.max.max(ns);
        self.sum += u128::from(ns);
    }
    /// Cumulative counts at each of `bounds` (ascending): samples whose bucket's largest value
    /// is at most the bound (so a count never includes a sample above its bound).
    pub fn cumulative(&self, bounds: &[u64]) -> Vec<u64> {
        bounds
            .iter()
            .map(|&b| {
                self.buckets
                    .iter()
                    .enumerate()
                    // Only buckets that hold samples: those beyond index(u64::MAX) have no
                    // upper bound in u64.
                    .filter(|(i, c)| **c > 0 && upper(*i) <= b)
                    .map(|(_, c)| *c)
                    .sum()
            })
            .collect()
    }
    /// Sum of all samples, saturated to `u64`.
    pub fn sum(&self) -> u64 {
        u64::try_from(self.sum).unwrap_or(u64::MAX)
    }
    /// Number of samples.
    pub fn count(&self) -> u64 {
        self.n
    }
    /// Largest sample (exact).
    pub fn max(&self) -> u64 {
        self.max
    }
    pub fn mean(&self) -> u64 {
        if self.n == 0 {
            0
        } else {
            (self.sum / u128::from(self.n)) as u64
        }
    }
    /// Upper bound (ns) of the bucket holding quantile `q` (never above the maximum); 0 when empty.
    pub fn quantile(&self, q: f64) -> u64 {
        if self.n == 0 {
            return 0;
        }
        let target = ((self.n as f64) * q).ceil().max(1.0) as u64;
        let mut acc = 0;
        for (i, c) in self.buckets.iter().enumerate() {
            acc += c;
            if acc >= target {
                return upper(i).min(self.max);
            }
        }
        self.max
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cumulative_counts_never_include_samples_above_the_bound() {
        let mut h = Hist::default();
        for v in [0, 900, 1_000, 1_100, 5_000, 1 << 40, u64::MAX] {
            h.record(v);
        }
        let c = h.cumulative(&[1_000, 10_000, u64::MAX]);
        // 1_000's bucket spans 960..=1023 > 1_000, so it counts from the next bound on.
        assert_eq!(c, vec![2, 5, 7]);
        assert!(c.windows(2).all(|w| w[0] <= w[1]));
    }

    #[test]
    fn buckets_cover_every_value_in_order() {
        let mut last = 0;
        for v in (0..5000u64).chain([1 << 20, (1 << 20) + 1, u64::MAX / 3, u64::MAX]) {
            let i = index(v);
            assert!(i >= last || v < 5000, "index not monotonic at {v}");
            assert!(upper(i) >= v, "upper({i}) = {} < {v}", upper(i));
            if i > 0 {
                assert!(upper(i - 1) < v, "{v} belongs below bucket {i}");
            }
            last = i;
        }
        assert!(index(u64::MAX) < 64 * SUB);
    }

    #[test]
    fn quantiles_are_within_an_eighth() {
        let mut h = Hist::default();
        assert_eq!(h.quantile(0.5), 0);
        for _ in 0..98 {
            h.record(1_000);
        }
        h.record(1_000_000);
        h.record(3_000_000);
        let p50 = h.quantile(0.5);
        assert!((1_000..=1_125).contains(&p50), "{p50}");
        let p99 = h.quantile(0.99);
        assert!((1_000_000..=1_125_000).contains(&p99), "{p99}");
        assert_eq!(h.quantile(1.0), 3_000_000);
        assert_eq!(h.max(), 3_000_000);
        assert_eq!(h.count(), 100);
    }
}
