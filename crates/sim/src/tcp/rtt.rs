//! Round-trip time estimation and the retransmission timeout, as Linux computes them.
//!
//! Source: net/ipv4/tcp_input.c (`tcp_rtt_estimator`, `tcp_set_rto`, `tcp_update_rtt_min`),
//! include/net/tcp.h (`__tcp_set_rto`, `tcp_bound_rto`), lib/minmax.c; RFC 6298.
//!
//! Principles:
//! * `srtt` is kept ×8 and `mdev` ×4 as in the kernel, so the gains are RFC 6298's (1/8, 1/4).
//! * The variance term `rttvar` is the largest `mdev` seen over the last round trip and never less
//!   than `rto_min`: `rto = srtt + max(4·mdev, rto_min)`, so with a steady RTT the timeout is
//!   about `srtt + 200 ms` (Linux), not RFC 6298's `max(1 s, srtt + 4·rttvar)`. It decays towards
//!   the current `mdev` by a quarter once per round trip (`rtt_seq`).
//! * The first sample sets `srtt = r`, `mdev = r/2` (×4: `2r`), hence `rto = 3r` (or `r + rto_min`).
//! * The timeout is bounded by [`MAX_RTO_NS`] (`TCP_RTO_MAX`, 120 s); before any sample it is
//!   [`INITIAL_RTO_NS`] (`TCP_TIMEOUT_INIT`, 1 s). Exponential backoff is the sender's
//!   (`icsk_backoff`): [`RttEstimator::backed_off`].
//! * The minimum RTT is a windowed running minimum over 300 s (`tcp_min_rtt_wlen`), kept like
//!   lib/minmax.c with three samples (best, second best, third best in their sub-windows).

/// Initial retransmission timeout (`TCP_TIMEOUT_INIT`, RFC 6298 §2.1).
pub const INITIAL_RTO_NS: u64 = 1_000_000_000;
/// Upper bound of the retransmission timeout (`TCP_RTO_MAX`).
pub const MAX_RTO_NS: u64 = 120_000_000_000;
/// Window of the minimum-RTT filter (`net.ipv4.tcp_min_rtt_wlen`, 300 s).
pub const MIN_RTT_WINDOW_NS: u64 = 300_000_000_000;

/// A windowed running minimum (lib/minmax.c): three `(time, value)` samples, the best in the
/// window first; when the best expires the next ones take its place.
#[derive(Copy, Clone, Debug, Default)]
pub struct MinMax {
    s: [(u64, u64); 3],
    set: bool,
}

impl MinMax {
    /// Current minimum (0 before the first sample).
    pub fn get(&self) -> u64 {
        if self.set {
            self.s[0].1
        } else {
            0
        }
    }

    /// Add sample `v` at time `t` with window `win`.
    pub fn update(&mut self, win: u64, t: u64, v: u64) {
        if !self.set || v <= self.s[0].1 || t.saturating_sub(self.s[2].0) > win {
            self.s = [(t, v); 3];
            self.set = true;
            return;
        }
        if v <= self.s[1].1 {
            self.s[1] = (t, v);
            self.s[2] = (t, v);
        } else if v <= self.s[2].1 {
            self.s[2] = (t, v);
        }
        // Sub-window maintenance: expire the best, or refresh the second and third choices.
        let dt = t.saturating_sub(self.s[0].0);
        if dt > win {
            self.s[0] = self.s[1];
            self.s[1] = self.s[2];
            self.s[2] = (t, v);
            if t.saturating_sub(self.s[0].0) > win {
                self.s[0] = self.s[1];
                self.s[1] = self.s[2];
                self.s[2] = (t, v);
            }
        } else if self.s[1].0 == self.s[0].0 && dt > win / 4 {
            self.s[1] = (t, v);
            self.s[2] = (t, v);
        } else if self.s[2].0 == self.s[1].0 && dt > win / 2 {
            self.s[2] = (t, v);
        }
    }
}

/// RTT state of one sender (`srtt_us`, `mdev_us`, `mdev_max_us`, `rttvar_us`, `rtt_seq`).
#[derive(Clone, Debug)]
pub struct RttEstimator {
    /// Smoothed RTT ×8 (0 = no sample yet).
    srtt8: u64,
    /// Mean deviation ×4.
    mdev4: u64,
    mdev_max: u64,
    rttvar: u64,
    rtt_seq: u64,
    rto_min: u64,
    rto: u64,
    min_rtt: MinMax,
}

impl RttEstimator {
    pub fn new(rto_min: u64) -> Self {
        RttEstimator {
            srtt8: 0,
            mdev4: 0,
            mdev_max: 0,
            rttvar: 0,
            rtt_seq: 0,
            rto_min,
            rto: INITIAL_RTO_NS.max(rto_min).min(MAX_RTO_NS),
            min_rtt: MinMax::default(),
        }
    }

    /// Smoothed RTT in ns (0 before the first sample).
    pub fn srtt(&self) -> u64 {
        self.srtt8 >> 3
    }

    /// Windowed minimum RTT in ns (0 before the first sample).
    pub fn min_rtt(&self) -> u64 {
        self.min_rtt.get()
    }

