//! The scenario's flows as real kernel sockets: sources in the sender namespace, sinks in the
//! sink namespace, counters shared with the sampler through atomics.
//!
//! * **tcp**: one connection per flow, bulk until `stop` (or `bytes`). The window cap is the
//!   receiver's buffer: `SO_RCVBUF` (forced, as root) set to `window` on the listening socket
//!   before the handshake, so the advertised window — and so the data in flight — stays at about
//!   `window`; `SO_SNDBUF` is set to the same. RTT samples are the kernel's smoothed RTT
//!   (`TCP_INFO.tcpi_rtt`) read every 50 ms; retransmits are `tcpi_total_retrans`.
//! * **udp**: datagrams of the flow's IP `size` (payload `size − 28`) paced at `rate` by a
//!   deadline loop (absolute deadlines, 1 ns timer slack, bounded catch-up), CBR, Poisson or
//!   on/off. Each datagram carries its number and its send time, so the sink measures loss and
//!   one-way delay (both ends read the same monotonic clock).
//! * **ping**: ICMP echo through a ping socket (`SOCK_DGRAM`, `IPPROTO_ICMP`) every `interval`;
//!   the echo carries its send time, the RTT is measured on the reply.
//!
//! Every socket gets the flow's TOS byte (`IP_TOS`) and is bound to the flow's source address and
//! port, so the policy's filters see exactly what the simulator's classifier sees.

