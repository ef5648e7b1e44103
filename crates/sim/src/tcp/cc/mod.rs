//! Congestion control: the interface between the TCP sender and its controllers, shaped after
//! Linux's `struct tcp_congestion_ops` (include/net/tcp.h) so that each controller can follow its
//! Linux source file hook for hook:
//!
//! | Linux hook      | here                 | called by the sender                                   |
//! |-----------------|----------------------|--------------------------------------------------------|
//! | `init`          | constructor          | at connection start                                    |
//! | `ssthresh`      | [`ssthresh`]         | on entering Recovery or Loss (`tcp_enter_recovery`/`tcp_enter_loss`) |
//! | `cong_avoid`    | [`cong_avoid`]       | per ACK, when `tcp_may_raise_cwnd` (not in Recovery/Loss/CWR, not app-limited) |
//! | `cong_control`  | [`cong_control`]     | per ACK instead of `cong_avoid` + PRR, if it returns `true` (BBR) |
//! | `set_state`     | [`set_state`]        | on every change of [`CaState`]                         |
//! | `cwnd_event`    | [`cwnd_event`]       | on [`CwndEvent`]s                                      |
//! | `pkts_acked`    | [`pkts_acked`]       | per ACK that acknowledges or SACKs new data, before `cong_avoid` |
//! | `undo_cwnd`     | [`undo_cwnd`]        | when a reduction proves spurious (DSACK / timestamps)  |
//!
//! The window is counted in **segments** (`snd_cwnd`, with `snd_cwnd_cnt` as the fractional
//! accumulator), exactly as Linux counts it, so that the controllers' arithmetic (CUBIC's `cnt`,
//! BBR's quanta) is the kernel's. The sender multiplies by the MSS. All times are nanoseconds of
//! the simulator's clock; rates are bytes per second.
//!
//! Controllers: [`reno`] (`tcp_reno`, net/ipv4/tcp_cong.c), [`cubic`] (net/ipv4/tcp_cubic.c) and
//! [`bbr`] (net/ipv4/tcp_bbr.c, v1); [`new`] builds the one a scenario names.
//!
//! [`ssthresh`]: CongestionControl::ssthresh
//! [`cong_avoid`]: CongestionControl::cong_avoid
//! [`cong_control`]: CongestionControl::cong_control
//! [`set_state`]: CongestionControl::set_state
//! [`cwnd_event`]: CongestionControl::cwnd_event
//! [`pkts_acked`]: CongestionControl::pkts_acked
//! [`undo_cwnd`]: CongestionControl::undo_cwnd

pub mod bbr;
pub mod cubic;
mod minmax;
pub mod reno;

use crate::scenario::CcKind;

/// The controller a scenario's `cc` names, for a connection with initial window `init_cwnd`
/// segments and `mss`-byte segments. Controllers with randomness (BBR's gain-cycle phase) draw
/// it from a fixed seed here; use [`new_seeded`] to give each flow its own.
pub fn new(kind: CcKind, init_cwnd: u32, mss: u32) -> Box<dyn CongestionControl> {
    new_seeded(kind, init_cwnd, mss, 0)
}

/// [`new`] with a seed for the controller's deterministic random choices (e.g. the flow index).
pub fn new_seeded(kind: CcKind, init_cwnd: u32, mss: u32, seed: u64) -> Box<dyn CongestionControl> {
    match kind {
        CcKind::NewReno => Box::new(reno::Reno::new()),
        CcKind::Cubic => Box::new(cubic::Cubic::new()),
        CcKind::Bbr => Box::new(bbr::Bbr::new(init_cwnd, mss, seed)),
    }
}

/// Linux's `enum tcp_ca_state` (include/net/tcp.h).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub enum CaState {
    #[default]
    Open,
    /// Duplicate ACKs or SACKs seen, no loss inferred yet.
    Disorder,
    /// A reduction not caused by loss (ECN, local congestion).
    Cwr,
    /// Fast recovery after a loss detected by SACK, duplicate ACKs or RACK.
    Recovery,
    /// After a retransmission timeout.
    Loss,
}

/// Linux's `enum tcp_ca_event`, the ones the simulator produces.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum CwndEvent {
    /// First transmission after the connection was idle (nothing in flight).
    TxStart,
    /// The retransmission timer fired (`CA_EVENT_LOSS`), after `ssthresh` and before `cwnd = 1`.
    Loss,
    /// A delayed ACK was sent (receiver side events are not modelled; kept for completeness).
    CompleteCwr,
}

/// The sender's variables a controller reads and writes, as in `struct tcp_sock`.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Window {
    /// `snd_cwnd`, segments, ≥ 1.
    pub cwnd: u32,
    /// `snd_cwnd_cnt`: ACKed segments accumulated towards the next increment.
    pub cwnd_cnt: u32,
    /// `snd_ssthresh`, segments (`u32::MAX` = infinite, `TCP_INFINITE_SSTHRESH`).
    pub ssthresh: u32,
    /// `snd_cwnd_clamp`, segments.
    pub cwnd_clamp: u32,
}

