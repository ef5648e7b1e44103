//! Sender behaviour on hand-built ACK sequences: each test plays the receiver by hand (cumulative
//! ACK, SACK blocks, timestamps) and checks what Linux's sender would do.

use super::cc::{reno::Reno, CaState};
use super::receiver::AckInfo;
use super::sender::{Segment, Sender, TimerKind};
use super::NOTSENT_LOWAT;
use crate::scenario::{CcKind, TcpSpec};
use linkshare_core::Duration;

pub(super) const MSS: u64 = 1000;
pub(super) const MS: u64 = 1_000_000;

pub(super) fn spec(sack: bool, bytes: Option<u64>) -> TcpSpec {
    TcpSpec {
        cc: CcKind::NewReno,
        window: None,
        bytes,
        delayed_ack: false,
        sack,
        min_rto: Duration::from_millis(200),
        init_cwnd: 10,
        ecn: false,
    }
}

pub(super) fn sender(sack: bool, bytes: Option<u64>) -> (Sender, Vec<Segment>) {
    let mut s = Sender::new(&spec(sack, bytes), MSS as u32, Box::new(Reno::new()));
    let mut out = Vec::new();
    s.poll_send(0, &mut out);
    (s, out)
}

/// An ACK of `ack` with SACK blocks in segment numbers `[from, to)`, most recent first, and
/// no timestamp echo.
pub(super) fn ack_at(s: &mut Sender, now: u64, ack: u64, sacks: &[(u64, u64)]) -> Vec<Segment> {
    ack_ts(s, now, ack, sacks, 0)
}

/// [`ack_at`] echoing the timestamp `tsecr` (the send time of the segment it answers).
pub(super) fn ack_ts(
    s: &mut Sender,
    now: u64,
    ack: u64,
    sacks: &[(u64, u64)],
    tsecr: u64,
) -> Vec<Segment> {
    let mut a = AckInfo {
        ack: ack * MSS,
        tsval: now,
        tsecr,
        wnd: 1 << 20,
        ..AckInfo::default()
    };
    for (k, &(f, t)) in sacks.iter().enumerate() {
        a.sacks[k] = (f * MSS, t * MSS);
    }
    a.n_sacks = sacks.len() as u8;
    let mut out = Vec::new();
    s.on_ack(&a, now, &mut out);
    out
}

pub(super) fn seqs(out: &[Segment]) -> Vec<(u64, bool)> {
    out.iter().map(|s| (s.seq / MSS, s.retransmit)).collect()
}

#[test]
fn single_loss_three_sacks_then_fast_retransmit_and_exit_at_ssthresh() {
    let (mut s, out) = sender(true, None);
    assert_eq!(out.len(), 10, "initial window 10");
    // Segment 0 and 1 acknowledged at 10 ms; 2 lost; 3, 4, 5 SACKed.
    ack_at(&mut s, 10 * MS, 1, &[]);
    ack_at(&mut s, 10 * MS + 1, 2, &[]);
    assert_eq!(s.cwnd(), 12);
    let o = ack_at(&mut s, 10 * MS + 2, 2, &[(3, 4)]);
    assert_eq!(s.ca_state(), CaState::Disorder);
    assert!(o.iter().all(|x| !x.retransmit), "one SACK is not a loss");
    assert_eq!(s.timer_kind(), Some(TimerKind::ReoTimeout));
    ack_at(&mut s, 10 * MS + 3, 2, &[(3, 5)]);
    let o = ack_at(&mut s, 10 * MS + 4, 2, &[(3, 6)]);
    // Dupthresh reached: RACK's window is zero, segment 2 is lost.
    assert_eq!(s.ca_state(), CaState::Recovery);
    assert_eq!(
        o.first().map(|x| (x.seq / MSS, x.retransmit)),
        Some((2, true))
    );
    assert_eq!(s.ssthresh(), 6, "Reno halves the 12-segment window");
    assert_eq!(s.stats.fast_retransmits, 1);
    // Everything up to what was sent is acknowledged: back to Open at ssthresh.
    let top = s.snd_nxt / MSS;
    ack_at(&mut s, 20 * MS, top, &[]);
    assert_eq!(s.ca_state(), CaState::Open);
    // cwnd = ssthresh at the exit, then congestion avoidance on this ACK's deliveries (Linux runs
    // `tcp_cong_control` after the state machine): 6 + 1.
    assert_eq!(s.cwnd(), 7);
    assert_eq!(s.stats.retransmits, 1);
}

