//! Policies are built off the datapath: a reload's file read, parse, `check`, scheduler
//! construction and comparison with the running policy run on one builder thread, and the event
//! loop only installs the finished scheduler (an HTB replacing an HTB: swapped in O(1), then
//! taking over the old tree's state in bounded steps, reload.rs; other kinds: `Qdisc::adopt`,
//! O(classes) moves of state, no parsing). Before, a reload of a
//! 400-class policy stopped forwarding for ~10 ms on the loop thread (docs/soak.md), and the
//! stop grew with the policy: an operator's routine reload of a large policy must not pause
//! every subscriber's traffic.
//!
//! Principles:
//! * one thread, jobs in order, the newest wins: the builds of one direction are installed in
//!   the order they were asked for, and of the jobs of a direction waiting when the thread takes
//!   work only the newest whole policy is built — the others are answered "superseded" at once,
//!   so a burst of reloads costs one build, not a queue of them; a change of one class by name
//!   ([`Source::Change`]) replaces no other and is built unless a whole policy comes after it;
//! * a change, not a tree, when it can be: the thread keeps the policy each direction runs (the
//!   one it last built for it, or the one given at start) and compares the new one with it
//!   (patch.rs); a difference the running HTB can apply in place goes to the loop as a
//!   [`Plan::Patch`], anything else as a new scheduler ([`Plan::Rebuild`]). A change by name is
//!   applied to that policy directly (`Policy::change_rates`): one class's patch, no text;
//! * the loop frees nothing large and matches nothing by name: a rebuild's take-over of the
//!   running tree (which class becomes which, what was added and removed) is found here
//!   ([`Ready::takeover`]), and what a reload replaces (the old scheduler once taken over, the
//!   old filters, the old policy's text and circuit ids) is sent back here to be dropped
//!   ([`Builder::discard`]); the reply names the first `REPORT_NAMES` classes of each list;
//! * nothing here makes the loop wait on the allocator: the thread frees blocks the loop's
//!   thread allocated, so frees coalesce at once here rather than at the loop's next allocation
//!   (`sys::free_blocks_at_once`), and it never calls `malloc_trim`, which holds an arena's
//!   lock for milliseconds (`sys::release_free_memory`);
//! * the loop is woken through an eventfd in its epoll set, and takes finished builds without
//!   blocking ([`Builder::finished`]);
//! * signals stay the loop's: the thread blocks them all (SIGHUP is the loop's signalfd; the
//!   builder, started before the loop blocks it, would otherwise take it and die of it);
//! * nothing a job does can stop the loop: a job that panics is reported as a failed build
//!   (`catch_unwind`), a builder thread that is gone makes every later reload fail with a
//!   message, and the loop never waits for the thread (a reload still being built when the
//!   shaper stops is abandoned, its client told nothing more than a closed socket).

use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::path::PathBuf;
use std::sync::mpsc::{channel, Receiver, Sender, TryRecvError};

use linkshare_config::Policy;
use linkshare_core::units::Rate;

use crate::control::proto::{cap_names, ClassChange};
use crate::patch::{self, Base, Layout, Patch};
use crate::Sched;

/// Who asked for a reload, to answer when it is built.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Asker {
    /// A control client, by its id in the control server.
    Client(u64),
    /// SIGHUP (answered on stderr and to systemd).
    Hangup,
}

/// Where the new policy comes from.
#[derive(Debug)]
pub(crate) enum Source {
    Text {
        text: String,
        origin: String,
    },
    File(PathBuf),
    /// One class's new rates, applied to the direction's running policy.
    Change(ClassChange),
}

/// A reload to build.
#[derive(Debug)]
pub(crate) struct Job {
    pub dir: usize,
    pub asker: Asker,
    pub source: Source,
}

impl Job {
    fn is_change(&self) -> bool {
        matches!(self.source, Source::Change(_))
    }
}

/// What the loop does with a built policy.
pub(crate) enum Plan {
    /// Install this scheduler; it adopts the running one's state.
    Rebuild(Sched),
    /// Apply this difference to the running HTB in place (boxed: a patch carries its adds).
    Patch(Box<Patch>),
}

