//! `prio`: strict priority between `bands` queues, as Linux's `sch_prio`.
//!
//! ## What it promises
//! Band 0 is always served first: a packet of band `k` leaves only when bands `0..k` have nothing
//! they may send. Within a band, the band's own queue decides (pfifo by default, or any qdisc).
//! Nothing is shared or rate-limited: a busy band 0 starves the others, by design.
//!
//! ## Which band
//! 1. If a classifier is given and one of its *filters* matches, the filter's class is the band
//!    (its `ClassId` is the band index). The classifier's default class is not used.
//! 2. Otherwise the band comes from the `priomap`, indexed by the packet's Linux priority, which
//!    Linux derives from the TOS byte for forwarded packets (`rt_tos2priority`):
//!    `priority = ip_tos2prio[(tos & 0x1E) >> 1]` with the kernel table
//!
//!    | (tos>>1)&0xF | 0 | 1 | 2 | 3 | 4 | 5 | 6 | 7 | 8 | 9 | 10 | 11 | 12 | 13 | 14 | 15 |
//!    |--------------|---|---|---|---|---|---|---|---|---|---|----|----|----|----|----|----|
//!    | priority     | 0 | 0 | 0 | 0 | 2 | 2 | 2 | 2 | 6 | 6 | 6  | 6  | 4  | 4  | 4  | 4  |
//!
//!    (0 best effort, 2 bulk, 4 interactive bulk, 6 interactive; odd indices are the old
//!    "min cost" bit, which modern kernels map like the even ones — older kernels sent index 1 to
//!    priority 1, "filler"). tc's default priomap `1 2 2 2 1 2 0 0 1 1 1 1 1 1 1 1` then sends
//!    normal traffic to band 1, "maximise throughput" (bulk) to band 2 and "minimise delay"
//!    (interactive) to band 0. Note that with the default map DSCP EF (TOS 0xB8) lands in band 1,
//!    as in Linux: give a classifier to prioritise by DSCP.
//!
//! ## Throttled bands
//! A band whose qdisc answers `NotBefore` (e.g. TBF) is skipped and the next band is tried; when
//! no band can send, the earliest `NotBefore` is returned.
//!
//! ## Complexity
//! Enqueue O(1) (a classifier lookup, then the band's queue). Dequeue O(bands) worst case
//! (bands ≤ 16): a 16-bit mask of non-empty inline FIFO bands skips empty ones; bands holding
//! another qdisc are asked in order.
//!
//! ## Stats
//! `visit_classes` shows one class per band (`band0`, `band1`, …) with its sent and drop counters;
//! `extra_stats`: `backlogged_bands`.

use super::adopt::AdoptReport;
use super::fifo::{FifoLimit, FifoQueue};
use super::leaf::LeafSpec;
use super::{
    Backlog, Books, ClassMode, ClassStats, ClassView, Counter, Dequeued, Discipline, DropCounts,
    Dropped, ParamError, Qdisc, QdiscStats,
};
use crate::classify::Classifier;
use crate::packet::Packet;
use crate::units::{Rate, Time};

/// Linux's `ip_tos2prio` (net/ipv4/route.c): TOS bits `(tos & 0x1E) >> 1` → priority.
pub const IP_TOS2PRIO: [u8; 16] = [0, 0, 0, 0, 2, 2, 2, 2, 6, 6, 6, 6, 4, 4, 4, 4];
/// tc's default priomap.
pub const DEFAULT_PRIOMAP: [u8; 16] = [1, 2, 2, 2, 1, 2, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1];
pub const MIN_BANDS: u8 = 2;
pub const MAX_BANDS: u8 = 16;
pub const MAX_LIMIT: u32 = 10_000_000;

/// Linux's `rt_tos2priority`: the skb priority of a forwarded packet with this TOS byte.
pub fn tos_to_priority(tos: u8) -> u8 {
    IP_TOS2PRIO[usize::from((tos & 0x1E) >> 1)]
}

