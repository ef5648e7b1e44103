//! HTB taking over the HTB it replaces (a reload, a class added, changed or deleted at run time).
//!
//! Principles: classes are matched by name; a class kept keeps its counters and its buckets (as
//! of the moment it is taken over, capped at the new bursts) and its packets, in order; the
//! packets of classes that are gone are classified again; the qdisc-wide books continue the old
//! ones exactly (the moved packets are neither counted twice nor lost), and what the old leaves
//! drop while draining is collected. Linux has no equivalent (`tc class change` keeps the class
//! object, `tc qdisc replace` loses everything); docs/router.md states the promise ("counters
//! survive a reload").
//!
//! The take-over is done all at once ([`Htb::adopt`], O(n + q)) or in bounded steps while the new
//! tree already runs ([`Htb::adopt_begin`], [`Htb::adopt_step`]): the router installs a new tree
//! of 100,000 classes without stopping forwarding, because no step does more than a bounded
//! number of classes. What makes the steps exact is one rule: **a class of the new tree is taken
//! over before anything touches it**. The steps walk the old classes in order; a packet that
//! arrives for a class not yet taken over first takes over that class and its ancestors (O(depth)
//! plus its queue, `adopt_on_demand`), and a packet moved into a class does the same. So a
//! class's old packets are always ahead of its new ones, its buckets and counters continue, and
//! nothing is charged twice. Until then the old packets wait (they count in the backlog); a class
//! not yet taken over shows the counters it gathered since the swap.
//!
//! What an inner class sent is the sum over its subtree (`stats::sent_totals`), with an offset
//! stored in the inner class. Taking over old class `x` adds what it stored, `s(x)`, to every kept
//! class `a'` whose old counterpart is `x` or an ancestor of `x`, and takes it from `a'`'s new
//! parent: summed over every `x`, each kept class's total is its old total, and a class added
//! starts from nothing; the sums are computed one class at a time, in any order.
use super::*;

/// Which class of the new tree each class of the old one becomes, and back: built off the
/// datapath (the router builds it from the two policies on its builder thread).
#[derive(Clone, Debug)]
pub struct AdoptMap {
    /// Per old class: its new id, or `NIL` when it is gone.
    to_new: Vec<u32>,
    /// Per new class: its old id, or `NIL` when it is new or already taken over.
    from_old: Vec<u32>,
}

impl AdoptMap {
    /// From, per old class, its new id (`None`: gone), for a new tree of `new_len` classes.
    /// Ids out of range, or given twice, count as gone. O(old + new).
    pub fn new(to_new: &[Option<ClassId>], new_len: usize) -> AdoptMap {
        let mut from_old = vec![NIL; new_len];
        let mut to = vec![NIL; to_new.len()];
        for (c, n) in to_new.iter().enumerate() {
            if let Some(slot) = n.and_then(|n| from_old.get_mut(n as usize)) {
                if *slot == NIL {
                    *slot = c as u32;
                    to[c] = n.unwrap_or(NIL);
                }
            }
        }
        AdoptMap {
            to_new: to,
            from_old,
        }
    }

    /// Classes of the old tree kept in the new one.
    pub fn kept(&self) -> usize {
        self.to_new.iter().filter(|&&n| n != NIL).count()
    }
}

/// What a take-over carries from one step to the next.
struct Moving<P> {
    /// The next old class the steps take over.
    next: u32,
    /// Packets of classes that are gone (or no longer leaves), to classify again.
    loose: Vec<P>,
    report: AdoptReport,
}

impl<P> Default for Moving<P> {
    fn default() -> Self {
        Moving {
            next: 0,
            loose: Vec::new(),
            report: AdoptReport::default(),
        }
    }
}

/// A take-over in steps: the old tree, the map and where the steps are.
pub(super) struct Pending<P: Packet> {
    old: Box<Htb<P>>,
    map: AdoptMap,
    st: Moving<P>,
}

/// A finished take-over: the old tree (empty) and the map, for the caller to free where
/// freeing costs nothing (the router's builder thread), and the report of what moved.
pub struct Adopted<P: Packet> {
    pub report: AdoptReport,
    _old: Box<Htb<P>>,
    _map: AdoptMap,
}

