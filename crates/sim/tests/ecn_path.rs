//! ECN, path impairments and expectations (issue 37 §4–§6) end to end in the simulator: AQMs mark
//! an ECN flow's packets where they drop the other's, `[path]` loses, duplicates and reorders
//! with netem's meaning and per seed, TCP keeps its rate on a reordering path, and `[[expect]]`
//! judges the figures.

use linkshare_sim::expect::judge_all;
use linkshare_sim::model::SimResult;
use linkshare_sim::{run, Scenario};

fn parse(text: &str) -> Scenario {
    Scenario::parse(text, "ecn_path.toml").unwrap_or_else(|e| panic!("{e}"))
}

fn sim(text: &str) -> SimResult {
    run(&parse(text), None).unwrap_or_else(|e| panic!("{e}"))
}

const TWO_CUBIC: &str = r#"
duration = "10s"
[link]
rate = "10mbit"
delay = "10ms"
[policy]
qdisc = "htb"
default = "link"
[[policy.class]]
name = "link"
rate = "9mbit"
leaf = "LEAF"
[[flow]]
name = "ecn"
kind = "tcp"
cc = "cubic"
ecn = true
[[flow]]
name = "plain"
kind = "tcp"
cc = "cubic"
"#;

/// fq_codel, RED and CAKE mark the ECN flow (CE counted at its receiver, few or no
/// retransmissions) and drop the other; both still share the class.
#[test]
fn aqms_mark_the_ecn_flow_and_drop_the_other() {
    for leaf in [
        "\"fq_codel\"",
        r#"{ type = "red", limit = "400k", min = "15k", max = "45k", avpkt = 1000, max_p = 0.1, bandwidth = "9mbit", ecn = true }"#,
    ] {
        let r = sim(&TWO_CUBIC.replace("\"LEAF\"", leaf));
        let s = &r.summary;
        let (e, p) = (&s.flows["ecn"], &s.flows["plain"]);
        let marks = e.ce_marks.unwrap_or(0);
        assert!(marks > 0, "{leaf}: {e:?}");
        assert_eq!(p.ce_marks, None, "{leaf}");
        assert!(p.retransmits > 0, "{leaf}: the plain flow loses: {p:?}");
        assert!(
            e.retransmits * 4 < p.retransmits.max(4),
            "{leaf}: marks instead of drops: ecn {} plain {}",
            e.retransmits,
            p.retransmits
        );
        assert!(e.cwnd_reductions > 0, "{leaf}: the ECN flow reacts");
        let share = e.goodput_bps / (e.goodput_bps + p.goodput_bps);
        assert!((0.3..0.7).contains(&share), "{leaf}: share {share}");
    }
}

#[test]
fn cake_marks_ecn_capable_packets() {
    let text = TWO_CUBIC.replace(
        "[policy]\nqdisc = \"htb\"\ndefault = \"link\"\n[[policy.class]]\nname = \"link\"\nrate = \"9mbit\"\nleaf = \"LEAF\"\n",
        "[policy]\nqdisc = { type = \"cake\", bandwidth = \"9mbit\" }\n",
    );
    let r = sim(&text);
    let e = &r.summary.flows["ecn"];
    assert!(e.ce_marks.unwrap_or(0) > 0, "{e:?}");
    assert!(r.summary.qdisc.marked > 0, "{:?}", r.summary.qdisc);
}

/// A flow without `ecn` sends no ECT packets, so nothing is ever marked.
#[test]
fn without_ecn_nothing_is_marked() {
    let r = sim(&TWO_CUBIC
        .replace("ecn = true\n", "")
        .replace("\"LEAF\"", "\"fq_codel\""));
    assert_eq!(r.summary.qdisc.marked, 0);
    assert!(r.summary.flows["ecn"].retransmits > 0);
}

const UDP_PATH: &str = r#"
duration = "20s"
seed = SEED
[link]
rate = "10mbit"
delay = "20ms"
[path]
PATH
[[flow]]
name = "u"
kind = "udp"
rate = "2mbit"
size = 500
"#;

fn udp(seed: u64, path: &str) -> SimResult {
    sim(&UDP_PATH
        .replace("SEED", &seed.to_string())
        .replace("PATH", path))
}

#[test]
fn bernoulli_loss_duplication_and_seeds() {
    let r = udp(1, "loss = \"2%\"\nduplicate = 0.01");
    let f = &r.summary.flows["u"];
    let p = r.summary.path.expect("path counters");
    let rate = p.lost as f64 / (f.packets_sent + p.duplicated) as f64;
    assert!((0.015..0.025).contains(&rate), "loss {rate}");
    assert!(p.duplicated > 50, "{p:?}");
    // A flow's packet is lost when the path lost it (and its copy, if it made one).
    assert!(
        f.packets_lost <= p.lost && f.packets_lost + p.duplicated >= p.lost,
        "{f:?} {p:?}"
    );
    assert_eq!(
        udp(1, "loss = \"2%\"\nduplicate = 0.01").summary.path,
        Some(p)
    );
    assert_ne!(
        udp(2, "loss = \"2%\"\nduplicate = 0.01").summary.path,
        Some(p)
    );
}

