//! The shaper's event loop, the same for the single shaper and each worker of `--workers N`.
//!
//! One thread, one epoll: the two ports and the timer, plus the role's fds (role.rs: the single
//! shaper's signals, control socket, builder and stats plane, single.rs; a worker's wake-up fd,
//! rung by its peers and the control thread, workers/worker.rs). Each turn receives, serves
//! both directions, kicks the transmit rings, then sleeps, spins or polls until the next
//! departure; nothing in a turn blocks (see lib.rs and docs/router.md).

use std::os::fd::{AsRawFd, OwnedFd};

use anyhow::Context;
use linkshare_core::Time;

use crate::clock::{after, min_deadline};
use crate::datapath::TX_RETRY_NS;
use crate::dir::{Dir, Sched};
use crate::role::Role;
use crate::{affinity, sys, Shaper};

/// No receive turn starts this close to a departure (nor closer than the spin's margin): the
/// loop spins on the clock alone and sends. A turn of RX_CHUNK frames costs ~5-15 µs.
const RX_GUARD_NS: u64 = 15_000;
/// While spinning towards a departure, the event queue is looked at this often (µs of delay
/// for a control client or a signal; no system call in between).
const SPIN_POLL_NS: u64 = 50_000;
/// A worker whose shard has a gate polls it at least this often, idle or not: a gate mints only
/// when polled, so an idle shard's share reaches the pool for the busy shards only then
/// (core/src/shard, "Sizing": the pool holds at least 1 ms of the root's rate).
const GATE_TICK_NS: u64 = 1_000_000;
/// The ports' counters are refreshed and idle per-flow state reclaimed this often.
const HOUSEKEEPING_NS: u64 = 100_000_000;
/// A drain (stopping) gives up on what is still queued after this long.
const STOP_DRAIN_NS: u64 = 1_000_000_000;

// The loop's epoll tokens: its own, then the roles' (role.rs).
const T_SOCK0: u64 = 0;
const T_SOCK1: u64 = 1;
const T_TIMER: u64 = 2;
pub(crate) const T_SIG: u64 = 3;
pub(crate) const T_CTL: u64 = 4;
/// Control clients' tokens start here (control::server).
pub(crate) const T_CLIENT: u64 = 5;
pub(crate) const T_STATS: u64 = 6;
pub(crate) const T_BUILT: u64 = 10;
pub(crate) const T_WAKE: u64 = 11;

impl<R: Role> Shaper<R> {
    /// Receive coalescing (`--rx-coalesce-us`, coalesce.rs), at the end of every turn; `wait`:
    /// the turn emptied the rings and the loop would now wait for events. Sleeps what
    /// [`crate::coalesce::Coalesce`] says, never past the margin before the next departure.
    /// Returns whether it slept (the events are then looked at without waiting). The sleep is
    /// bounded (≤ 1 ms, checked by the cli), so control clients, signals and frames handed
    /// over by another worker wait at most that long more.
    fn coalesce(&mut self, now: Time, deadline: Option<Time>, wait: bool) -> bool {
        let sleep = self.coalesce.after_turn(now.0, self.turn_rx, wait);
        if sleep == 0 {
            return false;
        }
        let until = deadline
            .map_or(Time::MAX, |t| {
                Time(t.0.saturating_sub(self.wake.margin_ns()))
            })
            .min(after(now, sleep));
        if until <= now {
            return false;
        }
        let t0 = self.now();
        sys::sleep_until_ns(self.clock.monotonic(until));
        self.turns.wait(self.now().0.saturating_sub(t0.0));
        self.rx_coalesced += 1;
        true
    }

