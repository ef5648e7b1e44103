//! The event loop's file descriptors: epoll, timerfd, eventfd, signalfd, and reading the
//! error a socket reports.
//!
//! ## Principles
//! * **Nothing here blocks except a wait asked for**: every fd made here is close-on-exec and
//!   those that are read (timerfd, eventfd, signalfd) non-blocking; [`epoll_wait`] blocks for
//!   the timeout it is given and no longer.
//! * **Level-triggered readiness is cleared by its owner**: a socket's pending error is read with
//!   [`take_socket_error`], an eventfd reset with [`eventfd_clear`], a timerfd or signalfd
//!   drained with [`read_some`]; otherwise every wait returns at once.

use std::io;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};

use super::{cvt, own};

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

/// Change what `fd` is watched for: readable (`EPOLLIN`) or, while output is pending, writable
/// (`EPOLLOUT`) only, so a level-triggered peer whose input is not read does not spin the loop.
pub fn epoll_mod(ep: RawFd, fd: RawFd, token: u64, want_write: bool) -> io::Result<()> {
    let mut ev = libc::epoll_event {
        events: if want_write {
            libc::EPOLLOUT as u32
        } else {
            libc::EPOLLIN as u32
        },
        u64: token,
    };
    // SAFETY: `ev` is a valid epoll_event.
    cvt(unsafe { libc::epoll_ctl(ep, libc::EPOLL_CTL_MOD, fd, &mut ev) }).map(|_| ())
}

/// Stop watching `fd`.
pub fn epoll_del(ep: RawFd, fd: RawFd) -> io::Result<()> {
    let mut ev = libc::epoll_event { events: 0, u64: 0 };
    // SAFETY: `ev` is a valid epoll_event (ignored by EPOLL_CTL_DEL on current kernels).
    cvt(unsafe { libc::epoll_ctl(ep, libc::EPOLL_CTL_DEL, fd, &mut ev) }).map(|_| ())
}

/// Wait for events; returns the tokens ready. `timeout_ms` -1 blocks.
pub fn epoll_wait(ep: RawFd, out: &mut Vec<u64>, timeout_ms: i32) -> io::Result<()> {
    let mut errors = Vec::new();
    epoll_wait_flagged(ep, out, &mut errors, timeout_ms)
}

/// [`epoll_wait`], also listing in `errors` the tokens whose fd reported `EPOLLERR` (an error
/// pending on the socket: level-triggered, it stays ready until the error is read, e.g. with
/// [`take_socket_error`]).
pub fn epoll_wait_flagged(
    ep: RawFd,
    out: &mut Vec<u64>,
    errors: &mut Vec<u64>,
    timeout_ms: i32,
) -> io::Result<()> {
    errors.clear();
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
        if ev.events & libc::EPOLLERR as u32 != 0 {
            errors.push(t);
        }
    }
    Ok(())
}

/// Read and clear the error pending on socket `fd` (`SO_ERROR`); `None` when there is none.
pub fn take_socket_error(fd: RawFd) -> Option<i32> {
    let mut v: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: `v` and `len` are valid for the option's size.
    let r = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_ERROR,
            (&mut v as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    (r == 0 && v != 0).then_some(v)
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

/// A non-blocking eventfd: one thread rings it ([`eventfd_ring`]), the one that watches it in
/// its epoll set wakes up and clears it ([`eventfd_clear`]).
pub fn eventfd() -> io::Result<OwnedFd> {
    // SAFETY: plain system call; the fd is owned below.
    let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` is a fresh descriptor nobody else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Add one to an eventfd (wakes its watcher; never blocks: a counter at its maximum stays
/// readable, which is all a wake-up needs).
pub fn eventfd_ring(fd: RawFd) {
    let one: u64 = 1;
    // SAFETY: writes 8 bytes from `one`.
    unsafe {
        libc::write(fd, (&one as *const u64).cast(), 8);
    }
}

/// Reset an eventfd to zero (its watcher then handles everything that rang it).
pub fn eventfd_clear(fd: RawFd) {
    let mut b = [0u8; 8];
    read_some(fd, &mut b);
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
