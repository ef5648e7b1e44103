//! `fq_codel`: Flow Queue CoDel (RFC 8290, Hoeiland-Joergensen et al. 2018).
//!
//! ## What it promises
//! Packets are hashed by their flow (`flow_hash % flows`) into one of `flows` queues. Each queue
//! is a CoDel-controlled FIFO ([`CodelQueue`], the same code as the `codel` qdisc), so a flow that
//! builds a standing queue is dropped (or CE-marked) without touching the others. Queues are
//! served by a deficit round robin of `quantum` bytes with two lists (RFC 8290 §4.1):
//!
//! * a queue that becomes active joins the tail of **new_flows** with `quantum` credit; new
//!   flows are always served before **old_flows**, so a sparse flow (one that sends less than its
//!   quantum per round: DNS, ACKs, VoIP, pings) sees almost no queueing delay;
//! * a queue whose credit is spent gets `quantum` more and goes to the tail of old_flows;
//! * a new queue that empties moves to old_flows (if any old flow is waiting), so it cannot
//!   re-enter new_flows at once and starve the old ones; an old queue that empties leaves the
//!   lists.
//!
//! Byte fairness between backlogged flows holds whatever their packet sizes (DRR, Shreedhar &
//! Varghese 1996), within one quantum plus one packet.
//!
//! ## Overflow
//! When the total exceeds `limit` packets or `memory_limit` bytes after an enqueue, packets are
//! dropped from the head of the *fattest* queue (most bytes), as Linux's `fq_codel_drop`: up to
//! half of that queue's bytes, and at most `drop_batch_size` packets (default 64) per overflow —
//! the documented bound on the work an enqueue can cause. Such drops count as `overflow`
//! (`drop_overlimit` / `drop_overmemory` in the gauges) and are handed back by `take_dropped`.
//! The arriving packet is always accepted first (it may itself be among the victims).
//!
//! ## Complexity
//! Enqueue O(1), plus O(flows) to find the fattest queue on overflow (a linear scan, as Linux;
//! overflow is rare with CoDel in control) and at most `drop_batch_size` drops. Dequeue O(1)
//! amortised: each loop step sends, refills a credit, moves a queue between lists or removes an
//! empty one; CoDel drops at most [`super::codel::MAX_DROPS_PER_DEQUEUE`] per queue visit.
//!
//! ## Memory that follows traffic
//! The `flows` queues (about 128 bytes each: 128 KB at the default 1,024) and the two lists are
//! one table (`FlowTable`), built at the first enqueue, and [`Qdisc::release_state`] gives it
//! back when the qdisc is empty; a scheduler does so after the leaf has stayed empty for
//! `17 × interval` or longer ([`super::lazy`] explains why CoDel cannot tell the difference
//! then). Per-queue counters ([`FqCodel::flow_stats`]) restart with a new table; the qdisc's
//! counters and gauges do not. The parameters are not copied into every leaf: leaves built from
//! one [`FqCodelShared`] (a plan's subscribers: one per distinct configuration, as HTB's
//! profiles and librte_sched's pipe profiles) hold a pointer to it, so an idle leaf is its
//! counters, one pointer to its parameters and one (null) to its table.
//!
//! ## Stats
//! `QdiscStats` with drops by reason (`overflow`, `aqm`) and `marked` (ECN marks of both kinds);
//! gauges `active_flows`, `new_flows_len`, `old_flows_len`, `new_flow_count` (queues that became
//! active, total), `ecn_marks`, `ce_marks`, `drop_overlimit`, `drop_overmemory`, `sojourn_us`
//! (of the last packet sent), `flow_table` (1 while the queues are built), `flow_tables_built`,
//! `flow_tables_released`. Per-queue counters on demand: [`FqCodel::flow_stats`].

use std::collections::VecDeque;
use std::sync::Arc;

use super::codel::{CodelMarks, CodelParams, CodelQueue};
#[cfg(doc)]
use super::Qdisc;
use super::{Books, Counter, Dequeued, Discipline, DropReason, Dropped, ParamError};
use crate::packet::Packet;
use crate::units::{Duration, Time};

