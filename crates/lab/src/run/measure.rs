//! The run itself: the testbed built, the router started, the flows' sockets running in real
//! time, and a snapshot of the router's counters and the flows' progress at every sample.
//!
//! Sampling sleeps to each due time in short steps so that SIGINT/SIGTERM is noticed within
//! 50 ms; an interrupted run takes one last snapshot so its partial report covers the time that
//! ran. After the run, UDP and ping receivers keep counting for a drain time so that what is
//! still in flight is not counted as lost. The testbed is dropped (everything removed) before
//! the measurements are returned.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use linkshare_sim::scenario::FlowKind;
use linkshare_sim::Scenario;

use crate::testbed::{self, RouterStats, Testbed};
use crate::traffic::{FlowLive, Plan, Traffic};

use super::unique;

/// Everything one run measured.
pub(super) struct Measured {
    pub(super) live: Vec<Arc<FlowLive>>,
    /// Router snapshots: index 0 at t0, then one per sample.
    pub(super) snapshots: Vec<(f64, RouterStats)>,
    /// Flow delivered/sent/received at each snapshot.
    pub(super) flow_marks: Vec<Vec<(u64, u64, u64)>>,
    /// Flow one-way delays so far (sum in ns, count; UDP) at each snapshot.
    pub(super) owd_marks: Vec<Vec<(u64, u64)>>,
    /// Flow sent/received after the drain time that follows each flow's stop.
    pub(super) drained: Vec<(u64, u64)>,
    pub(super) elapsed: f64,
    pub(super) interrupted: bool,
    pub(super) router: &'static str,
    /// The host while the traffic ran ([`crate::host`]).
    pub(super) host: linkshare_sim::model::HostFigures,
    /// The return direction's scheduler (`[uplink]`) before the traffic and after the last
    /// sample, where the router shapes it.
    pub(super) uplink: Option<(RouterStats, RouterStats)>,
}

