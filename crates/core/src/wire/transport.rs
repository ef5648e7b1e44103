//! Transport ports.
//!
//! TCP, UDP, UDP-Lite, SCTP and DCCP all start with the source and destination ports, so only
//! those 4 bytes are read; the rest of the transport header is not needed for classification and
//! is not checked. ICMP, ICMPv6 and other protocols have no ports (0, 0).

use super::bytes::array_at;
use super::proto;
use crate::packet::ParseIssue;

/// True for protocols whose header starts with 16-bit source and destination ports.
pub fn has_ports(p: u8) -> bool {
    matches!(
        p,
        proto::TCP | proto::UDP | proto::UDP_LITE | proto::SCTP | proto::DCCP
    )
}

/// `(src_port, dst_port)` of the transport header `l4` of protocol `p`: `(0, 0)` for protocols
/// without ports, [`ParseIssue::TruncatedL4`] when fewer than 4 bytes hold the ports.
pub fn ports(p: u8, l4: &[u8]) -> Result<(u16, u16), ParseIssue> {
    if !has_ports(p) {
        return Ok((0, 0));
    }
    match array_at::<4>(l4, 0) {
        Some([a, b, c, d]) => Ok((u16::from_be_bytes([a, b]), u16::from_be_bytes([c, d]))),
        None => Err(ParseIssue::TruncatedL4),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_of_port_protocols() {
        let hdr = [0x30, 0x39, 0x01, 0xbb, 0xff];
        for p in [
            proto::TCP,
            proto::UDP,
            proto::UDP_LITE,
            proto::SCTP,
            proto::DCCP,
        ] {
            assert_eq!(ports(p, &hdr), Ok((12345, 443)), "proto {p}");
            assert_eq!(ports(p, &hdr[..3]), Err(ParseIssue::TruncatedL4));
            assert_eq!(ports(p, &[]), Err(ParseIssue::TruncatedL4));
        }
    }

    #[test]
    fn portless_protocols() {
        for p in [
            proto::ICMP,
            proto::ICMPV6,
            proto::ESP,
            proto::IPV6_NO_NEXT,
            47,
        ] {
            assert_eq!(ports(p, &[1, 2, 3, 4]), Ok((0, 0)));
            assert_eq!(ports(p, &[]), Ok((0, 0)));
        }
    }
}
