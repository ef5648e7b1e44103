//! The sharded HTB against the bounds of [`super`]: the split and its map, the aggregate and
//! per-shard rates on a link as fast as the root (deterministic, one thread), borrowing of the
//! whole root by a lone shard, and conservation of tokens with shards on real threads.

use std::sync::Arc;

use super::*;
use crate::classify::Classifier;
use crate::htb::{HtbClassSpec, HtbParams};
use crate::packet::{Packet, PacketMeta};
use crate::qdisc::{Dequeued, Qdisc};
use crate::units::{Rate, Time, NS_PER_SEC};

/// A test packet: only its length matters.
#[derive(Debug)]
struct TestPacket {
    len: u32,
    meta: PacketMeta,
}

fn pkt(len: u32) -> TestPacket {
    TestPacket {
        len,
        meta: PacketMeta::default(),
    }
}

impl Packet for TestPacket {
    fn meta(&self) -> &PacketMeta {
        &self.meta
    }
    fn len(&self) -> u32 {
        self.len
    }
}

/// root (rate) → one child per entry of `kids` (rate, ceil = root), leaf FIFOs.
fn tree(root: Rate, kids: &[Rate]) -> Vec<HtbClassSpec<TestPacket>> {
    let p = HtbParams::default();
    let mut v = vec![HtbClassSpec::new("root", None, root, root, &p)];
    for (i, &r) in kids.iter().enumerate() {
        v.push(HtbClassSpec::new(&format!("k{i}"), Some(0), r, root, &p));
    }
    v
}

fn sharded(root: Rate, kids: &[Rate], n: usize) -> ShardedHtb<TestPacket> {
    let specs = tree(root, kids);
    let cfg = ShardConfig::new(n);
    match ShardedHtb::new(
        HtbParams::default(),
        specs,
        Classifier::new(vec![], 1),
        &cfg,
    ) {
        Ok(s) => s,
        Err(e) => panic!("split refused: {e}"),
    }
}

/// Keep the classes in `busy` backlogged and send on a link of rate `link` for `secs`; returns
/// bytes sent per class of the whole tree.
fn run(q: &mut ShardedHtb<TestPacket>, busy: &[u32], link: Rate, secs: u64, len: u32) -> Vec<u64> {
    let mut sent = vec![0u64; q.map().classes()];
    let mut now = 0u64;
    let end = secs * NS_PER_SEC;
    let mut steps = 0u64;
    while now < end {
        steps += 1;
        assert!(steps < 100_000_000, "livelock");
        for &c in busy {
            let (s, l) = q.map().locate(c).unwrap_or((0, 0));
            while q.shards()[s].htb().leaf_backlog(l).packets < 8 {
                assert!(q.enqueue_to(c, pkt(len), Time(now)).is_ok());
            }
        }
        match q.dequeue(Time(now)) {
            Dequeued::Packet(p) => now += link.tx_time(p.len as u64).map_or(1, |d| d.0),
            Dequeued::NotBefore(t) => now = t.0.max(now + 1),
            Dequeued::Empty => now += 1000,
        }
    }
    q.visit_classes(&mut |v| sent[v.id as usize] = v.stats.sent.bytes);
    sent
}

#[test]
fn split_maps_every_class_and_back() {
    let q = sharded(Rate::mbit(10), &[Rate::mbit(1); 5], 2);
    let m = q.map();
    assert_eq!(m.shards(), 2);
    for c in 1..6u32 {
        let (s, l) = m.locate(c).unwrap_or((99, 99));
        assert_eq!(s, (c as usize - 1) % 2, "round robin");
        assert_eq!(m.global(s, l), Some(c));
    }
    // The root's copy is local class 0 of every shard.
    assert_eq!(m.global(0, 0), Some(0));
    assert_eq!(m.global(1, 0), Some(0));
    let mut seen = Vec::new();
    q.visit_classes(&mut |v| seen.push((v.id, v.parent, v.name.to_string())));
    seen.sort();
    assert_eq!(seen.len(), 6, "one tree: {seen:?}");
    assert_eq!(seen[0], (0, None, "root".to_string()));
    assert_eq!(seen[3], (3, Some(0), "k2".to_string()));
}

