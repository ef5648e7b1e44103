//! HFSC's leaf queues: enqueue into a leaf, its next packet and that packet's length, what a
//! boxed leaf drops, and draining.
//!
//! Principles: the deadline of a real-time leaf needs the length of its *next* packet (Linux
//! `qdisc_peek_len`). A FIFO is inline — its packets in the shared packet pool (`crate::pool`),
//! its ends, length and limit in the class record, as HTB's — and peeked in place (a `pfifo`
//! also refuses a packet that would carry its bytes beyond `u32::MAX`, as HTB's); any other
//! discipline cannot be peeked, so its next packet is dequeued into the class's one-packet head
//! slot — Linux's `qdisc_peek_dequeued` — and sent from there. A leaf's length is its queue plus its head. The qdisc-wide counters are
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
        let c = match self.classes.get(class as usize) {
            Some(cl) if class < self.root && cl.kind != Kind::Inner => class,
            _ => self.default,
        };
        let len = pkt.len();
        let was_empty = self.leaf_len(c) == 0;
        let cl = &mut self.classes[c as usize];
        let res = match cl.kind {
            Kind::Pfifo | Kind::Bfifo => {
                let q = &mut cl.q;
                let full = if cl.kind == Kind::Bfifo {
                    (q.bytes as u64 + len as u64 > cl.limit as u64).then_some(DropReason::ByteLimit)
                } else {
                    (q.len >= cl.limit || q.bytes_full(len)).then_some(DropReason::QueueLimit)
                };
                match full {
                    Some(reason) => Err(Dropped {
                        packet: pkt,
                        reason,
                    }),
                    None => {
                        self.pool.push_back(q, pkt);
                        Ok(())
                    }
                }
            }
            _ => match &mut self.leaves[c as usize] {
                Leaf::Boxed { q, .. } => q.enqueue(pkt, now),
                _ => Err(Dropped {
                    packet: pkt,
                    reason: DropReason::QueueLimit,
                }),
            },
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
    #[inline]
    pub(super) fn collect_victims(&mut self, c: u32) {
        if self.classes[c as usize].kind == Kind::Boxed {
            self.collect_boxed_victims(c);
        }
    }

    /// [`Self::collect_victims`] for a boxed leaf.
    #[inline(never)]
    fn collect_boxed_victims(&mut self, c: u32) {
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
    #[inline]
    pub(super) fn leaf_len(&self, c: u32) -> u64 {
        let cl = &self.classes[c as usize];
        match cl.kind {
            Kind::Pfifo | Kind::Bfifo => cl.q.len as u64,
            Kind::Boxed => match &self.leaves[c as usize] {
                Leaf::Boxed { q, head } => q.backlog().packets + head.is_some() as u64,
                _ => 0,
            },
            Kind::Inner => 0,
        }
    }

    /// Packets and bytes held by leaf `c`.
    pub fn leaf_backlog(&self, c: ClassId) -> Backlog {
        match self.leaves.get(c as usize) {
            Some(Leaf::Fifo(_)) => {
                let q = &self.classes[c as usize].q;
                Backlog {
                    packets: q.len as u64,
                    bytes: q.bytes as u64,
                }
            }
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
        let cl = &mut self.classes[c as usize];
        if matches!(cl.kind, Kind::Pfifo | Kind::Bfifo) {
            return self.pool.pop_front(&mut cl.q).ok_or(None);
        }
        let r = match &mut self.leaves[c as usize] {
            Leaf::Fifo(_) => Err(None),
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
        let cl = &self.classes[c as usize];
        if matches!(cl.kind, Kind::Pfifo | Kind::Bfifo) {
            return self.pool.front(&cl.q).map(|p| p.len());
        }
        let r = match &mut self.leaves[c as usize] {
            Leaf::Fifo(_) => None,
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
        let (pool, q) = (&mut self.pool, &mut self.classes[c as usize].q);
        let pkts: Vec<P> = match &mut self.leaves[c as usize] {
            Leaf::Fifo(_) => std::iter::from_fn(|| pool.pop_front(q)).collect(),
            Leaf::Boxed { q, head } => head.take().into_iter().chain(q.drain(now)).collect(),
            Leaf::Inner => Vec::new(),
        };
        self.collect_victims(c);
        pkts
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{def, lin, specs, tp, MBIT};
    use super::*;
    use crate::classify::FilterSpec;
    use crate::leaf::LeafSpec;

    /// A `pfifo` of 3 packets and a `bfifo` of 1,000 bytes, inline: they refuse what `pfifo`
    /// and `bfifo` refuse, with their reasons, give their packets back in order and keep the
    /// pool and the sets in step throughout.
    #[test]
    fn inline_fifos_refuse_at_their_limits_and_keep_order() {
        let defs = [
            def("p", None).ls(lin(10 * MBIT)),
            def("a", Some("p")).rt(lin(MBIT)).ls(lin(MBIT)),
            def("b", Some("p")).ls(lin(MBIT)),
        ];
        let mut s = specs(&defs);
        s[1].leaf = LeafSpec::Fifo(FifoLimit::Packets(3));
        s[2].leaf = LeafSpec::Fifo(FifoLimit::Bytes(1000));
        let mut q = Hfsc::new(
            HfscParams::default(),
            s,
            Classifier::new(Vec::<FilterSpec>::new(), 2),
        )
        .expect("a valid tree");
        for born in 0..3 {
            q.enqueue_to(1, tp(1, 100, born), Time(0))
                .expect("room for 3");
        }
        let r = q
            .enqueue_to(1, tp(1, 100, 3), Time(0))
            .map_err(|d| d.reason);
        assert_eq!(r, Err(DropReason::QueueLimit));
        q.enqueue_to(2, tp(2, 600, 10), Time(0))
            .expect("600 of 1000 bytes");
        let r = q
            .enqueue_to(2, tp(2, 401, 11), Time(0))
            .map_err(|d| d.reason);
        assert_eq!(r, Err(DropReason::ByteLimit));
        q.enqueue_to(2, tp(2, 400, 12), Time(0))
            .expect("exactly 1000 bytes");
        q.check_invariants().expect("in step after the enqueues");
        let b = q.leaf_backlog(2);
        assert_eq!((b.packets, b.bytes), (2, 1000));
        let mut order = Vec::new();
        let mut t = 0;
        loop {
            match q.dequeue(Time(t)) {
                Dequeued::Packet(p) => order.push((p.class, p.born)),
                Dequeued::NotBefore(x) => t = x.0.max(t + 1),
                Dequeued::Empty => break,
            }
            q.check_invariants().expect("in step after a dequeue");
        }
        let of = |c: u32| -> Vec<u64> { order.iter().filter(|o| o.0 == c).map(|o| o.1).collect() };
        assert_eq!(of(1), [0, 1, 2]);
        assert_eq!(of(2), [10, 12]);
        assert_eq!(q.backlog().packets, 0);
    }
}
