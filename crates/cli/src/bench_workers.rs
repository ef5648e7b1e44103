//! `linkshare bench sched --workers N`: the sharded HTB (`linkshare_core::shard`) on N OS
//! threads, each owning one shard and its own packet stream, against the same tree on one
//! worker: aggregate Mpps and the ratio (issue 14 §4 aims at ≥ 1.8× for two workers).
//!
//! Principles: the datapath work without I/O, as `bench sched` measures it. The tree is the
//! librte_sched-shaped one of `linkshare_core::benchkit` with at least N subports, so that its
//! top-level subtrees (the subports) can be placed round robin on N shards; the root (10 Gbit/s)
//! is shared by the shards' gates (shares `R/N` each). A worker runs
//! [`linkshare_core::benchkit::SchedBench`] on its shard over its own leaves, with its own fake
//! clock stepping N packet times per packet (it owns `1/N` of the port), so every worker asks for
//! exactly its share, as the one-worker run asks for the whole port. The one-worker run is the
//! same code with one shard: the ratio measures what the threads add, not a different scheduler.
//! Threads start together (a barrier after their warm-up); the aggregate is all packets over the
//! slowest worker's time. Each thread's CPU time is read too (`CLOCK_THREAD_CPUTIME_ID`): on a
//! machine shared with other work a thread waits for a core, and `N ×` the packets per
//! CPU-second says what the workers would do with a core each.

use std::sync::{Arc, Barrier};
use std::time::Instant;

use linkshare_core::benchkit::{
    htb_specs, Pattern, RunCounts, SchedBench, Shape, PKT_LEN, PORT_RATE,
};
use linkshare_core::htb::HtbParams;
use linkshare_core::qdisc::Qdisc;
use linkshare_core::shard::{split, ShardConfig};
use serde_json::{json, Value};

use crate::thread_time::thread_cpu_s;

/// The options of `bench sched` this mode uses.
pub struct WorkersArgs {
    pub levels: u32,
    pub leaves: u32,
    pub subports: u32,
    pub backlog: u32,
    pub burst: u32,
    pub packets: u64,
    pub warmup: u64,
    pub json: bool,
}

/// One run on `n` workers.
struct WorkersRun {
    n: usize,
    /// Packets dequeued, summed.
    packets: u64,
    short: u64,
    refused: u64,
    /// The slowest worker's timed run, seconds.
    wall_s: f64,
    per_worker_mpps: Vec<f64>,
    /// CPU seconds each worker thread used in its timed run: below `wall_s` when the thread
    /// waited for a core (a machine shared with other work).
    per_worker_cpu_s: Vec<f64>,
    leases: u64,
    clipped_bytes: u64,
}

impl WorkersRun {
    fn mpps(&self) -> f64 {
        self.packets as f64 / self.wall_s.max(1e-9) / 1e6
    }
    /// Packets per CPU-second of the workers, in millions: the throughput the threads would
    /// reach with a core each to themselves.
    fn mpps_per_cpu(&self) -> f64 {
        let cpu: f64 = self.per_worker_cpu_s.iter().sum();
        self.packets as f64 / cpu.max(1e-9) / 1e6
    }
    fn json(&self) -> Value {
        json!({
            "workers": self.n, "packets": self.packets, "wall_s": self.wall_s,
            "mpps": self.mpps(), "ns_per_packet": self.wall_s * 1e9 / self.packets.max(1) as f64,
            "per_worker_mpps": self.per_worker_mpps, "per_worker_cpu_s": self.per_worker_cpu_s,
            "mpps_per_cpu_s": self.mpps_per_cpu(), "short_dequeues": self.short,
            "refused": self.refused, "pool_leases": self.leases, "pool_clipped_bytes": self.clipped_bytes,
        })
    }
}

