//! HTB's token buckets, class modes and the wait queue of throttled classes.
//!
//! Principles: tokens are integers in nano-bits, exact (see "Exact accounting" in the module
//! docs of [`super`]); a class's mode follows from the signs of its two buckets and changes in
//! one function only ([`Htb::change_mode`]); a class that is not `CanSend` is filed in the wait
//! queue of its level under the instant its mode will change, a key that is a pure function of
//! its buckets, and is re-examined when that instant is due (at most
//! [`MAX_EVENTS_PER_LEVEL`] per level and call). The charge walks from the leaf to the root:
//! below the lender's level only `ctokens` are charged; a class that is and stays `CanSend` (the
//! common case) is charged on a short path that stores exactly what the full one would, and the
//! refill is skipped for a class already charged at the same instant (a dequeue burst has one
//! `now`). This is Linux net/sched/sch_htb.c
//! (`htb_charge_class`, `htb_class_mode`, `htb_change_class_mode`, `htb_do_events`, the wait
//! queue `hlevel[].wait_pq`) without its rate tables and tick rounding.
use super::*;

impl<P: Packet> Htb<P> {
    /// The one place a class's mode changes. Re-hooks it if active and keeps the wait queue in step.
    ///
    /// Must be called with the key the class was filed under (`old_key`, from [`Self::wait_key`]
    /// before its buckets changed) so it can be taken out of the wait queue.
    pub(super) fn change_mode(
        &mut self,
        c: u32,
        old_key: Option<u64>,
        new: ClassMode,
        wait_until: u64,
    ) {
        let cl = &self.classes[c as usize];
        let old = cl.mode;
        let level = cl.level as usize;
        if let Some(key) = old_key {
            self.wait[level].remove(&(key, c));
        }
        if new != ClassMode::CanSend {
            self.wait[level].insert((wait_until, c));
        }
        if old == new {
            return;
        }
        if new != ClassMode::CanSend {
            let k = &mut self.cold[c as usize];
            k.overlimits = k.overlimits.wrapping_add(1);
        }
        let active = self.classes[c as usize].active;
        if active != 0 {
            self.deactivate_prios(c, active);
        } else {
            // A parked leaf (`feed::park_leaf`) may sit in a row only while `CanSend`.
            self.unpark(c);
        }
        self.classes[c as usize].mode = new;
        if active != 0 {
            self.activate_prios(c, active);
        }
    }

    /// The wait-queue key of a class that is not `CanSend`: the instant its current mode ends.
    /// A pure function of the buckets as of `t_c` (the key does not depend on when it is
    /// computed, because tokens grow linearly), so it need not be stored.
    pub(super) fn wait_key(&self, c: u32) -> Option<u64> {
        let cl = &self.classes[c as usize];
        match cl.mode {
            ClassMode::CanSend => None,
            ClassMode::CantSend => {
                let ceil = self.prof(c).ceil;
                Some(cl.t_c.saturating_add(ceil_div(-cl.ctokens, ceil)))
            }
            ClassMode::MayBorrow => {
                let rate = self.prof(c).rate;
                Some(cl.t_c.saturating_add(ceil_div(-cl.tokens, rate)))
            }
        }
    }

    /// Mode of class `c` at `now` from its buckets, and when that mode ends if not `CanSend`.
    pub(super) fn mode_at(&self, c: u32, now: u64) -> (ClassMode, u64) {
        let cl = &self.classes[c as usize];
        let pr = self.prof(c);
        // A clock that stands still or goes backwards is tolerated: tokens are as of `t_c`.
        let base = now.max(cl.t_c);
        let idle = now.saturating_sub(cl.t_c).min(MAX_IDLE_NS);
        let ct = refill(cl.ctokens, idle, pr.ceil, pr.cbuffer);
        if ct < 0 {
            return (
                ClassMode::CantSend,
                base.saturating_add(ceil_div(-ct, pr.ceil)),
            );
        }
        let t = refill(cl.tokens, idle, pr.rate, pr.buffer);
        if t < 0 {
            return (
                ClassMode::MayBorrow,
                base.saturating_add(ceil_div(-t, pr.rate)),
            );
        }
        (ClassMode::CanSend, now)
    }

    /// Charge a packet of `len` bytes sent by `leaf` at `level` to the leaf and its ancestors.
    ///
    /// The common case — a class that was `CanSend` and stays `CanSend` — is done here in a few
    /// instructions: both buckets stay non-negative, so neither the debt clamp nor the mode
    /// change nor the wait queue has anything to do, and what is stored is what
    /// [`Self::charge_class`] would store. Every other class goes through `charge_class`.
    #[inline]
    pub(super) fn charge(&mut self, leaf: u32, level: u8, len: u32, now: u64) {
        // Saturating: equal to the exact product whenever it is within the debt floor (see
        // "Exact accounting"); a larger cost is clamped to the floor either way.
        let cost = (len as i64).saturating_mul(NBITS_PER_BYTE);
        let mut c = leaf;
        while let (Some(cl), Some(k)) = (
            self.classes.get_mut(c as usize),
            self.cold.get_mut(c as usize),
        ) {
            let parent = cl.parent;
            let fast = cl.mode == ClassMode::CanSend && {
                // Charged already at this instant (the ancestors, for every packet of a dequeue
                // burst after the first): a refill over no time leaves a level as it is, since
                // no level is ever above its bucket size (`check_invariants` checks it).
                let refilled = if now <= cl.t_c {
                    Some((cl.tokens, cl.ctokens))
                } else {
                    self.profiles.get(cl.profile as usize).map(|pr| {
                        let idle = (now - cl.t_c).min(MAX_IDLE_NS);
                        (
                            refill(cl.tokens, idle, pr.rate, pr.buffer),
                            refill(cl.ctokens, idle, pr.ceil, pr.cbuffer),
                        )
                    })
                };
                match refilled {
                    Some((t, ct)) => {
                        // A refilled level is at most the bucket size, ≤ TOKEN_BOUND: a
                        // non-negative one is what `clamp_debt` leaves unchanged.
                        let ct = ct.saturating_sub(cost);
                        let t = if cl.level >= level {
                            t.saturating_sub(cost)
                        } else {
                            t
                        };
                        if t >= 0 && ct >= 0 {
                            if cl.level > level {
                            } else if cl.level == level {
                                k.lends = k.lends.wrapping_add(1);
                            } else {
                                k.borrows = k.borrows.wrapping_add(1);
                            }
                            cl.tokens = t;
                            cl.ctokens = ct;
                            cl.t_c = now.max(cl.t_c);
                            k.sent_bytes += len as u64;
                            k.sent_packets += 1;
                            true
                        } else {
                            false
                        }
                    }
                    None => false,
                }
            };
            if !fast {
                self.charge_class(c, level, len, cost, now);
            }
            c = parent;
        }
    }

