//! UDP floods from A to C (sendmmsg batches, as fast as possible or paced) and what arrives:
//! frames and bytes at C's interface, CPU of the shaper and of the machine, median of
//! `--repeat` runs.

use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context};

use super::bed::{rx_counters, Bed, BASE_PORT};
use super::cpu::{proc_cpu, MachineClock};
use crate::testbed::{in_ns, interrupted};

/// A UDP flood: payload size, destination ports, source sockets, pace and TOS.
#[derive(Clone)]
pub(super) struct Flood {
    pub(super) payload: usize,
    pub(super) ports: u16,
    pub(super) flows: u16,
    pub(super) rate_bps: Option<f64>,
    pub(super) tos: u8,
    /// Destination addresses: `n` consecutive ones from `first` (round robin, port
    /// `BASE_PORT`), routed to C (see `scale.rs`); `None`: C's own address on `ports` ports.
    pub(super) hosts: Option<(Ipv4Addr, u32)>,
}

/// Ethernet + IPv4 + UDP header bytes in front of a UDP payload.
pub(super) const UDP_OVERHEAD: usize = 14 + 20 + 8;

/// Send UDP datagrams of `payload` bytes from A to C's ports `BASE_PORT..BASE_PORT+ports`
/// (round robin) for `secs`, as fast as possible or paced to `rate_bps` of frame bits, using
/// sendmmsg batches. Source ports cycle over `flows`. Returns the thread, which
/// answers the frames sent.
pub(super) fn flood(
    bed: &Bed,
    f: Flood,
    secs: f64,
) -> anyhow::Result<std::thread::JoinHandle<u64>> {
    let a = bed.ns_a().to_string();
    let dst = bed.addr_c();
    Ok(std::thread::spawn(move || {
        in_ns(&a, move || flood_here(&f, dst, secs)).unwrap_or(0)
    }))
}

pub(super) fn flood_here(f: &Flood, dst: Ipv4Addr, secs: f64) -> u64 {
    let socks: Vec<UdpSocket> = (0..f.flows.max(1))
        .filter_map(|_| UdpSocket::bind("0.0.0.0:0").ok())
        .collect();
    if socks.is_empty() {
        return 0;
    }
    for s in &socks {
        let _ = set_tos(s, f.tos);
    }
    const BATCH: usize = 32;
    let buf = vec![0x42u8; f.payload];
    let sockaddr = |ip: u32, port: u16| libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: port.to_be(),
        sin_addr: libc::in_addr { s_addr: ip.to_be() },
        sin_zero: [0; 8],
    };
    let addrs: Vec<libc::sockaddr_in> = match f.hosts {
        Some((first, n)) => (0..n.max(1))
            .map(|k| sockaddr(u32::from(first).wrapping_add(k), BASE_PORT))
            .collect(),
        None => (0..f.ports.max(1))
            .map(|k| sockaddr(u32::from(dst), BASE_PORT + k))
            .collect(),
    };
    let mut iov = libc::iovec {
        iov_base: buf.as_ptr() as *mut libc::c_void,
        iov_len: buf.len(),
    };
    let frame_bits = ((f.payload + UDP_OVERHEAD) * 8) as f64;
    let t0 = Instant::now();
    let mut sent = 0u64;
    let mut next_port = 0usize;
    let mut sock = 0usize;
    while t0.elapsed().as_secs_f64() < secs && !interrupted() {
        // Paced: sleep until the next frame is due, then send every frame due by then in one
        // batch. The sender never spins: on this 2-core machine a spinning sender would take
        // a whole core from the shaper under test (and a NIC's sender costs the router nothing).
        let n = match f.rate_bps {
            Some(rate) => {
                let now = t0.elapsed().as_secs_f64();
                let due = (now * rate / frame_bits).floor() as u64 + 1;
                if due <= sent {
                    let wait = (sent as f64 * frame_bits / rate - now).max(0.0);
                    std::thread::sleep(Duration::from_secs_f64(wait.max(20e-6)));
                    continue;
                }
                ((due - sent) as usize).min(BATCH)
            }
            None => BATCH,
        };
        let mut hdrs: Vec<libc::mmsghdr> = (0..n)
            .map(|i| {
                let a = &addrs[(next_port + i) % addrs.len()];
                // SAFETY: all-zero is a valid msghdr.
                let mut h: libc::mmsghdr = unsafe { std::mem::zeroed() };
                h.msg_hdr.msg_name = a as *const libc::sockaddr_in as *mut libc::c_void;
                h.msg_hdr.msg_namelen = std::mem::size_of::<libc::sockaddr_in>() as u32;
                h.msg_hdr.msg_iov = &mut iov;
                h.msg_hdr.msg_iovlen = 1;
                h
            })
            .collect();
        let s = &socks[sock % socks.len()];
        sock += 1;
        // SAFETY: `hdrs` point at live addresses and one live iovec over `buf`.
        let r = unsafe { libc::sendmmsg(s.as_raw_fd(), hdrs.as_mut_ptr(), n as u32, 0) };
        if r > 0 {
            sent += r as u64;
            next_port = (next_port + r as usize) % addrs.len();
        } else {
            // Full socket buffer or ENOBUFS: yield and go on.
            std::thread::yield_now();
        }
    }
    sent
}

