//! `linkshare seeds [--check] [--file docs/seeds.toml] [--out docs/seeds.md]`: the table of every
//! seed finding with linkshare's result beside it, regenerated from the scenarios.
//!
//! `docs/seeds.toml` lists one `[[row]]` per table or figure of a seed: the seed's finding, and for
//! the default mode and (optionally) the compatibility mode a scenario plus the figures to read
//! from its result and a template to print them in. This command runs every scenario (in
//! parallel, deterministic), fills the templates and writes `docs/seeds.md`; `--check` instead
//! compares with the file on disk and fails if it is stale, which CI runs. Rows measured on the
//! real shaper (`linkshare lab`) carry their result as text and a pointer to `BENCHMARKS.md`.
//!
//! Figures (`get` entries), evaluated on a run's result:
//! * `class_rate:CLASS:FROM:TO` — mean rate of a class in Mbit/s over the samples in (FROM, TO] s;
//! * `class_mbit:CLASS` — a class's mean rate over the run, Mbit/s;
//! * `class_share:CLASS` — that rate as a percentage of the link;
//! * `goodput:FLOW` — a flow's goodput in Mbit/s (`FLOW*` sums flows `FLOW.1` … `FLOW.N`);
//! * `rtt_p50:FLOW` / `rtt_p99:FLOW` — a flow's RTT percentiles in ms;
//! * `owd_p50:FLOW` / `owd_p99:FLOW` — a UDP flow's one-way delay percentiles in ms;
//! * `fairness:CLASS` — Jain's index across the class's flows;
//! * `utilisation` — of the bottleneck, percent;
//! * `rate_error:CLASS` — `(rate / assigned rate − 1) × 100`, percent.
//!
//! A scenario with a `[sweep]` runs every point; each figure then names its points after `@`:
//! `class_mbit:c@clock=exact,size=64` (exactly one point must match), or aggregates over every
//! matching point with a prefix: `min:`, `max:`, `maxabs:` (largest absolute value), `spread:`
//! (max − min), e.g. `maxabs:rate_error:c@clock=exact,burst=default`.
//!
//! Templates replace `{0}`, `{1}`, … with the figures, printed with three significant digits.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context};
use linkshare_sim::model::{SeriesKind, SimResult};
use linkshare_sim::sweep::SweepResult;
use linkshare_sim::{run, Scenario};
use serde::Deserialize;

#[derive(clap::Args, Debug)]
pub struct SeedsArgs {
    /// The list of rows
    #[arg(long, default_value = "docs/seeds.toml")]
    file: PathBuf,
    /// Where to write the table
    #[arg(long, default_value = "docs/seeds.md")]
    out: PathBuf,
    /// Do not write: fail (exit 1) if the table on disk differs from a fresh one
    #[arg(long)]
    check: bool,
}

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
struct Doc {
    /// Text before the table.
    intro: String,
    row: Vec<Row>,
}

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
struct Row {
    seed: String,
    item: String,
    finding: String,
    /// Where it is reproduced (scenario paths, a lab command); shown as is.
    #[serde(default)]
    reproduced_by: Option<String>,
    default: Option<Measure>,
    compat: Option<Measure>,
    /// Fixed text for results that are not simulated (lab measurements).
    #[serde(default)]
    default_text: Option<String>,
    #[serde(default)]
    compat_text: Option<String>,
    #[serde(default)]
    note: String,
}

#[derive(Deserialize, Debug, Clone)]
#[serde(deny_unknown_fields)]
struct Measure {
    scenario: String,
    /// TOML lines appended to the scenario before it is parsed (e.g. `policy.altq_compat`
    /// switched on through a `[policy]` key is not possible by appending; use a second file).
    get: Vec<String>,
    show: String,
}

pub fn run_cmd(args: &SeedsArgs) -> anyhow::Result<i32> {
    let text = std::fs::read_to_string(&args.file)
        .with_context(|| format!("cannot read {}", args.file.display()))?;
    let doc: Doc =
        toml::from_str(&text).with_context(|| format!("{}: invalid", args.file.display()))?;
    let root = args
        .file
        .parent()
        .and_then(Path::parent)
        .map(Path::to_path_buf)
        .unwrap_or_default();
    let table = render(&doc, &root)?;
    if args.check {
        let old = std::fs::read_to_string(&args.out).unwrap_or_default();
        if old != table {
            eprintln!(
                "{} is out of date: run `linkshare seeds` and commit the result",
                args.out.display()
            );
            return Ok(1);
        }
        println!("{} is current", args.out.display());
        return Ok(0);
    }
    std::fs::write(&args.out, &table)
        .with_context(|| format!("cannot write {}", args.out.display()))?;
    println!("wrote {} ({} rows)", args.out.display(), doc.row.len());
    Ok(0)
}

