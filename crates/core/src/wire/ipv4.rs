//! IPv4 header view (RFC 791).
//!
//! ```text
//!  0       4       8              16    19                      31
//! | ver | IHL | TOS (DSCP|ECN) |        total length            |
//! |        identification      |flags|   fragment offset (×8)   |
//! |   TTL     |   protocol     |        header checksum         |
//! |                      source address                         |
//! |                   destination address                       |
//! |                  options (IHL·4 − 20 bytes)                 |
//! ```

use std::net::Ipv4Addr;

use super::bytes::{array_at, be16, clamped, u8_at};
use super::{checksum, ParseError};

mod field {
    pub const VER_IHL: usize = 0;
    pub const TOS: usize = 1;
    pub const LENGTH: usize = 2;
    pub const IDENT: usize = 4;
    pub const FLG_OFF: usize = 6;
    pub const TTL: usize = 8;
    pub const PROTOCOL: usize = 9;
    pub const CHECKSUM: usize = 10;
    pub const SRC: usize = 12;
    pub const DST: usize = 16;
    pub const OPTIONS: usize = 20;
}

/// Length of an IPv4 header without options.
pub const HEADER_LEN: usize = field::OPTIONS;
/// Longest IPv4 header (IHL 15).
pub const MAX_HEADER_LEN: usize = 60;

const FLAG_DF: u16 = 0x4000;
const FLAG_MF: u16 = 0x2000;
const OFFSET_MASK: u16 = 0x1fff;

