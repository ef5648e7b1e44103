//! CAKE's ACK filter: when a pure ACK joins a flow queue, drop an older queued ACK of the same
//! connection that the new one makes redundant (Linux net/sched/sch_cake.c `cake_ack_filter`,
//! `cake_tcph_may_drop`, `cake_tcph_sack_compare`; "Piece of CAKE" §III-E).
//!
//! On an asymmetric link (a slow uplink carrying the ACKs of a fast download) ACKs queue
//! behind each other; a cumulative ACK carries everything the older ones said, so all but the
//! newest can go. The rules, the kernel's:
//!
//! * the arriving packet (the *trigger*) has ACK set and SYN clear;
//! * a queued packet is *eligible* when it is TCP of the same addresses and ports, carries no
//!   payload, has exactly ACK among URG/PSH/RST/SYN/FIN and the reserved bits, carries only
//!   NOP/EOL/MD5/SACK/timestamp options (timestamps not newer than the trigger's), does not
//!   acknowledge beyond the trigger, and SACKs nothing the trigger does not (a DSACK is never
//!   redundant); if both acknowledge the same number the trigger must SACK more;
//! * ECE/CWR must not change between the dropped ACK and the ones kept;
//! * `on` (conservative) drops the oldest eligible ACK once two are queued; `aggressive` also
//!   drops a single eligible ACK that sits right before the trigger with the same ECN flags.
//!
//! At most one ACK is dropped per arrival. The scan is O(queue length) per arriving TCP ACK
//! (flow queues stay short under COBALT); packets whose type cannot show its TCP header
//! ([`Packet::tcp`] is `None`) are never eligible.

use crate::packet::{Packet, TcpInfo};

/// `ack_filter = "off" | "on" | "aggressive"`.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Hash)]
pub enum AckFilter {
    #[default]
    Off,
    On,
    Aggressive,
}

impl AckFilter {
    pub const KNOWN: &'static [(&'static str, AckFilter)] = &[
        ("off", AckFilter::Off),
        ("on", AckFilter::On),
        ("aggressive", AckFilter::Aggressive),
    ];
    pub fn name(self) -> &'static str {
        match self {
            AckFilter::Off => "off",
            AckFilter::On => "on",
            AckFilter::Aggressive => "aggressive",
        }
    }
}

/// `a` is after `b` in sequence space.
fn after(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) > 0
}

fn before(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) < 0
}

const ECN_FLAGS: u16 = TcpInfo::ECE | TcpInfo::CWR;

/// `cake_tcph_may_drop`: flags and options allow dropping `c` for a trigger with timestamps
/// `(tsval, tsecr)`.
fn may_drop(c: &TcpInfo, tsval: u32, tsecr: u32) -> bool {
    // Reserved bits, URG, PSH, RST, SYN, FIN clear; ACK set (ECE/CWR handled apart).
    if c.flags & !ECN_FLAGS != TcpInfo::ACK || c.other_options {
        return false;
    }
    match c.tstamp {
        Some((v, e)) => !after(v, tsval) && !after(e, tsecr),
        None => true,
    }
}

/// `cake_tcph_sack_compare(a, b)`: -1 if `a` SACKs something `b` does not (or a DSACK), 1 if
/// `b` SACKs strictly more, 0 if the same.
fn sack_compare(a: &TcpInfo, b: &TcpInfo) -> i32 {
    let sa = &a.sack[..(a.sack_blocks as usize).min(4)];
    let sb = &b.sack[..(b.sack_blocks as usize).min(4)];
    match (sa.is_empty(), sb.is_empty()) {
        (false, true) => return -1,
        (true, false) => return 1,
        (true, true) => return 0,
        _ => {}
    }
    let (mut bytes_a, mut bytes_b) = (0u32, 0u32);
    let mut first = true;
    for &(start_a, end_a) in sa {
        if before(start_a, a.ack) {
            return -1;
        }
        bytes_a = bytes_a.wrapping_add(end_a.wrapping_sub(start_a));
        let mut found = false;
        for &(start_b, end_b) in sb {
            if first {
                bytes_b = bytes_b.wrapping_add(end_b.wrapping_sub(start_b));
            }
            if !after(start_b, start_a) && !before(end_b, end_a) {
                found = true;
                if !first {
                    break;
                }
            }
        }
        if !found {
            return -1;
        }
        first = false;
    }
    if bytes_b > bytes_a {
        1
    } else {
        0
    }
}

fn same_connection(a: &crate::PacketMeta, b: &crate::PacketMeta) -> bool {
    a.l3 == b.l3
        && a.src == b.src
        && a.dst == b.dst
        && a.src_port == b.src_port
        && a.dst_port == b.dst_port
}

