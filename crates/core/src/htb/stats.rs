//! HTB's read side: per-class counters and views (`tc -s class show`), the memory it holds, and
//! the internal invariants the tests check.
//!
//! Principles: reading never changes state; the views are built in tree order (parents before
//! children) with each inner class's backlog and sends the sums of its subtree's (the charge
//! counts a packet's sends at its leaf alone, `Counters`), in one O(n · depth) pass;
//! the per-class counters are 32-bit and wrap like Linux's `tc_htb_xstats` (net/sched/sch_htb.c
//! `htb_dump_class_stats`), while the qdisc-wide ones come from the books.
use super::*;

impl<P: Packet> Htb<P> {
    /// Bytes this scheduler holds on the heap for its classes, lists, names and packet pool
    /// (boxed leaf qdiscs and queued packets' own heap data not included): the sum of
    /// [`Self::memory_parts`].
    pub fn memory_bytes(&self) -> usize {
        self.memory_parts().iter().map(|&(_, b)| b).sum()
    }

    /// [`Self::memory_bytes`] part by part (the wait queues' nodes, a few per throttled class,
    /// and the classifier are not counted; the allocator test `htb_memory` checks that what is
    /// left out is small).
    pub fn memory_parts(&self) -> Vec<(&'static str, usize)> {
        use std::mem::size_of;
        // A `HashMap` entry costs its key and value and one control byte (hashbrown).
        let giants = self.giants.capacity() * (size_of::<(u32, u32)>() + 1);
        vec![
            (
                "class records",
                self.classes.capacity() * size_of::<Class>() + self.free.capacity() * 4,
            ),
            ("counters", self.cold.capacity() * size_of::<Counters>()),
            ("giants", giants),
            ("profiles", self.profiles.capacity() * size_of::<Profile>()),
            ("names", self.names.heap_bytes()),
            ("packet pool", self.pool.heap_bytes()),
            (
                "boxed leaves",
                self.boxed.capacity() * size_of::<Box<dyn Qdisc<P>>>()
                    + self.marks_seen.capacity() * 8
                    + self.idle.heap_bytes(),
            ),
            (
                "inner lists",
                self.inner.capacity() * size_of::<Inner>()
                    + self.lists.capacity() * size_of::<List>()
                    + self.feed_bytes()
                    + self.reshape_bytes(),
            ),
            (
                "row bitmaps",
                self.row_bits.iter().map(|r| r.bytes()).sum::<usize>(),
            ),
        ]
    }

    /// Heap bytes of the boxed leaf qdiscs: their records (fixed) and the per-flow state they
    /// hold now (`crate::qdisc::lazy`). O(boxed leaves) and O(flows) per built table: for
    /// reports, not for the datapath.
    pub fn leaf_bytes(&self) -> (usize, usize) {
        self.boxed.iter().fold((0, 0), |(f, s), q| {
            (f + std::mem::size_of_val(q.as_ref()), s + q.state_bytes())
        })
    }

    /// How long a boxed leaf stays empty before [`Qdisc::reclaim_idle`] releases its per-flow
    /// state (`crate::qdisc::lazy`).
    pub fn idle_hold(&self) -> crate::units::Duration {
        self.idle.hold()
    }

    /// Set that hold; never below what the leaves need to make a release invisible.
    pub fn set_idle_hold(&mut self, hold: crate::units::Duration) {
        let floor = self
            .boxed
            .iter()
            .filter_map(|q| q.release_hold())
            .max()
            .unwrap_or_default();
        self.idle.set_hold(hold, floor);
    }

    /// The counters of one class. O(1) for a leaf; O(n · depth) for an inner class, whose sends
    /// are its leaves' sum ([`Self::sent_totals`]).
    pub fn class_stats(&self, id: ClassId) -> Option<ClassStats> {
        let cl = self.classes.get(id as usize).filter(|_| self.is_live(id))?;
        let mut s = self.cold[id as usize].stats(self.giants_of(id), self.leaf_marked(cl));
        if !cl.is_leaf() {
            s.sent = self.sent_totals()[id as usize];
        }
        Some(s)
    }

    /// What every class sent: a leaf's own counters, and for an inner class the sum over its
    /// subtree of the leaves' and of the inner classes' offsets (`Counters`), wrapping. One
    /// pass, O(n · depth).
    pub(super) fn sent_totals(&self) -> Vec<Counter> {
        let mut sent = vec![Counter::default(); self.classes.len()];
        for (i, k) in self.cold.iter().enumerate().take(self.classes.len()) {
            if k.sent_packets == 0 && k.sent_bytes == 0 {
                continue;
            }
            let mut x = i as u32;
            while let Some(s) = sent.get_mut(x as usize) {
                s.packets = s.packets.wrapping_add(k.sent_packets);
                s.bytes = s.bytes.wrapping_add(k.sent_bytes);
                x = self.classes[x as usize].parent;
            }
        }
        sent
    }

