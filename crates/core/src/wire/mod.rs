//! Zero-copy, panic-free wire parsing: bytes in, one [`PacketMeta`] out.
//!
//! # Layers
//!
//! ```text
//! Ethernet II ─┬─ 802.1Q / 802.1ad / 0x9100 tag (at most 2) ─┐   PPPoE session (IPv4/IPv6 PPP
//!              │                                              ├── protocols) or MPLS label stack
//!              │                                              │   (at most 8): [`encap`] ─┐
//!              └──────────────────────────────────────────────┴───────────────────────────┴─┬─ IPv4 (options, fragments)
//!                                                               ├─ IPv6 ── extension headers
//!                                                               │          (hop-by-hop, routing,
//!                                                               │           fragment, dest. options,
//!                                                               │           AH; at most 8)
//!                                                               └─ other EtherType: L3::Other
//!  IP payload ── TCP / UDP / UDP-Lite / SCTP / DCCP: ports (first 4 bytes)
//!             └─ ICMP, ICMPv6, anything else: no ports
//!  TCP header and options, on demand: [`tcp_info`] (CAKE's ACK filter)
//! ```
//!
//! Each layer is a thin view over the caller's bytes ([`EthernetFrame`], [`VlanTag`],
//! [`Ipv4Packet`], [`Ipv6Packet`]) in the style of smoltcp: field offsets live in a private
//! `mod field`, a view is validated once by `check_len` (which `new_checked` calls), and after that
//! its accessors read within bounds. Accessors never panic even on an *unchecked* view: every read
//! goes through [`bytes`] helpers that use `slice::get` and read missing bytes as zero. Nothing is
//! copied and nothing is allocated; the work is proportional to the header length (the IPv6
//! extension-header walk is bounded by [`ipv6::MAX_EXT_HEADERS`]).
//!
//! # What is checked
//!
//! *Errors* ([`ParseError`]) are reserved for frames whose layer 2/3 headers cannot be trusted:
//!
//! * Ethernet: at least 14 bytes; every VLAN tag complete; at most [`MAX_VLAN_TAGS`] tags.
//! * IPv4: at least 20 bytes, version 4, IHL ≥ 5, the whole header (with options) present,
//!   `IHL·4 ≤ total length ≤ bytes available`. Bytes after the total length (Ethernet padding)
//!   are ignored. The header checksum is *not* verified (see [`Ipv4Packet::verify_checksum`]).
//! * IPv6: at least 40 bytes, version 6, `40 + payload length ≤ bytes available`. Jumbograms
//!   (payload length 0 with a jumbo option) are not supported: they parse as a 40-byte packet
//!   whose extension chain is cut short.
//!
//! *Issues* ([`ParseIssue`]) are things noticed past layer 3 that still leave a classifiable
//! packet: a transport header too short to hold its ports ([`ParseIssue::TruncatedL4`], ports 0),
//! or an IPv6 extension chain that is too long or cut short ([`ParseIssue::ExtensionChain`]:
//! `proto` is the last next-header value seen, ports 0).
//!
//! [`ParseIssue`]: crate::packet::ParseIssue
//! [`ParseIssue::TruncatedL4`]: crate::packet::ParseIssue::TruncatedL4
//! [`ParseIssue::ExtensionChain`]: crate::packet::ParseIssue::ExtensionChain
//!
//! # Fragments
//!
//! A fragment with offset 0 and "more fragments" set is [`Fragment::First`] and its ports are
//! parsed; any fragment with a non-zero offset is [`Fragment::Later`] and has no ports. A packet
//! with offset 0 and no "more fragments" (including IPv6 atomic fragments, RFC 6946) is not a
//! fragment. [`flow_hash`] ignores ports for all fragments, so every fragment of a datagram lands
//! in the same flow.
//!
//! # Builders
//!
//! [`build`] emits valid headers (checksums included) from a [`BuildSpec`], for tests, the
//! simulator and the router tests.

