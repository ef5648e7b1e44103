//! # linkshare-core
//!
//! Hierarchical link-sharing schedulers (HTB, CBQ and the leaf disciplines) as pure state
//! machines, and everything they need to see a packet: wire parsing, classification, the
//! device model.
//!
//! **No I/O, no clock, fully deterministic.** Every entry point takes `now` as an argument
//! ([`units::Time`], integer nanoseconds); nothing here reads a clock, sleeps, starts a thread or
//! touches a socket. The same objects are driven by the simulator (`linkshare-sim`, virtual
//! time), the real shaper (`linkshare-router`, the monotonic clock) and the benchmarks (a loop
//! with a fake clock), so a scenario and a run on real interfaces execute the same code.
//! `docs/architecture.md` follows a packet through both drivers.
//!
//! ## A packet's walk
//!
//! ```text
//!  bytes ──wire::parse_ethernet──▶ PacketMeta  (router; the simulator writes it per flow)
//!        ──linklayer::LinkLayer::size──▶ meta.len   (what the link below charges)
//!        ──Qdisc::enqueue(p, now)──▶ classify::Classifier::classify
//!                                    ──▶ a leaf class of htb / cbq (its queue: qdisc::leaf)
//!        ──egress::Egress::pull──▶ Qdisc::dequeue(now), while the device buffer has room
//!            ├─ Dequeued::Packet(p): onto the modelled wire, or into the device buffer
//!            ├─ Dequeued::Empty
//!            └─ Dequeued::NotBefore(t): the wake-up to arm, rounded to the driver's ticks
//! ```
//!
//! ## The call order of a driver
//!
//! 1. Build the scheduler once (`linkshare_config::Policy::build` gives a `Box<dyn Qdisc<P>>`,
//!    the classifier inside it) and an [`egress::Egress`] for the device (holding `()`, or the
//!    packets themselves for a driver that wants each back when it leaves the wire).
//! 2. For each arriving packet: [`Qdisc::enqueue`] (or [`Qdisc::enqueue_burst`]) at
//!    [`egress::Egress::sched_now`], then [`egress::Egress::pull`]; collect packets dropped after
//!    acceptance with [`Qdisc::take_dropped`].
//! 3. When the wire's packet ends: [`egress::Egress::finish_tx`] (a driver with per-packet
//!    events: it returns what the device held for the packet) or
//!    [`egress::Egress::complete_until`] (one without), then pull again.
//! 4. When the wake-up fires: [`egress::Egress::on_wake`], then pull again;
//!    [`egress::Egress::next_wakeup`] says when pulling can next achieve anything.
//! 5. Any time: [`Qdisc::stats`] (counters conserved: `enqueued = dequeued + dropped +
//!    backlog`), [`Qdisc::visit_classes`] (the `tc -s class show` view of every class); on a
//!    reload, [`Qdisc::adopt`] moves the old scheduler's queues, counters and tokens into the
//!    new one by class name.
//!
//! ## The modules, bottom up
//!
//! * [`units`]: time, rates and sizes, parsed and printed in tc(8)'s units.
//! * [`packet`]: [`PacketMeta`], what schedulers and classifiers know about a packet, and the
//!   [`Packet`] trait a driver's packet type implements (the payload stays the driver's).
//! * [`wire`]: zero-copy, panic-free views of Ethernet, VLAN, PPPoE/MPLS, IPv4, IPv6 and the
//!   transport headers, parsed into a [`PacketMeta`]; the flow hash.
//! * [`linklayer`]: the size a packet occupies on the link below the shaper (overhead, `mpu`,
//!   ATM cells, PTM), as Linux's size tables compute it.
//! * [`dscp`]: DiffServ code point names; [`trust`]: whose DSCP counts (a direction's
//!   `trust_dscp` and `wash`, applied to a packet before it is classified).
//! * [`classify`]: filters (DSCP, TOS, prefixes, protocol, port ranges) compiled into lookup
//!   structures; first match in filter order wins, else the default class.
//! * [`qdisc`]: the [`Qdisc`] interface, typed [`DropReason`]s, conserved [`QdiscStats`], the
//!   [`qdisc::Discipline`] hooks every scheduler implements (the one `Qdisc` implementation
//!   around them does the counting), and the leaf disciplines (FIFOs, SFQ, DRR, PRIO, TBF, RED,
//!   RIO, CoDel, FQ-CoDel).
//! * [`leaf`] (= `qdisc::leaf`): the queue at a leaf class ([`leaf::LeafSpec`]), shared by the
//!   classful schedulers.
//! * [`tree`]: the class tree (validation, depth, order) shared by HTB and CBQ.
//! * [`htb`]: the Hierarchical Token Bucket; [`cbq`]: Class-Based Queueing; [`hfsc`]: the
//!   Hierarchical Fair Service Curve scheduler, whose curves' data and arithmetic are in
//!   [`service_curve`] (below both it and the class views of [`qdisc`]).
//! * [`shard`]: HTB cut into shards below the root, one per thread, the root's rate shared by
//!   lock-free token exchange (the only atomics of the crate).
//! * [`egress`]: the device model every driver shares (device buffer, pull rule, exact drain,
//!   timer and clock ticks, wake-ups).
//! * [`impair`]: a path's jitter, random loss (Bernoulli, Gilbert–Elliott), reordering and
//!   duplication with netem's semantics, shared by the simulator and the real shaper's emulator.
//! * [`benchkit`]: trees shaped like DPDK's `librte_sched` and a fake-clock driver, for
//!   `linkshare bench sched` and the criterion benches.
//! * `hugepages` (private): transparent huge pages for the large per-class arrays.

pub mod benchkit;
pub mod cbq;
pub mod classify;
pub mod dscp;
pub mod egress;
pub mod hfsc;
pub mod htb;
mod hugepages;
pub mod impair;
pub use qdisc::leaf;
pub mod linklayer;
pub mod packet;
mod pool;
mod prefetch;
pub mod qdisc;
pub mod service_curve;
pub mod shard;
pub mod tree;
pub mod trust;
pub mod units;
pub mod wire;

pub use packet::{Packet, PacketMeta};
pub use qdisc::{Dequeued, DropReason, Dropped, Qdisc, QdiscStats};
pub use units::{Duration, Rate, Size, Time};
