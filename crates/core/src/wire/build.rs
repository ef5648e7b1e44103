//! Packet builders for tests, the simulator and the router tests.
//!
//! A [`BuildSpec`] describes a packet by the fields the parser reports; the builders emit valid
//! headers for it: IPv4 header checksum, TCP/UDP/UDP-Lite/ICMP/ICMPv6 checksums (computed over the
//! bytes emitted, so they are only right for unfragmented packets), IPv6 extension headers with
//! valid padding, VLAN tags, and Ethernet padding to the 60-byte minimum.
//!
//! The payload is the byte pattern `0, 1, 2, ...` (wrapping). Builders append to nothing: each
//! public function clears `buf` first, so one buffer can be reused.
//!
//! These are tools, not parsers: a spec that cannot be encoded (mixed address families, an IP
//! packet over 65535 bytes, more than 40 bytes of IPv4 options, a fragment offset that is not a
//! multiple of 8) panics, as documented on each function.

use std::net::{IpAddr, Ipv4Addr};

use super::checksum;
use super::ethertype;
use super::proto;

/// Fragment fields of a packet.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Default)]
pub struct FragSpec {
    /// Offset of this fragment's data in the datagram, in bytes (a multiple of 8).
    pub offset: u16,
    /// More fragments follow.
    pub more: bool,
}

/// One IPv6 extension header to emit, in chain order.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum ExtHeader {
    /// Hop-by-hop options; the value is the Hdr Ext Len field (size `(n + 1) × 8`), filled with
    /// Pad1 options.
    HopByHop(u8),
    /// Routing header of type 253 (experimental) with segments left 0; size `(n + 1) × 8`.
    Routing(u8),
    /// Destination options; size `(n + 1) × 8`, filled with Pad1 options.
    DestOptions(u8),
    /// Authentication header; the value is its Payload Len field (size `(n + 2) × 4`, n ≥ 1).
    Auth(u8),
    /// Fragment header carrying [`BuildSpec::frag`] (an atomic fragment when that is `None`).
    Fragment,
}

impl ExtHeader {
    /// The next-header value announcing this header.
    pub fn number(self) -> u8 {
        match self {
            ExtHeader::HopByHop(_) => proto::HOP_BY_HOP,
            ExtHeader::Routing(_) => proto::IPV6_ROUTING,
            ExtHeader::DestOptions(_) => proto::IPV6_DEST_OPTS,
            ExtHeader::Auth(_) => proto::AH,
            ExtHeader::Fragment => proto::IPV6_FRAGMENT,
        }
    }

    /// Size in bytes.
    pub fn len(self) -> usize {
        match self {
            ExtHeader::HopByHop(n) | ExtHeader::Routing(n) | ExtHeader::DestOptions(n) => {
                (usize::from(n) + 1) * 8
            }
            ExtHeader::Auth(n) => (usize::from(n) + 2) * 4,
            ExtHeader::Fragment => 8,
        }
    }

    /// Always false: every extension header has at least 8 bytes.
    pub fn is_empty(self) -> bool {
        false
    }
}

/// A VLAN tag to emit.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Vlan {
    /// Tag protocol identifier: 0x8100, 0x88a8 or 0x9100.
    pub tpid: u16,
    /// VLAN id (12 bits).
    pub vid: u16,
    /// Priority code point (3 bits).
    pub pcp: u8,
}

impl Vlan {
    /// An 802.1Q (customer) tag.
    pub fn dot1q(vid: u16) -> Self {
        Vlan {
            tpid: ethertype::VLAN,
            vid,
            pcp: 0,
        }
    }

    /// An 802.1ad (service, QinQ outer) tag.
    pub fn dot1ad(vid: u16) -> Self {
        Vlan {
            tpid: ethertype::QINQ,
            vid,
            pcp: 0,
        }
    }
}

