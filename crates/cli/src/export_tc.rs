//! `linkshare export tc POLICY --dev DEV` (being written).

#[derive(clap::Args, Debug)]
pub struct ExportArgs {}

pub fn run(_: &ExportArgs) -> anyhow::Result<i32> {
    anyhow::bail!("`linkshare export` is not available in this build yet")
}
