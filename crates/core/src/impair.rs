//! Path impairments with netem's semantics (Linux net/sched/sch_netem.c, `netem_enqueue`,
//! `loss_gilb_ell`, `tabledist`), sans-IO: the simulator's data path and the real shaper's
//! emulated link (`linkshare run --emulate`) ask the same [`Impairment`] what becomes of each
//! packet, so a scenario's `[path]` means the same in both.
//!
//! Principles, in netem's order for one packet entering at `now` with the path's base `delay`:
//! 1. **Duplication**: with probability `duplicate` the packet is sent twice; the copy goes
//!    through the rest on its own (netem re-enqueues the clone), never duplicated again.
//! 2. **Loss**: Bernoulli with probability `loss`, or the Gilbert–Elliott chain (netem's
//!    `loss gemodel p r 1-h 1-k`): in the good state one uniform draw moves to bad with
//!    probability `p` and loses with probability `1-k`; in the bad state it moves back with
//!    probability `r` and loses with probability `1-h` (one draw for both, as netem).
//! 3. **Reordering** (netem's `reorder P`, gap 1): with probability `reorder` the packet skips
//!    the delay and is released at once, ahead of those delayed.
//! 4. **Delay and jitter**: otherwise its delay is uniform in `delay ± jitter` (netem's
//!    `tabledist` without a distribution table), at least 0. netem's time-sorted queue lets a
//!    packet with a shorter delay overtake (`jitter_reorder = true`, netem's default); with it
//!    false a packet is never released before the one in front (netem with a FIFO child).
//!
//! Every draw comes from one deterministic generator seeded once: the same seed and the same
//! packets give the same fates.

use crate::qdisc::red::SplitMix;

/// How packets are lost at random.
#[derive(Copy, Clone, Debug, PartialEq)]
pub enum LossModel {
    /// Each packet independently with this probability.
    Bernoulli(f64),
    /// netem's `loss gemodel p r 1-h 1-k`.
    GilbertElliott {
        /// Good → bad transition probability.
        p: f64,
        /// Bad → good transition probability.
        r: f64,
        /// Loss probability in the bad state (`1-h`).
        bad_loss: f64,
        /// Loss probability in the good state (`1-k`).
        good_loss: f64,
    },
}

/// What a path does to the packets crossing it (all probabilities 0..=1).
#[derive(Copy, Clone, Debug, PartialEq)]
pub struct ImpairSpec {
    /// Uniform jitter around the base delay, ns.
    pub jitter_ns: u64,
    /// Jittered packets may overtake each other (netem's default).
    pub jitter_reorder: bool,
    pub loss: LossModel,
    pub reorder: f64,
    pub duplicate: f64,
}

impl Default for ImpairSpec {
    fn default() -> Self {
        ImpairSpec {
            jitter_ns: 0,
            jitter_reorder: true,
            loss: LossModel::Bernoulli(0.0),
            reorder: 0.0,
            duplicate: 0.0,
        }
    }
}

impl ImpairSpec {
    /// Does this spec change anything?
    pub fn is_active(&self) -> bool {
        let lossy = match self.loss {
            LossModel::Bernoulli(p) => p > 0.0,
            LossModel::GilbertElliott {
                bad_loss,
                good_loss,
                ..
            } => bad_loss > 0.0 || good_loss > 0.0,
        };
        self.jitter_ns > 0 || lossy || self.reorder > 0.0 || self.duplicate > 0.0
    }
}

/// Counters of an [`Impairment`].
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct ImpairStats {
    pub lost: u64,
    pub duplicated: u64,
    pub reordered: u64,
}

/// The fate of one packet: the release instants of its copies (none: lost).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct Fate {
    copies: [u64; 2],
    n: u8,
}

impl Fate {
    /// Release instants, ns: empty when the packet is lost, two when it was duplicated.
    pub fn releases(&self) -> &[u64] {
        &self.copies[..self.n as usize]
    }
}

/// One direction's impairment state.
#[derive(Clone, Debug)]
pub struct Impairment {
    spec: ImpairSpec,
    rng: SplitMix,
    bad: bool,
    /// Latest release instant given (for `jitter_reorder = false`).
    last_release: u64,
    pub stats: ImpairStats,
}

impl Impairment {
    pub fn new(spec: ImpairSpec, seed: u64) -> Self {
        Impairment {
            spec,
            rng: SplitMix::new(seed ^ 0x6E65_7465_6D21),
            bad: false,
            last_release: 0,
            stats: ImpairStats::default(),
        }
    }

    pub fn spec(&self) -> &ImpairSpec {
        &self.spec
    }

    /// A packet enters the path at `now` (ns) with base one-way `delay_ns`: when its copies
    /// leave it.
    pub fn admit(&mut self, now: u64, delay_ns: u64) -> Fate {
        let mut fate = Fate::default();
        let copies = if self.spec.duplicate > 0.0 && self.rng.uniform() < self.spec.duplicate {
            self.stats.duplicated += 1;
            2
        } else {
            1
        };
        for _ in 0..copies {
            if self.lose() {
                self.stats.lost += 1;
                continue;
            }
            let t = self.release(now, delay_ns);
            fate.copies[fate.n as usize] = t;
            fate.n += 1;
        }
        fate
    }

