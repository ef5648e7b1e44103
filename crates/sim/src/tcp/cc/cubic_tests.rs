//! Unit tests of [`Cubic`] on hand-built ACK sequences; every expected number is derived in the
//! comments from tcp_cubic.c's integer formulas.

use super::*;
use crate::tcp::cc::reno::tests::{conn, window};

const MS: u64 = 1_000_000;
const S: u64 = 1_000_000_000;

/// Deliver ACKs of one segment, `cwnd` of them per `rtt`, evenly spread, from `start` until
/// `until`, as a window-limited sender would: `pkts_acked` then `cong_avoid`. Returns the time
/// reached.
fn run(cc: &mut Cubic, w: &mut Window, start: u64, rtt: u64, until: u64) -> u64 {
    let mut now = start;
    let mut steps = 0;
    while now < until {
        let per_round = w.cwnd.max(1) as u64;
        for _ in 0..per_round {
            let mut c = conn(now);
            c.srtt = rtt;
            let s = AckSample {
                pkts_acked: 1,
                rtt: Some(rtt),
                in_flight: w.cwnd,
            };
            cc.pkts_acked(&s, w, &c);
            cc.cong_avoid(w, &c, 1);
            now += rtt / per_round;
        }
        steps += 1;
        assert!(steps < 1_000_000, "bounded loop");
    }
    now
}

/// A loss at 100 segments with a 100 ms delay_min already measured: ssthresh 70, W_max 100.
fn after_loss_at_100(rtt: u64) -> (Cubic, Window) {
    let mut cc = Cubic::new();
    cc.hystart = false;
    let mut w = window(100, 100);
    let c = conn(S);
    cc.pkts_acked(
        &AckSample {
            pkts_acked: 1,
            rtt: Some(rtt),
            in_flight: 100,
        },
        &w,
        &c,
    );
    let ss = cc.ssthresh(&w, &c);
    // 100 · 717 / 1024 = 70.02 → 70; W_max = 100 (no earlier W_max: no fast convergence).
    assert_eq!((ss, cc.w_max()), (70, 100));
    w.ssthresh = ss;
    w.cwnd = ss;
    (cc, w)
}

#[test]
fn integer_cube_root_is_exact() {
    assert_eq!(cbrt_floor(0), 0);
    assert_eq!(cbrt_floor(26), 2);
    assert_eq!(cbrt_floor(27), 3);
    assert_eq!(cbrt_floor(u64::MAX), 2_642_245);
    // The kernel's constants: cube_factor = 2^40 / 410, beta_scale = 8·1741/3/307 = 15.
    assert_eq!(CUBE_FACTOR, 2_681_735_677);
    assert_eq!(FRIENDLY_SCALE, 15);
}

#[test]
fn window_follows_the_cubic_curve_after_a_reduction() {
    // W(t) = C (t − K)³ + W_max with C = 410/1024 = 0.4004, W_max = 100, cwnd 70 after the loss:
    // K = ∛(2^40/410 · 30) = ∛80 452 070 310 = 4316 (1/1024 s) = 4.2148 s.
    // bictcp_update aims at W one delay_min ahead (t + 0.1 s here) and cwnd reaches each target
    // within the RTT, so cwnd(t) ≈ W(t + 0.1 s):
    // W(1.1) = 100 − 0.4004·3.1148³ = 87.90; W(2.1) = 100 − 0.4004·2.1148³ = 96.21;
    // W(3.1) = 100 − 0.4004·1.1148³ = 99.45; W(4.3) = 100.00 (plateau);
    // W(7.1) = 100 + 0.4004·2.8852³ = 109.62. Integer segments: within one segment.
    // The Reno-friendly estimate, 70 + 0.53/RTT, stays below (86.0 at 3 s, 107.6 at 7 s), so
    // this is the cubic curve alone.
    let rtt = 100 * MS;
    let (mut cc, mut w) = after_loss_at_100(rtt);
    let t0 = 10 * S;
    let mut now = run(&mut cc, &mut w, t0, rtt, t0 + 1);
    assert_eq!(cc.k(), 4316);
    for (t, expect) in [
        (1.0, 87.90),
        (2.0, 96.21),
        (3.0, 99.45),
        (4.2, 100.0),
        (7.0, 109.62),
    ] {
        now = run(&mut cc, &mut w, now, rtt, t0 + (t * S as f64) as u64);
        let got = w.cwnd as f64;
        assert!(
            (got - expect).abs() <= 1.0,
            "t = {t} s: cwnd {got}, W(t + 0.1 s) = {expect}"
        );
    }
}

