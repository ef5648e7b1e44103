//! What the endpoints do: the sources emit packets (TCP segments when the sender allows, UDP
//! and ping on their own schedules), TCP's timers fire, the sinks take delivery and answer
//! (ACKs, echo replies), and the answers reach their sources.
//!
//! The TCP sender and receiver are sans-IO state machines (`crate::tcp`): this module gives
//! them the time and their inputs, sends what they put out (`World::out`) and keeps at most one
//! heap event per timer, re-armed when the machine's deadline moves earlier; an event whose
//! deadline moved later is ignored when it fires and re-armed then. A packet's charged length
//! is its IP length plus the link's overhead, through the policy's link layer (tc-stab), so
//! the scheduler charges and the wire transmits the same framed size.

use linkshare_core::packet::L3;

use super::paths::reversed;
use super::{Src, World};
use crate::engine::{Engine, Ev};
use crate::packet::{PktKind, SimPacket};
use crate::tcp::AckInfo;

impl World<'_> {
    /// A packet leaves flow `i`'s source towards the router.
    #[inline]
    pub(super) fn emit(
        &mut self,
        i: usize,
        kind: PktKind,
        ip_len: u32,
        payload: u32,
        seq: u64,
        echo: u64,
    ) {
        self.emit_ecn(i, kind, ip_len, payload, seq, echo, None);
    }

    /// [`World::emit`] with a TCP segment's ECN facts `(ect, cwr)` for a flow with `ecn`: its
    /// IP ECN field becomes ECT(0) or not-ECT (the flow's `tos` keeps its DSCP).
    #[allow(clippy::too_many_arguments)]
    #[inline]
    pub(super) fn emit_ecn(
        &mut self,
        i: usize,
        kind: PktKind,
        ip_len: u32,
        payload: u32,
        seq: u64,
        echo: u64,
        ecn: Option<(bool, bool)>,
    ) {
        let f = &mut self.flows[i];
        let mut meta = f.meta;
        if let Some((ect, _)) = ecn {
            meta.tos = (meta.tos & !3) | if ect { 2 } else { 0 };
        }
        meta.len = f.link.size(ip_len + f.overhead);
        // UDP and pings carry their IP length as `payload`: their goodput is that, whatever
        // the framing charged.
        let payload = if kind == PktKind::Data {
            payload
        } else {
            ip_len
        };
        let p = SimPacket {
            meta,
            flow: i as u32,
            payload,
            kind,
            seq,
            sent_at: self.eng.now(),
            echo,
            tcp: None,
            cwr: ecn.is_some_and(|e| e.1),
        };
        f.m.packets_sent += 1;
        if f.access_line == u32::MAX {
            self.link.offer(p, &mut self.eng);
        } else {
            let li = f.access_line as usize;
            self.push_line(li, p);
        }
    }

    pub(super) fn flow_start(&mut self, i: usize) {
        self.flows[i].active = true;
        match &mut self.flows[i].src {
            Src::Tcp(c) => {
                let now = self.eng.now();
                self.out.clear();
                c.snd.poll_send(now, &mut self.out);
                self.emit_segments(i);
            }
            Src::Udp(_) | Src::Ping(_) => self.source_send(i),
        }
    }

    pub(super) fn source_send(&mut self, i: usize) {
        let now = self.eng.now();
        let f = &mut self.flows[i];
        if !f.active || now >= f.stop {
            return;
        }
        let (kind, size, seq, next) = match &mut f.src {
            Src::Udp(u) => {
                let size = u.next_size(&mut f.rng);
                let seq = u.seq;
                u.seq += 1;
                (PktKind::Udp, size, seq, u.next_time(now, size, &mut f.rng))
            }
            Src::Ping(p) => {
                let seq = p.seq;
                p.seq += 1;
                (PktKind::EchoRequest, p.size, seq, now + p.interval)
            }
            Src::Tcp(_) => return,
        };
        if next < f.stop {
            self.eng.at(next, Ev::SourceSend(i as u32));
        }
        self.emit(i, kind, size, 0, seq, 0);
    }

    /// Send the segments in `self.out` for flow `i` and arm its timers.
    pub(super) fn emit_segments(&mut self, i: usize) {
        let hdr = crate::tcp::HEADER_BYTES;
        for k in 0..self.out.len() {
            let s = self.out[k];
            let ecn = (self.sc.flows[i].kind.ecn()).then_some((s.ect, s.cwr));
            self.emit_ecn(i, PktKind::Data, s.len + hdr, s.len, s.seq, s.tsecr, ecn);
        }
        self.out.clear();
        self.arm_sender(i);
    }

    /// Make sure heap events exist for the sender's transmission and pacing timers (an event
    /// that fires before its deadline moved later is re-armed then).
    pub(super) fn arm_sender(&mut self, i: usize) {
        if let Src::Tcp(c) = &mut self.flows[i].src {
            let ev = Ev::Rto(i as u32);
            arm(&mut self.eng, &mut c.rto_ev, c.snd.timer(), ev);
            let ev = Ev::Pacing(i as u32);
            arm(&mut self.eng, &mut c.pace_ev, c.snd.pacing_wakeup(), ev);
        }
    }

    pub(super) fn rto(&mut self, i: usize) {
        let now = self.eng.now();
        let Src::Tcp(c) = &mut self.flows[i].src else {
            return;
        };
        if now != c.rto_ev {
            return;
        }
        c.rto_ev = u64::MAX;
        match c.snd.timer() {
            Some(d) if d <= now => {
                self.out.clear();
                c.snd.on_timer(now, &mut self.out);
                self.emit_segments(i);
            }
            Some(_) => self.arm_sender(i),
            None => {}
        }
    }

    pub(super) fn pacing(&mut self, i: usize) {
        let now = self.eng.now();
        let Src::Tcp(c) = &mut self.flows[i].src else {
            return;
        };
        if now != c.pace_ev {
            return;
        }
        c.pace_ev = u64::MAX;
        self.out.clear();
        c.snd.on_pacing_timer(now, &mut self.out);
        self.emit_segments(i);
    }

    pub(super) fn delack(&mut self, i: usize) {
        let now = self.eng.now();
        let f = &mut self.flows[i];
        let Src::Tcp(c) = &mut f.src else { return };
        if now != c.delack_ev {
            return;
        }
        c.delack_ev = u64::MAX;
        if let Some(a) = c.rcv.on_timer(now) {
            self.send_ack(i, a);
        }
        self.arm_receiver(i);
    }

    pub(super) fn arm_receiver(&mut self, i: usize) {
        if let Src::Tcp(c) = &mut self.flows[i].src {
            let ev = Ev::DelAck(i as u32);
            arm(&mut self.eng, &mut c.delack_ev, c.rcv.timer(), ev);
        }
    }

    pub(super) fn send_ack(&mut self, i: usize, a: AckInfo) {
        let slot = self.acks.put(a);
        let f = &self.flows[i];
        let mut meta = reversed(f.meta);
        // Charged as a data packet is: its IP length, the link's framing, the policy's link
        // layer (the uplink's scheduler and wire see the frame the routers see: 66 bytes for a
        // plain ACK with `overhead = 14`).
        meta.len = f
            .link
            .size(a.ip_len(matches!(meta.l3, L3::Ipv6)) + f.overhead);
        let p = SimPacket {
            meta,
            flow: i as u32,
            payload: slot,
            kind: PktKind::Ack,
            seq: a.ack,
            sent_at: a.tsval,
            echo: 0,
            // Only a scheduler reads the header facts: the uplink's, when there is one.
            tcp: self.up.is_some().then(|| Box::new(a.tcp_info())),
            cwr: false,
        };
        let f = &mut self.flows[i];
        let extra = crate::jitter::ack_delay(&mut f.jitter);
        if extra == 0 && f.ack_out.is_empty() {
            self.send_back(p);
            return;
        }
        // Never before the flow's previous ACK: the receiver keeps its ACKs in order.
        let now = self.eng.now();
        let t = f
            .ack_out
            .back()
            .map_or(now + extra, |&(last, _)| last.max(now + extra));
        f.ack_out.push_back((t, p));
        self.eng.at(t, Ev::AckOut(i as u32));
    }

    /// A packet reaches its sink.
    pub(super) fn deliver(&mut self, p: SimPacket) {
        let now = self.eng.now();
        let i = p.flow as usize;
        let f = &mut self.flows[i];
        match p.kind {
            PktKind::Data => {
                let Src::Tcp(c) = &mut f.src else { return };
                c.rcv.on_ecn(p.meta.ecn(), p.cwr, p.seq, p.payload);
                let (delivered, ack) = c.rcv.on_segment(p.seq, p.payload, p.sent_at, p.echo, now);
                f.m.deliver_tcp(delivered, now);
                if let Some(a) = ack {
                    self.send_ack(i, a);
                }
                self.arm_receiver(i);
            }
            PktKind::Udp => {
                f.m.delivered += u64::from(p.payload);
                f.m.owd_sample(now - p.sent_at);
            }
            PktKind::EchoRequest => {
                f.m.delivered += u64::from(p.payload);
                f.m.owd.record(now - p.sent_at);
                let mut r = p;
                r.kind = PktKind::EchoReply;
                r.meta = reversed(r.meta);
                self.send_back(r);
            }
            PktKind::Ack | PktKind::EchoReply => {}
        }
    }

    /// An ACK or echo reply reaches its source.
    pub(super) fn reply(&mut self, p: SimPacket) {
        let now = self.eng.now();
        let i = p.flow as usize;
        let f = &mut self.flows[i];
        match p.kind {
            PktKind::Ack => {
                let Some(a) = self.acks.take(p.payload) else {
                    return;
                };
                let Src::Tcp(c) = &mut f.src else { return };
                self.out.clear();
                if let Some(rtt) = c.snd.on_ack(&a, now, &mut self.out) {
                    f.m.rtt_sample(rtt);
                }
                self.emit_segments(i);
            }
            PktKind::EchoReply => {
                let rtt = now - p.sent_at;
                f.m.rtt_sample(rtt);
                // A probe's RTT is the queue it met when it was sent: the point is placed at the
                // send time, as the lab's pinger places it (lab/src/traffic/ping.rs).
                if self.probes.is_multiple_of(self.probe_every) {
                    self.rtt_points.push((
                        p.sent_at as f64 / 1e9,
                        f.name.clone(),
                        rtt as f64 / 1e6,
                    ));
                }
                self.probes += 1;
            }
            _ => {}
        }
    }
}

/// Schedule a timer's event `ev` at `deadline` unless its pending event (at `pending`,
/// `u64::MAX` for none) comes earlier or at the same time; an event left pending for a
/// deadline that moved later is re-armed when it fires.
fn arm(eng: &mut Engine, pending: &mut u64, deadline: Option<u64>, ev: Ev) {
    if let Some(d) = deadline {
        if d < *pending {
            *pending = d;
            eng.at(d, ev);
        }
    }
}
