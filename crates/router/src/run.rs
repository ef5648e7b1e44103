//! The shaper's event loop: [`Shaper::run`] and the start of its control plane.
//!
//! One thread, one epoll: the two ports, the timer, the signals, the control socket and the stats
//! plane's eventfd (the HTTP endpoints are the stats plane's thread's, control/plane.rs; a
//! worker of several watches its wake-up fd instead: the control thread serves the control
//! plane). Each turn receives, serves both directions, kicks the transmit rings, then
//! sleeps, spins or polls until the next departure; nothing in a turn blocks (see lib.rs and
//! docs/router.md).

use std::os::fd::{AsRawFd, OwnedFd};

use anyhow::Context;
use linkshare_core::Time;

use crate::clock::{after, min_deadline};
use crate::datapath::TX_RETRY_NS;
use crate::dir::{Dir, Sched};
use crate::{affinity, control, http, notify, sys, Shaper};

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

const T_SOCK0: u64 = 0;
const T_SOCK1: u64 = 1;
const T_TIMER: u64 = 2;
const T_SIG: u64 = 3;
const T_CTL: u64 = 4;
const T_CLIENT: u64 = 5;
const T_STATS: u64 = 6;
const T_BUILT: u64 = 10;
const T_WAKE: u64 = 11;

impl Shaper {
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
        let bind = |addr: Option<std::net::SocketAddr>, what: &str, path: &str| {
            addr.map(|a| {
                let h = http::Http::bind(a)?;
                http::announce(&h, what, path);
                anyhow::Ok(h)
            })
            .transpose()
        };
        let metrics = bind(self.opts.metrics, "metrics", "/metrics")?;
        let web = bind(self.opts.web, "dashboard", "/")?;
        let plane = crate::plane::Plane::start(metrics, web, self.circuits.clone())
            .context("cannot start the stats thread")?;
        sys::epoll_add(ep, plane.fd(), T_STATS)?;
        self.plane = Some(plane);
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
        sys::sleep_until_ns(self.clock.monotonic(until));
        self.rx_coalesced += 1;
        true
    }

    /// Run until SIGTERM/SIGINT. Returns the exit code.
    ///
    /// Each turn, in named steps: [`Shaper::receive_step`] (or the spin to an imminent
    /// departure), [`Shaper::transmit_step`] (both directions, each kicked as soon as it is
    /// served), [`Shaper::housekeeping_step`] (every 100 ms), the drain check while stopping,
    /// [`Shaper::plan_wait`] (timer, busy poll, coalescing), then [`Shaper::wait_step`] and
    /// [`Shaper::events_step`] (timer, signals, peers, builds, control, stats plane).
    pub fn run(&mut self) -> anyhow::Result<i32> {
        self.prepare_thread()?;
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
        let now = self.now();
        let mut st = LoopState {
            ep,
            timer,
            sig,
            ready: Vec::new(),
            errored: Vec::new(),
            // systemd's watchdog is fed from this loop (the single shaper) or by the control
            // thread from the workers' heartbeats (workers/coord).
            watchdog: match self.worker {
                None => notify::Watchdog::from_env(),
                Some(_) => None,
            },
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
            self.turn_rx = 0;
            st.more_rx = self.receive_step(&mut st);
            if let Some(l) = self.worker.as_mut() {
                l.flush_outbox();
            }
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
        // Removes the socket file.
        self.control = None;
        self.plane = None;
        Ok(0)
    }

    /// The thread's placement and priority (`--cpus`, `--nice`, `--realtime`).
    fn prepare_thread(&mut self) -> anyhow::Result<()> {
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
        if st.stopping.is_some() || self.worker.as_ref().is_some_and(|l| l.quiet) {
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

    /// Every 100 ms: the ports' counters and links, idle per-flow state given back, the
    /// worker's heartbeat, systemd's watchdog.
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
        if let Some(l) = &self.worker {
            // Read by the control thread on its own clock: CLOCK_MONOTONIC.
            l.heartbeat.store(
                self.clock.monotonic(now),
                std::sync::atomic::Ordering::Relaxed,
            );
        }
        if st.watchdog.as_mut().is_some_and(|w| w.due(now.0)) {
            notify::tell("WATCHDOG=1");
        }
        Ok(())
    }

    /// Stopping: whether everything queued has left (or a second has passed). A worker first
    /// takes what its peers handed over before they stopped.
    fn drained(&mut self, st: &LoopState, now: Time) -> bool {
        let Some(t0) = st.stopping else {
            return false;
        };
        let took = self.take_handoffs();
        took == 0
            && ((self.backlog_packets() == 0 && !st.retry)
                || now.0.saturating_sub(t0.0) > STOP_DRAIN_NS)
    }

    /// The loop's next deadline and how long the wait may block (ms; 0: do not block): the
    /// timer armed a margin before the next departure (waits shorter than the margin are
    /// busy-polled), the gate's tick of a worker of a shared root, receive coalescing.
    fn plan_wait(&mut self, st: &mut LoopState, now: Time) -> anyhow::Result<i32> {
        st.deadline = self.dirs.iter().filter_map(Dir::next_wakeup).min();
        // A take-over under way (a rebuilt HTB, reload.rs) comes back at once for its next step.
        if self.step_adoptions() {
            min_deadline(&mut st.deadline, now);
        }
        if st.retry {
            min_deadline(&mut st.deadline, after(now, TX_RETRY_NS));
        }
        // The gate's poll (a worker of a shared root) is a plain wake-up: no spin before it.
        // Every loop turn serves both directions, and that polls the gate.
        let gated = self
            .dirs
            .iter()
            .any(|d| matches!(&d.sched, Some(Sched::Shard(s)) if s.gate().is_some()));
        let soft = gated.then(|| {
            if now >= st.gate_tick {
                st.gate_tick = after(now, GATE_TICK_NS);
            }
            st.gate_tick
        });
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
        sys::epoll_wait_flagged(
            st.ep.as_raw_fd(),
            &mut st.ready,
            &mut st.errored,
            st.timeout,
        )?;
        st.last_poll = self.now();
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

    /// Handle what the wait reported: the timer, a worker's wake-up, signals, reloads built
    /// off the loop, control clients (never blocking: see control::server) and the stats
    /// plane's replies and copies (control/plane.rs).
    fn events_step(&mut self, st: &mut LoopState) {
        let ready = std::mem::take(&mut st.ready);
        for &tok in ready.iter() {
            match tok {
                T_TIMER => {
                    let mut b = [0u8; 8];
                    sys::read_some(st.timer.as_raw_fd(), &mut b);
                    // A sample of the timer's latency only if the loop slept waiting for it: a
                    // wake-up found late by a busy loop says nothing of the timer.
                    if let (Some(at), true) = (st.armed, st.timeout != 0) {
                        self.wake.record(at.0, self.now().0);
                    }
                    st.armed = None;
                }
                T_WAKE => self.on_wake(&mut st.stopping),
                T_SIG => self.on_signal(st),
                _ => {}
            }
        }
        if ready.contains(&T_BUILT) {
            self.take_builds();
        }
        if ready.iter().any(|t| *t == T_CTL || *t == T_CLIENT) {
            self.serve_control();
        }
        if ready.contains(&T_STATS) {
            self.serve_plane();
        }
        st.ready = ready;
    }

    /// SIGHUP reloads; SIGTERM/SIGINT start the drain.
    fn on_signal(&mut self, st: &mut LoopState) {
        let mut b = [0u8; 128];
        let sig = st.sig.as_ref().map_or(-1, |s| s.as_raw_fd());
        if sys::read_some(sig, &mut b) == 0 {
            return;
        }
        match sys::signo_of(&b) {
            Some(s) if s == libc::SIGHUP as u32 => self.on_sighup(),
            Some(_) => {
                if st.stopping.is_none() {
                    notify::tell("STOPPING=1\nSTATUS=draining");
                }
                let now = self.now();
                st.stopping.get_or_insert(now);
            }
            None => {}
        }
    }
}

/// What the event loop carries from one turn to the next.
struct LoopState {
    ep: OwnedFd,
    timer: OwnedFd,
    /// The signalfd (the single shaper; a worker hears signals through the control thread).
    sig: Option<OwnedFd>,
    ready: Vec<u64>,
    errored: Vec<u64>,
    watchdog: Option<notify::Watchdog>,
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
