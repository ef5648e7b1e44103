//! The live dashboard (`--web`): one embedded page (dashboard.html, hand-written HTML and
//! JavaScript, no external asset) and `/events`, a stream of server-sent events (WHATWG HTML
//! Living Standard, "Server-sent events": `data:` lines, a blank line ending each event), one
//! `stat` [`Snapshot`] as JSON per second. `/snapshot.json` answers one snapshot. The snapshot is
//! the one `stat` computes: the page only renders it.
//!
//! The streams are the HTTP server's (http/mod.rs): non-blocking, and dropped when a reader
//! falls more than `MAX_STREAM_PENDING` bytes behind.

use std::sync::Arc;

use super::{Request, Route};
use crate::control::select::{Select, TopBy};
use crate::control::snapshot::Snapshot;
use crate::sys;

/// Above this many classes in a direction, the page and the events carry the inner classes and
/// the [`EVENT_TOP`] busiest leaves (`/snapshot.json?…` selects any others, server-side).
pub const EVENT_MAX_CLASSES: usize = 2_000;
/// Leaves by live rate in a trimmed event.
pub const EVENT_TOP: usize = 200;

/// What the page and the events show of `s`: all of it when small, else the inner classes and
/// the busiest leaves (each direction's `class_count` says how many there are).
pub fn shown(s: &Snapshot) -> Snapshot {
    if s.directions
        .iter()
        .all(|d| d.classes.len() <= EVENT_MAX_CLASSES)
    {
        return s.clone();
    }
    let mut out = s.clone_without_classes();
    for (o, d) in out.directions.iter_mut().zip(&s.directions) {
        let leaves = d.classes.iter().filter(|c| c.leaf).collect();
        let busy = crate::control::select::top(leaves, EVENT_TOP, TopBy::Rate);
        o.classes = d.classes.iter().filter(|c| !c.leaf).cloned().collect();
        o.classes.extend(busy.into_iter().cloned());
        o.class_count = d.classes.len() as u64;
    }
    out
}

/// The selection a `/snapshot.json` query asks for (`class`, `parent`, `search`, `top`, `by`,
/// `offset`, `limit`, as `stat`'s).
pub fn select_of(req: &Request) -> Result<Select, String> {
    let num = |k: &str| -> Result<Option<usize>, String> {
        req.param(k)
            .map(|v| v.parse().map_err(|_| format!("{k}={v}: a number")))
            .transpose()
    };
    let by = match req.param("by") {
        None => TopBy::Rate,
        Some(b) => TopBy::parse(&b).ok_or_else(|| format!("by={b}: rate, drops or backlog"))?,
    };
    Ok(Select {
        class: req.param("class").filter(|c| !c.is_empty()),
        parent: req.param("parent").filter(|c| !c.is_empty()),
        search: req.param("search").filter(|c| !c.is_empty()),
        top: num("top")?,
        by,
        offset: num("offset")?.unwrap_or(0),
        limit: num("limit")?,
        seq: None,
    })
}

/// The page.
pub const PAGE: &str = include_str!("dashboard.html");

/// Interval between events.
pub const EVENT_NS: u64 = 1_000_000_000;

/// One server-sent event carrying `s` as JSON (one `data:` line: JSON has no raw line feed).
pub fn event(s: &Snapshot) -> Vec<u8> {
    let json = serde_json::to_string(s).unwrap_or_else(|_| "{}".to_string());
    format!("event: snapshot\ndata: {json}\n\n").into_bytes()
}

/// The page with `s` inlined as its first snapshot. `<` is written `\u003c` (the same string
/// in JSON and JavaScript), so no class name can close the script element.
pub fn page(s: &Snapshot) -> String {
    let json = serde_json::to_string(s).unwrap_or_else(|_| "null".to_string());
    PAGE.replacen("/*INITIAL*/null", &json.replace('<', "\\u003c"), 1)
}

/// Route the dashboard's paths.
pub fn route(req: &Request, snap: &mut dyn FnMut() -> Arc<Snapshot>) -> Route {
    match req.path.as_str() {
        "/" | "/index.html" => Route::ok(
            "text/html; charset=utf-8",
            page(&shown(&snap())).into_bytes(),
        ),
        "/snapshot.json" => match select_of(req) {
            Ok(q) => {
                let body = serde_json::to_vec(&q.apply(&snap())).unwrap_or_default();
                Route::ok("application/json", body)
            }
            Err(e) => Route::text(400, &format!("{e}\n")),
        },
        // The first event follows in the same turn (`serve_web`).
        "/events" => Route {
            stream: true,
            ..Route::ok("text/event-stream", Vec::new())
        },
        _ => Route::text(404, "not found\n"),
    }
}

