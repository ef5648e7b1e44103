//! Transparent huge pages for the scheduler's large arrays.
//!
//! Principles (Linux `madvise(2)` `MADV_HUGEPAGE`; Documentation/admin-guide/mm/transhuge.rst):
//! a tree of a million classes keeps its per-class records in arrays of tens of megabytes that
//! the datapath reads at random, so with 4 KiB pages nearly every packet also misses the TLB
//! (a thousand active leaves spread over a million classes touch thousands of pages, more than
//! the TLB holds). Where the system leaves transparent huge pages to the program
//! (`/sys/kernel/mm/transparent_hugepage/enabled` = `madvise`, Debian's default), asking for them
//! on those arrays before their pages are first touched backs them with 2 MiB pages. The advice
//! is a hint: it changes no value, it is skipped for arrays smaller than one huge page and on
//! other systems, and a refusal (no THP in the kernel) is ignored.

/// Size of a huge page on x86_64 and aarch64 with 4 KiB base pages.
const HUGE: usize = 2 << 20;

/// A vector of `n` copies of `fill` whose storage was advised huge before it was written.
pub(crate) fn filled<T: Clone>(n: usize, fill: T) -> Vec<T> {
    let mut v = with_capacity(n);
    v.resize(n, fill);
    v
}

/// An empty vector with room for `n`, its storage advised huge (fill it by pushing).
pub(crate) fn with_capacity<T>(n: usize) -> Vec<T> {
    let v = Vec::with_capacity(n);
    advise(&v);
    v
}

/// Advise the whole capacity of `v` (call before its pages are first written: pages already
/// faulted in stay small until the kernel's background collapse gets to them).
pub(crate) fn advise<T>(v: &Vec<T>) {
    let bytes = v.capacity().saturating_mul(std::mem::size_of::<T>());
    if bytes < HUGE {
        return;
    }
    #[cfg(target_os = "linux")]
    {
        // The huge-page-aligned part of the allocation.
        let start = v.as_ptr() as usize;
        let first = start.div_ceil(HUGE) * HUGE;
        let end = (start + bytes) / HUGE * HUGE;
        if end > first {
            // SAFETY: the range lies inside memory this vector owns; MADV_HUGEPAGE changes no
            // content and no mapping permission, only how later faults are served.
            let _ = unsafe {
                libc::madvise(first as *mut libc::c_void, end - first, libc::MADV_HUGEPAGE)
            };
        }
    }
}
