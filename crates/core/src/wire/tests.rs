//! Parser tests over hand-built packets: every kind parses to the expected meta, every malformed
//! case returns its reason.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use super::*;
use crate::packet::ParseIssue;

fn a4(d: u8) -> Ipv4Addr {
    Ipv4Addr::new(192, 0, 2, d)
}

fn a6(d: u16) -> Ipv6Addr {
    Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, d)
}

fn eth(spec: &BuildSpec) -> Vec<u8> {
    let mut buf = Vec::new();
    build_ethernet(&mut buf, spec);
    buf
}

fn ip(spec: &BuildSpec) -> Vec<u8> {
    let mut buf = Vec::new();
    build_ip(&mut buf, spec);
    buf
}

#[test]
fn ipv4_tcp_in_plain_ethernet() {
    let spec = BuildSpec::tcp(a4(1), 40000, a4(2), 443)
        .with_tos(0xb9)
        .with_payload(100);
    let frame = eth(&spec);
    let m = parse_ethernet(&frame).unwrap();
    assert_eq!(m.l3, L3::Ipv4);
    assert_eq!(m.len, 20 + 20 + 100);
    assert_eq!((m.tos, m.dscp(), m.ecn()), (0xb9, 46, 1));
    assert_eq!(m.proto, proto::TCP);
    assert_eq!((m.src, m.dst), (IpAddr::from(a4(1)), IpAddr::from(a4(2))));
    assert_eq!((m.src_port, m.dst_port), (40000, 443));
    assert_eq!((m.frag, m.vlan, m.issue), (Fragment::None, None, None));
    assert_eq!(m.flow_hash, flow_hash(&m, 0));
    // Same packet without Ethernet (its IP header at 0 instead of 14).
    assert_eq!(m.l3_offset, 14);
    assert_eq!(
        parse_ip(&frame[14..]).unwrap(),
        PacketMeta { l3_offset: 0, ..m }
    );
    // The builder's checksums are right.
    assert!(Ipv4Packet::new_checked(&frame[14..])
        .unwrap()
        .verify_checksum());
    let seg = &frame[34..];
    let sum = checksum::pseudo_header(spec.src, spec.dst, proto::TCP, seg.len() as u32);
    assert_eq!(checksum::finish(checksum::accumulate(sum, seg)), 0);
}

#[test]
fn ipv4_udp_padding_is_ignored() {
    // 28-byte IP packet in a 60-byte frame: 18 bytes of padding after it.
    let spec = BuildSpec::udp(a4(1), 5353, a4(2), 53);
    let frame = eth(&spec);
    assert_eq!(frame.len(), 60);
    let m = parse_ethernet(&frame).unwrap();
    assert_eq!(m.len, 28);
    assert_eq!((m.proto, m.src_port, m.dst_port), (proto::UDP, 5353, 53));
}

#[test]
fn vlan_and_qinq_tags() {
    let spec = BuildSpec::udp(a4(1), 1, a4(2), 2).with_vlan(Vlan::dot1q(100));
    let m = parse_ethernet(&eth(&spec)).unwrap();
    assert_eq!(m.vlan, Some(100));
    assert_eq!((m.l3, m.src_port, m.dst_port), (L3::Ipv4, 1, 2));

    // QinQ with each outer TPID: the outer id is reported.
    for tpid in [ethertype::QINQ, ethertype::QINQ_OLD, ethertype::VLAN] {
        let outer = Vlan {
            tpid,
            vid: 4000,
            pcp: 5,
        };
        let spec = BuildSpec::tcp(a6(1), 1, a6(2), 2)
            .with_vlan(outer)
            .with_vlan(Vlan::dot1q(7));
        let m = parse_ethernet(&eth(&spec)).unwrap();
        assert_eq!(m.vlan, Some(4000), "tpid {tpid:#x}");
        assert_eq!((m.l3, m.proto, m.dst_port), (L3::Ipv6, proto::TCP, 2));
        assert_eq!(m.len, 40 + 20);
    }
}

