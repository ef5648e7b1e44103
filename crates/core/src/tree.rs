//! The class tree shared by the hierarchical schedulers (HTB, CBQ): validation of the parent
//! links, depth of every class, which classes are inner, and the depth-first visiting order.
//!
//! Principles: classes are given as a vector and named by their index; a class's parent is
//! another index or none (a root). The tree is checked once, when a scheduler is built, in
//! O(n) (each class's chain to a root is walked once, then memoised), so the schedulers never
//! meet a dangling parent, a cycle or a tree deeper than their per-packet walks allow. The
//! visiting order is depth first, parents before children, siblings in index order — the order
//! `tc class show` lists a tree in (Linux net/sched/sch_htb.c and sch_cbq.c keep the same
//! parent/child links in their `Qdisc_class_common` hash and `children` lists; here they are
//! plain indices). Filters and the default class must name leaves, as in Linux, where a filter
//! to an inner HTB class is rejected and one to an inner CBQ class only selects a split node.

use crate::classify::{ClassId, Classifier};

/// Why a tree's shape was rejected. `class` is the offending class's index; each scheduler maps
/// it to its own error with the class's name (see `HtbError`, `CbqError`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TreeError {
    /// `parent` is not the index of a class.
    UnknownParent { class: usize, parent: ClassId },
    /// Following parents from `class` comes back to it.
    Cycle { class: usize },
    /// `class` is deeper than the scheduler allows.
    TooDeep { class: usize },
    /// A filter names an index that is not a class.
    FilterToUnknown(ClassId),
    /// A filter names an inner class.
    FilterToInner(usize),
    /// The default class is not a class.
    UnknownDefault(ClassId),
    /// The default class is an inner class.
    DefaultNotLeaf(usize),
}

/// Depth limits, inclusive, counted from a root (depth 0).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct DepthLimits {
    /// Deepest a leaf may be.
    pub leaf: u32,
    /// Deepest an inner class may be (HTB needs a level ≥ 1 for every inner class).
    pub inner: u32,
}

/// A validated class tree. See the module documentation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClassTree {
    parent: Vec<Option<u32>>,
    depth: Vec<u32>,
    has_children: Vec<bool>,
    order: Vec<u32>,
}

impl ClassTree {
    /// Check the parent links (`parents[i]` is class `i`'s parent) and build the tree. Errors
    /// are reported for the lowest offending index: unknown parents first, then cycles and
    /// depth.
    pub fn new(parents: &[Option<ClassId>], limits: DepthLimits) -> Result<Self, TreeError> {
        let n = parents.len();
        let mut has_children = vec![false; n];
        for (i, p) in parents.iter().enumerate() {
            if let Some(p) = *p {
                match has_children.get_mut(p as usize) {
                    Some(h) => *h = true,
                    None => {
                        return Err(TreeError::UnknownParent {
                            class: i,
                            parent: p,
                        })
                    }
                }
            }
        }
        // Depth of each class from its root; a chain that comes back to itself is a cycle.
        const UNKNOWN: u32 = u32::MAX;
        let mut depth = vec![UNKNOWN; n];
        let mut chain = Vec::new();
        for i in 0..n {
            chain.clear();
            let mut c = i;
            while depth[c] == UNKNOWN {
                if chain.contains(&c) {
                    return Err(TreeError::Cycle { class: i });
                }
                chain.push(c);
                match parents[c] {
                    Some(p) => c = p as usize,
                    None => {
                        depth[c] = 0;
                        chain.pop();
                        break;
                    }
                }
            }
            while let Some(c) = chain.pop() {
                let p = parents[c].map_or(c, |p| p as usize);
                depth[c] = depth[p] + 1;
            }
            let max = if has_children[i] {
                limits.inner
            } else {
                limits.leaf
            };
            if depth[i] > max {
                return Err(TreeError::TooDeep { class: i });
            }
        }
        let order = depth_first_order(parents);
        Ok(ClassTree {
            parent: parents.to_vec(),
            depth,
            has_children,
            order,
        })
    }

    /// Check that every filter and the default class name a leaf; returns the default class.
    pub fn check_classifier(&self, classifier: &Classifier) -> Result<ClassId, TreeError> {
        for f in classifier.filters() {
            match self.has_children.get(f.class as usize) {
                None => return Err(TreeError::FilterToUnknown(f.class)),
                Some(true) => return Err(TreeError::FilterToInner(f.class as usize)),
                Some(false) => {}
            }
        }
        let default = classifier.default_class();
        match self.has_children.get(default as usize) {
            None => Err(TreeError::UnknownDefault(default)),
            Some(true) => Err(TreeError::DefaultNotLeaf(default as usize)),
            Some(false) => Ok(default),
        }
    }

    /// Number of classes.
    pub fn len(&self) -> usize {
        self.parent.len()
    }

    pub fn is_empty(&self) -> bool {
        self.parent.is_empty()
    }

    /// Parent of class `c`.
    pub fn parent(&self, c: usize) -> Option<u32> {
        self.parent[c]
    }

    /// Depth of class `c` (0 for a root).
    pub fn depth(&self, c: usize) -> u32 {
        self.depth[c]
    }

