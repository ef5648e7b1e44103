//! Policies in and out of the running shaper: parse and build a policy with `check`'s
//! diagnostics, replace a direction's scheduler with the new one adopting the old one's state
//! (`Qdisc::adopt`: kept classes keep queue, counters and tokens or estimators, for every discipline),
//! and SIGHUP's reload of the files given at start. An HTB rebuilt from a policy the builder
//! thread compared with the running one takes over in steps instead ([`Shaper::step_adoptions`],
//! each bounded by time and by count, paced by background.rs): the swap itself is O(1), so no
//! reload pauses forwarding for longer than one step. A policy that fails validation changes
//! nothing. Reloads asked over the control socket or by SIGHUP are built on the builder thread
//! (builder.rs) and only installed here, on the loop. See docs/router.md, "Reload".

use crate::background::{Kind, Piece};
use crate::builder::{self, sched_of, Asker, Built, Failure, Job, Plan, Ready, Source, Text};
use crate::control::dispatch::rejected;
use crate::control::proto::{ErrorKind, ErrorReply, ReloadReport, Response};
use crate::role::Role;
use crate::single::Single;
use crate::{Sched, Shaper};
use linkshare_config::{ConfigError, Policy};
use linkshare_core::Time;

/// Diagnostics of an invalid policy, rendered like `linkshare check`.
pub fn render_config_error(text: &str, e: &ConfigError) -> String {
    // One index of the text for every diagnostic, at most 20 shown per severity.
    let mut s = linkshare_config::render_report(text, &e.diagnostics);
    let n = e.errors().count();
    let w = e.warnings().count();
    s.push_str(&format!(
        "policy is invalid: {n} error{}{}",
        if n == 1 { "" } else { "s" },
        match w {
            0 => String::new(),
            1 => ", 1 warning".to_string(),
            w => format!(", {w} warnings"),
        }
    ));
    s
}

/// Parse and build a policy; `Err` carries the rendered diagnostics.
pub fn load_sched(text: &str, origin: &str) -> Result<(Policy, Sched), String> {
    let p = Policy::parse(text, origin).map_err(|e| render_config_error(text, &e))?;
    let s = sched_of(&p, text)?;
    Ok((p, s))
}

/// The new scheduler takes over the old one's state through `Qdisc::adopt` (every discipline:
/// HTB and CBQ keep kept classes' queues, counters and tokens or estimators; PRIO and DRR their
/// bands' and classes'; any other pair requeues and continues the counters). What the old one
/// dropped on the way is collected and counted.
pub fn adopt_state(new: &mut Sched, old: &mut Sched, now: Time) -> ReloadReport {
    let r = new.q().adopt(old.q(), now);
    let mut dropped = r.dropped_packets;
    while old.q().take_dropped().is_some() {
        dropped += 1;
    }
    while new.q().take_dropped().is_some() {
        dropped += 1;
    }
    ReloadReport {
        kept: r.kept.len() as u64,
        kept_names: r.kept,
        added: r.added,
        removed: r.removed,
        moved_packets: r.moved_packets,
        reclassified: r.reclassified,
        dropped_packets: dropped,
        ..ReloadReport::default()
    }
}

/// The answer to a reload that a newer one of the same direction replaced before it was built.
pub(crate) fn superseded() -> ErrorReply {
    ErrorReply::new(
        ErrorKind::Superseded,
        "a newer reload of this direction was asked for before this one was built; the newer \
         one is installed instead",
    )
}

impl Failure {
    /// The error reply to a client.
    pub(crate) fn reply(self) -> ErrorReply {
        match self {
            Failure::Io(m) => ErrorReply::new(ErrorKind::Io, m),
            Failure::Rejected(diag) => rejected(diag),
            Failure::Unsupported(m) => ErrorReply::new(ErrorKind::Unsupported, m),
            Failure::Superseded => superseded(),
        }
    }
}

