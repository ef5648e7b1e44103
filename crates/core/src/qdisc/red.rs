//! `red`: Random Early Detection (Floyd & Jacobson 1993). RIO is not implemented yet.
//!
//! On each enqueue the average queue (bytes) is updated as an EWMA with weight `wq`; after an idle
//! period the average decays as `(1 - wq)^m · avg` with `m = idle / (avpkt · 8 / bandwidth)`.
//! Between `min` and `max` a packet is dropped (or CE-marked with `ecn`) with probability
//! `pa = pb / (1 - count · pb)`, `pb = max_p (avg - min) / (max - min)`, which spaces drops
//! uniformly. With `gentle`, `pb` rises from `max_p` to 1 between `max` and `2 max`; above that
//! (or above `max` without gentle) every packet is dropped (`aqm_forced`). With `ecn` and not
//! `harddrop`, ECN-capable packets are marked instead of dropped in every region, as Linux does.
//! Early/forced drops are refusals at enqueue. O(1) per packet.

use std::collections::VecDeque;

use super::{Dequeued, DropReason, Dropped, ParamError, Qdisc, QdiscStats};
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
        if self.min == 0 || self.min >= self.max {
            return Err(ParamError::new(
                "min",
                format!(
                    "must be above 0 and below max ({}), got {}",
                    self.max, self.min
                ),
                "use e.g. min = max / 3",
            ));
        }
        if self.max > self.limit {
            return Err(ParamError::new(
                "max",
                format!("must not exceed limit ({}), got {}", self.limit, self.max),
                "raise limit or lower max",
            ));
        }
        if !(self.max_p > 0.0 && self.max_p <= 1.0) {
            return Err(ParamError::new(
                "max_p",
                format!("must be in (0, 1], got {}", self.max_p),
                "use e.g. 0.02",
            ));
        }
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
    /// tc's rule: the smallest W = 2^-k with burst + 1 - min/avpkt <= (1 - (1-W)^burst) / W.
    pub fn effective_wq(&self) -> f64 {
        if let Some(w) = self.wq {
            return w;
        }
        let b = self.effective_burst() as f64;
        let a = b + 1.0 - self.min as f64 / self.avpkt as f64;
        let mut w = 0.5f64;
        for _ in 1..32 {
            if a <= (1.0 - (1.0 - w).powf(b)) / w {
                return w;
            }
            w /= 2.0;
        }
        w
    }
}

/// The RED qdisc.
#[derive(Debug)]
pub struct Red<P> {
    p: RedParams,
    wq: f64,
    q: VecDeque<P>,
    bytes: u64,
    avg: f64,
    count: i64,
    idle_since: Option<Time>,
    rng: u64,
    early: u64,
    forced: u64,
    stats: QdiscStats,
}

impl<P: Packet> Red<P> {
    pub fn new(params: RedParams) -> Result<Self, ParamError> {
        params.validate()?;
        Ok(Red {
            wq: params.effective_wq(),
            rng: params.seed,
            p: params,
            q: VecDeque::new(),
            bytes: 0,
            avg: 0.0,
            count: -1,
            idle_since: Some(Time::ZERO),
            early: 0,
            forced: 0,
            stats: QdiscStats::default(),
        })
    }
    pub fn avg(&self) -> f64 {
        self.avg
    }
    fn uniform(&mut self) -> f64 {
        // splitmix64
        self.rng = self.rng.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.rng;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        (z >> 11) as f64 / (1u64 << 53) as f64
    }
    /// Drop/mark probability base `pb` at the current average, `None` below min, `Some(>=1)` forced.
    fn pb(&self) -> Option<f64> {
        let (min, max) = (self.p.min as f64, self.p.max as f64);
        if self.avg < min {
            None
        } else if self.avg < max {
            Some(self.p.max_p * (self.avg - min) / (max - min))
        } else if self.p.gentle && self.avg < 2.0 * max {
            Some(self.p.max_p + (1.0 - self.p.max_p) * (self.avg - max) / max)
        } else {
            Some(f64::INFINITY)
        }
    }
}

impl<P: Packet> Qdisc<P> for Red<P> {
    /// O(1).
    fn enqueue(&mut self, mut pkt: P, now: Time) -> Result<(), Dropped<P>> {
        let len = pkt.len();
        if let Some(since) = self.idle_since.take() {
            let tx = self.p.avpkt as f64 * 8.0 / self.p.bandwidth.0 as f64;
            let m = now.saturating_since(since).as_secs_f64() / tx;
            self.avg *= (1.0 - self.wq).powf(m);
        } else {
            self.avg = (1.0 - self.wq) * self.avg + self.wq * self.bytes as f64;
        }
        let mut reason = None;
        match self.pb() {
            None => self.count = -1,
            Some(pb) if pb.is_infinite() => {
                self.count = -1;
                reason = Some(DropReason::AqmForced);
            }
            Some(pb) => {
                self.count += 1;
                let denom = 1.0 - self.count as f64 * pb;
                let pa = if denom <= 0.0 {
                    1.0
                } else {
                    (pb / denom).min(1.0)
                };
                if self.uniform() < pa {
                    self.count = 0;
                    reason = Some(DropReason::Aqm);
                }
            }
        }
        if let Some(r) = reason {
            if self.p.ecn && !self.p.harddrop && pkt.mark_ce() {
                self.stats.marked += 1;
            } else {
                if r == DropReason::Aqm {
                    self.early += 1;
                } else {
                    self.forced += 1;
                }
                self.stats.on_refuse(r, len);
                return Err(Dropped {
                    packet: pkt,
                    reason: r,
                });
            }
        }
        if self.bytes + len as u64 > self.p.limit as u64 {
            self.stats.on_refuse(DropReason::ByteLimit, len);
            return Err(Dropped {
                packet: pkt,
                reason: DropReason::ByteLimit,
            });
        }
        self.bytes += len as u64;
        self.q.push_back(pkt);
        self.stats.on_enqueue(len);
        Ok(())
    }
    /// O(1).
    fn dequeue(&mut self, now: Time) -> Dequeued<P> {
        match self.q.pop_front() {
            Some(p) => {
                self.bytes -= p.len() as u64;
                self.stats.on_dequeue(p.len());
                if self.q.is_empty() {
                    self.idle_since = Some(now);
                }
                Dequeued::Packet(p)
            }
            None => Dequeued::Empty,
        }
    }
    fn stats(&self) -> &QdiscStats {
        &self.stats
    }
    fn kind(&self) -> &'static str {
        "red"
    }
    fn extra_stats(&self, f: &mut dyn FnMut(&'static str, f64)) {
        f("avg_queue_bytes", self.avg);
        f("count", self.count as f64);
        f("early_drops", self.early as f64);
        f("forced_drops", self.forced as f64);
        f("marks", self.stats.marked as f64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::PacketMeta;

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
