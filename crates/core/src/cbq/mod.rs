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
//! backlog walk and the unsatisfied sets); a dequeue that sends from an underlimit or borrowing
//! class costs O(d log n) for the charge plus O(d + levels) for the permission check; each
//! suspension costs O(log n) and is caused by an earlier charge (amortised O(1) per packet).
//! Leaves refused by the guideline are parked, so a scan does not revisit them (ALTQ rescans its
//! whole active list); returning one is O(log n). WRR's second pass (ALTQ's `deficit = 2` loop)
//! visits the awake leaves of one priority at most twice, only when allotments are below the
//! packet size. The bench (`benches/cbq.rs`) measures 1 … 10k borrowing classes: per-packet
//! cost grows only with the logarithms and cache misses (see `docs/cbq.md`).
//!
//! ## Differences from ALTQ, on purpose
//! * no device-queue model beyond `ifnow`; ALTQ's 16-MTU clamp on it (`maxiftime`) only with
//!   [`CbqParams::clamp_ifnow`] (seed 001 §6.1: behind a large driver buffer it wastes the link);
//! * WRR allotments are computed exactly (ALTQ divides by an integer `M` that is 0 on slow
//!   links) and over leaves only (ALTQ counts inner classes in `num_`/`alloc_` too);
//! * times are ns rather than µs, and packet times are exact (no `ns_per_byte` truncation).

mod adopt;
mod estimator;
mod spec;
pub use estimator::{derive, tx_ns, Derived, Estimator, Verdict, FILTER_GAIN};
pub use spec::*;

use std::collections::{BTreeSet, VecDeque};

use crate::classify::{ClassId, Classifier};
use crate::leaf::LeafSpec;
use crate::packet::Packet;
use crate::qdisc::adopt::AdoptReport;
use crate::qdisc::fifo::{FifoLimit, FifoQueue};
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
    /// Per height: classes with a backlogged descendant, keyed by `undertime` (0 if underlimit).
    unsat: Vec<BTreeSet<(u64, u32)>>,
    ifnow: u64,
    maxiftime: u64,
    cutoff: u32,
    max_height: u32,
    classifier: Classifier,
    default: u32,
    books: Books<P>,
}

/// ALTQ's WRR allotment (`rmc_wrr_set_weights`): per priority, `M = Σ allotment / (num · mtu)`
/// and each class gets `allotment / M` bytes per round, where `allotment` is the class's rate in
/// bytes per second; so a round of one priority carries `num · mtu` bytes, split in proportion to
/// the allocations. Computed exactly here (`allotment · num · mtu / Σ allotment`, at least 1).
/// Input: `(prio, rate)` of each leaf; output: allotment per leaf in the same order.
pub fn wrr_allotments(leaves: &[(u8, Rate)], mtu: u32) -> Vec<u64> {
    let mut sum = [0u128; NUM_PRIO];
    let mut num = [0u128; NUM_PRIO];
    for &(p, r) in leaves {
        let p = (p as usize).min(NUM_PRIO - 1);
        sum[p] += (r.0 / 8) as u128;
        num[p] += 1;
    }
    leaves
        .iter()
        .map(|&(p, r)| {
            let p = (p as usize).min(NUM_PRIO - 1);
            if sum[p] == 0 {
                return mtu as u64;
            }
            let w = (r.0 / 8) as u128 * num[p] * mtu as u128 / sum[p];
            w.clamp(1, u64::MAX as u128 / 4) as u64
        })
        .collect()
}