/// What a SIGHUP reload of the file at `path` came to, on stderr (systemd's journal).
pub(crate) fn report_hangup(
    outcome: &Result<ReloadReport, ErrorReply>,
    path: Option<&std::path::Path>,
) {
    match outcome {
        Ok(_) => eprintln!(
            "linkshare: reloaded {}",
            path.map_or(String::new(), |p| p.display().to_string())
        ),
        Err(e) => eprintln!(
            "{}\nlinkshare: kept the running policy",
            e.diagnostics.as_deref().unwrap_or(&e.message)
        ),
    }
}

impl Shaper<Single> {
    /// Ask for direction `d`'s policy to be replaced by `src`: built on the builder thread
    /// (builder.rs) and installed by [`Shaper::take_builds`] when ready, then `asker` is
    /// answered. If the builder thread is gone, the build runs here.
    pub(crate) fn start_reload(&mut self, d: usize, asker: Asker, source: Source) {
        let job = Job {
            dir: d,
            asker,
            source,
        };
        if let Err(job) = self.role.builder.submit(job) {
            let built = builder::build(job);
            self.finish_reload(built);
        }
    }

    /// Install the builds the builder thread has finished, answering who asked for each.
    pub(crate) fn take_builds(&mut self) {
        for b in self.role.builder.finished() {
            self.finish_reload(b);
        }
    }

    fn finish_reload(&mut self, b: Built) {
        let outcome = self.complete(b.dir, b.result);
        match b.asker {
            Asker::Client(id) => {
                let resp = match outcome {
                    Ok(r) => Response::Reloaded(r),
                    Err(e) => Response::Error(e),
                };
                if let Some(srv) = self.role.control.as_mut() {
                    srv.reply(id, &resp.to_line(), crate::sys::monotonic_ns());
                }
            }
            Asker::Hangup => {
                report_hangup(&outcome, self.dirs[b.dir].policy_path.as_deref());
                self.role.hangups_pending = self.role.hangups_pending.saturating_sub(1);
                if self.role.hangups_pending == 0 {
                    crate::notify::tell(&format!(
                        "READY=1\nSTATUS=shaping {} -> {}",
                        self.names[0], self.names[1]
                    ));
                }
            }
        }
    }

    /// Install a finished build on direction `d` (the new scheduler adopts the old one's
    /// state), or count its failure; on failure the running policy is untouched.
    pub(crate) fn complete(
        &mut self,
        d: usize,
        built: Result<Ready, Failure>,
    ) -> Result<ReloadReport, ErrorReply> {
        let ready = match built {
            Ok(r) => r,
            Err(f) => {
                self.role.reloads.failed += 1;
                return Err(f.reply());
            }
        };
        let now = self.now();
        let based = ready.based;
        let piece = Piece::start();
        let (outcome, garbage) =
            install_ready(&mut self.dirs[d], &self.role.circuits, d, ready, now);
        self.bg.record(Kind::Install, &piece, 0);
        // The builder thread compares the next reload with what runs now: what it built,
        // unless this was built elsewhere or could not be applied.
        if !based || outcome.is_err() {
            self.role.builder.forget(d);
        }
        if !garbage.is_empty() {
            self.role.builder.discard(Box::new(garbage));
        }
        match &outcome {
            Ok(_) => {
                self.role.reloads.ok += 1;
                self.role.copier.restart();
                if let Some(p) = &self.role.plane {
                    p.changed();
                }
            }
            Err(_) => self.role.reloads.failed += 1,
        }
        outcome
    }

    /// SIGHUP: reload every policy file given at start (or last reloaded by path), built off
    /// the loop like a `reload`; systemd hears RELOADING now and READY once all are installed.
    pub(crate) fn on_sighup(&mut self) {
        crate::notify::tell(&crate::notify::reloading_message(crate::sys::monotonic_ns()));
        let paths: Vec<(usize, std::path::PathBuf)> = (0..2)
            .filter_map(|d| self.dirs[d].policy_path.clone().map(|p| (d, p)))
            .collect();
        if paths.is_empty() {
            crate::notify::tell(&format!(
                "READY=1\nSTATUS=shaping {} -> {}",
                self.names[0], self.names[1]
            ));
            return;
        }
        self.role.hangups_pending += paths.len();
        for (d, p) in paths {
            self.start_reload(d, Asker::Hangup, Source::File(p));
        }
    }
}

