//! `Htb::retune` and `Htb::replace_classifier`: a change applied in place touches the class
//! changed and nothing else (records, counters, queues of every other class bit for bit), keeps
//! the changed class's counters and queue, conserves the qdisc-wide books, takes effect at the
//! new rate, and leaves no more profiles than a fresh tree would.

use super::tests::{build, pkt};
use super::*;
use crate::classify::{FilterSpec, IpPrefix};
use crate::packet::{PacketMeta, L3};

const MBIT: u64 = 1_000_000;

fn tree() -> Htb<PacketMeta> {
    let classes = [
        ("root", None, 10 * MBIT, 10 * MBIT, 0),
        ("a", Some("root"), MBIT, MBIT, 0),
        ("b", Some("root"), MBIT, MBIT, 0),
        ("c", Some("root"), MBIT, 3 * MBIT, 1),
    ];
    build(&classes, "c").htb
}

fn tune_of(h: &Htb<PacketMeta>, c: ClassId) -> ClassTune {
    let p = h.prof(c);
    ClassTune {
        rate: Rate(p.rate),
        ceil: Rate(p.ceil),
        burst: p.burst,
        cburst: p.cburst,
        quantum: p.quantum,
        fifo_limit: p.limit,
    }
}

/// Everything the datapath keeps about class `c` but its profile index, for equality checks.
fn state(h: &Htb<PacketMeta>, c: u32) -> (i64, i64, u64, ClassMode, u8, u64, u64, ClassStats) {
    let cl = &h.classes[c as usize];
    let b = h.leaf_backlog(c);
    let s = h.class_stats(c).unwrap();
    (
        cl.tokens, cl.ctokens, cl.t_c, cl.mode, cl.active, b.packets, b.bytes, s,
    )
}

/// Fill `a`, `b` and `c` and send some, so that every class has debt, counters and a queue.
fn busy(h: &mut Htb<PacketMeta>) -> Time {
    let mut now = Time(1_000_000);
    for i in 0..40u32 {
        for c in 1..=3 {
            h.enqueue_to(c, pkt(1000 + i), now).unwrap();
        }
    }
    for _ in 0..30 {
        now = Time(now.0 + 200_000);
        while let Dequeued::Packet(_) = h.dequeue(now) {}
    }
    now
}

#[test]
fn a_rate_change_touches_only_its_class_and_keeps_its_queue_and_counters() {
    let mut h = tree();
    let now = busy(&mut h);
    let others_before: Vec<_> = [0, 2, 3].iter().map(|&c| state(&h, c)).collect();
    let a_before = state(&h, 1);
    let books = h.stats().clone();
    assert!(a_before.5 > 0, "`a` should still hold packets");

    let mut t = tune_of(&h, 1);
    t.rate = Rate(4 * MBIT);
    t.ceil = Rate(4 * MBIT);
    assert!(h.retune(1, &t, now).unwrap());

    let others_after: Vec<_> = [0, 2, 3].iter().map(|&c| state(&h, c)).collect();
    assert_eq!(others_before, others_after, "another class changed");
    let a_after = state(&h, 1);
    assert_eq!((a_after.5, a_after.6), (a_before.5, a_before.6), "queue");
    assert_eq!(a_after.7, a_before.7, "counters");
    assert_eq!(*h.stats(), books, "qdisc-wide books");
    h.check_invariants().unwrap();
    // The same parameters again change nothing.
    assert!(!h.retune(1, &t, now).unwrap());
}

#[test]
fn a_new_rate_takes_effect_and_the_books_balance() {
    let mut h = tree();
    let mut now = Time(0);
    let mut sent = [0u64; 2];
    for (phase, total) in sent.iter_mut().enumerate() {
        if phase == 1 {
            let mut t = tune_of(&h, 1);
            t.rate = Rate(3 * MBIT);
            t.ceil = Rate(3 * MBIT);
            t.burst = default_burst(t.rate, DEFAULT_MTU);
            t.cburst = t.burst;
            h.retune(1, &t, now).unwrap();
        }
        // One second of a backlogged `a`, in 1 ms steps.
        for _ in 0..1000 {
            while h.leaf_backlog(1).packets < 50 {
                h.enqueue_to(1, pkt(1000), now).unwrap();
            }
            while let Dequeued::Packet(p) = h.dequeue(now) {
                *total += p.len as u64;
            }
            now = Time(now.0 + 1_000_000);
        }
    }
    // 1 Mbit/s, then 3 Mbit/s: 125,000 and 375,000 bytes a second, within a burst or two.
    assert!(sent[0].abs_diff(125_000) < 6_000, "{sent:?}");
    assert!(sent[1].abs_diff(375_000) < 6_000, "{sent:?}");
    let s = h.stats();
    assert_eq!(
        s.enqueued.packets,
        s.dequeued.packets + s.dropped.total().packets + s.backlog.packets
    );
    h.check_invariants().unwrap();
}

