//! HTB hot path: one enqueue + one dequeue of a 64-byte packet, against the number of leaf
//! classes (1 … 100k), flat and three levels deep, with the leaf chosen at random per packet and
//! round robin. Also measures the memory of a 100k-class tree with a counting allocator.
//!
//! The tree shares a 10 Gbit/s root: every leaf has rate root/n and ceil = root, so leaves are
//! over their rate and borrow most of the time — the path with wait-queue updates, not the
//! trivial one. The fake clock advances by the 64-byte transmission time at the root rate for
//! every packet dequeued, and jumps to `NotBefore` instants.
//!
//! Run: `cargo bench -p linkshare-core --bench htb`.

use std::alloc::{GlobalAlloc, Layout, System};
use std::hint::black_box;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration as StdDuration;

use criterion::{criterion_group, BenchmarkId, Criterion, Throughput};
use linkshare_core::classify::Classifier;
use linkshare_core::htb::{Htb, HtbClassSpec, HtbParams};
use linkshare_core::{Dequeued, PacketMeta, Qdisc, Rate, Time};
use rand::{Rng, SeedableRng};

struct Counting;
static ALLOCATED: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        let p = System.alloc(l);
        if !p.is_null() {
            let now = ALLOCATED.fetch_add(l.size(), Ordering::Relaxed) + l.size();
            PEAK.fetch_max(now, Ordering::Relaxed);
        }
        p
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        System.dealloc(p, l);
        ALLOCATED.fetch_sub(l.size(), Ordering::Relaxed);
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

const ROOT: u64 = 10_000_000_000;

#[derive(Copy, Clone)]
enum Shape {
    Flat,
    Deep3,
}

/// Build a tree with `n` leaves; returns the HTB and the leaf class ids.
fn build(n: usize, shape: Shape) -> (Htb<PacketMeta>, Vec<u32>) {
    let params = HtbParams::default();
    let mut specs = vec![HtbClassSpec::new(
        "root",
        None,
        Rate(ROOT),
        Rate(ROOT),
        &params,
    )];
    let leaf_rate = Rate((ROOT / n as u64).max(1000));
    let mut leaves = Vec::with_capacity(n);
    match shape {
        Shape::Flat => {
            for i in 0..n {
                specs.push(HtbClassSpec::new(
                    &format!("l{i}"),
                    Some(0),
                    leaf_rate,
                    Rate(ROOT),
                    &params,
                ));
                leaves.push(specs.len() as u32 - 1);
            }
        }
        Shape::Deep3 => {
            // root -> b groups -> b subgroups each -> leaves: three levels below the root.
            let b = (n as f64).cbrt().ceil().max(1.0) as usize;
            let mut made = 0;
            'outer: for g in 0..b {
                let gid = specs.len() as u32;
                specs.push(HtbClassSpec::new(
                    &format!("g{g}"),
                    Some(0),
                    Rate(ROOT / b as u64),
                    Rate(ROOT),
                    &params,
                ));
                for s in 0..b {
                    if made >= n {
                        break 'outer;
                    }
                    let sid = specs.len() as u32;
                    specs.push(HtbClassSpec::new(
                        &format!("g{g}s{s}"),
                        Some(gid),
                        Rate(ROOT / (b * b) as u64),
                        Rate(ROOT),
                        &params,
                    ));
                    for _ in 0..b {
                        if made >= n {
                            break;
                        }
                        specs.push(HtbClassSpec::new(
                            &format!("l{made}"),
                            Some(sid),
                            leaf_rate,
                            Rate(ROOT),
                            &params,
                        ));
                        leaves.push(specs.len() as u32 - 1);
                        made += 1;
                    }
                }
            }
            // A group or subgroup created without children would be a leaf: harmless here.
        }
    }
    let default = *leaves.last().unwrap_or(&0);
    let htb = match Htb::new(params, specs, Classifier::new(vec![], default)) {
        Ok(h) => h,
        Err(e) => panic!("bench tree: {e}"),
    };
    (htb, leaves)
}

struct Driver {
    htb: Htb<PacketMeta>,
    now: u64,
    tx: u64,
}

impl Driver {
    fn new(n: usize, shape: Shape) -> (Self, Vec<u32>) {
        let (mut htb, leaves) = build(n, shape);
        // one packet in every leaf
        for &l in &leaves {
            let _ = htb.enqueue_to(
                l,
                PacketMeta {
                    len: 64,
                    ..Default::default()
                },
                Time(0),
            );
        }
        let tx = Rate(ROOT).tx_time(64).map(|d| d.0).unwrap_or(1);
        (Driver { htb, now: 0, tx }, leaves)
    }

    #[inline]
    fn step(&mut self, leaf: u32) {
        let _ = self.htb.enqueue_to(
            leaf,
            PacketMeta {
                len: 64,
                ..Default::default()
            },
            Time(self.now),
        );
        loop {
            match self.htb.dequeue(Time(self.now)) {
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

fn bench_htb(c: &mut Criterion) {
    let sizes = [1usize, 10, 100, 1_000, 10_000, 100_000];
    for (shape, sname) in [(Shape::Flat, "flat"), (Shape::Deep3, "deep3")] {
        for (random, pick) in [(true, "random"), (false, "round_robin")] {
            let mut group = c.benchmark_group(format!("htb_enq_deq_64B/{sname}/{pick}"));
            group
                .sample_size(20)
                .measurement_time(StdDuration::from_secs(2))
                .warm_up_time(StdDuration::from_millis(500));
            group.throughput(Throughput::Elements(1));
            for &n in &sizes {
                let (mut d, leaves) = Driver::new(n, shape);
                let mut rng = rand_pcg::Pcg64::seed_from_u64(7);
                let seq: Vec<u32> = (0..65_536)
                    .map(|_| leaves[rng.gen_range(0..leaves.len())])
                    .collect();
                let mut i = 0usize;
                group.bench_with_input(BenchmarkId::from_parameter(n), &n, |b, _| {
                    b.iter(|| {
                        let leaf = if random {
                            seq[i & 65_535]
                        } else {
                            leaves[i % leaves.len()]
                        };
                        i = i.wrapping_add(1);
                        d.step(leaf);
                    })
                });
            }
            group.finish();
        }
    }
}

/// Memory of an idle tree and of one with a packet queued in every leaf, per class.
fn memory() {
    for (shape, name) in [(Shape::Flat, "flat"), (Shape::Deep3, "deep3")] {
        let n = 100_000;
        let base = ALLOCATED.load(Ordering::Relaxed);
        let (htb, leaves) = build(n, shape);
        let classes = htb.len();
        let idle = ALLOCATED.load(Ordering::Relaxed) - base;
        drop(htb);
        let base = ALLOCATED.load(Ordering::Relaxed);
        let (d, _) = Driver::new(n, shape);
        let loaded = ALLOCATED.load(Ordering::Relaxed) - base;
        println!(
            "memory/{name}: {} leaves, {classes} classes: idle {:.2} MB ({:.0} B/class); one 64-byte packet queued per leaf: {:.2} MB ({:.0} B/class)",
            leaves.len(),
            idle as f64 / 1e6,
            idle as f64 / classes as f64,
            loaded as f64 / 1e6,
            loaded as f64 / classes as f64,
        );
        drop(d);
    }
}

criterion_group!(benches, bench_htb);

fn main() {
    memory();
    benches();
    Criterion::default().configure_from_args().final_summary();
}
