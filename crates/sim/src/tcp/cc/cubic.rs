//! CUBIC as Linux's `tcp_cubic` (net/ipv4/tcp_cubic.c, "v2.3", with HyStart), RFC 9438 for the
//! reasoning.
//!
//! Promise: after a loss the window is cut to β = 717/1024 ≈ 0.7 of its size and then follows
//! W(t) = C·(t − K)³ + W_max (C = 0.4 segments/s³, K = ∛((W_max − cwnd)/C)): concave up to the
//! window of the last loss, a plateau there, then convex probing beyond it — growth that depends
//! on time since the loss, not on the RTT. Where Reno would be faster (short RTTs, small windows)
//! it grows at least as fast as a Reno-friendly estimate (the "TCP friendliness" region). Fast
//! convergence releases bandwidth: a loss below the previous W_max lowers W_max further. HyStart
//! leaves slow start before the first loss when ACK trains stretch past half the minimum RTT or
//! the round's minimum RTT rises by max(4 ms, min(16 ms, RTT/8)).
//!
//! State (`struct bictcp`): `cnt` (segments to ACK per window increment), `last_max_cwnd`
//! (W_max), `epoch_start` (jiffies), `bic_K`/`bic_origin_point`, `ack_cnt`/`tcp_cwnd` (the
//! Reno-friendly estimate), `delay_min` (µs) and HyStart's round (`round_start`, `end_seq`,
//! `last_ack`, `curr_rtt`, `sample_cnt`, `found`).
//!
//! Hooks, following tcp_cubic.c function by function with the kernel's integer units:
//! - `ssthresh` = `cubictcp_recalc_ssthresh` (epoch ends, fast convergence, `cwnd·717/1024`, ≥ 2).
//! - `cong_avoid` = `cubictcp_cong_avoid`: `tcp_slow_start`, then `bictcp_update` (the cubic
//!   target in 1/1024 s units, at most one recomputation per jiffy, `cnt` ≥ 2, 20 before the
//!   first loss) and `tcp_cong_avoid_ai(cnt)`.
//! - `pkts_acked` = `cubictcp_acked`: `delay_min` and `hystart_update` (ACK train with the
//!   `hystart_ack_delay` cushion, delay increase after 8 samples).
//! - `set_state` = `cubictcp_state`: everything resets on entering Loss (RTO).
//! - `cwnd_event` = `cubictcp_cwnd_event`: on TX_START after idle the epoch moves forward by the
//!   idle time, so an application pause does not count as cubic growth time.
//! - `undo_cwnd` = `tcp_reno_undo_cwnd` (the trait's default).
//!
//! Clocks: the kernel's `tcp_jiffies32` is taken at HZ = 1000 (`now / 1 ms`), `tcp_mstamp` and
//! RTT samples in µs, as in Linux ≥ 5.x.
//!
//! Differences and what is not modelled:
//! - The cube root is an exact integer ⌊∛x⌋ instead of the kernel's table + one Newton step
//!   (which errs by ≈ 0.2 %); K differs by at most a few 1/1024 s.
//! - HyStart writes `snd_ssthresh` from `pkts_acked`, where this interface gives a read-only
//!   window: the new threshold is kept and applied at the start of the next `cong_avoid` (Linux
//!   runs `cong_avoid` right after `pkts_acked` on the same ACK, so the effect is the same
//!   whenever the sender calls both).
//! - The sender is taken as unpaced for HyStart (`SK_PACING_NONE`, Linux's state for CUBIC
//!   without the fq qdisc), and `sk_pacing_rate` for the ACK-delay cushion is recomputed as
//!   `tcp_update_pacing_rate` would (200 % of cwnd/srtt in slow start, 120 % after) with the
//!   device's GSO size 65536.
//! - `initial_ssthresh` is 0 (the kernel default): the sender's initial threshold stands.

use super::reno::{cong_avoid_ai, in_slow_start, slow_start};
use super::{AckSample, CaState, CongestionControl, ConnInfo, CwndEvent, Window};

