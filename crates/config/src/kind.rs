//! The root scheduler a policy names (`qdisc = "…"`): the classful kinds by their names, then
//! the leaf disciplines a root may be without classes.
//!
//! Principles: a kind's name is written once, in [`QdiscKind::KNOWN`] (classful) or
//! [`crate::LeafKind::KNOWN`] (leaves); reading, suggesting and rendering names all go through
//! these tables, so a new kind is one variant, one table row and its arms in the validator and
//! in [`crate::Policy::build_on`].

use crate::LeafKind;

/// The root scheduler of a policy (`qdisc = "..."`).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum QdiscKind {
    /// Hierarchical Token Bucket.
    Htb,
    /// Class-Based Queueing (Floyd & Jacobson), with ALTQ's options: see [`crate::CbqOptions`].
    Cbq,
    /// Hierarchical Fair Service Curve (Stoica, Zhang & Ng): see [`crate::HfscClass`], [`crate::HfscCompat`].
    Hfsc,
    /// Deficit round robin over flat classes, each with a `quantum` and a leaf
    /// (`qdisc = "drr"` with `[[class]]`; without classes `"drr"` is the flow-hash leaf).
    Drr,
    /// A single discipline without classes (`qdisc = "sfq"`): see [`crate::Policy::root_leaf`].
    Leaf,
}

impl QdiscKind {
    /// Every kind, by the name written in policy files.
    pub const KNOWN: &'static [(&'static str, QdiscKind)] = &[
        ("htb", QdiscKind::Htb),
        ("cbq", QdiscKind::Cbq),
        ("hfsc", QdiscKind::Hfsc),
    ];

    pub fn from_name(name: &str) -> Option<QdiscKind> {
        let n = name.trim().to_ascii_lowercase();
        Self::KNOWN.iter().find(|(k, _)| *k == n).map(|(_, q)| *q)
    }

    /// The name of a classful kind; `"leaf"` for [`QdiscKind::Leaf`] (see [`crate::Policy::kind_name`]).
    pub fn name(self) -> &'static str {
        match self {
            QdiscKind::Htb => "htb",
            QdiscKind::Cbq => "cbq",
            QdiscKind::Hfsc => "hfsc",
            QdiscKind::Drr => "drr",
            QdiscKind::Leaf => "leaf",
        }
    }

    /// Every name `qdisc =` accepts: the classful kinds, then the leaf disciplines.
    pub(crate) fn all_names() -> impl Iterator<Item = &'static str> {
        Self::KNOWN
            .iter()
            .map(|(n, _)| *n)
            .chain(LeafKind::KNOWN.iter().copied())
    }

    pub(crate) fn known_list() -> String {
        Self::all_names().collect::<Vec<_>>().join(", ")
    }
}
