//! A router's counters, read from `tc -s class show` and from linkshare's `stat`.
//!
//! Both routers report in one vocabulary, [`RouterStats`] with a [`ClassCounters`] per class
//! named as `tc -s class show` names them, so a lab run can put linkshare beside the kernel's
//! HTB. The return direction's scheduler (a scenario's `[uplink]`) is read the same way, as
//! its root's counters only ([`RouterStats::reverse_of`], [`parse_tc_uplink`]).
//!
//! * linkshare's side is typed: what `linkshare stat --json` prints is the router's own
//!   [`Snapshot`] (`linkshare_router::control::snapshot`, serde), the one definition the router
//!   writes and the lab reads, so a key the router renames or drops is an error where the
//!   snapshot is read, never a silent zero. [`RouterStats::from_snapshot`] only picks fields.
//! * tc's side is text (iproute2 `tc/q_htb.c`, `tc/tc_class.c`): [`parse_tc_classes`] never
//!   fails, a field that is missing or malformed reads as zero.

use std::collections::BTreeMap;

use linkshare_router::control::snapshot::{EmulateSnapshot, QdiscSnapshot, Snapshot, TinSnapshot};

/// One class's counters as a router reports them (the names of `tc -s class show`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ClassCounters {
    pub name: String,
    pub parent: Option<String>,
    pub rate_bps: f64,
    pub ceil_bps: f64,
    pub sent_bytes: u64,
    pub sent_packets: u64,
    pub drops: u64,
    pub overlimits: u64,
    pub lends: u64,
    pub borrows: u64,
    pub backlog_bytes: u64,
    /// `can_send`, `may_borrow`, `cant_send`.
    pub mode: String,
    /// HTB's rate and ceil tokens in bytes (negative in debt).
    pub tokens: i64,
    pub ctokens: i64,
}

/// A snapshot of the router's forward direction.
#[derive(Clone, Debug, Default)]
pub struct RouterStats {
    pub classes: Vec<ClassCounters>,
    /// Scheduler kind (`htb`, …).
    pub kind: String,
    pub enqueued_packets: u64,
    pub dequeued_packets: u64,
    pub dequeued_bytes: u64,
    pub drops: std::collections::BTreeMap<String, u64>,
    pub overlimits: u64,
    pub marked: u64,
    /// The emulated link's impairments on the forward direction (`--emulate`): frames lost,
    /// duplicated, reordered; zero without emulation.
    pub emu_lost: u64,
    pub emu_duplicated: u64,
    pub emu_reordered: u64,
    /// Router-specific gauges for the summary (`lateness_p50_us`, …).
    pub extra: std::collections::BTreeMap<String, f64>,
}

/// The unsigned integers in `line`, in order ("Sent 12 bytes 3 pkt (dropped 0, …" → 12, 3, 0 …).
pub(super) fn numbers(line: &str) -> Vec<u64> {
    line.split(|c: char| !c.is_ascii_digit())
        .filter(|w| !w.is_empty())
        .filter_map(|w| w.parse().ok())
        .collect()
}

