//! `Htb::adopt`, a reload without loss: packets, counters, their order and a class's debt carry
//! over, and a smaller leaf's refusals are counted; what inner classes sent stays the sum of what
//! their leaves sent through bursts, borrowing and a reload.

use super::tests::{build, build_with, pkt};
use super::*;
use crate::packet::PacketMeta;
use crate::qdisc::fifo::FifoLimit;

#[test]
fn adopt_keeps_packets_counters_and_order() {
    let classes = [
        ("root", None, 10_000_000, 10_000_000, 0),
        ("a", Some("root"), 6_000_000, 10_000_000, 0),
        ("b", Some("root"), 4_000_000, 10_000_000, 1),
        ("gone", Some("root"), 1_000, 10_000_000, 1),
    ];
    let mut old = build(&classes, "b").htb;
    let now = Time(0);
    // Send a little so counters are non-zero, then queue packets with distinct sizes.
    for i in 0..5u32 {
        old.enqueue_to(1, pkt(100 + i), now).unwrap();
    }
    let mut sent = 0;
    while let Dequeued::Packet(_) = old.dequeue(now) {
        sent += 1;
        if sent == 2 {
            break;
        }
    }
    for i in 0..4u32 {
        old.enqueue_to(2, pkt(200 + i), now).unwrap();
        old.enqueue_to(3, pkt(300 + i), now).unwrap();
    }
    let before_a = old.class_stats(1).unwrap();
    let backlog = old.stats().backlog;
    assert_eq!(backlog.packets, 3 + 4 + 4);

    // The new tree: `a` changes rate, `gone` disappears, `c` appears; default is `b`.
    let new_classes = [
        ("root", None, 10_000_000, 10_000_000, 0),
        ("c", Some("root"), 1_000_000, 10_000_000, 2),
        ("a", Some("root"), 5_000_000, 10_000_000, 0),
        ("b", Some("root"), 4_000_000, 10_000_000, 1),
    ];
    let mut new = build(&new_classes, "b").htb;
    let rep = new.adopt(&mut old, Time(1_000));
    assert_eq!(rep.kept, ["root", "a", "b"]);
    assert_eq!(rep.added, ["c"]);
    assert_eq!(rep.removed, ["gone"]);
    assert_eq!(rep.moved_packets, 11);
    assert_eq!(rep.reclassified, 4);
    assert_eq!(rep.dropped_packets, 0);
    assert_eq!(new.stats().backlog, backlog);
    new.stats().check_conservation().unwrap();
    new.check_invariants().unwrap();
    assert_eq!(old.stats().backlog.packets, 0);

    // `a` (now id 2) kept its counters and its packets, in order.
    let a = new.class_id("a").unwrap();
    assert_eq!(new.class_stats(a).unwrap().sent, before_a.sent);
    assert_eq!(new.leaf_backlog(a).packets, 3);
    // `b` got its own 4 packets followed by the 4 of `gone`.
    let b = new.class_id("b").unwrap();
    assert_eq!(new.leaf_backlog(b).packets, 8);
    let mut lens_a = Vec::new();
    let mut lens_b = Vec::new();
    let mut t = 1_000;
    while new.stats().backlog.packets > 0 {
        match new.dequeue(Time(t)) {
            Dequeued::Packet(p) => {
                if (100..200).contains(&p.len) {
                    lens_a.push(p.len)
                } else {
                    lens_b.push(p.len)
                }
            }
            Dequeued::NotBefore(n) => t = n.0,
            Dequeued::Empty => break,
        }
        new.stats().check_conservation().unwrap();
    }
    assert_eq!(lens_a, [102, 103, 104]);
    assert_eq!(lens_b, [200, 201, 202, 203, 300, 301, 302, 303]);
}

#[test]
fn adopt_counts_packets_a_smaller_leaf_refuses() {
    let classes = [
        ("root", None, 10_000_000, 10_000_000, 0),
        ("a", Some("root"), 10_000_000, 10_000_000, 0),
    ];
    let mut old = build(&classes, "a").htb;
    for i in 0..10u32 {
        old.enqueue_to(1, pkt(100 + i), Time(0)).unwrap();
    }
    let mut new = build_with(&classes, "a", |s| {
        s.leaf = LeafSpec::Fifo(FifoLimit::Packets(4))
    })
    .htb;
    let rep = new.adopt(&mut old, Time(0));
    assert_eq!(rep.moved_packets, 4);
    assert_eq!(rep.dropped_packets, 6);
    assert_eq!(new.stats().backlog.packets, 4);
    assert_eq!(new.stats().dropped.get(DropReason::QueueLimit).packets, 6);
    new.stats().check_conservation().unwrap();
    let mut victims = 0;
    while new.take_dropped().is_some() {
        victims += 1;
    }
    assert_eq!(victims, 6);
}

