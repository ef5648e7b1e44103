//! Accounting written once: the per-discipline hooks ([`Discipline`]) and the one implementation
//! of [`Qdisc`] around them, which keeps the counters ([`QdiscStats`]) and the dropped packets
//! ([`Books`]).
//!
//! Principle: a discipline decides, the wrapper counts. A discipline implements only what is
//! particular to it — accept or refuse a packet, pick the next one, drain, adopt a predecessor —
//! and reports the three events only it can see through its [`Books`]: a packet it had accepted
//! is dropped ([`Books::drop`], with its [`DropReason`]), a packet is ECN-marked
//! ([`Books::mark`]), a child's victims ([`Books::drop_victim`]). Everything else is counted by
//! the provided methods of the blanket `impl<D: Discipline> Qdisc for D`: the offered packet is
//! counted as enqueued or refused by the result of `enqueue_inner`, a packet handed out as
//! dequeued, a `NotBefore` answer as an overlimit, drained packets as dequeued. A discipline
//! cannot forget a counter because it never writes one, and
//! `enqueued = dequeued + dropped + backlog` holds by construction after every call.
//!
//! This is the split Linux makes between a qdisc's `enqueue`/`dequeue` and the helpers every
//! qdisc calls for its counters (`qdisc_qstats_backlog_inc`, `qdisc_bstats_update`,
//! `qdisc_drop`, include/net/sch_generic.h), made mandatory: here the helpers are called by the
//! one caller of the hooks, not by each discipline. Generic and `#[inline]`, so the wrapper is
//! monomorphised into each discipline: no indirection and no allocation per packet.

use std::collections::VecDeque;

use super::adopt::{adopt_by_requeue, AdoptReport};
use super::{Backlog, ClassView, Dequeued, DropReason, Dropped, Qdisc, QdiscStats};
use crate::packet::Packet;
use crate::units::{Duration, Time};

/// The counters of a qdisc and the packets it dropped after accepting them, waiting to be
/// collected by the driver ([`Qdisc::take_dropped`]).
#[derive(Debug)]
pub struct Books<P> {
    stats: QdiscStats,
    victims: VecDeque<Dropped<P>>,
}

impl<P> Default for Books<P> {
    fn default() -> Self {
        Books {
            stats: QdiscStats::default(),
            victims: VecDeque::new(),
        }
    }
}

impl<P: Packet> Books<P> {
    pub fn new() -> Self {
        Self::default()
    }

    /// The counters. While `enqueue_inner` runs, the backlog already includes the offered
    /// packet (so a limit check reads `backlog > limit`, as after Linux's
    /// `qdisc_qstats_backlog_inc`).
    #[inline]
    pub fn stats(&self) -> &QdiscStats {
        &self.stats
    }

    /// Packets and bytes waiting (see [`Self::stats`] for the offered packet).
    #[inline]
    pub fn backlog(&self) -> Backlog {
        self.stats.backlog
    }

    /// A packet this qdisc had accepted is dropped (head drop, AQM, overflow victim): counted
    /// and kept for the driver.
    #[inline]
    pub fn drop(&mut self, packet: P, reason: DropReason) {
        self.drop_victim(Dropped { packet, reason });
    }

    /// [`Self::drop`] for a packet already wrapped, e.g. a child qdisc's victim.
    #[inline]
    pub fn drop_victim(&mut self, d: Dropped<P>) {
        self.stats.on_drop(d.reason, d.packet.len());
        self.victims.push_back(d);
    }

    /// `n` packets were ECN-marked (CE) instead of dropped.
    #[inline]
    pub fn mark(&mut self, n: u64) {
        self.stats.marked += n;
    }

    /// Counters, to continue them from a predecessor on a reload.
    pub fn stats_mut(&mut self) -> &mut QdiscStats {
        &mut self.stats
    }

    /// Continue `old`'s books exactly, for a scheduler that takes over `old`'s queued packets
    /// without counting them again (HTB and CBQ adopting their own kind): the counters are
    /// `old`'s, the victims `old` still holds move here, and `old` is left with no backlog.
    pub fn take_over(&mut self, old: &mut Books<P>) {
        self.stats = old.stats.clone();
        self.victims.append(&mut old.victims);
        old.stats.backlog = Backlog::default();
    }

    /// The next dropped packet, oldest first.
    #[inline]
    pub fn take_dropped(&mut self) -> Option<Dropped<P>> {
        self.victims.pop_front()
    }

    /// Before `enqueue_inner`: the offered packet counts in the backlog while it runs.
    #[inline(always)]
    pub(crate) fn offer(&mut self, len: u32) {
        self.stats.backlog.packets += 1;
        self.stats.backlog.bytes += len as u64;
    }

