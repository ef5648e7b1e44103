//! Unit tests of [`Bbr`] on synthetic rate samples (tcp_rate.c's `struct rate_sample`); the
//! expected numbers are derived in the comments with the kernel's fixed-point formulas
//! (bw in packets/µs << 24, gains in 1/256, pacing 1 % below).

use super::*;

const MS: u64 = 1_000_000;
const MSS: u32 = 1000;
/// 100 packets per 10 ms = 0.01 packet/µs: 0.01 · 2^24 = 167 772.16 → 167 772.
const BW100: u64 = 167_772;

/// A connection seen from the controller: each `step` is one ACK.
struct Path {
    now: u64,
    delivered: u64,
    lost: u64,
    w: Window,
}

struct Ack {
    dt: u64,
    acked: u32,
    rtt: u64,
    in_flight: u32,
    losses: u32,
    state: CaState,
    /// The newest acked packet was sent after the last round began.
    new_round: bool,
}

impl Ack {
    fn new(dt: u64, acked: u32, in_flight: u32) -> Self {
        Ack {
            dt,
            acked,
            rtt: 10 * MS,
            in_flight,
            losses: 0,
            state: CaState::Open,
            new_round: true,
        }
    }
}

impl Path {
    fn new() -> Self {
        Path {
            now: 0,
            delivered: 0,
            lost: 0,
            w: Window {
                cwnd: 10,
                cwnd_cnt: 0,
                ssthresh: u32::MAX,
                cwnd_clamp: u32::MAX,
            },
        }
    }

    fn conn(&self, a: &Ack) -> ConnInfo {
        ConnInfo {
            now: self.now,
            mss: MSS,
            in_flight: a.in_flight,
            srtt: a.rtt,
            min_rtt: 0,
            delivered: self.delivered,
            ca_state: a.state,
            lost: self.lost,
            ..Default::default()
        }
    }

    fn step(&mut self, b: &mut Bbr, a: Ack) -> Control {
        let prior_delivered = if a.new_round { self.delivered } else { 0 };
        self.now += a.dt;
        self.delivered += a.acked as u64;
        self.lost += a.losses as u64;
        let rs = RateSample {
            prior_delivered,
            delivered: a.acked as i64,
            interval: Some(a.dt),
            rtt: Some(a.rtt),
            losses: a.losses,
            acked_sacked: a.acked,
            prior_in_flight: a.in_flight,
            is_app_limited: false,
            is_retrans: false,
        };
        let c = self.conn(&a);
        let ctl = b.cong_control(&self.w, &c, &rs).expect("BBR controls");
        self.w.cwnd = ctl.cwnd;
        ctl
    }
}

/// STARTUP with per-round bandwidths 10, 20, 40, 80, 100, 100, 100, 100 packets / 10 ms, then a
/// drained ACK: ends in PROBE_BW. Returns the modes after each round.
fn to_probe_bw(b: &mut Bbr, p: &mut Path) -> Vec<Mode> {
    let mut modes = Vec::new();
    for n in [10, 20, 40, 80, 100, 100, 100, 100] {
        p.step(b, Ack::new(10 * MS, n, 300));
        modes.push(b.mode());
    }
    p.step(b, Ack::new(10 * MS, 100, 50));
    modes.push(b.mode());
    modes
}

#[test]
fn startup_drains_once_bandwidth_plateaus() {
    // Rounds 1–5 each bring ≥ 25 % more (100 ≥ 1.25 · 80 exactly: 134 217 · 320/256 = 167 771
    // ≤ 167 772), so full_bw follows; rounds 6, 7, 8 bring nothing: full_bw_cnt 1, 2, 3 → the
    // pipe is full at round 8 and DRAIN begins. In flight 300 > inflight(bw, 1) = BDP 100 +
    // 3 TSO goals (≈ 182), so DRAIN stays until an ACK shows 50 in flight.
    let mut b = Bbr::new(10, MSS, 1);
    let mut p = Path::new();
    let modes = to_probe_bw(&mut b, &mut p);
    use Mode::*;
    assert_eq!(
        modes,
        [Startup, Startup, Startup, Startup, Startup, Startup, Startup, Drain, ProbeBw]
    );
    assert_eq!(b.max_bw(), BW100);
    assert_eq!(b.min_rtt_us(), 10_000);
}

