//! `lab bench --only scale` (issue 35 §10): an ISP's subscribers — one HTB class per subscriber
//! with a /32 filter and its own leaf, under a few sites — through linkshare and through the
//! kernel's HTB loaded from `export tc` (hashed u32 filters, and the linear form beside it where
//! the kernel loads that in reasonable time), in one run.
//!
//! Per router and size: the time from starting it to the first packet forwarded; memory
//! (linkshare: the process's resident set; the kernel: the drop of MemAvailable and the growth
//! of Slab in /proc/meminfo, both machine-wide and so disturbed by anything else running); UDP
//! echo RTT to subscriber 0 (C's own address) idle and while the statistics are read back to
//! back (linkshare: `/metrics?classes=all`, every class's series; the kernel: `tc -s class
//! show`), with the time of one such read; linkshare's `stat --top 20`; machine CPU per 60-byte frame
//! with the frames spread round robin over 10,000 subscriber addresses (routed from A to C,
//! counted at C's interface; `cpu.rs`); and one subscriber's rate change (linkshare:
//! `linkshare class change`, the kernel: `tc class change`) — how long the command takes, and
//! how many of the echo probes sent every millisecond across it got no answer; for linkshare,
//! the same across one subscriber removed and added back by `reload FILE` (applied in place)
//! and across a full reload (a new tree taking over the running one).

use std::io::{Read, Write};
use std::net::{Ipv4Addr, TcpStream};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context};
use linkshare_config::Policy;
use linkshare_interop::tc::export::{tc_script, tc_script_with, ExportOptions};

use super::bed::{args, Bed};
use super::flood::{fmt_opt, measure_flood, Flood};
use super::latency::{probes, quantile};
use super::Table;
use crate::testbed::{ip, spawn_in_ns, KernelRouter, LinkshareRouter, Router, Testbed, ADDR_C};

/// Subscriber `k` ≥ 1 has address `SUBSCRIBERS + k` (100.64.0.0/10, room for 4M); subscriber 0
/// is C's own address, so that the echo probes go through a subscriber's class.
const SUBSCRIBERS: Ipv4Addr = Ipv4Addr::new(100, 64, 0, 0);
/// The kernel's HTB is measured up to this many subscribers (the bound; one HTB numbers
/// at most 65,533 classes).
const KERNEL_MAX: usize = 60_000;
/// The linear filter form (one u32 priority per subscriber) is loaded up to this many: the
/// kernel refuses the 2,048th u32 priority of one qdisc (`u32_hash::PRIO_MAX`).
const LINEAR_MAX: usize = 2_000;
/// Addresses the CPU measurement spreads its frames over.
const SPREAD: usize = 10_000;
/// Where linkshare serves `/metrics` inside the router namespace.
const METRICS: &str = "127.0.0.1:9469";
/// The subscriber whose rate changes (to half its rate: the sites' guarantees are full, so a
/// higher one would be refused as `check` refuses it).
const CHANGED: &str = "sub0";
/// The uplink's sites, and what each guarantees its subscribers.
const SITES: usize = 25;
const SITE_BIT: u64 = 390_000_000;

/// The rate of each of `n` subscribers: their share of their site.
fn subscriber_rate(n: usize) -> u64 {
    let per_site = n.div_ceil(SITES).max(1) as u64;
    (SITE_BIT / per_site).clamp(1000, 100_000_000)
}

/// The changed subscriber's new rate.
fn new_rate(n: usize) -> u64 {
    subscriber_rate(n) / 2
}

/// The file name of the subscriber table beside the bench's policy.
pub const SUBSCRIBERS_CSV: &str = "subscribers.csv";

