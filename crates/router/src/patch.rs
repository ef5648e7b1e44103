//! A reload that touches only what changed: the new policy is compared with the running one on
//! the builder thread (builder.rs), and when they differ only in what an HTB can change in place
//! — a class's rate, ceil, bursts, quantum or FIFO limit, the filters or the default class,
//! classes added or removed (inplace.rs) — the loop applies that difference ([`Patch`]:
//! `Htb::add_class` per class added, `Htb::retune` per class changed, one classifier swapped by
//! pointer, `Htb::remove_class` per class removed) instead of installing a new tree. The loop's
//! work is then proportional to the change, not to the tree: one subscriber's new rate among
//! 100,000 is one class's buckets settled and one profile looked up, one subscriber added or
//! removed is one slot filled or retired, and no other class's tokens, counters or queue are
//! touched.
//!
//! Anything else (a class moved to another parent, a new prio or leaf kind, a leaf that becomes
//! a parent, another discipline, `r2q`, `mtu` or the link layer) is a rebuild: the new tree is
//! built on the builder thread, with what it takes over from the running one found here too
//! ([`takeover`]: which class becomes which, by name), and it takes over the running one's state
//! on the loop in bounded steps while it already forwards (reload.rs, `Htb::adopt_step`).
//!
//! A policy's class ids are its file order; the running tree's ids are its slots, which are the
//! policy's ids for a tree built from it and stay where they were when classes are added or
//! removed in place ([`Layout`] maps one to the other). Here the comparison is by position, for
//! a policy whose classes are the same names in the same order as the running tree's (every id
//! kept); inplace.rs compares by name. O(n + f) for `n` classes and `f` filters, all of it off
//! the datapath.

use linkshare_config::{ClassInfo, LeafKind, Policy, QdiscKind};
use std::collections::HashMap;

use linkshare_core::classify::{ClassId, Classifier, FilterSpec};
use linkshare_core::htb::{ClassTune, HtbClassSpec};

use crate::control::proto::Omitted;

/// The difference between the running policy and a new one, applied in place, in this order:
/// classes added (parents first), parameters changed, filters swapped, classes removed
/// (children first). Class ids here are the running tree's.
#[derive(Debug)]
pub(crate) struct Patch {
    /// Classes to add, parents first, each with the id the tree will give it.
    pub adds: Vec<Add>,
    /// Classes whose parameters change, with their new ones.
    pub tunes: Vec<(ClassId, ClassTune)>,
    /// New filters (or a new default class), to swap in whole.
    pub classifier: Option<Classifier>,
    /// Classes to remove, children first (after the new filters are in).
    pub removes: Vec<ClassId>,
    /// Names of the classes changed: new parameters, or filters that now lead to them or no
    /// longer do; in class order (the first `REPORT_NAMES` once the builder thread capped it).
    pub changed: Vec<String>,
    /// Names of the classes added and removed (likewise capped).
    pub added: Vec<String>,
    pub removed: Vec<String>,
    /// Names left out of `changed`, `added` and `removed`.
    pub omitted: Omitted,
    /// Classes in the new policy (the report's `kept` is those neither added nor changed).
    pub classes: usize,
    /// The new sum of the roots' ceils, when a root's changes (the device model follows it).
    pub root_ceil: Option<u64>,
}

/// A class added in place: its specification (parent as a tree id) and the id it gets.
#[derive(Debug)]
pub(crate) struct Add {
    pub slot: ClassId,
    pub spec: HtbClassSpec<crate::Frame>,
    /// An inner class (its children follow it in the patch).
    pub inner: bool,
}

/// Where a policy's classes sit in the running tree: the tree's id of each policy class, and
/// the tree's retired slots in the order `Htb::add_class` reuses them (the last retired
/// first). The builder thread keeps it beside the policy ([`Base`]) and predicts the ids the
/// tree gives, which the loop checks.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Layout {
    /// Per class of the policy (by its id), its id in the tree; `None`: the same ids (a tree
    /// built from the policy).
    pub(crate) slots: Option<Vec<ClassId>>,
    /// Slots retired, the next one reused last.
    pub(crate) free: Vec<ClassId>,
    /// Slots in the tree, retired ones included.
    pub(crate) len: usize,
}

impl Layout {
    /// The layout of a tree built from `p`.
    pub(crate) fn of(p: &Policy) -> Layout {
        Layout {
            slots: None,
            free: Vec::new(),
            len: p.classes().len(),
        }
    }

    /// The tree's id of the policy's class `id`.
    pub(crate) fn slot(&self, id: ClassId) -> ClassId {
        match &self.slots {
            Some(s) => s.get(id as usize).copied().unwrap_or(id),
            None => id,
        }
    }
}

