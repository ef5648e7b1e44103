//! Both directions from one policy: the upload side.
//!
//! An ISP shapes each subscriber twice: towards it (download, matched by destination address)
//! and from it (upload, matched by source). A policy shapes uploads when a class, a plan or a
//! row gives an `upload_rate`; then every class and subscriber needs one. The upload side is
//! the same tree with the upload rates (`upload_ceil` defaulting to `upload_rate`; burst,
//! cburst and quantum take their defaults from those rates; prio and leaf are shared), checked
//! with the same rules as the download side (guarantees fit in the parent, ceil at least the
//! rate), and its filters are the download side's mirrored: source and destination swapped,
//! addresses and ports alike. [`crate::Policy::upload`] is that policy.

use linkshare_core::classify::FilterSpec;
use linkshare_core::htb::{default_burst, default_quantum};
use linkshare_core::units::Rate;

use crate::diag::Severity;
use crate::source::Sink;
use crate::{LeafKind, Policy};

use super::read::ClassDraft;
use super::subs::{row_diag, Table};
use super::tree::Shape;

/// One class's upload side: rate, ceil, and its leaf when it differs from the download's.
#[derive(Clone, Debug, Default)]
pub(super) struct Side {
    rate: Rate,
    ceil: Rate,
    leaf: Option<LeafKind>,
}

/// Checks the upload side. Returns each class's upload side, `[[class]]`es then subscribers,
/// when the policy shapes uploads and they are valid; `None` otherwise.
pub(super) fn check(sink: &mut Sink, shape: &Shape, table: Option<&Table>) -> Option<Vec<Side>> {
    let classes = shape.classes;
    let own: Vec<Option<(Rate, Rate)>> = classes
        .iter()
        .map(|c| {
            let what = match &c.name {
                Some(n) => format!("class `{}`", n.v),
                None => "class".to_string(),
            };
            super::subs::upload_pair(sink, &what, &c.upload_rate, &c.upload_ceil)
        })
        .collect();
    let from_table = table.is_some_and(|t| t.profiles.iter().any(|p| p.upload.is_some()));
    if own.iter().all(Option::is_none) && !from_table {
        return None;
    }
    let why = uploading_reason(classes, table);
    let mut ok = true;
    for (c, u) in classes.iter().zip(&own) {
        if u.is_none() && c.upload_ceil.is_none() && c.rate.is_some() {
            ok = false;
            let name = c.name.as_ref().map_or("?", |n| n.v.as_str());
            sink.error(
                &c.header,
                format!("class `{name}` has no `upload_rate`, but the policy shapes uploads ({why})"),
                "add `upload_rate = \"...\"` (and `upload_ceil`) to every class, or remove the upload rates",
            );
        }
    }
    let mut per_sub: Vec<Side> = Vec::new();
    if let Some(t) = table {
        for p in &t.profiles[..t.plans] {
            if p.upload.is_none()
                && t.profile
                    .iter()
                    .any(|&q| t.profiles[q as usize].name == p.name)
            {
                ok = false;
                sink.error(
                    &p.span,
                    format!(
                        "plan `{}` has no `upload_rate`, but the policy shapes uploads ({why})",
                        p.name
                    ),
                    "add `upload_rate = \"...\"` to the plan",
                );
            }
        }
        per_sub.reserve(t.profile.len());
        for (i, &q) in t.profile.iter().enumerate() {
            let p = &t.profiles[q as usize];
            match p.upload {
                Some((rate, ceil)) => per_sub.push(Side {
                    rate,
                    ceil,
                    leaf: p.upload_leaf.clone(),
                }),
                None if (q as usize) < t.plans => {} // reported at the plan
                None => {
                    ok = false;
                    sink.diags.push(row_diag(
                        &t.file,
                        t.line[i] as usize,
                        Severity::Error,
                        format!("subscriber `{}` has no upload rate, but the policy shapes uploads ({why})", t.names[i]),
                        "write its `upload_rate`, or name a plan that has one".into(),
                    ));
                }
            }
        }
    }
    if !ok {
        return None;
    }
    let own: Vec<Side> = own
        .into_iter()
        .zip(classes)
        .map(|(u, c)| {
            let (rate, ceil) = u.unwrap_or_default();
            Side {
                rate,
                ceil,
                leaf: c.upload_leaf.as_ref().map(|l| l.v.clone()),
            }
        })
        .collect();
    // The guarantees below each class must fit in its upload rate.
    for (i, c) in classes.iter().enumerate() {
        let (Some(ur), sub) = (&c.upload_rate, &shape.subs[i]) else {
            continue;
        };
        if shape.in_cycle[i] || (shape.children[i].is_empty() && sub.count == 0) {
            continue;
        }
        let sum = shape.children[i]
            .iter()
            .map(|&k| own[k].rate.0)
            .fold(sub.upload, u64::saturating_add);
        if sum > ur.v.0 {
            let name = shape.name_of(i);
            sink.error(
                &ur.span,
                format!(
                    "class `{name}`: impossible upload capacity: the guaranteed upload rates below it add up to {}, above its upload_rate {}",
                    Rate(sum),
                    ur.v
                ),
                format!("lower them by {} in total, or raise `{name}`'s upload_rate to at least {}", Rate(sum - ur.v.0), Rate(sum)),
            );
            ok = false;
        }
    }
    ok.then(|| own.into_iter().chain(per_sub).collect())
}

/// Where the first upload rate is written, for messages.
fn uploading_reason(classes: &[ClassDraft], table: Option<&Table>) -> String {
    if let Some(n) = classes
        .iter()
        .find(|c| c.upload_rate.is_some())
        .and_then(|c| c.name.as_ref())
    {
        return format!("class `{}` has an upload_rate", n.v);
    }
    match table.and_then(|t| t.profiles.iter().find(|p| p.upload.is_some())) {
        Some(p) if !p.name.is_empty() => format!("plan `{}` has an upload_rate", p.name),
        _ => "the subscriber table has upload rates".to_string(),
    }
}

/// The upload policy: `p`'s tree with `uploads` as rates, defaults derived from them, and the
/// filters mirrored.
pub(super) fn derive(p: &Policy, uploads: Vec<Side>) -> Policy {
    let mut u = p.clone();
    u.upload = None;
    for (c, side) in u.classes.iter_mut().zip(uploads) {
        let Side { rate, ceil, leaf } = side;
        if let Some(l) = leaf {
            c.leaf = l;
        }
        c.rate = rate;
        c.ceil = ceil;
        c.burst = default_burst(rate, p.mtu);
        c.cburst = default_burst(ceil, p.mtu);
        c.quantum = default_quantum(rate, p.r2q).0;
    }
    for f in &mut u.filters {
        f.spec = mirror(&f.spec);
    }
    u
}

/// A filter seen from the other side: source and destination swapped.
pub(crate) fn mirror(f: &FilterSpec) -> FilterSpec {
    FilterSpec {
        src: f.dst,
        dst: f.src,
        src_port: f.dst_port,
        dst_port: f.src_port,
        ..f.clone()
    }
}
