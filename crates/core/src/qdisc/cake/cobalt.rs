//! COBALT: CoDel and BLUE run side by side on one flow queue (Høiland-Jørgensen, Täht & Morton,
//! "Piece of CAKE", LANMAN 2018, §III-C; Linux net/sched/sch_cake.c `cobalt_*`).
//!
//! * **CoDel** signals flows that respond to congestion: once a packet's sojourn time has been
//!   above `target` for an `interval`, every packet due by the control law
//!   `drop_next = t + interval / sqrt(count)` is CE-marked when it is ECN-capable, dropped
//!   otherwise. Unlike RFC 8289, `drop_next` is both the first-signal deadline and the signalling
//!   schedule, and `count` *decays* (one step per elapsed schedule) instead of being reset, so a
//!   flow that comes back soon resumes near its old rate. A sojourn must also exceed four MTU
//!   transmission times (`mtu_time`), and in ingress mode twice `mtu_time` per bulk flow, so a slow
//!   link is not signalled for the time one packet takes.
//! * **BLUE** handles flows that do not respond: when the queue overflows (`queue_full`) the drop
//!   probability `p_drop` rises by `p_inc` (1/256) at most once per `target`; when the queue is
//!   found empty (`queue_empty`) it falls by `p_dec` (1/4096). Each dequeued packet is dropped
//!   with probability `p_drop` — never marked: an unresponsive flow ignores marks.
//!
//! Fixed point as the kernel: `rec_inv_sqrt` and `p_drop` are Q0.32; `1/sqrt(count)` comes from a
//! table for `count < 16` and one Newton step (the same as CoDel's, [`super::super::codel`]) above.
//! Times are nanoseconds; "before/after" comparisons are signed differences, as `ktime_t`.
//! O(1) per call, apart from the decay loop of `should_drop`, which runs once per schedule
//! elapsed while the queue was idle and ends when `count` reaches 0.

use std::sync::OnceLock;

use crate::qdisc::codel::{control_law, inv_sqrt_step};
use crate::units::Duration;

/// `1/sqrt(count)` is looked up below this count.
const REC_INV_SQRT_CACHE: usize = 16;

/// The parameters of one tin (`cobalt_params`): derived from the tin's rate, `target` and `rtt`.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct CobaltParams {
    /// CoDel's initial signalling interval.
    pub interval: Duration,
    /// Acceptable standing sojourn time; also BLUE's update period.
    pub target: Duration,
    /// Serialisation time of one MTU at the tin's rate (0 when unlimited).
    pub mtu_time: Duration,
    /// BLUE's increment and decrement of `p_drop`, Q0.32.
    pub p_inc: u32,
    pub p_dec: u32,
}

/// The state of one flow queue (`cobalt_vars`).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct CobaltVars {
    /// CoDel's signalling count.
    pub count: u32,
    /// `1/sqrt(count)`, Q0.32.
    pub rec_inv_sqrt: u32,
    /// When the next signal is due, or (count 0) the activity timeout, ns.
    pub drop_next: u64,
    /// When BLUE last changed `p_drop`, ns.
    pub blue_timer: u64,
    /// BLUE's drop probability, Q0.32.
    pub p_drop: u32,
    pub dropping: bool,
    /// The last packet `should_drop` let through was CE-marked.
    pub ecn_marked: bool,
}

/// What `should_drop` decided for a dequeued packet.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    Deliver,
    /// CoDel's signal, as a CE mark (the packet is delivered).
    Marked,
    Drop,
}

fn rec_inv_sqrt_cache() -> &'static [u32; REC_INV_SQRT_CACHE] {
    static CACHE: OnceLock<[u32; REC_INV_SQRT_CACHE]> = OnceLock::new();
    CACHE.get_or_init(|| {
        // Four Newton steps per count from the previous entry, as `cobalt_cache_init`: close to
        // the exact value where a single step from count 1 to 2 is far off.
        let mut c = [u32::MAX; REC_INV_SQRT_CACHE];
        let mut x = u32::MAX;
        for (count, slot) in c.iter_mut().enumerate().skip(1) {
            for _ in 0..4 {
                x = inv_sqrt_step(count as u32, x);
            }
            *slot = x;
        }
        c[1] = u32::MAX;
        c
    })
}

