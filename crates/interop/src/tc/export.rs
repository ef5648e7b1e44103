//! Export: a linkshare policy as `tc -batch` input for the kernel (`linkshare export tc`).
//!
//! Follows tc(8), tc-htb(8) and tc-u32(8) for the syntax; `import.rs` reads the same syntax back,
//! and the round trip (export, then import) gives the same tree (tests/roundtrip.rs).
//!
//! What maps and how:
//! - An HTB policy becomes `qdisc replace … root handle 1: htb default D r2q R`, one
//!   `class add … htb rate ceil burst cburst prio quantum` per class (class `i` of the file is
//!   `1:<i+1>`, minor numbers in hex as tc reads them) and one leaf qdisc per leaf class
//!   (`handle <i+2>:`), every parameter written out explicitly so that the kernel does not
//!   derive different ones.
//! - A policy without classes (`qdisc = "sfq"`, …) becomes that qdisc at the root.
//! - `overhead`, `mpu` and `linklayer` become a size table on the root qdisc
//!   (`root handle 1: stab overhead N mpu M linklayer atm htb …`, tc-stab(8); see `stab.rs`).
//! - Filters become u32 filters, in the policy's order (tc `prio` 1, 2, … — one per filter and
//!   address family). A filter that names no family is written once for IPv4 and once for IPv6;
//!   a DSCP list becomes one rule per code point; a port range becomes the few value/mask pairs
//!   that cover it exactly (e.g. 1000-1999 is 8 rules); a port rule without a protocol is written
//!   for TCP and for UDP, as linkshare matches ports only on those.
//!
//! Where the kernel's u32 sees less than linkshare's classifier, the script says so in a comment
//! and the difference is documented in docs/export-tc.md: u32 reads ports at a fixed offset, so
//! an IPv4 port rule also requires a 20-byte header (no options) and the first fragment, and an
//! IPv6 protocol or port rule only matches when no extension header precedes the transport
//! header.
//!
//! Not exported, with an error that says what to use instead: CBQ (the kernel removed its CBQ
//! in Linux 6.3, and it never had ALTQ's options), and the leaves the kernel has no equivalent
//! for (`rio`, the flow-hashing `drr` leaf).

use std::fmt::Write as _;
use std::net::IpAddr;

use anyhow::{bail, Context};
use linkshare_config::{ClassInfo, LeafKind, Policy, QdiscKind};
use linkshare_core::classify::{FilterSpec, IpPrefix, PROTO_TCP, PROTO_UDP};
use linkshare_core::units::Duration;

/// The script as shell commands: every batch line prefixed with `tc`, comments kept.
pub fn as_shell(script: &str, dev: &str) -> String {
    let mut out = String::from("#!/bin/sh\nset -e\n");
    let _ = writeln!(out, "tc qdisc del dev {dev} root 2>/dev/null || true");
    for line in script.lines() {
        if line.starts_with('#') || line.is_empty() {
            out.push_str(line);
        } else {
            out.push_str("tc ");
            out.push_str(line);
        }
        out.push('\n');
    }
    out
}

/// Whether `dev` can be an interface name (what the kernel accepts: 1-15 bytes, no `/`, `:`
/// or white space) — it is pasted into every line of the script.
fn check_dev(dev: &str) -> anyhow::Result<()> {
    let ok = !dev.is_empty()
        && dev.len() <= 15
        && dev != "."
        && dev != ".."
        && dev
            .bytes()
            .all(|b| b.is_ascii_graphic() && b != b'/' && b != b':' && b != b'#');
    if !ok {
        bail!("`{dev}` is not an interface name: use 1-15 characters without `/`, `:`, `#` or spaces (see `ip link`)");
    }
    Ok(())
}

