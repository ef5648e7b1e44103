//! The second pass for HTB and CBQ: the classes checked as a tree.
//!
//! [`tree`] reads the classes and filters (first pass, [`super::read`]), then runs the whole-tree
//! checks as named steps, in a fixed order that is also the order of the diagnostics: names,
//! parents, cycles, depth, children, each class's values ([`super::rates`]), capacity, ceilings,
//! roots, then where packets go ([`super::routing`]: default class, filters). Each step records
//! what it resolved in a [`Shape`] and skips what an earlier step reported as broken (an unknown
//! parent, a loop), so that one mistake gives one error. The limits are Linux's
//! (`net/sched/sch_htb.c`: 8 levels; `sch_cbq.c`: 16).

use std::collections::HashMap;

use linkshare_core::classify::ClassId;
use linkshare_core::htb::MAX_DEPTH;

use crate::diag::suggest;
use crate::raw::PolicyDoc;
use crate::source::Sink;
use crate::values;
use crate::{Policy, QdiscKind};

use super::cbq::{read_cbq_options, resolve_shares, warn_runaway_offtime, CBQ_TOP_KEYS};
use super::hfsc::{check_hfsc, read_hfsc_compat, HFSC_TOP_KEYS};
use super::rates::{check_capacity, check_child_ceils, class_infos};
use super::read::{get, read_class, read_filter, sink_line, tables, ClassDraft, FilterDraft};
use super::routing::{resolve_default, resolve_filters};
use super::subs::{self, ReadTable};
use super::upload;

/// The HTB tree: classes, filters, default.
pub(super) fn tree(
    sink: &mut Sink,
    doc: &PolicyDoc,
    kind: QdiscKind,
    r2q: Option<u32>,
    mtu: Option<u32>,
    files: ReadTable,
) -> Option<Policy> {
    let cbq_opts = if kind == QdiscKind::Cbq {
        read_cbq_options(sink, &doc.entries)
    } else {
        reject_cbq_keys(sink, doc, kind);
        None
    };
    let hfsc = (kind == QdiscKind::Hfsc).then(|| read_hfsc_compat(sink, &doc.entries));
    if kind != QdiscKind::Hfsc {
        for key in HFSC_TOP_KEYS {
            if let Some((k, _)) = doc.entries.iter().find(|(k, _)| k.get_ref() == key) {
                sink.error(
                    &k.span(),
                    format!(
                        "`{key}` is an HFSC option; this policy's qdisc is {}",
                        kind.name()
                    ),
                    format!("remove `{key}`, or use `qdisc = \"hfsc\"`"),
                );
            }
        }
    }
    let class_tables = tables(sink, doc, "class");
    let filter_tables = tables(sink, doc, "filter");
    let mut classes: Vec<ClassDraft> = class_tables
        .into_iter()
        .enumerate()
        .map(|(i, (span, e))| read_class(sink, kind, i, span, e))
        .collect();
    let filters: Vec<FilterDraft> = filter_tables
        .into_iter()
        .enumerate()
        .map(|(i, (span, e))| read_filter(sink, i, span, e))
        .collect();
    let default = get(&doc.entries, "default");
    let default_name = match default {
        Some(v) => values::string(sink, "`default`", v, "\"bulk\"").map(|s| s.trim().to_string()),
        None => None,
    };

    resolve_shares(sink, &mut classes);
    if classes.is_empty() {
        if get(&doc.entries, "class").is_none() {
            sink.error(
                &doc.anchor(),
                "the policy has no classes",
                "add at least one `[[class]]` with `name` and `rate`",
            );
        }
        return None;
    }

    let mut shape = Shape::index_names(sink, &classes);
    shape.resolve_parents(sink);
    shape.find_cycles(sink);
    shape.check_depth(sink, kind);
    shape.link_children();
    let table = subs::read(sink, doc, &mut shape, kind, r2q, mtu, files);
    let mut infos = class_infos(sink, kind, &shape, r2q, mtu);
    if kind == QdiscKind::Hfsc {
        check_hfsc(sink, &shape, &mut infos);
    } else {
        check_capacity(sink, &shape);
        check_child_ceils(sink, &shape, &infos);
    }
    shape.check_roots(sink);
    let default_id = resolve_default(sink, doc, &shape, default, default_name.as_deref());
    let filter_infos = resolve_filters(sink, &shape, filters);
    if let (Some(o), Some(mtu)) = (&cbq_opts, mtu) {
        warn_runaway_offtime(sink, &classes, &infos, o, mtu);
    }
    let uploads = upload::check(sink, &shape, table.as_ref());

    let (Some(r2q), Some(mtu), Some(default_id)) = (r2q, mtu, default_id) else {
        return None;
    };
    if sink.has_errors() {
        return None;
    }
    let mut p = Policy {
        origin: String::new(),
        kind,
        root_leaf: None,
        cbq: cbq_opts,
        hfsc,
        r2q,
        mtu,
        default: shape.name_of(default_id),
        default_id: default_id as ClassId,
        classes: infos,
        filters: filter_infos,
        warnings: Vec::new(),
        link: Default::default(),
        dscp: Default::default(),
        subscribers: None,
        upload: None,
        non_ip: Default::default(),
    };
    if let Some(t) = table {
        t.append(&mut p);
    }
    if let Some(u) = uploads {
        p.upload = Some(Box::new(upload::derive(&p, u)));
    }
    Some(p)
}