/// Signed `a - b` of two instants in ns.
fn diff(a: u64, b: u64) -> i64 {
    a.wrapping_sub(b) as i64
}

impl CobaltVars {
    fn invsqrt(&mut self) {
        self.rec_inv_sqrt = match rec_inv_sqrt_cache().get(self.count as usize) {
            Some(&v) => v,
            None => inv_sqrt_step(self.count, self.rec_inv_sqrt),
        };
    }

    /// The queue overflowed and a packet of this flow was dropped (`cobalt_queue_full`).
    /// Returns true when BLUE was quiescent before and active after.
    pub fn queue_full(&mut self, p: &CobaltParams, now: u64) -> bool {
        let mut up = false;
        if diff(now, self.blue_timer) > p.target.0 as i64 {
            up = self.p_drop == 0;
            self.p_drop = self.p_drop.saturating_add(p.p_inc);
            self.blue_timer = now;
        }
        self.dropping = true;
        self.drop_next = now;
        if self.count == 0 {
            self.count = 1;
        }
        up
    }

    /// The queue was served and found empty (`cobalt_queue_empty`). Returns true when BLUE was
    /// active before and quiescent after.
    pub fn queue_empty(&mut self, p: &CobaltParams, now: u64) -> bool {
        let mut down = false;
        if self.p_drop != 0 && diff(now, self.blue_timer) > p.target.0 as i64 {
            self.p_drop = self.p_drop.saturating_sub(p.p_dec);
            self.blue_timer = now;
            down = self.p_drop == 0;
        }
        self.dropping = false;
        if self.count != 0 && diff(now, self.drop_next) >= 0 {
            self.count -= 1;
            self.invsqrt();
            self.drop_next = control_law(self.drop_next, p.interval, self.rec_inv_sqrt);
        }
        down
    }

    /// Decide for a packet just dequeued after `sojourn` in the queue (`cobalt_should_drop`).
    /// `mark` CE-marks the packet if it is ECN-capable and says whether it did; `random` is a
    /// uniform u32 for BLUE. `bulk_flows` is the tin's bulk flow count in ingress mode, else 0.
    pub fn should_drop(
        &mut self,
        p: &CobaltParams,
        now: u64,
        sojourn: u64,
        bulk_flows: u32,
        mark: impl FnOnce() -> bool,
        random: u32,
    ) -> Verdict {
        let mut schedule = diff(now, self.drop_next);
        let mtu = p.mtu_time.0;
        let over_target = sojourn > p.target.0
            && sojourn > mtu.saturating_mul(bulk_flows as u64).saturating_mul(2)
            && sojourn > mtu.saturating_mul(4);
        let mut next_due = self.count != 0 && schedule >= 0;
        self.ecn_marked = false;
        let mut verdict = Verdict::Deliver;
        if over_target {
            if !self.dropping {
                self.dropping = true;
                self.drop_next = control_law(now, p.interval, self.rec_inv_sqrt);
            }
            if self.count == 0 {
                self.count = 1;
            }
        } else if self.dropping {
            self.dropping = false;
        }
        if next_due && self.dropping {
            self.ecn_marked = mark();
            verdict = if self.ecn_marked {
                Verdict::Marked
            } else {
                Verdict::Drop
            };
            self.count = self.count.saturating_add(1);
            self.invsqrt();
            self.drop_next = control_law(self.drop_next, p.interval, self.rec_inv_sqrt);
            schedule = diff(now, self.drop_next);
        } else {
            while next_due {
                self.count -= 1;
                self.invsqrt();
                self.drop_next = control_law(self.drop_next, p.interval, self.rec_inv_sqrt);
                schedule = diff(now, self.drop_next);
                next_due = self.count != 0 && schedule >= 0;
            }
        }
        // BLUE: drop (never mark) with probability p_drop.
        if self.p_drop != 0 && random < self.p_drop {
            verdict = Verdict::Drop;
        }
        // drop_next doubles as an activity timeout while count is 0.
        if self.count == 0 {
            self.drop_next = now + p.interval.0;
        } else if schedule > 0 && verdict != Verdict::Drop {
            self.drop_next = now;
        }
        verdict
    }

