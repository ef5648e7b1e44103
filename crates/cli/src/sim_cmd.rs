//! `linkshare sim [SCENARIO] [--out DIR] [--json] [--workers N]`: run a scenario in the simulator.
//!
//! Without SCENARIO it runs the embedded default, `scenarios/two-agency.toml` (Floyd & Jacobson's
//! two-agency link sharing, with HTB). It prints a table on the terminal and writes the report
//! (`summary.json`, `timeseries.csv`, plots, `report.html`) into DIR, by default
//! `out/<scenario name>` under the current directory. With `--json` the summary goes to stdout as
//! JSON instead of the table, and files are written only if `--out` is given.
//!
//! `--seeds N` runs the scenario (every point of its sweep) under seeds 1..=N as a sweep with a
//! last axis `seed`, and prints and writes (`sweep-ci.csv`) each figure's mean and 95 %
//! confidence interval over the seeds (`linkshare_sim::seeds`).
//!
//! `--seed N` replaces the scenario's seed and `--set KEY=VALUE` (repeatable) sets a key by the
//! dotted path a `[sweep]` axis uses (`flow.in.size=64`, `policy.class.c.rate=2mbit`); with a
//! sweep, every point is built from the edited file.
//!
//! `--workers N` runs the policy through the sharded HTB (`linkshare_core::shard`): its top-level
//! classes placed round robin on N shards that share the root's rate by token exchange, served
//! in a fixed order from one thread, so the run stays deterministic.
//!
//! A progress bar is drawn on stderr when the run takes longer than a second and stderr is a
//! terminal.
//!
//! A scenario with a `[sweep]` section runs every point (in parallel, deterministic), prints one
//! row per point and writes `sweep.csv` and `sweep.json` into DIR (with `--json`, `sweep.json`
//! goes to stdout). `--point N` runs point N alone with the full report; `--point 0` runs the file
//! without its sweep.
//!
//! A scenario's `[[expect]]` entries are judged on the run and printed after the table (on
//! stderr with `--json`), one PASS/FAIL line each with the figure.
//!
//! Exit codes: 0 success, 1 invalid scenario or failed run, 2 unreadable scenario file or
//! unwritable output directory, 3 an `[[expect]]` not met (the report is still written).

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use linkshare_sim::{Scenario, ScenarioError};

/// The default scenario, embedded so that `linkshare sim` works from anywhere.
pub const DEFAULT_SCENARIO: &str = include_str!("../../../scenarios/two-agency.toml");
/// Name the embedded scenario is reported under.
pub const DEFAULT_ORIGIN: &str = "scenarios/two-agency.toml (embedded)";

pub const EXIT_OK: i32 = 0;
pub const EXIT_FAILED: i32 = 1;
pub const EXIT_IO: i32 = 2;

