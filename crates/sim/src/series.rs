//! How much time series a run keeps: a fixed row budget, whatever the duration.
//!
//! A run keeps its series in memory for the reports (`timeseries.csv`, `scheduler.csv`,
//! `rtt.csv`, the plots). Unbounded, they grow with duration ÷ sample × series: 100 flows
//! sampled every millisecond are 6 million rows a simulated minute (about 1 GB) and 8.6 × 10⁹ in
//! the 24 hours a scenario may last. So a run holds at most [`Budget::rows`] series rows and
//! [`Budget::rtt_points`] ping probes:
//!
//! * **Series** (one row per class and per flow, plus each class's scheduler state, per sample):
//!   when `sample` would need more rows, the run samples every `k × sample`, the smallest
//!   multiple that fits. A row then covers `k` of the scenario's intervals — bytes and drops
//!   summed, the rate their mean, backlog and state at the end — exactly as if the scenario said
//!   `sample = k × sample`.
//! * **Ping probes** on the RTT plot: one probe in `m` is kept, the smallest `m` that fits. Every
//!   probe still counts in the flow's RTT statistics (`summary.json`), which are histograms whose
//!   size does not grow with the run ([`crate::metrics`]).
//!
//! The plan depends only on the scenario, so a coarser series is announced before the run
//! ([`Plan::note`]) and every run of the same scenario keeps the same rows.

use crate::scenario::{FlowKind, Scenario};

/// The most a run keeps.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Budget {
    /// Rows of `timeseries.csv` plus rows of `scheduler.csv`.
    pub rows: u64,
    /// Ping probes kept for `rtt.csv` and the RTT plot.
    pub rtt_points: u64,
}

impl Default for Budget {
    /// 500 000 rows (a row is about 100 bytes: ~50 MB) and 200 000 probes: a simulated hour of
    /// 10 flows at the default 100 ms sample is 360 000 rows, so every shipped scenario keeps its
    /// full resolution.
    fn default() -> Self {
        Budget {
            rows: 500_000,
            rtt_points: 200_000,
        }
    }
}

/// What a run samples under a budget.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    /// Sample every `stride × sample`.
    pub stride: u64,
    /// The interval the series are sampled at, ns (`stride × sample`).
    pub interval_ns: u64,
    /// Keep one ping probe in `probe_every` for the RTT plot.
    pub probe_every: u64,
    /// Rows the scenario would have needed at its own `sample`.
    pub wanted_rows: u64,
}

impl Plan {
    /// The plan for `sc` within `budget`.
    pub fn new(sc: &Scenario, budget: Budget) -> Plan {
        let sample = sc.sample.0.max(1);
        // Sampling instants: every `sample` and the end of the run.
        let instants = sc.duration.0 / sample + 1;
        // Per instant: a row per flow (per group of arriving flows); per class a row and its state (classes that the policy
        // names plus the root; one row for a classless scheduler).
        let classes = sc
            .policy
            .as_ref()
            .map(|p| p.policy().classes().len() as u64 + 1)
            .unwrap_or(1);
        let per_instant = sc.flow_series() as u64 + 2 * classes;
        let wanted_rows = instants.saturating_mul(per_instant);
        // At stride k a run samples ⌈duration / (k·sample)⌉ ≤ duration / (k·sample) + 1 times:
        // leaving one instant's rows out of the budget keeps the `+ 1` inside it. A budget
        // smaller than one instant gets one sample, at the end.
        let stride = if wanted_rows <= budget.rows {
            1
        } else {
            let room = budget.rows.saturating_sub(per_instant).max(1);
            (sc.duration.0 / sample)
                .saturating_mul(per_instant)
                .div_ceil(room)
                .max(1)
        };
        let probes: u64 = sc
            .flows
            .iter()
            .filter_map(|f| match &f.kind {
                FlowKind::Ping(p) => {
                    let active = f.stop.0.min(sc.duration.0).saturating_sub(f.start.0);
                    Some(active / p.interval.0.max(1) + 1)
                }
                _ => None,
            })
            .fold(0u64, u64::saturating_add);
        Plan {
            stride,
            interval_ns: sample.saturating_mul(stride),
            probe_every: probes.div_ceil(budget.rtt_points.max(1)).max(1),
            wanted_rows,
        }
    }

    /// What the user should hear when the plan is coarser than the scenario; `None` when the
    /// run keeps every sample and every probe.
    pub fn note(&self, sc: &Scenario, budget: Budget) -> Option<String> {
        let mut parts = Vec::new();
        if self.stride > 1 {
            parts.push(format!(
                "`sample = \"{}\"` over {} needs {} rows of time series, more than the {} a run \
                 keeps: the series are sampled every {} instead (summary figures are exact)",
                fmt_ns(sc.sample.0),
                fmt_ns(sc.duration.0),
                self.wanted_rows,
                budget.rows,
                fmt_ns(self.interval_ns)
            ));
        }
        if self.probe_every > 1 {
            parts.push(format!(
                "the RTT plot and rtt.csv keep one ping probe in {} ({} at most; the RTT \
                 statistics count every probe)",
                self.probe_every, budget.rtt_points
            ));
        }
        (!parts.is_empty()).then(|| parts.join("; "))
    }
}

/// `1ms`, `13ms`, `1.5s`, `24h`: the shortest exact spelling among ns, µs, ms and s.
fn fmt_ns(ns: u64) -> String {
    for (unit, div) in [("s", 1_000_000_000u64), ("ms", 1_000_000), ("us", 1_000)] {
        if ns >= div && ns.is_multiple_of(div) {
            return format!("{}{unit}", ns / div);
        }
    }
    if ns >= 1_000_000_000 {
        return format!("{}s", ns as f64 / 1e9);
    }
    format!("{ns}ns")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scenario(text: &str) -> Scenario {
        Scenario::parse(text, "t.toml").unwrap()
    }

    fn udp_flows(n: usize, duration: &str) -> String {
        let mut s = format!(
            "name = \"many\"\nduration = \"{duration}\"\nsample = \"1ms\"\n[link]\nrate = \"100mbit\"\n"
        );
        for i in 0..n {
            s.push_str(&format!(
                "[[flow]]\nname = \"u{i}\"\nkind = \"udp\"\nrate = \"10kbit\"\n"
            ));
        }
        s
    }

    #[test]
    fn a_day_of_a_hundred_flows_fits_the_budget() {
        let sc = scenario(&udp_flows(100, "86400s"));
        let b = Budget::default();
        let p = Plan::new(&sc, b);
        let instants = sc.duration.0 / p.interval_ns + 1;
        assert!(instants * (100 + 2) <= b.rows, "{p:?}");
        assert!(p.wanted_rows > 8_000_000_000);
        let note = p.note(&sc, b).unwrap();
        assert!(note.contains("sampled every"), "{note}");
    }

    #[test]
    fn within_budget_the_scenario_sample_is_kept() {
        let sc = scenario(&udp_flows(2, "10s"));
        let p = Plan::new(&sc, Budget::default());
        assert_eq!((p.stride, p.interval_ns, p.probe_every), (1, 1_000_000, 1));
        assert_eq!(p.note(&sc, Budget::default()), None);
    }

    #[test]
    fn units() {
        assert_eq!(fmt_ns(1_000_000), "1ms");
        assert_eq!(fmt_ns(13_000_000), "13ms");
        assert_eq!(fmt_ns(86_400_000_000_000), "86400s");
        assert_eq!(fmt_ns(1_500_000_000), "1500ms");
        assert_eq!(fmt_ns(7), "7ns");
    }
}
