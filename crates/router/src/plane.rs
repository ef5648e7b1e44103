//! The stats plane: one thread that answers every reader of the counters — `stat` on the
//! control socket, `/metrics`, the dashboard and its `/events` — from snapshots it builds off
//! the datapath, so that no reader, however large its answer or slow its client, costs the
//! forwarding loop more than one copy of the class counters.
//!
//! Principles:
//! * the datapath copies numbers only when asked: the plane sets a flag and rings the loop's
//!   eventfd, the loop copies a bounded piece of the classes at a time, paced, until the copy
//!   is complete (control/copier.rs: no name, no per-class allocation; background.rs: at most
//!   `PIECE_NS` a piece, each followed by a rest) and sends it; nothing is copied while nobody
//!   reads;
//! * HTTP readers within [`MAX_AGE_NS`] of the last copy share it, so a scrape loop or an open
//!   dashboard costs the datapath one copy per [`MAX_AGE_NS`] at most; a control `stat` wants
//!   one at most [`STAT_MAX_AGE_NS`] old (what a command sees follows what just happened);
//! * double-buffered: the plane names, rates and selects from the newest finished snapshot
//!   while the next is being copied, and keeps the one before for paged readers (`seq`);
//! * replies to control clients are built here (selected, serialized) and handed back as text
//!   for the loop's non-blocking server to write; the HTTP endpoints are served entirely here
//!   (their own epoll), with the same bounds as before (http/mod.rs);
//! * the loop never waits for the plane; the plane waits for a copy at most [`COPY_WAIT`] (a
//!   loop that is gone or stopping leaves readers the last snapshot).

use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError, Sender, TryRecvError};
use std::sync::Arc;
use std::time::Duration;

use crate::control::proto::{ErrorKind, ErrorReply, Response};
use crate::control::raw::{Finisher, Raw};
use crate::control::select::Select;
use crate::control::snapshot::Snapshot;
use crate::http::{self, Http};
use crate::sys;

/// HTTP readers (scrapes, the dashboard) within this age of the last copy share it.
pub const MAX_AGE_NS: u64 = 500_000_000;
/// A control `stat` sees the counters at most this old (a command run right after traffic
/// sees that traffic); concurrent requests share one copy.
pub const STAT_MAX_AGE_NS: u64 = 20_000_000;
/// How long the plane waits for the loop's copy before it answers from what it has.
const COPY_WAIT: Duration = Duration::from_secs(2);

const T_INBOX: u64 = 0;
const T_HTTP: u64 = 1;
const T_HTTP_CLIENT: u64 = 2;
const T_WEB: u64 = 3;
const T_WEB_CLIENT: u64 = 4;

/// What the loop sends the plane.
pub(crate) enum ToPlane {
    Copy(Box<Raw>),
    /// The loop applied a change or reload: the next `stat` waits for a copy made after it
    /// (a command sees what the one before it did).
    Changed,
    /// A control client's `stat`, to answer with [`FromPlane`].
    Stat {
        id: u64,
        select: Select,
    },
}

/// The plane's answer to a control client: the reply line, with its line feed (the loop hands
/// it to the client without a copy).
pub(crate) struct FromPlane {
    pub id: u64,
    pub line: String,
}

/// The loop's end of the plane.
pub(crate) struct Plane {
    tx: Sender<ToPlane>,
    rx: Receiver<FromPlane>,
    /// Rung by the plane (replies, or a copy wanted); in the loop's epoll set.
    wake: OwnedFd,
    /// The plane's own eventfd, rung after each message.
    ring: OwnedFd,
    want: Arc<AtomicBool>,
}

