//! The `linkshare` command line.

mod check;
mod sim_cmd;

use clap::{Parser, Subcommand};

/// linkshare: hierarchical link-sharing QoS (HTB and friends) as a library, a deterministic
/// simulator and a Linux shaper.
///
/// A policy file (TOML, tc units) describes a tree of classes with guaranteed rates (`rate`),
/// borrowing limits (`ceil`), priorities, leaf queues and filters. `linkshare check` validates
/// one and shows the tree.
#[derive(Parser, Debug)]
#[command(name = "linkshare", version, about, long_about)]
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
    /// rtt.csv, plots (SVG and PNG) and report.html to the output directory.
    /// Exit codes: 0 ok, 1 invalid scenario or failed run, 2 unreadable file or unwritable output.
    Sim {
        /// Scenario file (TOML, docs/scenario-format.md); the embedded two-agency example if omitted
        scenario: Option<std::path::PathBuf>,
        /// Output directory (default: out/<scenario name>)
        #[arg(long)]
        out: Option<std::path::PathBuf>,
        /// Print summary.json on stdout instead of the table
        #[arg(long)]
        json: bool,
    },
}

fn main() {
    let cli = Cli::parse();
    let code = match &cli.command {
        Command::Check(args) => check::run(args),
        Command::Sim {
            scenario,
            out,
            json,
        } => sim_cmd::run(scenario.as_deref(), out.as_deref(), *json).unwrap_or_else(|e| {
            eprintln!("error: {e:#}");
            2
        }),
    };
    std::process::exit(code);
}
