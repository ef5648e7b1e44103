//! Runs over several seeds, and the mean and confidence interval of each figure across them.
//!
//! A seed changes every kind of traffic (`crate::jitter`: Poisson gaps, IMIX sizes, start
//! offsets, ACK jitter; arrival times are drawn when the scenario is checked), so the runs of
//! one point under seeds 1..N are independent samples of what the point gives. Where a sweep
//! has an axis that sets `seed` (written in the file, or added by `linkshare sim --seeds N`),
//! [`intervals`] groups its points by the other axes and gives, for every class and flow and
//! every numeric figure of [`crate::figures::COLUMNS`], the mean, the sample standard deviation,
//! the number of seeds and the half-width of the 95 % confidence interval of the mean
//! (Student's t with n − 1 degrees of freedom). The Python package's `linkshare.summarize`
//! computes the same figures from a DataFrame.
//!
//! Rule: a figure a run does not have (a class's RTT) is left out of its group, never counted as
//! zero; a group with one seed has no interval.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::figures::{rows, Cell, COLUMNS};
use crate::scenario::{Axis, Point, Scenario, Sweep};
use crate::sweep::{SweepResult, MAX_POINTS};

/// The key an axis sets to vary the seed.
pub const SEED_KEY: &str = "seed";

/// Two-sided 95 % Student t quantiles for 1..=30 degrees of freedom; 1.96 beyond.
const T95: [f64; 30] = [
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
    2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
    2.052, 2.048, 2.045, 2.042,
];

/// The 95 % two-sided t quantile for `dof` degrees of freedom (NaN for 0).
pub fn t95(dof: usize) -> f64 {
    match dof {
        0 => f64::NAN,
        d if d <= T95.len() => T95[d - 1],
        _ => 1.960,
    }
}

/// One sweep from the same scenario loaded under each seed: the points of each load's sweep (or
/// the load itself when it has none) with a last axis `seed`, the seed varying fastest.
/// `loads` are `(seed, scenario)` in the order the seeds were given; every load must come from
/// the same file and edits, so their sweeps have the same axes and points.
pub fn with_seeds(loads: Vec<(u64, Scenario)>) -> Result<Sweep, String> {
    let seeds: Vec<u64> = loads.iter().map(|(s, _)| *s).collect();
    let mut per_seed: Vec<(Vec<Axis>, Vec<Point>)> = Vec::with_capacity(loads.len());
    for (_, mut sc) in loads {
        if let Some(sw) = sc.sweep.take() {
            if sw.axes.iter().any(|a| a.keys.iter().any(|k| k == SEED_KEY)) {
                return Err(
                    "the scenario's [sweep] already has an axis that sets `seed`: \
                            drop --seeds or that axis"
                        .into(),
                );
            }
            per_seed.push((sw.axes, sw.points));
        } else {
            let point = Point {
                index: 1,
                labels: Vec::new(),
                values: Vec::new(),
                edits: Vec::new(),
                scenario: sc,
            };
            per_seed.push((Vec::new(), vec![point]));
        }
    }
    let Some((axes0, points0)) = per_seed.first() else {
        return Err("--seeds needs at least one seed".into());
    };
    let total = points0.len() * seeds.len();
    if total > MAX_POINTS {
        return Err(format!(
            "{} points × {} seeds = {total} runs, above the sweep limit of {MAX_POINTS}",
            points0.len(),
            seeds.len()
        ));
    }
    let mut axes = axes0.clone();
    axes.push(Axis {
        name: SEED_KEY.into(),
        keys: vec![SEED_KEY.into()],
        labels: seeds.iter().map(|s| s.to_string()).collect(),
        values: seeds
            .iter()
            .map(|&s| toml::Value::Integer(s as i64))
            .collect(),
    });
    let n_points = points0.len();
    let mut iters: Vec<_> = per_seed.into_iter().map(|(_, p)| p.into_iter()).collect();
    let mut points = Vec::with_capacity(total);
    for _ in 0..n_points {
        for (k, it) in iters.iter_mut().enumerate() {
            let Some(mut p) = it.next() else {
                return Err("the scenario gave a different sweep under another seed".into());
            };
            p.index = points.len() + 1;
            p.labels.push(seeds[k].to_string());
            p.values.push(toml::Value::Integer(seeds[k] as i64));
            p.edits
                .push((SEED_KEY.into(), Some(toml::Value::Integer(seeds[k] as i64))));
            points.push(p);
        }
    }
    Ok(Sweep { axes, points })
}