/// A policy ready to install: how, its link layer and its text.
pub(crate) struct Ready {
    pub plan: Plan,
    pub link: LinkRules,
    /// Whether the builder thread now holds this policy as the direction's running one (a
    /// build made elsewhere does not, and the thread must be told to forget its own).
    pub based: bool,
    /// For a rebuild compared with the running policy: the classes kept whose parameters or
    /// filters changed (a patch names its own), the first `REPORT_NAMES` of them, and how many
    /// more.
    pub changed: (Vec<String>, u64),
    /// For a rebuild of an HTB compared with the running HTB policy: how the new tree takes
    /// over the running one in steps (patch.rs), found here rather than on the loop.
    pub takeover: Option<patch::Takeover>,
    /// The new policy's text and origin; for a change by name, the change (the running text
    /// stays, with the change recorded beside it).
    pub text: Text,
    /// The file it was read from (`reload FILE`, SIGHUP), to reload again on SIGHUP.
    pub path: Option<PathBuf>,
    /// The new policy's circuit ids (circuits.rs); `None` for a change by name (they stay).
    pub circuits: Option<std::sync::Arc<crate::circuits::Ids>>,
}

/// What a built policy's text is.
pub(crate) enum Text {
    /// A whole policy: its text and origin.
    Whole(String, String),
    /// The running policy with this change.
    Change(ClassChange),
}

/// A finished job: the policy, or why it cannot be installed (read error or `check`'s
/// diagnostics, rendered).
pub(crate) struct Built {
    pub dir: usize,
    pub asker: Asker,
    pub result: Result<Ready, Failure>,
}

/// Why a build failed.
#[derive(Debug)]
pub(crate) enum Failure {
    /// The file could not be read.
    Io(String),
    /// The policy is invalid (`check`'s diagnostics).
    Rejected(String),
    /// A change by name with no running policy to apply it to (`--workers`, or the last
    /// policy was not built here): the client sends the edited text instead.
    Unsupported(String),
    /// A newer reload of the same direction was asked for before this one was built.
    Superseded,
}

/// What the loop sends the builder thread.
enum Msg {
    Build(Job),
    /// The policy direction `dir` runs now (at start).
    Base(usize, Box<Policy>),
    /// Direction `dir` was given a policy the thread did not build: compare the next one with
    /// nothing (a rebuild).
    Forget(usize),
    /// Something the loop replaced, to be freed here.
    Discard(Box<dyn Send>),
}

/// The builder thread's two ends, as the loop holds them.
pub(crate) struct Builder {
    jobs: Option<Sender<Msg>>,
    done: Receiver<Built>,
    wake: OwnedFd,
}

impl Builder {
    /// Start the builder thread. With `patching`, reloads that an HTB can apply in place come
    /// back as [`Plan::Patch`] (the single-threaded shaper); without, always as a new scheduler.
    ///
    /// `cpus`: the CPUs it runs on (`affinity::helper_cpus`: off the pinned datapath's), or
    /// where the kernel puts it.
    pub fn start(patching: bool, cpus: Option<Vec<usize>>) -> std::io::Result<Builder> {
        let wake = crate::sys::eventfd()?;
        // This thread frees what the loop's thread allocated (the policy and tree built at
        // start): with glibc's fast bins the loop would then do the coalescing.
        crate::sys::free_blocks_at_once();
        let (jobs, inbox) = channel::<Msg>();
        let (outbox, done) = channel::<Built>();
        // The thread writes to its own duplicate, so closing ours never races with it.
        let ring = wake.try_clone()?;
        std::thread::Builder::new()
            .name("linkshare-build".into())
            .spawn(move || {
                block_signals();
                crate::affinity::run_helper_on(cpus.as_deref(), "the policy builder thread");
                let mut bases: [Option<Base>; 2] = [None, None];
                while let Ok(first) = inbox.recv() {
                    let batch: Vec<Msg> = std::iter::once(first).chain(inbox.try_iter()).collect();
                    for built in take_batch(batch, &mut bases, patching) {
                        if outbox.send(built).is_err() {
                            return;
                        }
                        crate::sys::eventfd_ring(ring.as_raw_fd());
                    }
                }
            })?;
        Ok(Builder {
            jobs: Some(jobs),
            done,
            wake,
        })
    }

    /// The eventfd to watch for `EPOLLIN`: readable when builds are finished.
    pub fn fd(&self) -> RawFd {
        self.wake.as_raw_fd()
    }

