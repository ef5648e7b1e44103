//! The shaper's event loop: [`Shaper::run`] and the start of its control plane.
//!
//! One thread, one epoll: the two ports, the timer, the signals, the control socket and the stats
//! plane's eventfd (the HTTP endpoints are the stats plane's thread's, control/plane.rs; a
//! worker of several watches its wake-up fd instead: the control thread serves the control
//! plane). Each turn receives, serves both directions, kicks the transmit rings, then
//! sleeps, spins or polls until the next departure; nothing in a turn blocks (see lib.rs and
//! docs/router.md).

use std::os::fd::AsRawFd;

use anyhow::Context;

use crate::dir::{min_deadline, Sched};
use crate::{affinity, control, http, notify, sys, Shaper, TX_RETRY_NS};

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
    fn coalesce(&mut self, now: u64, deadline: Option<u64>, wait: bool) -> bool {
        let sleep = self.coalesce.after_turn(now, self.turn_rx, wait);
        if sleep == 0 {
            return false;
        }
        let until = deadline
            .map_or(u64::MAX, |t| t.saturating_sub(self.wake.margin_ns()))
            .min(now.saturating_add(sleep));
        if until <= now {
            return false;
        }
        sys::sleep_until_ns(until);
        self.rx_coalesced += 1;
        true
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
        let mut errored = Vec::new();
        // systemd's watchdog is fed from this loop (the single shaper) or by the control
        // thread from the workers' heartbeats (workers/coord).
        let mut watchdog = match self.worker {
            None => notify::Watchdog::from_env(),
            Some(_) => None,
        };
        let mut last_ports = sys::monotonic_ns();
        let mut stopping: Option<u64> = None;
        let mut armed: Option<u64> = None;
        let mut last_poll = 0u64;
        let mut deadline: Option<u64> = None;
        let mut rx_owed = false;
        let mut gate_tick = 0u64;
        loop {
            let mut more_rx = false;
            self.turn_rx = 0;
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
            if now - last_ports >= 100_000_000 {
                self.refresh_ports();
                // An interface deleted, re-created or given a new MTU (port.rs): a reopened
                // port is polled on its new socket.
                for (p, tok) in [(0, T_SOCK0), (1, T_SOCK1)] {
                    if self.ports[p].follow_link() {
                        sys::epoll_add(ep.as_raw_fd(), self.ports[p].fd(), tok)?;
                    }
                }
                let t = self.now();
                self.dirs.iter_mut().for_each(|d| d.reclaim_idle(t));
                last_ports = now;
                if let Some(l) = &self.worker {
                    l.heartbeat.store(now, std::sync::atomic::Ordering::Relaxed);
                }
                if watchdog.as_mut().is_some_and(|w| w.due(now)) {
                    notify::tell("WATCHDOG=1");
                }
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
            if self.step_adoptions() {
                min_deadline(&mut deadline, now);
            }
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
            // Receive coalescing sees every turn (its rate counts them all) and may sleep
            // after one that would now wait: a turn that stopped at its budget has `timeout`
            // 0 and goes on at once.
            let wait = timeout != 0 && !retry && stopping.is_none();
            let timeout = if self.coalesce(now, deadline, wait) {
                0
            } else {
                timeout
            };
            // A spin (a departure due within the margin) polls the rings without a system
            // call; events (control, signals, peers) are still looked at every SPIN_POLL_NS.
            let spinning = timeout == 0 && !more_rx && !retry && deadline.is_some();
            if spinning && now.saturating_sub(last_poll) < SPIN_POLL_NS {
                continue;
            }
            sys::epoll_wait_flagged(ep.as_raw_fd(), &mut ready, &mut errored, timeout)?;
            last_poll = sys::monotonic_ns();
            // An error on a port's socket (ENETDOWN when its link goes down) keeps the fd ready
            // until it is read: read it, or every wait returns at once and the loop spins.
            for &tok in errored.iter() {
                if let Some(p) = [T_SOCK0, T_SOCK1].iter().position(|t| *t == tok) {
                    self.ports[p].take_error();
                }
            }
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
            // The stats plane's replies and copies (control/plane.rs).
            if ready.contains(&T_STATS) {
                self.serve_plane();
            }
        }
        // Removes the socket file.
        self.control = None;
        self.plane = None;
        Ok(0)
    }
}