pub mod build;
pub mod bytes;
pub mod checksum;
pub mod encap;
pub mod ethernet;
mod hash;
pub mod ipv4;
pub mod ipv6;
pub mod tcp;
pub mod tos;
pub mod transport;

use crate::packet::{Fragment, PacketMeta, L3};

pub use build::{
    build_ethernet, build_ethernet_frame, build_ip, build_ipv4, build_ipv6, BuildSpec, ExtHeader,
    FragSpec, Vlan,
};
pub use ethernet::{EthernetFrame, VlanTag, MAX_VLAN_TAGS};
pub use hash::flow_hash;
pub use ipv4::Ipv4Packet;
pub use ipv6::Ipv6Packet;
pub use tcp::{tcp_info, tcp_info_at};
pub use tos::{rewrite_tos, set_ce, wash_dscp};

/// Why a frame could not be parsed. Each variant has a stable [`name`](ParseError::name) usable
/// as a counter label.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, thiserror::Error)]
#[non_exhaustive]
pub enum ParseError {
    /// Fewer than 14 bytes: no complete Ethernet header.
    #[error("truncated Ethernet header")]
    TruncatedEthernet,
    /// A VLAN TPID announced a tag whose 4 bytes are not all there.
    #[error("truncated VLAN tag")]
    TruncatedVlan,
    /// More than [`MAX_VLAN_TAGS`] stacked VLAN tags.
    #[error("too many VLAN tags")]
    TooManyVlanTags,
    /// An empty IP packet: not even a version nibble.
    #[error("empty IP packet")]
    TruncatedIp,
    /// The IP version nibble is not 4 or 6 (or does not match the EtherType).
    #[error("bad IP version")]
    BadIpVersion,
    /// Fewer than 20 bytes, or fewer than the header length the IHL announces.
    #[error("truncated IPv4 header")]
    TruncatedIpv4,
    /// IHL below 5 (a header shorter than 20 bytes).
    #[error("bad IPv4 header length (IHL < 5)")]
    BadIhl,
    /// Total length smaller than the header, or larger than the bytes available.
    #[error("bad IPv4 total length")]
    BadIpv4TotalLength,
    /// Fewer than 40 bytes: no complete IPv6 header.
    #[error("truncated IPv6 header")]
    TruncatedIpv6,
    /// `40 + payload length` is larger than the bytes available.
    #[error("bad IPv6 payload length")]
    BadIpv6PayloadLength,
}

impl ParseError {
    /// Every variant, in declaration order (for counter tables).
    pub const ALL: [ParseError; 10] = [
        ParseError::TruncatedEthernet,
        ParseError::TruncatedVlan,
        ParseError::TooManyVlanTags,
        ParseError::TruncatedIp,
        ParseError::BadIpVersion,
        ParseError::TruncatedIpv4,
        ParseError::BadIhl,
        ParseError::BadIpv4TotalLength,
        ParseError::TruncatedIpv6,
        ParseError::BadIpv6PayloadLength,
    ];

    /// Stable snake_case name, for counter labels and logs.
    pub fn name(self) -> &'static str {
        match self {
            ParseError::TruncatedEthernet => "truncated_ethernet",
            ParseError::TruncatedVlan => "truncated_vlan",
            ParseError::TooManyVlanTags => "too_many_vlan_tags",
            ParseError::TruncatedIp => "truncated_ip",
            ParseError::BadIpVersion => "bad_ip_version",
            ParseError::TruncatedIpv4 => "truncated_ipv4",
            ParseError::BadIhl => "bad_ihl",
            ParseError::BadIpv4TotalLength => "bad_ipv4_total_length",
            ParseError::TruncatedIpv6 => "truncated_ipv6",
            ParseError::BadIpv6PayloadLength => "bad_ipv6_payload_length",
        }
    }
}

