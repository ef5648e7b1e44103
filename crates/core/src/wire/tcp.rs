//! The TCP header facts a discipline compares between segments of one connection
//! ([`TcpInfo`]: CAKE's ACK filter), read from a frame's bytes (RFC 9293 §3.1 header layout;
//! options: RFC 7323 timestamps, RFC 2018 SACK, RFC 2385 MD5).
//!
//! Read on demand, not at parse time: [`PacketMeta`](crate::PacketMeta) stays small for every
//! packet, and only a discipline that needs the header (an ACK filter scanning one flow's
//! queue, as the kernel's `cake_get_tcphdr` reads each queued skb) pays for it. The frame is
//! found as [`parse_ethernet`](super::parse_ethernet) finds it (VLAN tags, PPPoE, MPLS); a
//! fragment, a truncated header or a data offset below 5 gives `None`. Options are walked as
//! the kernel walks them: EOL ends the list, NOP is skipped, a length below 2 or past the
//! header marks the segment as having unknown options (never dropped by the filter).

use super::bytes::{be16, be32, u8_at};
use super::{ethertype, ip_offset, ipv6, proto, Ipv4Packet, Ipv6Packet};
use crate::packet::{Fragment, PacketMeta, TcpInfo, L3};

const OPT_EOL: u8 = 0;
const OPT_NOP: u8 = 1;
const OPT_SACK: u8 = 5;
const OPT_TIMESTAMP: u8 = 8;
const OPT_MD5: u8 = 19;

/// The TCP facts of an Ethernet frame, or `None` if it is not an unfragmented TCP segment with
/// a complete header.
pub fn tcp_info(frame: &[u8]) -> Option<TcpInfo> {
    let (off, et) = ip_offset(frame)?;
    let l3 = match et {
        ethertype::IPV4 => L3::Ipv4,
        ethertype::IPV6 => L3::Ipv6,
        _ => return None,
    };
    ip_tcp_info(frame.get(off..)?, l3)
}

/// [`tcp_info`] of a frame already parsed into `meta`: the IP header is where the parser
/// found it (`meta.l3_offset`), nothing is walked again.
pub fn tcp_info_at(frame: &[u8], meta: &PacketMeta) -> Option<TcpInfo> {
    ip_tcp_info(frame.get(usize::from(meta.l3_offset)..)?, meta.l3)
}

/// The TCP facts of the IP packet `ip` (of family `l3`).
fn ip_tcp_info(ip: &[u8], l3: L3) -> Option<TcpInfo> {
    let l4 = match l3 {
        L3::Ipv4 => {
            let p = Ipv4Packet::new_checked(ip).ok()?;
            if p.protocol() != proto::TCP || p.frag_offset() != 0 || p.more_frags() {
                return None;
            }
            p.payload()
        }
        L3::Ipv6 => {
            let p = Ipv6Packet::new_checked(ip).ok()?;
            let payload = p.payload();
            let up = ipv6::walk_extensions(p.next_header(), payload);
            if up.proto != proto::TCP || up.issue.is_some() || up.frag != Fragment::None {
                return None;
            }
            payload.get(up.offset..)?
        }
        L3::Other(_) => return None,
    };
    segment_info(l4)
}

/// The facts of a TCP segment `seg` (header and payload, as far as the IP length reaches).
pub fn segment_info(seg: &[u8]) -> Option<TcpInfo> {
    let doff = usize::from(u8_at(seg, 12) >> 4) * 4;
    if doff < 20 || seg.len() < doff {
        return None;
    }
    let mut t = TcpInfo {
        seq: be32(seg, 4),
        ack: be32(seg, 8),
        flags: be16(seg, 12) & 0x0fff,
        payload: u32::try_from(seg.len() - doff).unwrap_or(u32::MAX),
        ..TcpInfo::default()
    };
    read_options(&seg[20..doff], &mut t);
    Some(t)
}

