//! HTB construction and its limits: typed construction errors, the quantum and burst limits,
//! the default burst and quantum formulas, leaf limits and a boxed leaf qdisc, the shared packet
//! pool growing under a backlog, and the size of a class record.

use super::tests::{build_with, pkt, MBIT};
use super::*;
use crate::classify::Classifier;
use crate::packet::PacketMeta;
use crate::qdisc::fifo::{Fifo, FifoLimit};

/// The shared packet pool doubles into a new allocation (`grow_pool`) several times under a
/// backlog of 9,000 packets, with slots freed and reused in between: every leaf keeps its packets
/// and their order, and nothing is lost.
#[test]
fn the_packet_pool_grows_without_losing_or_reordering() {
    let mut t = build_with(
        &[
            ("root", None, 100 * MBIT, 100 * MBIT, 0),
            ("a", Some("root"), 10 * MBIT, 100 * MBIT, 0),
            ("b", Some("root"), 10 * MBIT, 100 * MBIT, 1),
            ("c", Some("root"), 10 * MBIT, 100 * MBIT, 2),
        ],
        "a",
        |s| s.leaf = LeafSpec::Fifo(FifoLimit::Packets(10_000)),
    );
    let tagged = |seq: u16| PacketMeta {
        src_port: seq,
        ..pkt(100)
    };
    let mut sent = 0u64;
    for seq in 0..3000u16 {
        for leaf in 1..=3 {
            t.htb.enqueue_to(leaf, tagged(seq), Time(0)).unwrap();
        }
        // Take one out now and then: its slot is freed and reused by the next enqueue.
        if seq % 7 == 0 {
            if let Dequeued::Packet(_) = t.htb.dequeue(Time(0)) {
                sent += 1;
            }
        }
    }
    assert!(
        t.htb.pool.line_capacity() * super::pool::LINE >= 8192,
        "the pool grew past 8,192 slots"
    );
    t.htb.check_invariants().unwrap();
    let left = t.htb.drain(Time(0));
    assert_eq!(left.len() as u64 + sent, 9000);
    // Each leaf's packets come out in the order they went in.
    for leaf in 1..=3u32 {
        let b = t.htb.leaf_backlog(leaf);
        assert_eq!(b.packets, 0, "leaf {leaf} drained");
    }
    let mut last: Vec<Option<u16>> = vec![None; 4];
    let mut leaf = 1;
    for p in &left {
        // drain goes leaf by leaf in class order; a leaf's run ends where the sequence drops.
        if let Some(prev) = last[leaf] {
            if p.src_port <= prev {
                leaf += 1;
            }
        }
        assert!(leaf <= 3, "more runs than leaves: packets out of order");
        last[leaf] = Some(p.src_port);
    }
}

#[test]
fn leaf_limits_drop_and_count() {
    let mut t = build_with(&[("a", None, MBIT, MBIT, 0)], "a", |s| {
        s.leaf = LeafSpec::Fifo(FifoLimit::Packets(2))
    });
    assert!(t.htb.enqueue(pkt(100), Time(0)).is_ok());
    assert!(t.htb.enqueue(pkt(100), Time(0)).is_ok());
    let d = t.htb.enqueue(pkt(100), Time(0)).unwrap_err();
    assert_eq!(d.reason, DropReason::QueueLimit);
    assert_eq!(t.htb.class_stats(0).unwrap().drops, 1);
    assert_eq!(t.htb.stats().refused.get(DropReason::QueueLimit).packets, 1);
    t.htb.check_invariants().unwrap();
    let mut views = Vec::new();
    t.htb.visit_classes(&mut |v| {
        views.push((
            v.name.to_string(),
            v.leaf_drops.get(DropReason::QueueLimit).packets,
        ))
    });
    assert_eq!(views, vec![("a".to_string(), 1)]);
}

#[test]
fn boxed_leaf_qdisc_works() {
    let mut t = build_with(&[("a", None, 8 * MBIT, 8 * MBIT, 0)], "a", |s| {
        s.leaf = LeafSpec::Qdisc(Box::new(Fifo::bfifo(3000)))
    });
    for _ in 0..3 {
        t.htb.enqueue(pkt(1000), Time(0)).unwrap();
    }
    assert_eq!(
        t.htb.enqueue(pkt(1000), Time(0)).unwrap_err().reason,
        DropReason::ByteLimit
    );
    let mut n = 0;
    let mut now = 0;
    while n < 3 {
        match t.htb.dequeue(Time(now)) {
            Dequeued::Packet(_) => n += 1,
            Dequeued::NotBefore(w) => now = w.0,
            Dequeued::Empty => panic!("lost packets"),
        }
        t.htb.check_invariants().unwrap();
    }
    assert_eq!(t.htb.dequeue(Time(now)), Dequeued::Empty);
}

