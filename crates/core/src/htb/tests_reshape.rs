//! `Htb::add_class` and `Htb::remove_class`: a tree changed in place behaves as a tree built
//! afresh with the same classes (packet for packet when no slot is reused, share for share when
//! slots and ranks are), keeps every other class as it was, reuses what it retires so that memory
//! stays bounded over any number of cycles, and refuses what it cannot do in place.

use super::tests::{pkt, MBIT};
use super::*;
use crate::classify::{FilterSpec, IpPrefix};
use crate::packet::{PacketMeta, L3};
use crate::qdisc::fifo::Fifo;

/// A class as these tests describe it: name, parent name, rate, ceil, inner.
type Desc = (String, Option<String>, u64, u64, bool);

/// Every class's DRR quantum here: small, so that a round is short and the order of a round
/// (which a reused slot or rank may change) moves little of anyone's share within a second.
const QUANTUM: u32 = 1500;

fn spec(h: &Htb<PacketMeta>, d: &Desc) -> HtbClassSpec<PacketMeta> {
    let parent = d.1.as_ref().map(|p| h.class_id(p).expect("parent"));
    let mut s = HtbClassSpec::new(&d.0, parent, Rate(d.2), Rate(d.3), &HtbParams::default());
    s.quantum = QUANTUM;
    s
}

fn leaf(name: &str, parent: &str, rate: u64, ceil: u64) -> Desc {
    (name.into(), Some(parent.into()), rate, ceil, false)
}

fn group(name: &str, parent: &str, rate: u64, ceil: u64) -> Desc {
    (name.into(), Some(parent.into()), rate, ceil, true)
}

/// A tree built at once from `classes` (parents before children), default `default`.
fn fresh(classes: &[Desc], default: &str) -> Htb<PacketMeta> {
    let idx = |n: &str| classes.iter().position(|c| c.0 == n).unwrap() as ClassId;
    let p = HtbParams::default();
    let specs = classes
        .iter()
        .map(|d| {
            let mut s = HtbClassSpec::new(&d.0, d.1.as_deref().map(idx), Rate(d.2), Rate(d.3), &p);
            s.quantum = QUANTUM;
            s
        })
        .collect();
    Htb::new(
        p,
        specs,
        Classifier::new(Vec::<FilterSpec>::new(), idx(default)),
    )
    .unwrap()
}

/// The live classes of `h` in slot order, as `Desc`s: what a fresh tree is built from.
fn live(h: &Htb<PacketMeta>) -> Vec<Desc> {
    (0..h.len() as ClassId)
        .filter(|&c| h.is_live(c))
        .map(|c| {
            let cl = &h.classes[c as usize];
            let p = h.prof(c);
            let parent = (cl.parent != NIL).then(|| h.name(cl.parent));
            (h.name(c), parent, p.rate, p.ceil, !cl.is_leaf())
        })
        .collect()
}

fn start() -> Vec<Desc> {
    let mut v = vec![("root".to_string(), None, 20 * MBIT, 20 * MBIT, true)];
    for g in 0..3 {
        v.push(group(&format!("g{g}"), "root", 6 * MBIT, 20 * MBIT));
        for s in 0..4 {
            let ceil = (4 + s) * MBIT;
            v.push(leaf(&format!("s{g}.{s}"), &format!("g{g}"), MBIT, ceil));
        }
    }
    v
}

/// [`run_from`] from instant 0.
fn run(h: &mut Htb<PacketMeta>, leaves: &[String], ms: u64) -> Vec<(u16, u32)> {
    run_from(h, leaves, ms, Time(0))
}

fn leaf_names(classes: &[Desc]) -> Vec<String> {
    let mut v: Vec<String> = classes
        .iter()
        .filter(|d| !d.4)
        .map(|d| d.0.clone())
        .collect();
    v.sort();
    v
}

