//! `linkshare lab`: namespace testbed (being written).

#[derive(clap::Args, Debug)]
pub struct LabArgs {}

pub fn run(_: &LabArgs) -> anyhow::Result<i32> {
    anyhow::bail!("`linkshare lab` is not available in this build yet")
}
