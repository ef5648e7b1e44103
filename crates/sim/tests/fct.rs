//! Flows that come and go (issue 37 §2): `arrivals` expands into seeded finite TCP flows, the
//! simulator times each one's completion, and the results carry FCT percentiles by size bucket
//! and slowdown against the unloaded FCT.

use std::path::Path;

use linkshare_sim::model::{SeriesKind, SimResult};
use linkshare_sim::scenario::FlowKind;
use linkshare_sim::{run, Scenario};

fn parse(text: &str) -> Scenario {
    Scenario::parse(text, "fct.toml").unwrap_or_else(|e| panic!("{e}"))
}

fn sim(text: &str) -> SimResult {
    run(&parse(text), None).unwrap_or_else(|e| panic!("{e}"))
}

/// A link of `rate`, 10 ms one way, and one arrivals entry with `keys`.
fn workload(rate: &str, seed: u64, keys: &str) -> String {
    format!(
        r#"
duration = "6s"
seed = {seed}
[link]
rate = "{rate}"
delay = "10ms"
queue = 200
[[flow]]
name = "web"
kind = "tcp"
cc = "cubic"
stop = "4s"
{keys}
"#
    )
}

#[test]
fn arrivals_are_seeded_poisson_with_their_sizes() {
    let text = workload(
        "10mbit",
        7,
        "arrivals = \"poisson\"\narrival_rate = 50\nsize_dist = \"exponential\"\nbytes = \"20k\"",
    );
    let a = parse(&text);
    let b = parse(&text);
    assert_eq!(a.flows, b.flows, "same seed, same flows");
    let n = a.flows.len();
    // 200 expected over 4 s; the standard deviation is 14.
    assert!((140..=260).contains(&n), "{n} flows");
    let mut prev = 0;
    let mut total = 0u64;
    for (k, f) in a.flows.iter().enumerate() {
        assert_eq!(f.name, format!("web.{}", k + 1));
        let arr = f.arrival.as_ref().expect("an arriving flow");
        assert_eq!(arr.group, "web");
        assert_eq!(f.start, arr.at, "no request: starts when it arrives");
        assert!(arr.at.0 >= prev && arr.at.0 < 4_000_000_000);
        prev = arr.at.0;
        let FlowKind::Tcp(t) = &f.kind else {
            panic!("tcp")
        };
        total += t.bytes.unwrap();
        // One client and one server, a port pair per flow.
        assert_eq!((f.src, f.dst), (a.flows[0].src, a.flows[0].dst));
    }
    let mean = total as f64 / n as f64;
    assert!((mean / 20_000.0 - 1.0).abs() < 0.2, "mean size {mean}");
    let ports: std::collections::BTreeSet<u16> = a.flows.iter().map(|f| f.sport).collect();
    assert_eq!(ports.len(), n);
    let other = parse(&workload(
        "10mbit",
        8,
        "arrivals = \"poisson\"\narrival_rate = 50\nsize_dist = \"exponential\"\nbytes = \"20k\"",
    ));
    assert_ne!(other.flows, a.flows, "another seed, other flows");
}

#[test]
fn load_sets_the_rate_from_the_mean_size() {
    // 40 % of 10 Mbit/s with 50 kB flows: 10 flows/s, 40 over 4 s.
    let sc = parse(&workload(
        "10mbit",
        1,
        "arrivals = \"poisson\"\nload = 0.4\nbytes = \"50k\"",
    ));
    let n = sc.flows.len();
    assert!((20..=60).contains(&n), "{n}");
}

#[test]
fn an_idle_path_finishes_at_the_unloaded_fct() {
    // Two flows a second of 100 kB on 10 Mbit/s: they rarely meet. Seed 1: no ACK jitter
    // (crate::jitter), which the analytic unloaded FCT leaves out.
    let r = sim(&workload(
        "10mbit",
        1,
        "arrivals = \"poisson\"\narrival_rate = 2\nbytes = 100000",
    ));
    let g = &r.summary.fct["web"];
    assert!(g.flows >= 3, "{g:?}");
    assert_eq!(g.completed, g.flows, "every flow finishes");
    // The unloaded FCT is what a flow alone gets, and a lower bound for the others (two
    // flows a second sometimes meet).
    let slow: Vec<f64> = r.fct.iter().map(|rec| rec.slowdown().unwrap()).collect();
    assert!(slow.iter().all(|s| *s > 0.999), "{slow:?}");
    let least = slow.iter().copied().fold(f64::MAX, f64::min);
    assert!(
        least < 1.001,
        "a flow alone takes the unloaded FCT: {slow:?}"
    );
    assert!(
        g.bucket("all").unwrap().slowdown_p50.unwrap() < 1.3,
        "{slow:?}"
    );
    // 100 kB: bucket `small` only (≤ 100 kB).
    let names: Vec<&str> = g.buckets.iter().map(|b| b.bucket.as_str()).collect();
    assert_eq!(names, ["all", "small"]);
    // Reported as one group: one flows entry, one series.
    assert!(r.summary.flows.contains_key("web"));
    assert!(!r.summary.flows.keys().any(|k| k.starts_with("web.")));
    let delivered: u64 = r.fct.iter().map(|f| f.size_bytes).sum();
    assert_eq!(r.summary.flows["web"].bytes_delivered, delivered);
    let series: u64 = r
        .samples
        .iter()
        .filter(|s| s.kind == SeriesKind::Flow)
        .map(|s| {
            assert_eq!(s.name, "web");
            s.bytes
        })
        .sum();
    assert_eq!(series, delivered);
}

