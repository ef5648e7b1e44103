//! `linkshare lab soak`: the real shaper at saturation for a long time, its policy changed every
//! second, while control clients misbehave — and at the end, three checks (issue 13 §8,
//! docs/soak.md):
//!
//! * **conservation**: every datagram the generator offered is received at the sink, dropped for a
//!   counted reason (the shaper's qdisc drops by reason, its ring and transmit drops, the kernel's
//!   veth and UDP receive-buffer drops) or still queued (the shaper's backlog);
//! * **flat memory**: the shaper's RSS over the last window is within a bound of the first window
//!   after warm-up;
//! * **no pause**: the largest gap between two datagrams at the sink (after warm-up, while the
//!   generator runs) stays under a bound, whatever the reloads and the control clients do.
//!
//! Principles: the traffic and the control plane are real (kernel UDP sockets in namespaces A and
//! C, the shaper's own Unix control socket), the counts come from both ends independently (the
//! generator's accepted `send`s, the sink's `recv`s) and from the shaper's counters, and every
//! figure is reported whether or not a check passes. The misbehaving clients are the ones issue 13
//! found could freeze forwarding: one that sends `stat` and never reads the large reply, one that
//! sends an oversized request with no end of line, one that connects and disconnects in a loop.

use std::io::Write;
use std::net::UdpSocket;
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use linkshare_router::control::{self, Direction, PolicySource, Request};
use serde::Serialize;
use serde_json::Value;

use crate::testbed::{
    in_ns, install_signal_handlers, interrupted, spawn_in_ns, LinkshareRouter, Testbed, ADDR_A,
    ADDR_C,
};

/// Destination port of the soak traffic at the sink.
const SINK_PORT: u16 = 5001;
/// Source ports of the two busy classes (`hot0`, `hot1`).
const SRC_PORTS: [u16; 2] = [6001, 6002];

/// What a soak runs.
#[derive(Clone, Debug)]
pub struct SoakOptions {
    /// Traffic time (the warm-up included).
    pub duration: Duration,
    /// The root class's rate, bits per second.
    pub rate_bps: u64,
    /// Offered load as a multiple of the root rate (above 1: saturation).
    pub overload: f64,
    /// UDP payload bytes per datagram.
    pub payload: usize,
    /// Leaf classes in the policy (two carry the traffic; the rest make `stat` replies large).
    pub classes: usize,
    /// Longest gap allowed between two datagrams at the sink.
    pub max_pause: Duration,
    /// RSS growth allowed between the first and the last window: this many bytes, or
    /// `rss_pct` percent of the first window, whichever is larger.
    pub rss_bytes: u64,
    pub rss_pct: f64,
    /// Datagrams allowed to be unaccounted for (kernel strays such as IPv6 neighbour traffic).
    pub stray: u64,
    /// Run the shaper with `--realtime PRIO`, and the generator and the sink under SCHED_FIFO
    /// at the same priority, so that the machine's other load cannot pause them.
    pub realtime: Option<u8>,
}

impl SoakOptions {
    /// The defaults for a run of `duration`.
    pub fn new(duration: Duration) -> Self {
        SoakOptions {
            duration,
            rate_bps: 8_000_000,
            overload: 1.5,
            payload: 472,
            classes: 400,
            max_pause: Duration::from_millis(100),
            rss_bytes: 4 << 20,
            rss_pct: 5.0,
            stray: 16,
            realtime: None,
        }
    }

    /// Seconds before the measurements start (queues full, allocations made).
    fn warmup(&self) -> Duration {
        (self.duration / 6).min(Duration::from_secs(10))
    }
}

/// What the control misbehavers did.
#[derive(Clone, Debug, Default, Serialize)]
pub struct ClientCounts {
    /// Connections that sent `stat` requests and never read (each held a few seconds).
    pub slow_readers: u64,
    /// Connections that sent more than the request limit without an end of line.
    pub oversized: u64,
    /// Connect-then-close cycles.
    pub churn: u64,
}