#[test]
fn fast_convergence_lowers_w_max_below_a_repeated_loss() {
    let mut cc = Cubic::new();
    let c = conn(S);
    assert_eq!(cc.ssthresh(&window(100, 10), &c), 70);
    // Loss at 90 < W_max 100: W_max = 90 · (1024 + 717) / 2048 = 76.5 → 76;
    // ssthresh = 90 · 717 / 1024 = 63.02 → 63.
    assert_eq!(cc.ssthresh(&window(90, 10), &c), 63);
    assert_eq!(cc.w_max(), 76);
    // Without fast convergence W_max is the window at the loss.
    let mut plain = Cubic::new();
    plain.fast_convergence = false;
    plain.ssthresh(&window(100, 10), &c);
    plain.ssthresh(&window(90, 10), &c);
    assert_eq!(plain.w_max(), 90);
    // The floor of 2 segments: 2 · 717 / 1024 = 1 → 2.
    assert_eq!(cc.ssthresh(&window(2, 10), &c), 2);
}

#[test]
fn reno_friendly_region_rules_at_short_rtt() {
    // 1 ms RTT, loss at 100 → 70. In 100 ms CUBIC alone reaches only W(0.101 s) =
    // 100 − 0.4004·(4.2148 − 0.101)³ = 72.1. The Reno-friendly estimate adds one segment per
    // cwnd·15/8 ACKs, i.e. 8/15 segment per RTT: 70 + 100 · 8/15 = 123.3 after 100 RTTs, and
    // cnt = cwnd / (tcp_cwnd − cwnd) makes cwnd follow it (within 3 segments of lag).
    let rtt = MS;
    let (mut cc, mut w) = after_loss_at_100(rtt);
    let t0 = 10 * S;
    run(&mut cc, &mut w, t0, rtt, t0 + 100 * MS);
    assert!((120..=124).contains(&w.cwnd), "cwnd {}", w.cwnd);

    let (mut cc, mut w) = after_loss_at_100(rtt);
    cc.tcp_friendliness = false;
    run(&mut cc, &mut w, t0, rtt, t0 + 100 * MS);
    assert!((70..=73).contains(&w.cwnd), "cwnd {}", w.cwnd);
}

/// One ACK of one segment at `now` with an RTT sample, `snd_una` advanced to `una` segments,
/// `snd_nxt` at `nxt` segments, processed as the sender would.
fn ack(cc: &mut Cubic, w: &mut Window, now: u64, rtt: u64, una: u64, nxt: u64) {
    let mut c = conn(now);
    c.srtt = 10 * MS;
    c.snd_una = una * c.mss as u64;
    c.snd_nxt = nxt * c.mss as u64;
    let s = AckSample {
        pkts_acked: 1,
        rtt: Some(rtt),
        in_flight: w.cwnd,
    };
    cc.pkts_acked(&s, w, &c);
    cc.cong_avoid(w, &c, 1);
}

#[test]
fn hystart_leaves_slow_start_on_a_delay_rise() {
    // Round 1: 9 ACKs 3 ms apart (no ACK train: spacing > 2 ms), RTT 10 ms: delay_min 10 ms.
    // Round 2 (snd_una passes round 1's snd_nxt): RTT 15 ms. The threshold is delay_min +
    // clamp(10 ms / 8, 4 ms, 16 ms) = 14 ms; after 8 samples (sample_cnt) the 9th sample finds
    // curr_rtt 15 ms > 14 ms. cwnd then: 20 + 9 + 8 = 37 → ssthresh 37, slow start ends.
    for (rtt2, exits) in [(15 * MS, true), (13_900_000, false)] {
        let mut cc = Cubic::new();
        let mut w = window(20, u32::MAX);
        let mut now = S;
        for i in 0..9 {
            ack(&mut cc, &mut w, now, 10 * MS, i + 1, 100);
            now += 3 * MS;
        }
        assert_eq!((w.cwnd, w.ssthresh), (29, u32::MAX));
        for i in 0..9 {
            ack(&mut cc, &mut w, now, rtt2, 101 + i, 200);
            now += 3 * MS;
            if i < 8 {
                assert_eq!(w.ssthresh, u32::MAX, "ACK {i} of round 2");
            }
        }
        if exits {
            assert_eq!((w.cwnd, w.ssthresh), (37, 37));
        } else {
            assert_eq!((w.cwnd, w.ssthresh), (38, u32::MAX));
        }
    }
}

