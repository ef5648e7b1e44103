//! The members of one HTB row as a set of class ids: a hierarchical bitmap with successor and
//! predecessor queries (the row's index: where a class that comes back goes in its list).
//!
//! Principles: a row `row[level][prio]` can hold a large part of the tree (every leaf that sends
//! on its own rate sits in `row[0][prio]`), and Linux keeps it ordered by class id
//! (net/sched/sch_htb.c `htb_add_class_to_row`, `htb_add_to_id_tree`, `htb_next_rb_node`). A
//! bitmap over class indexes (which follow the tc class ids, see [`super::idtree`]) finds a
//! class's neighbours in that order with a few word operations, so the row itself can stay a
//! doubly linked list over the links the classes already have (next member in O(1), as the
//! dequeue's prefetch pipeline needs) and only hooking a class in asks the bitmap where: bit `k` of level 0
//! is set iff class `k` is in the row, bit `w` of level `l + 1` iff word `w` of level `l` is not
//! zero; the top level is one word. Inserting a class whose level-0 word already holds a
//! smaller member also finds that member in one word read and written
//! ([`RowBits::insert_prev`]), the usual case in a busy row. The bitmap is allocated at the first
//! insert (n bits plus n/64 and so on), so rows that are never used cost nothing.

/// "No member": the same sentinel as the lists' `NIL`.
const NONE: u32 = u32::MAX;

/// Levels enough for any class id (`u32`): 64⁶ > 2³².
const MAX_LEVELS: usize = 6;

#[derive(Clone, Debug, Default)]
pub(super) struct RowBits {
    /// Every level in one array, level 0 first: level `l` is `words[off[l]..off[l + 1]]`.
    words: Vec<u64>,
    off: [usize; MAX_LEVELS + 1],
    /// Number of levels (0 before the first insert); the last has one word.
    depth: usize,
}

impl RowBits {
    /// Size the bitmap for class ids `0..n` (once; it never shrinks).
    #[inline(always)]
    fn ensure(&mut self, n: usize) {
        if self.depth == 0 {
            self.size_for(n);
        }
    }

    /// The first sizing, at the row's first use.
    #[cold]
    #[inline(never)]
    fn size_for(&mut self, n: usize) {
        let mut len = n.max(1).div_ceil(64);
        let mut total = 0;
        while self.depth < MAX_LEVELS {
            self.off[self.depth] = total;
            total += len;
            self.depth += 1;
            if len == 1 {
                break;
            }
            len = len.div_ceil(64);
        }
        self.off[self.depth] = total;
        self.words = vec![0; total];
    }

    /// Word `w` of level `l`, if there is one.
    #[inline(always)]
    fn word(&self, l: usize, w: usize) -> Option<u64> {
        let i = self.off[l] + w;
        if i < self.off[l + 1] {
            self.words.get(i).copied()
        } else {
            None
        }
    }

    /// Add class `k` (< `n`, the number of classes). (The scheduler inserts through
    /// [`Self::insert_prev`]; the tests check it against this.)
    #[cfg(test)]
    pub(super) fn insert(&mut self, k: u32, n: usize) {
        self.ensure(n);
        let mut i = k as usize;
        for l in 0..self.depth {
            let Some(w) = self.words.get_mut(self.off[l] + i / 64) else {
                debug_assert!(false, "class {k} beyond the row's {n} ids");
                return;
            };
            let was = *w;
            *w |= 1 << (i % 64);
            if was != 0 {
                break;
            }
            i /= 64;
        }
    }

    /// Add class `k` (< `n`) and return the largest member below it, or `u32::MAX`: what
    /// [`Self::insert`] then [`Self::prev_lt`] give, in one pass up the levels. When a member
    /// below `k` shares its word (the usual case in a row of many members) this is one word read
    /// and written; otherwise the climb that sets the upper levels' bits also looks, in the same
    /// words, for the nearest non-empty word before `k`'s, and descends from there along the
    /// highest members. The descent reads only words off `k`'s path, which the insertion does
    /// not change.
    #[inline]
    pub(super) fn insert_prev(&mut self, k: u32, n: usize) -> u32 {
        self.ensure(n);
        let i = k as usize;
        debug_assert!(i / 64 < self.off[1], "class {k} beyond the row's {n} ids");
        let Some(w) = self.words.get_mut(i / 64) else {
            return NONE;
        };
        let was = *w;
        *w = was | (1 << (i % 64));
        let below = was & ((1u64 << (i % 64)) - 1);
        if below != 0 {
            // Level 0 starts the array; a word that held a member is marked above already.
            return ((i / 64) * 64 + 63 - below.leading_zeros() as usize) as u32;
        }
        // Up: `pos` is the position of `k`'s word at level `l` (a bit of that level).
        let mut set = was == 0;
        let mut pos = i / 64;
        let mut found = NONE as usize;
        let mut at = 0;
        for l in 1..self.depth {
            let Some(w) = self.words.get_mut(self.off[l] + pos / 64) else {
                break;
            };
            let old = *w;
            if set {
                *w = old | (1 << (pos % 64));
                set = old == 0;
            }
            if found == NONE as usize {
                let m = old & ((1u64 << (pos % 64)) - 1);
                if m != 0 {
                    found = (pos / 64) * 64 + 63 - m.leading_zeros() as usize;
                    at = l;
                }
            }
            if found != NONE as usize && !set {
                break;
            }
            pos /= 64;
        }
        if found == NONE as usize {
            return NONE;
        }
        // Down along the highest members, from word `found` of level `at - 1`.
        let mut i = found;
        for l in (0..at).rev() {
            let word = self.word(l, i).unwrap_or(0);
            i = i * 64 + 63 - word.leading_zeros() as usize;
        }
        i as u32
    }

