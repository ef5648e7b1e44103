//! The TCP sender as Linux's (net/ipv4/tcp_input.c `tcp_ack`, `tcp_sacktag_write_queue`,
//! `tcp_clean_rtx_queue`, `tcp_cong_control`; net/ipv4/tcp_output.c `tcp_write_xmit`,
//! `tcp_xmit_retransmit_queue`, `tcp_rearm_rto`; net/ipv4/tcp_timer.c `tcp_retransmit_timer`),
//! sans-IO: inputs are `handle_*` calls with `now`, outputs the segments pushed to `out` and the
//! deadlines [`Sender::timer`] and [`Sender::pacing_wakeup`] the world must honour.
//!
//! Principles (the order of one ACK is Linux's):
//! 1. Window update (the receiver's advertised right edge; the sender never passes it).
//! 2. SACK tagging ([`super::scoreboard`]): newly SACKed segments are delivered, advance RACK and
//!    the rate sample; a never-retransmitted segment SACKed below the highest SACK is reordering
//!    (`tp->reordering` grows, RACK's window opens).
//! 3. Cumulative ACK: segments leave the queue; RTT from the oldest newly acknowledged segment
//!    never retransmitted (Karn), else from SACKs, else from the timestamp echo; the controller's
//!    `pkts_acked`.
//! 4. Tail-loss-probe bookkeeping, then the recovery state machine ([`super::recovery`]) if the
//!    ACK is "dubious" (duplicate, SACKs, or not in Open), then the TLP/RTO timer.
//! 5. Delivery-rate sample, then the window: the controller's `cong_control` (BBR) if it returns
//!    `Some`, else PRR ([`super::prr`]) in Recovery/CWR, else `cong_avoid` if the ACK acknowledged
//!    data.
//! 6. Retransmissions of segments marked lost, in sequence order, within `cwnd − pipe`; then new
//!    data within `cwnd` and the receive window, paced if the controller gave a pacing rate.
//!
//! Without SACK (`sack = false`), duplicate ACKs count as SACKed segments (Linux's
//! `tcp_add_reno_sack`) and the head is marked lost at three of them and after each partial ACK in
//! recovery (`tcp_newreno_mark_lost`): RFC 6582 NewReno with PRR's window.

use super::cc::{CaState, CongestionControl, ConnInfo, CwndEvent, RateSample, Window};
use super::ecn::SenderEcn;
use super::pacing::Pacing;
use super::prr::Prr;
use super::rack::{self, Rack};
use super::rate::{RateState, SampleBuilder};
use super::receiver::AckInfo;
use super::rtt::RttEstimator;
use super::scoreboard::Scoreboard;
use super::NOTSENT_LOWAT;
use crate::scenario::TcpSpec;

/// A segment to transmit.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Segment {
    pub seq: u64,
    pub len: u32,
    pub retransmit: bool,
    /// Timestamp echo (TSecr): TSval of the latest ACK received.
    pub tsecr: u64,
    /// ECN ([`super::ecn`]): sent ECT(0); carries the CWR flag.
    pub ect: bool,
    pub cwr: bool,
}

/// Counters of one sender.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct SenderStats {
    pub segments_sent: u64,
    /// Segments sent again (`tcpi_total_retrans`).
    pub retransmits: u64,
    /// Fast recoveries entered.
    pub fast_retransmits: u64,
    pub timeouts: u64,
    /// Window reductions (recovery, timeout, TLP-detected loss).
    pub cwnd_reductions: u64,
    pub loss_probes: u64,
    /// Recoveries undone as spurious (DSACK).
    pub undos: u64,
}

/// Which of the sender's one transmission timer is pending (`icsk_pending`).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum TimerKind {
    Retrans,
    ReoTimeout,
    LossProbe,
}

