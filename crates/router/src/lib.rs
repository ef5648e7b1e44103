//! linkshare's real shaper: a bump-in-the-wire between two Linux interfaces over AF_PACKET.
//!
//! One thread, one epoll loop over the two ports (AF_PACKET rings, see [`port`]), a timerfd armed
//! a margin before the scheduler's `NotBefore` instant (the margin learnt from the timer's own
//! latency, wake.rs; waits shorter than it are busy-polled), a signalfd and
//! the control socket. Each turn: take a batch from each receive ring, dequeue what the
//! schedulers let go while the transmit ring has room, kick each transmit ring once, record the
//! lateness of paced departures; control clients are served in the same loop but never block it.
//! See docs/router.md.
//!
//! Modules by concern: [`port`] (rings), [`xdp`] (AF_XDP, `--io`), [`control`] (the protocol and
//! its non-blocking server), [`guard`] (interface locks, loop detection), `control::stat` (the `stat`
//! object), `reload` (policy replacement and state adoption), [`emulate`] (the emulated link),
//! [`notify`] (systemd's READY/RELOADING/STOPPING), [`sys`] (system calls).

pub mod affinity;
mod builder;
pub mod conn;
pub mod control;
pub mod egress;
pub mod emulate;
pub mod frame;
pub mod guard;
pub mod hist;
pub mod http;
pub mod notify;
pub mod port;
mod reload;
pub mod sys;
pub mod wake;
mod workers;
pub mod xdp;

use std::collections::HashMap;
use std::os::fd::AsRawFd;
use std::path::PathBuf;

use anyhow::Context;
use linkshare_core::egress::{Egress, EgressConfig, Stop};
use linkshare_core::htb::Htb;
use linkshare_core::packet::{Fragment, ParseIssue};
use linkshare_core::qdisc::ClassView;
use linkshare_core::{Qdisc, Time};

pub use control::call;
pub use frame::{classify_frame, Frame, Parsed};
pub use hist::Hist;
pub use port::{PacketPort, Port, PortCounters, RxFrame, RxRingKind, TxDrop};
pub use reload::{adopt_state, load_sched, render_config_error};
pub use workers::run as run_workers;
pub use xdp::IoKind;

/// Everything `linkshare run` needs.
#[derive(Clone, Debug)]
pub struct Options {
    pub policy: PathBuf,
    pub reverse_policy: Option<PathBuf>,
    pub dev_in: String,
    pub dev_out: String,
    pub control: PathBuf,
    /// Directory of the interface locks ([`DEFAULT_RUN_DIR`] unless given).
    pub lock_dir: PathBuf,
    /// Bytes the modelled device buffer holds behind the frame on the wire (the pull rule of
    /// `linkshare_core::egress`); `None`: [`default_device_buffer`] of the root rate.
    pub device_buffer: Option<u64>,
    /// Link emulation: after the scheduler on OUT, and a delay on the reverse direction.
    pub emulate: Option<emulate::EmulateSpec>,
    /// Per-host extra one-way delays, both directions (`--path-delay ADDR=DELAY`).
    pub path_delays: Vec<emulate::PathDelay>,
    /// Waits shorter than this are busy-polled, and the timer is armed this early; `None`: a
    /// margin learnt from the timer's latency ([`wake::EarlyWake`]).
    pub busy_poll_ns: Option<u64>,
    /// How much of a late wake-up's missed time the scheduler is replayed over
    /// (`--catch-up-ms`; 0: none, a late loop loses the rate like the kernel's watchdog).
    pub catch_up_ns: u64,
    /// The kind of receive ring on both interfaces (AF_PACKET).
    pub rx_ring: RxRingKind,
    /// AF_XDP or AF_PACKET ([`xdp::open_port`]).
    pub io: IoKind,
    /// Line rate of the interfaces in bit/s (`None`: what the drivers report; unknown counts as
    /// the policy's root rate). The device buffer drains at the faster of this and the root rate.
    pub line_rate: Option<u64>,
    /// Serve OpenMetrics at `http://ADDR/metrics` from the event loop (`--metrics`).
    pub metrics: Option<std::net::SocketAddr>,
    /// Serve the live dashboard at `http://ADDR/` from the event loop (`--web`).
    pub web: Option<std::net::SocketAddr>,
    /// Run the datapath thread under `SCHED_FIFO` at this priority (1–99) with its memory
    /// locked (`--realtime`); `None`: an ordinary thread.
    pub realtime: Option<u8>,
    /// The datapath thread's nice value (`--nice`; `None`: left as inherited).
    pub nice: Option<i8>,
    /// CPUs of the datapath threads (`--cpus`): thread `i` is pinned to `cpus[i % len]`
    /// ([`affinity`]); empty: wherever the kernel puts them.
    pub cpus: Vec<usize>,
    /// Datapath threads (`--workers`): 1 is the single-threaded shaper, more cut the policy's
    /// HTB into shards, one per worker (workers/).
    pub workers: usize,
    /// How the top-level classes are dealt to the workers (`--placement`).
    pub placement: linkshare_core::shard::Placement,
    /// Which worker receives what (`--rx-split`).
    pub rx_split: RxSplit,
}

/// How `--workers` share what the interfaces receive (`--rx-split`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum RxSplit {
    /// Every worker receives on both interfaces; the kernel deals the frames by flow hash
    /// (AF_PACKET fanout, or the receive queue with AF_XDP).
    #[default]
    Flow,
    /// Two workers: worker 0 receives everything that arrives on the first interface, worker 1
    /// on the second (with the `--io` asked for), and each transmits on the other one (an
    /// AF_PACKET transmit-only socket there). A
    /// connection's two directions then run on two cores: on veth the data's transmit carries
    /// the receiver's stack and the ACKs' transmit the sender's (docs/router.md, "Workers").
    Direction,
}

