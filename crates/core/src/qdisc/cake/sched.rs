//! CAKE's enqueue and dequeue (Linux net/sched/sch_cake.c `cake_enqueue`, `cake_dequeue`,
//! `cake_drop`, `cake_advance_shaper`), as the [`Discipline`] hooks; see [`super`] for what
//! they promise and cost.

use super::ack_filter::{find_redundant, AckFilter};
use super::cobalt::Verdict;
use super::hash::{hash_packet, FlowMode};
use super::table::{FlowSet, Rotation, Slot, TinTable};
use super::{Cake, TinState, RECLAIM_AFTER};
use crate::packet::{Packet, L3};
use crate::qdisc::red::SplitMix;
use crate::qdisc::{Books, Dequeued, Discipline, DropReason, Dropped};
use crate::units::Time;

/// DSCP CAKE gives frames that are not IP (ARP…): CS7, network control.
const NON_IP_DSCP: u8 = 0x38;
/// Upper bound on queue visits per dequeue call (each visit sends, drops, refills a deficit or
/// retires a queue); reaching it answers `Empty` for this call rather than spinning.
const MAX_VISITS: u32 = 1 << 16;

/// `avg += (sample - avg) / 2^shift`, the kernel's `cake_ewma`.
fn ewma(avg: u64, sample: u64, shift: u32) -> u64 {
    avg - (avg >> shift) + (sample >> shift)
}

impl<P: Packet> Cake<P> {
    /// The tin of a packet; washes its DSCP when asked (`cake_select_tin`).
    fn select_tin(&self, pkt: &mut P) -> usize {
        let m = pkt.meta();
        let dscp = match m.l3 {
            L3::Other(_) => NON_IP_DSCP,
            _ => m.dscp(),
        };
        if self.p.wash && dscp != 0 && !matches!(m.l3, L3::Other(_)) {
            pkt.wash_dscp();
        }
        self.p.diffserv.tin_of(dscp)
    }

    /// A flow's next quantum: the tin's flow quantum divided by its host load, dithered
    /// (`cake_get_flow_quantum`).
    fn flow_quantum(rng: &mut SplitMix, t: &TinState<P>, idx: usize, mode: FlowMode) -> i32 {
        let div = 65535 / t.table.host_load(idx, mode);
        let dither = (rng.next_u64() & 0xffff) as u32;
        ((u32::from(t.rate.flow_quantum) * div + dither) >> 16) as i32
    }

    /// Charge `len` adjusted bytes to a tin's shaper and the global one (`cake_advance_shaper`).
    fn advance_shaper(&mut self, tin: usize, len: u32, now: u64, drop: bool) {
        if self.rate_ns == 0 {
            return;
        }
        let global_dur = ((len as u128 * self.rate_ns as u128) >> self.rate_shft) as u64;
        if let Some(b) = self.tins[tin].s.as_deref_mut() {
            let tin_dur = b.rate.duration(len);
            if b.time_next_packet < now {
                b.time_next_packet += tin_dur;
            } else if b.time_next_packet < now + tin_dur {
                b.time_next_packet = now + tin_dur;
            }
        }
        self.time_next_packet += global_dur;
        if !drop {
            self.failsafe_next_packet += global_dur + global_dur / 2;
        }
    }

    /// Drop the head of the longest queue of any tin (`cake_drop`). `false` if none.
    fn drop_longest(&mut self, now: u64) -> bool {
        let mut best: Option<(u32, usize, usize)> = None;
        for (ti, t) in self.tins.iter().enumerate() {
            let Some(s) = t.s.as_deref() else { continue };
            for i in s.table.active() {
                let b = s.table.flows[i].backlog;
                if b > 0 && best.is_none_or(|(bb, ..)| b > bb) {
                    best = Some((b, ti, i));
                }
            }
        }
        let Some((_, ti, i)) = best else {
            return false;
        };
        let tin = &mut self.tins[ti];
        let Some(s) = tin.s.as_deref_mut() else {
            return false;
        };
        let cp = s.rate.cparams;
        let f = &mut s.table.flows[i];
        let Some(slot) = f.q.pop_front() else {
            return false;
        };
        if f.cvars.queue_full(&cp, now) {
            s.unresponsive_flow_count += 1;
        }
        let len = slot.pkt.len();
        f.backlog -= len;
        f.dropped += 1;
        tin.stats.backlog -= len;
        tin.stats.dropped += 1;
        self.buffer_used -= u64::from(len);
        if self.p.ingress {
            self.advance_shaper(ti, slot.adjusted_len, now, true);
        }
        self.books.drop(slot.pkt, DropReason::Overflow);
        true
    }

