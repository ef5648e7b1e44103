//! CAKE's overhead compensation: the size a packet takes on the bottleneck link, charged to the
//! shaper and to the flows' deficits (Linux net/sched/sch_cake.c `cake_calc_overhead`; the
//! keywords of tc-cake(8) "OVERHEAD COMPENSATION PARAMETERS").
//!
//! `len` is the packet's accounted length as linkshare parses it (the IP length). Without any
//! keyword (`raw`) it is charged as is. Otherwise `overhead` is added, the result raised to
//! `mpu`, then cut into ATM cells (`ceil(n/48)·53`) or PTM blocks (one byte per started 64, as
//! the kernel: `n + ceil(n/64)`). The kernel first strips the MAC header it sees in `skb->len`;
//! linkshare's length never includes it, so the same keyword gives the same charge.
//!
//! Do not combine a CAKE `overhead` with the policy's own `linklayer`/`overhead` keys: those
//! already changed the length CAKE sees.

use crate::linklayer::{Framing, ATM_CELL, ATM_PAYLOAD};

/// A CAKE link layer: `overhead`, `mpu` and the cell framing.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct CakeOverhead {
    /// Compensation on (`CAKE_FLAG_OVERHEAD`): false is `raw`.
    pub enabled: bool,
    /// Bytes added per packet (may be negative).
    pub overhead: i32,
    /// Smallest size charged.
    pub mpu: u32,
    pub framing: Framing,
}

/// What a tc-cake keyword does, applied in order as tc does.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Op {
    /// `raw`: no compensation, overhead 0, no cell framing.
    Raw,
    /// Set the overhead and the framing (`conservative`).
    Set(i32, Framing),
    /// Add to the overhead; set the framing and the mpu if given.
    Add(i32, Option<Framing>, Option<u32>),
    /// Only the framing (`atm`, `ptm`, `noatm`).
    Framing(Framing),
}

/// tc-cake's keywords (iproute2 tc/q_cake.c): the ATM family adds its encapsulation and
/// selects ATM cells, the PTM family PTM, `ethernet` adds preamble, FCS and gap with an 84-byte
/// minimum, `ether-vlan` a 4-byte tag on top, `docsis` the frame with FCS and a 64-byte minimum.
const KEYWORDS: &[(&str, Op)] = &[
    ("raw", Op::Raw),
    ("conservative", Op::Set(48, Framing::Atm)),
    ("ipoa-vcmux", Op::Add(8, Some(Framing::Atm), None)),
    ("ipoa-llcsnap", Op::Add(16, Some(Framing::Atm), None)),
    ("bridged-vcmux", Op::Add(24, Some(Framing::Atm), None)),
    ("bridged-llcsnap", Op::Add(32, Some(Framing::Atm), None)),
    ("pppoa-vcmux", Op::Add(10, Some(Framing::Atm), None)),
    ("pppoa-llc", Op::Add(14, Some(Framing::Atm), None)),
    ("pppoe-vcmux", Op::Add(32, Some(Framing::Atm), None)),
    ("pppoe-llcsnap", Op::Add(40, Some(Framing::Atm), None)),
    ("pppoe-ptm", Op::Add(30, Some(Framing::Ptm), None)),
    ("bridged-ptm", Op::Add(22, Some(Framing::Ptm), None)),
    ("ethernet", Op::Add(38, None, Some(84))),
    ("ether-vlan", Op::Add(4, None, None)),
    ("docsis", Op::Add(18, Some(Framing::Ethernet), Some(64))),
    ("atm", Op::Framing(Framing::Atm)),
    ("ptm", Op::Framing(Framing::Ptm)),
    ("noatm", Op::Framing(Framing::Ethernet)),
];

/// Every keyword `overhead` accepts.
pub fn keyword_names() -> impl Iterator<Item = &'static str> {
    KEYWORDS.iter().map(|k| k.0)
}

impl CakeOverhead {
    /// The link layer of tc-cake keywords separated by spaces, applied left to right
    /// (`"ethernet ether-vlan"` is 42 bytes, mpu 84); a number sets the overhead (`"44 atm"`).
    /// `Err` names the unknown word.
    pub fn keywords(text: &str) -> Result<CakeOverhead, String> {
        let mut o = CakeOverhead::default();
        for word in text.split_whitespace() {
            if let Ok(n) = word.parse::<i32>() {
                o.enabled = true;
                o.overhead = n;
                continue;
            }
            let w = word.to_ascii_lowercase();
            let Some(&(_, op)) = KEYWORDS.iter().find(|k| k.0 == w) else {
                return Err(word.to_string());
            };
            match op {
                Op::Raw => {
                    o.enabled = false;
                    o.overhead = 0;
                    o.framing = Framing::Ethernet;
                }
                Op::Set(n, f) => {
                    o.enabled = true;
                    o.overhead = n;
                    o.framing = f;
                }
                Op::Add(n, f, m) => {
                    o.enabled = true;
                    o.overhead += n;
                    if let Some(f) = f {
                        o.framing = f;
                    }
                    if let Some(m) = m {
                        o.mpu = m;
                    }
                }
                Op::Framing(f) => o.framing = f,
            }
        }
        Ok(o)
    }