    /// Still holding state that must decay before the flow may be forgotten.
    pub fn active(&self, now: u64) -> bool {
        self.p_drop != 0 || self.count != 0 || diff(now, self.drop_next) < 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    fn params() -> CobaltParams {
        CobaltParams {
            interval: Duration::from_millis(100),
            target: Duration::from_millis(5),
            mtu_time: Duration::ZERO,
            p_inc: 1 << 24,
            p_dec: 1 << 20,
        }
    }

    #[test]
    fn cache_is_close_to_the_exact_inverse_square_root() {
        let c = rec_inv_sqrt_cache();
        for (n, &v) in c.iter().enumerate().skip(1) {
            let exact = 1.0 / (n as f64).sqrt();
            let got = v as f64 / 4294967296.0;
            assert!((got - exact).abs() < 0.01, "count {n}: {got} vs {exact}");
        }
    }

    #[test]
    fn codel_signals_after_an_interval_above_target_then_faster() {
        let p = params();
        let mut v = CobaltVars::default();
        let mut t = 0;
        // Sojourn 20 ms, always above target: the first signal comes an interval after the
        // sojourn first exceeded the target, the next ones at interval/sqrt(count).
        let mut signals = Vec::new();
        while t < 400 * MS {
            if v.should_drop(&p, t, 20 * MS, 0, || false, u32::MAX) == Verdict::Drop {
                signals.push(t / MS);
            }
            t += MS;
        }
        // As the kernel's: the fresh state's rec_inv_sqrt is 0, so the first schedule is due at
        // once and the second packet above target is signalled; then interval/sqrt(count).
        assert_eq!(signals[0], 1, "{signals:?}");
        let gaps: Vec<u64> = signals.windows(2).map(|w| w[1] - w[0]).collect();
        assert!(gaps[0] <= 71 && gaps[0] >= 70, "{gaps:?}");
        assert!(gaps[1] <= 58 && gaps[1] >= 57, "{gaps:?}");
        assert!(gaps.windows(2).all(|w| w[1] <= w[0]), "{gaps:?}");
    }

    #[test]
    fn ect_packets_are_marked_not_dropped() {
        let p = params();
        let mut v = CobaltVars::default();
        let mut marks = 0;
        for t in 0..300 {
            match v.should_drop(&p, t * MS, 20 * MS, 0, || true, u32::MAX) {
                Verdict::Marked => marks += 1,
                Verdict::Drop => panic!("dropped an ECT packet at {t} ms"),
                Verdict::Deliver => {}
            }
        }
        assert!(marks >= 3, "{marks}");
    }

    #[test]
    fn blue_rises_on_overflow_and_decays_when_empty() {
        let p = params();
        let mut v = CobaltVars::default();
        assert!(v.queue_full(&p, 10 * MS));
        assert_eq!(v.p_drop, 1 << 24);
        // Within one target no second increment.
        assert!(!v.queue_full(&p, 12 * MS));
        assert_eq!(v.p_drop, 1 << 24);
        v.queue_full(&p, 20 * MS);
        assert_eq!(v.p_drop, 2 << 24);
        // A packet with a random draw below p_drop is dropped even at no sojourn.
        assert_eq!(v.should_drop(&p, 21 * MS, 0, 0, || true, 1), Verdict::Drop);
        let mut t = 30 * MS;
        let mut steps = 0;
        while v.p_drop != 0 {
            v.queue_empty(&p, t);
            t += 6 * MS;
            steps += 1;
        }
        // 2/256 in steps of 1/4096: 32 decrements.
        assert_eq!(steps, 32);
        assert!(!v.dropping);
    }

    #[test]
    fn count_decays_while_the_queue_is_idle() {
        let p = params();
        let mut v = CobaltVars::default();
        for t in 0..300 {
            let _ = v.should_drop(&p, t * MS, 20 * MS, 0, || false, u32::MAX);
        }
        let high = v.count;
        assert!(high > 2);
        // Much later, below target: the count unwinds one schedule at a time, down to 0.
        let _ = v.should_drop(&p, 10_000 * MS, 0, 0, || false, u32::MAX);
        assert_eq!(v.count, 0);
        assert!(v.active(10_000 * MS));
        assert!(!v.active(10_200 * MS));
    }
}
