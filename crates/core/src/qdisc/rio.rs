//! `rio`: RED with In and Out (Clark & Fang, "Explicit allocation of best-effort packet delivery
//! service", IEEE/ACM ToN 6(4), 1998), as ALTQ's `altq_rio.c` runs it for AF drop precedences.
//!
//! ## What it promises
//! Packets *in* profile (marked by an edge meter as within their contract) are protected: they
//! see early drops only when the queue of *in* packets itself grows, while *out* packets are
//! dropped earlier and harder as soon as the whole queue grows. One FIFO keeps the order.
//!
//! ## How
//! Two RED estimators ([`RedAverage`], the same code as `red`): `avg_in` over the bytes of in
//! packets queued, updated at each in-packet arrival; `avg_total` over all bytes queued, updated
//! at every arrival (as ALTQ updates the states of every precedence at or above the packet's).
//! An in packet is judged by the in profile (`in_min`, `in_max`, `in_max_p`) against `avg_in`; an
//! out packet by the out profile (`out_min`, `out_max`, `out_max_p`) against `avg_total`. Each
//! profile has its own count-based uniform spacing ([`RedSpacing`]); `gentle`, `ecn`, `harddrop`,
//! the idle-time correction (`bandwidth`, `avpkt`) and `wq` work as in `red`. When idle, each
//! average decays from the moment its own queue (in bytes / all bytes) went empty.
//!
//! ## In or out
//! From the packet's DSCP: for an AF codepoint AFcd (class c = 1..4, drop precedence d = 1..3,
//! DSCP = 8c + 2d), the packet is *in* when `d <= in_max_precedence` (default 1: AFx1 in, AFx2
//! and AFx3 out). Any other DSCP is out unless `non_af = "in"`.
//!
//! ## Defaults
//! ALTQ's: thresholds of its lowest and highest drop precedence, 35/45 and 5/15 packets with
//! `max_p` 0.1 (inv_pmax 10), here in bytes for `avpkt` 1000.
//!
//! ## Complexity and stats
//! O(1) per packet. Gauges: `avg_in_bytes`, `avg_total_bytes`, `in_backlog_bytes`,
//! `in_early_drops`, `in_forced_drops`, `out_early_drops`, `out_forced_drops`, `in_marks`,
//! `out_marks`, `in_count`, `out_count`.

use std::collections::VecDeque;

use super::red::{
    derive_wq, validate_profile, RedAverage, RedProfile, RedSpacing, RedVerdict, SplitMix,
};
use super::{Books, Dequeued, Discipline, DropReason, Dropped, ParamError};
use crate::packet::Packet;
use crate::units::{Rate, Time};

/// RIO parameters (policy keys).
#[derive(Clone, Debug, PartialEq)]
pub struct RioParams {
    /// Bytes queued at most.
    pub limit: u32,
    pub in_min: u32,
    pub in_max: u32,
    pub in_max_p: f64,
    pub out_min: u32,
    pub out_max: u32,
    pub out_max_p: f64,
    pub avpkt: u32,
    /// Packets; 0 = (2 out_min + out_max) / (3 avpkt), as `red`.
    pub burst: u32,
    /// None = derived from burst as tc does for RED (from the out profile).
    pub wq: Option<f64>,
    pub bandwidth: Rate,
    pub ecn: bool,
    pub gentle: bool,
    pub harddrop: bool,
    /// AF drop precedences up to this one are in (1..=3).
    pub in_max_precedence: u8,
    /// Packets with a non-AF DSCP are in (default: out).
    pub non_af_in: bool,
    pub seed: u64,
}

impl Default for RioParams {
    fn default() -> Self {
        RioParams {
            limit: 400_000,
            in_min: 35_000,
            in_max: 45_000,
            in_max_p: 0.1,
            out_min: 5_000,
            out_max: 15_000,
            out_max_p: 0.1,
            avpkt: 1000,
            burst: 0,
            wq: None,
            bandwidth: Rate::mbit(10),
            ecn: false,
            gentle: false,
            harddrop: false,
            in_max_precedence: 1,
            non_af_in: false,
            seed: 1,
        }
    }
}

