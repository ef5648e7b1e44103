//! The steering key, the placement and the fanout program agree: the program is run by a
//! small interpreter of the classic BPF instructions it uses, on IPv4 and IPv6 headers.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use super::*;

/// Runs `prog` on a frame whose network header is `pkt` (loads at `SKF_NET_OFF + k`).
fn run(prog: &[Insn], pkt: &[u8]) -> u32 {
    let mut a: u32 = 0;
    let mut pc = 0usize;
    let load = |k: u32, size: usize| -> Option<u32> {
        let off = k.wrapping_sub(SKF_NET_OFF as u32) as usize;
        let b = pkt.get(off..off + size)?;
        Some(b.iter().fold(0u32, |acc, &x| (acc << 8) | u32::from(x)))
    };
    loop {
        let i = prog[pc];
        pc += 1;
        match i.code {
            LD_B_ABS => match load(i.k, 1) {
                Some(v) => a = v,
                None => return 0,
            },
            LD_W_ABS => match load(i.k, 4) {
                Some(v) => a = v,
                None => return 0,
            },
            ALU_RSH_K => a >>= i.k,
            ALU_AND_K => a &= i.k,
            ALU_MUL_K => a = a.wrapping_mul(i.k),
            ALU_MOD_K => a %= i.k,
            JMP_JA => pc += i.k as usize,
            JMP_JEQ_K => pc += usize::from(if a == i.k { i.jt } else { i.jf }),
            RET_A => return a,
            RET_K => return i.k,
            c => panic!("opcode {c:#x} not expected"),
        }
    }
}

fn v4_header(src: Ipv4Addr, dst: Ipv4Addr) -> Vec<u8> {
    let mut h = vec![0u8; 20];
    h[0] = 0x45;
    h[12..16].copy_from_slice(&src.octets());
    h[16..20].copy_from_slice(&dst.octets());
    h
}

fn v6_header(src: Ipv6Addr, dst: Ipv6Addr) -> Vec<u8> {
    let mut h = vec![0u8; 40];
    h[0] = 0x60;
    h[8..24].copy_from_slice(&src.octets());
    h[24..40].copy_from_slice(&dst.octets());
    h
}

#[test]
fn the_program_picks_the_worker_of_the_key_in_both_directions() {
    let other4 = Ipv4Addr::new(192, 0, 2, 1);
    let other6: Ipv6Addr = "2001:db8:ffff::1".parse().unwrap();
    for n in [2usize, 3, 8] {
        let down = fanout_program(Side::Dst, n);
        let up = fanout_program(Side::Src, n);
        let mut seen = vec![0usize; n];
        for i in 0..2000u32 {
            let sub = Ipv4Addr::from(0x6440_0000 + i); // 100.64.0.0 + i
            let want = worker_of(key(IpAddr::V4(sub)), n);
            seen[want] += 1;
            assert_eq!(run(&down, &v4_header(other4, sub)) as usize, want);
            assert_eq!(run(&up, &v4_header(sub, other4)) as usize, want);
            // Any address of a subscriber's /56 has the key of the prefix.
            let p6 = Ipv6Addr::new(0x2001, 0xdb8, 0x1000 + i as u16, 0x4200, 0, 0, 0, 0);
            let in6 = Ipv6Addr::new(0x2001, 0xdb8, 0x1000 + i as u16, 0x42ab, 1, 2, 3, 4);
            let want6 = worker_of(key(IpAddr::V6(p6)), n);
            assert_eq!(key(IpAddr::V6(p6)), key(IpAddr::V6(in6)));
            assert_eq!(run(&down, &v6_header(other6, in6)) as usize, want6);
            assert_eq!(run(&up, &v6_header(in6, other6)) as usize, want6);
        }
        // Consecutive addresses spread over every worker, none with less than half its share.
        assert!(seen.iter().all(|&c| c > 2000 / n / 2), "{seen:?}");
    }
    // Not IP (an ARP header), or cut short: worker 0.
    let prog = fanout_program(Side::Dst, 4);
    assert_eq!(run(&prog, &[0x00, 0x01, 0x08, 0x00]), 0);
    assert_eq!(run(&prog, &[0x45, 0, 0, 0]), 0);
}

const POLICY: &str = r#"
qdisc = "htb"
default = "other"
[[class]]
name = "root"
rate = "100mbit"
[[class]]
name = "other"
parent = "root"
rate = "1mbit"
[[class]]
name = "site"
parent = "root"
rate = "10mbit"
[[class]]
name = "alice"
parent = "site"
rate = "1mbit"
[[class]]
name = "bob"
parent = "root"
rate = "1mbit"
[[class]]
name = "carol"
parent = "root"
rate = "1mbit"
[[filter]]
class = "alice"
dst = "100.64.0.7"
[[filter]]
class = "bob"
dst = "100.64.0.9"
[[filter]]
class = "bob"
dst = "100.64.0.10"
[[filter]]
class = "carol"
src = "100.64.0.11"
"#;

#[test]
fn a_top_level_class_goes_where_its_first_address_steers() {
    let p = Policy::parse(POLICY, "p.toml").unwrap_or_else(|e| panic!("{e:?}"));
    let id = |n: &str| {
        p.classes()
            .iter()
            .position(|c| c.name == n)
            .unwrap_or_else(|| panic!("no class {n}"))
    };
    let w = |a: &str| worker_of(key(a.parse().unwrap()), 4) as u16;
    let Placement::PerClass(dst) = placement(&p, Side::Dst, 4) else {
        panic!("not per class")
    };
    // A site goes with its (first) subscriber; bob by its first address; carol has no
    // destination: by hash (u16::MAX), and the root is not placed.
    assert_eq!(dst[id("site")], w("100.64.0.7"));
    assert_eq!(dst[id("bob")], w("100.64.0.9"));
    assert_eq!(dst[id("carol")], u16::MAX);
    assert_eq!(dst[id("root")], u16::MAX);
    assert_eq!(
        dst[id("alice")],
        u16::MAX,
        "only top-level classes are placed"
    );
    let Placement::PerClass(src) = placement(&p, Side::Src, 4) else {
        panic!("not per class")
    };
    assert_eq!(src[id("carol")], w("100.64.0.11"));
    assert_eq!(src[id("bob")], u16::MAX);
}
