//! The single shaper's role (`linkshare run` without `--workers`): the one datapath thread also
//! serves the control plane.
//!
//! ## Principles
//! * **The datapath is not the role's.** [`Single`] adds to the shared loop (run.rs) only what
//!   the single shaper has and a worker does not: the control socket, signals (SIGHUP reloads,
//!   SIGTERM drains), the builder thread that builds reloads off the loop (builder.rs), the
//!   stats plane that answers `stat`, `/metrics` and the dashboard off the loop (plane.rs),
//!   systemd's watchdog and the interface locks. Frames go straight to their direction
//!   ([`Shaper::hand_to_dir`]).
//! * **Everything it serves waits on the loop's epoll and never blocks a turn**: control clients
//!   are bounded (control/server.rs), builds are installed at a turn boundary (reload.rs).
//!
//! With `--workers N` the control thread (workers/coord) has these instead and each worker's
//! role is its [`crate::workers::Link`].

mod serve;

use std::os::fd::{AsRawFd, OwnedFd, RawFd};

use anyhow::Context;
use linkshare_core::Time;

use crate::control::snapshot::{ReloadCounts, Snapshot};
use crate::control::{self, copier::Copier, ControlStats};
use crate::dir::{self, emulator, set_line_rates, Dir};
use crate::frame::Frame;
use crate::role::Role;
use crate::run::{T_BUILT, T_CLIENT, T_CTL, T_SIG, T_STATS};
use crate::{
    builder, circuits, emulate, guard, http, keep_started, last_good, load_sched, notify, plane,
    sys, upload, xdp, Options, Shaper,
};

/// What the single shaper has beyond the datapath (see the module).
pub struct Single {
    /// The control socket, bound by [`Shaper::run`].
    pub(crate) control: Option<control::Server>,
    pub(crate) control_stats: ControlStats,
    /// The stats plane, started by [`Shaper::run`]: answers `stat`, `/metrics` and the
    /// dashboard off this thread from copies of the counters (plane.rs).
    pub(crate) plane: Option<plane::Plane>,
    /// The copy of the counters for the plane under way, made a piece per turn
    /// (control/copier.rs).
    pub(crate) copier: Copier,
    /// Policy reloads by outcome (reload.rs counts them).
    pub(crate) reloads: ReloadCounts,
    /// The thread that builds reloaded policies off the loop.
    pub(crate) builder: builder::Builder,
    /// SIGHUP reloads still being built (READY is told to systemd when none is left).
    pub(crate) hangups_pending: usize,
    /// The circuit ids of what each direction runs, for the stats plane's labels.
    pub(crate) circuits: circuits::Circuits,
    /// The signalfd (SIGTERM, SIGINT, SIGHUP), opened by [`Shaper::run`].
    sig: Option<OwnedFd>,
    /// systemd's watchdog, fed from the loop's housekeeping.
    watchdog: Option<notify::Watchdog>,
    /// The CPUs of the helper threads when the loop is pinned (`affinity::helper_cpus`).
    helpers: Option<Vec<usize>>,
    /// The interface locks, held while the shaper lives.
    _locks: guard::InterfaceLocks,
}

impl Shaper<Single> {
    /// Open the devices and build the schedulers. Errors are ready to print.
    pub fn new(opts: Options) -> anyhow::Result<Shaper> {
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
        let (e0, e1) = (
            emulator(&opts, &d0, emulate::AddrKey::Src),
            emulator(&opts, &d1, emulate::AddrKey::Dst),
        );
        d0.set_emulator(e0);
        d1.set_emulator(e1);
        // Helper threads keep off the CPU the loop pins itself to (`--cpus`).
        let helpers = crate::affinity::helper_cpus(&opts.cpus);
        let mut builder = builder::Builder::start(true, helpers.clone())
            .context("cannot start the policy builder thread")?;
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
        let role = Single {
            control: None,
            control_stats: ControlStats::default(),
            plane: None,
            copier: Copier::default(),
            reloads: ReloadCounts::default(),
            builder,
            hangups_pending: 0,
            circuits,
            sig: None,
            watchdog: None,
            helpers,
            _locks: locks,
        };
        Ok(Shaper::assemble(opts, [p0, p1], [d0, d1], role, 1))
    }

    /// Run until SIGTERM/SIGINT. Returns the exit code.
    pub fn run(&mut self) -> anyhow::Result<i32> {
        self.run_loop()
    }

