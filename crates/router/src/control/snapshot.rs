//! The typed `stat` reply: a snapshot of the shaper — interfaces, both directions, each
//! direction's scheduler and one row per class, in the scheduler's visiting order (the shape of
//! `tc -s class show`). Plain data shared by the server, which fills it (`stat.rs`), and the CLI,
//! which renders it (`linkshare stat`) or prints it as JSON (`stat --json`).
//!
//! Principles: every class names its parent by name and by id (`parent`, `parent_id`; an id is
//! the class's handle, not a position in visiting order), so a tree declared in any order reads
//! back right; counters are integers; the few rates that are estimates are `f64` and always
//! finite (a non-finite value would not survive JSON); drops are kept per reason, with the
//! reason names of `linkshare_core::qdisc::DropReason`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::server::ControlStats;

/// The whole `stat` reply.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Snapshot {
    pub uptime_s: f64,
    /// The forward direction's policy file and scheduler kind (also in `directions[0]`).
    pub policy: Option<String>,
    pub kind: Option<String>,
    /// Pacing lateness of departures, rounded up to microseconds.
    pub lateness_us: LatenessUs,
    pub lateness_ns: LatenessNs,
    /// IN then OUT.
    pub interfaces: Vec<InterfaceSnapshot>,
    pub control: ControlStats,
    /// IN -> OUT then OUT -> IN.
    pub directions: Vec<DirectionSnapshot>,
    /// Pacing lateness as cumulative buckets (for the metrics' histogram).
    #[serde(default)]
    pub lateness_hist: LatenessHist,
    /// Policy reloads since start (control `reload` and SIGHUP), by outcome.
    #[serde(default)]
    pub reloads: ReloadCounts,
    /// How early the loop arms its timer before a paced departure (router/src/wake.rs), ns,
    /// and whether that margin is learnt from the timer (else fixed by `--busy-poll-us`).
    #[serde(default)]
    pub early_wake_ns: u64,
    #[serde(default)]
    pub early_wake_learnt: bool,
    /// How late the timer woke the loop each time it slept towards a departure: the floor
    /// under `lateness_ns` for a loop that sleeps, which `early_wake_ns` is there to cover.
    #[serde(default)]
    pub timer_wake_ns: LatenessNs,
    /// Scheduler turns replayed to catch up late wake-ups (`--catch-up-ms`).
    #[serde(default)]
    pub catch_up_turns: u64,
    /// How long the datapath loop worked in one turn between two waits (router/src/turns.rs):
    /// the forwarding pauses the shaper causes itself, since start (with `--workers N`: the
    /// worst worker's quantiles).
    #[serde(default)]
    pub loop_turn_ns: LatenessNs,
    /// Loop turns longer than 1 ms (`turns::LONG_TURN_NS`), since start.
    #[serde(default)]
    pub long_turns: u64,
    /// The loop's work besides forwarding, piece by piece (router/src/background.rs): what a
    /// reload's install, each step of its take-over and each piece of a copy of the counters
    /// cost, since start.
    #[serde(default)]
    pub loop_work: LoopWork,
    /// Loop turns that slept to let frames gather before the next receive turn
    /// (`--rx-coalesce-us`, router/src/coalesce.rs).
    #[serde(default)]
    pub rx_coalesced: u64,
    /// The bound on the memory queued packets hold (`--queue-memory`, bytes; membound.rs) and
    /// the received frames dropped because it was reached.
    #[serde(default)]
    pub queue_memory: u64,
    #[serde(default)]
    pub memory_drops: u64,
    /// With `--workers N`: one row per datapath thread (empty with one).
    #[serde(default)]
    pub workers: Vec<WorkerSnapshot>,
    /// Which copy of the counters this is (the stats plane numbers them, control/plane.rs):
    /// a paged `stat` asks for the pages of one `seq`.
    #[serde(default)]
    pub seq: u64,
}

/// One datapath thread of `--workers N`: what it received and scheduled, and what it passed
/// to the worker owning a frame's class.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkerSnapshot {
    pub index: usize,
    /// Frames it received on both interfaces.
    pub rx_packets: u64,
    /// Frames its shards sent.
    pub sent_packets: u64,
    /// Frames queued in its shards.
    pub backlog_packets: u64,
    /// Classes in its shard of the forward direction (the shared root's copy included).
    pub classes: u64,
    /// Hand-overs (workers/mod.rs `HandoffCounts`).
    pub handed_off: u64,
    pub taken_over: u64,
    pub handoff_full: u64,
    pub handoff_reclassified: u64,
    pub handoff_lost: u64,
}

