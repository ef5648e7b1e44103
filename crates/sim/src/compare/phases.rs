//! Phases of a scenario: the stretches of time between changes of its traffic.
//!
//! The contract (issue 12 §2.6, docs/fidelity.md): a boundary at every flow start and stop inside
//! the run (and at 0 and the duration); each phase is measured after a settling time of
//! min(2 s, a third of the phase); a phase shorter than 1.5 s is skipped. Measuring only settled
//! stretches compares the steady states the two runs reach, not the transients whose exact timing
//! no model of TCP can match packet for packet.

use serde::{Deserialize, Serialize};

use crate::Scenario;

/// A phase shorter than this (seconds) is skipped.
pub const MIN_PHASE_S: f64 = 1.5;
/// The longest settling time (seconds); shorter phases settle for a third of their length.
pub const MAX_SETTLE_S: f64 = 2.0;
/// Boundaries closer than this (seconds) are one boundary.
const SAME_S: f64 = 1e-3;

/// One phase: `[start_s, end_s)`, measured over `[from_s, end_s)`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Phase {
    /// 1-based, counting skipped phases too (so numbers do not move when one is skipped).
    pub index: usize,
    pub start_s: f64,
    pub end_s: f64,
    /// Where measurement starts: `start_s` plus the settling time.
    pub from_s: f64,
    /// Shorter than [`MIN_PHASE_S`]: not measured.
    pub skipped: bool,
}

impl Phase {
    /// `2.0–10.0` (the measured stretch), for tables.
    pub fn span(&self) -> String {
        format!("{:.1}–{:.1}", self.from_s, self.end_s)
    }

    /// Whether an event at `t_s` lies in the measured stretch `[from_s, end_s)` of a phase that
    /// is not skipped.
    pub fn measures(&self, t_s: f64) -> bool {
        !self.skipped && t_s >= self.from_s && t_s < self.end_s
    }
}

/// The phases of `sc`, from its flows' start and stop times. A group of arriving flows is one
/// stationary load from its first arrival on: its flows' own starts are not boundaries.
pub fn of_scenario(sc: &Scenario) -> Vec<Phase> {
    let mut times = Vec::with_capacity(sc.flows.len() * 2);
    let mut groups = std::collections::BTreeSet::new();
    for f in &sc.flows {
        match &f.arrival {
            // Flows arrive in time order: the group's first is its earliest.
            Some(a) => {
                if groups.insert(a.group.as_str()) {
                    times.push(a.at.as_secs_f64());
                }
            }
            None => {
                times.push(f.start.as_secs_f64());
                times.push(f.stop.as_secs_f64());
            }
        }
    }
    from_boundaries(&times, sc.duration.as_secs_f64())
}

/// Phases of a run of `duration_s` seconds with changes at `times` (any order; times outside
/// `(0, duration_s)` are ignored).
pub fn from_boundaries(times: &[f64], duration_s: f64) -> Vec<Phase> {
    if !(duration_s.is_finite() && duration_s > 0.0) {
        return Vec::new();
    }
    let mut b: Vec<f64> = times
        .iter()
        .copied()
        .filter(|t| t.is_finite() && *t > SAME_S && *t < duration_s - SAME_S)
        .collect();
    b.push(0.0);
    b.push(duration_s);
    b.sort_by(f64::total_cmp);
    b.dedup_by(|a, prev| (*a - *prev).abs() < SAME_S);
    b.windows(2)
        .enumerate()
        .map(|(i, w)| {
            let len = w[1] - w[0];
            Phase {
                index: i + 1,
                start_s: w[0],
                end_s: w[1],
                from_s: w[0] + (len / 3.0).min(MAX_SETTLE_S),
                skipped: len < MIN_PHASE_S,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn boundaries_split_the_run_and_settle() {
        let p = from_boundaries(&[10.0, 25.0, 0.0, 30.0, 10.0], 30.0);
        assert_eq!(p.len(), 3);
        assert_eq!((p[0].start_s, p[0].end_s, p[0].from_s), (0.0, 10.0, 2.0));
        assert_eq!((p[1].start_s, p[1].end_s, p[1].from_s), (10.0, 25.0, 12.0));
        // 5 s long: settles a third of it.
        assert_eq!((p[2].start_s, p[2].end_s), (25.0, 30.0));
        assert!((p[2].from_s - (25.0 + 5.0 / 3.0)).abs() < 1e-12);
        assert!(p.iter().all(|x| !x.skipped));
    }

    #[test]
    fn short_phase_settles_a_third_and_very_short_is_skipped() {
        // 0–3: settles 1 s; 3–4: 1 s long, skipped; 4–10: settles 2 s.
        let p = from_boundaries(&[3.0, 4.0], 10.0);
        assert_eq!(p.len(), 3);
        assert!((p[0].from_s - 1.0).abs() < 1e-12);
        assert!(p[1].skipped);
        assert_eq!(p[1].index, 2);
        assert!(!p[2].skipped);
        assert!((p[2].from_s - 6.0).abs() < 1e-12);
    }

    #[test]
    fn times_outside_the_run_and_near_duplicates_are_ignored() {
        let p = from_boundaries(&[-1.0, 5.0, 5.0004, 40.0, f64::NAN], 20.0);
        assert_eq!(p.len(), 2);
        assert_eq!(p[0].end_s, 5.0);
        assert!(from_boundaries(&[1.0], 0.0).is_empty());
    }

    #[test]
    fn scenario_flows_give_the_boundaries() {
        let sc = Scenario::parse(
            "duration = \"20s\"\n[link]\nrate = \"1mbit\"\n\
             [[flow]]\nname = \"a\"\nkind = \"udp\"\nrate = \"1mbit\"\n\
             [[flow]]\nname = \"b\"\nkind = \"udp\"\nrate = \"1mbit\"\nstart = \"5s\"\nstop = \"12s\"\n",
            "t.toml",
        )
        .unwrap();
        let p = of_scenario(&sc);
        let ends: Vec<f64> = p.iter().map(|x| x.end_s).collect();
        assert_eq!(ends, [5.0, 12.0, 20.0]);
    }
}