/// The `tc -batch` script that sets up `policy` on `dev` in the kernel. Lines starting with
/// `# note: ` describe where the kernel will behave differently from linkshare.
/// `linkshare lab --kernel` applies it in the router namespace.
pub fn tc_script(policy: &Policy, dev: &str) -> anyhow::Result<String> {
    check_dev(dev)?;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# linkshare export tc: {} ({} root) on {dev}",
        policy.origin(),
        policy.kind_name()
    );
    let _ = writeln!(
        out,
        "# apply with `tc -batch FILE`; it replaces the root qdisc of {dev}"
    );
    let (stab, stab_note) = crate::tc::stab::export_words(policy.link_layer());
    if let Some(n) = stab_note {
        let _ = writeln!(out, "{n}");
    }
    match policy.kind() {
        QdiscKind::Htb => htb(policy, dev, &stab, &mut out)?,
        QdiscKind::Leaf => {
            let Some(leaf) = policy.root_leaf() else {
                bail!("{}: the policy has no root discipline", policy.origin());
            };
            let q = leaf_qdisc(leaf, &mut out).with_context(|| {
                format!("{}: the root discipline cannot be exported", policy.origin())
            })?;
            let _ = writeln!(out, "qdisc replace dev {dev} root handle 1: {stab}{q}");
        }
        QdiscKind::Cbq => bail!(
            "{}: CBQ cannot be exported to tc: Linux removed its CBQ qdisc in 6.3, and it never \
             had ALTQ's guidelines or estimator options. Write the tree with qdisc = \"htb\" \
             (each class's rate, its parent's rate as ceil where it may borrow, and prio carry over) \
             to run it in the kernel",
            policy.origin()
        ),
        _ => bail!(
            "{}: a `{}` root cannot be exported to tc yet; only HTB trees and classless roots can",
            policy.origin(),
            policy.kind_name()
        ),
    }
    Ok(out)
}

/// tc's class id of class `i` of the policy: `1:<i+1>` (hex minor). `linkshare stat` shows the
/// same handles beside the class names.
pub fn classid(i: usize) -> String {
    format!("1:{:x}", i + 1)
}

/// tc's handle of the leaf qdisc under class `i`: `<i+2>:` (hex).
pub fn leaf_handle(i: usize) -> String {
    format!("{:x}:", i + 2)
}

fn htb(policy: &Policy, dev: &str, stab: &str, out: &mut String) -> anyhow::Result<()> {
    let classes = policy.classes();
    // Minor 0 is the qdisc itself; leaf qdisc handles i+2 must fit in 16 bits as well.
    if classes.len() > 0xfffd {
        bail!(
            "{}: {} classes do not fit in tc's 16-bit class ids (at most 65533)",
            policy.origin(),
            classes.len()
        );
    }
    let default = policy.default_class_id() as usize;
    let r2q = policy.htb_params().r2q;
    let _ = writeln!(
        out,
        "qdisc replace dev {dev} root handle 1: {stab}htb default {:x} r2q {r2q}",
        default + 1
    );
    for (i, c) in classes.iter().enumerate() {
        let parent = c
            .parent_id
            .map(|p| classid(p as usize))
            .unwrap_or_else(|| "1:".into());
        let _ = writeln!(
            out,
            "class add dev {dev} parent {parent} classid {} htb rate {}bit ceil {}bit \
             burst {}b cburst {}b prio {} quantum {}  # {}",
            classid(i),
            c.rate.bits_per_sec(),
            c.ceil.bits_per_sec(),
            c.burst,
            c.cburst,
            c.prio,
            c.quantum,
            c.name
        );
    }
    for (i, c) in classes.iter().enumerate().filter(|(_, c)| c.is_leaf) {
        let q = leaf_qdisc(&c.leaf, out).with_context(|| leaf_context(policy, c))?;
        let _ = writeln!(
            out,
            "qdisc add dev {dev} parent {} handle {} {q}",
            classid(i),
            leaf_handle(i)
        );
    }
    filters(policy, dev, out)
}

fn leaf_context(policy: &Policy, c: &ClassInfo) -> String {
    format!(
        "{}:{}: class `{}`: its leaf cannot be exported",
        policy.origin(),
        c.line,
        c.name
    )
}

/// tc's time syntax in microseconds (`5000us`).
fn us(d: Duration) -> String {
    format!("{}us", d.as_nanos().div_ceil(1000))
}