impl RxSplit {
    /// Whether this split can run `workers` datapath threads; if not, why and the fix.
    pub fn check(self, workers: usize) -> Result<(), String> {
        if self == RxSplit::Direction && workers != 2 {
            return Err(format!(
                "--rx-split direction gives each of two workers one interface to receive on: \
                 use --workers 2 with it (got --workers {workers})"
            ));
        }
        Ok(())
    }
}

impl std::str::FromStr for RxSplit {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "flow" => Ok(RxSplit::Flow),
            "direction" => Ok(RxSplit::Direction),
            other => Err(format!(
                "unknown --rx-split `{other}`: use flow or direction"
            )),
        }
    }
}

/// Where control sockets and interface locks live by default.
pub const DEFAULT_RUN_DIR: &str = "/run/linkshare";

/// Default control socket path for a pair of interfaces.
pub fn default_control(dev_in: &str, dev_out: &str) -> PathBuf {
    PathBuf::from(format!("{DEFAULT_RUN_DIR}/{dev_in}-{dev_out}.sock"))
}

/// A scheduler built from a policy.
pub enum Sched {
    Htb(Box<Htb<Frame>>),
    /// One worker's shard of a sharded HTB (`--workers N`, workers/).
    Shard(Box<linkshare_core::shard::Shard<Frame>>),
    Other(Box<dyn Qdisc<Frame>>),
}

impl Sched {
    fn q(&mut self) -> &mut dyn Qdisc<Frame> {
        match self {
            Sched::Htb(h) => h.as_mut(),
            Sched::Shard(h) => h.as_mut(),
            Sched::Other(b) => b.as_mut(),
        }
    }
    fn qr(&self) -> &dyn Qdisc<Frame> {
        match self {
            Sched::Htb(h) => h.as_ref(),
            Sched::Shard(h) => h.as_ref(),
            Sched::Other(b) => b.as_ref(),
        }
    }
}

#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Live {
    bytes: u64,
    packets: u64,
    bps: f64,
    pps: f64,
}

/// What the shaper counts per interface, beyond the port's own counters.
#[derive(Clone, Debug, Default)]
struct IfStats {
    /// Frames received on this interface (own transmissions excluded).
    rx_packets: u64,
    rx_bytes: u64,
    /// Non-IP frames (ARP, LLDP, …) passed unshaped to the other interface.
    non_ip: u64,
    /// IP fragments received (shaped like any packet; later fragments have no ports).
    fragments: u64,
    /// Frames that did not parse, by `ParseError::name()`; dropped.
    malformed: HashMap<&'static str, u64>,
    /// IP packets with a parse issue that still were classified (`truncated_l4`, …).
    issues: HashMap<&'static str, u64>,
    /// Frames that could not be queued for transmit on this interface, by reason.
    tx_ring_full: u64,
    tx_too_big: u64,
    /// The port's own counters, refreshed by the loop.
    port: PortCounters,
}

struct Dir {
    to: usize,
    sched: Option<Sched>,
    policy_path: Option<PathBuf>,
    /// Text and origin of the policy running in this direction.
    policy_text: Option<(String, String)>,
    /// Link rate for device pacing (bits/s), 0 = unpaced.
    link_bps: u64,
    /// The outgoing interface's line rate (bits/s; 0 = unknown): the device buffer drains at
    /// the faster of this and `link_bps`.
    line_bps: u64,
    device_buffer: u64,
    /// `--device-buffer` as given (`None`: derived from the rate, again on every reload).
    device_buffer_opt: Option<u64>,
    /// The device model shared with the simulator (`linkshare_core::egress`), in the
    /// scheduler's time (ns since the shaper's epoch).
    egress: Egress,
    /// The instant (absolute ns) the next departure was told to wait for: the scheduler's
    /// `NotBefore`, or the end of the modelled wire's packet when the device buffer is full.
    eligible: Option<u64>,
    /// Absolute CLOCK_MONOTONIC instant this direction wants to run again.
    deadline: Option<u64>,
    live: HashMap<String, Live>,
    emu: Option<emulate::Emulator>,
    /// The policy's link layer (tc-stab): a frame is charged `link.size(frame length)`.
    link: linkshare_core::linklayer::LinkLayer,
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

/// Default device buffer (bytes waiting behind the frame on the modelled wire): two full
/// frames, or 1 ms of the link rate plus a frame when that is more (so a slow loop turn does not
/// cap a fast link at one buffer per turn). The frames in flight (wire and buffer) peak at the
/// same 1 ms + 1 frame (or 3 frames) as before the shared model, which stopped pulling at
/// `in_flight ≥ max(2 frames, 1 ms)` counting the wire.
pub fn default_device_buffer(link_bps: u64) -> u64 {
    (2 * FULL_FRAME).max(link_bps / 8 / 1000) + FULL_FRAME
}

/// The router's device model: drains at `drain_bps` (0 = unpaced), `device_buffer` bytes behind
/// the wire, room for one [`FULL_FRAME`]; its timer and clock are exact (no ticks). The same
/// model as a simulated `[link]` of that rate, buffer and `mtu + overhead = 1514`.
pub fn device_model(drain_bps: u64, device_buffer: u64) -> EgressConfig {
    EgressConfig {
        rate_bps: drain_bps,
        device_buffer,
        full_packet: FULL_FRAME,
        timer_hz: 0,
        clock_hz: 0,
    }
}

/// A full untagged Ethernet frame at MTU 1500: the room the pull rule asks for (frames are
/// charged their whole length, see [`frame`]).
pub const FULL_FRAME: u64 = 1514;

fn min_deadline(d: &mut Option<u64>, t: u64) {
    *d = Some(d.map_or(t, |x| x.min(t)));
}

impl Dir {
    fn new(sched: Option<Sched>, path: Option<PathBuf>, to: usize, buf: Option<u64>) -> Dir {
        let link_bps = sched.as_ref().map(root_rate).unwrap_or(0);
        let mut d = Dir {
            to,
            sched,
            policy_path: path,
            policy_text: None,
            link_bps,
            line_bps: 0,
            device_buffer: buf.unwrap_or(default_device_buffer(link_bps)),
            device_buffer_opt: buf,
            egress: Egress::new(EgressConfig::default()),
            eligible: None,
            deadline: None,
            live: HashMap::new(),
            emu: None,
            link: Default::default(),
        };
        d.sync_egress();
        d
    }