    pub fn rto_min(&self) -> u64 {
        self.rto_min
    }

    /// The timeout without backoff (`icsk_rto` after `tcp_set_rto`).
    pub fn rto(&self) -> u64 {
        self.rto
    }

    /// The timeout after `backoff` expiries: `min(rto << backoff, TCP_RTO_MAX)`.
    pub fn backed_off(&self, backoff: u32) -> u64 {
        if backoff >= 40 {
            return MAX_RTO_NS;
        }
        self.rto.saturating_mul(1 << backoff).min(MAX_RTO_NS)
    }

    /// Feed the minimum filter (`tcp_update_rtt_min`) with the newest segment's RTT.
    pub fn update_min(&mut self, now: u64, ca_rtt: u64) {
        self.min_rtt.update(MIN_RTT_WINDOW_NS, now, ca_rtt.max(1));
    }

    /// One RTT sample `m` (`tcp_rtt_estimator`) then `tcp_set_rto`. `snd_una`/`snd_nxt` time the
    /// once-per-round-trip decay of `rttvar`.
    pub fn sample(&mut self, m: u64, snd_una: u64, snd_nxt: u64) {
        let m0 = m.max(1);
        if self.srtt8 != 0 {
            let mut e = m0 as i64 - (self.srtt8 >> 3) as i64;
            self.srtt8 = (self.srtt8 as i64 + e).max(1) as u64;
            if e < 0 {
                e = -e - (self.mdev4 >> 2) as i64;
                if e > 0 {
                    e >>= 3;
                }
            } else {
                e -= (self.mdev4 >> 2) as i64;
            }
            self.mdev4 = (self.mdev4 as i64 + e).max(0) as u64;
            if self.mdev4 > self.mdev_max {
                self.mdev_max = self.mdev4;
                if self.mdev_max > self.rttvar {
                    self.rttvar = self.mdev_max;
                }
            }
            if snd_una > self.rtt_seq {
                if self.mdev_max < self.rttvar {
                    self.rttvar -= (self.rttvar - self.mdev_max) >> 2;
                }
                self.rtt_seq = snd_nxt;
                self.mdev_max = self.rto_min;
            }
        } else {
            self.srtt8 = m0 << 3;
            self.mdev4 = m0 << 1;
            self.rttvar = self.mdev4.max(self.rto_min);
            self.mdev_max = self.rttvar;
            self.rtt_seq = snd_nxt;
        }
        self.rto = ((self.srtt8 >> 3) + self.rttvar).min(MAX_RTO_NS);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    #[test]
    fn first_sample_gives_three_rtt_or_rtt_plus_rto_min() {
        let mut r = RttEstimator::new(200 * MS);
        assert_eq!(r.rto(), INITIAL_RTO_NS);
        r.sample(10 * MS, 0, 100);
        assert_eq!(r.srtt(), 10 * MS);
        // mdev×4 = 20 ms < rto_min: rto = 10 + 200 ms.
        assert_eq!(r.rto(), 210 * MS);
        let mut r = RttEstimator::new(MS);
        r.sample(300 * MS, 0, 100);
        assert_eq!(r.rto(), 900 * MS);
    }

    #[test]
    fn steady_rtt_converges_to_srtt_plus_rto_min() {
        let mut r = RttEstimator::new(200 * MS);
        let mut una = 0;
        for _ in 0..200 {
            una += 10;
            r.sample(50 * MS, una, una + 100);
        }
        assert_eq!(r.srtt(), 50 * MS);
        assert_eq!(r.rto(), 250 * MS);
    }

    #[test]
    fn rtt_jump_raises_rttvar_then_decays() {
        let mut r = RttEstimator::new(10 * MS);
        let mut una = 0;
        for _ in 0..50 {
            una += 10;
            r.sample(100 * MS, una, una + 10);
        }
        let settled = r.rto();
        una += 10;
        r.sample(400 * MS, una, una + 10);
        let jumped = r.rto();
        assert!(jumped > settled + 100 * MS, "{jumped} vs {settled}");
        for _ in 0..100 {
            una += 10;
            r.sample(100 * MS, una, una + 10);
        }
        assert!(r.rto() < jumped / 2);
    }

    #[test]
    fn backoff_doubles_up_to_the_bound() {
        let mut r = RttEstimator::new(200 * MS);
        r.sample(10 * MS, 0, 1);
        assert_eq!(r.backed_off(0), 210 * MS);
        assert_eq!(r.backed_off(3), 8 * 210 * MS);
        assert_eq!(r.backed_off(12), MAX_RTO_NS);
        assert_eq!(r.backed_off(63), MAX_RTO_NS);
    }

    #[test]
    fn min_filter_expires_after_its_window() {
        let mut f = MinMax::default();
        f.update(100, 0, 10);
        f.update(100, 30, 20);
        f.update(100, 60, 15);
        assert_eq!(f.get(), 10);
        f.update(100, 120, 30);
        assert!(f.get() > 10, "old minimum expired: {}", f.get());
        f.update(100, 130, 5);
        assert_eq!(f.get(), 5);
    }
}
