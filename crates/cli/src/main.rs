//! The `linkshare` command line.

mod bench_memory;
mod bench_sched;
mod bench_workers;
mod check;
mod class_csv;
mod class_edit;
mod compare_cmd;
mod dist_cmd;
mod exit;
mod export_tc;
mod fail_open;
mod fidelity_doc;
mod import_cmd;
mod lab_cmd;
mod router_cmds;
mod seeds_doc;
mod sim_cmd;
mod stat_tc;
mod stat_view;
mod thread_time;
mod uml_cmd;

use clap::{Parser, Subcommand};

/// linkshare: hierarchical link-sharing QoS (HTB and friends) as a library, a deterministic
/// simulator and a Linux shaper.
///
/// A policy file (TOML, tc units) describes a tree of classes with guaranteed rates (`rate`),
/// borrowing limits (`ceil`), priorities, leaf queues and filters. `linkshare check` validates
/// one and shows the tree.
#[derive(Parser, Debug)]
#[command(name = "linkshare", version, about, long_about)]
#[command(
    after_help = "Exit codes: 0 ok, 1 rejected (bad usage, invalid policy/scenario/option, \
a change the shaper refused), 2 runtime error (I/O, permissions, interface missing or busy, \
no shaper), 130 interrupted."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Validate a policy file and print its class tree, rates and warnings
    Check(check::CheckArgs),
    /// Simulate a scenario (default: the embedded two-agency example) and write its report
    ///
    /// Prints a table of what each class and flow got; writes summary.json, timeseries.csv,
    /// rtt.csv, plots (SVG and PNG) and report.html to the output directory. A scenario with a
    /// [sweep] section runs every point and prints one row per point; it writes sweep.csv and
    /// sweep.json (`--point N` runs one point with the full report).
    /// Exit codes: 0 ok, 1 invalid scenario or failed run, 2 unreadable file or unwritable output.
    Sim {
        /// Scenario file (TOML, docs/scenario-format.md); the embedded two-agency example if omitted
        scenario: Option<std::path::PathBuf>,
        /// Output directory (default: out/<scenario name>)
        #[arg(long)]
        out: Option<std::path::PathBuf>,
        /// Print summary.json (sweep.json for a sweep) on stdout instead of the table
        #[arg(long)]
        json: bool,
        /// For a scenario with a [sweep]: run only point N (as numbered in the sweep's table) and
        /// write its full report; 0 runs the file without its sweep
        #[arg(long, value_name = "N")]
        point: Option<usize>,
        /// Run an HTB policy through the sharded scheduler (linkshare_core::shard): top-level classes
        /// placed round robin on N shards sharing the root's rate (deterministic, one thread)
        #[arg(long, value_name = "N")]
        workers: Option<u32>,
        /// Replace the scenario's seed (a seed other than 1 also jitters flow starts and ACKs;
        /// docs/scenario-format.md)
        #[arg(long, value_name = "N", conflicts_with = "seeds")]
        seed: Option<u64>,
        /// Run the scenario (every point of its [sweep]) under seeds 1..=N and report each
        /// figure's mean and 95 % confidence interval over the seeds (sweep-ci.csv)
        #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(2..=1000))]
        seeds: Option<u64>,
        /// Set a key of the scenario before it runs, as a [sweep] axis does, e.g.
        /// --set flow.in.size=64 or --set policy.class.c.rate=2mbit (repeatable)
        #[arg(long = "set", value_name = "KEY=VALUE")]
        set: Vec<String>,
    },
    /// Shape real traffic: a bump-in-the-wire between two Linux interfaces
    Run(Box<router_cmds::RunArgs>),
    /// Bridge (or with --close unbridge) the shaper's two interfaces in the kernel, unshaped:
    /// what forwards while the shaper is not running (`run --fail-open`, the unit's
    /// ExecStopPost; docs/router.md, "Fail-open")
    FailOpen(fail_open::FailOpenArgs),
    /// Show the running shaper's class tree with live rates and counters (like `tc -s class show`)
    Stat(router_cmds::StatArgs),
    /// Add, change or delete a class of the running shaper
    Class(class_edit::ClassArgs),
    /// Apply an edited policy to the running shaper atomically, keeping queued packets
    Reload(router_cmds::ReloadArgs),
    /// Print the equivalent script for another system (`export tc POLICY --dev DEV`)
    Export(export_tc::ExportArgs),
    /// Turn a tc script or device, LibreQoS files or pf.conf queues into a policy (docs/import.md)
    Import(import_cmd::ImportArgs),
    /// Build a namespace testbed and push real kernel traffic through linkshare (and the kernel's HTB)
    Lab(lab_cmd::LabArgs),
    /// Micro-benchmarks of the datapath without I/O (`bench sched`: the scheduler core beside DPDK's)
    Bench(bench_sched::BenchArgs),
    /// Hold a scenario's simulation against the lab (real kernel TCP), per class per phase
    ///
    /// Runs SCENARIO in the simulator and in the lab (`linkshare lab`; with --kernel also through
    /// the kernel's HTB), prints per class per phase the rates side by side with the error as a
    /// percentage of the link rate, ping RTTs and goodputs; writes compare.json, report.html and
    /// each side's report into DIR. Needs root. Exit codes: 0 within the tolerance, 1 outside it,
    /// 2 error (not root, no `ip`, namespaces unavailable, invalid scenario, a flow failed).
    Compare(compare_cmd::CompareArgs),
    /// Replay a `sim` or `lab` output directory on the live dashboard of `run --web`
    ///
    /// Serves the dashboard page at http://ADDR/ (default 127.0.0.1:9100), one sample of the
    /// run's timeseries.csv per second (times --speed), starting over at the end, until
    /// interrupted. Exit codes: 1 not an output directory, 2 the address cannot be bound.
    Web(WebArgs),
    /// Regenerate the calibration table of docs/fidelity.md: a fresh simulation of every
    /// calibration scenario against the stored lab figures (no root needed)
    Fidelity(fidelity_doc::FidelityArgs),
    /// Regenerate docs/seeds.md: every seed finding beside linkshare's result (runs the scenarios)
    Seeds(seeds_doc::SeedsArgs),
    /// Print shell completions (bash, zsh, fish, …) on stdout
    #[command(hide = true)]
    Completions(dist_cmd::CompletionsArgs),
    /// Write man pages (linkshare.1, linkshare-<command>.1) into a directory
    #[command(hide = true)]
    Man(dist_cmd::ManArgs),
}

