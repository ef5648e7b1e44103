//! [`XdpPort`]: the [`Port`] of an interface over AF_XDP.
//!
//! Principles:
//! * **Setup order**: XSKMAP, program, link, then one socket per receive queue, each put in the map
//!   as soon as it is bound. Until a queue has its socket the program passes that queue's frames
//!   to the kernel stack; nothing is dropped by the setup itself.
//! * **Modes**: the link is tried in native (driver) mode first and, unless native was asked for,
//!   in generic (skb) mode when the driver refuses. Sockets on a native attachment are bound
//!   without a copy flag, so the kernel gives zero-copy when the driver has it and copy mode
//!   otherwise (veth: copy); on a generic attachment they are bound with `XDP_COPY`.
//! * **Batches**: a receive batch reads up to `budget` descriptors, hands each frame to the shaper
//!   (which copies it), and gives every chunk back to the fill ring with one index store. Transmit
//!   frames are copied into free transmit chunks and published with one index store per flush;
//!   the only system calls are the wake-ups the kernel asks for (`XDP_RING_NEED_WAKEUP`): in copy
//!   mode one `sendto` moves at most the kernel's TX budget (32 frames by default, net/xdp/xsk.c
//!   `TX_BATCH_SIZE`; raised to the ring's size with `XDP_MAX_TX_SKB_BUDGET` where the kernel has
//!   it), so a flush costs one call, or one per 32 frames on older kernels; in zero-copy mode a call only
//!   wakes the driver's NAPI.
//! * **Queues**: one socket (with its own UMEM) per receive queue the interface has
//!   (`/sys/class/net/DEV/queues/rx-*`); transmit uses queue 0's socket. With several sockets,
//!   [`Port::fd`] is an epoll fd over them all.
//! * **Accounting** as [`crate::port::PacketPort`]: `rx_ring_drops` is the kernel's `rx_dropped +
//!   rx_ring_full` of every socket (`XDP_STATISTICS`), frames too large for a chunk are `too_big`.
//!
//! Sources: Documentation/networking/af_xdp.rst (ring usage, need_wakeup, XDP_COPY/XDP_ZEROCOPY,
//! XDP_OPTIONS, XDP_STATISTICS), net/xdp/xsk.c (`__xsk_generic_xmit`, `xsk_bind`),
//! include/net/xdp.h (`XDP_PACKET_HEADROOM` = 256, in front of every received frame in a chunk).

use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};

use super::bpf::{self, AttachMode, XskMap};
use super::umem::{Geometry, Xsk};
use crate::port::{Port, PortCounters, RxFrame, TxDrop};
use crate::sys;

/// Headroom the kernel leaves in front of every received frame (include/net/xdp.h).
const XDP_PACKET_HEADROOM: u32 = 256;
/// Receive chunks per socket (all in the fill ring at start): 2048 frames absorb a 3 ms burst of
/// minimum-size frames at 1 Gbit/s while the shaper is busy.
const RX_CHUNKS: u32 = 2048;
/// Transmit chunks of queue 0's socket.
const TX_CHUNKS: u32 = 2048;
/// Reclaim completed transmit chunks when fewer than this many are free.
const TX_RECLAIM_BELOW: usize = 256;
/// Copy-mode kicks per flush at most (each moves up to the kernel's TX budget).
const MAX_KICKS: u32 = 128;
/// Most receive queues we bind (one UMEM each).
const MAX_QUEUES: u32 = 64;

/// The XDP program on one interface, attached through a BPF link, and its XSKMAP: shared by the
/// sockets of every worker (`--workers N`: one receive queue each), kept while any port holds
/// it. An interface takes one attachment.
pub struct Attachment {
    // Declared first, dropped first: the program is detached before the map goes.
    _link: OwnedFd,
    _prog: OwnedFd,
    map: XskMap,
    idx: i32,
    mode: AttachMode,
    chunk: u32,
    max_frame: usize,
    queues: u32,
    /// Why native mode was not used, when generic was.
    pub native_error: Option<String>,
}

impl Attachment {
    /// Attach the redirect program to `name`. `mode`: `Some` insists on that attach mode;
    /// `None` tries native, then generic. Errors name the failing step and its errno.
    pub fn new(name: &str, mode: Option<AttachMode>) -> io::Result<Attachment> {
        let idx = sys::ifindex(name)?;
        let mtu = sys::mtu(name)?;
        let max_frame = mtu as usize + 18;
        let chunk = if max_frame as u32 + XDP_PACKET_HEADROOM <= 2048 {
            2048
        } else if max_frame as u32 + XDP_PACKET_HEADROOM <= 4096 {
            4096
        } else {
            return Err(io::Error::other(format!(
                "MTU {mtu} does not fit a 4096-byte AF_XDP chunk (frames across chunks are not supported)"
            )));
        };
        let queues = rx_queues(name).min(MAX_QUEUES);
        let map = XskMap::create(queues)?;
        let prog = bpf::load_program(&map)?;
        let (link, mode, native_error) = match mode {
            Some(m) => (bpf::attach(&prog, idx, m)?, m, None),
            None => match bpf::attach(&prog, idx, AttachMode::Native) {
                Ok(l) => (l, AttachMode::Native, None),
                Err(e) => (
                    bpf::attach(&prog, idx, AttachMode::Generic)?,
                    AttachMode::Generic,
                    Some(e.to_string()),
                ),
            },
        };
        Ok(Attachment {
            _link: link,
            _prog: prog,
            map,
            idx,
            mode,
            chunk,
            max_frame: max_frame.min(chunk as usize),
            queues,
            native_error,
        })
    }

