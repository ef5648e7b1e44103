//! Class-Based Queueing (Floyd & Jacobson, "Link-sharing and resource management models for
//! packet networks", IEEE/ACM ToN 3(4), 1995), with the behaviour of ALTQ's `altq_rmclass.c`
//! available switch by switch (seeds 000 and 001).
//!
//! ## What it promises
//! Every class has an allocation (`rate`). A backlogged class whose measured rate is under its
//! allocation sends; a class over its allocation is **suspended** until its estimator says it is
//! back at its rate, unless it may **borrow** from an underlimit ancestor under the chosen
//! link-sharing guideline ([`Guideline`]). Among classes allowed to send, the **general
//! scheduler** serves the highest priority first (0 first), and round robin — packet by packet
//! (PRR) or weighted by allocation (WRR) — inside a priority.
//!
//! ## State
//! * the **estimator** of each class ([`Estimator`]): an EWMA (gain 2^-5) of the idle time
//!   `idle = (finish of this packet − finish of the class's previous packet) − (this packet's time
//!   at the class's rate)`, measured on the link's expected finish times `ifnow`. `avgidle > 0` is
//!   *underlimit*, `avgidle ≤ 0` *overlimit* (F&J's *at-limit* is `avgidle` near 0); an overlimit
//!   class gets an `undertime`: `base + tidle`, with `tidle` the wait that brings `avgidle` back
//!   to 0 and `base` the packet's actual (default) or expected ([`UndertimeClock`]) departure;
//! * per priority, a **ring** of awake backlogged leaves (the round-robin order, WRR allotments);
//! * the **sleepers**: leaves suspended by the *delay action*, keyed by `undertime` (any dequeue
//!   at or after it wakes them, as a packet arrival does in ALTQ) and by their timer (what
//!   `NotBefore` reports; with a driver timer and ALTQ's minimum suspension it is at least two
//!   ticks away, seed 001 §6.1.1);
//! * per height `h` (leaves 0, parents one above their highest child, as ALTQ's `depth_`), the
//!   classes with a backlogged descendant keyed by `undertime`: "is there an unsatisfied class at
//!   level h" is one look at the first key (formal guidelines, and ALTQ's `rmc_tl_satisfied`);
//! * the top-level **cutoff** `N` and the link's expected finish time `ifnow`.
//!
//! ## Dequeue
//! Wake the sleepers that are due; for each priority, visit the ring: an underlimit leaf sends;
//! an overlimit leaf walks its borrow chain (each class on it must have `borrow`) to the first
//! underlimit ancestor `a` and sends borrowing from it if the guideline allows (formal: no
//! unsatisfied class at a level below `a`'s; top-level: `a`'s level ≤ cutoff); a leaf with no
//! underlimit ancestor gets the delay action (suspended until `undertime + offtime −
//! last packet time`, ALTQ's `rmc_delay_action`) and leaves the ring; a leaf refused only by the
//! cutoff or the formal rule is not suspended but **parked** out of the ring until its condition
//! can change (the cutoff rises; no unsatisfied class remains below the lender's level — then a
//! few at a time, [`FORMAL_BATCH`]; a class on its chain becomes underlimit). With nothing sent,
//! formal returns parked leaves and retries, top-level raises the cutoff and retries (ALTQ's
//! rules 3 and 4), `efficient` sends from the first overlimit class that may borrow, else
//! `NotBefore(earliest timer)`. The charge runs the estimator of the leaf and all its ancestors.
//!
//! ## Complexity
//! With depth `d ≤` [`MAX_DEPTH`], `n` classes and 8 priorities: enqueue is O(d log n) (the
//! backlog walk and the unsatisfied sets: a class joining or changing its key is a push on a
//! lazy min-heap, O(1) for the usual later key, O(log n) at worst; "is a class at this height
//! unsatisfied" is O(1), `unsat.rs`); a dequeue that sends from an underlimit or borrowing
//! class costs O(d log n) for the charge plus O(d + levels) for the permission check; each
//! suspension costs O(log n) and is caused by an earlier charge (amortised O(1) per packet).
//! Leaves refused by the guideline are parked, so a scan does not revisit them (ALTQ rescans its
//! whole active list); returning one is O(log n). WRR's second pass (ALTQ's `deficit = 2` loop)
//! visits the awake leaves of one priority at most twice, only when allotments are below the
//! packet size. The bench (`benches/cbq.rs`) measures 1 … 10k borrowing classes: per-packet
//! cost grows only with the logarithms and cache misses (see `docs/cbq.md`).
//!
//! ## Layout
//! This file holds the records and the [`Discipline`] hooks (the dequeue loop); by concern:
//! `build` (checks, derivation, allotments), `queue` (leaf queues, enqueue, victims), `rings`
//! (rings, sleepers, parked leaves, cutoff), `share` (estimators, the guidelines, the delay
//! action, the charge), `serve` (the general scheduler), `unsat` (the unsatisfied set of a
//! height), `adopt`, `stats`, `estimator`, `spec`.
//! Statistics and dropped packets are kept by the provided [`Qdisc`] methods around the hooks
//! ([`crate::qdisc::discipline`]); the class tree is validated by [`crate::tree`].
//!
//! ## Differences from ALTQ, on purpose
//! * no device-queue model beyond `ifnow`; ALTQ's 16-MTU clamp on it (`maxiftime`) only with
//!   [`CbqParams::clamp_ifnow`] (seed 001 §6.1: behind a large driver buffer it wastes the link);
//! * WRR allotments are computed exactly (ALTQ divides by an integer `M` that is 0 on slow
//!   links) and over leaves only (ALTQ counts inner classes in `num_`/`alloc_` too);
//! * times are ns rather than µs, and packet times are exact (no `ns_per_byte` truncation).

