//! The queueing-discipline interface every scheduler implements, and the counters they keep.
//!
//! A qdisc is a pure state machine: it never reads a clock. Drivers call
//!
//! ```text
//! enqueue(packet, now)  -> Ok(()) | Err(Dropped { packet, reason })
//! dequeue(now)          -> Packet(p) | Empty | NotBefore(instant)
//! ```
//!
//! `NotBefore(t)` means "backlogged, but every backlogged class is throttled until `t`": the driver
//! arms a wake-up for `t` (rounded to its own tick) and calls `dequeue` again then. Calling early is
//! harmless; calling late only delays packets and never loses rate, as long as the burst covers the
//! lateness (see `htb` for the default burst).
//!
//! Packets a qdisc drops *after* accepting them (a head drop, an AQM drop at dequeue, a victim chosen
//! to make room) are handed back through [`Qdisc::take_dropped`], so a driver that owns buffers can
//! free them and nothing goes unaccounted.
//!
//! ## Conservation, built in
//! Every qdisc keeps [`QdiscStats`] in which
//! `enqueued = dequeued + dropped_after_enqueue + backlog` holds after every call, and
//! `offered = enqueued + refused`. Disciplines do not keep these counters themselves: each
//! implements the hooks of [`Discipline`] and reports drops and marks to its [`Books`]; the one
//! implementation of [`Qdisc`] ([`discipline`]) counts around the hooks
//! ([`QdiscStats::check_conservation`] checks it in tests).

pub mod adopt;
pub mod cake;
pub mod codel;
pub mod discipline;
pub mod drr;
pub mod fifo;
pub mod fq_codel;
pub mod lazy;
pub mod leaf;
pub mod prio;
pub mod red;
pub mod rio;
pub mod sfq;
pub mod tbf;

use crate::packet::Packet;
use crate::units::{Duration, Rate, Time};
pub use discipline::{Books, Discipline};

/// Result of a dequeue.
#[derive(Debug, PartialEq, Eq)]
#[must_use]
pub enum Dequeued<P> {
    /// The next packet to transmit.
    Packet(P),
    /// Nothing queued.
    Empty,
    /// Backlogged but throttled: call again at (or after) this instant.
    NotBefore(Time),
}

impl<P> Dequeued<P> {
    pub fn packet(self) -> Option<P> {
        match self {
            Dequeued::Packet(p) => Some(p),
            _ => None,
        }
    }
}

/// Why a packet was dropped. Typed, so counters and logs never depend on strings.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum DropReason {
    /// The queue's packet limit was reached (pfifo `limit`).
    QueueLimit,
    /// The queue's byte limit was reached (bfifo `limit`).
    ByteLimit,
    /// A per-flow depth limit was reached (SFQ `depth`).
    FlowLimit,
    /// Dropped from the longest flow to make room (SFQ, FQ-CoDel overflow).
    Overflow,
    /// An active queue management decision (RED early drop, CoDel).
    Aqm,
    /// Forced drop above RED's `max` threshold.
    AqmForced,
    /// Waited in a rate limiter longer than allowed (TBF `latency`).
    Latency,
    /// The packet is larger than the discipline can ever send (e.g. bigger than TBF's bucket).
    TooBig,
    /// The packet could not be parsed and the policy drops such packets.
    Malformed,
    /// A queued TCP ACK made redundant by a newer one of the same connection (CAKE's
    /// `ack_filter`).
    AckFilter,
}

impl DropReason {
    pub const ALL: [DropReason; 10] = [
        DropReason::QueueLimit,
        DropReason::ByteLimit,
        DropReason::FlowLimit,
        DropReason::Overflow,
        DropReason::Aqm,
        DropReason::AqmForced,
        DropReason::Latency,
        DropReason::TooBig,
        DropReason::Malformed,
        DropReason::AckFilter,
    ];
    /// Stable snake_case name, used in JSON, metrics labels and `stat` output.
    pub fn name(self) -> &'static str {
        match self {
            DropReason::QueueLimit => "queue_limit",
            DropReason::ByteLimit => "byte_limit",
            DropReason::FlowLimit => "flow_limit",
            DropReason::Overflow => "overflow",
            DropReason::Aqm => "aqm",
            DropReason::AqmForced => "aqm_forced",
            DropReason::Latency => "latency",
            DropReason::TooBig => "too_big",
            DropReason::Malformed => "malformed",
            DropReason::AckFilter => "ack_filter",
        }
    }
    fn index(self) -> usize {
        self as usize
    }
}

