//! The class tree: rates over a parent's capacity, ceil against rate and the parent's ceil,
//! unknown and cyclic parents, the default class, duplicate names, depth, several roots.

use super::{edit, errors, one_error, pos, EXAMPLE};
use linkshare_config::Policy;
use linkshare_core::PacketMeta;

#[test]
fn children_rates_above_parent() {
    let text = edit(EXAMPLE, "rate = \"8mbit\"", "rate = \"9mbit\"");
    one_error(
        &text,
        "\"10mbit\"\n\n[[class]]\nname = \"interactive\"",
        &[
            "root",
            "impossible capacity",
            "11mbit",
            "interactive 2mbit",
            "bulk 9mbit",
            "10mbit",
        ],
        &[
            "lower the children's rates by 1mbit",
            "raise `root`'s rate to at least 11mbit",
        ],
    );
}

/// A parent of thousands of children over capacity gets a readable line: the largest children
/// by name and what the others add up to (it listed all 10,000 terms, 110 kB, before).
#[test]
fn capacity_error_over_many_children_names_the_largest_and_sums_the_rest() {
    let mut text = String::from(
        "qdisc = \"htb\"\ndefault = \"c0\"\n[[class]]\nname = \"root\"\nrate = \"10mbit\"\n",
    );
    for i in 0..10_000 {
        let rate = if i == 4321 { "6mbit" } else { "1kbit" };
        text.push_str(&format!(
            "[[class]]\nname = \"c{i}\"\nparent = \"root\"\nrate = \"{rate}\"\n"
        ));
    }
    let Err(e) = Policy::parse(&text, "many.toml") else {
        panic!("16 Mbit/s of guarantees under 10 Mbit/s was accepted");
    };
    let err = e.errors().next().expect("an error");
    assert!(
        err.message.contains("impossible capacity"),
        "{}",
        err.message
    );
    assert!(err.message.starts_with("class `root`"), "{}", err.message);
    assert!(
        err.message.contains("c4321 6mbit + c0 1kbit"),
        "{}",
        err.message
    );
    assert!(
        err.message
            .contains("9994 other children adding up to 9.994mbit"),
        "{}",
        err.message
    );
    assert!(
        err.message.len() < 300,
        "{} bytes: {}",
        err.message.len(),
        err.message
    );
}

#[test]
fn ceil_below_rate() {
    let text = edit(
        EXAMPLE,
        "rate = \"2mbit\"\nceil = \"10mbit\"",
        "rate = \"2mbit\"\nceil = \"1mbit\"",
    );
    let d = one_error(
        &text,
        "\"1mbit\"",
        &["class `interactive`", "ceil 1mbit is below rate 2mbit"],
        &["raise ceil to at least 2mbit"],
    );
    assert_eq!((d.line, d.col), (12, 8));
    assert_eq!(
        d.to_string(),
        "policy.toml:12:8: error: class `interactive`: ceil 1mbit is below rate 2mbit\n  help: raise ceil to at least 2mbit or lower rate"
    );
}

#[test]
fn unknown_parent() {
    let text = edit(
        EXAMPLE,
        "name = \"bulk\"\nparent = \"root\"",
        "name = \"bulk\"\nparent = \"rot\"",
    );
    one_error(
        &text,
        "\"rot\"",
        &["class `bulk`", "unknown parent `rot`"],
        &["did you mean \"root\"", "remove `parent`"],
    );
}

#[test]
fn cyclic_parent() {
    let text = edit(
        EXAMPLE,
        "name = \"root\"\n",
        "name = \"root\"\nparent = \"bulk\"\n",
    );
    one_error(
        &text,
        "\"bulk\"\nrate = \"10mbit\"",
        &["root -> bulk -> root", "loops"],
        &["own ancestor", "another parent"],
    );
}

