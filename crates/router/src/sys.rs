//! Thin safe wrappers over the Linux system calls the shaper needs. Every `unsafe` block lives
//! here, each in a small function with its SAFETY argument.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

const ETH_P_ALL: u16 = 0x0003;
const PACKET_ADD_MEMBERSHIP: libc::c_int = 1;
const PACKET_MR_PROMISC: libc::c_ushort = 1;
const PACKET_QDISC_BYPASS: libc::c_int = 20;
const PACKET_IGNORE_OUTGOING: libc::c_int = 23;

fn cvt(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

fn own(fd: libc::c_int) -> io::Result<OwnedFd> {
    let fd = cvt(fd)?;
    // SAFETY: `fd` was just returned by a successful system call and is owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn setsockopt_raw<T>(fd: RawFd, level: libc::c_int, name: libc::c_int, v: &T) -> io::Result<()> {
    // SAFETY: `v` points to a live `T` of the size passed; the kernel only reads it.
    let r = unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            (v as *const T).cast(),
            std::mem::size_of::<T>() as libc::socklen_t,
        )
    };
    cvt(r).map(|_| ())
}

/// Interface index of `name`.
pub fn ifindex(name: &str) -> io::Result<i32> {
    let c = CString::new(name).map_err(|_| io::Error::other("interface name contains NUL"))?;
    // SAFETY: `c` is a valid NUL-terminated string for the duration of the call.
    let i = unsafe { libc::if_nametoindex(c.as_ptr()) };
    if i == 0 {
        Err(io::Error::other(format!("no interface named {name:?}")))
    } else {
        Ok(i as i32)
    }
}

/// An AF_PACKET raw socket bound to one interface, promiscuous, bypassing the qdisc on transmit
/// and not seeing its own transmissions.
pub fn packet_socket(ifname: &str) -> io::Result<(OwnedFd, i32)> {
    let idx = ifindex(ifname)?;
    // SAFETY: plain system call with constant arguments.
    let fd = own(unsafe {
        libc::socket(
            libc::AF_PACKET,
            libc::SOCK_RAW | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            i32::from(ETH_P_ALL.to_be()),
        )
    })?;
    // SAFETY: sockaddr_ll is plain old data; all-zero is a valid value.
    let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    sll.sll_family = libc::AF_PACKET as u16;
    sll.sll_protocol = ETH_P_ALL.to_be();
    sll.sll_ifindex = idx;
    // SAFETY: `sll` is a valid sockaddr_ll and its size is passed.
    let r = unsafe {
        libc::bind(
            fd.as_raw_fd(),
            (&sll as *const libc::sockaddr_ll).cast(),
            std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
        )
    };
    cvt(r)?;
    // SAFETY: packet_mreq is plain old data; all-zero is valid.
    let mut mr: libc::packet_mreq = unsafe { std::mem::zeroed() };
    mr.mr_ifindex = idx;
    mr.mr_type = PACKET_MR_PROMISC;
    setsockopt_raw(fd.as_raw_fd(), libc::SOL_PACKET, PACKET_ADD_MEMBERSHIP, &mr)?;
    let one: libc::c_int = 1;
    setsockopt_raw(fd.as_raw_fd(), libc::SOL_PACKET, PACKET_QDISC_BYPASS, &one)?;
    setsockopt_raw(
        fd.as_raw_fd(),
        libc::SOL_PACKET,
        PACKET_IGNORE_OUTGOING,
        &one,
    )?;
    let buf: libc::c_int = 4 << 20;
    // Larger receive buffer; failure is harmless.
    let _ = setsockopt_raw(fd.as_raw_fd(), libc::SOL_SOCKET, libc::SO_RCVBUF, &buf);
    Ok((fd, idx))
}

/// Receive one frame without blocking. `Ok(None)` when nothing is waiting.
/// Returns the frame length and whether the frame was sent by this host (PACKET_OUTGOING).
pub fn recv_frame(fd: RawFd, buf: &mut [u8]) -> io::Result<Option<(usize, bool)>> {
    // SAFETY: sockaddr_ll is plain old data.
    let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    let mut sl = std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t;
    // SAFETY: `buf` is writable for `buf.len()` bytes, `sll`/`sl` describe a valid address buffer.
    let n = unsafe {
        libc::recvfrom(
            fd,
            buf.as_mut_ptr().cast(),
            buf.len(),
            libc::MSG_DONTWAIT | libc::MSG_TRUNC,
            (&mut sll as *mut libc::sockaddr_ll).cast(),
            &mut sl,
        )
    };
    if n < 0 {
        let e = io::Error::last_os_error();
        if e.kind() == io::ErrorKind::WouldBlock {
            return Ok(None);
        }
        return Err(e);
    }
    Ok(Some((n as usize, sll.sll_pkttype == libc::PACKET_OUTGOING)))
}