/// A view of an IPv4 packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ipv4Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Ipv4Packet<T> {
    /// Wraps `buffer` without checking it (accessors read missing bytes as zero).
    pub const fn new_unchecked(buffer: T) -> Self {
        Ipv4Packet { buffer }
    }

    /// Wraps `buffer` after [`check_len`](Self::check_len).
    pub fn new_checked(buffer: T) -> Result<Self, ParseError> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    /// Checks, in this order: at least 20 bytes ([`ParseError::TruncatedIpv4`]), version 4
    /// ([`ParseError::BadIpVersion`]), IHL ≥ 5 ([`ParseError::BadIhl`]), the whole header present
    /// ([`ParseError::TruncatedIpv4`]), header length ≤ total length ≤ bytes available
    /// ([`ParseError::BadIpv4TotalLength`]). Bytes beyond the total length are allowed (padding).
    pub fn check_len(&self) -> Result<(), ParseError> {
        let len = self.buffer.as_ref().len();
        if len < HEADER_LEN {
            return Err(ParseError::TruncatedIpv4);
        }
        if self.version() != 4 {
            return Err(ParseError::BadIpVersion);
        }
        let header_len = self.header_len();
        if header_len < HEADER_LEN {
            return Err(ParseError::BadIhl);
        }
        if len < header_len {
            return Err(ParseError::TruncatedIpv4);
        }
        let total = usize::from(self.total_len());
        if total < header_len || total > len {
            return Err(ParseError::BadIpv4TotalLength);
        }
        Ok(())
    }

    fn data(&self) -> &[u8] {
        self.buffer.as_ref()
    }

    pub fn version(&self) -> u8 {
        u8_at(self.data(), field::VER_IHL) >> 4
    }

    /// Header length in bytes (IHL × 4), options included.
    pub fn header_len(&self) -> usize {
        usize::from(u8_at(self.data(), field::VER_IHL) & 0x0f) * 4
    }

    /// Type of service: DSCP in the upper six bits, ECN in the lower two.
    pub fn tos(&self) -> u8 {
        u8_at(self.data(), field::TOS)
    }

    /// Total length (header and payload) in bytes.
    pub fn total_len(&self) -> u16 {
        be16(self.data(), field::LENGTH)
    }

    pub fn ident(&self) -> u16 {
        be16(self.data(), field::IDENT)
    }

    pub fn dont_frag(&self) -> bool {
        be16(self.data(), field::FLG_OFF) & FLAG_DF != 0
    }

    pub fn more_frags(&self) -> bool {
        be16(self.data(), field::FLG_OFF) & FLAG_MF != 0
    }

    /// Fragment offset in bytes (the header field × 8).
    pub fn frag_offset(&self) -> u16 {
        (be16(self.data(), field::FLG_OFF) & OFFSET_MASK) << 3
    }

    pub fn ttl(&self) -> u8 {
        u8_at(self.data(), field::TTL)
    }

    /// Protocol of the payload (6 TCP, 17 UDP, 1 ICMP, ...).
    pub fn protocol(&self) -> u8 {
        u8_at(self.data(), field::PROTOCOL)
    }

    pub fn checksum(&self) -> u16 {
        be16(self.data(), field::CHECKSUM)
    }

    pub fn src_addr(&self) -> Ipv4Addr {
        Ipv4Addr::from(array_at::<4>(self.data(), field::SRC).unwrap_or_default())
    }

    pub fn dst_addr(&self) -> Ipv4Addr {
        Ipv4Addr::from(array_at::<4>(self.data(), field::DST).unwrap_or_default())
    }

    /// True if the header checksum is correct. Not checked by the parser: a shaper forwards
    /// what it is given and the receiver checks.
    pub fn verify_checksum(&self) -> bool {
        checksum::internet(clamped(self.data(), 0, self.header_len())) == 0
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv4Packet<T> {
    /// Set the ECN codepoint (the two low bits of TOS, RFC 3168 §5; DSCP kept) and refill the
    /// header checksum. On a view that passed [`check_len`](Self::check_len); on a shorter
    /// buffer nothing is written.
    pub fn set_ecn(&mut self, ecn: u8) {
        self.set_tos((self.tos() & !3) | (ecn & 3));
    }

    /// Set the whole TOS byte (DSCP and ECN) and refill the header checksum; on a buffer
    /// shorter than the header nothing is written.
    pub fn set_tos(&mut self, tos: u8) {
        let len = self.header_len();
        if len < HEADER_LEN || self.data().len() < len {
            return;
        }
        self.buffer.as_mut()[field::TOS] = tos;
        self.fill_checksum();
    }

    /// Recompute the header checksum (RFC 791) over the header, options included; nothing is
    /// written when the header is not all there.
    pub fn fill_checksum(&mut self) {
        let len = self.header_len();
        if len < HEADER_LEN {
            return;
        }
        let Some(h) = self.buffer.as_mut().get_mut(..len) else {
            return;
        };
        h[field::CHECKSUM..field::CHECKSUM + 2].fill(0);
        let sum = checksum::internet(h);
        h[field::CHECKSUM..field::CHECKSUM + 2].copy_from_slice(&sum.to_be_bytes());
    }
}

impl<'a> Ipv4Packet<&'a [u8]> {
    /// The options (empty when IHL is 5).
    pub fn options(&self) -> &'a [u8] {
        clamped(self.buffer, field::OPTIONS, self.header_len())
    }

    /// The payload: from the end of the header to the total length (padding excluded).
    pub fn payload(&self) -> &'a [u8] {
        clamped(
            self.buffer,
            self.header_len(),
            usize::from(self.total_len()),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 20-byte UDP header with two payload bytes and 2 bytes of trailing padding.
    fn sample() -> Vec<u8> {
        let mut p = vec![
            0x45, 0xb8, 0x00, 0x16, // ver 4, IHL 5, TOS 0xb8 (EF), total length 22
            0x12, 0x34, 0x20, 0x02, // ident 0x1234, MF, offset 2 (16 bytes)
            0x40, 0x11, 0x00, 0x00, // TTL 64, UDP, checksum (filled below)
            192, 0, 2, 1, // src
            198, 51, 100, 7, // dst
            0xaa, 0xbb, // payload
            0x00, 0x00, // padding
        ];
        let c = checksum::internet(&p[..20]);
        p[10..12].copy_from_slice(&c.to_be_bytes());
        p
    }

    #[test]
    fn fields() {
        let p = sample();
        let ip = Ipv4Packet::new_checked(&p[..]).unwrap();
        assert_eq!(ip.version(), 4);
        assert_eq!(ip.header_len(), 20);
        assert_eq!(ip.tos(), 0xb8);
        assert_eq!(ip.total_len(), 22);
        assert_eq!(ip.ident(), 0x1234);
        assert!(ip.more_frags());
        assert!(!ip.dont_frag());
        assert_eq!(ip.frag_offset(), 16);
        assert_eq!(ip.ttl(), 64);
        assert_eq!(ip.protocol(), 17);
        assert_eq!(ip.src_addr(), Ipv4Addr::new(192, 0, 2, 1));
        assert_eq!(ip.dst_addr(), Ipv4Addr::new(198, 51, 100, 7));
        assert!(ip.options().is_empty());
        assert_eq!(ip.payload(), &[0xaa, 0xbb]);
        assert!(ip.verify_checksum());
    }

    #[test]
    fn set_ecn_keeps_dscp_and_the_checksum_right() {
        let mut p = sample();
        let mut ip = Ipv4Packet::new_checked(&mut p[..]).unwrap();
        ip.set_ecn(3);
        assert_eq!(ip.tos(), 0xbb);
        assert!(ip.verify_checksum());
        ip.set_ecn(0);
        assert_eq!(ip.tos(), 0xb8);
        assert!(ip.verify_checksum());
        assert_eq!(p, sample(), "back to the original bytes");
        // A view of a buffer too short for the header writes nothing.
        let mut short = vec![0x45, 0xb8];
        Ipv4Packet::new_unchecked(&mut short[..]).set_ecn(3);
        assert_eq!(short, [0x45, 0xb8]);
    }

    #[test]
    fn options_and_corrupt_checksum() {
        let mut p = sample();
        // IHL 6: four option bytes (NOP NOP NOP EOL) inserted after the fixed header.
        p[0] = 0x46;
        p[3] = 26;
        p.splice(20..20, [1, 1, 1, 0]);
        let ip = Ipv4Packet::new_checked(&p[..]).unwrap();
        assert_eq!(ip.header_len(), 24);
        assert_eq!(ip.options(), &[1, 1, 1, 0]);
        assert_eq!(ip.payload(), &[0xaa, 0xbb]);
        assert!(!ip.verify_checksum());
    }

    #[test]
    fn check_len_reasons() {
        let p = sample();
        let check = |b: &[u8]| Ipv4Packet::new_checked(b).map(|_| ());
        assert_eq!(check(&p[..19]), Err(ParseError::TruncatedIpv4));
        let mut v = p.clone();
        v[0] = 0x55;
        assert_eq!(check(&v), Err(ParseError::BadIpVersion));
        for ihl in 0..5u8 {
            v[0] = 0x40 | ihl;
            assert_eq!(check(&v), Err(ParseError::BadIhl), "ihl {ihl}");
        }
        v[0] = 0x4f; // 60-byte header in a 24-byte buffer
        assert_eq!(check(&v), Err(ParseError::TruncatedIpv4));
        let mut t = p.clone();
        t[2..4].copy_from_slice(&19u16.to_be_bytes());
        assert_eq!(check(&t), Err(ParseError::BadIpv4TotalLength));
        t[2..4].copy_from_slice(&25u16.to_be_bytes());
        assert_eq!(check(&t), Err(ParseError::BadIpv4TotalLength));
        t[2..4].copy_from_slice(&24u16.to_be_bytes());
        assert_eq!(check(&t), Ok(()));
    }

    #[test]
    fn unchecked_views_never_panic() {
        let p = sample();
        for n in 0..p.len() {
            let ip = Ipv4Packet::new_unchecked(&p[..n]);
            let _ = (
                ip.src_addr(),
                ip.dst_addr(),
                ip.total_len(),
                ip.verify_checksum(),
            );
            let _ = (ip.options(), ip.payload());
        }
        let ip = Ipv4Packet::new_unchecked(&p[..3]);
        assert_eq!(ip.protocol(), 0);
        assert!(ip.payload().is_empty());
    }
}
