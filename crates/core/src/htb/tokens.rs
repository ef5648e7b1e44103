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
//! `now`); within a dequeue burst the charges of a leaf's grandparent and the classes above it
//! are summed while every one of them stays `CanSend` and applied at the burst's end
//! ([`Deferred`], exact). This is Linux net/sched/sch_htb.c
//! (`htb_charge_class`, `htb_class_mode`, `htb_change_class_mode`, `htb_do_events`, the wait
//! queue `hlevel[].wait_pq`) without its rate tables and tick rounding.
use super::*;

impl<P: Packet> Htb<P> {
    /// The one place a class's mode changes. Re-hooks it if active and keeps the wait queue in step.
    ///
    /// Must be called with the key the class is filed under (`old_key`, from [`Self::wait_key`]
    /// before its buckets changed; `None` if it has no entry: `CanSend`, or just taken out by
    /// `do_events`), so that the wait queue counts its members and files a new key only.
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
        // The entry filed under `old_key` goes stale by itself once the record changes (`waitq`).
        match (old_key.is_some(), new != ClassMode::CanSend) {
            (true, false) => self.wait[level].left(),
            (false, true) => self.wait[level].joined(),
            _ => {}
        }
        if old != new {
            if new != ClassMode::CanSend {
                let k = &mut self.cold[c as usize];
                k.overlimits = k.overlimits.wrapping_add(1);
            }
            let active = self.classes[c as usize].active;
            if active != 0 {
                self.deactivate_prios(c, active);
            }
            self.classes[c as usize].mode = new;
            if active != 0 {
                self.activate_prios(c, active);
            }
        }
        // A charge that leaves the key where it was (a class that borrowed: its own tokens are
        // only refilled) keeps the entry it has.
        if new != ClassMode::CanSend && old_key != Some(wait_until) {
            debug_assert_eq!(self.wait_key(c), Some(wait_until));
            let (classes, profiles) = (&self.classes, &self.profiles);
            self.wait[level].push(wait_until, c, |k, x| {
                is_current(classes, profiles, level, k, x)
            });
        }
    }

    /// Drop the stale entries at the top of level `level`'s wait queue.
    #[inline]
    fn settle_wait(&mut self, level: usize) {
        let (classes, profiles) = (&self.classes, &self.profiles);
        self.wait[level].settle(|k, x| is_current(classes, profiles, level, k, x));
    }

    /// The wait-queue key of a class that is not `CanSend`: the instant its current mode ends.
    /// A pure function of the buckets as of `t_c` (the key does not depend on when it is
    /// computed, because tokens grow linearly), so it need not be stored.
    pub(super) fn wait_key(&self, c: u32) -> Option<u64> {
        key_of(&self.classes[c as usize], self.prof(c))
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
        let mut base = self.deferred.base;
        if base != NIL && (level != 0 || now != self.deferred.now) {
            self.flush_deferred();
            base = NIL;
        }
        let mut c = leaf;
        loop {
            if base != NIL {
                if c == base {
                    // The rest of the walk is the deferred chain: sum, if every class on it
                    // stays `CanSend` (see `Deferred`).
                    let d = &mut self.deferred;
                    if cost <= d.room {
                        d.room -= cost;
                        d.cost += cost;
                        return;
                    }
                    self.flush_deferred();
                    base = NIL;
                } else if self
                    .classes
                    .get(c as usize)
                    .is_some_and(|x| x.level >= self.deferred.level)
                {
                    // Another branch: it may meet the chain above; apply the chain first.
                    self.flush_deferred();
                    base = NIL;
                }
            }
            let (Some(cl), Some(k)) = (
                self.classes.get_mut(c as usize),
                self.cold.get_mut(c as usize),
            ) else {
                break;
            };
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
                        // non-negative one is what `clamp_debt` leaves unchanged. With
                        // `cost ≥ 0`, `v − cost ≥ 0` (saturating or not) iff `v ≥ cost`, and
                        // then the difference cannot overflow: the comparisons below take
                        // the short path exactly when the saturating differences would be
                        // non-negative, and store the same values.
                        let need = if cl.level >= level { cost } else { 0 };
                        if t >= need && ct >= cost {
                            let (t, ct) = (t - need, ct - cost);
                            if cl.level > level {
                            } else if cl.level == level {
                                k.lends = k.lends.wrapping_add(1);
                            } else {
                                k.borrows = k.borrows.wrapping_add(1);
                            }
                            cl.tokens = t;
                            cl.ctokens = ct;
                            cl.t_c = now.max(cl.t_c);
                            if c == leaf {
                                // An inner class's sends are its leaves' (`Counters`).
                                k.sent_bytes += len as u64;
                                k.sent_packets += 1;
                            }
                            true
                        } else {
                            false
                        }
                    }
                    None => false,
                }
            };
            if !fast {
                self.charge_class(c, level, len, cost, now, c == leaf);
            }
            c = parent;
        }
        if self.deferred.on && level == 0 {
            self.start_deferred(leaf, now);
        }
    }

    /// After a full charge of `leaf` at `now` within a dequeue burst: defer the charges of
    /// the chain from its grandparent (its parent under a root) up to the root, if every class
    /// there is `CanSend`. Each of them was just charged at `now`, so its buckets are as of
    /// `now` and non-negative; the room is the smallest of them.
    #[inline]
    fn start_deferred(&mut self, leaf: u32, now: u64) {
        let Some(p) = self.classes.get(leaf as usize).map(|x| x.parent) else {
            return;
        };
        let Some(g) = self.classes.get(p as usize).map(|x| x.parent) else {
            return;
        };
        let base = if g == NIL { p } else { g };
        let mut room = i64::MAX;
        let mut c = base;
        let mut level = 0;
        while let Some(cl) = self.classes.get(c as usize) {
            if cl.mode != ClassMode::CanSend {
                return;
            }
            if c == base {
                level = cl.level;
            }
            room = room.min(cl.tokens).min(cl.ctokens);
            c = cl.parent;
        }
        if room > 0 {
            self.deferred = Deferred {
                on: true,
                base,
                level,
                now,
                room,
                cost: 0,
            };
        }
    }

    /// Apply the deferred charges (see [`Deferred`]): what the same packets charged one by one
    /// on the short path would have stored.
    #[inline(never)]
    pub(super) fn flush_deferred(&mut self) {
        let d = self.deferred;
        self.deferred = Deferred {
            on: d.on,
            ..Deferred::NONE
        };
        let mut c = d.base;
        while let Some(cl) = self.classes.get_mut(c as usize) {
            cl.tokens -= d.cost;
            cl.ctokens -= d.cost;
            c = cl.parent;
        }
    }

    /// Charge one class (see [`Self::charge`]): both buckets, the counters (what was sent only
    /// for the `leaf` itself: an inner class's is its leaves' sum, `Counters`), and the mode
    /// change with its wait-queue entry when the mode is or becomes other than `CanSend`.
    #[inline(never)]
    fn charge_class(&mut self, c: u32, level: u8, len: u32, cost: i64, now: u64, leaf: bool) {
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
        if leaf {
            k.sent_bytes += len as u64;
            k.sent_packets += 1;
        }
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
        if self.wait[level].is_empty() {
            return None;
        }
        for _ in 0..MAX_EVENTS_PER_LEVEL {
            self.settle_wait(level);
            let (key, c) = self.wait[level].top()?;
            if key > now {
                return Some(key);
            }
            self.wait[level].pop();
            // Its entry is gone: it is filed again if it still waits.
            self.wait[level].left();
            let (mode, until) = self.mode_at(c, now);
            self.change_mode(c, None, mode, until);
        }
        // Budget spent: more may be due; ask to be called again right away.
        self.settle_wait(level);
        self.wait[level].top().map(|(k, _)| k.max(now))
    }
}

