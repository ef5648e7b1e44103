//! `linkshare stat` for people: the running shaper's typed snapshot
//! (`linkshare_router::control::Snapshot`) rendered in the manner of `tc -s class show` — one
//! block per class, indented by its depth in the tree (from each class's `parent`, so a tree
//! declared in any order is drawn right) — and the `hello` reply of `stat --capabilities`.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use linkshare_router::control::snapshot::{DirectionSnapshot, InterfaceSnapshot};
use linkshare_router::control::{Hello, Snapshot};

/// `total` or `total (reason n, …)` for a per-reason map.
fn reasons(m: &BTreeMap<String, u64>) -> String {
    let total: u64 = m.values().sum();
    let parts: Vec<String> = m
        .iter()
        .filter(|(_, n)| **n > 0)
        .map(|(r, n)| format!("{r} {n}"))
        .collect();
    if parts.is_empty() {
        total.to_string()
    } else {
        format!("{total} ({})", parts.join(", "))
    }
}

fn interface(out: &mut String, i: &InterfaceSnapshot) {
    let _ = writeln!(
        out,
        "dev {} (io {}): rx {} pkts {} bytes, tx {} pkts {} bytes, non-ip {} (shaped {}, dropped {}), fragments {}",
        i.name,
        i.io,
        i.rx_packets,
        i.rx_bytes,
        i.tx_packets,
        i.tx_bytes,
        i.non_ip_passed,
        i.non_ip_shaped,
        i.non_ip_dropped,
        i.fragments
    );
    if i.dscp_untrusted + i.dscp_washed > 0 {
        let _ = writeln!(
            out,
            "  dscp: untrusted {} (classified as best effort), washed {}",
            i.dscp_untrusted, i.dscp_washed
        );
    }
    let _ = writeln!(
        out,
        "  tx dropped: ring_full {} too_big {}; kicks {} (errors {}); rx ring drops {}, truncated {}; malformed {}",
        i.tx_drops.ring_full,
        i.tx_drops.too_big,
        i.tx_kicks,
        i.tx_kick_errors,
        i.rx_ring_drops,
        i.rx_truncated,
        reasons(&i.malformed)
    );
}

fn direction(out: &mut String, d: &DirectionSnapshot) {
    let _ = writeln!(
        out,
        "{} -> {}: {}",
        d.from,
        d.to,
        d.kind.as_deref().unwrap_or("unshaped")
    );
    if let Some(q) = &d.qdisc {
        let _ = write!(
            out,
            "  enqueued {} dequeued {} dropped {} refused {} backlog {}p {}b overlimits {}",
            q.enqueued,
            q.dequeued,
            q.dropped,
            q.refused,
            q.backlog_packets,
            q.backlog_bytes,
            q.overlimits
        );
        if q.marked > 0 {
            let _ = write!(out, " marked {}", q.marked);
        }
        out.push('\n');
        if let Some(c) = &q.cake {
            crate::stat_tc::cake(out, c, "  ");
        }
    }
    if (d.classes.len() as u64) < d.class_count {
        let _ = writeln!(
            out,
            "  {} of {} classes shown",
            d.classes.len(),
            d.class_count
        );
    }
    for (c, depth) in d.classes.iter().zip(d.depths()) {
        let indent = "  ".repeat(1 + depth);
        let marked = if c.marked > 0 {
            format!(", marked {}", c.marked)
        } else {
            String::new()
        };
        let name = match &c.circuit_id {
            Some(id) => format!("{} [circuit {id}]", c.name),
            None => c.name.clone(),
        };
        let _ = writeln!(
            out,
            "{indent}class {} ({}) rate {} ceil {} prio {} ({})\n{indent}  live {} {:.0}pps\n{indent}  Sent {} bytes {} pkt (dropped {}, overlimits {}{marked}) backlog {}b {}p\n{indent}  lended: {} borrowed: {} tokens: {} ctokens: {}",
            name,
            crate::stat_tc::handle(c),
            crate::stat_tc::rate(c.rate_bps),
            crate::stat_tc::rate(c.ceil_bps),
            c.prio,
            c.mode,
            crate::stat_tc::live_rate(c.live_rate_bps),
            c.live_pps,
            c.sent_bytes,
            c.sent_packets,
            c.drops,
            c.overlimits,
            c.backlog_bytes,
            c.backlog_packets,
            c.lended,
            c.borrowed,
            c.tokens,
            c.ctokens,
        );
        if let Some(h) = &c.hfsc {
            // HFSC: tc's period, level and work, and the paper's times (µs on the scheduler's
            // clock; et/dt only for real-time leaves).
            let us = |ns: u64| format!("{:.1}us", ns as f64 / 1e3);
            let _ = write!(
                out,
                "{indent}  period {} level {} work {} rtwork {} vt {} ft {}",
                h.period,
                h.level,
                h.work_bytes,
                h.rtwork_bytes,
                us(h.vt_ns),
                us(h.ft_ns)
            );
            if h.rt.is_some() {
                let _ = write!(out, " et {} dt {}", us(h.et_ns), us(h.dt_ns));
            }
            out.push('\n');
        }
        if let Some(k) = &c.cake {
            // The leaf CAKE's tins, as tc-cake prints them.
            crate::stat_tc::cake(out, k, &format!("{indent}  "));
        }
    }
}

