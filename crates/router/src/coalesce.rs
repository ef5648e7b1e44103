//! Receive coalescing (`--rx-coalesce-us`): when the loop should sleep a little before its next
//! receive turn so that the turn takes a batch.
//!
//! Principles. Each loop turn pays a few system calls whatever it carries (the wait for events,
//! the transmit kick, the clock): at 350,000 frames a second a loop that turns for every frame
//! or two spends more on those than on the frames (docs/benchmarks-history.md, "Receive coalescing"). A
//! NIC solves the same problem with interrupt coalescing (`ethtool -C rx-usecs`), NAPI by
//! polling while traffic lasts. Here, after a turn that took some frames and emptied the rings
//! (one that stopped at its budget leaves a backlog, and the next turn follows at once), the
//! loop sleeps up to the coalescing time, never past the margin before its next departure (run.rs), and the next
//! turn takes what gathered meanwhile.
//!
//! A sleep delays the frames that arrive during it, so it is taken only where it pays: when the
//! arrival rate of the last [`RATE_WINDOW_NS`] would gather at least [`MIN_FRAMES`] frames in
//! one coalescing time (with 50 µs: from 80,000 frames a second). One request and its response
//! at a time (UDP_RR, a ping, a TCP handshake) never reach that rate and are forwarded at once;
//! this is the rate-adaptive rule of NICs' `adaptive-rx`. The first frame after a quiet spell is
//! never held either: a turn that took nothing does not sleep, and a turn only sleeps after it
//! has forwarded what it took.
//!
//! Cost: O(1) a turn, no allocation. Pure: `now` is an argument.

/// The arrival rate is measured over windows of this length (ns).
pub const RATE_WINDOW_NS: u64 = 1_000_000;

/// A sleep pays when the recent rate gathers at least this many frames in one coalescing time.
pub const MIN_FRAMES: u64 = 4;

/// The decision's state (see the module docs).
#[derive(Clone, Debug)]
pub struct Coalesce {
    /// The coalescing time (ns); 0: never.
    time_ns: u64,
    /// Start of the current rate window and the frames taken since.
    start: u64,
    frames: u64,
    /// The last full window's rate was high enough.
    busy: bool,
}

impl Coalesce {
    pub fn new(time_ns: u64) -> Coalesce {
        Coalesce {
            time_ns,
            start: 0,
            frames: 0,
            busy: false,
        }
    }

    /// A loop turn that ended at `now` took `frames` frames; `drained`: it emptied the rings and
    /// the loop would now wait for events (not: it stopped at its budget, or has frames to
    /// retry or a stop to finish). Called for every turn, so the rate counts every frame.
    /// Returns how long to sleep before the next turn (ns), before the caller's cap at its
    /// next departure; 0: do not sleep.
    pub fn after_turn(&mut self, now: u64, frames: usize, drained: bool) -> u64 {
        if self.time_ns == 0 {
            return 0;
        }
        self.frames += frames as u64;
        let elapsed = now.saturating_sub(self.start);
        if elapsed >= RATE_WINDOW_NS {
            // frames / elapsed × time ≥ MIN_FRAMES, in integers.
            self.busy = u128::from(self.frames) * u128::from(self.time_ns)
                >= u128::from(MIN_FRAMES) * u128::from(elapsed);
            self.start = now;
            self.frames = 0;
        }
        if self.busy && frames > 0 && drained {
            self.time_ns
        } else {
            0
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Turns every `gap` ns taking `per_turn` frames, for `for_ns`; returns how many slept.
    fn run(c: &mut Coalesce, t0: u64, gap: u64, per_turn: usize, for_ns: u64) -> (u64, u64) {
        let (mut turns, mut slept) = (0, 0);
        let mut now = t0;
        while now < t0 + for_ns {
            turns += 1;
            if c.after_turn(now, per_turn, true) > 0 {
                slept += 1;
            }
            now += gap;
        }
        (turns, slept)
    }

    #[test]
    fn a_flood_is_coalesced_after_its_first_window() {
        // 350,000 frames a second, two a turn: a turn every 5.7 µs.
        let mut c = Coalesce::new(50_000);
        let (turns, slept) = run(&mut c, 1_000_000_000, 5_714, 2, 10_000_000);
        assert!(
            slept > 0 && turns - slept <= RATE_WINDOW_NS / 5_714 + 2,
            "{turns} {slept}"
        );
        assert_eq!(c.after_turn(1_010_005_714, 3, true), 50_000);
    }

    #[test]
    fn one_request_at_a_time_is_never_held() {
        // UDP_RR through the shaper: a frame every 40 µs (25,000 a second), below 4 frames in
        // 50 µs.
        let mut c = Coalesce::new(50_000);
        let (_, slept) = run(&mut c, 0, 40_000, 1, 100_000_000);
        assert_eq!(slept, 0);
    }

    #[test]
    fn a_turn_left_with_a_backlog_an_empty_turn_or_no_coalescing_time_never_sleeps() {
        let mut c = Coalesce::new(50_000);
        run(&mut c, 0, 5_000, 2, 5_000_000);
        assert_eq!(
            c.after_turn(5_000_000, 256, false),
            0,
            "the rings have a backlog"
        );
        assert_eq!(
            c.after_turn(5_005_000, 0, true),
            0,
            "nothing arrived: do not hold"
        );
        let mut off = Coalesce::new(0);
        let (_, slept) = run(&mut off, 0, 5_000, 2, 5_000_000);
        assert_eq!(slept, 0);
    }

    #[test]
    fn it_stops_when_the_flood_stops() {
        let mut c = Coalesce::new(50_000);
        run(&mut c, 0, 5_000, 2, 5_000_000);
        assert!(c.after_turn(5_000_000, 2, true) > 0);
        // A slow trickle afterwards: one frame every 100 µs; within two windows it is not held.
        let (_, slept) = run(&mut c, 5_100_000, 100_000, 1, 10_000_000);
        assert!(slept <= 20, "{slept}");
        assert_eq!(c.after_turn(16_000_000, 1, true), 0);
    }
}
