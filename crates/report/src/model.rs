//! The results of a simulation run: what the engine produces and the report writers consume.
//!
//! `Summary` serialises to `summary.json` exactly (field names are the output contract, see
//! `docs/outputs.md`); `Sample` rows serialise to `timeseries.csv` with the header
//! `time_s,kind,name,bytes,rate_bps,backlog_bytes,drops`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Round-trip time statistics in milliseconds.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct RttStats {
    pub min: f64,
    pub mean: f64,
    pub p50: f64,
    pub p99: f64,
    pub max: f64,
    /// Number of RTT samples.
    pub samples: u64,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct LinkSummary {
    pub rate_bps: f64,
    /// Bytes sent on the bottleneck / (rate × duration).
    pub utilisation: f64,
    pub delay_ms: f64,
    pub mtu: u32,
    pub device_buffer_bytes: u64,
    pub timer_hz: u32,
    /// Resolution of the scheduler's clock; written only when set (0 = exact).
    #[serde(skip_serializing_if = "is_zero")]
    pub clock_hz: u32,
}

fn is_zero(x: &u32) -> bool {
    *x == 0
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct ClassSummary {
    /// Bytes and packets the class sent on the bottleneck.
    pub bytes: u64,
    pub packets: u64,
    pub drops: u64,
    /// Mean sending rate over the run.
    pub rate_bps: f64,
    pub parent: Option<String>,
    /// Configured rate and ceil (0 where the scheduler has none).
    pub assigned_rate_bps: f64,
    pub ceil_bps: f64,
    pub overlimits: u64,
    pub lends: u64,
    pub borrows: u64,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct FlowSummary {
    pub kind: String,
    pub class: String,
    /// Payload bytes delivered in order to the receiver (TCP), or bytes received (UDP/ping).
    pub bytes_delivered: u64,
    pub goodput_bps: f64,
    pub packets_sent: u64,
    pub packets_lost: u64,
    pub retransmits: u64,
    /// Present for TCP and ping flows.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rtt_ms: Option<RttStats>,
    /// One-way delay from source to sink, ms: present for UDP and ping flows (echo requests).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub owd_ms: Option<RttStats>,
    /// TCP: retransmission timeouts.
    pub timeouts: u64,
    /// TCP: congestion-window reductions (fast retransmits plus timeouts).
    pub cwnd_reductions: u64,
    /// A finite TCP flow (`bytes`) that delivered all of them: its completion time in seconds,
    /// from its start to the last byte in order at the receiver; its `goodput_bps` is then
    /// `bytes_delivered × 8 / fct_s`. Absent for bulk flows and unfinished ones.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fct_s: Option<f64>,
    /// TCP with `ecn = true`: data segments that arrived CE-marked (the receiver's count, as
    /// the sender learns them by ECE). Absent for flows without ECN.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ce_marks: Option<u64>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Summary {
    pub scenario: String,
    pub duration_s: f64,
    pub seed: u64,
    pub link: LinkSummary,
    pub classes: BTreeMap<String, ClassSummary>,
    pub flows: BTreeMap<String, FlowSummary>,
    /// Jain's fairness index of goodput across the flows of each class (classes with ≥1 flow).
    pub fairness: BTreeMap<String, f64>,
    /// The scheduler's own counters at the end of the run.
    pub qdisc: QdiscSummary,
    /// The uplink scheduler's counters (`[uplink]`: every ACK and echo reply crossed it);
    /// absent without an uplink.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub uplink: Option<QdiscSummary>,
    /// What `[path]` did to the data path's packets (jitter aside); absent without `[path]`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<PathSummary>,
    /// Flow completion times of each group of arriving flows (`arrivals` in the scenario), by
    /// size bucket ([`crate::fct`]); absent when the scenario has none.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub fct: BTreeMap<String, crate::fct::FctSummary>,
    /// Each flow group (the flows of one `[[flow]]` entry of bulk TCP or UDP, summed) per phase
    /// of the scenario, as `linkshare compare` judges them; absent without flows.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub flow_groups: BTreeMap<String, FlowGroupSummary>,
    /// Present only when the figures were measured on real kernel traffic (`linkshare lab`)
    /// rather than simulated; absent from a simulation's `summary.json`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lab: Option<LabInfo>,
    /// Events processed and wall-clock time, for the curious (not part of the determinism check).
    #[serde(skip)]
    pub events: u64,
}

/// One flow group: its flows and its delivered rate in each phase of the scenario (the
/// stretches between flow starts and stops, each measured after it settled; docs/fidelity.md).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct FlowGroupSummary {
    pub flows: Vec<String>,
    pub phases: Vec<GroupPhase>,
}

/// A flow group in one phase.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct GroupPhase {
    /// 1-based, as `compare` numbers phases.
    pub index: usize,
    /// The measured stretch `[from_s, end_s]`, seconds.
    pub from_s: f64,
    pub end_s: f64,
    /// The group's flows' delivered bytes over the stretch, as a rate; absent for a phase too
    /// short to measure.
    pub goodput_bps: Option<f64>,
}