/// What to build. Fields are public; start from [`Default`] or a constructor and adjust.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BuildSpec {
    /// Source address; its family (with `dst`'s, which must match) picks IPv4 or IPv6.
    pub src: IpAddr,
    pub dst: IpAddr,
    /// IPv4 TOS / IPv6 traffic class.
    pub tos: u8,
    /// TTL / hop limit.
    pub ttl: u8,
    /// Transport protocol. TCP, UDP, UDP-Lite, SCTP, DCCP, ICMP (IPv4) and ICMPv6 (IPv6) get a
    /// header; any other protocol only a payload.
    pub proto: u8,
    pub src_port: u16,
    pub dst_port: u16,
    /// Bytes after the transport header (after the IP headers for later fragments).
    pub payload_len: usize,
    /// Fragment fields; `None` builds an unfragmented packet (IPv4: DF set).
    pub frag: Option<FragSpec>,
    /// IPv4 identification (low 16 bits), IPv6 fragment identification, TCP sequence number,
    /// ICMP echo identifier (low 16 bits).
    pub ident: u32,
    /// IPv4 options, zero-padded (End of Options) to a multiple of 4; at most 40 bytes.
    pub ipv4_options: Vec<u8>,
    /// IPv6 extension headers in order. When `frag` is set and no [`ExtHeader::Fragment`] is
    /// listed, a fragment header is appended at the end of the chain. A later fragment carries
    /// only the headers up to its fragment header.
    pub ipv6_ext: Vec<ExtHeader>,
    /// VLAN tags, outermost first (Ethernet builders only).
    pub vlans: Vec<Vlan>,
    /// Pad Ethernet frames to 60 bytes (the minimum without FCS), as they are on the wire.
    pub pad_ethernet: bool,
}

impl Default for BuildSpec {
    fn default() -> Self {
        BuildSpec {
            src: Ipv4Addr::new(10, 0, 0, 1).into(),
            dst: Ipv4Addr::new(10, 0, 0, 2).into(),
            tos: 0,
            ttl: 64,
            proto: proto::UDP,
            src_port: 1024,
            dst_port: 9,
            payload_len: 0,
            frag: None,
            ident: 0x1234,
            ipv4_options: Vec::new(),
            ipv6_ext: Vec::new(),
            vlans: Vec::new(),
            pad_ethernet: true,
        }
    }
}

impl BuildSpec {
    /// A TCP segment (ACK|PSH, no payload).
    pub fn tcp(
        src: impl Into<IpAddr>,
        src_port: u16,
        dst: impl Into<IpAddr>,
        dst_port: u16,
    ) -> Self {
        Self::with_ports(proto::TCP, src.into(), src_port, dst.into(), dst_port)
    }

    /// A UDP datagram (no payload).
    pub fn udp(
        src: impl Into<IpAddr>,
        src_port: u16,
        dst: impl Into<IpAddr>,
        dst_port: u16,
    ) -> Self {
        Self::with_ports(proto::UDP, src.into(), src_port, dst.into(), dst_port)
    }

    /// An ICMP (IPv4) or ICMPv6 (IPv6) echo request.
    pub fn icmp(src: impl Into<IpAddr>, dst: impl Into<IpAddr>) -> Self {
        let src = src.into();
        let proto = if src.is_ipv6() {
            proto::ICMPV6
        } else {
            proto::ICMP
        };
        BuildSpec {
            src,
            dst: dst.into(),
            proto,
            src_port: 0,
            dst_port: 0,
            ..BuildSpec::default()
        }
    }

    fn with_ports(proto: u8, src: IpAddr, src_port: u16, dst: IpAddr, dst_port: u16) -> Self {
        BuildSpec {
            src,
            dst,
            proto,
            src_port,
            dst_port,
            ..BuildSpec::default()
        }
    }

    pub fn with_tos(mut self, tos: u8) -> Self {
        self.tos = tos;
        self
    }

    pub fn with_payload(mut self, len: usize) -> Self {
        self.payload_len = len;
        self
    }

    /// Makes this a fragment at `offset` bytes (a multiple of 8) with "more fragments" = `more`.
    pub fn with_frag(mut self, offset: u16, more: bool) -> Self {
        self.frag = Some(FragSpec { offset, more });
        self
    }