#[test]
fn load_slows_flows_down_and_percentiles_order() {
    let r = sim(&workload(
        "10mbit",
        5,
        "arrivals = \"poisson\"\nload = 0.8\nsize_dist = \"lognormal\"\nbytes = \"30k\"\nsize_sigma = 1.5",
    ));
    let all = r.summary.fct["web"].bucket("all").unwrap().clone();
    assert!(all.completed >= 100, "{all:?}");
    let (p50, p99) = (all.slowdown_p50.unwrap(), all.slowdown_p99.unwrap());
    assert!(
        p50 >= 1.0 && p99 > p50 * 1.5,
        "slowdown p50 {p50}, p99 {p99}"
    );
    assert!(all.fct_p99_ms.unwrap() > all.fct_p50_ms.unwrap());
    // The CSV has every flow; the report has the CDF plot.
    let csv = linkshare_report::fct::fct_csv(&r.fct);
    assert_eq!(csv.lines().count(), 1 + r.fct.len());
    assert!(linkshare_report::charts(&r)
        .iter()
        .any(|c| c.stem == "fct_cdf"));
    assert!(linkshare_report::render_table(&r).contains("slowdown p99"));
}

#[test]
fn a_request_adds_its_one_way_trip() {
    let plain = sim(&workload(
        "10mbit",
        9,
        "arrivals = \"poisson\"\narrival_rate = 2\nbytes = \"30k\"",
    ));
    let rr = sim(&workload(
        "10mbit",
        9,
        "arrivals = \"poisson\"\narrival_rate = 2\nbytes = \"30k\"\nrequest = 300",
    ));
    assert_eq!(plain.fct.len(), rr.fct.len());
    for (a, b) in plain.fct.iter().zip(&rr.fct) {
        assert_eq!((a.start_s, a.size_bytes), (b.start_s, b.size_bytes));
        let d = b.fct_s.unwrap() - a.fct_s.unwrap();
        assert!((d - 0.010).abs() < 0.002, "{} ms more", d * 1e3);
        assert!((b.ideal_s - a.ideal_s - 0.010).abs() < 1e-9);
    }
}

#[test]
fn a_finite_flow_reports_its_completion_and_own_goodput() {
    let r = sim(r#"
duration = "10s"
[link]
rate = "10mbit"
delay = "10ms"
[[flow]]
name = "upload"
kind = "tcp"
bytes = "1M"
start = "1s"
"#);
    let f = &r.summary.flows["upload"];
    let fct = f.fct_s.expect("completed");
    assert!(fct > 0.8 && fct < 1.5, "{fct}");
    assert!((f.goodput_bps - f.bytes_delivered as f64 * 8.0 / fct).abs() < 1e-6);
    assert!(
        f.goodput_bps > 6e6,
        "its own rate, not spread over the run: {}",
        f.goodput_bps
    );
    assert!(r.summary.fct.is_empty() && r.fct.is_empty());
}

#[test]
fn shipped_workloads_and_cdf_files() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios");
    let text = workload("100mbit", 2, "arrivals = \"poisson\"\narrival_rate = 20\nsize_dist = \"cdf\"\nsize_cdf = \"workloads/websearch.cdf\"");
    let from_file =
        Scenario::parse_with(&text, "w.toml", &dir, "w").unwrap_or_else(|e| panic!("{e}"));
    let builtin = parse(&workload(
        "100mbit",
        2,
        "arrivals = \"poisson\"\narrival_rate = 20\nsize_dist = \"websearch\"",
    ));
    assert_eq!(
        from_file.flows, builtin.flows,
        "the built-in is the shipped file"
    );
    let dm = parse(&workload(
        "100mbit",
        2,
        "arrivals = \"poisson\"\narrival_rate = 200\nsize_dist = \"datamining\"",
    ));
    let one_packet = dm
        .flows
        .iter()
        .filter(|f| matches!(&f.kind, FlowKind::Tcp(t) if t.bytes == Some(1460)))
        .count();
    let share = one_packet as f64 / dm.flows.len() as f64;
    assert!(
        (share - 0.5).abs() < 0.06,
        "half the data-mining flows are one packet: {share}"
    );
}

