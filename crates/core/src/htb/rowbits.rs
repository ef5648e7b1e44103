//! One HTB row: its members as a set of class ids, a hierarchical bitmap with a successor query.
//!
//! Principles: a row `row[level][prio]` can hold a large part of the tree (every leaf that sends
//! on its own rate sits in `row[0][prio]`), and Linux keeps it ordered by class id, its cursor
//! moving to the next id (net/sched/sch_htb.c `htb_add_class_to_row`, `htb_add_to_id_tree`,
//! `htb_next_rb_node`). A bitmap over class indexes (which follow the tc class ids, see
//! [`super::feedbits`]) is that order with nothing else: bit `k` of level 0 is set iff class `k` is
//! in the row, bit `w` of level `l + 1` iff word `w` of level `l` is not zero; the top level is
//! one word. Hooking a class in or out sets or clears its bit (and the bits above it when its
//! word fills or empties: O(log₆₄ n), usually one word) and touches no other class's record;
//! the next member is a find-first-set in the same word, climbing only where the row is sparse.
//! This is how librte_sched marks its active queues (`rte_bitmap`). A successor looked up ahead
//! of time (the dequeue's prefetch asks for the served leaf's) is remembered until the row
//! changes, so the removal of that leaf when it runs empty does not search again: where the row
//! is sparse that search is a climb with branches no predictor guesses. The bitmap is allocated at
//! the first insert (n bits plus n/64 and so on: ≈ 1/8 byte a class), so rows that are never used
//! cost nothing.

/// "No member": the same sentinel as the lists' `NIL`.
const NONE: u32 = u32::MAX;

/// Levels enough for any class id (`u32`): 64⁶ > 2³².
const MAX_LEVELS: usize = 6;

#[derive(Clone, Debug)]
pub(super) struct RowBits {
    /// Every level in one array, level 0 first: level `l` is `words[off[l]..off[l + 1]]`.
    words: Vec<u64>,
    off: [usize; MAX_LEVELS + 1],
    /// Number of levels (0 before the first insert); the last has one word.
    depth: usize,
    /// A successor found and remembered (`successor`, `remember`): `(k, next)` with `next` the
    /// smallest member after `k`, or `k == NONE`. Any insert or other removal forgets it; the
    /// removal of `k` itself uses it instead of searching again ([`Self::remove_next`]).
    memo: (u32, u32),
}

impl Default for RowBits {
    fn default() -> RowBits {
        RowBits {
            words: Vec::new(),
            off: [0; MAX_LEVELS + 1],
            depth: 0,
            memo: (NONE, NONE),
        }
    }
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

