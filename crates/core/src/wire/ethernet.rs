//! Ethernet II header and VLAN tag views (IEEE 802.3, 802.1Q, 802.1ad).
//!
//! ```text
//! Ethernet II: | dst MAC (6) | src MAC (6) | EtherType (2) | payload ...
//! VLAN tag:    | TCI (2): PCP 3 bits, DEI 1 bit, VID 12 bits | inner EtherType (2) | payload ...
//! ```
//!
//! A VLAN tag follows an Ethernet header whose EtherType is a TPID (0x8100, 0x88a8 or 0x9100);
//! the TPID and the TCI together are the 4-byte 802.1Q tag, which this view starts after the TPID.

use super::bytes::{array_at, be16, clamped};
use super::{ethertype, ParseError};

/// Most VLAN tags [`super::parse_ethernet`] accepts (QinQ).
pub const MAX_VLAN_TAGS: usize = 2;

/// True for EtherTypes that announce a VLAN tag.
pub fn is_vlan_tpid(t: u16) -> bool {
    matches!(t, ethertype::VLAN | ethertype::QINQ | ethertype::QINQ_OLD)
}

mod field {
    pub const DST: usize = 0;
    pub const SRC: usize = 6;
    pub const ETHERTYPE: usize = 12;
    pub const PAYLOAD: usize = 14;

    pub const TAG_TCI: usize = 0;
    pub const TAG_ETHERTYPE: usize = 2;
    pub const TAG_PAYLOAD: usize = 4;
}

/// Length of an untagged Ethernet II header.
pub const HEADER_LEN: usize = field::PAYLOAD;
/// Length of a VLAN tag after its TPID (TCI + inner EtherType).
pub const TAG_LEN: usize = field::TAG_PAYLOAD;

/// A view of an Ethernet II frame (without FCS).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EthernetFrame<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> EthernetFrame<T> {
    /// Wraps `buffer` without checking it (accessors read missing bytes as zero).
    pub const fn new_unchecked(buffer: T) -> Self {
        EthernetFrame { buffer }
    }

    /// Wraps `buffer` after [`check_len`](Self::check_len).
    pub fn new_checked(buffer: T) -> Result<Self, ParseError> {
        let f = Self::new_unchecked(buffer);
        f.check_len()?;
        Ok(f)
    }

    /// At least 14 bytes.
    pub fn check_len(&self) -> Result<(), ParseError> {
        if self.buffer.as_ref().len() < HEADER_LEN {
            return Err(ParseError::TruncatedEthernet);
        }
        Ok(())
    }

    pub fn dst_addr(&self) -> [u8; 6] {
        array_at(self.buffer.as_ref(), field::DST).unwrap_or_default()
    }

    pub fn src_addr(&self) -> [u8; 6] {
        array_at(self.buffer.as_ref(), field::SRC).unwrap_or_default()
    }

    /// EtherType (or 802.3 length, below 0x0600).
    pub fn ethertype(&self) -> u16 {
        be16(self.buffer.as_ref(), field::ETHERTYPE)
    }
}

impl<'a> EthernetFrame<&'a [u8]> {
    /// Everything after the 14-byte header.
    pub fn payload(&self) -> &'a [u8] {
        clamped(self.buffer, field::PAYLOAD, usize::MAX)
    }
}

/// A view of a VLAN tag, starting right after its TPID.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VlanTag<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> VlanTag<T> {
    pub const fn new_unchecked(buffer: T) -> Self {
        VlanTag { buffer }
    }

    pub fn new_checked(buffer: T) -> Result<Self, ParseError> {
        let t = Self::new_unchecked(buffer);
        t.check_len()?;
        Ok(t)
    }

    /// At least 4 bytes (TCI and inner EtherType).
    pub fn check_len(&self) -> Result<(), ParseError> {
        if self.buffer.as_ref().len() < TAG_LEN {
            return Err(ParseError::TruncatedVlan);
        }
        Ok(())
    }

    fn tci(&self) -> u16 {
        be16(self.buffer.as_ref(), field::TAG_TCI)
    }

    /// Priority code point (0–7).
    pub fn pcp(&self) -> u8 {
        (self.tci() >> 13) as u8
    }

    /// Drop eligible indicator.
    pub fn dei(&self) -> bool {
        self.tci() & 0x1000 != 0
    }

    /// VLAN id (0–4095; 0 means a priority-only tag).
    pub fn vid(&self) -> u16 {
        self.tci() & 0x0fff
    }

    /// EtherType of what follows the tag.
    pub fn ethertype(&self) -> u16 {
        be16(self.buffer.as_ref(), field::TAG_ETHERTYPE)
    }
}

impl<'a> VlanTag<&'a [u8]> {
    /// Everything after the tag.
    pub fn into_payload(self) -> &'a [u8] {
        clamped(self.buffer, field::TAG_PAYLOAD, usize::MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_fields() {
        let mut f = vec![1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 0x08, 0x06];
        f.extend_from_slice(&[0xaa, 0xbb]);
        let eth = EthernetFrame::new_checked(&f[..]).unwrap();
        assert_eq!(eth.dst_addr(), [1, 2, 3, 4, 5, 6]);
        assert_eq!(eth.src_addr(), [7, 8, 9, 10, 11, 12]);
        assert_eq!(eth.ethertype(), ethertype::ARP);
        assert_eq!(eth.payload(), &[0xaa, 0xbb]);
    }

    #[test]
    fn short_frame_is_rejected_and_unchecked_view_reads_zero() {
        let f = [0u8; 13];
        assert_eq!(
            EthernetFrame::new_checked(&f[..]),
            Err(ParseError::TruncatedEthernet)
        );
        let eth = EthernetFrame::new_unchecked(&f[..3]);
        assert_eq!(eth.ethertype(), 0);
        assert_eq!(eth.src_addr(), [0; 6]);
        assert!(eth.payload().is_empty());
    }

    #[test]
    fn vlan_tag_fields() {
        // PCP 5, DEI 1, VID 0x123, inner EtherType IPv6.
        let t = [0xb1, 0x23, 0x86, 0xdd, 0x60];
        let tag = VlanTag::new_checked(&t[..]).unwrap();
        assert_eq!(tag.pcp(), 5);
        assert!(tag.dei());
        assert_eq!(tag.vid(), 0x123);
        assert_eq!(tag.ethertype(), ethertype::IPV6);
        assert_eq!(tag.into_payload(), &[0x60]);
        assert_eq!(
            VlanTag::new_checked(&t[..3]),
            Err(ParseError::TruncatedVlan)
        );
    }

    #[test]
    fn tpids() {
        assert!(is_vlan_tpid(0x8100) && is_vlan_tpid(0x88a8) && is_vlan_tpid(0x9100));
        assert!(!is_vlan_tpid(0x0800) && !is_vlan_tpid(0x86dd));
    }
}
