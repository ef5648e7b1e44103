//! Classes added to and removed from a running HTB in place ([`Htb::add_class`],
//! [`Htb::remove_class`]): a subscriber who joins or leaves among 100,000 costs what one costs
//! among ten, and no other class's buckets, counters, queue or list membership changes.
//!
//! Principles:
//! * **slots, not positions**: a class's id is its slot in the per-class arrays, and no class's
//!   id ever changes (the router's filters and its stats name classes by id). A class added
//!   takes the slot of the class removed last (a stack of retired slots), else a new slot at
//!   the end: the arrays grow by doubling (amortised O(1); the row bitmaps grow the same way
//!   when an id beyond them is first set, `rowbits`), never a walk of the classes. A class
//!   removed retires its slot: a record that is no class (no parent, no queue, in no list, no
//!   name, skipped by every reader), so after any number of add/remove cycles the tree holds at
//!   most as many slots as classes were alive at once. Inner indexes (with their feeds) and
//!   boxed leaf indexes are retired and reused the same way;
//! * **families with room**: a family's children sit in `Htb::children` from `Inner::first`,
//!   by rank (`feedbits`). A child added takes the rank of a sibling removed before it, else the
//!   next rank; a family out of room moves to the end of `children` with twice the room
//!   (amortised O(1); the region it leaves is not reused, and at most as large as the room the
//!   family has now), and a family that passes 64 children moves its feeds from words to
//!   bitmaps. Round robin goes by rank: in a tree built at once, or grown by adds at the end
//!   only, ranks follow class ids as in Linux; a reused slot or rank can order two siblings
//!   differently from a tree built afresh, which changes whose turn comes first in a round,
//!   not what anyone's share is (`tests_reshape` checks both);
//! * **a parent comes before its children**: an inner class is added empty (it has no child
//!   yet, and so is never active) and its children after it; a class with children is not
//!   removed (its children go first), nor is the default class (the filters name another one
//!   first), nor does a leaf take a child (a leaf that becomes a parent is a rebuild);
//! * **what a removed class held**: its queued packets are classified again by the filters in
//!   force — the caller installs the filters without the class first — as a rebuild's take-over
//!   does with the packets of a class that is gone (`adopt`), so the two paths agree: a
//!   subscriber renamed (removed under one name, added under another with the same addresses)
//!   keeps its packets, a packet no filter matches any more goes to the default class, and a
//!   packet its new leaf refuses is dropped there and counted. Linux's `tc class del` instead
//!   refuses a class that filters still point to and purges its queue (net/sched/sch_htb.c,
//!   `htb_delete`). What the class sent stays in its ancestors' totals (added to its parent's
//!   offset, `Counters`), as `adopt` keeps it. A boxed leaf qdisc stays in its slot, empty,
//!   until a class added later reuses the slot and hands it back for the caller to free off the
//!   datapath (the router's builder thread); meanwhile its per-flow state is released after the
//!   idle hold like any idle leaf's (`crate::qdisc::lazy`).
//!
//! Linux's equivalents are `tc class add` and `tc class del` (`htb_change_class` creating a
//! class, `htb_delete`). A take-over under way (`adopt`) is finished first, at once: O(n), for
//! a patch that comes within the few hundred loop turns of a rebuild's take-over.
use super::feedbits::SMALL_FAMILY;
use super::*;

/// The most class slots a tree holds: the list nodes of inner classes are numbered above them
/// (`INNER_NODES`).
pub const MAX_CLASSES: usize = 1 << 27;

/// The level of a retired slot's record.
pub(super) const RETIRED: u8 = u8::MAX;

/// The room a family's region gets when it first moves.
const FIRST_ROOM: u32 = 4;

/// The record of a retired slot.
fn retired() -> Class {
    Class {
        tokens: 0,
        ctokens: 0,
        t_c: 0,
        parent: NIL,
        profile: 0,
        deficit: [0; 2],
        q: LeafQ::EMPTY,
        rank: 0,
        level: RETIRED,
        kind: LeafKind::None,
        mode: ClassMode::CanSend,
        active: 0,
    }
}

/// The qdisc of a boxed leaf whose retired slot an added class took over: handed back for the
/// caller to free off the datapath.
pub type RetiredLeaf<P> = Box<dyn Qdisc<P>>;

impl<P: Packet> Htb<P> {
    /// The id the next [`Htb::add_class`] gives: the slot removed last, else a new one at the
    /// end.
    pub fn next_class_id(&self) -> ClassId {
        self.free
            .last()
            .copied()
            .unwrap_or(self.classes.len() as ClassId)
    }

