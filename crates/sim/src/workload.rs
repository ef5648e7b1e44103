//! Workloads of arriving flows: when flows arrive, how big they are, and how long each would take
//! on an empty path (the unloaded FCT that slowdown divides by).
//!
//! Principles:
//! * **Drawn once, before the run**: the scenario's check draws every arrival time and size from
//!   the scenario's seed (one PCG stream per `[[flow]]` entry), so the simulator and the lab run
//!   the very same flows; nothing here reads a clock or a file.
//! * **Arrivals**: a Poisson process is exponential gaps of mean `1 / rate`, drawn by inversion
//!   (`−ln(U) / rate`); a trace gives the times.
//! * **Sizes** by inversion of their CDF from one uniform draw each: exponential
//!   `−m·ln(U)`; lognormal `exp(μ + σ·Z)` with `Z` standard normal (Box–Muller) and `μ = ln(mean)
//!   − σ²/2` so that `mean` is the mean; Pareto `x_m·U^(−1/α)` with `x_m = mean·(α−1)/α`; an
//!   empirical CDF interpolated linearly between its points (as ns-2's
//!   `EmpiricalRandomVariable` with interpolation, which the DCTCP and pFabric simulations used).
//!   Every size is rounded to a whole byte, at least 1.
//! * **Unloaded FCT** ([`ideal_fct_ns`]): see its comment and `docs/outputs.md`.

use rand::Rng;

/// An empirical CDF: sizes in bytes with their cumulative probability, both non-decreasing, the
/// last probability 1.
#[derive(Clone, Debug, PartialEq)]
pub struct Cdf {
    points: Vec<(f64, f64)>,
}

impl Cdf {
    /// Read `size probability` lines (whitespace or comma separated; `#` starts a comment).
    /// `unit` multiplies the sizes (1 for bytes, 1460 for the papers' MSS-sized packets), and a
    /// probability column in percent (its last value 100) is divided by 100. Errors carry the
    /// 1-based line.
    pub fn parse(text: &str, unit: f64) -> Result<Cdf, (usize, String)> {
        let mut points = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let line = line.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            let cols: Vec<&str> = line
                .split(|c: char| c.is_whitespace() || c == ',')
                .filter(|c| !c.is_empty())
                .collect();
            if cols.len() != 2 {
                return Err((
                    i + 1,
                    format!("expected `size probability`, found `{line}`"),
                ));
            }
            let num = |s: &str| {
                s.parse::<f64>()
                    .ok()
                    .filter(|v| v.is_finite() && *v >= 0.0)
                    .ok_or((i + 1, format!("`{s}` is not a number ≥ 0")))
            };
            points.push((num(cols[0])? * unit, num(cols[1])?, i + 1));
        }
        let Some(&(_, last, last_line)) = points.last() else {
            return Err((0, "the CDF has no points".into()));
        };
        let scale = if (last - 100.0).abs() < 1e-9 {
            100.0
        } else if (last - 1.0).abs() < 1e-9 {
            1.0
        } else {
            return Err((
                last_line,
                format!("the last probability is {last}; a CDF ends at 1 (or 100 %)"),
            ));
        };
        let mut out: Vec<(f64, f64)> = Vec::with_capacity(points.len());
        for (size, p, line) in points {
            let p = p / scale;
            if let Some(&(s0, p0)) = out.last() {
                if size < s0 || p < p0 {
                    return Err((line, "sizes and probabilities must not decrease".into()));
                }
            }
            out.push((size, p));
        }
        Ok(Cdf { points: out })
    }

    /// The size at cumulative probability `u` in [0, 1): linear between the points around it.
    pub fn quantile(&self, u: f64) -> f64 {
        let mut prev = (self.points[0].0, 0.0);
        for &(s, p) in &self.points {
            if u < p {
                let w = if p > prev.1 {
                    (u - prev.1) / (p - prev.1)
                } else {
                    0.0
                };
                return prev.0 + w * (s - prev.0);
            }
            prev = (s, p);
        }
        prev.0
    }

    /// The mean of the interpolated distribution (each segment uniform between its ends).
    pub fn mean(&self) -> f64 {
        let mut m = 0.0;
        let mut prev = (self.points[0].0, 0.0);
        for &(s, p) in &self.points {
            m += (p - prev.1) * (s + prev.0) / 2.0;
            prev = (s, p);
        }
        m
    }
}

/// The size distribution of arriving flows (payload bytes).
#[derive(Clone, Debug, PartialEq)]
pub enum SizeDist {
    Fixed(u64),
    Exponential { mean: f64 },
    Lognormal { mu: f64, sigma: f64 },
    Pareto { xm: f64, alpha: f64 },
    Empirical(Cdf),
}

