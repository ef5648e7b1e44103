//! What one ACK delivers, as Linux's `tcp_sacktag_write_queue` / `tcp_sacktag_one`,
//! `tcp_clean_rtx_queue`, `tcp_ack_update_rtt` and `tcp_check_sack_reordering`
//! (net/ipv4/tcp_input.c).
//!
//! Principles:
//! * SACK blocks are validated (above `snd_una`; a leading DSACK only flags the ACK), sorted and
//!   applied to the scoreboard; every newly SACKed segment counts as delivered, advances RACK and
//!   feeds the delivery-rate sample.
//! * The cumulative ACK removes whole segments from the queue; without SACK, the duplicate ACKs
//!   counted as SACKed segments are accounted for (`tcp_remove_reno_sacks`).
//! * RTT (Karn, RFC 6298 §3): from the oldest newly acknowledged segment never retransmitted;
//!   else from the oldest newly SACKed one; else from the timestamp echo (RFC 7323, millisecond
//!   clock). The controller's windowed-min feed uses the newest segment's RTT.
//! * An original transmission delivered below the highest SACK reveals reordering: Linux's
//!   `tp->reordering` grows to the distance in segments (at most 300) and RACK's window opens.

use super::cc::AckSample;
use super::rate::SampleBuilder;
use super::receiver::AckInfo;
use super::scoreboard::{EVER_RETRANS, SACKED};
use super::sender::{
    Sender, F_ACKED, F_DATA_SACKED, F_DSACKING_ACK, F_ORIG_SACK_ACKED, F_RETRANS_DATA_ACKED,
    F_SET_XMIT_TIMER, MAX_REORDERING,
};

impl Sender {
    /// `tcp_sacktag_write_queue`: returns the flags and the send times of the first and last
    /// newly SACKed never-retransmitted segments.
    pub(super) fn sacktag(
        &mut self,
        a: &AckInfo,
        now: u64,
        b: &mut SampleBuilder,
    ) -> (u32, Option<u64>, Option<u64>) {
        let mut flag = 0;
        let mut blocks: [(u64, u64); 3] = [(0, 0); 3];
        let mut n = 0;
        for (k, &(s, e)) in a.blocks().iter().enumerate() {
            if k == 0 && a.dsack {
                // `tcp_check_dsack` → `tcp_dsack_seen`: RACK may widen its window.
                flag |= F_DSACKING_ACK;
                self.rack.dsack_seen = true;
                continue;
            }
            if e <= self.snd_una || s >= e {
                continue;
            }
            blocks[n] = (s, e);
            n += 1;
        }
        let blocks = &mut blocks[..n];
        blocks.sort_unstable();
        let prior_highest = self.sb.highest_sack;
        let high_seq = self.high_seq;
        let mut orig_acked = false;
        let min_rtt = self.rtt.min_rtt();
        let mut reord = u64::MAX;
        let mut first = None;
        let mut last = None;
        let mut newly = 0;
        for &(s, e) in blocks.iter() {
            let rack = &mut self.rack;
            let rate = &mut self.rate;
            newly += self.sb.sack_block(s, e, |seg| {
                let retrans = seg.has(EVER_RETRANS);
                if !retrans {
                    if seg.seq < prior_highest {
                        reord = reord.min(seg.seq);
                    }
                    orig_acked |= seg.end() <= high_seq;
                    first.get_or_insert(seg.xmit);
                    last = Some(seg.xmit);
                }
                rate.delivered += 1;
                rack.advance(now, seg.xmit, seg.end(), retrans, min_rtt);
                let (xmit, end) = (seg.xmit, seg.end());
                rate.on_delivered(b, &mut seg.tx, xmit, end, retrans, true);
            });
        }
        self.sb.set_sack_cache(blocks);
        if newly > 0 {
            flag |= F_DATA_SACKED;
        }
        if orig_acked {
            flag |= F_ORIG_SACK_ACKED;
        }
        if reord != u64::MAX {
            self.check_sack_reordering(reord);
        }
        (flag, first.map(|t| now - t), last.map(|t| now - t))
    }