    /// Add class `spec` (its `parent` an id of this tree) to the running tree: an inner class
    /// (`inner`: its children are added after it) or a leaf with `spec.leaf`. Its buckets start
    /// full, its counters at zero, its queue empty; nothing else changes. Returns its id
    /// ([`Htb::next_class_id`]) and, when it reuses the slot of a boxed leaf removed before,
    /// that leaf's qdisc, for the caller to free off the datapath. O(p) for `p` profiles in use
    /// (a handful of plans), amortised O(1) for the arrays and the family's region, plus
    /// O(name bytes) to store its name (`names`).
    pub fn add_class(
        &mut self,
        spec: HtbClassSpec<P>,
        inner: bool,
        now: Time,
    ) -> Result<(ClassId, Option<RetiredLeaf<P>>), HtbError> {
        self.adopt_finish_now(now);
        spec.validate()?;
        let HtbClassSpec {
            name,
            parent,
            rate,
            ceil,
            burst,
            cburst,
            prio,
            quantum,
            leaf,
        } = spec;
        let (family, level) = match parent {
            None => (NIL, if inner { (MAX_DEPTH - 1) as u8 } else { 0 }),
            Some(p) if !self.is_live(p) => {
                return Err(HtbError::UnknownParent {
                    class: name,
                    parent: p,
                })
            }
            Some(p) => {
                let pc = &self.classes[p as usize];
                if pc.is_leaf() {
                    return Err(HtbError::ParentIsLeaf {
                        class: name,
                        parent: self.name(p),
                    });
                }
                match (inner, pc.level) {
                    (false, _) => (pc.inner(), 0),
                    // An inner class needs a level of at least 1.
                    (true, l) if l >= 2 => (pc.inner(), l - 1),
                    (true, _) => return Err(HtbError::TooDeep { class: name }),
                }
            }
        };
        let c = self.next_class_id();
        if c as usize >= MAX_CLASSES {
            return Err(HtbError::TooDeep {
                class: "too many classes".into(),
            });
        }
        self.names
            .set(c as usize, &name)
            .map_err(|()| HtbError::TooDeep {
                class: "class names longer than 4 GiB in all".into(),
            })?;
        if c as usize == self.classes.len() {
            self.classes.push(retired());
            self.cold.push(Counters::default());
        } else {
            self.free.pop();
        }
        let mut q = LeafQ::EMPTY;
        let mut replaced = None;
        let (kind, limit) = if inner {
            q.tail = self.new_inner(c);
            (LeafKind::None, 0)
        } else {
            match leaf {
                LeafSpec::Fifo(FifoLimit::Packets(l)) => (LeafKind::Pfifo, l),
                LeafSpec::Fifo(FifoLimit::Bytes(l)) => (LeafKind::Bfifo, l),
                LeafSpec::Qdisc(b) => {
                    let (i, old) = self.new_boxed(b);
                    q.tail = i;
                    replaced = old;
                    (LeafKind::Boxed, 0)
                }
            }
        };
        let profile = Profile {
            rate: rate.0,
            ceil: ceil.0,
            buffer: nbits(burst as u64),
            cbuffer: nbits(cburst as u64),
            burst,
            cburst,
            quantum,
            limit: limit.min(LIMIT_MASK),
            prio,
        };
        let pid = self.intern_profile(profile, None);
        let rank = if family == NIL {
            0
        } else {
            self.family_add(family, c)
        };
        self.classes[c as usize] = Class {
            tokens: profile.buffer,
            ctokens: profile.cbuffer,
            t_c: 0,
            parent: parent.unwrap_or(NIL),
            profile: pid,
            deficit: [0; 2],
            q,
            rank,
            level,
            kind,
            mode: ClassMode::CanSend,
            active: 0,
        };
        self.cold[c as usize] = Counters::default();
        self.giants.remove(&c);
        Ok((c, replaced))
    }

