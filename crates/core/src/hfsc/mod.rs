//! The Hierarchical Fair Service Curve scheduler (Stoica, Zhang & Ng, "A Hierarchical Fair
//! Service Curve Algorithm for Link-Sharing, Real-Time and Priority Services", SIGCOMM 1997),
//! with Linux's semantics (net/sched/sch_hfsc.c, Patrick McHardy's port of ALTQ) by default and
//! OpenBSD's (sys/net/hfsc.c, Kenjiro Cho's ALTQ code) as named choices ([`HfscParams`]).
//!
//! ## What it promises
//! Each class may have three **service curves** ([`ServiceCurve`], two-piece linear: `m1` for
//! `d`, then `m2`): a **real-time** curve `rt` — a leaf backlogged since `t0` has received at
//! least `rt(t − t0)` by any time `t`, less one maximum-size packet at link rate — whatever its
//! siblings do; a **link-sharing** curve `ls` — the excess is shared among siblings in proportion
//! to their `ls` curves, level by level; an **upper limit** `ul` — a class never gets more than
//! `ul` through link-sharing. A concave `rt` (`m1 > m2`) gives a low delay without a high rate:
//! this decoupling of delay and bandwidth is what HTB and CBQ cannot do.
//!
//! ## State (the paper's symbols)
//! Per class: the cumulative service `c` (`cumul`, bytes sent by the real-time criterion) and
//! `w` (`total`, all bytes sent); runtime curves ([`Runtime`]) for the **deadline** (the `rt`
//! curve anchored where the class last became active, `rtsc_min`), the **eligible** curve (the
//! deadline curve; for a convex `rt` only its linear part), the **virtual** curve (the `ls`
//! curve, giving the virtual time) and the **upper limit**; the eligible time
//! `e = eligible⁻¹(c)`, the deadline `d = deadline⁻¹(c + next packet)`, the virtual time
//! `vt = virtual⁻¹(w)`, the fit time `myf = ulimit⁻¹(w)` and `f = max(myf, min f of children)`.
//! Per inner class: its active children by `vt` (least and largest), and when an upper limit
//! lies below it, by `f` and those that *fit* (`f ≤ now`) by `vt`; `cvtmin` (the least `vt` served in this period) and `cvtoff` (the largest `vt` of a child
//! that went passive).
//!
//! ## Dequeue
//! **Real-time criterion** first: among leaves whose eligible time has come, the one with the
//! smallest deadline is served, and its `c` advances. Otherwise **link-sharing**: from the root,
//! descend to the child with the smallest `vt` among those that fit under their upper limit,
//! down to a leaf. Either way the virtual times of the leaf and its ancestors advance by the
//! packet (`update_vf`). When nothing is eligible and nothing fits: `NotBefore(min(next e, root's
//! min f))`.
//!
//! ## Complexity
//! Every set is an indexed heap (`heap.rs`): the eligible leaves waiting for `e`, the eligible
//! leaves by `d`, per inner class its active children by `vt` in a min-max heap (`minmax.rs`:
//! the least is the link-sharing choice, the largest where a newcomer starts) and, only when
//! one of its children can have an upper limit (`f > 0`), its children by `f` and its fitting
//! children by `vt`, and one heap of non-fitting classes by `f`. Without upper limits below,
//! every child fits, and the one min-max heap stands for the three. Their
//! storage is sized when the tree is built (a parent's heaps hold at most its children), so a
//! packet allocates nothing. A class moves between the waiting and ready heaps once per change
//! of its key (time never goes back: `now` is clamped to the latest seen). So enqueue and
//! dequeue cost O(h log k) for a tree of height `h` and at most `k` active classes in a heap
//! (Linux scans the eligible list for the smallest deadline and the vt tree for the first fit:
//! linear at worst). Curve inversions divide through precomputed reciprocals (`curve.rs`).
//!
//! ## Leaves, and the 2025 stall
//! A leaf's queue is any linkshare discipline ([`LeafSpec`]). A FIFO is inline — its packets in
//! the packet pool HTB uses too (`crate::pool`), its ends in the class record — and peeked; any
//! other leaf's next packet is taken out into a one-packet *head* slot (Linux's
//! `qdisc_peek_dequeued`), so the deadline can use the next packet's length. A leaf is active exactly while it holds a packet,
//! and it becomes passive in one place ([`Hfsc::set_passive`], guarded by its own state): when a
//! child such as FQ-CoDel drops its last packets while asked for the next one, the leaf goes
//! passive once, and its siblings are served (Linux's idempotent `hfsc_qlen_notify` of 2025
//! decremented the parent's active count twice and stalled them, OpenWrt #24277).
//!
//! ## Layout
//! `curve` (service and runtime curves, exact integer arithmetic), `spec` (params, classes,
//! errors), `build`, `sched` (the criteria, `init_ed`/`update_vf`…, the ordered sets), `heap`
//! and `minmax` (the sets' structures), `leafq` (inline FIFOs, boxed leaves, head slots,
//! victims), `burst` (a burst's enqueue, prefetching the records of a large tree), `stats`
//! (views, invariants). The choices against Linux and OpenBSD are documented in docs/hfsc.md.

