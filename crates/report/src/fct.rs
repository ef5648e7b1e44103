//! Flow completion times: the record of each arriving flow, their summary per group and size
//! bucket (`summary.json`'s `fct`), `fct.csv`, the terminal table's FCT section and the FCT CDF
//! plot.
//!
//! Principles:
//! * **One definition for every producer**: the simulator and the lab hand over the same
//!   [`FctRecord`]s and [`summarise`] turns them into the same figures, so `compare` holds like
//!   against like.
//! * **Buckets** are the ones congestion-control and AQM papers report (pFabric, Alizadeh et al.
//!   SIGCOMM 2013, §5; HPCC, Li et al. SIGCOMM 2019): small ≤ 100 kB, medium ≤ 10 MB, large
//!   above (decimal units, flow payload bytes), plus `all`.
//! * **Percentiles are exact**: nearest rank over the completed flows of the bucket (the
//!   `⌈q·n⌉`-th smallest). Flows still running at the end of the run are counted (`flows` −
//!   `completed`) but have no FCT; a bucket where many did not finish has optimistic percentiles,
//!   and the table says how many finished.
//! * **Slowdown** is FCT over the flow's unloaded FCT (`ideal_s`, computed by the producer: see
//!   `docs/outputs.md`); 1 is the empty network.

use std::collections::BTreeMap;
use std::fmt::Write;

use serde::Serialize;

use super::numfmt::fixed;
use super::plot::{downsample, Figure, Series};
use super::table::{Align, TextTable};

/// One arriving flow.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FctRecord {
    /// The `[[flow]]` entry it arrived from.
    pub group: String,
    pub flow: String,
    /// Payload bytes of the transfer (the response, with request/response).
    pub size_bytes: u64,
    /// When it arrived, seconds from the start of the run.
    pub start_s: f64,
    /// Arrival to the last byte in order at the receiver; `None`: not finished by the end.
    pub fct_s: Option<f64>,
    /// The unloaded FCT of the same transfer on the same path.
    pub ideal_s: f64,
}

impl FctRecord {
    pub fn slowdown(&self) -> Option<f64> {
        self.fct_s
            .filter(|_| self.ideal_s > 0.0)
            .map(|f| f / self.ideal_s)
    }
}

/// Size buckets: name, sizes above `.1` and at most `.2` (`None`: no upper bound).
pub const BUCKETS: [(&str, u64, Option<u64>); 4] = [
    ("all", 0, None),
    ("small", 0, Some(100_000)),
    ("medium", 100_000, Some(10_000_000)),
    ("large", 10_000_000, None),
];

/// FCT figures of one size bucket of one group.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct FctBucket {
    pub bucket: String,
    /// Sizes above `min_bytes` and at most `max_bytes` (absent: no bound).
    pub min_bytes: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_bytes: Option<u64>,
    pub flows: u64,
    pub completed: u64,
    /// Over the completed flows; absent when none completed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fct_p50_ms: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fct_p99_ms: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fct_mean_ms: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub slowdown_p50: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub slowdown_p99: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub slowdown_mean: Option<f64>,
}

/// FCT figures of one group of arriving flows: `all` first, then the non-empty buckets.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct FctSummary {
    pub flows: u64,
    pub completed: u64,
    pub buckets: Vec<FctBucket>,
}

impl FctSummary {
    pub fn bucket(&self, name: &str) -> Option<&FctBucket> {
        self.buckets.iter().find(|b| b.bucket == name)
    }
}

/// The `⌈q·n⌉`-th smallest of sorted `xs` (nearest rank); `None` when empty.
pub fn nearest_rank(sorted: &[f64], q: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let n = sorted.len();
    let rank = ((q * n as f64).ceil() as usize).clamp(1, n);
    Some(sorted[rank - 1])
}

fn mean(xs: &[f64]) -> Option<f64> {
    (!xs.is_empty()).then(|| xs.iter().sum::<f64>() / xs.len() as f64)
}

