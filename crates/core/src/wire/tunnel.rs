//! Encapsulations between Ethernet and IP that access and core networks put on every packet:
//! PPPoE sessions (DSL and many FTTH links) and MPLS label stacks. Without them a shaper sees an
//! EtherType it does not know and lets the packet pass unclassified and unshaped.
//!
//! ```text
//! PPPoE session (EtherType 0x8864, RFC 2516 §4, §7):
//!   | ver 4 bits = 1 | type 4 bits = 1 | code (1) = 0x00 | session id (2) | length (2) |
//!   | PPP protocol (2, RFC 1661 §2): 0x0021 IPv4 (RFC 1332), 0x0057 IPv6 (RFC 5072) | ...
//!   `length` counts the PPP payload, protocol field included.
//!
//! MPLS (EtherType 0x8847 unicast, 0x8848 multicast, RFC 3032 §2.1), one or more entries of:
//!   | label 20 bits | traffic class 3 bits | bottom of stack 1 bit | TTL 8 bits |
//!   after the entry whose bottom-of-stack bit is set: the payload, which carries no type;
//!   its first nibble tells IPv4 (4) from IPv6 (6) as label-switching routers do (RFC 3032 §2.2
//!   leaves it to the label's binding; the version nibble is what Linux's flow dissector and
//!   ECMP hashing in practice look at). Anything else (a pseudowire control word, 0) is left as
//!   `L3::Other` with the MPLS EtherType.
//! ```
//!
//! Principles, as for the other layers of [`super`]: views over the caller's bytes, no copy, no
//! allocation, no panic; work bounded by [`MAX_MPLS_LABELS`]. Errors are reserved for headers
//! that cannot be trusted (cut short, too deep a stack); a PPPoE session carrying something
//! other than IP (LCP, IPCP, …) is a valid frame of another protocol, not an error. PPPoE's
//! discovery stage (0x8863) has no IP inside and stays `L3::Other`.

use super::bytes::{be16, be32, clamped, u8_at};
use super::ParseError;

/// PPPoE session header length (before the PPP protocol field).
pub const PPPOE_HEADER_LEN: usize = 6;
/// PPP protocol field length (PPPoE does not compress it, RFC 2516 §7).
pub const PPP_PROTOCOL_LEN: usize = 2;
/// PPP protocol numbers that carry IP.
pub const PPP_IPV4: u16 = 0x0021;
pub const PPP_IPV6: u16 = 0x0057;
/// MPLS label stack entry length.
pub const MPLS_ENTRY_LEN: usize = 4;
/// Deepest label stack parsed; deeper stacks are an error (counted by the router, not forwarded
/// unshaped). Real networks rarely use more than 3–4 labels (VPN + transport + FRR + entropy).
pub const MAX_MPLS_LABELS: usize = 8;

/// What a PPPoE session frame carries.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum PppPayload<'a> {
    Ipv4(&'a [u8]),
    Ipv6(&'a [u8]),
    /// LCP, IPCP, CHAP, …: the PPP protocol number.
    Other(u16),
}

/// A PPPoE session frame's payload (after the Ethernet header and any VLAN tags).
pub fn pppoe_session(buf: &[u8]) -> Result<PppPayload<'_>, ParseError> {
    if buf.len() < PPPOE_HEADER_LEN + PPP_PROTOCOL_LEN {
        return Err(ParseError::TruncatedPppoe);
    }
    let ver_type = u8_at(buf, 0);
    let code = u8_at(buf, 1);
    if ver_type != 0x11 || code != 0 {
        return Err(ParseError::BadPppoe);
    }
    // `length` bounds the payload: bytes after it are Ethernet padding.
    let len = usize::from(be16(buf, 4));
    if len < PPP_PROTOCOL_LEN || PPPOE_HEADER_LEN + len > buf.len() {
        return Err(ParseError::BadPppoe);
    }
    let inner = clamped(
        buf,
        PPPOE_HEADER_LEN + PPP_PROTOCOL_LEN,
        PPPOE_HEADER_LEN + len,
    );
    Ok(match be16(buf, PPPOE_HEADER_LEN) {
        PPP_IPV4 => PppPayload::Ipv4(inner),
        PPP_IPV6 => PppPayload::Ipv6(inner),
        other => PppPayload::Other(other),
    })
}

