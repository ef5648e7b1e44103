//! `control`: arbitrary bytes as control-socket requests, against an in-memory shaper.
//!
//! The input is cut into lines as the server cuts its input (one request per line, the text
//! taken as the server takes it: `server::request_text`), and each line goes through the very
//! parser and dispatcher the shaper uses (`control::answer`) against an
//! [`Offline`](linkshare_router::control::Offline) shaper — its policies and schedulers, no
//! interfaces or files — so a session can reload policies by text, read them back and ask for
//! the snapshot. Invariants, after every line:
//!
//! * a response comes back, never a panic, and it is one well-formed line of the wire format
//!   that the client's parser reads back to the same response;
//! * a line the request parser refuses is answered with an `error` that has a message;
//! * the snapshot's tree is consistent: every class's parent is a row of the same direction, by
//!   name and by id; a successful reload is what `policy` then returns.

use linkshare_router::control::proto::{parse_request, parse_response};
use linkshare_router::control::server::request_text;
use linkshare_router::control::{
    answer, Handler, Offline, PolicySource, Request, Response, Snapshot,
};

/// The shaper's policy before any reload: an HTB tree declared breadth-first.
pub const POLICY: &str = r#"
qdisc = "htb"
default = "a1"
[[class]]
name = "root"
rate = "10mbit"
[[class]]
name = "A"
parent = "root"
rate = "6mbit"
ceil = "10mbit"
[[class]]
name = "B"
parent = "root"
rate = "4mbit"
[[class]]
name = "a1"
parent = "A"
rate = "6mbit"
leaf = "fq_codel"
[[class]]
name = "b1"
parent = "B"
rate = "4mbit"
"#;

/// Input cut here, and at most this many requests per input: the parsers' cost is what
/// matters, not megabytes of policy text.
const MAX_INPUT: usize = 64 * 1024;
const MAX_LINES: usize = 16;

fn check_tree(s: &Snapshot) {
    for d in &s.directions {
        for c in &d.classes {
            let Some(parent) = &c.parent else {
                assert!(
                    c.parent_id.is_none(),
                    "{}: a parent id without a name",
                    c.name
                );
                continue;
            };
            let p = d
                .classes
                .iter()
                .find(|p| &p.name == parent)
                .unwrap_or_else(|| panic!("{}: parent {parent} is not a row", c.name));
            assert_eq!(
                Some(p.id),
                c.parent_id,
                "{}: parent id and name disagree",
                c.name
            );
        }
    }
}

pub fn run(data: &[u8]) {
    let data = &data[..data.len().min(MAX_INPUT)];
    let mut shaper = match Offline::new(POLICY, "fuzz.toml") {
        Ok(o) => o,
        Err(d) => panic!("the harness's own policy is invalid:\n{d}"),
    };
    for raw in data.split(|&b| b == b'\n').take(MAX_LINES) {
        let line = request_text(raw);
        let resp = answer(&mut shaper, &line);
        let wire = resp.to_line();
        assert!(!wire.contains('\n'), "a reply spans lines: {wire}");
        // A reload report's `kept_names` is for merging workers' reports and is not sent.
        let mut sent = resp.clone();
        if let Response::Reloaded(r) = &mut sent {
            r.kept_names.clear();
        }
        match parse_response(&wire) {
            Ok(back) => assert_eq!(back, sent, "the reply changed on the wire"),
            Err(e) => panic!("the client cannot read the reply ({e}): {wire}"),
        }
        match parse_request(&line) {
            Err(_) => match &resp {
                Response::Error(e) => assert!(!e.message.is_empty(), "an error without a message"),
                other => panic!("a refused request was answered with {other:?}"),
            },
            Ok(Request::Reload {
                direction,
                source: PolicySource::Text { text, origin },
            }) if matches!(resp, Response::Reloaded(_)) => match shaper.policy(direction) {
                Ok(p) => assert_eq!((p.text, p.origin), (text, origin), "reload not kept"),
                Err(e) => panic!("a reloaded direction has no policy: {e}"),
            },
            Ok(_) => {}
        }
        check_tree(&shaper.snapshot());
    }
}
