//! CBQ's read side: per-class views (`tc -s class show`) and the internal invariants the tests
//! check.
//!
//! Principles: reading never changes state; views are built in tree order with each inner
//! class's backlog the sum of its subtree's; the invariants state what the lists of `rings`
//! promise (each backlogged leaf in exactly one place) and that the books balance. The counters
//! follow Linux net/sched/sch_cbq.c `cbq_dump_class_stats` (`borrows`, `overactions`, `avgidle`,
//! `undertime`).
use super::*;

impl<P: Packet> Cbq<P> {
    /// Check the internal invariants (tests): ring / sleep membership matches backlog, subtree
    /// counts, unsatisfied sets, backlog sums, conservation. O(n · d + n log n).
    pub fn check_invariants(&self) -> Result<(), String> {
        let n = self.classes.len();
        let mut sum = Backlog::default();
        let mut active = vec![0u32; n];
        let mut ring_count = vec![0u32; n];
        for (p, r) in self.rings.iter().enumerate() {
            for &c in r {
                ring_count[c as usize] += 1;
                if self.classes[c as usize].prio as usize != p {
                    return Err(format!("class {c} in ring {p}"));
                }
            }
        }
        for (i, cl) in self.classes.iter().enumerate() {
            let c = i as u32;
            let b = self.leaf_backlog(c);
            sum.packets += b.packets;
            sum.bytes += b.bytes;
            let backlogged = b.packets > 0;
            if backlogged {
                let mut x = c;
                while x != NIL {
                    active[x as usize] += 1;
                    x = self.classes[x as usize].parent;
                }
            }
            let fb = cl.fblocked.is_some();
            if fb {
                let (h, g) = cl.fblocked.unwrap_or((0, 0));
                let key = (cl.fkey, c);
                if !self.fblocked[h as usize * NUM_PRIO + cl.prio as usize].contains(&(c, g))
                    || !self.fblock_u.contains(&key)
                    || cl.in_ring
                    || cl.blocked
                {
                    return Err(format!("{}: formal block out of step", cl.name));
                }
            }
            let in_ring = (ring_count[i] == 1 && cl.in_ring) || cl.blocked || fb;
            if cl.blocked != self.blocked[cl.prio as usize].contains(&c)
                || (cl.blocked && cl.in_ring)
            {
                return Err(format!("{}: blocked list out of step", cl.name));
            }
            if ring_count[i] > 1 || (ring_count[i] == 1) != cl.in_ring {
                return Err(format!(
                    "{}: ring count {} in_ring {}",
                    cl.name, ring_count[i], cl.in_ring
                ));
            }
            let slept = cl.asleep
                && self.sleep_u.contains(&(cl.sleep_u, c))
                && self.sleep_t.contains(&(cl.sleep_t, c));
            if cl.asleep != slept {
                return Err(format!("{}: asleep but not filed", cl.name));
            }
            if backlogged != (in_ring ^ cl.asleep) || (in_ring && cl.asleep) {
                return Err(format!(
                    "{}: backlogged {backlogged}, in ring {in_ring}, asleep {}",
                    cl.name, cl.asleep
                ));
            }
            if cl.asleep != self.sleep_borrowers[cl.prio as usize].contains(&c) && cl.borrow {
                return Err(format!("{}: sleeping borrower set", cl.name));
            }
        }
        if self.fblock_u.len() != self.classes.iter().filter(|c| c.fblocked.is_some()).count() {
            return Err("formal block set out of step".into());
        }
        if self.sleep_u.len() != self.sleep_t.len()
            || self.sleep_u.len() != self.classes.iter().filter(|c| c.asleep).count()
        {
            return Err("sleep sets out of step".into());
        }
        let mut unsat_len = 0;
        // The heaps' entries, once per height: the check stays O(n + entries).
        let heaps: Vec<std::collections::HashSet<(u64, u32)>> =
            self.unsat.iter().map(|s| s.filed().1.collect()).collect();
        let mut zeros = vec![0usize; self.unsat.len()];
        for (i, cl) in self.classes.iter().enumerate() {
            if active[i] != cl.active {
                return Err(format!(
                    "{}: active {} != {}",
                    cl.name, cl.active, active[i]
                ));
            }
            let (k, h) = (cl.undertime.unwrap_or(0), cl.height as usize);
            if cl.active > 0 {
                let (Some(z), Some(heap)) = (zeros.get_mut(h), heaps.get(h)) else {
                    return Err(format!("{}: height {h} has no unsatisfied set", cl.name));
                };
                if k == 0 {
                    *z += 1;
                } else if !heap.contains(&(k, i as u32)) {
                    return Err(format!("{}: not in its unsatisfied set", cl.name));
                }
                unsat_len += 1;
            }
        }
        if unsat_len != self.unsat.iter().map(|s| s.len()).sum::<usize>()
            || (0..self.unsat.len()).any(|h| self.unsat[h].filed().0 != zeros[h])
        {
            return Err("unsatisfied sets count other members".into());
        }
        let classes = &self.classes;
        if !self
            .unsat
            .iter()
            .all(|s| s.top_is_current(|k, y| filed_with(classes, k, y)))
        {
            return Err("a stale entry on top of an unsatisfied set".into());
        }
        if sum != self.books.backlog() {
            return Err(format!(
                "backlog {:?} != sum of leaves {:?}",
                self.books.backlog(),
                sum
            ));
        }
        self.books.stats().check_conservation()
    }

