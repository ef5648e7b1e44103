//! One simulation run: the topology, the event loop and the sampling.
//!
//! ```text
//!  source ──extra_delay──▶ router: classify + enqueue ──▶ link (scheduler → device buffer → wire)
//!                                                              │ delay
//!  source ◀──────────── extra_delay + delay (uncongested) ◀── sink (ACK / echo reply)
//! ```
//!
//! Every packet of every flow goes through the one scheduler. ACKs and echo replies come back over
//! an uncongested path with the same delays (no transmission time, no queue), unless the scenario
//! has an `[uplink]`: then they first cross the uplink's scheduler and wire (an asymmetric access
//! line, where a download's ACKs queue behind each other and CAKE's ACK filter has work), with
//! addresses and ports reversed. ACKs carry their TCP facts (`SimPacket::tcp`); the slot of an ACK
//! the uplink drops is given back at once.
//!
//! ## Where each concern lives
//! * this file: the run's state ([`World`], one [`FlowRt`] per flow), [`run`] and the event
//!   loop, which picks the earliest of the heap's top, the wires' ends and the delay lines'
//!   fronts and hands it to the one handler for it;
//! * `build`: a scenario turned into a world — the links, the delay lines, the flows with
//!   their sources, classes and seeds — and the event budget;
//! * `endpoints`: what the sources and sinks do — packets emitted by TCP, UDP and ping sources,
//!   TCP's timers, data reaching its sink, ACKs and echo replies reaching their source;
//! * `paths`: how packets travel between them — delay lines, the `[path]` impairments after
//!   the bottleneck, the return path through the `[uplink]`, the table of ACKs in flight;
//! * `report`: what a run reports — a sample at every interval, the summary at the end;
//! * `groups`: arriving flows, reported by group and by completion time.
//!
//! Every module adds methods to the one [`World`]: the loop's state is shared by all of them,
//! and a packet's path crosses all of them within one event.
//!
//! ## Bounds
//! The run stops with [`SimError::Stuck`] instead of hanging: the engine's stall detector catches
//! a loop at one instant, and the event budget is
//! `9 × (link packets) + 4 × (uplink packets) + 3 × (UDP packets offered) + 4 × (ping probes) +
//! samples + 10⁶`, where link packets is what the link can carry in the duration with the
//! smallest packet any flow sends (uplink packets: 52-byte ACKs at the uplink's rate); 9 events
//! per packet covers arrival, end of transmission, delivery, the ACK, its processing jitter and
//! the timers (`build::event_budget`).

use std::collections::VecDeque;

use linkshare_core::{PacketMeta, Qdisc};
use rand_pcg::Pcg64Mcg;

use crate::engine::{Engine, EngineStop, Ev};
use crate::link::Link;
use crate::metrics::FlowMetrics;
use crate::model::{ClassState, Sample, SimResult};
use crate::packet::SimPacket;
use crate::ping::PingSource;
use crate::scenario::Scenario;
use crate::series::{Budget, Plan};
use crate::tcp::{Receiver, Sender};
use crate::udp::UdpSource;

mod build;
mod endpoints;
mod groups;
mod paths;
mod report;

use groups::Groups;
use paths::{AckTable, Line, LineKind};
use report::ClassTrack;

/// Why a run failed.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    /// The policy could not be turned into a scheduler.
    #[error("{0}")]
    Policy(String),
    /// The run stopped making progress.
    #[error("simulation stuck at t = {time_s:.6} s: {reason}")]
    Stuck { time_s: f64, reason: String },
}

/// Name of the single class reported for a scenario without a policy.
pub const NO_POLICY_CLASS: &str = "pfifo";

/// A TCP connection: the sender at the source, the receiver at the sink, and their timers.
struct TcpConn {
    snd: Sender,
    rcv: Receiver,
    /// Time of the pending timer events (`u64::MAX` = none): the sender's transmission timer,
    /// the receiver's ACK timer, the sender's pacing timer.
    rto_ev: u64,
    delack_ev: u64,
    pace_ev: u64,
}

/// What a flow is made of: its source and sink state machines.
enum Src {
    Tcp(Box<TcpConn>),
    Udp(UdpSource),
    Ping(PingSource),
}

