//! The contract example: accepted without warnings, built into an HTB, equal to the shipped
//! `policies/example.toml`, and drawn as a tree.

use super::EXAMPLE;
use linkshare_config::{LeafKind, Policy};
use linkshare_core::units::Rate;
use linkshare_core::PacketMeta;

#[test]
fn contract_example_is_accepted_and_builds() {
    let p = Policy::parse(EXAMPLE, "example.toml").unwrap();
    assert!(p.warnings().is_empty(), "{:?}", p.warnings());
    assert_eq!(p.default_class(), "bulk");
    let names: Vec<&str> = p.classes().iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["root", "interactive", "bulk"]);
    let root = &p.classes()[0];
    assert_eq!(
        (root.rate, root.ceil, root.is_leaf, root.parent_id),
        (Rate::mbit(10), Rate::mbit(10), false, None)
    );
    let inter = &p.classes()[1];
    assert_eq!(inter.parent.as_deref(), Some("root"));
    assert_eq!(inter.parent_id, Some(0));
    assert_eq!(
        (inter.rate, inter.ceil, inter.prio),
        (Rate::mbit(2), Rate::mbit(10), 0)
    );
    assert_eq!(inter.leaf, LeafKind::Pfifo { limit: 1000 });
    let bulk = &p.classes()[2];
    assert_eq!(
        (bulk.burst, bulk.cburst, bulk.prio),
        (15 * 1024, 3 * 1024, 1)
    );
    assert!(bulk.is_leaf);
    assert_eq!(root.children, vec![1, 2]);

    let f = p.filters();
    assert_eq!(f.len(), 2);
    assert_eq!(f[0].spec.dscp, Some(vec![46]));
    assert_eq!(f[0].spec.class, 1);
    assert_eq!(f[1].spec.protocol, Some(17));
    assert_eq!(f[1].spec.dst_port, Some((5000, 5010)));
    assert_eq!(
        f[1].spec.dst.map(|d| (d.addr.to_string(), d.len)),
        Some(("10.0.0.0".to_string(), 8))
    );

    let q = p.build::<PacketMeta>().unwrap();
    assert_eq!(q.kind(), "htb");
    let htb = p.build_htb::<PacketMeta>().unwrap();
    assert_eq!(htb.class_id("bulk"), Some(2));
    assert_eq!(htb.class_id("interactive"), p.class_id("interactive"));
}

#[test]
fn shipped_example_policy_is_accepted() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../policies/example.toml");
    let p = Policy::load(std::path::Path::new(path)).unwrap();
    assert!(p.warnings().is_empty());
    let contract = Policy::parse(EXAMPLE, "x").unwrap();
    assert_eq!(
        p.classes()
            .iter()
            .map(|c| (&c.name, c.rate, c.ceil, c.burst))
            .collect::<Vec<_>>(),
        contract
            .classes()
            .iter()
            .map(|c| (&c.name, c.rate, c.ceil, c.burst))
            .collect::<Vec<_>>()
    );
    let specs = |p: &Policy| {
        p.filters()
            .iter()
            .map(|f| f.spec.clone())
            .collect::<Vec<_>>()
    };
    assert_eq!(specs(&p), specs(&contract));
}

#[test]
fn tree_shows_classes_rates_and_filters() {
    let p = Policy::parse(EXAMPLE, "example.toml").unwrap();
    let t = p.render_tree();
    let lines: Vec<&str> = t.lines().collect();
    assert!(
        lines[0].starts_with("htb") && lines[0].contains("default=bulk"),
        "{t}"
    );
    assert!(
        lines[1].starts_with("root") && lines[1].contains("rate 10mbit"),
        "{t}"
    );
    assert!(
        lines[2].starts_with("├─ interactive") && lines[2].contains("ceil 10mbit"),
        "{t}"
    );
    assert!(
        lines[3].starts_with("└─ bulk")
            && lines[3].contains("burst 15k")
            && lines[3].contains("cburst 3k"),
        "{t}"
    );
    // Columns are aligned: `rate` starts at the same column on every class line.
    let col = |l: &str| {
        l.chars()
            .collect::<String>()
            .find("rate")
            .map(|b| l[..b].chars().count())
    };
    assert_eq!(col(lines[1]), col(lines[2]));
    assert_eq!(col(lines[2]), col(lines[3]));
    assert!(
        t.contains("dscp ef") && t.contains("udp dst 10.0.0.0/8 dport 5000-5010"),
        "{t}"
    );
}