#[test]
fn construction_errors() {
    let p = HtbParams::default();
    let cls =
        |v: Vec<HtbClassSpec<PacketMeta>>, d: u32| Htb::new(p, v, Classifier::new(vec![], d)).err();
    let mut a = HtbClassSpec::new("a", Some(1), Rate(1), Rate(1), &p);
    let mut b = HtbClassSpec::new("b", Some(0), Rate(1), Rate(1), &p);
    assert!(matches!(cls(vec![a, b], 0), Some(HtbError::Cycle { .. })));
    a = HtbClassSpec::new("a", Some(5), Rate(1), Rate(1), &p);
    assert!(matches!(
        cls(vec![a], 0),
        Some(HtbError::UnknownParent { .. })
    ));
    a = HtbClassSpec::new("a", None, Rate(2), Rate(1), &p);
    assert!(matches!(
        cls(vec![a], 0),
        Some(HtbError::CeilBelowRate { .. })
    ));
    a = HtbClassSpec::new("a", None, Rate(2), Rate(2), &p);
    b = HtbClassSpec::new("b", Some(0), Rate(1), Rate(1), &p);
    assert!(matches!(
        cls(vec![a, b], 0),
        Some(HtbError::DefaultNotLeaf(_))
    ));
    // a chain of 9 classes is too deep
    let chain: Vec<_> = (0..9)
        .map(|i| {
            HtbClassSpec::new(
                &format!("c{i}"),
                if i == 0 { None } else { Some(i - 1) },
                Rate(1),
                Rate(1),
                &p,
            )
        })
        .collect();
    assert!(matches!(cls(chain, 8), Some(HtbError::TooDeep { .. })));
    // 8 levels is fine (7 inner + leaf)
    let chain: Vec<_> = (0..8)
        .map(|i| {
            HtbClassSpec::new(
                &format!("c{i}"),
                if i == 0 { None } else { Some(i - 1) },
                Rate(1),
                Rate(1),
                &p,
            )
        })
        .collect();
    assert!(cls(chain, 7).is_none());
}

/// Issue 13: a quantum above 2^31 overflowed the deficit (`quantum as i32`: a panic in debug, a
/// class that never gets a turn in release), and a burst above what a bucket holds was silently
/// cut. Both are typed construction errors naming the limit; the limits themselves work.
#[test]
fn quantum_and_burst_limits_are_enforced() {
    let p = HtbParams::default();
    let leaf = |q: u32, burst: u32, cburst: u32| {
        let root =
            HtbClassSpec::<PacketMeta>::new("root", None, Rate::mbit(10), Rate::mbit(10), &p);
        let mut a = HtbClassSpec::new("a", Some(0), Rate::mbit(5), Rate::mbit(10), &p);
        (a.quantum, a.burst, a.cburst) = (q, burst, cburst);
        let b = HtbClassSpec::new("b", Some(0), Rate::mbit(5), Rate::mbit(10), &p);
        Htb::new(p, vec![root, a, b], Classifier::new(vec![], 1))
    };
    let ok_b = 100_000;
    for q in [QUANTUM_LIMIT + 1, (1 << 31) + 1, u32::MAX] {
        assert!(
            matches!(leaf(q, ok_b, ok_b), Err(HtbError::QuantumTooLarge { quantum, .. }) if quantum == q),
            "quantum {q}"
        );
    }
    for bytes in [BURST_LIMIT + 1, u32::MAX] {
        assert!(matches!(
            leaf(1500, bytes, ok_b),
            Err(HtbError::BurstTooLarge { key: "burst", .. })
        ));
        assert!(matches!(
            leaf(1500, ok_b, bytes),
            Err(HtbError::BurstTooLarge { key: "cburst", .. })
        ));
    }
    // At the limits: a bucket holds all of its burst, and both leaves get turns.
    let mut htb = leaf(QUANTUM_LIMIT, BURST_LIMIT, BURST_LIMIT).unwrap();
    for _ in 0..4 {
        for c in [1, 2] {
            htb.enqueue_to(c, pkt(1500), Time(0)).unwrap();
        }
    }
    let mut now = 0;
    let mut served = 0;
    for _ in 0..1000 {
        match htb.dequeue(Time(now)) {
            Dequeued::Packet(_) => served += 1,
            Dequeued::NotBefore(t) => now = t.0,
            Dequeued::Empty => break,
        }
    }
    assert_eq!(served, 8);
    let sent = |c| htb.class_stats(c).map(|s| s.sent.packets);
    assert_eq!(
        (sent(1), sent(2)),
        (Some(4), Some(4)),
        "neither leaf starves"
    );
    let mut tokens = Vec::new();
    htb.visit_classes(&mut |v| tokens.push((v.name.to_string(), v.tokens, v.ctokens)));
    let a = tokens.iter().find(|t| t.0 == "a").unwrap();
    assert_eq!(
        (a.1, a.2),
        (BURST_LIMIT as i64 - 6000, BURST_LIMIT as i64 - 6000)
    );
}

#[test]
fn default_burst_formula() {
    // 1 ms of rate plus one MTU.
    assert_eq!(default_burst(Rate(8 * MBIT), 1500), 1000 + 1500);
    assert_eq!(default_burst(Rate(64_000), 1500), 8 + 1500);
    assert_eq!(default_burst(Rate(10_000 * MBIT), 1500), 1_250_000 + 1500);
    assert_eq!(default_quantum(Rate(10 * MBIT), 10), (125_000, None));
    assert_eq!(
        default_quantum(Rate(64_000), 10),
        (1000, Some(QuantumWarning::Small { computed: 800 }))
    );
    assert_eq!(default_quantum(Rate(1000 * MBIT), 10).0, 200_000);
}

#[test]
fn class_state_is_small() {
    // 100k classes must fit in 16 MB: the per-class record is the bulk of it.
    let size = std::mem::size_of::<Class>();
    assert!(size <= 128, "Class is {size} bytes");
}