    /// Receive queues the interface has (and the map covers).
    pub fn queues(&self) -> u32 {
        self.queues
    }

    pub fn mode(&self) -> AttachMode {
        self.mode
    }

    /// A socket on queue `q`, put in the map (with `tx`: it also transmits).
    fn bind(&self, q: u32, tx: bool) -> io::Result<Xsk> {
        let g = Geometry {
            chunk: self.chunk,
            rx_chunks: RX_CHUNKS,
            tx_chunks: if tx { TX_CHUNKS } else { 0 },
        };
        let s = Xsk::open(self.idx, q, g, self.mode == AttachMode::Generic)
            .map_err(|e| io::Error::new(e.kind(), format!("queue {q}: {e}")))?;
        self.map.set(q, s.fd.as_raw_fd())?;
        Ok(s)
    }
}

/// AF_XDP port on one interface.
pub struct XdpPort {
    name: String,
    mode: AttachMode,
    socks: Vec<Xsk>,
    ep: Option<OwnedFd>,
    /// Largest frame we send: MTU + Ethernet header + one VLAN tag, and at most a chunk.
    max_frame: usize,
    /// Transmit descriptors written since the last publish.
    unsubmitted: u32,
    next_rx: usize,
    c: PortCounters,
    /// Why native mode was not used, when generic was.
    pub native_error: Option<String>,
    // Declared last, dropped last: the sockets close before the program may be detached.
    _att: std::sync::Arc<Attachment>,
}

/// Number of receive queues of `name`: what the driver reports (ethtool), else what sysfs
/// lists (`/sys/class/net/DEV/queues/rx-*`, which shows only the namespace sysfs was mounted
/// in), else 1.
fn rx_queues(name: &str) -> u32 {
    if let Some(n) = sys::rx_queue_count(name) {
        return n;
    }
    let n = std::fs::read_dir(format!("/sys/class/net/{name}/queues"))
        .map(|d| {
            d.filter_map(Result::ok)
                .filter(|e| e.file_name().to_string_lossy().starts_with("rx-"))
                .count() as u32
        })
        .unwrap_or(0);
    n.max(1)
}

impl XdpPort {
    /// Open `name` over AF_XDP. `mode`: `Some` insists on that attach mode; `None` tries native,
    /// then generic. Errors name the failing step and its errno.
    pub fn open(name: &str, mode: Option<AttachMode>) -> io::Result<XdpPort> {
        let att = std::sync::Arc::new(Attachment::new(name, mode)?);
        let mut socks = Vec::new();
        for q in 0..att.queues {
            socks.push(att.bind(q, q == 0)?);
        }
        Self::from_socks(name, att, socks)
    }

    /// One worker's port (`--workers N`): the socket of receive queue `queue` of a shared
    /// attachment, which also transmits (on that queue).
    pub fn open_queue(
        name: &str,
        att: std::sync::Arc<Attachment>,
        queue: u32,
    ) -> io::Result<XdpPort> {
        if queue >= att.queues {
            return Err(io::Error::other(format!(
                "{name} has {} receive queue(s), no queue {queue}",
                att.queues
            )));
        }
        let s = att.bind(queue, true)?;
        Self::from_socks(name, att, vec![s])
    }

