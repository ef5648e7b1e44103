//! Link-layer framing: the size a packet really occupies on the wire below the shaper.
//!
//! Semantics of Linux's size tables, tc-stab(8) and `qdisc_calculate_pkt_len()` in
//! net/sched/sch_api.c, with tc's table construction (iproute2 tc/tc_core.c,
//! `tc_calc_size_table`):
//!
//! 1. `overhead` (may be negative, e.g. `-4` for a VLAN tag the modem strips) is added to the
//!    length the driver would charge;
//! 2. the result is raised to `mpu` (minimum packet unit) if smaller;
//! 3. the link layer rounds it: `ethernet` keeps it; `atm` (tc's `atm`/`adsl`) cuts it into
//!    48-byte cell payloads and charges 53 bytes per cell, `ceil(n / 48) * 53`; `ptm` (VDSL2's
//!    64b/65b encapsulation, as sqm-scripts and CAKE's `ptm` keyword charge it) charges 65 bytes
//!    per started 64, `ceil(n / 64) * 65`;
//! 4. like the kernel, a size below 1 becomes 1.
//!
//! The function is pure and is applied once, where a packet's accounted length
//! ([`crate::PacketMeta::len`]) is set; the schedulers never see the raw length, so the charge,
//! the simulator's transmission time and byte counters all use the framed size.

/// How the link below the shaper frames packets (`linklayer = "…"`).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Hash)]
pub enum Framing {
    /// No cell framing: the size is the length plus overhead.
    #[default]
    Ethernet,
    /// ATM AAL5 (ADSL): 53-byte cells carrying 48 bytes each.
    Atm,
    /// PTM (VDSL2): 64b/65b encoding.
    Ptm,
}

impl Framing {
    /// Every framing by its policy name; tc's `adsl` is accepted as ATM by importers.
    pub const KNOWN: &'static [(&'static str, Framing)] = &[
        ("ethernet", Framing::Ethernet),
        ("atm", Framing::Atm),
        ("ptm", Framing::Ptm),
    ];

    /// The policy name (`"ethernet"`, `"atm"`, `"ptm"`).
    pub fn name(self) -> &'static str {
        match self {
            Framing::Ethernet => "ethernet",
            Framing::Atm => "atm",
            Framing::Ptm => "ptm",
        }
    }

    /// The framing named `name` (case-insensitive); `adsl` is tc's synonym for ATM.
    pub fn from_name(name: &str) -> Option<Framing> {
        let n = name.trim().to_ascii_lowercase();
        if n == "adsl" {
            return Some(Framing::Atm);
        }
        Self::KNOWN.iter().find(|(k, _)| *k == n).map(|(_, f)| *f)
    }
}

/// ATM cell size and the payload it carries (ITU-T I.361, AAL5).
pub const ATM_CELL: u32 = 53;
pub const ATM_PAYLOAD: u32 = 48;
/// PTM's 64b/65b: 65 bytes on the line per 64 of data.
pub const PTM_BLOCK: u32 = 65;
pub const PTM_PAYLOAD: u32 = 64;

/// A link layer: what a policy's `overhead`, `mpu` and `linklayer` say.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct LinkLayer {
    /// Bytes added to every packet (negative: removed).
    pub overhead: i32,
    /// Minimum size charged, after the overhead and before cell rounding.
    pub mpu: u32,
    pub framing: Framing,
}

impl LinkLayer {
    /// `true` when the link layer changes nothing (no overhead, no mpu, Ethernet).
    pub fn is_identity(&self) -> bool {
        *self == LinkLayer::default()
    }

    /// The size charged for a packet of `len` bytes (as the driver counts it).
    pub fn size(&self, len: u32) -> u32 {
        if self.is_identity() {
            return len.max(1);
        }
        let with_overhead = i64::from(len) + i64::from(self.overhead);
        let floored = with_overhead.max(i64::from(self.mpu));
        let framed = match self.framing {
            Framing::Ethernet => floored,
            Framing::Atm => cells(floored, ATM_PAYLOAD) * i64::from(ATM_CELL),
            Framing::Ptm => cells(floored, PTM_PAYLOAD) * i64::from(PTM_BLOCK),
        };
        u32::try_from(framed.max(1)).unwrap_or(u32::MAX)
    }
}

