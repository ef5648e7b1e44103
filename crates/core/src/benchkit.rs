//! Scheduler benchmark kit: trees shaped like DPDK's `librte_sched` and a driver that moves
//! packets through them with a fake clock, shared by `linkshare bench sched` and the criterion
//! benches in `crates/core/benches/`.
//!
//! ## What is measured, and why this way
//! DPDK's `librte_sched` is the reference software hierarchical scheduler: port → subports →
//! pipes → 16 queues per pipe (12 strict-priority traffic classes of one queue and a best-effort
//! class of 4 WRR queues; DPDK 22.11 `lib/sched/rte_sched.h`). The anchor bench
//! (`../shared/anchors/dpdk-sched-bench/sched_bench.c`) configures every level at the port rate
//! (10 Gbit/s, 16 MB buckets) so that shaping never binds, tags each packet to a queue in order
//! (`rr`) or uniformly at random (`rand`, a 2²⁰-entry xorshift64* sequence), and loops: enqueue a
//! burst of `k` packets, dequeue up to `k`. With `backlog b` every queue first gets `b` packets
//! that stay queued, so the scheduler always has all queues active.
//!
//! [`SchedBench`] does the same with linkshare's classes: a root at the port rate, `levels − 2`
//! levels of inner classes (the first has `subports` classes), pipes of 16 leaves, every class at
//! rate = ceil = the port rate, leaves with a 64-packet tail-drop FIFO (DPDK's `qsize`). The fake
//! clock advances by one 64-byte packet time at the port rate (rounded up to whole nanoseconds)
//! per packet dequeued, so no class ever runs out of tokens — the root is never the limit, as in
//! DPDK's bench. Nothing here reads a clock: the caller times [`SchedBench::run`].
//!
//! Packets are [`BenchPacket`]s: a length and a handle (8 bytes), as DPDK moves 8-byte mbuf
//! pointers; their [`Packet::meta`] is one shared, unused header. Where each packet goes is read
//! from a sequence computed before timing, in order, as DPDK's bench reads its tags: the
//! sequence holds the leaves' class ids themselves, so the driver does no lookup of its own per
//! packet (a table from leaf number to class id would be a random read of 4 bytes × leaves —
//! 4 MB at a million leaves — that DPDK's side, which packs the tag into the mbuf with
//! arithmetic, does not pay).

use std::net::{IpAddr, Ipv4Addr};

use crate::cbq::{Cbq, CbqClassSpec, CbqError, CbqParams};
use crate::classify::{ClassId, Classifier};
use crate::hfsc::{Hfsc, HfscClassSpec, HfscError, HfscParams, ServiceCurve};
use crate::htb::{Htb, HtbClassSpec, HtbError, HtbParams};
use crate::packet::{Fragment, Packet, PacketMeta, L3};
use crate::qdisc::fifo::FifoLimit;
use crate::qdisc::fq_codel::{FqCodel, FqCodelParams};
use crate::qdisc::leaf::LeafSpec;
use crate::qdisc::{Dequeued, Dropped, Qdisc};
use crate::shard::Shard;
use crate::units::{Rate, Time};

/// DPDK bench's port rate: 1.25 GB/s.
pub const PORT_RATE: Rate = Rate(10_000_000_000);
/// Leaf queues per pipe (`RTE_SCHED_QUEUES_PER_PIPE`).
pub const QUEUES_PER_PIPE: u32 = 16;
/// Packet size of the bench.
pub const PKT_LEN: u32 = 64;
/// Leaf queue limit in packets (the DPDK bench's `qsize`).
pub const LEAF_LIMIT: u32 = 64;
/// Length of the random tag sequence (as DPDK's bench: 2²⁰).
const RANDOM_SEQ: usize = 1 << 20;