/// How a `linkshare lab` run was measured: real sockets in network namespaces, a real router.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct LabInfo {
    /// What forwarded the traffic: `linkshare` (`linkshare run`) or `kernel-htb`.
    pub router: String,
    /// Wall-clock seconds the traffic ran (the scenario's duration unless interrupted).
    pub wall_clock_s: f64,
    /// True if the run was stopped early (SIGINT/SIGTERM); the figures cover `wall_clock_s`.
    pub interrupted: bool,
    /// What of the scenario the lab could not reproduce (per-flow `extra_delay`, …).
    pub notes: Vec<String>,
    /// How busy the host was while the traffic ran (`linkshare_lab::host`); absent where it
    /// could not be measured.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host: Option<HostFigures>,
}

/// The host measured while a lab run's traffic ran: how late a thread that sleeps `interval_ms`
/// in a loop wakes, the CPU time stolen by a hypervisor and left idle (`/proc/stat` deltas over
/// the run), the 1-minute load average (`/proc/loadavg`), and the shaper's own pacing lateness
/// where the router reports it. `linkshare compare` holds these against thresholds
/// (`linkshare_sim::compare::trust`) to say when a lab figure is not trustworthy.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct HostFigures {
    /// CPUs online (`/proc/stat`'s `cpuN` lines).
    pub cpus: u32,
    /// The sampler's requested sleep, ms.
    pub interval_ms: f64,
    /// Wake-ups measured.
    pub timer_samples: u64,
    /// Wake-up lateness (actual sleep − requested), ms.
    pub timer_late_p50_ms: f64,
    pub timer_late_p99_ms: f64,
    pub timer_late_max_ms: f64,
    /// Share of all CPU time stolen by a hypervisor over the run, percent; absent without
    /// `/proc/stat`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steal_pct: Option<f64>,
    /// Share of all CPU time idle (idle + iowait) over the run, percent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle_pct: Option<f64>,
    /// 1-minute load average when the run started and the largest read during it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load_start: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load_max: Option<f64>,
    /// The shaper's own lateness p99, ms: its timer wake-ups (`stat`'s `timer_wake_ns`) or its
    /// pacing (eligible instant → transmit, `lateness_ns`), whichever is later; absent for the
    /// kernel's qdisc.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shaper_late_p99_ms: Option<f64>,
}

/// The data path's impairments at the end of a run (`[path]`, netem's semantics).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct PathSummary {
    /// Packets lost at random (Bernoulli or Gilbert–Elliott).
    pub lost: u64,
    /// Packets sent twice.
    pub duplicated: u64,
    /// Packets that skipped the delay (`reorder`).
    pub reordered: u64,
}

