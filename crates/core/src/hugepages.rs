//! Transparent huge pages for the scheduler's large arrays.
//!
//! Principles (Linux `madvise(2)` `MADV_HUGEPAGE`; Documentation/admin-guide/mm/transhuge.rst):
//! a tree of a million classes keeps its per-class records in arrays of tens of megabytes that
//! the datapath reads at random, so with 4 KiB pages nearly every packet also misses the TLB
//! (a thousand active leaves spread over a million classes touch thousands of pages, more than
//! the TLB holds). Where the system leaves transparent huge pages to the program
//! (`/sys/kernel/mm/transparent_hugepage/enabled` = `madvise`, Debian's default), asking for them
//! on those arrays before their pages are first touched backs them with 2 MiB pages; memory the
//! allocator hands out again (freed temporaries of the build, a pool before it doubled) was
//! faulted in before, so an array written there is collapsed into huge pages afterwards
//! (`MADV_COLLAPSE`). The advice is a hint: it changes no value, it is skipped for arrays
//! smaller than one huge page and on other systems, and a refusal (no THP in the kernel, a
//! kernel before 6.1 for the collapse) is ignored.

/// Size of a huge page on x86_64 and aarch64 with 4 KiB base pages.
const HUGE: usize = 2 << 20;

/// A vector of `n` copies of `fill` in huge pages: advised before it was written, collapsed
/// after (for memory the allocator reused, [`collapse`]).
pub(crate) fn filled<T: Clone>(n: usize, fill: T) -> Vec<T> {
    let mut v = with_capacity(n);
    v.resize(n, fill);
    collapse(&v);
    v
}

/// An empty vector with room for `n`, its storage advised huge (fill it by pushing, then
/// [`collapse`] it).
pub(crate) fn with_capacity<T>(n: usize) -> Vec<T> {
    let v = Vec::with_capacity(n);
    advise(&v);
    v
}

/// Advise the whole capacity of `v` (call before its pages are first written: pages already
/// faulted in stay small until the kernel's background collapse gets to them, see [`collapse`]).
pub(crate) fn advise<T>(v: &Vec<T>) {
    madvise_aligned(v.as_ptr(), v.capacity(), MADV_HUGEPAGE);
}

/// Back the written, huge-page-aligned part of `v` with huge pages now. An array the allocator
/// placed in memory it had already handed out (a build's freed temporaries, an earlier pool) keeps
/// the small pages that memory was faulted in with, advice or not: on a million-class tree the
/// lists and links (13 MB) were in 4 KiB pages (`/proc/PID/smaps`). `MADV_COLLAPSE` (Linux 6.1)
/// copies such a range into huge pages synchronously; older kernels refuse it, which is ignored.
/// It costs about a copy of the array, once, at build time (or when the packet pool doubles).
pub(crate) fn collapse<T>(v: &[T]) {
    madvise_aligned(v.as_ptr(), v.len(), MADV_COLLAPSE);
}

/// `MADV_HUGEPAGE` (include/uapi/asm-generic/mman-common.h).
const MADV_HUGEPAGE: i32 = 14;
/// `MADV_COLLAPSE` (the same header, Linux 6.1).
const MADV_COLLAPSE: i32 = 25;

/// `madvise(advice)` on the huge-page-aligned part of the `n` elements from `v` (memory a vector
/// owns), if they fill at least one huge page; errors are ignored (the advice is a hint).
fn madvise_aligned<T>(v: *const T, n: usize, advice: i32) {
    let bytes = n.saturating_mul(std::mem::size_of::<T>());
    if bytes < HUGE {
        return;
    }
    #[cfg(target_os = "linux")]
    {
        // The huge-page-aligned part of the allocation.
        let start = v as usize;
        let first = start.div_ceil(HUGE) * HUGE;
        let end = (start + bytes) / HUGE * HUGE;
        if end > first {
            // SAFETY: the range lies inside memory this vector owns; MADV_HUGEPAGE and
            // MADV_COLLAPSE change no content and no mapping permission, only the size of the
            // pages backing it.
            let _ = unsafe { libc::madvise(first as *mut libc::c_void, end - first, advice) };
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = advice;
}
