//! The parts of the `stat` reply (a typed [`Snapshot`], control/snapshot.rs) that come from a
//! scheduler and from histograms: a direction's qdisc counters and one row per class (the shape
//! of `tc -s class show`), lateness quantiles and buckets. The running shaper fills the rest
//! from its interfaces and directions (shaper_stat.rs); the workers' merge (workers/merge.rs)
//! and an offline handler (dispatch.rs) reuse these. Each class names its parent by the
//! parent's class id ([`ClassView::parent`] is an id, not a position in visiting order), so a
//! tree declared in any order reports the right parents.

use std::collections::BTreeMap;

use linkshare_core::qdisc::DropCounts;

use super::raw::{self, Namer};
use crate::control::snapshot::{
    CakeSnapshot, ClassSnapshot, DirectionSnapshot, LatenessHist, LatenessNs, LatenessUs,
    QdiscSnapshot, Snapshot,
};
use crate::{Hist, Sched};

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
pub(crate) fn fill_qdisc(d: &mut DirectionSnapshot, s: &Sched) {
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
