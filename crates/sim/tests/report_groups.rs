//! What a run's report says below the class (issue 37 §6): each flow group's goodput per phase
//! in `summary.json` and in `report.html`, UDP one-way delay in the delay plot, and a class too
//! small for the main throughput axis on a panel of its own.

use linkshare_sim::{run, Scenario};

/// 20 Mbit/s: two CUBIC flows with a 10 ms and two with a 70 ms base RTT in the bulk class from
/// the start, a 0.3 Mbit/s VoIP stream in a class of its own, and the long pair stopping at 6 s:
/// two phases, two TCP groups and one UDP group.
const SCENARIO: &str = r#"
name = "groups"
duration = "9s"
[link]
rate = "20mbit"
delay = "5ms"
[policy]
qdisc = "htb"
default = "bulk"
[[policy.class]]
name = "root"
rate = "20mbit"
[[policy.class]]
name = "voip"
parent = "root"
rate = "1mbit"
ceil = "2mbit"
prio = 0
[[policy.class]]
name = "bulk"
parent = "root"
rate = "19mbit"
ceil = "20mbit"
[[policy.filter]]
class = "voip"
dscp = "ef"
[[flow]]
name = "short"
kind = "tcp"
cc = "cubic"
count = 2
[[flow]]
name = "long"
kind = "tcp"
cc = "cubic"
count = 2
extra_delay = "30ms"
stop = "6s"
[[flow]]
name = "voice"
kind = "udp"
dscp = "ef"
rate = "300kbit"
size = 200
"#;

fn scratch(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("lsgroups-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

#[test]
fn flow_groups_are_in_the_summary_and_the_html_report() {
    let sc = Scenario::parse(SCENARIO, "groups.toml").unwrap_or_else(|e| panic!("{e}"));
    let r = run(&sc, None).unwrap_or_else(|e| panic!("{e}"));
    let g = &r.summary.flow_groups;
    let names: Vec<&str> = g.keys().map(String::as_str).collect();
    assert_eq!(names, ["long", "short", "voice"]);
    assert_eq!(g["short"].flows.len(), 2);
    // Phases: 0–6 s and 6–9 s, each measured after it settled.
    let short = &g["short"].phases;
    assert_eq!(short.len(), 2);
    assert_eq!((short[0].index, short[1].index), (1, 2));
    assert!((short[1].from_s - 7.0).abs() < 1e-9, "{short:?}");
    // The long pair is gone in phase 2, and the short pair takes the bulk class's share.
    let long2 = g["long"].phases[1].goodput_bps.unwrap_or(0.0);
    let short1 = short[0].goodput_bps.expect("phase 1 measured");
    let short2 = short[1].goodput_bps.expect("phase 2 measured");
    assert!(long2 < 0.1e6, "{long2}");
    assert!(short2 > short1, "{short1} → {short2}");
    assert!(short2 > 15e6 && short2 < 20e6, "{short2}");
    let voice = g["voice"].phases[0].goodput_bps.unwrap();
    assert!((voice - 0.3e6).abs() < 0.03e6, "{voice}");

    let dir = scratch("html");
    linkshare_report::write_all(&r, &dir).unwrap();
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    let at = html
        .find("<h2 id=\"flow-groups\">")
        .expect("a flow-group section");
    let section = &html[at..html[at..].find("</table>").map_or(html.len(), |e| at + e)];
    for want in [
        "long",
        "short",
        "voice",
        "phase 1 (",
        "phase 2 (",
        "RTT p50",
        "one-way p50",
    ] {
        assert!(section.contains(want), "{want} missing from {section}");
    }
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("summary.json")).unwrap()).unwrap();
    assert_eq!(
        json["flow_groups"]["short"]["flows"]
            .as_array()
            .unwrap()
            .len(),
        2
    );

    // The VoIP stream's one-way delay is drawn with the RTTs; the 0.3 Mbit/s class and the
    // stream's few-ms delay lie on panels of their own, not flat under the bulk axis.
    assert!(r.owd_points.iter().any(|p| p.1 == "voice"));
    let charts = linkshare_report::charts(&r);
    let stems: Vec<&str> = charts.iter().map(|c| c.stem).collect();
    assert!(stems.contains(&"throughput_small_classes"), "{stems:?}");
    let small = charts
        .iter()
        .find(|c| c.stem == "throughput_small_classes")
        .unwrap();
    let small_names: Vec<&str> = small
        .figure
        .series
        .iter()
        .map(|s| s.name.as_str())
        .collect();
    assert_eq!(small_names, ["voip"]);
    let delay: Vec<&str> = charts
        .iter()
        .filter(|c| c.stem == "rtt" || c.stem == "rtt_small")
        .flat_map(|c| c.figure.series.iter().map(|s| s.name.as_str()))
        .collect();
    assert!(delay.contains(&"voice (one-way)"), "{delay:?}");
    assert!(dir.join("throughput_small_classes.svg").is_file());
    let _ = std::fs::remove_dir_all(&dir);
}
