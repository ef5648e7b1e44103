//! CBQ hot path: one enqueue + one dequeue of a 64-byte packet, against the number of leaf
//! classes (1 … 10k), flat and three levels deep, with the leaf chosen at random per packet.
//!
//! Every leaf has an allocation of root/n and may borrow, so leaves go over their allocation,
//! borrow, and get suspended: the path with estimator updates on the whole ancestor chain,
//! unsatisfied-set updates and suspensions, not the trivial one. The fake clock advances by the
//! 64-byte transmission time at the link rate for every packet dequeued, and jumps to
//! `NotBefore` instants. Per-packet cost must stay flat in `n` (it grows with the depth `d`).
//!
//! Run: `cargo bench -p linkshare-core --bench cbq`.

use std::hint::black_box;
use std::time::Duration as StdDuration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use linkshare_core::cbq::{Cbq, CbqClassSpec, CbqParams, Guideline, Scheduler};
use linkshare_core::classify::{Classifier, FilterSpec};
use linkshare_core::{Dequeued, PacketMeta, Qdisc, Rate, Time};
use rand::{Rng, SeedableRng};

const LINK: u64 = 10_000_000_000;

#[derive(Copy, Clone)]
enum Shape {
    Flat,
    Deep3,
}

fn build(n: usize, shape: Shape, params: CbqParams) -> (Cbq<PacketMeta>, Vec<u32>) {
    build_with(n, shape, params, false)
}

/// The tree of [`build`]; with `port_filters`, leaf `i` also gets a filter `udp dport 10000+i`
/// (one filter per class, in class order, as seed 001's per-flow classes).
fn build_with(
    n: usize,
    shape: Shape,
    params: CbqParams,
    port_filters: bool,
) -> (Cbq<PacketMeta>, Vec<u32>) {
    let mut specs = vec![CbqClassSpec::new("root", None, Rate(LINK), &params)];
    let mut leaves = Vec::with_capacity(n);
    let leaf = |specs: &mut Vec<CbqClassSpec<PacketMeta>>, parent: u32, rate: u64, name: String| {
        let mut s = CbqClassSpec::new(&name, Some(parent), Rate(rate.max(8_000)), &params);
        s.options.borrow = true;
        specs.push(s);
        specs.len() as u32 - 1
    };
    match shape {
        Shape::Flat => {
            for i in 0..n {
                let id = leaf(&mut specs, 0, LINK / n as u64, format!("l{i}"));
                leaves.push(id);
            }
        }
        Shape::Deep3 => {
            let b = (n as f64).cbrt().ceil().max(1.0) as usize;
            let mut made = 0;
            'outer: for g in 0..b {
                let gid = leaf(&mut specs, 0, LINK / b as u64, format!("g{g}"));
                for s in 0..b {
                    if made >= n {
                        break 'outer;
                    }
                    let sid = leaf(&mut specs, gid, LINK / (b * b) as u64, format!("g{g}s{s}"));
                    for _ in 0..b {
                        if made >= n {
                            break;
                        }
                        let id = leaf(
                            &mut specs,
                            sid,
                            LINK / (b * b * b) as u64,
                            format!("l{made}"),
                        );
                        leaves.push(id);
                        made += 1;
                    }
                }
            }
        }
    }
    let default = *leaves.last().unwrap_or(&0);
    let filters = if port_filters {
        leaves
            .iter()
            .enumerate()
            .map(|(i, &class)| FilterSpec {
                class,
                protocol: Some(17),
                dst_port: Some((10_000 + i as u16, 10_000 + i as u16)),
                ..Default::default()
            })
            .collect()
    } else {
        vec![]
    };
    match Cbq::new(params, specs, Classifier::new(filters, default)) {
        Ok(q) => (q, leaves),
        Err(e) => panic!("bench tree: {e}"),
    }
}

struct Driver {
    q: Cbq<PacketMeta>,
    now: u64,
    tx: u64,
}

impl Driver {
    fn new(n: usize, shape: Shape, params: CbqParams) -> (Self, Vec<u32>) {
        let (mut q, leaves) = build(n, shape, params);
        for &l in &leaves {
            let _ = q.enqueue_to(
                l,
                PacketMeta {
                    len: 64,
                    ..Default::default()
                },
                Time(0),
            );
        }
        let tx = Rate(LINK).tx_time(64).map(|d| d.0).unwrap_or(1);
        (Driver { q, now: 0, tx }, leaves)
    }

