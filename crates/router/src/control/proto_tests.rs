//! The wire format of the control protocol: every message survives JSON both ways, the version
//! rules hold, and each kind of bad input gets its own error kind.

use super::*;
use crate::control::dispatch::{answer, Offline};

/// A small HTB tree, declared breadth-first.
const TREE: &str = r#"
qdisc = "htb"
default = "a1"
[[class]]
name = "root"
rate = "10mbit"
[[class]]
name = "A"
parent = "root"
rate = "6mbit"
[[class]]
name = "B"
parent = "root"
rate = "4mbit"
[[class]]
name = "a1"
parent = "A"
rate = "6mbit"
[[class]]
name = "b1"
parent = "B"
rate = "4mbit"
"#;

fn offline() -> Offline {
    Offline::new(TREE, "tree.toml").unwrap_or_else(|d| panic!("{d}"))
}

fn line(req: &Request) -> String {
    serde_json::to_string(&Envelope::new(req)).expect("a request serialises")
}

fn error_kind(r: &Response) -> Option<ErrorKind> {
    match r {
        Response::Error(e) => {
            assert!(!e.message.is_empty(), "an error says what went wrong");
            Some(e.kind)
        }
        _ => None,
    }
}

#[test]
fn every_request_survives_the_wire() {
    let reqs = [
        Request::Hello {},
        Request::Stat {
            select: Default::default(),
        },
        Request::Policy {
            direction: Direction::Reverse,
        },
        Request::Reload {
            direction: Direction::Forward,
            source: PolicySource::Text {
                text: "qdisc = \"fq_codel\"\n\"quoted\" \n".to_string(),
                origin: "class change a1".to_string(),
            },
        },
        Request::Reload {
            direction: Direction::Reverse,
            source: PolicySource::File {
                path: "/etc/linkshare/reverse.toml".into(),
            },
        },
        Request::Reload {
            direction: Direction::Forward,
            source: PolicySource::Change(ClassChange {
                class: "sub7".into(),
                rate: Some("2mbit".into()),
                ceil: None,
            }),
        },
    ];
    for r in reqs {
        let l = line(&r);
        assert!(!l.contains('\n'), "one line: {l}");
        assert_eq!(parse_request(&l), Ok(r.clone()), "{l}");
    }
}

