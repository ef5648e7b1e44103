//! linkshare's real shaper: a bump-in-the-wire between two Linux interfaces over AF_PACKET.
//!
//! One thread, one epoll loop over the two packet sockets, a timerfd armed at the scheduler's
//! `NotBefore` instant, a signalfd and the control socket. See docs/router.md.

pub mod emulate;
pub mod frame;
pub mod sys;

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};

use anyhow::Context;
use linkshare_config::{ConfigError, Policy};
use linkshare_core::htb::Htb;
use linkshare_core::qdisc::ClassView;
use linkshare_core::{Dequeued, Qdisc, Time};
use serde_json::{json, Value};

pub use frame::{classify_frame, Frame, Parsed};

/// Everything `linkshare run` needs.
#[derive(Clone, Debug)]
pub struct Options {
    pub policy: PathBuf,
    pub reverse_policy: Option<PathBuf>,
    pub dev_in: String,
    pub dev_out: String,
    pub control: PathBuf,
    /// Bytes allowed in flight to the NIC; `None`: two MTUs.
    pub device_buffer: Option<u64>,
    /// Link emulation after the scheduler on OUT.
    pub emulate: Option<emulate::EmulateSpec>,
}

/// Default control socket path for a pair of interfaces.
pub fn default_control(dev_in: &str, dev_out: &str) -> PathBuf {
    PathBuf::from(format!("/run/linkshare/{dev_in}-{dev_out}.sock"))
}

/// A scheduler built from a policy.
pub enum Sched {
    Htb(Box<Htb<Frame>>),
    Other(Box<dyn Qdisc<Frame>>),
}

impl Sched {
    fn q(&mut self) -> &mut dyn Qdisc<Frame> {
        match self {
            Sched::Htb(h) => h.as_mut(),
            Sched::Other(b) => b.as_mut(),
        }
    }
    fn qr(&self) -> &dyn Qdisc<Frame> {
        match self {
            Sched::Htb(h) => h.as_ref(),
            Sched::Other(b) => b.as_ref(),
        }
    }
}

/// Diagnostics of an invalid policy, rendered like `linkshare check`.
pub fn render_config_error(text: &str, e: &ConfigError) -> String {
    let mut s = String::new();
    for d in &e.diagnostics {
        s.push_str(&d.render_with_source(text));
        s.push_str("\n\n");
    }
    let n = e.errors().count();
    s.push_str(&format!(
        "policy is invalid: {n} error{}",
        if n == 1 { "" } else { "s" }
    ));
    s
}

/// Parse and build a policy; `Err` carries the rendered diagnostics.
pub fn load_sched(text: &str, origin: &str) -> Result<(Policy, Sched), String> {
    let p = Policy::parse(text, origin).map_err(|e| render_config_error(text, &e))?;
    let s = if p.kind_name() == "htb" {
        Sched::Htb(Box::new(
            p.build_htb().map_err(|e| render_config_error(text, &e))?,
        ))
    } else {
        Sched::Other(p.build().map_err(|e| render_config_error(text, &e))?)
    };
    Ok((p, s))
}

/// Log2 histogram of lateness in nanoseconds.
#[derive(Clone, Debug)]
pub struct Hist {
    buckets: [u64; 64],
    n: u64,
}

impl Default for Hist {
    fn default() -> Self {
        Hist {
            buckets: [0; 64],
            n: 0,
        }
    }
}

impl Hist {
    pub fn record(&mut self, ns: u64) {
        let b = 64 - ns.leading_zeros() as usize;
        self.buckets[b.min(63)] += 1;
        self.n += 1;
    }
    /// Upper bound in ns of the bucket holding quantile `q`.
    pub fn quantile(&self, q: f64) -> u64 {
        if self.n == 0 {
            return 0;
        }
        let target = ((self.n as f64) * q).ceil().max(1.0) as u64;
        let mut acc = 0;
        for (i, c) in self.buckets.iter().enumerate() {
            acc += c;
            if acc >= target {
                return if i == 0 { 0 } else { 1u64 << i.min(63) };
            }
        }
        u64::MAX
    }
}

#[derive(Clone, Debug, Default)]
struct IfStats {
    rx_packets: u64,
    rx_bytes: u64,
    tx_packets: u64,
    tx_bytes: u64,
    non_ip: u64,
    tx_errors: u64,
    malformed: HashMap<&'static str, u64>,
}

