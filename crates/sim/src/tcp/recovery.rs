//! Loss recovery: the congestion-state machine of Linux's `tcp_fastretrans_alert`
//! (net/ipv4/tcp_input.c) with RACK loss marking (net/ipv4/tcp_recovery.c), and the non-SACK
//! (NewReno) duplicate-ACK accounting.
//!
//! States (`CaState`): **Open** (nothing wrong), **Disorder** (SACKs or duplicate ACKs, nothing
//! lost yet), **CWR** (a reduction after an ECN echo, [`super::ecn`], or after a loss detected by
//! the tail loss probe), **Recovery**
//! (fast recovery, entered as soon as a segment is marked lost; `ssthresh` from the controller,
//! PRR shapes the window; it ends when `snd_una` passes `high_seq`, the `snd_nxt` at entry,
//! with `cwnd = ssthresh`), **Loss** (after an RTO, [`super::loss`]).
//!
//! A reduction found spurious by DSACKs or timestamps is undone ([`super::undo`]). Not modelled:
//! SACK reneging.

use super::cc::{CaState, CwndEvent};
use super::sender::{
    Rexmit, Sender, TimerKind, F_DATA_SACKED, F_ECE, F_LOST_RETRANS, F_NOT_DUP, F_SET_XMIT_TIMER,
    F_SND_UNA_ADVANCED,
};
use super::{rack, sender::Segment};

impl Sender {
    /// `tcp_fastretrans_alert`.
    pub(super) fn fastretrans_alert(
        &mut self,
        prior_snd_una: u64,
        num_dupack: u32,
        flag: &mut u32,
        rexmit: &mut Rexmit,
        now: u64,
    ) {
        let ece = *flag & F_ECE != 0;
        if self.sb.packets_out == 0 && self.sb.sacked_out > 0 {
            self.sb.sacked_out = 0;
        }
        // A. An ECN echo proves congestion: the reduction is never undone.
        if ece {
            self.prior_ssthresh = 0;
        }
        // D. Exit conditions.
        if self.ca_state == CaState::Open {
            self.retrans_stamp = None;
        } else if self.snd_una >= self.high_seq {
            match self.ca_state {
                CaState::Cwr if self.snd_una != self.high_seq => {
                    self.end_cwnd_reduction(now);
                    self.set_state(CaState::Open, now);
                }
                CaState::Recovery => {
                    if !self.sack {
                        self.sb.sacked_out = 0;
                    }
                    if self.try_undo_recovery(now) {
                        return;
                    }
                    self.end_cwnd_reduction(now);
                }
                _ => {}
            }
        }
        // E. Process the state.
        match self.ca_state {
            CaState::Recovery => {
                if *flag & F_SND_UNA_ADVANCED == 0 {
                    if !self.sack {
                        self.add_reno_sack(num_dupack);
                    }
                } else if self.try_undo_partial(prior_snd_una, now) {
                    return;
                }
                if self.try_undo_dsack() {
                    self.try_to_open(*flag, now);
                }
                self.identify_packet_loss(flag, now);
                if self.ca_state != CaState::Recovery {
                    // Undone: a new recovery only if a loss is evident.
                    if self.sb.lost_out == 0 {
                        return;
                    }
                    self.enter_recovery(ece, now);
                }
                *rexmit = Rexmit::Lost;
                return;
            }
            CaState::Loss => {
                self.process_loss(*flag, num_dupack, rexmit, now);
                self.identify_packet_loss(flag, now);
                if !(self.ca_state == CaState::Open || *flag & F_LOST_RETRANS != 0) {
                    return;
                }
            }
            _ => {}
        }
        if !self.sack {
            if *flag & F_SND_UNA_ADVANCED != 0 {
                self.sb.sacked_out = 0;
            }
            self.add_reno_sack(num_dupack);
        }
        if self.ca_state <= CaState::Disorder {
            self.try_undo_dsack();
        }
        self.identify_packet_loss(flag, now);
        if self.sb.lost_out == 0 {
            self.try_to_open(*flag, now);
            return;
        }
        self.enter_recovery(ece, now);
        *rexmit = Rexmit::Lost;
    }

    /// `tcp_try_undo_recovery`: undo if the episode proved spurious, then leave the state (a
    /// non-SACK sender holds it until something above `high_seq` is acknowledged).
    pub(super) fn try_undo_recovery(&mut self, now: u64) -> bool {
        self.undo_at_recovery_end();
        if self.non_sack_preventing_reopen() {
            return true;
        }
        self.set_state(CaState::Open, now);
        false
    }