/// What follows an MPLS label stack.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct MplsPayload<'a> {
    /// The top (outermost) label.
    pub top_label: u32,
    /// Entries in the stack.
    pub depth: usize,
    /// Everything after the bottom-of-stack entry.
    pub payload: &'a [u8],
}

/// Walks an MPLS label stack to its bottom.
pub fn mpls_stack(buf: &[u8]) -> Result<MplsPayload<'_>, ParseError> {
    let mut at = 0;
    let mut top = None;
    for depth in 1..=MAX_MPLS_LABELS {
        if buf.len() < at + MPLS_ENTRY_LEN {
            return Err(ParseError::TruncatedMpls);
        }
        let entry = be32(buf, at);
        top = top.or(Some(entry >> 12));
        at += MPLS_ENTRY_LEN;
        if entry & 0x100 != 0 {
            return Ok(MplsPayload {
                top_label: top.unwrap_or(0),
                depth,
                payload: clamped(buf, at, usize::MAX),
            });
        }
    }
    Err(ParseError::TooManyMplsLabels)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pppoe_session_with_ipv4_and_padding() {
        // ver/type 0x11, code 0, session 0x1234, length 2 + 3, PPP IPv4, 3 bytes, 2 padding.
        let f = [
            0x11, 0, 0x12, 0x34, 0, 5, 0x00, 0x21, 0x45, 0xaa, 0xbb, 0, 0,
        ];
        assert_eq!(pppoe_session(&f), Ok(PppPayload::Ipv4(&[0x45, 0xaa, 0xbb])));
        let mut v6 = f;
        v6[7] = 0x57;
        assert_eq!(
            pppoe_session(&v6),
            Ok(PppPayload::Ipv6(&[0x45, 0xaa, 0xbb]))
        );
        let mut lcp = f;
        (lcp[6], lcp[7]) = (0xc0, 0x21);
        assert_eq!(pppoe_session(&lcp), Ok(PppPayload::Other(0xc021)));
    }

    #[test]
    fn pppoe_bad_headers_are_errors() {
        assert_eq!(
            pppoe_session(&[0x11, 0, 0, 1, 0, 2, 0]),
            Err(ParseError::TruncatedPppoe)
        );
        let ok = [0x11, 0, 0, 1, 0, 2, 0x00, 0x21];
        assert!(pppoe_session(&ok).is_ok());
        let mut bad = ok;
        bad[0] = 0x21;
        assert_eq!(pppoe_session(&bad), Err(ParseError::BadPppoe));
        bad = ok;
        bad[1] = 0x09; // a discovery code in a session frame
        assert_eq!(pppoe_session(&bad), Err(ParseError::BadPppoe));
        bad = ok;
        bad[5] = 9; // longer than the frame
        assert_eq!(pppoe_session(&bad), Err(ParseError::BadPppoe));
        bad = ok;
        bad[5] = 1; // shorter than the protocol field
        assert_eq!(pppoe_session(&bad), Err(ParseError::BadPppoe));
    }

    #[test]
    fn mpls_stack_to_its_bottom() {
        // Label 16 (not bottom), label 0xfffff (bottom, TC 5, TTL 64), then an IPv6 nibble.
        let f = [0x00, 0x01, 0x00, 0x40, 0xff, 0xff, 0xfb, 0x40, 0x60, 0x00];
        let m = mpls_stack(&f).unwrap();
        assert_eq!(
            (m.top_label, m.depth, m.payload),
            (16, 2, &[0x60, 0x00][..])
        );
        assert_eq!(mpls_stack(&f[..6]), Err(ParseError::TruncatedMpls));
        let deep: Vec<u8> = (0..=MAX_MPLS_LABELS)
            .flat_map(|_| [0, 0x01, 0, 0x40])
            .collect();
        assert_eq!(mpls_stack(&deep), Err(ParseError::TooManyMplsLabels));
        let mut at_max = deep[..MAX_MPLS_LABELS * 4].to_vec();
        let last = at_max.len() - 2;
        at_max[last] |= 1;
        assert_eq!(mpls_stack(&at_max).map(|m| m.depth), Ok(MAX_MPLS_LABELS));
    }
}
