//! HTB's active lists: the rows `row[level][prio]` of classes that may send, the feeds of each
//! inner class (children that want to borrow from it), and the round robin that picks a leaf.
//!
//! Principles (Devera, "HTB Linux queuing discipline manual" and "Hierarchical token bucket
//! theory", 2002; Linux net/sched/sch_htb.c `htb_activate_prios`, `htb_deactivate_prios`,
//! `htb_lookup_leaf`, `htb_dequeue_tree`): a class is in exactly one place per active prio — the
//! row of its level when it can send, the feed of its parent when it may borrow, nowhere when it
//! cannot send. Lists are kept in class-id order (Linux's rb-trees keyed by classid: feeds in
//! [`super::idtree`], rows in [`super::rowbits`]) with a cursor; the leaf at the cursor sends
//! until its deficit goes negative (DRR among classes of one prio). A class that leaves a feed at
//! the cursor keeps its turn if it is back by the next lookup (`last_ptr_id`, `htb_lookup_leaf`);
//! one that leaves a row at the cursor passes it on (`htb_remove_class_from_row`). In a feed of
//! n members hooking, unhooking and a cursor move are O(log n) (expected; a cursor move is O(1)
//! amortised over a round); in a row a cursor move and unhooking are O(1) (a doubly linked list)
//! and hooking a few word operations in the row's bitmap (O(log₆₄) of the class count); a lookup
//! is O(depth) plus one O(log n) search after a class left a feed at its cursor. Rows of level 0
//! hold leaves only (node id = class id, link in the record), so a leaf is hooked into and
//! unhooked from its row without asking which kind of node each neighbour is, and a lookup whose
//! row cursor is on a leaf returns it at once.
//!
//! Lazy unhooking in rows of leaves: a leaf that runs empty while served from its row is
//! *parked* — marked inactive but left in the row — and the cursor moves on as the unhooking
//! would have moved it. If a packet arrives before the cursor comes round, the leaf is active
//! again with no list work (re-hooking would put it back in the same place: rows are in id
//! order); if the cursor reaches it still empty, it is unhooked then. The round robin is exactly
//! that of eager unhooking because the cursor never rests on a parked leaf (every move of a
//! row's cursor skips and unhooks parked members, `row_skip_parked`), so the next leaf served is
//! always the first active member at or after where an eager list's cursor would be. A parked
//! leaf is always `CanSend`: one whose mode changes is unhooked first (`unpark`). A leaf is
//! parked only where the row is dense (the next member at most `PARK_GAP` ids on), as under a
//! standing backlog: there a leaf often gets a packet within one round of the row and keeps its
//! place; in a sparse row the cursor would only meet it again once its record has left the
//! cache, so it is unhooked at once, while the record is at hand (`worth_parking`) — unless the
//! traffic's working set is in cache anyway, as with a thousand busy leaves spread over a
//! million, where parking in a sparse row is on while it is measured to pay (`warmth`).
use super::*;

impl<P: Packet> Htb<P> {
    pub(super) fn row_id(level: u8, prio: u8) -> usize {
        level as usize * NUM_PRIO + prio as usize
    }

    pub(super) fn feed_id(inner: u32, prio: u8) -> usize {
        ROWS + inner as usize * NUM_PRIO + prio as usize
    }

    /// The list node of class `c` at `prio`.
    pub(super) fn node_of(&self, c: u32, prio: u8) -> u32 {
        let inner = self.classes[c as usize].inner();
        if inner == NIL {
            c
        } else {
            self.classes.len() as u32 + inner * NUM_PRIO as u32 + prio as u32
        }
    }

    /// The link of list node `node`: in the record of a leaf, in `links` for an inner class.
    #[inline(always)]
    pub(super) fn link(&self, node: u32) -> Link {
        let n = self.classes.len() as u32;
        if node < n {
            self.classes[node as usize].link
        } else {
            self.links[(node - n) as usize]
        }
    }

    #[inline(always)]
    pub(super) fn link_mut(&mut self, node: u32) -> &mut Link {
        let n = self.classes.len() as u32;
        if node < n {
            &mut self.classes[node as usize].link
        } else {
            &mut self.links[(node - n) as usize]
        }
    }

    pub(super) fn owner_of(&self, node: u32) -> u32 {
        let n = self.classes.len() as u32;
        if node < n {
            node
        } else {
            self.inner[((node - n) / NUM_PRIO as u32) as usize].class
        }
    }

