//! An indexed min-max heap of `(key, class)`: a parent's active children by virtual time, with
//! both the least `vt` (the link-sharing choice) and the largest (where a newcomer's `vt`
//! starts, Linux's `rb_last(vt_tree)`) at hand.
//!
//! Principles: a min-max heap (Atkinson, Sack, Santoro & Strothotte, "Min-max heaps and
//! generalized priority queues", CACM 1986) is a binary heap whose even levels (the root's
//! first) are *min* levels — an entry there is at most every entry below it — and whose odd
//! levels are *max* levels — at least every entry below. The least entry is the root, the
//! largest the greater of the root's children. Insertion, removal of a given class and a
//! change of key are O(log k), like one binary heap's: one such heap replaces the two binary
//! heaps (least `vt` and largest `vt`) a parent would otherwise keep in step. It uses
//! [`Heap`]'s storage and position slots (so a class's place is found in O(1)), and orders
//! entries by `(key, class)` like it.
use super::heap::{Entry, Heap};

/// Whether index `i` lies on a min level (depth even).
#[inline]
pub(super) fn min_level(i: usize) -> bool {
    (usize::BITS - 1 - (i + 1).leading_zeros()).is_multiple_of(2)
}

/// A min-max heap over a [`Heap`]'s storage.
pub(super) struct MinMax<'a>(pub Heap<'a>);

impl MinMax<'_> {
    #[inline(always)]
    fn len(&self) -> usize {
        *self.0.len as usize
    }

    #[inline(always)]
    fn swap(&mut self, i: usize, j: usize) {
        let (a, b) = (self.0.at(i), self.0.at(j));
        self.0.place(i, b);
        self.0.place(j, a);
    }

    /// `a` goes before `b` on the side of the level (`min`: less; max: greater).
    #[inline]
    fn before(min: bool, a: Entry, b: Entry) -> bool {
        if min {
            a < b
        } else {
            a > b
        }
    }

    /// Move entry `i` up through the grandparents of its own kind of level.
    #[inline]
    fn bubble_up_same(&mut self, mut i: usize, min: bool) {
        while i >= 3 {
            let g = (i - 3) / 4;
            if !Self::before(min, self.0.at(i), self.0.at(g)) {
                break;
            }
            self.swap(i, g);
            i = g;
        }
    }

    /// Move entry `i` down until it is in order with its subtree (whose own subtrees are
    /// min-max heaps): on a min level toward the least descendant of two levels, on a max level
    /// toward the greatest.
    #[inline]
    fn trickle_down(&mut self, mut i: usize) {
        let n = self.len();
        let min = min_level(i);
        loop {
            let first = 2 * i + 1;
            if first >= n {
                return;
            }
            // The best among the children and the grandchildren.
            let mut m = first;
            let cands = [first + 1, 4 * i + 3, 4 * i + 4, 4 * i + 5, 4 * i + 6];
            for &k in &cands {
                if k < n && Self::before(min, self.0.at(k), self.0.at(m)) {
                    m = k;
                }
            }
            if !Self::before(min, self.0.at(m), self.0.at(i)) {
                return;
            }
            self.swap(i, m);
            if m <= first + 1 {
                return;
            }
            // A grandchild: the entry that came down may be out of order with its new parent.
            let p = (m - 1) / 2;
            if Self::before(min, self.0.at(p), self.0.at(m)) {
                self.swap(m, p);
            }
            i = m;
        }
    }

    /// Restore the order around entry `i`, whose subtrees are min-max heaps.
    #[inline]
    fn fix(&mut self, i: usize) {
        let min = min_level(i);
        if i > 0 {
            let p = (i - 1) / 2;
            if Self::before(!min, self.0.at(i), self.0.at(p)) {
                // Beyond its parent (of the other kind): they trade places; it goes on up
                // from there, and the parent's entry is put in order below.
                self.swap(i, p);
                self.bubble_up_same(p, !min);
                self.trickle_down_below(i);
                return;
            }
            if i >= 3 && Self::before(min, self.0.at(i), self.0.at((i - 3) / 4)) {
                // Whatever comes down from a grandparent is in order with this subtree.
                self.bubble_up_same(i, min);
                return;
            }
        }
        self.trickle_down_below(i);
    }

    /// [`Self::trickle_down`] where `i` has children (a pushed entry, the last, has none: the
    /// common case costs no call).
    #[inline(always)]
    fn trickle_down_below(&mut self, i: usize) {
        if 2 * i + 1 < self.len() {
            self.trickle_down(i);
        }
    }

    /// The greatest entry.
    #[inline]
    pub fn last(&self) -> Option<Entry> {
        match self.len() {
            0 => None,
            1 => Some(self.0.at(0)),
            2 => Some(self.0.at(1)),
            _ => Some(self.0.at(1).max(self.0.at(2))),
        }
    }

    /// Add `id` under `key` (it must not be in the heap; the storage has room).
    #[inline]
    pub fn push(&mut self, key: u64, id: u32) {
        let i = self.len();
        *self.0.len += 1;
        self.0.place(i, Entry { key, id });
        self.fix(i);
    }

    /// Remove `id` if it is in the heap.
    #[inline]
    pub fn remove(&mut self, id: u32) {
        let Some(i) = self.0.position(id) else {
            return;
        };
        self.0.forget(id);
        *self.0.len -= 1;
        let last = self.len();
        if i == last {
            return;
        }
        let moved = self.0.at(last);
        self.0.place(i, moved);
        self.fix(i);
    }

    /// Change the key of `id`, which is in the heap.
    #[inline]
    pub fn rekey(&mut self, id: u32, key: u64) {
        if let Some(i) = self.0.position(id) {
            self.0.place(i, Entry { key, id });
            // Alone (a parent with one active child), it is in order whatever its key.
            if self.len() > 1 {
                self.fix(i);
            }
        }
    }

    /// Whether every entry is in order with its descendants (tests).
    #[cfg(test)]
    pub fn is_minmax(&self) -> bool {
        let n = self.len();
        (1..n).all(|i| {
            let mut a = (i - 1) / 2;
            loop {
                let ok = if min_level(a) {
                    self.0.at(a) <= self.0.at(i)
                } else {
                    self.0.at(a) >= self.0.at(i)
                };
                if !ok {
                    return false;
                }
                if a == 0 {
                    return true;
                }
                a = (a - 1) / 2;
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hfsc::heap::model::{against_ordered_set, Under};
    use crate::hfsc::heap::VT;
    use proptest::prelude::*;

    #[test]
    fn levels() {
        let lv: Vec<bool> = (0..8).map(min_level).collect();
        assert_eq!(lv, [true, false, false, true, true, true, true, false]);
    }

    proptest! {
        /// Against an ordered set: the same least and greatest entries after every push,
        /// remove and rekey, and every member where its position says.
        #[test]
        fn behaves_as_an_ordered_set(ops in proptest::collection::vec((0u8..3, 0u32..40, 0u64..12), 1..300)) {
            against_ordered_set(Under::MinMax, 40, 0, VT, &ops).map_err(TestCaseError::fail)?;
        }
    }
}