mod adopt;
mod build;
mod estimator;
mod queue;
mod rings;
mod serve;
mod share;
mod spec;
mod stats;
mod unsat;
pub use build::wrr_allotments;
pub use estimator::{derive, offtime_first_order, tx_ns, Derived, Estimator, Verdict, FILTER_GAIN};
pub use spec::*;

use std::collections::{BTreeSet, VecDeque};

use crate::classify::{ClassId, Classifier};
use crate::packet::Packet;
use crate::qdisc::adopt::AdoptReport;
use crate::qdisc::fifo::{FifoLimit, FifoQueue};
use crate::qdisc::lazy::IdleLeaves;
use crate::qdisc::leaf::LeafSpec;
use crate::qdisc::{
    Backlog, Books, ClassMode, ClassStats, ClassView, Counter, Dequeued, Discipline, DropCounts,
    DropReason, Dropped, Qdisc,
};
use crate::tree::{ClassTree, DepthLimits};
use crate::units::{Rate, Time};

const NIL: u32 = u32::MAX;
/// ALTQ's `RM_MAXDEPTH`: the cutoff value meaning "no cutoff".
const NO_CUTOFF: u32 = 32;
/// Formally blocked leaves returned per level at a time (see `readmit_formal`).
pub const FORMAL_BATCH: usize = 4;

enum Leaf<P> {
    Inner,
    Fifo(FifoQueue<P>),
    Boxed(Box<dyn Qdisc<P>>),
}