/// The position among `queued` (oldest first, the trigger not included) of the ACK to drop
/// for the `trigger` that was just appended, if any.
pub fn find_redundant<'a, P: Packet + 'a>(
    queued: impl Iterator<Item = &'a P>,
    trigger: &P,
    mode: AckFilter,
) -> Option<usize> {
    if mode == AckFilter::Off {
        return None;
    }
    let t = trigger.tcp()?;
    if t.flags & (TcpInfo::ACK | TcpInfo::SYN) != TcpInfo::ACK {
        return None;
    }
    let (tsval, tsecr) = t.tstamp.unwrap_or((0, 0));
    let tm = trigger.meta();
    let mut elig: Option<(usize, u16)> = None;
    let mut num_found = 0;
    let mut last = None;
    for (i, p) in queued.enumerate() {
        last = Some(i);
        if !same_connection(p.meta(), tm) {
            continue;
        }
        let Some(c) = p.tcp() else { continue };
        if let Some((_, flags)) = elig {
            if c.flags & ECN_FLAGS != flags {
                elig = None;
                num_found -= 1;
            }
        }
        if !may_drop(&c, tsval, tsecr) || c.payload != 0 || after(c.ack, t.ack) {
            continue;
        }
        let cmp = sack_compare(&c, &t);
        if cmp < 0 || (c.ack == t.ack && cmp == 0) {
            continue;
        }
        if elig.is_none() {
            elig = Some((i, c.flags & ECN_FLAGS));
        }
        num_found += 1;
        if num_found > 1 {
            return elig.map(|e| e.0);
        }
    }
    match (elig, last) {
        (Some((i, flags)), Some(l))
            if mode == AckFilter::Aggressive && i == l && flags == t.flags & ECN_FLAGS =>
        {
            Some(i)
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::PacketMeta;

    #[derive(Clone, Debug)]
    struct Seg(PacketMeta, TcpInfo);
    impl Packet for Seg {
        fn meta(&self) -> &PacketMeta {
            &self.0
        }
        fn tcp(&self) -> Option<TcpInfo> {
            Some(self.1)
        }
    }

    fn ack(n: u32) -> Seg {
        let meta = PacketMeta {
            len: 52,
            proto: 6,
            src_port: 40000,
            dst_port: 443,
            ..Default::default()
        };
        Seg(
            meta,
            TcpInfo {
                ack: n,
                flags: TcpInfo::ACK,
                tstamp: Some((n, 7)),
                ..Default::default()
            },
        )
    }

    fn find(q: &[Seg], t: &Seg, m: AckFilter) -> Option<usize> {
        find_redundant(q.iter(), t, m)
    }

    #[test]
    fn conservative_needs_two_eligible_aggressive_one() {
        let q = vec![ack(1000)];
        assert_eq!(find(&q, &ack(2000), AckFilter::On), None);
        assert_eq!(find(&q, &ack(2000), AckFilter::Aggressive), Some(0));
        assert_eq!(find(&q, &ack(2000), AckFilter::Off), None);
        let q = vec![ack(1000), ack(1500)];
        // The oldest of the two goes.
        assert_eq!(find(&q, &ack(2000), AckFilter::On), Some(0));
    }

    #[test]
    fn data_syn_other_connections_and_newer_acks_are_kept() {
        let mut data = ack(1000);
        data.1.payload = 1448;
        let mut syn = ack(1000);
        syn.1.flags |= TcpInfo::SYN;
        let mut other = ack(1000);
        other.0.src_port = 40001;
        let mut psh = ack(1000);
        psh.1.flags |= TcpInfo::PSH;
        let mut opt = ack(1000);
        opt.1.other_options = true;
        for kept in [data, syn, other, psh, opt, ack(3000)] {
            let q = vec![kept.clone(), ack(1100)];
            assert_eq!(
                find(&q, &ack(2000), AckFilter::Aggressive),
                Some(1),
                "{kept:?}"
            );
        }
        // A trigger with SYN filters nothing.
        let mut t = ack(2000);
        t.1.flags |= TcpInfo::SYN;
        assert_eq!(find(&[ack(1), ack(2)], &t, AckFilter::On), None);
        // Same cumulative ACK and same (no) SACK: nothing new, keep.
        assert_eq!(find(&[ack(2000)], &ack(2000), AckFilter::Aggressive), None);
    }

    #[test]
    fn sack_information_is_never_lost() {
        let mut older = ack(1000);
        older.1.sack = [(3000, 4000), (0, 0), (0, 0), (0, 0)];
        older.1.sack_blocks = 1;
        // The trigger SACKs a superset: the older ACK is redundant.
        let mut t = ack(1000);
        t.1.sack = [(3000, 5000), (0, 0), (0, 0), (0, 0)];
        t.1.sack_blocks = 1;
        assert_eq!(find(&[older.clone()], &t, AckFilter::Aggressive), Some(0));
        // The trigger SACKs something else only: keep.
        let mut t2 = ack(1000);
        t2.1.sack = [(5000, 6000), (0, 0), (0, 0), (0, 0)];
        t2.1.sack_blocks = 1;
        assert_eq!(find(&[older.clone()], &t2, AckFilter::Aggressive), None);
        // No SACK in the trigger: keep the SACKing one.
        assert_eq!(find(&[older], &ack(1500), AckFilter::Aggressive), None);
        // A DSACK (below the cumulative ACK) is never dropped.
        let mut dsack = ack(1000);
        dsack.1.sack = [(500, 600), (0, 0), (0, 0), (0, 0)];
        dsack.1.sack_blocks = 1;
        let mut t3 = ack(2000);
        t3.1.sack = [(500, 600), (0, 0), (0, 0), (0, 0)];
        t3.1.sack_blocks = 1;
        assert_eq!(find(&[dsack], &t3, AckFilter::Aggressive), None);
    }

    #[test]
    fn ecn_flags_and_timestamps() {
        // A change of ECE between eligible ACKs resets the search.
        let mut e = ack(1100);
        e.1.flags |= TcpInfo::ECE;
        assert_eq!(find(&[ack(1000), e], &ack(2000), AckFilter::On), None);
        // Aggressive with different ECN flags on the neighbour: keep.
        let mut t = ack(2000);
        t.1.flags |= TcpInfo::CWR;
        assert_eq!(find(&[ack(1000)], &t, AckFilter::Aggressive), None);
        // A queued ACK with a newer timestamp than the trigger is kept.
        let mut newer_ts = ack(1000);
        newer_ts.1.tstamp = Some((9999, 7));
        assert_eq!(find(&[newer_ts], &ack(2000), AckFilter::Aggressive), None);
    }
}