/// Pacing lateness (ns) above which `stat` names the timer as the cause when it is as late
/// (issue 14's pacing target: p99 within 20 µs).
const PACING_HINT_NS: u64 = 20_000;

/// The human form of a snapshot.
pub fn render(st: &Snapshot) -> String {
    let mut out = String::new();
    let us = |ns: u64| ns as f64 / 1000.0;
    let l = &st.lateness_ns;
    let _ = writeln!(
        out,
        "uptime {:.1}s  pacing lateness p50 {:.1}us p99 {:.1}us max {:.1}us ({} paced departures)",
        st.uptime_s,
        us(l.p50),
        us(l.p99),
        us(l.max),
        l.samples
    );
    let t = &st.timer_wake_ns;
    if t.samples > 0 {
        let _ = writeln!(
            out,
            "  timer wake-ups late p50 {:.1}us p99 {:.1}us max {:.1}us ({} sleeps); early wake {:.1}us ({})",
            us(t.p50),
            us(t.p99),
            us(t.max),
            t.samples,
            us(st.early_wake_ns),
            if st.early_wake_learnt { "learnt" } else { "fixed" }
        );
        // Late departures that the timer explains: say what removes them, and what it costs.
        if st.early_wake_learnt && t.p99 > PACING_HINT_NS && l.p99 > PACING_HINT_NS {
            let _ = writeln!(
                out,
                "  pacing waits on this timer: --busy-poll-us 2000 keeps the loop awake (a core) while classes are throttled"
            );
        }
    }
    if st.rx_coalesced > 0 {
        let _ = writeln!(
            out,
            "  receive coalescing: {} sleeps (--rx-coalesce-us)",
            st.rx_coalesced
        );
    }
    for i in &st.interfaces {
        interface(&mut out, i);
    }
    for d in &st.directions {
        direction(&mut out, d);
    }
    out
}

