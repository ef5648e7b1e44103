//! `linkshare compare SCENARIO [--kernel] [--max-error PCT] [--out DIR] [--json]`: run one
//! scenario in the simulator and in the lab (real kernel TCP through `linkshare run`, and with
//! `--kernel` through the kernel's HTB too), and hold the simulator against the lab per class per
//! phase (`linkshare_sim::compare`, docs/fidelity.md).
//!
//! Writes `DIR/sim/`, `DIR/lab/` (and `DIR/kernel/`): each side's full report; `DIR/compare.json`:
//! every number of the table; `DIR/report.html`: the tables and, per class, the sides' time series
//! overlaid with the phases shaded.
//!
//! `--record FILE SCENARIO…` instead runs the lab on every scenario and stores its figures in
//! FILE (`scenarios/calibration/lab-results.json`), keeping the tolerances already there.
//!
//! The scenario's `[[expect]]` entries are judged on each side (sim, lab, kernel) and printed
//! after the table, PASS/FAIL with the figure.
//!
//! The lab measures its host while it runs (`linkshare_lab::host`); its figures are printed
//! beside the verdict, and a host past a threshold (`--max-timer-late-ms`, `--max-steal`,
//! `--max-load`; `linkshare_sim::compare::trust`) marks the run untrustworthy.
//!
//! Exit codes: 0 within the tolerance, 1 outside it, 2 anything else (unreadable or invalid
//! scenario, no testbed: not root, no `ip`, namespaces cannot be created; a flow failed; output not
//! writable), 3 within the tolerance but an `[[expect]]` not met on a side, 4 outside the
//! tolerance on an untrustworthy host (no verdict on the simulator), 130 interrupted. Within the
//! tolerance on an untrustworthy host is 0 (the note is printed): the sides agreed all the same.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use linkshare_sim::compare::stored::{Stored, StoredScenario};
use linkshare_sim::compare::trust::HostThresholds;
use linkshare_sim::compare::{self, Comparison, Figures, Overlay, Tolerance};
use linkshare_sim::model::SimResult;
use linkshare_sim::Scenario;

use linkshare_lab as lab;

#[derive(clap::Args, Debug)]
pub struct CompareArgs {
    /// Scenario file (with --record: one or more)
    #[arg(required = true)]
    pub scenario: Vec<PathBuf>,
    /// Also run the lab through the kernel's HTB (a third column; not part of the verdict). With
    /// --record: record the kernel's column too (without it a stored kernel column is kept)
    #[arg(long)]
    pub kernel: bool,
    /// Largest |sim − lab| of a class in a phase, percent of the link rate
    #[arg(long, value_name = "PCT", default_value_t = Tolerance::TARGET.rate_pct)]
    pub max_error: f64,
    /// Largest |sim − lab| of a ping flow's RTT p50, percent of the lab's (or 1 ms if larger)
    #[arg(long, value_name = "PCT", default_value_t = Tolerance::TARGET.rtt_pct)]
    pub max_rtt_error: f64,
    /// Largest |sim − lab| of a flow group (one `[[flow]]` entry's flows) in a phase, percent of
    /// the link rate
    #[arg(long, value_name = "PCT", default_value_t = 5.0)]
    pub max_flow_error: f64,
    /// The lab's host is untrustworthy above this timer wake-up lateness p99 (ms; the sampler's
    /// 1 ms sleeps or the shaper's own pacing)
    #[arg(long, value_name = "MS", default_value_t = HostThresholds::DEFAULT.timer_p99_ms)]
    pub max_timer_late_ms: f64,
    /// … above this CPU steal, percent of all CPU time over the run
    #[arg(long, value_name = "PCT", default_value_t = HostThresholds::DEFAULT.steal_pct)]
    pub max_steal: f64,
    /// … above this 1-minute load average per CPU (the largest read during the run)
    #[arg(long, value_name = "PER_CPU", default_value_t = HostThresholds::DEFAULT.load_per_cpu)]
    pub max_load: f64,
    /// Take the tolerance from the scenario's entry in this stored-results file instead
    #[arg(long, value_name = "FILE", conflicts_with_all = ["max_error", "max_rtt_error", "max_flow_error"])]
    pub tolerance_from: Option<PathBuf>,
    /// Output directory (default: out/<scenario name>-compare)
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Print compare.json on stdout instead of the table
    #[arg(long)]
    pub json: bool,
    /// Run the lab on every SCENARIO and store its figures in FILE (no simulation, no verdict)
    #[arg(long, value_name = "FILE")]
    pub record: Option<PathBuf>,
    /// With --record: run the lab twice and store how far the second run is from the first
    /// (the lab's repeatability, beside the tolerance)
    #[arg(long, requires = "record")]
    pub repeat: bool,
    /// Do not run the lab: compare with the scenario's figures stored in FILE (no root needed)
    #[arg(long, value_name = "FILE", conflicts_with_all = ["record", "kernel"])]
    pub against: Option<PathBuf>,
}

