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

use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddrV4, TcpListener, TcpStream, UdpSocket};
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context};
use serde_json::{json, Value};

use crate::testbed::{in_ns, interrupted, KernelRouter, LinkshareRouter, Router, Testbed};

/// The measurements, by the name `--only` takes.
const SUITES: &[(&str, &str)] = &[
    ("throughput", "seed 000 Table 1: bulk TCP throughput, shaper on and off"),
    ("rr", "seed 000 Tables 2-3: UDP request/response transactions per second and round trip"),
    ("forwarding", "seed 001 Table 4: small-packet forwarding rate, FIFO against the schedulers"),
    ("classes", "seed 001 Table 5 and issue 6 (c): forwarding rate and CPU per packet against the number of classes"),
    ("sfq", "seed 004: forwarded packets per second under a small-packet flood, FIFO, SFQ, HTB+SFQ"),
    ("accuracy", "issue 6 (a): rate accuracy per class for 64/512/1500-byte packets at 1, 10, 100 Mbit/s"),
    ("priority", "issue 6 (b): priority-class RTT under a saturating bulk flow"),
];

/// What `linkshare lab bench` measures (the CLI's options, parsed).
#[derive(Clone, Debug)]
pub struct BenchOptions {
    /// Seconds of traffic per figure
    pub seconds: f64,
    /// Run only these measurements (comma separated): throughput, rr, forwarding, classes, sfq,
    /// accuracy, priority
    pub only: Vec<String>,
    /// Also write every figure as JSON to this file
    pub json: Option<PathBuf>,
    /// Measure each packet-flood figure this many times and report the median
    pub repeat: usize,
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
            "sfq" => sfq_flood(secs)?,
            "accuracy" => accuracy(secs)?,
            "priority" => priority(secs)?,
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
struct Table {
    head: Vec<String>,
    rows: Vec<Vec<String>>,
    note: String,
}

impl Table {
    fn new(head: &[&str], note: &str) -> Table {
        Table {
            head: head.iter().map(|s| s.to_string()).collect(),
            rows: Vec::new(),
            note: note.to_string(),
        }
    }
    fn row(&mut self, cells: Vec<String>) {
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

fn machine_json() -> Value {
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

fn machine_markdown() -> String {
    let m = machine_json();
    format!(
        "Machine: {} ({} cores), Linux {}; testbed: namespaces A → B → C over veth pairs, \
         offloads off; `linkshare lab bench` (release build).\n",
        m["cpu"].as_str().unwrap_or("?"),
        m["cores"],
        m["kernel"].as_str().unwrap_or("?")
    )
}

/// The three ways router B forwards.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Via {
    /// A Linux bridge, no shaping.
    None,
    /// A Linux bridge with the kernel's HTB (from `export tc`) on the port towards C.
    Kernel,
    /// `linkshare run --io packet` between the two veths (AF_PACKET rings).
    Linkshare,
    /// `linkshare run --io packet --rx-ring v3` (block receive ring).
    LinkshareV3,
    /// `linkshare run --io xdp` (AF_XDP; native mode on veth, copy transmit).
    LinkshareXdp,
    /// `linkshare run --io xdp-generic` (AF_XDP on generic, skb-mode XDP).
    LinkshareXdpGeneric,
}

impl Via {
    fn name(self) -> &'static str {
        match self {
            Via::None => "no shaper (bridge)",
            Via::Kernel => "kernel HTB",
            Via::Linkshare => "linkshare",
            Via::LinkshareV3 => "linkshare --rx-ring v3",
            Via::LinkshareXdp => "linkshare --io xdp",
            Via::LinkshareXdpGeneric => "linkshare --io xdp-generic",
        }
    }
}

/// The two end hosts of a testbed (names only, so threads can share them).
#[derive(Clone)]
struct Hosts {
    a: String,
    c: String,
}

impl Hosts {
    fn ns_a(&self) -> &str {
        &self.a
    }
    fn ns_c(&self) -> &str {
        &self.c
    }
    fn addr_c(&self) -> Ipv4Addr {
        crate::testbed::ADDR_C
    }
}

/// A testbed with its router started, and the router's process id.
struct Bed {
    t: Testbed,
    pid: Option<u32>,
}

impl Bed {
    fn ns_a(&self) -> &str {
        &self.t.ns_a
    }
    fn ns_c(&self) -> &str {
        &self.t.ns_c
    }
    fn dev_c(&self) -> &str {
        &self.t.dev_c
    }
    fn addr_c(&self) -> Ipv4Addr {
        crate::testbed::ADDR_C
    }
    fn router_pid(&self) -> Option<u32> {
        self.pid
    }
    fn hosts(&self) -> Hosts {
        Hosts {
            a: self.t.ns_a.clone(),
            c: self.t.ns_c.clone(),
        }
    }
}

/// A testbed whose router forwards `via`, with `policy` (TOML) where it shapes.
fn bed(via: Via, policy: &str) -> anyhow::Result<Bed> {
    if interrupted() {
        bail!("interrupted");
    }
    let mut t = Testbed::new()?;
    let router: Box<dyn Router> = match via {
        Via::None => Box::new(KernelRouter::bridge()),
        Via::Kernel => Box::new(KernelRouter::htb(linkshare_interop::tc::export::tc_script)),
        Via::Linkshare => Box::new(LinkshareRouter::new(args(&["--io", "packet"]))?),
        Via::LinkshareV3 => Box::new(LinkshareRouter::new(args(&[
            "--io",
            "packet",
            "--rx-ring",
            "v3",
        ]))?),
        Via::LinkshareXdp => Box::new(LinkshareRouter::new(args(&["--io", "xdp"]))?),
        Via::LinkshareXdpGeneric => Box::new(LinkshareRouter::new(args(&["--io", "xdp-generic"]))?),
    };
    let file = t.write_file("policy.toml", policy)?;
    t.start_router(router, &file)?;
    t.wait_reachable()?;
    let pid = t.router().and_then(|r| r.pid());
    Ok(Bed { t, pid })
}

fn args(a: &[&str]) -> Vec<String> {
    a.iter().map(|s| s.to_string()).collect()
}

/// A one-class HTB policy of rate `rate` (tc units) with leaf `leaf`.
fn one_class(rate: &str, leaf: &str) -> String {
    format!(
        "qdisc = \"htb\"\ndefault = \"all\"\n[[class]]\nname = \"all\"\nrate = \"{rate}\"\nleaf = {leaf}\n"
    )
}

/// An HTB policy with `n` leaf classes under a root of `rate`, class `k` matching UDP destination
/// port `BASE_PORT + k`.
fn n_classes(kind: &str, n: usize, rate_mbit: u64, leaf: &str) -> String {
    let mut s = format!(
        "qdisc = \"{kind}\"\ndefault = \"c0\"\n[[class]]\nname = \"root\"\nrate = \"{rate_mbit}mbit\"\n"
    );
    let each = rate_mbit * 1_000_000 / n as u64;
    for k in 0..n {
        s.push_str(&format!(
            "[[class]]\nname = \"c{k}\"\nparent = \"root\"\nrate = \"{each}bit\"\n"
        ));
        if kind == "htb" {
            s.push_str(&format!("ceil = \"{rate_mbit}mbit\"\n"));
        } else {
            s.push_str("borrow = true\n");
        }
        s.push_str(&format!("leaf = {leaf}\n"));
    }
    for k in 0..n {
        s.push_str(&format!(
            "[[filter]]\nclass = \"c{k}\"\nprotocol = \"udp\"\ndst_port = \"{}\"\n",
            BASE_PORT as usize + k
        ));
    }
    s
}

const BASE_PORT: u16 = 9000;

/// CPU time (user + system) of process `pid` in seconds.
fn proc_cpu(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name, which is in parentheses and may contain spaces.
    let rest = &stat[stat.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = f.get(11)?.parse::<f64>().ok()? + f.get(12)?.parse::<f64>().ok()?;
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    Some(ticks / hz)
}

/// Busy CPU time of the whole machine in seconds (all cores: user, system, irq, softirq).
fn machine_busy() -> f64 {
    let text = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let Some(line) = text.lines().next() else {
        return 0.0;
    };
    let v: Vec<f64> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|x| x.parse().ok())
        .collect();
    // user nice system idle iowait irq softirq steal
    let busy: f64 = v
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != 3 && *i != 4 && *i < 8)
        .map(|(_, x)| x)
        .sum();
    // SAFETY: sysconf has no preconditions.
    busy / unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64
}

/// Counters of one interface in a namespace: (rx packets, rx bytes).
fn rx_counters(ns: &str, dev: &str) -> anyhow::Result<(u64, u64)> {
    let out = Command::new("ip")
        .args(["-n", ns, "-s", "-j", "link", "show", "dev", dev])
        .output()
        .context("running ip -s link")?;
    let v: Value = serde_json::from_slice(&out.stdout)
        .with_context(|| format!("ip -s -j link show dev {dev}: not JSON"))?;
    let rx = &v[0]["stats64"]["rx"];
    match (rx["packets"].as_u64(), rx["bytes"].as_u64()) {
        (Some(p), Some(b)) => Ok((p, b)),
        _ => bail!("no rx counters for {dev} in {ns}: {v}"),
    }
}

/// Send UDP datagrams of `payload` bytes from A to C's ports `BASE_PORT..BASE_PORT+ports`
/// (round robin) for `secs`, as fast as possible or paced to `rate_bps` of frame bits, using
/// sendmmsg batches. Source ports cycle over `flows`. Returns the frames sent.
#[derive(Clone)]
struct Flood {
    payload: usize,
    ports: u16,
    flows: u16,
    rate_bps: Option<f64>,
    tos: u8,
}

/// Ethernet + IPv4 + UDP header bytes in front of a UDP payload.
const UDP_OVERHEAD: usize = 14 + 20 + 8;

fn flood(bed: &Bed, f: Flood, secs: f64) -> anyhow::Result<std::thread::JoinHandle<u64>> {
    let a = bed.ns_a().to_string();
    let dst = bed.addr_c();
    Ok(std::thread::spawn(move || {
        in_ns(&a, move || flood_here(&f, dst, secs)).unwrap_or(0)
    }))
}

fn flood_here(f: &Flood, dst: Ipv4Addr, secs: f64) -> u64 {
    let socks: Vec<UdpSocket> = (0..f.flows.max(1))
        .filter_map(|_| UdpSocket::bind("0.0.0.0:0").ok())
        .collect();
    if socks.is_empty() {
        return 0;
    }
    for s in &socks {
        let _ = set_tos(s, f.tos);
    }
    const BATCH: usize = 32;
    let buf = vec![0x42u8; f.payload];
    let addrs: Vec<libc::sockaddr_in> = (0..f.ports.max(1))
        .map(|k| libc::sockaddr_in {
            sin_family: libc::AF_INET as libc::sa_family_t,
            sin_port: (BASE_PORT + k).to_be(),
            sin_addr: libc::in_addr {
                s_addr: u32::from(dst).to_be(),
            },
            sin_zero: [0; 8],
        })
        .collect();
    let mut iov = libc::iovec {
        iov_base: buf.as_ptr() as *mut libc::c_void,
        iov_len: buf.len(),
    };
    let frame_bits = ((f.payload + UDP_OVERHEAD) * 8) as f64;
    let t0 = Instant::now();
    let mut sent = 0u64;
    let mut next_port = 0usize;
    let mut sock = 0usize;
    while t0.elapsed().as_secs_f64() < secs && !interrupted() {
        if let Some(rate) = f.rate_bps {
            let due = sent as f64 * frame_bits / rate;
            let now = t0.elapsed().as_secs_f64();
            if due > now {
                let wait = due - now;
                if wait > 200e-6 {
                    std::thread::sleep(Duration::from_secs_f64(wait - 100e-6));
                }
                continue;
            }
        }
        let n = match f.rate_bps {
            // Paced: one small batch per slot so the pacing stays smooth.
            Some(rate) if rate < 20e6 => 1,
            _ => BATCH,
        };
        let mut hdrs: Vec<libc::mmsghdr> = (0..n)
            .map(|i| {
                let a = &addrs[(next_port + i) % addrs.len()];
                // SAFETY: all-zero is a valid msghdr.
                let mut h: libc::mmsghdr = unsafe { std::mem::zeroed() };
                h.msg_hdr.msg_name = a as *const libc::sockaddr_in as *mut libc::c_void;
                h.msg_hdr.msg_namelen = std::mem::size_of::<libc::sockaddr_in>() as u32;
                h.msg_hdr.msg_iov = &mut iov;
                h.msg_hdr.msg_iovlen = 1;
                h
            })
            .collect();
        let s = &socks[sock % socks.len()];
        sock += 1;
        // SAFETY: `hdrs` point at live addresses and one live iovec over `buf`.
        let r = unsafe { libc::sendmmsg(s.as_raw_fd(), hdrs.as_mut_ptr(), n as u32, 0) };
        if r > 0 {
            sent += r as u64;
            next_port = (next_port + r as usize) % addrs.len();
        } else {
            // Full socket buffer or ENOBUFS: yield and go on.
            std::thread::yield_now();
        }
    }
    sent
}

/// UDP sockets in C on the flood's ports that never read (so no ICMP port-unreachable goes
/// back); dropped when the returned guard goes.
fn sinks(bed: &Bed, ports: u16) -> anyhow::Result<Vec<UdpSocket>> {
    let c = bed.ns_c().to_string();
    let ip = bed.addr_c();
    in_ns(&c, move || {
        (0..ports.max(1))
            .map(|k| UdpSocket::bind(SocketAddrV4::new(ip, BASE_PORT + k)))
            .collect::<std::io::Result<Vec<_>>>()
    })?
    .context("binding the sink sockets in C")
}

/// Frames and frame bytes C received while `f` ran; CPU seconds of the shaper process and of
/// the machine.
struct Measured {
    sent: u64,
    frames: u64,
    bytes: u64,
    secs: f64,
    shaper_cpu: Option<f64>,
    machine_cpu: f64,
}

impl Measured {
    fn kpps(&self) -> f64 {
        self.frames as f64 / self.secs / 1e3
    }
    fn mbit(&self) -> f64 {
        self.bytes as f64 * 8.0 / self.secs / 1e6
    }
    fn shaper_ns_per_pkt(&self) -> Option<f64> {
        self.shaper_cpu
            .filter(|_| self.frames > 0)
            .map(|c| c * 1e9 / self.frames as f64)
    }
    fn machine_ns_per_pkt(&self) -> f64 {
        if self.frames == 0 {
            return f64::NAN;
        }
        self.machine_cpu * 1e9 / self.frames as f64
    }
}

/// Run a flood through `bed` and count what arrives at C over the middle of the run (the
/// first 0.3 s are warm-up).
fn measure_flood(bed: &Bed, f: Flood, secs: f64) -> anyhow::Result<Measured> {
    let n = REPEAT.load(std::sync::atomic::Ordering::Relaxed).max(1);
    let mut runs = Vec::with_capacity(n);
    for _ in 0..n {
        runs.push(measure_flood_once(bed, f.clone(), secs)?);
    }
    runs.sort_by_key(|m| m.frames);
    Ok(runs.swap_remove(n / 2))
}

/// How many times each flood figure is measured (the median is reported).
static REPEAT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(3);

fn measure_flood_once(bed: &Bed, f: Flood, secs: f64) -> anyhow::Result<Measured> {
    let _sinks = sinks(bed, f.ports)?;
    let warm = 0.3;
    let h = flood(bed, f, secs + warm)?;
    std::thread::sleep(Duration::from_secs_f64(warm));
    let (p0, b0) = rx_counters(bed.ns_c(), bed.dev_c())?;
    let c0 = bed.router_pid().and_then(proc_cpu);
    let m0 = machine_busy();
    let t0 = Instant::now();
    std::thread::sleep(Duration::from_secs_f64(secs));
    let (p1, b1) = rx_counters(bed.ns_c(), bed.dev_c())?;
    let el = t0.elapsed().as_secs_f64();
    let c1 = bed.router_pid().and_then(proc_cpu);
    let m1 = machine_busy();
    let sent = h
        .join()
        .map_err(|_| anyhow!("the traffic thread panicked"))?;
    Ok(Measured {
        sent,
        frames: p1 - p0,
        bytes: b1 - b0,
        secs: el,
        shaper_cpu: c0.zip(c1).map(|(a, b)| b - a),
        machine_cpu: m1 - m0,
    })
}

fn fmt_opt(v: Option<f64>, digits: usize) -> String {
    v.map(|x| format!("{x:.digits$}"))
        .unwrap_or_else(|| "–".into())
}

// ---------------------------------------------------------------------------------------------
// The measurements

/// A policy that never limits: one class far above what veths forward.
fn unlimited(leaf: &str) -> String {
    one_class("10gbit", leaf)
}

const PFIFO: &str = "{ type = \"pfifo\", limit = 10000 }";

fn throughput(secs: f64) -> anyhow::Result<Table> {
    let mut t = Table::new(
        &["router B", "TCP goodput (Mbit/s)", "relative to no shaper"],
        "One bulk TCP connection A → C (kernel sockets, default buffers), 1500-byte MTU; the \
         shapers' policies never limit (10 Gbit/s), so only their forwarding cost shows; the CBQ \
         row has three classes like seed 000 Table 1, which compares CBQ on and off.",
    );
    let mut base = None;
    let cbq3 = n_classes("cbq", 3, 10_000, PFIFO);
    let rows: [(&str, Via, String); 7] = [
        (Via::None.name(), Via::None, String::new()),
        ("kernel HTB, 1 class", Via::Kernel, unlimited(PFIFO)),
        ("linkshare HTB, 1 class", Via::Linkshare, unlimited(PFIFO)),
        (
            "linkshare HTB, 1 class, --io xdp",
            Via::LinkshareXdp,
            unlimited(PFIFO),
        ),
        (
            "linkshare HTB, 1 class, --io xdp-generic",
            Via::LinkshareXdpGeneric,
            unlimited(PFIFO),
        ),
        ("linkshare CBQ, 3 classes", Via::Linkshare, cbq3),
        (
            "linkshare HTB, --rx-ring v3",
            Via::LinkshareV3,
            unlimited(PFIFO),
        ),
    ];
    for (label, via, policy) in rows {
        let b = bed(via, &policy)?;
        let g = tcp_goodput(&b.hosts(), secs)? / 1e6;
        let rel = base.map(|x: f64| format!("{:.0} %", 100.0 * g / x));
        base.get_or_insert(g);
        t.row(vec![
            label.into(),
            format!("{g:.0}"),
            rel.unwrap_or_else(|| "100 %".into()),
        ]);
    }
    Ok(t)
}

/// Goodput of one bulk TCP stream A → C in bit/s, after a 0.5 s warm-up.
fn tcp_goodput(bed: &Hosts, secs: f64) -> anyhow::Result<f64> {
    let c = bed.ns_c().to_string();
    let ip = bed.addr_c();
    let listener = in_ns(&c, move || TcpListener::bind(SocketAddrV4::new(ip, 5201)))??;
    let server = std::thread::spawn(move || -> f64 {
        let Ok((mut s, _)) = listener.accept() else {
            return 0.0;
        };
        let mut buf = vec![0u8; 1 << 16];
        let t0 = Instant::now();
        let (mut counted, mut start) = (0u64, None);
        while let Ok(n) = s.read(&mut buf) {
            if n == 0 {
                break;
            }
            if t0.elapsed() >= Duration::from_millis(500) {
                start.get_or_insert_with(Instant::now);
                counted += n as u64;
            }
        }
        let el = start
            .map(|s: Instant| s.elapsed().as_secs_f64())
            .unwrap_or(1.0);
        counted as f64 * 8.0 / el
    });
    let a = bed.ns_a().to_string();
    in_ns(&a, move || -> std::io::Result<()> {
        let mut s = TcpStream::connect_timeout(
            &std::net::SocketAddr::V4(SocketAddrV4::new(ip, 5201)),
            Duration::from_secs(3),
        )?;
        let buf = vec![0x5au8; 1 << 16];
        let t0 = Instant::now();
        while t0.elapsed().as_secs_f64() < secs + 0.5 {
            s.write_all(&buf)?;
        }
        Ok(())
    })?
    .context("TCP sender A → C")?;
    server
        .join()
        .map_err(|_| anyhow!("the TCP receiver panicked"))
}

/// Set the TOS byte of a UDP socket's packets.
fn set_tos(s: &UdpSocket, tos: u8) -> std::io::Result<()> {
    crate::traffic::setsockopt_int(s.as_raw_fd(), libc::IPPROTO_IP, libc::IP_TOS, tos.into())
}

/// A UDP server in namespace C that answers every datagram: with `reply` bytes, or (`None`) by
/// echoing it. Stops when dropped.
struct Responder {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Responder {
    fn start(ns: &str, addr: SocketAddrV4, reply: Option<usize>) -> anyhow::Result<Responder> {
        let sock = in_ns(ns, move || UdpSocket::bind(addr))??;
        sock.set_read_timeout(Some(Duration::from_millis(200)))?;
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut buf = vec![0u8; 65536];
            let fixed = reply.map(|n| vec![0u8; n]);
            while !flag.load(std::sync::atomic::Ordering::Relaxed) {
                if let Ok((n, from)) = sock.recv_from(&mut buf) {
                    let out = fixed.as_deref().unwrap_or(&buf[..n]);
                    let _ = sock.send_to(out, from);
                }
            }
        });
        Ok(Responder {
            stop,
            thread: Some(thread),
        })
    }
}

