//! The simulator's link and the real shaper's service turn are two adapters of one device model
//! (`linkshare_core::egress`): fed the same packet trace through the same scheduler, they must
//! send the same packets in the same order, and the modelled wire must finish each at the same
//! nanosecond. The simulator side is `linkshare_sim::link::Link` on its event engine; the router
//! side is `linkshare_router::egress::egress_turn` driven the way `Shaper::run` drives it (a
//! turn after each arrival and at each deadline it asks for), on a virtual clock. The departure
//! the turn stamps on each packet as it is pulled — the instant the router's emulated line
//! takes it (`linkshare run --emulate rate=`) — must be that same nanosecond.

use linkshare_core::egress::Egress;
use linkshare_core::qdisc::prio::{Prio, PrioParams};
use linkshare_core::qdisc::tbf::{Tbf, TbfParams};
use linkshare_core::{Duration, PacketMeta, Qdisc, Rate, Time};
use linkshare_router::egress::egress_turn;
use linkshare_sim::engine::{Engine, Ev};
use linkshare_sim::link::{egress_config, Link};
use linkshare_sim::packet::PktKind;
use linkshare_sim::scenario::LinkSpec;
use linkshare_sim::SimPacket;

/// A packet of the trace: arrival instant (ns), length (bytes), TOS (0x10 = PRIO's band 0).
type Arrival = (u64, u32, u8);

/// Departures: (packet number in the trace, instant its last bit left the modelled wire).
type Departures = Vec<(u64, u64)>;

const LOOP_BOUND: usize = 1_000_000;

fn packet(i: usize, len: u32, tos: u8, at: u64) -> SimPacket {
    SimPacket {
        meta: PacketMeta {
            len,
            tos,
            ..PacketMeta::default()
        },
        flow: 0,
        payload: 0,
        kind: PktKind::Udp,
        seq: i as u64,
        sent_at: at,
        echo: 0,
        tcp: None,
        cwr: false,
    }
}

/// Bulk (TOS 0) back to back with a high-priority packet now and then, at instants that are
/// not multiples of the byte time, so no arrival ties with the end of a transmission.
fn trace() -> Vec<Arrival> {
    let mut t = 0u64;
    let mut v = Vec::new();
    for i in 0..400u64 {
        t += 300_007 + (i * 7_919) % 500_000;
        let (len, tos) = match i % 9 {
            0 => (90, 0x10),
            4 => (1514, 0x10),
            k => (60 + (k as u32 * 211) % 1455, 0),
        };
        v.push((t, len, tos));
        if i % 5 == 0 {
            // A small burst: three more at the same instant.
            for k in 0..3u32 {
                v.push((t, 1514 - 400 * k, 0));
            }
        }
    }
    v
}

fn link_spec(rate: u64, device_buffer: u64) -> LinkSpec {
    LinkSpec {
        rate: Rate(rate),
        delay: Duration(0),
        mtu: 1500,
        device_buffer,
        timer_hz: 0,
        clock_hz: 0,
        overhead: 14,
        queue: 1000,
    }
}

/// The simulator's adapter on its engine.
fn through_sim(spec: &LinkSpec, q: Box<dyn Qdisc<SimPacket>>, tr: &[Arrival]) -> Departures {
    let mut eng = Engine::new(u64::MAX);
    let mut link = Link::new(spec, q, 1);
    for (i, a) in tr.iter().enumerate() {
        eng.at(a.0, Ev::SourceSend(i as u32));
    }
    let mut out = Vec::new();
    for _ in 0..LOOP_BOUND {
        let heap = eng.peek_key();
        let wire = link.tx_end;
        let from_wire = match (heap, wire) {
            (None, None) => return out,
            (Some(h), Some(w)) => w < h,
            (None, Some(_)) => true,
            (Some(_), None) => false,
        };
        if from_wire {
            let Some((t, _)) = wire else { break };
            assert!(eng.advance(t, Ev::TxDone).is_ok());
            if let Some(p) = link.on_tx_done(&mut eng) {
                out.push((p.seq, eng.now()));
            }
            continue;
        }
        let Some((t, _)) = heap else { break };
        let Some(ev) = eng.pop_event() else { break };
        assert!(eng.advance(t, ev).is_ok());
        match ev {
            Ev::SourceSend(i) => {
                let (at, len, tos) = tr[i as usize];
                let _ = link.offer(packet(i as usize, len, tos, at), &mut eng);
            }
            Ev::Wake => {
                link.on_wake(&mut eng);
            }
            _ => {}
        }
    }
    panic!("the simulated link did not drain within {LOOP_BOUND} events");
}

