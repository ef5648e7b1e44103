//! `cake`: Common Applications Kept Enhanced — a shaper, DiffServ tins, per-host and per-flow
//! fair queueing and COBALT AQM in one qdisc (T. Høiland-Jørgensen, D. Täht, J. Morton,
//! "Piece of CAKE: A Comprehensive Queue Management Solution for Home Gateways", IEEE LANMAN
//! 2018; Linux net/sched/sch_cake.c, whose state names this module keeps).
//!
//! ## What it promises
//! * **Shaping** (`bandwidth`, optional): a deficit-mode shaper — each packet pushes
//!   `time_next_packet` forward by its serialisation time at the rate, so there is no bucket
//!   and no burst to configure ([`Dequeued::NotBefore`] until then). A failsafe schedule at 1.5×
//!   the rate keeps the link busy if the shaper falls behind. Without `bandwidth` CAKE never
//!   throttles (a leaf under HTB, or a line-rate root).
//! * **Tins** ([`tins`]): the DSCP picks a tin; a tin is served first while under its threshold
//!   and yields above it. `wash` clears the DSCP (keeping ECN) after the tin is chosen.
//! * **Flow isolation** ([`hash`], [`table`]): per-tin DRR++ over 1024 set-associative queues
//!   with new/old/decaying rotations; in the dual and triple modes a flow's quantum is divided
//!   by its host's bulk flows, so hosts share fairly whatever their flow counts.
//! * **AQM** ([`cobalt`]): CoDel marks or drops responsive flows, BLUE drops unresponsive ones.
//! * **ACK filtering** ([`ack_filter`]) and **overhead compensation** ([`overhead`]).
//! * **Memory**: packets' bytes above `memlimit` (default 4 × rate × rtt, at least 4 MiB, and at
//!   most 10240 MTUs; unlimited rate: 10240 MTUs) are dropped from the head of the longest
//!   queue of any tin (`cake_drop`), which also raises that flow's BLUE probability.
//! * **Ingress mode**: drops are charged to the shaper as if sent (the packets already crossed
//!   the bottleneck) and COBALT's sojourn floor grows with the bulk flow count.
//!
//! Hosts are the addresses seen here: the kernel's `nat` (conntrack lookup) is not done, so put
//! CAKE on the side of a NAT where the hosts' own addresses are visible. `autorate_ingress`,
//! `fwmark` tin override, tc filters and GSO splitting (linkshare never sees GSO super-packets)
//! are not implemented.
//!
//! ## Memory
//! An idle instance holds its parameters and per-tin state, and no flow table
//! ([`Cake::heap_bytes`]): a tin's 1024 queues (≈100 KB) are allocated on its first packet and
//! freed once the whole qdisc has been empty for [`RECLAIM_AFTER`] and the tin for as long — the
//! decaying COBALT state of flows idle that long is forgotten with it.
//!
//! ## Cost per packet
//! Enqueue: a DSCP table lookup, two host hashes (64-bit finalisers) and one flow mix, a
//! set-associative lookup (one probe when the flow is known, at most 8 + 2 × 8 otherwise), O(1)
//! rotation moves; with `ack_filter` a scan of the flow's queue; on overflow a scan of the
//! active queues plus one head drop. Dequeue: one tin pick (O(tins)), O(1) rotation steps per
//! queue visit, COBALT in O(1) (its decay loop is bounded by `count`), a few multiplications
//! for the shapers. Measured beside fq_codel in `linkshare bench sched` (see the report).

pub mod ack_filter;
pub mod cobalt;
pub mod hash;
pub mod overhead;
pub mod table;
pub mod tins;

mod sched;
#[cfg(test)]
mod tests;

use self::ack_filter::AckFilter;
use self::cobalt::CobaltParams;
use self::hash::FlowMode;
use self::overhead::CakeOverhead;
use self::table::{TinTable, WayStats};
use self::tins::{DiffservMode, TinRate, CAKE_MTU};
use super::red::SplitMix;
use super::{Books, ParamError};
use crate::units::{Duration, Rate};

/// An idle tin's flow table is freed after this long.
pub const RECLAIM_AFTER: Duration = Duration::from_secs(1);
/// Packets the default memory limit allows at most (the kernel's `sch->limit`), in MTUs.
pub const PACKET_LIMIT: u64 = 10240;