impl<R: Role> Shaper<R> {
    /// One step of each direction's take-over under way (`Dir::adopt_step`, until
    /// `out_of_time`), the old trees finished with given to the role to free
    /// ([`Role::discard`]: the single shaper's builder thread). The old classes taken over.
    pub(crate) fn step_adoptions(&mut self, out_of_time: &dyn Fn() -> bool) -> usize {
        let now = self.now();
        let mut taken = 0;
        for d in 0..self.dirs.len() {
            let (done, n) = self.dirs[d].adopt_step(now, out_of_time);
            taken += n;
            if let Some(done) = done {
                self.role.discard(Box::new(done));
            }
        }
        taken
    }
}

/// Install a finished build on direction `dir` (`d`): the outcome, and everything the install
/// replaced — the old scheduler or filters, the old policy's text (megabytes at 100,000
/// subscribers) and circuit ids (two allocations a subscriber) — for the caller to free off the
/// loop (its builder thread). O(1) for a rebuilt HTB (taken over in steps), O(changes) for a
/// patch; nothing that grows with the policy is freed here
/// (`nothing_of_a_reload_is_freed_on_the_loop`).
pub(crate) fn install_ready(
    dir: &mut crate::dir::Dir,
    circuits: &crate::circuits::Circuits,
    d: usize,
    ready: Ready,
    now: Time,
) -> (Result<ReloadReport, ErrorReply>, Vec<Box<dyn Send>>) {
    let mut garbage: Vec<Box<dyn Send>> = Vec::new();
    let old_text = match ready.text {
        Text::Whole(..) => dir.policy_text.take(),
        Text::Change(_) => None,
    };
    let (mut outcome, old) = match (ready.plan, ready.text) {
        (Plan::Rebuild(sched), Text::Whole(text, origin)) => {
            let (mut r, old) = dir.install_with(
                sched,
                ready.takeover,
                ready.link,
                (text, origin),
                ready.path,
                now,
            );
            (r.changed, r.omitted.changed) = ready.changed;
            let old: Vec<Box<dyn Send>> = old.into_iter().map(|o| Box::new(o) as _).collect();
            (Ok(r), old)
        }
        (Plan::Patch(p), text) => match dir.apply(*p, text, ready.path, now) {
            Ok((r, old)) => (Ok(r), old),
            Err(m) => (Err(ErrorReply::new(ErrorKind::Other, m)), Vec::new()),
        },
        (Plan::Rebuild(s), Text::Change(_)) => (
            Err(ErrorReply::new(
                ErrorKind::Other,
                "a change by name was built as a new tree (a defect); nothing changed",
            )),
            vec![Box::new(s) as Box<dyn Send>],
        ),
    };
    garbage.extend(old);
    match (&dir.policy_text, old_text) {
        // Not installed (the patch was refused): the running text stays.
        (None, Some(t)) => dir.policy_text = Some(t),
        (_, t) => garbage.extend(t.map(|t| Box::new(t) as Box<dyn Send>)),
    }
    if let Ok(r) = &mut outcome {
        r.path = dir.policy_path.clone();
        if let Some(ids) = ready.circuits {
            if let Some(was) = circuits.set(d, ids) {
                garbage.push(Box::new(was));
            }
        }
    } else if let Some(ids) = ready.circuits {
        garbage.push(Box::new(ids));
    }
    (outcome, garbage)
}

#[cfg(test)]
#[path = "reload_tests.rs"]
mod reload_tests;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn invalid_policy_renders_check_diagnostics() {
        let bad = "qdisc = \"htb\"\ndefault = \"x\"\n[[class]]\nname = \"root\"\nrate = \"fast\"\n";
        let Err(d) = load_sched(bad, "bad.toml") else {
            panic!("accepted an invalid policy")
        };
        assert!(d.contains("bad.toml"), "{d}");
        assert!(d.contains("policy is invalid"), "{d}");
    }
}