/// The root scheduler's counters (`QdiscStats`) and its discipline-specific figures.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct QdiscSummary {
    /// `htb`, `sfq`, `fq_codel`, … (`pfifo` without a policy).
    pub kind: String,
    pub enqueued_packets: u64,
    pub dequeued_packets: u64,
    /// Packets refused at enqueue or dropped later, by reason (`queue_limit`, `aqm`, …).
    pub drops: BTreeMap<String, u64>,
    /// ECN marks instead of drops.
    pub marked: u64,
    pub overlimits: u64,
    /// The discipline's own gauges at the end (`sojourn_us`, `avg_queue_bytes`, `active_flows`…).
    pub extra: BTreeMap<String, f64>,
}

/// Which series a sample belongs to.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SeriesKind {
    Class,
    Flow,
}

/// One row of `timeseries.csv`: the interval ending at `time_s`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Sample {
    pub time_s: f64,
    pub kind: SeriesKind,
    pub name: String,
    /// Bytes sent (class) or delivered (flow) in the interval.
    pub bytes: u64,
    pub rate_bps: f64,
    pub backlog_bytes: u64,
    /// Drops in the interval.
    pub drops: u64,
    /// RTT samples in the interval (flows with RTT), mean in ms; not in the CSV contract's first
    /// columns, written after them.
    #[serde(skip)]
    pub rtt_ms: Option<f64>,
}

/// The link-sharing state of one class at the end of a sample interval (`scheduler.csv`).
#[derive(Clone, Debug, PartialEq)]
pub struct ClassState {
    pub time_s: f64,
    pub class: String,
    /// `can_send`, `may_borrow` or `cant_send` (CBQ: underlimit, may borrow, overlimit).
    pub mode: &'static str,
    /// HTB's rate and ceil tokens in bytes (negative in debt); `None` for CBQ.
    pub tokens_bytes: Option<i64>,
    pub ctokens_bytes: Option<i64>,
    /// CBQ's estimator: average idle time in µs (negative over the allocation); `None` for HTB.
    pub avgidle_us: Option<f64>,
}

/// Everything a run produced.
#[derive(Clone, Debug, Default)]
pub struct SimResult {
    pub summary: Summary,
    pub samples: Vec<Sample>,
    /// Per class per sample: mode, tokens/ctokens or avgidle (classful schedulers only).
    pub class_states: Vec<ClassState>,
    /// Individual RTT probes `(time_s, flow, rtt_ms)` for RTT-over-time plots.
    pub rtt_points: Vec<(f64, String, f64)>,
    /// Each UDP flow's mean one-way delay per sample interval `(end time_s, flow, owd_ms)`, for
    /// the delay plot.
    pub owd_points: Vec<(f64, String, f64)>,
    /// One record per arriving flow (`fct.csv`), in arrival order.
    pub fct: Vec<crate::fct::FctRecord>,
}

impl std::fmt::Display for HostFigures {
    /// One line: `timer (1 ms sleeps) late p50 0.06 / p99 0.31 / max 2.10 ms (15000 wake-ups),
    /// steal 0.0 %, idle 35 %, load 2.10 → 3.40 on 2 CPUs, shaper lateness p99 0.05 ms`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "timer ({} ms sleeps) late p50 {:.2} / p99 {:.2} / max {:.2} ms ({} wake-ups)",
            self.interval_ms,
            self.timer_late_p50_ms,
            self.timer_late_p99_ms,
            self.timer_late_max_ms,
            self.timer_samples
        )?;
        if let Some(s) = self.steal_pct {
            write!(f, ", steal {s:.1} %")?;
        }
        if let Some(i) = self.idle_pct {
            write!(f, ", idle {i:.0} %")?;
        }
        if let (Some(a), Some(b)) = (self.load_start, self.load_max) {
            write!(f, ", load {a:.2} → max {b:.2} on {} CPUs", self.cpus)?;
        }
        if let Some(s) = self.shaper_late_p99_ms {
            write!(f, ", shaper lateness p99 {s:.2} ms")?;
        }
        Ok(())
    }
}