    /// The device model of this direction: drains at [`Dir::drain_bps`], `device_buffer` bytes
    /// behind the wire; the router's timers and clock are exact (no ticks).
    fn egress_config(&self) -> EgressConfig {
        device_model(self.drain_bps(), self.device_buffer)
    }

    /// Apply a changed rate, line rate or buffer to the device model (frames in it keep their
    /// place).
    pub(crate) fn sync_egress(&mut self) {
        let cfg = self.egress_config();
        self.egress.reconfigure(cfg);
    }

    /// How fast the device buffer empties. With HTB, which holds its root to its ceil by
    /// itself: the line rate when the interface is faster than the root (shaping below line
    /// rate, the NIC sends at its own speed, so queued frames wait on the scheduler, not in the
    /// ring), else the root rate (shaping at line rate, the NIC is the bottleneck and the buffer
    /// keeps its queue short). CBQ's estimator measures the link itself (its root is never
    /// regulated, the link's transmission time spaces the packets), so with CBQ and every other
    /// root the buffer drains at the root rate. 0 = unpaced.
    fn drain_bps(&self) -> u64 {
        match &self.sched {
            _ if self.link_bps == 0 => 0,
            Some(Sched::Htb(_)) | Some(Sched::Shard(_)) => self.link_bps.max(self.line_bps),
            _ => self.link_bps,
        }
    }

