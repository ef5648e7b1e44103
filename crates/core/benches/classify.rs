//! Classification cost against the number of filters (1 … 100k), compiled vs a linear scan.
//!
//! Three policies:
//!
//! * `dscp`: filter `i` matches DSCP `1 + i % 63`. Half the packets are best effort (DSCP 0, no
//!   filter matches, so a linear scan reads every filter — ALTQ's case), half carry a random DSCP.
//! * `subscriber`: filter `i` matches destination `100.64.0.0 + i` as a `/32` (LibreQoS-like,
//!   one class per subscriber); packets go to random subscribers, 5 % to unknown addresses.
//! * `mixed`: two DSCP filters first, then per subscriber in turn: `dst /32 + udp + dport
//!   5060-5061`, `dst /32`, `src IPv6 /64 + dport 443`, `dst /24 + sport 1024-65535 + dscp ef`.
//!   Packets mix IPv4 and IPv6, TCP and UDP, random subscribers and ports.
//!
//! `compiled` is [`Classifier::classify`]; `linear` is a first-match scan with
//! [`FilterSpec::matches`], the structure the seed's ALTQ classifier used.
//! Each iteration classifies one packet from a ring of 1024 pre-built packets.
//!
//! Run: `cargo bench -p linkshare-core --bench classify`. Estimates land in
//! `target/criterion/classify_<policy>/<impl>/<n>/new/estimates.json`.

use std::hint::black_box;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use linkshare_core::classify::{ClassId, Classifier, FilterSpec, IpPrefix};
use linkshare_core::packet::{PacketMeta, L3};
use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64;

const SIZES: [usize; 6] = [1, 10, 100, 1_000, 10_000, 100_000];
const RING: usize = 1024;
const DEFAULT: ClassId = 1_000_000;

fn sub_v4(i: usize) -> IpAddr {
    IpAddr::V4(Ipv4Addr::from(0x6440_0000u32 + i as u32))
}
fn sub_v6(i: usize) -> IpAddr {
    IpAddr::V6(Ipv6Addr::from(
        0x2001_0db8_0000_0000_0000_0000_0000_0000u128 | ((i as u128) << 64),
    ))
}

fn dscp_policy(n: usize) -> Vec<FilterSpec> {
    (0..n)
        .map(|i| FilterSpec {
            class: i as u32,
            dscp: Some(vec![1 + (i % 63) as u8]),
            ..Default::default()
        })
        .collect()
}

fn dscp_packets(rng: &mut Pcg64, _n: usize) -> Vec<PacketMeta> {
    (0..RING)
        .map(|_| {
            let dscp = if rng.gen_bool(0.5) {
                0
            } else {
                rng.gen_range(0..64u8)
            };
            PacketMeta {
                tos: dscp << 2,
                proto: 6,
                ..Default::default()
            }
        })
        .collect()
}

fn subscriber_policy(n: usize) -> Vec<FilterSpec> {
    (0..n)
        .map(|i| FilterSpec {
            class: i as u32,
            dst: Some(IpPrefix::host(sub_v4(i))),
            ..Default::default()
        })
        .collect()
}

fn subscriber_packets(rng: &mut Pcg64, n: usize) -> Vec<PacketMeta> {
    (0..RING)
        .map(|_| {
            let who = if rng.gen_bool(0.05) {
                n + rng.gen_range(0..1000)
            } else {
                rng.gen_range(0..n)
            };
            PacketMeta {
                proto: 6,
                src: IpAddr::V4(Ipv4Addr::new(203, 0, 113, 7)),
                dst: sub_v4(who),
                src_port: 443,
                dst_port: rng.gen(),
                ..Default::default()
            }
        })
        .collect()
}

