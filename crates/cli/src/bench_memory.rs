//! `linkshare bench sched --memory`: what a subscriber costs while idle and while active, for
//! the bench tree with the leaf queue of `--leaf` (fq_codel: the per-circuit queue
//! `import libreqos` writes).
//!
//! Three states of one tree, each measured twice: by the scheduler's own count of its heap
//! (`Htb::memory_bytes`, plus the boxed leaves' records and their per-flow state,
//! `Htb::leaf_bytes`) and by the process's resident set (which includes what the allocator
//! keeps):
//! 1. built, no packet yet: every leaf idle (per-flow state is built at a leaf's first packet,
//!    `linkshare_core::qdisc::lazy`);
//! 2. one packet sent through each of the `--active` leaves (all by default), the tree empty
//!    again: those leaves hold their state, kept for the scheduler's hold;
//! 3. after the hold: `reclaim_idle` called as a driver does (budget by budget) until nothing
//!    is left to release; then once more after glibc's `malloc_trim`, which shows what the
//!    allocator kept of the released tables for reuse (the resident set follows the most
//!    tables held at once, not the tables held now, unless trimmed; the trim takes far too long
//!    for a datapath thread: a bench figure only).

use linkshare_core::benchkit::{BenchPacket, PKT_LEN};
use linkshare_core::htb::Htb;
use linkshare_core::qdisc::lazy::DEFAULT_RECLAIM_BUDGET;
use linkshare_core::qdisc::{Dequeued, Qdisc};
use linkshare_core::Time;
use serde_json::json;

use crate::thread_time::rss_bytes;

/// What the report prints besides the tree: the format and the tree's labels.
pub(crate) struct Out<'a> {
    pub json: bool,
    pub levels: u32,
    pub leaf: &'a str,
}

/// One state of the tree: scheduler heap, leaf records, per-flow state, resident set.
#[derive(Copy, Clone, Debug)]
struct Snap {
    heap: usize,
    leaf_fixed: usize,
    leaf_state: usize,
    rss: u64,
}

fn snap(q: &Htb<BenchPacket>, rss0: u64) -> Snap {
    let (leaf_fixed, leaf_state) = q.leaf_bytes();
    Snap {
        heap: q.memory_bytes(),
        leaf_fixed,
        leaf_state,
        rss: rss_bytes().saturating_sub(rss0),
    }
}

fn gauge(q: &Htb<BenchPacket>, name: &str) -> f64 {
    let mut v = 0.0;
    q.extra_stats(&mut |k, x| {
        if k == name {
            v = x;
        }
    });
    v
}

/// Print the report (text, or one JSON object with `--json`).
/// `act`: the leaves sent one packet each, of `n_leaves`.
pub(crate) fn report(
    a: &Out,
    mut q: Htb<BenchPacket>,
    n_leaves: usize,
    act: Vec<u32>,
    rss0: u64,
    build_s: f64,
) -> anyhow::Result<i32> {
    let leaf = a.leaf;
    let classes = q.len();
    let idle = snap(&q, rss0);
    let mut now = 0u64;
    for (i, &l) in act.iter().enumerate() {
        let p = BenchPacket {
            len: PKT_LEN,
            id: i as u32,
        };
        if q.enqueue_to(l, p, Time(now)).is_ok() {
            now += 1;
            while let Dequeued::Packet(_) = q.dequeue(Time(now)) {}
        }
    }
    while q.backlog().packets > 0 {
        now += 1_000_000;
        while let Dequeued::Packet(_) = q.dequeue(Time(now)) {}
    }
    let live = gauge(&q, "leaf_states_live");
    let active = snap(&q, rss0);
    let hold = q.idle_hold();
    let before_hold = q.reclaim_idle(Time(now), DEFAULT_RECLAIM_BUDGET);
    let t = Time(now + hold.0);
    let (mut released, mut calls) = (0u64, 0u32);
    loop {
        let n = q.reclaim_idle(t, DEFAULT_RECLAIM_BUDGET);
        calls += 1;
        released += u64::from(n);
        if n == 0 {
            break;
        }
    }
    let after = snap(&q, rss0);
    // What the allocator keeps of the released tables, handed back to the system.
    let t_trim = std::time::Instant::now();
    // SAFETY: glibc's malloc_trim only returns free memory to the system; no pointer is touched.
    unsafe {
        libc::malloc_trim(0);
    }
    let trim_s = t_trim.elapsed().as_secs_f64();
    let trimmed = snap(&q, rss0);
    q.stats().check_conservation().map_err(anyhow::Error::msg)?;
    let total = |s: &Snap| s.heap + s.leaf_fixed + s.leaf_state;
    let per = |b: f64, n: usize| b / n.max(1) as f64;
    let n_act = act.len();
    let state_per_active = per(
        active.leaf_state.saturating_sub(idle.leaf_state) as f64,
        n_act,
    );
    let rss_per_active = per(active.rss.saturating_sub(idle.rss) as f64, n_act);
    if a.json {
        let js = |s: &Snap| {
            json!({"heap_bytes": s.heap, "leaf_record_bytes": s.leaf_fixed,
                   "leaf_state_bytes": s.leaf_state, "rss_bytes": s.rss,
                   "bytes_per_leaf": per(total(s) as f64, n_leaves),
                   "rss_per_leaf": per(s.rss as f64, n_leaves)})
        };
        println!(
            "{}",
            json!({
                "qdisc": "htb", "leaf": leaf, "levels": a.levels, "leaves": n_leaves,
                "classes": classes, "active": n_act, "build_s": build_s,
                "idle": js(&idle), "active_state": js(&active), "after_reclaim": js(&after),
                "after_malloc_trim": js(&trimmed), "malloc_trim_s": trim_s,
                "state_bytes_per_active_leaf": state_per_active,
                "rss_per_active_leaf": rss_per_active,
                "leaf_states_live": live, "hold_s": hold.as_secs_f64(),
                "released_before_hold": before_hold, "released": released,
                "reclaim_calls": calls, "reclaim_budget": DEFAULT_RECLAIM_BUDGET,
            })
        );
        return Ok(0);
    }
    println!(
        "memory: htb, {n_leaves} leaves ({leaf}), {classes} classes, {} levels, built in {build_s:.2} s",
        a.levels
    );
    let line = |what: &str, s: &Snap| {
        println!(
            "  {what:<28} {:>8.0} B/leaf (scheduler {:.0}, leaf records {:.0}, per-flow state {:.0}); resident {:>8.0} B/leaf",
            per(total(s) as f64, n_leaves),
            per(s.heap as f64, n_leaves),
            per(s.leaf_fixed as f64, n_leaves),
            per(s.leaf_state as f64, n_leaves),
            per(s.rss as f64, n_leaves),
        )
    };
    line("idle (built, no traffic)", &idle);
    line(&format!("{n_act} leaves active"), &active);
    println!(
        "  an active leaf adds {state_per_active:.0} B of per-flow state ({rss_per_active:.0} B resident); {live} leaves hold state"
    );
    line("after reclaim", &after);
    line(
        &format!("after malloc_trim ({:.1} ms)", trim_s * 1e3),
        &trimmed,
    );
    println!(
        "  reclaim after the hold ({:.1} s): {released} released in {calls} calls of at most {DEFAULT_RECLAIM_BUDGET} ({before_hold} before the hold)",
        hold.as_secs_f64()
    );
    Ok(0)
}