#[test]
fn placement_errors_are_reported() {
    let specs = || tree(Rate::mbit(10), &[Rate::mbit(1); 2]);
    let p = HtbParams::default();
    let mut cfg = ShardConfig::new(2);
    cfg.placement = Placement::Explicit(vec![("k0".into(), 1)]);
    assert!(matches!(split(p, specs(), &cfg), Err(ShardError::Unplaced(n)) if n == "k1"));
    cfg.placement = Placement::Explicit(vec![("k0".into(), 1), ("k1".into(), 2)]);
    assert!(matches!(
        split(p, specs(), &cfg),
        Err(ShardError::NoSuchShard { shard: 2, .. })
    ));
    cfg.placement = Placement::Explicit(vec![("k0".into(), 1), ("k1".into(), 1), ("zz".into(), 0)]);
    assert!(matches!(split(p, specs(), &cfg), Err(ShardError::UnknownClass(n)) if n == "zz"));
    cfg.placement = Placement::Explicit(vec![("k0".into(), 1), ("k1".into(), 1)]);
    let plan = split(p, specs(), &cfg).map_err(|e| e.to_string());
    assert!(plan.is_ok(), "{plan:?}", plan = plan.err());
    assert!(matches!(
        split(p, specs(), &ShardConfig::new(0)),
        Err(ShardError::BadCount(0))
    ));
    // Several roots: nothing to share, and a shard left empty is an error.
    let two_roots: Vec<HtbClassSpec<TestPacket>> = vec![
        HtbClassSpec::new("a", None, Rate::mbit(1), Rate::mbit(1), &p),
        HtbClassSpec::new("b", None, Rate::mbit(1), Rate::mbit(1), &p),
    ];
    assert!(matches!(
        split(p, two_roots, &ShardConfig::new(3)),
        Err(ShardError::EmptyShard(2))
    ));
}

/// `PerClass` places each top-level class where its entry says (a class without an entry by
/// its name's hash), and refuses a shard that does not exist.
#[test]
fn per_class_placement_follows_the_list() {
    let specs = || tree(Rate::mbit(10), &[Rate::mbit(1); 4]);
    let p = HtbParams::default();
    let mut cfg = ShardConfig::new(2);
    // Class ids: root 0, k0..k3 are 1..=4; k2 goes by hash, k3 has no entry.
    cfg.placement = Placement::PerClass(vec![0, 1, 0, u16::MAX]);
    let plan = split(p, specs(), &cfg).unwrap_or_else(|e| panic!("{e}"));
    let shard = |c: u32| plan.map.locate(c).map(|x| x.0);
    assert_eq!([shard(1), shard(2)], [Some(1), Some(0)]);
    assert!(shard(3).is_some_and(|s| s < 2) && shard(4).is_some_and(|s| s < 2));
    cfg.placement = Placement::PerClass(vec![0, 2]);
    assert!(matches!(
        split(p, specs(), &cfg),
        Err(ShardError::NoSuchShard { shard: 2, .. })
    ));
}

#[test]
fn hash_placement_is_stable_under_reordering() {
    let p = HtbParams::default();
    let names = ["alice", "bob", "carol", "dave", "erin"];
    let place = |order: &[usize]| {
        let mut v = vec![HtbClassSpec::<TestPacket>::new(
            "root",
            None,
            Rate::mbit(10),
            Rate::mbit(10),
            &p,
        )];
        for &i in order {
            v.push(HtbClassSpec::new(
                names[i],
                Some(0),
                Rate::mbit(1),
                Rate::mbit(10),
                &p,
            ));
        }
        let mut cfg = ShardConfig::new(3);
        cfg.placement = Placement::Hash;
        let plan = split(p, v, &cfg).map_err(|e| e.to_string());
        let plan = plan.unwrap_or_else(|e| panic!("{e}"));
        let mut out: Vec<(String, usize)> = (1..=order.len() as u32)
            .map(|c| {
                let s = plan.map.locate(c).map_or(99, |x| x.0);
                (plan.names[c as usize].clone(), s)
            })
            .collect();
        out.sort();
        out
    };
    assert_eq!(place(&[0, 1, 2, 3, 4]), place(&[4, 2, 0, 3, 1]));
}