/// tc-cake's `rtt` presets: `(name, rtt, target)`.
pub const RTT_PRESETS: &[(&str, Duration, Duration)] = &[
    (
        "datacentre",
        Duration::from_micros(100),
        Duration::from_micros(5),
    ),
    ("lan", Duration::from_millis(1), Duration::from_micros(50)),
    (
        "metro",
        Duration::from_millis(10),
        Duration::from_micros(500),
    ),
    (
        "regional",
        Duration::from_millis(30),
        Duration::from_micros(1500),
    ),
    (
        "internet",
        Duration::from_millis(100),
        Duration::from_millis(5),
    ),
    (
        "oceanic",
        Duration::from_millis(300),
        Duration::from_millis(15),
    ),
    (
        "satellite",
        Duration::from_millis(1000),
        Duration::from_millis(50),
    ),
    (
        "interplanetary",
        Duration::from_secs(1000),
        Duration::from_secs(50),
    ),
];

/// CAKE's parameters (the policy keys of the same names). Defaults are the kernel's.
#[derive(Clone, Debug, PartialEq)]
pub struct CakeParams {
    /// The shaper's rate; `None` is unlimited.
    pub bandwidth: Option<Rate>,
    /// CoDel's interval, the worst-case RTT. Default 100 ms (`internet`).
    pub rtt: Duration,
    /// CoDel's target. Default 5 ms; an explicit `rtt` time sets it to rtt/20 as tc does.
    pub target: Duration,
    pub diffserv: DiffservMode,
    pub isolation: FlowMode,
    /// Clear the DSCP of every packet after choosing its tin.
    pub wash: bool,
    pub ack_filter: AckFilter,
    pub overhead: CakeOverhead,
    /// Bytes of packets held at most; `None`: from bandwidth and rtt as the kernel.
    pub memlimit: Option<u32>,
    /// Ingress mode: drops count against the shaper.
    pub ingress: bool,
    /// Seeds the hash key and the random stream (BLUE, quantum dithering).
    pub seed: u64,
}

impl Default for CakeParams {
    fn default() -> Self {
        CakeParams {
            bandwidth: None,
            rtt: Duration::from_millis(100),
            target: Duration::from_millis(5),
            diffserv: DiffservMode::Diffserv3,
            isolation: FlowMode::TripleIsolate,
            wash: false,
            ack_filter: AckFilter::Off,
            overhead: CakeOverhead::default(),
            memlimit: None,
            ingress: false,
            seed: 1,
        }
    }
}

impl CakeParams {
    /// Set `rtt` (and `target`) from a preset name or a time, as tc-cake's `rtt` keywords.
    pub fn set_rtt(&mut self, text: &str) -> Result<(), String> {
        let t = text.trim().to_ascii_lowercase();
        if let Some(&(_, rtt, target)) = RTT_PRESETS.iter().find(|p| p.0 == t) {
            self.rtt = rtt;
            self.target = target;
            return Ok(());
        }
        let rtt = Duration::parse(&t).map_err(|e| e.to_string())?;
        self.rtt = rtt;
        self.target = Duration((rtt.0 / 20).max(1000));
        Ok(())
    }

    /// The memory limit in effect (`cake_reconfigure`).
    pub fn buffer_limit(&self) -> u64 {
        let packets = PACKET_LIMIT * CAKE_MTU as u64;
        match (self.memlimit, self.bandwidth) {
            (Some(m), _) => u64::from(m).min(packets.max(u64::from(m))),
            (None, Some(r)) if r.bits_per_sec() > 0 => {
                let bdp4 =
                    (r.bytes_per_sec() as u128 * self.rtt.0 as u128 * 4 / 1_000_000_000) as u64;
                bdp4.max(4 << 20).min(packets)
            }
            _ => packets,
        }
    }

