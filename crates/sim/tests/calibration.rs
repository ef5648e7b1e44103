//! The simulator against real TCP, without namespaces: every calibration scenario
//! (`scenarios/calibration/`) simulated afresh and held against the lab figures stored in
//! `scenarios/calibration/lab-results.json` (recorded with `linkshare compare --record` on a
//! quiet machine), per class per phase, with each scenario's stored tolerance.
//!
//! The stored tolerance is today's state, not the target (issue 12: 3 % of the link rate, ping
//! RTT p50 within 15 % or 1 ms); docs/fidelity.md reports every scenario against the target.

use std::path::{Path, PathBuf};

use linkshare_sim::compare::stored::Stored;
use linkshare_sim::compare::Tolerance;
use linkshare_sim::Scenario;

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/calibration")
}

fn stored() -> Stored {
    let path = dir().join("lab-results.json");
    let text = std::fs::read_to_string(&path).unwrap();
    Stored::from_json(&text).unwrap()
}

#[test]
fn every_calibration_scenario_has_stored_lab_figures() {
    let st = stored();
    let mut files: Vec<String> = std::fs::read_dir(dir())
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .filter_map(|p| p.file_stem().and_then(|s| s.to_str()).map(String::from))
        .collect();
    files.sort();
    let recorded: Vec<String> = st.scenarios.keys().cloned().collect();
    assert_eq!(
        files, recorded,
        "record the missing ones: linkshare compare --record"
    );
    assert!(files.len() >= 8, "the suite has at least eight scenarios");
    assert_eq!(
        st.target,
        Tolerance::TARGET,
        "the documented target is not weakened"
    );
    for (name, e) in &st.scenarios {
        assert!(
            e.lab
                .classes
                .values()
                .flatten()
                .any(|x| x.is_some_and(|r| r > 0.0)),
            "{name}: the lab figures carry traffic"
        );
    }
}

#[test]
fn simulator_within_each_scenarios_tolerance_of_the_stored_lab_figures() {
    let st = stored();
    let mut failures = Vec::new();
    for (name, e) in &st.scenarios {
        let mut sc = Scenario::load(&dir().join(format!("{name}.toml"))).unwrap();
        sc.sweep = None;
        let sim = linkshare_sim::run(&sc, None).unwrap();
        let c = match e.check(&sc, &sim, e.tolerance) {
            Ok(c) => c,
            Err(m) => {
                failures.push(m);
                continue;
            }
        };
        let target = e.check(&sc, &sim, Tolerance::TARGET).unwrap();
        println!(
            "{name}: worst sim-lab {:+.1} % of the link ({}); target met: {}; tolerance {} %",
            c.worst.rate_pct,
            c.worst.rate_at.as_deref().unwrap_or("-"),
            target.pass,
            e.tolerance.rate_pct
        );
        if !c.pass {
            failures.extend(c.failures.iter().map(|f| format!("{name}: {f}")));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