/// Run `sim`; returns the process exit code.
pub fn run(
    scenario: Option<&Path>,
    out: Option<&Path>,
    json: bool,
    point: Option<usize>,
    workers: Option<u32>,
    (seed, seeds, sets): (Option<u64>, Option<u64>, &[String]),
) -> anyhow::Result<i32> {
    let mut edits = Vec::with_capacity(sets.len());
    for s in sets {
        match linkshare_sim::overrides::parse_assignment(s) {
            Ok(e) => edits.push(e),
            Err(m) => {
                eprintln!("error: --set {m}");
                return Ok(EXIT_FAILED);
            }
        }
    }
    if let Some(path) = scenario.filter(|p| !p.is_file()) {
        eprintln!(
            "{}: error: cannot read the scenario: no such file",
            path.display()
        );
        return Ok(EXIT_IO);
    }
    let load = |seed: Option<u64>| match scenario {
        Some(path) => Scenario::load_with(path, &edits, seed),
        None => linkshare_sim::overrides::apply(
            DEFAULT_SCENARIO,
            DEFAULT_ORIGIN,
            Path::new("scenarios"),
            "two-agency",
            &edits,
            seed,
        ),
    };
    let loaded = match seeds {
        None => load(seed),
        // Every seed's own load: arrival times are drawn when a scenario is checked.
        Some(n) => match (1..=n)
            .map(|s| load(Some(s)).map(|sc| (s, sc)))
            .collect::<Result<Vec<_>, _>>()
        {
            Err(e) => Err(e),
            Ok(loads) => {
                let mut first = loads[0].1.clone();
                match linkshare_sim::seeds::with_seeds(loads) {
                    Ok(sw) => {
                        first.sweep = Some(sw);
                        Ok(first)
                    }
                    Err(m) => {
                        eprintln!("{}: error: --seeds: {m}", first.origin);
                        return Ok(EXIT_FAILED);
                    }
                }
            }
        },
    };
    let mut sc = match loaded {
        Ok(sc) => sc,
        Err(e) => {
            print_scenario_error(&e, scenario);
            return Ok(EXIT_FAILED);
        }
    };
    if let Some(w) = workers {
        if w == 0 || w as usize > linkshare_core::shard::MAX_SHARDS {
            eprintln!(
                "error: --workers must be 1..={}, got {w}",
                linkshare_core::shard::MAX_SHARDS
            );
            return Ok(EXIT_FAILED);
        }
        sc.workers = w;
        if let Some(s) = sc.sweep.as_mut() {
            for p in &mut s.points {
                p.scenario.workers = w;
            }
        }
    }
    if let Some(w) = sc
        .policy
        .as_ref()
        .and_then(|p| p.root_rate_warning(sc.link.rate))
    {
        eprintln!("{}: warning: {w}", sc.origin);
    }
    match (point, sc.sweep.take()) {
        (None, Some(sweep)) => return run_sweep(&sc, &sweep, out, json),
        (Some(0), _) | (None, None) => {}
        (Some(n), Some(mut sweep)) if n <= sweep.points.len() => {
            sc = sweep.points.swap_remove(n - 1).scenario;
        }
        (Some(n), sweep) => {
            let have = sweep.map(|s| s.points.len()).unwrap_or(0);
            eprintln!(
                "{}: error: there is no point {n}: the scenario's sweep has {have} points",
                sc.origin
            );
            return Ok(EXIT_FAILED);
        }
    }

    let budget = linkshare_sim::series::Budget::default();
    if let Some(n) = linkshare_sim::series::Plan::new(&sc, budget).note(&sc, budget) {
        eprintln!("{}: warning: {n}", sc.origin);
    }
    let result = {
        let mut bar = Progress::new(&sc.name);
        let mut cb = |f: f64| bar.update(f);
        let r = linkshare_sim::run(&sc, Some(&mut cb));
        bar.finish();
        r
    };
    let result = match result {
        Ok(r) => r,
        Err(e) => {
            eprintln!("{}: error: {e}", sc.origin);
            return Ok(EXIT_FAILED);
        }
    };

    let dir: Option<PathBuf> = match (out, json) {
        (Some(d), _) => Some(d.to_path_buf()),
        (None, false) => Some(default_out_dir(&sc.name)),
        (None, true) => None,
    };
    let verdicts = linkshare_sim::expect::judge_all(&sc.expects, &result.summary);
    let verdict_text = linkshare_sim::expect::render("sim", &verdicts);
    if json {
        let text = linkshare_report::summary_json(&result)?;
        std::io::stdout().write_all(text.as_bytes())?;
        eprint!("{verdict_text}");
    } else {
        print!("{}", linkshare_report::render_table(&result));
        print!("{verdict_text}");
    }
    if let Some(dir) = dir {
        match linkshare_report::write_all(&result, &dir) {
            Ok(files) => {
                if !json {
                    let html = files
                        .iter()
                        .find(|p| p.extension().is_some_and(|e| e == "html"));
                    println!(
                        "\nwrote {} files to {}{}",
                        files.len(),
                        dir.display(),
                        html.map(|h| format!(" (open {})", h.display()))
                            .unwrap_or_default()
                    );
                }
            }
            Err(e) => {
                eprintln!("{}: error: cannot write the report: {e}", dir.display());
                return Ok(EXIT_IO);
            }
        }
    }
    if verdicts.iter().any(|v| !v.pass) {
        return Ok(crate::exit::EXPECT_FAILED);
    }
    Ok(EXIT_OK)
}

