//! Sweeps: one scenario file, many runs, one table.
//!
//! A `[sweep]` section lists axes; each axis sets one or more keys of the scenario to each of its
//! values in turn. The points of the sweep are every combination of the axes' values (the first
//! axis varies slowest), each an ordinary scenario: the file with those keys replaced. The file
//! without its sweep is itself a valid scenario (what `linkshare sim --point 0` and the CI
//! smoke test run).
//!
//! ```toml
//! [[sweep.axis]]
//! key = "flow.in.size"                          # [[flow]] named "in", key `size`
//! values = [64, 128, 512, 1500]
//!
//! [[sweep.axis]]
//! name = "burst"
//! keys = ["policy.class.c.burst", "policy.class.c.cburst"]
//! values = ["default", "15k", "18k"]            # "default" removes the keys
//! ```
//!
//! A key is a dotted path into the document; where the path meets an array of tables (`flow`,
//! `policy.class`) the next part is the `name` of the element. With several `keys`, a value is
//! either one value for all of them or an array with one value per key. The string `"default"`
//! removes the key, so its default applies.
//!
//! Every point is built and checked when the file is loaded, so a bad value is reported at its
//! line in the `[sweep]` section. Points are independent runs of a deterministic simulator; they
//! run in parallel and are reported in point order, so the outputs do not depend on the number of
//! threads. Formats: `docs/scenario-format.md` (the section) and `docs/outputs.md` (`sweep.csv`,
//! `sweep.json`).

use std::fmt;
use std::ops::Range;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};
use toml::Spanned;

use crate::model::{SimResult, Summary};
use crate::overrides::{set_key, to_text, Override};
use crate::scenario::{line_col, FlowKind, Pattern, Scenario, ScenarioError};
pub use crate::scenario::{Axis, Point, Sweep};
use crate::SimError;
use linkshare_report::numfmt::{fixed, fixed_pad};
use linkshare_report::{Align, TextTable};

/// Most points a sweep may have.
pub const MAX_POINTS: usize = 10_000;
/// Most flows over all the points of a sweep (points × flows per point): each flow of each point
/// is a simulated flow and its state.
pub const MAX_FLOW_RUNS: usize = 1_000_000;
/// The value that removes a key (its default applies).
pub const DEFAULT_VALUE: &str = "default";

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawSweep {
    #[serde(default)]
    axis: Vec<Spanned<RawAxis>>,
}

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
struct RawAxis {
    name: Option<Spanned<String>>,
    key: Option<Spanned<String>>,
    keys: Option<Spanned<Vec<Spanned<String>>>>,
    values: Option<Spanned<Vec<Spanned<toml::Value>>>>,
    labels: Option<Spanned<Vec<Spanned<String>>>>,
}

/// A value to set (`None` removes the key).
type Edit = Override;

