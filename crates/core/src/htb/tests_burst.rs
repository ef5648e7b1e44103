//! The dequeue burst against packet-by-packet dequeues, and a row's cursor against Linux's: over
//! random trees (rates that bind, several prios, leaves at several depths) and
//! random traffic, an `Htb` driven by `dequeue_burst` and one driven by as many `dequeue` calls
//! at the same instant must send the same packets in the same order and hold, after every
//! burst, the same state in every class record and counter — the deferred ancestor charges
//! (`tokens::Deferred`) change nothing observable.

use super::*;
use crate::classify::{Classifier, FilterSpec};
use crate::packet::PacketMeta;
use proptest::prelude::*;

/// (parent index, rate, ceil, prio); index 0 is the root.
type Spec = (Option<usize>, u64, u64, u8);

/// A root, then classes each under a random earlier class, rates from a share of the parent's,
/// ceils between the rate and the parent's ceil.
fn tree() -> impl Strategy<Value = Vec<Spec>> {
    (
        1_000_000u64..100_000_000,
        proptest::collection::vec((0usize..64, 1u64..100, 0u64..=100, 0u8..3), 3..24),
    )
        .prop_map(|(root, picks)| {
            let mut v: Vec<Spec> = vec![(None, root, root, 0)];
            let mut depth = vec![0usize];
            for (pick, share, ceil_pct, prio) in picks {
                // At most five levels, well within `MAX_DEPTH`.
                let shallow: Vec<usize> = (0..v.len()).filter(|&i| depth[i] < 4).collect();
                let p = shallow[pick % shallow.len()];
                depth.push(depth[p] + 1);
                let (_, prate, pceil, _) = v[p];
                let rate = (prate * share / 200).max(8_000);
                let ceil = rate + (pceil.max(rate) - rate) * ceil_pct / 100;
                v.push((Some(p), rate, ceil, prio));
            }
            v
        })
}

fn build(specs: &[Spec]) -> (Htb<PacketMeta>, Vec<u32>) {
    let params = HtbParams::default();
    let mut is_parent = vec![false; specs.len()];
    for s in specs {
        if let Some(p) = s.0 {
            is_parent[p] = true;
        }
    }
    let leaves: Vec<u32> = (0..specs.len() as u32)
        .filter(|&i| !is_parent[i as usize])
        .collect();
    let hs = specs
        .iter()
        .enumerate()
        .map(|(i, &(parent, rate, ceil, prio))| {
            let mut s = HtbClassSpec::new(
                &format!("c{i}"),
                parent.map(|p| p as u32),
                Rate(rate),
                Rate(ceil),
                &params,
            );
            s.prio = prio;
            s
        })
        .collect();
    let htb = Htb::new(
        params,
        hs,
        Classifier::new(Vec::<FilterSpec>::new(), leaves[0]),
    )
    .unwrap();
    (htb, leaves)
}

/// Everything a class holds that a scheduling decision or `stat` reads.
fn state(h: &Htb<PacketMeta>, c: usize) -> impl PartialEq + std::fmt::Debug {
    let cl = &h.classes[c];
    let k = &h.cold[c];
    let sent = h.sent_totals()[c];
    (
        (
            cl.tokens, cl.ctokens, cl.t_c, cl.mode, cl.active, cl.deficit,
        ),
        (cl.q.len, cl.q.bytes),
        (k.sent_bytes, k.sent_packets, k.drops, k.overlimits),
        (k.lends, k.borrows),
        (sent.bytes, sent.packets),
    )
}

/// `k` dequeues at `now` into `out` (cleared), stopping at the first that gives no packet:
/// what `dequeue_burst` promises.
fn one_by_one(
    h: &mut Htb<PacketMeta>,
    now: u64,
    k: usize,
    out: &mut Vec<PacketMeta>,
) -> Dequeued<usize> {
    out.clear();
    for i in 0..k {
        match h.dequeue(Time(now)) {
            Dequeued::Packet(p) => out.push(p),
            Dequeued::NotBefore(t) if i == 0 => return Dequeued::NotBefore(t),
            Dequeued::Empty if i == 0 => return Dequeued::Empty,
            _ => break,
        }
    }
    Dequeued::Packet(out.len())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]
    #[test]
    fn burst_dequeue_is_per_packet_dequeue(
        specs in tree(),
        steps in proptest::collection::vec(
            (0u64..400_000, proptest::collection::vec((0usize..64, 40u32..1500), 0..24), 1usize..40),
            1..120,
        ),
    ) {
        let (mut a, leaves) = build(&specs);
        let (mut b, _) = build(&specs);
        let mut now = 0u64;
        let mut id = 0u16;
        let (mut out_a, mut out_b) = (Vec::new(), Vec::new());
        for (dt, arrivals, k) in steps {
            now += dt;
            for (leaf, len) in arrivals {
                let c = leaves[leaf % leaves.len()];
                let p = PacketMeta { len, src_port: id, ..Default::default() };
                id = id.wrapping_add(1);
                let ra = a.enqueue_to(c, p, Time(now)).is_ok();
                let rb = b.enqueue_to(c, p, Time(now)).is_ok();
                prop_assert_eq!(ra, rb);
            }
            out_a.clear();
            let ga = a.dequeue_burst(Time(now), k, &mut out_a);
            let gb = one_by_one(&mut b, now, k, &mut out_b);
            prop_assert_eq!(&ga, &gb);
            let ids = |v: &Vec<PacketMeta>| -> Vec<(u16, u32)> {
                v.iter().map(|p| (p.src_port, p.len)).collect()
            };
            prop_assert_eq!(ids(&out_a), ids(&out_b));
            for c in 0..specs.len() {
                prop_assert_eq!(state(&a, c), state(&b, c), "class {}", c);
            }
            a.check_invariants().map_err(TestCaseError::fail)?;
            b.check_invariants().map_err(TestCaseError::fail)?;
        }
    }
}

