//! What a CAKE root promises is not a class's rate but a host's and a tin's share: per-host
//! fairness across unequal flow counts (`dual-srchost`, `triple-isolate`, …) and the DiffServ
//! tins' thresholds under saturation (Høiland-Jørgensen, Täht & Morton, "Piece of CAKE", 2018;
//! `net/sched/sch_cake.c`). A comparison of a CAKE policy therefore also holds, per phase, the
//! rate delivered to each source host, each destination host and each tin its flows' DSCP maps to
//! — measured from the flows' own series on every side (simulator, lab, kernel), so that the
//! kernel's CAKE, which has no classes, is measured the same way as linkshare's.
//!
//! A group is a row of the comparison like a class, named `src:ADDR`, `dst:ADDR` or
//! `tin:NAME`, and only where it tells something: hosts when the flows have two or more of them,
//! tins when they fall into two or more.
//!
//! Below the class, every scenario also has its flow groups ([`flow_groups`]): the flows of one
//! `[[flow]]` entry (its `count` copies) summed, per phase. A class's split among its flows is
//! what TCP's RTT unfairness and congestion-control mix decide; one flow of a group of identical
//! flows is noisy (which copy wins a loss epoch is chance), their sum is not, so `compare` judges
//! the group with a tolerance of its own (issue 37).

use std::collections::BTreeMap;

use linkshare_config::LeafKind;

use super::figures::phase_rate;
use super::phases::Phase;
use crate::model::{FlowGroupSummary, GroupPhase, SeriesKind, SimResult};
use crate::scenario::{FlowKind, Scenario};

/// Flows whose delivered bytes add up to one row.
#[derive(Clone, Debug, PartialEq)]
pub struct Group {
    pub name: String,
    pub flows: Vec<String>,
}

/// The groups of `sc`: none unless its policy's root is CAKE.
pub fn of_scenario(sc: &Scenario) -> Vec<Group> {
    let Some(LeafKind::Cake(p)) = sc.policy.as_ref().and_then(|s| s.policy().root_leaf()) else {
        return Vec::new();
    };
    // Ping flows carry too little to be part of a share.
    let flows: Vec<_> = sc
        .flows
        .iter()
        .filter(|f| !matches!(f.kind, FlowKind::Ping(_)))
        .collect();
    let mut groups = Vec::new();
    let mut by = |key: &dyn Fn(&crate::scenario::FlowSpec) -> String| {
        let mut g: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for f in &flows {
            g.entry(key(f)).or_default().push(f.name.clone());
        }
        if g.len() >= 2 {
            groups.extend(g.into_iter().map(|(name, flows)| Group { name, flows }));
        }
    };
    by(&|f| format!("src:{}", f.src));
    by(&|f| format!("dst:{}", f.dst));
    let mode = p.diffserv;
    let names = mode.tin_names();
    by(&|f| {
        let tin = mode.tin_of(f.tos >> 2);
        let name = names.get(tin).copied().unwrap_or("?");
        format!("tin:{}", name.to_ascii_lowercase().replace(' ', "-"))
    });
    groups
}

/// The flow groups of `sc`: one per `[[flow]]` entry of bulk TCP or UDP flows, named after the
/// entry. Pings carry too little, and arriving flows are judged by completion time instead.
pub fn flow_groups(sc: &Scenario) -> Vec<Group> {
    let mut g: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for f in sc
        .flows
        .iter()
        .filter(|f| f.arrival.is_none() && !matches!(f.kind, FlowKind::Ping(_)))
    {
        g.entry(f.entry.clone()).or_default().push(f.name.clone());
    }
    g.into_iter()
        .map(|(name, flows)| Group { name, flows })
        .collect()
}

/// The policy of `sc` has a CAKE root.
pub fn cake_root(sc: &Scenario) -> bool {
    matches!(
        sc.policy.as_ref().and_then(|s| s.policy().root_leaf()),
        Some(LeafKind::Cake(_))
    )
}

/// The rate errors are a percentage of: the link's rate, or a CAKE root's `bandwidth` where that
/// is lower (its shaper is then the bottleneck, and the "link" a share is measured against).
pub fn reference_rate_bps(sc: &Scenario) -> f64 {
    let link = sc.link.rate.0 as f64;
    match sc.policy.as_ref().and_then(|s| s.policy().root_leaf()) {
        Some(LeafKind::Cake(p)) => p.bandwidth.map_or(link, |b| (b.0 as f64).min(link)),
        _ => link,
    }
}