/// Build and check every point of `raw` against the scenario text `text`.
pub(crate) fn expand(
    raw: RawSweep,
    text: &str,
    origin: &str,
    base_dir: &Path,
    default_name: &str,
    name: &str,
) -> Result<Sweep, ScenarioError> {
    let err = |span: Range<usize>, msg: String, help: Option<String>| {
        let (line, col) = line_col(text, span.start);
        ScenarioError::one(origin, line, col, msg, help)
    };
    // `[sweep]` is often only implied by `[[sweep.axis]]` and then has no span of its own.
    let sweep_span = ["[sweep]", "[[sweep.axis]]", "sweep"]
        .iter()
        .find_map(|h| text.find(h))
        .map(|i| i..i + 1)
        .unwrap_or(0..0);
    if raw.axis.is_empty() {
        return Err(err(
            sweep_span,
            "[sweep] needs at least one [[sweep.axis]]".into(),
            Some("e.g. [[sweep.axis]] key = \"link.timer_hz\", values = [100, 0]".into()),
        ));
    }
    let mut base: toml::Table = text
        .parse()
        .map_err(|e: toml::de::Error| err(0..0, e.message().to_string(), None))?;
    base.remove("sweep");

    // Per axis: the checked axis and, per value, its edits and the span to blame.
    let mut axes: Vec<Axis> = Vec::new();
    let mut edits: Vec<Vec<(Vec<Edit>, Range<usize>)>> = Vec::new();
    for ra in raw.axis {
        let axis_span = ra.span();
        let ra = ra.into_inner();
        let keys: Vec<Spanned<String>> = match (ra.key, ra.keys) {
            (Some(k), None) => vec![k],
            (None, Some(ks)) if !ks.get_ref().is_empty() => ks.into_inner(),
            (None, Some(ks)) => {
                return Err(err(ks.span(), "`keys` is empty".into(), None));
            }
            (Some(k), Some(_)) => {
                return Err(err(k.span(), "give `key` or `keys`, not both".into(), None))
            }
            (None, None) => {
                return Err(err(
                    axis_span,
                    "a [[sweep.axis]] needs a `key` (or `keys`)".into(),
                    Some("e.g. key = \"flow.NAME.size\" or key = \"link.timer_hz\"".into()),
                ))
            }
        };
        for k in &keys {
            let mut probe = base.clone();
            set_key(&mut probe, k.get_ref(), None).map_err(|(m, h)| err(k.span(), m, h))?;
        }
        let Some(values) = ra.values else {
            return Err(err(
                axis_span,
                "a [[sweep.axis]] needs `values`".into(),
                Some("e.g. values = [64, 512, 1500]".into()),
            ));
        };
        if values.get_ref().is_empty() {
            return Err(err(values.span(), "`values` is empty".into(), None));
        }
        let values = values.into_inner();
        let labels: Vec<String> = match ra.labels {
            None => values.iter().map(|v| label_of(v.get_ref())).collect(),
            Some(l) if l.get_ref().len() == values.len() => {
                l.into_inner().into_iter().map(|s| s.into_inner()).collect()
            }
            Some(l) => {
                return Err(err(
                    l.span(),
                    format!("{} labels for {} values", l.get_ref().len(), values.len()),
                    Some("give one label per value, or none".into()),
                ))
            }
        };
        let axis_name = match &ra.name {
            Some(n) => n.get_ref().trim().to_string(),
            None => keys[0]
                .get_ref()
                .rsplit('.')
                .next()
                .unwrap_or_default()
                .to_string(),
        };
        let name_span = ra
            .name
            .as_ref()
            .map(|n| n.span())
            .unwrap_or(axis_span.clone());
        if axis_name.is_empty()
            || !axis_name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
        {
            return Err(err(
                name_span,
                format!("axis name `{axis_name}` must be letters, digits, `_`, `-` or `.`"),
                None,
            ));
        }
        if axes.iter().any(|a| a.name == axis_name) {
            return Err(err(
                name_span,
                format!("two sweep axes are named `{axis_name}`"),
                Some("give each [[sweep.axis]] its own `name`".into()),
            ));
        }
        let mut per_value = Vec::with_capacity(values.len());
        for (v, label) in values.iter().zip(&labels) {
            if label.contains([',', '=', '"', '\n']) {
                return Err(err(
                    v.span(),
                    format!("label `{label}` may not contain `,`, `=`, quotes or line breaks"),
                    Some("give the axis `labels`".into()),
                ));
            }
            let e = value_edits(&keys, v.get_ref()).map_err(|m| err(v.span(), m, None))?;
            // Check the value alone against the base, so that a bad value is blamed on its line.
            point_scenario(&base, &[e.as_slice()], origin, base_dir, default_name).map_err(
                |inner| {
                    relocate(
                        inner,
                        text,
                        origin,
                        v.span(),
                        &format!("{axis_name} = {label}"),
                    )
                },
            )?;
            per_value.push((e, v.span()));
        }
        axes.push(Axis {
            name: axis_name,
            keys: keys.into_iter().map(|k| k.into_inner()).collect(),
            labels,
            values: values.into_iter().map(|v| v.into_inner()).collect(),
        });
        edits.push(per_value);
    }

    let total = edits
        .iter()
        .try_fold(1usize, |n, vs| n.checked_mul(vs.len()))
        .filter(|n| *n <= MAX_POINTS);
    let Some(total) = total else {
        return Err(err(
            sweep_span,
            format!("the sweep has more than {MAX_POINTS} points"),
            Some("use fewer axes or values".into()),
        ));
    };
    let mut points = Vec::with_capacity(total);
    // Flows over all points, bounded before the points are built: the first point tells the
    // flows per point (axes rarely change `count`; the running sum catches those that do).
    let mut flow_runs = 0usize;
    for i in 0..total {
        // Mixed radix, first axis slowest.
        let mut rest = i;
        let mut choice = vec![0usize; axes.len()];
        for a in (0..axes.len()).rev() {
            choice[a] = rest % edits[a].len();
            rest /= edits[a].len();
        }
        let chosen: Vec<&[Edit]> = choice
            .iter()
            .enumerate()
            .map(|(a, &c)| edits[a][c].0.as_slice())
            .collect();
        let labels: Vec<String> = choice
            .iter()
            .enumerate()
            .map(|(a, &c)| axes[a].labels[c].clone())
            .collect();
        let values: Vec<toml::Value> = choice
            .iter()
            .enumerate()
            .map(|(a, &c)| axes[a].values[c].clone())
            .collect();
        let desc = describe(&axes, &labels);
        let mut sc =
            point_scenario(&base, &chosen, origin, base_dir, default_name).map_err(|inner| {
                let span = edits[0][choice[0]].1.clone();
                relocate(inner, text, origin, span, &desc)
            })?;
        flow_runs = flow_runs.saturating_add(sc.flows.len());
        let projected = if i == 0 {
            sc.flows.len().saturating_mul(total)
        } else {
            flow_runs
        };
        if projected > MAX_FLOW_RUNS {
            let what = if i == 0 {
                format!("{} points × {} flows", total, sc.flows.len())
            } else {
                format!("the first {} of {total} points", i + 1)
            };
            return Err(err(
                sweep_span,
                format!(
                    "the sweep would run {} flows ({what}), above the limit of {}",
                    thousands(projected),
                    thousands(MAX_FLOW_RUNS)
                ),
                Some("use fewer axis values, or a smaller `count`".into()),
            ));
        }
        sc.name = format!("{name}-p{}", i + 1);
        points.push(Point {
            index: i + 1,
            labels,
            values,
            edits: chosen.iter().flat_map(|e| e.iter().cloned()).collect(),
            scenario: sc,
        });
    }
    Ok(Sweep { axes, points })
}