    /// Free the state of every tin once the qdisc has been empty for [`RECLAIM_AFTER`].
    fn reclaim(&mut self, now: u64) {
        if self.idle_since == u64::MAX {
            self.idle_since = now;
        }
        if now.saturating_sub(self.idle_since) >= RECLAIM_AFTER.0 {
            for t in &mut self.tins {
                t.s = None;
            }
        }
    }

    /// Pick the tin to serve (`cake_dequeue`'s "choose a class to work on"); `None` if no tin
    /// has flows.
    fn choose_tin(&mut self, now: u64) -> Option<usize> {
        let busy = |s: &TinState<P>| s.sparse_flow_count + s.bulk_flow_count > 0;
        let n = self.tins.len();
        if self.rate_ns == 0 {
            // Unlimited: weighted DRR over the tins.
            let (mut wrapped, mut empty) = (false, true);
            let mut b = self.cur_tin.min(n - 1);
            loop {
                if let Some(s) = self.tins[b].s.as_deref_mut() {
                    if s.tin_deficit >= 0 && busy(s) {
                        break;
                    }
                    if s.tin_deficit <= 0 {
                        s.tin_deficit += i32::from(s.tin_quantum);
                    }
                    if busy(s) {
                        empty = false;
                    }
                }
                b += 1;
                if b >= n {
                    b = 0;
                    if wrapped {
                        if empty {
                            self.cur_tin = 0;
                            return None;
                        }
                    } else {
                        wrapped = true;
                    }
                }
            }
            self.cur_tin = b;
            Some(b)
        } else {
            // Shaped: the highest tin under its threshold, else the earliest due.
            let mut best_time = i64::MAX;
            let mut best = None;
            for (i, t) in self.tins.iter().enumerate() {
                let Some(s) = t.s.as_deref() else { continue };
                if busy(s) {
                    let to_pkt = s.time_next_packet.wrapping_sub(now) as i64;
                    if to_pkt <= 0 || to_pkt <= best_time {
                        best_time = to_pkt;
                        best = Some(i);
                    }
                }
            }
            if let Some(b) = best {
                self.cur_tin = b;
            }
            best
        }
    }
}

impl<P> TinState<P> {
    /// Retire queue `idx`, found empty: to the decaying rotation while COBALT still holds
    /// state, else out of the rotations (`cake_dequeue`'s empty-queue branch).
    fn retire(&mut self, idx: usize, now: u64, mode: FlowMode) {
        let tab = &mut self.table;
        let f = &mut tab.flows[idx];
        if f.cvars.queue_empty(&self.rate.cparams, now) {
            self.unresponsive_flow_count = self.unresponsive_flow_count.saturating_sub(1);
        }
        let set = f.set;
        let decaying = f.cvars.active(now);
        match set {
            FlowSet::Bulk => {
                self.bulk_flow_count -= 1;
                tab.host_bulk(idx, mode, false);
            }
            FlowSet::Sparse | FlowSet::SparseWait => self.sparse_flow_count -= 1,
            FlowSet::Decaying => self.decaying_flow_count -= 1,
            FlowSet::None => {}
        }
        if decaying {
            self.decaying_flow_count += 1;
            tab.flows[idx].set = FlowSet::Decaying;
            tab.move_tail(idx, Rotation::Decaying);
        } else {
            tab.flows[idx].set = FlowSet::None;
            tab.remove(idx);
        }
    }
}

impl<P: Packet> Discipline<P> for Cake<P> {
    fn books(&self) -> &Books<P> {
        &self.books
    }
    fn books_mut(&mut self) -> &mut Books<P> {
        &mut self.books
    }

