//! tc's vocabulary for `linkshare stat` (issue 15 §5): rates and sizes written as iproute2's tc
//! prints them (`50Mbit`, `1500Kbit`, `1600b`, `64Kb`), class handles as `linkshare export tc`
//! assigns them (class `i` of the policy is `1:<i+1>`, its leaf qdisc `<i+2>:`), and with
//! `stat --tc` the layout of `tc -s qdisc show` + `tc -s class show`, so that an operator's eyes
//! and scripts that read tc's output find things where they expect them.
//!
//! The number formats follow what tc(8) documents and prints (iproute2 `print_rate` /
//! `print_size`): rates in bit/s with decimal prefixes, divided by 1000 while the value is
//! at least 1000 and either divides exactly or is a million or more (so 1.5 Mbit/s prints as
//! `1500Kbit`, 50 Mbit/s as `50Mbit`); sizes in bytes, shown in `Kb`/`Mb` (binary multiples)
//! when they are within a few bytes of a whole number of them. Where linkshare's counters mean
//! something else than the kernel's (tokens are bytes here, not scheduler ticks; there are no
//! requeues in a userspace shaper) the field keeps tc's place and linkshare's meaning, as
//! docs/router.md says.

use std::fmt::Write as _;

use linkshare_interop::tc::export::{classid, leaf_handle};
use linkshare_router::control::snapshot::{
    CakeSnapshot, ClassSnapshot, CurveSnapshot, DirectionSnapshot, HfscSnapshot, TinSnapshot,
};
use linkshare_router::control::Snapshot;

/// A rate in bit/s as tc prints it: `50Mbit`, `1500Kbit`, `999bit`.
pub fn rate(bps: u64) -> String {
    const UNITS: [&str; 5] = ["", "K", "M", "G", "T"];
    let mut v = bps;
    let mut i = 0;
    while i < UNITS.len() - 1 && v >= 1000 && (v.is_multiple_of(1000) || v >= 1_000_000) {
        v /= 1000;
        i += 1;
    }
    format!("{v}{}bit", UNITS[i])
}

/// A live rate (fractional bit/s) as tc's rate estimator prints it (`rate 7936Kbit 655pps`).
pub fn live_rate(bps: f64) -> String {
    rate(if bps.is_finite() && bps > 0.0 {
        bps.round() as u64
    } else {
        0
    })
}

/// A size in bytes as tc prints it: `1600b`, `64Kb`, `2Mb`.
pub fn size(bytes: u64) -> String {
    const K: u64 = 1024;
    let near = |unit: u64, slack: u64| {
        let n = (bytes + unit / 2) / unit;
        (n > 0 && bytes.abs_diff(n * unit) < slack).then_some(n)
    };
    if bytes >= K * K {
        if let Some(n) = near(K * K, K) {
            return format!("{n}Mb");
        }
    }
    if bytes >= K {
        if let Some(n) = near(K, 16) {
            return format!("{n}Kb");
        }
    }
    format!("{bytes}b")
}

/// A class's handle, as `export tc` writes it.
pub fn handle(c: &ClassSnapshot) -> String {
    classid(c.id as usize)
}

/// `stat --tc`: per shaped direction, `tc -s qdisc show dev OUT` then `tc -s class show dev OUT`.
pub fn render(st: &Snapshot) -> String {
    let mut out = String::new();
    for d in st.directions.iter().filter(|d| d.shaped) {
        direction(&mut out, d);
    }
    if out.is_empty() {
        out.push_str("no shaped direction\n");
    }
    out
}

