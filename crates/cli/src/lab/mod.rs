//! `linkshare lab`: a namespace testbed (hosts A, B, C of the seeds) with real kernel traffic
//! through linkshare or the kernel's HTB (being written).

pub mod bench;
pub mod testbed;

use clap::{Args, Subcommand};

#[derive(Args, Debug)]
#[command(args_conflicts_with_subcommands = true)]
pub struct LabArgs {
    #[command(subcommand)]
    pub command: Option<LabCommand>,
}

#[derive(Subcommand, Debug)]
pub enum LabCommand {
    /// The seeds' overhead measurements on the real shaper, beside the kernel's HTB and no shaper
    Bench(bench::BenchArgs),
}

pub fn run(args: &LabArgs) -> anyhow::Result<i32> {
    match &args.command {
        Some(LabCommand::Bench(b)) => {
            testbed::install_signal_cleanup()?;
            bench::run(b)
        }
        None => anyhow::bail!("`linkshare lab` is not available in this build yet"),
    }
}