#[test]
fn adds_at_the_end_and_removes_send_what_a_fresh_tree_sends_packet_for_packet() {
    let mut h = fresh(&start(), "s0.0");
    // A new group with its subscribers, two more in g1; then three removed, one a whole group.
    let added = [
        group("g3", "root", 2 * MBIT, 20 * MBIT),
        leaf("s3.0", "g3", MBIT, 3 * MBIT),
        leaf("s3.1", "g3", MBIT, 5 * MBIT),
        leaf("s1.4", "g1", MBIT, 9 * MBIT),
        leaf("s1.5", "g1", MBIT, 2 * MBIT),
    ];
    for d in &added {
        let s = spec(&h, d);
        assert_eq!(
            h.add_class(s, d.4, Time(0)).unwrap().0 as usize,
            h.len() - 1
        );
        h.check_invariants().unwrap();
    }
    for name in ["s1.2", "s2.0", "s2.1", "s2.2", "s2.3", "g2"] {
        let c = h.class_id(name).unwrap();
        let r = h.remove_class(c, Time(0)).unwrap();
        assert_eq!(r.reclassified, 0);
        h.check_invariants().unwrap();
        assert_eq!(h.class_id(name), None);
        assert!(h.counter_view(c).is_none() && h.class_name(c).is_none());
    }
    let classes = live(&h);
    assert_eq!(h.live_classes(), classes.len());
    let mut f = fresh(&classes, "s0.0");
    let leaves = leaf_names(&classes);
    let (a, b) = (run(&mut h, &leaves, 300), run(&mut f, &leaves, 300));
    assert!(a.len() > 1000, "{} packets", a.len());
    assert_eq!(a, b, "the tree changed in place sent differently");
    // Stats show the same classes, parents first.
    let names = |t: &Htb<PacketMeta>| {
        let mut v = Vec::new();
        t.visit_classes(&mut |c: &ClassView<'_>| v.push(c.name.to_string()));
        v
    };
    let (mut x, mut y) = (names(&h), names(&f));
    x.sort();
    y.sort();
    assert_eq!(x, y);
}

/// A small deterministic generator (xorshift).
struct Rng(u64);
impl Rng {
    fn next(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n as u64) as usize
    }
}

/// What `h` holds on the heap, but for the packet pool (which follows the backlog).
fn held(h: &Htb<PacketMeta>) -> usize {
    h.memory_parts()
        .iter()
        .filter(|(part, _)| *part != "packet pool")
        .map(|&(_, b)| b)
        .sum()
}

