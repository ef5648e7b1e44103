//! `drr`: Deficit Round Robin (Shreedhar & Varghese, "Efficient fair queuing using deficit round
//! robin", SIGCOMM 1995 / IEEE/ACM ToN 1996).
//!
//! ## What it promises
//! Every backlogged class is visited in turn and may send up to its `quantum` bytes per round, the
//! unused part carried over as *deficit*. Over any long interval, backlogged classes receive
//! bytes in proportion to their quanta, within one quantum plus one packet, whatever their packet
//! sizes.
//!
//! ## Two modes
//! * [`Drr::new`]: a classless leaf that hashes flows into `flows` buckets
//!   (`flow_hash % flows`), each a class with a pfifo of `limit` packets and `quantum`.
//! * [`Drr::with_classes`]: a classful root; a [`Classifier`] picks the class (its `ClassId` is
//!   the index in the class list), each class has its own quantum and leaf queue (pfifo/bfifo or
//!   any qdisc).
//!
//! ## Credit first
//! The paper (and Linux's `sch_drr`) peek at the head packet and send it only if it fits the
//! deficit. A child qdisc cannot be peeked here, so the credit is checked first, as Linux's SFQ
//! and fq_codel do: a class that becomes active gets `quantum` credit and goes to the back of the
//! round; it sends while its credit is positive, each packet subtracting its length (the credit
//! may go negative by less than one packet); when the credit is spent it gets `quantum` more and
//! goes to the back. Long-run shares are the same, and the error stays within one packet.
//!
//! ## Throttled classes
//! A class whose queue answers `NotBefore(t)` while backlogged (a TBF leaf) leaves the round and
//! waits in a timer set ordered by `t`; it comes back (to the back of the round, credit kept) at
//! the first dequeue at or after `t`. If no class can send, the earliest such `t` is returned.
//! A class answering `Empty` while it still reports backlog is retried 1 ms later.
//!
//! ## Complexity
//! Enqueue O(1) (plus the classifier). Dequeue O(1) amortised for work-conserving leaves (a class
//! whose credit is spent costs one extra step, at most `⌈len / quantum⌉` per packet); a throttled
//! leaf costs O(log n) to park and to wake.
//!
//! ## Memory that follows traffic (flow-hash mode)
//! The `flows` bucket classes are built at the first enqueue and given back by
//! [`Qdisc::release_state`] when the qdisc is empty ([`super::lazy`]): an empty bucket is out of
//! the round and gets a full quantum when it is used again, so a rebuilt table behaves as the
//! one it replaces (hold 0). Per-bucket counters ([`Drr::class_sent`]) restart. A classful DRR
//! keeps its classes (they are configuration).
//!
//! ## Stats
//! `visit_classes` (classful mode) shows each class; `extra_stats`: `active_classes` (classful) or
//! `active_flows` (flow-hash mode) — classes in the round — and `throttled_classes`; in flow-hash
//! mode also `flow_table`, `flow_tables_built`, `flow_tables_released`.

use std::collections::{BTreeSet, VecDeque};

use super::adopt::AdoptReport;
use super::fifo::FifoLimit;
use super::leaf::LeafSpec;
use super::prio::{requeue_all, Child};
use super::{Books, ClassView, Counter, Dequeued, Discipline, Dropped, ParamError, Qdisc};
use crate::classify::Classifier;
use crate::packet::Packet;
use crate::units::{Duration, Time};

pub const MIN_QUANTUM: u32 = 64;
pub const MAX_QUANTUM: u32 = 1 << 24;
pub const MAX_FLOWS: u32 = 65536;
pub const MAX_LIMIT: u32 = 10_000_000;
/// Retry delay for a leaf that holds packets but gives none and names no time.
const RETRY_NS: u64 = 1_000_000;

