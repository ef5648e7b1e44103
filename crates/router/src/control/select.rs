//! Which classes a `stat` reply carries: [`Select`] picks them from a whole [`Snapshot`] by name
//! or circuit id (`--class`), by parent (`--parent`), the first N by a key (`--top N --by rate|drops|backlog`)
//! and by page (`offset`, `limit`), so that a shaper of 100,000 classes answers `stat --top 20`
//! with twenty rows and a full listing in pages no reply outgrows.
//!
//! Principles: selection is a pure function of a snapshot (the stats plane runs it off the
//! datapath, control/plane.rs); each direction is selected alike and says how many classes it
//! had before (`class_count`), so a reader knows what it does not see; a page never carries
//! more than [`MAX_PAGE`] classes per direction, whatever the client asks; top-N is a partial
//! selection (O(n) with `select_nth_unstable_by`, then the N sorted), ties broken by name so
//! that two replies of one snapshot agree.

use serde::{Deserialize, Serialize};

use super::snapshot::{finite, ClassSnapshot, DirectionSnapshot, Snapshot};

/// Most classes one reply carries per direction (~450 bytes of JSON each: a page of both
/// directions stays well under the control socket's `MAX_REPLY`).
pub const MAX_PAGE: usize = 10_000;

/// What to rank classes by for `top`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TopBy {
    /// The live send rate.
    #[default]
    Rate,
    /// Packets dropped by the class's leaf queue.
    Drops,
    /// Bytes queued.
    Backlog,
}

impl TopBy {
    /// From its command-line name.
    pub fn parse(s: &str) -> Option<TopBy> {
        match s {
            "rate" => Some(TopBy::Rate),
            "drops" => Some(TopBy::Drops),
            "backlog" => Some(TopBy::Backlog),
            _ => None,
        }
    }

    fn key(self, c: &ClassSnapshot) -> f64 {
        match self {
            TopBy::Rate => finite(c.live_rate_bps),
            TopBy::Drops => c.drops as f64,
            TopBy::Backlog => c.backlog_bytes as f64,
        }
    }
}

/// The classes a `stat` request asks for. The default is every class, first page.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Select {
    /// Only the class of this name, or the subscriber of this circuit id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub class: Option<String>,
    /// Only the children of this class.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,
    /// Only the classes whose name contains this text, ignoring case (a search box).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub search: Option<String>,
    /// The first N by `by`, highest first (after `class` and `parent`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top: Option<usize>,
    #[serde(default)]
    pub by: TopBy,
    /// Skip this many classes of each direction (paging; after the filters).
    #[serde(default)]
    pub offset: usize,
    /// At most this many classes per direction (capped at [`MAX_PAGE`]; `None`: the cap).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<usize>,
    /// Page through this snapshot (its `seq`) rather than the newest, so pages agree; the
    /// shaper keeps the previous one too and refuses an older one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seq: Option<u64>,
}

impl Select {
    /// True when it asks for nothing beyond the defaults (written `{}`, or left out).
    pub fn is_all(&self) -> bool {
        *self == Select::default()
    }

    /// The page size this request gets.
    pub fn page(&self) -> usize {
        self.limit.unwrap_or(MAX_PAGE).min(MAX_PAGE)
    }

    /// `s` with each direction's classes selected; everything else as it is.
    pub fn apply(&self, s: &Snapshot) -> Snapshot {
        Snapshot {
            directions: s.directions.iter().map(|d| self.direction(d)).collect(),
            ..s.clone_without_classes()
        }
    }

    fn direction(&self, d: &DirectionSnapshot) -> DirectionSnapshot {
        let needle = self.search.as_ref().map(|t| t.to_lowercase());
        let keep = |c: &&ClassSnapshot| {
            self.class
                .as_ref()
                .is_none_or(|n| &c.name == n || c.circuit_id.as_ref() == Some(n))
                && needle
                    .as_ref()
                    .is_none_or(|t| c.name.to_lowercase().contains(t.as_str()))
                && self
                    .parent
                    .as_ref()
                    .is_none_or(|p| c.parent.as_ref() == Some(p))
        };
        let mut rows: Vec<&ClassSnapshot> = d.classes.iter().filter(keep).collect();
        if let Some(n) = self.top {
            rows = top(rows, n, self.by);
        }
        let classes = rows
            .into_iter()
            .skip(self.offset)
            .take(self.page())
            .cloned()
            .collect();
        DirectionSnapshot {
            classes,
            class_count: d.classes.len() as u64,
            ..d.clone_without_classes()
        }
    }
}