static META: PacketMeta = PacketMeta {
    len: PKT_LEN,
    l3: L3::Ipv4,
    tos: 0,
    proto: 0,
    src: IpAddr::V4(Ipv4Addr::UNSPECIFIED),
    dst: IpAddr::V4(Ipv4Addr::UNSPECIFIED),
    src_port: 0,
    dst_port: 0,
    frag: Fragment::None,
    vlan: None,
    flow_hash: 0,
    issue: None,
    l3_offset: 0,
};

/// An 8-byte packet handle: accounted length and an id (as an mbuf pointer in DPDK).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct BenchPacket {
    pub len: u32,
    pub id: u32,
}

impl Packet for BenchPacket {
    fn meta(&self) -> &PacketMeta {
        &META
    }
    fn len(&self) -> u32 {
        self.len
    }
}

/// Which scheduler to build.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum SchedKind {
    Htb,
    Cbq,
}

/// How leaves are picked for successive packets.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Pattern {
    /// Uniformly at random (fixed seed): every packet likely touches cold class state.
    Random,
    /// In order, pipe varying fastest (as DPDK's `rr`).
    RoundRobin,
}

/// The shape of the tree.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Shape {
    /// Class levels below the root (1: root → leaves; 2: root → pipes → leaves; 3: root →
    /// subports → pipes → leaves; more: extra inner levels between subports and pipes).
    pub levels: u32,
    /// Leaf queues.
    pub leaves: u32,
    /// Classes on the first level below the root when `levels ≥ 3`.
    pub subports: u32,
}

/// Parent of every class (index = class id, 0 = root) and which are leaves, in leaf order.
#[derive(Clone, Debug, Default)]
pub struct Layout {
    pub parent: Vec<Option<u32>>,
    /// Leaf class ids; leaf `i` is queue `i % 16` of pipe `i / 16`.
    pub leaves: Vec<u32>,
    /// DRR/strict priority of each class (leaves: queue slot mapped onto 0..=7).
    pub prio: Vec<u8>,
}

impl Shape {
    /// The class tree, parents before children.
    pub fn layout(&self) -> Result<Layout, String> {
        let levels = self.levels;
        if !(1..=6).contains(&levels) {
            return Err(format!("levels must be 1..=6, got {levels}"));
        }
        if self.leaves == 0 {
            return Err("leaves must be at least 1".into());
        }
        let mut lay = Layout::default();
        lay.parent.push(None);
        lay.prio.push(0);
        // Counts of inner levels below the root, top first, ending with the pipes.
        let mut counts: Vec<u32> = Vec::new();
        if levels >= 2 {
            let pipes = self.leaves.div_ceil(QUEUES_PER_PIPE);
            let m = levels - 2; // inner levels above the pipes
            let s = self.subports.clamp(1, pipes) as f64;
            for k in 0..m {
                let c = if m == 1 {
                    s
                } else {
                    s * (pipes as f64 / s).powf(k as f64 / (m - 1) as f64)
                };
                counts.push((c.round() as u32).clamp(1, pipes));
            }
            counts.push(pipes);
        }
        // Build level by level; children of a level are spread over its classes in blocks.
        let mut above: Vec<u32> = vec![0];
        for &c in &counts {
            let first = lay.parent.len() as u32;
            for i in 0..c as u64 {
                let p = above[(i * above.len() as u64 / c as u64) as usize];
                lay.parent.push(Some(p));
                lay.prio.push(0);
            }
            above = (first..first + c).collect();
        }
        let n = self.leaves as u64;
        for i in 0..n {
            let p = if levels == 1 {
                0
            } else {
                above[(i / QUEUES_PER_PIPE as u64) as usize]
            };
            lay.leaves.push(lay.parent.len() as u32);
            lay.parent.push(Some(p));
            lay.prio.push(((i % QUEUES_PER_PIPE as u64) as u8).min(7));
        }
        Ok(lay)
    }
}

/// Class names are not needed by the bench; one short name each keeps the build cheap.
fn class_name(c: usize) -> String {
    format!("c{c}")
}

