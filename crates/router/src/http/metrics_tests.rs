//! Rendering of a snapshot: names, labels, label escaping, units, the histogram, both formats.

use super::*;
use crate::control::snapshot::{
    ClassSnapshot, DirectionSnapshot, InterfaceSnapshot, LatenessHist, ReloadCounts,
};

fn snap() -> Snapshot {
    let class = |name: &str, parent: Option<&str>, sent: u64| ClassSnapshot {
        name: name.to_string(),
        parent: parent.map(str::to_string),
        sent_bytes: sent,
        sent_packets: sent / 100,
        rate_bps: 1_000_000,
        ceil_bps: 2_000_000,
        tokens: -42,
        drops_by_reason: [("queue_full".to_string(), 7)].into_iter().collect(),
        ..ClassSnapshot::default()
    };
    Snapshot {
        directions: vec![DirectionSnapshot {
            from: "eth0".into(),
            to: "eth1".into(),
            classes: vec![
                class("root", None, 5000),
                class("we\"ird\\name\nx", Some("root"), 1200),
            ],
            ..DirectionSnapshot::default()
        }],
        interfaces: vec![InterfaceSnapshot {
            name: "eth1".into(),
            rx_ring_drops: 3,
            ..InterfaceSnapshot::default()
        }],
        lateness_hist: LatenessHist {
            le_ns: vec![1_000, 10_000],
            buckets: vec![2, 5],
            sum_ns: 30_000,
            count: 6,
        },
        reloads: ReloadCounts { ok: 2, failed: 1 },
        ..Snapshot::default()
    }
}

/// The sample line of `name` whose labels contain `has`, if any.
fn sample<'a>(text: &'a str, name: &str, has: &str) -> Option<&'a str> {
    text.lines()
        .find(|l| l.starts_with(&format!("{name}{{")) && l.contains(has))
}