/// Run every distinct scenario once, then fill the table.
fn render(doc: &Doc, root: &Path) -> anyhow::Result<String> {
    let mut paths: Vec<String> = doc
        .row
        .iter()
        .flat_map(|r| [&r.default, &r.compat])
        .flatten()
        .map(|m| m.scenario.clone())
        .collect();
    paths.sort();
    paths.dedup();
    let results = run_all(&paths, root)?;
    let mut out = String::new();
    out.push_str(doc.intro.trim_end());
    out.push_str("\n\n| seed | table / figure | the seed found | reproduced by | compatibility mode | linkshare (default) | difference |\n");
    out.push_str("|---|---|---|---|---|---|---|\n");
    for r in &doc.row {
        let cell = |m: &Option<Measure>, text: &Option<String>| -> anyhow::Result<String> {
            match (m, text) {
                (Some(m), _) => fill(m, &results[&m.scenario])
                    .with_context(|| format!("seed {} {}", r.seed, r.item)),
                (None, Some(t)) => Ok(t.clone()),
                (None, None) => Ok("—".to_string()),
            }
        };
        let by = r.reproduced_by.clone().unwrap_or_else(|| {
            let mut v: Vec<String> = [&r.default, &r.compat]
                .into_iter()
                .flatten()
                .map(|m| format!("`{}`", m.scenario))
                .collect();
            v.dedup();
            v.join(", ")
        });
        writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} |",
            esc(&r.seed),
            esc(&r.item),
            esc(&r.finding),
            esc(&by),
            esc(&cell(&r.compat, &r.compat_text)?),
            esc(&cell(&r.default, &r.default_text)?),
            esc(&r.note)
        )
        .ok();
    }
    out.push_str("\nRegenerate with `linkshare seeds` (CI runs `linkshare seeds --check`).\n");
    Ok(out)
}

fn esc(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}

/// A scenario's result: one run, or every point of its sweep.
enum Ran {
    One(Box<SimResult>),
    Sweep(SweepResult),
}

fn run_all(paths: &[String], root: &Path) -> anyhow::Result<BTreeMap<String, Ran>> {
    let threads = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        .min(paths.len().max(1));
    let next = std::sync::atomic::AtomicUsize::new(0);
    let results: std::sync::Mutex<BTreeMap<String, anyhow::Result<Ran>>> = Default::default();
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some(p) = paths.get(i) else { break };
                let r = Scenario::load(&root.join(p))
                    .map_err(|e| anyhow!("{e}"))
                    .and_then(|mut sc| match sc.sweep.take() {
                        Some(sw) => linkshare_sim::sweep::run(&sc.name, &sw, 1, None)
                            .map(Ran::Sweep)
                            .map_err(|e| anyhow!("{p}: {e}")),
                        None => run(&sc, None)
                            .map(|r| Ran::One(Box::new(r)))
                            .map_err(|e| anyhow!("{p}: {e}")),
                    });
                if let Ok(mut m) = results.lock() {
                    m.insert(p.clone(), r);
                }
            });
        }
    });
    let map = results
        .into_inner()
        .map_err(|_| anyhow!("a scenario run panicked"))?;
    map.into_iter().map(|(k, v)| v.map(|r| (k, r))).collect()
}

fn fill(m: &Measure, r: &Ran) -> anyhow::Result<String> {
    let vals: Vec<f64> = m
        .get
        .iter()
        .map(|g| figure_of(g, r).with_context(|| format!("`{g}` in {}", m.scenario)))
        .collect::<anyhow::Result<_>>()?;
    let mut s = m.show.clone();
    for (i, v) in vals.iter().enumerate() {
        s = s.replace(&format!("{{{i}}}"), &sig3(*v));
    }
    Ok(s)
}

/// Three significant digits, no exponent.
fn sig3(v: f64) -> String {
    if v == 0.0 || !v.is_finite() {
        return format!("{v}");
    }
    let mag = v.abs().log10().floor() as i32;
    let decimals = (2 - mag).max(0) as usize;
    format!("{v:.decimals$}")
}