impl SizeDist {
    /// A lognormal of the given mean and σ of the underlying normal.
    pub fn lognormal(mean: f64, sigma: f64) -> SizeDist {
        SizeDist::Lognormal {
            mu: mean.ln() - sigma * sigma / 2.0,
            sigma,
        }
    }
    /// A Pareto of the given mean and shape `alpha` (> 1).
    pub fn pareto(mean: f64, alpha: f64) -> SizeDist {
        SizeDist::Pareto {
            xm: mean * (alpha - 1.0) / alpha,
            alpha,
        }
    }

    pub fn mean(&self) -> f64 {
        match self {
            SizeDist::Fixed(b) => *b as f64,
            SizeDist::Exponential { mean } => *mean,
            SizeDist::Lognormal { mu, sigma } => (mu + sigma * sigma / 2.0).exp(),
            SizeDist::Pareto { xm, alpha } => xm * alpha / (alpha - 1.0),
            SizeDist::Empirical(c) => c.mean(),
        }
    }

    /// One size, at least 1 byte and at most `cap`.
    pub fn sample<R: Rng>(&self, rng: &mut R, cap: u64) -> u64 {
        let x = match self {
            SizeDist::Fixed(b) => *b as f64,
            SizeDist::Exponential { mean } => -mean * open_unit(rng).ln(),
            SizeDist::Lognormal { mu, sigma } => {
                // Box–Muller: one standard normal from two uniforms.
                let z = (-2.0 * open_unit(rng).ln()).sqrt()
                    * (2.0 * std::f64::consts::PI * open_unit(rng)).cos();
                (mu + sigma * z).exp()
            }
            SizeDist::Pareto { xm, alpha } => xm * open_unit(rng).powf(-1.0 / alpha),
            SizeDist::Empirical(c) => c.quantile(rng.gen_range(0.0..1.0)),
        };
        if x.is_finite() {
            (x.round() as u64).clamp(1, cap.max(1))
        } else {
            cap.max(1)
        }
    }
}

/// A uniform draw in (0, 1): never 0, so logarithms and negative powers stay finite.
fn open_unit<R: Rng>(rng: &mut R) -> f64 {
    rng.gen_range(f64::EPSILON..1.0)
}

/// Poisson arrival instants (ns) in `[from, to)` at `rate` per second, at most `max` of them.
pub fn poisson_arrivals<R: Rng>(
    rate: f64,
    from: u64,
    to: u64,
    max: usize,
    rng: &mut R,
) -> Vec<u64> {
    let mut out = Vec::new();
    if rate.is_nan() || rate <= 0.0 {
        return out;
    }
    let mut t = from as f64;
    loop {
        t += -open_unit(rng).ln() / rate * 1e9;
        if t >= to as f64 || out.len() >= max {
            return out;
        }
        out.push(t as u64);
    }
}

/// The path a flow would have to itself.
#[derive(Copy, Clone, Debug, PartialEq)]
pub struct IdealPath {
    /// `2 × (link delay + extra_delay)`, ns.
    pub base_rtt_ns: u64,
    /// Link rate, bit/s.
    pub rate_bps: u64,
    /// Payload bytes per segment.
    pub mss: u32,
    /// Bytes a segment adds on the wire: IP and TCP headers (52) plus the link's `overhead`.
    pub per_segment: u32,
    /// Initial window, segments.
    pub init_cwnd: u32,
}