    fn from_socks(
        name: &str,
        att: std::sync::Arc<Attachment>,
        socks: Vec<Xsk>,
    ) -> io::Result<XdpPort> {
        let ep = if socks.len() > 1 {
            let ep = sys::epoll_create()?;
            for (i, s) in socks.iter().enumerate() {
                sys::epoll_add(ep.as_raw_fd(), s.fd.as_raw_fd(), i as u64)?;
            }
            Some(ep)
        } else {
            None
        };
        Ok(XdpPort {
            name: name.to_string(),
            mode: att.mode,
            socks,
            ep,
            max_frame: att.max_frame,
            unsubmitted: 0,
            next_rx: 0,
            c: PortCounters::default(),
            native_error: att.native_error.clone(),
            _att: att,
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }
    pub fn mode(&self) -> AttachMode {
        self.mode
    }
    /// Whether the transmit socket got zero-copy.
    pub fn zerocopy(&self) -> bool {
        self.socks[0].zerocopy
    }
    pub fn queues(&self) -> usize {
        self.socks.len()
    }

    /// Take completed transmit chunks back.
    fn reclaim(&mut self) {
        let s = &mut self.socks[0];
        let n = s.comp.ready(u32::MAX);
        for k in 0..n {
            let a = s.comp.at(k);
            s.tx_free.push(a - a % u64::from(s.umem.chunk));
        }
        if n > 0 {
            s.comp.release(n);
        }
    }
}

impl Port for XdpPort {
    fn fd(&self) -> RawFd {
        match &self.ep {
            Some(ep) => ep.as_raw_fd(),
            None => self.socks[0].fd.as_raw_fd(),
        }
    }

    fn rx_batch(&mut self, budget: usize, f: &mut dyn FnMut(RxFrame<'_>)) -> usize {
        let mut seen = 0usize;
        let n_socks = self.socks.len();
        for k in 0..n_socks {
            let i = (self.next_rx + k) % n_socks;
            let s = &mut self.socks[i];
            let left = budget.saturating_sub(seen).min(u32::MAX as usize) as u32;
            let n = s.rx.ready(left);
            let chunk = u64::from(s.umem.chunk);
            // Room in the fill ring for every chunk we are about to give back (it holds all the
            // receive chunks, so this only fails if the accounting is broken).
            let room = s.fill.free(n);
            for j in 0..n {
                let d = s.rx.at(j);
                match s.umem.data(d.addr, d.len) {
                    Some(data) => f(RxFrame {
                        data,
                        vlan: None,
                        truncated: false,
                    }),
                    None => self.c.rx_truncated += 1,
                }
                if j < room {
                    s.fill.push(d.addr - d.addr % chunk);
                }
            }
            if n > 0 {
                s.rx.release(n);
                s.fill.submit();
            }
            if s.fill.needs_wakeup() {
                s.wake_rx();
            }
            seen += n as usize;
            if seen >= budget {
                self.next_rx = (i + 1) % n_socks;
                break;
            }
        }
        seen
    }

    fn tx_room(&mut self) -> usize {
        if self.socks[0].tx_free.len() < TX_RECLAIM_BELOW {
            self.reclaim();
        }
        self.socks[0].tx_free.len()
    }

    fn tx_push(&mut self, frame: &[u8]) -> Result<(), TxDrop> {
        if frame.len() < 14 || frame.len() > self.max_frame {
            return Err(TxDrop::TooBig);
        }
        if self.socks[0].tx_free.is_empty() {
            self.reclaim();
        }
        let s = &mut self.socks[0];
        let Some(tx) = s.tx.as_mut() else {
            return Err(TxDrop::RingFull);
        };
        if tx.free(1) == 0 {
            return Err(TxDrop::RingFull);
        }
        let Some(addr) = s.tx_free.pop() else {
            return Err(TxDrop::RingFull);
        };
        if !s.umem.write(addr, frame) {
            s.tx_free.push(addr);
            return Err(TxDrop::TooBig);
        }
        tx.push(libc::xdp_desc {
            addr,
            len: frame.len() as u32,
            options: 0,
        });
        self.unsubmitted += 1;
        self.c.tx_frames += 1;
        self.c.tx_bytes += frame.len() as u64;
        Ok(())
    }

    fn tx_flush(&mut self) -> bool {
        let s = &mut self.socks[0];
        let (fd, zerocopy) = (s.fd.as_raw_fd(), s.zerocopy);
        let Some(tx) = s.tx.as_mut() else {
            return false;
        };
        if self.unsubmitted > 0 {
            tx.submit();
            self.unsubmitted = 0;
        }
        let mut left = tx.outstanding();
        let mut kicks = 0;
        while left > 0 && tx.needs_wakeup() && kicks < MAX_KICKS {
            kicks += 1;
            self.c.kicks += 1;
            // "Try again" (the kernel's batch ended, or no skb memory) is not an error.
            if Xsk::kick_tx(fd).is_err() {
                self.c.kick_errors += 1;
            }
            let now = tx.outstanding();
            // Zero-copy: the call only wakes the driver, which sends in its own time. Copy mode:
            // each call sends up to the kernel's batch; go on while it makes progress.
            let progress = now < left;
            left = now;
            if zerocopy || !progress {
                break;
            }
        }
        self.reclaim();
        left > 0
    }

    fn counters(&mut self, refresh: bool) -> PortCounters {
        if refresh {
            let mut drops = 0;
            let mut ok = false;
            for s in &self.socks {
                if let Ok(st) = s.stats() {
                    drops += st.rx_dropped + st.rx_ring_full;
                    ok = true;
                }
            }
            if ok {
                self.c.rx_ring_drops = drops;
            }
        }
        self.c
    }

    fn io(&self) -> String {
        format!(
            "xdp {}/{}",
            self.mode.name(),
            if self.zerocopy() { "zerocopy" } else { "copy" }
        )
    }
}
