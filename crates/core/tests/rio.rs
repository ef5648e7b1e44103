use linkshare_core::packet::PacketMeta;
use linkshare_core::qdisc::rio::{Rio, RioParams};
use linkshare_core::qdisc::{DropReason, Qdisc};
use linkshare_core::units::Time;
use proptest::prelude::*;

const AF11: u8 = 10;
const AF12: u8 = 12;
const AF13: u8 = 14;

fn pkt(dscp: u8, ect: bool) -> PacketMeta {
    PacketMeta {
        len: 1000,
        tos: (dscp << 2) | if ect { 2 } else { 0 },
        ..Default::default()
    }
}

fn rio() -> Rio<PacketMeta> {
    Rio::new(RioParams {
        wq: Some(1.0),
        ecn: true,
        seed: 3,
        ..Default::default()
    })
    .unwrap()
}

/// Fill with ECN-capable packets (marked, never dropped, under `ecn = true`): `in_bytes` of AF11
/// and `out_bytes` of AF12.
fn fill(r: &mut Rio<PacketMeta>, in_bytes: u32, out_bytes: u32) {
    for _ in 0..in_bytes / 1000 {
        r.enqueue(pkt(AF11, true), Time(0)).unwrap();
    }
    for _ in 0..out_bytes / 1000 {
        r.enqueue(pkt(AF12, true), Time(0)).unwrap();
    }
}

/// Offer `n` not-ECN packets of `dscp` at a constant backlog and return the drop fraction. After
/// each accepted packet one packet of the same kind (in/out) leaves: the queue is rotated (a
/// packet of the other kind at the head goes back to the tail as ECN-capable, which RIO marks
/// rather than drops) until one of the same kind is at the head, so in and total bytes stay put.
fn drop_fraction(r: &mut Rio<PacketMeta>, dscp: u8, n: u32) -> f64 {
    let mut drops = 0;
    for _ in 0..n {
        match r.enqueue(pkt(dscp, false), Time(0)) {
            Ok(()) => {
                // Remove one packet of the same kind to hold the averages: the queue is ordered,
                // so drain one and put back what came out if it was of the other kind.
                let mut taken = 0;
                while taken == 0 {
                    let p = r.dequeue(Time(0)).packet().unwrap();
                    let same =
                        RioParams::default().is_in(p.dscp()) == RioParams::default().is_in(dscp);
                    if same {
                        taken = 1;
                    } else {
                        let mut p = p;
                        p.tos = (p.tos & !3) | 2;
                        r.enqueue(p, Time(0)).unwrap();
                    }
                }
            }
            Err(_) => drops += 1,
        }
        r.stats().check_conservation().unwrap();
    }
    drops as f64 / n as f64
}

#[test]
fn out_packets_follow_the_out_profile_on_the_total_average() {
    // 10 000 B queued, all out: avg_total = 10 000, pb_out = 0.1 * (10 000 - 5 000) / 10 000 =
    // 0.05, so the drop fraction is 2 pb / (1 + pb) = 0.0952 (uniform spacing, as `red`).
    let mut r = rio();
    fill(&mut r, 0, 10_000);
    let f = drop_fraction(&mut r, AF12, 60_000);
    let expect = 2.0 * 0.05 / 1.05;
    assert!((f - expect).abs() / expect < 0.04, "f={f} expect={expect}");
    // An in packet at the same moment: avg_in = 0, never dropped.
    assert_eq!(drop_fraction(&mut r, AF11, 5_000), 0.0);
    let mut g = std::collections::HashMap::new();
    r.extra_stats(&mut |k, v| {
        g.insert(k, v);
    });
    assert_eq!(g["in_early_drops"], 0.0);
    assert!(g["out_early_drops"] > 0.0);
}

#[test]
fn in_packets_judged_on_in_bytes_only() {
    // 40 000 B of in packets + 20 000 B of out: avg_total = 60 000 > out_max (15 000): every out
    // packet is a forced drop; avg_in = 40 000: pb_in = 0.1 * 5 000 / 10 000 = 0.05.
    let mut r = rio();
    fill(&mut r, 40_000, 20_000);
    assert_eq!(drop_fraction(&mut r, AF13, 1000), 1.0);
    assert_eq!(
        r.stats().refused.get(DropReason::AqmForced).packets,
        1000,
        "out packets above out_max are forced drops"
    );
    let f = drop_fraction(&mut r, AF11, 60_000);
    let expect = 2.0 * 0.05 / 1.05;
    assert!((f - expect).abs() / expect < 0.04, "f={f} expect={expect}");
}

#[test]
fn averages_decay_from_their_own_idle_time() {
    let mut r = Rio::<PacketMeta>::new(RioParams {
        wq: Some(0.5),
        ..Default::default()
    })
    .unwrap();
    // in, out, in: avg_total after the third arrival = 0.5*(0.5*1000) + 0.5*2000 = 1250;
    // avg_in after its second arrival = 0.5 * 1000 = 500 (the out packet does not count).
    r.enqueue(pkt(AF11, false), Time(0)).unwrap();
    r.enqueue(pkt(AF12, false), Time(0)).unwrap();
    r.enqueue(pkt(AF11, false), Time(0)).unwrap();
    assert!((r.avg_total() - 1250.0).abs() < 1e-9, "{}", r.avg_total());
    assert!((r.avg_in() - 500.0).abs() < 1e-9, "{}", r.avg_in());
    // Drain at t = 0; 8 ms idle at 10 Mbit/s with avpkt 1000 = 10 packet times.
    while r.dequeue(Time(0)).packet().is_some() {}
    let total = r.avg_total();
    r.enqueue(pkt(AF12, false), Time(8_000_000)).unwrap();
    let expect = total * 0.5f64.powi(10);
    assert!((r.avg_total() - expect).abs() < 1e-9);
    // avg_in is untouched by an out arrival.
    assert!((r.avg_in() - 500.0).abs() < 1e-9);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn conservation_and_in_protected(ops in proptest::collection::vec((0u8..4, 64u32..1500), 1..800)) {
        let mut r = Rio::<PacketMeta>::new(RioParams {
            limit: 60_000,
            in_min: 20_000,
            in_max: 40_000,
            out_min: 5_000,
            out_max: 15_000,
            wq: Some(0.5),
            ..Default::default()
        }).unwrap();
        let (mut in_off, mut in_drop) = (0u32, 0u32);
        for (i, (op, len)) in ops.into_iter().enumerate() {
            let now = Time(i as u64 * 100_000);
            match op {
                0 => { let _ = r.dequeue(now); }
                1 => {
                    in_off += 1;
                    let p = PacketMeta { len, tos: AF11 << 2, ..Default::default() };
                    if r.enqueue(p, now).is_err() { in_drop += 1; }
                }
                _ => {
                    let p = PacketMeta { len, tos: AF12 << 2, ..Default::default() };
                    let _ = r.enqueue(p, now);
                }
            }
            prop_assert!(r.stats().check_conservation().is_ok());
            prop_assert!(r.stats().backlog.bytes <= 60_000);
        }
        // In packets are judged on the in bytes alone: avg_in never exceeds the in bytes ever
        // offered, so fewer than in_min / 1500 in packets can never be dropped, however many
        // out packets crowd the queue.
        if in_off * 1500 < 20_000 {
            prop_assert_eq!(in_drop, 0);
        }
    }
}
