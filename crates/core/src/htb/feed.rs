//! HTB's active lists: the rows `row[level][prio]` of classes that may send, the feeds of each
//! inner class (children that want to borrow from it), and the round robin that picks a leaf.
//!
//! Principles (Devera, "HTB Linux queuing discipline manual" and "Hierarchical token bucket
//! theory", 2002; Linux net/sched/sch_htb.c `htb_activate_prios`, `htb_deactivate_prios`,
//! `htb_lookup_leaf`, `htb_dequeue_tree`): a class is in exactly one place per active prio — the
//! row of its level when it can send, the feed of its parent when it may borrow, nowhere when it
//! cannot send. Lists are kept in class-id order (Linux's rb-trees keyed by classid: feeds in
//! [`super::feedbits`], rows in [`super::rowbits`]) with a cursor; the leaf at the cursor sends
//! until its deficit goes negative (DRR among classes of one prio). A class that leaves a feed at
//! the cursor keeps its turn if it is back by the next lookup (`last_ptr_id`, `htb_lookup_leaf`);
//! one that leaves a row at the cursor passes it on (`htb_remove_class_from_row`): the cursor
//! moves to the next member at once, so a class that comes back in between waits for the next
//! round, as in Linux. A row is its bitmap over class ids alone, a feed
//! its bitmap over its class's children by rank, so hooking and unhooking set or clear a bit
//! and a cursor move is a find-first-set, each O(log₆₄ n) word operations (one word for a
//! family of up to 64) and usually one, touching no other class's record; a lookup is
//! O(depth). Rows of level 0
//! hold leaves only (node id = class id), so a lookup whose row cursor is on a leaf returns it at
//! once.
use super::*;

/// How many leaves ahead of the one served the dequeue prefetches a record and counters
/// (`prefetch_next`). Deeper pipelines (a record 5–12 leaves ahead, the slots 2–8) measured no
/// better on a million leaves with a standing backlog (docs/benchmarks-history.md, "Both ends of a leaf's
/// FIFO", "A leaf's second packet", "A leaf's packets side by side").
const AHEAD: usize = 4;
/// How many leaves ahead it prefetches the first slot of a leaf's FIFO (its record is in by
/// then: it was prefetched `AHEAD - SLOT_AHEAD` dequeues earlier).
const SLOT_AHEAD: usize = 3;
// A stage that prefetched, a leaf ahead, the second slot of a leaf holding two packets (1M
// leaves with a backlog: 106 → 98 ns) measured nothing once a leaf's packets share a line
// (`pool`; 78.8 ns with and without it), so it went.

impl<P: Packet> Htb<P> {
    pub(super) fn row_id(level: u8, prio: u8) -> usize {
        level as usize * NUM_PRIO + prio as usize
    }

    pub(super) fn feed_id(inner: u32, prio: u8) -> usize {
        ROWS + inner as usize * NUM_PRIO + prio as usize
    }

    /// The list node of class `c` at `prio`: a leaf's is its id, an inner class's one of eight
    /// numbers from [`INNER_NODES`] (above every class id, so that a tree that grows in place
    /// keeps its nodes' numbers, `reshape`).
    pub(super) fn node_of(&self, c: u32, prio: u8) -> u32 {
        let inner = self.classes[c as usize].inner();
        if inner == NIL {
            c
        } else {
            INNER_NODES + inner * NUM_PRIO as u32 + prio as u32
        }
    }

    pub(super) fn owner_of(&self, node: u32) -> u32 {
        if node < INNER_NODES {
            node
        } else {
            self.inner[((node - INNER_NODES) / NUM_PRIO as u32) as usize].class
        }
    }

    /// Hook `node` into list `lid` at its place in class-id order (`htb_add_to_id_tree`); the
    /// cursor does not move. In a row that is setting the class's bit.
    pub(super) fn list_push(&mut self, lid: usize, node: u32) {
        if lid >= ROWS {
            self.feed_insert(lid, node);
            return;
        }
        let k = self.owner_of(node);
        self.row_push(lid, k);
    }