#[test]
fn three_tags_are_too_many() {
    let spec = BuildSpec::default()
        .with_vlan(Vlan::dot1ad(1))
        .with_vlan(Vlan::dot1q(2))
        .with_vlan(Vlan::dot1q(3));
    assert_eq!(
        parse_ethernet(&eth(&spec)),
        Err(ParseError::TooManyVlanTags)
    );
}

#[test]
fn ipv4_with_options() {
    // Record Route (7 bytes) + NOP: IHL 7.
    let rr = [7, 7, 4, 0, 0, 0, 0, 1];
    let spec = BuildSpec::udp(a4(1), 68, a4(255), 67)
        .with_ipv4_options(&rr)
        .with_payload(3);
    let pkt = ip(&spec);
    let v = Ipv4Packet::new_checked(&pkt[..]).unwrap();
    assert_eq!((v.header_len(), v.options()), (28, &rr[..]));
    assert!(v.verify_checksum());
    let m = parse_ip(&pkt).unwrap();
    assert_eq!(m.len, 28 + 8 + 3);
    assert_eq!((m.src_port, m.dst_port), (68, 67));
}

#[test]
fn ipv4_fragments() {
    let base = BuildSpec::udp(a4(1), 5000, a4(2), 4789).with_payload(64);
    let first = parse_ip(&ip(&base.clone().with_frag(0, true))).unwrap();
    assert_eq!(first.frag, Fragment::First);
    assert_eq!((first.src_port, first.dst_port), (5000, 4789));
    assert_eq!(first.issue, None);

    let later = base.clone().with_frag(1480, true);
    let middle = parse_ip(&ip(&later)).unwrap();
    let last = parse_ip(&ip(&base.clone().with_frag(2960, false))).unwrap();
    for m in [middle, last] {
        assert_eq!(m.frag, Fragment::Later);
        assert_eq!((m.proto, m.src_port, m.dst_port), (proto::UDP, 0, 0));
        assert_eq!(m.len, 20 + 64);
        assert_eq!(m.flow_hash, first.flow_hash);
    }
    // A later fragment whose payload happens to look like ports still has none.
    let mut bytes = ip(&later);
    bytes[20..24].copy_from_slice(&[0x13, 0x88, 0x12, 0xb5]);
    assert_eq!(parse_ip(&bytes).unwrap().src_port, 0);

    // An unfragmented packet of the same flow hashes with its ports.
    let whole = parse_ip(&ip(&base)).unwrap();
    assert_eq!(whole.frag, Fragment::None);
    assert_ne!(whole.flow_hash, first.flow_hash);
}

#[test]
fn tiny_first_fragment_is_truncated_l4() {
    // First fragment with only 2 bytes of UDP header: ports unknown.
    let mut pkt = ip(&BuildSpec::udp(a4(1), 1, a4(2), 2).with_frag(0, true));
    pkt.truncate(22);
    pkt[2..4].copy_from_slice(&22u16.to_be_bytes());
    let m = parse_ip(&pkt).unwrap();
    assert_eq!(m.frag, Fragment::First);
    assert_eq!((m.src_port, m.dst_port), (0, 0));
    assert_eq!(m.issue, Some(ParseIssue::TruncatedL4));
}

#[test]
fn truncated_transport_headers() {
    // Cut the TCP header to 4 bytes: ports still known, no issue.
    let mut pkt = ip(&BuildSpec::tcp(a4(1), 1000, a4(2), 22));
    pkt.truncate(24);
    pkt[2..4].copy_from_slice(&24u16.to_be_bytes());
    let m = parse_ip(&pkt).unwrap();
    assert_eq!((m.src_port, m.dst_port, m.issue), (1000, 22, None));
    // 3 bytes: ports unknown.
    pkt.truncate(23);
    pkt[2..4].copy_from_slice(&23u16.to_be_bytes());
    let m = parse_ip(&pkt).unwrap();
    assert_eq!((m.src_port, m.dst_port), (0, 0));
    assert_eq!(
        (m.proto, m.issue),
        (proto::TCP, Some(ParseIssue::TruncatedL4))
    );
    // The same for IPv6 UDP with 2 payload bytes.
    let mut pkt = ip(&BuildSpec::udp(a6(1), 1, a6(2), 2));
    pkt.truncate(42);
    pkt[4..6].copy_from_slice(&2u16.to_be_bytes());
    let m = parse_ip(&pkt).unwrap();
    assert_eq!((m.len, m.issue), (42, Some(ParseIssue::TruncatedL4)));
}

