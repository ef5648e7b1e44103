//! Thin safe wrappers over the Linux system calls the shaper needs, by concern.
//!
//! ## Principles
//! * **Each `unsafe` block sits in a small function with its SAFETY argument**; callers see
//!   safe functions returning `io::Result` (or `Option` where "the driver does not say" is an
//!   answer), errors naming the call. (AF_XDP's own calls are in xdp/, beside their structs.)
//! * **One module per concern**, all re-exported here so callers write `sys::name`:
//!   [`packet`] (AF_PACKET sockets, their options, fanout and rings), [`netdev`] (interfaces:
//!   index, MTU, up/down, kernel bridges), [`ethtool`] (what a driver reports: offloads, queues,
//!   speed), [`events`] (the event loop's fds: epoll, timerfd, eventfd, signalfd), [`process`]
//!   (the thread and process: clocks and sleep, scheduling, memory).
//! * **No policy here**: these functions do what the system call does; deciding what to do
//!   with an error is the caller's.

use std::io;
use std::os::fd::{FromRawFd, OwnedFd};

pub mod ethtool;
pub mod events;
pub mod netdev;
pub mod packet;
pub mod process;

pub use ethtool::*;
pub use events::*;
pub use netdev::*;
pub use packet::*;
pub use process::*;

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
