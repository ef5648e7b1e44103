//! The control thread of `--workers N`: starts the workers, serves the control socket, signals
//! and reloads, and never touches a packet.
//!
//! Principles: it talks to workers only by message (a command channel and an eventfd each way)
//! and never waits on one while a client or a signal waits on it, except at exit; a `stat` or a
//! reload is answered when every worker has replied (`stat` merged by `merge`, a reload's
//! reports combined); a worker that dies stops the shaper with its error rather than leaving a
//! part of the tree unserved.

use std::collections::BTreeSet;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{channel, sync_channel, Receiver, RecvTimeoutError, Sender};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use linkshare_config::Policy;
use linkshare_core::shard::{Placement, Shard, ShardConfig};

use super::merge::{merge, Part};
use super::worker::{DirSpec, WorkerSpec};
use super::{Cmd, HandoffCounts, Install, Link, Peer, Reply, Steer, INBOX_BATCHES};
use crate::builder::{Asker, Builder, Built, Job, Source, Text};
use crate::circuits::{ids_of, Circuits};
use crate::control::dispatch::{rejected, unshaped};
use crate::control::proto::{
    self, ErrorKind, ErrorReply, Hello, PolicyText, ReloadReport, Request, Response,
};
use crate::control::snapshot::{ReloadCounts, Snapshot};
use crate::control::{ControlStats, Server};
use crate::frame::Frame;
use crate::http::Http;
use crate::{guard, notify, render_config_error, sys, Options, RxSplit, Shaper};

const T_SIG: u64 = 1;
const T_CTL: u64 = 2;
const T_CLIENT: u64 = 3;
const T_BUILT: u64 = 4;
const T_REPLY: u64 = 5;
const T_HTTP: u64 = 6;
const T_HTTP_CLIENT: u64 = 7;
const T_WEB: u64 = 8;
const T_WEB_CLIENT: u64 = 9;

/// With `--metrics` or `--web`, how often the control thread gathers a snapshot from the
/// workers: the endpoints serve the latest one (at most this old; the dashboard's events are
/// a second apart).
const GATHER_EVERY: Duration = Duration::from_millis(500);

/// How long workers get to open their interfaces, and to drain at exit.
const START_TIMEOUT: Duration = Duration::from_secs(10);
const STOP_TIMEOUT: Duration = Duration::from_secs(3);