    /// Queue a job. `Err` gives it back when the builder thread is gone.
    pub fn submit(&mut self, job: Job) -> Result<(), Job> {
        match self.send(Msg::Build(job)) {
            Ok(()) => Ok(()),
            Err(Msg::Build(job)) => Err(job),
            Err(_) => unreachable!("send gives back what it was given"),
        }
    }

    /// Tell the thread the policy direction `dir` runs (at start), to compare reloads with.
    pub fn set_base(&mut self, dir: usize, policy: Policy) {
        let _ = self.send(Msg::Base(dir, Box::new(policy)));
    }

    /// Tell the thread direction `dir` runs a policy it did not build.
    pub fn forget(&mut self, dir: usize) {
        let _ = self.send(Msg::Forget(dir));
    }

    /// Free `x` on the builder thread (here if the thread is gone).
    pub fn discard(&mut self, x: Box<dyn Send>) {
        let _ = self.send(Msg::Discard(x));
    }

    fn send(&mut self, m: Msg) -> Result<(), Msg> {
        match &self.jobs {
            Some(tx) => tx.send(m).map_err(|e| {
                self.jobs = None;
                e.0
            }),
            None => Err(m),
        }
    }

    /// The builds finished so far, without waiting; clears the eventfd.
    pub fn finished(&mut self) -> Vec<Built> {
        crate::sys::eventfd_clear(self.wake.as_raw_fd());
        let mut out = Vec::new();
        loop {
            match self.done.try_recv() {
                Ok(b) => out.push(b),
                Err(TryRecvError::Empty) | Err(TryRecvError::Disconnected) => return out,
            }
        }
    }
}

/// Block every signal in the calling thread: SIGHUP and SIGTERM are the loop's (its signalfd),
/// and a signal delivered to this thread instead would take the default action — SIGHUP kills
/// the process.
pub(crate) fn block_signals() {
    // SAFETY: `set` is initialised by sigfillset before use; the old mask is not requested.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut set);
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
    }
}

/// One batch of messages, in order: bases set or forgotten, things freed, and of the whole
/// policies of each direction only the newest built (the others superseded), with the changes
/// by name asked after it (each changes one class: none replaces another).
fn take_batch(batch: Vec<Msg>, bases: &mut [Option<Base>; 2], patching: bool) -> Vec<Built> {
    let mut newest = [None, None];
    for (i, m) in batch.iter().enumerate() {
        if let Msg::Build(j) = m {
            if let (Some(n), false) = (newest.get_mut(j.dir), j.is_change()) {
                *n = Some(i);
            }
        }
    }
    let wanted = |i: usize, j: &Job| match newest.get(j.dir) {
        Some(&Some(n)) => i == n || (j.is_change() && i > n),
        _ => true,
    };
    let mut out = Vec::new();
    for (i, m) in batch.into_iter().enumerate() {
        match m {
            Msg::Build(job) if !wanted(i, &job) => out.push(Built {
                dir: job.dir,
                asker: job.asker,
                result: Err(Failure::Superseded),
            }),
            Msg::Build(job) => {
                let base = bases.get_mut(job.dir).filter(|_| patching);
                out.push(build_on(job, base));
            }
            Msg::Base(d, p) => {
                if let Some(b) = bases.get_mut(d) {
                    *b = patching.then(|| Base::new(*p));
                }
            }
            Msg::Forget(d) => {
                if let Some(b) = bases.get_mut(d) {
                    *b = None;
                }
            }
            Msg::Discard(x) => drop(x),
        }
    }
    out
}

/// Read, parse, check and build one job's policy (no running policy to compare with).
pub(crate) fn build(job: Job) -> Built {
    build_on(job, None)
}

/// Build one job, as a patch of `base` (the direction's running policy) when that suffices.
/// `base` becomes the new policy when one is built.
fn build_on(job: Job, base: Option<&mut Option<Base>>) -> Built {
    Built {
        dir: job.dir,
        asker: job.asker,
        result: build_now_on(job.source, base),
    }
}

/// Read, parse, check and build a policy. A panic while building (a defect: `check` should have
/// refused the policy) is turned into a rejection, so it cannot kill the shaper.
pub(crate) fn build_now(source: Source) -> Result<Ready, Failure> {
    build_now_on(source, None)
}