    /// `tcp_end_cwnd_reduction`.
    fn end_cwnd_reduction(&mut self, now: u64) {
        if self.model_based {
            return;
        }
        if self.w.ssthresh < u32::MAX && self.reduction_stands() {
            self.w.cwnd = self.w.ssthresh.max(1);
        }
        let c = self.conn(now);
        self.cc.cwnd_event(CwndEvent::CompleteCwr, &c);
    }

    /// `tcp_try_to_open`: an ECN echo starts a reduction ([`Sender::enter_cwr`]).
    fn try_to_open(&mut self, flag: u32, now: u64) {
        self.retrans_stamp_cleanup();
        if flag & F_ECE != 0 {
            self.enter_cwr(now);
        }
        if self.ca_state != CaState::Cwr {
            self.try_keep_open(now);
        }
    }

    /// `tcp_try_keep_open`: Disorder while anything is SACKed, lost or retransmitted.
    pub(super) fn try_keep_open(&mut self, now: u64) {
        let state = if self.sb.sacked_out + self.sb.lost_out > 0 || self.any_retrans_done() {
            CaState::Disorder
        } else {
            CaState::Open
        };
        if self.ca_state != state {
            self.set_state(state, now);
            self.high_seq = self.snd_nxt;
        }
    }

    /// `tcp_enter_cwr`: a reduction without loss (ECN), once: nothing while already reducing.
    fn enter_cwr(&mut self, now: u64) {
        self.prior_ssthresh = 0;
        if self.ca_state < CaState::Cwr {
            self.undo_marker = None;
            self.init_cwnd_reduction(now);
            self.set_state(CaState::Cwr, now);
        }
    }

    /// `tcp_init_cwnd_reduction` (with `tcp_ecn_queue_cwr`).
    fn init_cwnd_reduction(&mut self, now: u64) {
        self.high_seq = self.snd_nxt;
        self.tlp_high_seq = 0;
        self.w.cwnd_cnt = 0;
        self.prr.init(self.w.cwnd);
        let c = self.conn(now);
        self.w.ssthresh = self.cc.ssthresh(&self.w, &c);
        self.stats.cwnd_reductions += 1;
        self.ecn.queue_cwr();
    }

    /// `tcp_enter_recovery`; `ece`: the ACK carried an ECN echo.
    pub(super) fn enter_recovery(&mut self, ece: bool, now: u64) {
        self.stats.fast_retransmits += 1;
        self.retrans_stamp_cleanup();
        self.init_recovery_undo(ece);
        if !self.in_cwnd_reduction() {
            self.init_cwnd_reduction(now);
        }
        self.set_state(CaState::Recovery, now);
    }

    /// `tcp_identify_packet_loss`.
    fn identify_packet_loss(&mut self, flag: &mut u32, now: u64) {
        if self.sb.is_empty() {
            return;
        }
        if !self.sack {
            self.newreno_mark_lost(*flag & F_SND_UNA_ADVANCED != 0);
        } else {
            let prior_retrans = self.sb.retrans_out;
            if self.rack_mark_lost(now) {
                *flag &= !F_SET_XMIT_TIMER;
            }
            if prior_retrans > self.sb.retrans_out {
                *flag |= F_LOST_RETRANS;
            }
        }
    }

    /// `tcp_newreno_mark_lost`: the head is lost after `reordering` duplicates, and after each
    /// partial ACK in recovery (RFC 6582).
    fn newreno_mark_lost(&mut self, una_advanced: bool) {
        let state = self.ca_state;
        if (state < CaState::Recovery && self.sb.sacked_out >= self.reordering)
            || (state == CaState::Recovery && una_advanced)
        {
            if self
                .sb
                .head()
                .is_some_and(|s| s.has(super::scoreboard::LOST))
            {
                return;
            }
            if self.sb.mark_lost(0) {
                self.lost += 1;
            }
        }
    }

    /// `tcp_rack_mark_lost`: returns true if a reordering timer was armed.
    fn rack_mark_lost(&mut self, now: u64) -> bool {
        if !self.rack.advanced {
            return false;
        }
        self.rack.advanced = false;
        let timeout = self.rack_detect_loss(now);
        if timeout > 0 {
            self.timer = Some((TimerKind::ReoTimeout, now + timeout + rack::TIMEOUT_MIN_NS));
            return true;
        }
        false
    }