    /// Whether class `c` has children.
    pub fn is_inner(&self, c: usize) -> bool {
        self.has_children[c]
    }

    /// Depth-first order, parents before children.
    pub fn order(&self) -> &[u32] {
        &self.order
    }

    /// Take the depth-first order (for a scheduler that keeps it).
    pub fn into_order(self) -> Vec<u32> {
        self.order
    }

    /// Height of each class: 0 for leaves, a parent one above its highest child (ALTQ's
    /// `depth_`, CBQ's `level`).
    pub fn heights(&self) -> Vec<u8> {
        let mut height = vec![0u8; self.len()];
        // Children come after their parent in `order`: walking it backwards sees every child
        // before its parent.
        for &c in self.order.iter().rev() {
            if let Some(p) = self.parent[c as usize] {
                let h = height[c as usize].saturating_add(1);
                let hp = &mut height[p as usize];
                *hp = (*hp).max(h);
            }
        }
        height
    }
}

/// Depth first, parents before children, siblings in index order, of a tree already checked
/// by [`ClassTree::new`] (for a scheduler that recomputes it when asked rather than keep it).
/// Parents out of range are taken as roots.
pub fn depth_first_order(parents: &[Option<ClassId>]) -> Vec<u32> {
    let n = parents.len();
    let mut children: Vec<Vec<u32>> = vec![Vec::new(); n];
    let mut roots = Vec::new();
    for (c, p) in parents.iter().enumerate() {
        match p {
            Some(p) if (*p as usize) < n => children[*p as usize].push(c as u32),
            _ => roots.push(c as u32),
        }
    }
    let mut order = Vec::with_capacity(n);
    let mut stack: Vec<u32> = roots.into_iter().rev().collect();
    while let Some(c) = stack.pop() {
        order.push(c);
        stack.extend(children[c as usize].iter().rev());
    }
    order
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIM: DepthLimits = DepthLimits { leaf: 7, inner: 6 };

    #[test]
    fn order_is_depth_first_whatever_the_declaration_order() {
        // root, A, B, a1 (child of A), b1 (child of B): declared breadth first.
        let t = ClassTree::new(&[None, Some(0), Some(0), Some(1), Some(2)], LIM).unwrap();
        assert_eq!(t.order(), &[0, 1, 3, 2, 4]);
        assert_eq!(t.heights(), vec![2, 1, 1, 0, 0]);
        assert_eq!((t.depth(4), t.parent(4)), (2, Some(2)));
        assert!(t.is_inner(1) && !t.is_inner(3));
    }

    #[test]
    fn rejects_unknown_parents_cycles_and_depth() {
        assert_eq!(
            ClassTree::new(&[None, Some(5)], LIM),
            Err(TreeError::UnknownParent {
                class: 1,
                parent: 5
            })
        );
        assert_eq!(
            ClassTree::new(&[None, Some(2), Some(1)], LIM),
            Err(TreeError::Cycle { class: 1 })
        );
        assert_eq!(
            ClassTree::new(&[Some(0)], LIM),
            Err(TreeError::Cycle { class: 0 })
        );
        // A chain of 8 classes: the leaf is at depth 7 (allowed), its parent at 6 (allowed).
        let chain: Vec<Option<u32>> = (0..8u32).map(|i| i.checked_sub(1)).collect();
        assert!(ClassTree::new(&chain, LIM).is_ok());
        // One more: the inner class at depth 7 is too deep.
        let chain: Vec<Option<u32>> = (0..9u32).map(|i| i.checked_sub(1)).collect();
        assert_eq!(
            ClassTree::new(&chain, LIM),
            Err(TreeError::TooDeep { class: 7 })
        );
    }
}

/// Classes matched by name between a scheduler and the one it replaces (`adopt`): for each old
/// class, its index in the new tree if the new tree has a class of that name; and the new
/// classes the old tree did not have, in index order. O(n) expected for `n` classes (one hash
/// map of the new names); a reload of a large policy must not cost O(n²) on the datapath.
pub(crate) fn match_names<'a>(
    old: impl Iterator<Item = &'a str>,
    new: impl Iterator<Item = &'a str>,
) -> (Vec<Option<ClassId>>, Vec<ClassId>) {
    let index: std::collections::HashMap<&str, ClassId> =
        new.enumerate().map(|(i, n)| (n, i as ClassId)).collect();
    let mut seen = vec![false; index.len()];
    let old_to_new: Vec<Option<ClassId>> = old
        .map(|n| {
            let id = index.get(n).copied();
            if let Some(i) = id {
                seen[i as usize] = true;
            }
            id
        })
        .collect();
    let added = (0..seen.len() as ClassId)
        .filter(|&i| !seen[i as usize])
        .collect();
    (old_to_new, added)
}

#[cfg(test)]
mod match_tests {
    use super::match_names;

    #[test]
    fn names_are_matched_and_new_ones_listed() {
        let old = ["root", "a", "b", "gone"];
        let new = ["root", "b", "a", "fresh"];
        let (map, added) = match_names(old.iter().copied(), new.iter().copied());
        assert_eq!(map, [Some(0), Some(2), Some(1), None]);
        assert_eq!(added, [3]);
    }
}
