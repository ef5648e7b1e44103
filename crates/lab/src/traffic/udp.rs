//! UDP flows: a source pacing datagrams by absolute deadlines (CBR, Poisson or on/off, sizes
//! from the flow's mix), and a sink that counts them and measures their one-way delay.
//!
//! Each datagram carries its sequence number and send time on the monotonic clock both ends
//! share (one machine), so loss and one-way delay need no clock synchronisation. Deadlines are
//! absolute with a bounded catch-up, so a late wake-up does not shift the rest of the flow. The
//! random gaps and sizes come from a seeded PRNG: a run's pattern is reproducible.

use std::net::{SocketAddrV4, UdpSocket};
use std::os::fd::{AsRawFd, FromRawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use linkshare_sim::scenario::{FlowKind, Pattern, SizeMix};

use super::sockets::{bound_socket, setsockopt_int};
use super::{since, wait_until, FlowLive, Plan, POLL};

/// IP + UDP headers.
const UDP_HDR: usize = 28;

/// A UDP sink: bind the flow's destination, report on `ready`, then count datagrams and their
/// one-way delay (once t0 is known) until the traffic is stopped.
pub(super) fn udp_sink(
    p: &Plan,
    l: &FlowLive,
    stop: &AtomicBool,
    t0_cell: &Mutex<Option<Instant>>,
    ready: std::sync::mpsc::Sender<Result<(), String>>,
) {
    let s = match UdpSocket::bind(SocketAddrV4::new(p.dst, p.spec.dport))
        .and_then(|s| s.set_read_timeout(Some(POLL)).map(|_| s))
    {
        Ok(s) => s,
        Err(e) => {
            let _ = ready.send(Err(format!(
                "flow `{}`: sink on {}:{}: {e}",
                p.spec.name, p.dst, p.spec.dport
            )));
            return;
        }
    };
    let _ = setsockopt_int(
        s.as_raw_fd(),
        libc::SOL_SOCKET,
        libc::SO_RCVBUFFORCE,
        4 << 20,
    );
    let _ = ready.send(Ok(()));
    let mut buf = vec![0u8; 65536];
    let mut t0: Option<Instant> = None;
    while !stop.load(Ordering::Relaxed) {
        match s.recv(&mut buf) {
            Ok(n) => {
                let arrived = Instant::now();
                l.delivered
                    .fetch_add((n + UDP_HDR) as u64, Ordering::Relaxed);
                l.packets_received.fetch_add(1, Ordering::Relaxed);
                if t0.is_none() {
                    t0 = t0_cell.lock().ok().and_then(|g| *g);
                }
                if let (Some(t0), Some(b)) = (t0, buf.get(8..16)) {
                    let mut a = [0u8; 8];
                    a.copy_from_slice(b);
                    let sent_ns = u64::from_be_bytes(a);
                    let at_ns = arrived.saturating_duration_since(t0).as_nanos() as u64;
                    if n >= 16 && at_ns >= sent_ns {
                        if let Ok(mut h) = l.owd.lock() {
                            h.record(at_ns - sent_ns);
                        }
                        l.owd_sum_ns.fetch_add(at_ns - sent_ns, Ordering::Relaxed);
                        l.owd_n.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
            Err(_) => continue,
        }
    }
}

/// A small deterministic PRNG (xorshift64*) for Poisson gaps and size mixes.
struct Rng(u64);

impl Rng {
    fn unit(&mut self) -> f64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 11) as f64 / (1u64 << 53) as f64
    }
    fn size(&mut self, mix: &SizeMix) -> u32 {
        let total: u64 = mix.sizes.iter().map(|s| s.1 as u64).sum();
        let mut x = (self.unit() * total as f64) as u64;
        for (size, w) in &mix.sizes {
            if x < *w as u64 {
                return *size;
            }
            x -= *w as u64;
        }
        mix.max()
    }
}

/// A UDP source: datagrams from `start` to `stop` at the flow's pattern and sizes.
pub(super) fn udp_source(
    p: &Plan,
    l: &FlowLive,
    stop: &AtomicBool,
    t0: Instant,
) -> anyhow::Result<()> {
    let FlowKind::Udp(spec) = &p.spec.kind else {
        return Ok(());
    };
    let rate = spec.rate.0 as f64;
    if rate <= 0.0 || p.start >= p.stop {
        return Ok(());
    }
    let fd = bound_socket(libc::SOCK_DGRAM, 0, SocketAddrV4::new(p.src, p.spec.sport))?;
    // SAFETY: we own the fd; the socket closes it.
    let s = unsafe { UdpSocket::from_raw_fd(fd) };
    setsockopt_int(fd, libc::IPPROTO_IP, libc::IP_TOS, p.spec.tos as i32)?;
    s.connect(SocketAddrV4::new(p.dst, p.spec.dport))?;
    let mut rng = Rng(p.seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
    let mut buf = vec![0u8; spec.size.max() as usize];
    let mut next = p.start;
    let mut seq = 0u64;
    let (on, off) = match spec.pattern {
        Pattern::OnOff { on, off } => (on.as_secs_f64(), off.as_secs_f64()),
        _ => (0.0, 0.0),
    };
    loop {
        // Whether the source sleeps for its next datagram (else a blocking `send` made it late).
        let sleeps = since(t0) < next;
        if !wait_until(t0, next, stop) || next >= p.stop {
            return Ok(());
        }
        // Bounded catch-up: never more than 50 ms of backlog in one burst. What a late wake-up
        // skips is counted (the lab's check of its senders: run::offered).
        let now = since(t0);
        if now - next > 0.05 {
            if sleeps {
                let skipped = (now - 0.05).min(p.stop) - next;
                l.late_skipped_ns
                    .fetch_add((skipped.max(0.0) * 1e9) as u64, Ordering::Relaxed);
            }
            next = now - 0.05;
        }
        while next <= now && next < p.stop {
            let size = rng.size(&spec.size) as usize;
            let payload = size.saturating_sub(UDP_HDR).min(buf.len());
            if payload >= 8 {
                buf[..8].copy_from_slice(&seq.to_be_bytes());
            }
            if payload >= 16 {
                let ns = Instant::now().saturating_duration_since(t0).as_nanos() as u64;
                buf[8..16].copy_from_slice(&ns.to_be_bytes());
            }
            match s.send(&buf[..payload]) {
                Ok(_) => {
                    l.packets_sent.fetch_add(1, Ordering::Relaxed);
                    seq += 1;
                }
                // A full socket buffer or an unreachable sink is the network's answer: count
                // the datagram as sent and lost, as a router would.
                Err(_) => {
                    l.packets_sent.fetch_add(1, Ordering::Relaxed);
                }
            }
            let gap = size as f64 * 8.0 / rate;
            next += match spec.pattern {
                Pattern::Cbr => gap,
                Pattern::Poisson => -gap * (1.0 - rng.unit()).ln(),
                Pattern::OnOff { .. } => {
                    let period = on + off;
                    let phase = (next + gap - p.start) % period;
                    if phase >= on {
                        gap + (period - phase)
                    } else {
                        gap
                    }
                }
            };
        }
    }
}
