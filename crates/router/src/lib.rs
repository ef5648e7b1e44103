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
//! Modules by concern: `options` (the run options, [`Options`]), `clock` (the one time base),
//! `dir` (a direction's state: its scheduler, device model and emulated link, and its reloads),
//! `datapath` (a direction's sans-IO entry points: frames in, frames out, next wake-up — what
//! the single shaper and each worker drive alike), `run` (the event loop, the same for both, in
//! named steps), `role` (what differs between them, chosen by type at start: `single`, the
//! single shaper's control plane, or a worker's steering, `workers`), [`egress`] (the device
//! model's turn),
//! [`port`] (rings), [`xdp`] (AF_XDP, `--io`), [`control`] (the protocol and its non-blocking
//! server), [`guard`] (interface locks, loop detection), `shaper_stat` (the `stat` object),
//! `reload` (policy replacement and state adoption), [`emulate`] (the emulated link), [`notify`]
//! (systemd's READY/RELOADING/STOPPING), [`sys`] (system calls).

pub mod affinity;
mod background;
mod builder;
mod circuits;
mod clock;
mod coalesce;
pub mod conn;
pub mod control;
mod datapath;
mod dir;
pub mod egress;
pub mod emulate;
pub mod failopen;
pub mod frame;
pub mod guard;
pub mod hist;
pub mod http;
mod inplace;
pub mod last_good;
pub mod membound;
pub mod notify;
mod options;
mod patch;
mod plane;
pub mod port;
mod reload;
mod role;
mod run;
mod shaper_stat;
mod single;
pub mod sys;
mod turns;
mod upload;
pub mod wake;
mod workers;
pub mod xdp;

use linkshare_config::NonIp;
use linkshare_core::packet::{Fragment, ParseIssue};
use linkshare_core::Time;

pub use control::call;
pub use dir::{default_device_buffer, device_model, Sched, FULL_FRAME};
pub use frame::{charged_len, parse_frame, Frame, Parsed};
pub use hist::Hist;
pub use options::{default_control, random_flow_key, Options, RxSplit, DEFAULT_RUN_DIR};
pub use port::{PacketPort, Port, PortCounters, RxFrame, RxRingKind, TxDrop};
pub use reload::{adopt_state, load_sched, render_config_error};
pub use workers::run as run_workers;
pub use xdp::IoKind;

use datapath::Emit;
use dir::{set_line_rates, Dir, IfStats};
use role::Role;
use single::Single;

/// Frames taken from a receive ring per interface per loop turn (whole blocks may overshoot it).
const RX_BUDGET: usize = 256;
/// … in chunks of this many, each offered to the scheduler as one burst, the clock looked at
/// between chunks (a receive turn stops at the guard before a departure).
const RX_CHUNK: usize = 32;
/// Spare frame buffers kept for reuse.
const POOL_MAX: usize = 4096;

/// Spare frame buffers, reused for received frames (at most [`POOL_MAX`]).
#[derive(Default)]
pub(crate) struct Pool(Vec<Vec<u8>>);

impl Pool {
    /// A buffer to receive into: all of one size, so the memory bound can count them
    /// (membound.rs).
    fn take(&mut self) -> Vec<u8> {
        self.0
            .pop()
            .unwrap_or_else(|| Vec::with_capacity(membound::FRAME_BUFFER))
    }

    /// A buffer no longer needed (kept if it can hold a full frame and the pool has room).
    fn put(&mut self, v: Vec<u8>) {
        if self.0.len() < POOL_MAX && v.capacity() >= FULL_FRAME as usize {
            self.0.push(v);
        }
    }
}

/// Queue a frame on `port`; a frame that cannot be queued is counted by reason in `ifs`. The
/// buffer goes back to `pool` either way.
fn transmit(port: &mut dyn Port, ifs: &mut IfStats, pool: &mut Pool, bytes: Vec<u8>) -> bool {
    let ok = match port.tx_push(&bytes) {
        Ok(()) => true,
        Err(TxDrop::RingFull) => {
            ifs.tx_ring_full += 1;
            false
        }
        Err(TxDrop::TooBig) => {
            ifs.tx_too_big += 1;
            false
        }
    };
    pool.put(bytes);
    ok
}

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

