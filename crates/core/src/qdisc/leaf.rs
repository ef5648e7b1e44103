//! The queue at a leaf class, shared by every classful scheduler (HTB, CBQ, PRIO bands, DRR
//! classes).
//!
//! Principle: a leaf's queue is either an inline FIFO, which a classful scheduler may thread
//! through its own packet pool so that an idle class costs no allocation, or any other [`Qdisc`]
//! boxed behind the common interface (SFQ, FQ-CoDel, RED…), whose counters and victims the parent
//! aggregates. This mirrors Linux, where every class owns a child qdisc (`pfifo` by default,
//! net/sched/sch_htb.c `htb_change_class`, sch_cbq.c `cbq_change_class`), with the FIFO case
//! made cheap. A boxed per-flow leaf (fq_codel, sfq, flow-hash drr) builds its table at its
//! first packet and gives it back when its scheduler reclaims it after an idle spell
//! ([`super::lazy`]), so an idle class costs its record, not its flows.

use super::fifo::FifoLimit;
use super::Qdisc;
use crate::packet::Packet;

/// The queue at a leaf class.
pub enum LeafSpec<P: Packet> {
    /// An inline `pfifo`/`bfifo` (no allocation while the class is idle).
    Fifo(FifoLimit),
    /// Any other qdisc.
    Qdisc(Box<dyn Qdisc<P>>),
}

impl<P: Packet> std::fmt::Debug for LeafSpec<P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LeafSpec::Fifo(l) => write!(f, "Fifo({l:?})"),
            LeafSpec::Qdisc(q) => write!(f, "Qdisc({})", q.kind()),
        }
    }
}
