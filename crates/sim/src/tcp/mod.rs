//! TCP: a NewReno (RFC 5681, RFC 6582) or CUBIC (RFC 9438) sender and a cumulative-ACK receiver.
//!
//! Both ends are sans-IO state machines: they take `now` and return what to send; the world moves
//! the packets and runs the timers.
//!
//! ## Sender
//! * Sequence numbers are byte offsets from 0. Segments are full-sized (`mss = mtu − 40`) except
//!   the last one of a `bytes = N` transfer: like a Nagle sender with a bulk writer, a segment goes
//!   out only when the usable window `min(cwnd, window) − flight` holds a whole one.
//! * Initial window `init_cwnd` segments (10, as Linux and RFC 6928).
//! * Slow start (`cwnd < ssthresh`): `cwnd += min(acked, 2·mss)` per ACK (RFC 3465, L = 2, so
//!   delayed ACKs do not halve the growth). Congestion avoidance: byte counting, `cwnd += mss`
//!   once a full `cwnd` of bytes has been acknowledged (RFC 3465 §2.1) — one segment per RTT.
//! * Fast retransmit on the third duplicate ACK if the ACK is above `recover`; NewReno fast
//!   recovery (RFC 6582): `ssthresh = max(flight/2, 2·mss)`, `cwnd = ssthresh + 3·mss`, inflate by
//!   one `mss` per further duplicate; a partial ACK retransmits the next hole, deflates `cwnd` by
//!   the amount acknowledged and adds one `mss` back, and re-arms the timer; a full ACK (covering
//!   everything sent before recovery began) sets `cwnd = min(ssthresh, max(flight, mss) + mss)` and ends recovery. No SACK,
//!   no limited transmit.
//! * Retransmission timer (RFC 6298): `srtt`, `rttvar` from every ACK that acknowledges new data,
//!   with the RTT measured by timestamp echo (RFC 7323, so Karn's rule is not needed);
//!   `rto = max(min_rto, srtt + 4·rttvar)`, initially 1 s, at most 60 s; on expiry `ssthresh` as
//!   above, `cwnd = 1 mss`, go-back-N from `snd_una`, the timer doubles (backoff) until an ACK of
//!   new data. `min_rto` defaults to Linux's 200 ms (RFC 6298 says 1 s; set `min_rto = "1s"`).
//! * CUBIC replaces the window increase in congestion avoidance and the reduction factor
//!   (`β = 0.7`, `C = 0.4`, fast convergence, the Reno-friendly region `W_est`), per RFC 9438 §4.
//!
//! ## Receiver
//! Accepts in-order data (the delivered byte count is the goodput), keeps out-of-order ranges and
//! acknowledges cumulatively. With `delayed_ack`, it ACKs every second full segment or 40 ms after
//! the first unacknowledged one (Linux's minimum delayed-ACK time), and at once for out-of-order
//! data or data that fills a hole (RFC 5681 §4.2). The ACK echoes the timestamp of the segment that
//! advanced the left edge (RFC 7323 §4.3), so RTT samples include the delayed-ACK wait.

pub mod cc;

use crate::scenario::{CcKind, TcpSpec};

/// Delayed-ACK timeout.
pub const DELACK_NS: u64 = 40_000_000;
/// Initial retransmission timeout (RFC 6298 §2.1).
pub const INITIAL_RTO_NS: u64 = 1_000_000_000;
/// Upper bound of the retransmission timeout.
pub const MAX_RTO_NS: u64 = 60_000_000_000;
/// Bytes written but not yet sent that a sender may hold: the lab sets `TCP_NOTSENT_LOWAT` to
/// this and writes chunks of this size, so at `stop` about this much unsent data remains
/// (docs/scenario-format.md, "One meaning").
pub const NOTSENT_LOWAT: u64 = 16384;

const CUBIC_C: f64 = 0.4;
const CUBIC_BETA: f64 = 0.7;

/// A segment to transmit.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Segment {
    pub seq: u64,
    pub len: u32,
    pub retransmit: bool,
}