fn direction(out: &mut String, d: &DirectionSnapshot) {
    let kind = d.kind.as_deref().unwrap_or("htb");
    let _ = writeln!(
        out,
        "# tc -s qdisc show dev {} (linkshare {} -> {})",
        d.to, d.from, d.to
    );
    if let Some(q) = &d.qdisc {
        let _ = writeln!(out, "qdisc {kind} 1: root");
        let _ = writeln!(
            out,
            " Sent {} bytes {} pkt (dropped {}, overlimits {} requeues 0)",
            q.dequeued_bytes, q.dequeued, q.dropped, q.overlimits
        );
        let _ = writeln!(
            out,
            " backlog {} {}p requeues 0",
            size(q.backlog_bytes),
            q.backlog_packets
        );
        if let Some(c) = &q.cake {
            cake(out, c, "");
        }
    }
    // The CAKE leaves, as `tc -s qdisc show` lists a class's leaf qdisc.
    for c in d.classes.iter().filter(|c| c.cake.is_some()) {
        let _ = writeln!(
            out,
            "qdisc cake {} parent {}  # {}",
            leaf_handle(c.id as usize),
            handle(c),
            c.name
        );
        let _ = writeln!(
            out,
            " Sent {} bytes {} pkt (dropped {}, overlimits 0 requeues 0)",
            c.sent_bytes, c.sent_packets, c.drops
        );
        let _ = writeln!(
            out,
            " backlog {} {}p requeues 0",
            size(c.backlog_bytes),
            c.backlog_packets
        );
        if let Some(k) = &c.cake {
            cake(out, k, "");
        }
    }
    if d.classes.is_empty() {
        return;
    }
    let _ = writeln!(out, "\n# tc -s class show dev {}", d.to);
    let by_id: std::collections::HashMap<u32, &ClassSnapshot> =
        d.classes.iter().map(|c| (c.id, c)).collect();
    for c in &d.classes {
        let parent = match c.parent_id.and_then(|p| by_id.get(&p)) {
            Some(p) => format!("parent {}", handle(p)),
            // HFSC's top-level classes hang under the qdisc's own root class `1:`.
            None if c.hfsc.is_some() => "parent 1:".to_string(),
            None => "root".to_string(),
        };
        let leaf = if c.leaf {
            format!(" leaf {}", leaf_handle(c.id as usize))
        } else {
            String::new()
        };
        if let Some(h) = &c.hfsc {
            hfsc_class(out, c, h, &parent, &leaf);
            continue;
        }
        let _ = writeln!(
            out,
            "class {kind} {} {parent}{leaf} prio {} rate {} ceil {}  # {}",
            handle(c),
            c.prio,
            rate(c.rate_bps),
            rate(c.ceil_bps),
            c.name
        );
        let _ = writeln!(
            out,
            " Sent {} bytes {} pkt (dropped {}, overlimits {} requeues 0)",
            c.sent_bytes, c.sent_packets, c.drops, c.overlimits
        );
        let _ = writeln!(
            out,
            " rate {} {:.0}pps backlog {} {}p requeues 0",
            live_rate(c.live_rate_bps),
            c.live_pps.max(0.0),
            size(c.backlog_bytes),
            c.backlog_packets
        );
        let _ = writeln!(
            out,
            " lended: {} borrowed: {} giants: {}",
            c.lended, c.borrowed, c.giants
        );
        let _ = writeln!(out, " tokens: {} ctokens: {}\n", c.tokens, c.ctokens);
    }
}

/// A time as tc-cake prints its tins' (iproute2 `sprint_time` of whole microseconds: three
/// significant digits above a millisecond, `5ms`, `29.1ms`, `7.27ms`; `4us` below).
pub fn cake_time(ns: u64) -> String {
    let us = ns / 1000;
    let g3 = |v: f64, unit: &str| {
        let decimals = if v < 10.0 {
            2
        } else if v < 100.0 {
            1
        } else {
            0
        };
        let t = format!("{v:.decimals$}");
        let t = if t.contains('.') {
            t.trim_end_matches('0').trim_end_matches('.')
        } else {
            &t
        };
        format!("{t}{unit}")
    };
    if us >= 1_000_000 {
        g3(us as f64 / 1e6, "s")
    } else if us >= 1000 {
        g3(us as f64 / 1e3, "ms")
    } else {
        format!("{us}us")
    }
}

/// CAKE's memory line and per-tin table as `tc -s qdisc show` prints them below a cake qdisc's
/// counters (iproute2 q_cake.c: ten columns of row name, then one right-aligned column of
/// twelve per tin), each line after `indent`.
pub fn cake(out: &mut String, c: &CakeSnapshot, indent: &str) {
    let _ = writeln!(
        out,
        "{indent} memory used: {} of {}\n",
        size(c.memory_used),
        size(c.memory_limit)
    );
    let _ = write!(out, "{indent}          ");
    for t in &c.tins {
        let _ = write!(out, " {:>12}", t.name);
    }
    out.push('\n');
    type Cell = fn(&TinSnapshot) -> String;
    let rows: [(&str, Cell); 20] = [
        ("thresh", |t| rate(t.threshold_bps)),
        ("target", |t| cake_time(t.target_ns)),
        ("interval", |t| cake_time(t.interval_ns)),
        ("pk_delay", |t| cake_time(t.peak_delay_ns)),
        ("av_delay", |t| cake_time(t.avg_delay_ns)),
        ("sp_delay", |t| cake_time(t.base_delay_ns)),
        ("backlog", |t| size(t.backlog_bytes)),
        ("pkts", |t| t.packets.to_string()),
        ("bytes", |t| t.bytes.to_string()),
        ("way_inds", |t| t.way_indirect_hits.to_string()),
        ("way_miss", |t| t.way_misses.to_string()),
        ("way_cols", |t| t.way_collisions.to_string()),
        ("drops", |t| t.drops.to_string()),
        ("marks", |t| t.marks.to_string()),
        ("ack_drop", |t| t.ack_drops.to_string()),
        ("sp_flows", |t| t.sparse_flows.to_string()),
        ("bk_flows", |t| t.bulk_flows.to_string()),
        ("un_flows", |t| t.unresponsive_flows.to_string()),
        ("max_len", |t| t.max_len.to_string()),
        ("quantum", |t| t.quantum.to_string()),
    ];
    for (name, cell) in rows {
        let _ = write!(out, "{indent}  {name:<8}");
        for t in &c.tins {
            let _ = write!(out, " {:>12}", cell(t));
        }
        out.push('\n');
    }
    out.push('\n');
}