pub(crate) fn build_now_on(
    source: Source,
    base: Option<&mut Option<Base>>,
) -> Result<Ready, Failure> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| prepare(source, base))).unwrap_or_else(
        |_| {
            Err(Failure::Rejected(
                "building this policy failed (a defect in linkshare: please report it with the \
                 policy); the running policy stays"
                    .to_string(),
            ))
        },
    )
}

fn prepare(source: Source, base: Option<&mut Option<Base>>) -> Result<Ready, Failure> {
    let (text, origin, path) = match source {
        Source::Change(c) => return prepare_change(c, base),
        Source::Text { text, origin } => (text, origin, None),
        Source::File(p) => {
            let text = std::fs::read_to_string(&p)
                .map_err(|e| Failure::Io(format!("cannot read {}: {e}", p.display())))?;
            (text, p.display().to_string(), Some(p))
        }
    };
    let policy = Policy::parse(&text, &origin)
        .map_err(|e| Failure::Rejected(crate::render_config_error(&text, &e)))?;
    crate::last_good::remember(&text, &origin, &policy);
    let patch = match &base {
        Some(Some(old)) => crate::inplace::plan(old, &policy),
        _ => None,
    };
    let mut changed = (Vec::new(), 0);
    let mut takeover = None;
    let mut layout = None;
    // The reply lists the first few names of each kind of difference (`cap_names`), whatever
    // their number: the loop neither serialises nor frees lists that grow with the policy.
    let plan = match patch {
        Some((mut p, l)) => {
            (p.changed, p.omitted.changed) = cap_names(std::mem::take(&mut p.changed));
            (p.added, p.omitted.added) = cap_names(std::mem::take(&mut p.added));
            (p.removed, p.omitted.removed) = cap_names(std::mem::take(&mut p.removed));
            layout = Some(l);
            Plan::Patch(Box::new(p))
        }
        None => {
            let sched = sched_of(&policy, &text).map_err(Failure::Rejected)?;
            if let Some(Some(old)) = &base {
                changed = cap_names(patch::changed_by_name(&old.policy, &policy));
                let htbs = old.policy.kind_name() == "htb" && matches!(sched, Sched::Htb(_));
                takeover = htbs.then(|| {
                    let mut t = patch::takeover(old, &policy);
                    (t.added, t.omitted.added) = cap_names(std::mem::take(&mut t.added));
                    (t.removed, t.omitted.removed) = cap_names(std::mem::take(&mut t.removed));
                    t
                });
            }
            Plan::Rebuild(sched)
        }
    };
    let link = LinkRules::of(&policy);
    let circuits = Some(crate::circuits::ids_of(&policy));
    let based = match base {
        Some(b) => {
            let layout = layout.unwrap_or_else(|| Layout::of(&policy));
            *b = Some(Base { policy, layout });
            true
        }
        None => false,
    };
    Ok(Ready {
        plan,
        link,
        based,
        changed,
        takeover,
        text: Text::Whole(text, origin),
        path,
        circuits,
    })
}

/// One class's new rates applied to the running policy `base` (which becomes the changed
/// one): a patch of that class alone, without any text. O(siblings) after the name's look-up.
fn prepare_change(c: ClassChange, base: Option<&mut Option<Base>>) -> Result<Ready, Failure> {
    let Some(Some(base)) = base else {
        return Err(Failure::Unsupported(
            "this shaper does not hold its running policy to change a class by name; send the              edited policy text"
                .to_string(),
        ));
    };
    let rate = |what: &str, v: &Option<String>| -> Result<Option<Rate>, Failure> {
        v.as_deref()
            .map(|t| {
                Rate::parse(t).map_err(|e| {
                    Failure::Rejected(format!("class `{}`: {what} `{t}`: {e}", c.class))
                })
            })
            .transpose()
    };
    let (r, cl) = (rate("rate", &c.rate)?, rate("ceil", &c.ceil)?);
    let id = base
        .policy
        .change_rates(&c.class, r, cl)
        .map_err(Failure::Rejected)?;
    Ok(Ready {
        plan: Plan::Patch(Box::new(patch::one_class(base, id))),
        link: LinkRules::of(&base.policy),
        based: true,
        changed: (Vec::new(), 0),
        takeover: None,
        text: Text::Change(c),
        path: None,
        circuits: None,
    })
}