/// A worker as the control thread holds it.
struct Handle {
    cmds: Sender<Cmd>,
    wake: Arc<OwnedFd>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Handle {
    fn send(&self, c: Cmd) {
        if self.cmds.send(c).is_ok() {
            sys::eventfd_ring(self.wake.as_raw_fd());
        }
    }
}

/// A `stat` being gathered.
struct Gather {
    seq: u64,
    parts: Vec<Part>,
    waiting: Vec<(u64, crate::control::Select)>,
}

struct Coord {
    opts: Options,
    n: usize,
    workers: Vec<Handle>,
    replies: Receiver<Reply>,
    wake: Arc<OwnedFd>,
    control: Option<Server>,
    control_stats: ControlStats,
    builder: Builder,
    texts: [Option<(String, String)>; 2],
    paths: [Option<PathBuf>; 2],
    gen: u64,
    seq: u64,
    reloads: ReloadCounts,
    gather: Option<Gather>,
    pending: Vec<(u64, Pending)>,
    hangups_pending: usize,
    started: Instant,
    quiet: usize,
    /// A worker's loop ended before the shaper was told to stop: why.
    died: Option<String>,
    /// The metrics endpoint and the dashboard, served from `latest`.
    http: Option<Http>,
    web: Option<Http>,
    /// The last merged snapshot, and when its gathering started.
    latest: Snapshot,
    /// Live rates of the merged snapshots (control/raw.rs).
    rates: crate::control::raw::Rates,
    gathered: Option<Instant>,
    /// Every worker's loop heartbeat, and systemd's watchdog when the unit asks for one.
    heartbeats: Vec<Arc<AtomicU64>>,
    watchdog: Option<notify::Watchdog>,
    /// The circuit ids of what each direction runs, to label the merged snapshots.
    circuits: Circuits,
}

/// `linkshare run --workers N`: run until SIGTERM/SIGINT. Returns the exit code.
pub fn run(opts: Options) -> anyhow::Result<i32> {
    let n = opts.workers;
    if opts.emulate.is_some() || !opts.path_delays.is_empty() {
        anyhow::bail!(
            "--emulate and --path-delay need one worker (the emulated line is one queue): drop --workers"
        );
    }
    opts.rx_split.check(n).map_err(anyhow::Error::msg)?;
    guard::check_no_loop(&opts.dev_in, &opts.dev_out)?;
    let locks = guard::lock_interfaces(&opts.lock_dir, &[&opts.dev_in, &opts.dev_out])?;
    let place = Place::of(&opts);
    let mut texts: [Option<(String, String)>; 2] = [None, None];
    let mut paths: [Option<PathBuf>; 2] = [None, None];
    let mut cuts: [Option<Cut>; 2] = [None, None];
    // The first interface's policy; it falls back to the last good one when it does not
    // validate. Without --reverse-policy its upload side (if any) runs the reverse direction.
    let with_upload = opts.reverse_policy.is_none();
    let ((down, up), text, origin) =
        crate::last_good::load_at_start(&opts.policy, opts.last_good.as_ref(), |t, o| {
            cut_both(t, o, &place, with_upload)
        })?;
    crate::keep_started(&opts, &text, &origin, &down.policy);
    if let Some(u) = up {
        cuts[1] = Some(u);
        texts[1] = Some((text.clone(), format!("{origin} (upload side)")));
    }
    cuts[0] = Some(down);
    texts[0] = Some((text, origin));
    paths[0] = Some(opts.policy.clone());
    if let Some(f) = opts.reverse_policy.clone() {
        let (c, text, origin) =
            crate::last_good::load_at_start(&f, None, |t, o| cut(t, o, &place, 1, 1))?;
        cuts[1] = Some(c);
        texts[1] = Some((text, origin));
        paths[1] = Some(f);
    }
    // Signals are blocked here, before any worker starts, so that every thread inherits the
    // mask and only this thread's signalfd hears them.
    let sig = sys::signalfd_term_hup()?;
    let builder = Builder::start(false, None).context("cannot start the policy builder thread")?;
    let wake = Arc::new(sys::eventfd()?);
    let (reply_tx, replies) = channel::<Reply>();
    let mut inboxes = Vec::new();
    let mut peers = Vec::new();
    for _ in 0..n {
        let (tx, rx) = sync_channel(INBOX_BATCHES);
        let w = Arc::new(sys::eventfd()?);
        peers.push(Peer {
            inbox: tx,
            wake: w.clone(),
        });
        inboxes.push((rx, w));
    }
    let fanout = [fanout_group(&opts.dev_in), fanout_group(&opts.dev_out)];
    // AF_XDP: one attachment per interface, shared by the workers' sockets (one queue each).
    // With a worker per direction each worker opens its own interface whole (worker.rs).
    let xdp = if opts.rx_split == RxSplit::Direction {
        [None, None]
    } else {
        [
            crate::xdp::attach_for_workers(&opts.dev_in, opts.io, n)?,
            crate::xdp::attach_for_workers(&opts.dev_out, opts.io, n)?,
        ]
    };
    let circuits = Circuits::default();
    for (d, c) in cuts.iter().enumerate() {
        if let Some(c) = c {
            circuits.set(d, ids_of(&c.policy));
        }
    }
    let mut workers = Vec::new();
    let mut shards: [Vec<Option<Shard<Frame>>>; 2] = [Vec::new(), Vec::new()];
    for d in 0..2 {
        if let Some(c) = cuts[d].as_mut() {
            shards[d] = std::mem::take(&mut c.shards)
                .into_iter()
                .map(Some)
                .collect();
        }
    }
    let mut heartbeats = Vec::new();
    // Workers open their sockets one after another, in index order: a fanout group numbers
    // its members in the order they joined, and `--placement address` steers to worker i as
    // member i (address.rs).
    let mut turn: Option<Receiver<()>> = None;
    for (i, (inbox, w)) in inboxes.into_iter().enumerate() {
        let (cmd_tx, cmds) = channel::<Cmd>();
        let heartbeat = Arc::new(AtomicU64::new(sys::monotonic_ns()));
        heartbeats.push(heartbeat.clone());
        let link = Link {
            index: i,
            wake: w.clone(),
            inbox,
            cmds,
            replies: reply_tx.clone(),
            coord_wake: wake.clone(),
            peers: peers.clone(),
            outbox: (0..n).map(|_| Vec::new()).collect(),
            steer: [None, None],
            counts: HandoffCounts::default(),
            quiet: false,
            heartbeat,
        };
        let mut dirs: [Option<DirSpec>; 2] = [None, None];
        for d in 0..2 {
            let (Some(c), Some(shard)) = (
                cuts[d].as_ref(),
                shards[d].get_mut(i).and_then(Option::take),
            ) else {
                continue;
            };
            dirs[d] = Some(DirSpec {
                shard,
                steer: c.steer.clone(),
                link: crate::builder::LinkRules::of(&c.policy),
                text: texts[d].clone().unwrap_or_default(),
                path: paths[d].clone(),
            });
        }
        let spec = WorkerSpec {
            opts: opts.clone(),
            dirs,
            fanout,
            xdp: xdp.clone(),
            link,
        };
        let tx = reply_tx.clone();
        let cw = wake.clone();
        let (done, next) = channel::<()>();
        let mine = turn.replace(next);
        let thread = std::thread::Builder::new()
            .name(format!("linkshare-w{i}"))
            .spawn(move || worker_main(i, spec, tx, cw, (mine, done)))
            .context("cannot start a worker thread")?;
        workers.push(Handle {
            cmds: cmd_tx,
            wake: w,
            thread: Some(thread),
        });
    }
    drop(peers);
    let mut c = Coord {
        opts,
        n,
        workers,
        replies,
        wake,
        control: None,
        control_stats: ControlStats::default(),
        builder,
        texts,
        paths,
        gen: 1,
        seq: 0,
        reloads: ReloadCounts::default(),
        gather: None,
        pending: Vec::new(),
        hangups_pending: 0,
        started: Instant::now(),
        quiet: 0,
        died: None,
        http: None,
        web: None,
        latest: Snapshot::default(),
        rates: Default::default(),
        gathered: None,
        heartbeats,
        watchdog: notify::Watchdog::from_env(),
        circuits,
    };
    let io = match c.wait_started() {
        Ok(io) => io,
        Err(e) => {
            c.stop();
            return Err(e);
        }
    };
    let code = c.serve(&sig, &io);
    c.stop();
    drop(locks);
    code
}

/// The receive fanout group of an interface: one per interface and process.
fn fanout_group(dev: &str) -> u16 {
    let idx = sys::ifindex(dev).unwrap_or(0) as u32;
    ((std::process::id().wrapping_mul(2_654_435_761) ^ idx.wrapping_mul(40_503)) & 0xffff) as u16
}

/// A worker thread: build the worker (once the previous one has opened its sockets: `turn`),
/// say whether it runs, run it, say how it ended.
fn worker_main(
    i: usize,
    spec: WorkerSpec,
    tx: Sender<Reply>,
    coord: Arc<OwnedFd>,
    turn: (Option<Receiver<()>>, Sender<()>),
) {
    let tell = |r: Reply| {
        if tx.send(r).is_ok() {
            sys::eventfd_ring(coord.as_raw_fd());
        }
    };
    // A previous worker that failed drops its end: go on (the control thread stops on it).
    if let Some(prev) = turn.0 {
        let _ = prev.recv();
    }
    let built = Shaper::new_worker(spec);
    let _ = turn.1.send(());
    let mut s = match built {
        Ok(s) => s,
        Err(e) => {
            tell(Reply::Started {
                worker: i,
                result: Err(format!("{e:#}")),
            });
            return;
        }
    };
    tell(Reply::Started {
        worker: i,
        result: Ok(s.io_name()),
    });
    let result = s.run_loop().map(|_| ()).map_err(|e| format!("{e:#}"));
    tell(Reply::Exited { worker: i, result });
}

impl Coord {
    /// Wait until every worker has opened its interfaces; the I/O they use.
    fn wait_started(&mut self) -> anyhow::Result<String> {
        let deadline = Instant::now() + START_TIMEOUT;
        let mut ok = 0;
        let mut io = String::new();
        while ok < self.n {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.replies.recv_timeout(left) {
                Ok(Reply::Started { result: Ok(s), .. }) => {
                    ok += 1;
                    io = s;
                }
                Ok(Reply::Started {
                    worker,
                    result: Err(e),
                }) => anyhow::bail!("worker {worker}: {e}"),
                Ok(_) => {}
                Err(RecvTimeoutError::Timeout) => {
                    anyhow::bail!("the workers did not start within {START_TIMEOUT:?}")
                }
                Err(RecvTimeoutError::Disconnected) => anyhow::bail!("the workers are gone"),
            }
        }
        Ok(io)
    }

