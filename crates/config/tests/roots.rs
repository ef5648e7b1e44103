//! A policy whose root is a single discipline (`qdisc = "bfifo"` or a table with its parameters),
//! and the generic checks every discipline's parameter table gets.

use linkshare_config::{LeafKind, Policy, QdiscKind, Severity};
use linkshare_core::PacketMeta;

fn errors(text: &str) -> Vec<(usize, usize, String, String)> {
    match Policy::parse(text, "p.toml") {
        Ok(_) => panic!("accepted:\n{text}"),
        Err(e) => e
            .diagnostics
            .into_iter()
            .filter(|d| d.severity == Severity::Error)
            .map(|d| (d.line, d.col, d.message, d.help.unwrap_or_default()))
            .collect(),
    }
}

#[test]
fn a_leaf_as_the_root() {
    let p = Policy::parse("qdisc = \"pfifo\"\n", "p.toml").unwrap();
    assert_eq!(p.kind(), QdiscKind::Leaf);
    assert_eq!(p.kind_name(), "pfifo");
    assert_eq!(p.root_leaf(), Some(&LeafKind::Pfifo { limit: 1000 }));
    let q = p.build::<PacketMeta>().unwrap();
    assert_eq!(q.kind(), "pfifo");

    let p = Policy::parse("qdisc = { type = \"bfifo\", limit = \"30k\" }\n", "p.toml").unwrap();
    assert_eq!(p.root_leaf(), Some(&LeafKind::Bfifo { limit: 30 * 1024 }));
    assert!(p.render_tree().starts_with("bfifo(limit 30k)"));
    let mut q = p.build::<PacketMeta>().unwrap();
    // The limit is real: 30 one-kilobyte packets fit, the 31st does not.
    let pkt = PacketMeta {
        len: 1024,
        ..Default::default()
    };
    for _ in 0..30 {
        q.enqueue(pkt, linkshare_core::Time(0)).unwrap();
    }
    assert!(q.enqueue(pkt, linkshare_core::Time(0)).is_err());
}

#[test]
fn a_classless_root_rejects_classes_filters_and_default() {
    let text = "qdisc = \"pfifo\"\ndefault = \"x\"\n[[class]]\nname = \"x\"\nrate = \"1mbit\"\n";
    let errs = errors(text);
    assert_eq!(errs.len(), 2, "{errs:?}");
    assert!(errs
        .iter()
        .any(|e| e.0 == 2 && e.2.contains("`default` does not apply")));
    assert!(errs
        .iter()
        .any(|e| e.0 == 3 && e.2.contains("`class` does not apply")));
    assert!(errs.iter().all(|e| e.3.contains("qdisc = \"htb\"")));
}

#[test]
fn parameter_tables_are_checked_key_by_key() {
    // An unknown key, with the near miss.
    let errs = errors("qdisc = { type = \"bfifo\", limt = \"30k\" }\n");
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert_eq!((errs[0].0, errs[0].1), (1, 27));
    assert!(errs[0].2.contains("unknown key `limt`"), "{errs:?}");
    assert!(errs[0].3.contains("did you mean `limit`"), "{errs:?}");
    // A wrong type.
    let errs = errors("qdisc = { type = \"pfifo\", limit = \"many\" }\n");
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert!(errs[0].2.contains("`limit`"), "{errs:?}");
    // Out of range.
    let errs = errors("qdisc = { type = \"pfifo\", limit = 0 }\n");
    assert!(errs[0].2.contains("0 is out of range"), "{errs:?}");
    // No type.
    let errs = errors("qdisc = { limit = 5 }\n");
    assert!(errs[0].2.contains("no `type`"), "{errs:?}");
    // Unknown root, with every known name in the help.
    let errs = errors("qdisc = \"wfq\"\n");
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert!(
        errs[0].3.contains("htb") && errs[0].3.contains("pfifo"),
        "{errs:?}"
    );
}

#[test]
fn a_root_of_the_wrong_type_is_explained_as_a_root() {
    let errs = errors("qdisc = 5\n");
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert!(
        errs[0].2.contains("expected a qdisc name or table"),
        "{errs:?}"
    );
    // The fix talks about `qdisc`, not about a class's `leaf`.
    assert!(errs[0].3.starts_with("write `qdisc = \"htb\"`"), "{errs:?}");
    assert!(!errs[0].3.contains("leaf"), "{errs:?}");
}
