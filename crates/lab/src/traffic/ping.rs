//! Ping flows: ICMP echo requests through a ping socket (`SOCK_DGRAM`, `IPPROTO_ICMP`; Linux
//! net/ipv4/ping.c, allowed for root by `ping_group_range`) every `interval`, the RTT measured
//! on each reply from the send time the echo carries.

use std::net::{SocketAddrV4, UdpSocket};
use std::os::fd::FromRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context;
use linkshare_sim::scenario::FlowKind;

use super::sockets::{bound_socket, setsockopt_int};
use super::{since, wait_until, FlowLive, Plan};

/// IP + ICMP headers.
const ICMP_HDR: usize = 28;

/// A ping source: an echo every `interval` from `start` to `stop`, RTTs from the replies.
pub(super) fn ping_source(
    p: &Plan,
    l: &FlowLive,
    stop: &AtomicBool,
    t0: Instant,
) -> anyhow::Result<()> {
    let FlowKind::Ping(spec) = &p.spec.kind else {
        return Ok(());
    };
    let fd = bound_socket(
        libc::SOCK_DGRAM,
        libc::IPPROTO_ICMP,
        SocketAddrV4::new(p.src, 0),
    )
    .context("ping socket")?;
    // SAFETY: we own the fd; the socket closes it.
    let s = unsafe { UdpSocket::from_raw_fd(fd) };
    setsockopt_int(fd, libc::IPPROTO_IP, libc::IP_TOS, p.spec.tos as i32)?;
    s.connect(SocketAddrV4::new(p.dst, 0))?;
    s.set_read_timeout(Some(Duration::from_millis(5)))?;
    let size = spec.size as usize;
    let data = size.saturating_sub(ICMP_HDR).max(8);
    let mut req = vec![0u8; 8 + data];
    let mut reply = vec![0u8; 65536];
    let interval = spec.interval.as_secs_f64().max(0.001);
    let mut next = p.start;
    let mut seq: u16 = 0;
    if !wait_until(t0, p.start, stop) {
        return Ok(());
    }
    while !stop.load(Ordering::Relaxed) {
        let now = since(t0);
        if now >= p.stop + p.drain() {
            break;
        }
        if now >= next && now < p.stop {
            req[0] = 8; // echo request
            req[1] = 0;
            req[6..8].copy_from_slice(&seq.to_be_bytes());
            let ns = Instant::now().saturating_duration_since(t0).as_nanos() as u64;
            req[8..16].copy_from_slice(&ns.to_be_bytes());
            if s.send(&req).is_ok() {
                l.packets_sent.fetch_add(1, Ordering::Relaxed);
            }
            seq = seq.wrapping_add(1);
            next += interval;
        }
        if let Ok(n) = s.recv(&mut reply) {
            let at = Instant::now().saturating_duration_since(t0).as_nanos() as u64;
            if n >= 16 && reply[0] == 0 {
                let mut a = [0u8; 8];
                a.copy_from_slice(&reply[8..16]);
                let sent = u64::from_be_bytes(a);
                if at >= sent {
                    l.packets_received.fetch_add(1, Ordering::Relaxed);
                    l.delivered.fetch_add(size as u64, Ordering::Relaxed);
                    if let Ok(mut v) = l.rtt.lock() {
                        v.push((sent as f64 / 1e9, (at - sent) as f64 / 1e6));
                    }
                }
            }
        }
    }
    Ok(())
}