    /// Run until told to stop (SIGTERM/SIGINT, or the control thread's stop). Returns the exit
    /// code.
    ///
    /// Each turn, in named steps: [`Shaper::receive_step`] (or the spin to an imminent
    /// departure), [`Shaper::transmit_step`] (both directions, each kicked as soon as it is
    /// served), [`Shaper::housekeeping_step`] (every 100 ms), the drain check while stopping,
    /// [`Shaper::plan_wait`] (timer, busy poll, coalescing), then [`Shaper::wait_step`] and
    /// [`Shaper::events_step`] (timer, signals, peers, builds, control, stats plane).
    pub(crate) fn run_loop(&mut self) -> anyhow::Result<i32> {
        self.prepare_thread()?;
        let ep = sys::epoll_create()?;
        let timer = sys::timerfd_create()?;
        sys::epoll_add(ep.as_raw_fd(), self.ports[0].fd(), T_SOCK0)?;
        sys::epoll_add(ep.as_raw_fd(), self.ports[1].fd(), T_SOCK1)?;
        sys::epoll_add(ep.as_raw_fd(), timer.as_raw_fd(), T_TIMER)?;
        R::start(self, ep.as_raw_fd())?;
        let now = self.now();
        let mut st = LoopState {
            ep,
            timer,
            ready: Vec::new(),
            errored: Vec::new(),
            last_ports: now,
            stopping: None,
            armed: None,
            last_poll: Time(0),
            deadline: None,
            rx_owed: false,
            gate_tick: Time(0),
            more_rx: false,
            retry: false,
            timeout: 0,
        };
        loop {
            // The turn that ends here: how long it worked (turns.rs, `stat`'s `loop_turn_ns`).
            self.turns.end(self.now().0);
            self.turn_rx = 0;
            st.more_rx = self.receive_step(&mut st);
            self.role.end_receive();
            st.retry = self.transmit_step();
            let now = self.now();
            self.housekeeping_step(&mut st, now)?;
            if self.drained(&st, now) {
                break;
            }
            st.timeout = self.plan_wait(&mut st, now)?;
            // A spin (a departure due within the margin) polls the rings without a system
            // call; events (control, signals, peers) are still looked at every SPIN_POLL_NS.
            let spinning = st.timeout == 0 && !st.more_rx && !st.retry && st.deadline.is_some();
            if spinning && now.0.saturating_sub(st.last_poll.0) < SPIN_POLL_NS {
                continue;
            }
            self.wait_step(&mut st, now)?;
            self.events_step(&mut st);
        }
        self.role.stop();
        Ok(0)
    }

