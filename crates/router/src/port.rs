//! Ports: where frames come from and go to. The shaper loop only sees the [`Port`] trait — receive
//! a batch, queue frames for transmit, flush the batch, one fd to poll — so an AF_XDP port (UMEM
//! fill/completion rings) can replace [`PacketPort`] without touching the loop.
//!
//! [`PacketPort`] is AF_PACKET with memory-mapped rings, two sockets per interface:
//!
//! * **receive**: by default a `TPACKET_V2` ring (one slot per frame, handed over at once: the
//!   lowest latency), or with [`RxRingKind::V3`] a `TPACKET_V3` ring (blocks of variable-size
//!   frames: fewer wake-ups at high rates). The V3 kernel fills a block
//!   and hands it over when it is full or when the retire timer (`RX_BLOCK_TOV_MS`) expires; the
//!   socket polls readable then. We walk every frame of each user-owned block and give the block
//!   back. The socket is bound to `ETH_P_ALL`, promiscuous (`PACKET_ADD_MEMBERSHIP`), and ignores
//!   frames this host sends (`PACKET_IGNORE_OUTGOING`; frames tagged `PACKET_OUTGOING` are also
//!   skipped as a fallback for kernels without it). VLAN tags the kernel stripped into the frame
//!   header are put back, so the frame leaves as it arrived.
//! * **transmit**: a `TPACKET_V2` `PACKET_TX_RING` (fixed-size frames) on a socket bound with
//!   protocol 0 (it receives nothing), `PACKET_QDISC_BYPASS` (straight to the driver, no kernel
//!   qdisc), `PACKET_LOSS` (a malformed frame is skipped instead of stalling the ring). Frames are
//!   copied into free slots and marked `SEND_REQUEST`; one `send()` per batch makes the kernel
//!   send them all. A slot is free again when the kernel sets it back to `AVAILABLE`.
//!   **Linear skbs**: with `PACKET_VNET_HDR` each slot starts with a `virtio_net_hdr` whose
//!   `hdr_len` is the whole frame, so the kernel copies the frame into the skb's linear part
//!   (`tpacket_snd`: `copylen = hdr_len`) instead of attaching the ring's page as a fragment.
//!   A fragment of a user mapping cannot cross into another namespace: `veth_xmit` →
//!   `__dev_forward_skb` then copies it into a freshly allocated page per frame
//!   (`skb_copy_ubufs`): 8 % of the shaper's profile in a 60-byte flood
//!   (docs/benchmarks-history.md, "Linear skbs on AF_PACKET transmit").
//!   Kernels without the option keep the fragment path.
//!
//! Loss accounting: nothing is dropped silently. A frame that does not fit the TX ring slot or the
//! MTU is counted `too_big`; a frame offered while every slot is busy is counted `ring_full` (the
//! loop only dequeues from the scheduler while [`Port::tx_room`] is positive, so only unshaped and
//! non-IP frames can hit it); a kick the kernel refuses is retried and counted `kick_errors`.
//! Frames the kernel could not put in the receive ring are read from `PACKET_STATISTICS` as
//! `rx_ring_drops`.
//!
//! **Following the interface** ([`Port::follow_link`], asked every 100 ms by the loop): a port
//! is bound to an interface index, and a deleted interface takes its binding with it (the
//! kernel unbinds the receive socket, `ENETDOWN`, and transmit fails with `ENXIO`); a
//! re-created one (veth, USB NIC, ppp) has a new index under the old name. While the name is
//! gone the port offers no transmit room, so the schedulers keep their queues (to their own
//! limits) and frames that bypass them are counted `ring_full`; when the name comes back with
//! a new index, or the MTU changed (the ring slots and the frame size check follow it), the
//! port opens fresh sockets and rings (joining its fanout group again) and counts `rebinds`;
//! frames the kernel had not taken from the old transmit ring are counted `rebind_lost`.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::atomic::{fence, Ordering};

use crate::sys::{self, opt, Mmap, TpacketReq, TpacketReq3};

/// One received frame, borrowed from the receive ring.
pub struct RxFrame<'a> {
    /// The frame as the ring holds it (without a VLAN tag the kernel stripped).
    pub data: &'a [u8],
    /// A VLAN tag the kernel took out of the frame: (TPID, TCI).
    pub vlan: Option<(u16, u16)>,
    /// The frame was longer than what the ring could hold (`data` is cut).
    pub truncated: bool,
}

