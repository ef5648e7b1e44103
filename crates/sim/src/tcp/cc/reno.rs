//! Reno congestion avoidance as Linux's `tcp_reno` (net/ipv4/tcp_cong.c), the fallback every
//! Linux controller builds on.
//!
//! Promise: slow start doubles the window every round trip while `cwnd < ssthresh`, then
//! congestion avoidance adds one segment per window of acknowledged segments (AIMD, RFC 5681);
//! a loss halves the window. Growth happens only while the sender is window-limited
//! (`tcp_is_cwnd_limited`), so an application-limited sender does not inflate a window it does
//! not use (RFC 7661's spirit).
//!
//! State: none beyond the sender's [`Window`] (`snd_cwnd`, `snd_cwnd_cnt`, `snd_ssthresh`).
//!
//! Hooks, as in tcp_cong.c:
//! - `ssthresh` = `tcp_reno_ssthresh`: `max(cwnd / 2, 2)`.
//! - `cong_avoid` = `tcp_reno_cong_avoid`: [`slow_start`] (`tcp_slow_start`, appropriate byte
//!   counting without RFC 3465's L limit — Linux removed `tcp_abc` in 3.8 and adds every acked
//!   segment, capped at `ssthresh`), then the leftover through [`cong_avoid_ai`]
//!   (`tcp_cong_avoid_ai` with `w = cwnd`).
//! - `undo_cwnd` = `tcp_reno_undo_cwnd`: `max(cwnd, prior_cwnd)` (the trait's default).
//!
//! Not modelled: nothing of tcp_cong.c's Reno is left out; the NewReno part (partial ACKs in
//! recovery) belongs to the sender's loss recovery, not to the controller.

use super::{CongestionControl, ConnInfo, Window};

/// Linux's `tcp_slow_start`: grow `cwnd` by `acked` segments but not past `ssthresh` (nor the
/// clamp); return the acked segments left over for congestion avoidance.
pub fn slow_start(w: &mut Window, acked: u32) -> u32 {
    let cwnd = w.cwnd.saturating_add(acked).min(w.ssthresh);
    let left = acked.saturating_sub(cwnd.saturating_sub(w.cwnd));
    w.cwnd = cwnd.min(w.cwnd_clamp);
    left
}

/// Linux's `tcp_cong_avoid_ai`: one segment more per `wnd` acked segments, with the credit kept
/// in `cwnd_cnt`. `wnd` is `cwnd` for Reno and CUBIC's `cnt` for CUBIC.
pub fn cong_avoid_ai(w: &mut Window, wnd: u32, acked: u32) {
    let wnd = wnd.max(1);
    // Credits accumulated at a larger `wnd` are applied gently: one segment, then start over.
    if w.cwnd_cnt >= wnd {
        w.cwnd_cnt = 0;
        w.cwnd += 1;
    }
    w.cwnd_cnt += acked;
    if w.cwnd_cnt >= wnd {
        let delta = w.cwnd_cnt / wnd;
        w.cwnd_cnt -= delta * wnd;
        w.cwnd += delta;
    }
    w.cwnd = w.cwnd.min(w.cwnd_clamp);
}

/// `tcp_in_slow_start`.
pub fn in_slow_start(w: &Window) -> bool {
    w.cwnd < w.ssthresh
}

/// Linux's `tcp_reno`.
#[derive(Debug, Default, Clone)]
pub struct Reno;

impl Reno {
    pub fn new() -> Self {
        Reno
    }
}

