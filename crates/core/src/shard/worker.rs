//! One shard: an [`Htb`] behind a [`Gate`], owned by one thread.
//!
//! Principles: the shard is a [`Qdisc`] of its own (its counters and victims are kept by the same
//! wrapper as every discipline, [`crate::qdisc::discipline`]), so a worker thread drives it like
//! any scheduler: `enqueue`/`enqueue_to` its packets, `dequeue(now)` until `NotBefore`. Before
//! the HTB may send, the gate must be open (it holds tokens of the shared root, or gets a lease);
//! each packet sent is charged to it. `tick(now)` only mints (and deposits the excess): a driver
//! calls it on an idle shard so that its unused share reaches the others (see the bound's `T` in
//! [`super`]). Packets offered through [`Qdisc::enqueue`] go through the shard's classifier,
//! which knows only its default class: drivers steer with [`Shard::enqueue_to`] and the
//! [`super::ShardMap`].

use super::pool::Gate;
use crate::classify::ClassId;
use crate::htb::Htb;
use crate::packet::Packet;
use crate::qdisc::{Books, ClassView, Dequeued, Discipline, Dropped, Qdisc};
use crate::units::{Rate, Time};

/// One shard of a [`super::ShardedHtb`] or of a multi-threaded driver. `Send`: it moves to the
/// thread that owns it; the only state it shares is its gate's pool, behind an `Arc`.
pub struct Shard<P: Packet> {
    index: usize,
    htb: Htb<P>,
    gate: Option<Gate>,
    /// The shared root's rate (for the gate's retry interval).
    root_rate: Option<Rate>,
    books: Books<P>,
}

impl<P: Packet> Shard<P> {
    pub(super) fn new(
        index: usize,
        htb: Htb<P>,
        gate: Option<Gate>,
        root_rate: Option<Rate>,
    ) -> Self {
        Shard {
            index,
            htb,
            gate,
            root_rate,
            books: Books::new(),
        }
    }

    /// This shard's number.
    pub fn index(&self) -> usize {
        self.index
    }

    /// The shard's HTB (its classes under their local ids).
    pub fn htb(&self) -> &Htb<P> {
        &self.htb
    }

    /// The gate, when the shard shares a root.
    pub fn gate(&self) -> Option<&Gate> {
        self.gate.as_ref()
    }

    /// Mint what the time since the last poll brings and deposit what exceeds the lease.
    #[inline]
    pub fn tick(&mut self, now: Time) {
        if let Some(g) = &mut self.gate {
            g.refill(now);
        }
    }

    /// Enqueue into local class `class` (unknown or inner: the shard's default class).
    #[inline]
    pub fn enqueue_to(&mut self, class: ClassId, pkt: P, now: Time) -> Result<(), Dropped<P>> {
        let len = pkt.len();
        self.books.offer(len);
        let r = self.htb.enqueue_to(class, pkt, now);
        self.books.settle(len, &r);
        self.collect();
        r
    }

    /// Enqueue a burst, packet `i` into local class `classes[i]`, with HTB's prefetching
    /// ([`Htb::enqueue_burst_to`]); refused packets go to `refused`. Returns how many were
    /// accepted.
    pub fn enqueue_burst_to(
        &mut self,
        classes: &[ClassId],
        pkts: &mut Vec<P>,
        now: Time,
        refused: &mut Vec<Dropped<P>>,
    ) -> usize {
        let (n0, b0): (u64, u64) = (pkts.len() as u64, pkts.iter().map(|p| p.len() as u64).sum());
        let r0 = refused.len();
        let ok = self.htb.enqueue_burst_to(classes, pkts, now, refused);
        let st = self.books.stats_mut();
        let (mut rn, mut rb) = (0u64, 0u64);
        for d in &refused[r0..] {
            st.on_refuse(d.reason, d.packet.len());
            rn += 1;
            rb += d.packet.len() as u64;
        }
        let (an, ab): (u64, u64) = (n0 - rn, b0 - rb);
        st.enqueued.packets += an;
        st.enqueued.bytes += ab;
        st.backlog.packets += an;
        st.backlog.bytes += ab;
        self.collect();
        ok
    }

    /// Move what the HTB dropped after accepting it into our books.
    #[inline]
    fn collect(&mut self) {
        while let Some(d) = self.htb.take_dropped() {
            self.books.drop_victim(d);
        }
    }
}

impl<P: Packet> Discipline<P> for Shard<P> {
    fn books(&self) -> &Books<P> {
        &self.books
    }
    fn books_mut(&mut self) -> &mut Books<P> {
        &mut self.books
    }

    fn enqueue_inner(&mut self, pkt: P, now: Time) -> Result<(), Dropped<P>> {
        let r = self.htb.enqueue(pkt, now);
        self.collect();
        r
    }

    fn dequeue_inner(&mut self, now: Time) -> Dequeued<P> {
        self.tick(now);
        if self.htb.backlog().packets == 0 {
            return Dequeued::Empty;
        }
        if let Some(g) = &mut self.gate {
            if !g.open() {
                let retry = now
                    .0
                    .saturating_add(g.retry_ns(self.root_rate.unwrap_or(Rate(0))));
                let t = g.opens_at(now).map_or(retry, |t| t.0.min(retry));
                return Dequeued::NotBefore(Time(t.max(now.0)));
            }
        }
        let r = self.htb.dequeue(now);
        self.collect();
        if let (Dequeued::Packet(p), Some(g)) = (&r, &mut self.gate) {
            g.charge(p.len());
        }
        r
    }

    fn kind_inner(&self) -> &'static str {
        "htb"
    }

    fn drain_inner(&mut self, now: Time) -> Vec<P> {
        let out = self.htb.drain(now);
        self.collect();
        out
    }

    fn visit_classes_inner(&self, f: &mut dyn FnMut(&ClassView<'_>)) {
        self.htb.visit_classes(f)
    }

    fn extra_stats_inner(&self, f: &mut dyn FnMut(&'static str, f64)) {
        self.htb.extra_stats(f)
    }

    fn reclaim_idle_inner(&mut self, now: Time, budget: u32) -> u32 {
        self.htb.reclaim_idle(now, budget)
    }

    fn as_any_inner(&mut self) -> Option<&mut dyn std::any::Any> {
        Some(self)
    }

    /// From another shard (a reload of a multi-threaded driver): the HTBs adopt class by class
    /// ([`Htb::adopt`]: kept classes keep queue, counters and tokens; the packets of classes the
    /// new shard does not have are dropped and counted), and the shard's books continue the old
    /// one's. The gate is the new one's (a reload starts the shares afresh).
    fn adopt_inner(
        &mut self,
        old: &mut dyn Qdisc<P>,
        now: Time,
    ) -> Option<crate::qdisc::adopt::AdoptReport> {
        let o = old.as_any_mut()?.downcast_mut::<Shard<P>>()?;
        let r = self.htb.adopt(&mut o.htb, now);
        o.collect();
        self.books.take_over(&mut o.books);
        self.collect();
        Some(r)
    }
}