    /// Remove class `c` (a leaf, or an inner class whose children are gone) from the running
    /// tree: its queued packets are classified again by the filters in force (install the
    /// filters without it first; module docs), what it sent stays in its ancestors' totals, and
    /// its slot is retired for the next class added. The report counts the packets
    /// reclassified, moved and dropped. O(its queue) plus O(depth) for each packet moved, and
    /// O(name bytes) for the names (`names`); no other class is touched but those its packets
    /// go to.
    pub fn remove_class(&mut self, c: ClassId, now: Time) -> Result<AdoptReport, HtbError> {
        self.adopt_finish_now(now);
        if !self.is_live(c) {
            return Err(HtbError::UnknownClass(c));
        }
        if c == self.default {
            return Err(HtbError::RemoveDefault(self.name(c)));
        }
        let cl = &self.classes[c as usize];
        let (parent, inner, kind, rank) = (cl.parent, cl.inner(), cl.kind, cl.rank);
        if inner != NIL && self.live_children(inner) > 0 {
            return Err(HtbError::HasChildren(self.name(c)));
        }
        self.names
            .set(c as usize, "")
            .map_err(|()| HtbError::UnknownClass(c))?;
        let pkts = if kind == LeafKind::None {
            Vec::new()
        } else {
            self.drain_leaf(c, now)
        };
        // Out of its wait queue (its entry goes stale), in no list (it is empty).
        let old_key = self.wait_key(c);
        self.change_mode(c, old_key, ClassMode::CanSend, now.0);
        debug_assert_eq!(self.classes[c as usize].active, 0);
        let k = self.cold[c as usize];
        if let Some(p) = self.cold.get_mut(parent as usize) {
            p.sent_packets = p.sent_packets.wrapping_add(k.sent_packets);
            p.sent_bytes = p.sent_bytes.wrapping_add(k.sent_bytes);
        }
        if parent != NIL {
            let pi = self.classes[parent as usize].inner();
            let at = (self.inner[pi as usize].first + rank) as usize;
            self.children[at] = NIL;
            self.free_ranks.entry(pi).or_default().push(rank);
        }
        if inner != NIL {
            let inn = &mut self.inner[inner as usize];
            inn.class = NIL;
            inn.count = 0;
            self.free_ranks.remove(&inner);
            for p in 0..NUM_PRIO as u8 {
                self.lists[Self::feed_id(inner, p)] = List::EMPTY;
            }
            self.free_inner.push(inner);
        }
        if kind == LeafKind::Boxed {
            self.free_boxed
                .push(self.classes[c as usize].boxed() as u32);
        }
        let pid = self.classes[c as usize].profile as usize;
        self.profile_refs[pid] -= 1;
        self.giants.remove(&c);
        self.cold[c as usize] = Counters::default();
        self.classes[c as usize] = retired();
        self.free.push(c);
        let mut report = AdoptReport::default();
        for pkt in pkts {
            report.reclassified += 1;
            let id = self.classifier.classify(pkt.meta());
            let to = match self.classes.get(id as usize) {
                Some(cl) if cl.is_leaf() => id,
                _ => self.default,
            };
            self.requeue(to, pkt, now, &mut report);
        }
        Ok(report)
    }

    /// Children of inner class `i` (by inner index) that are not removed.
    fn live_children(&self, i: u32) -> u32 {
        let holes = self.free_ranks.get(&i).map_or(0, Vec::len) as u32;
        self.inner[i as usize].count - holes
    }

    /// An inner index for new inner class `c`: one retired (with its family's region and
    /// feeds), else a new one. Amortised O(1).
    fn new_inner(&mut self, c: u32) -> u32 {
        if let Some(i) = self.free_inner.pop() {
            let inn = &mut self.inner[i as usize];
            inn.class = c;
            inn.count = 0;
            return i;
        }
        let i = self.inner.len() as u32;
        self.inner.push(Inner {
            class: c,
            first: self.children.len() as u32,
            count: 0,
            big: NIL,
        });
        self.family_cap.push(0);
        self.lists.extend([List::EMPTY; NUM_PRIO]);
        self.feed_words.extend([0u64; NUM_PRIO]);
        i
    }

    /// A boxed leaf index for `b`: one retired (its old qdisc handed back), else a new one.
    fn new_boxed(&mut self, b: Box<dyn Qdisc<P>>) -> (u32, Option<Box<dyn Qdisc<P>>>) {
        let hold = b.release_hold();
        let marked = b.stats().marked;
        if let Some(i) = self.free_boxed.pop() {
            self.idle.replace(i, hold);
            self.marks_seen[i as usize] = marked;
            let old = std::mem::replace(&mut self.boxed[i as usize], b);
            return (i, Some(old));
        }
        let i = self.boxed.len() as u32;
        self.boxed.push(b);
        self.marks_seen.push(marked);
        self.idle.push(hold);
        (i, None)
    }