/// The policy a direction runs, as the builder thread holds it to compare the next one with,
/// and where its classes sit in the running tree.
#[derive(Clone, Debug)]
pub(crate) struct Base {
    pub policy: Policy,
    pub layout: Layout,
}

impl Base {
    /// A policy running as a tree built from it.
    pub(crate) fn new(policy: Policy) -> Base {
        Base {
            layout: Layout::of(&policy),
            policy,
        }
    }
}

/// Whether `new` can be applied to the tree of `old` in place as far as the tree's frame goes:
/// both HTB without a root leaf, with the same `r2q`, `mtu`, link layer and link rules.
pub(crate) fn same_frame(old: &Policy, new: &Policy) -> bool {
    old.kind() == QdiscKind::Htb
        && new.kind() == QdiscKind::Htb
        && old.root_leaf().is_none()
        && new.root_leaf().is_none()
        && old.htb_params() == new.htb_params()
        && old.link_layer() == new.link_layer()
        // A patch keeps the direction's link rules: a change of `non_ip` or of the DSCP
        // trust is a new tree.
        && old.non_ip() == new.non_ip()
        && old.dscp_trust() == new.dscp_trust()
}

/// The patch from `old` to `new` with every class at its place (same names in the same
/// order), for a tree built from `old`; `None` otherwise.
pub(crate) fn diff(old: &Policy, new: &Policy) -> Option<Patch> {
    if !same_frame(old, new) || old.classes().len() != new.classes().len() {
        return None;
    }
    let mut tunes = Vec::new();
    let mut changed = vec![false; new.classes().len()];
    let mut root_changed = false;
    for (o, n) in old.classes().iter().zip(new.classes()) {
        if !same_shape(o, n) {
            return None;
        }
        let t = tune(n);
        if tune(o) != t {
            tunes.push((n.id, t));
            changed[n.id as usize] = true;
            root_changed |= n.parent_id.is_none();
        }
    }
    let (of, nf) = (old.filters(), new.filters());
    let filters_differ = old.default_class_id() != new.default_class_id()
        || of.len() != nf.len()
        || of.iter().zip(nf).any(|(a, b)| a.spec != b.spec);
    let classifier = filters_differ.then(|| {
        // The classes a changed filter led to before or leads to now.
        for i in 0..of.len().max(nf.len()) {
            let (a, b) = (of.get(i), nf.get(i));
            if a.map(|f| &f.spec) != b.map(|f| &f.spec) {
                for f in a.into_iter().chain(b) {
                    if let Some(c) = changed.get_mut(f.spec.class as usize) {
                        *c = true;
                    }
                }
            }
        }
        if old.default_class_id() != new.default_class_id() {
            for d in [old.default_class_id(), new.default_class_id()] {
                if let Some(c) = changed.get_mut(d as usize) {
                    *c = true;
                }
            }
        }
        Classifier::new(
            nf.iter().map(|f| f.spec.clone()).collect(),
            new.default_class_id(),
        )
    });
    let root_ceil = root_changed.then(|| new.root_rate().0);
    Some(Patch {
        adds: Vec::new(),
        tunes,
        classifier,
        removes: Vec::new(),
        changed: new
            .classes()
            .iter()
            .filter(|c| changed[c.id as usize])
            .map(|c| c.name.clone())
            .collect(),
        added: Vec::new(),
        removed: Vec::new(),
        omitted: Omitted::default(),
        classes: new.classes().len(),
        root_ceil,
    })
}

/// The patch that gives class `id` of `b`'s policy its parameters there (a change by name: the
/// builder thread changed that class of the running policy and nothing else). O(roots) when
/// the class is a root, O(1) otherwise.
pub(crate) fn one_class(b: &Base, id: ClassId) -> Patch {
    let p = &b.policy;
    let c = &p.classes()[id as usize];
    let root_ceil = c.parent_id.is_none().then(|| p.root_rate().0);
    Patch {
        adds: Vec::new(),
        tunes: vec![(b.layout.slot(id), tune(c))],
        classifier: None,
        removes: Vec::new(),
        changed: vec![c.name.clone()],
        added: Vec::new(),
        removed: Vec::new(),
        omitted: Omitted::default(),
        classes: p.classes().len(),
        root_ceil,
    }
}

