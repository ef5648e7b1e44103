//! The scenario's flows as real kernel sockets: sources in the sender namespace, sinks in the
//! sink namespace, counters shared with the sampler through atomics.
//!
//! * **tcp**: one connection per flow, connected (handshake done) before t0, written from `start`
//!   to `stop` (or `bytes`) in chunks of [`NOTSENT_LOWAT`] bytes with `TCP_NOTSENT_LOWAT` set to
//!   the same, so at `stop` at most about that much written data is still unsent (Linux
//!   net/ipv4/tcp.c: `tcp_stream_memory_free` holds writers while `notsent ≥ lowat`). The socket
//!   runs the flow's `cc` (`TCP_CONGESTION`, read back). A `window` set in the file is the
//!   receiver's buffer: `SO_RCVBUF` (forced, as root) on the listening socket before the
//!   handshake, so the advertised window stays at about `window`, and `SO_SNDBUF` the same;
//!   without one both buffers autotune as Linux's do. RTT samples are the kernel's smoothed RTT
//!   (`TCP_INFO.tcpi_rtt`) read every 50 ms; retransmits are `tcpi_total_retrans`, read until
//!   everything written is acknowledged.
//! * **udp**: datagrams of the flow's IP `size` (payload `size − 28`) paced at `rate` by a
//!   deadline loop (absolute deadlines, 1 ns timer slack, bounded catch-up), CBR, Poisson or
//!   on/off. Each datagram carries its number and its send time, so the sink measures loss and
//!   one-way delay (both ends read the same monotonic clock).
//! * **ping**: ICMP echo through a ping socket (`SOCK_DGRAM`, `IPPROTO_ICMP`) every `interval`;
//!   the echo carries its send time, the RTT is measured on the reply.
//!
//! UDP and ping receivers keep counting for [`Plan::drain`] after the flow's `stop` (max(0.5 s,
//! 2 × base RTT)), so a packet still in flight at `stop` is not counted as lost.
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
use linkshare_sim::scenario::{CcKind, FlowKind, FlowSpec, Pattern, SizeMix, TcpSpec};
pub use linkshare_sim::tcp::NOTSENT_LOWAT;

use crate::testbed::spawn_in_ns;

/// IP + UDP headers.
const UDP_HDR: usize = 28;
/// IP + ICMP headers.
const ICMP_HDR: usize = 28;
/// How often blocking calls wake up to check the clock and the stop flag.
const POLL: Duration = Duration::from_millis(50);
/// How long a TCP source may take to connect before t0.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Where Linux lists the congestion controls it can run.
pub const AVAILABLE_CC: &str = "/proc/sys/net/ipv4/tcp_available_congestion_control";
/// `TCP_CA_NAME_MAX`.
const CC_NAME_MAX: usize = 16;

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
    /// Base RTT in seconds: 2 × (link delay + extra_delay).
    pub base_rtt: f64,
}