/// tc's time as `tc class show` prints a curve's `d` (`30.0ms`, `500us`).
fn tc_time(ns: u64) -> String {
    let us = ns / 1000;
    if us >= 1_000_000 {
        format!("{:.1}s", us as f64 / 1e6)
    } else if us >= 1000 {
        format!("{:.1}ms", us as f64 / 1e3)
    } else {
        format!("{us}us")
    }
}

/// One curve as tc prints it: `rt m1 400Kbit d 30.0ms m2 100Kbit`; a linear one as tc reads
/// `rate X` (`m1 0bit d 0us m2 X`).
fn curve(key: &str, c: &CurveSnapshot) -> String {
    let m1 = if c.d_ns == 0 { 0 } else { c.m1_bps };
    format!(
        " {key} m1 {} d {} m2 {}",
        rate(m1),
        tc_time(c.d_ns),
        rate(c.m2_bps)
    )
}

/// An HFSC class as `tc -s class show` prints it: its curves (`sc` when `rt` and `ls` are the
/// same), counters, and `period … work … rtwork … level …`.
fn hfsc_class(out: &mut String, c: &ClassSnapshot, h: &HfscSnapshot, parent: &str, leaf: &str) {
    let mut curves = String::new();
    match (&h.rt, &h.ls) {
        (Some(r), Some(l)) if r == l => curves.push_str(&curve("sc", r)),
        (r, l) => {
            if let Some(r) = r {
                curves.push_str(&curve("rt", r));
            }
            if let Some(l) = l {
                curves.push_str(&curve("ls", l));
            }
        }
    }
    if let Some(u) = &h.ul {
        curves.push_str(&curve("ul", u));
    }
    let _ = writeln!(
        out,
        "class hfsc {} {parent}{leaf}{curves}  # {}",
        handle(c),
        c.name
    );
    let _ = writeln!(
        out,
        " Sent {} bytes {} pkt (dropped {}, overlimits {} requeues 0)",
        c.sent_bytes, c.sent_packets, c.drops, c.overlimits
    );
    let _ = writeln!(
        out,
        " backlog {} {}p requeues 0",
        size(c.backlog_bytes),
        c.backlog_packets
    );
    let mut line = format!(" period {}", h.period);
    if h.work_bytes > 0 {
        let _ = write!(line, " work {} bytes", h.work_bytes);
    }
    if h.rtwork_bytes > 0 {
        let _ = write!(line, " rtwork {} bytes", h.rtwork_bytes);
    }
    let _ = writeln!(out, "{line} level {}\n", h.level);
}

#[cfg(test)]
mod tests {
    use super::*;
    use linkshare_router::control::{answer, Offline, Response};

    #[test]
    fn rates_as_tc_prints_them() {
        for (bps, want) in [
            (50_000_000, "50Mbit"),
            (1_500_000, "1500Kbit"),
            (2_500_000_000, "2500Mbit"),
            (10_000_000_000, "10Gbit"),
            (1_000, "1Kbit"),
            (999, "999bit"),
            (64_000, "64Kbit"),
            (1_234_567, "1234Kbit"),
            (0, "0bit"),
        ] {
            assert_eq!(rate(bps), want, "{bps}");
        }
    }

    #[test]
    fn sizes_as_tc_prints_them() {
        for (b, want) in [
            (1600, "1600b"),
            (1514, "1514b"),
            (65536, "64Kb"),
            (65540, "64Kb"),
            (65600, "65600b"),
            (2 << 20, "2Mb"),
            (0, "0b"),
        ] {
            assert_eq!(size(b), want, "{b}");
        }
    }

