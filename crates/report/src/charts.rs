//! The plots of a run, as [`Figure`]s built from a [`SimResult`].
//!
//! | file stem            | shows                                                            |
//! |----------------------|------------------------------------------------------------------|
//! | `throughput_classes` | sending rate of each leaf class per sample interval + link rate   |
//! | `throughput_flows`   | goodput of each flow per sample interval                         |
//! | `rtt`                | every RTT probe of each TCP/ping flow (≤ 2000 points per flow)    |
//! | `backlog_classes`    | queue length of each leaf class at the end of each interval       |
//! | `fct_cdf`            | CDF of the completion times of arriving flows, per size bucket    |
//!
//! Inner classes are left out of the per-class plots: their rate is the sum of their children's
//! and would squash the leaves; the tables carry their numbers. Series are ordered like the
//! tables (classes in tree order, flows by name) and keep one colour per class across plots.

use std::collections::BTreeMap;

use super::numfmt::{rate_unit, size_unit};
use super::order::{class_tree, inner_classes};
use super::plot::layout::MAX_POINTS;
use super::plot::{downsample, Figure, Series};
use crate::model::{SeriesKind, SimResult};

/// One plot and where it goes.
#[derive(Clone, Debug)]
pub struct Chart {
    /// File name without extension (`.svg` and `.png` are written).
    pub stem: &'static str,
    pub figure: Figure,
    /// One sentence for the HTML report.
    pub caption: String,
}

