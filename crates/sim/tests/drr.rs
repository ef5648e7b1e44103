//! Classful DRR as the simulator's root (`scenarios/drr-classes.toml`): byte shares follow the
//! quanta whatever the packet sizes, and a class alone takes the whole link.

use std::path::Path;

use linkshare_sim::model::{SeriesKind, SimResult};
use linkshare_sim::{run, Scenario};

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

#[test]
fn drr_classes_share_by_quantum_in_bytes_and_a_lone_class_takes_the_link() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/drr-classes.toml");
    let sc = Scenario::load(&path).unwrap_or_else(|e| panic!("{e}"));
    let r = run(&sc, None).unwrap_or_else(|e| panic!("{e}"));
    // Quanta 3000 : 1500 with 1500-byte against 300-byte packets: 2 : 1 of the bytes, although
    // the small class sends 2.5 times as many packets.
    let big = class_rate(&r, "big", 1.0, 10.0);
    let small = class_rate(&r, "small", 1.0, 10.0);
    assert!((big - 20.0 / 3.0).abs() < 0.1, "big {big} Mbit/s");
    assert!((small - 10.0 / 3.0).abs() < 0.1, "small {small} Mbit/s");
    let alone = class_rate(&r, "small", 10.5, 15.0);
    assert!(alone > 9.9, "small alone {alone} Mbit/s");
    assert!(r.summary.link.utilisation > 0.99);
}