/// The policy of `n` subscribers as an ISP writes it (and `import libreqos` does): an uplink of
/// 10 Gbit/s, 25 sites sharing it and a default class as `[[class]]` tables, one `[[plan]]`
/// (rate: a subscriber's share of its site, ceil 100 Mbit/s, `leaf`), and the subscribers in a
/// table, [`SUBSCRIBERS_CSV`] beside the policy: one row each, spread over the sites, with one
/// /32 address. Returns the policy's text and the table's.
pub fn scale_files(n: usize, leaf: &str) -> (String, String) {
    let rate = subscriber_rate(n);
    let mut s = String::with_capacity(4096);
    s.push_str(&format!(
        "# lab bench --only scale: one class per subscriber, from a subscriber table\n\
         qdisc = \"htb\"\ndefault = \"other\"\nsubscribers = \"{SUBSCRIBERS_CSV}\"\n\
         [[class]]\nname = \"uplink\"\nrate = \"10gbit\"\n\
         [[class]]\nname = \"other\"\nparent = \"uplink\"\nrate = \"10mbit\"\n"
    ));
    for site in 0..SITES {
        s.push_str(&format!(
            "[[class]]\nname = \"site{site}\"\nparent = \"uplink\"\nrate = \"{SITE_BIT}bit\"\n"
        ));
    }
    s.push_str(&format!(
        "[[plan]]\nname = \"sub\"\nrate = \"{rate}bit\"\nceil = \"100mbit\"\nleaf = {leaf}\n"
    ));
    let mut csv = String::with_capacity(n * 40 + 32);
    csv.push_str("name,parent,plan,addresses\n");
    for k in 0..n {
        csv.push_str(&format!(
            "sub{k},site{},sub,{}/32\n",
            k % SITES,
            subscriber(k)
        ));
    }
    (s, csv)
}

fn subscriber(k: usize) -> Ipv4Addr {
    if k == 0 {
        ADDR_C
    } else {
        Ipv4Addr::from(u32::from(SUBSCRIBERS) + k as u32)
    }
}

/// linkshare's leaf: fq_codel, as LibreQoS gives every circuit. The kernel's rows use pfifo,
/// as this kernel has no fq_codel (the issue measured its 50k rows with pfifo too).
const FQ_CODEL: &str = "{ type = \"fq_codel\" }";
const PFIFO: &str = "{ type = \"pfifo\", limit = 1000 }";

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Linkshare,
    /// The same shaper with its datapath under SCHED_FIFO (`--realtime 10`): what a scrape or
    /// a take-over costs the forwarding when no ordinary thread can preempt the datapath.
    LinkshareRealtime,
    KernelHashed,
    KernelLinear,
}

impl Kind {
    fn is_linkshare(self) -> bool {
        matches!(self, Kind::Linkshare | Kind::LinkshareRealtime)
    }

    fn name(self) -> &'static str {
        match self {
            Kind::Linkshare => "linkshare (fq_codel leaves)",
            Kind::LinkshareRealtime => "linkshare --realtime 10 (fq_codel leaves)",
            Kind::KernelHashed => "kernel HTB, hashed u32 (pfifo leaves)",
            Kind::KernelLinear => "kernel HTB, linear u32 (pfifo leaves)",
        }
    }
}

fn linear_script(p: &Policy, dev: &str) -> anyhow::Result<String> {
    let opts = ExportOptions {
        hash_filters: false,
        ..ExportOptions::default()
    };
    tc_script_with(p, dev, &opts)
}

