//! A sharded HTB: the class tree cut below the root into N shards, each a plain [`Htb`](crate::htb::Htb) that one
//! thread owns, the root's rate shared between them by lock-free token exchange.
//!
//! ## What it promises
//! One HTB serialises every packet through one structure (Linux: one qdisc lock per device; seed
//! 004 measured 8 CPUs slower than 4 behind it). Here the **top-level subtrees** (the children of
//! the root; each subscriber or customer is usually one) are placed on shards
//! ([`Placement`]: by a hash of the subtree's name, round robin, or an explicit list), and a shard
//! is an ordinary [`Htb`](crate::htb::Htb) holding its subtrees under a local copy of the root. Inside a shard
//! everything is HTB as in [`crate::htb`]: rates, ceils, priorities, quanta, exact accounting.
//! A classifier step maps a class of the whole tree to `(shard, class in the shard)`
//! ([`ShardMap`]), so a driver steers each packet to the thread that owns its class.
//!
//! What the shards share is the **root's rate `R`**. Each shard `s` has a [`Gate`]: before its HTB
//! may send, the gate must hold tokens, and every packet sent is charged to it. Gates mint tokens
//! at `ρ_s`, the shard's guarantee plus an equal part of the spare:
//! `ρ_s = g_s + (R − Σ g)/N` with `g_s` the sum of the rates of the shard's top-level classes
//! (if those rates add up to more than `R`, `ρ_s = R·g_s/Σ g`), the integer remainder going to
//! shard 0, so `Σ ρ_s = R` exactly. A gate keeps at most one **lease** of `Q` bytes; what it
//! mints beyond goes to the root's [`SharedPool`] (an atomic counter behind an `Arc`, capped at
//! `P` bytes), and a gate that runs dry takes up to `Q` back from it in one compare-and-swap loop.
//! So a shard whose subtrees are idle hands its rate to the busy ones, and a lone busy shard can
//! use all of `R`. The state machine stays pure: `now` is an argument of every call, the pool is
//! the only shared (atomic) state, and each [`Shard`] is `Send`.
//!
//! ## The error bound
//! Notation, in bytes and seconds: `R` the root's rate, `N` shards, `ρ_s` their shares
//! (`Σ ρ_s = R`), `Q` the lease, `P` the pool's cap, `L` the largest packet, `T` the longest time
//! a shard goes unpolled (its gate mints lazily, when polled; `T = 0` in the simulator, where
//! [`ShardedHtb`] polls every shard at every dequeue), `C(Δ)` the bytes the pool's cap cut off
//! during the interval (counted: [`SharedPool::clipped`]).
//!
//! Tokens are created only by minting (`R·Δ` over any interval, up to the lag `R·T`), and sit
//! either in the pool (`0 ≤ p ≤ P`) or in a gate (`−L < g ≤ Q` between calls: a gate sends only
//! while it holds tokens, one packet of at most `L` at a time, and keeps at most `Q` after a
//! refill). Bytes sent are tokens charged, so over any interval `Δ`
//! `sent = minted − C − (stored at the end − stored at the start)`, with stored in
//! `(−N·L, P + N·Q]`. Hence, **for the aggregate over any interval `Δ`**:
//!
//! ```text
//!     sent(Δ) ≤ R·(Δ + T) + P + N·(Q + L)                         (never more, whatever the load)
//!     sent(Δ) ≥ R·(Δ − T) − P − N·(Q + L) − C(Δ)                  (when every shard stays backlogged
//!                                                                  and is served whenever its gate
//!                                                                  is open)
//! ```
//!
//! **For one shard** that stays backlogged and is served whenever its gate is open, nothing it
//! mints is deposited except above `Q`, which it reaches only when it is not served, so
//! `sent_s(Δ) ≥ ρ_s·(Δ − T) − (Q + L)`; its upper bound follows from the aggregate's minus the
//! other shards' lower bounds: `sent_s(Δ) ≤ ρ_s·Δ + R·T + P + (2N − 1)·(Q + L)` when all are
//! backlogged. With the defaults (`Q = 4 × MTU`, `P` = the root's `cburst`) and a 10 Mbit/s root
//! over 10 s, two shards: `P + N(Q + L) = 2,750 + 2 × 7,500 = 17,750` bytes, 0.14 % of the
//! 12.5 MB sent. The simulator's tests check these bounds.
//!
//! Sizing: an idle shard deposits what it minted since its last poll at once, so `P` should hold
//! `R·T` or the cap clips it (`C`, counted) and a busy shard borrows less than the whole root.
//! The default `P`, the root's `cburst`, is at least 1 ms of `R` ([`crate::htb::default_burst`]):
//! drivers poll idle shards at least every millisecond (the router: `GATE_TICK_NS` in
//! router/src/run.rs; the simulator polls every shard at every dequeue).
//!
//! ## Differences from one HTB, on purpose
//! * Spare bandwidth is split between **shards** equally (through `ρ_s`) and then by whoever
//!   takes the pool's leases first, not by the top-level classes' quanta; priorities do not
//!   reach across shards (a prio 0 class in one shard does not pre-empt borrowing in another).
//!   Inside a shard, HTB's rules hold unchanged.
//! * Only the root is shared (the cut is right below it): a deeper shared ancestor would need a
//!   gate per ancestor on each packet's path. Subtrees are never split, so an ancestor below the
//!   root always lives in one shard, whole.
//! * A policy without one root (several top-level classes, each its own root) has nothing to
//!   share: its shards have no gate.
//!
//! Sources: Linux net/sched/sch_htb.c (the per-shard HTB), the token-bucket exchange follows the
//! per-CPU quota scheme of Linux's CFS bandwidth control (kernel/sched/fair.c,
//! `__assign_cfs_rq_runtime`: each CPU takes a slice from a global pool refilled per period, and
//! returns what it did not use), with the period replaced by continuous exact minting.
//!
//! ## Layout
//! `pool` (the atomic pool and the gates), `plan` (cutting a tree into shards), `worker` (one
//! shard: an HTB behind a gate), `sharded` (all shards in one thread, in a fixed order: the
//! deterministic form the simulator runs).

