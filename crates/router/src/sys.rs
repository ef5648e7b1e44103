//! Thin safe wrappers over the Linux system calls the shaper needs. Every `unsafe` block lives
//! here, each in a small function with its SAFETY argument.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// `ETH_P_ALL`: every protocol.
pub const ETH_P_ALL: u16 = 0x0003;

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

/// Socket option numbers of `<linux/if_packet.h>` (SOL_PACKET level).
pub mod opt {
    pub const PACKET_ADD_MEMBERSHIP: libc::c_int = 1;
    pub const PACKET_RX_RING: libc::c_int = 5;
    pub const PACKET_STATISTICS: libc::c_int = 6;
    pub const PACKET_VERSION: libc::c_int = 10;
    pub const PACKET_TX_RING: libc::c_int = 13;
    pub const PACKET_LOSS: libc::c_int = 14;
    /// Each frame is preceded by a `struct virtio_net_hdr` (10 bytes); must be set before a ring.
    pub const PACKET_VNET_HDR: libc::c_int = 15;
    pub const PACKET_QDISC_BYPASS: libc::c_int = 20;
    pub const PACKET_IGNORE_OUTGOING: libc::c_int = 23;
    /// include/uapi/linux/if_packet.h: join a fanout group; the value is the group id in the
    /// low 16 bits and the mode and flags in the high 16.
    pub const PACKET_FANOUT: libc::c_int = 18;
    pub const PACKET_FANOUT_HASH: u32 = 0;
    pub const PACKET_FANOUT_CBPF: u32 = 6;
    pub const PACKET_FANOUT_DATA: libc::c_int = 22;
    pub const PACKET_MR_PROMISC: libc::c_ushort = 1;
    pub const TPACKET_V2: libc::c_int = 1;
    pub const TPACKET_V3: libc::c_int = 2;
}

/// `struct tpacket_req3` (a TPACKET_V3 ring request; V2 uses the first four fields).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct TpacketReq3 {
    pub block_size: u32,
    pub block_nr: u32,
    pub frame_size: u32,
    pub frame_nr: u32,
    pub retire_blk_tov: u32,
    pub sizeof_priv: u32,
    pub feature_req_word: u32,
}

/// `struct tpacket_req` (TPACKET_V1/V2 rings).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct TpacketReq {
    pub block_size: u32,
    pub block_nr: u32,
    pub frame_size: u32,
    pub frame_nr: u32,
}

/// Set an integer or struct socket option; the error names the option.
pub fn setsockopt<T>(
    fd: RawFd,
    level: libc::c_int,
    name: libc::c_int,
    what: &str,
    v: &T,
) -> io::Result<()> {
    setsockopt_raw(fd, level, name, v)
        .map_err(|e| io::Error::new(e.kind(), format!("setsockopt {what}: {e}")))
}

/// A new non-blocking AF_PACKET/SOCK_RAW socket for `protocol` (host order; 0 receives nothing).
pub fn packet_socket(protocol: u16) -> io::Result<OwnedFd> {
    // SAFETY: plain system call with constant arguments.
    own(unsafe {
        libc::socket(
            libc::AF_PACKET,
            libc::SOCK_RAW | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            i32::from(protocol.to_be()),
        )
    })
    .map_err(|e| io::Error::new(e.kind(), format!("socket(AF_PACKET): {e}")))
}

/// Bind a packet socket to interface `ifindex` for `protocol` (host order).
pub fn packet_bind(fd: RawFd, ifindex: i32, protocol: u16) -> io::Result<()> {
    // SAFETY: sockaddr_ll is plain old data; all-zero is a valid value.
    let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    sll.sll_family = libc::AF_PACKET as u16;
    sll.sll_protocol = protocol.to_be();
    sll.sll_ifindex = ifindex;
    // SAFETY: `sll` is a valid sockaddr_ll and its size is passed.
    let r = unsafe {
        libc::bind(
            fd,
            (&sll as *const libc::sockaddr_ll).cast(),
            std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
        )
    };
    cvt(r)
        .map(|_| ())
        .map_err(|e| io::Error::new(e.kind(), format!("bind(AF_PACKET): {e}")))
}