#[test]
fn adopt_keeps_debt_so_a_reload_is_not_a_free_burst() {
    let classes = [("a", None, 1_000_000, 1_000_000, 0)];
    let mut old = build(&classes, "a").htb;
    // Empty the bucket: send well over the burst at t=0.
    for _ in 0..20 {
        old.enqueue_to(0, pkt(1000), Time(0)).unwrap();
    }
    while let Dequeued::Packet(_) = old.dequeue(Time(0)) {}
    let tokens_before = {
        let mut v = 0;
        old.visit_classes(&mut |c| v = c.tokens);
        v
    };
    assert!(tokens_before < 0, "{tokens_before}");
    let mut new = build(&classes, "a").htb;
    new.adopt(&mut old, Time(0));
    assert_eq!(new.class_mode(0), Some(ClassMode::CantSend));
    match new.dequeue(Time(0)) {
        Dequeued::NotBefore(t) => assert!(t.0 > 0),
        other => panic!("a reload must not reset the bucket: {other:?}"),
    }
}

// ---- what inner classes sent: their leaves' sum --------------------------------------------

/// Sends per class name, by `visit_classes` and by `class_stats`, which must agree, and with
/// what `counter_view` reads class by class summed over each subtree (sends and backlog).
fn sent_by_name(h: &Htb<PacketMeta>) -> HashMap<String, (u64, u64)> {
    let mut m = HashMap::new();
    let mut sums: HashMap<u32, (u64, u64, Backlog)> = HashMap::new();
    for c in 0..h.len() as u32 {
        let v = h.counter_view(c).unwrap();
        let mut x = Some(c);
        while let Some(a) = x {
            let e = sums.entry(a).or_default();
            e.0 = e.0.wrapping_add(v.stats.sent.packets);
            e.1 = e.1.wrapping_add(v.stats.sent.bytes);
            e.2.packets += v.backlog.packets;
            e.2.bytes += v.backlog.bytes;
            x = h.counter_view(a).unwrap().parent;
        }
    }
    assert!(h.counter_view(h.len() as u32).is_none());
    h.visit_classes(&mut |v| {
        m.insert(
            v.name.to_string(),
            (v.stats.sent.packets, v.stats.sent.bytes),
        );
        let own = h.counter_view(v.id).unwrap();
        assert_eq!(
            sums[&v.id],
            (v.stats.sent.packets, v.stats.sent.bytes, v.backlog),
            "{}",
            v.name
        );
        assert_eq!(
            (own.tokens, own.mode, own.leaf_drops),
            (v.tokens, v.mode, v.leaf_drops.clone())
        );
    });
    for (name, &s) in &m {
        let id = h.class_id(name).unwrap();
        let c = h.class_stats(id).unwrap().sent;
        assert_eq!((c.packets, c.bytes), s, "{name}");
    }
    m
}

/// A class of a test tree: (name, parent, rate, ceil, prio), as `build` takes them.
type Spec = (&'static str, Option<&'static str>, u64, u64, u8);

/// A packet of `len` bytes sent by `leaf`: counted for it and each of its ancestors in `tree`.
fn count_sent(expect: &mut HashMap<String, (u64, u64)>, leaf: &str, len: u32, tree: &[Spec]) {
    let mut c = Some(leaf);
    while let Some(name) = c {
        let e = expect.entry(name.to_string()).or_default();
        e.0 += 1;
        e.1 += u64::from(len);
        c = tree.iter().find(|s| s.0 == name).and_then(|s| s.1);
    }
}

