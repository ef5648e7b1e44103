//! Hashed u32 filters: a long run of single-address filters (one subscriber each) as one u32
//! hash table per address family, the form of tc-u32(8)'s "hashing filters" example and of
//! LibreQoS before it moved classification to XDP.
//!
//! ```text
//! filter add dev D parent 1: protocol ip prio P handle 2: u32 divisor 256
//! filter add dev D parent 1: protocol ip prio P u32 match u32 0 0 hashkey mask 0x000000ff at 16 link 2:
//! filter add dev D parent 1: protocol ip prio P u32 ht 2:4b: match ip dst 10.0.0.75/32 flowid 1:4c
//! ```
//!
//! The link rule sits in the priority's root table and sends every packet to the bucket of its
//! address's last byte (`hashkey mask 0x000000ff at 16`: the IPv4 destination; 12 for the
//! source, 36 and 20 for IPv6); the packet then meets only that bucket's rules — about n/256 —
//! instead of one priority per subscriber (net/sched/cls_u32.c, `u32_classify`: a link that
//! finds nothing returns to the next rule of the table it came from, so no packet is lost).
//!
//! Why the order is kept: every rule of the run matches one whole address and nothing else, so
//! two rules can only both match a packet when they name the same address; the first one of
//! those is written and the later ones, which could never match, are left out with a comment.
//! Rules of different families never meet a packet together. A run is one side only (all
//! destination or all source), since a packet may match one subscriber by destination and
//! another by source, where the order between them matters.
//!
//! Limits (the kernel's, `gen_new_kid`): a bucket holds at most 4095 rules (12-bit node ids), so
//! one table holds up to about a million addresses spread evenly over the last byte; table ids
//! are 12 bits (2–0x7ff are used here, below the kernel's automatic 0x800+ root tables).

use std::collections::HashSet;
use std::fmt::Write as _;
use std::net::IpAddr;

use anyhow::bail;
use linkshare_config::{FilterInfo, Policy};

use super::u32_out::{next_prio, Target};

/// Runs shorter than this stay linear: a table costs three lines and a lookup of its own.
pub const MIN_RUN: usize = 16;

/// Rules one bucket can hold: node ids are 12 bits, 0 unused (`gen_new_kid`).
pub const BUCKET_MAX: usize = 0xfff;

/// The highest table id written; the kernel numbers the priorities' root tables from 0x800.
const TABLE_MAX: u32 = 0x7ff;

/// u32 priorities one qdisc takes: each has a root table, numbered 0x800 and then from a
/// cyclic 1-0x7fe (`gen_new_htid`); Linux 6.18 refuses the 2,048th ("Filter already exists").
pub const PRIO_MAX: u32 = 2047;

/// Which address of the packet a run matches.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Side {
    Src,
    Dst,
}

/// Byte offset of the 32-bit word whose last byte is the hash key: the address's last word in
/// the IPv4 or IPv6 header.
pub fn key_offset(v6: bool, side: Side) -> u32 {
    match (v6, side) {
        (false, Side::Src) => 12,
        (false, Side::Dst) => 16,
        (true, Side::Src) => 20,
        (true, Side::Dst) => 36,
    }
}

/// The hash mask of every table written here: the word's last byte.
pub const KEY_MASK: u32 = 0x0000_00ff;

/// The one host address `f` matches and nothing else, with its side.
fn host(f: &FilterInfo) -> Option<(Side, IpAddr)> {
    let s = &f.spec;
    let plain = s.dscp.is_none()
        && s.tos.is_none()
        && s.protocol.is_none()
        && s.src_port.is_none()
        && s.dst_port.is_none();
    let full =
        |p: &linkshare_core::classify::IpPrefix| p.len == if p.addr.is_ipv4() { 32 } else { 128 };
    match (&s.src, &s.dst) {
        (Some(p), None) if plain && full(p) => Some((Side::Src, p.addr)),
        (None, Some(p)) if plain && full(p) => Some((Side::Dst, p.addr)),
        _ => None,
    }
}

/// How many filters from the start of `list` form one run (host filters of one side).
pub(super) fn run_len(list: &[(usize, &FilterInfo)]) -> usize {
    let Some(side) = list.first().and_then(|(_, f)| host(f)).map(|h| h.0) else {
        return 0;
    };
    list.iter()
        .take_while(|(_, f)| host(f).is_some_and(|h| h.0 == side))
        .count()
}

