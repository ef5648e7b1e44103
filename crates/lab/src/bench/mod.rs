//! `linkshare lab bench`: the seeds' overhead measurements on the real shaper, beside the
//! kernel's HTB and no shaper at all, in one run (issue 6 §7, issue 7 §2).
//!
//! Every measurement runs in a fresh three-namespace testbed (hosts A → router B → C of the
//! seeds, veth pairs): B forwards either with a Linux bridge (no shaper), a bridge with the
//! kernel's HTB on its egress port towards C (the script of `linkshare export tc`), or
//! `linkshare run` between its two veths. Traffic is real kernel sockets in A and C.
//! Rates are read from C's interface counters (frames as they arrive, Ethernet header
//! included — the bytes both HTBs count), CPU from /proc.
//!
//! The tables are printed as Markdown, ready for BENCHMARKS.md; `--json FILE` writes the raw
//! figures.

use std::path::PathBuf;

use anyhow::{bail, Context};
use serde_json::{json, Value};

mod bed;
mod cpu;
mod flood;
mod floor;
mod latency;
mod pacing;
mod rates;
mod scale;
mod workers;

use flood::REPEAT;
use latency::{priority, request_response, throughput};
use pacing::pacing;
use rates::{accuracy, classes, cpu_per_frame, forwarding, sfq_flood};
use workers::{shared_parent, workers};

pub use scale::{scale_files, SUBSCRIBERS_CSV};

/// The measurements, by the name `--only` takes.
const SUITES: &[(&str, &str)] = &[
    ("throughput", "seed 000 Table 1: bulk TCP throughput, shaper on and off"),
    ("rr", "seed 000 Tables 2-3: UDP request/response transactions per second and round trip"),
    ("forwarding", "seed 001 Table 4: small-packet forwarding rate, FIFO against the schedulers"),
    ("classes", "seed 001 Table 5 and issue 6 (c): forwarding rate and CPU per packet against the number of classes"),
    ("sfq", "seed 004: forwarded packets per second under a small-packet flood, FIFO, SFQ, HTB+SFQ"),
    ("accuracy", "issue 6 (a): rate accuracy per class for 64/512/1500-byte packets at 1, 10, 100 Mbit/s"),
    ("priority", "issue 6 (b): priority-class RTT under a saturating bulk flow"),
    ("pacing", "issue 14 §5: how late paced departures leave after their eligible instant"),
    ("cpu", "issue 14 targets: machine CPU per 60-byte frame against the kernel's HTB, 1 and 100 classes"),
    ("workers", "issue 14 §4: forwarding rate and CPU per frame with one and two datapath threads"),
    ("shared-parent", "issue 14 §4: the rate of a parent shared by classes on two workers"),
    ("scale", "issue 35 §10: ISP scale, one class per subscriber: linkshare against the kernel's HTB from `export tc`"),
];

/// Subscriber counts of `scale` when `--subscribers` is not given.
pub const SCALE_DEFAULT: &[usize] = &[10_000, 100_000];

/// What `linkshare lab bench` measures (the CLI's options, parsed).
#[derive(Clone, Debug)]
pub struct BenchOptions {
    /// Seconds of traffic per figure
    pub seconds: f64,
    /// Run only these measurements (comma separated): throughput, rr, forwarding, classes, sfq,
    /// accuracy, priority, pacing, cpu, workers, shared-parent, scale
    pub only: Vec<String>,
    /// Also write every figure as JSON to this file
    pub json: Option<PathBuf>,
    /// Measure each packet-flood figure and each TCP goodput this many times and report the median
    pub repeat: usize,
    /// Subscriber counts for `scale` (empty: [`SCALE_DEFAULT`])
    pub subscribers: Vec<usize>,
}

/// The names `only` takes, each with its title.
pub fn suites() -> &'static [(&'static str, &'static str)] {
    SUITES
}

