//! `linkshare bench sched`: the scheduler core alone, in memory, on a tree shaped like DPDK's
//! `librte_sched` (root → subports → pipes → 16 leaf queues per pipe), so that its figures sit
//! beside `../shared/anchors/dpdk-sched-bench` (run both with `scripts/bench-sched`).
//!
//! The tree, the tag sequence and the loop are `linkshare_core::benchkit` (shared with the
//! criterion benches); this command only parses options, times the run with the monotonic
//! clock, measures the memory the tree took (resident set before and after building it, which
//! includes what the build left in the allocator, and the scheduler's own count of its heap) and
//! prints Mpps and ns per packet, or one JSON object with `--json`. `--workers N` runs the sharded
//! HTB on N threads instead (`bench_workers`).

use std::time::Instant;

use clap::{Args, Subcommand, ValueEnum};
use linkshare_core::benchkit::{
    build_cbq, build_hfsc_with, build_htb_with, BenchLeaf, BenchPacket, LeafSched, Pattern,
    SchedBench, Shape,
};
use linkshare_core::qdisc::cake::{Cake, CakeParams};
use serde_json::json;

use crate::thread_time::{rss_bytes, thread_cpu_s};

/// Micro-benchmarks of the datapath, without I/O.
#[derive(Args, Debug)]
pub struct BenchArgs {
    #[command(subcommand)]
    pub which: BenchWhich,
}

#[derive(Subcommand, Debug)]
pub enum BenchWhich {
    /// Enqueue/dequeue 64-byte packets through an in-memory tree shaped like librte_sched's
    Sched(SchedArgs),
}

#[derive(Copy, Clone, Debug, ValueEnum)]
pub enum QdiscArg {
    Htb,
    Cbq,
    Hfsc,
    /// HFSC with an upper limit of the port rate on the top class (bench it with --burst 1:
    /// the clock then advances by a packet time between dequeues)
    HfscUl,
}

/// Where the `--active` leaves lie in the tree.
#[derive(Copy, Clone, Debug, PartialEq, Eq, ValueEnum)]
pub enum ActiveLayout {
    /// Every (leaves / active)-th leaf: one leaf in each of `active` pipes far apart, all at the
    /// same queue slot (so the same prio)
    Spread,
    /// The first `active` leaves: whole pipes side by side, the shape of an `active`-leaf tree
    Packed,
    /// `active` leaves drawn at random (a fixed seed): subscribers as they come
    Random,
}

/// The queue at every leaf class (`--leaf`).
#[derive(Copy, Clone, Debug, PartialEq, Eq, ValueEnum)]
pub enum LeafArg {
    /// A 64-packet tail-drop FIFO, as DPDK's bench
    #[value(alias = "fifo")]
    Pfifo,
    /// fq_codel with Linux's defaults, as `import libreqos` writes per circuit (HTB only)
    #[value(name = "fq_codel", alias = "fq-codel")]
    FqCodel,
    /// cake with its defaults (unlimited, diffserv3, triple-isolate; HTB only)
    Cake,
}

#[derive(Copy, Clone, Debug, ValueEnum)]
pub enum PatternArg {
    Random,
    Rr,
}