// ACK flags (Linux's FLAG_*; the values are ours).
pub(super) const F_WIN_UPDATE: u32 = 0x02;
pub(super) const F_DATA_ACKED: u32 = 0x04;
pub(super) const F_RETRANS_DATA_ACKED: u32 = 0x08;
pub(super) const F_DATA_SACKED: u32 = 0x20;
pub(super) const F_ECE: u32 = 0x40;
pub(super) const F_LOST_RETRANS: u32 = 0x80;
pub(super) const F_ORIG_SACK_ACKED: u32 = 0x200;
pub(super) const F_SND_UNA_ADVANCED: u32 = 0x400;
pub(super) const F_DSACKING_ACK: u32 = 0x800;
pub(super) const F_SET_XMIT_TIMER: u32 = 0x1000;
pub(super) const F_ACKED: u32 = F_DATA_ACKED;
pub(super) const F_NOT_DUP: u32 = F_WIN_UPDATE | F_ACKED;
pub(super) const F_CA_ALERT: u32 = F_DATA_SACKED | F_ECE | F_DSACKING_ACK;
pub(super) const F_FORWARD_PROGRESS: u32 = F_ACKED | F_DATA_SACKED;

/// What an ACK leaves to (re)transmit once the window is set (`REXMIT_*` of tcp_input.c).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(super) enum Rexmit {
    None,
    /// Segments marked lost.
    Lost,
    /// New data first (F-RTO's step 2.b), then lost segments if none could go.
    New,
}

/// `net.ipv4.tcp_reordering` and `tcp_max_reordering`.
pub const REORDERING: u32 = 3;
pub const MAX_REORDERING: u32 = 300;

#[derive(Debug)]
pub struct Sender {
    pub(super) mss: u32,
    pub(super) sack: bool,
    pub(super) cc: Box<dyn CongestionControl>,
    pub(super) w: Window,
    pub(super) sb: Scoreboard,
    pub(super) rtt: RttEstimator,
    pub(super) rack: Rack,
    pub(super) prr: Prr,
    pub(super) rate: RateState,
    pub(super) pacing: Pacing,
    pub snd_una: u64,
    /// Highest sequence sent plus one (Linux's `snd_nxt` never moves back).
    pub snd_nxt: u64,
    /// One past the last byte the application will write (`u64::MAX` while it keeps writing).
    end: u64,
    snd_wnd: u64,
    right_edge: u64,
    pub(super) ca_state: CaState,
    pub(super) high_seq: u64,
    pub(super) tlp_high_seq: u64,
    pub(super) tlp_retrans: bool,
    pub(super) reordering: u32,
    pub(super) reord_seen: bool,
    /// Segments ever marked lost (`tp->lost`).
    pub(super) lost: u64,
    pub(super) timer: Option<(TimerKind, u64)>,
    pub(super) backoff: u32,
    /// RTO retransmissions since snd_una last advanced (`icsk_retransmits`).
    pub(super) rto_retransmits: u32,
    pub(super) model_based: bool,
    is_cwnd_limited: bool,
    max_packets_out: u32,
    cwnd_usage_seq: u64,
    lsndtime: u64,
    init_cwnd: u32,
    ts_recent: u64,
    pacing_wake: Option<u64>,
    pub stats: SenderStats,
    pub ecn: SenderEcn,
    /// Undo state ([`super::undo`]): `snd_una` at the start of the recovery (`None`: nothing
    /// to undo), retransmissions not yet reported spurious, the window before.
    pub(super) undo_marker: Option<u64>,
    pub(super) undo_retrans: i64,
    pub(super) prior_ssthresh: u32,
    pub(super) prior_cwnd: u32,
    /// Time of the first retransmission of the episode (`retrans_stamp`; `None`: nothing
    /// retransmitted), and the timestamp echo of the ACK being processed (`rcv_tsecr`): a
    /// timestamp echo older than the first retransmission proves the original arrived.
    pub(super) retrans_stamp: Option<u64>,
    pub(super) rcv_tsecr: u64,
    /// F-RTO (RFC 5682, `tp->frto`) is under way after a timeout.
    pub(super) frto: bool,
}

