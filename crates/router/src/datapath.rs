//! A direction's datapath without I/O: frames in at an instant, frames out at an instant, and the
//! instant it wants to run again.
//!
//! ## Principles
//! * **Sans-IO, like the core.** A [`Dir`] owns its scheduler, its device model
//!   ([`crate::egress`]) and its emulated link ([`crate::emulate`], whose instants are the
//!   same [`Time`]'s nanoseconds); it never reads a clock or
//!   touches a socket. The driver — the single shaper or one worker of `--workers N`, which own
//!   their directions alike — receives frames from a port, hands them in with the instant it read
//!   ([`Dir::handle_frame`], [`Dir::handle_local`], then [`Dir::end_burst`]), asks what may
//!   leave with the room its transmit ring has ([`Dir::poll_transmit`]), and sleeps until
//!   [`Dir::next_wakeup`]. Every instant is a [`Time`] on the shaper's clock (clock.rs).
//! * **Bursts.** Frames received in one chunk are offered to the scheduler together
//!   (`Qdisc::enqueue_burst`: HTB overlaps the cache misses of the whole burst); a worker's
//!   frames come with the local class its steering found (`Shard::enqueue_burst_to`).
//! * **Nothing lost to a late loop.** A poll that comes later than the instant the direction
//!   waited for first replays the missed stretch (see [`Dir::poll_transmit`]).
//! * **Buffers come back.** Every frame the direction does not send — refused, dropped by the
//!   scheduler or lost on the emulated line — is handed back to the driver for reuse.

use linkshare_core::egress::Stop;
use linkshare_core::{Qdisc, Time};

use crate::clock::{after, min_deadline};
use crate::dir::{Dir, Sched};
use crate::egress;
use crate::frame::Frame;

/// When the transmit ring is full or the kernel asked to retry, look again this much later.
pub(crate) const TX_RETRY_NS: u64 = 20_000;
/// A poll later than this for the instant its direction waited for replays the missed stretch
/// ([`Dir::poll_transmit`]); a shorter lateness loses nothing (a bucket holds at least a frame).
const CATCH_UP_AFTER_NS: u64 = 50_000;

/// What a direction hands its driver while it is polled.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Emit {
    /// Transmit this frame now; `waited` is the instant its departure was told to wait for
    /// (the first frame of a paced departure carries it: the driver records its lateness).
    Send {
        bytes: Vec<u8>,
        waited: Option<Time>,
    },
    /// A buffer not sent (dropped by the scheduler or lost on the emulated line), for reuse.
    Spare(Vec<u8>),
}

impl Dir {
    /// A frame received at `now` for this direction. With a scheduler it joins the burst under
    /// way ([`Dir::end_burst`] offers it); without one it goes onto the emulated line, or is
    /// handed back to be forwarded at once (`Some`). Frames lost on the line go to `spare`.
    pub(crate) fn handle_frame(
        &mut self,
        f: Frame,
        now: Time,
        spare: &mut impl FnMut(Vec<u8>),
    ) -> Option<Vec<u8>> {
        if self.sched.is_some() {
            self.burst.push(f);
            return None;
        }
        match &mut self.emu {
            Some(e) => {
                if let Err(v) = e.push(now.0, f.bytes, f.meta.src, f.meta.dst) {
                    spare(v);
                }
                None
            }
            None => Some(f.bytes),
        }
    }

    /// A frame already classified to local class `local` of this direction's shard (a worker's
    /// steering): joins the burst under way.
    pub(crate) fn handle_local(&mut self, local: u32, f: Frame) {
        self.burst_local.push(local);
        self.burst.push(f);
    }

    /// Keep at most `room` frames of the burst under way (the shaper's memory bound,
    /// membound.rs); the rest go to `spare`. Returns how many were dropped.
    pub(crate) fn trim_burst(&mut self, room: usize, spare: &mut impl FnMut(Vec<u8>)) -> usize {
        if self.burst.len() <= room {
            return 0;
        }
        let dropped = self.burst.len() - room;
        if self.burst_local.len() == self.burst.len() {
            self.burst_local.truncate(room);
        }
        for f in self.burst.drain(room..) {
            spare(f.bytes);
        }
        dropped
    }

