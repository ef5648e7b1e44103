//! Behaviour of the whole qdisc: the tc-cake(8) example, shaping, tins, host fairness, the ACK
//! filter, overhead, memory and conservation.

use std::net::Ipv4Addr;

use super::*;
use crate::packet::{PacketMeta, TcpInfo};
use crate::qdisc::{Dequeued, DropReason, Qdisc};
use crate::units::Time;

const MS: u64 = 1_000_000;

fn pkt(src: u8, dst: u8, port: u16, len: u32, dscp: u8) -> PacketMeta {
    PacketMeta {
        len,
        tos: dscp << 2,
        proto: 17,
        src: Ipv4Addr::new(10, 0, 0, src).into(),
        dst: Ipv4Addr::new(10, 0, 1, dst).into(),
        src_port: port,
        dst_port: 5001,
        flow_hash: u32::from(src) << 24 | u32::from(dst) << 16 | u32::from(port),
        ..Default::default()
    }
}

fn cake(p: CakeParams) -> Cake<PacketMeta> {
    Cake::new(p).unwrap()
}

fn mbit(m: u64) -> Option<Rate> {
    Some(Rate::mbit(m))
}

#[test]
fn tc_cake_example_at_100mbit_diffserv3() {
    let q = cake(CakeParams {
        bandwidth: mbit(100),
        ..Default::default()
    });
    let v = q.tin_views();
    let got: Vec<(&str, u64, u16)> = v
        .iter()
        .map(|t| (t.name, t.threshold.bits_per_sec(), t.flow_quantum))
        .collect();
    assert_eq!(
        got,
        vec![
            ("Bulk", 6_250_000, 300),
            ("Best Effort", 100_000_000, 1514),
            ("Voice", 25_000_000, 762)
        ]
    );
    assert_eq!(q.memory_limit(), 5_000_000);
    // Unlimited: 10240 MTUs; explicit memlimit wins.
    assert_eq!(cake(CakeParams::default()).memory_limit(), 10240 * 1514);
    let m = cake(CakeParams {
        memlimit: Some(1 << 20),
        ..Default::default()
    });
    assert_eq!(m.memory_limit(), 1 << 20);
}

#[test]
fn rtt_presets_and_times() {
    let mut p = CakeParams::default();
    p.set_rtt("satellite").unwrap();
    assert_eq!(
        (p.rtt, p.target),
        (Duration::from_secs(1), Duration::from_millis(50))
    );
    p.set_rtt("40ms").unwrap();
    assert_eq!(
        (p.rtt, p.target),
        (Duration::from_millis(40), Duration::from_millis(2))
    );
    assert!(p.set_rtt("warp").is_err());
    for (name, ..) in RTT_PRESETS {
        p.set_rtt(name).unwrap();
        p.validate().unwrap();
    }
}

#[test]
fn validation_names_the_key() {
    let bad = [
        (
            CakeParams {
                rtt: Duration::ZERO,
                ..Default::default()
            },
            "rtt",
        ),
        (
            CakeParams {
                overhead: CakeOverhead {
                    overhead: 300,
                    ..Default::default()
                },
                ..Default::default()
            },
            "overhead",
        ),
        (
            CakeParams {
                memlimit: Some(100),
                ..Default::default()
            },
            "memlimit",
        ),
        (
            CakeParams {
                bandwidth: Some(Rate::bps(1)),
                ..Default::default()
            },
            "bandwidth",
        ),
    ];
    for (p, key) in bad {
        assert_eq!(Cake::<PacketMeta>::new(p).err().unwrap().param, key);
    }
}

/// Dequeue until empty, advancing time to each `NotBefore`; returns `(time, packet)` pairs.
fn drain_timed(q: &mut Cake<PacketMeta>, mut now: u64, limit: usize) -> Vec<(u64, PacketMeta)> {
    let mut out = Vec::new();
    for _ in 0..limit * 4 {
        match q.dequeue(Time(now)) {
            Dequeued::Packet(p) => out.push((now, p)),
            Dequeued::NotBefore(t) => now = t.0.max(now + 1),
            Dequeued::Empty => break,
        }
        if out.len() == limit {
            break;
        }
    }
    out
}

