//! One tin's flow table: 1024 flow queues found by 8-way set-associative hashing, the host
//! table for the dual/triple modes, and the three rotations (Linux net/sched/sch_cake.c
//! `cake_tin_data`, `cake_hash`'s table lookup).
//!
//! **Set association.** A flow hash selects a set of 8 queues (`hash % 1024`, rounded down to a
//! multiple of 8). A queue remembers the hash (`tags`) of the flow it serves; a packet goes to
//! the queue tagged with its hash, else to an idle queue of the set, and only when all 8 are
//! busy does it share a queue (a *collision*). Counted as `way_directs` (the first way hit),
//! `way_hits` (another way), `way_misses` (a new queue), `way_collisions`.
//! **Hosts.** Host hashes find their slot in the 1024-entry host table the same way; a slot
//! counts the bulk flows of that source (`srchost_bulk_flow_count`) and destination host.
//! **Rotations.** `new_flows`, `old_flows` and `decaying_flows` are intrusive doubly linked
//! lists of queue indices (`u16` links in each queue): every move is O(1), as the kernel's
//! `list_head`.
//!
//! The table is allocated when the tin first receives a packet and freed after the tin has been
//! idle (see the module documentation of [`super`]), so an idle tin costs a pointer.

use std::collections::VecDeque;

use super::cobalt::CobaltVars;
use super::hash::{FlowMode, PacketHashes};

/// Queues per tin (`CAKE_QUEUES`).
pub const CAKE_QUEUES: usize = 1024;
/// Ways of the set-associative hash (`CAKE_SET_WAYS`).
pub const CAKE_SET_WAYS: usize = 8;
const NIL: u16 = u16::MAX;

/// A queued packet with its arrival time and the size charged for it.
#[derive(Debug)]
pub struct Slot<P> {
    pub pkt: P,
    pub enqueue_time: u64,
    pub adjusted_len: u32,
}

/// Where a queue is in the rotations (`CAKE_SET_*`).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub enum FlowSet {
    /// Not in any rotation.
    #[default]
    None,
    Sparse,
    /// Counted as sparse, but served in the bulk rotation.
    SparseWait,
    Bulk,
    /// Empty, on `decaying_flows` until COBALT's state has come to rest.
    Decaying,
}

/// The list a queue is linked on.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Rotation {
    New = 0,
    Old = 1,
    Decaying = 2,
}

/// One flow queue (`cake_flow`).
#[derive(Debug)]
pub struct Flow<P> {
    pub q: VecDeque<Slot<P>>,
    /// Bytes queued (`backlogs[]`).
    pub backlog: u32,
    pub deficit: i32,
    pub dropped: u32,
    pub cvars: CobaltVars,
    pub srchost: u16,
    pub dsthost: u16,
    pub set: FlowSet,
    on: Option<Rotation>,
    prev: u16,
    next: u16,
}

impl<P> Default for Flow<P> {
    fn default() -> Self {
        Flow {
            q: VecDeque::new(),
            backlog: 0,
            deficit: 0,
            dropped: 0,
            cvars: CobaltVars::default(),
            srchost: 0,
            dsthost: 0,
            set: FlowSet::None,
            on: None,
            prev: NIL,
            next: NIL,
        }
    }
}

/// One host slot (`cake_host`).
#[derive(Copy, Clone, Debug, Default)]
pub struct Host {
    pub srchost_tag: u32,
    pub dsthost_tag: u32,
    pub srchost_bulk_flow_count: u16,
    pub dsthost_bulk_flow_count: u16,
}

/// The set-associative hash counters.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct WayStats {
    pub directs: u64,
    pub hits: u64,
    pub misses: u64,
    pub collisions: u64,
}

#[derive(Copy, Clone, Debug)]
struct List {
    head: u16,
    tail: u16,
}

/// A tin's queues, hosts and rotations.
#[derive(Debug)]
pub struct TinTable<P> {
    pub flows: Vec<Flow<P>>,
    tags: Vec<u32>,
    pub hosts: Vec<Host>,
    lists: [List; 3],
}

impl<P> Default for TinTable<P> {
    fn default() -> Self {
        Self::new()
    }
}

impl<P> TinTable<P> {
    pub fn new() -> Self {
        TinTable {
            flows: (0..CAKE_QUEUES).map(|_| Flow::default()).collect(),
            tags: vec![0; CAKE_QUEUES],
            hosts: vec![Host::default(); CAKE_QUEUES],
            lists: [List {
                head: NIL,
                tail: NIL,
            }; 3],
        }
    }

    /// Heap bytes held (for the memory figures).
    pub fn heap_bytes(&self) -> usize {
        let slots: usize = self.flows.iter().map(|f| f.q.capacity()).sum();
        self.flows.capacity() * std::mem::size_of::<Flow<P>>()
            + slots * std::mem::size_of::<Slot<P>>()
            + self.tags.capacity() * 4
            + self.hosts.capacity() * std::mem::size_of::<Host>()
    }