#[test]
fn icmp_and_icmpv6_have_no_ports() {
    let spec = BuildSpec::icmp(a4(1), a4(2)).with_payload(56);
    let pkt = ip(&spec);
    let m = parse_ip(&pkt).unwrap();
    assert_eq!((m.proto, m.src_port, m.dst_port, m.issue), (1, 0, 0, None));
    assert_eq!(m.len, 84);
    assert_eq!(checksum::internet(&pkt[20..]), 0);

    let spec = BuildSpec::icmp(a6(1), a6(2)).with_payload(56);
    let pkt = ip(&spec);
    let m = parse_ip(&pkt).unwrap();
    assert_eq!(
        (m.l3, m.proto, m.src_port, m.dst_port),
        (L3::Ipv6, 58, 0, 0)
    );
    assert_eq!(m.len, 40 + 64);
    let sum = checksum::pseudo_header(spec.src, spec.dst, 58, 64);
    assert_eq!(checksum::finish(checksum::accumulate(sum, &pkt[40..])), 0);
}

#[test]
fn ipv6_udp_traffic_class() {
    let spec = BuildSpec::udp(a6(1), 4500, a6(2), 500)
        .with_tos(0x2b)
        .with_payload(10);
    let m = parse_ethernet(&eth(&spec)).unwrap();
    assert_eq!(m.l3, L3::Ipv6);
    assert_eq!((m.tos, m.len, m.proto), (0x2b, 40 + 18, proto::UDP));
    assert_eq!((m.src, m.dst), (IpAddr::from(a6(1)), IpAddr::from(a6(2))));
    assert_eq!((m.src_port, m.dst_port), (4500, 500));
}

#[test]
fn ipv6_hop_by_hop_and_fragment_header() {
    let base = BuildSpec::tcp(a6(1), 30000, a6(2), 80)
        .with_ext(ExtHeader::HopByHop(0))
        .with_ext(ExtHeader::Routing(2))
        .with_payload(200);
    let first = parse_ip(&ip(&base.clone().with_frag(0, true))).unwrap();
    assert_eq!(first.frag, Fragment::First);
    assert_eq!(
        (first.proto, first.src_port, first.dst_port),
        (proto::TCP, 30000, 80)
    );
    assert_eq!(first.len, 40 + 8 + 24 + 8 + 20 + 200);
    assert_eq!(first.issue, None);

    let later = parse_ip(&ip(&base.clone().with_frag(1232, false))).unwrap();
    assert_eq!(later.frag, Fragment::Later);
    assert_eq!(
        (later.proto, later.src_port, later.dst_port),
        (proto::TCP, 0, 0)
    );
    assert_eq!(later.flow_hash, first.flow_hash);

    // Destination options after the fragment header: the later fragment only knows "60".
    let dst_opts = base
        .clone()
        .with_ext(ExtHeader::Fragment)
        .with_ext(ExtHeader::DestOptions(0));
    let first = parse_ip(&ip(&dst_opts.clone().with_frag(0, true))).unwrap();
    let later = parse_ip(&ip(&dst_opts.with_frag(8, false))).unwrap();
    assert_eq!(
        (first.proto, later.proto),
        (proto::TCP, proto::IPV6_DEST_OPTS)
    );
    assert_eq!(later.flow_hash, first.flow_hash);

    // An atomic fragment (offset 0, M clear) is not a fragment.
    let atomic = parse_ip(&ip(&base.with_ext(ExtHeader::Fragment))).unwrap();
    assert_eq!(atomic.frag, Fragment::None);
    assert_eq!((atomic.src_port, atomic.dst_port), (30000, 80));
}