/// The tc qdisc (kind and options) equivalent to `leaf`; notes for `out` where they differ.
fn leaf_qdisc(leaf: &LeafKind, out: &mut String) -> anyhow::Result<String> {
    let mut q = String::new();
    match leaf {
        LeafKind::Pfifo { limit } => {
            let _ = write!(q, "pfifo limit {limit}");
        }
        LeafKind::Bfifo { limit } => {
            let _ = write!(q, "bfifo limit {limit}");
        }
        LeafKind::Sfq(p) => {
            let _ = write!(
                q,
                "sfq limit {} depth {} flows {} divisor {} quantum {}b",
                p.limit, p.depth, p.flows, p.divisor, p.quantum
            );
            let secs = p.perturb.as_nanos().div_ceil(1_000_000_000);
            if secs > 0 {
                let _ = write!(q, " perturb {secs}");
            }
            if p.perturb.as_nanos() % 1_000_000_000 != 0 {
                let _ = writeln!(
                    out,
                    "# note: tc's sfq perturb is whole seconds: {} rounded up to {secs} s",
                    us(p.perturb)
                );
            }
        }
        LeafKind::Tbf(p) => {
            let _ = write!(q, "tbf rate {}bit burst {}b", p.rate.bits_per_sec(), p.burst);
            match (p.limit, p.latency) {
                (0, Some(lat)) => {
                    let _ = write!(q, " latency {}", us(lat));
                }
                (limit, _) => {
                    let _ = write!(q, " limit {limit}b");
                }
            }
            if let Some(peak) = p.peakrate {
                let _ = write!(q, " peakrate {}bit mtu {}b", peak.bits_per_sec(), p.mtu);
            }
        }
        LeafKind::Red(p) => {
            let _ = write!(
                q,
                "red limit {}b min {}b max {}b avpkt {}b probability {} bandwidth {}bit",
                p.limit,
                p.min,
                p.max,
                p.avpkt,
                p.max_p,
                p.bandwidth.bits_per_sec()
            );
            if p.burst > 0 {
                let _ = write!(q, " burst {}", p.burst);
            }
            if p.ecn {
                q.push_str(" ecn");
            }
            if p.gentle {
                let _ = writeln!(
                    out,
                    "# note: the kernel's red has no gentle mode: above max every packet is dropped (marked)"
                );
            }
            if p.wq.is_some() {
                let _ = writeln!(
                    out,
                    "# note: tc derives red's queue weight from burst; the policy's explicit wq is not carried over"
                );
            }
        }
        LeafKind::Prio(p) => {
            let map: Vec<String> = p.priomap.iter().map(|b| b.to_string()).collect();
            let _ = write!(q, "prio bands {} priomap {}", p.bands, map.join(" "));
            let _ = writeln!(
                out,
                "# note: the kernel's prio bands get its default pfifo children (txqueuelen packets), not {} packets each",
                p.limit
            );
        }
        LeafKind::Codel(p) => {
            let _ = write!(
                q,
                "codel limit {} target {} interval {} {}",
                p.limit,
                us(p.target),
                us(p.interval),
                if p.ecn { "ecn" } else { "noecn" }
            );
            if let Some(t) = p.ce_threshold {
                let _ = write!(q, " ce_threshold {}", us(t));
            }
        }
        LeafKind::FqCodel(p) => {
            let _ = write!(
                q,
                "fq_codel limit {} flows {} quantum {} target {} interval {} memory_limit {} drop_batch {} {}",
                p.limit,
                p.flows,
                p.quantum,
                us(p.target),
                us(p.interval),
                p.memory_limit,
                p.drop_batch_size,
                if p.ecn { "ecn" } else { "noecn" }
            );
            if let Some(t) = p.ce_threshold {
                let _ = write!(q, " ce_threshold {}", us(t));
            }
        }
        LeafKind::Drr(_) => bail!(
            "the kernel's drr is a classful qdisc without flow hashing, not linkshare's per-flow drr leaf: \
             use leaf = \"sfq\" or \"fq_codel\" for per-flow fairness in the kernel"
        ),
        LeafKind::Rio(_) => bail!(
            "the kernel has no RIO (in/out RED profiles): use leaf = \"red\", or split the AF drop \
             precedences into classes with their own red leaves"
        ),
        other => bail!("the kernel has no equivalent of `{}`", other.name()),
    }
    Ok(q)
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Family {
    V4,
    V6,
    /// Every frame (`protocol all`): only for a filter that sets no field.
    All,
}

impl Family {
    fn protocol(self) -> &'static str {
        match self {
            Family::V4 => "ip",
            Family::V6 => "ipv6",
            Family::All => "all",
        }
    }
}

