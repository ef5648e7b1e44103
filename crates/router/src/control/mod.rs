//! The control protocol, both ends: typed messages ([`proto`]: `Request`, `Response`, versioned,
//! one JSON object per line each way over a Unix socket; `stat` answers with a [`Snapshot`]). The
//! shaper serves it from its event loop through [`server::Server`], which never blocks and bounds
//! every client (see there); [`dispatch`] turns request lines into responses for any
//! [`Handler`] — the running shaper (here) or an [`Offline`] one (tests, fuzzing). The client
//! side is [`call`]. Wire format and an example session: docs/router.md, "Control protocol".

pub(crate) mod copier;
pub mod dispatch;
pub mod proto;
pub(crate) mod raw;
pub mod select;
pub mod server;
pub mod snapshot;
pub(crate) mod stat;

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;

use anyhow::Context;

use crate::builder::{Asker, Source};
use crate::single::Single;
use crate::{sys, Shaper};

pub use dispatch::{answer, respond, Handler, Offline};
pub use proto::{
    ClassChange, Direction, Envelope, ErrorKind, ErrorReply, Hello, PolicySource, PolicyText,
    ReloadReport, Request, Response,
};
pub use select::{Select, TopBy};
pub use server::{ControlStats, Server, MAX_REPLY, MAX_REQUEST};
pub use snapshot::Snapshot;

impl Shaper<Single> {
    /// One turn of the control plane: accept, read, answer complete requests, write what the
    /// clients take. Never blocks.
    pub(crate) fn serve_control(&mut self) {
        let Some(mut srv) = self.role.control.take() else {
            return;
        };
        let now = sys::monotonic_ns();
        let reqs = srv.poll(now);
        self.role.control_stats = srv.stats;
        let mut reloads = Vec::new();
        for (id, line) in reqs {
            let resp = match proto::parse_request(&line) {
                // Built off the loop (builder.rs); the client is answered once it is installed.
                Ok(Request::Reload { direction, source }) => {
                    srv.defer(id);
                    reloads.push((direction.index(), id, source_of(source)));
                    continue;
                }
                // Answered by the stats plane (plane.rs), off the loop.
                Ok(Request::Stat { select }) if self.role.plane.is_some() => {
                    srv.defer(id);
                    if let Some(p) = &self.role.plane {
                        p.ask(id, select);
                    }
                    continue;
                }
                Ok(req) => respond(self, req),
                Err(e) => Response::Error(e),
            };
            srv.reply(id, &resp.to_line(), sys::monotonic_ns());
        }
        self.role.control = Some(srv);
        for (d, id, src) in reloads {
            self.start_reload(d, Asker::Client(id), src);
        }
    }
}

impl Shaper<Single> {
    /// The stats plane rang (or a copy under way rang for its next piece): write the plane's
    /// replies to their clients, start a copy of the counters when it asked for one, and copy
    /// the next piece of it (copier.rs: bounded per turn; the plane gets it once complete).
    pub(crate) fn serve_plane(&mut self) {
        let Some(p) = self.role.plane.take() else {
            return;
        };
        let (replies, copy) = p.poll();
        if let Some(srv) = self.role.control.as_mut() {
            for r in replies {
                srv.reply_line(r.id, r.line, sys::monotonic_ns());
            }
        }
        if copy && !self.role.copier.busy() {
            let frame = self.stat_frame();
            self.role.copier.start(frame);
        }
        if self.role.copier.busy() {
            let dirs = [0, 1].map(|d| (self.dirs[d].sched.as_ref(), self.dirs[d].gen));
            match self.role.copier.step(dirs, copier::BUDGET_NS) {
                Some(raw) => p.send(raw),
                None => p.again(),
            }
        }
        self.role.plane = Some(p);
    }
}

impl Handler for Shaper<Single> {
    fn snapshot(&mut self) -> Snapshot {
        self.stat()
    }

    fn policy(&self, d: Direction) -> Result<PolicyText, ErrorReply> {
        let dir = &self.dirs[d.index()];
        match &dir.policy_text {
            Some((text, origin)) if dir.sched.is_some() => Ok(PolicyText {
                direction: d,
                text: text.clone(),
                origin: origin.clone(),
                path: dir.policy_path.clone(),
                changes: dir.changes.clone(),
            }),
            _ => Err(dispatch::unshaped(d)),
        }
    }

    /// The synchronous form (an in-process caller): built here, then installed. The socket's
    /// reloads go through the builder thread instead (`serve_control`).
    fn reload(&mut self, d: Direction, src: PolicySource) -> Result<ReloadReport, ErrorReply> {
        let built = crate::builder::build_now(source_of(src));
        self.complete(d.index(), built)
    }
}

