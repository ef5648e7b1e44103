//! Lab figures stored with the calibration suite (`scenarios/calibration/lab-results.json`), so
//! that an ordinary test — no root, no namespaces — holds a fresh simulation against real TCP.
//!
//! `linkshare compare --record FILE SCENARIOS…` runs the lab on a quiet machine and writes the
//! file: the kernel and date, and per scenario its phases, the lab's [`Figures`] (and the kernel
//! HTB's) and a tolerance. The tolerance is per scenario and is what the test and CI enforce; the
//! target (issue 12: 3 % of the link, RTT p50 15 % or 1 ms) is stored beside it and is what
//! docs/fidelity.md reports against. Recording keeps the tolerances already in the file.
//!
//! The file is JSON with one line per scenario, so that a re-recording diffs scenario by scenario.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{phases, Comparison, Figures, Phase, Tolerance};
use crate::model::SimResult;
use crate::Scenario;

/// The whole file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Stored {
    /// `uname -r` of the machine that measured.
    pub kernel: String,
    /// When (UTC, `YYYY-MM-DD`).
    pub date: String,
    /// The documented target (not what the test enforces: see [`StoredScenario::tolerance`]).
    pub target: Tolerance,
    /// By scenario name (its file stem).
    pub scenarios: BTreeMap<String, StoredScenario>,
}

/// One scenario's lab figures.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StoredScenario {
    /// The scenario file's name; it lives in the results file's directory.
    pub file: String,
    /// What the calibration test and CI allow today (see the module comment).
    pub tolerance: Tolerance,
    /// The phases the figures were measured over; a scenario whose phases moved needs a new
    /// recording.
    pub phases: Vec<Phase>,
    pub lab: Figures,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel: Option<Figures>,
    /// The lab against itself: a second lab run of the scenario compared with the stored one
    /// (`compare --record --repeat`), the noise beside the tolerance.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repeat: Option<Repeat>,
}

/// Lab-against-lab: the largest differences between two lab runs of one scenario.
#[derive(Copy, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Repeat {
    /// Largest |second − first| of a class in a phase, percent of the link.
    pub rate_pct: f64,
    /// … of a flow group in a phase, percent of the link.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flow_pct: Option<f64>,
    /// The ping p50 difference furthest outside the RTT target, ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rtt_p50_ms: Option<f64>,
}

impl Repeat {
    /// The differences of `second` from `first`, two lab runs of `sc` over `phases`.
    pub fn of(sc: &Scenario, phases: &[Phase], first: &Figures, second: &Figures) -> Repeat {
        let c = Comparison::new(
            &sc.name,
            super::groups::reference_rate_bps(sc),
            phases,
            second,
            first,
            None,
            Tolerance::TARGET,
        );
        Repeat {
            rate_pct: c.worst.rate_pct.abs(),
            flow_pct: c.worst.flow_pct.map(f64::abs),
            rtt_p50_ms: c.worst.rtt_p50_ms.map(f64::abs),
        }
    }
}

impl Stored {
    pub fn from_json(text: &str) -> serde_json::Result<Stored> {
        serde_json::from_str(text)
    }

    /// The file's text: a header, then one line per scenario.
    pub fn to_json(&self) -> serde_json::Result<String> {
        let mut s = format!(
            "{{\"kernel\":{},\"date\":{},\"target\":{},\n\"scenarios\":{{",
            serde_json::to_string(&self.kernel)?,
            serde_json::to_string(&self.date)?,
            serde_json::to_string(&self.target)?
        );
        for (i, (name, sc)) in self.scenarios.iter().enumerate() {
            s.push_str(if i == 0 { "\n" } else { ",\n" });
            s.push_str(&serde_json::to_string(name)?);
            s.push(':');
            s.push_str(&serde_json::to_string(sc)?);
        }
        s.push_str("\n}}\n");
        Ok(s)
    }
}

impl StoredScenario {
    /// Hold the simulator's `sim` run of `sc` against the stored lab figures, with `tolerance`
    /// (the stored one for the test, [`Tolerance::TARGET`] for the docs). Fails if the scenario's
    /// phases are no longer the recorded ones.
    pub fn check(
        &self,
        sc: &Scenario,
        sim: &SimResult,
        tolerance: Tolerance,
    ) -> Result<Comparison, String> {
        let ph = phases::of_scenario(sc);
        let same = ph.len() == self.phases.len()
            && ph.iter().zip(&self.phases).all(|(a, b)| {
                a.skipped == b.skipped
                    && (a.start_s - b.start_s).abs() < 1e-6
                    && (a.end_s - b.end_s).abs() < 1e-6
            });
        if !same {
            return Err(format!(
                "{}: the scenario's phases changed since the lab results were recorded: record them again (linkshare compare --record)",
                self.file
            ));
        }
        let fig = Figures::of_scenario(sim, sc, &ph);
        Ok(Comparison::new(
            &sc.name,
            super::groups::reference_rate_bps(sc),
            &ph,
            &fig,
            &self.lab,
            self.kernel.as_ref(),
            tolerance,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_round_trips_with_one_line_per_scenario() {
        let fig = Figures {
            classes: BTreeMap::from([("a".to_string(), vec![Some(1.5), None])]),
            ..Figures::default()
        };
        let one = StoredScenario {
            file: "scenarios/calibration/x.toml".into(),
            tolerance: Tolerance::TARGET,
            phases: phases::from_boundaries(&[5.0], 6.0),
            lab: fig.clone(),
            kernel: Some(fig),
            repeat: Some(Repeat {
                rate_pct: 0.5,
                flow_pct: Some(2.0),
                rtt_p50_ms: None,
            }),
        };
        let st = Stored {
            kernel: "6.1.0".into(),
            date: "2026-01-02".into(),
            target: Tolerance::TARGET,
            scenarios: BTreeMap::from([("x".to_string(), one.clone()), ("y".to_string(), one)]),
        };
        let text = st.to_json().unwrap();
        assert_eq!(text.lines().count(), 5, "{text}");
        assert_eq!(Stored::from_json(&text).unwrap(), st);
    }

    #[test]
    fn repeat_is_the_second_lab_run_against_the_first() {
        let text = "name = \"r\"\nduration = \"10s\"\n[link]\nrate = \"20mbit\"\n[[flow]]\nname = \"a\"\nkind = \"tcp\"\ncount = 2\n";
        let sc = Scenario::parse(text, "r.toml").expect("valid scenario");
        let ph = phases::of_scenario(&sc);
        let fig = |class: f64, group: f64| Figures {
            classes: BTreeMap::from([("link".to_string(), vec![Some(class)])]),
            flow_groups: BTreeMap::from([("a".to_string(), vec![Some(group)])]),
            ..Figures::default()
        };
        let r = Repeat::of(&sc, &ph, &fig(19.0, 19.0), &fig(18.6, 18.0));
        assert!((r.rate_pct - 2.0).abs() < 1e-9, "{r:?}");
        assert!((r.flow_pct.unwrap() - 5.0).abs() < 1e-9, "{r:?}");
        assert_eq!(
            Repeat::of(&sc, &ph, &fig(19.0, 19.0), &fig(19.0, 19.0)).rate_pct,
            0.0
        );
    }
}