/// The bound of the module docs, in bytes: `P + N(Q + L)`.
fn bound(q: &ShardedHtb<TestPacket>, n: u64, len: u64) -> u64 {
    let p = q.pool().map_or(0, |p| p.cap() as u64) / (8 * NS_PER_SEC);
    p + n * (DEFAULT_LEASE_BYTES as u64 + len)
}

#[test]
fn two_saturated_shards_share_the_root_within_the_bound() {
    for (len, n) in [(1500u32, 2usize), (64, 2), (512, 3)] {
        let r = Rate::mbit(10);
        let kids = [Rate::mbit(2), Rate::mbit(3), Rate::mbit(1)];
        let kids = &kids[..n];
        let mut q = sharded(r, kids, n);
        let busy: Vec<u32> = (1..=n as u32).collect();
        let secs = 4;
        let sent = run(&mut q, &busy, r, secs, len);
        let total: u64 = sent[1..].iter().sum();
        let ideal = r.0 / 8 * secs;
        let e = bound(&q, n as u64, len as u64);
        assert!(
            total.abs_diff(ideal) <= e,
            "len {len} n {n}: aggregate {total} vs {ideal} ± {e}"
        );
        assert_eq!(q.pool().map_or(1, |p| p.clipped()), 0, "nothing clipped");
        // Each shard: its share ρ_s = g_s + (R − Σg)/N.
        let g: Vec<u64> = kids.iter().map(|k| k.0).collect();
        let rho = plan::shares(r.0, &g);
        for (k, &rs) in rho.iter().enumerate() {
            let want = rs / 8 * secs;
            let got = sent[k + 1];
            let lo = DEFAULT_LEASE_BYTES as u64 + len as u64;
            let hi = e + (n as u64 - 1) * lo;
            assert!(
                got + lo >= want && got <= want + hi,
                "len {len} n {n} shard {k}: {got} vs {want} (−{lo} +{hi})"
            );
        }
    }
}

#[test]
fn a_lone_busy_shard_borrows_the_whole_root() {
    let r = Rate::mbit(10);
    let mut q = sharded(r, &[Rate::mbit(5), Rate::mbit(5)], 2);
    let sent = run(&mut q, &[2], r, 4, 1500);
    let ideal = r.0 / 8 * 4;
    let e = bound(&q, 2, 1500);
    assert!(
        sent[2].abs_diff(ideal) <= e,
        "lone shard sent {} of {ideal} ± {e}",
        sent[2]
    );
    assert_eq!(sent[1], 0);
    // It sent twice its own share: half of it came through the pool.
    let leased = q.shards()[1].gate().map_or(0, |g| g.stats().leased) / (8 * NS_PER_SEC);
    assert!(leased * 3 > ideal, "leased {leased} of {ideal}");
}

#[test]
fn on_a_faster_link_the_root_still_caps_the_aggregate() {
    let r = Rate::mbit(10);
    let mut q = sharded(r, &[Rate::mbit(2), Rate::mbit(3)], 2);
    let sent = run(&mut q, &[1, 2], Rate::mbit(100), 4, 1000);
    let total: u64 = sent.iter().skip(1).sum();
    let ideal = r.0 / 8 * 4;
    let e = bound(&q, 2, 1000);
    assert!(
        total.abs_diff(ideal) <= e,
        "aggregate {total} vs {ideal} ± {e}"
    );
    assert!(sent[1] < sent[2], "shares follow the guarantees: {sent:?}");
}