/// Put interface `ifindex` in promiscuous mode for as long as `fd` lives.
pub fn packet_promisc(fd: RawFd, ifindex: i32) -> io::Result<()> {
    // SAFETY: packet_mreq is plain old data; all-zero is valid.
    let mut mr: libc::packet_mreq = unsafe { std::mem::zeroed() };
    mr.mr_ifindex = ifindex;
    mr.mr_type = opt::PACKET_MR_PROMISC;
    setsockopt(
        fd,
        libc::SOL_PACKET,
        opt::PACKET_ADD_MEMBERSHIP,
        "PACKET_ADD_MEMBERSHIP(PROMISC)",
        &mr,
    )
}

/// `PACKET_STATISTICS` of a TPACKET_V3 socket: (packets, drops) since the last call (the kernel
/// resets them on read).
pub fn packet_stats_v3(fd: RawFd) -> io::Result<(u64, u64)> {
    let mut st = [0u32; 3]; // tpacket_stats_v3: tp_packets, tp_drops, tp_freeze_q_cnt
    let mut len = std::mem::size_of_val(&st) as libc::socklen_t;
    // SAFETY: `st` is writable for `len` bytes; the kernel writes at most `len`.
    let r = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_PACKET,
            opt::PACKET_STATISTICS,
            st.as_mut_ptr().cast(),
            &mut len,
        )
    };
    cvt(r)?;
    Ok((u64::from(st[0]), u64::from(st[1])))
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

/// Send ethtool request `data` (a struct starting with its `cmd` word) for interface `name`;
/// `None` when the driver does not answer it.
fn ethtool<T>(name: &str, data: &mut T) -> Option<()> {
    const SIOCETHTOOL: libc::c_ulong = 0x8946;
    // SAFETY: all-zero is a valid ifreq.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    let b = name.as_bytes();
    if b.len() >= req.ifr_name.len() {
        return None;
    }
    for (d, s) in req.ifr_name.iter_mut().zip(b) {
        *d = *s as libc::c_char;
    }
    req.ifr_ifru.ifru_data = (data as *mut T).cast();
    // SAFETY: plain system call.
    let fd = own(unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) })
        .ok()?;
    // SAFETY: `req` is a valid ifreq whose data points at a live ethtool request.
    let r = unsafe { libc::ioctl(fd.as_raw_fd(), SIOCETHTOOL as _, &mut req) };
    (r == 0).then_some(())
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

/// The machine's physical memory in bytes (`sysinfo`), `None` if it cannot be read.
// `totalram` is a c_ulong: u64 here, u32 on 32-bit targets.
#[allow(clippy::useless_conversion)]
pub fn total_memory() -> Option<u64> {
    // SAFETY: all-zero is a valid sysinfo.
    let mut si: libc::sysinfo = unsafe { std::mem::zeroed() };
    // SAFETY: `si` is a valid sysinfo for the kernel to fill.
    let r = unsafe { libc::sysinfo(&mut si) };
    (r == 0).then(|| u64::from(si.totalram).saturating_mul(u64::from(si.mem_unit.max(1))))
}

/// Whether interface `name` takes VLAN tags out of received frames in hardware (rx-vlan
/// offload, `ethtool -k`'s `rx-vlan-offload`, read as `ETH_FLAG_RXVLAN` of `ETHTOOL_GFLAGS`,
/// which reports the 802.1Q `NETIF_F_HW_VLAN_CTAG_RX` feature); `None` when the driver does
/// not answer.
pub fn rx_vlan_offload(name: &str) -> Option<bool> {
    const ETHTOOL_GFLAGS: u32 = 0x25;
    const ETH_FLAG_RXVLAN: u32 = 1 << 8;
    /// `struct ethtool_value`.
    #[repr(C)]
    struct Value {
        cmd: u32,
        data: u32,
    }
    let mut v = Value {
        cmd: ETHTOOL_GFLAGS,
        data: 0,
    };
    ethtool(name, &mut v)?;
    Some(v.data & ETH_FLAG_RXVLAN != 0)
}

