//! What differs between the single shaper and one worker of `--workers N`: the [`Role`] a
//! [`Shaper`] is built with, chosen once, at start, by its type.
//!
//! ## Principles
//! * **One loop, two roles.** A [`Shaper`] — its two ports, its two [`crate::dir::Dir`]s, its
//!   clock, buffer pool and memory bound, and the event loop over them (run.rs) — is the same
//!   for both. Its role adds only what one of them has: the single shaper ([`Single`],
//!   single.rs) serves the control socket, signals, the policy builder thread and the stats
//!   plane; a worker ([`Link`], workers/) steers each frame to the shard that owns its class,
//!   hands frames over to its peers and obeys the control thread.
//! * **No "am I a worker" question at run time.** `Shaper<R>` is generic over its role, so each
//!   hook below is resolved when the crate is compiled: the per-frame path ([`Role::admit`])
//!   and the loop's steps call the role's code directly, with no branch on what the shaper is.
//! * **Hooks at the loop's seams, nothing else.** The loop calls, in order: [`Role::start`]
//!   once (its fds into the loop's epoll); each turn [`Role::receiving`] and, per frame,
//!   [`Role::admit`], then [`Role::end_receive`]; every 100 ms [`Role::housekeeping`];
//!   while stopping [`Role::take_pending`]; after each wait [`Role::on_events`] with the
//!   tokens that were ready; at the end [`Role::stop`]. Before each wait, background.rs asks
//!   [`Role::copying`] and runs [`Role::copy_piece`] when a piece is due. [`Role::discard`]
//!   frees what a take-over finished with, [`Role::fill_snapshot`] adds the role's counters to
//!   `stat`.
//!
//! [`Single`]: crate::single::Single
//! [`Link`]: crate::workers::Link

use std::os::fd::RawFd;

use linkshare_core::Time;

use crate::control::snapshot::Snapshot;
use crate::frame::Frame;
use crate::Shaper;

/// The part of a [`Shaper`] that is the single shaper's or a worker's alone (see the module).
pub trait Role: Sized {
    /// Add the role's file descriptors to the loop's epoll `ep` and tell the world it runs.
    fn start(s: &mut Shaper<Self>, ep: RawFd) -> anyhow::Result<()>;

    /// The index of this thread among the shaper's datapath threads (its `--cpus` entry).
    fn cpu_index(&self) -> usize;

    /// Whether the loop takes frames from the receive rings (a worker stops when told to).
    fn receiving(&self) -> bool {
        true
    }

    /// A parsed frame of direction `i`, received at `now`: to its direction's burst, or (a
    /// worker) to the worker that owns its class.
    fn admit(s: &mut Shaper<Self>, i: usize, f: Frame, now: Time);

    /// The receive step is over (a worker sends its peers what it received for them).
    fn end_receive(&mut self) {}

    /// Every 100 ms (`now`, also as CLOCK_MONOTONIC ns): a worker's heartbeat, systemd's
    /// watchdog.
    fn housekeeping(&mut self, now: Time, monotonic_ns: u64);

    /// Stopping: take what others still hand over; returns how many frames.
    fn take_pending(_s: &mut Shaper<Self>) -> usize {
        0
    }

    /// Handle the role's tokens among those the wait found `ready`; `stopping` is set when
    /// the shaper is told to stop.
    fn on_events(s: &mut Shaper<Self>, ready: &[u64], stopping: &mut Option<Time>);

    /// The loop ended: close what the role serves.
    fn stop(&mut self) {}

    /// Whether the role has a copy of the counters under way (the single shaper's, for its
    /// stats plane: control/copier.rs), done a piece at a time by background.rs.
    fn copying(_s: &Shaper<Self>) -> bool {
        false
    }

    /// The next piece of that copy, of at most `budget_ns` (wall time); the classes copied.
    fn copy_piece(_s: &mut Shaper<Self>, _budget_ns: u64) -> u64 {
        0
    }

    /// Free something a direction finished with (an old tree after a take-over).
    fn discard(&mut self, garbage: Box<dyn Send>) {
        drop(garbage);
    }

    /// The role's own counters in a `stat` snapshot.
    fn fill_snapshot(&self, _snap: &mut Snapshot) {}
}