/// Where a `reload` request's policy comes from, for the builder thread.
fn source_of(p: PolicySource) -> Source {
    match p {
        PolicySource::Text { text, origin } => Source::Text { text, origin },
        PolicySource::File { path } => Source::File(path),
        PolicySource::Change(c) => Source::Change(c),
    }
}

/// How long a client waits for a reply.
const REPLY_WAIT: std::time::Duration = std::time::Duration::from_secs(5);
/// How long a client waits for a reload's reply: a 1,000,000-subscriber policy is parsed,
/// checked and built in under a minute on a quiet machine.
const RELOAD_REPLY_WAIT: std::time::Duration = std::time::Duration::from_secs(300);

/// Send one request to a running shaper and return its response (an `error` response is `Ok`:
/// the caller decides; a socket, size or version problem is `Err`).
pub fn call(control: &Path, req: &Request) -> anyhow::Result<Response> {
    let line = serde_json::to_string(&Envelope::new(req)).context("cannot encode the request")?;
    if line.len() > MAX_REQUEST {
        anyhow::bail!(
            "request of {} bytes is longer than the control socket takes ({MAX_REQUEST}); \
             reload a policy this large by path (SIGHUP or `reload` of the file given at start)",
            line.len()
        );
    }
    let mut s = UnixStream::connect(control)
        .with_context(|| format!("no shaper listening on {}", control.display()))?;
    // A reload is answered once built, off the loop: a large policy on a busy machine takes
    // longer than any other request.
    let wait = match req {
        Request::Reload { .. } => RELOAD_REPLY_WAIT,
        _ => REPLY_WAIT,
    };
    s.set_read_timeout(Some(wait))?;
    s.set_write_timeout(Some(REPLY_WAIT))?;
    writeln!(s, "{line}")?;
    let mut reply = String::new();
    // The reply is one line of at most MAX_REPLY bytes (plus its newline and slack).
    BufReader::new(s.take(MAX_REPLY as u64 + 1024))
        .read_line(&mut reply)
        .with_context(|| {
            format!(
                "no reply from the shaper on {} within {} s",
                control.display(),
                wait.as_secs()
            )
        })?;
    if reply.is_empty() {
        anyhow::bail!("the shaper closed the connection without a reply");
    }
    proto::parse_response(reply.trim_end()).map_err(|e| anyhow::anyhow!("{e}"))
}

/// `call`, for a reply other than `error` (which becomes the `Err`, kind and message).
pub fn call_ok(control: &Path, req: &Request) -> anyhow::Result<Response> {
    match call(control, req)? {
        Response::Error(e) => Err(anyhow::Error::new(ShaperError(e))),
        r => Ok(r),
    }
}

/// The running shaper's snapshot (`stat`), every class: fetched page by page
/// ([`select::MAX_PAGE`] classes per direction each) from one snapshot.
pub fn stat(control: &Path) -> anyhow::Result<Snapshot> {
    stat_select(control, &Select::default())
}

/// The classes `select` picks from the running shaper's snapshot; without a `limit` or `top`,
/// every page of one snapshot (its `seq`), appended.
pub fn stat_select(control: &Path, select: &Select) -> anyhow::Result<Snapshot> {
    let fullest = |s: &Snapshot| s.directions.iter().map(|d| d.classes.len()).max();
    let mut out = stat_page(control, select.clone())?;
    if select.limit.is_some() || select.top.is_some() {
        return Ok(out);
    }
    let mut offset = select.offset;
    let mut got = fullest(&out).unwrap_or(0);
    // A page is full (MAX_PAGE in some direction) until the last one.
    while got >= select::MAX_PAGE {
        offset += got;
        let next = stat_page(
            control,
            Select {
                offset,
                seq: Some(out.seq),
                ..select.clone()
            },
        )?;
        got = fullest(&next).unwrap_or(0);
        for (a, b) in out.directions.iter_mut().zip(next.directions) {
            a.classes.extend(b.classes);
        }
    }
    Ok(out)
}

fn stat_page(control: &Path, select: Select) -> anyhow::Result<Snapshot> {
    match call_ok(control, &Request::Stat { select })? {
        Response::Stat(s) => Ok(*s),
        r => anyhow::bail!("the shaper answered `stat` with {}", reply_name(&r)),
    }
}

/// An `error` reply as an error value (`downcast_ref::<ShaperError>()` reads its kind).
#[derive(Debug)]
pub struct ShaperError(pub ErrorReply);

impl std::fmt::Display for ShaperError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "the shaper refused: {}", self.0)
    }
}

impl std::error::Error for ShaperError {}

/// The `reply` tag of a response, for messages.
pub fn reply_name(r: &Response) -> &'static str {
    match r {
        Response::Hello(_) => "hello",
        Response::Stat(_) => "stat",
        Response::Policy(_) => "policy",
        Response::Reloaded(_) => "reloaded",
        Response::Error(_) => "error",
    }
}
