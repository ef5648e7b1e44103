//! Enqueueing a burst of packets into given leaves, with the class records prefetched first.
//!
//! Principles: at tens of thousands of classes the records are out of the caches, and a packet
//! into an idle leaf reads its leaf's record (its FIFO's ends in it), heap positions, its
//! parent's record and the parent's heap it joins (the leaf activates, and usually its parent
//! with it). Taken one packet after the other these are a chain of misses; prefetching every
//! leaf's lines of a burst first, then every idle leaf's parent's, then those parents' heaps,
//! makes a burst of `k` packets wait for about three rounds of misses instead of `k` chains —
//! what DPDK's `rte_sched_port_enqueue` and HTB's `enqueue_burst_to` do. The hints change no
//! result. A tree of fewer than [`PREFETCH_MIN`] classes keeps its records in
//! the caches, where hints would only cost their instructions, and skips them.
use super::*;
use crate::prefetch::{enqueue_each, prefetch, prefetch_ptr};

/// Smallest tree that prefetches (its class records, 448 bytes each, exceed a 1 MiB L2).
pub(super) const PREFETCH_MIN: usize = 1 << 13;

impl<P: Packet> Hfsc<P> {
    /// Enqueue packet `i` into leaf `classes[i]` (as [`Hfsc::enqueue_to`]; the default class
    /// when `classes` is short), leaving `pkts` empty; the refused go to `refused`. Returns
    /// how many were taken.
    pub fn enqueue_burst_to(
        &mut self,
        classes: &[ClassId],
        pkts: &mut Vec<P>,
        now: Time,
        refused: &mut Vec<Dropped<P>>,
    ) -> usize {
        if self.classes.len() >= PREFETCH_MIN {
            self.prefetch_burst(classes);
        }
        let default = self.default;
        enqueue_each(classes, pkts, default, refused, |c, p| {
            self.enqueue_to(c, p, now)
        })
    }

    /// The lines of class `c`'s record that a packet reads — a leaf's part and the shared one,
    /// or a parent's with the shared one (see [`Class`]) — and its heap positions.
    fn prefetch_class(&self, c: u32, leaf: bool) {
        if let Some(cl) = self.classes.get(c as usize) {
            let base = (cl as *const Class).cast::<u8>();
            let lines = if leaf {
                0..LEAF_END
            } else {
                PARENT_START / 64 * 64..std::mem::size_of::<Class>()
            };
            for off in lines.step_by(64) {
                prefetch_ptr(base.wrapping_add(off));
            }
        }
        if let Some(p) = self.pos.get(c as usize) {
            prefetch(p);
        }
    }

    /// Three rounds, each issuing all its hints before the next reads what the previous
    /// fetched: each leaf's record (its FIFO's ends with it) and positions; then the pool slot
    /// its packet links after and, for an idle leaf, its parent's record and positions; then
    /// the first row of that parent's heaps, where the leaf will be filed.
    fn prefetch_burst(&self, classes: &[ClassId]) {
        for &c in classes {
            self.prefetch_class(c, true);
        }
        for &c in classes {
            if let Some(cl) = self.classes.get(c as usize) {
                if let Some(slot) = self.pool.get(cl.q.tail) {
                    prefetch(slot);
                }
                if cl.nactive == 0 && cl.parent != NIL {
                    self.prefetch_class(cl.parent, false);
                }
            }
        }
        for &c in classes {
            if let Some(cl) = self.classes.get(c as usize) {
                if cl.nactive == 0 {
                    let row = self
                        .classes
                        .get(cl.parent as usize)
                        .map(|p| p.base as usize);
                    if let Some(r) = row.and_then(|r| self.slab.get(r)) {
                        prefetch(r);
                    }
                }
            }
        }
    }
}
