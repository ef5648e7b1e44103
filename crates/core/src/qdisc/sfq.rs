//! `sfq`: Stochastic Fairness Queueing (McKenney, "Stochastic Fairness Queueing", INFOCOM 1990),
//! with the byte-based round robin and the bookkeeping of Linux's `sch_sfq`.
//!
//! ## What it promises
//! Flows are hashed into `divisor` buckets; each bucket that holds packets owns one *slot* (a FIFO
//! of at most `depth` packets), and at most `flows` slots exist. Active slots are served round
//! robin, each getting `quantum` bytes of credit (`allot`) per turn, so backlogged flows of any
//! packet size receive equal bytes within one quantum plus one packet. Flows that collide in a
//! bucket share its slot (the "stochastic" part); `perturb` re-keys the hash periodically so that
//! no two flows stay unlucky for long.
//!
//! ## Hash
//! `bucket = splitmix64(flow_hash ⊕ key) mod divisor`: the packet's 5-tuple hash
//! ([`crate::packet::PacketMeta::flow_hash`]) mixed with a per-instance 64-bit key drawn from a
//! splitmix64 generator seeded with `seed`.
//!
//! ## Perturbation without reordering
//! Linux rehashes queued packets into new slots when it re-keys, which can reorder a flow. Here
//! every slot remembers the key *generation* it was created under. On re-keying, the current
//! bucket→slot table becomes the *old* table (it maps exactly the backlogged slots) and an empty
//! table starts for the new key. An arriving packet is first hashed with the old key: if the old
//! table maps its bucket to a slot that is still backlogged, the packet joins that slot (where its
//! flow's earlier packets wait); otherwise it is hashed with the new key. Old slots are never
//! created, only drained; a drained old slot leaves the old table. So a flow with packets in flight
//! keeps its slot until it drains, and a flow never has packets in two slots: no reordering.
//! A perturbation that falls due while old-generation slots are still backlogged is deferred until
//! they have all drained (checked on every call), so at most two generations exist; the swap is
//! O(1) because the old table is empty by then.
//!
//! ## Limits
//! * `depth`: an arriving packet whose slot already holds `depth` packets is refused
//!   ([`DropReason::FlowLimit`]).
//! * no free slot (all `flows` in use) for a packet of a new bucket: refused with
//!   [`DropReason::FlowLimit`] (Linux drops it too).
//! * `limit` (total packets): when full, the *tail* packet of the longest slot is dropped
//!   ([`DropReason::Overflow`], handed back by `take_dropped`) — Linux's default (no `headdrop`) —
//!   and the arriving packet is accepted. When the arriving packet's own slot is the longest, its
//!   previous tail is the victim (Linux drops the arriving packet itself; the count is the same).
//!   The effective limit is `min(limit, depth × flows)`, as Linux clamps it.
//!
//! ## Complexity
//! Enqueue O(1) in the number of flows: the longest slot is found through Linux's depth lists
//! (`dep[d]` = slots holding `d` packets, and the maximum `d` in use). Dequeue O(1) amortised: a
//! slot whose credit is spent gets `quantum` more and goes to the back; a packet larger than the
//! quantum costs at most `⌈len / quantum⌉` such turns. Re-keying is O(1).
//!
//! ## Memory that follows traffic
//! The slots, both bucket tables, the depth lists and the per-bucket counters (about 45 KB at
//! the defaults) are built at the first enqueue and given back by [`Qdisc::release_state`] when
//! the qdisc is empty ([`super::lazy`]): an empty SFQ has every slot free and both tables
//! empty, so a rebuilt one behaves as the one it replaces (hold 0); the hash key, its
//! generation and the perturbation clock are kept. Per-bucket counters restart.
//!
//! ## Stats
//! `extra_stats`: `active_flows`, `perturbations`, `perturbations_deferred`, `flow_table`,
//! `flow_tables_built`, `flow_tables_released`.
//! [`Sfq::flow_stats`] lists per-bucket counters (O(divisor), on demand).

