//! The shaper's one time base.
//!
//! Every instant inside the shaper is a [`Time`]: nanoseconds of CLOCK_MONOTONIC since the
//! shaper's epoch (the moment its clock was started). The schedulers, the device model, the
//! emulated link, a direction's deadlines and the loop's own bookkeeping all use it, so nothing
//! in the datapath converts between time bases. The epoch keeps instants small (the core's
//! disciplines were written for a clock that starts near 0, as the simulator's does); only the
//! system calls that take an absolute CLOCK_MONOTONIC instant (the timerfd, `clock_nanosleep`)
//! go through [`Clock::monotonic`], at the driver's edge.

use linkshare_core::Time;

use crate::sys;

/// CLOCK_MONOTONIC read as a [`Time`] since an epoch.
#[derive(Copy, Clone, Debug)]
pub(crate) struct Clock {
    epoch_ns: u64,
}

impl Clock {
    /// A clock whose epoch is now.
    pub(crate) fn start() -> Clock {
        Clock {
            epoch_ns: sys::monotonic_ns(),
        }
    }

    /// The instant now.
    pub(crate) fn now(&self) -> Time {
        Time(sys::monotonic_ns().saturating_sub(self.epoch_ns))
    }

    /// Instant `t` as an absolute CLOCK_MONOTONIC value, for the system calls that take one.
    pub(crate) fn monotonic(&self, t: Time) -> u64 {
        t.0.saturating_add(self.epoch_ns)
    }
}

/// `t` plus `ns` nanoseconds (saturating).
pub(crate) fn after(t: Time, ns: u64) -> Time {
    Time(t.0.saturating_add(ns))
}

/// Keep the earlier of `d` and `t` in `d`.
pub(crate) fn min_deadline(d: &mut Option<Time>, t: Time) {
    *d = Some(d.map_or(t, |x| x.min(t)));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instants_round_trip_through_the_monotonic_clock() {
        let c = Clock::start();
        let t = c.now();
        let mono = c.monotonic(t);
        assert!(mono >= t.0);
        assert_eq!(mono - c.epoch_ns, t.0);
        let mut d = None;
        min_deadline(&mut d, after(t, 10));
        min_deadline(&mut d, after(t, 5));
        min_deadline(&mut d, after(t, 7));
        assert_eq!(d, Some(after(t, 5)));
    }
}
