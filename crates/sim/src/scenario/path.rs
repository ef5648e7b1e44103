//! `[path]`: what the data path does to packets after the bottleneck — jitter, random loss
//! (Bernoulli or Gilbert–Elliott), reordering and duplication with netem's meaning
//! ([`linkshare_core::impair`]), read into an [`ImpairSpec`].
//!
//! Rule: probabilities are a number 0..=1 or a percentage string (`"1%"`, `"0.5%"`), as netem
//! writes them; a key that does not apply to the chosen loss model is an error.

use linkshare_core::impair::{ImpairSpec, LossModel};
use linkshare_core::Duration;
use serde::Deserialize;

use super::error::{Doc, ScenarioError};
use super::raw::{Val, SV};
use super::value::{opt_bool, opt_dur};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawPath {
    jitter: Option<SV>,
    jitter_reorder: Option<SV>,
    loss: Option<SV>,
    loss_model: Option<toml::Spanned<String>>,
    ge_p: Option<SV>,
    ge_r: Option<SV>,
    ge_bad_loss: Option<SV>,
    ge_good_loss: Option<SV>,
    reorder: Option<SV>,
    duplicate: Option<SV>,
}

/// A probability: `0.01` or `"1%"`.
pub(super) fn prob(doc: &Doc<'_>, v: &SV) -> Result<f64, ScenarioError> {
    let x = match v.get_ref() {
        Val::Int(i) => Some(*i as f64),
        Val::Float(f) => Some(*f),
        Val::Str(s) => s
            .trim()
            .strip_suffix('%')
            .and_then(|n| n.trim().parse::<f64>().ok())
            .map(|p| p / 100.0),
        Val::Bool(_) => None,
    };
    match x {
        Some(p) if (0.0..=1.0).contains(&p) => Ok(p),
        _ => Err(doc.err(
            v.span(),
            "expected a probability between 0 and 1, or a percentage",
            Some("e.g. loss = 0.01 or loss = \"1%\"".into()),
        )),
    }
}

fn opt_prob(doc: &Doc<'_>, v: Option<&SV>, d: f64) -> Result<f64, ScenarioError> {
    v.map(|v| prob(doc, v)).unwrap_or(Ok(d))
}

/// The checked `[path]`; `delay` is the link's one-way delay, which the jitter is around.
pub(super) fn path_from_raw(
    doc: &Doc<'_>,
    rp: RawPath,
    delay: Duration,
) -> Result<ImpairSpec, ScenarioError> {
    let jitter = opt_dur(doc, rp.jitter.as_ref(), Duration::ZERO)?;
    if let (Some(v), true) = (rp.jitter.as_ref(), jitter > delay) {
        return Err(doc.err(
            v.span(),
            format!("`jitter` {jitter} is above the link's `delay` {delay}"),
            Some("the delay varies uniformly in delay ± jitter: raise [link] delay".into()),
        ));
    }
    let ge_keys = [
        (&rp.ge_p, "ge_p"),
        (&rp.ge_r, "ge_r"),
        (&rp.ge_bad_loss, "ge_bad_loss"),
        (&rp.ge_good_loss, "ge_good_loss"),
    ];
    let model = rp.loss_model.as_ref().map(|m| m.get_ref().as_str());
    let loss = match model {
        None | Some("bernoulli") => {
            if let Some((v, k)) = ge_keys.iter().find_map(|(v, k)| v.as_ref().map(|v| (v, k))) {
                return Err(doc.err(
                    v.span(),
                    format!("`{k}` needs loss_model = \"gilbert-elliott\""),
                    None,
                ));
            }
            LossModel::Bernoulli(opt_prob(doc, rp.loss.as_ref(), 0.0)?)
        }
        Some("gilbert-elliott") => {
            if let Some(v) = &rp.loss {
                return Err(doc.err(
                    v.span(),
                    "`loss` is the Bernoulli probability; the Gilbert–Elliott model takes ge_p, ge_r, ge_bad_loss, ge_good_loss",
                    None,
                ));
            }
            let Some(p) = &rp.ge_p else {
                let span = rp.loss_model.as_ref().map(|m| m.span()).unwrap_or(0..0);
                return Err(doc.err(
                    span,
                    "the Gilbert–Elliott model needs `ge_p` (good → bad probability)",
                    Some("e.g. ge_p = \"1%\", ge_r = \"25%\"".into()),
                ));
            };
            LossModel::GilbertElliott {
                p: prob(doc, p)?,
                r: opt_prob(doc, rp.ge_r.as_ref(), 1.0)?,
                bad_loss: opt_prob(doc, rp.ge_bad_loss.as_ref(), 1.0)?,
                good_loss: opt_prob(doc, rp.ge_good_loss.as_ref(), 0.0)?,
            }
        }
        Some(other) => {
            let span = rp.loss_model.as_ref().map(|m| m.span()).unwrap_or(0..0);
            return Err(doc.err(
                span,
                format!("unknown loss model `{other}`"),
                Some("loss_model = \"bernoulli\" or \"gilbert-elliott\"".into()),
            ));
        }
    };
    let reorder = opt_prob(doc, rp.reorder.as_ref(), 0.0)?;
    if let (Some(v), true) = (rp.reorder.as_ref(), reorder > 0.0 && delay.0 == 0) {
        return Err(doc.err(
            v.span(),
            "`reorder` needs a link `delay` (a reordered packet skips it)",
            None,
        ));
    }
    Ok(ImpairSpec {
        jitter_ns: jitter.0,
        jitter_reorder: opt_bool(doc, rp.jitter_reorder.as_ref(), true)?,
        loss,
        reorder,
        duplicate: opt_prob(doc, rp.duplicate.as_ref(), 0.0)?,
    })
}
