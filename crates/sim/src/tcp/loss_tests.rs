//! The timeout's Loss state on hand-built ACKs: a spurious timeout (the queue delayed the ACKs
//! past the RTO) is undone as Linux undoes it, by the timestamp echo or by F-RTO, and a real one
//! is not.

use super::cc::{reno::Reno, CaState};
use super::sender::{Sender, TimerKind};
use super::tests::{ack_ts, seqs, spec, MS, MSS};

/// Ten segments at 100 ms, acknowledged at 110 ms (RTT 10 ms, RTO 210 ms): the window grows to
/// 20 and segments 10..30 leave at 110 ms. No ACK comes back in time: the loss probe sends
/// segment 30 at 132 ms and restarts the RTO from then (`tcp_send_loss_probe`), which fires at
/// 342 ms and retransmits segment 10 with `cwnd` 1. Returns the sender and the RTO's time.
fn timed_out() -> (Sender, u64) {
    let mut s = Sender::new(&spec(true, None), MSS as u32, Box::new(Reno::new()));
    let mut out = Vec::new();
    s.poll_send(100 * MS, &mut out);
    assert_eq!(out.len(), 10);
    let o = ack_ts(&mut s, 110 * MS, 10, &[], 100 * MS);
    assert_eq!(o.len(), 20);
    assert_eq!(s.cwnd(), 20);
    let mut guard = 0;
    let rto_at = loop {
        let (kind, at) = (s.timer_kind(), s.timer().unwrap_or(0));
        let mut out = Vec::new();
        s.on_timer(at, &mut out);
        if kind == Some(TimerKind::Retrans) {
            assert_eq!(at, 342 * MS, "probe at 132 ms + RTO 210 ms");
            assert_eq!(seqs(&out), vec![(10, true)]);
            break at;
        }
        guard += 1;
        assert!(guard < 4, "the RTO fires after at most the loss probe");
    };
    assert_eq!(s.ca_state(), CaState::Loss);
    assert_eq!((s.cwnd(), s.ssthresh()), (1, 10));
    (s, rto_at)
}

#[test]
fn a_timestamp_older_than_the_timeouts_retransmission_undoes_it() {
    let (mut s, t) = timed_out();
    // The originals of 10 and 11 were only queued: their ACK echoes their 110 ms timestamp,
    // older than the retransmission at 342 ms (Eifel, RFC 3522; Linux `tcp_try_undo_loss`).
    let o = ack_ts(&mut s, t + 10 * MS, 12, &[], 110 * MS);
    assert_eq!(s.ca_state(), CaState::Open);
    assert_eq!(s.stats.undos, 1);
    assert!(s.cwnd() >= 20, "window restored: {}", s.cwnd());
    assert_eq!(s.ssthresh(), u32::MAX, "ssthresh restored");
    assert!(
        o.iter().all(|x| !x.retransmit),
        "nothing retransmitted: {:?}",
        seqs(&o)
    );
    assert_eq!(s.sb.lost_out, 0, "the loss marks are taken back");
}

#[test]
fn frto_sends_new_data_first_and_undoes_when_originals_are_acknowledged() {
    let (mut s, t) = timed_out();
    // No timestamps. The retransmitted head is acknowledged: F-RTO step 2.b sends new data.
    let o = ack_ts(&mut s, t + 10 * MS, 11, &[], 0);
    assert_eq!(
        seqs(&o),
        vec![(31, false), (32, false)],
        "new data, not retransmissions"
    );
    assert_eq!(s.ca_state(), CaState::Loss);
    // The next ACK acknowledges 11 and 12, sent before the timeout and never retransmitted:
    // step 3.b, the timeout was spurious.
    let o = ack_ts(&mut s, t + 11 * MS, 13, &[], 0);
    assert_eq!(s.ca_state(), CaState::Open);
    assert_eq!(s.stats.undos, 1);
    assert!(s.cwnd() >= 20, "window restored: {}", s.cwnd());
    assert!(o.iter().all(|x| !x.retransmit), "{:?}", seqs(&o));
}

#[test]
fn frto_keeps_the_reduction_when_the_loss_was_real() {
    let (mut s, t) = timed_out();
    // The ACK of the retransmission echoes its own timestamp: nothing to undo yet.
    let o = ack_ts(&mut s, t + 10 * MS, 11, &[], t);
    assert_eq!(seqs(&o), vec![(31, false), (32, false)]);
    // Segments 11.. were really lost: the new data is SACKed above the hole (step 3.a).
    let o = ack_ts(&mut s, t + 20 * MS, 11, &[(31, 33)], t + 10 * MS);
    assert_eq!(s.ca_state(), CaState::Loss);
    assert_eq!(s.stats.undos, 0);
    assert_eq!(s.ssthresh(), 10);
    assert_eq!(
        o.first().map(|x| (x.seq / MSS, x.retransmit)),
        Some((11, true)),
        "the holes are retransmitted"
    );
}