/// Send `n` packets of varied sizes to the named leaves, dequeuing one by one and in bursts at
/// times that make classes borrow and wait; add every packet sent to its leaf and each ancestor
/// in `expect` (what Linux's per-packet charge counts).
fn send_and_count(
    h: &mut Htb<PacketMeta>,
    leaves: &[&str],
    tree: &[Spec],
    now: &mut u64,
    n: u32,
    expect: &mut HashMap<String, (u64, u64)>,
) {
    let ids: Vec<u32> = leaves.iter().map(|l| h.class_id(l).unwrap()).collect();
    let mut out = Vec::new();
    for i in 0..n {
        let k = (i as usize * 7 + i as usize / 3) % ids.len();
        let p = PacketMeta {
            len: 60 + (i * 37) % 1400,
            src_port: k as u16,
            ..Default::default()
        };
        h.enqueue_to(ids[k], p, Time(*now)).unwrap();
        if i % 5 == 4 {
            *now += 2_000_000;
            out.clear();
            if i % 2 == 0 {
                let _ = h.dequeue_burst(Time(*now), 8, &mut out);
            } else if let Dequeued::Packet(p) = h.dequeue(Time(*now)) {
                out.push(p);
            }
            for p in &out {
                count_sent(expect, leaves[usize::from(p.src_port)], p.len, tree);
            }
        }
        h.check_invariants().unwrap();
    }
}

#[test]
fn inner_classes_sent_what_their_leaves_sent_through_bursts_borrowing_and_a_reload() {
    let old_tree: [Spec; 6] = [
        ("root", None, 8_000_000, 8_000_000, 0),
        ("mid1", Some("root"), 2_000_000, 8_000_000, 0),
        ("mid2", Some("root"), 2_000_000, 8_000_000, 1),
        ("a", Some("mid1"), 500_000, 8_000_000, 0),
        ("b", Some("mid1"), 500_000, 4_000_000, 1),
        ("c", Some("mid2"), 1_000_000, 8_000_000, 0),
    ];
    let mut old = build(&old_tree, "a").htb;
    let mut expect = HashMap::new();
    let mut now = 0;
    send_and_count(
        &mut old,
        &["a", "b", "c"],
        &old_tree,
        &mut now,
        600,
        &mut expect,
    );
    let got = sent_by_name(&old);
    for (name, e) in &expect {
        assert_eq!(got[name], *e, "{name}");
    }
    assert!(
        got["mid1"].0 > 50 && got["mid2"].0 > 50 && got["root"].0 > 200,
        "{got:?}"
    );
    assert!(old.class_stats(old.class_id("a").unwrap()).unwrap().borrows > 0);

    // The reload: `b` and `mid2` go, `c` moves under `mid1`, a new inner class `mid3` takes
    // `a` and a new leaf `d`. Kept classes keep their totals, new ones start at zero.
    let new_tree: [Spec; 6] = [
        ("root", None, 8_000_000, 8_000_000, 0),
        ("mid1", Some("root"), 2_000_000, 8_000_000, 0),
        ("mid3", Some("root"), 2_000_000, 8_000_000, 1),
        ("c", Some("mid1"), 1_000_000, 8_000_000, 0),
        ("a", Some("mid3"), 500_000, 8_000_000, 0),
        ("d", Some("mid3"), 500_000, 8_000_000, 1),
    ];
    let mut new = build(&new_tree, "a").htb;
    new.adopt(&mut old, Time(now));
    new.check_invariants().unwrap();
    expect.remove("b");
    expect.remove("mid2");
    // The adopted packets are still to be sent; count them as the new tree sends them.
    let after = sent_by_name(&new);
    for name in ["root", "mid1", "a", "c"] {
        assert_eq!(after[name], expect[name], "{name} keeps its total");
    }
    assert_eq!((after["mid3"], after["d"]), ((0, 0), (0, 0)));
    expect.insert("mid3".into(), (0, 0));
    expect.insert("d".into(), (0, 0));
    // Drain what was moved over, counting it under the new tree.
    let leaves = ["c", "a", "d"];
    loop {
        match new.dequeue(Time(now)) {
            Dequeued::Packet(p) => {
                let leaf = ["a", "b", "c"][usize::from(p.src_port)];
                // A packet of `b` (gone) was classified again, to the default `a`.
                let leaf = if leaf == "b" { "a" } else { leaf };
                count_sent(&mut expect, leaf, p.len, &new_tree);
            }
            Dequeued::NotBefore(t) => now = t.0,
            Dequeued::Empty => break,
        }
    }
    send_and_count(&mut new, &leaves, &new_tree, &mut now, 600, &mut expect);
    let got = sent_by_name(&new);
    assert_eq!(got.len(), expect.len());
    for (name, e) in &expect {
        assert_eq!(got[name], *e, "{name}");
    }
    assert!(got["mid3"].0 > 50 && got["d"].0 > 10, "{got:?}");
}
