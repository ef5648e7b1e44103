//! The control protocol on the running shaper: versions and capabilities, an old client's
//! request refused, class parents in `stat --json`, `stat`'s and `stat --tc`'s text, and
//! `--json` replies of `class change` and `reload`.

use std::io::Write;
use std::time::Duration;

use serde_json::Value;

use crate::helpers::{class, Lab};

/// The typed control protocol on the running shaper: `stat --capabilities` reports protocol 1
/// and its requests; an unversioned request of the old untyped protocol gets a version error
/// and the shaper keeps answering; a tree declared breadth-first reads back with the right
/// parents, in `stat --json` and in the human form's indentation.
#[test]
fn control_protocol_versions_capabilities_and_parents_on_the_running_shaper() {
    let Some(mut lab) = Lab::new() else { return };
    let p = lab.write_policy(
        "tree.toml",
        "qdisc = \"htb\"\ndefault = \"a1\"\n\
         [[class]]\nname = \"root\"\nrate = \"10mbit\"\n\
         [[class]]\nname = \"A\"\nparent = \"root\"\nrate = \"5mbit\"\n\
         [[class]]\nname = \"B\"\nparent = \"root\"\nrate = \"5mbit\"\n\
         [[class]]\nname = \"a1\"\nparent = \"A\"\nrate = \"5mbit\"\n\
         [[class]]\nname = \"b1\"\nparent = \"B\"\nrate = \"5mbit\"\n",
    );
    lab.start(&p);
    let (code, out, err) = lab.cli(&["stat", "--capabilities", "--json"]);
    assert_eq!(code, 0, "{err}");
    let hello: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(hello["version"], 1, "{hello}");
    assert!(
        hello["requests"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r == "reload"),
        "{hello}"
    );
    // An old client's request.
    let mut s = std::os::unix::net::UnixStream::connect(lab.control()).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(b"{\"cmd\":\"stat\"}\n").unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(&mut std::io::BufReader::new(&s), &mut line).unwrap();
    let r: Value = serde_json::from_str(&line).unwrap();
    assert_eq!(r["reply"], "error", "{r}");
    assert_eq!(r["kind"], "unsupported_version", "{r}");
    drop(s);
    let st = lab.stat();
    for (name, parent) in [
        ("root", None),
        ("A", Some("root")),
        ("B", Some("root")),
        ("a1", Some("A")),
        ("b1", Some("B")),
    ] {
        let c = class(&st, name);
        assert_eq!(c["parent"].as_str(), parent, "parent of {name}: {st}");
    }
    let (code, out, err) = lab.cli(&["stat"]);
    assert_eq!(code, 0, "{err}");
    let indent = |name: &str| {
        out.lines()
            .find(|l| l.trim_start().starts_with(&format!("class {name} ")))
            .map(|l| l.len() - l.trim_start().len())
            .unwrap_or_else(|| panic!("no class {name} in:\n{out}"))
    };
    assert_eq!(
        [indent("root"), indent("B"), indent("b1")],
        [2, 4, 6],
        "{out}"
    );
    // tc's vocabulary: handles as export tc writes them, rates in tc's units (issue 15 §5).
    assert!(
        out.contains("class b1 (1:5) rate 5Mbit ceil 5Mbit"),
        "{out}"
    );
    let (code, out, err) = lab.cli(&["stat", "--tc"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("class htb 1:5 parent 1:3 leaf 6: prio 0 rate 5Mbit ceil 5Mbit  # b1"),
        "{out}"
    );
    // --json on the commands that change the shaper (issue 15 §4): one object, the typed reply.
    let (code, out, err) = lab.cli(&["class", "change", "b1", "--ceil", "10mbit", "--json"]);
    assert_eq!(code, 0, "{err}");
    let r: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    assert_eq!(r["reply"], "reloaded", "{r}");
    // A new ceil is applied in place: one class of the five changed, four kept as they were.
    assert_eq!(r["in_place"], true, "{r}");
    assert_eq!(r["changed"], serde_json::json!(["b1"]), "{r}");
    assert_eq!(r["kept"], 4, "{r}");
    assert_eq!(r["written"], Value::Null, "{r}");
    let bad = lab.write_policy("bad.toml", "qdisc = \"htb\"\n");
    let (code, out, _) = lab.cli(&["reload", bad.to_str().unwrap_or_default(), "--json"]);
    assert_eq!(code, 1, "{out}");
    let r: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    assert_eq!(
        (r["reply"].as_str(), r["kind"].as_str()),
        (Some("error"), Some("policy_rejected")),
        "{r}"
    );
}
