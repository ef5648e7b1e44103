//! One `stat` snapshot from the workers' N: what an operator sees of `--workers N` is one
//! shaper.
//!
//! Principles: counters add (interfaces, schedulers, classes); a class that lives in one shard
//! appears once, under its id in the whole tree (the workers renumber before replying); the
//! shared root, which every shard holds a copy of, becomes one row whose counters, backlog and
//! live rate are the copies' sums and whose tokens are the first copy's (each copy's bucket is
//! local to its shard; the shared part is the pool). Rows keep the first worker's order, then
//! each later worker's new rows in its order. O(workers × classes).

use std::collections::{BTreeMap, HashMap};

use super::{HandoffCounts, Reply};
use crate::control::snapshot::{
    ClassSnapshot, DirectionSnapshot, InterfaceSnapshot, LatenessNs, QdiscSnapshot, Snapshot,
    WorkerSnapshot,
};
use crate::hist::Hist;

/// One worker's reply to a `stat`.
pub(crate) struct Part {
    pub worker: usize,
    pub snap: Snapshot,
    pub lateness: Hist,
    pub timer: Hist,
    pub handoff: HandoffCounts,
}

impl Part {
    pub fn from_reply(r: Reply) -> Option<(u64, Part)> {
        match r {
            Reply::Stat {
                seq,
                worker,
                snap,
                lateness,
                timer,
                handoff,
            } => Some((
                seq,
                Part {
                    worker,
                    snap: *snap,
                    lateness: *lateness,
                    timer: *timer,
                    handoff,
                },
            )),
            _ => None,
        }
    }
}

fn add_map(into: &mut BTreeMap<String, u64>, from: &BTreeMap<String, u64>) {
    for (k, v) in from {
        *into.entry(k.clone()).or_insert(0) += v;
    }
}

fn add_interface(a: &mut InterfaceSnapshot, b: &InterfaceSnapshot) {
    a.rx_packets += b.rx_packets;
    a.rx_bytes += b.rx_bytes;
    a.tx_packets += b.tx_packets;
    a.tx_bytes += b.tx_bytes;
    a.non_ip_passed += b.non_ip_passed;
    a.non_ip_shaped += b.non_ip_shaped;
    a.non_ip_dropped += b.non_ip_dropped;
    a.fragments += b.fragments;
    a.dscp_untrusted += b.dscp_untrusted;
    a.dscp_washed += b.dscp_washed;
    a.tx_errors += b.tx_errors;
    a.tx_drops.ring_full += b.tx_drops.ring_full;
    a.tx_drops.too_big += b.tx_drops.too_big;
    a.tx_kicks += b.tx_kicks;
    a.tx_kick_errors += b.tx_kick_errors;
    a.rx_ring_drops += b.rx_ring_drops;
    a.rx_truncated += b.rx_truncated;
    a.rx_own_skipped += b.rx_own_skipped;
    a.rx_blocks += b.rx_blocks;
    a.socket_errors += b.socket_errors;
    a.rebinds += b.rebinds;
    a.rebind_lost += b.rebind_lost;
    add_map(&mut a.malformed, &b.malformed);
    add_map(&mut a.parse_issues, &b.parse_issues);
}

fn add_qdisc(a: &mut QdiscSnapshot, b: &QdiscSnapshot) {
    a.enqueued += b.enqueued;
    a.enqueued_bytes += b.enqueued_bytes;
    a.dequeued += b.dequeued;
    a.dequeued_bytes += b.dequeued_bytes;
    a.dropped += b.dropped;
    a.refused += b.refused;
    add_map(&mut a.dropped_by_reason, &b.dropped_by_reason);
    add_map(&mut a.refused_by_reason, &b.refused_by_reason);
    a.overlimits += b.overlimits;
    a.marked += b.marked;
    a.backlog_packets += b.backlog_packets;
    a.backlog_bytes += b.backlog_bytes;
}

fn add_class(a: &mut ClassSnapshot, b: &ClassSnapshot) {
    a.live_rate_bps += b.live_rate_bps;
    a.live_pps += b.live_pps;
    a.sent_bytes += b.sent_bytes;
    a.sent_packets += b.sent_packets;
    a.drops += b.drops;
    add_map(&mut a.drops_by_reason, &b.drops_by_reason);
    a.marked += b.marked;
    a.overlimits += b.overlimits;
    a.lended += b.lended;
    a.borrowed += b.borrowed;
    a.giants += b.giants;
    a.backlog_packets += b.backlog_packets;
    a.backlog_bytes += b.backlog_bytes;
}

fn add_direction(a: &mut DirectionSnapshot, b: &DirectionSnapshot) {
    a.backlog_packets += b.backlog_packets;
    a.backlog_bytes += b.backlog_bytes;
    match (&mut a.qdisc, &b.qdisc) {
        (Some(x), Some(y)) => add_qdisc(x, y),
        (None, Some(y)) => a.qdisc = Some(y.clone()),
        _ => {}
    }
    let at: HashMap<String, usize> = a
        .classes
        .iter()
        .enumerate()
        .map(|(i, c)| (c.name.clone(), i))
        .collect();
    for c in &b.classes {
        match at.get(&c.name) {
            Some(&i) => add_class(&mut a.classes[i], c),
            None => a.classes.push(c.clone()),
        }
    }
}

