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
//! the instant its mode will change (`waitq`: a heap whose outdated entries are dropped lazily). Levels are numbered as in Linux: leaves are level 0, a root
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
//! Round robin inside a list uses a cursor. As in Linux, every list is ordered by class id, not
//! by arrival (`feed`, `feedbits`, `rowbits`), so a class that flips modes and re-enters a list
//! finds its old place. The leaf at the cursor keeps sending until its deficit
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
//! ## Complexity per packet, in classes and in flows
//! With `n` classes, depth `d ≤ 8`, 8 priorities, `a` active (backlogged) leaves and `w` throttled
//! classes (not `CanSend`):
//! * enqueue: O(1) into the leaf's FIFO, plus O(d) list insertions when the leaf becomes active
//!   (lists are kept in class-id order, as Linux's rb-trees are): into a row, setting the
//!   class's bit in the row's bitmap (O(log₆₄ n) words, usually one; no other record is
//!   touched); into a feed, setting the bit of the class's rank among its siblings (one word
//!   for a family of up to 64, O(log₆₄ k) words for `k` children; `feedbits`);
//! * dequeue: one bit scan for the level and prio, O(d) for the descent through the feeds, O(d)
//!   for the charge (64-bit arithmetic, no division unless a class is throttled; a class that
//!   is and stays `CanSend` takes a short path with no clamp and no mode logic, and one already
//!   charged at the same instant — the ancestors, for every packet of a dequeue burst after the
//!   first — skips the refill and the profile: 40–50 instructions a class; within a
//!   [`Qdisc::dequeue_burst`] the charges of the leaf's grandparent and every class above it
//!   are summed while they provably stay `CanSend` and applied at the burst's end, exactly as
//!   per-packet charging would store them — `tokens::Deferred` gives the argument — so a
//!   packet after the first of a burst writes the leaf and its parent and adds to one sum:
//!   O(2) records instead of O(d)), O(log₆₄ n) bit operations (usually one word) to move a
//!   row's cursor or to unhook a leaf that runs empty from its row (`feed`), per class whose
//!   mode changes or whose wait key moves a push into its level's wait queue (a 4-ary heap
//!   whose stale entries are dropped when they reach the top, `waitq`: O(1) expected for the
//!   usual later key, O(log₄ w) worst case, plus one O(log₄ w) pop when the entry is due or
//!   stale) and a bit set or cleared in its parent's feed, O(log₆₄ k) to move a feed's cursor,
//!   and O(log₄ w) per due mode change applied (amortised: each is caused by an earlier
//!   charge; at most [`MAX_EVENTS_PER_LEVEL`] per level per call, the rest on the next call,
//!   as Linux does).
//!
//! Idle classes sit in no list, row or wait queue: nothing per packet depends on them, and on `a`
//! and `n` only through the O(log₆₄ n) steps in a row's bitmap and O(log₆₄ k) in a feed's
//! (usually one word: the climb is taken only where the bitmap is sparse). Flows are not a dimension of HTB itself: a leaf's queue is
//! a FIFO or a boxed qdisc (SFQ, FQ-CoDel), whose own complexity applies per leaf. What does grow
//! with `n` is the memory touched at random. Per packet: at enqueue, the leaf's hot record and
//! its queue's tail slot; at dequeue, the hot record and counters of the leaf, the hot record
//! of each ancestor charged (`d`; an inner class's counters are written only when it lends or
//! borrows: what it sent is its leaves' sum, computed when read), the head slot, and the profiles (few, shared, so cached). With
//! a million classes the leaf's lines are cache (and TLB) misses; [`Htb::enqueue_burst_to`]
//! prefetches a whole burst's records before touching them (and the counters of the idle
//! leaves among them, which are served soon), dequeue prefetches the next leaves of the list
//! being served (records and first slots), and taking a packet from a leaf prefetches the
//! slot of the leaf's next one (a leaf sends several in a row), so those misses overlap
//! instead of adding up; the pool hands out its slots by the cache line, a line to one leaf
//! at a time (`pool`), so that a leaf's packets that arrived while it was backlogged sit side
//! by side and a visit of the round robin misses on one line, not once per packet
//! (`linkshare bench sched`, BENCHMARKS.md). The hints only pay when the leaves the traffic
//! touches are out of the caches, so whether to give them is judged from the traffic
//! (`warmth`: the share of enqueues whose leaf went unserved for an epoch of 2,048 packets), not
//! from the tree's size: a million classes of which a thousand are busy run without them, as a
//! thousand-class tree does. A tree of fewer than `PREFETCH_MIN` classes (8,192: its records fit
//! a core's L2 cache) never gives them.
//!
//! ## Memory per class
//! Hot, cold and shared, as librte_sched splits its pipes from their profiles:
//! * **hot**: 64 bytes, one cache line ([`Class`]: buckets, time of the last charge, parent,
//!   profile index, DRR deficits, the leaf's FIFO (first and last slot, length, bytes; the
//!   last-slot field holds the inner or boxed index of other classes), its rank among its
//!   siblings, level, kind, mode, active prios) — what enqueue, dequeue and the charge read and
//!   write;
//! * **cold**: 32 bytes of counters ([`Counters`]: bytes and packets sent, drops, overlimits,
//!   lends, borrows; aligned so that one line holds them), written by the charge, read by
//!   `stat`, carried over by adopt; what an inner class sent is not counted per packet but
//!   summed over its leaves when read, so a packet's charge writes one counters line, its
//!   leaf's; `giants` (packets bigger than the burst, rare) in a map
//!   holding only the classes that had one;
//! * **per profile**: 56 bytes ([`Profile`]: rate, ceil, burst and cburst in bytes and
//!   nano-bits, quantum, FIFO limit, prio), one per distinct configuration, shared by every
//!   class configured alike (a million subscribers on ten plans: ten profiles);
//! * an inner class has 8 feeds (one per prio: a word of bits each for a family of up to 64,
//!   `feedbits`), 8 round-robin cursors and its entry in `inner`: 144 bytes more; every class
//!   but the root its 4-byte entry in its parent's family (`children`); a row in use, a bitmap
//!   of one bit per class (plus 1/64 of that), allocated at its first use;
//! * per boxed leaf with per-flow state (fq_codel, sfq, drr), 16 bytes of its link in the list
//!   of leaves that ran empty, in the order they did (`crate::qdisc::lazy::IdleLeaves`): the
//!   leaf's table is built at its first packet and [`Qdisc::reclaim_idle`] releases the tables
//!   of leaves empty for the hold, from the head of that list, O(released);
//! * nothing for the charges deferred within a burst (one 48-byte sum per scheduler);
//! * the name, front coded in blocks of 16 (`names`): two or three bytes for names given in
//!   sequence (the depth-first order is recomputed by `stat` rather than kept);
//! * per queued packet, one slot of the shared pool (`size_of::<P>()` + 4 bytes, rounded; 16
//!   for an 8-byte packet handle), the slots given out four at a time in a 64-byte-aligned
//!   line to one leaf (`pool`): a slot per packet for leaves that hold many, up to a line per
//!   packet for leaves that hold one each.
//!
//! A librte_sched-shaped tree of 1,048,576 leaves (1,114,114 classes, 16 leaves per inner class,
//! names `c0`…`c1114113`) is ≈ 112 bytes per class (64 + 32, 12.5 of feeds, families and
//! cursors, 3.7 of name), 125 MB, measured by a counting allocator in `tests/htb_memory.rs` (111
//! with the feeds as treaps through their members' records; 131 with the leaf's link in a
//! separate array, a FIFO head index, `giants` for every class and names whole with a 4-byte
//! index; 163 before the hot/cold split). The large per-class arrays and the packet pool are in transparent huge pages
//! (`crate::hugepages`: advised before they are written, collapsed after), so that a few active
//! leaves spread over a million classes, or a million queued packets, do not each cost a TLB
//! miss.

