//! The socket layer the flows share: sockets made and bound with raw calls (so options can be
//! set before `bind`/`connect`), integer options, and the congestion control of a TCP socket.
//!
//! A congestion control is set with `TCP_CONGESTION` and read back, since Linux may refuse one
//! whose module is not loaded; the error then lists what the kernel offers ([`AVAILABLE_CC`],
//! net/ipv4/tcp_cong.c). Every fd opened here is closed on every error path or handed to a
//! std type that closes it.

use std::net::{SocketAddrV4, TcpStream};
use std::os::fd::{AsRawFd, FromRawFd, RawFd};

use anyhow::bail;
use linkshare_sim::scenario::CcKind;

/// Where Linux lists the congestion controls it can run.
pub const AVAILABLE_CC: &str = "/proc/sys/net/ipv4/tcp_available_congestion_control";
/// `TCP_CA_NAME_MAX`.
const CC_NAME_MAX: usize = 16;

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
pub(super) fn bound_socket(ty: i32, proto: i32, addr: SocketAddrV4) -> anyhow::Result<RawFd> {
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

/// `a` as the C `sockaddr_in`.
pub(super) fn sockaddr(a: SocketAddrV4) -> libc::sockaddr_in {
    libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: a.port().to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from(*a.ip()).to_be(),
        },
        sin_zero: [0; 8],
    }
}

/// `connect(2)` of a raw socket to `to`.
pub(super) fn connect_fd(fd: RawFd, to: SocketAddrV4) -> std::io::Result<()> {
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

#[cfg(test)]
mod tests {
    use super::super::NOTSENT_LOWAT;
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