/// DRR parameters (policy keys of the same names).
#[derive(Clone, Debug, PartialEq)]
pub struct DrrParams {
    /// Default quantum of a class, bytes (64..=16 MiB). Default 1514 (one Ethernet frame, as
    /// Linux uses the device MTU).
    pub quantum: u32,
    /// Flow-hash mode ([`Drr::new`]): number of buckets, 1..=65536. Default 1024.
    pub flows: u32,
    /// Packets per class queue (pfifo), 1..=10 000 000. Default 1000.
    pub limit: u32,
}

impl Default for DrrParams {
    fn default() -> Self {
        DrrParams {
            quantum: 1514,
            flows: 1024,
            limit: 1000,
        }
    }
}

fn check_quantum(q: u32, who: &str) -> Result<(), ParamError> {
    if !(MIN_QUANTUM..=MAX_QUANTUM).contains(&q) {
        return Err(ParamError::new(
            "quantum",
            format!("{who}must be from {MIN_QUANTUM} to {MAX_QUANTUM} bytes, got {q}"),
            "set quantum to at least one MTU-sized frame (1514); shares follow the ratio of quanta",
        ));
    }
    Ok(())
}

impl DrrParams {
    pub fn validate(&self) -> Result<(), ParamError> {
        check_quantum(self.quantum, "")?;
        if self.flows == 0 || self.flows > MAX_FLOWS {
            return Err(ParamError::new(
                "flows",
                format!("must be from 1 to {MAX_FLOWS}, got {}", self.flows),
                "set flows to the number of hash buckets (default 1024)",
            ));
        }
        if self.limit == 0 || self.limit > MAX_LIMIT {
            return Err(ParamError::new(
                "limit",
                format!("must be from 1 to {MAX_LIMIT} packets, got {}", self.limit),
                "set limit to the packets each class may queue (default 1000)",
            ));
        }
        Ok(())
    }
}

/// One class of a classful DRR.
#[derive(Debug)]
pub struct DrrClassSpec<P: Packet> {
    pub name: String,
    /// Bytes per round.
    pub quantum: u32,
    pub leaf: LeafSpec<P>,
}

struct Class<P> {
    child: Child<P>,
    quantum: u32,
    credit: i64,
    /// In the round (`active` queue) or parked in `waiting`.
    active: bool,
    waiting: bool,
}

/// The DRR qdisc.
pub struct Drr<P> {
    params: DrrParams,
    classes: Vec<Class<P>>,
    names: Vec<String>,
    classifier: Option<Classifier>,
    /// The round: front is served next.
    round: VecDeque<u32>,
    /// Throttled classes by wake-up time.
    waiting: BTreeSet<(u64, u32)>,
    /// Flow-hash mode: bucket tables built and released ([`super::lazy`]).
    built: u64,
    released: u64,
    books: Books<P>,
}

impl<P: Packet> Drr<P> {
    /// Flow-hash mode: `flows` buckets, each a class with a pfifo of `limit` packets.
    pub fn new(params: DrrParams) -> Result<Self, ParamError> {
        params.validate()?;
        Ok(Drr {
            params,
            classes: Vec::new(),
            names: Vec::new(),
            classifier: None,
            round: VecDeque::new(),
            waiting: BTreeSet::new(),
            built: 0,
            released: 0,
            books: Books::new(),
        })
    }

    /// Flow-hash mode: build the bucket classes (at the first enqueue after creation or a
    /// release).
    #[cold]
    fn build_buckets(&mut self) {
        let p = &self.params;
        self.classes = (0..p.flows)
            .map(|_| Class {
                child: Child::from_spec(LeafSpec::Fifo(FifoLimit::Packets(p.limit))),
                quantum: p.quantum,
                credit: 0,
                active: false,
                waiting: false,
            })
            .collect();
        self.built += 1;
    }

    /// Whether the flow-hash buckets are built (always true in classful mode).
    pub fn has_flow_table(&self) -> bool {
        !self.classes.is_empty()
    }