/// The summary of every group in `records`.
pub fn summarise(records: &[FctRecord]) -> BTreeMap<String, FctSummary> {
    let mut by_group: BTreeMap<&str, Vec<&FctRecord>> = BTreeMap::new();
    for r in records {
        by_group.entry(r.group.as_str()).or_default().push(r);
    }
    by_group
        .into_iter()
        .map(|(g, rs)| {
            let buckets: Vec<FctBucket> = BUCKETS
                .iter()
                .filter_map(|&(name, lo, hi)| {
                    let inb: Vec<&&FctRecord> = rs
                        .iter()
                        .filter(|r| {
                            name == "all"
                                || (r.size_bytes > lo && hi.is_none_or(|h| r.size_bytes <= h))
                        })
                        .collect();
                    if inb.is_empty() {
                        return None;
                    }
                    let mut fct: Vec<f64> = inb
                        .iter()
                        .filter_map(|r| r.fct_s)
                        .map(|s| s * 1e3)
                        .collect();
                    let mut slow: Vec<f64> = inb.iter().filter_map(|r| r.slowdown()).collect();
                    fct.sort_by(f64::total_cmp);
                    slow.sort_by(f64::total_cmp);
                    Some(FctBucket {
                        bucket: name.to_string(),
                        min_bytes: lo,
                        max_bytes: hi,
                        flows: inb.len() as u64,
                        completed: fct.len() as u64,
                        fct_p50_ms: nearest_rank(&fct, 0.5),
                        fct_p99_ms: nearest_rank(&fct, 0.99),
                        fct_mean_ms: mean(&fct),
                        slowdown_p50: nearest_rank(&slow, 0.5),
                        slowdown_p99: nearest_rank(&slow, 0.99),
                        slowdown_mean: mean(&slow),
                    })
                })
                .collect();
            let completed = rs.iter().filter(|r| r.fct_s.is_some()).count() as u64;
            (
                g.to_string(),
                FctSummary {
                    flows: rs.len() as u64,
                    completed,
                    buckets,
                },
            )
        })
        .collect()
}

/// The header of `fct.csv` (without the newline).
pub const FCT_HEADER: &str = "group,flow,size_bytes,start_s,fct_s,ideal_s,slowdown";

/// The text of `fct.csv`: one row per arriving flow, by arrival time then name; an unfinished
/// flow has empty `fct_s` and `slowdown`.
pub fn fct_csv(records: &[FctRecord]) -> String {
    let mut rows: Vec<&FctRecord> = records.iter().collect();
    rows.sort_by(|a, b| {
        a.start_s
            .total_cmp(&b.start_s)
            .then_with(|| a.flow.cmp(&b.flow))
    });
    let mut out = String::with_capacity(64 * (rows.len() + 1));
    out.push_str(FCT_HEADER);
    out.push('\n');
    for r in rows {
        let opt = |v: Option<f64>| v.map(|x| fixed(x, 6)).unwrap_or_default();
        let _ = writeln!(
            out,
            "{},{},{},{},{},{},{}",
            r.group,
            r.flow,
            r.size_bytes,
            fixed(r.start_s, 6),
            opt(r.fct_s),
            fixed(r.ideal_s, 6),
            r.slowdown().map(|x| fixed(x, 3)).unwrap_or_default()
        );
    }
    out
}

/// The terminal table's FCT section: one row per group and bucket.
pub fn fct_table(fct: &BTreeMap<String, FctSummary>) -> TextTable {
    let mut t = TextTable::new(&[
        ("group", Align::Left),
        ("sizes", Align::Left),
        ("done", Align::Right),
        ("fct p50", Align::Right),
        ("fct p99", Align::Right),
        ("slowdown p50", Align::Right),
        ("slowdown p99", Align::Right),
    ]);
    let ms = |v: Option<f64>| {
        v.map(|x| format!("{} ms", fixed(x, 2)))
            .unwrap_or("-".into())
    };
    let x = |v: Option<f64>| v.map(|x| fixed(x, 2)).unwrap_or("-".into());
    for (g, s) in fct {
        for b in &s.buckets {
            t.rows.push(vec![
                g.clone(),
                bucket_label(b),
                format!("{}/{}", b.completed, b.flows),
                ms(b.fct_p50_ms),
                ms(b.fct_p99_ms),
                x(b.slowdown_p50),
                x(b.slowdown_p99),
            ]);
        }
    }
    t
}

/// `all`, `≤100kB`, `100kB-10MB`, `>10MB`.
pub fn bucket_label(b: &FctBucket) -> String {
    let k = |v: u64| {
        if v >= 1_000_000 {
            format!("{}MB", v / 1_000_000)
        } else {
            format!("{}kB", v / 1000)
        }
    };
    match (b.bucket.as_str(), b.max_bytes) {
        ("all", _) => "all".into(),
        (_, Some(h)) if b.min_bytes == 0 => format!("<={}", k(h)),
        (_, Some(h)) => format!("{}-{}", k(b.min_bytes), k(h)),
        (_, None) => format!(">{}", k(b.min_bytes)),
    }
}

