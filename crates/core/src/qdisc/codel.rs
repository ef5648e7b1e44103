//! `codel`: Controlled Delay AQM (RFC 8289), as a stand-alone qdisc and as a per-flow state
//! machine ([`CodelQueue`]: a FIFO with its [`CodelState`]) reused by `fq_codel`.
//!
//! Every packet is timestamped at enqueue; at dequeue its sojourn time is compared with `target`.
//! Once the sojourn time has stayed above `target` for `interval` (and more than one MTU is
//! queued), CoDel enters the dropping state and drops (or CE-marks) at intervals of
//! `interval / sqrt(count)`; `1/sqrt(count)` is kept in Q0.32 fixed point and refined by one
//! Newton step per count change, as Linux does. On re-entering the dropping state within
//! `16 × interval` the count resumes from `count - lastcount` (RFC 8289 §5.6).
//!
//! Complexity: O(1) per packet. One dequeue call drops at most [`MAX_DROPS_PER_DEQUEUE`] packets
//! (Linux bounds it only by the queue); the remainder is handled on the next calls.

use std::collections::VecDeque;

use super::{Books, Dequeued, Discipline, DropReason, Dropped, ParamError};
use crate::packet::Packet;
use crate::units::{Duration, Time};

/// Upper bound on the packets dropped by one dequeue call.
pub const MAX_DROPS_PER_DEQUEUE: u32 = 64;
/// Backlog in bytes at or below which CoDel never drops (one MTU).
pub const CODEL_MTU: u64 = 1514;

/// CoDel parameters (policy keys).
#[derive(Clone, Debug, PartialEq)]
pub struct CodelParams {
    pub target: Duration,
    pub interval: Duration,
    /// Packet limit.
    pub limit: u32,
    pub ecn: bool,
    pub ce_threshold: Option<Duration>,
}

impl Default for CodelParams {
    fn default() -> Self {
        CodelParams {
            target: Duration::from_millis(5),
            interval: Duration::from_millis(100),
            limit: 1000,
            ecn: false,
            ce_threshold: None,
        }
    }
}

impl CodelParams {
    pub fn validate(&self) -> Result<(), ParamError> {
        if self.target.0 == 0 {
            return Err(ParamError::new(
                "target",
                "must be above 0, got 0",
                "use e.g. \"5ms\"",
            ));
        }
        if self.interval.0 == 0 || self.interval.0 > Duration::from_secs(100).0 {
            return Err(ParamError::new(
                "interval",
                format!("must be in (0, 100s], got {} ns", self.interval.0),
                "use e.g. \"100ms\" (a worst-case RTT)",
            ));
        }
        if self.target > self.interval {
            return Err(ParamError::new(
                "target",
                "must not exceed interval",
                "use target of 5-10 % of interval",
            ));
        }
        if self.limit == 0 {
            return Err(ParamError::new(
                "limit",
                "must be at least 1 packet, got 0",
                "use e.g. 1000",
            ));
        }
        Ok(())
    }
}

/// One Newton step of `x ≈ 1/sqrt(count)` in Q0.32: `x' = x (3 - count x²) / 2` (shared with
/// CAKE's COBALT, which keeps the same fixed-point format).
pub(crate) fn inv_sqrt_step(count: u32, x: u32) -> u32 {
    let x = x as u64;
    let x2 = (x * x) >> 32;
    let val = (3u64 << 32).wrapping_sub(count as u64 * x2) >> 2;
    let val = ((val as u128 * x as u128) >> 31) as u64;
    val.min(u32::MAX as u64) as u32
}

/// CoDel's control law `t + interval / sqrt(count)`, with `1/sqrt(count)` in Q0.32.
pub(crate) fn control_law(t: u64, interval: Duration, rec_inv_sqrt: u32) -> u64 {
    t + ((interval.0 as u128 * rec_inv_sqrt as u128) >> 32) as u64
}

/// The CoDel control state of one queue.
#[derive(Clone, Debug, Default)]
pub struct CodelState {
    pub count: u32,
    pub lastcount: u32,
    pub dropping: bool,
    /// 1/sqrt(count) in Q0.32.
    pub rec_inv_sqrt: u32,
    /// 0 = not above target.
    pub first_above_time: u64,
    pub drop_next: u64,
    pub last_sojourn: Duration,
}

