//! A reload that adds or removes classes, applied to the running HTB in place: the new policy is
//! compared with the running one by name on the builder thread, and when every class kept stays
//! where it was (same parent, prio and kind of queue) the difference goes to the loop as one
//! [`Patch`] — classes added (`Htb::add_class`, parents first), parameters changed, the new
//! filters swapped by pointer, classes removed (`Htb::remove_class`, children first) — instead
//! of a new tree taking over the running one in steps.
//!
//! Principles:
//! * **the tree's ids stay put**: a class kept keeps its slot in the running tree, a class added
//!   takes the slot `Htb::add_class` will give it (the last one retired, else a new one at the
//!   end) and a class removed retires its slot. The builder thread keeps the running policy's
//!   [`Layout`] (which slot each class of the policy has, which slots are retired, in what
//!   order) and predicts those slots; the filters it builds name them; the loop checks each one
//!   it is given (a mismatch is a defect, refused with a message);
//! * **the loop's work is the change's**: the comparison (O(n + f) with a hash of the names),
//!   the new filters and the new classes' leaf queues are built here, off the datapath; the loop
//!   fills or retires one slot per class, which touches no other class (see `Htb::add_class`);
//! * **what a removed class held** is classified again by the new filters, as a rebuild does
//!   (core's `htb::reshape` explains why), and what the removal frees — a boxed leaf's qdisc,
//!   handed back when its slot is reused, and the old filters — goes back to the builder thread.
//!
//! A class that moves to another parent, changes prio or kind of queue, or a leaf that becomes
//! a parent (or a parent that loses its last child and becomes a leaf) is still a rebuild.
use std::collections::HashMap;

use linkshare_config::{ClassInfo, Policy};
use linkshare_core::classify::{ClassId, Classifier, FilterSpec};
use linkshare_core::htb::HtbClassSpec;
use linkshare_core::qdisc::fifo::FifoLimit;
use linkshare_core::qdisc::leaf::LeafSpec;

use crate::control::proto::Omitted;
use crate::patch::{self, Add, Base, Layout, Patch};

/// How to apply `new` to the running tree of `base`: a patch by position when the tree was
/// built from `base`'s policy and the classes are where they were, else one by name with
/// classes added and removed; with the layout the tree has once it is applied. `None`: a
/// rebuild.
pub(crate) fn plan(base: &Base, new: &Policy) -> Option<(Patch, Layout)> {
    if base.layout.slots.is_none() && base.layout.free.is_empty() {
        if let Some(p) = patch::diff(&base.policy, new) {
            return Some((p, base.layout.clone()));
        }
    }
    diff(base, new)
}

