//! The plots of a run, as [`Figure`]s built from a [`SimResult`].
//!
//! | file stem            | shows                                                            |
//! |----------------------|------------------------------------------------------------------|
//! | `throughput_classes` | sending rate of each leaf class per sample interval + link rate   |
//! | `throughput_small_classes` | the classes too small for that axis ([`SMALL`]), if any    |
//! | `throughput_flows`   | goodput of each flow per sample interval                         |
//! | `rtt`                | every RTT probe of each TCP/ping flow (≤ 2000 points per flow)    |
//! |                      | and each UDP flow's one-way delay per interval                   |
//! | `rtt_small`          | the flows whose delay is too low for that axis, if any           |
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

    // Throughput per class, with the link rate for reference; classes too small to read on
    // that axis (a VoIP class under a bulk one) get a panel of their own.
    let peaks: Vec<f64> = classes
        .iter()
        .map(|n| {
            class_series[n.as_str()]
                .iter()
                .map(|p| p.rate)
                .fold(0.0, f64::max)
        })
        .collect();
    let (large, small) = split_small(&peaks);
    let class_chart = |stem: &'static str, title: &str, which: &[usize], link: bool| {
        let max = which
            .iter()
            .map(|&i| peaks[i])
            .fold(if link { s.link.rate_bps } else { 0.0 }, f64::max);
        let (div, unit) = rate_unit(max);
        let mut fig = Figure::new(stem, title, "time (s)", &format!("throughput ({unit})"));
        fig.x_range = x_range;
        fig.empty_message = "no class samples".into();
        for &i in which {
            let pts = class_series[classes[i].as_str()]
                .iter()
                .map(|p| (p.t, p.rate / div))
                .collect();
            fig.series.push(Series::data(i, classes[i].clone(), pts));
        }
        if link && s.link.rate_bps > 0.0 && !which.is_empty() {
            let (a, b) = x_range.unwrap_or_else(|| time_span(&fig.series));
            let r = s.link.rate_bps / div;
            fig.series
                .push(Series::reference("link rate", vec![(a, r), (b, r)]));
        }
        fig
    };
    let mut out = vec![Chart {
        stem: "throughput_classes",
        figure: class_chart(
            "throughput_classes",
            &format!("{prefix}throughput per class"),
            &large,
            true,
        ),
        caption: "Sending rate of each leaf class on the bottleneck per sample interval; \
                  dashed: the link rate."
            .into(),
    }];
    if !small.is_empty() {
        out.push(Chart {
            stem: "throughput_small_classes",
            figure: class_chart(
                "throughput_small_classes",
                &format!("{prefix}throughput of the small classes"),
                &small,
                false,
            ),
            caption: format!(
                "The classes whose peak rate is under {} % of the largest class's, on their own \
                 axis (same colours as above).",
                SMALL * 100.0
            ),
        });
    }

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

    // Delay over time: every RTT probe (TCP, ping) and each UDP flow's one-way delay per
    // interval; series too low to read beside the largest (an EF ping under bulk TCP's queue)
    // get a panel of their own.
    let mut delay: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
    for (t, flow, ms) in &result.rtt_points {
        delay.entry(flow.clone()).or_default().push((*t, *ms));
    }
    for (t, flow, ms) in &result.owd_points {
        delay
            .entry(format!("{flow} (one-way)"))
            .or_default()
            .push((*t, *ms));
    }
    let delay: Vec<(String, Vec<(f64, f64)>)> = delay
        .into_iter()
        .map(|(n, mut pts)| {
            pts.sort_by(|a, b| a.0.total_cmp(&b.0));
            (n, downsample(&pts, MAX_POINTS))
        })
        .collect();
    let peaks: Vec<f64> = delay
        .iter()
        .map(|(_, p)| p.iter().map(|q| q.1).fold(0.0, f64::max))
        .collect();
    let (large, small) = split_small(&peaks);
    let delay_chart = |stem: &'static str, title: &str, which: &[usize]| {
        let mut fig = Figure::new(stem, title, "time (s)", "delay (ms)");
        fig.x_range = x_range;
        fig.empty_message = "no RTT samples or one-way delays (no TCP, ping or UDP flows)".into();
        for &i in which {
            let (name, pts) = &delay[i];
            fig.series.push(Series::data(i, name.clone(), pts.clone()));
        }
        fig
    };
    out.push(Chart {
        stem: "rtt",
        figure: delay_chart("rtt", &format!("{prefix}delay"), &large),
        caption: "Round-trip time of each TCP and ping flow's probes, and each UDP flow's mean \
                  one-way delay per sample interval (\"(one-way)\"); at most 2000 points per \
                  flow: the minimum and maximum of equal-sized runs."
            .into(),
    });
    if !small.is_empty() {
        out.push(Chart {
            stem: "rtt_small",
            figure: delay_chart(
                "rtt_small",
                &format!("{prefix}delay of the low-delay flows"),
                &small,
            ),
            caption: format!(
                "The flows whose largest delay is under {} % of the largest flow's, on their \
                 own axis (same colours as above).",
                SMALL * 100.0
            ),
        });
    }

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

/// A series whose peak is under this share of the largest series' peak is drawn on a panel of
/// its own: on a shared axis it would lie flat along the bottom (under an eighth of the height).
const SMALL: f64 = 0.125;

/// Indices of the series that stay on the main panel and of those too small for it.
fn split_small(peaks: &[f64]) -> (Vec<usize>, Vec<usize>) {
    let max = peaks.iter().copied().fold(0.0, f64::max);
    (0..peaks.len()).partition(|&i| !(max > 0.0 && peaks[i] < SMALL * max))
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
