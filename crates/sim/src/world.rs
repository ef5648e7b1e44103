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
//! ## Bounds
//! The run stops with [`SimError::Stuck`] instead of hanging: the engine's stall detector catches
//! a loop at one instant, and the event budget is
//! `8 × (link packets) + 4 × (uplink packets) + 3 × (UDP packets offered) + 4 × (ping probes) +
//! samples + 10⁶`, where link packets is what the link can carry in the duration with the
//! smallest packet any flow sends (uplink packets: 52-byte ACKs at the uplink's rate); 8 events
//! per packet covers arrival, end of transmission, delivery, the ACK and the timers.

use std::collections::VecDeque;

use linkshare_core::packet::L3;
use linkshare_core::{PacketMeta, Qdisc};
use rand::SeedableRng;
use rand_pcg::Pcg64Mcg;

use crate::engine::{Engine, EngineStop, Ev};
use crate::link::Link;
use crate::metrics::{jain, FlowMetrics};
use crate::model::{
    ClassState, ClassSummary, FlowSummary, LinkSummary, QdiscSummary, Sample, SeriesKind,
    SimResult, Summary,
};
use crate::packet::{PktKind, SimPacket};
use crate::ping::PingSource;
use crate::scenario::{FlowKind, Scenario};
use crate::series::{Budget, Plan};
use crate::tcp::{AckInfo, Receiver, Sender};
use crate::udp::UdpSource;

mod groups;
use groups::{Groups, NO_GROUP};

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

struct TcpConn {
    snd: Sender,
    rcv: Receiver,
    /// Time of the pending timer events (`u64::MAX` = none): the sender's transmission timer,
    /// the receiver's ACK timer, the sender's pacing timer.
    rto_ev: u64,
    delack_ev: u64,
    pace_ev: u64,
}

/// ACKs in flight on the return paths: their SACK blocks and window live here, the packet holds
/// the slot number (packets stay small and `Copy`).
#[derive(Default)]
struct AckTable {
    slots: Vec<AckInfo>,
    free: Vec<u32>,
}

impl AckTable {
    fn put(&mut self, a: AckInfo) -> u32 {
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
    fn take(&mut self, i: u32) -> Option<AckInfo> {
        let a = *self.slots.get(i as usize)?;
        self.free.push(i);
        Some(a)
    }
}

enum Src {
    Tcp(Box<TcpConn>),
    Udp(UdpSource),
    Ping(PingSource),
}

/// What leaving a delay line means.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum LineKind {
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
struct Line {
    delay: u64,
    kind: LineKind,
    q: VecDeque<(u64, u64, SimPacket)>,
}

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
    /// Index of its group of arriving flows ([`NO_GROUP`]: reported on its own).
    group: u32,
}

/// Per-class bookkeeping between samples (in `visit_classes` order).
#[derive(Default)]
struct ClassTrack {
    names: Vec<String>,
    prev_bytes: Vec<u64>,
    prev_drops: Vec<u64>,
}

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
    w.up = uplink(sc)?;
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

/// The uplink of `sc`, if it has one: its policy's scheduler (or a pfifo of `queue` packets)
/// behind a wire of its rate, with the link's MTU, overhead and timer.
fn uplink(sc: &Scenario) -> Result<Option<Link>, SimError> {
    let Some(u) = &sc.uplink else {
        return Ok(None);
    };
    let spec = crate::scenario::LinkSpec {
        rate: u.rate,
        delay: linkshare_core::Duration::ZERO,
        device_buffer: 0,
        queue: u.queue,
        ..sc.link.clone()
    };
    let qdisc: Box<dyn Qdisc<SimPacket>> = match &u.policy {
        Some(p) => p
            .build(sc.link.timer_hz)
            .map_err(|e| SimError::Policy(format!("[uplink] {e}")))?,
        None => crate::policy::default_qdisc(u.queue),
    };
    Ok(Some(Link::new(&spec, qdisc, sc.flows.len()).as_uplink()))
}