    /// ECN marks of a class's leaf qdisc (inline FIFOs never mark).
    pub(super) fn leaf_marked(&self, cl: &Class) -> u64 {
        match cl.kind {
            LeafKind::Boxed => self.boxed[cl.boxed()].stats().marked,
            _ => 0,
        }
    }

    /// Check the internal invariants (tests): activity matches backlog, list membership matches
    /// mode, wait queue matches mode, backlog equals the sum of leaf backlogs, every inline FIFO
    /// is well linked, the pool holds as many packets as the FIFOs and its stack of vacant lines
    /// is right (`pool`). O(n log n + s) for n classes and s pool slots (each expected
    /// membership looked up in its list, then the lists' sizes against the count expected; the
    /// wait queues counted in one pass; each FIFO and the pool walked once), so it runs on trees
    /// of a million classes.
    pub fn check_invariants(&self) -> Result<(), String> {
        // Every list: in id order, its bitmap consistent, its cursor a member or
        // cleared, a remembered id only in a feed whose cursor is cleared.
        let (mut in_rows, mut in_feeds) = (0, 0);
        for (lid, list) in self.lists.iter().enumerate() {
            let len = self.list_check(lid)?;
            if lid < ROWS {
                in_rows += len;
            } else {
                in_feeds += len;
            }
            if list.cursor != NIL && !self.list_member(lid, list.cursor) {
                return Err(format!("list {lid}: cursor {} not a member", list.cursor));
            }
            if list.last != NIL && (lid < ROWS || list.cursor != NIL) {
                return Err(format!(
                    "list {lid}: last id {} with cursor {}",
                    list.last, list.cursor
                ));
            }
        }
        if self.deferred.base != NIL {
            return Err(format!(
                "charges of class {} and up deferred outside a burst",
                self.deferred.base
            ));
        }
        // Which classes have a current entry in the wait queue of their level (in one pass:
        // stale entries are allowed, `waitq`), how many are not `CanSend` at each level, and
        // which leaves wait on their own qdisc.
        let mut filed = vec![false; self.classes.len()];
        let mut waiting = [0usize; MAX_DEPTH];
        for cl in self.classes.iter() {
            if cl.mode != ClassMode::CanSend {
                waiting[cl.level as usize] += 1;
            }
        }
        for (l, q) in self.wait.iter().enumerate() {
            for (k, x) in q.entries() {
                match self.classes.get(x as usize) {
                    Some(cl) if cl.level as usize == l => {
                        filed[x as usize] |=
                            tokens::is_current(&self.classes, &self.profiles, l, k, x)
                    }
                    // Left by a class removed in place (`reshape`): stale by its level (a
                    // class filed at the wrong level would show below, as not filed at all).
                    Some(_) => {}
                    None => return Err(format!("class {x} in the wait queue of level {l}")),
                }
            }
            if q.members() != waiting[l] || !q.bounded() {
                return Err(format!(
                    "wait queue of level {l}: {} members counted, {} classes not CanSend, {} entries",
                    q.members(),
                    waiting[l],
                    q.len()
                ));
            }
        }
        let mut leaf_waits = vec![false; self.classes.len()];
        for &(_, l) in &self.leaf_wait {
            if let Some(w) = leaf_waits.get_mut(l as usize) {
                *w = true;
            }
        }
        let mut sum = Backlog::default();
        let (mut in_rows_expected, mut in_feeds_expected) = (0, 0);
        // As many slots of the pool hold a packet as the FIFOs hold (`pool`).
        let mut in_fifos = 0usize;
        for (i, cl) in self.classes.iter().enumerate() {
            let c = i as u32;
            if cl.level == reshape::RETIRED {
                if cl.active != 0 || cl.q.len != 0 || cl.parent != NIL || cl.inner() != NIL {
                    return Err(format!("retired slot {c} holds something"));
                }
                continue;
            }
            let name = self.name(c);
            if matches!(cl.kind, LeafKind::Pfifo | LeafKind::Bfifo) {
                in_fifos += self.fifo_check(c)? as usize;
            }
            if cl.is_leaf() {
                let b = self.leaf_backlog(c);
                sum.packets += b.packets;
                sum.bytes += b.bytes;
                let throttled_leaf = leaf_waits[i];
                if (b.packets > 0) != (cl.active != 0) && !throttled_leaf {
                    return Err(format!(
                        "leaf {name}: backlog {} but active {:#x}",
                        b.packets, cl.active
                    ));
                }
            }
            // The charge's same-instant path relies on it: no level above its bucket size.
            let pr = self.prof(c);
            if cl.tokens > pr.buffer || cl.ctokens > pr.cbuffer {
                return Err(format!(
                    "class {name}: tokens {} / {} above the bucket sizes {} / {}",
                    cl.tokens, cl.ctokens, pr.buffer, pr.cbuffer
                ));
            }
            let in_wait = filed[i];
            if (cl.mode != ClassMode::CanSend) != in_wait {
                return Err(format!(
                    "class {name}: mode {:?} but in wait queue: {in_wait}",
                    cl.mode
                ));
            }
            if cl.inner() != NIL {
                for p in 0..NUM_PRIO as u8 {
                    let nonempty = !self.feed_is_empty(Self::feed_id(cl.inner(), p));
                    if nonempty != (cl.active & (1 << p) != 0) {
                        return Err(format!(
                            "inner {name}: feed {p} non-empty {nonempty} vs active {:#x}",
                            cl.active
                        ));
                    }
                }
            }
            // Membership: each active node is in the list its mode names. That every other
            // node (an idle leaf's, a throttled class's) is in none, and no node in two, follows
            // from the counts below: the lists hold exactly the memberships expected.
            for p in bits(cl.active) {
                let node = self.node_of(c, p);
                let expect = match cl.mode {
                    ClassMode::CanSend => Some(Self::row_id(cl.level, p)),
                    ClassMode::MayBorrow if cl.parent != NIL => {
                        Some(Self::feed_id(self.classes[cl.parent as usize].inner(), p))
                    }
                    _ => None,
                };
                if let Some(l) = expect {
                    if !self.list_member(l, node) {
                        return Err(format!(
                            "class {name} prio {p}: not in list {l}, found in {:?}",
                            self.list_contains_any(node)
                        ));
                    }
                    if l < ROWS {
                        in_rows_expected += 1;
                    } else {
                        in_feeds_expected += 1;
                    }
                }
            }
        }
        // Every expected membership was found above; so the lists hold nothing else. O(n) in
        // all: a search of every list for every node would be O(n²) at a million classes.
        if (in_rows, in_feeds) != (in_rows_expected, in_feeds_expected) {
            let stray = (0..self.classes.len() as u32).find_map(|c| self.stray_membership(c));
            return Err(format!(
                "rows hold {in_rows} members and feeds {in_feeds}, {in_rows_expected} and \
                 {in_feeds_expected} expected (a class not active there: {stray:?})"
            ));
        }
        self.pool.check(in_fifos)?;
        self.check_reshaped()?;
        if sum != self.books.backlog() {
            return Err(format!(
                "backlog {:?} != sum of leaves {:?}",
                self.books.backlog(),
                sum
            ));
        }
        self.books.stats().check_conservation()
    }