    /// SIGHUP reloads; SIGTERM/SIGINT start the drain.
    fn on_signal(&mut self, stopping: &mut Option<Time>) {
        let mut b = [0u8; 128];
        let sig = self.role.sig.as_ref().map_or(-1, |s| s.as_raw_fd());
        if sys::read_some(sig, &mut b) == 0 {
            return;
        }
        match sys::signo_of(&b) {
            Some(s) if s == libc::SIGHUP as u32 => self.on_sighup(),
            Some(_) => {
                if stopping.is_none() {
                    notify::tell("STOPPING=1\nSTATUS=draining");
                }
                let now = self.now();
                stopping.get_or_insert(now);
            }
            None => {}
        }
    }
}

impl Role for Single {
    /// Bind the control socket and the HTTP endpoints, watch signals and the builder, and tell
    /// the world the shaper runs.
    fn start(s: &mut Shaper<Single>, ep: RawFd) -> anyhow::Result<()> {
        let mut srv = control::Server::bind(&s.opts.control)?;
        let sig = sys::signalfd_term_hup()?;
        sys::epoll_add(ep, sig.as_raw_fd(), T_SIG)?;
        sys::epoll_add(ep, srv.listen_fd(), T_CTL)?;
        sys::epoll_add(ep, s.role.builder.fd(), T_BUILT)?;
        srv.attach(ep, T_CLIENT);
        s.role.control = Some(srv);
        s.role.sig = Some(sig);
        let bind = |addr: Option<std::net::SocketAddr>, what: &str, path: &str| {
            addr.map(|a| {
                let h = http::Http::bind(a)?;
                http::announce(&h, what, path);
                anyhow::Ok(h)
            })
            .transpose()
        };
        let metrics = bind(s.opts.metrics, "metrics", "/metrics")?;
        let web = bind(s.opts.web, "dashboard", "/")?;
        let plane = plane::Plane::start(
            metrics,
            web,
            s.role.circuits.clone(),
            s.role.helpers.clone(),
        )
        .context("cannot start the stats thread")?;
        sys::epoll_add(ep, plane.fd(), T_STATS)?;
        s.role.plane = Some(plane);
        s.role.watchdog = notify::Watchdog::from_env();
        let io = s.io_name();
        eprintln!(
            "linkshare: running {} -> {} (io {io}), control {}",
            s.names[0],
            s.names[1],
            s.opts.control.display()
        );
        notify::tell(&format!(
            "READY=1\nSTATUS=shaping {} -> {}",
            s.names[0], s.names[1]
        ));
        Ok(())
    }

    fn cpu_index(&self) -> usize {
        0
    }

    fn admit(s: &mut Shaper<Single>, i: usize, f: Frame, now: Time) {
        s.hand_to_dir(i, f, now);
    }

    fn housekeeping(&mut self, now: Time, _monotonic_ns: u64) {
        if self.watchdog.as_mut().is_some_and(|w| w.due(now.0)) {
            notify::tell("WATCHDOG=1");
        }
    }

    /// Signals, reloads built off the loop, control clients (never blocking: see
    /// control::server) and the stats plane's replies and copies (single/serve.rs).
    fn on_events(s: &mut Shaper<Single>, ready: &[u64], stopping: &mut Option<Time>) {
        if ready.contains(&T_SIG) {
            s.on_signal(stopping);
        }
        if ready.contains(&T_BUILT) {
            s.take_builds();
        }
        if ready.iter().any(|t| *t == T_CTL || *t == T_CLIENT) {
            s.serve_control();
        }
        if ready.contains(&T_STATS) {
            s.serve_plane();
        }
    }

    /// Removes the socket file; stops the stats plane.
    fn stop(&mut self) {
        self.control = None;
        self.plane = None;
    }

    fn discard(&mut self, garbage: Box<dyn Send>) {
        self.builder.discard(garbage);
    }

    /// A copy for the stats plane while there is a plane to send it to.
    fn copying(s: &Shaper<Single>) -> bool {
        s.role.copier.busy() && s.role.plane.is_some()
    }

    fn copy_piece(s: &mut Shaper<Single>, budget_ns: u64) -> u64 {
        s.copy_piece(budget_ns)
    }

    fn fill_snapshot(&self, snap: &mut Snapshot) {
        snap.control = self.control_stats;
        snap.reloads = self.reloads;
    }
}
