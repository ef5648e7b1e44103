//! Arriving flows in a lab run, reported as the simulator reports them
//! (`linkshare_sim`'s `world/groups.rs`): one `flows` entry per group (counters summed, RTT
//! samples pooled, goodput from the first arrival to the end of the run), one `fct` entry per
//! group ([`summarise`]), a record per flow for `fct.csv`.
//!
//! The FCT of a flow runs from its arrival (the time its source was told to start, or its sink
//! wrote the request) to the instant its sink read the last byte: both ends read one monotonic
//! clock, and the handshake was done before t0, as the simulator has none.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;

use linkshare_report::fct::{summarise, FctRecord, FctSummary};
use linkshare_sim::metrics::Hist;
use linkshare_sim::model::FlowSummary;
use linkshare_sim::scenario::FlowKind;
use linkshare_sim::Scenario;

use crate::traffic::Plan;

use super::measure::Measured;
use super::result::class_of;

/// What the arriving flows of a run add to its result.
pub(super) struct Arriving {
    pub(super) records: Vec<FctRecord>,
    pub(super) summary: BTreeMap<String, FctSummary>,
}

/// The groups' `flows` entries (added to `flows`, their goodput to `per_class`) and FCTs.
pub(super) fn arriving(
    sc: &Scenario,
    plans: &[Plan],
    m: &Measured,
    dur: f64,
    flows: &mut BTreeMap<String, FlowSummary>,
    per_class: &mut BTreeMap<String, Vec<f64>>,
) -> Arriving {
    let mss = linkshare_sim::packet::mss_for_mtu(sc.link.mtu) as u64;
    let mut groups: BTreeMap<String, (FlowSummary, Hist, f64)> = BTreeMap::new();
    let mut records = Vec::new();
    for (i, p) in plans.iter().enumerate() {
        let (Some(a), FlowKind::Tcp(t)) = (&p.spec.arrival, &p.spec.kind) else {
            continue;
        };
        let l = &m.live[i];
        let at = a.at.as_secs_f64();
        let done = l.done_s.lock().ok().and_then(|d| *d);
        records.push(FctRecord {
            group: a.group.clone(),
            flow: p.spec.name.clone(),
            size_bytes: t.bytes.unwrap_or(0),
            start_s: at,
            fct_s: done.map(|d| (d - at).max(0.0)),
            ideal_s: p.spec.ideal_fct_s(&sc.link).unwrap_or(0.0),
        });
        let delivered = m
            .flow_marks
            .last()
            .and_then(|f| f.get(i))
            .map_or(0, |x| x.0);
        let (s, rtt, first) = groups.entry(a.group.clone()).or_insert_with(|| {
            (
                FlowSummary {
                    kind: "tcp".into(),
                    class: class_of(sc, p),
                    ..FlowSummary::default()
                },
                Hist::default(),
                f64::MAX,
            )
        });
        *first = first.min(at);
        s.bytes_delivered += delivered;
        s.packets_sent += delivered.div_ceil(mss);
        let retransmits = l.retransmits.load(Ordering::Relaxed);
        s.retransmits += retransmits;
        s.packets_lost += retransmits;
        if let Ok(v) = l.rtt.lock() {
            for (_, ms) in v.iter() {
                rtt.record((ms * 1e6) as u64);
            }
        }
    }
    for (g, (mut s, rtt, first)) in groups {
        let span = dur - first;
        s.goodput_bps = if span > 0.0 {
            s.bytes_delivered as f64 * 8.0 / span
        } else {
            0.0
        };
        s.rtt_ms = (rtt.n > 0).then(|| rtt.to_stats_ms());
        per_class
            .entry(s.class.clone())
            .or_default()
            .push(s.goodput_bps);
        flows.insert(g, s);
    }
    let summary = summarise(&records);
    Arriving { records, summary }
}