#[test]
fn a_throttled_class_given_more_rate_is_released_and_a_slower_one_waits() {
    let mut h = tree();
    let now = busy(&mut h);
    // `b` is in debt at 1 Mbit/s: slowing it to its minimum keeps it waiting longer, speeding
    // it up lets it send again sooner; both keep the invariants of lists and wait queues.
    let mut t = tune_of(&h, 2);
    t.rate = Rate(10_000);
    t.ceil = Rate(10_000);
    h.retune(2, &t, now).unwrap();
    h.check_invariants().unwrap();
    assert_ne!(h.class_mode(2), Some(ClassMode::CanSend));
    t.rate = Rate(10 * MBIT);
    t.ceil = Rate(10 * MBIT);
    h.retune(2, &t, now).unwrap();
    h.check_invariants().unwrap();
    let sent_before = h.class_stats(2).unwrap().sent.packets;
    let mut later = now;
    for _ in 0..20 {
        later = Time(later.0 + 1_000_000);
        while let Dequeued::Packet(_) = h.dequeue(later) {}
    }
    assert!(
        h.class_stats(2).unwrap().sent.packets > sent_before,
        "`b` was not released"
    );
    h.check_invariants().unwrap();
}

#[test]
fn profiles_stay_bounded_over_many_changes() {
    let mut h = tree();
    let fresh = h.profiles_held();
    let base = tune_of(&h, 1);
    for i in 0..200u64 {
        let mut t = base;
        t.rate = Rate(MBIT + i * 1000);
        t.ceil = t.rate.max(base.ceil);
        h.retune(1, &t, Time(i)).unwrap();
        assert!(h.profiles_held() <= fresh + 1, "{}", h.profiles_held());
    }
    // Back to the original: the tree needs exactly the profiles a fresh one does.
    h.retune(1, &base, Time(1_000)).unwrap();
    let used: std::collections::HashSet<u32> = h.classes.iter().map(|c| c.profile).collect();
    assert_eq!(used.len(), fresh);
    assert!(h.profiles_held() <= fresh + 1);
}

#[test]
fn bad_parameters_are_refused_and_change_nothing() {
    let mut h = tree();
    let before = state(&h, 1);
    let mut t = tune_of(&h, 1);
    t.ceil = Rate(t.rate.0 - 1);
    assert!(matches!(
        h.retune(1, &t, Time(5)),
        Err(HtbError::CeilBelowRate { .. })
    ));
    assert!(matches!(
        h.retune(99, &t, Time(5)),
        Err(HtbError::UnknownClass(99))
    ));
    assert_eq!(state(&h, 1), before);
}

#[test]
fn new_filters_move_an_address_and_the_old_classifier_comes_back() {
    let mut h = tree();
    let addr = |last: u8| PacketMeta {
        len: 100,
        l3: L3::Ipv4,
        dst: std::net::IpAddr::from([10, 0, 0, last]),
        ..Default::default()
    };
    let to = |class: ClassId, last: u8| FilterSpec {
        class,
        dst: Some(IpPrefix::new(std::net::IpAddr::from([10, 0, 0, last]), 32).unwrap()),
        ..Default::default()
    };
    h.replace_classifier(Classifier::new(vec![to(1, 7)], 3))
        .unwrap();
    h.enqueue(addr(7), Time(0)).unwrap();
    assert_eq!(h.leaf_backlog(1).packets, 1);
    let old = h
        .replace_classifier(Classifier::new(vec![to(2, 7)], 3))
        .unwrap();
    assert_eq!(old.filters()[0].class, 1);
    h.enqueue(addr(7), Time(0)).unwrap();
    assert_eq!(h.leaf_backlog(2).packets, 1);
    assert_eq!(
        h.leaf_backlog(1).packets,
        1,
        "a queued packet stays where it is"
    );
    // A default that is not a leaf is refused and the running filters stay.
    assert!(h.replace_classifier(Classifier::new(vec![], 0)).is_err());
    assert_eq!(h.classifier().filters()[0].class, 2);
    h.check_invariants().unwrap();
}