/// `1000000` → `1,000,000`.
fn thousands(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, ch) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(ch);
    }
    out
}

/// `axis = label, …` for messages.
fn describe(axes: &[Axis], labels: &[String]) -> String {
    axes.iter()
        .zip(labels)
        .map(|(a, l)| format!("{} = {l}", a.name))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The scenario of a point: the base document with `edits` applied, parsed from scratch.
fn point_scenario(
    base: &toml::Table,
    edits: &[&[Edit]],
    origin: &str,
    base_dir: &Path,
    default_name: &str,
) -> Result<Scenario, ScenarioError> {
    let mut doc = base.clone();
    for (key, value) in edits.iter().flat_map(|e| e.iter()) {
        set_key(&mut doc, key, value.as_ref())
            .map_err(|(m, h)| ScenarioError::one(origin, 0, 0, m, h))?;
    }
    let text = to_text(&doc).map_err(|m| ScenarioError::one(origin, 0, 0, m, None))?;
    Scenario::parse_base(&text, origin, base_dir, default_name)
}

/// A point's diagnostics, moved to the sweep value that produced them (their own positions are
/// in a generated document the user never sees).
fn relocate(
    inner: ScenarioError,
    text: &str,
    origin: &str,
    span: Range<usize>,
    point: &str,
) -> ScenarioError {
    let (line, col) = line_col(text, span.start);
    let mut e = inner;
    for d in &mut e.diagnostics {
        d.file = origin.to_string();
        d.line = line;
        d.col = col;
        d.message = format!("sweep point `{point}`: {}", d.message);
    }
    e
}

/// The edits one value of an axis makes.
fn value_edits(keys: &[Spanned<String>], v: &toml::Value) -> Result<Vec<Edit>, String> {
    let one = |v: &toml::Value| match v {
        toml::Value::String(s) if s == DEFAULT_VALUE => None,
        other => Some(other.clone()),
    };
    if keys.len() == 1 {
        return Ok(vec![(keys[0].get_ref().clone(), one(v))]);
    }
    match v {
        toml::Value::Array(items) if items.len() == keys.len() => Ok(keys
            .iter()
            .zip(items)
            .map(|(k, v)| (k.get_ref().clone(), one(v)))
            .collect()),
        toml::Value::Array(items) => Err(format!(
            "{} values for {} keys: give one value for all keys or one per key",
            items.len(),
            keys.len()
        )),
        other => Ok(keys
            .iter()
            .map(|k| (k.get_ref().clone(), one(other)))
            .collect()),
    }
}

/// How a value is shown when the axis has no `labels`.
fn label_of(v: &toml::Value) -> String {
    match v {
        toml::Value::String(s) => s.clone(),
        toml::Value::Integer(i) => i.to_string(),
        toml::Value::Float(f) => f.to_string(),
        toml::Value::Boolean(b) => b.to_string(),
        toml::Value::Array(a) => a.iter().map(label_of).collect::<Vec<_>>().join("/"),
        other => other.to_string(),
    }
}

/// A point that failed to run.
#[derive(Debug)]
pub struct PointError {
    pub index: usize,
    pub point: String,
    pub error: SimError,
}

impl fmt::Display for PointError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "sweep point {} ({}): {}",
            self.index, self.point, self.error
        )
    }
}

