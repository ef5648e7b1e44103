//! The Loss state after a retransmission timeout, as Linux's net/ipv4/tcp_input.c
//! (`tcp_enter_loss`, `tcp_timeout_mark_lost`, `tcp_process_loss`, `tcp_try_undo_loss`), with
//! F-RTO (RFC 5682 §3.1, the SACK-enhanced variant; `net.ipv4.tcp_frto = 2`, Linux's default).
//!
//! Principles:
//! * A timeout marks lost every segment not SACKed, except those sent within the last RACK RTT
//!   (the head always); `cwnd = pipe + 1` and slow start from there. `ssthresh` is reduced (and
//!   the episode remembered for undo: `prior_ssthresh`, `prior_cwnd`, `undo_marker`) unless a
//!   reduction was already made for this window of data. `high_seq = snd_nxt`: the Loss state
//!   ends when it is acknowledged.
//! * A timeout can be spurious: the queue (or the path) delayed the ACKs longer than the RTO,
//!   and the original segments arrive after all. Two checks take it back at once, restoring the
//!   window and unmarking the losses ([`super::undo`]):
//!   - timestamps: an ACK that advances `snd_una` while echoing a timestamp older than the
//!     timeout's retransmission was sent for an original (`tcp_may_undo`);
//!   - F-RTO: after the retransmission of the head, the first ACK that advances `snd_una` sends
//!     new data instead of more retransmissions (step 2.b); if the next ACKs acknowledge or SACK
//!     never-retransmitted data sent before the timeout, the timeout was spurious (step 3.b);
//!     a duplicate ACK or a SACK without that means the loss was real (step 3.a). F-RTO runs
//!     for a new episode or a repeated timeout of the same one, not after a fast recovery.
//! * Otherwise the lost segments go in order as the window allows (go-back-N over the holes,
//!   `tcp_xmit_retransmit_queue`), and a sender without SACK counts duplicate ACKs of new data.

use super::cc::{CaState, CwndEvent};
use super::sender::{
    Rexmit, Sender, F_DATA_SACKED, F_ORIG_SACK_ACKED, F_SND_UNA_ADVANCED, REORDERING,
};

impl Sender {
    /// `tcp_enter_loss` (with `tcp_timeout_mark_lost`).
    pub(super) fn enter_loss(&mut self, now: u64) {
        let new_recovery = self.ca_state < CaState::Recovery;
        // Mark lost every segment not SACKed, except those sent within the last RACK RTT.
        if !self.sack {
            self.sb.sacked_out = 0;
        }
        for i in self.sb.indices() {
            if i > 0 {
                if let Some(s) = self.sb.get(i) {
                    if self.rack.remaining(now, s.xmit, 0) > 0 {
                        continue;
                    }
                }
            }
            if self.sb.mark_lost(i) {
                self.lost += 1;
            }
        }
        // Reduce ssthresh unless it was already reduced for this window of data.
        if self.ca_state <= CaState::Disorder
            || self.high_seq <= self.snd_una
            || (self.ca_state == CaState::Loss && self.rto_retransmits == 0)
        {
            self.prior_ssthresh = self.current_ssthresh();
            self.prior_cwnd = self.w.cwnd;
            let c = self.conn(now);
            self.w.ssthresh = self.cc.ssthresh(&self.w, &c);
            self.cc.cwnd_event(CwndEvent::Loss, &c);
            self.stats.cwnd_reductions += 1;
            self.init_undo();
        }
        self.w.cwnd = self.sb.in_flight() + 1;
        self.w.cwnd_cnt = 0;
        if self.ca_state <= CaState::Disorder && self.sb.sacked_out >= REORDERING {
            self.reordering = self.reordering.min(REORDERING);
        }
        self.set_state(CaState::Loss, now);
        self.high_seq = self.snd_nxt;
        self.tlp_high_seq = 0;
        self.ecn.queue_cwr();
        self.frto = new_recovery || self.rto_retransmits > 0;
    }

    /// `tcp_process_loss`: an ACK in the Loss state.
    pub(super) fn process_loss(
        &mut self,
        flag: u32,
        num_dupack: u32,
        rexmit: &mut Rexmit,
        now: u64,
    ) {
        let recovered = self.snd_una >= self.high_seq;
        if flag & F_SND_UNA_ADVANCED != 0 && self.try_undo_loss(false, now) {
            return;
        }
        if self.frto {
            // Step 3.b: never-retransmitted data was delivered, so not all was lost.
            if flag & F_ORIG_SACK_ACKED != 0 && self.try_undo_loss(true, now) {
                return;
            }
            if self.snd_nxt > self.high_seq {
                // Step 3.a: new data went out and the ACK still reports a hole.
                if flag & F_DATA_SACKED != 0 || num_dupack > 0 {
                    self.frto = false;
                }
            } else if flag & F_SND_UNA_ADVANCED != 0 && !recovered {
                self.high_seq = self.snd_nxt;
                // Step 2.b: send new data (once the window is updated), else retransmit.
                if self.has_new_data() {
                    *rexmit = Rexmit::New;
                    return;
                }
                self.frto = false;
            }
        }
        if recovered {
            self.try_undo_recovery(now);
            return;
        }
        if !self.sack {
            if self.snd_nxt > self.high_seq && num_dupack > 0 {
                self.add_reno_sack(num_dupack);
            } else if flag & F_SND_UNA_ADVANCED != 0 {
                self.sb.sacked_out = 0;
            }
        }
        *rexmit = Rexmit::Lost;
    }

    /// `tcp_try_undo_loss`: undo the timeout's reduction if F-RTO proved it spurious
    /// (`frto_undo`) or the timestamps do.
    fn try_undo_loss(&mut self, frto_undo: bool, now: u64) -> bool {
        if !frto_undo && !self.may_undo() {
            return false;
        }
        self.undo_cwnd_reduction(true);
        self.rto_retransmits = 0;
        if self.non_sack_preventing_reopen() {
            return true;
        }
        if frto_undo || self.sack {
            self.set_state(CaState::Open, now);
        }
        true
    }
}