#[test]
fn startup_and_drain_gains_and_initial_pacing() {
    // high_gain = 256 · 2885/1000 + 1 = 739, drain_gain = 256 · 1000/2885 = 88.
    assert_eq!((HIGH_GAIN, DRAIN_GAIN), (739, 88));
    // Before any RTT: 10 segments per 1 ms = 0.01 packet/µs → 167 772 (<<24), × 739/256,
    // × 1000 B × 0.99 = 28 578 488 B/s.
    let b = Bbr::new(10, MSS, 1);
    assert_eq!(b.pacing_rate(), Some(28_578_488));
    // In STARTUP the window grows by the acked packets while below target (slow start).
    let mut b = Bbr::new(10, MSS, 1);
    let mut p = Path::new();
    p.step(&mut b, Ack::new(10 * MS, 10, 10));
    assert_eq!((b.pacing_gain(), p.w.cwnd), (739, 20));
    for n in [20, 40, 80, 100, 100, 100, 100] {
        p.step(&mut b, Ack::new(10 * MS, n, 300));
    }
    assert_eq!((b.mode(), b.pacing_gain()), (Mode::Drain, 88));
    // DRAIN's pacing: 167 772 × 88/256 × 1000 × 0.99 = 3 403 121 B/s (allowed to fall: full).
    assert_eq!(b.pacing_rate(), Some(3_403_121));
}

#[test]
fn probe_bw_cycles_gains_from_a_random_phase() {
    // Each ACK comes 11 ms after the last (> min_rtt 10 ms: a full-length phase) with 250 in
    // flight (≥ inflight(bw, 5/4) ≈ 125 + quanta, so the 5/4 phase may end): one phase per ACK.
    // The pacing rate is gain × bw × 0.99 × 1000 B: 12 374 988 (5/4), 7 424 992 (3/4),
    // 9 899 990 (1) B/s for bw = 167 772.
    let rate = |g: u32| match g {
        320 => 12_374_988,
        192 => 7_424_992,
        256 => 9_899_990,
        _ => unreachable!("gain {g}"),
    };
    let mut starts = std::collections::BTreeSet::new();
    for seed in 0..40 {
        let mut b = Bbr::new(10, MSS, seed);
        let mut p = Path::new();
        to_probe_bw(&mut b, &mut p);
        let start = b.cycle_idx();
        // CYCLE_LEN − 1 − rand(7) then one advance: never the 3/4 phase.
        assert_ne!(start, 1, "seed {seed}");
        starts.insert(start);
        for k in 1..=16 {
            let ctl = p.step(&mut b, Ack::new(11 * MS, 110, 250));
            let idx = (start + k) % 8;
            assert_eq!(b.cycle_idx(), idx);
            assert_eq!(b.pacing_gain(), PACING_GAIN[idx]);
            assert_eq!(ctl.pacing_rate, Some(rate(PACING_GAIN[idx])), "phase {idx}");
        }
    }
    assert_eq!(starts.len(), 7, "start phases {starts:?}");
}

#[test]
fn probe_rtt_after_ten_seconds_for_200_ms_and_a_round() {
    // The only min_rtt sample (10 ms) was taken at jiffy 10 (first ACK); later samples are 12 ms,
    // never lower. The filter expires at jiffy > 10 + 10 000: ACKs come at 90 + 11·k ms, the
    // first after 10 010 ms is k = 902, at 10 012 ms.
    // The window in PROBE_BW: 2 · BDP 100 + extra_acked 110 (each 110-packet ACK counts as ACK
    // aggregation: the epoch resets and all 110 are "extra") + 3 TSO goals of 9 segments
    // (9 899 990 B/s >> 10 = 9667 B) = 337 → even: 338.
    let mut b = Bbr::new(10, MSS, 3);
    let mut p = Path::new();
    to_probe_bw(&mut b, &mut p);
    let mut steps = 0;
    while b.mode() != Mode::ProbeRtt {
        let mut a = Ack::new(11 * MS, 110, 200);
        a.rtt = 12 * MS;
        p.step(&mut b, a);
        steps += 1;
        assert!(steps < 2000, "bounded");
        if b.mode() != Mode::ProbeRtt {
            assert!(p.now / MS <= 10_010, "late at {} ms", p.now / MS);
            assert!(!b.take_app_limited_mark());
        }
    }
    assert_eq!(p.now, 10_012 * MS);
    assert_eq!(b.prior_cwnd, 338);
    // PROBE_RTT: cwnd 4, the connection marked app-limited; the expired filter took 12 ms.
    assert_eq!((p.w.cwnd, b.min_rtt_us()), (4, 12_000));
    assert!(b.take_app_limited_mark());
    // In flight falls to 4 at +5 ms: 200 ms start now (done at jiffy j + 200), and a round.
    p.step(&mut b, Ack::new(5 * MS, 4, 4));
    let done = p.now / MS + 200;
    // A round passes at +100 ms, then ACKs up to jiffy `done` keep PROBE_RTT.
    p.step(&mut b, Ack::new(100 * MS, 4, 4));
    p.step(&mut b, Ack::new(done * MS - p.now, 4, 4));
    assert_eq!((b.mode(), p.w.cwnd), (Mode::ProbeRtt, 4));
    // One jiffy later: back to PROBE_BW, the saved 338 restored (min(338 + 4, target 338) in a
    // gain-1 phase, or 340 in the probing phase, where the target has +2).
    p.step(&mut b, Ack::new(MS, 4, 4));
    assert_eq!(b.mode(), Mode::ProbeBw);
    let expect = if b.cycle_idx() == 0 { 340 } else { 338 };
    assert_eq!(p.w.cwnd, expect);
    assert_eq!(b.min_rtt_stamp, done + 1);
}