/// A figure of a single run, or of the points of a sweep named after `@`.
fn figure_of(spec: &str, ran: &Ran) -> anyhow::Result<f64> {
    let sw = match ran {
        Ran::One(r) => return figure(spec, r),
        Ran::Sweep(sw) => sw,
    };
    let Some((fig, sel)) = spec.split_once('@') else {
        bail!("the scenario is a sweep: name its points, e.g. `{spec}@axis=label`");
    };
    let points = sw.select(sel).map_err(|e| anyhow!(e))?;
    if points.is_empty() {
        bail!("no point of the sweep matches `{sel}`");
    }
    let agg = ["min:", "max:", "maxabs:", "spread:"]
        .iter()
        .find_map(|p| fig.strip_prefix(p).map(|rest| (&p[..p.len() - 1], rest)));
    let Some((agg, inner)) = agg else {
        if points.len() != 1 {
            bail!(
                "`{sel}` matches {} points: name every axis, or aggregate with min:, max:, maxabs: or spread:",
                points.len()
            );
        }
        return figure(fig, &points[0].result);
    };
    let xs: Vec<f64> = points
        .iter()
        .map(|p| figure(inner, &p.result))
        .collect::<anyhow::Result<_>>()?;
    let max = xs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let min = xs.iter().copied().fold(f64::INFINITY, f64::min);
    Ok(match agg {
        "min" => min,
        "max" => max,
        "maxabs" => xs.iter().map(|x| x.abs()).fold(0.0, f64::max),
        _ => max - min,
    })
}

fn figure(spec: &str, r: &SimResult) -> anyhow::Result<f64> {
    let parts: Vec<&str> = spec.split(':').collect();
    let s = &r.summary;
    let num = |x: &str| -> anyhow::Result<f64> {
        x.parse::<f64>()
            .map_err(|_| anyhow!("`{x}` is not a number"))
    };
    match parts.as_slice() {
        ["class_rate", class, from, to] => {
            let (from, to) = (num(from)?, num(to)?);
            let xs: Vec<f64> = r
                .samples
                .iter()
                .filter(|x| {
                    x.kind == SeriesKind::Class
                        && x.name == *class
                        && x.time_s > from
                        && x.time_s <= to + 1e-9
                })
                .map(|x| x.rate_bps / 1e6)
                .collect();
            if xs.is_empty() {
                bail!("no samples of class `{class}` in ({from}, {to}]");
            }
            Ok(xs.iter().sum::<f64>() / xs.len() as f64)
        }
        ["class_mbit", class] => s
            .classes
            .get(*class)
            .map(|c| c.rate_bps / 1e6)
            .ok_or_else(|| anyhow!("no class `{class}`")),
        ["class_share", class] => s
            .classes
            .get(*class)
            .map(|c| 100.0 * c.rate_bps / s.link.rate_bps)
            .ok_or_else(|| anyhow!("no class `{class}`")),
        ["goodput", flow] => match flow.strip_suffix('*') {
            Some(prefix) => {
                let xs: Vec<f64> = s
                    .flows
                    .iter()
                    .filter(|(n, _)| n.starts_with(prefix))
                    .map(|(_, f)| f.goodput_bps / 1e6)
                    .collect();
                if xs.is_empty() {
                    bail!("no flows `{prefix}*`");
                }
                Ok(xs.iter().sum())
            }
            None => s
                .flows
                .get(*flow)
                .map(|f| f.goodput_bps / 1e6)
                .ok_or_else(|| anyhow!("no flow `{flow}`")),
        },
        ["rtt_p50", flow] | ["rtt_p99", flow] => {
            let f = s
                .flows
                .get(*flow)
                .ok_or_else(|| anyhow!("no flow `{flow}`"))?;
            let rtt = f
                .rtt_ms
                .as_ref()
                .ok_or_else(|| anyhow!("flow `{flow}` has no RTT"))?;
            Ok(if parts[0] == "rtt_p50" {
                rtt.p50
            } else {
                rtt.p99
            })
        }
        ["owd_p50", flow] | ["owd_p99", flow] => {
            let f = s
                .flows
                .get(*flow)
                .ok_or_else(|| anyhow!("no flow `{flow}`"))?;
            let owd = f
                .owd_ms
                .as_ref()
                .ok_or_else(|| anyhow!("flow `{flow}` has no one-way delay"))?;
            Ok(if parts[0] == "owd_p50" {
                owd.p50
            } else {
                owd.p99
            })
        }
        ["fairness", class] => s
            .fairness
            .get(*class)
            .copied()
            .ok_or_else(|| anyhow!("no fairness for class `{class}`")),
        ["utilisation"] => Ok(100.0 * s.link.utilisation),
        ["rate_error", class] => s
            .classes
            .get(*class)
            .filter(|c| c.assigned_rate_bps > 0.0)
            .map(|c| linkshare_sim::sweep::rate_error_pct(c.rate_bps, c.assigned_rate_bps))
            .ok_or_else(|| anyhow!("no class `{class}` with an assigned rate")),
        _ => bail!("unknown figure `{spec}`"),
    }
}

#[cfg(test)]
mod tests {
    use super::sig3;

    #[test]
    fn three_significant_digits() {
        assert_eq!(sig3(9.6123), "9.61");
        assert_eq!(sig3(96.44), "96.4");
        assert_eq!(sig3(0.1004), "0.100");
        assert_eq!(sig3(123.4), "123");
        assert_eq!(sig3(0.0), "0");
    }
}