    /// Adds a VLAN tag inside the ones already given (the first call gives the outer tag).
    pub fn with_vlan(mut self, vlan: Vlan) -> Self {
        self.vlans.push(vlan);
        self
    }

    /// Appends an IPv6 extension header to the chain.
    pub fn with_ext(mut self, ext: ExtHeader) -> Self {
        self.ipv6_ext.push(ext);
        self
    }

    pub fn with_ipv4_options(mut self, options: &[u8]) -> Self {
        self.ipv4_options = options.to_vec();
        self
    }

    /// True if the spec builds IPv6.
    pub fn is_ipv6(&self) -> bool {
        self.src.is_ipv6()
    }

    /// True if the transport header is emitted (not a later fragment).
    fn has_l4_header(&self) -> bool {
        !matches!(self.frag, Some(f) if f.offset != 0)
    }
}

/// Builds the IP packet of `spec` (IPv4 or IPv6 by its addresses) into `buf` (cleared first).
///
/// # Panics
/// See [`build_ipv4`] and [`build_ipv6`].
pub fn build_ip(buf: &mut Vec<u8>, spec: &BuildSpec) {
    buf.clear();
    push_ip(buf, spec);
}

/// Builds an IPv4 packet into `buf` (cleared first).
///
/// # Panics
/// If an address is not IPv4, the options exceed 40 bytes, the fragment offset is not a multiple
/// of 8, or the packet exceeds 65535 bytes.
pub fn build_ipv4(buf: &mut Vec<u8>, spec: &BuildSpec) {
    buf.clear();
    push_ipv4(buf, spec);
}

/// Builds an IPv6 packet into `buf` (cleared first).
///
/// # Panics
/// If an address is not IPv6, an AH has Payload Len 0, the fragment offset is not a multiple of
/// 8, or the payload length exceeds 65535 bytes.
pub fn build_ipv6(buf: &mut Vec<u8>, spec: &BuildSpec) {
    buf.clear();
    push_ipv6(buf, spec);
}

/// Builds an Ethernet II frame (with `spec.vlans`) carrying the IP packet of `spec` into `buf`
/// (cleared first), padded to 60 bytes if `spec.pad_ethernet`.
///
/// # Panics
/// See [`build_ip`].
pub fn build_ethernet(buf: &mut Vec<u8>, spec: &BuildSpec) {
    buf.clear();
    let l3 = if spec.is_ipv6() {
        ethertype::IPV6
    } else {
        ethertype::IPV4
    };
    push_ethernet_header(buf, &spec.vlans, l3);
    push_ip(buf, spec);
    if spec.pad_ethernet {
        pad_frame(buf);
    }
}

/// Builds an Ethernet II frame with any EtherType and payload (ARP, LLDP, ...) into `buf`
/// (cleared first), padded to 60 bytes if `pad`.
pub fn build_ethernet_frame(
    buf: &mut Vec<u8>,
    vlans: &[Vlan],
    ethertype: u16,
    payload: &[u8],
    pad: bool,
) {
    buf.clear();
    push_ethernet_header(buf, vlans, ethertype);
    buf.extend_from_slice(payload);
    if pad {
        pad_frame(buf);
    }
}

const DST_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x02];
const SRC_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x01];
const MIN_FRAME: usize = 60;

fn push_ethernet_header(buf: &mut Vec<u8>, vlans: &[Vlan], ethertype: u16) {
    buf.extend_from_slice(&DST_MAC);
    buf.extend_from_slice(&SRC_MAC);
    for v in vlans {
        buf.extend_from_slice(&v.tpid.to_be_bytes());
        let tci = u16::from(v.pcp & 7) << 13 | (v.vid & 0x0fff);
        buf.extend_from_slice(&tci.to_be_bytes());
    }
    buf.extend_from_slice(&ethertype.to_be_bytes());
}

fn pad_frame(buf: &mut Vec<u8>) {
    if buf.len() < MIN_FRAME {
        buf.resize(MIN_FRAME, 0);
    }
}