//! ## Layout
//! This file holds the records and the [`Discipline`] hooks; by concern: `tokens` (buckets,
//! modes, the wait queue, the charge), `feed` (rows, feeds, round robin, the descent to a leaf),
//! `queue` (leaf queues, enqueue, victims), `adopt` (taking over a predecessor), `tune`
//! (a class's parameters and the filters changed in place), `reshape` (classes added and
//! removed in place: slots retired and reused, families with room), `stats`
//! (views, counters, invariants), `spec` (the tree's description and its checks). Statistics
//! and dropped packets are kept by the provided [`Qdisc`] methods around the hooks
//! ([`crate::qdisc::discipline`]); the class tree is validated by [`crate::tree`].
//!
//! ## Differences from Linux, on purpose
//! * no direct queue: unclassified packets go to the default class, which must exist;
//! * packets bigger than the burst are sent (the bucket goes into debt) and counted as `giants`.

mod adopt;
mod build;
mod feed;
mod feedbits;
mod names;
mod queue;
mod reshape;
mod rowbits;
mod spec;
mod stats;
mod tokens;
mod tune;
mod waitq;
mod warmth;
pub use crate::qdisc::adopt::AdoptReport;
pub use adopt::{AdoptMap, Adopted};
pub use reshape::MAX_CLASSES;
pub use spec::*;
pub use stats::CounterView;
pub use tune::ClassTune;