mod build;
mod burst;
pub mod curve;
mod heap;
mod leafq;
mod minmax;
mod sched;
mod spec;
mod stats;

pub use curve::{Runtime, ServiceCurve};
pub use spec::*;
pub use stats::{HfscClassState, HfscClassView};

use heap::{Entry, Row, OUT, SLOTS};

use crate::classify::{ClassId, Classifier};
use crate::packet::Packet;
use crate::pool::{LeafQ, Pool};
use crate::qdisc::fifo::FifoLimit;
use crate::qdisc::{Books, ClassView, Counter, Dequeued, Discipline, Dropped, Qdisc};
use crate::units::Time;

const NIL: u32 = u32::MAX;

/// The qdisc-wide heaps (`Hfsc::glob`).
const WAIT: usize = 0;
const READY: usize = 1;
const UNFIT: usize = 2;

/// What a class queues in. A FIFO's packets are in [`Hfsc::pool`] and its ends and limit in the
/// class record ([`Class::q`], [`Class::limit`]), so that a packet into a FIFO leaf reads no
/// other per-leaf memory.
enum Leaf<P> {
    Inner,
    Fifo(FifoLimit),
    /// Any other qdisc, and its next packet once taken out (see the module docs).
    Boxed {
        q: Box<dyn Qdisc<P>>,
        head: Option<P>,
    },
}

/// How a class queues, as the hot path needs to know it.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Kind {
    Inner,
    /// An inline FIFO limited in packets (`Pfifo`) or bytes (`Bfifo`) to [`Class::limit`].
    Pfifo,
    Bfifo,
    /// A boxed qdisc in [`Hfsc::leaves`].
    Boxed,
}