#[test]
fn ipv6_ah_esp_and_no_next_header() {
    let ah = BuildSpec::udp(a6(1), 7, a6(2), 8).with_ext(ExtHeader::Auth(4));
    let m = parse_ip(&ip(&ah)).unwrap();
    assert_eq!(
        (m.proto, m.src_port, m.dst_port, m.len),
        (proto::UDP, 7, 8, 40 + 24 + 8)
    );

    for p in [proto::ESP, proto::IPV6_NO_NEXT] {
        let spec = BuildSpec {
            proto: p,
            ..BuildSpec::udp(a6(1), 7, a6(2), 8).with_ext(ExtHeader::DestOptions(1))
        }
        .with_payload(16);
        let m = parse_ip(&ip(&spec)).unwrap();
        assert_eq!((m.proto, m.src_port, m.issue), (p, 0, None));
    }
}

#[test]
fn ipv6_extension_chain_too_long_or_cut_short() {
    let mut spec = BuildSpec::udp(a6(1), 7, a6(2), 8);
    spec.ipv6_ext = vec![ExtHeader::DestOptions(0); ipv6::MAX_EXT_HEADERS];
    let m = parse_ip(&ip(&spec)).unwrap();
    assert_eq!((m.proto, m.src_port, m.issue), (proto::UDP, 7, None));

    spec.ipv6_ext.push(ExtHeader::DestOptions(0));
    let m = parse_ip(&ip(&spec)).unwrap();
    assert_eq!(m.issue, Some(ParseIssue::ExtensionChain));
    assert_eq!(
        (m.proto, m.src_port, m.dst_port),
        (proto::IPV6_DEST_OPTS, 0, 0)
    );

    // Payload length that ends inside the routing header.
    let mut pkt = ip(&BuildSpec::udp(a6(1), 7, a6(2), 8)
        .with_ext(ExtHeader::HopByHop(0))
        .with_ext(ExtHeader::Routing(1)));
    pkt[4..6].copy_from_slice(&20u16.to_be_bytes());
    let m = parse_ip(&pkt).unwrap();
    assert_eq!(m.len, 60);
    assert_eq!(
        (m.proto, m.issue),
        (proto::IPV6_ROUTING, Some(ParseIssue::ExtensionChain))
    );
}

#[test]
fn non_ip_frames() {
    let arp = [0u8; 28];
    let mut frame = Vec::new();
    build_ethernet_frame(&mut frame, &[], ethertype::ARP, &arp, true);
    let m = parse_ethernet(&frame).unwrap();
    assert_eq!(m.l3, L3::Other(ethertype::ARP));
    assert_eq!((m.len, m.vlan, m.proto, m.src_port), (60, None, 0, 0));
    assert_eq!(m.flow_hash, flow_hash(&m, 0));

    build_ethernet_frame(
        &mut frame,
        &[Vlan::dot1q(42)],
        ethertype::LLDP,
        &[1; 100],
        true,
    );
    let m = parse_ethernet(&frame).unwrap();
    assert_eq!(
        (m.l3, m.len, m.vlan),
        (L3::Other(ethertype::LLDP), 118, Some(42))
    );
}

#[test]
fn truncated_at_every_layer() {
    let spec = BuildSpec::tcp(a4(1), 1, a4(2), 2).with_vlan(Vlan::dot1q(5));
    let frame = eth(&spec);
    // 14-byte Ethernet + 4-byte tag + 20-byte IPv4 + 20-byte TCP.
    for n in 0..frame.len() {
        let expected = match n {
            0..=13 => Err(ParseError::TruncatedEthernet),
            14..=17 => Err(ParseError::TruncatedVlan),
            18..=37 => Err(ParseError::TruncatedIpv4),
            38..=57 => Err(ParseError::BadIpv4TotalLength),
            _ => Ok(()),
        };
        assert_eq!(
            parse_ethernet(&frame[..n]).map(|_| ()),
            expected,
            "{n} bytes"
        );
    }
    let frame = eth(&BuildSpec::udp(a6(1), 1, a6(2), 2));
    for n in 14..frame.len() {
        let expected = match n {
            14..=53 => Err(ParseError::TruncatedIpv6),
            54..=61 => Err(ParseError::BadIpv6PayloadLength),
            _ => Ok(()),
        };
        assert_eq!(
            parse_ethernet(&frame[..n]).map(|_| ()),
            expected,
            "{n} bytes"
        );
    }
    assert_eq!(parse_ip(&[]), Err(ParseError::TruncatedIp));
    assert_eq!(parse_ip(&[0x45]), Err(ParseError::TruncatedIpv4));
    assert_eq!(parse_ip(&[0x60; 39]), Err(ParseError::TruncatedIpv6));
}