    /// Room for ids `0..n` at least (a tree that grew in place, `reshape`): twice the room held,
    /// the members kept. O(words), amortised O(1) an id over the ids added.
    #[cold]
    #[inline(never)]
    fn grow(&mut self, n: usize) {
        let mut g = RowBits::default();
        g.size_for(n.max(self.off[1] * 128));
        let low = &self.words[..self.off[1].min(self.words.len())];
        g.words[..low.len()].copy_from_slice(low);
        // The levels above, from the words below them.
        for l in 1..g.depth {
            for w in 0..g.off[l] - g.off[l - 1] {
                if g.words[g.off[l - 1] + w] != 0 {
                    g.words[g.off[l] + w / 64] |= 1 << (w % 64);
                }
            }
        }
        *self = g;
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

    /// Add class `k` (< `n`, the number of classes): its bit, and the bits above it that were
    /// clear (one word written in a row that already has a member near `k`).
    #[inline]
    pub(super) fn insert(&mut self, k: u32, n: usize) {
        self.ensure(n);
        if k as usize >= self.off[1] * 64 {
            self.grow(k as usize + 1);
        }
        self.memo.0 = NONE;
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

    /// Up to `N` members after `k`, in order, found in `k`'s level-0 word and the next one
    /// (`u32::MAX` for the rest): a hint for prefetching the leaves served next, which never
    /// climbs the levels.
    #[inline]
    pub(super) fn next_near<const N: usize>(&self, k: u32) -> [u32; N] {
        let mut out = [NONE; N];
        let i = k as usize + 1;
        let mut n = 0;
        for w in [i / 64, i / 64 + 1] {
            if w >= self.off[1] {
                break;
            }
            let Some(&word) = self.words.get(w) else {
                break;
            };
            let mut m = if w == i / 64 {
                word & (!0u64 << (i % 64))
            } else {
                word
            };
            while m != 0 && n < N {
                out[n] = (w * 64 + m.trailing_zeros() as usize) as u32;
                m &= m - 1;
                n += 1;
            }
        }
        out
    }

    /// The level-0 word that holds class `k`'s bit, if the row has one (a hint for
    /// prefetching: hooking `k` in writes it).
    #[inline]
    pub(super) fn word_of(&self, k: u32) -> Option<&u64> {
        let w = k as usize / 64;
        if w < self.off[1] {
            self.words.get(w)
        } else {
            None
        }
    }

    /// Take class `k` out (nothing if it is not there); returns whether the row is now empty.
    #[inline]
    pub(super) fn remove(&mut self, k: u32) -> bool {
        self.memo.0 = NONE;
        let mut i = k as usize;
        for l in 0..self.depth {
            let Some(w) = self.words.get_mut(self.off[l] + i / 64) else {
                return self.is_empty();
            };
            *w &= !(1 << (i % 64));
            if *w != 0 {
                return false;
            }
            i /= 64;
        }
        true
    }

    /// The smallest member after `k`, or `u32::MAX`, remembered for the removal of `k` that
    /// usually follows (the dequeue's prefetch looks for the next leaf before the served leaf
    /// runs empty and leaves its row: one search instead of two where the row is sparse).
    #[inline]
    pub(super) fn successor(&mut self, k: u32) -> u32 {
        let next = self.next_ge(k.saturating_add(1));
        self.memo = (k, next);
        next
    }

    /// Remember that `next` is the smallest member after `k` (found by the caller in the words
    /// at hand, [`Self::next_near`]).
    #[inline]
    pub(super) fn remember(&mut self, k: u32, next: u32) {
        debug_assert_eq!(next, self.next_ge(k.saturating_add(1)));
        self.memo = (k, next);
    }

    /// Take class `k` out and return the smallest member after it, or `u32::MAX`: what
    /// [`Self::remove`] then [`Self::next_ge`]`(k + 1)` give, in one climb (the words that
    /// clearing `k` reads are those the search starts from), or with no search when the
    /// successor of `k` is remembered.
    #[inline]
    pub(super) fn remove_next(&mut self, k: u32) -> u32 {
        if self.memo.0 == k {
            let next = self.memo.1;
            self.remove(k);
            return next;
        }
        self.memo.0 = NONE;
        let mut i = k as usize;
        let mut clearing = true;
        for l in 0..self.depth {
            let Some(w) = self.words.get_mut(self.off[l] + i / 64) else {
                return NONE;
            };
            if clearing {
                *w &= !(1 << (i % 64));
                clearing = *w == 0;
            }
            let above = *w & (!1u64 << (i % 64));
            if above != 0 {
                // Down along the lowest members, from word `j` of level `l - 1`.
                let mut j = (i / 64) * 64 + above.trailing_zeros() as usize;
                for d in (0..l).rev() {
                    let word = self.word(d, j).unwrap_or(0);
                    j = j * 64 + word.trailing_zeros() as usize;
                }
                return j as u32;
            }
            i /= 64;
        }
        NONE
    }

    /// Whether the row has no member.
    #[inline]
    pub(super) fn is_empty(&self) -> bool {
        self.depth == 0 || self.words.last().is_none_or(|&w| w == 0)
    }

    pub(super) fn contains(&self, k: u32) -> bool {
        if self.depth == 0 {
            return false;
        }
        let i = k as usize;
        self.word(0, i / 64)
            .is_some_and(|w| w & (1 << (i % 64)) != 0)
    }

    /// The smallest member, or `u32::MAX`: one word read per level, down from the top.
    #[inline]
    pub(super) fn first(&self) -> u32 {
        let mut i = 0;
        for l in (0..self.depth).rev() {
            let w = self.word(l, i).unwrap_or(0);
            if w == 0 {
                return NONE;
            }
            i = i * 64 + w.trailing_zeros() as usize;
        }
        if self.depth == 0 {
            NONE
        } else {
            i as u32
        }
    }

    /// The smallest member ≥ `k`, or `u32::MAX`: one word when `k`'s word holds it (level 0
    /// starts the array, and its words are the first `off[1]`).
    #[inline(always)]
    pub(super) fn next_ge(&self, k: u32) -> u32 {
        let i = k as usize;
        if i / 64 < self.off[1] {
            if let Some(&w) = self.words.get(i / 64) {
                let m = w & (!0u64 << (i % 64));
                if m != 0 {
                    return ((i & !63) + m.trailing_zeros() as usize) as u32;
                }
            }
        }
        self.next_ge_climb(k)
    }

    /// [`Self::next_ge`] beyond `k`'s word: up the levels, then down along the lowest members.
    #[inline(never)]
    fn next_ge_climb(&self, k: u32) -> u32 {
        if self.is_empty() {
            return NONE;
        }
        // `k`'s word at level 0 holds nothing at or after `k`: from the next word, one level up.
        let mut i = k as usize / 64 + 1;
        let mut l = 1;
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

    pub(super) fn bytes(&self) -> usize {
        self.words.capacity() * 8
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    /// A row sized for a small tree takes ids of a tree that grew in place (`reshape`): the
    /// members before the growth stay, and every query sees the ids beyond the first size.
    #[test]
    fn grows_for_ids_beyond_its_first_size() {
        let mut bits = RowBits::default();
        let mut set = BTreeSet::new();
        for k in [3u32, 64, 100] {
            bits.insert(k, 101);
            set.insert(k);
        }
        for k in [4096u32, 5000, 262_143, 262_144, 300_001] {
            bits.insert(k, 101);
            set.insert(k);
            for q in [0u32, 4, 101, 4097, 262_144, 300_000, 300_002] {
                let want = set.range(q..).next().copied().unwrap_or(NONE);
                assert_eq!(bits.next_ge(q), want, "next_ge({q}) after inserting {k}");
            }
            assert!(set.iter().all(|&m| bits.contains(m)));
        }
        assert_eq!(bits.remove_next(262_143), 262_144);
        assert!(!bits.remove(300_001) && !bits.remove(262_144));
        assert_eq!(bits.first(), 3);
    }

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
                    bits.insert(k, n);
                    set.insert(k);
                } else if x & (1 << 41) == 0 {
                    set.remove(&k);
                    assert_eq!(bits.remove(k), set.is_empty(), "n {n} remove({k})");
                } else {
                    let after = set.range(k + 1..).next().copied().unwrap_or(NONE);
                    if x & (1 << 42) == 0 {
                        // The dequeue's order: the successor looked up (and remembered)
                        // first, sometimes with an insert or another removal in between.
                        assert_eq!(bits.successor(k), after, "n {n} successor({k})");
                        let other = ((x >> 24) % n as u64) as u32;
                        if x & (3 << 43) == 0 && other != k {
                            bits.insert(other, n);
                            set.insert(other);
                        } else if x & (3 << 43) == 1 << 43 && other != k {
                            set.remove(&other);
                            bits.remove(other);
                        }
                    }
                    set.remove(&k);
                    let after = set.range(k + 1..).next().copied().unwrap_or(NONE);
                    assert_eq!(bits.remove_next(k), after, "n {n} remove_next({k})");
                }
                assert_eq!(bits.is_empty(), set.is_empty());
                assert_eq!(bits.first(), set.first().copied().unwrap_or(NONE));
                let q = ((x >> 20) % (n as u64 + 2)) as u32;
                let want = set.range(q..).next().copied().unwrap_or(NONE);
                assert_eq!(bits.next_ge(q), want, "n {n} next_ge({q})");
                assert_eq!(bits.contains(k), set.contains(&k));
                let q0 = q.min(n as u32 - 1);
                let mut near = [NONE; 3];
                let ahead = set.range(q0 + 1..(q0 + 1) / 64 * 64 + 128);
                for (slot, &m) in near.iter_mut().zip(ahead) {
                    *slot = m;
                }
                assert_eq!(bits.next_near::<3>(q0), near, "n {n} next_near({q0})");
                let word = bits.word_of(q0).copied().unwrap_or(0);
                let in_word = set
                    .range(q0 / 64 * 64..(q0 / 64 + 1) * 64)
                    .fold(0u64, |w, &m| w | 1 << (m % 64));
                assert_eq!(word, in_word, "n {n} word_of({q0})");
            }
            assert_eq!(bits.next_ge(0), set.first().copied().unwrap_or(NONE));
        }
    }
}
