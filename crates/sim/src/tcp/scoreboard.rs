//! The retransmission queue and its SACK scoreboard, as Linux keeps them (net/ipv4/tcp_input.c:
//! `tcp_sacktag_one`, `tcp_clean_rtx_queue`, `tcp_mark_skb_lost`; the `TCPCB_*` flags of
//! include/net/tcp.h), which is RFC 6675's scoreboard with Linux's counters.
//!
//! Principles:
//! * One entry per segment sent and not yet cumulatively acknowledged, in sequence order, from
//!   `snd_una`. Segments are whole MSS-sized units (the last one of a finite transfer may be
//!   shorter), so a segment is found by index arithmetic.
//! * Each entry carries Linux's flags: SACKED (delivered by a SACK block), LOST (inferred lost,
//!   to be retransmitted), RETRANS (a retransmission is in flight, `TCPCB_SACKED_RETRANS`) and
//!   EVER_RETRANS. The counters `packets_out`, `sacked_out`, `lost_out`, `retrans_out` follow the
//!   flags, and the pipe (RFC 6675 §4) is Linux's `tcp_packets_in_flight`:
//!   `packets_out − (sacked_out + lost_out) + retrans_out`.
//! * A second queue orders the segments by last transmission time (Linux's
//!   `tsorted_sent_queue`) for RACK. It is kept lazily: an entry is dropped when its segment was
//!   acknowledged, SACKed, marked lost or sent again, which is checked when the entry is visited.
//! * SACK processing skips the part of a block already covered by the previous ACK's blocks (the
//!   kernel's `recv_sack_cache`), so a long block that grows at its right edge costs only its new
//!   segments.

use std::collections::VecDeque;

use super::rate::TxStamp;

pub const SACKED: u8 = 1;
pub const RETRANS: u8 = 2;
pub const LOST: u8 = 4;
pub const EVER_RETRANS: u8 = 8;

/// One segment in the retransmission queue.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Seg {
    pub seq: u64,
    pub len: u32,
    pub flags: u8,
    /// Time of the last transmission.
    pub xmit: u64,
    pub tx: TxStamp,
}

impl Seg {
    #[inline]
    pub fn end(&self) -> u64 {
        self.seq + self.len as u64
    }
    #[inline]
    pub fn has(&self, f: u8) -> bool {
        self.flags & f != 0
    }
}

/// The queue and its counters.
#[derive(Clone, Debug)]
pub struct Scoreboard {
    q: VecDeque<Seg>,
    mss: u64,
    pub packets_out: u32,
    pub sacked_out: u32,
    pub lost_out: u32,
    pub retrans_out: u32,
    /// Highest SACKed sequence (`tcp_highest_sack_seq`); 0 when nothing is SACKed.
    pub highest_sack: u64,
    /// `(seq, xmit)` in transmission order, lazily pruned.
    tsorted: VecDeque<(u64, u64)>,
    /// Lowest sequence that may be LOST and not yet retransmitted (`retransmit_skb_hint`).
    rtx_hint: u64,
    sack_cache: [(u64, u64); 4],
}

impl Scoreboard {
    pub fn new(mss: u32) -> Self {
        Scoreboard {
            q: VecDeque::with_capacity(64),
            mss: mss as u64,
            packets_out: 0,
            sacked_out: 0,
            lost_out: 0,
            retrans_out: 0,
            highest_sack: 0,
            tsorted: VecDeque::with_capacity(64),
            rtx_hint: 0,
            sack_cache: [(0, 0); 4],
        }
    }

    /// Segments in flight (`tcp_packets_in_flight`, RFC 6675's pipe).
    #[inline]
    pub fn in_flight(&self) -> u32 {
        (self.packets_out + self.retrans_out).saturating_sub(self.sacked_out + self.lost_out)
    }

    pub fn is_empty(&self) -> bool {
        self.q.is_empty()
    }

    pub fn head(&self) -> Option<&Seg> {
        self.q.front()
    }

    pub fn last(&self) -> Option<&Seg> {
        self.q.back()
    }

    pub fn get(&self, i: usize) -> Option<&Seg> {
        self.q.get(i)
    }

    pub fn len(&self) -> usize {
        self.q.len()
    }

    /// Index of the segment starting at `seq`.
    pub fn index_of(&self, seq: u64) -> Option<usize> {
        let head = self.q.front()?.seq;
        if seq < head {
            return None;
        }
        let i = ((seq - head) / self.mss) as usize;
        match self.q.get(i) {
            Some(s) if s.seq == seq => Some(i),
            _ => {
                let j = self.q.partition_point(|s| s.seq < seq);
                (self.q.get(j).map(|s| s.seq) == Some(seq)).then_some(j)
            }
        }
    }