#[derive(Clone, Copy, Debug, Default)]
struct Live {
    bytes: u64,
    packets: u64,
    bps: f64,
    pps: f64,
}

struct Dir {
    to: usize,
    sched: Option<Sched>,
    policy_path: Option<PathBuf>,
    /// Link rate for device pacing (bits/s), 0 = unpaced.
    link_bps: u64,
    device_buffer: u64,
    in_flight: f64,
    last_drain_ns: u64,
    eligible: Option<Time>,
    deadline: Option<u64>,
    live: HashMap<String, Live>,
    emu: Option<emulate::Emulator>,
}

fn root_rate(s: &Sched) -> u64 {
    let mut r = 0u64;
    s.qr().visit_classes(&mut |c: &ClassView<'_>| {
        if c.parent.is_none() {
            r = r.saturating_add(c.ceil.bits_per_sec());
        }
    });
    r
}

impl Dir {
    fn new(sched: Option<Sched>, path: Option<PathBuf>, to: usize, buf: Option<u64>) -> Dir {
        let link_bps = sched.as_ref().map(root_rate).unwrap_or(0);
        Dir {
            to,
            sched,
            policy_path: path,
            link_bps,
            device_buffer: buf.unwrap_or(2 * 1514),
            in_flight: 0.0,
            last_drain_ns: 0,
            eligible: None,
            deadline: None,
            live: HashMap::new(),
            emu: None,
        }
    }

    fn drain_model(&mut self, now_ns: u64) {
        if self.link_bps > 0 {
            let dt = now_ns.saturating_sub(self.last_drain_ns) as f64 / 1e9;
            self.in_flight = (self.in_flight - dt * self.link_bps as f64 / 8.0).max(0.0);
        } else {
            self.in_flight = 0.0;
        }
        self.last_drain_ns = now_ns;
    }

    fn update_live(&mut self, dt: f64) {
        let Some(s) = &self.sched else { return };
        let alpha = 1.0 - (-dt).exp();
        let live = &mut self.live;
        s.qr().visit_classes(&mut |c: &ClassView<'_>| {
            let e = live.entry(c.name.to_string()).or_insert(Live {
                bytes: c.stats.sent.bytes,
                packets: c.stats.sent.packets,
                ..Live::default()
            });
            let db = c.stats.sent.bytes.saturating_sub(e.bytes) as f64 * 8.0 / dt;
            let dp = c.stats.sent.packets.saturating_sub(e.packets) as f64 / dt;
            e.bps += (db - e.bps) * alpha;
            e.pps += (dp - e.pps) * alpha;
            e.bytes = c.stats.sent.bytes;
            e.packets = c.stats.sent.packets;
        });
    }
}

/// The running shaper.
pub struct Shaper {
    opts: Options,
    socks: [OwnedFd; 2],
    names: [String; 2],
    ifs: [IfStats; 2],
    dirs: [Dir; 2],
    lateness: Hist,
    epoch_ns: u64,
    /// Text and origin of the forward policy now running.
    policy_text: (String, String),
}

const T_SOCK0: u64 = 0;
const T_SOCK1: u64 = 1;
const T_TIMER: u64 = 2;
const T_SIG: u64 = 3;
const T_CTL: u64 = 4;

impl Shaper {
    /// Open the devices and build the schedulers. Errors are ready to print.
    pub fn new(opts: Options) -> anyhow::Result<Shaper> {
        let text = std::fs::read_to_string(&opts.policy)
            .with_context(|| format!("cannot read {}", opts.policy.display()))?;
        let (_, fwd) = load_sched(&text, &opts.policy.display().to_string())
            .map_err(|d| anyhow::anyhow!("{d}"))?;
        let rev = match &opts.reverse_policy {
            Some(p) => {
                let t = std::fs::read_to_string(p)
                    .with_context(|| format!("cannot read {}", p.display()))?;
                Some(
                    load_sched(&t, &p.display().to_string())
                        .map_err(|d| anyhow::anyhow!("{d}"))?
                        .1,
                )
            }
            None => None,
        };
        let (s0, _) = sys::packet_socket(&opts.dev_in)
            .with_context(|| format!("cannot open {}", opts.dev_in))?;
        let (s1, _) = sys::packet_socket(&opts.dev_out)
            .with_context(|| format!("cannot open {}", opts.dev_out))?;
        let now = sys::monotonic_ns();
        let origin = opts.policy.display().to_string();
        let mut d0 = Dir::new(Some(fwd), Some(opts.policy.clone()), 1, opts.device_buffer);
        let mut d1 = Dir::new(rev, opts.reverse_policy.clone(), 0, opts.device_buffer);
        d0.last_drain_ns = now;
        d0.emu = opts.emulate.clone().map(emulate::Emulator::new);
        d1.last_drain_ns = now;
        Ok(Shaper {
            names: [opts.dev_in.clone(), opts.dev_out.clone()],
            opts,
            socks: [s0, s1],
            ifs: Default::default(),
            dirs: [d0, d1],
            lateness: Hist::default(),
            epoch_ns: now,
            policy_text: (text, origin),
        })
    }