    /// The event loop: control clients, signals, builds, workers' replies.
    fn serve(&mut self, sig: &OwnedFd, io: &str) -> anyhow::Result<i32> {
        let ep = sys::epoll_create()?;
        let mut srv = Server::bind(&self.opts.control)?;
        sys::epoll_add(ep.as_raw_fd(), sig.as_raw_fd(), T_SIG)?;
        sys::epoll_add(ep.as_raw_fd(), srv.listen_fd(), T_CTL)?;
        sys::epoll_add(ep.as_raw_fd(), self.builder.fd(), T_BUILT)?;
        sys::epoll_add(ep.as_raw_fd(), self.wake.as_raw_fd(), T_REPLY)?;
        srv.attach(ep.as_raw_fd(), T_CLIENT);
        self.control = Some(srv);
        if let Some(addr) = self.opts.metrics {
            let mut h = Http::bind(addr)?;
            sys::epoll_add(ep.as_raw_fd(), h.listen_fd(), T_HTTP)?;
            h.attach(ep.as_raw_fd(), T_HTTP_CLIENT);
            crate::http::announce(&h, "metrics", "/metrics");
            self.http = Some(h);
        }
        if let Some(addr) = self.opts.web {
            let mut h = Http::bind(addr)?;
            sys::epoll_add(ep.as_raw_fd(), h.listen_fd(), T_WEB)?;
            h.attach(ep.as_raw_fd(), T_WEB_CLIENT);
            crate::http::announce(&h, "dashboard", "/");
            self.web = Some(h);
        }
        eprintln!(
            "linkshare: running {} -> {} (io {io}, {} workers), control {}",
            self.opts.dev_in,
            self.opts.dev_out,
            self.n,
            self.opts.control.display()
        );
        notify::tell(&self.ready_message());
        let mut ready = Vec::new();
        loop {
            sys::epoll_wait(ep.as_raw_fd(), &mut ready, 100)?;
            for &tok in ready.iter() {
                if tok == T_SIG {
                    let mut b = [0u8; 128];
                    if sys::read_some(sig.as_raw_fd(), &mut b) > 0 {
                        match sys::signo_of(&b) {
                            Some(s) if s == libc::SIGHUP as u32 => self.on_sighup(),
                            Some(_) => {
                                notify::tell("STOPPING=1\nSTATUS=draining");
                                return Ok(0);
                            }
                            None => {}
                        }
                    }
                }
            }
            if ready.contains(&T_BUILT) {
                for b in self.builder.finished() {
                    self.on_built(b);
                }
            }
            if ready.contains(&T_REPLY) {
                sys::eventfd_clear(self.wake.as_raw_fd());
                self.take_replies();
                if let Some(e) = self.died.take() {
                    eprintln!("linkshare: {e}");
                    return Ok(1);
                }
            }
            if ready.iter().any(|t| *t == T_CTL || *t == T_CLIENT) {
                self.serve_control();
            }
            self.serve_http(&ready);
            self.feed_watchdog();
        }
    }

