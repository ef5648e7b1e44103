//! TCP flows: a sink that accepts and counts, a source that connects before t0 and writes from
//! `start` to `stop` (or `bytes`), then follows its socket until everything is acknowledged.
//!
//! Writes go in chunks of [`NOTSENT_LOWAT`] with `TCP_NOTSENT_LOWAT` set to the same, so at
//! `stop` at most about that much is unsent (Linux net/ipv4/tcp.c, `tcp_stream_memory_free`).
//! A fixed `window` forces `SO_RCVBUF`/`SO_SNDBUF` before the handshake; otherwise the kernel
//! autotunes both. RTT samples are the kernel's smoothed RTT and retransmits its total, both
//! from `TCP_INFO` (include/uapi/linux/tcp.h).

use std::io::{Read, Write};
use std::net::{SocketAddrV4, TcpListener, TcpStream};
use std::os::fd::{AsRawFd, FromRawFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use anyhow::{bail, Context};
use linkshare_sim::scenario::{FlowKind, TcpSpec};

use super::sockets::{bound_socket, connect_fd, linux_cc, set_congestion, setsockopt_int};
use super::{since, wait_until, FlowLive, Plan, CONNECT_TIMEOUT, NOTSENT_LOWAT, POLL};

/// The receive window the file fixes, if it sets one; `None`: the kernel autotunes (as the
/// simulator's receiver does).
pub fn fixed_window(t: &TcpSpec) -> Option<u64> {
    t.window
}

/// The fixed window of a TCP flow as a socket buffer size, if the file sets one.
fn window_of(p: &Plan) -> Option<i32> {
    match &p.spec.kind {
        FlowKind::Tcp(t) => fixed_window(t).map(|w| w.clamp(4096, i32::MAX as u64 / 2) as i32),
        _ => None,
    }
}

/// A TCP sink: listen on the flow's destination, report on `ready`, accept one connection and
/// count what it delivers until the run stops.
pub(super) fn tcp_sink(
    p: &Plan,
    l: &FlowLive,
    stop: &AtomicBool,
    t0c: &Mutex<Option<Instant>>,
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
    let t0 = || t0c.lock().ok().and_then(|g| *g);
    let request = p.spec.arrival.as_ref().map_or(0, |a| a.request);
    if request > 0 {
        if let Err(e) = send_request(p, &conn, request, stop, &t0) {
            l.fail(format!("flow `{}`: request: {e:#}", p.spec.name));
            return;
        }
    }
    let target = match &p.spec.kind {
        FlowKind::Tcp(t) => t.bytes.unwrap_or(0),
        _ => 0,
    };
    let mut got = 0u64;
    let mut buf = vec![0u8; 1 << 16];
    while !stop.load(Ordering::Relaxed) {
        match conn.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                l.delivered.fetch_add(n as u64, Ordering::Relaxed);
                got += n as u64;
                if target > 0 && got >= target && got - (n as u64) < target {
                    if let (Some(t0), Ok(mut d)) = (t0(), l.done_s.lock()) {
                        *d = Some(since(t0));
                    }
                }
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

/// The sink's request: wait for the arrival time, then write `n` bytes.
fn send_request(
    p: &Plan,
    mut conn: &TcpStream,
    n: u64,
    stop: &AtomicBool,
    t0: &dyn Fn() -> Option<Instant>,
) -> anyhow::Result<()> {
    let t0 = loop {
        if stop.load(Ordering::Relaxed) {
            return Ok(());
        }
        match t0() {
            Some(t) => break t,
            None => std::thread::sleep(POLL / 10),
        }
    };
    let at = p
        .spec
        .arrival
        .as_ref()
        .map_or(p.start, |a| a.at.as_secs_f64());
    if !wait_until(t0, at, stop) {
        return Ok(());
    }
    let req = vec![0x71u8; usize::try_from(n).unwrap_or(usize::MAX).min(1 << 20)];
    conn.write_all(&req).context("write")?;
    Ok(())
}

/// With a request: read it whole before answering (the source's start is the request's
/// arrival, not a time); false if the run stopped or the peer closed first.
fn await_request(mut s: &TcpStream, n: u64, stop: &AtomicBool) -> anyhow::Result<bool> {
    let fd = s.as_raw_fd();
    let mut left = n;
    let mut buf = vec![0u8; 1 << 14];
    while left > 0 {
        if stop.load(Ordering::Relaxed) {
            return Ok(false);
        }
        let mut pfd = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd.
        if unsafe { libc::poll(&mut pfd, 1, 50) } <= 0 {
            continue;
        }
        let want = buf.len().min(usize::try_from(left).unwrap_or(usize::MAX));
        match s.read(&mut buf[..want]) {
            Ok(0) => return Ok(false),
            Ok(k) => left -= k as u64,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::Interrupted
                ) => {}
            Err(e) => bail!("reading the request: {e}"),
        }
    }
    Ok(true)
}

/// A TCP source: connect and report on `connected`, wait for t0 on `t0_rx`, then write from
/// `start` to `stop`.
pub(super) fn tcp_source(
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
    let request = p.spec.arrival.as_ref().map_or(0, |a| a.request);
    let started = if request > 0 {
        await_request(s, request, stop)?
    } else {
        wait_until(t0, p.start, stop)
    };
    if !started {
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
