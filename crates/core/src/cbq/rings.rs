//! CBQ's lists: the per-priority rings of awake backlogged leaves, the sleepers (suspended by the
//! delay action), the leaves parked by the top-level cutoff or the formal guideline, the sets of
//! classes with a backlogged descendant per height, and the top-level cutoff.
//!
//! Principles: a backlogged leaf is in exactly one of: its ring, asleep, parked (blocked by the
//! cutoff, or by the formal rule until a level is satisfied); every move between them is one of
//! the functions here, so the scheduler's invariants (`check_invariants`) are local to this file.
//! Linux net/sched/sch_cbq.c keeps the same states (`active[prio]` rings, `wd_expires`,
//! `toplevel`), ALTQ's altq_rmclass.c the cutoff rules (`rmc_tl_satisfied`, seed 001 §2.1).
use super::*;

impl<P: Packet> Cbq<P> {
    /// A leaf got its first packet: count it up the tree and put it in its ring.
    pub(super) fn activate(&mut self, c: u32) {
        let mut x = c;
        while x != NIL {
            let cl = &mut self.classes[x as usize];
            cl.active += 1;
            if cl.active == 1 {
                let (k, h) = (cl.undertime.unwrap_or(0), cl.height as usize);
                let classes = &self.classes;
                self.unsat[h].insert(k, x, |k, y| filed_with(classes, k, y));
            }
            x = self.classes[x as usize].parent;
        }
        let cl = &mut self.classes[c as usize];
        if !cl.asleep && !cl.in_ring && !cl.blocked && cl.fblocked.is_none() {
            cl.in_ring = true;
            cl.alloc = 0;
            self.rings[cl.prio as usize].push_back(c);
        }
    }

    /// A leaf became empty (it is no longer in its ring nor asleep when this is called).
    pub(super) fn deactivate(&mut self, c: u32) {
        let mut x = c;
        while x != NIL {
            let cl = &mut self.classes[x as usize];
            let was = cl.active;
            cl.active = cl.active.saturating_sub(1);
            if was == 1 {
                let (k, h) = (cl.undertime.unwrap_or(0), cl.height as usize);
                let classes = &self.classes;
                self.unsat[h].remove(k, |k, y| filed_with(classes, k, y));
            }
            x = self.classes[x as usize].parent;
        }
    }

    pub(super) fn unsleep(&mut self, c: u32) {
        let cl = &mut self.classes[c as usize];
        if !cl.asleep {
            return;
        }
        cl.asleep = false;
        let (u, t, p) = (cl.sleep_u, cl.sleep_t, cl.prio as usize);
        self.sleep_u.remove(&(u, c));
        self.sleep_t.remove(&(t, c));
        self.sleep_borrowers[p].remove(&c);
    }

    /// End a suspension: the class is underlimit again (ALTQ clears `undertime` both when a
    /// dequeue finds the suspension over and when the timer fires).
    pub(super) fn wake(&mut self, c: u32) {
        self.unsleep(c);
        self.set_undertime(c, None);
        if self.leaf_backlog(c).packets > 0 {
            let cl = &mut self.classes[c as usize];
            if !cl.in_ring && !cl.blocked && cl.fblocked.is_none() {
                cl.in_ring = true;
                cl.alloc = 0;
                self.rings[cl.prio as usize].push_back(c);
            }
        }
    }

    /// Change the top-level cutoff; a rise returns the parked leaves to their rings.
    pub(super) fn set_cutoff(&mut self, v: u32) {
        let old = self.cutoff;
        self.cutoff = v;
        if v > old {
            for p in 0..NUM_PRIO {
                for c in std::mem::take(&mut self.blocked[p]) {
                    let cl = &mut self.classes[c as usize];
                    cl.blocked = false;
                    cl.in_ring = true;
                    cl.alloc = 0;
                    self.rings[p].push_back(c);
                }
            }
        }
    }

    /// Park the leaf at the front of ring `p` until the cutoff rises.
    pub(super) fn block_front(&mut self, p: usize) {
        if let Some(c) = self.rings[p].pop_front() {
            let cl = &mut self.classes[c as usize];
            cl.in_ring = false;
            cl.blocked = true;
            self.blocked[p].push(c);
        }
    }