/// The scheduling state of a class that a packet touches, in three parts in this order: what
/// only a leaf reads (its queue and the real-time criterion's state), what every class reads
/// (link-sharing), what only a parent reads (its children's heaps, `cvtmin`, `cvtoff`). So a
/// leaf touches the first six cache lines and a parent the last five (checked below), not
/// the whole record each. What only upper limits, OpenBSD's periods and statistics read is in
/// [`Cold`], and a boxed leaf's qdisc is in [`Hfsc::leaves`]. At 64k classes the tree does not
/// fit in the caches, and each class a packet touches costs a miss per cache line.
#[repr(C, align(64))]
struct Class {
    // ---- leaves ----
    /// An inline FIFO's ends, length and bytes (its packets in [`Hfsc::pool`]), and its limit.
    q: LeafQ,
    limit: u32,
    /// Filed in the real-time sets, and whether in the ready set.
    el_on: bool,
    el_ready: bool,
    rsc: Option<ServiceCurve>,
    deadline: Runtime,
    /// `c`: bytes served by the real-time criterion.
    cumul: u64,
    e: u64,
    d: u64,
    /// The keys it is filed under in the real-time sets.
    key_e: u64,
    key_d: u64,
    rt_sent: Counter,
    // ---- every class ----
    parent: u32,
    /// Active children (leaves: 1 while active for link-sharing).
    nactive: u32,
    kind: Kind,
    /// Filed in its parent's fitting heap (else in the qdisc-wide unfit one).
    fit: bool,
    /// It has an upper limit (`Cold::usc`).
    ul: bool,
    /// Whether one of its children has an upper limit below it: only then is its `CF` heap kept.
    cf_used: bool,
    fsc: Option<ServiceCurve>,
    virt: Runtime,
    /// `w`: all bytes served (the subtree's, for inner classes).
    total: u64,
    vt: u64,
    vtadj: u64,
    vtperiod: u64,
    parentperiod: u64,
    f: u64,
    myf: u64,
    cfmin: u64,
    /// The keys it is filed under in its parent's sets.
    key_vt: u64,
    key_f: u64,
    sent: Counter,
    // ---- parents ----
    /// Its children's heaps: the segment `base..base + nkids` of the slab, and their lengths
    /// (`heap::VT`, `CF`, `FIT`). `nkids` is 0 for leaves.
    base: u32,
    nkids: u32,
    klen: [u32; 3],
    cvtmin: u64,
    /// Linux: the largest `vt` of a child gone passive. OpenBSD: the sum of the periods' offsets.
    cvtoff: u64,
}

/// Where a leaf's part ends and where a parent's begins (the start of the shared part).
const LEAF_END: usize = std::mem::offset_of!(Class, base);
const PARENT_START: usize = std::mem::offset_of!(Class, parent);
const _: () =
    assert!(LEAF_END <= 6 * 64 && std::mem::size_of::<Class>() - PARENT_START / 64 * 64 <= 5 * 64);

/// What a packet does not touch unless the class has an upper limit or OpenBSD's semantics are
/// on, and what only statistics read.
struct Cold {
    name: String,
    level: u8,
    usc: Option<ServiceCurve>,
    ulimit: Runtime,
    myfadj: u64,
    /// OpenBSD's curve offset of the current period, and the parent's offset it was taken from.
    vtoff: u64,
    pcvtoff: u64,
    /// OpenBSD: the largest `vt` of a child gone passive in this period.
    cvtmax: u64,
    /// Whether this class or one below it has an upper limit (else its `f` is always 0).
    has_ul: bool,
    drops: u64,
    marks_seen: u64,
}

impl Class {
    /// The eligible curve: the deadline curve, or for a convex `rt` only its `m2` slope (Linux
    /// keeps it as a copy made in `init_ed`, where the deadline curve alone changes).
    fn eligible(&self) -> Runtime {
        match self.rsc {
            Some(r) if r.is_convex() => self.deadline.linear_part(),
            _ => self.deadline,
        }
    }
}

/// The HFSC qdisc. See the module documentation.
pub struct Hfsc<P: Packet> {
    params: HfscParams,
    /// The classes by id, then the root (index `root`): their hot state, their cold state, their
    /// queues ([`Leaf::Inner`] for inner classes).
    classes: Vec<Class>,
    cold: Vec<Cold>,
    leaves: Vec<Leaf<P>>,
    /// The packets of every FIFO leaf (`crate::pool`, as HTB keeps them).
    pool: Pool<P>,
    root: u32,
    /// Parents before children (ids of the given classes).
    order: Vec<u32>,
    /// Per parent, its active children: by `vt` in a min-max heap (the largest is Linux's
    /// `vt_tree` last; the least the link-sharing choice when nothing below has an upper
    /// limit), and only when `cf_used`: by `f` (Linux's `cf_tree`: the first gives `cfmin`) and
    /// those with `f ≤ now` by `vt` (the link-sharing choice is the first). The three side by side in one
    /// slab, a parent's segment sized to its children (`heap.rs`).
    slab: Vec<Row>,
    /// Qdisc-wide: leaves not yet eligible by `e` (`WAIT`), eligible leaves by `d` (`READY`),
    /// active classes that do not fit (`f > now`) by `f` (`UNFIT`); one row per class.
    glob: Vec<Row>,
    glen: [u32; 3],
    /// Where each class stands in each heap (`heap::VT`…), or [`heap::OUT`].
    pos: Vec<[u32; SLOTS]>,
    /// The latest `now` seen (time never goes back inside).
    clock: u64,
    classifier: Classifier,
    default: u32,
    books: Books<P>,
    /// Packets served by each criterion.
    rt_packets: u64,
    ls_packets: u64,
}