    fn now(&self) -> Time {
        Time(sys::monotonic_ns().saturating_sub(self.epoch_ns))
    }

    /// Read up to `budget` frames from interface `i`.
    fn rx(&mut self, i: usize, buf: &mut [u8], budget: usize) -> bool {
        let mut got = false;
        for _ in 0..budget {
            let (n, outgoing) = match sys::recv_frame(self.socks[i].as_raw_fd(), buf) {
                Ok(Some(x)) => x,
                _ => break,
            };
            got = true;
            if outgoing {
                continue;
            }
            let n = n.min(buf.len());
            self.ifs[i].rx_packets += 1;
            self.ifs[i].rx_bytes += n as u64;
            let now = self.now();
            match classify_frame(buf[..n].to_vec()) {
                Parsed::Other(bytes) => {
                    self.ifs[i].non_ip += 1;
                    self.tx(self.dirs[i].to, &bytes);
                }
                Parsed::Malformed(e) => {
                    *self.ifs[i].malformed.entry(e.name()).or_insert(0) += 1;
                }
                Parsed::Ip(f) => {
                    let to = self.dirs[i].to;
                    match &mut self.dirs[i].sched {
                        Some(s) => {
                            let q = s.q();
                            let _ = q.enqueue(f, now); // refusals are counted by the qdisc
                            while q.take_dropped().is_some() {}
                        }
                        None => self.tx(to, &f.bytes),
                    }
                }
            }
        }
        got
    }

    fn tx(&mut self, to: usize, bytes: &[u8]) {
        match sys::send_frame(self.socks[to].as_raw_fd(), bytes) {
            Ok(()) => {
                self.ifs[to].tx_packets += 1;
                self.ifs[to].tx_bytes += bytes.len() as u64;
            }
            Err(_) => self.ifs[to].tx_errors += 1,
        }
    }

    /// Send what the scheduler of direction `d` lets go now; sets its deadline.
    fn service(&mut self, d: usize) {
        let now_ns = sys::monotonic_ns();
        self.dirs[d].drain_model(now_ns);
        self.dirs[d].deadline = None;
        self.flush_emu(d, now_ns);
        loop {
            let dir = &mut self.dirs[d];
            if dir.link_bps > 0 && dir.in_flight >= dir.device_buffer as f64 {
                let wait =
                    (dir.in_flight - dir.device_buffer as f64 + 1.0) * 8.0 / dir.link_bps as f64;
                let t = now_ns + (wait * 1e9) as u64;
                dir.deadline = Some(dir.deadline.map_or(t, |x| x.min(t)));
                return;
            }
            let now = Time(now_ns.saturating_sub(self.epoch_ns));
            let Some(s) = &mut dir.sched else { return };
            let q = s.q();
            let r = q.dequeue(now);
            while q.take_dropped().is_some() {}
            match r {
                Dequeued::Packet(p) => {
                    if let Some(e) = dir.eligible.take() {
                        self.lateness.record(now.0.saturating_sub(e.0));
                    }
                    dir.in_flight += p.bytes.len() as f64;
                    let to = dir.to;
                    if let Some(e) = &mut dir.emu {
                        e.push(now_ns, p.bytes);
                        self.flush_emu(d, now_ns);
                    } else {
                        self.tx(to, &p.bytes);
                    }
                }
                Dequeued::Empty => return,
                Dequeued::NotBefore(t) => {
                    dir.eligible = Some(t);
                    let t = t.0 + self.epoch_ns;
                    dir.deadline = Some(dir.deadline.map_or(t, |x| x.min(t)));
                    return;
                }
            }
        }
    }