/// The suite: `sizes` subscribers (10k and 100k unless `--subscribers` says otherwise).
pub(super) fn scale(secs: f64, sizes: &[usize]) -> anyhow::Result<Table> {
    let mut t = Table::new(
        &[
            "subscribers",
            "router B",
            "start to forwarding (s)",
            "memory",
            "idle RTT p50 / p99 (µs)",
            "RTT p50 / p99 while scraping (µs)",
            "scrapes",
            "stat --top 20 (ms)",
            "machine CPU (ns/frame, 10k addresses)",
            "rate change (ms)",
            "probes lost across it",
            "one subscriber removed / added in place: command (ms) / longest RTT (ms) / probes lost",
            "full reload: command (ms) / longest RTT (ms) / probes lost",
        ],
        "One HTB class per subscriber (rate: its share of one of 25 sites under a 10 Gbit/s \
         uplink, ceil 100 Mbit/s, one plan) with a /32 address, in a subscriber table \
         (`scale_files` in crates/lab/src/bench/scale.rs). Memory: linkshare's resident set when idle; the kernel's as the \
         machine's MemAvailable drop / Slab growth across `tc -batch` (machine-wide: other work \
         disturbs it). RTT: UDP echo A → C every 10 ms through subscriber 0's class, idle, then \
         while the statistics are read back to back in B (linkshare: GET /metrics?classes=all, \
         every class's series; kernel: `tc -s class show`; `scrapes` gives how many, the mean \
         time of one and its size, and for linkshare how many of its loop's turns took over 1 ms \
         while scraping and its longest turn before → after, and the pieces of the counters' copies: \
         how many, the longest wall and thread-CPU time of one, from `stat`'s `loop_work`). `stat --top 20`: the median of 5 runs of the command, \
         start to exit. Machine CPU: \
         60-byte frames as fast as one sender can, round robin over 10,000 subscriber \
         addresses. Rate change: sub0's rate halved, `linkshare class change sub0 --rate R` (by \
         name: no policy text is sent) / `tc class change` \
         until the command returns, with echo probes every 1 ms across it, from a third of \
         `--seconds` (0.2-1 s) before it to twice that after (lost: no answer within 200 ms). The kernel is loaded up to 60,000 subscribers (16-bit class ids), the \
         linear filter form up to 2,000 (the kernel refuses a 2,048th u32 priority on one qdisc). \
         One subscriber removed / added (linkshare): the subscriber table loses its last \
         subscriber, then gets it back, each by `linkshare reload FILE` (the builder thread \
         reads and compares the whole policy; the loop retires or fills one slot of the running \
         tree in place), with echo probes every 1 ms across it as above. Full reload \
         (linkshare): the default class moves to prio 1 (a new tree of every class, built off \
         the datapath and taking over the running one in steps), `linkshare reload FILE` with \
         echo probes every 1 ms across it as above; the longest RTT is the longest forwarding \
         pause plus one RTT; then the install's and the take-over steps' longest wall and \
         thread-CPU time (`stat`'s `loop_work`; the installs include the rate change's and the \
         in-place reloads').",
    );
    let mut per_sub_rss: Option<f64> = None;
    for &n in sizes {
        let mut kinds = vec![Kind::Linkshare, Kind::LinkshareRealtime];
        if n <= KERNEL_MAX {
            kinds.push(Kind::KernelHashed);
        }
        if n <= LINEAR_MAX {
            kinds.push(Kind::KernelLinear);
        }
        for kind in kinds {
            eprintln!("lab bench: scale: {} subscribers, {} ...", n, kind.name());
            if kind.is_linkshare() {
                if let Some(why) = too_big(n, per_sub_rss) {
                    t.row(skipped(n, kind, &why));
                    continue;
                }
            }
            match row(kind, n, secs) {
                Ok(r) => {
                    if kind == Kind::Linkshare {
                        per_sub_rss = r.rss.map(|b| b as f64 / n as f64);
                    }
                    t.row(r.cells(n, kind));
                }
                Err(e) => t.row(skipped(n, kind, &format!("failed: {e:#}"))),
            }
        }
    }
    Ok(t)
}

/// Why `n` subscribers would not fit in memory, from the last row's bytes per subscriber.
fn too_big(n: usize, per_sub: Option<f64>) -> Option<String> {
    let need = per_sub? * n as f64 * 1.2;
    let avail = meminfo("MemAvailable")? as f64;
    (need > avail - 2e9).then(|| {
        format!(
            "not run: would need ~{:.1} GB ({:.0} KB a subscriber), {:.1} GB available",
            need / 1e9,
            per_sub.unwrap_or(0.0) / 1e3,
            avail / 1e9
        )
    })
}

fn skipped(n: usize, kind: Kind, why: &str) -> Vec<String> {
    let mut cells = vec![n.to_string(), kind.name().to_string(), why.to_string()];
    cells.resize(12, "–".into());
    cells
}