/// Swap a packet's addresses and ports: an ACK or echo reply goes from the sink to the source.
fn reversed(mut m: PacketMeta) -> PacketMeta {
    std::mem::swap(&mut m.src, &mut m.dst);
    std::mem::swap(&mut m.src_port, &mut m.dst_port);
    m
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

fn event_budget(sc: &Scenario) -> u64 {
    let dur_s = sc.duration.as_secs_f64();
    let overhead = sc.link.overhead as f64;
    let mut min_pkt = f64::MAX;
    let mut udp_pkts = 0.0;
    let mut ping_pkts = 0.0;
    for f in &sc.flows {
        let active = (f.stop.0.min(sc.duration.0).saturating_sub(f.start.0)) as f64 / 1e9;
        match &f.kind {
            FlowKind::Tcp(_) => min_pkt = min_pkt.min(40.0 + overhead + 1.0),
            FlowKind::Udp(u) => {
                let s = u.size.min() as f64;
                min_pkt = min_pkt.min(s + overhead);
                udp_pkts += u.rate.0 as f64 * active / 8.0 / s;
            }
            FlowKind::Ping(p) => {
                min_pkt = min_pkt.min(p.size as f64 + overhead);
                ping_pkts += active / p.interval.as_secs_f64() + 1.0;
            }
        }
    }
    if min_pkt == f64::MAX {
        min_pkt = 1500.0;
    }
    let link_pkts = sc.link.rate.0 as f64 * dur_s / 8.0 / min_pkt.max(1.0);
    let samples = dur_s / sc.sample.as_secs_f64() + 1.0;
    // The ACK jitter (`crate::jitter`) adds an event per ACK.
    let per_pkt = 9.0;
    // An uplink serialises at most its rate in 52-byte ACKs, a few events each.
    let up_pkts = sc
        .uplink
        .as_ref()
        .map_or(0.0, |u| u.rate.0 as f64 * dur_s / 8.0 / 52.0);
    let b = per_pkt * link_pkts + 4.0 * up_pkts + 3.0 * udp_pkts + 4.0 * ping_pkts + samples + 1e6;
    if b >= u64::MAX as f64 {
        u64::MAX
    } else {
        b as u64
    }
}

fn flow_meta(f: &crate::scenario::FlowSpec, proto: u8) -> PacketMeta {
    let mut m = PacketMeta {
        len: 0,
        l3: if f.src.is_ipv4() { L3::Ipv4 } else { L3::Ipv6 },
        tos: f.tos,
        proto,
        src: f.src,
        dst: f.dst,
        src_port: if proto == 1 { 0 } else { f.sport },
        dst_port: if proto == 1 { 0 } else { f.dport },
        ..PacketMeta::default()
    };
    m.flow_hash = linkshare_core::wire::flow_hash(&m, 0);
    m
}

impl<'a> World<'a> {
    fn new(sc: &'a Scenario, qdisc: Box<dyn Qdisc<SimPacket>>) -> Self {
        let link = Link::new(&sc.link, qdisc, sc.flows.len());
        // Line 0 is the bottleneck's propagation; then one line per distinct access delay and per
        // distinct return delay (flows with equal delays share a line: FIFO order still holds).
        let mut lines = vec![Line {
            delay: sc.link.delay.0,
            kind: LineKind::Link,
            q: VecDeque::new(),
        }];
        let mut line_for = |delay: u64, kind: LineKind| -> u32 {
            if let Some(i) = lines
                .iter()
                .position(|l| l.delay == delay && l.kind == kind)
            {
                return i as u32;
            }
            lines.push(Line {
                delay,
                kind,
                q: VecDeque::new(),
            });
            (lines.len() - 1) as u32
        };
        let mss = crate::tcp::mss_for_mtu(sc.link.mtu);
        let mut flows: Vec<FlowRt> = sc
            .flows
            .iter()
            .enumerate()
            .map(|(i, f)| {
                let (proto, src) = match &f.kind {
                    FlowKind::Tcp(t) => {
                        // Seed 1 keeps the historical per-flow choices of the controller.
                        let cc_seed = match sc.seed {
                            crate::jitter::ON_TIME_SEED => i as u64,
                            s => (i as u64) ^ s.rotate_left(17),
                        };
                        let cc = crate::tcp::cc::new_seeded(t.cc, t.init_cwnd, mss, cc_seed);
                        (
                            6,
                            Src::Tcp(Box::new(TcpConn {
                                snd: Sender::new(t, mss, cc),
                                rcv: Receiver::new(mss, t.sack, t.delayed_ack, t.window)
                                    .with_ecn(t.ecn),
                                rto_ev: u64::MAX,
                                delack_ev: u64::MAX,
                                pace_ev: u64::MAX,
                            })),
                        )
                    }
                    FlowKind::Udp(u) => (17, Src::Udp(UdpSource::new(u, f.start.0))),
                    FlowKind::Ping(p) => (1, Src::Ping(PingSource::new(p))),
                };
                let meta = flow_meta(f, proto);
                let class = match &sc.policy {
                    Some(p) => p.class_of(&meta),
                    None => NO_POLICY_CLASS.to_string(),
                };
                let seed = sc.seed.wrapping_mul(0x9E37_79B9_7F4A_7C15)
                    ^ (i as u64 + 1).wrapping_mul(0xD1B5_4A32_D192_ED03);
                let access_line = if f.extra_delay.0 == 0 {
                    u32::MAX
                } else {
                    line_for(f.extra_delay.0, LineKind::Access)
                };
                let return_line = line_for(f.extra_delay.0 + sc.link.delay.0, LineKind::Return);
                let mut jitter = crate::jitter::generator(sc.seed, i);
                // An arriving flow starts when it arrives: its completion time counts from then.
                let start = match f.arrival {
                    Some(_) => f.start.0,
                    None => crate::jitter::start(&mut jitter, sc.seed, f.start.0, f.stop.0),
                };
                FlowRt {
                    access_line,
                    return_line,
                    name: f.name.clone(),
                    class,
                    meta,
                    overhead: sc.link.overhead,
                    link: sc
                        .policy
                        .as_ref()
                        .map(|p| p.policy().link_layer())
                        .unwrap_or_default(),
                    start,
                    stop: f.stop.0,
                    active: false,
                    rng: Pcg64Mcg::seed_from_u64(seed),
                    jitter,
                    ack_out: VecDeque::new(),
                    src,
                    m: FlowMetrics::default(),
                    group: NO_GROUP,
                }
            })
            .collect();
        let groups = Groups::attach(sc, &mut flows);
        World {
            sc,
            eng: Engine::new(event_budget(sc)),
            link,
            up: None,
            lines,
            flows,
            out: Vec::with_capacity(64),
            acks: AckTable::default(),
            classes: ClassTrack::default(),
            samples: Vec::new(),
            class_states: Vec::new(),
            rtt_points: Vec::new(),
            owd_points: Vec::new(),
            probe_every: 1,
            probes: 0,
            last_sample: 0,
            root_name: sc
                .policy
                .as_ref()
                .map(|p| p.policy().kind_name())
                .unwrap_or(NO_POLICY_CLASS),
            groups,
            path: sc
                .path
                .map(|spec| linkshare_core::impair::Impairment::new(spec, sc.seed ^ 0x7061_7468)),
            path_lost: vec![0; sc.flows.len()],
        }
    }

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

    /// A packet leaves flow `i`'s source towards the router.
    #[inline]
    fn emit(&mut self, i: usize, kind: PktKind, ip_len: u32, payload: u32, seq: u64, echo: u64) {
        self.emit_ecn(i, kind, ip_len, payload, seq, echo, None);
    }

    /// [`World::emit`] with a TCP segment's ECN facts `(ect, cwr)` for a flow with `ecn`: its
    /// IP ECN field becomes ECT(0) or not-ECT (the flow's `tos` keeps its DSCP).
    #[allow(clippy::too_many_arguments)]
    #[inline]
    fn emit_ecn(
        &mut self,
        i: usize,
        kind: PktKind,
        ip_len: u32,
        payload: u32,
        seq: u64,
        echo: u64,
        ecn: Option<(bool, bool)>,
    ) {
        let f = &mut self.flows[i];
        let mut meta = f.meta;
        if let Some((ect, _)) = ecn {
            meta.tos = (meta.tos & !3) | if ect { 2 } else { 0 };
        }
        meta.len = f.link.size(ip_len + f.overhead);
        // UDP and pings carry their IP length as `payload`: their goodput is that, whatever
        // the framing charged.
        let payload = if kind == PktKind::Data {
            payload
        } else {
            ip_len
        };
        let p = SimPacket {
            meta,
            flow: i as u32,
            payload,
            kind,
            seq,
            sent_at: self.eng.now(),
            echo,
            tcp: None,
            cwr: ecn.is_some_and(|e| e.1),
        };
        f.m.packets_sent += 1;
        if f.access_line == u32::MAX {
            self.link.offer(p, &mut self.eng);
        } else {
            let li = f.access_line as usize;
            self.push_line(li, p);
        }
    }

    fn flow_start(&mut self, i: usize) {
        self.flows[i].active = true;
        match &mut self.flows[i].src {
            Src::Tcp(c) => {
                let now = self.eng.now();
                self.out.clear();
                c.snd.poll_send(now, &mut self.out);
                self.emit_segments(i);
            }
            Src::Udp(_) | Src::Ping(_) => self.source_send(i),
        }
    }

    fn source_send(&mut self, i: usize) {
        let now = self.eng.now();
        let f = &mut self.flows[i];
        if !f.active || now >= f.stop {
            return;
        }
        let (kind, size, seq, next) = match &mut f.src {
            Src::Udp(u) => {
                let size = u.next_size(&mut f.rng);
                let seq = u.seq;
                u.seq += 1;
                (PktKind::Udp, size, seq, u.next_time(now, size, &mut f.rng))
            }
            Src::Ping(p) => {
                let seq = p.seq;
                p.seq += 1;
                (PktKind::EchoRequest, p.size, seq, now + p.interval)
            }
            Src::Tcp(_) => return,
        };
        if next < f.stop {
            self.eng.at(next, Ev::SourceSend(i as u32));
        }
        self.emit(i, kind, size, 0, seq, 0);
    }

    /// Send the segments in `self.out` for flow `i` and arm its timers.
    fn emit_segments(&mut self, i: usize) {
        let hdr = crate::tcp::HEADER_BYTES;
        for k in 0..self.out.len() {
            let s = self.out[k];
            let ecn = (self.sc.flows[i].kind.ecn()).then_some((s.ect, s.cwr));
            self.emit_ecn(i, PktKind::Data, s.len + hdr, s.len, s.seq, s.tsecr, ecn);
        }
        self.out.clear();
        self.arm_sender(i);
    }

    /// Make sure heap events exist for the sender's transmission and pacing timers (an event
    /// that fires before its deadline moved later is re-armed then).
    fn arm_sender(&mut self, i: usize) {
        if let Src::Tcp(c) = &mut self.flows[i].src {
            if let Some(d) = c.snd.timer() {
                if d < c.rto_ev {
                    c.rto_ev = d;
                    self.eng.at(d, Ev::Rto(i as u32));
                }
            }
            if let Some(d) = c.snd.pacing_wakeup() {
                if d < c.pace_ev {
                    c.pace_ev = d;
                    self.eng.at(d, Ev::Pacing(i as u32));
                }
            }
        }
    }

    fn rto(&mut self, i: usize) {
        let now = self.eng.now();
        let Src::Tcp(c) = &mut self.flows[i].src else {
            return;
        };
        if now != c.rto_ev {
            return;
        }
        c.rto_ev = u64::MAX;
        match c.snd.timer() {
            Some(d) if d <= now => {
                self.out.clear();
                c.snd.on_timer(now, &mut self.out);
                self.emit_segments(i);
            }
            Some(_) => self.arm_sender(i),
            None => {}
        }
    }

    fn pacing(&mut self, i: usize) {
        let now = self.eng.now();
        let Src::Tcp(c) = &mut self.flows[i].src else {
            return;
        };
        if now != c.pace_ev {
            return;
        }
        c.pace_ev = u64::MAX;
        self.out.clear();
        c.snd.on_pacing_timer(now, &mut self.out);
        self.emit_segments(i);
    }

    fn delack(&mut self, i: usize) {
        let now = self.eng.now();
        let f = &mut self.flows[i];
        let Src::Tcp(c) = &mut f.src else { return };
        if now != c.delack_ev {
            return;
        }
        c.delack_ev = u64::MAX;
        if let Some(a) = c.rcv.on_timer(now) {
            self.send_ack(i, a);
        }
        self.arm_receiver(i);
    }

    fn arm_receiver(&mut self, i: usize) {
        if let Src::Tcp(c) = &mut self.flows[i].src {
            if let Some(d) = c.rcv.timer() {
                if d < c.delack_ev {
                    c.delack_ev = d;
                    self.eng.at(d, Ev::DelAck(i as u32));
                }
            }
        }
    }

    fn send_ack(&mut self, i: usize, a: AckInfo) {
        let slot = self.acks.put(a);
        let f = &self.flows[i];
        let mut meta = reversed(f.meta);
        meta.len = 52;
        let p = SimPacket {
            meta,
            flow: i as u32,
            payload: slot,
            kind: PktKind::Ack,
            seq: a.ack,
            sent_at: a.tsval,
            echo: 0,
            tcp: Some(a.tcp_info()),
            cwr: false,
        };
        let f = &mut self.flows[i];
        let extra = crate::jitter::ack_delay(&mut f.jitter);
        if extra == 0 && f.ack_out.is_empty() {
            self.send_back(p);
            return;
        }
        // Never before the flow's previous ACK: the receiver keeps its ACKs in order.
        let now = self.eng.now();
        let t = f
            .ack_out
            .back()
            .map_or(now + extra, |&(last, _)| last.max(now + extra));
        f.ack_out.push_back((t, p));
        self.eng.at(t, Ev::AckOut(i as u32));
    }

    /// An ACK or echo reply leaves the sink: through the uplink if there is one, then over its
    /// flow's return delay.
    fn send_back(&mut self, p: SimPacket) {
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
    fn up_tx_done(&mut self) {
        let Some(u) = &mut self.up else { return };
        if let Some(p) = u.on_tx_done(&mut self.eng) {
            let li = self.flows[p.flow as usize].return_line as usize;
            self.push_line(li, p);
        }
        self.free_dropped_acks();
    }

    /// Give back the table slots of ACKs the uplink dropped (queue limit, AQM, ACK filter).
    fn free_dropped_acks(&mut self) {
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
    fn toward_sink(&mut self, p: SimPacket) {
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
            q.insert(k, (t, seq, p));
        }
    }

    #[inline]
    fn push_line(&mut self, li: usize, p: SimPacket) {
        let seq = self.eng.next_seq();
        let l = &mut self.lines[li];
        l.q.push_back((self.eng.now() + l.delay, seq, p));
    }

    /// A packet reaches its sink.
    fn deliver(&mut self, p: SimPacket) {
        let now = self.eng.now();
        let i = p.flow as usize;
        let f = &mut self.flows[i];
        match p.kind {
            PktKind::Data => {
                let Src::Tcp(c) = &mut f.src else { return };
                c.rcv.on_ecn(p.meta.ecn(), p.cwr, p.seq, p.payload);
                let (delivered, ack) = c.rcv.on_segment(p.seq, p.payload, p.sent_at, p.echo, now);
                f.m.deliver_tcp(delivered, now);
                if let Some(a) = ack {
                    self.send_ack(i, a);
                }
                self.arm_receiver(i);
            }
            PktKind::Udp => {
                f.m.delivered += u64::from(p.payload);
                f.m.owd_sample(now - p.sent_at);
            }
            PktKind::EchoRequest => {
                f.m.delivered += u64::from(p.payload);
                f.m.owd.record(now - p.sent_at);
                let mut r = p;
                r.kind = PktKind::EchoReply;
                r.meta = reversed(r.meta);
                self.send_back(r);
            }
            PktKind::Ack | PktKind::EchoReply => {}
        }
    }

    /// An ACK or echo reply reaches its source.
    fn reply(&mut self, p: SimPacket) {
        let now = self.eng.now();
        let i = p.flow as usize;
        let f = &mut self.flows[i];
        match p.kind {
            PktKind::Ack => {
                let Some(a) = self.acks.take(p.payload) else {
                    return;
                };
                let Src::Tcp(c) = &mut f.src else { return };
                self.out.clear();
                if let Some(rtt) = c.snd.on_ack(&a, now, &mut self.out) {
                    f.m.rtt_sample(rtt);
                }
                self.emit_segments(i);
            }
            PktKind::EchoReply => {
                let rtt = now - p.sent_at;
                f.m.rtt_sample(rtt);
                // A probe's RTT is the queue it met when it was sent: the point is placed at the
                // send time, as the lab's pinger places it (lab/src/traffic/ping.rs).
                if self.probes.is_multiple_of(self.probe_every) {
                    self.rtt_points.push((
                        p.sent_at as f64 / 1e9,
                        f.name.clone(),
                        rtt as f64 / 1e6,
                    ));
                }
                self.probes += 1;
            }
            _ => {}
        }
    }

    /// Close the sampling interval ending now.
    fn sample(&mut self) {
        let now = self.eng.now();
        let dt = (now - self.last_sample) as f64 / 1e9;
        if dt <= 0.0 {
            return;
        }
        let t = now as f64 / 1e9;
        let rate = |bytes: u64| bytes as f64 * 8.0 / dt;
        // Classes.
        let ct = &mut self.classes;
        let mut k = 0usize;
        let mut any = false;
        let samples = &mut self.samples;
        let states = &mut self.class_states;
        self.link.qdisc.visit_classes(&mut |v| {
            any = true;
            if k >= ct.names.len() {
                ct.names.push(v.name.to_string());
                ct.prev_bytes.push(0);
                ct.prev_drops.push(0);
            }
            let bytes = v.stats.sent.bytes - ct.prev_bytes[k].min(v.stats.sent.bytes);
            let drops = v.stats.drops - ct.prev_drops[k].min(v.stats.drops);
            ct.prev_bytes[k] = v.stats.sent.bytes;
            ct.prev_drops[k] = v.stats.drops;
            samples.push(Sample {
                time_s: t,
                kind: SeriesKind::Class,
                name: ct.names[k].clone(),
                bytes,
                rate_bps: rate(bytes),
                backlog_bytes: v.backlog.bytes,
                drops,
                rtt_ms: None,
            });
            let cbq = v.avgidle_ns.is_some();
            states.push(ClassState {
                time_s: t,
                class: ct.names[k].clone(),
                mode: v.mode.name(),
                tokens_bytes: (!cbq).then_some(v.tokens),
                ctokens_bytes: (!cbq).then_some(v.ctokens),
                avgidle_us: v.avgidle_ns.map(|a| a as f64 / 1e3),
            });
            k += 1;
        });
        if !any {
            let st = self.link.qdisc.stats().clone();
            if ct.names.is_empty() {
                ct.names.push(self.root_name.to_string());
                ct.prev_bytes.push(0);
                ct.prev_drops.push(0);
            }
            let sent = st.dequeued.bytes;
            let dropped = st.drops_total().packets;
            let bytes = sent - ct.prev_bytes[0];
            let drops = dropped - ct.prev_drops[0];
            ct.prev_bytes[0] = sent;
            ct.prev_drops[0] = dropped;
            samples.push(Sample {
                time_s: t,
                kind: SeriesKind::Class,
                name: ct.names[0].clone(),
                bytes,
                rate_bps: rate(bytes),
                backlog_bytes: st.backlog.bytes,
                drops,
                rtt_ms: None,
            });
        }
        // Flows.
        for (i, f) in self.flows.iter_mut().enumerate() {
            let bytes = f.m.delivered - f.m.delivered_prev;
            f.m.delivered_prev = f.m.delivered;
            let q = &self.link.flows[i];
            let drops = q.drops - f.m.drops_prev;
            f.m.drops_prev = q.drops;
            if f.group != NO_GROUP {
                self.groups.add(f, bytes, drops, q.backlog);
                continue;
            }
            let rtt_ms = if f.m.rtt_int_n > 0 {
                Some(f.m.rtt_int_sum as f64 / f.m.rtt_int_n as f64 / 1e6)
            } else {
                None
            };
            if let (Some(r), Src::Tcp(_)) = (rtt_ms, &f.src) {
                self.rtt_points.push((t, f.name.clone(), r));
            }
            if let Some(d) = f.m.take_interval_owd_ms() {
                self.owd_points.push((t, f.name.clone(), d));
            }
            f.m.rtt_int_sum = 0;
            f.m.rtt_int_n = 0;
            self.samples.push(Sample {
                time_s: t,
                kind: SeriesKind::Flow,
                name: f.name.clone(),
                bytes,
                rate_bps: rate(bytes),
                backlog_bytes: q.backlog,
                drops,
                rtt_ms,
            });
        }
        self.groups
            .flush(t, dt, &mut self.samples, &mut self.rtt_points);
        self.last_sample = now;
    }

    fn finish(self) -> SimResult {
        let sc = self.sc;
        let dur = sc.duration.as_secs_f64();
        let mut summary = Summary {
            scenario: sc.name.clone(),
            duration_s: dur,
            seed: sc.seed,
            link: LinkSummary {
                rate_bps: sc.link.rate.0 as f64,
                utilisation: self.link.tx_bytes as f64 * 8.0 / (sc.link.rate.0 as f64 * dur),
                delay_ms: sc.link.delay.0 as f64 / 1e6,
                mtu: sc.link.mtu,
                device_buffer_bytes: sc.link.device_buffer,
                timer_hz: sc.link.timer_hz,
                clock_hz: sc.link.clock_hz,
            },
            events: self.eng.processed(),
            ..Summary::default()
        };
        // Classes.
        let mut ids: Vec<(u32, String)> = Vec::new();
        let mut any = false;
        self.link.qdisc.visit_classes(&mut |v| {
            any = true;
            ids.push((v.id, v.name.to_string()));
        });
        self.link.qdisc.visit_classes(&mut |v| {
            let parent = v
                .parent
                .and_then(|p| ids.iter().find(|(id, _)| *id == p).map(|(_, n)| n.clone()));
            summary.classes.insert(
                v.name.to_string(),
                ClassSummary {
                    bytes: v.stats.sent.bytes,
                    packets: v.stats.sent.packets,
                    drops: v.stats.drops,
                    rate_bps: v.stats.sent.bytes as f64 * 8.0 / dur,
                    parent,
                    assigned_rate_bps: v.rate.0 as f64,
                    ceil_bps: v.ceil.0 as f64,
                    overlimits: v.stats.overlimits,
                    lends: v.stats.lends,
                    borrows: v.stats.borrows,
                },
            );
        });
        if !any {
            let st = self.link.qdisc.stats();
            summary.classes.insert(
                self.root_name.to_string(),
                ClassSummary {
                    bytes: st.dequeued.bytes,
                    packets: st.dequeued.packets,
                    drops: st.drops_total().packets,
                    rate_bps: st.dequeued.bytes as f64 * 8.0 / dur,
                    assigned_rate_bps: sc.link.rate.0 as f64,
                    ceil_bps: sc.link.rate.0 as f64,
                    overlimits: st.overlimits,
                    ..ClassSummary::default()
                },
            );
        }
        // The schedulers' own counters.
        summary.qdisc = qdisc_summary(self.link.qdisc.as_ref());
        summary.uplink = self.up.as_ref().map(|u| qdisc_summary(u.qdisc.as_ref()));
        summary.path = self.path.as_ref().map(|p| crate::model::PathSummary {
            lost: p.stats.lost,
            duplicated: p.stats.duplicated,
            reordered: p.stats.reordered,
        });
        // Flows.
        let mut per_class: std::collections::BTreeMap<String, Vec<f64>> = Default::default();
        for (i, f) in self.flows.iter().enumerate() {
            if f.group != NO_GROUP {
                continue;
            }
            let (goodput, fct_s) = groups::goodput(f, sc.duration.0);
            let (kind, retransmits, timeouts, reductions, rtt, owd) = match &f.src {
                Src::Tcp(c) => (
                    "tcp",
                    c.snd.stats.retransmits,
                    c.snd.stats.timeouts,
                    c.snd.stats.cwnd_reductions,
                    Some(f.m.rtt.to_stats_ms()),
                    None,
                ),
                Src::Udp(_) => ("udp", 0, 0, 0, None, Some(f.m.owd.to_stats_ms())),
                Src::Ping(_) => (
                    "ping",
                    0,
                    0,
                    0,
                    Some(f.m.rtt.to_stats_ms()),
                    Some(f.m.owd.to_stats_ms()),
                ),
            };
            if !matches!(f.src, Src::Ping(_)) {
                // Probes do not compete for bandwidth: fairness is across TCP and UDP flows.
                per_class.entry(f.class.clone()).or_default().push(goodput);
            }
            summary.flows.insert(
                f.name.clone(),
                FlowSummary {
                    kind: kind.to_string(),
                    class: f.class.clone(),
                    bytes_delivered: f.m.delivered,
                    goodput_bps: goodput,
                    packets_sent: f.m.packets_sent,
                    packets_lost: self.link.flows[i].drops + self.path_lost[i],
                    retransmits,
                    rtt_ms: rtt,
                    owd_ms: owd,
                    timeouts,
                    cwnd_reductions: reductions,
                    fct_s,
                    ce_marks: match &f.src {
                        Src::Tcp(c) if c.rcv.ecn.ok => Some(c.rcv.ecn.ce_received),
                        _ => None,
                    },
                },
            );
        }
        let fct = self.finish_groups(&mut summary, &mut per_class);
        for (class, xs) in per_class {
            if !class.is_empty() {
                summary.fairness.insert(class, jain(&xs));
            }
        }
        SimResult {
            summary,
            samples: self.samples,
            class_states: self.class_states,
            rtt_points: self.rtt_points,
            owd_points: self.owd_points,
            fct,
        }
    }
}

/// A scheduler's counters at the end of a run.
fn qdisc_summary(q: &dyn Qdisc<SimPacket>) -> QdiscSummary {
    let st = q.stats();
    let mut drops = std::collections::BTreeMap::new();
    for (reason, c) in st.refused.iter().chain(st.dropped.iter()) {
        *drops.entry(reason.name().to_string()).or_insert(0) += c.packets;
    }
    let mut extra = std::collections::BTreeMap::new();
    q.extra_stats(&mut |name, v| {
        extra.insert(name.to_string(), v);
    });
    QdiscSummary {
        kind: q.kind().to_string(),
        enqueued_packets: st.enqueued.packets,
        dequeued_packets: st.dequeued.packets,
        drops,
        marked: st.marked,
        overlimits: st.overlimits,
        extra,
    }
}