impl<P: Packet> Htb<P> {
    /// Take over the state of the scheduler this one replaces (a reload, or a class added, changed
    /// or deleted at run time), so that nothing queued is lost and counters continue.
    ///
    /// Classes are matched by name. A class that exists in both keeps its counters and its
    /// buckets (as of `now`, capped at the new `burst`/`cburst`); its queued packets move to the
    /// new class in order. Packets of classes that are gone, or that are no longer leaves, are
    /// classified again by the new filters. A packet the new leaf refuses (a smaller `limit`) is
    /// counted as dropped with the leaf's reason and handed out through `take_dropped`. The
    /// qdisc-wide counters continue from `old`'s, so `enqueued = dequeued + dropped + backlog`
    /// still holds. `old` is left empty.
    ///
    /// O(n + q) for `n` classes and `q` queued packets; meant for the control path (the router's
    /// datapath uses [`Htb::adopt_begin`] and [`Htb::adopt_step`]).
    pub fn adopt(&mut self, old: &mut Htb<P>, now: Time) -> AdoptReport {
        self.adopt_finish_now(now);
        old.adopt_finish_now(now);
        let (old_names, new_names) = (old.names.all(), self.names.all());
        let (mut old_to_new, mut added) = crate::tree::match_names(
            old_names.iter().map(String::as_str),
            new_names.iter().map(String::as_str),
        );
        // Slots retired in place (`reshape`) are no classes on either side.
        for (c, n) in old_to_new.iter_mut().enumerate() {
            if !old.is_live(c as ClassId) {
                *n = None;
            }
        }
        added.retain(|&c| self.is_live(c));
        let mut map = AdoptMap::new(&old_to_new, self.classes.len());
        let mut st = Moving::default();
        self.books.take_over(&mut old.books);
        while (st.next as usize) < old.classes.len() {
            self.adopt_next(old, &mut map, &mut st, now);
        }
        self.settle_loose(old, &mut map, &mut st, now);
        let mut report = st.report;
        for (c, n) in old_to_new.iter().enumerate() {
            match n {
                Some(_) => report.kept.push(old_names[c].clone()),
                None if old.is_live(c as ClassId) => report.removed.push(old_names[c].clone()),
                None => {}
            }
        }
        report.added = added
            .iter()
            .map(|&c| new_names[c as usize].clone())
            .collect();
        report
    }

    /// Start taking over `old` in steps ([`Htb::adopt_step`]); from now on this tree takes the
    /// packets, and `old`'s queued packets count in its backlog until they are moved. O(1) (a
    /// take-over of `old` itself still under way is finished first).
    pub fn adopt_begin(&mut self, mut old: Box<Htb<P>>, map: AdoptMap, now: Time) {
        self.adopt_finish_now(now);
        old.adopt_finish_now(now);
        self.books.take_over(&mut old.books);
        self.adopting = Some(Box::new(Pending {
            old,
            map,
            st: Moving::default(),
        }));
    }

    /// Whether a take-over is under way.
    pub fn adopting(&self) -> bool {
        self.adopting.is_some()
    }

    /// How far the take-over under way is: the old classes the steps have reached, of the old
    /// tree's classes (`None`: none is under way). A caller that bounds its steps by time counts
    /// each step's classes with it.
    pub fn adopt_progress(&self) -> Option<(usize, usize)> {
        self.adopting
            .as_ref()
            .map(|p| (p.st.next as usize, p.old.classes.len()))
    }

    /// Take over at most `budget` more old classes (each with its queued packets and, first, its
    /// new ancestors not yet taken over: O(budget · depth) plus the packets moved). `Some` once
    /// the take-over is finished: the old tree, for the caller to free.
    pub fn adopt_step(&mut self, now: Time, budget: usize) -> Option<Adopted<P>> {
        let mut p = self.adopting.take()?;
        let Pending { old, map, st } = &mut *p;
        for _ in 0..budget {
            if st.next as usize >= old.classes.len() {
                break;
            }
            self.adopt_next(old, map, st, now);
        }
        self.settle_loose(old, map, st, now);
        if (st.next as usize) < old.classes.len() {
            self.adopting = Some(p);
            return None;
        }
        let Pending { old, map, st } = *p;
        Some(Adopted {
            report: st.report,
            _old: old,
            _map: map,
        })
    }

    /// Finish a take-over under way at once (O(n + q)); nothing if none is.
    pub(super) fn adopt_finish_now(&mut self, now: Time) {
        while self.adopt_step(now, usize::MAX).is_none() && self.adopting.is_some() {}
    }

