//! The `stat` reply of the running shaper: a typed [`Snapshot`] (control/snapshot.rs) filled from
//! the interfaces' counters, each direction's device model and scheduler, and one row per class
//! (the shape of `tc -s class show`). Each class names its parent by the parent's class id
//! ([`ClassView::parent`] is an id, not a position in visiting order), so a tree declared in any
//! order reports the right parents.

use std::collections::{BTreeMap, HashMap};

use linkshare_core::qdisc::DropCounts;

use super::raw::{self, Namer};
use crate::control::snapshot::{
    finite, CakeSnapshot, ClassSnapshot, DirectionSnapshot, EmulateSnapshot, InterfaceSnapshot,
    LatenessHist, LatenessNs, LatenessUs, PathDelaySnapshot, QdiscSnapshot, Snapshot, TxDrops,
};
use crate::role::Role;
use crate::{Hist, Sched, Shaper};

/// Bounds of the lateness histogram's buckets: 1 µs to 50 ms, 1-2-5 steps.
const LATENESS_BOUNDS_NS: [u64; 14] = [
    1_000, 2_000, 5_000, 10_000, 20_000, 50_000, 100_000, 200_000, 500_000, 1_000_000, 2_000_000,
    5_000_000, 10_000_000, 50_000_000,
];

/// Packets per drop reason, by the reason's name (reasons that never happened left out).
pub(crate) fn by_reason(dc: &DropCounts) -> BTreeMap<String, u64> {
    dc.iter()
        .filter(|(_, c)| c.packets > 0)
        .map(|(r, c)| (r.name().to_string(), c.packets))
        .collect()
}

/// One row per class of `s`, in visiting order (copied, then named: raw.rs). Live rates are 0:
/// they come from successive snapshots ([`super::raw::Rates`]).
pub(crate) fn classes(s: &Sched) -> Vec<ClassSnapshot> {
    Namer::default().rows(raw::copy(s, 0, true))
}

/// The scheduler's part of a direction: its kind, counters, backlog and classes.
pub(crate) fn fill_sched(d: &mut DirectionSnapshot, s: &Sched) {
    fill_qdisc(d, s);
    d.classes = classes(s);
    d.class_count = d.classes.len() as u64;
}

/// The scheduler's part of a direction but its classes.
fn fill_qdisc(d: &mut DirectionSnapshot, s: &Sched) {
    let st = s.qr().stats();
    d.shaped = true;
    d.kind = Some(s.qr().kind().to_string());
    d.backlog_packets = st.backlog.packets;
    d.backlog_bytes = st.backlog.bytes;
    d.qdisc = Some(QdiscSnapshot {
        enqueued: st.enqueued.packets,
        enqueued_bytes: st.enqueued.bytes,
        dequeued: st.dequeued.packets,
        dequeued_bytes: st.dequeued.bytes,
        dropped: st.dropped.total().packets,
        refused: st.refused.total().packets,
        dropped_by_reason: by_reason(&st.dropped),
        refused_by_reason: by_reason(&st.refused),
        overlimits: st.overlimits,
        marked: st.marked,
        backlog_packets: st.backlog.packets,
        backlog_bytes: st.backlog.bytes,
        // Only a CAKE root has tins (at most 8: no allocation otherwise).
        cake: CakeSnapshot::of_qdisc(s.qr()),
    });
}

/// The quantiles of histogram `h`, in ns.
pub(crate) fn quantiles_ns(h: &Hist) -> LatenessNs {
    LatenessNs {
        p50: h.quantile(0.5),
        p99: h.quantile(0.99),
        max: h.max(),
        mean: h.mean(),
        samples: h.count(),
    }
}

/// The pacing lateness fields of a snapshot from histogram `h`.
pub(crate) fn fill_lateness(s: &mut Snapshot, h: &Hist) {
    s.lateness_us = LatenessUs {
        p50: h.quantile(0.5).div_ceil(1000),
        p99: h.quantile(0.99).div_ceil(1000),
        max: h.max().div_ceil(1000),
        samples: h.count(),
    };
    s.lateness_ns = quantiles_ns(h);
    s.lateness_hist = LatenessHist {
        le_ns: LATENESS_BOUNDS_NS.to_vec(),
        buckets: h.cumulative(&LATENESS_BOUNDS_NS),
        sum_ns: h.sum(),
        count: h.count(),
    };
}

impl<R: Role> Shaper<R> {
    /// The `stat` reply, every class in it (built here: the workers' and in-process callers';
    /// the single shaper's readers go through the stats plane, control/copier.rs).
    pub(crate) fn stat(&mut self) -> Snapshot {
        let mut snap = self.stat_frame();
        for (i, d) in self.dirs.iter().enumerate() {
            if let (Some(s), Some(out)) = (&d.sched, snap.directions.get_mut(i)) {
                out.classes = classes(s);
                out.class_count = out.classes.len() as u64;
            }
        }
        snap
    }

