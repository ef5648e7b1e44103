//! The figures one run contributes to a comparison: per class per phase mean rate, per ping flow
//! per phase RTT p50/p99, per flow goodput. Read from a [`SimResult`] — the simulator's, or the lab's (which
//! produces the same model) — or from stored lab results (they serialise to compact JSON).
//!
//! A class's rate in a phase is the bytes of the sample intervals that lie wholly inside the
//! phase's measured stretch `[from_s, end_s]`, over the time they cover: both sides sample on the
//! same grid (`k × sample`), so they average the very same intervals.
//!
//! A ping's RTT is taken per phase too, over the replies received inside the same measured
//! stretch. Over a whole run its p50 can be meaningless: a ping that spends half the run beside an
//! idle class (4 ms) and half behind a standing queue (300 ms) has its median on the edge between
//! the two, where one sample more or less on either side moves it by 50 ms (the office scenario,
//! 17.8 and 61.5 ms in two lab runs of the same file). Within a phase the load is steady and so is
//! the distribution. Percentiles use the same histogram as the runs' own summaries
//! ([`crate::metrics::Hist`]).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::phases::Phase;
use crate::metrics::Hist;
use crate::model::{SeriesKind, SimResult};

/// Slack when deciding whether a sample interval lies inside a phase (seconds).
const EPS_S: f64 = 1e-6;
/// The one class of a scenario without a policy, on both sides (the simulator calls it `pfifo`,
/// the lab `link`).
pub const NO_POLICY: &str = "link";
/// A ping's phase with fewer replies than this has no RTT figure (too few for a median).
pub const MIN_PING_SAMPLES: u64 = 5;

/// RTT percentiles of one flow, ms.
#[derive(Copy, Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Rtt {
    pub p50_ms: f64,
    pub p99_ms: f64,
}

/// One run's figures.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Figures {
    /// Mean sending rate of each class in each phase (in phase order), Mbit/s; `None` where the
    /// phase is skipped or no sample interval lies inside it.
    pub classes: BTreeMap<String, Vec<Option<f64>>>,
    /// RTT of each ping flow in each phase (in phase order); `None` where the phase is skipped or
    /// fewer than [`MIN_PING_SAMPLES`] replies arrived inside its measured stretch.
    pub pings: BTreeMap<String, Vec<Option<Rtt>>>,
    /// Goodput of each TCP and UDP flow over its active time, Mbit/s.
    pub goodput: BTreeMap<String, f64>,
    /// Delivered rate of each flow group ([`super::groups::flow_groups`]) in each phase, Mbit/s.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub flow_groups: BTreeMap<String, Vec<Option<f64>>>,
    /// FCT p50/p99 of each group of arriving flows by size bucket ([`super::fct`]).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub fct: super::fct::FctFigures,
    /// The host while a lab run's traffic ran ([`super::trust`]); absent for the simulator and
    /// for lab figures recorded before it was measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<crate::model::HostFigures>,
}

/// Round to 1e-4 (0.1 kbit/s, 0.1 µs): stored figures stay short and a fresh run compares the
/// same digits.
pub(crate) fn round4(x: f64) -> f64 {
    (x * 1e4).round() / 1e4
}

impl Figures {
    /// The figures of `result` over `phases`. `no_policy`: the scenario has no policy, its one
    /// class is reported as [`NO_POLICY`] whatever the side calls it.
    pub fn measure(result: &SimResult, phases: &[Phase], no_policy: bool) -> Figures {
        // Per class: (end time, bytes) in time order.
        let mut series: BTreeMap<String, Vec<(f64, u64)>> = BTreeMap::new();
        for s in result
            .samples
            .iter()
            .filter(|s| s.kind == SeriesKind::Class)
        {
            let name = if no_policy {
                NO_POLICY.to_string()
            } else {
                s.name.clone()
            };
            series.entry(name).or_default().push((s.time_s, s.bytes));
        }
        let mut classes = BTreeMap::new();
        for (name, mut pts) in series {
            pts.sort_by(|a, b| a.0.total_cmp(&b.0));
            // Several classes merged into one (no policy): add up equal times.
            pts.dedup_by(|b, a| {
                if (a.0 - b.0).abs() < EPS_S {
                    a.1 += b.1;
                    true
                } else {
                    false
                }
            });
            let rates = phases.iter().map(|p| phase_rate(&pts, p)).collect();
            classes.insert(name, rates);
        }
        let mut pings = BTreeMap::new();
        let mut goodput = BTreeMap::new();
        for (name, f) in &result.summary.flows {
            if f.kind == "ping" {
                let mut hists: Vec<Hist> = vec![Hist::default(); phases.len()];
                for (t, _, ms) in result.rtt_points.iter().filter(|p| &p.1 == name) {
                    if let Some(i) = phases.iter().position(|p| p.measures(*t)) {
                        hists[i].record((ms * 1e6).max(0.0) as u64);
                    }
                }
                let per_phase = hists
                    .iter()
                    .map(|h| {
                        (h.n >= MIN_PING_SAMPLES).then(|| Rtt {
                            p50_ms: round4(h.quantile(0.5) / 1e6),
                            p99_ms: round4(h.quantile(0.99) / 1e6),
                        })
                    })
                    .collect();
                pings.insert(name.clone(), per_phase);
            } else {
                goodput.insert(name.clone(), round4(f.goodput_bps / 1e6));
            }
        }
        Figures {
            classes,
            pings,
            goodput,
            flow_groups: BTreeMap::new(),
            fct: super::fct::measure(result),
            host: result.summary.lab.as_ref().and_then(|l| l.host.clone()),
        }
    }
}