#[test]
fn multiple_losses_in_one_window_one_reduction() {
    let (mut s, _) = sender(true, None);
    ack_at(&mut s, 10 * MS, 1, &[]);
    // 1, 4 and 7 lost out of segments 1..11; SACKs arrive for the others.
    let mut rtx = Vec::new();
    let mut now = 10 * MS;
    let plan: &[&[(u64, u64)]] = &[
        &[(2, 3)],
        &[(2, 4)],
        &[(5, 6), (2, 4)],
        &[(5, 7), (2, 4)],
        &[(8, 9), (5, 7), (2, 4)],
        &[(8, 10), (5, 7), (2, 4)],
        &[(8, 11), (5, 7), (2, 4)],
    ];
    for blocks in plan {
        now += 100_000;
        let o = ack_at(&mut s, now, 1, blocks);
        rtx.extend(o.iter().filter(|x| x.retransmit).map(|x| x.seq / MSS));
    }
    assert_eq!(s.sb.lost_out, 3, "all three holes marked lost");
    // PRR paces the retransmissions: the repaired holes are acknowledged one by one (SACKs
    // stay on originals sent before the retransmissions), which releases the last one.
    for step in 0..4 {
        now += 100_000;
        let ack = match step {
            0 => 4,
            _ if rtx.contains(&7) => 8,
            _ => 7,
        };
        let blocks: &[(u64, u64)] = if ack < 5 {
            &[(8, 12), (5, 7)]
        } else {
            &[(8, 12)]
        };
        let o = ack_at(&mut s, now, ack, blocks);
        rtx.extend(o.iter().filter(|x| x.retransmit).map(|x| x.seq / MSS));
    }
    assert_eq!(rtx, vec![1, 4, 7], "every hole once, in order");
    assert_eq!(s.stats.cwnd_reductions, 1);
    assert_eq!(s.ca_state(), CaState::Recovery);
}

#[test]
fn lost_retransmission_is_detected_and_resent_without_a_new_reduction() {
    let (mut s, _) = sender(true, None);
    ack_at(&mut s, 10 * MS, 1, &[]);
    let mut now = 10 * MS;
    for k in 3..=5 {
        now += 100_000;
        ack_at(&mut s, now, 1, &[(2, k)]);
    }
    // Segment 1 was retransmitted at `now`; the next SACKs let new data follow it.
    assert_eq!(s.stats.retransmits, 1);
    let top = s.snd_nxt / MSS;
    now += 10 * MS;
    let o = ack_at(&mut s, now, 1, &[(2, top)]);
    assert!(
        o.iter().all(|x| !x.retransmit),
        "only segments sent before it were SACKed"
    );
    // One RTT later the data sent after the retransmission is SACKed, the retransmission not.
    let top = s.snd_nxt / MSS;
    now += 10 * MS;
    let o = ack_at(&mut s, now, 1, &[(2, top)]);
    let again: Vec<_> = o
        .iter()
        .filter(|x| x.retransmit)
        .map(|x| x.seq / MSS)
        .collect();
    assert_eq!(
        again.first(),
        Some(&1),
        "the retransmission was lost: resend {o:?}"
    );
    assert_eq!(s.stats.retransmits, 2);
    assert_eq!(s.stats.cwnd_reductions, 1);
}

#[test]
fn reordering_within_the_rack_window_is_not_a_loss() {
    let (mut s, _) = sender(true, None);
    ack_at(&mut s, 10 * MS, 1, &[]);
    // Segment 1 overtaken by 2: one SACK, then 1 arrives 1 ms later (< min_rtt/4 = 2.5 ms).
    let o = ack_at(&mut s, 10 * MS + 100, 1, &[(2, 3)]);
    assert!(o.iter().all(|x| !x.retransmit));
    assert_eq!(s.ca_state(), CaState::Disorder);
    let o = ack_at(&mut s, 11 * MS, 3, &[]);
    assert!(o.iter().all(|x| !x.retransmit));
    assert_eq!(s.ca_state(), CaState::Open);
    assert_eq!(s.stats.retransmits, 0);
    assert_eq!(s.stats.cwnd_reductions, 0);
    assert!(s.reord_seen, "a hole filled by an original is reordering");
}

#[test]
fn reordering_timer_marks_the_loss_when_no_more_acks_come() {
    let (mut s, _) = sender(true, Some(4 * MSS));
    ack_at(&mut s, 10 * MS, 1, &[]);
    ack_at(&mut s, 10 * MS + 100, 1, &[(2, 4)]);
    assert_eq!(s.timer_kind(), Some(TimerKind::ReoTimeout));
    let t = s.timer().unwrap_or(0);
    // rack.rtt (10 ms) + min_rtt/4 (2.5 ms) after the segment's send time, + 2 ms timer slack.
    assert!(t > 12 * MS && t < 15 * MS, "{t}");
    let mut out = Vec::new();
    s.on_timer(t, &mut out);
    assert_eq!(seqs(&out), vec![(1, true)]);
    assert_eq!(s.ca_state(), CaState::Recovery);
}

