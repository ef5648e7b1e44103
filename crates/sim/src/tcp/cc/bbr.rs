//! BBR v1 as Linux's `tcp_bbr` (net/ipv4/tcp_bbr.c; Cardwell et al., "BBR: Congestion-Based
//! Congestion Control", ACM Queue 14(5), 2016).
//!
//! Promise: send at the path's bottleneck bandwidth with about one BDP in flight, whatever the
//! loss rate. A model — bandwidth = windowed max of delivery-rate samples over 10 rounds,
//! min_rtt = windowed min over 10 s — sets the pacing rate (gain × bw, paced 1 % below) and the
//! window (cwnd_gain × bw × min_rtt plus quanta). STARTUP doubles the rate each round (gain 2/ln 2)
//! until three rounds bring < 25 % more bandwidth; DRAIN empties the queue STARTUP built; PROBE_BW
//! cycles the pacing gain 5/4, 3/4, 1 ×6 (one phase per min_rtt, random start phase); PROBE_RTT
//! caps the window at 4 segments for 200 ms and a round when min_rtt has not been refreshed for
//! 10 s. Loss does not cut the rate: only the window, by packet conservation in the first round of
//! recovery; a token-bucket policer is detected from two lossy intervals of equal delivery rate
//! and then its rate (lt_bw) is used for 48 rounds.
//!
//! State (`struct bbr`): mode, the bandwidth filter ([`MinMax`], pkts/µs << 24), `min_rtt_us` and
//! its stamp (jiffies), round counting (`rtt_cnt`, `next_rtt_delivered` in `delivered` units),
//! gains (1/256), gain-cycle phase, full-pipe detection, PROBE_RTT timing, recovery
//! (`prior_cwnd`, `packet_conservation`, `prev_ca_state`), long-term sampling (`lt_*`) and ACK
//! aggregation (`extra_acked`).
//!
//! Hooks: `cong_control` = `bbr_main` (`bbr_update_model` then `bbr_set_pacing_rate` and
//! `bbr_set_cwnd`), `ssthresh` = `bbr_ssthresh` (save cwnd, leave ssthresh), `set_state` =
//! `bbr_set_state`, `cwnd_event` = `bbr_cwnd_event`, `undo_cwnd` = `bbr_undo_cwnd`; `init` runs
//! lazily on the first hook, when the connection's clock and counters are known.
//!
//! Units as the kernel's: bandwidth pkts/µs << 24 (`BW_SCALE`), gains << 8 (`BBR_SCALE`),
//! `tcp_jiffies32` at HZ = 1000, `delivered_mstamp` = `now` in µs.
//!
//! Not modelled / approximated:
//! - No EDT queue in the pacing layer: `bbr_packets_in_net_at_edt` sees `tcp_wstamp_ns = now`
//!   (in-flight plus one TSO goal when probing).
//! - `rs->is_ack_delayed` is not in [`RateSample`]: taken as false.
//! - DRAIN's `snd_ssthresh = inflight(bw, 1)` is not written (ssthresh is informative for BBR).
//! - From `cwnd_event` (restart from idle in PROBE_RTT) and `undo_cwnd` the kernel touches
//!   `snd_cwnd`/`tp` directly; here the restored window is applied at the next `cong_control`
//!   and `undo_cwnd` uses the counters of the last hook call.
//! - `get_random_u32_below` is a splitmix64 stream from the constructor's seed.
//! - `sk_max_pacing_rate` is unlimited; `MAX_TCP_HEADER` is taken as 320 bytes.

use super::minmax::MinMax;
use super::{CaState, CongestionControl, ConnInfo, Control, CwndEvent, RateSample, Window};

