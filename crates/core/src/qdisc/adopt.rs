//! Reloads: a new qdisc takes over the state of the one it replaces, so that nothing queued is
//! lost, counters continue and no estimator or bucket restarts from scratch (docs/router.md:
//! "counters survive a reload").
//!
//! [`Qdisc::adopt`] is the entry point every driver calls. A discipline that keeps state worth
//! keeping overrides it for an `old` of its own kind (HTB: buckets, counters and packets per class
//! by name; CBQ: estimators, `undertime` and counters per class by name, and the counters of leaf
//! qdiscs); for any other pair, [`adopt_by_requeue`] moves the packets in `old`'s send order
//! through the new qdisc's `enqueue`.

use super::{Counter, Qdisc, Time};
use crate::packet::Packet;

/// What an adoption carried over from the scheduler it replaced.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AdoptReport {
    /// Classes present before and after (counters, state and packets kept).
    pub kept: Vec<String>,
    /// Classes that are new.
    pub added: Vec<String>,
    /// Classes that are gone (their packets were classified again).
    pub removed: Vec<String>,
    /// Packets moved into the new qdisc.
    pub moved_packets: u64,
    /// Of those offered, packets whose class was gone and that went through the new filters.
    pub reclassified: u64,
    /// Packets the new qdisc refused (counted as drops).
    pub dropped_packets: u64,
}

/// The adoption for two qdiscs of different kinds: `old`'s packets, in its send order, are offered
/// to `new`, and `new`'s counters continue `old`'s.
pub fn adopt_by_requeue<P: Packet, Q: Qdisc<P> + ?Sized>(
    new: &mut Q,
    old: &mut dyn Qdisc<P>,
    now: Time,
) -> AdoptReport {
    let mut report = AdoptReport::default();
    let mut moved = Counter::default();
    for p in old.drain(now) {
        moved.add(p.len());
        match new.enqueue(p, now) {
            Ok(()) => report.moved_packets += 1,
            Err(_) => report.dropped_packets += 1,
        }
    }
    new.stats_mut().continue_from(old.stats(), moved);
    report
}
