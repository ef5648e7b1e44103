//! Cache prefetch hints, shared by the schedulers that prefetch a burst's class records before
//! touching them (HTB, HFSC), as DPDK's `rte_sched_port_enqueue` does.
//!
//! Principles: a hint changes no result and never faults, whatever the address; it only turns a
//! chain of cache misses waited for one after the other into misses overlapped. Callers decide
//! when it pays (large trees whose records are out of the caches): in cache, a hint only costs
//! its instruction.

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