const BW_SCALE: u32 = 24;
const BW_UNIT: u64 = 1 << BW_SCALE;
const BBR_SCALE: u32 = 8;
const BBR_UNIT: u32 = 1 << BBR_SCALE;
const CYCLE_LEN: usize = 8;
/// Bandwidth filter window, rounds.
const BW_RTTS: u64 = CYCLE_LEN as u64 + 2;
/// min_rtt filter window, jiffies (10 s).
const MIN_RTT_WIN_J: u64 = 10 * HZ;
/// Time at 4 segments in PROBE_RTT, jiffies (200 ms).
const PROBE_RTT_MODE_J: u64 = 200;
/// `bbr_min_tso_rate`, bit/s.
const MIN_TSO_RATE: u64 = 1_200_000;
const PACING_MARGIN_PERCENT: u64 = 1;
/// 2/ln 2 in 1/256: 739.
pub const HIGH_GAIN: u32 = BBR_UNIT * 2885 / 1000 + 1;
/// 1/high_gain: 88.
pub const DRAIN_GAIN: u32 = BBR_UNIT * 1000 / 2885;
pub const CWND_GAIN: u32 = BBR_UNIT * 2;
/// PROBE_BW's pacing gains.
pub const PACING_GAIN: [u32; CYCLE_LEN] = [
    BBR_UNIT * 5 / 4,
    BBR_UNIT * 3 / 4,
    BBR_UNIT,
    BBR_UNIT,
    BBR_UNIT,
    BBR_UNIT,
    BBR_UNIT,
    BBR_UNIT,
];
const CYCLE_RAND: u64 = 7;
pub const CWND_MIN_TARGET: u32 = 4;
const FULL_BW_THRESH: u64 = BBR_UNIT as u64 * 5 / 4;
const FULL_BW_CNT: u32 = 3;
const LT_INTVL_MIN_RTTS: u32 = 4;
/// Lost/delivered ≥ 50/256 ≈ 20 %: a lossy interval.
const LT_LOSS_THRESH: u64 = 50;
const LT_BW_RATIO: u64 = BBR_UNIT as u64 / 8;
/// 4 kbit/s in bytes/s.
const LT_BW_DIFF: u64 = 4000 / 8;
pub const LT_BW_MAX_RTTS: u32 = 48;
const EXTRA_ACKED_GAIN: u64 = BBR_UNIT as u64;
const EXTRA_ACKED_WIN_RTTS: u32 = 5;
const ACK_EPOCH_ACKED_RESET_THRESH: u64 = 1 << 20;
const EXTRA_ACKED_MAX_US: u64 = 100_000;
const TCP_INIT_CWND: u32 = 10;
const HZ: u64 = 1000;
const NS_PER_JIFFY: u64 = 1_000_000;
const GSO_LEGACY_MAX_SIZE: u64 = 65536;
const MAX_TCP_HEADER: u64 = 320;

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Mode {
    Startup,
    Drain,
    ProbeBw,
    ProbeRtt,
}

/// `struct bbr`.
#[derive(Debug, Clone)]
pub struct Bbr {
    initialized: bool,
    rng: u64,
    mss: u32,
    min_rtt_us: u32,
    /// jiffies
    min_rtt_stamp: u64,
    /// jiffies, 0 = not set
    probe_rtt_done_stamp: u64,
    bw: MinMax,
    rtt_cnt: u64,
    next_rtt_delivered: u64,
    /// µs
    cycle_mstamp: u64,
    mode: Mode,
    prev_ca_state: CaState,
    packet_conservation: bool,
    round_start: bool,
    idle_restart: bool,
    probe_rtt_round_done: bool,
    lt_is_sampling: bool,
    lt_rtt_cnt: u32,
    lt_use_bw: bool,
    lt_bw: u64,
    lt_last_delivered: u64,
    /// ms
    lt_last_stamp: u64,
    lt_last_lost: u64,
    pacing_gain: u32,
    cwnd_gain: u32,
    full_bw_reached: bool,
    full_bw_cnt: u32,
    cycle_idx: usize,
    has_seen_rtt: bool,
    prior_cwnd: u32,
    full_bw: u64,
    /// µs
    ack_epoch_mstamp: u64,
    extra_acked: [u64; 2],
    ack_epoch_acked: u64,
    extra_acked_win_rtts: u32,
    extra_acked_win_idx: usize,
    /// `sk_pacing_rate`, bytes/s.
    pacing_rate: u64,
    /// A window to restore (max with cwnd) at the next `cong_control` (see module comment).
    restore_cwnd: Option<u32>,
    app_limited_mark: bool,
    /// The connection as of the last hook call (for `undo_cwnd`, which gets none).
    last: ConnInfo,
}

