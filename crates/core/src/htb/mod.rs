//! Hierarchical Token Bucket.
//!
//! ## What it promises
//! Every class has a guaranteed `rate` and a `ceil`ing. A backlogged class always gets at least its
//! rate (if the rates of its ancestors cover their children, which `check` verifies); spare
//! bandwidth is lent by ancestors to descendants that are over their rate but under their ceil,
//! first to the highest priority (lowest `prio`), and among classes of equal priority in proportion
//! to their `quantum` (deficit round robin). No class ever exceeds its ceil by more than `cburst`.
//! This is the semantics of Linux HTB (Devera, "HTB Linux queuing discipline manual — user guide"
//! and "Hierarchical token bucket theory", 2002), with its accounting made exact.
//!
//! ## State
//! Each class has two token buckets: `tokens` (filled at `rate`, capped at `burst`) and `ctokens`
//! (filled at `ceil`, capped at `cburst`). From them follows its mode ([`ClassMode`]), changed by
//! exactly one function ([`Htb::change_mode`]):
//! * `CanSend` — tokens ≥ 0: sends on its own rate;
//! * `MayBorrow` — tokens < 0 ≤ ctokens: sends only if an ancestor lends;
//! * `CantSend` — ctokens < 0: waits.
//!
//! As in Linux, classes take part in the scheduling through lists:
//! * the **rows** `row[level][prio]`: classes in `CanSend` mode with something to send at that prio
//!   (a leaf: packets; an inner class: descendants that want to borrow from it);
//! * the **feeds** `feed[prio]` of each inner class: children in `MayBorrow` mode that want to
//!   borrow from it.
//!
//! A class in `CantSend`/`MayBorrow` mode also sits in the **wait queue** of its level, keyed by
//! the instant its mode will change. Levels are numbered as in Linux: leaves are level 0, a root
//! class is level `MAX_DEPTH − 1` and each child one below its parent.
//!
//! `dequeue(now)` walks the levels from 0 upwards. At each level it first applies the mode changes
//! that are due, then serves the highest priority non-empty row: from the row's current class it
//! descends through the feed lists to a leaf, takes one packet, and charges it. Level 0 first means
//! guaranteed traffic goes before borrowed traffic, and borrowing from the nearest ancestor before
//! borrowing from a farther one. The charge walks from the leaf to the root: classes below the
//! lender's level only have their `ctokens` charged (they `borrowed`), the lender and the classes
//! above it have both buckets charged (the lender counts a `lend`).
//!
//! Round robin inside a list uses a cursor. The leaf at the cursor keeps sending until its deficit
//! goes negative, then gets `quantum` more and the cursor moves on; when a feed's cursor runs off
//! the end of its list it wraps and the cursor of the list above moves on, so subtrees that borrow
//! from the same ancestor take turns.
//!
//! ## Exact accounting (what we fix)
//! Linux keeps tokens in scheduler ticks computed through rate tables or a multiply-shift
//! approximation of `len / rate`; seed 002 measured the result as a 2–20 % rate error that depends
//! on packet size and burst. Here tokens are integers in **nano-bits**: a class gains `rate`
//! (bit/s) nano-bits per nanosecond, and a packet of `len` bytes costs exactly `len × 8 × 10⁹`.
//! There is no rounding anywhere in the accounting, so over a long run a class sends exactly its
//! rate, provided its bucket never overflows while it waits to be woken — which the default burst
//! guarantees for any driver tick of 1 ms or finer (see [`default_burst`]).
//!
//! **64 bits suffice, exactly.** Let `B = 2⁶³/4` (`TOKEN_BOUND`). Bucket sizes are at most
//! `BURST_LIMIT × 8·10⁹ ≈ 2.15·10¹⁸ < B`, and every stored level is clamped to `[−B, B]` (the debt
//! floor is `min(60 s × rate, B)`). The three operations are then exact in `i64`/`u64`:
//! * refill `min(v + idle·rate, cap)` with `|v| ≤ B`, `0 ≤ cap ≤ B`: if `v ≥ cap` it is `cap`;
//!   otherwise it equals `v + min(idle·rate, cap − v)` where `0 < cap − v ≤ 2B < 2⁶³`, and
//!   `idle·rate` is computed saturating in `u64` — a saturated product exceeds any headroom, so
//!   the minimum is the true one (`refill`);
//! * charge `clamp(t − len·8·10⁹, −floor, B)`: `len·8·10⁹` saturating in `i64`; if it saturates
//!   or `t − cost` does, the true value is below `B − (2⁶³−1) < −B ≤ −floor` and the clamp gives
//!   `−floor` both ways, otherwise nothing saturated (`clamp_debt`);
//! * wake-up instants `⌈debt / rate⌉` with `0 < debt ≤ B` in `u64` (`ceil_div`).
//!
//! So the 64-bit arithmetic gives bit for bit what unbounded integers give (the former `i128`
//! code), at a fraction of the cost (`htb_props` checks rates and conservation).
//!
//! ## Complexity, in classes and in flows
//! With `n` classes, depth `d ≤ 8`, 8 priorities, `a` active (backlogged) leaves and `w` throttled
//! classes (not `CanSend`):
//! * enqueue: O(1) into the leaf's FIFO, plus O(d) list operations when the leaf becomes active;
//! * dequeue: one bit scan for the level and prio, O(d) for the descent through the feeds, O(d)
//!   for the charge (64-bit arithmetic, no division unless a class is throttled), O(log w) per
//!   class whose mode changes (its wait-queue entry, a `BTreeSet` per level), and O(log w) per
//!   due mode change applied (amortised: each is caused by an earlier charge; at most
//!   [`MAX_EVENTS_PER_LEVEL`] per level per call, the rest on the next call, as Linux does).
//!
//! Idle classes sit in no list, row or wait queue: nothing per packet depends on them, nor on `n`
//! or `a` (round robin moves a cursor). Flows are not a dimension of HTB itself: a leaf's queue is
//! a FIFO or a boxed qdisc (SFQ, FQ-CoDel), whose own complexity applies per leaf. What does grow
//! with `n` is the memory touched at random: with a million classes each packet's leaf, parent
//! and queue slot are cache (and TLB) misses. [`Htb::enqueue_burst_to`] prefetches a whole burst's
//! records before touching them, and dequeue prefetches the next leaf of the list being served,
//! so those misses overlap instead of adding up (`linkshare bench sched`, BENCHMARKS.md).
//!
//! ## Memory per class
//! * 128 bytes of class record (two cache lines: the charge's, then queue, DRR and counters);
//! * 8 bytes of list link per leaf; an inner class has 8 links and 8 lists (one per prio):
//!   196 bytes more;
//! * the name's bytes in one shared arena, 4 bytes of name index, 4 bytes of tree order;
//! * per queued packet, one slot of the shared pool (`size_of::<P>()` + 4 bytes, rounded).
//!
//! A librte_sched-shaped tree of 1,048,576 leaves (1,114,114 classes, 16 leaves per inner class)
//! is ≈ 163 bytes per class; measured resident with the build's transient allocations, 180.

//! ## Differences from Linux, on purpose
//! * no direct queue: unclassified packets go to the default class, which must exist;
//! * packets bigger than the burst are sent (the bucket goes into debt) and counted as `giants`.

mod spec;
pub use crate::qdisc::adopt::AdoptReport;
pub use spec::*;