#[test]
fn the_shaper_paces_at_the_bandwidth_and_idle_time_is_not_banked() {
    let mut q = cake(CakeParams {
        bandwidth: mbit(10),
        ..Default::default()
    });
    // Start at 5 s: the shaper must not have banked the idle time before.
    let t0 = 5_000 * MS;
    for i in 0..50 {
        // ECN-capable, so COBALT marks the late ones instead of dropping them.
        let mut p = pkt(1, 1, i % 4, 1250, 0);
        p.tos |= 2;
        q.enqueue(p, Time(t0)).unwrap();
    }
    let sent = drain_timed(&mut q, t0, 50);
    assert_eq!(sent.len(), 50);
    // 1250 B at 10 Mbit/s is 1 ms: 50 packets take 49 ms after the first.
    let span = sent[49].0 - sent[0].0;
    assert!((span as i64 - 49 * MS as i64).abs() < 50_000, "{span}");
    q.stats().check_conservation().unwrap();
}

#[test]
fn atm_overhead_is_charged_per_packet() {
    // PPPoE over ATM, LLC/SNAP: a 100-byte packet is 140 bytes, three cells, 159 bytes.
    let mut q = cake(CakeParams {
        bandwidth: mbit(1),
        overhead: CakeOverhead::keyword("pppoe-llcsnap").unwrap(),
        ..Default::default()
    });
    for i in 0..20 {
        q.enqueue(pkt(1, 1, i, 100, 0), Time(0)).unwrap();
    }
    let sent = drain_timed(&mut q, 0, 20);
    let gap = (sent[19].0 - sent[1].0) / 18;
    // 159 B at 1 Mbit/s = 1272 us (the raw 100 B would be 800 us).
    assert!((gap as i64 - 1_272_000).abs() < 2_000, "{gap}");
}

/// Keep every flow backlogged; dequeue `n` packets at a fixed instant (no AQM); bytes per
/// source host.
fn shares(mode: FlowMode, flows_a: u16, flows_b: u16, n: usize) -> (u64, u64) {
    let mut q = cake(CakeParams {
        isolation: mode,
        ..Default::default()
    });
    let mut flows = Vec::new();
    for f in 0..flows_a {
        flows.push(pkt(1, 9, 1000 + f, 1500, 0));
    }
    for f in 0..flows_b {
        flows.push(pkt(2, 9, 2000 + f, 1500, 0));
    }
    for p in &flows {
        for _ in 0..3 {
            q.enqueue(*p, Time(0)).unwrap();
        }
    }
    let (mut a, mut b) = (0, 0);
    for _ in 0..n {
        let Dequeued::Packet(p) = q.dequeue(Time(0)) else {
            panic!("ran dry")
        };
        if p.src == Ipv4Addr::new(10, 0, 0, 1) {
            a += u64::from(p.len);
        } else {
            b += u64::from(p.len);
        }
        q.enqueue(p, Time(0)).unwrap();
    }
    q.stats().check_conservation().unwrap();
    (a, b)
}

#[test]
fn dual_srchost_shares_by_host_triple_isolate_by_flow() {
    let (a, b) = shares(FlowMode::DualSrchost, 16, 1, 20_000);
    let ratio = a as f64 / b as f64;
    assert!((ratio - 1.0).abs() < 0.05, "dual-srchost a/b = {ratio}");
    // All flows share the destination host: per-flow fairness, 16 : 1.
    let (a, b) = shares(FlowMode::TripleIsolate, 16, 1, 20_000);
    let ratio = a as f64 / b as f64;
    assert!((ratio - 16.0).abs() < 0.8, "triple-isolate a/b = {ratio}");
    // Plain flows: per flow as well.
    let (a, b) = shares(FlowMode::Flows, 16, 1, 20_000);
    assert!((a as f64 / b as f64 - 16.0).abs() < 0.8);
    // srchost: one queue per host, equal.
    let (a, b) = shares(FlowMode::Srchost, 16, 1, 20_000);
    assert!((a as f64 / b as f64 - 1.0).abs() < 0.05);
}