use std::collections::VecDeque;

#[cfg(doc)]
use super::Qdisc;
use super::{Books, Counter, Dequeued, Discipline, DropReason, Dropped, ParamError};
use crate::packet::Packet;
use crate::units::{Duration, Time};

const NONE: u32 = u32::MAX;

/// Bounds.
pub const MIN_DIVISOR: u32 = 16;
pub const MAX_DIVISOR: u32 = 65536;
pub const MIN_QUANTUM: u32 = 64;
pub const MAX_QUANTUM: u32 = 1 << 20;
pub const MAX_DEPTH: u32 = 65535;
pub const MAX_LIMIT: u32 = 10_000_000;
/// Shortest non-zero perturbation interval.
pub const MIN_PERTURB: Duration = Duration::from_millis(1);

/// SFQ parameters (policy keys of the same names).
#[derive(Clone, Debug, PartialEq)]
pub struct SfqParams {
    /// Hash buckets, a power of two in 16..=65536. Default 1024.
    pub divisor: u32,
    /// Most flows (slots) active at once, 1..=divisor. Default 128.
    pub flows: u32,
    /// Packets per flow, 1..=65535. Default 127.
    pub depth: u32,
    /// Packets in the whole qdisc, 1..=10 000 000. Default 127.
    pub limit: u32,
    /// Bytes of credit per round-robin turn, 64..=1 MiB. Default 1514 (one Ethernet frame).
    pub quantum: u32,
    /// Re-key interval; 0 = never (default). tc's classic value is 10 s.
    pub perturb: Duration,
    /// Seed of the hash-key generator (deterministic runs).
    pub seed: u64,
}

impl Default for SfqParams {
    fn default() -> Self {
        SfqParams {
            divisor: 1024,
            flows: 128,
            depth: 127,
            limit: 127,
            quantum: 1514,
            perturb: Duration::ZERO,
            seed: 0,
        }
    }
}

impl SfqParams {
    pub fn validate(&self) -> Result<(), ParamError> {
        if !self.divisor.is_power_of_two()
            || self.divisor < MIN_DIVISOR
            || self.divisor > MAX_DIVISOR
        {
            let suggest = self
                .divisor
                .clamp(MIN_DIVISOR, MAX_DIVISOR)
                .next_power_of_two()
                .min(MAX_DIVISOR);
            return Err(ParamError::new(
                "divisor",
                format!(
                    "must be a power of two from {MIN_DIVISOR} to {MAX_DIVISOR}, got {}",
                    self.divisor
                ),
                format!("use divisor = {suggest} (the default is 1024)"),
            ));
        }
        if self.flows == 0 || self.flows > self.divisor {
            return Err(ParamError::new(
                "flows",
                format!(
                    "must be from 1 to divisor ({}), got {}",
                    self.divisor, self.flows
                ),
                "each active flow needs its own hash bucket: raise divisor or lower flows \
                 (the default is 128)",
            ));
        }
        if self.depth == 0 || self.depth > MAX_DEPTH {
            return Err(ParamError::new(
                "depth",
                format!("must be from 1 to {MAX_DEPTH} packets, got {}", self.depth),
                "set depth to the packets one flow may queue (tc's default is 127)",
            ));
        }
        if self.limit == 0 || self.limit > MAX_LIMIT {
            return Err(ParamError::new(
                "limit",
                format!("must be from 1 to {MAX_LIMIT} packets, got {}", self.limit),
                "set limit to the packets the whole queue may hold (tc's default is 127)",
            ));
        }
        if self.quantum < MIN_QUANTUM || self.quantum > MAX_QUANTUM {
            return Err(ParamError::new(
                "quantum",
                format!(
                    "must be from {MIN_QUANTUM} to {MAX_QUANTUM} bytes, got {}",
                    self.quantum
                ),
                "set quantum to at least one MTU-sized frame (1514) for byte fairness",
            ));
        }
        if self.perturb != Duration::ZERO && self.perturb < MIN_PERTURB {
            return Err(ParamError::new(
                "perturb",
                format!("must be 0 (off) or at least 1ms, got {}", self.perturb),
                "use perturb = \"10s\" as tc users do, or 0 to keep the hash fixed",
            ));
        }
        Ok(())
    }
}

