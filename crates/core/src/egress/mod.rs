//! The egress model every driver shares: scheduler → device buffer → wire, and when to call again.
//!
//! Sans-IO like the rest of the core: `now` is an argument, nothing here reads a clock or touches
//! a device, and all arithmetic is in integers. The simulator's link (`crates/sim/src/link.rs`)
//! and the real shaper's service loop (`crates/router/src/lib.rs`) are thin adapters around one
//! [`Egress`], so the simulator and the shaper cannot disagree about when a packet leaves the
//! scheduler or when it leaves the wire.
//!
//! ```text
//!  arrivals ──enqueue──▶ scheduler (the policy's qdisc)
//!                            │ Egress::pull: dequeue only while the pull rule allows
//!                            ▼
//!                     device buffer (driver / NIC ring, FIFO, `device_buffer` bytes waiting)
//!                            │ the head moves on when the wire frees up
//!                            ▼
//!                     wire (serialises one packet at `rate_bps`) ──▶ the driver's sink
//!
//!  next wake-up = min( scheduler's NotBefore rounded to the timer and clock ticks,
//!                      end of the wire's packet, when the device buffer is full )
//! ```
//!
//! ## The model and where it comes from
//! Seed 001 (Operational and Performance Issues of a CBQ router, §4–§5) shows the driver's
//! buffers defeating link sharing: the ATM driver dequeued from CBQ while its 20 KB software
//! buffer had room, so packets left the scheduler long before the link could send them and
//! waited in a FIFO the scheduler could not reorder; shrinking the buffer to 2 KB restored
//! the shares. Linux bounds the same buffer with byte queue limits (BQL,
//! `lib/dynamic_queue_limits.c`, `netdev_tx_sent_queue`/`netdev_tx_completed_queue` in
//! `include/linux/netdevice.h`): the qdisc is run (`__qdisc_run` in `net/sched/sch_generic.c`)
//! only while the device queue is not stopped, the driver stops it when the bytes handed to
//! the NIC exceed the limit, and a transmit completion restarts it. We model that queue with
//! a fixed limit in bytes and an exact serialiser:
//!
//! * **The wire** holds the packet being serialised; **the device buffer** holds packets waiting
//!   behind it, in FIFO order.
//! * **The pull rule.** The scheduler is asked for a packet when the wire is idle (the packet
//!   goes straight onto it) or when `waiting + full_packet ≤ device_buffer`, where `waiting` is
//!   the bytes in the device buffer and `full_packet` is one full-size packet (`mtu + overhead`
//!   in the simulator, a full Ethernet frame in the router). The buffer never holds more than
//!   `device_buffer` bytes whatever the sizes pulled, and `device_buffer = 0` (anything below one
//!   full packet) lets the scheduler choose the very next packet at the instant the wire frees
//!   up — seed 001 §4.2's ideal. [`Egress::pull`] repeats until the rule says stop or the
//!   scheduler has nothing to give.
//! * **Exact drain.** Packets are serialised back to back at `rate_bps`. A busy period keeps
//!   an origin (integer ns) and an accumulator in bit·ns units (`bits × 10⁹`); a packet adds
//!   `len × 8 × 10⁹`, the wire's packet ends at `origin + ⌈acc / rate⌉`, and on completion the
//!   whole nanoseconds move into the origin and the remainder (`< rate`) is carried. So the
//!   k-th packet of a busy period ends at the first nanosecond at or after its exact fluid end
//!   time: no drift however long the period, whatever the rate. `rate_bps = 0` is an infinitely
//!   fast device (nothing is ever held; the router uses it when it has no rate to pace at).
//! * **Timer ticks (`timer_hz`).** `Dequeued::NotBefore(t)` becomes a wake-up at `t` rounded
//!   **up** to a multiple of `1/timer_hz` s (as a kernel timer of that frequency fires), then up
//!   to the scheduler clock's tick (below), never before `now`. `0` wakes at exactly `t`. At most
//!   one wake-up is pending: an earlier one replaces a later one, a stale one is ignored
//!   ([`Egress::on_wake`]).
//! * **The scheduler's clock (`clock_hz`).** With `clock_hz > 0` the `now` given to the scheduler
//!   is rounded **down** to a multiple of `1/clock_hz` s, as Linux 2.4's jiffies-based
//!   `PSCHED_JIFFIES` clock was (seed 002): time, and so tokens, advance only at ticks.
//!   [`Egress::sched_now`] is that time; drivers use it for `enqueue` too.
//!
//! ## Order of calls
//! The driver owns time; the model owns lengths and instants, and what the driver gives it to
//! hold for each packet in the device (below).
//!
//! * An arrival: `q.enqueue(p, egress.sched_now(now))`, then [`Egress::pull`].
//! * [`Egress::pull`] / [`Egress::pull_one`] hand each dequeued packet to the driver with
//!   `wire_end: Some(t)` when it went straight onto the idle wire (it finishes at `t`), `None`
//!   when it waits in the device buffer; they end with a [`Stop`] saying why.
//! * The wire's packet finished (the driver's event at [`Egress::wire_end`]):
//!   [`Egress::finish_tx`] (or [`Egress::on_tx_done`]) moves the next waiting packet onto the
//!   wire and returns its end; then pull again. A driver without per-packet events (the router)
//!   calls [`Egress::complete_until`] with the current time instead.
//! * The wake-up fired: [`Egress::on_wake`], then pull if it was not stale.
//! * [`Egress::next_wakeup`] is the earliest instant at which pulling again can achieve anything
//!   (without a new arrival).
//!
//! ## What the device holds
//! `Egress<T>` keeps, for each packet in the device, its length and one `T` the driver gives
//! when the packet is pulled (the value [`Egress::pull`]'s `out` returns), and gives that `T`
//! back when the packet leaves the wire ([`Egress::finish_tx`]). The router transmits a frame
//! the moment it is pulled and models only the device's timing: it holds `()` (the default),
//! and the calls that would drop a held value ([`Egress::pull_one`], [`Egress::on_tx_done`],
//! [`Egress::complete_until`], [`Egress::reconfigure`]) exist only for it. The simulator needs
//! its packet again when the wire is done with it: it holds the packet itself, so the device
//! buffer's contents and the model's lengths are one queue, not two kept in step. With
//! `rate_bps = 0` nothing is held: a pulled packet has left at once and its `T` is dropped
//! (the simulator never has a zero rate; its scenarios refuse one).

