//! The u32 filters of `export tc`: each policy filter as the tc-u32(8) rules that match what it
//! matches, in the policy's order.
//!
//! Principles: first-match order is kept (tc `prio` 1, 2, … — one per filter and address
//! family); what u32 cannot say in one rule is expanded (DSCP lists, port ranges as aligned
//! value/mask blocks, TCP and UDP copies for ports without a protocol), and `import.rs` undoes
//! exactly that expansion. A long run of filters that each match one host address and nothing
//! else is written as a u32 hash table instead (`u32_hash.rs`), so that the kernel looks a
//! subscriber up in a bucket rather than walking one priority per subscriber.

use std::fmt::Write as _;
use std::net::IpAddr;

use anyhow::bail;
use linkshare_config::{FilterInfo, Policy};
use linkshare_core::classify::{FilterSpec, IpPrefix, PROTO_TCP, PROTO_UDP};

use super::u32_hash;

/// Where a list of filters goes: the device, the qdisc they attach to (`1:`) and tc's class
/// id of the policy's class `i`.
pub(super) struct Target<'a> {
    pub dev: &'a str,
    pub parent: String,
    pub classid: &'a dyn Fn(usize) -> String,
    /// Runs of single-address filters as hash tables (else one priority each).
    pub hash: bool,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Family {
    V4,
    V6,
    /// Every frame (`protocol all`): only for a filter that sets no field.
    All,
}

impl Family {
    pub(super) fn protocol(self) -> &'static str {
        match self {
            Family::V4 => "ip",
            Family::V6 => "ipv6",
            Family::All => "all",
        }
    }
}

pub(super) fn prefix_family(p: &IpPrefix) -> Family {
    match p.addr {
        IpAddr::V4(_) => Family::V4,
        IpAddr::V6(_) => Family::V6,
    }
}

/// The aligned value/mask pairs that together match exactly the ports `lo..=hi`: the fewest
/// power-of-two blocks, at most 30 for any range.
pub fn port_blocks(lo: u16, hi: u16) -> Vec<(u16, u16)> {
    let mut blocks = Vec::new();
    let (mut lo, hi) = (u32::from(lo), u32::from(hi));
    while lo <= hi {
        // The largest block that starts at `lo` (aligned) and ends within the range.
        let mut size = if lo == 0 {
            1 << 16
        } else {
            lo & lo.wrapping_neg()
        };
        while lo + size - 1 > hi {
            size >>= 1;
        }
        blocks.push((lo as u16, (!(size - 1) & 0xffff) as u16));
        lo += size;
    }
    blocks
}

/// The u32 rules (each a list of `match …` clauses, all of which must hold) for one filter in
/// one family.
fn rules(f: &FilterSpec, fam: Family) -> Vec<Vec<String>> {
    if fam == Family::All {
        return vec![vec!["match u32 0 0".into()]];
    }
    let v4 = fam == Family::V4;
    let mut base: Vec<String> = Vec::new();
    if let Some((val, mask)) = f.tos {
        base.push(if v4 {
            format!("match ip tos 0x{val:02x} 0x{mask:02x}")
        } else {
            // The traffic class sits in bits 4-11 of the header's first 16 bits.
            format!(
                "match u16 0x{:04x} 0x{:04x} at 0",
                u16::from(val) << 4,
                u16::from(mask) << 4
            )
        });
    }
    for (p, dir) in [(&f.src, "src"), (&f.dst, "dst")] {
        if let Some(p) = p {
            let kw = if v4 { "ip" } else { "ip6" };
            base.push(format!("match {kw} {dir} {}/{}", p.addr, p.len));
        }
    }
    let dscps: Vec<Option<u8>> = match &f.dscp {
        Some(list) => list.iter().filter(|d| **d < 64).map(|d| Some(*d)).collect(),
        None => vec![None],
    };
    let has_ports = f.src_port.is_some() || f.dst_port.is_some();
    let protos: Vec<Option<u8>> = match (f.protocol, has_ports) {
        (Some(p), _) => vec![Some(p)],
        (None, true) => vec![Some(PROTO_TCP), Some(PROTO_UDP)],
        (None, false) => vec![None],
    };
    let blocks = |r: Option<(u16, u16)>| -> Vec<Option<(u16, u16)>> {
        match r {
            Some((lo, hi)) if lo <= hi => port_blocks(lo, hi)
                .into_iter()
                .map(|(v, m)| (m != 0).then_some((v, m)))
                .collect(),
            Some(_) => Vec::new(),
            None => vec![None],
        }
    };
    let (sports, dports) = (blocks(f.src_port), blocks(f.dst_port));
    let mut out = Vec::new();
    for d in &dscps {
        for proto in &protos {
            for sp in &sports {
                for dp in &dports {
                    let mut m = base.clone();
                    if let Some(d) = d {
                        m.push(if v4 {
                            format!("match ip dsfield 0x{:02x} 0xfc", d << 2)
                        } else {
                            format!("match u16 0x{:04x} 0x0fc0 at 0", u16::from(*d) << 6)
                        });
                    }
                    if let Some(p) = proto {
                        let kw = if v4 { "ip" } else { "ip6" };
                        m.push(format!("match {kw} protocol {p} 0xff"));
                    }
                    if has_ports && v4 {
                        // u32 reads IPv4 ports at offset 20: require a header without options
                        // and the first fragment (later fragments have no ports).
                        m.push("match u8 0x05 0x0f at 0".into());
                        m.push("match u16 0x0000 0x1fff at 6".into());
                    }
                    let kw = if v4 { "ip" } else { "ip6" };
                    if let Some((v, mask)) = sp {
                        m.push(format!("match {kw} sport {v} 0x{mask:04x}"));
                    }
                    if let Some((v, mask)) = dp {
                        m.push(format!("match {kw} dport {v} 0x{mask:04x}"));
                    }
                    out.push(m);
                }
            }
        }
    }
    out
}

