//! ECN marks add up like drops (issue 13: an fq_codel leaf under HTB marked 811 packets CE and
//! `stat` showed 0). Each classful discipline's qdisc-wide `marked` is the sum of its leaves'
//! marks, each leaf class shows its leaf's marks, and a reload neither loses nor doubles them.

use linkshare_core::cbq::{Cbq, CbqClassSpec, CbqParams};
use linkshare_core::classify::{Classifier, FilterSpec};
use linkshare_core::htb::{Htb, HtbClassSpec, HtbParams};
use linkshare_core::leaf::LeafSpec;
use linkshare_core::packet::L3;
use linkshare_core::qdisc::drr::{Drr, DrrClassSpec, DrrParams};
use linkshare_core::qdisc::fq_codel::{FqCodel, FqCodelParams};
use linkshare_core::qdisc::prio::{Prio, PrioParams};
use linkshare_core::qdisc::Qdisc;
use linkshare_core::units::{Rate, Time};
use linkshare_core::PacketMeta;

const MS: u64 = 1_000_000;

/// An ECN-capable (ECT(0)) UDP packet to port `class`.
fn pkt(class: u16) -> PacketMeta {
    PacketMeta {
        len: 1000,
        l3: L3::Ipv4,
        proto: 17,
        tos: 0b10,
        dst_port: class,
        ..Default::default()
    }
}

fn fq_codel() -> LeafSpec<PacketMeta> {
    LeafSpec::Qdisc(Box::new(FqCodel::new(FqCodelParams::default()).unwrap()))
}

/// Port 1 → class 1, port 2 → class 2 (the default).
fn classifier(first: u32) -> Classifier {
    let f = |port: u16, class: u32| FilterSpec {
        class,
        dst_port: Some((port, port)),
        ..Default::default()
    };
    Classifier::new(vec![f(1, first), f(2, first + 1)], first + 1)
}

fn htb() -> Box<dyn Qdisc<PacketMeta>> {
    let p = HtbParams::default();
    let root = HtbClassSpec::new("root", None, Rate::mbit(8), Rate::mbit(8), &p);
    let mut a = HtbClassSpec::new("a", Some(0), Rate::mbit(2), Rate::mbit(2), &p);
    a.leaf = fq_codel();
    let mut b = HtbClassSpec::new("b", Some(0), Rate::mbit(2), Rate::mbit(2), &p);
    b.leaf = fq_codel();
    Box::new(Htb::new(p, vec![root, a, b], classifier(1)).unwrap())
}

fn cbq() -> Box<dyn Qdisc<PacketMeta>> {
    let p = CbqParams::new(Rate::mbit(8));
    let root = CbqClassSpec::new("root", None, Rate::mbit(8), &p);
    let mut a = CbqClassSpec::new("a", Some(0), Rate::mbit(2), &p);
    a.leaf = fq_codel();
    let mut b = CbqClassSpec::new("b", Some(0), Rate::mbit(2), &p);
    b.leaf = fq_codel();
    Box::new(Cbq::new(p, vec![root, a, b], classifier(1)).unwrap())
}

fn prio() -> Box<dyn Qdisc<PacketMeta>> {
    let p = PrioParams {
        bands: 2,
        priomap: [1; 16],
        ..Default::default()
    };
    let bands = vec![fq_codel(), fq_codel()];
    Box::new(Prio::with_bands(p, bands, Some(classifier(0))).unwrap())
}

fn drr() -> Box<dyn Qdisc<PacketMeta>> {
    let class = |name: &str| DrrClassSpec {
        name: name.into(),
        quantum: 1514,
        leaf: fq_codel(),
    };
    let classes = vec![class("a"), class("b")];
    Box::new(Drr::with_classes(DrrParams::default(), classes, classifier(0)).unwrap())
}

/// Both classes offered 8 Mbit/s; the link takes one packet every `serve` ns.
fn run(q: &mut dyn Qdisc<PacketMeta>, from: u64, to: u64, serve: u64) {
    let mut t = from;
    while t < to {
        for c in [1, 2] {
            let _ = q.enqueue(pkt(c), Time(t));
        }
        if t.is_multiple_of(serve) {
            let _ = q.dequeue(Time(t));
        }
        while q.take_dropped().is_some() {}
        t += MS;
    }
}

/// The qdisc's `marked` and the sum of what its leaf classes show.
fn marks(q: &dyn Qdisc<PacketMeta>) -> (u64, u64) {
    let mut leaves = 0;
    q.visit_classes(&mut |c| {
        if c.is_leaf {
            leaves += c.stats.marked;
        }
    });
    (q.stats().marked, leaves)
}

#[test]
fn leaf_marks_add_up_in_every_classful_discipline() {
    type Make = fn() -> Box<dyn Qdisc<PacketMeta>>;
    // Rate-limited trees serve every ms (the classes are the bottleneck); work-conserving ones
    // every 4 ms (the link is).
    let makers: [(&str, Make, u64); 4] = [
        ("htb", htb, MS),
        ("cbq", cbq, MS),
        ("prio", prio, 4 * MS),
        ("drr", drr, 4 * MS),
    ];
    for (name, make, serve) in makers {
        let mut q = make();
        run(q.as_mut(), 0, 2_000 * MS, serve);
        let (root, leaves) = marks(q.as_ref());
        assert!(
            root > 0,
            "{name}: the leaves marked, the qdisc shows {root}"
        );
        assert_eq!(root, leaves, "{name}");
        assert_eq!(
            q.stats().dropped.total().packets,
            0,
            "{name}: ECT packets are marked"
        );

        // A reload onto the same policy keeps the marks, once (the drain may mark a few of the
        // packets it moves: an AQM leaf still runs while drained).
        let queued = q.stats().backlog.packets;
        let mut new = make();
        let _ = new.adopt(q.as_mut(), Time(2_000 * MS));
        let (r, l) = marks(new.as_ref());
        assert_eq!(r, l, "{name}: after the reload");
        assert!(
            (root..=root + queued).contains(&r),
            "{name}: {root} before, {r} after"
        );
        run(new.as_mut(), 2_000 * MS, 2_500 * MS, serve);
        let (root2, leaves2) = marks(new.as_ref());
        assert!(root2 > root, "{name}");
        assert_eq!(root2, leaves2, "{name}: after more traffic");
    }
}
