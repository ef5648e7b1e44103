//! Every scenario shipped in `scenarios/` (and its subdirectories) parses and runs (shortened to at most 20 simulated
//! seconds), and the embedded default behaves as its comments say.

use std::path::Path;

use linkshare_core::Duration;
use linkshare_sim::model::SeriesKind;
use linkshare_sim::{run, Scenario};

fn scenarios_dir() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios")
}

#[test]
fn every_scenario_runs() {
    let mut n = 0;
    let mut entries = Vec::new();
    let mut dirs = vec![scenarios_dir()];
    while let Some(dir) = dirs.pop() {
        for e in std::fs::read_dir(&dir).unwrap() {
            let path = e.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else {
                entries.push(path);
            }
        }
    }
    entries.sort();
    for path in entries {
        if path.extension().and_then(|e| e.to_str()) != Some("toml") {
            continue;
        }
        let mut sc = Scenario::load(&path).unwrap_or_else(|e| panic!("{e}"));
        let full = sc.duration;
        sc.duration = Duration(sc.duration.0.min(20_000_000_000));
        let r = run(&sc, None).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert!(!r.samples.is_empty(), "{}", path.display());
        assert_eq!(r.summary.flows.len(), sc.flow_series());
        assert!(r.summary.link.utilisation > 0.0 && r.summary.link.utilisation <= 1.0 + 1e-9);
        assert!(full.0 > 0);
        n += 1;
    }
    assert!(n >= 3, "only {n} scenarios found");
}

#[test]
fn two_agency_shares_as_documented() {
    let sc = Scenario::load(&scenarios_dir().join("two-agency.toml")).unwrap();
    let r = run(&sc, None).unwrap();
    let rate = |class: &str, from: f64, to: f64| {
        let xs: Vec<f64> = r
            .samples
            .iter()
            .filter(|s| {
                s.kind == SeriesKind::Class && s.name == class && s.time_s > from && s.time_s <= to
            })
            .map(|s| s.rate_bps / 1e6)
            .collect();
        xs.iter().sum::<f64>() / xs.len() as f64
    };
    let near = |got: f64, want: f64, what: &str| {
        assert!((got - want).abs() < 0.15, "{what}: {got} vs {want}")
    };
    near(rate("agency-x", 2.0, 5.0), 7.0, "X borrows inside itself");
    near(rate("agency-y", 2.0, 5.0), 3.0, "Y borrows inside itself");
    for (class, want) in [
        ("x-rt", 3.0),
        ("x-bulk", 4.0),
        ("y-web", 2.0),
        ("y-bulk", 1.0),
    ] {
        near(rate(class, 11.0, 25.0), want, class);
    }
    near(rate("x-bulk", 26.0, 30.0), 7.0, "x-bulk takes x-rt's share");
    near(
        rate("x-bulk", 36.0, 40.0),
        10.0,
        "x-bulk alone takes the link",
    );
}

/// `scheduler.csv`: CBQ classes carry avgidle (negative while a saturated class is held to its
/// allocation), HTB classes tokens and ctokens bounded by their bursts.
#[test]
fn scheduler_state_is_sampled_per_class() {
    use linkshare_report::{scheduler_csv, SCHEDULER_HEADER};
    let mut cbq = Scenario::load(&scenarios_dir().join("two-agency.toml")).unwrap();
    cbq.duration = Duration(20_000_000_000);
    let r = run(&cbq, None).unwrap();
    let at = |r: &linkshare_sim::model::SimResult, class: &str, t: f64| {
        r.class_states
            .iter()
            .find(|s| s.class == class && (s.time_s - t).abs() < 1e-9)
            .cloned()
            .unwrap_or_else(|| panic!("no state of {class} at {t}"))
    };
    // 10–25 s: every leaf is backlogged and held to its own rate, so the estimators sit near or
    // below zero; no HTB tokens in a CBQ run.
    let mut negative = 0;
    for k in 0..20 {
        let s = at(&r, "y-bulk", 15.0 + k as f64 * 0.25);
        assert!(s.tokens_bytes.is_none() && s.ctokens_bytes.is_none());
        let a = s.avgidle_us.expect("CBQ has avgidle");
        assert!(a < 5_000.0, "y-bulk avgidle {a} µs at its limit");
        negative += (a <= 0.0) as usize;
    }
    assert!(
        negative > 0,
        "a class held to its rate is overlimit some of the time"
    );
    let csv = scheduler_csv(&r);
    assert!(csv.starts_with(&format!("{SCHEDULER_HEADER}\n")));
    assert_eq!(csv.lines().count(), r.class_states.len() + 1);

    let mut htb = Scenario::load(&scenarios_dir().join("two-agency-htb.toml")).unwrap();
    htb.duration = Duration(20_000_000_000);
    let r = run(&htb, None).unwrap();
    let s = at(&r, "x-bulk", 15.0);
    assert!(s.avgidle_us.is_none());
    let (tok, ctok) = (s.tokens_bytes.unwrap(), s.ctokens_bytes.unwrap());
    // Bounded by the default bursts (rate × 1 ms + MTU at most 10 Mbit/s: 2750 bytes).
    assert!(tok <= 2750 && ctok <= 2750, "{tok} {ctok}");
    assert!(
        r.class_states.iter().any(|s| s.mode == "may_borrow"),
        "some class borrows in the two-agency run"
    );
}
