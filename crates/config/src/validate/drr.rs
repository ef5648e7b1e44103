//! The classful DRR (`qdisc = "drr"` with `[[class]]`; Shreedhar & Varghese 1996, Linux
//! `net/sched/sch_drr.c`): flat classes sharing the link in proportion to their quantum.
//!
//! Both passes in one walk, since there is no hierarchy to check: each class's keys are read
//! (rejecting the HTB/CBQ keys that mean nothing here, with the reason), then names must be
//! unique and `default` and the filters must name a class. Classes that failed to read silence
//! the "does not exist" errors that would follow from them.

use std::collections::HashMap;

use linkshare_core::classify::ClassId;
use linkshare_core::htb::{DEFAULT_MTU, DEFAULT_R2Q};
use linkshare_core::qdisc::fifo::DEFAULT_PFIFO_LIMIT;
use linkshare_core::units::Rate;

use crate::leaf::read_leaf;
use crate::raw::PolicyDoc;
use crate::source::Sink;
use crate::values;
use crate::{ClassInfo, FilterInfo, LeafKind, Policy, QdiscKind};

use super::cbq::CBQ_TOP_KEYS;
use super::read::{check_keys, get, read_class_name, read_filter, sink_line, tables};
use super::tree::unknown_class_help;

/// Class keys under `qdisc = "drr"`.
const DRR_CLASS_KEYS: &[&str] = &["name", "quantum", "leaf"];
/// Keys of HTB/CBQ classes that have no meaning in a flat DRR.
const NOT_DRR_CLASS_KEYS: &[&str] = &[
    "parent", "rate", "ceil", "burst", "cburst", "prio", "share", "borrow",
];

