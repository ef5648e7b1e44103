//! Sender pacing as Linux's internal TCP pacing with earliest departure times (net/ipv4/
//! tcp_output.c: `tcp_update_skb_after_send`, `tcp_pacing_check`, the pacing hrtimer).
//!
//! Principles:
//! * Only a controller that asks for it paces (BBR returns a pacing rate from `cong_control`);
//!   otherwise segments leave as soon as the windows allow.
//! * Each segment gets a departure time `wstamp`; after it leaves, `wstamp` advances by
//!   `len / rate`, minus up to half of that as credit for time the sender was late (OS jitter in
//!   Linux; here the credit is the gap between the previous departure time and now), and not for
//!   the first ten segments of the connection (`data_segs_out < 10`).
//! * A segment may leave when `wstamp ≤ now`; otherwise the sender stops and the world wakes it at
//!   `wstamp` (the pacing timer).

/// Pacing state (`sk_pacing_rate`, `tcp_wstamp_ns`, `data_segs_out`).
#[derive(Copy, Clone, Debug, Default)]
pub struct Pacing {
    /// Bytes per second; `None` = not paced.
    pub rate: Option<u64>,
    wstamp: u64,
    segs_out: u64,
}

impl Pacing {
    /// `Some(wake)` when the next segment must wait until `wake` (`tcp_pacing_check`).
    pub fn blocked(&self, now: u64) -> Option<u64> {
        match self.rate {
            Some(_) if self.wstamp > now => Some(self.wstamp),
            _ => None,
        }
    }

    /// A segment of `len` payload bytes leaves at `now`.
    pub fn on_sent(&mut self, now: u64, len: u32) {
        let prior = self.wstamp;
        self.wstamp = self.wstamp.max(now);
        self.segs_out += 1;
        let Some(rate) = self.rate else {
            return;
        };
        if rate == 0 || self.segs_out <= 10 {
            return;
        }
        let mut len_ns = (len as u128 * 1_000_000_000 / rate as u128) as u64;
        let credit = self.wstamp - prior;
        len_ns -= (len_ns / 2).min(credit);
        self.wstamp += len_ns;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paced_segments_are_spaced_by_len_over_rate() {
        let mut p = Pacing {
            rate: Some(1_000_000),
            ..Pacing::default()
        };
        for _ in 0..10 {
            assert_eq!(p.blocked(0), None);
            p.on_sent(0, 1000);
        }
        // The 11th segment (1000 B at 1 MB/s) pushes the next departure 1 ms out.
        p.on_sent(0, 1000);
        assert_eq!(p.blocked(0), Some(1_000_000));
        assert_eq!(p.blocked(1_000_000), None);
        // Sent 0.4 ms late: 0.4 ms of credit, the next gap is 0.6 ms.
        p.on_sent(1_400_000, 1000);
        assert_eq!(p.blocked(1_400_000), Some(2_000_000));
    }

    #[test]
    fn unpaced_never_blocks() {
        let mut p = Pacing::default();
        for i in 0..100 {
            p.on_sent(i, 1500);
        }
        assert_eq!(p.blocked(0), None);
    }
}