/// Cumulative lateness buckets: `buckets[i]` samples were at most `le_ns[i]` late (each bucket
/// of `Hist` counted under the first bound at or above its largest value).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LatenessHist {
    pub le_ns: Vec<u64>,
    pub buckets: Vec<u64>,
    pub sum_ns: u64,
    pub count: u64,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReloadCounts {
    pub ok: u64,
    pub failed: u64,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LatenessUs {
    pub p50: u64,
    pub p99: u64,
    pub max: u64,
    pub samples: u64,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LatenessNs {
    pub p50: u64,
    pub p99: u64,
    pub max: u64,
    pub mean: u64,
    pub samples: u64,
}

/// The loop's work besides forwarding (router/src/background.rs), by kind.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LoopWork {
    /// Installing a reloaded policy (a rebuilt HTB: the swap alone; a patch: its changes).
    #[serde(default)]
    pub install: WorkPieces,
    /// The steps of a rebuilt HTB's take-over of the tree it replaces.
    #[serde(default)]
    pub adopt: WorkPieces,
    /// The pieces of a copy of the class counters for the stats plane.
    #[serde(default)]
    pub copy: WorkPieces,
}

/// Pieces of one kind of work: how many, how long each held the loop (wall time: the
/// forwarding pause it made) and what each cost the loop's thread (its CPU time: a piece whose
/// wall time is well above its CPU time waited), the most units (classes) one piece did, and
/// how many pieces waited: `preempted` (the kernel gave the CPU to another task during the
/// piece) and `blocked` (the thread slept in it: a lock, a page).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkPieces {
    pub pieces: u64,
    pub wall_ns: LatenessNs,
    pub cpu_ns: LatenessNs,
    pub max_units: u64,
    #[serde(default)]
    pub preempted: u64,
    #[serde(default)]
    pub blocked: u64,
}

/// One interface's counters (the shaper's and its ring's).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct InterfaceSnapshot {
    pub name: String,
    /// The I/O the shaper uses on it: `packet` (AF_PACKET) or `xdp native/copy`, … (`--io`).
    #[serde(default)]
    pub io: String,
    pub rx_packets: u64,
    pub rx_bytes: u64,
    pub tx_packets: u64,
    pub tx_bytes: u64,
    /// Non-IP frames passed unshaped to the other interface.
    pub non_ip_passed: u64,
    /// Non-IP frames offered to the direction's scheduler (`non_ip = "shape"`).
    #[serde(default)]
    pub non_ip_shaped: u64,
    /// Non-IP frames dropped (`non_ip = "drop"`).
    #[serde(default)]
    pub non_ip_dropped: u64,
    pub fragments: u64,
    /// Packets arriving here whose non-zero DSCP did not classify them (the policy's
    /// `trust_dscp = false`), and packets whose DSCP was cleared (`wash`).
    #[serde(default)]
    pub dscp_untrusted: u64,
    #[serde(default)]
    pub dscp_washed: u64,
    /// `tx_drops` summed.
    pub tx_errors: u64,
    pub tx_drops: TxDrops,
    pub tx_kicks: u64,
    pub tx_kick_errors: u64,
    pub rx_ring_drops: u64,
    pub rx_truncated: u64,
    pub rx_own_skipped: u64,
    pub rx_blocks: u64,
    /// Errors the receive socket reported (`ENETDOWN` when the link went down), read and cleared.
    #[serde(default)]
    pub socket_errors: u64,
    /// Times the port was reopened: its interface re-created or its MTU changed.
    #[serde(default)]
    pub rebinds: u64,
    /// Frames lost in the old transmit ring when the port was reopened.
    #[serde(default)]
    pub rebind_lost: u64,
    /// Frames that did not parse, by reason; dropped.
    pub malformed: BTreeMap<String, u64>,
    /// Packets classified despite a parse issue, by issue.
    pub parse_issues: BTreeMap<String, u64>,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TxDrops {
    pub ring_full: u64,
    pub too_big: u64,
}

/// One direction: its device model, its scheduler and its classes.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct DirectionSnapshot {
    pub from: String,
    pub to: String,
    pub shaped: bool,
    pub device_buffer_bytes: u64,
    pub line_bps: u64,
    pub drain_bps: u64,
    pub policy: Option<String>,
    pub kind: Option<String>,
    pub backlog_packets: u64,
    pub backlog_bytes: u64,
    /// `None` when unshaped.
    pub qdisc: Option<QdiscSnapshot>,
    pub classes: Vec<ClassSnapshot>,
    pub emulate: Option<EmulateSnapshot>,
    /// Classes of the direction before a `stat` selection (control/select.rs) picked `classes`.
    #[serde(default)]
    pub class_count: u64,
}

