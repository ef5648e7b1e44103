//! The upload side of a policy that shapes both directions (`upload_rate` in its classes,
//! plans or subscriber table): without `--reverse-policy`, the reverse direction (OUT → IN)
//! runs [`linkshare_config::Policy::upload`], which matches subscribers by source address.
//! A SIGHUP or `reload` of the forward policy replaces the download side only; reload the
//! reverse direction (`reload --reverse FILE`) to change the upload side.

use linkshare_config::Policy;

use crate::Sched;

/// The reverse direction's scheduler, text, origin and policy, when `p` has an upload side.
pub(crate) fn side(
    p: &Policy,
    text: &str,
    origin: &str,
) -> Result<Option<(Sched, String, String, Policy)>, String> {
    let Some(u) = p.upload() else {
        return Ok(None);
    };
    let sched = crate::builder::sched_of(u, text)?;
    Ok(Some((
        sched,
        text.to_string(),
        format!("{origin} (upload side)"),
        u.clone(),
    )))
}