impl CongestionControl for Reno {
    fn name(&self) -> &'static str {
        "reno"
    }

    fn ssthresh(&mut self, w: &Window, _c: &ConnInfo) -> u32 {
        (w.cwnd >> 1).max(2)
    }

    fn cong_avoid(&mut self, w: &mut Window, c: &ConnInfo, acked: u32) {
        if !c.cwnd_limited {
            return;
        }
        let mut acked = acked;
        if in_slow_start(w) {
            acked = slow_start(w, acked);
            if acked == 0 {
                return;
            }
        }
        let cwnd = w.cwnd;
        cong_avoid_ai(w, cwnd, acked);
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn conn(now: u64) -> ConnInfo {
        ConnInfo {
            now,
            mss: 1448,
            cwnd_limited: true,
            ..Default::default()
        }
    }

    pub(crate) fn window(cwnd: u32, ssthresh: u32) -> Window {
        Window {
            cwnd,
            cwnd_cnt: 0,
            ssthresh,
            cwnd_clamp: u32::MAX,
        }
    }

    #[test]
    fn loss_halves_with_a_floor_of_two() {
        let mut r = Reno::new();
        let c = conn(0);
        assert_eq!(r.ssthresh(&window(41, u32::MAX), &c), 20);
        assert_eq!(r.ssthresh(&window(3, u32::MAX), &c), 2);
        assert_eq!(r.ssthresh(&window(1, u32::MAX), &c), 2);
    }

    #[test]
    fn slow_start_counts_every_acked_segment_up_to_ssthresh() {
        let mut r = Reno::new();
        let c = conn(0);
        // 10 segments, ssthresh 16: an ACK for 4 gives 14; the next for 4 stops at 16 and the
        // 2 left over go to congestion avoidance (cwnd_cnt = 2, w = 16: no increment yet).
        let mut w = window(10, 16);
        r.cong_avoid(&mut w, &c, 4);
        assert_eq!((w.cwnd, w.cwnd_cnt), (14, 0));
        r.cong_avoid(&mut w, &c, 4);
        assert_eq!((w.cwnd, w.cwnd_cnt), (16, 2));
    }

    #[test]
    fn congestion_avoidance_adds_one_segment_per_window() {
        let mut r = Reno::new();
        let c = conn(0);
        // cwnd 20 in CA: 20 single-segment ACKs make 21, the next 21 make 22.
        let mut w = window(20, 10);
        for _ in 0..19 {
            r.cong_avoid(&mut w, &c, 1);
        }
        assert_eq!(w.cwnd, 20);
        r.cong_avoid(&mut w, &c, 1);
        assert_eq!((w.cwnd, w.cwnd_cnt), (21, 0));
        for _ in 0..21 {
            r.cong_avoid(&mut w, &c, 1);
        }
        assert_eq!((w.cwnd, w.cwnd_cnt), (22, 0));
        // A stretch ACK of 50 at cwnd 22: delta = 50 / 22 = 2, 6 left in cwnd_cnt.
        r.cong_avoid(&mut w, &c, 50);
        assert_eq!((w.cwnd, w.cwnd_cnt), (24, 6));
    }

    #[test]
    fn aimd_sawtooth_halves_then_grows_linearly() {
        let mut r = Reno::new();
        let c = conn(0);
        let mut w = window(40, u32::MAX);
        w.ssthresh = r.ssthresh(&w, &c);
        w.cwnd = w.ssthresh;
        assert_eq!(w.cwnd, 20);
        // Five rounds of a full window of ACKs: 20 → 21 → 22 → 23 → 24 → 25.
        for _ in 0..5 {
            let round = w.cwnd;
            for _ in 0..round {
                r.cong_avoid(&mut w, &c, 1);
            }
        }
        assert_eq!(w.cwnd, 25);
    }

    #[test]
    fn no_growth_when_not_window_limited_and_clamp_holds() {
        let mut r = Reno::new();
        let mut c = conn(0);
        c.cwnd_limited = false;
        let mut w = window(10, u32::MAX);
        r.cong_avoid(&mut w, &c, 10);
        assert_eq!(w.cwnd, 10);
        c.cwnd_limited = true;
        w.cwnd_clamp = 15;
        r.cong_avoid(&mut w, &c, 10);
        assert_eq!(w.cwnd, 15);
    }

    #[test]
    fn undo_restores_the_larger_window() {
        let mut r = Reno::new();
        assert_eq!(r.undo_cwnd(&window(10, 10), 24), 24);
        assert_eq!(r.undo_cwnd(&window(30, 10), 24), 30);
    }
}
