//! RACK-TLP loss detection (RFC 8985) as Linux's net/ipv4/tcp_recovery.c and the loss probe of
//! net/ipv4/tcp_output.c (`tcp_schedule_loss_probe`, `tcp_send_loss_probe`).
//!
//! Principles:
//! * RACK remembers the send time (and end sequence) of the most recently sent segment that was
//!   delivered, and the RTT of the latest delivery (`tcp_rack_advance`). A segment still in flight
//!   that was sent before that one is lost once `rack.rtt + reo_wnd` has elapsed since its own
//!   (last) transmission (`tcp_rack_detect_loss`); if some are not yet due, a reordering timer
//!   fires when the first is.
//! * The reordering window is `min(min_rtt/4 · steps, srtt)`, and zero — loss inferred as soon as
//!   a later segment is delivered — when no reordering has been seen and either the connection is
//!   in recovery or at least `reordering` (3, the duplicate threshold) segments are SACKed
//!   (`tcp_rack_reo_wnd`): RFC 6675's IsLost with DupThresh, in RACK's terms.
//! * The multiplier `steps` adapts to spurious retransmissions (`tcp_rack_update_reo_wnd`): an
//!   ACK with a DSACK raises it by one (at most 255), at most once per round trip (a DSACK for
//!   data delivered before the last raise is ignored); it stays raised for 16 recoveries, then
//!   falls back to 1 if no DSACK came meanwhile.
//! * A delivered retransmission whose RTT is below the minimum RTT was probably the original's
//!   delivery and does not advance RACK.
//! * Tail loss probe: when the sender is in Open or CWR with data in flight, a probe timer of
//!   `2·srtt` (+ `rto_min` if a single segment is out, + 2 ms otherwise; 1 s without an RTT
//!   sample), never later than the RTO, sends new data if the window allows or retransmits the
//!   last segment, so that a tail loss gets SACK feedback instead of waiting for the RTO.

/// Linux's `TCP_TIMEOUT_MIN` (2 jiffies at HZ = 1000) added to the reordering timer.
pub const TIMEOUT_MIN_NS: u64 = 2_000_000;
/// Linux's `TCP_TIMEOUT_MIN_US` added to the probe timeout with several segments in flight.
pub const TLP_EXTRA_NS: u64 = 2_000_000;

/// RACK state (`tp->rack`).
#[derive(Copy, Clone, Debug, Default)]
pub struct Rack {
    /// Send time of the most recently sent delivered segment (`rack.mstamp`).
    pub mstamp: u64,
    pub end_seq: u64,
    /// RTT of the latest delivery (`rack.rtt_us`).
    pub rtt: u64,
    /// A delivery advanced the state since the last detection (`rack.advanced`).
    pub advanced: bool,
    /// Reordering-window multiplier (`rack.reo_wnd_steps`, raised by DSACKs).
    pub reo_wnd_steps: u32,
    /// A DSACK arrived since the last update (`rack.dsack_seen`).
    pub dsack_seen: bool,
    /// `delivered` when the multiplier was last raised (`rack.last_delivered`).
    pub last_delivered: u64,
    /// Recoveries left before the multiplier falls back to 1 (`rack.reo_wnd_persist`).
    pub reo_wnd_persist: u32,
}

/// `TCP_RACK_RECOVERY_THRESH`: recoveries a raised reordering window lasts.
pub const RECOVERY_THRESH: u32 = 16;

/// `tcp_skb_sent_after`: was `(t1, seq1)` sent after `(t2, seq2)`?
#[inline]
pub fn sent_after(t1: u64, t2: u64, seq1: u64, seq2: u64) -> bool {
    t1 > t2 || (t1 == t2 && seq1 > seq2)
}

impl Rack {
    pub fn new() -> Self {
        Rack {
            reo_wnd_steps: 1,
            ..Rack::default()
        }
    }

    /// A segment sent at `xmit` ending at `end_seq` was delivered at `now` (`tcp_rack_advance`).
    pub fn advance(&mut self, now: u64, xmit: u64, end_seq: u64, retrans: bool, min_rtt: u64) {
        let rtt = now.saturating_sub(xmit);
        if retrans && rtt < min_rtt {
            return;
        }
        self.advanced = true;
        self.rtt = rtt;
        if sent_after(xmit, self.mstamp, end_seq, self.end_seq) {
            self.mstamp = xmit;
            self.end_seq = end_seq;
        }
    }

    /// After an ACK's rate sample (`tcp_rack_update_reo_wnd`): `prior_delivered` is the
    /// sample's (0: no sample), `delivered` the count now.
    pub fn update_reo_wnd(&mut self, prior_delivered: u64, delivered: u64) {
        if prior_delivered == 0 {
            return;
        }
        if prior_delivered < self.last_delivered {
            // Less than a round trip since the last raise.
            self.dsack_seen = false;
        }
        if self.dsack_seen {
            self.reo_wnd_steps = (self.reo_wnd_steps + 1).min(0xFF);
            self.dsack_seen = false;
            self.last_delivered = delivered;
            self.reo_wnd_persist = RECOVERY_THRESH;
        } else if self.reo_wnd_persist == 0 {
            self.reo_wnd_steps = 1;
        }
    }

