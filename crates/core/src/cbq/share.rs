//! CBQ's link-sharing decisions: whether a class is underlimit, which ancestor a leaf may borrow
//! from under the chosen guideline, the delay action, and the charge that runs every estimator
//! on the chain.
//!
//! Principles (Floyd & Jacobson 1995 §3–4, "Link-sharing and resource management models for
//! packet networks"): a class is underlimit when its estimator's `avgidle` is positive (or its
//! `undertime` has passed); an overlimit leaf may send by borrowing from its nearest underlimit
//! ancestor if every class on the way allows borrowing and the guideline agrees (formal: no
//! unsatisfied class at a lower level; ancestors-only; top-level: the lender at or below the
//! cutoff); otherwise it is suspended until `undertime + offtime` (ALTQ's `rmc_delay_action`,
//! Linux sch_cbq.c `cbq_ovl_classic`). The charge updates the estimator of the leaf and of every
//! ancestor with the packet's finish time, as `rmc_update_class_util` and `cbq_update` do.
use super::*;

impl<P: Packet> Cbq<P> {
    pub(super) fn is_under(&self, c: u32, now: u64) -> bool {
        self.classes[c as usize].undertime.is_none_or(|u| u <= now)
    }

    /// Change a class's `undertime`, keeping the unsatisfied sets in step.
    pub(super) fn set_undertime(&mut self, c: u32, ut: Option<u64>) {
        let cl = &mut self.classes[c as usize];
        if cl.undertime == ut {
            return;
        }
        let old = cl.undertime.unwrap_or(0);
        cl.undertime = ut;
        if cl.active > 0 {
            let h = cl.height as usize;
            let classes = &self.classes;
            self.unsat[h].rekey(old, ut.unwrap_or(0), c, |k, y| filed_with(classes, k, y));
        }
    }

    /// Is any class at a level below `level` unsatisfied (underlimit with a backlogged
    /// descendant)? O(level).
    pub(super) fn unsatisfied_below(&self, level: u8, now: u64) -> bool {
        self.unsat[..level as usize].iter().any(|s| s.any_due(now))
    }

    /// May leaf `c` send now? O(d + levels).
    pub(super) fn permission(&self, c: u32, now: u64) -> Perm {
        if self.is_under(c, now) {
            return Perm::Allow(None);
        }
        let mut x = c;
        let mut top = NIL;
        // Earliest instant a class on the chain below the lender becomes underlimit.
        let mut soonest = self.classes[c as usize].undertime.unwrap_or(0);
        loop {
            let xc = &self.classes[x as usize];
            if !xc.borrow || xc.parent == NIL {
                let top =
                    (top != NIL && !self.classes[top as usize].est.at_minidle()).then_some(top);
                return Perm::Delay(top);
            }
            let a = xc.parent;
            let ac = &self.classes[a as usize];
            if self.params.guideline == Guideline::TopLevel && ac.height as u32 > self.cutoff {
                return Perm::Skip;
            }
            if self.is_under(a, now) {
                if self.params.guideline == Guideline::Formal
                    && self.unsatisfied_below(ac.height, now)
                {
                    return Perm::Formal(ac.height, soonest);
                }
                return Perm::Allow(Some(a));
            }
            soonest = soonest.min(ac.undertime.unwrap_or(0));
            top = a;
            x = a;
        }
    }

