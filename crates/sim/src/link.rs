//! The router's egress onto the bottleneck: scheduler → device buffer → wire → propagation.
//!
//! ```text
//!  arrivals ──enqueue──▶ scheduler (the policy's qdisc)
//!                            │ dequeue, only when the device buffer has room
//!                            ▼
//!                     device buffer (driver / NIC ring, FIFO, `device_buffer` bytes)
//!                            │
//!                            ▼
//!                     wire (serialises one packet at `rate`) ──`delay`──▶ sink
//! ```
//!
//! ## The pull rule
//! The wire holds the packet being serialised; the device buffer holds packets waiting behind it.
//! The scheduler is asked for a packet whenever
//!
//! * the wire is idle (the packet goes straight onto it), or
//! * the bytes waiting in the device buffer plus one full-size packet (`mtu + overhead`) fit in
//!   `device_buffer`: `waiting + mtu + overhead ≤ device_buffer`.
//!
//! So the buffer never holds more than `device_buffer` bytes, whatever the sizes of the packets
//! pulled, and `device_buffer = 0` (or anything below one MTU) means the scheduler decides the very
//! next packet on the wire at the instant the wire frees up — the ideal that seed 001 §4.2 reaches
//! by shrinking the ATM driver's buffer. Larger values reproduce the driver buffering that defeats
//! link sharing (seed 001 §5): packets leave the scheduler early and wait in a FIFO it cannot
//! reorder. The scheduler is pulled after every arrival, every end of transmission and every
//! wake-up; it is pulled repeatedly until the rule above says stop or it has nothing to give.
//!
//! ## Throttled schedulers and `timer_hz`
//! `Dequeued::NotBefore(t)` arms a wake-up at `t` rounded **up** to the next multiple of
//! `1/timer_hz` seconds (exactly `ceil(t · hz / 10⁹) · 10⁹ / hz` ns, itself rounded up), as a
//! kernel timer of that frequency would fire; `timer_hz = 0` wakes at exactly `t`. An arrival or
//! the end of a transmission also pulls the scheduler (ACKs are triggers too, seed 000), so the
//! timer only matters when nothing else happens. At most one wake-up is pending; an earlier one
//! replaces a later one, a stale one is ignored.
//!
//! ## The scheduler's clock and `clock_hz`
//! With `clock_hz = 0` the scheduler is told the exact time. With `clock_hz > 0` every `now` it is
//! given (at enqueue and dequeue) is rounded **down** to a multiple of `1/clock_hz` s, as Linux
//! 2.4's default packet-scheduler clock (`PSCHED_JIFFIES`) was: time, and so a class's tokens,
//! advance only at ticks, and a class can send at most its bucket per tick however often it is
//! pulled (seed 002). A wake-up is then also rounded up to the clock's next tick, where the
//! scheduler can first see the time it asked for.

use std::collections::VecDeque;

use linkshare_core::{Dequeued, Qdisc, Time};

use crate::engine::{Engine, Ev};
use crate::packet::SimPacket;
use crate::scenario::LinkSpec;

/// Per-flow accounting of what the scheduler holds and dropped.
#[derive(Clone, Debug, Default)]
pub struct FlowQueue {
    /// Bytes of the flow queued in the scheduler.
    pub backlog: u64,
    /// Packets of the flow the scheduler refused or dropped, since the start.
    pub drops: u64,
}

/// What happened to a packet offered to the router.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Offered {
    Queued,
    Dropped,
}

pub struct Link {
    pub qdisc: Box<dyn Qdisc<SimPacket>>,
    rate_bps: u64,
    pub delay_ns: u64,
    timer_hz: u64,
    /// Resolution of the clock the scheduler sees; 0 = exact.
    clock_hz: u64,
    /// `mtu + overhead`: the room the pull rule asks for.
    full_packet: u64,
    device_cap: u64,
    device: VecDeque<SimPacket>,
    device_bytes: u64,
    /// The packet being serialised.
    wire: Option<SimPacket>,
    /// Pending wake-up time, `u64::MAX` when none.
    wake_at: u64,
    /// `(time, seq)` at which the wire finishes its packet, if it is busy.
    pub tx_end: Option<(u64, u64)>,
    pub flows: Vec<FlowQueue>,
    /// Bytes and packets that finished serialisation.
    pub tx_bytes: u64,
    pub tx_packets: u64,
}

impl Link {
    pub fn new(spec: &LinkSpec, qdisc: Box<dyn Qdisc<SimPacket>>, nflows: usize) -> Self {
        Link {
            qdisc,
            rate_bps: spec.rate.0,
            delay_ns: spec.delay.0,
            timer_hz: spec.timer_hz as u64,
            clock_hz: spec.clock_hz as u64,
            full_packet: spec.mtu as u64 + spec.overhead as u64,
            device_cap: spec.device_buffer,
            device: VecDeque::with_capacity(64),
            device_bytes: 0,
            wire: None,
            wake_at: u64::MAX,
            tx_end: None,
            flows: vec![FlowQueue::default(); nflows],
            tx_bytes: 0,
            tx_packets: 0,
        }
    }

    /// Serialisation time of `bytes` at the link rate, rounded up to the nanosecond.
    #[inline]
    pub fn tx_time(&self, bytes: u32) -> u64 {
        (bytes as u64 * 8_000_000_000).div_ceil(self.rate_bps)
    }

    /// `t` rounded up to the timer's tick.
    pub fn round_to_tick(&self, t: u64) -> u64 {
        round_up_to_tick(t, self.timer_hz)
    }