    /// Charge one class (see [`Self::charge`]): both buckets, the counters, and the mode change
    /// with its wait-queue entry when the mode is or becomes other than `CanSend`.
    #[inline(never)]
    fn charge_class(&mut self, c: u32, level: u8, len: u32, cost: i64, now: u64) {
        let old_key = self.wait_key(c);
        let cl = &mut self.classes[c as usize];
        let pr = &self.profiles[cl.profile as usize];
        let k = &mut self.cold[c as usize];
        let idle = now.saturating_sub(cl.t_c).min(MAX_IDLE_NS);
        let t = refill(cl.tokens, idle, pr.rate, pr.buffer);
        if cl.level >= level {
            if cl.level == level {
                k.lends = k.lends.wrapping_add(1);
            }
            cl.tokens = clamp_debt(t.saturating_sub(cost), pr.rate);
        } else {
            k.borrows = k.borrows.wrapping_add(1);
            cl.tokens = clamp_debt(t, pr.rate);
        }
        let ct = refill(cl.ctokens, idle, pr.ceil, pr.cbuffer);
        cl.ctokens = clamp_debt(ct.saturating_sub(cost), pr.ceil);
        cl.t_c = now.max(cl.t_c);
        k.sent_bytes += len as u64;
        k.sent_packets += 1;
        // The buckets are as of `t_c` now, so the mode follows from their signs; `mode_at`
        // would compute the same. A class that was and stays `CanSend` is in no wait queue
        // and needs no re-hooking.
        let (mode, until) = if cl.ctokens < 0 {
            let until = cl.t_c.saturating_add(ceil_div(-cl.ctokens, pr.ceil));
            (ClassMode::CantSend, until)
        } else if cl.tokens < 0 {
            let until = cl.t_c.saturating_add(ceil_div(-cl.tokens, pr.rate));
            (ClassMode::MayBorrow, until)
        } else {
            (ClassMode::CanSend, now)
        };
        if mode != ClassMode::CanSend || cl.mode != ClassMode::CanSend {
            self.change_mode(c, old_key, mode, until);
        }
    }

    /// Apply due mode changes at `level`; returns the next pending change there, if any.
    pub(super) fn do_events(&mut self, level: usize, now: u64) -> Option<u64> {
        for _ in 0..MAX_EVENTS_PER_LEVEL {
            let &(key, c) = self.wait[level].first()?;
            if key > now {
                return Some(key);
            }
            let (mode, until) = self.mode_at(c, now);
            self.change_mode(c, Some(key), mode, until);
        }
        // Budget spent: more may be due; ask to be called again right away.
        self.wait[level].first().map(|&(k, _)| k.max(now))
    }
}

/// A size in nano-bits, at most [`TOKEN_BOUND`].
pub(super) fn nbits(bytes: u64) -> i64 {
    (bytes.min(i64::MAX as u64) as i64)
        .saturating_mul(NBITS_PER_BYTE)
        .min(TOKEN_BOUND)
}

/// `min(v + idle·rate, cap)`, exactly, in 64 bits, for `|v| ≤ TOKEN_BOUND` and
/// `0 ≤ cap ≤ TOKEN_BOUND`: when `v < cap` the headroom `cap − v ≤ 2·TOKEN_BOUND < 2⁶³` is
/// exact, and `min(v + x, cap) = v + min(x, cap − v)`; a saturated `idle·rate` is above any
/// headroom, so the minimum is the same as with the true product.
#[inline]
pub(super) fn refill(v: i64, idle: u64, rate: u64, cap: i64) -> i64 {
    if v >= cap {
        return cap;
    }
    let room = (cap - v) as u64;
    v + idle.saturating_mul(rate).min(room) as i64
}

/// Tokens may go into debt by at most 60 s of the bucket's rate (Linux's `1 - mbuffer`), and
/// never beyond `±TOKEN_BOUND`.
#[inline]
pub(super) fn clamp_debt(v: i64, rate: u64) -> i64 {
    if v >= 0 {
        return v.min(TOKEN_BOUND);
    }
    let floor = MAX_IDLE_NS.saturating_mul(rate).min(TOKEN_BOUND as u64) as i64;
    v.clamp(-floor, TOKEN_BOUND)
}

/// `⌈a / b⌉` for a debt `a` in nano-bits and a rate `b`; 0 when `a ≤ 0`.
#[inline]
pub(super) fn ceil_div(a: i64, b: u64) -> u64 {
    if b == 0 {
        return MAX_IDLE_NS;
    }
    if a <= 0 {
        return 0;
    }
    (a as u64).div_ceil(b)
}