fn read_options(opts: &[u8], t: &mut TcpInfo) {
    let mut i = 0;
    while i < opts.len() {
        let kind = opts[i];
        match kind {
            OPT_EOL => return,
            OPT_NOP => {
                i += 1;
                continue;
            }
            _ => {}
        }
        let len = usize::from(u8_at(opts, i + 1));
        if len < 2 || i + len > opts.len() {
            t.other_options = true;
            return;
        }
        let body = &opts[i + 2..i + len];
        match kind {
            OPT_TIMESTAMP if len == 10 => t.tstamp = Some((be32(body, 0), be32(body, 4))),
            OPT_SACK if (len - 2) % 8 == 0 => {
                let n = ((len - 2) / 8).min(t.sack.len());
                for (k, block) in t.sack.iter_mut().enumerate().take(n) {
                    *block = (be32(body, k * 8), be32(body, k * 8 + 4));
                }
                t.sack_blocks = n as u8;
            }
            OPT_MD5 => {}
            _ => t.other_options = true,
        }
        i += len;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{build_ethernet, BuildSpec};
    use std::net::Ipv6Addr;

    /// A frame with a TCP header carrying `ack`, `flags`, options `opts` (a multiple of 4 bytes)
    /// and `payload` bytes of data.
    fn segment(spec: BuildSpec, ack: u32, flags: u8, opts: &[u8], payload: usize) -> Vec<u8> {
        let spec = BuildSpec {
            proto: proto::TCP,
            payload_len: opts.len() + payload,
            pad_ethernet: false,
            ..spec
        };
        let mut f = Vec::new();
        build_ethernet(&mut f, &spec);
        let (ip, _) = ip_offset(&f).unwrap();
        let l4 = if spec.src.is_ipv6() { ip + 40 } else { ip + 20 };
        f[l4 + 8..l4 + 12].copy_from_slice(&ack.to_be_bytes());
        f[l4 + 12] = (((20 + opts.len()) / 4) as u8) << 4;
        f[l4 + 13] = flags;
        f[l4 + 20..l4 + 20 + opts.len()].copy_from_slice(opts);
        f
    }

    fn ts(v: u32, e: u32) -> Vec<u8> {
        let mut o = vec![OPT_NOP, OPT_NOP, OPT_TIMESTAMP, 10];
        o.extend_from_slice(&v.to_be_bytes());
        o.extend_from_slice(&e.to_be_bytes());
        o
    }

    #[test]
    fn a_pure_ack_with_timestamps_and_sack() {
        let mut opts = ts(1000, 2000);
        opts.extend_from_slice(&[OPT_NOP, OPT_NOP, OPT_SACK, 18]);
        for x in [5000u32, 6000, 7000, 8000] {
            opts.extend_from_slice(&x.to_be_bytes());
        }
        let f = segment(
            BuildSpec::tcp([10, 0, 0, 1], 1, [10, 0, 0, 2], 2),
            4242,
            0x10,
            &opts,
            0,
        );
        let t = tcp_info(&f).unwrap();
        assert_eq!((t.ack, t.flags, t.payload), (4242, TcpInfo::ACK, 0));
        assert_eq!(t.tstamp, Some((1000, 2000)));
        assert_eq!(t.sack_blocks, 2);
        assert_eq!(&t.sack[..2], &[(5000, 6000), (7000, 8000)]);
        assert!(!t.other_options);
    }

    #[test]
    fn data_ipv6_and_unknown_options() {
        let v6 = BuildSpec::tcp(Ipv6Addr::LOCALHOST, 1, Ipv6Addr::LOCALHOST, 2);
        // Window scale (kind 3) is an option the filter does not know.
        let f = segment(v6, 7, 0x18, &[3, 3, 7, OPT_EOL], 100);
        let t = tcp_info(&f).unwrap();
        assert_eq!((t.ack, t.payload, t.flags), (7, 100, 0x18));
        assert!(t.other_options);
        // A malformed option length.
        let f = segment(
            BuildSpec::tcp([1, 1, 1, 1], 1, [2, 2, 2, 2], 2),
            1,
            0x10,
            &[8, 1, 0, 0],
            0,
        );
        assert!(tcp_info(&f).unwrap().other_options);
        // EOL ends the list: what follows is not read.
        let f = segment(
            BuildSpec::tcp([1, 1, 1, 1], 1, [2, 2, 2, 2], 2),
            1,
            0x10,
            &[0, 99, 0, 0],
            0,
        );
        assert!(!tcp_info(&f).unwrap().other_options);
    }

    #[test]
    fn not_tcp_or_not_readable() {
        let mut f = Vec::new();
        build_ethernet(&mut f, &BuildSpec::udp([1, 1, 1, 1], 1, [2, 2, 2, 2], 2));
        assert_eq!(tcp_info(&f), None);
        // A data offset past the segment.
        let mut f = segment(
            BuildSpec::tcp([1, 1, 1, 1], 1, [2, 2, 2, 2], 2),
            1,
            0x10,
            &[],
            0,
        );
        let (ip, _) = ip_offset(&f).unwrap();
        f[ip + 32] = 0xf0;
        assert_eq!(tcp_info(&f), None);
        assert_eq!(tcp_info(&f[..20]), None);
        assert_eq!(segment_info(&[0; 10]), None);
    }
}