pub const MAX_FLOWS: u32 = 65536;
pub const MIN_QUANTUM: u32 = 64;
pub const MAX_QUANTUM: u32 = 1 << 20;
pub const MAX_LIMIT: u32 = 10_000_000;
pub const MAX_DROP_BATCH: u32 = 1024;

/// FQ-CoDel parameters (policy keys of the same names). Defaults are Linux's.
#[derive(Clone, Debug, PartialEq)]
pub struct FqCodelParams {
    /// Acceptable standing queue delay per flow. Default 5 ms.
    pub target: Duration,
    /// Sliding window over which the delay must stay above target; a worst-case RTT. 100 ms.
    pub interval: Duration,
    /// Total packets over all flows, 1..=10 000 000. Default 10240.
    pub limit: u32,
    /// Total bytes over all flows, at least 1514. Default 32 MiB.
    pub memory_limit: u32,
    /// Number of flow queues (hash buckets), 1..=65536. Default 1024.
    pub flows: u32,
    /// Bytes of credit per round, 64..=1 MiB. Default 1514.
    pub quantum: u32,
    /// CE-mark ECN-capable packets instead of dropping them. Default true (as Linux).
    pub ecn: bool,
    /// CE-mark ECN-capable packets whose sojourn exceeds this (DCTCP-style), none by default.
    pub ce_threshold: Option<Duration>,
    /// Most packets dropped per overflow, 1..=1024. Default 64.
    pub drop_batch_size: u32,
}

impl Default for FqCodelParams {
    fn default() -> Self {
        FqCodelParams {
            target: Duration::from_millis(5),
            interval: Duration::from_millis(100),
            limit: 10_240,
            memory_limit: 32 << 20,
            flows: 1024,
            quantum: 1514,
            ecn: true,
            ce_threshold: None,
            drop_batch_size: 64,
        }
    }
}

impl FqCodelParams {
    fn codel(&self) -> CodelParams {
        CodelParams {
            target: self.target,
            interval: self.interval,
            limit: self.limit,
            ecn: self.ecn,
            ce_threshold: self.ce_threshold,
        }
    }

    pub fn validate(&self) -> Result<(), ParamError> {
        self.codel().validate()?;
        if self.limit > MAX_LIMIT {
            return Err(ParamError::new(
                "limit",
                format!("must be from 1 to {MAX_LIMIT} packets, got {}", self.limit),
                "use e.g. 10240 (the default)",
            ));
        }
        if self.memory_limit < 1514 {
            return Err(ParamError::new(
                "memory_limit",
                format!("must be at least 1514 bytes, got {}", self.memory_limit),
                "use e.g. \"32m\" (the default)",
            ));
        }
        if self.flows == 0 || self.flows > MAX_FLOWS {
            return Err(ParamError::new(
                "flows",
                format!("must be from 1 to {MAX_FLOWS}, got {}", self.flows),
                "use e.g. 1024 (the default)",
            ));
        }
        if !(MIN_QUANTUM..=MAX_QUANTUM).contains(&self.quantum) {
            return Err(ParamError::new(
                "quantum",
                format!(
                    "must be from {MIN_QUANTUM} to {MAX_QUANTUM} bytes, got {}",
                    self.quantum
                ),
                "use one MTU-sized frame (1514, the default)",
            ));
        }
        if self.drop_batch_size == 0 || self.drop_batch_size > MAX_DROP_BATCH {
            return Err(ParamError::new(
                "drop_batch_size",
                format!(
                    "must be from 1 to {MAX_DROP_BATCH} packets, got {}",
                    self.drop_batch_size
                ),
                "use e.g. 64 (the default)",
            ));
        }
        if let Some(ce) = self.ce_threshold {
            if ce.0 == 0 {
                return Err(ParamError::new(
                    "ce_threshold",
                    "must be above 0",
                    "use e.g. \"1ms\", or leave it out",
                ));
            }
        }
        Ok(())
    }
}