#[test]
fn hystart_leaves_slow_start_on_an_ack_train() {
    // delay_min 10 ms; sk_pacing_rate = 200 % · 20 · 1448 B / 10 ms = 5.79 MB/s, so the cushion
    // 65536·4 / 5.79 MB/s = 45 ms is capped at 1 ms; unpaced: threshold (10 + 1) ms / 2 = 5.5 ms.
    // ACKs 1 ms apart from the round's start: the one at +6 ms (6 ms > 5.5 ms) ends slow start
    // with cwnd 20 + 6 = 26. ACKs 2.5 ms apart are no train (> 2 ms): no exit in 7 ACKs.
    for (gap, exits) in [(MS, true), (2_500_000, false)] {
        let mut cc = Cubic::new();
        let mut w = window(20, u32::MAX);
        for k in 0..7 {
            ack(&mut cc, &mut w, S + k * gap, 10 * MS, k + 1, 100);
            if k < 6 {
                assert_eq!(w.ssthresh, u32::MAX, "ACK at +{k}");
            }
        }
        if exits {
            assert_eq!((w.cwnd, w.ssthresh), (26, 26));
        } else {
            assert_eq!((w.cwnd, w.ssthresh), (27, u32::MAX));
        }
    }
}

#[test]
fn hystart_waits_for_sixteen_segments() {
    // Same train as above at cwnd 8: 7 ACKs take cwnd to 15 < hystart_low_window, no exit.
    let mut cc = Cubic::new();
    let mut w = window(8, u32::MAX);
    for k in 0..7 {
        ack(&mut cc, &mut w, S + k * MS, 10 * MS, k + 1, 100);
    }
    assert_eq!((w.cwnd, w.ssthresh), (15, u32::MAX));
}

#[test]
fn idle_time_shifts_the_epoch() {
    // The epoch starts at the first CA ACK at 10 s (jiffy 10 000). The sender was idle from
    // 12 s (last transmission) to 13 s: the epoch moves by 1000 jiffies to 11 000, so the curve
    // continues where it stopped. An idle from 0 s would move it past now: capped at now.
    let (mut cc, mut w) = after_loss_at_100(100 * MS);
    let c = conn(10 * S);
    cc.cong_avoid(&mut w, &c, 1);
    assert_eq!(cc.epoch_start, Some(10_000));
    let mut c = conn(13 * S);
    c.last_send = 12 * S;
    cc.cwnd_event(CwndEvent::TxStart, &c);
    assert_eq!(cc.epoch_start, Some(11_000));
    c.last_send = 0;
    cc.cwnd_event(CwndEvent::TxStart, &c);
    assert_eq!(cc.epoch_start, Some(13_000));
    // Growth after the idle equals growth of a run that never paused: both at 1 s of epoch.
    let (mut a, mut wa) = after_loss_at_100(100 * MS);
    let (mut b, mut wb) = after_loss_at_100(100 * MS);
    run(&mut a, &mut wa, 10 * S, 100 * MS, 11 * S);
    let end = run(&mut b, &mut wb, 10 * S, 100 * MS, 10 * S + 500 * MS);
    let mut c = conn(20 * S);
    c.last_send = end;
    b.cwnd_event(CwndEvent::TxStart, &c);
    run(&mut b, &mut wb, 20 * S, 100 * MS, 20 * S + (11 * S - end));
    assert!(wa.cwnd.abs_diff(wb.cwnd) <= 1, "{} vs {}", wa.cwnd, wb.cwnd);
}

#[test]
fn rto_resets_everything() {
    let (mut cc, mut w) = after_loss_at_100(100 * MS);
    cc.cong_avoid(&mut w, &conn(10 * S), 1);
    cc.set_state(CaState::Loss, &conn(11 * S));
    assert_eq!((cc.w_max(), cc.epoch_start, cc.delay_min), (0, None, 0));
    assert!(!cc.hystart || !cc.found);
}