    /// Hook `node` into list `lid` at its place in class-id order (`htb_add_to_id_tree`); the
    /// cursor does not move. In a row the bitmap gives the member before it, and the node is
    /// spliced in after that one.
    pub(super) fn list_push(&mut self, lid: usize, node: u32) {
        if lid >= ROWS {
            self.id_insert(lid, node);
            return;
        }
        let k = self.owner_of(node);
        if lid < NUM_PRIO {
            self.row_push::<true>(lid, node, k);
        } else {
            self.row_push::<false>(lid, node, k);
        }
    }

    /// The link of `node`, a member of a row; `LEAVES` for a row of level 0, whose members are
    /// all leaves (node id = class id, link in the record): no test of which kind of node it is.
    #[inline(always)]
    fn row_link_mut<const LEAVES: bool>(&mut self, node: u32) -> &mut Link {
        if LEAVES {
            &mut self.classes[node as usize].link
        } else {
            self.link_mut(node)
        }
    }

    /// [`Self::list_push`] into row `lid` of `node`, which belongs to class `k` (`LEAVES`: see
    /// [`Self::row_link_mut`]).
    #[inline]
    fn row_push<const LEAVES: bool>(&mut self, lid: usize, node: u32, k: u32) {
        let n = self.classes.len();
        let bits = &mut self.row_bits[lid];
        let pk = bits.insert_prev(k, n);
        let pred = if LEAVES { pk } else { self.row_node(lid, pk) };
        let next = if pred == NIL {
            std::mem::replace(&mut self.lists[lid].head, node)
        } else {
            std::mem::replace(&mut self.row_link_mut::<LEAVES>(pred).right, node)
        };
        if next != NIL {
            self.row_link_mut::<LEAVES>(next).left = node;
        }
        *self.row_link_mut::<LEAVES>(node) = Link {
            left: pred,
            right: next,
        };
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
            self.id_remove(lid, node);
            return;
        }
        let k = self.owner_of(node);
        if lid < NUM_PRIO {
            self.row_remove::<true>(lid, node, k);
        } else {
            self.row_remove::<false>(lid, node, k);
        }
    }

    /// [`Self::list_remove`] from row `lid` of `node`, which belongs to class `k` (`LEAVES`: see
    /// [`Self::row_link_mut`]).
    #[inline]
    fn row_remove<const LEAVES: bool>(&mut self, lid: usize, node: u32, k: u32) {
        let next = self.row_unlink::<LEAVES>(lid, node, k);
        if self.lists[lid].cursor == node {
            self.lists[lid].cursor = next;
            if LEAVES {
                self.row_skip_parked(lid);
            }
        }
    }

    /// Take `node` (of class `k`) out of row `lid`'s list and bitmap, leaving the cursor alone;
    /// returns the member that followed it.
    #[inline]
    fn row_unlink<const LEAVES: bool>(&mut self, lid: usize, node: u32, k: u32) -> u32 {
        let Link {
            left: prev,
            right: next,
        } = *self.row_link_mut::<LEAVES>(node);
        let list = &mut self.lists[lid];
        if prev == NIL {
            list.head = next;
            if next == NIL {
                self.row_mask[lid / NUM_PRIO] &= !(1 << (lid % NUM_PRIO));
            }
        } else {
            self.row_link_mut::<LEAVES>(prev).right = next;
        }
        if next != NIL {
            self.row_link_mut::<LEAVES>(next).left = prev;
        }
        *self.row_link_mut::<LEAVES>(node) = Link::NONE;
        self.row_bits[lid].remove(k);
        next
    }

    /// Is leaf `c`, which has no packet, still in its row of level 0 (parked)? A leaf in no list
    /// has no links ([`Self::row_unlink`], `id_remove`), so a link or the row's head says so
    /// without reading the row's bitmap.
    #[inline(always)]
    pub(super) fn is_parked(&self, c: u32, row: usize) -> bool {
        let cl = &self.classes[c as usize];
        cl.active == 0 && (cl.link.left != NIL || cl.link.right != NIL || self.lists[row].head == c)
    }

    /// A leaf of level 0 at the cursor of its row `lid` ran empty: it stays in the row, parked
    /// (inactive), and the cursor moves on as if it had been unhooked. It is unhooked when the
    /// cursor comes to it still empty, or hooked again for free if a packet comes first: it
    /// would go back into the same place, since rows are in class-id order.
    #[inline]
    pub(super) fn park_leaf(&mut self, c: u32, lid: usize) {
        let cl = &mut self.classes[c as usize];
        cl.active = 0;
        let next = cl.link.right;
        if self.lists[lid].cursor == c {
            self.lists[lid].cursor = next;
            self.row_skip_parked(lid);
        }
    }

    /// Whether leaf `c`, at the cursor of its row of leaves and running empty, should be parked
    /// rather than unhooked (either is exact; this is only about cost). Parking pays when the
    /// leaf is likely to get a packet before the cursor comes round, i.e. in a dense row; in a
    /// sparse one the cursor would come to it when its record has left the cache, and unhooking
    /// it then costs a miss that unhooking now, with the record at hand, does not. The distance
    /// to the next member in class ids tells which. When the traffic's working set is in the
    /// caches, the record is at hand either way, and whether parking pays in a sparse row is
    /// measured instead (`warmth`: how many leaves parked there got a packet in time).
    #[inline(always)]
    fn worth_parking(&mut self, c: u32, lid: usize) -> bool {
        if self.unhook_at_once() {
            return false;
        }
        Self::dense_at(c, self.classes[c as usize].link.right) || self.warmth.park_sparse(lid as u8)
    }

    /// Whether a leaf `c` followed by member `next` in its row sits in a dense stretch of it.
    #[inline(always)]
    fn dense_at(c: u32, next: u32) -> bool {
        next.wrapping_sub(c) <= PARK_GAP
    }

    /// Whether leaves are unhooked as soon as they run empty (the tests' reference) rather
    /// than parked.
    #[inline(always)]
    fn unhook_at_once(&self) -> bool {
        #[cfg(test)]
        return self.eager_unhook;
        #[cfg(not(test))]
        false
    }

    /// Move the cursor of row of leaves `lid` past parked members, unhooking each: the cursor
    /// is always NIL or on an active member, so the round robin sees exactly the members an
    /// eager unhooking would have left.
    #[inline(always)]
    fn row_skip_parked(&mut self, lid: usize) {
        let cur = self.lists[lid].cursor;
        if self
            .classes
            .get(cur as usize)
            .is_some_and(|cl| cl.active == 0)
        {
            self.row_skip_parked_slow(lid);
        }
    }

    /// [`Self::row_skip_parked`] when the cursor is on a parked member.
    #[inline(never)]
    fn row_skip_parked_slow(&mut self, lid: usize) {
        loop {
            let cur = self.lists[lid].cursor;
            match self.classes.get(cur as usize) {
                Some(cl) if cl.active == 0 => {
                    if !Self::dense_at(cur, cl.link.right) {
                        self.warmth.sparse_parked(lid as u8, false);
                    }
                    let next = self.row_unlink::<true>(lid, cur, cur);
                    self.lists[lid].cursor = next;
                }
                _ => return,
            }
        }
    }

    /// Leaf `c` changes mode or is dropped from the lists: if it is parked in its row,
    /// unhook it now (a parked leaf is always `CanSend`, in its row of level 0).
    pub(super) fn unpark(&mut self, c: u32) {
        let cl = &self.classes[c as usize];
        if cl.kind == LeafKind::None || cl.level != 0 {
            return;
        }
        let row = Self::row_id(0, self.profiles[cl.profile as usize].prio);
        if self.is_parked(c, row) {
            self.row_remove::<true>(row, c, c);
        }
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

    /// The member after `node` in list `lid`, in class-id order, or NIL: O(1) in a row,
    /// O(log n) in a feed.
    #[inline]
    pub(super) fn next_of(&self, lid: usize, node: u32) -> u32 {
        if lid < ROWS {
            self.link(node).right
        } else {
            self.id_next_after(lid, node)
        }
    }

    /// Is `node` in list `lid`?
    pub(super) fn list_member(&self, lid: usize, node: u32) -> bool {
        let k = self.owner_of(node);
        if lid < ROWS {
            self.row_bits[lid].contains(k) && self.node_of(k, (lid % NUM_PRIO) as u8) == node
        } else {
            self.id_next_upper(lid, k) == node
        }
    }

    /// Check list `lid`'s order and structure (see [`Self::id_check`] for feeds): a row is a
    /// doubly linked list in strictly increasing id order holding exactly its bitmap's members.
    pub(super) fn list_check(&self, lid: usize) -> Result<usize, String> {
        if lid >= ROWS {
            return self.id_check(lid);
        }
        let head = self.lists[lid].head;
        if (head != NIL) != (self.row_mask[lid / NUM_PRIO] & (1 << (lid % NUM_PRIO)) != 0) {
            return Err(format!("row {lid}: row mask does not match head {head}"));
        }
        let mut len = 0;
        let mut prev = NIL;
        let mut x = head;
        let mut want = self.row_bits[lid].next_ge(0);
        while x != NIL {
            len += 1;
            if len > self.classes.len() + self.links.len() {
                return Err(format!("row {lid}: cycle"));
            }
            let k = self.owner_of(x);
            if k != want {
                return Err(format!("row {lid}: member {k} where the bitmap has {want}"));
            }
            let l = self.link(x);
            if l.left != prev {
                return Err(format!("row {lid}: node {x} links back to {}", l.left));
            }
            want = self.row_bits[lid].next_ge(k + 1);
            prev = x;
            x = l.right;
        }
        if want != NIL {
            return Err(format!("row {lid}: bitmap member {want} not in the list"));
        }
        Ok(len)
    }

    /// Move the cursor of list `lid` to the next member in id order (`htb_next_rb_node`).
    pub(super) fn advance_cursor(&mut self, lid: usize) {
        let cur = self.lists[lid].cursor;
        if cur != NIL {
            self.lists[lid].cursor = self.next_of(lid, cur);
            if lid < NUM_PRIO {
                self.row_skip_parked(lid);
            }
        }
    }

    pub(super) fn activate_leaf(&mut self, c: u32) {
        let cl = &mut self.classes[c as usize];
        let prio = self.profiles[cl.profile as usize].prio;
        cl.active = 1 << prio;
        if cl.mode == ClassMode::CanSend {
            // Straight into its row (what `activate_prios` does for a class that can send); a
            // leaf's node id is its class id.
            let level = cl.level;
            if level == 0 {
                let row = Self::row_id(0, prio);
                // Parked (still in its row since it ran empty): it is in its place already.
                if cl.link.left == NIL && cl.link.right == NIL && self.lists[row].head != c {
                    self.row_push::<true>(row, c, c);
                } else if !Self::dense_at(c, cl.link.right) {
                    self.warmth.sparse_parked(prio, true);
                }
            } else {
                self.row_push::<false>(Self::row_id(level, prio), c, c);
            }
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
            let level = cl.level;
            if level == 0 {
                self.row_remove::<true>(Self::row_id(0, prio), c, c);
            } else {
                self.row_remove::<false>(Self::row_id(level, prio), c, c);
            }
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
                        if self.lists[fid].head == NIL {
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
                        if self.lists[fid].head == NIL {
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
            // A row of leaves: its cursor is NIL or on an active leaf (`row_skip_parked`);
            // at the right end it wraps to the first active member, unhooking parked ones.
            let mut cur = self.lists[row].cursor;
            if cur == NIL {
                cur = self.lists[row].head;
                if cur == NIL {
                    return None;
                }
                self.lists[row].cursor = cur;
                self.row_skip_parked(row);
                cur = self.lists[row].cursor;
                if cur == NIL {
                    return None;
                }
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
            if self.lists[lid].head == NIL {
                return None;
            }
            // The class at the cursor left this feed: resume at it, or at the next id.
            let last = self.lists[lid].last;
            if last != NIL {
                if self.lists[lid].cursor == NIL {
                    self.lists[lid].cursor = self.id_next_upper(lid, last);
                }
                self.lists[lid].last = NIL;
            }
            if self.lists[lid].cursor == NIL {
                // At the right end: rewind, and move the cursor of the list above.
                self.lists[lid].cursor = self.lists[lid].head;
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
    /// only lines an earlier dequeue prefetched. The leaf three ahead gets its record (and
    /// counters) prefetched; the leaf two ahead, whose record is in, its queue's last slot (the
    /// first too when it holds one packet); the next leaf, whose last slot is in, its first slot
    /// when they differ, and its parent; and the leaf served now its parent.
    #[inline(always)]
    fn prefetch_next(&self, leaf: u32, lid: usize) {
        let n1 = self.next_of(lid, leaf);
        if let Some(c1) = self.classes.get(n1 as usize) {
            if c1.kind != LeafKind::Boxed && c1.q.len > 1 {
                if let Some(last) = self.pool.get(c1.q.tail as usize) {
                    if let Some(first) = self.pool.get(last.next as usize) {
                        prefetch(first);
                    }
                }
            }
            self.prefetch_class(c1.parent);
            let n2 = self.next_of(lid, n1);
            if let Some(c2) = self.classes.get(n2 as usize) {
                if c2.kind != LeafKind::Boxed {
                    if let Some(slot) = self.pool.get(c2.q.tail as usize) {
                        prefetch(slot);
                    }
                }
                self.prefetch_class(self.next_of(lid, n2));
            }
        }
        self.prefetch_class(self.classes[leaf as usize].parent);
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
                    let q = &mut self.boxed[cl.boxed()];
                    match q.dequeue(now) {
                        Dequeued::Packet(p) => {
                            let e = q.backlog().packets == 0;
                            (Some(p), e, None)
                        }
                        Dequeued::Empty => (None, true, None),
                        Dequeued::NotBefore(t) => (None, true, Some(t.0)),
                    }
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
                        if lid < NUM_PRIO && self.worth_parking(leaf, lid) {
                            self.park_leaf(leaf, lid);
                        } else {
                            self.deactivate_leaf(leaf);
                        }
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