    pub fn validate(&self) -> Result<(), ParamError> {
        if self.rtt.0 == 0 || self.rtt > Duration::from_secs(3600) {
            return Err(ParamError::new(
                "rtt",
                format!("must be in (0, 3600s], got {} ns", self.rtt.0),
                "use a preset such as \"internet\" (100ms) or a time such as \"50ms\"",
            ));
        }
        if self.target.0 == 0 || self.target > self.rtt {
            return Err(ParamError::new(
                "target",
                "must be above 0 and at most rtt",
                "leave it out (rtt/20), or use e.g. \"5ms\" for an rtt of 100ms",
            ));
        }
        if !(-64..=256).contains(&self.overhead.overhead) {
            return Err(ParamError::new(
                "overhead",
                format!(
                    "must be from -64 to 256 bytes, got {}",
                    self.overhead.overhead
                ),
                "use a keyword such as \"ethernet\" or \"pppoe-ptm\", or the bytes your link adds",
            ));
        }
        if self.overhead.mpu > 256 {
            return Err(ParamError::new(
                "mpu",
                format!("must be from 0 to 256 bytes, got {}", self.overhead.mpu),
                "use e.g. 64 (DOCSIS) or 84 (Ethernet)",
            ));
        }
        if let Some(m) = self.memlimit {
            if m < CAKE_MTU {
                return Err(ParamError::new(
                    "memlimit",
                    format!("must be at least one MTU (1514 bytes), got {m}"),
                    "leave it out for the kernel's default (4 x bandwidth x rtt, at least 4m)",
                ));
            }
        }
        if let Some(b) = self.bandwidth {
            if b.bytes_per_sec() == 0 {
                return Err(ParamError::new(
                    "bandwidth",
                    "must be at least 8bit",
                    "leave it out for an unlimited CAKE, or give the link's rate, e.g. \"100mbit\"",
                ));
            }
        }
        Ok(())
    }
}

/// One tin's counters, as `tc -s qdisc show … cake` prints them (u32 where the kernel's are).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct TinStats {
    /// Packets and bytes enqueued (tc's `pkts`, `bytes`).
    pub packets: u64,
    pub bytes: u64,
    /// Bytes queued now.
    pub backlog: u32,
    /// AQM and overflow drops (not ACK-filter drops).
    pub dropped: u32,
    pub ecn_mark: u32,
    pub ack_drops: u32,
    /// Overflow drops (`drop_overlimit`).
    pub drop_overlimit: u32,
    pub max_skblen: u32,
    /// Sojourn averages, ns: peak (fast up), average, base (fast down).
    pub peak_delay: u64,
    pub avge_delay: u64,
    pub base_delay: u64,
    pub ways: WayStats,
}

/// A tin: its counters, always; its shaper, rotations and queues while in use.
#[derive(Debug)]
pub(crate) struct Tin<P> {
    pub(crate) stats: TinStats,
    pub(crate) s: Option<Box<TinState<P>>>,
}

/// The state of a tin in use, allocated with its first packet and freed after
/// [`RECLAIM_AFTER`] of idleness (the kernel's `cake_tin_data` less the counters).
#[derive(Debug)]
pub(crate) struct TinState<P> {
    pub(crate) rate: TinRate,
    pub(crate) tin_quantum: u16,
    pub(crate) tin_deficit: i32,
    pub(crate) time_next_packet: u64,
    pub(crate) sparse_flow_count: u16,
    pub(crate) bulk_flow_count: u16,
    pub(crate) decaying_flow_count: u16,
    pub(crate) unresponsive_flow_count: u16,
    pub(crate) table: TinTable<P>,
}

/// A tin's parameters and counters, for `stat` and `stat --tc` (plain numbers: the stats copy
/// takes them on the datapath, [`crate::qdisc::Qdisc::visit_tins`]).
#[derive(Copy, Clone, Debug)]
pub struct TinView {
    pub name: &'static str,
    /// The threshold rate; 0 when unlimited.
    pub threshold: Rate,
    pub cparams: CobaltParams,
    pub flow_quantum: u16,
    pub stats: TinStats,
    pub sparse_flows: u16,
    pub bulk_flows: u16,
    pub unresponsive_flows: u16,
    /// The whole qdisc's most bytes held at once and its limit (`memory used: … of …`), the
    /// same in every tin's view.
    pub memory_used: u64,
    pub memory_limit: u64,
}