/// Run the measurements `args` selects; every Markdown block (the machine, then one table per
/// measurement) goes to `emit` as it is ready.
pub fn run(args: &BenchOptions, mut emit: impl FnMut(&str)) -> anyhow::Result<()> {
    for o in &args.only {
        if !SUITES.iter().any(|(n, _)| n == o) {
            let names: Vec<&str> = SUITES.iter().map(|(n, _)| *n).collect();
            return Err(crate::invalid(format!(
                "unknown measurement `{o}`: use one of {}",
                names.join(", ")
            )));
        }
    }
    if !(0.5..=600.0).contains(&args.seconds) {
        return Err(crate::invalid(format!(
            "--seconds {} is out of range: use 0.5 to 600",
            args.seconds
        )));
    }
    if let Some(why) = crate::testbed::unavailable() {
        bail!("{why}");
    }
    crate::testbed::install_signal_handlers()?;
    if !(1..=20).contains(&args.repeat) {
        return Err(crate::invalid(format!(
            "--repeat {} is out of range: use 1 to 20",
            args.repeat
        )));
    }
    REPEAT.store(args.repeat, std::sync::atomic::Ordering::Relaxed);
    if let Some(n) = args
        .subscribers
        .iter()
        .find(|n| !(1..=4_000_000).contains(*n))
    {
        return Err(crate::invalid(format!(
            "--subscribers {n} is out of range: use 1 to 4000000"
        )));
    }
    let sizes = if args.subscribers.is_empty() {
        SCALE_DEFAULT.to_vec()
    } else {
        args.subscribers.clone()
    };
    let want = |n: &str| args.only.is_empty() || args.only.iter().any(|o| o == n);
    let secs = args.seconds;
    let mut all = serde_json::Map::new();
    emit(&format!("{}\n", machine_markdown()));
    let mut out = |name: &str, title: &str, table: Table| {
        emit(&format!("### {title}\n\n{}\n", table.markdown()));
        all.insert(name.to_string(), table.json());
    };
    for (name, title) in SUITES {
        if !want(name) {
            continue;
        }
        eprintln!("lab bench: {name} ...");
        let t = match *name {
            "throughput" => throughput(secs)?,
            "rr" => request_response(secs)?,
            "forwarding" => forwarding(secs)?,
            "classes" => classes(secs)?,
            "cpu" => cpu_per_frame(secs)?,
            "sfq" => sfq_flood(secs)?,
            "accuracy" => accuracy(secs)?,
            "priority" => priority(secs)?,
            "pacing" => pacing(secs)?,
            "workers" => workers(secs)?,
            "shared-parent" => shared_parent(secs)?,
            "scale" => scale::scale(secs, &sizes)?,
            _ => unreachable!("names checked above"),
        };
        out(name, title, t);
    }
    if let Some(path) = &args.json {
        let doc = json!({ "machine": machine_json(), "seconds": secs, "results": all });
        std::fs::write(path, serde_json::to_string_pretty(&doc)? + "\n")
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(())
}

/// A result table: a header and rows of cells.
pub(super) struct Table {
    head: Vec<String>,
    rows: Vec<Vec<String>>,
    note: String,
}

impl Table {
    pub(super) fn new(head: &[&str], note: &str) -> Table {
        Table {
            head: head.iter().map(|s| s.to_string()).collect(),
            rows: Vec::new(),
            note: note.to_string(),
        }
    }
    pub(super) fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }
    fn markdown(&self) -> String {
        let mut s = format!("| {} |\n|", self.head.join(" | "));
        for _ in &self.head {
            s.push_str("---|");
        }
        s.push('\n');
        for r in &self.rows {
            s.push_str(&format!("| {} |\n", r.join(" | ")));
        }
        if !self.note.is_empty() {
            s.push_str(&format!("\n{}\n", self.note));
        }
        s
    }
    fn json(&self) -> Value {
        let rows: Vec<Value> = self
            .rows
            .iter()
            .map(|r| {
                let m: serde_json::Map<String, Value> = self
                    .head
                    .iter()
                    .cloned()
                    .zip(r.iter().map(|c| Value::String(c.clone())))
                    .collect();
                Value::Object(m)
            })
            .collect();
        json!(rows)
    }
}

pub(super) fn machine_json() -> Value {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|s| s.trim().to_string())
        })
        .unwrap_or_else(|| "unknown".into());
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_default();
    json!({ "cpu": cpu, "cores": cores, "kernel": kernel })
}

pub(super) fn machine_markdown() -> String {
    let m = machine_json();
    format!(
        "Machine: {} ({} cores), Linux {}; testbed: namespaces A → B → C over veth pairs, \
         offloads off; `linkshare lab bench` (release build).\n",
        m["cpu"].as_str().unwrap_or("?"),
        m["cores"],
        m["kernel"].as_str().unwrap_or("?")
    )
}
