//! Hints and checks: the dequeue prefetch and the successors it remembers change nothing
//! observable, and `check_invariants` catches a row membership nothing expects and a throttled
//! class the wait queue lost.

use super::tests::{build, pkt, MBIT};
use super::*;
use crate::classify::{Classifier, FilterSpec};
use crate::packet::PacketMeta;

// ---- hints change nothing ------------------------------------------------------------------

#[test]
fn the_dequeue_prefetch_and_its_remembered_successors_change_nothing() {
    // A tree beyond `PREFETCH_ROW_WORDS_MIN` classes (root, 4 classes, 16,384 below them, 16
    // leaves under each, prios by slot) and random leaves without a backlog: the working set
    // is cold, so one copy prefetches (and remembers each served leaf's successor in its row,
    // `RowBits::successor`, checked in debug builds by `remember`); the other never does. Same
    // packets out, in the same order, same state.
    let rate = Rate(10_000 * MBIT);
    let leaves: Vec<u32> = (0..1u32 << 18).map(|l| 5 + 16_384 + l).collect();
    let tree = || {
        let params = HtbParams::default();
        let mut specs = vec![HtbClassSpec::new("r", None, rate, rate, &params)];
        for k in 0..4u32 {
            specs.push(HtbClassSpec::new(
                &format!("s{k}"),
                Some(0),
                rate,
                rate,
                &params,
            ));
        }
        for p in 0..16_384u32 {
            let s = HtbClassSpec::new(&format!("p{p}"), Some(1 + p % 4), rate, rate, &params);
            specs.push(s);
        }
        for l in 0..(1u32 << 18) {
            let mut s = HtbClassSpec::new(&format!("l{l}"), Some(5 + l / 16), rate, rate, &params);
            s.prio = (l % 16).min(7) as u8;
            specs.push(s);
        }
        let none = Classifier::new(Vec::<FilterSpec>::new(), leaves[0]);
        Htb::<PacketMeta>::new(params, specs, none).unwrap()
    };
    let (mut a, mut b) = (tree(), tree());
    assert!(a.classes.len() >= PREFETCH_ROW_WORDS_MIN);
    b.warmth = warmth::Warmth::new(0);
    let (mut out_a, mut out_b) = (Vec::new(), Vec::new());
    let mut refused = Vec::new();
    let mut id = 0u16;
    // First a standing backlog of three packets in each of 512 leaves, half of it served
    // within the first epoch (a large tree starts prefetching): the pipeline then reads the
    // first slot of leaves holding several packets, and taking one prefetches the next.
    let backlogged: Vec<u32> = leaves.iter().copied().step_by(512).collect();
    for &c in &backlogged {
        for _ in 0..3 {
            let p = PacketMeta {
                len: 64,
                src_port: id,
                ..Default::default()
            };
            id = id.wrapping_add(1);
            a.enqueue_to(c, p, Time(0)).unwrap();
            b.enqueue_to(c, p, Time(0)).unwrap();
        }
    }
    assert!(
        a.warmth.prefetch(),
        "the copy with hints gives them from the start"
    );
    for _ in 0..24 {
        let _ = a.dequeue_burst(Time(0), 32, &mut out_a);
        let _ = b.dequeue_burst(Time(0), 32, &mut out_b);
    }
    assert_eq!(out_a.len(), 24 * 32);
    assert!(
        out_a == out_b,
        "same packets in the same order from the backlog"
    );
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    for round in 0..600u64 {
        let now = Time(round * 2_000);
        let mut classes = Vec::new();
        let mut pkts = Vec::new();
        for _ in 0..32 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            classes.push(leaves[(x % leaves.len() as u64) as usize]);
            pkts.push(PacketMeta {
                len: 64,
                src_port: id,
                ..Default::default()
            });
            id = id.wrapping_add(1);
        }
        let mut pkts_b = pkts.clone();
        a.enqueue_burst_to(&classes, &mut pkts, now, &mut refused);
        b.enqueue_burst_to(&classes, &mut pkts_b, now, &mut refused);
        assert!(refused.is_empty());
        let _ = a.dequeue_burst(now, 32, &mut out_a);
        let _ = b.dequeue_burst(now, 32, &mut out_b);
    }
    assert!(a.warmth.prefetch(), "the copy with hints gave them");
    assert_eq!(out_a.len(), (24 + 600) * 32);
    assert!(out_a == out_b, "same packets in the same order");
    for &c in leaves.iter().step_by(997) {
        assert_eq!(a.class_stats(c), b.class_stats(c));
    }
    a.check_invariants().unwrap();
    b.check_invariants().unwrap();
}

#[test]
fn check_invariants_finds_a_membership_nothing_expects() {
    let classes = [
        ("root", None, 10_000_000, 10_000_000, 0),
        ("a", Some("root"), 5_000_000, 10_000_000, 0),
        ("b", Some("root"), 5_000_000, 10_000_000, 1),
    ];
    let mut t = build(&classes, "a");
    t.htb.enqueue_to(2, pkt(100), Time(0)).unwrap();
    t.htb.check_invariants().unwrap();
    // `a` is idle: hooking it into its row is what the counts must catch.
    let n = t.htb.classes.len();
    t.htb.row_bits[Htb::<PacketMeta>::row_id(0, 0)].insert(1, n);
    t.htb.row_mask[0] |= 1;
    let e = t.htb.check_invariants().unwrap_err();
    assert!(
        e.contains("rows hold 2 members") && e.contains("a (active 0x0)"),
        "{e}"
    );
}

#[test]
fn check_invariants_finds_a_throttled_class_the_wait_queue_lost() {
    // `a` at 1 Mbit/s with a small burst and ceil: two 1500-byte packets put it in debt, so it
    // waits (`CantSend`) with an entry in the wait queue of level 0.
    let classes = [
        ("root", None, 10_000_000, 10_000_000, 0),
        ("a", Some("root"), 1_000_000, 1_000_000, 0),
    ];
    let mut t = build(&classes, "a");
    for _ in 0..4 {
        t.htb.enqueue_to(1, pkt(1500), Time(0)).unwrap();
    }
    let mut sent = 0;
    while let Dequeued::Packet(_) = t.htb.dequeue(Time(0)) {
        sent += 1;
    }
    assert!(sent < 4, "the class never waited");
    assert_ne!(t.htb.classes[1].mode, ClassMode::CanSend);
    t.htb.check_invariants().unwrap();
    // Its entry goes stale (another key): nothing would wake it.
    let (k, c) = t.htb.wait[0].top().unwrap();
    assert_eq!(c, 1);
    t.htb.wait[0] = waitq::WaitQ::default();
    t.htb.wait[0].joined();
    t.htb.wait[0].push(k + 1, c, |_, _| true);
    let e = t.htb.check_invariants().unwrap_err();
    assert!(
        e.contains("class a: mode") && e.contains("in wait queue: false"),
        "{e}"
    );
    // A member count that is off is caught too.
    t.htb.wait[0] = waitq::WaitQ::default();
    t.htb.wait[0].push(k, c, |_, _| true);
    let e = t.htb.check_invariants().unwrap_err();
    assert!(
        e.contains("0 members counted, 1 classes not CanSend"),
        "{e}"
    );
}
