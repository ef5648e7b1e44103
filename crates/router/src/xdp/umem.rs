//! One AF_XDP socket with its own UMEM and its four rings.
//!
//! Principles (Documentation/networking/af_xdp.rst, include/uapi/linux/if_xdp.h):
//! * **UMEM**: one anonymous, page-aligned area cut into equal chunks (2048 or 4096 bytes, a power of
//!   two: the "aligned" mode, where the kernel masks any address back to its chunk). It is
//!   registered with `XDP_UMEM_REG`. We own a chunk until we hand its address to the kernel (fill
//!   ring for receive, TX ring for transmit) and own it again when it comes back (RX ring,
//!   completion ring). Receive chunks and transmit chunks are two fixed sets here, so the shaper
//!   can keep frames it received queued in the scheduler (it copies them out) without starving
//!   receive.
//! * **Rings**: single-producer single-consumer arrays of a power-of-two size, mapped from the
//!   socket at fixed page offsets, each with a producer index, a consumer index, a flags word
//!   (`XDP_RING_NEED_WAKEUP`) and the descriptors, at the offsets `XDP_MMAP_OFFSETS` reports. The
//!   indices run freely (u32, wrapping); a slot is `index & (size - 1)`. The side that consumes
//!   loads the other side's producer index with **Acquire** (the descriptors it covers are then
//!   visible), reads the descriptors, and publishes its own consumer index with **Release** (the
//!   kernel may reuse the slots only after our reads). The producing side mirrors it: Acquire load
//!   of the consumer index before reusing slots, descriptors written, Release store of the producer
//!   index. Both sides keep cached copies so the shared cache lines are touched once per batch.
//! * **Wake-ups**: the socket is bound with `XDP_USE_NEED_WAKEUP`; the kernel sets the flag in the
//!   fill ring when the driver ran out of receive chunks and in the TX ring when it will not look
//!   at the ring by itself. Only then do we make a system call (`recvfrom`/`sendto` with nothing to
//!   copy), so a busy ring costs no system call per frame.
//!
//! Every `unsafe` block of the AF_XDP path is in this file, each with its SAFETY argument.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicU32, Ordering};

/// `XDP_MAX_TX_SKB_BUDGET` (include/uapi/linux/if_xdp.h, Linux 6.17): frames one copy-mode
/// `sendto` may send, 32 to the TX ring's size.
const XDP_MAX_TX_SKB_BUDGET: libc::c_int = 9;

/// A memory mapping; unmapped on drop.
struct Map {
    ptr: *mut u8,
    len: usize,
}

impl Map {
    /// `len` bytes of `fd` at page offset `pgoff`, or anonymous memory when `fd` is `None`.
    fn new(fd: Option<RawFd>, len: usize, pgoff: u64, what: &str) -> io::Result<Map> {
        let (flags, fd) = match fd {
            Some(fd) => (libc::MAP_SHARED | libc::MAP_POPULATE, fd),
            None => (
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE,
                -1,
            ),
        };
        // SAFETY: a fresh mapping placed by the kernel; no existing memory is affected.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                flags,
                fd,
                pgoff as libc::off_t,
            )
        };
        if p == libc::MAP_FAILED {
            let e = io::Error::last_os_error();
            return Err(io::Error::new(e.kind(), format!("mmap {what}: {e}")));
        }
        Ok(Map { ptr: p.cast(), len })
    }
}

impl Drop for Map {
    fn drop(&mut self) {
        // SAFETY: `ptr`/`len` describe a mapping we created; nothing uses it after drop.
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
    }
}

/// One ring: the shared indices and descriptors of `T` (u64 addresses or `xdp_desc`).
struct Ring<T> {
    _map: Map,
    producer: *const AtomicU32,
    consumer: *const AtomicU32,
    flags: *const AtomicU32,
    desc: *mut T,
    mask: u32,
    size: u32,
    /// Our own index (producer for fill/TX, consumer for RX/completion), ahead of what is
    /// published while a batch is being built.
    local: u32,
    /// The other side's index as last loaded.
    other: u32,
}