/// Send one frame on a bound packet socket.
pub fn send_frame(fd: RawFd, frame: &[u8]) -> io::Result<()> {
    // SAFETY: `frame` is readable for its length.
    let n = unsafe { libc::send(fd, frame.as_ptr().cast(), frame.len(), libc::MSG_DONTWAIT) };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// CLOCK_MONOTONIC in nanoseconds.
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec to write into.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Set this thread's timer slack to 1 ns.
pub fn set_min_timer_slack() {
    // SAFETY: prctl with integer arguments only.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0) };
}

pub fn epoll_create() -> io::Result<OwnedFd> {
    // SAFETY: plain system call.
    own(unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) })
}

pub fn epoll_add(ep: RawFd, fd: RawFd, token: u64) -> io::Result<()> {
    let mut ev = libc::epoll_event {
        events: libc::EPOLLIN as u32,
        u64: token,
    };
    // SAFETY: `ev` is a valid epoll_event.
    cvt(unsafe { libc::epoll_ctl(ep, libc::EPOLL_CTL_ADD, fd, &mut ev) }).map(|_| ())
}

/// Wait for events; returns the tokens ready. `timeout_ms` -1 blocks.
pub fn epoll_wait(ep: RawFd, out: &mut Vec<u64>, timeout_ms: i32) -> io::Result<()> {
    let mut evs = [libc::epoll_event { events: 0, u64: 0 }; 16];
    // SAFETY: `evs` has room for the 16 events announced.
    let n = unsafe { libc::epoll_wait(ep, evs.as_mut_ptr(), evs.len() as i32, timeout_ms) };
    out.clear();
    if n < 0 {
        let e = io::Error::last_os_error();
        if e.kind() == io::ErrorKind::Interrupted {
            return Ok(());
        }
        return Err(e);
    }
    for ev in &evs[..n as usize] {
        let t = ev.u64;
        out.push(t);
    }
    Ok(())
}

pub fn timerfd_create() -> io::Result<OwnedFd> {
    // SAFETY: plain system call.
    own(unsafe {
        libc::timerfd_create(
            libc::CLOCK_MONOTONIC,
            libc::TFD_NONBLOCK | libc::TFD_CLOEXEC,
        )
    })
}

/// Arm the timer at an absolute CLOCK_MONOTONIC instant (0 disarms).
pub fn timerfd_set_abs(fd: RawFd, at_ns: u64) -> io::Result<()> {
    let spec = libc::itimerspec {
        it_interval: libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        },
        it_value: libc::timespec {
            tv_sec: (at_ns / 1_000_000_000) as libc::time_t,
            tv_nsec: (at_ns % 1_000_000_000) as libc::c_long,
        },
    };
    // SAFETY: `spec` is valid; old value not requested.
    let r =
        unsafe { libc::timerfd_settime(fd, libc::TFD_TIMER_ABSTIME, &spec, std::ptr::null_mut()) };
    cvt(r).map(|_| ())
}

/// Read and discard whatever a non-blocking fd (timerfd, signalfd) has to say; returns the bytes.
pub fn read_some(fd: RawFd, buf: &mut [u8]) -> usize {
    // SAFETY: `buf` is writable for its length.
    let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
    if n < 0 {
        0
    } else {
        n as usize
    }
}

/// Block SIGTERM, SIGINT and SIGHUP and return a signalfd that reports them.
pub fn signalfd_term_hup() -> io::Result<OwnedFd> {
    // SAFETY: sigset_t is initialised by sigemptyset before use; all pointers are valid.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGTERM);
        libc::sigaddset(&mut set, libc::SIGINT);
        libc::sigaddset(&mut set, libc::SIGHUP);
        cvt(libc::pthread_sigmask(
            libc::SIG_BLOCK,
            &set,
            std::ptr::null_mut(),
        ))?;
        own(libc::signalfd(
            -1,
            &set,
            libc::SFD_NONBLOCK | libc::SFD_CLOEXEC,
        ))
    }
}

/// Signal number from a `signalfd_siginfo` read from a signalfd.
pub fn signo_of(buf: &[u8]) -> Option<u32> {
    buf.get(0..4)
        .map(|b| u32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
}