#[derive(clap::Args, Debug)]
struct WebArgs {
    /// An output directory of `linkshare sim` or `linkshare lab` (summary.json, timeseries.csv)
    dir: std::path::PathBuf,
    /// Address to serve on (loopback by default; a wider one is announced with a warning)
    #[arg(long, default_value = "127.0.0.1:9100")]
    listen: std::net::SocketAddr,
    /// Samples shown per second
    #[arg(long, default_value_t = 1.0)]
    speed: f64,
}

/// `linkshare web DIR`: the run's snapshots, then the dashboard until interrupted.
fn web_cmd(a: &WebArgs) -> anyhow::Result<i32> {
    let frames = linkshare_router::http::replay::frames(&a.dir)
        .map_err(|e| exit::invalid(format!("{e:#}")))?;
    linkshare_router::http::replay::serve(&frames, a.listen, a.speed)?;
    Ok(exit::OK)
}

fn main() {
    restore_sigpipe();
    // Usage errors exit 1 (clap's own default is 2, which is ours for runtime errors).
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            std::process::exit(if e.use_stderr() {
                exit::INVALID
            } else {
                exit::OK
            });
        }
    };
    let code = match &cli.command {
        Command::Check(args) => check::run(args),
        Command::Sim {
            scenario,
            out,
            json,
            point,
            workers,
            seed,
            seeds,
            set,
        } => report(sim_cmd::run(
            scenario.as_deref(),
            out.as_deref(),
            *json,
            *point,
            *workers,
            (*seed, *seeds, set.as_slice()),
        )),
        Command::Run(a) => report(router_cmds::run(a)),
        Command::Stat(a) => report(router_cmds::stat(a)),
        Command::FailOpen(a) => report(fail_open::run(a)),
        Command::Class(a) => report(router_cmds::class(a)),
        Command::Reload(a) => report(router_cmds::reload(a)),
        Command::Export(a) => report(export_tc::run(a)),
        Command::Import(a) => import_cmd::run(a),
        Command::Lab(a) => report(lab_cmd::run(a)),
        Command::Bench(a) => report(bench_sched::run(a)),
        Command::Seeds(a) => report(seeds_doc::run_cmd(a)),
        Command::Compare(a) => report(compare_cmd::run(a)),
        Command::Fidelity(a) => report(fidelity_doc::run_cmd(a)),
        Command::Web(a) => report(web_cmd(a)),
        Command::Completions(a) => report(dist_cmd::completions::<Cli>(a)),
        Command::Man(a) => report(dist_cmd::man::<Cli>(a)),
    };
    std::process::exit(code);
}

/// Exit code of a command: its own on success; on failure the error chain is printed and the
/// code follows the scheme of [`exit`] (1 rejected input, 2 runtime error).
fn report(r: anyhow::Result<i32>) -> i32 {
    r.unwrap_or_else(|e| {
        eprintln!("error: {e:#}");
        exit::code_of(&e)
    })
}

/// Die quietly on a closed pipe (`linkshare sim | head`), as command line tools do, instead of
/// panicking on the failed write: Rust ignores SIGPIPE by default.
fn restore_sigpipe() {
    // SAFETY: setting a signal's disposition to the default at start-up, before any thread
    // exists, has no memory-safety preconditions.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}