/// UDP sockets in C on the flood's ports that never read (so no ICMP port-unreachable goes
/// back); dropped when the returned guard goes.
pub(super) fn sinks(bed: &Bed, ports: u16) -> anyhow::Result<Vec<UdpSocket>> {
    let c = bed.ns_c().to_string();
    let ip = bed.addr_c();
    in_ns(&c, move || {
        (0..ports.max(1))
            .map(|k| UdpSocket::bind(SocketAddrV4::new(ip, BASE_PORT + k)))
            .collect::<std::io::Result<Vec<_>>>()
    })?
    .context("binding the sink sockets in C")
}

/// Frames and frame bytes C received while `f` ran; CPU seconds of the shaper process and of
/// the machine.
pub(super) struct Measured {
    pub(super) sent: u64,
    pub(super) frames: u64,
    pub(super) bytes: u64,
    pub(super) secs: f64,
    pub(super) shaper_cpu: Option<f64>,
    pub(super) machine_cpu: f64,
}

impl Measured {
    pub(super) fn kpps(&self) -> f64 {
        self.frames as f64 / self.secs / 1e3
    }
    pub(super) fn mbit(&self) -> f64 {
        self.bytes as f64 * 8.0 / self.secs / 1e6
    }
    pub(super) fn shaper_ns_per_pkt(&self) -> Option<f64> {
        self.shaper_cpu
            .filter(|_| self.frames > 0)
            .map(|c| c * 1e9 / self.frames as f64)
    }
    pub(super) fn machine_ns_per_pkt(&self) -> f64 {
        if self.frames == 0 {
            return f64::NAN;
        }
        self.machine_cpu * 1e9 / self.frames as f64
    }
}

/// Run a flood through `bed` and count what arrives at C over the middle of the run (the
/// first 0.3 s are warm-up).
pub(super) fn measure_flood(bed: &Bed, f: Flood, secs: f64) -> anyhow::Result<Measured> {
    let n = REPEAT.load(std::sync::atomic::Ordering::Relaxed).max(1);
    let mut runs = Vec::with_capacity(n);
    for _ in 0..n {
        runs.push(measure_flood_once(bed, f.clone(), secs)?);
    }
    runs.sort_by_key(|m| m.frames);
    Ok(runs.swap_remove(n / 2))
}

/// How many times each flood figure is measured (the median is reported).
pub(super) static REPEAT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(3);

pub(super) fn measure_flood_once(bed: &Bed, f: Flood, secs: f64) -> anyhow::Result<Measured> {
    let _sinks = sinks(bed, f.ports)?;
    let warm = 0.3;
    let h = flood(bed, f, secs + warm)?;
    std::thread::sleep(Duration::from_secs_f64(warm));
    let (p0, b0) = rx_counters(bed.ns_c(), bed.dev_c())?;
    let c0 = bed.router_pid().and_then(proc_cpu);
    let m0 = MachineClock::now();
    let t0 = Instant::now();
    std::thread::sleep(Duration::from_secs_f64(secs));
    let (p1, b1) = rx_counters(bed.ns_c(), bed.dev_c())?;
    let el = t0.elapsed().as_secs_f64();
    let c1 = bed.router_pid().and_then(proc_cpu);
    let m1 = MachineClock::now();
    let sent = h
        .join()
        .map_err(|_| anyhow!("the traffic thread panicked"))?;
    Ok(Measured {
        sent,
        frames: p1 - p0,
        bytes: b1 - b0,
        secs: el,
        shaper_cpu: c0.zip(c1).map(|(a, b)| b - a),
        machine_cpu: m1.busy_since(&m0),
    })
}

pub(super) fn fmt_opt(v: Option<f64>, digits: usize) -> String {
    v.map(|x| format!("{x:.digits$}"))
        .unwrap_or_else(|| "–".into())
}

/// Set the TOS byte of a UDP socket's packets.
pub(super) fn set_tos(s: &UdpSocket, tos: u8) -> std::io::Result<()> {
    crate::traffic::setsockopt_int(s.as_raw_fd(), libc::IPPROTO_IP, libc::IP_TOS, tos.into())
}

pub(super) fn small_flood(ports: u16, flows: u16) -> Flood {
    Flood {
        payload: 18, // 60-byte frames, the Ethernet minimum without FCS
        ports,
        flows,
        rate_bps: None,
        tos: 0,
        hosts: None,
    }
}