#[test]
fn reused_slots_keep_the_shares_of_a_fresh_tree_and_memory_stays_bounded() {
    for seed in [7u64, 99, 12345] {
        let mut rng = Rng(seed);
        let mut h = fresh(&start(), "s0.0");
        let mut now = Time(0);
        let mut warm = 0;
        let (len0, children0) = (h.len(), h.children.len());
        for cycle in 0..400 {
            // Traffic, so that removals find queues and throttled classes.
            now = Time(now.0 + 5_000_000);
            while let Dequeued::Packet(_) = h.dequeue(now) {}
            for _ in 0..3 {
                let names = leaf_names(&live(&h));
                let c = h.class_id(&names[rng.next(names.len())]).unwrap();
                for _ in 0..rng.next(6) {
                    h.enqueue_to(c, pkt(1200), now).unwrap();
                }
            }
            // One subscriber leaves, one joins (anywhere).
            let names: Vec<String> = leaf_names(&live(&h))
                .into_iter()
                .filter(|n| n != "s0.0")
                .collect();
            let gone = h.class_id(&names[rng.next(names.len())]).unwrap();
            h.remove_class(gone, now).unwrap();
            let g = format!("g{}", rng.next(3));
            let d = leaf(
                &format!("n{cycle}"),
                &g,
                MBIT,
                (2 + rng.next(4) as u64) * MBIT,
            );
            let (id, _) = h.add_class(spec(&h, &d), false, now).unwrap();
            assert_eq!(id, gone, "the slot removed last is reused");
            h.check_invariants().unwrap();
            if cycle == 100 {
                warm = held(&h);
            }
        }
        assert_eq!(h.len(), len0, "slots");
        assert!(
            h.children.len() <= 2 * children0 + 3 * 16,
            "{}",
            h.children.len()
        );
        // Not a byte more a cycle: only the names' block coding varies a little.
        assert!(
            held(&h) <= warm + 256,
            "{} bytes after the warm-up, {}",
            warm,
            held(&h)
        );
        // The root's, the groups' and one per leaf ceil ever given (2 to 7 Mbit/s): what a
        // tree with every configuration at once needs, however many cycles.
        assert!(h.profiles_held() <= 8, "{} profiles", h.profiles_held());
        // Emptied, then shares over a second against a tree built afresh.
        let _ = h.drain(now);
        let classes = live(&h);
        let mut f = fresh(&classes, "s0.0");
        let leaves = leaf_names(&classes);
        let sum = |v: &[(u16, u32)]| {
            let mut s = vec![0u64; leaves.len()];
            v.iter().for_each(|&(i, l)| s[i as usize] += l as u64);
            s
        };
        // `h`'s clock is ahead: from a minute later, when every bucket is full again. The order
        // of a round moves some of anyone's share (fresh trees with the same classes and their
        // siblings in other orders differ too, by tens of KB here): `h` must be within twice
        // what the orders of three fresh trees spread — slot order, the leaves reversed, and
        // the leaves in `h`'s rank order.
        let a = sum(&run_from(
            &mut h,
            &leaves,
            3000,
            Time(now.0 + 60_000_000_000),
        ));
        let b = sum(&run(&mut f, &leaves, 3000));
        let mut rev: Vec<Desc> = classes.iter().filter(|d| d.4).cloned().collect();
        rev.extend(classes.iter().filter(|d| !d.4).rev().cloned());
        let mut ranked: Vec<(bool, Option<String>, u32, Desc)> = classes
            .iter()
            .map(|d| {
                let c = h.class_id(&d.0).unwrap();
                (!d.4, d.1.clone(), h.classes[c as usize].rank, d.clone())
            })
            .collect();
        ranked.sort_by(|x, y| (x.0, &x.1, x.2).cmp(&(y.0, &y.1, y.2)));
        let ranked: Vec<Desc> = ranked.into_iter().map(|x| x.3).collect();
        let others = [
            sum(&run(&mut fresh(&rev, "s0.0"), &leaves, 3000)),
            sum(&run(&mut fresh(&ranked, "s0.0"), &leaves, 3000)),
        ];
        let spread = (0..leaves.len())
            .map(|i| {
                let v = [b[i], others[0][i], others[1][i]];
                v.iter().max().unwrap() - v.iter().min().unwrap()
            })
            .max()
            .unwrap_or(0);
        for (i, (x, y)) in a.iter().zip(&b).enumerate() {
            assert!(
                x.abs_diff(*y) <= 2 * spread + 5_000,
                "seed {seed} {}: {x} vs {y} bytes (fresh trees spread {spread})",
                leaves[i]
            );
        }
        assert!(a.iter().sum::<u64>().abs_diff(b.iter().sum()) <= 3_000);
    }
}

/// Every leaf of `leaves` backlogged from `t0` for `ms` milliseconds, packets tagged with the
/// leaf's place in `leaves`: what was sent, in order, as (tag, length).
fn run_from(h: &mut Htb<PacketMeta>, leaves: &[String], ms: u64, t0: Time) -> Vec<(u16, u32)> {
    let mut out = Vec::new();
    let mut now = t0;
    for step in 0..ms {
        for (i, name) in leaves.iter().enumerate() {
            let c = h.class_id(name).unwrap();
            while h.leaf_backlog(c).packets < 8 {
                let mut p = pkt(300 + (i as u32 * 37 + step as u32) % 1200);
                p.src_port = i as u16;
                h.enqueue_to(c, p, now).unwrap();
            }
        }
        while let Dequeued::Packet(p) = h.dequeue(now) {
            out.push((p.src_port, p.len));
        }
        now = Time(now.0 + 1_000_000);
    }
    h.check_invariants().unwrap();
    out
}

fn addr(last: u8) -> PacketMeta {
    PacketMeta {
        len: 1000,
        l3: L3::Ipv4,
        dst: std::net::IpAddr::from([10, 0, 0, last]),
        ..Default::default()
    }
}

fn to(class: ClassId, last: u8) -> FilterSpec {
    FilterSpec {
        class,
        dst: Some(IpPrefix::new(std::net::IpAddr::from([10, 0, 0, last]), 32).unwrap()),
        ..Default::default()
    }
}