    /// Classful mode. The classifier's class (and default) is an index into `classes`.
    pub fn with_classes(
        params: DrrParams,
        classes: Vec<DrrClassSpec<P>>,
        classifier: Classifier,
    ) -> Result<Self, ParamError> {
        params.validate()?;
        let n = classes.len();
        if n == 0 {
            return Err(ParamError::new(
                "classes",
                "a classful drr needs at least one class",
                "add a class, or use drr without classes (flow-hash mode)",
            ));
        }
        for c in &classes {
            check_quantum(c.quantum, &format!("class `{}`: ", c.name))?;
        }
        if let Some(f) = classifier.filters().iter().find(|f| f.class as usize >= n) {
            return Err(ParamError::new(
                "filter",
                format!(
                    "a filter sends packets to class index {}, but there are {n} classes",
                    f.class
                ),
                "point the filter at an existing class",
            ));
        }
        if classifier.default_class() as usize >= n {
            return Err(ParamError::new(
                "default",
                format!(
                    "default class index {} does not exist ({n} classes)",
                    classifier.default_class()
                ),
                "name an existing class as the default",
            ));
        }
        let names = classes.iter().map(|c| c.name.clone()).collect();
        let classes = classes
            .into_iter()
            .map(|c| Class {
                child: Child::from_spec(c.leaf),
                quantum: c.quantum,
                credit: 0,
                active: false,
                waiting: false,
            })
            .collect();
        Ok(Drr {
            params,
            classes,
            names,
            classifier: Some(classifier),
            round: VecDeque::new(),
            waiting: BTreeSet::new(),
            built: 0,
            released: 0,
            books: Books::new(),
        })
    }

    pub fn params(&self) -> &DrrParams {
        &self.params
    }

    /// Class (or bucket) index a packet goes to.
    pub fn class_of(&self, meta: &crate::packet::PacketMeta) -> usize {
        match &self.classifier {
            Some(c) => c.classify(meta) as usize,
            None => (meta.flow_hash % self.params.flows) as usize,
        }
    }

    /// Bytes and packets sent by class (or bucket) `i`.
    pub fn class_sent(&self, i: usize) -> Option<crate::qdisc::Counter> {
        self.classes.get(i).map(|c| c.child.sent)
    }

    fn activate(&mut self, c: u32) {
        let cl = &mut self.classes[c as usize];
        if !cl.active && !cl.waiting {
            cl.active = true;
            cl.credit = cl.quantum as i64;
            self.round.push_back(c);
        }
    }
}

impl<P: Packet> Discipline<P> for Drr<P> {
    fn books(&self) -> &Books<P> {
        &self.books
    }
    fn books_mut(&mut self) -> &mut Books<P> {
        &mut self.books
    }
    /// O(1) plus the classifier.
    fn enqueue_inner(&mut self, pkt: P, now: Time) -> Result<(), Dropped<P>> {
        if self.classes.is_empty() {
            self.build_buckets();
        }
        let c = self.class_of(pkt.meta()).min(self.classes.len() - 1);
        self.classes[c].child.enqueue(pkt, now, &mut self.books)?;
        self.activate(c as u32);
        Ok(())
    }

    /// O(1) amortised (see the module docs).
    fn dequeue_inner(&mut self, now: Time) -> Dequeued<P> {
        while let Some(&(t, c)) = self.waiting.first() {
            if t > now.0 {
                break;
            }
            self.waiting.pop_first();
            let cl = &mut self.classes[c as usize];
            cl.waiting = false;
            if cl.child.backlog().packets > 0 {
                cl.active = true;
                self.round.push_back(c);
            }
        }
        while let Some(&c) = self.round.front() {
            let cl = &mut self.classes[c as usize];
            if cl.credit <= 0 {
                cl.credit += cl.quantum as i64;
                self.round.rotate_left(1);
                continue;
            }
            match cl.child.dequeue(now, &mut self.books) {
                Dequeued::Packet(p) => {
                    cl.credit -= p.len() as i64;
                    if cl.child.backlog().packets == 0 {
                        cl.active = false;
                        self.round.pop_front();
                    } else if cl.credit <= 0 {
                        cl.credit += cl.quantum as i64;
                        self.round.rotate_left(1);
                    }
                    return Dequeued::Packet(p);
                }
                r => {
                    self.round.pop_front();
                    cl.active = false;
                    let backlogged = cl.child.backlog().packets > 0;
                    if backlogged {
                        let t = match r {
                            Dequeued::NotBefore(t) => t.0.max(now.0),
                            _ => now.0 + RETRY_NS,
                        };
                        cl.waiting = true;
                        self.waiting.insert((t, c));
                    }
                }
            }
        }
        match self.waiting.first() {
            Some(&(t, _)) => Dequeued::NotBefore(Time(t)),
            None => Dequeued::Empty,
        }
    }