/// `BICTCP_BETA_SCALE`: β and W_max arithmetic in 1/1024.
const BETA_SCALE: u32 = 1024;
/// `beta` = 717/1024 ≈ 0.7 (RFC 9438's β_cubic).
const BETA: u32 = 717;
/// `bic_scale` = 41: C = 41·10/1024 ≈ 0.4 (RFC 9438's C).
const BIC_SCALE: u64 = 41;
/// `BICTCP_HZ`: the cubic function's time unit is 1/2^10 s.
const BICTCP_HZ: u32 = 10;
/// `cube_rtt_scale` = `bic_scale · 10`: C in 1/1024 (the 10 is the 1/RTT of a nominal 100 ms).
const CUBE_RTT_SCALE: u64 = BIC_SCALE * 10;
/// `cube_factor` = 2^40 / (bic_scale · 10): K = ∛(cube_factor · (W_max − cwnd)) in 1/1024 s.
const CUBE_FACTOR: u64 = (1u64 << (10 + 3 * BICTCP_HZ)) / (BIC_SCALE * 10);
/// `beta_scale` = 8·(1024 + β) / 3 / (1024 − β) = 15: the Reno-friendly estimate grows one
/// segment per `cwnd · 15 / 8` ACKed segments, i.e. 3(1−β)/(1+β) ≈ 0.53 segments per RTT.
const FRIENDLY_SCALE: u32 = 8 * (BETA_SCALE + BETA) / 3 / (BETA_SCALE - BETA);
/// Kernel HZ for `tcp_jiffies32`.
const HZ: u64 = 1000;
const NS_PER_JIFFY: u64 = 1_000_000_000 / HZ;

/// `hystart_low_window`: HyStart acts only from 16 segments on.
const HYSTART_LOW_WINDOW: u32 = 16;
/// `hystart_ack_delta_us`: ACKs closer than this form a train.
const HYSTART_ACK_DELTA_US: u64 = 2000;
/// `HYSTART_MIN_SAMPLES`: RTT samples per round before the delay test.
const HYSTART_MIN_SAMPLES: u8 = 8;
/// `HYSTART_DELAY_MIN` / `HYSTART_DELAY_MAX`: bounds of the delay-increase threshold (µs).
const HYSTART_DELAY_MIN_US: u64 = 4000;
const HYSTART_DELAY_MAX_US: u64 = 16000;
/// `sk_gso_max_size` of the device (GSO_LEGACY_MAX_SIZE), for `hystart_ack_delay`.
const GSO_MAX_SIZE: u64 = 65536;

/// ⌊∛a⌋, exactly.
pub fn cbrt_floor(a: u64) -> u64 {
    if a == 0 {
        return 0;
    }
    let mut x = (a as f64).cbrt() as u64;
    let cube = |v: u64| (v as u128) * (v as u128) * (v as u128);
    while x > 0 && cube(x) > a as u128 {
        x -= 1;
    }
    while cube(x + 1) <= a as u128 {
        x += 1;
    }
    x
}

/// `struct bictcp` plus the module parameters at their defaults.
#[derive(Debug, Clone)]
pub struct Cubic {
    cnt: u32,
    last_max_cwnd: u32,
    last_cwnd: u32,
    /// `last_time`, jiffies.
    last_time: u64,
    bic_origin_point: u32,
    /// `bic_K`, 1/1024 s.
    bic_k: u64,
    /// `delay_min`, µs (0 = no sample).
    delay_min: u64,
    /// `epoch_start`, jiffies (`None` = the kernel's 0: no epoch).
    epoch_start: Option<u64>,
    ack_cnt: u32,
    tcp_cwnd: u32,
    // HyStart.
    sample_cnt: u8,
    found: bool,
    /// `round_start`, `last_ack`: µs.
    round_start: u64,
    last_ack: u64,
    /// `end_seq`: `snd_nxt` when the round began.
    end_seq: u64,
    /// `curr_rtt`: the round's minimum RTT, µs.
    curr_rtt: u64,
    /// A threshold HyStart set in `pkts_acked`, applied at the next `cong_avoid`.
    pending_ssthresh: Option<u32>,
    /// Module parameters (all on, as the kernel's defaults).
    pub fast_convergence: bool,
    pub tcp_friendliness: bool,
    pub hystart: bool,
}

impl Default for Cubic {
    fn default() -> Self {
        Self::new()
    }
}

impl Cubic {
    /// `cubictcp_init`. HyStart's round starts at the first ACK (`end_seq` = 0 is already
    /// passed), which Linux's init-time reset amounts to once the first window is acknowledged.
    pub fn new() -> Self {
        Cubic {
            cnt: 0,
            last_max_cwnd: 0,
            last_cwnd: 0,
            last_time: 0,
            bic_origin_point: 0,
            bic_k: 0,
            delay_min: 0,
            epoch_start: None,
            ack_cnt: 0,
            tcp_cwnd: 0,
            sample_cnt: 0,
            found: false,
            round_start: 0,
            last_ack: 0,
            end_seq: 0,
            curr_rtt: u64::MAX,
            pending_ssthresh: None,
            fast_convergence: true,
            tcp_friendliness: true,
            hystart: true,
        }
    }