impl<T: Copy> Ring<T> {
    fn map(
        fd: RawFd,
        off: &libc::xdp_ring_offset,
        size: u32,
        pgoff: u64,
        what: &str,
    ) -> io::Result<Self> {
        let len = off.desc as usize + size as usize * std::mem::size_of::<T>();
        let m = Map::new(Some(fd), len, pgoff, what)?;
        // The kernel's offsets are aligned (indices on their own cache lines); anything else
        // would be a layout we do not understand.
        let at = |o: u64, align: usize| -> io::Result<*mut u8> {
            if o as usize + 4 > len || !o.is_multiple_of(align as u64) {
                return Err(io::Error::other(format!(
                    "{what}: ring offset {o} outside the mapping or misaligned"
                )));
            }
            // SAFETY: `o` is inside the mapping (checked above).
            Ok(unsafe { m.ptr.add(o as usize) })
        };
        let producer = at(off.producer, 4)?.cast::<AtomicU32>();
        let consumer = at(off.consumer, 4)?.cast::<AtomicU32>();
        let flags = at(off.flags, 4)?.cast::<AtomicU32>();
        let desc = at(off.desc, std::mem::align_of::<T>())?.cast::<T>();
        // A fresh ring's indices are zero on both sides.
        Ok(Ring {
            _map: m,
            producer,
            consumer,
            flags,
            desc,
            mask: size - 1,
            size,
            local: 0,
            other: 0,
        })
    }

    fn get(&self, i: u32) -> T {
        // SAFETY: `i & mask` < size: inside the descriptor array; the slot was published to us
        // (Acquire load of the other side's index) and the kernel does not write it until we
        // publish our index past it.
        unsafe { std::ptr::read_volatile(self.desc.add((i & self.mask) as usize)) }
    }

    fn put(&mut self, i: u32, v: T) {
        // SAFETY: as in `get`; the slot is ours until the producer index is published past it.
        unsafe { std::ptr::write_volatile(self.desc.add((i & self.mask) as usize), v) }
    }

    fn load_producer(&self) -> u32 {
        // SAFETY: a live, aligned u32 of the mapping shared with the kernel.
        unsafe { (*self.producer).load(Ordering::Acquire) }
    }
    fn load_consumer(&self) -> u32 {
        // SAFETY: as above.
        unsafe { (*self.consumer).load(Ordering::Acquire) }
    }
    fn store_producer(&self, v: u32) {
        // SAFETY: as above; only we write our producer index.
        unsafe { (*self.producer).store(v, Ordering::Release) }
    }
    fn store_consumer(&self, v: u32) {
        // SAFETY: as above; only we write our consumer index.
        unsafe { (*self.consumer).store(v, Ordering::Release) }
    }
    fn needs_wakeup(&self) -> bool {
        // SAFETY: as above.
        unsafe { (*self.flags).load(Ordering::Relaxed) & libc::XDP_RING_NEED_WAKEUP != 0 }
    }
}

/// A ring we produce into (fill, TX). `local` is our producer index, `other` the kernel's
/// consumer index as last seen.
pub struct Producer<T>(Ring<T>);

impl<T: Copy> Producer<T> {
    /// Free slots, reloading the kernel's consumer index when fewer than `want` look free.
    pub fn free(&mut self, want: u32) -> u32 {
        let r = &mut self.0;
        let free = r.size - r.local.wrapping_sub(r.other);
        if free >= want {
            return free;
        }
        r.other = r.load_consumer();
        r.size - r.local.wrapping_sub(r.other)
    }
    /// Write the next slot (the caller checked [`Producer::free`]); published by `submit`.
    pub fn push(&mut self, v: T) {
        let i = self.0.local;
        self.0.put(i, v);
        self.0.local = i.wrapping_add(1);
    }
    /// Publish every slot written so far.
    pub fn submit(&self) {
        self.0.store_producer(self.0.local);
    }
    /// Slots published that the kernel has not consumed yet.
    pub fn outstanding(&mut self) -> u32 {
        self.0.other = self.0.load_consumer();
        self.0.local.wrapping_sub(self.0.other)
    }
    pub fn needs_wakeup(&self) -> bool {
        self.0.needs_wakeup()
    }
}

