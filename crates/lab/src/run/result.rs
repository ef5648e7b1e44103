//! What the lab measured turned into the simulator's result model
//! ([`linkshare_sim::model::SimResult`], marked with `lab`), so that a lab run prints as the same
//! table and writes the same files as a simulated one and the two can be compared.
//!
//! Counters are cumulative in the routers, so everything is a difference: each sample against
//! the one before (the time series), the run against the snapshot taken at its start (the
//! summaries). A flow's class is the one the policy's classifier gives it, as in the simulator;
//! a router that reports no classes (a bare bridge) is summarised as one class, the link.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;

use linkshare_sim::metrics::{jain, Hist};
use linkshare_sim::model::{
    ClassState, ClassSummary, FlowSummary, LabInfo, LinkSummary, QdiscSummary, Sample, SeriesKind,
    SimResult, Summary,
};
use linkshare_sim::scenario::FlowKind;
use linkshare_sim::Scenario;

use crate::testbed::{ClassCounters, RouterStats};
use crate::traffic::Plan;

use super::fct::{arriving, Arriving};
use super::measure::Measured;

/// The simulator's result model from what the lab measured.
pub(super) fn build_result(
    sc: &Scenario,
    plans: &[Plan],
    m: Measured,
    notes: Vec<String>,
) -> SimResult {
    let dur = if m.interrupted {
        m.elapsed.max(1e-3)
    } else {
        sc.duration.as_secs_f64()
    };
    let empty = RouterStats::default();
    let first = m.snapshots.first().map(|s| &s.1).unwrap_or(&empty);
    let last = m.snapshots.last().map(|s| &s.1).unwrap_or(&empty);
    let (samples, class_states) = time_series(plans, &m, sc.policy.is_some());
    let (classes, link_bytes) = class_summaries(sc, first, last, dur);
    let (flows, rtt_points, fairness, arriving) = flow_summaries(sc, plans, &m, dur);

    let summary = Summary {
        scenario: sc.name.clone(),
        duration_s: dur,
        seed: sc.seed,
        link: LinkSummary {
            rate_bps: sc.link.rate.0 as f64,
            utilisation: link_bytes as f64 * 8.0 / (sc.link.rate.0 as f64 * dur),
            delay_ms: sc.link.delay.0 as f64 / 1e6,
            mtu: sc.link.mtu,
            device_buffer_bytes: sc.link.device_buffer,
            timer_hz: 0,
            clock_hz: 0,
        },
        classes,
        flows,
        fairness,
        fct: arriving.summary,
        flow_groups: BTreeMap::new(),
        qdisc: QdiscSummary {
            kind: last.kind.clone(),
            enqueued_packets: last.enqueued_packets.saturating_sub(first.enqueued_packets),
            dequeued_packets: last.dequeued_packets.saturating_sub(first.dequeued_packets),
            drops: last.drops.clone(),
            marked: last.marked,
            overlimits: last.overlimits.saturating_sub(first.overlimits),
            extra: last.extra.clone(),
        },
        uplink: m.uplink.as_ref().map(|(a, b)| uplink_summary(a, b)),
        path: sc.path.map(|_| linkshare_sim::model::PathSummary {
            lost: last.emu_lost.saturating_sub(first.emu_lost),
            duplicated: last.emu_duplicated.saturating_sub(first.emu_duplicated),
            reordered: last.emu_reordered.saturating_sub(first.emu_reordered),
        }),
        lab: Some(LabInfo {
            router: m.router.to_string(),
            wall_clock_s: m.elapsed,
            interrupted: m.interrupted,
            notes,
            host: Some(m.host.clone()),
        }),
        events: 0,
    };
    let mut result = SimResult {
        summary,
        samples,
        class_states,
        rtt_points,
        owd_points: owd_points(plans, &m),
        fct: arriving.records,
    };
    linkshare_sim::compare::groups::summarise(&mut result, sc);
    result
}