    /// A new segment leaves.
    pub fn push(&mut self, seq: u64, len: u32, now: u64, tx: TxStamp) {
        self.q.push_back(Seg {
            seq,
            len,
            flags: 0,
            xmit: now,
            tx,
        });
        self.packets_out += 1;
        self.tsorted.push_back((seq, now));
    }

    /// Remove the head if `ack` covers it entirely; the counters follow.
    pub fn pop_acked(&mut self, ack: u64) -> Option<Seg> {
        if self.q.front()?.end() > ack {
            return None;
        }
        let s = self.q.pop_front()?;
        self.packets_out -= 1;
        if s.has(SACKED) {
            self.sacked_out -= 1;
        }
        if s.has(LOST) {
            self.lost_out -= 1;
        }
        if s.has(RETRANS) {
            self.retrans_out -= 1;
        }
        // Drop transmission-order entries of acknowledged segments at the front.
        while let Some(&(seq, _)) = self.tsorted.front() {
            if seq < ack {
                self.tsorted.pop_front();
            } else {
                break;
            }
        }
        Some(s)
    }

    /// Mark the segments inside SACK block `[start, end)` as SACKed; `f` sees each newly SACKed
    /// segment (before its flags change). Returns how many were newly SACKed.
    pub fn sack_block(&mut self, start: u64, end: u64, mut f: impl FnMut(&mut Seg)) -> u32 {
        let Some(head) = self.q.front().map(|s| s.seq) else {
            return 0;
        };
        let mut from = start.max(head);
        for &(cs, ce) in &self.sack_cache {
            if cs <= from && ce > from {
                from = ce;
            }
        }
        if from >= end {
            return 0;
        }
        // First segment that starts at or after `from`.
        let mut i = ((from - head) / self.mss) as usize;
        if self.q.get(i).map(|s| s.seq) != Some(from) {
            i = self.q.partition_point(|s| s.seq < from);
        }
        let mut n = 0;
        while let Some(s) = self.q.get_mut(i) {
            if s.end() > end {
                break;
            }
            if !s.has(SACKED) {
                f(s);
                if s.has(LOST) {
                    s.flags &= !LOST;
                    self.lost_out -= 1;
                }
                if s.has(RETRANS) {
                    s.flags &= !RETRANS;
                    self.retrans_out -= 1;
                }
                s.flags |= SACKED;
                self.sacked_out += 1;
                self.highest_sack = self.highest_sack.max(s.end());
                n += 1;
            }
            i += 1;
        }
        n
    }

    /// Remember this ACK's SACK blocks for the next one.
    pub fn set_sack_cache(&mut self, blocks: &[(u64, u64)]) {
        self.sack_cache = [(0, 0); 4];
        for (c, b) in self.sack_cache.iter_mut().zip(blocks) {
            *c = *b;
        }
    }

    /// `tcp_mark_skb_lost`: a SACKed segment is never lost; a lost retransmission is lost again
    /// (its RETRANS flag goes, so it will be sent once more). Returns true if newly marked lost
    /// (`tp->lost` counts it).
    pub fn mark_lost(&mut self, i: usize) -> bool {
        let Some(s) = self.q.get_mut(i) else {
            return false;
        };
        if s.has(SACKED) {
            return false;
        }
        if s.seq < self.rtx_hint {
            self.rtx_hint = s.seq;
        }
        if s.has(LOST) {
            if s.has(RETRANS) {
                s.flags &= !RETRANS;
                self.retrans_out -= 1;
                return true;
            }
            false
        } else {
            s.flags |= LOST;
            self.lost_out += 1;
            true
        }
    }

    /// Take back every loss mark (an undo, `tcp_undo_cwnd_reduction(sk, true)`): retransmissions
    /// in flight stay counted.
    pub fn unmark_lost(&mut self) {
        for s in self.q.iter_mut() {
            s.flags &= !LOST;
        }
        self.lost_out = 0;
        self.rtx_hint = u64::MAX;
    }

    /// Forget all SACK information (reneging, or the start of a non-SACK connection).
    pub fn clear_sacks(&mut self) {
        for s in self.q.iter_mut() {
            s.flags &= !SACKED;
        }
        self.sacked_out = 0;
        self.highest_sack = 0;
        self.sack_cache = [(0, 0); 4];
    }