/// Which list a flow queue is on.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum FlowList {
    New,
    Old,
    /// Not scheduled (empty).
    None,
}

/// Counters of one flow queue.
#[derive(Clone, Debug, PartialEq)]
pub struct FqCodelFlowStat {
    /// Bucket index (`flow_hash % flows`).
    pub bucket: u32,
    pub list: FlowList,
    pub backlog_packets: u64,
    pub backlog_bytes: u64,
    pub deficit: i64,
    pub sent: Counter,
    pub aqm_drops: u64,
    pub overflow_drops: u64,
    /// CoDel's drop count and state.
    pub count: u32,
    pub dropping: bool,
}

#[derive(Debug)]
struct Flow<P> {
    q: CodelQueue<P>,
    deficit: i64,
    list: FlowList,
    sent: Counter,
    aqm_drops: u64,
    overflow_drops: u64,
}

/// The parameters of an fq_codel configuration with CoDel's derived from them, validated once
/// and shared by every leaf built from them ([`FqCodel::with_shared`]): the subscribers of one
/// plan hold one copy between them.
#[derive(Debug, PartialEq)]
pub struct FqCodelShared {
    p: FqCodelParams,
    codel: CodelParams,
}

impl FqCodelShared {
    pub fn new(params: FqCodelParams) -> Result<Arc<FqCodelShared>, ParamError> {
        params.validate()?;
        Ok(Arc::new(FqCodelShared {
            codel: params.codel(),
            p: params,
        }))
    }

    pub fn params(&self) -> &FqCodelParams {
        &self.p
    }
}

/// The per-flow state, present while the qdisc is in use: the queues and the two lists.
#[derive(Debug)]
struct FlowTable<P> {
    flows: Box<[Flow<P>]>,
    new_flows: VecDeque<u32>,
    old_flows: VecDeque<u32>,
}

impl<P> FlowTable<P> {
    fn new(n: u32) -> Self {
        FlowTable {
            flows: (0..n)
                .map(|_| Flow {
                    q: CodelQueue::default(),
                    deficit: 0,
                    list: FlowList::None,
                    sent: Counter::default(),
                    aqm_drops: 0,
                    overflow_drops: 0,
                })
                .collect(),
            new_flows: VecDeque::new(),
            old_flows: VecDeque::new(),
        }
    }

    /// Drop from the head of the fattest queue: up to half its bytes, at most `batch` packets.
    /// O(flows) scan + O(batch).
    fn drop_from_fattest(&mut self, batch: u32, books: &mut Books<P>)
    where
        P: Packet,
    {
        let mut fat = 0usize;
        let mut fat_bytes = 0u64;
        for (i, f) in self.flows.iter().enumerate() {
            if f.q.bytes() > fat_bytes {
                fat_bytes = f.q.bytes();
                fat = i;
            }
        }
        let threshold = fat_bytes / 2;
        let Some(flow) = self.flows.get_mut(fat) else {
            return;
        };
        let mut freed = 0u64;
        let mut n = 0u32;
        while n < batch && freed < threshold.max(1) {
            let Some(pk) = flow.q.pop_head() else { break };
            let len = pk.len();
            freed += len as u64;
            n += 1;
            flow.overflow_drops += 1;
            books.drop(pk, DropReason::Overflow);
        }
    }
}

/// `hash % flows`, with a mask when `flows` is a power of two (the default 1024): the same
/// bucket without a division per packet.
#[inline]
fn bucket(hash: u32, flows: u32) -> u32 {
    if flows.is_power_of_two() {
        hash & (flows - 1)
    } else {
        hash % flows
    }
}

/// The FQ-CoDel qdisc.
#[derive(Debug)]
pub struct FqCodel<P> {
    shared: Arc<FqCodelShared>,
    /// `None` while fresh or released ([`super::lazy`]).
    table: Option<Box<FlowTable<P>>>,
    new_flow_count: u64,
    marks: CodelMarks,
    drop_overlimit: u64,
    drop_overmemory: u64,
    last_sojourn: Duration,
    /// Flow tables built and released ([`super::lazy`]).
    built: u64,
    released: u64,
    books: Books<P>,
}