use std::collections::{BTreeSet, HashMap};

use crate::classify::{ClassId, Classifier};
use crate::packet::Packet;
use crate::pool::{self, LeafQ};
use crate::prefetch::prefetch;
use crate::qdisc::fifo::FifoLimit;
use crate::qdisc::lazy::IdleLeaves;
use crate::qdisc::leaf::LeafSpec;
use crate::qdisc::{
    Backlog, Books, ClassMode, ClassStats, ClassView, Counter, Dequeued, Discipline, DropCounts,
    DropReason, Dropped, Qdisc,
};
use crate::tree::{ClassTree, DepthLimits};
use crate::units::{Rate, Time, NS_PER_SEC};
use feed::bits;
use tokens::{clamp_debt, nbits, refill};

const NIL: u32 = u32::MAX;
/// The list nodes of inner classes are numbered from here (`feed`): above every class id
/// ([`MAX_CLASSES`]), and with room for eight nodes per class below `NIL`.
const INNER_NODES: u32 = 1 << 31;
const _: () = assert!(
    (INNER_NODES as u64) + (MAX_CLASSES as u64) * (NUM_PRIO as u64) < NIL as u64
        && (MAX_CLASSES as u64) <= INNER_NODES as u64
);
/// Nano-bits per byte.
const NBITS_PER_BYTE: i64 = 8 * NS_PER_SEC as i64;
/// Bound on every bucket level and bucket size, in nano-bits (see "Exact accounting").
const TOKEN_BOUND: i64 = i64::MAX / 4;
/// Longest idle time credited at once (Linux's `mbuffer`): 60 s.
const MAX_IDLE_NS: u64 = 60 * NS_PER_SEC;
/// Trees of at least this many classes (a row bitmap of 32 KB and more: beyond a core's L1
/// cache) prefetch the word of a row's bitmap that hooking a leaf into its row will write.
const PREFETCH_ROW_WORDS_MIN: usize = 1 << 18;
/// Trees of at least this many classes (≈ 800 KB of class records and counters and more: beyond
/// a core's L2 cache) may prefetch — a burst's records at enqueue, the next leaves' records and
/// queue slots at dequeue — when their traffic's working set is out of the caches too (`warmth`).
/// A smaller tree's records stay in L2, where the hints only cost their instructions (≈ 109 a
/// packet at 1,024 leaves with a standing backlog; docs/benchmarks-history.md, "Prefetching only
/// where it pays").
const PREFETCH_MIN: usize = 1 << 13;
/// Mode changes applied per level per dequeue call.
pub const MAX_EVENTS_PER_LEVEL: usize = 64;

/// The round-robin state of one row or feed; its members are elsewhere: a row's in its bitmap
/// `Htb::row_bits` (`rowbits`), a feed's in `Htb::feed_words` or `Htb::feed_big` by rank among
/// siblings (`feedbits`), both in class-id order. `cursor == NIL` means the cursor ran off the
/// end (it wraps at the next lookup) or, with `last != NIL`, that the class at the cursor left
/// this feed: the next lookup resumes at the first member whose id is ≥ `last` — the class
/// itself if it came back (Linux's `ptr` and `last_ptr_id`).
#[derive(Copy, Clone, Debug)]
struct List {
    cursor: u32,
    /// Class id of the class that left this feed at the cursor, until the next lookup.
    last: u32,
}

impl List {
    const EMPTY: List = List {
        cursor: NIL,
        last: NIL,
    };
}

/// What queue a class has.
#[repr(u8)]
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
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

/// Largest inline FIFO limit (packets or bytes); larger limits are capped to it.
const LIMIT_MASK: u32 = (1 << 30) - 1;