/// One row's figures.
struct Row {
    setup: f64,
    rss: Option<u64>,
    kernel_mem: Option<(i64, i64)>,
    idle: (f64, f64),
    busy: (f64, f64),
    scrapes: String,
    stat_top: Option<Result<f64, String>>,
    cpu_ns: f64,
    change: Across,
    /// One subscriber removed, then added back, in place (linkshare).
    in_place: Option<(Across, Across)>,
    reload: Option<Across>,
    /// The install and take-over pieces after the reload (`loop_work`), when the shaper says.
    reload_work: Option<String>,
}

impl Row {
    fn cells(&self, n: usize, kind: Kind) -> Vec<String> {
        let mem = match (self.rss, self.kernel_mem) {
            (Some(b), _) => format!("RSS {:.0} MB", b as f64 / 1e6),
            // The change of each across the load: MemAvailable falls (its drop is negative),
            // Slab grows; other work on the machine can move either way.
            (None, Some((avail, slab))) => format!(
                "MemAvailable {:+.0} MB / Slab {:+.0} MB",
                -(avail as f64) / 1e6,
                slab as f64 / 1e6
            ),
            _ => "–".into(),
        };
        let pair = |p: (f64, f64)| format!("{:.0} / {:.0}", p.0, p.1);
        vec![
            n.to_string(),
            kind.name().to_string(),
            format!("{:.2}", self.setup),
            mem,
            pair(self.idle),
            pair(self.busy),
            self.scrapes.clone(),
            match &self.stat_top {
                Some(Ok(ms)) => format!("{ms:.0}"),
                Some(Err(e)) => e.clone(),
                None => "–".into(),
            },
            fmt_opt(Some(self.cpu_ns).filter(|x| x.is_finite()), 0),
            match &self.change.took {
                Ok(ms) => format!("{ms:.0}"),
                Err(e) => e.clone(),
            },
            format!("{} of {}", self.change.lost.0, self.change.lost.1),
            match &self.in_place {
                Some((gone, back)) => format!("{}; {}", gone.cell(), back.cell()),
                None => "–".into(),
            },
            match &self.reload {
                Some(r) => format!(
                    "{}{}",
                    r.cell(),
                    self.reload_work
                        .as_ref()
                        .map_or(String::new(), |w| format!("; {w}"))
                ),
                None => "–".into(),
            },
        ]
    }
}

impl Across {
    /// "command (ms) / longest RTT (ms) / lost of sent".
    fn cell(&self) -> String {
        format!(
            "{} / {:.1} / {} of {}",
            match &self.took {
                Ok(ms) => format!("{ms:.0}"),
                Err(e) => e.clone(),
            },
            self.max_rtt_ms,
            self.lost.0,
            self.lost.1
        )
    }
}

