//! Per-flow state that follows traffic (`linkshare_core::qdisc::lazy`): a leaf holds no table
//! until it sees a packet, gives it back when released, and a released leaf behaves exactly as
//! a fresh one; a scheduler releases its idle leaves after the hold, oldest first, and counts.

use linkshare_core::cbq::{Cbq, CbqClassSpec, CbqParams};
use linkshare_core::classify::Classifier;
use linkshare_core::htb::{Htb, HtbClassSpec, HtbParams};
use linkshare_core::packet::PacketMeta;
use linkshare_core::qdisc::drr::{Drr, DrrParams};
use linkshare_core::qdisc::fq_codel::{FqCodel, FqCodelParams};
use linkshare_core::qdisc::leaf::LeafSpec;
use linkshare_core::qdisc::sfq::{Sfq, SfqParams};
use linkshare_core::qdisc::{Dequeued, Qdisc, QdiscStats};
use linkshare_core::units::{Rate, Time};

fn pkt(flow: u32, len: u32, id: u16) -> PacketMeta {
    PacketMeta {
        len,
        flow_hash: flow,
        src_port: id,
        ..Default::default()
    }
}

/// What a qdisc did with a workload, in times relative to its start: each packet sent (flow,
/// id, when) and each dropped (flow, id), in order.
#[derive(Debug, PartialEq, Default)]
struct Trace {
    sent: Vec<(u32, u16, u64)>,
    dropped: Vec<(u32, u16)>,
}

/// Three flows for 2 s from `t0`: flow 1 keeps a standing queue (CoDel drops it), flow 2 is
/// sparse, flow 3 arrives in bursts; the link sends one packet every 1.2 ms. Then the qdisc is
/// drained until it says `Empty`.
fn workload(q: &mut dyn Qdisc<PacketMeta>, t0: u64) -> Trace {
    let mut tr = Trace::default();
    let mut id = 0u16;
    let collect = |q: &mut dyn Qdisc<PacketMeta>, tr: &mut Trace| {
        while let Some(d) = q.take_dropped() {
            tr.dropped.push((d.packet.flow_hash, d.packet.src_port));
        }
    };
    for ms in 0..2000u64 {
        let now = Time(t0 + ms * 1_000_000);
        let mut offer = |q: &mut dyn Qdisc<PacketMeta>, flow: u32, len: u32| {
            id = id.wrapping_add(1);
            if let Err(d) = q.enqueue(pkt(flow, len, id), now) {
                tr.dropped.push((d.packet.flow_hash, d.packet.src_port));
            }
        };
        offer(q, 1, 1500);
        if ms % 20 == 0 {
            offer(q, 2, 100);
        }
        if ms % 250 < 5 {
            offer(q, 3, 1000);
        }
        collect(q, &mut tr);
        if ms % 6 != 5 {
            if let Dequeued::Packet(p) = q.dequeue(now) {
                tr.sent.push((p.flow_hash, p.src_port, now.0 - t0));
            }
            collect(q, &mut tr);
        }
    }
    let end = Time(t0 + 2_000_000_000);
    while let Dequeued::Packet(p) = q.dequeue(end) {
        tr.sent.push((p.flow_hash, p.src_port, end.0 - t0));
    }
    collect(q, &mut tr);
    tr
}

/// The workload's counts, as the difference of two snapshots.
fn delta(a: &QdiscStats, b: &QdiscStats) -> (u64, u64, u64, u64) {
    (
        b.enqueued.packets - a.enqueued.packets,
        b.dequeued.packets - a.dequeued.packets,
        b.drops_total().packets - a.drops_total().packets,
        b.marked - a.marked,
    )
}

fn gauge(q: &dyn Qdisc<PacketMeta>, name: &str) -> f64 {
    let mut v = f64::NAN;
    q.extra_stats(&mut |k, x| {
        if k == name {
            v = x;
        }
    });
    v
}