/// One figure of one class or flow over the seeds of one group.
#[derive(Clone, Debug, PartialEq)]
pub struct Interval {
    pub n: usize,
    pub mean: f64,
    /// Sample standard deviation (n − 1); NaN for one seed.
    pub sd: f64,
    /// Half-width of the 95 % confidence interval of the mean; NaN for one seed.
    pub ci95: f64,
}

impl Interval {
    fn of(xs: &[f64]) -> Interval {
        let n = xs.len();
        let mean = xs.iter().sum::<f64>() / n as f64;
        if n < 2 {
            return Interval {
                n,
                mean,
                sd: f64::NAN,
                ci95: f64::NAN,
            };
        }
        let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
        let sd = var.sqrt();
        Interval {
            n,
            mean,
            sd,
            ci95: t95(n - 1) * sd / (n as f64).sqrt(),
        }
    }
}

/// A class or flow: `(kind, name)`.
pub type Subject = (String, String);

/// One figure's samples by column name.
type Samples = BTreeMap<&'static str, Vec<f64>>;

/// A group's subjects in order of first appearance, and their samples.
type GroupSamples = (Vec<Subject>, BTreeMap<Subject, Samples>);

/// The points of a sweep that differ only in their seed.
#[derive(Clone, Debug)]
pub struct Group {
    /// The labels of the axes other than the seed's.
    pub labels: Vec<String>,
    /// `(kind, name)` in order of first appearance, each with its figures by column name.
    pub rows: Vec<(Subject, BTreeMap<&'static str, Interval>)>,
}

/// Every group of a sweep with a seed axis.
#[derive(Clone, Debug)]
pub struct Intervals {
    /// Names of the axes other than the seed's.
    pub axes: Vec<String>,
    pub seeds: usize,
    pub groups: Vec<Group>,
}

/// The mean and interval of every figure over the seed axis of `r`, or `None` when no axis sets
/// `seed` alone or it has fewer than two values.
pub fn intervals(r: &SweepResult) -> Option<Intervals> {
    let seed_axis = r
        .axes
        .iter()
        .position(|a| a.keys.len() == 1 && a.keys[0] == SEED_KEY && a.values.len() >= 2)?;
    let axes: Vec<String> = r
        .axes
        .iter()
        .enumerate()
        .filter(|&(i, _)| i != seed_axis)
        .map(|(_, a)| a.name.clone())
        .collect();
    let mut order: Vec<Vec<String>> = Vec::new();
    let mut by_group: BTreeMap<Vec<String>, GroupSamples> = BTreeMap::new();
    for p in &r.points {
        let key: Vec<String> = p
            .labels
            .iter()
            .enumerate()
            .filter(|&(i, _)| i != seed_axis)
            .map(|(_, l)| l.clone())
            .collect();
        let entry = by_group.entry(key.clone()).or_insert_with(|| {
            order.push(key);
            Default::default()
        });
        for row in rows(&p.result.summary, &p.flow_offered_bps) {
            let id = (row.kind().to_string(), row.name.to_string());
            let samples = entry.1.entry(id.clone()).or_insert_with(|| {
                entry.0.push(id);
                BTreeMap::new()
            });
            for (i, (col, _)) in COLUMNS.iter().enumerate() {
                let x = match row.cell(i) {
                    Cell::Int(n) => n as f64,
                    Cell::Num(x) if x.is_finite() => x,
                    _ => continue,
                };
                samples.entry(*col).or_default().push(x);
            }
        }
    }
    let seeds = r.axes[seed_axis].values.len();
    let groups = order
        .into_iter()
        .filter_map(|key| {
            let (ids, mut samples) = by_group.remove(&key)?;
            let rows = ids
                .into_iter()
                .map(|id| {
                    let figs = samples
                        .remove(&id)
                        .unwrap_or_default()
                        .into_iter()
                        .map(|(c, xs)| (c, Interval::of(&xs)))
                        .collect();
                    (id, figs)
                })
                .collect();
            Some(Group { labels: key, rows })
        })
        .collect();
    Some(Intervals {
        axes,
        seeds,
        groups,
    })
}

impl Intervals {
    /// Write `sweep-ci.csv` into `dir` (beside the sweep's own files).
    pub fn write(&self, dir: &std::path::Path) -> std::io::Result<std::path::PathBuf> {
        std::fs::create_dir_all(dir)?;
        let p = dir.join("sweep-ci.csv");
        std::fs::write(&p, self.csv())?;
        Ok(p)
    }

