//! Policy files: the contract example is accepted and builds; each broken variant gives a precise
//! error at the offending value, with a message and a help line that say how to fix it.

use linkshare_config::{ConfigError, Diagnostic, LeafKind, Policy, PolicyDoc, Severity};
use linkshare_core::htb::{default_burst, default_quantum};
use linkshare_core::units::Rate;
use linkshare_core::PacketMeta;

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

// ---- one test per broken variant from the issue ----

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

/// Issue 13: a quantum above 2^31 passed `check` and overflowed HTB's deficit; a burst above what
/// a bucket holds was silently cut. Each is an error at the value that names the limit.
#[test]
fn quantum_and_burst_above_their_limits() {
    use linkshare_core::htb::{BURST_LIMIT, QUANTUM_LIMIT};
    use linkshare_core::units::Size;
    let q_max = Size(QUANTUM_LIMIT as u64).to_string();
    let b_max = Size(BURST_LIMIT as u64).to_string();
    for q in ["\"2g\"", "\"3g\"", "2147483649", "\"17m\""] {
        let text = edit(EXAMPLE, "prio = 1\n", &format!("prio = 1\nquantum = {q}\n"));
        one_error(
            &text,
            q,
            &["class `bulk`", "quantum", "too large"],
            &[&format!("at most {q_max}")],
        );
    }
    // The limit itself is accepted.
    let text = edit(
        EXAMPLE,
        "prio = 1\n",
        &format!("prio = 1\nquantum = \"{q_max}\"\n"),
    );
    assert!(Policy::parse(&text, "policy.toml").is_ok());
    for (key, from) in [("burst", "burst = \"15k\""), ("cburst", "cburst = \"3k\"")] {
        for v in ["\"300m\"", "\"1g\"", "\"257m\""] {
            let text = edit(EXAMPLE, from, &format!("{key} = {v}"));
            one_error(
                &text,
                v,
                &["class `bulk`", &format!("{key} "), "too large"],
                &[&format!("at most {b_max}")],
            );
        }
        let text = edit(EXAMPLE, from, &format!("{key} = \"{b_max}\""));
        assert!(
            Policy::parse(&text, "policy.toml").is_ok(),
            "{key} = {b_max}"
        );
    }
}

#[test]
fn burst_smaller_than_mtu() {
    let text = edit(EXAMPLE, "burst = \"15k\"", "burst = \"1k\"");
    one_error(
        &text,
        "\"1k\"",
        &[
            "class `bulk`",
            "burst 1k",
            "smaller than one MTU (1500 bytes)",
        ],
        &["at least \"1500b\"", "leave it out"],
    );
    // The MTU is the policy's own.
    let text = edit(
        EXAMPLE,
        "default = \"bulk\"",
        "default = \"bulk\"\nmtu = 9000",
    );
    // burst 15k (15360 bytes) still holds a 9000-byte frame; cburst 3k does not.
    one_error(
        &text,
        "\"3k\"",
        &[
            "class `bulk`",
            "cburst 3k",
            "smaller than one MTU (9000 bytes)",
        ],
        &["at least \"9000b\""],
    );
}

#[test]
fn unknown_dscp_name() {
    let text = edit(EXAMPLE, "dscp = \"ef\"", "dscp = \"expedited\"");
    one_error(
        &text,
        "\"expedited\"",
        &["filter #1", "unknown DSCP name \"expedited\""],
        &[linkshare_core::dscp::KNOWN_NAMES],
    );
    let text = edit(EXAMPLE, "dscp = \"ef\"", "dscp = [\"cs5\", \"af44\"]");
    one_error(
        &text,
        "\"af44\"",
        &["unknown DSCP name \"af44\""],
        &["af11..af43"],
    );
    // The fuzzer's findings (issue 13): a multi-byte character and non-digit suffixes are
    // located errors, not a panic of `check` or of a shaper reloading the file.
    for bad in ["cé", "cs#", "af1#"] {
        let text = edit(EXAMPLE, "dscp = \"ef\"", &format!("dscp = \"{bad}\""));
        one_error(
            &text,
            &format!("\"{bad}\""),
            &[&format!("unknown DSCP name \"{bad}\"")],
            &["af11..af43"],
        );
    }
}