/// Build a parsed policy's scheduler; `Err` carries the rendered diagnostics (`text` is the
/// policy's, for their excerpts).
pub(crate) fn sched_of(p: &Policy, text: &str) -> Result<Sched, String> {
    Ok(if p.kind_name() == "htb" {
        Sched::Htb(Box::new(
            p.build_htb()
                .map_err(|e| crate::render_config_error(text, &e))?,
        ))
    } else {
        Sched::Other(
            p.build()
                .map_err(|e| crate::render_config_error(text, &e))?,
        )
    })
}

/// What a direction's policy says beyond its classes: the link layer under the shaper (tc-stab:
/// a frame is charged `frame::charged_len` under it), what becomes of frames that are not IP
/// (`non_ip`), and whether a packet's DSCP counts and is kept (`trust_dscp`, `wash`:
/// linkshare_core::trust). Installed with the policy's scheduler, on every reload path.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct LinkRules {
    pub(crate) layer: linkshare_core::linklayer::LinkLayer,
    pub(crate) non_ip: linkshare_config::NonIp,
    pub(crate) dscp: linkshare_core::trust::DscpTrust,
}

impl LinkRules {
    pub(crate) fn of(p: &linkshare_config::Policy) -> LinkRules {
        LinkRules {
            layer: p.link_layer(),
            non_ip: p.non_ip(),
            dscp: p.dscp_trust(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ONE: &str =
        "qdisc = \"htb\"\ndefault = \"a\"\n[[class]]\nname = \"a\"\nrate = \"1mbit\"\n";

    fn wait(b: &mut Builder, n: usize) -> Vec<Built> {
        let mut got = Vec::new();
        let t0 = std::time::Instant::now();
        while got.len() < n {
            assert!(t0.elapsed().as_secs() < 10, "the builder did not answer");
            let mut pfd = libc::pollfd {
                fd: b.fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one valid pollfd.
            unsafe { libc::poll(&mut pfd, 1, 100) };
            got.extend(b.finished());
        }
        got
    }

    fn job(dir: usize, id: u64, text: &str) -> Job {
        Job {
            dir,
            asker: Asker::Client(id),
            source: Source::Text {
                text: text.to_string(),
                origin: format!("p{id}.toml"),
            },
        }
    }

    /// Jobs one at a time are each built and answered in order, through the eventfd.
    #[test]
    fn jobs_are_built_in_order_and_wake_the_loop() {
        let mut b = Builder::start(false, None).unwrap();
        let mut got = Vec::new();
        for (i, text) in [ONE, "qdisc = \"htb\"\n[[class]]\nname = 1\n", ONE]
            .iter()
            .enumerate()
        {
            b.submit(job(0, i as u64, text)).unwrap();
            got.extend(wait(&mut b, 1));
        }
        let askers: Vec<Asker> = got.iter().map(|g| g.asker).collect();
        assert_eq!(
            askers,
            [Asker::Client(0), Asker::Client(1), Asker::Client(2)]
        );
        assert!(got[0].result.is_ok());
        match &got[1].result {
            Err(Failure::Rejected(d)) => assert!(d.contains("p1.toml"), "{d}"),
            Err(e) => panic!("wrong failure {e:?}"),
            Ok(_) => panic!("an invalid policy was built"),
        }
        assert!(got[2].result.is_ok());
    }

    /// Of the jobs waiting together, only the newest of each direction is built; the others
    /// are answered `Superseded`, in the order asked.
    #[test]
    fn only_the_newest_waiting_job_of_a_direction_is_built() {
        let bad = "qdisc = \"htb\"\n[[class]]\nname = 1\n";
        let batch = vec![
            Msg::Build(job(0, 0, ONE)),
            Msg::Build(job(0, 1, bad)),
            Msg::Build(job(1, 2, ONE)),
            Msg::Build(job(0, 3, ONE)),
        ];
        let got = take_batch(batch, &mut [None, None], true);
        let askers: Vec<Asker> = got.iter().map(|g| g.asker).collect();
        assert_eq!(askers, (0..4).map(Asker::Client).collect::<Vec<_>>());
        assert!(matches!(got[0].result, Err(Failure::Superseded)));
        assert!(matches!(got[1].result, Err(Failure::Superseded)));
        assert!(got[2].result.is_ok() && got[3].result.is_ok());
    }

    /// With the running policy known, a rate change comes back as a patch and becomes the new
    /// base; so does a class added (in place, inplace.rs); forgetting the base makes the next
    /// one a rebuild.
    #[test]
    fn a_change_against_the_running_policy_is_a_patch() {
        let two = |rate: &str, extra: &str| {
            format!(
                "qdisc = \"htb\"\ndefault = \"a\"\n[[class]]\nname = \"r\"\nrate = \
                 \"10mbit\"\n[[class]]\nname = \"a\"\nparent = \"r\"\nrate = \"{rate}\"\n{extra}"
            )
        };
        let mut bases = [None, None];
        let base = Policy::parse(&two("1mbit", ""), "p.toml").unwrap();
        let plans = |batch: Vec<Msg>, bases: &mut [Option<Base>; 2]| -> Vec<&'static str> {
            take_batch(batch, bases, true)
                .into_iter()
                .map(|b| match b.result {
                    Ok(Ready {
                        plan: Plan::Patch(p),
                        based: true,
                        ..
                    }) if p.changed == ["a"] => "patch a",
                    Ok(Ready {
                        plan: Plan::Patch(_),
                        ..
                    }) => "patch",
                    Ok(Ready {
                        plan: Plan::Rebuild(_),
                        ..
                    }) => "rebuild",
                    Err(_) => "failed",
                })
                .collect()
        };
        let got = plans(
            vec![
                Msg::Base(0, Box::new(base)),
                Msg::Build(job(0, 0, &two("2mbit", ""))),
            ],
            &mut bases,
        );
        assert_eq!(got, ["patch a"]);
        // Compared with the 2 Mbit/s policy now: the same again is an empty patch.
        assert_eq!(
            plans(vec![Msg::Build(job(0, 1, &two("2mbit", "")))], &mut bases),
            ["patch"]
        );
        let added = "[[class]]\nname = \"b\"\nparent = \"r\"\nrate = \"1mbit\"\n";
        assert_eq!(
            plans(
                vec![Msg::Build(job(0, 2, &two("2mbit", added)))],
                &mut bases
            ),
            ["patch"]
        );
        assert_eq!(
            plans(
                vec![Msg::Forget(0), Msg::Build(job(0, 3, &two("3mbit", added)))],
                &mut bases
            ),
            ["rebuild"]
        );
        // Without patching (workers), never a patch.
        let mut none = [None, None];
        let base = Policy::parse(&two("1mbit", ""), "p.toml").unwrap();
        let got = take_batch(
            vec![
                Msg::Base(0, Box::new(base)),
                Msg::Build(job(0, 4, &two("2mbit", ""))),
            ],
            &mut none,
            false,
        );
        assert!(matches!(
            got[0].result,
            Ok(Ready {
                plan: Plan::Rebuild(_),
                ..
            })
        ));
    }

    /// A change by name is applied to the running policy the thread holds: one class's patch,
    /// no text; a bad change leaves that policy as it was; without one it is unsupported.
    #[test]
    fn a_change_by_name_patches_the_running_policy() {
        let text = "qdisc = \"htb\"\ndefault = \"a\"\n[[class]]\nname = \"r\"\nrate = \"10mbit\"\n\
                    [[class]]\nname = \"a\"\nparent = \"r\"\nrate = \"1mbit\"\n\
                    [[class]]\nname = \"b\"\nparent = \"r\"\nrate = \"1mbit\"\n";
        let change = |id: u64, rate: &str| Job {
            dir: 0,
            asker: Asker::Client(id),
            source: Source::Change(ClassChange {
                class: "b".into(),
                rate: Some(rate.into()),
                ceil: None,
            }),
        };
        let base = Policy::parse(text, "p.toml").unwrap();
        let mut bases = [None, None];
        let got = take_batch(
            vec![
                Msg::Base(0, Box::new(base.clone())),
                Msg::Build(change(0, "3mbit")),
            ],
            &mut bases,
            true,
        );
        match &got[0].result {
            Ok(Ready {
                plan: Plan::Patch(p),
                text: Text::Change(c),
                based: true,
                ..
            }) => {
                assert_eq!(p.changed, ["b"]);
                assert_eq!(p.tunes.len(), 1);
                assert_eq!(p.tunes[0].0, 2);
                assert_eq!(p.tunes[0].1.rate.bits_per_sec(), 3_000_000);
                assert_eq!(c.class, "b");
            }
            _ => panic!("not a patch of b"),
        }
        let held = bases[0].clone().unwrap().policy;
        assert_eq!(held.classes()[2].rate.bits_per_sec(), 3_000_000);
        // Over the parent's rate: rejected, the running policy unchanged.
        let got = take_batch(vec![Msg::Build(change(1, "20mbit"))], &mut bases, true);
        assert!(matches!(&got[0].result, Err(Failure::Rejected(m)) if m.contains("capacity")));
        let got = take_batch(vec![Msg::Build(change(2, "fast"))], &mut bases, true);
        assert!(matches!(&got[0].result, Err(Failure::Rejected(m)) if m.contains("`fast`")));
        assert_eq!(bases[0].as_ref().map(|b| &b.policy), Some(&held));
        // Changes by name waiting together are all built (none replaces another), but a whole
        // policy asked after a change supersedes it.
        let got = take_batch(
            vec![
                Msg::Build(change(4, "2mbit")),
                Msg::Build(change(5, "4mbit")),
                Msg::Build(job(0, 6, text)),
                Msg::Build(change(7, "5mbit")),
            ],
            &mut bases,
            true,
        );
        let ok: Vec<bool> = got.iter().map(|b| b.result.is_ok()).collect();
        assert!(matches!(got[0].result, Err(Failure::Superseded)));
        assert_eq!(ok, [false, false, true, true]);
        assert_eq!(
            bases[0].as_ref().unwrap().policy.classes()[2]
                .rate
                .bits_per_sec(),
            5_000_000
        );
        // No running policy held (workers, or forgotten): the client must send the text.
        let got = take_batch(
            vec![Msg::Forget(0), Msg::Build(change(3, "2mbit"))],
            &mut bases,
            true,
        );
        assert!(matches!(got[0].result, Err(Failure::Unsupported(_))));
    }

    /// A rebuild compared with the running HTB policy carries its take-over, found on the
    /// builder thread; without a running policy to compare with, none (taken over at once).
    #[test]
    fn a_rebuild_against_the_running_policy_carries_its_takeover() {
        let text = |extra: &str| {
            format!(
                "qdisc = \"htb\"\ndefault = \"a\"\n[[class]]\nname = \"r\"\nrate = \
                 \"10mbit\"\n[[class]]\nname = \"a\"\nparent = \"r\"\nrate = \"1mbit\"\n{extra}"
            )
        };
        // `a` moves to prio 1 (the key lands in its table): not in place.
        let added = "prio = 1\n[[class]]\nname = \"b\"\nparent = \"r\"\nrate = \"1mbit\"\n";
        let base = Policy::parse(&text(""), "p.toml").unwrap();
        let mut bases = [None, None];
        let got = take_batch(
            vec![
                Msg::Base(0, Box::new(base)),
                Msg::Build(job(0, 0, &text(added))),
            ],
            &mut bases,
            true,
        );
        match &got[0].result {
            Ok(Ready {
                plan: Plan::Rebuild(_),
                takeover: Some(t),
                ..
            }) => {
                assert_eq!(t.added, ["b"]);
                assert!(t.removed.is_empty());
                assert_eq!((t.kept, t.root_ceil), (2, 10_000_000));
            }
            _ => panic!("not a rebuild with its take-over"),
        }
        let got = take_batch(
            vec![Msg::Forget(0), Msg::Build(job(0, 1, &text("")))],
            &mut bases,
            true,
        );
        assert!(matches!(
            got[0].result,
            Ok(Ready {
                plan: Plan::Rebuild(_),
                takeover: None,
                ..
            })
        ));
    }

    #[test]
    fn a_missing_file_is_an_io_failure() {
        let mut b = Builder::start(false, None).unwrap();
        b.submit(Job {
            dir: 1,
            asker: Asker::Hangup,
            source: Source::File(PathBuf::from("/nonexistent/linkshare/p.toml")),
        })
        .unwrap();
        let got = wait(&mut b, 1);
        assert_eq!(got[0].dir, 1);
        match &got[0].result {
            Err(Failure::Io(m)) => assert!(m.contains("/nonexistent/linkshare/p.toml"), "{m}"),
            _ => panic!("expected an I/O failure"),
        }
    }
}
