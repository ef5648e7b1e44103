use linkshare_core::packet::PacketMeta;
use linkshare_core::qdisc::tbf::{Tbf, TbfParams};
use linkshare_core::qdisc::{Dequeued, Qdisc};
use linkshare_core::units::{Rate, Time};
use proptest::prelude::*;

fn pkt(len: u32) -> PacketMeta {
    PacketMeta {
        len,
        ..Default::default()
    }
}

/// Drive a backlogged TBF, waking exactly at NotBefore; return (bytes sent, end time).
fn run(t: &mut Tbf<PacketMeta>, len: u32, n: usize) -> (u64, Time, Vec<Time>) {
    let mut now = Time(0);
    let mut sent = 0u64;
    let mut times = Vec::new();
    for _ in 0..n {
        t.enqueue(pkt(len), now).unwrap();
    }
    loop {
        match t.dequeue(now) {
            Dequeued::Packet(p) => {
                sent += p.len as u64;
                times.push(now);
            }
            Dequeued::NotBefore(x) => {
                assert!(x > now);
                now = x;
            }
            Dequeued::Empty => break,
        }
        t.stats().check_conservation().unwrap();
    }
    (sent, now, times)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(16))]
    #[test]
    fn long_run_rate_within_0_1_percent(len in 64u32..=9000, mbit in 1u64..100) {
        let rate = Rate::mbit(mbit);
        let burst = 9000u32;
        let mut t = Tbf::new(TbfParams { rate, burst, limit: u32::MAX, ..Default::default() }).unwrap();
        let n = 3000;
        let (sent, end, _) = run(&mut t, len, n);
        prop_assert_eq!(sent, len as u64 * n as u64);
        // conformance: bytes sent by `end` <= rate*end + burst, and not much less.
        let allowed = rate.bytes_in(linkshare_core::units::Duration(end.0)) + burst as u64;
        prop_assert!(sent <= allowed + 1);
        let measured = (sent - burst as u64) as f64 * 8.0 / end.as_secs_f64();
        let err = (measured - rate.0 as f64).abs() / rate.0 as f64;
        prop_assert!(err < 0.001, "rate error {}", err);
    }
}

#[test]
fn idle_bucket_releases_burst_at_once() {
    let mut t = Tbf::new(TbfParams {
        rate: Rate::mbit(1),
        burst: 10_000,
        limit: 100_000,
        ..Default::default()
    })
    .unwrap();
    for _ in 0..20 {
        t.enqueue(pkt(1000), Time(0)).unwrap();
    }
    let mut n = 0;
    while let Dequeued::Packet(_) = t.dequeue(Time(0)) {
        n += 1;
    }
    assert_eq!(n, 10);
}

#[test]
fn peakrate_caps_burst_speed() {
    // Peak 10 Mbit/s, mtu 1000 B: back-to-back packets of a burst spaced 800 us apart.
    let mut t = Tbf::new(TbfParams {
        rate: Rate::mbit(1),
        burst: 10_000,
        limit: 100_000,
        peakrate: Some(Rate::mbit(10)),
        mtu: 1000,
        ..Default::default()
    })
    .unwrap();
    let (_, _, times) = run(&mut t, 1000, 5);
    assert_eq!(times[0], Time(0));
    for w in times.windows(2) {
        assert_eq!(w[1].0 - w[0].0, 800_000);
    }
}