/// Build a testbed, start `kind` with `n` subscribers and measure one row.
fn row(kind: Kind, n: usize, secs: f64) -> anyhow::Result<Row> {
    let leaf = if kind.is_linkshare() { FQ_CODEL } else { PFIFO };
    let (policy_text, table) = scale_files(n, leaf);
    let t = Testbed::new()?;
    ip(&[
        "-n",
        &t.ns_a,
        "route",
        "add",
        "100.64.0.0/10",
        "via",
        &ADDR_C.to_string(),
    ])?;
    t.write_file(SUBSCRIBERS_CSV, &table)?;
    let file = t.write_file("policy.toml", &policy_text)?;
    let router: Box<dyn Router> = match kind {
        Kind::Linkshare => {
            let mut r = LinkshareRouter::new(args(&["--io", "packet", "--metrics", METRICS]))?;
            r.start_timeout = Duration::from_secs(900);
            Box::new(r)
        }
        Kind::LinkshareRealtime => {
            let mut r = LinkshareRouter::new(args(&[
                "--io",
                "packet",
                "--metrics",
                METRICS,
                "--realtime",
                "10",
            ]))?;
            r.start_timeout = Duration::from_secs(900);
            Box::new(r)
        }
        Kind::KernelHashed => Box::new(KernelRouter::htb(tc_script)),
        Kind::KernelLinear => Box::new(KernelRouter::htb(linear_script)),
    };
    let mem0 = (meminfo("MemAvailable"), meminfo("Slab"));
    let mut bed = Bed { t, pid: None };
    let t0 = Instant::now();
    bed.t.start_router(router, &file)?;
    bed.t.wait_reachable()?;
    let setup = t0.elapsed().as_secs_f64();
    bed.pid = bed.t.router().and_then(|r| r.pid());
    std::thread::sleep(Duration::from_millis(500));
    let rss = bed.pid.and_then(rss_bytes);
    let kernel_mem = match (kind, mem0, (meminfo("MemAvailable"), meminfo("Slab"))) {
        (k, _, _) if k.is_linkshare() => None,
        (_, (Some(a0), Some(s0)), (Some(a1), Some(s1))) => {
            Some((a0 as i64 - a1 as i64, s1 as i64 - s0 as i64))
        }
        _ => None,
    };
    let hosts = bed.hosts();
    let gap = Duration::from_millis(10);
    let wait = Duration::from_millis(500);
    let (_, mut idle) = probes(&hosts, 0, gap, secs, wait)?;
    let turns0 = kind.is_linkshare().then(|| loop_turns(&bed)).flatten();
    let stop = Arc::new(AtomicBool::new(false));
    let scraper = scrape_loop(&bed, kind, stop.clone())?;
    let (_, mut busy) = probes(&hosts, 0, gap, secs, wait)?;
    stop.store(true, Ordering::Relaxed);
    let mut scrapes = scraper
        .join()
        .map_err(|_| anyhow!("the scrape thread panicked"))?;
    if let (Some(a), Some(b)) = (turns0, loop_turns(&bed)) {
        scrapes.push_str(&format!(
            "; loop turns > 1 ms: {}, longest {:.2} → {:.2} ms",
            b.0.saturating_sub(a.0),
            a.1 as f64 / 1e6,
            b.1 as f64 / 1e6
        ));
        if let Some(w) = loop_work(&bed, &["copy"]) {
            scrapes.push_str(&format!("; {w}"));
        }
    }
    let stat_top = kind.is_linkshare().then(|| stat_top(&bed));
    let flood = Flood {
        payload: 18,
        ports: 1,
        flows: 1,
        rate_bps: None,
        tos: 0,
        hosts: Some((subscriber(1), SPREAD.min(n.saturating_sub(1)).max(1) as u32)),
    };
    let cpu = measure_flood(&bed, flood, secs)?;
    let change = rate_change(&bed, kind, &file, n, secs)?;
    let (in_place, reload) = if kind.is_linkshare() {
        let gone = reload_with(&bed, &file, n, false, None, secs)?;
        let back = reload_with(&bed, &file, n, true, None, secs)?;
        let other = policy_text.replace(
            "name = \"other\"
parent = \"uplink\"
",
            "name = \"other\"
parent = \"uplink\"
prio = 1
",
        );
        let full = reload_with(&bed, &file, n, true, Some(&other), secs)?;
        (Some((gone, back)), Some(full))
    } else {
        (None, None)
    };
    let reload_work = match reload {
        Some(_) => loop_work(&bed, &["install", "adopt"]),
        None => None,
    };
    Ok(Row {
        setup,
        rss,
        kernel_mem,
        idle: (quantile(&mut idle, 0.5), quantile(&mut idle, 0.99)),
        busy: (quantile(&mut busy, 0.5), quantile(&mut busy, 0.99)),
        scrapes,
        stat_top,
        cpu_ns: cpu.machine_ns_per_pkt(),
        change,
        in_place,
        reload,
        reload_work,
    })
}

