//! The packet the simulator moves around: a [`PacketMeta`] for the schedulers plus the few fields
//! the endpoints need. `Copy`, no heap data: a packet costs nothing to create or drop.

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
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
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
    /// TCP ACKs: the header facts a discipline may compare (CAKE's ACK filter), filled by the
    /// receiver's ACK ([`crate::tcp::AckInfo::tcp_info`]); `None` for other packets.
    pub tcp: Option<TcpInfo>,
}

impl Packet for SimPacket {
    #[inline]
    fn meta(&self) -> &PacketMeta {
        &self.meta
    }
    #[inline]
    fn tcp(&self) -> Option<TcpInfo> {
        self.tcp
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tcp::AckInfo;
    use linkshare_core::qdisc::cake::ack_filter::{find_redundant, AckFilter};

    fn ack(n: u64, tsval_ms: u64, sacks: &[(u64, u64)]) -> SimPacket {
        let mut a = AckInfo {
            ack: n,
            tsval: tsval_ms * 1_000_000,
            tsecr: 5_000_000,
            ..AckInfo::default()
        };
        for (i, s) in sacks.iter().enumerate() {
            a.sacks[i] = *s;
        }
        a.n_sacks = sacks.len() as u8;
        SimPacket {
            meta: PacketMeta {
                len: HEADER_BYTES,
                proto: 6,
                src_port: 5000,
                dst_port: 20000,
                ..PacketMeta::default()
            },
            flow: 0,
            payload: 0,
            kind: PktKind::Ack,
            seq: n,
            sent_at: a.tsval,
            echo: 0,
            tcp: Some(a.tcp_info()),
        }
    }

    /// The receiver's ACKs, as the ACK filter reads them: cumulative ACKs make older ones
    /// redundant; an ACK whose SACK blocks the newer one does not cover, or a DSACK, is kept.
    #[test]
    fn receiver_acks_are_filtered_by_the_kernels_rules() {
        let q = [ack(1000, 1, &[]), ack(2000, 2, &[])];
        assert_eq!(
            find_redundant(q.iter(), &ack(3000, 3, &[]), AckFilter::On),
            Some(0)
        );
        // A SACK the newer ACK repeats (and extends) is redundant; one it drops is not.
        let q = [ack(1000, 1, &[(3000, 4000)])];
        let newer = ack(1000, 2, &[(3000, 5000)]);
        assert_eq!(
            find_redundant(q.iter(), &newer, AckFilter::Aggressive),
            Some(0)
        );
        let other = ack(1000, 2, &[(6000, 7000)]);
        assert_eq!(
            find_redundant(q.iter(), &other, AckFilter::Aggressive),
            None
        );
        // A DSACK (a block below the cumulative ACK) is never dropped.
        let q = [ack(2000, 1, &[(500, 1000)])];
        let later = ack(3000, 2, &[(500, 1000)]);
        assert_eq!(
            find_redundant(q.iter(), &later, AckFilter::Aggressive),
            None
        );
        // Data and pings carry no TCP facts: never eligible.
        let mut data = ack(1000, 1, &[]);
        data.tcp = None;
        assert_eq!(
            find_redundant([data].iter(), &ack(3000, 3, &[]), AckFilter::Aggressive),
            None
        );
    }
}
