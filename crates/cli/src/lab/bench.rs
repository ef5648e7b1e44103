//! `linkshare lab bench`: overhead measurements on the real shaper (being written).

#[derive(clap::Args, Debug)]
pub struct BenchArgs {}

pub fn run(_: &BenchArgs) -> anyhow::Result<i32> {
    anyhow::bail!("`linkshare lab bench` is not available in this build yet")
}