/// What a class is configured with and never changes while it runs: shared by every class
/// configured alike (librte_sched's pipe profiles), so a million subscribers on a handful of
/// plans cost a handful of profiles. Interned by [`Htb::new`]; a class holds its index.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
struct Profile {
    rate: u64,
    ceil: u64,
    /// `burst`/`cburst` in nano-bits: below `TOKEN_BOUND` because both are ≤ `BURST_LIMIT`.
    buffer: i64,
    cbuffer: i64,
    burst: u32,
    cburst: u32,
    quantum: u32,
    /// Inline FIFO limit (packets or bytes as the class's kind says), ≤ [`LIMIT_MASK`].
    limit: u32,
    prio: u8,
}

/// The hot per-class state: what enqueue, dequeue and the charge touch, in one cache line
/// (64 bytes, `repr(C)`, checked below). Read-only parameters are in the class's [`Profile`],
/// counters in [`Counters`] (`Htb::cold`). Tokens are in nano-bits (see the module docs).
#[repr(C, align(64))]
struct Class {
    tokens: i64,
    ctokens: i64,
    /// Time of the last charge (tokens are as of `t_c`).
    t_c: u64,
    parent: u32,
    /// Index into `Htb::profiles`.
    profile: u32,
    /// DRR deficits: `[0]` when sending on its own rate (level 0), `[1]` when borrowing. Linux
    /// keeps one per level; two suffice because a leaf competes with one set of classes when it
    /// is under its rate and another when it borrows, and keeping them apart stops the traffic a
    /// class sends on its own rate from eating its share of what it borrows.
    deficit: [i32; 2],
    /// The inline FIFO (threaded through the shared packet pool, `crate::pool`); its kind is
    /// in the class record, its limit in the class's [`Profile`]. A class without an inline
    /// FIFO reuses `q.tail` for another index: for a boxed leaf the index into `Htb::boxed`,
    /// for an inner class the index into `Htb::inner` ([`Class::boxed`], [`Class::inner`]);
    /// `q.head` is then NIL and `len` and `bytes` are 0.
    q: LeafQ,
    /// The class's place among its siblings in class-id order: its bit in its parent's feeds
    /// (`feedbits`); fixed when the tree is built.
    rank: u32,
    level: u8,
    kind: LeafKind,
    mode: ClassMode,
    /// Prios this class is active at (a leaf: its prio if backlogged; an inner class: prios of
    /// its non-empty feeds).
    active: u8,
}

const _: () = assert!(std::mem::size_of::<Class>() == 64);
const _: () = assert!(std::mem::size_of::<Profile>() == 56);

/// The cold per-class state: counters, written by the charge and read by `stat`. 32 bytes,
/// aligned to 32 so that the charge's writes stay within one cache line. (`giants`, counted at
/// enqueue and only for packets bigger than the burst, is kept apart: `Htb::giants`.)
///
/// `sent_bytes` and `sent_packets` are a leaf's own, counted per packet. An inner class's are
/// not counted: every packet it sends is sent by one of its leaves, so what it sent is the sum
/// over its subtree, computed when read (`stats::sent_totals`), and the charge of a packet
/// writes the counters of the leaf alone — one line a packet instead of one per class of the
/// path. In an inner class the two fields hold what its subtree's sum does not: sends of
/// classes that are no longer below it, or minus what its children had sent when it was
/// created, so that a reload keeps every class's total as it was (`adopt`); wrapping, like the
/// sums.
#[repr(C, align(32))]
#[derive(Copy, Clone, Default)]
struct Counters {
    /// A leaf's own; an inner class's offset (see above).
    sent_bytes: u64,
    sent_packets: u64,
    /// 32-bit, wrapping, like Linux's `tc_stats` and `tc_htb_xstats`.
    drops: u32,
    overlimits: u32,
    lends: u32,
    borrows: u32,
}

const _: () = assert!(std::mem::size_of::<Counters>() == 32);

impl<P: Packet> Htb<P> {
    /// Bring in what the charge of leaf `c` touches: its record and its counters. Nothing for
    /// an id out of range (NIL).
    #[inline(always)]
    fn prefetch_class(&self, c: u32) {
        if let (Some(cl), Some(k)) = (self.classes.get(c as usize), self.cold.get(c as usize)) {
            prefetch(cl);
            prefetch(k);
        }
    }

