//! Indexed binary min-heaps of `(key, class)` for HFSC's ordered sets, without allocation.
//!
//! Principles: each set HFSC keeps (leaves by eligible time or deadline, a parent's active
//! children by virtual time or fit time) only needs its least element, insertion, removal of a
//! given class and a change of a class's key, so a binary heap does (Cormen et al., ch. 6):
//! O(log k) each for `k` members. The heap's storage is a fixed slice given by the caller, one
//! column of rows that hold three heaps side by side ([`Row`]) — a parent's children get a
//! segment of one slab sized at build time, the qdisc-wide sets a vector of one row per class —
//! so nothing is allocated per packet. Each class records where it
//! stands in each heap it can be in (`pos[class][which]`), so a removal or a key change finds
//! it in O(1). Entries order by `(key, class)`, as the ordered trees they replace did, so ties
//! break the same way (the least class id first).

/// A heap entry: the key and the class.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct Entry {
    pub key: u64,
    pub id: u32,
}

/// "Not in this heap".
pub(super) const OUT: u32 = u32::MAX;

/// Which position slot of a class a heap uses: a parent's heaps (`VT`, `CF`, `FIT`; also the
/// slab index) and the real-time heaps (`EL`: a class waits or is ready, never both). The
/// qdisc-wide heap of classes that do not fit uses `FIT`: a class is in one or the other.
pub(super) const VT: usize = 0;
pub(super) const CF: usize = 1;
pub(super) const FIT: usize = 2;
pub(super) const EL: usize = 3;
pub(super) const SLOTS: usize = 4;

/// Storage rows: three heaps side by side, entry `i` of each in row `i` (a parent's `VT`, `CF`
/// and `FIT` heaps; the qdisc-wide `WAIT`, `READY`, `UNFIT`), so that the least entries of a
/// parent's heaps share a cache line.
pub(super) type Row = [Entry; 3];

/// One heap: column `col` of its storage rows (capacity = `rows.len()`), its length, the
/// positions of its members (slot `which`).
pub(super) struct Heap<'a> {
    pub rows: &'a mut [Row],
    pub col: usize,
    pub len: &'a mut u32,
    pub pos: &'a mut [[u32; SLOTS]],
    pub which: usize,
}

impl Heap<'_> {
    #[inline]
    pub(super) fn at(&self, i: usize) -> Entry {
        self.rows[i][self.col]
    }

    #[inline]
    pub(super) fn place(&mut self, i: usize, e: Entry) {
        self.rows[i][self.col] = e;
        self.pos[e.id as usize][self.which] = i as u32;
    }

    #[inline]
    fn sift_up(&mut self, mut i: usize) {
        let e = self.at(i);
        while i > 0 {
            let p = (i - 1) / 2;
            if self.at(p) <= e {
                break;
            }
            let up = self.at(p);
            self.place(i, up);
            i = p;
        }
        self.place(i, e);
    }

    #[inline]
    fn sift_down(&mut self, mut i: usize) {
        let n = *self.len as usize;
        let e = self.at(i);
        loop {
            let l = 2 * i + 1;
            if l >= n {
                break;
            }
            let c = if l + 1 < n && self.at(l + 1) < self.at(l) {
                l + 1
            } else {
                l
            };
            if e <= self.at(c) {
                break;
            }
            let down = self.at(c);
            self.place(i, down);
            i = c;
        }
        self.place(i, e);
    }

    /// Where `id` stands in this heap, if it is in it.
    #[inline]
    pub(super) fn position(&self, id: u32) -> Option<usize> {
        let i = self.pos[id as usize][self.which];
        (i != OUT).then_some(i as usize)
    }

    /// Mark `id` as out of this heap (its entry is the caller's to move).
    #[inline]
    pub(super) fn forget(&mut self, id: u32) {
        self.pos[id as usize][self.which] = OUT;
    }

    /// The least entry.
    #[inline]
    pub fn first(&self) -> Option<Entry> {
        (*self.len > 0).then(|| self.at(0))
    }

    /// Add `id` under `key` (it must not be in the heap; the storage has room for every class
    /// that can be in it).
    #[inline]
    pub fn push(&mut self, key: u64, id: u32) {
        let i = *self.len as usize;
        *self.len += 1;
        self.rows[i][self.col] = Entry { key, id };
        self.sift_up(i);
    }

    /// Remove `id` if it is in the heap.
    #[inline]
    pub fn remove(&mut self, id: u32) {
        let i = self.pos[id as usize][self.which];
        if i == OUT {
            return;
        }
        self.pos[id as usize][self.which] = OUT;
        let i = i as usize;
        *self.len -= 1;
        let last = *self.len as usize;
        if i == last {
            return;
        }
        let moved = self.at(last);
        self.rows[i][self.col] = moved;
        self.pos[moved.id as usize][self.which] = i as u32;
        if i > 0 && moved < self.at((i - 1) / 2) {
            self.sift_up(i);
        } else {
            self.sift_down(i);
        }
    }

    /// Change the key of `id`, which is in the heap.
    #[inline]
    pub fn rekey(&mut self, id: u32, key: u64) {
        let i = self.pos[id as usize][self.which] as usize;
        let old = self.at(i).key;
        self.rows[i][self.col].key = key;
        if key < old {
            self.sift_up(i);
        } else if key > old {
            self.sift_down(i);
        }
    }

    /// Remove and return the least entry.
    #[inline]
    pub fn pop(&mut self) -> Option<Entry> {
        let e = self.first()?;
        self.remove(e.id);
        Some(e)
    }

    /// Whether `id` is in the heap under `key`.
    #[cfg(test)]
    pub fn holds(&self, id: u32, key: u64) -> bool {
        let i = self.pos[id as usize][self.which];
        i != OUT && (i as usize) < *self.len as usize && self.at(i as usize) == Entry { key, id }
    }

    /// Whether every parent is at most its children.
    #[cfg(test)]
    pub fn is_heap(&self) -> bool {
        (1..*self.len as usize).all(|i| self.at((i - 1) / 2) <= self.at(i))
    }
}