/// The running shaper: the single shaper ([`Single`], the default) or one worker of
/// `--workers N` — the same datapath and loop over two owned [`Dir`]s, plus what the role `R`
/// adds (role.rs).
pub struct Shaper<R = Single> {
    opts: Options,
    ports: [Box<dyn Port>; 2],
    names: [String; 2],
    ifs: [IfStats; 2],
    dirs: [Dir; 2],
    lateness: Hist,
    /// The one time base (clock.rs).
    clock: clock::Clock,
    /// Eligible instants of the frames pushed on each port since its last flush.
    late_pending: [Vec<Time>; 2],
    /// Spare frame buffers.
    pool: Pool,
    rx_scratch: Vec<Vec<u8>>,
    /// Frames received in the current loop turn (reset at its start): whether receive
    /// coalescing applies (`Options::rx_coalesce_ns`).
    turn_rx: usize,
    coalesce: coalesce::Coalesce,
    /// Turns replayed to catch up a late wake-up ([`Shaper::service`]).
    catch_up_turns: u64,
    /// Loop turns that slept for receive coalescing (`stat`'s `rx_coalesced`).
    rx_coalesced: u64,
    /// The bound on the memory queued frames hold (membound.rs).
    mem: membound::QueueMemory,
    /// How early the timer is armed before a paced departure (wake.rs).
    wake: wake::EarlyWake,
    /// What only the single shaper or only a worker has (role.rs).
    role: R,
    /// How long each loop turn works between waits (turns.rs).
    turns: turns::TurnWatch,
    /// The pacing and cost of the loop's work besides forwarding (background.rs).
    bg: background::Background,
}

impl<R: Role> Shaper<R> {
    /// A shaper from its parts: its ports, its directions, its role; `mem_share`: how many
    /// shapers share the queue memory bound (`--workers N`: each worker holds its share).
    pub(crate) fn assemble(
        opts: Options,
        ports: [Box<dyn Port>; 2],
        dirs: [Dir; 2],
        role: R,
        mem_share: u64,
    ) -> Shaper<R> {
        let wake = match opts.busy_poll_ns {
            Some(ns) => wake::EarlyWake::fixed(ns),
            None => wake::EarlyWake::learning(wake::MAX_MARGIN_NS),
        };
        let mem = membound::QueueMemory::new(opts.queue_memory / mem_share.max(1));
        let mut dirs = dirs;
        for d in &mut dirs {
            d.catch_up_ns = opts.catch_up_ns;
        }
        Shaper {
            names: [opts.dev_in.clone(), opts.dev_out.clone()],
            coalesce: coalesce::Coalesce::new(opts.rx_coalesce_ns),
            opts,
            ports,
            ifs: Default::default(),
            dirs,
            lateness: Hist::default(),
            clock: clock::Clock::start(),
            late_pending: [Vec::new(), Vec::new()],
            pool: Pool::default(),
            rx_scratch: Vec::new(),
            turn_rx: 0,
            catch_up_turns: 0,
            rx_coalesced: 0,
            mem,
            wake,
            role,
            turns: Default::default(),
            bg: Default::default(),
        }
    }

    fn now(&self) -> Time {
        self.clock.now()
    }

    fn recycle(&mut self, v: Vec<u8>) {
        self.pool.put(v);
    }