/// A dropped packet with its reason.
#[derive(Debug, PartialEq, Eq)]
pub struct Dropped<P> {
    pub packet: P,
    pub reason: DropReason,
}

/// Packets and bytes waiting.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct Backlog {
    pub packets: u64,
    pub bytes: u64,
}

/// A packet and byte counter pair.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct Counter {
    pub packets: u64,
    pub bytes: u64,
}

impl Counter {
    pub fn add(&mut self, bytes: u32) {
        self.packets += 1;
        self.bytes += bytes as u64;
    }
}

/// Drops per reason. The counters are allocated at the first drop: most qdiscs of a large tree
/// (idle subscribers' leaves) never drop, and then cost one null pointer instead of a packet and
/// byte counter for each of the [`DropReason::ALL`] reasons (160 bytes, twice per qdisc: refused
/// and dropped).
#[derive(Clone, Debug, Default)]
pub struct DropCounts {
    by_reason: Option<Box<[Counter; DropReason::ALL.len()]>>,
}

impl DropCounts {
    #[inline]
    fn slot(&mut self, reason: DropReason) -> &mut Counter {
        let all = self
            .by_reason
            .get_or_insert_with(|| Box::new([Counter::default(); DropReason::ALL.len()]));
        &mut all[reason.index()]
    }
    pub fn add(&mut self, reason: DropReason, bytes: u32) {
        self.slot(reason).add(bytes);
    }
    pub fn add_counter(&mut self, reason: DropReason, c: Counter) {
        if c == Counter::default() {
            return;
        }
        let e = self.slot(reason);
        e.packets += c.packets;
        e.bytes += c.bytes;
    }
    pub fn get(&self, reason: DropReason) -> Counter {
        self.by_reason
            .as_ref()
            .map_or_else(Counter::default, |all| all[reason.index()])
    }
    pub fn total(&self) -> Counter {
        let mut t = Counter::default();
        for c in self.by_reason.iter().flat_map(|all| all.iter()) {
            t.packets += c.packets;
            t.bytes += c.bytes;
        }
        t
    }
    /// Non-zero reasons, in a stable order.
    pub fn iter(&self) -> impl Iterator<Item = (DropReason, Counter)> + '_ {
        DropReason::ALL
            .iter()
            .map(|&r| (r, self.get(r)))
            .filter(|(_, c)| c.packets > 0)
    }
}

/// Equal when every reason's counter is (not yet allocated is all zero).
impl PartialEq for DropCounts {
    fn eq(&self, other: &Self) -> bool {
        DropReason::ALL.iter().all(|&r| self.get(r) == other.get(r))
    }
}

impl Eq for DropCounts {}

/// Counters every qdisc keeps. The identities in the module docs hold after every call.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct QdiscStats {
    /// Packets accepted by `enqueue`.
    pub enqueued: Counter,
    /// Packets handed out by `dequeue`.
    pub dequeued: Counter,
    /// Packets refused by `enqueue` (never queued).
    pub refused: DropCounts,
    /// Packets dropped after they had been accepted.
    pub dropped: DropCounts,
    /// Times `dequeue` found backlog but could not send (throttled).
    pub overlimits: u64,
    /// ECN marks instead of drops.
    pub marked: u64,
    /// Current backlog.
    pub backlog: Backlog,
}