/// Every figure of a soak and its verdict.
#[derive(Clone, Debug, Default, Serialize)]
pub struct SoakReport {
    pub duration_s: f64,
    pub warmup_s: f64,
    pub rate_bps: u64,
    pub offered_bps: f64,
    pub payload_bytes: usize,
    pub classes: usize,
    /// `--realtime` priority of the shaper, generator and sink (`None`: ordinary threads).
    pub realtime: Option<u8>,
    /// Datagrams the generator's `send` accepted.
    pub offered: u64,
    /// `send`s the kernel refused (ENOBUFS…): never offered, not counted above.
    pub send_refused: u64,
    /// Datagrams received at the sink.
    pub received: u64,
    /// The shaper's qdisc drops by reason (refusals at enqueue and drops after).
    pub dropped_by_reason: std::collections::BTreeMap<String, u64>,
    /// Other counted losses: `rx_ring_drops`, `tx_drops`, `veth_rx_dropped`, `udp_rcvbuf_errors`.
    pub other_drops: std::collections::BTreeMap<String, u64>,
    /// Packets still in the shaper's queues at the end.
    pub queued: u64,
    /// `offered − received − drops − queued` (negative: more arrived than offered, strays).
    pub unaccounted: i64,
    pub reloads: u64,
    pub class_changes: u64,
    pub control_errors: u64,
    pub clients: ClientCounts,
    /// The shaper's control-plane counters at the end (as `stat` reports them).
    pub control: Value,
    pub rss_first_kb: f64,
    pub rss_last_kb: f64,
    pub rss_max_kb: u64,
    /// Largest gap between two datagrams at the sink, after warm-up.
    pub max_pause_ms: f64,
    pub max_pause_bound_ms: f64,
    /// The shaper's own largest lateness (its loop's stall), from `stat`.
    pub shaper_lateness_max_us: f64,
    pub conservation_ok: bool,
    pub rss_flat: bool,
    pub pause_ok: bool,
    pub interrupted: bool,
}

impl SoakReport {
    pub fn passed(&self) -> bool {
        self.conservation_ok && self.rss_flat && self.pause_ok && !self.interrupted
    }

    /// A human summary, one figure a line.
    pub fn text(&self) -> String {
        let ok = |b: bool| if b { "ok" } else { "FAILED" };
        let drops: Vec<String> = self
            .dropped_by_reason
            .iter()
            .chain(&self.other_drops)
            .filter(|(_, v)| **v > 0)
            .map(|(k, v)| format!("{k} {v}"))
            .collect();
        format!(
            "soak: {:.0} s ({:.0} s warm-up), {} leaf classes at {:.1} Mbit/s, offered {:.1} Mbit/s{}\n\
             packets: offered {}, received {}, dropped {} ({}), queued {}, unaccounted {} — conservation {}\n\
             control: {} reloads, {} class changes, {} errors; misbehaving clients: {} slow readers, {} oversized, {} connect/close\n\
             RSS: first window {:.0} kB, last window {:.0} kB, max {} kB — {}\n\
             max pause at the sink {:.1} ms (bound {:.0} ms), shaper lateness max {:.0} µs — {}\n",
            self.duration_s,
            self.warmup_s,
            self.classes,
            self.rate_bps as f64 / 1e6,
            self.offered_bps / 1e6,
            self.realtime
                .map_or(String::new(), |p| format!(", --realtime {p}")),
            self.offered,
            self.received,
            self.dropped_by_reason.values().chain(self.other_drops.values()).sum::<u64>(),
            if drops.is_empty() { "none".to_string() } else { drops.join(", ") },
            self.queued,
            self.unaccounted,
            ok(self.conservation_ok),
            self.reloads,
            self.class_changes,
            self.control_errors,
            self.clients.slow_readers,
            self.clients.oversized,
            self.clients.churn,
            self.rss_first_kb,
            self.rss_last_kb,
            self.rss_max_kb,
            ok(self.rss_flat),
            self.max_pause_ms,
            self.max_pause_bound_ms,
            self.shaper_lateness_max_us,
            ok(self.pause_ok),
        )
    }
}

