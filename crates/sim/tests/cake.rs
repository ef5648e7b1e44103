//! CAKE in the simulator (`scenarios/cake-hosts.toml`): host isolation with unequal flow counts,
//! and per-flow fairness from the same code when every flow shares the destination host.

use std::path::Path;

use linkshare_sim::model::{SeriesKind, SimResult};
use linkshare_sim::{run, Scenario};

/// Mean rate in Mbit/s of the flows whose name is `prefix` or starts with `prefix.`, summed,
/// over the samples ending in (from, to].
fn rate(r: &SimResult, prefix: &str, from: f64, to: f64) -> f64 {
    let samples = r.samples.iter().filter(|s| {
        s.kind == SeriesKind::Flow
            && (s.name == prefix || s.name.starts_with(&format!("{prefix}.")))
            && s.time_s > from
            && s.time_s <= to
    });
    let (mut sum, mut times) = (0.0, std::collections::BTreeSet::new());
    for s in samples {
        sum += s.rate_bps / 1e6;
        times.insert((s.time_s * 1000.0) as u64);
    }
    assert!(!times.is_empty(), "no samples of {prefix}");
    sum / times.len() as f64
}

fn scenario(isolation: &str) -> (f64, f64) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/cake-hosts.toml");
    let text = std::fs::read_to_string(&path).unwrap();
    let text = text.replace("\"dual-srchost\"", &format!("\"{isolation}\""));
    let sc = Scenario::parse(&text, "scenarios/cake-hosts.toml").unwrap_or_else(|e| panic!("{e}"));
    let r = run(&sc, None).unwrap_or_else(|e| panic!("{e}"));
    (rate(&r, "many", 2.0, 6.0), rate(&r, "one", 2.0, 6.0))
}

#[test]
fn dual_srchost_shares_between_hosts_triple_isolate_between_flows() {
    let (many, one) = scenario("dual-srchost");
    eprintln!("dual-srchost: many {many:.2} one {one:.2} Mbit/s");
    assert!(many + one > 18.5, "{many} + {one}");
    assert!(
        (many - one).abs() / (many + one) < 0.05,
        "dual-srchost {many} / {one}"
    );
    let (many, one) = scenario("triple-isolate");
    eprintln!("triple-isolate: many {many:.2} one {one:.2} Mbit/s");
    assert!(many + one > 18.5, "{many} + {one}");
    let share = one / (many + one);
    assert!(
        (share - 1.0 / 17.0).abs() < 0.02,
        "triple-isolate one's share {share}"
    );
}
