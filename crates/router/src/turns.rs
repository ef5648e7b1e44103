//! How long the event loop works in one turn: the stretch between two waits in which it does not
//! look at its receive rings again. That is the longest forwarding pause the shaper causes itself
//! (a receive or transmit burst, a piece of the stats copy, a reload's take-over step, a control
//! reply), which `stat` reports as `loop_turn_ns` and `long_turns` and `/metrics` as
//! `linkshare_loop_turn_max_seconds` and `linkshare_loop_long_turns_total`.
//!
//! Principles:
//! * a turn runs from the top of the loop to the next one, less the time it waited: the wait for
//!   events and any receive-coalescing sleep, each told with [`TurnWatch::wait`];
//! * measured on the monotonic clock: a turn the kernel preempted half way (another task took
//!   the CPU) is as long as it took, preemption included. What the clock cannot see is the
//!   time between an event and the thread running again (a wake-up delayed by the CPU
//!   scheduler): a late RTT with short turns is the machine's scheduling, not the loop's work;
//! * O(1) per turn: one histogram record ([`Hist`]), no allocation.

use crate::hist::Hist;

/// A turn longer than this is counted in `long_turns` (the bound on a forwarding pause).
pub const LONG_TURN_NS: u64 = 1_000_000;

/// The loop's turns as a histogram of their work.
#[derive(Default)]
pub(crate) struct TurnWatch {
    /// When the turn under way began (ns on the shaper's clock; 0: no turn yet).
    start: u64,
    /// How long the turn under way waited so far.
    waited: u64,
    hist: Hist,
    long: u64,
}

impl TurnWatch {
    /// The turn under way waited `ns` (for events, or asleep).
    pub fn wait(&mut self, ns: u64) {
        self.waited = self.waited.saturating_add(ns);
    }

    /// A turn ends and the next begins at `now`.
    pub fn end(&mut self, now: u64) {
        let waited = std::mem::take(&mut self.waited);
        if self.start != 0 {
            let work = now.saturating_sub(self.start).saturating_sub(waited);
            self.hist.record(work);
            if work > LONG_TURN_NS {
                self.long += 1;
            }
        }
        self.start = now;
    }

    /// The turns' work so far.
    pub fn hist(&self) -> &Hist {
        &self.hist
    }

    /// Turns longer than [`LONG_TURN_NS`].
    pub fn long_turns(&self) -> u64 {
        self.long
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_turn_is_its_span_less_its_wait_and_long_ones_are_counted() {
        let mut w = TurnWatch::default();
        w.wait(7); // before the first top of the loop: not a turn
        w.end(1_000);
        assert_eq!(w.hist().count(), 0);
        // 5 ms, of which 4.99 ms waited in two pieces: 10 µs of work.
        w.wait(4_000_000);
        w.wait(990_000);
        w.end(1_000 + 5_000_000);
        assert_eq!(w.hist().max(), 10_000);
        w.end(1_000 + 5_000_000 + 1_500_000); // 1.5 ms of work
        w.end(1_000 + 5_000_000 + 1_500_000 + 800_000); // 0.8 ms
        assert_eq!(w.hist().count(), 3);
        assert_eq!(w.hist().max(), 1_500_000);
        assert_eq!(w.long_turns(), 1);
        // A wait longer than the span (clock reads a few ns apart) is no negative turn.
        w.wait(10_000_000);
        w.end(1_000 + 7_400_000);
        assert_eq!(w.hist().count(), 4);
        assert_eq!(w.long_turns(), 1);
    }
}
