//! Cache prefetch hints, shared by the schedulers that prefetch a burst's class records before
//! touching them (HTB, HFSC), as DPDK's `rte_sched_port_enqueue` does, and the enqueue of the
//! burst that follows the hints ([`enqueue_each`]).
//!
//! Principles: a hint changes no result and never faults, whatever the address; it only turns a
//! chain of cache misses waited for one after the other into misses overlapped. Callers decide
//! when it pays (large trees whose records are out of the caches): in cache, a hint only costs
//! its instruction.
use crate::classify::ClassId;
use crate::qdisc::Dropped;

/// Enqueue packet `i` of `pkts` into class `classes[i]` (`default` when `classes` is short) with
/// `enqueue`, leaving `pkts` empty; the refused go to `refused`. Returns how many were taken.
/// What a scheduler's `enqueue_burst_to` does once its prefetches are issued.
#[inline]
pub(crate) fn enqueue_each<P>(
    classes: &[ClassId],
    pkts: &mut Vec<P>,
    default: ClassId,
    refused: &mut Vec<Dropped<P>>,
    mut enqueue: impl FnMut(ClassId, P) -> Result<(), Dropped<P>>,
) -> usize {
    let mut ok = 0;
    for (i, p) in pkts.drain(..).enumerate() {
        let c = classes.get(i).copied().unwrap_or(default);
        match enqueue(c, p) {
            Ok(()) => ok += 1,
            Err(d) => refused.push(d),
        }
    }
    ok
}

/// Ask the CPU to bring `x`'s cache line in (no effect on results; no fault on any address).
#[inline(always)]
pub(crate) fn prefetch<T>(x: &T) {
    prefetch_ptr((x as *const T).cast::<u8>())
}

/// [`prefetch`] for an address (never dereferenced).
#[inline(always)]
pub(crate) fn prefetch_ptr(x: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is a hint; it never faults and reads nothing observable. SSE is part of
    // the x86_64 baseline.
    #[allow(unused_unsafe)]
    unsafe {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        _mm_prefetch::<_MM_HINT_T0>(x.cast::<i8>());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = x;
}