/// Options of `bench sched` (the names of DPDK's bench where they exist).
#[derive(Args, Debug)]
#[command(
    long_about = "Enqueue/dequeue 64-byte packets through an in-memory tree shaped like DPDK \
librte_sched's: root -> subports -> pipes -> 16 leaf queues per pipe, every class at rate = ceil \
= 10 Gbit/s and a fake clock advancing one packet time per packet, so the root is never the \
limit (as in ../shared/anchors/dpdk-sched-bench). Each iteration enqueues --burst packets to the \
next leaves (random or round robin) and dequeues up to --burst. Prints Mpps and ns per packet."
)]
pub struct SchedArgs {
    #[arg(long, value_enum, default_value = "htb")]
    pub qdisc: QdiscArg,
    /// The queue at every leaf class (HTB only): pfifo, fq-codel or cake. A CAKE or fq_codel leaf
    /// holds ~100 KB of flow queues once it has traffic: use a few --leaves
    #[arg(long, value_enum, default_value = "pfifo")]
    pub leaf: LeafArg,
    /// Class levels below the root (3: subports, pipes, leaves)
    #[arg(long, default_value_t = 3)]
    pub levels: u32,
    /// Leaf queues
    #[arg(long, default_value_t = 65_536)]
    pub leaves: u32,
    /// Classes on the first level below the root (with --levels 3 or more)
    #[arg(long, default_value_t = 1)]
    pub subports: u32,
    #[arg(long, value_enum, default_value = "random")]
    pub pattern: PatternArg,
    /// Send only to this many leaves (the others stay idle), laid out as --active-layout says
    #[arg(long)]
    pub active: Option<u32>,
    /// Where the --active leaves lie: spread evenly over the tree, packed at its start, or drawn
    /// at random
    #[arg(long, value_enum, default_value = "spread")]
    pub active_layout: ActiveLayout,
    /// Packets standing in every (active) leaf queue (enqueued before timing)
    #[arg(long, default_value_t = 0)]
    pub backlog: u32,
    /// Packets per enqueue burst and per dequeue burst
    #[arg(long, default_value_t = 32)]
    pub burst: u32,
    /// Packets dequeued in the timed run
    #[arg(long, default_value_t = 20_000_000)]
    pub packets: u64,
    /// Packets dequeued before timing starts
    #[arg(long, default_value_t = 2_000_000)]
    pub warmup: u64,
    /// Print one JSON object
    #[arg(long)]
    pub json: bool,
    /// HTB only: cut the tree into N shards below the root (at least N subports) and run them
    /// on N threads, each with its own packet stream; prints the aggregate and its ratio to the
    /// same tree on one worker
    #[arg(long, value_name = "N")]
    pub workers: Option<u32>,
    /// HTB only: instead of timing, report the bytes a leaf costs idle, active (one packet
    /// through each --active leaf) and after the idle leaves' state is reclaimed
    #[arg(long)]
    pub memory: bool,
}

pub fn run(args: &BenchArgs) -> anyhow::Result<i32> {
    match &args.which {
        BenchWhich::Sched(a) => sched(a),
    }
}

fn sched(a: &SchedArgs) -> anyhow::Result<i32> {
    let shape = Shape {
        levels: a.levels,
        leaves: a.leaves,
        subports: a.subports,
    };
    let pattern = match a.pattern {
        PatternArg::Random => Pattern::Random,
        PatternArg::Rr => Pattern::RoundRobin,
    };
    let (leaf, leaf_name) = match a.leaf {
        LeafArg::Pfifo => (BenchLeaf::Fifo, "pfifo"),
        LeafArg::FqCodel => (BenchLeaf::FqCodel, "fq_codel"),
        LeafArg::Cake => (BenchLeaf::Cake, "cake"),
    };
    if (a.memory || leaf != BenchLeaf::Fifo) && !matches!(a.qdisc, QdiscArg::Htb) {
        anyhow::bail!("--memory and --leaf fq_codel|cake build HTB trees only (use --qdisc htb)");
    }
    if let Some(w) = a.workers {
        if leaf != BenchLeaf::Fifo || a.memory {
            anyhow::bail!("--workers runs pfifo leaves only, without --memory");
        }
        if !matches!(a.qdisc, QdiscArg::Htb) {
            anyhow::bail!("--workers shards HTB only (use --qdisc htb)");
        }
        let wa = crate::bench_workers::WorkersArgs {
            levels: a.levels,
            leaves: a.leaves,
            subports: a.subports,
            backlog: a.backlog,
            burst: a.burst,
            packets: a.packets,
            warmup: a.warmup,
            json: a.json,
        };
        return crate::bench_workers::run(&wa, w, pattern);
    }
    let rss0 = rss_bytes();
    let t0 = Instant::now();
    match a.qdisc {
        QdiscArg::Htb => {
            if leaf == BenchLeaf::Cake && !a.json {
                let idle = Cake::<BenchPacket>::new(CakeParams::default())
                    .map_err(|e| anyhow::anyhow!("{e}"))?
                    .heap_bytes();
                println!("cake leaf: an idle instance holds {idle} bytes");
            }
            let (q, leaves) =
                build_htb_with(&shape, &|| leaf.spec()).map_err(anyhow::Error::msg)?;
            if a.memory {
                let build_s = t0.elapsed().as_secs_f64();
                let n_leaves = leaves.len();
                let act = active_leaves(leaves, a.active, a.active_layout);
                let out = crate::bench_memory::Out {
                    json: a.json,
                    levels: a.levels,
                    leaf: leaf_name,
                };
                return crate::bench_memory::report(&out, q, n_leaves, act, rss0, build_s);
            }
            let classes = q.len();
            let name = match leaf {
                BenchLeaf::Fifo => "htb",
                BenchLeaf::FqCodel => "htb+fq_codel",
                BenchLeaf::Cake => "htb+cake",
            };
            finish(a, name, q, leaves, classes, pattern, t0, rss0)
        }
        QdiscArg::Cbq => {
            let (q, leaves) = build_cbq(&shape).map_err(anyhow::Error::msg)?;
            let classes = q.len();
            finish(a, "cbq", q, leaves, classes, pattern, t0, rss0)
        }
        QdiscArg::Hfsc | QdiscArg::HfscUl => {
            let ul = matches!(a.qdisc, QdiscArg::HfscUl);
            let (q, leaves) = build_hfsc_with(&shape, ul).map_err(anyhow::Error::msg)?;
            let classes = q.len();
            let name = if ul { "hfsc-ul" } else { "hfsc" };
            finish(a, name, q, leaves, classes, pattern, t0, rss0)
        }
    }
}