/// A ring the kernel produces into (RX, completion). `local` is our consumer index, `other` the
/// kernel's producer index as last seen.
pub struct Consumer<T>(Ring<T>);

impl<T: Copy> Consumer<T> {
    /// Up to `max` entries ready to read, from index [`Consumer::at`].
    pub fn ready(&mut self, max: u32) -> u32 {
        let r = &mut self.0;
        if r.other == r.local {
            r.other = r.load_producer();
        }
        r.other.wrapping_sub(r.local).min(max)
    }
    /// The `k`-th ready entry.
    pub fn at(&self, k: u32) -> T {
        self.0.get(self.0.local.wrapping_add(k))
    }
    /// Hand `n` read entries back to the kernel.
    pub fn release(&mut self, n: u32) {
        self.0.local = self.0.local.wrapping_add(n);
        self.0.store_consumer(self.0.local);
    }
}

/// The UMEM area.
pub struct Umem {
    area: Map,
    pub chunk: u32,
    pub chunks: u32,
}

impl Umem {
    /// The bytes `addr..addr+len` of the area, when inside it and inside one chunk.
    pub fn data(&self, addr: u64, len: u32) -> Option<&[u8]> {
        let (a, l) = (addr as usize, len as usize);
        let end = a.checked_add(l)?;
        if end > self.area.len || a / self.chunk as usize != (end.max(1) - 1) / self.chunk as usize
        {
            return None;
        }
        // SAFETY: in bounds (checked); the chunk was handed to us by the RX ring and the kernel does
        // not write it until we give it back through the fill ring.
        Some(unsafe { std::slice::from_raw_parts(self.area.ptr.add(a), l) })
    }
    /// Copy `data` to the chunk at `addr` (a chunk start we own); false when it does not fit.
    pub fn write(&mut self, addr: u64, data: &[u8]) -> bool {
        let a = addr as usize;
        if data.len() > self.chunk as usize
            || a.checked_add(data.len()).is_none_or(|e| e > self.area.len)
        {
            return false;
        }
        // SAFETY: in bounds (checked); the chunk is ours (on the free list, not in any ring), and
        // `data` is a Rust slice that cannot overlap the mapping we write.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), self.area.ptr.add(a), data.len()) };
        true
    }
}

/// Ring sizes and the UMEM's shape for one socket.
#[derive(Clone, Copy, Debug)]
pub struct Geometry {
    pub chunk: u32,
    /// Chunks for receive (all of them start in the fill ring).
    pub rx_chunks: u32,
    /// Chunks for transmit (0: the socket has no TX ring).
    pub tx_chunks: u32,
}

/// An AF_XDP socket bound to one queue, with its UMEM and rings.
pub struct Xsk {
    pub fd: OwnedFd,
    pub umem: Umem,
    pub fill: Producer<u64>,
    pub comp: Consumer<u64>,
    pub rx: Consumer<libc::xdp_desc>,
    pub tx: Option<Producer<libc::xdp_desc>>,
    /// Transmit chunks we own.
    pub tx_free: Vec<u64>,
    /// The bind gave the socket zero-copy (`XDP_OPTIONS_ZEROCOPY`).
    pub zerocopy: bool,
}

fn err(what: &str) -> impl FnOnce(io::Error) -> io::Error + '_ {
    move |e| io::Error::new(e.kind(), format!("{what}: {e}"))
}

fn setopt<T>(fd: RawFd, name: libc::c_int, v: &T, what: &str) -> io::Result<()> {
    // SAFETY: `v` is a live `T` of the size passed; the kernel only reads it.
    let r = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_XDP,
            name,
            (v as *const T).cast(),
            std::mem::size_of::<T>() as libc::socklen_t,
        )
    };
    if r < 0 {
        return Err(err(what)(io::Error::last_os_error()));
    }
    Ok(())
}