/// The CAKE qdisc.
#[derive(Debug)]
pub struct Cake<P> {
    p: CakeParams,
    tins: Vec<Tin<P>>,
    key: u64,
    rng: SplitMix,
    /// The global shaper: `(len * rate_ns) >> rate_shft` ns per `len` bytes; 0 = unlimited.
    rate_ns: u64,
    rate_shft: u8,
    time_next_packet: u64,
    failsafe_next_packet: u64,
    cur_tin: usize,
    buffer_used: u64,
    buffer_max_used: u64,
    buffer_limit: u64,
    /// When the qdisc was last seen empty (for reclaiming tins), `u64::MAX` while busy.
    idle_since: u64,
    books: Books<P>,
}

impl<P: crate::Packet> Cake<P> {
    pub fn new(params: CakeParams) -> Result<Self, ParamError> {
        params.validate()?;
        let base = params.bandwidth.map_or(0, |r| r.bytes_per_sec());
        let tins = (0..params.diffserv.tin_count())
            .map(|_| Tin {
                stats: TinStats::default(),
                s: None,
            })
            .collect();
        let mut rng = SplitMix::new(params.seed);
        let key = rng.next_u64();
        Ok(Cake {
            rate_ns: TinRate::new(base, params.target, params.rtt).rate_ns,
            rate_shft: TinRate::new(base, params.target, params.rtt).rate_shft,
            buffer_limit: params.buffer_limit(),
            p: params,
            tins,
            key,
            rng,
            time_next_packet: 0,
            failsafe_next_packet: 0,
            cur_tin: 0,
            buffer_used: 0,
            buffer_max_used: 0,
            idle_since: u64::MAX,
            books: Books::new(),
        })
    }

    pub fn params(&self) -> &CakeParams {
        &self.p
    }

    /// The memory limit in effect, bytes.
    pub fn memory_limit(&self) -> u64 {
        self.buffer_limit
    }

    /// The most bytes held at once.
    pub fn memory_max_used(&self) -> u64 {
        self.buffer_max_used
    }

    /// The rate-derived parameters and DRR weight of tin `i` (`cake_set_rate`).
    pub(crate) fn tin_rate(&self, i: usize) -> (TinRate, u16) {
        let base = self.p.bandwidth.map_or(0, |r| r.bytes_per_sec());
        let (rate, q) = self.p.diffserv.share(base, i).unwrap_or((base, 1024));
        (TinRate::new(rate, self.p.target, self.p.rtt), q)
    }

    /// Tins in the order `tc -s qdisc` prints them.
    pub fn tin_views(&self) -> Vec<TinView> {
        let mut v = Vec::with_capacity(self.tins.len());
        self.visit_tin_views(&mut |t| v.push(*t));
        v
    }

    /// Each tin's view in the order `tc -s qdisc` prints them, without allocating.
    pub fn visit_tin_views(&self, f: &mut dyn FnMut(&TinView)) {
        let names = self.p.diffserv.tin_names();
        for &i in self.p.diffserv.display_order() {
            let Some(t) = self.tins.get(i) else {
                continue;
            };
            let (rate, _) = self.tin_rate(i);
            let c = |f: fn(&TinState<P>) -> u16| t.s.as_deref().map_or(0, f);
            f(&TinView {
                name: names.get(i).copied().unwrap_or("Tin"),
                threshold: Rate::bps(rate.rate_bps * 8),
                cparams: rate.cparams,
                flow_quantum: rate.flow_quantum,
                stats: t.stats,
                sparse_flows: c(|s| s.sparse_flow_count + s.decaying_flow_count),
                bulk_flows: c(|s| s.bulk_flow_count),
                unresponsive_flows: c(|s| s.unresponsive_flow_count),
                memory_used: self.buffer_max_used,
                memory_limit: self.buffer_limit,
            });
        }
    }

    /// Bytes this instance holds: itself, its tins and the flow tables in use.
    pub fn heap_bytes(&self) -> usize {
        std::mem::size_of::<Self>()
            + self.tins.capacity() * std::mem::size_of::<Tin<P>>()
            + self
                .tins
                .iter()
                .filter_map(|t| t.s.as_ref())
                .map(|s| std::mem::size_of::<TinState<P>>() + s.table.heap_bytes())
                .sum::<usize>()
    }

    /// Tins whose flow table is allocated.
    pub fn tables_allocated(&self) -> usize {
        self.tins.iter().filter(|t| t.s.is_some()).count()
    }
}
