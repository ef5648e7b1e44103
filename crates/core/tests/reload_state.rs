//! A reload keeps state (issue 13): through [`Qdisc::adopt`], a scheduler reloaded onto the same
//! policy shows the same counters, estimators and leaf counters as before, and does not hand an
//! overlimit class a fresh burst. Before, every scheduler but HTB restarted: CBQ's estimators at
//! `maxidle`, every counter at zero, and HTB's leaf qdiscs' counters at zero.

use linkshare_core::cbq::{Cbq, CbqClassSpec, CbqParams};
use linkshare_core::classify::{Classifier, FilterSpec};
use linkshare_core::htb::{Htb, HtbClassSpec, HtbParams};
use linkshare_core::leaf::LeafSpec;
use linkshare_core::packet::L3;
use linkshare_core::qdisc::codel::{Codel, CodelParams};
use linkshare_core::qdisc::fq_codel::{FqCodel, FqCodelParams};
use linkshare_core::qdisc::{Backlog, ClassMode, ClassStats, Dequeued, DropCounts, Qdisc};
use linkshare_core::units::{Rate, Time};
use linkshare_core::{PacketMeta, QdiscStats};

const MS: u64 = 1_000_000;

fn pkt(len: u32, class: u16) -> PacketMeta {
    PacketMeta {
        len,
        l3: L3::Ipv4,
        proto: 17,
        dst_port: class,
        ..Default::default()
    }
}

fn codel() -> LeafSpec<PacketMeta> {
    LeafSpec::Qdisc(Box::new(Codel::new(CodelParams::default()).unwrap()))
}

/// Filters by destination port: 1 → class 1, 2 → class 2; default class 2.
fn classifier() -> Classifier {
    let f = |port: u16, class: u32| FilterSpec {
        class,
        dst_port: Some((port, port)),
        ..Default::default()
    };
    Classifier::new(vec![f(1, 1), f(2, 2)], 2)
}

/// CBQ on a 10 Mbit/s link: `a` 2 Mbit/s without borrowing, with a CoDel leaf; `b` 6 Mbit/s
/// that borrows, with a pfifo.
fn cbq() -> Box<dyn Qdisc<PacketMeta>> {
    let p = CbqParams::new(Rate::mbit(10));
    let root = CbqClassSpec::new("root", None, Rate::mbit(10), &p);
    let mut a = CbqClassSpec::new("a", Some(0), Rate::mbit(2), &p);
    a.leaf = codel();
    let mut b = CbqClassSpec::new("b", Some(0), Rate::mbit(6), &p);
    b.options.borrow = true;
    Box::new(Cbq::new(p, vec![root, a, b], classifier()).unwrap())
}

/// HTB, the same shape: `a` 2 Mbit/s (ceil 2) with a CoDel leaf, `b` 6 Mbit/s (ceil 10).
fn htb() -> Box<dyn Qdisc<PacketMeta>> {
    let p = HtbParams::default();
    let root = HtbClassSpec::new("root", None, Rate::mbit(10), Rate::mbit(10), &p);
    let mut a = HtbClassSpec::new("a", Some(0), Rate::mbit(2), Rate::mbit(2), &p);
    a.leaf = codel();
    let b = HtbClassSpec::new("b", Some(0), Rate::mbit(6), Rate::mbit(10), &p);
    Box::new(Htb::new(p, vec![root, a, b], classifier()).unwrap())
}

fn fq_codel() -> Box<dyn Qdisc<PacketMeta>> {
    let p = FqCodelParams {
        ecn: false,
        ..Default::default()
    };
    Box::new(FqCodel::new(p).unwrap())
}

