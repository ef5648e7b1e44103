//! Rewriting the TOS byte (IPv4) or traffic class (IPv6) of a parsed frame in place: the one
//! writer of DSCP and ECN bits, for ECN marking ([`set_ce`]: CoDel, COBALT, RED) and DSCP
//! washing ([`wash_dscp`]: CAKE's `wash`, a policy's `wash`).
//!
//! The IP header is where the parser found it ([`PacketMeta::l3_offset`]: past VLAN tags and a
//! PPPoE or MPLS encapsulation), so the encapsulation is not walked again; the bytes are written
//! through the header's writable views ([`Ipv4Packet::set_tos`], which refills the header
//! checksum, RFC 1071; [`Ipv6Packet::set_traffic_class`], whose traffic class spans the low
//! nibble of the first byte and the high nibble of the second, RFC 8200 §3, and which has no
//! checksum). A frame too short for its header, or not IP, is left alone.

use super::{Ipv4Packet, Ipv6Packet};
use crate::packet::{PacketMeta, L3};

/// Replace the TOS / traffic class `t` of `frame`'s IP header (parsed into `meta`) with `f(t)`
/// when `f` gives one; the new value when the header was rewritten.
pub fn rewrite_tos(
    frame: &mut [u8],
    meta: &PacketMeta,
    f: impl FnOnce(u8) -> Option<u8>,
) -> Option<u8> {
    let ip = frame.get_mut(usize::from(meta.l3_offset)..)?;
    match meta.l3 {
        L3::Ipv4 => {
            let mut p = Ipv4Packet::new_checked(ip).ok()?;
            let new = f(p.tos())?;
            p.set_tos(new);
            Some(new)
        }
        L3::Ipv6 => {
            let mut p = Ipv6Packet::new_checked(ip).ok()?;
            let new = f(p.traffic_class())?;
            p.set_traffic_class(new);
            Some(new)
        }
        L3::Other(_) => None,
    }
}

/// Set ECN to CE if the packet is ECN-capable (ECT(0) or ECT(1)); `true` if it was marked.
pub fn set_ce(frame: &mut [u8], meta: &PacketMeta) -> bool {
    rewrite_tos(frame, meta, |t| matches!(t & 3, 1 | 2).then_some(t | 3)).is_some()
}

/// Clear the DSCP, keeping the ECN bits; `true` if the DSCP was not already 0.
pub fn wash_dscp(frame: &mut [u8], meta: &PacketMeta) -> bool {
    rewrite_tos(frame, meta, |t| (t >> 2 != 0).then_some(t & 3)).is_some()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{build_ethernet, parse_ethernet, BuildSpec, Vlan};

    fn spec(v6: bool, tos: u8) -> BuildSpec {
        if v6 {
            let a: std::net::Ipv6Addr = "2001:db8::1"
                .parse()
                .unwrap_or(std::net::Ipv6Addr::LOCALHOST);
            let b: std::net::Ipv6Addr = "2001:db8::2"
                .parse()
                .unwrap_or(std::net::Ipv6Addr::LOCALHOST);
            BuildSpec::udp(a, 1000, b, 2000)
        } else {
            BuildSpec::udp([10, 0, 0, 1], 1000, [10, 0, 0, 2], 2000)
        }
        .with_tos(tos)
    }

    /// A frame of `spec` and what the parser made of it.
    fn parsed(spec: &BuildSpec) -> (Vec<u8>, PacketMeta) {
        let mut b = Vec::new();
        build_ethernet(&mut b, spec);
        let m = parse_ethernet(&b).unwrap_or_else(|e| panic!("{e:?}"));
        (b, m)
    }

    #[test]
    fn wash_clears_the_dscp_and_keeps_ecn_and_a_valid_checksum() {
        for v6 in [false, true] {
            let (mut f, m) = parsed(&spec(v6, 0xb8 | 2));
            assert!(wash_dscp(&mut f, &m));
            let after = parse_ethernet(&f).unwrap_or_else(|e| panic!("{e:?}"));
            assert_eq!((after.dscp(), after.ecn()), (0, 2), "v6 {v6}");
            if !v6 {
                let ip = Ipv4Packet::new_checked(&f[14..]).unwrap_or_else(|e| panic!("{e:?}"));
                assert!(ip.verify_checksum());
            }
            // Nothing left to wash.
            assert!(!wash_dscp(&mut f, &after));
        }
    }

    #[test]
    fn ce_is_set_only_on_ecn_capable_packets() {
        for v6 in [false, true] {
            let (mut f, m) = parsed(&spec(v6, 0x28 | 1));
            assert!(set_ce(&mut f, &m));
            let after = parse_ethernet(&f).unwrap_or_else(|e| panic!("{e:?}"));
            assert_eq!((after.dscp(), after.ecn()), (0x0a, 3));
            let (mut not_ect, m) = parsed(&spec(v6, 0x28));
            assert!(!set_ce(&mut not_ect, &m));
        }
    }

    #[test]
    fn the_header_is_written_at_the_parsers_offset_behind_vlan_tags() {
        let tagged = spec(false, 0xb8 | 1).with_vlan(Vlan::dot1q(7));
        let (mut f, m) = parsed(&tagged);
        assert_eq!(m.l3_offset, 18);
        let before = f.clone();
        assert!(wash_dscp(&mut f, &m));
        // Only the TOS byte and the checksum of the IP header behind the tag changed.
        let changed: Vec<usize> = (0..f.len()).filter(|&i| f[i] != before[i]).collect();
        assert!(
            changed.iter().all(|&i| [19, 28, 29].contains(&i)),
            "{changed:?}"
        );
        let after = parse_ethernet(&f).unwrap_or_else(|e| panic!("{e:?}"));
        assert_eq!((after.dscp(), after.ecn()), (0, 1));
        let ip = Ipv4Packet::new_checked(&f[18..]).unwrap_or_else(|e| panic!("{e:?}"));
        assert!(ip.verify_checksum());
    }

    #[test]
    fn short_or_non_ip_frames_are_left_alone() {
        let mut arp = vec![0u8; 42];
        arp[12..14].copy_from_slice(&0x0806u16.to_be_bytes());
        let m = parse_ethernet(&arp).unwrap_or_else(|e| panic!("{e:?}"));
        assert!(!wash_dscp(&mut arp, &m));
        assert_eq!(arp[14..], [0u8; 28]);
        // Bytes cut after parsing (a header no longer all there) are not written.
        let (mut cut, m) = parsed(&spec(false, 0xb8));
        cut.truncate(20);
        let before = cut.clone();
        assert!(!wash_dscp(&mut cut, &m));
        assert_eq!(cut, before);
    }
}