/// Counters of one sender.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct SenderStats {
    pub segments_sent: u64,
    pub retransmits: u64,
    pub fast_retransmits: u64,
    pub timeouts: u64,
    /// Times `cwnd` was reduced (fast retransmit or timeout).
    pub cwnd_reductions: u64,
}

#[derive(Clone, Debug, Default)]
struct Cubic {
    w_max: f64,
    k: f64,
    epoch: Option<u64>,
    cwnd_epoch: f64,
    w_est: f64,
}

#[derive(Clone, Debug)]
pub struct Sender {
    mss: u64,
    window: u64,
    /// One past the last byte the application will ever send (`u64::MAX` for bulk).
    end: u64,
    cc: CcKind,
    cubic: Cubic,
    pub snd_una: u64,
    pub snd_nxt: u64,
    /// Highest sequence number sent plus one.
    pub snd_max: u64,
    pub cwnd: u64,
    pub ssthresh: u64,
    ca_acc: u64,
    dupacks: u32,
    in_recovery: bool,
    /// `snd_max` when the last recovery or timeout began (RFC 6582's `recover` + 1): an ACK at or
    /// above it ends fast recovery, duplicates below it do not start a new one.
    recover: u64,
    srtt: Option<u64>,
    rttvar: u64,
    rto: u64,
    min_rto: u64,
    /// When the retransmission timer expires, if armed.
    pub rto_deadline: Option<u64>,
    pub stats: SenderStats,
}

impl Sender {
    pub fn new(spec: &TcpSpec, mss: u32) -> Self {
        let mss = mss as u64;
        Sender {
            mss,
            window: spec.window,
            end: spec.bytes.unwrap_or(u64::MAX),
            cc: spec.cc,
            cubic: Cubic::default(),
            snd_una: 0,
            snd_nxt: 0,
            snd_max: 0,
            cwnd: spec.init_cwnd as u64 * mss,
            ssthresh: u64::MAX,
            ca_acc: 0,
            dupacks: 0,
            in_recovery: false,
            recover: 0,
            srtt: None,
            rttvar: 0,
            rto: INITIAL_RTO_NS.max(spec.min_rto.0),
            min_rto: spec.min_rto.0,
            rto_deadline: None,
            stats: SenderStats::default(),
        }
    }

    /// Bytes outstanding.
    pub fn flight(&self) -> u64 {
        self.snd_max - self.snd_una
    }

    /// The application stops writing: nothing beyond what was already sent.
    pub fn stop(&mut self) {
        self.end = self.end.min(self.snd_max);
    }

    /// All data sent and acknowledged.
    pub fn finished(&self) -> bool {
        self.snd_una >= self.end
    }

    pub fn srtt_ns(&self) -> Option<u64> {
        self.srtt
    }

    /// Send what the windows allow.
    pub fn poll_send(&mut self, now: u64, out: &mut Vec<Segment>) {
        let wnd = self.cwnd.min(self.window);
        while self.snd_nxt < self.end {
            let len = self.mss.min(self.end - self.snd_nxt);
            if self.snd_nxt - self.snd_una + len > wnd {
                break;
            }
            let retransmit = self.snd_nxt < self.snd_max;
            out.push(Segment {
                seq: self.snd_nxt,
                len: len as u32,
                retransmit,
            });
            self.stats.segments_sent += 1;
            if retransmit {
                self.stats.retransmits += 1;
            }
            self.snd_nxt += len;
            self.snd_max = self.snd_max.max(self.snd_nxt);
        }
        if self.rto_deadline.is_none() && self.snd_max > self.snd_una {
            self.rto_deadline = Some(now + self.rto);
        }
    }

    fn retransmit_head(&mut self, out: &mut Vec<Segment>) {
        let len = self.mss.min(self.snd_max - self.snd_una);
        if len == 0 {
            return;
        }
        out.push(Segment {
            seq: self.snd_una,
            len: len as u32,
            retransmit: true,
        });
        self.stats.segments_sent += 1;
        self.stats.retransmits += 1;
        if self.snd_nxt < self.snd_una + len {
            self.snd_nxt = self.snd_una + len;
        }
    }