/// The class specs of an HTB tree of `shape` (every class at rate = ceil = [`PORT_RATE`]) and its
/// leaves; [`build_htb`] builds it whole, `linkshare bench sched --workers` cuts it into shards.
pub fn htb_specs(shape: &Shape) -> Result<(Vec<HtbClassSpec<BenchPacket>>, Vec<ClassId>), String> {
    htb_specs_with(shape, &|| {
        Ok(LeafSpec::Fifo(FifoLimit::Packets(LEAF_LIMIT)))
    })
}

/// [`htb_specs`] with the queue of every class made by `leaf` (`bench sched --leaf`: the
/// per-packet cost of a leaf discipline inside the tree).
pub fn htb_specs_with(
    shape: &Shape,
    leaf: &dyn Fn() -> Result<LeafSpec<BenchPacket>, String>,
) -> Result<(Vec<HtbClassSpec<BenchPacket>>, Vec<ClassId>), String> {
    let lay = shape.layout()?;
    let params = HtbParams::default();
    let specs = lay
        .parent
        .iter()
        .enumerate()
        .map(|(c, &p)| {
            let mut s = HtbClassSpec::new(&class_name(c), p, PORT_RATE, PORT_RATE, &params);
            s.prio = lay.prio[c];
            s.leaf = leaf()?;
            Ok(s)
        })
        .collect::<Result<_, String>>()?;
    Ok((specs, lay.leaves))
}

/// An HTB tree of `shape`: every class at rate = ceil = [`PORT_RATE`].
pub fn build_htb(shape: &Shape) -> Result<(Htb<BenchPacket>, Vec<ClassId>), String> {
    build_htb_with(shape, &|| {
        Ok(LeafSpec::Fifo(FifoLimit::Packets(LEAF_LIMIT)))
    })
}

/// [`build_htb`] with the queue of every class made by `leaf`.
pub fn build_htb_with(
    shape: &Shape,
    leaf: &dyn Fn() -> Result<LeafSpec<BenchPacket>, String>,
) -> Result<(Htb<BenchPacket>, Vec<ClassId>), String> {
    let params = HtbParams::default();
    let (specs, leaves) = htb_specs_with(shape, leaf)?;
    let default = leaves.first().copied().ok_or("no leaves")?;
    let htb = Htb::new(params, specs, Classifier::new(vec![], default))
        .map_err(|e: HtbError| e.to_string())?;
    Ok((htb, leaves))
}

/// The queue at each leaf of a bench tree.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum BenchLeaf {
    /// A [`LEAF_LIMIT`]-packet pfifo, inline (DPDK's queues).
    Fifo,
    /// fq_codel with Linux's defaults (1,024 flows), as `import libreqos` writes per circuit.
    FqCodel,
    /// CAKE with its defaults (unlimited, diffserv3, triple-isolate).
    Cake,
}

impl BenchLeaf {
    /// A fresh queue of this kind.
    pub fn spec(self) -> Result<LeafSpec<BenchPacket>, String> {
        Ok(match self {
            BenchLeaf::Fifo => LeafSpec::Fifo(FifoLimit::Packets(LEAF_LIMIT)),
            BenchLeaf::FqCodel => LeafSpec::Qdisc(Box::new(
                FqCodel::new(FqCodelParams::default()).map_err(|e| e.to_string())?,
            )),
            BenchLeaf::Cake => LeafSpec::Qdisc(Box::new(
                crate::qdisc::cake::Cake::new(crate::qdisc::cake::CakeParams::default())
                    .map_err(|e| e.to_string())?,
            )),
        })
    }
}