struct Class<P> {
    name: String,
    parent: u32,
    rate: u64,
    prio: u8,
    borrow: bool,
    /// ALTQ's `depth_`: 0 for leaves, parents one above their highest child.
    height: u8,
    avgpkt: u32,
    extradelay: u64,
    derived: Derived,
    est: Estimator,
    /// `None`: underlimit. `Some(t)`: overlimit until `t`.
    undertime: Option<u64>,
    leaf: Leaf<P>,
    in_ring: bool,
    /// Parked by the top-level cutoff until the cutoff rises.
    blocked: bool,
    /// Parked by the formal rule: `Some((lender level, generation))` until no class below that
    /// level is unsatisfied or the class's own `undertime` passes.
    fblocked: Option<(u8, u32)>,
    fgen: u32,
    /// When the formal block may end by itself: the earliest `undertime` on the chain below
    /// the lender (the class or an ancestor becoming underlimit gives a nearer lender).
    fkey: u64,
    asleep: bool,
    sleep_u: u64,
    sleep_t: u64,
    /// WRR bytes left this round, and the allotment per round.
    alloc: i64,
    allot: i64,
    /// Backlogged leaves in the subtree (including itself).
    active: u32,
    sent: Counter,
    drops: u64,
    overlimits: u64,
    borrows: u64,
    lends: u64,
    delays: u64,
    /// The leaf qdisc's `marked` count already added to ours (marks add up like drops).
    marks_seen: u64,
}

impl<P: Packet> Class<P> {
    /// ECN marks of the leaf qdisc (inline FIFOs never mark).
    fn leaf_marked(&self) -> u64 {
        match &self.leaf {
            Leaf::Boxed(b) => b.stats().marked,
            _ => 0,
        }
    }
}

/// What a leaf may do now.
enum Perm {
    /// Send; `Some(a)` when borrowing from ancestor `a`.
    Allow(Option<u32>),
    /// Not now, without suspension: the top-level cutoff.
    Skip,
    /// Not now, without suspension: the formal rule (an unsatisfied class below the lender's
    /// level); carries the lender's level.
    Formal(u8, u64),
    /// Suspend (delay action); carries ALTQ's `top` of the borrow chain.
    Delay(Option<u32>),
}

/// The CBQ qdisc. See the module documentation.
pub struct Cbq<P: Packet> {
    params: CbqParams,
    classes: Vec<Class<P>>,
    /// Parents before children.
    order: Vec<u32>,
    rings: [VecDeque<u32>; NUM_PRIO],
    /// Leaves refused only because of the top-level cutoff, per prio: they return to their ring
    /// when the cutoff rises (so a scan never visits them again in between).
    blocked: [Vec<u32>; NUM_PRIO],
    /// Leaves refused by the formal rule, per lender level, as `(class, generation)` (stale
    /// entries are skipped), and keyed by their own `undertime`.
    fblocked: Vec<VecDeque<(u32, u32)>>,
    fblock_u: BTreeSet<(u64, u32)>,
    sleep_u: BTreeSet<(u64, u32)>,
    sleep_t: BTreeSet<(u64, u32)>,
    /// Sleeping leaves that may borrow, per prio (candidates of `efficient`), and a cursor.
    sleep_borrowers: [BTreeSet<u32>; NUM_PRIO],
    eff_cursor: [u32; NUM_PRIO],
    /// Per height: classes with a backlogged descendant, keyed by `undertime` (0 if underlimit;
    /// `unsat.rs`).
    unsat: Vec<unsat::Unsat>,
    ifnow: u64,
    maxiftime: u64,
    cutoff: u32,
    max_height: u32,
    classifier: Classifier,
    default: u32,
    books: Books<P>,
    /// Leaves with per-flow state (by class id), the empty ones in the order they went empty,
    /// for [`Qdisc::reclaim_idle`] (`crate::qdisc::lazy`).
    idle: IdleLeaves,
}

/// Whether `(k, c)` is class `c`'s entry in its unsatisfied set now: `c` has a backlogged
/// descendant and its key (`undertime`, 0 if none) is `k` (what [`unsat::Unsat`] asks).
fn filed_with<P>(classes: &[Class<P>], k: u64, c: u32) -> bool {
    classes
        .get(c as usize)
        .is_some_and(|cl| cl.active > 0 && cl.undertime.unwrap_or(0) == k)
}