    /// Put class `c` into the family of inner class `i`: its rank.
    fn family_add(&mut self, i: u32, c: u32) -> u32 {
        if let Some(holes) = self.free_ranks.get_mut(&i) {
            if let Some(r) = holes.pop() {
                if holes.is_empty() {
                    self.free_ranks.remove(&i);
                }
                let at = (self.inner[i as usize].first + r) as usize;
                self.children[at] = c;
                return r;
            }
        }
        let inn = &self.inner[i as usize];
        let (first, count) = (inn.first as usize, inn.count);
        if count == self.family_cap[i as usize] {
            // Out of room: the family moves to the end with twice the room.
            let room = (count * 2).max(FIRST_ROOM);
            let to = self.children.len();
            self.children
                .extend_from_within(first..first + count as usize);
            self.children.resize(to + room as usize, NIL);
            self.children[first..first + count as usize].fill(NIL);
            self.inner[i as usize].first = to as u32;
            self.family_cap[i as usize] = room;
        }
        let inn = &mut self.inner[i as usize];
        inn.count += 1;
        let at = (inn.first + count) as usize;
        self.children[at] = c;
        if count == SMALL_FAMILY {
            self.family_to_big(i);
        }
        count
    }

    /// Family `i` has just grown past 64: its feeds move from words to bitmaps (`feedbits`).
    /// O(members + room / 64).
    fn family_to_big(&mut self, i: u32) {
        let inn = &mut self.inner[i as usize];
        if inn.big == NIL {
            inn.big = (self.feed_big.len() / NUM_PRIO) as u32;
            self.feed_big
                .extend(vec![rowbits::RowBits::default(); NUM_PRIO]);
        }
        let (big, room) = (inn.big as usize, self.family_cap[i as usize] as usize);
        for p in 0..NUM_PRIO {
            let mut w = std::mem::take(&mut self.feed_words[i as usize * NUM_PRIO + p]);
            while w != 0 {
                self.feed_big[big * NUM_PRIO + p].insert(w.trailing_zeros(), room);
                w &= w - 1;
            }
        }
    }

    /// Bytes of what adding and removing in place keeps beside the arrays: the families'
    /// room, the retired inner and boxed indexes and the ranks freed (a `HashMap` entry as its
    /// key, its vector and a control byte, `memory_parts`).
    pub(super) fn reshape_bytes(&self) -> usize {
        self.family_cap.capacity() * 4
            + (self.free_inner.capacity() + self.free_boxed.capacity()) * 4
            + self.free_ranks.capacity() * (std::mem::size_of::<(u32, Vec<u32>)>() + 1)
            + self
                .free_ranks
                .values()
                .map(|v| v.capacity() * 4)
                .sum::<usize>()
    }

    /// Check what adding and removing in place keeps (tests, through
    /// [`Htb::check_invariants`]): retired slots are the free ones; every family's region
    /// holds its children at their ranks and a hole for each rank freed; every profile counts
    /// the classes on it. O(n).
    pub(super) fn check_reshaped(&self) -> Result<(), String> {
        let retired = self.classes.iter().filter(|c| c.level == RETIRED).count();
        if retired != self.free.len() || self.free.iter().any(|&c| self.is_live(c)) {
            return Err(format!("{retired} retired slots, {} free", self.free.len()));
        }
        let mut refs = vec![0u32; self.profiles.len()];
        for cl in self.classes.iter().filter(|c| c.level != RETIRED) {
            refs[cl.profile as usize] += 1;
        }
        if refs != self.profile_refs {
            return Err(format!(
                "profile uses {refs:?}, counted {:?}",
                self.profile_refs
            ));
        }
        let mut retired_inner = 0;
        for (i, inn) in self.inner.iter().enumerate() {
            if inn.class == NIL {
                retired_inner += 1;
                continue;
            }
            if self.classes[inn.class as usize].inner() != i as u32 {
                return Err(format!("inner {i}: class {} is not it", inn.class));
            }
            if inn.count > self.family_cap[i] {
                return Err(format!(
                    "inner {i}: {} children in room for {}",
                    inn.count, self.family_cap[i]
                ));
            }
            let holes = self.free_ranks.get(&(i as u32)).map_or(0, Vec::len);
            let mut nil = 0;
            for r in 0..inn.count {
                let c = self.children[(inn.first + r) as usize];
                if c == NIL {
                    nil += 1;
                } else if self.classes[c as usize].parent != inn.class
                    || self.classes[c as usize].rank != r
                {
                    return Err(format!(
                        "inner {i}: class {c} at rank {r} is not that child"
                    ));
                }
            }
            if nil != holes {
                return Err(format!("inner {i}: {nil} holes, {holes} ranks free"));
            }
        }
        if retired_inner != self.free_inner.len() {
            return Err(format!(
                "{retired_inner} inner indexes retired, {} free",
                self.free_inner.len()
            ));
        }
        Ok(())
    }
}