impl RxFrame<'_> {
    /// Length of the frame as it will be forwarded.
    pub fn len(&self) -> usize {
        self.data.len() + if self.vlan.is_some() { 4 } else { 0 }
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Write the frame, VLAN tag restored, into `out` (cleared first).
    pub fn copy_into(&self, out: &mut Vec<u8>) {
        out.clear();
        match self.vlan {
            Some((tpid, tci)) if self.data.len() >= 12 => {
                out.extend_from_slice(&self.data[..12]);
                out.extend_from_slice(&tpid.to_be_bytes());
                out.extend_from_slice(&tci.to_be_bytes());
                out.extend_from_slice(&self.data[12..]);
            }
            _ => out.extend_from_slice(self.data),
        }
    }
}

/// Why a frame could not be queued for transmit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TxDrop {
    /// Every transmit slot is waiting for the kernel.
    RingFull,
    /// Larger than the MTU (plus Ethernet and one VLAN header) or the ring slot, or shorter than
    /// an Ethernet header.
    TooBig,
}

/// Counters a port keeps about itself.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PortCounters {
    /// Frames the kernel could not store in the receive ring (PACKET_STATISTICS tp_drops).
    pub rx_ring_drops: u64,
    /// Frames this host sent that the receive socket still saw (PACKET_OUTGOING), skipped.
    pub rx_own_skipped: u64,
    /// Frames longer than the receive ring's frame room (cut; dropped by the shaper).
    pub rx_truncated: u64,
    /// Frames handed to the kernel for transmit.
    pub tx_frames: u64,
    pub tx_bytes: u64,
    /// `send()` kicks the kernel refused with an error other than "try again" (frames stay queued
    /// and are retried).
    pub kick_errors: u64,
    /// `send()` kicks made (each sends a whole batch).
    pub kicks: u64,
    /// Receive blocks walked.
    pub rx_blocks: u64,
    /// Errors the receive socket reported and the loop read and cleared (`SO_ERROR`, e.g.
    /// `ENETDOWN` when the interface went down): each one is a wake-up, not a spin.
    pub socket_errors: u64,
    /// Times the port was reopened because its interface was re-created (a new ifindex under
    /// the same name) or its MTU changed ([`Port::follow_link`]).
    pub rebinds: u64,
    /// Frames still in the old transmit ring when the port was reopened: lost with it.
    pub rebind_lost: u64,
}

