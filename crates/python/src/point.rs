//! One run of a scenario given as text, with keys set and a seed: the unit of work of
//! `linkshare.simulate` and of every point of `linkshare.sweep`, wherever it runs (a thread, a
//! process, a Ray or Dask worker). Its inputs are plain data (the text, where it came from, the
//! edits) so they travel to another machine as they are.
//!
//! Principle: nothing here differs from `linkshare sim`: the edits are applied by
//! `linkshare_sim::overrides` and the run is `linkshare_sim::run`, so a point run from Python is
//! the same run, event for event, as the CLI's.

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;

use linkshare_sim::model::SimResult;
use linkshare_sim::overrides::Override;
use linkshare_sim::sweep::offered_by_flow;
use linkshare_sim::{Scenario, ScenarioError, SimError};

/// A scenario's text and where it came from (for messages and `policy = "path"`).
#[derive(Clone, Debug)]
pub struct Source {
    pub text: String,
    pub origin: String,
    pub base_dir: PathBuf,
    /// The name of a scenario without `name` (a file's stem).
    pub default_name: String,
}

/// Why a point did not run.
#[derive(Debug)]
pub enum PointError {
    /// The scenario (with its edits) is invalid.
    Scenario(ScenarioError),
    /// The run failed.
    Run(SimError),
}

impl fmt::Display for PointError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PointError::Scenario(e) => write!(f, "{e}"),
            PointError::Run(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for PointError {}

/// What one run produced, and the mean rate each UDP flow offered.
pub struct PointRun {
    pub result: SimResult,
    pub offered_bps: BTreeMap<String, f64>,
}

/// The scenario of `src` with `edits` applied and its seed replaced by `seed`; a `[sweep]` in
/// the file is dropped (the file without it is the scenario, as `sim --point 0` runs it).
pub fn scenario(
    src: &Source,
    edits: &[Override],
    seed: Option<u64>,
) -> Result<Scenario, ScenarioError> {
    let mut sc = linkshare_sim::overrides::apply(
        &src.text,
        &src.origin,
        &src.base_dir,
        &src.default_name,
        edits,
        seed,
    )?;
    sc.sweep = None;
    Ok(sc)
}

/// Run `src` with `edits` and `seed`.
pub fn run(src: &Source, edits: &[Override], seed: Option<u64>) -> Result<PointRun, PointError> {
    let sc = scenario(src, edits, seed).map_err(PointError::Scenario)?;
    let result = linkshare_sim::run(&sc, None).map_err(PointError::Run)?;
    Ok(PointRun {
        offered_bps: offered_by_flow(&sc),
        result,
    })
}

/// One point of a scenario's own `[sweep]`: its axis values and the edits that make it.
#[derive(Clone, Debug)]
pub struct SweepPoint {
    pub labels: Vec<String>,
    pub values: Vec<toml::Value>,
    pub edits: Vec<Override>,
}

/// The axes (names) and points of the `[sweep]` of `src`; no axes when it has none.
pub fn sweep_points(src: &Source) -> Result<(Vec<String>, Vec<SweepPoint>), ScenarioError> {
    let sc = Scenario::parse_with(&src.text, &src.origin, &src.base_dir, &src.default_name)?;
    let Some(sw) = sc.sweep else {
        return Ok((Vec::new(), Vec::new()));
    };
    let names = sw.axes.iter().map(|a| a.name.clone()).collect();
    let points = sw
        .points
        .into_iter()
        .map(|p| SweepPoint {
            labels: p.labels,
            values: p.values,
            edits: p.edits,
        })
        .collect();
    Ok((names, points))
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn source(text: &str) -> Source {
        Source {
            text: text.to_string(),
            origin: "t.toml".into(),
            base_dir: PathBuf::new(),
            default_name: "t".into(),
        }
    }

    pub(crate) const SCENARIO: &str = "duration = \"300ms\"\n[link]\nrate = \"10mbit\"\n\
        [policy]\nqdisc = { type = \"pfifo\", limit = 64 }\n\
        [[flow]]\nname = \"in\"\nkind = \"udp\"\nrate = \"12mbit\"\nsize = 1000\n\
        [[flow]]\nname = \"t\"\nkind = \"tcp\"\n\
        [[sweep.axis]]\nkey = \"flow.in.size\"\nvalues = [500, 1000]\nlabels = [\"small\", \"big\"]\n";

    #[test]
    fn a_point_is_the_cli_run_with_the_same_edits() {
        let src = source(SCENARIO);
        let edits = vec![("flow.in.size".to_string(), Some(toml::Value::Integer(500)))];
        let a = run(&src, &edits, Some(3)).unwrap();
        let text = SCENARIO.replace("size = 1000", "size = 500");
        let mut sc = Scenario::parse_with(&text, "t.toml", std::path::Path::new(""), "t").unwrap();
        sc.seed = 3;
        sc.sweep = None;
        let b = linkshare_sim::run(&sc, None).unwrap();
        assert_eq!(a.result.summary, b.summary);
        assert_eq!(a.result.summary.seed, 3);
    }

    #[test]
    fn sweep_points_carry_typed_values_and_edits() {
        let (axes, pts) = sweep_points(&source(SCENARIO)).unwrap();
        assert_eq!(axes, ["size"]);
        assert_eq!(pts.len(), 2);
        assert_eq!(pts[1].labels, ["big"]);
        assert_eq!(pts[1].values, [toml::Value::Integer(1000)]);
        assert_eq!(pts[1].edits[0].0, "flow.in.size");
        let e = run(&source(SCENARIO), &[("flow.nope.size".into(), None)], None);
        match e {
            Err(PointError::Scenario(e)) => {
                assert!(e.to_string().contains("no [[flow]] is named `nope`"), "{e}")
            }
            _ => panic!("an unknown flow must be a scenario error"),
        }
    }
}