/// The scheduler's own counters (`QdiscStats`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct QdiscSnapshot {
    pub enqueued: u64,
    pub enqueued_bytes: u64,
    pub dequeued: u64,
    pub dequeued_bytes: u64,
    /// Packets dropped after they were accepted, and refused at enqueue: totals and per reason.
    pub dropped: u64,
    pub refused: u64,
    pub dropped_by_reason: BTreeMap<String, u64>,
    pub refused_by_reason: BTreeMap<String, u64>,
    pub overlimits: u64,
    /// ECN marks (CE) set instead of drops.
    pub marked: u64,
    pub backlog_packets: u64,
    pub backlog_bytes: u64,
    /// A CAKE root's tins; `None` for other schedulers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cake: Option<CakeSnapshot>,
}

/// A CAKE qdisc's memory and tins: what `tc -s qdisc show … cake` prints below its counters.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CakeSnapshot {
    /// The most bytes held at once, and the limit (`memory used: … of …`).
    pub memory_used: u64,
    pub memory_limit: u64,
    /// In the order tc prints them (diffserv3: Bulk, Best Effort, Voice).
    pub tins: Vec<TinSnapshot>,
}

/// One CAKE tin, with tc-cake's column names in the comments.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TinSnapshot {
    /// The column head (`Best Effort`, `Voice`, `Tin 3`).
    pub name: String,
    /// `thresh`: the tin's threshold rate, bit/s (0: unlimited).
    pub threshold_bps: u64,
    /// `target`, `interval`: COBALT's.
    pub target_ns: u64,
    pub interval_ns: u64,
    /// `pk_delay`, `av_delay`, `sp_delay`: peak, average and sparse (base) sojourn estimates.
    pub peak_delay_ns: u64,
    pub avg_delay_ns: u64,
    pub base_delay_ns: u64,
    /// `backlog`.
    pub backlog_bytes: u64,
    /// `pkts`, `bytes`: enqueued.
    pub packets: u64,
    pub bytes: u64,
    /// `way_inds`, `way_miss`, `way_cols`: the set-associative hash's indirect hits, misses
    /// and collisions.
    pub way_indirect_hits: u64,
    pub way_misses: u64,
    pub way_collisions: u64,
    /// `drops` (AQM and overflow), `marks` (ECN CE), `ack_drop` (ACK filter).
    pub drops: u64,
    pub marks: u64,
    pub ack_drops: u64,
    /// `sp_flows`, `bk_flows`, `un_flows`: sparse, bulk and unresponsive flows now.
    pub sparse_flows: u64,
    pub bulk_flows: u64,
    pub unresponsive_flows: u64,
    /// `max_len`: the largest packet seen, bytes.
    pub max_len: u64,
    /// `quantum`: the tin's per-flow DRR quantum, bytes.
    pub quantum: u64,
}

impl CakeSnapshot {
    /// From the tins a CAKE qdisc visited (`Qdisc::visit_tins`); `None` when there are none.
    pub fn of(tins: &[linkshare_core::qdisc::cake::TinView]) -> Option<CakeSnapshot> {
        let first = tins.first()?;
        Some(CakeSnapshot {
            memory_used: first.memory_used,
            memory_limit: first.memory_limit,
            tins: tins.iter().map(TinSnapshot::of).collect(),
        })
    }

    /// The tins of qdisc `q`, if it is a CAKE.
    pub fn of_qdisc<P: linkshare_core::Packet>(
        q: &dyn linkshare_core::qdisc::Qdisc<P>,
    ) -> Option<CakeSnapshot> {
        let mut v = Vec::new();
        q.visit_tins(&mut |t| v.push(*t));
        Self::of(&v)
    }
}

impl TinSnapshot {
    pub fn of(t: &linkshare_core::qdisc::cake::TinView) -> TinSnapshot {
        let s = &t.stats;
        TinSnapshot {
            name: t.name.to_string(),
            threshold_bps: t.threshold.bits_per_sec(),
            target_ns: t.cparams.target.0,
            interval_ns: t.cparams.interval.0,
            peak_delay_ns: s.peak_delay,
            avg_delay_ns: s.avge_delay,
            base_delay_ns: s.base_delay,
            backlog_bytes: u64::from(s.backlog),
            packets: s.packets,
            bytes: s.bytes,
            way_indirect_hits: s.ways.hits,
            way_misses: s.ways.misses,
            way_collisions: s.ways.collisions,
            drops: u64::from(s.dropped),
            marks: u64::from(s.ecn_mark),
            ack_drops: u64::from(s.ack_drops),
            sparse_flows: u64::from(t.sparse_flows),
            bulk_flows: u64::from(t.bulk_flows),
            unresponsive_flows: u64::from(t.unresponsive_flows),
            max_len: u64::from(s.max_skblen),
            quantum: u64::from(t.flow_quantum),
        }
    }
}

