//! Unit tests for HFSC: the checks of a tree, the invariants of the ordered sets under random
//! operations, the 2025 stall, upper limits and both positions of each compatibility switch,
//! driven by a small virtual-time link (`run`), which `tests_figures` shares.

use std::collections::VecDeque;

use super::*;
use crate::classify::FilterSpec;
use crate::leaf::LeafSpec;
use crate::packet::PacketMeta;
use crate::qdisc::DropReason;
use proptest::prelude::*;

pub(super) const MS: u64 = 1_000_000;
pub(super) const SEC: u64 = 1_000_000_000;
pub(super) const MBIT: u64 = 1_000_000;

/// A test packet: its class and when it arrived.
#[derive(Debug)]
pub(super) struct Tp {
    meta: PacketMeta,
    pub class: u32,
    pub born: u64,
}

impl Packet for Tp {
    fn meta(&self) -> &PacketMeta {
        &self.meta
    }
}

pub(super) fn tp(class: u32, len: u32, born: u64) -> Tp {
    Tp {
        meta: PacketMeta {
            len,
            ..Default::default()
        },
        class,
        born,
    }
}

/// `m1` bit/s for `d_ms`, then `m2`.
pub(super) fn sc(m1: u64, d_ms: u64, m2: u64) -> ServiceCurve {
    ServiceCurve {
        m1,
        d: d_ms * MS,
        m2,
    }
}

pub(super) fn lin(m: u64) -> ServiceCurve {
    ServiceCurve::rate(m)
}

/// A class as the tests describe it.
#[derive(Clone, Copy)]
pub(super) struct Def {
    pub name: &'static str,
    pub parent: Option<&'static str>,
    pub rt: Option<ServiceCurve>,
    pub ls: Option<ServiceCurve>,
    pub ul: Option<ServiceCurve>,
}

pub(super) fn def(name: &'static str, parent: Option<&'static str>) -> Def {
    Def {
        name,
        parent,
        rt: None,
        ls: None,
        ul: None,
    }
}

impl Def {
    pub fn rt(mut self, c: ServiceCurve) -> Self {
        self.rt = Some(c);
        self
    }
    pub fn ls(mut self, c: ServiceCurve) -> Self {
        self.ls = Some(c);
        self
    }
    pub fn ul(mut self, c: ServiceCurve) -> Self {
        self.ul = Some(c);
        self
    }
}

pub(super) fn specs(defs: &[Def]) -> Vec<HfscClassSpec<Tp>> {
    let idx = |n: &str| defs.iter().position(|c| c.name == n).unwrap() as u32;
    defs.iter()
        .map(|d| {
            let mut s = HfscClassSpec::new(d.name, d.parent.map(idx), lin(0));
            s.rt = d.rt;
            s.ls = d.ls;
            s.ul = d.ul;
            s
        })
        .collect()
}

pub(super) fn build(defs: &[Def], params: HfscParams) -> Hfsc<Tp> {
    let default = defs.len() as u32 - 1;
    Hfsc::new(
        params,
        specs(defs),
        Classifier::new(Vec::<FilterSpec>::new(), default),
    )
    .unwrap()
}

/// A source: greedy (kept backlogged) or one packet every `every` ns, in `[from, to)`.
#[derive(Clone, Copy)]
pub(super) struct Src {
    pub class: u32,
    pub len: u32,
    pub from: u64,
    pub to: u64,
    pub every: Option<u64>,
}

pub(super) fn greedy(class: u32, from: u64, to: u64) -> Src {
    Src {
        class,
        len: 1500,
        from,
        to,
        every: None,
    }
}

/// A packet on the wire: its class, length, arrival, and when its transmission started and
/// ended.
#[derive(Clone, Copy, Debug)]
pub(super) struct Sent {
    pub class: u32,
    pub len: u32,
    pub born: u64,
    pub end: u64,
}

