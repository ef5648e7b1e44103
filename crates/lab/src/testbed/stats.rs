//! A router's counters, and the parsers that read them from `tc -s class show` and from
//! `linkshare stat --json`.
//!
//! Both routers report in one vocabulary, [`RouterStats`] with a [`ClassCounters`] per class
//! named as `tc -s class show` names them, so a lab run can put linkshare beside the kernel's
//! HTB. The parsers never fail: a field that is missing or malformed reads as zero (tc's output
//! format: iproute2 `tc/q_htb.c`, `tc/tc_class.c`; ours: docs/router.md).

use serde_json::Value;

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

/// The forward direction of a `stat --json` object (see docs/router.md).
pub fn parse_stat(st: &Value) -> RouterStats {
    let d = &st["directions"][0];
    let u = |v: &Value, k: &str| v.get(k).and_then(Value::as_u64).unwrap_or(0);
    let f = |v: &Value, k: &str| v.get(k).and_then(Value::as_f64).unwrap_or(0.0);
    let classes = d["classes"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| ClassCounters {
            name: c["name"].as_str().unwrap_or("?").to_string(),
            parent: c["parent"].as_str().map(str::to_string),
            rate_bps: f(c, "rate_bps"),
            ceil_bps: f(c, "ceil_bps"),
            sent_bytes: u(c, "sent_bytes"),
            sent_packets: u(c, "sent_packets"),
            drops: u(c, "drops"),
            overlimits: u(c, "overlimits"),
            lends: u(c, "lended"),
            borrows: u(c, "borrowed"),
            backlog_bytes: u(c, "backlog_bytes"),
            mode: c["mode"].as_str().unwrap_or("").to_string(),
            tokens: c["tokens"].as_i64().unwrap_or(0),
            ctokens: c["ctokens"].as_i64().unwrap_or(0),
        })
        .collect();
    let q = &d["qdisc"];
    let mut drops = std::collections::BTreeMap::new();
    for key in ["refused_by_reason", "dropped_by_reason"] {
        for (k, v) in q[key].as_object().into_iter().flatten() {
            *drops.entry(k.clone()).or_insert(0) += v.as_u64().unwrap_or(0);
        }
    }
    let mut extra = std::collections::BTreeMap::new();
    let late = &st["lateness_ns"];
    extra.insert("lateness_p50_us".to_string(), f(late, "p50") / 1e3);
    extra.insert("lateness_p99_us".to_string(), f(late, "p99") / 1e3);
    extra.insert("lateness_max_us".to_string(), f(late, "max") / 1e3);
    extra.insert("lateness_samples".to_string(), f(late, "samples"));
    extra.insert("catch_up_turns".to_string(), f(st, "catch_up_turns"));
    extra.insert("early_wake_us".to_string(), f(st, "early_wake_ns") / 1e3);
    let timer = &st["timer_wake_ns"];
    extra.insert("timer_wake_p99_us".to_string(), f(timer, "p99") / 1e3);
    extra.insert("timer_wake_samples".to_string(), f(timer, "samples"));
    RouterStats {
        classes,
        kind: d["kind"].as_str().unwrap_or("none").to_string(),
        enqueued_packets: u(q, "enqueued"),
        dequeued_packets: u(q, "dequeued"),
        dequeued_bytes: u(q, "dequeued_bytes"),
        drops,
        overlimits: u(q, "overlimits"),
        marked: u(q, "marked"),
        emu_lost: u(&d["emulate"], "lost"),
        emu_duplicated: u(&d["emulate"], "duplicated"),
        emu_reordered: u(&d["emulate"], "reordered"),
        extra,
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
}