/// `tc -s class show` of an HTB tree exported from a policy whose classes (name, parent, rate,
/// ceil) are `names` in file order (class `i` is `1:<i+1>`, hex).
pub fn parse_tc_classes(
    text: &str,
    names: &[(String, Option<String>, f64, f64)],
) -> Vec<ClassCounters> {
    let mut out: Vec<ClassCounters> = Vec::new();
    for line in text.lines() {
        let w: Vec<&str> = line.split_whitespace().collect();
        match w.first().copied() {
            Some("class") if w.len() > 2 => {
                let minor = w[2]
                    .split_once(':')
                    .and_then(|(_, m)| usize::from_str_radix(m, 16).ok());
                let Some((name, parent, rate, ceil)) = minor
                    .and_then(|m| m.checked_sub(1))
                    .and_then(|i| names.get(i))
                else {
                    continue;
                };
                out.push(ClassCounters {
                    name: name.clone(),
                    parent: parent.clone(),
                    rate_bps: *rate,
                    ceil_bps: *ceil,
                    ..ClassCounters::default()
                });
            }
            Some("Sent") => {
                if let Some(c) = out.last_mut() {
                    let n = numbers(line);
                    c.sent_bytes = n.first().copied().unwrap_or(0);
                    c.sent_packets = n.get(1).copied().unwrap_or(0);
                    c.drops = n.get(2).copied().unwrap_or(0);
                    c.overlimits = n.get(3).copied().unwrap_or(0);
                }
            }
            Some("backlog") => {
                if let Some(c) = out.last_mut() {
                    // "backlog 1514b 1p requeues 0": tc prints sizes with units (b, Kb, Mb).
                    c.backlog_bytes = w.get(1).map_or(0, |b| tc_size(b));
                }
            }
            Some("lended:") => {
                if let Some(c) = out.last_mut() {
                    let n = numbers(line);
                    c.lends = n.first().copied().unwrap_or(0);
                    c.borrows = n.get(1).copied().unwrap_or(0);
                }
            }
            Some("tokens:") => {
                if let Some(c) = out.last_mut() {
                    // tc prints HTB's tokens in 64-ns scheduler ticks; in bytes at the class's
                    // rate (ceil for ctokens), as linkshare reports them.
                    let t = |k: usize| -> i64 {
                        w.get(k).and_then(|v| v.parse::<i64>().ok()).unwrap_or(0)
                    };
                    let to_bytes = |ticks: i64, bps: f64| (ticks as f64 * 64e-9 * bps / 8.0) as i64;
                    c.tokens = to_bytes(t(1), c.rate_bps);
                    c.ctokens = to_bytes(t(3), c.ceil_bps);
                }
            }
            _ => {}
        }
    }
    out
}

/// Linux's HFSC counts a packet only in its leaf (`hfsc_dequeue` updates the leaf's `bstats`;
/// an inner class's `Sent` stays 0), where HTB and linkshare count it in every class on the way
/// up: each inner class's sent bytes and packets become its leaves' sums, so that the kernel's
/// rows mean what ours do. A class counts as inner when another one names it as parent.
pub fn sum_inner_from_leaves(classes: &mut [ClassCounters]) {
    let index = |name: &str, cs: &[ClassCounters]| cs.iter().position(|c| c.name == name);
    let inner: Vec<bool> = classes
        .iter()
        .map(|c| classes.iter().any(|k| k.parent.as_deref() == Some(&c.name)))
        .collect();
    let mut sums = vec![(0u64, 0u64); classes.len()];
    for (i, c) in classes.iter().enumerate() {
        if inner[i] {
            continue;
        }
        // Up the tree from the leaf; a cycle in the names cannot loop for ever.
        let mut p = c.parent.as_deref().and_then(|n| index(n, classes));
        for _ in 0..classes.len() {
            let Some(j) = p else { break };
            sums[j].0 += c.sent_bytes;
            sums[j].1 += c.sent_packets;
            p = classes[j].parent.as_deref().and_then(|n| index(n, classes));
        }
    }
    for (i, c) in classes.iter_mut().enumerate() {
        if inner[i] {
            (c.sent_bytes, c.sent_packets) = sums[i];
        }
    }
}

/// A size as tc prints it: `1514b`, `15Kb`, `2Mb` (1024-based), or a bare number.
fn tc_size(s: &str) -> u64 {
    let digits: String = s.chars().take_while(|c| c.is_ascii_digit()).collect();
    let n: u64 = digits.parse().unwrap_or(0);
    let unit = &s[digits.len()..];
    match unit.to_ascii_lowercase().as_str() {
        "kb" | "k" => n * 1024,
        "mb" | "m" => n * 1024 * 1024,
        _ => n,
    }
}