#[test]
fn a_burst_defers_and_applies_the_ancestors_charges() {
    // root → mid → pipe → two leaves, nothing binds: within a burst the chain from `mid` up is
    // summed, and at its end the records hold exactly what per-packet charging stores.
    let specs: Vec<Spec> = vec![
        (None, 1_000_000_000, 1_000_000_000, 0),
        (Some(0), 1_000_000_000, 1_000_000_000, 0),
        (Some(1), 1_000_000_000, 1_000_000_000, 0),
        (Some(2), 500_000_000, 1_000_000_000, 0),
        (Some(2), 500_000_000, 1_000_000_000, 0),
    ];
    let (mut a, leaves) = build(&specs);
    let (mut b, _) = build(&specs);
    for i in 0..20u16 {
        let p = PacketMeta {
            len: 100,
            src_port: i,
            ..Default::default()
        };
        a.enqueue_to(leaves[usize::from(i % 2)], p, Time(1_000))
            .unwrap();
        b.enqueue_to(leaves[usize::from(i % 2)], p, Time(1_000))
            .unwrap();
    }
    // Take part of a burst by hand to see the deferral while it is under way.
    a.deferred.on = true;
    for _ in 0..5 {
        assert!(matches!(a.dequeue(Time(2_000)), Dequeued::Packet(_)));
        assert!(matches!(b.dequeue(Time(2_000)), Dequeued::Packet(_)));
    }
    assert_eq!(
        a.deferred.base, 1,
        "the chain starts at the leaf's grandparent"
    );
    assert_eq!(
        a.deferred.cost,
        4 * 100 * NBITS_PER_BYTE,
        "every packet after the first is summed"
    );
    assert_ne!(a.classes[0].tokens, b.classes[0].tokens);
    assert_eq!(a.sent_totals()[0].packets, 5, "sends are the leaves' own");
    a.deferred.on = false;
    a.flush_deferred();
    for c in 0..specs.len() {
        assert_eq!(format!("{:?}", state(&a, c)), format!("{:?}", state(&b, c)));
    }
    a.check_invariants().unwrap();
    assert_eq!(a.sent_totals()[0].packets, 5);
    // And through the public burst call: nothing is left deferred.
    let mut out = Vec::new();
    assert_eq!(
        a.dequeue_burst(Time(3_000), 8, &mut out),
        Dequeued::Packet(8)
    );
    for _ in 0..8 {
        assert!(matches!(b.dequeue(Time(3_000)), Dequeued::Packet(_)));
    }
    assert_eq!(a.deferred.base, NIL);
    for c in 0..specs.len() {
        assert_eq!(format!("{:?}", state(&a, c)), format!("{:?}", state(&b, c)));
    }
}

#[test]
fn a_leaf_that_runs_empty_at_the_cursor_passes_its_turn_on_and_leaves_when_throttled() {
    // Three leaves of one prio under a root. Leaf 1 runs empty when served: it leaves the row
    // and the cursor moves on to leaf 3 (`htb_remove_class_from_row`), so a packet that brings
    // leaf 1 back before the next dequeue waits for leaf 3's turn. Leaf 2 (8 kbit/s) is then
    // served alone, one packet at a time, until its mode change keeps it out of the row.
    let specs: Vec<Spec> = vec![
        (None, 10_000_000, 10_000_000, 0),
        (Some(0), 3_000_000, 10_000_000, 0),
        (Some(0), 8_000, 8_000, 0),
        (Some(0), 3_000_000, 10_000_000, 0),
    ];
    let (mut h, leaves) = build(&specs);
    assert_eq!(leaves, vec![1, 2, 3]);
    let p = |i: u16| PacketMeta {
        len: 1000,
        src_port: i,
        ..Default::default()
    };
    let row = Htb::<PacketMeta>::row_id(0, 0);
    h.enqueue_to(1, p(1), Time(0)).unwrap();
    h.enqueue_to(3, p(3), Time(0)).unwrap();
    assert_eq!(h.dequeue(Time(0)).packet().unwrap().src_port, 1);
    assert!(!h.row_bits[row].contains(1));
    assert_eq!(h.lists[row].cursor, 3);
    h.check_invariants().unwrap();
    h.enqueue_to(1, p(11), Time(0)).unwrap();
    assert!(h.row_bits[row].contains(1));
    h.check_invariants().unwrap();
    let mut sent = Vec::new();
    for _ in 0..2 {
        sent.push(h.dequeue(Time(0)).packet().unwrap().src_port);
        h.check_invariants().unwrap();
    }
    assert_eq!(sent, vec![3, 11], "leaf 3's turn first");
    let mut n = 0;
    while h.classes[2].mode == ClassMode::CanSend {
        n += 1;
        assert!(n < 100, "leaf 2 never throttled");
        h.enqueue_to(2, p(2), Time(0)).unwrap();
        assert_eq!(h.dequeue(Time(0)).packet().unwrap().src_port, 2);
        h.check_invariants().unwrap();
    }
    h.enqueue_to(2, p(2), Time(0)).unwrap();
    assert!(
        !h.row_bits[row].contains(2),
        "a throttled leaf is not in its row"
    );
    assert_eq!(h.classes[2].active, 1);
    h.check_invariants().unwrap();
}
