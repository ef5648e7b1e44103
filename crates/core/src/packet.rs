//! What the schedulers and classifiers know about a packet.
//!
//! A packet is parsed once (see [`crate::wire`]) into a small `Copy` [`PacketMeta`]; the payload
//! travels beside it as an opaque handle (a frame slot in the router, nothing in the simulator).
//! Schedulers are generic over [`Packet`] and never look at payload bytes.

use std::net::{IpAddr, Ipv4Addr};

/// Layer-3 kind of a frame.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Default)]
pub enum L3 {
    /// Not IP (ARP, LLDP, …): carries the EtherType.
    Other(u16),
    #[default]
    Ipv4,
    Ipv6,
}

/// Where a packet sits in a fragmented datagram.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Default)]
pub enum Fragment {
    /// Not a fragment.
    #[default]
    None,
    /// First fragment (offset 0, more fragments follow): transport header present.
    First,
    /// A later fragment: no transport header, ports unknown.
    Later,
}

/// Something the parser noticed about a packet that did not stop it from being classified.
/// Counted by the driver (router) per reason.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum ParseIssue {
    /// The transport header is cut short: ports are unknown (classified as portless).
    TruncatedL4,
    /// An IPv6 extension header chain was too long or cut short: protocol and ports unknown.
    ExtensionChain,
}

/// The parsed, fixed-size description of one packet.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct PacketMeta {
    /// Bytes the schedulers account for this packet (IP length plus any configured overhead).
    pub len: u32,
    pub l3: L3,
    /// IPv4 TOS or IPv6 traffic class: DSCP in the upper six bits, ECN in the lower two.
    pub tos: u8,
    /// IP protocol / IPv6 next header of the transport (6 TCP, 17 UDP, 1 ICMP, 58 ICMPv6).
    pub proto: u8,
    pub src: IpAddr,
    pub dst: IpAddr,
    /// Transport ports; 0 when the packet has none (ICMP, later fragments, truncated headers).
    pub src_port: u16,
    pub dst_port: u16,
    pub frag: Fragment,
    /// Outer VLAN id, if the frame was tagged.
    pub vlan: Option<u16>,
    /// 5-tuple flow hash (3-tuple for fragments, so all fragments of a datagram share a flow).
    pub flow_hash: u32,
    pub issue: Option<ParseIssue>,
    /// Where the IP header starts in the frame the packet was parsed from (past VLAN tags and
    /// a PPPoE or MPLS encapsulation; 0 for a packet parsed at its IP header). Writers of the
    /// header (ECN marking) and readers of the transport start here instead of walking the
    /// encapsulation again.
    pub l3_offset: u16,
}

impl Default for PacketMeta {
    fn default() -> Self {
        PacketMeta {
            len: 0,
            l3: L3::Ipv4,
            tos: 0,
            proto: 0,
            src: IpAddr::V4(Ipv4Addr::UNSPECIFIED),
            dst: IpAddr::V4(Ipv4Addr::UNSPECIFIED),
            src_port: 0,
            dst_port: 0,
            frag: Fragment::None,
            vlan: None,
            flow_hash: 0,
            issue: None,
            l3_offset: 0,
        }
    }
}

impl PacketMeta {
    /// DiffServ code point (0–63).
    pub fn dscp(&self) -> u8 {
        self.tos >> 2
    }
    /// ECN field (0 not ECT, 1 ECT(1), 2 ECT(0), 3 CE).
    pub fn ecn(&self) -> u8 {
        self.tos & 3
    }
}

/// The TCP header fields a discipline may compare between segments of one connection (CAKE's
/// ACK filter), for packet types that carry their headers ([`Packet::tcp`]).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct TcpInfo {
    pub seq: u32,
    /// The cumulative acknowledgement number.
    pub ack: u32,
    /// The 12 flag bits: the four reserved bits above CWR ECE URG ACK PSH RST SYN FIN.
    pub flags: u16,
    /// TCP payload bytes (0 for a pure ACK).
    pub payload: u32,
    /// The timestamp option's (TSval, TSecr).
    pub tstamp: Option<(u32, u32)>,
    /// SACK blocks `(start, end)`, the first `sack_blocks` valid.
    pub sack: [(u32, u32); 4],
    pub sack_blocks: u8,
    /// An option other than EOL, NOP, MD5, SACK and timestamps, or a malformed one.
    pub other_options: bool,
}

impl TcpInfo {
    pub const FIN: u16 = 0x001;
    pub const SYN: u16 = 0x002;
    pub const RST: u16 = 0x004;
    pub const PSH: u16 = 0x008;
    pub const ACK: u16 = 0x010;
    pub const URG: u16 = 0x020;
    pub const ECE: u16 = 0x040;
    pub const CWR: u16 = 0x080;
}

/// A packet as the schedulers see it.
#[allow(clippy::len_without_is_empty)] // a packet is never empty; `len` is its accounted size
pub trait Packet: Send + 'static {
    fn meta(&self) -> &PacketMeta;
    /// Bytes accounted for scheduling.
    fn len(&self) -> u32 {
        self.meta().len
    }
    /// Mutable access for disciplines that rewrite the header (ECN marking). Packet types that
    /// cannot be rewritten return `None`, and such disciplines drop instead of marking.
    fn meta_mut(&mut self) -> Option<&mut PacketMeta> {
        None
    }
    /// The TCP header's fields, for packet types that carry it; `None` (the default) when the
    /// packet is not TCP or its header is not available, and disciplines then leave it alone.
    fn tcp(&self) -> Option<TcpInfo> {
        None
    }
    /// Set ECN to CE if the packet is ECN-capable (ECT(0) or ECT(1)); `true` if it was marked.
    fn mark_ce(&mut self) -> bool {
        match self.meta_mut() {
            Some(m) if m.ecn() == 1 || m.ecn() == 2 => {
                m.tos |= 3;
                true
            }
            _ => false,
        }
    }
    /// Clear the DSCP, keeping ECN (CAKE's `wash`, a policy's `wash`); `true` if it was not 0.
    /// Packet types that carry their header bytes rewrite them ([`crate::wire::wash_dscp`]).
    fn wash_dscp(&mut self) -> bool {
        match self.meta_mut() {
            Some(m) if m.dscp() != 0 => {
                m.tos &= 3;
                true
            }
            _ => false,
        }
    }
}

impl Packet for PacketMeta {
    fn meta(&self) -> &PacketMeta {
        self
    }
    fn meta_mut(&mut self) -> Option<&mut PacketMeta> {
        Some(self)
    }
}

impl<T: Packet + ?Sized> Packet for Box<T> {
    fn meta(&self) -> &PacketMeta {
        (**self).meta()
    }
    fn tcp(&self) -> Option<TcpInfo> {
        (**self).tcp()
    }
    fn meta_mut(&mut self) -> Option<&mut PacketMeta> {
        (**self).meta_mut()
    }
    fn mark_ce(&mut self) -> bool {
        (**self).mark_ce()
    }
    fn wash_dscp(&mut self) -> bool {
        (**self).wash_dscp()
    }
}