impl std::error::Error for PointError {}

/// What one point produced.
#[derive(Clone, Debug)]
pub struct PointResult {
    pub index: usize,
    pub labels: Vec<String>,
    /// The value of each axis, as written.
    pub values: Vec<toml::Value>,
    /// Mean rate the point's UDP sources offer over the run, bit/s (TCP and ping not counted).
    pub offered_bps: f64,
    /// The same per UDP flow.
    pub flow_offered_bps: std::collections::BTreeMap<String, f64>,
    pub result: SimResult,
}

/// Every point's result, in point order.
#[derive(Clone, Debug)]
pub struct SweepResult {
    /// The scenario's name.
    pub name: String,
    pub axes: Vec<Axis>,
    pub points: Vec<PointResult>,
}

/// Run every point on up to `threads` threads. `progress` gets the fraction of points done.
pub fn run(
    name: &str,
    sweep: &Sweep,
    threads: usize,
    progress: Option<&(dyn Fn(f64) + Sync)>,
) -> Result<SweepResult, PointError> {
    let n = sweep.points.len();
    let threads = threads.clamp(1, n.max(1));
    let next = AtomicUsize::new(0);
    let done = AtomicUsize::new(0);
    let slots: Mutex<Vec<Option<Result<SimResult, SimError>>>> =
        Mutex::new((0..n).map(|_| None).collect());
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(p) = sweep.points.get(i) else { break };
                let r = crate::run(&p.scenario, None);
                if let Ok(mut v) = slots.lock() {
                    v[i] = Some(r);
                }
                let d = done.fetch_add(1, Ordering::Relaxed) + 1;
                if let Some(cb) = progress {
                    cb(d as f64 / n as f64);
                }
            });
        }
    });
    let slots = slots.into_inner().unwrap_or_default();
    let mut points = Vec::with_capacity(n);
    for (p, slot) in sweep.points.iter().zip(slots) {
        let point = describe(&sweep.axes, &p.labels);
        let result = match slot {
            Some(Ok(r)) => r,
            Some(Err(error)) => {
                return Err(PointError {
                    index: p.index,
                    point,
                    error,
                })
            }
            None => {
                return Err(PointError {
                    index: p.index,
                    point,
                    error: SimError::Stuck {
                        time_s: 0.0,
                        reason: "the point's run did not finish (a thread panicked)".into(),
                    },
                })
            }
        };
        let flow_offered_bps = offered_by_flow(&p.scenario);
        points.push(PointResult {
            index: p.index,
            labels: p.labels.clone(),
            values: p.values.clone(),
            offered_bps: flow_offered_bps.values().sum(),
            flow_offered_bps,
            result,
        });
    }
    Ok(SweepResult {
        name: name.to_string(),
        axes: sweep.axes.clone(),
        points,
    })
}

/// Mean rate each UDP source of the scenario offers over its duration (bit/s).
pub fn offered_by_flow(sc: &Scenario) -> std::collections::BTreeMap<String, f64> {
    let dur = sc.duration.0 as f64;
    sc.flows
        .iter()
        .filter_map(|f| {
            let FlowKind::Udp(u) = &f.kind else {
                return None;
            };
            let active = (f.stop.0.min(sc.duration.0)).saturating_sub(f.start.0) as f64;
            let duty = match u.pattern {
                Pattern::OnOff { on, off } => on.0 as f64 / (on.0 + off.0).max(1) as f64,
                _ => 1.0,
            };
            Some((f.name.clone(), u.rate.0 as f64 * duty * active / dur))
        })
        .collect()
}