    /// Offer the burst under way to the scheduler at `now`; refused and dropped frames (counted
    /// by the scheduler) go to `spare`.
    pub(crate) fn end_burst(&mut self, now: Time, spare: &mut impl FnMut(Vec<u8>)) {
        if self.burst.is_empty() {
            self.burst_local.clear();
            return;
        }
        let mut refused = std::mem::take(&mut self.refused);
        let local = &self.burst_local;
        match &mut self.sched {
            Some(Sched::Shard(q)) if !local.is_empty() && local.len() == self.burst.len() => {
                q.enqueue_burst_to(local, &mut self.burst, now, &mut refused);
                while let Some(d) = q.take_dropped() {
                    refused.push(d);
                }
            }
            Some(s) => {
                let q = s.q();
                q.enqueue_burst(&mut self.burst, now, &mut refused);
                while let Some(d) = q.take_dropped() {
                    refused.push(d);
                }
            }
            None => {}
        }
        self.burst_local.clear();
        for d in refused.drain(..) {
            spare(d.packet.bytes);
        }
        // Left only if the direction has no scheduler (its frames never join a burst).
        for f in self.burst.drain(..) {
            spare(f.bytes);
        }
        self.refused = refused;
    }

    /// Enqueue one frame into local class `local` of this direction's shard at `now` (a frame
    /// a peer worker handed over); refusals and drops (counted by the shard) go to `spare`.
    pub(crate) fn enqueue_local(
        &mut self,
        local: u32,
        f: Frame,
        now: Time,
        spare: &mut impl FnMut(Vec<u8>),
    ) {
        match &mut self.sched {
            Some(Sched::Shard(s)) => {
                if let Err(x) = s.enqueue_to(local, f, now) {
                    spare(x.packet.bytes);
                }
                while let Some(x) = s.take_dropped() {
                    spare(x.packet.bytes);
                }
            }
            // Not a shard (cannot happen on a worker): the scheduler classifies it itself.
            Some(other) => {
                let q = other.q();
                if let Err(x) = q.enqueue(f, now) {
                    spare(x.packet.bytes);
                }
                while let Some(x) = q.take_dropped() {
                    spare(x.packet.bytes);
                }
            }
            None => spare(f.bytes),
        }
    }

    /// Hand `emit` what may leave at `now` while `room` transmit slots last, under the device
    /// model's pull rule ([`egress::egress_turn`], the simulator's model too); sets the
    /// direction's next wake-up. Returns how many missed instants were replayed.
    ///
    /// A poll that comes later than the instant the direction waited for (a loop descheduled
    /// by a busy machine, a late timer) first replays the missed stretch: the scheduler is
    /// asked at each instant it named in turn, from that instant on (at most `catch_up_ns`
    /// back), before it is asked at `now`. The packets it would have sent on time leave at
    /// once, late but not lost: without this a class's bucket overflows while the loop is away
    /// (its burst covers about 1 ms) and the class loses that rate for good, which is what a
    /// late watchdog does to the kernel's HTB. O(steps) turns, each a normal turn; bounded by
    /// the room.
    pub(crate) fn poll_transmit(
        &mut self,
        now: Time,
        mut room: usize,
        emit: &mut impl FnMut(Emit),
    ) -> u64 {
        // An emulated line that serialises by itself has its own clock of departures: no replay
        // before it. When the device model is the emulated wire (`--emulate rate=`), a frame's
        // departure is the model's, so a replay is exact, and any lateness is replayed: the
        // model's wire would otherwise idle for it (with a small device buffer, at every frame).
        let (catch_up, grace) = match (&self.emu, self.wire_bps()) {
            (Some(_), None) => (0, CATCH_UP_AFTER_NS),
            (Some(_), Some(_)) => (self.catch_up_ns, 0),
            (None, _) => (self.catch_up_ns, CATCH_UP_AFTER_NS),
        };
        let mut at = Time(0);
        let mut replayed = 0;
        let late = |e: &Time| catch_up > 0 && e.0.saturating_add(grace) < now.0;
        while let Some(e) = self.eligible.filter(late) {
            let v = e.max(Time(now.0 - catch_up.min(now.0)));
            if v <= at || v >= now || room == 0 {
                break;
            }
            at = v;
            room = self.poll_at(v, room, emit);
            replayed += 1;
            if room == 0 {
                // No room before the replay reached `now`: go on from `v` next time (a poll at
                // `now` would forfeit what is left of the missed stretch).
                self.eligible = Some(self.eligible.map_or(v, |e| e.min(v)));
                min_deadline(&mut self.deadline, after(now, TX_RETRY_NS));
                return replayed;
            }
        }
        self.poll_at(now, room, emit);
        replayed
    }