/// Cut the tree into `n` shards and run them on `n` threads.
fn run_on(
    a: &WorkersArgs,
    shape: &Shape,
    pattern: Pattern,
    n: usize,
) -> anyhow::Result<WorkersRun> {
    let (specs, leaves) = htb_specs(shape).map_err(anyhow::Error::msg)?;
    let plan = split(HtbParams::default(), specs, &ShardConfig::new(n))?;
    // Each shard's leaves, as local ids, in the tree's order.
    let mut local: Vec<Vec<u32>> = vec![Vec::new(); n];
    for &l in &leaves {
        if let Some((s, id)) = plan.map.locate(l) {
            local[s].push(id);
        }
    }
    let step = PORT_RATE
        .tx_time(PKT_LEN as u64)
        .map_or(1, |d| d.0)
        .saturating_mul(n as u64);
    let total = a.packets.max(1);
    let barrier = Arc::new(Barrier::new(n));
    let mut handles = Vec::with_capacity(n);
    for (shard, leaves) in plan.shards.into_iter().zip(local) {
        if leaves.is_empty() {
            anyhow::bail!("a shard got no leaf: use more --leaves or fewer --workers");
        }
        let mut b = SchedBench::new(shard, leaves, pattern, a.backlog, a.burst)
            .map_err(anyhow::Error::msg)?;
        b.set_clock_step(step);
        let (warmup, packets) = (a.warmup / n as u64, total.div_ceil(n as u64));
        let barrier = barrier.clone();
        handles.push(std::thread::spawn(move || {
            if warmup > 0 {
                b.run(warmup);
            }
            barrier.wait();
            let (t, cpu0) = (Instant::now(), thread_cpu_s());
            let c: RunCounts = b.run(packets);
            let (s, cpu) = (t.elapsed().as_secs_f64(), thread_cpu_s() - cpu0);
            let ok = b.sched.stats().check_conservation();
            let leases = b.sched.gate().map_or(0, |g| g.stats().leases);
            (c, s, cpu, ok, leases)
        }));
    }
    let mut r = WorkersRun {
        n,
        packets: 0,
        short: 0,
        refused: 0,
        wall_s: 0.0,
        per_worker_mpps: Vec::with_capacity(n),
        per_worker_cpu_s: Vec::with_capacity(n),
        leases: 0,
        clipped_bytes: plan
            .pool
            .as_ref()
            .map_or(0, |p| p.clipped() / 8_000_000_000),
    };
    for h in handles {
        let (c, s, cpu, ok, leases) = h
            .join()
            .map_err(|_| anyhow::anyhow!("a worker thread panicked"))?;
        ok.map_err(anyhow::Error::msg)?;
        r.packets += c.dequeued;
        r.short += c.short;
        r.refused += c.refused;
        r.leases += leases;
        r.wall_s = r.wall_s.max(s);
        r.per_worker_mpps
            .push(c.dequeued as f64 / s.max(1e-9) / 1e6);
        r.per_worker_cpu_s.push(cpu);
    }
    if let Some(p) = &plan.pool {
        r.clipped_bytes = p.clipped() / 8_000_000_000;
    }
    Ok(r)
}

/// `bench sched --qdisc htb --workers N`.
pub fn run(a: &WorkersArgs, workers: u32, pattern: Pattern) -> anyhow::Result<i32> {
    let n = workers as usize;
    if n == 0 || n > linkshare_core::shard::MAX_SHARDS {
        anyhow::bail!(
            "--workers must be 1..={}",
            linkshare_core::shard::MAX_SHARDS
        );
    }
    if a.levels < 3 {
        anyhow::bail!("--workers needs --levels 3 or more (the subports are what is sharded)");
    }
    let shape = Shape {
        levels: a.levels,
        leaves: a.leaves,
        subports: a.subports.max(workers),
    };
    let one = run_on(a, &shape, pattern, 1)?;
    let many = run_on(a, &shape, pattern, n)?;
    let ratio = many.mpps() / one.mpps().max(1e-9);
    let cpu_ratio = n as f64 * many.mpps_per_cpu() / one.mpps_per_cpu().max(1e-9);
    let pat = match pattern {
        Pattern::Random => "random",
        Pattern::RoundRobin => "rr",
    };
    if a.json {
        println!(
            "{}",
            json!({
                "qdisc": "htb-sharded", "levels": a.levels, "leaves": a.leaves,
                "subports": shape.subports, "pattern": pat, "backlog": a.backlog, "burst": a.burst,
                "one_worker": one.json(), "workers": many.json(), "ratio": ratio,
                "ratio_per_cpu": cpu_ratio,
            })
        );
    } else {
        println!(
            "htb sharded: {} leaves, {} subports, {} levels, {pat}, backlog {}, burst {}",
            a.leaves, shape.subports, a.levels, a.backlog, a.burst
        );
        for r in [&one, &many] {
            println!(
                "  {} worker(s): {} packets in {:.3} s: {:.2} Mpps ({}), {:.2} Mpps per CPU-second (short dequeues {}, pool leases {})",
                r.n,
                r.packets,
                r.wall_s,
                r.mpps(),
                r.per_worker_mpps
                    .iter()
                    .map(|m| format!("{m:.2}"))
                    .collect::<Vec<_>>()
                    .join(" + "),
                r.mpps_per_cpu(),
                r.short,
                r.leases
            );
        }
        println!(
            "  ratio {n} workers / 1 worker: {ratio:.2}x (wall clock); {cpu_ratio:.2}x if each \
             worker had its core (N x Mpps per CPU-second)"
        );
    }
    Ok(0)
}