/// Per-bucket counters, as [`Sfq::flow_stats`] reports them.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct SfqFlowStat {
    /// Bucket index (under the key the bucket's slot was created with).
    pub bucket: u32,
    /// Packets waiting.
    pub backlog_packets: u64,
    /// Bytes waiting.
    pub backlog_bytes: u64,
    /// Packets and bytes sent from this bucket since the qdisc was created.
    pub sent: Counter,
    /// Packets of this bucket refused (depth) or dropped (overflow victims).
    pub drops: u64,
}

#[derive(Debug)]
struct Slot<P> {
    q: VecDeque<P>,
    bytes: u64,
    /// Remaining byte credit this turn.
    allot: i64,
    bucket: u32,
    /// Key generation the slot was created under.
    gen: u64,
    /// Active ring (round robin).
    next: u32,
    prev: u32,
    /// Depth list (slots with the same queue length).
    dnext: u32,
    dprev: u32,
}

#[derive(Copy, Clone, Debug, Default)]
struct BucketStat {
    sent: Counter,
    drops: u64,
}

/// Small deterministic generator for hash keys.
fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    mix64(*state)
}

fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The SFQ qdisc.
pub struct Sfq<P> {
    params: SfqParams,
    limit: u64,
    slots: Vec<Slot<P>>,
    /// Free slots (stack).
    free: Vec<u32>,
    /// Bucket → slot under the current key.
    ht: Vec<u32>,
    /// Bucket → slot under the previous key (only backlogged old-generation slots).
    ht_old: Vec<u32>,
    key: u64,
    old_key: u64,
    gen: u64,
    /// Old-generation slots still backlogged.
    old_active: u32,
    rng: u64,
    next_perturb: Option<Time>,
    perturbations: u64,
    deferred: u64,
    /// Round robin: the slot served next; NONE when idle.
    head: u32,
    active: u32,
    /// `dep[d]` = first slot holding `d` packets (index 0 unused).
    dep: Vec<u32>,
    max_depth: u32,
    buckets: Vec<BucketStat>,
    /// Tables built and released ([`super::lazy`]).
    built: u64,
    released: u64,
    books: Books<P>,
}

impl<P: Packet> Sfq<P> {
    pub fn new(params: SfqParams) -> Result<Self, ParamError> {
        params.validate()?;
        let mut rng = params.seed ^ 0x5346_515F_4B45_5953; // "SFQ_KEYS"
        let key = splitmix64(&mut rng);
        let limit = (params.limit as u64).min(params.depth as u64 * params.flows as u64);
        Ok(Sfq {
            limit,
            slots: Vec::new(),
            free: Vec::new(),
            ht: Vec::new(),
            ht_old: Vec::new(),
            key,
            old_key: key,
            gen: 0,
            old_active: 0,
            rng,
            next_perturb: None,
            perturbations: 0,
            deferred: 0,
            head: NONE,
            active: 0,
            dep: Vec::new(),
            max_depth: 0,
            buckets: Vec::new(),
            built: 0,
            released: 0,
            books: Books::new(),
            params,
        })
    }

    /// Build the slots and tables (at the first enqueue after creation or a release).
    #[cold]
    fn build_table(&mut self) {
        let flows = self.params.flows as usize;
        let divisor = self.params.divisor as usize;
        self.slots = (0..flows)
            .map(|_| Slot {
                q: VecDeque::new(),
                bytes: 0,
                allot: 0,
                bucket: 0,
                gen: 0,
                next: NONE,
                prev: NONE,
                dnext: NONE,
                dprev: NONE,
            })
            .collect();
        self.free = (0..flows as u32).rev().collect();
        self.ht = vec![NONE; divisor];
        self.ht_old = vec![NONE; divisor];
        self.dep = vec![NONE; self.params.depth as usize + 2];
        self.max_depth = 0;
        self.buckets = vec![BucketStat::default(); divisor];
        self.built += 1;
    }