/// EtherType values the parser knows.
pub mod ethertype {
    pub const IPV4: u16 = 0x0800;
    pub const ARP: u16 = 0x0806;
    pub const IPV6: u16 = 0x86dd;
    /// 802.1Q customer VLAN tag.
    pub const VLAN: u16 = 0x8100;
    /// 802.1ad service VLAN tag (QinQ outer tag).
    pub const QINQ: u16 = 0x88a8;
    /// Pre-standard QinQ outer tag still seen in the wild.
    pub const QINQ_OLD: u16 = 0x9100;
    pub const LLDP: u16 = 0x88cc;
    /// PPPoE session stage (RFC 2516).
    pub const PPPOE_SESSION: u16 = 0x8864;
    /// MPLS unicast and multicast (RFC 3032, RFC 5332).
    pub const MPLS_UNICAST: u16 = 0x8847;
    pub const MPLS_MULTICAST: u16 = 0x8848;
}

/// IP protocol numbers the parser knows.
pub mod proto {
    pub const HOP_BY_HOP: u8 = 0;
    pub const ICMP: u8 = 1;
    pub const TCP: u8 = 6;
    pub const UDP: u8 = 17;
    pub const DCCP: u8 = 33;
    pub const IPV6_ROUTING: u8 = 43;
    pub const IPV6_FRAGMENT: u8 = 44;
    pub const ESP: u8 = 50;
    pub const AH: u8 = 51;
    pub const ICMPV6: u8 = 58;
    pub const IPV6_NO_NEXT: u8 = 59;
    pub const IPV6_DEST_OPTS: u8 = 60;
    pub const SCTP: u8 = 132;
    pub const UDP_LITE: u8 = 136;
}

/// Parses an Ethernet II frame (up to [`MAX_VLAN_TAGS`] VLAN tags, then optionally a PPPoE
/// session or MPLS label stack around IP: [`encap`]) down to the transport ports.
///
/// A frame whose (innermost) EtherType is not IPv4 or IPv6 (nor an encapsulation of them)
/// parses as `L3::Other(ethertype)` with `len` = the frame length. `meta.vlan` is the outermost
/// VLAN id. The flow hash is unkeyed (key 0): see [`parse_ethernet_keyed`].
pub fn parse_ethernet(frame: &[u8]) -> Result<PacketMeta, ParseError> {
    parse_ethernet_keyed(frame, 0)
}

/// [`parse_ethernet`] with the flow hash under `key` ([`flow_hash`]). A shaper facing the
/// network draws its key at random, so that no remote host can choose ports offline that put
/// its flow in the queue of another (fq_codel, DRR and SFQ buckets come from this hash).
pub fn parse_ethernet_keyed(frame: &[u8], key: u64) -> Result<PacketMeta, ParseError> {
    let eth = EthernetFrame::new_checked(frame)?;
    let mut ethertype = eth.ethertype();
    let mut rest = eth.payload();
    let mut vlan = None;
    let mut tags = 0;
    while ethernet::is_vlan_tpid(ethertype) {
        if tags == MAX_VLAN_TAGS {
            return Err(ParseError::TooManyVlanTags);
        }
        let tag = VlanTag::new_checked(rest)?;
        vlan = vlan.or(Some(tag.vid()));
        ethertype = tag.ethertype();
        rest = tag.into_payload();
        tags += 1;
    }
    // PPPoE or MPLS around IP: classify the IP packet inside (`encap`).
    if let Some((off, et)) = encap::inner_ip(ethertype, rest) {
        if let Some(inner) = rest.get(off..) {
            ethertype = et;
            rest = inner;
        }
    }
    // `rest` is a suffix of `frame`: the IP header's offset, recorded for the header's writers.
    let l3_offset = u16::try_from(frame.len() - rest.len()).unwrap_or(u16::MAX);
    let mut meta = match ethertype {
        ethertype::IPV4 => PacketMeta {
            l3_offset,
            ..parse_ipv4(rest, key)?
        },
        ethertype::IPV6 => PacketMeta {
            l3_offset,
            ..parse_ipv6(rest, key)?
        },
        other => {
            let mut meta = PacketMeta {
                len: saturating_u32(frame.len()),
                l3: L3::Other(other),
                ..PacketMeta::default()
            };
            meta.flow_hash = flow_hash(&meta, key);
            meta
        }
    };
    // The VLAN is not part of the flow hash, so the hash computed above stays valid.
    meta.vlan = vlan;
    Ok(meta)
}

