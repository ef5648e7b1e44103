//! linkshare's real shaper: a bump-in-the-wire between two Linux interfaces over AF_PACKET.
//!
//! One thread, one epoll loop over the two ports (AF_PACKET rings, see [`port`]), a timerfd armed
//! a margin before the scheduler's `NotBefore` instant (the margin learnt from the timer's own
//! latency, wake.rs; waits shorter than it are busy-polled), a signalfd and
//! the control socket. Each turn: take a batch from each receive ring, dequeue what the
//! schedulers let go while the transmit ring has room, kick each transmit ring once, record the
//! lateness of paced departures; control clients are served in the same loop but never block it.
//! Nothing in the loop walks the classes periodically: readers of the counters are served by
//! the stats plane's thread (control/plane.rs), for which the loop copies the class counters
//! when asked.
//! See docs/router.md.
//!
//! Modules by concern: `options` (the run options, [`Options`]), `dir` (a direction's state:
//! its scheduler, device model and emulated link), `run` (the event loop, [`Shaper::run`]),
//! [`port`] (rings), [`xdp`] (AF_XDP, `--io`), [`control`] (the protocol and its non-blocking
//! server), [`guard`] (interface locks, loop detection), `control::stat` (the `stat` object),
//! `reload` (policy replacement and state adoption), [`emulate`] (the emulated link), [`notify`]
//! (systemd's READY/RELOADING/STOPPING), [`sys`] (system calls).

pub mod affinity;
mod builder;
mod circuits;
mod coalesce;
pub mod conn;
pub mod control;
mod dir;
pub mod egress;
pub mod emulate;
pub mod failopen;
pub mod frame;
pub mod guard;
pub mod hist;
pub mod http;
pub mod last_good;
pub mod membound;
pub mod notify;
mod options;
mod patch;
mod plane;
pub mod port;
mod reload;
mod run;
pub mod sys;
mod upload;
pub mod wake;
mod workers;
pub mod xdp;

use anyhow::Context;
use linkshare_config::NonIp;
use linkshare_core::egress::Stop;
use linkshare_core::packet::{Fragment, ParseIssue};
use linkshare_core::{Qdisc, Time};

pub use control::call;
pub use dir::{default_device_buffer, device_model, Sched, FULL_FRAME};
pub use frame::{classify_frame, Frame, Parsed};
pub use hist::Hist;
pub use options::{default_control, random_flow_key, Options, RxSplit, DEFAULT_RUN_DIR};
pub use port::{PacketPort, Port, PortCounters, RxFrame, RxRingKind, TxDrop};
pub use reload::{adopt_state, load_sched, render_config_error};
pub use workers::run as run_workers;
pub use xdp::IoKind;

use dir::{emulator, min_deadline, set_line_rates, Dir, IfStats};

/// Frames taken from a receive ring per interface per loop turn (whole blocks may overshoot it).
const RX_BUDGET: usize = 256;
/// … in chunks of this many, each offered to the scheduler as one burst, the clock looked at
/// between chunks (a receive turn stops at the guard before a departure).
const RX_CHUNK: usize = 32;
/// When the transmit ring is full or the kernel asked to retry, look again this much later.
const TX_RETRY_NS: u64 = 20_000;
/// A loop later than this for the instant it waited for replays the missed stretch
/// ([`Shaper::service`]); a shorter lateness loses nothing (a bucket holds at least a frame).
const CATCH_UP_AFTER_NS: u64 = 50_000;
/// Spare frame buffers kept for reuse.
const POOL_MAX: usize = 4096;