/// One class (`ClassView`), with its live rate estimate.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ClassSnapshot {
    pub name: String,
    /// A subscriber's circuit id (its table's `id` column; circuits.rs), when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub circuit_id: Option<String>,
    /// The class's id in its scheduler (its handle's minor number, as `export tc` numbers them).
    pub id: u32,
    pub parent: Option<String>,
    pub parent_id: Option<u32>,
    pub leaf: bool,
    /// HTB's level: 0 for leaves, one more than the highest child for inner classes.
    pub level: u8,
    pub rate_bps: u64,
    pub ceil_bps: u64,
    pub prio: u8,
    /// HTB's class mode (`can_send`, `may_borrow`, `cant_send`) or the scheduler's equivalent.
    pub mode: String,
    pub live_rate_bps: f64,
    pub live_pps: f64,
    pub sent_bytes: u64,
    pub sent_packets: u64,
    /// Drops of the leaf queue, all reasons, and per reason.
    pub drops: u64,
    pub drops_by_reason: BTreeMap<String, u64>,
    /// ECN marks set by the leaf queue.
    pub marked: u64,
    pub overlimits: u64,
    pub lended: u64,
    pub borrowed: u64,
    pub giants: u64,
    pub backlog_packets: u64,
    pub backlog_bytes: u64,
    /// Rate and ceil tokens in bytes (negative in debt).
    pub tokens: i64,
    pub ctokens: i64,
    /// CBQ's average idle time in ns; `None` for schedulers without an estimator.
    pub avgidle_ns: Option<i64>,
    /// HFSC's curves and state; `None` for other schedulers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hfsc: Option<HfscSnapshot>,
    /// The leaf's CAKE tins, when the leaf is a CAKE that has had a packet (an idle one's
    /// counters are all zero, and a policy of 100,000 such leaves copies nothing for them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cake: Option<CakeSnapshot>,
}

/// One two-piece service curve: `m1` bit/s for `d` ns, then `m2` bit/s.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CurveSnapshot {
    pub m1_bps: u64,
    pub d_ns: u64,
    pub m2_bps: u64,
}

/// An HFSC class: its curves, and its state in tc's words (`period`, `level`, `work` = all
/// bytes sent, `rtwork` = bytes sent by the real-time criterion) and the paper's times (virtual
/// time, fit time, eligible time, deadline; ns on the scheduler's clock).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HfscSnapshot {
    pub rt: Option<CurveSnapshot>,
    pub ls: Option<CurveSnapshot>,
    pub ul: Option<CurveSnapshot>,
    pub period: u64,
    pub level: u8,
    pub work_bytes: u64,
    pub rtwork_bytes: u64,
    pub vt_ns: u64,
    pub ft_ns: u64,
    pub et_ns: u64,
    pub dt_ns: u64,
}

impl HfscSnapshot {
    /// From the core's view of a class.
    pub fn of(v: &linkshare_core::hfsc::HfscClassView) -> Self {
        let c = |s: Option<linkshare_core::hfsc::ServiceCurve>| {
            s.map(|s| CurveSnapshot {
                m1_bps: s.m1,
                d_ns: s.d,
                m2_bps: s.m2,
            })
        };
        let st = &v.state;
        HfscSnapshot {
            rt: c(v.rt),
            ls: c(v.ls),
            ul: c(v.ul),
            period: st.period,
            level: st.level,
            work_bytes: st.total,
            rtwork_bytes: st.cumul,
            vt_ns: st.vt,
            ft_ns: st.f,
            et_ns: st.e,
            dt_ns: st.d,
        }
    }
}

/// The emulated link after the scheduler (`--emulate`, `--path-delay`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EmulateSnapshot {
    pub lost: u64,
    /// Frames sent twice (`duplicate=`) and sent ahead of their delay (`reorder=`).
    #[serde(default)]
    pub duplicated: u64,
    #[serde(default)]
    pub reordered: u64,
    pub line_full: u64,
    pub in_line: u64,
    pub in_line_bytes: u64,
    pub limit_bytes: u64,
    pub delay_ns: u64,
    pub path_delays: Vec<PathDelaySnapshot>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PathDelaySnapshot {
    pub addr: String,
    pub delay_ns: u64,
}