    /// The first queue of a rotation.
    #[inline]
    pub fn front(&self, r: Rotation) -> Option<usize> {
        let h = self.lists[r as usize].head;
        (h != NIL).then_some(h as usize)
    }

    /// Unlink queue `i` from the rotation it is on, if any.
    fn unlink(&mut self, i: usize) {
        let Some(r) = self.flows[i].on.take() else {
            return;
        };
        let (prev, next) = (self.flows[i].prev, self.flows[i].next);
        match prev {
            NIL => self.lists[r as usize].head = next,
            p => self.flows[p as usize].next = next,
        }
        match next {
            NIL => self.lists[r as usize].tail = prev,
            n => self.flows[n as usize].prev = prev,
        }
        self.flows[i].prev = NIL;
        self.flows[i].next = NIL;
    }

    /// Move queue `i` to the tail of rotation `r` (`list_move_tail`, `list_add_tail`).
    pub fn move_tail(&mut self, i: usize, r: Rotation) {
        self.unlink(i);
        let l = &mut self.lists[r as usize];
        let tail = l.tail;
        l.tail = i as u16;
        if tail == NIL {
            l.head = i as u16;
        } else {
            self.flows[tail as usize].next = i as u16;
        }
        let f = &mut self.flows[i];
        f.prev = tail;
        f.next = NIL;
        f.on = Some(r);
    }

    /// Take queue `i` out of every rotation (`list_del_init`).
    pub fn remove(&mut self, i: usize) {
        self.unlink(i);
    }

