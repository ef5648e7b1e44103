//! Policy files: the contract example is accepted and builds; each broken variant gives a precise
//! error at the offending value, with a message and a help line that say how to fix it.
//!
//! One test binary, `policy`: this file holds the contract example and the helpers the topic
//! modules share.

use linkshare_config::{Diagnostic, Policy, Severity};

mod example;
mod filters;
mod params;
mod syntax;
mod tree;

/// The example from the issue, exactly as written there.
const EXAMPLE: &str = r#"qdisc = "htb"            # root scheduler
default = "bulk"         # class for packets no filter matches

[[class]]
name = "root"
rate = "10mbit"

[[class]]
name = "interactive"
parent = "root"
rate = "2mbit"
ceil = "10mbit"
prio = 0
leaf = "pfifo"           # leaf qdisc by name with defaults ...

[[class]]
name = "bulk"
parent = "root"
rate = "8mbit"
ceil = "10mbit"
burst = "15k"
cburst = "3k"
prio = 1
[class.leaf]             # ... or as a table with parameters
type = "pfifo"
limit = 1000

[[filter]]
class = "interactive"
dscp = "ef"

[[filter]]
class = "interactive"
protocol = "udp"
dst = "10.0.0.0/8"
dst_port = "5000-5010"
"#;

/// 1-based line and column of the only occurrence of `needle` in `text`.
fn pos(text: &str, needle: &str) -> (usize, usize) {
    assert_eq!(
        text.matches(needle).count(),
        1,
        "`{needle}` must occur exactly once"
    );
    let off = text.find(needle).unwrap();
    let before = &text[..off];
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().unwrap().chars().count() + 1;
    (line, col)
}

/// `text` with the only occurrence of `from` replaced.
fn edit(text: &str, from: &str, to: &str) -> String {
    assert_eq!(
        text.matches(from).count(),
        1,
        "`{from}` must occur exactly once"
    );
    text.replacen(from, to, 1)
}

fn errors(text: &str) -> Vec<Diagnostic> {
    match Policy::parse(text, "policy.toml") {
        Ok(_) => panic!("policy was accepted:\n{text}"),
        Err(e) => e
            .diagnostics
            .into_iter()
            .filter(|d| d.severity == Severity::Error)
            .collect(),
    }
}

/// The policy has exactly one error; it is at `needle` and mentions every word in `msg` and `help`.
#[track_caller]
fn one_error(text: &str, needle: &str, msg: &[&str], help: &[&str]) -> Diagnostic {
    let errs = errors(text);
    assert_eq!(errs.len(), 1, "expected one error, got: {errs:#?}");
    let d = errs.into_iter().next().unwrap();
    assert_eq!((d.line, d.col), pos(text, needle), "{d}");
    assert_eq!(d.file, "policy.toml");
    for m in msg {
        assert!(d.message.contains(m), "message lacks `{m}`: {d}");
    }
    let h = d.help.clone().expect("a help line");
    for m in help {
        assert!(h.contains(m), "help lacks `{m}`: {d}");
    }
    d
}