impl Plan {
    /// `link_delay`: the scenario's one-way `[link] delay` in seconds.
    pub fn new(spec: &FlowSpec, duration: f64, seed: u64, link_delay: f64) -> anyhow::Result<Plan> {
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
            base_rtt: 2.0 * (link_delay + spec.extra_delay.as_secs_f64()),
        })
    }

    /// How long after `stop` the receivers keep counting: max(0.5 s, 2 × base RTT).
    pub fn drain(&self) -> f64 {
        (2.0 * self.base_rtt).max(0.5)
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
            crate::testbed::in_ns(ns_a, || {
                std::fs::write("/proc/sys/net/ipv4/ping_group_range", "0 2147483647")
            })?
            .context("cannot allow ping sockets in the sender namespace")?;
        }
        // TCP connects first: every handshake is done before t0, whatever the flow's `start`.
        let mut t0_senders = Vec::new();
        let mut connected = Vec::new();
        for (p, l) in plans.iter().zip(live) {
            if !matches!(p.spec.kind, FlowKind::Tcp(_)) {
                continue;
            }
            let (p, l, st) = (p.clone(), l.clone(), stop.clone());
            let (t0_tx, t0_rx) = std::sync::mpsc::channel::<Instant>();
            let (tx, rx) = std::sync::mpsc::channel::<Result<(), String>>();
            tr.threads.push(spawn_in_ns(ns_a, move || {
                set_timer_slack();
                tcp_source(&p, &l, &st, &tx, &t0_rx);
            })?);
            t0_senders.push(t0_tx);
            connected.push(rx);
        }
        for rx in connected {
            match rx.recv_timeout(CONNECT_TIMEOUT + Duration::from_secs(1)) {
                Ok(Ok(())) => {}
                Ok(Err(e)) => {
                    tr.finish();
                    bail!("{e}");
                }
                Err(_) => {
                    tr.finish();
                    bail!(
                        "a TCP flow did not connect within {} s",
                        CONNECT_TIMEOUT.as_secs()
                    );
                }
            }
        }
        let t0 = Instant::now() + Duration::from_millis(100);
        if let Ok(mut g) = t0_cell.lock() {
            *g = Some(t0);
        }
        for tx in t0_senders {
            let _ = tx.send(t0);
        }
        for (p, l) in plans.iter().zip(live) {
            let (p, l, st) = (p.clone(), l.clone(), stop.clone());
            if matches!(p.spec.kind, FlowKind::Tcp(_)) {
                continue;
            }
            tr.threads.push(spawn_in_ns(ns_a, move || {
                set_timer_slack();
                let r = match &p.spec.kind {
                    FlowKind::Tcp(_) => Ok(()),
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

/// The receive window the file fixes, if it sets one; `None`: the kernel autotunes (as the
/// simulator's receiver does).
pub fn fixed_window(t: &TcpSpec) -> Option<u64> {
    t.window
}

fn window_of(p: &Plan) -> Option<i32> {
    match &p.spec.kind {
        FlowKind::Tcp(t) => fixed_window(t).map(|w| w.clamp(4096, i32::MAX as u64 / 2) as i32),
        _ => None,
    }
}

/// Linux's name of a congestion control, for `TCP_CONGESTION`.
pub fn linux_cc(cc: CcKind) -> &'static str {
    match cc {
        CcKind::NewReno => "reno",
        CcKind::Cubic => "cubic",
        CcKind::Bbr => "bbr",
    }
}

/// The congestion control of a TCP socket (`TCP_CONGESTION`).
pub fn congestion_of(fd: RawFd) -> std::io::Result<String> {
    let mut buf = [0u8; CC_NAME_MAX];
    let mut len = CC_NAME_MAX as libc::socklen_t;
    // SAFETY: `buf` has `len` writable bytes.
    let r = unsafe {
        libc::getsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_CONGESTION,
            buf.as_mut_ptr().cast(),
            &mut len,
        )
    };
    if r != 0 {
        return Err(std::io::Error::last_os_error());
    }
    let n = (len as usize).min(CC_NAME_MAX);
    let end = buf[..n].iter().position(|b| *b == 0).unwrap_or(n);
    Ok(String::from_utf8_lossy(&buf[..end]).into_owned())
}

/// Run `name` on the TCP socket `fd` and check it took; the error names the algorithm and what
/// the kernel offers ([`AVAILABLE_CC`]).
pub fn set_congestion(fd: RawFd, name: &str) -> anyhow::Result<()> {
    // SAFETY: `name` is valid for `name.len()` bytes; the kernel copies at most that.
    let r = unsafe {
        libc::setsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_CONGESTION,
            name.as_ptr().cast(),
            name.len() as libc::socklen_t,
        )
    };
    let missing = |why: String| {
        let offered = std::fs::read_to_string(AVAILABLE_CC)
            .map(|t| t.trim().to_string())
            .unwrap_or_else(|e| format!("(unreadable: {e})"));
        anyhow::anyhow!(
            "congestion control `{name}` is not available in this kernel ({why}); {AVAILABLE_CC} lists: {offered} (load its module, e.g. `modprobe tcp_{name}`, or choose another `cc`)"
        )
    };
    if r != 0 {
        return Err(missing(std::io::Error::last_os_error().to_string()));
    }
    match congestion_of(fd) {
        Ok(got) if got == name => Ok(()),
        Ok(got) => Err(missing(format!("the socket runs `{got}`"))),
        Err(e) => Err(missing(format!("cannot read it back: {e}"))),
    }
}

/// Check that the kernel runs every congestion control in `names`, before building anything.
pub fn check_congestion<'a>(names: impl IntoIterator<Item = &'a str>) -> anyhow::Result<()> {
    // SAFETY: plain socket call.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        bail!("socket: {}", std::io::Error::last_os_error());
    }
    // SAFETY: we own the fd; the stream closes it.
    let s = unsafe { TcpStream::from_raw_fd(fd) };
    for n in names {
        set_congestion(s.as_raw_fd(), n)?;
    }
    Ok(())
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
        // A fixed window: the receive buffer, forced past rmem_max (we are root). Otherwise
        // the kernel autotunes it.
        if let Some(w) = window_of(p) {
            setsockopt_int(fd, libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, w)?;
        }
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

/// A TCP source: connect and report on `connected`, wait for t0 on `t0_rx`, then write from
/// `start` to `stop`.
fn tcp_source(
    p: &Plan,
    l: &FlowLive,
    stop: &AtomicBool,
    connected: &std::sync::mpsc::Sender<Result<(), String>>,
    t0_rx: &std::sync::mpsc::Receiver<Instant>,
) {
    let FlowKind::Tcp(spec) = &p.spec.kind else {
        return;
    };
    let s = match tcp_connect(p, spec) {
        Ok(s) => {
            let _ = connected.send(Ok(()));
            s
        }
        Err(e) => {
            let _ = connected.send(Err(format!("flow `{}`: {e:#}", p.spec.name)));
            return;
        }
    };
    let Ok(t0) = t0_rx.recv() else { return };
    if let Err(e) = tcp_write(p, spec, l, stop, t0, &s) {
        l.fail(format!("flow `{}`: {e:#}", p.spec.name));
    }
}

/// The source's socket, set up and connected.
fn tcp_connect(p: &Plan, spec: &TcpSpec) -> anyhow::Result<TcpStream> {
    let fd = bound_socket(libc::SOCK_STREAM, 0, SocketAddrV4::new(p.src, p.spec.sport))?;
    // SAFETY: we own the fd; the stream closes it.
    let s = unsafe { TcpStream::from_raw_fd(fd) };
    if let Some(w) = window_of(p) {
        setsockopt_int(fd, libc::SOL_SOCKET, libc::SO_SNDBUFFORCE, w)?;
    }
    setsockopt_int(fd, libc::IPPROTO_IP, libc::IP_TOS, p.spec.tos as i32)?;
    setsockopt_int(
        fd,
        libc::IPPROTO_TCP,
        libc::TCP_NOTSENT_LOWAT,
        NOTSENT_LOWAT as i32,
    )?;
    set_congestion(fd, linux_cc(spec.cc))?;
    // A blocking connect gives up after SO_SNDTIMEO.
    s.set_write_timeout(Some(CONNECT_TIMEOUT))?;
    connect_fd(fd, SocketAddrV4::new(p.dst, p.spec.dport))
        .with_context(|| format!("connect to {}:{}", p.dst, p.spec.dport))?;
    s.set_nonblocking(true)?;
    Ok(s)
}

/// Wait until `fd` is writable (for a TCP socket with `TCP_NOTSENT_LOWAT`: less than the low
/// mark unsent) or `ms` passed.
fn poll_out(fd: RawFd, ms: i32) -> bool {
    let mut pfd = libc::pollfd {
        fd,
        events: libc::POLLOUT,
        revents: 0,
    };
    // SAFETY: one valid pollfd.
    let r = unsafe { libc::poll(&mut pfd, 1, ms) };
    r > 0 && pfd.revents & (libc::POLLOUT | libc::POLLERR | libc::POLLHUP) != 0
}

/// Write from `start` until `stop` (or `bytes`), then close the sending side and follow the
/// socket until everything is acknowledged (or the run ends), so retransmissions of the tail
/// count.
fn tcp_write(
    p: &Plan,
    spec: &TcpSpec,
    l: &FlowLive,
    stop: &AtomicBool,
    t0: Instant,
    mut s: &TcpStream,
) -> anyhow::Result<()> {
    let fd = s.as_raw_fd();
    if !wait_until(t0, p.start, stop) {
        return Ok(());
    }
    let chunk = vec![0x5au8; NOTSENT_LOWAT as usize];
    let mut left = spec.bytes.unwrap_or(u64::MAX);
    let mut next_info = 0.0;
    let record = |now: f64| {
        if let Some(i) = tcp_info(fd) {
            if i.tcpi_rtt > 0 {
                if let Ok(mut v) = l.rtt.lock() {
                    v.push((now, i.tcpi_rtt as f64 / 1e3));
                }
            }
            l.retransmits
                .store(u64::from(i.tcpi_total_retrans), Ordering::Relaxed);
        }
    };
    while left > 0 && !stop.load(Ordering::Relaxed) && p.start < p.stop {
        let now = since(t0);
        if now >= p.stop {
            break;
        }
        if now >= next_info {
            next_info = now + 0.05;
            record(now);
        }
        // Wake at `stop` at the latest.
        let ms = ((p.stop - now) * 1e3).ceil().clamp(1.0, 50.0) as i32;
        if !poll_out(fd, ms) || since(t0) >= p.stop {
            continue;
        }
        let n = chunk.len().min(usize::try_from(left).unwrap_or(usize::MAX));
        match s.write(&chunk[..n]) {
            Ok(w) => left -= w as u64,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::Interrupted
                ) => {}
            // The run is over and the sink closed first: not the flow's failure.
            Err(e)
                if stop.load(Ordering::Relaxed)
                    && matches!(
                        e.kind(),
                        std::io::ErrorKind::BrokenPipe | std::io::ErrorKind::ConnectionReset
                    ) =>
            {
                break
            }
            Err(e) => bail!("send: {e}"),
        }
    }
    let _ = s.shutdown(std::net::Shutdown::Write);
    // Follow the tail: until the FIN is acknowledged (FIN_WAIT2 or later) or the run ends.
    while !stop.load(Ordering::Relaxed) {
        let now = since(t0);
        record(now);
        match tcp_info(fd).map(|i| i.tcpi_state) {
            Some(st) if st == TCP_FIN_WAIT2 || st == TCP_TIME_WAIT || st == TCP_CLOSE => break,
            None => break,
            _ => std::thread::sleep(POLL),
        }
    }
    record(since(t0));
    Ok(())
}

