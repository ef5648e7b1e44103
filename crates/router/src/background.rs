//! The datapath loop's work besides forwarding — a rebuilt HTB's take-over of the tree it
//! replaces (reload.rs, `Htb::adopt_step`) and the copy of the class counters for the stats plane
//! (control/copier.rs) — done in pieces, the pieces paced, each one measured.
//!
//! Principles:
//! * **a piece is bounded by time and by count**: it ends at the first look at the clock past
//!   [`PIECE_NS`] of wall time (the clock is read every `dir::ADOPT_CHUNK` classes of a take-over,
//!   every `copier::BATCH` classes of a copy), and never does more than a fixed number of
//!   classes whatever the clock says (`dir::ADOPT_STEP_MAX`; a copy's batches are bounded by
//!   the same budget). So no piece pauses forwarding for much more than [`PIECE_NS`], however
//!   many classes there are, and a test can count the work of each;
//! * **pieces are paced**: after a piece that cost the thread `c` ns of CPU, the next one waits
//!   [`REST`] × `c` (at most [`MAX_REST_NS`]), and the loop sleeps on its timer meanwhile (it does
//!   not spin) while it forwards as usual. Work in pieces back to back — a take-over of 100,000
//!   classes is hundreds of pieces, a copy of their counters tens — keeps the thread running
//!   for tens of milliseconds without a sleep: it then has used more than its fair share of its
//!   CPU, and the kernel's fair scheduler (EEVDF, Linux 6.6 and later:
//!   Documentation/scheduler/sched-eevdf.rst) no longer lets it preempt the task beside it, so
//!   its next packet waits for that task's whole slice (a millisecond or more). Paced, the work
//!   takes at most 1/(1 + [`REST`]) of the thread's time, below its share beside any other task,
//!   and a wake-up still runs at once (its short slice, `--slice-us`);
//! * **a take-over goes first**: while a direction takes over its old tree, the copy waits
//!   (a copy of a tree taking over would be started over anyway, copier.rs);
//! * **measured per piece**: its wall time (the forwarding pause it made), its thread's CPU
//!   time (`sys::thread_cpu_ns`: what it cost, whatever else ran) and whether the thread was
//!   preempted or blocked in it (`sys::thread_switches`), per kind — install, take-over step,
//!   copy piece — in `stat --json` (`loop_work`). The install of a reload is measured the
//!   same way (reload.rs), though it is one piece and not paced.

use linkshare_core::Time;

use crate::clock::after;
use crate::control::snapshot::{LoopWork, WorkPieces};
use crate::control::stat::quantiles_ns;
use crate::dir::Dir;
use crate::hist::Hist;
use crate::role::Role;
use crate::{sys, Shaper};

/// The wall time a piece works at most: it ends at the first look at the clock past it.
pub const PIECE_NS: u64 = 100_000;
/// After a piece, the next waits this many times the CPU time the piece took.
pub const REST: u64 = 2;
/// The longest rest after a piece (a piece that took long must not stall the work for long).
pub const MAX_REST_NS: u64 = 1_000_000;

/// The kinds of work measured.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    Install = 0,
    Adopt = 1,
    Copy = 2,
}

#[derive(Default)]
struct Meter {
    pieces: u64,
    wall: Hist,
    cpu: Hist,
    max_units: u64,
    preempted: u64,
    blocked: u64,
}

impl Meter {
    fn view(&self) -> WorkPieces {
        WorkPieces {
            pieces: self.pieces,
            wall_ns: quantiles_ns(&self.wall),
            cpu_ns: quantiles_ns(&self.cpu),
            max_units: self.max_units,
            preempted: self.preempted,
            blocked: self.blocked,
        }
    }
}

/// A piece under way: when it began, on the wall clock and on the thread's CPU clock, and the
/// thread's context switches then.
pub(crate) struct Piece {
    wall0: u64,
    cpu0: u64,
    switches0: (u64, u64),
}

/// What a piece took: wall and CPU ns, and whether it blocked and was preempted.
#[derive(Clone, Copy, Debug, Default)]
struct Spent {
    wall: u64,
    cpu: u64,
    blocked: bool,
    preempted: bool,
}

impl Piece {
    pub fn start() -> Piece {
        Piece {
            switches0: sys::thread_switches(),
            wall0: sys::monotonic_ns(),
            cpu0: sys::thread_cpu_ns(),
        }
    }

    /// Whether the piece has worked its [`PIECE_NS`].
    pub fn out_of_time(&self) -> bool {
        sys::monotonic_ns().saturating_sub(self.wall0) >= PIECE_NS
    }

