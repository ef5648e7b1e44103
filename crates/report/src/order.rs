//! Stable orders for classes: the class tree depth-first, siblings by name.

use std::collections::{BTreeMap, BTreeSet};

use crate::model::Summary;

/// Every class of `summary` with its depth in the tree, parents before their children, siblings
/// sorted by name. A class whose parent is unknown (or part of a cycle) is treated as a root, so
/// every class appears exactly once.
pub fn class_tree(summary: &Summary) -> Vec<(String, usize)> {
    let mut children: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    let mut roots: Vec<&str> = Vec::new();
    for (name, class) in &summary.classes {
        match class.parent.as_deref() {
            Some(p) if p != name && summary.classes.contains_key(p) => {
                children.entry(p).or_default().push(name)
            }
            _ => roots.push(name),
        }
    }
    let mut out = Vec::with_capacity(summary.classes.len());
    let mut seen: BTreeSet<&str> = BTreeSet::new();
    // Explicit stack (reversed so the first name pops first); no recursion on user data.
    let mut stack: Vec<(&str, usize)> = roots.iter().rev().map(|r| (*r, 0)).collect();
    loop {
        while let Some((name, depth)) = stack.pop() {
            if !seen.insert(name) {
                continue;
            }
            out.push((name.to_string(), depth));
            if let Some(kids) = children.get(name) {
                stack.extend(kids.iter().rev().map(|k| (*k, depth + 1)));
            }
        }
        // Classes only reachable through a cycle: start again from the first one left.
        match summary.classes.keys().find(|k| !seen.contains(k.as_str())) {
            Some(k) => stack.push((k.as_str(), 0)),
            None => break,
        }
    }
    out
}

/// Names of classes that are some other class's parent.
pub fn inner_classes(summary: &Summary) -> BTreeSet<String> {
    summary
        .classes
        .iter()
        .filter_map(|(name, c)| c.parent.clone().filter(|p| p != name))
        .filter(|p| summary.classes.contains_key(p))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ClassSummary;

    fn class(parent: Option<&str>) -> ClassSummary {
        ClassSummary {
            parent: parent.map(str::to_string),
            ..Default::default()
        }
    }

    #[test]
    fn depth_first_with_sorted_siblings() {
        let mut s = Summary::default();
        s.classes.insert("root".into(), class(None));
        s.classes.insert("web".into(), class(Some("root")));
        s.classes.insert("bulk".into(), class(Some("root")));
        s.classes.insert("bulk.a".into(), class(Some("bulk")));
        s.classes.insert("orphan".into(), class(Some("nowhere")));
        s.classes.insert("x".into(), class(Some("y")));
        s.classes.insert("y".into(), class(Some("x")));
        let t = class_tree(&s);
        let names: Vec<&str> = t.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["orphan", "root", "bulk", "bulk.a", "web", "x", "y"]);
        assert_eq!(t[3].1, 2);
        assert_eq!(
            inner_classes(&s).into_iter().collect::<Vec<_>>(),
            ["bulk", "root", "x", "y"]
        );
    }
}