#[test]
fn filter_to_non_leaf() {
    let text = edit(
        EXAMPLE,
        "class = \"interactive\"\ndscp",
        "class = \"root\"\ndscp",
    );
    one_error(
        &text,
        "\"root\"\ndscp",
        &["filter #1", "`root`", "not a leaf"],
        &["interactive", "bulk"],
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
fn unit_typo() {
    let text = edit(EXAMPLE, "rate = \"10mbit\"", "rate = \"10mbitt\"");
    one_error(
        &text,
        "\"10mbitt\"",
        &["class `root`", "unknown rate unit `mbitt`"],
        &["did you mean \"10mbit\"", "kbit"],
    );
    let text = edit(EXAMPLE, "rate = \"8mbit\"", "rate = \"8mbits\"");
    one_error(
        &text,
        "\"8mbits\"",
        &["class `bulk`", "\"8mbits\""],
        &["did you mean \"8mbit\""],
    );
    let text = edit(EXAMPLE, "cburst = \"3k\"", "cburst = \"3kib\"");
    one_error(
        &text,
        "\"3kib\"",
        &["cburst", "unknown size unit"],
        &["k/kb"],
    );
}

/// No unit hint changes the magnitude the user meant (issue 13: `8Mbs` was answered with
/// `8mbps`, tc's megabytes per second, eight times the megabits meant). `b` is a bit and `B` a
/// byte, as in networking; tc's `bps` family is bytes; a `bit` is a bit.
#[test]
fn unit_hints_keep_the_magnitude() {
    let rates = [
        ("8Mbs", Some("8mbit")),
        ("8mbs", Some("8mbit")),
        ("8Mb/s", Some("8mbit")),
        ("5kbs", Some("5kbit")),
        ("1Gbs", Some("1gbit")),
        ("1tbs", Some("1tbit")),
        ("10mbitt", Some("10mbit")),
        ("10 mbits", Some("10mbit")),
        ("4mibits", Some("4mibit")),
        ("8MBs", Some("8mbps")),
        ("8MB/s", Some("8mbps")),
        ("2mbyte", Some("2mbps")),
        ("3kbpss", Some("3kbps")),
        ("7mibyte", Some("7mibps")),
        ("10zz", None),
    ];
    for (typo, hint) in rates {
        let text = edit(EXAMPLE, "rate = \"8mbit\"", &format!("rate = \"{typo}\""));
        let errs = errors(&text);
        assert_eq!(errs.len(), 1, "{typo}: {errs:#?}");
        let help = errs[0].help.clone().unwrap_or_default();
        match hint {
            Some(h) => assert!(
                help.starts_with(&format!("did you mean \"{h}\"?")),
                "{typo}: {help}"
            ),
            None => assert!(!help.contains("did you mean"), "{typo}: {help}"),
        }
    }
    let sizes = [
        ("15kk", Some("15k")),
        ("2mbb", Some("2mb")),
        ("64kbitt", Some("64kbit")),
        ("1gg", Some("1g")),
    ];
    for (typo, hint) in sizes {
        let text = edit(EXAMPLE, "cburst = \"3k\"", &format!("cburst = \"{typo}\""));
        let errs = errors(&text);
        let help = errs[0].help.clone().unwrap_or_default();
        match hint {
            Some(h) => assert!(
                help.starts_with(&format!("did you mean \"{h}\"?")),
                "{typo}: {help}"
            ),
            None => assert!(!help.contains("did you mean"), "{typo}: {help}"),
        }
    }
}

// ---- more checks ----

#[test]
fn unknown_key_suggests_the_near_miss() {
    let text = edit(EXAMPLE, "rate = \"2mbit\"\nceil", "rate = \"2mbit\"\nciel");
    one_error(
        &text,
        "ciel",
        &["class `interactive`", "unknown key `ciel`"],
        &["did you mean `ceil`"],
    );
    let text = edit(EXAMPLE, "dst_port", "dport");
    one_error(
        &text,
        "dport",
        &["filter #2", "unknown key `dport`"],
        &["did you mean `dst_port`"],
    );
    let text = edit(EXAMPLE, "qdisc = \"htb\"", "qdisc = \"htb\"\nr2g = 10");
    one_error(
        &text,
        "r2g",
        &["unknown key `r2g`"],
        &["did you mean `r2q`"],
    );
    let text = edit(EXAMPLE, "limit = 1000", "limit = 1000\nlimt = 5");
    one_error(
        &text,
        "limt",
        &["unknown key `limt`"],
        &["did you mean `limit`"],
    );
}

#[test]
fn toml_syntax_error_is_located() {
    let text = edit(EXAMPLE, "rate = \"8mbit\"", "rate = 8mbit");
    let errs = errors(&text);
    assert_eq!(errs.len(), 1);
    let (line, _) = pos(&text, "rate = 8mbit");
    assert_eq!(errs[0].line, line, "{}", errs[0]);
    assert!(errs[0].col > 1 && errs[0].col <= 9, "{}", errs[0]);
    assert!(errs[0].message.contains("invalid TOML"), "{}", errs[0]);
    // An unquoted value with a unit says what to write, at the value.
    assert_eq!(errs[0].col, 8, "{}", errs[0]);
    assert_eq!(errs[0].message, "invalid TOML: `8mbit` must be quoted");
    assert_eq!(
        errs[0].help.as_deref(),
        Some("write `rate = \"8mbit\"`: a value with a unit is a string")
    );
    // Other syntax errors keep toml's own message.
    let text = edit(EXAMPLE, "name = \"bulk\"", "name = bulk");
    let errs = errors(&text);
    assert_eq!(errs.len(), 1);
    assert!(!errs[0].message.contains("must be quoted"), "{}", errs[0]);
    // Duplicate keys are syntax errors in TOML.
    let text = edit(EXAMPLE, "prio = 1", "prio = 1\nprio = 2");
    let errs = errors(&text);
    assert_eq!(errs.len(), 1);
    assert_eq!(errs[0].line, pos(&text, "prio = 2").0, "{}", errs[0]);
}

#[test]
fn all_errors_are_collected() {
    let text = EXAMPLE
        .replace("rate = \"10mbit\"", "rate = \"10mbitt\"")
        .replace("ceil = \"10mbit\"\nprio = 0", "ceil = \"1mbit\"\nprio = 9")
        .replace("dscp = \"ef\"", "dscp = \"efx\"")
        .replace("dst_port = \"5000-5010\"", "dst_port = \"5010-5000\"");
    let errs = errors(&text);
    let at: Vec<(usize, usize)> = errs.iter().map(|d| (d.line, d.col)).collect();
    assert_eq!(
        at,
        vec![
            pos(&text, "\"10mbitt\""),
            pos(&text, "\"1mbit\""),
            pos(&text, "9\n"),
            pos(&text, "\"efx\""),
            pos(&text, "\"5010-5000\"")
        ],
        "{errs:#?}"
    );
    assert!(
        errs[2].message.contains("prio") && errs[2].help.as_deref().unwrap().contains("0 to 7")
    );
    assert!(
        errs[4].message.contains("empty")
            && errs[4].help.as_deref().unwrap().contains("\"5000-5010\"")
    );
    let e = Policy::parse(&text, "policy.toml").unwrap_err();
    let shown = e.to_string();
    assert!(
        shown.contains("policy.toml:") && shown.contains("5 errors"),
        "{shown}"
    );
}

#[test]
fn mixed_case_mbps_warns_with_location() {
    let text = edit(EXAMPLE, "rate = \"10mbit\"", "rate = \"10Mbps\"");
    // 10Mbps is 80mbit as tc reads it: no capacity error, but a warning.
    let p = Policy::parse(&text, "policy.toml").unwrap();
    assert_eq!(p.classes()[0].rate, Rate::mbit(80));
    let w: Vec<&Diagnostic> = p
        .warnings()
        .iter()
        .filter(|w| w.message.contains("10Mbps"))
        .collect();
    assert_eq!(w.len(), 1, "{:?}", p.warnings());
    assert_eq!((w[0].line, w[0].col), pos(&text, "\"10Mbps\""));
    assert_eq!(w[0].severity, Severity::Warning);
    assert!(
        w[0].help.as_deref().unwrap().contains("\"10mbit\""),
        "{}",
        w[0]
    );
}

#[test]
fn bare_integer_rate_is_bits_per_second_with_warning() {
    let text = edit(EXAMPLE, "rate = \"10mbit\"", "rate = 10000000");
    let p = Policy::parse(&text, "policy.toml").unwrap();
    assert_eq!(p.classes()[0].rate, Rate::mbit(10));
    assert_eq!(p.warnings().len(), 1);
    assert!(
        p.warnings()[0].message.contains("bits per second"),
        "{}",
        p.warnings()[0]
    );
    assert_eq!(
        (p.warnings()[0].line, p.warnings()[0].col),
        pos(&text, "10000000")
    );
}

#[test]
fn defaults_come_from_core() {
    let p = Policy::parse(EXAMPLE, "x").unwrap();
    let inter = &p.classes()[1];
    assert_eq!(inter.burst, default_burst(Rate::mbit(2), 1500));
    assert_eq!(inter.cburst, default_burst(Rate::mbit(10), 1500));
    assert_eq!(inter.quantum, default_quantum(Rate::mbit(2), 10).0);
    assert_eq!(inter.quantum, 25_000);
    assert_eq!(p.htb_params().r2q, 10);
    assert_eq!(p.htb_params().mtu, 1500);

    // A slow leaf: rate/r2q = 150 bytes is clamped to 1000 with an actionable warning.
    let text = edit(EXAMPLE, "rate = \"2mbit\"", "rate = \"12kbit\"");
    let p = Policy::parse(&text, "policy.toml").unwrap();
    assert_eq!(p.classes()[1].quantum, 1000);
    assert_eq!(p.warnings().len(), 1, "{:?}", p.warnings());
    let w = &p.warnings()[0];
    assert_eq!(
        w.message,
        "class `interactive`: quantum 150 bytes (rate/r2q) is below 1000; using 1000"
    );
    assert_eq!(w.help.as_deref(), Some("set `quantum` or lower `r2q`"));
    assert_eq!((w.line, w.col), pos(&text, "\"12kbit\""));
    // Lowering r2q silences it and changes the quantum.
    let text2 = edit(&text, "qdisc = \"htb\"", "qdisc = \"htb\"\nr2q = 1");
    let p = Policy::parse(&text2, "policy.toml").unwrap();
    assert!(
        p.warnings()
            .iter()
            .all(|w| !w.message.contains("`interactive`")),
        "{:?}",
        p.warnings()
    );
    assert_eq!(p.classes()[1].quantum, 1500);
    // An explicit quantum is taken as is.
    let text3 = edit(&text, "prio = 0", "prio = 0\nquantum = 3000");
    let p = Policy::parse(&text3, "policy.toml").unwrap();
    assert_eq!(p.classes()[1].quantum, 3000);
    assert!(p.warnings().is_empty());
}

#[test]
fn leaf_on_inner_class_is_an_error() {
    let text = edit(
        EXAMPLE,
        "name = \"root\"\nrate = \"10mbit\"\n",
        "name = \"root\"\nrate = \"10mbit\"\nleaf = \"bfifo\"\n",
    );
    one_error(
        &text,
        "\"bfifo\"",
        &["class `root` has children", "not a leaf"],
        &["remove `leaf`"],
    );
}

#[test]
fn bfifo_limit_is_a_size() {
    let text = edit(
        EXAMPLE,
        "type = \"pfifo\"\nlimit = 1000",
        "type = \"bfifo\"\nlimit = \"30k\"",
    );
    let p = Policy::parse(&text, "x").unwrap();
    assert_eq!(p.classes()[2].leaf, LeafKind::Bfifo { limit: 30 * 1024 });
    let text = edit(EXAMPLE, "type = \"pfifo\"", "type = \"sfqq\"");
    one_error(
        &text,
        "\"sfqq\"",
        &["unknown leaf qdisc \"sfqq\""],
        &["pfifo", "bfifo"],
    );
}

#[test]
fn unknown_qdisc_lists_known_ones() {
    let text = edit(EXAMPLE, "qdisc = \"htb\"", "qdisc = \"hbt\"");
    one_error(
        &text,
        "\"hbt\"",
        &["unknown qdisc \"hbt\""],
        &["did you mean \"htb\"", "known qdiscs: htb"],
    );
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
fn zero_rate_and_prio_range() {
    let text = edit(EXAMPLE, "rate = \"2mbit\"", "rate = \"0kbit\"");
    one_error(&text, "\"0kbit\"", &["rate is zero"], &["above zero"]);
    let text = edit(EXAMPLE, "prio = 1", "prio = 8");
    one_error(
        &text,
        "8\n",
        &["class `bulk`: `prio`", "8 is out of range"],
        &["0 to 7"],
    );
    let text = edit(EXAMPLE, "prio = 1", "prio = \"1\"");
    one_error(
        &text,
        "\"1\"",
        &["expected an integer"],
        &["remove the quotes"],
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

#[test]
fn filter_values() {
    let text = r#"
qdisc = "htb"
default = "a"
[[class]]
name = "a"
rate = "1mbit"
[[filter]]
class = "a"
dscp = ["ef", 10, "cs1"]
tos = "0x28/0xfc"
protocol = "tcp"
src = "2001:db8::/32"
src_port = 80
dst_port = "443"
[[filter]]
class = "a"
src = "192.0.2.1/24"
protocol = 99
"#;
    let p = Policy::parse(text, "policy.toml").unwrap();
    let f = &p.filters()[0].spec;
    assert_eq!(f.dscp, Some(vec![46, 10, 8]));
    assert_eq!(f.tos, Some((0x28, 0xfc)));
    assert_eq!(f.protocol, Some(6));
    assert_eq!(
        f.src.map(|s| (s.addr.to_string(), s.len)),
        Some(("2001:db8::".to_string(), 32))
    );
    assert_eq!((f.src_port, f.dst_port), (Some((80, 80)), Some((443, 443))));
    // Host bits are cleared, with a warning.
    let g = &p.filters()[1].spec;
    assert_eq!(
        g.src.map(|s| s.addr.to_string()),
        Some("192.0.2.0".to_string())
    );
    assert_eq!(g.protocol, Some(99));
    assert_eq!(p.warnings().len(), 1);
    assert_eq!(
        (p.warnings()[0].line, p.warnings()[0].col),
        pos(text, "\"192.0.2.1/24\"")
    );
    assert!(p.warnings()[0]
        .help
        .as_deref()
        .unwrap()
        .contains("192.0.2.0/24"));
}

#[test]
fn filter_errors() {
    let base = "qdisc = \"htb\"\ndefault = \"a\"\n[[class]]\nname = \"a\"\nrate = \"1mbit\"\n[[filter]]\nclass = \"a\"\n";
    for (line, needle, msg) in [
        (
            "dst = \"10.0.0.0/33\"",
            "\"10.0.0.0/33\"",
            "not an IP prefix",
        ),
        ("protocol = \"tpc\"", "\"tpc\"", "unknown protocol"),
        ("tos = \"0x1000\"", "\"0x1000\"", "not a byte"),
        ("dst_port = 70000", "70000", "out of range"),
        ("dscp = 64", "64", "out of range"),
    ] {
        let text = format!("{base}{line}\n");
        one_error(&text, needle, &[msg], &[]);
    }
    let text = format!("{base}protocol = \"tcp\"\n").replace("class = \"a\"\n", "class = \"b\"\n");
    one_error(
        &text,
        "\"b\"",
        &["class `b` does not exist"],
        &["defined classes: a"],
    );
}

#[test]
fn class_array_written_as_single_table() {
    let text = "qdisc = \"htb\"\ndefault = \"a\"\n[class]\nname = \"a\"\nrate = \"1mbit\"\n";
    let errs = errors(text);
    assert!(
        errs.iter()
            .any(|d| d.help.as_deref().unwrap().contains("[[class]]")),
        "{errs:#?}"
    );
}

#[test]
fn embedded_in_another_document() {
    #[derive(serde::Deserialize)]
    #[allow(dead_code)]
    struct Scenario {
        duration: String,
        policy: PolicyDoc,
    }
    let text = "duration = \"10s\"\n\n[policy]\nqdisc = \"htb\"\ndefault = \"a\"\n\n[[policy.class]]\nname = \"a\"\nrate = \"1mbitt\"\n";
    let scn: Scenario = toml::from_str(text).unwrap();
    let e: ConfigError = Policy::from_spanned_table(scn.policy, text, "scn.toml").unwrap_err();
    assert_eq!(e.diagnostics.len(), 1);
    assert_eq!((e.diagnostics[0].line, e.diagnostics[0].col), (9, 8));
    assert_eq!(e.diagnostics[0].file, "scn.toml");
}

#[test]
fn unreadable_file() {
    let e = Policy::load(std::path::Path::new("/nonexistent/policy.toml")).unwrap_err();
    assert_eq!(e.diagnostics.len(), 1);
    assert_eq!((e.diagnostics[0].line, e.diagnostics[0].col), (0, 0));
    assert!(
        e.to_string()
            .starts_with("/nonexistent/policy.toml: error: cannot read"),
        "{e}"
    );
}

#[test]
fn port_match_with_a_protocol_the_classifier_reads_no_ports_of_warns() {
    // The classifier reads ports of TCP and UDP only (core `transport_ports`): an SCTP port
    // filter never matches, and the checker must say so; TCP and UDP stay silent.
    let base = "qdisc = \"htb\"\ndefault = \"a\"\n[[class]]\nname = \"a\"\nrate = \"1mbit\"\n[[filter]]\nclass = \"a\"\ndst_port = 80\n";
    for proto in ["sctp", "icmp", "132"] {
        let text = format!("{base}protocol = \"{proto}\"\n");
        let p = Policy::parse(&text, "policy.toml").unwrap();
        assert_eq!(p.warnings().len(), 1, "{proto}: {:?}", p.warnings());
        let w = &p.warnings()[0];
        assert_eq!((w.line, w.col), pos(&text, "80"));
        assert!(w.message.contains("only for tcp and udp"), "{w}");
        assert!(w.help.as_deref().unwrap().contains("use tcp or udp"), "{w}");
    }
    for proto in ["tcp", "udp"] {
        let text = format!("{base}protocol = \"{proto}\"\n");
        let p = Policy::parse(&text, "policy.toml").unwrap();
        assert!(p.warnings().is_empty(), "{proto}: {:?}", p.warnings());
    }
}

#[test]
fn tos_contradicting_dscp_warns() {
    let base = "qdisc = \"htb\"\ndefault = \"a\"\n[[class]]\nname = \"a\"\nrate = \"1mbit\"\n[[filter]]\nclass = \"a\"\ndscp = \"ef\"\n";
    let text = format!("{base}tos = \"0x00/0xfc\"\n");
    let p = Policy::parse(&text, "policy.toml").unwrap();
    assert_eq!(p.warnings().len(), 1, "{:?}", p.warnings());
    let w = &p.warnings()[0];
    assert_eq!((w.line, w.col), pos(&text, "\"0x00/0xfc\""));
    assert!(w.message.contains("contradicts `dscp`"), "{w}");
    assert!(w.help.as_deref().unwrap().contains("tos 0xb8/0xfc"), "{w}");
    // Agreeing conditions, and a mask on the ECN bits only, are fine.
    for tos in ["0xb8/0xfc", "0x01/0x03"] {
        let text = format!("{base}tos = \"{tos}\"\n");
        let p = Policy::parse(&text, "policy.toml").unwrap();
        assert!(p.warnings().is_empty(), "{tos}: {:?}", p.warnings());
    }
}

#[test]
fn mtu_above_an_ip_packet_is_refused() {
    let base = "qdisc = \"htb\"\ndefault = \"a\"\n[[class]]\nname = \"a\"\nrate = \"1mbit\"\n";
    one_error(
        &format!("mtu = 65536\n{base}"),
        "65536",
        &["`mtu` 65536 bytes is out of range"],
        &["68 to 65535"],
    );
    assert!(Policy::parse(&format!("mtu = 65535\n{base}"), "x").is_ok());
}

#[test]
fn a_zero_rate_is_one_error_without_a_quantum_warning() {
    let text = "qdisc = \"htb\"\ndefault = \"a\"\n[[class]]\nname = \"a\"\nrate = \"0bit\"\n";
    let e = Policy::parse(text, "policy.toml").unwrap_err();
    assert_eq!(e.diagnostics.len(), 1, "{e}");
    assert!(e.diagnostics[0].message.contains("rate is zero"), "{e}");
}
