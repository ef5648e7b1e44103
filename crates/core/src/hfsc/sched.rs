//! HFSC's criteria: the real-time sets (`init_ed`, `update_ed`, `update_d`), the link-sharing
//! virtual times (`init_vf`, `update_vf`), the upper limit's fit time, and the dequeue that
//! chooses between them.
//!
//! Principles: the names and the order of the updates are those of Linux's sch_hfsc.c (itself
//! ALTQ's), so that each line can be checked against it; where OpenBSD's hfsc.c differs, the
//! branch names the choice ([`PeriodVt`], [`HfscParams::ul_catchup`]). Every set membership is
//! filed under the key it was inserted with (`key_*`), so a class is always removed under the
//! key it is found by, and [`Hfsc::check_invariants`] can verify each set against the classes.
//! Time never goes back inside: `clock = max(clock, now)`.
use super::heap::{Heap, CF, EL, FIT, VT};
use super::minmax::MinMax;
use super::*;

/// The mean of two `u64` without overflow.
#[inline]
fn mid(a: u64, b: u64) -> u64 {
    ((a as u128 + b as u128) / 2) as u64
}

impl<P: Packet> Hfsc<P> {
    /// Heap `which` (`VT`, `CF`, `FIT`) of parent `p`'s children.
    fn kid_heap(&mut self, p: u32, which: usize) -> Heap<'_> {
        let cl = &mut self.classes[p as usize];
        let (base, n) = (cl.base as usize, cl.nkids as usize);
        Heap {
            rows: &mut self.slab[base..base + n],
            col: which,
            len: &mut cl.klen[which],
            pos: &mut self.pos,
            which,
        }
    }

    /// Parent `p`'s active children by `vt`, least and largest.
    fn kid_vt(&mut self, p: u32) -> MinMax<'_> {
        MinMax(self.kid_heap(p, VT))
    }

    /// A qdisc-wide heap (`WAIT`, `READY`, `UNFIT`). A class is in one of `WAIT` and `READY`
    /// at most, and in `UNFIT` only when not in its parent's `FIT`: they share position slots.
    pub(super) fn glob_heap(&mut self, g: usize) -> Heap<'_> {
        Heap {
            rows: &mut self.glob,
            col: g,
            len: &mut self.glen[g],
            pos: &mut self.pos,
            which: if g == UNFIT { FIT } else { EL },
        }
    }

    /// The least entry of a qdisc-wide heap.
    pub(super) fn glob_first(&self, g: usize) -> Option<Entry> {
        (self.glen[g] > 0).then(|| self.glob[0][g])
    }

    // ---- real time ----

    fn file_el(&mut self, c: u32) {
        let clock = self.clock;
        let cl = &mut self.classes[c as usize];
        cl.el_on = true;
        cl.key_e = cl.e;
        cl.key_d = cl.d;
        cl.el_ready = cl.e <= clock;
        if cl.el_ready {
            let d = cl.d;
            self.glob_heap(READY).push(d, c);
        } else {
            let e = cl.e;
            self.glob_heap(WAIT).push(e, c);
        }
    }

    pub(super) fn unfile_el(&mut self, c: u32) {
        let cl = &mut self.classes[c as usize];
        if !cl.el_on {
            return;
        }
        cl.el_on = false;
        let g = if cl.el_ready { READY } else { WAIT };
        self.glob_heap(g).remove(c);
    }

    /// The leaf becomes active for real time: the deadline curve is the minimum of the old one
    /// and `rt` anchored at `(now, c)`; `e` and `d` follow (Linux `init_ed`).
    fn init_ed(&mut self, c: u32, next_len: u32) {
        let clock = self.clock;
        let cl = &mut self.classes[c as usize];
        let Some(rsc) = cl.rsc else { return };
        cl.deadline.min(&rsc, clock, cl.cumul);
        cl.e = cl.eligible().y2x(cl.cumul);
        cl.d = cl.deadline.y2x(cl.cumul.saturating_add(next_len as u64));
        self.file_el(c);
    }

    /// After a real-time packet: new `e` and `d` (Linux `update_ed`); after a link-sharing one
    /// only `d` moves (`update_d`). The leaf's keys change in place when it stays in the same
    /// heap.
    fn update_ed(&mut self, c: u32, next_len: u32, realtime: bool) {
        let clock = self.clock;
        let cl = &mut self.classes[c as usize];
        if realtime {
            cl.e = cl.eligible().y2x(cl.cumul);
        }
        cl.d = cl.deadline.y2x(cl.cumul.saturating_add(next_len as u64));
        let (e, d) = (cl.e, cl.d);
        match (cl.el_ready, e <= clock) {
            (true, true) => {
                cl.key_e = e;
                cl.key_d = d;
                self.glob_heap(READY).rekey(c, d);
            }
            (false, false) => {
                cl.key_e = e;
                cl.key_d = d;
                self.glob_heap(WAIT).rekey(c, e);
            }
            _ => {
                self.unfile_el(c);
                self.file_el(c);
            }
        }
    }

    // ---- link sharing ----

    fn file_vt(&mut self, c: u32) {
        let clock = self.clock;
        let cl = &mut self.classes[c as usize];
        let (vt, f, p) = (cl.vt, cl.f, cl.parent);
        cl.key_vt = vt;
        cl.key_f = f;
        cl.fit = f <= clock;
        let fit = cl.fit;
        self.kid_vt(p).push(vt, c);
        if !self.classes[p as usize].cf_used {
            // No upper limit below `p`: its children's `f` are 0, they always fit, and the
            // least of `VT` is the link-sharing choice (no `CF`, no `FIT`).
            debug_assert!(f == 0);
            return;
        }
        self.kid_heap(p, CF).push(f, c);
        if fit {
            self.kid_heap(p, FIT).push(vt, c);
        } else {
            self.glob_heap(UNFIT).push(f, c);
        }
    }

    fn unfile_vt(&mut self, c: u32) {
        let cl = &self.classes[c as usize];
        let (p, fit) = (cl.parent, cl.fit);
        self.kid_vt(p).remove(c);
        if !self.classes[p as usize].cf_used {
            return;
        }
        self.kid_heap(p, CF).remove(c);
        if fit {
            self.kid_heap(p, FIT).remove(c);
        } else {
            self.glob_heap(UNFIT).remove(c);
        }
    }

    /// Refile `c` under its current `vt` and `f`, changing the keys of only the heaps whose
    /// key changed (on the common path only `vt` moves: one heap, two when an upper limit lies
    /// below the parent), and moving it between its parent's fitting heap and the qdisc-wide
    /// unfit heap when it crossed `now`.
    fn refile_vt(&mut self, c: u32) {
        let clock = self.clock;
        let cl = &mut self.classes[c as usize];
        let (vt, f, p) = (cl.vt, cl.f, cl.parent);
        let (vt_moved, f_moved) = (cl.key_vt != vt, cl.key_f != f);
        let (was_fit, fit) = (cl.fit, f <= clock);
        cl.key_vt = vt;
        cl.key_f = f;
        cl.fit = fit;
        if vt_moved {
            self.kid_vt(p).rekey(c, vt);
        }
        if !self.classes[p as usize].cf_used {
            return;
        }
        if f_moved {
            self.kid_heap(p, CF).rekey(c, f);
        }
        match (was_fit, fit) {
            (true, true) if vt_moved => self.kid_heap(p, FIT).rekey(c, vt),
            (false, false) if f_moved => self.glob_heap(UNFIT).rekey(c, f),
            (true, false) => {
                self.kid_heap(p, FIT).remove(c);
                self.glob_heap(UNFIT).push(f, c);
            }
            (false, true) => {
                self.glob_heap(UNFIT).remove(c);
                self.kid_heap(p, FIT).push(vt, c);
            }
            _ => {}
        }
    }

    /// `cfmin` of `p`: the least `f` of its active children (0 when none of them can have an
    /// upper limit below it: their `f` are all 0, and the heap is not kept).
    fn update_cfmin(&mut self, p: u32) {
        if !self.classes[p as usize].cf_used {
            return;
        }
        let m = self.kid_heap(p, CF).first().map(|e| e.key).unwrap_or(0);
        self.classes[p as usize].cfmin = m;
    }

    /// The leaf `c` and the ancestors it makes active join their parents' sets with a virtual
    /// time that neither jumps ahead of nor lags their active siblings (Linux `init_vf`).
    fn init_vf(&mut self, c: u32) {
        let mut go_active = true;
        let mut cl = c;
        while cl != self.root {
            let p = self.classes[cl as usize].parent;
            let going = go_active && {
                let x = &mut self.classes[cl as usize];
                x.nactive += 1;
                x.nactive == 1
            };
            go_active = going;
            if going {
                self.activate_vt(cl, p);
            }
            let x = &mut self.classes[cl as usize];
            let f = x.myf.max(x.cfmin);
            if going {
                x.f = f;
                self.file_vt(cl);
            } else if f != x.f {
                x.f = f;
                self.refile_vt(cl);
            } else {
                // Nothing changed here, so nothing changes above: `p`'s sets hold the same
                // keys, its `cfmin` is already their least `f` (it is active), so its `f`
                // stays, and so on up (Linux walks on to the root all the same).
                break;
            }
            self.update_cfmin(p);
            cl = p;
        }
    }

    /// Class `cl` goes active under `p`: its `vt`, virtual curve, period and fit time. The cold
    /// records are read only for what lives there: OpenBSD's period offsets and upper limits.
    fn activate_vt(&mut self, cl: u32, p: u32) {
        let clock = self.clock;
        let openbsd = self.params.period_vt == PeriodVt::OpenBsd;
        let max_vt = self.kid_vt(p).last().map(|e| e.key);
        let (pc, cc) = pair(&mut self.classes, p, cl);
        match max_vt {
            Some(max) => {
                // The average of the least vt served and the largest active: a newcomer neither
                // takes over the link nor waits behind everybody. Within the same parent period
                // the class's vt never decreases.
                let vt = if pc.cvtmin != 0 {
                    mid(pc.cvtmin, max)
                } else {
                    max
                };
                if pc.vtperiod != cc.parentperiod || vt > cc.vt {
                    cc.vt = vt;
                }
            }
            None if openbsd => {
                let pcold = &mut self.cold[p as usize];
                pc.cvtoff = pc.cvtoff.saturating_add(pcold.cvtmax);
                pcold.cvtmax = 0;
                pc.cvtmin = 0;
                cc.vt = 0;
            }
            None => {
                cc.vt = pc.cvtoff;
                pc.cvtmin = 0;
            }
        }
        if let Some(fsc) = cc.fsc {
            if openbsd {
                let ccold = &mut self.cold[cl as usize];
                ccold.vtoff = pc.cvtoff.saturating_sub(ccold.pcvtoff);
                let vt = cc.vt.saturating_add(ccold.vtoff);
                cc.virt.min(&fsc, vt, cc.total);
                if cc.virt.x == vt {
                    cc.virt.x -= ccold.vtoff;
                    ccold.vtoff = 0;
                    ccold.pcvtoff = pc.cvtoff;
                }
            } else {
                cc.virt.min(&fsc, cc.vt, cc.total);
            }
        }
        cc.vtadj = 0;
        cc.vtperiod += 1;
        cc.parentperiod = pc.vtperiod;
        if pc.nactive == 0 {
            cc.parentperiod += 1;
        }
        if cc.ul {
            let ccold = &mut self.cold[cl as usize];
            if let Some(usc) = ccold.usc {
                ccold.ulimit.min(&usc, clock, cc.total);
                cc.myf = ccold.ulimit.y2x(cc.total);
                ccold.myfadj = 0;
            }
        }
    }

    /// A packet of `len` bytes was served from leaf `c` (`sent`; else the leaf emptied without
    /// sending, `len` 0): `w` of it and its ancestors grows, and their sent counters, their
    /// virtual and fit times advance and they are refiled; those left without active children go
    /// passive (Linux `update_vf`).
    pub(super) fn update_vf(&mut self, c: u32, len: u32, sent: bool) {
        let clock = self.clock;
        let catchup = self.params.ul_catchup;
        let openbsd = self.params.period_vt == PeriodVt::OpenBsd;
        let mut go_passive = self.leaf_len(c) == 0 && self.classes[c as usize].fsc.is_some();
        let mut cl = c;
        while cl != self.root {
            let p = self.classes[cl as usize].parent;
            let x = &mut self.classes[cl as usize];
            x.total = x.total.saturating_add(len as u64);
            if sent {
                x.sent.add(len);
            }
            if x.fsc.is_none() || x.nactive == 0 {
                cl = p;
                continue;
            }
            let going = go_passive && {
                x.nactive -= 1;
                x.nactive == 0
            };
            go_passive = going;
            let (pc, x) = pair(&mut self.classes, p, cl);
            let mut vt = x.virt.y2x(x.total);
            if openbsd {
                vt = vt.saturating_sub(self.cold[cl as usize].vtoff);
            }
            let vt = vt.saturating_add(x.vtadj);
            let vt = if vt < pc.cvtmin {
                // Skipped earlier for not fitting: catch up with the period's least vt.
                x.vtadj += pc.cvtmin - vt;
                pc.cvtmin
            } else {
                vt
            };
            if going {
                if openbsd {
                    let pcold = &mut self.cold[p as usize];
                    pcold.cvtmax = pcold.cvtmax.max(x.vt);
                } else {
                    pc.cvtoff = pc.cvtoff.max(vt);
                }
                x.vt = vt;
                self.unfile_vt(cl);
                self.update_cfmin(p);
                cl = p;
                continue;
            }
            x.vt = vt;
            if x.ul {
                let xc = &mut self.cold[cl as usize];
                x.myf = xc.myfadj.saturating_add(xc.ulimit.y2x(x.total));
                if let Some(tick) = catchup {
                    // OpenBSD: a fit time lagging more than a tick moves up to the clock.
                    if x.myf.saturating_add(tick) < clock {
                        let delta = clock - x.myf;
                        xc.myfadj += delta;
                        x.myf += delta;
                    }
                }
            }
            x.f = x.myf.max(x.cfmin);
            let f_moved = x.f != x.key_f;
            self.refile_vt(cl);
            if f_moved {
                self.update_cfmin(p);
            }
            cl = p;
        }
    }

    /// The leaf holds no packet any more: it leaves every set, once (guarded by its own state:
    /// calling it again does nothing).
    pub(super) fn set_passive(&mut self, c: u32) {
        self.unfile_el(c);
        let cl = &self.classes[c as usize];
        if cl.fsc.is_some() && cl.nactive > 0 {
            self.update_vf(c, 0, false);
        }
    }

    /// The leaf got its first packet, of `len` bytes.
    pub(super) fn set_active(&mut self, c: u32, len: u32, now: Time) {
        self.clock = self.clock.max(now.0);
        let cl = &self.classes[c as usize];
        if cl.rsc.is_some() && !cl.el_on {
            self.init_ed(c, len);
        }
        let cl = &self.classes[c as usize];
        if cl.fsc.is_some() && cl.nactive == 0 {
            self.init_vf(c);
        }
    }

    // ---- dequeue ----

    /// Time has come for the classes waiting on `e` or on `f`.
    fn promote(&mut self) {
        while let Some(Entry { key: e, id: c }) = self.glob_first(WAIT) {
            if e > self.clock {
                break;
            }
            self.glob_heap(WAIT).pop();
            let cl = &mut self.classes[c as usize];
            cl.el_ready = true;
            let d = cl.key_d;
            self.glob_heap(READY).push(d, c);
        }
        while let Some(Entry { key: f, id: c }) = self.glob_first(UNFIT) {
            if f > self.clock {
                break;
            }
            self.glob_heap(UNFIT).pop();
            let cl = &mut self.classes[c as usize];
            cl.fit = true;
            let (vt, p) = (cl.key_vt, cl.parent);
            self.kid_heap(p, FIT).push(vt, c);
        }
    }

    /// The leaf with the smallest `vt` among fitting classes, level by level (Linux
    /// `vttree_get_minvt`), raising each parent's `cvtmin` on the way.
    fn pick_ls(&mut self) -> Option<u32> {
        let mut cl = self.root;
        // `kind`, not `nkids`: a leaf's record is read in its own part and the shared one.
        while self.classes[cl as usize].kind == Kind::Inner {
            let fits = if self.classes[cl as usize].cf_used {
                FIT
            } else {
                VT
            };
            let Entry { key: vt, id: child } = self.kid_heap(cl, fits).first()?;
            let pc = &mut self.classes[cl as usize];
            pc.cvtmin = pc.cvtmin.max(vt);
            cl = child;
        }
        (cl != self.root).then_some(cl)
    }

    /// The dequeue: real time first, then link sharing (Linux `hfsc_dequeue`). Each turn of
    /// the loop either sends or makes a leaf passive, so it ends within `n + 1` turns.
    pub(super) fn serve(&mut self, now: Time) -> Dequeued<P> {
        self.clock = self.clock.max(now.0);
        for _ in 0..=self.root {
            if self.books.backlog().packets == 0 {
                return Dequeued::Empty;
            }
            self.promote();
            let (c, realtime) = match self.glob_first(READY) {
                Some(e) => (e.id, true),
                None => match self.pick_ls() {
                    Some(c) => (c, false),
                    None => return Dequeued::NotBefore(Time(self.next_time())),
                },
            };
            let pkt = match self.take(c, now) {
                Ok(p) => p,
                Err(Some(t)) => return Dequeued::NotBefore(Time(t.max(self.clock))),
                Err(None) => {
                    // The leaf had nothing after all (its AQM dropped the rest): passive, once.
                    self.set_passive(c);
                    continue;
                }
            };
            let len = pkt.len();
            let next = self.peek_len(c, now);
            self.update_vf(c, len, true);
            let cl = &mut self.classes[c as usize];
            if realtime {
                cl.cumul = cl.cumul.saturating_add(len as u64);
                cl.rt_sent.add(len);
                self.rt_packets += 1;
            } else {
                self.ls_packets += 1;
            }
            if self.classes[c as usize].el_on {
                match next {
                    Some(n) => self.update_ed(c, n, realtime),
                    None => self.unfile_el(c),
                }
            }
            if next.is_none() && self.leaf_len(c) > 0 {
                // A leaf that holds packets but cannot say the next one's length (it answered
                // `NotBefore`): keep its deadline for the packet just sent.
                self.set_active(c, len, now);
            }
            return Dequeued::Packet(pkt);
        }
        Dequeued::NotBefore(Time(self.next_time()))
    }

    /// When to call again: the next eligible time or the root's least fit time (Linux
    /// `hfsc_schedule_watchdog`); one ms ahead if neither exists (a leaf that answered
    /// `NotBefore` without saying when).
    fn next_time(&self) -> u64 {
        let e = self.glob_first(WAIT).map(|x| x.key);
        let f = self.glob_first(UNFIT).map(|x| x.key);
        match (e, f) {
            (Some(a), Some(b)) => a.min(b),
            (Some(a), None) | (None, Some(a)) => a,
            (None, None) => self.clock.saturating_add(1_000_000),
        }
        .max(self.clock)
    }

    /// Every class passive and out of every set (after a drain); counters and curves stay.
    pub(super) fn reset_activity(&mut self) {
        self.glen = [0; 3];
        self.pos.fill([OUT; SLOTS]);
        for cl in &mut self.classes {
            cl.el_on = false;
            cl.el_ready = false;
            cl.fit = false;
            cl.nactive = 0;
            cl.cvtmin = 0;
            cl.cfmin = 0;
            cl.klen = [0; 3];
        }
    }
}

/// Mutable references to a parent and its child (distinct indices).
#[inline]
fn pair<T>(v: &mut [T], p: u32, c: u32) -> (&mut T, &mut T) {
    let (p, c) = (p as usize, c as usize);
    if p < c {
        let (a, b) = v.split_at_mut(c);
        (&mut a[p], &mut b[0])
    } else {
        let (a, b) = v.split_at_mut(p);
        (&mut b[0], &mut a[c])
    }
}