use std::collections::VecDeque;

use crate::packet::Packet;
use crate::qdisc::{Dequeued, Qdisc};
use crate::units::Time;

#[cfg(test)]
mod tests;

const NS_PER_SEC: u128 = 1_000_000_000;

/// The device an [`Egress`] models. Plain data; see the module docs for each rule.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct EgressConfig {
    /// Rate the wire serialises at, bit/s; 0 = infinitely fast (nothing is held).
    pub rate_bps: u64,
    /// Bytes the device buffer may hold waiting behind the wire.
    pub device_buffer: u64,
    /// One full-size packet (`mtu + overhead`): the room the pull rule asks for.
    pub full_packet: u64,
    /// Frequency of the wake-up timer; 0 = exact wake-ups.
    pub timer_hz: u64,
    /// Resolution of the scheduler's clock; 0 = exact time.
    pub clock_hz: u64,
}

/// Why [`Egress::pull`] stopped asking the scheduler.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[must_use]
pub enum Stop {
    /// The pull rule forbids another packet until the wire's packet ends at `until`.
    DeviceFull { until: Time },
    /// The scheduler has nothing queued.
    Empty,
    /// The scheduler is throttled until `until`. `wake` is the wake-up the driver must arm,
    /// already rounded to the ticks; `None` when an earlier (or the same) wake-up is pending.
    Throttled { until: Time, wake: Option<Time> },
}

/// What one [`Egress::pull_one`] did.
#[derive(Debug, PartialEq, Eq)]
#[must_use]
pub enum Pulled<P> {
    /// A packet for the device: onto the idle wire, ending at `wire_end`, or (`None`) into the
    /// device buffer behind it.
    Packet { packet: P, wire_end: Option<Time> },
    /// No packet; see [`Stop`].
    Stopped(Stop),
}

/// Counters of what the model has seen.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct EgressStats {
    /// Packets and bytes handed to the device (dequeued through the model).
    pub pulled_packets: u64,
    pub pulled_bytes: u64,
    /// Packets and bytes that finished serialisation.
    pub sent_packets: u64,
    pub sent_bytes: u64,
    /// Pulls refused because the device buffer was full.
    pub device_full: u64,
}