    /// A recovery ended: one fewer before a raised window falls back.
    pub fn recovery_done(&mut self) {
        self.reo_wnd_persist = self.reo_wnd_persist.saturating_sub(1);
    }

    /// The reordering window (`tcp_rack_reo_wnd`).
    pub fn reo_wnd(
        &self,
        reord_seen: bool,
        in_recovery: bool,
        sacked_out: u32,
        reordering: u32,
        min_rtt: u64,
        srtt: u64,
    ) -> u64 {
        if !reord_seen && (in_recovery || sacked_out >= reordering) {
            return 0;
        }
        ((min_rtt / 4) * self.reo_wnd_steps as u64).min(srtt)
    }

    /// Time left before a segment sent at `xmit` is deemed lost (`tcp_rack_skb_timeout`);
    /// ≤ 0: lost now.
    #[inline]
    pub fn remaining(&self, now: u64, xmit: u64, reo_wnd: u64) -> i64 {
        (self.rtt + reo_wnd) as i64 - (now as i64 - xmit as i64)
    }
}

/// The probe timeout (`tcp_schedule_loss_probe`): `rto_left` is how long until the RTO would
/// fire.
pub fn probe_timeout(srtt: u64, packets_out: u32, rto_min: u64, rto_left: u64) -> u64 {
    let pto = if srtt > 0 {
        2 * srtt
            + if packets_out == 1 {
                rto_min
            } else {
                TLP_EXTRA_NS
            }
    } else {
        super::rtt::INITIAL_RTO_NS
    };
    if rto_left > 0 {
        pto.min(rto_left)
    } else {
        pto
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    #[test]
    fn advance_keeps_the_latest_sent_delivery() {
        let mut r = Rack::new();
        r.advance(100 * MS, 10 * MS, 2000, false, 50 * MS);
        r.advance(101 * MS, 5 * MS, 1000, false, 50 * MS);
        assert_eq!((r.mstamp, r.end_seq), (10 * MS, 2000));
        assert_eq!(r.rtt, 96 * MS, "rtt is the latest delivery's");
        // A retransmission ACKed faster than min_rtt: the original was delivered, ignore.
        r.advance(102 * MS, 90 * MS, 3000, true, 50 * MS);
        assert_eq!(r.mstamp, 10 * MS);
    }

    #[test]
    fn reordering_window_rules() {
        let r = Rack::new();
        // Dupthresh reached, no reordering seen: zero window.
        assert_eq!(r.reo_wnd(false, false, 3, 3, 40 * MS, 50 * MS), 0);
        assert_eq!(r.reo_wnd(false, true, 1, 3, 40 * MS, 50 * MS), 0);
        // Fewer SACKs than dupthresh: min_rtt/4.
        assert_eq!(r.reo_wnd(false, false, 2, 3, 40 * MS, 50 * MS), 10 * MS);
        // Reordering seen: min_rtt/4 even in recovery, capped by srtt.
        assert_eq!(r.reo_wnd(true, true, 10, 3, 40 * MS, 50 * MS), 10 * MS);
        let r4 = Rack {
            reo_wnd_steps: 8,
            ..Rack::new()
        };
        assert_eq!(r4.reo_wnd(true, false, 0, 3, 40 * MS, 50 * MS), 50 * MS);
    }

    #[test]
    fn dsacks_widen_the_window_once_per_round_trip_for_16_recoveries() {
        let mut r = Rack::new();
        r.dsack_seen = true;
        r.update_reo_wnd(100, 110);
        assert_eq!((r.reo_wnd_steps, r.last_delivered), (2, 110));
        // A DSACK about data delivered before the raise: ignored.
        r.dsack_seen = true;
        r.update_reo_wnd(105, 115);
        assert_eq!(r.reo_wnd_steps, 2);
        r.dsack_seen = true;
        r.update_reo_wnd(111, 130);
        assert_eq!(r.reo_wnd_steps, 3);
        assert_eq!(
            r.reo_wnd(true, true, 10, 3, 40 * MS, 50 * MS),
            30 * MS,
            "min_rtt/4 · 3"
        );
        // No sample: nothing changes.
        r.update_reo_wnd(0, 140);
        assert_eq!(r.reo_wnd_steps, 3);
        for _ in 0..15 {
            r.recovery_done();
            r.update_reo_wnd(150, 160);
        }
        assert_eq!(r.reo_wnd_steps, 3, "still within 16 recoveries");
        r.recovery_done();
        r.update_reo_wnd(170, 180);
        assert_eq!(r.reo_wnd_steps, 1, "back to one");
    }

    #[test]
    fn probe_timeout_as_linux() {
        assert_eq!(probe_timeout(10 * MS, 5, 200 * MS, 300 * MS), 22 * MS);
        assert_eq!(probe_timeout(10 * MS, 1, 200 * MS, 300 * MS), 220 * MS);
        assert_eq!(probe_timeout(10 * MS, 1, 200 * MS, 100 * MS), 100 * MS);
        assert_eq!(probe_timeout(0, 3, 200 * MS, 0), 1_000 * MS);
    }
}