impl RouterStats {
    /// The forward direction (the first) of a linkshare router's snapshot, in the lab's
    /// vocabulary, with the loop's timing figures as `extra` gauges.
    pub fn from_snapshot(st: &Snapshot) -> RouterStats {
        let mut extra = std::collections::BTreeMap::new();
        let us = |ns: u64| ns as f64 / 1e3;
        let late = &st.lateness_ns;
        extra.insert("lateness_p50_us".to_string(), us(late.p50));
        extra.insert("lateness_p99_us".to_string(), us(late.p99));
        extra.insert("lateness_max_us".to_string(), us(late.max));
        extra.insert("lateness_samples".to_string(), late.samples as f64);
        extra.insert("catch_up_turns".to_string(), st.catch_up_turns as f64);
        extra.insert("early_wake_us".to_string(), us(st.early_wake_ns));
        extra.insert("timer_wake_p99_us".to_string(), us(st.timer_wake_ns.p99));
        extra.insert(
            "timer_wake_samples".to_string(),
            st.timer_wake_ns.samples as f64,
        );
        let Some(d) = st.directions.first() else {
            return RouterStats {
                kind: "none".to_string(),
                extra,
                ..RouterStats::default()
            };
        };
        let classes = d
            .classes
            .iter()
            .map(|c| ClassCounters {
                name: c.name.clone(),
                parent: c.parent.clone(),
                rate_bps: c.rate_bps as f64,
                ceil_bps: c.ceil_bps as f64,
                sent_bytes: c.sent_bytes,
                sent_packets: c.sent_packets,
                drops: c.drops,
                overlimits: c.overlimits,
                lends: c.lended,
                borrows: c.borrowed,
                backlog_bytes: c.backlog_bytes,
                mode: c.mode.clone(),
                tokens: c.tokens,
                ctokens: c.ctokens,
            })
            .collect();
        let unshaped = QdiscSnapshot::default();
        let q = d.qdisc.as_ref().unwrap_or(&unshaped);
        let drops = drops_by_reason(q);
        let emu = |f: fn(&EmulateSnapshot) -> u64| d.emulate.as_ref().map_or(0, f);
        RouterStats {
            classes,
            kind: d.kind.clone().unwrap_or_else(|| "none".to_string()),
            enqueued_packets: q.enqueued,
            dequeued_packets: q.dequeued,
            dequeued_bytes: q.dequeued_bytes,
            drops,
            overlimits: q.overlimits,
            marked: q.marked,
            emu_lost: emu(|e| e.lost),
            emu_duplicated: emu(|e| e.duplicated),
            emu_reordered: emu(|e| e.reordered),
            extra,
        }
    }

    /// The return direction (the second) of a linkshare router's snapshot where it is shaped
    /// (`--reverse-policy`, a scenario's `[uplink]`): its scheduler's counters, and a CAKE's
    /// sojourn estimates as `extra` gauges (`av_delay_ms`, `pk_delay_ms`: its busiest tin's).
    pub fn reverse_of(st: &Snapshot) -> Option<RouterStats> {
        let d = st.directions.get(1).filter(|d| d.shaped)?;
        let q = d.qdisc.as_ref()?;
        let mut extra = BTreeMap::new();
        if let Some(c) = &q.cake {
            let ms =
                |f: fn(&TinSnapshot) -> u64| c.tins.iter().map(f).max().unwrap_or(0) as f64 / 1e6;
            extra.insert("av_delay_ms".to_string(), ms(|t| t.avg_delay_ns));
            extra.insert("pk_delay_ms".to_string(), ms(|t| t.peak_delay_ns));
        }
        Some(RouterStats {
            kind: d.kind.clone().unwrap_or_else(|| "none".to_string()),
            enqueued_packets: q.enqueued,
            dequeued_packets: q.dequeued,
            dequeued_bytes: q.dequeued_bytes,
            drops: drops_by_reason(q),
            overlimits: q.overlimits,
            marked: q.marked,
            extra,
            ..RouterStats::default()
        })
    }
}

/// A scheduler's drops and refusals, summed per reason.
fn drops_by_reason(q: &QdiscSnapshot) -> BTreeMap<String, u64> {
    let mut drops = BTreeMap::new();
    for (k, v) in q.refused_by_reason.iter().chain(&q.dropped_by_reason) {
        *drops.entry(k.clone()).or_insert(0) += v;
    }
    drops
}