    /// `WATCHDOG=1` when due and every worker's loop has turned within the interval: a hung
    /// worker stops the pings, and systemd restarts the unit.
    fn feed_watchdog(&mut self) {
        let Some(w) = self.watchdog.as_mut() else {
            return;
        };
        let now = sys::monotonic_ns();
        let alive = self
            .heartbeats
            .iter()
            .all(|h| now.saturating_sub(h.load(Ordering::Relaxed)) < w.interval_ns);
        if alive && w.due(now) {
            notify::tell("WATCHDOG=1");
        }
    }

    /// The metrics endpoint and the dashboard, from the latest merged snapshot, which is
    /// gathered again every [`GATHER_EVERY`] while either is configured.
    fn serve_http(&mut self, ready: &[u64]) {
        if self.http.is_none() && self.web.is_none() {
            return;
        }
        let stale = self.gathered.is_none_or(|t| t.elapsed() >= GATHER_EVERY);
        if stale && self.gather.is_none() {
            self.gathered = Some(Instant::now());
            self.start_gather(Vec::new());
        }
        let now = sys::monotonic_ns();
        let latest = &self.latest;
        if let Some(h) = self.http.as_mut() {
            if ready.iter().any(|t| *t == T_HTTP || *t == T_HTTP_CLIENT) || h.due(now) {
                h.serve(now, &mut |req| {
                    crate::http::metrics::route(req, &mut || std::sync::Arc::new(latest.clone()))
                });
            }
        }
        if let Some(h) = self.web.as_mut() {
            if ready.iter().any(|t| *t == T_WEB || *t == T_WEB_CLIENT) || h.due(now) {
                crate::http::web::serve_turn(h, &mut || std::sync::Arc::new(latest.clone()));
            }
        }
    }