/// Keep the policy the shaper starts with as the last good one (on a thread of its own: a
/// large subscriber table is copied), unless it is that copy already.
pub(crate) fn keep_started(
    opts: &Options,
    text: &str,
    origin: &str,
    policy: &linkshare_config::Policy,
) {
    let Some(store) = opts.last_good.clone() else {
        return;
    };
    last_good::configure(store.clone());
    if store
        .saved()
        .is_some_and(|s| s.display().to_string() == origin)
    {
        return;
    }
    let (text, origin, policy) = (text.to_string(), origin.to_string(), policy.clone());
    let _ = std::thread::Builder::new()
        .name("last-good".into())
        .spawn(move || last_good::remember(&text, &origin, &policy));
}

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
    /// Frames received in the current loop turn (reset at its start): whether receive
    /// coalescing applies (`Options::rx_coalesce_ns`).
    turn_rx: usize,
    coalesce: coalesce::Coalesce,
    /// Frames taken from a scheduler in one turn, before they are sent.
    tx_scratch: Vec<Frame>,
    /// Frames received this turn for one direction's scheduler, offered as one burst.
    rx_batch: Vec<Frame>,
    refused: Vec<linkshare_core::qdisc::Dropped<Frame>>,
    /// The control socket, bound by [`Shaper::run`].
    control: Option<control::Server>,
    control_stats: control::ControlStats,
    /// The stats plane, started by [`Shaper::run`]: answers `stat`, `/metrics` and the
    /// dashboard off this thread from copies of the counters (control/plane.rs).
    plane: Option<plane::Plane>,
    /// The copy of the counters for the plane under way, made a piece per turn
    /// (control/copier.rs).
    copier: control::copier::Copier,
    /// Policy reloads by outcome (reload.rs counts them).
    reloads: control::snapshot::ReloadCounts,
    /// Turns replayed to catch up a late wake-up ([`Shaper::service`]).
    catch_up_turns: u64,
    /// Loop turns that slept for receive coalescing (`stat`'s `rx_coalesced`).
    rx_coalesced: u64,
    /// The bound on the memory queued frames hold (membound.rs).
    mem: membound::QueueMemory,
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
    /// The circuit ids of what each direction runs, for the stats plane's labels.
    circuits: circuits::Circuits,
}

