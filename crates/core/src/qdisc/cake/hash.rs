//! CAKE's flow isolation modes and keyed hashes (Linux net/sched/sch_cake.c `cake_hash`;
//! tc-cake(8) "FLOW ISOLATION PARAMETERS"; "Piece of CAKE" §III-B).
//!
//! A packet gets three hashes under the instance's key: its flow (the 5-tuple), its source host
//! and its destination host. The isolation mode picks what a *queue* is — a flow, a host or
//! nothing — and, for the dual and triple modes, which host counts scale the flows' quanta so
//! that hosts, not flows, share fairly:
//!
//! | mode           | queue per           | quantum divided by bulk flows of   |
//! |----------------|---------------------|------------------------------------|
//! | flowblind      | nothing (one queue) | —                                  |
//! | srchost        | source address      | —                                  |
//! | dsthost        | destination address | —                                  |
//! | hosts          | address pair        | —                                  |
//! | flows          | 5-tuple             | —                                  |
//! | dual-srchost   | 5-tuple             | its source host                    |
//! | dual-dsthost   | 5-tuple             | its destination host               |
//! | triple-isolate | 5-tuple             | the larger of its source's and destination's |
//!
//! Hosts are the addresses seen on this interface. The kernel's `nat` option looks the
//! pre-NAT addresses up in conntrack; linkshare does not: place CAKE where the hosts' own
//! addresses are visible (the LAN side of a NAT) for per-host fairness.
//!
//! The key is per instance (from `seed`), so two instances hash differently and a simulation
//! is reproducible. Hashing is O(1): the flow hash mixes the parser's 5-tuple hash with the
//! key; a host hash is one 64-bit finaliser per address word.

use std::net::IpAddr;

use crate::packet::PacketMeta;

/// `isolation = "…"`: the kernel's `CAKE_FLOW_*` values.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Hash)]
pub enum FlowMode {
    Flowblind = 0,
    Srchost = 1,
    Dsthost = 2,
    Hosts = 3,
    Flows = 4,
    DualSrchost = 5,
    DualDsthost = 6,
    #[default]
    TripleIsolate = 7,
}

const SRC_IP: u8 = 1;
const DST_IP: u8 = 2;
const FLOWS: u8 = 4;

impl FlowMode {
    pub const KNOWN: &'static [(&'static str, FlowMode)] = &[
        ("flowblind", FlowMode::Flowblind),
        ("srchost", FlowMode::Srchost),
        ("dsthost", FlowMode::Dsthost),
        ("hosts", FlowMode::Hosts),
        ("flows", FlowMode::Flows),
        ("dual-srchost", FlowMode::DualSrchost),
        ("dual-dsthost", FlowMode::DualDsthost),
        ("triple-isolate", FlowMode::TripleIsolate),
    ];

    pub fn name(self) -> &'static str {
        Self::KNOWN
            .iter()
            .find(|(_, m)| *m == self)
            .map_or("triple-isolate", |(n, _)| n)
    }

    fn bits(self) -> u8 {
        self as u8
    }

    /// Flows count against their source host (`cake_dsrc`).
    #[inline]
    pub fn dual_src(self) -> bool {
        self.bits() & (FLOWS | SRC_IP) == FLOWS | SRC_IP
    }

    /// Flows count against their destination host (`cake_ddst`).
    #[inline]
    pub fn dual_dst(self) -> bool {
        self.bits() & (FLOWS | DST_IP) == FLOWS | DST_IP
    }

    /// Needs the host hashes at all.
    #[inline]
    fn hashes_hosts(self) -> bool {
        self.bits() & (SRC_IP | DST_IP) != 0
    }
}

/// A packet's hashes.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct PacketHashes {
    /// What selects the queue (flow, host or host pair, by mode).
    pub flow: u32,
    pub srchost: u32,
    pub dsthost: u32,
}

/// MurmurHash3's 64-bit finaliser.
#[inline]
fn fmix64(mut x: u64) -> u64 {
    x ^= x >> 33;
    x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
    x ^= x >> 33;
    x = x.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    x ^ (x >> 33)
}

