//! The TCP receiver as Linux's (net/ipv4/tcp_input.c: `tcp_data_queue`, `tcp_sack_new_ofo_skb`,
//! `tcp_event_data_recv`, `__tcp_ack_snd_check`, `tcp_send_delayed_ack`, `tcp_rcv_space_adjust`;
//! net/ipv4/tcp_output.c: `__tcp_select_window`), sans-IO.
//!
//! Principles:
//! * **SACK** (RFC 2018): up to four blocks remembered, the most recently changed first; an ACK
//!   carries three (the timestamp option leaves room for three). A block that grows moves to the
//!   front and absorbs the blocks it now touches; blocks below `rcv_nxt` disappear. A duplicate
//!   segment is reported once in a leading **DSACK** block (RFC 2883), then two SACK blocks.
//! * **Timestamps** (RFC 7323): the echoed TSval is the one of the segment at the left edge when
//!   the last ACK was sent (`seq ≤ rcv_wup`), so an RTT sample covers the delayed-ACK wait; it
//!   never goes back to an older TSval (PAWS), which keeps the sender's undo honest. The
//!   sender's TSecr on data gives the receiver its RTT estimate (`tcp_rcv_rtt_measure_ts`).
//! * **Delayed ACKs**: an ACK for every second full segment (more than one MSS since the last
//!   ACK), otherwise after the delayed-ACK timeout `ato` (40 ms, `TCP_ATO_MIN`; it adapts to the
//!   inter-arrival time and doubles when the timer fires, at most 500 ms). **Quick-ACK mode**: the
//!   first data of the connection, and a gap longer than the receiver's RTO (1 s), allow
//!   `min(16, window / 2·MSS)` immediate ACKs (`tcp_incr_quickack`); a duplicate segment enters it
//!   too. Data that fills the last hole is acknowledged at once.
//! * Out-of-order data: the first three ACKs per `rcv_nxt` go at once (duplicate ACKs for fast
//!   retransmit), further ones are **compressed** (`tcp_comp_sack_*`): one ACK after
//!   `min(1 ms, rcv_rtt/20)` or every 44 segments.
//! * **Receive window**: with `window` fixed, the window grows (`rcv_ssthresh`, two segments per
//!   segment received) from 64 KiB to that value, as with `SO_RCVBUF`. Otherwise it is autotuned
//!   (`tcp_rcv_space_adjust`): once per receiver RTT, if the application read more than last time,
//!   the buffer becomes `2·(2·copied + 16·MSS)` plus growth, up to `tcp_rmem[2]` (32 MiB), and the
//!   window clamp half of it. Out-of-order data occupies the buffer; the right edge never moves
//!   back. Every byte in order is read at once by the application.

use linkshare_core::packet::TcpInfo;

use super::ecn::ReceiverEcn;

/// `TCP_ATO_MIN` / `TCP_DELACK_MIN`: 40 ms.
pub const DELACK_NS: u64 = 40_000_000;
/// Largest delayed-ACK timeout of a receiver with no RTT estimate of its own (`HZ/2`).
pub const DELACK_MAX_NS: u64 = 500_000_000;
/// `TCP_MAX_QUICKACKS`.
pub const MAX_QUICKACKS: u32 = 16;
/// `net.ipv4.tcp_rmem` on the reference machine: default and maximum.
pub const RMEM_DEFAULT: u64 = 131_072;
pub const RMEM_MAX: u64 = 33_554_432;
/// Initial receive window (64 KiB, the largest unscaled window of the SYN).
pub const INITIAL_WINDOW: u64 = 65_535;
/// `net.ipv4.tcp_comp_sack_nr` and `tcp_comp_sack_delay_ns`.
pub const COMP_SACK_NR: u32 = 44;
pub const COMP_SACK_DELAY_NS: u64 = 1_000_000;
/// The receiver's own retransmission timeout (it never sends data: `TCP_TIMEOUT_INIT`).
const RCV_RTO_NS: u64 = 1_000_000_000;
/// `TCP_FASTRETRANS_THRESH`.
const DUPACKS_AT_ONCE: u32 = 3;