/// The driver: a link of `link` bit/s that asks for the next packet when the previous one is
/// on the wire; `NotBefore` is honoured exactly. Invariants are checked every `check` steps
/// (0: never). Bounded by a step count so that a livelock fails.
pub(super) fn run(q: &mut Hfsc<Tp>, link: u64, srcs: &[Src], end: u64, check: u64) -> Vec<Sent> {
    let mut next: Vec<u64> = srcs.iter().map(|s| s.from).collect();
    let (mut t, mut free, mut wake) = (0u64, 0u64, None::<u64>);
    let mut out = Vec::new();
    for step in 0..50_000_000u64 {
        if t >= end {
            return out;
        }
        for (i, s) in srcs.iter().enumerate() {
            match s.every {
                Some(p) => {
                    while next[i] <= t && next[i] < s.to {
                        let _ = q.enqueue_to(s.class, tp(s.class, s.len, next[i]), Time(t));
                        next[i] += p;
                    }
                }
                None if s.from <= t && t < s.to => {
                    while q.leaf_backlog(s.class).packets < 3 {
                        if q.enqueue_to(s.class, tp(s.class, s.len, t), Time(t))
                            .is_err()
                        {
                            break;
                        }
                    }
                }
                None => {}
            }
        }
        if free <= t {
            wake = None;
            match q.dequeue(Time(t)) {
                Dequeued::Packet(p) => {
                    let tx = (p.len() as u64 * 8 * SEC).div_ceil(link);
                    out.push(Sent {
                        class: p.class,
                        len: p.len(),
                        born: p.born,
                        end: t + tx,
                    });
                    free = t + tx;
                }
                Dequeued::NotBefore(x) => wake = Some(x.0),
                Dequeued::Empty => {}
            }
        }
        if check > 0 && step % check == 0 {
            q.check_invariants().unwrap();
        }
        let mut nt = u64::MAX;
        if free > t {
            nt = free;
        } else if let Some(w) = wake {
            nt = w;
        }
        for (i, s) in srcs.iter().enumerate() {
            if s.every.is_some() && next[i] < s.to {
                nt = nt.min(next[i]);
            }
            if s.every.is_none() && s.from > t {
                nt = nt.min(s.from);
            }
        }
        if nt == u64::MAX {
            return out;
        }
        t = nt.max(t + 1).min(end);
    }
    panic!("the run did not end within its step bound");
}

/// Rate of `class` in bit/s over `[from, to)`, counting packets that ended in it.
pub(super) fn rate(out: &[Sent], class: u32, from: u64, to: u64) -> f64 {
    let b: u64 = out
        .iter()
        .filter(|s| s.class == class && s.end >= from && s.end < to)
        .map(|s| s.len as u64)
        .sum();
    b as f64 * 8.0 / ((to - from) as f64 / SEC as f64)
}

/// `got` is `want` within `rel` (a fraction), or within `slack` bit/s.
pub(super) fn near(got: f64, want: f64, rel: f64, slack: f64) -> bool {
    (got - want).abs() <= (want * rel).max(slack)
}

#[test]
fn refuses_what_linux_refuses() {
    let p = HfscParams::default();
    let inner_rt_only = [
        def("a", None).rt(lin(MBIT)),
        def("a1", Some("a")).ls(lin(1)),
    ];
    let e = Hfsc::new(p, specs(&inner_rt_only), Classifier::new(vec![], 1)).err();
    assert_eq!(e, Some(HfscError::InnerWithoutLs { class: "a".into() }));
    let ul_only = [def("a", None).rt(lin(1)).ul(lin(MBIT))];
    let e = Hfsc::new(p, specs(&ul_only), Classifier::new(vec![], 0)).err();
    assert_eq!(e, Some(HfscError::UlWithoutLs { class: "a".into() }));
    let none = [def("a", None).rt(lin(0))];
    let e = Hfsc::new(p, specs(&none), Classifier::new(vec![], 0)).err();
    assert_eq!(e, Some(HfscError::NoCurve { class: "a".into() }));
    let to_inner = [def("a", None).ls(lin(1)), def("a1", Some("a")).ls(lin(1))];
    let e = Hfsc::new(p, specs(&to_inner), Classifier::new(vec![], 0)).err();
    assert_eq!(e, Some(HfscError::DefaultNotLeaf("a".into())));
    // rt on an inner class is kept out of the scheduler, as Linux ignores it.
    let inner_rt = [
        def("a", None).ls(lin(1)).rt(lin(5)),
        def("a1", Some("a")).ls(lin(1)),
    ];
    let q = build(&inner_rt, p);
    assert_eq!(q.class_curves(0).unwrap().0, None);
}

#[test]
fn a_lone_class_is_held_to_its_upper_limit() {
    let mut q = build(
        &[def("a", None).ls(lin(10 * MBIT)).ul(lin(2 * MBIT))],
        HfscParams::default(),
    );
    let out = run(&mut q, 10 * MBIT, &[greedy(0, 0, 3 * SEC)], 3 * SEC, 1000);
    let r = rate(&out, 0, SEC, 3 * SEC);
    assert!(near(r, 2e6, 0.01, 0.0), "{r}");
    q.check_invariants().unwrap();
}

