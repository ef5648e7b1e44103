//! Delivery-rate sampling, as Linux's net/ipv4/tcp_rate.c (draft-cheng-iccrg-delivery-rate-
//! estimation).
//!
//! Principles:
//! * Every transmission stamps the segment with the connection's `delivered` count and the times
//!   of the last delivery (`delivered_mstamp`) and of the first send of the current flight
//!   (`first_tx_mstamp`), and whether the sender was application-limited.
//! * On an ACK, the most recently sent of the segments it newly delivers defines the sample:
//!   `delivered − tx.delivered` segments over `max(send interval, ACK interval)` — the longer of
//!   the two pipeline phases, so ACK compression cannot inflate the rate.
//! * An interval shorter than the minimum RTT gives no sample; the application-limited flag lets a
//!   controller (BBR) ignore low rates caused by a lack of data.
//! * A SACKed segment is marked so that its later cumulative ACK is not counted again.

use super::cc::RateSample;

/// What a segment remembers of the connection when it was (re)sent (`tcp_skb_cb.tx`).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct TxStamp {
    /// `tp->delivered` at send time.
    pub delivered: u64,
    /// `tp->delivered_mstamp` at send time; `None` once counted in a sample (SACKed).
    pub delivered_mstamp: Option<u64>,
    pub first_tx_mstamp: u64,
    pub app_limited: bool,
}

/// Connection-wide rate state (`tp->delivered`, `delivered_mstamp`, `first_tx_mstamp`,
/// `app_limited`, `rate_*`).
#[derive(Clone, Debug, Default)]
pub struct RateState {
    /// Segments delivered (cumulatively ACKed or SACKed) since the start.
    pub delivered: u64,
    delivered_mstamp: u64,
    first_tx_mstamp: u64,
    /// `delivered` mark until which the flow is application-limited (0 = not limited).
    pub app_limited: u64,
}

/// A sample being built for one ACK.
#[derive(Clone, Debug, Default)]
pub struct SampleBuilder {
    pub rs: RateSample,
    prior_mstamp: Option<u64>,
    last_end_seq: u64,
    last_tx: u64,
    snd_interval: u64,
}

impl RateState {
    /// A segment is (re)transmitted at `now` (`tcp_rate_skb_sent`). `packets_out` is the count
    /// before this one.
    pub fn on_sent(&mut self, now: u64, packets_out: u32) -> TxStamp {
        if packets_out == 0 {
            self.first_tx_mstamp = now;
            self.delivered_mstamp = now;
        }
        TxStamp {
            delivered: self.delivered,
            delivered_mstamp: Some(self.delivered_mstamp),
            first_tx_mstamp: self.first_tx_mstamp,
            app_limited: self.app_limited != 0,
        }
    }

    /// A segment sent at `xmit` with `tx`, ending at `end_seq`, is newly delivered
    /// (`tcp_rate_skb_delivered`). `sacked`: delivered by SACK (mark it counted).
    pub fn on_delivered(
        &mut self,
        b: &mut SampleBuilder,
        tx: &mut TxStamp,
        xmit: u64,
        end_seq: u64,
        retrans: bool,
        sacked: bool,
    ) {
        let Some(dm) = tx.delivered_mstamp else {
            return;
        };
        let newer = xmit > self.first_tx_mstamp
            || (xmit == self.first_tx_mstamp && end_seq > b.last_end_seq);
        if b.prior_mstamp.is_none() || newer {
            b.rs.prior_delivered = tx.delivered;
            b.prior_mstamp = Some(dm);
            b.rs.is_app_limited = tx.app_limited;
            b.rs.is_retrans = retrans;
            b.last_end_seq = end_seq;
            b.last_tx = xmit;
            self.first_tx_mstamp = xmit;
            b.snd_interval = xmit.saturating_sub(tx.first_tx_mstamp);
        }
        if sacked {
            tx.delivered_mstamp = None;
        }
    }

    /// Finish the sample (`tcp_rate_gen`): `delivered` and `lost` are this ACK's counts.
    pub fn generate(
        &mut self,
        b: &mut SampleBuilder,
        now: u64,
        delivered: u32,
        lost: u32,
        min_rtt: u64,
    ) {
        if self.app_limited != 0 && self.delivered > self.app_limited {
            self.app_limited = 0;
        }
        if delivered > 0 {
            self.delivered_mstamp = now;
        }
        b.rs.acked_sacked = delivered;
        b.rs.losses = lost;
        let Some(prior) = b.prior_mstamp else {
            b.rs.delivered = -1;
            b.rs.interval = None;
            return;
        };
        b.rs.delivered = (self.delivered - b.rs.prior_delivered) as i64;
        let ack_interval = now.saturating_sub(prior);
        let interval = b.snd_interval.max(ack_interval);
        b.rs.interval = if interval < min_rtt {
            None
        } else {
            Some(interval)
        };
    }

    /// The application has less than a segment to send, the window is not full and no lost
    /// segment waits (`tcp_rate_check_app_limited`): the samples until what is in flight now is
    /// delivered are application-limited.
    pub fn mark_app_limited(&mut self, in_flight: u32) {
        self.app_limited = (self.delivered + in_flight as u64).max(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rate_over_the_longer_of_send_and_ack_phases() {
        let mut r = RateState::default();
        // Ten segments sent 1 µs apart from t = 0, ACKed one by one from t = 100 µs, 10 µs apart.
        let mut tx: Vec<(u64, TxStamp)> = (0..10)
            .map(|i| (i * 1_000, r.on_sent(i * 1_000, i as u32)))
            .collect();
        let mut last = RateSample::default();
        for (k, (xmit, t)) in tx.iter_mut().enumerate() {
            let mut b = SampleBuilder::default();
            r.delivered += 1;
            r.on_delivered(&mut b, t, *xmit, (k as u64 + 1) * 1000, false, false);
            r.generate(&mut b, 100_000 + k as u64 * 10_000, 1, 0, 50_000);
            last = b.rs;
        }
        // Last sample: 10 delivered since prior 0, ACK phase 100 µs + 90 µs = 190 µs > send 9 µs.
        assert_eq!(last.delivered, 10);
        assert_eq!(last.prior_delivered, 0);
        assert_eq!(last.interval, Some(190_000));
    }

    #[test]
    fn interval_below_min_rtt_is_no_sample_and_sacked_counts_once() {
        let mut r = RateState::default();
        let mut t = r.on_sent(0, 0);
        let mut b = SampleBuilder::default();
        r.delivered += 1;
        r.on_delivered(&mut b, &mut t, 0, 1000, false, true);
        r.generate(&mut b, 1_000, 1, 0, 10_000);
        assert_eq!(b.rs.interval, None);
        assert_eq!(t.delivered_mstamp, None);
        let mut b = SampleBuilder::default();
        r.on_delivered(&mut b, &mut t, 0, 1000, false, false);
        r.generate(&mut b, 20_000, 0, 0, 10_000);
        assert_eq!(b.rs.delivered, -1);
    }

    #[test]
    fn app_limited_mark_clears_once_delivered() {
        let mut r = RateState::default();
        r.mark_app_limited(5);
        assert_eq!(r.app_limited, 5);
        assert!(r.on_sent(0, 0).app_limited);
        r.delivered = 6;
        let mut b = SampleBuilder::default();
        r.generate(&mut b, 1, 1, 0, 0);
        assert_eq!(r.app_limited, 0);
    }
}
