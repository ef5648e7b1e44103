//! The flow hash: a small keyed mixer over the 5-tuple.
//!
//! The tuple is packed into at most five 64-bit words (IPv4: one word of addresses; IPv6: four)
//! plus one word of `family | proto | ports`. Each word is absorbed with a xor–multiply–xorshift
//! step, which is a bijection of the state for a fixed word, so two tuples differing in a single
//! word never collide before truncation. The state starts from the key passed through the
//! MurmurHash3 64-bit finaliser and ends with it, so a different key gives an unrelated hash.
//!
//! Fragments hash without ports, so the first fragment (which has them) and the later ones (which
//! do not) share a flow. For IPv6 fragments the protocol is left out too: when extension headers
//! follow the fragment header, the first fragment's walk reaches the transport protocol while a
//! later fragment only knows the fragment header's next header.

use std::net::IpAddr;

use crate::packet::{Fragment, PacketMeta, L3};

/// An arbitrary odd constant (2^64 / golden ratio).
const MUL: u64 = 0x9e37_79b9_7f4a_7c15;
/// Initial state before the key (hex digits of pi).
const SEED: u64 = 0x243f_6a88_85a3_08d3;

/// Flow hash of a packet's 5-tuple under `key` (3-tuple for fragments). Deterministic, and
/// independent of `vlan`, `len`, `tos` and `issue`.
pub fn flow_hash(meta: &PacketMeta, key: u64) -> u32 {
    let mut h = Mixer::new(key);
    match (meta.src, meta.dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            h.absorb(u64::from(u32::from(s)) << 32 | u64::from(u32::from(d)))
        }
        (s, d) => {
            for a in [s, d] {
                let v = match a {
                    IpAddr::V4(v4) => u128::from(v4.to_ipv6_mapped()),
                    IpAddr::V6(v6) => u128::from(v6),
                };
                h.absorb((v >> 64) as u64);
                h.absorb(v as u64);
            }
        }
    }
    let family: u64 = match meta.l3 {
        L3::Ipv4 => 4,
        L3::Ipv6 => 6,
        L3::Other(ethertype) => 0x1_0000 | u64::from(ethertype),
    };
    let fragment = meta.frag != Fragment::None;
    let proto = if fragment && meta.l3 == L3::Ipv6 {
        0
    } else {
        meta.proto
    };
    let ports = if fragment {
        0
    } else {
        u64::from(meta.src_port) << 16 | u64::from(meta.dst_port)
    };
    h.absorb(family << 40 | u64::from(proto) << 32 | ports);
    h.finish()
}

struct Mixer(u64);

impl Mixer {
    fn new(key: u64) -> Self {
        Mixer(fmix64(key ^ SEED))
    }

    fn absorb(&mut self, word: u64) {
        let x = (self.0 ^ word).wrapping_mul(MUL);
        self.0 = x ^ (x >> 29);
    }

    fn finish(self) -> u32 {
        let x = fmix64(self.0);
        (x ^ (x >> 32)) as u32
    }
}

/// MurmurHash3's 64-bit finaliser: every input bit affects every output bit.
fn fmix64(mut x: u64) -> u64 {
    x ^= x >> 33;
    x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
    x ^= x >> 33;
    x = x.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    x ^ (x >> 33)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{Ipv4Addr, Ipv6Addr};

    fn v4(src: [u8; 4], dst: [u8; 4], proto: u8, sp: u16, dp: u16) -> PacketMeta {
        PacketMeta {
            src: Ipv4Addr::from(src).into(),
            dst: Ipv4Addr::from(dst).into(),
            proto,
            src_port: sp,
            dst_port: dp,
            ..PacketMeta::default()
        }
    }

    #[test]
    fn deterministic_and_sensitive_to_every_field() {
        let base = v4([10, 0, 0, 1], [10, 0, 0, 2], 6, 1000, 80);
        let h = flow_hash(&base, 7);
        assert_eq!(h, flow_hash(&base, 7));
        let variants = [
            v4([10, 0, 0, 3], [10, 0, 0, 2], 6, 1000, 80),
            v4([10, 0, 0, 1], [10, 0, 0, 3], 6, 1000, 80),
            v4([10, 0, 0, 1], [10, 0, 0, 2], 17, 1000, 80),
            v4([10, 0, 0, 1], [10, 0, 0, 2], 6, 1001, 80),
            v4([10, 0, 0, 1], [10, 0, 0, 2], 6, 1000, 81),
            v4([10, 0, 0, 2], [10, 0, 0, 1], 6, 80, 1000),
        ];
        for v in variants {
            assert_ne!(flow_hash(&v, 7), h, "{v:?}");
        }
        assert_ne!(flow_hash(&base, 8), h);
    }

    #[test]
    fn ignores_fields_outside_the_tuple() {
        let base = v4([10, 0, 0, 1], [10, 0, 0, 2], 6, 1000, 80);
        let other = PacketMeta {
            len: 1500,
            tos: 0xb8,
            vlan: Some(12),
            flow_hash: 99,
            issue: Some(crate::packet::ParseIssue::TruncatedL4),
            ..base
        };
        assert_eq!(flow_hash(&base, 3), flow_hash(&other, 3));
    }

    #[test]
    fn fragments_share_a_flow() {
        let first = PacketMeta {
            frag: Fragment::First,
            ..v4([10, 0, 0, 1], [10, 0, 0, 2], 17, 5000, 53)
        };
        let later = PacketMeta {
            frag: Fragment::Later,
            ..v4([10, 0, 0, 1], [10, 0, 0, 2], 17, 0, 0)
        };
        assert_eq!(flow_hash(&first, 1), flow_hash(&later, 1));
        // ... but IPv4 fragments of different protocols do not.
        let other_proto = PacketMeta { proto: 6, ..later };
        assert_ne!(flow_hash(&other_proto, 1), flow_hash(&later, 1));

        let a: Ipv6Addr = "2001:db8::1".parse().unwrap();
        let b: Ipv6Addr = "2001:db8::2".parse().unwrap();
        let first6 = PacketMeta {
            l3: L3::Ipv6,
            src: a.into(),
            dst: b.into(),
            proto: 6,
            src_port: 1,
            dst_port: 2,
            frag: Fragment::First,
            ..PacketMeta::default()
        };
        let later6 = PacketMeta {
            proto: 60,
            src_port: 0,
            dst_port: 0,
            frag: Fragment::Later,
            ..first6
        };
        assert_eq!(flow_hash(&first6, 1), flow_hash(&later6, 1));
    }

    #[test]
    fn families_do_not_alias() {
        // 10.0.0.1 and its v4-mapped IPv6 form hash differently (the family is in the tuple).
        let m4 = v4([10, 0, 0, 1], [10, 0, 0, 2], 6, 1, 2);
        let m6 = PacketMeta {
            l3: L3::Ipv6,
            src: Ipv4Addr::new(10, 0, 0, 1).to_ipv6_mapped().into(),
            dst: Ipv4Addr::new(10, 0, 0, 2).to_ipv6_mapped().into(),
            ..m4
        };
        assert_ne!(flow_hash(&m4, 0), flow_hash(&m6, 0));
    }
}