#[test]
fn diffserv4_tins_take_their_thresholds_under_saturation() {
    let mut q = cake(CakeParams {
        bandwidth: mbit(10),
        diffserv: DiffservMode::Diffserv4,
        ..Default::default()
    });
    // Best effort (0), bulk (CS1 = 8), video (AF41 = 34), voice (EF = 46), all saturated.
    let dscps = [0u8, 8, 34, 46];
    let mut now = 0;
    for (i, d) in dscps.iter().enumerate() {
        for _ in 0..4 {
            q.enqueue(pkt(1, 1, i as u16, 1000, *d), Time(now)).unwrap();
        }
    }
    let mut bytes = [0u64; 4];
    let mut sent = 0;
    while sent < 4000 {
        match q.dequeue(Time(now)) {
            Dequeued::Packet(p) => {
                let tin = dscps.iter().position(|d| *d == p.dscp()).unwrap();
                bytes[tin] += u64::from(p.len);
                sent += 1;
                let mut again = p;
                again.tos &= !3;
                q.enqueue(again, Time(now)).unwrap();
            }
            Dequeued::NotBefore(t) => now = t.0,
            Dequeued::Empty => panic!("empty"),
        }
        // Sojourn stays low: keep COBALT out of this test by refilling at the same instant.
    }
    let total: u64 = bytes.iter().sum();
    let share: Vec<f64> = bytes.iter().map(|b| *b as f64 / total as f64).collect();
    // Voice up to 1/4, video 1/2, bulk 1/16, best effort the remaining 3/16.
    let want = [0.1875, 0.0625, 0.5, 0.25];
    for i in 0..4 {
        assert!((share[i] - want[i]).abs() < 0.02, "tin {i}: {share:?}");
    }
    let v = q.tin_views();
    assert_eq!(
        v.iter().map(|t| t.name).collect::<Vec<_>>(),
        ["Bulk", "Best Effort", "Video", "Voice"]
    );
}

#[derive(Clone, Debug)]
struct Seg(PacketMeta, TcpInfo);
impl crate::Packet for Seg {
    fn meta(&self) -> &PacketMeta {
        &self.0
    }
    fn tcp(&self) -> Option<TcpInfo> {
        Some(self.1)
    }
}

#[test]
fn the_ack_filter_drops_redundant_acks() {
    let mut q: Cake<Seg> = Cake::new(CakeParams {
        ack_filter: AckFilter::On,
        ..Default::default()
    })
    .unwrap();
    let mut meta = pkt(1, 1, 40000, 52, 0);
    meta.proto = 6;
    for n in 1..=10u32 {
        let info = TcpInfo {
            ack: n * 1448,
            flags: TcpInfo::ACK,
            ..Default::default()
        };
        q.enqueue(Seg(meta, info), Time(0)).unwrap();
    }
    // Each arrival after the third finds two eligible older ACKs and drops the oldest.
    let dropped = q.stats().dropped.get(DropReason::AckFilter).packets;
    assert_eq!(dropped, 8);
    let v = q.tin_views();
    assert_eq!(v.iter().map(|t| t.stats.ack_drops).sum::<u32>(), 8);
    let mut left = Vec::new();
    while let Dequeued::Packet(s) = q.dequeue(Time(0)) {
        left.push(s.1.ack / 1448);
    }
    // The newest two remain.
    assert_eq!(left, vec![9, 10]);
    q.stats().check_conservation().unwrap();
}

#[test]
fn ecn_capable_packets_are_marked_under_a_standing_queue() {
    let mut q = cake(CakeParams {
        bandwidth: mbit(10),
        ..Default::default()
    });
    let mut now = 0;
    let mut p = pkt(1, 1, 1, 1500, 0);
    p.tos |= 2; // ECT(0)
    for _ in 0..400 {
        q.enqueue(p, Time(now)).unwrap();
    }
    let mut marked = 0;
    while now < 600 * MS {
        match q.dequeue(Time(now)) {
            Dequeued::Packet(s) => {
                if s.ecn() == 3 {
                    marked += 1;
                }
                q.enqueue(p, Time(now)).unwrap();
            }
            Dequeued::NotBefore(t) => now = t.0,
            Dequeued::Empty => break,
        }
    }
    assert!(marked > 0);
    assert_eq!(q.stats().dropped.get(DropReason::Aqm).packets, 0);
    assert_eq!(q.stats().marked, marked);
    q.stats().check_conservation().unwrap();
}