/// Each group's delivered rate per phase (Mbit/s), from the flows' series of `result`: one
/// pass over the samples, whatever the number of groups.
pub(super) fn rates(
    result: &SimResult,
    phases: &[Phase],
    groups: &[Group],
) -> BTreeMap<String, Vec<Option<f64>>> {
    let mut member: std::collections::HashMap<&str, Vec<usize>> = Default::default();
    for (gi, g) in groups.iter().enumerate() {
        for f in &g.flows {
            member.entry(f.as_str()).or_default().push(gi);
        }
    }
    // Per group: (end time, bytes) in time order, equal times added up.
    let mut pts: Vec<Vec<(f64, u64)>> = vec![Vec::new(); groups.len()];
    for s in result.samples.iter().filter(|s| s.kind == SeriesKind::Flow) {
        for &gi in member.get(s.name.as_str()).into_iter().flatten() {
            pts[gi].push((s.time_s, s.bytes));
        }
    }
    let mut out = BTreeMap::new();
    for (g, mut pts) in groups.iter().zip(pts) {
        pts.sort_by(|a, b| a.0.total_cmp(&b.0));
        pts.dedup_by(|b, a| {
            if (a.0 - b.0).abs() < 1e-6 {
                a.1 += b.1;
                true
            } else {
                false
            }
        });
        let per_phase = phases.iter().map(|p| phase_rate(&pts, p)).collect();
        out.insert(g.name.clone(), per_phase);
    }
    out
}

/// Fill `result.summary.flow_groups`: each flow group of `sc` ([`flow_groups`]) per phase of
/// `sc`, measured as `compare` measures it, for the reports (`summary.json`, the HTML's "Flow
/// groups"). Both the simulator and the lab call this on their results.
pub fn summarise(result: &mut SimResult, sc: &Scenario) {
    let groups = flow_groups(sc);
    if groups.is_empty() {
        return;
    }
    let phases = super::phases::of_scenario(sc);
    let mut by_group = rates(result, &phases, &groups);
    for g in groups {
        let rates = by_group.remove(&g.name).unwrap_or_default();
        let phases = phases
            .iter()
            .enumerate()
            .map(|(i, p)| GroupPhase {
                index: p.index,
                from_s: p.from_s,
                end_s: p.end_s,
                goodput_bps: rates.get(i).copied().flatten().map(|m| m * 1e6),
            })
            .collect();
        result.summary.flow_groups.insert(
            g.name,
            FlowGroupSummary {
                flows: g.flows,
                phases,
            },
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compare::phases::from_boundaries;
    use crate::model::Sample;

    fn flow_sample(t: f64, name: &str, bytes: u64) -> Sample {
        Sample {
            time_s: t,
            kind: SeriesKind::Flow,
            name: name.into(),
            bytes,
            rate_bps: 0.0,
            backlog_bytes: 0,
            drops: 0,
            rtt_ms: None,
        }
    }

    #[test]
    fn a_group_adds_its_flows_per_phase() {
        let mut r = SimResult::default();
        // Two flows of one host at 1 and 2 Mbit/s, another host's flow at 4 Mbit/s; 0.5 s
        // samples over 6 s.
        for k in 1..=12 {
            let t = k as f64 * 0.5;
            r.samples.push(flow_sample(t, "a.1", 62_500));
            r.samples.push(flow_sample(t, "a.2", 125_000));
            r.samples.push(flow_sample(t, "b", 250_000));
        }
        let groups = vec![
            Group {
                name: "src:a".into(),
                flows: vec!["a.1".into(), "a.2".into()],
            },
            Group {
                name: "src:b".into(),
                flows: vec!["b".into()],
            },
        ];
        let g = rates(&r, &from_boundaries(&[], 6.0), &groups);
        assert_eq!(g["src:a"], vec![Some(3.0)]);
        assert_eq!(g["src:b"], vec![Some(4.0)]);
    }

    #[test]
    fn cake_scenarios_have_host_and_tin_groups_and_others_none() {
        let text = r#"
name = "t"
duration = "6s"
[link]
rate = "25mbit"
[policy]
qdisc = { type = "cake", bandwidth = "20mbit", diffserv = "diffserv4" }
[[flow]]
name = "many"
kind = "tcp"
src = "10.0.0.1"
dst = "10.0.9.9"
count = 2
[[flow]]
name = "voice"
kind = "udp"
rate = "1mbit"
src = "10.0.0.2"
dst = "10.0.9.9"
dscp = "ef"
[[flow]]
name = "ping"
kind = "ping"
src = "10.0.0.3"
"#;
        let sc = Scenario::parse(text, "t.toml").expect("valid scenario");
        let g = of_scenario(&sc);
        let names: Vec<&str> = g.iter().map(|g| g.name.as_str()).collect();
        assert_eq!(
            names,
            vec![
                "src:10.0.0.1",
                "src:10.0.0.2",
                "tin:best-effort",
                "tin:voice"
            ]
        );
        assert_eq!(g[0].flows, vec!["many.1", "many.2"]);
        let htb = text.replace(
            r#"qdisc = { type = "cake", bandwidth = "20mbit", diffserv = "diffserv4" }"#,
            r#"qdisc = "sfq""#,
        );
        let sc = Scenario::parse(&htb, "t.toml").expect("valid scenario");
        assert!(of_scenario(&sc).is_empty());
        // Flow groups: one per entry but the ping, `count` copies together.
        let fg = flow_groups(&sc);
        let names: Vec<&str> = fg.iter().map(|g| g.name.as_str()).collect();
        assert_eq!(names, vec!["many", "voice"]);
        assert_eq!(fg[0].flows, vec!["many.1", "many.2"]);
        assert_eq!(fg[1].flows, vec!["voice"]);
    }
}