/// Receive queues of interface `name` as its driver reports them (`ETHTOOL_GCHANNELS`: the
/// larger of its receive-only and combined channels; veth reports its receive queues), `None`
/// when the driver does not say. Unlike sysfs this answers in any network namespace.
pub fn rx_queue_count(name: &str) -> Option<u32> {
    /// `struct ethtool_channels`.
    #[repr(C)]
    #[derive(Default)]
    struct Channels {
        cmd: u32,
        max_rx: u32,
        max_tx: u32,
        max_other: u32,
        max_combined: u32,
        rx_count: u32,
        tx_count: u32,
        other_count: u32,
        combined_count: u32,
    }
    const ETHTOOL_GCHANNELS: u32 = 0x3c;
    let mut c = Channels {
        cmd: ETHTOOL_GCHANNELS,
        ..Channels::default()
    };
    ethtool(name, &mut c)?;
    Some(c.rx_count.max(c.combined_count)).filter(|n| *n > 0)
}

/// The interface's line rate in bit/s as its driver reports it (`ETHTOOL_GSET`), `None` when
/// the driver reports none or an unknown speed.
pub fn link_speed_bps(name: &str) -> Option<u64> {
    /// `struct ethtool_cmd` (the legacy, fixed-size settings request).
    #[repr(C)]
    struct EthtoolCmd {
        cmd: u32,
        supported: u32,
        advertising: u32,
        speed: u16,
        duplex: u8,
        port: u8,
        phy_address: u8,
        transceiver: u8,
        autoneg: u8,
        mdio_support: u8,
        maxtxpkt: u32,
        maxrxpkt: u32,
        speed_hi: u16,
        eth_tp_mdix: u8,
        eth_tp_mdix_ctrl: u8,
        lp_advertising: u32,
        reserved: [u32; 2],
    }
    const ETHTOOL_GSET: u32 = 1;
    // SAFETY: all-zero is a valid value of this plain-data struct.
    let mut cmd: EthtoolCmd = unsafe { std::mem::zeroed() };
    cmd.cmd = ETHTOOL_GSET;
    ethtool(name, &mut cmd)?;
    let mbit = u32::from(cmd.speed) | (u32::from(cmd.speed_hi) << 16);
    // SPEED_UNKNOWN is -1 (all ones); 0 means none either.
    (mbit != 0 && mbit != u32::MAX && mbit != 0xffff).then(|| u64::from(mbit) * 1_000_000)
}

/// A shared memory mapping of a packet socket's rings; unmapped on drop.
pub struct Mmap {
    ptr: *mut u8,
    len: usize,
}