    /// Whether the slots and tables are built (not while fresh or released).
    pub fn has_flow_table(&self) -> bool {
        !self.slots.is_empty()
    }

    pub fn params(&self) -> &SfqParams {
        &self.params
    }

    /// Bucket of a flow hash under `key`.
    #[inline]
    fn bucket(&self, flow_hash: u32, key: u64) -> u32 {
        (mix64(flow_hash as u64 ^ key) & (self.params.divisor as u64 - 1)) as u32
    }

    /// Per-bucket counters for every bucket that has sent, dropped or holds packets. O(divisor).
    /// Until the slots of the previous key have drained after a perturbation, one bucket number
    /// may cover a slot of the old key and one of the new key (their backlogs are added).
    pub fn flow_stats(&self) -> Vec<SfqFlowStat> {
        let mut out: Vec<SfqFlowStat> = self
            .buckets
            .iter()
            .enumerate()
            .map(|(b, s)| SfqFlowStat {
                bucket: b as u32,
                sent: s.sent,
                drops: s.drops,
                ..Default::default()
            })
            .collect();
        for s in &self.slots {
            if !s.q.is_empty() {
                let o = &mut out[s.bucket as usize];
                o.backlog_packets += s.q.len() as u64;
                o.backlog_bytes += s.bytes;
            }
        }
        out.retain(|s| s.sent.packets > 0 || s.drops > 0 || s.backlog_packets > 0);
        out
    }

    /// Flows (slots) holding packets.
    pub fn active_flows(&self) -> u32 {
        self.active
    }

    /// Re-key if due and no old-generation slot is still backlogged. O(1).
    fn maybe_perturb(&mut self, now: Time) {
        if self.params.perturb == Duration::ZERO {
            return;
        }
        let due = match self.next_perturb {
            None => {
                self.next_perturb = Some(now + self.params.perturb);
                return;
            }
            Some(t) => now >= t,
        };
        if !due {
            return;
        }
        if self.old_active > 0 {
            self.deferred += 1;
            return;
        }
        // The old table is empty (every old slot drained): it becomes the new current table.
        std::mem::swap(&mut self.ht, &mut self.ht_old);
        self.old_key = self.key;
        self.key = splitmix64(&mut self.rng);
        self.gen += 1;
        self.old_active = self.active;
        self.perturbations += 1;
        self.next_perturb = Some(now + self.params.perturb);
    }

    // --- depth lists ---
    fn dep_remove(&mut self, x: u32, d: usize) {
        let (p, n) = (self.slots[x as usize].dprev, self.slots[x as usize].dnext);
        if p == NONE {
            self.dep[d] = n;
        } else {
            self.slots[p as usize].dnext = n;
        }
        if n != NONE {
            self.slots[n as usize].dprev = p;
        }
    }
    fn dep_insert(&mut self, x: u32, d: usize) {
        let h = self.dep[d];
        self.slots[x as usize].dprev = NONE;
        self.slots[x as usize].dnext = h;
        if h != NONE {
            self.slots[h as usize].dprev = x;
        }
        self.dep[d] = x;
    }

    // --- active ring ---
    /// Append `x` at the back of the round (just before `head`).
    fn ring_push_back(&mut self, x: u32) {
        if self.head == NONE {
            self.slots[x as usize].next = x;
            self.slots[x as usize].prev = x;
            self.head = x;
        } else {
            let h = self.head;
            let t = self.slots[h as usize].prev;
            self.slots[x as usize].next = h;
            self.slots[x as usize].prev = t;
            self.slots[t as usize].next = x;
            self.slots[h as usize].prev = x;
        }
    }
    fn ring_remove(&mut self, x: u32) {
        let (p, n) = (self.slots[x as usize].prev, self.slots[x as usize].next);
        if n == x {
            self.head = NONE;
        } else {
            self.slots[p as usize].next = n;
            self.slots[n as usize].prev = p;
            if self.head == x {
                self.head = n;
            }
        }
    }