impl CodelState {
    /// One Newton step of 1/sqrt(count): x' = x (3 - count x²) / 2, in Q0.32.
    fn newton_step(&mut self) {
        self.rec_inv_sqrt = inv_sqrt_step(self.count, self.rec_inv_sqrt);
    }
    /// `t + interval / sqrt(count)`.
    fn control_law(&self, t: u64, interval: Duration) -> u64 {
        control_law(t, interval, self.rec_inv_sqrt)
    }
    fn should_drop(&mut self, sojourn: Duration, backlog: u64, now: u64, p: &CodelParams) -> bool {
        self.last_sojourn = sojourn;
        if sojourn < p.target || backlog <= CODEL_MTU {
            self.first_above_time = 0;
            return false;
        }
        if self.first_above_time == 0 {
            self.first_above_time = now + p.interval.0;
            return false;
        }
        now >= self.first_above_time
    }
}

/// ECN marks made by CoDel: `ecn` instead of a control-law drop, `ce` for a sojourn above
/// `ce_threshold`.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct CodelMarks {
    pub ecn: u64,
    pub ce: u64,
}

impl CodelMarks {
    pub fn total(&self) -> u64 {
        self.ecn + self.ce
    }
}

/// One CoDel-controlled FIFO: timestamped packets, their byte total and the control state. The
/// `codel` qdisc is one of these; `fq_codel` keeps one per flow bucket.
#[derive(Debug)]
pub struct CodelQueue<P> {
    q: VecDeque<(P, Time)>,
    bytes: u64,
    /// The control state (public for tests and per-flow stats).
    pub vars: CodelState,
}

impl<P> Default for CodelQueue<P> {
    fn default() -> Self {
        CodelQueue {
            q: VecDeque::new(),
            bytes: 0,
            vars: CodelState::default(),
        }
    }
}

impl<P: Packet> CodelQueue<P> {
    /// Append a packet stamped with its arrival time. O(1).
    pub fn push(&mut self, pkt: P, now: Time) {
        self.bytes += pkt.len() as u64;
        self.q.push_back((pkt, now));
    }
    /// Packets queued.
    pub fn len(&self) -> usize {
        self.q.len()
    }
    pub fn is_empty(&self) -> bool {
        self.q.is_empty()
    }
    /// Bytes queued.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }
    /// Heap bytes of the queue's buffer (its capacity, kept after it empties).
    pub fn heap_bytes(&self) -> usize {
        self.q.capacity() * std::mem::size_of::<(P, Time)>()
    }
    /// Remove the head packet without running the control law (overflow victims). O(1).
    pub fn pop_head(&mut self) -> Option<P> {
        let (pk, _) = self.q.pop_front()?;
        self.bytes -= pk.len() as u64;
        Some(pk)
    }
    fn pop(&mut self, now: Time) -> Option<(P, Duration)> {
        let (pk, ts) = self.q.pop_front()?;
        self.bytes -= pk.len() as u64;
        Some((pk, now.saturating_since(ts)))
    }

    /// Run CoDel's dequeue (RFC 8289 §5.5): the packet to send, if any. Dropped packets go to
    /// `drop`; ECN marks are counted in `marks`. O(1) amortised, at most
    /// [`MAX_DROPS_PER_DEQUEUE`] drops per call.
    pub fn dequeue(
        &mut self,
        now: Time,
        p: &CodelParams,
        drop: &mut dyn FnMut(P),
        marks: &mut CodelMarks,
    ) -> Option<P> {
        let now_ns = now.0;
        let Some((mut pkt, mut soj)) = self.pop(now) else {
            self.vars.dropping = false;
            return None;
        };
        let mut drops = 0u32;
        let drop_now = self
            .vars
            .should_drop(soj, self.bytes + pkt.len() as u64, now_ns, p);
        if self.vars.dropping {
            if !drop_now {
                self.vars.dropping = false;
            } else {
                while self.vars.dropping
                    && now_ns >= self.vars.drop_next
                    && drops < MAX_DROPS_PER_DEQUEUE
                {
                    let st = &mut self.vars;
                    st.count = st.count.wrapping_add(1);
                    st.newton_step();
                    if p.ecn && pkt.mark_ce() {
                        marks.ecn += 1;
                        st.drop_next = st.control_law(st.drop_next, p.interval);
                        break;
                    }
                    drop(pkt);
                    drops += 1;
                    match self.pop(now) {
                        Some((n, s)) => {
                            pkt = n;
                            soj = s;
                        }
                        None => {
                            self.vars.dropping = false;
                            return None;
                        }
                    }
                    let backlog = self.bytes + pkt.len() as u64;
                    let st = &mut self.vars;
                    if !st.should_drop(soj, backlog, now_ns, p) {
                        st.dropping = false;
                    } else {
                        st.drop_next = st.control_law(st.drop_next, p.interval);
                    }
                }
            }
        } else if drop_now {
            if p.ecn && pkt.mark_ce() {
                marks.ecn += 1;
            } else {
                drop(pkt);
                match self.pop(now) {
                    Some((n, s)) => {
                        pkt = n;
                        soj = s;
                    }
                    None => return None,
                }
                let backlog = self.bytes + pkt.len() as u64;
                self.vars.should_drop(soj, backlog, now_ns, p);
            }
            let st = &mut self.vars;
            st.dropping = true;
            let delta = st.count.wrapping_sub(st.lastcount);
            if delta > 1 && now_ns.saturating_sub(st.drop_next) < 16 * p.interval.0 {
                st.count = delta;
                st.newton_step();
            } else {
                st.count = 1;
                st.rec_inv_sqrt = u32::MAX;
            }
            st.lastcount = st.count;
            st.drop_next = st.control_law(now_ns, p.interval);
        }
        if let Some(ce) = p.ce_threshold {
            if soj > ce && pkt.mark_ce() {
                marks.ce += 1;
            }
        }
        Some(pkt)
    }
}