/// A leaf discipline that, when `drop_all` is set, drops everything it holds while asked for
/// a packet and answers `Empty` — what FQ-CoDel or CAKE do when CoDel drops the last packets.
struct Dropper {
    q: VecDeque<Tp>,
    books: Books<Tp>,
    drop_all: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl Discipline<Tp> for Dropper {
    fn books(&self) -> &Books<Tp> {
        &self.books
    }
    fn books_mut(&mut self) -> &mut Books<Tp> {
        &mut self.books
    }
    fn enqueue_inner(&mut self, pkt: Tp, _now: Time) -> Result<(), Dropped<Tp>> {
        self.q.push_back(pkt);
        Ok(())
    }
    fn dequeue_inner(&mut self, _now: Time) -> Dequeued<Tp> {
        if self.drop_all.load(std::sync::atomic::Ordering::Relaxed) {
            while let Some(p) = self.q.pop_front() {
                self.books.drop(p, DropReason::Aqm);
            }
            return Dequeued::Empty;
        }
        self.q.pop_front().map_or(Dequeued::Empty, Dequeued::Packet)
    }
    fn kind_inner(&self) -> &'static str {
        "dropper"
    }
}

#[test]
fn a_leaf_that_drops_its_last_packet_never_stalls_its_siblings() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    let flag = Arc::new(AtomicBool::new(false));
    let defs = [
        def("p", None).ls(lin(10 * MBIT)),
        def("a", Some("p"))
            .ls(lin(5 * MBIT))
            .rt(sc(8 * MBIT, 10, MBIT)),
        def("b", Some("p")).ls(lin(5 * MBIT)),
    ];
    let mut s = specs(&defs);
    s[1].leaf = LeafSpec::Qdisc(Box::new(Dropper {
        q: VecDeque::new(),
        books: Books::new(),
        drop_all: flag.clone(),
    }));
    let mut q = Hfsc::new(HfscParams::default(), s, Classifier::new(vec![], 2)).unwrap();
    for round in 0..3u64 {
        let t0 = round * SEC;
        for _ in 0..4 {
            q.enqueue_to(1, tp(1, 1000, t0), Time(t0)).unwrap();
        }
        for _ in 0..20 {
            q.enqueue_to(2, tp(2, 1000, t0), Time(t0)).unwrap();
        }
        // One packet of `a` goes normally (its next is pulled into the head slot), then its
        // discipline drops everything it holds the next time it is asked.
        let mut t = t0;
        let mut sent_b = 0;
        let mut dropped_once = false;
        for _ in 0..100 {
            match q.dequeue(Time(t)) {
                Dequeued::Packet(p) => {
                    if p.class == 2 {
                        sent_b += 1;
                    }
                    if p.class == 1 && !dropped_once {
                        flag.store(true, Ordering::Relaxed);
                        dropped_once = true;
                    }
                }
                Dequeued::Empty => break,
                Dequeued::NotBefore(x) => t = x.0,
            }
            while q.take_dropped().is_some() {}
            q.check_invariants().unwrap();
            t += 800_000;
        }
        flag.store(false, Ordering::Relaxed);
        assert_eq!(sent_b, 20, "round {round}: b was stalled");
        assert_eq!(q.backlog().packets, 0);
        let p = q.class_state(0).unwrap();
        assert_eq!(
            p.nactive, 0,
            "round {round}: the parent still counts an active child"
        );
    }
    assert!(q.stats().dropped.total().packets >= 3);
}