/// PRIO parameters (policy keys of the same names).
#[derive(Clone, Debug, PartialEq)]
pub struct PrioParams {
    /// Number of bands, 2..=16. Default 3.
    pub bands: u8,
    /// Priority (0..=15) → band. Default tc's `1 2 2 2 1 2 0 0 1 1 1 1 1 1 1 1`.
    pub priomap: [u8; 16],
    /// Packets per band (pfifo bands of [`Prio::new`]), 1..=10 000 000. Default 1000.
    pub limit: u32,
}

impl Default for PrioParams {
    fn default() -> Self {
        PrioParams {
            bands: 3,
            priomap: DEFAULT_PRIOMAP,
            limit: super::fifo::DEFAULT_PFIFO_LIMIT,
        }
    }
}

impl PrioParams {
    pub fn validate(&self) -> Result<(), ParamError> {
        if self.bands < MIN_BANDS || self.bands > MAX_BANDS {
            return Err(ParamError::new(
                "bands",
                format!(
                    "must be from {MIN_BANDS} to {MAX_BANDS}, got {}",
                    self.bands
                ),
                "use bands = 3 (tc's default) or up to 16",
            ));
        }
        if let Some((i, &b)) = self
            .priomap
            .iter()
            .enumerate()
            .find(|(_, &b)| b >= self.bands)
        {
            return Err(ParamError::new(
                "priomap",
                format!(
                    "entry {i} names band {b}, but there are only {} bands (0..={})",
                    self.bands,
                    self.bands - 1
                ),
                "every priomap entry must be a band below `bands`; raise bands or fix the entry",
            ));
        }
        if self.limit == 0 || self.limit > MAX_LIMIT {
            return Err(ParamError::new(
                "limit",
                format!("must be from 1 to {MAX_LIMIT} packets, got {}", self.limit),
                "set limit to the packets each band may hold (default 1000)",
            ));
        }
        Ok(())
    }
}

/// Offer `pkts` (drained from `old`, whose counters were `old_stats`) to `new`, and continue the
/// qdisc-wide counters.
pub(crate) fn requeue_all<P: Packet, Q: Qdisc<P> + ?Sized>(
    new: &mut Q,
    old_stats: &QdiscStats,
    pkts: Vec<P>,
    now: Time,
    report: &mut AdoptReport,
) {
    let mut moved = Counter::default();
    for p in pkts {
        moved.add(p.len());
        match new.enqueue(p, now) {
            Ok(()) => report.moved_packets += 1,
            Err(_) => report.dropped_packets += 1,
        }
    }
    new.stats_mut().continue_from(old_stats, moved);
}

/// The queue of one band or class, with its counters; shared by PRIO and DRR.
pub(crate) enum ChildQ<P> {
    Fifo(FifoQueue<P>),
    Qdisc(Box<dyn Qdisc<P>>),
}

pub(crate) struct Child<P> {
    pub(crate) q: ChildQ<P>,
    pub(crate) sent: Counter,
    pub(crate) drops: DropCounts,
    /// The boxed child's `marked` count already added to the parent's (marks add up like drops).
    marks_seen: u64,
}

impl<P: Packet> Child<P> {
    /// Heap bytes of the child's queue: a FIFO's buffer, a qdisc's box and per-flow state.
    pub(crate) fn heap_bytes(&self) -> usize {
        match &self.q {
            ChildQ::Fifo(f) => f.heap_bytes(),
            ChildQ::Qdisc(q) => std::mem::size_of_val(q.as_ref()) + q.state_bytes(),
        }
    }
    pub(crate) fn from_spec(spec: LeafSpec<P>) -> Self {
        Child {
            q: match spec {
                LeafSpec::Fifo(l) => ChildQ::Fifo(FifoQueue::new(l)),
                LeafSpec::Qdisc(b) => ChildQ::Qdisc(b),
            },
            sent: Counter::default(),
            drops: DropCounts::default(),
            marks_seen: 0,
        }
    }

