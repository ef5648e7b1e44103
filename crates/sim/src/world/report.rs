//! What a run reports: at every sampling interval one row per class (or the whole scheduler
//! when it has no classes) and per flow or group, with the class states; at the end the
//! summary — the link, each class, each flow, the schedulers' own counters, fairness.
//!
//! Counters are read from the scheduler (`Qdisc::visit_classes`, `Qdisc::stats`) and from the
//! link's per-flow accounting, never counted again here: a sample is the difference between
//! two readings, so what the series add up to is what the summary says.

use linkshare_core::Qdisc;

use super::groups::{self, NO_GROUP};
use super::{Src, World};
use crate::metrics::jain;
use crate::model::{
    ClassState, ClassSummary, FlowSummary, LinkSummary, QdiscSummary, Sample, SeriesKind,
    SimResult, Summary,
};
use crate::packet::SimPacket;

/// Per-class bookkeeping between samples (in `visit_classes` order).
#[derive(Default)]
pub(super) struct ClassTrack {
    names: Vec<String>,
    prev_bytes: Vec<u64>,
    prev_drops: Vec<u64>,
}

impl World<'_> {
    /// Close the sampling interval ending now.
    pub(super) fn sample(&mut self) {
        let now = self.eng.now();
        let dt = (now - self.last_sample) as f64 / 1e9;
        if dt <= 0.0 {
            return;
        }
        let t = now as f64 / 1e9;
        let rate = |bytes: u64| bytes as f64 * 8.0 / dt;
        // Classes.
        let ct = &mut self.classes;
        let mut k = 0usize;
        let mut any = false;
        let samples = &mut self.samples;
        let states = &mut self.class_states;
        self.link.qdisc.visit_classes(&mut |v| {
            any = true;
            if k >= ct.names.len() {
                ct.names.push(v.name.to_string());
                ct.prev_bytes.push(0);
                ct.prev_drops.push(0);
            }
            let bytes = v.stats.sent.bytes - ct.prev_bytes[k].min(v.stats.sent.bytes);
            let drops = v.stats.drops - ct.prev_drops[k].min(v.stats.drops);
            ct.prev_bytes[k] = v.stats.sent.bytes;
            ct.prev_drops[k] = v.stats.drops;
            samples.push(Sample {
                time_s: t,
                kind: SeriesKind::Class,
                name: ct.names[k].clone(),
                bytes,
                rate_bps: rate(bytes),
                backlog_bytes: v.backlog.bytes,
                drops,
                rtt_ms: None,
            });
            let cbq = v.avgidle_ns.is_some();
            states.push(ClassState {
                time_s: t,
                class: ct.names[k].clone(),
                mode: v.mode.name(),
                tokens_bytes: (!cbq).then_some(v.tokens),
                ctokens_bytes: (!cbq).then_some(v.ctokens),
                avgidle_us: v.avgidle_ns.map(|a| a as f64 / 1e3),
            });
            k += 1;
        });
        if !any {
            let st = self.link.qdisc.stats().clone();
            if ct.names.is_empty() {
                ct.names.push(self.root_name.to_string());
                ct.prev_bytes.push(0);
                ct.prev_drops.push(0);
            }
            let sent = st.dequeued.bytes;
            let dropped = st.drops_total().packets;
            let bytes = sent - ct.prev_bytes[0];
            let drops = dropped - ct.prev_drops[0];
            ct.prev_bytes[0] = sent;
            ct.prev_drops[0] = dropped;
            samples.push(Sample {
                time_s: t,
                kind: SeriesKind::Class,
                name: ct.names[0].clone(),
                bytes,
                rate_bps: rate(bytes),
                backlog_bytes: st.backlog.bytes,
                drops,
                rtt_ms: None,
            });
        }
        // Flows.
        for (i, f) in self.flows.iter_mut().enumerate() {
            let bytes = f.m.delivered - f.m.delivered_prev;
            f.m.delivered_prev = f.m.delivered;
            let q = &self.link.flows[i];
            let drops = q.drops - f.m.drops_prev;
            f.m.drops_prev = q.drops;
            if f.group != NO_GROUP {
                self.groups.add(f, bytes, drops, q.backlog);
                continue;
            }
            let rtt_ms = if f.m.rtt_int_n > 0 {
                Some(f.m.rtt_int_sum as f64 / f.m.rtt_int_n as f64 / 1e6)
            } else {
                None
            };
            if let (Some(r), Src::Tcp(_)) = (rtt_ms, &f.src) {
                self.rtt_points.push((t, f.name.clone(), r));
            }
            if let Some(d) = f.m.take_interval_owd_ms() {
                self.owd_points.push((t, f.name.clone(), d));
            }
            f.m.rtt_int_sum = 0;
            f.m.rtt_int_n = 0;
            self.samples.push(Sample {
                time_s: t,
                kind: SeriesKind::Flow,
                name: f.name.clone(),
                bytes,
                rate_bps: rate(bytes),
                backlog_bytes: q.backlog,
                drops,
                rtt_ms,
            });
        }
        self.groups
            .flush(t, dt, &mut self.samples, &mut self.rtt_points);
        self.last_sample = now;
    }

    pub(super) fn finish(self) -> SimResult {
        let sc = self.sc;
        let dur = sc.duration.as_secs_f64();
        let mut summary = Summary {
            scenario: sc.name.clone(),
            duration_s: dur,
            seed: sc.seed,
            link: LinkSummary {
                rate_bps: sc.link.rate.0 as f64,
                utilisation: self.link.tx_bytes() as f64 * 8.0 / (sc.link.rate.0 as f64 * dur),
                delay_ms: sc.link.delay.0 as f64 / 1e6,
                mtu: sc.link.mtu,
                device_buffer_bytes: sc.link.device_buffer,
                timer_hz: sc.link.timer_hz,
                clock_hz: sc.link.clock_hz,
            },
            events: self.eng.processed(),
            ..Summary::default()
        };
        // Classes.
        let mut ids: Vec<(u32, String)> = Vec::new();
        let mut any = false;
        self.link.qdisc.visit_classes(&mut |v| {
            any = true;
            ids.push((v.id, v.name.to_string()));
        });
        self.link.qdisc.visit_classes(&mut |v| {
            let parent = v
                .parent
                .and_then(|p| ids.iter().find(|(id, _)| *id == p).map(|(_, n)| n.clone()));
            summary.classes.insert(
                v.name.to_string(),
                ClassSummary {
                    bytes: v.stats.sent.bytes,
                    packets: v.stats.sent.packets,
                    drops: v.stats.drops,
                    rate_bps: v.stats.sent.bytes as f64 * 8.0 / dur,
                    parent,
                    assigned_rate_bps: v.rate.0 as f64,
                    ceil_bps: v.ceil.0 as f64,
                    overlimits: v.stats.overlimits,
                    lends: v.stats.lends,
                    borrows: v.stats.borrows,
                },
            );
        });
        if !any {
            let st = self.link.qdisc.stats();
            summary.classes.insert(
                self.root_name.to_string(),
                ClassSummary {
                    bytes: st.dequeued.bytes,
                    packets: st.dequeued.packets,
                    drops: st.drops_total().packets,
                    rate_bps: st.dequeued.bytes as f64 * 8.0 / dur,
                    assigned_rate_bps: sc.link.rate.0 as f64,
                    ceil_bps: sc.link.rate.0 as f64,
                    overlimits: st.overlimits,
                    ..ClassSummary::default()
                },
            );
        }
        // The schedulers' own counters.
        summary.qdisc = qdisc_summary(self.link.qdisc.as_ref());
        summary.uplink = self.up.as_ref().map(|u| qdisc_summary(u.qdisc.as_ref()));
        summary.path = self.path.as_ref().map(|p| crate::model::PathSummary {
            lost: p.stats.lost,
            duplicated: p.stats.duplicated,
            reordered: p.stats.reordered,
        });
        // Flows.
        let mut per_class: std::collections::BTreeMap<String, Vec<f64>> = Default::default();
        for (i, f) in self.flows.iter().enumerate() {
            if f.group != NO_GROUP {
                continue;
            }
            let (goodput, fct_s) = groups::goodput(f, sc.duration.0);
            let (kind, retransmits, timeouts, reductions, rtt, owd) = match &f.src {
                Src::Tcp(c) => (
                    "tcp",
                    c.snd.stats.retransmits,
                    c.snd.stats.timeouts,
                    c.snd.stats.cwnd_reductions,
                    Some(f.m.rtt.to_stats_ms()),
                    None,
                ),
                Src::Udp(_) => ("udp", 0, 0, 0, None, Some(f.m.owd.to_stats_ms())),
                Src::Ping(_) => (
                    "ping",
                    0,
                    0,
                    0,
                    Some(f.m.rtt.to_stats_ms()),
                    Some(f.m.owd.to_stats_ms()),
                ),
            };
            if !matches!(f.src, Src::Ping(_)) {
                // Probes do not compete for bandwidth: fairness is across TCP and UDP flows.
                per_class.entry(f.class.clone()).or_default().push(goodput);
            }
            summary.flows.insert(
                f.name.clone(),
                FlowSummary {
                    kind: kind.to_string(),
                    class: f.class.clone(),
                    bytes_delivered: f.m.delivered,
                    goodput_bps: goodput,
                    packets_sent: f.m.packets_sent,
                    packets_lost: self.link.flows[i].drops + self.path_lost[i],
                    retransmits,
                    rtt_ms: rtt,
                    owd_ms: owd,
                    timeouts,
                    cwnd_reductions: reductions,
                    fct_s,
                    ce_marks: match &f.src {
                        Src::Tcp(c) if c.rcv.ecn.ok => Some(c.rcv.ecn.ce_received),
                        _ => None,
                    },
                },
            );
        }
        let fct = self.finish_groups(&mut summary, &mut per_class);
        for (class, xs) in per_class {
            if !class.is_empty() {
                summary.fairness.insert(class, jain(&xs));
            }
        }
        SimResult {
            summary,
            samples: self.samples,
            class_states: self.class_states,
            rtt_points: self.rtt_points,
            owd_points: self.owd_points,
            fct,
        }
    }
}

/// A scheduler's counters at the end of a run.
fn qdisc_summary(q: &dyn Qdisc<SimPacket>) -> QdiscSummary {
    let st = q.stats();
    let mut drops = std::collections::BTreeMap::new();
    for (reason, c) in st.refused.iter().chain(st.dropped.iter()) {
        *drops.entry(reason.name().to_string()).or_insert(0) += c.packets;
    }
    let mut extra = std::collections::BTreeMap::new();
    q.extra_stats(&mut |name, v| {
        extra.insert(name.to_string(), v);
    });
    QdiscSummary {
        kind: q.kind().to_string(),
        enqueued_packets: st.enqueued.packets,
        dequeued_packets: st.dequeued.packets,
        drops,
        marked: st.marked,
        overlimits: st.overlimits,
        extra,
    }
}