/// The 2025 stall with a real FQ-CoDel leaf: one flow of 9000-byte packets (above CoDel's MTU,
/// so CoDel may drop a flow's last packet) waits in a slow class until CoDel, asked for the next
/// packet, drops all it holds. The sibling is served on, the parent goes passive once.
#[test]
fn a_real_fq_codel_leaf_that_drops_its_last_packet_never_stalls_its_sibling() {
    use crate::qdisc::fq_codel::{FqCodel, FqCodelParams};
    let defs = [
        def("p", None).ls(lin(10 * MBIT)),
        def("a", Some("p")).ls(lin(MBIT)),
        def("b", Some("p")).ls(lin(9 * MBIT)),
    ];
    let mut s = specs(&defs);
    let fq = FqCodel::new(FqCodelParams::default()).unwrap();
    s[1].leaf = LeafSpec::Qdisc(Box::new(fq));
    let mut q = Hfsc::new(HfscParams::default(), s, Classifier::new(vec![], 2)).unwrap();
    for _ in 0..40 {
        q.enqueue_to(1, tp(1, 9000, 0), Time(0)).unwrap();
    }
    // `b` is kept backlogged for 3.6 s: `a` is asked every 72 ms, and CoDel's drops come faster.
    let (mut t, mut sent_b, mut emptied_by_aqm, mut fed) = (0u64, 0, 0, 0);
    for _ in 0..10_000 {
        while fed < 3000 && q.leaf_backlog(2).packets < 100 {
            q.enqueue_to(2, tp(2, 1500, t), Time(t)).unwrap();
            fed += 1;
        }
        let a_before = q.leaf_backlog(1).packets;
        match q.dequeue(Time(t)) {
            Dequeued::Packet(p) => {
                sent_b += u32::from(p.class == 2);
                // `a` emptied by drops: not by sending its last packet.
                if q.leaf_backlog(1).packets == 0 && a_before > 0 && (p.class != 1 || a_before > 1)
                {
                    emptied_by_aqm += 1;
                }
                t += p.meta.len as u64 * 8 * SEC / (10 * MBIT);
            }
            Dequeued::Empty => break,
            Dequeued::NotBefore(x) => t = x.0,
        }
        while q.take_dropped().is_some() {}
        q.check_invariants().unwrap();
    }
    assert_eq!(
        emptied_by_aqm, 1,
        "FQ-CoDel never dropped `a`'s last packets"
    );
    assert_eq!(sent_b, 3000, "b was stalled");
    assert_eq!(q.backlog().packets, 0);
    assert_eq!(q.class_state(0).unwrap().nactive, 0);
    assert!(q.stats().dropped.total().packets > 0);
}

#[test]
fn time_that_goes_back_is_taken_as_the_latest_seen() {
    let mut q = build(
        &[def("a", None).rt(lin(MBIT)).ls(lin(MBIT))],
        HfscParams::default(),
    );
    q.enqueue_to(0, tp(0, 1000, 0), Time(5 * SEC)).unwrap();
    q.enqueue_to(0, tp(0, 1000, 0), Time(SEC)).unwrap();
    assert!(matches!(q.dequeue(Time(2 * SEC)), Dequeued::Packet(_)));
    assert!(matches!(q.dequeue(Time(0)), Dequeued::Packet(_)));
    q.check_invariants().unwrap();
}

#[test]
fn drain_empties_and_the_tree_starts_again() {
    let defs = [
        def("p", None).ls(lin(10 * MBIT)),
        def("a", Some("p")).rt(lin(MBIT)).ls(lin(MBIT)),
        def("b", Some("p")).ls(lin(MBIT)).ul(lin(MBIT)),
    ];
    let mut q = build(&defs, HfscParams::default());
    for i in 0..10 {
        q.enqueue_to(1 + i % 2, tp(1 + i % 2, 500, 0), Time(0))
            .unwrap();
    }
    assert_eq!(q.drain(Time(0)).len(), 10);
    q.check_invariants().unwrap();
    q.enqueue_to(2, tp(2, 500, 0), Time(SEC)).unwrap();
    assert!(matches!(q.dequeue(Time(SEC)), Dequeued::Packet(_)));
    q.check_invariants().unwrap();
}

/// OpenBSD's upper-limit catch-up against Linux's: a class held far below its `ul` by
/// link-sharing lags its fit time; when the link frees up, Linux lets it run at link rate until
/// `myf` catches up with the clock, ALTQ holds it at `ul` at once. By hand: `a` gets 1 of 10
/// Mbit/s for 2 s (2 Mbit sent, `myf` = 2 Mbit / 5 Mbit/s = 0.4 s); alone from 2 s at 10 Mbit/s,
/// `myf = 0.4 + 2(t − 2)` reaches `t` at 3.6 s.
#[test]
fn ul_catchup_switch_by_hand() {
    let defs = [
        def("a", None).ls(lin(MBIT)).ul(lin(5 * MBIT)),
        def("b", None).ls(lin(9 * MBIT)),
    ];
    let srcs = [greedy(0, 0, 5 * SEC), greedy(1, 0, 2 * SEC)];
    let mut linux = build(&defs, HfscParams::default());
    let out = run(&mut linux, 10 * MBIT, &srcs, 5 * SEC, 997);
    assert!(near(rate(&out, 0, SEC, 2 * SEC), 1e6, 0.01, 0.0));
    assert!(near(rate(&out, 0, 2 * SEC, 3500 * MS), 10e6, 0.01, 0.0));
    assert!(near(rate(&out, 0, 3700 * MS, 5 * SEC), 5e6, 0.01, 0.0));
    let altq = HfscParams {
        ul_catchup: Some(10 * MS),
        ..Default::default()
    };
    let mut bsd = build(&defs, altq);
    let out = run(&mut bsd, 10 * MBIT, &srcs, 5 * SEC, 997);
    assert!(near(rate(&out, 0, 2100 * MS, 5 * SEC), 5e6, 0.01, 0.0));
}