impl<P: Packet> Hfsc<P> {
    /// Index of the class with this name.
    pub fn class_id(&self, name: &str) -> Option<ClassId> {
        self.cold[..self.root as usize]
            .iter()
            .position(|c| c.name == name)
            .map(|i| i as ClassId)
    }

    /// Name of a class.
    pub fn class_name(&self, id: ClassId) -> Option<&str> {
        (id < self.root).then(|| self.cold[id as usize].name.as_str())
    }

    /// Number of classes (the root not counted).
    pub fn len(&self) -> usize {
        self.root as usize
    }

    pub fn is_empty(&self) -> bool {
        self.root == 0
    }

    pub fn params(&self) -> &HfscParams {
        &self.params
    }

    pub fn classifier(&self) -> &Classifier {
        &self.classifier
    }

    /// Bytes and packets a class sent (inner classes: their subtree), and of those, what the
    /// real-time criterion sent.
    pub fn class_sent(&self, id: ClassId) -> Option<(Counter, Counter)> {
        (id < self.root).then(|| {
            let c = &self.classes[id as usize];
            (c.sent, c.rt_sent)
        })
    }

    /// Enqueue into a given leaf class, bypassing the classifier (an inner or unknown id goes to
    /// the default class). O(h log n).
    pub fn enqueue_to(&mut self, class: ClassId, pkt: P, now: Time) -> Result<(), Dropped<P>> {
        let len = pkt.len();
        self.books.offer(len);
        let r = self.enqueue_class(class, pkt, now);
        self.books.settle(len, &r);
        r
    }
}

impl<P: Packet> Discipline<P> for Hfsc<P> {
    fn books(&self) -> &Books<P> {
        &self.books
    }
    fn books_mut(&mut self) -> &mut Books<P> {
        &mut self.books
    }

    fn enqueue_inner(&mut self, pkt: P, now: Time) -> Result<(), Dropped<P>> {
        let c = self.classifier.classify(pkt.meta());
        self.enqueue_class(c, pkt, now)
    }

    fn dequeue_inner(&mut self, now: Time) -> Dequeued<P> {
        self.serve(now)
    }

    fn drain_inner(&mut self, now: Time) -> Vec<P> {
        let mut out = Vec::new();
        for &c in &self.order.clone() {
            out.extend(self.drain_leaf(c, now));
        }
        self.reset_activity();
        out
    }

    fn kind_inner(&self) -> &'static str {
        "hfsc"
    }

    fn as_any_inner(&mut self) -> Option<&mut dyn std::any::Any> {
        Some(self)
    }

    fn extra_stats_inner(&self, f: &mut dyn FnMut(&'static str, f64)) {
        f("rt_packets", self.rt_packets as f64);
        f("ls_packets", self.ls_packets as f64);
        f(
            "eligible_classes",
            (self.glen[WAIT] + self.glen[READY]) as f64,
        );
        f("unfit_classes", self.glen[UNFIT] as f64);
    }

    fn visit_classes_inner(&self, f: &mut dyn FnMut(&ClassView<'_>)) {
        self.visit(f)
    }
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_figures;
