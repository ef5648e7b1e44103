//! Seed 003 (SLAC's QBSS measurements) as scenarios: the key figures the seed reports, asserted.
//! See `scenarios/seed003/README.md`.

use std::path::{Path, PathBuf};

use linkshare_sim::model::{SeriesKind, SimResult};
use linkshare_sim::{run, Scenario};

fn scenario(name: &str) -> SimResult {
    let path: PathBuf = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../scenarios/seed003")
        .join(name);
    let sc = Scenario::load(&path).unwrap_or_else(|e| panic!("{e}"));
    run(&sc, None).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// Mean rate of a class in Mbit/s over the samples ending in (from, to].
fn class_rate(r: &SimResult, class: &str, from: f64, to: f64) -> f64 {
    let xs: Vec<f64> = r
        .samples
        .iter()
        .filter(|s| {
            s.kind == SeriesKind::Class && s.name == class && s.time_s > from && s.time_s <= to
        })
        .map(|s| s.rate_bps / 1e6)
        .collect();
    assert!(!xs.is_empty(), "no samples of {class} in ({from}, {to}]");
    xs.iter().sum::<f64>() / xs.len() as f64
}

/// The rate of `class` in the one-second sample ending at `t`.
fn sample_at(r: &SimResult, class: &str, t: f64) -> f64 {
    r.samples
        .iter()
        .find(|s| s.kind == SeriesKind::Class && s.name == class && (s.time_s - t).abs() < 1e-6)
        .map(|s| s.rate_bps / 1e6)
        .unwrap_or_else(|| panic!("no sample of {class} at {t}"))
}

fn check_phases(file: &str, prio_mbit: f64) {
    let r = scenario(file);
    let link = 10.0;
    // Alone, the scavenger takes more than 90 % of the link (the seed: "over 90 %").
    assert!(
        class_rate(&r, "scavenger", 2.0, 30.0) > 0.9 * link,
        "{file}"
    );
    assert!(
        class_rate(&r, "scavenger", 122.0, 150.0) > 0.9 * link,
        "{file}"
    );
    // Under competition it backs off to its 1 % floor (the seed: ~1 %, 10-20 KB/s).
    for (a, b) in [(32.0, 60.0), (62.0, 90.0), (92.0, 120.0)] {
        let q = class_rate(&r, "scavenger", a, b);
        assert!(
            q > 0.05 && q < 0.2,
            "{file}: scavenger {q} Mbit/s in ({a}, {b}]"
        );
    }
    // Priority gets its allocation; best effort the rest.
    let p = class_rate(&r, "priority", 62.0, 90.0);
    assert!(
        (p - prio_mbit).abs() < 0.05 * prio_mbit,
        "{file}: priority {p}"
    );
    let be = class_rate(&r, "be", 62.0, 90.0);
    let want_be = link - prio_mbit - 0.1;
    assert!((be - want_be).abs() < 0.05 * want_be, "{file}: be {be}");
    let be_alone = class_rate(&r, "be", 32.0, 60.0);
    assert!(be_alone > 0.97 * (link - 0.1), "{file}: be {be_alone}");
    // Transitions within 2 s (the seed: "< 1-2 seconds"): the second after each change is
    // already in the new state.
    assert!(
        sample_at(&r, "scavenger", 32.0) < 0.2,
        "{file}: scavenger slow to yield"
    );
    assert!(
        sample_at(&r, "priority", 62.0) > 0.9 * prio_mbit,
        "{file}: priority slow"
    );
    assert!(
        sample_at(&r, "be", 92.0) > 0.9 * (link - 0.1),
        "{file}: be slow to take over"
    );
    assert!(
        sample_at(&r, "scavenger", 122.0) > 0.9 * link,
        "{file}: scavenger slow back"
    );
}

#[test]
fn phases_one_best_effort_stream() {
    check_phases("phases-1be.toml", 7.0);
}

#[test]
fn phases_ten_best_effort_streams() {
    let r = scenario("phases-10be.toml");
    // The ten BE streams share their class fairly.
    let f = r.summary.fairness.get("be").copied().unwrap_or(0.0);
    assert!(f > 0.99, "fairness {f}");
    check_phases("phases-10be.toml", 7.0);
}

#[test]
fn phases_thirty_percent_priority() {
    check_phases("phases-30prio-10be.toml", 3.0);
}

fn rtt_p50(r: &SimResult, flow: &str) -> f64 {
    r.summary.flows[flow]
        .rtt_ms
        .as_ref()
        .unwrap_or_else(|| panic!("{flow} has no RTT"))
        .p50
}

#[test]
fn pings_in_a_higher_class_than_the_bulk_flow_stay_fast() {
    for (file, bulk_class) in [
        ("ping-bulk-scavenger.toml", "scavenger"),
        ("ping-bulk-be.toml", "be"),
        ("ping-bulk-priority.toml", "priority"),
    ] {
        let r = scenario(file);
        let idle = rtt_p50(&r, "idle-ping");
        assert!(idle > 0.25 && idle < 0.4, "{file}: idle RTT {idle} ms");
        for (ping, class) in [
            ("ping-be", "be"),
            ("ping-priority", "priority"),
            ("ping-scavenger", "scavenger"),
        ] {
            let rtt = rtt_p50(&r, ping);
            let above = match (class, bulk_class) {
                ("priority", _) => bulk_class != "priority",
                ("be", b) => b == "scavenger",
                _ => false,
            };
            if class == bulk_class {
                // Same class: the ping waits behind the bulk flow's queue (the seed: ~5 ms).
                assert!(rtt > 5.0 * idle, "{file}: {ping} {rtt} ms, idle {idle}");
            } else if above {
                // A higher class: within 2x the idle RTT (the seed: 0.55 vs 0.32 ms).
                assert!(rtt < 2.0 * idle, "{file}: {ping} {rtt} ms, idle {idle}");
            }
        }
    }
}