/// The classful DRR (`qdisc = "drr"` with `[[class]]`): flat classes, each with a `quantum`
/// (bytes per round, default one MTU-sized frame: `mtu` + 14) and a `leaf`; filters and
/// `default` as for HTB.
pub(super) fn drr_tree(sink: &mut Sink, doc: &PolicyDoc, mtu: Option<u32>) -> Option<Policy> {
    use linkshare_core::qdisc::drr::{
        MAX_QUANTUM as DRR_MAX_QUANTUM, MIN_QUANTUM as DRR_MIN_QUANTUM,
    };
    for key in CBQ_TOP_KEYS.iter().chain(&["r2q"]) {
        if let Some((k, _)) = doc.entries.iter().find(|(k, _)| k.get_ref() == key) {
            sink.error(
                &k.span(),
                format!("`{key}` does not apply to qdisc drr"),
                format!("remove `{key}`; DRR shares the link by each class's `quantum`"),
            );
        }
    }
    let mtu_v = mtu.unwrap_or(DEFAULT_MTU);
    let default_quantum = mtu_v + 14;
    let class_tables = tables(sink, doc, "class");
    let filter_tables = tables(sink, doc, "filter");
    let mut infos: Vec<ClassInfo> = Vec::new();
    let mut by_name: HashMap<String, usize> = HashMap::new();
    let mut ok = true;
    for (i, (header, e)) in class_tables.into_iter().enumerate() {
        let errors_before = sink.diags.iter().filter(|d| d.is_error()).count();
        let name = read_class_name(sink, "class", i, &header, e);
        let ctx = match &name {
            Some(n) => format!("class `{}`", n.v),
            None => format!("class #{}", i + 1),
        };
        for (k, _) in e {
            let key = k.get_ref().as_str();
            if NOT_DRR_CLASS_KEYS.contains(&key) {
                sink.error(
                    &k.span(),
                    format!("{ctx}: `{key}` does not apply under qdisc = \"drr\""),
                    "DRR classes are flat and share the link in proportion to their `quantum` \
                     (bytes per round): remove it and set `quantum`, or use qdisc = \"htb\" for \
                     rates and a hierarchy",
                );
            }
        }
        let others: Vec<_> = e
            .iter()
            .filter(|(k, _)| !NOT_DRR_CLASS_KEYS.contains(&k.get_ref().as_str()))
            .cloned()
            .collect();
        check_keys(sink, &format!("{ctx}: "), &others, DRR_CLASS_KEYS);
        let mut quantum = default_quantum;
        if let Some(v) = get(e, "quantum") {
            match values::size(sink, &format!("{ctx}: `quantum`"), v) {
                Some(q) if (DRR_MIN_QUANTUM as u64..=DRR_MAX_QUANTUM as u64).contains(&q) => {
                    quantum = q as u32
                }
                Some(q) => sink.error(
                    &v.span(),
                    format!(
                        "{ctx}: `quantum` {q} bytes is out of range {DRR_MIN_QUANTUM}..={DRR_MAX_QUANTUM}"
                    ),
                    format!(
                        "give at least one MTU-sized frame ({default_quantum}); shares follow the ratio of quanta"
                    ),
                ),
                None => {}
            }
        }
        let leaf = match get(e, "leaf") {
            Some(v) => read_leaf(sink, &format!("{ctx}: `leaf`"), v),
            None => Some(LeafKind::Pfifo {
                limit: DEFAULT_PFIFO_LIMIT,
            }),
        };
        let broken = sink.diags.iter().filter(|d| d.is_error()).count() > errors_before;
        let (Some(name), Some(leaf), false) = (name, leaf, broken) else {
            ok = false;
            continue;
        };
        if let Some(&first) = by_name.get(&name.v) {
            sink.error(
                &name.span,
                format!("class `{}` is defined twice", name.v),
                format!(
                    "class names must be unique; the first `{}` is at line {}: rename one",
                    name.v, infos[first].line
                ),
            );
            ok = false;
            continue;
        }
        by_name.insert(name.v.clone(), infos.len());
        infos.push(ClassInfo {
            id: infos.len() as ClassId,
            name: name.v,
            parent: None,
            parent_id: None,
            rate: Rate(0),
            ceil: Rate(0),
            burst: 0,
            cburst: 0,
            prio: 0,
            quantum,
            leaf,
            is_leaf: true,
            depth: 0,
            level: 0,
            children: Vec::new(),
            line: sink_line(sink, &header),
            cbq: None,
            hfsc: None,
            written: crate::Written {
                quantum: true,
                ..Default::default()
            },
        });
    }
    if infos.is_empty() && ok {
        sink.error(
            &doc.anchor(),
            "qdisc drr has no classes",
            "add `[[class]]` sections with `name`, `quantum` and `leaf`",
        );
        return None;
    }
    let names: Vec<&str> = infos.iter().map(|c| c.name.as_str()).collect();
    let unknown_help = |what: &str| unknown_class_help(what, &names);
    let mut default_id = None;
    match get(&doc.entries, "default") {
        None => sink.error(
            &doc.anchor(),
            "the policy has no `default` class",
            format!(
                "add `default = \"...\"` naming the class for packets no filter matches (classes: {})",
                names.join(", ")
            ),
        ),
        Some(v) => {
            if let Some(d) = values::string(sink, "`default`", v, "\"bulk\"") {
                let d = d.trim();
                match by_name.get(d) {
                    Some(&j) => default_id = Some(j),
                    // A class that failed to read was reported already.
                    None if !ok => {}
                    None => sink.error(
                        &v.span(),
                        format!("default class `{d}` does not exist"),
                        format!("name a class: {}", unknown_help(d)),
                    ),
                }
            }
        }
    }
    let mut filters = Vec::new();
    for (fi, (header, e)) in filter_tables.into_iter().enumerate() {
        let f = read_filter(sink, fi, header, e);
        let Some(cl) = &f.class else { continue };
        let Some(&j) = by_name.get(cl.v.as_str()) else {
            if ok {
                sink.error(
                    &cl.span,
                    format!("filter #{}: class `{}` does not exist", fi + 1, cl.v),
                    format!("send it to a class: {}", unknown_help(&cl.v)),
                );
            }
            continue;
        };
        if f.matches_all {
            sink.warn(
                &f.header,
                format!(
                    "filter #{} has no match, so it matches every packet",
                    fi + 1
                ),
                "add a match (dscp, protocol, src, dst, ports), or remove it and set `default`",
            );
        }
        let mut spec = f.spec;
        spec.class = j as ClassId;
        filters.push(FilterInfo {
            class: cl.v.clone(),
            spec,
            line: sink_line(sink, &f.header),
        });
    }
    let (Some(mtu), Some(default_id), true) = (mtu, default_id, ok) else {
        return None;
    };
    Some(Policy {
        origin: String::new(),
        kind: QdiscKind::Drr,
        root_leaf: None,
        cbq: None,
        hfsc: None,
        r2q: DEFAULT_R2Q,
        mtu,
        default: infos[default_id].name.clone(),
        default_id: default_id as ClassId,
        classes: infos,
        filters,
        warnings: Vec::new(),
        link: Default::default(),
        dscp: Default::default(),
        subscribers: None,
        upload: None,
        non_ip: Default::default(),
    })
}