const EXIT_ERROR: i32 = 2;

pub fn run(args: &CompareArgs) -> anyhow::Result<i32> {
    if let Some(file) = &args.record {
        return record(args, file);
    }
    if args.scenario.len() != 1 {
        eprintln!("error: compare takes one scenario (several only with --record)");
        return Ok(EXIT_ERROR);
    }
    let path = &args.scenario[0];
    let Some(sc) = load(path) else {
        return Ok(EXIT_ERROR);
    };
    let tolerance = match &args.tolerance_from {
        Some(f) => match stored_entry(f, path)? {
            Some(e) => e.tolerance,
            None => {
                eprintln!(
                    "{}: error: no entry for {} (record it with --record)",
                    f.display(),
                    path.display()
                );
                return Ok(EXIT_ERROR);
            }
        },
        None => Tolerance {
            rate_pct: args.max_error,
            rtt_pct: args.max_rtt_error,
            rtt_floor_ms: Tolerance::TARGET.rtt_floor_ms,
            fct_pct: Tolerance::TARGET.fct_pct,
            flow_pct: Some(args.max_flow_error),
        },
    };
    let against = match &args.against {
        Some(f) => match stored_entry(f, path)? {
            Some(e) => Some(e),
            None => {
                eprintln!(
                    "{}: error: no entry for {} (record it with --record)",
                    f.display(),
                    path.display()
                );
                return Ok(EXIT_ERROR);
            }
        },
        None => None,
    };
    if against.is_none() {
        if let Some(why) = lab::testbed::unavailable() {
            eprintln!("error: {why}");
            return Ok(EXIT_ERROR);
        }
    }
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| crate::sim_cmd::default_out_dir(&format!("{}-compare", sc.name)));
    let command = std::env::args().collect::<Vec<_>>().join(" ");

    eprintln!("compare: {} — simulating", sc.name);
    let sim = match linkshare_sim::run(&sc, None) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("{}: error: {e}", sc.origin);
            return Ok(EXIT_ERROR);
        }
    };
    write_side(&sim, &out.join("sim"), &command)?;

    if let Some(entry) = against {
        let mut c = match entry.check(&sc, &sim, tolerance) {
            Ok(c) => c,
            Err(m) => {
                eprintln!("error: {m}");
                return Ok(EXIT_ERROR);
            }
        };
        let kernel = entry.kernel.is_some();
        let overlays = [Overlay {
            label: "sim",
            result: &sim,
        }];
        return finish(
            args,
            &mut c,
            &out,
            &overlays,
            sc.policy.is_none(),
            kernel,
            &command,
            &sc.expects,
        );
    }

    let lab_run = match lab_side(path, &sc, false)? {
        Ok(r) => r,
        Err(code) => return Ok(code),
    };
    write_side(&lab_run, &out.join("lab"), &command)?;
    let mut measured = vec![("lab", lab_run)];

    let phases = compare::phases::of_scenario(&sc);
    let no_policy = sc.policy.is_none();
    let fig = |r: &SimResult| Figures::of_scenario(r, &sc, &phases);
    let lab_fig = fig(&measured[0].1);
    let mut kernel_fig = None;
    let mut starved = None;
    if args.kernel {
        match kernel_side(path, &sc, &out.join("kernel"), &command, &phases)? {
            Ok(k) => {
                kernel_fig = Some(k.figures);
                starved = k.guest.as_ref().and_then(lab::uml::GuestCheck::starved);
                // A side run in a guest has its own report in DIR/kernel but no overlay.
                if let Some(r) = k.result {
                    measured.push(("kernel", r));
                }
            }
            Err(code) => return Ok(code),
        }
    }
    let mut c = Comparison::new(
        &sc.name,
        compare::groups::reference_rate_bps(&sc),
        &phases,
        &fig(&sim),
        &lab_fig,
        kernel_fig.as_ref(),
        tolerance,
    );

    let mut overlays = vec![Overlay {
        label: "sim",
        result: &sim,
    }];
    for (label, r) in &measured {
        overlays.push(Overlay { label, result: r });
    }
    let code = finish(
        args,
        &mut c,
        &out,
        &overlays,
        no_policy,
        args.kernel,
        &command,
        &sc.expects,
    )?;
    if let Some(why) = &starved {
        // The kernel's column is beside the verdict, not part of it: said after the table.
        eprintln!("warning: the kernel's column is not a reference: {why}");
    }
    Ok(code)
}