/// The egress state machine: one device buffer, one wire, one pending wake-up. `T` is what the
/// device holds for each packet besides its length (module docs, "What the device holds").
#[derive(Clone, Debug)]
pub struct Egress<T = ()> {
    cfg: EgressConfig,
    /// Lengths and held values of the packets waiting behind the wire, in order.
    waiting: VecDeque<(u32, T)>,
    waiting_bytes: u64,
    /// Length, end and held value of the packet on the wire.
    wire: Option<(u32, Time, T)>,
    /// Busy-period origin (ns) and the bit·ns accumulator (module docs, "Exact drain").
    origin: u64,
    acc: u128,
    /// The pending wake-up.
    wake_at: Option<Time>,
    stats: EgressStats,
}

impl<T> Egress<T> {
    pub fn new(cfg: EgressConfig) -> Egress<T> {
        Egress {
            cfg,
            waiting: VecDeque::with_capacity(64),
            waiting_bytes: 0,
            wire: None,
            origin: 0,
            acc: 0,
            wake_at: None,
            stats: EgressStats::default(),
        }
    }

    pub fn config(&self) -> &EgressConfig {
        &self.cfg
    }

    pub fn stats(&self) -> &EgressStats {
        &self.stats
    }

    /// The time the scheduler is told at `now`: rounded down to the clock's tick.
    #[inline]
    pub fn sched_now(&self, now: Time) -> Time {
        Time(round_down_to_tick(now.0, self.cfg.clock_hz))
    }

    /// Bytes waiting in the device buffer (not counting the wire).
    pub fn waiting_bytes(&self) -> u64 {
        self.waiting_bytes
    }

    /// Packets in the device: on the wire and waiting.
    pub fn in_device(&self) -> usize {
        self.waiting.len() + usize::from(self.wire.is_some())
    }

    /// When the wire's packet ends, if the wire is busy.
    pub fn wire_end(&self) -> Option<Time> {
        self.wire.as_ref().map(|w| w.1)
    }

    /// When the last packet in the device leaves the wire: the wire's end with nothing
    /// waiting, else the end of the last waiting packet, serialised back to back behind it — the
    /// instant [`Egress::finish_tx`] will give it (the same exact drain). `None` when the device
    /// holds nothing (an infinitely fast device never does). A driver that hands each packet on
    /// at its departure reads this right after pulling it (the router's emulated line).
    pub fn tail_end(&self) -> Option<Time> {
        self.wire.as_ref()?;
        let rate = u128::from(self.cfg.rate_bps).max(1);
        let bits = u128::from(self.waiting_bytes) * 8 * NS_PER_SEC;
        Some(Time(sat_add(self.origin, (self.acc + bits).div_ceil(rate))))
    }

    /// The pending wake-up, if any.
    pub fn wake_at(&self) -> Option<Time> {
        self.wake_at
    }

    /// Whether the pull rule lets the scheduler be asked for a packet.
    #[inline]
    pub fn has_room(&self) -> bool {
        self.wire.is_none() || self.waiting_bytes + self.cfg.full_packet <= self.cfg.device_buffer
    }

