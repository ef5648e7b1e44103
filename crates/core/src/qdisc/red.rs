//! `red`: Random Early Detection (Floyd & Jacobson, "Random Early Detection Gateways for
//! Congestion Avoidance", IEEE/ACM ToN 1993), and the pieces [`super::rio`] reuses.
//!
//! On each enqueue the average queue (bytes) is updated as an EWMA with weight `wq`
//! ([`RedAverage`]); after an idle period the average decays as `(1 - wq)^m · avg` with
//! `m = idle / (avpkt · 8 / bandwidth)`, the packets the link could have sent meanwhile (§4).
//! Between `min` and `max` a packet is dropped (or CE-marked with `ecn`) with probability
//! `pa = pb / (1 - count · pb)`, `pb = max_p (avg - min) / (max - min)` ([`RedProfile`]), where
//! `count` is the number of packets accepted since the last drop (or since `avg` went above
//! `min`) ([`RedSpacing`]); so the gap between drops is uniform on `1 ..= 1/pb` and the drop
//! fraction is `2 pb / (1 + pb)` (§7, "method 2"). With `gentle`, `pb` rises from `max_p` to 1
//! between `max` and `2 max`; above that (or above `max` without gentle) every packet is dropped
//! (`aqm_forced`). With `ecn` and not `harddrop`, ECN-capable packets are marked instead of
//! dropped in every region, as Linux does. Early/forced drops are refusals at enqueue.
//! O(1) per packet. Randomness is a splitmix64 stream seeded by `seed`.

use std::collections::VecDeque;

use super::{Books, Dequeued, Discipline, DropReason, Dropped, ParamError};
use crate::packet::Packet;
use crate::units::{Rate, Time};

/// RED parameters (policy keys).
#[derive(Clone, Debug, PartialEq)]
pub struct RedParams {
    pub limit: u32,
    pub min: u32,
    pub max: u32,
    pub avpkt: u32,
    /// Packets; 0 = (2 min + max) / (3 avpkt).
    pub burst: u32,
    /// None = derived from burst as tc does.
    pub wq: Option<f64>,
    pub max_p: f64,
    pub bandwidth: Rate,
    pub ecn: bool,
    pub gentle: bool,
    pub harddrop: bool,
    pub seed: u64,
}

impl Default for RedParams {
    fn default() -> Self {
        RedParams {
            limit: 400_000,
            min: 30_000,
            max: 90_000,
            avpkt: 1000,
            burst: 0,
            wq: None,
            max_p: 0.02,
            bandwidth: Rate::mbit(10),
            ecn: false,
            gentle: false,
            harddrop: false,
            seed: 1,
        }
    }
}

impl RedParams {
    pub fn validate(&self) -> Result<(), ParamError> {
        if self.avpkt == 0 {
            return Err(ParamError::new(
                "avpkt",
                "must be above 0, got 0",
                "use e.g. 1000",
            ));
        }
        validate_profile(
            self.min,
            self.max,
            self.max_p,
            self.limit,
            ["min", "max", "max_p"],
        )?;
        if let Some(w) = self.wq {
            if !(w > 0.0 && w <= 1.0) {
                return Err(ParamError::new(
                    "wq",
                    format!("must be in (0, 1], got {w}"),
                    "use e.g. 0.002",
                ));
            }
        }
        if self.bandwidth.0 == 0 {
            return Err(ParamError::new(
                "bandwidth",
                "must be above 0",
                "set it to the link rate",
            ));
        }
        Ok(())
    }
    pub fn effective_burst(&self) -> u32 {
        if self.burst != 0 {
            return self.burst;
        }
        ((2 * self.min as u64 + self.max as u64) / (3 * self.avpkt as u64)).max(1) as u32
    }
    /// `wq` if set, else tc's rule ([`derive_wq`]).
    pub fn effective_wq(&self) -> f64 {
        self.wq
            .unwrap_or_else(|| derive_wq(self.effective_burst(), self.min, self.avpkt))
    }
}

/// tc's rule for `wq`: the smallest W = 2^-k with `burst + 1 - min/avpkt <= (1 - (1-W)^burst) / W`.
pub fn derive_wq(burst: u32, min: u32, avpkt: u32) -> f64 {
    let b = burst as f64;
    let a = b + 1.0 - min as f64 / avpkt as f64;
    let mut w = 0.5f64;
    for _ in 1..32 {
        if a <= (1.0 - (1.0 - w).powf(b)) / w {
            return w;
        }
        w /= 2.0;
    }
    w
}