#[test]
fn escape_rules() {
    assert_eq!(escape(r#"a"b\c"#), r#"a\"b\\c"#);
    assert_eq!(escape("x\ny"), "x\\ny");
    assert_eq!(escape("plain-1:10"), "plain-1:10");
}

#[test]
fn class_counters_named_and_labelled() {
    let t = openmetrics(&snap());
    let l = sample(&t, "linkshare_class_sent_bytes_total", "class=\"root\"")
        .unwrap_or_else(|| panic!("no root sample in\n{t}"));
    assert!(
        l.contains("dev=\"eth1\"") && l.contains("parent=\"\""),
        "{l}"
    );
    assert!(l.ends_with(" 5000"), "{l}");
    // The child's name escaped, its parent named.
    let c = sample(&t, "linkshare_class_sent_bytes_total", "parent=\"root\"")
        .unwrap_or_else(|| panic!("no child sample in\n{t}"));
    assert!(c.contains(r#"class="we\"ird\\name\nx""#), "{c}");
    assert!(c.ends_with(" 1200"), "{c}");
    assert!(
        t.contains("# TYPE linkshare_class_sent_bytes counter"),
        "{t}"
    );
    assert!(t.contains("# UNIT linkshare_class_sent_bytes bytes"), "{t}");
    let d = sample(&t, "linkshare_class_drops_total", "reason=\"queue_full\"")
        .unwrap_or_else(|| panic!("no drop sample in\n{t}"));
    assert!(d.ends_with(" 7"), "{d}");
    let tok = sample(&t, "linkshare_class_tokens_bytes", "class=\"root\"")
        .unwrap_or_else(|| panic!("no tokens in\n{t}"));
    assert!(tok.ends_with(" -42"), "{tok}");
    // 1 Mbit/s in bytes per second.
    let rate = sample(
        &t,
        "linkshare_class_rate_bytes_per_second",
        "class=\"root\"",
    );
    assert!(rate.is_some_and(|l| l.ends_with(" 125000.0")), "{t}");
    assert!(
        sample(&t, "linkshare_port_rx_ring_drops_total", "eth1").is_some_and(|l| l.ends_with(" 3")),
        "{t}"
    );
    assert!(
        sample(&t, "linkshare_reloads_total", "result=\"failed\"")
            .is_some_and(|l| l.ends_with(" 1")),
        "{t}"
    );
    assert!(t.ends_with("# EOF\n"), "{t}");
}

/// A subscriber's series carry its circuit id, direction and parent; a class without an id
/// has no `circuit_id` label.
#[test]
fn a_subscriber_series_carries_its_circuit_id() {
    let mut s = snap();
    s.directions[0].classes[1].circuit_id = Some("C-\"7".into());
    let t = openmetrics(&s);
    let c = sample(&t, "linkshare_class_sent_bytes_total", "parent=\"root\"")
        .unwrap_or_else(|| panic!("no child sample in\n{t}"));
    assert!(
        c.contains("direction=\"forward\"") && c.contains(r#"circuit_id="C-\"7""#),
        "{c}"
    );
    let r = sample(&t, "linkshare_class_sent_bytes_total", "class=\"root\"")
        .unwrap_or_else(|| panic!("no root sample in\n{t}"));
    assert!(!r.contains("circuit_id"), "{r}");
}

#[test]
fn lateness_histogram_is_cumulative_in_seconds() {
    let t = openmetrics(&snap());
    let b = |le: &str| {
        t.lines()
            .find(|l| {
                l.starts_with("linkshare_pacing_lateness_seconds_bucket")
                    && l.contains(&format!("le=\"{le}\""))
            })
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse::<u64>().ok())
    };
    assert_eq!(b("0.000001"), Some(2), "{t}");
    assert_eq!(b("0.00001"), Some(5), "{t}");
    assert_eq!(b("+Inf"), Some(6), "{t}");
    assert!(
        t.contains("linkshare_pacing_lateness_seconds_count 6"),
        "{t}"
    );
    assert!(
        t.contains("linkshare_pacing_lateness_seconds_sum 0.00003"),
        "{t}"
    );
}

#[test]
fn text_004_names_counters_by_their_samples() {
    let t = text_004(&snap());
    assert!(
        t.contains("# TYPE linkshare_class_sent_bytes_total counter"),
        "{t}"
    );
    assert!(
        t.contains("# HELP linkshare_class_sent_bytes_total "),
        "{t}"
    );
    assert!(!t.contains("# UNIT") && !t.contains("# EOF"), "{t}");
    // Gauges keep their names.
    assert!(
        t.contains("# TYPE linkshare_class_backlog_bytes gauge"),
        "{t}"
    );
}

#[test]
fn routes_by_path_and_accept() {
    let req = |path: &str, accept: &str| Request {
        method: "GET".into(),
        path: path.into(),
        accept: accept.into(),
        query: String::new(),
    };
    let mut calls = 0;
    let mut s = || {
        calls += 1;
        std::sync::Arc::new(snap())
    };
    assert_eq!(route(&req("/", ""), &mut s).status, 404);
    let om = route(
        &req(
            "/metrics",
            "application/openmetrics-text;version=1.0.0,text/plain;q=0.5",
        ),
        &mut s,
    );
    assert_eq!((om.status, om.content_type), (200, OPENMETRICS));
    let plain = route(&req("/metrics", "*/*"), &mut s);
    assert_eq!((plain.status, plain.content_type), (200, TEXT_004));
    assert_eq!(calls, 2, "no snapshot for a 404");
}

/// A snapshot of `n` classes a direction, both directions: a root, ten sites, leaves.
fn big(n: usize) -> Snapshot {
    let dir = |to: &str| DirectionSnapshot {
        to: to.into(),
        classes: (0..n)
            .map(|k| ClassSnapshot {
                name: match k {
                    0 => "root".into(),
                    1..=10 => format!("site{k}"),
                    _ => format!("sub{k}"),
                },
                parent: match k {
                    0 => None,
                    1..=10 => Some("root".into()),
                    _ => Some(format!("site{}", 1 + k % 10)),
                },
                leaf: k > 10,
                sent_bytes: k as u64 * 1000,
                drops_by_reason: [("queue_full".to_string(), k as u64 % 3)]
                    .into_iter()
                    .filter(|(_, n)| *n > 0)
                    .collect(),
                ..ClassSnapshot::default()
            })
            .collect(),
        ..DirectionSnapshot::default()
    };
    Snapshot {
        directions: vec![dir("eth1"), dir("eth0")],
        ..Snapshot::default()
    }
}

#[test]
fn every_class_of_a_large_snapshot_streams_in_pieces_with_families_whole() {
    let n = 20_000;
    assert!(n > DEFAULT_MAX_CLASS_SERIES);
    let s = std::sync::Arc::new(big(n));
    let req = |query: &str| Request {
        method: "GET".into(),
        path: "/metrics".into(),
        accept: "application/openmetrics-text".into(),
        query: query.into(),
    };
    let mut r = route(&req("classes=all"), &mut || s.clone());
    assert_eq!((r.status, r.content_type), (200, OPENMETRICS));
    let Some(mut more) = r.more.take() else {
        panic!("not streamed")
    };
    let mut text = Vec::new();
    let mut pieces = 0;
    loop {
        let mut piece = Vec::new();
        let go_on = more.fill(&mut piece);
        assert!(
            piece.len() < 2 * super::super::classes::PIECE,
            "{}",
            piece.len()
        );
        text.extend_from_slice(&piece);
        pieces += 1;
        if !go_on {
            break;
        }
    }
    assert!(pieces > 10, "{pieces} pieces");
    let t = String::from_utf8(text).expect("utf-8");
    assert!(t.ends_with("# EOF\n"));
    let count = |name: &str| {
        t.lines()
            .filter(|l| l.starts_with(&format!("{name}{{")))
            .count()
    };
    assert_eq!(count("linkshare_class_sent_bytes_total"), 2 * n);
    assert_eq!(count("linkshare_class_live_rate_bytes_per_second"), 2 * n);
    assert_eq!(count("linkshare_class_drops_total"), 2 * (n - n / 3 - 1));
    // Every family's samples in one run, right after its descriptor.
    let mut seen = std::collections::HashSet::new();
    let mut current = String::new();
    for l in t.lines() {
        if let Some(rest) = l.strip_prefix("# TYPE ") {
            current = rest.split(' ').next().unwrap_or("").to_string();
            assert!(seen.insert(current.clone()), "{current} described twice");
        } else if !l.starts_with('#') {
            let name = l.split(['{', ' ']).next().unwrap_or("");
            let fam = name
                .strip_suffix("_total")
                .or_else(|| name.strip_suffix("_bucket"))
                .or_else(|| name.strip_suffix("_sum"))
                .or_else(|| name.strip_suffix("_count"))
                .unwrap_or(name);
            assert_eq!(fam, current, "{l}");
        }
    }
    // The labels users query by: direction, the class (the subscriber), its parent node.
    let l: Vec<&str> = t
        .lines()
        .filter(|l| l.starts_with("linkshare_class_sent_bytes_total{"))
        .filter(|l| l.contains("class=\"sub12345\""))
        .collect();
    assert_eq!(
        l,
        [
            "linkshare_class_sent_bytes_total{dev=\"eth1\",direction=\"forward\",class=\"sub12345\",parent=\"site6\"} 12345000",
            "linkshare_class_sent_bytes_total{dev=\"eth0\",direction=\"reverse\",class=\"sub12345\",parent=\"site6\"} 12345000",
        ]
    );
    // By default, a snapshot this large carries the inner classes' series only; text 0.0.4 too.
    let mut r = req("");
    r.accept = "*/*".into();
    let plain = route(&r, &mut || s.clone());
    assert_eq!(plain.content_type, TEXT_004);
    let t = String::from_utf8(plain.into_body()).expect("utf-8");
    assert_eq!(count_in(&t, "linkshare_class_sent_bytes_total"), 2 * 11);
    assert!(t.contains("# TYPE linkshare_class_sent_bytes_total counter") && !t.contains("# EOF"));
}

fn count_in(t: &str, name: &str) -> usize {
    t.lines()
        .filter(|l| l.starts_with(&format!("{name}{{")))
        .count()
}

/// A snapshot with a CAKE leaf (`sub`) and a CAKE root in the reverse direction.
fn with_cake() -> Snapshot {
    use crate::control::snapshot::{CakeSnapshot, QdiscSnapshot, TinSnapshot};
    let tin = |name: &str, packets: u64| TinSnapshot {
        name: name.into(),
        packets,
        bytes: packets * 1000,
        peak_delay_ns: 2_500_000,
        ..TinSnapshot::default()
    };
    let cake = CakeSnapshot {
        memory_used: 3000,
        memory_limit: 4 << 20,
        tins: vec![tin("Bulk", 0), tin("Best Effort", 40), tin("Voice", 3)],
    };
    let mut s = snap();
    s.directions[0].classes[1].leaf = true;
    s.directions[0].classes[1].name = "sub".into();
    s.directions[0].classes[1].cake = Some(cake.clone());
    s.directions.push(DirectionSnapshot {
        from: "eth1".into(),
        to: "eth0".into(),
        qdisc: Some(QdiscSnapshot {
            cake: Some(cake),
            ..QdiscSnapshot::default()
        }),
        ..DirectionSnapshot::default()
    });
    s
}

/// Each tin of a CAKE leaf and of a CAKE root is a series with the class's labels and `tin`,
/// in whole families, in both formats; a scrape that leaves the leaf's class series out
/// leaves its tins out too, and a snapshot without CAKE has no tin family at all.
#[test]
fn cake_tins_are_series_that_follow_the_class_choice() {
    let s = with_cake();
    let om = openmetrics_of(&s, ClassSeries::All);
    let leaf = sample(
        &om,
        "linkshare_cake_tin_sent_packets_total",
        "class=\"sub\",parent=\"root\",tin=\"Best Effort\"",
    );
    assert!(leaf.is_some_and(|l| l.ends_with(" 40")), "{om}");
    let root = sample(
        &om,
        "linkshare_cake_tin_sent_packets_total",
        "direction=\"reverse\",class=\"\",parent=\"\",tin=\"Voice\"",
    );
    assert!(root.is_some_and(|l| l.ends_with(" 3")), "{om}");
    let delay = sample(
        &om,
        "linkshare_cake_tin_peak_delay_seconds",
        "tin=\"Voice\"",
    );
    assert!(delay.is_some_and(|l| l.ends_with(" 0.0025")), "{om}");
    assert!(om.contains("# UNIT linkshare_cake_tin_peak_delay_seconds seconds"));
    // One family, one group: its samples are contiguous.
    let lines: Vec<usize> = om
        .lines()
        .enumerate()
        .filter(|(_, l)| l.starts_with("linkshare_cake_tin_sent_packets_total{"))
        .map(|(i, _)| i)
        .collect();
    assert_eq!(lines.len(), 6, "{om}");
    assert!(lines.windows(2).all(|w| w[1] == w[0] + 1), "{om}");
    let t = text_004_of(&s, ClassSeries::All);
    assert!(
        t.contains("# TYPE linkshare_cake_tin_sent_packets_total counter"),
        "{t}"
    );

    let parents = openmetrics_of(&s, ClassSeries::Parents);
    assert!(
        !parents.contains("class=\"sub\",parent=\"root\",tin="),
        "{parents}"
    );
    assert!(
        parents.contains("class=\"\",parent=\"\",tin=\"Voice\""),
        "{parents}"
    );
    assert!(parents.ends_with("# EOF\n"));
    let plain = openmetrics_of(&snap(), ClassSeries::All);
    assert!(!plain.contains("linkshare_cake_tin"), "{plain}");
}