    /// The earliest instant pulling again can achieve anything without a new arrival: the
    /// pending wake-up, or the wire's end while the device buffer is full.
    pub fn next_wakeup(&self) -> Option<Time> {
        let drain = if self.has_room() {
            None
        } else {
            self.wire_end()
        };
        match (self.wake_at, drain) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Pull while the rule allows and the scheduler gives packets; each goes to `out` with its
    /// wire end (as in [`Pulled::Packet`]), and what `out` returns is held with it in the device
    /// until [`Egress::finish_tx`] gives it back. Returns why it stopped.
    pub fn pull<P, Q>(
        &mut self,
        q: &mut Q,
        now: Time,
        out: &mut impl FnMut(P, Option<Time>) -> T,
    ) -> Stop
    where
        P: Packet,
        Q: Qdisc<P> + ?Sized,
    {
        self.pull_with(now, &mut |t| q.dequeue(t), out)
    }

    /// [`Egress::pull`] with the scheduler given as its `dequeue` (called with the scheduler's
    /// time, [`Egress::sched_now`]).
    pub fn pull_with<P: Packet>(
        &mut self,
        now: Time,
        dequeue: &mut impl FnMut(Time) -> Dequeued<P>,
        out: &mut impl FnMut(P, Option<Time>) -> T,
    ) -> Stop {
        loop {
            match self.step(now, dequeue) {
                Ok((packet, wire_end)) => {
                    let len = packet.len();
                    let held = out(packet, wire_end);
                    self.hold(len, wire_end, held);
                }
                Err(stop) => return stop,
            }
        }
    }

    /// One turn of the pull rule: a packet the scheduler gave, counted and timed but not yet
    /// held ([`Egress::hold`] completes it), or why there is none.
    fn step<P: Packet>(
        &mut self,
        now: Time,
        dequeue: &mut impl FnMut(Time) -> Dequeued<P>,
    ) -> Result<(P, Option<Time>), Stop> {
        if !self.has_room() {
            self.stats.device_full += 1;
            let until = self.wire_end().unwrap_or(now);
            return Err(Stop::DeviceFull { until });
        }
        match dequeue(self.sched_now(now)) {
            Dequeued::Packet(packet) => {
                let wire_end = self.admit(packet.len(), now);
                Ok((packet, wire_end))
            }
            Dequeued::Empty => Err(Stop::Empty),
            Dequeued::NotBefore(t) => Err(self.throttled(t, now)),
        }
    }

    /// A packet of `len` bytes enters the device at `now`: counted, and timed if it goes
    /// straight onto the idle wire (its wire end). [`Egress::hold`] puts it in its place.
    fn admit(&mut self, len: u32, now: Time) -> Option<Time> {
        self.stats.pulled_packets += 1;
        self.stats.pulled_bytes += u64::from(len);
        if self.cfg.rate_bps == 0 {
            self.stats.sent_packets += 1;
            self.stats.sent_bytes += u64::from(len);
            return Some(now);
        }
        if self.wire.is_some() {
            return None;
        }
        self.origin = now.0;
        self.acc = 0;
        Some(self.serialise(len))
    }

    /// The packet [`Egress::admit`] timed, with its held value: onto the wire (`wire_end`) or
    /// behind it; an infinitely fast device holds nothing.
    fn hold(&mut self, len: u32, wire_end: Option<Time>, held: T) {
        if self.cfg.rate_bps == 0 {
            return;
        }
        match wire_end {
            Some(end) => self.wire = Some((len, end, held)),
            None => {
                self.waiting.push_back((len, held));
                self.waiting_bytes += u64::from(len);
            }
        }
    }

    /// The end of `len` bytes serialised right after the previous packet's exact end.
    #[inline]
    fn serialise(&mut self, len: u32) -> Time {
        self.acc += u128::from(len) * 8 * NS_PER_SEC;
        let ns = div_u128(self.acc, self.cfg.rate_bps, true);
        Time(sat_add(self.origin, ns))
    }

    /// The scheduler answered `NotBefore(t)` at `now`: the stop, with a wake-up to arm if it
    /// is earlier than the pending one.
    fn throttled(&mut self, t: Time, now: Time) -> Stop {
        let at = round_up_to_tick(round_up_to_tick(t.0, self.cfg.timer_hz), self.cfg.clock_hz);
        let at = Time(at.max(now.0));
        let wake = if self.wake_at.is_none_or(|w| at < w) {
            self.wake_at = Some(at);
            Some(at)
        } else {
            None
        };
        Stop::Throttled { until: t, wake }
    }

    /// The wire finished its packet (at its end, [`Egress::wire_end`]): returns the value held
    /// for it and, when a packet was waiting, the end of that one, now on the wire. `None`: the
    /// wire was idle. The driver pulls again after this.
    pub fn finish_tx(&mut self) -> Option<(T, Option<Time>)> {
        let (len, _, done) = self.wire.take()?;
        self.stats.sent_packets += 1;
        self.stats.sent_bytes += u64::from(len);
        let rate = self.cfg.rate_bps.max(1);
        let whole = div_u128(self.acc, rate, false);
        self.origin = sat_add(self.origin, whole);
        self.acc -= whole * u128::from(rate);
        let next = self.waiting.pop_front().map(|(len, held)| {
            self.waiting_bytes -= u64::from(len);
            let end = self.serialise(len);
            self.wire = Some((len, end, held));
            end
        });
        Some((done, next))
    }

    /// The wake-up armed for `now` fired. `false`: stale (a later or replaced wake-up), ignore
    /// it; `true`: pull now.
    pub fn on_wake(&mut self, now: Time) -> bool {
        if self.wake_at != Some(now) {
            return false;
        }
        self.wake_at = None;
        true
    }
}

/// The calls of a driver that holds nothing in the device (the router: it transmits a frame
/// when it is pulled and uses the model for the device's timing only).
impl Egress<()> {
    /// Ask the scheduler for at most one packet, under the pull rule.
    pub fn pull_one<P, Q>(&mut self, q: &mut Q, now: Time) -> Pulled<P>
    where
        P: Packet,
        Q: Qdisc<P> + ?Sized,
    {
        self.pull_one_with(now, &mut |t| q.dequeue(t))
    }