    fn update_rtt(&mut self, r: u64) {
        match self.srtt {
            None => {
                self.srtt = Some(r);
                self.rttvar = r / 2;
            }
            Some(s) => {
                let diff = s.abs_diff(r);
                self.rttvar = (3 * self.rttvar + diff) / 4;
                self.srtt = Some((7 * s + r) / 8);
            }
        }
        let s = self.srtt.unwrap_or(r);
        self.rto = (s + 4 * self.rttvar).max(self.min_rto).min(MAX_RTO_NS);
    }

    /// New `ssthresh` at a congestion event; also updates CUBIC's `W_max`.
    fn reduce(&mut self) -> u64 {
        self.stats.cwnd_reductions += 1;
        match self.cc {
            CcKind::NewReno | CcKind::Bbr => (self.flight() / 2).max(2 * self.mss),
            CcKind::Cubic => {
                let cwnd_seg = self.cwnd as f64 / self.mss as f64;
                self.cubic.w_max = if cwnd_seg < self.cubic.w_max {
                    cwnd_seg * (1.0 + CUBIC_BETA) / 2.0
                } else {
                    cwnd_seg
                };
                self.cubic.epoch = None;
                ((self.cwnd as f64 * CUBIC_BETA) as u64).max(2 * self.mss)
            }
        }
    }

    /// An ACK arrived. `rtt` is the sample from the echoed timestamp, if any. Returns the RTT
    /// sample used (for metrics) when the ACK acknowledged new data.
    pub fn on_ack(&mut self, ack: u64, rtt: u64, now: u64, out: &mut Vec<Segment>) -> Option<u64> {
        if ack > self.snd_max {
            return None;
        }
        let mut sample = None;
        if ack > self.snd_una {
            let acked = ack - self.snd_una;
            self.snd_una = ack;
            if self.snd_nxt < self.snd_una {
                self.snd_nxt = self.snd_una;
            }
            self.update_rtt(rtt);
            sample = Some(rtt);
            if self.in_recovery {
                if ack >= self.recover {
                    // Full acknowledgement: leave fast recovery.
                    self.cwnd = self.ssthresh.min(self.flight().max(self.mss) + self.mss);
                    self.in_recovery = false;
                    self.dupacks = 0;
                } else {
                    // Partial acknowledgement: retransmit the next hole, deflate.
                    self.retransmit_head(out);
                    self.cwnd = self.cwnd.saturating_sub(acked);
                    if acked >= self.mss {
                        self.cwnd += self.mss;
                    }
                    self.cwnd = self.cwnd.max(self.mss);
                    self.rto_deadline = Some(now + self.rto);
                }
            } else {
                self.dupacks = 0;
                self.grow(acked, now);
            }
            self.rto_deadline = if self.snd_max > self.snd_una {
                Some(now + self.rto)
            } else {
                None
            };
        } else if ack == self.snd_una && self.snd_max > self.snd_una {
            self.dupacks += 1;
            if self.in_recovery {
                self.cwnd += self.mss;
            } else if self.dupacks == 3 && ack >= self.recover {
                self.ssthresh = self.reduce();
                self.stats.fast_retransmits += 1;
                self.recover = self.snd_max;
                self.retransmit_head(out);
                self.cwnd = self.ssthresh + 3 * self.mss;
                self.in_recovery = true;
            }
        }
        self.poll_send(now, out);
        sample
    }

    fn grow(&mut self, acked: u64, now: u64) {
        if self.cwnd < self.ssthresh {
            self.cwnd += acked.min(2 * self.mss);
            return;
        }
        match self.cc {
            CcKind::NewReno | CcKind::Bbr => {
                self.ca_acc += acked;
                if self.ca_acc >= self.cwnd {
                    self.ca_acc -= self.cwnd;
                    self.cwnd += self.mss;
                }
            }
            CcKind::Cubic => self.cubic_grow(acked, now),
        }
    }

