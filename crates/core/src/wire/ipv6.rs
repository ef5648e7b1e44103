//! IPv6 header view (RFC 8200) and the bounded extension-header walk.
//!
//! ```text
//! | ver (4) | traffic class (8) |             flow label (20)          |
//! |      payload length (16)    | next header (8) |  hop limit (8)     |
//! |                    source address (16 bytes)                       |
//! |                 destination address (16 bytes)                     |
//! ```
//!
//! Extension headers walked: hop-by-hop (0), routing (43), destination options (60) — length
//! `(hdr ext len + 1) × 8` —, fragment (44, 8 bytes) and AH (51, `(payload len + 2) × 4`). ESP (50),
//! No Next Header (59) and everything else end the walk and are the transport protocol.

use std::net::Ipv6Addr;

use super::bytes::{array_at, be16, be32, clamped, u8_at};
use super::{proto, ParseError};
use crate::packet::{Fragment, ParseIssue};

mod field {
    pub const VER_TC_FLOW: usize = 0;
    pub const LENGTH: usize = 4;
    pub const NXT_HDR: usize = 6;
    pub const HOP_LIMIT: usize = 7;
    pub const SRC: usize = 8;
    pub const DST: usize = 24;
    pub const PAYLOAD: usize = 40;

    // Within an extension header.
    pub const EXT_NXT_HDR: usize = 0;
    pub const EXT_LEN: usize = 1;
    // Within a fragment header.
    pub const FRAG_OFF_M: usize = 2;
    pub const FRAG_IDENT: usize = 4;
    pub const FRAG_LEN: usize = 8;
}

/// Length of the fixed IPv6 header.
pub const HEADER_LEN: usize = field::PAYLOAD;
/// Most extension headers the walk visits before giving up with [`ParseIssue::ExtensionChain`].
pub const MAX_EXT_HEADERS: usize = 8;

/// A view of an IPv6 packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ipv6Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Ipv6Packet<T> {
    /// Wraps `buffer` without checking it (accessors read missing bytes as zero).
    pub const fn new_unchecked(buffer: T) -> Self {
        Ipv6Packet { buffer }
    }

    /// Wraps `buffer` after [`check_len`](Self::check_len).
    pub fn new_checked(buffer: T) -> Result<Self, ParseError> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    /// Checks, in this order: at least 40 bytes ([`ParseError::TruncatedIpv6`]), version 6
    /// ([`ParseError::BadIpVersion`]), `40 + payload length ≤ bytes available`
    /// ([`ParseError::BadIpv6PayloadLength`]). Bytes beyond are allowed (padding).
    pub fn check_len(&self) -> Result<(), ParseError> {
        let len = self.buffer.as_ref().len();
        if len < HEADER_LEN {
            return Err(ParseError::TruncatedIpv6);
        }
        if self.version() != 6 {
            return Err(ParseError::BadIpVersion);
        }
        if HEADER_LEN + usize::from(self.payload_len()) > len {
            return Err(ParseError::BadIpv6PayloadLength);
        }
        Ok(())
    }

    fn data(&self) -> &[u8] {
        self.buffer.as_ref()
    }

    pub fn version(&self) -> u8 {
        u8_at(self.data(), field::VER_TC_FLOW) >> 4
    }

    /// Traffic class: DSCP in the upper six bits, ECN in the lower two.
    pub fn traffic_class(&self) -> u8 {
        (be16(self.data(), field::VER_TC_FLOW) >> 4) as u8
    }

    pub fn flow_label(&self) -> u32 {
        be32(self.data(), field::VER_TC_FLOW) & 0x000f_ffff
    }

    /// Length of everything after the fixed header (extension headers included).
    pub fn payload_len(&self) -> u16 {
        be16(self.data(), field::LENGTH)
    }

    /// Next header of the fixed header (first extension header or transport).
    pub fn next_header(&self) -> u8 {
        u8_at(self.data(), field::NXT_HDR)
    }

    pub fn hop_limit(&self) -> u8 {
        u8_at(self.data(), field::HOP_LIMIT)
    }

    pub fn src_addr(&self) -> Ipv6Addr {
        Ipv6Addr::from(array_at::<16>(self.data(), field::SRC).unwrap_or_default())
    }

    pub fn dst_addr(&self) -> Ipv6Addr {
        Ipv6Addr::from(array_at::<16>(self.data(), field::DST).unwrap_or_default())
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv6Packet<T> {
    /// Set the ECN codepoint (the two low bits of the traffic class, RFC 3168 §5; DSCP kept).
    /// The traffic class spans the low nibble of byte 0 and the high nibble of byte 1
    /// (RFC 8200 §3); IPv6 has no header checksum. On a shorter buffer nothing is written.
    pub fn set_ecn(&mut self, ecn: u8) {
        self.set_traffic_class((self.traffic_class() & !3) | (ecn & 3));
    }

    /// Set the whole traffic class (DSCP and ECN), keeping the version and the flow label; on a
    /// buffer shorter than the fixed header nothing is written.
    pub fn set_traffic_class(&mut self, tc: u8) {
        let Some(b) = self.buffer.as_mut().get_mut(..HEADER_LEN) else {
            return;
        };
        b[field::VER_TC_FLOW] = (b[field::VER_TC_FLOW] & 0xf0) | (tc >> 4);
        b[field::VER_TC_FLOW + 1] = (b[field::VER_TC_FLOW + 1] & 0x0f) | (tc << 4);
    }
}

impl<'a> Ipv6Packet<&'a [u8]> {
    /// The payload length's bytes after the fixed header (padding excluded).
    pub fn payload(&self) -> &'a [u8] {
        clamped(
            self.buffer,
            field::PAYLOAD,
            field::PAYLOAD + usize::from(self.payload_len()),
        )
    }
}