    /// Bring in what the charge of an inner class `c` touches on its short path: its record
    /// alone (its counters are written only when it lends or borrows; what it sent is its
    /// leaves' sum, `stats::sent_totals`). Nothing for an id out of range (NIL).
    #[inline(always)]
    fn prefetch_record(&self, c: u32) {
        if let Some(cl) = self.classes.get(c as usize) {
            prefetch(cl);
        }
    }
}

impl Class {
    fn is_leaf(&self) -> bool {
        self.kind != LeafKind::None
    }

    /// Index into `Htb::inner` of an inner class, NIL for a leaf.
    #[inline(always)]
    fn inner(&self) -> u32 {
        if self.kind == LeafKind::None {
            self.q.tail
        } else {
            NIL
        }
    }

    /// Index into `Htb::boxed` of a leaf of kind `Boxed`.
    fn boxed(&self) -> usize {
        self.q.tail as usize
    }
}

/// Per inner class: its class, its children (`Htb::children[first..first + count]`, in
/// class-id order) and, for a family larger than [`feedbits::SMALL_FAMILY`], the index of its
/// eight feed bitmaps in `Htb::feed_big` (`feedbits`).
struct Inner {
    class: u32,
    first: u32,
    count: u32,
    big: u32,
}

/// The HTB qdisc. See the module documentation.
pub struct Htb<P: Packet> {
    /// Hot per-class records (one cache line each).
    classes: Vec<Class>,
    /// Per-class counters, by class id.
    cold: Vec<Counters>,
    /// Packets bigger than the burst, by class (32-bit, wrapping, like `tc_htb_xstats`): only
    /// classes that had one (a burst is at least one MTU, so giants are rare).
    giants: HashMap<u32, u32>,
    /// Distinct read-only class parameters, shared.
    profiles: Vec<Profile>,
    /// Per profile, the classes on it (`tune`: a profile no class uses is reused).
    profile_refs: Vec<u32>,
    /// All class names, front coded.
    names: names::Names,
    /// The slots of every inline FIFO, handed out by the line (`pool`).
    pool: pool::Pool<P>,
    boxed: Vec<Box<dyn Qdisc<P>>>,
    /// Per boxed leaf: its `marked` count already added to ours (marks add up like drops).
    marks_seen: Vec<u64>,
    /// Boxed leaves with per-flow state, the empty ones in the order they went empty, for
    /// [`Qdisc::reclaim_idle`] (`crate::qdisc::lazy`).
    idle: IdleLeaves,
    inner: Vec<Inner>,
    /// All lists: rows first (`level * NUM_PRIO + prio`), then feeds (`ROWS + inner * NUM_PRIO + prio`).
    lists: Vec<List>,
    /// Every inner class's children, family by family, each in class-id order (`feedbits`).
    children: Vec<u32>,
    /// The feeds of families of up to 64: one word per feed (`inner * NUM_PRIO + prio`), bit
    /// `r` set iff the child of rank `r` is a member (`feedbits`).
    feed_words: Vec<u64>,
    /// The feeds of larger families, `NUM_PRIO` per family (`Inner::big`), their bitmaps
    /// allocated at first use.
    feed_big: Vec<rowbits::RowBits>,
    /// Per row: its members by class id (`rowbits`), allocated at a row's first use.
    row_bits: Vec<rowbits::RowBits>,
    /// Bit `p` of `row_mask[level]` set iff `row[level][p]` is non-empty.
    row_mask: [u8; MAX_DEPTH],
    /// Per level, the classes that are not `CanSend` (`waitq`).
    wait: Vec<waitq::WaitQ>,
    /// Leaves whose own qdisc is throttled (non-work-conserving leaves such as TBF).
    leaf_wait: BTreeSet<(u64, u32)>,
    classifier: Classifier,
    default: u32,
    params: HtbParams,
    books: Books<P>,
    /// Ancestors' charges summed within a dequeue burst (`tokens`), applied at its end.
    deferred: tokens::Deferred,
    /// Whether the traffic's working set is out of the caches, so prefetching pays (`warmth`).
    warmth: warmth::Warmth,
    /// The tree this one is taking over in steps, if any (`adopt`).
    adopting: Option<Box<adopt::Pending<P>>>,
    /// Slots of classes removed in place, the last removed on top: the next class added takes
    /// it (`reshape`).
    free: Vec<u32>,
    /// Likewise, inner indexes (each with its family's region in `children`) and boxed leaf
    /// indexes retired.
    free_inner: Vec<u32>,
    free_boxed: Vec<u32>,
    /// Per inner class: the room of its family's region in `children` (`reshape`).
    family_cap: Vec<u32>,
    /// Per inner class with children removed in place: the ranks they left, for the next child
    /// added to the family.
    free_ranks: HashMap<u32, Vec<u32>>,
}

