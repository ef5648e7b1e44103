//! The upload side of a policy that shapes both directions (`upload_rate` in its classes,
//! plans or subscriber table): without `--reverse-policy`, the reverse direction (OUT → IN)
//! runs [`linkshare_config::Policy::upload`], which matches subscribers by source address.
//! A SIGHUP or `reload` of the forward policy replaces the download side only; reload the
//! reverse direction (`reload --reverse FILE`) to change the upload side.
//!
//! At start the policy is parsed and checked once for both directions, the upload side is moved
//! out of it (each direction's policy is kept once, by the builder thread, to compare reloads
//! with), and the two schedulers — independent, each O(classes) — are built on two threads.

use linkshare_config::Policy;

use crate::builder::sched_of;
use crate::{render_config_error, Sched};

/// A direction's policy and its scheduler.
pub(crate) type Side = (Policy, Sched);

/// Parse and check `text`, and build its download side and, when `with_upload` and the policy
/// has one, its upload side (beside it, on a second thread). `Err` carries the rendered
/// diagnostics.
pub(crate) fn load_directions(
    text: &str,
    origin: &str,
    with_upload: bool,
) -> Result<(Side, Option<Side>), String> {
    let mut down = Policy::parse(text, origin).map_err(|e| render_config_error(text, &e))?;
    let up = down.take_upload().filter(|_| with_upload);
    std::thread::scope(|s| {
        let up_side = up.map(|u| {
            s.spawn(move || {
                let sched = sched_of(&u, text)?;
                Ok::<Side, String>((u, sched))
            })
        });
        let down_sched = sched_of(&down, text)?;
        let up_side = match up_side {
            Some(h) => Some(h.join().map_err(|_| {
                "building the upload side failed (a defect in linkshare: please report it with \
                 the policy)"
                    .to_string()
            })??),
            None => None,
        };
        Ok(((down, down_sched), up_side))
    })
}
