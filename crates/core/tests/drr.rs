//! DRR properties: conservation after every call (with FIFO, SFQ and throttled leaves), shares
//! proportional to quanta among backlogged classes, and a throttled leaf never stalls the others.

use linkshare_core::classify::{Classifier, FilterSpec};
use linkshare_core::leaf::LeafSpec;
use linkshare_core::qdisc::drr::{Drr, DrrClassSpec, DrrParams};
use linkshare_core::qdisc::fifo::{FifoLimit, FifoQueue};
use linkshare_core::qdisc::sfq::{Sfq, SfqParams};
use linkshare_core::qdisc::{Books, Discipline};
use linkshare_core::{Dequeued, Dropped, PacketMeta, Qdisc, Time};
use proptest::prelude::*;

/// A FIFO that may send only at or after `open` (stands in for a rate limiter such as TBF).
struct Gate {
    inner: FifoQueue<PacketMeta>,
    open: u64,
    books: Books<PacketMeta>,
}

/// Only the hooks: the counters and victims come from the provided `Qdisc` methods.
impl Discipline<PacketMeta> for Gate {
    fn books(&self) -> &Books<PacketMeta> {
        &self.books
    }
    fn books_mut(&mut self) -> &mut Books<PacketMeta> {
        &mut self.books
    }
    fn enqueue_inner(&mut self, pkt: PacketMeta, _now: Time) -> Result<(), Dropped<PacketMeta>> {
        self.inner.push(pkt)
    }
    fn dequeue_inner(&mut self, now: Time) -> Dequeued<PacketMeta> {
        if !self.inner.is_empty() && now.0 < self.open {
            return Dequeued::NotBefore(Time(self.open));
        }
        self.inner.pop().map_or(Dequeued::Empty, Dequeued::Packet)
    }
    fn kind_inner(&self) -> &'static str {
        "gate"
    }
}

/// Class `i` is chosen by TOS byte `i << 2` (DSCP `i`).
fn classifier(n: usize) -> Classifier {
    let filters = (0..n)
        .map(|i| FilterSpec {
            dscp: Some(vec![i as u8]),
            ..FilterSpec::any(i as u32)
        })
        .collect();
    Classifier::new(filters, 0)
}

fn pkt(class: usize, len: u32, flow: u32) -> PacketMeta {
    PacketMeta {
        len,
        tos: (class as u8) << 2,
        flow_hash: flow,
        ..Default::default()
    }
}