impl Figures {
    /// The figures of `result`, a run of `sc`, over `phases`: [`Figures::measure`] and, for a
    /// CAKE root, each host's and tin's rate as a row beside the classes ([`super::groups`]);
    /// and every flow group's rate per phase.
    pub fn of_scenario(result: &SimResult, sc: &crate::Scenario, phases: &[Phase]) -> Figures {
        let mut f = Figures::measure(result, phases, sc.policy.is_none());
        let groups = super::groups::of_scenario(sc);
        f.classes
            .extend(super::groups::rates(result, phases, &groups));
        f.flow_groups = super::groups::rates(result, phases, &super::groups::flow_groups(sc));
        f
    }
}

/// Mean rate (Mbit/s) of the intervals `(previous end, end]` lying inside the phase's measured
/// stretch.
pub(super) fn phase_rate(pts: &[(f64, u64)], p: &Phase) -> Option<f64> {
    if p.skipped {
        return None;
    }
    let mut bytes = 0u64;
    let mut span = 0.0;
    let mut prev = 0.0;
    for &(t, b) in pts {
        if prev >= p.from_s - EPS_S && t <= p.end_s + EPS_S {
            bytes += b;
            span += t - prev;
        }
        prev = t;
    }
    (span > EPS_S).then(|| round4(bytes as f64 * 8.0 / span / 1e6))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compare::phases::from_boundaries;
    use crate::model::{FlowSummary, Sample};

    fn sample(t: f64, name: &str, bytes: u64) -> Sample {
        Sample {
            time_s: t,
            kind: SeriesKind::Class,
            name: name.into(),
            bytes,
            rate_bps: 0.0,
            backlog_bytes: 0,
            drops: 0,
            rtt_ms: None,
        }
    }

    #[test]
    fn rates_average_only_settled_intervals() {
        let mut r = SimResult::default();
        // 0.5 s samples over 10 s; 1 Mbit/s until 5 s (125 000 B/s), 3 Mbit/s after.
        for k in 1..=20 {
            let t = k as f64 * 0.5;
            let bps = if t <= 5.0 { 125_000 } else { 375_000 };
            r.samples.push(sample(t, "a", bps / 2));
        }
        r.summary.flows.insert(
            "p".into(),
            FlowSummary {
                kind: "ping".into(),
                ..FlowSummary::default()
            },
        );
        // Ping replies every 0.1 s: 10 ms in phase 1, 200 ms in phase 2 (from 5 s), one
        // 999 ms reply during phase 2's settling (6.0 s, before 6.33: not measured).
        for k in 0..100 {
            let t = k as f64 * 0.1;
            let ms = if t < 5.0 { 10.123456 } else { 200.0 };
            r.rtt_points.push((t, "p".into(), ms));
        }
        r.rtt_points.push((6.0, "p".into(), 999.0));
        r.summary.flows.insert(
            "t".into(),
            FlowSummary {
                kind: "tcp".into(),
                goodput_bps: 2_500_000.0,
                ..FlowSummary::default()
            },
        );
        let phases = from_boundaries(&[5.0, 9.0], 10.0);
        let f = Figures::measure(&r, &phases, false);
        // Phase 1 (0–5) from 5/3 s: intervals ending 2.0 … 5.0 → exactly 1 Mbit/s.
        // Phase 2 (5–9) from 6.33 s: 6.5 … 9.0 → 3 Mbit/s. Phase 3 (9–10) is skipped.
        assert_eq!(f.classes["a"], vec![Some(1.0), Some(3.0), None]);
        // Per phase, from the replies inside each measured stretch; the histogram's buckets are
        // exact below 1 ms and fine above (a bucket is 1/64 of its power of two or less).
        let p = &f.pings["p"];
        assert_eq!(p.len(), 3);
        let (p1, p2) = (p[0].unwrap(), p[1].unwrap());
        assert!((p1.p50_ms - 10.1235).abs() < 10.1235 / 64.0, "{p1:?}");
        assert!((p2.p50_ms - 200.0).abs() < 200.0 / 64.0, "{p2:?}");
        assert!(p2.p99_ms < 300.0, "the settling sample is left out: {p2:?}");
        assert_eq!(p[2], None, "phase 3 is skipped");
        assert_eq!(f.goodput["t"], 2.5);
        assert!(!f.goodput.contains_key("p"));
    }

    #[test]
    fn no_policy_merges_into_one_link_class() {
        let mut r = SimResult::default();
        for k in 1..=10 {
            r.samples.push(sample(k as f64, "pfifo", 1_000_000 / 8));
        }
        let f = Figures::measure(&r, &from_boundaries(&[], 10.0), true);
        assert_eq!(f.classes.keys().collect::<Vec<_>>(), [NO_POLICY]);
        assert_eq!(f.classes[NO_POLICY], vec![Some(1.0)]);
    }
}