    /// Run `new` from now on: it adopts the running scheduler's state (`adopt_state`), and the
    /// device model follows its root rate. Used by every reload path (the loop's, a worker's).
    pub(crate) fn install(
        &mut self,
        mut new: Sched,
        link: linkshare_core::linklayer::LinkLayer,
        text: (String, String),
        path: Option<PathBuf>,
        now: Time,
    ) -> control::ReloadReport {
        let report = match self.sched.take() {
            Some(mut o) => adopt_state(&mut new, &mut o, now),
            None => control::ReloadReport::default(),
        };
        self.link_bps = root_rate(&new);
        self.device_buffer = self
            .device_buffer_opt
            .unwrap_or(default_device_buffer(self.link_bps));
        self.sched = Some(new);
        self.link = link;
        self.sync_egress();
        self.live.clear();
        self.eligible = None;
        self.policy_text = Some(text);
        if let Some(p) = path {
            self.policy_path = Some(p);
        }
        report
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

/// Direction `d`'s emulated link from `--emulate` and `--path-delay` (`key` says which: `Src` is
/// the forward direction), or `None` when it would do nothing.
fn emulator(opts: &Options, d: &Dir, key: emulate::AddrKey) -> Option<emulate::Emulator> {
    let e = opts.emulate.clone().unwrap_or_default();
    let fwd = key == emulate::AddrKey::Src;
    let mut spec = emulate::LineSpec {
        rate: if fwd { e.rate } else { None },
        delay: if fwd { e.delay } else { e.reverse_delay },
        loss: if fwd { e.loss } else { 0.0 },
        seed: e.seed,
        paths: opts.path_delays.clone(),
        key,
        limit_bytes: 0,
    };
    let idle = spec.rate.is_none() && spec.loss == 0.0 && spec.max_delay().0 == 0;
    if idle && !(fwd && opts.emulate.is_some()) {
        return None;
    }
    // The bound: the emulated rate, else the faster of the policy's root and the line rate.
    let bps = spec
        .rate
        .map(|r| r.0)
        .or_else(|| Some(d.link_bps.max(d.line_bps)).filter(|b| *b > 0))
        .unwrap_or(emulate::FALLBACK_LINE_BPS);
    spec.limit_bytes = emulate::line_limit(bps, spec.max_delay());
    Some(emulate::Emulator::new(spec))
}

/// The device buffers drain at the interfaces' line rates (as given, or as the drivers report
/// them): direction 0 leaves on OUT, direction 1 on IN.
pub(crate) fn set_line_rates(opts: &Options, d0: &mut Dir, d1: &mut Dir) {
    let line = |dev: &str| {
        opts.line_rate
            .or_else(|| sys::link_speed_bps(dev))
            .unwrap_or(0)
    };
    d0.line_bps = line(&opts.dev_out);
    d1.line_bps = line(&opts.dev_in);
    d0.sync_egress();
    d1.sync_egress();
}

/// Frames taken from a receive ring per interface per loop turn (whole blocks may overshoot it).
const RX_BUDGET: usize = 256;
/// … in chunks of this many, each offered to the scheduler as one burst, the clock looked at
/// between chunks (a receive turn stops at the guard before a departure).
const RX_CHUNK: usize = 32;
/// No receive turn starts this close to a departure (nor closer than the spin's margin): the
/// loop spins on the clock alone and sends. A turn of RX_CHUNK frames costs ~5-15 µs.
const RX_GUARD_NS: u64 = 15_000;
/// When the transmit ring is full or the kernel asked to retry, look again this much later.
const TX_RETRY_NS: u64 = 20_000;
/// While spinning towards a departure, the event queue is looked at this often (µs of delay
/// for a control client or a signal; no system call in between).
const SPIN_POLL_NS: u64 = 50_000;
/// A worker whose shard has a gate polls it at least this often, idle or not: a gate mints only
/// when polled, so an idle shard's share reaches the pool for the busy shards only then
/// (core/src/shard, "Sizing": the pool holds at least 1 ms of the root's rate).
const GATE_TICK_NS: u64 = 1_000_000;
/// A loop later than this for the instant it waited for replays the missed stretch
/// ([`Shaper::service`]); a shorter lateness loses nothing (a bucket holds at least a frame).
const CATCH_UP_AFTER_NS: u64 = 50_000;
/// Spare frame buffers kept for reuse.
const POOL_MAX: usize = 4096;

/// The running shaper.
pub struct Shaper {
    opts: Options,
    ports: [Box<dyn Port>; 2],
    names: [String; 2],
    ifs: [IfStats; 2],
    dirs: [Dir; 2],
    lateness: Hist,
    epoch_ns: u64,
    /// Eligible instants (absolute ns) of the frames pushed on each port since its last flush.
    late_pending: [Vec<u64>; 2],
    /// Spare frame buffers.
    pool: Vec<Vec<u8>>,
    rx_scratch: Vec<Vec<u8>>,
    /// Frames taken from a scheduler in one turn, before they are sent.
    tx_scratch: Vec<Frame>,
    /// Frames received this turn for one direction's scheduler, offered as one burst.
    rx_batch: Vec<Frame>,
    refused: Vec<linkshare_core::qdisc::Dropped<Frame>>,
    /// The control socket, bound by [`Shaper::run`].
    control: Option<control::Server>,
    control_stats: control::ControlStats,
    /// The metrics endpoint, bound by [`Shaper::run`] when asked for (http/).
    http: Option<http::Http>,
    /// The dashboard, bound by [`Shaper::run`] when asked for (http/web.rs).
    web: Option<http::Http>,
    /// Policy reloads by outcome (reload.rs counts them).
    reloads: control::snapshot::ReloadCounts,
    /// Turns replayed to catch up a late wake-up ([`Shaper::service`]).
    catch_up_turns: u64,
    /// The thread that builds reloaded policies off the loop (`None` on a worker of
    /// `--workers N`: the control thread has it).
    builder: Option<builder::Builder>,
    /// SIGHUP reloads still being built (READY is told to systemd when none is left).
    hangups_pending: usize,
    /// How early the timer is armed before a paced departure (wake.rs).
    wake: wake::EarlyWake,
    /// The interface locks, held while the shaper lives (by the control thread with workers).
    _locks: Option<guard::InterfaceLocks>,
    /// On a worker of `--workers N`: its inbox, its peers and the control thread (workers/).
    worker: Option<workers::Link>,
}

const T_SOCK0: u64 = 0;
const T_SOCK1: u64 = 1;
const T_TIMER: u64 = 2;
const T_SIG: u64 = 3;
const T_CTL: u64 = 4;
const T_CLIENT: u64 = 5;
const T_HTTP: u64 = 6;
const T_HTTP_CLIENT: u64 = 7;
const T_WEB: u64 = 8;
const T_WEB_CLIENT: u64 = 9;
const T_BUILT: u64 = 10;
const T_WAKE: u64 = 11;

impl Shaper {
    /// Open the devices and build the schedulers. Errors are ready to print.
    pub fn new(opts: Options) -> anyhow::Result<Shaper> {
        let wake = match opts.busy_poll_ns {
            Some(ns) => wake::EarlyWake::fixed(ns),
            None => wake::EarlyWake::learning(wake::MAX_MARGIN_NS),
        };
        guard::check_no_loop(&opts.dev_in, &opts.dev_out)?;
        let locks = guard::lock_interfaces(&opts.lock_dir, &[&opts.dev_in, &opts.dev_out])?;
        let text = std::fs::read_to_string(&opts.policy)
            .with_context(|| format!("cannot read {}", opts.policy.display()))?;
        let origin = opts.policy.display().to_string();
        let (fwd_policy, fwd) = load_sched(&text, &origin).map_err(|d| anyhow::anyhow!("{d}"))?;
        let rev = match &opts.reverse_policy {
            Some(p) => {
                let t = std::fs::read_to_string(p)
                    .with_context(|| format!("cannot read {}", p.display()))?;
                let o = p.display().to_string();
                let (p, s) = load_sched(&t, &o).map_err(|d| anyhow::anyhow!("{d}"))?;
                Some((s, t, o, p.link_layer()))
            }
            None => None,
        };
        let p0 = xdp::open_port(&opts.dev_in, opts.io, opts.rx_ring)
            .with_context(|| format!("cannot open {}", opts.dev_in))?;
        let p1 = xdp::open_port(&opts.dev_out, opts.io, opts.rx_ring)
            .with_context(|| format!("cannot open {}", opts.dev_out))?;
        let mut d0 = Dir::new(Some(fwd), Some(opts.policy.clone()), 1, opts.device_buffer);
        d0.policy_text = Some((text, origin));
        d0.link = fwd_policy.link_layer();
        let mut d1 = match rev {
            Some((s, t, o, link)) => {
                let mut d = Dir::new(Some(s), opts.reverse_policy.clone(), 0, opts.device_buffer);
                d.policy_text = Some((t, o));
                d.link = link;
                d
            }
            None => Dir::new(None, None, 0, opts.device_buffer),
        };
        set_line_rates(&opts, &mut d0, &mut d1);
        d0.emu = emulator(&opts, &d0, emulate::AddrKey::Src);
        d1.emu = emulator(&opts, &d1, emulate::AddrKey::Dst);
        let builder =
            builder::Builder::start().context("cannot start the policy builder thread")?;
        Ok(Shaper::assemble(
            opts,
            [p0, p1],
            [d0, d1],
            wake,
            Some(builder),
            Some(locks),
            None,
        ))
    }

    /// A shaper from its parts (the single-threaded one, or one worker of several).
    pub(crate) fn assemble(
        opts: Options,
        ports: [Box<dyn Port>; 2],
        dirs: [Dir; 2],
        wake: wake::EarlyWake,
        builder: Option<builder::Builder>,
        locks: Option<guard::InterfaceLocks>,
        worker: Option<workers::Link>,
    ) -> Shaper {
        Shaper {
            names: [opts.dev_in.clone(), opts.dev_out.clone()],
            opts,
            ports,
            ifs: Default::default(),
            dirs,
            lateness: Hist::default(),
            epoch_ns: sys::monotonic_ns(),
            late_pending: [Vec::new(), Vec::new()],
            pool: Vec::new(),
            rx_scratch: Vec::new(),
            tx_scratch: Vec::new(),
            rx_batch: Vec::new(),
            refused: Vec::new(),
            control: None,
            control_stats: Default::default(),
            http: None,
            web: None,
            reloads: Default::default(),
            catch_up_turns: 0,
            builder,
            hangups_pending: 0,
            wake,
            _locks: locks,
            worker,
        }
    }

    fn now(&self) -> Time {
        Time(sys::monotonic_ns().saturating_sub(self.epoch_ns))
    }

    fn recycle(&mut self, v: Vec<u8>) {
        if self.pool.len() < POOL_MAX && v.capacity() >= 1514 {
            self.pool.push(v);
        }
    }

    /// Take up to `budget` frames from interface `i`'s receive ring; returns how many.
    fn rx(&mut self, i: usize, budget: usize) -> usize {
        let mut frames = std::mem::take(&mut self.rx_scratch);
        let pool = &mut self.pool;
        let n = self.ports[i].rx_batch(budget, &mut |f: RxFrame<'_>| {
            if f.truncated {
                return; // counted by the port (rx_truncated)
            }
            let mut v = pool.pop().unwrap_or_default();
            f.copy_into(&mut v);
            frames.push(v);
        });
        for v in frames.drain(..) {
            self.on_frame(i, v);
        }
        self.rx_scratch = frames;
        self.enqueue_batch(i);
        n
    }

    /// Offer the frames of direction `i` this turn received to its scheduler in one burst
    /// (`Qdisc::enqueue_burst`: HTB overlaps the cache misses of the whole burst); refused and
    /// dropped frames are counted by the scheduler, their buffers reused.
    fn enqueue_batch(&mut self, i: usize) {
        if self.rx_batch.is_empty() {
            return;
        }
        let now = self.now();
        let mut batch = std::mem::take(&mut self.rx_batch);
        let mut refused = std::mem::take(&mut self.refused);
        // A worker has classified its frames already (workers/worker.rs `steer`).
        let classes = self.worker.as_mut().map(|l| std::mem::take(&mut l.local));
        match (&mut self.dirs[i].sched, classes) {
            (Some(Sched::Shard(q)), Some(c)) if c.len() == batch.len() => {
                q.enqueue_burst_to(&c, &mut batch, now, &mut refused);
                while let Some(d) = q.take_dropped() {
                    refused.push(d);
                }
                if let Some(l) = self.worker.as_mut() {
                    l.local = c;
                    l.local.clear();
                }
            }
            (Some(s), _) => {
                let q = s.q();
                q.enqueue_burst(&mut batch, now, &mut refused);
                while let Some(d) = q.take_dropped() {
                    refused.push(d);
                }
            }
            (None, _) => {}
        }
        for d in refused.drain(..) {
            self.recycle(d.packet.bytes);
        }
        // Left only if the direction lost its scheduler meanwhile (it cannot within a turn).
        for f in batch.drain(..) {
            self.recycle(f.bytes);
        }
        self.rx_batch = batch;
        self.refused = refused;
    }

    fn on_frame(&mut self, i: usize, bytes: Vec<u8>) {
        self.ifs[i].rx_packets += 1;
        self.ifs[i].rx_bytes += bytes.len() as u64;
        let to = self.dirs[i].to;
        match classify_frame(bytes) {
            Parsed::Other(bytes) => {
                self.ifs[i].non_ip += 1;
                self.send(to, bytes);
            }
            Parsed::Malformed(e) => {
                *self.ifs[i].malformed.entry(e.name()).or_insert(0) += 1;
            }
            Parsed::Ip(mut f) => {
                f.meta.len = self.dirs[i].link.size(f.meta.len);
                if f.meta.frag != Fragment::None {
                    self.ifs[i].fragments += 1;
                }
                if let Some(issue) = f.meta.issue {
                    let name = match issue {
                        ParseIssue::TruncatedL4 => "truncated_l4",
                        ParseIssue::ExtensionChain => "extension_chain",
                    };
                    *self.ifs[i].issues.entry(name).or_insert(0) += 1;
                }
                if self.worker.is_some() {
                    // One worker of several: to the worker that owns the frame's class.
                    self.steer(i, f);
                    return;
                }
                match &mut self.dirs[i].sched {
                    // Offered with the rest of the turn's frames (`enqueue_batch`).
                    Some(_) => self.rx_batch.push(f),
                    None => match &mut self.dirs[i].emu {
                        // Unshaped but delayed (the reverse direction's `reverse_delay` and
                        // path delays): onto the line; `service` sends it when due.
                        Some(e) => {
                            let now_ns = sys::monotonic_ns();
                            if let Err(v) = e.push(now_ns, f.bytes, f.meta.src, f.meta.dst) {
                                self.recycle(v);
                            }
                        }
                        None => {
                            self.send(to, f.bytes);
                        }
                    },
                }
            }
        }
    }

    /// Queue a frame on port `to`; a frame that cannot be queued is counted by reason.
    fn send(&mut self, to: usize, bytes: Vec<u8>) -> bool {
        let ok = match self.ports[to].tx_push(&bytes) {
            Ok(()) => true,
            Err(TxDrop::RingFull) => {
                self.ifs[to].tx_ring_full += 1;
                false
            }
            Err(TxDrop::TooBig) => {
                self.ifs[to].tx_too_big += 1;
                false
            }
        };
        self.recycle(bytes);
        ok
    }

    /// Send what the scheduler of direction `d` lets go now; sets its deadline.
    ///
    /// A loop that comes back later than the instant it waited for (descheduled by a busy
    /// machine, a late timer) first replays the missed stretch: the scheduler is asked at each
    /// instant it named in turn, from that instant on (at most `catch_up_ns` back), before it is
    /// asked at `now`. The packets it would have sent on time leave at once, late but not lost:
    /// without this a class's bucket overflows while the loop is away (its burst covers about
    /// 1 ms) and the class loses that rate for good, which is what a late watchdog does to the
    /// kernel's HTB. O(steps) turns, each a normal turn; bounded by the ring's room.
    fn service(&mut self, d: usize) {
        let now_ns = sys::monotonic_ns();
        let catch_up = if self.dirs[d].emu.is_some() {
            0
        } else {
            self.opts.catch_up_ns
        };
        let mut at = 0;
        let late = |e: &u64| catch_up > 0 && e.saturating_add(CATCH_UP_AFTER_NS) < now_ns;
        while let Some(e) = self.dirs[d].eligible.filter(late) {
            let v = e.max(now_ns - catch_up.min(now_ns));
            if v <= at || v >= now_ns || self.ports[self.dirs[d].to].tx_room() == 0 {
                break;
            }
            at = v;
            self.service_at(d, v);
            self.catch_up_turns += 1;
            if self.ports[self.dirs[d].to].tx_room() == 0 {
                // The ring is full before the replay reached `now`: go on from `v` next turn
                // (a turn at `now` would forfeit what is left of the missed stretch).
                let dir = &mut self.dirs[d];
                dir.eligible = Some(dir.eligible.map_or(v, |e| e.min(v)));
                min_deadline(&mut dir.deadline, now_ns + TX_RETRY_NS);
                return;
            }
        }
        self.service_at(d, now_ns);
    }

    /// Send what the scheduler of direction `d` lets go at `now_ns` (the loop's clock), under
    /// the device model's pull rule ([`egress::egress_turn`], the same model as the
    /// simulator's link); sets its deadline.
    fn service_at(&mut self, d: usize, now_ns: u64) {
        let now = Time(now_ns.saturating_sub(self.epoch_ns));
        let epoch = self.epoch_ns;
        self.dirs[d].deadline = None;
        self.flush_emu(d, now_ns);
        let to = self.dirs[d].to;
        let room = self.ports[to].tx_room();
        let mut frames = std::mem::take(&mut self.tx_scratch);
        let mut spare = Vec::new();
        let dir = &mut self.dirs[d];
        let turn = match &mut dir.sched {
            Some(s) => egress::egress_turn(
                &mut dir.egress,
                s.q(),
                now,
                room,
                &mut |f: Frame| frames.push(f),
                &mut |f: Frame| spare.push(f.bytes),
                &mut |_| {},
            ),
            None => egress::Turn {
                stop: Some(Stop::Empty),
                next_wakeup: None,
            },
        };
        for v in spare {
            self.recycle(v);
        }
        // The first frame to leave carries the instant the loop waited for (lateness); with
        // nothing sent, that instant still stands.
        let prior = self.dirs[d].eligible.take();
        let (mut eligible, waited) = if frames.is_empty() {
            (None, prior)
        } else {
            (prior, None)
        };
        for p in frames.drain(..) {
            let e = eligible.take();
            if let Some(em) = &mut self.dirs[d].emu {
                if let Err(f) = em.push(now_ns, p.bytes, p.meta.src, p.meta.dst) {
                    self.recycle(f);
                }
            } else if self.send(to, p.bytes) {
                if let Some(e) = e {
                    self.late_pending[to].push(e);
                }
            }
        }
        self.tx_scratch = frames;
        self.flush_emu(d, now_ns);
        let dir = &mut self.dirs[d];
        dir.eligible = waited;
        match turn.stop {
            None => min_deadline(&mut dir.deadline, now_ns + TX_RETRY_NS),
            Some(Stop::DeviceFull { until }) => {
                let t = until.0 + epoch;
                dir.eligible = Some(dir.eligible.map_or(t, |e| e.max(t)));
            }
            Some(Stop::Throttled { until, .. }) => dir.eligible = Some(until.0 + epoch),
            Some(Stop::Empty) => {}
        }
        if let Some(t) = turn.next_wakeup {
            min_deadline(&mut dir.deadline, t.0 + epoch);
        }
    }

    /// Send the emulated link's due frames while the ring has room; fold its next due time into
    /// the deadline.
    fn flush_emu(&mut self, d: usize, now_ns: u64) {
        let to = self.dirs[d].to;
        while self.dirs[d]
            .emu
            .as_ref()
            .is_some_and(|e| e.next_due().is_some_and(|t| t <= now_ns))
        {
            if self.ports[to].tx_room() == 0 {
                min_deadline(&mut self.dirs[d].deadline, now_ns + TX_RETRY_NS);
                return;
            }
            match self.dirs[d].emu.as_mut().and_then(|e| e.pop_due(now_ns)) {
                Some(f) => {
                    self.send(to, f);
                }
                None => break,
            }
        }
        if let Some(t) = self.dirs[d].emu.as_ref().and_then(|e| e.next_due()) {
            min_deadline(&mut self.dirs[d].deadline, t);
        }
    }

    /// Kick port `p`'s transmit ring; record the lateness of paced frames that just left.
    /// Returns whether the ring asked to be kicked again.
    fn flush_port(&mut self, p: usize) -> bool {
        // Departure = the moment the kernel is told to send the batch (the kick itself may run
        // the receiver's stack in softirq context and take tens of µs on veth).
        if !self.late_pending[p].is_empty() {
            let now = sys::monotonic_ns();
            for e in self.late_pending[p].drain(..) {
                self.lateness.record(now.saturating_sub(e));
            }
        }
        self.ports[p].tx_flush()
    }

    /// Take up to [`RX_BUDGET`] frames from port `i` in chunks of [`RX_CHUNK`], stopping early
    /// once the clock passes `until` (the guard before the next departure). Returns whether
    /// frames may be left.
    fn rx_turn(&mut self, i: usize, until: Option<u64>) -> bool {
        let mut taken = 0;
        while taken < RX_BUDGET {
            let n = self.rx(i, RX_CHUNK);
            taken += n;
            if n < RX_CHUNK {
                return false;
            }
            if until.is_some_and(|u| sys::monotonic_ns() >= u) {
                break;
            }
        }
        true
    }

    fn refresh_ports(&mut self) {
        for i in 0..2 {
            self.ifs[i].port = self.ports[i].counters(true);
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

    /// The I/O of both interfaces, as printed at start (`packet`, `xdp native/copy`, …).
    pub(crate) fn io_name(&self) -> String {
        let io = (self.ports[0].io(), self.ports[1].io());
        if io.0 == io.1 {
            io.0
        } else {
            format!("{} / {}", io.0, io.1)
        }
    }

    /// Bind the control socket and the HTTP endpoints, watch signals and the builder, and tell
    /// the world the shaper runs. Returns the signalfd.
    fn start_control_plane(
        &mut self,
        ep: std::os::fd::RawFd,
    ) -> anyhow::Result<std::os::fd::OwnedFd> {
        let mut srv = control::Server::bind(&self.opts.control)?;
        let sig = sys::signalfd_term_hup()?;
        sys::epoll_add(ep, sig.as_raw_fd(), T_SIG)?;
        sys::epoll_add(ep, srv.listen_fd(), T_CTL)?;
        if let Some(b) = &self.builder {
            sys::epoll_add(ep, b.fd(), T_BUILT)?;
        }
        srv.attach(ep, T_CLIENT);
        self.control = Some(srv);
        if let Some(addr) = self.opts.metrics {
            let mut h = http::Http::bind(addr)?;
            sys::epoll_add(ep, h.listen_fd(), T_HTTP)?;
            h.attach(ep, T_HTTP_CLIENT);
            http::announce(&h, "metrics", "/metrics");
            self.http = Some(h);
        }
        if let Some(addr) = self.opts.web {
            let mut h = http::Http::bind(addr)?;
            sys::epoll_add(ep, h.listen_fd(), T_WEB)?;
            h.attach(ep, T_WEB_CLIENT);
            http::announce(&h, "dashboard", "/");
            self.web = Some(h);
        }
        let io = self.io_name();
        eprintln!(
            "linkshare: running {} -> {} (io {io}), control {}",
            self.names[0],
            self.names[1],
            self.opts.control.display()
        );
        notify::tell(&format!(
            "READY=1\nSTATUS=shaping {} -> {}",
            self.names[0], self.names[1]
        ));
        Ok(sig)
    }

    /// Run until SIGTERM/SIGINT. Returns the exit code.
    pub fn run(&mut self) -> anyhow::Result<i32> {
        sys::set_min_timer_slack()?;
        let index = self.worker.as_ref().map_or(0, |l| l.index);
        if let Some(cpu) = affinity::cpu_for(&self.opts.cpus, index) {
            affinity::pin(cpu).context("--cpus")?;
        }
        if let Some(n) = self.opts.nice {
            sys::set_nice(n).context("--nice")?;
        }
        if let Some(prio) = self.opts.realtime {
            sys::set_fifo(prio).context("--realtime")?;
            if let Err(e) = sys::lock_memory() {
                eprintln!("linkshare: warning: --realtime: {e}; page faults may delay departures");
            }
        }
        let ep = sys::epoll_create()?;
        let timer = sys::timerfd_create()?;
        sys::epoll_add(ep.as_raw_fd(), self.ports[0].fd(), T_SOCK0)?;
        sys::epoll_add(ep.as_raw_fd(), self.ports[1].fd(), T_SOCK1)?;
        sys::epoll_add(ep.as_raw_fd(), timer.as_raw_fd(), T_TIMER)?;
        // A worker of several hears only its peers and the control thread; the single shaper
        // serves the control plane itself.
        let sig = match &self.worker {
            Some(l) => {
                sys::epoll_add(ep.as_raw_fd(), l.wake.as_raw_fd(), T_WAKE)?;
                None
            }
            None => Some(self.start_control_plane(ep.as_raw_fd())?),
        };
        let mut ready = Vec::new();
        let mut last_live = sys::monotonic_ns();
        let mut stopping: Option<u64> = None;
        let mut armed: Option<u64> = None;
        let mut last_poll = 0u64;
        let mut deadline: Option<u64> = None;
        let mut rx_owed = false;
        let mut gate_tick = 0u64;
        loop {
            let mut more_rx = false;
            // The last stretch before a departure (within the spin's margin and RX_GUARD_NS):
            // no receive turn, which can take tens of µs, but the clock alone and then the
            // departure. A receive turn is owed after it, so arrivals wait at most one guard.
            let guard = self.wake.margin_ns().min(RX_GUARD_NS);
            let t0 = sys::monotonic_ns();
            let imminent = deadline.filter(|t| !rx_owed && *t > t0 && *t - t0 <= guard);
            if let Some(t) = imminent {
                while sys::monotonic_ns() < t {
                    std::hint::spin_loop();
                }
                rx_owed = true;
            } else if stopping.is_none() && !self.worker.as_ref().is_some_and(|l| l.quiet) {
                // In chunks, and no further than the guard before the next departure.
                let until = deadline.map(|t| t.saturating_sub(guard));
                more_rx |= self.rx_turn(0, until);
                more_rx |= self.rx_turn(1, until);
                rx_owed = false;
            }
            if let Some(l) = self.worker.as_mut() {
                l.flush_outbox();
            }
            // The direction due first goes first, and each is kicked as soon as it is served.
            let first = match (self.dirs[0].deadline, self.dirs[1].deadline) {
                (Some(a), Some(b)) if b < a => 1,
                (None, Some(_)) => 1,
                _ => 0,
            };
            let mut retry = false;
            for d in [first, 1 - first] {
                self.service(d);
                retry |= self.flush_port(self.dirs[d].to);
            }
            let now = sys::monotonic_ns();
            if now - last_live >= 100_000_000 {
                let dt = (now - last_live) as f64 / 1e9;
                self.dirs[0].update_live(dt);
                self.dirs[1].update_live(dt);
                self.refresh_ports();
                last_live = now;
            }
            if let Some(t0) = stopping {
                // A worker first takes what its peers handed over before it stopped.
                let took = self.take_handoffs();
                if took == 0
                    && ((self.backlog_packets() == 0 && !retry) || now - t0 > 1_000_000_000)
                {
                    break;
                }
            }
            deadline = self.dirs.iter().filter_map(|d| d.deadline).min();
            if retry {
                min_deadline(&mut deadline, now + TX_RETRY_NS);
            }
            // The gate's poll (a worker of a shared root) is a plain wake-up: no spin before it.
            // Every loop turn serves both directions, and that polls the gate.
            let gated = self
                .dirs
                .iter()
                .any(|d| matches!(&d.sched, Some(Sched::Shard(s)) if s.gate().is_some()));
            let soft = gated.then(|| {
                if now >= gate_tick {
                    gate_tick = now + GATE_TICK_NS;
                }
                gate_tick
            });
            let timeout = match deadline {
                _ if more_rx => 0,
                Some(t) if t <= now + self.wake.margin_ns() => 0, // busy-poll short waits
                Some(t) => {
                    // Wake a margin early and spin the rest: timer wake-ups are tens of µs late
                    // on a VM, a spin is not (the margin is learnt from the timer: wake.rs).
                    let at = (t - self.wake.margin_ns()).min(soft.unwrap_or(u64::MAX));
                    if armed != Some(at) {
                        sys::timerfd_set_abs(timer.as_raw_fd(), at)?;
                        armed = Some(at);
                    }
                    100
                }
                None => {
                    if let Some(at) = soft.filter(|&at| armed != Some(at)) {
                        sys::timerfd_set_abs(timer.as_raw_fd(), at)?;
                        armed = Some(at);
                    }
                    100
                }
            };
            // A spin (a departure due within the margin) polls the rings without a system
            // call; events (control, signals, peers) are still looked at every SPIN_POLL_NS.
            let spinning = timeout == 0 && !more_rx && !retry && deadline.is_some();
            if spinning && now.saturating_sub(last_poll) < SPIN_POLL_NS {
                continue;
            }
            sys::epoll_wait(ep.as_raw_fd(), &mut ready, timeout)?;
            last_poll = sys::monotonic_ns();
            if timeout != 0 {
                self.wake.slept(now, last_poll);
            }
            self.wake.duty(last_poll);
            for &tok in ready.iter() {
                match tok {
                    T_TIMER => {
                        let mut b = [0u8; 8];
                        sys::read_some(timer.as_raw_fd(), &mut b);
                        // A sample of the timer's latency only if the loop slept waiting for
                        // it: a wake-up found late by a busy loop says nothing of the timer.
                        if let (Some(at), true) = (armed, timeout != 0) {
                            self.wake.record(at, sys::monotonic_ns());
                        }
                        armed = None;
                    }
                    T_WAKE => self.on_wake(&mut stopping),
                    T_SIG => {
                        let mut b = [0u8; 128];
                        let sig = sig.as_ref().map_or(-1, |s| s.as_raw_fd());
                        if sys::read_some(sig, &mut b) > 0 {
                            match sys::signo_of(&b) {
                                Some(s) if s == libc::SIGHUP as u32 => self.on_sighup(),
                                Some(_) => {
                                    if stopping.is_none() {
                                        notify::tell("STOPPING=1\nSTATUS=draining");
                                    }
                                    stopping.get_or_insert(sys::monotonic_ns());
                                }
                                None => {}
                            }
                        }
                    }
                    _ => {}
                }
            }
            // Reloads built off the loop: install them and answer who asked.
            if ready.contains(&T_BUILT) {
                self.take_builds();
            }
            // Control clients: never blocks (a turn is bounded; see control::server).
            if ready.iter().any(|t| *t == T_CTL || *t == T_CLIENT) {
                self.serve_control();
            }
            // Metrics and dashboard clients: the same discipline (http/); also every
            // http::TICK_NS while any is connected, so a stalled one is dropped and the
            // dashboard's streams are fed.
            if ready.iter().any(|t| *t == T_HTTP || *t == T_HTTP_CLIENT)
                || self
                    .http
                    .as_ref()
                    .is_some_and(|h| h.due(sys::monotonic_ns()))
            {
                self.serve_http();
            }
            if ready.iter().any(|t| *t == T_WEB || *t == T_WEB_CLIENT)
                || self
                    .web
                    .as_ref()
                    .is_some_and(|h| h.due(sys::monotonic_ns()))
            {
                self.serve_web();
            }
        }
        // Removes the socket file.
        self.control = None;
        self.http = None;
        self.web = None;
        Ok(0)
    }
}