impl Bbr {
    /// `bbr_init`'s pacing part: `high_gain · init_cwnd / 1 ms` until an RTT is known.
    pub fn new(init_cwnd: u32, mss: u32, seed: u64) -> Self {
        let mut b = Bbr {
            initialized: false,
            rng: seed ^ 0x6262_725f_7631,
            mss: mss.max(1),
            min_rtt_us: u32::MAX,
            min_rtt_stamp: 0,
            probe_rtt_done_stamp: 0,
            bw: MinMax::default(),
            rtt_cnt: 0,
            next_rtt_delivered: 0,
            cycle_mstamp: 0,
            mode: Mode::Startup,
            prev_ca_state: CaState::Open,
            packet_conservation: false,
            round_start: false,
            idle_restart: false,
            probe_rtt_round_done: false,
            lt_is_sampling: false,
            lt_rtt_cnt: 0,
            lt_use_bw: false,
            lt_bw: 0,
            lt_last_delivered: 0,
            lt_last_stamp: 0,
            lt_last_lost: 0,
            pacing_gain: HIGH_GAIN,
            cwnd_gain: HIGH_GAIN,
            full_bw_reached: false,
            full_bw_cnt: 0,
            cycle_idx: 0,
            has_seen_rtt: false,
            prior_cwnd: 0,
            full_bw: 0,
            ack_epoch_mstamp: 0,
            extra_acked: [0; 2],
            ack_epoch_acked: 0,
            extra_acked_win_rtts: 0,
            extra_acked_win_idx: 0,
            pacing_rate: 0,
            restore_cwnd: None,
            app_limited_mark: false,
            last: ConnInfo::default(),
        };
        b.init_pacing_rate_from_rtt(init_cwnd.max(1), 0);
        b
    }

    pub fn mode(&self) -> Mode {
        self.mode
    }
    pub fn pacing_gain(&self) -> u32 {
        self.pacing_gain
    }
    pub fn cycle_idx(&self) -> usize {
        self.cycle_idx
    }
    pub fn min_rtt_us(&self) -> u32 {
        self.min_rtt_us
    }
    pub fn lt_use_bw(&self) -> bool {
        self.lt_use_bw
    }
    /// `bbr_bw`: lt_bw when policed, else the max filter (pkts/µs << 24).
    pub fn bw(&self) -> u64 {
        if self.lt_use_bw {
            self.lt_bw
        } else {
            self.bw.get()
        }
    }
    pub fn max_bw(&self) -> u64 {
        self.bw.get()
    }
    pub fn lt_bw(&self) -> u64 {
        self.lt_bw
    }

    /// `get_random_u32_below(n)` from a splitmix64 stream.
    fn random_below(&mut self, n: u64) -> u64 {
        self.rng = self.rng.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.rng;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        (z ^ (z >> 31)) % n
    }

    /// `bbr_init`, run at the first hook with the connection's clock and counters.
    fn init(&mut self, c: &ConnInfo) {
        if self.initialized {
            return;
        }
        self.initialized = true;
        self.next_rtt_delivered = c.delivered;
        self.min_rtt_us = if c.min_rtt > 0 {
            (c.min_rtt / 1000).min(u32::MAX as u64 - 1) as u32
        } else {
            u32::MAX
        };
        self.min_rtt_stamp = c.now / NS_PER_JIFFY;
        self.bw.reset(0, 0);
        self.reset_lt_bw_sampling(c);
        self.ack_epoch_mstamp = c.now / 1000;
    }

    /// `bbr_rate_bytes_per_sec`: bw (pkts/µs << 24) × gain, in bytes/s, 1 % below.
    fn rate_bytes_per_sec(&self, bw: u64, gain: u32) -> u64 {
        let mut rate = bw as u128 * self.mss as u128;
        rate *= gain as u128;
        rate >>= BBR_SCALE;
        rate *= (1_000_000 / 100 * (100 - PACING_MARGIN_PERCENT)) as u128;
        (rate >> BW_SCALE).min(u64::MAX as u128) as u64
    }

