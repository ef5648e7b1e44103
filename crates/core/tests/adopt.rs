//! Reloads and drains keep the books: `enqueued = dequeued + dropped + backlog` across `adopt` and
//! `drain`, the backlog the counters show is the packets really queued, and every packet an AQM
//! leaf drops while being drained is handed out through `take_dropped` (issue 13: HTB's leaf drain
//! lost them, so a reload of an HTB with a codel leaf onto itself left a backlog of 20 with 7
//! packets really queued, and `dequeue` answered `NotBefore(now + 1 ms)` for ever after).

use linkshare_core::classify::{Classifier, FilterSpec};
use linkshare_core::htb::{Htb, HtbClassSpec, HtbParams};
use linkshare_core::leaf::LeafSpec;
use linkshare_core::qdisc::codel::{Codel, CodelParams};
use linkshare_core::qdisc::drr::{Drr, DrrClassSpec, DrrParams};
use linkshare_core::qdisc::fifo::FifoLimit;
use linkshare_core::qdisc::fq_codel::{FqCodel, FqCodelParams};
use linkshare_core::qdisc::prio::{Prio, PrioParams};
use linkshare_core::qdisc::{Backlog, Dequeued, Qdisc};
use linkshare_core::units::{Rate, Time};
use linkshare_core::PacketMeta;

const MS: u64 = 1_000_000;

fn pkt(len: u32, flow: u16) -> PacketMeta {
    PacketMeta {
        len,
        src_port: flow,
        ..Default::default()
    }
}

/// An AQM leaf: codel or fq_codel, dropping (no ECN).
fn aqm_leaf(fq: bool) -> LeafSpec<PacketMeta> {
    if fq {
        let p = FqCodelParams {
            ecn: false,
            ..Default::default()
        };
        LeafSpec::Qdisc(Box::new(FqCodel::new(p).unwrap()))
    } else {
        LeafSpec::Qdisc(Box::new(Codel::new(CodelParams::default()).unwrap()))
    }
}

/// A root 8 Mbit/s with two 1 Mbit/s leaves: `a` (an AQM leaf) and `b` (pfifo).
fn htb(fq: bool) -> Htb<PacketMeta> {
    let p = HtbParams::default();
    let root = HtbClassSpec::new("root", None, Rate::mbit(8), Rate::mbit(8), &p);
    let mut a = HtbClassSpec::new("a", Some(0), Rate::mbit(1), Rate::mbit(1), &p);
    a.leaf = aqm_leaf(fq);
    let b = HtbClassSpec::new("b", Some(0), Rate::mbit(1), Rate::mbit(1), &p);
    Htb::new(
        p,
        vec![root, a, b],
        Classifier::new(Vec::<FilterSpec>::new(), 1),
    )
    .unwrap()
}

/// What a run gave out.
#[derive(Default, Debug)]
struct Tally {
    sent: u64,
    victims: u64,
}

/// Offer 1000-byte packets every 4 ms (2 Mbit/s, twice what the AQM leaf may send) from `from`
/// to `to`, and ask for one packet every `serve` ns: the standing queue makes CoDel drop.
fn run(q: &mut dyn Qdisc<PacketMeta>, from: u64, to: u64, serve: u64, tally: &mut Tally) {
    let mut t = from;
    while t < to {
        if t.is_multiple_of(4 * MS) {
            let _ = q.enqueue(pkt(1000, (t / MS % 7) as u16), Time(t));
        }
        if t.is_multiple_of(serve) {
            if let Dequeued::Packet(_) = q.dequeue(Time(t)) {
                tally.sent += 1;
            }
        }
        while q.take_dropped().is_some() {
            tally.victims += 1;
        }
        q.stats().check_conservation().unwrap();
        t += MS;
    }
}

/// The packets the classes really hold (leaf classes only), against the qdisc's counter.
fn real_backlog(q: &dyn Qdisc<PacketMeta>) -> Backlog {
    let mut b = Backlog::default();
    q.visit_classes(&mut |v| {
        if v.is_leaf {
            b.packets += v.backlog.packets;
            b.bytes += v.backlog.bytes;
        }
    });
    b
}