#[inline]
fn fold(x: u64) -> u32 {
    (x ^ (x >> 32)) as u32
}

/// Keyed hash of one address (`salt` separates source from destination).
#[inline]
fn host_hash(addr: IpAddr, key: u64, salt: u64) -> u32 {
    let h = match addr {
        IpAddr::V4(a) => fmix64(key ^ salt ^ u64::from(u32::from(a))),
        IpAddr::V6(a) => {
            let v = u128::from(a);
            fmix64(fmix64(key ^ salt ^ (v >> 64) as u64) ^ v as u64)
        }
    };
    fold(h)
}

/// The hashes of `meta` under `mode` and `key` (`cake_hash` before the table lookup).
#[inline]
pub fn hash_packet(meta: &PacketMeta, mode: FlowMode, key: u64) -> PacketHashes {
    if mode == FlowMode::Flowblind {
        return PacketHashes::default();
    }
    let (mut src, mut dst) = (0, 0);
    if mode.hashes_hosts() {
        src = host_hash(meta.src, key, 0x5a5a_0000_0000_0001);
        dst = host_hash(meta.dst, key, 0xa5a5_0000_0000_0002);
    }
    let bits = mode.bits();
    let flow = if bits & FLOWS != 0 {
        fold(fmix64(key ^ u64::from(meta.flow_hash)))
    } else {
        let mut f = 0;
        if bits & SRC_IP != 0 {
            f ^= src;
        }
        if bits & DST_IP != 0 {
            f ^= dst;
        }
        f
    };
    PacketHashes {
        flow,
        srchost: src,
        dsthost: dst,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    fn pkt(src: u8, dst: u8, port: u16) -> PacketMeta {
        PacketMeta {
            src: Ipv4Addr::new(10, 0, 0, src).into(),
            dst: Ipv4Addr::new(10, 0, 1, dst).into(),
            src_port: port,
            flow_hash: u32::from(src) << 24 | u32::from(dst) << 16 | u32::from(port),
            ..Default::default()
        }
    }

    #[test]
    fn modes_decide_what_a_queue_is() {
        let a = pkt(1, 1, 1000);
        let b = pkt(1, 1, 1001); // same hosts, other flow
        let c = pkt(2, 1, 1000); // other source
        let h = |m, p: &PacketMeta| hash_packet(p, m, 42).flow;
        assert_eq!(h(FlowMode::Flowblind, &a), h(FlowMode::Flowblind, &c));
        assert_eq!(h(FlowMode::Srchost, &a), h(FlowMode::Srchost, &b));
        assert_ne!(h(FlowMode::Srchost, &a), h(FlowMode::Srchost, &c));
        assert_eq!(h(FlowMode::Dsthost, &a), h(FlowMode::Dsthost, &c));
        assert_ne!(h(FlowMode::Hosts, &a), h(FlowMode::Hosts, &c));
        for m in [
            FlowMode::Flows,
            FlowMode::DualSrchost,
            FlowMode::TripleIsolate,
        ] {
            assert_ne!(h(m, &a), h(m, &b));
        }
        assert!(FlowMode::TripleIsolate.dual_src() && FlowMode::TripleIsolate.dual_dst());
        assert!(FlowMode::DualSrchost.dual_src() && !FlowMode::DualSrchost.dual_dst());
        assert!(!FlowMode::Hosts.dual_src() && !FlowMode::Flows.dual_dst());
    }

    #[test]
    fn the_key_changes_every_hash() {
        let a = pkt(1, 1, 1000);
        let x = hash_packet(&a, FlowMode::TripleIsolate, 1);
        let y = hash_packet(&a, FlowMode::TripleIsolate, 2);
        assert_ne!(x.flow, y.flow);
        assert_ne!(x.srchost, y.srchost);
        assert_ne!(x.dsthost, y.dsthost);
        assert_eq!(x, hash_packet(&a, FlowMode::TripleIsolate, 1));
    }
}