use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddrV4, TcpListener, TcpStream, UdpSocket};
use std::os::fd::{AsRawFd, FromRawFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use linkshare_sim::metrics::Hist;
use linkshare_sim::scenario::{FlowKind, FlowSpec, Pattern, SizeMix};

use super::testbed::spawn_in_ns;

/// IP + UDP headers.
const UDP_HDR: usize = 28;
/// IP + ICMP headers.
const ICMP_HDR: usize = 28;
/// How often blocking calls wake up to check the clock and the stop flag.
const POLL: Duration = Duration::from_millis(50);

/// What one flow measured so far; shared between its threads and the sampler.
#[derive(Default)]
pub struct FlowLive {
    /// Bytes delivered at the sink: TCP payload, UDP IP bytes, ping IP bytes of echoes answered.
    pub delivered: AtomicU64,
    pub packets_sent: AtomicU64,
    /// Datagrams / echoes received (UDP, ping).
    pub packets_received: AtomicU64,
    pub retransmits: AtomicU64,
    /// RTT samples: (seconds since t0, ms).
    pub rtt: Mutex<Vec<(f64, f64)>>,
    /// One-way delay in ns (UDP).
    pub owd: Mutex<Hist>,
    /// First error a thread of the flow ran into.
    pub error: Mutex<Option<String>>,
}

impl FlowLive {
    fn fail(&self, e: impl std::fmt::Display) {
        if let Ok(mut g) = self.error.lock() {
            g.get_or_insert_with(|| e.to_string());
        }
    }
}

/// One flow of the scenario, checked for the lab (IPv4 only).
#[derive(Clone, Debug)]
pub struct Plan {
    pub spec: FlowSpec,
    pub src: Ipv4Addr,
    pub dst: Ipv4Addr,
    /// Seconds after t0.
    pub start: f64,
    pub stop: f64,
    pub seed: u64,
}

impl Plan {
    pub fn new(spec: &FlowSpec, duration: f64, seed: u64) -> anyhow::Result<Plan> {
        let (std::net::IpAddr::V4(src), std::net::IpAddr::V4(dst)) = (spec.src, spec.dst) else {
            bail!(
                "flow `{}`: the lab runs IPv4 flows only (src {}, dst {})",
                spec.name,
                spec.src,
                spec.dst
            );
        };
        Ok(Plan {
            spec: spec.clone(),
            src,
            dst,
            start: spec.start.as_secs_f64(),
            stop: spec.stop.as_secs_f64().min(duration),
            seed,
        })
    }
}

/// The running flows: join them with [`Traffic::finish`].
pub struct Traffic {
    threads: Vec<std::thread::JoinHandle<()>>,
    stop: Arc<AtomicBool>,
}

impl Traffic {
    /// Start the sinks in `ns_c`, wait until they listen, then the sources in `ns_a`; returns
    /// t0, the instant the scenario's time 0 corresponds to.
    pub fn start(
        plans: &[Plan],
        live: &[Arc<FlowLive>],
        ns_a: &str,
        ns_c: &str,
    ) -> anyhow::Result<(Traffic, Instant)> {
        let stop = Arc::new(AtomicBool::new(false));
        let mut tr = Traffic {
            threads: Vec::new(),
            stop: stop.clone(),
        };
        // t0 is set after the sinks are ready; they wait for it through this cell.
        let t0_cell: Arc<Mutex<Option<Instant>>> = Arc::new(Mutex::new(None));
        let mut ready = Vec::new();
        for (p, l) in plans.iter().zip(live) {
            let (tx, rx) = std::sync::mpsc::channel::<Result<(), String>>();
            let (p, l, st, t0c) = (p.clone(), l.clone(), stop.clone(), t0_cell.clone());
            match &p.spec.kind {
                FlowKind::Tcp(_) => {
                    tr.threads
                        .push(spawn_in_ns(ns_c, move || tcp_sink(&p, &l, &st, tx))?);
                    ready.push(rx);
                }
                FlowKind::Udp(_) => {
                    tr.threads
                        .push(spawn_in_ns(ns_c, move || udp_sink(&p, &l, &st, &t0c, tx))?);
                    ready.push(rx);
                }
                FlowKind::Ping(_) => {}
            }
        }
        for rx in ready {
            match rx.recv_timeout(Duration::from_secs(5)) {
                Ok(Ok(())) => {}
                Ok(Err(e)) => {
                    tr.finish();
                    bail!("{e}");
                }
                Err(_) => {
                    tr.finish();
                    bail!("a sink did not start within 5 s");
                }
            }
        }
        if plans
            .iter()
            .any(|p| matches!(p.spec.kind, FlowKind::Ping(_)))
        {
            // Ping sockets for root: the group range is per namespace.
            super::testbed::in_ns(ns_a, || {
                std::fs::write("/proc/sys/net/ipv4/ping_group_range", "0 2147483647")
            })?
            .context("cannot allow ping sockets in the sender namespace")?;
        }
        let t0 = Instant::now() + Duration::from_millis(100);
        if let Ok(mut g) = t0_cell.lock() {
            *g = Some(t0);
        }
        for (p, l) in plans.iter().zip(live) {
            let (p, l, st) = (p.clone(), l.clone(), stop.clone());
            tr.threads.push(spawn_in_ns(ns_a, move || {
                set_timer_slack();
                let r = match &p.spec.kind {
                    FlowKind::Tcp(_) => tcp_source(&p, &l, &st, t0),
                    FlowKind::Udp(_) => udp_source(&p, &l, &st, t0),
                    FlowKind::Ping(_) => ping_source(&p, &l, &st, t0),
                };
                if let Err(e) = r {
                    l.fail(format!("flow `{}`: {e:#}", p.spec.name));
                }
            })?);
        }
        Ok((tr, t0))
    }

    /// Tell every thread to stop and wait for them.
    pub fn finish(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

impl Drop for Traffic {
    fn drop(&mut self) {
        self.finish();
    }
}

fn set_timer_slack() {
    // SAFETY: prctl with integer arguments; affects only this thread's timers.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong) };
}

fn since(t0: Instant) -> f64 {
    Instant::now().saturating_duration_since(t0).as_secs_f64()
}

/// Sleep until `t` seconds after t0 or until stopped; false if stopped.
fn wait_until(t0: Instant, t: f64, stop: &AtomicBool) -> bool {
    loop {
        if stop.load(Ordering::Relaxed) {
            return false;
        }
        let now = since(t0);
        if now >= t {
            return true;
        }
        std::thread::sleep(Duration::from_secs_f64((t - now).min(0.05)));
    }
}

/// `setsockopt` of an int option.
pub(crate) fn setsockopt_int(fd: RawFd, level: i32, name: i32, v: i32) -> std::io::Result<()> {
    // SAFETY: a valid fd and a pointer to a live c_int of the size passed.
    let r = unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            (&v as *const i32).cast(),
            std::mem::size_of::<i32>() as libc::socklen_t,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// A socket of `ty`/`proto`, with SO_REUSEADDR, bound to `addr`.
fn bound_socket(ty: i32, proto: i32, addr: SocketAddrV4) -> anyhow::Result<RawFd> {
    // SAFETY: plain socket call.
    let fd = unsafe { libc::socket(libc::AF_INET, ty | libc::SOCK_CLOEXEC, proto) };
    if fd < 0 {
        bail!("socket: {}", std::io::Error::last_os_error());
    }
    let close_on_err = |e: anyhow::Error| {
        // SAFETY: closing the fd we just opened.
        unsafe { libc::close(fd) };
        e
    };
    setsockopt_int(fd, libc::SOL_SOCKET, libc::SO_REUSEADDR, 1)
        .map_err(|e| close_on_err(e.into()))?;
    let sa = sockaddr(addr);
    // SAFETY: `sa` is a valid sockaddr_in of the size passed.
    let r = unsafe {
        libc::bind(
            fd,
            (&sa as *const libc::sockaddr_in).cast(),
            std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
        )
    };
    if r != 0 {
        let e = std::io::Error::last_os_error();
        return Err(close_on_err(anyhow::anyhow!("bind {addr}: {e}")));
    }
    Ok(fd)
}

fn sockaddr(a: SocketAddrV4) -> libc::sockaddr_in {
    libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: a.port().to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from(*a.ip()).to_be(),
        },
        sin_zero: [0; 8],
    }
}

fn connect_fd(fd: RawFd, to: SocketAddrV4) -> std::io::Result<()> {
    let sa = sockaddr(to);
    // SAFETY: `sa` is a valid sockaddr_in of the size passed.
    let r = unsafe {
        libc::connect(
            fd,
            (&sa as *const libc::sockaddr_in).cast(),
            std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

fn window_of(p: &Plan) -> i32 {
    match &p.spec.kind {
        FlowKind::Tcp(t) => t
            .window
            .unwrap_or(linkshare_sim::scenario::DEFAULT_WINDOW)
            .clamp(4096, i32::MAX as u64 / 2) as i32,
        _ => 0,
    }
}

fn tcp_sink(
    p: &Plan,
    l: &FlowLive,
    stop: &AtomicBool,
    ready: std::sync::mpsc::Sender<Result<(), String>>,
) {
    let setup = || -> anyhow::Result<TcpListener> {
        let fd = bound_socket(libc::SOCK_STREAM, 0, SocketAddrV4::new(p.dst, p.spec.dport))?;
        // SAFETY: we own the fd; the listener closes it.
        let lst = unsafe { TcpListener::from_raw_fd(fd) };
        // The window cap: the receive buffer, forced past rmem_max (we are root).
        setsockopt_int(fd, libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, window_of(p))?;
        // SAFETY: listen on a bound socket we own.
        if unsafe { libc::listen(fd, 4) } != 0 {
            bail!("listen: {}", std::io::Error::last_os_error());
        }
        lst.set_nonblocking(true)?;
        Ok(lst)
    };
    let lst = match setup() {
        Ok(l) => l,
        Err(e) => {
            let _ = ready.send(Err(format!(
                "flow `{}`: sink on {}:{}: {e:#}",
                p.spec.name, p.dst, p.spec.dport
            )));
            return;
        }
    };
    let _ = ready.send(Ok(()));
    let mut conn = loop {
        if stop.load(Ordering::Relaxed) {
            return;
        }
        match lst.accept() {
            Ok((s, _)) => break s,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => std::thread::sleep(POLL / 5),
            Err(e) => {
                l.fail(format!("flow `{}`: accept: {e}", p.spec.name));
                return;
            }
        }
    };
    if conn.set_nonblocking(false).is_err() || conn.set_read_timeout(Some(POLL)).is_err() {
        return;
    }
    let mut buf = vec![0u8; 1 << 16];
    while !stop.load(Ordering::Relaxed) {
        match conn.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                l.delivered.fetch_add(n as u64, Ordering::Relaxed);
            }
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock
                        | std::io::ErrorKind::TimedOut
                        | std::io::ErrorKind::Interrupted
                ) => {}
            Err(_) => break,
        }
    }
}

fn tcp_source(p: &Plan, l: &FlowLive, stop: &AtomicBool, t0: Instant) -> anyhow::Result<()> {
    let FlowKind::Tcp(spec) = &p.spec.kind else {
        return Ok(());
    };
    if !wait_until(t0, p.start, stop) || p.start >= p.stop {
        return Ok(());
    }
    let fd = bound_socket(libc::SOCK_STREAM, 0, SocketAddrV4::new(p.src, p.spec.sport))?;
    // SAFETY: we own the fd; the stream closes it.
    let mut s = unsafe { TcpStream::from_raw_fd(fd) };
    setsockopt_int(fd, libc::SOL_SOCKET, libc::SO_SNDBUFFORCE, window_of(p))?;
    setsockopt_int(fd, libc::IPPROTO_IP, libc::IP_TOS, p.spec.tos as i32)?;
    connect_fd(fd, SocketAddrV4::new(p.dst, p.spec.dport))
        .with_context(|| format!("connect to {}:{}", p.dst, p.spec.dport))?;
    s.set_write_timeout(Some(POLL))?;
    let chunk = vec![0x5au8; 16384];
    let mut left = spec.bytes.unwrap_or(u64::MAX);
    let mut next_info = 0.0;
    while left > 0 && !stop.load(Ordering::Relaxed) {
        let now = since(t0);
        if now >= p.stop {
            break;
        }
        if now >= next_info {
            next_info = now + 0.05;
            if let Some((rtt_us, retrans)) = tcp_info(fd) {
                if rtt_us > 0 {
                    if let Ok(mut v) = l.rtt.lock() {
                        v.push((now, rtt_us as f64 / 1e3));
                    }
                }
                l.retransmits.store(retrans as u64, Ordering::Relaxed);
            }
        }
        let n = chunk.len().min(usize::try_from(left).unwrap_or(usize::MAX));
        match s.write(&chunk[..n]) {
            Ok(w) => left -= w as u64,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock
                        | std::io::ErrorKind::TimedOut
                        | std::io::ErrorKind::Interrupted
                ) => {}
            Err(e) => bail!("send: {e}"),
        }
    }
    if let Some((_, retrans)) = tcp_info(fd) {
        l.retransmits.store(retrans as u64, Ordering::Relaxed);
    }
    let _ = s.shutdown(std::net::Shutdown::Write);
    Ok(())
}

/// The kernel's smoothed RTT (µs) and total retransmissions of a TCP socket.
fn tcp_info(fd: RawFd) -> Option<(u32, u32)> {
    // SAFETY: tcp_info is plain old data; zeroed is valid.
    let mut info: libc::tcp_info = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::tcp_info>() as libc::socklen_t;
    // SAFETY: `info` has `len` writable bytes.
    let r = unsafe {
        libc::getsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            (&mut info as *mut libc::tcp_info).cast(),
            &mut len,
        )
    };
    (r == 0).then_some((info.tcpi_rtt, info.tcpi_total_retrans))
}

fn udp_sink(
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

fn udp_source(p: &Plan, l: &FlowLive, stop: &AtomicBool, t0: Instant) -> anyhow::Result<()> {
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
        if !wait_until(t0, next, stop) || next >= p.stop {
            return Ok(());
        }
        // Bounded catch-up: never more than 50 ms of backlog in one burst.
        let now = since(t0);
        if now - next > 0.05 {
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

fn ping_source(p: &Plan, l: &FlowLive, stop: &AtomicBool, t0: Instant) -> anyhow::Result<()> {
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
        if now >= p.stop + 1.0 {
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
