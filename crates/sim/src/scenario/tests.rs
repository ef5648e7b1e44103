//! Tests of the scenario format: defaults and `count` expansion, located errors, UDP sizes and
//! patterns.

use linkshare_core::Duration;

use super::*;

const BASE: &str = "name = \"t\"\nduration = \"1s\"\n[link]\nrate = \"10mbit\"\n";

#[test]
fn defaults_and_count_expansion() {
    let text = format!("{BASE}[[flow]]\nname = \"b\"\nkind = \"tcp\"\ncount = 3\n[[flow]]\nname = \"p\"\nkind = \"ping\"\n");
    let s = Scenario::parse(&text, "t.toml").unwrap();
    assert_eq!(s.duration, Duration::from_secs(1));
    assert_eq!(s.sample, DEFAULT_SAMPLE);
    let names: Vec<_> = s.flows.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(names, ["b.1", "b.2", "b.3", "p"]);
    let mut tuples: Vec<_> = s
        .flows
        .iter()
        .map(|f| (f.src, f.dst, f.sport, f.dport))
        .collect();
    tuples.dedup();
    assert_eq!(tuples.len(), 4, "endpoints unique per flow");
    assert_eq!(s.flows[0].stop, Duration::from_secs(1));
    assert!(matches!(&s.flows[3].kind, FlowKind::Ping(p) if p.size == DEFAULT_PING_SIZE));
}

#[test]
fn errors_point_at_the_value() {
    let text = format!("{BASE}[[flow]]\nname = \"b\"\nkind = \"tpc\"\n");
    let e = Scenario::parse(&text, "t.toml").unwrap_err();
    let d = e.first().unwrap();
    assert_eq!((d.line, d.col), (7, 8), "{e}");
    assert!(d.message.contains("unknown flow kind `tpc`"));

    let text = format!("{BASE}bogus = 1\n");
    let e = Scenario::parse(&text, "t.toml").unwrap_err();
    let d = e.first().unwrap();
    assert_eq!(d.line, 5, "{e}");
    assert!(d.message.contains("unknown field"), "{e}");

    let text = format!(
        "{BASE}[[flow]]\nname = \"u\"\nkind = \"udp\"\nrate = \"1mbit\"\nwindow = \"64k\"\n"
    );
    let e = Scenario::parse(&text, "t.toml").unwrap_err();
    let d = e.first().unwrap();
    assert_eq!(d.line, 9, "{e}");
    assert!(
        d.message.contains("`window` does not apply to udp flows"),
        "{e}"
    );

    let text = format!("{BASE}[[flow]]\nname = \"u\"\nkind = \"udp\"\nrate = \"1 furlong\"\n");
    let e = Scenario::parse(&text, "t.toml").unwrap_err();
    let d = e.first().unwrap();
    assert_eq!((d.line, d.col), (8, 8), "{e}");

    let text = "duration = \"5\"\n[link]\nrate = \"1mbit\"\n";
    let e = Scenario::parse(text, "t.toml").unwrap_err();
    assert!(e.first().unwrap().message.contains("no time unit"), "{e}");
    assert!(e.to_string().starts_with("t.toml:1:12: error:"), "{e}");
}

#[test]
fn udp_sizes_and_patterns() {
    let text = format!(
        "{BASE}[[flow]]\nname = \"u\"\nkind = \"udp\"\nrate = \"1mbit\"\nsize = \"imix\"\npattern = \"onoff\"\non = \"1s\"\noff = \"500ms\"\n"
    );
    let s = Scenario::parse(&text, "t.toml").unwrap();
    let FlowKind::Udp(u) = &s.flows[0].kind else {
        panic!()
    };
    assert_eq!(u.size, SizeMix::imix());
    assert_eq!(
        u.pattern,
        Pattern::OnOff {
            on: Duration::from_secs(1),
            off: Duration::from_millis(500)
        }
    );
    let text =
        format!("{BASE}[[flow]]\nname = \"u\"\nkind = \"udp\"\nrate = \"1mbit\"\nsize = 1600\n");
    assert!(Scenario::parse(&text, "t.toml").is_err());
}

/// The first diagnostic of a rejected scenario: `file:line: message` and its help.
fn first_error(text: &str) -> (usize, String, String) {
    let e = Scenario::parse(text, "t.toml").unwrap_err();
    let d = e.first().unwrap().clone();
    (d.line, d.message, d.help.unwrap_or_default())
}