    /// [`Self::list_push`] into row `lid` of class `k`.
    #[inline]
    fn row_push(&mut self, lid: usize, k: u32) {
        let n = self.classes.len();
        self.row_bits[lid].insert(k, n);
        self.row_mask[lid / NUM_PRIO] |= 1 << (lid % NUM_PRIO);
    }

    /// Unhook `node` from list `lid`. If the cursor is on it: in a row the cursor moves to the
    /// next member (`htb_remove_class_from_row`); in a feed it is cleared and the class id
    /// remembered, so the next lookup resumes there or at the next id (`htb_deactivate_prios`).
    pub(super) fn list_remove(&mut self, lid: usize, node: u32) {
        if lid >= ROWS {
            if self.lists[lid].cursor == node {
                self.lists[lid].cursor = NIL;
                self.lists[lid].last = self.owner_of(node);
            }
            self.feed_remove(lid, node);
            return;
        }
        let k = self.owner_of(node);
        self.row_remove(lid, node, k);
    }

    /// [`Self::list_remove`] from row `lid` of `node`, which belongs to class `k`: its bit
    /// cleared, and the cursor, if it was on it, moved to the next member.
    #[inline]
    fn row_remove(&mut self, lid: usize, node: u32, k: u32) {
        let bits = &mut self.row_bits[lid];
        if self.lists[lid].cursor == node {
            let next = bits.remove_next(k);
            self.lists[lid].cursor = self.row_node(lid, next);
        } else {
            bits.remove(k);
        }
        if self.row_bits[lid].is_empty() {
            self.row_mask[lid / NUM_PRIO] &= !(1 << (lid % NUM_PRIO));
        }
    }

    /// Whether list `lid` has no member.
    #[inline(always)]
    fn list_is_empty(&self, lid: usize) -> bool {
        if lid < ROWS {
            self.row_mask[lid / NUM_PRIO] & (1 << (lid % NUM_PRIO)) == 0
        } else {
            self.feed_is_empty(lid)
        }
    }

    /// The first member of list `lid` in class-id order, or NIL.
    #[inline]
    fn list_first(&self, lid: usize) -> u32 {
        if lid < ROWS {
            self.row_node(lid, self.row_bits[lid].first())
        } else {
            self.feed_next_ge(lid, 0)
        }
    }

    /// The node of the first member of row `lid` after class `k`, or NIL.
    #[inline(always)]
    fn row_next(&self, lid: usize, k: u32) -> u32 {
        self.row_node(lid, self.row_bits[lid].next_ge(k.saturating_add(1)))
    }

    /// The node of class `c` (or NIL) in row `lid`.
    #[inline]
    fn row_node(&self, lid: usize, c: u32) -> u32 {
        if c == NIL || lid < NUM_PRIO {
            // Row 0 holds leaves only, whose node id is their class id.
            c
        } else {
            self.node_of(c, (lid % NUM_PRIO) as u8)
        }
    }

    /// The member after `node` in list `lid`, in class-id order, or NIL: O(log₆₄ n) word
    /// operations in a row (usually one), O(log n) in a feed.
    #[inline]
    pub(super) fn next_of(&self, lid: usize, node: u32) -> u32 {
        if lid < ROWS {
            self.row_next(lid, self.owner_of(node))
        } else {
            self.feed_next_after(lid, node)
        }
    }

    /// Is `node` in list `lid`?
    pub(super) fn list_member(&self, lid: usize, node: u32) -> bool {
        let k = self.owner_of(node);
        if lid < ROWS {
            self.row_bits[lid].contains(k) && self.node_of(k, (lid % NUM_PRIO) as u8) == node
        } else {
            self.feed_next_upper(lid, k) == node
        }
    }