    /// A slot lost its last packet: unmap it and free it.
    fn release(&mut self, x: u32) {
        self.ring_remove(x);
        let s = &self.slots[x as usize];
        let (bucket, gen) = (s.bucket as usize, s.gen);
        if gen == self.gen {
            self.ht[bucket] = NONE;
        } else {
            self.ht_old[bucket] = NONE;
            self.old_active -= 1;
        }
        self.active -= 1;
        self.free.push(x);
    }

    /// Remove one packet (head or tail) from slot `x`, keeping depth lists and maps. O(1).
    fn take(&mut self, x: u32, tail: bool) -> Option<P> {
        let d = self.slots[x as usize].q.len();
        let s = &mut self.slots[x as usize];
        let p = if tail {
            s.q.pop_back()
        } else {
            s.q.pop_front()
        }?;
        s.bytes -= p.len() as u64;
        self.dep_remove(x, d);
        if d > 1 {
            self.dep_insert(x, d - 1);
        }
        if self.max_depth as usize == d && self.dep[d] == NONE {
            self.max_depth -= 1;
        }
        if d == 1 {
            self.release(x);
        }
        Some(p)
    }
}

impl<P: Packet> Discipline<P> for Sfq<P> {
    fn books(&self) -> &Books<P> {
        &self.books
    }
    fn books_mut(&mut self) -> &mut Books<P> {
        &mut self.books
    }
    /// O(1) in the number of flows.
    fn enqueue_inner(&mut self, pkt: P, now: Time) -> Result<(), Dropped<P>> {
        if self.slots.is_empty() {
            self.build_table();
        }
        self.maybe_perturb(now);
        let len = pkt.len();
        let fh = pkt.meta().flow_hash;
        let mut x = NONE;
        if self.old_active > 0 {
            let ob = self.bucket(fh, self.old_key);
            x = self.ht_old[ob as usize];
        }
        let mut bucket = 0;
        if x == NONE {
            bucket = self.bucket(fh, self.key);
            x = self.ht[bucket as usize];
        }
        if x != NONE {
            let b = self.slots[x as usize].bucket as usize;
            if self.slots[x as usize].q.len() >= self.params.depth as usize {
                self.buckets[b].drops += 1;
                return Err(Dropped {
                    packet: pkt,
                    reason: DropReason::FlowLimit,
                });
            }
        } else if self.free.is_empty() {
            self.buckets[bucket as usize].drops += 1;
            return Err(Dropped {
                packet: pkt,
                reason: DropReason::FlowLimit,
            });
        }
        // Make room: tail-drop from the longest slot.
        // The backlog counts the arriving packet already.
        if self.books.backlog().packets > self.limit {
            let v = self.dep[self.max_depth as usize];
            if v != NONE {
                let vb = self.slots[v as usize].bucket as usize;
                if let Some(p) = self.take(v, true) {
                    self.buckets[vb].drops += 1;
                    self.books.drop(p, DropReason::Overflow);
                }
                // The victim may have been the arriving packet's slot and be free now.
                if x == v && self.slots[v as usize].q.is_empty() {
                    x = NONE;
                }
            }
        }
        if x == NONE {
            let Some(nx) = self.free.pop() else {
                // Unreachable: a slot was free above, or the victim's slot was just freed.
                return Err(Dropped {
                    packet: pkt,
                    reason: DropReason::FlowLimit,
                });
            };
            x = nx;
            bucket = self.bucket(fh, self.key);
            let s = &mut self.slots[x as usize];
            s.bucket = bucket;
            s.gen = self.gen;
            s.allot = self.params.quantum as i64;
            self.ht[bucket as usize] = x;
            self.active += 1;
            self.ring_push_back(x);
        }
        let d = self.slots[x as usize].q.len();
        if d > 0 {
            self.dep_remove(x, d);
        }
        self.dep_insert(x, d + 1);
        self.max_depth = self.max_depth.max(d as u32 + 1);
        let s = &mut self.slots[x as usize];
        s.bytes += len as u64;
        s.q.push_back(pkt);
        Ok(())
    }