/// A place frames come from and go to: an AF_PACKET pair of rings ([`PacketPort`]) or an AF_XDP
/// socket ([`crate::xdp::XdpPort`]).
pub trait Port {
    /// The fd to poll for readability (frames waiting).
    fn fd(&self) -> RawFd;
    /// Hand up to about `budget` received frames to `f` (whole ring blocks may overshoot it);
    /// returns how many were seen.
    fn rx_batch(&mut self, budget: usize, f: &mut dyn FnMut(RxFrame<'_>)) -> usize;
    /// Free transmit slots now.
    fn tx_room(&mut self) -> usize;
    /// Queue one frame for the next [`Port::tx_flush`].
    fn tx_push(&mut self, frame: &[u8]) -> Result<(), TxDrop>;
    /// Hand every queued frame to the kernel (one system call). Returns whether frames are still
    /// waiting to be taken (the kernel asked to retry).
    fn tx_flush(&mut self) -> bool;
    /// Counters; `refresh` also reads the kernel's receive-ring statistics.
    fn counters(&mut self, refresh: bool) -> PortCounters;
    /// Read and clear an error pending on [`Port::fd`] (epoll reported `EPOLLERR`); count it.
    /// Until it is read, a level-triggered epoll reports the fd ready on every wait.
    fn take_error(&mut self) {}
    /// Check that the interface is still the one the port was opened on: the same index under
    /// its name and the same MTU. When it was deleted the port holds its frames back (no room
    /// to transmit) until the name reappears; when it was re-created or its MTU changed the port
    /// reopens its sockets and rings for it. Returns whether [`Port::fd`] changed (the caller
    /// polls the new one; the old one left the poll set when it was closed).
    fn follow_link(&mut self) -> bool {
        false
    }
    /// The interface is gone (deleted, not yet re-created): nothing can be sent, and nothing is
    /// tried until [`Port::follow_link`] finds it back.
    fn link_gone(&self) -> bool {
        false
    }
    /// The I/O in use, as `run` and `stat` print it (`packet`, `xdp native/copy`, …).
    fn io(&self) -> String {
        "packet".to_string()
    }
}

/// Receive ring geometry: 16 blocks of 256 KiB. A block holds a 64 KiB GSO frame, or ~170
/// full-size or ~3000 minimum-size frames; 4 MiB per interface absorbs ~30 ms at 1 Gbit/s.
const RX_BLOCK_SIZE: u32 = 1 << 18;
const RX_BLOCK_NR: u32 = 16;
const RX_FRAME_SIZE: u32 = 2048;
/// A partly filled receive block is handed over after this many milliseconds (the kernel's
/// minimum granularity): the worst extra latency at low packet rates.
pub const RX_BLOCK_TOV_MS: u32 = 1;
/// Bytes of a V2 receive ring (2048 slots of 2 KiB at a 1500-byte MTU).
const RX_V2_BYTES: usize = 4 << 20;
/// Transmit ring: 512 slots.
const TX_FRAME_NR: u32 = 512;

// Byte offsets in the ring headers (<linux/if_packet.h>).
const BLK_STATUS: usize = 8; // tpacket_block_desc.hdr.bh1.block_status
const BLK_NUM_PKTS: usize = 12;
const BLK_FIRST: usize = 16; // offset_to_first_pkt
const H3_NEXT: usize = 0; // tpacket3_hdr.tp_next_offset
const H3_SNAPLEN: usize = 12;
const H3_LEN: usize = 16;
const H3_STATUS: usize = 20;
const H3_MAC: usize = 24;
const H3_VLAN_TCI: usize = 32;
const H3_VLAN_TPID: usize = 36;
const H3_SLL: usize = 48; // TPACKET_ALIGN(sizeof(tpacket3_hdr))
const SLL_PKTTYPE: usize = 10;
const H2_STATUS: usize = 0; // tpacket2_hdr.tp_status
const H2_LEN: usize = 4;
const H2_SNAPLEN: usize = 8;
const H2_MAC: usize = 12;
const H2_VLAN_TCI: usize = 24;
const H2_VLAN_TPID: usize = 26;
const H2_SLL: usize = 32; // TPACKET_ALIGN(sizeof(tpacket2_hdr))
/// Where a TPACKET_V2 transmit frame's data starts: TPACKET2_HDRLEN - sizeof(sockaddr_ll).
const H2_DATA: usize = 32;

const TP_STATUS_KERNEL: u32 = 0;
const TP_STATUS_USER: u32 = 1;
const TP_STATUS_VLAN_VALID: u32 = 0x10;
const TP_STATUS_VLAN_TPID_VALID: u32 = 0x40;
const TP_STATUS_AVAILABLE: u32 = 0;
const TP_STATUS_SEND_REQUEST: u32 = 1;
const TP_STATUS_SENDING: u32 = 2;
const TP_STATUS_WRONG_FORMAT: u32 = 4;

/// How the receive ring hands frames over.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum RxRingKind {
    /// `TPACKET_V2`: one slot per frame, each handed over as soon as the kernel has written it
    /// (microseconds of latency; one status word per frame).
    #[default]
    V2,
    /// `TPACKET_V3`: blocks of frames, handed over when full or after the retire timer
    /// (`RX_BLOCK_TOV_MS`): fewest wake-ups at high packet rates, but up to a millisecond of
    /// extra latency per frame when the rate is low.
    V3,
}

impl std::str::FromStr for RxRingKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "v2" | "tpacket_v2" => Ok(RxRingKind::V2),
            "v3" | "tpacket_v3" => Ok(RxRingKind::V3),
            other => Err(format!("unknown receive ring `{other}`: use v2 or v3")),
        }
    }
}

struct RxRing {
    fd: OwnedFd,
    map: Mmap,
    kind: RxRingKind,
    /// V3: the current block. V2: the next frame slot.
    block: usize,
    /// V3: next frame to read in the current block: (index, byte offset in the block).
    pos: Option<(u32, usize)>,
    /// V2: slot size and count.
    frame_size: usize,
    frame_nr: usize,
}

struct TxRing {
    fd: OwnedFd,
    map: Mmap,
    frame_size: usize,
    nr: usize,
    /// Next slot to fill.
    head: usize,
    /// Oldest slot the kernel may still hold.
    tail: usize,
    busy: usize,
    /// Slots filled since the last successful kick.
    unkicked: usize,
    /// Largest frame the device takes.
    max_frame: usize,
    /// Bytes of `virtio_net_hdr` before each frame: [`VNET_HDR_LEN`], or 0 when the kernel
    /// refused `PACKET_VNET_HDR`.
    vnet: usize,
}