    /// Check list `lid`'s order and structure (see [`Self::id_check`] for feeds): a row's mask
    /// bit says whether its bitmap has a member. Returns the number of members.
    pub(super) fn list_check(&self, lid: usize) -> Result<usize, String> {
        if lid >= ROWS {
            return self.feed_check(lid);
        }
        let bits = &self.row_bits[lid];
        if self.list_is_empty(lid) != bits.is_empty() {
            return Err(format!("row {lid}: row mask does not match its bitmap"));
        }
        let mut len = 0;
        let mut k = bits.next_ge(0);
        while k != NIL {
            len += 1;
            if len > self.classes.len() {
                return Err(format!("row {lid}: more members than classes"));
            }
            k = bits.next_ge(k + 1);
        }
        Ok(len)
    }

    /// Move the cursor of list `lid` to the next member in id order (`htb_next_rb_node`).
    pub(super) fn advance_cursor(&mut self, lid: usize) {
        let cur = self.lists[lid].cursor;
        if cur != NIL {
            self.lists[lid].cursor = self.next_of(lid, cur);
        }
    }

    pub(super) fn activate_leaf(&mut self, c: u32) {
        let cl = &mut self.classes[c as usize];
        let prio = self.profiles[cl.profile as usize].prio;
        cl.active = 1 << prio;
        if cl.mode == ClassMode::CanSend {
            // Straight into its row (what `activate_prios` does for a class that can send); a
            // leaf's node id is its class id.
            let row = Self::row_id(cl.level, prio);
            self.row_push(row, c);
        } else {
            self.activate_prios(c, 1 << prio);
        }
    }

    pub(super) fn deactivate_leaf(&mut self, c: u32) {
        let cl = &self.classes[c as usize];
        let mask = cl.active;
        if mask == 0 {
            return;
        }
        if cl.mode == ClassMode::CanSend && mask.is_power_of_two() {
            // Out of its row (as `deactivate_prios` for a class that can send).
            let prio = mask.trailing_zeros() as u8;
            self.row_remove(Self::row_id(cl.level, prio), c, c);
        } else {
            self.deactivate_prios(c, mask);
        }
        self.classes[c as usize].active = 0;
    }

    /// Class `c` became active at the prios in `mask`: hook it where its mode says.
    pub(super) fn activate_prios(&mut self, mut c: u32, mut mask: u8) {
        while mask != 0 {
            let cl = &self.classes[c as usize];
            match cl.mode {
                ClassMode::CantSend => return,
                ClassMode::CanSend => {
                    let level = cl.level;
                    for p in bits(mask) {
                        let node = self.node_of(c, p);
                        self.list_push(Self::row_id(level, p), node);
                    }
                    return;
                }
                ClassMode::MayBorrow => {
                    let parent = cl.parent;
                    if parent == NIL {
                        return;
                    }
                    let pin = self.classes[parent as usize].inner();
                    let mut newly = 0u8;
                    for p in bits(mask) {
                        let fid = Self::feed_id(pin, p);
                        if self.feed_is_empty(fid) {
                            newly |= 1 << p;
                        }
                        let node = self.node_of(c, p);
                        self.list_push(fid, node);
                    }
                    self.classes[parent as usize].active |= newly;
                    c = parent;
                    mask = newly;
                }
            }
        }
    }

    /// Class `c` stops being active at the prios in `mask`: unhook it.
    pub(super) fn deactivate_prios(&mut self, mut c: u32, mut mask: u8) {
        while mask != 0 {
            let cl = &self.classes[c as usize];
            match cl.mode {
                ClassMode::CantSend => return,
                ClassMode::CanSend => {
                    let level = cl.level;
                    for p in bits(mask) {
                        let node = self.node_of(c, p);
                        self.list_remove(Self::row_id(level, p), node);
                    }
                    return;
                }
                ClassMode::MayBorrow => {
                    let parent = cl.parent;
                    if parent == NIL {
                        return;
                    }
                    let pin = self.classes[parent as usize].inner();
                    let mut emptied = 0u8;
                    for p in bits(mask) {
                        let fid = Self::feed_id(pin, p);
                        let node = self.node_of(c, p);
                        self.list_remove(fid, node);
                        if self.feed_is_empty(fid) {
                            emptied |= 1 << p;
                        }
                    }
                    self.classes[parent as usize].active &= !emptied;
                    c = parent;
                    mask = emptied;
                }
            }
        }
    }