/// Both ways of starting a parent's new period share alike: two classes with alternating idle
/// periods get 3:1 while both are backlogged.
#[test]
fn period_vt_switch_shares_alike() {
    let defs = [
        def("p", None).ls(lin(10 * MBIT)),
        def("a", Some("p")).ls(lin(3 * MBIT)),
        def("b", Some("p")).ls(lin(MBIT)),
    ];
    let srcs = [
        greedy(1, 0, 1000 * MS),
        greedy(2, 500 * MS, 1000 * MS),
        greedy(1, 1500 * MS, 3000 * MS),
        greedy(2, 1500 * MS, 3000 * MS),
    ];
    for period_vt in [PeriodVt::Linux, PeriodVt::OpenBsd] {
        let mut q = build(
            &defs,
            HfscParams {
                period_vt,
                ..Default::default()
            },
        );
        let out = run(&mut q, 10 * MBIT, &srcs, 3 * SEC, 991);
        let (a, b) = (
            rate(&out, 1, 1600 * MS, 3 * SEC),
            rate(&out, 2, 1600 * MS, 3 * SEC),
        );
        assert!(near(a, 7.5e6, 0.01, 0.0), "{period_vt:?}: a {a}");
        assert!(near(b, 2.5e6, 0.01, 0.0), "{period_vt:?}: b {b}");
        let a = rate(&out, 1, 600 * MS, 1000 * MS);
        assert!(near(a, 7.5e6, 0.01, 0.0), "{period_vt:?}: a {a}");
    }
}

fn curve_strategy() -> impl Strategy<Value = Option<ServiceCurve>> {
    prop_oneof![
        Just(None),
        (0u64..20_000_000, 0u64..50, 1u64..20_000_000).prop_map(|(a, d, b)| Some(sc(a, d, b))),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]
    /// Random trees, random curves (including upper limits), random arrivals and dequeue
    /// times (some going back): the sets stay in step with the classes and the books balance.
    #[test]
    fn invariants_hold_under_random_operations(
        shape in proptest::collection::vec((0usize..4, curve_strategy(), curve_strategy()), 2..9),
        ops in proptest::collection::vec((0u32..9, 64u32..1600, 0u64..3 * MS, any::<bool>()), 1..300),
    ) {
        // Class i's parent is one of the classes before it (or none); inner classes get `ls`.
        let n = shape.len();
        let mut parent = vec![None; n];
        for (i, (p, _, _)) in shape.iter().enumerate().skip(1) {
            if *p < i && *p % 2 == 0 {
                parent[i] = Some(*p as u32);
            }
        }
        let inner: Vec<bool> = (0..n).map(|i| parent.contains(&Some(i as u32))).collect();
        let specs: Vec<HfscClassSpec<Tp>> = (0..n)
            .map(|i| {
                let (_, rt, ul) = shape[i];
                let mut s = HfscClassSpec::new(&format!("c{i}"), parent[i], sc(MBIT, 5, 2 * MBIT));
                if !inner[i] {
                    s.rt = rt;
                }
                s.ul = ul.map(|u| ServiceCurve { m2: u.m2.max(1), ..u });
                s
            })
            .collect();
        let leaves: Vec<u32> = (0..n as u32).filter(|&i| !inner[i as usize]).collect();
        let mut q = Hfsc::new(HfscParams::default(), specs, Classifier::new(vec![], leaves[0])).unwrap();
        let mut t = 0u64;
        for (c, len, dt, deq) in ops {
            t = if dt < 100 { t.saturating_sub(dt) } else { t + dt };
            if deq {
                let _ = q.dequeue(Time(t));
            } else {
                let l = leaves[c as usize % leaves.len()];
                let _ = q.enqueue_to(l, tp(l, len, t), Time(t));
            }
            while q.take_dropped().is_some() {}
            prop_assert!(q.check_invariants().is_ok(), "{:?}", q.check_invariants());
        }
        let left = q.backlog().packets;
        let mut got = 0;
        for _ in 0..10_000 {
            match q.dequeue(Time(t)) {
                Dequeued::Packet(_) => got += 1,
                Dequeued::NotBefore(x) => t = x.0.max(t + 1),
                Dequeued::Empty => break,
            }
        }
        prop_assert_eq!(got, left);
        prop_assert!(q.check_invariants().is_ok());
    }
}