    /// After `enqueue_inner`: the offered packet was accepted or refused.
    #[inline(always)]
    pub(crate) fn settle(&mut self, len: u32, r: &Result<(), Dropped<P>>) {
        match r {
            Ok(()) => self.stats.enqueued.add(len),
            Err(d) => {
                let b = &mut self.stats.backlog;
                b.packets = b.packets.saturating_sub(1);
                b.bytes = b.bytes.saturating_sub(len as u64);
                self.stats.refused.add(d.reason, len);
            }
        }
    }

    /// A packet leaves (dequeued or drained).
    #[inline(always)]
    pub(crate) fn sent(&mut self, len: u32) {
        self.stats.on_dequeue(len);
    }

    /// The driver's answer was "throttled".
    #[inline(always)]
    pub(crate) fn overlimit(&mut self) {
        self.stats.overlimits += 1;
    }
}

/// What a queueing discipline implements; [`Qdisc`] follows (see the module documentation).
///
/// Hooks are named `…_inner` so that they never shadow the [`Qdisc`] method a caller means when
/// both traits are in scope. The hooks never count: they report drops of accepted packets and ECN marks to
/// [`Discipline::books_mut`] and return their decision.
pub trait Discipline<P: Packet> {
    /// This discipline's books.
    fn books(&self) -> &Books<P>;
    fn books_mut(&mut self) -> &mut Books<P>;
    /// Accept `pkt` or hand it back with the reason it is refused. Packets accepted earlier and
    /// dropped to make room go to [`Books::drop`].
    fn enqueue_inner(&mut self, pkt: P, now: Time) -> Result<(), Dropped<P>>;
    /// The next packet, `Empty`, or `NotBefore` when throttled. Packets dropped on the way (AQM)
    /// go to [`Books::drop`], marks to [`Books::mark`].
    fn dequeue_inner(&mut self, now: Time) -> Dequeued<P>;
    /// The kind, as written in policy files.
    fn kind_inner(&self) -> &'static str;
    /// Every queued packet, in send order, ignoring rate limits. Default: `dequeue_inner` until
    /// it stops giving packets; a discipline that answers `NotBefore` while backlogged overrides
    /// it.
    fn drain_inner(&mut self, now: Time) -> Vec<P> {
        let mut out = Vec::new();
        while let Dequeued::Packet(p) = self.dequeue_inner(now) {
            out.push(p);
        }
        out
    }
    /// Take over the state of `old` when it is of a kind this discipline understands; `None`
    /// falls back to [`adopt_by_requeue`].
    fn adopt_inner(&mut self, _old: &mut dyn Qdisc<P>, _now: Time) -> Option<AdoptReport> {
        None
    }
    /// A burst hook for disciplines that prepare a whole burst at once (HTB prefetches). It must
    /// pass every packet through an accounted path ([`account_enqueue`] or an accounted
    /// inherent method). `None`: the provided loop.
    fn enqueue_burst_inner(
        &mut self,
        _pkts: &mut Vec<P>,
        _now: Time,
        _refused: &mut Vec<Dropped<P>>,
    ) -> Option<usize> {
        None
    }
    /// A burst hook for dequeues (HTB sums its ancestors' charges over a burst). It must take
    /// every packet through [`account_dequeue`], as [`dequeue_burst_loop`] does. `None`: the
    /// provided loop.
    fn dequeue_burst_inner(
        &mut self,
        _now: Time,
        _max: usize,
        _out: &mut Vec<P>,
    ) -> Option<Dequeued<usize>> {
        None
    }
    /// See [`Qdisc::as_any_mut`].
    fn as_any_inner(&mut self) -> Option<&mut dyn std::any::Any> {
        None
    }
    /// See [`Qdisc::visit_classes`].
    fn visit_classes_inner(&self, _f: &mut dyn FnMut(&ClassView<'_>)) {}
    /// See [`Qdisc::extra_stats`].
    fn extra_stats_inner(&self, _f: &mut dyn FnMut(&'static str, f64)) {}
    /// See [`Qdisc::visit_tins`].
    fn visit_tins_inner(&self, _f: &mut dyn FnMut(&super::cake::TinView)) {}
    /// See [`Qdisc::release_hold`].
    fn release_hold_inner(&self) -> Option<Duration> {
        None
    }
    /// See [`Qdisc::release_state`]; called only when the books show no backlog.
    fn release_state_inner(&mut self) -> bool {
        false
    }
    /// See [`Qdisc::state_bytes`].
    fn state_bytes_inner(&self) -> usize {
        0
    }
    /// See [`Qdisc::reclaim_idle`].
    fn reclaim_idle_inner(&mut self, _now: Time, _budget: u32) -> u32 {
        0
    }
}

/// Offer one packet to `d` and count the outcome: the one accounted enqueue.
#[inline(always)]
pub fn account_enqueue<P: Packet, D: Discipline<P> + ?Sized>(
    d: &mut D,
    pkt: P,
    now: Time,
) -> Result<(), Dropped<P>> {
    let len = pkt.len();
    d.books_mut().offer(len);
    let r = d.enqueue_inner(pkt, now);
    d.books_mut().settle(len, &r);
    r
}

/// Take one packet from `d` and count it: the one accounted dequeue.
#[inline(always)]
pub fn account_dequeue<P: Packet, D: Discipline<P> + ?Sized>(d: &mut D, now: Time) -> Dequeued<P> {
    let r = d.dequeue_inner(now);
    match &r {
        Dequeued::Packet(p) => d.books_mut().sent(p.len()),
        Dequeued::NotBefore(_) => d.books_mut().overlimit(),
        Dequeued::Empty => {}
    }
    r
}

/// Up to `max` accounted dequeues at `now` into `out`: the provided [`Qdisc::dequeue_burst`].
#[inline]
pub fn dequeue_burst_loop<P: Packet, D: Discipline<P> + ?Sized>(
    d: &mut D,
    now: Time,
    max: usize,
    out: &mut Vec<P>,
) -> Dequeued<usize> {
    let mut n = 0;
    while n < max {
        match account_dequeue(d, now) {
            Dequeued::Packet(p) => {
                out.push(p);
                n += 1;
            }
            Dequeued::Empty if n == 0 => return Dequeued::Empty,
            Dequeued::NotBefore(t) if n == 0 => return Dequeued::NotBefore(t),
            _ => break,
        }
    }
    Dequeued::Packet(n)
}

/// Keeps [`Qdisc`] implemented only here: every qdisc is a [`Discipline`] with its books.
pub(crate) mod sealed {
    pub trait Sealed<P> {}
}

impl<P: Packet, D: Discipline<P> + Send> sealed::Sealed<P> for D {}

impl<P: Packet, D: Discipline<P> + Send> Qdisc<P> for D {
    #[inline]
    fn enqueue(&mut self, pkt: P, now: Time) -> Result<(), Dropped<P>> {
        account_enqueue(self, pkt, now)
    }
    #[inline]
    fn dequeue(&mut self, now: Time) -> Dequeued<P> {
        account_dequeue(self, now)
    }
    fn enqueue_burst(
        &mut self,
        pkts: &mut Vec<P>,
        now: Time,
        refused: &mut Vec<Dropped<P>>,
    ) -> usize {
        if let Some(n) = self.enqueue_burst_inner(pkts, now, refused) {
            return n;
        }
        let mut ok = 0;
        for p in pkts.drain(..) {
            match account_enqueue(self, p, now) {
                Ok(()) => ok += 1,
                Err(d) => refused.push(d),
            }
        }
        ok
    }
    fn dequeue_burst(&mut self, now: Time, max: usize, out: &mut Vec<P>) -> Dequeued<usize> {
        if let Some(r) = self.dequeue_burst_inner(now, max, out) {
            return r;
        }
        dequeue_burst_loop(self, now, max, out)
    }
    #[inline]
    fn backlog(&self) -> Backlog {
        self.books().backlog()
    }
    #[inline]
    fn stats(&self) -> &QdiscStats {
        self.books().stats()
    }
    fn stats_mut(&mut self) -> &mut QdiscStats {
        self.books_mut().stats_mut()
    }
    fn as_any_mut(&mut self) -> Option<&mut dyn std::any::Any> {
        self.as_any_inner()
    }
    #[inline]
    fn take_dropped(&mut self) -> Option<Dropped<P>> {
        self.books_mut().take_dropped()
    }
    fn kind(&self) -> &'static str {
        self.kind_inner()
    }
    fn visit_classes(&self, f: &mut dyn FnMut(&ClassView<'_>)) {
        self.visit_classes_inner(f)
    }
    fn drain(&mut self, now: Time) -> Vec<P> {
        let out = self.drain_inner(now);
        let books = self.books_mut();
        for p in &out {
            books.sent(p.len());
        }
        out
    }
    fn adopt(&mut self, old: &mut dyn Qdisc<P>, now: Time) -> AdoptReport {
        match self.adopt_inner(old, now) {
            Some(r) => r,
            None => adopt_by_requeue(self, old, now),
        }
    }
    fn extra_stats(&self, f: &mut dyn FnMut(&'static str, f64)) {
        self.extra_stats_inner(f)
    }
    fn visit_tins(&self, f: &mut dyn FnMut(&super::cake::TinView)) {
        self.visit_tins_inner(f)
    }
    fn release_hold(&self) -> Option<Duration> {
        self.release_hold_inner()
    }
    fn release_state(&mut self) -> bool {
        self.books().backlog().packets == 0 && self.release_state_inner()
    }
    fn state_bytes(&self) -> usize {
        self.state_bytes_inner()
    }
    fn reclaim_idle(&mut self, now: Time, budget: u32) -> u32 {
        self.reclaim_idle_inner(now, budget)
    }
}
