//! Whether prefetching pays: judged from the traffic's working set, not the tree.
//!
//! Principles. Prefetch hints change no result; they only trade instructions (≈ 70–110 a packet
//! here) for cache misses overlapped instead of waited for. They pay when the leaves being sent
//! to are out of the caches, which depends on how many leaves the traffic touches, not on how
//! many are configured: a million classes of which a thousand are busy have the working set of
//! a thousand-class tree. So the decision is made from what enqueue already reads.
//!
//! Every enqueued packet's leaf record holds `t_c`, the time of the leaf's last charge. The
//! packets are counted in epochs of [`EPOCH`]; a leaf last charged before the start of the
//! previous epoch was not served for at least one epoch — a reuse distance of `EPOCH` packets
//! or more, ≈ `EPOCH × 6` cache lines touched since (the leaf's record and counters, its slot,
//! its parent's record and counters): beyond a core's 1 MiB L2 (16,384 lines) from about
//! 2,700 packets. Such a packet is counted *cold*. At the end of an epoch prefetching turns on
//! when more than half of its packets were cold, and off when fewer than a quarter were (the
//! band between keeps the last decision, so a working set near the edge does not flap).
//!
//! Random traffic over `a` equally busy leaves finds a leaf cold with probability about
//! `e^(−k·EPOCH/a)`, `k` between 1 and 2 by the epoch's phase: over 1,024 leaves 2–14 % (off),
//! over 65,536 leaves 94–97 % (on). Trees smaller than `PREFETCH_MIN` classes never prefetch and
//! skip the count. Cost: a compare and two adds a packet, an epoch's end every `EPOCH` packets;
//! no memory per class (O(1) in classes and flows).
//!
//! It reads only `now`, `t_c` and the calls' order, so, like the rest of the core, it is a pure
//! function of the calls made: the same calls prefetch the same way.

/// Packets per epoch.
pub(super) const EPOCH: u32 = 2048;

/// The estimate and the decision (see the module docs).
#[derive(Copy, Clone, Debug)]
pub(super) struct Warmth {
    /// The tree is large enough to prefetch at all.
    large: bool,
    /// The current decision.
    prefetch: bool,
    /// Start of the current epoch and of the previous one (scheduler time, ns).
    start: u64,
    prev: u64,
    /// Packets counted in this epoch, and how many of them found their leaf cold.
    count: u32,
    cold: u32,
}

impl Warmth {
    /// For a tree of `classes` classes: prefetching starts on in a large tree (nothing is
    /// in cache yet) and the first epoch corrects it.
    pub(super) fn new(classes: usize) -> Warmth {
        let large = classes >= super::PREFETCH_MIN;
        Warmth {
            large,
            prefetch: large,
            start: 0,
            prev: 0,
            count: 0,
            cold: 0,
        }
    }

    /// Whether the hints pay now.
    #[inline(always)]
    pub(super) fn prefetch(&self) -> bool {
        self.prefetch
    }

    /// The tree is large enough for the hints at all.
    #[inline(always)]
    pub(super) fn large(&self) -> bool {
        self.large
    }

    /// A packet is enqueued at `now` to a leaf last charged at `t_c`. O(1).
    #[inline(always)]
    pub(super) fn observe(&mut self, t_c: u64, now: u64) {
        if !self.large {
            return;
        }
        self.count += 1;
        self.cold += u32::from(t_c < self.prev);
        if self.count >= EPOCH {
            self.end_epoch(now);
        }
    }

    #[cold]
    fn end_epoch(&mut self, now: u64) {
        if self.cold * 2 > self.count {
            self.prefetch = true;
        } else if self.cold * 4 < self.count {
            self.prefetch = false;
        }
        self.prev = self.start;
        self.start = now;
        self.count = 0;
        self.cold = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feed `packets` enqueues over `a` leaves picked by a fixed LCG, charging each leaf when
    /// it is picked (as an enqueue followed by its dequeue does), one ns per packet.
    fn run(w: &mut Warmth, a: usize, packets: u64) {
        let mut t_c = vec![0u64; a];
        let mut x: u64 = 0x2545_f491_4f6c_dd1d;
        for now in 1..=packets {
            x = x
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            let leaf = ((x >> 33) as usize) % a;
            w.observe(t_c[leaf], now);
            t_c[leaf] = now;
        }
    }

    #[test]
    fn a_small_working_set_in_a_large_tree_turns_prefetching_off() {
        let mut w = Warmth::new(1 << 20);
        assert!(w.prefetch(), "a large tree starts prefetching");
        run(&mut w, 1024, 100_000);
        assert!(!w.prefetch());
    }

    #[test]
    fn a_large_working_set_keeps_it_on() {
        let mut w = Warmth::new(1 << 20);
        run(&mut w, 65_536, 300_000);
        assert!(w.prefetch());
    }

    #[test]
    fn a_working_set_that_grows_turns_it_back_on() {
        let mut w = Warmth::new(1 << 20);
        run(&mut w, 1024, 50_000);
        assert!(!w.prefetch());
        // The same clock goes on: the run restarts its leaves' times at 0, i.e. all cold.
        let mut t_c = vec![0u64; 65_536];
        let mut x: u64 = 7;
        for now in 50_001..=150_000u64 {
            x = x
                .wrapping_mul(2_862_933_555_777_941_757)
                .wrapping_add(3_037_000_493);
            let leaf = ((x >> 33) as usize) % t_c.len();
            w.observe(t_c[leaf], now);
            t_c[leaf] = now;
        }
        assert!(w.prefetch());
    }

    #[test]
    fn a_small_tree_never_prefetches() {
        let mut w = Warmth::new(1000);
        assert!(!w.prefetch());
        run(&mut w, 1000, 100_000);
        assert!(!w.prefetch());
        assert_eq!(w.count, 0, "a small tree skips the count");
    }

    #[test]
    fn a_clock_that_stands_still_counts_nothing_cold_after_the_first_epochs() {
        // Time stands still (a driver that passes one instant): every leaf was charged "now",
        // which is not before the previous epoch's start, so the working set looks small.
        let mut w = Warmth::new(1 << 20);
        for _ in 0..(3 * EPOCH) {
            w.observe(5, 5);
        }
        assert!(!w.prefetch());
    }
}