    /// The time the scheduler is told at `now`: rounded down to the clock's tick.
    #[inline]
    fn sched_now(&self, now: u64) -> Time {
        Time(round_down_to_tick(now, self.clock_hz))
    }

    /// Bytes waiting in the device buffer (not counting the wire).
    pub fn device_bytes(&self) -> u64 {
        self.device_bytes
    }

    /// Offer a packet to the router's scheduler, then pull.
    #[inline]
    pub fn offer(&mut self, pkt: SimPacket, eng: &mut Engine) -> Offered {
        let now = eng.now();
        let len = pkt.meta.len as u64;
        let flow = pkt.flow as usize;
        let r = match self.qdisc.enqueue(pkt, self.sched_now(now)) {
            Ok(()) => {
                self.flows[flow].backlog += len;
                Offered::Queued
            }
            Err(d) => {
                self.flows[d.packet.flow as usize].drops += 1;
                Offered::Dropped
            }
        };
        self.collect_drops();
        self.pull(eng);
        r
    }

    fn collect_drops(&mut self) {
        while let Some(d) = self.qdisc.take_dropped() {
            let f = &mut self.flows[d.packet.flow as usize];
            f.drops += 1;
            f.backlog = f.backlog.saturating_sub(d.packet.meta.len as u64);
        }
    }

    #[inline]
    fn has_room(&self) -> bool {
        self.wire.is_none() || self.device_bytes + self.full_packet <= self.device_cap
    }

    /// Pull the scheduler while the device has room (the rule in the module docs).
    pub fn pull(&mut self, eng: &mut Engine) {
        let now = eng.now();
        let sched_now = self.sched_now(now);
        while self.has_room() {
            match self.qdisc.dequeue(sched_now) {
                Dequeued::Packet(p) => {
                    let f = &mut self.flows[p.flow as usize];
                    f.backlog = f.backlog.saturating_sub(p.meta.len as u64);
                    if self.wire.is_none() {
                        self.start_tx(p, eng);
                    } else {
                        self.device_bytes += p.meta.len as u64;
                        self.device.push_back(p);
                    }
                }
                Dequeued::Empty => break,
                Dequeued::NotBefore(t) => {
                    let at = round_up_to_tick(self.round_to_tick(t.0), self.clock_hz).max(now);
                    if at < self.wake_at {
                        self.wake_at = at;
                        eng.at(at, Ev::Wake);
                    }
                    break;
                }
            }
        }
        self.collect_drops();
    }

    fn start_tx(&mut self, p: SimPacket, eng: &mut Engine) {
        let t = self.tx_time(p.meta.len);
        self.wire = Some(p);
        self.tx_end = Some((eng.now() + t, eng.next_seq()));
    }

    /// The wake-up timer fired at `now`; returns false for a stale timer (ignored).
    pub fn on_wake(&mut self, eng: &mut Engine) -> bool {
        if eng.now() != self.wake_at {
            return false;
        }
        self.wake_at = u64::MAX;
        self.pull(eng);
        true
    }

    /// The wire finished its packet: returns it (it now propagates for `delay_ns`), moves the next
    /// one from the device buffer onto the wire and pulls the scheduler.
    pub fn on_tx_done(&mut self, eng: &mut Engine) -> Option<SimPacket> {
        self.tx_end = None;
        let done = self.wire.take();
        if let Some(p) = &done {
            self.tx_bytes += p.meta.len as u64;
            self.tx_packets += 1;
        }
        if let Some(next) = self.device.pop_front() {
            self.device_bytes -= next.meta.len as u64;
            self.start_tx(next, eng);
        }
        self.pull(eng);
        done
    }
}

/// `t` (ns) rounded up to a multiple of `1/hz` seconds; `hz = 0` leaves it unchanged.
pub fn round_up_to_tick(t: u64, hz: u64) -> u64 {
    if hz == 0 {
        return t;
    }
    let ticks = (t as u128 * hz as u128).div_ceil(1_000_000_000);
    let ns = (ticks * 1_000_000_000).div_ceil(hz as u128);
    ns.min(u64::MAX as u128) as u64
}

/// `t` (ns) rounded down to a multiple of `1/hz` seconds; `hz = 0` leaves it unchanged.
pub fn round_down_to_tick(t: u64, hz: u64) -> u64 {
    if hz == 0 {
        return t;
    }
    let ticks = t as u128 * hz as u128 / 1_000_000_000;
    let ns = (ticks * 1_000_000_000).div_ceil(hz as u128);
    ns.min(t as u128) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_round_down() {
        assert_eq!(round_down_to_tick(12_345, 0), 12_345);
        assert_eq!(round_down_to_tick(19_999_999, 100), 10_000_000);
        assert_eq!(round_down_to_tick(20_000_000, 100), 20_000_000);
        assert_eq!(round_down_to_tick(9_999_999, 100), 0);
        // 1024 Hz: the second tick starts at 1953125 ns.
        assert_eq!(round_down_to_tick(1_953_125, 1024), 1_953_125);
        assert_eq!(round_down_to_tick(1_953_124, 1024), 976_563);
    }

    #[test]
    fn ticks_round_up() {
        assert_eq!(round_up_to_tick(1, 0), 1);
        assert_eq!(round_up_to_tick(1, 100), 10_000_000);
        assert_eq!(round_up_to_tick(10_000_000, 100), 10_000_000);
        assert_eq!(round_up_to_tick(10_000_001, 1000), 11_000_000);
        assert_eq!(round_up_to_tick(0, 1000), 0);
        // 1024 Hz: tick = 976562.5 ns; the second tick is at 1953125 ns.
        assert_eq!(round_up_to_tick(1_000_000, 1024), 1_953_125);
    }
}