/// For a rebuild: the classes of `new` also in `old` (by name) whose parameters, parent, prio,
/// leaf or filters differ, in `new`'s order. O(n + f).
pub(crate) fn changed_by_name(old: &Policy, new: &Policy) -> Vec<String> {
    let by_name: HashMap<&str, &ClassInfo> =
        old.classes().iter().map(|c| (c.name.as_str(), c)).collect();
    fn filters_of(p: &Policy) -> HashMap<&str, Vec<&FilterSpec>> {
        let mut m: HashMap<&str, Vec<&FilterSpec>> = HashMap::new();
        for f in p.filters() {
            m.entry(f.class.as_str()).or_default().push(&f.spec);
        }
        m
    }
    let (of, nf) = (filters_of(old), filters_of(new));
    // Filters are compared without their target's id, which a rebuild may renumber.
    let strip = |v: Option<&Vec<&FilterSpec>>| {
        v.map(|v| {
            v.iter()
                .map(|f| FilterSpec {
                    class: 0,
                    ..(*f).clone()
                })
                .collect::<Vec<_>>()
        })
    };
    new.classes()
        .iter()
        .filter(|n| {
            by_name.get(n.name.as_str()).is_some_and(|o| {
                o.parent != n.parent
                    || o.prio != n.prio
                    || o.is_leaf != n.is_leaf
                    || o.leaf != n.leaf
                    || tune(o) != tune(n)
                    || strip(of.get(n.name.as_str())) != strip(nf.get(n.name.as_str()))
            })
        })
        .map(|c| c.name.clone())
        .collect()
}

/// How a rebuilt HTB takes over the running one in steps (reload.rs, `Htb::adopt_begin`), all
/// of it found here, off the datapath: which new class each running class becomes (by name),
/// the names added and removed, and the new roots' ceils (the device model follows them).
pub(crate) struct Takeover {
    pub map: linkshare_core::htb::AdoptMap,
    pub added: Vec<String>,
    pub removed: Vec<String>,
    /// Names left out of `added` and `removed` (the builder thread caps the lists).
    pub omitted: crate::control::proto::Omitted,
    pub kept: u64,
    pub root_ceil: u64,
}

/// The take-over of the running HTB of `old` (its policy and where its classes sit: slots
/// retired in place are gone) by the one built from `new` (both HTB policies). O(n) for `n`
/// classes.
pub(crate) fn takeover(old: &Base, new: &Policy) -> Takeover {
    let ids: HashMap<&str, ClassId> = new
        .classes()
        .iter()
        .map(|c| (c.name.as_str(), c.id))
        .collect();
    let mut to_new: Vec<Option<ClassId>> = vec![None; old.layout.len];
    let mut seen = vec![false; new.classes().len()];
    let mut removed = Vec::new();
    for c in old.policy.classes() {
        let n = ids.get(c.name.as_str()).copied();
        if let Some(slot) = to_new.get_mut(old.layout.slot(c.id) as usize) {
            *slot = n;
        }
        match n.and_then(|n| seen.get_mut(n as usize)) {
            Some(s) => *s = true,
            None => removed.push(c.name.clone()),
        }
    }
    let old_len = old.policy.classes().len();
    let added: Vec<String> = new
        .classes()
        .iter()
        .filter(|c| !seen[c.id as usize])
        .map(|c| c.name.clone())
        .collect();
    Takeover {
        map: linkshare_core::htb::AdoptMap::new(&to_new, new.classes().len()),
        kept: (old_len - removed.len()) as u64,
        added,
        removed,
        omitted: Default::default(),
        root_ceil: new.root_rate().0,
    }
}

/// Whether two classes are the same place in the tree with the same kind of queue.
fn same_shape(o: &ClassInfo, n: &ClassInfo) -> bool {
    o.id == n.id && o.name == n.name && o.parent_id == n.parent_id && same_place(o, n)
}

/// Whether two classes of the same name stay what they were: the same parent (by name), prio
/// and kind of queue, so that the running class takes the new one's parameters in place.
pub(crate) fn same_place(o: &ClassInfo, n: &ClassInfo) -> bool {
    o.parent == n.parent
        && o.prio == n.prio
        && o.is_leaf == n.is_leaf
        && (!n.is_leaf || same_leaf(&o.leaf, &n.leaf))
}

/// Same leaf discipline with the same parameters, but for a FIFO's limit (a tune).
fn same_leaf(o: &LeafKind, n: &LeafKind) -> bool {
    matches!(
        (o, n),
        (LeafKind::Pfifo { .. }, LeafKind::Pfifo { .. })
            | (LeafKind::Bfifo { .. }, LeafKind::Bfifo { .. })
    ) || o == n
}