    /// Before class `c` of this tree is touched by a packet: take it over, with its ancestors,
    /// if a take-over is under way. O(depth) plus the classes' queues.
    #[cold]
    #[inline(never)]
    pub(super) fn adopt_on_demand(&mut self, c: u32, now: Time) {
        let Some(mut p) = self.adopting.take() else {
            return;
        };
        let Pending { old, map, st } = &mut *p;
        self.adopt_path(old, map, st, c, now);
        self.settle_loose(old, map, st, now);
        self.adopting = Some(p);
    }

    /// Take over the next old class the steps reach.
    fn adopt_next(&mut self, old: &mut Htb<P>, map: &mut AdoptMap, st: &mut Moving<P>, now: Time) {
        let c = st.next;
        st.next += 1;
        match map.to_new[c as usize] {
            NIL => {
                // Gone: what it sent stays in its kept ancestors' totals, its packets are
                // classified again.
                self.carry_sent(old, map, c);
                if old.classes[c as usize].is_leaf() {
                    self.drain_old(old, c, now, &mut st.loose);
                }
            }
            n if map.from_old[n as usize] == c => self.adopt_path(old, map, st, n, now),
            _ => {} // taken over already, on demand
        }
    }

    /// Take over new class `n` and its ancestors not yet taken over, top down.
    fn adopt_path(
        &mut self,
        old: &mut Htb<P>,
        map: &mut AdoptMap,
        st: &mut Moving<P>,
        n: u32,
        now: Time,
    ) {
        let mut path = [NIL; MAX_DEPTH];
        let (mut k, mut x) = (0, n);
        while x != NIL && k < MAX_DEPTH {
            if map.from_old[x as usize] != NIL {
                path[k] = x;
                k += 1;
            }
            x = self.classes[x as usize].parent;
        }
        for &x in path[..k].iter().rev() {
            self.take_kept(old, map, st, x, now);
        }
    }

    /// Old class `c` becomes new class `n`: buckets, counters, giants, its leaf qdisc's
    /// counters, and its packets.
    fn take_kept(
        &mut self,
        old: &mut Htb<P>,
        map: &mut AdoptMap,
        st: &mut Moving<P>,
        n: u32,
        now: Time,
    ) {
        let c = map.from_old[n as usize];
        map.from_old[n as usize] = NIL;
        self.carry_sent(old, map, c);
        let o = &old.classes[c as usize];
        let op = old.prof(c);
        let idle = now.0.saturating_sub(o.t_c).min(MAX_IDLE_NS);
        let (tokens, rate, ctokens, ceil) = (o.tokens, op.rate, o.ctokens, op.ceil);
        let counters = old.cold[c as usize];
        let old_key = self.wait_key(n);
        let np = *self.prof(n);
        let cl = &mut self.classes[n as usize];
        cl.tokens = clamp_debt(refill(tokens, idle, rate, np.buffer), np.rate);
        cl.ctokens = clamp_debt(refill(ctokens, idle, ceil, np.cbuffer), np.ceil);
        cl.t_c = now.0;
        // What it sent is carried by `carry_sent`; the rest continues.
        let k = &mut self.cold[n as usize];
        k.drops = counters.drops;
        k.lends = counters.lends;
        k.borrows = counters.borrows;
        match old.giants.get(&c) {
            Some(&g) => self.giants.insert(n, g),
            None => self.giants.remove(&n),
        };
        let (mode, until) = self.mode_at(n, now.0);
        self.change_mode(n, old_key, mode, until);
        // Taking over a throttled class is not a new overlimit event.
        self.cold[n as usize].overlimits = counters.overlimits;
        if !old.classes[c as usize].is_leaf() {
            return;
        }
        let mut pkts = Vec::new();
        // What the old leaf drops while it drains is the class's too (`counters` was read
        // before).
        let drained_drops = self.drain_old(old, c, now, &mut pkts);
        let k = &mut self.cold[n as usize];
        k.drops = k.drops.wrapping_add(drained_drops as u32);
        let mut moved = Counter::default();
        pkts.iter().for_each(|p| moved.add(p.len()));
        // A leaf qdisc kept by name continues its own counters (drops by reason, marks).
        let (oc, nc) = (&old.classes[c as usize], &self.classes[n as usize]);
        if oc.kind == LeafKind::Boxed && nc.kind == LeafKind::Boxed {
            let prior = old.boxed[oc.boxed()].stats().clone();
            let nb = nc.boxed();
            let leaf = &mut self.boxed[nb];
            leaf.stats_mut().continue_from(&prior, moved);
            // Its marks are in the qdisc-wide count already (continued from `old`).
            self.marks_seen[nb] = leaf.stats().marked;
        }
        if self.classes[n as usize].is_leaf() {
            for pkt in pkts {
                self.requeue(n, pkt, now, &mut st.report);
            }
        } else {
            st.loose.extend(pkts);
        }
    }

