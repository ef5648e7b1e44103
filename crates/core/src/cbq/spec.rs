//! How a CBQ tree is described to [`super::Cbq::new`]: qdisc-wide parameters with their
//! compatibility switches, class specs, and the errors a tree is rejected with.

use crate::classify::ClassId;
use crate::packet::Packet;
use crate::qdisc::fifo::{FifoLimit, DEFAULT_PFIFO_LIMIT};
use crate::qdisc::leaf::LeafSpec;
use crate::tree::TreeError;
use crate::units::{Duration, Rate};

/// Number of priorities (0 is served first).
pub const NUM_PRIO: usize = 8;
/// Maximum tree depth (ALTQ allows 32; 16 levels are plenty and keep per-packet walks short).
pub const MAX_DEPTH: usize = 16;
/// Default MTU (Ethernet).
pub const DEFAULT_MTU: u32 = 1500;
/// ALTQ's default `maxburst` (packets), seed 000 "Bandwidth Allocation".
pub const DEFAULT_MAXBURST: u32 = 16;
/// ALTQ's `maxburst` when a class's packet time is very long (`cptime` > 10 ms).
pub const SLOW_CLASS_MAXBURST: u32 = 4;
/// ALTQ's default `minburst` (packets).
pub const DEFAULT_MINBURST: u32 = 2;
/// Largest accepted `maxburst` (the derivation computes (32/31)^maxburst).
pub const MAX_BURST: u32 = 1024;
/// ALTQ's minimum suspension in timer ticks (seed 001 §6.1.1, Figure 19).
pub const ALTQ_MIN_SUSPEND_TICKS: u32 = 2;
/// The timer rate of the kernels ALTQ ran on by default (seed 001 §6.1.1: "the default value for
/// the clock rate is 100 Hertz").
pub const ALTQ_TIMER_HZ: u32 = 100;

/// The general scheduler: who sends among classes allowed to send (seed 001 §2.1). A policy
/// names it `scheduler = "prr" | "wrr"` ([`Scheduler::name`]).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Hash)]
pub enum Scheduler {
    /// Packet-by-packet round robin inside a priority, strict priority between priorities. The
    /// default.
    #[default]
    Prr,
    /// Weighted round robin inside a priority (ALTQ's allotment, see [`super::wrr_allotments`]),
    /// strict priority between priorities.
    Wrr,
}

/// The link-sharing guideline: when an overlimit class may borrow (Floyd & Jacobson 1995 §3–4).
/// A policy names it `guideline = "formal" | "ancestor-only" | "top-level"`.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Hash)]
pub enum Guideline {
    /// Formal link-sharing: an overlimit class may borrow from its nearest underlimit ancestor at
    /// level `i` if no class at a level below `i` is unsatisfied. The default.
    #[default]
    Formal,
    /// Ancestors-only: an overlimit class may borrow from any underlimit ancestor.
    AncestorOnly,
    /// Top-level: ancestors-only, up to the cutoff level `N` set by ALTQ's four-rule heuristic
    /// (seed 001 §2.1).
    TopLevel,
}

/// Which clock the suspension time (`undertime`) is computed from (seed 001 §6, Figure 17). A
/// policy names it `undertime_clock = "actual" | "expected"`.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Hash)]
pub enum UndertimeClock {
    /// The expected finish time of the packet on the link (`ifd->ifnow_`), as ALTQ 1.1.3 did.
    Expected,
    /// The actual time the packet left the scheduler (`ifd->now_[]`), as the CBQ paper, ns-2 and
    /// the modified kernel of seed 001 do. The default.
    #[default]
    Actual,
}

/// What the estimator and `offtime` count (seed 001 §6.3, Figure 22). A policy names it
/// `offtime_unit = "bytes" | "packets"`.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Hash)]
pub enum OfftimeUnit {
    /// ALTQ: one EWMA step per packet and a fixed `offtime`, both sized for `avgpkt`; throughput
    /// depends on how far real packets are from `avgpkt`.
    Packets,
    /// Byte-weighted: a packet of `len` bytes counts `len/avgpkt` EWMA steps and earns an
    /// `offtime × len/avgpkt` suspension; throughput no longer depends on the packet size. The
    /// default.
    #[default]
    Bytes,
}

/// Each option's values and the names a policy writes them with, in one table per type: the
/// config reads them, renders them and documents them from here.
macro_rules! named_values {
    ($($ty:ident { $($variant:ident = $name:literal),+ $(,)? })+) => {$(
        impl $ty {
            /// Every value with its name, in the order the docs list them.
            pub const NAMED: &'static [(&'static str, $ty)] = &[$(($name, $ty::$variant)),+];

            /// The name a policy file writes.
            pub fn name(self) -> &'static str {
                match self {
                    $($ty::$variant => $name),+
                }
            }
        }
    )+};
}