    /// A list that holds a node of class `c` it should not (an idle leaf, a prio the class is
    /// not active at), for the message of a failed [`Self::check_invariants`]: O(lists).
    fn stray_membership(&self, c: u32) -> Option<String> {
        let cl = &self.classes[c as usize];
        let prios: Vec<u8> = if cl.is_leaf() {
            // A leaf has one node whatever its prio.
            if cl.active != 0 {
                return None;
            }
            vec![0]
        } else {
            (0..NUM_PRIO as u8)
                .filter(|p| cl.active & (1 << p) == 0)
                .collect()
        };
        prios.into_iter().find_map(|p| {
            let l = self.list_contains_any(self.node_of(c, p))?;
            Some(format!(
                "{} (active {:#x}) in list {l}",
                self.name(c),
                cl.active
            ))
        })
    }

    pub(super) fn list_contains_any(&self, node: u32) -> Option<usize> {
        (0..self.lists.len()).find(|&lid| self.list_member(lid, node))
    }

    /// Bytes in a nano-bit amount, for display.
    pub(super) fn nbits_to_bytes(v: i64) -> i64 {
        v / NBITS_PER_BYTE
    }

    /// The leaf qdisc of class `c` when it is a boxed one (not an inline FIFO): for the stats
    /// copy to read what only the discipline knows (CAKE's tins). O(1), no allocation.
    pub fn leaf_qdisc(&self, c: ClassId) -> Option<&dyn Qdisc<P>> {
        let cl = self.classes.get(c as usize)?;
        match cl.kind {
            LeafKind::Boxed => self.boxed.get(cl.boxed()).map(|b| b.as_ref()),
            _ => None,
        }
    }

