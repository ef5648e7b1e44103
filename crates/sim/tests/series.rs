//! A long run keeps a bounded number of time-series rows (`crate::series`): memory does not
//! grow with duration ÷ sample × flows, and the coarser rows still add up to the run's totals.

use linkshare_sim::series::Budget;
use linkshare_sim::{run, run_within, Scenario};

/// `flows` UDP flows of one 1000-byte packet a second, sampled every millisecond, and a ping
/// every 10 ms.
fn many_flows(flows: usize, duration: &str) -> Scenario {
    let mut s = format!(
        "name = \"many\"\nduration = \"{duration}\"\nsample = \"1ms\"\n[link]\nrate = \"10mbit\"\ndelay = \"1ms\"\n"
    );
    for i in 0..flows {
        s.push_str(&format!(
            "[[flow]]\nname = \"u{i}\"\nkind = \"udp\"\nrate = \"8kbit\"\nsize = 1000\n"
        ));
    }
    s.push_str("[[flow]]\nname = \"ping\"\nkind = \"ping\"\ninterval = \"10ms\"\n");
    Scenario::parse(&s, "many.toml").unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn default_budget_bounds_the_rows_of_a_long_run() {
    // 120 s at 1 ms with 11 flows and the root: 120 001 × 12 = 1.44 million rows unbounded.
    let r = run(&many_flows(10, "120s"), None).unwrap();
    let held = (r.samples.len() + r.class_states.len()) as u64;
    let b = Budget::default();
    assert!(held <= b.rows, "{held} rows held, budget {}", b.rows);
    assert!(held >= b.rows / 4, "the budget is used, not wasted: {held}");
}

#[test]
fn a_small_budget_holds_a_ten_minute_run_to_its_row_count() {
    let budget = Budget {
        rows: 3_000,
        rtt_points: 500,
    };
    let sc = many_flows(20, "600s");
    let r = run_within(&sc, budget, None).unwrap();
    let held = (r.samples.len() + r.class_states.len()) as u64;
    assert!(held <= budget.rows, "{held} rows held");
    assert!(held > 0);
    assert!(
        r.rtt_points.len() as u64 <= budget.rtt_points,
        "{}",
        r.rtt_points.len()
    );
    assert!(r.rtt_points.len() as u64 >= budget.rtt_points / 2);
    // Every probe still counts in the statistics.
    let ping = &r.summary.flows["ping"];
    assert!(ping.rtt_ms.as_ref().unwrap().samples >= 59_000);
    // The coarse rows add up to what was delivered, flow by flow, and the last row ends the run.
    for (name, f) in &r.summary.flows {
        let sum: u64 = r
            .samples
            .iter()
            .filter(|s| &s.name == name)
            .map(|s| s.bytes)
            .sum();
        assert_eq!(sum, f.bytes_delivered, "{name}");
    }
    let last = r.samples.iter().map(|s| s.time_s).fold(0.0, f64::max);
    assert_eq!(last, 600.0);
}

#[test]
fn every_shipped_scenario_keeps_its_full_resolution() {
    use linkshare_sim::series::Plan;
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios");
    let mut dirs = vec![root];
    let mut checked = 0;
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.extension().is_some_and(|x| x == "toml") {
                // Calibration files and policies beside the scenarios are not scenarios.
                let Ok(sc) = Scenario::load(&p) else { continue };
                let plan = Plan::new(&sc, Budget::default());
                assert_eq!((plan.stride, plan.probe_every), (1, 1), "{}", p.display());
                checked += 1;
            }
        }
    }
    assert!(checked >= 10, "{checked} scenarios");
}