fn prefix_family(p: &IpPrefix) -> Family {
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

fn filters(policy: &Policy, dev: &str, out: &mut String) -> anyhow::Result<()> {
    let mut prio: u32 = 0;
    let mut v4_ports = false;
    let mut v6_chain = false;
    for (k, f) in policy.filters().iter().enumerate() {
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
        let flowid = classid(spec.class as usize);
        for fam in fams {
            prio += 1;
            if prio > 0xffff {
                bail!(
                    "{}: the filters need more than 65535 tc priorities",
                    policy.origin()
                );
            }
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
                    "filter add dev {dev} parent 1: protocol {} prio {prio} u32 {} flowid {flowid}",
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

#[cfg(test)]
mod tests {
    use super::*;

    fn covered(blocks: &[(u16, u16)], p: u16) -> bool {
        blocks.iter().any(|(v, m)| p & m == *v)
    }

    #[test]
    fn port_blocks_cover_exactly_the_range() {
        let ranges = [
            (0, 65535),
            (0, 0),
            (65535, 65535),
            (1000, 1999),
            (1, 65534),
            (5000, 5010),
            (1024, 2047),
            (80, 80),
            (49152, 65535),
        ];
        for (lo, hi) in ranges {
            let b = port_blocks(lo, hi);
            for (v, m) in &b {
                assert_eq!(v & !m, 0, "{lo}-{hi}: block {v:#x}/{m:#x} is not aligned");
            }
            for p in 0..=65535u16 {
                assert_eq!(
                    covered(&b, p),
                    (lo..=hi).contains(&p),
                    "{lo}-{hi}: port {p} with blocks {b:x?}"
                );
            }
            // Blocks are disjoint: their sizes add up to the range's length.
            let total: u32 = b.iter().map(|(_, m)| u32::from(!m) + 1).sum();
            assert_eq!(total, u32::from(hi) - u32::from(lo) + 1, "{lo}-{hi}");
        }
        assert_eq!(port_blocks(1024, 2047), vec![(1024, 0xfc00)]);
        assert_eq!(port_blocks(0, 65535), vec![(0, 0)]);
        assert_eq!(port_blocks(1, 65534).len(), 30);
    }

    fn policy(text: &str) -> Policy {
        Policy::parse(text, "t.toml").unwrap()
    }

    const HTB: &str = r#"
qdisc = "htb"
default = "bulk"
[[class]]
name = "root"
rate = "10mbit"
[[class]]
name = "voice"
parent = "root"
rate = "1mbit"
ceil = "2mbit"
prio = 0
[[class]]
name = "bulk"
parent = "root"
rate = "9mbit"
ceil = "10mbit"
prio = 3
leaf = { type = "bfifo", limit = "64kb" }
[[filter]]
dscp = ["ef", "cs5"]
class = "voice"
[[filter]]
protocol = "udp"
dst_port = "5000-5003"
dst = "10.1.0.0/16"
class = "voice"
"#;

    #[test]
    fn htb_tree_classes_leaves_and_filters() {
        let p = policy(HTB);
        let s = tc_script(&p, "eth1").unwrap();
        assert!(
            s.contains("qdisc replace dev eth1 root handle 1: htb default 3 r2q 10"),
            "{s}"
        );
        assert!(
            s.contains(
                "class add dev eth1 parent 1: classid 1:1 htb rate 10000000bit ceil 10000000bit"
            ),
            "{s}"
        );
        assert!(s.contains("parent 1:1 classid 1:2 htb rate 1000000bit ceil 2000000bit"));
        assert!(s.contains("prio 0 quantum"), "{s}");
        assert!(s.contains("qdisc add dev eth1 parent 1:3 handle 4: bfifo limit 65536"));
        assert!(s.contains("qdisc add dev eth1 parent 1:2 handle 3: pfifo"));
        // DSCP list: one rule per code point and family; EF is 46 = 0xb8 in the TOS byte.
        let ef: Vec<&str> = s
            .lines()
            .filter(|l| l.starts_with("filter") && l.contains("prio 1 "))
            .collect();
        assert_eq!(ef.len(), 2, "{s}");
        assert!(ef[0].contains("protocol ip ") && ef[0].contains("match ip dsfield 0xb8 0xfc"));
        assert!(ef[1].contains("protocol ip ") && ef[1].contains("match ip dsfield 0xa0 0xfc"));
        let ef6: Vec<&str> = s
            .lines()
            .filter(|l| l.starts_with("filter") && l.contains("prio 2 "))
            .collect();
        assert!(
            ef6[0].contains("protocol ipv6") && ef6[0].contains("match u16 0x0b80 0x0fc0 at 0")
        );
        // An IPv4 prefix: only the IPv4 family, one rule for the aligned block 5000-5003.
        let ports: Vec<&str> = s
            .lines()
            .filter(|l| l.starts_with("filter") && l.contains("prio 3 "))
            .collect();
        assert_eq!(ports.len(), 1, "{s}");
        assert!(ports[0].contains("match ip dst 10.1.0.0/16"));
        assert!(ports[0].contains("match ip protocol 17 0xff"));
        assert!(ports[0].contains("match ip dport 5000 0xfffc"));
        assert!(ports[0].ends_with("flowid 1:2"));
        assert!(!s.contains("prio 4 "), "{s}");
        assert!(s.contains("# note: u32 reads IPv4 ports"));
    }

    #[test]
    fn ports_without_protocol_become_tcp_and_udp_rules() {
        let p = policy(&HTB.replace("protocol = \"udp\"\n", ""));
        let s = tc_script(&p, "eth1").unwrap();
        let n = s
            .lines()
            .filter(|l| l.starts_with("filter") && l.contains("prio 3 "))
            .count();
        assert_eq!(n, 2, "{s}");
        assert!(s.contains("match ip protocol 6 0xff"));
    }

    #[test]
    fn classless_root_and_unsupported_kinds() {
        let p = policy(
            "qdisc = { type = \"tbf\", rate = \"5mbit\", burst = \"10kb\", limit = \"30kb\" }\n",
        );
        let s = tc_script(&p, "veth0").unwrap();
        assert!(
            s.contains("qdisc replace dev veth0 root handle 1: tbf rate 5000000bit burst 10240b limit 30720b"),
            "{s}"
        );
        let cbq = policy(
            "qdisc = \"cbq\"\ndefault = \"a\"\n[[class]]\nname = \"root\"\nrate = \"1mbit\"\n\
             [[class]]\nname = \"a\"\nparent = \"root\"\nrate = \"1mbit\"\n",
        );
        let e = tc_script(&cbq, "eth0").unwrap_err().to_string();
        assert!(e.contains("CBQ") && e.contains("htb"), "{e}");
        let rio = policy(&HTB.replace(
            "leaf = { type = \"bfifo\", limit = \"64kb\" }",
            "leaf = \"rio\"",
        ));
        let e = format!("{:#}", tc_script(&rio, "eth0").unwrap_err());
        assert!(e.contains("class `bulk`") && e.contains("RIO"), "{e}");
        for bad in ["", "a b", "x/y", "sixteen-chars-xx", "a#b"] {
            assert!(tc_script(&policy(HTB), bad).is_err(), "{bad:?}");
        }
    }
}