/// The first `n` of `rows` by `by`, highest first, ties by name: O(len) to find them, then
/// O(n log n) to sort them.
pub fn top(mut rows: Vec<&ClassSnapshot>, n: usize, by: TopBy) -> Vec<&ClassSnapshot> {
    let order = |a: &&ClassSnapshot, b: &&ClassSnapshot| {
        by.key(b)
            .total_cmp(&by.key(a))
            .then_with(|| a.name.cmp(&b.name))
    };
    if n == 0 {
        return Vec::new();
    }
    if n < rows.len() {
        rows.select_nth_unstable_by(n - 1, order);
        rows.truncate(n);
    }
    rows.sort_unstable_by(order);
    rows
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(name: &str, parent: Option<&str>, rate: f64, drops: u64, backlog: u64) -> ClassSnapshot {
        ClassSnapshot {
            name: name.to_string(),
            parent: parent.map(str::to_string),
            live_rate_bps: rate,
            drops,
            backlog_bytes: backlog,
            ..ClassSnapshot::default()
        }
    }

    fn snap(n: usize) -> Snapshot {
        let mut classes = vec![row("root", None, 0.0, 0, 0)];
        for i in 0..n {
            let parent = if i % 2 == 0 { "even" } else { "odd" };
            classes.push(row(
                &format!("c{i}"),
                Some(parent),
                (i * 10) as f64,
                (n - i) as u64,
                (i % 7) as u64,
            ));
        }
        Snapshot {
            uptime_s: 3.0,
            directions: vec![
                DirectionSnapshot {
                    classes,
                    ..DirectionSnapshot::default()
                },
                DirectionSnapshot::default(),
            ],
            ..Snapshot::default()
        }
    }

    fn names(s: &Snapshot) -> Vec<&str> {
        s.directions[0]
            .classes
            .iter()
            .map(|c| c.name.as_str())
            .collect()
    }

    #[test]
    fn everything_by_default_and_counts_kept() {
        let s = snap(5);
        let out = Select::default().apply(&s);
        assert_eq!(out.directions[0].classes, s.directions[0].classes);
        assert_eq!(out.directions[0].class_count, 6);
        assert_eq!(out.directions[1].class_count, 0);
        assert_eq!(out.uptime_s, 3.0);
    }

    #[test]
    fn by_class_and_by_parent() {
        let s = snap(6);
        let one = Select {
            class: Some("c3".into()),
            ..Select::default()
        };
        assert_eq!(names(&one.apply(&s)), ["c3"]);
        let odd = Select {
            parent: Some("odd".into()),
            ..Select::default()
        };
        assert_eq!(names(&odd.apply(&s)), ["c1", "c3", "c5"]);
        let none = Select {
            class: Some("nope".into()),
            ..Select::default()
        };
        assert!(names(&none.apply(&s)).is_empty());
        // A search matches part of a name, whatever its case, and combines with the others.
        let found = Select {
            search: Some("C1".into()),
            ..Select::default()
        };
        let s = snap(13);
        assert_eq!(names(&found.apply(&s)), ["c1", "c10", "c11", "c12"]);
        let odd = Select {
            parent: Some("odd".into()),
            ..found
        };
        assert_eq!(names(&odd.apply(&s)), ["c1", "c11"]);
    }

    /// `--class` finds a subscriber by its circuit id as well as by its name.
    #[test]
    fn by_circuit_id() {
        let mut s = snap(6);
        s.directions[0].classes[3].circuit_id = Some("C-42".into());
        let q = Select {
            class: Some("C-42".into()),
            ..Select::default()
        };
        assert_eq!(names(&q.apply(&s)), ["c2"]);
        let q = Select {
            class: Some("c2".into()),
            ..Select::default()
        };
        assert_eq!(names(&q.apply(&s)), ["c2"]);
    }

    #[test]
    fn top_n_by_each_key_matches_a_full_sort() {
        let s = snap(1000);
        for by in [TopBy::Rate, TopBy::Drops, TopBy::Backlog] {
            let q = Select {
                top: Some(20),
                by,
                ..Select::default()
            };
            let got = q.apply(&s);
            let mut all: Vec<&ClassSnapshot> = s.directions[0].classes.iter().collect();
            all.sort_by(|a, b| by.key(b).total_cmp(&by.key(a)).then(a.name.cmp(&b.name)));
            let want: Vec<&str> = all.iter().take(20).map(|c| c.name.as_str()).collect();
            assert_eq!(names(&got), want, "{by:?}");
        }
        // Rate: the highest rates first.
        let q = Select {
            top: Some(3),
            ..Select::default()
        };
        assert_eq!(names(&q.apply(&s)), ["c999", "c998", "c997"]);
        // More than there are: all of them, sorted.
        let q = Select {
            top: Some(5000),
            by: TopBy::Drops,
            ..Select::default()
        };
        let got = q.apply(&s);
        assert_eq!(got.directions[0].classes.len(), 1001);
        assert_eq!(names(&got)[0], "c0");
    }

    #[test]
    fn top_within_a_parent() {
        let s = snap(10);
        let q = Select {
            parent: Some("even".into()),
            top: Some(2),
            ..Select::default()
        };
        assert_eq!(names(&q.apply(&s)), ["c8", "c6"]);
    }

    #[test]
    fn pages_cover_every_class_once_and_are_capped() {
        let s = snap(25_000);
        let mut seen = Vec::new();
        let mut offset = 0;
        loop {
            let q = Select {
                offset,
                limit: Some(1_000_000),
                ..Select::default()
            };
            let page = q.apply(&s);
            let n = page.directions[0].classes.len();
            assert!(n <= MAX_PAGE, "page of {n}");
            if n == 0 {
                break;
            }
            seen.extend(page.directions[0].classes.iter().map(|c| c.name.clone()));
            offset += n;
        }
        let all: Vec<String> = s.directions[0]
            .classes
            .iter()
            .map(|c| c.name.clone())
            .collect();
        assert_eq!(seen, all);
    }

    #[test]
    fn the_request_form_round_trips_and_refuses_unknown_fields() {
        let q = Select {
            top: Some(20),
            by: TopBy::Backlog,
            ..Select::default()
        };
        let j = serde_json::to_string(&q).unwrap_or_default();
        assert_eq!(serde_json::from_str::<Select>(&j).ok(), Some(q));
        assert!(serde_json::from_str::<Select>(r#"{"tpo":3}"#).is_err());
        assert!(Select::default().is_all());
    }
}