/// A CBQ tree of `shape` on a [`PORT_RATE`] link: every class gets an equal share of its
/// parent's allocation and may borrow (CBQ refuses children that sum above their parent).
pub fn build_cbq(shape: &Shape) -> Result<(Cbq<BenchPacket>, Vec<ClassId>), String> {
    let lay = shape.layout()?;
    let params = CbqParams::new(PORT_RATE);
    // CBQ checks that children's allocations fit their parent's: each class gets an equal share
    // of its parent's and borrows the rest (parents come before children in the layout).
    let mut kids = vec![0u64; lay.parent.len()];
    for p in lay.parent.iter().flatten() {
        kids[*p as usize] += 1;
    }
    let mut rate = vec![PORT_RATE.0; lay.parent.len()];
    for c in 1..lay.parent.len() {
        if let Some(p) = lay.parent[c] {
            rate[c] = (rate[p as usize] / kids[p as usize].max(1)).max(1);
        }
    }
    let specs = lay
        .parent
        .iter()
        .enumerate()
        .map(|(c, &p)| {
            let mut s = CbqClassSpec::new(&class_name(c), p, Rate(rate[c]), &params);
            s.prio = lay.prio[c];
            s.options.borrow = true;
            s.leaf = LeafSpec::Fifo(FifoLimit::Packets(LEAF_LIMIT));
            s
        })
        .collect();
    let default = lay.leaves[0];
    let cbq = Cbq::new(params, specs, Classifier::new(vec![], default))
        .map_err(|e: CbqError| e.to_string())?;
    Ok((cbq, lay.leaves))
}

/// An HFSC tree of `shape` on a [`PORT_RATE`] link: every class a linear `ls` of an equal share
/// of its parent's (the root class the port rate), and every leaf also a linear `rt` of half its
/// share, so that both criteria run. No class has an upper limit, as no HTB class of the bench is
/// ever held by its ceil: the bench's clock stands still during a burst of dequeues, and an HFSC
/// `ul` (which, unlike HTB's ceil, has no burst allowance) re-anchored at the standing clock
/// holds its class after one packet — at the port rate it made 99.6 % of the dequeue calls end
/// in `NotBefore`, measuring the throttle rather than the scheduler.
pub fn build_hfsc(shape: &Shape) -> Result<(Hfsc<BenchPacket>, Vec<ClassId>), String> {
    build_hfsc_with(shape, false)
}

/// [`build_hfsc`], with `top_ul` an upper limit of [`PORT_RATE`] on the top class: the
/// upper-limit path (fit times, the parents' fit-time heaps, the qdisc-wide unfit heap) on every
/// packet. Bench it with a burst of 1, so that the clock advances by one packet time at
/// [`PORT_RATE`] (rounded up) between dequeues and the limit never holds the tree.
pub fn build_hfsc_with(
    shape: &Shape,
    top_ul: bool,
) -> Result<(Hfsc<BenchPacket>, Vec<ClassId>), String> {
    let lay = shape.layout()?;
    let mut kids = vec![0u64; lay.parent.len()];
    for p in lay.parent.iter().flatten() {
        kids[*p as usize] += 1;
    }
    let mut rate = vec![PORT_RATE.0; lay.parent.len()];
    for c in 1..lay.parent.len() {
        if let Some(p) = lay.parent[c] {
            rate[c] = (rate[p as usize] / kids[p as usize].max(1)).max(1);
        }
    }
    let specs = lay
        .parent
        .iter()
        .enumerate()
        .map(|(c, &p)| {
            let mut s = HfscClassSpec::new(&class_name(c), p, ServiceCurve::rate(rate[c]));
            if kids[c] == 0 {
                s.rt = Some(ServiceCurve::rate((rate[c] / 2).max(1)));
            }
            if top_ul && p.is_none() {
                s.ul = Some(ServiceCurve::rate(PORT_RATE.0));
            }
            s.leaf = LeafSpec::Fifo(FifoLimit::Packets(LEAF_LIMIT));
            s
        })
        .collect();
    let default = lay.leaves[0];
    let q = Hfsc::new(
        HfscParams::default(),
        specs,
        Classifier::new(vec![], default),
    )
    .map_err(|e: HfscError| e.to_string())?;
    Ok((q, lay.leaves))
}