#[test]
fn a_top_level_key_below_link_is_told_about_toml_scope() {
    let text = "name = \"t\"\n[link]\nrate = \"10mbit\"\npolicy = \"office.toml\"\n";
    let (line, msg, help) = first_error(text);
    assert_eq!(line, 4);
    assert!(msg.contains("unknown field `policy`"), "{msg}");
    assert!(
        help.contains("every key after `[link]` belongs to `[link]`"),
        "{help}"
    );
    assert!(help.contains("move `policy = …` above"), "{help}");
}

#[test]
fn a_flow_with_a_class_is_told_about_filters() {
    let text = format!("{BASE}[[flow]]\nname = \"v\"\nkind = \"udp\"\nclass = \"voice\"\n");
    let (line, msg, help) = first_error(&text);
    assert_eq!(line, 8);
    assert!(msg.contains("unknown field `class`"), "{msg}");
    assert!(
        help.contains("classify packets by DSCP and addresses"),
        "{help}"
    );
    assert!(help.contains("[[policy.filter]]"), "{help}");
    assert!(help.contains("dscp = \"ef\""), "{help}");
}

#[test]
fn negative_rates_and_sizes_say_so() {
    let text = format!("{BASE}[[flow]]\nname = \"u\"\nkind = \"udp\"\nrate = -2000000\n");
    let (line, msg, help) = first_error(&text);
    assert_eq!(line, 8);
    assert_eq!(msg, "rate -2000000 is negative");
    assert!(!msg.contains("found an integer"));
    assert!(help.contains("2000000 (bits per second)"), "{help}");
    let text = format!("{BASE}[[flow]]\nname = \"u\"\nkind = \"udp\"\nrate = 1000\nsize = -5\n");
    assert_eq!(first_error(&text).1, "size -5 is negative");
}

#[test]
fn a_policy_given_as_a_scenario_says_use_check() {
    let text = "qdisc = \"htb\"\ndefault = \"a\"\n\n[[class]]\nname = \"a\"\nrate = \"1mbit\"\n";
    let (line, msg, help) = first_error(text);
    assert_eq!(line, 4);
    assert!(msg.contains("this looks like a policy"), "{msg}");
    assert!(help.contains("linkshare check t.toml"), "{help}");
}

#[test]
fn implicit_policy_and_uplink_tables_parse() {
    // `[policy.qdisc]` with no `[policy]` line makes `policy` an implicit table (no span).
    let text = format!("{BASE}[policy.qdisc]\ntype = \"pfifo\"\nlimit = 64\n[[flow]]\nname = \"t\"\nkind = \"tcp\"\n");
    let s = Scenario::parse(&text, "t.toml").unwrap();
    assert!(s.policy.is_some());
    let explicit = format!("{BASE}[policy]\nqdisc = {{ type = \"pfifo\", limit = 64 }}\n[[flow]]\nname = \"t\"\nkind = \"tcp\"\n");
    let e = Scenario::parse(&explicit, "t.toml").unwrap();
    assert_eq!(format!("{:?}", s.policy), format!("{:?}", e.policy));

    let text = format!(
        "{BASE}[uplink]\nrate = \"1mbit\"\n[uplink.policy.qdisc]\ntype = \"pfifo\"\nlimit = 8\n"
    );
    let s = Scenario::parse(&text, "t.toml").unwrap();
    assert!(s.uplink.as_ref().is_some_and(|u| u.policy.is_some()));

    // An implicit `[uplink]` without its rate: the error points at its header.
    let text = format!("{BASE}[uplink.policy.qdisc]\ntype = \"pfifo\"\n");
    let e = Scenario::parse(&text, "t.toml").unwrap_err();
    let d = e.first().unwrap();
    assert_eq!(d.line, 5, "{e}");
    assert!(d.message.contains("[uplink] needs a `rate`"), "{e}");

    // A wrong type inside an implicit table is still located.
    let text = format!("{BASE}[policy.qdisc]\ntype = \"pfifo\"\nlimit = \"many\"\n");
    let e = Scenario::parse(&text, "t.toml").unwrap_err();
    assert!(e.first().unwrap().line >= 5, "{e}");
}
