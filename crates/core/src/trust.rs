//! Whose DSCP counts: a direction's trust in the DiffServ code points of the packets arriving
//! on it, applied once per packet before any classification (filters on `dscp`/`tos`, PRIO's
//! priomap, CAKE's tins all read [`PacketMeta::tos`](crate::PacketMeta::tos)).
//!
//! * `trust = false`: a packet's DSCP is not used — it is classified as DSCP 0 (best effort) —
//!   so a host that marks its bulk traffic EF gets no voice class or tin. The packet leaves
//!   with the DSCP it came with unless it is washed too.
//! * `wash = true`: the DSCP is cleared in the packet's header (ECN kept), as CAKE's `wash`
//!   does after choosing its tin ([`Packet::wash_dscp`]: the one writer of the header,
//!   [`crate::wire::wash_dscp`]). A trusted packet is still classified by the DSCP it arrived
//!   with: washing only stops the marking from travelling on.
//!
//! The default trusts and keeps every DSCP, as Linux's qdiscs do. No state, no allocation:
//! a comparison per packet, and a header rewrite (IPv4 checksum included) per washed packet.

use crate::packet::{Packet, L3};

/// A direction's DSCP settings (the policy's `trust_dscp` and `wash`).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct DscpTrust {
    pub trust: bool,
    pub wash: bool,
}

impl Default for DscpTrust {
    fn default() -> Self {
        DscpTrust {
            trust: true,
            wash: false,
        }
    }
}

/// What [`DscpTrust::apply`] did to one packet, for the driver's counters.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct TrustOutcome {
    /// A non-zero DSCP was not used for classification.
    pub ignored: bool,
    /// The header's DSCP was cleared.
    pub washed: bool,
}

impl DscpTrust {
    /// Apply the settings to a packet as it arrives, before it is classified.
    #[inline]
    pub fn apply<P: Packet>(self, pkt: &mut P) -> TrustOutcome {
        let m = pkt.meta();
        if (self.trust && !self.wash) || m.dscp() == 0 || matches!(m.l3, L3::Other(_)) {
            return TrustOutcome::default();
        }
        let tos = m.tos;
        let washed = self.wash && pkt.wash_dscp();
        if let Some(m) = pkt.meta_mut() {
            // Trusted: classified by the DSCP it came with, washed or not. Untrusted: as 0.
            m.tos = if self.trust { tos } else { tos & 3 };
        }
        TrustOutcome {
            ignored: !self.trust,
            washed,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::PacketMeta;

    fn ef() -> PacketMeta {
        PacketMeta {
            tos: (46 << 2) | 2,
            ..PacketMeta::default()
        }
    }

    #[test]
    fn the_default_keeps_every_dscp() {
        let mut p = ef();
        assert_eq!(DscpTrust::default().apply(&mut p), TrustOutcome::default());
        assert_eq!(p.dscp(), 46);
    }

    #[test]
    fn untrusted_packets_are_classified_as_best_effort_with_their_ecn() {
        let mut p = ef();
        let t = DscpTrust {
            trust: false,
            wash: false,
        };
        assert_eq!(
            t.apply(&mut p),
            TrustOutcome {
                ignored: true,
                washed: false
            }
        );
        assert_eq!((p.dscp(), p.ecn()), (0, 2));
        // A packet already at DSCP 0 is not counted.
        assert_eq!(t.apply(&mut p), TrustOutcome::default());
    }

    #[test]
    fn a_washed_trusted_packet_is_classified_by_the_dscp_it_came_with() {
        let mut p = ef();
        let out = DscpTrust {
            trust: true,
            wash: true,
        }
        .apply(&mut p);
        assert_eq!(
            out,
            TrustOutcome {
                ignored: false,
                washed: true
            }
        );
        assert_eq!(p.dscp(), 46);
        let mut q = ef();
        let out = DscpTrust {
            trust: false,
            wash: true,
        }
        .apply(&mut q);
        assert!(out.ignored && out.washed);
        assert_eq!((q.dscp(), q.ecn()), (0, 2));
    }

    #[test]
    fn non_ip_packets_are_left_alone() {
        let mut p = PacketMeta {
            l3: L3::Other(0x0806),
            tos: 0xb8,
            ..PacketMeta::default()
        };
        let t = DscpTrust {
            trust: false,
            wash: true,
        };
        assert_eq!(t.apply(&mut p), TrustOutcome::default());
    }
}