#[test]
fn shards_are_send_and_tokens_are_conserved_across_threads() {
    fn is_send<T: Send>(_: &T) {}
    let r = Rate::mbit(100);
    let specs = tree(
        r,
        &[
            Rate::mbit(10),
            Rate::mbit(10),
            Rate::mbit(10),
            Rate::mbit(10),
        ],
    );
    let mut cfg = ShardConfig::new(4);
    cfg.lease_bytes = 3000;
    let plan = split(HtbParams::default(), specs, &cfg).unwrap_or_else(|e| panic!("{e}"));
    let pool = plan
        .pool
        .clone()
        .unwrap_or_else(|| Arc::new(SharedPool::new(0)));
    let start = pool.level();
    let handles: Vec<_> = plan
        .shards
        .into_iter()
        .enumerate()
        .map(|(i, mut s)| {
            is_send(&s);
            std::thread::spawn(move || {
                // Shards 0 and 1 busy, 2 and 3 idle (they only tick): each on its own clock.
                let mut now = 0u64;
                let mut sent = 0u64;
                for _ in 0..200_000u32 {
                    if i < 2 {
                        while s.htb().leaf_backlog(1).packets < 4 {
                            let _ = s.enqueue_to(1, pkt(1000), Time(now));
                        }
                        match s.dequeue(Time(now)) {
                            Dequeued::Packet(p) => sent += p.len as u64,
                            Dequeued::NotBefore(t) => now = t.0.max(now + 1),
                            Dequeued::Empty => {}
                        }
                    } else {
                        s.tick(Time(now));
                    }
                    now += 2_000;
                }
                (sent, s.gate().map(|g| (g.stats(), g.tokens())))
            })
        })
        .collect();
    let mut into_pool = start as i128;
    let mut charged = 0i128;
    let mut minted = 0i128;
    for h in handles {
        let (sent, g) = h.join().unwrap_or_else(|_| panic!("worker panicked"));
        let Some((st, tokens)) = g else {
            panic!("no gate")
        };
        assert_eq!(st.charged as i128, sent as i128 * 8 * NS_PER_SEC as i128);
        assert_eq!(
            st.minted as i128 + st.leased as i128 - st.charged as i128 - st.deposited as i128,
            tokens as i128,
            "gate conservation"
        );
        into_pool += st.deposited as i128 - st.leased as i128;
        charged += st.charged as i128;
        minted += st.minted as i128;
    }
    assert_eq!(
        into_pool - pool.clipped() as i128,
        pool.level() as i128,
        "pool conservation"
    );
    // The busy shards were held to what was minted plus what the pool started with.
    // Every gate ends above −L, so nothing was sent beyond what was minted plus what the pool
    // started with, plus one packet per shard.
    assert!(charged <= minted + start as i128 + 4 * 1000 * 8 * NS_PER_SEC as i128);
    assert!(charged > 0);
}

/// A reload of a multi-threaded driver: each shard of a new split adopts the same shard of the
/// old one. Kept classes keep their queues; the packets of a class the new tree lacks are
/// requeued in the shard's default class (as [`crate::htb::Htb::adopt`] does); nothing is lost
/// and the books add up on both sides.
#[test]
fn a_shard_adopts_the_same_shard_of_the_old_split() {
    let (old_shards, old_map, _) = sharded(Rate::mbit(10), &[Rate::mbit(1); 4], 2).into_parts();
    let (new_shards, new_map, _) = sharded(Rate::mbit(10), &[Rate::mbit(1); 3], 2).into_parts();
    let mut old_shards = old_shards;
    let mut new_shards = new_shards;
    // Five packets into each of k0..k3 (classes 1..4 of the whole tree).
    for c in 1..5u32 {
        let Some((s, l)) = old_map.locate(c) else {
            panic!("class {c} unmapped")
        };
        for _ in 0..5 {
            assert!(old_shards[s].enqueue_to(l, pkt(100), Time(0)).is_ok());
        }
    }
    let mut kept_packets = 0;
    let mut dropped = 0;
    let mut removed = Vec::new();
    for (s, (new, old)) in new_shards.iter_mut().zip(old_shards.iter_mut()).enumerate() {
        let r = new.adopt(old, Time(1_000));
        let mut victims = 0;
        while new.take_dropped().is_some() {
            victims += 1;
        }
        while old.take_dropped().is_some() {
            victims += 1;
        }
        dropped += r.dropped_packets + victims;
        removed.extend(r.removed.iter().cloned());
        kept_packets += new.backlog().packets;
        assert_eq!(
            old.backlog().packets,
            0,
            "shard {s}: the old shard is left empty"
        );
        let st = new.stats();
        assert_eq!(
            st.enqueued.packets,
            st.backlog.packets + st.dequeued.packets + st.dropped.total().packets,
            "shard {s}: books continue the old shard's"
        );
    }
    // k3 (class 4) is gone: its five packets went to the default class, none was dropped.
    assert_eq!(removed, vec!["k3".to_string()]);
    assert_eq!(kept_packets, 20);
    assert_eq!(dropped, 0);
    assert!(new_map.locate(4).is_none());
}