    /// `sweep-ci.csv`: one row per group, class or flow and figure: the other axes' labels,
    /// `kind`, `name`, `figure`, `n`, `mean`, `sd`, `ci95` (half-width), `low`, `high`.
    pub fn csv(&self) -> String {
        let mut out = String::new();
        for a in &self.axes {
            out.push_str(a);
            out.push(',');
        }
        out.push_str("kind,name,figure,n,mean,sd,ci95,low,high\n");
        for g in &self.groups {
            for ((kind, name), figs) in &g.rows {
                // Columns in COLUMNS order, not alphabetical.
                for (col, _) in COLUMNS {
                    let Some(iv) = figs.get(col) else { continue };
                    for l in &g.labels {
                        crate::sweep::push_field(&mut out, l);
                        out.push(',');
                    }
                    crate::sweep::push_field(&mut out, kind);
                    out.push(',');
                    crate::sweep::push_field(&mut out, name);
                    let _ = write!(out, ",{col},{}", iv.n);
                    for x in [
                        iv.mean,
                        iv.sd,
                        iv.ci95,
                        iv.mean - iv.ci95,
                        iv.mean + iv.ci95,
                    ] {
                        out.push(',');
                        if x.is_finite() {
                            let _ = write!(out, "{x:.6}");
                        }
                    }
                    out.push('\n');
                }
            }
        }
        out
    }