    /// `bbr_init_pacing_rate_from_rtt`: high_gain × cwnd / srtt (1 ms before any RTT).
    fn init_pacing_rate_from_rtt(&mut self, cwnd: u32, srtt_ns: u64) {
        let rtt_us = if srtt_ns > 0 {
            self.has_seen_rtt = true;
            (srtt_ns / 1000).max(1)
        } else {
            1000
        };
        let bw = cwnd as u64 * BW_UNIT / rtt_us;
        self.pacing_rate = self.rate_bytes_per_sec(bw, HIGH_GAIN);
    }

    /// `bbr_set_pacing_rate`: never lower the rate before the pipe is full.
    fn set_pacing_rate(&mut self, bw: u64, gain: u32, cwnd: u32, c: &ConnInfo) {
        let rate = self.rate_bytes_per_sec(bw, gain);
        if !self.has_seen_rtt && c.srtt > 0 {
            self.init_pacing_rate_from_rtt(cwnd, c.srtt);
        }
        if self.full_bw_reached || rate > self.pacing_rate {
            self.pacing_rate = rate;
        }
    }

    /// `bbr_tso_segs_goal`: ~1 ms of data at the pacing rate (`sk_pacing_shift` 10), at least
    /// `bbr_min_tso_segs` (1 below 1.2 Mbit/s, else 2), at most 127.
    fn tso_segs_goal(&self) -> u32 {
        let bytes = (self.pacing_rate >> 10).min(GSO_LEGACY_MAX_SIZE - 1 - MAX_TCP_HEADER);
        let min_segs = if self.pacing_rate < MIN_TSO_RATE >> 3 {
            1
        } else {
            2
        };
        ((bytes / self.mss as u64) as u32).max(min_segs).min(0x7F)
    }

    /// `bbr_save_cwnd`.
    fn save_cwnd(&mut self, cwnd: u32) {
        if self.prev_ca_state < CaState::Recovery && self.mode != Mode::ProbeRtt {
            self.prior_cwnd = cwnd;
        } else {
            self.prior_cwnd = self.prior_cwnd.max(cwnd);
        }
    }

    /// `bbr_bdp`: ⌈bw × min_rtt × gain⌉ segments; the initial window before any RTT sample.
    fn bdp(&self, bw: u64, gain: u32) -> u32 {
        if self.min_rtt_us == u32::MAX {
            return TCP_INIT_CWND;
        }
        let w = bw as u128 * self.min_rtt_us as u128;
        // Rounded up to avoid a negative feedback loop.
        let bdp = ((w * gain as u128) >> BBR_SCALE).div_ceil(BW_UNIT as u128);
        bdp.min(u32::MAX as u128) as u32
    }

    /// `bbr_quantization_budget`: three TSO goals, an even number, +2 in the probing phase.
    fn quantization_budget(&self, cwnd: u32) -> u32 {
        let mut cwnd = cwnd.saturating_add(3 * self.tso_segs_goal());
        cwnd = (cwnd.saturating_add(1)) & !1;
        if self.mode == Mode::ProbeBw && self.cycle_idx == 0 {
            cwnd += 2;
        }
        cwnd
    }

    /// `bbr_inflight`.
    fn inflight(&self, bw: u64, gain: u32) -> u32 {
        self.quantization_budget(self.bdp(bw, gain))
    }

    /// `bbr_packets_in_net_at_edt` with the next departure at `now` (no EDT backlog).
    fn packets_in_net_at_edt(&self, inflight_now: u32) -> u32 {
        if self.pacing_gain > BBR_UNIT {
            inflight_now + self.tso_segs_goal()
        } else {
            inflight_now
        }
    }