/// `tc -s qdisc show dev X` of the return direction (a scenario's `[uplink]` on the kernel's
/// side), root first: the root's `Sent B bytes P pkt (dropped D, overlimits O …)`; where a CAKE
/// prints tins, their `ack_drop` (the ACK filter's) and `drops` (COBALT's and overflow's) as
/// the drop reasons `ack_filter` and `aqm` as linkshare names them, else the root's `dropped`;
/// and the busiest tin's `av_delay` and `pk_delay` (ms) as `extra`. Never fails: what is
/// missing reads as zero.
pub fn parse_tc_uplink(text: &str) -> RouterStats {
    let mut st = RouterStats::default();
    let mut rows: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    let mut root_read = false;
    for line in text.lines() {
        let w: Vec<&str> = line.split_whitespace().collect();
        match w.first().copied() {
            Some("qdisc") if st.kind.is_empty() => {
                st.kind = w.get(1).copied().unwrap_or("none").to_string();
            }
            Some("Sent") if !root_read => {
                root_read = true;
                let n = numbers(line);
                st.dequeued_bytes = n.first().copied().unwrap_or(0);
                st.dequeued_packets = n.get(1).copied().unwrap_or(0);
                let dropped = n.get(2).copied().unwrap_or(0);
                st.overlimits = n.get(3).copied().unwrap_or(0);
                st.drops.insert("dropped".to_string(), dropped);
                st.enqueued_packets = st.dequeued_packets + dropped;
            }
            Some(k @ ("ack_drop" | "drops" | "marks" | "av_delay" | "pk_delay")) => {
                rows.entry(k).or_default().extend(&w[1..]);
            }
            _ => {}
        }
    }
    let sum = |k: &str| -> u64 {
        rows.get(k)
            .map_or(0, |v| v.iter().filter_map(|x| x.parse::<u64>().ok()).sum())
    };
    if rows.contains_key("ack_drop") {
        st.drops.clear();
        st.drops.insert("ack_filter".to_string(), sum("ack_drop"));
        st.drops.insert("aqm".to_string(), sum("drops"));
        st.marked = sum("marks");
        for (row, key) in [("av_delay", "av_delay_ms"), ("pk_delay", "pk_delay_ms")] {
            let most = rows
                .get(row)
                .map_or(0.0, |v| v.iter().map(|x| tc_time_ms(x)).fold(0.0, f64::max));
            st.extra.insert(key.to_string(), most);
        }
    }
    st
}