/// Leaf classes of a run, in tree order.
fn leaves(s: &Summary) -> Vec<String> {
    let inner: std::collections::BTreeSet<&str> = s
        .classes
        .values()
        .filter_map(|c| c.parent.as_deref())
        .collect();
    linkshare_report::class_tree(s)
        .into_iter()
        .map(|(n, _)| n)
        .filter(|n| !inner.contains(n.as_str()))
        .collect()
}

impl SweepResult {
    /// The points whose labels match `selector`: `axis=label,axis=label` (an empty selector
    /// matches every point). Unknown axes are an error.
    pub fn select(&self, selector: &str) -> Result<Vec<&PointResult>, String> {
        let mut want: Vec<(usize, &str)> = Vec::new();
        for part in selector.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let Some((a, v)) = part.split_once('=') else {
                return Err(format!("`{part}` is not `axis=label`"));
            };
            let (a, v) = (a.trim(), v.trim());
            let Some(ai) = self.axes.iter().position(|x| x.name == a) else {
                let names: Vec<&str> = self.axes.iter().map(|x| x.name.as_str()).collect();
                return Err(format!("no axis `{a}` (axes: {})", names.join(", ")));
            };
            want.push((ai, v));
        }
        Ok(self
            .points
            .iter()
            .filter(|p| want.iter().all(|(ai, v)| p.labels[*ai] == *v))
            .collect())
    }

    /// The table for the terminal: one row per point, the axes, the offered and sent rates, and
    /// each leaf class's rate with its difference from its assigned rate.
    pub fn render_table(&self) -> String {
        let Some(first) = self.points.first() else {
            return format!("sweep {}: no points\n", self.name);
        };
        let s0 = &first.result.summary;
        let leaves = leaves(s0);
        let mut headers: Vec<(String, Align)> = vec![("point".into(), Align::Right)];
        headers.extend(self.axes.iter().map(|a| (a.name.clone(), Align::Right)));
        headers.push(("in Mbit/s".into(), Align::Right));
        headers.push(("out Mbit/s".into(), Align::Right));
        for l in &leaves {
            headers.push((format!("{l} Mbit/s"), Align::Right));
            if s0.classes.get(l).is_some_and(|c| c.assigned_rate_bps > 0.0) {
                headers.push((format!("{l} vs rate"), Align::Right));
            }
        }
        let hdr: Vec<(&str, Align)> = headers.iter().map(|(h, a)| (h.as_str(), *a)).collect();
        let mut t = TextTable::new(&hdr);
        for p in &self.points {
            let s = &p.result.summary;
            let mut row: Vec<String> = vec![p.index.to_string()];
            row.extend(p.labels.iter().cloned());
            row.push(fixed_pad(p.offered_bps / 1e6, 3));
            row.push(fixed_pad(s.link.utilisation * s.link.rate_bps / 1e6, 3));
            for l in &leaves {
                let c = s.classes.get(l);
                row.push(
                    c.map(|c| fixed_pad(c.rate_bps / 1e6, 3))
                        .unwrap_or("-".into()),
                );
                if s0.classes.get(l).is_some_and(|c| c.assigned_rate_bps > 0.0) {
                    row.push(
                        c.map(|c| rate_error_pct(c.rate_bps, c.assigned_rate_bps))
                            .map(|e| {
                                format!("{}{}%", if e >= 0.0 { "+" } else { "" }, fixed_pad(e, 2))
                            })
                            .unwrap_or("-".into()),
                    );
                }
            }
            t.rows.push(row);
        }
        let shape: Vec<String> = self
            .axes
            .iter()
            .map(|a| format!("{} {}", a.name, a.labels.len()))
            .collect();
        format!(
            "sweep {}: {} points ({}), {} s each\n{}",
            self.name,
            self.points.len(),
            shape.join(" × "),
            fixed(s0.duration_s, 3),
            t.render()
        )
    }

    /// `sweep.csv`: one row per point per class and per flow, with every column of
    /// [`crate::figures::COLUMNS`] (see `docs/outputs.md`).
    pub fn csv(&self) -> String {
        use crate::figures::{rows, Cell, COLUMNS};
        let mut out = String::from("point");
        for a in &self.axes {
            out.push(',');
            push_field(&mut out, &a.name);
        }
        for (c, _) in COLUMNS {
            out.push(',');
            out.push_str(c);
        }
        out.push('\n');
        for p in &self.points {
            let mut lead = p.index.to_string();
            for l in &p.labels {
                lead.push(',');
                push_field(&mut lead, l);
            }
            for row in rows(&p.result.summary, &p.flow_offered_bps) {
                out.push_str(&lead);
                for i in 0..COLUMNS.len() {
                    out.push(',');
                    match row.cell(i) {
                        Cell::Str(s) => push_field(&mut out, s),
                        Cell::Int(n) => out.push_str(&n.to_string()),
                        Cell::Num(x) if x.is_finite() => out.push_str(&fixed(x, 6)),
                        Cell::Num(_) | Cell::Missing => {}
                    }
                }
                out.push('\n');
            }
        }
        out
    }

    /// `sweep.json`: the axes and every point's labels and full summary.
    pub fn json(&self) -> serde_json::Result<String> {
        #[derive(Serialize)]
        struct J<'a> {
            scenario: &'a str,
            axes: Vec<JAxis<'a>>,
            points: Vec<JPoint<'a>>,
        }
        #[derive(Serialize)]
        struct JAxis<'a> {
            name: &'a str,
            keys: &'a [String],
            labels: &'a [String],
            values: &'a [toml::Value],
        }
        #[derive(Serialize)]
        struct JPoint<'a> {
            point: usize,
            labels: &'a [String],
            values: &'a [toml::Value],
            offered_bps: f64,
            summary: &'a Summary,
        }
        let j = J {
            scenario: &self.name,
            axes: self
                .axes
                .iter()
                .map(|a| JAxis {
                    name: &a.name,
                    keys: &a.keys,
                    labels: &a.labels,
                    values: &a.values,
                })
                .collect(),
            points: self
                .points
                .iter()
                .map(|p| JPoint {
                    point: p.index,
                    labels: &p.labels,
                    values: &p.values,
                    offered_bps: p.offered_bps,
                    summary: &p.result.summary,
                })
                .collect(),
        };
        let mut s = serde_json::to_string_pretty(&j)?;
        s.push('\n');
        Ok(s)
    }

    /// Write `sweep.csv` and `sweep.json` into `dir` (created if missing). With an axis that
    /// sets the seed, `crate::seeds::Intervals::write` adds `sweep-ci.csv`.
    pub fn write(&self, dir: &Path) -> std::io::Result<Vec<std::path::PathBuf>> {
        std::fs::create_dir_all(dir)?;
        let csv = dir.join("sweep.csv");
        std::fs::write(&csv, self.csv())?;
        let json = dir.join("sweep.json");
        std::fs::write(&json, self.json().map_err(std::io::Error::other)?)?;
        Ok(vec![csv, json])
    }
}

