//! The scheduler core on trees shaped like DPDK's `librte_sched` (see `linkshare_core::benchkit`):
//! bursts of 32 64-byte packets into random leaves, HTB and CBQ, 1,024 and 65,536 leaves, without
//! and with a standing backlog. `linkshare bench sched` runs the same loop at any size with DPDK's
//! bench beside it (`scripts/bench-sched`).
//!
//! Run: `cargo bench -p linkshare-core --bench sched`.

use std::time::Duration as StdDuration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use linkshare_core::benchkit::{build_cbq, build_htb, Pattern, SchedBench, Shape};

const BURST: u32 = 32;

fn bench_sched(c: &mut Criterion) {
    let mut group = c.benchmark_group("sched_burst32_random");
    group
        .sample_size(10)
        .measurement_time(StdDuration::from_secs(2))
        .warm_up_time(StdDuration::from_millis(500));
    group.throughput(Throughput::Elements(BURST as u64));
    for leaves in [1_024u32, 65_536] {
        let shape = Shape {
            levels: 3,
            leaves,
            subports: 1,
        };
        for backlog in [0u32, 1] {
            let id = format!("{leaves}_leaves/backlog{backlog}");
            match build_htb(&shape)
                .and_then(|(q, l)| SchedBench::new(q, l, Pattern::Random, backlog, BURST))
            {
                Ok(mut b) => {
                    group.bench_with_input(BenchmarkId::new("htb", &id), &id, |bn, _| {
                        bn.iter(|| b.run(BURST as u64))
                    });
                }
                Err(e) => panic!("htb tree: {e}"),
            }
            match build_cbq(&shape)
                .and_then(|(q, l)| SchedBench::new(q, l, Pattern::Random, backlog, BURST))
            {
                Ok(mut b) => {
                    group.bench_with_input(BenchmarkId::new("cbq", &id), &id, |bn, _| {
                        bn.iter(|| b.run(BURST as u64))
                    });
                }
                Err(e) => panic!("cbq tree: {e}"),
            }
        }
    }
    group.finish();
}

criterion_group!(benches, bench_sched);
criterion_main!(benches);
