//! Classic ECN (RFC 3168) as Linux's TCP does it with `net.ipv4.tcp_ecn = 1`
//! (net/ipv4/tcp_input.c: `tcp_ecn_accept_cwr`, `__tcp_ecn_check_ce`, `tcp_ecn_rcv_ecn_echo`,
//! `tcp_enter_cwr`; net/ipv4/tcp_output.c: `tcp_ecn_send`), sans-IO.
//!
//! Principles:
//! * **Negotiation**: a flow with `ecn = true` has ECN on both ends (the receiver's default
//!   `tcp_ecn = 2` accepts what the sender asks); the handshake itself is not modelled.
//! * **Sender**: new data segments are sent ECT(0); retransmissions and ACKs are not ECT (an AQM
//!   drops them, as Linux's `INET_ECN_dontxmit`). An ACK with ECE is a congestion signal
//!   (`FLAG_ECE`): in Open or Disorder the sender enters **CWR** (`tcp_enter_cwr`: `ssthresh`
//!   from the controller, PRR brings `cwnd` down to it, the state ends once `high_seq` is passed),
//!   so the window is reduced at most once per window of data; in CWR, Recovery or Loss a
//!   further ECE changes nothing. Every window reduction (CWR or Recovery) queues **CWR** on
//!   the next new data segment (`tcp_ecn_queue_cwr`).
//! * **Receiver**: a CE-marked segment sets `DEMAND_CWR` (and two quick ACKs the first time, so a
//!   small window is not held by the delayed ACK); every ACK carries ECE while it is set; a data
//!   segment with CWR clears it and is acknowledged at once. A non-ECT data segment after ECT
//!   ones is taken for a retransmission: two quick ACKs.

/// The sender's side of a connection's ECN state (`tp->ecn_flags`).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct SenderEcn {
    /// ECN negotiated (`TCP_ECN_OK`).
    pub ok: bool,
    /// CWR to be set on the next new data segment (`TCP_ECN_QUEUE_CWR`).
    queue_cwr: bool,
    /// ACKs received with ECE (counted, not acted on more than once per window).
    pub ece_acks: u64,
}

impl SenderEcn {
    pub fn new(ok: bool) -> Self {
        SenderEcn {
            ok,
            ..SenderEcn::default()
        }
    }

    /// `tcp_ecn_rcv_ecn_echo`: does this ACK carry a congestion signal?
    pub fn echo(&mut self, ece: bool) -> bool {
        let e = self.ok && ece;
        self.ece_acks += u64::from(e);
        e
    }

    /// `tcp_ecn_queue_cwr`: a window reduction started.
    pub fn queue_cwr(&mut self) {
        if self.ok {
            self.queue_cwr = true;
        }
    }

    /// `tcp_ecn_withdraw_cwr`: a reduction was undone, no CWR to send.
    pub fn withdraw_cwr(&mut self) {
        self.queue_cwr = false;
    }

    /// `tcp_ecn_send` for a segment: `(ect, cwr)`. New data is ECT(0) and takes a queued CWR;
    /// a retransmission is not ECT.
    pub fn on_send(&mut self, retransmit: bool) -> (bool, bool) {
        if !self.ok || retransmit {
            return (false, false);
        }
        (true, std::mem::take(&mut self.queue_cwr))
    }
}

/// The receiver's side (`TCP_ECN_DEMAND_CWR`, `TCP_ECN_SEEN`).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct ReceiverEcn {
    pub ok: bool,
    demand_cwr: bool,
    seen: bool,
    /// CE-marked data segments received.
    pub ce_received: u64,
}

/// What a segment's ECN bits ask of the receiver's ACK engine.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct EcnAction {
    /// Enter quick-ACK mode for this many ACKs (`tcp_enter_quickack_mode(sk, 2)`).
    pub quickack: u32,
    /// Acknowledge at once (a CWR on data).
    pub ack_now: bool,
}

impl ReceiverEcn {
    pub fn new(ok: bool) -> Self {
        ReceiverEcn {
            ok,
            ..ReceiverEcn::default()
        }
    }

    /// A data segment arrives with IP ECN field `field` (0 not ECT, 1/2 ECT, 3 CE) and TCP flag
    /// `cwr`; `new_data`: it carries data above `rcv_nxt` (Linux checks CE only then).
    pub fn on_segment(&mut self, field: u8, cwr: bool, new_data: bool) -> EcnAction {
        let mut act = EcnAction::default();
        if !self.ok {
            return act;
        }
        // `tcp_ecn_accept_cwr`.
        if cwr {
            self.demand_cwr = false;
            act.ack_now = true;
        }
        if !new_data {
            return act;
        }
        // `__tcp_ecn_check_ce`.
        match field & 3 {
            0 => {
                if self.seen {
                    act.quickack = 2;
                }
            }
            3 => {
                self.ce_received += 1;
                if !self.demand_cwr {
                    act.quickack = 2;
                    self.demand_cwr = true;
                }
                self.seen = true;
            }
            _ => self.seen = true,
        }
        act
    }

    /// ECE on the ACK being sent.
    pub fn ece(&self) -> bool {
        self.demand_cwr
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sender_marks_new_data_and_queues_one_cwr() {
        let mut s = SenderEcn::new(true);
        assert_eq!(s.on_send(false), (true, false));
        s.queue_cwr();
        assert_eq!(
            s.on_send(true),
            (false, false),
            "a retransmission is not ECT"
        );
        assert_eq!(s.on_send(false), (true, true));
        assert_eq!(s.on_send(false), (true, false), "CWR goes once");
        let mut off = SenderEcn::new(false);
        off.queue_cwr();
        assert_eq!(off.on_send(false), (false, false));
        assert!(!off.echo(true));
        assert!(s.echo(true) && !s.echo(false));
        assert_eq!(s.ece_acks, 1);
    }

    #[test]
    fn receiver_echoes_ce_until_cwr() {
        let mut r = ReceiverEcn::new(true);
        assert_eq!(r.on_segment(2, false, true), EcnAction::default());
        assert!(!r.ece());
        let a = r.on_segment(3, false, true);
        assert_eq!(a.quickack, 2);
        assert!(r.ece());
        // A second CE while CWR is demanded: no new quick ACKs, ECE stays.
        assert_eq!(r.on_segment(3, false, true).quickack, 0);
        assert!(r.ece());
        // CWR clears it; the segment is acknowledged at once.
        let a = r.on_segment(2, true, true);
        assert!(a.ack_now && !r.ece());
        // Not ECT after ECT: a retransmission, quick ACKs.
        assert_eq!(r.on_segment(0, false, true).quickack, 2);
        assert_eq!(r.ce_received, 2);
        // Old data is not checked for CE.
        assert_eq!(r.on_segment(3, false, false).quickack, 0);
        assert!(!r.ece());
        let mut off = ReceiverEcn::new(false);
        assert_eq!(off.on_segment(3, true, true), EcnAction::default());
        assert!(!off.ece());
    }
}
