//! How early the loop arms its timer before a paced departure, learnt from the timer itself.
//!
//! A timerfd wake-up is late by the machine's timer latency: tens of µs on a VM (docs/router.md,
//! "Pacing": p50 32 µs, p99 77 µs here), a few µs on bare metal. The loop arms the timer
//! `margin` before the instant it waits for and spins the rest (a spin is not late), so a
//! departure is late only when the timer is later than the margin. A fixed margin is wrong for
//! one of the two machines: too short on a VM (p99 lateness = p99 latency − margin), CPU thrown
//! away spinning on bare metal.
//!
//! Principles: every timer wake-up is a sample of the latency (`woken − armed`). The margin is
//! the [`QUANTILE`] of the last [`WINDOW`] samples plus [`SLACK`], clamped to
//! [`MIN_MARGIN_NS`]..=`max`; it starts at `max` until a window is full. O(1) per sample, the
//! quantile recomputed once per window (a sort of [`WINDOW`] integers). `--busy-poll-us US`
//! fixes the margin instead (0: never spin). Every sample also goes into a histogram that
//! `stat` reports (`timer_wake_ns`): the timer's own lateness, the floor under the pacing
//! lateness of a loop that sleeps — what the margin has to cover — fixed margin or learnt.
//!
//! The spin is bounded by a duty cycle: the loop reports the time it slept, and when it was
//! busy more than [`MAX_DUTY`] of a [`DUTY_WINDOW_NS`] window the margin's cap halves (down to
//! no spin at all); a window under [`RELAX_DUTY`] doubles it back towards `max`. A learnt margin
//! as long as the gap between departures would otherwise keep the thread busy without end: as
//! an ordinary thread that is a core thrown away, under `--realtime` the kernel's fair server
//! (or RT throttling) then takes the core away for 50 ms in every second to run the starved
//! ordinary tasks, a stall every queued packet waits out.

use crate::hist::Hist;

/// Samples per window.
pub const WINDOW: usize = 256;
/// The quantile of timer latency the margin covers.
pub const QUANTILE: f64 = 0.995;
/// Added to that quantile: the loop turn between the wake-up and the departure.
pub const SLACK: u64 = 5_000;
/// The shortest margin.
pub const MIN_MARGIN_NS: u64 = 10_000;
/// The longest margin when learning.
pub const MAX_MARGIN_NS: u64 = 200_000;
/// The margin before the first window is full.
pub const START_MARGIN_NS: u64 = 50_000;
/// The window over which the loop's busy time is measured.
pub const DUTY_WINDOW_NS: u64 = 100_000_000;
/// Busier than this (a fraction of the window): the spin's cap halves.
pub const MAX_DUTY: f64 = 0.8;
/// Less busy than this: the cap doubles back towards `max`.
pub const RELAX_DUTY: f64 = 0.6;

/// The early-wake margin: fixed, or learnt from the timer's latency.
#[derive(Clone, Debug)]
pub struct EarlyWake {
    fixed: Option<u64>,
    /// Every timer wake-up's lateness since start.
    hist: Hist,
    max: u64,
    margin: u64,
    samples: Vec<u64>,
    /// The duty cycle's cap on the margin.
    cap: u64,
    /// Start of the current duty window (0: not started) and the time slept in it.
    window_start: u64,
    slept: u64,
}

impl EarlyWake {
    /// A margin learnt from the timer, between [`MIN_MARGIN_NS`] and `max`.
    pub fn learning(max: u64) -> EarlyWake {
        let max = max.max(MIN_MARGIN_NS);
        EarlyWake {
            fixed: None,
            hist: Hist::default(),
            max,
            margin: START_MARGIN_NS.clamp(MIN_MARGIN_NS, max),
            samples: Vec::with_capacity(WINDOW),
            cap: max,
            window_start: 0,
            slept: 0,
        }
    }

    /// A fixed margin (`--busy-poll-us`).
    pub fn fixed(ns: u64) -> EarlyWake {
        EarlyWake {
            fixed: Some(ns),
            hist: Hist::default(),
            max: ns,
            margin: ns,
            samples: Vec::new(),
            cap: ns,
            window_start: 0,
            slept: 0,
        }
    }

    /// Arm the timer this long before the instant waited for; waits shorter than this are spun.
    pub fn margin_ns(&self) -> u64 {
        self.margin.min(self.cap)
    }

    /// The loop slept (blocked waiting for an event) from `from` to `to` (ns).
    pub fn slept(&mut self, from: u64, to: u64) {
        self.slept += to.saturating_sub(from);
    }

