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
//! fixes the margin instead (0: never spin).

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

/// The early-wake margin: fixed, or learnt from the timer's latency.
#[derive(Clone, Debug)]
pub struct EarlyWake {
    fixed: Option<u64>,
    max: u64,
    margin: u64,
    samples: Vec<u64>,
}

impl EarlyWake {
    /// A margin learnt from the timer, between [`MIN_MARGIN_NS`] and `max`.
    pub fn learning(max: u64) -> EarlyWake {
        let max = max.max(MIN_MARGIN_NS);
        EarlyWake {
            fixed: None,
            max,
            margin: START_MARGIN_NS.clamp(MIN_MARGIN_NS, max),
            samples: Vec::with_capacity(WINDOW),
        }
    }

    /// A fixed margin (`--busy-poll-us`).
    pub fn fixed(ns: u64) -> EarlyWake {
        EarlyWake {
            fixed: Some(ns),
            max: ns,
            margin: ns,
            samples: Vec::new(),
        }
    }

    /// Arm the timer this long before the instant waited for; waits shorter than this are spun.
    pub fn margin_ns(&self) -> u64 {
        self.margin
    }

    /// A timer armed for `armed` (ns) woke the loop at `woken`.
    pub fn record(&mut self, armed: u64, woken: u64) {
        if self.fixed.is_some() {
            return;
        }
        self.samples.push(woken.saturating_sub(armed));
        if self.samples.len() == WINDOW {
            self.samples.sort_unstable();
            let i = ((WINDOW - 1) as f64 * QUANTILE).round() as usize;
            let q = self.samples[i.min(WINDOW - 1)];
            self.margin = q.saturating_add(SLACK).clamp(MIN_MARGIN_NS, self.max);
            self.samples.clear();
        }
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
    }

    #[test]
    fn a_fixed_margin_does_not_learn() {
        let mut w = EarlyWake::fixed(50_000);
        for _ in 0..2 * WINDOW {
            w.record(0, 1_000_000);
        }
        assert_eq!(w.margin_ns(), 50_000);
        assert!(!w.is_learning());
        assert_eq!(EarlyWake::fixed(0).margin_ns(), 0);
    }
}