/// `sizeof(struct virtio_net_hdr)`: flags, gso_type, hdr_len, gso_size, csum_start, csum_offset.
const VNET_HDR_LEN: usize = 10;
/// Offset of `hdr_len` (little-endian u16 on the machines we run on: `vio_le()`).
const VNET_HDR_LEN_OFF: usize = 2;

/// AF_PACKET port with a receive ring (V2 or V3) and a TPACKET_V2 transmit ring, or a transmit
/// ring only ([`PacketPort::open_tx_only`]).
pub struct PacketPort {
    name: String,
    /// `None`: transmit only (`--rx-split direction`: another worker receives here).
    rx: Option<RxRing>,
    tx: TxRing,
    c: PortCounters,
    /// What the rings were opened for, to open them again ([`Port::follow_link`]).
    bound: Binding,
}

/// The interface a [`PacketPort`] was opened on, and how.
#[derive(Clone, Copy, Debug)]
struct Binding {
    ifindex: i32,
    mtu: u32,
    /// `None`: transmit only.
    rx: Option<RxRingKind>,
    fanout: Option<u16>,
    /// The interface's name is gone: nothing is sent until it reappears.
    gone: bool,
}

fn ctx(what: String) -> impl FnOnce(io::Error) -> io::Error {
    move |e| io::Error::new(e.kind(), format!("{what}: {e}"))
}

impl PacketPort {
    /// Open interface `name`: both sockets, both rings, promiscuous mode.
    pub fn open(name: &str) -> io::Result<PacketPort> {
        Self::open_with(name, RxRingKind::default())
    }

    /// Open interface `name` with the given kind of receive ring.
    pub fn open_with(name: &str, kind: RxRingKind) -> io::Result<PacketPort> {
        Self::open_bound(name, Some(kind))
    }

    /// Open interface `name` for transmit only: no receive socket at all, so the kernel copies
    /// nothing here for this port (another port receives on the interface). Its [`Port::fd`] is
    /// the transmit socket's, which never polls readable (it is bound to protocol 0).
    pub fn open_tx_only(name: &str) -> io::Result<PacketPort> {
        Self::open_bound(name, None)
    }

    fn open_bound(name: &str, rx: Option<RxRingKind>) -> io::Result<PacketPort> {
        let idx = sys::ifindex(name)?;
        let mtu = sys::mtu(name)?;
        let rx_ring = match rx {
            Some(kind) => {
                Some(RxRing::open(idx, mtu, kind).map_err(ctx(format!("{name}: receive ring")))?)
            }
            None => None,
        };
        Ok(PacketPort {
            name: name.to_string(),
            rx: rx_ring,
            tx: TxRing::open(idx, mtu).map_err(ctx(format!("{name}: transmit ring")))?,
            c: PortCounters::default(),
            bound: Binding {
                ifindex: idx,
                mtu,
                rx,
                fanout: None,
                gone: false,
            },
        })
    }