impl Plane {
    /// Start the plane's thread, serving `metrics` and `web` when given, on `cpus` when given
    /// (`affinity::helper_cpus`: off the pinned loop's CPU, which it would inherit).
    pub fn start(
        metrics: Option<Http>,
        web: Option<Http>,
        circuits: crate::circuits::Circuits,
        cpus: Option<Vec<usize>>,
    ) -> anyhow::Result<Plane> {
        let wake = sys::eventfd()?;
        let inbox_fd = sys::eventfd()?;
        let (tx, inbox) = channel::<ToPlane>();
        let (outbox, rx) = channel::<FromPlane>();
        let want = Arc::new(AtomicBool::new(false));
        let ring = inbox_fd.try_clone()?;
        let mut t = Thread {
            inbox,
            inbox_fd,
            outbox,
            wake: wake.try_clone()?,
            want: want.clone(),
            fin: Finisher::default(),
            circuits,
            current: None,
            previous: None,
            seq: 0,
            copied_ns: 0,
            pending: Vec::new(),
            http: metrics,
            web,
            gone: false,
        };
        std::thread::Builder::new()
            .name("linkshare-stats".into())
            .spawn(move || {
                crate::builder::block_signals();
                crate::affinity::run_helper_on(cpus.as_deref(), "the stats thread");
                // Its wake-ups (a scrape, a `stat`) never preempt the datapath's turn.
                if let Err(e) = sys::set_batch() {
                    eprintln!("linkshare: warning: the stats thread: {e}");
                }
                if let Err(e) = t.run() {
                    eprintln!("linkshare: the stats thread stopped: {e:#}");
                }
            })?;
        Ok(Plane {
            tx,
            rx,
            wake,
            ring,
            want,
        })
    }

    /// The eventfd the loop watches.
    pub fn fd(&self) -> RawFd {
        self.wake.as_raw_fd()
    }

    /// Hand a control client's `stat` to the plane.
    pub fn ask(&self, id: u64, select: Select) {
        if self.tx.send(ToPlane::Stat { id, select }).is_ok() {
            sys::eventfd_ring(self.ring.as_raw_fd());
        }
    }

    /// The loop's turn when its eventfd rang: the replies ready, and whether a copy is wanted.
    pub fn poll(&self) -> (Vec<FromPlane>, bool) {
        sys::eventfd_clear(self.wake.as_raw_fd());
        let replies = self.rx.try_iter().collect();
        (replies, self.want.swap(false, Ordering::AcqRel))
    }

    /// Tell the plane that the running policy changed; the loop restarts any copy under way
    /// first ([`crate::control::copier::Copier::restart`]), so every copy sent after this
    /// message shows the change.
    pub fn changed(&self) {
        if self.tx.send(ToPlane::Changed).is_ok() {
            sys::eventfd_ring(self.ring.as_raw_fd());
        }
    }

    /// Send a copy made for [`Plane::poll`].
    pub fn send(&self, raw: Raw) {
        if self.tx.send(ToPlane::Copy(Box::new(raw))).is_ok() {
            sys::eventfd_ring(self.ring.as_raw_fd());
        }
    }
}

/// The plane's own state.
struct Thread {
    inbox: Receiver<ToPlane>,
    inbox_fd: OwnedFd,
    outbox: Sender<FromPlane>,
    wake: OwnedFd,
    want: Arc<AtomicBool>,
    fin: Finisher,
    /// Labels the rows with their circuit ids (circuits.rs).
    circuits: crate::circuits::Circuits,
    current: Option<Arc<Snapshot>>,
    previous: Option<Arc<Snapshot>>,
    seq: u64,
    copied_ns: u64,
    pending: Vec<(u64, Select)>,
    http: Option<Http>,
    web: Option<Http>,
    /// The loop is gone: answer from what there is.
    gone: bool,
}