/// Under a qdisc other than CBQ, each of CBQ's top-level options is an error.
fn reject_cbq_keys(sink: &mut Sink, doc: &PolicyDoc, kind: QdiscKind) {
    for key in CBQ_TOP_KEYS {
        if let Some((k, _)) = doc.entries.iter().find(|(k, _)| k.get_ref() == key) {
            sink.error(
                &k.span(),
                format!(
                    "`{key}` is a CBQ option; this policy's qdisc is {}",
                    kind.name()
                ),
                format!("remove `{key}`, or use `qdisc = \"cbq\"`"),
            );
        }
    }
}

/// "did you mean …? defined classes: …", for a name that is not a class.
pub(super) fn unknown_class_help(what: &str, names: &[&str]) -> String {
    match suggest(what, names.iter().copied()) {
        Some(s) => format!(
            "did you mean \"{s}\"? defined classes: {}",
            names.join(", ")
        ),
        None => format!("defined classes: {}", names.join(", ")),
    }
}

/// What the tree checks have resolved so far, one entry per class in file order. Each step
/// fills its own fields; later steps read them.
pub(super) struct Shape<'c> {
    pub(super) classes: &'c [ClassDraft],
    /// The first class of each name.
    pub(super) by_name: HashMap<&'c str, usize>,
    /// Each name once (a duplicate is reported), in file order.
    pub(super) names: Vec<&'c str>,
    /// `Some(index)` when the parent is known.
    pub(super) parent_of: Vec<Option<usize>>,
    /// The parent is broken, unknown or the class itself.
    pub(super) unresolved: Vec<bool>,
    /// Number of ancestors, `None` if the chain loops or is unresolved.
    pub(super) depth: Vec<Option<usize>>,
    /// The class is a member of a parent loop.
    pub(super) in_cycle: Vec<bool>,
    pub(super) children: Vec<Vec<usize>>,
    pub(super) is_leaf: Vec<bool>,
    /// The subscribers of the subscriber table under each class (all zero without one).
    pub(super) subs: Vec<SubAgg>,
}

/// What the subscriber table puts under one class: how many subscribers, and the sums of their
/// guaranteed rates (bits per second) in each direction.
#[derive(Clone, Debug, Default)]
pub(super) struct SubAgg {
    pub(super) count: u32,
    pub(super) rate: u64,
    pub(super) upload: u64,
    /// The table's file name, for messages.
    pub(super) file: std::rc::Rc<str>,
}