/// The parameters of a class that change in place.
pub(crate) fn tune(c: &ClassInfo) -> ClassTune {
    ClassTune {
        rate: c.rate,
        ceil: c.ceil,
        burst: c.burst,
        cburst: c.cburst,
        quantum: c.quantum,
        fifo_limit: match (&c.leaf, c.is_leaf) {
            (LeafKind::Pfifo { limit } | LeafKind::Bfifo { limit }, true) => *limit,
            _ => 0,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(classes: &[(&str, &str)], filters: &[(&str, &str)]) -> Policy {
        let mut s = String::from(
            "qdisc = \"htb\"\ndefault = \"c0\"\n[[class]]\nname = \"root\"\nrate = \"100mbit\"\n",
        );
        for (name, rate) in classes {
            s.push_str(&format!(
                "[[class]]\nname = \"{name}\"\nparent = \"root\"\nrate = \"{rate}\"\n"
            ));
        }
        for (class, dst) in filters {
            s.push_str(&format!(
                "[[filter]]\nclass = \"{class}\"\ndst = \"{dst}\"\n"
            ));
        }
        Policy::parse(&s, "t.toml").unwrap()
    }

    #[test]
    fn a_rate_change_is_one_tune() {
        let a = policy(&[("c0", "1mbit"), ("c1", "1mbit"), ("c2", "1mbit")], &[]);
        let b = policy(&[("c0", "1mbit"), ("c1", "2mbit"), ("c2", "1mbit")], &[]);
        let p = diff(&a, &b).unwrap();
        assert_eq!(p.tunes.len(), 1);
        assert_eq!(p.tunes[0].0, 2);
        assert_eq!(p.tunes[0].1.rate.bits_per_sec(), 2_000_000);
        assert_eq!(p.changed, ["c1"]);
        assert!(p.classifier.is_none() && p.root_ceil.is_none());
        // The same policy: nothing to do.
        let same = diff(&a, &a).unwrap();
        assert!(same.tunes.is_empty() && same.changed.is_empty() && same.classifier.is_none());
    }

    #[test]
    fn a_moved_address_swaps_the_filters_and_names_both_classes() {
        let cl = [("c0", "1mbit"), ("c1", "1mbit"), ("c2", "1mbit")];
        let a = policy(&cl, &[("c1", "10.0.0.1/32"), ("c2", "10.0.0.2/32")]);
        let b = policy(&cl, &[("c0", "10.0.0.1/32"), ("c2", "10.0.0.2/32")]);
        let p = diff(&a, &b).unwrap();
        assert!(p.tunes.is_empty());
        assert_eq!(p.classifier.as_ref().unwrap().filters()[0].class, 1);
        assert_eq!(p.changed, ["c0", "c1"]);
    }

    #[test]
    fn a_class_added_removed_or_renamed_is_not_a_patch_by_position() {
        // (inplace.rs applies them in place, by name.)
        let a = policy(&[("c0", "1mbit"), ("c1", "1mbit")], &[]);
        let added = policy(&[("c0", "1mbit"), ("c1", "1mbit"), ("c2", "1mbit")], &[]);
        let renamed = policy(&[("c0", "1mbit"), ("cx", "1mbit")], &[]);
        assert!(diff(&a, &added).is_none());
        assert!(diff(&added, &a).is_none());
        assert!(diff(&a, &renamed).is_none());
    }

    #[test]
    fn a_takeover_matches_classes_by_name_off_the_loop() {
        let a = policy(&[("c0", "1mbit"), ("c1", "1mbit"), ("c2", "1mbit")], &[]);
        // c1 removed, c3 added before c2: c2's id moves.
        let b = policy(&[("c0", "1mbit"), ("c3", "1mbit"), ("c2", "2mbit")], &[]);
        let t = takeover(&Base::new(a.clone()), &b);
        assert_eq!(t.added, ["c3"]);
        assert_eq!(t.removed, ["c1"]);
        assert_eq!(t.kept, 3);
        assert_eq!(t.map.kept(), 3);
        assert_eq!(t.root_ceil, 100_000_000);
        // The same policy: everything kept.
        let same = takeover(&Base::new(a.clone()), &a);
        assert!(same.added.is_empty() && same.removed.is_empty());
        assert_eq!(same.kept, 4);
    }

    #[test]
    fn a_root_change_carries_the_new_link_rate() {
        let a = policy(&[("c0", "1mbit")], &[]);
        let text = "qdisc = \"htb\"\ndefault = \"c0\"\n[[class]]\nname = \"root\"\nrate = \
                    \"50mbit\"\n[[class]]\nname = \"c0\"\nparent = \"root\"\nrate = \"1mbit\"\n";
        let b = Policy::parse(text, "t.toml").unwrap();
        let p = diff(&a, &b).unwrap();
        assert_eq!(p.root_ceil, Some(50_000_000));
        assert_eq!(p.changed, ["root"]);
    }
}
