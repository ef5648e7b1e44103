//! HFSC's leaf queues: enqueue into a leaf, its next packet and that packet's length, what a
//! boxed leaf drops, and draining.
//!
//! Principles: the deadline of a real-time leaf needs the length of its *next* packet (Linux
//! `qdisc_peek_len`). A FIFO is peeked in place; any other discipline cannot be, so its next
//! packet is dequeued into the class's one-packet head slot — Linux's `qdisc_peek_dequeued` —
//! and sent from there. A leaf's length is its queue plus its head. The qdisc-wide counters are
//! kept by the books around the hooks ([`crate::qdisc::discipline`]); a leaf's own drops and
//! ECN marks are added up here. A leaf becomes active when it gets its first packet and passive
//! when it has none left, whichever way it emptied ([`Hfsc::set_passive`]).
use super::*;
use crate::qdisc::{Backlog, DropReason};

impl<P: Packet> Hfsc<P> {
    /// Enqueue into leaf `class` (an inner or unknown id goes to the default class).
    pub(super) fn enqueue_class(
        &mut self,
        class: ClassId,
        pkt: P,
        now: Time,
    ) -> Result<(), Dropped<P>> {
        let c = match self.leaves.get(class as usize) {
            Some(l) if class < self.root && !matches!(l, Leaf::Inner) => class,
            _ => self.default,
        };
        let len = pkt.len();
        let was_empty = self.leaf_len(c) == 0;
        let res = match &mut self.leaves[c as usize] {
            Leaf::Fifo(q) => q.push(pkt),
            Leaf::Boxed { q, .. } => q.enqueue(pkt, now),
            Leaf::Inner => Err(Dropped {
                packet: pkt,
                reason: DropReason::QueueLimit,
            }),
        };
        if res.is_err() {
            self.cold[c as usize].drops += 1;
        }
        self.collect_victims(c);
        let has = self.leaf_len(c) > 0;
        if was_empty && has {
            self.set_active(c, len, now);
        } else if !was_empty && !has {
            // The leaf dropped what it held to take nothing: passive, once.
            self.set_passive(c);
        }
        res
    }

    /// Packets a boxed leaf dropped after accepting them, and its new ECN marks.
    pub(super) fn collect_victims(&mut self, c: u32) {
        if let Leaf::Boxed { q, .. } = &mut self.leaves[c as usize] {
            let cl = &mut self.cold[c as usize];
            while let Some(d) = q.take_dropped() {
                cl.drops += 1;
                self.books.drop_victim(d);
            }
            let marked = q.stats().marked;
            self.books.mark(marked.saturating_sub(cl.marks_seen));
            cl.marks_seen = marked;
        }
    }

    /// Packets held by leaf `c` (its queue and its head).
    pub(super) fn leaf_len(&self, c: u32) -> u64 {
        match &self.leaves[c as usize] {
            Leaf::Fifo(q) => q.len() as u64,
            Leaf::Boxed { q, head } => q.backlog().packets + head.is_some() as u64,
            Leaf::Inner => 0,
        }
    }

    /// Packets and bytes held by leaf `c`.
    pub fn leaf_backlog(&self, c: ClassId) -> Backlog {
        match self.leaves.get(c as usize) {
            Some(Leaf::Fifo(q)) => Backlog {
                packets: q.len() as u64,
                bytes: q.bytes(),
            },
            Some(Leaf::Boxed { q, head }) => {
                let mut b = q.backlog();
                if let Some(h) = head {
                    b.packets += 1;
                    b.bytes += h.len() as u64;
                }
                b
            }
            _ => Backlog::default(),
        }
    }

    /// Take leaf `c`'s next packet. `Err(None)`: it has none (a boxed leaf dropped them while
    /// asked); `Err(Some(t))`: it holds some but will not give one before `t`.
    pub(super) fn take(&mut self, c: u32, now: Time) -> Result<P, Option<u64>> {
        let r = match &mut self.leaves[c as usize] {
            Leaf::Fifo(q) => q.pop().ok_or(None),
            Leaf::Boxed { q, head } => match head.take() {
                Some(p) => Ok(p),
                None => match q.dequeue(now) {
                    Dequeued::Packet(p) => Ok(p),
                    Dequeued::Empty => Err(None),
                    Dequeued::NotBefore(t) => Err(Some(t.0)),
                },
            },
            Leaf::Inner => Err(None),
        };
        self.collect_victims(c);
        r
    }

    /// The length of leaf `c`'s next packet, taking it into the head slot for a boxed leaf.
    /// `None` when the leaf has no packet it can give now.
    pub(super) fn peek_len(&mut self, c: u32, now: Time) -> Option<u32> {
        let r = match &mut self.leaves[c as usize] {
            Leaf::Fifo(q) => q.peek().map(|p| p.len()),
            Leaf::Boxed { q, head } => {
                if head.is_none() {
                    if let Dequeued::Packet(p) = q.dequeue(now) {
                        *head = Some(p);
                    }
                }
                head.as_ref().map(|p| p.len())
            }
            Leaf::Inner => None,
        };
        self.collect_victims(c);
        r
    }

    /// Every packet held by leaf `c`, in order, leaving it empty; what a leaf qdisc drops while
    /// draining is counted. Not counted as dequeued (the caller decides).
    pub(super) fn drain_leaf(&mut self, c: u32, now: Time) -> Vec<P> {
        let pkts: Vec<P> = match &mut self.leaves[c as usize] {
            Leaf::Fifo(q) => std::iter::from_fn(|| q.pop()).collect(),
            Leaf::Boxed { q, head } => head.take().into_iter().chain(q.drain(now)).collect(),
            Leaf::Inner => Vec::new(),
        };
        self.collect_victims(c);
        pkts
    }
}
