//! Unit tests of the egress model: the pull rule, exact drain, ticks and wake-ups.

use super::*;
use crate::packet::{Packet, PacketMeta};
use crate::qdisc::fifo::Fifo;
use crate::qdisc::fifo::FifoLimit;

#[derive(Clone, Debug, PartialEq, Eq)]
struct P {
    meta: PacketMeta,
    id: u32,
}

impl Packet for P {
    fn meta(&self) -> &PacketMeta {
        &self.meta
    }
}

fn pkt(id: u32, len: u32) -> P {
    let meta = PacketMeta {
        len,
        ..PacketMeta::default()
    };
    P { meta, id }
}

fn cfg(rate_bps: u64, device_buffer: u64) -> EgressConfig {
    EgressConfig {
        rate_bps,
        device_buffer,
        full_packet: 1500,
        timer_hz: 0,
        clock_hz: 0,
    }
}

/// A scheduler that answers from a script: packets, then a fixed answer (`NotBefore` or empty).
struct Script {
    q: VecDeque<P>,
    then: Option<Time>,
    asked_at: Vec<Time>,
}

impl Script {
    fn new(lens: &[u32], then: Option<Time>) -> Script {
        let q = lens
            .iter()
            .enumerate()
            .map(|(i, &l)| pkt(i as u32, l))
            .collect();
        Script {
            q,
            then,
            asked_at: Vec::new(),
        }
    }
    fn dequeue(&mut self, now: Time) -> Dequeued<P> {
        self.asked_at.push(now);
        match self.q.pop_front() {
            Some(p) => Dequeued::Packet(p),
            None => match self.then {
                Some(t) => Dequeued::NotBefore(t),
                None => Dequeued::Empty,
            },
        }
    }
}

/// Pull everything at `now`, collecting `(id, wire_end)`.
fn pull_all(e: &mut Egress, q: &mut Script, now: u64) -> (Vec<(u32, Option<Time>)>, Stop) {
    let mut got = Vec::new();
    let stop = e.pull_with(Time(now), &mut |t| q.dequeue(t), &mut |p: P, end| {
        got.push((p.id, end))
    });
    (got, stop)
}

#[test]
fn device_buffer_zero_holds_only_the_wire() {
    // 8 Mbit/s: one byte per µs.
    let mut e = Egress::new(cfg(8_000_000, 0));
    let mut q = Script::new(&[1000, 1000, 1000], None);
    let (got, stop) = pull_all(&mut e, &mut q, 0);
    assert_eq!(got, vec![(0, Some(Time(1_000_000)))]);
    assert_eq!(
        stop,
        Stop::DeviceFull {
            until: Time(1_000_000)
        }
    );
    assert_eq!(e.next_wakeup(), Some(Time(1_000_000)));
    // The scheduler chooses the next packet only when the wire frees up.
    assert_eq!(e.on_tx_done(), None);
    let (got, _) = pull_all(&mut e, &mut q, 1_000_000);
    assert_eq!(got, vec![(1, Some(Time(2_000_000)))]);
}

#[test]
fn pull_rule_with_mixed_sizes_never_overfills_the_buffer() {
    // Room for 3000 bytes behind the wire, full packet 1500: pull while waiting ≤ 1500.
    let mut e = Egress::new(cfg(8_000_000, 3000));
    let mut q = Script::new(&[100, 1500, 40, 1400, 60, 1500, 1500], None);
    let (got, stop) = pull_all(&mut e, &mut q, 0);
    // 100 on the wire; waiting 0 → +1500 → 1500 → +40 → 1540 > 1500: stop.
    let ids: Vec<u32> = got.iter().map(|g| g.0).collect();
    assert_eq!(ids, vec![0, 1, 2]);
    assert_eq!(got[0].1, Some(Time(100_000)));
    assert!(got[1..].iter().all(|g| g.1.is_none()));
    assert_eq!(e.waiting_bytes(), 1540);
    assert_eq!(
        stop,
        Stop::DeviceFull {
            until: Time(100_000)
        }
    );
    // Each completion: the head goes onto the wire, the rule is asked again.
    let mut now = 100_000;
    let mut seen = ids.len();
    while let Some(end) = e.on_tx_done() {
        assert!(end.0 > now);
        let (more, _) = pull_all(&mut e, &mut q, now);
        seen += more.len();
        assert!(
            e.waiting_bytes() <= 3000,
            "{} bytes waiting",
            e.waiting_bytes()
        );
        now = end.0;
    }
    assert_eq!(seen, 7);
    assert_eq!(
        e.stats().sent_bytes,
        100 + 1500 + 40 + 1400 + 60 + 1500 + 1500
    );
}

