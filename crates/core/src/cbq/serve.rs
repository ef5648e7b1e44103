//! CBQ's general scheduler: within a priority, packet-by-packet or weighted round robin over the
//! ring of awake leaves; the first leaf that may send (on its own or by borrowing) sends.
//!
//! Principles (Floyd & Jacobson 1995 §2, ALTQ's `_rmc_prr_next`/`_rmc_wrr_next`, Linux
//! sch_cbq.c `cbq_dequeue_prio`): strict priority between priorities, round robin inside one;
//! WRR gives each leaf its allotment per round and, when every allotment is below the packet
//! size, makes a second pass that lets deficits go negative (ALTQ's `deficit = 2`); a leaf
//! refused by the guideline is parked rather than rescanned; with `efficient`, the first
//! overlimit leaf that may borrow sends when nothing else can.
use super::*;

impl<P: Packet> Cbq<P> {
    /// Take a packet from leaf `c`'s queue: `Err(t)` when a boxed leaf is throttled.
    pub(super) fn pop_leaf(&mut self, c: u32, now: Time) -> Result<P, Option<u64>> {
        let r = match &mut self.classes[c as usize].leaf {
            Leaf::Fifo(q) => q.pop().ok_or(None),
            Leaf::Boxed(b) => match b.dequeue(now) {
                Dequeued::Packet(p) => Ok(p),
                Dequeued::NotBefore(t) => Err(Some(t.0.max(now.0 + 1))),
                Dequeued::Empty => Err(None),
            },
            Leaf::Inner => Err(None),
        };
        self.collect_victims(c);
        self.note_idle(c, now);
        r
    }

    /// Send from `c`: pop, count, charge, and fix its ring / sleep membership.
    pub(super) fn send(
        &mut self,
        c: u32,
        lender: Option<u32>,
        now: Time,
    ) -> Result<P, Option<u64>> {
        let pkt = self.pop_leaf(c, now)?;
        let len = pkt.len();
        let empty = self.leaf_backlog(c).packets == 0;
        if empty {
            self.leave_ring(c);
            self.unblock(c);
            self.funblock(c, false);
            self.unsleep(c);
            self.deactivate(c);
        } else if self.classes[c as usize].in_ring {
            let cl = &mut self.classes[c as usize];
            let p = cl.prio as usize;
            let rotate = match self.params.scheduler {
                Scheduler::Prr => true,
                Scheduler::Wrr => {
                    cl.alloc -= len as i64;
                    cl.alloc <= 0
                }
            };
            if rotate && self.rings[p].front() == Some(&c) {
                self.rings[p].rotate_left(1);
            }
        }
        self.charge(c, len, lender, now.0);
        Ok(pkt)
    }

    /// Serve one priority: see the module docs. Returns a packet or records the efficient
    /// candidate and the earliest throttled-leaf time.
    pub(super) fn serve_prio(
        &mut self,
        p: usize,
        now: Time,
        first: &mut Option<u32>,
        leaf_t: &mut u64,
    ) -> Option<P> {
        let wrr = self.params.scheduler == Scheduler::Wrr;
        let mut budget = self.rings[p].len();
        let mut deficit_mode = false;
        let mut saw = false;
        loop {
            if budget == 0 {
                if wrr && saw && !deficit_mode {
                    deficit_mode = true;
                    saw = false;
                    budget = self.rings[p].len();
                } else {
                    return None;
                }
            }
            let &c = self.rings[p].front()?;
            budget -= 1;
            if wrr && !deficit_mode && self.classes[c as usize].alloc <= 0 {
                let cl = &mut self.classes[c as usize];
                cl.alloc += cl.allot;
            }
            match self.permission(c, now.0) {
                Perm::Allow(lender) => {
                    if !wrr || deficit_mode || self.classes[c as usize].alloc > 0 {
                        match self.send(c, lender, now) {
                            Ok(pkt) => return Some(pkt),
                            Err(t) => {
                                if let Some(t) = t {
                                    *leaf_t = (*leaf_t).min(t);
                                }
                                self.rings[p].rotate_left(1);
                            }
                        }
                    } else {
                        saw = true;
                        self.rings[p].rotate_left(1);
                    }
                }
                Perm::Skip => {
                    if first.is_none() && self.classes[c as usize].borrow {
                        *first = Some(c);
                    }
                    self.block_front(p);
                }
                Perm::Formal(level, until) => {
                    if first.is_none() && self.classes[c as usize].borrow {
                        *first = Some(c);
                    }
                    self.fblock_front(p, level, until);
                }
                Perm::Delay(top) => {
                    if first.is_none() && self.classes[c as usize].borrow {
                        *first = Some(c);
                    }
                    self.delay_action(c, top, now.0);
                }
            }
        }
    }

    /// The `efficient` candidate when nothing may send: the first refused borrower of the scan,
    /// else a sleeping borrower of the highest priority (round robin).
    pub(super) fn efficient_candidate(&mut self, first: Option<u32>) -> Option<u32> {
        let fp = first.map(|c| self.classes[c as usize].prio as usize);
        for p in 0..NUM_PRIO {
            if fp == Some(p) {
                return first;
            }
            let set = &self.sleep_borrowers[p];
            let cur = self.eff_cursor[p];
            let pick = set
                .range(cur.saturating_add(1)..)
                .next()
                .or_else(|| set.iter().next())
                .copied();
            if let Some(c) = pick {
                self.eff_cursor[p] = c;
                return Some(c);
            }
        }
        first
    }
}
