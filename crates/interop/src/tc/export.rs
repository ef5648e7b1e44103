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
//! - An HFSC policy becomes `root handle 1: hfsc default D` and one `class add … hfsc` per
//!   class with its `rt`/`ls`/`ul` curves in tc-hfsc(8)'s two-piece form (`hfsc_out.rs`), the
//!   leaves and filters as for HTB.
//! - A policy without classes (`qdisc = "sfq"`, …) becomes that qdisc at the root.
//! - `overhead`, `mpu` and `linklayer` become a size table on the root qdisc
//!   (`root handle 1: stab overhead N mpu M linklayer atm htb …`, tc-stab(8); see `stab.rs`).
//! - Filters become u32 filters, in the policy's order (tc `prio` 1, 2, … — one per filter and
//!   address family). A filter that names no family is written once for IPv4 and once for IPv6;
//!   a DSCP list becomes one rule per code point; a port range becomes the few value/mask pairs
//!   that cover it exactly (e.g. 1000-1999 is 8 rules); a port rule without a protocol is written
//!   for TCP and for UDP, as linkshare matches ports only on those (`u32_out.rs`).
//! - A run of 16 or more filters that each match one host address and nothing else (a
//!   subscriber each) becomes a u32 hash table on the address's last byte per family instead of
//!   one priority per filter (`u32_hash.rs`): the kernel loads and classifies it in time that
//!   does not grow with the number of subscribers.
//! - A tree of more classes than one HTB can number (65,533) becomes `mq` with one HTB per
//!   transmit queue, its top-level classes spread over them (`mq.rs`); a single top-level class
//!   with more classes beneath it is an error that names the limit.
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

use anyhow::{bail, Context};
use linkshare_config::{ClassInfo, LeafKind, Policy, QdiscKind};
use linkshare_core::units::Duration;

pub use super::u32_out::port_blocks;
use super::u32_out::{filters, Target};

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
    tc_script_with(policy, dev, &ExportOptions::default())
}

/// What `export tc` may change about the script's shape.
#[derive(Clone, Debug)]
pub struct ExportOptions {
    /// The most classes one HTB gets before the tree is split over `mq` and one HTB per
    /// transmit queue: 65,533 (16-bit minor class ids, 0 and the leaf handles taken).
    pub htb_class_limit: usize,
    /// Write runs of single-address filters as u32 hash tables (`u32_hash.rs`); `false` gives
    /// one priority per filter, the linear form, for comparison.
    pub hash_filters: bool,
}

impl Default for ExportOptions {
    fn default() -> Self {
        ExportOptions {
            htb_class_limit: HTB_CLASS_LIMIT,
            hash_filters: true,
        }
    }
}

/// Classes one kernel HTB can number: minor ids are 16 bits, 0 is the qdisc itself and the
/// leaf qdisc handles `<i+2>:` must fit in 16 bits as well.
pub const HTB_CLASS_LIMIT: usize = 0xfffd;