    /// The thread's placement and priority (`--cpus`, `--slice-us`, `--nice`, `--realtime`).
    fn prepare_thread(&mut self) -> anyhow::Result<()> {
        sys::set_min_timer_slack()?;
        if let Some(cpu) = affinity::cpu_for(&self.opts.cpus, self.role.cpu_index()) {
            affinity::pin(cpu).context("--cpus")?;
        }
        // The slice first: sched_setattr sets the whole fair policy, and --nice then adjusts it.
        if let (Some(ns), None) = (self.opts.slice_ns, self.opts.realtime) {
            if let Err(e) = sys::set_slice(ns) {
                eprintln!(
                    "linkshare: warning: --slice-us: {e}; the kernel's default slice applies"
                );
            }
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
        Ok(())
    }

    /// Receive from both ports, in chunks and no further than the guard before the next
    /// departure; or, in the last stretch before a departure (within the spin's margin and
    /// RX_GUARD_NS), no receive turn, which can take tens of µs, but the clock alone and then
    /// the departure. A receive turn is owed after that, so arrivals wait at most one guard.
    /// Returns whether frames may be left in a ring.
    fn receive_step(&mut self, st: &mut LoopState) -> bool {
        let guard = self.wake.margin_ns().min(RX_GUARD_NS);
        let t0 = self.now();
        let imminent = st
            .deadline
            .filter(|t| !st.rx_owed && *t > t0 && t.0 - t0.0 <= guard);
        if let Some(t) = imminent {
            while self.now() < t {
                std::hint::spin_loop();
            }
            st.rx_owed = true;
            return false;
        }
        if st.stopping.is_some() || !self.role.receiving() {
            return false;
        }
        let until = st.deadline.map(|t| Time(t.0.saturating_sub(guard)));
        let mut more = self.rx_turn(0, until);
        more |= self.rx_turn(1, until);
        st.rx_owed = false;
        more
    }

    /// Serve both directions, the one due first first, each port kicked as soon as its
    /// direction is served. Returns whether a ring asked to be kicked again.
    fn transmit_step(&mut self) -> bool {
        let first = match (self.dirs[0].next_wakeup(), self.dirs[1].next_wakeup()) {
            (Some(a), Some(b)) if b < a => 1,
            (None, Some(_)) => 1,
            _ => 0,
        };
        let mut retry = false;
        for d in [first, 1 - first] {
            self.service(d);
            retry |= self.flush_port(self.dirs[d].to);
        }
        retry
    }

    /// Every 100 ms: the ports' counters and links, idle per-flow state given back, the role's
    /// own (a worker's heartbeat, systemd's watchdog).
    fn housekeeping_step(&mut self, st: &mut LoopState, now: Time) -> anyhow::Result<()> {
        if now.0.saturating_sub(st.last_ports.0) < HOUSEKEEPING_NS {
            return Ok(());
        }
        self.refresh_ports();
        // An interface deleted, re-created or given a new MTU (port.rs): a reopened port is
        // polled on its new socket.
        for (p, tok) in [(0, T_SOCK0), (1, T_SOCK1)] {
            if self.ports[p].follow_link() {
                sys::epoll_add(st.ep.as_raw_fd(), self.ports[p].fd(), tok)?;
            }
        }
        self.dirs.iter_mut().for_each(|d| d.reclaim_idle(now));
        st.last_ports = now;
        self.role.housekeeping(now, self.clock.monotonic(now));
        Ok(())
    }

    /// Stopping: whether everything queued has left (or a second has passed). What others
    /// still hand over is taken first (a worker's peers, [`Role::take_pending`]).
    fn drained(&mut self, st: &LoopState, now: Time) -> bool {
        let Some(t0) = st.stopping else {
            return false;
        };
        let took = R::take_pending(self);
        took == 0
            && ((self.backlog_packets() == 0 && !st.retry)
                || now.0.saturating_sub(t0.0) > STOP_DRAIN_NS)
    }

    /// The loop's next deadline and how long the wait may block (ms; 0: do not block): the
    /// timer armed a margin before the next departure (waits shorter than the margin are
    /// busy-polled), the gate's tick of a worker of a shared root, receive coalescing.
    fn plan_wait(&mut self, st: &mut LoopState, now: Time) -> anyhow::Result<i32> {
        st.deadline = self.dirs.iter().filter_map(Dir::next_wakeup).min();
        // Work besides forwarding (a rebuilt HTB's take-over, a copy of the counters): its next
        // piece if one is due, and a plain wake-up for the one after (background.rs).
        let background = self.background_step(now);
        if st.retry {
            min_deadline(&mut st.deadline, after(now, TX_RETRY_NS));
        }
        // The gate's poll (a worker of a shared root) and the next piece of background work are
        // plain wake-ups: no spin before them.
        // Every loop turn serves both directions, and that polls the gate.
        let gated = self
            .dirs
            .iter()
            .any(|d| matches!(&d.sched, Some(Sched::Shard(s)) if s.gate().is_some()));
        let gate = gated.then(|| {
            if now >= st.gate_tick {
                st.gate_tick = after(now, GATE_TICK_NS);
            }
            st.gate_tick
        });
        let soft = match (gate, background) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let margin = self.wake.margin_ns();
        let timeout = match st.deadline {
            _ if st.more_rx => 0,
            Some(t) if t <= after(now, margin) => 0, // busy-poll short waits
            Some(t) => {
                // Wake a margin early and spin the rest: timer wake-ups are tens of µs late
                // on a VM, a spin is not (the margin is learnt from the timer: wake.rs).
                let at = Time(t.0 - margin).min(soft.unwrap_or(Time::MAX));
                self.arm(st, at)?;
                100
            }
            None => {
                if let Some(at) = soft {
                    self.arm(st, at)?;
                }
                100
            }
        };
        // Receive coalescing sees every turn (its rate counts them all) and may sleep after
        // one that would now wait: a turn that stopped at its budget has `timeout` 0 and goes
        // on at once.
        let wait = timeout != 0 && !st.retry && st.stopping.is_none();
        Ok(if self.coalesce(now, st.deadline, wait) {
            0
        } else {
            timeout
        })
    }

    /// Arm the timer for `at` unless it is armed for it already.
    fn arm(&self, st: &mut LoopState, at: Time) -> anyhow::Result<()> {
        if st.armed != Some(at) {
            sys::timerfd_set_abs(st.timer.as_raw_fd(), self.clock.monotonic(at))?;
            st.armed = Some(at);
        }
        Ok(())
    }

    /// Wait for events (up to `st.timeout` ms); read the error of a port's socket that has
    /// one; feed the timer's learning.
    fn wait_step(&mut self, st: &mut LoopState, now: Time) -> anyhow::Result<()> {
        let before = self.now();
        sys::epoll_wait_flagged(
            st.ep.as_raw_fd(),
            &mut st.ready,
            &mut st.errored,
            st.timeout,
        )?;
        st.last_poll = self.now();
        self.turns.wait(st.last_poll.0.saturating_sub(before.0));
        // An error on a port's socket (ENETDOWN when its link goes down) keeps the fd ready
        // until it is read: read it, or every wait returns at once and the loop spins.
        for &tok in st.errored.iter() {
            if let Some(p) = [T_SOCK0, T_SOCK1].iter().position(|t| *t == tok) {
                self.ports[p].take_error();
            }
        }
        if st.timeout != 0 {
            self.wake.slept(now.0, st.last_poll.0);
        }
        self.wake.duty(st.last_poll.0);
        Ok(())
    }

    /// Handle what the wait reported: the timer, then the role's events ([`Role::on_events`]:
    /// a worker's wake-up; the single shaper's signals, builds, control clients and stats
    /// plane).
    fn events_step(&mut self, st: &mut LoopState) {
        let ready = std::mem::take(&mut st.ready);
        if ready.contains(&T_TIMER) {
            let mut b = [0u8; 8];
            sys::read_some(st.timer.as_raw_fd(), &mut b);
            // A sample of the timer's latency only if the loop slept waiting for it: a
            // wake-up found late by a busy loop says nothing of the timer.
            if let (Some(at), true) = (st.armed, st.timeout != 0) {
                self.wake.record(at.0, self.now().0);
            }
            st.armed = None;
        }
        R::on_events(self, &ready, &mut st.stopping);
        st.ready = ready;
    }
}

/// What the event loop carries from one turn to the next.
struct LoopState {
    ep: OwnedFd,
    timer: OwnedFd,
    ready: Vec<u64>,
    errored: Vec<u64>,
    /// When the housekeeping last ran.
    last_ports: Time,
    /// When the drain began (SIGTERM, or the control thread's stop).
    stopping: Option<Time>,
    /// The instant the timer is armed for.
    armed: Option<Time>,
    /// When the event queue was last looked at.
    last_poll: Time,
    /// The earliest instant a direction (or a retry) wants the loop.
    deadline: Option<Time>,
    /// A receive turn was skipped for an imminent departure.
    rx_owed: bool,
    /// The next poll of a shard's gate.
    gate_tick: Time,
    /// This turn: frames may be left in a ring; a ring asked to be kicked again; the wait's
    /// timeout (ms).
    more_rx: bool,
    retry: bool,
    timeout: i32,
}
