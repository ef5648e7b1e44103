//! Property tests for the wire parser: no byte string makes it panic, built packets round-trip,
//! fragments share a flow, and the flow hash spreads tuples.

use std::collections::HashSet;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use linkshare_core::packet::{Fragment, PacketMeta, L3};
use linkshare_core::wire::{
    build_ethernet, build_ip, flow_hash, parse_ethernet, parse_ip, BuildSpec, ExtHeader, Vlan,
};
use proptest::prelude::*;
use rand::{Rng, SeedableRng};

/// Protocols the builder knows, plus a few it only gives a payload.
const PROTOS: [u8; 9] = [6, 17, 136, 132, 33, 1, 58, 47, 50];

fn addr_pair() -> impl Strategy<Value = (IpAddr, IpAddr)> {
    prop_oneof![
        (any::<u32>(), any::<u32>()).prop_map(|(a, b)| (
            IpAddr::from(Ipv4Addr::from(a)),
            IpAddr::from(Ipv4Addr::from(b))
        )),
        (any::<u128>(), any::<u128>()).prop_map(|(a, b)| (
            IpAddr::from(Ipv6Addr::from(a)),
            IpAddr::from(Ipv6Addr::from(b))
        )),
    ]
}

fn ext_header() -> impl Strategy<Value = ExtHeader> {
    prop_oneof![
        (0u8..4).prop_map(ExtHeader::HopByHop),
        (0u8..4).prop_map(ExtHeader::Routing),
        (0u8..4).prop_map(ExtHeader::DestOptions),
        (1u8..8).prop_map(ExtHeader::Auth),
    ]
}

fn vlan() -> impl Strategy<Value = Vlan> {
    (
        prop::sample::select(vec![0x8100u16, 0x88a8, 0x9100]),
        0u16..4096,
        0u8..8,
    )
        .prop_map(|(tpid, vid, pcp)| Vlan { tpid, vid, pcp })
}

/// Valid specs: any addresses, protocol, ports, TOS, payload, fragment position, IPv4 options,
/// up to 4 IPv6 extension headers and up to 2 VLAN tags.
fn spec() -> impl Strategy<Value = BuildSpec> {
    (
        addr_pair(),
        prop::sample::select(PROTOS.to_vec()),
        any::<(u16, u16, u8, u32)>(),
        0usize..1400,
        prop::option::of((0u16..8000, any::<bool>())),
        prop::collection::vec(any::<u8>(), 0..=40),
        prop::collection::vec(ext_header(), 0..4),
        prop::collection::vec(vlan(), 0..=2),
        any::<bool>(),
    )
        .prop_map(
            |((src, dst), proto, (sp, dp, tos, ident), payload, frag, opts, ext, vlans, pad)| {
                let mut s = BuildSpec {
                    src,
                    dst,
                    proto,
                    src_port: sp,
                    dst_port: dp,
                    tos,
                    ident,
                    payload_len: payload,
                    ipv4_options: opts,
                    ipv6_ext: ext,
                    vlans,
                    pad_ethernet: pad,
                    ..BuildSpec::default()
                };
                if let Some((units, more)) = frag {
                    s = s.with_frag(units * 8, more);
                }
                s
            },
        )
}

fn has_ports(proto: u8) -> bool {
    matches!(proto, 6 | 17 | 136 | 132 | 33)
}