/// The wait-queue key of a class (see [`Htb::wait_key`]) from its record and profile.
#[inline]
fn key_of(cl: &Class, pr: &Profile) -> Option<u64> {
    match cl.mode {
        ClassMode::CanSend => None,
        ClassMode::CantSend => Some(cl.t_c.saturating_add(ceil_div(-cl.ctokens, pr.ceil))),
        ClassMode::MayBorrow => Some(cl.t_c.saturating_add(ceil_div(-cl.tokens, pr.rate))),
    }
}

/// Whether entry `(k, x)` of the wait queue of `level` is current: class `x` is at that level,
/// not `CanSend`, and its key is `k` (`waitq`). (The level tells apart an entry left by a class
/// removed in place from one of the class that took its slot, `reshape`.)
#[inline]
pub(super) fn is_current(
    classes: &[Class],
    profiles: &[Profile],
    level: usize,
    k: u64,
    x: u32,
) -> bool {
    classes
        .get(x as usize)
        .filter(|cl| cl.level as usize == level)
        .and_then(|cl| key_of(cl, profiles.get(cl.profile as usize)?))
        == Some(k)
}

/// The charges of a chain of ancestors — a class `base` and every class above it — summed
/// within one dequeue burst instead of stored packet by packet.
///
/// Why it is exact: a burst has one `now`. The chain is started right after a packet was charged
/// to all of it at `now` with every class left `CanSend` (so each one's buckets are as of `now`
/// and non-negative), and `room` is the smallest of those buckets. A later packet of the burst
/// served from a row of level 0 (so no class above the leaf lends or borrows) whose walk reaches
/// `base` would, class by class, take the short path of [`Htb::charge`]: no refill (charged at
/// this instant), both buckets less `cost` (inner classes count no sends of their own) — as long as
/// both buckets stay non-negative, which `cost ≤ room` guarantees for every class of the chain at
/// once. Nothing else reads or changes these classes meanwhile: their mode stays `CanSend` (so
/// they are in no wait queue and `do_events` never looks at them), lists only read modes, and
/// a charge that would do anything else (a packet of a row above level 0, a room too small, a
/// walk through another class at `base`'s level or above) applies the sum first. The sum is
/// applied at the end of every burst ([`Htb::flush_deferred`]), so outside a burst nothing is
/// ever deferred; stored levels are then exactly what per-packet charging stores.
#[derive(Copy, Clone, Debug)]
pub(super) struct Deferred {
    /// Inside a dequeue burst (charges may be deferred).
    pub(super) on: bool,
    /// The lowest class of the chain, NIL when nothing is deferred.
    pub(super) base: u32,
    /// Its level.
    level: u8,
    /// The burst's instant.
    now: u64,
    /// How much more cost the chain can take with every bucket non-negative.
    room: i64,
    /// Summed cost (nano-bits).
    pub(super) cost: i64,
}

impl Deferred {
    pub(super) const NONE: Deferred = Deferred {
        on: false,
        base: NIL,
        level: 0,
        now: 0,
        room: 0,
        cost: 0,
    };
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
