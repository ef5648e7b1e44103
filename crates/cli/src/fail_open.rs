//! `linkshare fail-open --dev IN --dev OUT [--close]` and `run --fail-open`: a kernel bridge of
//! the two interfaces forwards, unshaped, while the shaper is not running
//! (linkshare_router::failopen has the why).

use clap::Args;
use linkshare_router::failopen;

use crate::exit::invalid;

#[derive(Args, Debug)]
pub struct FailOpenArgs {
    /// The shaper's two interfaces, as given to `run`: IN then OUT
    #[arg(long = "dev", num_args = 1, required = true)]
    pub dev: Vec<String>,
    /// Remove the bridge instead (what `run --fail-open` does before it starts)
    #[arg(long)]
    pub close: bool,
}

/// `linkshare fail-open`: make (or with `--close` remove) the bridge; exit 0 when done.
pub fn run(a: &FailOpenArgs) -> anyhow::Result<i32> {
    let [dev_in, dev_out] = a.dev.as_slice() else {
        return Err(invalid("give exactly two interfaces: --dev IN --dev OUT"));
    };
    if a.close {
        if failopen::close(dev_in, dev_out)? {
            eprintln!("linkshare: fail-open bridge of {dev_in} and {dev_out} removed");
        }
    } else {
        let br = failopen::open(dev_in, dev_out)?;
        eprintln!("linkshare: {dev_in} and {dev_out} bridged unshaped ({br}) while the shaper is not running");
    }
    Ok(0)
}

/// `run --fail-open`: the bridge goes before `shape` runs and comes back when it returns, on
/// every path out of it but a kill (the unit's `ExecStopPost=` covers that).
pub fn around(
    dev_in: &str,
    dev_out: &str,
    shape: impl FnOnce() -> anyhow::Result<i32>,
) -> anyhow::Result<i32> {
    if failopen::close(dev_in, dev_out)? {
        eprintln!(
            "linkshare: fail-open bridge of {dev_in} and {dev_out} removed: the shaper forwards"
        );
    }
    let r = shape();
    match failopen::open(dev_in, dev_out) {
        Ok(br) => eprintln!("linkshare: {dev_in} and {dev_out} bridged unshaped ({br}): fail-open"),
        Err(e) => {
            eprintln!("linkshare: warning: --fail-open: cannot bridge {dev_in} and {dev_out}: {e}")
        }
    }
    r
}