/// A time as tc prints it (`182.3ms`, `45us`, `1.2s`), in milliseconds; 0 when unreadable.
fn tc_time_ms(s: &str) -> f64 {
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let n: f64 = s[..split].parse().unwrap_or(0.0);
    match &s[split..] {
        "s" => n * 1e3,
        "ms" => n,
        "us" => n / 1e3,
        "ns" => n / 1e6,
        _ => 0.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tc_class_statistics_become_counters() {
        let text = "class htb 1:1 root rate 10Mbit ceil 10Mbit burst 2750b cburst 2750b \n \
Sent 1500 bytes 3 pkt (dropped 0, overlimits 2 requeues 0) \n \
backlog 0b 0p requeues 0\n \
lended: 0 borrowed: 0 giants: 0\n \
tokens: 34375 ctokens: 34375\n\n\
class htb 1:2 parent 1:1 leaf 3: prio 0 rate 2Mbit ceil 10Mbit burst 1750b cburst 2750b \n \
Sent 15000 bytes 10 pkt (dropped 4, overlimits 7 requeues 0) \n \
backlog 3Kb 2p requeues 0\n \
lended: 6 borrowed: 4 giants: 0\n \
tokens: -1000 ctokens: 5000\n";
        let names = vec![
            ("root".to_string(), None, 10e6, 10e6),
            ("voice".to_string(), Some("root".to_string()), 2e6, 10e6),
        ];
        let c = parse_tc_classes(text, &names);
        assert_eq!(c.len(), 2);
        assert_eq!(
            (c[0].name.as_str(), c[0].sent_bytes, c[0].sent_packets),
            ("root", 1500, 3)
        );
        assert_eq!(c[0].overlimits, 2);
        let v = &c[1];
        assert_eq!(v.name, "voice");
        assert_eq!(v.parent.as_deref(), Some("root"));
        assert_eq!(
            (v.sent_bytes, v.sent_packets, v.drops, v.overlimits),
            (15000, 10, 4, 7)
        );
        assert_eq!((v.lends, v.borrows), (6, 4));
        assert_eq!(v.backlog_bytes, 3 * 1024);
        // 1000 ticks of 64 ns at 2 Mbit/s = 16 bytes of debt; 5000 ticks at 10 Mbit/s = 400 bytes.
        assert_eq!((v.tokens, v.ctokens), (-16, 400));
    }

    #[test]
    fn hfsc_inner_classes_are_their_leaves_sums() {
        let class = |name: &str, parent: Option<&str>, bytes, pkts| ClassCounters {
            name: name.into(),
            parent: parent.map(Into::into),
            sent_bytes: bytes,
            sent_packets: pkts,
            ..ClassCounters::default()
        };
        // As `tc -s class show` prints an HFSC tree: only the leaves have counted.
        let mut c = vec![
            class("link", None, 0, 0),
            class("a", Some("link"), 0, 0),
            class("a1", Some("a"), 3000, 2),
            class("a2", Some("a"), 1500, 1),
            class("b", Some("link"), 700, 1),
        ];
        sum_inner_from_leaves(&mut c);
        let got: Vec<(u64, u64)> = c.iter().map(|c| (c.sent_bytes, c.sent_packets)).collect();
        assert_eq!(
            got,
            vec![(5200, 4), (4500, 3), (3000, 2), (1500, 1), (700, 1)]
        );
    }

    /// What the router writes (`stat --json` is `serde_json::to_string` of its [`Snapshot`]) is
    /// what the lab reads: the text parses back into the same snapshot, the lab's counters are
    /// its fields, and a key the router stops writing is an error, not a zero.
    #[test]
    fn stat_json_round_trips_through_the_routers_types() {
        use linkshare_router::control::snapshot::{ClassSnapshot, DirectionSnapshot, LatenessNs};
        let class = |name: &str, parent: Option<&str>, k: u64| ClassSnapshot {
            name: name.into(),
            id: k as u32,
            parent: parent.map(Into::into),
            leaf: parent.is_some(),
            rate_bps: 1_000_000 * k,
            ceil_bps: 10_000_000,
            mode: "may_borrow".into(),
            sent_bytes: 1500 * k,
            sent_packets: k,
            drops: 2 * k,
            overlimits: 3 * k,
            lended: 4 * k,
            borrowed: 5 * k,
            backlog_bytes: 60 * k,
            tokens: -7 * k as i64,
            ctokens: 8 * k as i64,
            ..ClassSnapshot::default()
        };
        let qdisc = QdiscSnapshot {
            enqueued: 10,
            dequeued: 9,
            dequeued_bytes: 13_500,
            dropped_by_reason: [("overlimit".to_string(), 2)].into_iter().collect(),
            refused_by_reason: [("overlimit".to_string(), 1), ("memory".to_string(), 4)]
                .into_iter()
                .collect(),
            overlimits: 11,
            marked: 12,
            ..QdiscSnapshot::default()
        };
        let snap = Snapshot {
            lateness_ns: LatenessNs {
                p50: 2_000,
                p99: 31_000,
                max: 90_000,
                mean: 3_000,
                samples: 77,
            },
            catch_up_turns: 5,
            early_wake_ns: 4_500,
            directions: vec![DirectionSnapshot {
                kind: Some("htb".into()),
                qdisc: Some(qdisc),
                classes: vec![class("root", None, 1), class("voice", Some("root"), 2)],
                emulate: Some(EmulateSnapshot {
                    lost: 6,
                    duplicated: 7,
                    reordered: 8,
                    ..EmulateSnapshot::default()
                }),
                ..DirectionSnapshot::default()
            }],
            ..Snapshot::default()
        };
        let text = serde_json::to_string(&snap).expect("a snapshot serialises");
        let back: Snapshot = serde_json::from_str(&text).expect("the router's JSON parses back");
        assert_eq!(back, snap);

        let st = RouterStats::from_snapshot(&back);
        assert_eq!(st.kind, "htb");
        assert_eq!(
            (st.enqueued_packets, st.dequeued_packets, st.dequeued_bytes),
            (10, 9, 13_500)
        );
        assert_eq!((st.overlimits, st.marked), (11, 12));
        let drops: Vec<(&str, u64)> = st.drops.iter().map(|(k, v)| (k.as_str(), *v)).collect();
        assert_eq!(drops, [("memory", 4), ("overlimit", 3)]);
        assert_eq!(
            (st.emu_lost, st.emu_duplicated, st.emu_reordered),
            (6, 7, 8)
        );
        assert_eq!(st.extra["lateness_p99_us"], 31.0);
        assert_eq!(st.extra["catch_up_turns"], 5.0);
        assert_eq!(st.extra["early_wake_us"], 4.5);
        let v = &st.classes[1];
        assert_eq!(
            (v.name.as_str(), v.parent.as_deref()),
            ("voice", Some("root"))
        );
        assert_eq!((v.rate_bps, v.ceil_bps), (2e6, 10e6));
        assert_eq!(
            (v.sent_bytes, v.sent_packets, v.drops, v.overlimits),
            (3000, 2, 4, 6)
        );
        assert_eq!((v.lends, v.borrows, v.backlog_bytes), (8, 10, 120));
        assert_eq!(
            (v.mode.as_str(), v.tokens, v.ctokens),
            ("may_borrow", -14, 16)
        );

        // A class row without `sent_bytes` (a renamed or dropped key) no longer reads as 0.
        let mut json: serde_json::Value = serde_json::from_str(&text).expect("valid JSON");
        let row = &mut json["directions"][0]["classes"][1];
        assert!(row
            .as_object_mut()
            .and_then(|o| o.remove("sent_bytes"))
            .is_some());
        let err = serde_json::from_value::<Snapshot>(json).expect_err("a missing key is refused");
        assert!(err.to_string().contains("sent_bytes"), "{err}");
    }

    #[test]
    fn a_snapshot_without_directions_reads_as_unshaped() {
        let st = RouterStats::from_snapshot(&Snapshot::default());
        assert_eq!(st.kind, "none");
        assert!(st.classes.is_empty());
        assert_eq!(st.extra["lateness_samples"], 0.0);
    }

    /// The kernel's CAKE on the return direction (as a user-mode Linux guest printed it, cut to
    /// the rows read): the ACK filter's and COBALT's drops apart, the busiest tin's delays.
    #[test]
    fn a_kernel_uplinks_counters_are_read_from_tc() {
        let text = "qdisc cake 8003: root refcnt 2 bandwidth 100Kbit besteffort triple-isolate nonat nowash ack-filter split-gso rtt 100ms raw overhead 0 \n \
Sent 125400 bytes 1900 pkt (dropped 2412, overlimits 2050 requeues 0) \n \
backlog 1320b 20p requeues 0\n \
memory used: 42Kb of 4Mb\n\n                  Tin 0\n  \
thresh        100Kbit\n  target        182.3ms\n  interval      277.3ms\n  \
pk_delay        1.5s\n  av_delay      190.5ms\n  sp_delay         12us\n  \
drops              12\n  marks               0\n  ack_drop         2400\n";
        let st = parse_tc_uplink(text);
        assert_eq!(st.kind, "cake");
        assert_eq!((st.dequeued_bytes, st.dequeued_packets), (125_400, 1900));
        assert_eq!(st.enqueued_packets, 1900 + 2412);
        assert_eq!(st.overlimits, 2050);
        assert_eq!(st.drops.get("ack_filter"), Some(&2400));
        assert_eq!(st.drops.get("aqm"), Some(&12));
        assert_eq!(st.drops.get("dropped"), None);
        assert_eq!(st.extra.get("av_delay_ms"), Some(&190.5));
        assert_eq!(st.extra.get("pk_delay_ms"), Some(&1500.0));

        // An HTB root (the uplink without a policy): the root's line, not its leaf's.
        let text = "qdisc htb 1: root refcnt 2 r2q 10 default 0x1 direct_packets_stat 0 direct_qlen 1000\n \
Sent 5200 bytes 100 pkt (dropped 3, overlimits 40 requeues 0) \n \
backlog 0b 0p requeues 0\n\
qdisc pfifo 2: parent 1:1 limit 20p\n \
Sent 5100 bytes 98 pkt (dropped 3, overlimits 0 requeues 0) \n";
        let st = parse_tc_uplink(text);
        assert_eq!(st.kind, "htb");
        assert_eq!((st.dequeued_bytes, st.dequeued_packets), (5200, 100));
        assert_eq!(st.drops.get("dropped"), Some(&3));
        assert!(st.extra.is_empty());
        assert_eq!(tc_time_ms("45us"), 0.045);
        assert_eq!(tc_time_ms("bogus"), 0.0);
    }
}