/// The hash table ids used so far on one qdisc.
#[derive(Default)]
pub(super) struct Tables {
    last: u32,
}

impl Tables {
    fn next(&mut self, policy: &Policy) -> anyhow::Result<u32> {
        self.last = self.last.max(1) + 1;
        if self.last > TABLE_MAX {
            bail!(
                "{}: more than {} runs of single-address filters: u32 table ids are 12 bits; \
                 put the address filters next to each other",
                policy.origin(),
                TABLE_MAX - 1
            );
        }
        Ok(self.last)
    }
}

/// Write one run (see [`run_len`]) as a hash table per family, each at its own priority.
pub(super) fn write_run(
    policy: &Policy,
    run: &[(usize, &FilterInfo)],
    t: &Target,
    prio: &mut u32,
    tables: &mut Tables,
    out: &mut String,
) -> anyhow::Result<()> {
    let (Some((first, ff)), Some((last, lf))) = (run.first(), run.last()) else {
        return Ok(());
    };
    let side = host(ff).map(|h| h.0).unwrap_or(Side::Dst);
    let word = match side {
        Side::Src => "src",
        Side::Dst => "dst",
    };
    let mut seen = HashSet::new();
    let mut dup = Vec::new();
    for v6 in [false, true] {
        let rules: Vec<(IpAddr, usize)> = run
            .iter()
            .filter_map(|(_, f)| host(f).map(|h| (h.1, f.spec.class as usize)))
            .filter(|(a, _)| a.is_ipv6() == v6)
            .filter(|(a, _)| {
                let fresh = seen.insert(*a);
                if !fresh {
                    dup.push(*a);
                }
                fresh
            })
            .collect();
        if rules.is_empty() {
            continue;
        }
        let mut per_bucket = [0usize; 256];
        for (a, _) in &rules {
            per_bucket[usize::from(last_byte(a))] += 1;
        }
        if let Some(b) = per_bucket.iter().position(|n| *n > BUCKET_MAX) {
            bail!(
                "{}: {} filters on addresses ending in {b} (filters {}-{}): a u32 hash bucket \
                 holds at most {BUCKET_MAX} rules (12-bit node ids); split the addresses over \
                 more last-byte values, or over several policies",
                policy.origin(),
                per_bucket[b],
                first + 1,
                last + 1
            );
        }
        next_prio(policy, prio)?;
        let table = tables.next(policy)?;
        let (proto, kw, slash) = if v6 {
            ("ipv6", "ip6", 128)
        } else {
            ("ip", "ip", 32)
        };
        let (dev, parent) = (t.dev, &t.parent);
        let _ = writeln!(
            out,
            "# filters {}-{} (lines {}-{}): {} IPv{} {word} addresses, hashed on their last byte \
             into u32 table {table:x}:",
            first + 1,
            last + 1,
            ff.line,
            lf.line,
            rules.len(),
            if v6 { 6 } else { 4 }
        );
        let head = format!("filter add dev {dev} parent {parent} protocol {proto} prio {prio}");
        let _ = writeln!(out, "{head} handle {table:x}: u32 divisor 256");
        let _ = writeln!(
            out,
            "{head} u32 match u32 0 0 hashkey mask 0x{KEY_MASK:08x} at {} link {table:x}:",
            key_offset(v6, side)
        );
        for (a, class) in rules {
            let _ = writeln!(
                out,
                "{head} u32 ht {table:x}:{:x}: match {kw} {word} {a}/{slash} flowid {}",
                last_byte(&a),
                (t.classid)(class)
            );
        }
    }
    if !dup.is_empty() {
        let _ = writeln!(
            out,
            "# {} filter{} of filters {}-{} repeat an earlier address and can never match: left out ({})",
            dup.len(),
            if dup.len() == 1 { "" } else { "s" },
            first + 1,
            last + 1,
            dup.iter()
                .take(5)
                .map(|a| a.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    Ok(())
}

fn last_byte(a: &IpAddr) -> u8 {
    match a {
        IpAddr::V4(x) => x.octets()[3],
        IpAddr::V6(x) => x.octets()[15],
    }
}