    /// `stat --tc` on an in-memory shaper: tc's layout, the handles `export tc` writes for the
    /// same policy, and rates in tc's units.
    #[test]
    fn hfsc_classes_show_their_curves_and_tc_s_fields() {
        let policy = "qdisc = \"hfsc\"\ndefault = \"bulk\"\n\
            [[class]]\nname = \"up\"\nls = \"1mbit\"\nul = \"1mbit\"\n\
            [[class]]\nname = \"voip\"\nparent = \"up\"\nrt = { m1 = \"400kbit\", d = \"30ms\", m2 = \"100kbit\" }\nls = \"100kbit\"\n\
            [[class]]\nname = \"bulk\"\nparent = \"up\"\nsc = \"900kbit\"\n";
        let mut o = Offline::new(policy, "p.toml").unwrap_or_else(|d| panic!("{d}"));
        let Response::Stat(s) = answer(&mut o, r#"{"v":1,"cmd":"stat"}"#) else {
            panic!("no stat")
        };
        let text = render(&s);
        assert!(
            text.contains("class hfsc 1:1 parent 1: ls m1 0bit d 0us m2 1Mbit ul m1 0bit d 0us m2 1Mbit  # up"),
            "{text}"
        );
        assert!(
            text.contains("class hfsc 1:2 parent 1:1 leaf 3: rt m1 400Kbit d 30.0ms m2 100Kbit ls m1 0bit d 0us m2 100Kbit  # voip"),
            "{text}"
        );
        assert!(
            text.contains("class hfsc 1:3 parent 1:1 leaf 4: sc m1 0bit d 0us m2 900Kbit  # bulk"),
            "{text}"
        );
        assert!(text.contains(" period 0 level 1\n"), "{text}");
        assert!(text.contains(" period 0 level 0\n"), "{text}");
    }

    #[test]
    fn tc_layout_uses_export_handles() {
        let policy = "qdisc = \"htb\"\ndefault = \"bulk\"\n\
            [[class]]\nname = \"root\"\nrate = \"50mbit\"\n\
            [[class]]\nname = \"voice\"\nparent = \"root\"\nrate = \"1500kbit\"\nceil = \"50mbit\"\nprio = 0\n\
            [[class]]\nname = \"bulk\"\nparent = \"root\"\nrate = \"48500kbit\"\nceil = \"50mbit\"\n";
        let mut o = Offline::new(policy, "p.toml").unwrap_or_else(|d| panic!("{d}"));
        let Response::Stat(s) = answer(&mut o, r#"{"v":1,"cmd":"stat"}"#) else {
            panic!("no stat")
        };
        let text = render(&s);
        assert!(
            text.contains(
                "qdisc htb 1: root\n Sent 0 bytes 0 pkt (dropped 0, overlimits 0 requeues 0)"
            ),
            "{text}"
        );
        assert!(
            text.contains("class htb 1:1 root prio 0 rate 50Mbit ceil 50Mbit  # root"),
            "{text}"
        );
        assert!(
            text.contains(
                "class htb 1:2 parent 1:1 leaf 3: prio 0 rate 1500Kbit ceil 50Mbit  # voice"
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "class htb 1:3 parent 1:1 leaf 4: prio 0 rate 48500Kbit ceil 50Mbit  # bulk"
            ),
            "{text}"
        );
        // The same handles as export tc gives the same policy.
        let p =
            linkshare_config::Policy::parse(policy, "p.toml").unwrap_or_else(|e| panic!("{e:?}"));
        let script =
            linkshare_interop::tc::export::tc_script(&p, "eth1").unwrap_or_else(|e| panic!("{e}"));
        assert!(
            script.contains("parent 1:1 classid 1:2 htb rate 1500000bit"),
            "{script}"
        );
        assert!(script.contains("parent 1:2 handle 3: "), "{script}");
    }

    /// `tc -s qdisc show` of the kernel's CAKE (Linux 6.1 in a user-mode-linux guest, iproute2
    /// 6.1): `bandwidth 100mbit diffserv3`, after 20 pings of 1000 bytes and 5 marked EF.
    const KERNEL_DIFFSERV3: &str = include_str!("../tests/fixtures/tc-s-qdisc-cake-diffserv3.txt");
    /// The same qdisc replaced by `bandwidth 10mbit diffserv4` (counters carried over).
    const KERNEL_DIFFSERV4: &str = include_str!("../tests/fixtures/tc-s-qdisc-cake-diffserv4.txt");

