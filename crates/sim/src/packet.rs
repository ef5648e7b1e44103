//! The packet the simulator moves around: a [`PacketMeta`] for the schedulers plus the few fields
//! the endpoints need.
//!
//! A packet is moved whole at every step of its path (source, scheduler queue, device buffer,
//! wire, delay line, sink), so its size is most of what a step costs: it is kept at 104 bytes.
//! The TCP header facts a discipline may read ([`Packet::tcp`], CAKE's ACK filter) are 64 bytes
//! and exist only for ACKs that cross a scheduler (an `[uplink]`): they live out of line, boxed,
//! and every other packet carries an empty pointer.

use linkshare_core::packet::TcpInfo;
use linkshare_core::{Packet, PacketMeta};

/// Bytes of a TCP segment's IP + TCP headers with the timestamp option.
pub const HEADER_BYTES: u32 = 52;

/// The MSS for a link MTU (Linux with timestamps: `mtu − 52`).
pub fn mss_for_mtu(mtu: u32) -> u32 {
    mtu.saturating_sub(HEADER_BYTES).max(1)
}

/// What a packet is, to its endpoints.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum PktKind {
    /// TCP segment carrying `payload` bytes from sequence number `seq`.
    Data,
    /// TCP acknowledgement: `seq` is the cumulative ACK number, `payload` the slot of its
    /// [`crate::tcp::AckInfo`] (SACK blocks, window, timestamps) in the world's table.
    Ack,
    /// UDP datagram number `seq`.
    Udp,
    /// ICMP echo request number `seq`.
    EchoRequest,
    /// ICMP echo reply to request `seq`; `sent_at` is the request's send time.
    EchoReply,
}

/// A simulated packet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SimPacket {
    pub meta: PacketMeta,
    /// Index of the flow in the run's flow table.
    pub flow: u32,
    /// TCP payload bytes; the IP length of UDP datagrams and pings; the ACK's slot for ACKs.
    pub payload: u32,
    pub kind: PktKind,
    /// Sequence / ACK / probe number (see [`PktKind`]).
    pub seq: u64,
    /// Virtual time the packet left its source (ns); echoed by echo replies.
    pub sent_at: u64,
    /// TCP data: the timestamp echo (TSecr) the sender put in the segment.
    pub echo: u64,
    /// TCP ACKs that cross a scheduler (`[uplink]`): the header facts a discipline may compare
    /// (CAKE's ACK filter), from the receiver's ACK ([`crate::tcp::AckInfo::tcp_info`]); `None`
    /// for other packets.
    pub tcp: Option<Box<TcpInfo>>,
    /// TCP data: the CWR flag (ECN, [`crate::tcp::ecn`]).
    pub cwr: bool,
}

impl Packet for SimPacket {
    #[inline]
    fn meta(&self) -> &PacketMeta {
        &self.meta
    }
    #[inline]
    fn tcp(&self) -> Option<TcpInfo> {
        self.tcp.as_deref().copied()
    }
    /// Disciplines may CE-mark a simulated packet (only ECT ones: [`Packet::mark_ce`]).
    #[inline]
    fn meta_mut(&mut self) -> Option<&mut PacketMeta> {
        Some(&mut self.meta)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The size the module docs promise: every step of a packet's path moves this many bytes.
    #[test]
    fn a_packet_stays_small() {
        assert!(std::mem::size_of::<SimPacket>() <= 104);
    }
}
