//! A scenario turned into a world, before its first event: the bottleneck link and the
//! uplink, the delay lines, one [`FlowRt`] per flow and the engine's event budget.
//!
//! Construction decides everything a run's determinism rests on, once: each flow's packet
//! header (its meta, hashed as the router hashes it) and so its class, its random generators
//! (derived from the scenario's seed and the flow's index, never from the order of events), its
//! start (the seed's start offset, `crate::jitter`) and its delay lines. Flows with equal
//! delays share a line, which keeps each line sorted by `(time, seq)` (the loop relies on it).

use std::collections::VecDeque;

use linkshare_core::packet::L3;
use linkshare_core::{PacketMeta, Qdisc};
use rand::SeedableRng;
use rand_pcg::Pcg64Mcg;

use super::groups::{Groups, NO_GROUP};
use super::{
    AckTable, ClassTrack, FlowRt, Line, LineKind, SimError, Src, TcpConn, World, NO_POLICY_CLASS,
};
use crate::engine::Engine;
use crate::link::Link;
use crate::metrics::FlowMetrics;
use crate::packet::SimPacket;
use crate::ping::PingSource;
use crate::scenario::{FlowKind, Scenario};
use crate::tcp::{Receiver, Sender};
use crate::udp::UdpSource;

/// The uplink of `sc`, if it has one: its policy's scheduler (or a pfifo of `queue` packets)
/// behind a wire of its rate, with the link's MTU, overhead and timer.
pub(super) fn uplink(sc: &Scenario) -> Result<Option<Link>, SimError> {
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

/// The engine's event budget for a run of `sc` (the formula: `world`'s module docs, "Bounds").
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

/// The header every packet of flow `f` carries (ports zero for ICMP), with its flow hash.
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
    pub(super) fn new(sc: &'a Scenario, qdisc: Box<dyn Qdisc<SimPacket>>) -> Self {
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
}
