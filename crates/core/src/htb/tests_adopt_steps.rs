//! `Htb::adopt_begin` / `adopt_step`: a take-over in bounded steps while the new tree runs ends
//! where the take-over at once ends (every class's counters, the books, the packets and their
//! order), a packet for a class not yet taken over comes after that class's old packets, and
//! nothing is unaccounted at any step.

use super::tests::{build, pkt, Tree};
use super::*;
use crate::packet::PacketMeta;

/// (name, parent, rate, ceil, prio): a root, two sites, leaves under them, one to be removed.
const OLD: [(&str, Option<&str>, u64, u64, u8); 7] = [
    ("root", None, 10_000_000, 10_000_000, 0),
    ("s1", Some("root"), 5_000_000, 10_000_000, 0),
    ("s2", Some("root"), 5_000_000, 10_000_000, 0),
    ("a", Some("s1"), 2_000_000, 10_000_000, 0),
    ("gone", Some("s1"), 1_000_000, 10_000_000, 0),
    ("b", Some("s2"), 2_000_000, 10_000_000, 1),
    ("c", Some("s2"), 1_000_000, 10_000_000, 0),
];

/// The new tree: `gone` removed, `new` added, `c` moved from `s2` to `s1`, ids renumbered.
const NEW: [(&str, Option<&str>, u64, u64, u8); 7] = [
    ("root", None, 10_000_000, 10_000_000, 0),
    ("new", Some("s2"), 1_000_000, 10_000_000, 0),
    ("s2", Some("root"), 5_000_000, 10_000_000, 0),
    ("s1", Some("root"), 5_000_000, 10_000_000, 0),
    ("b", Some("s2"), 2_000_000, 10_000_000, 1),
    ("c", Some("s1"), 1_000_000, 10_000_000, 0),
    ("a", Some("s1"), 2_000_000, 10_000_000, 0),
];

/// The old tree after some traffic: sends (so inner classes have totals and borrowing
/// counters), then a backlog of distinct lengths in every leaf.
fn old_with_traffic() -> Htb<PacketMeta> {
    let mut old = build(&OLD, "b").htb;
    let id = |n: &str| old.class_id(n).unwrap();
    let leaves = [id("a"), id("gone"), id("b"), id("c")];
    for (k, &c) in leaves.iter().enumerate() {
        for i in 0..30u32 {
            old.enqueue_to(c, pkt(1000 + 10 * k as u32 + i % 10), Time(0))
                .unwrap();
        }
    }
    let mut t = 0;
    for _ in 0..60 {
        match old.dequeue(Time(t)) {
            Dequeued::NotBefore(n) => t = n.0,
            _ => t += 100_000,
        }
    }
    for (k, &c) in leaves.iter().enumerate() {
        for i in 0..5u32 {
            old.enqueue_to(c, pkt(2000 + 100 * k as u32 + i), Time(t))
                .unwrap();
        }
    }
    old
}

/// Every class's counters by name, and the packets in the order the tree sends them.
fn outcome(h: &mut Htb<PacketMeta>, from: u64) -> (Vec<(String, ClassStats)>, Vec<u32>) {
    let stats = (0..h.len() as u32)
        .map(|c| (h.class_name(c).unwrap(), h.class_stats(c).unwrap()))
        .collect();
    let mut order = Vec::new();
    let mut t = from;
    while h.stats().backlog.packets > 0 {
        match h.dequeue(Time(t)) {
            Dequeued::Packet(p) => order.push(p.len),
            Dequeued::NotBefore(n) => t = n.0,
            Dequeued::Empty => break,
        }
    }
    (stats, order)
}

fn map_by_name(old: &Htb<PacketMeta>, new: &Htb<PacketMeta>) -> AdoptMap {
    let to_new: Vec<Option<ClassId>> = (0..old.len() as u32)
        .map(|c| new.class_id(&old.class_name(c).unwrap()))
        .collect();
    AdoptMap::new(&to_new, new.len())
}