impl Drop for Responder {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Transactions per second of a UDP request/response loop A ↔ C with the given sizes.
fn udp_rr(bed: &Hosts, req: usize, resp: usize, secs: f64) -> anyhow::Result<f64> {
    let c = bed.ns_c().to_string();
    let ip = bed.addr_c();
    let _server = Responder::start(&c, SocketAddrV4::new(ip, 5202), Some(resp))?;
    let a = bed.ns_a().to_string();
    let n = in_ns(&a, move || -> std::io::Result<f64> {
        let s = UdpSocket::bind("0.0.0.0:0")?;
        s.connect(SocketAddrV4::new(ip, 5202))?;
        s.set_read_timeout(Some(Duration::from_millis(100)))?;
        let msg = vec![0u8; req];
        let mut buf = vec![0u8; 65536];
        // Warm up (ARP, caches), then count.
        let mut run = |d: f64| -> std::io::Result<(u64, f64)> {
            let t0 = Instant::now();
            let mut n = 0;
            while t0.elapsed().as_secs_f64() < d {
                s.send(&msg)?;
                if s.recv(&mut buf).is_ok() {
                    n += 1;
                }
            }
            Ok((n, t0.elapsed().as_secs_f64()))
        };
        run(0.3)?;
        let (n, el) = run(secs)?;
        Ok(n as f64 / el)
    })?;
    n.context("UDP request/response A ↔ C")
}

fn request_response(secs: f64) -> anyhow::Result<Table> {
    const SIZES: [(usize, usize); 4] = [(1, 1), (64, 64), (1024, 64), (8192, 64)];
    let mut t = Table::new(
        &[
            "request/response (bytes)",
            "no shaper: trans/s (RTT µs)",
            "kernel HTB: trans/s (RTT µs)",
            "linkshare HTB: trans/s (RTT µs)",
            "linkshare CBQ, 3 classes: trans/s (RTT µs)",
            "CBQ overhead per transaction (µs)",
            "linkshare HTB --rx-ring v3: trans/s (RTT µs)",
            "linkshare HTB --io xdp: trans/s (RTT µs)",
        ],
        "One UDP request/response at a time A ↔ C (netperf UDP_RR style); RTT = 1 / rate. Both \
         directions cross router B: the request through the shaped direction, the response \
         through the reverse one (unshaped, but forwarded by the same bridge or linkshare \
         process). 8192-byte requests are IP fragments. Seed 000 Tables 2-3 found about 10 µs per \
         packet for CBQ in 1997.",
    );
    let mut cols: Vec<Vec<f64>> = Vec::new();
    let cbq3 = n_classes("cbq", 3, 10_000, PFIFO);
    let cols_spec: [(Via, String); 6] = [
        (Via::None, String::new()),
        (Via::Kernel, unlimited(PFIFO)),
        (Via::Linkshare, unlimited(PFIFO)),
        (Via::Linkshare, cbq3),
        (Via::LinkshareV3, unlimited(PFIFO)),
        (Via::LinkshareXdp, unlimited(PFIFO)),
    ];
    for (via, policy) in cols_spec {
        let b = bed(via, &policy)?;
        let mut col = Vec::new();
        for (q, r) in SIZES {
            col.push(udp_rr(&b.hosts(), q, r, secs)?);
        }
        cols.push(col);
    }
    for (i, (q, r)) in SIZES.iter().enumerate() {
        let cell = |tps: f64| format!("{tps:.0} ({:.1})", 1e6 / tps);
        let over = 1e6 / cols[3][i] - 1e6 / cols[0][i];
        t.row(vec![
            format!("{q}/{r}"),
            cell(cols[0][i]),
            cell(cols[1][i]),
            cell(cols[2][i]),
            cell(cols[3][i]),
            format!("{over:.1}"),
            cell(cols[4][i]),
            cell(cols[5][i]),
        ]);
    }
    Ok(t)
}

fn small_flood(ports: u16, flows: u16) -> Flood {
    Flood {
        payload: 18, // 60-byte frames, the Ethernet minimum without FCS
        ports,
        flows,
        rate_bps: None,
        tos: 0,
    }
}

fn forwarding(secs: f64) -> anyhow::Result<Table> {
    let mut t = Table::new(
        &[
            "router B",
            "offered (kpps)",
            "forwarded (kpps)",
            "shaper CPU (ns/pkt)",
            "machine CPU (ns/pkt)",
        ],
        "60-byte frames from one UDP sender as fast as it can (sendmmsg), counted at C's interface, median of `--repeat` runs; policies never limit (10 Gbit/s). Shaper CPU is the linkshare process's \
         user + system time per forwarded packet; machine CPU is all busy time of the machine \
         (sender, bridge or shaper, receiver) per forwarded packet. Seed 001 Table 4 compares \
         FIFO with CBQ on a 1998 PC router.",
    );
    let rows: Vec<(&str, Via, String)> = vec![
        ("no shaper (bridge)", Via::None, String::new()),
        ("kernel HTB, 1 class", Via::Kernel, unlimited(PFIFO)),
        (
            "linkshare pfifo (no scheduler)",
            Via::Linkshare,
            format!("qdisc = {PFIFO}\n"),
        ),
        ("linkshare HTB, 1 class", Via::Linkshare, unlimited(PFIFO)),
        (
            "linkshare HTB, 1 class, --rx-ring v3",
            Via::LinkshareV3,
            unlimited(PFIFO),
        ),
        (
            "linkshare HTB, 1 class, --io xdp",
            Via::LinkshareXdp,
            unlimited(PFIFO),
        ),
        (
            "linkshare HTB, 1 class, --io xdp-generic",
            Via::LinkshareXdpGeneric,
            unlimited(PFIFO),
        ),
        (
            "linkshare CBQ, 1 class",
            Via::Linkshare,
            n_classes("cbq", 1, 10_000, PFIFO),
        ),
    ];
    for (label, via, policy) in rows {
        let b = bed(via, &policy)?;
        let m = measure_flood(&b, small_flood(1, 1), secs)?;
        t.row(vec![
            label.into(),
            format!("{:.0}", m.sent as f64 / (secs + 0.3) / 1e3),
            format!("{:.0}", m.kpps()),
            fmt_opt(m.shaper_ns_per_pkt(), 0),
            format!("{:.0}", m.machine_ns_per_pkt()),
        ]);
    }
    Ok(t)
}

fn classes(secs: f64) -> anyhow::Result<Table> {
    let mut t = Table::new(
        &[
            "classes",
            "kernel HTB (kpps)",
            "linkshare HTB (kpps)",
            "linkshare HTB CPU (ns/pkt)",
            "linkshare CBQ (kpps)",
            "linkshare CBQ CPU (ns/pkt)",
            "linkshare HTB --io xdp (kpps)",
            "linkshare HTB --io xdp CPU (ns/pkt)",
        ],
        "60-byte frames spread round robin over N UDP destination ports, one filter and one \
         class per port (`protocol = \"udp\"`, `dst_port`), under a 10 Gbit/s root: the cost \
         of classification and scheduling against the number of classes. Seed 001 Table 5 lost \
         22 % of ALTQ's forwarding rate from 1 to 100 classes. The linkshare HTB and CBQ \
         columns use AF_PACKET (`--io packet`), the last two AF_XDP.",
    );
    for n in [1usize, 5, 10, 20, 50, 100] {
        let ports = n as u16;
        let k = measure_flood(
            &bed(Via::Kernel, &n_classes("htb", n, 10_000, PFIFO))?,
            small_flood(ports, 1),
            secs,
        )?;
        let h = measure_flood(
            &bed(Via::Linkshare, &n_classes("htb", n, 10_000, PFIFO))?,
            small_flood(ports, 1),
            secs,
        )?;
        let c = measure_flood(
            &bed(Via::Linkshare, &n_classes("cbq", n, 10_000, PFIFO))?,
            small_flood(ports, 1),
            secs,
        )?;
        let x = measure_flood(
            &bed(Via::LinkshareXdp, &n_classes("htb", n, 10_000, PFIFO))?,
            small_flood(ports, 1),
            secs,
        )?;
        t.row(vec![
            n.to_string(),
            format!("{:.0}", k.kpps()),
            format!("{:.0}", h.kpps()),
            fmt_opt(h.shaper_ns_per_pkt(), 0),
            format!("{:.0}", c.kpps()),
            fmt_opt(c.shaper_ns_per_pkt(), 0),
            format!("{:.0}", x.kpps()),
            fmt_opt(x.shaper_ns_per_pkt(), 0),
        ]);
    }
    Ok(t)
}

fn sfq_flood(secs: f64) -> anyhow::Result<Table> {
    let mut t = Table::new(
        &[
            "router B",
            "forwarded (kpps)",
            "shaper CPU (ns/pkt)",
            "machine CPU (ns/pkt)",
        ],
        "60-byte frames from 64 UDP flows (source ports) as fast as the sender can; policies \
         never limit. Seed 004 measured SFQ alone and under HTB at high packet rates. This \
         kernel has no sfq module, so its column is HTB with pfifo.",
    );
    let sfq = "\"sfq\"";
    let rows: Vec<(&str, Via, String)> = vec![
        ("no shaper (bridge)", Via::None, String::new()),
        ("kernel HTB + pfifo", Via::Kernel, unlimited(PFIFO)),
        (
            "linkshare FIFO",
            Via::Linkshare,
            format!("qdisc = {PFIFO}\n"),
        ),
        ("linkshare SFQ", Via::Linkshare, "qdisc = \"sfq\"\n".into()),
        ("linkshare HTB + SFQ", Via::Linkshare, unlimited(sfq)),
    ];
    for (label, via, policy) in rows {
        let m = measure_flood(&bed(via, &policy)?, small_flood(1, 64), secs)?;
        t.row(vec![
            label.into(),
            format!("{:.0}", m.kpps()),
            fmt_opt(m.shaper_ns_per_pkt(), 0),
            format!("{:.0}", m.machine_ns_per_pkt()),
        ]);
    }
    Ok(t)
}

fn accuracy(secs: f64) -> anyhow::Result<Table> {
    let mut t = Table::new(
        &[
            "class rate",
            "frame size (bytes)",
            "offered (Mbit/s)",
            "kernel HTB (Mbit/s, error)",
            "linkshare (Mbit/s, error)",
        ],
        "One HTB class of the given rate (default burst) fed 30 % above its rate with UDP \
         frames of one size; the rate is the frame bytes (Ethernet header included, as both \
         HTBs count them) arriving at C per second. An offered rate below 1.3 × the class rate \
         means the sender could not go faster: the error then says nothing about the shaper.",
    );
    for rate_mbit in [1u64, 10, 100] {
        for frame in [64usize, 512, 1500] {
            let payload = frame - UDP_OVERHEAD;
            let want = rate_mbit as f64 * 1e6;
            let f = || Flood {
                payload,
                ports: 1,
                flows: 1,
                rate_bps: Some(want * 1.3),
                tos: 0,
            };
            let policy = one_class(&format!("{rate_mbit}mbit"), PFIFO);
            let k = measure_flood(&bed(Via::Kernel, &policy)?, f(), secs)?;
            let l = measure_flood(&bed(Via::Linkshare, &policy)?, f(), secs)?;
            let cell = |m: &Measured| {
                format!(
                    "{:.3} ({:+.2} %)",
                    m.mbit(),
                    100.0 * (m.mbit() * 1e6 - want) / want
                )
            };
            let offered = l.sent as f64 * (frame * 8) as f64 / (secs + 0.3) / 1e6;
            t.row(vec![
                format!("{rate_mbit} Mbit/s"),
                frame.to_string(),
                format!("{offered:.1}"),
                cell(&k),
                cell(&l),
            ]);
        }
    }
    Ok(t)
}

/// UDP echo probes with TOS `tos` from A to C every `gap` for `secs`; RTTs in µs.
fn probe_rtts(bed: &Hosts, tos: u8, gap: Duration, secs: f64) -> anyhow::Result<Vec<f64>> {
    let c = bed.ns_c().to_string();
    let ip = bed.addr_c();
    let _echo = Responder::start(&c, SocketAddrV4::new(ip, 5203), None)?;
    let a = bed.ns_a().to_string();
    let rtts = in_ns(&a, move || -> std::io::Result<Vec<f64>> {
        let s = UdpSocket::bind("0.0.0.0:0")?;
        set_tos(&s, tos)?;
        s.connect(SocketAddrV4::new(ip, 5203))?;
        s.set_read_timeout(Some(Duration::from_millis(500)))?;
        let mut out = Vec::new();
        let mut buf = [0u8; 64];
        let t0 = Instant::now();
        let mut seq = 0u64;
        while t0.elapsed().as_secs_f64() < secs {
            seq += 1;
            let sent = Instant::now();
            s.send(&seq.to_be_bytes())?;
            // Skip late replies of earlier probes.
            while let Ok(n) = s.recv(&mut buf) {
                if n >= 8 && buf[..8] == seq.to_be_bytes() {
                    out.push(sent.elapsed().as_secs_f64() * 1e6);
                    break;
                }
            }
            std::thread::sleep(gap);
        }
        Ok(out)
    })?;
    rtts.context("UDP probes A ↔ C")
}

fn quantile(v: &mut [f64], q: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    v[((v.len() - 1) as f64 * q).round() as usize]
}

const PRIORITY_POLICY: &str = r#"
qdisc = "htb"
default = "bulk"
[[class]]
name = "root"
rate = "10mbit"
[[class]]
name = "interactive"
parent = "root"
rate = "1mbit"
ceil = "10mbit"
prio = 0
[[class]]
name = "bulk"
parent = "root"
rate = "9mbit"
ceil = "10mbit"
prio = 1
leaf = { type = "pfifo", limit = 100 }
[[filter]]
class = "interactive"
dscp = "ef"
"#;

fn priority(secs: f64) -> anyhow::Result<Table> {
    let mut t = Table::new(
        &[
            "router B",
            "EF probe RTT p50 (µs)",
            "p99 (µs)",
            "bulk TCP goodput (Mbit/s)",
            "best-effort probe RTT p50 (µs)",
        ],
        "A 10 Mbit/s HTB link: `interactive` (prio 0, EF) and `bulk` (prio 1, pfifo of 100 \
         packets) both borrowing up to the link. One bulk TCP stream saturates it while UDP \
         echo probes (EF, every 10 ms) measure the priority class's round trip; a second probe \
         series without EF shows what the bulk class's queue costs.",
    );
    for via in [Via::Kernel, Via::Linkshare] {
        let b = bed(via, PRIORITY_POLICY)?;
        let hosts = b.hosts();
        let (bed_ref, s2) = (&hosts, secs);
        let (rtts, be, goodput) = std::thread::scope(|sc| -> anyhow::Result<_> {
            let bulk = sc.spawn(move || tcp_goodput(bed_ref, s2 + 1.0));
            std::thread::sleep(Duration::from_millis(700));
            let ef = probe_rtts(bed_ref, 46 << 2, Duration::from_millis(10), s2 / 2.0);
            let be = probe_rtts(bed_ref, 0, Duration::from_millis(10), s2 / 2.0);
            let g = bulk
                .join()
                .map_err(|_| anyhow!("the bulk sender panicked"))??;
            Ok((ef?, be?, g))
        })?;
        let (mut rtts, mut be) = (rtts, be);
        t.row(vec![
            via.name().into(),
            format!("{:.0}", quantile(&mut rtts, 0.5)),
            format!("{:.0}", quantile(&mut rtts, 0.99)),
            format!("{:.2}", goodput / 1e6),
            format!("{:.0}", quantile(&mut be, 0.5)),
        ]);
    }
    Ok(t)
}