/// `tcpi_state` values (include/net/tcp_states.h).
const TCP_FIN_WAIT2: u8 = 5;
const TCP_TIME_WAIT: u8 = 6;
const TCP_CLOSE: u8 = 7;

/// A TCP socket's `TCP_INFO`.
fn tcp_info(fd: RawFd) -> Option<libc::tcp_info> {
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
    (r == 0).then_some(info)
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

#[cfg(test)]
mod tests {
    use super::*;

    fn tcp_socket() -> TcpStream {
        // SAFETY: plain socket call.
        let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) };
        assert!(fd >= 0, "socket: {}", std::io::Error::last_os_error());
        // SAFETY: we own the fd; the stream closes it.
        unsafe { TcpStream::from_raw_fd(fd) }
    }

    /// Each scenario `cc` becomes that algorithm on the socket, read back with `TCP_CONGESTION`.
    #[test]
    fn the_socket_runs_the_congestion_control_asked_for() {
        for cc in [CcKind::NewReno, CcKind::Cubic] {
            let s = tcp_socket();
            set_congestion(s.as_raw_fd(), linux_cc(cc)).unwrap();
            assert_eq!(congestion_of(s.as_raw_fd()).unwrap(), linux_cc(cc));
        }
        assert_eq!(linux_cc(CcKind::NewReno), "reno");
    }

    /// A congestion control the kernel does not have: the error names it and where Linux lists
    /// the ones it has.
    #[test]
    fn a_missing_congestion_control_is_named() {
        let e = check_congestion(["cubic", "nosuchcc"])
            .unwrap_err()
            .to_string();
        assert!(e.contains("`nosuchcc`"), "{e}");
        assert!(e.contains(AVAILABLE_CC), "{e}");
        assert!(e.contains("cubic"), "lists what the kernel has: {e}");
    }

    #[test]
    fn tcp_notsent_lowat_is_the_simulators() {
        let s = tcp_socket();
        let fd = s.as_raw_fd();
        setsockopt_int(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_NOTSENT_LOWAT,
            NOTSENT_LOWAT as i32,
        )
        .unwrap();
        let mut v: i32 = 0;
        let mut len = std::mem::size_of::<i32>() as libc::socklen_t;
        // SAFETY: `v` has `len` writable bytes.
        let r = unsafe {
            libc::getsockopt(
                fd,
                libc::IPPROTO_TCP,
                libc::TCP_NOTSENT_LOWAT,
                (&mut v as *mut i32).cast(),
                &mut len,
            )
        };
        assert_eq!(r, 0);
        assert_eq!(v as u64, linkshare_sim::tcp::NOTSENT_LOWAT);
    }
}
