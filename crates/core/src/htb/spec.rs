//! How an HTB tree is described to [`super::Htb::new`], and the defaults for burst and quantum.

use crate::classify::ClassId;
use crate::packet::Packet;
use crate::qdisc::fifo::FifoLimit;
use crate::qdisc::leaf::LeafSpec;
use crate::tree::TreeError;
use crate::units::{Rate, NS_PER_SEC};

/// Number of priorities (0 is served first).
pub const NUM_PRIO: usize = 8;
/// Maximum tree depth (levels 0..MAX_DEPTH). Linux HTB allows 8.
pub const MAX_DEPTH: usize = 8;
/// Default rate-to-quantum divisor (tc's `r2q`).
pub const DEFAULT_R2Q: u32 = 10;
/// Default MTU used to size bursts.
pub const DEFAULT_MTU: u32 = 1500;
/// The driver tick the default burst covers: any wake-up rate of at least 1000 Hz.
pub const DEFAULT_BURST_TICK_NS: u64 = 1_000_000;
/// Quantum bounds outside which tc warns (and clamps).
pub const MIN_QUANTUM: u32 = 1000;
pub const MAX_QUANTUM: u32 = 200_000;
/// The largest `quantum` a class may have (16 MiB, as DRR's): DRR deficits are 32-bit and a
/// deficit moves by at most one quantum plus one packet, so it can never overflow.
pub const QUANTUM_LIMIT: u32 = 1 << 24;
/// The largest `burst`/`cburst` (256 MiB): a bucket of tokens in nano-bits (8·10⁹ per byte) must
/// fit a quarter of an `i64`, the headroom that keeps charging and refilling free of overflow
/// (about 288 MB); the limit is that, rounded down to a round size.
pub const BURST_LIMIT: u32 = 256 << 20;

/// Qdisc-wide parameters.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct HtbParams {
    /// Divisor for the default quantum: `quantum = rate_bytes_per_s / r2q`.
    pub r2q: u32,
    /// Largest packet expected; used for default bursts and checks.
    pub mtu: u32,
}

impl Default for HtbParams {
    fn default() -> Self {
        HtbParams {
            r2q: DEFAULT_R2Q,
            mtu: DEFAULT_MTU,
        }
    }
}

/// One class. Classes are given in a vector; a class's [`ClassId`] is its index there, and
/// `parent` refers to such an index. Classes with children are inner classes and their `leaf` is
/// ignored.
#[derive(Debug)]
pub struct HtbClassSpec<P: Packet> {
    pub name: String,
    pub parent: Option<ClassId>,
    /// Guaranteed rate.
    pub rate: Rate,
    /// Upper limit when borrowing (≥ rate).
    pub ceil: Rate,
    /// Bytes that may be sent at once above `rate` after idling (bucket size).
    pub burst: u32,
    /// Bytes that may be sent at once above `ceil`.
    pub cburst: u32,
    /// 0..=7, 0 first.
    pub prio: u8,
    /// DRR quantum in bytes for sharing spare bandwidth among classes of equal priority.
    pub quantum: u32,
    pub leaf: LeafSpec<P>,
}

impl<P: Packet> HtbClassSpec<P> {
    /// A class with tc's defaults for everything but the rates.
    pub fn new(
        name: &str,
        parent: Option<ClassId>,
        rate: Rate,
        ceil: Rate,
        params: &HtbParams,
    ) -> Self {
        HtbClassSpec {
            name: name.to_string(),
            parent,
            rate,
            ceil,
            burst: default_burst(rate, params.mtu),
            cburst: default_burst(ceil, params.mtu),
            prio: 0,
            quantum: default_quantum(rate, params.r2q).0,
            leaf: LeafSpec::Fifo(FifoLimit::Packets(crate::qdisc::fifo::DEFAULT_PFIFO_LIMIT)),
        }
    }
}

impl<P: Packet> HtbClassSpec<P> {
    /// The checks on one class's own parameters (the tree's shape is checked by
    /// [`crate::tree::ClassTree`]).
    pub fn validate(&self) -> Result<(), HtbError> {
        let class = || self.name.clone();
        if self.prio as usize >= NUM_PRIO {
            return Err(HtbError::BadPrio {
                class: class(),
                prio: self.prio,
            });
        }
        check_rates(
            &class,
            self.rate,
            self.ceil,
            self.quantum,
            self.burst,
            self.cburst,
        )
    }
}

