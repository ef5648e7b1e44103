//! Encapsulations between Ethernet and IP that a shaper on a DSL or provider link meets: PPPoE
//! sessions and MPLS label stacks. The IP packet inside is classified like any other; frames
//! that carry no IP (PPP's LCP/IPCP/…, PPPoE discovery, an MPLS pseudowire) stay `L3::Other` and
//! pass unshaped, as before.
//!
//! * PPPoE session stage (RFC 2516 §4, §5.2): EtherType 0x8864, then a 6-byte header — VER=1 and
//!   TYPE=1 in one byte (0x11), CODE=0x00, SESSION_ID, LENGTH — then the PPP protocol field
//!   (RFC 1661 §2): 0x0021 IPv4 (RFC 1332), 0x0057 IPv6 (RFC 5072). The IP packet starts 8 bytes
//!   after the EtherType.
//! * MPLS (RFC 3032 §2.1): EtherType 0x8847 (unicast) or 0x8848 (multicast), then 4-byte label
//!   stack entries (label 20 bits, TC 3, S 1, TTL 8) until the one with the bottom-of-stack bit S.
//!   The label stack does not say what follows; as label-switching routers do for load balancing
//!   (RFC 4928 §2), the first nibble after the stack decides: 4 is IPv4, 6 is IPv6, anything else
//!   (a pseudowire control word, an Ethernet pseudowire) is not IP.
//!
//! Nothing here panics or allocates: a header cut short is "not IP" and the frame passes as
//! `L3::Other`; an IP header inside that is malformed is reported by the IP parser as for a bare
//! frame.

use super::ethertype;

/// PPP protocol numbers of IP.
pub const PPP_IPV4: u16 = 0x0021;
pub const PPP_IPV6: u16 = 0x0057;
/// PPPoE session header plus the PPP protocol field.
pub const PPPOE_IP_OFFSET: usize = 8;
/// Most MPLS label stack entries walked before giving up.
pub const MAX_MPLS_LABELS: usize = 8;

/// Where the IP packet inside an encapsulated `payload` (what follows `ethertype`) starts, and
/// its EtherType (IPv4 or IPv6). `None` when `ethertype` is not an encapsulation of IP.
pub fn inner_ip(ethertype: u16, payload: &[u8]) -> Option<(usize, u16)> {
    match ethertype {
        ethertype::PPPOE_SESSION => {
            let (&vt, &code) = (payload.first()?, payload.get(1)?);
            if vt != 0x11 || code != 0 {
                return None;
            }
            let proto = u16::from_be_bytes([*payload.get(6)?, *payload.get(7)?]);
            let et = match proto {
                PPP_IPV4 => ethertype::IPV4,
                PPP_IPV6 => ethertype::IPV6,
                _ => return None,
            };
            Some((PPPOE_IP_OFFSET, et))
        }
        ethertype::MPLS_UNICAST | ethertype::MPLS_MULTICAST => {
            for i in 0..MAX_MPLS_LABELS {
                let bottom = payload.get(4 * i + 2)? & 1 == 1;
                if bottom {
                    let off = 4 * (i + 1);
                    return match payload.get(off)? >> 4 {
                        4 => Some((off, ethertype::IPV4)),
                        6 => Some((off, ethertype::IPV6)),
                        _ => None,
                    };
                }
            }
            None
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pppoe_session_carries_ipv4_and_ipv6() {
        let mut p = vec![0x11, 0x00, 0x12, 0x34, 0x00, 0x16, 0x00, 0x21, 0x45];
        assert_eq!(inner_ip(0x8864, &p), Some((8, ethertype::IPV4)));
        p[7] = 0x57;
        assert_eq!(inner_ip(0x8864, &p), Some((8, ethertype::IPV6)));
        // LCP (0xc021) is not IP; nor is a discovery frame (0x8863) or a bad version.
        p[6] = 0xc0;
        p[7] = 0x21;
        assert_eq!(inner_ip(0x8864, &p), None);
        assert_eq!(inner_ip(0x8863, &[0x11, 0x09, 0, 0, 0, 0, 0, 0x21]), None);
        assert_eq!(inner_ip(0x8864, &[0x21, 0x00, 0, 0, 0, 2, 0, 0x21]), None);
        // Cut short.
        assert_eq!(inner_ip(0x8864, &[0x11, 0x00, 0, 0]), None);
    }

    #[test]
    fn mpls_stack_ends_at_the_bottom_of_stack_bit() {
        // Two labels, the second with S=1, then an IPv4 header.
        let p = [0x00, 0x01, 0x00, 0x40, 0x00, 0x02, 0x01, 0x40, 0x45, 0x00];
        assert_eq!(inner_ip(0x8847, &p), Some((8, ethertype::IPV4)));
        let p6 = [0x00, 0x01, 0x01, 0x40, 0x60, 0x00];
        assert_eq!(inner_ip(0x8848, &p6), Some((4, ethertype::IPV6)));
        // A pseudowire control word (first nibble 0) is not IP.
        assert_eq!(inner_ip(0x8847, &[0, 1, 1, 64, 0x00, 0, 0, 0]), None);
        // No bottom of stack within the bytes, or within MAX_MPLS_LABELS entries.
        assert_eq!(inner_ip(0x8847, &[0, 1, 0, 64, 0, 2, 0, 64]), None);
        assert_eq!(inner_ip(0x8847, &[0u8; 4 * MAX_MPLS_LABELS + 8]), None);
    }
}