    fn enqueue_inner(&mut self, mut pkt: P, now: Time) -> Result<(), Dropped<P>> {
        let now = now.0;
        let mode = self.p.isolation;
        let tin = self.select_tin(&mut pkt);
        let hashes = hash_packet(pkt.meta(), mode, self.key);
        let len = pkt.len();
        let adjusted_len = self.p.overhead.adjusted(len);
        let was_empty = self.books.backlog().packets <= 1;
        self.idle_since = u64::MAX;
        if self.tins[tin].s.is_none() {
            let (rate, tin_quantum) = self.tin_rate(tin);
            self.tins[tin].s = Some(Box::new(TinState {
                rate,
                tin_quantum,
                tin_deficit: 0,
                time_next_packet: 0,
                sparse_flow_count: 0,
                bulk_flow_count: 0,
                decaying_flow_count: 0,
                unresponsive_flow_count: 0,
                table: TinTable::new(),
            }));
        }
        let ack_mode = self.p.ack_filter;
        let slot = &mut self.tins[tin];
        let stats = &mut slot.stats;
        let Some(t) = slot.s.as_deref_mut() else {
            return Err(Dropped {
                packet: pkt,
                reason: DropReason::Overflow,
            });
        };
        // Keep the shapers from banking idle time.
        if stats.backlog == 0 {
            t.time_next_packet = t.time_next_packet.max(now);
            if was_empty && self.time_next_packet < now {
                self.time_next_packet = now;
                self.failsafe_next_packet = now;
            }
        }
        stats.max_skblen = stats.max_skblen.max(len);
        let idx = t.table.lookup(hashes, mode, &mut stats.ways);
        let f = &mut t.table.flows[idx];
        f.q.push_back(Slot {
            pkt,
            enqueue_time: now,
            adjusted_len,
        });
        let mut ack = None;
        let n = f.q.len();
        if ack_mode != AckFilter::Off && n > 1 {
            let trigger = &f.q[n - 1].pkt;
            let queued = f.q.iter().take(n - 1).map(|s| &s.pkt);
            ack = find_redundant(queued, trigger, ack_mode).and_then(|i| f.q.remove(i));
        }
        let ack_len = ack.as_ref().map_or(0, |s| s.pkt.len());
        let net = len - ack_len;
        f.backlog += net;
        stats.packets += 1;
        stats.bytes += u64::from(net);
        stats.backlog += net;
        self.buffer_used += u64::from(net);
        // Into the rotations.
        match t.table.flows[idx].set {
            FlowSet::None | FlowSet::Decaying => {
                if t.table.flows[idx].set == FlowSet::Decaying {
                    t.decaying_flow_count -= 1;
                }
                t.table.move_tail(idx, Rotation::New);
                t.table.flows[idx].set = FlowSet::Sparse;
                t.sparse_flow_count += 1;
                t.table.flows[idx].deficit = Self::flow_quantum(&mut self.rng, t, idx, mode);
            }
            FlowSet::SparseWait => {
                t.table.flows[idx].set = FlowSet::Bulk;
                t.sparse_flow_count -= 1;
                t.bulk_flow_count += 1;
                t.table.host_bulk(idx, mode, true);
            }
            FlowSet::Sparse | FlowSet::Bulk => {}
        }
        if let Some(s) = ack {
            stats.ack_drops += 1;
            if self.p.ingress {
                self.advance_shaper(tin, s.adjusted_len, now, true);
            }
            self.books.drop(s.pkt, DropReason::AckFilter);
        }
        self.buffer_max_used = self.buffer_max_used.max(self.buffer_used);
        let mut dropped = 0;
        while self.buffer_used > self.buffer_limit && self.drop_longest(now) {
            dropped += 1;
        }
        self.tins[tin].stats.drop_overlimit += dropped;
        Ok(())
    }