/// The patch from the running tree of `base` to `new`, matched by name. O(n + f).
pub(crate) fn diff(base: &Base, new: &Policy) -> Option<(Patch, Layout)> {
    let old = &base.policy;
    if !patch::same_frame(old, new) {
        return None;
    }
    let by_name: HashMap<&str, &ClassInfo> =
        old.classes().iter().map(|c| (c.name.as_str(), c)).collect();
    let mut kept = vec![false; old.classes().len()];
    let mut slots = vec![ClassId::MAX; new.classes().len()];
    let mut tunes = Vec::new();
    let mut added: Vec<&ClassInfo> = Vec::new();
    let mut roots_change = false;
    for n in new.classes() {
        let Some(o) = by_name.get(n.name.as_str()) else {
            roots_change |= n.parent_id.is_none();
            added.push(n);
            continue;
        };
        if !patch::same_place(o, n) {
            return None;
        }
        kept[o.id as usize] = true;
        let slot = base.layout.slot(o.id);
        slots[n.id as usize] = slot;
        let t = patch::tune(n);
        if patch::tune(o) != t {
            roots_change |= n.parent_id.is_none();
            tunes.push((slot, t));
        }
    }
    let mut removed: Vec<&ClassInfo> = old
        .classes()
        .iter()
        .filter(|c| !kept[c.id as usize])
        .collect();
    roots_change |= removed.iter().any(|c| c.parent_id.is_none());
    // A parent before its children when adding; its children before it when removing. (A class
    // kept never has a parent added or removed: its parent's name would have to change.)
    added.sort_by_key(|c| c.depth);
    removed.sort_by_key(|c| std::cmp::Reverse(c.depth));
    let mut free = base.layout.free.clone();
    let mut len = base.layout.len;
    let mut adds = Vec::with_capacity(added.len());
    for n in &added {
        let slot = free.pop().unwrap_or_else(|| {
            len += 1;
            (len - 1) as ClassId
        });
        slots[n.id as usize] = slot;
        adds.push(Add {
            slot,
            spec: spec_of(n, n.parent_id.map(|p| slots[p as usize]))?,
            inner: !n.is_leaf,
        });
    }
    let removes: Vec<ClassId> = removed
        .iter()
        .map(|o| {
            let s = base.layout.slot(o.id);
            free.push(s);
            s
        })
        .collect();
    let in_tree = |f: &FilterSpec, slot: ClassId| FilterSpec {
        class: slot,
        ..f.clone()
    };
    let new_filters: Vec<FilterSpec> = new
        .filters()
        .iter()
        .map(|f| in_tree(&f.spec, slots[f.spec.class as usize]))
        .collect();
    let default = slots[new.default_class_id() as usize];
    let same_filters = base.layout.slot(old.default_class_id()) == default
        && old.filters().len() == new_filters.len()
        && old
            .filters()
            .iter()
            .zip(&new_filters)
            .all(|(a, b)| in_tree(&a.spec, base.layout.slot(a.spec.class)) == *b);
    let classifier = (!same_filters).then(|| Classifier::new(new_filters, default));
    let identity = free.is_empty()
        && len == slots.len()
        && slots.iter().enumerate().all(|(i, &s)| s as usize == i);
    let layout = Layout {
        slots: (!identity).then_some(slots),
        free,
        len,
    };
    let patch = Patch {
        adds,
        tunes,
        classifier,
        removes,
        changed: patch::changed_by_name(old, new),
        added: added.iter().map(|c| c.name.clone()).collect(),
        removed: removed.iter().map(|c| c.name.clone()).collect(),
        omitted: Omitted::default(),
        classes: new.classes().len(),
        root_ceil: roots_change.then(|| new.root_rate().0),
    };
    Some((patch, layout))
}