#[test]
fn malformed_ip_headers() {
    let pkt = ip(&BuildSpec::udp(a4(1), 1, a4(2), 2).with_payload(20));
    let mut bad = pkt.clone();
    bad[0] = 0x44;
    assert_eq!(parse_ip(&bad), Err(ParseError::BadIhl));
    bad[0] = 0x4f; // a 60-byte header in 48 bytes
    assert_eq!(parse_ip(&bad), Err(ParseError::TruncatedIpv4));
    // A 32-byte header in a 28-byte packet followed by padding.
    let mut bad = ip(&BuildSpec::udp(a4(1), 1, a4(2), 2));
    bad.resize(68, 0);
    assert!(parse_ip(&bad).is_ok());
    bad[0] = 0x48;
    assert_eq!(parse_ip(&bad), Err(ParseError::BadIpv4TotalLength));
    let mut bad = pkt.clone();
    bad[2..4].copy_from_slice(&49u16.to_be_bytes());
    assert_eq!(parse_ip(&bad), Err(ParseError::BadIpv4TotalLength));
    for v in [0u8, 1, 5, 7, 15] {
        let mut bad = pkt.clone();
        bad[0] = v << 4 | 5;
        assert_eq!(parse_ip(&bad), Err(ParseError::BadIpVersion), "version {v}");
    }
    // The EtherType says IPv4 but the header says 6 (and vice versa).
    let mut frame = eth(&BuildSpec::udp(a4(1), 1, a4(2), 2));
    frame[14] = 0x65;
    assert_eq!(parse_ethernet(&frame), Err(ParseError::BadIpVersion));
    let mut frame = eth(&BuildSpec::udp(a6(1), 1, a6(2), 2));
    frame[14] = 0x45;
    assert_eq!(parse_ethernet(&frame), Err(ParseError::BadIpVersion));
}

#[test]
fn error_names_are_stable_and_distinct() {
    let names: Vec<_> = ParseError::ALL.iter().map(|e| e.name()).collect();
    assert_eq!(names[0], "truncated_ethernet");
    assert_eq!(names[7], "bad_ipv4_total_length");
    let mut sorted = names.clone();
    sorted.sort_unstable();
    sorted.dedup();
    assert_eq!(sorted.len(), names.len());
    for n in names {
        assert!(n
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b == b'_' || b.is_ascii_digit()));
    }
}

/// `ip` wrapped as Ethernet (with `vlan` if given) → PPPoE session → PPP.
fn pppoe_frame(ip: &[u8], vlan: Option<u16>, ppp_proto: u16) -> Vec<u8> {
    let mut f = vec![0x02, 0, 0, 0, 0, 1, 0x02, 0, 0, 0, 0, 2];
    if let Some(vid) = vlan {
        f.extend_from_slice(&ethertype::VLAN.to_be_bytes());
        f.extend_from_slice(&vid.to_be_bytes());
    }
    f.extend_from_slice(&ethertype::PPPOE_SESSION.to_be_bytes());
    let len = u16::try_from(ip.len() + 2).unwrap_or(u16::MAX);
    f.extend_from_slice(&[0x11, 0x00, 0x00, 0x07]);
    f.extend_from_slice(&len.to_be_bytes());
    f.extend_from_slice(&ppp_proto.to_be_bytes());
    f.extend_from_slice(ip);
    f
}