/// Check one (min, max, max_p) profile; `keys` are its policy keys (e.g. `["in_min", "in_max",
/// "in_max_p"]`).
pub(crate) fn validate_profile(
    min: u32,
    max: u32,
    max_p: f64,
    limit: u32,
    keys: [&'static str; 3],
) -> Result<(), ParamError> {
    if min == 0 || min >= max {
        return Err(ParamError::new(
            keys[0],
            format!("must be above 0 and below {} ({max}), got {min}", keys[1]),
            format!("use e.g. {} = {} / 3", keys[0], keys[1]),
        ));
    }
    if max > limit {
        return Err(ParamError::new(
            keys[1],
            format!("must not exceed limit ({limit}), got {max}"),
            format!("raise limit or lower {}", keys[1]),
        ));
    }
    if !(max_p > 0.0 && max_p <= 1.0) {
        return Err(ParamError::new(
            keys[2],
            format!("must be in (0, 1], got {max_p}"),
            "use e.g. 0.02",
        ));
    }
    Ok(())
}

/// A RED drop profile: where early drops start (`min`), where they are forced (`max`, or
/// `2 max` with `gentle`), and the probability at `max`.
#[derive(Copy, Clone, Debug, PartialEq)]
pub struct RedProfile {
    pub min: u32,
    pub max: u32,
    pub max_p: f64,
    pub gentle: bool,
}

impl RedProfile {
    /// Base probability `pb` at `avg`: `None` below min, `Some(INFINITY)` when forced.
    pub fn pb(&self, avg: f64) -> Option<f64> {
        let (min, max) = (self.min as f64, self.max as f64);
        if avg < min {
            None
        } else if avg < max {
            Some(self.max_p * (avg - min) / (max - min))
        } else if self.gentle && avg < 2.0 * max {
            Some(self.max_p + (1.0 - self.max_p) * (avg - max) / max)
        } else {
            Some(f64::INFINITY)
        }
    }
}

/// The EWMA average queue with idle-time correction (Floyd & Jacobson §4).
#[derive(Clone, Debug)]
pub struct RedAverage {
    avg: f64,
    /// When the queue went empty; `None` while backlogged.
    idle_since: Option<Time>,
}

impl Default for RedAverage {
    fn default() -> Self {
        RedAverage {
            avg: 0.0,
            idle_since: Some(Time::ZERO),
        }
    }
}

impl RedAverage {
    pub fn get(&self) -> f64 {
        self.avg
    }
    /// Update at a packet arrival with the current backlog (bytes, before this packet). After
    /// idle, the average decays by `(1 - wq)^m`, `m = idle / pkt_time`, instead. O(1).
    pub fn update(&mut self, backlog: u64, now: Time, wq: f64, pkt_time_s: f64) {
        if let Some(since) = self.idle_since.take() {
            let m = now.saturating_since(since).as_secs_f64() / pkt_time_s;
            self.avg *= (1.0 - wq).powf(m);
        } else {
            self.avg = (1.0 - wq) * self.avg + wq * backlog as f64;
        }
    }
    /// The queue this average follows went empty at `now`.
    pub fn went_idle(&mut self, now: Time) {
        self.idle_since = Some(now);
    }
}

/// Count-based uniform spacing of early drops (Floyd & Jacobson §7, method 2).
#[derive(Clone, Debug, Default)]
pub struct RedSpacing {
    /// Packets accepted since the last drop, or since the average went above `min`.
    count: u64,
}

/// Why RED decided against a packet.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum RedVerdict {
    Pass,
    Early,
    Forced,
}

impl RedSpacing {
    pub fn count(&self) -> u64 {
        self.count
    }
    /// Decide for one arriving packet given `pb` (see [`RedProfile::pb`]) and a uniform draw
    /// source. `pa = pb / (1 - count·pb)`, so the gap between drops is uniform on `1..=1/pb`.
    pub fn decide(&mut self, pb: Option<f64>, rng: &mut SplitMix) -> RedVerdict {
        match pb {
            None => {
                self.count = 0;
                RedVerdict::Pass
            }
            Some(pb) if pb.is_infinite() => {
                self.count = 0;
                RedVerdict::Forced
            }
            Some(pb) => {
                let denom = 1.0 - self.count as f64 * pb;
                let pa = if denom <= 0.0 {
                    1.0
                } else {
                    (pb / denom).min(1.0)
                };
                if rng.uniform() < pa {
                    self.count = 0;
                    RedVerdict::Early
                } else {
                    self.count += 1;
                    RedVerdict::Pass
                }
            }
        }
    }
}

/// A small deterministic PRNG (splitmix64).
#[derive(Clone, Debug)]
pub struct SplitMix(u64);