/// A check of the indexed heaps against an ordered set, shared by the binary heap's tests and
/// the min-max heap's (`minmax.rs`).
#[cfg(test)]
pub(super) mod model {
    use super::*;
    use crate::hfsc::minmax::MinMax;
    use std::collections::BTreeSet;

    /// Which heap a check drives.
    #[derive(Copy, Clone, Debug, PartialEq, Eq)]
    pub(crate) enum Under {
        Binary,
        MinMax,
    }

    /// Apply `ops` — `(op, id, key)`: 0 push, 1 remove, 2 rekey, 3 pop the least (binary heap
    /// only) — to a heap of ids below `n` in column `col` (position slot `which`) and to an
    /// ordered set, and check after each that they agree: the least entry (and the min-max
    /// heap's largest), the length, every member where its position says, the heap's order, and
    /// the other columns of the rows left alone. `Err` names the first difference.
    pub(crate) fn against_ordered_set(
        under: Under,
        n: usize,
        col: usize,
        which: usize,
        ops: &[(u8, u32, u64)],
    ) -> Result<(), String> {
        let mut store = vec![[Entry::default(); 3]; n];
        let mut len = 0u32;
        let mut pos = vec![[OUT; SLOTS]; n];
        let mut set = BTreeSet::new();
        let mut key = vec![0u64; n];
        for (step, &(op, id, k)) in ops.iter().enumerate() {
            let mut h = Heap {
                rows: &mut store,
                col,
                len: &mut len,
                pos: &mut pos,
                which,
            };
            let old = (key[id as usize], id);
            let inside = set.contains(&old);
            match op {
                0 if !inside => {
                    match under {
                        Under::Binary => h.push(k, id),
                        Under::MinMax => MinMax(h).push(k, id),
                    }
                    key[id as usize] = k;
                    set.insert((k, id));
                }
                1 => {
                    match under {
                        Under::Binary => h.remove(id),
                        Under::MinMax => MinMax(h).remove(id),
                    }
                    set.remove(&old);
                }
                2 if inside => {
                    match under {
                        Under::Binary => h.rekey(id, k),
                        Under::MinMax => MinMax(h).rekey(id, k),
                    }
                    set.remove(&old);
                    key[id as usize] = k;
                    set.insert((k, id));
                }
                3 if under == Under::Binary => {
                    let got = h.pop().map(|e| (e.key, e.id));
                    let want = set.pop_first();
                    if got != want {
                        return Err(format!(
                            "step {step}: popped {got:?}, the set's least {want:?}"
                        ));
                    }
                }
                _ => {}
            }
            let others_alone = store
                .iter()
                .all(|r| (0..3).all(|c| c == col || r[c] == Entry::default()));
            let h = Heap {
                rows: &mut store,
                col,
                len: &mut len,
                pos: &mut pos,
                which,
            };
            let first = h.first().map(|e| (e.key, e.id));
            let members = set.iter().all(|&(k, i)| h.holds(i, k));
            let length = *h.len as usize;
            let (ordered, last) = match under {
                Under::Binary => (h.is_heap(), set.last().copied()),
                Under::MinMax => {
                    let m = MinMax(h);
                    (m.is_minmax(), m.last().map(|e| (e.key, e.id)))
                }
            };
            let ok = others_alone
                && ordered
                && first == set.first().copied()
                && last == set.last().copied()
                && length == set.len()
                && members;
            if !ok {
                return Err(format!(
                    "step {step} ({op}, {id}, {k}): others alone {others_alone}, ordered {ordered}, \
                     first {first:?} last {last:?} len {length}, members {members}; set {set:?}"
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::model::{against_ordered_set, Under};
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Against an ordered set: the same least element after every push, remove, rekey, pop.
        #[test]
        fn behaves_as_an_ordered_set(ops in proptest::collection::vec((0u8..4, 0u32..16, 0u64..8), 1..200)) {
            against_ordered_set(Under::Binary, 16, 1, CF, &ops).map_err(TestCaseError::fail)?;
        }
    }
}