    fn ready_message(&self) -> String {
        format!(
            "READY=1\nSTATUS=shaping {} -> {} on {} workers",
            self.opts.dev_in, self.opts.dev_out, self.n
        )
    }

    fn broadcast(&self, mk: impl Fn() -> Cmd) {
        for w in &self.workers {
            w.send(mk());
        }
    }

    fn serve_control(&mut self) {
        let Some(mut srv) = self.control.take() else {
            return;
        };
        let reqs = srv.poll(sys::monotonic_ns());
        self.control_stats = srv.stats;
        for (id, line) in reqs {
            let resp = match proto::parse_request(&line) {
                Ok(Request::Hello {}) => Response::Hello(Hello::current()),
                Ok(Request::Stat { select }) => {
                    srv.defer(id);
                    self.want_stat(id, select);
                    continue;
                }
                Ok(Request::Policy { direction }) => {
                    let d = direction.index();
                    match &self.texts[d] {
                        Some((text, origin)) => Response::Policy(PolicyText {
                            direction,
                            text: text.clone(),
                            origin: origin.clone(),
                            path: self.paths[d].clone(),
                            changes: Vec::new(),
                        }),
                        None => Response::Error(unshaped(direction)),
                    }
                }
                Ok(Request::Reload { direction, source }) => {
                    srv.defer(id);
                    let src = match source {
                        proto::PolicySource::Text { text, origin } => Source::Text { text, origin },
                        proto::PolicySource::File { path } => Source::File(path),
                        proto::PolicySource::Change(c) => Source::Change(c),
                    };
                    self.start_reload(direction.index(), Asker::Client(id), src);
                    continue;
                }
                Err(e) => Response::Error(e),
            };
            srv.reply(id, &resp.to_line(), sys::monotonic_ns());
        }
        self.control = Some(srv);
    }