    /// Send the emulated link's due frames; fold its next due time into the deadline.
    fn flush_emu(&mut self, d: usize, now_ns: u64) {
        let to = self.dirs[d].to;
        while let Some(f) = self.dirs[d].emu.as_mut().and_then(|e| e.pop_due(now_ns)) {
            self.tx(to, &f);
        }
        if let Some(t) = self.dirs[d].emu.as_ref().and_then(|e| e.next_due()) {
            let dl = &mut self.dirs[d].deadline;
            *dl = Some(dl.map_or(t, |x| x.min(t)));
        }
    }

    fn backlog_packets(&self) -> u64 {
        self.dirs
            .iter()
            .filter_map(|d| d.sched.as_ref())
            .map(|s| s.qr().backlog().packets)
            .sum::<u64>()
            + self
                .dirs
                .iter()
                .filter_map(|d| d.emu.as_ref())
                .map(|e| e.in_line() as u64)
                .sum::<u64>()
    }

    /// Replace direction `d`'s policy with `text`; the new scheduler adopts the old one's state.
    pub fn reload(&mut self, d: usize, text: &str, origin: &str) -> Result<Value, String> {
        let (_, mut new) = load_sched(text, origin)?;
        let now = self.now();
        let old = self.dirs[d].sched.take();
        let report = match (old, &mut new) {
            (Some(Sched::Htb(mut o)), Sched::Htb(n)) => {
                let r = n.adopt(&mut o, now);
                json!({"kept": r.kept, "added": r.added, "removed": r.removed,
                       "moved_packets": r.moved_packets, "reclassified": r.reclassified,
                       "dropped_packets": r.dropped_packets})
            }
            (Some(mut o), n) => adopt_state(n, &mut o, now),
            (None, _) => json!({}),
        };
        self.dirs[d].link_bps = root_rate(&new);
        self.dirs[d].sched = Some(new);
        self.dirs[d].live.clear();
        if d == 0 {
            self.policy_text = (text.to_string(), origin.to_string());
        }
        Ok(report)
    }

