//! How packets travel between the sources, the router and the sinks, outside the bottleneck's
//! scheduler: delay lines, the `[path]` impairments after the bottleneck, the return path
//! (through the `[uplink]`'s scheduler and wire when there is one) and the ACKs in flight.
//!
//! A delay line is a FIFO whose entries are already in `(time, seq)` order (every entry is
//! pushed at `now + delay` with `now` non-decreasing), so the loop only looks at its front: no
//! packet in flight is a heap event. The one exception is the bottleneck's line with `[path]`
//! impairments, whose jitter and reordering release packets out of order: there each packet is
//! inserted at its place, and the order still holds.

use std::collections::VecDeque;

use linkshare_core::PacketMeta;

use super::World;
use crate::packet::{PktKind, SimPacket};
use crate::tcp::AckInfo;

/// ACKs in flight on the return paths: their SACK blocks and window live here, the packet holds
/// the slot number (packets stay small: `crate::packet`).
#[derive(Default)]
pub(super) struct AckTable {
    slots: Vec<AckInfo>,
    free: Vec<u32>,
}

impl AckTable {
    pub(super) fn put(&mut self, a: AckInfo) -> u32 {
        match self.free.pop() {
            Some(i) => {
                self.slots[i as usize] = a;
                i
            }
            None => {
                self.slots.push(a);
                (self.slots.len() - 1) as u32
            }
        }
    }
    pub(super) fn take(&mut self, i: u32) -> Option<AckInfo> {
        let a = *self.slots.get(i as usize)?;
        self.free.push(i);
        Some(a)
    }
}

/// What leaving a delay line means.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(super) enum LineKind {
    /// Access path: the packet reaches the router.
    Access,
    /// Bottleneck propagation: the packet reaches its sink.
    Link,
    /// Return path: the ACK / echo reply reaches its source.
    Return,
}

/// A delay line. Entries are pushed at `now + delay` with `now` non-decreasing, so the queue is
/// sorted by `(time, seq)`; the bottleneck's line with `[path]` impairments (line 0) inserts each
/// packet at its place in that order instead (jitter and `reorder` release packets out of order).
pub(super) struct Line {
    pub(super) delay: u64,
    pub(super) kind: LineKind,
    pub(super) q: VecDeque<(u64, u64, SimPacket)>,
}

/// Swap a packet's addresses and ports: an ACK or echo reply goes from the sink to the source.
pub(super) fn reversed(mut m: PacketMeta) -> PacketMeta {
    std::mem::swap(&mut m.src, &mut m.dst);
    std::mem::swap(&mut m.src_port, &mut m.dst_port);
    m
}

impl World<'_> {
    /// An ACK or echo reply leaves the sink: through the uplink if there is one, then over its
    /// flow's return delay.
    pub(super) fn send_back(&mut self, p: SimPacket) {
        match &mut self.up {
            Some(u) => {
                u.offer(p, &mut self.eng);
                self.free_dropped_acks();
            }
            None => {
                let li = self.flows[p.flow as usize].return_line as usize;
                self.push_line(li, p);
            }
        }
    }

    /// The uplink's wire finished a packet: it starts its return delay.
    pub(super) fn up_tx_done(&mut self) {
        let Some(u) = &mut self.up else { return };
        if let Some(p) = u.on_tx_done(&mut self.eng) {
            let li = self.flows[p.flow as usize].return_line as usize;
            self.push_line(li, p);
        }
        self.free_dropped_acks();
    }

    /// Give back the table slots of ACKs the uplink dropped (queue limit, AQM, ACK filter).
    pub(super) fn free_dropped_acks(&mut self) {
        let Some(dropped) = self.up.as_mut().and_then(|u| u.dropped.as_mut()) else {
            return;
        };
        for p in dropped.drain(..) {
            if p.kind == PktKind::Ack {
                let _ = self.acks.take(p.payload);
            }
        }
    }

    /// A packet leaves the bottleneck's wire towards its sink: over the link's delay, through
    /// the `[path]` impairments if any (lost, released twice, or out of order).
    #[inline]
    pub(super) fn toward_sink(&mut self, p: SimPacket) {
        let Some(imp) = &mut self.path else {
            if self.link.delay_ns == 0 {
                self.deliver(p);
            } else {
                self.push_line(0, p);
            }
            return;
        };
        let fate = imp.admit(self.eng.now(), self.link.delay_ns);
        if fate.releases().is_empty() {
            self.path_lost[p.flow as usize] += 1;
        }
        for &t in fate.releases() {
            let seq = self.eng.next_seq();
            let q = &mut self.lines[0].q;
            let k = q.partition_point(|e| (e.0, e.1) <= (t, seq));
            // A duplicated packet is released twice.
            q.insert(k, (t, seq, p.clone()));
        }
    }

    #[inline]
    pub(super) fn push_line(&mut self, li: usize, p: SimPacket) {
        let seq = self.eng.next_seq();
        let l = &mut self.lines[li];
        l.q.push_back((self.eng.now() + l.delay, seq, p));
    }
}