    pub(crate) fn backlog(&self) -> Backlog {
        match &self.q {
            ChildQ::Fifo(f) => Backlog {
                packets: f.len() as u64,
                bytes: f.bytes(),
            },
            ChildQ::Qdisc(q) => q.backlog(),
        }
    }

    /// Hand back what a boxed child dropped after accepting, counting it in `stats`.
    fn collect(&mut self, books: &mut Books<P>) {
        if let ChildQ::Qdisc(q) = &mut self.q {
            while let Some(d) = q.take_dropped() {
                self.drops.add(d.reason, d.packet.len());
                books.drop_victim(d);
            }
            let marked = q.stats().marked;
            books.mark(marked.saturating_sub(self.marks_seen));
            self.marks_seen = marked;
        }
    }

    pub(crate) fn enqueue(
        &mut self,
        pkt: P,
        now: Time,
        books: &mut Books<P>,
    ) -> Result<(), Dropped<P>> {
        let len = pkt.len();
        let r = match &mut self.q {
            ChildQ::Fifo(f) => f.push(pkt),
            ChildQ::Qdisc(q) => q.enqueue(pkt, now),
        };
        if let Err(d) = &r {
            self.drops.add(d.reason, len);
        }
        self.collect(books);
        r
    }

    pub(crate) fn dequeue(&mut self, now: Time, books: &mut Books<P>) -> Dequeued<P> {
        let r = match &mut self.q {
            ChildQ::Fifo(f) => match f.pop() {
                Some(p) => Dequeued::Packet(p),
                None => Dequeued::Empty,
            },
            ChildQ::Qdisc(q) => q.dequeue(now),
        };
        self.collect(books);
        if let Dequeued::Packet(p) = &r {
            self.sent.add(p.len());
        }
        r
    }

    /// Everything queued, ignoring rate limits; counted as dequeued. What a boxed child drops
    /// while draining (an AQM still runs) is counted and goes to `victims`.
    pub(crate) fn drain(&mut self, now: Time, books: &mut Books<P>) -> Vec<P> {
        let out: Vec<P> = match &mut self.q {
            ChildQ::Fifo(f) => std::iter::from_fn(|| f.pop()).collect(),
            ChildQ::Qdisc(q) => q.drain(now),
        };
        self.collect(books);
        for p in &out {
            self.sent.add(p.len());
        }
        out
    }

    /// What a boxed child has dequeued so far (zero for a FIFO).
    pub(crate) fn leaf_dequeued(&self) -> Counter {
        match &self.q {
            ChildQ::Qdisc(q) => q.stats().dequeued,
            ChildQ::Fifo(_) => Counter::default(),
        }
    }

    /// Continue the counters of `old`, the child of the same name in the qdisc this one replaces,
    /// which has been drained since `sent_before` and `leaf_dequeued_before` were read. Call
    /// before the drained packets are offered to the new qdisc.
    pub(crate) fn continue_from(
        &mut self,
        old: &Child<P>,
        sent_before: Counter,
        leaf_dequeued_before: Counter,
    ) {
        self.sent = sent_before;
        self.drops = old.drops.clone();
        if let (ChildQ::Qdisc(n), ChildQ::Qdisc(o)) = (&mut self.q, &old.q) {
            let post = o.stats().dequeued;
            let moved = Counter {
                packets: post.packets - leaf_dequeued_before.packets,
                bytes: post.bytes - leaf_dequeued_before.bytes,
            };
            n.stats_mut().continue_from(o.stats(), moved);
            // Its marks are in the parent's count already (continued from the old parent).
            self.marks_seen = n.stats().marked;
        }
    }

    pub(crate) fn is_fifo(&self) -> bool {
        matches!(self.q, ChildQ::Fifo(_))
    }

