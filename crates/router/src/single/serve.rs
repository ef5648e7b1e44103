//! The single shaper's side of the control plane: each turn it serves the control socket and
//! the stats plane from the loop (single.rs wakes it on their tokens), and it is the
//! [`Handler`] that control/dispatch.rs answers requests with.
//!
//! ## Principles
//! * **Nothing here blocks a turn.** Requests are read and answered without waiting
//!   (control/server.rs); a `reload` is handed to the builder thread (builder.rs) and its
//!   client answered once the build is installed (reload.rs); `stat` goes to the stats plane
//!   (plane.rs), which gets its copy of the counters a bounded piece per turn
//!   (control/copier.rs).
//! * **The protocol does not know the shaper.** control/ parses and answers requests for any
//!   [`Handler`]; what the running single shaper answers (its snapshot, its policy, its
//!   reloads) is here, with the shaper it reads.

use crate::builder::{Asker, Source};
use crate::control::proto::{
    self, Direction, ErrorReply, PolicySource, PolicyText, ReloadReport, Request, Response,
};
use crate::control::snapshot::Snapshot;
use crate::control::{dispatch, respond, Handler};
use crate::single::Single;
use crate::{sys, Shaper};

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
    /// The stats plane rang: write the plane's replies to their clients, and start a copy of
    /// the counters when it asked for one (its pieces are the loop's background work,
    /// background.rs and [`Shaper::copy_piece`]).
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
        self.role.plane = Some(p);
    }

    /// The next piece of the copy under way (copier.rs: at most `budget_ns`, checked every
    /// batch), sent to the plane once complete; the classes this piece copied.
    pub(crate) fn copy_piece(&mut self, budget_ns: u64) -> u64 {
        let Some(p) = self.role.plane.as_ref() else {
            return 0;
        };
        let dirs = [0, 1].map(|d| (self.dirs[d].sched.as_ref(), self.dirs[d].gen));
        if let Some(raw) = self.role.copier.step(dirs, budget_ns) {
            p.send(raw);
        }
        self.role.copier.last_piece()
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
