//! The compiled classifier agrees with a plain first-match scan on random policies and packets.
//!
//! Value domains are kept small (a few addresses, ports, TOS values) so that filters overlap and
//! packets actually match, including at prefix and port-range edges.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use linkshare_core::classify::{ClassId, Classifier, FilterSpec, IpPrefix};
use linkshare_core::packet::{Fragment, PacketMeta, ParseIssue, L3};
use proptest::prelude::*;

// ---------------------------------------------------------------------------------------------
// The reference: written out field by field, sharing no code with the classifier.

fn in_prefix(p: &IpPrefix, a: IpAddr) -> bool {
    match (p.addr, a) {
        (IpAddr::V4(net), IpAddr::V4(a)) => {
            if p.len > 32 {
                false
            } else if p.len == 0 {
                true
            } else {
                let shift = 32 - u32::from(p.len);
                u32::from(net) >> shift == u32::from(a) >> shift
            }
        }
        (IpAddr::V6(net), IpAddr::V6(a)) => {
            if p.len > 128 {
                false
            } else if p.len == 0 {
                true
            } else {
                let shift = 128 - u32::from(p.len);
                u128::from(net) >> shift == u128::from(a) >> shift
            }
        }
        _ => false,
    }
}

fn naive_matches(f: &FilterSpec, m: &PacketMeta) -> bool {
    let sets_something = f.dscp.is_some()
        || f.tos.is_some()
        || f.protocol.is_some()
        || f.src.is_some()
        || f.dst.is_some()
        || f.src_port.is_some()
        || f.dst_port.is_some();
    if let L3::Other(_) = m.l3 {
        return !sets_something;
    }
    if let Some(list) = &f.dscp {
        if !list.contains(&(m.tos >> 2)) {
            return false;
        }
    }
    if let Some((value, mask)) = f.tos {
        if m.tos & mask != value & mask {
            return false;
        }
    }
    let proto_known = m.issue != Some(ParseIssue::ExtensionChain);
    if let Some(p) = f.protocol {
        if !proto_known || m.proto != p {
            return false;
        }
    }
    if let Some(p) = &f.src {
        if !in_prefix(p, m.src) {
            return false;
        }
    }
    if let Some(p) = &f.dst {
        if !in_prefix(p, m.dst) {
            return false;
        }
    }
    if f.src_port.is_some() || f.dst_port.is_some() {
        let has_ports = proto_known
            && (m.proto == 6 || m.proto == 17)
            && m.frag != Fragment::Later
            && m.issue != Some(ParseIssue::TruncatedL4);
        if !has_ports {
            return false;
        }
        if let Some((lo, hi)) = f.src_port {
            if m.src_port < lo || m.src_port > hi {
                return false;
            }
        }
        if let Some((lo, hi)) = f.dst_port {
            if m.dst_port < lo || m.dst_port > hi {
                return false;
            }
        }
    }
    true
}

fn naive_first(filters: &[FilterSpec], m: &PacketMeta) -> Option<usize> {
    filters.iter().position(|f| naive_matches(f, m))
}

fn naive_classify(filters: &[FilterSpec], default: ClassId, m: &PacketMeta) -> ClassId {
    match naive_first(filters, m) {
        Some(i) => filters[i].class,
        None => default,
    }
}

// ---------------------------------------------------------------------------------------------
// Small domains.

const V4_POOL: [u32; 4] = [0x0a00_0000, 0x0a00_0100, 0x0a01_0000, 0xc000_0200];
const V6_POOL: [u128; 3] = [
    0x2001_0db8_0000_0000_0000_0000_0000_0000,
    0x2001_0db8_0001_0000_0000_0000_0000_0000,
    0xfe80 << 112,
];

fn v4_addr() -> impl Strategy<Value = IpAddr> {
    (
        prop::sample::select(V4_POOL.to_vec()),
        prop_oneof![0u32..4, 250u32..260, Just(0xffff)],
    )
        .prop_map(|(base, low)| IpAddr::V4(Ipv4Addr::from(base.wrapping_add(low))))
}

fn v6_addr() -> impl Strategy<Value = IpAddr> {
    (
        prop::sample::select(V6_POOL.to_vec()),
        prop_oneof![0u128..4, Just(1u128 << 64), Just(1u128 << 80)],
    )
        .prop_map(|(base, low)| IpAddr::V6(Ipv6Addr::from(base.wrapping_add(low))))
}

fn prefix() -> impl Strategy<Value = IpPrefix> {
    prop_oneof![
        9 => (v4_addr(), prop::sample::select(vec![0u8, 8, 16, 23, 24, 30, 31, 32]))
            .prop_map(|(addr, len)| IpPrefix { addr, len }),
        6 => (v6_addr(), prop::sample::select(vec![0u8, 32, 47, 48, 64, 80, 126, 128]))
            .prop_map(|(addr, len)| IpPrefix { addr, len }),
        // Invalid lengths: must match nothing.
        1 => (v4_addr(), Just(33u8)).prop_map(|(addr, len)| IpPrefix { addr, len }),
    ]
}

fn port() -> impl Strategy<Value = u16> {
    prop_oneof![0u16..12, Just(80), Just(443), Just(65534), Just(65535)]
}

fn port_range() -> impl Strategy<Value = (u16, u16)> {
    prop_oneof![
        8 => (port(), port()).prop_map(|(a, b)| (a.min(b), a.max(b))),
        1 => port().prop_map(|p| (p, p)),
        1 => (port(), port()), // possibly inverted: matches nothing
    ]
}

