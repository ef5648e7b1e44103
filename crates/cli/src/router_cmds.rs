//! `run`, `stat`, `class`, `reload`: the real shaper and its control socket (being written).

use anyhow::bail;

#[derive(clap::Args, Debug)]
pub struct RunArgs {}
#[derive(clap::Args, Debug)]
pub struct StatArgs {}
#[derive(clap::Args, Debug)]
pub struct ClassArgs {}
#[derive(clap::Args, Debug)]
pub struct ReloadArgs {}

pub fn run(_: &RunArgs) -> anyhow::Result<i32> {
    bail!("`linkshare run` is not available in this build yet")
}
pub fn stat(_: &StatArgs) -> anyhow::Result<i32> {
    bail!("`linkshare stat` is not available in this build yet")
}
pub fn class(_: &ClassArgs) -> anyhow::Result<i32> {
    bail!("`linkshare class` is not available in this build yet")
}
pub fn reload(_: &ReloadArgs) -> anyhow::Result<i32> {
    bail!("`linkshare reload` is not available in this build yet")
}