impl QdiscStats {
    pub fn on_enqueue(&mut self, bytes: u32) {
        self.enqueued.add(bytes);
        self.backlog.packets += 1;
        self.backlog.bytes += bytes as u64;
    }
    pub fn on_dequeue(&mut self, bytes: u32) {
        self.dequeued.add(bytes);
        self.backlog.packets = self.backlog.packets.saturating_sub(1);
        self.backlog.bytes = self.backlog.bytes.saturating_sub(bytes as u64);
    }
    pub fn on_refuse(&mut self, reason: DropReason, bytes: u32) {
        self.refused.add(reason, bytes);
    }
    /// A packet that had been enqueued is dropped.
    pub fn on_drop(&mut self, reason: DropReason, bytes: u32) {
        self.dropped.add(reason, bytes);
        self.backlog.packets = self.backlog.packets.saturating_sub(1);
        self.backlog.bytes = self.backlog.bytes.saturating_sub(bytes as u64);
    }
    /// Continue the counters of `prior`, the qdisc this one replaced, whose queued packets were
    /// drained (`moved`, counted as dequeued there) and offered to this one (counted here as they
    /// were accepted or refused): the moved packets leave `prior`'s dequeued and enqueued counts,
    /// so `enqueued = dequeued + dropped + backlog` still holds and nothing is counted twice.
    pub fn continue_from(&mut self, prior: &QdiscStats, moved: Counter) {
        let add = |a: &mut Counter, b: Counter| {
            a.packets += b.packets;
            a.bytes += b.bytes;
        };
        let less = |a: Counter| Counter {
            packets: a.packets.saturating_sub(moved.packets),
            bytes: a.bytes.saturating_sub(moved.bytes),
        };
        add(&mut self.enqueued, less(prior.enqueued));
        add(&mut self.dequeued, less(prior.dequeued));
        for (r, c) in prior.refused.iter() {
            self.refused.add_counter(r, c);
        }
        for (r, c) in prior.dropped.iter() {
            self.dropped.add_counter(r, c);
        }
        self.overlimits += prior.overlimits;
        self.marked += prior.marked;
    }
    /// All drops, refused at enqueue or dropped later.
    pub fn drops_total(&self) -> Counter {
        let a = self.refused.total();
        let b = self.dropped.total();
        Counter {
            packets: a.packets + b.packets,
            bytes: a.bytes + b.bytes,
        }
    }
    /// `enqueued = dequeued + dropped + backlog`, in packets and in bytes.
    pub fn check_conservation(&self) -> Result<(), String> {
        let d = self.dropped.total();
        let p = self.dequeued.packets + d.packets + self.backlog.packets;
        let b = self.dequeued.bytes + d.bytes + self.backlog.bytes;
        if p != self.enqueued.packets || b != self.enqueued.bytes {
            return Err(format!(
                "conservation broken: enqueued {}p/{}B != dequeued {}p/{}B + dropped {}p/{}B + backlog {}p/{}B",
                self.enqueued.packets,
                self.enqueued.bytes,
                self.dequeued.packets,
                self.dequeued.bytes,
                d.packets,
                d.bytes,
                self.backlog.packets,
                self.backlog.bytes
            ));
        }
        Ok(())
    }
}