/// Print the comparison (and each side's verdicts on the scenario's `[[expect]]`), write
/// compare.json and report.html; the exit code.
#[allow(clippy::too_many_arguments)]
fn finish(
    args: &CompareArgs,
    c: &mut Comparison,
    out: &Path,
    overlays: &[Overlay],
    no_policy: bool,
    kernel: bool,
    command: &str,
    expects: &[linkshare_sim::expect::Expect],
) -> anyhow::Result<i32> {
    c.set_host_thresholds(HostThresholds {
        timer_p99_ms: args.max_timer_late_ms,
        steal_pct: args.max_steal,
        load_per_cpu: args.max_load,
    });
    let json = c.to_json()?;
    let mut verdicts = String::new();
    let mut unmet = false;
    for o in overlays {
        let v = linkshare_sim::expect::judge_all(expects, &o.result.summary);
        unmet |= v.iter().any(|v| !v.pass);
        verdicts.push_str(&linkshare_sim::expect::render(o.label, &v));
    }
    if args.json {
        std::io::stdout().write_all(json.as_bytes())?;
        eprint!("{verdicts}");
    } else {
        print!("{}", compare::render_text(c, kernel));
        print!("{verdicts}");
    }
    let html = compare::render_html(c, overlays, no_policy, Some(command));
    let written = std::fs::create_dir_all(out)
        .and_then(|_| std::fs::write(out.join("compare.json"), &json))
        .and_then(|_| std::fs::write(out.join("report.html"), html));
    if let Err(e) = written {
        eprintln!("{}: error: cannot write the comparison: {e}", out.display());
        return Ok(EXIT_ERROR);
    }
    if !args.json {
        println!(
            "\nwrote {0}/compare.json, {0}/report.html and the sides' reports in {0}/sim{1}",
            out.display(),
            if args.against.is_some() {
                " (the lab's figures were the stored ones)".to_string()
            } else if args.kernel {
                format!(", {0}/lab, {0}/kernel", out.display())
            } else {
                format!(", {}/lab", out.display())
            }
        );
    }
    Ok(if !c.pass && !c.trustworthy() {
        crate::exit::HOST_BUSY
    } else if !c.pass {
        1
    } else if unmet {
        crate::exit::EXPECT_FAILED
    } else {
        0
    })
}

/// The scenario, or `None` with the diagnostics printed.
fn load(path: &Path) -> Option<Scenario> {
    if !path.is_file() {
        eprintln!(
            "{}: error: cannot read the scenario: no such file",
            path.display()
        );
        return None;
    }
    match Scenario::load(path) {
        Ok(mut sc) => {
            if sc.sweep.take().is_some() {
                eprintln!(
                    "{}: note: compare runs the file without its [sweep]",
                    sc.origin
                );
            }
            Some(sc)
        }
        Err(e) => {
            let text = std::fs::read_to_string(path).unwrap_or_default();
            for d in &e.diagnostics {
                if d.line > 0 {
                    eprintln!("{}", d.render_with_source(&text));
                } else {
                    eprintln!("{d}");
                }
            }
            None
        }
    }
}

fn write_side(r: &SimResult, dir: &Path, command: &str) -> anyhow::Result<()> {
    let opts = linkshare_report::ReportOptions {
        command: Some(command.to_string()),
    };
    linkshare_report::write_all_with(r, dir, &opts)
        .with_context(|| format!("cannot write the report to {}", dir.display()))?;
    Ok(())
}

/// One lab run with a progress line on stderr; `Err(code)` when it could not be used.
fn lab_side(path: &Path, sc: &Scenario, kernel: bool) -> anyhow::Result<Result<SimResult, i32>> {
    let what = if kernel { "the kernel" } else { "linkshare" };
    let done = Arc::new(AtomicBool::new(false));
    let ticker = {
        let done = done.clone();
        let total = sc.duration.as_secs_f64();
        let label = format!("compare: {} through {what}", sc.name);
        std::thread::spawn(move || {
            let start = Instant::now();
            let mut next = 5.0;
            while !done.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(200));
                let t = start.elapsed().as_secs_f64();
                if t >= next {
                    eprintln!("{label}: {t:.0} s of about {:.0} s", total + 3.0);
                    next += 5.0;
                }
            }
        })
    };
    let r = lab::execute(Some(path), kernel);
    done.store(true, Ordering::Relaxed);
    let _ = ticker.join();
    let run = match r.context("the lab run failed (namespace testbed)")? {
        Ok(run) => run,
        Err(code) => return Ok(Err(if code == 1 { EXIT_ERROR } else { code })),
    };
    if run.interrupted {
        eprintln!("error: interrupted");
        return Ok(Err(lab::EXIT_INTERRUPTED));
    }
    if !run.failures.is_empty() {
        for f in &run.failures {
            eprintln!("error: lab through {what}: {f}");
        }
        return Ok(Err(EXIT_ERROR));
    }
    Ok(Ok(run.result))
}