    fn kind_inner(&self) -> &'static str {
        "drr"
    }

    fn as_any_inner(&mut self) -> Option<&mut dyn std::any::Any> {
        Some(self)
    }

    /// From another DRR: its packets are offered again, and each class continues the counters
    /// (and its leaf qdisc's) of the class of the same name (of the same bucket in flow-hash
    /// mode). Otherwise by requeueing.
    fn adopt_inner(&mut self, old: &mut dyn Qdisc<P>, now: Time) -> Option<AdoptReport> {
        let o = old.as_any_mut()?.downcast_mut::<Drr<P>>()?;
        let before: Vec<(Counter, Counter)> = o
            .classes
            .iter()
            .map(|c| (c.child.sent, c.child.leaf_dequeued()))
            .collect();
        let pkts = o.drain(now);
        let mut report = AdoptReport::default();
        let name = |names: &[String], i: usize| names.get(i).cloned().unwrap_or(i.to_string());
        for (i, c) in o.classes.iter().enumerate() {
            let n = name(&o.names, i);
            match (0..self.classes.len()).find(|&j| name(&self.names, j) == n) {
                Some(j) => {
                    self.classes[j]
                        .child
                        .continue_from(&c.child, before[i].0, before[i].1);
                    report.kept.push(n);
                }
                None => report.removed.push(n),
            }
        }
        requeue_all(self, o.books.stats(), pkts, now, &mut report);
        Some(report)
    }

    /// Class by class in index order, ignoring rate limits of the leaves.
    fn drain_inner(&mut self, now: Time) -> Vec<P> {
        let mut out = Vec::new();
        for cl in &mut self.classes {
            out.extend(cl.child.drain(now, &mut self.books));
            cl.active = false;
            cl.waiting = false;
        }
        self.round.clear();
        self.waiting.clear();
        out
    }

    fn visit_classes_inner(&self, f: &mut dyn FnMut(&ClassView<'_>)) {
        if self.classifier.is_none() {
            return;
        }
        for (i, cl) in self.classes.iter().enumerate() {
            f(&cl.child.view(&self.names[i], i as u32, 0));
        }
    }

    fn extra_stats_inner(&self, f: &mut dyn FnMut(&'static str, f64)) {
        let name = if self.classifier.is_some() {
            "active_classes"
        } else {
            "active_flows"
        };
        f(name, self.round.len() as f64);
        f("throttled_classes", self.waiting.len() as f64);
        if self.classifier.is_none() {
            f("flow_table", f64::from(u8::from(self.has_flow_table())));
            f("flow_tables_built", self.built as f64);
            f("flow_tables_released", self.released as f64);
        }
    }
    /// Flow-hash mode: nothing per bucket depends on time (module docs).
    fn release_hold_inner(&self) -> Option<Duration> {
        self.classifier.is_none().then_some(Duration::ZERO)
    }
    fn release_state_inner(&mut self) -> bool {
        if self.classifier.is_some()
            || self.classes.is_empty()
            || !self.round.is_empty()
            || !self.waiting.is_empty()
        {
            return false;
        }
        self.classes = Vec::new();
        self.round = VecDeque::new();
        self.released += 1;
        true
    }
    fn state_bytes_inner(&self) -> usize {
        if self.classifier.is_some() {
            return 0;
        }
        self.classes.capacity() * std::mem::size_of::<Class<P>>()
            + self
                .classes
                .iter()
                .map(|c| c.child.heap_bytes())
                .sum::<usize>()
            + self.round.capacity() * 4
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::classify::FilterSpec;
    use crate::packet::PacketMeta;

    fn pkt(flow: u32, tos: u8, len: u32) -> PacketMeta {
        PacketMeta {
            len,
            tos,
            flow_hash: flow,
            ..Default::default()
        }
    }

    #[test]
    fn validation() {
        let bad = |f: fn(&mut DrrParams), name: &str| {
            let mut p = DrrParams::default();
            f(&mut p);
            assert_eq!(p.validate().unwrap_err().param, name);
        };
        bad(|p| p.quantum = 10, "quantum");
        bad(|p| p.flows = 0, "flows");
        bad(|p| p.limit = 0, "limit");
        let spec = |q| DrrClassSpec::<PacketMeta> {
            name: "a".into(),
            quantum: q,
            leaf: LeafSpec::Fifo(FifoLimit::Packets(10)),
        };
        let e = Drr::with_classes(
            DrrParams::default(),
            vec![spec(1)],
            Classifier::new(vec![], 0),
        )
        .err()
        .unwrap();
        assert!(e.message.contains("class `a`"), "{e:?}");
        assert!(Drr::with_classes(
            DrrParams::default(),
            vec![spec(1500)],
            Classifier::new(vec![], 1)
        )
        .is_err());
    }

    #[test]
    fn quanta_ratio_in_classful_mode() {
        // Class 0 (TOS 0x10) quantum 3000, class 1 (default) quantum 1000; 500-byte packets.
        let f = FilterSpec {
            tos: Some((0x10, 0xFC)),
            ..FilterSpec::any(0)
        };
        let specs = vec![
            DrrClassSpec {
                name: "big".into(),
                quantum: 3000,
                leaf: LeafSpec::Fifo(FifoLimit::Packets(100)),
            },
            DrrClassSpec {
                name: "small".into(),
                quantum: 1000,
                leaf: LeafSpec::Fifo(FifoLimit::Packets(100)),
            },
        ];
        let mut q =
            Drr::with_classes(DrrParams::default(), specs, Classifier::new(vec![f], 1)).unwrap();
        for _ in 0..40 {
            q.enqueue(pkt(0, 0x10, 500), Time(0)).unwrap();
            q.enqueue(pkt(0, 0x00, 500), Time(0)).unwrap();
        }
        // First round: 6 packets of class 0, then 2 of class 1.
        let first: Vec<u8> = (0..8)
            .map(|_| q.dequeue(Time(0)).packet().unwrap().tos)
            .collect();
        assert_eq!(
            first,
            vec![0x10; 6].into_iter().chain([0, 0]).collect::<Vec<_>>()
        );
        q.stats().check_conservation().unwrap();
        let mut names = Vec::new();
        q.visit_classes(&mut |v| names.push((v.name.to_string(), v.stats.sent.packets)));
        assert_eq!(names, vec![("big".into(), 6), ("small".into(), 2)]);
    }

    #[test]
    fn flow_mode_round_robin() {
        let mut q = Drr::new(DrrParams {
            flows: 16,
            ..Default::default()
        })
        .unwrap();
        for _ in 0..3 {
            q.enqueue(pkt(1, 0, 1514), Time(0)).unwrap();
            q.enqueue(pkt(2, 0, 1514), Time(0)).unwrap();
        }
        let order: Vec<u32> = std::iter::from_fn(|| q.dequeue(Time(0)).packet())
            .map(|p| p.flow_hash)
            .collect();
        assert_eq!(order, vec![1, 2, 1, 2, 1, 2]);
        q.stats().check_conservation().unwrap();
    }
}