#[test]
fn idle_wire_always_takes_a_packet_even_above_the_buffer() {
    let mut e = Egress::new(cfg(8_000_000, 0));
    let mut q = Script::new(&[9000], None);
    let (got, _) = pull_all(&mut e, &mut q, 5);
    assert_eq!(got, vec![(0, Some(Time(9_000_005)))]);
}

#[test]
fn drain_is_exact_over_a_long_busy_period() {
    // 3 bit/ns does not divide a byte: 64 bytes take 170.67 ns each. Per-packet rounding would
    // drift by a third of a ns per packet; the carried remainder does not drift at all.
    let rate = 3_000_000_000u64;
    let n = 1_000_000u64;
    let mut e = Egress::new(cfg(rate, u64::MAX));
    let lens = vec![64u32; n as usize];
    let mut q = Script::new(&lens, None);
    let (got, _) = pull_all(&mut e, &mut q, 7);
    assert_eq!(got.len(), n as usize);
    let mut k = 1u64;
    let mut last = got[0].1.unwrap_or(Time(0));
    loop {
        // The k-th packet ends at the first ns at or after its exact fluid end.
        let exact = (u128::from(k) * 64 * 8 * 1_000_000_000).div_ceil(u128::from(rate)) as u64;
        assert_eq!(last.0, 7 + exact, "packet {k}");
        match e.on_tx_done() {
            Some(end) => last = end,
            None => break,
        }
        k += 1;
    }
    assert_eq!(k, n);
    assert_eq!(e.stats().sent_packets, n);
}

#[test]
fn a_new_busy_period_starts_at_the_pull() {
    let mut e = Egress::new(cfg(3_000_000_000, 0));
    let mut q = Script::new(&[64, 64], None);
    let (got, _) = pull_all(&mut e, &mut q, 0);
    assert_eq!(got, vec![(0, Some(Time(171)))]);
    assert_eq!(e.on_tx_done(), None);
    // Idle since 171: the next packet starts at its pull, the old remainder is gone.
    let (got, _) = pull_all(&mut e, &mut q, 1000);
    assert_eq!(got, vec![(1, Some(Time(1171)))]);
}

#[test]
fn unpaced_device_holds_nothing() {
    let mut e = Egress::new(cfg(0, 0));
    let mut q = Script::new(&[1500, 1500, 1500], None);
    let (got, stop) = pull_all(&mut e, &mut q, 42);
    assert_eq!(got.len(), 3);
    assert!(got.iter().all(|g| g.1 == Some(Time(42))));
    assert_eq!(stop, Stop::Empty);
    assert_eq!(e.in_device(), 0);
    assert_eq!(e.next_wakeup(), None);
}

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
    assert_eq!(round_up_to_tick(u64::MAX, 1000), u64::MAX);
}

#[test]
fn scheduler_sees_the_clock_tick_and_wakes_on_the_timer_tick() {
    let mut e = Egress::new(EgressConfig {
        timer_hz: 1000,
        clock_hz: 100,
        ..cfg(8_000_000, 0)
    });
    let mut q = Script::new(&[], Some(Time(12_300_000)));
    let (_, stop) = pull_all(&mut e, &mut q, 15_000_000);
    // The scheduler was told 10 ms (clock 100 Hz, rounded down).
    assert_eq!(q.asked_at, vec![Time(10_000_000)]);
    // 12.3 ms → timer tick 13 ms → clock tick 20 ms.
    assert_eq!(
        stop,
        Stop::Throttled {
            until: Time(12_300_000),
            wake: Some(Time(20_000_000))
        }
    );
    assert_eq!(e.next_wakeup(), Some(Time(20_000_000)));
}

#[test]
fn a_wake_up_in_the_past_fires_now() {
    let mut e = Egress::new(cfg(8_000_000, 0));
    let mut q = Script::new(&[], Some(Time(10)));
    let (_, stop) = pull_all(&mut e, &mut q, 500);
    assert_eq!(
        stop,
        Stop::Throttled {
            until: Time(10),
            wake: Some(Time(500))
        }
    );
}

