//! The `stat` object: interfaces, directions, the scheduler's counters and one row per class
//! (the shape of `tc -s class show`, as JSON). Each class names its parent by the parent's class
//! id ([`ClassView::parent`] is an id, not a position in visiting order), so a tree declared in
//! any order reports the right parents.

use std::collections::HashMap;

use linkshare_core::qdisc::ClassView;
use serde_json::{json, Value};

use crate::{Live, Sched, Shaper};

/// One JSON row per class of `s`, in visiting order, with live rates from `live`.
pub(crate) fn classes_json(s: &Sched, live: &HashMap<String, Live>) -> Vec<Value> {
    // Parent ids are class ids: index the names by id, not by visiting position.
    let mut names: HashMap<u32, String> = HashMap::new();
    s.qr().visit_classes(&mut |c: &ClassView<'_>| {
        names.insert(c.id, c.name.to_string());
    });
    let mut classes = Vec::new();
    s.qr().visit_classes(&mut |c: &ClassView<'_>| {
        let l = live.get(c.name).copied().unwrap_or_default();
        classes.push(json!({
            "name": c.name,
            "parent": c.parent.and_then(|p| names.get(&p)),
            "leaf": c.is_leaf, "level": c.level,
            "rate_bps": c.rate.bits_per_sec(), "ceil_bps": c.ceil.bits_per_sec(),
            "prio": c.prio, "mode": c.mode.name(),
            "live_rate_bps": l.bps, "live_pps": l.pps,
            "sent_bytes": c.stats.sent.bytes, "sent_packets": c.stats.sent.packets,
            "drops": c.stats.drops, "marked": c.stats.marked, "overlimits": c.stats.overlimits,
            "lended": c.stats.lends, "borrowed": c.stats.borrows,
            "backlog_packets": c.backlog.packets, "backlog_bytes": c.backlog.bytes,
            "tokens": c.tokens, "ctokens": c.ctokens,
        }));
    });
    classes
}

impl Shaper {
    /// The `stat --json` object.
    pub fn stat(&mut self) -> Value {
        self.refresh_ports();
        let ifs: Vec<Value> = (0..2)
            .map(|i| {
                let s = &self.ifs[i];
                let p = &s.port;
                json!({"name": self.names[i], "io": self.ports[i].io(), "rx_packets": s.rx_packets, "rx_bytes": s.rx_bytes,
                   "tx_packets": p.tx_frames, "tx_bytes": p.tx_bytes, "non_ip_passed": s.non_ip,
                   "fragments": s.fragments,
                   "tx_errors": s.tx_ring_full + s.tx_too_big,
                   "tx_drops": {"ring_full": s.tx_ring_full, "too_big": s.tx_too_big},
                   "tx_kicks": p.kicks, "tx_kick_errors": p.kick_errors,
                   "rx_ring_drops": p.rx_ring_drops, "rx_truncated": p.rx_truncated,
                   "rx_own_skipped": p.rx_own_skipped, "rx_blocks": p.rx_blocks,
                   "malformed": s.malformed, "parse_issues": s.issues})
            })
            .collect();
        let dirs: Vec<Value> = (0..2)
            .map(|i| {
                let d = &self.dirs[i];
                let mut classes = Vec::new();
                let mut bl = (0, 0);
                let mut qd = Value::Null;
                if let Some(s) = &d.sched {
                    let st = s.qr().stats();
                    bl = (st.backlog.packets, st.backlog.bytes);
                    let reasons = |dc: &linkshare_core::qdisc::DropCounts| -> Value {
                        dc.iter()
                            .map(|(r, c)| (r.name().to_string(), json!(c.packets)))
                            .collect::<serde_json::Map<String, Value>>()
                            .into()
                    };
                    qd = json!({"enqueued": st.enqueued.packets, "enqueued_bytes": st.enqueued.bytes,
                        "dequeued": st.dequeued.packets, "dequeued_bytes": st.dequeued.bytes,
                        "dropped": st.dropped.total().packets, "refused": st.refused.total().packets,
                        "dropped_by_reason": reasons(&st.dropped),
                        "refused_by_reason": reasons(&st.refused),
                        "overlimits": st.overlimits, "marked": st.marked,
                        "backlog_packets": st.backlog.packets, "backlog_bytes": st.backlog.bytes});
                    classes = classes_json(s, &d.live);
                }
                json!({"from": self.names[1 - d.to], "to": self.names[d.to],
                       "shaped": d.sched.is_some(),
                       "device_buffer_bytes": d.device_buffer, "line_bps": d.line_bps,
                       "drain_bps": d.drain_bps(),
                       "policy": d.policy_path.as_ref().map(|p| p.display().to_string()),
                       "kind": d.sched.as_ref().map(|s| s.qr().kind()),
                       "backlog_packets": bl.0, "backlog_bytes": bl.1, "qdisc": qd,
                       "classes": classes,
                       "emulate": d.emu.as_ref().map(|e| json!({
                           "lost": e.drops.lost, "line_full": e.drops.line_full,
                           "in_line": e.in_line(), "in_line_bytes": e.in_line_bytes(),
                           "limit_bytes": e.spec().limit_bytes,
                           "delay_ns": e.spec().delay.0,
                           "path_delays": e.spec().paths.iter()
                               .map(|p| json!({"addr": p.addr.to_string(), "delay_ns": p.delay.0}))
                               .collect::<Vec<_>>()}))})
            })
            .collect();
        let h = &self.lateness;
        json!({
            "uptime_s": self.now().0 as f64 / 1e9,
            "policy": self.dirs[0].policy_path.as_ref().map(|p| p.display().to_string()),
            "kind": self.dirs[0].sched.as_ref().map(|s| s.qr().kind()),
            "lateness_us": {"p50": h.quantile(0.5).div_ceil(1000),
                            "p99": h.quantile(0.99).div_ceil(1000),
                            "max": h.max().div_ceil(1000),
                            "samples": h.count()},
            "lateness_ns": {"p50": h.quantile(0.5), "p99": h.quantile(0.99),
                            "max": h.max(), "mean": h.mean(), "samples": h.count()},
            "interfaces": ifs,
            "control": self.control_stats,
            "directions": dirs,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load_sched;

    /// Classes declared breadth-first (`root, A, B, a1, b1`): each row names its real parent.
    #[test]
    fn parents_are_right_when_classes_are_not_declared_depth_first() {
        let text = r#"
qdisc = "htb"
default = "a1"
[[class]]
name = "root"
rate = "10mbit"
[[class]]
name = "A"
parent = "root"
rate = "5mbit"
[[class]]
name = "B"
parent = "root"
rate = "5mbit"
[[class]]
name = "a1"
parent = "A"
rate = "5mbit"
[[class]]
name = "b1"
parent = "B"
rate = "5mbit"
"#;
        let (_, s) = match load_sched(text, "order.toml") {
            Ok(x) => x,
            Err(d) => panic!("{d}"),
        };
        let rows = classes_json(&s, &HashMap::new());
        let parent_of = |n: &str| {
            rows.iter()
                .find(|r| r["name"] == n)
                .map(|r| r["parent"].clone())
                .unwrap_or_else(|| panic!("no row for {n}"))
        };
        // As declared above.
        let declared = [
            ("root", None),
            ("A", Some("root")),
            ("B", Some("root")),
            ("a1", Some("A")),
            ("b1", Some("B")),
        ];
        for (name, parent) in declared {
            let want = parent.map_or(Value::Null, |p| json!(p));
            assert_eq!(parent_of(name), want, "parent of {name}");
        }
    }
}