#[test]
fn steps_end_where_the_take_over_at_once_ends() {
    let now = Time(50_000_000);
    let mut at_once = build(&NEW, "b").htb;
    let mut old = old_with_traffic();
    let t = at_once.adopt(&mut old, now);
    assert_eq!(t.kept.len(), 6);
    assert_eq!(
        (t.added.as_slice(), t.removed.as_slice()),
        (&["new".to_string()][..], &["gone".to_string()][..])
    );
    assert!(t.moved_packets > 0 && t.reclassified > 0);
    at_once.check_invariants().unwrap();
    let books = at_once.stats().clone();
    let reference = outcome(&mut at_once, now.0);

    for budget in [1, 2, 3, 100] {
        let Tree { htb: mut stepped } = build(&NEW, "b");
        let old = Box::new(old_with_traffic());
        let backlog = old.stats().backlog;
        let map = map_by_name(&old, &stepped);
        assert_eq!(map.kept(), 6);
        stepped.adopt_begin(old, map, now);
        // From the swap on, the books hold the old backlog: nothing is unaccounted.
        assert_eq!(stepped.stats().backlog, backlog);
        let mut steps = 0;
        let done = loop {
            stepped.stats().check_conservation().unwrap();
            steps += 1;
            if let Some(d) = stepped.adopt_step(now, budget) {
                break d;
            }
            assert!(stepped.adopting());
        };
        assert_eq!(steps, OLD.len().div_ceil(budget), "budget {budget}");
        assert!(!stepped.adopting());
        assert_eq!(
            done.report.moved_packets, t.moved_packets,
            "budget {budget}"
        );
        assert_eq!(done.report.reclassified, t.reclassified, "budget {budget}");
        stepped.check_invariants().unwrap();
        assert_eq!(stepped.stats(), &books, "budget {budget}");
        assert_eq!(outcome(&mut stepped, now.0), reference, "budget {budget}");
    }
}

#[test]
fn a_packet_for_a_class_not_yet_taken_over_comes_after_its_old_packets() {
    let now = Time(50_000_000);
    let mut new = build(&NEW, "b").htb;
    let old = Box::new(old_with_traffic());
    let map = map_by_name(&old, &new);
    let a_old = old.class_id("a").unwrap();
    let queued = old.leaf_backlog(a_old).packets;
    let sent_before = old.class_stats(a_old).unwrap().sent;
    new.adopt_begin(old, map, now);
    // No step yet: `a` is taken over (with `s1` and `root`) by this packet.
    let a = new.class_id("a").unwrap();
    new.enqueue_to(a, pkt(77), now).unwrap();
    assert_eq!(new.leaf_backlog(a).packets, queued + 1);
    assert_eq!(new.class_stats(a).unwrap().sent, sent_before);
    // The other classes still wait for the steps; the books count every packet.
    new.stats().check_conservation().unwrap();
    while new.adopt_step(now, 2).is_none() {}
    new.check_invariants().unwrap();
    let mut t = now.0;
    let mut from_a = Vec::new();
    while new.stats().backlog.packets > 0 {
        match new.dequeue(Time(t)) {
            Dequeued::Packet(p) if p.len == 77 || (2000..2100).contains(&p.len) => {
                from_a.push(p.len)
            }
            Dequeued::Packet(_) => {}
            Dequeued::NotBefore(n) => t = n.0,
            Dequeued::Empty => break,
        }
    }
    assert_eq!(from_a, [2000, 2001, 2002, 2003, 2004, 77]);
    new.stats().check_conservation().unwrap();
}

#[test]
fn a_take_over_under_way_is_finished_before_another() {
    let now = Time(50_000_000);
    let mut mid = build(&NEW, "b").htb;
    let old = Box::new(old_with_traffic());
    let backlog = old.stats().backlog;
    let map = map_by_name(&old, &mid);
    mid.adopt_begin(old, map, now);
    assert!(mid.adopt_step(now, 1).is_none());
    // A second reload before the first is done: the newest takes over everything.
    let mut last = build(&OLD, "b").htb;
    let map = map_by_name(&mid, &last);
    last.adopt_begin(Box::new(mid), map, now);
    while last.adopt_step(now, 4).is_none() {}
    last.check_invariants().unwrap();
    assert_eq!(last.stats().backlog, backlog);
    last.stats().check_conservation().unwrap();
}