impl SplitMix {
    pub fn new(seed: u64) -> Self {
        SplitMix(seed)
    }
    /// Uniform in [0, 1).
    pub fn uniform(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
    /// The next 64 uniform bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

/// The RED qdisc.
#[derive(Debug)]
pub struct Red<P> {
    p: RedParams,
    profile: RedProfile,
    wq: f64,
    pkt_time_s: f64,
    q: VecDeque<P>,
    bytes: u64,
    avg: RedAverage,
    spacing: RedSpacing,
    rng: SplitMix,
    early: u64,
    forced: u64,
    books: Books<P>,
}

impl<P: Packet> Red<P> {
    pub fn new(params: RedParams) -> Result<Self, ParamError> {
        params.validate()?;
        Ok(Red {
            wq: params.effective_wq(),
            pkt_time_s: params.avpkt as f64 * 8.0 / params.bandwidth.0 as f64,
            rng: SplitMix::new(params.seed),
            profile: RedProfile {
                min: params.min,
                max: params.max,
                max_p: params.max_p,
                gentle: params.gentle,
            },
            p: params,
            q: VecDeque::new(),
            bytes: 0,
            avg: RedAverage::default(),
            spacing: RedSpacing::default(),
            early: 0,
            forced: 0,
            books: Books::new(),
        })
    }
    pub fn avg(&self) -> f64 {
        self.avg.get()
    }
}

impl<P: Packet> Discipline<P> for Red<P> {
    fn books(&self) -> &Books<P> {
        &self.books
    }
    fn books_mut(&mut self) -> &mut Books<P> {
        &mut self.books
    }
    /// O(1).
    fn enqueue_inner(&mut self, mut pkt: P, now: Time) -> Result<(), Dropped<P>> {
        let len = pkt.len();
        self.avg.update(self.bytes, now, self.wq, self.pkt_time_s);
        let verdict = self
            .spacing
            .decide(self.profile.pb(self.avg.get()), &mut self.rng);
        let reason = match verdict {
            RedVerdict::Pass => None,
            RedVerdict::Early => Some(DropReason::Aqm),
            RedVerdict::Forced => Some(DropReason::AqmForced),
        };
        if let Some(r) = reason {
            if self.p.ecn && !self.p.harddrop && pkt.mark_ce() {
                self.books.mark(1);
            } else {
                if r == DropReason::Aqm {
                    self.early += 1;
                } else {
                    self.forced += 1;
                }
                return Err(Dropped {
                    packet: pkt,
                    reason: r,
                });
            }
        }
        if self.bytes + len as u64 > self.p.limit as u64 {
            return Err(Dropped {
                packet: pkt,
                reason: DropReason::ByteLimit,
            });
        }
        self.bytes += len as u64;
        self.q.push_back(pkt);
        Ok(())
    }
    /// O(1).
    fn dequeue_inner(&mut self, now: Time) -> Dequeued<P> {
        match self.q.pop_front() {
            Some(p) => {
                self.bytes -= p.len() as u64;
                if self.q.is_empty() {
                    self.avg.went_idle(now);
                }
                Dequeued::Packet(p)
            }
            None => Dequeued::Empty,
        }
    }
    fn kind_inner(&self) -> &'static str {
        "red"
    }
    fn extra_stats_inner(&self, f: &mut dyn FnMut(&'static str, f64)) {
        f("avg_queue_bytes", self.avg.get());
        f("count", self.spacing.count() as f64);
        f("early_drops", self.early as f64);
        f("forced_drops", self.forced as f64);
        f("marks", self.books.stats().marked as f64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::PacketMeta;
    use crate::qdisc::Qdisc;

    #[test]
    fn derived_burst_and_wq() {
        let p = RedParams::default();
        assert_eq!(p.effective_burst(), 50);
        let w = p.effective_wq();
        assert!(w > 0.0 && w < 0.5);
    }

    #[test]
    fn no_drop_below_min_and_avg_follows_ewma() {
        let mut r: Red<PacketMeta> = Red::new(RedParams {
            wq: Some(0.5),
            ..Default::default()
        })
        .unwrap();
        let pk = PacketMeta {
            len: 1000,
            ..Default::default()
        };
        r.enqueue(pk, Time(0)).unwrap(); // idle decay of 0 -> 0
        r.enqueue(pk, Time(0)).unwrap(); // avg = 0.5*1000
        assert!((r.avg() - 500.0).abs() < 1e-9);
        r.enqueue(pk, Time(0)).unwrap(); // avg = 0.5*500 + 0.5*2000
        assert!((r.avg() - 1250.0).abs() < 1e-9);
        r.stats().check_conservation().unwrap();
    }
}