impl RioParams {
    pub fn validate(&self) -> Result<(), ParamError> {
        if self.avpkt == 0 {
            return Err(ParamError::new(
                "avpkt",
                "must be above 0, got 0",
                "use e.g. 1000",
            ));
        }
        validate_profile(
            self.in_min,
            self.in_max,
            self.in_max_p,
            self.limit,
            ["in_min", "in_max", "in_max_p"],
        )?;
        validate_profile(
            self.out_min,
            self.out_max,
            self.out_max_p,
            self.limit,
            ["out_min", "out_max", "out_max_p"],
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
        if !(1..=3).contains(&self.in_max_precedence) {
            return Err(ParamError::new(
                "in_max_precedence",
                format!("must be 1, 2 or 3, got {}", self.in_max_precedence),
                "1 treats AFx1 as in, 2 treats AFx1 and AFx2 as in",
            ));
        }
        Ok(())
    }
    pub fn effective_burst(&self) -> u32 {
        if self.burst != 0 {
            return self.burst;
        }
        ((2 * self.out_min as u64 + self.out_max as u64) / (3 * self.avpkt as u64)).max(1) as u32
    }
    pub fn effective_wq(&self) -> f64 {
        self.wq
            .unwrap_or_else(|| derive_wq(self.effective_burst(), self.out_min, self.avpkt))
    }
    /// Whether a packet with this DSCP is in profile.
    pub fn is_in(&self, dscp: u8) -> bool {
        let class = dscp >> 3;
        let prec = (dscp >> 1) & 3;
        let af = (1..=4).contains(&class) && dscp & 1 == 0 && (1..=3).contains(&prec);
        if af {
            prec <= self.in_max_precedence
        } else {
            self.non_af_in
        }
    }
}

#[derive(Clone, Debug, Default)]
struct SideStats {
    early: u64,
    forced: u64,
    marks: u64,
}

/// The RIO qdisc.
#[derive(Debug)]
pub struct Rio<P> {
    p: RioParams,
    in_profile: RedProfile,
    out_profile: RedProfile,
    wq: f64,
    pkt_time_s: f64,
    /// Packets with their in/out decision.
    q: VecDeque<(P, bool)>,
    bytes: u64,
    in_bytes: u64,
    avg_in: RedAverage,
    avg_total: RedAverage,
    in_spacing: RedSpacing,
    out_spacing: RedSpacing,
    rng: SplitMix,
    in_stats: SideStats,
    out_stats: SideStats,
    books: Books<P>,
}

impl<P: Packet> Rio<P> {
    pub fn new(params: RioParams) -> Result<Self, ParamError> {
        params.validate()?;
        Ok(Rio {
            in_profile: RedProfile {
                min: params.in_min,
                max: params.in_max,
                max_p: params.in_max_p,
                gentle: params.gentle,
            },
            out_profile: RedProfile {
                min: params.out_min,
                max: params.out_max,
                max_p: params.out_max_p,
                gentle: params.gentle,
            },
            wq: params.effective_wq(),
            pkt_time_s: params.avpkt as f64 * 8.0 / params.bandwidth.0 as f64,
            rng: SplitMix::new(params.seed),
            p: params,
            q: VecDeque::new(),
            bytes: 0,
            in_bytes: 0,
            avg_in: RedAverage::default(),
            avg_total: RedAverage::default(),
            in_spacing: RedSpacing::default(),
            out_spacing: RedSpacing::default(),
            in_stats: SideStats::default(),
            out_stats: SideStats::default(),
            books: Books::new(),
        })
    }
    pub fn avg_in(&self) -> f64 {
        self.avg_in.get()
    }
    pub fn avg_total(&self) -> f64 {
        self.avg_total.get()
    }
}

impl<P: Packet> Discipline<P> for Rio<P> {
    fn books(&self) -> &Books<P> {
        &self.books
    }
    fn books_mut(&mut self) -> &mut Books<P> {
        &mut self.books
    }
    /// O(1).
    fn enqueue_inner(&mut self, mut pkt: P, now: Time) -> Result<(), Dropped<P>> {
        let len = pkt.len();
        let is_in = self.p.is_in(pkt.meta().dscp());
        self.avg_total
            .update(self.bytes, now, self.wq, self.pkt_time_s);
        let verdict = if is_in {
            self.avg_in
                .update(self.in_bytes, now, self.wq, self.pkt_time_s);
            let pb = self.in_profile.pb(self.avg_in.get());
            self.in_spacing.decide(pb, &mut self.rng)
        } else {
            let pb = self.out_profile.pb(self.avg_total.get());
            self.out_spacing.decide(pb, &mut self.rng)
        };
        let side = if is_in {
            &mut self.in_stats
        } else {
            &mut self.out_stats
        };
        let reason = match verdict {
            RedVerdict::Pass => None,
            RedVerdict::Early => Some(DropReason::Aqm),
            RedVerdict::Forced => Some(DropReason::AqmForced),
        };
        if let Some(r) = reason {
            if self.p.ecn && !self.p.harddrop && pkt.mark_ce() {
                side.marks += 1;
                self.books.mark(1);
            } else {
                if r == DropReason::Aqm {
                    side.early += 1;
                } else {
                    side.forced += 1;
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
        if is_in {
            self.in_bytes += len as u64;
        }
        self.q.push_back((pkt, is_in));
        Ok(())
    }
    /// O(1).
    fn dequeue_inner(&mut self, now: Time) -> Dequeued<P> {
        match self.q.pop_front() {
            Some((p, is_in)) => {
                let len = p.len() as u64;
                self.bytes -= len;
                if is_in {
                    self.in_bytes -= len;
                    if self.in_bytes == 0 {
                        self.avg_in.went_idle(now);
                    }
                }
                if self.q.is_empty() {
                    self.avg_total.went_idle(now);
                }
                Dequeued::Packet(p)
            }
            None => Dequeued::Empty,
        }
    }
    fn kind_inner(&self) -> &'static str {
        "rio"
    }
    fn extra_stats_inner(&self, f: &mut dyn FnMut(&'static str, f64)) {
        f("avg_in_bytes", self.avg_in.get());
        f("avg_total_bytes", self.avg_total.get());
        f("in_backlog_bytes", self.in_bytes as f64);
        f("in_early_drops", self.in_stats.early as f64);
        f("in_forced_drops", self.in_stats.forced as f64);
        f("out_early_drops", self.out_stats.early as f64);
        f("out_forced_drops", self.out_stats.forced as f64);
        f("in_marks", self.in_stats.marks as f64);
        f("out_marks", self.out_stats.marks as f64);
        f("in_count", self.in_spacing.count() as f64);
        f("out_count", self.out_spacing.count() as f64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn in_or_out_from_af_drop_precedence() {
        let p = RioParams::default();
        // AF11 = 10, AF12 = 12, AF13 = 14, AF41 = 34, AF43 = 38, EF = 46, BE = 0, CS1 = 8.
        assert!(p.is_in(10));
        assert!(!p.is_in(12));
        assert!(!p.is_in(14));
        assert!(p.is_in(34));
        assert!(!p.is_in(38));
        for not_af in [0, 8, 46, 11, 48] {
            assert!(!p.is_in(not_af), "{not_af}");
        }
        let p = RioParams {
            in_max_precedence: 2,
            non_af_in: true,
            ..Default::default()
        };
        assert!(p.is_in(12) && !p.is_in(14) && p.is_in(0) && p.is_in(46));
    }

    #[test]
    fn validation_names_the_key() {
        let cases = [
            (
                RioParams {
                    in_min: 50_000,
                    ..Default::default()
                },
                "in_min",
            ),
            (
                RioParams {
                    out_max_p: 0.0,
                    ..Default::default()
                },
                "out_max_p",
            ),
            (
                RioParams {
                    out_max: 500_000,
                    ..Default::default()
                },
                "out_max",
            ),
            (
                RioParams {
                    in_max_precedence: 0,
                    ..Default::default()
                },
                "in_max_precedence",
            ),
        ];
        for (p, key) in cases {
            assert_eq!(p.validate().unwrap_err().param, key);
        }
        RioParams::default().validate().unwrap();
    }
}