#[test]
fn one_pending_wake_up_earlier_replaces_later_stale_ignored() {
    let mut e = Egress::new(cfg(8_000_000, 0));
    let mut q = Script::new(&[], Some(Time(9_000)));
    let (_, s1) = pull_all(&mut e, &mut q, 0);
    assert!(matches!(
        s1,
        Stop::Throttled {
            wake: Some(Time(9_000)),
            ..
        }
    ));
    // A later answer does not re-arm.
    q.then = Some(Time(12_000));
    let (_, s2) = pull_all(&mut e, &mut q, 100);
    assert!(matches!(s2, Stop::Throttled { wake: None, .. }));
    // An earlier one replaces it.
    q.then = Some(Time(5_000));
    let (_, s3) = pull_all(&mut e, &mut q, 200);
    assert!(matches!(
        s3,
        Stop::Throttled {
            wake: Some(Time(5_000)),
            ..
        }
    ));
    assert_eq!(e.next_wakeup(), Some(Time(5_000)));
    // The replaced timer at 9 µs is stale; the one at 5 µs is not.
    assert!(!e.on_wake(Time(9_000)));
    assert!(e.on_wake(Time(5_000)));
    assert!(!e.on_wake(Time(5_000)));
    assert_eq!(e.next_wakeup(), None);
}

#[test]
fn next_wakeup_is_the_earlier_of_drain_and_timer() {
    let mut e = Egress::new(cfg(8_000_000, 0));
    let mut q = Script::new(&[1000], Some(Time(400_000)));
    let (_, stop) = pull_all(&mut e, &mut q, 0);
    // The wire is busy until 1 ms and the buffer holds nothing more: full.
    assert_eq!(
        stop,
        Stop::DeviceFull {
            until: Time(1_000_000)
        }
    );
    assert_eq!(e.next_wakeup(), Some(Time(1_000_000)));
    // Room again: the scheduler is asked and throttles until 400 µs, the earlier instant.
    e.reconfigure(cfg(8_000_000, 3000));
    let (_, stop) = pull_all(&mut e, &mut q, 1);
    assert!(matches!(stop, Stop::Throttled { .. }));
    assert_eq!(e.next_wakeup(), Some(Time(400_000)));
}

#[test]
fn complete_until_catches_up_back_to_back() {
    let mut e = Egress::new(cfg(8_000_000, u64::MAX));
    let mut q = Script::new(&[1000, 1000, 1000], None);
    let _ = pull_all(&mut e, &mut q, 0);
    // Checked late, at 2.5 ms: two packets have left, the third started at 2 ms, not 2.5.
    assert_eq!(e.complete_until(Time(2_500_000)), 2);
    assert_eq!(e.wire_end(), Some(Time(3_000_000)));
    assert_eq!(e.complete_until(Time(3_000_000)), 1);
    assert_eq!(e.in_device(), 0);
}

#[test]
fn fifo_scheduler_through_the_model() {
    // A real qdisc through the public interface only.
    let mut q: Fifo<P> = Fifo::new(FifoLimit::Packets(100));
    for i in 0..4 {
        assert!(q.enqueue(pkt(i, 500), Time(0)).is_ok());
    }
    let mut e = Egress::new(cfg(4_000_000, 1500));
    let mut got = Vec::new();
    let stop = e.pull(&mut q, Time(0), &mut |p: P, end| got.push((p.id, end)));
    // 500 on the wire (1 ms), then waiting 0 → 500 ≤ 0? no: 0 + 1500 ≤ 1500 → pull; 500 + 1500 > 1500.
    assert_eq!(got, vec![(0, Some(Time(1_000_000))), (1, None)]);
    assert_eq!(
        stop,
        Stop::DeviceFull {
            until: Time(1_000_000)
        }
    );
    assert_eq!(q.backlog().packets, 2);
}

#[test]
fn a_rate_change_keeps_the_device_and_counts_everything() {
    let mut e = Egress::new(cfg(8_000_000, u64::MAX));
    let mut q = Script::new(&[1000, 1000, 1000], None);
    let _ = pull_all(&mut e, &mut q, 0);
    // Twice the rate from the next packet on: the wire's packet keeps its end.
    e.reconfigure(cfg(16_000_000, u64::MAX));
    assert_eq!(e.wire_end(), Some(Time(1_000_000)));
    assert_eq!(e.on_tx_done(), Some(Time(1_500_000)));
    // Unpaced: what the device held has left at once, and is counted as sent.
    e.reconfigure(cfg(0, u64::MAX));
    assert_eq!(e.in_device(), 0);
    let st = e.stats();
    assert_eq!((st.pulled_packets, st.sent_packets), (3, 3));
    assert_eq!(st.pulled_bytes, st.sent_bytes);
}