    /// What the piece took so far.
    fn spent(&self) -> Spent {
        let (cpu, wall) = (sys::thread_cpu_ns(), sys::monotonic_ns());
        let (vol, invol) = sys::thread_switches();
        Spent {
            wall: wall.saturating_sub(self.wall0),
            cpu: cpu.saturating_sub(self.cpu0),
            blocked: vol > self.switches0.0,
            preempted: invol > self.switches0.1,
        }
    }
}

/// The loop's pacing of its work besides forwarding, and what each piece cost.
#[derive(Default)]
pub(crate) struct Background {
    /// No piece before this instant (the rest after the last one).
    rest_until: Time,
    meters: [Meter; 3],
}

/// How long the work rests after a piece that cost `cpu_ns` of the thread's CPU.
pub(crate) fn rest_ns(cpu_ns: u64) -> u64 {
    cpu_ns.saturating_mul(REST).min(MAX_REST_NS)
}

impl Background {
    /// Record piece `p` of `kind`, which did `units` classes; its CPU time.
    pub fn record(&mut self, kind: Kind, p: &Piece, units: u64) -> u64 {
        let s = p.spent();
        self.note(kind, s, units);
        s.cpu
    }

    fn note(&mut self, kind: Kind, s: Spent, units: u64) {
        let m = &mut self.meters[kind as usize];
        m.pieces += 1;
        m.wall.record(s.wall);
        m.cpu.record(s.cpu);
        m.max_units = m.max_units.max(units);
        m.preempted += u64::from(s.preempted);
        m.blocked += u64::from(s.blocked);
    }

    /// A piece that cost `cpu_ns` ended at `now`: the next waits its rest.
    fn rest(&mut self, now: Time, cpu_ns: u64) {
        self.rest_until = after(now, rest_ns(cpu_ns));
    }

    /// What the pieces cost so far, for `stat`.
    pub fn view(&self) -> LoopWork {
        LoopWork {
            install: self.meters[Kind::Install as usize].view(),
            adopt: self.meters[Kind::Adopt as usize].view(),
            copy: self.meters[Kind::Copy as usize].view(),
        }
    }
}

impl<R: Role> Shaper<R> {
    /// Whether work besides forwarding is under way: a take-over, or the role's copy.
    fn background_pending(&self) -> bool {
        self.dirs.iter().any(Dir::adopting) || R::copying(self)
    }

    /// The next piece of the work besides forwarding, if some is under way and its rest is
    /// over: one step of each direction's take-over, else a piece of the role's copy of the
    /// counters. The instant the loop is to come back for the next piece (`None`: no work is
    /// under way); the loop sleeps until then on its timer.
    pub(crate) fn background_step(&mut self, now: Time) -> Option<Time> {
        if !self.background_pending() {
            return None;
        }
        if now < self.bg.rest_until {
            return Some(self.bg.rest_until);
        }
        let piece = Piece::start();
        let cpu = if self.dirs.iter().any(Dir::adopting) {
            let classes = self.step_adoptions(&|| piece.out_of_time());
            self.bg.record(Kind::Adopt, &piece, classes as u64)
        } else {
            let classes = R::copy_piece(self, PIECE_NS);
            self.bg.record(Kind::Copy, &piece, classes)
        };
        let now = self.now();
        self.bg.rest(now, cpu);
        self.background_pending().then_some(self.bg.rest_until)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_piece_rests_twice_its_cpu_time_up_to_a_millisecond() {
        assert_eq!(rest_ns(0), 0);
        assert_eq!(rest_ns(40_000), 80_000);
        assert_eq!(rest_ns(PIECE_NS), REST * PIECE_NS);
        // A piece that took long (a page fault, a lock): the work waits no more than the cap.
        assert_eq!(rest_ns(5_000_000), MAX_REST_NS);
        assert_eq!(rest_ns(u64::MAX), MAX_REST_NS);
    }

    #[test]
    fn pieces_are_counted_per_kind_with_their_largest_unit_count() {
        let mut b = Background::default();
        let s = |wall, cpu, preempted| Spent {
            wall,
            cpu,
            blocked: false,
            preempted,
        };
        b.note(Kind::Adopt, s(120_000, 80_000, true), 700);
        b.note(Kind::Adopt, s(90_000, 85_000, false), 1024);
        b.note(Kind::Copy, s(50_000, 48_000, false), 2048);
        let v = b.view();
        assert_eq!(v.install.pieces, 0);
        assert_eq!((v.adopt.pieces, v.adopt.max_units), (2, 1024));
        assert_eq!(
            (v.adopt.preempted, v.adopt.blocked, v.copy.preempted),
            (1, 0, 0)
        );
        assert_eq!(v.adopt.wall_ns.max, 120_000);
        assert_eq!(v.adopt.cpu_ns.max, 85_000);
        assert_eq!((v.copy.pieces, v.copy.max_units), (1, 2048));
        b.rest(Time(1_000), 85_000);
        assert_eq!(b.rest_until, Time(1_000 + 170_000));
    }
}
