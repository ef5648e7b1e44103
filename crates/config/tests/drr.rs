//! The classful DRR root (`qdisc = "drr"` with `[[class]]`): what it accepts, how it builds, and
//! one test per broken variant with its `line:col`.

use linkshare_config::{Policy, QdiscKind, Severity};
use linkshare_core::{Dequeued, PacketMeta, Time};

const GOOD: &str = r#"qdisc = "drr"
default = "bulk"

[[class]]
name = "voice"
quantum = 3028
leaf = "pfifo"

[[class]]
name = "bulk"
quantum = "1514"
leaf = { type = "sfq", limit = 64 }

[[filter]]
class = "voice"
dscp = 46
"#;

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

fn one_error(text: &str) -> (usize, usize, String, String) {
    let e = errors(text);
    assert_eq!(e.len(), 1, "{e:?}");
    e.into_iter().next().unwrap()
}

#[test]
fn classful_drr_builds_and_shares_by_quantum() {
    let p = Policy::parse(GOOD, "p.toml").unwrap();
    assert_eq!(p.kind(), QdiscKind::Drr);
    assert_eq!(p.kind_name(), "drr");
    assert_eq!(p.classes().len(), 2);
    assert_eq!(p.classes()[0].quantum, 3028);
    assert_eq!(p.classes()[1].quantum, 1514);
    assert_eq!(p.classes()[1].leaf.name(), "sfq");
    let tree = p.render_tree();
    assert!(tree.starts_with("drr  default=bulk"), "{tree}");
    assert!(tree.contains("quantum 3028"), "{tree}");
    let mut q = p.build::<PacketMeta>().unwrap();
    assert_eq!(q.kind(), "drr");
    // Both classes backlogged with 1514-byte packets: voice (EF) gets two packets per round,
    // bulk one.
    for i in 0..40u32 {
        let voice = PacketMeta {
            len: 1514,
            tos: 46 << 2,
            flow_hash: i,
            ..Default::default()
        };
        let bulk = PacketMeta {
            len: 1514,
            flow_hash: 1000 + i,
            ..Default::default()
        };
        q.enqueue(voice, Time(0)).unwrap();
        q.enqueue(bulk, Time(0)).unwrap();
    }
    let (mut v, mut b) = (0, 0);
    for _ in 0..30 {
        match q.dequeue(Time(0)) {
            Dequeued::Packet(p) if p.tos == 46 << 2 => v += 1,
            Dequeued::Packet(_) => b += 1,
            other => panic!("{other:?}"),
        }
    }
    assert_eq!((v, b), (20, 10));
    q.stats().check_conservation().unwrap();
    let mut seen = Vec::new();
    q.visit_classes(&mut |c| seen.push(c.name.to_string()));
    assert_eq!(seen, vec!["voice", "bulk"]);
}

#[test]
fn default_quantum_is_one_frame_of_the_mtu() {
    let p = Policy::parse(
        "qdisc = \"drr\"\ndefault = \"a\"\nmtu = 9000\n[[class]]\nname = \"a\"\n",
        "p.toml",
    )
    .unwrap();
    assert_eq!(p.classes()[0].quantum, 9014);
    assert_eq!(p.classes()[0].leaf.name(), "pfifo");
}

#[test]
fn drr_without_classes_is_still_the_flow_hash_leaf() {
    let p = Policy::parse("qdisc = \"drr\"\n", "p.toml").unwrap();
    assert_eq!(p.kind(), QdiscKind::Leaf);
    assert_eq!(p.kind_name(), "drr");
}

#[test]
fn rate_in_a_drr_class() {
    let e =
        one_error("qdisc = \"drr\"\ndefault = \"a\"\n[[class]]\nname = \"a\"\nrate = \"1mbit\"\n");
    assert_eq!((e.0, e.1), (5, 1));
    assert!(e.2.contains("`rate` does not apply"), "{e:?}");
    assert!(e.3.contains("quantum"), "{e:?}");
}

#[test]
fn parent_in_a_drr_class() {
    let e = errors(
        "qdisc = \"drr\"\ndefault = \"a\"\n[[class]]\nname = \"a\"\n[[class]]\nname = \"b\"\nparent = \"a\"\n",
    );
    assert_eq!(e.len(), 1, "{e:?}");
    assert_eq!((e[0].0, e[0].1), (7, 1));
    assert!(e[0].2.contains("`parent` does not apply"), "{e:?}");
}