mod plan;
mod pool;
mod sharded;
mod worker;

pub use plan::{split, ShardMap, ShardPlan};
pub use pool::{Gate, GateStats, SharedPool};
pub use sharded::ShardedHtb;
pub use worker::Shard;

use crate::htb::{HtbError, DEFAULT_MTU};

/// Where each top-level subtree goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Placement {
    /// Shard `fnv1a(name) mod N`: stable when subtrees are added, removed or reordered.
    Hash,
    /// Shard `i mod N` for the `i`-th top-level subtree (in class order): balanced counts.
    RoundRobin,
    /// Each top-level class by name; every top-level class must be listed.
    Explicit(Vec<(String, usize)>),
    /// The shard of each class of the whole tree, by class id (only the top-level classes'
    /// entries are read): a driver's own rule, e.g. the router's placement of subscribers by
    /// address. A top-level class whose entry is `u16::MAX`, or beyond the list, goes by
    /// [`Placement::Hash`].
    PerClass(Vec<u16>),
}

/// How to shard a tree.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShardConfig {
    /// Number of shards, 1..=[`MAX_SHARDS`].
    pub shards: usize,
    pub placement: Placement,
    /// `Q`: the lease a gate takes from the pool and the most it holds, in bytes.
    pub lease_bytes: u32,
    /// `P`: the pool's cap in bytes; `None`: the root's `cburst`.
    pub pool_bytes: Option<u32>,
}

/// The most shards.
pub const MAX_SHARDS: usize = 1024;
/// Default lease: four full-size packets.
pub const DEFAULT_LEASE_BYTES: u32 = 4 * DEFAULT_MTU;

impl ShardConfig {
    /// `n` shards, round robin, default lease and pool.
    pub fn new(n: usize) -> Self {
        ShardConfig {
            shards: n,
            placement: Placement::RoundRobin,
            lease_bytes: DEFAULT_LEASE_BYTES,
            pool_bytes: None,
        }
    }
}

/// Why a tree cannot be sharded as asked.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ShardError {
    #[error("shards must be 1..={MAX_SHARDS}, got {0}")]
    BadCount(usize),
    #[error("the lease must be at least one byte")]
    ZeroLease,
    #[error("class {0} has a parent that does not exist or a cycle above it")]
    BadParent(usize),
    #[error("placement: `{0}` is not a top-level class")]
    UnknownClass(String),
    #[error("placement: top-level class `{0}` is not placed")]
    Unplaced(String),
    #[error("placement: `{name}` placed on shard {shard}, but there are {shards} shards")]
    NoSuchShard {
        name: String,
        shard: usize,
        shards: usize,
    },
    #[error("shard {0} gets no class (the policy has no root to share): use fewer shards")]
    EmptyShard(usize),
    #[error("shard {shard}: {err}")]
    Htb { shard: usize, err: HtbError },
}

#[cfg(test)]
mod tests;