/// A fresh leaf holds no table; traffic builds it; a release frees it (counted); the released
/// leaf, and the kept one after its hold, run a workload exactly as a fresh leaf does, and the
/// counters stay conserved across it all.
fn released_leaf_is_a_fresh_leaf(make: &dyn Fn() -> Box<dyn Qdisc<PacketMeta>>) {
    let mut fresh = make();
    assert_eq!(
        fresh.state_bytes(),
        0,
        "{}: a fresh leaf holds a table",
        fresh.kind()
    );
    assert_eq!(gauge(fresh.as_ref(), "flow_table"), 0.0);
    let want = workload(fresh.as_mut(), 0);
    assert!(want.sent.len() > 1000 && !want.dropped.is_empty() || fresh.kind() != "fq_codel");

    let hold = fresh.release_hold().expect("a per-flow leaf has a hold").0;
    let mut released = make();
    let mut kept = make();
    for q in [&mut released, &mut kept] {
        workload(q.as_mut(), 0);
        assert!(q.state_bytes() > 0);
        assert_eq!(gauge(q.as_ref(), "flow_table"), 1.0);
    }
    // Not while packets wait.
    released
        .enqueue(pkt(9, 100, 0), Time(3_000_000_000))
        .unwrap();
    assert!(!released.release_state());
    let _ = released.dequeue(Time(3_000_000_000));
    let _ = released.dequeue(Time(3_000_000_000));
    assert!(released.release_state());
    assert_eq!(released.state_bytes(), 0);
    assert_eq!(gauge(released.as_ref(), "flow_table"), 0.0);
    assert_eq!(gauge(released.as_ref(), "flow_tables_released"), 1.0);
    released.stats().check_conservation().unwrap();

    let t1 = 3_000_000_000 + hold;
    for q in [&mut released, &mut kept] {
        let before = q.stats().clone();
        let got = workload(q.as_mut(), t1);
        assert_eq!(got, want, "{} after the hold", q.kind());
        assert_eq!(
            delta(&before, q.stats()),
            delta(&QdiscStats::default(), fresh.stats())
        );
        q.stats().check_conservation().unwrap();
    }
    assert_eq!(gauge(released.as_ref(), "flow_tables_built"), 2.0);
}

#[test]
fn fq_codel_released_behaves_as_fresh() {
    released_leaf_is_a_fresh_leaf(&|| {
        Box::new(
            FqCodel::new(FqCodelParams {
                ecn: false,
                ..Default::default()
            })
            .unwrap(),
        )
    });
}

#[test]
fn sfq_released_behaves_as_fresh() {
    released_leaf_is_a_fresh_leaf(&|| Box::new(Sfq::new(SfqParams::default()).unwrap()));
}

#[test]
fn drr_released_behaves_as_fresh() {
    released_leaf_is_a_fresh_leaf(&|| Box::new(Drr::new(DrrParams::default()).unwrap()));
}

