//! Arriving flows in a run: each is an ordinary finite TCP flow of the world, but it is reported
//! with its group (the `[[flow]]` entry it came from), not on its own, and by completion time.
//!
//! * **Series**: one `flow` row per group per sample (bytes delivered, drops and backlog summed
//!   over its flows, RTT the mean of their samples), so ten thousand short flows cost one series.
//! * **Summary**: one `flows` entry per group (counters summed, RTT statistics merged, goodput
//!   over the time from its first arrival to the end of the run) and one `fct` entry
//!   ([`linkshare_report::fct::summarise`]); every flow's record goes to `fct.csv`.
//! * **Completion**: a finite flow (`bytes`) completes when its last byte is delivered in order
//!   at the receiver ([`crate::metrics::FlowMetrics::deliver_tcp`]); its FCT counts from its
//!   arrival (its start, or its request with request/response), its goodput is size / FCT.

use linkshare_report::fct::{summarise, FctRecord};

use super::{FlowRt, World};
use crate::metrics::Hist;
use crate::model::{FlowSummary, Sample, SeriesKind, Summary};
use crate::scenario::{FlowKind, Scenario};

/// A flow reported on its own.
pub(super) const NO_GROUP: u32 = u32::MAX;

/// One group's figures in the current sampling interval.
#[derive(Default)]
struct Acc {
    bytes: u64,
    drops: u64,
    backlog: u64,
    rtt_sum: u128,
    rtt_n: u64,
}

/// The groups of arriving flows of a run, in file order.
pub(super) struct Groups {
    names: Vec<String>,
    acc: Vec<Acc>,
}

impl Groups {
    /// Find the groups of `sc`, mark each flow with its group and give finite TCP flows their
    /// size to complete.
    pub(super) fn attach(sc: &Scenario, flows: &mut [FlowRt]) -> Groups {
        let mut names: Vec<String> = Vec::new();
        for (spec, f) in sc.flows.iter().zip(flows.iter_mut()) {
            if let FlowKind::Tcp(t) = &spec.kind {
                f.m.target = t.bytes.unwrap_or(0);
            }
            if let Some(a) = &spec.arrival {
                let g = match names.iter().position(|n| *n == a.group) {
                    Some(g) => g,
                    None => {
                        names.push(a.group.clone());
                        names.len() - 1
                    }
                };
                f.group = g as u32;
            }
        }
        let acc = names.iter().map(|_| Acc::default()).collect();
        Groups { names, acc }
    }

    /// Count flow `f`'s interval (its RTT samples are taken and reset).
    pub(super) fn add(&mut self, f: &mut FlowRt, bytes: u64, drops: u64, backlog: u64) {
        let a = &mut self.acc[f.group as usize];
        a.bytes += bytes;
        a.drops += drops;
        a.backlog += backlog;
        a.rtt_sum += f.m.rtt_int_sum;
        a.rtt_n += f.m.rtt_int_n;
        f.m.rtt_int_sum = 0;
        f.m.rtt_int_n = 0;
    }

    /// Close the interval ending at `t` (`dt` seconds long): a row per group.
    pub(super) fn flush(
        &mut self,
        t: f64,
        dt: f64,
        samples: &mut Vec<Sample>,
        rtt_points: &mut Vec<(f64, String, f64)>,
    ) {
        for (name, a) in self.names.iter().zip(self.acc.iter_mut()) {
            let rtt_ms = (a.rtt_n > 0).then(|| a.rtt_sum as f64 / a.rtt_n as f64 / 1e6);
            if let Some(r) = rtt_ms {
                rtt_points.push((t, name.clone(), r));
            }
            samples.push(Sample {
                time_s: t,
                kind: SeriesKind::Flow,
                name: name.clone(),
                bytes: a.bytes,
                rate_bps: a.bytes as f64 * 8.0 / dt,
                backlog_bytes: a.backlog,
                drops: a.drops,
                rtt_ms,
            });
            *a = Acc::default();
        }
    }
}

/// A flow's goodput and, if it is finite and finished, its completion time (s) from its start:
/// size / FCT then; otherwise bytes over its active time (start to stop or the run's end).
pub(super) fn goodput(f: &FlowRt, duration: u64) -> (f64, Option<f64>) {
    let fct = f.m.done_at.map(|d| d.saturating_sub(f.start) as f64 / 1e9);
    if let Some(t) = fct.filter(|t| *t > 0.0) {
        return (f.m.delivered as f64 * 8.0 / t, fct);
    }
    let active = f.stop.min(duration).saturating_sub(f.start) as f64 / 1e9;
    let g = if active > 0.0 {
        f.m.delivered as f64 * 8.0 / active
    } else {
        0.0
    };
    (g, fct)
}

impl World<'_> {
    /// Every group's summary entry and FCT figures; returns the per-flow records.
    pub(super) fn finish_groups(
        &self,
        summary: &mut Summary,
        per_class: &mut std::collections::BTreeMap<String, Vec<f64>>,
    ) -> Vec<FctRecord> {
        let sc = self.sc;
        let names = &self.groups.names;
        let mut sums: Vec<FlowSummary> = names.iter().map(|_| FlowSummary::default()).collect();
        let mut rtts: Vec<Hist> = names.iter().map(|_| Hist::default()).collect();
        let mut first: Vec<u64> = names.iter().map(|_| u64::MAX).collect();
        let mut records = Vec::new();
        for (i, (f, spec)) in self.flows.iter().zip(&sc.flows).enumerate() {
            let (Some(a), FlowKind::Tcp(t), g) = (&spec.arrival, &spec.kind, f.group as usize)
            else {
                continue;
            };
            let Some(s) = sums.get_mut(g) else { continue };
            records.push(FctRecord {
                group: a.group.clone(),
                flow: f.name.clone(),
                size_bytes: t.bytes.unwrap_or(0),
                start_s: a.at.0 as f64 / 1e9,
                fct_s: f.m.done_at.map(|d| d.saturating_sub(a.at.0) as f64 / 1e9),
                ideal_s: spec.ideal_fct_s(&sc.link).unwrap_or(0.0),
            });
            first[g] = first[g].min(a.at.0);
            if s.class.is_empty() {
                s.class = f.class.clone();
            }
            if let super::Src::Tcp(c) = &f.src {
                s.retransmits += c.snd.stats.retransmits;
                s.timeouts += c.snd.stats.timeouts;
                s.cwnd_reductions += c.snd.stats.cwnd_reductions;
            }
            s.bytes_delivered += f.m.delivered;
            s.packets_sent += f.m.packets_sent;
            s.packets_lost += self.link.flows[i].drops;
            rtts[g].merge(&f.m.rtt);
        }
        for (g, mut s) in sums.into_iter().enumerate() {
            let span = sc.duration.0.saturating_sub(first[g]) as f64 / 1e9;
            s.kind = "tcp".into();
            s.goodput_bps = if span > 0.0 {
                s.bytes_delivered as f64 * 8.0 / span
            } else {
                0.0
            };
            s.rtt_ms = Some(rtts[g].to_stats_ms());
            per_class
                .entry(s.class.clone())
                .or_default()
                .push(s.goodput_bps);
            summary.flows.insert(names[g].clone(), s);
        }
        summary.fct = summarise(&records);
        records
    }
}