/// Where the extension-header walk ended.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Upper {
    /// Transport protocol (or, with an issue, the last next-header value seen).
    pub proto: u8,
    /// Offset of the transport header within the IPv6 payload.
    pub offset: usize,
    pub frag: Fragment,
    /// Identification of the fragment header, if one was seen.
    pub frag_ident: Option<u32>,
    /// `Some(ExtensionChain)` when the chain was longer than [`MAX_EXT_HEADERS`] or cut short.
    pub issue: Option<ParseIssue>,
}

/// True for the next-header values the walk steps over.
pub fn is_extension(next: u8) -> bool {
    matches!(
        next,
        proto::HOP_BY_HOP
            | proto::IPV6_ROUTING
            | proto::IPV6_FRAGMENT
            | proto::AH
            | proto::IPV6_DEST_OPTS
    )
}

/// Walks the extension headers that start the IPv6 `payload`, `first` being the fixed header's
/// next header. Visits at most [`MAX_EXT_HEADERS`] headers; stops at a later fragment (whose
/// transport header is elsewhere). O(number of headers), never reads out of bounds.
pub fn walk_extensions(first: u8, payload: &[u8]) -> Upper {
    let mut up = Upper {
        proto: first,
        offset: 0,
        frag: Fragment::None,
        frag_ident: None,
        issue: None,
    };
    let mut visited = 0;
    while is_extension(up.proto) {
        if visited == MAX_EXT_HEADERS {
            up.issue = Some(ParseIssue::ExtensionChain);
            return up;
        }
        visited += 1;
        let header = payload.get(up.offset..).unwrap_or(&[]);
        let len = match up.proto {
            proto::IPV6_FRAGMENT => field::FRAG_LEN,
            // AH counts 4-byte units, minus 2.
            proto::AH => (usize::from(u8_at(header, field::EXT_LEN)) + 2) * 4,
            _ => (usize::from(u8_at(header, field::EXT_LEN)) + 1) * 8,
        };
        if header.len() < len {
            up.issue = Some(ParseIssue::ExtensionChain);
            return up;
        }
        let next = u8_at(header, field::EXT_NXT_HDR);
        if up.proto == proto::IPV6_FRAGMENT {
            let off_m = be16(header, field::FRAG_OFF_M);
            up.frag_ident = Some(be32(header, field::FRAG_IDENT));
            up.frag = super::fragment_kind(off_m & 0xfff8, off_m & 1 != 0);
            if up.frag == Fragment::Later {
                up.proto = next;
                up.offset += len;
                return up;
            }
        }
        up.proto = next;
        up.offset += len;
    }
    up
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(payload_len: u16, next: u8) -> Vec<u8> {
        let mut p = vec![0x6b, 0x81, 0x23, 0x45]; // ver 6, TC 0xb8, flow label 0x12345
        p.extend_from_slice(&payload_len.to_be_bytes());
        p.extend_from_slice(&[next, 64]);
        p.extend_from_slice(&Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1).octets());
        p.extend_from_slice(&Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 2).octets());
        p
    }

    #[test]
    fn set_ecn_writes_the_low_bits_of_the_traffic_class() {
        let mut p = header(0, 59);
        let mut ip = Ipv6Packet::new_checked(&mut p[..]).unwrap();
        ip.set_ecn(3);
        assert_eq!(ip.traffic_class(), 0xbb);
        assert_eq!(ip.flow_label(), 0x12345, "flow label kept");
        ip.set_ecn(1);
        assert_eq!(ip.traffic_class(), 0xb9);
        ip.set_traffic_class(0x2a);
        assert_eq!((ip.version(), ip.traffic_class()), (6, 0x2a));
        assert_eq!(ip.flow_label(), 0x12345);
    }

    #[test]
    fn fields() {
        let mut p = header(4, proto::UDP);
        p.extend_from_slice(&[1, 2, 3, 4, 0xee]); // payload + 1 byte of padding
        let ip = Ipv6Packet::new_checked(&p[..]).unwrap();
        assert_eq!(ip.version(), 6);
        assert_eq!(ip.traffic_class(), 0xb8);
        assert_eq!(ip.flow_label(), 0x12345);
        assert_eq!(ip.payload_len(), 4);
        assert_eq!(ip.next_header(), proto::UDP);
        assert_eq!(ip.hop_limit(), 64);
        assert_eq!(ip.src_addr(), "2001:db8::1".parse::<Ipv6Addr>().unwrap());
        assert_eq!(ip.dst_addr(), "2001:db8::2".parse::<Ipv6Addr>().unwrap());
        assert_eq!(ip.payload(), &[1, 2, 3, 4]);
    }

    #[test]
    fn check_len_reasons() {
        let mut p = header(4, proto::UDP);
        p.extend_from_slice(&[0; 4]);
        let check = |b: &[u8]| Ipv6Packet::new_checked(b).map(|_| ());
        assert_eq!(check(&p[..39]), Err(ParseError::TruncatedIpv6));
        assert_eq!(check(&p[..43]), Err(ParseError::BadIpv6PayloadLength));
        assert_eq!(check(&p), Ok(()));
        p[0] = 0x4b;
        assert_eq!(check(&p), Err(ParseError::BadIpVersion));
    }

    #[test]
    fn walk_hop_by_hop_routing_fragment_first() {
        let mut ext = vec![proto::IPV6_ROUTING, 0, 1, 4, 0, 0, 0, 0]; // HBH, 8 bytes
        ext.extend_from_slice(&[proto::IPV6_FRAGMENT, 1, 253, 0]); // routing, 16 bytes
        ext.extend_from_slice(&[0; 12]);
        ext.extend_from_slice(&[proto::TCP, 0, 0x00, 0x01, 0xde, 0xad, 0xbe, 0xef]); // offset 0, M
        ext.extend_from_slice(&[0x30, 0x39, 0x00, 0x50]);
        let up = walk_extensions(proto::HOP_BY_HOP, &ext);
        assert_eq!(up.proto, proto::TCP);
        assert_eq!(up.offset, 32);
        assert_eq!(up.frag, Fragment::First);
        assert_eq!(up.frag_ident, Some(0xdead_beef));
        assert_eq!(up.issue, None);
    }

    #[test]
    fn walk_stops_at_later_fragment_and_atomic_fragment_is_not_a_fragment() {
        // Later fragment: offset 185 × 8, next header destination options (not walked).
        let ext = [proto::IPV6_DEST_OPTS, 0, 0x05, 0xc8, 0, 0, 0, 7, 0xff, 0xff];
        let up = walk_extensions(proto::IPV6_FRAGMENT, &ext);
        assert_eq!(
            (up.proto, up.frag, up.offset, up.issue),
            (proto::IPV6_DEST_OPTS, Fragment::Later, 8, None)
        );
        let atomic = [proto::UDP, 0, 0, 0, 0, 0, 0, 7];
        let up = walk_extensions(proto::IPV6_FRAGMENT, &atomic);
        assert_eq!(
            (up.proto, up.frag, up.offset),
            (proto::UDP, Fragment::None, 8)
        );
    }

    #[test]
    fn walk_ah_uses_four_byte_units() {
        // AH payload len 4 → (4 + 2) × 4 = 24 bytes.
        let mut ext = vec![proto::UDP, 4];
        ext.resize(24, 0);
        let up = walk_extensions(proto::AH, &ext);
        assert_eq!((up.proto, up.offset, up.issue), (proto::UDP, 24, None));
    }

    #[test]
    fn esp_and_no_next_header_stop_the_walk() {
        for p in [proto::ESP, proto::IPV6_NO_NEXT, proto::TCP] {
            let up = walk_extensions(p, &[]);
            assert_eq!((up.proto, up.offset, up.issue), (p, 0, None));
        }
    }

    #[test]
    fn chain_too_long_or_cut_short() {
        // Eight destination-options headers then UDP: fine. Nine: an issue.
        let mut ext = Vec::new();
        for i in 0..9 {
            let next = if i == 8 {
                proto::UDP
            } else {
                proto::IPV6_DEST_OPTS
            };
            ext.extend_from_slice(&[next, 0, 1, 4, 0, 0, 0, 0]);
        }
        let up = walk_extensions(proto::IPV6_DEST_OPTS, &ext[8..]);
        assert_eq!((up.proto, up.offset, up.issue), (proto::UDP, 64, None));
        let up = walk_extensions(proto::IPV6_DEST_OPTS, &ext);
        assert_eq!(up.issue, Some(ParseIssue::ExtensionChain));
        assert_eq!(up.proto, proto::IPV6_DEST_OPTS);
        // Cut inside the third header: proto is the next header that could not be walked.
        let up = walk_extensions(proto::IPV6_DEST_OPTS, &ext[..20]);
        assert_eq!(
            (up.proto, up.offset, up.issue),
            (proto::IPV6_DEST_OPTS, 16, Some(ParseIssue::ExtensionChain))
        );
        // A header whose length byte is missing.
        let up = walk_extensions(proto::HOP_BY_HOP, &[proto::UDP]);
        assert_eq!(up.issue, Some(ParseIssue::ExtensionChain));
        assert_eq!(up.proto, proto::HOP_BY_HOP);
    }
}