/// 64 leaves with fq_codel: none holds a table before traffic; the 8 that get packets build
/// theirs; after they drain, `reclaim_idle` releases nothing before the hold, then (within its
/// budget) the leaves in the order they went idle; the released leaves take traffic again
/// (tables rebuilt, counted) and every packet is accounted for.
#[test]
fn htb_reclaims_idle_leaves_after_the_hold_in_bounded_steps() {
    let params = HtbParams::default();
    let rate = Rate(100_000_000);
    let mut specs = vec![HtbClassSpec::new("root", None, rate, rate, &params)];
    for i in 0..64 {
        let mut s = HtbClassSpec::new(&format!("c{i}"), Some(0), Rate(1_000_000), rate, &params);
        s.leaf = LeafSpec::Qdisc(Box::new(FqCodel::new(FqCodelParams::default()).unwrap()));
        specs.push(s);
    }
    let mut htb: Htb<PacketMeta> = Htb::new(params, specs, Classifier::new(vec![], 1)).unwrap();
    let g = |h: &Htb<PacketMeta>, k: &str| gauge(h, k);
    assert_eq!(g(&htb, "leaf_states_live"), 0.0);
    assert_eq!(
        htb.leaf_bytes().1,
        0,
        "no leaf holds a table before traffic"
    );
    let hold = htb.idle_hold().0;
    let run = |htb: &mut Htb<PacketMeta>, t: u64| {
        for (k, c) in (1..=8u32).enumerate() {
            for j in 0..3 {
                htb.enqueue_to(c * 7 % 64 + 1, pkt(j, 1000, 0), Time(t + k as u64))
                    .unwrap();
            }
        }
        let mut now = t;
        while htb.backlog().packets > 0 {
            now += 1_000_000;
            while let Dequeued::Packet(_) = htb.dequeue(Time(now)) {}
        }
        now
    };
    let idle_at = run(&mut htb, 0);
    assert_eq!(g(&htb, "leaf_states_live"), 8.0);
    assert_eq!(g(&htb, "leaf_states_built"), 8.0);
    assert_eq!(g(&htb, "leaves_idle_holding"), 8.0);
    assert!(htb.leaf_bytes().1 >= 8 * 1024 * 64);
    assert_eq!(htb.reclaim_idle(Time(hold), 100), 0, "none before the hold");
    assert_eq!(
        htb.reclaim_idle(Time(idle_at + hold), 3),
        3,
        "the budget bounds a call"
    );
    assert_eq!(g(&htb, "leaf_states_live"), 5.0);
    assert_eq!(htb.reclaim_idle(Time(idle_at + hold), 100), 5);
    assert_eq!(htb.reclaim_idle(Time(idle_at + hold), 100), 0);
    assert_eq!(g(&htb, "leaf_states_live"), 0.0);
    assert_eq!(g(&htb, "leaf_states_released"), 8.0);
    assert_eq!(g(&htb, "leaves_idle_holding"), 0.0);
    assert_eq!(
        htb.leaf_bytes().1,
        0,
        "an idle leaf holds no per-flow table"
    );
    // Used again: rebuilt, counted, conserved.
    run(&mut htb, idle_at + hold + 1);
    assert_eq!(g(&htb, "leaf_states_built"), 16.0);
    htb.stats().check_conservation().unwrap();
    assert_eq!(htb.stats().dequeued.packets, 48);
    htb.check_invariants().unwrap();
}

/// CBQ keeps its leaves' state the same way: built at the first packet, released after the
/// hold by `reclaim_idle`, counted.
#[test]
fn cbq_reclaims_idle_leaves_after_the_hold() {
    let link = Rate(100_000_000);
    let params = CbqParams::new(link);
    let mut specs = vec![CbqClassSpec::new("root", None, link, &params)];
    for i in 0..16 {
        let mut s = CbqClassSpec::new(&format!("c{i}"), Some(0), Rate(5_000_000), &params);
        s.options.borrow = true;
        s.leaf = LeafSpec::Qdisc(Box::new(Sfq::new(SfqParams::default()).unwrap()));
        specs.push(s);
    }
    let mut cbq: Cbq<PacketMeta> = Cbq::new(params, specs, Classifier::new(vec![], 1)).unwrap();
    assert_eq!(gauge(&cbq, "leaf_states_live"), 0.0);
    for c in [2u32, 5, 9] {
        cbq.enqueue_to(c, pkt(c, 500, 0), Time(0)).unwrap();
    }
    assert_eq!(gauge(&cbq, "leaf_states_live"), 3.0);
    let mut now = 0;
    while cbq.backlog().packets > 0 {
        now += 1_000_000;
        while let Dequeued::Packet(_) = cbq.dequeue(Time(now)) {}
    }
    assert_eq!(gauge(&cbq, "leaves_idle_holding"), 3.0);
    assert_eq!(cbq.reclaim_idle(Time(now), 100), 0);
    let hold = linkshare_core::qdisc::lazy::DEFAULT_IDLE_HOLD.0;
    assert_eq!(cbq.reclaim_idle(Time(now + hold), 100), 3);
    assert_eq!(gauge(&cbq, "leaf_states_live"), 0.0);
    assert_eq!(gauge(&cbq, "leaf_states_released"), 3.0);
    cbq.stats().check_conservation().unwrap();
}