    /// ALTQ's `rmc_delay_action`: suspend `c` until `undertime + offtime − last packet time`
    /// (`offtime` of the top of the borrow chain when there is one), at least
    /// `min_suspend_ticks` ticks on the driver's timer.
    pub(super) fn delay_action(&mut self, c: u32, top: Option<u32>, now: u64) {
        let (off, avgpkt) = match top {
            Some(t) => {
                let tc = &self.classes[t as usize];
                (tc.est.offtime, tc.avgpkt)
            }
            None => {
                let cl = &self.classes[c as usize];
                (cl.est.offtime, cl.avgpkt)
            }
        };
        let cl = &self.classes[c as usize];
        let off = match self.params.offtime_unit {
            OfftimeUnit::Packets => off,
            OfftimeUnit::Bytes => {
                let len = if cl.est.last_len == 0 {
                    avgpkt
                } else {
                    cl.est.last_len
                };
                (off as u128 * len as u128 / avgpkt.max(1) as u128).min(u64::MAX as u128 / 4) as u64
            }
        };
        let extra = off as i128 - cl.est.last_pkt_time as i128 + cl.extradelay as i128;
        let mut ut = cl.undertime.unwrap_or(now);
        if extra > 0 {
            ut = ut.saturating_add(extra.min(u64::MAX as i128 / 4) as u64);
        }
        let tick = self.params.tick_ns();
        let mut timer = ut;
        let mut wake_at = ut;
        if tick > 0 && self.params.min_suspend_ticks > 0 {
            let min = self.params.min_suspend_ticks as u64 * tick;
            if ut.saturating_sub(now) <= min {
                // ALTQ: "we have to wait for at least two ticks" — the callout fires on the
                // second tick boundary from now; the suspension lasts until then.
                timer = (now / tick + self.params.min_suspend_ticks as u64) * tick;
                wake_at = timer;
            }
        }
        self.set_undertime(c, Some(ut));
        self.leave_ring(c);
        let cl = &mut self.classes[c as usize];
        cl.delays += 1;
        cl.asleep = true;
        cl.sleep_u = wake_at;
        cl.sleep_t = timer;
        let (p, b) = (cl.prio as usize, cl.borrow);
        self.sleep_u.insert((wake_at, c));
        self.sleep_t.insert((timer, c));
        if b {
            self.sleep_borrowers[p].insert(c);
        }
    }

    /// Charge a packet of `len` bytes sent by leaf `c` (borrowing from `lender`): the link model,
    /// then the estimator of `c` and each ancestor (ALTQ's `rmc_update_class_util`). O(d log n).
    pub(super) fn charge(&mut self, c: u32, len: u32, lender: Option<u32>, now: u64) {
        let t_link = tx_ns(len as u64, self.params.link.0);
        if now < self.ifnow {
            if self.ifnow - now + t_link < self.maxiftime {
                self.ifnow += t_link;
            } else {
                self.ifnow = now + self.maxiftime;
            }
        } else {
            self.ifnow = now + t_link;
        }
        let base = match self.params.undertime_clock {
            UndertimeClock::Expected => self.ifnow,
            UndertimeClock::Actual => now,
        };
        let bytes = self.params.offtime_unit == OfftimeUnit::Bytes;
        let ifnow = self.ifnow;
        let mut below = lender.is_some();
        let mut x = c;
        while x != NIL {
            let cl = &mut self.classes[x as usize];
            cl.sent.add(len);
            let pt = tx_ns(len as u64, cl.rate);
            let v = cl.est.update(ifnow, len, pt, cl.avgpkt, bytes);
            if let Some(l) = lender {
                if x == l {
                    cl.lends += 1;
                    below = false;
                } else if below {
                    cl.borrows += 1;
                }
            }
            match v {
                Verdict::Over(tidle) => {
                    cl.overlimits += 1;
                    self.set_undertime(x, Some(base.saturating_add(tidle)));
                }
                Verdict::Under => self.set_undertime(x, None),
            }
            x = self.classes[x as usize].parent;
        }
        if self.classes[c as usize].asleep && self.classes[c as usize].undertime.is_none() {
            self.wake(c);
        }
        if self.params.guideline == Guideline::TopLevel {
            if let Some(l) = lender {
                let lh = self.classes[l as usize].height as u32;
                if self.cutoff >= lh {
                    if self.leaf_backlog(c).packets == 0 || !self.is_under(l, now) {
                        self.tl_satisfied(now);
                    } else {
                        self.set_cutoff(lh);
                    }
                }
            }
        }
    }

    /// ALTQ's `rmc_tl_satisfied`: cutoff 0 if some backlogged leaf is underlimit, else none.
    pub(super) fn tl_satisfied(&mut self, now: u64) {
        let unsat_leaf = self.unsat[0].any_due(now);
        self.set_cutoff(if unsat_leaf { 0 } else { NO_CUTOFF });
    }
}