/// Number of `unit`-byte blocks needed for `n` bytes (0 for `n <= 0`).
fn cells(n: i64, unit: u32) -> i64 {
    if n <= 0 {
        0
    } else {
        (n + i64::from(unit) - 1) / i64::from(unit)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn atm(overhead: i32, mpu: u32) -> LinkLayer {
        LinkLayer {
            overhead,
            mpu,
            framing: Framing::Atm,
        }
    }

    #[test]
    fn pppoa_full_size_packet_takes_32_cells() {
        // 1500 + 10 (PPPoA VC-mux: PPP 2, AAL5 trailer 8) = 1510 bytes = 31.46 payloads -> 32
        // cells of 53 bytes.
        assert_eq!(atm(10, 0).size(1500), 32 * 53);
        assert_eq!(atm(10, 0).size(1500), 1696);
    }

    #[test]
    fn atm_cell_boundaries() {
        // Exactly 48 bytes fit one cell; 49 need two.
        assert_eq!(atm(0, 0).size(48), 53);
        assert_eq!(atm(0, 0).size(49), 106);
        assert_eq!(atm(0, 0).size(96), 106);
        assert_eq!(atm(0, 0).size(97), 159);
        // A 40-byte TCP ACK over PPPoE/LLC (overhead 40: 8 PPPoE+PPP, 14 Ethernet, 10 LLC/SNAP,
        // 8 AAL5 trailer) is 80 bytes: two cells, 106 bytes, 2.65x its IP length.
        assert_eq!(atm(40, 0).size(40), 106);
    }

    #[test]
    fn ptm_charges_65_per_64() {
        let ptm = LinkLayer {
            overhead: 0,
            mpu: 0,
            framing: Framing::Ptm,
        };
        assert_eq!(ptm.size(64), 65);
        assert_eq!(ptm.size(65), 130);
        // 1500 + 22 (VDSL2 PTM with PPPoE and a VLAN) = 1522 -> 24 blocks -> 1560.
        let vdsl = LinkLayer {
            overhead: 22,
            ..ptm
        };
        assert_eq!(vdsl.size(1500), 24 * 65);
    }

    #[test]
    fn overhead_and_mpu_on_ethernet() {
        let eth = LinkLayer {
            overhead: 38,
            mpu: 84,
            framing: Framing::Ethernet,
        };
        // Ethernet's preamble, SFD, FCS and gap (38) and 84-byte minimum frame on the wire.
        assert_eq!(eth.size(1500), 1538);
        assert_eq!(eth.size(20), 84);
        // A negative overhead removes bytes; the kernel never charges less than 1.
        let strip = LinkLayer {
            overhead: -4,
            mpu: 0,
            framing: Framing::Ethernet,
        };
        assert_eq!(strip.size(1504), 1500);
        assert_eq!(strip.size(2), 1);
    }

    #[test]
    fn mpu_applies_before_cell_rounding() {
        // tc_calc_size_table raises to mpu, then aligns to cells: mpu 49 costs two cells.
        assert_eq!(atm(0, 49).size(1), 106);
        assert_eq!(atm(0, 48).size(1), 53);
    }

    #[test]
    fn identity_changes_nothing() {
        let id = LinkLayer::default();
        assert!(id.is_identity());
        for len in [1, 40, 1500, 9000] {
            assert_eq!(id.size(len), len);
        }
    }

    #[test]
    fn names_round_trip() {
        for (n, f) in Framing::KNOWN {
            assert_eq!(Framing::from_name(n), Some(*f));
            assert_eq!(f.name(), *n);
        }
        assert_eq!(Framing::from_name("ADSL"), Some(Framing::Atm));
        assert_eq!(Framing::from_name("docsis"), None);
    }
}