impl Sender {
    pub fn new(spec: &TcpSpec, mss: u32, cc: Box<dyn CongestionControl>) -> Self {
        Sender {
            mss,
            sack: spec.sack,
            cc,
            w: Window {
                cwnd: spec.init_cwnd.max(1),
                cwnd_cnt: 0,
                ssthresh: u32::MAX,
                cwnd_clamp: u32::MAX,
            },
            sb: Scoreboard::new(mss),
            rtt: RttEstimator::new(spec.min_rto.0),
            rack: Rack::new(),
            prr: Prr::default(),
            rate: RateState::default(),
            pacing: Pacing::default(),
            snd_una: 0,
            snd_nxt: 0,
            end: spec.bytes.unwrap_or(u64::MAX),
            snd_wnd: super::receiver::INITIAL_WINDOW,
            right_edge: super::receiver::INITIAL_WINDOW,
            ca_state: CaState::Open,
            high_seq: 0,
            tlp_high_seq: 0,
            tlp_retrans: false,
            reordering: REORDERING,
            reord_seen: false,
            lost: 0,
            timer: None,
            backoff: 0,
            rto_retransmits: 0,
            model_based: false,
            is_cwnd_limited: false,
            max_packets_out: 0,
            cwnd_usage_seq: 0,
            lsndtime: 0,
            init_cwnd: spec.init_cwnd.max(1),
            ts_recent: 0,
            pacing_wake: None,
            stats: SenderStats::default(),
            ecn: SenderEcn::new(spec.ecn),
            undo_marker: None,
            undo_retrans: 0,
            prior_ssthresh: 0,
            prior_cwnd: 0,
            retrans_stamp: None,
            rcv_tsecr: 0,
            frto: false,
        }
    }

    // ----- getters -----

    /// Congestion window in segments.
    pub fn cwnd(&self) -> u32 {
        self.w.cwnd
    }
    pub fn ssthresh(&self) -> u32 {
        self.w.ssthresh
    }
    pub fn ca_state(&self) -> CaState {
        self.ca_state
    }
    pub fn srtt_ns(&self) -> Option<u64> {
        let s = self.rtt.srtt();
        (s > 0).then_some(s)
    }
    /// The retransmission timeout now, backoff included.
    pub fn rto_ns(&self) -> u64 {
        self.rtt.backed_off(self.backoff)
    }
    /// Segments in flight (`tcp_packets_in_flight`).
    pub fn in_flight(&self) -> u32 {
        self.sb.in_flight()
    }
    /// When the transmission timer (RTO, RACK reordering timer or loss probe) fires.
    pub fn timer(&self) -> Option<u64> {
        self.timer.map(|t| t.1)
    }
    pub fn timer_kind(&self) -> Option<TimerKind> {
        self.timer.map(|t| t.0)
    }
    /// When pacing allows the next segment, if the sender is waiting for it.
    pub fn pacing_wakeup(&self) -> Option<u64> {
        self.pacing_wake
    }
    /// The application has unsent data and the receive window lets some go.
    pub(super) fn has_new_data(&self) -> bool {
        self.snd_nxt < self.end && self.right_edge > self.snd_nxt
    }

    /// All data written and acknowledged.
    pub fn finished(&self) -> bool {
        self.snd_una >= self.end
    }

    /// The application stops writing: what it wrote and was not yet sent is at most
    /// [`NOTSENT_LOWAT`] bytes, rounded up to whole segments.
    pub fn stop(&mut self) {
        let mss = self.mss as u64;
        let tail = NOTSENT_LOWAT.div_ceil(mss) * mss;
        self.end = self.end.min(self.snd_nxt.saturating_add(tail));
    }

    pub(super) fn conn(&self, now: u64) -> ConnInfo {
        ConnInfo {
            now,
            mss: self.mss,
            in_flight: self.sb.in_flight(),
            srtt: self.rtt.srtt(),
            min_rtt: self.rtt.min_rtt(),
            delivered: self.rate.delivered,
            app_limited: self.rate.app_limited != 0,
            cwnd_limited: self.cwnd_limited(),
            ca_state: self.ca_state,
            snd_una: self.snd_una,
            snd_nxt: self.snd_nxt,
            last_send: self.lsndtime,
            lost: self.lost,
        }
    }