    /// Empty old leaf `c` into `out`; what it drops on the way (an AQM still runs) becomes
    /// ours, counted, with its marks. Returns how many packets it dropped.
    fn drain_old(&mut self, old: &mut Htb<P>, c: u32, now: Time, out: &mut Vec<P>) -> u64 {
        if old.leaf_backlog(c).packets == 0 {
            return 0;
        }
        let marked = old.books.stats().marked;
        out.extend(old.drain_leaf(c, now));
        let mut dropped = 0;
        while let Some(d) = old.books.take_dropped() {
            self.books.drop_victim(d);
            dropped += 1;
        }
        self.books
            .mark(old.books.stats().marked.saturating_sub(marked));
        dropped
    }

    /// What old class `c` stored as sent goes to the kept classes whose old counterparts are
    /// `c` and its ancestors, and is taken from their new parents (module docs). O(depth).
    fn carry_sent(&mut self, old: &Htb<P>, map: &AdoptMap, c: u32) {
        let k = old.cold[c as usize];
        if k.sent_packets == 0 && k.sent_bytes == 0 {
            return;
        }
        let mut a = c;
        while a != NIL {
            let n = map.to_new[a as usize];
            if n != NIL {
                let s = &mut self.cold[n as usize];
                s.sent_packets = s.sent_packets.wrapping_add(k.sent_packets);
                s.sent_bytes = s.sent_bytes.wrapping_add(k.sent_bytes);
                let p = self.classes[n as usize].parent;
                if let Some(s) = self.cold.get_mut(p as usize) {
                    s.sent_packets = s.sent_packets.wrapping_sub(k.sent_packets);
                    s.sent_bytes = s.sent_bytes.wrapping_sub(k.sent_bytes);
                }
            }
            a = old.classes[a as usize].parent;
        }
    }

    /// Classify the loose packets again and put each in its leaf, taking that leaf over first.
    fn settle_loose(
        &mut self,
        old: &mut Htb<P>,
        map: &mut AdoptMap,
        st: &mut Moving<P>,
        now: Time,
    ) {
        // In the order they were queued (taking a leaf over may add more after them).
        while !st.loose.is_empty() {
            for pkt in std::mem::take(&mut st.loose) {
                st.report.reclassified += 1;
                let id = self.classifier.classify(pkt.meta());
                let to = match self.classes.get(id as usize) {
                    Some(cl) if cl.is_leaf() => id,
                    _ => self.default,
                };
                self.adopt_path(old, map, st, to, now);
                self.requeue(to, pkt, now, &mut st.report);
            }
        }
    }

    /// Put back a packet that was already counted as enqueued (by `adopt`).
    pub(super) fn requeue(&mut self, c: u32, pkt: P, now: Time, report: &mut AdoptReport) {
        let was_empty = self.leaf_backlog(c).packets == 0;
        let res = if self.classes[c as usize].kind == LeafKind::Boxed {
            let b = self.classes[c as usize].boxed();
            self.idle.busy(b as u32);
            let r = self.boxed[b].enqueue(pkt, now);
            if self.boxed[b].backlog().packets == 0 {
                self.idle.went_idle(b as u32, now.0);
            }
            r
        } else {
            self.fifo_push(c, pkt)
        };
        match res {
            Ok(()) => {
                report.moved_packets += 1;
                if was_empty {
                    self.activate_leaf(c);
                }
            }
            Err(d) => {
                report.dropped_packets += 1;
                let k = &mut self.cold[c as usize];
                k.drops = k.drops.wrapping_add(1);
                self.books.drop_victim(d);
            }
        }
        self.collect_victims(c);
    }
}