/// Read the router's statistics back to back until `stop`; "N × S s" (count, mean time) or the
/// first failure.
fn scrape_loop(
    bed: &Bed,
    kind: Kind,
    stop: Arc<AtomicBool>,
) -> anyhow::Result<std::thread::JoinHandle<String>> {
    let (ns, dev) = (bed.t.ns_r.clone(), bed.t.dev_rc.clone());
    spawn_in_ns(&bed.t.ns_r, move || {
        let (mut n, mut total, mut err, mut size) = (0u32, 0.0f64, None, 0);
        while !stop.load(Ordering::Relaxed) {
            let t0 = Instant::now();
            let r = if kind.is_linkshare() {
                get_metrics()
            } else {
                Command::new("tc")
                    .args(["-n", &ns, "-s", "class", "show", "dev", &dev])
                    .output()
                    .map_err(|e| e.to_string())
                    .and_then(|o| {
                        o.status
                            .success()
                            .then_some(o.stdout.len())
                            .ok_or_else(|| String::from_utf8_lossy(&o.stderr).into_owned())
                    })
            };
            match r {
                Ok(len) => {
                    size = len;
                    n += 1;
                    total += t0.elapsed().as_secs_f64();
                }
                Err(e) => {
                    err.get_or_insert(e);
                    std::thread::sleep(Duration::from_millis(100));
                }
            }
        }
        match (n, err) {
            (0, Some(e)) => format!("failed: {}", short(&e)),
            (n, _) => format!(
                "{n} × {:.2} s, {:.1} MB",
                total / f64::from(n.max(1)),
                size as f64 / 1e6
            ),
        }
    })
}

/// One GET /metrics of every class; the response's length, or what went wrong.
fn get_metrics() -> Result<usize, String> {
    let mut s = TcpStream::connect(METRICS).map_err(|e| e.to_string())?;
    s.set_read_timeout(Some(Duration::from_secs(60)))
        .map_err(|e| e.to_string())?;
    s.write_all(b"GET /metrics?classes=all HTTP/1.0\r\nHost: lab\r\n\r\n")
        .map_err(|e| e.to_string())?;
    let mut body = Vec::new();
    s.read_to_end(&mut body).map_err(|e| e.to_string())?;
    let head = String::from_utf8_lossy(&body[..body.len().min(64)]).into_owned();
    if head.starts_with("HTTP/1.1 200") || head.starts_with("HTTP/1.0 200") {
        Ok(body.len())
    } else {
        Err(head.lines().next().unwrap_or("no reply").to_string())
    }
}

fn short(s: &str) -> String {
    let s = s.lines().next().unwrap_or("").trim();
    if s.chars().count() > 70 {
        format!("{}…", s.chars().take(70).collect::<String>())
    } else {
        s.to_string()
    }
}

/// `stat --json --top 1` of the shaper under test.
fn stat_json(bed: &Bed) -> Option<serde_json::Value> {
    let exe = std::env::current_exe().ok()?;
    let out = Command::new(&exe)
        .args(["stat", "--json", "--top", "1", "--control"])
        .arg(bed.t.dir.join("ctl.sock"))
        .output()
        .ok()?;
    serde_json::from_slice(&out.stdout).ok()
}

/// The shaper's own loop turns so far, from `stat --json` (router/src/turns.rs): how many took
/// over 1 ms, and the longest (ns).
fn loop_turns(bed: &Bed) -> Option<(u64, u64)> {
    let v = stat_json(bed)?;
    Some((
        v["long_turns"].as_u64()?,
        v["loop_turn_ns"]["max"].as_u64()?,
    ))
}

/// The loop's work besides forwarding of each of `kinds` so far (`stat`'s `loop_work`,
/// router/src/background.rs): "adopt: N pieces, longest X µs (CPU Y µs)" each; `None` from a
/// shaper that does not report it.
fn loop_work(bed: &Bed, kinds: &[&str]) -> Option<String> {
    let v = stat_json(bed)?;
    let one = |k: &str| {
        let w = &v["loop_work"][k];
        Some(format!(
            "{k}: {} pieces, longest {:.0} µs (CPU {:.0} µs), {} preempted, {} blocked",
            w["pieces"].as_u64()?,
            w["wall_ns"]["max"].as_u64()? as f64 / 1e3,
            w["cpu_ns"]["max"].as_u64()? as f64 / 1e3,
            w["preempted"].as_u64()?,
            w["blocked"].as_u64()?
        ))
    };
    let parts: Option<Vec<String>> = kinds.iter().map(|k| one(k)).collect();
    Some(parts?.join("; "))
}