/// [`tc_script`] with options.
pub fn tc_script_with(policy: &Policy, dev: &str, opts: &ExportOptions) -> anyhow::Result<String> {
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
        QdiscKind::Htb => htb(policy, dev, &stab, opts, &mut out)?,
        QdiscKind::Hfsc => super::hfsc_out::hfsc(policy, dev, &stab, opts, &mut out)?,
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
            "{}: a `{}` root cannot be exported to tc yet; only HTB and HFSC trees and classless roots can",
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

fn htb(
    policy: &Policy,
    dev: &str,
    stab: &str,
    opts: &ExportOptions,
    out: &mut String,
) -> anyhow::Result<()> {
    let classes = policy.classes();
    if classes.len() > opts.htb_class_limit {
        return super::mq::htb_per_queue(policy, dev, stab, opts, out);
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
        class_line(dev, &parent, &classid(i), c, out);
    }
    leaves_and_filters(policy, dev, opts, out)
}

/// After a classful root's `class add` lines (HTB or HFSC, classes numbered `1:i+1` in policy
/// order): each leaf's qdisc and the filters.
pub(super) fn leaves_and_filters(
    policy: &Policy,
    dev: &str,
    opts: &ExportOptions,
    out: &mut String,
) -> anyhow::Result<()> {
    let classes = policy.classes();
    for (i, c) in classes.iter().enumerate().filter(|(_, c)| c.is_leaf) {
        let q = leaf_qdisc(&c.leaf, out).with_context(|| leaf_context(policy, c))?;
        let _ = writeln!(
            out,
            "qdisc add dev {dev} parent {} handle {} {q}",
            classid(i),
            leaf_handle(i)
        );
    }
    let list: Vec<(usize, &linkshare_config::FilterInfo)> =
        policy.filters().iter().enumerate().collect();
    let target = Target {
        dev,
        parent: "1:".into(),
        classid: &classid,
        hash: opts.hash_filters,
    };
    filters(policy, &list, &target, out)
}

/// One `class add` line: every HTB parameter written out, the class's name as the comment.
pub(super) fn class_line(dev: &str, parent: &str, id: &str, c: &ClassInfo, out: &mut String) {
    let _ = writeln!(
        out,
        "class add dev {dev} parent {parent} classid {id} htb rate {}bit ceil {}bit \
         burst {}b cburst {}b prio {} quantum {}  # {}",
        c.rate.bits_per_sec(),
        c.ceil.bits_per_sec(),
        c.burst,
        c.cburst,
        c.prio,
        c.quantum,
        c.name
    );
}

pub(super) fn leaf_context(policy: &Policy, c: &ClassInfo) -> String {
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

/// tc-cake(8)'s words for `p` (iproute2 sets target to rtt/20, so another target cannot be
/// written).
fn cake_words(p: &linkshare_core::qdisc::cake::CakeParams, q: &mut String) -> anyhow::Result<()> {
    use linkshare_core::qdisc::cake::ack_filter::AckFilter;
    let implied = Duration((p.rtt.as_nanos() / 20).max(1000));
    if p.target != implied {
        bail!(
            "tc-cake sets target to rtt/20 ({}): leave `target` out, or set rtt to 20 x target",
            us(implied)
        );
    }
    q.push_str("cake");
    match p.bandwidth {
        Some(b) => {
            let _ = write!(q, " bandwidth {}bit", b.bits_per_sec());
        }
        None => q.push_str(" unlimited"),
    }
    let _ = write!(
        q,
        " rtt {} {} {}",
        us(p.rtt),
        p.diffserv.name(),
        p.isolation.name()
    );
    q.push_str(if p.wash { " wash" } else { " nowash" });
    q.push_str(match p.ack_filter {
        AckFilter::Off => " no-ack-filter",
        AckFilter::On => " ack-filter",
        AckFilter::Aggressive => " ack-filter-aggressive",
    });
    let _ = write!(q, " {}", p.overhead.tc_words());
    if p.overhead.mpu != 0 && p.overhead.tc_words().starts_with("raw") {
        let _ = write!(q, " mpu {}", p.overhead.mpu);
    }
    if let Some(m) = p.memlimit {
        let _ = write!(q, " memlimit {m}b");
    }
    q.push_str(if p.ingress { " ingress" } else { " egress" });
    Ok(())
}

/// The tc qdisc (kind and options) equivalent to `leaf`; notes for `out` where they differ.
pub(super) fn leaf_qdisc(leaf: &LeafKind, out: &mut String) -> anyhow::Result<String> {
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
        LeafKind::Cake(p) => cake_words(p, &mut q)?,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cake_is_written_with_its_options() {
        use linkshare_core::qdisc::cake::overhead::CakeOverhead;
        use linkshare_core::qdisc::cake::CakeParams;
        let mut p = CakeParams {
            bandwidth: Some(linkshare_core::units::Rate::mbit(100)),
            overhead: CakeOverhead::keyword("pppoe-ptm").unwrap(),
            memlimit: Some(1 << 20),
            ..Default::default()
        };
        p.overhead.mpu = 64;
        let mut out = String::new();
        let q = leaf_qdisc(&LeafKind::Cake(p.clone()), &mut out).unwrap();
        assert_eq!(
            q,
            "cake bandwidth 100000000bit rtt 100000us diffserv3 triple-isolate nowash \
             no-ack-filter overhead 30 mpu 64 ptm memlimit 1048576b egress"
        );
        p.target = Duration::from_millis(1);
        assert!(leaf_qdisc(&LeafKind::Cake(p), &mut out).is_err());
    }

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