impl<P: Packet> FqCodel<P> {
    pub fn new(params: FqCodelParams) -> Result<Self, ParamError> {
        Ok(Self::with_shared(FqCodelShared::new(params)?))
    }

    /// A qdisc on parameters shared with others built from the same `shared`.
    pub fn with_shared(shared: Arc<FqCodelShared>) -> Self {
        FqCodel {
            shared,
            table: None,
            new_flow_count: 0,
            marks: CodelMarks::default(),
            drop_overlimit: 0,
            drop_overmemory: 0,
            last_sojourn: Duration::ZERO,
            built: 0,
            released: 0,
            books: Books::new(),
        }
    }

    /// Whether the flow queues are built (they are not while the qdisc is fresh or released).
    pub fn has_flow_table(&self) -> bool {
        self.table.is_some()
    }

    pub fn params(&self) -> &FqCodelParams {
        &self.shared.p
    }

    /// The bucket a packet goes to.
    pub fn bucket_of(&self, meta: &crate::packet::PacketMeta) -> u32 {
        bucket(meta.flow_hash, self.shared.p.flows)
    }

    /// Queues on the new or old list.
    pub fn active_flows(&self) -> usize {
        self.table
            .as_ref()
            .map_or(0, |t| t.new_flows.len() + t.old_flows.len())
    }

    /// Queues that became active since the start.
    pub fn new_flow_count(&self) -> u64 {
        self.new_flow_count
    }

    /// ECN marks: instead of CoDel drops, and above `ce_threshold`.
    pub fn marks(&self) -> CodelMarks {
        self.marks
    }

    /// Counters of every queue that is active or has sent or dropped anything. O(flows).
    pub fn flow_stats(&self) -> Vec<FqCodelFlowStat> {
        let Some(t) = &self.table else {
            return Vec::new();
        };
        t.flows
            .iter()
            .enumerate()
            .filter(|(_, f)| {
                f.list != FlowList::None
                    || f.sent.packets > 0
                    || f.aqm_drops > 0
                    || f.overflow_drops > 0
            })
            .map(|(i, f)| FqCodelFlowStat {
                bucket: i as u32,
                list: f.list,
                backlog_packets: f.q.len() as u64,
                backlog_bytes: f.q.bytes(),
                deficit: f.deficit,
                sent: f.sent,
                aqm_drops: f.aqm_drops,
                overflow_drops: f.overflow_drops,
                count: f.q.vars.count,
                dropping: f.q.vars.dropping,
            })
            .collect()
    }
}

impl<P: Packet> Discipline<P> for FqCodel<P> {
    fn books(&self) -> &Books<P> {
        &self.books
    }
    fn books_mut(&mut self) -> &mut Books<P> {
        &mut self.books
    }
    /// O(1); on overflow O(flows) + at most `drop_batch_size` drops.
    fn enqueue_inner(&mut self, pkt: P, now: Time) -> Result<(), Dropped<P>> {
        let p = &self.shared.p;
        let built = &mut self.built;
        let t = self.table.get_or_insert_with(|| {
            *built += 1;
            Box::new(FlowTable::new(p.flows))
        });
        let idx = bucket(pkt.meta().flow_hash, p.flows) as usize;
        let flow = &mut t.flows[idx];
        flow.q.push(pkt, now);
        if flow.list == FlowList::None {
            flow.list = FlowList::New;
            flow.deficit = p.quantum as i64;
            t.new_flows.push_back(idx as u32);
            self.new_flow_count += 1;
        }
        let over_limit = self.books.backlog().packets > p.limit as u64;
        let over_memory = self.books.backlog().bytes > p.memory_limit as u64;
        if over_limit || over_memory {
            let before = self.books.stats().dropped.get(DropReason::Overflow).packets;
            t.drop_from_fattest(p.drop_batch_size, &mut self.books);
            let n = self.books.stats().dropped.get(DropReason::Overflow).packets - before;
            if over_memory {
                self.drop_overmemory += n;
            } else {
                self.drop_overlimit += n;
            }
        }
        Ok(())
    }

