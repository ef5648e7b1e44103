//! The per-class and per-flow figures of a run, as rows of named columns.
//!
//! One row per class and per flow (classes then flows, by name), with every figure the summary
//! has for it: rate, bytes, packets, drops and loss, TCP's retransmits, timeouts and window
//! reductions, and the RTT and one-way-delay statistics (min, mean, p50, p99, max, samples).
//! `sweep.csv` writes these columns and the Python package builds its DataFrames from them, so
//! both say the same thing under the same names (`docs/outputs.md`).
//!
//! Principle: one table of `(column, getter)`; a figure a row does not have (a class's RTT, a
//! UDP flow's retransmits) is [`Cell::Missing`], never a made-up zero.

use std::collections::BTreeMap;

use crate::model::{ClassSummary, FlowSummary, RttStats, Summary};

/// One value of a row.
#[derive(Clone, Debug, PartialEq)]
pub enum Cell<'a> {
    Str(&'a str),
    Int(u64),
    Num(f64),
    Missing,
}

/// What a row is about.
#[derive(Clone, Copy, Debug)]
pub enum Subject<'a> {
    Class(&'a ClassSummary),
    /// A flow and the mean rate it offers (UDP; 0 for TCP and ping).
    Flow(&'a FlowSummary, f64),
}

/// One class or flow of a run.
#[derive(Clone, Copy, Debug)]
pub struct Row<'a> {
    pub name: &'a str,
    pub subject: Subject<'a>,
}

type Getter = for<'a> fn(&Row<'a>) -> Cell<'a>;

/// Every column, in output order. The first seven are `sweep.csv`'s historical columns.
pub const COLUMNS: &[(&str, Getter)] = &[
    ("kind", |r| Cell::Str(r.kind())),
    ("name", |r| Cell::Str(r.name)),
    ("rate_bps", |r| match r.subject {
        Subject::Class(c) => Cell::Num(c.rate_bps),
        Subject::Flow(f, _) => Cell::Num(f.goodput_bps),
    }),
    ("assigned_rate_bps", |r| match r.subject {
        Subject::Class(c) => Cell::Num(c.assigned_rate_bps),
        Subject::Flow(_, offered) => Cell::Num(offered),
    }),
    ("bytes", |r| match r.subject {
        Subject::Class(c) => Cell::Int(c.bytes),
        Subject::Flow(f, _) => Cell::Int(f.bytes_delivered),
    }),
    ("packets", |r| match r.subject {
        Subject::Class(c) => Cell::Int(c.packets),
        Subject::Flow(f, _) => Cell::Int(f.packets_sent),
    }),
    ("drops", |r| match r.subject {
        Subject::Class(c) => Cell::Int(c.drops),
        Subject::Flow(f, _) => Cell::Int(f.packets_lost),
    }),
    ("class", |r| match r.subject {
        Subject::Class(c) => c.parent.as_deref().map(Cell::Str).unwrap_or(Cell::Missing),
        Subject::Flow(f, _) => Cell::Str(&f.class),
    }),
    ("loss", |r| match r.subject {
        Subject::Class(c) => ratio(c.drops, c.packets + c.drops),
        Subject::Flow(f, _) => ratio(f.packets_lost, f.packets_sent),
    }),
    ("retransmits", |r| tcp(r, |f| f.retransmits)),
    ("timeouts", |r| tcp(r, |f| f.timeouts)),
    ("cwnd_reductions", |r| tcp(r, |f| f.cwnd_reductions)),
    ("rtt_min_ms", |r| stat(r.rtt(), |s| s.min)),
    ("rtt_mean_ms", |r| stat(r.rtt(), |s| s.mean)),
    ("rtt_p50_ms", |r| stat(r.rtt(), |s| s.p50)),
    ("rtt_p99_ms", |r| stat(r.rtt(), |s| s.p99)),
    ("rtt_max_ms", |r| stat(r.rtt(), |s| s.max)),
    ("rtt_samples", |r| count(r.rtt())),
    ("owd_min_ms", |r| stat(r.owd(), |s| s.min)),
    ("owd_mean_ms", |r| stat(r.owd(), |s| s.mean)),
    ("owd_p50_ms", |r| stat(r.owd(), |s| s.p50)),
    ("owd_p99_ms", |r| stat(r.owd(), |s| s.p99)),
    ("owd_max_ms", |r| stat(r.owd(), |s| s.max)),
    ("owd_samples", |r| count(r.owd())),
    ("ceil_bps", |r| class(r, |c| Cell::Num(c.ceil_bps))),
    ("overlimits", |r| class(r, |c| Cell::Int(c.overlimits))),
    ("lends", |r| class(r, |c| Cell::Int(c.lends))),
    ("borrows", |r| class(r, |c| Cell::Int(c.borrows))),
];