    /// `tcp_check_sack_reordering`: a hole below the highest SACK was filled by an original
    /// transmission.
    pub(super) fn check_sack_reordering(&mut self, low_seq: u64) {
        let fack = self.sb.highest_sack;
        if low_seq >= fack {
            return;
        }
        let metric = fack - low_seq;
        let mss = self.mss as u64;
        if metric > self.reordering as u64 * mss {
            self.reordering = (metric.div_ceil(mss) as u32).min(MAX_REORDERING);
        }
        self.reord_seen = true;
    }

    /// `tcp_clean_rtx_queue` and `tcp_ack_update_rtt`: returns the flags and the RTT sample.
    pub(super) fn clean_rtx_queue(
        &mut self,
        a: &AckInfo,
        prior_fack: u64,
        now: u64,
        b: &mut SampleBuilder,
        sack_rtt: (Option<u64>, Option<u64>),
    ) -> (u32, Option<u64>) {
        let mut flag = 0;
        let mut first_ackt = None;
        let mut last_ackt = None;
        let mut reord = u64::MAX;
        let mut pkts_acked = 0u32;
        let min_rtt = self.rtt.min_rtt();
        while let Some(s) = self.sb.pop_acked(self.snd_una) {
            let retrans = s.has(EVER_RETRANS);
            let sacked = s.has(SACKED);
            if retrans {
                flag |= F_RETRANS_DATA_ACKED;
            } else if !sacked {
                first_ackt.get_or_insert(s.xmit);
                last_ackt = Some(s.xmit);
                reord = reord.min(s.seq);
                if s.end() <= self.high_seq {
                    flag |= F_ORIG_SACK_ACKED;
                }
            }
            if !sacked && self.sack {
                self.rate.delivered += 1;
                // `tcp_skb_spurious_retrans`: the echo predates this retransmission.
                if !(retrans && self.ecr_before(s.xmit)) {
                    self.rack.advance(now, s.xmit, s.end(), retrans, min_rtt);
                }
            }
            pkts_acked += 1;
            let mut tx = s.tx;
            self.rate
                .on_delivered(b, &mut tx, s.xmit, s.end(), retrans, false);
        }
        if pkts_acked > 0 {
            flag |= F_ACKED | F_SET_XMIT_TIMER;
            if !self.sack {
                self.remove_reno_sacks(pkts_acked);
                // Without SACK an acknowledged retransmission hides what the originals did.
                if flag & F_RETRANS_DATA_ACKED != 0 {
                    flag &= !F_ORIG_SACK_ACKED;
                }
            } else if reord < prior_fack {
                self.check_sack_reordering(reord);
            }
        }
        // `tcp_ack_update_rtt`.
        let mut seq_rtt = None;
        let mut ca_rtt = None;
        if let Some(f) = first_ackt {
            if flag & F_RETRANS_DATA_ACKED == 0 {
                seq_rtt = Some(now - f);
                ca_rtt = last_ackt.map(|l| now - l);
            }
        }
        if sack_rtt.0.is_some() {
            ca_rtt = sack_rtt.1;
            if seq_rtt.is_none() {
                seq_rtt = sack_rtt.0;
            }
        }
        if seq_rtt.is_none() && a.tsecr != 0 && flag & F_ACKED != 0 {
            // Timestamp clock in milliseconds (TCP_TS_HZ = 1000).
            let ticks = (now / 1_000_000).saturating_sub(a.tsecr / 1_000_000).max(1);
            seq_rtt = Some(ticks * 1_000_000);
            ca_rtt = seq_rtt;
        }
        b.rs.rtt = ca_rtt;
        if let Some(m) = seq_rtt {
            self.rtt.update_min(now, ca_rtt.unwrap_or(m));
            self.rtt.sample(m, self.snd_una, self.snd_nxt);
            self.backoff = 0;
        }
        let sample = AckSample {
            pkts_acked,
            rtt: ca_rtt,
            in_flight: b.rs.prior_in_flight,
        };
        let c = self.conn(now);
        self.cc.pkts_acked(&sample, &self.w, &c);
        (flag, seq_rtt)
    }
}