    fn reload_path(&mut self, path: &Path) -> Result<Value, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        let r = self.reload(0, &text, &path.display().to_string())?;
        self.dirs[0].policy_path = Some(path.to_path_buf());
        Ok(r)
    }

    /// The `stat --json` object.
    pub fn stat(&self) -> Value {
        let ifs: Vec<Value> = (0..2)
            .map(|i| {
                let s = &self.ifs[i];
                json!({"name": self.names[i], "rx_packets": s.rx_packets, "rx_bytes": s.rx_bytes,
                   "tx_packets": s.tx_packets, "tx_bytes": s.tx_bytes, "non_ip_passed": s.non_ip,
                   "tx_errors": s.tx_errors, "malformed": s.malformed})
            })
            .collect();
        let dirs: Vec<Value> = (0..2)
            .map(|i| {
                let d = &self.dirs[i];
                let mut classes = Vec::new();
                let mut bl = (0, 0);
                if let Some(s) = &d.sched {
                    let b = s.qr().backlog();
                    bl = (b.packets, b.bytes);
                    let mut names: Vec<String> = Vec::new();
                    s.qr().visit_classes(&mut |c: &ClassView<'_>| {
                        names.push(c.name.to_string());
                    });
                    s.qr().visit_classes(&mut |c: &ClassView<'_>| {
                        let live = d.live.get(c.name).copied().unwrap_or_default();
                        classes.push(json!({
                            "name": c.name,
                            "parent": c.parent.and_then(|p| names.get(p as usize)),
                            "leaf": c.is_leaf, "level": c.level,
                            "rate_bps": c.rate.bits_per_sec(), "ceil_bps": c.ceil.bits_per_sec(),
                            "prio": c.prio, "mode": c.mode.name(),
                            "live_rate_bps": live.bps, "live_pps": live.pps,
                            "sent_bytes": c.stats.sent.bytes, "sent_packets": c.stats.sent.packets,
                            "drops": c.stats.drops, "overlimits": c.stats.overlimits,
                            "lended": c.stats.lends, "borrowed": c.stats.borrows,
                            "backlog_packets": c.backlog.packets, "backlog_bytes": c.backlog.bytes,
                            "tokens": c.tokens, "ctokens": c.ctokens,
                        }));
                    });
                }
                json!({"from": self.names[1 - d.to], "to": self.names[d.to],
                       "shaped": d.sched.is_some(),
                       "policy": d.policy_path.as_ref().map(|p| p.display().to_string()),
                       "kind": d.sched.as_ref().map(|s| s.qr().kind()),
                       "backlog_packets": bl.0, "backlog_bytes": bl.1, "classes": classes,
                       "emulate": d.emu.as_ref().map(|e| json!({"lost": e.lost, "in_line": e.in_line()}))})
            })
            .collect();
        json!({
            "uptime_s": self.now().0 as f64 / 1e9,
            "policy": self.dirs[0].policy_path.as_ref().map(|p| p.display().to_string()),
            "kind": self.dirs[0].sched.as_ref().map(|s| s.qr().kind()),
            "lateness_us": {"p50": self.lateness.quantile(0.5) / 1000,
                            "p99": self.lateness.quantile(0.99) / 1000,
                            "samples": self.lateness.n},
            "interfaces": ifs,
            "directions": dirs,
        })
    }

    fn handle_request(&mut self, line: &str) -> Value {
        let req: Value = match serde_json::from_str(line) {
            Ok(v) => v,
            Err(e) => return json!({"ok": false, "error": format!("bad request: {e}")}),
        };
        match req.get("cmd").and_then(Value::as_str) {
            Some("stat") => json!({"ok": true, "stat": self.stat()}),
            Some("policy") => {
                json!({"ok": true, "text": self.policy_text.0, "origin": self.policy_text.1})
            }
            Some("reload") => {
                let res = if let Some(t) = req.get("text").and_then(Value::as_str) {
                    let origin = req
                        .get("origin")
                        .and_then(Value::as_str)
                        .unwrap_or("<control>");
                    self.reload(0, t, origin)
                } else if let Some(p) = req.get("path").and_then(Value::as_str) {
                    self.reload_path(Path::new(p))
                } else {
                    Err("reload needs `path` or `text`".to_string())
                };
                match res {
                    Ok(r) => json!({"ok": true, "report": r}),
                    Err(d) => json!({"ok": false, "error": "policy rejected", "diagnostics": d}),
                }
            }
            _ => json!({"ok": false, "error": "unknown command"}),
        }
    }

    fn serve_client(&mut self, stream: UnixStream) {
        let _ = stream.set_nonblocking(false);
        let _ = stream.set_read_timeout(Some(std::time::Duration::from_millis(500)));
        let mut line = String::new();
        let Ok(rs) = stream.try_clone() else { return };
        if BufReader::new(rs).read_line(&mut line).is_err() {
            return;
        }
        let resp = self.handle_request(line.trim());
        let mut w = stream;
        let _ = writeln!(w, "{resp}");
    }

    /// Run until SIGTERM/SIGINT. Returns the exit code.
    pub fn run(&mut self) -> anyhow::Result<i32> {
        sys::set_min_timer_slack();
        if let Some(dir) = self.opts.control.parent() {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("cannot create {}", dir.display()))?;
        }
        let _ = std::fs::remove_file(&self.opts.control);
        let listener = UnixListener::bind(&self.opts.control)
            .with_context(|| format!("cannot bind {}", self.opts.control.display()))?;
        std::fs::set_permissions(&self.opts.control, std::fs::Permissions::from_mode(0o600))?;
        listener.set_nonblocking(true)?;
        let ep = sys::epoll_create()?;
        let timer = sys::timerfd_create()?;
        let sig = sys::signalfd_term_hup()?;
        sys::epoll_add(ep.as_raw_fd(), self.socks[0].as_raw_fd(), T_SOCK0)?;
        sys::epoll_add(ep.as_raw_fd(), self.socks[1].as_raw_fd(), T_SOCK1)?;
        sys::epoll_add(ep.as_raw_fd(), timer.as_raw_fd(), T_TIMER)?;
        sys::epoll_add(ep.as_raw_fd(), sig.as_raw_fd(), T_SIG)?;
        sys::epoll_add(ep.as_raw_fd(), listener.as_raw_fd(), T_CTL)?;
        eprintln!(
            "linkshare: running {} -> {}, control {}",
            self.names[0],
            self.names[1],
            self.opts.control.display()
        );
        let mut buf = vec![0u8; 65536];
        let mut ready = Vec::new();
        let mut last_live = sys::monotonic_ns();
        let mut stopping: Option<u64> = None;
        loop {
            if stopping.is_none() {
                self.rx(0, &mut buf, 64);
                self.rx(1, &mut buf, 64);
            }
            self.service(0);
            self.service(1);
            let now = sys::monotonic_ns();
            if now - last_live >= 100_000_000 {
                let dt = (now - last_live) as f64 / 1e9;
                self.dirs[0].update_live(dt);
                self.dirs[1].update_live(dt);
                last_live = now;
            }
            if let Some(t0) = stopping {
                if self.backlog_packets() == 0 || now - t0 > 1_000_000_000 {
                    break;
                }
            }
            let deadline = self.dirs.iter().filter_map(|d| d.deadline).min();
            let timeout = match deadline {
                Some(t) if t <= now + 50_000 => 0, // busy-poll short waits
                Some(t) => {
                    sys::timerfd_set_abs(timer.as_raw_fd(), t)?;
                    100
                }
                None => 100,
            };
            sys::epoll_wait(ep.as_raw_fd(), &mut ready, timeout)?;
            for &tok in ready.iter() {
                match tok {
                    T_TIMER => {
                        let mut b = [0u8; 8];
                        sys::read_some(timer.as_raw_fd(), &mut b);
                    }
                    T_SIG => {
                        let mut b = [0u8; 128];
                        if sys::read_some(sig.as_raw_fd(), &mut b) > 0 {
                            match sys::signo_of(&b) {
                                Some(s) if s == libc::SIGHUP as u32 => {
                                    let p = self.dirs[0].policy_path.clone();
                                    if let Some(p) = p {
                                        match self.reload_path(&p) {
                                            Ok(_) => {
                                                eprintln!("linkshare: reloaded {}", p.display())
                                            }
                                            Err(d) => eprintln!("{d}"),
                                        }
                                    }
                                }
                                Some(_) => {
                                    stopping.get_or_insert(sys::monotonic_ns());
                                }
                                None => {}
                            }
                        }
                    }
                    T_CTL => {
                        while let Ok((s, _)) = listener.accept() {
                            self.serve_client(s);
                        }
                    }
                    _ => {}
                }
            }
        }
        let _ = std::fs::remove_file(&self.opts.control);
        Ok(0)
    }
}