/// The uplink's scheduler over the run (`after` less `before`): what the simulator's summary
/// holds for its uplink, and the bytes it sent (`extra.dequeued_bytes`: with the packets, the
/// size each ACK was charged) beside the sojourn gauges read at the end.
fn uplink_summary(before: &RouterStats, after: &RouterStats) -> QdiscSummary {
    let mut extra = after.extra.clone();
    extra.insert(
        "dequeued_bytes".to_string(),
        after.dequeued_bytes.saturating_sub(before.dequeued_bytes) as f64,
    );
    QdiscSummary {
        kind: after.kind.clone(),
        enqueued_packets: after
            .enqueued_packets
            .saturating_sub(before.enqueued_packets),
        dequeued_packets: after
            .dequeued_packets
            .saturating_sub(before.dequeued_packets),
        drops: after
            .drops
            .iter()
            .map(|(k, v)| {
                (
                    k.clone(),
                    v.saturating_sub(before.drops.get(k).copied().unwrap_or(0)),
                )
            })
            .collect(),
        marked: after.marked.saturating_sub(before.marked),
        overlimits: after.overlimits.saturating_sub(before.overlimits),
        extra,
    }
}

/// Each UDP flow's mean one-way delay per sample interval, from the sums and counts read at each
/// snapshot (as the simulator's `owd_points`).
fn owd_points(plans: &[Plan], m: &Measured) -> Vec<(f64, String, f64)> {
    let mut out = Vec::new();
    for w in 1..m.snapshots.len().min(m.owd_marks.len()) {
        let t = m.snapshots[w].0;
        for (i, p) in plans.iter().enumerate() {
            if p.spec.arrival.is_some() || !matches!(p.spec.kind, FlowKind::Udp(_)) {
                continue;
            }
            let (Some(&(s1, n1)), Some(&(s0, n0))) =
                (m.owd_marks[w].get(i), m.owd_marks[w - 1].get(i))
            else {
                continue;
            };
            let n = n1.saturating_sub(n0);
            if n > 0 {
                let ms = s1.saturating_sub(s0) as f64 / n as f64 / 1e6;
                out.push((t, p.spec.name.clone(), ms));
            }
        }
    }
    out
}

/// The time series: per class and per flow, what each sample interval carried (rate, backlog,
/// drops, mean RTT), and each class's mode and tokens at each sample. A policy without classes
/// (a CAKE or fq_codel root) is one class named by its kind, as the simulator names it, from
/// the router's qdisc counters.
fn time_series(plans: &[Plan], m: &Measured, policy: bool) -> (Vec<Sample>, Vec<ClassState>) {
    let mut samples = Vec::new();
    let mut class_states = Vec::new();
    for w in 1..m.snapshots.len() {
        let (t_prev, prev) = (&m.snapshots[w - 1].0, &m.snapshots[w - 1].1);
        let (t, cur) = (m.snapshots[w].0, &m.snapshots[w].1);
        let span = (t - t_prev).max(1e-9);
        for c in &cur.classes {
            let p = prev
                .classes
                .iter()
                .find(|x| x.name == c.name)
                .cloned()
                .unwrap_or_default();
            let bytes = c.sent_bytes.saturating_sub(p.sent_bytes);
            samples.push(Sample {
                time_s: t,
                kind: SeriesKind::Class,
                name: c.name.clone(),
                bytes,
                rate_bps: bytes as f64 * 8.0 / span,
                backlog_bytes: c.backlog_bytes,
                drops: c.drops.saturating_sub(p.drops),
                rtt_ms: None,
            });
            class_states.push(ClassState {
                time_s: t,
                class: c.name.clone(),
                mode: class_mode(&c.mode),
                tokens_bytes: Some(c.tokens),
                ctokens_bytes: Some(c.ctokens),
                avgidle_us: None,
            });
        }
        if policy && cur.classes.is_empty() {
            let bytes = cur.dequeued_bytes.saturating_sub(prev.dequeued_bytes);
            let drops = |st: &RouterStats| st.drops.values().sum::<u64>();
            samples.push(Sample {
                time_s: t,
                kind: SeriesKind::Class,
                name: cur.kind.clone(),
                bytes,
                rate_bps: bytes as f64 * 8.0 / span,
                backlog_bytes: 0,
                drops: drops(cur).saturating_sub(drops(prev)),
                rtt_ms: None,
            });
        }
        // Arriving flows: one row per group, as the simulator samples them.
        let mut groups: BTreeMap<&str, (u64, Vec<f64>)> = BTreeMap::new();
        for (i, p) in plans.iter().enumerate() {
            let (d1, s1, r1) = m.flow_marks[w][i];
            let (d0, s0, r0) = m.flow_marks[w - 1][i];
            let bytes = d1.saturating_sub(d0);
            let rtts: Vec<f64> = m.live[i]
                .rtt
                .lock()
                .map(|v| {
                    v.iter()
                        .filter(|(at, _)| *at > *t_prev && *at <= t)
                        .map(|x| x.1)
                        .collect()
                })
                .unwrap_or_default();
            if let Some(a) = &p.spec.arrival {
                let g = groups.entry(a.group.as_str()).or_default();
                g.0 += bytes;
                g.1.extend(rtts);
                continue;
            }
            let udp = matches!(p.spec.kind, FlowKind::Udp(_));
            samples.push(Sample {
                time_s: t,
                kind: SeriesKind::Flow,
                name: p.spec.name.clone(),
                bytes,
                rate_bps: bytes as f64 * 8.0 / span,
                backlog_bytes: 0,
                drops: if udp {
                    s1.saturating_sub(s0).saturating_sub(r1.saturating_sub(r0))
                } else {
                    0
                },
                rtt_ms: (!rtts.is_empty()).then(|| rtts.iter().sum::<f64>() / rtts.len() as f64),
            });
        }
        for (name, (bytes, rtts)) in groups {
            samples.push(Sample {
                time_s: t,
                kind: SeriesKind::Flow,
                name: name.to_string(),
                bytes,
                rate_bps: bytes as f64 * 8.0 / span,
                backlog_bytes: 0,
                drops: 0,
                rtt_ms: (!rtts.is_empty()).then(|| rtts.iter().sum::<f64>() / rtts.len() as f64),
            });
        }
    }
    (samples, class_states)
}