/// Write `list` (the policy's filters with their index in the file, in order) as u32 filters
/// on `t`.
pub(super) fn filters(
    policy: &Policy,
    list: &[(usize, &FilterInfo)],
    t: &Target,
    out: &mut String,
) -> anyhow::Result<()> {
    let dev = t.dev;
    let mut prio: u32 = 0;
    let mut tables = u32_hash::Tables::default();
    let mut v4_ports = false;
    let mut v6_chain = false;
    let mut at = 0;
    while at < list.len() {
        let run = u32_hash::run_len(&list[at..]);
        if t.hash && run >= u32_hash::MIN_RUN {
            u32_hash::write_run(policy, &list[at..at + run], t, &mut prio, &mut tables, out)?;
            at += run;
            continue;
        }
        let (k, f) = list[at];
        at += 1;
        let spec = &f.spec;
        if spec.issues().iter().any(|i| i.matches_nothing()) {
            let _ = writeln!(
                out,
                "# filter {} (line {}) matches nothing and is left out",
                k + 1,
                f.line
            );
            continue;
        }
        let fams: Vec<Family> = match (&spec.src, &spec.dst) {
            (Some(p), _) | (None, Some(p)) => vec![prefix_family(p)],
            (None, None) if spec.is_match_all() => vec![Family::All],
            (None, None) => vec![Family::V4, Family::V6],
        };
        let flowid = (t.classid)(spec.class as usize);
        for fam in fams {
            next_prio(policy, &mut prio)?;
            let rs = rules(spec, fam);
            let ports = spec.src_port.is_some() || spec.dst_port.is_some();
            v4_ports |= fam == Family::V4 && ports;
            v6_chain |= fam == Family::V6 && (ports || spec.protocol.is_some());
            let _ = writeln!(
                out,
                "# filter {} (line {}) -> {}: {} rule{}",
                k + 1,
                f.line,
                f.class,
                rs.len(),
                if rs.len() == 1 { "" } else { "s" }
            );
            for r in rs {
                let _ = writeln!(
                    out,
                    "filter add dev {dev} parent {} protocol {} prio {prio} u32 {} flowid {flowid}",
                    t.parent,
                    fam.protocol(),
                    r.join(" ")
                );
            }
        }
    }
    if v4_ports {
        let _ = writeln!(
            out,
            "# note: u32 reads IPv4 ports at a fixed offset: port rules here skip packets with IP options, which linkshare still matches"
        );
    }
    if v6_chain {
        let _ = writeln!(
            out,
            "# note: u32 reads the IPv6 next header and ports at fixed offsets: packets with extension headers miss these rules, linkshare walks the chain"
        );
    }
    Ok(())
}

/// The next tc filter priority, or the error when the kernel's u32 would refuse it.
pub(super) fn next_prio(policy: &Policy, prio: &mut u32) -> anyhow::Result<()> {
    *prio += 1;
    if *prio > u32_hash::PRIO_MAX {
        bail!(
            "{}: the filters need more than {} u32 priorities, and the kernel refuses the next \
             one (each u32 priority takes one of its 12-bit root table ids): put single-address \
             filters (dst or src of one host, nothing else) next to each other, 16 or more of \
             them export as one hash table",
            policy.origin(),
            u32_hash::PRIO_MAX
        );
    }
    Ok(())
}