/// The kernel's side as measured: its figures, its full result where it ran here (for the
/// overlays), and the guest's check where it ran in a user-mode Linux guest.
struct KernelSide {
    figures: Figures,
    result: Option<SimResult>,
    guest: Option<lab::uml::GuestCheck>,
}

/// The kernel's side: here, or in a user-mode Linux guest when this kernel lacks a qdisc the
/// policy needs (then only its figures come back, with the guest's check; its report is in
/// `dir` all the same).
fn kernel_side(
    path: &Path,
    sc: &Scenario,
    dir: &Path,
    command: &str,
    phases: &[compare::Phase],
) -> anyhow::Result<Result<KernelSide, i32>> {
    let missing = crate::uml_cmd::missing_for(Some(path));
    if !missing.is_empty() {
        return Ok(
            crate::uml_cmd::compare_kernel_in_guest(&missing, path, &sc.name, dir)?.map(
                |(figures, check)| KernelSide {
                    figures,
                    result: None,
                    guest: Some(check),
                },
            ),
        );
    }
    Ok(match lab_side(path, sc, true)? {
        Ok(r) => {
            write_side(&r, dir, command)?;
            Ok(KernelSide {
                figures: Figures::of_scenario(&r, sc, phases),
                result: Some(r),
                guest: None,
            })
        }
        Err(code) => Err(code),
    })
}

/// Why the kernel's side ran in a guest the host starved, if it did.
fn starved_guest(side: &anyhow::Result<Result<KernelSide, i32>>) -> Option<String> {
    match side {
        Ok(Ok(k)) => k.guest.as_ref().and_then(lab::uml::GuestCheck::starved),
        _ => None,
    }
}

/// Name a scenario is stored under: its file stem.
fn stored_name(path: &Path) -> String {
    path.file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or("scenario")
        .to_string()
}

fn stored_entry(file: &Path, scenario: &Path) -> anyhow::Result<Option<StoredScenario>> {
    let text =
        std::fs::read_to_string(file).with_context(|| format!("cannot read {}", file.display()))?;
    let st =
        Stored::from_json(&text).with_context(|| format!("{} is not valid", file.display()))?;
    Ok(st.scenarios.get(&stored_name(scenario)).cloned())
}

