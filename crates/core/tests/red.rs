use linkshare_core::packet::PacketMeta;
use linkshare_core::qdisc::red::{Red, RedParams};
use linkshare_core::qdisc::{DropReason, Qdisc};
use linkshare_core::units::Time;

fn pkt() -> PacketMeta {
    PacketMeta {
        len: 1000,
        ..Default::default()
    }
}

fn ect() -> PacketMeta {
    PacketMeta {
        len: 1000,
        tos: 2, // ECT(0)
        ..Default::default()
    }
}

/// Hold the backlog at `b` bytes with wq = 1 (avg = backlog before each arrival) and measure the
/// drop fraction of not-ECN-capable packets. The queue is filled with ECN-capable packets under
/// `ecn = true`, which RED marks instead of dropping in every region, so the fill reaches any
/// backlog (even above `max` without gentle) whatever RED decides meanwhile.
fn fraction(b: u32, gentle: bool, n: u32) -> (f64, Red<PacketMeta>) {
    let mut r = Red::new(RedParams {
        min: 20_000,
        max: 60_000,
        limit: 400_000,
        max_p: 0.1,
        wq: Some(1.0),
        gentle,
        ecn: true,
        seed: 7,
        ..Default::default()
    })
    .unwrap();
    while r.stats().backlog.bytes < b as u64 {
        r.enqueue(ect(), Time(0)).unwrap();
    }
    assert_eq!(r.stats().backlog.bytes, b as u64);
    let mut drops = 0;
    for _ in 0..n {
        match r.enqueue(pkt(), Time(0)) {
            Ok(()) => {
                let _ = r.dequeue(Time(0));
            }
            Err(_) => drops += 1,
        }
        r.stats().check_conservation().unwrap();
    }
    (drops as f64 / n as f64, r)
}

/// The drop fraction Floyd & Jacobson's method 2 gives at a constant `pb`: the n-th packet after
/// a drop is dropped with `pa = pb / (1 - (n-1) pb)`, so `P(gap >= n) = prod_{k<n-1} (1 - pa_k)`
/// and the fraction is `1 / E[gap]`. For integral `1/pb` this is `2 pb / (1 + pb)`.
fn expected_fraction(pb: f64) -> f64 {
    let mut survive = 1.0;
    let mut mean_gap = 0.0;
    let mut k = 0.0;
    while survive > 1e-12 {
        mean_gap += survive; // P(gap >= k+1)
        let denom = 1.0 - k * pb;
        let pa: f64 = if denom <= 0.0 {
            1.0
        } else {
            (pb / denom).min(1.0)
        };
        survive *= 1.0 - pa;
        k += 1.0;
    }
    1.0 / mean_gap
}

#[test]
fn drop_curve_matches_uniform_spacing() {
    // avg = 40000: pb = 0.1 * 0.5 = 0.05; with pa = pb/(1-count pb) the gap between drops is
    // uniform on 1..1/pb, so the drop fraction is 2 pb / (1 + pb).
    for (b, pb) in [(40_000u32, 0.05f64), (30_000, 0.025), (50_000, 0.075)] {
        let (f, _) = fraction(b, false, 100_000);
        let expect = expected_fraction(pb);
        if (1.0 / pb).fract() == 0.0 {
            assert!((expect - 2.0 * pb / (1.0 + pb)).abs() < 1e-9);
        }
        assert!(
            (f - expect).abs() / expect < 0.03,
            "b={b} f={f} expect={expect}"
        );
        // The off-by-one spacing (count including the arriving packet) would give ~2 pb.
        assert!((f - 2.0 * pb).abs() > 0.01 * pb, "b={b} f={f}");
    }
}

#[test]
fn gaps_are_uniform() {
    // At pb = 0.05 every gap 1..=20 is equally likely (5 % each) and none is longer.
    let (_, mut r) = fraction(40_000, false, 0);
    let mut gaps = [0u32; 21];
    let mut since = 0usize;
    let mut n = 0;
    while n < 20_000 {
        since += 1;
        match r.enqueue(pkt(), Time(0)) {
            Ok(()) => {
                let _ = r.dequeue(Time(0));
            }
            Err(_) => {
                assert!(since <= 20, "gap {since} > 1/pb");
                gaps[since] += 1;
                since = 0;
                n += 1;
            }
        }
    }
    for (g, c) in gaps.iter().enumerate().skip(1) {
        let share = *c as f64 / n as f64;
        assert!((share - 0.05).abs() < 0.01, "gap {g}: {share}");
    }
}

#[test]
fn no_drop_below_min() {
    let (f, _) = fraction(15_000, false, 20_000);
    assert_eq!(f, 0.0);
}

#[test]
fn gentle_vs_not() {
    // avg = 1.5 max: gentle pb = 0.1 + 0.9 * 0.5 = 0.55; without gentle everything is forced.
    let (f, r) = fraction(90_000, false, 1000);
    assert_eq!(f, 1.0);
    assert_eq!(r.stats().refused.get(DropReason::AqmForced).packets, 1000);
    let (g, r) = fraction(90_000, true, 50_000);
    // pb = 0.55: the first packet after a drop goes with 0.55, the second surely (pa >= 1).
    let expect = expected_fraction(0.55);
    assert!((expect - 1.0 / 1.45).abs() < 1e-9);
    assert!((g - expect).abs() / expect < 0.03, "g={g} expect={expect}");
    assert_eq!(r.stats().refused.get(DropReason::AqmForced).packets, 0);
    // Above 2 max even gentle forces.
    let (f, _) = fraction(125_000, true, 1000);
    assert_eq!(f, 1.0);
}

#[test]
fn idle_decays_avg() {
    let mut r = Red::new(RedParams {
        wq: Some(0.01),
        ..Default::default()
    })
    .unwrap();
    for _ in 0..500 {
        let _ = r.enqueue(pkt(), Time(0));
    }
    let before = {
        let _ = r.enqueue(pkt(), Time(0));
        r.avg()
    };
    while r.stats().backlog.packets > 0 {
        let _ = r.dequeue(Time(0));
    }
    // 10 Mbit/s, avpkt 1000: 0.8 ms per packet; 80 ms idle = 100 packet times.
    r.enqueue(pkt(), Time(80_000_000)).unwrap();
    let expect = before * 0.99f64.powf(100.0);
    assert!(
        (r.avg() - expect).abs() / expect < 1e-6,
        "{} vs {}",
        r.avg(),
        expect
    );
}