    /// Queues on the new and old rotations (those that may hold packets).
    pub fn active(&self) -> impl Iterator<Item = usize> + '_ {
        [Rotation::New, Rotation::Old]
            .into_iter()
            .flat_map(move |r| {
                let mut i = self.lists[r as usize].head;
                std::iter::from_fn(move || {
                    if i == NIL {
                        return None;
                    }
                    let cur = i;
                    i = self.flows[cur as usize].next;
                    Some(cur as usize)
                })
            })
    }

    /// One more (`up`) or one fewer bulk flow for queue `i`'s hosts, in the modes that count
    /// them (`cake_inc/dec_srchost/dsthost_bulk_flow_count`).
    pub fn host_bulk(&mut self, i: usize, mode: FlowMode, up: bool) {
        let (s, d) = (
            self.flows[i].srchost as usize,
            self.flows[i].dsthost as usize,
        );
        if mode.dual_src() {
            let c = &mut self.hosts[s].srchost_bulk_flow_count;
            *c = if up {
                (*c + 1).min(CAKE_QUEUES as u16)
            } else {
                c.saturating_sub(1)
            };
        }
        if mode.dual_dst() {
            let c = &mut self.hosts[d].dsthost_bulk_flow_count;
            *c = if up {
                (*c + 1).min(CAKE_QUEUES as u16)
            } else {
                c.saturating_sub(1)
            };
        }
    }

    /// The larger bulk-flow count of queue `i`'s hosts, at least 1 (the quantum divisor).
    #[inline]
    pub fn host_load(&self, i: usize, mode: FlowMode) -> u32 {
        let f = &self.flows[i];
        let mut load = 1u16;
        if mode.dual_src() {
            load = load.max(self.hosts[f.srchost as usize].srchost_bulk_flow_count);
        }
        if mode.dual_dst() {
            load = load.max(self.hosts[f.dsthost as usize].dsthost_bulk_flow_count);
        }
        load as u32
    }

    /// The queue for a packet's hashes (`cake_hash`'s lookup): tags it, and attaches its hosts
    /// when the queue is (re)allocated. O(ways).
    pub fn lookup(&mut self, h: PacketHashes, mode: FlowMode, ways: &mut WayStats) -> usize {
        let flow_hash = h.flow;
        let reduced = flow_hash as usize % CAKE_QUEUES;
        if self.tags[reduced] == flow_hash && self.flows[reduced].set != FlowSet::None {
            ways.directs += 1;
            return reduced;
        }
        let inner = reduced % CAKE_SET_WAYS;
        let outer = reduced - inner;
        let mut k = inner;
        let mut allocate = None;
        for i in 0..CAKE_SET_WAYS {
            if self.tags[outer + k] == flow_hash {
                if i != 0 {
                    ways.hits += 1;
                }
                allocate = Some(self.flows[outer + k].set == FlowSet::None);
                break;
            }
            k = (k + 1) % CAKE_SET_WAYS;
        }
        if allocate.is_none() {
            for _ in 0..CAKE_SET_WAYS {
                if self.flows[outer + k].set == FlowSet::None {
                    ways.misses += 1;
                    allocate = Some(true);
                    break;
                }
                k = (k + 1) % CAKE_SET_WAYS;
            }
        }
        if allocate.is_none() {
            // Every way busy: share the original queue, re-homed to this packet's hosts.
            ways.collisions += 1;
            allocate = Some(true);
            if self.flows[outer + k].set == FlowSet::Bulk {
                self.host_bulk(outer + k, mode, false);
            }
        }
        let idx = outer + k;
        self.tags[idx] = flow_hash;
        if allocate == Some(true) {
            if mode.dual_src() {
                let slot = self.host_slot(h.srchost, true);
                self.flows[idx].srchost = slot as u16;
            }
            if mode.dual_dst() {
                let slot = self.host_slot(h.dsthost, false);
                self.flows[idx].dsthost = slot as u16;
            }
            if self.flows[idx].set == FlowSet::Bulk {
                self.host_bulk(idx, mode, true);
            }
        }
        idx
    }

    /// The host slot tagged `hash` in its set, else the first slot of the set without bulk
    /// flows (else the first of the set), re-tagged.
    fn host_slot(&mut self, hash: u32, src: bool) -> usize {
        let idx = hash as usize % CAKE_QUEUES;
        let inner = idx % CAKE_SET_WAYS;
        let outer = idx - inner;
        let tag = |h: &Host| if src { h.srchost_tag } else { h.dsthost_tag };
        let count = |h: &Host| {
            if src {
                h.srchost_bulk_flow_count
            } else {
                h.dsthost_bulk_flow_count
            }
        };
        let mut k = inner;
        for _ in 0..CAKE_SET_WAYS {
            if tag(&self.hosts[outer + k]) == hash {
                return outer + k;
            }
            k = (k + 1) % CAKE_SET_WAYS;
        }
        for _ in 0..CAKE_SET_WAYS {
            if count(&self.hosts[outer + k]) == 0 {
                break;
            }
            k = (k + 1) % CAKE_SET_WAYS;
        }
        let h = &mut self.hosts[outer + k];
        if src {
            h.srchost_tag = hash;
        } else {
            h.dsthost_tag = hash;
        }
        outer + k
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(flow: u32) -> PacketHashes {
        PacketHashes {
            flow,
            srchost: 1,
            dsthost: 2,
        }
    }

    #[test]
    fn eight_flows_of_one_set_get_eight_queues_the_ninth_collides() {
        let mut t: TinTable<()> = TinTable::new();
        let mut ways = WayStats::default();
        let mut seen = Vec::new();
        // Hashes 0, 1024, 2048, … all reduce to queue 0: one set.
        for n in 0..8u32 {
            let i = t.lookup(h(n * 1024), FlowMode::Flows, &mut ways);
            t.flows[i].set = FlowSet::Sparse;
            seen.push(i);
        }
        seen.sort();
        assert_eq!(seen, (0..8).collect::<Vec<_>>());
        assert_eq!(ways.misses, 7);
        let i = t.lookup(h(8 * 1024), FlowMode::Flows, &mut ways);
        assert!(i < 8);
        assert_eq!(ways.collisions, 1);
        // A known flow is found again: directly in its first way, or indirectly.
        let j = t.lookup(h(3 * 1024), FlowMode::Flows, &mut ways);
        assert_eq!(j, 3);
        assert_eq!(ways.hits, 1);
        // The ninth flow took over queue 0's tag: it is now found directly.
        let d = ways.directs;
        assert_eq!(t.lookup(h(8 * 1024), FlowMode::Flows, &mut ways), 0);
        assert_eq!(ways.directs, d + 1);
    }

    #[test]
    fn rotations_move_in_constant_time() {
        let mut t: TinTable<()> = TinTable::new();
        for i in [5, 9, 700] {
            t.move_tail(i, Rotation::New);
        }
        assert_eq!(t.front(Rotation::New), Some(5));
        t.move_tail(9, Rotation::Decaying);
        t.move_tail(5, Rotation::Old);
        assert_eq!(t.active().collect::<Vec<_>>(), vec![700, 5]);
        assert_eq!(t.front(Rotation::Decaying), Some(9));
        t.remove(9);
        assert_eq!(t.front(Rotation::Decaying), None);
        t.remove(700);
        t.remove(5);
        assert_eq!(t.active().count(), 0);
    }

    #[test]
    fn host_counts_scale_by_the_busier_host() {
        let mut t: TinTable<()> = TinTable::new();
        let mut ways = WayStats::default();
        let mode = FlowMode::TripleIsolate;
        // Three flows from source 1 to destination 2, one from source 3 to destination 2.
        for (f, s) in [(10, 1), (11, 1), (12, 1), (13, 3)] {
            let hs = PacketHashes {
                flow: f,
                srchost: s,
                dsthost: 2,
            };
            let i = t.lookup(hs, mode, &mut ways);
            t.flows[i].set = FlowSet::Bulk;
            t.host_bulk(i, mode, true);
        }
        assert_eq!(t.host_load(10, mode), 4); // destination 2 has 4
        assert_eq!(t.host_load(10, FlowMode::DualSrchost), 3);
        assert_eq!(t.host_load(13, FlowMode::DualSrchost), 1);
    }
}