/// All plots of `result`, in report order.
pub fn charts(result: &SimResult) -> Vec<Chart> {
    let s = &result.summary;
    let x_range = (s.duration_s.is_finite() && s.duration_s > 0.0).then_some((0.0, s.duration_s));
    let prefix = if s.scenario.is_empty() {
        String::new()
    } else {
        format!("{}: ", s.scenario)
    };

    let class_series = series_by_name(result, SeriesKind::Class);
    let flow_series = series_by_name(result, SeriesKind::Flow);

    // Leaf classes in tree order, then any sampled class the summary does not know.
    let inner = inner_classes(s);
    let mut classes: Vec<String> = class_tree(s)
        .into_iter()
        .map(|(n, _)| n)
        .filter(|n| !inner.contains(n) && class_series.contains_key(n.as_str()))
        .collect();
    for name in class_series.keys() {
        if !s.classes.contains_key(*name) {
            classes.push(name.to_string());
        }
    }
    if classes.is_empty() {
        classes = class_series.keys().map(|n| n.to_string()).collect();
    }

    // Throughput per class, with the link rate for reference.
    let max_class_rate = classes
        .iter()
        .flat_map(|n| class_series[n.as_str()].iter().map(|p| p.rate))
        .fold(s.link.rate_bps, f64::max);
    let (div, unit) = rate_unit(max_class_rate);
    let mut fig = Figure::new(
        "throughput_classes",
        &format!("{prefix}throughput per class"),
        "time (s)",
        &format!("throughput ({unit})"),
    );
    fig.x_range = x_range;
    fig.empty_message = "no class samples".into();
    for (i, name) in classes.iter().enumerate() {
        let pts = class_series[name.as_str()]
            .iter()
            .map(|p| (p.t, p.rate / div))
            .collect();
        fig.series.push(Series::data(i, name.clone(), pts));
    }
    if s.link.rate_bps > 0.0 && !classes.is_empty() {
        let (a, b) = x_range.unwrap_or_else(|| time_span(&fig.series));
        let r = s.link.rate_bps / div;
        fig.series
            .push(Series::reference("link rate", vec![(a, r), (b, r)]));
    }
    let mut out = vec![Chart {
        stem: "throughput_classes",
        figure: fig,
        caption: "Sending rate of each leaf class on the bottleneck per sample interval; \
                  dashed: the link rate."
            .into(),
    }];

    // Goodput per flow.
    let max_flow_rate = flow_series
        .values()
        .flat_map(|v| v.iter().map(|p| p.rate))
        .fold(0.0, f64::max);
    let (div, unit) = rate_unit(max_flow_rate);
    let mut fig = Figure::new(
        "throughput_flows",
        &format!("{prefix}throughput per flow"),
        "time (s)",
        &format!("goodput ({unit})"),
    );
    fig.x_range = x_range;
    fig.empty_message = "no flow samples".into();
    for (i, (name, pts)) in flow_series.iter().enumerate() {
        let pts = pts.iter().map(|p| (p.t, p.rate / div)).collect();
        fig.series.push(Series::data(i, *name, pts));
    }
    out.push(Chart {
        stem: "throughput_flows",
        figure: fig,
        caption: "Bytes each flow delivered to its receiver per sample interval, as a rate.".into(),
    });

    // RTT over time, from the individual probes.
    let mut rtt: BTreeMap<&str, Vec<(f64, f64)>> = BTreeMap::new();
    for (t, flow, ms) in &result.rtt_points {
        rtt.entry(flow.as_str()).or_default().push((*t, *ms));
    }
    let mut fig = Figure::new(
        "rtt",
        &format!("{prefix}round-trip time"),
        "time (s)",
        "RTT (ms)",
    );
    fig.x_range = x_range;
    fig.empty_message = "no RTT samples (no TCP or ping flows)".into();
    for (i, (name, mut pts)) in rtt.into_iter().enumerate() {
        pts.sort_by(|a, b| a.0.total_cmp(&b.0));
        fig.series
            .push(Series::data(i, name, downsample(&pts, MAX_POINTS)));
    }
    out.push(Chart {
        stem: "rtt",
        figure: fig,
        caption: "Round-trip time of each TCP and ping flow's probes (at most 2000 points per \
                  flow: the minimum and maximum of equal-sized runs)."
            .into(),
    });

    // Backlog per class.
    let max_backlog = classes
        .iter()
        .flat_map(|n| class_series[n.as_str()].iter().map(|p| p.backlog))
        .fold(0.0, f64::max);
    let (div, unit) = size_unit(max_backlog);
    let mut fig = Figure::new(
        "backlog_classes",
        &format!("{prefix}backlog per class"),
        "time (s)",
        &format!("backlog ({unit})"),
    );
    fig.x_range = x_range;
    fig.empty_message = "no class samples".into();
    for (i, name) in classes.iter().enumerate() {
        let pts = class_series[name.as_str()]
            .iter()
            .map(|p| (p.t, p.backlog / div))
            .collect();
        fig.series.push(Series::data(i, name.clone(), pts));
    }
    out.push(Chart {
        stem: "backlog_classes",
        figure: fig,
        caption: "Bytes queued in each leaf class at the end of each sample interval.".into(),
    });
    if let Some(figure) = crate::fct::fct_cdf_figure(&result.fct, &prefix) {
        out.push(Chart {
            stem: "fct_cdf",
            figure,
            caption: "Share of the completed arriving flows of each group and size bucket that \
                      finished within x ms (fct.csv)."
                .into(),
        });
    }
    out
}

/// One sample reduced to what the plots need.
struct Point {
    t: f64,
    rate: f64,
    backlog: f64,
}

/// Samples of `kind` grouped by name, each series sorted by time.
fn series_by_name(result: &SimResult, kind: SeriesKind) -> BTreeMap<&str, Vec<Point>> {
    let mut map: BTreeMap<&str, Vec<Point>> = BTreeMap::new();
    for s in result.samples.iter().filter(|s| s.kind == kind) {
        map.entry(s.name.as_str()).or_default().push(Point {
            t: s.time_s,
            rate: s.rate_bps,
            backlog: s.backlog_bytes as f64,
        });
    }
    for pts in map.values_mut() {
        pts.sort_by(|a, b| a.t.total_cmp(&b.t));
    }
    map
}

/// Smallest and largest x over all series (0..1 when empty).
fn time_span(series: &[Series]) -> (f64, f64) {
    let mut lo = f64::INFINITY;
    let mut hi = f64::NEG_INFINITY;
    for s in series {
        for &(x, _) in &s.points {
            lo = lo.min(x);
            hi = hi.max(x);
        }
    }
    if lo.is_finite() && hi.is_finite() {
        (lo.min(0.0), hi)
    } else {
        (0.0, 1.0)
    }
}