fn ratio(part: u64, whole: u64) -> Cell<'static> {
    if whole == 0 {
        Cell::Num(0.0)
    } else {
        Cell::Num(part as f64 / whole as f64)
    }
}

fn tcp<'a>(r: &Row<'a>, get: fn(&FlowSummary) -> u64) -> Cell<'a> {
    match r.subject {
        Subject::Flow(f, _) if f.kind == "tcp" => Cell::Int(get(f)),
        _ => Cell::Missing,
    }
}

fn class<'a>(r: &Row<'a>, get: fn(&'a ClassSummary) -> Cell<'a>) -> Cell<'a> {
    match r.subject {
        Subject::Class(c) => get(c),
        Subject::Flow(..) => Cell::Missing,
    }
}

fn stat(s: Option<&RttStats>, get: fn(&RttStats) -> f64) -> Cell<'static> {
    match s {
        Some(s) if s.samples > 0 => Cell::Num(get(s)),
        _ => Cell::Missing,
    }
}

fn count(s: Option<&RttStats>) -> Cell<'static> {
    s.map(|s| Cell::Int(s.samples)).unwrap_or(Cell::Missing)
}

impl<'a> Row<'a> {
    pub fn kind(&self) -> &'static str {
        match self.subject {
            Subject::Class(_) => "class",
            Subject::Flow(..) => "flow",
        }
    }
    fn rtt(&self) -> Option<&'a RttStats> {
        match self.subject {
            Subject::Flow(f, _) => f.rtt_ms.as_ref(),
            Subject::Class(_) => None,
        }
    }
    fn owd(&self) -> Option<&'a RttStats> {
        match self.subject {
            Subject::Flow(f, _) => f.owd_ms.as_ref(),
            Subject::Class(_) => None,
        }
    }
    /// The value of column `i` of [`COLUMNS`] (`Missing` past the end).
    pub fn cell(&self, i: usize) -> Cell<'a> {
        COLUMNS
            .get(i)
            .map(|(_, get)| get(self))
            .unwrap_or(Cell::Missing)
    }
}

/// The rows of a run: classes, then flows, each by name. `offered` is the mean rate each UDP
/// flow offers (`crate::sweep::offered_by_flow`).
pub fn rows<'a>(s: &'a Summary, offered: &BTreeMap<String, f64>) -> Vec<Row<'a>> {
    let classes = s.classes.iter().map(|(name, c)| Row {
        name,
        subject: Subject::Class(c),
    });
    let flows = s.flows.iter().map(|(name, f)| Row {
        name,
        subject: Subject::Flow(f, offered.get(name).copied().unwrap_or(0.0)),
    });
    classes.chain(flows).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_are_unique_and_rows_fill_them() {
        let names: std::collections::BTreeSet<&str> = COLUMNS.iter().map(|c| c.0).collect();
        assert_eq!(names.len(), COLUMNS.len());
        let mut s = Summary::default();
        s.classes.insert(
            "c".into(),
            ClassSummary {
                packets: 90,
                drops: 10,
                parent: Some("root".into()),
                ..Default::default()
            },
        );
        s.flows.insert(
            "t".into(),
            FlowSummary {
                kind: "tcp".into(),
                class: "c".into(),
                packets_sent: 50,
                packets_lost: 5,
                retransmits: 4,
                rtt_ms: Some(RttStats {
                    p99: 12.5,
                    samples: 3,
                    ..Default::default()
                }),
                ..Default::default()
            },
        );
        let offered = BTreeMap::new();
        let rows = rows(&s, &offered);
        assert_eq!(rows.len(), 2);
        let col = |n: &str| COLUMNS.iter().position(|c| c.0 == n).unwrap();
        assert_eq!(rows[0].cell(col("kind")), Cell::Str("class"));
        assert_eq!(rows[0].cell(col("loss")), Cell::Num(0.1));
        assert_eq!(rows[0].cell(col("class")), Cell::Str("root"));
        assert_eq!(rows[0].cell(col("rtt_p99_ms")), Cell::Missing);
        assert_eq!(rows[1].cell(col("loss")), Cell::Num(0.1));
        assert_eq!(rows[1].cell(col("retransmits")), Cell::Int(4));
        assert_eq!(rows[1].cell(col("rtt_p99_ms")), Cell::Num(12.5));
        assert_eq!(rows[1].cell(col("owd_p99_ms")), Cell::Missing);
        assert_eq!(rows[1].cell(col("ceil_bps")), Cell::Missing);
    }
}