    /// `bbr_set_cwnd_to_recover_or_restore`: `Some(cwnd)` when packet conservation decides.
    fn recover_or_restore(
        &mut self,
        rs: &RateSample,
        acked: u32,
        cwnd: &mut u32,
        c: &ConnInfo,
    ) -> bool {
        let prev = self.prev_ca_state;
        let state = c.ca_state;
        if rs.losses > 0 {
            *cwnd = cwnd.saturating_sub(rs.losses).max(1);
        }
        if state == CaState::Recovery && prev != CaState::Recovery {
            // First round of recovery: packet conservation, starting a round now.
            self.packet_conservation = true;
            self.next_rtt_delivered = c.delivered;
            *cwnd = c.in_flight + acked;
        } else if prev >= CaState::Recovery && state < CaState::Recovery {
            // Recovery over: restore the window saved on entering it.
            *cwnd = (*cwnd).max(self.prior_cwnd);
            self.packet_conservation = false;
        }
        self.prev_ca_state = state;
        if self.packet_conservation {
            *cwnd = (*cwnd).max(c.in_flight + acked);
            return true;
        }
        false
    }

    /// `bbr_set_cwnd`.
    fn set_cwnd(
        &mut self,
        rs: &RateSample,
        acked: u32,
        bw: u64,
        gain: u32,
        w: &Window,
        c: &ConnInfo,
    ) -> u32 {
        let mut cwnd = w.cwnd;
        if acked > 0 && !self.recover_or_restore(rs, acked, &mut cwnd, c) {
            let mut target = self.bdp(bw, gain);
            target = target.saturating_add(self.ack_aggregation_cwnd());
            target = self.quantization_budget(target);
            if self.full_bw_reached {
                cwnd = cwnd.saturating_add(acked).min(target);
            } else if cwnd < target || c.delivered < TCP_INIT_CWND as u64 {
                cwnd = cwnd.saturating_add(acked);
            }
            cwnd = cwnd.max(CWND_MIN_TARGET);
        }
        cwnd = cwnd.min(w.cwnd_clamp);
        if self.mode == Mode::ProbeRtt {
            cwnd = cwnd.min(CWND_MIN_TARGET);
        }
        cwnd
    }

    /// `bbr_is_next_cycle_phase`.
    fn is_next_cycle_phase(&self, rs: &RateSample, now_us: u64) -> bool {
        let is_full_length = now_us.saturating_sub(self.cycle_mstamp) > self.min_rtt_us as u64;
        if self.pacing_gain == BBR_UNIT {
            return is_full_length;
        }
        let inflight = self.packets_in_net_at_edt(rs.prior_in_flight);
        let bw = self.max_bw();
        if self.pacing_gain > BBR_UNIT {
            return is_full_length
                && (rs.losses > 0 || inflight >= self.inflight(bw, self.pacing_gain));
        }
        is_full_length || inflight <= self.inflight(bw, BBR_UNIT)
    }

    fn advance_cycle_phase(&mut self, now_us: u64) {
        self.cycle_idx = (self.cycle_idx + 1) % CYCLE_LEN;
        self.cycle_mstamp = now_us;
    }

    /// `bbr_reset_probe_bw_mode`: a random phase other than the 3/4 one.
    fn reset_probe_bw_mode(&mut self, now_us: u64) {
        self.mode = Mode::ProbeBw;
        self.cycle_idx = CYCLE_LEN - 1 - self.random_below(CYCLE_RAND) as usize;
        self.advance_cycle_phase(now_us);
    }

    fn reset_mode(&mut self, now_us: u64) {
        if !self.full_bw_reached {
            self.mode = Mode::Startup;
        } else {
            self.reset_probe_bw_mode(now_us);
        }
    }

    /// `bbr_update_bw`: round counting and the max filter.
    fn update_bw(&mut self, rs: &RateSample, c: &ConnInfo) {
        self.round_start = false;
        let interval_us = rs.interval.map_or(0, |i| i / 1000);
        if rs.delivered < 0 || interval_us == 0 {
            return;
        }
        if rs.prior_delivered >= self.next_rtt_delivered {
            self.next_rtt_delivered = c.delivered;
            self.rtt_cnt += 1;
            self.round_start = true;
            self.packet_conservation = false;
        }
        self.lt_bw_sampling(rs, c);
        let bw = rs.delivered as u64 * BW_UNIT / interval_us;
        // App-limited samples only count when they show at least the current estimate.
        if !rs.is_app_limited || bw >= self.max_bw() {
            self.bw.running_max(BW_RTTS, self.rtt_cnt, bw);
        }
    }

