//! BBR's long-term bandwidth (policer) estimation and ACK-aggregation allowance, from
//! net/ipv4/tcp_bbr.c (`bbr_lt_bw_sampling` and friends, `bbr_update_ack_aggregation`,
//! `bbr_ack_aggregation_cwnd`): split from bbr.rs to keep files readable; same `struct bbr`.
//!
//! Policer: once a loss is seen, intervals of 4–16 rounds are measured; an interval that ends
//! on a loss with lost/delivered ≥ 20 % gives a delivery rate; two consecutive such rates within
//! 1/8 (or 4 kbit/s) of each other mean a token-bucket policer, and their average (lt_bw) is
//! used as the bandwidth, with pacing gain 1, for 48 rounds.
//!
//! ACK aggregation: the most data ACKed beyond bw × (time since the epoch) in the last 5–10
//! rounds is added to the target window (at most bw × 100 ms), so the sender keeps sending
//! through inter-ACK silences of aggregating links and receivers.

use super::*;

impl Bbr {
    pub(super) fn reset_lt_bw_sampling_interval(&mut self, c: &ConnInfo) {
        self.lt_last_stamp = c.now / 1_000_000;
        self.lt_last_delivered = c.delivered;
        self.lt_last_lost = c.lost;
        self.lt_rtt_cnt = 0;
    }

    pub(super) fn reset_lt_bw_sampling(&mut self, c: &ConnInfo) {
        self.lt_bw = 0;
        self.lt_use_bw = false;
        self.lt_is_sampling = false;
        self.reset_lt_bw_sampling_interval(c);
    }

    /// `bbr_lt_bw_interval_done`: two consistent lossy intervals mean a policer.
    pub(super) fn lt_bw_interval_done(&mut self, bw: u64, c: &ConnInfo) {
        if self.lt_bw > 0 {
            let diff = bw.abs_diff(self.lt_bw);
            if diff * BBR_UNIT as u64 <= LT_BW_RATIO * self.lt_bw
                || self.rate_bytes_per_sec(diff, BBR_UNIT) <= LT_BW_DIFF
            {
                self.lt_bw = (bw + self.lt_bw) >> 1;
                self.lt_use_bw = true;
                self.pacing_gain = BBR_UNIT;
                self.lt_rtt_cnt = 0;
                return;
            }
        }
        self.lt_bw = bw;
        self.reset_lt_bw_sampling_interval(c);
    }

    /// `bbr_lt_bw_sampling`.
    pub(super) fn lt_bw_sampling(&mut self, rs: &RateSample, c: &ConnInfo) {
        if self.lt_use_bw {
            if self.mode == Mode::ProbeBw && self.round_start {
                self.lt_rtt_cnt += 1;
                if self.lt_rtt_cnt >= LT_BW_MAX_RTTS {
                    self.reset_lt_bw_sampling(c);
                    self.reset_probe_bw_mode(c.now / 1000);
                }
            }
            return;
        }
        // Sample only from the first loss on: the policer's bucket is then empty.
        if !self.lt_is_sampling {
            if rs.losses == 0 {
                return;
            }
            self.reset_lt_bw_sampling_interval(c);
            self.lt_is_sampling = true;
        }
        if rs.is_app_limited {
            self.reset_lt_bw_sampling(c);
            return;
        }
        if self.round_start {
            self.lt_rtt_cnt += 1;
        }
        if self.lt_rtt_cnt < LT_INTVL_MIN_RTTS {
            return;
        }
        if self.lt_rtt_cnt > 4 * LT_INTVL_MIN_RTTS {
            self.reset_lt_bw_sampling(c);
            return;
        }
        if rs.losses == 0 {
            return;
        }
        let lost = c.lost.saturating_sub(self.lt_last_lost);
        let delivered = c.delivered.saturating_sub(self.lt_last_delivered);
        if delivered == 0 || (lost << BBR_SCALE) < LT_LOSS_THRESH * delivered {
            return;
        }
        let t_ms = (c.now / 1_000_000).saturating_sub(self.lt_last_stamp);
        if t_ms < 1 {
            return;
        }
        if t_ms >= u32::MAX as u64 / 1000 {
            self.reset_lt_bw_sampling(c);
            return;
        }
        let bw = delivered * BW_UNIT / (t_ms * 1000);
        self.lt_bw_interval_done(bw, c);
    }

    /// `bbr_ack_aggregation_cwnd`.
    pub(super) fn ack_aggregation_cwnd(&self) -> u32 {
        if EXTRA_ACKED_GAIN == 0 || !self.full_bw_reached {
            return 0;
        }
        let max_aggr = self.bw() * EXTRA_ACKED_MAX_US / BW_UNIT;
        let aggr = (EXTRA_ACKED_GAIN * self.extra_acked[0].max(self.extra_acked[1])) >> BBR_SCALE;
        aggr.min(max_aggr).min(u32::MAX as u64) as u32
    }

    /// `bbr_update_ack_aggregation`.
    pub(super) fn update_ack_aggregation(&mut self, rs: &RateSample, cwnd: u32, now_us: u64) {
        if EXTRA_ACKED_GAIN == 0 || rs.acked_sacked == 0 || rs.delivered < 0 {
            return;
        }
        if rs.interval.map_or(0, |i| i / 1000) == 0 {
            return;
        }
        if self.round_start {
            self.extra_acked_win_rtts = (self.extra_acked_win_rtts + 1).min(0x1F);
            if self.extra_acked_win_rtts >= EXTRA_ACKED_WIN_RTTS {
                self.extra_acked_win_rtts = 0;
                self.extra_acked_win_idx ^= 1;
                self.extra_acked[self.extra_acked_win_idx] = 0;
            }
        }
        let epoch_us = now_us.saturating_sub(self.ack_epoch_mstamp);
        let mut expected = self.bw() * epoch_us / BW_UNIT;
        let acked = rs.acked_sacked as u64;
        if self.ack_epoch_acked <= expected
            || self.ack_epoch_acked + acked >= ACK_EPOCH_ACKED_RESET_THRESH
        {
            self.ack_epoch_acked = 0;
            self.ack_epoch_mstamp = now_us;
            expected = 0;
        }
        self.ack_epoch_acked = (self.ack_epoch_acked + acked).min(0xFFFFF);
        let extra = self
            .ack_epoch_acked
            .saturating_sub(expected)
            .min(cwnd as u64);
        let slot = &mut self.extra_acked[self.extra_acked_win_idx];
        *slot = (*slot).max(extra);
    }
}
