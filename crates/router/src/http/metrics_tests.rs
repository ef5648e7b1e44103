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