    /// `bbr_check_full_bw_reached`: 3 rounds without 25 % growth.
    fn check_full_bw_reached(&mut self, rs: &RateSample) {
        if self.full_bw_reached || !self.round_start || rs.is_app_limited {
            return;
        }
        let thresh = (self.full_bw * FULL_BW_THRESH) >> BBR_SCALE;
        if self.max_bw() >= thresh {
            self.full_bw = self.max_bw();
            self.full_bw_cnt = 0;
            return;
        }
        self.full_bw_cnt += 1;
        self.full_bw_reached = self.full_bw_cnt >= FULL_BW_CNT;
    }

    /// `bbr_check_drain`.
    fn check_drain(&mut self, c: &ConnInfo) {
        if self.mode == Mode::Startup && self.full_bw_reached {
            self.mode = Mode::Drain;
        }
        if self.mode == Mode::Drain
            && self.packets_in_net_at_edt(c.in_flight) <= self.inflight(self.max_bw(), BBR_UNIT)
        {
            self.reset_probe_bw_mode(c.now / 1000);
        }
    }

    /// `bbr_check_probe_rtt_done`.
    fn check_probe_rtt_done(&mut self, c: &ConnInfo) {
        let j = c.now / NS_PER_JIFFY;
        if !(self.probe_rtt_done_stamp != 0 && j > self.probe_rtt_done_stamp) {
            return;
        }
        self.min_rtt_stamp = j;
        self.restore_cwnd = Some(self.prior_cwnd);
        self.reset_mode(c.now / 1000);
    }

    /// `bbr_update_min_rtt`: the 10 s min filter and PROBE_RTT.
    fn update_min_rtt(&mut self, rs: &RateSample, w: &Window, c: &ConnInfo) {
        let j = c.now / NS_PER_JIFFY;
        let filter_expired = j > self.min_rtt_stamp + MIN_RTT_WIN_J;
        if let Some(rtt) = rs.rtt {
            let rtt_us = (rtt / 1000).min(u32::MAX as u64 - 1) as u32;
            if rtt_us < self.min_rtt_us || filter_expired {
                self.min_rtt_us = rtt_us;
                self.min_rtt_stamp = j;
            }
        }
        if filter_expired && !self.idle_restart && self.mode != Mode::ProbeRtt {
            self.mode = Mode::ProbeRtt;
            self.save_cwnd(w.cwnd);
            self.probe_rtt_done_stamp = 0;
        }
        if self.mode == Mode::ProbeRtt {
            // Keep PROBE_RTT's low-rate samples out of the bandwidth filter.
            self.app_limited_mark = true;
            if self.probe_rtt_done_stamp == 0 && c.in_flight <= CWND_MIN_TARGET {
                self.probe_rtt_done_stamp = j + PROBE_RTT_MODE_J;
                self.probe_rtt_round_done = false;
                self.next_rtt_delivered = c.delivered;
            } else if self.probe_rtt_done_stamp != 0 {
                if self.round_start {
                    self.probe_rtt_round_done = true;
                }
                if self.probe_rtt_round_done {
                    self.check_probe_rtt_done(c);
                }
            }
        }
        if rs.delivered > 0 {
            self.idle_restart = false;
        }
    }

    /// `snd_cwnd = max(snd_cwnd, prior_cwnd)` deferred from `bbr_check_probe_rtt_done`.
    fn apply_restore(&mut self, w: &mut Window) {
        if let Some(prior) = self.restore_cwnd.take() {
            w.cwnd = w.cwnd.max(prior).min(w.cwnd_clamp);
        }
    }

    /// `bbr_update_gains`.
    fn update_gains(&mut self) {
        (self.pacing_gain, self.cwnd_gain) = match self.mode {
            Mode::Startup => (HIGH_GAIN, HIGH_GAIN),
            Mode::Drain => (DRAIN_GAIN, HIGH_GAIN),
            Mode::ProbeBw if self.lt_use_bw => (BBR_UNIT, CWND_GAIN),
            Mode::ProbeBw => (PACING_GAIN[self.cycle_idx], CWND_GAIN),
            Mode::ProbeRtt => (BBR_UNIT, BBR_UNIT),
        };
    }
}