/// The FCT CDF plot: per group and non-empty size bucket, the share of completed flows with an
/// FCT up to x (ms). `None` without arriving flows.
pub fn fct_cdf_figure(records: &[FctRecord], title_prefix: &str) -> Option<Figure> {
    if records.is_empty() {
        return None;
    }
    let mut fig = Figure::new(
        "fct_cdf",
        &format!("{title_prefix}flow completion time (CDF)"),
        "flow completion time (ms)",
        "fraction of completed flows",
    );
    fig.empty_message = "no flow completed".into();
    let mut groups: BTreeMap<&str, Vec<&FctRecord>> = BTreeMap::new();
    for r in records {
        groups.entry(r.group.as_str()).or_default().push(r);
    }
    let mut i = 0;
    for (g, rs) in groups {
        for &(name, lo, hi) in &BUCKETS[1..] {
            let mut v: Vec<f64> = rs
                .iter()
                .filter(|r| r.size_bytes > lo && hi.is_none_or(|h| r.size_bytes <= h))
                .filter_map(|r| r.fct_s)
                .map(|s| s * 1e3)
                .collect();
            if v.is_empty() {
                continue;
            }
            v.sort_by(f64::total_cmp);
            let n = v.len() as f64;
            let pts: Vec<(f64, f64)> = v
                .iter()
                .enumerate()
                .map(|(k, x)| (*x, (k + 1) as f64 / n))
                .collect();
            let label = FctBucket {
                bucket: name.into(),
                min_bytes: lo,
                max_bytes: hi,
                ..FctBucket::default()
            };
            fig.series.push(Series::data(
                i,
                format!("{g} {}", bucket_label(&label)),
                downsample(&pts, super::plot::layout::MAX_POINTS),
            ));
            i += 1;
        }
    }
    Some(fig)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(size: u64, fct: Option<f64>, ideal: f64) -> FctRecord {
        FctRecord {
            group: "web".into(),
            flow: format!("web.{size}"),
            size_bytes: size,
            start_s: 0.0,
            fct_s: fct,
            ideal_s: ideal,
        }
    }

    #[test]
    fn nearest_rank_is_the_order_statistic() {
        let xs: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(nearest_rank(&xs, 0.5), Some(50.0));
        assert_eq!(nearest_rank(&xs, 0.99), Some(99.0));
        assert_eq!(nearest_rank(&xs, 1.0), Some(100.0));
        assert_eq!(nearest_rank(&[], 0.5), None);
        assert_eq!(nearest_rank(&[7.0], 0.99), Some(7.0));
    }

    #[test]
    fn buckets_split_by_size_and_count_unfinished_flows() {
        let rs = vec![
            rec(1_000, Some(0.010), 0.005),
            rec(100_000, Some(0.030), 0.010),
            rec(100_001, Some(0.200), 0.050),
            rec(20_000_000, None, 1.0),
        ];
        let s = summarise(&rs);
        let web = &s["web"];
        assert_eq!((web.flows, web.completed), (4, 3));
        let names: Vec<&str> = web.buckets.iter().map(|b| b.bucket.as_str()).collect();
        assert_eq!(names, ["all", "small", "medium", "large"]);
        let small = web.bucket("small").unwrap();
        assert_eq!((small.flows, small.completed), (2, 2));
        assert_eq!(small.fct_p50_ms, Some(10.0));
        assert_eq!(small.fct_p99_ms, Some(30.0));
        assert_eq!(small.slowdown_p99, Some(3.0));
        let large = web.bucket("large").unwrap();
        assert_eq!((large.flows, large.completed), (1, 0));
        assert_eq!(large.fct_p50_ms, None);
        assert_eq!(bucket_label(small), "<=100kB");
        assert_eq!(bucket_label(web.bucket("medium").unwrap()), "100kB-10MB");
        assert_eq!(bucket_label(large), ">10MB");
    }

    #[test]
    fn csv_rows_by_arrival_with_empty_cells_for_unfinished() {
        let mut a = rec(5, Some(0.5), 0.25);
        a.start_s = 2.0;
        let b = rec(7, None, 0.1);
        let text = fct_csv(&[a, b]);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], FCT_HEADER);
        assert_eq!(lines[1], "web,web.7,7,0,,0.1,");
        assert_eq!(lines[2], "web,web.5,5,2,0.5,0.25,2");
    }
}
