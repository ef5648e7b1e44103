//! A frame that owns its bytes, and its parsed description: parsed once ([`parse_frame_keyed`]),
//! charged in one place ([`charged_len`]), its TOS / traffic class rewritten (ECN marking, DSCP
//! washing) by the wire's one header writer (`linkshare_core::wire::tos`) where the parser
//! found the IP header.

use linkshare_core::linklayer::LinkLayer;
use linkshare_core::packet::{Fragment, TcpInfo, L3};
use linkshare_core::wire::{self, ParseError};
use linkshare_core::{Packet, PacketMeta};

/// One Ethernet frame travelling through the shaper.
#[derive(Clone, Debug)]
pub struct Frame {
    pub bytes: Vec<u8>,
    pub meta: PacketMeta,
}

/// What the router does with a received frame.
#[derive(Debug)]
pub enum Parsed {
    /// An IPv4/IPv6 packet for the scheduler.
    Ip(Frame),
    /// Not IP (ARP, LLDP, custom EtherTypes, …): shaped in the default class, passed or dropped
    /// as the policy's `non_ip` says. Its charged length is the frame's, as for IP.
    Other(Frame),
    /// Could not be parsed: counted by reason and dropped.
    Malformed(ParseError),
}

/// The bytes a frame of `frame_len` bytes is charged: its whole length as it will leave
/// (Ethernet header and VLAN tags included, no FCS or preamble) — the bytes the kernel's HTB
/// charges too, so a class's rate means the same on both — through the policy's link layer
/// (tc-stab's overhead, mpu and cell size). The one place a frame's `meta.len` is decided.
pub fn charged_len(frame_len: usize, link: &LinkLayer) -> u32 {
    link.size(u32::try_from(frame_len).unwrap_or(u32::MAX))
}

/// Parse a received frame, with an unkeyed flow hash and no link layer: tests and tools; the
/// shaper uses [`parse_frame_keyed`].
pub fn parse_frame(bytes: Vec<u8>) -> Parsed {
    parse_frame_keyed(bytes, 0, &LinkLayer::default())
}

/// Parse a received frame once: its metadata records where the IP header is
/// (`meta.l3_offset`, for [`Frame::mark_ce`], [`Frame::wash_dscp`] and [`Frame::tcp`]) and what it is charged
/// ([`charged_len`] under `link`). The flow hash is keyed by `key` (the shaper's, drawn at
/// random at start: [`crate::Options::flow_key`]), so that the per-flow queues a frame lands in
/// cannot be predicted from outside. Classification is the scheduler's (or, with workers, the
/// steering's), not this function's.
pub fn parse_frame_keyed(bytes: Vec<u8>, key: u64, link: &LinkLayer) -> Parsed {
    match wire::parse_ethernet_keyed(&bytes, key) {
        Ok(mut meta) => {
            meta.len = charged_len(bytes.len(), link);
            let ip = !matches!(meta.l3, L3::Other(_));
            let f = Frame { bytes, meta };
            if ip {
                Parsed::Ip(f)
            } else {
                Parsed::Other(f)
            }
        }
        Err(e) => Parsed::Malformed(e),
    }
}