impl<P: Packet> Cbq<P> {
    /// Build a tree. The classifier's default class is where unmatched packets go.
    pub fn new(
        params: CbqParams,
        specs: Vec<CbqClassSpec<P>>,
        classifier: Classifier,
    ) -> Result<Self, CbqError> {
        let n = specs.len();
        if n == 0 {
            return Err(CbqError::Empty);
        }
        if params.link.0 == 0 {
            return Err(CbqError::ZeroLink);
        }
        if !(64..=65535).contains(&params.mtu) {
            return Err(CbqError::BadMtu(params.mtu));
        }
        if n >= NIL as usize / 2 {
            return Err(CbqError::TooDeep {
                class: "too many classes".into(),
            });
        }
        let parents: Vec<Option<ClassId>> = specs.iter().map(|s| s.parent).collect();
        let limits = DepthLimits {
            leaf: MAX_DEPTH as u32 - 1,
            inner: MAX_DEPTH as u32 - 1,
        };
        let name = |i: usize| specs[i].name.clone();
        let tree = ClassTree::new(&parents, limits).map_err(|e| CbqError::from_tree(e, name))?;
        let mut child_sum = vec![0u128; n];
        for s in &specs {
            if let Some(p) = s.parent {
                child_sum[p as usize] += s.rate.0 as u128;
            }
            if s.prio as usize >= NUM_PRIO {
                return Err(CbqError::BadPrio {
                    class: s.name.clone(),
                    prio: s.prio,
                });
            }
            if s.rate.0 == 0 {
                return Err(CbqError::ZeroRate {
                    class: s.name.clone(),
                });
            }
            if s.rate > params.link {
                return Err(CbqError::AboveLink {
                    class: s.name.clone(),
                    rate: s.rate,
                    link: params.link,
                });
            }
            if s.avgpkt == 0 || s.avgpkt > params.mtu {
                return Err(CbqError::BadAvgpkt {
                    class: s.name.clone(),
                    avgpkt: s.avgpkt,
                    mtu: params.mtu,
                });
            }
            if s.maxburst > MAX_BURST {
                return Err(CbqError::BadMaxburst {
                    class: s.name.clone(),
                    maxburst: s.maxburst,
                });
            }
            if s.minburst == 0 {
                return Err(CbqError::BadMinburst {
                    class: s.name.clone(),
                });
            }
        }
        for (i, s) in specs.iter().enumerate() {
            if child_sum[i] > s.rate.0 as u128 {
                return Err(CbqError::ChildrenAboveParent {
                    class: s.name.clone(),
                    sum: Rate(child_sum[i].min(u64::MAX as u128) as u64),
                    rate: s.rate,
                });
            }
        }
        let default = tree
            .check_classifier(&classifier)
            .map_err(|e| CbqError::from_tree(e, name))?;
        let height = tree.heights();
        let leaves: Vec<(u8, Rate)> = specs
            .iter()
            .enumerate()
            .filter(|(i, _)| !tree.is_inner(*i))
            .map(|(_, s)| (s.prio, s.rate))
            .collect();
        let mut allots = wrr_allotments(&leaves, params.mtu).into_iter();
        let mut classes = Vec::with_capacity(n);
        for (i, s) in specs.into_iter().enumerate() {
            let d = derive(
                params.link.0,
                s.rate.0,
                s.avgpkt,
                params.mtu,
                s.maxburst,
                s.minburst,
            );
            let est = Estimator::new(
                &d,
                s.maxidle.map(|x| x.0),
                s.minidle.map(|x| x.0),
                s.offtime.map(|x| x.0),
            );
            let leaf = if tree.is_inner(i) {
                Leaf::Inner
            } else {
                match s.leaf {
                    LeafSpec::Fifo(l) => Leaf::Fifo(FifoQueue::new(l)),
                    LeafSpec::Qdisc(b) => Leaf::Boxed(b),
                }
            };
            let allot = if tree.is_inner(i) {
                0
            } else {
                allots.next().unwrap_or(params.mtu as u64) as i64
            };
            classes.push(Class {
                name: s.name,
                parent: s.parent.unwrap_or(NIL),
                rate: s.rate.0,
                prio: s.prio,
                borrow: s.borrow,
                height: height[i],
                avgpkt: s.avgpkt,
                extradelay: s.extradelay.0,
                derived: d,
                est,
                undertime: None,
                leaf,
                in_ring: false,
                blocked: false,
                fblocked: None,
                fgen: 0,
                fkey: 0,
                asleep: false,
                sleep_u: 0,
                sleep_t: 0,
                alloc: 0,
                allot,
                active: 0,
                sent: Counter::default(),
                drops: 0,
                overlimits: 0,
                borrows: 0,
                lends: 0,
                delays: 0,
                marks_seen: 0,
            });
        }
        let max_height = height.iter().copied().max().unwrap_or(0) as u32;
        // ALTQ's `maxiftime`; without the clamp `ifnow` follows the link exactly.
        let maxiftime = if params.clamp_ifnow {
            16 * tx_ns(params.mtu as u64, params.link.0)
        } else {
            u64::MAX / 4
        };
        Ok(Cbq {
            params,
            classes,
            order: tree.into_order(),
            rings: Default::default(),
            blocked: Default::default(),
            fblocked: (0..MAX_DEPTH * NUM_PRIO).map(|_| VecDeque::new()).collect(),
            fblock_u: BTreeSet::new(),
            sleep_u: BTreeSet::new(),
            sleep_t: BTreeSet::new(),
            sleep_borrowers: Default::default(),
            eff_cursor: [0; NUM_PRIO],
            unsat: (0..MAX_DEPTH).map(|_| BTreeSet::new()).collect(),
            ifnow: 0,
            maxiftime,
            cutoff: NO_CUTOFF,
            max_height,
            classifier,
            default,
            books: Books::new(),
        })
    }

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