    fn lose(&mut self) -> bool {
        match self.spec.loss {
            LossModel::Bernoulli(p) => p > 0.0 && self.rng.uniform() < p,
            LossModel::GilbertElliott {
                p,
                r,
                bad_loss,
                good_loss,
            } => {
                let u = self.rng.uniform();
                if self.bad {
                    if u < r {
                        self.bad = false;
                    }
                    u >= 1.0 - bad_loss
                } else {
                    if u < p {
                        self.bad = true;
                    }
                    u < good_loss
                }
            }
        }
    }

    fn release(&mut self, now: u64, delay_ns: u64) -> u64 {
        if self.spec.reorder > 0.0 && self.rng.uniform() < self.spec.reorder {
            self.stats.reordered += 1;
            return now;
        }
        let j = self.spec.jitter_ns;
        let delay = if j == 0 {
            delay_ns
        } else {
            let off = (self.rng.uniform() * (2 * j) as f64) as u64;
            (delay_ns + off).saturating_sub(j)
        };
        let mut t = now + delay;
        if !self.spec.jitter_reorder {
            t = t.max(self.last_release);
        }
        self.last_release = self.last_release.max(t);
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    fn run(spec: ImpairSpec, seed: u64, n: u64) -> (Impairment, Vec<Vec<u64>>) {
        let mut imp = Impairment::new(spec, seed);
        let fates = (0..n)
            .map(|k| imp.admit(k * MS, 20 * MS).releases().to_vec())
            .collect();
        (imp, fates)
    }

    #[test]
    fn inactive_spec_is_a_plain_delay() {
        let spec = ImpairSpec::default();
        assert!(!spec.is_active());
        let (imp, fates) = run(spec, 1, 100);
        assert!(fates
            .iter()
            .enumerate()
            .all(|(k, f)| f == &[k as u64 * MS + 20 * MS]));
        assert_eq!(imp.stats, ImpairStats::default());
    }

    #[test]
    fn bernoulli_loss_and_duplication_rates_and_determinism() {
        let spec = ImpairSpec {
            loss: LossModel::Bernoulli(0.1),
            duplicate: 0.05,
            ..ImpairSpec::default()
        };
        let (imp, fates) = run(spec, 7, 20_000);
        let lost = fates.iter().map(|f| 2 - f.len().min(2)).sum::<usize>();
        assert!(
            (1800..2200).contains(&(imp.stats.lost as i64)),
            "{:?}",
            imp.stats
        );
        assert!(
            (800..1200).contains(&(imp.stats.duplicated as i64)),
            "{:?}",
            imp.stats
        );
        assert!(lost > 0);
        let (again, fates2) = run(spec, 7, 20_000);
        assert_eq!((again.stats, &fates2), (imp.stats, &fates), "same seed");
        let (other, _) = run(spec, 8, 20_000);
        assert_ne!(other.stats, imp.stats, "another seed, other fates");
    }

    /// Losses of the Gilbert–Elliott chain come in bursts: mean burst 1/r.
    #[test]
    fn gilbert_elliott_loses_in_bursts() {
        let spec = ImpairSpec {
            loss: LossModel::GilbertElliott {
                p: 0.01,
                r: 0.25,
                bad_loss: 1.0,
                good_loss: 0.0,
            },
            ..ImpairSpec::default()
        };
        let (imp, fates) = run(spec, 3, 100_000);
        let mut bursts = 0;
        let mut prev_lost = false;
        for f in &fates {
            let lost = f.is_empty();
            if lost && !prev_lost {
                bursts += 1;
            }
            prev_lost = lost;
        }
        let mean_burst = imp.stats.lost as f64 / bursts as f64;
        // Stationary loss p / (p + r) ≈ 3.8 %; bursts of mean about 1/r = 4.
        let rate = imp.stats.lost as f64 / 1e5;
        assert!((0.03..0.047).contains(&rate), "loss {rate}");
        assert!((3.0..5.0).contains(&mean_burst), "burst {mean_burst}");
    }

    #[test]
    fn jitter_reorders_only_when_allowed() {
        let spec = ImpairSpec {
            jitter_ns: 5 * MS,
            ..ImpairSpec::default()
        };
        let (_, fates) = run(spec, 2, 2000);
        let t: Vec<u64> = fates.iter().map(|f| f[0]).collect();
        assert!(
            t.windows(2).any(|w| w[1] < w[0]),
            "1 ms apart, ±5 ms: overtakes"
        );
        for (k, &x) in t.iter().enumerate() {
            let base = k as u64 * MS + 20 * MS;
            assert!(x + 5 * MS >= base && x <= base + 5 * MS);
        }
        let fifo = ImpairSpec {
            jitter_reorder: false,
            ..spec
        };
        let (_, fates) = run(fifo, 2, 2000);
        let t: Vec<u64> = fates.iter().map(|f| f[0]).collect();
        assert!(
            t.windows(2).all(|w| w[1] >= w[0]),
            "never before the one in front"
        );
    }

    #[test]
    fn reordered_packets_skip_the_delay() {
        let spec = ImpairSpec {
            reorder: 0.25,
            ..ImpairSpec::default()
        };
        let (imp, fates) = run(spec, 5, 4000);
        let at_once = fates
            .iter()
            .enumerate()
            .filter(|(k, f)| f[0] == *k as u64 * MS)
            .count() as u64;
        assert_eq!(at_once, imp.stats.reordered);
        assert!((800..1200).contains(&at_once), "{at_once}");
    }
}