/// The interface shared by every scheduler, leaf or classful, as drivers see it.
///
/// It is implemented once, for every [`Discipline`] (see [`discipline`]): the counters and the
/// victims are kept there, around the discipline's hooks, so every implementation conserves
/// packets by construction. The trait is sealed: a new scheduler implements [`Discipline`].
pub trait Qdisc<P: Packet>: discipline::sealed::Sealed<P> + Send {
    /// Offer a packet. `Err` hands back the offered packet when it is refused.
    fn enqueue(&mut self, pkt: P, now: Time) -> Result<(), Dropped<P>>;
    /// Take the next packet to transmit, if any may go at `now`.
    fn dequeue(&mut self, now: Time) -> Dequeued<P>;
    /// Offer a burst of packets, in order, all at `now`, leaving `pkts` empty; refused packets
    /// go to `refused`. Returns how many were accepted. One `enqueue` each, unless the
    /// discipline prepares bursts ([`Discipline::enqueue_burst_inner`]: HTB overlaps the cache
    /// misses of the whole burst).
    fn enqueue_burst(
        &mut self,
        pkts: &mut Vec<P>,
        now: Time,
        refused: &mut Vec<Dropped<P>>,
    ) -> usize;
    /// Take up to `max` packets, appended to `out` in transmission order. `Packet(n)`: `n`
    /// packets were taken (`n ≥ 1` unless `max` is 0) (fewer than `max` when the qdisc ran empty
    /// or throttled: the next call says which); otherwise what `dequeue` would have said.
    fn dequeue_burst(&mut self, now: Time, max: usize, out: &mut Vec<P>) -> Dequeued<usize>;
    /// Packets and bytes waiting.
    fn backlog(&self) -> Backlog;
    /// Counters.
    fn stats(&self) -> &QdiscStats;
    /// Counters, to continue them from a predecessor ([`QdiscStats::continue_from`]).
    fn stats_mut(&mut self) -> &mut QdiscStats;
    /// `Some(self)` for disciplines whose [`Qdisc::adopt`] takes over state from a predecessor of
    /// their own kind (they find it by downcasting).
    fn as_any_mut(&mut self) -> Option<&mut dyn std::any::Any>;
    /// A packet this qdisc dropped after having accepted it, if any is waiting to be collected.
    /// Drivers call this until `None` after each enqueue and dequeue.
    fn take_dropped(&mut self) -> Option<Dropped<P>>;
    /// The kind, as written in policy files (`"htb"`, `"pfifo"`, …).
    fn kind(&self) -> &'static str;
    /// Visit every class (for classful qdiscs) in tree order, parents before children.
    fn visit_classes(&self, f: &mut dyn FnMut(&ClassView<'_>));
    /// Remove every queued packet, in the order this qdisc would have sent them, ignoring rate
    /// limits: used to hand packets to a replacement qdisc on reload without losing any. The
    /// packets count as dequeued; what the discipline drops on the way (an AQM still runs) is
    /// counted and waits in `take_dropped`.
    fn drain(&mut self, now: Time) -> Vec<P>;
    /// Take over the state of `old`, the qdisc this one replaces on a reload: its packets, its
    /// counters, and whatever state the discipline keeps (see [`adopt`]). `old` is left empty;
    /// what it dropped on the way is still to be collected with its `take_dropped`.
    fn adopt(&mut self, old: &mut dyn Qdisc<P>, now: Time) -> adopt::AdoptReport;
    /// Discipline-specific gauges and counters beyond [`QdiscStats`], as `(name, value)` pairs with
    /// stable snake_case names: e.g. CoDel's `sojourn_us`, RED's `avg_queue_bytes`, SFQ's
    /// `active_flows`. Shown by `stat`, sampled by the simulator. Default: none.
    fn extra_stats(&self, f: &mut dyn FnMut(&'static str, f64));
    /// CAKE's tins, in the order `tc -s qdisc show` prints them ([`cake::TinView`]): the
    /// per-tin table of `stat`. No allocation. Default: none (every other discipline).
    fn visit_tins(&self, f: &mut dyn FnMut(&cake::TinView));
    /// A leaf with per-flow state built at its first packet ([`lazy`]): how long it must have
    /// been empty before [`Qdisc::release_state`] cannot change what it does next. `None`: no
    /// such state (FIFOs, classful schedulers).
    fn release_hold(&self) -> Option<Duration>;
    /// Free the per-flow state if the qdisc holds no packet (it is built again at the next
    /// enqueue). Returns whether anything was freed.
    fn release_state(&mut self) -> bool;
    /// Heap bytes of the per-flow state [`Qdisc::release_state`] would free (0 when released).
    fn state_bytes(&self) -> usize;
    /// For schedulers with such leaves: release the state of the leaves that have been empty
    /// for the scheduler's hold at `now`, at most `budget` of them, in the order they went
    /// empty. O(released) ([`lazy`]). Returns how many were released.
    fn reclaim_idle(&mut self, now: Time, budget: u32) -> u32;
}

/// An invalid discipline parameter: which one, what is wrong, and how to fix it. Config maps it to
/// a `file:line:col` diagnostic at the parameter's value.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("`{param}`: {message}")]
pub struct ParamError {
    /// The parameter's name as written in policy files (`"quantum"`, `"max_p"`, …).
    pub param: &'static str,
    /// What is wrong, e.g. "must be at least 64 bytes, got 10".
    pub message: String,
    /// How to fix it, e.g. "set quantum to at least one MTU (1514)".
    pub help: String,
}

impl ParamError {
    pub fn new(param: &'static str, message: impl Into<String>, help: impl Into<String>) -> Self {
        ParamError {
            param,
            message: message.into(),
            help: help.into(),
        }
    }
}

/// Link-sharing state of a class, in HTB's vocabulary (CBQ maps underlimit/at-limit/overlimit).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum ClassMode {
    /// Over its ceiling: may not send at all.
    CantSend,
    /// Over its rate but under its ceiling: may send by borrowing from an ancestor.
    MayBorrow,
    /// Under its rate: sends on its own tokens.
    CanSend,
}

impl ClassMode {
    pub fn name(self) -> &'static str {
        match self {
            ClassMode::CantSend => "cant_send",
            ClassMode::MayBorrow => "may_borrow",
            ClassMode::CanSend => "can_send",
        }
    }
}

/// Per-class counters as `tc -s class show` prints them.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct ClassStats {
    /// Packets and bytes sent by this class (for inner classes: by its subtree).
    pub sent: Counter,
    /// Packets dropped by this class's leaf queue, all reasons.
    pub drops: u64,
    /// Times the class went over its rate or ceiling.
    pub overlimits: u64,
    /// Packets this class lent to a descendant (HTB `lended`).
    pub lends: u64,
    /// Packets this class sent on an ancestor's tokens (HTB `borrowed`).
    pub borrows: u64,
    /// Packets larger than the class's burst (HTB `giants`).
    pub giants: u64,
    /// ECN marks (CE) set by this class's leaf qdisc instead of drops.
    pub marked: u64,
}

/// A read-only view of one class, for statistics, sampling and display.
#[derive(Clone, Debug)]
pub struct ClassView<'a> {
    pub name: &'a str,
    /// The parent's `id` (a class id, not a position in visiting order), if any.
    pub parent: Option<u32>,
    pub id: u32,
    pub level: u8,
    pub is_leaf: bool,
    pub rate: Rate,
    pub ceil: Rate,
    pub prio: u8,
    pub mode: ClassMode,
    /// Current rate tokens and ceil tokens, in bytes (negative when in debt).
    pub tokens: i64,
    pub ctokens: i64,
    pub stats: ClassStats,
    pub backlog: Backlog,
    /// Per-reason drops of the leaf queue.
    pub leaf_drops: DropCounts,
    /// CBQ's estimator: the class's average idle time in nanoseconds (negative when over its
    /// allocation); `None` for schedulers without one.
    pub avgidle_ns: Option<i64>,
    /// HFSC's curves and scheduler state (what `tc -s class show` prints for hfsc: period,
    /// level, work; and the virtual, fit, eligible and deadline times); `None` for other
    /// schedulers.
    pub hfsc: Option<crate::service_curve::HfscClassView>,
}