    /// `bictcp_reset` (everything but the parameters).
    fn reset(&mut self) {
        *self = Cubic {
            fast_convergence: self.fast_convergence,
            tcp_friendliness: self.tcp_friendliness,
            hystart: self.hystart,
            ..Cubic::new()
        };
    }

    /// `bictcp_hystart_reset`: a new HyStart round begins now and ends when `snd_nxt` is acked.
    fn hystart_reset(&mut self, c: &ConnInfo) {
        self.round_start = c.now / 1000;
        self.last_ack = self.round_start;
        self.end_seq = c.snd_nxt;
        self.curr_rtt = u64::MAX;
        self.sample_cnt = 0;
    }

    /// W_max, segments (for tests and traces).
    pub fn w_max(&self) -> u32 {
        self.last_max_cwnd
    }

    /// K in 1/1024 s of the current epoch.
    pub fn k(&self) -> u64 {
        self.bic_k
    }

    /// `bictcp_update`: recompute `cnt` for a window of `cwnd` segments at jiffy `j`.
    fn update(&mut self, cwnd: u32, acked: u32, j: u64) {
        self.ack_cnt = self.ack_cnt.saturating_add(acked);
        if self.last_cwnd == cwnd && j.saturating_sub(self.last_time) <= HZ / 32 {
            return;
        }
        // At most one recomputation per jiffy; a reduction clears the epoch and forces one.
        if !(self.epoch_start.is_some() && j == self.last_time) {
            self.last_cwnd = cwnd;
            self.last_time = j;
            let epoch = match self.epoch_start {
                Some(e) => e,
                None => {
                    self.epoch_start = Some(j);
                    self.ack_cnt = acked;
                    self.tcp_cwnd = cwnd;
                    if self.last_max_cwnd <= cwnd {
                        self.bic_k = 0;
                        self.bic_origin_point = cwnd;
                    } else {
                        let gap = (self.last_max_cwnd - cwnd) as u64;
                        self.bic_k = cbrt_floor(CUBE_FACTOR.saturating_mul(gap));
                        self.bic_origin_point = self.last_max_cwnd;
                    }
                    j
                }
            };
            // t = time since the epoch plus delay_min (the window should reach the curve one
            // RTT ahead), in 1/1024 s; usecs_to_jiffies rounds up.
            let t_j = j.saturating_sub(epoch) + self.delay_min.div_ceil(1000);
            let t = (t_j << BICTCP_HZ) / HZ;
            let offs = t.abs_diff(self.bic_k) as u128;
            let delta = (CUBE_RTT_SCALE as u128 * offs * offs * offs) >> (10 + 3 * BICTCP_HZ);
            let delta = delta.min(u32::MAX as u128) as u32;
            let target = if t < self.bic_k {
                self.bic_origin_point.saturating_sub(delta)
            } else {
                self.bic_origin_point.saturating_add(delta)
            };
            self.cnt = if target > cwnd {
                cwnd / (target - cwnd)
            } else {
                cwnd.saturating_mul(100)
            };
            // Before the first loss the bandwidth is unknown: grow at least 5 % per RTT.
            if self.last_max_cwnd == 0 && self.cnt > 20 {
                self.cnt = 20;
            }
        }
        if self.tcp_friendliness {
            // Reno-friendly estimate: one segment per cwnd·15/8 acked segments.
            let per = ((cwnd as u64 * FRIENDLY_SCALE as u64) >> 3).max(1) as u32;
            if self.ack_cnt > per {
                let k = (self.ack_cnt - 1) / per;
                self.ack_cnt -= k * per;
                self.tcp_cwnd = self.tcp_cwnd.saturating_add(k);
            }
            if self.tcp_cwnd > cwnd {
                let max_cnt = cwnd / (self.tcp_cwnd - cwnd);
                self.cnt = self.cnt.min(max_cnt);
            }
        }
        // At most one segment per two acked: 1.5× per RTT.
        self.cnt = self.cnt.max(2);
    }

    /// `hystart_ack_delay`: the cushion for TSO/GRO aggregation, from `sk_pacing_rate`
    /// (recomputed as `tcp_update_pacing_rate`), capped at 1 ms.
    fn hystart_ack_delay(w: &Window, c: &ConnInfo) -> u64 {
        if c.srtt == 0 {
            // No RTT yet: Linux's rate is not divided by srtt and is huge; the cushion ≈ 0.
            return 0;
        }
        let ratio: u64 = if w.cwnd < w.ssthresh / 2 { 200 } else { 120 };
        let rate = (c.mss as u128 * w.cwnd.max(1) as u128 * ratio as u128 * 1_000_000_000)
            / (100 * c.srtt as u128);
        if rate == 0 {
            return 0;
        }
        ((GSO_MAX_SIZE as u128 * 4 * 1_000_000 / rate) as u64).min(1000)
    }