/// Offset of the IP header in an Ethernet frame and its EtherType (IPv4 or IPv6), past VLAN
/// tags and a PPPoE or MPLS encapsulation, exactly where [`parse_ethernet`] finds it; `None` for
/// a frame that carries no IP. For writers of the header (ECN marking).
pub fn ip_offset(frame: &[u8]) -> Option<(usize, u16)> {
    let mut off = ethernet::HEADER_LEN;
    let mut et = u16::from_be_bytes([*frame.get(off - 2)?, *frame.get(off - 1)?]);
    let mut tags = 0;
    while ethernet::is_vlan_tpid(et) {
        if tags == MAX_VLAN_TAGS {
            return None;
        }
        et = u16::from_be_bytes([*frame.get(off + 2)?, *frame.get(off + 3)?]);
        off += ethernet::TAG_LEN;
        tags += 1;
    }
    if let Some((inner, ip_et)) = encap::inner_ip(et, frame.get(off..)?) {
        return Some((off + inner, ip_et));
    }
    matches!(et, ethertype::IPV4 | ethertype::IPV6).then_some((off, et))
}

/// Parses a packet that starts at its IP header; the version nibble decides IPv4 or IPv6.
pub fn parse_ip(packet: &[u8]) -> Result<PacketMeta, ParseError> {
    match packet.first().map(|b| b >> 4) {
        None => Err(ParseError::TruncatedIp),
        Some(4) => parse_ipv4(packet, 0),
        Some(6) => parse_ipv6(packet, 0),
        Some(_) => Err(ParseError::BadIpVersion),
    }
}

fn parse_ipv4(bytes: &[u8], key: u64) -> Result<PacketMeta, ParseError> {
    let ip = Ipv4Packet::new_checked(bytes)?;
    let frag = fragment_kind(ip.frag_offset(), ip.more_frags());
    let mut meta = PacketMeta {
        len: u32::from(ip.total_len()),
        l3: L3::Ipv4,
        tos: ip.tos(),
        proto: ip.protocol(),
        src: ip.src_addr().into(),
        dst: ip.dst_addr().into(),
        frag,
        ..PacketMeta::default()
    };
    if frag != Fragment::Later {
        set_ports(&mut meta, ip.payload());
    }
    meta.flow_hash = flow_hash(&meta, key);
    Ok(meta)
}

fn parse_ipv6(bytes: &[u8], key: u64) -> Result<PacketMeta, ParseError> {
    let ip = Ipv6Packet::new_checked(bytes)?;
    let payload = ip.payload();
    let upper = ipv6::walk_extensions(ip.next_header(), payload);
    let mut meta = PacketMeta {
        len: ipv6::HEADER_LEN as u32 + u32::from(ip.payload_len()),
        l3: L3::Ipv6,
        tos: ip.traffic_class(),
        proto: upper.proto,
        src: ip.src_addr().into(),
        dst: ip.dst_addr().into(),
        frag: upper.frag,
        issue: upper.issue,
        ..PacketMeta::default()
    };
    if upper.issue.is_none() && upper.frag != Fragment::Later {
        set_ports(&mut meta, payload.get(upper.offset..).unwrap_or(&[]));
    }
    meta.flow_hash = flow_hash(&meta, key);
    Ok(meta)
}

/// Fragment kind from the offset (any unit) and the "more fragments" flag.
fn fragment_kind(offset: u16, more: bool) -> Fragment {
    match (offset, more) {
        (0, false) => Fragment::None,
        (0, true) => Fragment::First,
        _ => Fragment::Later,
    }
}

fn set_ports(meta: &mut PacketMeta, l4: &[u8]) {
    match transport::ports(meta.proto, l4) {
        Ok((src, dst)) => {
            meta.src_port = src;
            meta.dst_port = dst;
        }
        Err(issue) => meta.issue = Some(issue),
    }
}

fn saturating_u32(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests;