    /// `tcp_is_cwnd_limited`.
    fn cwnd_limited(&self) -> bool {
        if self.is_cwnd_limited {
            return true;
        }
        if self.w.cwnd < self.w.ssthresh {
            return self.w.cwnd < 2 * self.max_packets_out;
        }
        false
    }

    pub(super) fn in_cwnd_reduction(&self) -> bool {
        matches!(self.ca_state, CaState::Cwr | CaState::Recovery)
    }

    pub(super) fn set_state(&mut self, s: CaState, now: u64) {
        if s != self.ca_state {
            let c = self.conn(now);
            self.cc.set_state(s, &c);
            self.ca_state = s;
        }
    }

    // ----- sending -----

    /// Send what the windows allow (the application wrote, or a timer fired).
    pub fn poll_send(&mut self, now: u64, out: &mut Vec<Segment>) {
        self.pacing_wake = None;
        self.xmit_retransmit_queue(now, out);
        self.write_xmit(now, out, false);
    }

    /// The pacing timer fired.
    pub fn on_pacing_timer(&mut self, now: u64, out: &mut Vec<Segment>) {
        self.poll_send(now, out);
    }

    fn paced_out(&mut self, now: u64) -> bool {
        if let Some(t) = self.pacing.blocked(now) {
            self.pacing_wake = Some(t);
            return true;
        }
        false
    }

    /// `tcp_write_xmit`: new data. `probe`: one segment ignoring `cwnd` (the loss probe).
    pub(super) fn write_xmit(&mut self, now: u64, out: &mut Vec<Segment>, probe: bool) -> u32 {
        let mut sent = 0;
        let mut cwnd_limited = false;
        while self.snd_nxt < self.end {
            if self.paced_out(now) {
                break;
            }
            let in_flight = self.sb.in_flight();
            if in_flight >= self.w.cwnd && !probe {
                cwnd_limited = true;
                break;
            }
            let len = (self.mss as u64).min(self.end - self.snd_nxt);
            if self.snd_nxt + len > self.right_edge {
                break;
            }
            let prior_packets = self.sb.packets_out;
            if in_flight == 0 {
                self.on_tx_start(now);
            }
            let tx = self.rate.on_sent(now, prior_packets);
            self.sb.push(self.snd_nxt, len as u32, now, tx);
            self.pacing.on_sent(now, len as u32);
            let (ect, cwr) = self.ecn.on_send(false);
            out.push(Segment {
                seq: self.snd_nxt,
                len: len as u32,
                retransmit: false,
                tsecr: self.ts_recent,
                ect,
                cwr,
            });
            self.stats.segments_sent += 1;
            self.snd_nxt += len;
            self.lsndtime = now;
            // `tcp_event_new_data_sent`.
            if prior_packets == 0 || self.timer_kind() == Some(TimerKind::LossProbe) {
                self.rearm_rto(now);
            }
            sent += 1;
            if probe {
                break;
            }
        }
        cwnd_limited |= self.sb.in_flight() >= self.w.cwnd;
        if sent > 0 || cwnd_limited {
            self.cwnd_validate(cwnd_limited);
        }
        if sent > 0 {
            if self.in_cwnd_reduction() {
                self.prr.on_sent(sent);
            }
            if !probe {
                self.schedule_loss_probe(now, false);
            }
        }
        if self.snd_nxt >= self.end
            && self.sb.in_flight() < self.w.cwnd
            && self.sb.lost_out <= self.sb.retrans_out
        {
            // `tcp_rate_check_app_limited`: the application has nothing more to send.
            self.rate.mark_app_limited(self.sb.in_flight());
        }
        sent
    }