fn getopt<T: Copy>(fd: RawFd, name: libc::c_int, mut v: T, what: &str) -> io::Result<T> {
    let mut len = std::mem::size_of::<T>() as libc::socklen_t;
    // SAFETY: `v` is a live, writable `T` and `len` its size; the kernel writes at most `len` bytes.
    let r =
        unsafe { libc::getsockopt(fd, libc::SOL_XDP, name, (&mut v as *mut T).cast(), &mut len) };
    if r < 0 {
        return Err(err(what)(io::Error::last_os_error()));
    }
    if len as usize != std::mem::size_of::<T>() {
        return Err(io::Error::other(format!(
            "{what}: the kernel returned {len} bytes, expected {}",
            std::mem::size_of::<T>()
        )));
    }
    Ok(v)
}

impl Xsk {
    /// Create a socket and its UMEM and rings, and bind it to queue `queue` of `ifindex`
    /// (`copy`: force copy mode, as generic XDP requires; otherwise the kernel picks zero-copy when
    /// the driver has it).
    pub fn open(ifindex: i32, queue: u32, g: Geometry, copy: bool) -> io::Result<Xsk> {
        // SAFETY: plain system call with constant arguments.
        let raw = unsafe { libc::socket(libc::AF_XDP, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
        if raw < 0 {
            return Err(err("socket(AF_XDP)")(io::Error::last_os_error()));
        }
        // SAFETY: a new fd from a successful socket() that nobody else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let chunks = g.rx_chunks + g.tx_chunks;
        let area = Map::new(None, chunks as usize * g.chunk as usize, 0, "UMEM area")?;
        let reg = libc::xdp_umem_reg {
            addr: area.ptr as u64,
            len: area.len as u64,
            chunk_size: g.chunk,
            headroom: 0,
            flags: 0,
            tx_metadata_len: 0,
        };
        setopt(raw, libc::XDP_UMEM_REG, &reg, "setsockopt XDP_UMEM_REG")?;
        let fill_n = g.rx_chunks.next_power_of_two();
        let comp_n = g.tx_chunks.max(1).next_power_of_two();
        let rx_n = g.rx_chunks.next_power_of_two();
        setopt(
            raw,
            libc::XDP_UMEM_FILL_RING,
            &fill_n,
            "setsockopt XDP_UMEM_FILL_RING",
        )?;
        setopt(
            raw,
            libc::XDP_UMEM_COMPLETION_RING,
            &comp_n,
            "setsockopt XDP_UMEM_COMPLETION_RING",
        )?;
        setopt(raw, libc::XDP_RX_RING, &rx_n, "setsockopt XDP_RX_RING")?;
        if g.tx_chunks > 0 {
            let tx_n = g.tx_chunks.next_power_of_two();
            setopt(raw, libc::XDP_TX_RING, &tx_n, "setsockopt XDP_TX_RING")?;
            // Copy mode: let one `sendto` move up to the whole ring instead of the default 32
            // frames (Linux 6.17+; older kernels refuse with ENOPROTOOPT and keep 32).
            let _ = setopt(
                raw,
                XDP_MAX_TX_SKB_BUDGET,
                &tx_n,
                "setsockopt XDP_MAX_TX_SKB_BUDGET",
            );
        }
        // SAFETY: xdp_mmap_offsets is plain old data; all-zero is a valid value.
        let zero: libc::xdp_mmap_offsets = unsafe { std::mem::zeroed() };
        let off = getopt(
            raw,
            libc::XDP_MMAP_OFFSETS,
            zero,
            "getsockopt XDP_MMAP_OFFSETS",
        )?;
        let mut fill = Producer(Ring::<u64>::map(
            raw,
            &off.fr,
            fill_n,
            libc::XDP_UMEM_PGOFF_FILL_RING,
            "fill ring",
        )?);
        let comp = Consumer(Ring::<u64>::map(
            raw,
            &off.cr,
            comp_n,
            libc::XDP_UMEM_PGOFF_COMPLETION_RING,
            "completion ring",
        )?);
        let rx = Consumer(Ring::<libc::xdp_desc>::map(
            raw,
            &off.rx,
            rx_n,
            libc::XDP_PGOFF_RX_RING as u64,
            "RX ring",
        )?);
        let tx = if g.tx_chunks > 0 {
            let tx_n = g.tx_chunks.next_power_of_two();
            Some(Producer(Ring::<libc::xdp_desc>::map(
                raw,
                &off.tx,
                tx_n,
                libc::XDP_PGOFF_TX_RING as u64,
                "TX ring",
            )?))
        } else {
            None
        };
        // Every receive chunk goes to the kernel before the bind, so the first frames find room.
        for i in 0..g.rx_chunks {
            fill.push(u64::from(i) * u64::from(g.chunk));
        }
        fill.submit();
        let tx_free = (g.rx_chunks..chunks)
            .map(|i| u64::from(i) * u64::from(g.chunk))
            .collect();
        // SAFETY: sockaddr_xdp is plain old data; all-zero is valid.
        let mut sa: libc::sockaddr_xdp = unsafe { std::mem::zeroed() };
        sa.sxdp_family = libc::AF_XDP as u16;
        sa.sxdp_ifindex = ifindex as u32;
        sa.sxdp_queue_id = queue;
        sa.sxdp_flags = libc::XDP_USE_NEED_WAKEUP | if copy { libc::XDP_COPY } else { 0 };
        // A socket that was bound to this queue and just closed (a shaper restarting) releases
        // the queue from a kernel work item (net/xdp/xsk_buff_pool.c `xp_put_pool`): until then
        // bind says EBUSY. Retry for up to a second.
        let t0 = std::time::Instant::now();
        loop {
            // SAFETY: `sa` is a valid sockaddr_xdp and its size is passed.
            let r = unsafe {
                libc::bind(
                    raw,
                    (&sa as *const libc::sockaddr_xdp).cast(),
                    std::mem::size_of::<libc::sockaddr_xdp>() as libc::socklen_t,
                )
            };
            if r == 0 {
                break;
            }
            let e = io::Error::last_os_error();
            if e.raw_os_error() != Some(libc::EBUSY) || t0.elapsed().as_millis() >= 1000 {
                return Err(err("bind(AF_XDP)")(e));
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let opts = getopt(
            raw,
            libc::XDP_OPTIONS,
            libc::xdp_options { flags: 0 },
            "getsockopt XDP_OPTIONS",
        )?;
        Ok(Xsk {
            fd,
            umem: Umem {
                area,
                chunk: g.chunk,
                chunks,
            },
            fill,
            comp,
            rx,
            tx,
            tx_free,
            zerocopy: opts.flags & libc::XDP_OPTIONS_ZEROCOPY != 0,
        })
    }

    /// Wake the driver to look at the fill ring (`recvfrom` with nothing to read).
    pub fn wake_rx(&self) {
        // SAFETY: a null buffer of length 0 is valid for recvfrom; the fd is ours.
        unsafe {
            libc::recvfrom(
                self.fd.as_raw_fd(),
                std::ptr::null_mut(),
                0,
                libc::MSG_DONTWAIT,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
            )
        };
    }

    /// Tell the kernel to send what the TX ring holds (`sendto` with nothing to copy). `Ok(true)`
    /// when it took a turn, `Ok(false)` when it asked to be called again (EAGAIN/EBUSY/ENOBUFS).
    pub fn kick_tx(fd: RawFd) -> io::Result<bool> {
        // SAFETY: a null buffer of length 0 is valid for sendto; the fd is a live socket.
        let r = unsafe {
            libc::sendto(
                fd,
                std::ptr::null(),
                0,
                libc::MSG_DONTWAIT,
                std::ptr::null(),
                0,
            )
        };
        if r >= 0 {
            return Ok(true);
        }
        let e = io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::EAGAIN) | Some(libc::EBUSY) | Some(libc::ENOBUFS) | Some(libc::EINTR) => {
                Ok(false)
            }
            _ => Err(e),
        }
    }

    /// The socket's `XDP_STATISTICS` (cumulative).
    pub fn stats(&self) -> io::Result<libc::xdp_statistics> {
        // SAFETY: plain old data; all-zero is valid.
        let zero: libc::xdp_statistics = unsafe { std::mem::zeroed() };
        getopt(
            self.fd.as_raw_fd(),
            libc::XDP_STATISTICS,
            zero,
            "getsockopt XDP_STATISTICS",
        )
    }
}

// SAFETY: the rings and the area are plain shared memory owned by this socket; the owner
// serialises access (&mut) and synchronises with the kernel through the ring indices.
unsafe impl Send for Xsk {}