/// The classes over the run (the last snapshot less the first), and the bytes the root
/// classes sent, which is the link's load. A router with no classes is one class, the link.
fn class_summaries(
    sc: &Scenario,
    first: &RouterStats,
    last: &RouterStats,
    dur: f64,
) -> (BTreeMap<String, ClassSummary>, u64) {
    let base_of = |name: &str| -> ClassCounters {
        first
            .classes
            .iter()
            .find(|c| c.name == name)
            .cloned()
            .unwrap_or_default()
    };
    let mut classes = BTreeMap::new();
    let mut link_bytes = 0u64;
    for c in &last.classes {
        let b = base_of(&c.name);
        let bytes = c.sent_bytes.saturating_sub(b.sent_bytes);
        if c.parent.is_none() {
            link_bytes += bytes;
        }
        classes.insert(
            c.name.clone(),
            ClassSummary {
                bytes,
                packets: c.sent_packets.saturating_sub(b.sent_packets),
                drops: c.drops.saturating_sub(b.drops),
                rate_bps: bytes as f64 * 8.0 / dur,
                parent: c.parent.clone(),
                assigned_rate_bps: c.rate_bps,
                ceil_bps: c.ceil_bps,
                overlimits: c.overlimits.saturating_sub(b.overlimits),
                lends: c.lends.saturating_sub(b.lends),
                borrows: c.borrows.saturating_sub(b.borrows),
            },
        );
    }
    if last.classes.is_empty() {
        let bytes = last.dequeued_bytes.saturating_sub(first.dequeued_bytes);
        link_bytes = bytes;
        classes.insert(
            last.kind.clone(),
            ClassSummary {
                bytes,
                packets: last.dequeued_packets.saturating_sub(first.dequeued_packets),
                rate_bps: bytes as f64 * 8.0 / dur,
                assigned_rate_bps: sc.link.rate.0 as f64,
                ceil_bps: sc.link.rate.0 as f64,
                overlimits: last.overlimits,
                ..ClassSummary::default()
            },
        );
    }
    (classes, link_bytes)
}

/// The flows' summaries by name, the RTT samples as (time, flow, ms), Jain's index by class.
type FlowParts = (
    BTreeMap<String, FlowSummary>,
    Vec<(f64, String, f64)>,
    BTreeMap<String, f64>,
    Arriving,
);

