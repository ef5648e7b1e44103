//! Accounting is built in: a toy discipline that implements only the hooks of `Discipline` — it
//! refuses, head-drops to make room, drops and ECN-marks at dequeue and throttles — gets exact
//! counters, collected victims and conservation from the provided `Qdisc` methods, through
//! enqueue, dequeue, bursts, drain and adopt. The toy tallies what it did on its own; the test
//! checks the provided counters against those tallies and against the packets seen outside.

use std::collections::VecDeque;

use linkshare_core::qdisc::fifo::Fifo;
use linkshare_core::qdisc::{Books, Discipline, DropReason};
use linkshare_core::{Dequeued, Dropped, Packet, PacketMeta, Qdisc, Time};
use proptest::prelude::*;

/// What the toy did, counted by the toy itself (not by the books).
#[derive(Default, Debug)]
struct Tally {
    refused: u64,
    head_drops: u64,
    aqm_drops: u64,
    marks: u64,
}

/// A FIFO with a hard limit (refuses), a soft limit (accepts, then head-drops the oldest), and a
/// dequeue that drops every 5th packet it looks at, marks every 3rd, and is closed until `open`.
struct Toy {
    q: VecDeque<PacketMeta>,
    hard: usize,
    soft: usize,
    looked: u64,
    open: u64,
    tally: Tally,
    books: Books<PacketMeta>,
}

impl Toy {
    fn new(hard: usize, soft: usize, open: u64) -> Self {
        Toy {
            q: VecDeque::new(),
            hard,
            soft,
            looked: 0,
            open,
            tally: Tally::default(),
            books: Books::new(),
        }
    }
}

impl Discipline<PacketMeta> for Toy {
    fn books(&self) -> &Books<PacketMeta> {
        &self.books
    }
    fn books_mut(&mut self) -> &mut Books<PacketMeta> {
        &mut self.books
    }
    fn enqueue_inner(&mut self, pkt: PacketMeta, _now: Time) -> Result<(), Dropped<PacketMeta>> {
        if self.q.len() >= self.hard {
            self.tally.refused += 1;
            return Err(Dropped {
                packet: pkt,
                reason: DropReason::QueueLimit,
            });
        }
        self.q.push_back(pkt);
        while self.q.len() > self.soft {
            // The arriving packet itself when `soft` is 0.
            let Some(victim) = self.q.pop_front() else {
                break;
            };
            self.tally.head_drops += 1;
            self.books.drop(victim, DropReason::Overflow);
        }
        Ok(())
    }
    fn dequeue_inner(&mut self, now: Time) -> Dequeued<PacketMeta> {
        if !self.q.is_empty() && now.0 < self.open {
            return Dequeued::NotBefore(Time(self.open));
        }
        while let Some(mut p) = self.q.pop_front() {
            self.looked += 1;
            if self.looked.is_multiple_of(5) {
                self.tally.aqm_drops += 1;
                self.books.drop(p, DropReason::Aqm);
                continue;
            }
            if self.looked.is_multiple_of(3) && p.mark_ce() {
                self.tally.marks += 1;
                self.books.mark(1);
            }
            return Dequeued::Packet(p);
        }
        Dequeued::Empty
    }
    /// Everything, ignoring the gate; the AQM still runs.
    fn drain_inner(&mut self, now: Time) -> Vec<PacketMeta> {
        let open = std::mem::replace(&mut self.open, 0);
        let mut out = Vec::new();
        while let Dequeued::Packet(p) = self.dequeue_inner(now) {
            out.push(p);
        }
        self.open = open;
        out
    }
    fn kind_inner(&self) -> &'static str {
        "toy"
    }
}

#[derive(Clone, Debug)]
enum Op {
    Enqueue(u32),
    Burst(Vec<u32>),
    Dequeue,
    DequeueBurst(usize),
    Tick(u64),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (40u32..1600).prop_map(Op::Enqueue),
        1 => prop::collection::vec(40u32..1600, 0..8).prop_map(Op::Burst),
        3 => Just(Op::Dequeue),
        1 => (0usize..6).prop_map(Op::DequeueBurst),
        1 => (0u64..2_000).prop_map(Op::Tick),
    ]
}

fn pkt(len: u32) -> PacketMeta {
    PacketMeta {
        len,
        // ECN-capable (ECT(0)), so marks succeed.
        tos: 0b10,
        ..Default::default()
    }
}

/// Outside view: what went in, came out, and was handed back as dropped.
#[derive(Default)]
struct Seen {
    offered: u64,
    offered_bytes: u64,
    refused: u64,
    sent: u64,
    sent_bytes: u64,
    collected: u64,
    not_before: u64,
}

fn collect(q: &mut dyn Qdisc<PacketMeta>, seen: &mut Seen) {
    while let Some(d) = q.take_dropped() {
        assert!(matches!(d.reason, DropReason::Overflow | DropReason::Aqm));
        seen.collected += 1;
    }
}

