//! Writing the file: unit typos and the hints they get, rate units tc reads differently, unknown
//! keys, TOML syntax, every error collected and located, a policy embedded in another document,
//! a file that cannot be read.

use super::{edit, errors, one_error, pos, EXAMPLE};
use linkshare_config::{ConfigError, Diagnostic, Policy, PolicyDoc, Severity};
use linkshare_core::units::Rate;

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

/// No unit hint changes the magnitude the user meant (`8Mbs` was once answered with
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