fn leaf(kind: u8, limit: u32, open: u64) -> LeafSpec<PacketMeta> {
    match kind {
        0 => LeafSpec::Fifo(FifoLimit::Packets(limit)),
        1 => LeafSpec::Fifo(FifoLimit::Bytes(limit * 500)),
        2 => LeafSpec::Qdisc(Box::new(
            Sfq::new(SfqParams {
                limit,
                depth: limit,
                ..Default::default()
            })
            .unwrap(),
        )),
        _ => LeafSpec::Qdisc(Box::new(Gate {
            inner: FifoQueue::new(FifoLimit::Packets(limit)),
            open,
            books: Books::new(),
        })),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Counters are conserved after every call; `NotBefore` is never in the past; every accepted
    /// packet eventually leaves or is reported dropped.
    #[test]
    fn conservation(
        kinds in proptest::collection::vec((0u8..4, 64u32..4000, 1u32..20, 0u64..5_000_000), 1..6),
        ops in proptest::collection::vec((0usize..6, 40u32..1600, 0u32..8, 0u8..3), 1..400),
    ) {
        let n = kinds.len();
        let specs = kinds.iter().enumerate().map(|(i, &(k, quantum, limit, open))| DrrClassSpec {
            name: format!("c{i}"),
            quantum,
            leaf: leaf(k, limit, open),
        }).collect();
        let mut q = Drr::with_classes(DrrParams::default(), specs, classifier(n)).unwrap();
        let (mut now, mut accepted, mut gone) = (0u64, 0u64, 0u64);
        for (class, len, flow, op) in ops {
            match op {
                0 | 1 => {
                    if q.enqueue(pkt(class % n, len, flow), Time(now)).is_ok() {
                        accepted += 1;
                    }
                }
                _ => match q.dequeue(Time(now)) {
                    Dequeued::Packet(_) => gone += 1,
                    Dequeued::NotBefore(t) => {
                        prop_assert!(t.0 > now && q.backlog().packets > 0);
                        now = t.0;
                    }
                    Dequeued::Empty => prop_assert_eq!(q.backlog().packets, 0),
                },
            }
            while q.take_dropped().is_some() {
                gone += 1;
            }
            q.stats().check_conservation().map_err(TestCaseError::fail)?;
            prop_assert_eq!(accepted, gone + q.backlog().packets);
        }
        // Everything drains in bounded time.
        for _ in 0..10_000 {
            match q.dequeue(Time(now)) {
                Dequeued::Packet(_) => gone += 1,
                Dequeued::NotBefore(t) => now = t.0,
                Dequeued::Empty => break,
            }
            while q.take_dropped().is_some() {
                gone += 1;
            }
        }
        prop_assert_eq!(q.backlog().packets, 0);
        prop_assert_eq!(accepted, gone);
    }

    /// Backlogged classes: after every dequeue, `sent_i / quantum_i` differ by less than
    /// `1 + maxpkt / min(quantum_i, quantum_j)` rounds, so shares converge to the quanta ratio.
    #[test]
    fn shares_proportional_to_quanta(
        classes in proptest::collection::vec((64u32..6000, 64u32..1515), 2..6),
    ) {
        let n = classes.len();
        let per_class = 400u32;
        let specs = classes.iter().enumerate().map(|(i, &(quantum, _))| DrrClassSpec {
            name: format!("c{i}"),
            quantum,
            leaf: LeafSpec::Fifo(FifoLimit::Packets(per_class)),
        }).collect();
        let mut q = Drr::with_classes(DrrParams::default(), specs, classifier(n)).unwrap();
        for _ in 0..per_class {
            for (i, &(_, len)) in classes.iter().enumerate() {
                q.enqueue(pkt(i, len, 0), Time(0)).unwrap();
            }
        }
        let mut sent = vec![0u64; n];
        let mut left = vec![per_class; n];
        let maxpkt = classes.iter().map(|c| c.1).max().unwrap() as f64;
        while left.iter().all(|&l| l > 0) {
            let p = q.dequeue(Time(0)).packet().unwrap();
            let c = (p.tos >> 2) as usize;
            sent[c] += p.len as u64;
            left[c] -= 1;
            for i in 0..n {
                for j in 0..n {
                    let (qi, qj) = (classes[i].0 as f64, classes[j].0 as f64);
                    let d = sent[i] as f64 / qi - sent[j] as f64 / qj;
                    prop_assert!(d < 1.0 + maxpkt / qi.min(qj),
                        "sent {:?} quanta {:?}", sent, classes);
                }
            }
        }
    }

    /// Flow-hash mode: equal-size backlogged flows in distinct buckets alternate fairly.
    #[test]
    fn flow_mode_fairness(nflows in 2u32..10, len in 64u32..1515) {
        let mut q = Drr::new(DrrParams { flows: 64, ..Default::default() }).unwrap();
        for _ in 0..100 {
            for f in 0..nflows {
                q.enqueue(pkt(0, len, f), Time(0)).unwrap();
            }
        }
        let mut sent = vec![0u64; nflows as usize];
        for _ in 0..50 * nflows {
            let p = q.dequeue(Time(0)).packet().unwrap();
            sent[p.flow_hash as usize] += p.len as u64;
            let max = *sent.iter().max().unwrap();
            let min = *sent.iter().min().unwrap();
            prop_assert!(max - min < 1514 + len as u64);
        }
    }
}

/// A throttled class is skipped, the others keep sending, and the earliest `NotBefore` is
/// returned when only throttled classes are left.
#[test]
fn throttled_leaf_does_not_stall() {
    let specs = vec![
        DrrClassSpec {
            name: "slow".into(),
            quantum: 1500,
            leaf: leaf(3, 10, 5_000),
        },
        DrrClassSpec {
            name: "slow2".into(),
            quantum: 1500,
            leaf: leaf(3, 10, 3_000),
        },
        DrrClassSpec {
            name: "fast".into(),
            quantum: 1500,
            leaf: leaf(0, 10, 0),
        },
    ];
    let mut q = Drr::with_classes(DrrParams::default(), specs, classifier(3)).unwrap();
    for _ in 0..3 {
        for c in 0..3 {
            q.enqueue(pkt(c, 1000, 0), Time(0)).unwrap();
        }
    }
    for _ in 0..3 {
        assert_eq!(q.dequeue(Time(0)).packet().unwrap().tos >> 2, 2);
    }
    assert_eq!(q.dequeue(Time(0)), Dequeued::NotBefore(Time(3_000)));
    assert_eq!(q.dequeue(Time(3_000)).packet().unwrap().tos >> 2, 1);
    let mut extra = Vec::new();
    q.extra_stats(&mut |n, v| extra.push((n, v)));
    assert!(extra.contains(&("throttled_classes", 1.0)), "{extra:?}");
    let mut order = Vec::new();
    let mut now = 3_000;
    loop {
        match q.dequeue(Time(now)) {
            Dequeued::Packet(p) => order.push(p.tos >> 2),
            Dequeued::NotBefore(t) => now = t.0,
            Dequeued::Empty => break,
        }
    }
    assert_eq!(order, vec![1, 1, 0, 0, 0]);
    assert_eq!(now, 5_000);
    q.stats().check_conservation().unwrap();
    assert!(q.stats().overlimits >= 2);
}