impl Thread {
    fn run(&mut self) -> anyhow::Result<()> {
        let ep = sys::epoll_create()?;
        let ep = ep.as_raw_fd();
        sys::epoll_add(ep, self.inbox_fd.as_raw_fd(), T_INBOX)?;
        if let Some(h) = &mut self.http {
            sys::epoll_add(ep, h.listen_fd(), T_HTTP)?;
            h.attach(ep, T_HTTP_CLIENT);
        }
        if let Some(h) = &mut self.web {
            sys::epoll_add(ep, h.listen_fd(), T_WEB)?;
            h.attach(ep, T_WEB_CLIENT);
        }
        let mut ready = Vec::new();
        loop {
            sys::epoll_wait(ep, &mut ready, (http::TICK_NS / 1_000_000) as i32)?;
            sys::eventfd_clear(self.inbox_fd.as_raw_fd());
            self.drain()?;
            if self.gone && self.http.is_none() && self.web.is_none() {
                return Ok(());
            }
            if !self.pending.is_empty() {
                // A page of a given snapshot (`seq`) is answered from it, without a new copy.
                if self.pending.iter().any(|(_, q)| q.seq.is_none()) {
                    self.fresh(STAT_MAX_AGE_NS);
                }
                for (id, select) in std::mem::take(&mut self.pending) {
                    let mut line = self.answer(&select).to_line();
                    line.push('\n');
                    if self.outbox.send(FromPlane { id, line }).is_ok() {
                        sys::eventfd_ring(self.wake.as_raw_fd());
                    }
                }
            }
            let now = sys::monotonic_ns();
            let hot = |h: &Option<Http>, a: u64, b: u64| {
                h.as_ref()
                    .is_some_and(|h| ready.iter().any(|t| *t == a || *t == b) || h.due(now))
            };
            if hot(&self.http, T_HTTP, T_HTTP_CLIENT) {
                self.fresh(MAX_AGE_NS);
                let snap = self.latest();
                if let Some(h) = &mut self.http {
                    h.serve(now, &mut |req| {
                        http::metrics::route(req, &mut || snap.clone())
                    });
                }
            }
            if hot(&self.web, T_WEB, T_WEB_CLIENT) {
                self.fresh(MAX_AGE_NS);
                let snap = self.latest();
                if let Some(h) = &mut self.web {
                    http::web::serve_turn(h, &mut || snap.clone());
                }
            }
        }
    }

    /// Take what the loop sent without waiting.
    fn drain(&mut self) -> anyhow::Result<()> {
        loop {
            match self.inbox.try_recv() {
                Ok(m) => self.take(m),
                Err(TryRecvError::Empty) => return Ok(()),
                Err(TryRecvError::Disconnected) => {
                    self.gone = true;
                    return Ok(());
                }
            }
        }
    }

    fn take(&mut self, m: ToPlane) {
        match m {
            ToPlane::Stat { id, select } => self.pending.push((id, select)),
            // The newest copy predates the change: the next `stat` asks for another.
            ToPlane::Changed => self.copied_ns = 0,
            ToPlane::Copy(raw) => {
                let mut snap = self.fin.finish(*raw);
                snap.label_circuits(&self.circuits);
                self.seq += 1;
                snap.seq = self.seq;
                self.previous = self.current.replace(Arc::new(snap));
            }
        }
    }

    /// Make sure the newest snapshot is at most `max_age` ns old: ask the loop for a copy and
    /// wait for it (at most [`COPY_WAIT`]).
    fn fresh(&mut self, max_age: u64) {
        let now = sys::monotonic_ns();
        if self.gone || (self.current.is_some() && now - self.copied_ns < max_age) {
            return;
        }
        self.want.store(true, Ordering::Release);
        sys::eventfd_ring(self.wake.as_raw_fd());
        let seq = self.seq;
        let deadline = std::time::Instant::now() + COPY_WAIT;
        while self.seq == seq {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            match self.inbox.recv_timeout(left) {
                Ok(m) => self.take(m),
                Err(RecvTimeoutError::Timeout) => break,
                Err(RecvTimeoutError::Disconnected) => {
                    self.gone = true;
                    break;
                }
            }
        }
        self.copied_ns = sys::monotonic_ns();
    }

    fn latest(&self) -> Arc<Snapshot> {
        self.current.clone().unwrap_or_default()
    }

    /// The reply to a `stat` of `select`.
    fn answer(&self, select: &Select) -> Response {
        let snap = match select.seq {
            None => self.latest(),
            Some(s) => match [&self.current, &self.previous]
                .into_iter()
                .flatten()
                .find(|x| x.seq == s)
            {
                Some(x) => x.clone(),
                None => {
                    return Response::Error(ErrorReply::new(
                        ErrorKind::BadRequest,
                        format!("snapshot {s} is gone (the shaper keeps the last two): start over"),
                    ))
                }
            },
        };
        Response::Stat(Box::new(select.apply(&snap)))
    }
}