const ROWS: usize = MAX_DEPTH * NUM_PRIO;

impl<P: Packet> Htb<P> {
    /// Index of the class with this name. O(n): the control path's.
    pub fn class_id(&self, name: &str) -> Option<ClassId> {
        self.names
            .find(name)
            .map(|i| i as ClassId)
            .filter(|&i| self.is_live(i))
    }

    /// Name of a class.
    pub fn class_name(&self, id: ClassId) -> Option<String> {
        self.is_live(id).then(|| self.name(id))
    }

    /// Whether `id` is a class (not past the end, not a slot retired by
    /// [`Htb::remove_class`]).
    pub fn is_live(&self, id: ClassId) -> bool {
        self.classes
            .get(id as usize)
            .is_some_and(|c| c.level != reshape::RETIRED)
    }

    fn name(&self, c: u32) -> String {
        self.names.get(c as usize)
    }

    /// Giants counted at class `c`.
    fn giants_of(&self, c: u32) -> u32 {
        self.giants.get(&c).copied().unwrap_or(0)
    }

    /// Number of class slots: ids run from 0 to `len() - 1`, slots retired by
    /// [`Htb::remove_class`] included ([`Htb::live_classes`] counts the classes).
    pub fn len(&self) -> usize {
        self.classes.len()
    }

    /// Number of classes (slots not retired).
    pub fn live_classes(&self) -> usize {
        self.classes.len() - self.free.len()
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

    /// Current mode of a class (as of its last charge or mode change).
    pub fn class_mode(&self, id: ClassId) -> Option<ClassMode> {
        self.classes.get(id as usize).map(|c| c.mode)
    }

    /// The profile of class `c`.
    #[inline(always)]
    fn prof(&self, c: u32) -> &Profile {
        &self.profiles[self.classes[c as usize].profile as usize]
    }

    /// Class ids depth first, parents before children, siblings in index order (as
    /// [`ClassTree`] orders them). Recomputed when asked (the control path) rather than kept:
    /// 4 bytes a class.
    fn tree_order(&self) -> Vec<u32> {
        let parents: Vec<Option<ClassId>> = self
            .classes
            .iter()
            .map(|c| (c.parent != NIL).then_some(c.parent))
            .collect();
        let mut order = crate::tree::depth_first_order(&parents);
        if !self.free.is_empty() {
            order.retain(|&c| self.is_live(c));
        }
        order
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

    /// A burst at one instant: the ancestors' charges may be summed (`tokens::Deferred`) and
    /// are applied before it returns.
    fn dequeue_burst_inner(
        &mut self,
        now: Time,
        max: usize,
        out: &mut Vec<P>,
    ) -> Option<Dequeued<usize>> {
        self.deferred.on = true;
        let r = crate::qdisc::discipline::dequeue_burst_loop(self, now, max, out);
        self.deferred.on = false;
        self.flush_deferred();
        Some(r)
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
        self.adopt_finish_now(now);
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
        self.visit(f)
    }

    /// The leaves' per-flow state (`crate::qdisc::lazy`); nothing else.
    fn extra_stats_inner(&self, f: &mut dyn FnMut(&'static str, f64)) {
        self.idle.report(f)
    }

    /// O(released): leaves empty for the hold, oldest first (`crate::qdisc::lazy`).
    fn reclaim_idle_inner(&mut self, now: Time, budget: u32) -> u32 {
        let mut n = 0;
        while n < budget {
            let Some(b) = self.idle.pop_due(now.0) else {
                break;
            };
            if let Some(q) = self.boxed.get_mut(b as usize) {
                if q.release_state() {
                    self.idle.on_released(b);
                    n += 1;
                }
            }
        }
        n
    }
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_adopt;
#[cfg(test)]
mod tests_adopt_steps;
#[cfg(test)]
mod tests_burst;
#[cfg(test)]
mod tests_cbr;
#[cfg(test)]
mod tests_fifo;
#[cfg(test)]
mod tests_invariants;
#[cfg(test)]
mod tests_limits;
#[cfg(test)]
mod tests_reshape;
#[cfg(test)]
mod tests_tune;