/// The unloaded FCT of `size` payload bytes, in ns: first byte sent to last byte received, on an
/// empty path, without handshake (sim and lab both exclude it).
///
/// Slow start in rounds: round `k` sends `w = init_cwnd·2^k` segments back to back (`w·tx`, `tx`
/// a full segment's serialisation `(mss + per_segment)·8 / rate`); the next round starts when the
/// first segment's ACK is back, `tx + base_rtt` later (an ACK per two segments still opens the
/// window by two: Linux's slow start counts segments acknowledged). Once a round's
/// serialisation covers `tx + base_rtt` the ACK clock keeps the link busy and the rest goes at the
/// link rate. The last byte arrives when its round (or the rest) has been serialised, plus
/// `base_rtt / 2`. Receive-window limits, delayed-ACK timers and losses are left out: the
/// unloaded FCT of a path the flow has to itself.
pub fn ideal_fct_ns(size: u64, p: &IdealPath) -> u64 {
    let mss = u64::from(p.mss.max(1));
    let segs = size.div_ceil(mss).max(1);
    let rate = p.rate_bps.max(1) as f64;
    let seg_tx = |n: u64, bytes: u64| (bytes + n * u64::from(p.per_segment)) as f64 * 8e9 / rate;
    let tx = seg_tx(1, mss);
    let rtt = p.base_rtt_ns as f64;
    let mut sent = 0u64;
    let mut w = u64::from(p.init_cwnd.max(1));
    let mut t = 0.0;
    loop {
        let left = segs - sent;
        let pipe_full = w as f64 * tx >= tx + rtt;
        if left <= w || pipe_full {
            // The rest, its payload bytes exactly.
            let bytes = size - sent * mss;
            return (t + seg_tx(left, bytes) + rtt / 2.0).round() as u64;
        }
        sent += w;
        t += tx + rtt;
        w = w.saturating_mul(2);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_pcg::Pcg64Mcg;

    #[test]
    fn cdf_quantiles_interpolate_and_the_mean_matches_draws() {
        let c = Cdf::parse("# web\n10 0\n10 15\n20 40\n100 100\n", 1000.0).unwrap();
        assert_eq!(c.quantile(0.0), 10_000.0);
        assert_eq!(c.quantile(0.15), 10_000.0);
        assert!((c.quantile(0.275) - 15_000.0).abs() < 1e-6);
        assert!((c.quantile(0.7) - 60_000.0).abs() < 1e-6);
        // Mean: 0.15·10k + 0.25·15k + 0.6·60k = 41 250.
        assert!((c.mean() - 41_250.0).abs() < 1e-6);
        let d = SizeDist::Empirical(c);
        let mut rng = Pcg64Mcg::seed_from_u64(7);
        let n = 200_000;
        let m: f64 = (0..n)
            .map(|_| d.sample(&mut rng, u64::MAX) as f64)
            .sum::<f64>()
            / n as f64;
        assert!((m / 41_250.0 - 1.0).abs() < 0.01, "{m}");
    }

    #[test]
    fn cdf_errors_name_the_line() {
        assert_eq!(Cdf::parse("1 0.5\n2 0.4\n3 1\n", 1.0).unwrap_err().0, 2);
        assert_eq!(Cdf::parse("1 0.5\n2 0.9\n", 1.0).unwrap_err().0, 2);
        assert_eq!(Cdf::parse("1 0.5 7\n", 1.0).unwrap_err().0, 1);
        assert_eq!(Cdf::parse("x 1\n", 1.0).unwrap_err().0, 1);
        assert_eq!(Cdf::parse("# only\n", 1.0).unwrap_err().0, 0);
    }

    #[test]
    fn parametric_means_hold() {
        let mut rng = Pcg64Mcg::seed_from_u64(1);
        let n = 400_000;
        for (d, tol) in [
            (SizeDist::Exponential { mean: 50_000.0 }, 0.01),
            (SizeDist::lognormal(50_000.0, 1.0), 0.02),
            (SizeDist::pareto(50_000.0, 2.5), 0.03),
        ] {
            assert!((d.mean() - 50_000.0).abs() < 1e-6);
            let m: f64 = (0..n)
                .map(|_| d.sample(&mut rng, u64::MAX) as f64)
                .sum::<f64>()
                / n as f64;
            assert!((m / 50_000.0 - 1.0).abs() < tol, "{d:?}: {m}");
        }
        assert_eq!(SizeDist::Fixed(0).sample(&mut rng, 10), 1);
        assert_eq!(SizeDist::Fixed(99).sample(&mut rng, 10), 10);
    }

    #[test]
    fn poisson_gaps_have_the_rate_and_stay_in_the_window() {
        let mut rng = Pcg64Mcg::seed_from_u64(3);
        let a = poisson_arrivals(1000.0, 1_000_000_000, 11_000_000_000, usize::MAX, &mut rng);
        assert!(a.windows(2).all(|w| w[0] <= w[1]));
        assert!(a[0] >= 1_000_000_000 && *a.last().unwrap() < 11_000_000_000);
        // 10 000 expected; the standard deviation is 100.
        assert!((a.len() as i64 - 10_000).abs() < 400, "{}", a.len());
        assert_eq!(
            poisson_arrivals(1000.0, 0, 10_000_000_000, 5, &mut rng).len(),
            5
        );
        assert!(poisson_arrivals(0.0, 0, 10, 5, &mut rng).is_empty());
    }

    #[test]
    fn ideal_fct_by_hand() {
        // 10 Mbit/s, 20 ms RTT, MSS 1448 + 52: tx = 1.2 ms.
        let p = IdealPath {
            base_rtt_ns: 20_000_000,
            rate_bps: 10_000_000,
            mss: 1448,
            per_segment: 52,
            init_cwnd: 10,
        };
        // One segment of 1000 B: (1052·8/10⁷) s + 10 ms.
        assert_eq!(ideal_fct_ns(1000, &p), 10_841_600);
        // 10 segments: one round, 12 ms + 10 ms.
        assert_eq!(ideal_fct_ns(14_480, &p), 22_000_000);
        // 11 segments: a second round starting at 1.2 + 20 ms, one segment in it.
        assert_eq!(
            ideal_fct_ns(15_928, &p),
            21_200_000 + 1_200_000 + 10_000_000
        );
        // 1 MB: round 0 (10), then the pipe is full at w = 20 (24 ms ≥ 21.2 ms): the rest at
        // the link rate.
        let segs = 1_000_000u64.div_ceil(1448);
        let rest = 1_000_000 - 10 * 1448;
        let want = 21_200_000.0 + (rest + (segs - 10) * 52) as f64 * 800.0 + 10_000_000.0;
        assert_eq!(ideal_fct_ns(1_000_000, &p), want.round() as u64);
    }
}
