//! CAKE's tins: the DiffServ classes, their DSCP maps, bandwidth thresholds and weights
//! (Linux net/sched/sch_cake.c `cake_config_*`, `cake_set_rate`; tc-cake(8) "DIFFSERV MODES").
//!
//! Each tin is served with its own flow queues. A tin's *threshold* is the rate up to which it
//! has priority: in shaped mode every tin runs a virtual shaper at its threshold, and the
//! dequeue prefers the highest tin that is under its threshold, else the one whose shaper is due
//! first — so a tin above its threshold keeps a share instead of starving the others. Without a
//! rate the tins share by weighted DRR of `tin_quantum`.
//!
//! From the tin's rate follow its flow quantum (`rate >> 12` bytes, within 300..=1514), its
//! `mtu_time` (one 1514-byte packet's serialisation time), and COBALT's target and interval:
//! `target = max(1.5 mtu_time, target)`, `interval = max(rtt + target' - target, 2 target')` —
//! so a slow tin gets a target that at least one packet can meet.
//!
//! | mode        | tins (index order) and thresholds                          |
//! |-------------|------------------------------------------------------------|
//! | besteffort  | Best Effort 1                                              |
//! | diffserv3   | Best Effort 1, Bulk 1/16, Voice 1/4                        |
//! | diffserv4   | Best Effort 1, Bulk 1/16, Video 1/2, Voice 1/4             |
//! | diffserv8   | Tin 0..7, each 7/8 of the previous                         |
//! | precedence  | Tin 0..7 by IP precedence, each 7/8 of the previous        |
//!
//! `tc -s qdisc` lists diffserv3/4 tins in the order Bulk, Best Effort, … (`bulk_order`).

use super::cobalt::CobaltParams;
use crate::units::Duration;

/// The MTU CAKE assumes for `mtu_time` and for the packet limit (`psched_mtu` of Ethernet).
pub const CAKE_MTU: u32 = 1514;

/// `diffserv = "…"`.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Hash)]
pub enum DiffservMode {
    Besteffort,
    #[default]
    Diffserv3,
    Diffserv4,
    Diffserv8,
    Precedence,
}

impl DiffservMode {
    pub const KNOWN: &'static [(&'static str, DiffservMode)] = &[
        ("besteffort", DiffservMode::Besteffort),
        ("diffserv3", DiffservMode::Diffserv3),
        ("diffserv4", DiffservMode::Diffserv4),
        ("diffserv8", DiffservMode::Diffserv8),
        ("precedence", DiffservMode::Precedence),
    ];

    pub fn name(self) -> &'static str {
        Self::KNOWN
            .iter()
            .find(|(_, m)| *m == self)
            .map_or("diffserv3", |(n, _)| n)
    }

    pub fn tin_count(self) -> usize {
        match self {
            DiffservMode::Besteffort => 1,
            DiffservMode::Diffserv3 => 3,
            DiffservMode::Diffserv4 => 4,
            DiffservMode::Diffserv8 | DiffservMode::Precedence => 8,
        }
    }

    /// The tin of a DSCP (0..=63).
    pub fn tin_of(self, dscp: u8) -> usize {
        let d = (dscp & 63) as usize;
        match self {
            DiffservMode::Besteffort => 0,
            DiffservMode::Diffserv3 => DIFFSERV3[d] as usize,
            DiffservMode::Diffserv4 => DIFFSERV4[d] as usize,
            DiffservMode::Diffserv8 => DIFFSERV8[d] as usize,
            DiffservMode::Precedence => d >> 3,
        }
    }

    /// Tin indices in the order `tc -s qdisc` prints them.
    pub fn display_order(self) -> &'static [usize] {
        match self {
            DiffservMode::Diffserv3 => &[1, 0, 2],
            DiffservMode::Diffserv4 => &[1, 0, 2, 3],
            DiffservMode::Besteffort => &[0],
            _ => &[0, 1, 2, 3, 4, 5, 6, 7],
        }
    }

    /// Tin names in index order, as `tc -s qdisc` heads its columns.
    pub fn tin_names(self) -> &'static [&'static str] {
        match self {
            DiffservMode::Besteffort => &["Tin 0"],
            DiffservMode::Diffserv3 => &["Best Effort", "Bulk", "Voice"],
            DiffservMode::Diffserv4 => &["Best Effort", "Bulk", "Video", "Voice"],
            _ => &[
                "Tin 0", "Tin 1", "Tin 2", "Tin 3", "Tin 4", "Tin 5", "Tin 6", "Tin 7",
            ],
        }
    }

    /// `(threshold in bytes/s, tin_quantum)` of every tin for a base rate (0 = unlimited).
    pub fn shares(self, rate: u64) -> Vec<(u64, u16)> {
        (0..self.tin_count())
            .filter_map(|i| self.share(rate, i))
            .collect()
    }

    /// `(threshold in bytes/s, tin_quantum)` of tin `i` for a base rate (0 = unlimited); `None`
    /// past the last tin. No allocation (the stats copy calls it on the datapath).
    pub fn share(self, rate: u64, i: usize) -> Option<(u64, u16)> {
        const D3: [(u8, u16); 3] = [(0, 1024), (4, 64), (2, 256)];
        const D4: [(u8, u16); 4] = [(0, 1024), (4, 64), (1, 512), (2, 256)];
        let shifted = |t: &[(u8, u16)]| t.get(i).map(|&(sh, q)| (rate >> sh, q));
        match self {
            DiffservMode::Besteffort => (i == 0).then_some((rate, 65535)),
            DiffservMode::Diffserv3 => shifted(&D3),
            DiffservMode::Diffserv4 => shifted(&D4),
            DiffservMode::Diffserv8 | DiffservMode::Precedence => {
                // Each tin has 7/8 of the one before, rate and quantum alike.
                let (mut r, mut q) = (rate, 256u64);
                for _ in 0..i.min(8) {
                    r = (r * 7) >> 3;
                    q = (q * 7) >> 3;
                }
                (i < 8).then_some((r, q.max(1) as u16))
            }
        }
    }
}

