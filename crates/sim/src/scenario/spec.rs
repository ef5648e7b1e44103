//! The checked scenario: the types the simulator and the lab run from ([`Scenario`],
//! [`LinkSpec`], [`FlowSpec`] and the kinds of flow, the sweep's [`Axis`], [`Point`] and
//! [`Sweep`]), and the defaults and bounds of the format.
//!
//! Rule: a value of these types has passed every check; nothing here parses or fails.

use std::net::IpAddr;

use linkshare_core::{Duration, Rate};

use crate::policy::PolicySource;

/// The bottleneck link.
#[derive(Clone, Debug, PartialEq)]
pub struct LinkSpec {
    pub rate: Rate,
    /// One-way propagation delay.
    pub delay: Duration,
    /// Largest IP packet; TCP's MSS is `mtu − 52` (IP and TCP headers with timestamps).
    pub mtu: u32,
    /// Bytes of driver/NIC ring between the scheduler and the wire (see `link.rs` for the rule).
    pub device_buffer: u64,
    /// Wake-up timer frequency; 0 = exact wake-ups.
    pub timer_hz: u32,
    /// Resolution of the scheduler's clock (`now` rounded down to its tick); 0 = exact.
    pub clock_hz: u32,
    /// Bytes added to every packet's length for scheduling and transmission (tc's `overhead`).
    pub overhead: u32,
    /// Packet limit of the `pfifo` used when the scenario has no policy.
    pub queue: u32,
}

/// `[uplink]`: the reverse direction's bottleneck, which every ACK and echo reply crosses
/// (an asymmetric access line: a fast download whose ACKs share a narrow uplink). Without it
/// the return path is uncongested.
#[derive(Clone, Debug)]
pub struct UplinkSpec {
    pub rate: Rate,
    /// Packet limit of the `pfifo` used when the uplink has no policy.
    pub queue: u32,
    /// The uplink's scheduler (`policy = "path"` or an inline table, as the link's).
    pub policy: Option<PolicySource>,
}

/// TCP congestion control.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum CcKind {
    NewReno,
    Cubic,
    /// BBR v1 as Linux's `tcp_bbr`.
    Bbr,
}

#[derive(Clone, Debug, PartialEq)]
pub struct TcpSpec {
    pub cc: CcKind,
    /// Receive window fixed at this many bytes (`SO_RCVBUF`); `None`: autotuned as Linux's, up
    /// to `tcp_rmem[2]`.
    pub window: Option<u64>,
    /// Bytes to send, then stop; `None` = bulk until `stop`.
    pub bytes: Option<u64>,
    /// Delayed ACKs as Linux's (default true).
    pub delayed_ack: bool,
    /// SACK (RFC 2018) with SACK-based recovery (default true); false: NewReno without SACK.
    pub sack: bool,
    pub min_rto: Duration,
    /// Initial congestion window in segments.
    pub init_cwnd: u32,
    /// ECN (RFC 3168) negotiated, as Linux with `net.ipv4.tcp_ecn = 1` (default false).
    pub ecn: bool,
}

#[derive(Copy, Clone, Debug, PartialEq)]
pub enum Pattern {
    Cbr,
    Poisson,
    OnOff { on: Duration, off: Duration },
}

/// Packet sizes of a UDP flow: IP bytes, chosen with the given weights.
#[derive(Clone, Debug, PartialEq)]
pub struct SizeMix {
    pub sizes: Vec<(u32, u32)>,
}