/// An acknowledgement as it travels back to the sender.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct AckInfo {
    pub ack: u64,
    /// SACK blocks `[start, end)`, the DSACK first if `dsack`, then the most recent first.
    pub sacks: [(u64, u64); 3],
    pub n_sacks: u8,
    pub dsack: bool,
    /// TSval of this ACK (the receiver's clock).
    pub tsval: u64,
    /// Echoed TSval (TSecr).
    pub tsecr: u64,
    /// Advertised window from `ack`, bytes.
    pub wnd: u64,
    /// ECN-Echo: a CE mark was received and the sender has not yet answered with CWR.
    pub ece: bool,
}

impl AckInfo {
    /// The length of this pure ACK's IP packet as Linux sends it: the IP header (20 bytes,
    /// IPv6 40), the TCP header (20) with the timestamp option (NOP, NOP, TS: 12) and, where it
    /// carries SACK blocks, NOP, NOP, SACK kind and length (4) and 8 bytes a block (DSACK
    /// included) — tcp_output.c `tcp_established_options`, `tcp_options_write`. 52 bytes for a
    /// plain IPv4 ACK; the link's framing (`overhead`) comes on top.
    pub fn ip_len(&self, ipv6: bool) -> u32 {
        let ip = if ipv6 { 40 } else { 20 };
        let sack = if self.n_sacks > 0 {
            4 + 8 * u32::from(self.n_sacks)
        } else {
            0
        };
        ip + 20 + 12 + sack
    }

    pub fn blocks(&self) -> &[(u64, u64)] {
        &self.sacks[..self.n_sacks as usize]
    }

    /// This ACK as a TCP header would carry it: a pure ACK with the timestamp option (both
    /// clocks in microseconds) and its SACK blocks (a DSACK first), sequence numbers taken
    /// modulo 2^32 as on the wire.
    pub fn tcp_info(&self) -> TcpInfo {
        let mut t = TcpInfo {
            ack: self.ack as u32,
            flags: if self.ece {
                TcpInfo::ACK | TcpInfo::ECE
            } else {
                TcpInfo::ACK
            },
            tstamp: Some(((self.tsval / 1000) as u32, (self.tsecr / 1000) as u32)),
            ..TcpInfo::default()
        };
        for (slot, &(s, e)) in t.sack.iter_mut().zip(self.blocks()) {
            *slot = (s as u32, e as u32);
        }
        t.sack_blocks = self.blocks().len().min(t.sack.len()) as u8;
        t
    }
}

#[derive(Clone, Debug)]
pub struct Receiver {
    mss: u64,
    sack: bool,
    delayed: bool,
    pub rcv_nxt: u64,
    /// `rcv_nxt` when the last ACK was sent.
    rcv_wup: u64,
    /// Out-of-order ranges, sorted and disjoint, above `rcv_nxt`.
    ooo: Vec<(u64, u64)>,
    ooo_bytes: u64,
    sacks: [(u64, u64); 4],
    n_sacks: usize,
    dsack: Option<(u64, u64)>,
    ts_recent: u64,
    // Delayed ACK engine (`icsk_ack`).
    ack_scheduled: bool,
    ack_now: bool,
    quick: u32,
    ato: u64,
    lrcvtime: Option<u64>,
    delack_deadline: Option<u64>,
    // SACK compression.
    comp_rcv_nxt: u64,
    dup_ack_counter: u32,
    compressed: u32,
    comp_deadline: Option<u64>,
    // Window.
    fixed: bool,
    clamp: u64,
    rcv_ssthresh: u64,
    right_edge: u64,
    rcv_rtt8: u64,
    last_tsecr: u64,
    space: u64,
    space_seq: u64,
    space_time: u64,
    /// ECN ([`super::ecn`]): off unless [`Receiver::with_ecn`].
    pub ecn: ReceiverEcn,
}