// DSCP → tin, from the kernel's tables (RFC 4594 classes as updated by RFC 8622 for LE).
#[rustfmt::skip]
const DIFFSERV3: [u8; 64] = [
    0, 1, 0, 0, 2, 0, 0, 0,
    1, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 2, 0, 2, 0,
    2, 0, 0, 0, 0, 0, 0, 0,
    2, 0, 0, 0, 0, 0, 0, 0,
];
#[rustfmt::skip]
const DIFFSERV4: [u8; 64] = [
    0, 1, 0, 0, 2, 0, 0, 0,
    1, 0, 0, 0, 0, 0, 0, 0,
    2, 0, 2, 0, 2, 0, 2, 0,
    2, 0, 2, 0, 2, 0, 2, 0,
    3, 0, 2, 0, 2, 0, 2, 0,
    3, 0, 0, 0, 3, 0, 3, 0,
    3, 0, 0, 0, 0, 0, 0, 0,
    3, 0, 0, 0, 0, 0, 0, 0,
];
#[rustfmt::skip]
const DIFFSERV8: [u8; 64] = [
    2, 0, 1, 2, 4, 2, 2, 2,
    1, 2, 1, 2, 1, 2, 1, 2,
    5, 2, 4, 2, 4, 2, 4, 2,
    3, 2, 3, 2, 3, 2, 3, 2,
    6, 2, 3, 2, 3, 2, 3, 2,
    6, 2, 2, 2, 6, 2, 6, 2,
    7, 2, 2, 2, 2, 2, 2, 2,
    7, 2, 2, 2, 2, 2, 2, 2,
];

/// Everything derived from one tin's rate (`cake_set_rate`).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct TinRate {
    /// The threshold, bytes per second (0 = unlimited).
    pub rate_bps: u64,
    /// Nanoseconds per byte, scaled by `2^rate_shft` (the kernel's fixed point).
    pub rate_ns: u64,
    pub rate_shft: u8,
    /// DRR quantum of each flow in this tin, bytes.
    pub flow_quantum: u16,
    pub cparams: CobaltParams,
}

impl TinRate {
    /// `rate` in bytes/s (0 = unlimited), the configured `target` and `rtt` (interval).
    pub fn new(rate: u64, target: Duration, rtt: Duration) -> TinRate {
        const MIN_RATE: u64 = 64;
        let (mut rate_ns, mut rate_shft, mut flow_quantum) = (0u64, 0u8, 1514u16);
        if rate != 0 {
            flow_quantum = (rate >> 12).clamp(300, 1514) as u16;
            rate_shft = 34;
            rate_ns = ((1_000_000_000u128 << 34) / rate.max(MIN_RATE) as u128) as u64;
            while rate_ns >> 34 != 0 {
                rate_ns >>= 1;
                rate_shft -= 1;
            }
        }
        let byte_target_ns = ((CAKE_MTU as u128 * rate_ns as u128) >> rate_shft) as u64;
        let t = (byte_target_ns * 3 / 2).max(target.0);
        let interval = (rtt.0 + t - target.0).max(2 * t);
        TinRate {
            rate_bps: rate,
            rate_ns,
            rate_shft,
            flow_quantum,
            cparams: CobaltParams {
                interval: Duration(interval),
                target: Duration(t),
                mtu_time: Duration(byte_target_ns),
                p_inc: 1 << 24,
                p_dec: 1 << 20,
            },
        }
    }