/// Builds the testbed, starts `router` with `policy_text` (and `uplink_text` as the file the
/// router's `--reverse-policy` names, [`super::setup::UPLINK_FILE`]) and the flows of `plans`, and samples
/// until the scenario's duration (or a signal); the testbed is gone when this returns.
pub(super) fn measure(
    sc: &Scenario,
    plans: &[Plan],
    routes: &[testbed::TcpRoute],
    policy_text: &str,
    uplink_text: Option<&str>,
    router: Box<dyn testbed::Router>,
) -> anyhow::Result<Measured> {
    let mut bed = Testbed::new()?;
    let srcs: Vec<_> = unique(plans.iter().map(|p| p.src));
    let dsts: Vec<_> = unique(plans.iter().map(|p| p.dst));
    if let Some(both) = srcs.iter().find(|a| dsts.contains(a)) {
        anyhow::bail!(
            "{}: address {both} is both a source and a destination; the lab puts sources on the sender and destinations on the sink",
            sc.origin
        );
    }
    bed.add_flow_addresses(&srcs, &dsts)?;
    bed.set_tcp_routes(routes)?;
    let policy = bed.write_file("policy.toml", policy_text)?;
    if let Some(u) = uplink_text {
        bed.write_file(super::setup::UPLINK_FILE, u)?;
    }
    let name = router.name();
    bed.start_router(router, &policy)?;
    bed.wait_reachable()?;

    let uplink_before = match bed.router() {
        Some(r) if uplink_text.is_some() => r.uplink_stats().ok().flatten(),
        _ => None,
    };
    let live: Vec<Arc<FlowLive>> = plans.iter().map(|_| Arc::default()).collect();
    let sampler = crate::host::HostSampler::start();
    let (mut traffic, t0) = Traffic::start(plans, &live, &bed.ns_a, &bed.ns_c)?;
    let duration = sc.duration.as_secs_f64();
    let sample = sc.sample.as_secs_f64();
    let mut snapshots = Vec::new();
    let mut flow_marks = Vec::new();
    let marks = |live: &[Arc<FlowLive>]| -> Vec<(u64, u64, u64)> {
        live.iter()
            .map(|l| {
                (
                    l.delivered.load(Ordering::Relaxed),
                    l.packets_sent.load(Ordering::Relaxed),
                    l.packets_received.load(Ordering::Relaxed),
                )
            })
            .collect()
    };
    let mut owd_marks = Vec::new();
    let owd = |live: &[Arc<FlowLive>]| -> Vec<(u64, u64)> {
        live.iter()
            .map(|l| {
                (
                    l.owd_sum_ns.load(Ordering::Relaxed),
                    l.owd_n.load(Ordering::Relaxed),
                )
            })
            .collect()
    };
    let mut interrupted = false;
    let mut k = 0u64;
    loop {
        let due = (k as f64 * sample).min(duration);
        // Sleep until `due`, waking to notice a signal.
        loop {
            if testbed::interrupted() {
                interrupted = true;
                break;
            }
            let now = Instant::now().saturating_duration_since(t0).as_secs_f64();
            if now >= due && Instant::now() >= t0 {
                break;
            }
            std::thread::sleep(Duration::from_secs_f64((due - now).clamp(0.0005, 0.05)));
        }
        if interrupted {
            break;
        }
        let router = bed.router().context("the router is gone")?;
        let st = router.stats()?;
        let at = Instant::now().saturating_duration_since(t0).as_secs_f64();
        snapshots.push((stamp(due, at, sample), st));
        flow_marks.push(marks(&live));
        owd_marks.push(owd(&live));
        if due >= duration {
            break;
        }
        k = next_sample(k, at, sample);
    }
    let elapsed = Instant::now()
        .saturating_duration_since(t0)
        .as_secs_f64()
        .min(duration);
    let uplink = match (uplink_before, bed.router()) {
        (Some(before), Some(r)) => r.uplink_stats().ok().flatten().map(|after| (before, after)),
        _ => None,
    };
    let mut host = sampler.stop();
    // The shaper's own lateness, where the router reports it (linkshare's `stat`): its timer
    // wake-ups and its pacing (eligible instant → transmit), whichever p99 is later.
    host.shaper_late_p99_ms = snapshots.last().and_then(|(_, st)| {
        let p99 = |samples: &str, p99: &str| {
            let x = &st.extra;
            x.get(samples)
                .filter(|&&n| n > 0.0)
                .and_then(|_| x.get(p99))
                .map(|us| us / 1e3)
        };
        match (
            p99("timer_wake_samples", "timer_wake_p99_us"),
            p99("lateness_samples", "lateness_p99_us"),
        ) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        }
    });
    if interrupted {
        // One last snapshot so the partial report covers the time that ran.
        if let Some(r) = bed.router() {
            if let Ok(st) = r.stats() {
                snapshots.push((elapsed, st));
                flow_marks.push(marks(&live));
                owd_marks.push(owd(&live));
            }
        }
    }
    // UDP and ping receivers keep counting for max(0.5 s, 2 × base RTT) after each flow's stop,
    // so what is still in flight then is not lost.
    let drain_until = plans
        .iter()
        .filter(|p| !matches!(p.spec.kind, FlowKind::Tcp(_)))
        .map(|p| p.stop + p.drain())
        .fold(0.0f64, f64::max);
    while !interrupted && !testbed::interrupted() {
        let now = Instant::now().saturating_duration_since(t0).as_secs_f64();
        if now >= drain_until {
            break;
        }
        std::thread::sleep(Duration::from_secs_f64(
            (drain_until - now).clamp(0.001, 0.05),
        ));
    }
    let drained = live
        .iter()
        .map(|l| {
            (
                l.packets_sent.load(Ordering::Relaxed),
                l.packets_received.load(Ordering::Relaxed),
            )
        })
        .collect();
    traffic.finish();
    drop(bed);
    Ok(Measured {
        live,
        snapshots,
        flow_marks,
        owd_marks,
        drained,
        elapsed,
        interrupted,
        router: name,
        host,
        uplink,
    })
}

/// The time a snapshot due at `due` and read at `at` is filed under: on the grid (`k × sample`,
/// as the simulator samples) unless the reading came late. Reading the counters can take longer
/// than a sample (two `tc` processes in a busy one-CPU user-mode Linux guest took about 0.5 s),
/// and a late reading filed on the grid put a second's bytes into a quarter-second interval; a
/// late one is filed under when it was read, and the figures divide each interval's bytes by
/// its own length.
fn stamp(due: f64, at: f64, sample: f64) -> f64 {
    if at - due > sample / 4.0 {
        at
    } else {
        due
    }
}

/// The grid index of the next snapshot after snapshot `k` was read at `at`: the next one, or
/// after a late reading the first grid point still ahead (the grid points already past are
/// skipped rather than read in a burst).
fn next_sample(k: u64, at: f64, sample: f64) -> u64 {
    (k + 1).max((at / sample).ceil() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_late_reading_is_filed_when_it_was_read_and_skips_the_points_past() {
        // On time (a few ms late): on the grid, the next point next.
        assert_eq!(stamp(2.0, 2.004, 0.25), 2.0);
        assert_eq!(next_sample(8, 2.004, 0.25), 9);
        // Half a second late: filed at 2.5, and the next point is 2.5 (k = 10), not 2.25.
        assert_eq!(stamp(2.0, 2.5, 0.25), 2.5);
        assert_eq!(next_sample(8, 2.5, 0.25), 10);
        assert_eq!(next_sample(8, 2.6, 0.25), 11);
    }
}