/// The workers' parts as one snapshot (the control thread then fills in its own fields:
/// uptime, control, reloads).
pub(crate) fn merge(mut parts: Vec<Part>) -> Snapshot {
    parts.sort_by_key(|p| p.worker);
    let mut lateness = Hist::default();
    let mut timer = Hist::default();
    let mut workers = Vec::new();
    let mut out: Option<Snapshot> = None;
    for p in parts {
        lateness.merge(&p.lateness);
        timer.merge(&p.timer);
        workers.push(WorkerSnapshot {
            index: p.worker,
            rx_packets: p.snap.interfaces.iter().map(|i| i.rx_packets).sum(),
            sent_packets: p
                .snap
                .directions
                .iter()
                .filter_map(|d| d.qdisc.as_ref())
                .map(|q| q.dequeued)
                .sum(),
            backlog_packets: p.snap.directions.iter().map(|d| d.backlog_packets).sum(),
            classes: p
                .snap
                .directions
                .first()
                .map_or(0, |d| d.classes.len() as u64),
            handed_off: p.handoff.sent,
            taken_over: p.handoff.received,
            handoff_full: p.handoff.full,
            handoff_reclassified: p.handoff.reclassified,
            handoff_lost: p.handoff.lost,
        });
        match &mut out {
            None => out = Some(p.snap),
            Some(o) => {
                for (a, b) in o.interfaces.iter_mut().zip(&p.snap.interfaces) {
                    add_interface(a, b);
                }
                for (a, b) in o.directions.iter_mut().zip(&p.snap.directions) {
                    add_direction(a, b);
                }
                o.early_wake_ns = o.early_wake_ns.max(p.snap.early_wake_ns);
                o.catch_up_turns += p.snap.catch_up_turns;
                o.loop_turn_ns = worst(o.loop_turn_ns, p.snap.loop_turn_ns);
                o.long_turns += p.snap.long_turns;
                o.rx_coalesced += p.snap.rx_coalesced;
                o.queue_memory += p.snap.queue_memory;
                o.memory_drops += p.snap.memory_drops;
            }
        }
    }
    let mut s = out.unwrap_or_default();
    crate::control::stat::fill_lateness(&mut s, &lateness);
    s.timer_wake_ns = crate::control::stat::quantiles_ns(&timer);
    s.workers = workers;
    s
}

/// The worse of two workers' loop turns, quantile by quantile (the turns of several
/// threads are not one distribution: `stat` shows the worst).
fn worst(a: LatenessNs, b: LatenessNs) -> LatenessNs {
    LatenessNs {
        p50: a.p50.max(b.p50),
        p99: a.p99.max(b.p99),
        max: a.max.max(b.max),
        mean: a.mean.max(b.mean),
        samples: a.samples + b.samples,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn class(name: &str, id: u32, parent: Option<u32>, sent: u64) -> ClassSnapshot {
        ClassSnapshot {
            name: name.to_string(),
            id,
            parent_id: parent,
            parent: parent.map(|_| "root".to_string()),
            sent_packets: sent,
            sent_bytes: sent * 100,
            ..ClassSnapshot::default()
        }
    }

    fn part(worker: usize, rows: Vec<ClassSnapshot>, rx: u64) -> Part {
        let sent: u64 = rows.iter().skip(1).map(|c| c.sent_packets).sum();
        let mut lateness = Hist::default();
        lateness.record(1_000 * (worker as u64 + 1));
        let mut timer = Hist::default();
        timer.record(40_000 * (worker as u64 + 1));
        timer.record(30_000);
        Part {
            worker,
            snap: Snapshot {
                interfaces: vec![
                    InterfaceSnapshot {
                        rx_packets: rx,
                        ..InterfaceSnapshot::default()
                    },
                    InterfaceSnapshot::default(),
                ],
                directions: vec![
                    DirectionSnapshot {
                        qdisc: Some(QdiscSnapshot {
                            dequeued: sent,
                            ..QdiscSnapshot::default()
                        }),
                        classes: rows,
                        ..DirectionSnapshot::default()
                    },
                    DirectionSnapshot::default(),
                ],
                ..Snapshot::default()
            },
            lateness,
            timer,
            handoff: HandoffCounts {
                sent: 3,
                ..HandoffCounts::default()
            },
        }
    }

    /// Two shards of root → {a, b}: one root row with the copies' sums, each child once under
    /// its id in the whole tree, counters and histograms added.
    #[test]
    fn shards_merge_into_one_tree() {
        let w1 = part(
            1,
            vec![class("root", 0, None, 7), class("b", 2, Some(0), 7)],
            9,
        );
        let w0 = part(
            0,
            vec![class("root", 0, None, 5), class("a", 1, Some(0), 5)],
            6,
        );
        let s = merge(vec![w1, w0]);
        let d = &s.directions[0];
        let names: Vec<(&str, u32, u64)> = d
            .classes
            .iter()
            .map(|c| (c.name.as_str(), c.id, c.sent_packets))
            .collect();
        assert_eq!(names, vec![("root", 0, 12), ("a", 1, 5), ("b", 2, 7)]);
        assert_eq!(d.qdisc.as_ref().map(|q| q.dequeued), Some(12));
        assert_eq!(s.interfaces[0].rx_packets, 15);
        assert_eq!(s.lateness_ns.samples, 2);
        assert_eq!(s.timer_wake_ns.samples, 4);
        assert_eq!(s.timer_wake_ns.max, 80_000);
        assert_eq!(s.workers.len(), 2);
        assert_eq!(s.workers[1].rx_packets, 9);
        assert_eq!(s.workers.iter().map(|w| w.handed_off).sum::<u64>(), 6);
    }
}