/// `linkshare stat --top 20` against B's control socket, 5 times: the median time in ms, or
/// the first failure.
fn stat_top(bed: &Bed) -> Result<f64, String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let ctl = bed.t.dir.join("ctl.sock");
    let mut ms = Vec::new();
    for _ in 0..5 {
        let t0 = Instant::now();
        let out = Command::new(&exe)
            .args(["stat", "--top", "20", "--control"])
            .arg(&ctl)
            .output()
            .map_err(|e| e.to_string())?;
        if !out.status.success() {
            return Err(format!(
                "failed: {}",
                short(&String::from_utf8_lossy(&out.stderr))
            ));
        }
        ms.push(t0.elapsed().as_secs_f64() * 1e3);
    }
    Ok(quantile(&mut ms, 0.5))
}

/// Change subscriber 0's rate while echo probes run every millisecond: the command's time (or
/// its error), (probes lost, probes sent) and the longest RTT (ms).
fn rate_change(
    bed: &Bed,
    kind: Kind,
    policy: &std::path::Path,
    n: usize,
    secs: f64,
) -> anyhow::Result<Across> {
    let cmd = change_command(bed, kind, policy, n)?;
    across(bed, &cmd, secs)
}

/// A reload (linkshare only): the subscriber table with its last subscriber (`all`) or without
/// (one more would not fit its site's guarantee), and the policy `text` when given (else the
/// file stays), and `linkshare reload FILE` installs it while echo probes run every
/// millisecond. The longest RTT across it is the longest forwarding pause (plus one RTT).
fn reload_with(
    bed: &Bed,
    policy: &std::path::Path,
    n: usize,
    all: bool,
    text: Option<&str>,
    secs: f64,
) -> anyhow::Result<Across> {
    let (_, table) = scale_files(n, FQ_CODEL);
    let mut rows: Vec<&str> = table.lines().collect();
    if rows.len() > 2 && !all {
        rows.pop();
    }
    bed.t
        .write_file(SUBSCRIBERS_CSV, &(rows.join("\n") + "\n"))?;
    if let Some(t) = text {
        bed.t.write_file("policy.toml", t)?;
    }
    let exe = std::env::current_exe().context("cannot find the linkshare executable")?;
    let cmd = vec![
        exe.display().to_string(),
        "reload".into(),
        policy.display().to_string(),
        "--control".into(),
        bed.t.dir.join("ctl.sock").display().to_string(),
    ];
    across(bed, &cmd, secs)
}

/// What a command did to the traffic across it.
struct Across {
    /// How long the command took (ms), or its error.
    took: Result<f64, String>,
    /// (probes lost, probes sent).
    lost: (u64, u64),
    /// The longest RTT of the probes answered (ms).
    max_rtt_ms: f64,
}

/// Run `cmd` while echo probes run every millisecond, from a third of `secs` (0.2-1 s) before
/// it to twice that after.
fn across(bed: &Bed, cmd: &[String], secs: f64) -> anyhow::Result<Across> {
    let hosts = bed.hosts();
    let before = (secs / 3.0).clamp(0.2, 1.0);
    let probing = std::thread::spawn(move || {
        probes(
            &hosts,
            0,
            Duration::from_millis(1),
            before * 3.0,
            Duration::from_millis(200),
        )
    });
    std::thread::sleep(Duration::from_secs_f64(before));
    let t0 = Instant::now();
    let out = Command::new(&cmd[0])
        .args(&cmd[1..])
        .output()
        .with_context(|| format!("running {}", cmd[0]))?;
    let took = t0.elapsed().as_secs_f64() * 1e3;
    let (sent, rtts) = probing
        .join()
        .map_err(|_| anyhow!("the probe thread panicked"))??;
    let took = if out.status.success() {
        Ok(took)
    } else {
        let mut e = String::from_utf8_lossy(&out.stderr).into_owned();
        if e.trim().is_empty() {
            e = String::from_utf8_lossy(&out.stdout).into_owned();
        }
        Err(format!("failed: {}", short(&e)))
    };
    Ok(Across {
        took,
        lost: (sent - rtts.len() as u64, sent),
        max_rtt_ms: rtts.iter().copied().fold(0.0, f64::max) / 1e3,
    })
}