named_values! {
    Scheduler { Prr = "prr", Wrr = "wrr" }
    Guideline { Formal = "formal", AncestorOnly = "ancestor-only", TopLevel = "top-level" }
    UndertimeClock { Actual = "actual", Expected = "expected" }
    OfftimeUnit { Bytes = "bytes", Packets = "packets" }
}

/// Qdisc-wide parameters.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct CbqParams {
    /// Link rate: the estimator's model of the output link (`ifnow`), and the base of `share`.
    pub link: Rate,
    pub scheduler: Scheduler,
    pub guideline: Guideline,
    /// Work-conserving when every class is overlimit: the first overlimit class allowed to
    /// borrow sends anyway (seed 001 §2.1 and §6.1).
    pub efficient: bool,
    /// Largest packet: WRR round size and the default `avgpkt`, `minidle`.
    pub mtu: u32,
    pub undertime_clock: UndertimeClock,
    pub offtime_unit: OfftimeUnit,
    /// The driver's timer rate; only used for the minimum suspension. 0 = exact timer.
    pub timer_hz: u32,
    /// With `timer_hz > 0`: a suspension lasts at least this many ticks (ALTQ: 2, seed 001
    /// §6.1.1). 0 = off.
    pub min_suspend_ticks: u32,
    /// ALTQ's `maxiftime`: when the link model `ifnow` runs more than 16 MTU-times ahead of the
    /// dequeue time, pull it back to `now + 16 MTU-times` (`rmc_update_class_util`). Behind a
    /// driver buffer larger than 16 MTUs the pull-back shortens the root's gaps below its packet
    /// times, the root looks overlimit and a borrowing class is suspended while the link is not
    /// full (seed 001 §6.1). Off: `ifnow` is the exact finish time of a FIFO draining at `link`.
    pub clamp_ifnow: bool,
    /// Where ALTQ's derived `offtime` runs away (a `minburst` above about 41: it grows as
    /// `(32/31)^minburst` and, in the hundreds, suspends a class that went overlimit for
    /// years), use its first-order term, about `minburst · cptime`
    /// ([`super::estimator::offtime_first_order`]). Off: ALTQ's formula as it stands
    /// (saturated, never wrapped). An explicit `offtime` is kept either way.
    pub bound_offtime: bool,
}

impl CbqParams {
    /// The fixed behaviour: actual clock, byte-based regulator, no minimum suspension, PRR,
    /// formal guidelines.
    pub fn new(link: Rate) -> Self {
        CbqParams {
            link,
            scheduler: Scheduler::Prr,
            guideline: Guideline::Formal,
            efficient: false,
            mtu: DEFAULT_MTU,
            undertime_clock: UndertimeClock::Actual,
            offtime_unit: OfftimeUnit::Bytes,
            timer_hz: 0,
            min_suspend_ticks: 0,
            clamp_ifnow: false,
            bound_offtime: true,
        }
    }

    /// Every ALTQ behaviour at once: WRR, top-level link sharing with ALTQ's heuristic (seed 001
    /// §2.1), expected-finish-time undertime (§6), offtime in packets (§6.3), two-tick minimum
    /// suspension at `timer_hz` (§6.1.1; ALTQ's default kernel ran at 100 Hz), the `ifnow` clamp (§6.1).
    pub fn altq_compat(link: Rate, timer_hz: u32) -> Self {
        CbqParams {
            link,
            scheduler: Scheduler::Wrr,
            guideline: Guideline::TopLevel,
            efficient: false,
            mtu: DEFAULT_MTU,
            undertime_clock: UndertimeClock::Expected,
            offtime_unit: OfftimeUnit::Packets,
            timer_hz,
            min_suspend_ticks: ALTQ_MIN_SUSPEND_TICKS,
            clamp_ifnow: true,
            bound_offtime: false,
        }
    }

    /// Length of one timer tick in ns (0 for an exact timer).
    pub fn tick_ns(&self) -> u64 {
        if self.timer_hz == 0 {
            0
        } else {
            1_000_000_000 / self.timer_hz as u64
        }
    }
}

/// A class's own knobs: its borrowing, its bursts and the overrides of its derived estimator
/// parameters. The one definition of CBQ's per-class keys: a policy file writes them by these
/// names (`linkshare_config` reads them into this struct), the checks and the build read them
/// from here.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct CbqClassOptions {
    /// May borrow from the parent when overlimit.
    pub borrow: bool,
    /// Packets (of `avgpkt` bytes) the class may send back to back after being idle; 0 lets
    /// the derivation pick ALTQ's default ([`super::derive`]).
    pub maxburst: u32,
    /// Packets the class may send back to back after a suspension (sizes `offtime`).
    pub minburst: u32,
    /// Average packet size in bytes used by the derivations; ALTQ's default is the MTU.
    pub avgpkt: u32,
    /// Overrides of the derived estimator parameters.
    pub maxidle: Option<Duration>,
    /// Stored as a magnitude; the bound is `-minidle`.
    pub minidle: Option<Duration>,
    pub offtime: Option<Duration>,
    /// Added to every suspension (ns-2's `extradelay`).
    pub extradelay: Duration,
}