/// A scheduler the bench can drive: a qdisc with enqueue to a given leaf.
pub trait LeafSched: Qdisc<BenchPacket> {
    fn enqueue_leaf(
        &mut self,
        leaf: ClassId,
        pkt: BenchPacket,
        now: Time,
    ) -> Result<(), Dropped<BenchPacket>>;
    /// Heap bytes of the scheduler's own structures, if it can tell.
    fn memory_bytes(&self) -> Option<usize> {
        None
    }
    /// [`Self::memory_bytes`] by part, if it can tell.
    fn memory_parts(&self) -> Vec<(&'static str, usize)> {
        Vec::new()
    }
    /// Packet `i` into leaf `leaves[i]`, leaving `pkts` empty; refused ones into `refused`.
    fn enqueue_leaf_burst(
        &mut self,
        leaves: &[ClassId],
        pkts: &mut Vec<BenchPacket>,
        now: Time,
        refused: &mut Vec<Dropped<BenchPacket>>,
    ) -> usize {
        let mut ok = 0;
        for (&l, p) in leaves.iter().zip(pkts.drain(..)) {
            match self.enqueue_leaf(l, p, now) {
                Ok(()) => ok += 1,
                Err(d) => refused.push(d),
            }
        }
        ok
    }
}

impl LeafSched for Htb<BenchPacket> {
    #[inline]
    fn enqueue_leaf(
        &mut self,
        leaf: ClassId,
        pkt: BenchPacket,
        now: Time,
    ) -> Result<(), Dropped<BenchPacket>> {
        self.enqueue_to(leaf, pkt, now)
    }
    fn memory_bytes(&self) -> Option<usize> {
        Some(Htb::memory_bytes(self))
    }
    fn memory_parts(&self) -> Vec<(&'static str, usize)> {
        Htb::memory_parts(self)
    }
    fn enqueue_leaf_burst(
        &mut self,
        leaves: &[ClassId],
        pkts: &mut Vec<BenchPacket>,
        now: Time,
        refused: &mut Vec<Dropped<BenchPacket>>,
    ) -> usize {
        self.enqueue_burst_to(leaves, pkts, now, refused)
    }
}

/// A shard of a sharded HTB (`bench sched --workers`): leaves are local class ids.
impl LeafSched for Shard<BenchPacket> {
    #[inline]
    fn enqueue_leaf(
        &mut self,
        leaf: ClassId,
        pkt: BenchPacket,
        now: Time,
    ) -> Result<(), Dropped<BenchPacket>> {
        self.enqueue_to(leaf, pkt, now)
    }
    fn memory_bytes(&self) -> Option<usize> {
        Some(self.htb().memory_bytes())
    }
    fn enqueue_leaf_burst(
        &mut self,
        leaves: &[ClassId],
        pkts: &mut Vec<BenchPacket>,
        now: Time,
        refused: &mut Vec<Dropped<BenchPacket>>,
    ) -> usize {
        self.enqueue_burst_to(leaves, pkts, now, refused)
    }
}

impl LeafSched for Hfsc<BenchPacket> {
    #[inline]
    fn enqueue_leaf(
        &mut self,
        leaf: ClassId,
        pkt: BenchPacket,
        now: Time,
    ) -> Result<(), Dropped<BenchPacket>> {
        self.enqueue_to(leaf, pkt, now)
    }
    fn memory_bytes(&self) -> Option<usize> {
        Some(Hfsc::memory_bytes(self))
    }
    fn enqueue_leaf_burst(
        &mut self,
        leaves: &[ClassId],
        pkts: &mut Vec<BenchPacket>,
        now: Time,
        refused: &mut Vec<Dropped<BenchPacket>>,
    ) -> usize {
        self.enqueue_burst_to(leaves, pkts, now, refused)
    }
}

