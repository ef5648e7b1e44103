//! `--emulate rate=..,delay=..,loss=..,seed=..`: a link after the scheduler on OUT — serialization
//! at `rate`, a fixed `delay`, random loss from a deterministic PRNG. The line holds at most
//! `limit` frames (default 1000, netem's default `limit`): past it a frame is dropped and counted
//! as `overflow`, so a `rate` below what the scheduler lets go cannot grow memory without bound.

use std::collections::VecDeque;

use linkshare_core::{Duration, Rate};

#[derive(Clone, Debug, PartialEq)]
pub struct EmulateSpec {
    pub rate: Option<Rate>,
    pub delay: Duration,
    /// Probability of loss, 0..=1.
    pub loss: f64,
    pub seed: u64,
    /// Frames the line holds at most (`limit=`).
    pub limit: usize,
}

/// Frames the emulated line holds when `limit=` is not given (netem's default).
pub const DEFAULT_LIMIT: usize = 1000;

impl EmulateSpec {
    /// Parse `rate=10mbit,delay=20ms,loss=1%,seed=7` (every key optional).
    pub fn parse(text: &str) -> Result<EmulateSpec, String> {
        let mut s = EmulateSpec {
            rate: None,
            delay: Duration(0),
            loss: 0.0,
            seed: 1,
            limit: DEFAULT_LIMIT,
        };
        for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (k, v) = part
                .split_once('=')
                .ok_or_else(|| format!("`{part}`: expected key=value"))?;
            match k {
                "rate" => s.rate = Some(Rate::parse(v).map_err(|e| format!("rate: {e}"))?),
                "delay" => s.delay = Duration::parse(v).map_err(|e| format!("delay: {e}"))?,
                "loss" => {
                    let (num, pct) = match v.strip_suffix('%') {
                        Some(n) => (n, true),
                        None => (v, false),
                    };
                    let x: f64 = num.parse().map_err(|_| format!("loss: bad number `{v}`"))?;
                    let p = if pct { x / 100.0 } else { x };
                    if !(0.0..=1.0).contains(&p) {
                        return Err(format!("loss: `{v}` is not between 0 and 100%"));
                    }
                    s.loss = p;
                }
                "seed" => s.seed = v.parse().map_err(|_| format!("seed: bad number `{v}`"))?,
                "limit" => {
                    s.limit = v.parse().map_err(|_| format!("limit: bad number `{v}`"))?;
                    if s.limit == 0 {
                        return Err("limit: must be at least 1 frame".into());
                    }
                }
                _ => {
                    return Err(format!(
                        "unknown key `{k}` (rate, delay, loss, seed, limit)"
                    ))
                }
            }
        }
        Ok(s)
    }
}

/// The emulated link's state.
#[derive(Debug)]
pub struct Emulator {
    spec: EmulateSpec,
    rng: u64,
    link_free_ns: u64,
    queue: VecDeque<(u64, Vec<u8>)>,
    pub lost: u64,
    /// Frames dropped because the line already held `limit` frames.
    pub overflow: u64,
}

impl Emulator {
    pub fn new(spec: EmulateSpec) -> Emulator {
        Emulator {
            rng: spec.seed.max(1),
            spec,
            link_free_ns: 0,
            queue: VecDeque::new(),
            lost: 0,
            overflow: 0,
        }
    }

    fn next_unit(&mut self) -> f64 {
        // xorshift64*
        self.rng ^= self.rng >> 12;
        self.rng ^= self.rng << 25;
        self.rng ^= self.rng >> 27;
        (self.rng.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 11) as f64 / (1u64 << 53) as f64
    }

    /// A frame leaves the scheduler at `now_ns`.
    pub fn push(&mut self, now_ns: u64, frame: Vec<u8>) {
        if self.queue.len() >= self.spec.limit {
            self.overflow += 1;
            return;
        }
        if self.spec.loss > 0.0 && self.next_unit() < self.spec.loss {
            self.lost += 1;
            return;
        }
        let start = self.link_free_ns.max(now_ns);
        let ser = self
            .spec
            .rate
            .and_then(|r| r.tx_time(frame.len() as u64))
            .map_or(0, |d| d.0);
        self.link_free_ns = start + ser;
        self.queue
            .push_back((self.link_free_ns + self.spec.delay.0, frame));
    }

    /// Frames due at `now_ns`, in order.
    pub fn pop_due(&mut self, now_ns: u64) -> Option<Vec<u8>> {
        match self.queue.front() {
            Some((t, _)) if *t <= now_ns => self.queue.pop_front().map(|(_, f)| f),
            _ => None,
        }
    }

    /// When the next frame is due.
    pub fn next_due(&self) -> Option<u64> {
        self.queue.front().map(|(t, _)| *t)
    }

    pub fn in_line(&self) -> usize {
        self.queue.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_delays_and_loses_deterministically() {
        let s = EmulateSpec::parse("rate=8mbit,delay=10ms,loss=50%,seed=3").unwrap();
        assert_eq!(s.rate, Some(Rate(8_000_000)));
        assert_eq!(s.delay, Duration(10_000_000));
        assert!(EmulateSpec::parse("loss=150%").is_err());
        assert!(EmulateSpec::parse("bogus=1").is_err());
        let run = || {
            let mut e = Emulator::new(s.clone());
            for _ in 0..1000 {
                e.push(0, vec![0; 1000]);
            }
            (e.lost, e.next_due())
        };
        let (lost, first) = run();
        assert_eq!(run().0, lost, "same seed, same losses");
        assert!((400..600).contains(&lost), "lost {lost}");
        // 1000 bytes at 8 Mbit/s = 1 ms serialization, plus 10 ms.
        assert_eq!(first, Some(11_000_000));
        let mut e = Emulator::new(EmulateSpec::parse("delay=5ms").unwrap());
        e.push(100, vec![1]);
        assert!(e.pop_due(5_000_099).is_none());
        assert_eq!(e.pop_due(5_000_100), Some(vec![1]));
    }
}

#[cfg(test)]
mod bound_tests {
    use super::*;

    /// A link slower than what the scheduler lets go: the line holds at most `limit` frames.
    #[test]
    fn queue_is_bounded_when_the_emulated_rate_is_below_the_offered_rate() {
        let mut e = Emulator::new(EmulateSpec::parse("rate=1mbit").unwrap());
        for i in 0..100_000u64 {
            e.push(i * 1000, vec![0; 1500]); // 1500 B every µs: 12 Gbit/s offered to 1 Mbit/s
        }
        assert!(e.in_line() <= 1000, "{} frames in line", e.in_line());
        assert_eq!(
            e.in_line() as u64 + e.overflow,
            100_000,
            "every frame queued or counted"
        );
        let mut small = Emulator::new(EmulateSpec::parse("rate=1mbit,limit=5").unwrap());
        for _ in 0..8 {
            small.push(0, vec![0; 100]);
        }
        assert_eq!((small.in_line(), small.overflow), (5, 3));
        assert!(EmulateSpec::parse("limit=0").is_err());
    }
}
