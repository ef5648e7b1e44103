//! Proportional Rate Reduction (RFC 6937) as Linux's `tcp_cwnd_reduction`
//! (net/ipv4/tcp_input.c).
//!
//! Principles:
//! * During a window reduction (Recovery or CWR) the sender sends in proportion to what is
//!   delivered, so that by the end of the round trip it has sent `ssthresh` segments per
//!   `prior_cwnd` delivered: `sndcnt = ⌈ssthresh · prr_delivered / prior_cwnd⌉ − prr_out`
//!   while the pipe is above `ssthresh`.
//! * Once the pipe has fallen below `ssthresh` (heavy losses), the slow-start reduction bound
//!   (RFC 6937's PRR-SSRB) lets it grow back: `sndcnt = min(ssthresh − pipe,
//!   max(prr_delivered − prr_out, delivered) [+1 if the ACK advanced snd_una with no new loss])`.
//! * At least one segment may go when nothing was sent yet in this reduction (the fast
//!   retransmit). The result is `cwnd = pipe + sndcnt`.

/// PRR state (`prior_cwnd`, `prr_delivered`, `prr_out`).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct Prr {
    pub prior_cwnd: u32,
    pub delivered: u32,
    pub out: u32,
}

impl Prr {
    /// Start a reduction from `cwnd` (`tcp_init_cwnd_reduction`).
    pub fn init(&mut self, cwnd: u32) {
        self.prior_cwnd = cwnd;
        self.delivered = 0;
        self.out = 0;
    }

    /// Segments sent during the reduction.
    pub fn on_sent(&mut self, n: u32) {
        self.out += n;
    }

    /// The new `cwnd` after an ACK that delivered `newly_acked_sacked` segments and marked
    /// `newly_lost` lost, with `pipe` segments in flight; `None` if the ACK delivered nothing.
    pub fn cwnd(
        &mut self,
        ssthresh: u32,
        pipe: u32,
        newly_acked_sacked: u32,
        newly_lost: u32,
        una_advanced: bool,
    ) -> Option<u32> {
        if newly_acked_sacked == 0 || self.prior_cwnd == 0 {
            return None;
        }
        self.delivered += newly_acked_sacked;
        let delta = ssthresh as i64 - pipe as i64;
        let mut sndcnt: i64 = if delta < 0 {
            let dividend = ssthresh as u64 * self.delivered as u64 + self.prior_cwnd as u64 - 1;
            (dividend / self.prior_cwnd as u64) as i64 - self.out as i64
        } else {
            let mut s = (self.delivered as i64 - self.out as i64).max(newly_acked_sacked as i64);
            if una_advanced && newly_lost == 0 {
                s += 1;
            }
            s.min(delta)
        };
        sndcnt = sndcnt.max(if self.out > 0 { 0 } else { 1 });
        Some((pipe as i64 + sndcnt).max(0) as u32)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 6937 §3 example: cwnd 20, ssthresh 10 (Reno), one loss; every ACK delivers one segment
    /// and PRR sends one segment every other ACK, so the pipe falls from 19 to 10 with no burst.
    #[test]
    fn rfc6937_reno_example_sends_every_other_ack() {
        let mut p = Prr::default();
        p.init(20);
        let ssthresh = 10;
        // After the loss is detected: 19 in flight (one lost), retransmission first.
        let mut pipe: u32 = 19;
        let mut sent = Vec::new();
        for ack in 0..19 {
            // Each ACK delivers one segment.
            pipe -= 1;
            let cwnd = p.cwnd(ssthresh, pipe, 1, 0, false).unwrap_or(0);
            let n = cwnd.saturating_sub(pipe);
            p.on_sent(n);
            pipe += n;
            sent.push(n);
            let _ = ack;
        }
        // Exactly ssthresh·delivered/prior_cwnd sent in total: ⌈10·19/20⌉ = 10.
        assert_eq!(p.out, 10);
        // Never more than one per ACK (no bursts), alternating after the first.
        assert!(sent.iter().all(|&n| n <= 1), "{sent:?}");
        assert_eq!(sent[0], 1, "the fast retransmit goes at once");
        assert_eq!(&sent[1..5], &[0, 1, 0, 1]);
        assert_eq!(pipe, 10);
    }

    /// RFC 6937 §3, CUBIC-like β = 0.7: cwnd 20 → ssthresh 14, ~7 sent per 10 delivered.
    #[test]
    fn proportional_with_beta_0_7() {
        let mut p = Prr::default();
        p.init(20);
        let mut pipe: u32 = 19;
        for _ in 0..10 {
            pipe -= 1;
            let cwnd = p.cwnd(14, pipe, 1, 0, false).unwrap_or(0);
            let n = cwnd.saturating_sub(pipe);
            p.on_sent(n);
            pipe += n;
        }
        assert_eq!(p.out, 7);
    }

    /// Heavy loss: the pipe is far below ssthresh, PRR-SSRB grows it by at most
    /// delivered + 1 per ACK (slow start), never above ssthresh.
    #[test]
    fn slow_start_reduction_bound_after_heavy_loss() {
        let mut p = Prr::default();
        p.init(20);
        p.on_sent(1);
        // pipe 3 after most of the window was lost; an ACK delivering 2 segments.
        let cwnd = p.cwnd(10, 3, 2, 0, true).unwrap_or(0);
        // max(prr_delivered − prr_out, 2) + 1 = 2 + 1 = 3 → cwnd 6.
        assert_eq!(cwnd, 6);
        let cwnd = p.cwnd(10, 9, 4, 0, true).unwrap_or(0);
        assert_eq!(cwnd, 10, "capped at ssthresh");
        assert_eq!(p.cwnd(10, 9, 0, 0, true), None);
    }
}