    /// [`Egress::pull_one`] with the scheduler given as its `dequeue` (called with the
    /// scheduler's time, [`Egress::sched_now`]).
    pub fn pull_one_with<P: Packet>(
        &mut self,
        now: Time,
        dequeue: &mut impl FnMut(Time) -> Dequeued<P>,
    ) -> Pulled<P> {
        match self.step(now, dequeue) {
            Ok((packet, wire_end)) => {
                self.hold(packet.len(), wire_end, ());
                Pulled::Packet { packet, wire_end }
            }
            Err(stop) => Pulled::Stopped(stop),
        }
    }

    /// The wire finished its packet (at its end, [`Egress::wire_end`]): the next waiting packet
    /// goes onto the wire; returns its end ([`Egress::finish_tx`] without the held value).
    pub fn on_tx_done(&mut self) -> Option<Time> {
        self.finish_tx().and_then(|(_, next)| next)
    }

    /// Complete every transmission that ended by `now` (for drivers that do not get an event
    /// per packet), and forget a wake-up that is due. Returns how many packets finished.
    pub fn complete_until(&mut self, now: Time) -> usize {
        let mut n = 0;
        while self.wire_end().is_some_and(|end| end <= now) {
            let _ = self.on_tx_done();
            n += 1;
        }
        if self.wake_at.is_some_and(|w| w <= now) {
            self.wake_at = None;
        }
        n
    }

    /// Change the device (a reload in the router). Packets already in the device keep their
    /// place; the new rate applies from the next packet to start (the fraction of a nanosecond
    /// carried so far is dropped).
    pub fn reconfigure(&mut self, cfg: EgressConfig) {
        if cfg.rate_bps != self.cfg.rate_bps {
            if let Some((_, end, _)) = &self.wire {
                self.origin = end.0;
            }
            self.acc = 0;
            if cfg.rate_bps == 0 {
                // An infinitely fast device holds nothing: what it held has left.
                for len in self
                    .wire
                    .take()
                    .map(|w| w.0)
                    .into_iter()
                    .chain(self.waiting.drain(..).map(|w| w.0))
                {
                    self.stats.sent_packets += 1;
                    self.stats.sent_bytes += u64::from(len);
                }
                self.waiting_bytes = 0;
            }
        }
        self.cfg = cfg;
    }
}

#[inline]
fn sat_add(a: u64, b: u128) -> u64 {
    (u128::from(a) + b).min(u128::from(u64::MAX)) as u64
}

/// `a / b` rounded up (`up`) or down. The accumulator stays below the rate plus one packet's
/// bit·ns, so it almost always fits in 64 bits: then the division is done in 64 bits (the same
/// quotient, without the 128-bit division routine). `b > 0`.
#[inline]
fn div_u128(a: u128, b: u64, up: bool) -> u128 {
    match u64::try_from(a) {
        Ok(a) if up => u128::from(a.div_ceil(b)),
        Ok(a) => u128::from(a / b),
        Err(_) if up => a.div_ceil(u128::from(b)),
        Err(_) => a / u128::from(b),
    }
}

/// `t` (ns) rounded up to a multiple of `1/hz` seconds (itself rounded up to the ns); `hz = 0`
/// leaves it unchanged.
#[inline]
pub fn round_up_to_tick(t: u64, hz: u64) -> u64 {
    if hz == 0 {
        return t;
    }
    let ticks = (u128::from(t) * u128::from(hz)).div_ceil(NS_PER_SEC);
    let ns = (ticks * NS_PER_SEC).div_ceil(u128::from(hz));
    ns.min(u128::from(u64::MAX)) as u64
}

/// `t` (ns) rounded down to a multiple of `1/hz` seconds (the tick's start, rounded up to the
/// ns); `hz = 0` leaves it unchanged.
#[inline]
pub fn round_down_to_tick(t: u64, hz: u64) -> u64 {
    if hz == 0 {
        return t;
    }
    let ticks = u128::from(t) * u128::from(hz) / NS_PER_SEC;
    let ns = (ticks * NS_PER_SEC).div_ceil(u128::from(hz));
    ns.min(u128::from(t)) as u64
}