#[test]
fn held_packets_come_back_in_order_when_the_wire_finishes_them() {
    // 8 Mbit/s, room for two 1000-byte packets behind the wire: the device holds the packets
    // themselves and gives each back, in order, at its end of transmission.
    let mut e: Egress<P> = Egress::new(EgressConfig {
        full_packet: 1000,
        ..cfg(8_000_000, 2000)
    });
    let mut q = Script::new(&[1000, 1000, 1000, 1000], None);
    let mut ends = Vec::new();
    let stop = e.pull_with(Time(0), &mut |t| q.dequeue(t), &mut |p: P, end| {
        ends.push((p.id, end));
        p
    });
    assert_eq!(
        stop,
        Stop::DeviceFull {
            until: Time(1_000_000)
        }
    );
    assert_eq!(ends, vec![(0, Some(Time(1_000_000))), (1, None), (2, None)]);
    assert_eq!((e.in_device(), e.waiting_bytes()), (3, 2000));
    let mut back = Vec::new();
    while let Some((p, next)) = e.finish_tx() {
        back.push((p.id, next));
    }
    assert_eq!(
        back,
        vec![
            (0, Some(Time(2_000_000))),
            (1, Some(Time(3_000_000))),
            (2, None)
        ]
    );
    assert_eq!(e.in_device(), 0);
    assert_eq!(e.stats().sent_packets, 3);
    // The scheduler still holds the fourth.
    assert_eq!(q.q.len(), 1);
}

#[test]
fn an_unpaced_device_holds_nothing() {
    let mut e: Egress<P> = Egress::new(cfg(0, 0));
    let mut q = Script::new(&[1000, 1000], None);
    let mut n = 0;
    let stop = e.pull_with(Time(5), &mut |t| q.dequeue(t), &mut |p: P, end| {
        assert_eq!(end, Some(Time(5)));
        n += 1;
        p
    });
    assert_eq!((stop, n), (Stop::Empty, 2));
    assert_eq!(e.in_device(), 0);
    assert!(e.finish_tx().is_none());
    assert_eq!(e.stats().sent_packets, 2);
}

/// The tail's end read right after each pull is the end the drain gives that packet later,
/// to the nanosecond, whatever the rate (3 bit/ns does not divide a byte) and across a rate
/// change with packets waiting.
#[test]
fn the_tail_end_at_a_pull_is_that_packets_end_of_transmission() {
    let mut e: Egress = Egress::new(cfg(3_000_000_000, 4500));
    assert_eq!(e.tail_end(), None, "an empty device");
    let mut q = Script::new(&[64, 1500, 40, 1400, 60, 1500, 1500, 999], None);
    let mut promised = Vec::new();
    let mut now = Time(11);
    let mut ends = Vec::new();
    loop {
        while let Pulled::Packet { packet, wire_end } = e.pull_one_with(now, &mut |t| q.dequeue(t))
        {
            let tail = e.tail_end();
            if let Some(w) = wire_end {
                assert_eq!(tail, Some(w), "onto the idle wire: its own end");
            }
            promised.push((packet.id, tail));
        }
        if promised.len() == 4 && ends.is_empty() {
            // Half the rate from the next packet to start: the promises made after this hold.
            e.reconfigure(cfg(1_500_000_000, 4500));
            for p in &mut promised[1..] {
                p.1 = None;
            }
        }
        match e.wire_end() {
            Some(end) => {
                ends.push(end);
                now = end;
                let _ = e.on_tx_done();
            }
            None => break,
        }
    }
    assert_eq!(promised.len(), 8);
    for (k, (id, tail)) in promised.iter().enumerate() {
        assert_eq!(*id as usize, k);
        if let Some(t) = tail {
            assert_eq!(*t, ends[k], "packet {k}");
        }
    }
    assert!(promised.iter().filter(|p| p.1.is_some()).count() >= 5);
    assert_eq!(e.tail_end(), None);
}