impl Receiver {
    /// `window`: `Some(bytes)` fixes the receive window, `None` autotunes it.
    pub fn new(mss: u32, sack: bool, delayed_ack: bool, window: Option<u64>) -> Self {
        let mss = mss as u64;
        let clamp = window.unwrap_or(RMEM_DEFAULT / 2);
        Receiver {
            mss,
            sack,
            delayed: delayed_ack,
            rcv_nxt: 0,
            rcv_wup: 0,
            ooo: Vec::new(),
            ooo_bytes: 0,
            sacks: [(0, 0); 4],
            n_sacks: 0,
            dsack: None,
            ts_recent: 0,
            ack_scheduled: false,
            ack_now: false,
            quick: 0,
            ato: 0,
            lrcvtime: None,
            delack_deadline: None,
            comp_rcv_nxt: 0,
            dup_ack_counter: 0,
            compressed: 0,
            comp_deadline: None,
            fixed: window.is_some(),
            clamp,
            rcv_ssthresh: INITIAL_WINDOW.min(clamp),
            right_edge: INITIAL_WINDOW.min(clamp),
            rcv_rtt8: 0,
            last_tsecr: 0,
            space: (10 * mss).min(INITIAL_WINDOW),
            space_seq: 0,
            space_time: 0,
            ecn: ReceiverEcn::default(),
        }
    }

    /// ECN negotiated on this connection (the flow's `ecn`).
    pub fn with_ecn(mut self, ok: bool) -> Self {
        self.ecn = ReceiverEcn::new(ok);
        self
    }

    /// The ECN facts of the segment `[seq, seq+len)` about to be passed to
    /// [`Receiver::on_segment`]: its IP ECN field and its CWR flag ([`super::ecn`]).
    pub fn on_ecn(&mut self, field: u8, cwr: bool, seq: u64, len: u32) {
        let act = self
            .ecn
            .on_segment(field, cwr, seq + u64::from(len) > self.rcv_nxt);
        if act.quickack > 0 {
            // `tcp_enter_quickack_mode(sk, 2)`.
            let q = (self.window_now() / (2 * self.mss)).max(2) as u32;
            self.quick = self.quick.max(q.min(act.quickack));
            self.ato = DELACK_NS;
        }
        if act.ack_now && len > 0 {
            self.ack_now = true;
        }
    }