#[test]
fn gilbert_elliott_loses_at_its_stationary_rate() {
    let r = udp(
        1,
        "loss_model = \"gilbert-elliott\"\nge_p = \"1%\"\nge_r = \"20%\"",
    );
    let f = &r.summary.flows["u"];
    // p / (p + r) = 1/21 ≈ 4.8 %.
    let rate = f.packets_lost as f64 / f.packets_sent as f64;
    assert!((0.03..0.07).contains(&rate), "loss {rate}");
}

#[test]
fn jitter_spreads_the_one_way_delay() {
    let plain = udp(1, "");
    let jit = udp(1, "jitter = \"10ms\"");
    let (a, b) = (
        plain.summary.flows["u"].owd_ms.clone().unwrap(),
        jit.summary.flows["u"].owd_ms.clone().unwrap(),
    );
    assert!(a.max - a.min < 1.0, "{a:?}");
    assert!(b.min < 12.0 && b.max > 28.0, "{b:?}");
    assert!((b.p50 - 20.0).abs() < 1.5, "{b:?}");
}

#[test]
fn bad_path_keys_are_refused_with_the_line() {
    for (path, needle) in [
        ("jitter = \"30ms\"", "above the link's `delay`"),
        ("loss = 1.5", "probability"),
        ("ge_p = 0.1", "gilbert-elliott"),
        ("loss_model = \"gilbert-elliott\"", "needs `ge_p`"),
        ("loss_model = \"markov\"", "unknown loss model"),
        ("wobble = 1", "unknown field"),
    ] {
        let text = UDP_PATH.replace("SEED", "1").replace("PATH", path);
        let e = Scenario::parse(&text, "p.toml").expect_err(path);
        assert!(e.to_string().contains(needle), "{path}: {e}");
    }
}

/// A bulk TCP flow on a path that reorders (5 % of packets skip the 10 ms delay, and ±4 ms of
/// jitter lets packets overtake) keeps most of the link: RACK's reordering window widens with
/// DSACKs and spurious recoveries are undone, as Linux's.
#[test]
fn tcp_does_not_collapse_on_a_reordering_path() {
    let base = r#"
duration = "20s"
[link]
rate = "10mbit"
delay = "10ms"
queue = 100
[[flow]]
name = "t"
kind = "tcp"
cc = "cubic"
"#;
    let clean = sim(base).summary.flows["t"].goodput_bps;
    let r = sim(&format!(
        "{base}[path]\nreorder = \"5%\"\njitter = \"4ms\"\n"
    ));
    let f = &r.summary.flows["t"];
    assert!(r.summary.path.unwrap().reordered > 100);
    assert!(
        f.goodput_bps > 0.8 * clean,
        "reordering: {:.2} Mbit/s against {:.2} clean",
        f.goodput_bps / 1e6,
        clean / 1e6
    );
}

#[test]
fn expectations_are_judged_on_the_run() {
    let text = format!(
        "{}{}",
        UDP_PATH
            .replace("SEED", "1")
            .replace("PATH", "loss = \"1%\""),
        r#"
[[expect]]
flow = "u"
metric = "loss"
max = "3%"
[[expect]]
flow = "u"
metric = "owd_p99"
max = "15ms"
[[expect]]
class = "pfifo"
metric = "rate"
min = "1mbit"
"#
    );
    let sc = parse(&text);
    assert_eq!(sc.expects.len(), 3);
    let r = run(&sc, None).unwrap();
    let v = judge_all(&sc.expects, &r.summary);
    let pass: Vec<bool> = v.iter().map(|v| v.pass).collect();
    assert_eq!(pass, [true, false, true], "{v:?}");
    assert!(
        v[1].line()
            .starts_with("FAIL flow u owd_p99 ≤ 15.00 ms: 20."),
        "{}",
        v[1].line()
    );
}

#[test]
fn bad_expectations_are_refused() {
    let base = UDP_PATH.replace("SEED", "1").replace("[path]\nPATH\n", "");
    for (exp, needle) in [
        (
            "flow = \"nope\"\nmetric = \"rate\"\nmin = \"1mbit\"",
            "no flow or group",
        ),
        (
            "flow = \"u\"\nmetric = \"rtt_p50\"\nmax = \"1ms\"",
            "does not apply",
        ),
        (
            "flow = \"u\"\nmetric = \"speed\"\nmax = \"1ms\"",
            "unknown metric",
        ),
        (
            "flow = \"u\"\nmetric = \"rate\"",
            "needs a `min` or a `max`",
        ),
        (
            "class = \"gold\"\nmetric = \"rate\"\nmin = \"1mbit\"",
            "no class is named",
        ),
        (
            "flow = \"u\"\nmetric = \"owd_p99\"\nmax = \"4mbit\"",
            "time",
        ),
    ] {
        let text = format!("{base}\n[[expect]]\n{exp}\n");
        let e = Scenario::parse(&text, "x.toml").expect_err(exp);
        assert!(e.to_string().contains(needle), "{exp}: {e}");
    }
}