    fn cubic_grow(&mut self, acked: u64, now: u64) {
        let mss = self.mss as f64;
        let cwnd = self.cwnd as f64 / mss;
        let c = &mut self.cubic;
        let epoch = match c.epoch {
            Some(e) => e,
            None => {
                c.epoch = Some(now);
                c.cwnd_epoch = cwnd;
                c.w_est = cwnd;
                if c.w_max <= cwnd {
                    c.w_max = cwnd;
                    c.k = 0.0;
                } else {
                    c.k = ((c.w_max - cwnd) / CUBIC_C).cbrt();
                }
                now
            }
        };
        let rtt = self.srtt.unwrap_or(100_000_000) as f64 / 1e9;
        let t = (now - epoch) as f64 / 1e9;
        let w = |t: f64| CUBIC_C * (t - c.k).powi(3) + c.w_max;
        let segs = acked as f64 / mss;
        let alpha = 3.0 * (1.0 - CUBIC_BETA) / (1.0 + CUBIC_BETA);
        c.w_est += alpha * segs / cwnd;
        let target = w(t + rtt).clamp(cwnd, 1.5 * cwnd);
        let new = if w(t) < c.w_est {
            c.w_est.max(cwnd)
        } else {
            cwnd + (target - cwnd) * segs / cwnd
        };
        let new_bytes = (new * mss) as u64;
        self.cwnd = new_bytes.max(self.cwnd);
    }

    /// The retransmission timer expired at `now`.
    pub fn on_rto(&mut self, now: u64, out: &mut Vec<Segment>) {
        self.rto_deadline = None;
        if self.snd_max == self.snd_una {
            return;
        }
        self.stats.timeouts += 1;
        self.ssthresh = self.reduce();
        self.cwnd = self.mss;
        self.ca_acc = 0;
        self.recover = self.snd_max;
        self.in_recovery = false;
        self.dupacks = 0;
        self.snd_nxt = self.snd_una;
        self.rto = (self.rto * 2).min(MAX_RTO_NS);
        self.poll_send(now, out);
        if self.rto_deadline.is_none() {
            self.rto_deadline = Some(now + self.rto);
        }
    }
}

/// What the receiver wants done after a segment.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum AckNow {
    /// Send an ACK with this number, echoing this timestamp.
    Send { ack: u64, ts: u64 },
    /// Wait (delayed ACK): make sure the timer runs until `deadline`.
    Delay { deadline: u64 },
}

#[derive(Clone, Debug)]
pub struct Receiver {
    pub rcv_nxt: u64,
    /// Out-of-order ranges `[start, end)`, sorted, disjoint, not touching `rcv_nxt`.
    ooo: Vec<(u64, u64)>,
    delayed: bool,
    unacked_segments: u32,
    ts_recent: u64,
    last_ack_sent: u64,
    pub delack_deadline: Option<u64>,
}

impl Receiver {
    pub fn new(delayed_ack: bool) -> Self {
        Receiver {
            rcv_nxt: 0,
            ooo: Vec::new(),
            delayed: delayed_ack,
            unacked_segments: 0,
            ts_recent: 0,
            last_ack_sent: 0,
            delack_deadline: None,
        }
    }

    /// A segment arrived. Returns the bytes newly delivered in order and what to do.
    pub fn on_segment(&mut self, seq: u64, len: u32, sent_at: u64, now: u64) -> (u64, AckNow) {
        let end = seq + len as u64;
        if seq <= self.last_ack_sent {
            self.ts_recent = sent_at;
        }
        let before = self.rcv_nxt;
        let mut in_order = false;
        let mut filled_hole = false;
        if seq <= self.rcv_nxt && end > self.rcv_nxt {
            self.rcv_nxt = end;
            in_order = true;
            while let Some(&(s, e)) = self.ooo.first() {
                if s > self.rcv_nxt {
                    break;
                }
                self.rcv_nxt = self.rcv_nxt.max(e);
                self.ooo.remove(0);
                filled_hole = true;
            }
        } else if seq > self.rcv_nxt {
            self.insert_ooo(seq, end);
        }
        let delivered = self.rcv_nxt - before;
        let immediate = !self.delayed || !in_order || filled_hole || !self.ooo.is_empty();
        if immediate {
            return (delivered, self.ack_now());
        }
        self.unacked_segments += 1;
        if self.unacked_segments >= 2 {
            return (delivered, self.ack_now());
        }
        let deadline = *self.delack_deadline.get_or_insert(now + DELACK_NS);
        (delivered, AckNow::Delay { deadline })
    }