fn push_ip(buf: &mut Vec<u8>, spec: &BuildSpec) {
    if spec.is_ipv6() {
        push_ipv6(buf, spec);
    } else {
        push_ipv4(buf, spec);
    }
}

fn frag_field(spec: &BuildSpec) -> u16 {
    match spec.frag {
        Some(f) => {
            assert!(
                f.offset % 8 == 0,
                "fragment offset {} is not a multiple of 8",
                f.offset
            );
            f.offset | u16::from(f.more)
        }
        None => 0,
    }
}

fn push_ipv4(buf: &mut Vec<u8>, spec: &BuildSpec) {
    let (IpAddr::V4(src), IpAddr::V4(dst)) = (spec.src, spec.dst) else {
        panic!(
            "build_ipv4 needs IPv4 addresses, got {} and {}",
            spec.src, spec.dst
        );
    };
    let options_len = spec.ipv4_options.len().div_ceil(4) * 4;
    assert!(options_len <= 40, "IPv4 options longer than 40 bytes");
    let start = buf.len();
    let header_len = 20 + options_len;
    buf.push(0x40 | (header_len / 4) as u8);
    buf.push(spec.tos);
    buf.extend_from_slice(&[0, 0]); // total length, below
    buf.extend_from_slice(&(spec.ident as u16).to_be_bytes());
    // IPv4 keeps the offset in 8-byte units below three flag bits: RF, DF, MF.
    let flags_offset = match spec.frag {
        Some(_) => {
            let f = frag_field(spec);
            (f >> 3) | (f & 1) << 13
        }
        None => 0x4000,
    };
    buf.extend_from_slice(&flags_offset.to_be_bytes());
    buf.extend_from_slice(&[spec.ttl, spec.proto, 0, 0]);
    buf.extend_from_slice(&src.octets());
    buf.extend_from_slice(&dst.octets());
    buf.extend_from_slice(&spec.ipv4_options);
    buf.resize(start + header_len, 0);
    push_transport(buf, spec, spec.has_l4_header());
    let total = u16::try_from(buf.len() - start).expect("IPv4 packet longer than 65535 bytes");
    buf[start + 2..start + 4].copy_from_slice(&total.to_be_bytes());
    let c = checksum::internet(&buf[start..start + header_len]);
    buf[start + 10..start + 12].copy_from_slice(&c.to_be_bytes());
}

fn push_ipv6(buf: &mut Vec<u8>, spec: &BuildSpec) {
    let (IpAddr::V6(src), IpAddr::V6(dst)) = (spec.src, spec.dst) else {
        panic!(
            "build_ipv6 needs IPv6 addresses, got {} and {}",
            spec.src, spec.dst
        );
    };
    let mut chain = spec.ipv6_ext.clone();
    if spec.frag.is_some() && !chain.contains(&ExtHeader::Fragment) {
        chain.push(ExtHeader::Fragment);
    }
    let next_of = |i: usize| chain.get(i).map_or(spec.proto, |e| e.number());
    // A later fragment carries the headers up to its fragment header only.
    let emitted = if spec.has_l4_header() {
        chain.len()
    } else {
        chain
            .iter()
            .position(|e| *e == ExtHeader::Fragment)
            .map_or(chain.len(), |i| i + 1)
    };

    let start = buf.len();
    let tc = spec.tos;
    buf.extend_from_slice(&[0x60 | tc >> 4, tc << 4, 0, 0]);
    buf.extend_from_slice(&[0, 0]); // payload length, below
    buf.extend_from_slice(&[next_of(0), spec.ttl]);
    buf.extend_from_slice(&src.octets());
    buf.extend_from_slice(&dst.octets());
    for (i, ext) in chain.iter().take(emitted).enumerate() {
        let next = next_of(i + 1);
        let at = buf.len();
        match *ext {
            ExtHeader::HopByHop(n) | ExtHeader::DestOptions(n) => buf.extend_from_slice(&[next, n]),
            ExtHeader::Routing(n) => buf.extend_from_slice(&[next, n, 253, 0]),
            ExtHeader::Auth(n) => {
                assert!(n >= 1, "an AH needs Payload Len ≥ 1 (12 bytes)");
                buf.extend_from_slice(&[next, n, 0, 0]);
                buf.extend_from_slice(&spec.ident.to_be_bytes()); // SPI
            }
            ExtHeader::Fragment => {
                buf.extend_from_slice(&[next, 0]);
                buf.extend_from_slice(&frag_field(spec).to_be_bytes());
                buf.extend_from_slice(&spec.ident.to_be_bytes());
            }
        }
        buf.resize(at + ext.len(), 0);
    }
    push_transport(buf, spec, spec.has_l4_header());
    let payload_len = u16::try_from(buf.len() - start - 40)
        .expect("IPv6 payload longer than 65535 bytes (jumbograms are not built)");
    buf[start + 4..start + 6].copy_from_slice(&payload_len.to_be_bytes());
}