/// Class 1 offered 4 Mbit/s and class 2 offered 8 Mbit/s of 1000-byte packets; the link takes one
/// packet per millisecond (8 Mbit/s). Returns bytes sent per destination port.
fn run(q: &mut dyn Qdisc<PacketMeta>, from: u64, to: u64) -> [u64; 3] {
    let mut sent = [0u64; 3];
    let mut t = from;
    while t < to {
        if t.is_multiple_of(2 * MS) {
            let _ = q.enqueue(pkt(1000, 1), Time(t));
        }
        let _ = q.enqueue(pkt(1000, 2), Time(t));
        if let Dequeued::Packet(p) = q.dequeue(Time(t)) {
            sent[usize::from(p.dst_port)] += u64::from(p.len);
        }
        while q.take_dropped().is_some() {}
        q.stats().check_conservation().unwrap();
        t += MS;
    }
    sent
}

/// What `stat` shows of one class.
#[derive(Debug, PartialEq)]
struct Shown {
    name: String,
    mode: ClassMode,
    stats: ClassStats,
    backlog: Backlog,
    leaf_drops: DropCounts,
    avgidle_ns: Option<i64>,
}

fn shown(q: &dyn Qdisc<PacketMeta>) -> Vec<Shown> {
    let mut v = Vec::new();
    q.visit_classes(&mut |c| {
        v.push(Shown {
            name: c.name.to_string(),
            mode: c.mode,
            stats: c.stats,
            backlog: c.backlog,
            leaf_drops: c.leaf_drops.clone(),
            avgidle_ns: c.avgidle_ns,
        })
    });
    v
}

/// Reload `make()` onto itself after 1 s: what `stat` shows is unchanged, the qdisc-wide counters
/// continue, and over the next 200 ms the classes send what they would have without the reload
/// (within one packet each).
fn reload_is_invisible(label: &str, make: fn() -> Box<dyn Qdisc<PacketMeta>>) {
    let mut old = make();
    run(old.as_mut(), 0, 1_000 * MS);
    // At the instant of the last step, so that nothing changes with time in between.
    let at = 999 * MS;
    let before = shown(old.as_ref());
    let stats_before: QdiscStats = old.stats().clone();
    assert!(
        stats_before.dropped.total().packets > 0,
        "{label}: CoDel dropped"
    );

    let mut new = make();
    let rep = new.adopt(old.as_mut(), Time(at));
    assert_eq!(rep.dropped_packets, 0, "{label}");
    assert_eq!(
        shown(new.as_ref()),
        before,
        "{label}: stat after the reload"
    );
    assert_eq!(
        *new.stats(),
        stats_before,
        "{label}: qdisc counters continue"
    );
    new.stats().check_conservation().unwrap();

    let (from, to) = (1_000 * MS, 1_200 * MS);
    let without = run(old_twin(make, from).as_mut(), from, to);
    let with = run(new.as_mut(), from, to);
    for c in [1, 2] {
        assert!(
            with[c].abs_diff(without[c]) <= 1000,
            "{label}: class {c} sent {} bytes after the reload, {} without",
            with[c],
            without[c]
        );
    }
}

/// The same qdisc as `old` was at `at`, never reloaded (the runs are deterministic).
fn old_twin(make: fn() -> Box<dyn Qdisc<PacketMeta>>, at: u64) -> Box<dyn Qdisc<PacketMeta>> {
    let mut q = make();
    run(q.as_mut(), 0, at);
    q
}

#[test]
fn cbq_reload_keeps_estimators_and_counters() {
    reload_is_invisible("cbq", cbq);
}

#[test]
fn htb_reload_keeps_leaf_qdisc_counters() {
    reload_is_invisible("htb", htb);
}

/// A leaf discipline as the root: its counters continue.
#[test]
fn fq_codel_reload_keeps_counters() {
    let mut old = fq_codel();
    let mut t = 0;
    while t < 500 * MS {
        for c in [1, 2] {
            let _ = old.enqueue(pkt(1000, c), Time(t));
        }
        let _ = old.dequeue(Time(t));
        while old.take_dropped().is_some() {}
        t += MS;
    }
    let before = old.stats().clone();
    assert!(before.dropped.total().packets > 0);
    let mut new = fq_codel();
    let rep = new.adopt(old.as_mut(), Time(t));
    assert_eq!(rep.moved_packets, before.backlog.packets);
    assert_eq!(*new.stats(), before, "counters continue across the reload");
    new.stats().check_conservation().unwrap();
}
