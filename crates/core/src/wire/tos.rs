//! Rewriting the TOS byte (IPv4) or traffic class (IPv6) of a frame in place: the one writer
//! of DSCP and ECN bits, for ECN marking ([`set_ce`]: CoDel, COBALT, RED) and DSCP washing
//! ([`wash_dscp`]: CAKE's `wash`, a policy's `wash`).
//!
//! The IP header is found where the parser finds it ([`super::ip_offset`]: past VLAN tags and a
//! PPPoE or MPLS encapsulation). IPv4's header checksum is recomputed over the header (RFC 1071;
//! at most 60 bytes); IPv6 has none. The traffic class of IPv6 spans the low nibble of the first
//! byte and the high nibble of the second (RFC 8200 §3). A frame too short for its header, or
//! not IP, is left alone.

use super::{checksum, ethertype, ip_offset};

/// Replace the frame's TOS / traffic class `t` with `f(t)` when `f` gives one; the new value
/// when the frame was rewritten.
pub fn rewrite_tos(frame: &mut [u8], f: impl FnOnce(u8) -> Option<u8>) -> Option<u8> {
    let (ip, et) = ip_offset(frame)?;
    match et {
        ethertype::IPV4 => {
            let hlen = usize::from(*frame.get(ip)? & 0x0f) * 4;
            if hlen < 20 || frame.len() < ip + hlen {
                return None;
            }
            let new = f(frame[ip + 1])?;
            frame[ip + 1] = new;
            frame[ip + 10] = 0;
            frame[ip + 11] = 0;
            let sum = checksum::internet(&frame[ip..ip + hlen]);
            frame[ip + 10..ip + 12].copy_from_slice(&sum.to_be_bytes());
            Some(new)
        }
        ethertype::IPV6 => {
            if frame.len() < ip + 40 {
                return None;
            }
            let old = (frame[ip] << 4) | (frame[ip + 1] >> 4);
            let new = f(old)?;
            frame[ip] = (frame[ip] & 0xf0) | (new >> 4);
            frame[ip + 1] = (frame[ip + 1] & 0x0f) | (new << 4);
            Some(new)
        }
        _ => None,
    }
}

/// Set ECN to CE if the packet is ECN-capable (ECT(0) or ECT(1)); `true` if it was marked.
pub fn set_ce(frame: &mut [u8]) -> bool {
    rewrite_tos(frame, |t| matches!(t & 3, 1 | 2).then_some(t | 3)).is_some()
}

/// Clear the DSCP, keeping the ECN bits; `true` if the DSCP was not already 0.
pub fn wash_dscp(frame: &mut [u8]) -> bool {
    rewrite_tos(frame, |t| (t >> 2 != 0).then_some(t & 3)).is_some()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{build_ethernet, parse_ethernet, BuildSpec, Ipv4Packet};

    fn frame(v6: bool, tos: u8) -> Vec<u8> {
        let spec = if v6 {
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
        .with_tos(tos);
        let mut b = Vec::new();
        build_ethernet(&mut b, &spec);
        b
    }

    #[test]
    fn wash_clears_the_dscp_and_keeps_ecn_and_a_valid_checksum() {
        for v6 in [false, true] {
            let mut f = frame(v6, 0xb8 | 2);
            assert!(wash_dscp(&mut f));
            let m = parse_ethernet(&f).unwrap_or_else(|e| panic!("{e:?}"));
            assert_eq!((m.dscp(), m.ecn()), (0, 2), "v6 {v6}");
            if !v6 {
                let ip = Ipv4Packet::new_checked(&f[14..]).unwrap_or_else(|e| panic!("{e:?}"));
                assert!(ip.verify_checksum());
            }
            // Nothing left to wash.
            assert!(!wash_dscp(&mut f));
        }
    }

    #[test]
    fn ce_is_set_only_on_ecn_capable_packets() {
        for v6 in [false, true] {
            let mut f = frame(v6, 0x28 | 1);
            assert!(set_ce(&mut f));
            let m = parse_ethernet(&f).unwrap_or_else(|e| panic!("{e:?}"));
            assert_eq!((m.dscp(), m.ecn()), (0x0a, 3));
            let mut not_ect = frame(v6, 0x28);
            assert!(!set_ce(&mut not_ect));
        }
    }

    #[test]
    fn short_or_non_ip_frames_are_left_alone() {
        let mut arp = vec![0u8; 42];
        arp[12..14].copy_from_slice(&0x0806u16.to_be_bytes());
        assert!(!wash_dscp(&mut arp));
        let mut cut = frame(false, 0xb8);
        cut.truncate(20);
        assert!(!wash_dscp(&mut cut));
    }
}
