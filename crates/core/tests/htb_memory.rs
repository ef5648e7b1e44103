//! HTB's memory per class, measured by the allocator (issue 14: ≤ 128 MB for the 1,114,114
//! classes of a librte_sched-shaped tree of 1,048,576 leaves, i.e. ≤ 114.9 bytes a class).
//!
//! A counting global allocator keeps the bytes live; building the bench tree
//! (`linkshare_core::benchkit`, 16 leaves per pipe, names `c0`, `c1`, …) at 65,536 leaves and
//! subtracting what was live before and the returned leaf list gives everything the scheduler
//! keeps, classifier and allocator-visible slack included. That figure must be within the
//! budget per class, and `Htb::memory_bytes` (what `linkshare bench sched` reports) must account
//! for nearly all of it. One test only: the counter is process-wide.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use linkshare_core::benchkit::{build_htb, Shape};

struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call is forwarded to the system allocator unchanged; only a counter is added.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        LIVE.fetch_add(l.size(), Ordering::Relaxed);
        // SAFETY: same layout as asked.
        unsafe { System.alloc(l) }
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        LIVE.fetch_add(l.size(), Ordering::Relaxed);
        // SAFETY: same layout as asked.
        unsafe { System.alloc_zeroed(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        LIVE.fetch_sub(l.size(), Ordering::Relaxed);
        // SAFETY: `p` came from `alloc` with this layout.
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        LIVE.fetch_add(new, Ordering::Relaxed);
        LIVE.fetch_sub(l.size(), Ordering::Relaxed);
        // SAFETY: `p` came from `alloc` with layout `l`.
        unsafe { System.realloc(p, l, new) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

/// 128 MB over the 1,114,114 classes of the 1,048,576-leaf tree.
const BUDGET_PER_CLASS: f64 = 128e6 / 1_114_114.0;

#[test]
fn bench_tree_fits_the_budget_and_memory_bytes_sees_it_all() {
    let shape = Shape {
        levels: 3,
        leaves: 65_536,
        subports: 1,
    };
    let before = LIVE.load(Ordering::Relaxed);
    let (htb, leaves) = build_htb(&shape).unwrap_or_else(|e| panic!("bench tree: {e}"));
    let live = LIVE.load(Ordering::Relaxed) - before - leaves.capacity() * 4;
    let classes = htb.len();
    assert_eq!(classes, 1 + 1 + 65_536 / 16 + 65_536);
    let per_class = live as f64 / classes as f64;
    let counted = htb.memory_bytes();
    let parts: Vec<String> = htb
        .memory_parts()
        .iter()
        .map(|(k, b)| format!("{k} {:.1}", *b as f64 / classes as f64))
        .collect();
    eprintln!(
        "{classes} classes: {live} bytes live ({per_class:.1} B/class), memory_bytes {counted}; per class: {}",
        parts.join(", ")
    );
    assert!(
        per_class <= BUDGET_PER_CLASS,
        "{per_class:.1} B/class over the budget of {BUDGET_PER_CLASS:.1}"
    );
    assert!(counted <= live, "memory_bytes {counted} > live {live}");
    assert!(
        counted as f64 >= 0.99 * live as f64,
        "memory_bytes {counted} misses more than 1 % of the {live} bytes live"
    );
}