/// The flows over the run (goodput, packets, losses, RTT or one-way delay), every RTT sample
/// as a point, and Jain's fairness among the TCP and UDP flows of each class.
fn flow_summaries(sc: &Scenario, plans: &[Plan], m: &Measured, dur: f64) -> FlowParts {
    let mss = sc.link.mtu.saturating_sub(40).max(1) as u64;
    let mut flows = BTreeMap::new();
    let mut rtt_points = Vec::new();
    let mut per_class: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for (i, p) in plans.iter().enumerate() {
        if p.spec.arrival.is_some() {
            continue;
        }
        let l = &m.live[i];
        // Bytes delivered by the end of the run (what the simulator counts); packets sent and
        // received after the drain time.
        let delivered = m
            .flow_marks
            .last()
            .and_then(|f| f.get(i))
            .map_or(0, |x| x.0);
        let (sent, received) = m.drained.get(i).copied().unwrap_or_default();
        let retransmits = l.retransmits.load(Ordering::Relaxed);
        let active = (p.stop.min(dur) - p.start).max(0.0);
        // A finite flow that finished: its completion time and size / FCT, as the simulator.
        let fct_s = l
            .done_s
            .lock()
            .ok()
            .and_then(|d| *d)
            .map(|d| (d - p.start).max(0.0));
        let goodput = match fct_s {
            Some(t) if t > 0.0 => delivered as f64 * 8.0 / t,
            _ if active > 0.0 => delivered as f64 * 8.0 / active,
            _ => 0.0,
        };
        let class = class_of(sc, p);
        let mut rtt = Hist::default();
        if let Ok(v) = l.rtt.lock() {
            for (at, ms) in v.iter() {
                rtt.record((ms * 1e6) as u64);
                rtt_points.push((*at, p.spec.name.clone(), *ms));
            }
        }
        let owd = l.owd.lock().map(|h| h.clone()).unwrap_or_default();
        let (kind, packets_sent, lost, rtt_ms, owd_ms) = match &p.spec.kind {
            FlowKind::Tcp(_) => (
                "tcp",
                delivered.div_ceil(mss),
                retransmits,
                (rtt.n > 0).then(|| rtt.to_stats_ms()),
                None,
            ),
            FlowKind::Udp(_) => (
                "udp",
                sent,
                sent.saturating_sub(received),
                None,
                (owd.n > 0).then(|| owd.to_stats_ms()),
            ),
            FlowKind::Ping(_) => (
                "ping",
                sent,
                sent.saturating_sub(received),
                (rtt.n > 0).then(|| rtt.to_stats_ms()),
                None,
            ),
        };
        if kind != "ping" {
            per_class.entry(class.clone()).or_default().push(goodput);
        }
        flows.insert(
            p.spec.name.clone(),
            FlowSummary {
                kind: kind.to_string(),
                class,
                bytes_delivered: delivered,
                goodput_bps: goodput,
                packets_sent,
                packets_lost: lost,
                retransmits: if kind == "tcp" { retransmits } else { 0 },
                rtt_ms,
                owd_ms,
                timeouts: 0,
                cwnd_reductions: 0,
                fct_s,
                ce_marks: None,
            },
        );
    }
    let arriving = arriving(sc, plans, m, dur, &mut flows, &mut per_class);
    let fairness = per_class
        .into_iter()
        .filter(|(c, _)| !c.is_empty())
        .map(|(c, xs)| (c, jain(&xs)))
        .collect();
    (flows, rtt_points, fairness, arriving)
}

/// A router's class mode as the result model names it.
fn class_mode(m: &str) -> &'static str {
    match m {
        "can_send" => "can_send",
        "may_borrow" => "may_borrow",
        "cant_send" => "cant_send",
        _ => "unknown",
    }
}

/// The class the policy's classifier puts the flow in (what the simulator reports).
pub(super) fn class_of(sc: &Scenario, p: &Plan) -> String {
    let Some(policy) = &sc.policy else {
        return "link".to_string();
    };
    let proto = match p.spec.kind {
        FlowKind::Tcp(_) => 6,
        FlowKind::Udp(_) => 17,
        FlowKind::Ping(_) => 1,
    };
    let mut meta = linkshare_core::PacketMeta {
        tos: p.spec.tos,
        proto,
        src: p.spec.src,
        dst: p.spec.dst,
        src_port: if proto == 1 { 0 } else { p.spec.sport },
        dst_port: if proto == 1 { 0 } else { p.spec.dport },
        ..linkshare_core::PacketMeta::default()
    };
    meta.flow_hash = linkshare_core::wire::flow_hash(&meta, 0);
    policy.class_of(&meta)
}