/// `--record FILE`: lab figures of every scenario, stored.
fn record(args: &CompareArgs, file: &Path) -> anyhow::Result<i32> {
    if let Some(why) = lab::testbed::unavailable() {
        eprintln!("error: {why}");
        return Ok(EXIT_ERROR);
    }
    let mut st = match std::fs::read_to_string(file) {
        Ok(t) => {
            Stored::from_json(&t).with_context(|| format!("{} is not valid", file.display()))?
        }
        Err(_) => Stored {
            kernel: String::new(),
            date: String::new(),
            target: Tolerance::TARGET,
            scenarios: Default::default(),
        },
    };
    st.kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_default();
    st.date = today();
    st.target = Tolerance::TARGET;
    let mut missed = Vec::new();
    for path in &args.scenario {
        let Some(sc) = load(path) else {
            return Ok(EXIT_ERROR);
        };
        let phases = compare::phases::of_scenario(&sc);
        // A flow failing in the lab (a lagging sender on a busy machine) gets one more try.
        let lab = match lab_side(path, &sc, false)? {
            Ok(r) => Figures::of_scenario(&r, &sc, &phases),
            Err(EXIT_ERROR) => {
                eprintln!("compare: {}: trying the lab run once more", sc.name);
                match lab_side(path, &sc, false)? {
                    Ok(r) => Figures::of_scenario(&r, &sc, &phases),
                    Err(EXIT_ERROR) => {
                        eprintln!(
                            "compare: {}: not recorded (the lab run failed twice)",
                            sc.name
                        );
                        missed.push(sc.name.clone());
                        continue;
                    }
                    Err(code) => return Ok(code),
                }
            }
            Err(code) => return Ok(code),
        };
        // The lab against itself: a second run, its distance from the first stored beside the
        // tolerance. A failed second run leaves the entry without it.
        let repeat = if args.repeat {
            match lab_side(path, &sc, false)? {
                Ok(r) => {
                    let second = Figures::of_scenario(&r, &sc, &phases);
                    let rep = compare::stored::Repeat::of(&sc, &phases, &lab, &second);
                    eprintln!(
                        "compare: {}: lab against lab {:.1} % of the link (classes), {} (flow groups)",
                        sc.name,
                        rep.rate_pct,
                        rep.flow_pct
                            .map(|f| format!("{f:.1} %"))
                            .unwrap_or_else(|| "-".into())
                    );
                    Some(rep)
                }
                Err(lab::EXIT_INTERRUPTED) => return Ok(lab::EXIT_INTERRUPTED),
                Err(_) => None,
            }
        } else {
            None
        };
        // The kernel's column is for scale only: a policy the kernel's HTB cannot run (CBQ) is
        // recorded without it.
        let kernel = if args.kernel {
            let dir = std::env::temp_dir().join(format!(
                "linkshare-record-{}-{}",
                std::process::id(),
                sc.name
            ));
            // A guest the host starved recorded the host's load, not the kernel's figures: it
            // gets one more try, then the scenario is not recorded (uml::check).
            let mut side = kernel_side(path, &sc, &dir, "compare --record", &phases);
            if let Some(why) = starved_guest(&side) {
                eprintln!(
                    "compare: {}: {why}; trying the kernel's side once more",
                    sc.name
                );
                side = kernel_side(path, &sc, &dir, "compare --record", &phases);
            }
            let _ = std::fs::remove_dir_all(&dir);
            if let Some(why) = starved_guest(&side) {
                eprintln!("compare: {}: not recorded: {why}", sc.name);
                missed.push(sc.name.clone());
                continue;
            }
            match side {
                Ok(Ok(k)) => Some(k.figures),
                Ok(Err(lab::EXIT_INTERRUPTED)) => return Ok(lab::EXIT_INTERRUPTED),
                Ok(Err(_)) => None,
                Err(e) => {
                    eprintln!("compare: {}: no kernel column: {e:#}", sc.name);
                    None
                }
            }
        } else {
            // Without --kernel the stored kernel column stays: recording the lab again (after
            // a change to the lab) does not throw away a reference that took a guest to make.
            st.scenarios
                .get(&stored_name(path))
                .and_then(|e| e.kernel.clone())
        };
        let name = stored_name(path);
        let tolerance = st
            .scenarios
            .get(&name)
            .map(|e| e.tolerance)
            .unwrap_or(Tolerance::TARGET);
        let entry = StoredScenario {
            file: path
                .file_name()
                .map(|f| f.to_string_lossy().into_owned())
                .unwrap_or_else(|| path.display().to_string()),
            tolerance,
            phases,
            lab,
            kernel,
            repeat,
        };
        // Show where the simulator stands against what was just measured.
        if let Ok(sim) = linkshare_sim::run(&sc, None) {
            if let Ok(c) = entry.check(&sc, &sim, Tolerance::TARGET) {
                eprintln!(
                    "compare: {name}: worst sim−lab {:+.1} % of the link ({}){}{}",
                    c.worst.rate_pct,
                    c.worst.rate_at.as_deref().unwrap_or("-"),
                    c.worst
                        .flow_pct
                        .map(|f| format!(", flow groups {f:+.1} %"))
                        .unwrap_or_default(),
                    c.worst
                        .kernel_rate_pct
                        .map(|k| format!(", kernel−lab {k:+.1} %"))
                        .unwrap_or_default()
                );
            }
        }
        st.scenarios.insert(name, entry);
        // Written after every scenario: a long recording interrupted keeps what it measured.
        std::fs::write(file, st.to_json()?)
            .with_context(|| format!("cannot write {}", file.display()))?;
    }
    println!(
        "recorded {} scenario(s) in {} (kernel {}, {})",
        args.scenario.len() - missed.len(),
        file.display(),
        st.kernel,
        st.date
    );
    if missed.is_empty() {
        Ok(0)
    } else {
        eprintln!("error: not recorded: {}", missed.join(", "));
        Ok(EXIT_ERROR)
    }
}

/// Today's date (UTC) as `YYYY-MM-DD`, from the system clock (days to civil date: Howard
/// Hinnant's algorithm, proleptic Gregorian calendar).
fn today() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let (y, m, d) = civil_from_days((secs / 86_400) as i64);
    format!("{y:04}-{m:02}-{d:02}")
}

fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn civil_dates() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
        assert_eq!(civil_from_days(20_454), (2026, 1, 1));
    }

    #[test]
    fn stored_name_is_the_stem() {
        assert_eq!(
            stored_name(Path::new("scenarios/calibration/office.toml")),
            "office"
        );
    }
}