use std::collections::BTreeSet;

use crate::classify::{ClassId, Classifier};
use crate::leaf::LeafSpec;
use crate::packet::Packet;
use crate::qdisc::fifo::FifoLimit;
use crate::qdisc::{
    Backlog, Books, ClassMode, ClassStats, ClassView, Counter, Dequeued, Discipline, DropCounts,
    DropReason, Dropped, Qdisc,
};
use crate::tree::{ClassTree, DepthLimits};
use crate::units::{Rate, Time, NS_PER_SEC};

const NIL: u32 = u32::MAX;
/// Nano-bits per byte.
const NBITS_PER_BYTE: i64 = 8 * NS_PER_SEC as i64;
/// Bound on every bucket level and bucket size, in nano-bits (see "Exact accounting").
const TOKEN_BOUND: i64 = i64::MAX / 4;
/// Longest idle time credited at once (Linux's `mbuffer`): 60 s.
const MAX_IDLE_NS: u64 = 60 * NS_PER_SEC;
/// Mode changes applied per level per dequeue call.
pub const MAX_EVENTS_PER_LEVEL: usize = 64;

/// A doubly linked list over node ids, with a round-robin cursor. `cursor == NIL` means the
/// cursor ran off the end and wraps at the next lookup.
#[derive(Copy, Clone, Debug)]
struct List {
    head: u32,
    tail: u32,
    cursor: u32,
    /// The node that was at the cursor when it left the list (a class flipping between
    /// `CanSend` and `MayBorrow`); if it comes back before the cursor moves on, the cursor returns
    /// to it, so churn does not cost a class its turn (Linux keeps `last_ptr_id` for this).
    parked: u32,
}

impl List {
    const EMPTY: List = List {
        head: NIL,
        tail: NIL,
        cursor: NIL,
        parked: NIL,
    };
}

#[derive(Copy, Clone, Debug)]
struct Link {
    prev: u32,
    next: u32,
}

/// What queue a class has.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum LeafKind {
    /// An inner class: no queue.
    None,
    /// Inline FIFO limited in packets, in the shared packet pool.
    Pfifo,
    /// Inline FIFO limited in bytes.
    Bfifo,
    /// A boxed qdisc in `Htb::boxed`.
    Boxed,
}

/// The queue of a leaf: an inline FIFO threaded through the shared packet pool (no allocation
/// per class), or (kind `Boxed`) the index of a boxed qdisc in `head`.
///
/// The kind of queue is kept in the top two bits of `limit_kind` (limits are below 2³⁰).
#[derive(Copy, Clone, Debug)]
struct LeafQ {
    head: u32,
    tail: u32,
    len: u32,
    bytes: u32,
    limit_kind: u32,
}

const LIMIT_MASK: u32 = (1 << 30) - 1;

impl LeafQ {
    fn new(kind: LeafKind, limit: u32) -> LeafQ {
        let tag = match kind {
            LeafKind::None => 0,
            LeafKind::Pfifo => 1,
            LeafKind::Bfifo => 2,
            LeafKind::Boxed => 3,
        };
        LeafQ {
            head: NIL,
            tail: NIL,
            len: 0,
            bytes: 0,
            limit_kind: (tag << 30) | limit.min(LIMIT_MASK),
        }
    }
    fn kind(&self) -> LeafKind {
        match self.limit_kind >> 30 {
            0 => LeafKind::None,
            1 => LeafKind::Pfifo,
            2 => LeafKind::Bfifo,
            _ => LeafKind::Boxed,
        }
    }
    fn limit(&self) -> u32 {
        self.limit_kind & LIMIT_MASK
    }
}

/// Per-class state: 128 bytes, two cache lines, laid out by hand (`repr(C)`). The first line
/// holds everything the charge and the mode need (buckets, rates, parent, level, mode); the
/// second the queue, the DRR state and the counters. Tokens are in nano-bits (see the module
/// docs); bucket sizes are `burst × 8 × 10⁹`.
#[repr(C, align(64))]
struct Class {
    // ---- line 0: charge and mode ----
    rate: u64,
    ceil: u64,
    tokens: i64,
    ctokens: i64,
    /// Time of the last charge (tokens are as of `t_c`).
    t_c: u64,
    parent: u32,
    burst: u32,
    cburst: u32,
    /// Index into `inner` for inner classes, NIL for leaves.
    inner: u32,
    quantum: u32,
    level: u8,
    prio: u8,
    mode: ClassMode,
    /// Prios this class is active at (a leaf: its prio if backlogged; an inner class: prios of
    /// its non-empty feeds).
    active: u8,
    // ---- line 1: queue, DRR, counters ----
    sent_bytes: u64,
    sent_packets: u64,
    /// DRR deficits: `[0]` when sending on its own rate (level 0), `[1]` when borrowing. Linux
    /// keeps one per level; two suffice because a leaf competes with one set of classes when it
    /// is under its rate and another when it borrows, and keeping them apart stops the traffic a
    /// class sends on its own rate from eating its share of what it borrows.
    deficit: [i32; 2],
    q: LeafQ,
    /// 32-bit, wrapping, like Linux's `tc_stats` and `tc_htb_xstats`.
    drops: u32,
    overlimits: u32,
    lends: u32,
    borrows: u32,
    giants: u32,
}