#[test]
fn the_wire_shape_is_the_documented_one() {
    // docs/router.md shows these lines.
    assert_eq!(
        line(&Request::Stat {
            select: Default::default()
        }),
        r#"{"v":1,"cmd":"stat"}"#
    );
    let reload = Request::Reload {
        direction: Direction::Reverse,
        source: PolicySource::File {
            path: "/etc/r.toml".into(),
        },
    };
    assert_eq!(
        line(&reload),
        r#"{"v":1,"cmd":"reload","direction":"reverse","source":{"from":"file","path":"/etc/r.toml"}}"#
    );
    // A change by name: the class and its new rates, no text.
    let change = Request::Reload {
        direction: Direction::Forward,
        source: PolicySource::Change(ClassChange {
            class: "sub7".into(),
            rate: None,
            ceil: Some("20mbit".into()),
        }),
    };
    assert_eq!(
        line(&change),
        r#"{"v":1,"cmd":"reload","direction":"forward","source":{"from":"change","class":"sub7","ceil":"20mbit"}}"#
    );
    // The direction defaults to forward.
    assert_eq!(
        parse_request(r#"{"v":1,"cmd":"policy"}"#),
        Ok(Request::Policy {
            direction: Direction::Forward
        })
    );
}

#[test]
fn every_response_survives_the_wire() {
    let mut o = offline();
    let snap = crate::control::Handler::snapshot(&mut o);
    assert!(
        !snap.directions[0].classes.is_empty(),
        "the snapshot has rows"
    );
    let resps = [
        Response::Hello(Hello::current()),
        Response::Stat(Box::new(snap)),
        Response::Policy(PolicyText {
            direction: Direction::Forward,
            text: TREE.to_string(),
            origin: "tree.toml".to_string(),
            path: Some("/etc/tree.toml".into()),
            changes: vec![ClassChange {
                class: "y".into(),
                rate: Some("2mbit".into()),
                ceil: None,
            }],
        }),
        Response::Reloaded(ReloadReport {
            kept: 1,
            added: vec!["x".into()],
            removed: vec![],
            changed: vec!["y".into()],
            moved_packets: 3,
            reclassified: 1,
            dropped_packets: 0,
            ..Default::default()
        }),
        Response::Error(ErrorReply {
            kind: ErrorKind::PolicyRejected,
            message: "policy rejected".into(),
            diagnostics: Some("error: …\n".into()),
        }),
    ];
    for r in resps {
        let l = r.to_line();
        assert!(!l.contains('\n'), "one line: {l}");
        assert_eq!(parse_response(&l), Ok(r.clone()), "{l}");
    }
}

#[test]
fn hello_lists_what_the_server_answers_at_any_version() {
    let mut o = offline();
    for l in [
        r#"{"cmd":"hello"}"#,
        r#"{"v":1,"cmd":"hello"}"#,
        r#"{"v":99,"cmd":"hello"}"#,
    ] {
        let Response::Hello(h) = answer(&mut o, l) else {
            panic!("{l} not answered with hello")
        };
        assert_eq!((h.version, h.min_version), (VERSION, MIN_VERSION));
        assert_eq!(h.requests, REQUESTS);
        assert!(h.features.iter().any(|f| f == "class_parents"));
        assert_eq!(h.max_request_bytes, crate::control::MAX_REQUEST as u64);
    }
    // Every request it lists is answered (not refused as unknown).
    for name in REQUESTS {
        let r = answer(&mut o, &format!(r#"{{"v":{VERSION},"cmd":"{name}"}}"#));
        assert_ne!(error_kind(&r), Some(ErrorKind::UnknownRequest), "{name}");
    }
}

#[test]
fn unversioned_old_and_future_requests_get_a_version_error() {
    let mut o = offline();
    for l in [
        r#"{"cmd":"stat"}"#,
        r#"{"v":0,"cmd":"stat"}"#,
        r#"{"v":2,"cmd":"stat"}"#,
        r#"{"v":18446744073709551615,"cmd":"reload"}"#,
    ] {
        let r = answer(&mut o, l);
        assert_eq!(error_kind(&r), Some(ErrorKind::UnsupportedVersion), "{l}");
        let Response::Error(e) = r else {
            unreachable!()
        };
        assert!(
            e.message.contains("speaks versions 1 to 1"),
            "{}",
            e.message
        );
    }
}

#[test]
fn bad_input_gets_a_kind_for_each_failure() {
    let mut o = offline();
    let cases = [
        ("", ErrorKind::BadRequest),
        ("stat", ErrorKind::BadRequest),
        ("[1,2]", ErrorKind::BadRequest),
        (r#"{"v":"1","cmd":"stat"}"#, ErrorKind::BadRequest),
        (r#"{"v":1}"#, ErrorKind::BadRequest),
        (r#"{"v":1,"cmd":"shutdown"}"#, ErrorKind::UnknownRequest),
        (r#"{"v":1,"cmd":"stat","extra":1}"#, ErrorKind::BadRequest),
        (
            r#"{"v":1,"cmd":"policy","direction":"sideways"}"#,
            ErrorKind::BadRequest,
        ),
        (r#"{"v":1,"cmd":"reload"}"#, ErrorKind::BadRequest),
        (
            r#"{"v":1,"cmd":"reload","source":{"from":"text","text":"x"}}"#,
            ErrorKind::BadRequest,
        ),
        (
            r#"{"v":1,"cmd":"reload","source":{"from":"text","text":"qdisc = 3","origin":"o"}}"#,
            ErrorKind::PolicyRejected,
        ),
        (
            r#"{"v":1,"cmd":"reload","source":{"from":"file","path":"/etc/x.toml"}}"#,
            ErrorKind::Unsupported,
        ),
        (
            r#"{"v":1,"cmd":"policy","direction":"reverse"}"#,
            ErrorKind::Unshaped,
        ),
    ];
    for (l, kind) in cases {
        let r = answer(&mut o, l);
        assert_eq!(error_kind(&r), Some(kind), "{l}: {r:?}");
        // Every error reply is itself a well-formed response.
        assert_eq!(parse_response(&r.to_line()), Ok(r), "{l}");
    }
}

#[test]
fn a_rejected_policy_carries_its_diagnostics_and_changes_nothing() {
    let mut o = offline();
    let before = answer(&mut o, r#"{"v":1,"cmd":"policy"}"#);
    let bad = Request::Reload {
        direction: Direction::Forward,
        source: PolicySource::Text {
            text: "qdisc = \"htb\"\n[[class]]\nname = \"root\"\nrate = \"fast\"\n".into(),
            origin: "bad.toml".into(),
        },
    };
    let Response::Error(e) = answer(&mut o, &line(&bad)) else {
        panic!("accepted an invalid policy")
    };
    assert_eq!(e.kind, ErrorKind::PolicyRejected);
    let diag = e.diagnostics.unwrap_or_default();
    assert!(diag.contains("bad.toml"), "{diag}");
    assert_eq!(answer(&mut o, r#"{"v":1,"cmd":"policy"}"#), before);
}

#[test]
fn a_reload_reports_kept_added_and_removed_classes() {
    let mut o = offline();
    let edited = TREE.replace("name = \"b1\"", "name = \"b2\"");
    let req = Request::Reload {
        direction: Direction::Forward,
        source: PolicySource::Text {
            text: edited.clone(),
            origin: "edited.toml".into(),
        },
    };
    let Response::Reloaded(r) = answer(&mut o, &line(&req)) else {
        panic!("reload refused")
    };
    assert_eq!(r.added, ["b2"]);
    assert_eq!(r.removed, ["b1"]);
    assert_eq!(r.kept, 4, "{r:?}");
    let Response::Policy(p) = answer(&mut o, r#"{"v":1,"cmd":"policy"}"#) else {
        panic!("no policy")
    };
    assert_eq!((p.text, p.origin), (edited, "edited.toml".to_string()));
}

#[test]
fn the_snapshot_names_each_parent_through_the_wire() {
    // Declared breadth-first (root, A, B, a1, b1): the snapshot, after the JSON round trip the
    // CLI sees, names each class's real parent and the depths follow.
    let mut o = offline();
    let l = answer(&mut o, r#"{"v":1,"cmd":"stat"}"#).to_line();
    let Ok(Response::Stat(s)) = parse_response(&l) else {
        panic!("no stat: {l}")
    };
    let d = &s.directions[0];
    let depths = d.depths();
    let declared = [
        ("root", None, 0),
        ("A", Some("root"), 1),
        ("B", Some("root"), 1),
        ("a1", Some("A"), 2),
        ("b1", Some("B"), 2),
    ];
    for (name, parent, depth) in declared {
        let i = d
            .classes
            .iter()
            .position(|c| c.name == name)
            .unwrap_or_else(|| panic!("no row for {name}"));
        assert_eq!(d.classes[i].parent.as_deref(), parent, "parent of {name}");
        assert_eq!(depths[i], depth, "depth of {name}");
    }
    assert_eq!(d.kind.as_deref(), Some("htb"));
    assert!(!s.directions[1].shaped);
}

#[test]
fn the_client_refuses_a_reply_of_another_version() {
    let l = r#"{"v":2,"reply":"hello"}"#;
    let e = parse_response(l).expect_err("a v2 reply");
    assert!(e.contains("version 2"), "{e}");
    let e = parse_response(r#"{"ok":true,"stat":{}}"#).expect_err("an unversioned reply");
    assert!(e.contains("no protocol version"), "{e}");
    // An error kind this build does not know still reads, as `other`.
    let r = parse_response(r#"{"v":1,"reply":"error","kind":"on_fire","message":"m"}"#);
    assert_eq!(error_kind(&r.expect("reads")), Some(ErrorKind::Other));
}

#[test]
fn a_reload_summary_counts_and_names_the_first_few_never_the_kept() {
    let names = |n: usize| (0..n).map(|i| format!("sub{i}")).collect::<Vec<_>>();
    let r = ReloadReport {
        kept: 99_990,
        changed: names(1),
        added: names(7),
        in_place: true,
        kept_names: names(3),
        ..Default::default()
    };
    let s = r.summary();
    assert!(s.starts_with("in place: 1 changed (sub0); "), "{s}");
    assert!(
        s.contains("7 added (sub0, sub1, sub2, sub3, sub4 and 2 more)"),
        "{s}"
    );
    assert!(s.contains("0 removed, 99990 kept unchanged"), "{s}");
    assert!(!s.contains("queued"), "{s}");
    // Lists capped off the loop: the counts include what the reply leaves out.
    let (first, left) = cap_names(names(50_000));
    assert_eq!(
        (first.len(), left),
        (REPORT_NAMES, 50_000 - REPORT_NAMES as u64)
    );
    assert_eq!(first[REPORT_NAMES - 1], format!("sub{}", REPORT_NAMES - 1));
    let half = ReloadReport {
        removed: first,
        omitted: Omitted {
            removed: left,
            ..Default::default()
        },
        kept: 50_000,
        ..Default::default()
    };
    let s = half.summary();
    assert!(
        s.contains("50000 removed (sub0, sub1, sub2, sub3, sub4 and 49995 more)"),
        "{s}"
    );
    let back: ReloadReport = serde_json::from_str(&serde_json::to_string(&half).unwrap()).unwrap();
    assert_eq!(back.omitted.removed, left);
    assert_eq!(cap_names(names(3)), (names(3), 0));
    let rebuilt = ReloadReport {
        removed: names(2),
        moved_packets: 3,
        dropped_packets: 1,
        ..Default::default()
    };
    let s = rebuilt.summary();
    assert!(
        s.starts_with("new tree: 0 changed; 0 added, 2 removed (sub0, sub1)"),
        "{s}"
    );
    assert!(
        s.ends_with("moved 3 queued packets (0 classified again), dropped 1"),
        "{s}"
    );
    // The names kept stay off the wire.
    let line = serde_json::to_string(&r).unwrap();
    assert!(
        !line.contains("kept_names") && line.contains("\"kept\":99990"),
        "{line}"
    );
}