#[test]
fn a_removed_class_hands_its_packets_to_the_filters_and_touches_no_other_class() {
    let mut h = fresh(&start(), "s0.0");
    let id = |h: &Htb<PacketMeta>, n: &str| h.class_id(n).unwrap();
    let (a, b, c) = (id(&h, "s1.0"), id(&h, "s1.1"), id(&h, "s2.0"));
    h.replace_classifier(Classifier::new(vec![to(a, 1), to(b, 2), to(c, 3)], 2))
        .unwrap();
    let mut now = Time(0);
    for _ in 0..30 {
        for last in 1..=3 {
            h.enqueue(addr(last), now).unwrap();
        }
    }
    for _ in 0..10 {
        now = Time(now.0 + 1_000_000);
        while let Dequeued::Packet(_) = h.dequeue(now) {}
    }
    let queued = h.leaf_backlog(a).packets;
    assert!(queued > 0);
    let view = |h: &Htb<PacketMeta>, x: ClassId| h.counter_view(x).unwrap();
    // All but `a`, `b` (which takes its packets) and their parent `g1` (whose offset keeps
    // what `a` sent in its total, checked below).
    let g1 = id(&h, "g1");
    let others: Vec<ClassId> = (0..h.len() as ClassId)
        .filter(|&x| x != a && x != b && x != g1)
        .collect();
    let before: Vec<CounterView> = others.iter().map(|&x| view(&h, x)).collect();
    let g1_sent = h.class_stats(id(&h, "g1")).unwrap().sent;
    let books = h.stats().clone();
    // `a`'s address moves to `b` (a subscriber renamed), then `a` goes.
    h.replace_classifier(Classifier::new(vec![to(b, 1), to(b, 2), to(c, 3)], 2))
        .unwrap();
    let b_queued = h.leaf_backlog(b).packets;
    let r = h.remove_class(a, now).unwrap();
    assert_eq!(
        (r.reclassified, r.moved_packets, r.dropped_packets),
        (queued, queued, 0)
    );
    assert_eq!(h.leaf_backlog(b).packets, b_queued + queued);
    let after: Vec<CounterView> = others.iter().map(|&x| view(&h, x)).collect();
    assert_eq!(before, after, "another class changed");
    assert_eq!(
        h.class_stats(id(&h, "g1")).unwrap().sent,
        g1_sent,
        "the parent's total"
    );
    assert_eq!(*h.stats(), books, "the books");
    h.check_invariants().unwrap();
    // The next class added takes the slot, empty and with fresh counters.
    let d = leaf("s1.9", "g1", MBIT, 2 * MBIT);
    assert_eq!(h.add_class(spec(&h, &d), false, now).unwrap().0, a);
    assert_eq!(h.leaf_backlog(a).packets, 0);
    assert_eq!(h.class_stats(a).unwrap().sent.packets, 0);
    assert_eq!(h.class_stats(id(&h, "g1")).unwrap().sent, g1_sent);
    h.check_invariants().unwrap();
}

#[test]
fn a_family_grows_past_64_while_its_feed_has_members() {
    let mut classes = vec![("root".to_string(), None, 10 * MBIT, 10 * MBIT, true)];
    classes.push(group("g", "root", 5 * MBIT, 10 * MBIT));
    for s in 0..3 {
        classes.push(leaf(&format!("s{s}"), "g", 100_000, 10 * MBIT));
    }
    let mut h = fresh(&classes, "s0");
    let mut now = Time(0);
    for c in 2..5 {
        for _ in 0..50 {
            h.enqueue_to(c, pkt(1500), now).unwrap();
        }
    }
    for _ in 0..5 {
        now = Time(now.0 + 1_000_000);
        while let Dequeued::Packet(_) = h.dequeue(now) {}
    }
    assert!(
        h.feed_words.iter().any(|&w| w != 0),
        "the leaves should borrow from `g`"
    );
    for s in 3..130 {
        let d = leaf(&format!("s{s}"), "g", 10_000, 10 * MBIT);
        h.add_class(spec(&h, &d), false, now).unwrap();
        h.check_invariants().unwrap();
    }
    let mut sent = vec![0u64; h.len()];
    for _ in 0..400 {
        for c in 2..h.len() as ClassId {
            if h.leaf_backlog(c).packets < 2 {
                h.enqueue_to(c, pkt(1000), now).unwrap();
            }
        }
        now = Time(now.0 + 1_000_000);
        while let Dequeued::Packet(_) = h.dequeue(now) {}
    }
    for (c, s) in sent.iter_mut().enumerate() {
        *s = h.class_stats(c as ClassId).unwrap().sent.packets;
    }
    assert!(sent[2..].iter().all(|&s| s > 0), "a leaf was never served");
    h.check_invariants().unwrap();
}