    fn insert_ooo(&mut self, s: u64, e: u64) {
        let i = self.ooo.partition_point(|r| r.1 < s);
        let mut ns = s;
        let mut ne = e;
        let mut j = i;
        while j < self.ooo.len() && self.ooo[j].0 <= ne {
            ns = ns.min(self.ooo[j].0);
            ne = ne.max(self.ooo[j].1);
            j += 1;
        }
        self.ooo.splice(i..j, std::iter::once((ns, ne)));
    }

    fn ack_now(&mut self) -> AckNow {
        self.unacked_segments = 0;
        self.delack_deadline = None;
        self.last_ack_sent = self.rcv_nxt;
        AckNow::Send {
            ack: self.rcv_nxt,
            ts: self.ts_recent,
        }
    }

    /// The delayed-ACK timer fired at `now`: the ACK to send, if one is still due.
    pub fn on_delack(&mut self, now: u64) -> Option<(u64, u64)> {
        match self.delack_deadline {
            Some(d) if d <= now => match self.ack_now() {
                AckNow::Send { ack, ts } => Some((ack, ts)),
                AckNow::Delay { .. } => None,
            },
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use linkshare_core::Duration;

    fn spec(cc: CcKind) -> TcpSpec {
        TcpSpec {
            cc,
            window: 1 << 30,
            bytes: None,
            delayed_ack: false,
            min_rto: Duration::from_millis(200),
            init_cwnd: 10,
        }
    }

    #[test]
    fn receiver_reassembles_and_acks_cumulatively() {
        let mut r = Receiver::new(false);
        assert_eq!(
            r.on_segment(0, 100, 1, 0),
            (100, AckNow::Send { ack: 100, ts: 1 })
        );
        assert_eq!(
            r.on_segment(200, 100, 2, 0),
            (0, AckNow::Send { ack: 100, ts: 1 })
        );
        assert_eq!(
            r.on_segment(400, 100, 3, 0),
            (0, AckNow::Send { ack: 100, ts: 1 })
        );
        assert_eq!(
            r.on_segment(100, 100, 4, 0),
            (200, AckNow::Send { ack: 300, ts: 4 })
        );
        assert_eq!(
            r.on_segment(300, 100, 5, 0),
            (200, AckNow::Send { ack: 500, ts: 5 })
        );
        // Duplicate of old data.
        assert_eq!(r.on_segment(0, 100, 6, 0).0, 0);
    }

    #[test]
    fn delayed_acks_every_second_segment_or_timer() {
        let mut r = Receiver::new(true);
        assert_eq!(
            r.on_segment(0, 10, 1, 0),
            (
                10,
                AckNow::Delay {
                    deadline: DELACK_NS
                }
            )
        );
        assert_eq!(
            r.on_segment(10, 10, 2, 5),
            (10, AckNow::Send { ack: 20, ts: 1 })
        );
        assert_eq!(
            r.on_segment(20, 10, 3, 7),
            (
                10,
                AckNow::Delay {
                    deadline: 7 + DELACK_NS
                }
            )
        );
        assert_eq!(r.on_delack(7 + DELACK_NS - 1), None);
        assert_eq!(r.on_delack(7 + DELACK_NS), Some((30, 3)));
        assert_eq!(r.on_delack(8 + DELACK_NS), None);
    }

    #[test]
    fn newreno_fast_retransmit_and_recovery() {
        let mut s = Sender::new(&spec(CcKind::NewReno), 1000);
        let mut out = Vec::new();
        s.poll_send(0, &mut out);
        assert_eq!(out.len(), 10);
        out.clear();
        // Segment 0 lost: three duplicate ACKs at 0.
        s.on_ack(0, 0, 10, &mut out);
        // ack == snd_una == 0 with data outstanding: duplicates.
        s.on_ack(0, 0, 10, &mut out);
        assert!(out.is_empty());
        s.on_ack(0, 0, 10, &mut out);
        assert_eq!(
            out,
            vec![Segment {
                seq: 0,
                len: 1000,
                retransmit: true
            }]
        );
        assert_eq!(s.ssthresh, 5000);
        assert_eq!(s.cwnd, 8000);
        out.clear();
        // Partial ACK up to 3000 (segment 3 also lost).
        s.on_ack(3000, 1_000_000, 20, &mut out);
        assert_eq!(
            out[0],
            Segment {
                seq: 3000,
                len: 1000,
                retransmit: true
            }
        );
        // Full ACK.
        out.clear();
        s.on_ack(10_000, 1_000_000, 30, &mut out);
        // min(ssthresh, max(flight, mss) + mss) with nothing in flight: two segments.
        assert_eq!(s.cwnd, 2000);
        assert!(!s.in_recovery);
        assert_eq!(s.stats.cwnd_reductions, 1);
        assert_eq!(s.stats.retransmits, 2);
    }

    #[test]
    fn rto_backs_off_and_goes_back_n() {
        let mut s = Sender::new(&spec(CcKind::NewReno), 1000);
        let mut out = Vec::new();
        s.poll_send(0, &mut out);
        assert_eq!(s.rto_deadline, Some(INITIAL_RTO_NS));
        out.clear();
        s.on_rto(INITIAL_RTO_NS, &mut out);
        assert_eq!(
            out,
            vec![Segment {
                seq: 0,
                len: 1000,
                retransmit: true
            }]
        );
        assert_eq!(s.cwnd, 1000);
        assert_eq!(s.rto_deadline, Some(3 * INITIAL_RTO_NS));
        out.clear();
        s.on_ack(1000, 10_000_000, 3 * INITIAL_RTO_NS - 10, &mut out);
        // Slow start again: cwnd 2000, two segments (go-back-N resends 1000..3000).
        assert_eq!(out.len(), 2);
        assert!(out.iter().all(|s| s.retransmit));
    }

    #[test]
    fn cubic_grows_back_towards_w_max() {
        let mut s = Sender::new(&spec(CcKind::Cubic), 1000);
        s.cwnd = 100_000;
        s.ssthresh = 50_000;
        s.snd_max = 100_000;
        s.srtt = Some(200_000_000);
        s.ssthresh = s.reduce();
        assert_eq!(s.ssthresh, 70_000);
        s.cwnd = s.ssthresh;
        s.snd_una = 0;
        s.snd_nxt = 0;
        s.snd_max = 0;
        s.end = u64::MAX;
        let mut out = Vec::new();
        let mut now = 0;
        // At a 200 ms RTT the cubic curve dominates the Reno-friendly estimate: acknowledge one
        // window per RTT and follow W(t) = C (t − K)³ + W_max, K = ∛((100 − 70)/C) ≈ 4.2 s.
        let mut at = |s: &mut Sender, secs: u64| {
            while now < secs * 1_000_000_000 {
                now += 200_000_000;
                let w = s.cwnd;
                s.snd_max = s.snd_una + w;
                s.snd_nxt = s.snd_max;
                out.clear();
                let una = s.snd_una;
                s.on_ack(una + w, 200_000_000, now, &mut out);
            }
            s.cwnd as f64 / 1000.0
        };
        let w3 = at(&mut s, 3);
        assert!(w3 > 95.0 && w3 < 100.0, "cwnd {w3} segments at 3 s");
        let w6 = at(&mut s, 6);
        assert!(
            w6 > 101.0 && w6 < 106.0,
            "cwnd {w6} segments at 6 s: past W_max, convex"
        );
    }
}