/// Run every point of a sweep, print the table (or sweep.json) and write sweep.csv/sweep.json.
fn run_sweep(
    sc: &Scenario,
    sweep: &linkshare_sim::sweep::Sweep,
    out: Option<&Path>,
    json: bool,
) -> anyhow::Result<i32> {
    let threads = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    let result = {
        let bar = std::sync::Mutex::new(Progress::new(&sc.name));
        let cb = |f: f64| {
            if let Ok(mut b) = bar.lock() {
                b.update(f);
            }
        };
        let r = linkshare_sim::sweep::run(&sc.name, sweep, threads, Some(&cb));
        if let Ok(mut b) = bar.lock() {
            b.finish();
        }
        r
    };
    let result = match result {
        Ok(r) => r,
        Err(e) => {
            eprintln!("{}: error: {e}", sc.origin);
            return Ok(EXIT_FAILED);
        }
    };
    let intervals = linkshare_sim::seeds::intervals(&result);
    if json {
        std::io::stdout().write_all(result.json()?.as_bytes())?;
    } else {
        print!("{}", result.render_table());
        if let Some(ivs) = &intervals {
            print!("\n{}", ivs.render_table());
        }
    }
    let dir: Option<PathBuf> = match (out, json) {
        (Some(d), _) => Some(d.to_path_buf()),
        (None, false) => Some(default_out_dir(&sc.name)),
        (None, true) => None,
    };
    if let Some(dir) = dir {
        let written = result.write(&dir).and_then(|mut files| {
            if let Some(ivs) = &intervals {
                files.push(ivs.write(&dir)?);
            }
            Ok(files)
        });
        match written {
            Ok(files) => {
                if !json {
                    println!(
                        "\nwrote {} files to {} (`--point N` runs one point with plots)",
                        files.len(),
                        dir.display()
                    );
                }
            }
            Err(e) => {
                eprintln!("{}: error: cannot write the sweep: {e}", dir.display());
                return Ok(EXIT_IO);
            }
        }
    }
    Ok(EXIT_OK)
}

/// `out/<name>`, with characters that do not belong in a directory name replaced by `_`.
pub fn default_out_dir(name: &str) -> PathBuf {
    let clean: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let clean = if clean.is_empty() || clean.chars().all(|c| c == '.') {
        "scenario".to_string()
    } else {
        clean
    };
    Path::new("out").join(clean)
}

/// Print every diagnostic with the source line it points at, as `linkshare check` does.
fn print_scenario_error(e: &ScenarioError, scenario: Option<&Path>) {
    for d in &e.diagnostics {
        let text = if d.line == 0 {
            None
        } else if scenario.is_none() && d.file == DEFAULT_ORIGIN {
            Some(DEFAULT_SCENARIO.to_string())
        } else {
            std::fs::read_to_string(&d.file).ok()
        };
        match text {
            Some(t) => eprintln!("{}", d.render_with_source(&t)),
            None => eprintln!("{d}"),
        }
    }
}

/// A plain `\r` progress bar on stderr, shown only after a second and only on a terminal.
struct Progress {
    name: String,
    start: Instant,
    last: Option<Instant>,
    enabled: bool,
    drawn: bool,
}

impl Progress {
    fn new(name: &str) -> Self {
        Progress {
            name: name.to_string(),
            start: Instant::now(),
            last: None,
            enabled: std::io::stderr().is_terminal(),
            drawn: false,
        }
    }

    fn update(&mut self, fraction: f64) {
        if !self.enabled || self.start.elapsed() < Duration::from_secs(1) {
            return;
        }
        if self
            .last
            .is_some_and(|t| t.elapsed() < Duration::from_millis(100))
        {
            return;
        }
        self.last = Some(Instant::now());
        let f = fraction.clamp(0.0, 1.0);
        let width = 40;
        let full = (f * width as f64).round() as usize;
        let bar: String = "#".repeat(full) + &".".repeat(width - full);
        let mut err = std::io::stderr();
        let _ = write!(err, "\r{} [{bar}] {:3.0}%", self.name, f * 100.0);
        let _ = err.flush();
        self.drawn = true;
    }

    fn finish(&mut self) {
        if self.drawn {
            let mut err = std::io::stderr();
            let _ = write!(err, "\r{}\r", " ".repeat(self.name.len() + 50));
            let _ = err.flush();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embedded_default_parses() {
        let sc = Scenario::parse_with(
            DEFAULT_SCENARIO,
            DEFAULT_ORIGIN,
            Path::new("scenarios"),
            "two-agency",
        )
        .unwrap();
        assert_eq!(sc.name, "two-agency");
        assert!(sc.policy.is_some());
    }

    #[test]
    fn out_dir_names() {
        assert_eq!(default_out_dir("two-agency"), Path::new("out/two-agency"));
        assert_eq!(default_out_dir("a b/c"), Path::new("out/a_b_c"));
        assert_eq!(default_out_dir(".."), Path::new("out/scenario"));
    }
}