    /// Park the leaf at the front of ring `p`, refused by the formal rule for a lender at
    /// `level`.
    pub(super) fn fblock_front(&mut self, p: usize, level: u8, until: u64) {
        if let Some(c) = self.rings[p].pop_front() {
            let cl = &mut self.classes[c as usize];
            cl.in_ring = false;
            cl.fgen = cl.fgen.wrapping_add(1);
            cl.fblocked = Some((level, cl.fgen));
            cl.fkey = until;
            let key = (until, c);
            self.fblocked[level as usize * NUM_PRIO + p].push_back((c, cl.fgen));
            self.fblock_u.insert(key);
        }
    }

    /// Take `c` out of the formal-blocked state; back into its ring if `to_ring`.
    pub(super) fn funblock(&mut self, c: u32, to_ring: bool) {
        let cl = &mut self.classes[c as usize];
        if cl.fblocked.take().is_none() {
            return;
        }
        let key = (cl.fkey, c);
        if to_ring {
            cl.in_ring = true;
            cl.alloc = 0;
            self.rings[cl.prio as usize].push_back(c);
        }
        self.fblock_u.remove(&key);
    }

    /// Return formally blocked leaves whose condition may have changed: those whose own
    /// chain got an underlimit class, and — at most [`FORMAL_BATCH`] per level, highest priority
    /// and longest parked first — those at a level with no unsatisfied class below it (they are
    /// all equally allowed then; returning a few at a time keeps a dequeue from revisiting
    /// thousands that the next unsatisfied class would park again). Returns how many came
    /// back. O(levels + returned + stale entries).
    pub(super) fn readmit_formal(&mut self, now: u64) -> usize {
        let mut back = 0;
        while let Some(&(u, c)) = self.fblock_u.first() {
            if u > now {
                break;
            }
            self.funblock(c, true);
            back += 1;
        }
        for h in 1..MAX_DEPTH {
            let lists = h * NUM_PRIO..(h + 1) * NUM_PRIO;
            if self.fblocked[lists.clone()].iter().all(|l| l.is_empty())
                || self.unsatisfied_below(h as u8, now)
            {
                continue;
            }
            let mut budget = FORMAL_BATCH;
            for l in lists {
                while budget > 0 {
                    let Some((c, g)) = self.fblocked[l].pop_front() else {
                        break;
                    };
                    if self.classes[c as usize].fblocked == Some((h as u8, g)) {
                        self.funblock(c, true);
                        budget -= 1;
                        back += 1;
                    }
                }
            }
        }
        back
    }

    pub(super) fn unblock(&mut self, c: u32) {
        let cl = &mut self.classes[c as usize];
        if !cl.blocked {
            return;
        }
        cl.blocked = false;
        let b = &mut self.blocked[cl.prio as usize];
        if let Some(i) = b.iter().position(|&x| x == c) {
            b.swap_remove(i);
        }
    }

    pub(super) fn leave_ring(&mut self, c: u32) {
        let cl = &mut self.classes[c as usize];
        if !cl.in_ring {
            return;
        }
        cl.in_ring = false;
        cl.alloc = 0;
        let ring = &mut self.rings[cl.prio as usize];
        if ring.front() == Some(&c) {
            ring.pop_front();
        } else if let Some(i) = ring.iter().position(|&x| x == c) {
            ring.remove(i);
        }
    }

    /// ALTQ's rules 1 and 2 (seed 001 §2.1), run when a packet arrives for leaf `c`.
    pub(super) fn cutoff_on_arrival(&mut self, c: u32, now: u64) {
        if self.cutoff == 0 {
            return;
        }
        let cl = &self.classes[c as usize];
        if cl.undertime.is_none_or(|u| u < now) {
            let v = self.cutoff.min(cl.height as u32);
            self.set_cutoff(v);
            return;
        }
        let mut b = if cl.borrow { cl.parent } else { NIL };
        while b != NIL && (self.classes[b as usize].height as u32) < self.cutoff {
            let bc = &self.classes[b as usize];
            if bc.undertime.is_none_or(|u| u < now) {
                let v = bc.height as u32;
                self.set_cutoff(v);
                break;
            }
            b = if bc.borrow { bc.parent } else { NIL };
        }
    }
}