/// The CoDel qdisc.
#[derive(Debug)]
pub struct Codel<P> {
    p: CodelParams,
    q: CodelQueue<P>,
    marks: CodelMarks,
    books: Books<P>,
}

impl<P: Packet> Codel<P> {
    pub fn new(params: CodelParams) -> Result<Self, ParamError> {
        params.validate()?;
        Ok(Codel {
            p: params,
            q: CodelQueue::default(),
            marks: CodelMarks::default(),
            books: Books::new(),
        })
    }
    pub fn state(&self) -> &CodelState {
        &self.q.vars
    }
    /// ECN marks: instead of drops, and above `ce_threshold`.
    pub fn marks(&self) -> CodelMarks {
        self.marks
    }
}

impl<P: Packet> Discipline<P> for Codel<P> {
    fn books(&self) -> &Books<P> {
        &self.books
    }
    fn books_mut(&mut self) -> &mut Books<P> {
        &mut self.books
    }
    /// O(1).
    fn enqueue_inner(&mut self, pkt: P, now: Time) -> Result<(), Dropped<P>> {
        if self.q.len() >= self.p.limit as usize {
            return Err(Dropped {
                packet: pkt,
                reason: DropReason::QueueLimit,
            });
        }
        self.q.push(pkt, now);
        Ok(())
    }
    /// O(1) amortised; at most [`MAX_DROPS_PER_DEQUEUE`] drops per call.
    fn dequeue_inner(&mut self, now: Time) -> Dequeued<P> {
        let mut marks = CodelMarks::default();
        let books = &mut self.books;
        let mut on_drop = |pk: P| books.drop(pk, DropReason::Aqm);
        let r = self.q.dequeue(now, &self.p, &mut on_drop, &mut marks);
        self.books.mark(marks.total());
        self.marks.ecn += marks.ecn;
        self.marks.ce += marks.ce;
        match r {
            Some(pk) => Dequeued::Packet(pk),
            None => Dequeued::Empty,
        }
    }
    fn kind_inner(&self) -> &'static str {
        "codel"
    }
    fn extra_stats_inner(&self, f: &mut dyn FnMut(&'static str, f64)) {
        let st = &self.q.vars;
        f("sojourn_us", st.last_sojourn.0 as f64 / 1000.0);
        f("count", st.count as f64);
        f("dropping", if st.dropping { 1.0 } else { 0.0 });
        f("drop_next_us", st.drop_next as f64 / 1000.0);
        f("ecn_marks", self.marks.ecn as f64);
        f("ce_marks", self.marks.ce as f64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn newton_converges_to_inv_sqrt() {
        let mut s = CodelState {
            count: 1,
            rec_inv_sqrt: u32::MAX,
            ..Default::default()
        };
        for c in 2..200u32 {
            // Incremental, one step per count change, as at dequeue.
            s.count = c;
            s.newton_step();
            let exact = 1.0 / (c as f64).sqrt();
            let got = s.rec_inv_sqrt as f64 / 4294967296.0;
            let tol = if c < 8 { 0.3 } else { 0.02 };
            assert!(
                (got - exact).abs() / exact < tol,
                "c={c} got {got} exact {exact}"
            );
        }
    }
}