impl Mmap {
    /// Map `len` bytes of `fd`'s rings, read-write, shared with the kernel.
    pub fn new(fd: RawFd, len: usize) -> io::Result<Mmap> {
        // SAFETY: a fresh mapping chosen by the kernel; no existing memory is affected.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_POPULATE,
                fd,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            let e = io::Error::last_os_error();
            return Err(io::Error::new(e.kind(), format!("mmap packet ring: {e}")));
        }
        Ok(Mmap { ptr: p.cast(), len })
    }
    pub fn len(&self) -> usize {
        self.len
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// Read a `u32` at byte offset `off` (volatile: the kernel writes it concurrently).
    /// Out-of-range or misaligned offsets read 0.
    pub fn read_u32(&self, off: usize) -> u32 {
        if !off.is_multiple_of(4) || off.checked_add(4).is_none_or(|e| e > self.len) {
            return 0;
        }
        // SAFETY: in bounds and 4-aligned (the mapping is page-aligned) as checked above.
        unsafe { std::ptr::read_volatile(self.ptr.add(off).cast::<u32>()) }
    }
    /// Read a `u16` at byte offset `off`; out of range reads 0.
    pub fn read_u16(&self, off: usize) -> u16 {
        if !off.is_multiple_of(2) || off.checked_add(2).is_none_or(|e| e > self.len) {
            return 0;
        }
        // SAFETY: in bounds and 2-aligned as checked above.
        unsafe { std::ptr::read_volatile(self.ptr.add(off).cast::<u16>()) }
    }
    /// Write a `u32` at byte offset `off` (volatile). Out of range is ignored.
    pub fn write_u32(&self, off: usize, v: u32) {
        if !off.is_multiple_of(4) || off.checked_add(4).is_none_or(|e| e > self.len) {
            return;
        }
        // SAFETY: in bounds and 4-aligned as checked above; the kernel reads it concurrently,
        // hence volatile.
        unsafe { std::ptr::write_volatile(self.ptr.add(off).cast::<u32>(), v) }
    }
    /// The bytes `off..off+len`, or `None` when out of range. The caller must only look at bytes
    /// the kernel has handed over (a block or frame whose status says so).
    pub fn slice(&self, off: usize, len: usize) -> Option<&[u8]> {
        let end = off.checked_add(len)?;
        if end > self.len {
            return None;
        }
        // SAFETY: in bounds as checked; the region belongs to user space while its status says so.
        Some(unsafe { std::slice::from_raw_parts(self.ptr.add(off), len) })
    }
    /// Copy `data` to byte offset `off`; false when it does not fit.
    pub fn write_bytes(&self, off: usize, data: &[u8]) -> bool {
        match off.checked_add(data.len()) {
            Some(end) if end <= self.len => {
                // SAFETY: in bounds as checked; the frame is ours (status AVAILABLE) and `data` does
                // not overlap the mapping (it is a Rust slice we own elsewhere).
                unsafe {
                    std::ptr::copy_nonoverlapping(data.as_ptr(), self.ptr.add(off), data.len())
                };
                true
            }
            _ => false,
        }
    }
}

impl Drop for Mmap {
    fn drop(&mut self) {
        // SAFETY: `ptr`/`len` describe a mapping we created and nobody uses after drop.
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
    }
}

// SAFETY: the mapping is plain memory; access is serialised by the owner (&mut for writes that
// matter) and synchronised with the kernel through the ring status words.
unsafe impl Send for Mmap {}

/// Kick a packet socket's TX ring: the kernel sends every frame marked SEND_REQUEST.
/// `Ok(true)` when it took them, `Ok(false)` when it should be retried (EAGAIN/ENOBUFS).
pub fn tx_ring_kick(fd: RawFd) -> io::Result<bool> {
    // SAFETY: a zero-length send with a null buffer is how a TX ring is flushed.
    let n = unsafe { libc::send(fd, std::ptr::null(), 0, libc::MSG_DONTWAIT) };
    if n >= 0 {
        return Ok(true);
    }
    let e = io::Error::last_os_error();
    match e.raw_os_error() {
        Some(libc::EAGAIN) | Some(libc::ENOBUFS) | Some(libc::EINTR) => Ok(false),
        _ => Err(e),
    }
}

/// Set the process umask, returning the previous one.
pub fn umask(mask: u32) -> u32 {
    // SAFETY: umask cannot fail.
    unsafe { libc::umask(mask as libc::mode_t) as u32 }
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

/// Sleep until CLOCK_MONOTONIC reaches `at_ns` (at once if it has). A signal cuts the sleep
/// short, which is harmless here: the caller's loop looks at its events next.
pub fn sleep_until_ns(at_ns: u64) {
    let ts = libc::timespec {
        tv_sec: (at_ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (at_ns % 1_000_000_000) as libc::c_long,
    };
    // SAFETY: `ts` is a valid timespec; the remaining-time pointer may be null with
    // TIMER_ABSTIME.
    unsafe {
        libc::clock_nanosleep(
            libc::CLOCK_MONOTONIC,
            libc::TIMER_ABSTIME,
            &ts,
            std::ptr::null_mut(),
        )
    };
}

/// Put the calling thread under `SCHED_FIFO` at `prio` (1–99): it then runs as soon as it
/// wakes, ahead of every ordinary task (the kernel's RT throttling, 95 % of each second by
/// default, still leaves the others a share if it spins).
pub fn set_fifo(prio: u8) -> io::Result<()> {
    let param = libc::sched_param {
        sched_priority: prio.into(),
    };
    // SAFETY: `param` is a valid sched_param; pid 0 is the calling thread.
    let r = unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) };
    cvt(r).map(|_| ()).map_err(|e| {
        let hint = if e.raw_os_error() == Some(libc::EPERM) {
            " (needs CAP_SYS_NICE or an RLIMIT_RTPRIO of at least this priority; systemd: \
             AmbientCapabilities=CAP_SYS_NICE or CPUSchedulingPolicy=fifo)"
        } else {
            ""
        };
        io::Error::new(
            e.kind(),
            format!("sched_setscheduler(SCHED_FIFO, {prio}): {e}{hint}"),
        )
    })
}

