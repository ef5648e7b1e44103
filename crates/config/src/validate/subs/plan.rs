//! `[[plan]]`: the numbers shared by the subscribers of one plan, checked once.
//!
//! A plan takes a class's keys but `parent` (each row gives its own), and is checked with the
//! class's own rules ([`super::super::rates::numbers`]: zero rate, ceil below rate, bursts,
//! quantum). Its defaults are filled in here, once, so that a row costs nothing beyond its
//! name: the plan becomes a [`Profile`].

use std::collections::HashMap;
use std::ops::Range;

use linkshare_core::htb::{default_burst, default_quantum, DEFAULT_MTU, DEFAULT_R2Q};
use linkshare_core::units::Rate;

use crate::raw::PolicyDoc;
use crate::source::Sink;
use crate::{LeafKind, QdiscKind};

use super::super::rates::{numbers, Numbers};
use super::super::read::{read_entry, sink_line, tables, At};

/// A plan, or the numbers of rows that give their own rates: everything a subscriber's class
/// is built with.
#[derive(Clone, Debug)]
pub(in crate::validate) struct Profile {
    /// The plan's name (empty for a row's own numbers).
    pub(in crate::validate) name: String,
    /// Where the plan is written in the policy (0..0 for a row's own).
    pub(in crate::validate) span: Range<usize>,
    pub(in crate::validate) rate: Rate,
    pub(in crate::validate) ceil: Rate,
    pub(in crate::validate) burst: u32,
    pub(in crate::validate) cburst: u32,
    pub(in crate::validate) quantum: u32,
    pub(in crate::validate) prio: u8,
    pub(in crate::validate) leaf: LeafKind,
    /// Upload rate and ceil, for a policy that shapes both directions.
    pub(in crate::validate) upload: Option<(Rate, Rate)>,
    /// The upload side's leaf when it differs from `leaf`.
    pub(in crate::validate) upload_leaf: Option<LeafKind>,
}

/// The same for a row that writes its own rates (`plan` the row's plan, if any, for the leaf,
/// prio and any rate the row leaves out).
pub(super) fn own_profile(
    base: Option<&Profile>,
    rate: Rate,
    ceil: Option<Rate>,
    upload: Option<(Rate, Rate)>,
    mtu: Option<u32>,
    r2q: Option<u32>,
) -> Profile {
    let mtu = mtu.unwrap_or(DEFAULT_MTU);
    let ceil = ceil.unwrap_or(rate);
    Profile {
        name: String::new(),
        span: 0..0,
        rate,
        ceil,
        burst: default_burst(rate, mtu),
        cburst: default_burst(ceil, mtu),
        quantum: default_quantum(rate, r2q.unwrap_or(DEFAULT_R2Q)).0,
        prio: base.map_or(0, |b| b.prio),
        leaf: base.map_or_else(super::default_leaf, |b| b.leaf.clone()),
        upload,
        upload_leaf: base.and_then(|b| b.upload_leaf.clone()),
    }
}

/// Every `[[plan]]`, in file order; a plan whose numbers are broken (reported) keeps its name
/// with zero rates, so that rows naming it are not reported again.
pub(in crate::validate) fn read_plans(
    sink: &mut Sink,
    doc: &PolicyDoc,
    kind: QdiscKind,
    r2q: Option<u32>,
    mtu: Option<u32>,
) -> Vec<Profile> {
    let mut out: Vec<Profile> = Vec::new();
    let mut seen: HashMap<String, usize> = HashMap::new();
    for (i, (span, e)) in tables(sink, doc, "plan").into_iter().enumerate() {
        let d = read_entry(sink, kind, "plan", i, span.clone(), e);
        let Some(name) = &d.name else { continue };
        let what = format!("plan `{}`", name.v);
        if let Some(&first) = seen.get(&name.v) {
            let line = sink_line(sink, &out[first].span);
            sink.error(
                &name.span,
                format!("{what} is defined twice"),
                format!("plan names must be unique; the first is at line {line}: rename one"),
            );
            continue;
        }
        let Numbers {
            rate,
            ceil,
            burst,
            cburst,
            quantum,
        } = numbers(sink, kind, &what, &d, true, r2q, mtu);
        let upload = upload_pair(sink, &what, &d.upload_rate, &d.upload_ceil);
        seen.insert(name.v.clone(), out.len());
        let rate = rate.unwrap_or_default();
        out.push(Profile {
            name: name.v.clone(),
            span,
            rate,
            ceil: ceil.unwrap_or(rate),
            burst: burst.unwrap_or(0),
            cburst: cburst.unwrap_or(0),
            quantum: quantum.unwrap_or(0),
            prio: d.prio.as_ref().map_or(0, |p| p.v),
            leaf: d
                .leaf
                .as_ref()
                .map_or_else(super::default_leaf, |l| l.v.clone()),
            upload,
            upload_leaf: d.upload_leaf.as_ref().map(|l| l.v.clone()),
        });
    }
    out
}

/// `upload_rate` and `upload_ceil` of a class or plan: the ceil defaults to the rate, a zero
/// rate and a ceil below the rate are errors, a ceil without a rate is one too.
pub(in crate::validate) fn upload_pair(
    sink: &mut Sink,
    what: &str,
    rate: &Option<At<Rate>>,
    ceil: &Option<At<Rate>>,
) -> Option<(Rate, Rate)> {
    match (rate, ceil) {
        (None, None) => None,
        (None, Some(c)) => {
            sink.error(
                &c.span,
                format!("{what}: `upload_ceil` without `upload_rate`"),
                "add `upload_rate` (the guaranteed rate from the subscriber) beside it",
            );
            None
        }
        (Some(r), c) => {
            if r.v == Rate(0) {
                sink.error(
                    &r.span,
                    format!("{what}: upload_rate is zero"),
                    "give a guaranteed upload rate above zero, e.g. \"1mbit\"",
                );
            }
            let ceil = c.as_ref().map_or(r.v, |c| c.v);
            if let Some(c) = c {
                if c.v < r.v {
                    sink.error(
                        &c.span,
                        format!("{what}: upload_ceil {} is below upload_rate {}", c.v, r.v),
                        format!("raise upload_ceil to at least {} or lower upload_rate", r.v),
                    );
                }
            }
            Some((r.v, ceil))
        }
    }
}