#[test]
fn quantum_out_of_range() {
    let e = one_error("qdisc = \"drr\"\ndefault = \"a\"\n[[class]]\nname = \"a\"\nquantum = 10\n");
    assert_eq!((e.0, e.1), (5, 11));
    assert!(
        e.2.contains("quantum") && e.2.contains("out of range"),
        "{e:?}"
    );
    assert!(e.3.contains("1514"), "{e:?}");
}

#[test]
fn quantum_not_a_size() {
    let e = one_error(
        "qdisc = \"drr\"\ndefault = \"a\"\n[[class]]\nname = \"a\"\nquantum = \"lots\"\n",
    );
    assert_eq!((e.0, e.1), (5, 11));
    assert!(e.2.contains("quantum"), "{e:?}");
}

#[test]
fn misspelt_class_key() {
    let e = one_error("qdisc = \"drr\"\ndefault = \"a\"\n[[class]]\nname = \"a\"\nquantm = 1514\n");
    assert_eq!((e.0, e.1), (5, 1));
    assert!(e.2.contains("unknown key `quantm`"), "{e:?}");
    assert!(e.3.contains("did you mean `quantum`"), "{e:?}");
}

#[test]
fn bad_leaf() {
    let e =
        one_error("qdisc = \"drr\"\ndefault = \"a\"\n[[class]]\nname = \"a\"\nleaf = \"sqf\"\n");
    assert_eq!((e.0, e.1), (5, 8));
    assert!(e.3.contains("did you mean \"sfq\""), "{e:?}");
    let e = one_error(
        "qdisc = \"drr\"\ndefault = \"a\"\n[[class]]\nname = \"a\"\nleaf = { type = \"sfq\", depth = 0 }\n",
    );
    assert_eq!(e.0, 5);
    assert!(e.2.contains("depth"), "{e:?}");
}

#[test]
fn filter_to_unknown_class() {
    let e = one_error(
        "qdisc = \"drr\"\ndefault = \"a\"\n[[class]]\nname = \"a\"\n[[filter]]\nclass = \"b\"\ndscp = 46\n",
    );
    assert_eq!((e.0, e.1), (6, 9));
    assert!(e.2.contains("class `b` does not exist"), "{e:?}");
    assert!(e.3.contains("defined classes: a"), "{e:?}");
}

#[test]
fn unknown_and_missing_default() {
    let e = one_error("qdisc = \"drr\"\ndefault = \"aa\"\n[[class]]\nname = \"a\"\n");
    assert_eq!((e.0, e.1), (2, 11));
    assert!(e.3.contains("did you mean \"a\""), "{e:?}");
    let e = one_error("qdisc = \"drr\"\n[[class]]\nname = \"a\"\n");
    assert!(e.2.contains("no `default`"), "{e:?}");
}

#[test]
fn duplicate_class() {
    let e = one_error(
        "qdisc = \"drr\"\ndefault = \"a\"\n[[class]]\nname = \"a\"\n[[class]]\nname = \"a\"\n",
    );
    assert_eq!((e.0, e.1), (6, 8));
    assert!(e.2.contains("defined twice"), "{e:?}");
    assert!(e.3.contains("line 3"), "{e:?}");
}

#[test]
fn options_table_with_classes() {
    let e = one_error(
        "qdisc = { type = \"drr\", flows = 16 }\ndefault = \"a\"\n[[class]]\nname = \"a\"\n",
    );
    assert_eq!((e.0, e.1), (1, 9));
    assert!(e.2.contains("classful drr takes no options"), "{e:?}");
}

#[test]
fn htb_and_cbq_top_keys() {
    let e = one_error("qdisc = \"drr\"\nr2q = 10\ndefault = \"a\"\n[[class]]\nname = \"a\"\n");
    assert_eq!((e.0, e.1), (2, 1));
    assert!(e.2.contains("`r2q` does not apply"), "{e:?}");
    let e =
        one_error("qdisc = \"drr\"\nefficient = true\ndefault = \"a\"\n[[class]]\nname = \"a\"\n");
    assert_eq!(e.0, 2);
}

#[test]
fn nameless_class() {
    let e = one_error(
        "qdisc = \"drr\"\ndefault = \"a\"\n[[class]]\nname = \"a\"\n[[class]]\nquantum = 1514\n",
    );
    assert_eq!(e.0, 5);
    assert!(e.2.contains("class #2 has no `name`"), "{e:?}");
}