    /// O(1) amortised (see the module docs).
    fn dequeue_inner(&mut self, now: Time) -> Dequeued<P> {
        let Some(t) = self.table.as_deref_mut() else {
            return Dequeued::Empty;
        };
        let sh = &*self.shared;
        loop {
            let (idx, from_new) = match t.new_flows.front() {
                Some(&i) => (i, true),
                None => match t.old_flows.front() {
                    Some(&i) => (i, false),
                    None => return Dequeued::Empty,
                },
            };
            let flow = &mut t.flows[idx as usize];
            if flow.deficit <= 0 {
                flow.deficit += sh.p.quantum as i64;
                flow.list = FlowList::Old;
                if from_new {
                    t.new_flows.pop_front();
                } else {
                    t.old_flows.pop_front();
                }
                t.old_flows.push_back(idx);
                continue;
            }
            let mut marks = CodelMarks::default();
            let books = &mut self.books;
            let mut aqm = 0u64;
            let mut on_drop = |pk: P| {
                aqm += 1;
                books.drop(pk, DropReason::Aqm);
            };
            let r = flow.q.dequeue(now, &sh.codel, &mut on_drop, &mut marks);
            flow.aqm_drops += aqm;
            self.books.mark(marks.total());
            self.marks.ecn += marks.ecn;
            self.marks.ce += marks.ce;
            match r {
                Some(pk) => {
                    let len = pk.len();
                    flow.deficit -= len as i64;
                    flow.sent.add(len);
                    self.last_sojourn = flow.q.vars.last_sojourn;
                    return Dequeued::Packet(pk);
                }
                None => {
                    // Empty: a new flow goes to the old list if others wait there (so it cannot
                    // jump ahead again at once), otherwise it leaves the lists.
                    if from_new {
                        t.new_flows.pop_front();
                        if !t.old_flows.is_empty() {
                            flow.list = FlowList::Old;
                            t.old_flows.push_back(idx);
                        } else {
                            flow.list = FlowList::None;
                        }
                    } else {
                        t.old_flows.pop_front();
                        flow.list = FlowList::None;
                    }
                }
            }
        }
    }