impl<P: Packet> Cbq<P> {
    /// Index of the class with this name.
    pub fn class_id(&self, name: &str) -> Option<ClassId> {
        self.classes
            .iter()
            .position(|c| c.name == name)
            .map(|i| i as ClassId)
    }

    /// Name of a class.
    pub fn class_name(&self, id: ClassId) -> Option<&str> {
        self.classes.get(id as usize).map(|c| c.name.as_str())
    }

    pub fn len(&self) -> usize {
        self.classes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.classes.is_empty()
    }

    pub fn params(&self) -> &CbqParams {
        &self.params
    }

    pub fn classifier(&self) -> &Classifier {
        &self.classifier
    }

    /// The derived (or overridden) estimator parameters of a class: `(derived, maxidle_ns,
    /// minidle_ns (≤ 0), offtime_ns)` as in effect.
    pub fn class_params(&self, id: ClassId) -> Option<(Derived, i64, i64, u64)> {
        self.classes.get(id as usize).map(|c| {
            (
                c.derived,
                c.est.maxidle >> FILTER_GAIN,
                c.est.minidle >> FILTER_GAIN,
                c.est.offtime,
            )
        })
    }

    /// The WRR allotment (bytes per round) of a leaf.
    pub fn class_allotment(&self, id: ClassId) -> Option<u64> {
        self.classes.get(id as usize).map(|c| c.allot as u64)
    }

    /// The counters of one class (inner classes: their subtree's).
    pub fn class_stats(&self, id: ClassId) -> Option<ClassStats> {
        self.classes.get(id as usize).map(|c| ClassStats {
            sent: c.sent,
            drops: c.drops,
            overlimits: c.overlimits,
            lends: c.lends,
            borrows: c.borrows,
            giants: 0,
            marked: c.leaf_marked(),
        })
    }

    /// Number of delay actions (suspensions) of a class.
    pub fn class_delays(&self, id: ClassId) -> Option<u64> {
        self.classes.get(id as usize).map(|c| c.delays)
    }

    /// Average idle time in ns (negative when over the allocation).
    pub fn class_avgidle_ns(&self, id: ClassId) -> Option<i64> {
        self.classes.get(id as usize).map(|c| c.est.avgidle_ns())
    }

    /// The top-level cutoff level (32 = none).
    pub fn cutoff(&self) -> u32 {
        self.cutoff
    }
}

impl<P: Packet> Discipline<P> for Cbq<P> {
    fn books(&self) -> &Books<P> {
        &self.books
    }
    fn books_mut(&mut self) -> &mut Books<P> {
        &mut self.books
    }

    fn enqueue_inner(&mut self, pkt: P, now: Time) -> Result<(), Dropped<P>> {
        let c = self.classifier.classify(pkt.meta());
        self.enqueue_to_inner(c, pkt, now)
    }