impl LeafSched for Cbq<BenchPacket> {
    #[inline]
    fn enqueue_leaf(
        &mut self,
        leaf: ClassId,
        pkt: BenchPacket,
        now: Time,
    ) -> Result<(), Dropped<BenchPacket>> {
        self.enqueue_to(leaf, pkt, now)
    }
}

/// Counters of a run.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct RunCounts {
    /// Packets dequeued (the figure Mpps is computed from).
    pub dequeued: u64,
    /// Packets offered to enqueue.
    pub offered: u64,
    /// Packets refused by enqueue.
    pub refused: u64,
    /// Loop iterations (one burst each).
    pub iterations: u64,
    /// Dequeue calls that did not yield a packet (throttled or empty) before the burst was done.
    pub short: u64,
}

/// The driver: a scheduler, its leaves, the tag sequence, the packets not in the scheduler, and
/// the fake clock.
pub struct SchedBench<Q: LeafSched> {
    pub sched: Q,
    pub leaves: Vec<ClassId>,
    /// The leaf of each successive packet ([`tag_sequence`] mapped to class ids once).
    tags: Vec<ClassId>,
    pos: usize,
    burst: u32,
    /// Packets outside the scheduler (DPDK's free stack).
    free: Vec<BenchPacket>,
    /// Scratch for one burst: its leaves, its packets, what was refused.
    burst_leaves: Vec<ClassId>,
    burst_pkts: Vec<BenchPacket>,
    refused: Vec<Dropped<BenchPacket>>,
    now: u64,
    tx_ns: u64,
}

/// xorshift64*, as DPDK's bench.
fn xorshift(s: &mut u64) -> u64 {
    let mut x = *s;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *s = x;
    x.wrapping_mul(0x2545_F491_4F6C_DD1D)
}

/// The leaf index (in leaf order) of each successive packet.
pub fn tag_sequence(leaves: u32, pattern: Pattern) -> Vec<u32> {
    match pattern {
        Pattern::RoundRobin => {
            // Pipe varies fastest: consecutive packets hit different pipes.
            let pipes = leaves.div_ceil(QUEUES_PER_PIPE);
            (0..pipes * QUEUES_PER_PIPE)
                .map(|i| (i % pipes) * QUEUES_PER_PIPE + i / pipes)
                .filter(|&l| l < leaves)
                .collect()
        }
        Pattern::Random => {
            let mut s = 0x9E37_79B9_7F4A_7C15u64 ^ leaves as u64;
            (0..RANDOM_SEQ)
                .map(|_| (((xorshift(&mut s) >> 32) * leaves as u64) >> 32) as u32)
                .collect()
        }
    }
}

impl<Q: LeafSched> SchedBench<Q> {
    /// Prepare a run: `backlog` packets standing in every leaf (enqueued now, untimed), and
    /// `burst` packets to cycle.
    pub fn new(
        sched: Q,
        leaves: Vec<ClassId>,
        pattern: Pattern,
        backlog: u32,
        burst: u32,
    ) -> Result<Self, String> {
        if burst == 0 {
            return Err("burst must be at least 1".into());
        }
        if backlog >= LEAF_LIMIT {
            return Err(format!("backlog must be below the leaf limit {LEAF_LIMIT}"));
        }
        let tags: Vec<ClassId> = tag_sequence(leaves.len() as u32, pattern)
            .into_iter()
            .filter_map(|t| leaves.get(t as usize).copied())
            .collect();
        if tags.is_empty() {
            return Err("no leaf to send to".into());
        }
        let tx_ns = PORT_RATE.tx_time(PKT_LEN as u64).map(|d| d.0).unwrap_or(1);
        let mut b = SchedBench {
            sched,
            leaves,
            tags,
            pos: 0,
            burst,
            free: Vec::new(),
            burst_leaves: Vec::with_capacity(burst as usize),
            burst_pkts: Vec::with_capacity(burst as usize),
            refused: Vec::new(),
            now: 0,
            tx_ns,
        };
        let mut id = 0u32;
        for _ in 0..backlog {
            for i in 0..b.leaves.len() {
                let pkt = BenchPacket { len: PKT_LEN, id };
                id = id.wrapping_add(1);
                if let Err(d) = b.sched.enqueue_leaf(b.leaves[i], pkt, Time(0)) {
                    return Err(format!("standing backlog refused: {:?}", d.reason));
                }
            }
        }
        for _ in 0..burst {
            b.free.push(BenchPacket { len: PKT_LEN, id });
            id = id.wrapping_add(1);
        }
        Ok(b)
    }