    /// The snapshot without class rows: interfaces, directions' counters, lateness.
    pub(crate) fn stat_frame(&mut self) -> Snapshot {
        self.refresh_ports();
        let interfaces = (0..2)
            .map(|i| {
                let s = &self.ifs[i];
                let p = &s.port;
                let map = |m: &HashMap<&'static str, u64>| {
                    m.iter().map(|(k, v)| (k.to_string(), *v)).collect()
                };
                InterfaceSnapshot {
                    name: self.names[i].clone(),
                    io: self.ports[i].io(),
                    rx_packets: s.rx_packets,
                    rx_bytes: s.rx_bytes,
                    tx_packets: p.tx_frames,
                    tx_bytes: p.tx_bytes,
                    non_ip_passed: s.non_ip,
                    non_ip_shaped: s.non_ip_shaped,
                    non_ip_dropped: s.non_ip_dropped,
                    fragments: s.fragments,
                    dscp_untrusted: s.dscp_untrusted,
                    dscp_washed: s.dscp_washed,
                    tx_errors: s.tx_ring_full + s.tx_too_big,
                    tx_drops: TxDrops {
                        ring_full: s.tx_ring_full,
                        too_big: s.tx_too_big,
                    },
                    tx_kicks: p.kicks,
                    tx_kick_errors: p.kick_errors,
                    rx_ring_drops: p.rx_ring_drops,
                    rx_truncated: p.rx_truncated,
                    rx_own_skipped: p.rx_own_skipped,
                    rx_blocks: p.rx_blocks,
                    socket_errors: p.socket_errors,
                    rebinds: p.rebinds,
                    rebind_lost: p.rebind_lost,
                    malformed: map(&s.malformed),
                    parse_issues: map(&s.issues),
                }
            })
            .collect();
        let directions = (0..2).map(|i| self.direction_snapshot(i)).collect();
        let mut snap = Snapshot {
            uptime_s: finite(self.now().0 as f64 / 1e9),
            policy: self.dirs[0]
                .policy_path
                .as_ref()
                .map(|p| p.display().to_string()),
            kind: self.dirs[0]
                .sched
                .as_ref()
                .map(|s| s.qr().kind().to_string()),
            interfaces,
            directions,
            early_wake_ns: self.wake.margin_ns(),
            early_wake_learnt: self.wake.is_learning(),
            timer_wake_ns: quantiles_ns(self.wake.timer_hist()),
            catch_up_turns: self.catch_up_turns,
            loop_turn_ns: quantiles_ns(self.turns.hist()),
            long_turns: self.turns.long_turns(),
            rx_coalesced: self.rx_coalesced,
            queue_memory: self.mem.limit(),
            memory_drops: self.mem.drops,
            ..Snapshot::default()
        };
        fill_lateness(&mut snap, &self.lateness);
        self.role.fill_snapshot(&mut snap);
        snap
    }

    fn direction_snapshot(&self, i: usize) -> DirectionSnapshot {
        let d = &self.dirs[i];
        let mut out = DirectionSnapshot {
            from: self.names[1 - d.to].clone(),
            to: self.names[d.to].clone(),
            device_buffer_bytes: d.device_buffer,
            line_bps: d.line_bps,
            drain_bps: d.drain_bps(),
            policy: d.policy_path.as_ref().map(|p| p.display().to_string()),
            emulate: d.emu.as_ref().map(|e| EmulateSnapshot {
                lost: e.drops.lost,
                duplicated: e.impair_stats().duplicated,
                reordered: e.impair_stats().reordered,
                line_full: e.drops.line_full,
                in_line: e.in_line() as u64,
                in_line_bytes: e.in_line_bytes(),
                limit_bytes: e.spec().limit_bytes,
                delay_ns: e.spec().delay.0,
                path_delays: e
                    .spec()
                    .paths
                    .iter()
                    .map(|p| PathDelaySnapshot {
                        addr: p.addr.to_string(),
                        delay_ns: p.delay.0,
                    })
                    .collect(),
            }),
            ..DirectionSnapshot::default()
        };
        if let Some(s) = &d.sched {
            fill_qdisc(&mut out, s);
        }
        out
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
        let rows = classes(&s);
        let row = |n: &str| {
            rows.iter()
                .find(|r| r.name == n)
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
            let r = row(name);
            assert_eq!(r.parent.as_deref(), parent, "parent of {name}");
            // The id names the same class as the name does.
            let by_id = r.parent_id.map(|id| {
                rows.iter()
                    .find(|p| p.id == id)
                    .map(|p| p.name.as_str())
                    .unwrap_or("<missing>")
            });
            assert_eq!(by_id, parent, "parent id of {name}");
        }
    }
}