/// The soak policy: `classes` leaves under a root at `rate_bps`; `hot0` and `hot1` take the two
/// source ports; `variant` moves rate between them (what a `class change` does).
fn policy(opts: &SoakOptions, variant: u64) -> String {
    let rate = opts.rate_bps;
    let cold = opts.classes.saturating_sub(2).max(1) as u64;
    let (h0, h1) = if variant.is_multiple_of(2) {
        (5, 3)
    } else {
        (3, 5)
    };
    let hot = rate / 2;
    let mut s = format!(
        "qdisc = \"htb\"\ndefault = \"cold0\"\n[[class]]\nname = \"root\"\nrate = \"{rate}bit\"\n"
    );
    for (i, share) in [h0, h1].iter().enumerate() {
        s += &format!(
            "[[class]]\nname = \"hot{i}\"\nparent = \"root\"\nrate = \"{}bit\"\nceil = \"{rate}bit\"\nleaf = {{ type = \"pfifo\", limit = 200 }}\n",
            hot * share / 8
        );
        s += &format!(
            "[[filter]]\nclass = \"hot{i}\"\nprotocol = \"udp\"\nsrc_port = \"{}\"\n",
            SRC_PORTS[i]
        );
    }
    let each = (rate - hot) / cold;
    for i in 0..cold {
        s += &format!(
            "[[class]]\nname = \"cold{i}\"\nparent = \"root\"\nrate = \"{each}bit\"\nceil = \"{rate}bit\"\nquantum = 1500\n"
        );
    }
    s
}

/// Put the calling thread under SCHED_FIFO at `prio`, if given; a failure is printed and the
/// thread goes on as an ordinary one.
fn fifo(prio: Option<u8>) {
    let Some(p) = prio else { return };
    let param = libc::sched_param {
        sched_priority: p.into(),
    };
    // SAFETY: `param` is a valid sched_param; pid 0 is the calling thread.
    if unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) } != 0 {
        eprintln!("soak: SCHED_FIFO {p}: {}", std::io::Error::last_os_error());
    }
}

/// Resident set size of `pid` in kB.
fn rss_kb(pid: u32) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = s.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// One reload over the typed control protocol, on a fresh connection.
fn reload(ctl: &Path, source: PolicySource) -> anyhow::Result<()> {
    control::call_ok(
        ctl,
        &Request::Reload {
            direction: Direction::Forward,
            source,
        },
    )
    .map(|_| ())
}

