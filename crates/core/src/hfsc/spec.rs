//! HFSC's description: the qdisc-wide choices ([`HfscParams`]), one class ([`HfscClassSpec`]) and
//! why a tree is refused ([`HfscError`]).
//!
//! Principles: every difference between Linux's `sch_hfsc.c` and OpenBSD's `hfsc.c` that changes
//! what users see is a named choice with Linux's behaviour as the default (docs/hfsc.md, "Choices
//! against Linux and OpenBSD"); the checks refuse what Linux refuses (an inner class without a
//! link-sharing curve — the CVE-2023-4623 fix —, an upper limit without a link-sharing curve, a
//! class without any curve), and nothing else: sums above the parent are the config's warnings,
//! as tc-hfsc(7) explains they are allowed.

use super::curve::ServiceCurve;
use crate::classify::ClassId;
use crate::leaf::LeafSpec;
use crate::packet::Packet;
use crate::qdisc::fifo::FifoLimit;
use crate::tree::TreeError;

/// Deepest tree accepted (levels counted from a top-level class), as CBQ's.
pub const MAX_DEPTH: usize = 16;

/// Default packet limit of a leaf's FIFO (Linux's `pfifo` default is the device's txqueuelen).
pub const DEFAULT_PFIFO_LIMIT: u32 = 1000;

/// Which virtual time the first child of a new parent backlog period starts from.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Hash)]
pub enum PeriodVt {
    /// Linux (since 2016): the largest `vt` a child of this parent had when it went passive
    /// (`cl_cvtoff`); virtual times only grow.
    #[default]
    Linux,
    /// OpenBSD / ALTQ: `vt` restarts at 0 in each parent period and every child's curve is
    /// shifted by the parent's largest `vt` of the last period (`cl_vtoff += cl_cvtmax`, applied
    /// lazily here so the cost stays O(1)).
    OpenBsd,
}

/// Qdisc-wide choices.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct HfscParams {
    /// OpenBSD's upper-limit catch-up (`cl_myfadj`): when a class's fit time `myf` lags the
    /// clock by more than this many ns, it is moved up to the clock so that a long-limited class
    /// cannot go greedy. `None` (Linux, where the code is under `#if 0` because classes stayed
    /// well under their limit at gigabit speed): no catch-up. ALTQ uses one clock tick.
    pub ul_catchup: Option<u64>,
    /// See [`PeriodVt`].
    pub period_vt: PeriodVt,
}

/// One class. Classes are given in a vector; a class's [`ClassId`] is its index there, and
/// `parent` refers to such an index (`None`: a top-level class, a child of the qdisc's root).
/// Classes with children are inner classes: their `leaf` and `rt` are ignored (real-time
/// service is given to leaves, as in Linux and OpenBSD).
#[derive(Debug)]
pub struct HfscClassSpec<P: Packet> {
    pub name: String,
    pub parent: Option<ClassId>,
    /// Real-time curve (`rt`): the service guaranteed to the leaf, by deadline.
    pub rt: Option<ServiceCurve>,
    /// Link-sharing curve (`ls`): the class's share of what its parent gets.
    pub ls: Option<ServiceCurve>,
    /// Upper-limit curve (`ul`): at most this much, whatever is left over.
    pub ul: Option<ServiceCurve>,
    pub leaf: LeafSpec<P>,
}

impl<P: Packet> HfscClassSpec<P> {
    /// A class with only a link-sharing curve and a FIFO leaf.
    pub fn new(name: &str, parent: Option<ClassId>, ls: ServiceCurve) -> Self {
        HfscClassSpec {
            name: name.to_string(),
            parent,
            rt: None,
            ls: Some(ls),
            ul: None,
            leaf: LeafSpec::Fifo(FifoLimit::Packets(DEFAULT_PFIFO_LIMIT)),
        }
    }
}

/// Why a tree was rejected.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum HfscError {
    #[error("no classes")]
    Empty,
    #[error("class `{class}`: parent index {parent} does not exist")]
    UnknownParent { class: String, parent: ClassId },
    #[error("class `{class}` is its own ancestor (cycle)")]
    Cycle { class: String },
    #[error("class `{class}`: tree deeper than {MAX_DEPTH} levels")]
    TooDeep { class: String },
    #[error("class `{class}` has children but no link-sharing curve (`ls` or `sc`)")]
    InnerWithoutLs { class: String },
    #[error("class `{class}` has an upper limit (`ul`) but no link-sharing curve")]
    UlWithoutLs { class: String },
    #[error("class `{class}` has no curve: give it `rt`, `ls` or `sc`")]
    NoCurve { class: String },
    #[error("default class index {0} does not exist")]
    UnknownDefault(ClassId),
    #[error("default class `{0}` is not a leaf")]
    DefaultNotLeaf(String),
    #[error("a filter sends packets to class `{0}`, which is not a leaf")]
    FilterToInner(String),
    #[error("a filter sends packets to class index {0}, which does not exist")]
    FilterToUnknown(ClassId),
}

impl HfscError {
    /// The error for a tree of the wrong shape, naming classes with `name(index)`.
    pub fn from_tree(e: TreeError, name: impl Fn(usize) -> String) -> Self {
        match e {
            TreeError::UnknownParent { class, parent } => HfscError::UnknownParent {
                class: name(class),
                parent,
            },
            TreeError::Cycle { class } => HfscError::Cycle { class: name(class) },
            TreeError::TooDeep { class } => HfscError::TooDeep { class: name(class) },
            TreeError::FilterToUnknown(c) => HfscError::FilterToUnknown(c),
            TreeError::FilterToInner(c) => HfscError::FilterToInner(name(c)),
            TreeError::UnknownDefault(c) => HfscError::UnknownDefault(c),
            TreeError::DefaultNotLeaf(c) => HfscError::DefaultNotLeaf(name(c)),
        }
    }
}