fn check(toy: &Toy, seen: &Seen) -> Result<(), TestCaseError> {
    let s = toy.stats();
    s.check_conservation().map_err(TestCaseError::fail)?;
    prop_assert_eq!(s.enqueued.packets + s.refused.total().packets, seen.offered);
    prop_assert_eq!(
        s.enqueued.bytes + s.refused.total().bytes,
        seen.offered_bytes
    );
    prop_assert_eq!(
        s.refused.get(DropReason::QueueLimit).packets,
        toy.tally.refused
    );
    prop_assert_eq!(s.refused.total().packets, seen.refused);
    prop_assert_eq!(
        s.dropped.get(DropReason::Overflow).packets,
        toy.tally.head_drops
    );
    prop_assert_eq!(s.dropped.get(DropReason::Aqm).packets, toy.tally.aqm_drops);
    prop_assert_eq!(s.dropped.total().packets, seen.collected);
    prop_assert_eq!(s.marked, toy.tally.marks);
    prop_assert_eq!(
        (s.dequeued.packets, s.dequeued.bytes),
        (seen.sent, seen.sent_bytes)
    );
    prop_assert_eq!(s.overlimits, seen.not_before);
    prop_assert_eq!(s.backlog.packets, toy.q.len() as u64);
    prop_assert_eq!(
        s.backlog.bytes,
        toy.q.iter().map(|p| p.len() as u64).sum::<u64>()
    );
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Every counter of the provided methods matches what the toy did and what left it, after
    /// every call; then a drain and an adoption by a FIFO keep every packet accounted for.
    #[test]
    fn hooks_only_discipline_is_accounted(
        hard in 1usize..12,
        soft in 0usize..12,
        open in 0u64..3_000,
        ops in prop::collection::vec(op(), 1..200),
    ) {
        let mut toy = Toy::new(hard, soft, open);
        let mut seen = Seen::default();
        let mut now = 0u64;
        for o in ops {
            match o {
                Op::Enqueue(len) => {
                    seen.offered += 1;
                    seen.offered_bytes += len as u64;
                    if toy.enqueue(pkt(len), Time(now)).is_err() {
                        seen.refused += 1;
                    }
                }
                Op::Burst(lens) => {
                    seen.offered += lens.len() as u64;
                    seen.offered_bytes += lens.iter().map(|&l| l as u64).sum::<u64>();
                    let mut pkts: Vec<PacketMeta> = lens.iter().map(|&l| pkt(l)).collect();
                    let mut refused = Vec::new();
                    let ok = toy.enqueue_burst(&mut pkts, Time(now), &mut refused);
                    prop_assert_eq!(ok + refused.len(), lens.len());
                    seen.refused += refused.len() as u64;
                }
                Op::Dequeue => match toy.dequeue(Time(now)) {
                    Dequeued::Packet(p) => {
                        seen.sent += 1;
                        seen.sent_bytes += p.len() as u64;
                    }
                    Dequeued::NotBefore(_) => seen.not_before += 1,
                    Dequeued::Empty => {}
                },
                Op::DequeueBurst(max) => {
                    let mut out = Vec::new();
                    match toy.dequeue_burst(Time(now), max, &mut out) {
                        Dequeued::Packet(n) => prop_assert_eq!(n, out.len()),
                        Dequeued::NotBefore(_) => seen.not_before += 1,
                        Dequeued::Empty => {}
                    }
                    seen.sent += out.len() as u64;
                    seen.sent_bytes += out.iter().map(|p| p.len() as u64).sum::<u64>();
                }
                Op::Tick(dt) => now += dt,
            }
            collect(&mut toy, &mut seen);
            check(&toy, &seen)?;
        }

        // A drain ignores the gate; what the toy drops on the way is collected too.
        let backlog = toy.backlog();
        let drained = toy.drain(Time(now));
        collect(&mut toy, &mut seen);
        seen.sent += drained.len() as u64;
        seen.sent_bytes += drained.iter().map(|p| p.len() as u64).sum::<u64>();
        check(&toy, &seen)?;
        prop_assert_eq!(toy.backlog().packets, 0);
        prop_assert!(drained.len() as u64 <= backlog.packets);

        // Adoption the other way: a FIFO takes over a toy's packets and continues its counters.
        let mut old = Toy::new(hard, soft.max(1), 0);
        for i in 0..hard as u32 {
            let _ = old.enqueue(pkt(100 + i), Time(now));
        }
        while old.take_dropped().is_some() {}
        let queued = old.backlog().packets;
        let mut new = Fifo::pfifo(hard as u32);
        let report = new.adopt(&mut old, Time(now));
        let mut lost = 0;
        while old.take_dropped().is_some() {
            lost += 1;
        }
        prop_assert_eq!(report.moved_packets + report.dropped_packets + lost, queued);
        new.stats().check_conservation().map_err(TestCaseError::fail)?;
        prop_assert_eq!(new.backlog().packets, report.moved_packets);
    }
}