impl Packet for Frame {
    fn meta(&self) -> &PacketMeta {
        &self.meta
    }
    fn meta_mut(&mut self) -> Option<&mut PacketMeta> {
        Some(&mut self.meta)
    }
    /// Read from the frame's bytes when asked (CAKE's ACK filter), as the kernel reads a
    /// queued skb's header: nothing is kept per frame.
    fn tcp(&self) -> Option<TcpInfo> {
        if self.meta.proto != wire::proto::TCP || self.meta.frag != Fragment::None {
            return None;
        }
        wire::tcp_info_at(&self.bytes, &self.meta)
    }
    fn mark_ce(&mut self) -> bool {
        if !matches!(self.meta.ecn(), 1 | 2) {
            return false;
        }
        if wire::set_ce(&mut self.bytes, &self.meta) {
            self.meta.tos |= 3;
            true
        } else {
            false
        }
    }
    fn wash_dscp(&mut self) -> bool {
        if self.meta.dscp() != 0 && wire::wash_dscp(&mut self.bytes, &self.meta) {
            self.meta.tos &= 3;
            true
        } else {
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use linkshare_core::linklayer::Framing;
    use linkshare_core::wire::ethertype;

    fn ipv4_udp(tos: u8) -> Vec<u8> {
        let mut f = vec![0u8; 14 + 28];
        f[12] = 0x08;
        f[13] = 0x00;
        let ip = &mut f[14..];
        ip[0] = 0x45;
        ip[1] = tos;
        ip[2..4].copy_from_slice(&28u16.to_be_bytes());
        ip[8] = 64;
        ip[9] = 17;
        ip[12..16].copy_from_slice(&[10, 0, 0, 1]);
        ip[16..20].copy_from_slice(&[10, 0, 0, 2]);
        let sum = wire::checksum::internet(&ip[..20]);
        ip[10..12].copy_from_slice(&sum.to_be_bytes());
        ip[20..22].copy_from_slice(&1000u16.to_be_bytes());
        ip[22..24].copy_from_slice(&2000u16.to_be_bytes());
        ip[24..26].copy_from_slice(&8u16.to_be_bytes());
        f
    }

    /// A UDP frame 10.0.0.1:`sport` → 10.0.0.2:2000.
    fn udp_from(sport: u16) -> Vec<u8> {
        let mut f = ipv4_udp(0);
        f[34..36].copy_from_slice(&sport.to_be_bytes());
        f
    }

    fn bucket(bytes: Vec<u8>, key: u64) -> u32 {
        match parse_frame_keyed(bytes, key, &LinkLayer::default()) {
            Parsed::Ip(f) => f.meta.flow_hash % 1024,
            _ => panic!("not ip"),
        }
    }

    /// An attacker who knows the unkeyed hash picks a source port whose flow lands in a victim
    /// flow's fq_codel bucket (1024 buckets). Under the shaper's random keys the same pair of
    /// flows shares a bucket only by chance (1 in 1024).
    #[test]
    fn a_source_port_chosen_offline_does_not_share_a_bucket_under_a_key() {
        let victim = 1000;
        let crafted = (1001..=u16::MAX)
            .find(|p| bucket(udp_from(*p), 0) == bucket(udp_from(victim), 0))
            .unwrap_or_else(|| panic!("no colliding port in the whole range"));
        let mut shared = 0;
        for i in 0..200u64 {
            let key = 0x9e37_79b9_7f4a_7c15_u64.wrapping_mul(i + 1);
            if bucket(udp_from(crafted), key) == bucket(udp_from(victim), key) {
                shared += 1;
            }
        }
        assert!(
            shared <= 3,
            "port {crafted} shares the victim's bucket under {shared} of 200 keys"
        );
        // The key changes nothing else: the same flow stays in one bucket under one key.
        assert_eq!(bucket(udp_from(crafted), 7), bucket(udp_from(crafted), 7));
    }

    #[test]
    fn tcp_facts_are_read_from_the_bytes() {
        let mut bytes = Vec::new();
        let spec = wire::BuildSpec::tcp([10, 0, 0, 1], 40000, [10, 0, 0, 2], 443);
        wire::build_ethernet(&mut bytes, &spec);
        let Parsed::Ip(f) = parse_frame(bytes) else {
            panic!("not ip")
        };
        let t = f.tcp().unwrap();
        assert_eq!((t.flags, t.payload), (TcpInfo::ACK | TcpInfo::PSH, 0));
        let Parsed::Ip(u) = parse_frame(ipv4_udp(0)) else {
            panic!("not ip")
        };
        assert_eq!(u.tcp(), None);
    }

    #[test]
    fn mark_ce_sets_ipv4_ce_and_fixes_checksum() {
        let Parsed::Ip(mut f) = parse_frame(ipv4_udp(0xb8 | 2)) else {
            panic!("not ip")
        };
        assert!(f.mark_ce());
        assert_eq!(f.bytes[15] & 3, 3);
        assert_eq!(f.meta.ecn(), 3);
        assert_eq!(
            wire::checksum::internet(&f.bytes[14..34]),
            0,
            "checksum must verify"
        );
        // DSCP kept.
        assert_eq!(f.bytes[15] >> 2, 0xb8 >> 2);
    }

    #[test]
    fn pppoe_frames_are_shaped_marked_and_washed_inside() {
        // The same UDP packet inside a PPPoE session (RFC 2516): 8 bytes between the Ethernet
        // header and IP.
        let plain = ipv4_udp(0xb8 | 2);
        let mut f = plain[..12].to_vec();
        f.extend_from_slice(&wire::ethertype::PPPOE_SESSION.to_be_bytes());
        f.extend_from_slice(&[0x11, 0x00, 0x00, 0x01, 0x00, 30, 0x00, 0x21]);
        f.extend_from_slice(&plain[14..]);
        let Parsed::Ip(mut p) = parse_frame(f) else {
            panic!("a PPPoE session frame carrying IPv4 is not shaped")
        };
        assert_eq!((p.meta.src_port, p.meta.dst_port), (1000, 2000));
        // Charged its whole length, PPPoE header included.
        assert_eq!(p.len(), 14 + 8 + 28);
        assert!(p.mark_ce());
        assert_eq!(p.bytes[23] & 3, 3, "CE in the inner IP header");
        assert_eq!(wire::checksum::internet(&p.bytes[22..42]), 0);
        // Washed by the same writer at the same offset: DSCP cleared, CE kept, in the header and
        // in the metadata the classifier reads.
        assert!(p.wash_dscp());
        assert_eq!((p.bytes[23], p.meta.tos), (3, 3));
        assert_eq!(wire::checksum::internet(&p.bytes[22..42]), 0);
        assert!(!p.wash_dscp(), "nothing left to wash");
    }

    #[test]
    fn frames_are_charged_their_length_on_the_wire() {
        // 14-byte Ethernet header + 28-byte IP packet, padded to the 60-byte minimum.
        let mut f = ipv4_udp(0);
        let Parsed::Ip(p) = parse_frame(f.clone()) else {
            panic!("not ip")
        };
        assert_eq!(p.len(), 42);
        f.resize(60, 0);
        let Parsed::Ip(p) = parse_frame(f) else {
            panic!("not ip")
        };
        assert_eq!(p.len(), 60);
    }

    /// A frame is charged once, at parse, under the policy's link layer; the parser recorded
    /// where its IP header is, behind a VLAN tag too, and marking writes there.
    #[test]
    fn parsed_once_charged_under_the_link_layer_and_marked_where_the_header_is() {
        let plain = ipv4_udp(0xb8 | 1);
        let mut tagged = plain[..12].to_vec();
        tagged.extend_from_slice(&ethertype::VLAN.to_be_bytes());
        tagged.extend_from_slice(&[0x00, 0x0a]);
        tagged.extend_from_slice(&plain[12..]);
        let atm = LinkLayer {
            overhead: 10,
            mpu: 0,
            framing: Framing::Atm,
        };
        let Parsed::Ip(mut f) = parse_frame_keyed(tagged, 0, &atm) else {
            panic!("a tagged IPv4 frame is IP")
        };
        assert_eq!(f.meta.l3_offset, 18);
        // 46 bytes + 10 of overhead = 56: two ATM cells of 53 bytes.
        assert_eq!(f.meta.len, 106);
        assert_eq!(f.meta.len, charged_len(f.bytes.len(), &atm));
        assert!(f.mark_ce());
        assert_eq!(f.bytes[19] & 3, 3, "CE in the header behind the tag");
        assert_eq!(f.bytes[19] >> 2, 0xb8 >> 2, "DSCP kept");
        assert_eq!(wire::checksum::internet(&f.bytes[18..38]), 0);
    }

    #[test]
    fn mark_ce_refuses_not_ect() {
        let Parsed::Ip(mut f) = parse_frame(ipv4_udp(0)) else {
            panic!("not ip")
        };
        let before = f.bytes.clone();
        assert!(!f.mark_ce());
        assert_eq!(f.bytes, before);
    }

    #[test]
    fn mark_ce_ipv6() {
        let mut f = vec![0u8; 14 + 40];
        f[12] = 0x86;
        f[13] = 0xdd;
        f[14] = 0x60;
        f[15] = 0x10; // ECN = 01 (ECT(1))
        f[18] = 0;
        f[19] = 0;
        f[20] = 59;
        let Parsed::Ip(mut fr) = parse_frame(f) else {
            panic!("not ip")
        };
        assert!(fr.mark_ce());
        assert_eq!((fr.bytes[15] >> 4) & 3, 3);
    }

    #[test]
    fn arp_passes_and_malformed_is_classified() {
        let mut arp = vec![0u8; 42];
        arp[12] = 0x08;
        arp[13] = 0x06;
        assert!(matches!(parse_frame(arp), Parsed::Other(_)));
        let mut bad = ipv4_udp(0);
        bad[14] = 0x43; // IHL 3
        assert!(matches!(
            parse_frame(bad),
            Parsed::Malformed(ParseError::BadIhl)
        ));
        assert!(matches!(parse_frame(vec![0u8; 5]), Parsed::Malformed(_)));
        let mut short = ipv4_udp(0);
        short[16..18].copy_from_slice(&400u16.to_be_bytes());
        assert!(matches!(
            parse_frame(short),
            Parsed::Malformed(ParseError::BadIpv4TotalLength)
        ));
    }
}