    /// The terminal's view: per group, each class's and flow's rate as mean ± 95 % half-width
    /// (Mbit/s), and for flows with an RTT its p99 likewise (ms).
    pub fn render_table(&self) -> String {
        use linkshare_report::{Align, TextTable};
        let mut headers: Vec<(&str, Align)> = self
            .axes
            .iter()
            .map(|a| (a.as_str(), Align::Left))
            .collect();
        headers.extend([
            ("kind", Align::Left),
            ("name", Align::Left),
            ("rate Mbit/s", Align::Right),
            ("± 95%", Align::Right),
            ("rtt p99 ms", Align::Right),
            ("± 95%", Align::Right),
        ]);
        let mut t = TextTable::new(&headers);
        let cell = |x: f64, scale: f64| {
            if x.is_finite() {
                format!("{:.3}", x / scale)
            } else {
                "-".into()
            }
        };
        for g in &self.groups {
            for ((kind, name), figs) in &g.rows {
                let mut row = g.labels.clone();
                row.push(kind.clone());
                row.push(name.clone());
                let (m, h) = figs
                    .get("rate_bps")
                    .map_or((f64::NAN, f64::NAN), |i| (i.mean, i.ci95));
                row.push(cell(m, 1e6));
                row.push(cell(h, 1e6));
                let (m, h) = figs
                    .get("rtt_p99_ms")
                    .map_or((f64::NAN, f64::NAN), |i| (i.mean, i.ci95));
                row.push(cell(m, 1.0));
                row.push(cell(h, 1.0));
                t.rows.push(row);
            }
        }
        format!(
            "mean over {} seeds, ± the 95 % confidence interval's half-width (Student's t)\n{}",
            self.seeds,
            t.render()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn t_quantiles_and_intervals() {
        assert_eq!(t95(1), 12.706);
        assert_eq!(t95(30), 2.042);
        assert_eq!(t95(31), 1.960);
        assert!(t95(0).is_nan());
        let iv = Interval::of(&[1.0, 2.0, 3.0, 4.0]);
        assert_eq!(iv.n, 4);
        assert!((iv.mean - 2.5).abs() < 1e-12);
        // Sample variance 5/3.
        assert!((iv.sd - (5.0f64 / 3.0).sqrt()).abs() < 1e-12);
        assert!((iv.ci95 - 3.182 * iv.sd / 2.0).abs() < 1e-12);
        let one = Interval::of(&[7.0]);
        assert_eq!(one.mean, 7.0);
        assert!(one.ci95.is_nan());
    }

    const SCENARIO: &str = r#"name = "seeds"
duration = "2s"
[link]
rate = "10mbit"
delay = "5ms"
[policy]
qdisc = { type = "pfifo", limit = 50 }
[[flow]]
name = "a"
kind = "tcp"
[[flow]]
name = "b"
kind = "tcp"
[sweep]
[[sweep.axis]]
key = "link.delay"
values = ["5ms", "20ms"]
"#;

    fn load(seed: u64) -> Scenario {
        crate::overrides::apply(
            SCENARIO,
            "t.toml",
            std::path::Path::new("."),
            "t",
            &[],
            Some(seed),
        )
        .unwrap()
    }

    #[test]
    fn seed_axis_groups_points_and_gives_intervals() {
        let sweep = with_seeds((1..=4).map(|s| (s, load(s))).collect()).unwrap();
        assert_eq!(sweep.axes.len(), 2);
        assert_eq!(sweep.points.len(), 8);
        // The seed varies fastest, and each point runs under its own seed.
        let seeds: Vec<u64> = sweep.points.iter().map(|p| p.scenario.seed).collect();
        assert_eq!(seeds, [1, 2, 3, 4, 1, 2, 3, 4]);
        assert_eq!(sweep.points[5].labels, ["20ms", "2"]);
        let r = crate::sweep::run("seeds", &sweep, 2, None).unwrap();
        let ivs = intervals(&r).unwrap();
        assert_eq!(ivs.axes, ["delay"]);
        assert_eq!(ivs.seeds, 4);
        assert_eq!(ivs.groups.len(), 2);
        let g = &ivs.groups[1];
        assert_eq!(g.labels, ["20ms"]);
        let flow_a = g
            .rows
            .iter()
            .find(|((k, n), _)| k == "flow" && n == "a")
            .unwrap();
        let rate = &flow_a.1["rate_bps"];
        assert_eq!(rate.n, 4);
        // The mean is the mean of the four runs' rates.
        let runs: Vec<f64> = r.points[4..8]
            .iter()
            .map(|p| p.result.summary.flows["a"].goodput_bps)
            .collect();
        assert!((rate.mean - runs.iter().sum::<f64>() / 4.0).abs() < 1e-6);
        // Seeds other than 1 jitter TCP, so the runs differ and the interval is not empty.
        assert!(rate.sd > 0.0, "{runs:?}");
        assert!(rate.ci95 > 0.0 && rate.ci95.is_finite());
        let csv = ivs.csv();
        assert!(csv.starts_with("delay,kind,name,figure,n,mean,sd,ci95,low,high\n"));
        assert!(csv.contains("20ms,flow,a,rate_bps,4,"), "{csv}");
        assert!(ivs.render_table().contains("mean over 4 seeds"));
    }

    #[test]
    fn a_seed_axis_in_the_file_is_refused_with_seeds() {
        let text = SCENARIO
            .replace("key = \"link.delay\"", "key = \"seed\"")
            .replace("values = [\"5ms\", \"20ms\"]", "values = [1, 2]");
        let sc =
            crate::overrides::apply(&text, "t.toml", std::path::Path::new("."), "t", &[], None)
                .unwrap();
        let e = with_seeds(vec![(1, sc)]).unwrap_err();
        assert!(e.contains("already has an axis"), "{e}");
    }
}