    /// The lines of `text` from the tin table's head to its `quantum` row.
    fn tin_table(text: &str) -> Vec<&str> {
        let lines: Vec<&str> = text.lines().collect();
        let start = lines
            .iter()
            .position(|l| l.contains("  thresh"))
            .map(|i| i - 1);
        let end = lines.iter().position(|l| l.starts_with("  quantum"));
        match (start, end) {
            (Some(s), Some(e)) if s <= e => lines[s..=e].to_vec(),
            _ => panic!("no tin table in:\n{text}"),
        }
    }

    /// The row `name` of a tin table, cells split.
    fn row<'a>(table: &[&'a str], name: &str) -> Vec<&'a str> {
        table
            .iter()
            .find(|l| l.split_whitespace().next() == Some(name))
            .map(|l| l.split_whitespace().skip(1).collect())
            .unwrap_or_else(|| panic!("no row {name}"))
    }

    /// The kernel's counters of the diffserv3 run, typed in as a snapshot's tins (Bulk, Best
    /// Effort, Voice), render to the kernel's own table byte for byte.
    #[test]
    fn the_tin_table_has_the_kernels_layout() {
        let tin = |name: &str, thresh: u64, quantum: u64| TinSnapshot {
            name: name.to_string(),
            threshold_bps: thresh,
            target_ns: 5_000_000,
            interval_ns: 100_000_000,
            quantum,
            ..TinSnapshot::default()
        };
        let mut bulk = tin("Bulk", 6_250_000, 300);
        let mut be = tin("Best Effort", 100_000_000, 1514);
        let mut voice = tin("Voice", 25_000_000, 762);
        bulk.peak_delay_ns = 0;
        (be.peak_delay_ns, voice.peak_delay_ns) = (4_900, 3_200);
        (be.packets, be.bytes, voice.packets, voice.bytes) = (20, 20840, 6, 532);
        (be.way_misses, voice.way_misses) = (1, 2);
        (voice.sparse_flows, be.bulk_flows) = (1, 1);
        (be.max_len, voice.max_len) = (1042, 98);
        let snap = CakeSnapshot {
            memory_used: 2304,
            memory_limit: 5_000_000,
            tins: vec![bulk, be, voice],
        };
        let mut text = String::new();
        cake(&mut text, &snap, "");
        assert_eq!(tin_table(&text), tin_table(KERNEL_DIFFSERV3), "{text}");
        assert!(
            KERNEL_DIFFSERV3.contains(text.lines().next().unwrap_or("?")),
            "{text}"
        );
    }

    #[test]
    fn times_as_tc_cake_prints_them() {
        for (ns, want) in [
            (5_000_000, "5ms"),
            (29_100_000, "29.1ms"),
            (7_270_000, "7.27ms"),
            (124_500_000, "124ms"),
            (4_999, "4us"),
            (0, "0us"),
            (1_500_000_000, "1.5s"),
        ] {
            assert_eq!(cake_time(ns), want, "{ns}");
        }
    }

    /// A CAKE root in linkshare with the kernel run's parameters: its thresholds, COBALT
    /// parameters and quanta are the kernel's, tin by tin, in tc's order.
    #[test]
    fn a_cake_root_shows_the_kernels_tin_parameters() {
        for (policy, kernel) in [
            ("bandwidth = \"100mbit\"", KERNEL_DIFFSERV3),
            (
                "bandwidth = \"10mbit\", diffserv = \"diffserv4\"",
                KERNEL_DIFFSERV4,
            ),
        ] {
            let text = format!("qdisc = {{ type = \"cake\", {policy} }}\n");
            let mut o = Offline::new(&text, "p.toml").unwrap_or_else(|d| panic!("{d}"));
            let Response::Stat(s) = answer(&mut o, r#"{"v":1,"cmd":"stat"}"#) else {
                panic!("no stat")
            };
            let out = render(&s);
            assert!(out.contains("qdisc cake 1: root\n"), "{out}");
            let (ours, theirs) = (tin_table(&out), tin_table(kernel));
            assert_eq!(ours[0], theirs[0], "tin names");
            for name in ["thresh", "target", "interval", "quantum"] {
                assert_eq!(row(&ours, name), row(&theirs, name), "{name}:\n{out}");
            }
            // Nothing has been sent through ours: every counter row is zeros.
            for name in ["pkts", "bytes", "drops", "bk_flows"] {
                assert!(row(&ours, name).iter().all(|c| *c == "0"), "{name}:\n{out}");
            }
        }
    }
}