    /// Move at least `packets` packets through the scheduler (whole bursts): enqueue up to
    /// `burst` free packets to the next leaves of the sequence, then dequeue up to `burst`.
    pub fn run(&mut self, packets: u64) -> RunCounts {
        let mut c = RunCounts::default();
        while c.dequeued < packets {
            let k = (self.burst as usize).min(self.free.len());
            let now = Time(self.now);
            self.burst_leaves.clear();
            for _ in 0..k {
                let Some(pkt) = self.free.pop() else { break };
                self.burst_leaves.push(self.tags[self.pos]);
                self.burst_pkts.push(pkt);
                self.pos += 1;
                if self.pos == self.tags.len() {
                    self.pos = 0;
                }
            }
            c.offered += self.burst_pkts.len() as u64;
            self.sched.enqueue_leaf_burst(
                &self.burst_leaves,
                &mut self.burst_pkts,
                now,
                &mut self.refused,
            );
            for d in self.refused.drain(..) {
                c.refused += 1;
                self.free.push(d.packet);
            }
            match self
                .sched
                .dequeue_burst(now, self.burst as usize, &mut self.free)
            {
                Dequeued::Packet(n) => {
                    self.now += self.tx_ns * n as u64;
                    c.dequeued += n as u64;
                    if n < self.burst as usize {
                        c.short += 1;
                    }
                }
                Dequeued::NotBefore(t) => {
                    c.short += 1;
                    self.now = t.0.max(self.now + 1);
                }
                Dequeued::Empty => c.short += 1,
            }
            c.iterations += 1;
            if k == 0 && self.free.len() == self.burst as usize && c.dequeued == 0 {
                break;
            }
        }
        c
    }

    /// The fake clock, ns.
    /// Advance the fake clock by `ns` per packet dequeued instead of one packet time at
    /// [`PORT_RATE`]: a worker of `N` that owns `1/N` of the port steps `N` packet times.
    pub fn set_clock_step(&mut self, ns: u64) {
        self.tx_ns = ns.max(1);
    }

    /// The fake clock's step per packet, ns.
    pub fn clock_step(&self) -> u64 {
        self.tx_ns
    }