    /// Transmission time of `len` bytes at this rate, ns (0 when unlimited).
    #[inline]
    pub fn duration(&self, len: u32) -> u64 {
        ((len as u128 * self.rate_ns as u128) >> self.rate_shft) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tc_cake_example_100mbit_diffserv3() {
        // tc-cake(8): 100 Mbit/s diffserv3 shows thresholds 6250Kbit / 100Mbit / 25Mbit and
        // quanta 300 / 1514 / 762 (in the order Bulk, Best Effort, Voice).
        let mode = DiffservMode::Diffserv3;
        let rate = 100_000_000 / 8;
        let tins: Vec<TinRate> = mode
            .shares(rate)
            .iter()
            .map(|&(r, _)| TinRate::new(r, Duration::from_millis(5), Duration::from_millis(100)))
            .collect();
        let shown: Vec<(u64, u16)> = mode
            .display_order()
            .iter()
            .map(|&i| (tins[i].rate_bps * 8, tins[i].flow_quantum))
            .collect();
        assert_eq!(
            shown,
            vec![(6_250_000, 300), (100_000_000, 1514), (25_000_000, 762)]
        );
        let names: Vec<&str> = mode
            .display_order()
            .iter()
            .map(|&i| mode.tin_names()[i])
            .collect();
        assert_eq!(names, ["Bulk", "Best Effort", "Voice"]);
        // Target and interval are the configured ones at these rates (1514 B at 6.25 Mbit/s is
        // 1.94 ms; 1.5x that is below 5 ms).
        assert_eq!(tins[1].cparams.target, Duration::from_millis(5));
        assert_eq!(tins[1].cparams.interval, Duration::from_millis(100));
    }

    #[test]
    fn slow_tins_get_a_longer_target() {
        // 1 Mbit/s: one MTU takes 12.1 ms, so target = 18.2 ms and interval = rtt + 13.2 ms.
        let t = TinRate::new(
            125_000,
            Duration::from_millis(5),
            Duration::from_millis(100),
        );
        assert!((t.cparams.mtu_time.0 as i64 - 12_112_000).abs() < 10_000);
        assert_eq!(t.cparams.target.0, t.cparams.mtu_time.0 * 3 / 2);
        assert_eq!(
            t.cparams.interval.0,
            100_000_000 + t.cparams.target.0 - 5_000_000
        );
        assert_eq!(t.flow_quantum, 300);
        // Serialisation: 1500 B at 1 Mbit/s is 12 ms.
        assert!((t.duration(1500) as i64 - 12_000_000).abs() < 1000);
    }

    #[test]
    fn dscp_maps() {
        let ef = 46;
        let cs1 = 8;
        let le = 1;
        let af41 = 34;
        let cs6 = 48;
        assert_eq!(DiffservMode::Diffserv3.tin_of(ef), 2);
        assert_eq!(DiffservMode::Diffserv3.tin_of(cs1), 1);
        assert_eq!(DiffservMode::Diffserv3.tin_of(le), 1);
        assert_eq!(DiffservMode::Diffserv3.tin_of(af41), 0);
        assert_eq!(DiffservMode::Diffserv4.tin_of(af41), 2);
        assert_eq!(DiffservMode::Diffserv4.tin_of(ef), 3);
        assert_eq!(DiffservMode::Diffserv4.tin_of(cs6), 3);
        assert_eq!(DiffservMode::Diffserv4.tin_of(le), 1);
        assert_eq!(DiffservMode::Diffserv8.tin_of(le), 0);
        assert_eq!(DiffservMode::Diffserv8.tin_of(0), 2);
        assert_eq!(DiffservMode::Diffserv8.tin_of(cs6), 7);
        assert_eq!(DiffservMode::Precedence.tin_of(cs6), 6);
        assert_eq!(DiffservMode::Besteffort.tin_of(ef), 0);
        for m in DiffservMode::KNOWN {
            assert!((0..64).all(|d| m.1.tin_of(d) < m.1.tin_count()));
            assert_eq!(m.1.shares(1000).len(), m.1.tin_count());
        }
    }
}