    /// First transmission with nothing in flight: `CA_EVENT_TX_START`, and the window restart
    /// after an idle period longer than the RTO (`tcp_cwnd_restart`, RFC 5681 §4.1).
    fn on_tx_start(&mut self, now: u64) {
        if self.stats.segments_sent > 0 && !self.model_based {
            let rto = self.rto_ns();
            let mut idle = now.saturating_sub(self.lsndtime);
            if idle > rto {
                let restart = self.init_cwnd.min(self.w.cwnd);
                self.w.ssthresh = self.w.ssthresh.max(self.w.cwnd - (self.w.cwnd >> 2));
                while idle > rto && self.w.cwnd > restart {
                    idle -= rto;
                    self.w.cwnd >>= 1;
                }
                self.w.cwnd = self.w.cwnd.max(restart);
            }
        }
        let c = self.conn(now);
        self.cc.cwnd_event(CwndEvent::TxStart, &c);
    }

    /// `tcp_cwnd_validate`: remember whether the window was the limit over the last round trip.
    fn cwnd_validate(&mut self, is_cwnd_limited: bool) {
        if self.snd_una >= self.cwnd_usage_seq
            || is_cwnd_limited
            || (!self.is_cwnd_limited && self.sb.packets_out > self.max_packets_out)
        {
            self.is_cwnd_limited = is_cwnd_limited;
            self.max_packets_out = self.sb.packets_out;
            self.cwnd_usage_seq = self.snd_nxt;
        }
    }

    /// Send segment `i` of the queue again (`tcp_retransmit_skb`): the first retransmission of
    /// an episode stamps it, and each counts for undo.
    pub(super) fn retransmit(&mut self, i: usize, now: u64, out: &mut Vec<Segment>) {
        if self.send_again(i, now, out) {
            self.retrans_stamp.get_or_insert(now);
            self.undo_count_retransmit();
        }
    }

    /// `__tcp_retransmit_skb`: segment `i` goes again (the loss probe's retransmission too).
    fn send_again(&mut self, i: usize, now: u64, out: &mut Vec<Segment>) -> bool {
        let Some(s) = self.sb.get(i).copied() else {
            return false;
        };
        let tx = self.rate.on_sent(now, self.sb.packets_out);
        self.sb.retransmitted(i, now, tx);
        self.pacing.on_sent(now, s.len);
        out.push(Segment {
            seq: s.seq,
            len: s.len,
            retransmit: true,
            tsecr: self.ts_recent,
            ect: false,
            cwr: false,
        });
        self.stats.segments_sent += 1;
        self.stats.retransmits += 1;
        self.lsndtime = now;
        true
    }

    /// `tcp_xmit_retransmit_queue`: lost segments in order, within `cwnd − pipe`.
    pub(super) fn xmit_retransmit_queue(&mut self, now: u64, out: &mut Vec<Segment>) {
        let mut rearm = false;
        loop {
            if self.sb.in_flight() >= self.w.cwnd {
                break;
            }
            let Some(i) = self.sb.next_lost() else {
                break;
            };
            if self.paced_out(now) {
                break;
            }
            self.retransmit(i, now, out);
            if self.in_cwnd_reduction() {
                self.prr.on_sent(1);
            }
            if i == 0 && self.timer_kind() != Some(TimerKind::ReoTimeout) {
                rearm = true;
            }
        }
        if rearm {
            self.timer = Some((TimerKind::Retrans, now + self.rto_ns()));
        }
    }

    // ----- timers -----

    /// How long until the RTO of the head would fire (`tcp_rto_delta_us`).
    pub(super) fn rto_delta(&self, now: u64) -> i64 {
        let head = self.sb.head().map(|s| s.xmit).unwrap_or(now);
        (head + self.rto_ns()) as i64 - now as i64
    }

    /// `tcp_rearm_rto`.
    pub(super) fn rearm_rto(&mut self, now: u64) {
        if self.sb.packets_out == 0 {
            self.timer = None;
            return;
        }
        let mut rto = self.rto_ns();
        if matches!(
            self.timer_kind(),
            Some(TimerKind::ReoTimeout) | Some(TimerKind::LossProbe)
        ) {
            rto = self.rto_delta(now).max(1) as u64;
        }
        self.timer = Some((TimerKind::Retrans, now + rto));
    }