/// One flow during a run: its packets' header, paths, generators, endpoints and figures.
struct FlowRt {
    name: String,
    /// Delay lines of the access path (`u32::MAX` when the path has no delay) and return path.
    access_line: u32,
    return_line: u32,
    class: String,
    meta: PacketMeta,
    overhead: u32,
    /// The policy's link layer (tc-stab): applied to `IP length + overhead`, so the scheduler
    /// charges and the link transmits the framed size.
    link: linkshare_core::linklayer::LinkLayer,
    start: u64,
    stop: u64,
    active: bool,
    rng: Pcg64Mcg,
    /// The seed's start offset and ACK jitter (`crate::jitter`).
    jitter: Pcg64Mcg,
    /// ACKs held by the receiver's processing jitter, with their departure times (ascending).
    ack_out: VecDeque<(u64, SimPacket)>,
    src: Src,
    m: FlowMetrics,
    /// Index of its group of arriving flows ([`groups::NO_GROUP`]: reported on its own).
    group: u32,
}

/// The state of one run; every module of `world` adds the methods of its concern.
struct World<'a> {
    sc: &'a Scenario,
    eng: Engine,
    link: Link,
    /// `[uplink]`: the scheduler every ACK and echo reply crosses before its return delay.
    up: Option<Link>,
    lines: Vec<Line>,
    flows: Vec<FlowRt>,
    out: Vec<crate::tcp::Segment>,
    acks: AckTable,
    classes: ClassTrack,
    samples: Vec<Sample>,
    class_states: Vec<ClassState>,
    rtt_points: Vec<(f64, String, f64)>,
    /// Per UDP flow per sample interval: `(end, flow, mean one-way delay ms)`.
    owd_points: Vec<(f64, String, f64)>,
    /// Keep one echo reply in `probe_every` in `rtt_points`; `probes` counts them all.
    probe_every: u64,
    probes: u64,
    last_sample: u64,
    /// Name the whole scheduler is reported under when it has no classes: the root discipline
    /// (`sfq`, `fq_codel`, …) or `pfifo` without a policy.
    root_name: &'static str,
    groups: Groups,
    /// `[path]`: the data path's impairments after the bottleneck, and the packets of each flow
    /// they lost.
    path: Option<linkshare_core::impair::Impairment>,
    path_lost: Vec<u64>,
}

/// Run a scenario to its end, keeping at most the default [`Budget`] of time series.
pub fn run(sc: &Scenario, progress: Option<&mut dyn FnMut(f64)>) -> Result<SimResult, SimError> {
    run_within(sc, Budget::default(), progress)
}