    pub(super) fn visit(&self, f: &mut dyn FnMut(&ClassView<'_>)) {
        let mut backlogs = vec![Backlog::default(); self.classes.len()];
        for i in 0..self.classes.len() {
            let b = self.leaf_backlog(i as u32);
            if b.packets == 0 && b.bytes == 0 {
                continue;
            }
            let mut x = i as u32;
            while x != NIL {
                backlogs[x as usize].packets += b.packets;
                backlogs[x as usize].bytes += b.bytes;
                x = self.classes[x as usize].parent;
            }
        }
        for &c in &self.order {
            let cl = &self.classes[c as usize];
            let mut leaf_drops = DropCounts::default();
            match &cl.leaf {
                Leaf::Boxed(b) => {
                    let s = b.stats();
                    leaf_drops = s.refused.clone();
                    for (r, cnt) in s.dropped.iter() {
                        leaf_drops.add_counter(r, cnt);
                    }
                }
                Leaf::Fifo(q) => {
                    let reason = match q.limit() {
                        FifoLimit::Packets(_) => DropReason::QueueLimit,
                        FifoLimit::Bytes(_) => DropReason::ByteLimit,
                    };
                    leaf_drops.add_counter(
                        reason,
                        Counter {
                            packets: cl.drops,
                            bytes: 0,
                        },
                    );
                }
                Leaf::Inner => {}
            }
            let mode = match (cl.undertime, cl.borrow) {
                (None, _) => ClassMode::CanSend,
                (Some(_), true) => ClassMode::MayBorrow,
                (Some(_), false) => ClassMode::CantSend,
            };
            f(&ClassView {
                name: &cl.name,
                parent: (cl.parent != NIL).then_some(cl.parent),
                id: c,
                level: cl.height,
                is_leaf: !matches!(cl.leaf, Leaf::Inner),
                rate: Rate(cl.rate),
                ceil: if cl.borrow {
                    self.params.link
                } else {
                    Rate(cl.rate)
                },
                prio: cl.prio,
                mode,
                tokens: 0,
                ctokens: 0,
                stats: ClassStats {
                    sent: cl.sent,
                    drops: cl.drops,
                    overlimits: cl.overlimits,
                    lends: cl.lends,
                    borrows: cl.borrows,
                    giants: 0,
                    marked: cl.leaf_marked(),
                },
                backlog: backlogs[c as usize],
                leaf_drops,
                avgidle_ns: Some(cl.est.avgidle_ns()),
                hfsc: None,
            });
        }
    }
}