    #[inline]
    fn step(&mut self, leaf: u32) {
        let _ = self.q.enqueue_to(
            leaf,
            PacketMeta {
                len: 64,
                ..Default::default()
            },
            Time(self.now),
        );
        loop {
            match self.q.dequeue(Time(self.now)) {
                Dequeued::Packet(p) => {
                    black_box(p);
                    self.now += self.tx;
                    return;
                }
                Dequeued::NotBefore(t) => self.now = t.0.max(self.now + 1),
                Dequeued::Empty => return,
            }
        }
    }
}

fn bench_cbq(c: &mut Criterion) {
    let sizes = [1usize, 10, 100, 1_000, 10_000];
    let mut fixed = CbqParams::new(Rate(LINK));
    fixed.guideline = Guideline::Formal;
    let mut wrr = CbqParams::altq_compat(Rate(LINK), 0);
    wrr.scheduler = Scheduler::Wrr;
    for (shape, sname) in [(Shape::Flat, "flat"), (Shape::Deep3, "deep3")] {
        for (params, pname) in [(fixed, "default"), (wrr, "altq_compat")] {
            let mut group = c.benchmark_group(format!("cbq_enq_deq_64B/{sname}/{pname}"));
            group
                .sample_size(10)
                .measurement_time(StdDuration::from_secs(1))
                .warm_up_time(StdDuration::from_millis(300));
            group.throughput(Throughput::Elements(1));
            for &n in &sizes {
                let (mut d, leaves) = Driver::new(n, shape, params);
                let mut rng = rand_pcg::Pcg64::seed_from_u64(7);
                let seq: Vec<u32> = (0..65_536)
                    .map(|_| leaves[rng.gen_range(0..leaves.len())])
                    .collect();
                let mut i = 0usize;
                group.bench_with_input(BenchmarkId::from_parameter(n), &n, |b, _| {
                    b.iter(|| {
                        d.step(seq[i & 65_535]);
                        i = i.wrapping_add(1);
                    })
                });
                if let Err(e) = d.q.check_invariants() {
                    panic!("after bench n={n}: {e}");
                }
            }
            group.finish();
        }
    }
}

/// Forwarding through CBQ as the real shaper does it: classify a parsed packet (one port filter
/// per class, the packet's class chosen at random), enqueue, dequeue — against the number of
/// classes, 1 … 10 000 (seed 001 Table 5 lost 22 % from 1 to 100 classes with ALTQ's linear
/// classifier). Flat in `n` means the classifier and the scheduler are both independent of it.
fn bench_cbq_forward(c: &mut Criterion) {
    let sizes = [1usize, 5, 10, 20, 50, 100, 1_000, 10_000];
    let mut params = CbqParams::new(Rate(LINK));
    params.guideline = Guideline::Formal;
    let mut group = c.benchmark_group("cbq_forward_64B/port_filters");
    group
        .sample_size(10)
        .measurement_time(StdDuration::from_secs(1))
        .warm_up_time(StdDuration::from_millis(300));
    group.throughput(Throughput::Elements(1));
    for &n in &sizes {
        let (mut q, leaves) = build_with(n, Shape::Flat, params, true);
        let tx = Rate(LINK).tx_time(64).map(|d| d.0).unwrap_or(1);
        let mut rng = rand_pcg::Pcg64::seed_from_u64(11);
        let ring: Vec<PacketMeta> = (0..4096)
            .map(|_| PacketMeta {
                len: 64,
                proto: 17,
                src_port: 4000,
                dst_port: 10_000 + rng.gen_range(0..leaves.len()) as u16,
                ..Default::default()
            })
            .collect();
        // The filters must really be doing the work: each packet lands in its port's class.
        for p in &ring[..64] {
            let want = leaves[(p.dst_port - 10_000) as usize];
            assert_eq!(
                q.classifier().classify(p),
                want,
                "bench packet misclassified"
            );
        }
        let mut now = 0u64;
        let mut i = 0usize;
        group.bench_with_input(BenchmarkId::from_parameter(n), &n, |b, _| {
            b.iter(|| {
                let _ = q.enqueue(ring[i & 4095], Time(now));
                i = i.wrapping_add(1);
                loop {
                    match q.dequeue(Time(now)) {
                        Dequeued::Packet(p) => {
                            black_box(p);
                            now += tx;
                            break;
                        }
                        Dequeued::NotBefore(t) => now = t.0.max(now + 1),
                        Dequeued::Empty => break,
                    }
                }
            })
        });
        if let Err(e) = q.check_invariants() {
            panic!("after forward bench n={n}: {e}");
        }
    }
    group.finish();
}

criterion_group!(benches, bench_cbq, bench_cbq_forward);
criterion_main!(benches);
