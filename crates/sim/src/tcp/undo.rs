//! Undo of a spurious fast recovery by DSACK, as Linux's net/ipv4/tcp_input.c (`tcp_init_undo`,
//! `tcp_check_dsack`, `tcp_try_undo_dsack`, `tcp_try_undo_recovery`, `tcp_undo_cwnd_reduction`):
//! on a path that reorders, a segment taken for lost and retransmitted was only late, and the
//! receiver reports the duplicate in a DSACK (RFC 2883); when every retransmission of the episode
//! has been reported so, the reduction was spurious and is taken back.
//!
//! Principles:
//! * Entering recovery remembers `undo_marker = snd_una`, the window before (`prior_cwnd`) and
//!   `prior_ssthresh` (`tcp_current_ssthresh`: `max(ssthresh, ¾·cwnd)` outside a reduction; 0 when
//!   recovery starts inside an ECN reduction, which is never undone). Each retransmission counts
//!   in `undo_retrans`.
//! * A DSACK above the marker takes back the retransmissions it covers (segments of the queue
//!   that were retransmitted), or one for data already acknowledged (Linux's "dumb counting").
//! * When `undo_retrans` reaches 0 in recovery, or at its end, the window returns to
//!   `undo_cwnd(prior_cwnd)` (`max(cwnd, prior_cwnd)` for Reno and CUBIC) and `ssthresh` to at
//!   least `prior_ssthresh`; RACK re-examines the queue.
//!
//! Not modelled: timestamp undo (`tcp_packet_delayed`), F-RTO and undo after a timeout (a Loss
//! state is never undone), partial undo (`tcp_try_undo_partial`).

use super::cc::CaState;
use super::receiver::AckInfo;
use super::scoreboard::EVER_RETRANS;
use super::sender::Sender;

impl Sender {
    /// `tcp_current_ssthresh`.
    fn current_ssthresh(&self) -> u32 {
        if self.in_cwnd_reduction() {
            self.w.ssthresh
        } else {
            self.w.ssthresh.max((self.w.cwnd >> 1) + (self.w.cwnd >> 2))
        }
    }

    /// `tcp_init_undo` at the start of a recovery (before `tcp_init_cwnd_reduction`).
    pub(super) fn init_undo(&mut self) {
        self.prior_ssthresh = if self.in_cwnd_reduction() {
            0
        } else {
            self.current_ssthresh()
        };
        self.prior_cwnd = self.w.cwnd;
        self.undo_marker = Some(self.snd_una);
        self.undo_retrans = if self.sb.retrans_out > 0 {
            i64::from(self.sb.retrans_out)
        } else {
            -1
        };
    }

    /// A retransmission was sent.
    pub(super) fn undo_count_retransmit(&mut self) {
        self.undo_retrans = self.undo_retrans.max(0) + 1;
    }

    /// `tcp_check_dsack` / `tcp_sacktag_one`: an ACK's DSACK takes back the retransmissions it
    /// reports. Called before the scoreboard forgets what the ACK acknowledges.
    pub(super) fn undo_on_dsack(&mut self, a: &AckInfo, prior_snd_una: u64) {
        let (Some(marker), true) = (self.undo_marker, a.dsack && a.n_sacks > 0) else {
            return;
        };
        let (s, e) = a.sacks[0];
        if self.undo_retrans <= 0 || e <= marker {
            return;
        }
        let undone = if e <= prior_snd_una {
            1
        } else {
            self.sb
                .indices()
                .filter_map(|i| self.sb.get(i))
                .filter(|g| g.seq < e && g.end() > s && g.has(EVER_RETRANS))
                .count() as i64
        };
        self.undo_retrans = (self.undo_retrans - undone).max(0);
    }

    /// `tcp_may_undo` without timestamps: every retransmission was reported spurious.
    fn may_undo(&self) -> bool {
        self.undo_marker.is_some() && self.undo_retrans == 0
    }

    /// `tcp_undo_cwnd_reduction(sk, false)`.
    fn undo_cwnd_reduction(&mut self) {
        if self.prior_ssthresh != 0 && !self.model_based {
            self.w.cwnd = self.cc.undo_cwnd(&self.w, self.prior_cwnd).max(1);
            self.w.ssthresh = self.w.ssthresh.max(self.prior_ssthresh);
            self.ecn.withdraw_cwr();
        }
        self.undo_marker = None;
        self.rack.advanced = true;
        self.stats.undos += 1;
    }

    /// `tcp_try_undo_dsack`, in recovery.
    pub(super) fn try_undo_dsack(&mut self) -> bool {
        if self.ca_state == CaState::Recovery && self.may_undo() {
            self.undo_cwnd_reduction();
            return true;
        }
        false
    }

    /// The undo part of `tcp_try_undo_recovery`, when recovery ends.
    pub(super) fn undo_at_recovery_end(&mut self) {
        if self.may_undo() {
            self.undo_cwnd_reduction();
        }
    }

    /// Whether `tcp_end_cwnd_reduction` sets the window to `ssthresh`: in CWR, or after a
    /// recovery that was not undone.
    pub(super) fn reduction_stands(&self) -> bool {
        self.ca_state == CaState::Cwr || self.undo_marker.is_some()
    }
}
