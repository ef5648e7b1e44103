//! The kernel's side in a user-mode Linux guest (`linkshare_lab::uml`): `linkshare lab uml --
//! COMMAND` (what scripts/uml runs), and the switch `lab --kernel` and `compare --kernel` make
//! when this kernel lacks a qdisc the policy needs (CAKE, HFSC, …): the same binary runs the
//! kernel's side inside the guest and writes its outputs to the host through a writable mount.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::Args;
use linkshare_lab::uml::{self, Guest, GuestCheck};
use linkshare_sim::compare::{self, Figures};
use linkshare_sim::Scenario;

#[derive(Args, Debug)]
pub struct UmlArgs {
    /// Memory of the guest (`linux mem=`)
    #[arg(long, default_value = "2G")]
    pub mem: String,
    /// A host directory the guest may write (mounted at its own path; repeatable). The rest of
    /// the host's file system is visible read-only; /tmp and /run are the guest's own
    #[arg(long, value_name = "DIR")]
    pub rw: Vec<PathBuf>,
    /// The command and its arguments
    #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
    pub command: Vec<OsString>,
}

/// `linkshare lab uml [--mem M] [--rw DIR]… -- COMMAND…`: the command's exit status, 2 when no
/// guest could run it.
pub fn run(args: &UmlArgs) -> anyhow::Result<i32> {
    let guest = Guest {
        mem: args.mem.clone(),
        rw: args.rw.clone(),
        ..Guest::default()
    };
    match guest.run(&args.command) {
        Ok(r) => Ok(r.rc),
        Err(e) => {
            eprintln!("error: {e:#}");
            Ok(crate::exit::RUNTIME)
        }
    }
}

/// Say why the kernel's side moves into the guest.
fn announce(what: &str, missing: &[String]) {
    let names: Vec<String> = missing.iter().map(|k| format!("sch_{k}")).collect();
    eprintln!(
        "{what}: this kernel has no {}: the kernel's side runs in a user-mode Linux guest \
         (Linux 6.1, one CPU; docs/lab.md)",
        names.join(", ")
    );
}

/// `lab --kernel` again, inside the guest (the current command line with
/// [`uml::IN_GUEST_ENV`] set), its report written to `out` (default: ./out).
pub fn lab_in_guest(
    missing: &[String],
    scenario: Option<&Path>,
    out: Option<&Path>,
) -> anyhow::Result<i32> {
    announce("lab --kernel", missing);
    let exe = std::env::current_exe().context("cannot find the linkshare executable")?;
    let mut argv: Vec<OsString> = vec![exe.into_os_string()];
    argv.extend(std::env::args_os().skip(1));
    let rw = out.map_or_else(|| PathBuf::from("out"), Path::to_path_buf);
    let guest = Guest {
        rw: vec![rw],
        ro: scenario_dir(scenario),
        ..Guest::default()
    };
    match guest.run(&argv) {
        Ok(r) => Ok(r.rc),
        Err(e) => {
            eprintln!("error: lab --kernel: {e:#}");
            Ok(crate::exit::RUNTIME)
        }
    }
}

/// The kernel's side of `compare` inside the guest: `lab --kernel SCENARIO --out DIR --figures
/// DIR/figures.json` there, its figures read back with the guest's check (whether the host
/// starved it). `Err(code)` when it could not be used.
pub fn compare_kernel_in_guest(
    missing: &[String],
    scenario: &Path,
    name: &str,
    dir: &Path,
) -> anyhow::Result<Result<(Figures, GuestCheck), i32>> {
    announce(&format!("compare: {name}"), missing);
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let dir = dir
        .canonicalize()
        .with_context(|| format!("cannot resolve {}", dir.display()))?;
    let scenario = scenario
        .canonicalize()
        .with_context(|| format!("cannot resolve {}", scenario.display()))?;
    let figures = dir.join("figures.json");
    let senders = senders_file(&figures);
    let _ = std::fs::remove_file(&figures);
    let _ = std::fs::remove_file(&senders);
    let exe = std::env::current_exe().context("cannot find the linkshare executable")?;
    let argv: Vec<OsString> = vec![
        exe.into_os_string(),
        "lab".into(),
        "--kernel".into(),
        scenario.clone().into_os_string(),
        "--out".into(),
        dir.clone().into_os_string(),
        "--figures".into(),
        figures.clone().into_os_string(),
    ];
    let guest = Guest {
        rw: vec![dir],
        ro: scenario_dir(Some(&scenario)),
        stdout_to_stderr: true,
        ..Guest::default()
    };
    let (rc, mut check) = match guest.run(&argv) {
        Ok(r) => (r.rc, r.check),
        Err(e) => {
            eprintln!("error: compare --kernel: {e:#}");
            return Ok(Err(crate::exit::RUNTIME));
        }
    };
    if rc != 0 {
        eprintln!("error: the kernel's side in the user-mode Linux guest failed (exit {rc})");
        return Ok(Err(crate::exit::RUNTIME));
    }
    let text = std::fs::read_to_string(&figures)
        .with_context(|| format!("the guest wrote no {}", figures.display()))?;
    let f: Figures = serde_json::from_str(&text)
        .with_context(|| format!("{} is not valid", figures.display()))?;
    check.senders = std::fs::read_to_string(&senders)
        .ok()
        .filter(|s| !s.trim().is_empty());
    if let (Some(_), Some(why)) = (&check.senders, check.starved()) {
        eprintln!("warning: {why}");
    }
    Ok(Ok((f, check)))
}

/// Where the guest's `lab --figures FILE` says that its UDP sources woke late and skipped datagrams:
/// beside FILE (absent when they kept up).
fn senders_file(figures: &Path) -> PathBuf {
    figures.with_extension("senders")
}

/// `lab --figures FILE`: the run's comparison figures over the scenario's phases, as `compare`
/// measures them (for the kernel's side run in a guest).
pub fn write_figures(
    scenario: Option<&Path>,
    result: &linkshare_sim::model::SimResult,
    file: &Path,
) -> anyhow::Result<()> {
    let sc = match scenario {
        Some(p) => Scenario::load(p),
        None => Scenario::parse(
            linkshare_lab::DEFAULT_SCENARIO,
            linkshare_lab::DEFAULT_ORIGIN,
        ),
    }
    .map_err(|e| anyhow::anyhow!("the scenario: {e}"))?;
    let phases = compare::phases::of_scenario(&sc);
    let f = Figures::of_scenario(result, &sc, &phases);
    let json = serde_json::to_string(&f)?;
    std::fs::write(file, json).with_context(|| format!("cannot write {}", file.display()))?;
    if let Some(note) = linkshare_lab::run::senders_starved(result) {
        let s = senders_file(file);
        std::fs::write(&s, note).with_context(|| format!("cannot write {}", s.display()))?;
    }
    Ok(())
}

/// The scenario's directory (it may be under /tmp, which the guest has its own of).
fn scenario_dir(scenario: Option<&Path>) -> Vec<PathBuf> {
    scenario
        .and_then(|p| p.canonicalize().ok())
        .and_then(|p| p.parent().map(Path::to_path_buf))
        .into_iter()
        .collect()
}

/// Whether `lab --kernel` / `compare --kernel` must run the kernel's side in a guest: the
/// qdiscs this kernel lacks (empty: run here).
pub fn missing_for(scenario: Option<&Path>) -> Vec<String> {
    if uml::in_guest() {
        return Vec::new();
    }
    linkshare_lab::run::kernel_qdiscs_missing(scenario)
}