    /// A leaf class view of this child.
    pub(crate) fn view<'a>(&self, name: &'a str, id: u32, prio: u8) -> ClassView<'a> {
        let mut leaf_drops = self.drops.clone();
        if let ChildQ::Qdisc(q) = &self.q {
            // The child's own view is more complete (it includes what it refused).
            let s = q.stats();
            leaf_drops = s.refused.clone();
            for (r, c) in s.dropped.iter() {
                leaf_drops.add_counter(r, c);
            }
        }
        ClassView {
            name,
            parent: None,
            id,
            level: 0,
            is_leaf: true,
            rate: Rate(0),
            ceil: Rate(0),
            prio,
            mode: ClassMode::CanSend,
            tokens: 0,
            ctokens: 0,
            stats: ClassStats {
                sent: self.sent,
                drops: leaf_drops.total().packets,
                marked: match &self.q {
                    ChildQ::Qdisc(q) => q.stats().marked,
                    ChildQ::Fifo(_) => 0,
                },
                ..Default::default()
            },
            backlog: self.backlog(),
            leaf_drops,
            avgidle_ns: None,
            hfsc: None,
        }
    }
}

/// The PRIO qdisc.
pub struct Prio<P> {
    params: PrioParams,
    bands: Vec<Child<P>>,
    names: Vec<String>,
    classifier: Option<Classifier>,
    /// Bit `b` set iff band `b` may hold packets (exact for FIFO bands; always set for others).
    mask: u16,
    /// Bands holding a qdisc (always asked).
    boxed_mask: u16,
    books: Books<P>,
}

impl<P: Packet> Prio<P> {
    /// `bands` pfifo bands of `limit` packets each, chosen by the priomap.
    pub fn new(params: PrioParams) -> Result<Self, ParamError> {
        params.validate()?;
        let bands = (0..params.bands)
            .map(|_| LeafSpec::Fifo(FifoLimit::Packets(params.limit)))
            .collect();
        Self::with_bands(params, bands, None)
    }

    /// Bands with their own queues (`bands.len()` must equal `params.bands`); a classifier whose
    /// matching filter's class (a band index) overrides the priomap.
    pub fn with_bands(
        params: PrioParams,
        bands: Vec<LeafSpec<P>>,
        classifier: Option<Classifier>,
    ) -> Result<Self, ParamError> {
        params.validate()?;
        if bands.len() != params.bands as usize {
            return Err(ParamError::new(
                "bands",
                format!(
                    "bands = {} but {} band queues were given",
                    params.bands,
                    bands.len()
                ),
                "give one queue per band, or set bands to the number of queues",
            ));
        }
        if let Some(c) = &classifier {
            if let Some(f) = c.filters().iter().find(|f| f.class >= params.bands as u32) {
                return Err(ParamError::new(
                    "filter",
                    format!(
                        "a filter sends packets to band {}, but there are only {} bands",
                        f.class, params.bands
                    ),
                    "a filter's class is a band index: use 0 (highest priority) .. bands-1",
                ));
            }
        }
        let bands: Vec<Child<P>> = bands.into_iter().map(Child::from_spec).collect();
        let mut boxed_mask = 0u16;
        for (i, b) in bands.iter().enumerate() {
            if !b.is_fifo() {
                boxed_mask |= 1 << i;
            }
        }
        Ok(Prio {
            names: (0..bands.len()).map(|i| format!("band{i}")).collect(),
            bands,
            classifier,
            mask: boxed_mask,
            boxed_mask,
            params,
            books: Books::new(),
        })
    }

    pub fn params(&self) -> &PrioParams {
        &self.params
    }

    /// The band a packet goes to. O(1) plus the classifier.
    pub fn band_of(&self, meta: &crate::packet::PacketMeta) -> usize {
        if let Some(c) = &self.classifier {
            if let Some(i) = c.explain(meta) {
                if let Some(f) = c.filters().get(i) {
                    return f.class as usize;
                }
            }
        }
        usize::from(self.params.priomap[usize::from(tos_to_priority(meta.tos))])
    }

    /// Backlog of one band.
    pub fn band_backlog(&self, band: usize) -> Backlog {
        self.bands
            .get(band)
            .map(|b| b.backlog())
            .unwrap_or_default()
    }
}