/// The command that changes subscriber 0's rate on this router (of `n` subscribers).
fn change_command(
    bed: &Bed,
    kind: Kind,
    policy: &std::path::Path,
    n: usize,
) -> anyhow::Result<Vec<String>> {
    if kind.is_linkshare() {
        let exe = std::env::current_exe().context("cannot find the linkshare executable")?;
        let ctl = bed.t.dir.join("ctl.sock");
        return Ok(vec![
            exe.display().to_string(),
            "class".into(),
            "change".into(),
            CHANGED.into(),
            "--rate".into(),
            format!("{}bit", new_rate(n)),
            "--control".into(),
            ctl.display().to_string(),
        ]);
    }
    // The kernel: the exported `class add` line of sub0, as `class change` with the new rate.
    let p = Policy::load(policy).map_err(|e| anyhow!("{e:?}"))?;
    let script = tc_script(&p, &bed.t.dev_rc)?;
    let tail = format!("  # {CHANGED}");
    let line = script
        .lines()
        .find(|l| l.starts_with("class add") && l.ends_with(&tail))
        .ok_or_else(|| anyhow!("no class line for {CHANGED} in the export"))?;
    let words: Vec<String> = line
        .trim_end_matches(&tail)
        .split_whitespace()
        .map(String::from)
        .collect();
    let mut cmd = vec!["tc".to_string(), "-n".into(), bed.t.ns_r.clone()];
    let mut it = words.into_iter();
    while let Some(w) = it.next() {
        match w.as_str() {
            "add" => cmd.push("change".into()),
            "rate" => {
                cmd.push(w);
                it.next();
                cmd.push(format!("{}bit", new_rate(n)));
            }
            _ => cmd.push(w),
        }
    }
    Ok(cmd)
}

/// A field of /proc/meminfo in bytes.
fn meminfo(field: &str) -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    text.lines()
        .find(|l| l.split(':').next() == Some(field))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|kb| kb.parse::<u64>().ok())
        .map(|kb| kb * 1024)
}

/// Resident set of process `pid`, bytes.
fn rss_bytes(pid: u32) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    text.lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|kb| kb.parse::<u64>().ok())
        .map(|kb| kb * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The bench's policy and table, written as the bench writes them, checked as `run` reads
    /// them.
    fn load(n: usize) -> Policy {
        let dir = std::env::temp_dir().join(format!("ls-scale-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let (text, table) = scale_files(n, FQ_CODEL);
        std::fs::write(dir.join(SUBSCRIBERS_CSV), table).expect("table");
        let file = dir.join("policy.toml");
        std::fs::write(&file, text).expect("policy");
        let p = Policy::load(&file).unwrap_or_else(|e| panic!("{n}: {e:?}"));
        let _ = std::fs::remove_dir_all(&dir);
        p
    }

    #[test]
    fn the_generated_policy_is_valid_and_has_one_filter_per_subscriber() {
        for n in [1usize, 30, 1000] {
            let p = load(n);
            assert_eq!(p.classes().len(), n + 27, "{n}");
            assert_eq!(p.filters().len(), n, "{n}");
            assert_eq!(p.filters()[0].class, "sub0");
        }
        assert_eq!(subscriber(0), ADDR_C);
        // The change the bench makes is one the shaper accepts (a higher rate would not fit
        // the full site).
        for n in [30usize, 1000] {
            let mut p = load(n);
            let rate = linkshare_core::units::Rate(new_rate(n));
            p.change_rates(CHANGED, Some(rate), None)
                .unwrap_or_else(|e| panic!("{n}: {e}"));
            let double = linkshare_core::units::Rate(2 * subscriber_rate(n));
            assert!(p.change_rates(CHANGED, Some(double), None).is_err(), "{n}");
        }
        assert_eq!(subscriber(258), Ipv4Addr::new(100, 64, 1, 2));
    }
}
