//! AF_XDP I/O for the shaper: `linkshare run --io xdp|packet|auto`.
//!
//! Principles:
//! * **Built from the project alone.** The XDP program is six eBPF instructions assembled in
//!   [`bpf`] and loaded with the `bpf()` system call: no C compiler, clang, libbpf or libxdp.
//! * **Nothing stays attached.** The program hangs on a BPF link whose only reference is our fd;
//!   every exit, `SIGKILL` included, detaches it (see [`bpf`]).
//! * **A choice the user can see.** `--io auto` (the default) uses AF_XDP where it opens and
//!   otherwise falls back to AF_PACKET ([`crate::port::PacketPort`]) with one line on stderr saying
//!   why; `--io xdp` that cannot open is an error naming the failing step and errno; the mode in
//!   use (`xdp native/copy`, `xdp generic/copy`, `xdp native/zerocopy`, `packet`) is printed at
//!   start and reported by `stat`.
//! * **Tags stay on.** AF_XDP hands over the frame as the driver built it, without the VLAN tag
//!   a NIC with rx-vlan offload took out into the descriptor (AF_PACKET gives it back, port.rs):
//!   on a trunk the frames would leave untagged. `--io auto` therefore keeps AF_PACKET on an
//!   interface whose rx-vlan offload is on ([`vlan_stripped`]); `--io xdp` is taken as asked.
//!
//! Modules: [`bpf`] (map, program, link), [`umem`] (UMEM, rings, one socket), [`port`] (the
//! [`crate::port::Port`] implementation). Sources: Documentation/networking/af_xdp.rst,
//! include/uapi/linux/if_xdp.h, include/uapi/linux/bpf.h.

pub mod bpf;
pub mod port;
pub mod umem;

pub use bpf::AttachMode;
pub use port::XdpPort;

use crate::port::{PacketPort, Port, RxRingKind};

/// Which I/O the shaper uses on its interfaces.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum IoKind {
    /// AF_XDP (native, else generic) where it opens, AF_PACKET otherwise.
    #[default]
    Auto,
    /// AF_XDP, native mode if the driver has it, else generic; an error if neither opens.
    Xdp,
    /// AF_XDP in native (driver) mode only.
    XdpNative,
    /// AF_XDP in generic (skb) mode only.
    XdpGeneric,
    /// AF_PACKET rings.
    Packet,
}

impl std::str::FromStr for IoKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "auto" => Ok(IoKind::Auto),
            "xdp" => Ok(IoKind::Xdp),
            "xdp-native" | "native" => Ok(IoKind::XdpNative),
            "xdp-generic" | "generic" | "xdp-skb" => Ok(IoKind::XdpGeneric),
            "packet" | "af_packet" => Ok(IoKind::Packet),
            other => Err(format!(
                "unknown I/O `{other}`: use auto, xdp, xdp-native, xdp-generic or packet"
            )),
        }
    }
}

/// Why AF_XDP would lose VLAN tags on interface `name` (its rx-vlan offload is on), or `None`.
fn vlan_stripped(name: &str) -> Option<String> {
    crate::sys::rx_vlan_offload(name)?.then(|| {
        format!(
            "rx-vlan offload is on, so AF_XDP would receive frames without their VLAN tags \
             (turn it off to use AF_XDP: `ethtool -K {name} rxvlan off`)"
        )
    })
}

/// Open interface `name` with the I/O asked for. With [`IoKind::Auto`] a failed AF_XDP open,
/// or an interface that strips VLAN tags ([`vlan_stripped`]), prints one line on stderr and
/// falls back to AF_PACKET.
pub fn open_port(name: &str, io: IoKind, rx_ring: RxRingKind) -> anyhow::Result<Box<dyn Port>> {
    let mode = match io {
        IoKind::Packet => return Ok(Box::new(PacketPort::open_with(name, rx_ring)?)),
        IoKind::Auto | IoKind::Xdp => None,
        IoKind::XdpNative => Some(AttachMode::Native),
        IoKind::XdpGeneric => Some(AttachMode::Generic),
    };
    if io == IoKind::Auto {
        if let Some(why) = vlan_stripped(name) {
            eprintln!("linkshare: {name}: {why}; using AF_PACKET");
            return Ok(Box::new(PacketPort::open_with(name, rx_ring)?));
        }
    }
    match XdpPort::open(name, mode) {
        Ok(p) => {
            if let Some(e) = &p.native_error {
                eprintln!("linkshare: {name}: native XDP refused ({e}); using generic XDP");
            }
            if p.queues() > 1 {
                eprintln!("linkshare: {name}: AF_XDP on {} receive queues", p.queues());
            }
            Ok(Box::new(p))
        }
        Err(e) if io == IoKind::Auto => {
            eprintln!("linkshare: {name}: AF_XDP unavailable ({e}); using AF_PACKET");
            Ok(Box::new(PacketPort::open_with(name, rx_ring)?))
        }
        Err(e) => Err(anyhow::anyhow!("AF_XDP: {e}")),
    }
}

/// The attachment the workers of `--workers N` share on interface `name` (one receive queue
/// each), or `None` for AF_PACKET: with `--io packet`; with `--io auto` when AF_XDP does not
/// open or the interface has fewer receive queues than workers (saying why, once); with the
/// other `--io` kinds either is an error that names the fix.
pub fn attach_for_workers(
    name: &str,
    io: IoKind,
    workers: usize,
) -> anyhow::Result<Option<std::sync::Arc<port::Attachment>>> {
    let mode = match io {
        IoKind::Packet => return Ok(None),
        IoKind::Auto | IoKind::Xdp => None,
        IoKind::XdpNative => Some(AttachMode::Native),
        IoKind::XdpGeneric => Some(AttachMode::Generic),
    };
    let fallback = |why: String| -> anyhow::Result<Option<std::sync::Arc<port::Attachment>>> {
        if io == IoKind::Auto {
            eprintln!(
                "linkshare: {name}: {why}; using AF_PACKET with a fanout group per interface"
            );
            Ok(None)
        } else {
            Err(anyhow::anyhow!("{name}: {why}"))
        }
    };
    if let Some(why) = vlan_stripped(name).filter(|_| io == IoKind::Auto) {
        return fallback(why);
    }
    match port::Attachment::new(name, mode) {
        Ok(a) if (a.queues() as usize) < workers => fallback(format!(
            "AF_XDP needs one receive queue per worker, and the interface has {} for {workers} \
             workers (give it more: `ethtool -L {name} combined {workers}`, or for a veth \
             `ip link add … numrxqueues {workers} numtxqueues {workers}`; or use --io packet)",
            a.queues()
        )),
        Ok(a) => {
            if let Some(e) = &a.native_error {
                eprintln!("linkshare: {name}: native XDP refused ({e}); using generic XDP");
            }
            Ok(Some(std::sync::Arc::new(a)))
        }
        Err(e) => fallback(format!("AF_XDP unavailable ({e})")),
    }
}