#[test]
fn class_its_own_parent() {
    let text = edit(
        EXAMPLE,
        "name = \"root\"\n",
        "name = \"root\"\nparent = \"root\"\n",
    );
    one_error(
        &text,
        "\"root\"\nrate = \"10mbit\"",
        &["`root` is its own parent"],
        &["remove `parent`"],
    );
}

#[test]
fn default_class_missing() {
    let text = edit(EXAMPLE, "default = \"bulk\"", "default = \"bulkk\"");
    one_error(
        &text,
        "\"bulkk\"",
        &["default class `bulkk` does not exist"],
        &["did you mean \"bulk\""],
    );
    let text = edit(EXAMPLE, "default = \"bulk\"", "default = \"root\"");
    one_error(
        &text,
        "\"root\"  ",
        &["default class `root`", "not a leaf"],
        &["interactive, bulk"],
    );
    let text = edit(
        EXAMPLE,
        "default = \"bulk\"         # class for packets no filter matches\n",
        "",
    );
    one_error(&text, "qdisc = ", &["no `default`"], &["default = "]);
}

#[test]
fn duplicate_class_names() {
    let text = edit(EXAMPLE, "name = \"bulk\"", "name = \"interactive\"");
    let errs = errors(&text);
    assert!(
        errs.iter()
            .any(|d| d.message.contains("`interactive` is defined twice")
                && (d.line, d.col) == (17, 8)
                && d.help.as_deref().unwrap().contains("line 9")),
        "{errs:#?}"
    );
    // Lists of defined classes name each class once.
    let text = edit(&text, "default = \"bulk\"", "default = \"bulky\"");
    let d = errors(&text)
        .into_iter()
        .find(|d| d.message.contains("`bulky` does not exist"))
        .expect("default error");
    assert!(
        d.help
            .as_deref()
            .unwrap()
            .ends_with("defined classes: root, interactive"),
        "{d}"
    );
}

#[test]
fn tree_deeper_than_eight_levels() {
    let mut text = String::from("qdisc = \"htb\"\ndefault = \"c8\"\n");
    for i in 0..9 {
        text.push_str(&format!("[[class]]\nname = \"c{i}\"\n"));
        if i > 0 {
            text.push_str(&format!("parent = \"c{}\"\n", i - 1));
        }
        text.push_str("rate = \"1mbit\"\n");
    }
    // c8 is the ninth level.
    one_error(
        &text,
        "\"c7\"\nrate",
        &["class `c8`", "level 9", "at most 8"],
        &["higher up"],
    );
    // Eight levels are fine.
    let text8 = text.replace("default = \"c8\"", "default = \"c7\"");
    let cut = text8.find("[[class]]\nname = \"c8\"").unwrap();
    let p = Policy::parse(&text8[..cut], "x").unwrap();
    assert_eq!(p.classes()[7].depth, 7);
    assert!(p.build::<PacketMeta>().is_ok());
}

#[test]
fn ceil_above_parent_ceil_warns() {
    let text = edit(
        EXAMPLE,
        "rate = \"2mbit\"\nceil = \"10mbit\"",
        "rate = \"2mbit\"\nceil = \"20mbit\"",
    );
    let p = Policy::parse(&text, "policy.toml").unwrap();
    assert_eq!(p.warnings().len(), 1);
    let w = &p.warnings()[0];
    assert_eq!((w.line, w.col), pos(&text, "\"20mbit\""));
    assert!(
        w.message.contains("above its parent `root`'s ceil 10mbit"),
        "{w}"
    );
    assert!(
        w.help.as_deref().unwrap().contains("lower ceil to 10mbit"),
        "{w}"
    );
}

#[test]
fn several_roots_warn() {
    let text = edit(
        EXAMPLE,
        "name = \"bulk\"\nparent = \"root\"\n",
        "name = \"bulk\"\n",
    );
    let p = Policy::parse(&text, "policy.toml").unwrap();
    assert!(
        p.warnings()
            .iter()
            .any(|w| w.message.contains("no parent") && w.message.contains("`bulk`")),
        "{:?}",
        p.warnings()
    );
}