#[test]
fn recovery_conserves_packets_then_restores_the_window() {
    let mut b = Bbr::new(10, MSS, 5);
    let mut p = Path::new();
    to_probe_bw(&mut b, &mut p);
    for _ in 0..8 {
        p.step(&mut b, Ack::new(11 * MS, 110, 200));
    }
    // At the target: 2 · 100 + 110 extra_acked + 27 quanta → 338 (phase 5 for this seed, no +2).
    assert_eq!((p.w.cwnd, b.cycle_idx()), (338, 5));
    let rate_before = b.pacing_rate();
    // Entering recovery: the sender asks ssthresh (BBR saves cwnd, keeps ssthresh), then the
    // first ACK in Recovery: cwnd = in_flight + acked = 150 + 2 (packet conservation); losses
    // only subtract from the old window first.
    let c = p.conn(&Ack::new(0, 0, 150));
    assert_eq!(b.ssthresh(&p.w, &c), u32::MAX);
    let mut a = Ack::new(MS, 2, 150);
    a.losses = 3;
    a.state = CaState::Recovery;
    a.new_round = false;
    p.step(&mut b, a);
    assert_eq!(p.w.cwnd, 152);
    // Same round, 1 acked, 148 in flight: max(152, 148 + 1) = 152.
    let mut a = Ack::new(MS, 1, 148);
    a.state = CaState::Recovery;
    a.new_round = false;
    p.step(&mut b, a);
    assert_eq!(p.w.cwnd, 152);
    // The pacing rate does not drop on loss.
    assert_eq!(b.pacing_rate(), rate_before);
    // Recovery ends: max(152, saved 338) = 338, then min(338 + 5, target 338) = 338.
    let mut a = Ack::new(MS, 5, 150);
    a.new_round = false;
    p.step(&mut b, a);
    assert_eq!(p.w.cwnd, 338);
}

#[test]
fn long_term_bandwidth_takes_over_under_a_policer() {
    // A policer passes 1 packet/ms and drops 3 of every 14: each ACK (one round, 11 ms) delivers
    // 11 and reports 3 lost (3·256 ≥ 50·11: lossy). Sampling starts at the first loss (A0,
    // lt_rtt_cnt 1); at A3 (4 rounds) lost 9 / delivered 33 over 33 ms → lt_bw = 33·2^24/33 000
    // = 16 777; A4..A7 give 44 / 44 ms → 16 777 again: consistent → lt_bw in use, pacing gain 1:
    // 16 777 × 1000 B × 0.99 = 989 987 B/s. It is used for 48 rounds (A8..A55).
    let mut b = Bbr::new(10, MSS, 7);
    let mut p = Path::new();
    to_probe_bw(&mut b, &mut p);
    let policed = |p: &mut Path, b: &mut Bbr| {
        let mut a = Ack::new(11 * MS, 11, 100);
        a.losses = 3;
        p.step(b, a)
    };
    for k in 0..7 {
        policed(&mut p, &mut b);
        assert!(!b.lt_use_bw(), "A{k}");
    }
    let ctl = policed(&mut p, &mut b);
    assert!(b.lt_use_bw());
    assert_eq!((b.lt_bw(), b.pacing_gain()), (16_777, 256));
    assert_eq!(ctl.pacing_rate, Some(989_987));
    for k in 8..55 {
        policed(&mut p, &mut b);
        assert!(b.lt_use_bw(), "A{k}");
    }
    policed(&mut p, &mut b);
    assert!(!b.lt_use_bw(), "A55 ends the policed period");
}

#[test]
fn undo_resets_full_pipe_and_policer_detection() {
    let mut b = Bbr::new(10, MSS, 9);
    let mut p = Path::new();
    to_probe_bw(&mut b, &mut p);
    assert!(b.full_bw > 0);
    assert_eq!(b.undo_cwnd(&p.w, 1000), p.w.cwnd);
    assert_eq!((b.full_bw, b.full_bw_cnt, b.lt_use_bw()), (0, 0, false));
}