    fn kind_inner(&self) -> &'static str {
        "fq_codel"
    }
    fn extra_stats_inner(&self, f: &mut dyn FnMut(&'static str, f64)) {
        f("active_flows", self.active_flows() as f64);
        let (new, old) = self
            .table
            .as_ref()
            .map_or((0, 0), |t| (t.new_flows.len(), t.old_flows.len()));
        f("new_flows_len", new as f64);
        f("old_flows_len", old as f64);
        f("new_flow_count", self.new_flow_count as f64);
        f("ecn_marks", self.marks.ecn as f64);
        f("ce_marks", self.marks.ce as f64);
        f("drop_overlimit", self.drop_overlimit as f64);
        f("drop_overmemory", self.drop_overmemory as f64);
        f("sojourn_us", self.last_sojourn.0 as f64 / 1000.0);
        f("flow_table", f64::from(u8::from(self.has_flow_table())));
        f("flow_tables_built", self.built as f64);
        f("flow_tables_released", self.released as f64);
    }
    /// `17 × interval` (see [`super::lazy`]).
    fn release_hold_inner(&self) -> Option<Duration> {
        Some(Duration(self.shared.p.interval.0.saturating_mul(17)))
    }
    fn release_state_inner(&mut self) -> bool {
        if self.table.take().is_none() {
            return false;
        }
        self.released += 1;
        true
    }
    /// O(flows): the queues' buffers are counted one by one.
    fn state_bytes_inner(&self) -> usize {
        let Some(t) = &self.table else {
            return 0;
        };
        let lists = (t.new_flows.capacity() + t.old_flows.capacity()) * 4;
        let flows =
            std::mem::size_of::<FlowTable<P>>() + t.flows.len() * std::mem::size_of::<Flow<P>>();
        lists + flows + t.flows.iter().map(|f| f.q.heap_bytes()).sum::<usize>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::PacketMeta;
    use crate::qdisc::Qdisc;

    fn pkt(flow: u32, len: u32) -> PacketMeta {
        PacketMeta {
            len,
            flow_hash: flow,
            ..Default::default()
        }
    }

    fn fq(p: FqCodelParams) -> FqCodel<PacketMeta> {
        FqCodel::new(p).unwrap()
    }

    #[test]
    fn validation_names_the_key() {
        let bad = [
            (
                FqCodelParams {
                    flows: 0,
                    ..Default::default()
                },
                "flows",
            ),
            (
                FqCodelParams {
                    quantum: 10,
                    ..Default::default()
                },
                "quantum",
            ),
            (
                FqCodelParams {
                    limit: 0,
                    ..Default::default()
                },
                "limit",
            ),
            (
                FqCodelParams {
                    memory_limit: 100,
                    ..Default::default()
                },
                "memory_limit",
            ),
            (
                FqCodelParams {
                    drop_batch_size: 0,
                    ..Default::default()
                },
                "drop_batch_size",
            ),
            (
                FqCodelParams {
                    target: Duration::ZERO,
                    ..Default::default()
                },
                "target",
            ),
            (
                FqCodelParams {
                    ce_threshold: Some(Duration::ZERO),
                    ..Default::default()
                },
                "ce_threshold",
            ),
        ];
        for (p, key) in bad {
            assert_eq!(FqCodel::<PacketMeta>::new(p).err().unwrap().param, key);
        }
        FqCodelParams::default().validate().unwrap();
    }

    /// An idle leaf is its counters and two pointers (parameters shared, no table), and leaves
    /// built from one `FqCodelShared` share it.
    #[test]
    fn an_idle_leaf_is_small_and_shares_its_parameters() {
        assert!(std::mem::size_of::<FqCodel<PacketMeta>>() <= 192);
        let shared = FqCodelShared::new(FqCodelParams::default()).unwrap();
        let a = FqCodel::<PacketMeta>::with_shared(shared.clone());
        let mut b = FqCodel::<PacketMeta>::with_shared(shared);
        assert!(std::ptr::eq(a.params(), b.params()));
        assert!(!b.has_flow_table() && b.state_bytes() == 0);
        b.enqueue(pkt(1, 100), Time(0)).unwrap();
        assert!(b.has_flow_table() && !a.has_flow_table());
        assert_eq!(b.dequeue(Time(0)).packet().map(|p| p.flow_hash), Some(1));
        assert!(b.release_state());
        assert!(!b.has_flow_table() && b.state_bytes() == 0);
        assert!(FqCodelShared::new(FqCodelParams {
            flows: 0,
            ..Default::default()
        })
        .is_err());
    }

    #[test]
    fn new_flow_is_served_before_old_flows() {
        let mut q = fq(FqCodelParams::default());
        // Flow 1 backlogged with 10 packets; after the first dequeue it has spent its quantum
        // (1514 - 1500 = 14 > 0, so a second packet; then -1486 -> old list).
        for _ in 0..10 {
            q.enqueue(pkt(1, 1500), Time(0)).unwrap();
        }
        assert_eq!(q.dequeue(Time(0)).packet().unwrap().flow_hash, 1);
        assert_eq!(q.dequeue(Time(0)).packet().unwrap().flow_hash, 1);
        // A sparse flow arrives: it is served next, before flow 1 continues.
        q.enqueue(pkt(2, 100), Time(0)).unwrap();
        assert_eq!(q.dequeue(Time(0)).packet().unwrap().flow_hash, 2);
        assert_eq!(q.dequeue(Time(0)).packet().unwrap().flow_hash, 1);
        assert_eq!(q.new_flow_count(), 2);
        q.stats().check_conservation().unwrap();
    }

    #[test]
    fn overflow_drops_half_of_the_fattest_flow_from_its_head() {
        let mut q = fq(FqCodelParams {
            limit: 20,
            ..Default::default()
        });
        for i in 0..16 {
            q.enqueue(
                PacketMeta {
                    len: 1000,
                    flow_hash: 1,
                    src_port: i,
                    ..Default::default()
                },
                Time(0),
            )
            .unwrap();
        }
        for _ in 0..4 {
            q.enqueue(pkt(2, 1000), Time(0)).unwrap();
        }
        assert!(q.take_dropped().is_none());
        // The 21st packet overflows: flow 1 (16 000 B) loses 8 000 B = 8 packets from its head.
        q.enqueue(pkt(2, 1000), Time(0)).unwrap();
        let mut victims = Vec::new();
        while let Some(d) = q.take_dropped() {
            assert_eq!(d.reason, DropReason::Overflow);
            victims.push(d.packet);
        }
        assert_eq!(victims.len(), 8);
        assert!(victims.iter().all(|p| p.flow_hash == 1));
        assert_eq!(
            victims.iter().map(|p| p.src_port).collect::<Vec<_>>(),
            (0..8).collect::<Vec<_>>()
        );
        assert_eq!(q.stats().backlog.packets, 13);
        q.stats().check_conservation().unwrap();
        let mut g = std::collections::HashMap::new();
        q.extra_stats(&mut |k, v| {
            g.insert(k, v);
        });
        assert_eq!(g["drop_overlimit"], 8.0);
        assert_eq!(g["drop_overmemory"], 0.0);
    }

    #[test]
    fn overflow_batch_is_bounded() {
        let mut q = fq(FqCodelParams {
            limit: 1000,
            drop_batch_size: 5,
            ..Default::default()
        });
        for _ in 0..1001 {
            q.enqueue(pkt(3, 100), Time(0)).unwrap();
        }
        assert_eq!(q.stats().dropped.get(DropReason::Overflow).packets, 5);
        q.stats().check_conservation().unwrap();
    }

    #[test]
    fn memory_limit_counts_bytes() {
        let mut q = fq(FqCodelParams {
            memory_limit: 10_000,
            ..Default::default()
        });
        for _ in 0..10 {
            q.enqueue(pkt(1, 1000), Time(0)).unwrap();
        }
        assert_eq!(q.stats().dropped.total().packets, 0);
        q.enqueue(pkt(1, 1000), Time(0)).unwrap();
        // 11 000 B: half of flow 1's 11 000 B = 5 500 -> 6 packets.
        assert_eq!(q.stats().dropped.get(DropReason::Overflow).packets, 6);
        let mut over = 0.0;
        q.extra_stats(&mut |k, v| {
            if k == "drop_overmemory" {
                over = v;
            }
        });
        assert_eq!(over, 6.0);
    }

    #[test]
    fn emptied_new_flow_goes_to_old_list_when_old_flows_wait() {
        let mut q = fq(FqCodelParams::default());
        for _ in 0..4 {
            q.enqueue(pkt(1, 1500), Time(0)).unwrap();
        }
        let _ = q.dequeue(Time(0));
        let _ = q.dequeue(Time(0)); // flow 1 now on the old list with deficit -1486 + ...
        q.enqueue(pkt(2, 100), Time(0)).unwrap();
        assert_eq!(q.dequeue(Time(0)).packet().unwrap().flow_hash, 2);
        // Flow 2 is empty: the next dequeue moves it to the old list behind flow 1.
        assert_eq!(q.dequeue(Time(0)).packet().unwrap().flow_hash, 1);
        let st = q.flow_stats();
        let f2 = st.iter().find(|s| s.bucket == 2).unwrap();
        assert_eq!(f2.list, FlowList::Old);
        assert_eq!(f2.sent.packets, 1);
        // A packet for flow 2 now waits its turn on the old list (no new-flow priority).
        q.enqueue(pkt(2, 100), Time(0)).unwrap();
        assert_eq!(q.dequeue(Time(0)).packet().unwrap().flow_hash, 2);
    }
}