/// Ask the CPU to bring `x`'s cache line in (no effect on results; no fault on any address).
#[inline(always)]
fn prefetch<T>(x: &T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is a hint; it never faults and reads nothing observable. SSE is part of
    // the x86_64 baseline.
    #[allow(unused_unsafe)]
    unsafe {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        _mm_prefetch::<_MM_HINT_T0>((x as *const T).cast::<i8>());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = x;
}

impl Class {
    /// Bring both lines of the record in.
    #[inline(always)]
    fn prefetch(&self) {
        prefetch(&self.tokens);
        prefetch(&self.sent_bytes);
    }

    /// `burst` in nano-bits: below `TOKEN_BOUND` because `burst ≤ BURST_LIMIT` (checked by `new`).
    #[inline]
    fn buffer(&self) -> i64 {
        self.burst as i64 * NBITS_PER_BYTE
    }
    #[inline]
    fn cbuffer(&self) -> i64 {
        self.cburst as i64 * NBITS_PER_BYTE
    }
    fn is_leaf(&self) -> bool {
        self.q.kind() != LeafKind::None
    }
}

/// A slot of the shared packet pool: a packet and the next slot of its leaf's FIFO (or of the
/// free list).
struct Slot<P> {
    pkt: Option<P>,
    next: u32,
}

/// Per inner class: the feeds, one per prio.
struct Inner {
    class: u32,
}

/// The HTB qdisc. See the module documentation.
pub struct Htb<P: Packet> {
    classes: Vec<Class>,
    /// All class names, concatenated; class `i` is `names[name_end[i-1]..name_end[i]]`.
    names: String,
    name_end: Vec<u32>,
    pool: Vec<Slot<P>>,
    free: u32,
    boxed: Vec<Box<dyn Qdisc<P>>>,
    /// Per boxed leaf: its `marked` count already added to ours (marks add up like drops).
    marks_seen: Vec<u64>,
    /// Visiting order: parents before children.
    order: Vec<u32>,
    inner: Vec<Inner>,
    /// All lists: rows first (`level * NUM_PRIO + prio`), then feeds (`ROWS + inner * NUM_PRIO + prio`).
    lists: Vec<List>,
    /// All list nodes: one per leaf (id = class id), then `NUM_PRIO` per inner class.
    links: Vec<Link>,
    /// Bit `p` of `row_mask[level]` set iff `row[level][p]` is non-empty.
    row_mask: [u8; MAX_DEPTH],
    wait: Vec<BTreeSet<(u64, u32)>>,
    /// Leaves whose own qdisc is throttled (non-work-conserving leaves such as TBF).
    leaf_wait: BTreeSet<(u64, u32)>,
    classifier: Classifier,
    default: u32,
    params: HtbParams,
    books: Books<P>,
}

const ROWS: usize = MAX_DEPTH * NUM_PRIO;

impl<P: Packet> Htb<P> {
    /// Build a tree. The classifier's default class is where unmatched packets go.
    pub fn new(
        params: HtbParams,
        specs: Vec<HtbClassSpec<P>>,
        classifier: Classifier,
    ) -> Result<Self, HtbError> {
        let n = specs.len();
        if n == 0 {
            return Err(HtbError::Empty);
        }
        if n >= NIL as usize / (NUM_PRIO + 1) {
            return Err(HtbError::TooDeep {
                class: "too many classes".into(),
            });
        }
        for s in &specs {
            s.validate()?;
        }
        let parents: Vec<Option<ClassId>> = specs.iter().map(|s| s.parent).collect();
        let limits = DepthLimits {
            leaf: MAX_DEPTH as u32 - 1,
            // An inner class needs a level of at least 1.
            inner: MAX_DEPTH as u32 - 2,
        };
        let name = |i: usize| specs[i].name.clone();
        let tree = ClassTree::new(&parents, limits).map_err(|e| HtbError::from_tree(e, name))?;
        let default = tree
            .check_classifier(&classifier)
            .map_err(|e| HtbError::from_tree(e, name))?;

        let mut inner = Vec::new();
        let mut classes = Vec::with_capacity(n);
        let mut names = String::new();
        let mut name_end = Vec::with_capacity(n);
        let mut boxed: Vec<Box<dyn Qdisc<P>>> = Vec::new();
        for (i, s) in specs.into_iter().enumerate() {
            let is_inner = tree.is_inner(i);
            let level = if is_inner {
                (MAX_DEPTH - 1) as u32 - tree.depth(i)
            } else {
                0
            } as u8;
            let inner_idx = if is_inner {
                inner.push(Inner { class: i as u32 });
                (inner.len() - 1) as u32
            } else {
                NIL
            };
            let q = if is_inner {
                LeafQ::new(LeafKind::None, 0)
            } else {
                match s.leaf {
                    LeafSpec::Fifo(FifoLimit::Packets(l)) => LeafQ::new(LeafKind::Pfifo, l),
                    LeafSpec::Fifo(FifoLimit::Bytes(l)) => LeafQ::new(LeafKind::Bfifo, l),
                    LeafSpec::Qdisc(b) => {
                        let mut q = LeafQ::new(LeafKind::Boxed, 0);
                        q.head = boxed.len() as u32;
                        boxed.push(b);
                        q
                    }
                }
            };
            names.push_str(&s.name);
            name_end.push(names.len() as u32);
            classes.push(Class {
                rate: s.rate.0,
                ceil: s.ceil.0,
                tokens: nbits(s.burst as u64),
                ctokens: nbits(s.cburst as u64),
                t_c: 0,
                parent: s.parent.unwrap_or(NIL),
                inner: inner_idx,
                quantum: s.quantum,
                deficit: [0; 2],
                burst: s.burst,
                cburst: s.cburst,
                sent_bytes: 0,
                sent_packets: 0,
                drops: 0,
                overlimits: 0,
                lends: 0,
                borrows: 0,
                giants: 0,
                q,
                level,
                prio: s.prio,
                mode: ClassMode::CanSend,
                active: 0,
            });
        }
        let tree_order = tree.into_order();
        let n_inner = inner.len();
        names.shrink_to_fit();
        Ok(Htb {
            classes,
            names,
            name_end,
            pool: Vec::new(),
            free: NIL,
            marks_seen: vec![0; boxed.len()],
            boxed,
            order: tree_order,
            inner,
            lists: vec![List::EMPTY; ROWS + n_inner * NUM_PRIO],
            links: vec![
                Link {
                    prev: NIL,
                    next: NIL
                };
                n + n_inner * NUM_PRIO
            ],
            row_mask: [0; MAX_DEPTH],
            wait: (0..MAX_DEPTH).map(|_| BTreeSet::new()).collect(),
            leaf_wait: BTreeSet::new(),
            classifier,
            default,
            params,
            books: Books::new(),
        })
    }

    /// Index of the class with this name.
    pub fn class_id(&self, name: &str) -> Option<ClassId> {
        (0..self.classes.len() as u32).find(|&c| self.name(c) == name)
    }

    /// Name of a class.
    pub fn class_name(&self, id: ClassId) -> Option<&str> {
        ((id as usize) < self.classes.len()).then(|| self.name(id))
    }

    fn name(&self, c: u32) -> &str {
        let end = self.name_end[c as usize] as usize;
        let start = if c == 0 {
            0
        } else {
            self.name_end[c as usize - 1] as usize
        };
        self.names.get(start..end).unwrap_or("")
    }

    /// Bytes this scheduler holds on the heap for its classes, lists, names and packet pool
    /// (boxed leaf qdiscs and queued packets' own heap data not included).
    pub fn memory_bytes(&self) -> usize {
        use std::mem::size_of;
        self.classes.capacity() * size_of::<Class>()
            + self.names.capacity()
            + self.name_end.capacity() * 4
            + self.pool.capacity() * size_of::<Slot<P>>()
            + self.boxed.capacity() * size_of::<Box<dyn Qdisc<P>>>()
            + self.marks_seen.capacity() * 8
            + self.order.capacity() * 4
            + self.inner.capacity() * size_of::<Inner>()
            + self.lists.capacity() * size_of::<List>()
            + self.links.capacity() * size_of::<Link>()
    }

    /// Number of classes.
    pub fn len(&self) -> usize {
        self.classes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.classes.is_empty()
    }

    pub fn params(&self) -> &HtbParams {
        &self.params
    }

    pub fn classifier(&self) -> &Classifier {
        &self.classifier
    }

    /// The counters of one class.
    pub fn class_stats(&self, id: ClassId) -> Option<ClassStats> {
        self.classes.get(id as usize).map(|c| ClassStats {
            sent: Counter {
                packets: c.sent_packets,
                bytes: c.sent_bytes,
            },
            drops: c.drops as u64,
            overlimits: c.overlimits as u64,
            lends: c.lends as u64,
            borrows: c.borrows as u64,
            giants: c.giants as u64,
            marked: self.leaf_marked(c),
        })
    }

    /// ECN marks of a class's leaf qdisc (inline FIFOs never mark).
    fn leaf_marked(&self, cl: &Class) -> u64 {
        match cl.q.kind() {
            LeafKind::Boxed => self.boxed[cl.q.head as usize].stats().marked,
            _ => 0,
        }
    }

    /// Current mode of a class (as of its last charge or mode change).
    pub fn class_mode(&self, id: ClassId) -> Option<ClassMode> {
        self.classes.get(id as usize).map(|c| c.mode)
    }

    /// Enqueue into a given leaf class, bypassing the classifier. An unknown or inner class id
    /// falls back to the default class.
    #[inline]
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
            Some(cl) if cl.is_leaf() => class,
            _ => self.default,
        };
        let len = pkt.len();
        let cl = &mut self.classes[c as usize];
        if len > cl.burst {
            cl.giants = cl.giants.wrapping_add(1);
        }
        let was_empty = self.leaf_backlog(c).packets == 0;
        let res = if self.classes[c as usize].q.kind() == LeafKind::Boxed {
            let b = self.classes[c as usize].q.head as usize;
            self.boxed[b].enqueue(pkt, now)
        } else {
            self.fifo_push(c, pkt)
        };
        match res {
            Ok(()) => {
                if was_empty {
                    self.activate_leaf(c);
                }
                self.collect_victims(c);
                Ok(())
            }
            Err(d) => {
                let cl = &mut self.classes[c as usize];
                cl.drops = cl.drops.wrapping_add(1);
                self.collect_victims(c);
                Err(d)
            }
        }
    }

    /// Enqueue a burst: packet `i` of `pkts` into leaf `classes[i]` (as [`Self::enqueue_to`]),
    /// leaving `pkts` empty; refused packets go to `refused`. Returns how many were accepted.
    ///
    /// Before enqueuing anything it prefetches the class record of every leaf, then the record of
    /// each leaf's parent, its list link and its queue's tail slot, so a burst of
    /// `k` packets into cold classes waits for about one round of cache misses instead of `k`
    /// (and the dequeue and charge that follow find those records in cache). This is what DPDK's
    /// `rte_sched_port_enqueue` does with prefetches.
    pub fn enqueue_burst_to(
        &mut self,
        classes: &[ClassId],
        pkts: &mut Vec<P>,
        now: Time,
        refused: &mut Vec<Dropped<P>>,
    ) -> usize {
        for &c in classes {
            if let Some(cl) = self.classes.get(c as usize) {
                cl.prefetch();
            }
        }
        for &c in classes {
            if let Some(cl) = self.classes.get(c as usize) {
                if let Some(p) = self.classes.get(cl.parent as usize) {
                    p.prefetch();
                }
                if let Some(l) = self.links.get(c as usize) {
                    prefetch(l);
                }
                if let Some(slot) = self.pool.get(cl.q.tail as usize) {
                    prefetch(slot);
                }
            }
        }
        let mut ok = 0;
        for (i, p) in pkts.drain(..).enumerate() {
            let c = classes.get(i).copied().unwrap_or(self.default);
            match self.enqueue_to(c, p, now) {
                Ok(()) => ok += 1,
                Err(d) => refused.push(d),
            }
        }
        ok
    }

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
    /// O(n + q) for `n` classes and `q` queued packets; meant for the control path.
    pub fn adopt(&mut self, old: &mut Htb<P>, now: Time) -> AdoptReport {
        let mut report = AdoptReport::default();
        let old_to_new: Vec<Option<u32>> = (0..old.classes.len() as u32)
            .map(|c| self.class_id(old.name(c)))
            .collect();
        // Empty the old leaves first: an AQM leaf may drop while being drained, and those drops
        // must be in `old`'s counters before they become ours.
        let mut drained: Vec<(usize, Vec<P>)> = Vec::new();
        for c in 0..old.classes.len() {
            if old.classes[c].is_leaf() {
                drained.push((c, old.drain_leaf(c as u32, now)));
            }
        }
        for (c, n) in old_to_new.iter().enumerate() {
            let Some(n) = *n else {
                report.removed.push(old.name(c as u32).to_string());
                continue;
            };
            report.kept.push(old.name(c as u32).to_string());
            let o = &old.classes[c];
            let idle = now.0.saturating_sub(o.t_c).min(MAX_IDLE_NS);
            let (tokens, rate, ctokens, ceil) = (o.tokens, o.rate, o.ctokens, o.ceil);
            let (sent_bytes, sent_packets) = (o.sent_bytes, o.sent_packets);
            let (drops, overlimits, lends, borrows, giants) =
                (o.drops, o.overlimits, o.lends, o.borrows, o.giants);
            let old_key = self.wait_key(n);
            let cl = &mut self.classes[n as usize];
            cl.tokens = clamp_debt(refill(tokens, idle, rate, cl.buffer()), cl.rate);
            cl.ctokens = clamp_debt(refill(ctokens, idle, ceil, cl.cbuffer()), cl.ceil);
            cl.t_c = now.0;
            cl.sent_bytes = sent_bytes;
            cl.sent_packets = sent_packets;
            cl.drops = drops;
            cl.overlimits = overlimits;
            cl.lends = lends;
            cl.borrows = borrows;
            cl.giants = giants;
            let (mode, until) = self.mode_at(n, now.0);
            self.change_mode(n, old_key, mode, until);
            // Taking over a throttled class is not a new overlimit event.
            self.classes[n as usize].overlimits = overlimits;
        }
        for c in 0..self.classes.len() as u32 {
            if old.class_id(self.name(c)).is_none() {
                report.added.push(self.name(c).to_string());
            }
        }
        // Counters continue; the moved packets are already counted as enqueued and as backlog.
        // What `old` dropped and still holds is ours to hand out.
        self.books.take_over(&mut old.books);
        for (c, pkts) in drained {
            let target = old_to_new[c].filter(|&n| self.classes[n as usize].is_leaf());
            let mut moved = Counter::default();
            pkts.iter().for_each(|p| moved.add(p.len()));
            // A leaf qdisc kept by name continues its own counters (drops by reason, marks).
            let (oq, nq) = (old.classes[c].q, target.map(|n| self.classes[n as usize].q));
            if let (LeafKind::Boxed, Some(nq)) = (oq.kind(), nq) {
                if nq.kind() == LeafKind::Boxed {
                    let prior = *old.boxed[oq.head as usize].stats();
                    let leaf = &mut self.boxed[nq.head as usize];
                    leaf.stats_mut().continue_from(&prior, moved);
                    // Its marks are in the qdisc-wide count already (continued from `old`).
                    self.marks_seen[nq.head as usize] = leaf.stats().marked;
                }
            }
            for pkt in pkts {
                let to = match target {
                    Some(n) => n,
                    None => {
                        report.reclassified += 1;
                        let id = self.classifier.classify(pkt.meta());
                        match self.classes.get(id as usize) {
                            Some(cl) if cl.is_leaf() => id,
                            _ => self.default,
                        }
                    }
                };
                self.requeue(to, pkt, now, &mut report);
            }
        }
        report
    }

    /// Put back a packet that was already counted as enqueued (by `adopt`).
    fn requeue(&mut self, c: u32, pkt: P, now: Time, report: &mut AdoptReport) {
        let was_empty = self.leaf_backlog(c).packets == 0;
        let res = if self.classes[c as usize].q.kind() == LeafKind::Boxed {
            let b = self.classes[c as usize].q.head as usize;
            self.boxed[b].enqueue(pkt, now)
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
                let cl = &mut self.classes[c as usize];
                cl.drops = cl.drops.wrapping_add(1);
                self.books.drop_victim(d);
            }
        }
        self.collect_victims(c);
    }

    /// Every packet queued at leaf `c`, in order, leaving the leaf empty and inactive. What a leaf
    /// qdisc drops while draining (CoDel's AQM still runs) is counted and goes to `victims`.
    fn drain_leaf(&mut self, c: u32, now: Time) -> Vec<P> {
        let mut out = Vec::new();
        if self.classes[c as usize].q.kind() == LeafKind::Boxed {
            let b = self.classes[c as usize].q.head as usize;
            out = self.boxed[b].drain(now);
            self.collect_victims(c);
        } else {
            while let Some(p) = self.fifo_pop(c) {
                out.push(p);
            }
        }
        self.deactivate_leaf(c);
        out
    }

    /// Move packets a leaf qdisc dropped after accepting them into our outbox, with counters.
    #[inline]
    fn collect_victims(&mut self, c: u32) {
        if self.classes[c as usize].q.kind() == LeafKind::Boxed {
            self.collect_boxed_victims(c);
        }
    }

    /// [`Self::collect_victims`] for a leaf with a boxed qdisc.
    #[inline(never)]
    fn collect_boxed_victims(&mut self, c: u32) {
        let cl = &mut self.classes[c as usize];
        let q = &mut self.boxed[cl.q.head as usize];
        while let Some(d) = q.take_dropped() {
            cl.drops = cl.drops.wrapping_add(1);
            self.books.drop_victim(d);
        }
        let seen = &mut self.marks_seen[cl.q.head as usize];
        let marked = q.stats().marked;
        self.books.mark(marked.saturating_sub(*seen));
        *seen = marked;
        let empty = q.backlog().packets == 0;
        if empty && cl.active != 0 {
            self.deactivate_leaf(c);
        }
    }

    /// Tail-drop enqueue into a leaf's inline FIFO. O(1).
    fn fifo_push(&mut self, c: u32, pkt: P) -> Result<(), Dropped<P>> {
        let len = pkt.len();
        let cl = &self.classes[c as usize];
        let q = cl.q;
        let full = match cl.q.kind() {
            LeafKind::Bfifo => {
                (q.bytes as u64 + len as u64 > q.limit() as u64).then_some(DropReason::ByteLimit)
            }
            _ => (q.len >= q.limit() || q.bytes as u64 + len as u64 > u32::MAX as u64)
                .then_some(DropReason::QueueLimit),
        };
        if let Some(reason) = full {
            return Err(Dropped {
                packet: pkt,
                reason,
            });
        }
        let slot = if self.free != NIL {
            let s = self.free;
            self.free = self.pool[s as usize].next;
            self.pool[s as usize] = Slot {
                pkt: Some(pkt),
                next: NIL,
            };
            s
        } else {
            self.pool.push(Slot {
                pkt: Some(pkt),
                next: NIL,
            });
            (self.pool.len() - 1) as u32
        };
        let q = &mut self.classes[c as usize].q;
        if q.tail == NIL {
            q.head = slot;
        } else {
            self.pool[q.tail as usize].next = slot;
        }
        q.tail = slot;
        q.len += 1;
        q.bytes += len;
        Ok(())
    }

    /// Dequeue from a leaf's inline FIFO. O(1).
    fn fifo_pop(&mut self, c: u32) -> Option<P> {
        let q = &mut self.classes[c as usize].q;
        if q.head == NIL {
            return None;
        }
        let s = q.head;
        let slot = &mut self.pool[s as usize];
        let pkt = slot.pkt.take()?;
        q.head = slot.next;
        if q.head == NIL {
            q.tail = NIL;
        }
        q.len -= 1;
        q.bytes -= pkt.len();
        slot.next = self.free;
        self.free = s;
        Some(pkt)
    }

    // ---- lists -------------------------------------------------------------------------------

    fn row_id(level: u8, prio: u8) -> usize {
        level as usize * NUM_PRIO + prio as usize
    }

    fn feed_id(inner: u32, prio: u8) -> usize {
        ROWS + inner as usize * NUM_PRIO + prio as usize
    }

    /// The list node of class `c` at `prio`.
    fn node_of(&self, c: u32, prio: u8) -> u32 {
        let cl = &self.classes[c as usize];
        if cl.inner == NIL {
            c
        } else {
            self.classes.len() as u32 + cl.inner * NUM_PRIO as u32 + prio as u32
        }
    }

    fn owner_of(&self, node: u32) -> u32 {
        let n = self.classes.len() as u32;
        if node < n {
            node
        } else {
            self.inner[((node - n) / NUM_PRIO as u32) as usize].class
        }
    }

    fn list_push(&mut self, lid: usize, node: u32) {
        let tail = self.lists[lid].tail;
        self.links[node as usize] = Link {
            prev: tail,
            next: NIL,
        };
        if tail == NIL {
            self.lists[lid].head = node;
        } else {
            self.links[tail as usize].next = node;
        }
        self.lists[lid].tail = node;
        if self.lists[lid].parked == node {
            self.lists[lid].cursor = node;
            self.lists[lid].parked = NIL;
        }
        if lid < ROWS {
            self.row_mask[lid / NUM_PRIO] |= 1 << (lid % NUM_PRIO);
        }
    }

    fn list_remove(&mut self, lid: usize, node: u32) {
        let Link { prev, next } = self.links[node as usize];
        let list = &mut self.lists[lid];
        if list.cursor == node {
            list.cursor = next;
            // Keep the first class that lost its turn: a stand-in that leaves in turn must not
            // take its place.
            if list.parked == NIL {
                list.parked = node;
            }
        }
        if prev == NIL {
            list.head = next;
        } else {
            self.links[prev as usize].next = next;
        }
        if next == NIL {
            list.tail = prev;
        } else {
            self.links[next as usize].prev = prev;
        }
        self.links[node as usize] = Link {
            prev: NIL,
            next: NIL,
        };
        if lid < ROWS && self.lists[lid].head == NIL {
            self.row_mask[lid / NUM_PRIO] &= !(1 << (lid % NUM_PRIO));
        }
    }

    fn advance_cursor(&mut self, lid: usize) {
        let cur = self.lists[lid].cursor;
        self.lists[lid].cursor = if cur == NIL {
            NIL
        } else {
            self.links[cur as usize].next
        };
        self.lists[lid].parked = NIL;
    }

    // ---- activation --------------------------------------------------------------------------

    fn activate_leaf(&mut self, c: u32) {
        let prio = self.classes[c as usize].prio;
        self.classes[c as usize].active = 1 << prio;
        self.activate_prios(c, 1 << prio);
    }

    fn deactivate_leaf(&mut self, c: u32) {
        let mask = self.classes[c as usize].active;
        if mask != 0 {
            self.deactivate_prios(c, mask);
            self.classes[c as usize].active = 0;
        }
    }

    /// Class `c` became active at the prios in `mask`: hook it where its mode says.
    fn activate_prios(&mut self, mut c: u32, mut mask: u8) {
        while mask != 0 {
            let cl = &self.classes[c as usize];
            match cl.mode {
                ClassMode::CantSend => return,
                ClassMode::CanSend => {
                    let level = cl.level;
                    for p in bits(mask) {
                        let node = self.node_of(c, p);
                        self.list_push(Self::row_id(level, p), node);
                    }
                    return;
                }
                ClassMode::MayBorrow => {
                    let parent = cl.parent;
                    if parent == NIL {
                        return;
                    }
                    let pin = self.classes[parent as usize].inner;
                    let mut newly = 0u8;
                    for p in bits(mask) {
                        let fid = Self::feed_id(pin, p);
                        if self.lists[fid].head == NIL {
                            newly |= 1 << p;
                        }
                        let node = self.node_of(c, p);
                        self.list_push(fid, node);
                    }
                    self.classes[parent as usize].active |= newly;
                    c = parent;
                    mask = newly;
                }
            }
        }
    }

    /// Class `c` stops being active at the prios in `mask`: unhook it.
    fn deactivate_prios(&mut self, mut c: u32, mut mask: u8) {
        while mask != 0 {
            let cl = &self.classes[c as usize];
            match cl.mode {
                ClassMode::CantSend => return,
                ClassMode::CanSend => {
                    let level = cl.level;
                    for p in bits(mask) {
                        let node = self.node_of(c, p);
                        self.list_remove(Self::row_id(level, p), node);
                    }
                    return;
                }
                ClassMode::MayBorrow => {
                    let parent = cl.parent;
                    if parent == NIL {
                        return;
                    }
                    let pin = self.classes[parent as usize].inner;
                    let mut emptied = 0u8;
                    for p in bits(mask) {
                        let fid = Self::feed_id(pin, p);
                        let node = self.node_of(c, p);
                        self.list_remove(fid, node);
                        if self.lists[fid].head == NIL {
                            emptied |= 1 << p;
                        }
                    }
                    self.classes[parent as usize].active &= !emptied;
                    c = parent;
                    mask = emptied;
                }
            }
        }
    }

    /// The one place a class's mode changes. Re-hooks it if active and keeps the wait queue in step.
    ///
    /// Must be called with the key the class was filed under (`old_key`, from [`Self::wait_key`]
    /// before its buckets changed) so it can be taken out of the wait queue.
    fn change_mode(&mut self, c: u32, old_key: Option<u64>, new: ClassMode, wait_until: u64) {
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
            let cl = &mut self.classes[c as usize];
            cl.overlimits = cl.overlimits.wrapping_add(1);
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

    /// The wait-queue key of a class that is not `CanSend`: the instant its current mode ends.
    /// A pure function of the buckets as of `t_c` (the key does not depend on when it is
    /// computed, because tokens grow linearly), so it need not be stored.
    fn wait_key(&self, c: u32) -> Option<u64> {
        let cl = &self.classes[c as usize];
        match cl.mode {
            ClassMode::CanSend => None,
            ClassMode::CantSend => Some(cl.t_c.saturating_add(ceil_div(-cl.ctokens, cl.ceil))),
            ClassMode::MayBorrow => Some(cl.t_c.saturating_add(ceil_div(-cl.tokens, cl.rate))),
        }
    }

    /// Mode of class `c` at `now` from its buckets, and when that mode ends if not `CanSend`.
    fn mode_at(&self, c: u32, now: u64) -> (ClassMode, u64) {
        let cl = &self.classes[c as usize];
        // A clock that stands still or goes backwards is tolerated: tokens are as of `t_c`.
        let base = now.max(cl.t_c);
        let idle = now.saturating_sub(cl.t_c).min(MAX_IDLE_NS);
        let ct = refill(cl.ctokens, idle, cl.ceil, cl.cbuffer());
        if ct < 0 {
            return (
                ClassMode::CantSend,
                base.saturating_add(ceil_div(-ct, cl.ceil)),
            );
        }
        let t = refill(cl.tokens, idle, cl.rate, cl.buffer());
        if t < 0 {
            return (
                ClassMode::MayBorrow,
                base.saturating_add(ceil_div(-t, cl.rate)),
            );
        }
        (ClassMode::CanSend, now)
    }

    /// Charge a packet of `len` bytes sent by `leaf` at `level` to the leaf and its ancestors.
    fn charge(&mut self, leaf: u32, level: u8, len: u32, now: u64) {
        // Saturating: equal to the exact product whenever it is within the debt floor (see
        // "Exact accounting"); a larger cost is clamped to the floor either way.
        let cost = (len as i64).saturating_mul(NBITS_PER_BYTE);
        let mut c = leaf;
        while c != NIL {
            let old_key = self.wait_key(c);
            let cl = &mut self.classes[c as usize];
            let idle = now.saturating_sub(cl.t_c).min(MAX_IDLE_NS);
            let t = refill(cl.tokens, idle, cl.rate, cl.buffer());
            if cl.level >= level {
                if cl.level == level {
                    cl.lends = cl.lends.wrapping_add(1);
                }
                cl.tokens = clamp_debt(t.saturating_sub(cost), cl.rate);
            } else {
                cl.borrows = cl.borrows.wrapping_add(1);
                cl.tokens = clamp_debt(t, cl.rate);
            }
            let ct = refill(cl.ctokens, idle, cl.ceil, cl.cbuffer());
            cl.ctokens = clamp_debt(ct.saturating_sub(cost), cl.ceil);
            cl.t_c = now.max(cl.t_c);
            cl.sent_bytes += len as u64;
            cl.sent_packets += 1;
            let parent = cl.parent;
            // The buckets are as of `t_c` now, so the mode follows from their signs; `mode_at`
            // would compute the same. A class that was and stays `CanSend` is in no wait queue
            // and needs no re-hooking: the common case costs nothing more.
            let (mode, until) = if cl.ctokens < 0 {
                let until = cl.t_c.saturating_add(ceil_div(-cl.ctokens, cl.ceil));
                (ClassMode::CantSend, until)
            } else if cl.tokens < 0 {
                let until = cl.t_c.saturating_add(ceil_div(-cl.tokens, cl.rate));
                (ClassMode::MayBorrow, until)
            } else {
                (ClassMode::CanSend, now)
            };
            if mode != ClassMode::CanSend || cl.mode != ClassMode::CanSend {
                self.change_mode(c, old_key, mode, until);
            }
            c = parent;
        }
    }

    /// Apply due mode changes at `level`; returns the next pending change there, if any.
    fn do_events(&mut self, level: usize, now: u64) -> Option<u64> {
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

    /// Find the leaf to serve in `row[level][prio]`, moving cursors as round robin requires.
    /// Returns the leaf and the id of the list it was found in.
    fn lookup_leaf(&mut self, level: u8, prio: u8) -> Option<(u32, usize)> {
        let mut stack = [0usize; MAX_DEPTH + 1];
        let mut sp = 0;
        stack[0] = Self::row_id(level, prio);
        for _ in 0..(4 * MAX_DEPTH + 8) {
            let lid = stack[sp];
            let list = self.lists[lid];
            if list.head == NIL {
                return None;
            }
            if list.cursor == NIL {
                self.lists[lid].cursor = list.head;
                self.lists[lid].parked = NIL;
                if sp > 0 {
                    sp -= 1;
                    self.advance_cursor(stack[sp]);
                    continue;
                }
            }
            let c = self.owner_of(self.lists[lid].cursor);
            let inner = self.classes[c as usize].inner;
            if inner == NIL {
                return Some((c, lid));
            }
            sp += 1;
            if sp > MAX_DEPTH {
                return None;
            }
            stack[sp] = Self::feed_id(inner, prio);
        }
        None
    }

    /// Serve one packet from `row[level][prio]`, if any leaf there has one to give.
    fn dequeue_tree(&mut self, level: u8, prio: u8, now: Time) -> Option<P> {
        // Each failed attempt deactivates a leaf, so this is bounded by the number of leaves that
        // misbehave (hold backlog but refuse to dequeue); cap it anyway.
        for _ in 0..64 {
            let (leaf, lid) = self.lookup_leaf(level, prio)?;
            // The next leaves of this list are likely served next: a two-stage pipeline. The
            // record of the next leaf was prefetched one dequeue ago, so its queue's head slot and
            // its parent can be prefetched now; the leaf after it gets its record prefetched.
            let n1 = self.links[leaf as usize].next;
            if (n1 as usize) < self.classes.len() {
                let c1 = &self.classes[n1 as usize];
                c1.prefetch();
                if let Some(slot) = self.pool.get(c1.q.head as usize) {
                    prefetch(slot);
                }
                if let Some(p) = self.classes.get(c1.parent as usize) {
                    p.prefetch();
                }
                let n2 = self.links[n1 as usize].next;
                if (n2 as usize) < self.classes.len() {
                    self.classes[n2 as usize].prefetch();
                    prefetch(&self.links[n2 as usize]);
                }
            }
            let cl = &self.classes[leaf as usize];
            if let Some(p) = self.classes.get(cl.parent as usize) {
                p.prefetch();
            }
            let (out, now_empty, wait_until) = match cl.q.kind() {
                LeafKind::Pfifo | LeafKind::Bfifo => {
                    let p = self.fifo_pop(leaf);
                    (p, self.classes[leaf as usize].q.len == 0, None)
                }
                LeafKind::Boxed => {
                    let q = &mut self.boxed[cl.q.head as usize];
                    match q.dequeue(now) {
                        Dequeued::Packet(p) => {
                            let e = q.backlog().packets == 0;
                            (Some(p), e, None)
                        }
                        Dequeued::Empty => (None, true, None),
                        Dequeued::NotBefore(t) => (None, true, Some(t.0)),
                    }
                }
                LeafKind::None => (None, true, None),
            };
            self.collect_victims(leaf);
            match out {
                Some(pkt) => {
                    let len = pkt.len();
                    let cl = &mut self.classes[leaf as usize];
                    let d = &mut cl.deficit[usize::from(level > 0)];
                    // Saturating: with quantum ≤ QUANTUM_LIMIT the deficit stays far from
                    // the bounds; a giant packet must not wrap it either.
                    *d = d.saturating_sub(i32::try_from(len).unwrap_or(i32::MAX));
                    if *d < 0 {
                        *d = d.saturating_add(i32::try_from(cl.quantum).unwrap_or(i32::MAX));
                        self.advance_cursor(lid);
                    }
                    if now_empty {
                        self.deactivate_leaf(leaf);
                    }
                    self.charge(leaf, level, len, now.0);
                    return Some(pkt);
                }
                None => {
                    self.deactivate_leaf(leaf);
                    if let Some(t) = wait_until {
                        self.leaf_wait.insert((t, leaf));
                    }
                }
            }
        }
        None
    }

    /// Packets and bytes queued in a leaf class (zero for inner classes).
    pub fn leaf_backlog(&self, c: ClassId) -> Backlog {
        if c as usize >= self.classes.len() {
            return Backlog::default();
        }
        let cl = &self.classes[c as usize];
        match cl.q.kind() {
            LeafKind::Pfifo | LeafKind::Bfifo => Backlog {
                packets: cl.q.len as u64,
                bytes: cl.q.bytes as u64,
            },
            LeafKind::Boxed => self.boxed[cl.q.head as usize].backlog(),
            LeafKind::None => Backlog::default(),
        }
    }

    /// Check the internal invariants (tests): activity matches backlog, list membership matches
    /// mode, wait queue matches mode, backlog equals the sum of leaf backlogs.
    pub fn check_invariants(&self) -> Result<(), String> {
        let mut sum = Backlog::default();
        for (i, cl) in self.classes.iter().enumerate() {
            let c = i as u32;
            let name = self.name(c);
            if cl.is_leaf() {
                let b = self.leaf_backlog(c);
                sum.packets += b.packets;
                sum.bytes += b.bytes;
                let throttled_leaf = self.leaf_wait.iter().any(|&(_, l)| l == c);
                if (b.packets > 0) != (cl.active != 0) && !throttled_leaf {
                    return Err(format!(
                        "leaf {name}: backlog {} but active {:#x}",
                        b.packets, cl.active
                    ));
                }
            }
            let in_wait = self
                .wait_key(c)
                .is_some_and(|k| self.wait[cl.level as usize].contains(&(k, c)));
            let filed = self.wait[cl.level as usize]
                .iter()
                .filter(|&&(_, x)| x == c)
                .count();
            if filed > usize::from(in_wait) {
                return Err(format!(
                    "class {name}: filed {filed} times in the wait queue"
                ));
            }
            if (cl.mode != ClassMode::CanSend) != in_wait {
                return Err(format!(
                    "class {name}: mode {:?} but in wait queue: {in_wait}",
                    cl.mode
                ));
            }
            if cl.inner != NIL {
                for p in 0..NUM_PRIO as u8 {
                    let nonempty = self.lists[Self::feed_id(cl.inner, p)].head != NIL;
                    if nonempty != (cl.active & (1 << p) != 0) {
                        return Err(format!(
                            "inner {name}: feed {p} non-empty {nonempty} vs active {:#x}",
                            cl.active
                        ));
                    }
                }
            }
            // Membership: where is each active node?
            for p in bits(cl.active) {
                let node = self.node_of(c, p);
                let expect = match cl.mode {
                    ClassMode::CanSend => Some(Self::row_id(cl.level, p)),
                    ClassMode::MayBorrow if cl.parent != NIL => {
                        Some(Self::feed_id(self.classes[cl.parent as usize].inner, p))
                    }
                    _ => None,
                };
                let found = self.list_contains_any(node);
                if found != expect {
                    return Err(format!(
                        "class {name} prio {p}: in list {found:?}, expected {expect:?}"
                    ));
                }
            }
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

    fn list_contains_any(&self, node: u32) -> Option<usize> {
        (0..self.lists.len()).find(|&lid| {
            let mut x = self.lists[lid].head;
            let mut guard = 0;
            while x != NIL && guard <= self.links.len() {
                if x == node {
                    return true;
                }
                x = self.links[x as usize].next;
                guard += 1;
            }
            false
        })
    }

    /// Bytes in a nano-bit amount, for display.
    fn nbits_to_bytes(v: i64) -> i64 {
        v / NBITS_PER_BYTE
    }
}

impl<P: Packet> Discipline<P> for Htb<P> {
    fn books(&self) -> &Books<P> {
        &self.books
    }
    fn books_mut(&mut self) -> &mut Books<P> {
        &mut self.books
    }

    #[inline]
    fn enqueue_inner(&mut self, pkt: P, now: Time) -> Result<(), Dropped<P>> {
        let c = self.classifier.classify(pkt.meta());
        self.enqueue_to_inner(c, pkt, now)
    }

    fn enqueue_burst_inner(
        &mut self,
        pkts: &mut Vec<P>,
        now: Time,
        refused: &mut Vec<Dropped<P>>,
    ) -> Option<usize> {
        let classes: Vec<ClassId> = pkts
            .iter()
            .map(|p| self.classifier.classify(p.meta()))
            .collect();
        Some(self.enqueue_burst_to(&classes, pkts, now, refused))
    }

    fn dequeue_inner(&mut self, now: Time) -> Dequeued<P> {
        if self.books.backlog().packets == 0 {
            return Dequeued::Empty;
        }
        // Leaves whose own qdisc was throttled come back.
        while let Some(&(t, c)) = self.leaf_wait.first() {
            if t > now.0 {
                break;
            }
            self.leaf_wait.pop_first();
            if self.leaf_backlog(c).packets > 0 && self.classes[c as usize].active == 0 {
                self.activate_leaf(c);
            }
        }
        let mut next = u64::MAX;
        for level in 0..MAX_DEPTH {
            if let Some(t) = self.do_events(level, now.0) {
                next = next.min(t);
            }
            let mut mask = self.row_mask[level];
            while mask != 0 {
                let prio = mask.trailing_zeros() as u8;
                if let Some(p) = self.dequeue_tree(level as u8, prio, now) {
                    return Dequeued::Packet(p);
                }
                mask &= !(1 << prio);
            }
        }
        if let Some(&(t, _)) = self.leaf_wait.first() {
            next = next.min(t);
        }
        if self.books.backlog().packets == 0 {
            return Dequeued::Empty;
        }
        if next == u64::MAX {
            // Backlogged, nothing throttled, nothing sendable: only a leaf that holds packets but
            // refuses them could do this. Poll again shortly rather than stall.
            next = now.0 + 1_000_000;
        }
        Dequeued::NotBefore(Time(next.max(now.0)))
    }

    fn as_any_inner(&mut self) -> Option<&mut dyn std::any::Any> {
        Some(self)
    }
    /// From another HTB: [`Htb::adopt`] (state kept class by class); otherwise by requeueing.
    fn adopt_inner(&mut self, old: &mut dyn Qdisc<P>, now: Time) -> Option<AdoptReport> {
        let o = old.as_any_mut()?.downcast_mut::<Htb<P>>()?;
        Some(Htb::adopt(self, o, now))
    }

    /// Every queued packet, leaf by leaf in class order, regardless of tokens.
    fn drain_inner(&mut self, now: Time) -> Vec<P> {
        let mut out = Vec::new();
        for c in 0..self.classes.len() as u32 {
            if self.classes[c as usize].is_leaf() {
                out.extend(self.drain_leaf(c, now));
            }
        }
        self.leaf_wait.clear();
        out
    }

    fn kind_inner(&self) -> &'static str {
        "htb"
    }

    fn visit_classes_inner(&self, f: &mut dyn FnMut(&ClassView<'_>)) {
        // Backlog of every class (a subtree's for inner classes): one pass, O(n · depth).
        let mut backlogs = vec![Backlog::default(); self.classes.len()];
        for (i, cl) in self.classes.iter().enumerate() {
            if cl.is_leaf() {
                let b = self.leaf_backlog(i as u32);
                let mut x = i as u32;
                while x != NIL {
                    backlogs[x as usize].packets += b.packets;
                    backlogs[x as usize].bytes += b.bytes;
                    x = self.classes[x as usize].parent;
                }
            }
        }
        for &c in &self.order {
            let cl = &self.classes[c as usize];
            let mut leaf_drops = DropCounts::default();
            match cl.q.kind() {
                LeafKind::Boxed => {
                    let s = self.boxed[cl.q.head as usize].stats();
                    leaf_drops = s.refused;
                    for (r, cnt) in s.dropped.iter() {
                        leaf_drops.add_counter(r, cnt);
                    }
                }
                // Inline FIFOs count dropped packets per class (bytes per reason are in the
                // qdisc-wide stats).
                LeafKind::Pfifo => leaf_drops.add_counter(
                    DropReason::QueueLimit,
                    Counter {
                        packets: cl.drops as u64,
                        bytes: 0,
                    },
                ),
                LeafKind::Bfifo => leaf_drops.add_counter(
                    DropReason::ByteLimit,
                    Counter {
                        packets: cl.drops as u64,
                        bytes: 0,
                    },
                ),
                LeafKind::None => {}
            }
            let backlog = backlogs[c as usize];
            f(&ClassView {
                name: self.name(c),
                parent: (cl.parent != NIL).then_some(cl.parent),
                id: c,
                level: cl.level,
                is_leaf: cl.is_leaf(),
                rate: Rate(cl.rate),
                ceil: Rate(cl.ceil),
                prio: cl.prio,
                mode: cl.mode,
                tokens: Self::nbits_to_bytes(cl.tokens),
                ctokens: Self::nbits_to_bytes(cl.ctokens),
                stats: ClassStats {
                    sent: Counter {
                        packets: cl.sent_packets,
                        bytes: cl.sent_bytes,
                    },
                    drops: cl.drops as u64,
                    overlimits: cl.overlimits as u64,
                    lends: cl.lends as u64,
                    borrows: cl.borrows as u64,
                    giants: cl.giants as u64,
                    marked: self.leaf_marked(cl),
                },
                backlog,
                avgidle_ns: None,
                leaf_drops,
            });
        }
    }
}

/// A size in nano-bits, at most [`TOKEN_BOUND`].
fn nbits(bytes: u64) -> i64 {
    (bytes.min(i64::MAX as u64) as i64)
        .saturating_mul(NBITS_PER_BYTE)
        .min(TOKEN_BOUND)
}

/// `min(v + idle·rate, cap)`, exactly, in 64 bits, for `|v| ≤ TOKEN_BOUND` and
/// `0 ≤ cap ≤ TOKEN_BOUND`: when `v < cap` the headroom `cap − v ≤ 2·TOKEN_BOUND < 2⁶³` is
/// exact, and `min(v + x, cap) = v + min(x, cap − v)`; a saturated `idle·rate` is above any
/// headroom, so the minimum is the same as with the true product.
#[inline]
fn refill(v: i64, idle: u64, rate: u64, cap: i64) -> i64 {
    if v >= cap {
        return cap;
    }
    let room = (cap - v) as u64;
    v + idle.saturating_mul(rate).min(room) as i64
}

/// Tokens may go into debt by at most 60 s of the bucket's rate (Linux's `1 - mbuffer`), and
/// never beyond `±TOKEN_BOUND`.
#[inline]
fn clamp_debt(v: i64, rate: u64) -> i64 {
    if v >= 0 {
        return v.min(TOKEN_BOUND);
    }
    let floor = MAX_IDLE_NS.saturating_mul(rate).min(TOKEN_BOUND as u64) as i64;
    v.clamp(-floor, TOKEN_BOUND)
}

/// `⌈a / b⌉` for a debt `a` in nano-bits and a rate `b`; 0 when `a ≤ 0`.
#[inline]
fn ceil_div(a: i64, b: u64) -> u64 {
    if b == 0 {
        return MAX_IDLE_NS;
    }
    if a <= 0 {
        return 0;
    }
    (a as u64).div_ceil(b)
}

/// Iterate the set bits of a prio mask.
fn bits(mask: u8) -> impl Iterator<Item = u8> {
    let mut m = mask;
    std::iter::from_fn(move || {
        if m == 0 {
            return None;
        }
        let p = m.trailing_zeros() as u8;
        m &= m - 1;
        Some(p)
    })
}

#[cfg(test)]
mod tests;