    /// [`Port::follow_link`]: what the interface named `self.name` is now, and whether the
    /// port must be reopened for it.
    fn relink(&mut self) -> bool {
        let Ok(idx) = sys::ifindex(&self.name) else {
            // Deleted (a USB NIC pulled, a ppp link ended, a veth removed): hold frames back.
            self.bound.gone = true;
            return false;
        };
        let Ok(mtu) = sys::mtu(&self.name) else {
            return false;
        };
        if idx == self.bound.ifindex && mtu == self.bound.mtu {
            self.bound.gone = false;
            return false;
        }
        let fresh = Self::open_bound(&self.name, self.bound.rx).and_then(|mut p| {
            if let Some(g) = self.bound.fanout {
                p.join_fanout(g)?;
            }
            Ok(p)
        });
        match fresh {
            Ok(p) => {
                // Frames the kernel never took from the old ring go with it.
                self.c.rebind_lost += self.tx.busy as u64;
                self.c.rebinds += 1;
                self.rx = p.rx;
                self.tx = p.tx;
                self.bound = Binding {
                    fanout: self.bound.fanout,
                    ..p.bound
                };
                true
            }
            // Not ready yet (e.g. renamed in the middle): tried again at the next check.
            Err(_) => false,
        }
    }
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Join receive fanout group `group` (`linkshare run --workers N`: one port per worker on
    /// each interface, all in one group): the kernel gives each received frame to exactly one
    /// socket of the group, chosen by a hash of its flow (`PACKET_FANOUT_HASH`), so a flow stays
    /// on one worker and its order is kept. Without the group every socket would get a copy.
    ///
    /// Not `PACKET_FANOUT_FLAG_DEFRAG`: with it the kernel reassembles IP fragments and hands
    /// the member the whole datagram, which does not fit a ring slot and could not be sent as
    /// one frame anyway. Without it the fragments of a datagram hash alike (the kernel's flow
    /// dissector reads no ports from a fragment), and each is forwarded as it came.
    pub fn join_fanout(&mut self, group: u16) -> io::Result<()> {
        self.join_fanout_mode(group, opt::PACKET_FANOUT_HASH)
    }

    /// Join fanout group `group` whose member is chosen by classic BPF program `prog`
    /// (`PACKET_FANOUT_CBPF`): the member of index `prog(frame) mod members`, indexes in the
    /// order the sockets joined (`--placement address`: workers/address.rs).
    pub fn join_fanout_cbpf(&mut self, group: u16, prog: &[libc::sock_filter]) -> io::Result<()> {
        self.join_fanout_mode(group, opt::PACKET_FANOUT_CBPF)?;
        let Some(rx) = &self.rx else {
            return Ok(());
        };
        let fprog = libc::sock_fprog {
            len: prog.len() as u16,
            filter: prog.as_ptr() as *mut libc::sock_filter,
        };
        sys::setsockopt(
            rx.fd.as_raw_fd(),
            libc::SOL_PACKET,
            opt::PACKET_FANOUT_DATA,
            "PACKET_FANOUT_DATA",
            &fprog,
        )
        .map_err(ctx(format!("{}: fanout steering program", self.name)))
    }

    fn join_fanout_mode(&mut self, group: u16, mode: u32) -> io::Result<()> {
        let v: u32 = u32::from(group) | (mode << 16);
        let Some(rx) = &self.rx else {
            return Ok(());
        };
        self.bound.fanout = Some(group);
        sys::setsockopt(
            rx.fd.as_raw_fd(),
            libc::SOL_PACKET,
            opt::PACKET_FANOUT,
            "PACKET_FANOUT",
            &v,
        )
        .map_err(ctx(format!("{}: receive fanout group {group}", self.name)))
    }
}

impl RxRing {
    fn open(idx: i32, mtu: u32, kind: RxRingKind) -> io::Result<RxRing> {
        let fd = sys::packet_socket(sys::ETH_P_ALL)?;
        let raw = fd.as_raw_fd();
        let (version, vname) = match kind {
            RxRingKind::V2 => (opt::TPACKET_V2, "PACKET_VERSION(TPACKET_V2)"),
            RxRingKind::V3 => (opt::TPACKET_V3, "PACKET_VERSION(TPACKET_V3)"),
        };
        sys::setsockopt(raw, libc::SOL_PACKET, opt::PACKET_VERSION, vname, &version)?;
        // V2 slots hold one frame of the MTU plus Ethernet, a VLAN tag and the ring's headers.
        let frame_size = (mtu as usize + 18 + H2_SLL + 32)
            .next_power_of_two()
            .max(RX_FRAME_SIZE as usize);
        let block_size = frame_size.max(1 << 16);
        let (len, frame_nr) = match kind {
            RxRingKind::V2 => {
                let block_nr = (RX_V2_BYTES / block_size).max(2);
                let req = TpacketReq {
                    block_size: block_size as u32,
                    block_nr: block_nr as u32,
                    frame_size: frame_size as u32,
                    frame_nr: (block_size / frame_size * block_nr) as u32,
                };
                sys::setsockopt(
                    raw,
                    libc::SOL_PACKET,
                    opt::PACKET_RX_RING,
                    "PACKET_RX_RING",
                    &req,
                )?;
                (block_size * block_nr, block_size / frame_size * block_nr)
            }
            RxRingKind::V3 => {
                let req = TpacketReq3 {
                    block_size: RX_BLOCK_SIZE,
                    block_nr: RX_BLOCK_NR,
                    frame_size: RX_FRAME_SIZE,
                    frame_nr: RX_BLOCK_SIZE / RX_FRAME_SIZE * RX_BLOCK_NR,
                    retire_blk_tov: RX_BLOCK_TOV_MS,
                    sizeof_priv: 0,
                    feature_req_word: 0,
                };
                sys::setsockopt(
                    raw,
                    libc::SOL_PACKET,
                    opt::PACKET_RX_RING,
                    "PACKET_RX_RING",
                    &req,
                )?;
                ((RX_BLOCK_SIZE * RX_BLOCK_NR) as usize, 0)
            }
        };
        let one: libc::c_int = 1;
        // Not seeing our own transmissions; older kernels lack it (the PACKET_OUTGOING check
        // below still skips them), so a failure is not fatal.
        let _ = sys::setsockopt(
            raw,
            libc::SOL_PACKET,
            opt::PACKET_IGNORE_OUTGOING,
            "PACKET_IGNORE_OUTGOING",
            &one,
        );
        let map = Mmap::new(raw, len)?;
        sys::packet_bind(raw, idx, sys::ETH_P_ALL)?;
        sys::packet_promisc(raw, idx)?;
        Ok(RxRing {
            fd,
            map,
            kind,
            block: 0,
            pos: None,
            frame_size,
            frame_nr,
        })
    }