fn expected_frag(s: &BuildSpec) -> Fragment {
    match s.frag {
        None => Fragment::None,
        Some(f) if f.offset > 0 => Fragment::Later,
        Some(f) if f.more => Fragment::First,
        Some(_) => Fragment::None,
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..2000)) {
        let _ = parse_ethernet(&bytes);
        let _ = parse_ip(&bytes);
    }

    /// Random bytes behind a plausible prefix reach the deeper layers more often than pure noise.
    #[test]
    fn arbitrary_bytes_behind_ip_headers_never_panic(
        first in prop::sample::select(vec![0x45u8, 0x46, 0x4f, 0x60, 0x6f]),
        ethertype in prop::sample::select(vec![0x0800u16, 0x86dd, 0x8100, 0x88a8, 0x9100]),
        rest in prop::collection::vec(any::<u8>(), 0..200),
    ) {
        let mut pkt = vec![first];
        pkt.extend_from_slice(&rest);
        if let Ok(m) = parse_ip(&pkt) {
            prop_assert!(m.len as usize <= pkt.len());
        }
        let mut frame = vec![0u8; 12];
        frame.extend_from_slice(&ethertype.to_be_bytes());
        frame.extend_from_slice(&pkt);
        let _ = parse_ethernet(&frame);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]

    #[test]
    fn mutated_and_truncated_packets_never_panic(
        s in spec(),
        flips in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8),
        cut in any::<prop::sample::Index>(),
    ) {
        let mut frame = Vec::new();
        build_ethernet(&mut frame, &s);
        for n in 0..=frame.len().min(120) {
            let _ = parse_ethernet(&frame[..n]);
        }
        let mut mutated = frame.clone();
        for (at, byte) in &flips {
            let i = at.index(mutated.len());
            mutated[i] = *byte;
            if let Ok(m) = parse_ethernet(&mutated) {
                prop_assert!(m.len as usize <= mutated.len());
            }
        }
        let _ = parse_ethernet(&mutated[..cut.index(mutated.len() + 1)]);
        let mut packet = Vec::new();
        build_ip(&mut packet, &s);
        for (at, byte) in &flips {
            let i = at.index(packet.len());
            packet[i] ^= *byte;
        }
        let _ = parse_ip(&packet);
        let _ = parse_ip(&packet[..cut.index(packet.len() + 1)]);
    }

    #[test]
    fn built_packets_round_trip(s in spec()) {
        let mut packet = Vec::new();
        build_ip(&mut packet, &s);
        let mut frame = Vec::new();
        build_ethernet(&mut frame, &s);
        let m = parse_ethernet(&frame).expect("a built frame parses");
        // The same packet without its link layer: no VLAN, the IP header at offset 0.
        prop_assert_eq!(parse_ip(&packet).expect("a built packet parses"), PacketMeta { vlan: None, l3_offset: 0, ..m });
        // The IP packet starts after the MAC addresses, one 4-byte tag per VLAN and the EtherType;
        // padding to 60 bytes only ever follows it.
        let header = 14 + 4 * s.vlans.len();
        prop_assert_eq!(usize::from(m.l3_offset), header);
        prop_assert_eq!(&frame[header..header + packet.len()], &packet[..]);

        prop_assert_eq!(m.l3, if s.is_ipv6() { L3::Ipv6 } else { L3::Ipv4 });
        prop_assert_eq!(m.len as usize, packet.len());
        prop_assert_eq!((m.src, m.dst, m.tos), (s.src, s.dst, s.tos));
        prop_assert_eq!(m.vlan, s.vlans.first().map(|v| v.vid));
        let frag = expected_frag(&s);
        prop_assert_eq!(m.frag, frag);
        prop_assert_eq!(m.issue, None);
        prop_assert_eq!(m.flow_hash, flow_hash(&m, 0));
        // Extension headers all precede the fragment header, so even a later fragment knows the
        // transport protocol.
        prop_assert_eq!(m.proto, s.proto);
        if frag != Fragment::Later && has_ports(s.proto) {
            prop_assert_eq!((m.src_port, m.dst_port), (s.src_port, s.dst_port));
        } else {
            prop_assert_eq!((m.src_port, m.dst_port), (0, 0));
        }
    }

    #[test]
    fn all_fragments_of_a_datagram_share_a_flow(
        s in spec(),
        pieces in 2u16..6,
        key in any::<u64>(),
    ) {
        let s = BuildSpec { frag: None, payload_len: 64, ..s };
        let mut hashes = HashSet::new();
        let mut keyed = HashSet::new();
        let mut buf = Vec::new();
        for i in 0..pieces {
            let f = s.clone().with_frag(i * 64, i + 1 < pieces);
            build_ip(&mut buf, &f);
            let m = parse_ip(&buf).expect("a fragment parses");
            prop_assert_eq!(m.frag, if i == 0 { Fragment::First } else { Fragment::Later });
            if i == 0 && has_ports(s.proto) {
                prop_assert_eq!(m.src_port, s.src_port);
            }
            hashes.insert(m.flow_hash);
            keyed.insert(flow_hash(&m, key));
        }
        prop_assert_eq!(hashes.len(), 1);
        prop_assert_eq!(keyed.len(), 1);
    }

    #[test]
    fn keys_change_the_hash(s in spec(), k1 in any::<u64>(), k2 in any::<u64>()) {
        prop_assume!(k1 != k2);
        let mut buf = Vec::new();
        build_ip(&mut buf, &s);
        let m = parse_ip(&buf).expect("a built packet parses");
        prop_assert_ne!(flow_hash(&m, k1), flow_hash(&m, k2));
        prop_assert_eq!(flow_hash(&m, k1), flow_hash(&m, k1));
    }
}