    pub fn now(&self) -> u64 {
        self.now
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_matches_librte_sched_shape() {
        let s = Shape {
            levels: 3,
            leaves: 64,
            subports: 2,
        };
        let lay = s.layout().unwrap();
        // root + 2 subports + 4 pipes + 64 leaves
        assert_eq!(lay.parent.len(), 1 + 2 + 4 + 64);
        assert_eq!(lay.leaves.len(), 64);
        // leaf 17 is queue 1 of pipe 1 (class 4), which hangs off subport 1 (class 1).
        assert_eq!(lay.parent[lay.leaves[17] as usize], Some(4));
        assert_eq!(lay.parent[4], Some(1));
        assert_eq!(lay.prio[lay.leaves[17] as usize], 1);
    }

    #[test]
    fn hfsc_upper_limit_bench_is_never_held_with_an_advancing_clock() {
        // The top class limited to the port rate; a burst of 1 advances the clock by a packet
        // time (rounded up) between dequeues, so the limit is exercised and never binds.
        let shape = Shape {
            levels: 3,
            leaves: 300,
            subports: 3,
        };
        let (q, leaves) = build_hfsc_with(&shape, true).unwrap();
        let mut b = SchedBench::new(q, leaves, Pattern::Random, 1, 1).unwrap();
        let c = b.run(10_000);
        assert!(c.dequeued >= 10_000);
        assert_eq!((c.refused, c.short), (0, 0));
        assert_eq!(b.sched.stats().backlog.packets, 300);
        b.sched.check_invariants().unwrap();
    }

    #[test]
    fn runs_conserve_packets_and_never_throttle() {
        for (levels, backlog) in [(1, 0), (3, 1), (4, 2)] {
            let shape = Shape {
                levels,
                leaves: 300,
                subports: 3,
            };
            let (htb, leaves) = build_htb(&shape).unwrap();
            let mut b = SchedBench::new(htb, leaves, Pattern::Random, backlog, 32).unwrap();
            let c = b.run(10_000);
            assert!(c.dequeued >= 10_000);
            assert_eq!(c.refused, 0);
            assert_eq!(c.short, 0, "the root must never be the limit");
            let st = b.sched.stats();
            assert_eq!(st.backlog.packets, 300 * backlog as u64);
            st.check_conservation().unwrap();
            b.sched.check_invariants().unwrap();
        }
    }

    #[test]
    fn burst_api_is_the_per_packet_api() {
        // The same packets through HTB's burst calls and one by one: same departures, same counters.
        let shape = Shape {
            levels: 3,
            leaves: 200,
            subports: 2,
        };
        let (mut a, leaves) = build_htb(&shape).unwrap();
        let (mut b, _) = build_htb(&shape).unwrap();
        let seq = tag_sequence(200, Pattern::Random);
        let (mut out_a, mut out_b) = (Vec::new(), Vec::new());
        let mut refused = Vec::new();
        for round in 0..50u32 {
            let now = Time(round as u64 * 10_000);
            let ids: Vec<u32> = (0..24).map(|i| round * 24 + i).collect();
            let cls: Vec<ClassId> = ids
                .iter()
                .map(|&i| leaves[seq[i as usize] as usize])
                .collect();
            let mut pkts: Vec<BenchPacket> =
                ids.iter().map(|&id| BenchPacket { len: 64, id }).collect();
            a.enqueue_burst_to(&cls, &mut pkts, now, &mut refused);
            assert!(pkts.is_empty());
            for (&c, &id) in cls.iter().zip(&ids) {
                b.enqueue_to(c, BenchPacket { len: 64, id }, now).unwrap();
            }
            let got = a.dequeue_burst(now, 16, &mut out_a);
            assert_eq!(got, Dequeued::Packet(16));
            for _ in 0..16 {
                out_b.push(b.dequeue(now).packet().unwrap());
            }
        }
        assert!(refused.is_empty());
        assert_eq!(out_a, out_b);
        assert_eq!(a.stats(), b.stats());
        a.check_invariants().unwrap();
    }

    #[test]
    fn cbq_runs() {
        let shape = Shape {
            levels: 3,
            leaves: 100,
            subports: 1,
        };
        let (cbq, leaves) = build_cbq(&shape).unwrap();
        let mut b = SchedBench::new(cbq, leaves, Pattern::RoundRobin, 1, 8).unwrap();
        let c = b.run(2_000);
        assert!(c.dequeued >= 2_000);
        b.sched.stats().check_conservation().unwrap();
    }

    #[test]
    fn rr_sequence_visits_every_leaf_once() {
        let mut t = tag_sequence(40, Pattern::RoundRobin);
        assert_eq!(t.len(), 40);
        assert_eq!(&t[..3], &[0, 16, 32]);
        t.sort_unstable();
        assert!(t.iter().enumerate().all(|(i, &l)| i as u32 == l));
    }
}