    /// Close the duty window if `now` is past its end: adjust the cap to the busy fraction.
    pub fn duty(&mut self, now: u64) {
        if self.fixed.is_some() {
            return;
        }
        if self.window_start == 0 || now < self.window_start {
            self.window_start = now;
            self.slept = 0;
            return;
        }
        let span = now - self.window_start;
        if span < DUTY_WINDOW_NS {
            return;
        }
        let busy = 1.0 - self.slept.min(span) as f64 / span as f64;
        if busy > MAX_DUTY {
            // Halve what is in use; below the floor, stop spinning altogether.
            let half = self.margin_ns() / 2;
            self.cap = if half < MIN_MARGIN_NS { 0 } else { half };
        } else if busy < RELAX_DUTY {
            self.cap = self.cap.saturating_mul(2).max(MIN_MARGIN_NS).min(self.max);
        }
        self.window_start = now;
        self.slept = 0;
    }

    /// A timer armed for `armed` (ns) woke the loop at `woken`.
    pub fn record(&mut self, armed: u64, woken: u64) {
        let late = woken.saturating_sub(armed);
        self.hist.record(late);
        if self.fixed.is_some() {
            return;
        }
        self.samples.push(late);
        if self.samples.len() == WINDOW {
            self.samples.sort_unstable();
            let i = ((WINDOW - 1) as f64 * QUANTILE).round() as usize;
            let q = self.samples[i.min(WINDOW - 1)];
            self.margin = q.saturating_add(SLACK).clamp(MIN_MARGIN_NS, self.max);
            self.samples.clear();
        }
    }

    /// How late the timer woke the loop, every time it slept for one.
    pub fn timer_hist(&self) -> &Hist {
        &self.hist
    }

    /// Whether the margin is learnt (not fixed).
    pub fn is_learning(&self) -> bool {
        self.fixed.is_none()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_margin_follows_the_timers_tail_within_bounds() {
        let mut w = EarlyWake::learning(MAX_MARGIN_NS);
        assert_eq!(w.margin_ns(), START_MARGIN_NS);
        // A VM-like timer: mostly 30 µs late, 1 % at 70 µs.
        for i in 0..WINDOW {
            let late = if i % 100 == 0 { 70_000 } else { 30_000 };
            w.record(1_000_000, 1_000_000 + late);
        }
        assert_eq!(w.margin_ns(), 75_000);
        // A bare-metal timer: 2 µs late; the margin shrinks to its floor.
        for _ in 0..WINDOW {
            w.record(5_000, 7_000);
        }
        assert_eq!(w.margin_ns(), MIN_MARGIN_NS);
        // A terrible timer: capped.
        for _ in 0..WINDOW {
            w.record(0, 5_000_000);
        }
        assert_eq!(w.margin_ns(), MAX_MARGIN_NS);
        // Every sample is in the histogram: a third of them 30 µs late, so the median too
        // (a quantile is at most 12.5 % above the true value, hist.rs).
        assert_eq!(w.timer_hist().count(), 3 * WINDOW as u64);
        let p50 = w.timer_hist().quantile(0.5);
        assert!((30_000..=33_750).contains(&p50), "{p50}");
        assert_eq!(w.timer_hist().max(), 5_000_000);
    }

    #[test]
    fn a_busy_loop_spins_less_until_it_is_idle_again() {
        let mut w = EarlyWake::learning(MAX_MARGIN_NS);
        let m0 = w.margin_ns();
        let mut t = 1_000;
        w.duty(t);
        // Windows 90 % busy: the cap halves each time, then no spin at all.
        let mut seen = vec![];
        for _ in 0..4 {
            w.slept(t, t + DUTY_WINDOW_NS / 10);
            t += DUTY_WINDOW_NS;
            w.duty(t);
            seen.push(w.margin_ns());
        }
        assert_eq!(seen, vec![m0 / 2, m0 / 4, 0, 0]);
        // Between the two thresholds: unchanged.
        w.slept(t, t + DUTY_WINDOW_NS * 3 / 10);
        t += DUTY_WINDOW_NS;
        w.duty(t);
        assert_eq!(w.margin_ns(), 0);
        // Mostly asleep: the cap comes back, never above the learnt margin.
        for _ in 0..8 {
            w.slept(t, t + DUTY_WINDOW_NS / 2 + DUTY_WINDOW_NS / 10);
            t += DUTY_WINDOW_NS;
            w.duty(t);
        }
        assert_eq!(w.margin_ns(), m0);
        // A window not over yet changes nothing.
        w.duty(t + DUTY_WINDOW_NS / 2);
        assert_eq!(w.margin_ns(), m0);
    }

    #[test]
    fn a_fixed_margin_does_not_learn() {
        let mut w = EarlyWake::fixed(50_000);
        for _ in 0..2 * WINDOW {
            w.record(0, 1_000_000);
        }
        assert_eq!(w.margin_ns(), 50_000);
        assert!(!w.is_learning());
        // The timer's lateness is still reported.
        assert_eq!(w.timer_hist().count(), 2 * WINDOW as u64);
        assert_eq!(w.timer_hist().max(), 1_000_000);
        assert_eq!(EarlyWake::fixed(0).margin_ns(), 0);
    }
}