    /// `tcp_schedule_loss_probe`.
    pub(super) fn schedule_loss_probe(&mut self, now: u64, advancing_rto: bool) -> bool {
        if self.sb.packets_out == 0
            || !self.sack
            || !matches!(self.ca_state, CaState::Open | CaState::Cwr)
        {
            return false;
        }
        let left = if advancing_rto {
            self.rto_ns()
        } else {
            self.rto_delta(now).max(0) as u64
        };
        let pto = rack::probe_timeout(
            self.rtt.srtt(),
            self.sb.packets_out,
            self.rtt.rto_min(),
            left,
        );
        self.timer = Some((TimerKind::LossProbe, now + pto));
        true
    }

    /// The transmission timer fired at `now` (the world calls this at [`Sender::timer`]).
    pub fn on_timer(&mut self, now: u64, out: &mut Vec<Segment>) {
        let Some((kind, at)) = self.timer else {
            return;
        };
        if at > now {
            return;
        }
        match kind {
            TimerKind::Retrans => {
                self.timer = None;
                self.retransmit_timer(now, out);
            }
            TimerKind::ReoTimeout => self.rack_reo_timeout(now, out),
            TimerKind::LossProbe => self.send_loss_probe(now, out),
        }
        self.write_xmit(now, out, false);
    }

    /// `tcp_retransmit_timer`.
    fn retransmit_timer(&mut self, now: u64, out: &mut Vec<Segment>) {
        if self.sb.packets_out == 0 {
            return;
        }
        self.stats.timeouts += 1;
        self.enter_loss(now);
        self.retransmit(0, now, out);
        self.backoff += 1;
        self.rto_retransmits += 1;
        self.timer = Some((TimerKind::Retrans, now + self.rto_ns()));
    }

    /// `tcp_send_loss_probe`.
    fn send_loss_probe(&mut self, now: u64, out: &mut Vec<Segment>) {
        if self.tlp_high_seq == 0 {
            self.tlp_retrans = false;
            let mut sent = false;
            let len = (self.mss as u64).min(self.end.saturating_sub(self.snd_nxt));
            if len > 0 && self.snd_nxt + len <= self.right_edge {
                sent = self.write_xmit(now, out, true) > 0;
            }
            if !sent && !self.sb.is_empty() {
                let last = self.sb.len() - 1;
                self.send_again(last, now, out);
                self.tlp_retrans = true;
                sent = true;
            }
            if sent {
                self.tlp_high_seq = self.snd_nxt;
                self.stats.loss_probes += 1;
                self.timer = None;
            }
        }
        self.rearm_rto(now);
    }

    // ----- ACK processing -----