/// The router's adapter, driven like `Shaper::run`: receive (enqueue) then a service turn, at
/// each arrival instant and at each deadline; a ring that always has room.
fn through_router<Q: Qdisc<SimPacket>>(
    rate: u64,
    device_buffer: u64,
    mut q: Q,
    tr: &[Arrival],
) -> Departures {
    let mut e = Egress::new(linkshare_router::device_model(rate, device_buffer));
    let mut pulled = Vec::new();
    let mut stamped = Vec::new();
    let mut ended = Vec::new();
    let mut deadline: Option<u64> = None;
    let mut next = 0;
    for _ in 0..LOOP_BOUND {
        let arrival = tr.get(next).map(|a| a.0);
        let now = match (arrival, deadline) {
            (Some(a), Some(d)) => a.min(d),
            (a, d) => match a.or(d) {
                Some(t) => t,
                None => {
                    // Nothing left to wake for: let the wire finish what it holds.
                    let _ = egress_turn(
                        &mut e,
                        &mut q,
                        Time(u64::MAX),
                        usize::MAX,
                        &mut |p: SimPacket, sent| {
                            pulled.push(p.seq);
                            stamped.push(sent);
                        },
                        &mut |_| {},
                        &mut |end| ended.push(end.0),
                    );
                    assert_eq!(pulled.len(), ended.len());
                    // Stamped at the pull, finished by the drain: the same instant.
                    let at_end: Vec<Option<Time>> = ended.iter().map(|t| Some(Time(*t))).collect();
                    assert_eq!(stamped, at_end, "departures stamped at the pull");
                    return pulled.into_iter().zip(ended).collect();
                }
            },
        };
        while next < tr.len() && tr[next].0 == now {
            let (at, len, tos) = tr[next];
            let _ = q.enqueue(packet(next, len, tos, at), Time(now));
            next += 1;
        }
        let turn = egress_turn(
            &mut e,
            &mut q,
            Time(now),
            usize::MAX,
            &mut |p: SimPacket, sent| {
                pulled.push(p.seq);
                stamped.push(sent);
            },
            &mut |_| {},
            &mut |end| ended.push(end.0),
        );
        deadline = turn.next_wakeup.map(|t| t.0).filter(|t| *t > now);
    }
    panic!("the router's turns did not drain within {LOOP_BOUND} iterations");
}

fn prio() -> Prio<SimPacket> {
    match Prio::new(PrioParams::default()) {
        Ok(p) => p,
        Err(e) => panic!("prio: {e:?}"),
    }
}

fn tbf(rate: u64) -> Tbf<SimPacket> {
    let p = TbfParams {
        rate: Rate(rate),
        burst: 4000,
        limit: 1_000_000,
        ..TbfParams::default()
    };
    match Tbf::new(p) {
        Ok(t) => t,
        Err(e) => panic!("tbf: {e:?}"),
    }
}

fn assert_same(sim: &Departures, router: &Departures, n: usize) {
    assert_eq!(sim.len(), n, "the simulator sent {} of {n}", sim.len());
    assert_eq!(router.len(), n, "the router sent {} of {n}", router.len());
    for (k, (s, r)) in sim.iter().zip(router).enumerate() {
        assert_eq!(s, r, "departure {k}: simulator {s:?}, router {r:?}");
    }
}

#[test]
fn prio_over_a_device_buffer_leaves_at_the_same_instants() {
    let tr = trace();
    // 3 Mbit/s does not divide a byte time: exercises the exact drain as well.
    for (rate, buf) in [(10_000_000, 0), (3_000_000, 6000), (10_000_000, 20_000)] {
        let spec = link_spec(rate, buf);
        assert_eq!(
            egress_config(&spec),
            linkshare_router::device_model(rate, buf)
        );
        let sim = through_sim(&spec, Box::new(prio()), &tr);
        let router = through_router(rate, buf, prio(), &tr);
        assert_same(&sim, &router, tr.len());
        // The buffer matters: with none, a high-priority packet overtakes queued bulk.
        let reordered = sim.windows(2).any(|w| w[1].0 < w[0].0);
        assert!(
            reordered,
            "rate {rate} buffer {buf}: no packet overtook another"
        );
    }
}

#[test]
fn a_throttled_scheduler_wakes_both_at_the_same_instants() {
    let tr = trace();
    let (rate, buf) = (10_000_000, 3000);
    let spec = link_spec(rate, buf);
    let sim = through_sim(&spec, Box::new(tbf(4_000_000)), &tr);
    let router = through_router(rate, buf, tbf(4_000_000), &tr);
    assert_same(&sim, &router, tr.len());
    // TBF at 4 Mbit/s paces the 10 Mbit/s wire: departures spread beyond the wire's pace.
    let span = sim.last().map(|d| d.1).unwrap_or(0) - sim.first().map(|d| d.1).unwrap_or(0);
    let bytes: u64 = tr.iter().map(|a| u64::from(a.1)).sum();
    assert!(span >= (bytes - 4000) * 8 * 1_000_000_000 / 4_000_000 - 1_000_000);
}