/// The three misbehaving clients, until `stop`.
fn misbehave(ctl: PathBuf, stop: Arc<AtomicBool>) -> Vec<std::thread::JoinHandle<(usize, u64)>> {
    let mut v = Vec::new();
    // 0: sends `stat` and never reads; holds the connection 3 s, then again.
    let (c, s) = (ctl.clone(), stop.clone());
    v.push(std::thread::spawn(move || {
        let mut n = 0;
        while !s.load(Ordering::Relaxed) {
            if let Ok(mut conn) = UnixStream::connect(&c) {
                n += 1;
                let _ = conn.set_write_timeout(Some(Duration::from_millis(200)));
                for _ in 0..64 {
                    if conn.write_all(b"{\"v\":1,\"cmd\":\"stat\"}\n").is_err() {
                        break;
                    }
                }
                let t = Instant::now();
                while t.elapsed() < Duration::from_secs(3) && !s.load(Ordering::Relaxed) {
                    std::thread::sleep(Duration::from_millis(50));
                }
            } else {
                std::thread::sleep(Duration::from_millis(100));
            }
        }
        (0, n)
    }));
    // 1: more than the request limit, no end of line; holds on 2 s.
    let (c, s) = (ctl.clone(), stop.clone());
    v.push(std::thread::spawn(move || {
        let chunk = vec![b'x'; 64 * 1024];
        let mut n = 0;
        while !s.load(Ordering::Relaxed) {
            if let Ok(mut conn) = UnixStream::connect(&c) {
                n += 1;
                let _ = conn.set_write_timeout(Some(Duration::from_millis(200)));
                let _ = conn.write_all(b"{\"cmd\":\"stat\",\"pad\":\"");
                let mut sent = 0;
                while sent <= linkshare_router::control::MAX_REQUEST + chunk.len() {
                    if conn.write_all(&chunk).is_err() {
                        break;
                    }
                    sent += chunk.len();
                }
                let t = Instant::now();
                while t.elapsed() < Duration::from_secs(2) && !s.load(Ordering::Relaxed) {
                    std::thread::sleep(Duration::from_millis(50));
                }
            } else {
                std::thread::sleep(Duration::from_millis(100));
            }
        }
        (1, n)
    }));
    // 2: connect, close, in a loop.
    let (c, s) = (ctl, stop);
    v.push(std::thread::spawn(move || {
        let mut n = 0;
        while !s.load(Ordering::Relaxed) {
            if UnixStream::connect(&c).is_ok() {
                n += 1;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        (2, n)
    }));
    v
}

/// What the sink saw.
struct SinkResult {
    received: u64,
    max_gap: Duration,
}

/// Figures the traffic threads publish as they go, for the progress lines.
#[derive(Default)]
struct Live {
    offered: AtomicU64,
    received: AtomicU64,
    max_gap_ns: AtomicU64,
}

/// How often a progress line is printed: every minute, or a tenth of a shorter run (10 s at
/// least).
fn progress_every(duration: Duration) -> Duration {
    (duration / 10).clamp(Duration::from_secs(10), Duration::from_secs(60))
}

/// `1h02m03s`, `2m03s` or `3s`.
fn hms(d: Duration) -> String {
    let s = d.as_secs();
    match (s / 3600, s / 60 % 60, s % 60) {
        (0, 0, s) => format!("{s}s"),
        (0, m, s) => format!("{m}m{s:02}s"),
        (h, m, s) => format!("{h}h{m:02}m{s:02}s"),
    }
}

/// `SIOCGSTAMPNS` (asm-generic/sockios.h, `SIOCGSTAMPNS_OLD`): the kernel's receive time of the
/// last datagram read from a socket, as a `timespec` of `CLOCK_REALTIME`.
const SIOCGSTAMPNS: libc::c_ulong = 0x8907;

/// `CLOCK_REALTIME` now, in ns.
fn realtime_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// When the datagram just read from `sock` reached the socket (the kernel's timestamp, ns of
/// `CLOCK_REALTIME`); the clock now if the kernel gives none.
fn arrival_ns(sock: &UdpSocket) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: SIOCGSTAMPNS writes one timespec into `ts`.
    let r = unsafe { libc::ioctl(sock.as_raw_fd(), SIOCGSTAMPNS as _, &mut ts) };
    if r == 0 && ts.tv_sec > 0 {
        ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
    } else {
        realtime_ns()
    }
}

/// Receive on C's sink port until `stop`; gaps are measured while `measure` is set, between the
/// kernel's arrival times of consecutive datagrams (so a sink thread that the machine's other
/// load delays does not see a pause that forwarding did not make).
fn sink(
    sock: UdpSocket,
    stop: Arc<AtomicBool>,
    measure: Arc<AtomicBool>,
    live: Arc<Live>,
) -> SinkResult {
    let mut buf = vec![0u8; 65536];
    let mut received = 0;
    let mut last: Option<u64> = None;
    let mut max_gap = 0u64;
    while !stop.load(Ordering::Relaxed) {
        match sock.recv(&mut buf) {
            Ok(_) => {
                received += 1;
                live.received.store(received, Ordering::Relaxed);
                let at = arrival_ns(&sock);
                if measure.load(Ordering::Relaxed) {
                    if let Some(l) = last {
                        max_gap = max_gap.max(at.saturating_sub(l));
                        live.max_gap_ns.fetch_max(max_gap, Ordering::Relaxed);
                    }
                    last = Some(at);
                } else {
                    last = None;
                }
            }
            Err(_) => {
                // A timeout: while measuring, the gap keeps growing from `last`.
                if let (true, Some(l)) = (measure.load(Ordering::Relaxed), last) {
                    max_gap = max_gap.max(realtime_ns().saturating_sub(l));
                }
            }
        }
    }
    SinkResult {
        received,
        max_gap: Duration::from_nanos(max_gap),
    }
}

/// Paced UDP from A's two source ports to C's sink at `bps` of payload+headers, until `stop`.
fn generate(
    socks: Vec<UdpSocket>,
    bps: f64,
    payload: usize,
    stop: Arc<AtomicBool>,
    refused: Arc<AtomicU64>,
    live: Arc<Live>,
) -> u64 {
    let frame_bits = ((payload + 42) * 8) as f64;
    let pps = bps / frame_bits;
    let buf = vec![0x5au8; payload];
    let t0 = Instant::now();
    let mut sent: u64 = 0;
    let mut i = 0usize;
    while !stop.load(Ordering::Relaxed) {
        let due = (t0.elapsed().as_secs_f64() * pps) as u64;
        while sent + refused.load(Ordering::Relaxed) < due {
            let s = &socks[i % socks.len()];
            i += 1;
            match s.send_to(&buf, (ADDR_C, SINK_PORT)) {
                Ok(_) => {
                    sent += 1;
                    live.offered.store(sent, Ordering::Relaxed);
                }
                Err(_) => {
                    refused.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
        std::thread::sleep(Duration::from_micros(500));
    }
    sent
}

/// A counter of `dev` in namespace `ns` from `ip -s -j link` (`rx`/`tx`, then the field).
fn link_counter(ns: &str, dev: &str, dir: &str, field: &str) -> u64 {
    let out = std::process::Command::new("ip")
        .args(["-n", ns, "-s", "-j", "link", "show", "dev", dev])
        .output();
    let Ok(out) = out else { return 0 };
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    v[0]["stats64"][dir][field].as_u64().unwrap_or(0)
}

/// `Udp: RcvbufErrors` of the namespace the calling thread is in.
fn udp_rcvbuf_errors() -> u64 {
    let Ok(s) = std::fs::read_to_string("/proc/thread-self/net/snmp") else {
        return 0;
    };
    let udp: Vec<&str> = s.lines().filter(|l| l.starts_with("Udp:")).collect();
    if udp.len() < 2 {
        return 0;
    }
    let names: Vec<&str> = udp[0].split_whitespace().collect();
    let vals: Vec<&str> = udp[1].split_whitespace().collect();
    names
        .iter()
        .position(|n| *n == "RcvbufErrors")
        .and_then(|i| vals.get(i))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// The shaper's forward-direction counters that conservation needs.
struct Counters {
    drops: std::collections::BTreeMap<String, u64>,
    queued: u64,
    ring_drops: u64,
    tx_drops: u64,
}

fn counters(st: &Value) -> Counters {
    let q = &st["directions"][0]["qdisc"];
    let mut drops = std::collections::BTreeMap::new();
    for key in ["refused_by_reason", "dropped_by_reason"] {
        for (k, v) in q[key].as_object().into_iter().flatten() {
            *drops.entry(k.clone()).or_insert(0) += v.as_u64().unwrap_or(0);
        }
    }
    let u = |v: &Value| v.as_u64().unwrap_or(0);
    Counters {
        drops,
        queued: u(&st["directions"][0]["backlog_packets"]),
        ring_drops: u(&st["interfaces"][0]["rx_ring_drops"]),
        tx_drops: u(&st["interfaces"][1]["tx_errors"]),
    }
}

/// The typed snapshot, as JSON (the counters are read by field name).
fn stat(ctl: &Path) -> anyhow::Result<Value> {
    Ok(serde_json::to_value(control::stat(ctl)?)?)
}

/// Mean of the samples whose time is in `[from, to)`.
fn mean_in(samples: &[(f64, u64)], from: f64, to: f64) -> f64 {
    let v: Vec<f64> = samples
        .iter()
        .filter(|(t, _)| *t >= from && *t < to)
        .map(|(_, r)| *r as f64)
        .collect();
    if v.is_empty() {
        0.0
    } else {
        v.iter().sum::<f64>() / v.len() as f64
    }
}

/// Run the soak; the report says what passed.
pub fn run(opts: &SoakOptions) -> anyhow::Result<SoakReport> {
    if opts.duration < Duration::from_secs(10) {
        return Err(crate::invalid("a soak lasts at least 10 s"));
    }
    if !(opts.overload > 1.0 && opts.overload <= 10.0) {
        return Err(crate::invalid(
            "the overload is above 1 (saturation) and at most 10",
        ));
    }
    if let Some(why) = crate::testbed::unavailable() {
        bail!("{why}");
    }
    install_signal_handlers()?;
    if let Some(note) = crate::testbed::raise_priority() {
        eprintln!("soak: {note}");
    }
    let mut bed = Testbed::new()?;
    let path = bed.write_file("soak.toml", &policy(opts, 0))?;
    let shaper_args = match opts.realtime {
        Some(p) => vec!["--realtime".to_string(), p.to_string()],
        None => Vec::new(),
    };
    bed.start_router(Box::new(LinkshareRouter::new(shaper_args)?), &path)?;
    bed.wait_reachable()?;
    let ctl = bed.dir.join("ctl.sock");
    let pid = bed
        .router()
        .and_then(|r| r.pid())
        .context("the shaper has no pid")?;

    let stop_sink = Arc::new(AtomicBool::new(false));
    let stop_gen = Arc::new(AtomicBool::new(false));
    let stop_clients = Arc::new(AtomicBool::new(false));
    let measure = Arc::new(AtomicBool::new(false));
    let sock = in_ns(&bed.ns_c, || UdpSocket::bind((ADDR_C, SINK_PORT)))??;
    sock.set_read_timeout(Some(Duration::from_millis(20)))?;
    crate::traffic::setsockopt_int(sock.as_raw_fd(), libc::SOL_SOCKET, libc::SO_RCVBUF, 8 << 20)?;
    let rcvbuf0 = in_ns(&bed.ns_c, udp_rcvbuf_errors)?;
    let base = counters(&stat(&ctl)?);
    let veth0 = link_counter(&bed.ns_r, &bed.dev_ra, "rx", "dropped");
    let live = Arc::new(Live::default());
    let sink_h = {
        let (s, m, l, rt) = (
            stop_sink.clone(),
            measure.clone(),
            live.clone(),
            opts.realtime,
        );
        std::thread::spawn(move || {
            fifo(rt);
            sink(sock, s, m, l)
        })
    };
    let socks: Vec<UdpSocket> = SRC_PORTS
        .iter()
        .map(|p| {
            let p = *p;
            in_ns(&bed.ns_a, move || UdpSocket::bind((ADDR_A, p)))?
                .context("cannot bind the generator")
        })
        .collect::<anyhow::Result<_>>()?;
    let refused = Arc::new(AtomicU64::new(0));
    let offered_bps = opts.rate_bps as f64 * opts.overload;
    let gen_h = {
        let (s, r, payload, l) = (
            stop_gen.clone(),
            refused.clone(),
            opts.payload,
            live.clone(),
        );
        let rt = opts.realtime;
        spawn_in_ns(&bed.ns_a, move || {
            fifo(rt);
            generate(socks, offered_bps, payload, s, r, l)
        })?
    };
    let clients = misbehave(ctl.clone(), stop_clients.clone());

    let t0 = Instant::now();
    let warmup = opts.warmup();
    let mut rss: Vec<(f64, u64)> = Vec::new();
    let (mut reloads, mut class_changes, mut control_errors) = (0u64, 0u64, 0u64);
    let mut tick = 0u64;
    let every = progress_every(opts.duration);
    let mut next_progress = every;
    while t0.elapsed() < opts.duration && !interrupted() {
        tick += 1;
        let next = t0 + Duration::from_secs(tick);
        if let Some(d) = next.checked_duration_since(Instant::now()) {
            std::thread::sleep(d);
        }
        if t0.elapsed() >= warmup {
            measure.store(true, Ordering::Relaxed);
        }
        // Odd seconds: reload the file; even seconds: a class change (hot0 and hot1 swap
        // rates), sent as a policy text like `linkshare class change` does.
        let r = if tick % 2 == 1 {
            reloads += 1;
            reload(&ctl, PolicySource::File { path: path.clone() })
        } else {
            class_changes += 1;
            reload(
                &ctl,
                PolicySource::Text {
                    text: policy(opts, tick / 2),
                    origin: "soak class change".into(),
                },
            )
        };
        if r.is_err() {
            control_errors += 1;
            if control_errors <= 3 {
                eprintln!("soak: control request failed: {r:?}");
            }
        }
        if let Some(kb) = rss_kb(pid) {
            rss.push((t0.elapsed().as_secs_f64(), kb));
        }
        if t0.elapsed() >= next_progress {
            next_progress += every;
            eprintln!(
                "soak: {} of {}: offered {}, received {}, {reloads} reloads + {class_changes} class changes ({control_errors} failed), RSS {} kB, max pause {:.1} ms",
                hms(t0.elapsed()),
                hms(opts.duration),
                live.offered.load(Ordering::Relaxed),
                live.received.load(Ordering::Relaxed),
                rss.last().map_or(0, |r| r.1),
                live.max_gap_ns.load(Ordering::Relaxed) as f64 / 1e6,
            );
        }
    }
    let ran = t0.elapsed().as_secs_f64();
    measure.store(false, Ordering::Relaxed);
    stop_gen.store(true, Ordering::Relaxed);
    let offered = gen_h
        .join()
        .map_err(|_| anyhow::anyhow!("the generator panicked"))?;
    // Let the queues drain into the sink (the class rates are far above a 200-packet queue).
    std::thread::sleep(Duration::from_secs(2));
    stop_clients.store(true, Ordering::Relaxed);
    let mut cc = ClientCounts::default();
    for h in clients {
        if let Ok((k, n)) = h.join() {
            match k {
                0 => cc.slow_readers = n,
                1 => cc.oversized = n,
                _ => cc.churn = n,
            }
        }
    }
    let end = stat(&ctl)?;
    stop_sink.store(true, Ordering::Relaxed);
    let sink_r = sink_h
        .join()
        .map_err(|_| anyhow::anyhow!("the sink panicked"))?;
    let last = counters(&end);
    let rcvbuf = in_ns(&bed.ns_c, udp_rcvbuf_errors)?.saturating_sub(rcvbuf0);
    let veth = link_counter(&bed.ns_r, &bed.dev_ra, "rx", "dropped").saturating_sub(veth0);

    let mut dropped_by_reason = std::collections::BTreeMap::new();
    for (k, v) in &last.drops {
        let d = v.saturating_sub(base.drops.get(k).copied().unwrap_or(0));
        dropped_by_reason.insert(k.clone(), d);
    }
    let mut other = std::collections::BTreeMap::new();
    other.insert(
        "rx_ring_drops".to_string(),
        last.ring_drops.saturating_sub(base.ring_drops),
    );
    other.insert(
        "tx_drops".to_string(),
        last.tx_drops.saturating_sub(base.tx_drops),
    );
    other.insert("veth_rx_dropped".to_string(), veth);
    other.insert("udp_rcvbuf_errors".to_string(), rcvbuf);
    let drops: u64 = dropped_by_reason.values().chain(other.values()).sum();
    let queued = last.queued;
    let unaccounted = offered as i64 - sink_r.received as i64 - drops as i64 - queued as i64;

    // RSS windows: the first and the last minute after warm-up (a third each when shorter).
    let w = warmup.as_secs_f64();
    let win = ((ran - w) / 3.0).min(60.0);
    let first = mean_in(&rss, w, w + win);
    let lastw = mean_in(&rss, ran - win, ran + 1.0);
    let allowed = (opts.rss_bytes as f64 / 1024.0).max(first * opts.rss_pct / 100.0);
    let lateness = end["lateness_ns"]["max"].as_f64().unwrap_or(0.0) / 1e3;

    Ok(SoakReport {
        duration_s: ran,
        warmup_s: w,
        rate_bps: opts.rate_bps,
        offered_bps,
        payload_bytes: opts.payload,
        classes: opts.classes,
        realtime: opts.realtime,
        offered,
        send_refused: refused.load(Ordering::Relaxed),
        received: sink_r.received,
        dropped_by_reason,
        other_drops: other,
        queued,
        unaccounted,
        reloads,
        class_changes,
        control_errors,
        clients: cc,
        control: end["control"].clone(),
        rss_first_kb: first,
        rss_last_kb: lastw,
        rss_max_kb: rss.iter().map(|(_, r)| *r).max().unwrap_or(0),
        max_pause_ms: sink_r.max_gap.as_secs_f64() * 1e3,
        max_pause_bound_ms: opts.max_pause.as_secs_f64() * 1e3,
        shaper_lateness_max_us: lateness,
        conservation_ok: unaccounted.unsigned_abs() <= opts.stray && control_errors == 0,
        rss_flat: first > 0.0 && lastw <= first + allowed,
        pause_ok: sink_r.max_gap <= opts.max_pause,
        interrupted: interrupted(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_soak_policy_is_valid_and_its_variants_swap_the_hot_rates() {
        let o = SoakOptions::new(Duration::from_secs(60));
        let a = linkshare_config::Policy::parse(&policy(&o, 0), "a").unwrap();
        let b = linkshare_config::Policy::parse(&policy(&o, 1), "b").unwrap();
        assert_eq!(a.classes().len(), o.classes + 1);
        let rate = |p: &linkshare_config::Policy, n: &str| {
            p.classes()
                .iter()
                .find(|c| c.name == n)
                .map(|c| c.rate)
                .unwrap()
        };
        assert_eq!(rate(&a, "hot0"), rate(&b, "hot1"));
        assert_ne!(rate(&a, "hot0"), rate(&a, "hot1"));
    }

    #[test]
    fn progress_lines_come_every_minute_or_a_tenth_of_a_short_run() {
        assert_eq!(
            progress_every(Duration::from_secs(60)),
            Duration::from_secs(10)
        );
        assert_eq!(
            progress_every(Duration::from_secs(300)),
            Duration::from_secs(30)
        );
        assert_eq!(
            progress_every(Duration::from_secs(7200)),
            Duration::from_secs(60)
        );
        assert_eq!(hms(Duration::from_secs(7)), "7s");
        assert_eq!(hms(Duration::from_secs(185)), "3m05s");
        assert_eq!(hms(Duration::from_secs(7384)), "2h03m04s");
    }

    #[test]
    fn rss_windows_average_their_samples_only() {
        let s = [(1.0, 10), (2.0, 20), (3.0, 30), (10.0, 100)];
        assert_eq!(mean_in(&s, 1.0, 3.0), 15.0);
        assert_eq!(mean_in(&s, 20.0, 30.0), 0.0);
    }
}