fn random_tuple(rng: &mut rand_pcg::Pcg64, v6: bool) -> PacketMeta {
    let (src, dst, l3) = if v6 {
        (
            IpAddr::from(Ipv6Addr::from(rng.gen::<u128>())),
            IpAddr::from(Ipv6Addr::from(rng.gen::<u128>())),
            L3::Ipv6,
        )
    } else {
        (
            IpAddr::from(Ipv4Addr::from(rng.gen::<u32>())),
            IpAddr::from(Ipv4Addr::from(rng.gen::<u32>())),
            L3::Ipv4,
        )
    };
    PacketMeta {
        l3,
        src,
        dst,
        proto: if rng.gen() { 6 } else { 17 },
        src_port: rng.gen(),
        dst_port: rng.gen(),
        ..PacketMeta::default()
    }
}

/// 10k distinct random tuples into 2^32 values: about 0.01 collisions are expected.
#[test]
fn random_tuples_rarely_collide() {
    let mut rng = rand_pcg::Pcg64::seed_from_u64(0x5eed);
    for v6 in [false, true] {
        let mut tuples = HashSet::new();
        let mut hashes = HashSet::new();
        while tuples.len() < 10_000 {
            let m = random_tuple(&mut rng, v6);
            if tuples.insert((m.src, m.dst, m.proto, m.src_port, m.dst_port)) {
                hashes.insert(flow_hash(&m, 0));
            }
        }
        let collisions = tuples.len() - hashes.len();
        assert!(collisions <= 2, "{collisions} collisions (v6: {v6})");
    }
}

/// Tuples that differ only in a source port (many flows between two hosts) spread evenly over
/// SFQ-sized bucket tables, and a new key reshuffles which flows share a bucket.
#[test]
fn nearby_tuples_spread_over_buckets_and_rekeying_reshuffles() {
    const BUCKETS: usize = 1024;
    const FLOWS: u16 = 8192;
    let meta = |sp: u16| PacketMeta {
        src: Ipv4Addr::new(10, 0, 0, 1).into(),
        dst: Ipv4Addr::new(10, 0, 0, 2).into(),
        proto: 6,
        src_port: sp,
        dst_port: 443,
        ..PacketMeta::default()
    };
    let mut counts = vec![0u32; BUCKETS];
    for sp in 0..FLOWS {
        counts[flow_hash(&meta(sp), 0) as usize % BUCKETS] += 1;
    }
    // Mean 8 per bucket; a good hash keeps the fullest bucket far below 3x the mean.
    let max = counts.iter().copied().max().unwrap_or(0);
    assert!(max <= 24, "fullest bucket holds {max}");
    assert!(counts.iter().filter(|&&c| c == 0).count() < 10);

    // Pairs sharing a bucket under key 0 mostly stop sharing under key 1.
    let bucket = |sp: u16, key: u64| flow_hash(&meta(sp), key) as usize % BUCKETS;
    let mut shared = 0;
    let mut still_shared = 0;
    for a in 0..512u16 {
        for b in (a + 1)..512 {
            if bucket(a, 0) == bucket(b, 0) {
                shared += 1;
                if bucket(a, 1) == bucket(b, 1) {
                    still_shared += 1;
                }
            }
        }
    }
    assert!(shared > 50, "{shared} pairs share a bucket");
    assert!(
        still_shared * 20 < shared,
        "{still_shared} of {shared} still share"
    );
}