/// Run a scenario to its end, keeping at most `budget` of time series ([`crate::series`]).
pub fn run_within(
    sc: &Scenario,
    budget: Budget,
    mut progress: Option<&mut dyn FnMut(f64)>,
) -> Result<SimResult, SimError> {
    let plan = Plan::new(sc, budget);
    let qdisc: Box<dyn Qdisc<SimPacket>> = match &sc.policy {
        Some(p) if sc.workers > 1 => p
            .build_sharded(sc.workers)
            .map_err(|e| SimError::Policy(e.to_string()))?,
        Some(p) => p
            .build(sc.link.timer_hz)
            .map_err(|e| SimError::Policy(e.to_string()))?,
        None => crate::policy::default_qdisc(sc.link.queue),
    };
    let mut w = World::new(sc, qdisc);
    w.up = build::uplink(sc)?;
    w.probe_every = plan.probe_every;
    let duration = sc.duration.0;
    for (i, f) in w.flows.iter().enumerate() {
        if f.start < duration {
            w.eng.at(f.start, Ev::FlowStart(i as u32));
            if f.stop < duration {
                w.eng.at(f.stop, Ev::FlowStop(i as u32));
            }
        }
    }
    w.eng.at(plan.interval_ns.min(duration), Ev::Sample);
    loop {
        // The earliest of: the heap's top, the wire's end of transmission, the lines' fronts.
        let mut best = w.eng.peek_key().unwrap_or((u64::MAX, u64::MAX));
        let mut from = Next::Heap;
        if let Some(k) = w.link.tx_end {
            if k < best {
                best = k;
                from = Next::Wire;
            }
        }
        if let Some(k) = w.up.as_ref().and_then(|u| u.tx_end) {
            if k < best {
                best = k;
                from = Next::UpWire;
            }
        }
        for (li, l) in w.lines.iter().enumerate() {
            if let Some(&(t, s, _)) = l.q.front() {
                if (t, s) < best {
                    best = (t, s);
                    from = Next::Line(li);
                }
            }
        }
        if best.0 > duration {
            break;
        }
        match from {
            Next::Heap => {
                let Some(ev) = w.eng.pop_event() else { break };
                w.eng.advance(best.0, ev).map_err(stuck)?;
                if let Ev::Sample = ev {
                    w.sample();
                    w.link.reclaim_idle(&w.eng);
                    if let Some(p) = progress.as_deref_mut() {
                        p(w.eng.now() as f64 / duration as f64);
                    }
                    if w.eng.now() < duration {
                        let next = w.eng.now().saturating_add(plan.interval_ns).min(duration);
                        w.eng.at(next, Ev::Sample);
                    }
                } else {
                    w.handle(ev);
                }
            }
            Next::Wire => {
                w.eng.advance(best.0, Ev::TxDone).map_err(stuck)?;
                if let Some(p) = w.link.on_tx_done(&mut w.eng) {
                    w.toward_sink(p);
                }
            }
            Next::UpWire => {
                w.eng.advance(best.0, Ev::TxDone).map_err(stuck)?;
                w.up_tx_done();
            }
            Next::Line(li) => {
                w.eng.advance(best.0, Ev::Line(li as u32)).map_err(stuck)?;
                let Some((_, _, p)) = w.lines[li].q.pop_front() else {
                    break;
                };
                match w.lines[li].kind {
                    LineKind::Access => {
                        w.link.offer(p, &mut w.eng);
                    }
                    LineKind::Link => w.deliver(p),
                    LineKind::Return => w.reply(p),
                }
            }
        }
    }
    let mut result = w.finish();
    crate::compare::groups::summarise(&mut result, sc);
    Ok(result)
}

/// Where the next event comes from.
#[derive(Copy, Clone)]
enum Next {
    Heap,
    Wire,
    UpWire,
    Line(usize),
}

fn stuck(stop: EngineStop) -> SimError {
    match stop {
        EngineStop::Budget { events, time_ns } => SimError::Stuck {
            time_s: time_ns as f64 / 1e9,
            reason: format!("the event budget ({events} events) is spent; a flow or the scheduler loops without making progress"),
        },
        EngineStop::Stalled { time_ns, last } => SimError::Stuck {
            time_s: time_ns as f64 / 1e9,
            reason: format!(
                "{} events at the same instant without the clock advancing (last: {last:?}); the scheduler or a source loops",
                crate::engine::STALL_LIMIT
            ),
        },
    }
}

impl World<'_> {
    #[inline]
    fn handle(&mut self, ev: Ev) {
        match ev {
            Ev::SourceSend(i) => self.source_send(i as usize),
            Ev::Wake => {
                self.link.on_wake(&mut self.eng);
            }
            Ev::UpWake => {
                if let Some(u) = &mut self.up {
                    u.on_wake(&mut self.eng);
                }
                self.free_dropped_acks();
            }
            Ev::Rto(i) => self.rto(i as usize),
            Ev::DelAck(i) => self.delack(i as usize),
            Ev::Pacing(i) => self.pacing(i as usize),
            Ev::AckOut(i) => {
                if let Some((_, p)) = self.flows[i as usize].ack_out.pop_front() {
                    self.send_back(p);
                }
            }
            Ev::FlowStart(i) => self.flow_start(i as usize),
            Ev::FlowStop(i) => {
                let f = &mut self.flows[i as usize];
                f.active = false;
                if let Src::Tcp(c) = &mut f.src {
                    c.snd.stop();
                    let now = self.eng.now();
                    self.out.clear();
                    c.snd.poll_send(now, &mut self.out);
                    self.emit_segments(i as usize);
                }
            }
            Ev::Sample | Ev::TxDone | Ev::Line(_) => {}
        }
    }
}
