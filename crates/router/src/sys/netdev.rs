//! Network interfaces by name: index, MTU, up and down, and kernel bridges, through the
//! interface ioctls of netdevice(7) (and the bridge ones of net/bridge/br_ioctl.c).
//!
//! ## Principles
//! * **A name is checked before it reaches the kernel** (length, NUL): a bad `--dev` is an
//!   error that names it, never a truncated request.
//! * **Errors keep the system call's own code** (`raw_os_error`), so that callers can tell
//!   `EEXIST`, `EBUSY` and `ENODEV` apart.

use std::ffi::CString;
use std::io;
use std::os::fd::AsRawFd;

use super::{cvt, own};

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

/// MTU of interface `name`.
pub fn mtu(name: &str) -> io::Result<u32> {
    // SAFETY: ifreq is plain old data; all-zero is valid.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    let b = name.as_bytes();
    if b.len() >= req.ifr_name.len() {
        return Err(io::Error::other(format!(
            "interface name {name:?} too long"
        )));
    }
    for (d, s) in req.ifr_name.iter_mut().zip(b) {
        *d = *s as libc::c_char;
    }
    // SAFETY: plain system call.
    let fd = own(unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) })?;
    // SAFETY: `req` is a valid ifreq; SIOCGIFMTU writes ifr_mtu inside it.
    let r = unsafe { libc::ioctl(fd.as_raw_fd(), libc::SIOCGIFMTU, &mut req) };
    cvt(r).map_err(|e| io::Error::new(e.kind(), format!("SIOCGIFMTU {name}: {e}")))?;
    // SAFETY: SIOCGIFMTU filled the ifr_mtu member of the union.
    let m = unsafe { req.ifr_ifru.ifru_mtu };
    u32::try_from(m).map_err(|_| io::Error::other(format!("{name}: negative MTU {m}")))
}

/// An `ifreq` naming interface `name`, or an error for a name that cannot be one.
fn ifreq_named(name: &str) -> io::Result<libc::ifreq> {
    // SAFETY: all-zero is a valid ifreq.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    let b = name.as_bytes();
    if b.is_empty() || b.len() >= req.ifr_name.len() || b.contains(&0) {
        return Err(io::Error::other(format!("bad interface name {name:?}")));
    }
    for (d, s) in req.ifr_name.iter_mut().zip(b) {
        *d = *s as libc::c_char;
    }
    Ok(req)
}

/// An `ioctl` on a fresh AF_INET datagram socket (the interface requests of netdevice(7) and
/// the bridge requests of net/bridge/br_ioctl.c), `req` in and out.
/// The error is the system call's own (its `raw_os_error` kept).
fn if_ioctl(request: libc::c_ulong, req: &mut libc::ifreq) -> io::Result<()> {
    // SAFETY: plain system call.
    let fd = own(unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) })?;
    // SAFETY: `req` is a valid ifreq for the requests this module makes (each reads or writes
    // only the name and one member of its union).
    let r = unsafe { libc::ioctl(fd.as_raw_fd(), request as _, req as *mut libc::ifreq) };
    cvt(r).map(|_| ())
}

/// Kernel bridges by the old ioctls (`brctl`'s): create, delete, add a port (`linux/sockios.h`).
/// Errors are the system calls' own, so that callers can tell `EEXIST` and `EBUSY` apart.
pub mod bridge {
    use super::{if_ioctl, ifreq_named};
    use std::io;

    const SIOCBRADDBR: libc::c_ulong = 0x89a0;
    const SIOCBRDELBR: libc::c_ulong = 0x89a1;
    const SIOCBRADDIF: libc::c_ulong = 0x89a2;

    /// Create bridge `name` (`EEXIST` when it exists).
    pub fn add(name: &str) -> io::Result<()> {
        // Checked as an interface name; SIOCBRADDBR takes the bare name as its argument.
        ifreq_named(name)?;
        let c = std::ffi::CString::new(name).map_err(io::Error::other)?;
        super::bridge_name_ioctl(SIOCBRADDBR, &c)
    }

    /// Delete bridge `name` (it must be down); its ports are released.
    pub fn delete(name: &str) -> io::Result<()> {
        let c = std::ffi::CString::new(name).map_err(io::Error::other)?;
        super::bridge_name_ioctl(SIOCBRDELBR, &c)
    }

    /// Make interface `ifindex` a port of bridge `name`.
    pub fn add_port(name: &str, ifindex: i32) -> io::Result<()> {
        let mut req = ifreq_named(name)?;
        req.ifr_ifru.ifru_ifindex = ifindex;
        if_ioctl(SIOCBRADDIF, &mut req)
    }
}

/// `ioctl(fd, request, name)`: the bridge requests that take a bare name.
fn bridge_name_ioctl(request: libc::c_ulong, name: &std::ffi::CStr) -> io::Result<()> {
    // SAFETY: plain system call.
    let fd = own(unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) })?;
    // SAFETY: `name` is a NUL-terminated string the kernel only reads (at most IFNAMSIZ bytes).
    let r = unsafe { libc::ioctl(fd.as_raw_fd(), request as _, name.as_ptr()) };
    cvt(r).map(|_| ())
}

/// Bring interface `name` up or down (`SIOCGIFFLAGS`, then `SIOCSIFFLAGS` with `IFF_UP`).
pub fn set_link_up(name: &str, up: bool) -> io::Result<()> {
    let mut req = ifreq_named(name)?;
    if_ioctl(libc::SIOCGIFFLAGS, &mut req)?;
    // SAFETY: SIOCGIFFLAGS filled the ifr_flags member of the union.
    let flags = unsafe { req.ifr_ifru.ifru_flags };
    let iff_up = libc::IFF_UP as libc::c_short;
    req.ifr_ifru.ifru_flags = if up { flags | iff_up } else { flags & !iff_up };
    if_ioctl(libc::SIOCSIFFLAGS, &mut req)
}