/// Fallback state transfer for non-HTB schedulers: the old scheduler's packets, in its send
/// order, are offered to the new one (refusals are counted by the new scheduler).
pub fn adopt_state(new: &mut Sched, old: &mut Sched, now: Time) -> Value {
    let pkts = old.q().drain(now);
    let n = pkts.len();
    let mut dropped = 0u64;
    for p in pkts {
        if new.q().enqueue(p, now).is_err() {
            dropped += 1;
        }
        while new.q().take_dropped().is_some() {
            dropped += 1;
        }
    }
    json!({"moved_packets": n, "dropped_packets": dropped})
}

/// Send one request to a running shaper and return its response.
pub fn request(control: &Path, req: &Value) -> anyhow::Result<Value> {
    let mut s = UnixStream::connect(control)
        .with_context(|| format!("no shaper listening on {}", control.display()))?;
    s.set_read_timeout(Some(std::time::Duration::from_secs(5)))?;
    writeln!(s, "{req}")?;
    let mut line = String::new();
    BufReader::new(s).read_line(&mut line)?;
    serde_json::from_str(&line).context("bad response from shaper")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lateness_histogram_quantiles() {
        let mut h = Hist::default();
        assert_eq!(h.quantile(0.5), 0);
        for _ in 0..98 {
            h.record(1_000); // bucket (512, 1024]
        }
        h.record(1_000_000);
        h.record(1_000_000);
        assert_eq!(h.quantile(0.5), 1024);
        assert_eq!(h.quantile(0.99), 1 << 20);
    }

    #[test]
    fn invalid_policy_renders_check_diagnostics() {
        let bad = "qdisc = \"htb\"\ndefault = \"x\"\n[[class]]\nname = \"root\"\nrate = \"fast\"\n";
        let Err(d) = load_sched(bad, "bad.toml") else {
            panic!("accepted an invalid policy")
        };
        assert!(d.contains("bad.toml"), "{d}");
        assert!(d.contains("policy is invalid"), "{d}");
    }
}