    fn dequeue_inner(&mut self, now: Time) -> Dequeued<P> {
        if self.books.backlog().packets == 0 {
            return Dequeued::Empty;
        }
        // Suspensions that are over (a dequeue at or after `undertime`, or the timer).
        loop {
            let due_u = self.sleep_u.first().filter(|&&(t, _)| t <= now.0).copied();
            let due_t = self.sleep_t.first().filter(|&&(t, _)| t <= now.0).copied();
            match due_u.or(due_t) {
                Some((_, c)) => self.wake(c),
                None => break,
            }
        }
        let mut leaf_t = u64::MAX;
        if !self.fblock_u.is_empty() {
            self.readmit_formal(now.0);
        }
        for _ in 0..=NO_CUTOFF {
            let mut first = None;
            for p in 0..NUM_PRIO {
                if self.rings[p].is_empty() {
                    continue;
                }
                if let Some(pkt) = self.serve_prio(p, now, &mut first, &mut leaf_t) {
                    return Dequeued::Packet(pkt);
                }
            }
            if self.params.guideline == Guideline::Formal && !self.fblock_u.is_empty() {
                // Serving the scan may have satisfied the classes that blocked others.
                if self.readmit_formal(now.0) > 0 {
                    continue;
                }
            }
            if self.params.guideline == Guideline::TopLevel {
                // Rule 3: no class could send at this cutoff: raise it and try again.
                // Leaves parked by the cutoff in earlier calls count as refused borrowers: ALTQ
                // would have met them in its scan.
                let parked = self.blocked.iter().any(|b| !b.is_empty());
                if (first.is_some() || parked) && self.cutoff < self.max_height {
                    self.set_cutoff(self.cutoff + 1);
                    continue;
                }
                // Rule 4.
                self.set_cutoff(NO_CUTOFF);
            }
            if self.params.efficient {
                if let Some(c) = self.efficient_candidate(first) {
                    let lender = self.classes[c as usize].parent;
                    let lender = (lender != NIL).then_some(lender);
                    if let Some(l) = lender {
                        if self.params.guideline == Guideline::TopLevel {
                            let v = self.classes[l as usize].height as u32;
                            self.set_cutoff(v);
                        }
                    }
                    match self.send(c, lender, now) {
                        Ok(pkt) => return Dequeued::Packet(pkt),
                        Err(Some(t)) => leaf_t = leaf_t.min(t),
                        Err(None) => {}
                    }
                }
            }
            break;
        }
        if self.books.backlog().packets == 0 {
            return Dequeued::Empty;
        }
        let mut next = leaf_t;
        if let Some(&(t, _)) = self.sleep_t.first() {
            next = next.min(t);
        }
        if let Some(&(t, _)) = self.fblock_u.first() {
            next = next.min(t);
        }
        if next == u64::MAX {
            // Only classes skipped by the guideline: poll again after one MTU at link rate.
            next = now.0 + tx_ns(self.params.mtu as u64, self.params.link.0).max(1);
        }
        Dequeued::NotBefore(Time(next.max(now.0)))
    }

    /// Every queued packet, leaf by leaf in class order, regardless of the estimator.
    fn drain_inner(&mut self, now: Time) -> Vec<P> {
        let mut out = Vec::new();
        for c in 0..self.classes.len() as u32 {
            out.extend(self.drain_leaf(c, now));
        }
        out
    }

    fn as_any_inner(&mut self) -> Option<&mut dyn std::any::Any> {
        Some(self)
    }

    /// From another CBQ: [`Cbq::adopt`] (estimators and counters kept class by class);
    /// otherwise by requeueing.
    fn adopt_inner(&mut self, old: &mut dyn Qdisc<P>, now: Time) -> Option<AdoptReport> {
        let o = old.as_any_mut()?.downcast_mut::<Cbq<P>>()?;
        Some(Cbq::adopt(self, o, now))
    }

    fn kind_inner(&self) -> &'static str {
        "cbq"
    }

    fn extra_stats_inner(&self, f: &mut dyn FnMut(&'static str, f64)) {
        f("cutoff", self.cutoff as f64);
        f("sleeping_classes", self.sleep_u.len() as f64);
        f(
            "delays",
            self.classes.iter().map(|c| c.delays).sum::<u64>() as f64,
        );
        self.idle.report(f);
    }

    /// O(released): leaves empty for the hold, oldest first (`crate::qdisc::lazy`).
    fn reclaim_idle_inner(&mut self, now: Time, budget: u32) -> u32 {
        let mut n = 0;
        while n < budget {
            let Some(c) = self.idle.pop_due(now.0) else {
                break;
            };
            if let Some(Class {
                leaf: Leaf::Boxed(b),
                ..
            }) = self.classes.get_mut(c as usize)
            {
                if b.release_state() {
                    self.idle.on_released(c);
                    n += 1;
                }
            }
        }
        n
    }

    fn visit_classes_inner(&self, f: &mut dyn FnMut(&ClassView<'_>)) {
        self.visit(f)
    }
}

#[cfg(test)]
mod tests;