#[cfg(test)]
mod drop_counts_tests {
    use super::{Counter, DropCounts, DropReason};

    /// Counters not yet allocated read as zero and equal zeroed ones; a drop allocates them.
    #[test]
    fn drop_counts_read_zero_until_the_first_drop() {
        let mut a = DropCounts::default();
        assert_eq!(a.total(), Counter::default());
        assert_eq!(a.get(DropReason::Aqm), Counter::default());
        assert_eq!(a.iter().count(), 0);
        let mut zeroed = DropCounts::default();
        zeroed.add_counter(DropReason::Overflow, Counter::default());
        assert_eq!(a, zeroed);
        a.add(DropReason::Aqm, 100);
        a.add(DropReason::Overflow, 50);
        a.add(DropReason::Aqm, 10);
        assert_eq!(
            a.get(DropReason::Aqm),
            Counter {
                packets: 2,
                bytes: 110
            }
        );
        assert_eq!(
            a.total(),
            Counter {
                packets: 3,
                bytes: 160
            }
        );
        let reasons: Vec<DropReason> = a.iter().map(|(r, _)| r).collect();
        assert_eq!(reasons, [DropReason::Overflow, DropReason::Aqm]);
        assert_ne!(a, zeroed);
        let mut b = DropCounts::default();
        b.add_counter(DropReason::Aqm, a.get(DropReason::Aqm));
        b.add_counter(DropReason::Overflow, a.get(DropReason::Overflow));
        assert_eq!(a, b);
    }
}