    fn batch(
        &mut self,
        budget: usize,
        c: &mut PortCounters,
        f: &mut dyn FnMut(RxFrame<'_>),
    ) -> usize {
        match self.kind {
            RxRingKind::V2 => self.batch_v2(budget, c, f),
            RxRingKind::V3 => self.batch_v3(budget, c, f),
        }
    }

    /// Walk ready V2 slots in order, handing each back as soon as it is read.
    fn batch_v2(
        &mut self,
        budget: usize,
        c: &mut PortCounters,
        f: &mut dyn FnMut(RxFrame<'_>),
    ) -> usize {
        let fs = self.frame_size;
        let mut seen = 0;
        while seen < budget {
            let h = self.block * fs;
            let status = self.map.read_u32(h + H2_STATUS);
            fence(Ordering::Acquire);
            if status & TP_STATUS_USER == 0 {
                break;
            }
            let len = self.map.read_u32(h + H2_LEN) as usize;
            let snap = self.map.read_u32(h + H2_SNAPLEN) as usize;
            let mac = usize::from(self.map.read_u16(h + H2_MAC));
            let pkttype = self
                .map
                .slice(h + H2_SLL + SLL_PKTTYPE, 1)
                .map_or(0, |b| b[0]);
            seen += 1;
            if pkttype == libc::PACKET_OUTGOING {
                c.rx_own_skipped += 1;
            } else if mac.saturating_add(snap) <= fs {
                if let Some(data) = self.map.slice(h + mac, snap) {
                    let vlan = (status & TP_STATUS_VLAN_VALID != 0).then(|| {
                        let tpid = if status & TP_STATUS_VLAN_TPID_VALID != 0 {
                            self.map.read_u16(h + H2_VLAN_TPID)
                        } else {
                            0x8100
                        };
                        (tpid, self.map.read_u16(h + H2_VLAN_TCI))
                    });
                    let truncated = snap < len;
                    if truncated {
                        c.rx_truncated += 1;
                    }
                    f(RxFrame {
                        data,
                        vlan,
                        truncated,
                    });
                }
            }
            fence(Ordering::Release);
            self.map.write_u32(h + H2_STATUS, TP_STATUS_KERNEL);
            self.block = (self.block + 1) % self.frame_nr;
        }
        seen
    }

    fn batch_v3(
        &mut self,
        budget: usize,
        c: &mut PortCounters,
        f: &mut dyn FnMut(RxFrame<'_>),
    ) -> usize {
        let bs = RX_BLOCK_SIZE as usize;
        let mut seen = 0;
        while seen < budget {
            let base = self.block * bs;
            let st = self.map.read_u32(base + BLK_STATUS);
            fence(Ordering::Acquire);
            if st & TP_STATUS_USER == 0 {
                break;
            }
            let num = self.map.read_u32(base + BLK_NUM_PKTS);
            let (mut i, mut off) = self
                .pos
                .unwrap_or((0, self.map.read_u32(base + BLK_FIRST) as usize));
            while i < num && seen < budget {
                // Every offset comes from the kernel; a frame outside the block ends the block.
                if off == 0 || off.saturating_add(H3_SLL + 20) > bs {
                    i = num;
                    break;
                }
                let h = base + off;
                let snap = self.map.read_u32(h + H3_SNAPLEN) as usize;
                let len = self.map.read_u32(h + H3_LEN) as usize;
                let status = self.map.read_u32(h + H3_STATUS);
                let mac = usize::from(self.map.read_u16(h + H3_MAC));
                let pkttype = self
                    .map
                    .slice(h + H3_SLL + SLL_PKTTYPE, 1)
                    .map_or(0, |b| b[0]);
                let next = self.map.read_u32(h + H3_NEXT) as usize;
                seen += 1;
                if pkttype == libc::PACKET_OUTGOING {
                    c.rx_own_skipped += 1;
                } else if mac + snap <= bs - off {
                    if let Some(data) = self.map.slice(h + mac, snap) {
                        let vlan = (status & TP_STATUS_VLAN_VALID != 0).then(|| {
                            let tpid = if status & TP_STATUS_VLAN_TPID_VALID != 0 {
                                self.map.read_u16(h + H3_VLAN_TPID)
                            } else {
                                0x8100
                            };
                            (tpid, (self.map.read_u32(h + H3_VLAN_TCI) & 0xffff) as u16)
                        });
                        let truncated = snap < len;
                        if truncated {
                            c.rx_truncated += 1;
                        }
                        f(RxFrame {
                            data,
                            vlan,
                            truncated,
                        });
                    }
                }
                i += 1;
                if next == 0 {
                    i = num;
                }
                off += next;
            }
            if i >= num {
                fence(Ordering::Release);
                self.map.write_u32(base + BLK_STATUS, TP_STATUS_KERNEL);
                self.block = (self.block + 1) % RX_BLOCK_NR as usize;
                self.pos = None;
                c.rx_blocks += 1;
            } else {
                self.pos = Some((i, off));
            }
        }
        seen
    }
}

impl TxRing {
    fn open(idx: i32, mtu: u32) -> io::Result<TxRing> {
        let fd = sys::packet_socket(0)?;
        let raw = fd.as_raw_fd();
        sys::setsockopt(
            raw,
            libc::SOL_PACKET,
            opt::PACKET_VERSION,
            "PACKET_VERSION(TPACKET_V2)",
            &opt::TPACKET_V2,
        )?;
        let one: libc::c_int = 1;
        sys::setsockopt(raw, libc::SOL_PACKET, opt::PACKET_LOSS, "PACKET_LOSS", &one)?;
        sys::setsockopt(
            raw,
            libc::SOL_PACKET,
            opt::PACKET_QDISC_BYPASS,
            "PACKET_QDISC_BYPASS",
            &one,
        )?;
        // Linear skbs (module doc). Must precede the ring; an old kernel's refusal is not fatal.
        let vnet = match sys::setsockopt(
            raw,
            libc::SOL_PACKET,
            opt::PACKET_VNET_HDR,
            "PACKET_VNET_HDR",
            &one,
        ) {
            Ok(()) => VNET_HDR_LEN,
            Err(_) => 0,
        };
        // Ethernet header + one VLAN tag + MTU must fit after the frame header.
        let max_frame = mtu as usize + 18;
        let frame_size = (max_frame + H2_DATA + vnet).next_power_of_two().max(2048);
        let block_size = frame_size.max(1 << 16);
        let per_block = block_size / frame_size;
        let block_nr = (TX_FRAME_NR as usize).div_ceil(per_block);
        let nr = block_nr * per_block;
        let req = TpacketReq {
            block_size: block_size as u32,
            block_nr: block_nr as u32,
            frame_size: frame_size as u32,
            frame_nr: nr as u32,
        };
        sys::setsockopt(
            raw,
            libc::SOL_PACKET,
            opt::PACKET_TX_RING,
            "PACKET_TX_RING",
            &req,
        )?;
        let map = Mmap::new(raw, block_size * block_nr)?;
        sys::packet_bind(raw, idx, 0)?;
        // Room for a full ring of skbs in flight; failure only means earlier EAGAINs.
        let sndbuf: libc::c_int = 4 << 20;
        let _ = sys::setsockopt(raw, libc::SOL_SOCKET, libc::SO_SNDBUF, "SO_SNDBUF", &sndbuf);
        Ok(TxRing {
            fd,
            map,
            frame_size,
            nr,
            head: 0,
            tail: 0,
            busy: 0,
            unkicked: 0,
            max_frame,
            vnet,
        })
    }

    /// Free the slots the kernel is done with, oldest first.
    fn reclaim(&mut self) {
        while self.busy > self.unkicked {
            let st = self.map.read_u32(self.tail * self.frame_size + H2_STATUS);
            fence(Ordering::Acquire);
            if st == TP_STATUS_SEND_REQUEST || st == TP_STATUS_SENDING {
                break;
            }
            if st == TP_STATUS_WRONG_FORMAT {
                // Only without PACKET_LOSS; give the slot back so the ring cannot stall.
                self.map
                    .write_u32(self.tail * self.frame_size + H2_STATUS, TP_STATUS_AVAILABLE);
            }
            self.tail = (self.tail + 1) % self.nr;
            self.busy -= 1;
        }
    }

    fn room(&mut self) -> usize {
        if self.busy == self.nr || self.busy > self.nr / 2 {
            self.reclaim();
        }
        self.nr - self.busy
    }

    fn push(&mut self, data: &[u8]) -> Result<(), TxDrop> {
        let room = self.frame_size - H2_DATA - self.vnet;
        if data.len() < 14
            || data.len() > self.max_frame
            || data.len() > room
            || data.len() > usize::from(u16::MAX)
        {
            return Err(TxDrop::TooBig);
        }
        if self.busy == self.nr {
            self.reclaim();
            if self.busy == self.nr {
                return Err(TxDrop::RingFull);
            }
        }
        let f = self.head * self.frame_size;
        if self.vnet > 0 {
            // No offloads, no checksum to finish; the whole frame goes into the linear part.
            let mut h = [0u8; VNET_HDR_LEN];
            h[VNET_HDR_LEN_OFF..VNET_HDR_LEN_OFF + 2]
                .copy_from_slice(&(data.len() as u16).to_le_bytes());
            if !self.map.write_bytes(f + H2_DATA, &h) {
                return Err(TxDrop::TooBig);
            }
        }
        if !self.map.write_bytes(f + H2_DATA + self.vnet, data) {
            return Err(TxDrop::TooBig);
        }
        self.map
            .write_u32(f + H2_LEN, (self.vnet + data.len()) as u32);
        fence(Ordering::Release);
        self.map.write_u32(f + H2_STATUS, TP_STATUS_SEND_REQUEST);
        self.head = (self.head + 1) % self.nr;
        self.busy += 1;
        self.unkicked += 1;
        Ok(())
    }

    /// Returns Ok(true) when frames remain for a retry.
    fn kick(&mut self, c: &mut PortCounters) -> bool {
        if self.unkicked == 0 {
            return false;
        }
        c.kicks += 1;
        match sys::tx_ring_kick(self.fd.as_raw_fd()) {
            Ok(true) => {
                self.unkicked = 0;
            }
            Ok(false) => {}
            Err(_) => c.kick_errors += 1,
        }
        // The kernel may have left frames SEND_REQUEST (no skb memory): they go on the next kick.
        // Count them as kicked only once their status changed.
        if self.unkicked > 0 {
            let mut pending = 0;
            let mut s = self.tail;
            for _ in 0..self.busy {
                if self.map.read_u32(s * self.frame_size + H2_STATUS) == TP_STATUS_SEND_REQUEST {
                    pending += 1;
                }
                s = (s + 1) % self.nr;
            }
            self.unkicked = pending;
        }
        self.unkicked > 0
    }
}

impl Port for PacketPort {
    fn fd(&self) -> RawFd {
        match &self.rx {
            Some(rx) => rx.fd.as_raw_fd(),
            None => self.tx.fd.as_raw_fd(),
        }
    }
    fn rx_batch(&mut self, budget: usize, f: &mut dyn FnMut(RxFrame<'_>)) -> usize {
        match &mut self.rx {
            Some(rx) => rx.batch(budget, &mut self.c, f),
            None => 0,
        }
    }
    fn tx_room(&mut self) -> usize {
        if self.bound.gone {
            return 0;
        }
        self.tx.room()
    }
    fn tx_push(&mut self, frame: &[u8]) -> Result<(), TxDrop> {
        if self.bound.gone {
            return Err(TxDrop::RingFull);
        }
        self.tx.push(frame)?;
        self.c.tx_frames += 1;
        self.c.tx_bytes += frame.len() as u64;
        Ok(())
    }
    fn tx_flush(&mut self) -> bool {
        // No device to kick (ENXIO): retried once the interface is back, not every turn.
        !self.bound.gone && self.tx.kick(&mut self.c)
    }
    fn follow_link(&mut self) -> bool {
        self.relink()
    }
    fn link_gone(&self) -> bool {
        self.bound.gone
    }
    fn take_error(&mut self) {
        if sys::take_socket_error(self.fd()).is_some() {
            self.c.socket_errors += 1;
        }
    }
    fn counters(&mut self, refresh: bool) -> PortCounters {
        if refresh {
            if let Some(rx) = &self.rx {
                if let Ok((_, drops)) = sys::packet_stats_v3(rx.fd.as_raw_fd()) {
                    self.c.rx_ring_drops += drops;
                }
            }
        }
        self.c
    }
}