    /// When the receiver's timer (delayed ACK or compressed SACK) must run.
    pub fn timer(&self) -> Option<u64> {
        match (self.delack_deadline, self.comp_deadline) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// The advertised window limit right now (for tests and the report).
    pub fn window_clamp(&self) -> u64 {
        self.clamp
    }

    /// A segment `[seq, seq+len)` stamped `tsval`, echoing `tsecr`, arrives at `now`. Returns the
    /// bytes newly delivered in order and the ACK to send at once, if any.
    pub fn on_segment(
        &mut self,
        seq: u64,
        len: u32,
        tsval: u64,
        tsecr: u64,
        now: u64,
    ) -> (u64, Option<AckInfo>) {
        let end = seq + len as u64;
        // `tcp_replace_ts_recent`: the echo never goes back in time (the PAWS check, on the
        // millisecond timestamp clock), so a late original does not pass for a retransmission.
        if seq <= self.rcv_wup && tsval / 1_000_000 >= self.ts_recent / 1_000_000 {
            self.ts_recent = tsval;
        }
        if len as u64 >= self.mss && tsecr != 0 && tsecr != self.last_tsecr {
            self.last_tsecr = tsecr;
            let m = now.saturating_sub(tsecr).max(1);
            if self.rcv_rtt8 == 0 {
                self.rcv_rtt8 = m << 3;
            } else {
                self.rcv_rtt8 =
                    (self.rcv_rtt8 as i64 + m as i64 - (self.rcv_rtt8 >> 3) as i64).max(1) as u64;
            }
        }
        let before = self.rcv_nxt;
        if end <= self.rcv_nxt {
            // Old data: report it (DSACK), re-enter quick-ACK mode, ACK at once.
            if self.sack {
                self.dsack = Some((seq, end));
            }
            self.incr_quickack();
            self.ack_scheduled = true;
            self.ack_now = true;
        } else if seq <= self.rcv_nxt {
            self.rcv_nxt = end;
            self.event_data_recv(now);
            if !self.ooo.is_empty() {
                while let Some(&(s, e)) = self.ooo.first() {
                    if s > self.rcv_nxt {
                        break;
                    }
                    if e > self.rcv_nxt {
                        self.rcv_nxt = e;
                    }
                    self.ooo_bytes -= e - s;
                    self.ooo.remove(0);
                }
                if self.ooo.is_empty() {
                    self.ack_now = true;
                }
                self.sack_remove();
            }
            self.ack_scheduled = true;
            if self.rcv_ssthresh < self.clamp {
                self.rcv_ssthresh = (self.rcv_ssthresh + 2 * self.mss).min(self.clamp);
            }
        } else {
            if self.ooo_covers(seq, end) {
                if self.sack {
                    self.dsack = Some((seq, end));
                }
            } else {
                self.insert_ooo(seq, end);
                if self.sack {
                    self.sack_new_ofo(seq, end);
                }
            }
            self.ack_scheduled = true;
        }
        let delivered = self.rcv_nxt - before;
        if delivered > 0 {
            self.space_adjust(now);
        }
        (delivered, self.ack_snd_check(now))
    }

    /// The receiver's timer fired at `now`: the ACK to send, if one is due.
    pub fn on_timer(&mut self, now: u64) -> Option<AckInfo> {
        let mut send = false;
        if let Some(d) = self.comp_deadline {
            if d <= now {
                self.comp_deadline = None;
                send |= self.compressed > 0;
            }
        }
        if let Some(d) = self.delack_deadline {
            if d <= now {
                self.delack_deadline = None;
                if self.ack_scheduled {
                    // Delayed ACK missed: inflate the timeout (`tcp_delack_timer_handler`).
                    self.ato = (self.ato << 1).min(RCV_RTO_NS);
                    send = true;
                }
            }
        }
        send.then(|| self.send_ack(now))
    }

    fn ooo_covers(&self, s: u64, e: u64) -> bool {
        let i = self.ooo.partition_point(|r| r.1 < e);
        self.ooo.get(i).is_some_and(|r| r.0 <= s && r.1 >= e)
    }

    fn insert_ooo(&mut self, s: u64, e: u64) {
        let i = self.ooo.partition_point(|r| r.1 < s);
        let (mut ns, mut ne) = (s, e);
        let mut j = i;
        let mut covered = 0;
        while j < self.ooo.len() && self.ooo[j].0 <= ne {
            ns = ns.min(self.ooo[j].0);
            ne = ne.max(self.ooo[j].1);
            covered += self.ooo[j].1 - self.ooo[j].0;
            j += 1;
        }
        self.ooo_bytes = self.ooo_bytes + (ne - ns) - covered;
        self.ooo.splice(i..j, std::iter::once((ns, ne)));
    }

    /// `tcp_sack_new_ofo_skb`: extend a block (and move it to the front) or add one in front.
    fn sack_new_ofo(&mut self, seq: u64, end: u64) {
        for k in 0..self.n_sacks {
            let (s, e) = self.sacks[k];
            if seq <= e && end >= s {
                self.sacks[k] = (s.min(seq), e.max(end));
                self.sacks[..=k].rotate_right(1);
                self.sack_coalesce();
                return;
            }
        }
        let n = (self.n_sacks + 1).min(4);
        self.sacks[..n].rotate_right(1);
        self.sacks[0] = (seq, end);
        self.n_sacks = n;
    }

    /// Merge blocks that now touch the first one (`tcp_sack_maybe_coalesce`).
    fn sack_coalesce(&mut self) {
        let mut k = 1;
        while k < self.n_sacks {
            let (s0, e0) = self.sacks[0];
            let (s, e) = self.sacks[k];
            if s <= e0 && e >= s0 {
                self.sacks[0] = (s0.min(s), e0.max(e));
                self.sacks.copy_within(k + 1..self.n_sacks, k);
                self.n_sacks -= 1;
            } else {
                k += 1;
            }
        }
    }

    /// Drop blocks now below `rcv_nxt` (`tcp_sack_remove`).
    fn sack_remove(&mut self) {
        let mut k = 0;
        while k < self.n_sacks {
            if self.sacks[k].1 <= self.rcv_nxt || self.ooo.is_empty() {
                self.sacks.copy_within(k + 1..self.n_sacks, k);
                self.n_sacks -= 1;
            } else {
                k += 1;
            }
        }
    }

    fn incr_quickack(&mut self) {
        let q = (self.window_now() / (2 * self.mss)).max(2) as u32;
        self.quick = self.quick.max(q.min(MAX_QUICKACKS));
    }

    /// `tcp_event_data_recv`: quick-ACK at the start and after a long gap; `ato` follows the
    /// inter-arrival time.
    fn event_data_recv(&mut self, now: u64) {
        match self.lrcvtime {
            None => {
                self.incr_quickack();
                self.ato = DELACK_NS;
            }
            Some(t) => {
                let m = now - t;
                if m <= DELACK_NS / 2 {
                    self.ato = self.ato / 2 + DELACK_NS / 2;
                } else if m < self.ato {
                    self.ato = (self.ato / 2 + m).min(RCV_RTO_NS);
                } else if m > RCV_RTO_NS {
                    self.incr_quickack();
                }
            }
        }
        self.lrcvtime = Some(now);
    }

    /// `__tcp_ack_snd_check`.
    fn ack_snd_check(&mut self, now: u64) -> Option<AckInfo> {
        if !self.ack_scheduled {
            return None;
        }
        let send_now = !self.delayed
            || self.rcv_nxt - self.rcv_wup > self.mss
            || self.quick > 0
            || self.ack_now;
        if send_now {
            return Some(self.send_ack(now));
        }
        if self.ooo.is_empty() {
            self.send_delayed(now);
            return None;
        }
        if !self.sack || self.compressed >= COMP_SACK_NR {
            return Some(self.send_ack(now));
        }
        if self.comp_rcv_nxt != self.rcv_nxt {
            self.comp_rcv_nxt = self.rcv_nxt;
            self.dup_ack_counter = 0;
        }
        if self.dup_ack_counter < DUPACKS_AT_ONCE {
            self.dup_ack_counter += 1;
            return Some(self.send_ack(now));
        }
        self.compressed += 1;
        if self.comp_deadline.is_none() {
            let delay = COMP_SACK_DELAY_NS.min((self.rcv_rtt8 >> 3) / 20);
            self.comp_deadline = Some(now + delay);
        }
        None
    }

    /// `tcp_send_delayed_ack`.
    fn send_delayed(&mut self, now: u64) {
        let ato = self.ato.clamp(DELACK_NS, DELACK_MAX_NS);
        let mut deadline = now + ato;
        if let Some(old) = self.delack_deadline {
            if old <= now + ato / 4 {
                // The pending timer is about to fire anyway: keep it.
                return;
            }
            deadline = deadline.min(old);
        }
        self.delack_deadline = Some(deadline);
    }

    /// Free window now (`__tcp_select_window`, simplified): the smaller of the slowly opened
    /// `rcv_ssthresh` and the buffer left by out-of-order data.
    fn window_now(&self) -> u64 {
        self.rcv_ssthresh
            .min(self.clamp.saturating_sub(self.ooo_bytes))
    }

    fn send_ack(&mut self, now: u64) -> AckInfo {
        let right = self.rcv_nxt + self.window_now();
        if right > self.right_edge {
            self.right_edge = right;
        }
        let mut a = AckInfo {
            ack: self.rcv_nxt,
            tsval: now,
            tsecr: self.ts_recent,
            wnd: self.right_edge - self.rcv_nxt,
            ece: self.ecn.ece(),
            ..AckInfo::default()
        };
        let mut n = 0;
        if let Some(d) = self.dsack.take() {
            a.sacks[0] = d;
            a.dsack = true;
            n = 1;
        }
        for k in 0..self.n_sacks {
            if n == 3 {
                break;
            }
            a.sacks[n] = self.sacks[k];
            n += 1;
        }
        a.n_sacks = n as u8;
        self.rcv_wup = self.rcv_nxt;
        // `tcp_event_ack_sent`.
        self.compressed = 0;
        self.comp_deadline = None;
        if self.ack_scheduled && self.quick > 0 {
            self.quick -= 1;
            if self.quick == 0 {
                self.ato = DELACK_NS;
            }
        }
        self.ack_scheduled = false;
        self.ack_now = false;
        self.delack_deadline = None;
        a
    }

    /// `tcp_rcv_space_adjust`, called when the application reads (at once, here).
    fn space_adjust(&mut self, now: u64) {
        if self.rcv_rtt8 == 0 || now - self.space_time < (self.rcv_rtt8 >> 3) {
            return;
        }
        let copied = self.rcv_nxt - self.space_seq;
        if copied > self.space {
            if !self.fixed {
                let mut rcvwin = 2 * copied + 16 * self.mss;
                let grow = rcvwin as u128 * (copied - self.space) as u128 / self.space as u128;
                rcvwin = rcvwin.saturating_add(2 * grow.min(u64::MAX as u128 / 4) as u64);
                let rcvbuf = rcvwin.saturating_mul(2).min(RMEM_MAX);
                self.clamp = self.clamp.max(rcvbuf / 2);
            }
            self.space = copied;
        }
        self.space_seq = self.rcv_nxt;
        self.space_time = now;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MSS: u32 = 1000;

    fn seg(r: &mut Receiver, k: u64, now: u64) -> (u64, Option<AckInfo>) {
        r.on_segment(k * 1000, MSS, 100 + k, 0, now)
    }

    /// A pure ACK is 52 bytes of IPv4 with timestamps, and grows by 4 + 8 per SACK block.
    #[test]
    fn an_acks_length_counts_its_options() {
        let mut r = Receiver::new(MSS, true, false, None);
        let a = seg(&mut r, 0, 0).1.unwrap();
        assert_eq!((a.ip_len(false), a.ip_len(true)), (52, 72));
        let a = seg(&mut r, 2, 1).1.unwrap();
        assert_eq!(a.n_sacks, 1);
        assert_eq!(a.ip_len(false), 64);
        let a = seg(&mut r, 4, 2).1.unwrap();
        assert_eq!(a.n_sacks, 2);
        assert_eq!(a.ip_len(false), 72);
    }

    #[test]
    fn sack_blocks_most_recent_first_and_dsack() {
        let mut r = Receiver::new(MSS, true, false, None);
        assert_eq!(seg(&mut r, 0, 0).1.map(|a| a.ack), Some(1000));
        // 1 lost; 2, 3 arrive, then 5 (4 lost), then 7.
        let a = seg(&mut r, 2, 1).1.unwrap();
        assert_eq!((a.ack, a.blocks()), (1000, &[(2000, 3000)][..]));
        seg(&mut r, 3, 2);
        let a = seg(&mut r, 5, 3).1.unwrap();
        assert_eq!(a.blocks(), &[(5000, 6000), (2000, 4000)][..]);
        let a = seg(&mut r, 7, 4).1.unwrap();
        assert_eq!(a.blocks(), &[(7000, 8000), (5000, 6000), (2000, 4000)][..]);
        // The oldest block extends: it moves to the front.
        let a = seg(&mut r, 8, 5).1.unwrap();
        assert_eq!(a.blocks(), &[(7000, 9000), (5000, 6000), (2000, 4000)][..]);
        // A duplicate of SACKed data: DSACK first, then two blocks.
        let a = seg(&mut r, 5, 6).1.unwrap();
        assert!(a.dsack);
        assert_eq!(a.blocks(), &[(5000, 6000), (7000, 9000), (5000, 6000)][..]);
        // Hole 1 filled: blocks below rcv_nxt go; ACK echoes the retransmission's timestamp.
        let a = seg(&mut r, 1, 7).1.unwrap();
        assert_eq!(a.ack, 4000);
        assert_eq!(a.tsecr, 101);
        assert_eq!(a.blocks(), &[(7000, 9000), (5000, 6000)][..]);
        let a = seg(&mut r, 4, 8).1.unwrap();
        assert_eq!((a.ack, a.blocks()), (6000, &[(7000, 9000)][..]));
        let a = seg(&mut r, 6, 9).1.unwrap();
        assert_eq!((a.ack, a.n_sacks), (9000, 0));
        // Old data: DSACK below the cumulative ACK.
        let a = seg(&mut r, 0, 10).1.unwrap();
        assert!(a.dsack);
        assert_eq!(a.blocks(), &[(0, 1000)][..]);
    }

    #[test]
    fn a_late_original_does_not_move_the_timestamp_echo_back() {
        const MS: u64 = 1_000_000;
        let mut r = Receiver::new(MSS, true, false, None);
        r.on_segment(0, MSS, 5 * MS, 0, 10 * MS);
        // Segment 1's retransmission (sent at 300 ms) arrives first ...
        let a = r.on_segment(1000, MSS, 300 * MS, 0, 310 * MS).1.unwrap();
        assert_eq!(a.tsecr, 300 * MS);
        // ... then its original, queued since 6 ms: reported as a duplicate, but the echo stays
        // the newer timestamp (Linux's PAWS check in `tcp_replace_ts_recent`).
        let a = r.on_segment(1000, MSS, 6 * MS, 0, 320 * MS).1.unwrap();
        assert!(a.dsack);
        assert_eq!(a.tsecr, 300 * MS);
    }

    #[test]
    fn quick_acks_at_start_then_every_second_segment_and_timer() {
        let mut r = Receiver::new(MSS, true, true, None);
        let mut now = 0;
        // 64 KiB window / (2 · 1000) = 32 → 16 quick ACKs, one per segment.
        for k in 0..16 {
            now += 10;
            assert!(seg(&mut r, k, now).1.is_some(), "quick ACK {k}");
        }
        now += 10;
        assert!(seg(&mut r, 16, now).1.is_none(), "delayed from the 17th");
        assert_eq!(r.timer(), Some(now + DELACK_NS));
        now += 10;
        let a = seg(&mut r, 17, now).1.expect("second full segment");
        assert_eq!(a.ack, 18_000);
        assert_eq!(a.tsecr, 116, "echo of the first unacknowledged segment");
        assert_eq!(r.timer(), None);
        now += 10;
        assert!(seg(&mut r, 18, now).1.is_none());
        let t = r.timer().unwrap_or(0);
        assert_eq!(r.on_timer(t - 1), None);
        assert_eq!(r.on_timer(t).map(|a| a.ack), Some(19_000));
        assert_eq!(r.timer(), None);
    }

    #[test]
    fn out_of_order_acks_at_once_then_compressed_and_hole_fill_at_once() {
        let mut r = Receiver::new(MSS, true, true, None);
        let mut now = 0;
        for k in 0..20 {
            now += 10;
            seg(&mut r, k, now);
        }
        // Receiver RTT estimate from TSecr: 5 ms.
        r.on_segment(20_000, MSS, 1, now + 1, now + 5_000_001);
        now += 5_000_001;
        // 21 lost; three duplicate ACKs go at once, then compression.
        for k in 22..25 {
            now += 10;
            let a = seg(&mut r, k, now).1;
            assert_eq!(a.map(|a| a.ack), Some(21_000), "dupack for {k}");
        }
        now += 10;
        assert!(seg(&mut r, 25, now).1.is_none());
        // min(1 ms, 5 ms / 20 = 250 µs).
        assert_eq!(r.timer(), Some(now + 250_000));
        assert!(seg(&mut r, 26, now + 5).1.is_none());
        let a = r.on_timer(now + 250_000).expect("compressed SACK");
        assert_eq!(a.blocks(), &[(22_000, 27_000)][..]);
        // The hole is filled: immediate ACK of everything.
        let a = seg(&mut r, 21, now + 300_000).1.expect("hole filled");
        assert_eq!(a.ack, 27_000);
    }

    #[test]
    fn window_autotunes_and_fixed_window_stays() {
        let mut r = Receiver::new(MSS, true, false, None);
        assert_eq!(r.window_clamp(), RMEM_DEFAULT / 2);
        let mut now = 0;
        let mut last = AckInfo::default();
        // 1 ms RTT (TSecr), 100 segments per ms.
        for k in 0..10_000u64 {
            now += 10_000;
            let (_, a) = r.on_segment(
                k * 1000,
                MSS,
                now,
                now.saturating_sub(1_000_000).max(1),
                now,
            );
            if let Some(a) = a {
                last = a;
            }
        }
        assert!(r.window_clamp() > 1_000_000, "clamp {}", r.window_clamp());
        assert!(last.wnd > 200_000, "window {}", last.wnd);
        let mut f = Receiver::new(MSS, true, false, Some(20_000));
        let (_, a) = f.on_segment(0, MSS, 1, 0, 1);
        assert_eq!(a.map(|a| a.wnd), Some(20_000));
    }
}

#[cfg(test)]
mod ack_filter_tests {
    use super::super::receiver::AckInfo;
    use crate::packet::{PktKind, SimPacket, HEADER_BYTES};
    use linkshare_core::qdisc::cake::ack_filter::{find_redundant, AckFilter};
    use linkshare_core::PacketMeta;

    fn ack(n: u64, tsval_ms: u64, sacks: &[(u64, u64)]) -> SimPacket {
        let mut a = AckInfo {
            ack: n,
            tsval: tsval_ms * 1_000_000,
            tsecr: 5_000_000,
            ..AckInfo::default()
        };
        for (i, s) in sacks.iter().enumerate() {
            a.sacks[i] = *s;
        }
        a.n_sacks = sacks.len() as u8;
        SimPacket {
            meta: PacketMeta {
                len: HEADER_BYTES,
                proto: 6,
                src_port: 5000,
                dst_port: 20000,
                ..PacketMeta::default()
            },
            flow: 0,
            payload: 0,
            kind: PktKind::Ack,
            seq: n,
            sent_at: a.tsval,
            echo: 0,
            tcp: Some(Box::new(a.tcp_info())),
            cwr: false,
        }
    }

    /// The receiver's ACKs, as the ACK filter reads them: cumulative ACKs make older ones
    /// redundant; an ACK whose SACK blocks the newer one does not cover, or a DSACK, is kept.
    #[test]
    fn receiver_acks_are_filtered_by_the_kernels_rules() {
        let q = [ack(1000, 1, &[]), ack(2000, 2, &[])];
        assert_eq!(
            find_redundant(q.iter(), &ack(3000, 3, &[]), AckFilter::On),
            Some(0)
        );
        // A SACK the newer ACK repeats (and extends) is redundant; one it drops is not.
        let q = [ack(1000, 1, &[(3000, 4000)])];
        let newer = ack(1000, 2, &[(3000, 5000)]);
        assert_eq!(
            find_redundant(q.iter(), &newer, AckFilter::Aggressive),
            Some(0)
        );
        let other = ack(1000, 2, &[(6000, 7000)]);
        assert_eq!(
            find_redundant(q.iter(), &other, AckFilter::Aggressive),
            None
        );
        // A DSACK (a block below the cumulative ACK) is never dropped.
        let q = [ack(2000, 1, &[(500, 1000)])];
        let later = ack(3000, 2, &[(500, 1000)]);
        assert_eq!(
            find_redundant(q.iter(), &later, AckFilter::Aggressive),
            None
        );
        // Data and pings carry no TCP facts: never eligible.
        let mut data = ack(1000, 1, &[]);
        data.tcp = None;
        assert_eq!(
            find_redundant([data].iter(), &ack(3000, 3, &[]), AckFilter::Aggressive),
            None
        );
    }
}