impl Snapshot {
    /// Give every row that is a subscriber with an id its `circuit_id` (circuits.rs), one hash
    /// look-up per row; a direction without ids is left alone.
    pub(crate) fn label_circuits(&mut self, circuits: &crate::circuits::Circuits) {
        let maps = circuits.current();
        for (d, dir) in self.directions.iter_mut().enumerate() {
            let Some(m) = maps.get(d).filter(|m| !m.is_empty()) else {
                continue;
            };
            for c in &mut dir.classes {
                c.circuit_id = m.get(c.name.as_str()).map(|s| s.to_string());
            }
        }
    }

    /// Everything but the directions' class rows (which a selection or the stats plane fills).
    pub fn clone_without_classes(&self) -> Snapshot {
        Snapshot {
            uptime_s: self.uptime_s,
            policy: self.policy.clone(),
            kind: self.kind.clone(),
            lateness_us: self.lateness_us,
            lateness_ns: self.lateness_ns,
            interfaces: self.interfaces.clone(),
            control: self.control,
            directions: self
                .directions
                .iter()
                .map(DirectionSnapshot::clone_without_classes)
                .collect(),
            lateness_hist: self.lateness_hist.clone(),
            reloads: self.reloads,
            early_wake_ns: self.early_wake_ns,
            early_wake_learnt: self.early_wake_learnt,
            timer_wake_ns: self.timer_wake_ns,
            catch_up_turns: self.catch_up_turns,
            loop_turn_ns: self.loop_turn_ns,
            long_turns: self.long_turns,
            loop_work: self.loop_work,
            rx_coalesced: self.rx_coalesced,
            queue_memory: self.queue_memory,
            memory_drops: self.memory_drops,
            workers: self.workers.clone(),
            seq: self.seq,
        }
    }
}

impl DirectionSnapshot {
    /// The direction without its class rows.
    pub fn clone_without_classes(&self) -> DirectionSnapshot {
        DirectionSnapshot {
            from: self.from.clone(),
            to: self.to.clone(),
            shaped: self.shaped,
            device_buffer_bytes: self.device_buffer_bytes,
            line_bps: self.line_bps,
            drain_bps: self.drain_bps,
            policy: self.policy.clone(),
            kind: self.kind.clone(),
            backlog_packets: self.backlog_packets,
            backlog_bytes: self.backlog_bytes,
            qdisc: self.qdisc.clone(),
            classes: Vec::new(),
            emulate: self.emulate.clone(),
            class_count: self.class_count,
        }
    }

    /// Each class's depth in the tree (roots 0), in row order, from the `parent` names. A
    /// parent missing from the rows counts as a root; a cycle cannot hang (depth is bounded by
    /// the number of rows).
    pub fn depths(&self) -> Vec<usize> {
        let idx: BTreeMap<&str, usize> = self
            .classes
            .iter()
            .enumerate()
            .map(|(i, c)| (c.name.as_str(), i))
            .collect();
        self.classes
            .iter()
            .map(|c| {
                let mut d = 0;
                let mut p = c.parent.as_deref();
                while let Some(i) = p.and_then(|n| idx.get(n)) {
                    d += 1;
                    if d > self.classes.len() {
                        break;
                    }
                    p = self.classes[*i].parent.as_deref();
                }
                d
            })
            .collect()
    }
}

/// `x`, or 0 when it is not finite (JSON has no NaN or infinity).
pub(crate) fn finite(x: f64) -> f64 {
    if x.is_finite() {
        x
    } else {
        0.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::circuits::{Circuits, Ids};

    #[test]
    fn rows_are_labelled_with_circuit_ids_by_name_per_direction() {
        let c = Circuits::default();
        let ids: Ids = [("alice".into(), "C-1".into())].into_iter().collect();
        c.set(0, std::sync::Arc::new(ids));
        let row = |n: &str| ClassSnapshot {
            name: n.into(),
            ..ClassSnapshot::default()
        };
        let dir = DirectionSnapshot {
            classes: vec![row("root"), row("alice")],
            ..DirectionSnapshot::default()
        };
        let mut s = Snapshot {
            directions: vec![dir.clone(), dir],
            ..Snapshot::default()
        };
        s.label_circuits(&c);
        let got: Vec<Vec<Option<String>>> = s
            .directions
            .iter()
            .map(|d| d.classes.iter().map(|r| r.circuit_id.clone()).collect())
            .collect();
        // Direction 1 has no ids recorded: unlabelled.
        assert_eq!(got, [vec![None, Some("C-1".to_string())], vec![None, None]]);
    }
}