#[test]
fn ack_compression_grows_slow_start_by_what_was_delivered() {
    let (mut s, _) = sender(true, None);
    // One ACK for all ten segments (compressed): slow start adds ten segments at once.
    let o = ack_at(&mut s, 10 * MS, 10, &[]);
    assert_eq!(s.cwnd(), 20);
    assert_eq!(
        o.len(),
        20,
        "the whole new window goes (no pacing without BBR)"
    );
}

#[test]
fn tail_loss_probe_repairs_a_tail_loss_without_timeout() {
    let (mut s, _) = sender(true, Some(10 * MSS));
    // Segments 0..8 acknowledged; 8 and 9 lost at the tail.
    let mut now = 10 * MS;
    for k in 1..=8 {
        ack_at(&mut s, now, k, &[]);
        now += 10_000;
    }
    assert_eq!(s.timer_kind(), Some(TimerKind::LossProbe));
    let pto = s.timer().unwrap_or(0);
    let srtt = s.srtt_ns().unwrap_or(0);
    assert!(pto <= now + 2 * srtt + 2 * MS, "probe at 2·srtt + 2 ms");
    let mut out = Vec::new();
    s.on_timer(pto, &mut out);
    assert_eq!(
        seqs(&out),
        vec![(9, true)],
        "the probe resends the last segment"
    );
    assert_eq!(s.stats.loss_probes, 1);
    // Its SACK reveals segment 8's loss: fast recovery, not a timeout.
    let o = ack_at(&mut s, pto + 10 * MS, 8, &[(9, 10)]);
    assert_eq!(seqs(&o), vec![(8, true)]);
    ack_at(&mut s, pto + 20 * MS, 10, &[]);
    assert!(s.finished());
    assert_eq!(s.stats.timeouts, 0);
}

#[test]
fn rto_backs_off_exponentially_up_to_120_s_and_resets_on_a_sample() {
    let (mut s, _) = sender(false, None);
    assert_eq!(s.timer_kind(), Some(TimerKind::Retrans));
    let mut t = s.timer().unwrap_or(0);
    assert_eq!(t, 1_000 * MS, "initial RTO 1 s");
    let mut gaps = Vec::new();
    for _ in 0..10 {
        let mut out = Vec::new();
        s.on_timer(t, &mut out);
        assert_eq!(seqs(&out), vec![(0, true)], "only the head goes, cwnd = 1");
        assert_eq!(s.ca_state(), CaState::Loss);
        assert_eq!(s.cwnd(), 1);
        let next = s.timer().unwrap_or(0);
        gaps.push((next - t) / MS);
        t = next;
    }
    assert_eq!(
        &gaps[..7],
        &[2_000, 4_000, 8_000, 16_000, 32_000, 64_000, 120_000]
    );
    assert!(gaps.iter().all(|&g| g <= 120_000));
    assert_eq!(s.stats.timeouts, 10);
    // The retransmission is acknowledged; the timestamp gives an RTT sample: no more backoff.
    let mut a = AckInfo {
        ack: MSS,
        tsval: t + 50 * MS,
        tsecr: t,
        wnd: 1 << 20,
        ..AckInfo::default()
    };
    a.n_sacks = 0;
    let mut out = Vec::new();
    s.on_ack(&a, t + 50 * MS, &mut out);
    assert_eq!(s.rto_ns(), 50 * MS + 200 * MS, "srtt + rto_min");
    // F-RTO (RFC 5682 step 2.b): the first ACK that advances after a timeout sends new data
    // (slow start from 1: two segments) instead of retransmitting more.
    assert_eq!(seqs(&out), vec![(10, false), (11, false)], "new data first");
    assert_eq!(s.ca_state(), CaState::Loss);
}