impl<P: Packet> Discipline<P> for Prio<P> {
    fn books(&self) -> &Books<P> {
        &self.books
    }
    fn books_mut(&mut self) -> &mut Books<P> {
        &mut self.books
    }
    /// O(1) plus the classifier lookup.
    fn enqueue_inner(&mut self, pkt: P, now: Time) -> Result<(), Dropped<P>> {
        let b = self.band_of(pkt.meta()).min(self.bands.len() - 1);
        let r = self.bands[b].enqueue(pkt, now, &mut self.books);
        if r.is_ok() {
            self.mask |= 1 << b;
        }
        r
    }

    /// O(bands) worst case.
    fn dequeue_inner(&mut self, now: Time) -> Dequeued<P> {
        let mut next: Option<Time> = None;
        let mut m = self.mask;
        while m != 0 {
            let b = m.trailing_zeros() as usize;
            m &= m - 1;
            match self.bands[b].dequeue(now, &mut self.books) {
                Dequeued::Packet(p) => {
                    if self.bands[b].is_fifo() && self.bands[b].backlog().packets == 0 {
                        self.mask &= !(1 << b);
                    }
                    return Dequeued::Packet(p);
                }
                Dequeued::NotBefore(t) => next = Some(next.map_or(t, |n| n.min(t))),
                Dequeued::Empty => {
                    if self.boxed_mask & (1 << b) == 0 {
                        self.mask &= !(1 << b);
                    }
                }
            }
        }
        match next {
            Some(t) => Dequeued::NotBefore(t),
            None => Dequeued::Empty,
        }
    }

