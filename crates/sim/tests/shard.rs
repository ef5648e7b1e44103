//! The sharded HTB in the simulator (issue 14 §4): a root shared by two shards through token
//! exchange keeps its aggregate rate within 0.5 %, each shard gets its share within the bound
//! of `linkshare_core::shard`, and a lone busy shard borrows the whole root. One thread, shards
//! served in a fixed order: runs are deterministic.

use linkshare_core::shard::DEFAULT_LEASE_BYTES;
use linkshare_sim::model::{SeriesKind, SimResult};
use linkshare_sim::{run, Scenario};

fn sim(text: &str, workers: u32) -> SimResult {
    let mut sc = Scenario::parse(text, "test.toml").unwrap_or_else(|e| panic!("{e}"));
    sc.workers = workers;
    run(&sc, None).unwrap_or_else(|e| panic!("{e}"))
}

/// Bytes a class sent over the samples whose interval lies in `(from, to]` seconds.
fn class_bytes(r: &SimResult, class: &str, from: f64, to: f64, step: f64) -> f64 {
    r.samples
        .iter()
        .filter(|s| {
            s.kind == SeriesKind::Class
                && s.name == class
                && s.time_s > from + 1e-9
                && s.time_s <= to + 1e-9
        })
        .map(|s| s.rate_bps * step / 8.0)
        .sum()
}

/// root 10 Mbit/s; `a` (rate 2, ceil 10) and `b` (rate 3, ceil 10): round robin puts `a` on shard
/// 0 and `b` on shard 1. UDP at 12 Mbit/s (more than the root) into each class that `flows` names.
fn scenario(flows: &[&str]) -> String {
    let mut s = String::from(
        r#"
duration = "20s"
sample = "500ms"
[link]
rate = "10mbit"
delay = "2ms"
[policy]
qdisc = "htb"
default = "b"
[[policy.class]]
name = "root"
rate = "10mbit"
[[policy.class]]
name = "a"
parent = "root"
rate = "2mbit"
ceil = "10mbit"
[[policy.class]]
name = "b"
parent = "root"
rate = "3mbit"
ceil = "10mbit"
[[policy.filter]]
class = "a"
dscp = "af11"
"#,
    );
    for f in flows {
        let dscp = if *f == "a" { "dscp = \"af11\"\n" } else { "" };
        s.push_str(&format!(
            "[[flow]]\nname = \"u{f}\"\nkind = \"udp\"\nrate = \"12mbit\"\nsize = 1000\n{dscp}"
        ));
    }
    s
}

/// Both saturated: the aggregate is the root's rate within 0.5 %, and each class gets its
/// shard's share `ρ_s = g_s + (R − Σg)/N` (4.5 and 5.5 Mbit/s: the spare split per shard, where
/// one HTB would split it by quantum, 4 and 6) within the module's bound: at least
/// `ρ_s·Δ − (Q + L)`, at most `ρ_s·Δ + P + (2N − 1)(Q + L)`.
#[test]
fn a_shared_root_keeps_its_rate_and_each_shard_its_share() {
    let r = sim(&scenario(&["a", "b"]), 2);
    assert_eq!(r.summary.flows["ua"].class, "a");
    assert_eq!(r.summary.flows["ub"].class, "b");
    let (from, to, step) = (1.0, 20.0, 0.5);
    let dt = to - from;
    let a = class_bytes(&r, "a", from, to, step);
    let b = class_bytes(&r, "b", from, to, step);
    let ideal = 10e6 / 8.0 * dt;
    assert!(
        ((a + b) / ideal - 1.0).abs() < 0.005,
        "aggregate {} vs {ideal}",
        a + b
    );
    // Q the default lease, L the largest packet (the link's MTU), P the root's cburst (its
    // default: 1 ms at 10 Mbit/s plus one MTU), N = 2.
    let (q, l, p, n) = (DEFAULT_LEASE_BYTES as f64, 1500.0, 1250.0 + 1500.0, 2.0);
    for (got, rho, name) in [(a, 4.5e6, "a"), (b, 5.5e6, "b")] {
        let want = rho / 8.0 * dt;
        let (lo, hi) = (want - (q + l), want + p + (2.0 * n - 1.0) * (q + l));
        assert!(
            got >= lo && got <= hi,
            "{name}: {got} bytes, bound [{lo}, {hi}]"
        );
    }
    assert!(r.summary.classes["a"].borrows > 0 && r.summary.classes["b"].borrows > 0);
}

/// One class busy, the other idle in its own shard: the busy one borrows the whole root (the
/// idle shard's share reaches it through the pool), within 0.5 %.
#[test]
fn a_lone_busy_shard_borrows_the_whole_root() {
    for busy in ["a", "b"] {
        let r = sim(&scenario(&[busy]), 2);
        let got = class_bytes(&r, busy, 1.0, 20.0, 0.5);
        let ideal = 10e6 / 8.0 * 19.0;
        assert!(
            (got / ideal - 1.0).abs() < 0.005,
            "{busy} alone: {got} vs {ideal}"
        );
    }
}

/// The same scenario twice gives the same result, sample for sample.
#[test]
fn sharded_runs_are_deterministic() {
    let text = scenario(&["a", "b"]);
    let (r1, r2) = (sim(&text, 2), sim(&text, 2));
    let series = |r: &SimResult| -> Vec<(String, u64)> {
        r.samples
            .iter()
            .filter(|s| s.kind == SeriesKind::Class)
            .map(|s| (s.name.clone(), s.rate_bps.to_bits()))
            .collect()
    };
    assert!(!series(&r1).is_empty());
    assert_eq!(series(&r1), series(&r2));
    assert_eq!(r1.summary.classes["a"].bytes, r2.summary.classes["a"].bytes);
}

/// Only HTB policies can be sharded, with a clear message.
#[test]
fn workers_need_an_htb_policy() {
    let text = r#"
duration = "1s"
[link]
rate = "10mbit"
[policy]
qdisc = "sfq"
[[flow]]
name = "u"
kind = "udp"
rate = "1mbit"
"#;
    let mut sc = Scenario::parse(text, "t.toml").unwrap_or_else(|e| panic!("{e}"));
    sc.workers = 2;
    let e = match run(&sc, None) {
        Ok(_) => panic!("an sfq policy was sharded"),
        Err(e) => e.to_string(),
    };
    assert!(e.contains("need an HTB policy"), "{e}");
}