    /// Class `c`'s numbers in O(1), without its name and without allocating: what a reader
    /// copies class by class off a running scheduler (the router's stats plane copies a few
    /// thousand per loop turn). Unlike [`Qdisc::visit_classes`], the sends and backlog are the
    /// class's own ([`CounterView`]); a subtree's sums are the reader's to add up. `None` past
    /// the last class and for a slot retired by [`Htb::remove_class`].
    pub fn counter_view(&self, c: ClassId) -> Option<CounterView> {
        let cl = self.classes.get(c as usize).filter(|_| self.is_live(c))?;
        let pr = self.prof(c);
        let k = self.cold[c as usize];
        let drops = k.drops as u64;
        let mut leaf_drops = DropCounts::default();
        match cl.kind {
            LeafKind::Boxed => {
                let s = self.boxed[cl.boxed()].stats();
                leaf_drops = s.refused.clone();
                for (r, cnt) in s.dropped.iter() {
                    leaf_drops.add_counter(r, cnt);
                }
            }
            // Inline FIFOs count dropped packets per class (bytes per reason are in the
            // qdisc-wide stats).
            LeafKind::Pfifo => leaf_drops.add_counter(
                DropReason::QueueLimit,
                Counter {
                    packets: drops,
                    bytes: 0,
                },
            ),
            LeafKind::Bfifo => leaf_drops.add_counter(
                DropReason::ByteLimit,
                Counter {
                    packets: drops,
                    bytes: 0,
                },
            ),
            LeafKind::None => {}
        }
        Some(CounterView {
            id: c,
            parent: (cl.parent != NIL).then_some(cl.parent),
            level: cl.level,
            is_leaf: cl.is_leaf(),
            rate: Rate(pr.rate),
            ceil: Rate(pr.ceil),
            prio: pr.prio,
            mode: cl.mode,
            tokens: Self::nbits_to_bytes(cl.tokens),
            ctokens: Self::nbits_to_bytes(cl.ctokens),
            stats: k.stats(self.giants_of(c), self.leaf_marked(cl)),
            backlog: self.leaf_backlog(c),
            leaf_drops,
        })
    }

    pub(super) fn visit(&self, f: &mut dyn FnMut(&ClassView<'_>)) {
        let sent = self.sent_totals();
        // Backlog of every class (a subtree's for inner classes): one pass, O(n · depth).
        let mut backlogs = vec![Backlog::default(); self.classes.len()];
        for (i, cl) in self.classes.iter().enumerate() {
            if cl.is_leaf() {
                let b = self.leaf_backlog(i as u32);
                let mut x = i as u32;
                while x != NIL {
                    backlogs[x as usize].packets += b.packets;
                    backlogs[x as usize].bytes += b.bytes;
                    x = self.classes[x as usize].parent;
                }
            }
        }
        for c in self.tree_order() {
            let Some(v) = self.counter_view(c) else {
                continue;
            };
            let mut stats = v.stats;
            stats.sent = sent[c as usize];
            f(&ClassView {
                name: &self.name(c),
                parent: v.parent,
                id: c,
                level: v.level,
                is_leaf: v.is_leaf,
                rate: v.rate,
                ceil: v.ceil,
                prio: v.prio,
                mode: v.mode,
                tokens: v.tokens,
                ctokens: v.ctokens,
                stats,
                backlog: backlogs[c as usize],
                avgidle_ns: None,
                hfsc: None,
                leaf_drops: v.leaf_drops,
            });
        }
    }
}

/// One class's numbers as [`Htb::counter_view`] reads them: a [`ClassView`] without the name,
/// with the class's own counters. `stats.sent` is a leaf's own sends and, for an inner class,
/// its stored offset (`Counters`: what it is credited beyond its leaves' sum, usually 0), so
/// that a class's total is the wrapping sum of `stats.sent` over its subtree; `backlog` is a
/// leaf's queue and 0 for an inner class.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CounterView {
    pub id: ClassId,
    pub parent: Option<ClassId>,
    pub level: u8,
    pub is_leaf: bool,
    pub rate: Rate,
    pub ceil: Rate,
    pub prio: u8,
    pub mode: ClassMode,
    pub tokens: i64,
    pub ctokens: i64,
    pub stats: ClassStats,
    pub backlog: Backlog,
    pub leaf_drops: DropCounts,
}

impl Counters {
    /// The counters as `stat` shows them, with the leaf qdisc's ECN marks.
    fn stats(self, giants: u32, marked: u64) -> ClassStats {
        ClassStats {
            sent: Counter {
                packets: self.sent_packets,
                bytes: self.sent_bytes,
            },
            drops: self.drops as u64,
            overlimits: self.overlimits as u64,
            lends: self.lends as u64,
            borrows: self.borrows as u64,
            giants: giants as u64,
            marked,
        }
    }
}