    /// O(1) amortised in the number of flows (see the module docs).
    fn dequeue_inner(&mut self, now: Time) -> Dequeued<P> {
        self.maybe_perturb(now);
        loop {
            let x = self.head;
            if x == NONE {
                return Dequeued::Empty;
            }
            if self.slots[x as usize].allot <= 0 {
                self.slots[x as usize].allot += self.params.quantum as i64;
                self.head = self.slots[x as usize].next;
                continue;
            }
            let bucket = self.slots[x as usize].bucket as usize;
            let Some(p) = self.take(x, false) else {
                // An active slot always holds packets; recover by dropping it from the round.
                self.ring_remove(x);
                continue;
            };
            let len = p.len();
            if !self.slots[x as usize].q.is_empty() {
                let s = &mut self.slots[x as usize];
                s.allot -= len as i64;
                if s.allot <= 0 {
                    s.allot += self.params.quantum as i64;
                    self.head = s.next;
                }
            }
            self.buckets[bucket].sent.add(len);
            return Dequeued::Packet(p);
        }
    }

    fn kind_inner(&self) -> &'static str {
        "sfq"
    }

    fn extra_stats_inner(&self, f: &mut dyn FnMut(&'static str, f64)) {
        f("active_flows", self.active as f64);
        f("perturbations", self.perturbations as f64);
        f("perturbations_deferred", self.deferred as f64);
        f("flow_table", f64::from(u8::from(self.has_flow_table())));
        f("flow_tables_built", self.built as f64);
        f("flow_tables_released", self.released as f64);
    }
    /// Nothing per flow depends on time (module docs).
    fn release_hold_inner(&self) -> Option<Duration> {
        Some(Duration::ZERO)
    }
    fn release_state_inner(&mut self) -> bool {
        if self.slots.is_empty() || self.active > 0 || self.old_active > 0 {
            return false;
        }
        self.slots = Vec::new();
        self.free = Vec::new();
        self.ht = Vec::new();
        self.ht_old = Vec::new();
        self.dep = Vec::new();
        self.buckets = Vec::new();
        self.head = NONE;
        self.max_depth = 0;
        self.released += 1;
        true
    }
    fn state_bytes_inner(&self) -> usize {
        use std::mem::size_of;
        let slots = self.slots.capacity() * size_of::<Slot<P>>()
            + self
                .slots
                .iter()
                .map(|s| s.q.capacity() * size_of::<P>())
                .sum::<usize>();
        let tables = (self.free.capacity()
            + self.ht.capacity()
            + self.ht_old.capacity()
            + self.dep.capacity())
            * 4;
        slots + tables + self.buckets.capacity() * size_of::<BucketStat>()
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

    fn sfq(p: SfqParams) -> Sfq<PacketMeta> {
        Sfq::new(p).unwrap()
    }

    #[test]
    fn validation() {
        let bad = |f: fn(&mut SfqParams), name: &str| {
            let mut p = SfqParams::default();
            f(&mut p);
            assert_eq!(p.validate().unwrap_err().param, name);
        };
        bad(|p| p.divisor = 1000, "divisor");
        bad(|p| p.divisor = 8, "divisor");
        bad(|p| p.divisor = 1 << 17, "divisor");
        bad(|p| p.flows = 0, "flows");
        bad(|p| p.flows = 2048, "flows");
        bad(|p| p.depth = 0, "depth");
        bad(|p| p.limit = 0, "limit");
        bad(|p| p.quantum = 63, "quantum");
        bad(|p| p.perturb = Duration::from_micros(10), "perturb");
        assert!(SfqParams::default().validate().is_ok());
        let e = SfqParams {
            divisor: 1000,
            ..Default::default()
        }
        .validate()
        .unwrap_err();
        assert!(e.help.contains("1024"), "{e:?}");
    }

    #[test]
    fn round_robin_between_two_flows() {
        let mut q = sfq(SfqParams::default());
        for _ in 0..4 {
            q.enqueue(pkt(1, 1000), Time(0)).unwrap();
        }
        for _ in 0..4 {
            q.enqueue(pkt(2, 1000), Time(0)).unwrap();
        }
        // quantum 1514: each flow sends two 1000-byte packets per turn (1514 → 514 → -486).
        let order: Vec<u32> = (0..8)
            .map(|_| q.dequeue(Time(0)).packet().unwrap().flow_hash)
            .collect();
        assert_eq!(order, vec![1, 1, 2, 2, 1, 1, 2, 2]);
        assert_eq!(q.dequeue(Time(0)), Dequeued::Empty);
        q.stats().check_conservation().unwrap();
        assert_eq!(q.active_flows(), 0);
    }

    #[test]
    fn depth_refuses_and_limit_drops_from_longest_tail() {
        let mut q = sfq(SfqParams {
            depth: 3,
            limit: 4,
            ..Default::default()
        });
        for i in 0..3 {
            q.enqueue(pkt(1, 100 + i), Time(0)).unwrap();
        }
        let d = q.enqueue(pkt(1, 999), Time(0)).unwrap_err();
        assert_eq!(d.reason, DropReason::FlowLimit);
        q.enqueue(pkt(2, 500), Time(0)).unwrap();
        // Full (4): flow 1 is longest; its tail (102 bytes) goes.
        q.enqueue(pkt(3, 600), Time(0)).unwrap();
        let v = q.take_dropped().unwrap();
        assert_eq!((v.reason, v.packet.len), (DropReason::Overflow, 102));
        assert!(q.take_dropped().is_none());
        q.stats().check_conservation().unwrap();
        assert_eq!(q.backlog().packets, 4);
        let stats = q.flow_stats();
        assert_eq!(stats.iter().map(|s| s.drops).sum::<u64>(), 2);
        assert_eq!(stats.iter().map(|s| s.backlog_packets).sum::<u64>(), 4);
        let mut extra = Vec::new();
        q.extra_stats(&mut |n, v| extra.push((n, v)));
        assert!(extra.contains(&("active_flows", 3.0)));
    }

    #[test]
    fn no_free_slot_refuses() {
        let mut q = sfq(SfqParams {
            divisor: 16,
            flows: 1,
            ..Default::default()
        });
        q.enqueue(pkt(1, 100), Time(0)).unwrap();
        // Find a flow hashing to another bucket.
        let other = (2..100)
            .find(|&f| q.bucket(f, q.key) != q.bucket(1, q.key))
            .unwrap();
        assert_eq!(
            q.enqueue(pkt(other, 100), Time(0)).unwrap_err().reason,
            DropReason::FlowLimit
        );
        q.stats().check_conservation().unwrap();
    }

    #[test]
    fn perturbation_keeps_backlogged_flows_in_their_slot() {
        let mut q = sfq(SfqParams {
            perturb: Duration::from_secs(1),
            ..Default::default()
        });
        q.enqueue(pkt(7, 100), Time(0)).unwrap();
        q.enqueue(pkt(7, 101), Time(2_000_000_000)).unwrap(); // perturbation happens here
        assert_eq!(q.perturbations, 1);
        assert_eq!(q.active_flows(), 1);
        assert_eq!(q.old_active, 1);
        assert_eq!(q.dequeue(Time(2_000_000_000)).packet().unwrap().len, 100);
        assert_eq!(q.dequeue(Time(2_000_000_000)).packet().unwrap().len, 101);
        assert_eq!(q.old_active, 0);
        // Next perturbation due at 3 s; with a backlogged old slot it would be deferred.
        q.enqueue(pkt(7, 102), Time(3_000_000_000)).unwrap();
        assert_eq!(q.perturbations, 2);
    }
}
