//! The running shaper's `stat` reply ([`Shaper::stat`]): a typed [`Snapshot`]
//! (control/snapshot.rs) filled from the interfaces' counters, each direction's device model,
//! emulated link and scheduler, the loop's own figures (wake-ups, turns, lateness) and the
//! role's counters ([`Role::fill_snapshot`]).
//!
//! ## Principles
//! * **Read, never walk on the loop's behalf.** [`Shaper::stat_frame`] copies counters without
//!   visiting the classes; the single shaper's readers get their class rows copied a bounded
//!   piece per turn (control/copier.rs), and only [`Shaper::stat`] (workers, in-process
//!   callers) walks them at once.
//! * **One snapshot for both roles.** The single shaper and each worker fill it the same way;
//!   only [`Role::fill_snapshot`] differs. The scheduler's and histograms' parts are
//!   control/stat.rs's, shared with the workers' merge and the offline handler.

use std::collections::HashMap;

use crate::control::snapshot::{
    finite, DirectionSnapshot, EmulateSnapshot, InterfaceSnapshot, PathDelaySnapshot, Snapshot,
    TxDrops,
};
use crate::control::stat::{classes, fill_lateness, fill_qdisc, quantiles_ns};
use crate::role::Role;
use crate::Shaper;

impl<R: Role> Shaper<R> {
    /// The `stat` reply, every class in it (built here: the workers' and in-process callers';
    /// the single shaper's readers go through the stats plane, control/copier.rs).
    pub(crate) fn stat(&mut self) -> Snapshot {
        let mut snap = self.stat_frame();
        for (i, d) in self.dirs.iter().enumerate() {
            if let (Some(s), Some(out)) = (&d.sched, snap.directions.get_mut(i)) {
                out.classes = classes(s);
                out.class_count = out.classes.len() as u64;
            }
        }
        snap
    }

    /// The snapshot without class rows: interfaces, directions' counters, lateness.
    pub(crate) fn stat_frame(&mut self) -> Snapshot {
        self.refresh_ports();
        let interfaces = (0..2)
            .map(|i| {
                let s = &self.ifs[i];
                let p = &s.port;
                let map = |m: &HashMap<&'static str, u64>| {
                    m.iter().map(|(k, v)| (k.to_string(), *v)).collect()
                };
                InterfaceSnapshot {
                    name: self.names[i].clone(),
                    io: self.ports[i].io(),
                    rx_packets: s.rx_packets,
                    rx_bytes: s.rx_bytes,
                    tx_packets: p.tx_frames,
                    tx_bytes: p.tx_bytes,
                    non_ip_passed: s.non_ip,
                    non_ip_shaped: s.non_ip_shaped,
                    non_ip_dropped: s.non_ip_dropped,
                    fragments: s.fragments,
                    dscp_untrusted: s.dscp_untrusted,
                    dscp_washed: s.dscp_washed,
                    tx_errors: s.tx_ring_full + s.tx_too_big,
                    tx_drops: TxDrops {
                        ring_full: s.tx_ring_full,
                        too_big: s.tx_too_big,
                    },
                    tx_kicks: p.kicks,
                    tx_kick_errors: p.kick_errors,
                    rx_ring_drops: p.rx_ring_drops,
                    rx_truncated: p.rx_truncated,
                    rx_own_skipped: p.rx_own_skipped,
                    rx_blocks: p.rx_blocks,
                    socket_errors: p.socket_errors,
                    rebinds: p.rebinds,
                    rebind_lost: p.rebind_lost,
                    malformed: map(&s.malformed),
                    parse_issues: map(&s.issues),
                }
            })
            .collect();
        let directions = (0..2).map(|i| self.direction_snapshot(i)).collect();
        let mut snap = Snapshot {
            uptime_s: finite(self.now().0 as f64 / 1e9),
            policy: self.dirs[0]
                .policy_path
                .as_ref()
                .map(|p| p.display().to_string()),
            kind: self.dirs[0]
                .sched
                .as_ref()
                .map(|s| s.qr().kind().to_string()),
            interfaces,
            directions,
            early_wake_ns: self.wake.margin_ns(),
            early_wake_learnt: self.wake.is_learning(),
            timer_wake_ns: quantiles_ns(self.wake.timer_hist()),
            catch_up_turns: self.catch_up_turns,
            loop_turn_ns: quantiles_ns(self.turns.hist()),
            long_turns: self.turns.long_turns(),
            loop_work: self.bg.view(),
            rx_coalesced: self.rx_coalesced,
            queue_memory: self.mem.limit(),
            memory_drops: self.mem.drops,
            ..Snapshot::default()
        };
        fill_lateness(&mut snap, &self.lateness);
        self.role.fill_snapshot(&mut snap);
        snap
    }

    fn direction_snapshot(&self, i: usize) -> DirectionSnapshot {
        let d = &self.dirs[i];
        let mut out = DirectionSnapshot {
            from: self.names[1 - d.to].clone(),
            to: self.names[d.to].clone(),
            device_buffer_bytes: d.device_buffer,
            line_bps: d.line_bps,
            drain_bps: d.drain_bps(),
            policy: d.policy_path.as_ref().map(|p| p.display().to_string()),
            emulate: d.emu.as_ref().map(|e| EmulateSnapshot {
                lost: e.drops.lost,
                duplicated: e.impair_stats().duplicated,
                reordered: e.impair_stats().reordered,
                line_full: e.drops.line_full,
                in_line: e.in_line() as u64,
                in_line_bytes: e.in_line_bytes(),
                limit_bytes: e.spec().limit_bytes,
                delay_ns: e.spec().delay.0,
                path_delays: e
                    .spec()
                    .paths
                    .iter()
                    .map(|p| PathDelaySnapshot {
                        addr: p.addr.to_string(),
                        delay_ns: p.delay.0,
                    })
                    .collect(),
            }),
            ..DirectionSnapshot::default()
        };
        if let Some(s) = &d.sched {
            fill_qdisc(&mut out, s);
        }
        out
    }
}