    /// One keyword (see [`Self::keywords`]).
    pub fn keyword(name: &str) -> Option<CakeOverhead> {
        if name.split_whitespace().count() != 1 {
            return None;
        }
        Self::keywords(name).ok()
    }

    /// These settings as tc-cake words: `raw`, or `overhead N [mpu M] atm|ptm|noatm`.
    pub fn tc_words(&self) -> String {
        if !self.enabled && self.overhead == 0 && self.mpu == 0 {
            return match self.framing {
                Framing::Ethernet => "raw".to_string(),
                f => f.name().to_string(),
            };
        }
        let mut s = format!("overhead {}", self.overhead);
        if self.mpu != 0 {
            s += &format!(" mpu {}", self.mpu);
        }
        s += match self.framing {
            Framing::Ethernet => " noatm",
            Framing::Atm => " atm",
            Framing::Ptm => " ptm",
        };
        s
    }

    /// The size charged for a packet of `len` bytes.
    #[inline]
    pub fn adjusted(&self, len: u32) -> u32 {
        if self.overhead == 0 && self.mpu == 0 && self.framing == Framing::Ethernet {
            return len;
        }
        let n = (len as i64 + self.overhead as i64)
            .max(self.mpu as i64)
            .max(0);
        let framed = match self.framing {
            Framing::Ethernet => n,
            Framing::Atm => (n + ATM_PAYLOAD as i64 - 1) / ATM_PAYLOAD as i64 * ATM_CELL as i64,
            Framing::Ptm => n + (n + 63) / 64,
        };
        u32::try_from(framed.max(1)).unwrap_or(u32::MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keywords_as_tc_cake_documents_them() {
        let k = |n| CakeOverhead::keyword(n).unwrap();
        assert_eq!(k("raw").adjusted(1500), 1500);
        // PPPoE over ATM with LLC/SNAP: 1500 + 40 = 1540 B = 33 cells = 1749 B.
        assert_eq!(k("pppoe-llcsnap").adjusted(1500), 33 * 53);
        // A 40-byte ACK: 80 B, two cells.
        assert_eq!(k("pppoe-llcsnap").adjusted(40), 106);
        // Ethernet: preamble, FCS, gap (38) and the 84-byte minimum.
        assert_eq!(k("ethernet").adjusted(1500), 1538);
        assert_eq!(k("ethernet").adjusted(20), 84);
        assert_eq!(k("docsis").adjusted(20), 64);
        // VDSL2 PTM with PPPoE: 1530 B plus one byte per started 64 (24).
        assert_eq!(k("pppoe-ptm").adjusted(1500), 1530 + 24);
        assert_eq!(k("conservative").adjusted(1), 106);
        assert!(CakeOverhead::keyword("adsl-magic").is_none());
        // Keywords add up in order, as tc's.
        let vlan = CakeOverhead::keywords("ethernet ether-vlan").unwrap();
        assert_eq!((vlan.overhead, vlan.mpu), (42, 84));
        assert_eq!(vlan.adjusted(1500), 1542);
        let n = CakeOverhead::keywords("44 atm").unwrap();
        assert_eq!((n.overhead, n.framing, n.enabled), (44, Framing::Atm, true));
        assert_eq!(
            CakeOverhead::keywords("pppoe-llcsnap bogus"),
            Err("bogus".to_string())
        );
        // The tc words give the same charge back.
        for name in keyword_names() {
            let o = k(name);
            let words = o.tc_words();
            let w: Vec<&str> = words.split_whitespace().collect();
            let back = match w.as_slice() {
                [one] => CakeOverhead::keyword(one).unwrap(),
                ["overhead", n, rest @ ..] => {
                    let mut b = CakeOverhead::keywords(rest.last().unwrap()).unwrap();
                    b.enabled = true;
                    b.overhead = n.parse().unwrap();
                    if let ["mpu", m, _] = rest {
                        b.mpu = m.parse().unwrap();
                    }
                    b
                }
                other => panic!("{other:?}"),
            };
            assert_eq!(back.adjusted(1500), o.adjusted(1500), "{name}");
            assert_eq!(back.adjusted(40), o.adjusted(40), "{name}");
        }
    }

    #[test]
    fn negative_overhead_never_charges_less_than_one() {
        let o = CakeOverhead {
            enabled: true,
            overhead: -64,
            mpu: 0,
            framing: Framing::Ethernet,
        };
        assert_eq!(o.adjusted(40), 1);
        assert_eq!(o.adjusted(1500), 1436);
    }
}
