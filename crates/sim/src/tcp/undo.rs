//! Undo of a spurious window reduction, as Linux's net/ipv4/tcp_input.c (`tcp_init_undo`,
//! `tcp_check_dsack`, `tcp_packet_delayed`, `tcp_may_undo`, `tcp_try_undo_dsack`,
//! `tcp_try_undo_partial`, `tcp_try_undo_recovery`, `tcp_undo_cwnd_reduction`): on a path that
//! reorders, or whose queue outgrew the retransmission timeout, a segment taken for lost and
//! retransmitted was only late. Two kinds of evidence reveal it:
//!
//! * **DSACK** (RFC 2883, RFC 3708): the receiver reports each duplicate; when every
//!   retransmission of the episode has been reported so, the reduction was spurious.
//! * **Timestamps** (the Eifel detection, RFC 3522): an ACK that echoes a timestamp older than
//!   the episode's first retransmission (`retrans_stamp`, Linux's millisecond timestamp clock)
//!   was sent for the original transmission. `tcp_packet_delayed` is also true when nothing was
//!   retransmitted at all.
//!
//! Principles:
//! * Entering recovery remembers `undo_marker = snd_una`, the window before (`prior_cwnd`) and
//!   `prior_ssthresh` (`tcp_current_ssthresh`: `max(ssthresh, ¾·cwnd)` outside a reduction; 0 when
//!   recovery starts inside a reduction or on an ECN echo, which is never undone); a timeout's
//!   Loss state does the same when it reduces `ssthresh` ([`super::loss`]). Each retransmission
//!   counts in `undo_retrans` (the loss probe's is counted through `retrans_out` instead).
//! * A DSACK above the marker takes back the retransmissions it covers (segments of the queue
//!   that were retransmitted), or one for data already acknowledged (Linux's "dumb counting").
//! * `tcp_may_undo` = a marker and (`undo_retrans` = 0 or the packet was delayed). In recovery: a
//!   DSACK undo at any ACK; at a partial ACK, a timestamp proving the hole was filled by the
//!   original undoes it once no retransmission is in flight (`tcp_try_undo_partial`, the lost
//!   marks go too); at the end of the episode, either. In Loss, [`super::loss`] tries it on every
//!   ACK that advances `snd_una`.
//! * Undoing returns the window to `undo_cwnd(prior_cwnd)` (`max(cwnd, prior_cwnd)` for Reno and
//!   CUBIC) and `ssthresh` to `prior_ssthresh` if larger; RACK re-examines the queue.
//!
//! Deviation: the timestamp evidence is used by SACK connections only. With `sack = false` (the
//! seeds' 1995–2001 stacks) it moved the seed000 two-agency figures (y-bulk under ALTQ) and the
//! cause was not analysed, so those senders keep DSACK-only undo (never, without SACK).
//! Not modelled: PAWS (a segment is never discarded for an old timestamp).

use super::cc::CaState;
use super::receiver::AckInfo;
use super::scoreboard::EVER_RETRANS;
use super::sender::Sender;

/// Linux's TCP timestamp clock ticks in milliseconds (`TCP_TS_HZ`).
const TS_TICK_NS: u64 = 1_000_000;

impl Sender {
    /// `tcp_current_ssthresh`.
    pub(super) fn current_ssthresh(&self) -> u32 {
        if self.in_cwnd_reduction() {
            self.w.ssthresh
        } else {
            self.w.ssthresh.max((self.w.cwnd >> 1) + (self.w.cwnd >> 2))
        }
    }

    /// The undo part of `tcp_enter_recovery` (before `tcp_init_cwnd_reduction`): the window
    /// before, and `prior_ssthresh` unless a reduction is under way or `ece` (congestion is
    /// proven).
    pub(super) fn init_recovery_undo(&mut self, ece: bool) {
        self.prior_ssthresh = if self.in_cwnd_reduction() || ece {
            0
        } else {
            self.current_ssthresh()
        };
        self.prior_cwnd = self.w.cwnd;
        self.init_undo();
    }