/// The specification of class `c` as the running tree adds it, its parent given as a tree id;
/// `None` when its leaf queue cannot be built (the rebuild then says why).
fn spec_of(c: &ClassInfo, parent: Option<ClassId>) -> Option<HtbClassSpec<crate::Frame>> {
    let leaf = if c.is_leaf {
        c.leaf.spec().ok()?
    } else {
        // An inner class has no queue (ignored).
        LeafSpec::Fifo(FifoLimit::Packets(0))
    };
    Some(HtbClassSpec {
        name: c.name.clone(),
        parent,
        rate: c.rate,
        ceil: c.ceil,
        burst: c.burst,
        cburst: c.cburst,
        prio: c.prio,
        quantum: c.quantum,
        leaf,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `subs` leaves (name, parent) under two sites, each with a /32; the default `other`.
    fn policy(subs: &[(&str, &str)]) -> Policy {
        let mut s = String::from(
            "qdisc = \"htb\"\ndefault = \"other\"\n[[class]]\nname = \"root\"\nrate = \
             \"100mbit\"\n[[class]]\nname = \"other\"\nparent = \"root\"\nrate = \"1mbit\"\n",
        );
        for site in ["s0", "s1"] {
            s += &format!("[[class]]\nname = \"{site}\"\nparent = \"root\"\nrate = \"40mbit\"\n");
        }
        for (i, (name, site)) in subs.iter().enumerate() {
            s += &format!(
                "[[class]]\nname = \"{name}\"\nparent = \"{site}\"\nrate = \"1mbit\"\n\
                 [[filter]]\nclass = \"{name}\"\ndst = \"10.0.0.{}/32\"\n",
                i + 1
            );
        }
        Policy::parse(&s, "t.toml").unwrap()
    }

    #[test]
    fn a_subscriber_removed_and_one_added_keep_every_other_slot() {
        let a = policy(&[("a", "s0"), ("b", "s1"), ("c", "s0")]);
        // `b` leaves (the next policy has `c` at its place), `d` joins.
        let b = policy(&[("a", "s0"), ("c", "s0"), ("d", "s1")]);
        let base = Base::new(a.clone());
        let (p, layout) = plan(&base, &b).unwrap();
        assert_eq!(
            (p.added.clone(), p.removed.clone()),
            (vec!["d".into()], vec!["b".into()])
        );
        // `d` takes a new slot (none retired yet); `b`'s (5) is retired after.
        assert_eq!(p.adds.len(), 1);
        assert_eq!((p.adds[0].slot, p.adds[0].spec.parent), (7, Some(3)));
        assert_eq!(p.removes, vec![5]);
        assert!(p.tunes.is_empty() && p.root_ceil.is_none());
        // The filters name the tree's slots: `a` 4, `c` 6 (kept), `d` 7.
        let f: Vec<ClassId> = p
            .classifier
            .as_ref()
            .unwrap()
            .filters()
            .iter()
            .map(|f| f.class)
            .collect();
        assert_eq!(f, vec![4, 6, 7]);
        assert_eq!(layout.slots, Some(vec![0, 1, 2, 3, 4, 6, 7]));
        assert_eq!((layout.free.clone(), layout.len), (vec![5], 8));
        // The next subscriber added reuses slot 5, and a change of rate by name finds `d`.
        let next = Base {
            policy: b.clone(),
            layout,
        };
        let c = policy(&[("a", "s0"), ("c", "s0"), ("d", "s1"), ("e", "s1")]);
        let (p, layout) = plan(&next, &c).unwrap();
        assert_eq!(p.adds[0].slot, 5);
        assert!(p.removes.is_empty());
        assert_eq!((layout.free.len(), layout.len), (0, 8));
        assert_eq!(patch::one_class(&next, 6).tunes[0].0, 7);
        // The same policy again: nothing to do.
        let (p, _) = plan(&next, &b).unwrap();
        assert!(p.adds.is_empty() && p.removes.is_empty() && p.classifier.is_none());
    }

    #[test]
    fn a_new_site_comes_with_its_subscribers_and_goes_after_them() {
        let a = policy(&[("a", "s0")]);
        let text = |extra: &str| {
            let mut s = String::from(
                "qdisc = \"htb\"\ndefault = \"other\"\n[[class]]\nname = \"root\"\nrate = \
                 \"100mbit\"\n[[class]]\nname = \"other\"\nparent = \"root\"\nrate = \"1mbit\"\n",
            );
            for site in ["s0", "s1"] {
                s += &format!(
                    "[[class]]\nname = \"{site}\"\nparent = \"root\"\nrate = \"40mbit\"\n"
                );
            }
            s += "[[class]]\nname = \"a\"\nparent = \"s0\"\nrate = \"1mbit\"\n\
                  [[filter]]\nclass = \"a\"\ndst = \"10.0.0.1/32\"\n";
            s += extra;
            Policy::parse(&s, "t.toml").unwrap()
        };
        let b = text(
            "[[class]]\nname = \"s2\"\nparent = \"root\"\nrate = \"10mbit\"\n\
             [[class]]\nname = \"x\"\nparent = \"s2\"\nrate = \"1mbit\"\n",
        );
        let base = Base::new(a);
        let (p, layout) = plan(&base, &b).unwrap();
        let added: Vec<(&str, bool)> = p
            .adds
            .iter()
            .map(|a| (a.spec.name.as_str(), a.inner))
            .collect();
        assert_eq!(added, vec![("s2", true), ("x", false)]);
        assert_eq!(p.adds[1].spec.parent, Some(p.adds[0].slot));
        // And back: the subscriber goes before its site.
        let back = Base { policy: b, layout };
        let (p, _) = plan(&back, &text("")).unwrap();
        assert_eq!(p.removes.len(), 2);
        assert_eq!(p.removed, vec!["x".to_string(), "s2".to_string()]);
    }

    #[test]
    fn a_class_that_moves_or_changes_kind_is_a_rebuild() {
        let a = policy(&[("a", "s0"), ("b", "s1")]);
        let moved = policy(&[("a", "s1"), ("b", "s1")]);
        assert!(plan(&Base::new(a.clone()), &moved).is_none());
        // A site that loses its last subscriber becomes a leaf.
        let emptied = policy(&[("a", "s0")]);
        assert!(plan(&Base::new(a), &emptied).is_none());
    }
}