#[test]
fn memlimit_drops_from_the_longest_queue() {
    let mut q = cake(CakeParams {
        memlimit: Some(30_000),
        ..Default::default()
    });
    for _ in 0..30 {
        q.enqueue(pkt(1, 1, 1, 1000, 0), Time(0)).unwrap();
    }
    q.enqueue(pkt(2, 1, 2, 1000, 0), Time(0)).unwrap();
    let mut victims = Vec::new();
    while let Some(d) = q.take_dropped() {
        assert_eq!(d.reason, DropReason::Overflow);
        victims.push(d.packet.src_port);
    }
    assert_eq!(victims, vec![1]);
    assert!(q.memory_max_used() <= 31_000);
    q.stats().check_conservation().unwrap();
}

#[test]
fn wash_clears_the_dscp_after_choosing_the_tin() {
    let mut q = cake(CakeParams {
        wash: true,
        ..Default::default()
    });
    let mut p = pkt(1, 1, 1, 100, 46);
    p.tos |= 1;
    q.enqueue(p, Time(0)).unwrap();
    let out = q.dequeue(Time(0)).packet().unwrap();
    assert_eq!(out.tos, 1);
    let voice = q
        .tin_views()
        .into_iter()
        .find(|t| t.name == "Voice")
        .unwrap();
    assert_eq!(voice.stats.packets, 1);
}

#[test]
fn an_idle_instance_is_small_and_tables_are_reclaimed() {
    let mut q = cake(CakeParams::default());
    assert!(q.heap_bytes() <= 1024, "{}", q.heap_bytes());
    for i in 0..10 {
        q.enqueue(pkt(1, 1, i, 500, 0), Time(0)).unwrap();
    }
    assert_eq!(q.tables_allocated(), 1);
    assert!(q.heap_bytes() > 50_000);
    while q.dequeue(Time(MS)).packet().is_some() {}
    // Empty, but not yet idle for long: the table stays.
    assert!(matches!(q.dequeue(Time(2 * MS)), Dequeued::Empty));
    assert_eq!(q.tables_allocated(), 1);
    assert!(matches!(q.dequeue(Time(2_000 * MS)), Dequeued::Empty));
    assert_eq!(q.tables_allocated(), 0);
    assert!(q.heap_bytes() <= 1024);
    // Traffic again allocates again.
    q.enqueue(pkt(1, 1, 1, 500, 0), Time(2_001 * MS)).unwrap();
    assert_eq!(
        q.dequeue(Time(2_001 * MS)).packet().map(|p| p.len),
        Some(500)
    );
    q.stats().check_conservation().unwrap();
}

#[test]
fn ingress_mode_charges_drops_to_the_shaper() {
    // Same AQM-heavy load with and without ingress: in ingress mode fewer packets leave in the
    // same time, because dropped ones used the shaper's time too.
    let run = |ingress: bool| {
        let mut q = cake(CakeParams {
            bandwidth: mbit(10),
            ingress,
            memlimit: Some(20_000),
            ..Default::default()
        });
        let mut now = 0;
        let mut sent = 0;
        let mut next_arrival = 0;
        while now < 200 * MS {
            while next_arrival <= now {
                // 20 Mbit/s offered into 10.
                let _ = q.enqueue(
                    pkt(1, 1, (next_arrival / MS) as u16 % 8, 1250, 0),
                    Time(next_arrival),
                );
                next_arrival += MS / 2;
            }
            match q.dequeue(Time(now)) {
                Dequeued::Packet(_) => sent += 1,
                Dequeued::NotBefore(t) => now = t.0.min(next_arrival),
                Dequeued::Empty => now = next_arrival,
            }
        }
        q.stats().check_conservation().unwrap();
        sent
    };
    let egress = run(false);
    let ingress = run(true);
    assert!(egress >= 195, "{egress}");
    assert!(ingress < egress, "{ingress} vs {egress}");
}
