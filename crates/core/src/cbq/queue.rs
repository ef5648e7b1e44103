//! CBQ's leaf queues: enqueue into a leaf (a FIFO or a boxed qdisc), its backlog, and the
//! collection of what a boxed leaf drops.
//!
//! Principles: the qdisc-wide counters are kept by the books around the hooks
//! ([`crate::qdisc::discipline`]); here a leaf's own drop count and its ECN marks are added up,
//! and a leaf that gets its first packet becomes active (its ring, the backlog sets of its
//! ancestors, the top-level cutoff on arrival as ALTQ's `rmc_queue_packet` lowers it). Linux
//! net/sched/sch_cbq.c `cbq_enqueue`, `cbq_activate_class`. A boxed leaf with per-flow state
//! that runs empty joins the idle list, whose oldest members `reclaim_idle` releases after the
//! hold (`crate::qdisc::lazy`).
use super::*;

impl<P: Packet> Cbq<P> {
    /// Enqueue into a given leaf class, bypassing the classifier. An unknown or inner class id
    /// falls back to the default class. O(d log n).
    pub fn enqueue_to(&mut self, class: ClassId, pkt: P, now: Time) -> Result<(), Dropped<P>> {
        let len = pkt.len();
        self.books.offer(len);
        let r = self.enqueue_to_inner(class, pkt, now);
        self.books.settle(len, &r);
        r
    }

    /// [`Self::enqueue_to`] without the qdisc-wide counters (its caller keeps them).
    pub(super) fn enqueue_to_inner(
        &mut self,
        class: ClassId,
        pkt: P,
        now: Time,
    ) -> Result<(), Dropped<P>> {
        let c = match self.classes.get(class as usize) {
            Some(cl) if !matches!(cl.leaf, Leaf::Inner) => class,
            _ => self.default,
        };
        let was_empty = self.leaf_backlog(c).packets == 0;
        if was_empty {
            self.idle.busy(c);
        }
        let res = match &mut self.classes[c as usize].leaf {
            Leaf::Fifo(q) => q.push(pkt),
            Leaf::Boxed(b) => b.enqueue(pkt, now),
            Leaf::Inner => Err(Dropped {
                packet: pkt,
                reason: DropReason::QueueLimit,
            }),
        };
        if res.is_err() {
            self.classes[c as usize].drops += 1;
        }
        let out = res;
        self.collect_victims(c);
        self.note_idle(c, now);
        if was_empty && self.leaf_backlog(c).packets > 0 {
            self.activate(c);
        }
        if self.params.guideline == Guideline::TopLevel {
            self.cutoff_on_arrival(c, now.0);
        }
        out
    }

    /// Packets a boxed leaf dropped after accepting them.
    pub(super) fn collect_victims(&mut self, c: u32) {
        let cl = &mut self.classes[c as usize];
        if let Leaf::Boxed(b) = &mut cl.leaf {
            while let Some(d) = b.take_dropped() {
                cl.drops += 1;
                self.books.drop_victim(d);
            }
            let marked = b.stats().marked;
            self.books.mark(marked.saturating_sub(cl.marks_seen));
            cl.marks_seen = marked;
        }
    }

    /// A boxed leaf with per-flow state that is empty joins the idle list (`crate::qdisc::lazy`).
    #[inline]
    pub(super) fn note_idle(&mut self, c: u32, now: Time) {
        if let Leaf::Boxed(b) = &self.classes[c as usize].leaf {
            if b.backlog().packets == 0 {
                self.idle.went_idle(c, now.0);
            }
        }
    }

    /// Packets and bytes queued in a leaf class (zero for inner classes).
    pub fn leaf_backlog(&self, c: ClassId) -> Backlog {
        match self.classes.get(c as usize).map(|c| &c.leaf) {
            Some(Leaf::Fifo(q)) => Backlog {
                packets: q.len() as u64,
                bytes: q.bytes(),
            },
            Some(Leaf::Boxed(b)) => b.backlog(),
            _ => Backlog::default(),
        }
    }
}