impl CongestionControl for Bbr {
    fn name(&self) -> &'static str {
        "bbr"
    }

    /// `bbr_ssthresh`: remember the window for after recovery; ssthresh stays.
    fn ssthresh(&mut self, w: &Window, c: &ConnInfo) -> u32 {
        self.init(c);
        self.last = *c;
        self.save_cwnd(w.cwnd);
        w.ssthresh
    }

    /// BBR has no `cong_avoid`; the sender uses `cong_control`.
    fn cong_avoid(&mut self, _w: &mut Window, _c: &ConnInfo, _acked: u32) {}

    /// `bbr_main`.
    fn cong_control(&mut self, w: &Window, c: &ConnInfo, rs: &RateSample) -> Option<Control> {
        self.init(c);
        self.last = *c;
        self.mss = c.mss.max(1);
        let mut w = *w;
        self.apply_restore(&mut w);
        let now_us = c.now / 1000;
        self.update_bw(rs, c);
        self.update_ack_aggregation(rs, w.cwnd, now_us);
        if self.mode == Mode::ProbeBw && self.is_next_cycle_phase(rs, now_us) {
            self.advance_cycle_phase(now_us);
        }
        self.check_full_bw_reached(rs);
        self.check_drain(c);
        self.update_min_rtt(rs, &w, c);
        self.update_gains();
        // Leaving PROBE_RTT just now restores the window before it is set (Linux writes
        // snd_cwnd in bbr_check_probe_rtt_done, bbr_set_cwnd then reads it).
        self.apply_restore(&mut w);
        let bw = self.bw();
        self.set_pacing_rate(bw, self.pacing_gain, w.cwnd, c);
        let cwnd = self.set_cwnd(rs, rs.acked_sacked, bw, self.cwnd_gain, &w, c);
        Some(Control {
            cwnd,
            pacing_rate: Some(self.pacing_rate),
        })
    }

    /// `bbr_set_state`: an RTO ends the round and counts as a loss for lt sampling.
    fn set_state(&mut self, new: CaState, c: &ConnInfo) {
        self.init(c);
        self.last = *c;
        if new == CaState::Loss {
            self.prev_ca_state = CaState::Loss;
            self.full_bw = 0;
            self.round_start = true;
            let rs = RateSample {
                losses: 1,
                ..Default::default()
            };
            self.lt_bw_sampling(&rs, c);
        }
    }

    /// `bbr_cwnd_event`: restarting from idle while app-limited.
    fn cwnd_event(&mut self, ev: CwndEvent, c: &ConnInfo) {
        self.init(c);
        self.last = *c;
        if ev == CwndEvent::TxStart && c.app_limited {
            self.idle_restart = true;
            self.ack_epoch_mstamp = c.now / 1000;
            self.ack_epoch_acked = 0;
            if self.mode == Mode::ProbeBw {
                // Pace at the estimate, not above: nothing to probe for after idle.
                let rate = self.rate_bytes_per_sec(self.bw(), BBR_UNIT);
                if self.full_bw_reached || rate > self.pacing_rate {
                    self.pacing_rate = rate;
                }
            } else if self.mode == Mode::ProbeRtt {
                self.check_probe_rtt_done(c);
            }
        }
    }

    /// `bbr_undo_cwnd`: a spurious loss resets full-pipe and policer detection.
    fn undo_cwnd(&mut self, w: &Window, _prior_cwnd: u32) -> u32 {
        self.full_bw = 0;
        self.full_bw_cnt = 0;
        let c = self.last;
        self.reset_lt_bw_sampling(&c);
        w.cwnd
    }

    fn pacing_rate(&self) -> Option<u64> {
        Some(self.pacing_rate)
    }

    fn take_app_limited_mark(&mut self) -> bool {
        std::mem::take(&mut self.app_limited_mark)
    }
}

#[path = "bbr_lt.rs"]
mod lt;

#[cfg(test)]
#[path = "bbr_tests.rs"]
mod tests;