/// The human form of `stat --capabilities`.
pub fn render_hello(h: &Hello) -> String {
    format!(
        "{}: control protocol {} (answers {} to {})\nrequests: {}\nfeatures: {}\nlimits: request {} bytes, reply {} bytes\n",
        h.server,
        h.version,
        h.min_version,
        h.version,
        h.requests.join(", "),
        h.features.join(", "),
        h.max_request_bytes,
        h.max_reply_bytes
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use linkshare_router::control::snapshot::LatenessNs;
    use linkshare_router::control::{answer, Offline, Response};

    /// An HFSC class's scheduler state in the plain view, with tc's field names.
    #[test]
    fn hfsc_classes_show_tc_s_state_fields() {
        let policy = "qdisc = \"hfsc\"\ndefault = \"bulk\"\n\
            [[class]]\nname = \"up\"\nls = \"1mbit\"\nul = \"1mbit\"\n\
            [[class]]\nname = \"voip\"\nparent = \"up\"\nrt = { m1 = \"400kbit\", d = \"30ms\", m2 = \"100kbit\" }\nls = \"100kbit\"\n\
            [[class]]\nname = \"bulk\"\nparent = \"up\"\nsc = \"900kbit\"\n";
        let mut o = Offline::new(policy, "p.toml").unwrap_or_else(|d| panic!("{d}"));
        let Response::Stat(s) = answer(&mut o, r#"{"v":1,"cmd":"stat"}"#) else {
            panic!("no stat")
        };
        let plain = render(&s);
        assert!(
            plain.contains("period 0 level 0 work 0 rtwork 0 vt 0.0us ft 0.0us et 0.0us dt 0.0us"),
            "{plain}"
        );
    }

    /// Drawn from a tree declared breadth-first: each class sits under its own parent.
    #[test]
    fn classes_are_indented_under_their_real_parents() {
        let tree = "qdisc = \"htb\"\ndefault = \"a1\"\n\
            [[class]]\nname = \"root\"\nrate = \"10mbit\"\n\
            [[class]]\nname = \"A\"\nparent = \"root\"\nrate = \"5mbit\"\n\
            [[class]]\nname = \"B\"\nparent = \"root\"\nrate = \"5mbit\"\n\
            [[class]]\nname = \"a1\"\nparent = \"A\"\nrate = \"5mbit\"\n\
            [[class]]\nname = \"b1\"\nparent = \"B\"\nrate = \"5mbit\"\n";
        let mut o = Offline::new(tree, "t.toml").unwrap_or_else(|d| panic!("{d}"));
        let Response::Stat(s) = answer(&mut o, r#"{"v":1,"cmd":"stat"}"#) else {
            panic!("no stat")
        };
        let text = render(&s);
        let indent_of = |name: &str| {
            text.lines()
                .find(|l| l.trim_start().starts_with(&format!("class {name} ")))
                .map(|l| l.len() - l.trim_start().len())
                .unwrap_or_else(|| panic!("no line for {name}:\n{text}"))
        };
        assert_eq!(indent_of("root"), 2, "{text}");
        assert_eq!(indent_of("A"), 4, "{text}");
        assert_eq!(indent_of("B"), 4, "{text}");
        assert_eq!(indent_of("a1"), 6, "{text}");
        assert_eq!(indent_of("b1"), 6, "{text}");
        // b1 comes after B, not after a1's parent A: rows follow the tree.
        let pos = |n: &str| text.find(&format!("class {n} ")).unwrap_or(usize::MAX);
        assert!(pos("B") < pos("b1") && pos("a1") < pos("B"), "{text}");
    }

    /// The coalescing sleeps are shown once there are any (a shaper without
    /// `--rx-coalesce-us` never has).
    #[test]
    fn coalescing_sleeps_are_shown_when_there_are_some() {
        let mut s = Snapshot::default();
        assert!(!render(&s).contains("receive coalescing"));
        s.rx_coalesced = 6104;
        assert!(
            render(&s).contains("receive coalescing: 6104 sleeps (--rx-coalesce-us)"),
            "{}",
            render(&s)
        );
    }

    /// The timer's floor is shown once the loop has slept for a departure, not before.
    #[test]
    fn the_timer_line_shows_what_the_loop_measured() {
        let mut s = Snapshot::default();
        assert!(!render(&s).contains("timer wake-ups"));
        s.timer_wake_ns = LatenessNs {
            p50: 38_000,
            p99: 52_500,
            max: 900_000,
            mean: 40_000,
            samples: 12,
        };
        s.early_wake_ns = 75_000;
        s.early_wake_learnt = true;
        let text = render(&s);
        assert!(
            text.contains("timer wake-ups late p50 38.0us p99 52.5us max 900.0us (12 sleeps); early wake 75.0us (learnt)"),
            "{text}"
        );
        // Departures on time: no advice.
        assert!(!text.contains("--busy-poll-us"), "{text}");
        // Late departures and a late timer: the advice, unless the margin is fixed already.
        s.lateness_ns.p99 = 45_000;
        assert!(render(&s).contains("--busy-poll-us 2000 keeps the loop awake"));
        s.early_wake_learnt = false;
        assert!(!render(&s).contains("--busy-poll-us"));
    }

    #[test]
    fn per_reason_counts_show_only_what_happened() {
        let mut m = BTreeMap::new();
        assert_eq!(reasons(&m), "0");
        m.insert("bad_ihl".to_string(), 2);
        m.insert("short".to_string(), 0);
        assert_eq!(reasons(&m), "2 (bad_ihl 2)");
    }
}