impl<'c> Shape<'c> {
    /// Step 1, names: indexes the classes by name and reports a name defined twice (pointing
    /// at the first definition).
    fn index_names(sink: &mut Sink, classes: &'c [ClassDraft]) -> Self {
        let n = classes.len();
        let mut by_name: HashMap<&str, usize> = HashMap::new();
        for (i, c) in classes.iter().enumerate() {
            let Some(name) = &c.name else { continue };
            if let Some(&first) = by_name.get(name.v.as_str()) {
                let line = classes[first]
                    .name
                    .as_ref()
                    .map(|n| sink_line(sink, &n.span))
                    .unwrap_or(0);
                sink.error(
                    &name.span,
                    format!("class `{}` is defined twice", name.v),
                    format!(
                        "class names must be unique; the first `{}` is at line {line}: rename one",
                        name.v
                    ),
                );
            } else {
                by_name.insert(name.v.as_str(), i);
            }
        }
        let names: Vec<&str> = classes
            .iter()
            .enumerate()
            .filter_map(|(i, c)| c.name.as_ref().map(|x| (i, x.v.as_str())))
            .filter(|(i, name)| by_name.get(name) == Some(i))
            .map(|(_, name)| name)
            .collect();
        Shape {
            classes,
            by_name,
            names,
            parent_of: vec![None; n],
            unresolved: vec![false; n],
            depth: vec![None; n],
            in_cycle: vec![false; n],
            children: vec![Vec::new(); n],
            is_leaf: vec![true; n],
            subs: vec![SubAgg::default(); n],
        }
    }

    /// The number of classes.
    pub(super) fn len(&self) -> usize {
        self.classes.len()
    }

    /// A class's name for messages, `#n` (1-based) when it has none.
    pub(super) fn name_of(&self, i: usize) -> String {
        self.classes[i]
            .name
            .as_ref()
            .map(|n| n.v.clone())
            .unwrap_or_else(|| format!("#{}", i + 1))
    }

    /// Step 2, parents: resolves each `parent` to a class, reporting a class that is its own
    /// parent and a parent that is not defined. Such classes (and those whose `parent` could not
    /// be read) are marked unresolved.
    fn resolve_parents(&mut self, sink: &mut Sink) {
        let classes = self.classes;
        for (i, c) in classes.iter().enumerate() {
            if c.parent_broken {
                self.unresolved[i] = true;
            }
            let Some(p) = &c.parent else { continue };
            match self.by_name.get(p.v.as_str()) {
                Some(&j) if j == i => {
                    self.unresolved[i] = true;
                    sink.error(
                        &p.span,
                        format!("class `{}` is its own parent (a cycle)", p.v),
                        "remove `parent` to make it a root, or name the class it belongs under",
                    );
                }
                Some(&j) => self.parent_of[i] = Some(j),
                None => {
                    self.unresolved[i] = true;
                    sink.error(
                        &p.span,
                        format!("class `{}`: unknown parent `{}`", self.name_of(i), p.v),
                        format!(
                            "{}; or remove `parent` to make this class a root",
                            unknown_class_help(&p.v, &self.names)
                        ),
                    );
                }
            }
        }
    }

    /// Step 3, cycles: follows each class's parent chain. A chain that loops is reported once
    /// per loop, at the `parent` of its first member in file order, with the loop spelled out;
    /// a chain that ends at a root gives the class its depth.
    fn find_cycles(&mut self, sink: &mut Sink) {
        let n = self.len();
        #[allow(clippy::needless_range_loop)] // `start` indexes several parallel vectors
        for start in 0..n {
            let mut path = vec![start];
            let mut c = start;
            let mut ok = true;
            loop {
                if self.unresolved[c] {
                    ok = false;
                    break;
                }
                match self.parent_of[c] {
                    None => break,
                    Some(p) => {
                        if let Some(pos) = path.iter().position(|&x| x == p) {
                            // A loop: path[pos..] are its members.
                            let members: Vec<usize> = path[pos..].to_vec();
                            if !members.iter().any(|&m| self.in_cycle[m]) {
                                for &m in &members {
                                    self.in_cycle[m] = true;
                                }
                                self.report_cycle(sink, *members.iter().min().unwrap_or(&p));
                            }
                            ok = false;
                            break;
                        }
                        path.push(p);
                        c = p;
                    }
                }
            }
            if ok {
                self.depth[start] = Some(path.len() - 1);
            }
        }
    }