    /// `tcp_rack_detect_loss`: mark lost what was sent before the latest delivered segment and
    /// has waited `rack.rtt + reo_wnd`; returns the time until the next one is due (0 if none).
    fn rack_detect_loss(&mut self, now: u64) -> u64 {
        let reo_wnd = self.rack.reo_wnd(
            self.reord_seen,
            self.ca_state >= CaState::Recovery,
            self.sb.sacked_out,
            self.reordering,
            self.rtt.min_rtt(),
            self.rtt.srtt(),
        );
        let rack = self.rack;
        let mut timeout: u64 = 0;
        let mut lost = 0;
        self.sb.for_each_tsorted(|sb, i| {
            let Some(s) = sb.get(i).copied() else {
                return true;
            };
            if !rack::sent_after(rack.mstamp, s.xmit, rack.end_seq, s.end()) {
                return false;
            }
            let rem = rack.remaining(now, s.xmit, reo_wnd);
            if rem <= 0 {
                if sb.mark_lost(i) {
                    lost += 1;
                }
            } else {
                timeout = timeout.max(rem as u64);
            }
            true
        });
        self.lost += lost;
        timeout
    }

    /// The RACK reordering timer fired (`tcp_rack_reo_timeout`).
    pub(super) fn rack_reo_timeout(&mut self, now: u64, out: &mut Vec<Segment>) {
        let prior_inflight = self.sb.in_flight();
        let prior_lost = self.lost;
        self.rack_detect_loss(now);
        if prior_inflight != self.sb.in_flight() {
            if self.ca_state != CaState::Recovery {
                self.enter_recovery(false, now);
                if !self.model_based {
                    let pipe = self.sb.in_flight();
                    let newly_lost = (self.lost - prior_lost) as u32;
                    if let Some(c) = self.prr.cwnd(self.w.ssthresh, pipe, 1, newly_lost, false) {
                        self.w.cwnd = c.max(1);
                    }
                }
            }
            self.xmit_retransmit_queue(now, out);
        }
        if self.timer_kind() != Some(TimerKind::Retrans) {
            self.rearm_rto(now);
        }
    }

    /// `tcp_process_tlp_ack`: an ACK above the probe tells whether the probe repaired a loss.
    pub(super) fn process_tlp_ack(&mut self, ack: u64, flag: u32, dsack: bool, now: u64) {
        if ack < self.tlp_high_seq {
            return;
        }
        if !self.tlp_retrans || dsack {
            self.tlp_high_seq = 0;
        } else if ack > self.tlp_high_seq {
            // The probe repaired a loss: reduce the window once (CWR).
            self.init_cwnd_reduction(now);
            self.set_state(CaState::Cwr, now);
            self.end_cwnd_reduction(now);
            self.try_keep_open(now);
            self.tlp_high_seq = 0;
        } else if flag & (F_SND_UNA_ADVANCED | F_NOT_DUP | F_DATA_SACKED) == 0 {
            self.tlp_high_seq = 0;
        }
    }

    /// `tcp_add_reno_sack`: without SACK a duplicate ACK stands for one segment delivered.
    pub(super) fn add_reno_sack(&mut self, num_dupack: u32) {
        if num_dupack == 0 {
            return;
        }
        let prior = self.sb.sacked_out;
        self.sb.sacked_out += num_dupack;
        // `tcp_limit_reno_sacked`.
        let holes = self.sb.lost_out.max(1).min(self.sb.packets_out);
        if self.sb.sacked_out + holes > self.sb.packets_out {
            self.sb.sacked_out = self.sb.packets_out - holes;
        }
        self.rate.delivered += self.sb.sacked_out.saturating_sub(prior) as u64;
    }

    /// `tcp_remove_reno_sacks`: a cumulative ACK accounts for the duplicates that preceded it.
    pub(super) fn remove_reno_sacks(&mut self, acked: u32) {
        if acked == 0 {
            return;
        }
        self.rate.delivered += acked.saturating_sub(self.sb.sacked_out).max(1) as u64;
        if acked > self.sb.sacked_out {
            self.sb.sacked_out = 0;
        } else {
            self.sb.sacked_out -= acked - 1;
        }
    }
}