impl CbqClassOptions {
    /// ALTQ's defaults for a qdisc of this `mtu`: no borrowing, `maxburst` from the
    /// derivation, [`DEFAULT_MINBURST`], `avgpkt` the mtu, nothing overridden.
    pub fn new(mtu: u32) -> Self {
        CbqClassOptions {
            borrow: false,
            maxburst: 0,
            minburst: DEFAULT_MINBURST,
            avgpkt: mtu,
            maxidle: None,
            minidle: None,
            offtime: None,
            extradelay: Duration::ZERO,
        }
    }
}

/// One class. Classes are given in a vector; a class's [`ClassId`] is its index there, and
/// `parent` refers to such an index. Classes with children are inner classes and their `leaf` is
/// ignored.
#[derive(Debug)]
pub struct CbqClassSpec<P: Packet> {
    pub name: String,
    pub parent: Option<ClassId>,
    /// Allocation (the policy's `share` is resolved to a rate by the config).
    pub rate: Rate,
    /// 0..=7, 0 first (ALTQ's reversed scale is mapped on import).
    pub prio: u8,
    /// Borrowing, bursts and estimator overrides.
    pub options: CbqClassOptions,
    pub leaf: LeafSpec<P>,
}

impl<P: Packet> CbqClassSpec<P> {
    /// A class with ALTQ's defaults for everything but the allocation.
    pub fn new(name: &str, parent: Option<ClassId>, rate: Rate, params: &CbqParams) -> Self {
        CbqClassSpec {
            name: name.to_string(),
            parent,
            rate,
            prio: 0,
            options: CbqClassOptions::new(params.mtu),
            leaf: LeafSpec::Fifo(FifoLimit::Packets(DEFAULT_PFIFO_LIMIT)),
        }
    }
}

/// Why a tree was rejected.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CbqError {
    #[error("no classes")]
    Empty,
    #[error("link rate is zero")]
    ZeroLink,
    #[error("mtu {0} is out of range (64..=65535)")]
    BadMtu(u32),
    #[error("class `{class}`: parent index {parent} does not exist")]
    UnknownParent { class: String, parent: ClassId },
    #[error("class `{class}` is its own ancestor (cycle)")]
    Cycle { class: String },
    #[error("class `{class}`: tree deeper than {MAX_DEPTH} levels")]
    TooDeep { class: String },
    #[error("class `{class}`: prio {prio} is above 7")]
    BadPrio { class: String, prio: u8 },
    #[error("class `{class}`: rate is zero")]
    ZeroRate { class: String },
    #[error("class `{class}`: rate {rate} is above the link rate {link}")]
    AboveLink {
        class: String,
        rate: Rate,
        link: Rate,
    },
    #[error("class `{class}`: children's allocations sum to {sum}, above its rate {rate}")]
    ChildrenAboveParent {
        class: String,
        sum: Rate,
        rate: Rate,
    },
    #[error("class `{class}`: avgpkt must be 1..=mtu ({mtu}), got {avgpkt}")]
    BadAvgpkt {
        class: String,
        avgpkt: u32,
        mtu: u32,
    },
    #[error("class `{class}`: maxburst {maxburst} is above {MAX_BURST}")]
    BadMaxburst { class: String, maxburst: u32 },
    #[error("class `{class}`: minburst must be at least 1")]
    BadMinburst { class: String },
    #[error("default class index {0} does not exist")]
    UnknownDefault(ClassId),
    #[error("default class `{0}` is not a leaf")]
    DefaultNotLeaf(String),
    #[error("a filter sends packets to class `{0}`, which is not a leaf")]
    FilterToInner(String),
    #[error("a filter sends packets to class index {0}, which does not exist")]
    FilterToUnknown(ClassId),
}

impl CbqError {
    /// The error for a tree of the wrong shape, naming classes with `name(index)`.
    pub fn from_tree(e: TreeError, name: impl Fn(usize) -> String) -> Self {
        match e {
            TreeError::UnknownParent { class, parent } => CbqError::UnknownParent {
                class: name(class),
                parent,
            },
            TreeError::Cycle { class } => CbqError::Cycle { class: name(class) },
            TreeError::TooDeep { class } => CbqError::TooDeep { class: name(class) },
            TreeError::FilterToUnknown(c) => CbqError::FilterToUnknown(c),
            TreeError::FilterToInner(c) => CbqError::FilterToInner(name(c)),
            TreeError::UnknownDefault(c) => CbqError::UnknownDefault(c),
            TreeError::DefaultNotLeaf(c) => CbqError::DefaultNotLeaf(name(c)),
        }
    }
}