    /// The error for the loop that `first` is in: "a -> b -> a", at `first`'s `parent`.
    fn report_cycle(&self, sink: &mut Sink, first: usize) {
        let mut chain = vec![self.name_of(first)];
        let mut x = first;
        while let Some(px) = self.parent_of[x] {
            chain.push(self.name_of(px));
            if px == first {
                break;
            }
            x = px;
        }
        if let Some(ps) = &self.classes[first].parent {
            sink.error(
                &ps.span,
                format!("class `{}`: parent chain loops back to itself: {}", self.name_of(first), chain.join(" -> ")),
                "a class cannot be its own ancestor: give one class in the loop another parent, or none to make it a root",
            );
        }
    }

    /// Step 4, depth: HTB keeps 8 levels as Linux does; CBQ 16. A class one level too deep is
    /// reported (its descendants, deeper still, are not reported again).
    fn check_depth(&self, sink: &mut Sink, kind: QdiscKind) {
        let (max_depth, kind_upper) = match kind {
            QdiscKind::Cbq => (linkshare_core::cbq::MAX_DEPTH, "CBQ"),
            QdiscKind::Hfsc => (linkshare_core::hfsc::MAX_DEPTH, "HFSC"),
            _ => (MAX_DEPTH, "HTB"),
        };
        for i in 0..self.len() {
            if self.depth[i] == Some(max_depth) {
                let span = self.classes[i]
                    .parent
                    .as_ref()
                    .map(|p| p.span.clone())
                    .unwrap_or(self.classes[i].header.clone());
                sink.error(
                    &span,
                    format!("class `{}` is at level {} of the tree; {kind_upper} supports at most {max_depth} levels from root to leaf", self.name_of(i), max_depth + 1),
                    "attach it higher up, or merge intermediate classes",
                );
            }
        }
    }

    /// Step 5, children: each class's children in file order, and which classes are leaves.
    /// Edges inside a loop are already reported; they do not make anyone a parent.
    fn link_children(&mut self) {
        for i in 0..self.len() {
            if let (Some(p), false) = (self.parent_of[i], self.in_cycle[i]) {
                self.children[p].push(i);
            }
        }
        self.is_leaf = self.children.iter().map(|c| c.is_empty()).collect();
    }

    /// Step 8, roots: several classes without a parent do not share bandwidth; a warning at
    /// the second one's name.
    fn check_roots(&self, sink: &mut Sink) {
        let classes = self.classes;
        let roots: Vec<usize> = (0..self.len())
            .filter(|&i| {
                classes[i].name.is_some()
                    && classes[i].parent.is_none()
                    && !classes[i].parent_broken
            })
            .collect();
        if roots.len() > 1 {
            let r = roots[1];
            let list: Vec<String> = roots
                .iter()
                .map(|&r| format!("`{}`", self.name_of(r)))
                .collect();
            let span = classes[r]
                .name
                .as_ref()
                .map(|x| x.span.clone())
                .unwrap_or(classes[r].header.clone());
            sink.warn(
                &span,
                format!(
                    "{} classes have no parent ({}); separate roots never lend to each other",
                    roots.len(),
                    list.join(", ")
                ),
                format!(
                    "if they share one link, give them a common root class, e.g. `parent = \"{}\"`",
                    self.name_of(roots[0])
                ),
            );
        }
    }

    /// The names of the leaves under class `i`, depth first in file order.
    pub(super) fn leaf_names(&self, i: usize) -> Vec<String> {
        let mut out = Vec::new();
        let mut stack = vec![i];
        let mut seen = vec![false; self.len()];
        while let Some(c) = stack.pop() {
            if std::mem::replace(&mut seen[c], true) {
                continue;
            }
            if self.children[c].is_empty() {
                out.push(self.name_of(c));
            } else {
                stack.extend(self.children[c].iter().rev());
            }
        }
        out
    }
}