    /// `tcp_init_undo`: the episode starts at `snd_una`; retransmissions still in flight may be
    /// reported by DSACKs later.
    pub(super) fn init_undo(&mut self) {
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

    /// `tcp_any_retrans_done`.
    pub(super) fn any_retrans_done(&self) -> bool {
        self.sb.retrans_out > 0 || self.sb.head().is_some_and(|s| s.has(EVER_RETRANS))
    }

    /// `tcp_retrans_stamp_cleanup`: forget the first retransmission's time once none is left.
    pub(super) fn retrans_stamp_cleanup(&mut self) {
        if !self.any_retrans_done() {
            self.retrans_stamp = None;
        }
    }

    /// `tcp_tsopt_ecr_before`: this ACK echoes a timestamp from before `when`.
    pub(super) fn ecr_before(&self, when: u64) -> bool {
        self.rcv_tsecr != 0 && self.rcv_tsecr / TS_TICK_NS < when / TS_TICK_NS
    }

    /// `tcp_packet_delayed`: the ACK was sent for an original transmission (its echo predates
    /// the first retransmission), or nothing was retransmitted.
    fn packet_delayed(&self) -> bool {
        self.retrans_stamp.is_none_or(|t| self.ecr_before(t))
    }

    /// `tcp_may_undo`. The timestamp evidence is used with SACK only: a sender without SACK
    /// (the seeds' old stacks) undoes nothing but what DSACKs report, as before.
    pub(super) fn may_undo(&self) -> bool {
        self.undo_marker.is_some()
            && (self.undo_retrans == 0 || (self.sack && self.packet_delayed()))
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

    /// `tcp_undo_cwnd_reduction`; `unmark_loss` also forgets which segments were taken for lost.
    pub(super) fn undo_cwnd_reduction(&mut self, unmark_loss: bool) {
        if unmark_loss {
            self.sb.unmark_lost();
        }
        if self.prior_ssthresh != 0 && !self.model_based {
            self.w.cwnd = self.cc.undo_cwnd(&self.w, self.prior_cwnd).max(1);
            if self.prior_ssthresh > self.w.ssthresh {
                self.w.ssthresh = self.prior_ssthresh;
                self.ecn.withdraw_cwr();
            }
        }
        self.undo_marker = None;
        self.rack.advanced = true;
        self.stats.undos += 1;
    }

    /// `tcp_try_undo_dsack`: every retransmission was reported spurious.
    pub(super) fn try_undo_dsack(&mut self) -> bool {
        if self.undo_marker.is_some() && self.undo_retrans == 0 {
            self.rack.reo_wnd_persist =
                (self.rack.reo_wnd_persist + 1).min(super::rack::RECOVERY_THRESH);
            self.undo_cwnd_reduction(false);
            return true;
        }
        false
    }

    /// `tcp_try_undo_partial`, at an ACK that advances `snd_una` in recovery: if the original
    /// filled the hole (timestamps), this was reordering; undo once no retransmission is in
    /// flight. Returns true when the ACK must not mark or retransmit more.
    pub(super) fn try_undo_partial(&mut self, prior_snd_una: u64, now: u64) -> bool {
        if !self.sack || self.undo_marker.is_none() || !self.packet_delayed() {
            return false;
        }
        self.check_sack_reordering(prior_snd_una);
        if self.sb.retrans_out > 0 {
            return true;
        }
        self.retrans_stamp_cleanup();
        self.undo_cwnd_reduction(true);
        self.try_keep_open(now);
        false
    }

    /// The undo part of `tcp_try_undo_recovery`, when the episode ends: undo if allowed, else
    /// one recovery fewer before a raised RACK window falls back.
    pub(super) fn undo_at_recovery_end(&mut self) {
        if self.may_undo() {
            self.undo_cwnd_reduction(false);
        } else {
            self.rack.recovery_done();
        }
    }

    /// `tcp_is_non_sack_preventing_reopen`: a sender without SACK holds its state until
    /// something above `high_seq` is acknowledged (RFC 6582).
    pub(super) fn non_sack_preventing_reopen(&mut self) -> bool {
        if self.snd_una == self.high_seq && !self.sack {
            self.retrans_stamp_cleanup();
            return true;
        }
        false
    }

    /// Whether `tcp_end_cwnd_reduction` sets the window to `ssthresh`: in CWR, or after a
    /// recovery that was not undone.
    pub(super) fn reduction_stands(&self) -> bool {
        self.ca_state == CaState::Cwr || self.undo_marker.is_some()
    }
}
