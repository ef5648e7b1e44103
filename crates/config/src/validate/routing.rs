//! The second pass, where packets go: the `default` class and each filter's target.
//!
//! Packets wait only in leaf classes (as in Linux's HTB, `net/sched/sch_htb.c`, where an inner
//! class has no queue), so both must name a leaf; naming an inner class is an error that lists
//! its leaves. A filter with no match takes every packet, which is a warning: later filters are
//! never reached, or the filter is a `default` in disguise. Names that do not resolve get a
//! near-miss suggestion.

use linkshare_core::classify::ClassId;
use toml::Spanned;

use crate::raw::{PolicyDoc, Raw};
use crate::source::Sink;
use crate::FilterInfo;

use super::read::{sink_line, FilterDraft};
use super::tree::{unknown_class_help, Shape};

/// Step 9, the default class: present, defined, a leaf. `default_name` is `None` when the
/// value could not be read (already reported).
pub(super) fn resolve_default(
    sink: &mut Sink,
    doc: &PolicyDoc,
    shape: &Shape,
    default: Option<&Spanned<Raw>>,
    default_name: Option<&str>,
) -> Option<usize> {
    let (by_name, names, is_leaf) = (&shape.by_name, &shape.names, &shape.is_leaf);
    let unknown_help = unknown_class_help;
    let leaf_names = |i: usize| shape.leaf_names(i);
    let all_leaves: Vec<String> = (0..shape.len())
        .filter(|&i| is_leaf[i])
        .map(|i| shape.name_of(i))
        .collect();
    let mut default_id = None;
    match (default, default_name) {
        (None, _) => sink.error(
            &doc.anchor(),
            "the policy has no `default` class",
            format!("add `default = \"...\"` naming the leaf class for packets no filter matches (leaves: {})", all_leaves.join(", ")),
        ),
        (Some(v), Some(name)) => match by_name.get(name) {
            None => sink.error(
                &v.span(),
                format!("default class `{name}` does not exist"),
                format!("name a leaf class: {}", unknown_help(name, names)),
            ),
            Some(&j) if !is_leaf[j] => sink.error(
                &v.span(),
                format!("default class `{name}` has children, so it is not a leaf; packets can only wait in leaf classes"),
                format!("name one of its leaves instead: {}", leaf_names(j).join(", ")),
            ),
            Some(&j) => default_id = Some(j),
        },
        (Some(_), None) => {}
    }
    default_id
}

/// Step 10, the filters: each sent to a defined leaf, in file order; a filter with no match
/// is warned about.
pub(super) fn resolve_filters(
    sink: &mut Sink,
    shape: &Shape,
    filters: Vec<FilterDraft>,
) -> Vec<FilterInfo> {
    let (by_name, names, is_leaf) = (&shape.by_name, &shape.names, &shape.is_leaf);
    let unknown_help = unknown_class_help;
    let leaf_names = |i: usize| shape.leaf_names(i);
    let mut filter_infos = Vec::with_capacity(filters.len());
    let nf = filters.len();
    for (fi, f) in filters.into_iter().enumerate() {
        let ctx = format!("filter #{}", fi + 1);
        let Some(cl) = &f.class else { continue };
        let class = match by_name.get(cl.v.as_str()) {
            None => {
                sink.error(
                    &cl.span,
                    format!("{ctx}: class `{}` does not exist", cl.v),
                    format!("send it to a leaf class: {}", unknown_help(&cl.v, names)),
                );
                continue;
            }
            Some(&j) if !is_leaf[j] => {
                sink.error(
                    &cl.span,
                    format!("{ctx}: class `{}` has children, so it is not a leaf; packets can only wait in leaf classes", cl.v),
                    format!("send the filter to one of its leaves instead: {}", leaf_names(j).join(", ")),
                );
                continue;
            }
            Some(&j) => j,
        };
        if f.matches_all {
            let help = if fi + 1 < nf {
                format!("add a match (dscp, protocol, src, dst, ports) or move it last; filters #{} and later are never reached", fi + 2)
            } else {
                format!(
                    "add a match, or remove it and write `default = \"{}\"`",
                    cl.v
                )
            };
            sink.warn(
                &f.header,
                format!("{ctx} has no match, so it matches every packet"),
                help,
            );
        }
        let mut spec = f.spec;
        spec.class = class as ClassId;
        filter_infos.push(FilterInfo {
            class: cl.v.clone(),
            spec,
            line: sink_line(sink, &f.header),
        });
    }
    filter_infos
}
