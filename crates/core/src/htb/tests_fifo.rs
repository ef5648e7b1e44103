//! The leaves' inline FIFOs (`queue.rs`): both ends in the class record, the slots linked first
//! to last through the shared pool. Packets leave each leaf in the order they arrived, across
//! the pool's growth and the reuse of freed lines, with `check_invariants` (which walks every
//! FIFO and the pool) holding after every step; and a FIFO or the pool's stack of vacant lines
//! broken on purpose is named.

use super::*;
use crate::classify::{Classifier, FilterSpec};
use crate::packet::PacketMeta;
use rand::{Rng, SeedableRng};
use std::collections::VecDeque;

/// A root of 1 Gbit/s and `n` leaves that may each take all of it; the first leaf is the default.
fn leaves(n: u32) -> Htb<PacketMeta> {
    let params = HtbParams::default();
    let mut specs = vec![HtbClassSpec::new(
        "root",
        None,
        Rate(1_000_000_000),
        Rate(1_000_000_000),
        &params,
    )];
    for i in 0..n {
        specs.push(HtbClassSpec::new(
            &format!("l{i}"),
            Some(0),
            Rate(1_000_000_000 / n as u64),
            Rate(1_000_000_000),
            &params,
        ));
    }
    Htb::new(params, specs, Classifier::new(Vec::<FilterSpec>::new(), 1)).expect("a valid tree")
}

/// A packet tagged with its leaf (`dst_port`) and its rank among that leaf's arrivals
/// (`src_port`).
fn tagged(leaf: u32, seq: u16, len: u32) -> PacketMeta {
    PacketMeta {
        len,
        dst_port: leaf as u16,
        src_port: seq,
        ..Default::default()
    }
}

#[test]
fn each_leaf_sends_in_arrival_order_across_pool_growth_and_slot_reuse() {
    let n = 5u32;
    let mut htb = leaves(n);
    let mut rng = rand_pcg::Pcg64::seed_from_u64(14);
    let mut expect: Vec<VecDeque<(u16, u32)>> = vec![VecDeque::new(); n as usize];
    let mut seq = vec![0u16; n as usize];
    let mut now = 0u64;
    let (mut sent, mut standing_max) = (0usize, 0usize);
    for step in 0..30_000u32 {
        // Fill for a while (the pool grows past its first 1,024 slots), then drain and refill
        // at random, so that freed slots are reused out of order.
        let fill = step < 3_000 || rng.gen_bool(0.5);
        if fill {
            let leaf = rng.gen_range(0..n);
            let len = rng.gen_range(64..1500);
            let s = &mut seq[leaf as usize];
            htb.enqueue_to(1 + leaf, tagged(leaf, *s, len), Time(now))
                .expect("below the leaf's limit");
            expect[leaf as usize].push_back((*s, len));
            *s = s.wrapping_add(1);
        } else {
            now += 20_000;
            match htb.dequeue(Time(now)) {
                Dequeued::Packet(p) => {
                    let leaf = p.dst_port as usize;
                    assert_eq!(
                        expect[leaf].pop_front(),
                        Some((p.src_port, p.len)),
                        "leaf {leaf}: packet out of order at step {step}"
                    );
                    sent += 1;
                }
                other => assert!(
                    expect.iter().all(|q| q.is_empty()),
                    "a backlogged tree gave {other:?}"
                ),
            }
        }
        standing_max = standing_max.max(expect.iter().map(|q| q.len()).sum());
        if step % 97 == 0 {
            htb.check_invariants()
                .unwrap_or_else(|e| panic!("step {step}: {e}"));
        }
    }
    assert!(
        standing_max > 2_048,
        "the pool never grew: {standing_max} packets at most"
    );
    assert!(sent > 10_000, "only {sent} packets sent");
    htb.check_invariants().unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn check_invariants_finds_a_broken_fifo_or_vacant_line_stack() {
    let mut htb = leaves(2);
    for i in 0..4 {
        htb.enqueue_to(1, tagged(0, i, 100), Time(0))
            .expect("accepted");
    }
    htb.enqueue_to(2, tagged(1, 0, 100), Time(0))
        .expect("accepted");
    assert!(matches!(htb.dequeue(Time(0)), Dequeued::Packet(_)));
    htb.check_invariants().unwrap_or_else(|e| panic!("{e}"));
    let q = htb.classes[1].q;
    assert_eq!(q.len, 3);

    // The last slot kept in the record is not where the links end.
    htb.classes[1].q.tail = htb.classes[1].q.head;
    let e = htb.check_invariants().unwrap_err();
    assert!(
        e.contains("its FIFO ends at slot") && e.contains(&format!("tail {}", q.head)),
        "{e}"
    );
    htb.classes[1].q = q;

    // An empty end with packets counted.
    htb.classes[1].q.head = NIL;
    let e = htb.check_invariants().unwrap_err();
    assert!(e.contains("with 3 packets"), "{e}");
    htb.classes[1].q = q;
    htb.check_invariants().unwrap_or_else(|e| panic!("{e}"));

    // A vacant line lost from the pool's stack: leaf 2's only packet had a line to itself.
    while htb.leaf_backlog(2).packets > 0 {
        assert!(matches!(htb.dequeue(Time(0)), Dequeued::Packet(_)));
    }
    htb.check_invariants().unwrap_or_else(|e| panic!("{e}"));
    assert!(
        htb.pool.lose_vacant_line().is_some(),
        "a dequeue freed a line"
    );
    let e = htb.check_invariants().unwrap_err();
    assert!(e.contains("is vacant but not stacked"), "{e}");
}
