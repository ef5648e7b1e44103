//! TCP as Linux runs it, sans-IO and deterministic: a sender and a receiver that take `now` and
//! return what to send; the world moves the packets and runs the timers they ask for.
//!
//! | concern | module | source |
//! |---|---|---|
//! | sender: ACK processing, sending, timers | [`sender`] | net/ipv4/tcp_input.c `tcp_ack`, tcp_output.c, tcp_timer.c |
//! | recovery state machine (Open/Disorder/CWR/Recovery/Loss) | [`recovery`] | tcp_input.c `tcp_fastretrans_alert` |
//! | the timeout's Loss state, F-RTO | `loss` | tcp_input.c `tcp_enter_loss`, `tcp_process_loss`; RFC 5682 |
//! | undo of a spurious reduction by DSACK or timestamps | `undo` | tcp_input.c `tcp_try_undo_*`, `tcp_packet_delayed`, `tcp_undo_cwnd_reduction`; RFC 3522 |
//! | SACK tagging, cumulative ACK, RTT samples | `sacktag` | tcp_input.c `tcp_sacktag_write_queue`, `tcp_clean_rtx_queue` |
//! | retransmission queue + SACK scoreboard | [`scoreboard`] | RFC 6675 §4, tcp_input.c `tcp_sacktag_one` |
//! | RACK-TLP loss detection | [`rack`] | RFC 8985, net/ipv4/tcp_recovery.c |
//! | Proportional Rate Reduction | [`prr`] | RFC 6937, `tcp_cwnd_reduction` |
//! | RTT, RTO, min RTT | [`rtt`] | RFC 6298, `tcp_rtt_estimator`, `tcp_set_rto` |
//! | delivery-rate samples | [`rate`] | net/ipv4/tcp_rate.c |
//! | pacing (when the controller asks) | [`pacing`] | tcp_output.c EDT pacing |
//! | receiver: SACK/DSACK, delayed and quick ACKs, window | [`receiver`] | RFC 2018, RFC 2883, tcp_input.c |
//! | ECN: ECT, CE echo (ECE), CWR | [`ecn`] | RFC 3168, tcp_input.c `__tcp_ecn_check_ce`, tcp_output.c `tcp_ecn_send` |
//! | congestion controllers (Reno, CUBIC, BBR) | [`cc`] | net/ipv4/tcp_cong.c, tcp_cubic.c, tcp_bbr.c |
//!
//! Common ground: sequence numbers are byte offsets from 0; segments carry the timestamp option
//! (RFC 7323), so the MSS is `mtu − 52` as Linux's with timestamps; windows are counted in
//! segments as in the kernel. The initial window is 10 segments. With `sack = false` the
//! receiver sends no SACK blocks and the sender recovers as Linux does without SACK (NewReno).

pub mod cc;
pub mod ecn;
mod loss;
#[cfg(test)]
mod loss_tests;
pub mod pacing;
pub mod prr;
pub mod rack;
pub mod rate;
pub mod receiver;
mod recovery;
pub mod rtt;
mod sacktag;
pub mod scoreboard;
pub mod sender;
#[cfg(test)]
mod tests;
mod undo;

pub use receiver::{AckInfo, Receiver, DELACK_NS};
pub use rtt::{INITIAL_RTO_NS, MAX_RTO_NS};
pub use sender::{Segment, Sender, SenderStats, TimerKind};

/// Bytes the application may have written but not yet sent when it stops (`TCP_NOTSENT_LOWAT`,
/// the contract of one meaning for sim and lab): the sender still sends this much (rounded up to
/// whole segments) after `stop`.
pub const NOTSENT_LOWAT: u64 = 16384;

/// Header sizes are a property of the packet, defined with it (the scenario needs the MSS too).
pub use crate::packet::{mss_for_mtu, HEADER_BYTES};
