//! HTB's feeds kept in class-id order, as Linux keeps them: a bitmap over the children of the
//! feed's class, by their rank among their siblings.
//!
//! Principles (Linux net/sched/sch_htb.c: `htb_add_to_id_tree`, `htb_safe_rb_erase`,
//! `htb_next_rb_node`, `htb_id_find_next_upper`): every feed `inner.feed[prio]` holds children
//! of one inner class, ordered by class id, and round robin walks it in that order. A class that
//! leaves a feed and comes back finds its old place, so its turn in the round does not depend on
//! when it came back. (Arrival-order lists, which an earlier version used, let a class that left
//! just behind the cursor and came back at the tail take a second turn in the same round: with
//! exactly periodic traffic that happened every round and gave it all of the spare bandwidth.)
//! Class ids here are class indexes, which follow the tc class ids `linkshare export tc` gives
//! (`1:<i+1>`).
//!
//! A feed's possible members are known when the tree is built: the children of its class. Each
//! class has a `rank`, its place among its siblings in class-id order, fixed at build time, and
//! the children of every inner class are listed in that order in `Htb::children` (from
//! `Inner::first`). A child added in place takes a rank a removed sibling left, or the next one
//! (`reshape`): rank order is then the family's order, which follows class ids except where a
//! slot or a rank was reused. A feed is then the set of its members' ranks: one 64-bit word when the class
//! has at most 64 children (`Htb::feed_words`, eight words an inner class), a hierarchical
//! bitmap ([`super::rowbits::RowBits`], as the rows use) for a larger family (`Htb::feed_big`).
//! Hooking a class in or out sets or clears one bit, and the next member is a find-first-set:
//! O(1) for a family of up to 64 and O(log₆₄ k) word operations for `k` children, touching no
//! record but the feed's own word. (Linux walks a red-black tree, and an earlier version here a
//! treap threaded through the members' records: O(log k) records visited, each a cache miss
//! once a family is larger than the caches; docs/benchmarks-history.md, "Feeds as bitmaps".)
//!
//! Memory: per inner class 8 words, 16 bytes of `Inner` and the 4-byte entries of its children
//! in `Htb::children` (so 4 bytes a class); per family larger than 64, eight `RowBits` whose
//! words are allocated at the feed's first use (k/64 words and a fraction more).
use super::rowbits::RowBits;
use super::*;

/// Families up to this size keep each feed in one word.
pub(super) const SMALL_FAMILY: u32 = 64;

/// Children of every inner class listed by parent, each family in class-id order, with each
/// class's rank in its family: what [`Htb::new`] stores in `Htb::children`, `Inner::first`,
/// `Inner::count` and `Class::rank`. Each family's region has a little room after it (a 64th
/// of its size and one more), so that the first children added in place (`reshape`) neither
/// move the family nor grow `children`. O(n).
pub(super) struct Families {
    pub children: Vec<u32>,
    /// Per inner class (by inner index): the offset of its family in `children`, its size and
    /// its region's room.
    pub first: Vec<u32>,
    pub count: Vec<u32>,
    pub cap: Vec<u32>,
    /// Per class: its rank among its siblings (0 for a root).
    pub rank: Vec<u32>,
}

impl Families {
    /// `parent_inner[c]`: the inner index of class `c`'s parent, or NIL for a root.
    pub(super) fn new(parent_inner: &[u32], n_inner: usize) -> Families {
        let mut count = vec![0u32; n_inner];
        let mut rank = vec![0u32; parent_inner.len()];
        for (c, &p) in parent_inner.iter().enumerate() {
            if let Some(k) = count.get_mut(p as usize) {
                rank[c] = *k;
                *k += 1;
            }
        }
        let mut first = Vec::with_capacity(n_inner);
        let mut cap = Vec::with_capacity(n_inner);
        let mut total = 0u32;
        for &k in &count {
            first.push(total);
            cap.push(k + k / 64 + 1);
            total += k + k / 64 + 1;
        }
        let mut children = crate::hugepages::filled(total as usize, NIL);
        for (c, &p) in parent_inner.iter().enumerate() {
            if let Some(&f) = first.get(p as usize) {
                children[(f + rank[c]) as usize] = c as u32;
            }
        }
        Families {
            children,
            first,
            count,
            cap,
            rank,
        }
    }
}

impl<P: Packet> Htb<P> {
    /// The inner class and prio of feed `lid`.
    #[inline(always)]
    fn feed_parts(lid: usize) -> (usize, u8) {
        ((lid - ROWS) / NUM_PRIO, ((lid - ROWS) % NUM_PRIO) as u8)
    }

    /// The rank of list node `node`'s class among its siblings.
    #[inline(always)]
    fn node_rank(&self, node: u32) -> u32 {
        self.classes[self.owner_of(node) as usize].rank
    }

    /// Put `node` into feed `lid` (its class is a child of the feed's class).
    pub(super) fn feed_insert(&mut self, lid: usize, node: u32) {
        let r = self.node_rank(node);
        let (i, prio) = Self::feed_parts(lid);
        let inn = &self.inner[i];
        if inn.count <= SMALL_FAMILY {
            self.feed_words[lid - ROWS] |= 1 << r;
        } else {
            let count = inn.count as usize;
            self.feed_big[inn.big as usize * NUM_PRIO + prio as usize].insert(r, count);
        }
    }