/// `(measured / assigned − 1) × 100`.
pub fn rate_error_pct(measured: f64, assigned: f64) -> f64 {
    if assigned > 0.0 {
        (measured / assigned - 1.0) * 100.0
    } else {
        f64::NAN
    }
}

/// A CSV field, quoted as RFC 4180 wants when needed.
pub(crate) fn push_field(out: &mut String, s: &str) {
    if s.contains([',', '"', '\n', '\r']) || s.starts_with(' ') || s.ends_with(' ') {
        out.push('"');
        out.push_str(&s.replace('"', "\"\""));
        out.push('"');
    } else {
        out.push_str(s);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: &str = r#"name = "t"
duration = "1s"
[link]
rate = "10mbit"
[policy]
qdisc = "htb"
default = "c"
[[policy.class]]
name = "root"
rate = "10mbit"
[[policy.class]]
name = "c"
parent = "root"
rate = "4mbit"
[[flow]]
name = "in"
kind = "udp"
rate = "6mbit"
size = 1000
"#;

    fn parse(extra: &str) -> Result<Scenario, ScenarioError> {
        Scenario::parse(&format!("{BASE}{extra}"), "t.toml")
    }

    #[test]
    fn grid_first_axis_slowest_and_keys_set() {
        let sc = parse(
            "[[sweep.axis]]\nkey = \"link.timer_hz\"\nvalues = [100, 0]\nlabels = [\"100Hz\", \"exact\"]\n\
             [[sweep.axis]]\nname = \"burst\"\nkeys = [\"policy.class.c.burst\", \"policy.class.c.cburst\"]\nvalues = [\"default\", \"15k\", [\"3k\", \"4k\"]]\n\
             [[sweep.axis]]\nkey = \"flow.in.size\"\nvalues = [64, 1500]\n",
        )
        .unwrap();
        let sw = sc.sweep.as_ref().unwrap();
        assert_eq!(sw.points.len(), 12);
        assert_eq!(sw.axes[0].name, "timer_hz");
        assert_eq!(sw.axes[2].name, "size");
        assert_eq!(sw.axes[1].labels, ["default", "15k", "3k/4k"]);
        assert_eq!(sw.points[0].labels, ["100Hz", "default", "64"]);
        assert_eq!(sw.points[1].labels, ["100Hz", "default", "1500"]);
        assert_eq!(sw.points[11].labels, ["exact", "3k/4k", "1500"]);
        let p = &sw.points[1].scenario;
        assert_eq!(p.link.timer_hz, 100);
        let FlowKind::Udp(u) = &p.flows[0].kind else {
            panic!()
        };
        assert_eq!(u.size.max(), 1500);
        assert_eq!(sw.points[11].scenario.link.timer_hz, 0);
        assert_eq!(sw.points[11].scenario.name, "t-p12");
        // The base is the file without its sweep.
        assert_eq!(sc.link.timer_hz, 0);
        assert!(sw.points.iter().all(|p| p.scenario.sweep.is_none()));
    }

    #[test]
    fn errors_point_at_the_sweep_line() {
        // A bad value: blamed on its own line.
        let e =
            parse("[[sweep.axis]]\nkey = \"flow.in.size\"\nvalues = [64,\n 99999]\n").unwrap_err();
        let d = e.first().unwrap();
        assert_eq!(d.line, 23, "{e}");
        assert!(d.message.contains("sweep point `size = 99999`"), "{e}");
        // An unknown flow.
        let e = parse("[[sweep.axis]]\nkey = \"flow.out.size\"\nvalues = [64]\n").unwrap_err();
        let d = e.first().unwrap();
        assert_eq!((d.line, d.col), (21, 7), "{e}");
        assert!(d.message.contains("no [[flow]] is named `out`"), "{e}");
        assert!(d.help.as_deref().unwrap_or("").contains("in"), "{e}");
        // An unknown key of a known table: the point's own check rejects it.
        let e = parse("[[sweep.axis]]\nkey = \"link.bogus\"\nvalues = [1]\n").unwrap_err();
        assert!(e.first().unwrap().message.contains("unknown field"), "{e}");
        assert_eq!(e.first().unwrap().line, 22, "{e}");
        // Structure.
        let e = parse("[[sweep.axis]]\nkey = \"link.timer_hz\"\n").unwrap_err();
        assert!(e.first().unwrap().message.contains("needs `values`"), "{e}");
        let e =
            parse("[[sweep.axis]]\nkey = \"link.timer_hz\"\nvalues = [1, 2]\nlabels = [\"a\"]\n")
                .unwrap_err();
        assert!(
            e.first().unwrap().message.contains("1 labels for 2 values"),
            "{e}"
        );
        let e = parse(
            "[[sweep.axis]]\nkey = \"link.timer_hz\"\nvalues = [1]\n[[sweep.axis]]\nkey = \"link.timer_hz\"\nvalues = [2]\n",
        )
        .unwrap_err();
        assert!(e.first().unwrap().message.contains("two sweep axes"), "{e}");
        let e = parse(
            "[[sweep.axis]]\nkeys = [\"link.timer_hz\", \"link.clock_hz\"]\nvalues = [[1, 2, 3]]\n",
        )
        .unwrap_err();
        assert!(
            e.first().unwrap().message.contains("3 values for 2 keys"),
            "{e}"
        );
        let e = parse("[sweep]\n").unwrap_err();
        assert!(e.first().unwrap().message.contains("at least one"), "{e}");
    }

    /// Every way a scenario can give its policy survives a sweep: points are built by writing the
    /// edited document out and reading it back, which must keep inline tables (a classless
    /// `qdisc = { … }`, a class's `leaf = { … }`) where the file had them.
    #[test]
    fn every_policy_form_sweeps() {
        let dir =
            std::env::temp_dir().join(format!("linkshare-sweep-forms-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("p.toml"),
            "qdisc = { type = \"pfifo\", limit = 64 }\n",
        )
        .unwrap();
        let head = "name = \"t\"\nduration = \"200ms\"\n[link]\nrate = \"10mbit\"\n";
        let flow = "[[flow]]\nname = \"in\"\nkind = \"udp\"\nrate = \"12mbit\"\nsize = 1000\n";
        let forms: &[(&str, &str)] = &[
            ("none", ""),
            ("path", "policy = \"p.toml\"\n"),
            ("string", "[policy]\nqdisc = \"pfifo\"\n"),
            (
                "inline",
                "[policy]\nqdisc = { type = \"pfifo\", limit = 64 }\n",
            ),
            (
                "section",
                "[policy]\n[policy.qdisc]\ntype = \"bfifo\"\nlimit = \"64k\"\n",
            ),
            (
                "classes",
                "[policy]\nqdisc = \"htb\"\ndefault = \"c\"\n[[policy.class]]\nname = \"c\"\n\
                 rate = \"4mbit\"\nleaf = { type = \"pfifo\", limit = 50 }\n",
            ),
        ];
        for (form, policy) in forms {
            // The path form's policy file sits beside the scenario, so a top-level key must come
            // before any table.
            let (top, tables) = if policy.starts_with("policy =") {
                (*policy, "")
            } else {
                ("", *policy)
            };
            let text = format!(
                "{top}{head}{tables}{flow}[[sweep.axis]]\nkey = \"seed\"\nvalues = [1, 2]\n\
                 [[sweep.axis]]\nkey = \"flow.in.size\"\nvalues = [500, 1000]\n"
            );
            let sc = Scenario::parse_with(&text, "t.toml", &dir, "t")
                .unwrap_or_else(|e| panic!("{form}: {e}"));
            let sw = sc.sweep.as_ref().unwrap();
            assert_eq!(sw.points.len(), 4, "{form}");
            assert_eq!(sw.points[2].scenario.seed, 2, "{form}");
            let base = &sc.policy.as_ref().map(|p| p.policy().kind_name());
            for p in &sw.points {
                assert_eq!(
                    &p.scenario.policy.as_ref().map(|p| p.policy().kind_name()),
                    base,
                    "{form}"
                );
            }
            let r = run(&sc.name, sw, 2, None).unwrap_or_else(|e| panic!("{form}: {e}"));
            assert_eq!(r.points.len(), 4, "{form}");
        }
        // A parameter of an inline root qdisc is itself an axis.
        let text = format!(
            "{head}[policy]\nqdisc = {{ type = \"pfifo\", limit = 64 }}\n{flow}\
             [[sweep.axis]]\nkey = \"policy.qdisc.limit\"\nvalues = [8, 64]\n"
        );
        let sc = Scenario::parse_with(&text, "t.toml", &dir, "t").unwrap_or_else(|e| panic!("{e}"));
        let r = run(&sc.name, sc.sweep.as_ref().unwrap(), 2, None).unwrap();
        let drops = |i: usize| r.points[i].result.summary.flows["in"].packets_lost;
        assert!(drops(0) > drops(1), "{} vs {}", drops(0), drops(1));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn runs_deterministically_and_selects() {
        let sc = parse(
            "[[sweep.axis]]\nkey = \"policy.class.c.rate\"\nvalues = [\"2mbit\", \"4mbit\"]\n\
             [[sweep.axis]]\nkey = \"flow.in.size\"\nvalues = [100, 1000]\n",
        )
        .unwrap();
        let sw = sc.sweep.as_ref().unwrap();
        let a = run(&sc.name, sw, 1, None).unwrap();
        let b = run(&sc.name, sw, 3, None).unwrap();
        assert_eq!(a.csv(), b.csv());
        assert_eq!(a.json().unwrap(), b.json().unwrap());
        let p = a.select("rate=4mbit,size=1000").unwrap();
        assert_eq!(p.len(), 1);
        let c = &p[0].result.summary.classes["c"];
        assert!((c.rate_bps / 4e6 - 1.0).abs() < 0.01, "{}", c.rate_bps);
        assert_eq!(a.select("size=100").unwrap().len(), 2);
        assert!(a.select("nope=1").is_err());
        assert!((p[0].offered_bps - 6e6).abs() < 1.0);
        let t = a.render_table();
        assert!(t.contains("c vs rate"), "{t}");
        assert_eq!(t.lines().count(), 2 + 4 + 1, "{t}");
        let csv = a.csv();
        assert!(
            csv.starts_with("point,rate,size,kind,name,rate_bps,"),
            "{csv}"
        );
        assert!(csv.contains("\n4,4mbit,1000,flow,in,"), "{csv}");
    }
}
