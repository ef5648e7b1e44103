//! `linkshare export tc POLICY --dev DEV`: argument handling and printing only; the exporter
//! itself is `linkshare_interop::tc::export` (what maps to what is documented there and in
//! docs/export-tc.md).

use std::path::PathBuf;

use anyhow::Context;
use clap::{Args, Subcommand};
use linkshare_config::Policy;
use linkshare_interop::tc::export::{as_shell, tc_script};

/// Print the policy for another system.
#[derive(Args, Debug)]
pub struct ExportArgs {
    #[command(subcommand)]
    pub target: ExportTarget,
}

#[derive(Subcommand, Debug)]
pub enum ExportTarget {
    /// A `tc -batch` script with the kernel's HTB, leaf qdiscs and u32 filters (HTB policies
    /// and classless ones)
    ///
    /// Apply it with `tc -batch FILE` (or `linkshare export tc … --shell | sh`). It replaces
    /// DEV's root qdisc; when DEV already has an HTB root with classes, delete it first
    /// (`tc qdisc del dev DEV root`). Exit status: 0 ok, 1 invalid policy, a policy that uses
    /// something the kernel has no equivalent for, or bad usage; 2 unreadable file.
    Tc(TcArgs),
}

#[derive(Args, Debug)]
pub struct TcArgs {
    /// The policy file (TOML; see docs/policy-format.md)
    pub policy: PathBuf,
    /// The interface whose egress the policy shapes
    #[arg(long)]
    pub dev: String,
    /// Print a shell script (`tc` commands under `set -e`, deleting DEV's root qdisc first)
    /// instead of `tc -batch` input
    #[arg(long)]
    pub shell: bool,
    /// Print one JSON object: `dev`, `script` (tc -batch input), `shell`, `notes`, and per class
    /// its `name`, `classid` and leaf qdisc `handle` (the handles `linkshare stat` shows)
    #[arg(long, conflicts_with = "shell")]
    pub json: bool,
}

pub fn run(args: &ExportArgs) -> anyhow::Result<i32> {
    match &args.target {
        ExportTarget::Tc(a) => run_tc(a),
    }
}

fn run_tc(args: &TcArgs) -> anyhow::Result<i32> {
    let origin = args.policy.display().to_string();
    let text =
        std::fs::read_to_string(&args.policy).with_context(|| format!("cannot read `{origin}`"))?;
    let policy = match Policy::parse(&text, &origin) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("{}", linkshare_router::render_config_error(&text, &e));
            return Ok(crate::check::EXIT_INVALID);
        }
    };
    // A policy the kernel cannot express is rejected input (exit 1), like an invalid one.
    let script =
        tc_script(&policy, &args.dev).map_err(|e| crate::exit::invalid(format!("{e:#}")))?;
    for note in script.lines().filter_map(|l| l.strip_prefix("# note: ")) {
        eprintln!("note: {note}");
    }
    if args.json {
        let classes: Vec<serde_json::Value> = policy
            .classes()
            .iter()
            .enumerate()
            .map(|(i, c)| {
                serde_json::json!({
                    "name": c.name,
                    "classid": linkshare_interop::tc::export::classid(i),
                    "parent": c.parent,
                    "handle": c.is_leaf.then(|| linkshare_interop::tc::export::leaf_handle(i)),
                })
            })
            .collect();
        let notes: Vec<&str> = script
            .lines()
            .filter_map(|l| l.strip_prefix("# note: "))
            .collect();
        let v = serde_json::json!({
            "dev": args.dev,
            "policy": origin,
            "script": script,
            "shell": as_shell(&script, &args.dev),
            "notes": notes,
            "classes": classes,
        });
        println!("{v}");
    } else if args.shell {
        print!("{}", as_shell(&script, &args.dev));
    } else {
        print!("{script}");
    }
    Ok(0)
}