    fn kind_inner(&self) -> &'static str {
        "prio"
    }

    fn as_any_inner(&mut self) -> Option<&mut dyn std::any::Any> {
        Some(self)
    }

    /// From another PRIO: its packets are offered again, and each band continues the counters
    /// (and its leaf qdisc's) of the band of the same name. Otherwise by requeueing.
    fn adopt_inner(&mut self, old: &mut dyn Qdisc<P>, now: Time) -> Option<AdoptReport> {
        let o = old.as_any_mut()?.downcast_mut::<Prio<P>>()?;
        let before: Vec<(Counter, Counter)> = o
            .bands
            .iter()
            .map(|b| (b.sent, b.leaf_dequeued()))
            .collect();
        let pkts = o.drain(now);
        let mut report = AdoptReport::default();
        for (i, b) in o.bands.iter().enumerate() {
            match self.names.iter().position(|n| *n == o.names[i]) {
                Some(j) => {
                    self.bands[j].continue_from(b, before[i].0, before[i].1);
                    report.kept.push(o.names[i].clone());
                }
                None => report.removed.push(o.names[i].clone()),
            }
        }
        requeue_all(self, o.books.stats(), pkts, now, &mut report);
        Some(report)
    }

    /// Band 0 first, each band in its own order.
    fn drain_inner(&mut self, now: Time) -> Vec<P> {
        let mut out = Vec::new();
        for b in &mut self.bands {
            out.extend(b.drain(now, &mut self.books));
        }
        self.mask = self.boxed_mask;
        out
    }

    fn visit_classes_inner(&self, f: &mut dyn FnMut(&ClassView<'_>)) {
        for (i, b) in self.bands.iter().enumerate() {
            f(&b.view(&self.names[i], i as u32, i as u8));
        }
    }

    fn extra_stats_inner(&self, f: &mut dyn FnMut(&'static str, f64)) {
        let n = self
            .bands
            .iter()
            .filter(|b| b.backlog().packets > 0)
            .count();
        f("backlogged_bands", n as f64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::classify::FilterSpec;
    use crate::packet::PacketMeta;
    use crate::qdisc::DropReason;

    fn pkt(tos: u8, len: u32) -> PacketMeta {
        PacketMeta {
            len,
            tos,
            ..Default::default()
        }
    }

    #[test]
    fn tos_mapping_matches_linux() {
        let p: Prio<PacketMeta> = Prio::new(PrioParams::default()).unwrap();
        // Normal service → priority 0 → band 1.
        assert_eq!(tos_to_priority(0x00), 0);
        assert_eq!(p.band_of(&pkt(0x00, 1)), 1);
        // IPTOS_LOWDELAY 0x10 → interactive (6) → band 0.
        assert_eq!(tos_to_priority(0x10), 6);
        assert_eq!(p.band_of(&pkt(0x10, 1)), 0);
        // IPTOS_THROUGHPUT 0x08 → bulk (2) → band 2.
        assert_eq!(tos_to_priority(0x08), 2);
        assert_eq!(p.band_of(&pkt(0x08, 1)), 2);
        // LOWDELAY|THROUGHPUT 0x18 → interactive bulk (4) → band 1; EF (0xB8) too.
        assert_eq!(tos_to_priority(0x18), 4);
        assert_eq!(p.band_of(&pkt(0xB8, 1)), 1);
        // ECN bits do not matter; the old min-cost bit (0x02) maps like best effort.
        assert_eq!(p.band_of(&pkt(0x13, 1)), 0);
        assert_eq!(p.band_of(&pkt(0x02, 1)), 1);
    }

    #[test]
    fn strict_priority_and_validation() {
        let mut q: Prio<PacketMeta> = Prio::new(PrioParams {
            limit: 2,
            ..Default::default()
        })
        .unwrap();
        q.enqueue(pkt(0x08, 300), Time(0)).unwrap(); // band 2
        q.enqueue(pkt(0x00, 200), Time(0)).unwrap(); // band 1
        q.enqueue(pkt(0x10, 100), Time(0)).unwrap(); // band 0
        q.enqueue(pkt(0x10, 101), Time(0)).unwrap();
        let d = q.enqueue(pkt(0x10, 102), Time(0)).unwrap_err();
        assert_eq!(d.reason, DropReason::QueueLimit);
        let lens: Vec<u32> = std::iter::from_fn(|| q.dequeue(Time(0)).packet())
            .map(|p| p.len)
            .collect();
        assert_eq!(lens, vec![100, 101, 200, 300]);
        q.stats().check_conservation().unwrap();
        let mut views = Vec::new();
        q.visit_classes(&mut |v| views.push((v.name.to_string(), v.stats.sent.packets)));
        assert_eq!(
            views,
            vec![
                ("band0".into(), 2),
                ("band1".into(), 1),
                ("band2".into(), 1)
            ]
        );
        let bad = PrioParams {
            bands: 2,
            ..Default::default()
        };
        assert_eq!(bad.validate().unwrap_err().param, "priomap");
        let bad = PrioParams {
            bands: 17,
            ..Default::default()
        };
        assert_eq!(bad.validate().unwrap_err().param, "bands");
        let bad = PrioParams {
            limit: 0,
            ..Default::default()
        };
        assert_eq!(bad.validate().unwrap_err().param, "limit");
    }

    #[test]
    fn classifier_overrides_priomap() {
        let ef = FilterSpec {
            dscp: Some(vec![46]),
            ..FilterSpec::any(0)
        };
        let c = Classifier::new(vec![ef], 2);
        let bands = (0..3)
            .map(|_| LeafSpec::Fifo(FifoLimit::Packets(10)))
            .collect();
        let q: Prio<PacketMeta> = Prio::with_bands(PrioParams::default(), bands, Some(c)).unwrap();
        assert_eq!(q.band_of(&pkt(0xB8, 1)), 0);
        // No filter matches: the priomap, not the classifier's default (2).
        assert_eq!(q.band_of(&pkt(0x00, 1)), 1);
        let c = Classifier::new(vec![FilterSpec::any(5)], 0);
        let bands = (0..3)
            .map(|_| LeafSpec::Fifo(FifoLimit::Packets(10)))
            .collect();
        assert!(Prio::<PacketMeta>::with_bands(PrioParams::default(), bands, Some(c)).is_err());
    }
}