impl Shaper {
    /// Open the devices and build the schedulers. Errors are ready to print.
    pub fn new(opts: Options) -> anyhow::Result<Shaper> {
        let wake = match opts.busy_poll_ns {
            Some(ns) => wake::EarlyWake::fixed(ns),
            None => wake::EarlyWake::learning(wake::MAX_MARGIN_NS),
        };
        guard::check_no_loop(&opts.dev_in, &opts.dev_out)?;
        let locks = guard::lock_interfaces(&opts.lock_dir, &[&opts.dev_in, &opts.dev_out])?;
        let with_upload = opts.reverse_policy.is_none();
        let (((fwd_policy, fwd), up), text, origin) =
            last_good::load_at_start(&opts.policy, opts.last_good.as_ref(), |t, o| {
                upload::load_directions(t, o, with_upload)
            })?;
        keep_started(&opts, &text, &origin, &fwd_policy);
        let line = opts
            .line_rate
            .or_else(|| sys::link_speed_bps(&opts.dev_out));
        if let Some(w) = guard::root_above_line(&fwd_policy, line, &opts.dev_out) {
            eprintln!("warning: {w}");
        }
        let rev = match &opts.reverse_policy {
            Some(p) => {
                let t = std::fs::read_to_string(p)
                    .with_context(|| format!("cannot read {}", p.display()))?;
                let o = p.display().to_string();
                let (p, s) = load_sched(&t, &o).map_err(|d| anyhow::anyhow!("{d}"))?;
                Some((s, t, o, p))
            }
            None => up.map(|(p, s)| (s, text.clone(), format!("{origin} (upload side)"), p)),
        };
        let p0 = xdp::open_port(&opts.dev_in, opts.io, opts.rx_ring)
            .with_context(|| format!("cannot open {}", opts.dev_in))?;
        let p1 = xdp::open_port(&opts.dev_out, opts.io, opts.rx_ring)
            .with_context(|| format!("cannot open {}", opts.dev_out))?;
        let mut d0 = Dir::new(Some(fwd), Some(opts.policy.clone()), 1, opts.device_buffer);
        d0.policy_text = Some((text, origin));
        d0.link = dir::LinkRules::of(&fwd_policy);
        let (mut d1, rev_policy) = match rev {
            Some((s, t, o, policy)) => {
                let mut d = Dir::new(Some(s), opts.reverse_policy.clone(), 0, opts.device_buffer);
                d.policy_text = Some((t, o));
                d.link = dir::LinkRules::of(&policy);
                (d, Some(policy))
            }
            None => (Dir::new(None, None, 0, opts.device_buffer), None),
        };
        set_line_rates(&opts, &mut d0, &mut d1);
        d0.emu = emulator(&opts, &d0, emulate::AddrKey::Src);
        d1.emu = emulator(&opts, &d1, emulate::AddrKey::Dst);
        let mut builder =
            builder::Builder::start(true).context("cannot start the policy builder thread")?;
        // Reloads are compared with the policies running now (builder.rs, patch.rs).
        let circuits = circuits::Circuits::default();
        circuits.set(0, circuits::ids_of(&fwd_policy));
        builder.set_base(0, fwd_policy);
        if let Some(p) = rev_policy {
            circuits.set(1, circuits::ids_of(&p));
            builder.set_base(1, p);
        }
        // The parse's and the build's temporaries are freed; give their pages back.
        sys::release_free_memory();
        let mut s = Shaper::assemble(
            opts,
            [p0, p1],
            [d0, d1],
            wake,
            Some(builder),
            Some(locks),
            None,
        );
        s.circuits = circuits;
        Ok(s)
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
        // A worker of several holds its share of the memory bound.
        let share = match worker {
            Some(_) => opts.workers.max(1) as u64,
            None => 1,
        };
        let mem = membound::QueueMemory::new(opts.queue_memory / share);
        Shaper {
            names: [opts.dev_in.clone(), opts.dev_out.clone()],
            coalesce: coalesce::Coalesce::new(opts.rx_coalesce_ns),
            opts,
            ports,
            ifs: Default::default(),
            dirs,
            lateness: Hist::default(),
            epoch_ns: sys::monotonic_ns(),
            late_pending: [Vec::new(), Vec::new()],
            pool: Vec::new(),
            rx_scratch: Vec::new(),
            turn_rx: 0,
            tx_scratch: Vec::new(),
            rx_batch: Vec::new(),
            refused: Vec::new(),
            control: None,
            control_stats: Default::default(),
            plane: None,
            copier: Default::default(),
            reloads: Default::default(),
            catch_up_turns: 0,
            rx_coalesced: 0,
            mem,
            builder,
            hangups_pending: 0,
            wake,
            _locks: locks,
            worker,
            circuits: Default::default(),
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
        let mem = &mut self.mem;
        let n = self.ports[i].rx_batch(budget, &mut |f: RxFrame<'_>| {
            if f.truncated {
                return; // counted by the port (rx_truncated)
            }
            // Buffers of one size, so the memory bound can count them (membound.rs).
            let mut v = pool
                .pop()
                .unwrap_or_else(|| Vec::with_capacity(membound::FRAME_BUFFER));
            f.copy_into(&mut v);
            mem.saw_buffer(v.capacity());
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
        let mut classes = self.worker.as_mut().map(|l| std::mem::take(&mut l.local));
        // What would take the queued frames past the memory bound is dropped, not offered.
        let room = self.mem.room(self.backlog_packets());
        if batch.len() > room {
            self.mem.drops += (batch.len() - room) as u64;
            if let Some(c) = classes.as_mut().filter(|c| c.len() == batch.len()) {
                c.truncate(room);
            }
            for f in batch.split_off(room) {
                self.recycle(f.bytes);
            }
        }
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
        match frame::classify_frame_keyed(bytes, self.opts.flow_key) {
            Parsed::Other(mut f) => match self.dirs[i].link.non_ip {
                NonIp::Shape if self.dirs[i].sched.is_some() => {
                    self.ifs[i].non_ip_shaped += 1;
                    f.meta.len = self.dirs[i].link.layer.size(f.meta.len);
                    self.admit(i, f);
                }
                NonIp::Drop => {
                    self.ifs[i].non_ip_dropped += 1;
                    self.recycle(f.bytes);
                }
                // Passed, or shaped by a direction that has no scheduler.
                _ => {
                    self.ifs[i].non_ip += 1;
                    self.send(to, f.bytes);
                }
            },
            Parsed::Malformed(e) => {
                *self.ifs[i].malformed.entry(e.name()).or_insert(0) += 1;
            }
            Parsed::Ip(mut f) => {
                f.meta.len = self.dirs[i].link.layer.size(f.meta.len);
                let t = self.dirs[i].link.dscp.apply(&mut f);
                self.ifs[i].dscp_untrusted += u64::from(t.ignored);
                self.ifs[i].dscp_washed += u64::from(t.washed);
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
                self.admit(i, f);
            }
        }
    }

    /// A parsed frame of direction `i` to its scheduler (or, unshaped, to its line or port).
    fn admit(&mut self, i: usize, f: Frame) {
        if self.worker.is_some() {
            // One worker of several: to the worker that owns the frame's class.
            self.steer(i, f);
            return;
        }
        let to = self.dirs[i].to;
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
        if self.ports[self.dirs[d].to].link_gone() {
            // Nothing can leave: the queues wait (no retries every turn) until the loop's
            // 100 ms check finds the interface back and the next turn serves them.
            self.dirs[d].deadline = None;
            return;
        }
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
            self.turn_rx += n;
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
}
