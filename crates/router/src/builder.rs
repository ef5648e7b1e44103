//! Policies are built off the datapath: a reload's file read, parse, `check` and scheduler
//! construction run on one builder thread, and the event loop only installs the finished
//! scheduler (`Qdisc::adopt`, O(classes) moves of state, no parsing). Before, a reload of a
//! 400-class policy stopped forwarding for ~10 ms on the loop thread (docs/soak.md), and the
//! stop grew with the policy: an operator's routine reload of a large policy must not pause
//! every subscriber's traffic.
//!
//! Principles:
//! * one thread, jobs in order: two reloads of one direction are installed in the order they
//!   were asked for, so the last one asked wins, as when they were synchronous;
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

use crate::{load_sched, Sched};

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
    Text { text: String, origin: String },
    File(PathBuf),
}

/// A reload to build.
#[derive(Debug)]
pub(crate) struct Job {
    pub dir: usize,
    pub asker: Asker,
    pub source: Source,
}

/// A policy ready to install: the parsed policy, its scheduler and its text.
pub(crate) struct Ready {
    pub policy: Policy,
    pub sched: Sched,
    pub text: String,
    pub origin: String,
    /// The file it was read from (`reload FILE`, SIGHUP), to reload again on SIGHUP.
    pub path: Option<PathBuf>,
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
}

/// The builder thread's two ends, as the loop holds them.
pub(crate) struct Builder {
    jobs: Option<Sender<Job>>,
    done: Receiver<Built>,
    wake: OwnedFd,
}

impl Builder {
    /// Start the builder thread.
    pub fn start() -> std::io::Result<Builder> {
        let wake = crate::sys::eventfd()?;
        let (jobs, inbox) = channel::<Job>();
        let (outbox, done) = channel::<Built>();
        // The thread writes to its own duplicate, so closing ours never races with it.
        let ring = wake.try_clone()?;
        std::thread::Builder::new()
            .name("linkshare-build".into())
            .spawn(move || {
                block_signals();
                for job in inbox {
                    let built = build(job);
                    if outbox.send(built).is_err() {
                        return;
                    }
                    crate::sys::eventfd_ring(ring.as_raw_fd());
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
        match &self.jobs {
            Some(tx) => tx.send(job).map_err(|e| {
                self.jobs = None;
                e.0
            }),
            None => Err(job),
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

/// Read, parse, check and build one job's policy.
pub(crate) fn build(job: Job) -> Built {
    Built {
        dir: job.dir,
        asker: job.asker,
        result: build_now(job.source),
    }
}

/// Read, parse, check and build a policy. A panic while building (a defect: `check` should have
/// refused the policy) is turned into a rejection, so it cannot kill the shaper.
pub(crate) fn build_now(source: Source) -> Result<Ready, Failure> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| prepare(source))).unwrap_or_else(
        |_| {
            Err(Failure::Rejected(
                "building this policy failed (a defect in linkshare: please report it with the \
                 policy); the running policy stays"
                    .to_string(),
            ))
        },
    )
}

fn prepare(source: Source) -> Result<Ready, Failure> {
    let (text, origin, path) = match source {
        Source::Text { text, origin } => (text, origin, None),
        Source::File(p) => {
            let text = std::fs::read_to_string(&p)
                .map_err(|e| Failure::Io(format!("cannot read {}: {e}", p.display())))?;
            (text, p.display().to_string(), Some(p))
        }
    };
    let (policy, sched) = load_sched(&text, &origin).map_err(Failure::Rejected)?;
    Ok(Ready {
        policy,
        sched,
        text,
        origin,
        path,
    })
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

    #[test]
    fn jobs_are_built_in_order_and_wake_the_loop() {
        let mut b = Builder::start().unwrap();
        for (i, text) in [ONE, "qdisc = \"htb\"\n[[class]]\nname = 1\n", ONE]
            .iter()
            .enumerate()
        {
            b.submit(Job {
                dir: 0,
                asker: Asker::Client(i as u64),
                source: Source::Text {
                    text: text.to_string(),
                    origin: format!("p{i}.toml"),
                },
            })
            .unwrap();
        }
        let got = wait(&mut b, 3);
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

    #[test]
    fn a_missing_file_is_an_io_failure() {
        let mut b = Builder::start().unwrap();
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