/// Set the calling thread's nice value (-20..=19; lower runs sooner under the fair scheduler).
pub fn set_nice(n: i8) -> io::Result<()> {
    // SAFETY: plain system call; `who` 0 with PRIO_PROCESS is the calling thread on Linux.
    let r = unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, n.into()) };
    cvt(r).map(|_| ()).map_err(|e| {
        let hint = if e.raw_os_error() == Some(libc::EACCES) {
            " (a negative value needs CAP_SYS_NICE or RLIMIT_NICE)"
        } else {
            ""
        };
        io::Error::new(e.kind(), format!("setpriority({n}): {e}{hint}"))
    })
}

/// Lock the process's pages in memory, present and future, so the datapath never waits for a
/// page fault.
pub fn lock_memory() -> io::Result<()> {
    // SAFETY: mlockall takes flags only.
    let r = unsafe { libc::mlockall(libc::MCL_CURRENT | libc::MCL_FUTURE) };
    cvt(r)
        .map(|_| ())
        .map_err(|e| io::Error::new(e.kind(), format!("mlockall: {e}")))
}

/// Give the pages of freed heap memory back to the system (glibc's `malloc_trim(0)`, which also
/// releases whole free pages inside the heap, not only at its top). A build's temporaries (the
/// parsed document, the class specs, the classifier's sort buffers) are freed in between what
/// stays, so without it the resident set after start keeps them. Called at start, before the
/// loop runs, and nowhere else: `malloc_trim` holds each arena's lock while it walks that
/// arena's free blocks (milliseconds for a heap that held a 100,000-class tree), and the
/// loop's next allocation in that arena waits for it — on the builder thread, after a reload,
/// it did (the loop blocked on it for 388 ms on a loaded machine). Memory a reload frees stays
/// in the allocator's free lists and is reused by the next build.
pub fn release_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim takes a size only and touches only the allocator's free lists.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Make every `free` coalesce the block at once, under its arena's lock, in the thread that
/// frees it (glibc's `mallopt(M_MXFAST, 0)`: no "fast bins"). With fast bins, a block freed is
/// only parked, and the coalescing of everything parked is done by the next allocation of a
/// block of 1 KiB or more *in that arena, by whichever thread makes it*: the builder thread
/// frees the running policy the loop's thread built at start (300,000 small blocks at 100,000
/// subscribers), and the loop's next such allocation then did that work, ~2-3 ms (the longest
/// pause of a full reload; docs/router.md, "Reload"). Process-wide; called when the builder
/// thread starts. Small blocks still come from each thread's own cache (tcache) first.
pub fn free_blocks_at_once() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt takes two integers and only changes the allocator's parameters.
    unsafe {
        libc::mallopt(libc::M_MXFAST, 0);
    }
}

/// Set this thread's timer slack to 1 ns (the default 50 µs would round every timer wake-up).
pub fn set_min_timer_slack() -> io::Result<()> {
    // SAFETY: prctl with integer arguments only.
    let r = unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0) };
    cvt(r)
        .map(|_| ())
        .map_err(|e| io::Error::new(e.kind(), format!("prctl(PR_SET_TIMERSLACK): {e}")))
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