    /// The members next to class `k` below and above it within its level-0 word, `u32::MAX`
    /// where that word holds none: one word read, a hint for prefetching their links.
    #[inline]
    pub(super) fn word_neighbours(&self, k: u32) -> (u32, u32) {
        let i = k as usize;
        let Some(&w) = self.words.get(i / 64) else {
            return (NONE, NONE);
        };
        let b = i % 64;
        let below = w & ((1u64 << b) - 1);
        let above = w & (!1u64 << b);
        let base = (i / 64) * 64;
        let p = if below != 0 {
            (base + 63 - below.leading_zeros() as usize) as u32
        } else {
            NONE
        };
        let n = if above != 0 {
            (base + above.trailing_zeros() as usize) as u32
        } else {
            NONE
        };
        (p, n)
    }

    /// Take class `k` out (nothing if it is not there).
    #[inline]
    pub(super) fn remove(&mut self, k: u32) {
        let mut i = k as usize;
        for l in 0..self.depth {
            let Some(w) = self.words.get_mut(self.off[l] + i / 64) else {
                return;
            };
            *w &= !(1 << (i % 64));
            if *w != 0 {
                break;
            }
            i /= 64;
        }
    }

    pub(super) fn contains(&self, k: u32) -> bool {
        if self.depth == 0 {
            return false;
        }
        let i = k as usize;
        self.word(0, i / 64)
            .is_some_and(|w| w & (1 << (i % 64)) != 0)
    }

    /// The smallest member ≥ `k`, or `u32::MAX`.
    pub(super) fn next_ge(&self, k: u32) -> u32 {
        let mut i = k as usize;
        let mut l = 0;
        // Up until a word holds a member at or after position `i`.
        loop {
            if l >= self.depth {
                return NONE;
            }
            let Some(word) = self.word(l, i / 64) else {
                return NONE;
            };
            let m = word & (!0u64 << (i % 64));
            if m != 0 {
                i = (i / 64) * 64 + m.trailing_zeros() as usize;
                break;
            }
            i = i / 64 + 1;
            l += 1;
        }
        // Down along the lowest members.
        while l > 0 {
            l -= 1;
            let word = self.word(l, i).unwrap_or(0);
            i = i * 64 + word.trailing_zeros() as usize;
        }
        i as u32
    }

    /// The largest member < `k`, or `u32::MAX`.
    #[cfg(test)]
    pub(super) fn prev_lt(&self, k: u32) -> u32 {
        if k == 0 || self.depth == 0 {
            return NONE;
        }
        // Position `i` and below are candidates.
        let mut i = (k as usize - 1).min((self.off[1] - self.off[0]) * 64 - 1);
        let mut l = 0;
        // Up until a word holds a member at or before position `i`.
        loop {
            if l >= self.depth {
                return NONE;
            }
            let word = self.word(l, i / 64).unwrap_or(0);
            let m = word & (!0u64 >> (63 - i % 64));
            if m != 0 {
                i = (i / 64) * 64 + 63 - m.leading_zeros() as usize;
                break;
            }
            if i < 64 {
                return NONE;
            }
            i = i / 64 - 1;
            l += 1;
        }
        // Down along the highest members.
        while l > 0 {
            l -= 1;
            let word = self.word(l, i).unwrap_or(0);
            i = i * 64 + 63 - word.leading_zeros() as usize;
        }
        i as u32
    }

    pub(super) fn bytes(&self) -> usize {
        self.words.capacity() * 8
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    #[test]
    fn matches_a_sorted_set() {
        for n in [1usize, 63, 64, 65, 4095, 4096, 4097, 300_000] {
            let mut bits = RowBits::default();
            let mut set = BTreeSet::new();
            let mut x: u64 = 0x2545_f491_4f6c_dd1d ^ n as u64;
            for _ in 0..4000 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let k = (x % n as u64) as u32;
                if x & (1 << 40) == 0 {
                    if x & (1 << 41) == 0 {
                        bits.insert(k, n);
                    } else {
                        let below = set.range(..k).next_back().copied().unwrap_or(NONE);
                        assert_eq!(bits.insert_prev(k, n), below, "n {n} insert_prev({k})");
                    }
                    set.insert(k);
                } else {
                    bits.remove(k);
                    set.remove(&k);
                }
                let q = ((x >> 20) % (n as u64 + 2)) as u32;
                let want = set.range(q..).next().copied().unwrap_or(NONE);
                assert_eq!(bits.next_ge(q), want, "n {n} next_ge({q})");
                let below = set.range(..q).next_back().copied().unwrap_or(NONE);
                assert_eq!(bits.prev_lt(q), below, "n {n} prev_lt({q})");
                assert_eq!(bits.contains(k), set.contains(&k));
                let (wp, wn) = bits.word_neighbours(q.min(n as u32 - 1));
                let q0 = q.min(n as u32 - 1);
                let in_word = |m: Option<u32>| m.filter(|&m| m / 64 == q0 / 64).unwrap_or(NONE);
                assert_eq!(wp, in_word(set.range(..q0).next_back().copied()));
                assert_eq!(wn, in_word(set.range(q0 + 1..).next().copied()));
            }
            assert_eq!(bits.next_ge(0), set.first().copied().unwrap_or(NONE));
        }
    }
}