    /// Packets and bytes queued in a leaf class (zero for inner classes).
    pub fn leaf_backlog(&self, c: ClassId) -> Backlog {
        match self.classes.get(c as usize).map(|c| &c.leaf) {
            Some(Leaf::Fifo(q)) => Backlog {
                packets: q.len() as u64,
                bytes: q.bytes(),
            },
            Some(Leaf::Boxed(b)) => b.backlog(),
            _ => Backlog::default(),
        }
    }

    fn is_under(&self, c: u32, now: u64) -> bool {
        self.classes[c as usize].undertime.is_none_or(|u| u <= now)
    }

    /// Change a class's `undertime`, keeping the unsatisfied sets in step.
    fn set_undertime(&mut self, c: u32, ut: Option<u64>) {
        let cl = &self.classes[c as usize];
        if cl.undertime == ut {
            return;
        }
        if cl.active > 0 {
            let h = cl.height as usize;
            let old = cl.undertime.unwrap_or(0);
            self.unsat[h].remove(&(old, c));
            self.unsat[h].insert((ut.unwrap_or(0), c));
        }

        self.classes[c as usize].undertime = ut;
    }

    /// A leaf got its first packet: count it up the tree and put it in its ring.
    fn activate(&mut self, c: u32) {
        let mut x = c;
        while x != NIL {
            let cl = &mut self.classes[x as usize];
            cl.active += 1;
            if cl.active == 1 {
                let k = cl.undertime.unwrap_or(0);
                let h = cl.height as usize;
                self.unsat[h].insert((k, x));
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
    fn deactivate(&mut self, c: u32) {
        let mut x = c;
        while x != NIL {
            let cl = &mut self.classes[x as usize];
            cl.active = cl.active.saturating_sub(1);
            if cl.active == 0 {
                let k = cl.undertime.unwrap_or(0);
                let h = cl.height as usize;
                self.unsat[h].remove(&(k, x));
            }
            x = self.classes[x as usize].parent;
        }
    }

    fn unsleep(&mut self, c: u32) {
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
    fn wake(&mut self, c: u32) {
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
    fn set_cutoff(&mut self, v: u32) {
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
    fn block_front(&mut self, p: usize) {
        if let Some(c) = self.rings[p].pop_front() {
            let cl = &mut self.classes[c as usize];
            cl.in_ring = false;
            cl.blocked = true;
            self.blocked[p].push(c);
        }
    }

    /// Park the leaf at the front of ring `p`, refused by the formal rule for a lender at
    /// `level`.
    fn fblock_front(&mut self, p: usize, level: u8, until: u64) {
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
    fn funblock(&mut self, c: u32, to_ring: bool) {
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
    fn readmit_formal(&mut self, now: u64) -> usize {
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

    fn unblock(&mut self, c: u32) {
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

    fn leave_ring(&mut self, c: u32) {
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

    /// Enqueue into a given leaf class, bypassing the classifier. An unknown or inner class id
    /// falls back to the default class. O(d log n).
    pub fn enqueue_to(&mut self, class: ClassId, pkt: P, now: Time) -> Result<(), Dropped<P>> {
        let len = pkt.len();
        self.books.offer(len);
        let r = self.enqueue_to_inner(class, pkt, now);
        self.books.settle(len, &r);
        r
    }

    /// [`Self::enqueue_to`] without the qdisc-wide counters (its caller keeps them).
    fn enqueue_to_inner(&mut self, class: ClassId, pkt: P, now: Time) -> Result<(), Dropped<P>> {
        let c = match self.classes.get(class as usize) {
            Some(cl) if !matches!(cl.leaf, Leaf::Inner) => class,
            _ => self.default,
        };
        let was_empty = self.leaf_backlog(c).packets == 0;
        let res = match &mut self.classes[c as usize].leaf {
            Leaf::Fifo(q) => q.push(pkt),
            Leaf::Boxed(b) => b.enqueue(pkt, now),
            Leaf::Inner => Err(Dropped {
                packet: pkt,
                reason: DropReason::QueueLimit,
            }),
        };
        if res.is_err() {
            self.classes[c as usize].drops += 1;
        }
        let out = res;
        self.collect_victims(c);
        if was_empty && self.leaf_backlog(c).packets > 0 {
            self.activate(c);
        }
        if self.params.guideline == Guideline::TopLevel {
            self.cutoff_on_arrival(c, now.0);
        }
        out
    }

    /// ALTQ's rules 1 and 2 (seed 001 §2.1), run when a packet arrives for leaf `c`.
    fn cutoff_on_arrival(&mut self, c: u32, now: u64) {
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

    /// Packets a boxed leaf dropped after accepting them.
    fn collect_victims(&mut self, c: u32) {
        let cl = &mut self.classes[c as usize];
        if let Leaf::Boxed(b) = &mut cl.leaf {
            while let Some(d) = b.take_dropped() {
                cl.drops += 1;
                self.books.drop_victim(d);
            }
            let marked = b.stats().marked;
            self.books.mark(marked.saturating_sub(cl.marks_seen));
            cl.marks_seen = marked;
        }
    }

    /// Is any class at a level below `level` unsatisfied (underlimit with a backlogged
    /// descendant)? O(level).
    fn unsatisfied_below(&self, level: u8, now: u64) -> bool {
        self.unsat[..level as usize]
            .iter()
            .any(|s| s.first().is_some_and(|&(k, _)| k <= now))
    }

    /// May leaf `c` send now? O(d + levels).
    fn permission(&self, c: u32, now: u64) -> Perm {
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
    fn delay_action(&mut self, c: u32, top: Option<u32>, now: u64) {
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

    /// Take a packet from leaf `c`'s queue: `Err(t)` when a boxed leaf is throttled.
    fn pop_leaf(&mut self, c: u32, now: Time) -> Result<P, Option<u64>> {
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
        r
    }

    /// Charge a packet of `len` bytes sent by leaf `c` (borrowing from `lender`): the link model,
    /// then the estimator of `c` and each ancestor (ALTQ's `rmc_update_class_util`). O(d log n).
    fn charge(&mut self, c: u32, len: u32, lender: Option<u32>, now: u64) {
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
    fn tl_satisfied(&mut self, now: u64) {
        let unsat_leaf = self.unsat[0].first().is_some_and(|&(k, _)| k <= now);
        self.set_cutoff(if unsat_leaf { 0 } else { NO_CUTOFF });
    }

    /// Send from `c`: pop, count, charge, and fix its ring / sleep membership.
    fn send(&mut self, c: u32, lender: Option<u32>, now: Time) -> Result<P, Option<u64>> {
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
    fn serve_prio(
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
    fn efficient_candidate(&mut self, first: Option<u32>) -> Option<u32> {
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
        for (i, cl) in self.classes.iter().enumerate() {
            if active[i] != cl.active {
                return Err(format!(
                    "{}: active {} != {}",
                    cl.name, cl.active, active[i]
                ));
            }
            let key = (cl.undertime.unwrap_or(0), i as u32);
            let filed = self.unsat[cl.height as usize].contains(&key);
            if filed != (cl.active > 0) {
                return Err(format!("{}: unsatisfied set filing {filed}", cl.name));
            }
            unsat_len += usize::from(filed);
        }
        if unsat_len != self.unsat.iter().map(|s| s.len()).sum::<usize>() {
            return Err("stale entries in unsatisfied sets".into());
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

    fn visit_classes_inner(&self, f: &mut dyn FnMut(&ClassView<'_>)) {
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
                    leaf_drops = s.refused;
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
            });
        }
    }

    fn extra_stats_inner(&self, f: &mut dyn FnMut(&'static str, f64)) {
        f("cutoff", self.cutoff as f64);
        f("sleeping_classes", self.sleep_u.len() as f64);
        f(
            "delays",
            self.classes.iter().map(|c| c.delays).sum::<u64>() as f64,
        );
    }
}

#[cfg(test)]
mod tests;