impl SizeMix {
    pub fn fixed(size: u32) -> Self {
        SizeMix {
            sizes: vec![(size, 1)],
        }
    }
    /// Simple IMIX: 7 × 40, 4 × 576, 1 × 1500 bytes.
    pub fn imix() -> Self {
        SizeMix {
            sizes: vec![(40, 7), (576, 4), (1500, 1)],
        }
    }
    pub fn max(&self) -> u32 {
        self.sizes.iter().map(|s| s.0).max().unwrap_or(0)
    }
    pub fn min(&self) -> u32 {
        self.sizes.iter().map(|s| s.0).min().unwrap_or(0)
    }
    pub fn mean(&self) -> f64 {
        let w: u64 = self.sizes.iter().map(|s| s.1 as u64).sum();
        let b: u64 = self.sizes.iter().map(|s| s.0 as u64 * s.1 as u64).sum();
        if w == 0 {
            0.0
        } else {
            b as f64 / w as f64
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct UdpSpec {
    pub rate: Rate,
    pub size: SizeMix,
    pub pattern: Pattern,
}

#[derive(Clone, Debug, PartialEq)]
pub struct PingSpec {
    pub interval: Duration,
    /// IP packet size of the echo request (and reply).
    pub size: u32,
}

#[derive(Clone, Debug, PartialEq)]
pub enum FlowKind {
    Tcp(TcpSpec),
    Udp(UdpSpec),
    Ping(PingSpec),
}

impl FlowKind {
    pub fn name(&self) -> &'static str {
        match self {
            FlowKind::Tcp(_) => "tcp",
            FlowKind::Udp(_) => "udp",
            FlowKind::Ping(_) => "ping",
        }
    }

    /// A TCP flow with ECN negotiated.
    pub fn ecn(&self) -> bool {
        matches!(self, FlowKind::Tcp(t) if t.ecn)
    }
}

/// One flow, after `count` expansion.
#[derive(Clone, Debug, PartialEq)]
pub struct FlowSpec {
    pub name: String,
    /// The `[[flow]]` entry's name: `name` itself, or `name` without the `.k` of a `count` copy
    /// or an arriving flow. Its flows are reported together as a flow group.
    pub entry: String,
    pub kind: FlowKind,
    /// IPv4 TOS byte (DSCP << 2).
    pub tos: u8,
    pub src: IpAddr,
    pub dst: IpAddr,
    pub sport: u16,
    pub dport: u16,
    pub start: Duration,
    pub stop: Duration,
    /// One-way delay of the flow's access path, added in both directions.
    pub extra_delay: Duration,
    /// Set for the flows an `arrivals` entry expands into (TCP with `bytes`): they are reported
    /// by completion time in their group, not one by one.
    pub arrival: Option<Arrival>,
}

/// How an arriving flow came: its group, when it arrived and its request.
#[derive(Clone, Debug, PartialEq)]
pub struct Arrival {
    /// The `[[flow]]` entry's name (the flow itself is `group.k`).
    pub group: String,
    /// When it arrived; its FCT counts from here. Without a request `start` is this instant;
    /// with one, `start` is later by the request's one-way trip (`crate::workload`).
    pub at: Duration,
    /// Bytes the receiver sends first (the request), 0 for none.
    pub request: u64,
}

/// A checked scenario.
#[derive(Clone, Debug)]
pub struct Scenario {
    pub name: String,
    pub duration: Duration,
    pub seed: u64,
    pub sample: Duration,
    pub link: LinkSpec,
    pub policy: Option<PolicySource>,
    /// The reverse direction's bottleneck, if the scenario has one.
    pub uplink: Option<UplinkSpec>,
    /// `[path]`: jitter, loss, reordering and duplication of the data path after the bottleneck
    /// (netem's, [`linkshare_core::impair`]); `None`: a plain delay line.
    pub path: Option<linkshare_core::impair::ImpairSpec>,
    /// `[[expect]]`: bounds on figures of the run, judged by `sim`, `lab` and `compare`.
    pub expects: Vec<crate::expect::Expect>,
    /// Run the policy through the sharded HTB with this many shards, served in a fixed order
    /// from one thread ([`linkshare_core::shard::ShardedHtb`]); 0 or 1: one HTB. Not a key of
    /// the file: set by `linkshare sim --workers N`.
    pub workers: u32,
    pub flows: Vec<FlowSpec>,
    /// Where it was read from (for messages).
    pub origin: String,
    /// The `[sweep]` section with every point built, if the file has one. The scenario itself
    /// is the file without it.
    pub sweep: Option<Sweep>,
}

/// One axis of a sweep, as checked (built by [`crate::sweep`]).
#[derive(Clone, Debug, PartialEq)]
pub struct Axis {
    /// Column name in the table and the CSV; used in point selectors.
    pub name: String,
    /// The dotted keys it sets.
    pub keys: Vec<String>,
    /// One label per value, in file order.
    pub labels: Vec<String>,
    /// The values as written (typed: integers stay integers), in file order.
    pub values: Vec<toml::Value>,
}

/// One point of a sweep: a label per axis and the scenario it runs.
#[derive(Clone, Debug)]
pub struct Point {
    /// 1-based, in sweep order.
    pub index: usize,
    pub labels: Vec<String>,
    /// The value of each axis, as written.
    pub values: Vec<toml::Value>,
    /// The edits that make the point from the file without its sweep (`None` removes a key).
    pub edits: Vec<(String, Option<toml::Value>)>,
    pub scenario: Scenario,
}

/// A checked sweep: its axes and every point, built. The types live here, beside the scenario
/// that carries them; [`crate::sweep`] builds and runs them.
#[derive(Clone, Debug)]
pub struct Sweep {
    pub axes: Vec<Axis>,
    pub points: Vec<Point>,
}

pub const DEFAULT_DURATION: Duration = Duration::from_secs(10);
pub const DEFAULT_SAMPLE: Duration = Duration::from_millis(100);
pub const DEFAULT_MTU: u32 = 1500;
pub const DEFAULT_QUEUE: u32 = 1000;
/// Buffer the lab sets when a TCP flow has no `window` (the simulator autotunes instead).
pub const DEFAULT_WINDOW: u64 = 1 << 20;
pub const DEFAULT_MIN_RTO: Duration = Duration::from_millis(200);
pub const DEFAULT_INIT_CWND: u32 = 10;
pub const DEFAULT_PING_INTERVAL: Duration = Duration::from_secs(1);
/// `ping`'s default: 56 data bytes + 8 ICMP + 20 IP.
pub const DEFAULT_PING_SIZE: u32 = 84;
/// Base of the default ports: source `20000 + i`, destination `5000 + i` for flow `i` (0-based).
pub const DEFAULT_SPORT_BASE: u32 = 20000;
pub const DEFAULT_DPORT_BASE: u32 = 5000;
/// Largest `count`.
pub const MAX_COUNT: i64 = 10_000;
/// Most flows one `arrivals` entry may bring (the run's flow table holds each).
pub const MAX_ARRIVALS: usize = 100_000;
/// Longest simulated duration accepted.
pub const MAX_DURATION: Duration = Duration::from_secs(24 * 3600);

impl Scenario {
    /// Flow series a run samples: one per flow, except arriving flows, one per group.
    pub fn flow_series(&self) -> usize {
        let mut groups = std::collections::BTreeSet::new();
        self.flows
            .iter()
            .filter(|f| match &f.arrival {
                Some(a) => groups.insert(a.group.as_str()),
                None => true,
            })
            .count()
    }
}