/// What a controller sees of the connection on each call (a read-only `tcp_sock`).
/// `Default` gives a fresh connection at time 0 (build with `..Default::default()`).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct ConnInfo {
    pub now: u64,
    pub mss: u32,
    /// Segments in flight (`tcp_packets_in_flight`: sent − SACKed − lost + retransmitted).
    pub in_flight: u32,
    /// `srtt` in ns (0 before the first sample).
    pub srtt: u64,
    /// Windowed minimum RTT (`tcp_min_rtt`, a 5-minute window in Linux), ns; 0 before a sample.
    pub min_rtt: u64,
    /// Total segments delivered (cumulatively ACKed or SACKed), `tp->delivered`.
    pub delivered: u64,
    /// The sender is limited by the application, not the window (`tcp_is_cwnd_limited` is false).
    pub app_limited: bool,
    /// `tcp_is_cwnd_limited`: the window was fully used in the last round.
    pub cwnd_limited: bool,
    pub ca_state: CaState,
    /// `snd_una`, bytes of sequence space (u64: no wrap) — CUBIC's HyStart ends its rounds on it.
    pub snd_una: u64,
    /// `snd_nxt`, bytes of sequence space.
    pub snd_nxt: u64,
    /// `tp->lsndtime`: when data was last transmitted, ns. On [`CwndEvent::TxStart`] this is the
    /// transmission *before* the one starting now (Linux raises the event before updating it);
    /// CUBIC shifts its epoch by the idle time `now − last_send`.
    pub last_send: u64,
    /// `tp->lost`: total segments ever marked lost (BBR's long-term bandwidth sampling).
    pub lost: u64,
}

/// Per-ACK sample for `pkts_acked` (Linux's `struct ack_sample`).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct AckSample {
    /// Segments newly acknowledged or SACKed by this ACK.
    pub pkts_acked: u32,
    /// RTT sample of this ACK in ns (`None` when only retransmitted data was acked and no timestamp
    /// helps: Karn).
    pub rtt: Option<u64>,
    /// Segments in flight before this ACK was processed.
    pub in_flight: u32,
}

/// A delivery-rate sample (Linux's `struct rate_sample`, net/ipv4/tcp_rate.c), for BBR.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct RateSample {
    /// `tp->delivered` when the newest acked packet was sent.
    pub prior_delivered: u64,
    /// Segments delivered over `interval` (≤ 0 means no valid sample: `None` interval).
    pub delivered: i64,
    /// Sample interval in ns (`max(send interval, ack interval)`), `None` if invalid.
    pub interval: Option<u64>,
    /// RTT of the most recently sent acked packet, ns.
    pub rtt: Option<u64>,
    /// Segments newly marked lost by this ACK.
    pub losses: u32,
    /// Segments newly acked or SACKed by this ACK.
    pub acked_sacked: u32,
    /// Segments in flight before this ACK.
    pub prior_in_flight: u32,
    /// The sample was taken while the sender was application-limited.
    pub is_app_limited: bool,
    /// The ACK was for a retransmitted segment only.
    pub is_retrans: bool,
}

/// What `cong_control` decides (BBR): the window and the pacing rate.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Control {
    pub cwnd: u32,
    /// Bytes per second; `None` = do not pace.
    pub pacing_rate: Option<u64>,
}

/// A congestion controller. Every method has Linux's meaning (table above).
pub trait CongestionControl: std::fmt::Debug {
    /// `tcp_congestion_ops.name`: `"reno"`, `"cubic"`, `"bbr"`.
    fn name(&self) -> &'static str;
    /// New `ssthresh` in segments on a loss (the window before reduction is `w.cwnd`).
    fn ssthresh(&mut self, w: &Window, c: &ConnInfo) -> u32;
    /// Grow the window for `acked` newly acknowledged segments (RFC 3465 ABC in slow start).
    fn cong_avoid(&mut self, w: &mut Window, c: &ConnInfo, acked: u32);
    /// Model-based control (BBR): set window and pacing from the rate sample and return `Some`;
    /// `None` (the default) lets the sender run `cong_avoid` and PRR.
    fn cong_control(&mut self, _w: &Window, _c: &ConnInfo, _rs: &RateSample) -> Option<Control> {
        None
    }
    fn set_state(&mut self, _new: CaState, _c: &ConnInfo) {}
    fn cwnd_event(&mut self, _ev: CwndEvent, _c: &ConnInfo) {}
    fn pkts_acked(&mut self, _s: &AckSample, _w: &Window, _c: &ConnInfo) {}
    /// The window to restore after a spurious reduction (Linux's default `tcp_undo_cwnd`:
    /// `max(cwnd, prior_cwnd)`).
    fn undo_cwnd(&mut self, w: &Window, prior_cwnd: u32) -> u32 {
        w.cwnd.max(prior_cwnd)
    }
    /// The pacing rate (bytes/s) the controller has set, `sk_pacing_rate`, for controllers that
    /// own it (BBR also changes it from `cwnd_event`, so the sender reads it after every hook);
    /// `None` (the default) leaves pacing to the sender (`tcp_update_pacing_rate`).
    fn pacing_rate(&self) -> Option<u64> {
        None
    }
    /// BBR marks the connection application-limited on entering PROBE_RTT (`tp->app_limited =
    /// delivered + in_flight`, tcp_bbr.c `bbr_update_min_rtt`) so that the low-rate samples of
    /// PROBE_RTT do not shrink the bandwidth filter. The sender asks after `cong_control`; `true`
    /// (once per request) means: mark app-limited now. Default: never.
    fn take_app_limited_mark(&mut self) -> bool {
        false
    }
}