    /// An ACK arrived at `now`. Returns the RTT sample it gave, if any.
    pub fn on_ack(&mut self, a: &AckInfo, now: u64, out: &mut Vec<Segment>) -> Option<u64> {
        self.pacing_wake = None;
        let ack = a.ack;
        if ack > self.snd_nxt {
            return None;
        }
        self.ts_recent = a.tsval;
        self.rcv_tsecr = a.tsecr;
        let prior_snd_una = self.snd_una;
        let mut flag = 0;
        let mut rexmit = Rexmit::None;
        if ack < prior_snd_una {
            // An old ACK may still carry SACK information.
            if self.sack && a.n_sacks > 0 {
                self.undo_on_dsack(a, prior_snd_una);
                let mut b = SampleBuilder::default();
                let prior_delivered = self.rate.delivered;
                flag |= self.sacktag(a, now, &mut b).0;
                self.fastretrans_alert(prior_snd_una, 0, &mut flag, &mut rexmit, now);
                let _ = prior_delivered;
                self.xmit_recovery(rexmit, now, out);
            }
            return None;
        }
        if self.ecn.echo(a.ece) {
            flag |= F_ECE;
        }
        if ack > prior_snd_una {
            flag |= F_SND_UNA_ADVANCED;
            self.rto_retransmits = 0;
        }
        // `tcp_ack_update_window`.
        if ack > prior_snd_una || a.wnd > self.snd_wnd {
            flag |= F_WIN_UPDATE;
        }
        self.snd_wnd = a.wnd;
        self.right_edge = ack + a.wnd;
        self.snd_una = ack;
        let prior_fack = if self.sack {
            self.sb.highest_sack.max(prior_snd_una)
        } else {
            prior_snd_una
        };
        let prior_packets = self.sb.packets_out;
        let prior_delivered = self.rate.delivered;
        let prior_lost = self.lost;
        let mut b = SampleBuilder::default();
        b.rs.prior_in_flight = self.sb.in_flight();
        let mut sack_rtt = (None, None);
        if self.sack && a.n_sacks > 0 {
            self.undo_on_dsack(a, prior_snd_una);
            let (f, first, last) = self.sacktag(a, now, &mut b);
            flag |= f;
            sack_rtt = (first, last);
        }
        if prior_packets == 0 {
            if self.tlp_high_seq != 0 {
                self.process_tlp_ack(ack, flag, a.dsack, now);
            }
            self.write_xmit(now, out, false);
            return None;
        }
        let (f, sample) = self.clean_rtx_queue(a, prior_fack, now, &mut b, sack_rtt);
        flag |= f;
        if self.tlp_high_seq != 0 {
            self.process_tlp_ack(ack, flag, a.dsack, now);
        }
        if self.ack_is_dubious(flag) {
            let num_dupack = if flag & (F_SND_UNA_ADVANCED | F_NOT_DUP | F_DSACKING_ACK) == 0 {
                1
            } else {
                0
            };
            self.fastretrans_alert(prior_snd_una, num_dupack, &mut flag, &mut rexmit, now);
        }
        if flag & F_SET_XMIT_TIMER != 0 && !self.schedule_loss_probe(now, true) {
            self.rearm_rto(now);
        }
        let delivered = (self.rate.delivered - prior_delivered) as u32;
        let lost = (self.lost - prior_lost) as u32;
        self.rate
            .generate(&mut b, now, delivered, lost, self.rtt.min_rtt());
        self.rack
            .update_reo_wnd(b.rs.prior_delivered, self.rate.delivered);
        self.cong_control(delivered, flag, &b.rs, now);
        self.xmit_recovery(rexmit, now, out);
        self.write_xmit(now, out, false);
        sample
    }

    /// `tcp_xmit_recovery`: after the window is set, F-RTO's new data or the lost segments.
    fn xmit_recovery(&mut self, rexmit: Rexmit, now: u64, out: &mut Vec<Segment>) {
        match rexmit {
            Rexmit::None => return,
            Rexmit::New => {
                self.write_xmit(now, out, false);
                if self.snd_nxt > self.high_seq {
                    return;
                }
                self.frto = false;
            }
            Rexmit::Lost => {}
        }
        self.xmit_retransmit_queue(now, out);
    }

    fn ack_is_dubious(&self, flag: u32) -> bool {
        flag & F_NOT_DUP == 0 || flag & F_CA_ALERT != 0 || self.ca_state != CaState::Open
    }

    /// `tcp_cong_control`.
    fn cong_control(&mut self, delivered: u32, flag: u32, rs: &RateSample, now: u64) {
        let c = self.conn(now);
        if let Some(ctl) = self.cc.cong_control(&self.w, &c, rs) {
            self.model_based = true;
            self.w.cwnd = ctl.cwnd.max(1);
            self.pacing.rate = ctl.pacing_rate;
            return;
        }
        if self.in_cwnd_reduction() {
            let pipe = self.sb.in_flight();
            let adv = flag & F_SND_UNA_ADVANCED != 0;
            if let Some(cwnd) = self
                .prr
                .cwnd(self.w.ssthresh, pipe, delivered, rs.losses, adv)
            {
                self.w.cwnd = cwnd.max(1);
            }
        } else if self.may_raise_cwnd(flag) {
            self.cc.cong_avoid(&mut self.w, &c, delivered);
            self.w.cwnd = self.w.cwnd.max(1);
        }
    }

    fn may_raise_cwnd(&self, flag: u32) -> bool {
        if self.reordering > REORDERING {
            flag & F_FORWARD_PROGRESS != 0
        } else {
            flag & F_DATA_ACKED != 0
        }
    }
}