/// Dequeue until empty (bounded); the qdisc must end with nothing queued and nothing counted.
fn empty_out(q: &mut dyn Qdisc<PacketMeta>, mut now: u64) {
    for _ in 0..100_000 {
        match q.dequeue(Time(now)) {
            Dequeued::Packet(_) => {}
            Dequeued::NotBefore(t) => now = t.0,
            Dequeued::Empty => break,
        }
        while q.take_dropped().is_some() {}
    }
    assert_eq!(q.dequeue(Time(now)), Dequeued::Empty);
    assert_eq!(q.stats().backlog, Backlog::default());
    q.stats().check_conservation().unwrap();
}

#[test]
fn adopt_onto_itself_collects_what_an_aqm_leaf_drops_while_draining() {
    for fq in [false, true] {
        // Several pauses before the reload: the longer the pause, the more CoDel drops at once.
        let mut drained_drops = 0;
        for pause in [0, 50 * MS, 300 * MS, 2_000 * MS] {
            let mut old = htb(fq);
            let mut tally = Tally::default();
            run(&mut old, 0, 1_000 * MS, MS, &mut tally);
            assert!(tally.victims > 0, "the scenario makes CoDel drop");
            let at = 1_000 * MS + pause;
            let dropped_before = old.stats().dropped.total().packets;
            let mut new = htb(fq);
            new.adopt(&mut old, Time(at));
            let dropped_in_adopt = new.stats().dropped.total().packets - dropped_before;
            drained_drops += dropped_in_adopt;
            let mut victims = 0;
            while new.take_dropped().is_some() {
                victims += 1;
            }
            assert_eq!(victims, dropped_in_adopt, "fq {fq}, pause {pause}");
            new.stats().check_conservation().unwrap();
            assert_eq!(
                new.stats().backlog,
                real_backlog(&new),
                "fq {fq}, pause {pause}: the counted backlog is what is queued"
            );
            assert_eq!(old.stats().backlog, Backlog::default());
            // Only `a` drops: its class counter has every drop, those of the drain included.
            let a = new.class_stats(new.class_id("a").unwrap()).unwrap();
            let all = new.stats().drops_total().packets;
            assert_eq!(a.drops, all, "fq {fq}, pause {pause}");
            empty_out(&mut new, at);
        }
        assert!(drained_drops > 0, "fq {fq}: some drain dropped packets");
    }
}

/// `drain` on every discipline that holds AQM children: what a child drops while draining is
/// counted and handed out, and the backlog ends at zero.
#[test]
fn drain_collects_what_aqm_children_drop() {
    type Make = fn() -> Box<dyn Qdisc<PacketMeta>>;
    let makers: [(&str, Make, u64); 4] = [
        ("htb/codel", || Box::new(htb(false)), MS),
        ("htb/fq_codel", || Box::new(htb(true)), MS),
        (
            "prio/codel",
            || {
                let p = PrioParams {
                    bands: 2,
                    priomap: [1; 16],
                    ..Default::default()
                };
                let bands = vec![LeafSpec::Fifo(FifoLimit::Packets(10)), aqm_leaf(false)];
                Box::new(Prio::with_bands(p, bands, None).unwrap())
            },
            8 * MS,
        ),
        (
            "drr/fq_codel",
            || {
                let classes = vec![DrrClassSpec {
                    name: "a".into(),
                    quantum: 1514,
                    leaf: aqm_leaf(true),
                }];
                let c = Classifier::new(Vec::<FilterSpec>::new(), 0);
                Box::new(Drr::with_classes(DrrParams::default(), classes, c).unwrap())
            },
            8 * MS,
        ),
    ];
    for (name, make, serve) in makers {
        let mut q = make();
        let mut tally = Tally::default();
        run(q.as_mut(), 0, 1_000 * MS, serve, &mut tally);
        assert!(tally.victims > 0, "{name}: the scenario makes CoDel drop");
        let dropped_before = q.stats().dropped.total().packets;
        let queued = q.stats().backlog.packets;
        let out = q.drain(Time(3_000 * MS));
        let dropped = q.stats().dropped.total().packets - dropped_before;
        assert!(dropped > 0, "{name}: CoDel drops while draining");
        assert_eq!(out.len() as u64 + dropped, queued, "{name}");
        let mut victims = 0;
        while q.take_dropped().is_some() {
            victims += 1;
        }
        assert_eq!(victims, dropped, "{name}: every drop is handed out");
        assert_eq!(q.stats().backlog, Backlog::default(), "{name}");
        q.stats().check_conservation().unwrap();
        empty_out(q.as_mut(), 3_000 * MS);
    }
}