    /// `hystart_update` for an RTT sample of `delay` µs.
    fn hystart_update(&mut self, delay: u64, w: &Window, c: &ConnInfo) {
        if c.snd_una > self.end_seq {
            self.hystart_reset(c);
        }
        if w.cwnd < HYSTART_LOW_WINDOW {
            return;
        }
        // ACK train: closely spaced ACKs still arriving more than delay_min/2 after the round
        // began mean the window already spans the path's delay.
        let now = c.now / 1000;
        if now.saturating_sub(self.last_ack) <= HYSTART_ACK_DELTA_US {
            self.last_ack = now;
            // Unpaced sender: the train must exceed half of (delay_min + cushion).
            let threshold = (self.delay_min + Self::hystart_ack_delay(w, c)) >> 1;
            if now.saturating_sub(self.round_start) > threshold {
                self.found = true;
                self.pending_ssthresh = Some(w.cwnd);
            }
        }
        // Delay increase: the round's minimum RTT over 8 samples exceeds delay_min by
        // clamp(delay_min/8, 4 ms, 16 ms).
        self.curr_rtt = self.curr_rtt.min(delay);
        if self.sample_cnt < HYSTART_MIN_SAMPLES {
            self.sample_cnt += 1;
        } else {
            let thresh = (self.delay_min >> 3).clamp(HYSTART_DELAY_MIN_US, HYSTART_DELAY_MAX_US);
            if self.curr_rtt > self.delay_min + thresh {
                self.found = true;
                self.pending_ssthresh = Some(w.cwnd);
            }
        }
    }
}

impl CongestionControl for Cubic {
    fn name(&self) -> &'static str {
        "cubic"
    }

    fn ssthresh(&mut self, w: &Window, _c: &ConnInfo) -> u32 {
        self.pending_ssthresh = None;
        self.epoch_start = None;
        self.last_max_cwnd = if w.cwnd < self.last_max_cwnd && self.fast_convergence {
            ((w.cwnd as u64 * (BETA_SCALE + BETA) as u64) / (2 * BETA_SCALE as u64)) as u32
        } else {
            w.cwnd
        };
        (((w.cwnd as u64 * BETA as u64) / BETA_SCALE as u64) as u32).max(2)
    }

    fn cong_avoid(&mut self, w: &mut Window, c: &ConnInfo, acked: u32) {
        if let Some(s) = self.pending_ssthresh.take() {
            w.ssthresh = s;
        }
        if !c.cwnd_limited {
            return;
        }
        let mut acked = acked;
        if in_slow_start(w) {
            acked = slow_start(w, acked);
            if acked == 0 {
                return;
            }
        }
        self.update(w.cwnd, acked, c.now / NS_PER_JIFFY);
        let cnt = self.cnt;
        cong_avoid_ai(w, cnt, acked);
    }

    fn set_state(&mut self, new: CaState, c: &ConnInfo) {
        if new == CaState::Loss {
            self.reset();
            self.hystart_reset(c);
        }
    }

    fn cwnd_event(&mut self, ev: CwndEvent, c: &ConnInfo) {
        if ev != CwndEvent::TxStart {
            return;
        }
        let now = c.now / NS_PER_JIFFY;
        let idle = now.saturating_sub(c.last_send / NS_PER_JIFFY);
        if let Some(e) = self.epoch_start {
            if idle > 0 {
                self.epoch_start = Some((e + idle).min(now));
            }
        }
    }

    fn pkts_acked(&mut self, s: &AckSample, w: &Window, c: &ConnInfo) {
        let Some(rtt) = s.rtt else { return };
        let j = c.now / NS_PER_JIFFY;
        // Discard delay samples right after a reduction (for one second).
        if let Some(e) = self.epoch_start {
            if j.saturating_sub(e) < HZ {
                return;
            }
        }
        let delay = (rtt / 1000).max(1);
        if self.delay_min == 0 || self.delay_min > delay {
            self.delay_min = delay;
        }
        if !self.found && in_slow_start(w) && self.hystart {
            self.hystart_update(delay, w, c);
        }
    }
}

#[cfg(test)]
#[path = "cubic_tests.rs"]
mod tests;
