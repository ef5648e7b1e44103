//! HTB's leaf queues: enqueue into a leaf, the inline FIFOs threaded through the shared packet
//! pool, boxed leaf qdiscs and the collection of what they drop.
//!
//! Principles: a leaf's queue is an inline FIFO (no allocation per class: its packets live in one
//! pool shared by every leaf, linked first to last through `Slot::next`, the leaf's record
//! holding both ends) or a boxed [`Qdisc`]; a leaf is
//! activated when it gets its first packet and deactivated when it runs empty, which is all the
//! rest of the scheduler needs to know about queues (Linux net/sched/sch_htb.c `htb_enqueue`,
//! `htb_activate`, `htb_deactivate`). Packets a boxed leaf drops after accepting them are
//! reported to the books here, with the class's drop count and its ECN marks, so a parent never
//! loses a child's accounting.
use super::*;
use crate::prefetch::enqueue_each;

impl<P: Packet> Htb<P> {
    /// Enqueue into a given leaf class, bypassing the classifier. An unknown or inner class id
    /// falls back to the default class.
    #[inline]
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
            Some(cl) if cl.is_leaf() => class,
            _ => self.default,
        };
        if self.adopting.is_some() {
            // A class is taken over before anything touches it (`adopt`).
            self.adopt_on_demand(c, now);
        }
        let len = pkt.len();
        let cl = &self.classes[c as usize];
        let kind = cl.kind;
        let was_empty = cl.q.len == 0;
        self.warmth.observe(cl.t_c, now.0);
        if len > self.profiles[cl.profile as usize].burst {
            self.count_giant(c);
        }
        if kind != LeafKind::Boxed {
            // An inline FIFO: its length is the leaf's backlog and it drops nothing later.
            return match self.fifo_push(c, pkt) {
                Ok(()) => {
                    if was_empty {
                        self.activate_leaf(c);
                    }
                    Ok(())
                }
                Err(d) => {
                    let k = &mut self.cold[c as usize];
                    k.drops = k.drops.wrapping_add(1);
                    Err(d)
                }
            };
        }
        let was_empty = self.leaf_backlog(c).packets == 0;
        let b = self.classes[c as usize].boxed();
        if was_empty {
            // Its per-flow state is (re)built by this enqueue if it had been released.
            self.idle.busy(b as u32);
        }
        let r = match self.boxed[b].enqueue(pkt, now) {
            Ok(()) => {
                if was_empty {
                    self.activate_leaf(c);
                }
                self.collect_victims(c);
                Ok(())
            }
            Err(d) => {
                let k = &mut self.cold[c as usize];
                k.drops = k.drops.wrapping_add(1);
                self.collect_victims(c);
                Err(d)
            }
        };
        if self.boxed[b].backlog().packets == 0 {
            self.idle.went_idle(b as u32, now.0);
        }
        r
    }

    /// Enqueue a burst: packet `i` of `pkts` into leaf `classes[i]` (as [`Self::enqueue_to`]),
    /// leaving `pkts` empty; refused packets go to `refused`. Returns how many were accepted.
    ///
    /// When prefetching pays (a tree of at least `PREFETCH_MIN` classes whose traffic's working
    /// set is out of the caches, `warmth`), before enqueuing anything it prefetches
    /// the class record and counters of every leaf, then each leaf's queue's last slot and, for
    /// a leaf that is idle (it will be activated, and served soon after), its parent's record
    /// and counters, so a burst of `k` packets into cold classes waits for about one round of
    /// cache misses instead of `k` (and the dequeue and charge that follow find those lines in
    /// cache). A leaf already backlogged is served when the round robin reaches it, which
    /// prefetches for itself (`dequeue_tree`), so its parent is not fetched twice. This is what
    /// DPDK's `rte_sched_port_enqueue` does with prefetches. A smaller tree's records stay in
    /// cache, where the hints would only cost their instructions.
    pub fn enqueue_burst_to(
        &mut self,
        classes: &[ClassId],
        pkts: &mut Vec<P>,
        now: Time,
        refused: &mut Vec<Dropped<P>>,
    ) -> usize {
        if self.warmth.prefetch() {
            self.prefetch_burst(classes);
        } else if self.warmth.large() {
            self.prefetch_parents(classes);
        }
        let default = self.default;
        enqueue_each(classes, pkts, default, refused, |c, p| {
            self.enqueue_to(c, p, now)
        })
    }

    /// The parents of a burst's idle leaves, which their first dequeue will charge: kept in a
    /// large tree even when the traffic's leaves are in L2, for a thousand busy leaves in a
    /// thousand different pipes whose records miss L1 (1M configured, 1,024 active, spread, no
    /// backlog: 96.7 against 108.9 ns without it, minimum of 5 interleaved runs; the other
    /// layouts within the VM's noise; docs/benchmarks-history.md, "Prefetching only where it pays").
    fn prefetch_parents(&self, classes: &[ClassId]) {
        for &c in classes {
            if let Some(cl) = self.classes.get(c as usize) {
                if cl.active == 0 {
                    self.prefetch_record(cl.parent);
                }
            }
        }
    }

    /// The prefetches of [`Self::enqueue_burst_to`] (when `warmth` says they pay).
    fn prefetch_burst(&self, classes: &[ClassId]) {
        for &c in classes {
            if let Some(cl) = self.classes.get(c as usize) {
                prefetch(cl);
            }
        }
        let far = self.classes.len() >= PREFETCH_ROW_WORDS_MIN;
        for &c in classes {
            if let Some(cl) = self.classes.get(c as usize) {
                if cl.active == 0 {
                    // Activated now and served soon: its counters too (a backlogged leaf's
                    // are charged only when the round robin reaches it, which prefetches them).
                    if let Some(k) = self.cold.get(c as usize) {
                        prefetch(k);
                    }
                    self.prefetch_record(cl.parent);
                    if far && cl.mode == ClassMode::CanSend && cl.level == 0 {
                        // Hooking it into its row sets its bit: that word of the row's bitmap.
                        let prio = self.profiles.get(cl.profile as usize).map_or(0, |p| p.prio);
                        if let Some(w) = self
                            .row_bits
                            .get(Self::row_id(0, prio))
                            .and_then(|b| b.word_of(c))
                        {
                            prefetch(w);
                        }
                    }
                }
                if cl.kind != LeafKind::Boxed {
                    if let Some(slot) = self.pool.get(cl.q.tail) {
                        prefetch(slot);
                    }
                }
            }
        }
    }

    /// Every packet queued at leaf `c`, in order, leaving the leaf empty and inactive. What a leaf
    /// qdisc drops while draining (CoDel's AQM still runs) is counted and goes to `victims`.
    pub(super) fn drain_leaf(&mut self, c: u32, now: Time) -> Vec<P> {
        let mut out = Vec::new();
        if self.classes[c as usize].kind == LeafKind::Boxed {
            let b = self.classes[c as usize].boxed();
            out = self.boxed[b].drain(now);
            self.collect_victims(c);
            self.idle.went_idle(b as u32, now.0);
        } else {
            while let Some(p) = self.fifo_pop(c) {
                out.push(p);
            }
        }
        self.deactivate_leaf(c);
        out
    }

    /// Move packets a leaf qdisc dropped after accepting them into our outbox, with counters.
    #[inline]
    pub(super) fn collect_victims(&mut self, c: u32) {
        if self.classes[c as usize].kind == LeafKind::Boxed {
            self.collect_boxed_victims(c);
        }
    }

    /// [`Self::collect_victims`] for a leaf with a boxed qdisc.
    #[inline(never)]
    pub(super) fn collect_boxed_victims(&mut self, c: u32) {
        let cl = &mut self.classes[c as usize];
        let k = &mut self.cold[c as usize];
        let q = &mut self.boxed[cl.boxed()];
        while let Some(d) = q.take_dropped() {
            k.drops = k.drops.wrapping_add(1);
            self.books.drop_victim(d);
        }
        let seen = &mut self.marks_seen[cl.boxed()];
        let marked = q.stats().marked;
        self.books.mark(marked.saturating_sub(*seen));
        *seen = marked;
        let empty = q.backlog().packets == 0;
        if empty && cl.active != 0 {
            self.deactivate_leaf(c);
        }
    }

    /// Tail-drop enqueue into a leaf's inline FIFO. O(1).
    pub(super) fn fifo_push(&mut self, c: u32, pkt: P) -> Result<(), Dropped<P>> {
        let len = pkt.len();
        let cl = &self.classes[c as usize];
        let q = cl.q;
        let limit = self.profiles[cl.profile as usize].limit;
        let full = match cl.kind {
            LeafKind::Bfifo => {
                (q.bytes as u64 + len as u64 > limit as u64).then_some(DropReason::ByteLimit)
            }
            _ => (q.len >= limit || q.bytes_full(len)).then_some(DropReason::QueueLimit),
        };
        if let Some(reason) = full {
            return Err(Dropped {
                packet: pkt,
                reason,
            });
        }
        // The new slot follows the last (or is the first of an empty queue), in its line if
        // there is room (`pool`).
        self.pool.push_back(&mut self.classes[c as usize].q, pkt);
        Ok(())
    }

    /// Dequeue from a leaf's inline FIFO: reads and frees the first slot alone. O(1).
    pub(super) fn fifo_pop(&mut self, c: u32) -> Option<P> {
        let cl = &mut self.classes[c as usize];
        if cl.q.head == NIL || !matches!(cl.kind, LeafKind::Pfifo | LeafKind::Bfifo) {
            return None;
        }
        let pkt = self.pool.pop_front(&mut cl.q)?;
        // The leaf's next packet, likely the next one served (a leaf sends until its deficit
        // runs out): its slot was written when it arrived, long ago under a backlog (in the
        // same line as this one when it came while this one waited, `pool`).
        let next = cl.q.head;
        if next != NIL && self.warmth.prefetch() {
            if let Some(s) = self.pool.get(next) {
                prefetch(s);
            }
        }
        Some(pkt)
    }

    /// Check leaf `c`'s inline FIFO (for `check_invariants`, [`pool::Pool::check_fifo`]).
    /// Returns the number of slots. O(len).
    pub(super) fn fifo_check(&self, c: u32) -> Result<u32, String> {
        self.pool
            .check_fifo(&self.classes[c as usize].q)
            .map_err(|e| format!("leaf {c}: {e}"))
    }

    /// Count a packet bigger than class `c`'s burst.
    #[cold]
    fn count_giant(&mut self, c: u32) {
        let g = self.giants.entry(c).or_insert(0);
        *g = g.wrapping_add(1);
    }

    /// Packets and bytes queued in a leaf class (zero for inner classes).
    pub fn leaf_backlog(&self, c: ClassId) -> Backlog {
        if c as usize >= self.classes.len() {
            return Backlog::default();
        }
        let cl = &self.classes[c as usize];
        match cl.kind {
            LeafKind::Pfifo | LeafKind::Bfifo => Backlog {
                packets: cl.q.len as u64,
                bytes: cl.q.bytes as u64,
            },
            LeafKind::Boxed => self.boxed[cl.boxed()].backlog(),
            LeafKind::None => Backlog::default(),
        }
    }
}
