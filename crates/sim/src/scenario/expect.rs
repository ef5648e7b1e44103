//! `[[expect]]`: a bound on one figure of one flow, group of arriving flows or class
//! ([`crate::expect`]), checked against the scenario's flows and classes when the file is read.
//!
//! Rule: the bounds are written in the metric's own unit — a rate (`"4mbit"`), a time (`"30ms"`)
//! or a probability (`0.01`, `"1%"`) — and at least one of `min`, `max` is given.

use serde::Deserialize;
use toml::Spanned;

use super::error::{Doc, ScenarioError};
use super::raw::SV;
use super::value::{dur_val, rate_val};
use super::FlowSpec;
use crate::expect::{Expect, Metric, Target, Unit};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawExpect {
    flow: Option<Spanned<String>>,
    class: Option<Spanned<String>>,
    metric: Option<Spanned<String>>,
    min: Option<SV>,
    max: Option<SV>,
}

fn bound(doc: &Doc<'_>, unit: Unit, v: &SV) -> Result<f64, ScenarioError> {
    Ok(match unit {
        Unit::Rate => rate_val(doc, v)?.0 as f64,
        Unit::Ms => dur_val(doc, v)?.0 as f64 / 1e6,
        Unit::Fraction => super::path::prob(doc, v)?,
    })
}

/// Check one `[[expect]]` against the flows (after expansion) and the class names (`None`: the
/// policy's classes are not known by name, e.g. a root discipline; not checked).
pub(super) fn expect_from_raw(
    doc: &Doc<'_>,
    re: RawExpect,
    span: std::ops::Range<usize>,
    flows: &[FlowSpec],
    classes: Option<&[String]>,
) -> Result<Expect, ScenarioError> {
    let Some(m) = &re.metric else {
        return Err(doc.err(
            span,
            "an [[expect]] needs a `metric`",
            Some(format!("metric = one of {}", metric_names())),
        ));
    };
    let Some(metric) = Metric::ALL
        .iter()
        .find(|(n, _)| *n == m.get_ref().as_str())
        .map(|(_, x)| *x)
    else {
        return Err(doc.err(
            m.span(),
            format!("unknown metric `{}`", m.get_ref()),
            Some(format!("metric = one of {}", metric_names())),
        ));
    };
    let target = match (&re.flow, &re.class) {
        (Some(f), None) => {
            let name = f.get_ref();
            let group = flows
                .iter()
                .any(|x| x.arrival.as_ref().is_some_and(|a| &a.group == name));
            let flow = flows.iter().find(|x| &x.name == name);
            let fits = match metric {
                Metric::Rate | Metric::Loss => group || flow.is_some(),
                Metric::FctP50 | Metric::FctP99 => group,
                Metric::OwdP50 | Metric::OwdP99 => {
                    flow.is_some_and(|x| matches!(x.kind.name(), "udp" | "ping"))
                }
                Metric::RttP50 | Metric::RttP99 => {
                    flow.is_some_and(|x| matches!(x.kind.name(), "tcp" | "ping"))
                }
            };
            if !group && flow.is_none() {
                return Err(doc.err(
                    f.span(),
                    format!("no flow or group of arriving flows is named `{name}`"),
                    None,
                ));
            }
            if !fits {
                return Err(doc.err(
                    m.span(),
                    format!("`{}` does not apply to `{name}`", metric.name()),
                    Some("owd_*: udp and ping flows; rtt_*: tcp and ping flows; fct_*: groups of arriving flows (`arrivals`); rate, loss: any".into()),
                ));
            }
            Target::Flow(name.clone())
        }
        (None, Some(c)) => {
            let name = c.get_ref();
            if let Some(cl) = classes.filter(|cl| !cl.contains(name)) {
                return Err(doc.err(
                    c.span(),
                    format!("no class is named `{name}`"),
                    Some(format!("classes: {}", cl.join(", "))),
                ));
            }
            if !matches!(metric, Metric::Rate | Metric::Loss) {
                return Err(doc.err(
                    m.span(),
                    format!(
                        "`{}` is a flow figure; a class has rate and loss",
                        metric.name()
                    ),
                    None,
                ));
            }
            Target::Class(name.clone())
        }
        _ => {
            return Err(doc.err(
                span,
                "an [[expect]] names one `flow` or one `class`",
                Some("e.g. flow = \"voip\" or class = \"ef\"".into()),
            ))
        }
    };
    let unit = metric.unit();
    let min = re.min.as_ref().map(|v| bound(doc, unit, v)).transpose()?;
    let max = re.max.as_ref().map(|v| bound(doc, unit, v)).transpose()?;
    if min.is_none() && max.is_none() {
        return Err(doc.err(
            span,
            "an [[expect]] needs a `min` or a `max`",
            Some("e.g. max = \"30ms\", min = \"4mbit\", max = \"1%\"".into()),
        ));
    }
    if let (Some(lo), Some(hi), Some(v)) = (min, max, re.max.as_ref()) {
        if lo > hi {
            return Err(doc.err(v.span(), "`max` is below `min`", None));
        }
    }
    Ok(Expect {
        target,
        metric,
        min,
        max,
    })
}

fn metric_names() -> String {
    Metric::ALL
        .iter()
        .map(|(n, _)| *n)
        .collect::<Vec<_>>()
        .join(", ")
}
