//! `--placement address`: each subscriber placed on a worker by its address, and each received
//! frame steered by the kernel to the worker of the address it carries, so a subscriber's
//! frames, both directions, are received and scheduled by one worker with no hand-over.
//!
//! ## Principles
//! * **One function decides, applied in two places.** The steering key of an address is, for
//!   IPv4, the address; for IPv6, bits 32–55 (what an ISP's /56 or longer delegations differ
//!   in below its /32; the subnet and interface bits are left out, so every address of a
//!   subscriber's /56 has the key of the prefix). A key goes to worker
//!   `((key × 0x9E3779B1 mod 2³²) >> 16) mod N` (Knuth's multiplicative hash, in the 32-bit
//!   arithmetic classic BPF computes in). [`placement`] puts each top-level class on the
//!   worker of its first address in the policy's filters (the destination on the download
//!   side, the source on the upload side); [`fanout_program`] is a classic BPF program that
//!   the interface's AF_PACKET fanout group runs on each frame (`PACKET_FANOUT_CBPF`),
//!   computing the same worker from the frame's destination (frames arriving on the first
//!   interface: downloads) or source (the second interface: uploads). A subscriber's download
//!   and upload classes carry the same addresses, so they are placed on the same worker.
//! * **What does not fit is still correct, only slower.** A subscriber whose addresses hash to
//!   different workers, a top-level class holding many subscribers (a site: subtrees are never
//!   split, `core/src/shard`), an address inside a prefix shorter than the key, non-IP frames,
//!   and AF_XDP (whose queues the NIC chooses) land on some worker and are handed to the owner
//!   as with flow steering (counted in `stat`'s `handed_off`).
//! * **The uplink is shared as before.** The root's rate is split between the workers' gates
//!   and one atomic pool (`core/src/shard`): each worker mints its guarantee plus an equal part
//!   of the spare and lends what it does not use, so the aggregate stays within the root's
//!   rate whatever the placement.
//!
//! Sources: Linux net/packet/af_packet.c (`fanout_demux_bpf`: the program's return value
//! modulo the group's size picks the member, in the order members joined; loads at
//! `SKF_NET_OFF` read from the network header), Knuth, TAOCP vol. 3, §6.4 (multiplicative
//! hashing).

use std::net::IpAddr;

use linkshare_config::Policy;
use linkshare_core::shard::Placement;

/// Which address of a frame steers it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Side {
    /// Downloads (received on the first interface): the destination.
    Dst,
    /// Uploads (received on the second interface): the source.
    Src,
}

impl Side {
    /// The side of direction `dir` (0: forward, received on the first interface).
    pub(crate) fn of_dir(dir: usize) -> Side {
        if dir == 0 {
            Side::Dst
        } else {
            Side::Src
        }
    }
}

const MUL: u32 = 0x9E37_79B1;
const V6_MASK: u32 = 0xFFFF_FF00;

/// The steering key of an address.
pub(crate) fn key(a: IpAddr) -> u32 {
    match a {
        IpAddr::V4(v4) => u32::from(v4),
        IpAddr::V6(v6) => {
            let o = v6.octets();
            u32::from_be_bytes([o[4], o[5], o[6], o[7]]) & V6_MASK
        }
    }
}

/// The worker of a key among `n`.
pub(crate) fn worker_of(key: u32, n: usize) -> usize {
    (key.wrapping_mul(MUL) >> 16) as usize % n.max(1)
}

/// Each top-level class on the worker of its first address (on `side`) in `policy`'s filters;
/// a top-level class without one by its name's hash. `n` workers.
pub(crate) fn placement(policy: &Policy, side: Side, n: usize) -> Placement {
    let classes = policy.classes();
    let roots: Vec<usize> = (0..classes.len())
        .filter(|&i| classes[i].parent_id.is_none())
        .collect();
    let shared = match roots.as_slice() {
        [r] if !classes[*r].children.is_empty() => Some(*r),
        _ => None,
    };
    let top_of = |mut c: usize| -> usize {
        for _ in 0..classes.len() {
            match classes.get(c).and_then(|x| x.parent_id) {
                Some(p) if Some(p as usize) != shared => c = p as usize,
                _ => break,
            }
        }
        c
    };
    let mut out = vec![u16::MAX; classes.len()];
    for f in policy.filters() {
        let prefix = match side {
            Side::Dst => f.spec.dst,
            Side::Src => f.spec.src,
        };
        let Some(prefix) = prefix else { continue };
        let top = top_of(f.spec.class as usize);
        if let Some(slot) = out.get_mut(top) {
            if *slot == u16::MAX {
                *slot = worker_of(key(prefix.addr), n) as u16;
            }
        }
    }
    Placement::PerClass(out)
}

/// One classic BPF instruction (`struct sock_filter`).
pub(crate) type Insn = libc::sock_filter;

const LD_B_ABS: u16 = 0x30; // BPF_LD | BPF_B | BPF_ABS
const LD_W_ABS: u16 = 0x20; // BPF_LD | BPF_W | BPF_ABS
const ALU_RSH_K: u16 = 0x74; // BPF_ALU | BPF_RSH | BPF_K
const ALU_AND_K: u16 = 0x54;
const ALU_MUL_K: u16 = 0x24;
const ALU_MOD_K: u16 = 0x94;
const JMP_JA: u16 = 0x05;
const JMP_JEQ_K: u16 = 0x15;
const RET_A: u16 = 0x16;
const RET_K: u16 = 0x06;
/// Loads at `SKF_NET_OFF + k` read byte `k` of the network header.
const SKF_NET_OFF: i32 = -0x0010_0000;

fn insn(code: u16, jt: u8, jf: u8, k: u32) -> Insn {
    Insn { code, jt, jf, k }
}

fn net(off: u32) -> u32 {
    (SKF_NET_OFF as u32).wrapping_add(off)
}

/// The fanout program of `n` (≥ 2) workers for frames steered by `side`: returns
/// [`worker_of`] of the frame's [`key`]; a frame that is neither IPv4 nor IPv6 goes to 0.
pub(crate) fn fanout_program(side: Side, n: usize) -> Vec<Insn> {
    // IPv4: source at byte 12, destination at 16. IPv6: source at 8, destination at 24; the
    // key's word is the address's bytes 4..8.
    let (v4, v6) = match side {
        Side::Dst => (16, 28),
        Side::Src => (12, 12),
    };
    vec![
        insn(LD_B_ABS, 0, 0, net(0)),           // 0: A = version and IHL
        insn(ALU_RSH_K, 0, 0, 4),               // 1: A = version
        insn(JMP_JEQ_K, 0, 2, 4),               // 2: IPv4? else 5
        insn(LD_W_ABS, 0, 0, net(v4)),          // 3: A = the IPv4 address
        insn(JMP_JA, 0, 0, 3),                  // 4: to 8
        insn(JMP_JEQ_K, 0, 6, 6),               // 5: IPv6? else 12
        insn(LD_W_ABS, 0, 0, net(v6)),          // 6: A = bytes 4..8 of the IPv6 address
        insn(ALU_AND_K, 0, 0, V6_MASK),         // 7: bits 32..55
        insn(ALU_MUL_K, 0, 0, MUL),             // 8
        insn(ALU_RSH_K, 0, 0, 16),              // 9
        insn(ALU_MOD_K, 0, 0, n.max(1) as u32), // 10
        insn(RET_A, 0, 0, 0),                   // 11
        insn(RET_K, 0, 0, 0),                   // 12: not IP
    ]
}

#[cfg(test)]
#[path = "address_tests.rs"]
mod tests;