#[test]
fn newreno_without_sack_retransmits_on_three_dupacks_and_each_partial_ack() {
    let (mut s, _) = sender(false, None);
    ack_at(&mut s, 10 * MS, 1, &[]);
    // Segments 1 and 4 lost: duplicates for 2, 3, 5...
    let mut now = 10 * MS;
    let mut rtx = Vec::new();
    for _ in 0..3 {
        now += 100_000;
        let o = ack_at(&mut s, now, 1, &[]);
        rtx.extend(o.iter().filter(|x| x.retransmit).map(|x| x.seq / MSS));
    }
    assert_eq!(rtx, vec![1], "fast retransmit at the third duplicate");
    assert_eq!(s.ca_state(), CaState::Recovery);
    // Partial ACK up to the second hole: the head is marked lost at once (RFC 6582); PRR sends
    // it as soon as deliveries allow (Linux: the partial ACK itself gives no PRR credit here).
    now += 10 * MS;
    let mut o = ack_at(&mut s, now, 4, &[]);
    assert_eq!(s.sb.lost_out, 1);
    assert_eq!(s.sb.head().map(|h| h.seq / MSS), Some(4));
    for _ in 0..2 {
        if o.iter().any(|x| x.retransmit) {
            break;
        }
        now += 100_000;
        o = ack_at(&mut s, now, 4, &[]);
    }
    assert_eq!(
        o.first().map(|x| (x.seq / MSS, x.retransmit)),
        Some((4, true))
    );
    assert_eq!(s.stats.cwnd_reductions, 1);
}

#[test]
fn stop_sends_notsent_lowat_rounded_up_then_finishes() {
    let (mut s, out) = sender(true, None);
    assert_eq!(out.len(), 10);
    s.stop();
    let tail = NOTSENT_LOWAT.div_ceil(MSS);
    let mut now = 10 * MS;
    let mut acked = 0;
    while !s.finished() && acked < 1000 {
        acked = (acked + 2).min(s.snd_nxt / MSS);
        ack_at(&mut s, now, acked, &[]);
        now += MS;
    }
    assert_eq!(s.snd_nxt, (10 + tail) * MSS);
    assert!(s.finished());
}

/// `ack_at` with the ECN-Echo flag.
fn ece_at(s: &mut Sender, now: u64, ack: u64) -> Vec<Segment> {
    let a = AckInfo {
        ack: ack * MSS,
        tsval: now,
        wnd: 1 << 20,
        ece: true,
        ..AckInfo::default()
    };
    let mut out = Vec::new();
    s.on_ack(&a, now, &mut out);
    out
}

#[test]
fn ecn_echo_reduces_once_per_window_and_sends_cwr_once() {
    let mut s = Sender::new(
        &TcpSpec {
            ecn: true,
            ..spec(true, None)
        },
        MSS as u32,
        Box::new(Reno::new()),
    );
    let mut out = Vec::new();
    s.poll_send(0, &mut out);
    assert!(out.iter().all(|x| x.ect && !x.cwr), "new data is ECT(0)");
    ack_at(&mut s, 10 * MS, 2, &[]);
    assert_eq!(s.cwnd(), 12);
    // A CE mark echoed: CWR state, ssthresh halves, no retransmission.
    let o = ece_at(&mut s, 10 * MS + 1, 3);
    assert_eq!(s.ca_state(), CaState::Cwr);
    assert_eq!(s.ssthresh(), 6);
    assert_eq!(s.stats.cwnd_reductions, 1);
    assert!(o.iter().all(|x| !x.retransmit));
    // The next new segment carries CWR, once; the ones after do not.
    let mut sent = o;
    for k in 4..9 {
        sent.extend(ece_at(&mut s, 10 * MS + k, k));
    }
    let cwr: Vec<bool> = sent.iter().map(|x| x.cwr).collect();
    assert_eq!(cwr.iter().filter(|c| **c).count(), 1, "{cwr:?}");
    assert!(sent.first().is_some_and(|x| x.cwr), "{cwr:?}");
    // More echoes within the window: no second reduction.
    assert_eq!(s.stats.cwnd_reductions, 1);
    assert!(
        s.cwnd() >= 6 && s.cwnd() < 12,
        "PRR brings cwnd down, {}",
        s.cwnd()
    );
    // Past high_seq without ECE: back to Open at ssthresh.
    let top = s.snd_nxt / MSS;
    ack_at(&mut s, 30 * MS, top, &[]);
    assert_eq!(s.ca_state(), CaState::Open);
    // ssthresh, plus the segment congestion avoidance adds for this (large) ACK.
    assert!((6..=7).contains(&s.cwnd()), "{}", s.cwnd());
    // A new echo in the next window is a new reduction.
    let top = s.snd_nxt / MSS;
    ece_at(&mut s, 40 * MS, top);
    assert_eq!(s.stats.cwnd_reductions, 2);
    assert_eq!(s.ca_state(), CaState::Cwr);
}

#[test]
fn a_sender_without_ecn_ignores_ece() {
    let (mut s, out) = sender(true, None);
    assert!(out.iter().all(|x| !x.ect && !x.cwr));
    ece_at(&mut s, 10 * MS, 2);
    assert_eq!(s.ca_state(), CaState::Open);
    assert_eq!(s.stats.cwnd_reductions, 0);
    assert_eq!(s.cwnd(), 12);
}