#[test]
fn a_trace_gives_times_and_sizes() {
    let dir = std::env::temp_dir().join(format!("lsfct-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("t.txt"), "# starts\n0.5 1000\n0.1 2000\n9 5\n").unwrap();
    let text = workload("10mbit", 1, "arrivals = \"trace\"\ntrace = \"t.txt\"");
    let sc = Scenario::parse_with(&text, "t.toml", &dir, "t").unwrap_or_else(|e| panic!("{e}"));
    let got: Vec<(u64, Option<u64>)> = sc
        .flows
        .iter()
        .map(|f| match &f.kind {
            FlowKind::Tcp(t) => (f.start.0, t.bytes),
            _ => panic!(),
        })
        .collect();
    assert_eq!(
        got,
        [(100_000_000, Some(2000)), (500_000_000, Some(1000))],
        "9 s is after stop"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// The line and column of `needle` in `text`.
fn pos(text: &str, needle: &str) -> (usize, usize) {
    let off = text.find(needle).unwrap();
    let before = &text[..off];
    (
        before.matches('\n').count() + 1,
        before.rsplit('\n').next().unwrap().chars().count() + 1,
    )
}

#[test]
fn bad_arrival_keys_are_located_errors() {
    for (keys, needle, word) in [
        ("arrivals = \"poisson\"\nbytes = \"1k\"", "\"poisson\"", "arrival_rate"),
        ("arrivals = \"burst\"\narrival_rate = 1\nbytes = 1", "\"burst\"", "unknown arrivals"),
        ("arrivals = \"poisson\"\narrival_rate = 1\nsize_dist = \"pareto\"\nbytes = 100\nsize_alpha = 0.5", "0.5", "above 1"),
        ("arrivals = \"poisson\"\narrival_rate = 1\nsize_dist = \"exponential\"", "\"exponential\"", "needs `bytes`"),
        ("arrivals = \"poisson\"\narrival_rate = 1\nsize_dist = \"websearch\"\nbytes = 4321", "4321", "does not apply"),
        ("arrivals = \"poisson\"\narrival_rate = 1\nbytes = 5\ncount = 77", "77", "count"),
        ("arrivals = \"poisson\"\narrival_rate = 1\nbytes = 5\nrequest = \"1M\"", "\"1M\"", "one initial window"),
        ("arrival_rate = 17", "17", "needs `arrivals`"),
        ("arrivals = \"trace\"\ntrace = \"/nonexistent/t.txt\"", "\"/nonexistent", "cannot read"),
        ("arrivals = \"poisson\"\narrival_rate = 100000\nbytes = 5", "100000", "at most"),
        ("arrivals = \"poisson\"\narrival_rate = 1\nbytes = 5\ndst = \"255.255.255.250\"\ndst_hosts = 9", "9\n", "past the last address"),
        ("dst_hosts = 40", "40", "needs `arrivals`"),
    ] {
        let text = workload("10mbit", 1, keys);
        let e = Scenario::parse(&text, "bad.toml")
            .err()
            .unwrap_or_else(|| panic!("accepted: {keys}"));
        let d = e.first().unwrap();
        assert_eq!((d.line, d.col), pos(&text, needle), "{keys}: {d}");
        assert!(d.message.contains(word), "{keys}: {d}");
    }
    let udp = "duration = \"1s\"\n[link]\nrate = \"1mbit\"\n[[flow]]\nname = \"u\"\nkind = \"udp\"\nrate = \"1mbit\"\narrivals = \"poisson\"\n";
    let e = Scenario::parse(udp, "u.toml").unwrap_err();
    assert!(
        e.first().unwrap().message.contains("does not apply to udp"),
        "{e}"
    );
}

#[test]
fn dst_hosts_spread_arrivals_over_consecutive_destinations() {
    let text = workload(
        "10mbit",
        3,
        "arrivals = \"poisson\"\narrival_rate = 100\nbytes = \"5k\"\ndst = \"100.64.0.1\"\ndst_hosts = 50",
    );
    let sc = parse(&text);
    let first = u32::from("100.64.0.1".parse::<std::net::Ipv4Addr>().unwrap());
    let mut seen = std::collections::BTreeSet::new();
    for f in &sc.flows {
        let std::net::IpAddr::V4(d) = f.dst else {
            panic!("IPv4")
        };
        let k = u32::from(d) - first;
        assert!(k < 50, "{d} outside the 50 hosts");
        seen.insert(k);
    }
    // About 400 flows over 50 hosts: a given host is missed with probability (49/50)^400 ≈ 3e-4.
    assert!(seen.len() >= 45, "{} hosts drawn", seen.len());
    assert_eq!(parse(&text).flows, sc.flows, "seeded");
}