/// The leaves sent to: `k` of `leaves` (in leaf order: leaf `i` is queue `i % 16` of pipe
/// `i / 16`) laid out as `layout` says, or all of them.
pub(crate) fn active_leaves(leaves: Vec<u32>, k: Option<u32>, layout: ActiveLayout) -> Vec<u32> {
    match k {
        Some(k) if k > 0 && (k as usize) < leaves.len() => match layout {
            ActiveLayout::Spread => {
                let n = leaves.len() as u64;
                (0..k as u64)
                    .map(|i| leaves[(i * n / k as u64) as usize])
                    .collect()
            }
            ActiveLayout::Packed => leaves[..k as usize].to_vec(),
            ActiveLayout::Random => {
                // A partial Fisher-Yates shuffle driven by a fixed xorshift: the same draw on
                // every run, in leaf order.
                let mut all = leaves;
                let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
                for i in 0..k as usize {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    let j = i + (x % (all.len() - i) as u64) as usize;
                    all.swap(i, j);
                }
                all.truncate(k as usize);
                all.sort_unstable();
                all
            }
        },
        _ => leaves,
    }
}

#[allow(clippy::too_many_arguments)]
fn finish<Q: LeafSched>(
    a: &SchedArgs,
    name: &str,
    q: Q,
    leaves: Vec<u32>,
    classes: usize,
    pattern: Pattern,
    t0: Instant,
    rss0: u64,
) -> anyhow::Result<i32> {
    let build_s = t0.elapsed().as_secs_f64();
    let tree_bytes = rss_bytes().saturating_sub(rss0);
    let heap_bytes = q.memory_bytes();
    let heap_parts = q.memory_parts();
    let leaves = active_leaves(leaves, a.active, a.active_layout);
    let active = leaves.len();
    let layout = match (active < a.leaves as usize, a.active_layout) {
        (false, _) => "all",
        (true, ActiveLayout::Spread) => "spread",
        (true, ActiveLayout::Packed) => "packed",
        (true, ActiveLayout::Random) => "random",
    };
    let mut b =
        SchedBench::new(q, leaves, pattern, a.backlog, a.burst).map_err(anyhow::Error::msg)?;
    if a.warmup > 0 {
        b.run(a.warmup);
    }
    let t = Instant::now();
    let cpu0 = thread_cpu_s();
    let c = b.run(a.packets.max(1));
    let cpu = thread_cpu_s() - cpu0;
    let wall = t.elapsed().as_secs_f64();
    let cpu_ns = cpu * 1e9 / c.dequeued.max(1) as f64;
    let ns = wall * 1e9 / c.dequeued.max(1) as f64;
    let mpps = c.dequeued as f64 / wall / 1e6;
    let per_class = tree_bytes as f64 / classes.max(1) as f64;
    let st = b.sched.stats();
    st.check_conservation().map_err(anyhow::Error::msg)?;
    let pat = match pattern {
        Pattern::Random => "random",
        Pattern::RoundRobin => "rr",
    };
    if a.json {
        println!(
            "{}",
            json!({
                "qdisc": name, "leaf": a.leaf.to_possible_value().map(|v| v.get_name().to_string()), "levels": a.levels, "leaves": a.leaves, "subports": a.subports,
                "classes": classes, "active": active, "active_layout": layout, "pattern": pat, "backlog": a.backlog, "burst": a.burst,
                "packets": c.dequeued, "refused": c.refused, "short_dequeues": c.short,
                "wall_s": wall, "mpps": mpps, "ns_per_packet": ns,
                "cpu_s": cpu, "cpu_ns_per_packet": cpu_ns,
                "build_s": build_s, "tree_bytes": tree_bytes, "bytes_per_class": per_class,
                "heap_bytes": heap_bytes,
                "heap_parts": heap_parts.iter().map(|&(k, b)| (k.to_string(), json!(b))).collect::<serde_json::Map<_, _>>(),
                "heap_bytes_per_class": heap_bytes.map(|h| h as f64 / classes.max(1) as f64),
            })
        );
    } else {
        println!(
            "{name}: {} leaves ({active} active, {layout}), {classes} classes, {} levels, {pat}, backlog {}, burst {}: {} packets in {wall:.3} s: {mpps:.2} Mpps, {ns:.1} ns/packet ({cpu_ns:.1} ns of thread CPU time; refused {}, short dequeues {})",
            a.leaves, a.levels, a.backlog, a.burst, c.dequeued, c.refused, c.short
        );
        println!(
            "tree: built in {build_s:.2} s, {:.1} MB resident ({per_class:.0} B/class)",
            tree_bytes as f64 / 1e6
        );
        if let Some(h) = heap_bytes {
            println!(
                "scheduler heap: {:.1} MB ({:.0} B/class)",
                h as f64 / 1e6,
                h as f64 / classes.max(1) as f64
            );
            let parts: Vec<String> = heap_parts
                .iter()
                .map(|&(k, b)| format!("{k} {:.1}", b as f64 / classes.max(1) as f64))
                .collect();
            if !parts.is_empty() {
                println!("  bytes per class: {}", parts.join(", "));
            }
        }
    }
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use linkshare_core::benchkit::Shape;

    /// The pipes (parents) of the active leaves of a 1,048,576-leaf tree, 1,024 active.
    fn pipes(layout: ActiveLayout) -> (usize, Vec<u32>) {
        let shape = Shape {
            levels: 3,
            leaves: 1 << 20,
            subports: 1,
        };
        let lay = shape.layout().expect("layout");
        let act = active_leaves(lay.leaves.clone(), Some(1024), layout);
        let mut p: Vec<u32> = act.iter().filter_map(|&l| lay.parent[l as usize]).collect();
        p.sort_unstable();
        p.dedup();
        (act.len(), p)
    }

    #[test]
    fn packed_active_leaves_fill_whole_pipes_like_a_small_tree() {
        let (n, p) = pipes(ActiveLayout::Packed);
        assert_eq!(n, 1024);
        // 1,024 leaves of 16 per pipe: 64 pipes, the first ones, as in a 1,024-leaf tree.
        assert_eq!(p.len(), 64);
        assert_eq!(p.windows(2).filter(|w| w[1] != w[0] + 1).count(), 0);
    }

    #[test]
    fn spread_active_leaves_sit_one_per_pipe() {
        let (n, p) = pipes(ActiveLayout::Spread);
        assert_eq!(n, 1024);
        assert_eq!(p.len(), 1024);
    }

    #[test]
    fn random_active_leaves_are_distinct_fixed_and_spread_over_pipes() {
        let (n, p) = pipes(ActiveLayout::Random);
        assert_eq!(n, 1024);
        // 1,024 draws among 65,536 pipes: almost all distinct (expected ≈ 1,016).
        assert!(p.len() > 990, "{}", p.len());
        let all: Vec<u32> = (0..1 << 20).collect();
        let a = active_leaves(all.clone(), Some(1024), ActiveLayout::Random);
        let mut d = a.clone();
        d.dedup();
        assert_eq!(d.len(), 1024, "distinct leaves");
        assert_eq!(
            a,
            active_leaves(all, Some(1024), ActiveLayout::Random),
            "the same draw"
        );
    }

    #[test]
    fn without_active_or_with_too_many_every_leaf_is_sent_to() {
        let all: Vec<u32> = (10..42).collect();
        for k in [None, Some(0), Some(32), Some(100)] {
            assert_eq!(active_leaves(all.clone(), k, ActiveLayout::Packed), all);
        }
    }
}