/// Appends the transport header (if `with_header`) and the payload, with its checksum.
fn push_transport(buf: &mut Vec<u8>, spec: &BuildSpec, with_header: bool) {
    let start = buf.len();
    let sp = spec.src_port.to_be_bytes();
    let dp = spec.dst_port.to_be_bytes();
    // Offset of the checksum field, and whether a pseudo-header is included.
    let mut checksum_at: Option<(usize, bool)> = None;
    if with_header {
        match spec.proto {
            proto::TCP => {
                buf.extend_from_slice(&sp);
                buf.extend_from_slice(&dp);
                buf.extend_from_slice(&spec.ident.to_be_bytes()); // sequence number
                buf.extend_from_slice(&[0, 0, 0, 0]); // acknowledgement number
                buf.extend_from_slice(&[0x50, 0x18, 0xff, 0xff]); // 20 bytes, PSH|ACK, window
                buf.extend_from_slice(&[0, 0, 0, 0]); // checksum, urgent pointer
                checksum_at = Some((16, true));
            }
            proto::UDP | proto::UDP_LITE => {
                buf.extend_from_slice(&sp);
                buf.extend_from_slice(&dp);
                // UDP: length; UDP-Lite: checksum coverage, 0 = everything.
                let len = if spec.proto == proto::UDP {
                    u16::try_from(8 + spec.payload_len).unwrap_or(0)
                } else {
                    0
                };
                buf.extend_from_slice(&len.to_be_bytes());
                buf.extend_from_slice(&[0, 0]);
                checksum_at = Some((6, true));
            }
            proto::SCTP | proto::DCCP => {
                // Ports, then the rest of a 12-byte header left zero (checksums not computed).
                buf.extend_from_slice(&sp);
                buf.extend_from_slice(&dp);
                buf.extend_from_slice(&[0; 8]);
            }
            proto::ICMP if !spec.is_ipv6() => {
                buf.extend_from_slice(&[8, 0, 0, 0]); // echo request
                buf.extend_from_slice(&(spec.ident as u16).to_be_bytes());
                buf.extend_from_slice(&1u16.to_be_bytes());
                checksum_at = Some((2, false));
            }
            proto::ICMPV6 if spec.is_ipv6() => {
                buf.extend_from_slice(&[128, 0, 0, 0]); // echo request
                buf.extend_from_slice(&(spec.ident as u16).to_be_bytes());
                buf.extend_from_slice(&1u16.to_be_bytes());
                checksum_at = Some((2, true));
            }
            _ => {}
        }
    }
    buf.extend((0..spec.payload_len).map(|i| i as u8));
    if let Some((at, pseudo)) = checksum_at {
        let seg = &buf[start..];
        let initial = if pseudo {
            checksum::pseudo_header(spec.src, spec.dst, spec.proto, seg.len() as u32)
        } else {
            0
        };
        let mut c = checksum::finish(checksum::accumulate(initial, seg));
        if c == 0 && spec.proto == proto::UDP {
            c = 0xffff; // 0 means "no checksum" in UDP
        }
        buf[start + at..start + at + 2].copy_from_slice(&c.to_be_bytes());
    }
}