    /// Find the leaf to serve in `row[level][prio]`, moving cursors as round robin requires.
    /// Returns the leaf and the id of the list it was found in.
    pub(super) fn lookup_leaf(&mut self, level: u8, prio: u8) -> Option<(u32, usize)> {
        let row = Self::row_id(level, prio);
        if level == 0 {
            // A row of leaves: the leaf at the cursor, or at the right end the first member.
            let mut cur = self.lists[row].cursor;
            if cur == NIL {
                cur = self.row_bits[row].first();
                if cur == NIL {
                    return None;
                }
                self.lists[row].cursor = cur;
            }
            return Some((cur, row));
        }
        self.lookup_leaf_walk(row, prio)
    }

    /// [`Self::lookup_leaf`] from row `row` through the feeds.
    fn lookup_leaf_walk(&mut self, row: usize, prio: u8) -> Option<(u32, usize)> {
        let mut stack = [0usize; MAX_DEPTH + 1];
        let mut sp = 0;
        stack[0] = row;
        for _ in 0..(4 * MAX_DEPTH + 8) {
            let lid = stack[sp];
            if self.list_is_empty(lid) {
                return None;
            }
            // The class at the cursor left this feed: resume at it, or at the next id.
            let last = self.lists[lid].last;
            if last != NIL {
                if self.lists[lid].cursor == NIL {
                    self.lists[lid].cursor = self.feed_next_upper(lid, last);
                }
                self.lists[lid].last = NIL;
            }
            if self.lists[lid].cursor == NIL {
                // At the right end: rewind, and move the cursor of the list above.
                self.lists[lid].cursor = self.list_first(lid);
                if sp > 0 {
                    sp -= 1;
                    self.advance_cursor(stack[sp]);
                    continue;
                }
            }
            let c = self.owner_of(self.lists[lid].cursor);
            let inner = self.classes[c as usize].inner();
            if inner == NIL {
                return Some((c, lid));
            }
            sp += 1;
            if sp > MAX_DEPTH {
                return None;
            }
            stack[sp] = Self::feed_id(inner, prio);
        }
        None
    }

    /// The dequeue's prefetch pipeline (when `warmth` says it pays): the next
    /// leaves of this list are likely served next, a three-stage pipeline, each stage reading
    /// only lines an earlier dequeue prefetched. The leaf `AHEAD` on gets its record (and
    /// counters) prefetched; the leaf `SLOT_AHEAD` on, whose record is in, its queue's first
    /// slot (the packet it will give, and the line its next ones share, `pool`); the next
    /// leaf its parent's record; the leaf served now its parent's record.
    #[inline(always)]
    fn prefetch_next(&mut self, leaf: u32, lid: usize) {
        // In a row of leaves the next members are class ids, found in the bitmap's words at
        // hand (a hint: where the row is sparse, nothing); elsewhere the list's order.
        let near: [u32; AHEAD] = if lid < NUM_PRIO {
            let far = self.classes.len() >= PREFETCH_ROW_WORDS_MIN;
            let bits = &mut self.row_bits[lid];
            let mut near = bits.next_near::<AHEAD>(leaf);
            if near[0] != NIL {
                // The served leaf's successor, for its removal if it runs empty now.
                bits.remember(leaf, near[0]);
            } else if far {
                // A sparse stretch of a row too large for the caches: the next member is
                // further on (remembered for the same removal); its record and counters.
                near[0] = bits.successor(leaf);
                self.prefetch_class(near[0]);
            }
            near
        } else {
            let mut near = [NIL; AHEAD];
            let mut n = leaf;
            for x in near.iter_mut() {
                n = self.next_of(lid, n);
                if n == NIL {
                    break;
                }
                *x = n;
            }
            near
        };
        // Each stage reads only what an earlier dequeue prefetched: the record `AHEAD` leaves on,
        // the first slot `SLOT_AHEAD` on (its record came in since), the parent of the next.
        if let Some(c1) = self.classes.get(near[0] as usize) {
            self.prefetch_record(c1.parent);
        }
        if let Some(c) = self.classes.get(near[SLOT_AHEAD - 1] as usize) {
            if c.kind != LeafKind::Boxed {
                if let Some(slot) = self.pool.get(c.q.head) {
                    prefetch(slot);
                }
            }
        }
        self.prefetch_class(near[AHEAD - 1]);
        self.prefetch_record(self.classes[leaf as usize].parent);
    }