#[test]
fn pppoe_session_frames_are_classified_by_their_inner_ip() {
    let spec = BuildSpec::udp(a4(1), 5000, a4(2), 53)
        .with_tos(0xb8)
        .with_payload(30);
    let inner = ip(&spec);
    let bare = parse_ip(&inner).unwrap();
    for vlan in [None, Some(7)] {
        let f = pppoe_frame(&inner, vlan, encap::PPP_IPV4);
        let m = parse_ethernet(&f).unwrap();
        assert_eq!(m.l3, L3::Ipv4);
        assert_eq!((m.src_port, m.dst_port, m.dscp()), (5000, 53, 46));
        assert_eq!(m.vlan, vlan);
        let off = 14 + if vlan.is_some() { 4 } else { 0 } + 8;
        assert_eq!(
            PacketMeta {
                vlan: None,
                l3_offset: 0,
                ..m
            },
            bare,
            "same meta as the bare packet"
        );
        assert_eq!(ip_offset(&f), Some((off, ethertype::IPV4)));
        assert_eq!(usize::from(m.l3_offset), off);
    }
    let spec6 = BuildSpec::tcp(a6(1), 4000, a6(2), 443).with_payload(10);
    let f6 = pppoe_frame(&ip(&spec6), None, encap::PPP_IPV6);
    let m6 = parse_ethernet(&f6).unwrap();
    assert_eq!((m6.l3, m6.proto, m6.dst_port), (L3::Ipv6, proto::TCP, 443));
    // PPP control traffic (LCP) is not IP: unshaped as before.
    let lcp = pppoe_frame(&[1, 2, 0, 4], None, 0xc021);
    assert_eq!(
        parse_ethernet(&lcp).unwrap().l3,
        L3::Other(ethertype::PPPOE_SESSION)
    );
    assert_eq!(ip_offset(&lcp), None);
    // A malformed IP header inside is an error, as for a bare frame.
    let mut bad = inner.clone();
    bad[0] = 0x43;
    assert_eq!(
        parse_ethernet(&pppoe_frame(&bad, None, encap::PPP_IPV4)),
        Err(ParseError::BadIhl)
    );
}

#[test]
fn mpls_label_stacks_are_classified_by_their_inner_ip() {
    let spec = BuildSpec::udp(a4(3), 1234, a4(4), 4321).with_payload(8);
    let inner = ip(&spec);
    let mut f = vec![0x02, 0, 0, 0, 0, 1, 0x02, 0, 0, 0, 0, 2];
    f.extend_from_slice(&ethertype::MPLS_UNICAST.to_be_bytes());
    // Labels 100 and 200 (S on the second), TTL 64.
    f.extend_from_slice(&[0x00, 0x06, 0x40, 0x40, 0x00, 0x0c, 0x81, 0x40]);
    f.extend_from_slice(&inner);
    let m = parse_ethernet(&f).unwrap();
    assert_eq!(PacketMeta { l3_offset: 0, ..m }, parse_ip(&inner).unwrap());
    assert_eq!(ip_offset(&f), Some((22, ethertype::IPV4)));
    assert_eq!(m.l3_offset, 22);
    // An Ethernet pseudowire (first nibble 0 after a control word) is not IP.
    let mut pw = f[..22].to_vec();
    pw.extend_from_slice(&[0, 0, 0, 0]);
    assert_eq!(
        parse_ethernet(&pw).unwrap().l3,
        L3::Other(ethertype::MPLS_UNICAST)
    );
}

#[test]
fn ip_offset_agrees_with_the_parser_on_plain_and_tagged_frames() {
    let spec = BuildSpec::udp(a4(1), 1, a4(2), 2).with_payload(4);
    assert_eq!(ip_offset(&eth(&spec)), Some((14, ethertype::IPV4)));
    assert_eq!(parse_ethernet(&eth(&spec)).unwrap().l3_offset, 14);
    assert_eq!(parse_ip(&eth(&spec)[14..]).unwrap().l3_offset, 0);
    let tagged = BuildSpec {
        vlans: vec![Vlan {
            tpid: ethertype::QINQ,
            vid: 10,
            pcp: 0,
        }],
        ..spec
    };
    assert_eq!(ip_offset(&eth(&tagged)), Some((18, ethertype::IPV4)));
    assert_eq!(ip_offset(&[0u8; 10]), None);
    // The parser records the same offset, once, in the packet's metadata.
    assert_eq!(parse_ethernet(&eth(&tagged)).unwrap().l3_offset, 18);
}
