//! # linkshare-core
//!
//! Hierarchical link-sharing schedulers as pure state machines.
//!
//! **No I/O, no clock, fully deterministic.** Every entry point takes `now` as an argument
//! ([`units::Time`], integer nanoseconds); nothing here reads a clock, sleeps, allocates threads or
//! touches a socket. The same objects are driven by the simulator (virtual time), the router
//! (monotonic clock) and the benchmarks (a loop with a fake clock).
//!
//! Layers, bottom up:
//!
//! * [`units`]: time, rates and sizes, parsed and printed in tc(8)'s units.
//! * [`wire`]: zero-copy, panic-free parsing of Ethernet/IPv4/IPv6/TCP/UDP/ICMP into a
//!   [`packet::PacketMeta`], and the flow hash.
//! * [`dscp`]: DiffServ code point names.
//! * [`classify`]: filters (DSCP, TOS, prefixes, protocol, port ranges) compiled into lookup
//!   structures; first match in filter order wins.
//! * [`qdisc`]: the [`qdisc::Qdisc`] interface, typed drop reasons, conserved counters, and the
//!   FIFO leaves.
//! * [`leaf`] (= `qdisc::leaf`): the queue at a leaf class ([`leaf::LeafSpec`]), shared by the
//!   classful schedulers.
//! * [`tree`]: the class tree (validation, depth, order) shared by HTB and CBQ.
//! * [`htb`]: the Hierarchical Token Bucket; [`cbq`]: Class-Based Queueing.
//! * [`shard`]: HTB cut into shards below the root, one per thread, the root's rate shared by
//!   lock-free token exchange (the only atomics of the crate).
//! * [`egress`]: the device model every driver shares (device buffer, pull rule, ticks, wake-ups).

pub mod benchkit;
pub mod cbq;
pub mod classify;
pub mod dscp;
pub mod egress;
pub mod htb;
mod hugepages;
pub use qdisc::leaf;
pub mod linklayer;
pub mod packet;
pub mod qdisc;
pub mod shard;
pub mod tree;
pub mod units;
pub mod wire;

pub use packet::{Packet, PacketMeta};
pub use qdisc::{Dequeued, DropReason, Dropped, Qdisc, QdiscStats};
pub use units::{Duration, Rate, Size, Time};
