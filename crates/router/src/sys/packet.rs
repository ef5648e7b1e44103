//! AF_PACKET sockets: creation, binding, options (fanout among them), statistics, and the
//! rings shared with the kernel ([`Mmap`]), kicked with [`tx_ring_kick`].
//!
//! ## Principles
//! * **The kernel's structs and constants as the uapi headers spell them**
//!   (include/uapi/linux/if_packet.h): `opt`, [`TpacketReq3`], [`TpacketReq`]; the ring
//!   formats themselves are read in port.rs.
//! * **The mapping never hands out an out-of-range access**: every [`Mmap`] accessor checks
//!   bounds and alignment first and reads 0 (or refuses) otherwise.

use std::io;
use std::os::fd::{OwnedFd, RawFd};

use super::{cvt, own};

/// `ETH_P_ALL`: every protocol.
pub const ETH_P_ALL: u16 = 0x0003;

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