fn tos_byte() -> impl Strategy<Value = u8> {
    prop_oneof![
        prop::sample::select(vec![
            0u8,
            1,
            3,
            46 << 2,
            46 << 2 | 3,
            10 << 2,
            8 << 2,
            0x10,
            0x1e
        ]),
        any::<u8>(),
    ]
}

fn filter() -> impl Strategy<Value = FilterSpec> {
    let dscp = prop::collection::vec(prop::sample::select(vec![0u8, 1, 8, 10, 46, 63, 64]), 0..4);
    let tos = (
        tos_byte(),
        prop::sample::select(vec![0u8, 0x03, 0x1e, 0xfc, 0xff, 0xe0]),
    );
    let proto = prop::sample::select(vec![1u8, 6, 17, 58]);
    (
        0u32..20,
        prop::option::weighted(0.3, dscp),
        prop::option::weighted(0.15, tos),
        prop::option::weighted(0.5, proto),
        prop::option::weighted(0.5, prefix()),
        prop::option::weighted(0.5, prefix()),
        prop::option::weighted(0.3, port_range()),
        prop::option::weighted(0.4, port_range()),
        prop::bool::weighted(0.1),
    )
        .prop_map(
            |(class, dscp, tos, protocol, src, dst, src_port, dst_port, keep_empty)| {
                let mut f = FilterSpec {
                    class,
                    dscp,
                    tos,
                    protocol,
                    src,
                    dst,
                    src_port,
                    dst_port,
                };
                // Match-all filters end the search for every packet: keep them, but rarely.
                if f == (FilterSpec {
                    class,
                    ..Default::default()
                }) && !keep_empty
                {
                    f.dscp = Some(vec![46]);
                }
                f
            },
        )
}

fn packet() -> impl Strategy<Value = PacketMeta> {
    let family = prop_oneof![5 => Just(4u8), 4 => Just(6u8), 1 => Just(0u8)];
    let addrs = family.prop_flat_map(|f| match f {
        4 => (Just(L3::Ipv4), v4_addr(), v4_addr()).boxed(),
        6 => (Just(L3::Ipv6), v6_addr(), v6_addr()).boxed(),
        _ => (Just(L3::Other(0x0806)), v4_addr(), v4_addr()).boxed(),
    });
    let frag = prop::sample::select(vec![
        Fragment::None,
        Fragment::None,
        Fragment::First,
        Fragment::Later,
    ]);
    let issue = prop::sample::select(vec![
        None,
        None,
        None,
        None,
        Some(ParseIssue::TruncatedL4),
        Some(ParseIssue::ExtensionChain),
    ]);
    (
        addrs,
        tos_byte(),
        prop::sample::select(vec![1u8, 6, 6, 17, 17, 58]),
        port(),
        port(),
        frag,
        issue,
    )
        .prop_map(
            |((l3, src, dst), tos, proto, src_port, dst_port, frag, issue)| PacketMeta {
                l3,
                tos,
                proto,
                src,
                dst,
                src_port,
                dst_port,
                frag,
                issue,
                ..Default::default()
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn compiled_equals_first_match_scan(
        filters in prop::collection::vec(filter(), 1..300),
        packets in prop::collection::vec(packet(), 64),
        default in 100u32..103,
    ) {
        let c = Classifier::new(filters.clone(), default);
        prop_assert_eq!(c.filters(), filters.as_slice());
        for m in &packets {
            prop_assert_eq!(c.explain(m), naive_first(&filters, m), "packet {:?}", m);
            prop_assert_eq!(c.classify(m), naive_classify(&filters, default, m));
        }
    }

    /// Many filters sharing a few keys, differing only in port ranges: exercises the port index
    /// (buckets above the linear-scan size) against the scan.
    #[test]
    fn port_heavy_buckets(
        rules in prop::collection::vec(
            (0u8..2, prop::option::of(port_range()), prop::option::of(port_range())),
            1..200,
        ),
        packets in prop::collection::vec(
            (0u8..2, port(), port(), prop::sample::select(vec![6u8, 17])),
            64,
        ),
    ) {
        let dst = |i: u8| IpPrefix { addr: IpAddr::V4(Ipv4Addr::new(10, 0, 0, i)), len: 32 };
        let filters: Vec<FilterSpec> = rules
            .iter()
            .enumerate()
            .map(|(i, (d, sp, dp))| FilterSpec {
                class: i as u32,
                dst: Some(dst(*d)),
                src_port: *sp,
                dst_port: *dp,
                ..Default::default()
            })
            .collect();
        let c = Classifier::new(filters.clone(), 9999);
        for (d, sp, dp, proto) in packets {
            let m = PacketMeta {
                proto,
                src: IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1)),
                dst: dst(d).addr,
                src_port: sp,
                dst_port: dp,
                ..Default::default()
            };
            prop_assert_eq!(c.classify(&m), naive_classify(&filters, 9999, &m), "packet {:?}", m);
        }
    }

    /// Printing a parsed prefix and parsing it again gives the same prefix.
    #[test]
    fn prefix_display_round_trips(p in prefix()) {
        prop_assume!(p.len <= if p.addr.is_ipv4() { 32 } else { 128 });
        let text = format!("{}/{}", p.addr, p.len);
        let parsed: IpPrefix = text.parse().unwrap();
        prop_assert_eq!(parsed.len, p.len);
        prop_assert!(in_prefix(&parsed, p.addr));
        prop_assert_eq!(parsed.to_string().parse::<IpPrefix>().unwrap(), parsed);
        let report = IpPrefix::parse_report(&text).unwrap();
        prop_assert_eq!(report.host_bits_cleared, parsed.addr != p.addr);
    }
}
