use linkshare_core::packet::PacketMeta;
use linkshare_core::qdisc::codel::{Codel, CodelParams};
use linkshare_core::qdisc::{Dequeued, DropReason, Qdisc};
use linkshare_core::units::{Duration, Time};

fn pkt(len: u32, ecn: u8) -> PacketMeta {
    PacketMeta {
        len,
        tos: ecn,
        ..Default::default()
    }
}

/// Standing queue: 1 packet in per 1 ms, 1 out per 1 ms, with a 20-packet (20 ms) standing queue.
fn standing(ecn: bool, tos: u8, backlog: usize, ms: u64) -> (Codel<PacketMeta>, Vec<u64>) {
    let mut c = Codel::new(CodelParams {
        ecn,
        ..Default::default()
    })
    .unwrap();
    for _ in 0..backlog {
        c.enqueue(pkt(1500, tos), Time(0)).unwrap();
    }
    let mut drop_times = Vec::new();
    for i in 1..=ms {
        let now = Time(i * 1_000_000);
        c.enqueue(pkt(1500, tos), now).unwrap();
        let before = c.stats().marked;
        let _ = c.dequeue(now);
        while let Some(d) = c.take_dropped() {
            assert_eq!(d.reason, DropReason::Aqm);
            drop_times.push(i);
        }
        if c.stats().marked > before {
            drop_times.push(i);
        }
        c.stats().check_conservation().unwrap();
    }
    (c, drop_times)
}

#[test]
fn standing_queue_drops_at_control_law_spacing() {
    let (_, t) = standing(false, 0, 20, 1500);
    assert!(!t.is_empty());
    // Packets queued at 0 leave at i ms with sojourn i ms: sojourn first reaches the 5 ms target
    // at 5 ms, so the first drop comes one interval later, at 105 ms.
    assert_eq!(t[0], 105, "first drop at {} ms", t[0]);
    // Then drops at interval/sqrt(count): count 1 -> 100 ms. 1/sqrt(count) is refined by one
    // Newton step per drop as in Linux, giving 0.5 for count 2 and 0.5625 for count 3.
    assert_eq!(t[1] - t[0], 100);
    assert_eq!(t[2] - t[1], 50);
    assert!((56..=57).contains(&(t[3] - t[2])), "gap {}", t[3] - t[2]);
}

#[test]
fn below_target_never_drops() {
    // Backlog 3 packets of 1500 at 1 ms each: sojourn 3 ms < 5 ms.
    let (c, t) = standing(false, 0, 3, 2000);
    assert!(t.is_empty());
    assert_eq!(c.stats().dropped.total().packets, 0);
}

#[test]
fn ecn_marks_instead_of_drops() {
    let (c, t) = standing(true, 0b10, 20, 1000);
    assert!(!t.is_empty());
    assert_eq!(c.stats().dropped.total().packets, 0);
    assert!(c.stats().marked > 0);
}

#[test]
fn queue_limit_refuses() {
    let mut c = Codel::new(CodelParams {
        limit: 2,
        ..Default::default()
    })
    .unwrap();
    c.enqueue(pkt(100, 0), Time(0)).unwrap();
    c.enqueue(pkt(100, 0), Time(0)).unwrap();
    assert_eq!(
        c.enqueue(pkt(100, 0), Time(0)).unwrap_err().reason,
        DropReason::QueueLimit
    );
    assert!(matches!(
        c.dequeue(Time(Duration::from_millis(1).0)),
        Dequeued::Packet(_)
    ));
}
