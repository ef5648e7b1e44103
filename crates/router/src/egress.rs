//! The router's adapter of the shared device model ([`linkshare_core::egress`]), without I/O.
//!
//! The simulator's link (`crates/sim/src/link.rs`) and this turn drive the same
//! [`Egress`]: the same pull rule (`waiting + full frame ≤ device_buffer`, or an idle modelled
//! wire), the same exact drain, the same next wake-up. What the router adds is the real
//! transmit ring: a turn also stops when the ring has no free slot (the loop looks again
//! `TX_RETRY_NS` later). The router gets no event per transmitted frame, so a turn first
//! completes every modelled transmission that ended by `now` (like a TX completion interrupt
//! in BQL, `netdev_tx_completed_queue`), then pulls.
//!
//! ```text
//!  Dir::poll_transmit ──▶ egress_turn(now, ring room) ──▶ frames ──▶ TX ring / emulated line
//!                              │ complete_until(now); pull_one … until Stop or no room
//!                              ▼
//!                         Turn { stop, next_wakeup } ──▶ Dir::next_wakeup (timerfd / busy poll)
//! ```
//!
//! Times are the shaper's one time base (clock.rs); the caller is a direction's datapath
//! (datapath.rs).

use linkshare_core::egress::{Egress, Pulled, Stop};
use linkshare_core::packet::Packet;
use linkshare_core::{Qdisc, Time};

/// How a turn ended.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[must_use]
pub struct Turn {
    /// Why the model stopped pulling; `None` when the transmit ring ran out of room first.
    pub stop: Option<Stop>,
    /// When pulling again can achieve anything without an arrival ([`Egress::next_wakeup`]).
    pub next_wakeup: Option<Time>,
}

/// One turn at `now`: complete the modelled transmissions that ended (their end instants go to
/// `done`), then pull while the model allows and `room` transmit slots last. Frames go to
/// `out` in order, each with the instant its last bit leaves the modelled wire
/// ([`Egress::tail_end`]; `None`: an unpaced device, it has left); packets the scheduler
/// dropped on the way go to `dropped`.
pub fn egress_turn<P, Q>(
    egress: &mut Egress,
    q: &mut Q,
    now: Time,
    mut room: usize,
    out: &mut impl FnMut(P, Option<Time>),
    dropped: &mut impl FnMut(P),
    done: &mut impl FnMut(Time),
) -> Turn
where
    P: Packet,
    Q: Qdisc<P> + ?Sized,
{
    while let Some(end) = egress.wire_end().filter(|end| *end <= now) {
        done(end);
        let _ = egress.on_tx_done();
    }
    let _ = egress.complete_until(now);
    let stop = loop {
        if room == 0 {
            break None;
        }
        let r = egress.pull_one(q, now);
        while let Some(d) = q.take_dropped() {
            dropped(d.packet);
        }
        match r {
            Pulled::Packet { packet, .. } => {
                room -= 1;
                out(packet, egress.tail_end());
            }
            Pulled::Stopped(s) => break Some(s),
        }
    };
    Turn {
        stop,
        next_wakeup: egress.next_wakeup(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use linkshare_core::egress::EgressConfig;
    use linkshare_core::qdisc::fifo::{Fifo, FifoLimit};

    use crate::frame::{parse_frame, Frame, Parsed};

    /// An IPv4/UDP frame padded to `len` bytes (charged its whole length).
    fn frame(len: usize) -> Option<Frame> {
        let mut b = vec![0u8; 14 + 28];
        b[12] = 0x08;
        b[14] = 0x45;
        b[16..18].copy_from_slice(&28u16.to_be_bytes());
        b[22] = 64;
        b[23] = 17;
        b[26..30].copy_from_slice(&[10, 0, 0, 1]);
        b[30..34].copy_from_slice(&[10, 0, 0, 2]);
        let sum = linkshare_core::wire::checksum::internet(&b[14..34]);
        b[24..26].copy_from_slice(&sum.to_be_bytes());
        b[38..40].copy_from_slice(&8u16.to_be_bytes());
        b.resize(len, 0);
        match parse_frame(b) {
            Parsed::Ip(f) => Some(f),
            _ => None,
        }
    }

    #[test]
    fn a_full_ring_stops_the_turn_before_the_model_does() {
        let mut q: Fifo<Frame> = Fifo::new(FifoLimit::Packets(10));
        for _ in 0..5 {
            let Some(f) = frame(1000) else {
                panic!("test frame did not parse")
            };
            assert!(q.enqueue(f, Time(0)).is_ok());
        }
        let mut e = Egress::new(EgressConfig {
            rate_bps: 8_000_000,
            device_buffer: u64::MAX,
            full_packet: 1514,
            timer_hz: 0,
            clock_hz: 0,
        });
        let mut n = 0;
        let t = egress_turn(
            &mut e,
            &mut q,
            Time(0),
            2,
            &mut |_, _| n += 1,
            &mut |_| {},
            &mut |_| {},
        );
        assert_eq!(n, 2);
        assert_eq!(t.stop, None);
        // The model pulls the rest when the ring has room; completions are reported.
        let mut ends = Vec::new();
        let t = egress_turn(
            &mut e,
            &mut q,
            Time(1_500_000),
            64,
            &mut |_, _| n += 1,
            &mut |_| {},
            &mut |end| ends.push(end),
        );
        assert_eq!(n, 5);
        assert_eq!(ends, vec![Time(1_000_000)]);
        assert_eq!(t.stop, Some(Stop::Empty));
        assert_eq!(t.next_wakeup, None);
    }
}