#[test]
fn what_cannot_be_done_in_place_is_refused_and_changes_nothing() {
    let mut h = fresh(&start(), "s0.0");
    let mem = h.memory_bytes();
    let id = |h: &Htb<PacketMeta>, n: &str| h.class_id(n).unwrap();
    let (s00, g0) = (id(&h, "s0.0"), id(&h, "g0"));
    assert!(matches!(
        h.remove_class(s00, Time(0)),
        Err(HtbError::RemoveDefault(_))
    ));
    assert!(matches!(
        h.remove_class(g0, Time(0)),
        Err(HtbError::HasChildren(_))
    ));
    assert!(matches!(
        h.remove_class(999, Time(0)),
        Err(HtbError::UnknownClass(999))
    ));
    let p = HtbParams::default();
    let under = |parent| HtbClassSpec::new("x", Some(parent), Rate(MBIT), Rate(MBIT), &p);
    assert!(matches!(
        h.add_class(under(s00), false, Time(0)),
        Err(HtbError::ParentIsLeaf { .. })
    ));
    assert!(matches!(
        h.add_class(under(999), false, Time(0)),
        Err(HtbError::UnknownParent { .. })
    ));
    let mut bad = under(g0);
    bad.ceil = Rate(1);
    assert!(matches!(
        h.add_class(bad, false, Time(0)),
        Err(HtbError::CeilBelowRate { .. })
    ));
    assert_eq!(h.memory_bytes(), mem);
    h.check_invariants().unwrap();
    // A chain of inner classes stops where a leaf could no longer sit below it.
    let mut parent = g0;
    let mut depth_ok = 0;
    for i in 0..10 {
        let s = HtbClassSpec::new(&format!("i{i}"), Some(parent), Rate(MBIT), Rate(MBIT), &p);
        match h.add_class(s, true, Time(0)) {
            Ok((c, _)) => {
                parent = c;
                depth_ok += 1;
            }
            Err(e) => {
                assert!(matches!(e, HtbError::TooDeep { .. }), "{e}");
                break;
            }
        }
    }
    // root (level 7), g0 (6): inner classes down to level 1.
    assert_eq!(depth_ok, 5);
    h.check_invariants().unwrap();
}

#[test]
fn a_boxed_leaf_removed_is_handed_back_when_its_slot_is_reused() {
    let mut h = fresh(&start(), "s0.0");
    let g0 = h.class_id("g0").unwrap();
    let p = HtbParams::default();
    let boxed = |name: &str| {
        let mut s = HtbClassSpec::new(name, Some(g0), Rate(MBIT), Rate(MBIT), &p);
        s.leaf = LeafSpec::Qdisc(Box::new(Fifo::bfifo(30_000)));
        s
    };
    let (x, none) = h.add_class(boxed("x"), false, Time(0)).unwrap();
    assert!(none.is_none());
    for _ in 0..5 {
        h.enqueue_to(x, pkt(1000), Time(0)).unwrap();
    }
    let r = h.remove_class(x, Time(0)).unwrap();
    // No filter leads anywhere: the packets go to the default class.
    assert_eq!((r.reclassified, r.moved_packets), (5, 5));
    assert_eq!(h.leaf_backlog(h.class_id("s0.0").unwrap()).packets, 5);
    let (y, old) = h.add_class(boxed("y"), false, Time(0)).unwrap();
    assert_eq!(y, x);
    assert_eq!(old.map(|q| q.backlog().packets), Some(0));
    for _ in 0..3 {
        h.enqueue_to(y, pkt(1000), Time(0)).unwrap();
    }
    assert_eq!(h.leaf_backlog(y).packets, 3);
    h.check_invariants().unwrap();
}