    /// Serve one packet from `row[level][prio]`, if any leaf there has one to give.
    pub(super) fn dequeue_tree(&mut self, level: u8, prio: u8, now: Time) -> Option<P> {
        // Each failed attempt deactivates a leaf, so this is bounded by the number of leaves that
        // misbehave (hold backlog but refuse to dequeue); cap it anyway.
        for _ in 0..64 {
            let (leaf, lid) = self.lookup_leaf(level, prio)?;
            // Only while the working set is out of the caches (`warmth`).
            if self.warmth.prefetch() {
                self.prefetch_next(leaf, lid);
            }
            let cl = &self.classes[leaf as usize];
            let (out, now_empty, wait_until) = match cl.kind {
                LeafKind::Pfifo | LeafKind::Bfifo => {
                    let p = self.fifo_pop(leaf);
                    (p, self.classes[leaf as usize].q.len == 0, None)
                }
                LeafKind::Boxed => {
                    let b = cl.boxed();
                    let q = &mut self.boxed[b];
                    let r = match q.dequeue(now) {
                        Dequeued::Packet(p) => (Some(p), q.backlog().packets == 0, None),
                        Dequeued::Empty => (None, true, None),
                        Dequeued::NotBefore(t) => (None, true, Some(t.0)),
                    };
                    if q.backlog().packets == 0 {
                        self.idle.went_idle(b as u32, now.0);
                    }
                    r
                }
                LeafKind::None => (None, true, None),
            };
            self.collect_victims(leaf);
            match out {
                Some(pkt) => {
                    let len = pkt.len();
                    let cl = &mut self.classes[leaf as usize];
                    let quantum = self.profiles[cl.profile as usize].quantum;
                    let d = &mut cl.deficit[usize::from(level > 0)];
                    // Saturating: with quantum ≤ QUANTUM_LIMIT the deficit stays far from
                    // the bounds; a giant packet must not wrap it either.
                    *d = d.saturating_sub(i32::try_from(len).unwrap_or(i32::MAX));
                    if *d < 0 {
                        *d = d.saturating_add(i32::try_from(quantum).unwrap_or(i32::MAX));
                        self.advance_cursor(lid);
                    }
                    if now_empty {
                        self.deactivate_leaf(leaf);
                    }
                    self.charge(leaf, level, len, now.0);
                    return Some(pkt);
                }
                None => {
                    self.deactivate_leaf(leaf);
                    if let Some(t) = wait_until {
                        self.leaf_wait.insert((t, leaf));
                    }
                }
            }
        }
        None
    }
}

/// Iterate the set bits of a prio mask.
pub(super) fn bits(mask: u8) -> impl Iterator<Item = u8> {
    let mut m = mask;
    std::iter::from_fn(move || {
        if m == 0 {
            return None;
        }
        let p = m.trailing_zeros() as u8;
        m &= m - 1;
        Some(p)
    })
}