    /// Take `node` out of feed `lid` (nothing if it is not there).
    pub(super) fn feed_remove(&mut self, lid: usize, node: u32) {
        let r = self.node_rank(node);
        let (i, prio) = Self::feed_parts(lid);
        let inn = &self.inner[i];
        if inn.count <= SMALL_FAMILY {
            self.feed_words[lid - ROWS] &= !(1 << r);
        } else {
            self.feed_big[inn.big as usize * NUM_PRIO + prio as usize].remove(r);
        }
    }

    /// Whether feed `lid` has no member.
    #[inline]
    pub(super) fn feed_is_empty(&self, lid: usize) -> bool {
        let (i, prio) = Self::feed_parts(lid);
        let inn = &self.inner[i];
        if inn.count <= SMALL_FAMILY {
            self.feed_words[lid - ROWS] == 0
        } else {
            self.feed_big[inn.big as usize * NUM_PRIO + prio as usize].is_empty()
        }
    }

    /// The node of the member of feed `lid` with the smallest rank ≥ `r`, or NIL.
    pub(super) fn feed_next_ge(&self, lid: usize, r: u32) -> u32 {
        let (i, prio) = Self::feed_parts(lid);
        let inn = &self.inner[i];
        let found = if inn.count <= SMALL_FAMILY {
            let w = self.feed_words[lid - ROWS];
            let m = if r < 64 { w & (!0u64 << r) } else { 0 };
            if m == 0 {
                return NIL;
            }
            m.trailing_zeros()
        } else {
            let f = self.feed_big[inn.big as usize * NUM_PRIO + prio as usize].next_ge(r);
            if f == NIL {
                return NIL;
            }
            f
        };
        match self.children.get((inn.first + found) as usize) {
            Some(&c) if c != NIL => self.node_of(c, prio),
            _ => NIL,
        }
    }

    /// The member of feed `lid` after `node` in id order, or NIL.
    #[inline]
    pub(super) fn feed_next_after(&self, lid: usize, node: u32) -> u32 {
        self.feed_next_ge(lid, self.node_rank(node).saturating_add(1))
    }

    /// The node of feed `lid` with the smallest class id ≥ that of `k`, a child of the feed's
    /// class (`htb_id_find_next_upper`): ranks follow class ids within a family.
    #[inline]
    pub(super) fn feed_next_upper(&self, lid: usize, k: u32) -> u32 {
        self.feed_next_ge(lid, self.classes[k as usize].rank)
    }

    /// Check feed `lid`: every member is a child of the feed's class whose rank is its place in
    /// the family. Returns its length.
    pub(super) fn feed_check(&self, lid: usize) -> Result<usize, String> {
        let (i, prio) = Self::feed_parts(lid);
        let inn = &self.inner[i];
        let mut len = 0usize;
        let mut node = self.feed_next_ge(lid, 0);
        let mut prev: Option<u32> = None;
        while node != NIL {
            len += 1;
            if len > inn.count as usize {
                return Err(format!("feed {lid}: more members than children"));
            }
            let c = self.owner_of(node);
            let cl = &self.classes[c as usize];
            if cl.parent != inn.class
                || self.children.get((inn.first + cl.rank) as usize) != Some(&c)
            {
                return Err(format!("feed {lid}: class {c} is not a child at its rank"));
            }
            if prev.is_some_and(|p| p >= cl.rank) {
                return Err(format!("feed {lid}: not in rank order at class {c}"));
            }
            prev = Some(cl.rank);
            node = self.feed_next_after(lid, node);
        }
        if (len == 0) != self.feed_is_empty(lid) {
            return Err(format!(
                "feed {lid} (prio {prio}): emptiness does not match its members"
            ));
        }
        Ok(len)
    }

    /// Bytes of the feeds' bitmaps and families.
    pub(super) fn feed_bytes(&self) -> usize {
        self.feed_words.capacity() * 8
            + self.children.capacity() * 4
            + self.feed_big.capacity() * std::mem::size_of::<RowBits>()
            + self.feed_big.iter().map(|b| b.bytes()).sum::<usize>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn families_list_children_in_class_id_order_whatever_the_order_of_the_specs() {
        // Classes 0..8; inner classes (by inner index): 0 = class 5, 1 = class 2, 2 = class 7.
        // Parents come after children and families interleave.
        let parent_inner = [0, NIL, 0, 1, 2, NIL, 1, 0];
        let f = Families::new(&parent_inner, 3);
        assert_eq!(f.count, vec![3, 2, 1]);
        // Each region with one place of room after its family.
        assert_eq!(f.cap, vec![4, 3, 2]);
        assert_eq!(f.first, vec![0, 4, 7]);
        assert_eq!(f.children, vec![0, 2, 7, NIL, 3, 6, NIL, 4, NIL]);
        assert_eq!(f.rank, vec![0, 0, 1, 0, 0, 0, 1, 2]);
        for (c, &p) in parent_inner.iter().enumerate() {
            if p != NIL {
                let at = (f.first[p as usize] + f.rank[c]) as usize;
                assert_eq!(f.children[at], c as u32);
            }
        }
    }
}