    /// A client waits for a `stat`: join the one being gathered, or start one.
    fn want_stat(&mut self, id: u64, select: crate::control::Select) {
        if let Some(g) = &mut self.gather {
            g.waiting.push((id, select));
            return;
        }
        self.start_gather(vec![(id, select)]);
    }

    /// Ask every worker for its snapshot; `waiting` are the clients to answer with the merge.
    fn start_gather(&mut self, waiting: Vec<(u64, crate::control::Select)>) {
        self.seq += 1;
        let seq = self.seq;
        self.gather = Some(Gather {
            seq,
            parts: Vec::new(),
            waiting,
        });
        self.broadcast(|| Cmd::Stat { seq });
    }

    fn take_replies(&mut self) {
        while let Ok(r) = self.replies.try_recv() {
            match r {
                Reply::Stat { .. } => {
                    if let Some((seq, part)) = Part::from_reply(r) {
                        self.on_stat_part(seq, part);
                    }
                }
                Reply::Installed { seq, report } => self.on_installed(seq, report),
                Reply::Quiet => self.quiet += 1,
                Reply::Exited { worker, result } => {
                    let why = match result {
                        Ok(()) => "stopped".to_string(),
                        Err(e) => e,
                    };
                    self.died
                        .get_or_insert(format!("worker {worker} ended: {why}"));
                }
                Reply::Started { .. } => {}
            }
        }
    }

    fn on_stat_part(&mut self, seq: u64, part: Part) {
        let Some(g) = &mut self.gather else { return };
        if g.seq != seq {
            return;
        }
        g.parts.push(part);
        if g.parts.len() < self.n {
            return;
        }
        let Some(g) = self.gather.take() else { return };
        let mut snap = merge(g.parts);
        snap.uptime_s = self.started.elapsed().as_secs_f64();
        snap.control = self.control_stats;
        snap.reloads = self.reloads;
        snap.policy = self.paths[0].as_ref().map(|p| p.display().to_string());
        snap.kind = snap.directions.first().and_then(|d| d.kind.clone());
        // Live rates from successive merged snapshots (the workers measure none).
        self.rates.apply(&mut snap);
        snap.label_circuits(&self.circuits);
        if let Some(srv) = self.control.as_mut() {
            for (id, select) in g.waiting {
                let line = Response::Stat(Box::new(select.apply(&snap))).to_line();
                srv.reply(id, &line, sys::monotonic_ns());
            }
        }
        self.latest = snap;
    }

    /// Exit: every worker stops receiving; once all have (so no frame is still being handed
    /// over), each sends what it holds and ends.
    fn stop(&mut self) {
        self.broadcast(|| Cmd::Quiesce);
        let deadline = Instant::now() + STOP_TIMEOUT;
        while self.quiet < self.live_workers() && Instant::now() < deadline {
            match self
                .replies
                .recv_timeout(deadline.saturating_duration_since(Instant::now()))
            {
                Ok(Reply::Quiet) => self.quiet += 1,
                Ok(Reply::Exited { .. }) => {}
                Ok(_) => {}
                Err(_) => break,
            }
        }
        self.broadcast(|| Cmd::Stop);
        for w in &mut self.workers {
            if let Some(t) = w.thread.take() {
                let _ = t.join();
            }
        }
        // Removes the socket file.
        self.control = None;
        self.http = None;
        self.web = None;
    }

    fn live_workers(&self) -> usize {
        self.workers
            .iter()
            .filter(|w| w.thread.as_ref().is_some_and(|t| !t.is_finished()))
            .count()
    }
}

mod reload;

use reload::{cut, cut_both, Cut, Pending, Place};