    /// Take up to `budget` frames from interface `i`'s receive ring into direction `i`;
    /// returns how many.
    fn rx(&mut self, i: usize, budget: usize) -> usize {
        let mut frames = std::mem::take(&mut self.rx_scratch);
        let pool = &mut self.pool;
        let mem = &mut self.mem;
        let n = self.ports[i].rx_batch(budget, &mut |f: RxFrame<'_>| {
            if f.truncated {
                return; // counted by the port (rx_truncated)
            }
            let mut v = pool.take();
            f.copy_into(&mut v);
            mem.saw_buffer(v.capacity());
            frames.push(v);
        });
        let now = self.now();
        for v in frames.drain(..) {
            self.on_frame(i, v, now);
        }
        self.rx_scratch = frames;
        // The chunk's frames for the scheduler, offered as one burst (datapath.rs); what would
        // take the queued frames past the memory bound is dropped, not offered.
        let room = self.mem.room(self.backlog_packets());
        let now = self.now();
        let pool = &mut self.pool;
        self.mem.drops += self.dirs[i].trim_burst(room, &mut |v| pool.put(v)) as u64;
        self.dirs[i].end_burst(now, &mut |v| pool.put(v));
        n
    }

    /// A frame received on interface `i` at `now`: counted, parsed, and handed to direction
    /// `i` (on a worker, to the worker that owns its class).
    fn on_frame(&mut self, i: usize, bytes: Vec<u8>, now: Time) {
        self.ifs[i].rx_packets += 1;
        self.ifs[i].rx_bytes += bytes.len() as u64;
        let to = self.dirs[i].to;
        match frame::parse_frame_keyed(bytes, self.opts.flow_key, &self.dirs[i].link.layer) {
            Parsed::Other(f) => match self.dirs[i].link.non_ip {
                NonIp::Shape if self.dirs[i].sched.is_some() => {
                    self.ifs[i].non_ip_shaped += 1;
                    R::admit(self, i, f, now);
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
                // Charged at parse (frame::charged_len); the DSCP trust before anything reads it.
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
                R::admit(self, i, f, now);
            }
        }
    }

    /// A parsed frame of direction `i`, received at `now`, to its scheduler's burst (or,
    /// unshaped, to its line or port: `Dir::handle_frame`): the single shaper's
    /// [`Role::admit`] (a worker steers first, workers/worker.rs).
    pub(crate) fn hand_to_dir(&mut self, i: usize, f: Frame, now: Time) {
        let to = self.dirs[i].to;
        let pool = &mut self.pool;
        if let Some(bytes) = self.dirs[i].handle_frame(f, now, &mut |v| pool.put(v)) {
            self.send(to, bytes);
        }
    }

    /// Queue a frame on port `to`; a frame that cannot be queued is counted by reason.
    fn send(&mut self, to: usize, bytes: Vec<u8>) -> bool {
        transmit(
            &mut *self.ports[to],
            &mut self.ifs[to],
            &mut self.pool,
            bytes,
        )
    }

    /// Send what direction `d` lets go now, while its transmit ring has room ([`Dir::
    /// poll_transmit`], which also replays a stretch a late loop missed); the first frame of a
    /// paced departure is remembered for its lateness ([`Shaper::flush_port`]).
    fn service(&mut self, d: usize) {
        if self.ports[self.dirs[d].to].link_gone() {
            // Nothing can leave: the queues wait (no retries every turn) until the loop's
            // 100 ms check finds the interface back and the next turn serves them.
            self.dirs[d].deadline = None;
            return;
        }
        let now = self.now();
        let to = self.dirs[d].to;
        let room = self.ports[to].tx_room();
        let Shaper {
            ports,
            ifs,
            pool,
            late_pending,
            dirs,
            ..
        } = self;
        let replayed = dirs[d].poll_transmit(now, room, &mut |e| match e {
            Emit::Send { bytes, waited } => {
                if transmit(&mut *ports[to], &mut ifs[to], pool, bytes) {
                    late_pending[to].extend(waited);
                }
            }
            Emit::Spare(v) => pool.put(v),
        });
        self.catch_up_turns += replayed;
    }

    /// Kick port `p`'s transmit ring; record the lateness of paced frames that just left.
    /// Returns whether the ring asked to be kicked again.
    fn flush_port(&mut self, p: usize) -> bool {
        // Departure = the moment the kernel is told to send the batch (the kick itself may run
        // the receiver's stack in softirq context and take tens of µs on veth).
        if !self.late_pending[p].is_empty() {
            let now = self.now();
            for e in self.late_pending[p].drain(..) {
                self.lateness.record(now.0.saturating_sub(e.0));
            }
        }
        self.ports[p].tx_flush()
    }

    /// Take up to [`RX_BUDGET`] frames from port `i` in chunks of [`RX_CHUNK`], stopping early
    /// once the clock passes `until` (the guard before the next departure). Returns whether
    /// frames may be left.
    fn rx_turn(&mut self, i: usize, until: Option<Time>) -> bool {
        let mut taken = 0;
        while taken < RX_BUDGET {
            let n = self.rx(i, RX_CHUNK);
            taken += n;
            self.turn_rx += n;
            if n < RX_CHUNK {
                return false;
            }
            if until.is_some_and(|u| self.now() >= u) {
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
        self.dirs.iter().map(Dir::backlog_packets).sum()
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