    /// The next segment to retransmit at or after the hint: LOST and neither SACKed nor already
    /// retransmitted (`tcp_xmit_retransmit_queue`). Returns its index.
    pub fn next_lost(&mut self) -> Option<usize> {
        if self.retrans_out >= self.lost_out {
            return None;
        }
        let start = match self.index_of(self.rtx_hint) {
            Some(i) => i,
            None if self.q.front().is_some_and(|h| self.rtx_hint < h.seq) => 0,
            None => self.q.partition_point(|s| s.seq < self.rtx_hint),
        };
        for i in start..self.q.len() {
            let s = &self.q[i];
            if s.has(LOST) && !s.has(SACKED) && !s.has(RETRANS) {
                self.rtx_hint = s.seq;
                return Some(i);
            }
        }
        self.rtx_hint = u64::MAX;
        None
    }

    /// Segment `i` is sent again at `now`.
    pub fn retransmitted(&mut self, i: usize, now: u64, tx: TxStamp) {
        let Some(s) = self.q.get_mut(i) else {
            return;
        };
        if !s.has(RETRANS) {
            self.retrans_out += 1;
        }
        s.flags |= RETRANS | EVER_RETRANS;
        s.xmit = now;
        s.tx = tx;
        self.tsorted.push_back((s.seq, now));
    }

    /// Visit segments in transmission order (RACK): `f(index, seg)` returns false to stop.
    /// Entries whose segment is gone, SACKed, lost-and-not-resent or sent again later are
    /// skipped (and dropped when at the front).
    pub fn for_each_tsorted(&mut self, mut f: impl FnMut(&mut Self, usize) -> bool) {
        let mut k = 0;
        while k < self.tsorted.len() {
            let (seq, xmit) = self.tsorted[k];
            let live = match self.index_of(seq) {
                Some(i) => {
                    let s = &self.q[i];
                    let ok = (s.has(RETRANS) || !s.has(LOST)) && !s.has(SACKED) && s.xmit == xmit;
                    ok.then_some(i)
                }
                None => None,
            };
            match live {
                None if k == 0 => {
                    self.tsorted.pop_front();
                }
                None => k += 1,
                Some(i) => {
                    if !f(self, i) {
                        return;
                    }
                    k += 1;
                }
            }
        }
    }

    /// Iterate over all segments (for the timeout's marking).
    pub fn indices(&self) -> std::ops::Range<usize> {
        0..self.q.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn board(n: u64) -> Scoreboard {
        let mut b = Scoreboard::new(100);
        for k in 0..n {
            b.push(k * 100, 100, k, TxStamp::default());
        }
        b
    }

    #[test]
    fn sack_then_cumulative_ack_keeps_counters() {
        let mut b = board(10);
        assert_eq!(b.in_flight(), 10);
        // Segment 2 lost: SACK 300..600.
        assert_eq!(b.sack_block(300, 600, |_| {}), 3);
        assert_eq!((b.sacked_out, b.highest_sack), (3, 600));
        // Repeating the block with the cache set costs nothing and changes nothing.
        b.set_sack_cache(&[(300, 600)]);
        assert_eq!(b.sack_block(300, 700, |_| {}), 1);
        assert_eq!(b.in_flight(), 6);
        let i = b.index_of(200).unwrap();
        assert!(b.mark_lost(i));
        assert_eq!(b.in_flight(), 5);
        assert_eq!(b.next_lost(), Some(2));
        b.retransmitted(2, 50, TxStamp::default());
        assert_eq!(b.next_lost(), None);
        assert_eq!(b.in_flight(), 6);
        // The retransmission is lost too: marked again, sent again.
        assert!(b.mark_lost(2));
        assert_eq!(b.retrans_out, 0);
        assert_eq!(b.next_lost(), Some(2));
        // Cumulative ACK to 700: counters return to the six unSACKed-beyond segments minus acked.
        let mut acked = 0;
        while b.pop_acked(700).is_some() {
            acked += 1;
        }
        assert_eq!(acked, 7);
        assert_eq!(
            (b.packets_out, b.sacked_out, b.lost_out, b.retrans_out),
            (3, 0, 0, 0)
        );
    }

    #[test]
    fn tsorted_visits_in_send_order_skipping_stale() {
        let mut b = board(5);
        b.sack_block(100, 200, |_| {});
        let i = b.index_of(0).unwrap();
        b.mark_lost(i);
        b.retransmitted(i, 10, TxStamp::default());
        let mut order = Vec::new();
        b.for_each_tsorted(|b, i| {
            order.push(b.get(i).map(|s| s.seq).unwrap_or(0));
            true
        });
        assert_eq!(order, vec![200, 300, 400, 0]);
    }
}