/// The checks on a class's rates, quantum and bursts, for a new class
/// ([`HtbClassSpec::validate`]) and for new parameters of a running one (`Htb::retune`).
pub(super) fn check_rates(
    class: &dyn Fn() -> String,
    rate: Rate,
    ceil: Rate,
    quantum: u32,
    burst: u32,
    cburst: u32,
) -> Result<(), HtbError> {
    if rate.0 == 0 {
        return Err(HtbError::ZeroRate { class: class() });
    }
    if ceil < rate {
        return Err(HtbError::CeilBelowRate {
            class: class(),
            rate,
            ceil,
        });
    }
    if quantum == 0 {
        return Err(HtbError::ZeroQuantum { class: class() });
    }
    if quantum > QUANTUM_LIMIT {
        return Err(HtbError::QuantumTooLarge {
            class: class(),
            quantum,
        });
    }
    for (key, bytes) in [("burst", burst), ("cburst", cburst)] {
        if bytes > BURST_LIMIT {
            return Err(HtbError::BurstTooLarge {
                class: class(),
                key,
                bytes,
            });
        }
    }
    Ok(())
}

/// Default burst for a rate: what the rate sends in one millisecond plus one MTU.
///
/// Why: tokens are kept exactly (integer nano-bits, no rate tables), so the only way a class can
/// lose rate is when its bucket overflows while it waits to be served. A throttled class is woken
/// at the instant its tokens reach zero, rounded up to the driver's tick; while it waits for that
/// tick it gains at most `rate × tick` bytes of tokens. If the bucket holds that much, nothing is
/// clipped and the long-run rate is exact whatever the packet size. One millisecond covers every
/// tick rate of at least 1000 Hz; the MTU term lets a full packet go as soon as the class has
/// been idle for one packet time, as tc's `rate/HZ + mtu` does. Capped at [`BURST_LIMIT`] (reached
/// only above 2 Tbit/s).
pub fn default_burst(rate: Rate, mtu: u32) -> u32 {
    let tick_bytes =
        (rate.0 as u128 * DEFAULT_BURST_TICK_NS as u128).div_ceil(8 * NS_PER_SEC as u128);
    (tick_bytes + mtu as u128).min(BURST_LIMIT as u128) as u32
}

/// Why a default quantum was adjusted, in the words a user can act on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum QuantumWarning {
    Small { computed: u64 },
    Big { computed: u64 },
}

/// tc's default quantum `rate_bytes / r2q`, clamped to [1000, 200000] with a warning.
pub fn default_quantum(rate: Rate, r2q: u32) -> (u32, Option<QuantumWarning>) {
    let computed = rate.bytes_per_sec() / r2q.max(1) as u64;
    if computed < MIN_QUANTUM as u64 {
        (MIN_QUANTUM, Some(QuantumWarning::Small { computed }))
    } else if computed > MAX_QUANTUM as u64 {
        (MAX_QUANTUM, Some(QuantumWarning::Big { computed }))
    } else {
        (computed as u32, None)
    }
}

/// Why a tree was rejected.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum HtbError {
    #[error("no classes")]
    Empty,
    #[error("no class with index {0}")]
    UnknownClass(ClassId),
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
    #[error("class `{class}`: ceil {ceil} is below rate {rate}")]
    CeilBelowRate {
        class: String,
        rate: Rate,
        ceil: Rate,
    },
    #[error("class `{class}`: quantum is zero")]
    ZeroQuantum { class: String },
    #[error("class `{class}`: quantum {quantum} bytes is above the limit of {QUANTUM_LIMIT}")]
    QuantumTooLarge { class: String, quantum: u32 },
    #[error("class `{class}`: {key} {bytes} bytes is above the limit of {BURST_LIMIT}")]
    BurstTooLarge {
        class: String,
        key: &'static str,
        bytes: u32,
    },
    #[error("default class index {0} does not exist")]
    UnknownDefault(ClassId),
    #[error("default class `{0}` is not a leaf")]
    DefaultNotLeaf(String),
    #[error("a filter sends packets to class `{0}`, which is not a leaf")]
    FilterToInner(String),
    #[error("a filter sends packets to class index {0}, which does not exist")]
    FilterToUnknown(ClassId),
    #[error(
        "class `{class}`: its parent `{parent}` is a leaf, which cannot take a child in place"
    )]
    ParentIsLeaf { class: String, parent: String },
    #[error("class `{0}` is the default class: make another class the default first")]
    RemoveDefault(String),
    #[error("class `{0}` has children: remove them first")]
    HasChildren(String),
}

impl HtbError {
    /// The error for a tree of the wrong shape, naming classes with `name(index)`.
    pub fn from_tree(e: TreeError, name: impl Fn(usize) -> String) -> Self {
        match e {
            TreeError::UnknownParent { class, parent } => HtbError::UnknownParent {
                class: name(class),
                parent,
            },
            TreeError::Cycle { class } => HtbError::Cycle { class: name(class) },
            TreeError::TooDeep { class } => HtbError::TooDeep { class: name(class) },
            TreeError::FilterToUnknown(c) => HtbError::FilterToUnknown(c),
            TreeError::FilterToInner(c) => HtbError::FilterToInner(name(c)),
            TreeError::UnknownDefault(c) => HtbError::UnknownDefault(c),
            TreeError::DefaultNotLeaf(c) => HtbError::DefaultNotLeaf(name(c)),
        }
    }
}