fn mixed_policy(n: usize) -> Vec<FilterSpec> {
    let mut v = Vec::with_capacity(n);
    v.push(FilterSpec {
        class: 0,
        dscp: Some(vec![8, 1]),
        ..Default::default()
    });
    v.push(FilterSpec {
        class: 1,
        dscp: Some(vec![48, 56]),
        protocol: Some(17),
        ..Default::default()
    });
    let mut i = 0;
    while v.len() < n {
        let class = v.len() as u32;
        let sub = i / 4;
        let f = match i % 4 {
            0 => FilterSpec {
                class,
                dst: Some(IpPrefix::host(sub_v4(sub))),
                protocol: Some(17),
                dst_port: Some((5060, 5061)),
                ..Default::default()
            },
            1 => FilterSpec {
                class,
                dst: Some(IpPrefix::host(sub_v4(sub))),
                ..Default::default()
            },
            2 => FilterSpec {
                class,
                src: Some(IpPrefix {
                    addr: sub_v6(sub),
                    len: 64,
                }),
                dst_port: Some((443, 443)),
                ..Default::default()
            },
            _ => FilterSpec {
                class,
                dst: Some(IpPrefix {
                    addr: sub_v4(sub * 256),
                    len: 24,
                }),
                src_port: Some((1024, 65535)),
                dscp: Some(vec![46]),
                ..Default::default()
            },
        };
        v.push(f);
        i += 1;
    }
    v.truncate(n);
    v
}

fn mixed_packets(rng: &mut Pcg64, n: usize) -> Vec<PacketMeta> {
    let subs = n.div_ceil(4).max(1);
    (0..RING)
        .map(|_| {
            let sub = rng.gen_range(0..subs + subs / 20 + 1);
            let v6 = rng.gen_bool(0.3);
            let (l3, src, dst) = if v6 {
                (
                    L3::Ipv6,
                    sub_v6(sub),
                    IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0xffff, 0, 0, 0, 0, 1)),
                )
            } else {
                (
                    L3::Ipv4,
                    IpAddr::V4(Ipv4Addr::new(203, 0, 113, 7)),
                    sub_v4(sub * if rng.gen() { 1 } else { 256 }),
                )
            };
            let tos = [0u8, 0, 0, 46, 10, 8][rng.gen_range(0..6)] << 2;
            PacketMeta {
                l3,
                tos,
                proto: if rng.gen_bool(0.4) { 17 } else { 6 },
                src,
                dst,
                src_port: rng.gen_range(1000..3000),
                dst_port: [443u16, 5060, 5061, 80, 53][rng.gen_range(0..5)],
                ..Default::default()
            }
        })
        .collect()
}

fn linear(filters: &[FilterSpec], m: &PacketMeta) -> ClassId {
    filters
        .iter()
        .find(|f| f.matches(m))
        .map_or(DEFAULT, |f| f.class)
}

type Policy = fn(usize) -> Vec<FilterSpec>;
type Packets = fn(&mut Pcg64, usize) -> Vec<PacketMeta>;

fn run(c: &mut Criterion, name: &str, policy: Policy, packets: Packets) {
    let mut group = c.benchmark_group(format!("classify_{name}"));
    group
        .sample_size(20)
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_millis(1500));
    group.throughput(Throughput::Elements(1));
    for n in SIZES {
        let filters = policy(n);
        let mut rng = Pcg64::seed_from_u64(n as u64);
        let pkts = packets(&mut rng, n);
        let t0 = Instant::now();
        let cls = Classifier::new(filters.clone(), DEFAULT);
        let built = t0.elapsed();
        // The compiled and linear answers must agree before either is timed.
        for p in &pkts {
            assert_eq!(cls.classify(p), linear(&filters, p));
        }
        let s = cls.stats();
        eprintln!(
            "{name} n={n}: build {built:?}, table filters {}, tuples {}, buckets {}, largest bucket {}",
            s.table_filters, s.tuples, s.buckets, s.largest_bucket
        );
        group.bench_with_input(BenchmarkId::new("compiled", n), &pkts, |b, pkts| {
            let mut k = 0usize;
            b.iter(|| {
                k = (k + 1) % RING;
                black_box(cls.classify(black_box(&pkts[k])))
            })
        });
        group.bench_with_input(BenchmarkId::new("linear", n), &pkts, |b, pkts| {
            let mut k = 0usize;
            b.iter(|| {
                k = (k + 1) % RING;
                black_box(linear(&filters, black_box(&pkts[k])))
            })
        });
    }
    group.finish();
}

fn benches(c: &mut Criterion) {
    run(c, "dscp", dscp_policy, dscp_packets);
    run(c, "subscriber", subscriber_policy, subscriber_packets);
    run(c, "mixed", mixed_policy, mixed_packets);
}

criterion_group!(classify, benches);
criterion_main!(classify);
