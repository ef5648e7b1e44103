//! Filters: DSCP names, the class a filter sends to, each match's values and errors, and the
//! warnings for a port match the classifier cannot see and a `tos` that contradicts `dscp`.

use super::{edit, one_error, pos, EXAMPLE};
use linkshare_config::Policy;

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
    // The fuzzer's findings: a multi-byte character and non-digit suffixes are
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