/// One turn of dashboard server `h`: serve requests, and send every stream a snapshot once a
/// second, and at once when a stream has just opened (so a page fills without waiting). Never
/// blocks. `snap` gives the snapshot (the shaper's `stat`, or the control thread's latest
/// merged one with `--workers N`).
pub(crate) fn serve_turn(h: &mut super::Http, snap: &mut dyn FnMut() -> Arc<Snapshot>) {
    let now = sys::monotonic_ns();
    let before = h.streams();
    h.serve(now, &mut |req| route(req, &mut *snap));
    let opened = h.streams() > before;
    if opened || (h.streams() > 0 && now.saturating_sub(h.last_event_ns) >= EVENT_NS) {
        let ev = event(&shown(&snap()));
        h.broadcast(&ev, now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::control::snapshot::{ClassSnapshot, DirectionSnapshot};

    fn req(path: &str) -> Request {
        Request {
            method: "GET".into(),
            path: path.into(),
            accept: String::new(),
            query: String::new(),
        }
    }

    #[test]
    fn page_is_self_contained() {
        let r = route(&req("/"), &mut Default::default);
        assert_eq!((r.status, r.stream), (200, false));
        let page = String::from_utf8(r.body).expect("utf-8");
        assert!(
            page.contains("EventSource(\"/events\")"),
            "the page subscribes"
        );
        // No external asset: every src/href is local.
        for attr in [
            "src=\"http",
            "href=\"http",
            "src=\"//",
            "href=\"//",
            "@import",
        ] {
            assert!(!page.contains(attr), "external asset ({attr})");
        }
    }

    #[test]
    fn inlined_snapshot_cannot_close_the_script() {
        let s = Snapshot {
            directions: vec![DirectionSnapshot {
                classes: vec![ClassSnapshot {
                    name: "</script><b>x".into(),
                    ..ClassSnapshot::default()
                }],
                ..DirectionSnapshot::default()
            }],
            ..Snapshot::default()
        };
        let p = page(&s);
        assert_eq!(p.matches("</script>").count(), 1, "only the page's own");
        assert!(
            p.contains("\\u003c/script>\\u003cb>x"),
            "escaped name inlined"
        );
    }

    #[test]
    fn events_are_one_json_line_each() {
        let s = Snapshot {
            directions: vec![DirectionSnapshot {
                classes: vec![ClassSnapshot {
                    name: "multi\nline".into(),
                    live_rate_bps: 1234.5,
                    ..ClassSnapshot::default()
                }],
                ..DirectionSnapshot::default()
            }],
            ..Snapshot::default()
        };
        let e = String::from_utf8(event(&s)).expect("utf-8");
        assert!(
            e.starts_with("event: snapshot\ndata: {") && e.ends_with("}\n\n"),
            "{e}"
        );
        assert_eq!(e.matches('\n').count(), 3, "one data line: {e}");
        let json = e.trim_end().split_once("data: ").map(|x| x.1).unwrap_or("");
        let back: Snapshot = serde_json::from_str(json).expect("the event's JSON parses");
        assert_eq!(back, s);
        let r = route(&req("/events"), &mut || Arc::new(s.clone()));
        assert!(r.stream && r.content_type == "text/event-stream");
        assert_eq!(route(&req("/x"), &mut Default::default).status, 404);
    }

    /// The dashboard at 100,000 subscribers: the page and its events carry the inner classes
    /// and the busiest leaves; a search answers each matching subscriber in both directions, a
    /// top-N and a node's children are chosen server-side; the page has the controls.
    #[test]
    fn a_large_tree_is_searched_ranked_and_opened_server_side() {
        let n = 100_000;
        let dir = |to: &str, scale: f64| DirectionSnapshot {
            to: to.into(),
            classes: std::iter::once(ClassSnapshot {
                name: "root".into(),
                ..ClassSnapshot::default()
            })
            .chain((0..20).map(|k| ClassSnapshot {
                name: format!("site{k}"),
                parent: Some("root".into()),
                ..ClassSnapshot::default()
            }))
            .chain((0..n).map(|k| ClassSnapshot {
                name: format!("Sub{k}"),
                parent: Some(format!("site{}", k % 20)),
                leaf: true,
                live_rate_bps: scale * k as f64,
                ..ClassSnapshot::default()
            }))
            .collect(),
            ..DirectionSnapshot::default()
        };
        let s = Arc::new(Snapshot {
            directions: vec![dir("eth1", 1.0), dir("eth0", 0.5)],
            ..Snapshot::default()
        });
        let shown = shown(&s);
        for d in &shown.directions {
            assert_eq!(d.classes.len(), 21 + EVENT_TOP);
            assert_eq!(d.class_count, 21 + n as u64);
        }
        let json = |query: &str| -> Snapshot {
            let mut r = req("/snapshot.json");
            r.query = query.into();
            let out = route(&r, &mut || s.clone());
            assert_eq!(out.status, 200, "{query}");
            serde_json::from_slice(&out.body).expect("JSON")
        };
        let names = |s: &Snapshot, d: usize| -> Vec<String> {
            s.directions[d]
                .classes
                .iter()
                .map(|c| c.name.clone())
                .collect()
        };
        // Search by part of the name, any case: both directions of each match.
        let found = json("search=sub9999");
        let want = [
            "Sub9999", "Sub99990", "Sub99991", "Sub99992", "Sub99993", "Sub99994", "Sub99995",
            "Sub99996", "Sub99997", "Sub99998", "Sub99999",
        ];
        assert_eq!(names(&found, 0), want);
        assert_eq!(names(&found, 1), want);
        assert_eq!(found.directions[1].classes[0].live_rate_bps, 0.5 * 9999.0);
        // Top 3 by rate, highest first; a node's children.
        assert_eq!(
            names(&json("top=3&by=rate"), 0),
            ["Sub99999", "Sub99998", "Sub99997"]
        );
        let kids = json("parent=site7&limit=5");
        assert_eq!(
            names(&kids, 1),
            ["Sub7", "Sub27", "Sub47", "Sub67", "Sub87"]
        );
        let page = String::from_utf8(route(&req("/"), &mut || s.clone()).body).expect("utf-8");
        for control in [
            "name=\"search\"",
            "name=\"top\"",
            "id=\"foldall\"",
            "renderJoined",
            "sortRows",
        ] {
            assert!(page.contains(control), "the page lacks {control}");
        }
        assert!(
            page.len() < 400_000,
            "the page inlines the trimmed tree: {}",
            page.len()
        );
    }
}