    /// When this direction wants to be polled again (`None`: only after an arrival).
    pub(crate) fn next_wakeup(&self) -> Option<Time> {
        self.deadline
    }

    /// Frames held: in the scheduler and on the emulated line.
    pub(crate) fn backlog_packets(&self) -> u64 {
        self.sched.as_ref().map_or(0, |s| s.qr().backlog().packets)
            + self.emu.as_ref().map_or(0, |e| e.in_line() as u64)
    }

    /// One turn at `now` (no replay): the emulated line's due frames, then what the device
    /// model pulls from the scheduler. Returns the room left.
    fn poll_at(&mut self, now: Time, mut room: usize, emit: &mut impl FnMut(Emit)) -> usize {
        self.deadline = None;
        room = self.flush_emu(now, room, emit);
        let mut frames = std::mem::take(&mut self.tx_scratch);
        let turn = match &mut self.sched {
            Some(s) => egress::egress_turn(
                &mut self.egress,
                s.q(),
                now,
                room,
                &mut |f: Frame, sent: Option<Time>| frames.push((f, sent)),
                &mut |f: Frame| emit(Emit::Spare(f.bytes)),
                &mut |_| {},
            ),
            None => egress::Turn {
                stop: Some(Stop::Empty),
                next_wakeup: None,
            },
        };
        // The first frame to leave carries the instant the direction waited for (lateness);
        // with nothing sent, that instant still stands.
        let prior = self.eligible.take();
        let (mut eligible, waited) = if frames.is_empty() {
            (None, prior)
        } else {
            (prior, None)
        };
        // The model is the emulated wire: each frame enters the line at its departure from it.
        let model_is_wire = self.wire_bps().is_some();
        for (p, sent) in frames.drain(..) {
            let e = eligible.take();
            match &mut self.emu {
                Some(em) => {
                    let (src, dst) = (p.meta.src, p.meta.dst);
                    let r = match sent.filter(|_| model_is_wire) {
                        Some(t) => em.push_sent(t.0, p.bytes, src, dst),
                        None => em.push(now.0, p.bytes, src, dst),
                    };
                    if let Err(f) = r {
                        emit(Emit::Spare(f));
                    }
                }
                None => {
                    room = room.saturating_sub(1);
                    emit(Emit::Send {
                        bytes: p.bytes,
                        waited: e,
                    });
                }
            }
        }
        self.tx_scratch = frames;
        room = self.flush_emu(now, room, emit);
        self.eligible = waited;
        match turn.stop {
            None => min_deadline(&mut self.deadline, after(now, TX_RETRY_NS)),
            Some(Stop::DeviceFull { until }) => {
                self.eligible = Some(self.eligible.map_or(until, |e| e.max(until)));
            }
            Some(Stop::Throttled { until, .. }) => self.eligible = Some(until),
            // Nothing waits: an instant the direction waited for before it emptied is no
            // instant to replay from (on an emulated wire a replay from it would date the next
            // arrival's departure before the arrival).
            Some(Stop::Empty) => self.eligible = None,
        }
        if let Some(t) = turn.next_wakeup {
            min_deadline(&mut self.deadline, t);
        }
        room
    }

    /// Hand over the emulated line's frames due at `now` while the room lasts; fold its next
    /// due instant into the deadline. Returns the room left.
    fn flush_emu(&mut self, now: Time, mut room: usize, emit: &mut impl FnMut(Emit)) -> usize {
        let Some(em) = self.emu.as_mut() else {
            return room;
        };
        while em.next_due().is_some_and(|t| t <= now.0) {
            if room == 0 {
                min_deadline(&mut self.deadline, after(now, TX_RETRY_NS));
                return room;
            }
            match em.pop_due(now.0) {
                Some(bytes) => {
                    room -= 1;
                    emit(Emit::Send {
                        bytes,
                        waited: None,
                    });
                }
                None => break,
            }
        }
        if let Some(t) = em.next_due() {
            min_deadline(&mut self.deadline, Time(t));
        }
        room
    }
}

#[cfg(test)]
#[path = "datapath_tests.rs"]
mod tests;
