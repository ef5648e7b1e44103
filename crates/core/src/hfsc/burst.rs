//! Enqueueing a burst of packets into given leaves, with the class records prefetched first.
//!
//! Principles: at tens of thousands of classes the records are out of the caches, and a packet
//! into an idle leaf reads its leaf's record, queue and heap positions and its parent's record
//! (the leaf activates, and usually its parent with it). Taken one packet after the other these
//! are a chain of misses; prefetching every leaf's lines of a burst first, then every idle
//! leaf's parent's, makes a burst of `k` packets wait for about two rounds of misses instead of
//! `k` chains — what DPDK's `rte_sched_port_enqueue` and HTB's `enqueue_burst_to` do. The
//! hints change no result. A tree of fewer than [`PREFETCH_MIN`] classes keeps its records in
//! the caches, where hints would only cost their instructions, and skips them.
use super::*;
use crate::prefetch::{prefetch, prefetch_ptr};

/// Smallest tree that prefetches (its class records, ≈ 0.5 KB each, exceed a 1 MiB L2).
pub(super) const PREFETCH_MIN: usize = 1 << 13;

/// Bytes of a class record that activation and a dequeue read (the record's counters and
/// children's heap bounds lie beyond: see [`Class`]).
const HOT_BYTES: usize = 6 * 64;

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
        let mut ok = 0;
        for (i, p) in pkts.drain(..).enumerate() {
            let c = classes.get(i).copied().unwrap_or(self.default);
            match self.enqueue_to(c, p, now) {
                Ok(()) => ok += 1,
                Err(d) => refused.push(d),
            }
        }
        ok
    }

    /// The hot lines of a class record and its heap positions.
    fn prefetch_class(&self, c: u32) {
        if let Some(cl) = self.classes.get(c as usize) {
            let base = (cl as *const Class).cast::<u8>();
            for off in (0..HOT_BYTES.min(std::mem::size_of::<Class>())).step_by(64) {
                prefetch_ptr(base.wrapping_add(off));
            }
        }
        if let Some(p) = self.pos.get(c as usize) {
            prefetch(p);
        }
    }

    /// Each leaf's record, queue and positions, then the parent of each idle leaf.
    fn prefetch_burst(&self, classes: &[ClassId]) {
        for &c in classes {
            self.prefetch_class(c);
            if let Some(l) = self.leaves.get(c as usize) {
                prefetch(l);
            }
        }
        for &c in classes {
            if let Some(cl) = self.classes.get(c as usize) {
                if cl.nactive == 0 && cl.parent != NIL {
                    self.prefetch_class(cl.parent);
                }
            }
        }
    }
}
