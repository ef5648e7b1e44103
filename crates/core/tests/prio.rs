//! PRIO properties: conservation after every call, strict priority (band k is never served while
//! a lower-numbered band holds packets), the priomap against Linux's TOS table, a throttled band is
//! skipped.

use linkshare_core::classify::{Classifier, FilterSpec};
use linkshare_core::leaf::LeafSpec;
use linkshare_core::qdisc::fifo::{FifoLimit, FifoQueue};
use linkshare_core::qdisc::prio::{tos_to_priority, Prio, PrioParams};
use linkshare_core::qdisc::{Books, Discipline};
use linkshare_core::{Dequeued, Dropped, PacketMeta, Qdisc, Time};
use proptest::prelude::*;

struct Gate {
    inner: FifoQueue<PacketMeta>,
    open: u64,
    books: Books<PacketMeta>,
}

/// Only the hooks: the counters and victims come from the provided `Qdisc` methods.
impl Discipline<PacketMeta> for Gate {
    fn books(&self) -> &Books<PacketMeta> {
        &self.books
    }
    fn books_mut(&mut self) -> &mut Books<PacketMeta> {
        &mut self.books
    }
    fn enqueue_inner(&mut self, pkt: PacketMeta, _now: Time) -> Result<(), Dropped<PacketMeta>> {
        self.inner.push(pkt)
    }
    fn dequeue_inner(&mut self, now: Time) -> Dequeued<PacketMeta> {
        if !self.inner.is_empty() && now.0 < self.open {
            return Dequeued::NotBefore(Time(self.open));
        }
        self.inner.pop().map_or(Dequeued::Empty, Dequeued::Packet)
    }
    fn kind_inner(&self) -> &'static str {
        "gate"
    }
}

fn pkt(tos: u8, len: u32) -> PacketMeta {
    PacketMeta {
        len,
        tos,
        ..Default::default()
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    /// With the default priomap and random TOS bytes: conservation after every call, and a
    /// dequeued packet's band is the lowest-numbered band that held packets.
    #[test]
    fn strict_priority_by_tos(
        ops in proptest::collection::vec((any::<u8>(), 40u32..1600, 0u8..5), 1..500),
        limit in 1u32..20,
    ) {
        let mut q: Prio<PacketMeta> = Prio::new(PrioParams { limit, ..Default::default() }).unwrap();
        let mut backlog = [0u64; 3];
        for (tos, len, op) in ops {
            if op < 3 {
                let b = q.band_of(&pkt(tos, len));
                prop_assert_eq!(b, usize::from(PrioParams::default().priomap[usize::from(tos_to_priority(tos))]));
                match q.enqueue(pkt(tos, len), Time(0)) {
                    Ok(()) => backlog[b] += 1,
                    Err(d) => prop_assert_eq!(backlog[b], limit as u64, "refused {:?}", d.reason),
                }
            } else {
                match q.dequeue(Time(0)) {
                    Dequeued::Packet(p) => {
                        let b = q.band_of(&p);
                        prop_assert!(backlog[..b].iter().all(|&x| x == 0),
                            "served band {} with backlog {:?}", b, backlog);
                        backlog[b] -= 1;
                    }
                    Dequeued::Empty => prop_assert_eq!(backlog, [0, 0, 0]),
                    Dequeued::NotBefore(_) => prop_assert!(false, "pfifo bands never throttle"),
                }
            }
            q.stats().check_conservation().map_err(TestCaseError::fail)?;
            prop_assert_eq!(q.backlog().packets, backlog.iter().sum::<u64>());
            for (b, &n) in backlog.iter().enumerate() {
                prop_assert_eq!(q.band_backlog(b).packets, n);
            }
        }
    }

    /// Up to 16 bands chosen by a classifier on DSCP (DSCP d → band d % bands): strict priority.
    #[test]
    fn strict_priority_by_classifier(
        bands in 2u8..17,
        ops in proptest::collection::vec((0u8..64, any::<bool>()), 1..500),
    ) {
        let filters = (0..64u8)
            .map(|d| FilterSpec { dscp: Some(vec![d]), ..FilterSpec::any(u32::from(d % bands)) })
            .collect();
        let specs = (0..bands).map(|_| LeafSpec::Fifo(FifoLimit::Packets(1000))).collect();
        let params = PrioParams { bands, priomap: [0; 16], ..Default::default() };
        let mut q: Prio<PacketMeta> =
            Prio::with_bands(params, specs, Some(Classifier::new(filters, 0))).unwrap();
        let mut backlog = vec![0u64; bands as usize];
        for (dscp, enq) in ops {
            if enq {
                q.enqueue(pkt(dscp << 2, 100), Time(0)).unwrap();
                backlog[usize::from(dscp % bands)] += 1;
            } else if let Some(p) = q.dequeue(Time(0)).packet() {
                let b = usize::from(p.dscp() % bands);
                prop_assert!(backlog[..b].iter().all(|&x| x == 0));
                backlog[b] -= 1;
            }
            q.stats().check_conservation().map_err(TestCaseError::fail)?;
        }
    }
}

#[test]
fn throttled_band_is_skipped() {
    let bands = vec![
        LeafSpec::Qdisc(Box::new(Gate {
            inner: FifoQueue::new(FifoLimit::Packets(10)),
            open: 7_000,
            books: Books::new(),
        }) as Box<dyn Qdisc<PacketMeta>>),
        LeafSpec::Fifo(FifoLimit::Packets(10)),
        LeafSpec::Fifo(FifoLimit::Packets(10)),
    ];
    let mut q = Prio::with_bands(PrioParams::default(), bands, None).unwrap();
    q.enqueue(pkt(0x10, 100), Time(0)).unwrap(); // band 0 (throttled)
    q.enqueue(pkt(0x00, 200), Time(0)).unwrap(); // band 1
    assert_eq!(q.dequeue(Time(0)).packet().unwrap().len, 200);
    assert_eq!(q.dequeue(Time(0)), Dequeued::NotBefore(Time(7_000)));
    assert_eq!(q.stats().overlimits, 1);
    q.enqueue(pkt(0x08, 300), Time(100)).unwrap(); // band 2
    assert_eq!(q.dequeue(Time(100)).packet().unwrap().len, 300);
    assert_eq!(q.dequeue(Time(7_000)).packet().unwrap().len, 100);
    assert_eq!(q.dequeue(Time(7_000)), Dequeued::Empty);
    q.stats().check_conservation().unwrap();
    let mut views = Vec::new();
    q.visit_classes(&mut |v| views.push((v.name.to_string(), v.stats.sent.bytes)));
    assert_eq!(
        views,
        vec![
            ("band0".to_string(), 100),
            ("band1".to_string(), 200),
            ("band2".to_string(), 300)
        ]
    );
}

/// Drain hands out band 0 first, and counts everything as dequeued.
#[test]
fn drain_in_priority_order() {
    let mut q: Prio<PacketMeta> = Prio::new(PrioParams::default()).unwrap();
    for (tos, len) in [(0x08, 3), (0x00, 2), (0x10, 1), (0x08, 4)] {
        q.enqueue(pkt(tos, len), Time(0)).unwrap();
    }
    let lens: Vec<u32> = q.drain(Time(0)).into_iter().map(|p| p.len).collect();
    assert_eq!(lens, vec![1, 2, 3, 4]);
    assert_eq!(q.backlog().packets, 0);
    q.stats().check_conservation().unwrap();
    assert_eq!(q.dequeue(Time(0)), Dequeued::Empty);
}
