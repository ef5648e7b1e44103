//! `linkshare export tc POLICY --dev DEV` (being written).

#[derive(clap::Args, Debug)]
pub struct ExportArgs {}

pub fn run(_: &ExportArgs) -> anyhow::Result<i32> {
    anyhow::bail!("`linkshare export` is not available in this build yet")
}

/// The `tc -batch` script that sets up `policy` on `dev` in the kernel (HTB policies only).
/// `linkshare lab --kernel` applies it in the router namespace.
#[allow(dead_code)]
pub fn tc_script(policy: &linkshare_config::Policy, dev: &str) -> anyhow::Result<String> {
    let _ = (policy, dev);
    anyhow::bail!("`linkshare export tc` is not available in this build yet")
}
