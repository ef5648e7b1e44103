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
//! The device model — the pull rule (`waiting + mtu + overhead ≤ device_buffer`, or an idle
//! wire), exact serialisation at `rate`, `timer_hz` rounding of wake-ups up to the timer's tick,
//! `clock_hz` rounding of the scheduler's `now` down to the clock's tick, at most one pending
//! wake-up — is [`linkshare_core::egress`], shared with the real shaper (`crates/router`), so the
//! simulator and the shaper cannot disagree about when a packet leaves. The model holds the
//! packets in the device buffer and on the wire itself (`Egress<SimPacket>`) and counts what the
//! wire sent. This file is the simulator's adapter and adds only what the engine and the report
//! need: the model's instants become engine events (the wire's end of transmission under a
//! `(time, seq)` key, the wake-up timer), and each flow's backlog in the scheduler and drops are
//! counted.
//!
//! The scheduler is pulled after every arrival, every end of transmission and every wake-up
//! (ACKs are triggers too, seed 000). `device_buffer = 0` is seed 001 §4.2's ideal (the
//! scheduler picks the next packet the instant the wire frees up); larger buffers reproduce the
//! driver buffering that defeats link sharing (seed 001 §5). `clock_hz` reproduces Linux 2.4's
//! `PSCHED_JIFFIES` clock (seed 002).

use linkshare_core::egress::{Egress, EgressConfig, Stop};
use linkshare_core::qdisc::lazy::DEFAULT_RECLAIM_BUDGET;
use linkshare_core::{Qdisc, Time};

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
    pub delay_ns: u64,
    /// The device model shared with the router, holding the packets in the device.
    egress: Egress<SimPacket>,
    /// The engine's key `(time, seq)` of the wire's end of transmission, if it is busy (the
    /// time is the model's [`Egress::wire_end`]).
    pub tx_end: Option<(u64, u64)>,
    pub flows: Vec<FlowQueue>,
    /// The event of this link's wake-up timer (`Ev::Wake`; the uplink's `Ev::UpWake`).
    wake_ev: Ev,
    /// With [`Link::keep_drops`], the packets refused or dropped since the caller last took them
    /// (an ACK's slot in the world's table must be given back).
    pub dropped: Option<Vec<SimPacket>>,
}

impl Link {
    pub fn new(spec: &LinkSpec, qdisc: Box<dyn Qdisc<SimPacket>>, nflows: usize) -> Self {
        Link {
            qdisc,
            delay_ns: spec.delay.0,
            egress: Egress::new(egress_config(spec)),
            tx_end: None,
            flows: vec![FlowQueue::default(); nflows],
            wake_ev: Ev::Wake,
            dropped: None,
        }
    }

    /// This link as the uplink: its own wake-up event, and its dropped packets kept.
    pub fn as_uplink(mut self) -> Self {
        self.wake_ev = Ev::UpWake;
        self.dropped = Some(Vec::new());
        self
    }

    /// Give back the per-flow state of the scheduler's leaves idle for its hold
    /// (`linkshare_core::qdisc::lazy`): called at each sampling tick, bounded per call.
    pub fn reclaim_idle(&mut self, eng: &Engine) {
        let now = self.egress.sched_now(Time(eng.now()));
        let _ = self.qdisc.reclaim_idle(now, DEFAULT_RECLAIM_BUDGET);
    }

    /// Bytes waiting in the device buffer (not counting the wire).
    pub fn device_bytes(&self) -> u64 {
        self.egress.waiting_bytes()
    }

    /// Bytes that finished serialisation since the start.
    pub fn tx_bytes(&self) -> u64 {
        self.egress.stats().sent_bytes
    }

    /// Offer a packet to the router's scheduler, then pull.
    #[inline]
    pub fn offer(&mut self, pkt: SimPacket, eng: &mut Engine) -> Offered {
        let now = Time(eng.now());
        let len = pkt.meta.len as u64;
        let flow = pkt.flow as usize;
        let r = match self.qdisc.enqueue(pkt, self.egress.sched_now(now)) {
            Ok(()) => {
                self.flows[flow].backlog += len;
                Offered::Queued
            }
            Err(d) => {
                self.flows[d.packet.flow as usize].drops += 1;
                if let Some(v) = &mut self.dropped {
                    v.push(d.packet);
                }
                Offered::Dropped
            }
        };
        // The victims of this enqueue (overflow) are collected with those of the pull, in the
        // order the scheduler dropped them.
        self.pull(eng);
        r
    }

    fn collect_drops(&mut self) {
        while let Some(d) = self.qdisc.take_dropped() {
            let f = &mut self.flows[d.packet.flow as usize];
            f.drops += 1;
            f.backlog = f.backlog.saturating_sub(d.packet.meta.len as u64);
            if let Some(v) = &mut self.dropped {
                v.push(d.packet);
            }
        }
    }

    /// Pull the scheduler while the device has room (the rule in [`linkshare_core::egress`]).
    pub fn pull(&mut self, eng: &mut Engine) {
        let now = Time(eng.now());
        let Link {
            qdisc,
            egress,
            tx_end,
            flows,
            ..
        } = self;
        let stop = egress.pull(qdisc.as_mut(), now, &mut |p: SimPacket, end| {
            let f = &mut flows[p.flow as usize];
            f.backlog = f.backlog.saturating_sub(p.meta.len as u64);
            if let Some(end) = end {
                *tx_end = Some((end.0, eng.next_seq()));
            }
            p
        });
        if let Stop::Throttled { wake: Some(at), .. } = stop {
            eng.at(at.0, self.wake_ev);
        }
        self.collect_drops();
    }

    /// The wake-up timer fired at `now`; returns false for a stale timer (ignored).
    pub fn on_wake(&mut self, eng: &mut Engine) -> bool {
        if !self.egress.on_wake(Time(eng.now())) {
            return false;
        }
        self.pull(eng);
        true
    }

    /// The wire finished its packet: returns it (it now propagates for `delay_ns`), moves the next
    /// one from the device buffer onto the wire and pulls the scheduler.
    pub fn on_tx_done(&mut self, eng: &mut Engine) -> Option<SimPacket> {
        self.tx_end = None;
        let done = match self.egress.finish_tx() {
            Some((done, next)) => {
                if let Some(end) = next {
                    self.tx_end = Some((end.0, eng.next_seq()));
                }
                Some(done)
            }
            None => None,
        };
        self.pull(eng);
        done
    }
}

/// The device model of a scenario's `[link]`.
pub fn egress_config(spec: &LinkSpec) -> EgressConfig {
    EgressConfig {
        rate_bps: spec.rate.0,
        device_buffer: spec.device_buffer,
        full_packet: spec.mtu as u64 + spec.overhead as u64,
        timer_hz: spec.timer_hz as u64,
        clock_hz: spec.clock_hz as u64,
    }
}