    fn dequeue_inner(&mut self, now: Time) -> Dequeued<P> {
        let now = now.0;
        let mode = self.p.isolation;
        let ingress = self.p.ingress;
        let mut visits = 0u32;
        // As the kernel's: only the first queue visit of a call looks at the decaying rotation
        // first (to retire one), also after going back to choosing a tin.
        let mut first_flow = true;
        'begin: loop {
            if self.books.backlog().packets == 0 {
                self.reclaim(now);
                return Dequeued::Empty;
            }
            if self.rate_ns != 0 && self.time_next_packet > now && self.failsafe_next_packet > now {
                return Dequeued::NotBefore(Time(
                    self.time_next_packet.min(self.failsafe_next_packet),
                ));
            }
            let Some(ti) = self.choose_tin(now) else {
                return Dequeued::Empty;
            };
            'retry: loop {
                visits += 1;
                if visits > MAX_VISITS {
                    return Dequeued::Empty;
                }
                let Some(t) = self.tins[ti].s.as_deref_mut() else {
                    continue 'begin;
                };
                let tab = &mut t.table;
                let head = match tab.front(Rotation::Decaying) {
                    Some(i) if first_flow => Some(i),
                    _ => tab
                        .front(Rotation::New)
                        .or_else(|| tab.front(Rotation::Old))
                        .or_else(|| tab.front(Rotation::Decaying)),
                };
                let Some(idx) = head else { continue 'begin };
                first_flow = false;
                // DRR++: a queue out of credit goes to the old rotation with more.
                if tab.flows[idx].deficit <= 0 {
                    if tab.flows[idx].set == FlowSet::Sparse {
                        if tab.flows[idx].q.is_empty() {
                            tab.flows[idx].set = FlowSet::SparseWait;
                        } else {
                            t.sparse_flow_count -= 1;
                            t.bulk_flow_count += 1;
                            tab.host_bulk(idx, mode, true);
                            tab.flows[idx].set = FlowSet::Bulk;
                        }
                    }
                    t.table.move_tail(idx, Rotation::Old);
                    let q = Self::flow_quantum(&mut self.rng, t, idx, mode);
                    t.table.flows[idx].deficit += q;
                    continue 'retry;
                }
                // A packet through COBALT.
                loop {
                    let tin = &mut self.tins[ti];
                    let stats = &mut tin.stats;
                    let Some(t) = tin.s.as_deref_mut() else {
                        continue 'begin;
                    };
                    let Some(slot) = t.table.flows[idx].q.pop_front() else {
                        t.retire(idx, now, mode);
                        continue 'begin;
                    };
                    let len = slot.pkt.len();
                    let f = &mut t.table.flows[idx];
                    f.backlog -= len;
                    stats.backlog -= len;
                    self.buffer_used -= u64::from(len);
                    let random = if f.cvars.p_drop != 0 {
                        self.rng.next_u64() as u32
                    } else {
                        u32::MAX
                    };
                    let bulk = if ingress {
                        u32::from(t.bulk_flow_count)
                    } else {
                        0
                    };
                    let sojourn = now.saturating_sub(slot.enqueue_time);
                    let adj = slot.adjusted_len;
                    let mut pkt = slot.pkt;
                    let verdict = f.cvars.should_drop(
                        &t.rate.cparams,
                        now,
                        sojourn,
                        bulk,
                        || pkt.mark_ce(),
                        random,
                    );
                    if verdict != Verdict::Drop || f.q.is_empty() {
                        if f.cvars.ecn_marked {
                            stats.ecn_mark += 1;
                            self.books.mark(1);
                        }
                        stats.avge_delay = ewma(stats.avge_delay, sojourn, 8);
                        let up = if sojourn > stats.peak_delay { 2 } else { 8 };
                        stats.peak_delay = ewma(stats.peak_delay, sojourn, up);
                        let down = if sojourn < stats.base_delay { 2 } else { 8 };
                        stats.base_delay = ewma(stats.base_delay, sojourn, down);
                        f.deficit -= adj as i32;
                        t.tin_deficit -= adj as i32;
                        self.advance_shaper(ti, adj, now, false);
                        return Dequeued::Packet(pkt);
                    }
                    f.dropped += 1;
                    stats.dropped += 1;
                    if ingress {
                        f.deficit -= adj as i32;
                        t.tin_deficit -= adj as i32;
                        self.advance_shaper(ti, adj, now, true);
                    }
                    self.books.drop(pkt, DropReason::Aqm);
                    if ingress {
                        continue 'retry;
                    }
                }
            }
        }
    }

    fn kind_inner(&self) -> &'static str {
        "cake"
    }

    fn visit_tins_inner(&self, f: &mut dyn FnMut(&super::TinView)) {
        self.visit_tin_views(f)
    }

    fn extra_stats_inner(&self, f: &mut dyn FnMut(&'static str, f64)) {
        let mut sum = super::TinStats::default();
        let (mut sparse, mut bulk, mut unresp) = (0u64, 0u64, 0u64);
        for t in &self.tins {
            sum.ack_drops += t.stats.ack_drops;
            sum.ecn_mark += t.stats.ecn_mark;
            sum.drop_overlimit += t.stats.drop_overlimit;
            sum.ways.collisions += t.stats.ways.collisions;
            if let Some(s) = t.s.as_deref() {
                sparse += u64::from(s.sparse_flow_count + s.decaying_flow_count);
                bulk += u64::from(s.bulk_flow_count);
                unresp += u64::from(s.unresponsive_flow_count);
            }
        }
        f("memory_used", self.buffer_max_used as f64);
        f("memory_limit", self.buffer_limit as f64);
        f("ack_drops", f64::from(sum.ack_drops));
        f("ecn_marks", f64::from(sum.ecn_mark));
        f("drop_overlimit", f64::from(sum.drop_overlimit));
        f("way_collisions", sum.ways.collisions as f64);
        f("sparse_flows", sparse as f64);
        f("bulk_flows", bulk as f64);
        f("unresponsive_flows", unresp as f64);
        f("tins_allocated", self.tables_allocated() as f64);
    }
}
